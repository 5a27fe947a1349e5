#!/usr/bin/env bash
#
# bench/bloat/run.sh: does the outbox level off under a steady load with the
# install script's autovacuum settings, and what does a session that holds
# the xmin horizon do to it?
#
# A producer enqueues BLOAT_RATE rows/s (pgbench -R) for BLOAT_MINUTES; a
# pool of BLOAT_DISPATCHERS dispatchers drains them with README's
# single-row wiring (claim with wait, then complete): each row is one
# INSERT, one UPDATE (the lease) and one DELETE.  From minute BLOAT_HOLD_AT
# for BLOAT_HOLD_MINUTES, a REPEATABLE READ transaction that has read the
# outbox stays open, so vacuum can remove nothing that died after it began.
# Every BLOAT_SAMPLE seconds it records rows enqueued and delivered, the
# backlog, the table's and its indexes' size, dead tuples and autovacuum
# runs, and at the end prints the table and a summary: the sizes before,
# during and after the hold, throughput during it, and how long the
# backlog and the dead tuples took to come back once it ended.
#
# Durability stays on (fsync, synchronous_commit), as in the other
# benchmarks.  Environment: BLOAT_MINUTES (default 20), BLOAT_RATE (200),
# BLOAT_DISPATCHERS (4), BLOAT_HOLD_AT (8), BLOAT_HOLD_MINUTES (5),
# BLOAT_SAMPLE (30), BENCH_PORT (default 5538), PG_BINDIR.  Run as root or
# postgres; the table goes to stdout and to $BLOAT_OUT if set.

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_PORT=${BENCH_PORT:-5538}
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"

MINUTES=${BLOAT_MINUTES:-20}
RATE=${BLOAT_RATE:-200}
DISPATCHERS=${BLOAT_DISPATCHERS:-4}
HOLD_AT=${BLOAT_HOLD_AT:-8}
HOLD_MINUTES=${BLOAT_HOLD_MINUTES:-5}
SAMPLE=${BLOAT_SAMPLE:-30}
TOTAL=$((MINUTES * 60))

bench_start "max_connections = 40"
bench_as_pg tee "$BENCH_TMP/produce.sql" >/dev/null <<'SQL'
SELECT aion_wake.enqueue(gen_random_uuid()::text, '{"n": 1}', 'bloat');
SQL
bench_as_pg tee "$BENCH_TMP/dispatch.sql" >/dev/null <<'SQL'
SELECT coalesce(min(dispatch_key), '') AS key, coalesce(min(lease_token), 0) AS tok
  FROM aion_wake.claim('bloat', 1, '30 s', '1 s') \gset
\if :tok != 0
SELECT aion_wake.complete(:key, :tok);
\endif
SQL

pgb() {
	bench_as_pg "$PG_BINDIR/pgbench" -n -h "$BENCH_TMP" -p "$BENCH_PORT" -M prepared "$@" postgres
}
pgb -c "$DISPATCHERS" -j 2 -T "$((TOTAL + 30))" -f "$BENCH_TMP/dispatch.sql" \
	>"$BENCH_TMP/dispatch.out" 2>&1 &
dispatch_pid=$!
pgb -c 2 -j 1 -R "$RATE" -T "$TOTAL" -f "$BENCH_TMP/produce.sql" \
	>"$BENCH_TMP/produce.out" 2>&1 &
produce_pid=$!

sample() {
	bench_sql "SELECT n_tup_ins, n_tup_del, n_live_tup, n_dead_tup,
	                  pg_relation_size('aion_wake.outbox'),
	                  pg_indexes_size('aion_wake.outbox'), autovacuum_count,
	                  (SELECT count(*) FROM aion_wake.outbox),
	                  (SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity)
	             FROM pg_stat_user_tables WHERE relid = 'aion_wake.outbox'::regclass" | tr '|' ' '
}

start=$(date +%s)
held=0
rows=()
printf '%6s %8s %8s %8s %9s %9s %10s %5s %6s %s\n' \
	s enq/s del/s backlog table_MB index_MB dead_tup avac xmin_age phase >&2
prev_t=0 prev_ins=0 prev_del=0
while :; do
	now=$(($(date +%s) - start))
	if [ "$held" -eq 0 ] && [ "$now" -ge $((HOLD_AT * 60)) ]; then
		bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres -X -q -c \
			"BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM aion_wake.outbox;
			 SELECT pg_sleep($((HOLD_MINUTES * 60))); COMMIT" >/dev/null &
		held=1
	fi
	phase=steady
	[ "$now" -ge $((HOLD_AT * 60)) ] && [ "$now" -lt $(((HOLD_AT + HOLD_MINUTES) * 60)) ] && phase=held
	[ "$now" -ge $(((HOLD_AT + HOLD_MINUTES) * 60)) ] && phase=after
	read -r ins del live dead tsize isize avac backlog xage < <(sample)
	if [ "$prev_t" -gt 0 ] || [ "$now" -gt 0 ]; then
		dt=$((now - prev_t)); [ "$dt" -gt 0 ] || dt=1
		line=$(awk -v t="$now" -v dt="$dt" -v i="$((ins - prev_ins))" -v d="$((del - prev_del))" \
			-v b="$backlog" -v ts="$tsize" -v is="$isize" -v dead="$dead" -v av="$avac" \
			-v x="$xage" -v ph="$phase" 'BEGIN {
				printf "%6d %8.1f %8.1f %8d %9.1f %9.1f %10d %5d %6d %s", t, i / dt, d / dt, b,
					ts / 1048576, is / 1048576, dead, av, x, ph }')
		echo "$line" >&2
		rows+=("$line")
	fi
	prev_t=$now prev_ins=$ins prev_del=$del
	[ "$now" -ge "$TOTAL" ] && break
	sleep "$SAMPLE"
done
wait "$produce_pid" || true
kill "$dispatch_pid" 2>/dev/null || true
wait "$dispatch_pid" 2>/dev/null || true

{
	echo "bench/bloat/run.sh: $MINUTES min at $RATE rows/s, $DISPATCHERS dispatchers (claim with wait + complete), xmin held from minute $HOLD_AT for $HOLD_MINUTES min; $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
	echo
	echo '| s | enqueued/s | delivered/s | backlog | table MB | indexes MB | dead tuples | autovacuums | oldest xmin age | phase |'
	echo '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |'
	for r in "${rows[@]}"; do
		# shellcheck disable=SC2086
		set -- $r
		echo "| $1 | $2 | $3 | $4 | $5 | $6 | $7 | $8 | $9 | ${10} |"
	done
	echo
	printf '%s\n' "${rows[@]}" | awk '
		{ ph = $10; n[ph]++; del[ph] += $3; if ($4 > mb[ph]) mb[ph] = $4
		  if ($5 + 0 > tmax[ph]) tmax[ph] = $5; if ($6 + 0 > imax[ph]) imax[ph] = $6
		  if ($7 > dmax[ph]) dmax[ph] = $7; last_t = $5; last_i = $6; last_d = $7; last_b = $4 }
		END {
			split("steady held after", order, " ")
			for (k = 1; k <= 3; k++) if ((p = order[k]) in n) printf "- %s: %d samples, delivered %.1f rows/s on average, backlog at most %d, table up to %.1f MB, indexes up to %.1f MB, dead tuples up to %d\n", p, n[p], del[p] / n[p], mb[p], tmax[p], imax[p], dmax[p]
			printf "- at the end: table %.1f MB, indexes %.1f MB, %d dead tuples, backlog %d\n", last_t, last_i, last_d, last_b
		}'
} | tee ${BLOAT_OUT:+"$BLOAT_OUT"}
