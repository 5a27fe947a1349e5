#!/usr/bin/env bash
#
# The Debian package, end to end, without touching the host's PostgreSQL:
#
#  1. build: in a clean Debian 12 chroot, install the Build-Depends of
#     debian/control (apt-get build-dep) and build the source and binary
#     packages with dpkg-buildpackage (pg_buildext, dh --with pgxs_loop);
#     check that postgresql-15-aion-wake holds the library, the control file
#     and every install and upgrade script (the Makefile's DATA and every
#     sql/aion_wake--*.sql), and none of the pg_regress inputs beside them
#     in sql/;
#  2. install: in another clean chroot, where the extension was never built
#     (no compiler there), dpkg -i the package and let apt-get install -f
#     bring its dependencies, then run test/package/smoke.sh: a throwaway
#     cluster with shared_preload_libraries = 'aion_wake', CREATE EXTENSION,
#     updates from every shipped version, and a pulse round trip.
#
# Versions come from aion_wake.control (default_version); debian/changelog
# must carry an entry for it.  Prints one line, "package: ok ..." or
# "package: FAILED ..." (after the end of the log or of the smoke test's
# output that explains it), and exits non-zero on failure.  Run as root:
#
#   test/package/run.sh
#
# Chroots live in ${AW_CHROOT_DIR:-/var/tmp/aw-chroots}/package: base (a
# pristine debootstrap, reused; AW_PACKAGE_FRESH=1 makes it again), build
# and install (made from base on every run, removed after a passing run
# unless AW_KEEP_CHROOTS=1), apt-archives (downloaded .debs, shared) and
# out (the built packages).  Bind mounts are always unmounted on exit.
#
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)

pgmajor=15
suite=bookworm
mirror=${AW_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${AW_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
root=${AW_CHROOT_DIR:-/var/tmp/aw-chroots}/package
base=$root/base
build=$root/build
inst=$root/install
archives=$root/apt-archives
out=$root/out
log=$root/run.log
t_start=$SECONDS
step=setup

fail() {
	echo "package: FAILED ($step): $*"
	exit 1
}

# a step whose output went to the log: show its end, then fail
fail_log() {
	echo "== tail of $log"
	tail -40 "$log"
	fail "$@"
}

[ "$(id -u)" = 0 ] || fail "run as root (debootstrap, chroot, mount)"
for tool in debootstrap chroot mount umount dpkg-deb flock git; do
	command -v "$tool" >/dev/null || fail "$tool is not installed"
done

extversion=$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" aion_wake.control)
[ -n "$extversion" ] || fail "no default_version in aion_wake.control"
debversion=$(sed -n "1s/^aion-wake (\([^)]*\)).*/\1/p" debian/changelog)
[ "${debversion%-*}" = "$extversion" ] ||
	fail "debian/changelog is at ${debversion:-?}, aion_wake.control at $extversion: add a changelog entry ($extversion-1)"
pkg=postgresql-$pgmajor-aion-wake
srcname=aion-wake-$extversion

mkdir -p "$root" "$archives/partial" "$out"
exec 9>"$root/.lock"
flock -n 9 || fail "another test/package/run.sh holds $root/.lock"
: >"$log"

# mount points we made, unmounted in reverse order by cleanup
mounts=()

mount_chroot() {
	local dir=$1 m
	for m in proc sys dev dev/pts; do
		mount --bind "/$m" "$dir/$m"
		mounts+=("$dir/$m")
	done
	mount --bind "$archives" "$dir/var/cache/apt/archives"
	mounts+=("$dir/var/cache/apt/archives")
}

unmount_all() {
	local i
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" 2>/dev/null || true
	done
	mounts=()
}

# a directory with anything mounted below it is never removed
remove_chroot() {
	local dir=$1
	[ -e "$dir" ] || return 0
	if grep -q " $dir/" /proc/mounts; then
		fail "$dir still has mounts; not removing it"
	fi
	rm -rf --one-file-system "$dir"
}

cleanup() {
	local rc=$?
	# a server the smoke test left behind (killed) holds /dev busy; signal
	# it only if that process really runs inside the install chroot
	local f pid
	for f in "$inst"/tmp/aw-smoke.*/data/postmaster.pid; do
		[ -f "$f" ] || continue
		pid=$(head -1 "$f")
		[ -n "$pid" ] && [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$inst" ] &&
			kill -QUIT "$pid" 2>/dev/null || true
	done
	unmount_all
	exit $rc
}
trap cleanup EXIT
trap 'fail interrupted' INT TERM

# run a command in a chroot with a clean environment
in_chroot() {
	local dir=$1
	shift
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# a fresh chroot from base: no service starts, no default cluster is made
new_chroot() {
	local dir=$1
	remove_chroot "$dir"
	cp -a "$base" "$dir"
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
	chmod +x "$dir/usr/sbin/policy-rc.d"
	mkdir -p "$dir/etc/postgresql-common/createcluster.d"
	echo 'create_main_cluster = false' >"$dir/etc/postgresql-common/createcluster.d/aw-no-main.conf"
	cp /etc/resolv.conf "$dir/etc/resolv.conf"
	# what an installed Debian 12 follows: the point release, its updates
	# and security updates (PostgreSQL minor releases arrive through these)
	cat >"$dir/etc/apt/sources.list" <<-EOF
		deb $mirror $suite main
		deb $mirror $suite-updates main
		deb $security $suite-security main
	EOF
	# a mirror that answers badly once is asked again
	echo 'Acquire::Retries "3";' >"$dir/etc/apt/apt.conf.d/99aw-retries"
	mount_chroot "$dir"
	in_chroot "$dir" apt-get update -qq >>"$log" 2>&1 || fail_log "apt-get update in $dir"
}

step=debootstrap
if [ "${AW_PACKAGE_FRESH:-0}" = 1 ] || [ ! -f "$base/.aw-complete" ]; then
	remove_chroot "$base"
	remove_chroot "$base.new"
	debootstrap --variant=minbase "$suite" "$base.new" "$mirror" >>"$log" 2>&1 ||
		fail_log "debootstrap $suite"
	touch "$base.new/.aw-complete"
	mv "$base.new" "$base"
fi

# -- 1. build ---------------------------------------------------------------
step=build
t_build=$SECONDS
new_chroot "$build"
mkdir -p "$build/build/$srcname"
# the working tree as git sees it: tracked and new files, nothing ignored
# (safe.directory: .ci/run hands the tree to postgres before it runs this)
git -c safe.directory="$top" ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf - | tar -xf - -C "$build/build/$srcname"
# the upstream tarball a 3.0 (quilt) source package is made from
tar -C "$build/build" --exclude="$srcname/debian" -czf "$build/build/aion-wake_$extversion.orig.tar.gz" "$srcname"

in_chroot "$build" apt-get install -y -qq --no-install-recommends dpkg-dev >>"$log" 2>&1 ||
	fail_log "apt-get install dpkg-dev"
in_chroot "$build" apt-get build-dep -y -qq --no-install-recommends "/build/$srcname" >>"$log" 2>&1 ||
	fail_log "apt-get build-dep: the Build-Depends of debian/control"
[ -x "$build/usr/lib/postgresql/$pgmajor/bin/pg_config" ] ||
	fail "the Build-Depends did not bring PostgreSQL $pgmajor's pg_config"
in_chroot "$build" sh -c "cd /build/$srcname && dpkg-buildpackage -us -uc" >>"$log" 2>&1 ||
	fail_log "dpkg-buildpackage"

deb=$build/build/${pkg}_${debversion}_$(in_chroot "$build" dpkg --print-architecture).deb
[ -f "$deb" ] || fail "no $(basename "$deb") was built: $(cd "$build/build" && echo *.deb)"
[ -f "$build/build/aion-wake_${debversion}.dsc" ] || fail "no source package aion-wake_${debversion}.dsc"

# what the package must hold
files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
data=$(in_chroot "$build" make -s -C "/build/$srcname" -f Makefile -f - \
	PG_CONFIG=/usr/lib/postgresql/$pgmajor/bin/pg_config aw-print-data <<<'aw-print-data: ; @echo $(DATA)') ||
	fail "could not read DATA from the Makefile"
want="/usr/lib/postgresql/$pgmajor/lib/aion_wake.so /usr/share/postgresql/$pgmajor/extension/aion_wake.control"
for f in $data sql/aion_wake--*.sql; do
	want="$want /usr/share/postgresql/$pgmajor/extension/$(basename "$f")"
done
for f in $want; do
	grep -qxF "$f" <<<"$files" || fail "$(basename "$deb") lacks $f"
done
# the pg_regress inputs share sql/ with those scripts; none is installed
for f in sql/*.sql; do
	case $f in sql/aion_wake--*) continue ;; esac
	if grep -qxF "/usr/share/postgresql/$pgmajor/extension/$(basename "$f")" <<<"$files"; then
		fail "$(basename "$deb") ships the test file $f"
	fi
done
rm -f "$out"/*
cp "$build"/build/*.deb "$build"/build/*.dsc "$build"/build/*.orig.tar.gz "$build"/build/*.debian.tar.* "$out/"
t_build=$((SECONDS - t_build))

# -- 2. install and test ----------------------------------------------------
step=install
t_inst=$SECONDS
new_chroot "$inst"
cp "$deb" "$inst/tmp/"
for tool in gcc cc make pg_config; do
	in_chroot "$inst" sh -c "command -v $tool" >/dev/null && fail "$tool is present in the install chroot"
done
# dpkg -i stops at the missing dependencies; apt-get install -f brings them
in_chroot "$inst" dpkg -i "/tmp/$(basename "$deb")" >>"$log" 2>&1 || true
in_chroot "$inst" apt-get install -f -y -qq --no-install-recommends >>"$log" 2>&1 ||
	fail_log "apt-get install -f"
status=$(in_chroot "$inst" dpkg-query -W -f '${db:Status-Status} ${Version}' "$pkg" 2>/dev/null) || true
[ "$status" = "installed $debversion" ] || fail "$pkg is '${status:-not known}' after dpkg -i, apt-get install -f"
owner=$(in_chroot "$inst" dpkg -S "/usr/lib/postgresql/$pgmajor/lib/aion_wake.so" 2>/dev/null) || true
[ "${owner%%:*}" = "$pkg" ] || fail "aion_wake.so does not belong to $pkg (${owner:-no owner})"

step=smoke
cp test/package/smoke.sh "$inst/tmp/aw-smoke.sh"
smoke=$(in_chroot "$inst" bash /tmp/aw-smoke.sh "$pgmajor" "$extversion" 2>&1) || {
	echo "$smoke" | tail -30
	fail "${smoke##*$'\n'}"
}
smoke=${smoke##*$'\n'}
t_inst=$((SECONDS - t_inst))

step=cleanup
unmount_all
if [ "${AW_KEEP_CHROOTS:-0}" != 1 ]; then
	remove_chroot "$build"
	remove_chroot "$inst"
fi

echo "package: ok $pkg $debversion built in a clean $suite chroot (${t_build} s)," \
	"installed with dpkg -i in another (${t_inst} s): ${smoke#smoke: ok }; $((SECONDS - t_start)) s in all, packages in $out"
