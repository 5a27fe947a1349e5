#!/usr/bin/env bash
#
# bench/rates/lost_wake.sh -- a reproduction (issue 24, found by run.sh's
# partner run): claimers blocked by a rate sleep past the moment the
# window admits them when more than one start leaves the window.
#
# set_rate('lw', 2, '2 s'); two starts 0.5 s apart (t = 0 and t = 0.5 s);
# then two claims with wait '10 s' block (the window is full).  The window
# admits one start at t = 2 s and another at t = 2.5 s, so the first
# blocked claim should return at 2 s and the second at 2.5 s (G10: "a
# claim blocked only by the rate is woken at the exact moment the window
# admits its next start; one claimer per possible start").  Prints each
# claim's lease start relative to t = 0, and how long each blocked claim
# took.
#
# Usage (as root or postgres): PG_CONFIG=... bench/rates/lost_wake.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
PG_BINDIR=$($PG_CONFIG --bindir)
BENCH_PORT=${RATES_PORT:-5582}
# shellcheck source=../lib.sh
. "$here/../lib.sh"
bench_start "aion_wake.max_wait = '60s'"
psqlc() { bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
psqlc "SELECT aion_wake.set_rate('lw', 2, '2 s')" >/dev/null
psqlc "SELECT count(aion_wake.enqueue('lw' || g, '{}', 'lw')) FROM generate_series(1, 10) g" >/dev/null
q="SELECT extract(epoch FROM leased_until - interval '1 hour') FROM aion_wake.claim('lw', 1, '1 hour')"
t0=$(psqlc "$q")
sleep 0.5
t1=$(psqlc "$q")
sleep 0.2
for i in 1 2; do
	( s=$(date +%s.%N)
	  v=$(psqlc "SELECT extract(epoch FROM leased_until - interval '1 hour') FROM aion_wake.claim('lw', 1, '1 hour', '10 s')")
	  e=$(date +%s.%N)
	  awk -v i="$i" -v v="$v" -v t0="$t0" -v s="$s" -v e="$e" 'BEGIN {
		printf "blocked claim %d: lease start at t = %.3f s (took %.3f s)\n", i, v - t0, e - s }' ) &
done
sleep 0.3
psqlc "SELECT 'while blocked: waiters ' || waiters || ', window_starts ' || window_starts || ', next_start_at t = ' ||
       round((extract(epoch FROM next_start_at) - $t0)::numeric, 3) FROM aion_wake.topics WHERE topic = 'lw'"
wait
echo "the two starts before: t = 0.000 and t = $(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f", a - b }') s; expected: the blocked claims at t = 2.0 and t = 2.5 s"
psqlc "SELECT 'status: claims_rate_delayed ' || claims_rate_delayed FROM aion_wake.status"
