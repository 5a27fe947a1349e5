#!/usr/bin/env bash
#
# bench/rates/lease_start_race.sh -- a reproduction (issue 24, finding 2
# of bench/rates/README.md): a claim's lease start can precede the moment
# the rate admitted its start, so two lease starts of a topic with a rate
# of 1 start per 2 s can be less than 2 s apart.
#
# claim() reads its clock for the lease (src/claim.c, now = ...; leased_until
# = now + lease) before aw_claim_reserve admits the start under the set
# lock at a later clock (src/lease_ledger.c, aw_rate_admit(...,
# GetCurrentTimestamp(), ...)).  Anything that stalls the backend between
# the two -- a wait for the set lock, being descheduled -- moves the
# admission later but not the lease start.  Here gdb stands in for the
# stall: it holds the second claimer at aw_ledger_reserve for 0.6 s.
#
#   set_rate('race', 1, '2 s'); session A claims at t = 0;
#   session B starts its claim at t ~ 1.7 s, is held 0.6 s, is admitted at
#   t ~ 2.3 s (the window allows it) and returns a lease starting at ~1.7 s.
#
# Needs root (gdb attaches to the backend) and gdb.
# Usage: PG_CONFIG=... bench/rates/lease_start_race.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
PG_BINDIR=$($PG_CONFIG --bindir)
BENCH_PORT=${RATES_PORT:-5584}
[ "$(id -u)" -eq 0 ] || { echo "lease_start_race.sh: run as root (gdb attaches to a backend)" >&2; exit 1; }
command -v gdb >/dev/null || { echo "lease_start_race.sh: gdb is missing" >&2; exit 1; }
# shellcheck source=../lib.sh
. "$here/../lib.sh"
bench_start
psqlc() { bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
psqlc -c "SELECT aion_wake.set_rate('race', 1, '2 s')" >/dev/null
psqlc -c "SELECT count(aion_wake.enqueue('race' || g, '{}', 'race')) FROM generate_series(1, 5) g" >/dev/null
# warm nothing up: A and B are fresh sessions alike
q="SELECT extract(epoch FROM leased_until - interval '1 hour') FROM aion_wake.claim('race', 1, '1 hour')"
# B: sleeps, then claims; its backend is found by application_name
PGAPPNAME=race_b psqlc -c "SELECT pg_sleep(1.7)" -c "$q" >"$BENCH_TMP/b.out" 2>&1 &
bpsql=$!
for ((i = 0; i < 100; i++)); do
	pid=$(psqlc -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'race_b'")
	[ -n "$pid" ] && break
	sleep 0.01
done
[ -n "$pid" ] || { echo "session B never showed up" >&2; exit 1; }
# A: the one start the window has, now
a=$(psqlc -c "$q")
# hold B at the start of its reservation for 0.6 s
gdb -q -p "$pid" -batch -ex 'break aw_ledger_reserve' -ex 'continue' -ex 'shell sleep 0.6' \
	-ex 'detach' >"$BENCH_TMP/gdb.out" 2>&1 || { cat "$BENCH_TMP/gdb.out" >&2; exit 1; }
wait "$bpsql"
b=$(grep -E '^[0-9.]+$' "$BENCH_TMP/b.out" || true)
grep -q 'Breakpoint 1, ' "$BENCH_TMP/gdb.out" && echo "gdb held session B at aw_ledger_reserve for 0.6 s"
if [ -z "$b" ]; then
	echo "session B took no row: $(cat "$BENCH_TMP/b.out")"
	exit 0
fi
awk -v a="$a" -v b="$b" 'BEGIN {
	printf "rate: 1 start per 2 s; lease starts: A at t = 0.000 s, B at t = %.3f s\n", b - a
	if (b - a < 2) printf "two starts %.3f s apart: a window of 2 s by lease start holds 2 > max_starts (G10)\n", b - a
	else print "B started 2 s or more after A: not reproduced this time" }'
psqlc -c "SELECT 'window_starts ' || window_starts || ', next_start_at t = ' || round((extract(epoch FROM next_start_at) - $a)::numeric, 3) FROM aion_wake.topics WHERE topic = 'race'"
