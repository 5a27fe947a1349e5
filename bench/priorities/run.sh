#!/bin/bash
# bench/priorities/run.sh -- claim latency with priorities (issue 25).
#
# The claim of 1.2 walks a topic's distinct priorities from the highest
# and scans each one's visible rows (src/claim.c, AW_CLAIM_BY_PRIORITY).
# This measures one claim (claim(topic, 1), rolled back, so every claim
# sees the same table; the statement's mean latency from pgbench -r) in:
#
#   a. the 1.1 schema (no priorities: the claim of before), 1,000 rows
#   b. the 1.2 schema, 1,000 rows, all of priority 0 (one priority)
#   c. 1,000,000 rows, priorities 0 to 9 (100,000 each), all visible
#   d. the same 1,000,000 rows with priorities 1 to 9 all fenced an hour
#      ahead (leased or parked rows): the claim walks past 9 priorities
#      with no visible row to find one of priority 0, the worst case for
#      ten priorities
#
# and prints c/b and d/b (the target: within 2x) and b/a (what priorities
# cost the common case; a and b run in two databases of one cluster,
# alternately).  Each case runs PRIO_REPS times (default 3) and keeps the
# lowest mean, so that a burst of other load on the machine weighs less.
#
# Environment: as bench/lib.sh (BENCH_SECONDS default 10, BENCH_CLIENTS
# default 1), PRIO_REPS.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
CLIENTS=${BENCH_CLIENTS:-1}
REPS=${PRIO_REPS:-3}

best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b < a) print b; else print a }'; }

# claim_lat LABEL DB: one pgbench run of claim.sql in DB; prints the claim
# statement's mean latency (ms)
claim_lat() {
	local out=$BENCH_TMP/pgbench_prio.out lat
	bench_as_pg "$PG_BINDIR/pgbench" -n -r -M "$BENCH_MODE" -h "$BENCH_TMP" -p "$BENCH_PORT" \
		-c "$CLIENTS" -j "$CLIENTS" -T "$BENCH_SECONDS" -f "$HERE/claim.sql" "$2" >"$out" 2>&1 \
		|| { cat "$out" >&2; return 1; }
	if grep -q 'failed transactions: [1-9]' "$out"; then cat "$out" >&2; return 1; fi
	lat=$(awk 'index($0, "aion_wake.claim") && $1 ~ /^[0-9.]+$/ { print $1; exit }' "$out")
	bench_log "$(printf '%-52s claim %s ms' "$1" "$lat")"
	echo "$lat"
}

# fill DB: 1,000 rows of topic bench, all visible, analyzed
fill() {
	bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d "$1" -X -q -v ON_ERROR_STOP=1 \
		-c "SELECT count(aion_wake.enqueue('k' || g, '{}', 'bench', '0')) FROM pg_catalog.generate_series(1, 1000) g" \
		-c "UPDATE aion_wake.outbox SET visible_after = visible_after - interval '1 hour'" \
		-c "VACUUM ANALYZE aion_wake.outbox" >/dev/null
}

# database v11 holds the 1.1 schema, postgres the 1.2 one; both are served
bench_start "aion_wake.database = 'postgres, v11'"
bench_sql "CREATE DATABASE v11"
bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d v11 -X -q \
	-c "CREATE EXTENSION aion_wake VERSION '1.1'"
fill v11
fill postgres
A=""
B=""
for ((r = 1; r <= REPS; r++)); do
	A=$(best "$A" "$(claim_lat "a. 1.1 schema, 1,000 rows" v11)")
	B=$(best "$B" "$(claim_lat "b. 1.2, one priority, 1,000 rows" postgres)")
done

bench_log "loading 999,000 more rows, priorities 0 to 9"
bench_sql "DELETE FROM aion_wake.outbox"
bench_sql "INSERT INTO aion_wake.outbox (dispatch_key, topic, visible_after, enqueued_at, priority)
	SELECT 'k' || g, 'bench', pg_catalog.clock_timestamp() - interval '1 hour' + g * interval '1 microsecond',
	       pg_catalog.clock_timestamp(), (g % 10)::smallint
	  FROM pg_catalog.generate_series(1, 1000000) g"
bench_sql "VACUUM ANALYZE aion_wake.outbox"
C=""
for ((r = 1; r <= REPS; r++)); do
	C=$(best "$C" "$(claim_lat "c. 10 priorities, 1,000,000 rows" postgres)")
done
bench_log "fencing priorities 1 to 9 an hour ahead"
bench_sql "UPDATE aion_wake.outbox SET visible_after = pg_catalog.clock_timestamp() + interval '1 hour',
	lease_token = 1, leased_until = pg_catalog.clock_timestamp() + interval '1 hour'
	WHERE priority > 0"
bench_sql "VACUUM ANALYZE aion_wake.outbox"
D=""
for ((r = 1; r <= REPS; r++)); do
	D=$(best "$D" "$(claim_lat "d. 10 priorities, 9 fenced ahead, 1,000,000 rows" postgres)")
done

printf '| case | claim, mean ms |\n| --- | --- |\n'
printf '| a. 1.1 schema (before priorities), 1,000 rows | %s |\n' "$A"
printf '| b. 1.2, one priority, 1,000 rows | %s (%sx a) |\n' "$B" "$(bench_div "$B" "$A")"
printf '| c. 10 priorities, 1,000,000 rows, all visible | %s (%sx b) |\n' "$C" "$(bench_div "$C" "$B")"
printf '| d. 10 priorities, 1,000,000 rows, 1-9 fenced ahead | %s (%sx b) |\n' "$D" "$(bench_div "$D" "$B")"
printf 'c/b <= 2: %s; d/b <= 2: %s\n' "$(bench_verdict "$(bench_div "$C" "$B")" '<=' 2)" \
	"$(bench_verdict "$(bench_div "$D" "$B")" '<=' 2)"
