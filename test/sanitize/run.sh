#!/usr/bin/env bash
#
# test/sanitize/run.sh: the regression suites against an AddressSanitizer +
# UndefinedBehaviorSanitizer build of aion_wake.
#
# Why: the C code indexes arrays, copies keys and topics into fixed-size
# buffers and walks a hand-made heap; the suites check what it returns, not
# whether it reads or writes out of bounds on the way.  This script builds
# the extension with -fsanitize=address,undefined and runs the suites
# against servers that preload the ASan runtime, so such a bug fails the
# run with a report instead of going unnoticed.
#
# Usage: bash test/sanitize/run.sh        (as root or as postgres; as root
#        it starts over as postgres, since the servers cannot run as root)
#
# Needs gcc with its sanitizer runtimes (libasan, libubsan), make, patch
# only with AW_SANITIZE_PATCH, and what the suites need (.ci/run installs
# all of it).  Nothing outside $AW_SANITIZE_DIR (default /tmp/aw_sanitize)
# is written, and that directory is emptied first:
#   src/   a copy of the working tree (tracked and untracked files, no
#          objects), where the sanitized build happens
#   root/  a private copy of the PostgreSQL 15 installation
#          (root/usr/lib/postgresql/15, root/usr/share/postgresql/15); its
#          binaries find share/ and lib/ relative to themselves, so its
#          servers load the sanitized aion_wake.so installed there (checked
#          on a throwaway server before the suites), and the installed
#          /usr/lib/postgresql/15/lib/aion_wake.so is not touched.
#          root/.../bin/postgres is a wrapper that preloads libasan, a small
#          shim and libubsan, sets ASAN_OPTIONS, and runs postgres.real:
#          every server process (postmaster, backends, the worker) runs
#          under it; clients do not.
#   reports/  asan.PID, one per server process ASan stopped
#   out/   pg_regress and isolation output and server logs, TAP output;
#          TAP clusters and their logs are under tap/tmp_check
#
# Suites: pg_regress (REGRESS) and isolation (ISOLATION), with the lists and
# options of the Makefile, on temporary instances on ports 55401 and 55402
# (55400: the check that the right library loads); then the TAP tests,
# whose clusters listen on Unix sockets in their own temp dirs only
# (AW_SANITIZE_TAP=0 skips them; AW_SANITIZE_TAP='001 005' runs the files
# whose names start so).
#
# A process that hits an error aborts (ASan and UBSan both), so the suite
# that caused it fails too.  The script exits 1 if a suite fails, if an ASan
# report file appears or if a server log holds sanitizer output (UBSan
# writes to stderr, i.e. the server log), and prints the reports; then one
# summary line per suite, the wall time, and "sanitize: ok" or
# "sanitize: FAILED".
#
# AW_SANITIZE_PATCH=FILE applies FILE (patch -p1) to the copy before the
# build: the way to see the check fail on a planted bug without touching
# the real tree.
#
# What it cannot see: PostgreSQL itself is not instrumented, so ASan knows
# nothing of palloc() chunks (only a whole memory context block, which is
# malloc()ed, has redzones) nor of shared memory.  It catches stack, global
# and malloc() errors in aion_wake's code; UBSan catches undefined
# behaviour there, including an index out of a fixed-size array wherever
# the array lives (-fsanitize=bounds).
#
# Copyright (c) 2026, aion_wake authors

set -euo pipefail

# The whole script is one compound command, read before it runs, so that
# editing this file during a run does not change the run.
{

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
W=${AW_SANITIZE_DIR:-/tmp/aw_sanitize}
PGVER=15
SYS_LIB=/usr/lib/postgresql/$PGVER
SYS_SHARE=/usr/share/postgresql/$PGVER
SYS_PG_CONFIG=$SYS_LIB/bin/pg_config
TAP_SEL=${AW_SANITIZE_TAP:-all}

case $W in
*..*) echo "sanitize: AW_SANITIZE_DIR must not contain .." >&2; exit 2 ;;
/tmp/?*) ;;
*) echo "sanitize: AW_SANITIZE_DIR must be a directory under /tmp (it is emptied)" >&2; exit 2 ;;
esac

# PostgreSQL refuses to run as root: as root, start afresh as postgres.
if [ "$(id -u)" -eq 0 ]; then
	rm -rf "$W"
	mkdir -p "$W"
	chown postgres "$W"
	if [ -n "${AW_SANITIZE_PATCH:-}" ]; then
		# postgres may not be able to read it where it is
		cp "$AW_SANITIZE_PATCH" "$W/planted.patch"
		chown postgres "$W/planted.patch"
		export AW_SANITIZE_PATCH=$W/planted.patch
	fi
	exec runuser -u postgres -- bash "$HERE/run.sh" "$@"
fi

started=$(date +%s)
S=$W/src
R=$W/root
RLIB=$R$SYS_LIB
RBIN=$RLIB/bin
REPORTS=$W/reports
OUT=$W/out
# What the runtimes print: ASan writes $REPORTS/asan.PID (and the server
# log gets the abort); UBSan writes to stderr, i.e. the server log.
SAN_RE='AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer|ASan runtime'
ASAN_LIB=$(gcc -print-file-name=libasan.so)
UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
for f in "$ASAN_LIB" "$UBSAN_LIB"; do
	if [ ! -e "$f" ]; then
		echo "sanitize: $f not found (gcc's sanitizer runtimes are needed)" >&2
		exit 2
	fi
done
ASAN_LIB=$(readlink -f "$ASAN_LIB")
UBSAN_LIB=$(readlink -f "$UBSAN_LIB")

mkdir -p "$W"
find "$W" -mindepth 1 -maxdepth 1 ! -name planted.patch -exec rm -rf {} +
mkdir -p "$S" "$R/usr/lib/postgresql" "$R/usr/share/postgresql" "$REPORTS" "$OUT"

echo "== sanitize: copying the tree to $S and PostgreSQL $PGVER to $R"
tar -C "$TOP" -cf - \
	--exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
	--exclude=tmp_check --exclude=tmp_check_iso --exclude=results \
	--exclude=results_isolation --exclude=output_iso --exclude=log \
	--exclude='regression.*' --exclude=./bench/out . |
	tar -C "$S" -xf -
cp -a "$SYS_LIB" "$R/usr/lib/postgresql/"
cp -a "$SYS_SHARE" "$R/usr/share/postgresql/"

if [ -n "${AW_SANITIZE_PATCH:-}" ]; then
	echo "== sanitize: applying $AW_SANITIZE_PATCH to the copy"
	patch -s -d "$S" -p1 <"$AW_SANITIZE_PATCH"
fi

echo "== sanitize: building with -fsanitize=address,undefined"
# with_llvm=no: no JIT bitcode, it would not be instrumented anyway.
# DESTDIR=$R puts the files where the copy's binaries look for them.
SAN_FLAGS='-Werror -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined'
make -s -C "$S" PG_CONFIG="$SYS_PG_CONFIG" with_llvm=no COPT="$SAN_FLAGS"
make -s -C "$S" PG_CONFIG="$SYS_PG_CONFIG" with_llvm=no DESTDIR="$R" install >/dev/null
SO=$RLIB/lib/aion_wake.so
if ! nm -D "$SO" | grep __asan_init >/dev/null; then
	echo "sanitize: $SO is not an ASan build" >&2
	exit 1
fi

# A shim preloaded between libasan and libubsan, for two things:
#
# swift_demangle: a preloaded libasan initializes itself lazily, at the
# first malloc().  In postgres that is inside libgpg-error's constructor
# (postgres -> libsystemd -> libgcrypt -> libgpg-error), which calls
# bindtextdomain(): malloc() runs with glibc's _nl_state_lock held, ASan's
# init looks up swift_demangle with dlsym(), the lookup fails, and
# dlerror() translates its message under the same lock, leaving the lock
# broken: the process then hangs in set_pglocale_pgservice() before it
# prints anything, even for "postgres -V".  With swift_demangle defined,
# the dlsym() succeeds and dlerror() stays out of gettext.  Ours returns
# NULL ("not demangled").
#
# __ubsan_default_options: libubsan reads its options when it reports the
# first error, from /proc/self/environ; by then postgres has written its
# process title over that memory (ps_status.c), so UBSAN_OPTIONS would be
# lost and UBSan would print one line and exit(1), without a stack.  The
# runtime asks this function instead; the shim must precede libubsan in
# LD_PRELOAD for its definition to win.  (libubsan ignores log_path here:
# its reports go to the server log, which is searched below.)  ASan reads
# ASAN_OPTIONS at its start, before the title is set.
SHIM=$W/aw_sanitize_shim.so
cat >"$W/aw_sanitize_shim.c" <<'SHIM_EOF'
#include <stddef.h>
#include <stdint.h>

char	   *swift_demangle(const char *name, size_t len, char *out,
						   size_t *outlen, uint32_t flags);
const char *__ubsan_default_options(void);

char *
swift_demangle(const char *name, size_t len, char *out, size_t *outlen,
			   uint32_t flags)
{
	return NULL;
}

const char *
__ubsan_default_options(void)
{
	return "print_stacktrace=1:halt_on_error=1:abort_on_error=1:disable_coredump=1";
}
SHIM_EOF
gcc -shared -fPIC -O1 -o "$SHIM" "$W/aw_sanitize_shim.c"

# Every server process runs under this wrapper; clients (psql,
# pg_regress, initdb, prove) do not, so only the server is instrumented.
# exec -a keeps argv[0] the wrapper's path: postgres takes its own path
# from argv[0] and records it in postmaster.opts, which "pg_ctl restart"
# runs again, so a restarted server goes through the wrapper too.
mv "$RBIN/postgres" "$RBIN/postgres.real"
cat >"$RBIN/postgres" <<EOF
#!/bin/bash
# test/sanitize/run.sh: the server with the ASan runtime preloaded
LD_PRELOAD="$ASAN_LIB $SHIM $UBSAN_LIB\${LD_PRELOAD:+ \$LD_PRELOAD}"
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:disable_coredump=1:log_path=$REPORTS/asan"
export LD_PRELOAD ASAN_OPTIONS
exec -a "$RBIN/postgres" "$RBIN/postgres.real" "\$@"
EOF
chmod 755 "$RBIN/postgres"

# Check, on a throwaway cluster, that a server from the copy maps the
# sanitized library from the copy and runs with the ASan runtime.
echo "== sanitize: checking that the copy's server loads $SO"
pre=$W/tmp/preflight
mkdir -p "$W/tmp"
"$RBIN/initdb" -A trust -N -D "$pre" >"$OUT/preflight_initdb.log" 2>&1
{
	echo "shared_preload_libraries = 'aion_wake'"
	echo "listen_addresses = ''"
	echo "unix_socket_directories = '$W/tmp'"
	echo "port = 55400"
} >>"$pre/postgresql.conf"
trap '"$RBIN/pg_ctl" -D "$pre" -m immediate -w stop >/dev/null 2>&1 || true' EXIT
"$RBIN/pg_ctl" -D "$pre" -l "$OUT/preflight_server.log" -w start >/dev/null
pid=$(head -1 "$pre/postmaster.pid")
maps_ok=1
grep -q " $SO\$" "/proc/$pid/maps" || maps_ok=0
grep -q "libasan" "/proc/$pid/maps" || maps_ok=0
pkglib=$("$RBIN/psql" -h "$W/tmp" -p 55400 -d postgres -XAtc \
	"SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'")
"$RBIN/pg_ctl" -D "$pre" -m fast -w stop >/dev/null
trap - EXIT
rm -rf "$pre"
if [ $maps_ok -ne 1 ] || [ "$pkglib" != "$RLIB/lib" ]; then
	echo "sanitize: the copy's server does not run the sanitized library (pkglibdir $pkglib)" >&2
	exit 1
fi
if [ -n "$(ls -A "$REPORTS")" ] || grep -E "$SAN_RE" "$OUT/preflight_server.log"; then
	echo "sanitize: the server reported errors on start" >&2
	cat "$REPORTS"/* 2>/dev/null || true
	exit 1
fi

# The suites' lists, as the Makefile has them.
mkvar() {
	make -s -C "$S" --no-print-directory PG_CONFIG="$SYS_PG_CONFIG" \
		-f Makefile -f - "print-$1" <<<'print-%: ; @echo $($*)'
}
REGRESS=$(mkvar REGRESS)
REGRESS_OPTS=$(mkvar REGRESS_OPTS)
ISOLATION=$(mkvar ISOLATION)
ISOLATION_OPTS=$(mkvar ISOLATION_OPTS)

status=0
summary=()

# A suite's verdict: its own, no new report file and no sanitizer output
# in its server logs (LOGDIR).
verdict() {
	local name=$1 rc=$2 detail=$3 logdir=$4 n hits
	n=$(find "$REPORTS" -type f -newer "$W/.suite_start" | wc -l)
	hits=$( (grep -rlE "$SAN_RE" "$logdir" 2>/dev/null || true) | wc -l)
	if [ "$rc" -ne 0 ] || [ "$n" -ne 0 ] || [ "$hits" -ne 0 ]; then
		status=1
		summary+=("sanitize: $name: FAILED ($detail; $n ASan report files, $hits server logs with sanitizer output)")
	else
		summary+=("sanitize: $name: ok ($detail)")
	fi
	touch "$W/.suite_start"
}
touch "$W/.suite_start"

# suite NAME DRIVER PORT OPTS TESTS: a pg_regress-style suite with the
# Makefile's options, run from the copy's top, where pg_regress finds
# sql/ and expected/ by default (isolation: the Makefile's --inputdir);
# the output directory, the temporary instance and the port are ours,
# after the Makefile's options so that they win.
suite() {
	local name=$1 driver=$2 port=$3 opts=$4 tests=$5 rc=0
	echo "== sanitize: $name: $tests"
	# shellcheck disable=SC2086
	(cd "$S" && "$driver" --bindir="$RBIN" $opts --outputdir="$OUT/$name" \
		--temp-instance="$W/tmp/$name" --port="$port" $tests) 2>&1 | tee "$OUT/$name.log" || rc=$?
	if [ -f "$OUT/$name/regression.diffs" ]; then head -200 "$OUT/$name/regression.diffs"; fi
	verdict "$name" $rc "$(grep -Eo '[0-9]+ of [0-9]+ tests (passed|failed)|All [0-9]+ tests passed' "$OUT/$name.log" | head -1)" "$OUT/$name/log"
}
suite regress "$RLIB/lib/pgxs/src/test/regress/pg_regress" 55401 "$REGRESS_OPTS" "$REGRESS"
suite isolation "$RLIB/lib/pgxs/src/test/isolation/pg_isolation_regress" 55402 "$ISOLATION_OPTS" "$ISOLATION"

if [ "$TAP_SEL" != 0 ]; then
	taps=()
	for t in "$S"/test/t/*.pl; do
		if [ "$TAP_SEL" = all ]; then
			taps+=("$t")
		else
			for p in $TAP_SEL; do
				case $(basename "$t") in "$p"*) taps+=("$t") ;; esac
			done
		fi
	done
	echo "== sanitize: TAP: ${#taps[@]} files"
	rc=0
	mkdir -p "$W/tap"
	# TAP clusters use Unix sockets in their own temp dirs; their ports are
	# picked and locked by PostgreSQL::Test::Cluster under $W/tap.  The
	# sanitized servers are several times slower: the checks of how
	# promptly a wake comes allow four times as long (aw_prompt in
	# test/perl/AionWake/Test.pm); the unsanitized suites hold the figure.
	(cd "$S" && TESTDIR="$W/tap" PATH="$RBIN:$PATH" AW_TEST_TIME_SCALE=4 \
		PG_REGRESS="$RLIB/lib/pgxs/src/test/regress/pg_regress" \
		prove -I "$RLIB/lib/pgxs/src/test/perl" -I "$S/test/perl" "${taps[@]}") \
		>"$OUT/tap.out" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		# The tails of the failed files' logs first, then prove's own
		# report last, so that the end of the output (all CI shows) names
		# what failed.
		for t in $(sed -n 's/^\([^ ]*\)\.pl *(Wstat.*/\1/p' "$OUT/tap.out"); do
			f="$W/tap/tmp_check/log/regress_log_$(basename "$t")"
			if [ -f "$f" ]; then
				echo "== $f: its failures, then its tail"
				grep -E -A12 'not ok|Dubious|died|BAIL|Broken pipe' "$f" | head -40 || true
				echo "-- (tail)"
				tail -15 "$f"
			fi
		done
		grep -vE '\.\.\.* ok$' "$OUT/tap.out" | tail -30 || true
	fi
	verdict tap $rc "$(grep -E '^Result:|^Files=' "$OUT/tap.out" | tr '\n' ' ' | sed 's/ *$//')" "$W/tap/tmp_check/log"
fi

# Show what the runtimes said: report files, then the lines around each
# sanitizer message in the server logs.
for f in $(find "$REPORTS" -type f | sort); do
	echo "== sanitizer report $f"
	cat "$f"
done
for f in $(grep -rlE "$SAN_RE" "$OUT"/regress/log "$OUT"/isolation/log \
	"$W"/tap/tmp_check/log 2>/dev/null | sort); do
	echo "== sanitizer output in $f"
	grep -E -B2 -A40 "$SAN_RE" "$f" | head -120 || true
done

printf '%s\n' "${summary[@]}"
echo "sanitize: $(($(date +%s) - started)) s"
if [ $status -eq 0 ]; then
	echo "sanitize: ok"
else
	echo "sanitize: FAILED (work dir kept: $W)"
fi
exit $status
}
