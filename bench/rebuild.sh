#!/usr/bin/env bash
# bench/rebuild.sh -- how long the worker's rebuild of the parked set takes
# (found while investigating bench/outbox.sh; see README "Findings").
#
# A measurement, not a test.  The rebuild reads every row whose parked_at is
# set and whose fence is ahead, oldest parked_at first, and links each into
# its topic's confirmed list, which is kept in parked_at order by walking back
# from the tail.  When the set already holds NEWER entries of the topic (parks
# made since, or concurrently), every restored row walks past all of them:
# cost ~ (rows restored) x (newer entries).  Rows end up in the table but not
# in the set after a crash restart, a full set (G6), a pg_restore, or parks
# made before the worker first woke up.
#
# For each REBUILD_ROWS value: that many rows marked parked in the table only,
# REBUILD_SET (20000) rows parked normally (newer entries in the set), then
# the worker is terminated; the postmaster restarts it (2 s later) and the
# time until its "rebuilt the parked set" log line is printed.
#
# Usage (as root or as postgres):  bench/rebuild.sh
# Environment: see lib.sh; REBUILD_ROWS (default "10000 20000 40000"),
# REBUILD_SET (default 20000).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REBUILD_ROWS=${REBUILD_ROWS:-10000 20000 40000}
REBUILD_SET=${REBUILD_SET:-20000}

BENCH_MAX_PARKED_ROWS=$((REBUILD_SET + 200000)) bench_start
BENCH_SUMMARY=()
bench_summary_add '%14s %12s %12s %10s' "table-only" "set entries" "rebuild s" "rows"
for n in $REBUILD_ROWS; do
	bench_sql "TRUNCATE aion_wake.outbox"
	bench_sql "SELECT count(*) FROM aion_wake.take_confirmed()" >/dev/null
	bench_sql "SELECT count(aion_wake.enqueue('t' || g, '{}', 'bench')) FROM generate_series(1, $n) g" >/dev/null
	# parked in the table only: an older parked_at than every set entry
	bench_sql "UPDATE aion_wake.outbox SET visible_after = clock_timestamp() + interval '1 hour',
	                                     parked_at = clock_timestamp() - interval '1 minute'" >/dev/null
	bench_sql "SELECT count(aion_wake.enqueue('p' || g, '{}', 'bench')) FROM generate_series(1, $REBUILD_SET) g" >/dev/null
	bench_sql "SELECT count(aion_wake.park('p' || g, '1 hour')) FROM generate_series(1, $REBUILD_SET) g" >/dev/null
	before=$(grep -c 'rebuilt the parked set' "$BENCH_TMP/server.log" || true)
	bench_sql "SELECT pg_terminate_backend(worker_pid) FROM aion_wake.status" >/dev/null
	t0=$(date +%s.%N)
	# wait (bounded, 10 min) for the restarted worker's rebuild to finish
	for ((i = 0; i < 60000; i++)); do
		[ "$(grep -c 'rebuilt the parked set' "$BENCH_TMP/server.log" || true)" -gt "$before" ] && break
		sleep 0.01
	done
	t1=$(date +%s.%N)
	rows=$(grep 'rebuilt the parked set' "$BENCH_TMP/server.log" | tail -1 | sed 's/.*: \([0-9]*\) rows.*/\1/')
	# minus the postmaster's 2 s restart delay
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a - 2 }')
	bench_log "table-only $n, set $REBUILD_SET: rebuild ${secs} s, $rows rows"
	bench_summary_add '%14d %12d %12s %10s' "$n" "$REBUILD_SET" "$secs" "$rows"
done
bench_summary_print "aion_wake worker rebuild (bench/rebuild.sh)"
