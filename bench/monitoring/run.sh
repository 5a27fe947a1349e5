#!/usr/bin/env bash
#
# bench/monitoring/run.sh -- what reading the monitoring views costs, and
# what the lost-wake detector costs a blocked claim (1.2; README,
# Monitoring).  A measurement, not a test: it prints figures and exits 0
# (non-zero only if the run itself fails).
#
#  a. the health view at size: MON_ROWS rows (default 10,000,000) in
#     MON_TOPICS topics (1,000), a third of them fenced an hour ahead, every
#     topic claimed once (so each has counters) and 10 of them limited;
#     then, MON_RUNS times each (5), the time of
#       SELECT count(*) FROM aion_wake.topic_health           (count_up_to 1000)
#       SELECT count(*) FROM aion_wake.topic_health(10), (1)
#       SELECT count(*) FROM aion_wake.backlog()              (the table's half)
#       SELECT count(*) FROM aion_wake.topic_health_internal() (shared memory's)
#       SELECT count(*) FROM aion_wake.claim_histogram
#     as psql's \timing prints it, and the buffers topic_health(1) reads.
#  b. the detector and a blocked claim's idle CPU: 10 claims blocked on an
#     empty topic for IDLE_SECONDS (15), their utime + stime from
#     /proc/PID/stat, once with aion_wake.lost_wake_tolerance = 100 ms (the
#     detector on) and once with 0 (off).
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp
# directory, Unix socket only) and removes it on exit.  Loading 10 M rows
# takes about 5 minutes on 2 cores; MON_ROWS=1000000 for a quick look.
#
# Usage (as root or postgres):  bench/monitoring/run.sh
# Environment: MON_ROWS, MON_TOPICS, MON_RUNS, IDLE_SECONDS, BENCH_PORT
# (default 5541), PG_BINDIR (a private installation's binaries).

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_PORT=${BENCH_PORT:-5541}
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"

MON_ROWS=${MON_ROWS:-10000000}
MON_TOPICS=${MON_TOPICS:-1000}
MON_RUNS=${MON_RUNS:-5}
IDLE_SECONDS=${IDLE_SECONDS:-15}

bench_start "max_connections = 40" "maintenance_work_mem = '512MB'"

psql_timed() {
	bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres \
		-X -q -v ON_ERROR_STOP=1 "$@"
}

bench_log "loading $MON_ROWS rows in $MON_TOPICS topics"
bench_sql "INSERT INTO aion_wake.outbox (dispatch_key, topic, visible_after, enqueued_at)
  SELECT 'k' || g, 'topic' || (g % $MON_TOPICS),
         CASE WHEN g % 3 = 0 THEN now() + interval '1 hour'
              ELSE now() - (g % 3600) * interval '1 s' END, now()
    FROM generate_series(1, $MON_ROWS) g" >/dev/null
bench_sql "VACUUM ANALYZE aion_wake.outbox" >/dev/null
bench_sql "SELECT count(*) FROM (SELECT (SELECT count(*) FROM aion_wake.claim('topic' || g, 1, '1 hour'))
             FROM generate_series(0, $MON_TOPICS - 1) g) x" >/dev/null
bench_sql "SELECT aion_wake.set_limit('topic' || g, 5) FROM generate_series(0, 9) g" >/dev/null
echo "a. $MON_ROWS rows, $MON_TOPICS topics, $(bench_sql "SELECT count(*) FROM aion_wake.topic_health_internal()") topics with counters; load average $(cut -d' ' -f1-3 /proc/loadavg)"

for q in "aion_wake.topic_health" "aion_wake.topic_health(10)" "aion_wake.topic_health(1)" \
	"aion_wake.backlog()" "aion_wake.topic_health_internal()" "aion_wake.claim_histogram"; do
	times=$( (echo '\timing on'; for _ in $(seq "$MON_RUNS"); do echo "SELECT count(*) FROM $q;"; done) \
		| psql_timed 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -n | tr '\n' ' ')
	printf '   %-36s ms: %s\n' "$q" "$times"
done
printf '   buffers of topic_health(1): %s\n' "$(psql_timed -A -t -c \
	"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) SELECT * FROM aion_wake.topic_health(1)" \
	| sed -n 's/.*Buffers: //p' | head -1)"

# b. idle CPU of blocked claims, the detector on and off
idle() {
	local tol=$1 pids n=0 b a
	for _ in $(seq 10); do
		psql_timed -A -t -c "SET aion_wake.lost_wake_tolerance = $tol; SET application_name = 'idle_$tol';
			SELECT count(*) FROM aion_wake.claim('idle_$tol', 1, '30 s', '$((IDLE_SECONDS + 15)) s')" \
			>/dev/null 2>&1 &
	done
	for _ in $(seq 200); do
		n=$(bench_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idle_$tol'
		                  AND wait_event_type = 'Extension'")
		[ "$n" = 10 ] && break
		sleep 0.1
	done
	pids=$(bench_sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'idle_$tol'")
	ticks() {
		local t=0 p f
		for p in $pids; do
			f=$(sed 's/^.*) //' "/proc/$p/stat")
			# shellcheck disable=SC2086
			set -- $f
			t=$((t + ${12} + ${13}))
		done
		echo $t
	}
	b=$(ticks)
	sleep "$IDLE_SECONDS"
	a=$(ticks)
	echo "   lost_wake_tolerance = $tol ms: $n claims asleep, $((a - b)) clock ticks in ${IDLE_SECONDS} s (CLK_TCK $(getconf CLK_TCK))"
	bench_sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'idle_$tol'" >/dev/null
	wait
}
echo "b. 10 claims blocked on an empty topic"
idle 100
idle 0
