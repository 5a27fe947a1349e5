#!/usr/bin/env bash
#
# test/versions/run.sh: build aion_wake and run every suite against each
# PostgreSQL major that Debian ships, each in a Debian chroot of its own.
#
# Why: the host (Debian 12) has PostgreSQL 15 only, and the C code follows
# server APIs that change from one major to the next (include/aw_compat.h
# holds every version test).  A major that is not built with -Werror and
# tested is not supported; this script is how CI and a person check 17,
# 18 and 19 (and 15, in a bookworm chroot) without touching the host's
# PostgreSQL.
#
# Usage (as root, on Debian with debootstrap installed; CI: a fresh
# Debian 12 host, after the PostgreSQL 15 suites):
#   test/versions/run.sh [MAJOR...]        default: 17 18 19
#
#   major  Debian suite              packages from
#   15     bookworm                  bookworm
#   17     trixie                    trixie
#   18     sid                       sid
#   19     sid + experimental        sid; the server, its headers, its
#                                    client, libpq5 and libpq-dev from
#                                    experimental (a blanket -t
#                                    experimental drags a perl that cannot
#                                    install)
#
# For each major, in order, and for all of them even when one fails:
#   1. make or reuse the chroot $AW_CHROOT_DIR/pgNN (default
#      /var/tmp/aw-chroots/pgNN): debootstrap --variant=minbase, a
#      policy-rc.d that exits 101 (no service starts), no "main" cluster;
#      /proc, /sys, /dev and /dev/pts bind-mounted while it is used.  On
#      exit, and at once on a signal, whatever still runs in the chroot
#      (a server a failed test left, say) is stopped and every mount is
#      undone, a killed debootstrap's too.  A chroot is reused once
#      debootstrap has completed in it (.aw-bootstrapped; one that did not
#      is removed and made again); apt runs only when a package is missing
#      (AW_CHROOT_UPGRADE=1 forces an update and upgrade).
#   2. copy the tree this script belongs to into /build/aion_wake in the
#      chroot, afresh: the files git tracks plus untracked ones that are
#      not ignored (without git: the tree less build products);
#   3. build with make PG_CONFIG=/usr/lib/postgresql/NN/bin/pg_config
#      COPT='-Wall -Wextra -Werror' and make install (in the chroot);
#   4. as postgres in the chroot, make installcheck three times, one suite
#      each (pg_regress, isolation, every TAP file), so that one failing
#      suite does not hide the others.
#
# Prints one summary line per suite with the major in it, e.g.
#   PG 18 regress: All 3 tests passed
#   PG 18 isolation: All 2 tests passed
#   PG 18 TAP: Result: PASS (14 files)
#   PG 18 time: 97 s (chroot 0 s, apt 0 s, build 7 s, suites 87 s)
# (chroot: debootstrap, apt: apt-get, both 0 when the chroot is reused);
# on failure the regression.diffs and the tail of each failing TAP file's
# log.  Exits 1 if any major failed (and says which), 2 on a usage error.
# Logs stay in the chroot: /build/log (build, each suite), tmp_check/log
# under /build/aion_wake (TAP), apt.log; debootstrap's is next to it.
#
# Time on this 2-core machine, per major: debootstrap about 30 s and apt
# about 40 s when the chroot is new (nothing when it is reused), the build
# 5 to 30 s, the suites 4.5 to 10 min with 29 TAP files (measured while
# other work shared the cores; 14 TAP files took 85 s on a quiet one).
#
# Environment:
#   AW_CHROOT_DIR      where the chroots live (default /var/tmp/aw-chroots)
#   AW_DEBIAN_MIRROR   default http://deb.debian.org/debian
#   AW_CHROOT_UPGRADE  1: apt-get update and upgrade a reused chroot
#   AW_SUITES          which suites run (default "regress isolation tap";
#                      "none": make the chroot and build only)
#   AW_PROVE_TESTS     TAP files to run (default: the Makefile's, all)
#
# Copyright (c) 2026, aion_wake authors

set -euo pipefail

# The whole script is one compound command, read before it runs, so that
# editing this file during a run does not change the run.
{

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
CHROOT_DIR=${AW_CHROOT_DIR:-/var/tmp/aw-chroots}
MIRROR=${AW_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CHROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if [ "$(id -u)" -ne 0 ]; then
	echo "versions: run as root (it makes chroots and mounts into them)" >&2
	exit 2
fi
if ! command -v debootstrap >/dev/null; then
	echo "versions: debootstrap is needed (apt-get install debootstrap)" >&2
	exit 2
fi
case $CHROOT_DIR in
/*) ;;
*) echo "versions: AW_CHROOT_DIR must be an absolute path" >&2; exit 2 ;;
esac
case $CHROOT_DIR in
*..*) echo "versions: AW_CHROOT_DIR must not contain .." >&2; exit 2 ;;
esac

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(17 18 19)
for m in "${majors[@]}"; do
	case $m in
	15 | 17 | 18 | 19) ;;
	*) echo "versions: unsupported major \"$m\" (15, 17, 18 or 19; Debian ships no 16)" >&2; exit 2 ;;
	esac
done

# ---------------------------------------------------------------------
# Mounts and processes of the chroot in use: always undone at exit.
# ---------------------------------------------------------------------

ROOT=""					# the chroot in use
mounted=()				# what we mounted there, in order
BG_PID=""				# the long step running now (see bg)

# Run a long step (debootstrap, apt, make) in a session of its own, in the
# background, and wait for it: bash runs a trap only once the foreground
# command has ended, so this lets a signal stop the run at once.
bg() {
	local rc=0
	setsid "$@" &
	BG_PID=$!
	wait "$BG_PID" || rc=$?
	BG_PID=""
	return $rc
}

# Stop what still runs in the chroot (a server a failed test left behind
# would keep /dev busy): only processes whose root is this chroot, which
# this script started.
kill_chroot_procs() {
	local root=$1 p r sig any
	for sig in TERM KILL; do
		any=0
		for p in /proc/[0-9]*; do
			r=$(readlink "$p/root" 2>/dev/null) || continue
			if [ "$r" = "$root" ]; then
				kill -s "$sig" "${p#/proc/}" 2>/dev/null || true
				any=1
			fi
		done
		if [ $any = 1 ] && [ $sig = TERM ]; then
			sleep 2
		fi
	done
	return 0
}

# Is anything mounted at or below $1?
has_mounts() {
	awk -v p="$1" '$2 == p || index($2, p "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts
}

# Undo everything in the chroot in use: the step running, what runs in
# it, our mounts, and any mount a killed debootstrap left below it.
umount_all() {
	local i m
	[ -n "$ROOT" ] || return 0
	if [ -n "$BG_PID" ]; then
		kill -s TERM -- "-$BG_PID" 2>/dev/null || true
		BG_PID=""
	fi
	kill_chroot_procs "$ROOT"
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true
	done
	mounted=()
	awk -v p="$ROOT" 'index($2, p "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
		while IFS= read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" || true
		done
	ROOT=""
}

# shellcheck disable=SC2317
cleanup() {
	set +e
	umount_all
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

mount_binds() {
	local root=$1 d
	ROOT=$root
	for d in proc sys dev dev/pts; do
		mkdir -p "$root/$d"
		mount --bind "/$d" "$root/$d" || return 1
		mounted+=("$root/$d")
	done
}

# Run a command in the chroot with a clean environment.
in_chroot() {
	bg chroot "$ROOT" /usr/bin/env -i PATH="$CHROOT_PATH" HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}

# ---------------------------------------------------------------------
# What each major needs.
# ---------------------------------------------------------------------

suite_of() {
	case $1 in
	15) echo bookworm ;;
	17) echo trixie ;;
	18 | 19) echo sid ;;
	esac
}

# sources.list of the chroot
sources_of() {
	local m=$1
	echo "deb $MIRROR $(suite_of "$m") main"
	if [ "$m" = 19 ]; then
		echo "deb $MIRROR experimental main"
	fi
}

# Packages: the server, its headers, the client (pg_regress,
# pg_isolation_regress and the TAP modules PostgreSQL/Test/*.pm are in
# postgresql-client-NN in every major here), what the TAP tests use
# (IPC::Run, prove, PgBouncer for 020_pgbouncer.pl), and the compiler.
packages_of() {
	local m=$1 e=""
	[ "$m" = 19 ] && e=/experimental
	echo "postgresql-$m$e postgresql-server-dev-$m$e postgresql-client-$m$e"
	[ "$m" = 19 ] && echo "libpq5$e libpq-dev$e"
	echo "libipc-run-perl perl pgbouncer make gcc libc6-dev"
}

# ---------------------------------------------------------------------
# One major.
# ---------------------------------------------------------------------

summary=()
failed=()
SUITES=" ${AW_SUITES:-regress isolation tap} "

# Is suite $1 to run?
want() { [[ $SUITES == *" $1 "* ]]; }

say() { echo "== PG $major: $*"; }

# The chroot: make it (debootstrap), or reuse it, and install what is
# missing.  Sets t_chroot and t_apt, the seconds each took.
prepare_chroot() {
	local m=$1 root=$2 suite pkgs p missing=0 t
	suite=$(suite_of "$m")
	pkgs=$(packages_of "$m")

	t=$(date +%s)
	if [ ! -e "$root/.aw-bootstrapped" ]; then
		if [ -e "$root" ]; then
			if has_mounts "$root"; then
				echo "versions: $root is incomplete and has mounts below it; unmount them first" >&2
				return 1
			fi
			say "removing the incomplete chroot $root"
			rm -rf --one-file-system "$root"
		fi
		say "debootstrap --variant=minbase $suite $root (log: $root.debootstrap.log)"
		mkdir -p "$CHROOT_DIR"
		ROOT=$root
		if ! bg debootstrap --variant=minbase "$suite" "$root" "$MIRROR" >"$root.debootstrap.log" 2>&1; then
			tail -30 "$root.debootstrap.log"
			echo "versions: debootstrap of $suite failed" >&2
			return 1
		fi
		sources_of "$m" >"$root/etc/apt/sources.list"
		rm -f "$root/etc/apt/sources.list.d/debian.sources"
		# no service starts in the chroot, and the package makes no cluster
		printf '#!/bin/sh\n# aion_wake test chroot: start no service\nexit 101\n' \
			>"$root/usr/sbin/policy-rc.d"
		chmod 755 "$root/usr/sbin/policy-rc.d"
		mkdir -p "$root/etc/postgresql-common"
		echo "create_main_cluster = false" >"$root/etc/postgresql-common/createcluster.conf"
		# sid's Release file on the mirror may be past its Valid-Until
		echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99aw-no-valid-until"
		printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
			>"$root/etc/apt/apt.conf.d/99aw-no-recommends"
		# the network's name service, for apt
		cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
		touch "$root/.aw-bootstrapped"
	fi
	t_chroot=$(($(date +%s) - t))

	if ! mount_binds "$root"; then
		echo "versions: could not mount /proc, /sys, /dev or /dev/pts in $root" >&2
		return 1
	fi

	t=$(date +%s)
	for p in $pkgs; do
		# shellcheck disable=SC2016
		if [ "$(in_chroot dpkg-query -W -f '${Status}' "${p%/*}" 2>/dev/null)" != "install ok installed" ]; then
			missing=1
		fi
	done
	if [ $missing = 1 ] || [ "${AW_CHROOT_UPGRADE:-0}" = 1 ]; then
		say "apt-get install $pkgs"
		cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
		# a mirror that answers badly once is asked again (written here,
		# not at the debootstrap, so that a reused chroot has it too)
		echo 'Acquire::Retries "3";' >"$root/etc/apt/apt.conf.d/99aw-retries"
		# shellcheck disable=SC2086
		if ! { in_chroot apt-get -q -o Acquire::Check-Valid-Until=false update &&
			{ [ "${AW_CHROOT_UPGRADE:-0}" != 1 ] ||
				in_chroot apt-get -q -y -o Dpkg::Options::=--force-confold upgrade; } &&
			in_chroot apt-get -q -y -o Dpkg::Options::=--force-confold install $pkgs; } \
			>"$root/apt.log" 2>&1; then
			tail -40 "$root/apt.log"
			echo "versions: apt-get in the chroot for $m failed (log: $root/apt.log)" >&2
			return 1
		fi
		in_chroot apt-get -q clean >/dev/null 2>&1 || true
	fi
	t_apt=$(($(date +%s) - t))

	# what the suites need, where PGXS looks for it
	local lib=/usr/lib/postgresql/$m/lib/pgxs/src/test f
	for f in "$lib/perl/PostgreSQL/Test/Cluster.pm" "$lib/isolation/pg_isolation_regress" \
		"$lib/regress/pg_regress" /usr/bin/prove; do
		if [ ! -e "$root$f" ]; then
			echo "versions: $f is missing in the chroot for $m" >&2
			return 1
		fi
	done
}

# Copy the tree to $1 (a fresh directory).
copy_tree() {
	local dest=$1
	mkdir -p "$dest"
	if git -C "$TOP" -c safe.directory="$TOP" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$TOP" && git -c safe.directory="$TOP" ls-files -z -c -o --exclude-standard |
			while IFS= read -r -d '' f; do
				# tracked files deleted in the work tree stay out
				[ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"
			done |
			tar -c --null --no-recursion -T - -f -) |
			tar -C "$dest" -xf -
	else
		tar -C "$TOP" -cf - \
			--exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
			--exclude=tmp_check --exclude=tmp_check_iso --exclude=results \
			--exclude=output_iso --exclude=log --exclude='regression.*' . |
			tar -C "$dest" -xf -
	fi
}

# The closing line of a pg_regress-style run, without the "# " that 16 and
# later put before it, the blanks around it (15) and the full stop.
regress_line() {
	grep -E '(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests (passed|failed))' "$1" |
		tail -1 | sed -E -e 's/^[# ]*//' -e 's/[. ]*$//' || true
}

# run_suite regress|isolation|tap: one suite, by make installcheck as
# postgres with the other suites' variables emptied (PGXS runs a suite when
# its variable is not empty).  Uses run_major's m, root, src, log and
# make_args.
run_suite() {
	local name=$1 label=$1 rc=0 out=$log/$1.out line files f
	local -a vars
	case $name in
	regress) vars=(ISOLATION= TAP_TESTS=) ;;
	isolation) vars=(REGRESS= TAP_TESTS=) ;;
	tap)
		label=TAP
		# PgBouncer is installed: its test must run, not skip
		vars=(REGRESS= ISOLATION= AW_REQUIRE_PGBOUNCER=1)
		[ -z "${AW_PROVE_TESTS:-}" ] || vars+=("PROVE_TESTS=$AW_PROVE_TESTS")
		;;
	esac
	say "$label"
	touch "$out.start"
	in_chroot runuser -u postgres -- "${make_args[@]}" installcheck "${vars[@]}" \
		>"$out" 2>&1 || rc=$?
	cat "$out"
	if [ "$name" = tap ]; then
		files=$(grep -Eo '^Files=[0-9]+' "$out" | tail -1 | cut -d= -f2 || true)
		line=$(grep -E '^Result: ' "$out" | tail -1 || true)
		line=$line${files:+ ($files files)}
	else
		line=$(regress_line "$out")
	fi
	if [ $rc -eq 0 ]; then
		summary+=("PG $m $label: ${line:-passed}")
		return 0
	fi
	summary+=("PG $m $label: FAILED${line:+ ($line)}")
	case $name in
	regress | isolation)
		# pg_regress writes its diffs at the top of the tree, the isolation
		# suite under test/isolation; the instances' data directories and
		# the TAP files are not searched
		while IFS= read -r f; do
			echo "== PG $m: ${f#"$root"}"
			head -300 "$f"
		done < <(find "$root$src" \( -name tmp_check -o -name tmp_check_iso -o \
			-path "$root$src/test/t" \) -prune -o \
			-name regression.diffs -newer "$out.start" -print)
		;;
	tap)
		# the log of each file prove reports as failing
		while IFS= read -r f; do
			f=$root$src/tmp_check/log/regress_log_$(basename "$f" .pl)
			if [ -f "$f" ]; then
				echo "== PG $m: ${f#"$root"} (tail)"
				tail -60 "$f"
			fi
		done < <(sed -n '/^Test Summary Report/,$p' "$out" | grep -Eo '^[^ ]+\.pl' | sort -u)
		;;
	esac
	return 1
}

run_major() {
	local m=$1 root=$CHROOT_DIR/pg$1 pgc t rc log version src=/build/aion_wake
	local make_args
	pgc=/usr/lib/postgresql/$m/bin/pg_config
	make_args=(make -C "$src" PG_CONFIG="$pgc")

	mkdir -p "$CHROOT_DIR"
	if ! exec 9>"$CHROOT_DIR/pg$m.lock"; then
		echo "versions: cannot write $CHROOT_DIR/pg$m.lock" >&2
		return 1
	fi
	if ! flock -n 9; then
		echo "versions: another run uses $root" >&2
		return 1
	fi

	echo "=== PostgreSQL $m ($(suite_of "$m")): chroot $root"
	if ! prepare_chroot "$m" "$root"; then
		summary+=("PG $m: the chroot could not be prepared")
		return 1
	fi
	version=$(in_chroot "$pgc" --version)
	say "$version"

	t=$(date +%s)
	rm -rf --one-file-system "$root/build"
	mkdir -p "$root/build/log"
	if ! copy_tree "$root$src"; then
		echo "versions: could not copy $TOP into $root$src" >&2
		summary+=("PG $m: the tree could not be copied")
		return 1
	fi
	log=$root/build/log
	say "building (log: $log/build.log)"
	rc=0
	{ in_chroot "${make_args[@]}" COPT='-Wall -Wextra -Werror' &&
		in_chroot "${make_args[@]}" install; } >"$log/build.log" 2>&1 || rc=$?
	t_build=$(($(date +%s) - t))
	if [ $rc -ne 0 ]; then
		cat "$log/build.log"
		summary+=("PG $m build: FAILED (-Wall -Wextra -Werror); no suite ran")
		return 1
	fi
	summary+=("PG $m build: ok ($version, -Wall -Wextra -Werror)")
	in_chroot chown -R postgres "$src" /build/log

	t=$(date +%s)
	local ok=1 suite
	for suite in regress isolation tap; do
		if want $suite && ! run_suite $suite; then
			ok=0
		fi
	done
	t_suites=$(($(date +%s) - t))
	[ $ok = 1 ]
}

all_started=$(date +%s)
for major in "${majors[@]}"; do
	started=$(date +%s)
	t_chroot=0 t_apt=0 t_build=0 t_suites=0
	if ! run_major "$major"; then
		failed+=("$major")
	fi
	umount_all
	line="PG $major time: $(($(date +%s) - started)) s (chroot $t_chroot s, apt $t_apt s, build $t_build s, suites $t_suites s)"
	echo "== $line"
	summary+=("$line")
done

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "versions: $(($(date +%s) - all_started)) s in all"
if [ ${#failed[@]} -gt 0 ]; then
	echo "versions: FAILED for PostgreSQL ${failed[*]}"
	exit 1
fi
echo "versions: ok (PostgreSQL ${majors[*]})"
exit 0
}
