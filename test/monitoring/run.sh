#!/usr/bin/env bash
#
# test/monitoring/run.sh: scrape aion_wake's metrics through the real
# postgres_exporter (Debian's prometheus-postgres-exporter) and check them.
#
# Why: monitoring/postgres_exporter.yaml is what operators load into their
# exporter.  A column renamed in a view, a type the exporter cannot turn
# into a number, or a grant the exporter's role lacks would silently drop
# series; only the real exporter reading the real views shows that they
# arrive, with the values the views hold.
#
# It starts a throwaway cluster in a mktemp directory (Unix socket only,
# port $MONITORING_PORT, default 5596; aion_wake preloaded), creates a
# role with exactly the grants of README's Monitoring section, runs a small workload (rows claimable,
# a park re-offered by a pulse, a limited topic with live leases, a
# blocked claim woken by an enqueue, one that ends at its deadline), starts
# the exporter on a free loopback port with the queries file, and scrapes
# /metrics.  Checks:
#   - the exporter loaded the queries file and reports no scrape error;
#   - each series below is there with the value the view (as the
#     superuser) holds at the same moment: the worker's state, the
#     re-offer counter, each topic's limit and live leases, each topic's
#     claimable rows and the age of its oldest claimable row; the
#     per-topic health counters (claims, rows, wakes, timeouts, lost
#     wakes) and both histograms (count and buckets);
#   - the exporter's role reads no payload.
# It prints one line per check and "monitoring: N passed, M failed"; exit
# 1 on any failure (the temp directory is then kept).  Run as root.
# PG_BINDIR picks the PostgreSQL binaries (default: pg_config's), so a
# private installation can be tested without touching the system one.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PGBIN=${PG_BINDIR:-$(pg_config --bindir)}
PORT=${MONITORING_PORT:-5596}
EXPORTER=${POSTGRES_EXPORTER:-/usr/bin/prometheus-postgres-exporter}
export LC_ALL=C

if [ ! -x "$EXPORTER" ]; then
	echo "monitoring: $EXPORTER is missing (apt-get install prometheus-postgres-exporter)"
	echo "monitoring: 0 passed, 1 failed"
	exit 1
fi

TMP=$(mktemp -d /tmp/aion_wake_monitoring.XXXXXX)
chmod 755 "$TMP"
chown postgres "$TMP"
DATA=$TMP/data
FAILED=0
PASSED=0
EXPORTER_PID=

cleanup() {
	local rc=$?
	[ -n "$EXPORTER_PID" ] && kill "$EXPORTER_PID" 2>/dev/null || true
	if [ -f "$DATA/postmaster.pid" ]; then
		runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || true
	fi
	if [ "$rc" -ne 0 ] || [ "$FAILED" -ne 0 ]; then
		echo "monitoring: kept $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

q() {
	runuser -u postgres -- "$PGBIN/psql" -h "$TMP" -p "$PORT" -d postgres -X -q -A -t \
		-v ON_ERROR_STOP=1 -c "$1"
}

runuser -u postgres -- "$PGBIN/initdb" -D "$DATA" -U postgres -A trust --no-sync -E UTF8 \
	--locale=C >"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log" >&2; exit 1; }
cat >>"$DATA/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$TMP'
shared_preload_libraries = 'aion_wake'
aion_wake.database = 'postgres'
fsync = off
CONF
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA" -l "$TMP/server.log" -w -t 60 start >/dev/null \
	|| { cat "$TMP/server.log" >&2; exit 1; }

# wait_for SQL: until the query returns t (bounded: 60 s)
wait_for() {
	local i
	for i in $(seq 600); do
		[ "$(q "$1")" = t ] && return 0
		sleep 0.1
	done
	echo "monitoring: timed out waiting for: $1" >&2
	return 1
}

q "CREATE EXTENSION aion_wake"
q "CREATE ROLE aion_wake_exporter LOGIN;
   GRANT pg_monitor TO aion_wake_exporter;
   GRANT SELECT ON aion_wake.topics TO aion_wake_exporter;
   GRANT EXECUTE ON FUNCTION aion_wake.topics_internal() TO aion_wake_exporter;
   GRANT EXECUTE ON FUNCTION aion_wake.backlog(int) TO aion_wake_exporter;
   GRANT SELECT (topic, priority, visible_after) ON aion_wake.outbox TO aion_wake_exporter;
   GRANT SELECT ON aion_wake.topic_health, aion_wake.claim_histogram TO aion_wake_exporter;
   GRANT EXECUTE ON FUNCTION aion_wake.topic_health(int), aion_wake.topic_health_internal(),
     aion_wake.claim_histogram_internal() TO aion_wake_exporter"
# the worker serves the database once it has found the extension
q "SELECT aion_wake.pulse('warm_up', 1)" >/dev/null
wait_for "SELECT worker_pid IS NOT NULL FROM aion_wake.status"

# Topic mon_a: six rows; one claimed and parked an hour, then re-offered
# by a pulse; one claimed and left leased.  Topic mon_b: limited to 2, two
# leases live, one row claimable.  Topic mon_c: one row fenced ahead.
q "SELECT count(aion_wake.enqueue('a' || g, '{}', 'mon_a')) FROM generate_series(1, 6) g" >/dev/null
q "SELECT count(aion_wake.enqueue('b' || g, '{}', 'mon_b')) FROM generate_series(1, 3) g" >/dev/null
q "SELECT aion_wake.enqueue('c1', '{}', 'mon_c', '1 hour')" >/dev/null
q "SELECT aion_wake.set_limit('mon_b', 2)" >/dev/null
q "SELECT aion_wake.set_rate('mon_b', 5, '1 hour'), aion_wake.pause('mon_c', clock_timestamp() + interval '1 hour')" >/dev/null
q "SELECT count(*) FROM aion_wake.claim('mon_c', 1)" >/dev/null
q "SELECT count(*) FROM aion_wake.claim('mon_b', 2)" >/dev/null
q "SELECT count(*) FROM aion_wake.claim('mon_a', 1)" >/dev/null
q "SELECT aion_wake.park(dispatch_key, '1 hour', lease_token) FROM aion_wake.claim('mon_a', 1)" >/dev/null
wait_for "SELECT parked_confirmed = 1 FROM aion_wake.status"
r0=$(q "SELECT rows_reoffered FROM aion_wake.status")
q "SELECT aion_wake.pulse('mon_a', 1)" >/dev/null
wait_for "SELECT rows_reoffered = $r0 + 1 FROM aion_wake.status"
# Topic mon_w: a claim blocked until an enqueue wakes it (one wake, one
# row, one claim_wait observation).  Topic mon_t: a blocked claim that ends
# at its deadline with nothing.
q "SELECT count(*) FROM aion_wake.claim('mon_w', 1, '30s', '30s')" >"$TMP/mon_w.out" 2>&1 &
CLAIM_PID=$!
wait_for "SELECT waiters = 1 FROM aion_wake.status"
q "SELECT aion_wake.enqueue('w1', '{}', 'mon_w')" >/dev/null
wait "$CLAIM_PID"
q "SELECT count(*) FROM aion_wake.claim('mon_t', 1, '30s', '100 ms')" >/dev/null
# let the oldest claimable row age measurably
wait_for "SELECT oldest_claimable_age >= interval '1 s' FROM aion_wake.backlog() WHERE topic = 'mon_a'"

EXPORTER_PORT=$(perl -MIO::Socket::INET -e \
	'print IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1", LocalPort => 0)->sockport')
runuser -u postgres -- env \
	DATA_SOURCE_NAME="host=$TMP port=$PORT user=aion_wake_exporter dbname=postgres sslmode=disable" \
	"$EXPORTER" --web.listen-address="127.0.0.1:$EXPORTER_PORT" \
	--extend.query-path="$ROOT/monitoring/postgres_exporter.yaml" \
	>"$TMP/exporter.log" 2>&1 &
EXPORTER_PID=$!

scrape() {
	perl -MHTTP::Tiny -e '
		my $r = HTTP::Tiny->new(timeout => 10)->get($ARGV[0]);
		exit 1 unless $r->{success};
		print $r->{content};' "http://127.0.0.1:$EXPORTER_PORT/metrics"
}
for _ in $(seq 300); do
	scrape >"$TMP/metrics" 2>/dev/null && grep -q '^aion_wake_status_worker_up' "$TMP/metrics" && break
	sleep 0.1
done

check() {
	local what=$1 ok=$2
	if [ "$ok" = yes ]; then
		PASSED=$((PASSED + 1))
		echo "ok   $what"
	else
		FAILED=$((FAILED + 1))
		echo "FAIL $what"
	fi
}

# metric NAME [LABEL=VALUE]: the value of one series, empty when absent
metric() {
	local name=$1 label=${2:-}
	awk -v n="$name" -v l="$label" '
		BEGIN { if (l != "") { split(l, kv, "="); l = kv[1] "=\"" kv[2] "\"" } }
		$1 ~ "^" n "({|$)" && (l == "" || index($1, l)) { print $2; exit }' "$TMP/metrics"
}
# same NAME LABEL SQL: the series equals what SQL returns now
same() {
	local name=$1 label=$2 sql=$3 got want
	got=$(metric "$name" "$label")
	want=$(q "$sql")
	check "$name${label:+ $label} = $want (scraped: ${got:-absent})" \
		"$(perl -e 'print(($ARGV[0] ne "" && $ARGV[0] == $ARGV[1]) ? "yes" : "no")' "$got" "$want")"
}

check "the exporter loaded the queries file" \
	"$(grep -q '^pg_exporter_user_queries_load_error{.*} 0$' "$TMP/metrics" && echo yes || echo no)"
check "the exporter reports no scrape error" \
	"$(grep -q '^pg_exporter_last_scrape_error 0$' "$TMP/metrics" && echo yes || echo no)"
check "the exporter logs no query error" \
	"$(grep -qi 'error' "$TMP/exporter.log" && echo no || echo yes)"
same aion_wake_status_worker_up '' "SELECT (worker_pid IS NOT NULL)::int FROM aion_wake.status"
same aion_wake_status_served '' "SELECT served::int FROM aion_wake.status"
same aion_wake_status_rows_reoffered_total '' "SELECT rows_reoffered FROM aion_wake.status"
same aion_wake_status_pulses_received_total '' "SELECT pulses_received FROM aion_wake.status"
same aion_wake_status_leases '' "SELECT leases FROM aion_wake.status"
same aion_wake_status_limits_not_loaded_total '' "SELECT limits_not_loaded FROM aion_wake.status"
same aion_wake_status_claims_paused_total '' "SELECT claims_paused FROM aion_wake.status"
same aion_wake_topic_max_in_flight 'topic=mon_b' "SELECT max_in_flight FROM aion_wake.topics WHERE topic = 'mon_b'"
same aion_wake_topic_in_flight 'topic=mon_b' "SELECT in_flight FROM aion_wake.topics WHERE topic = 'mon_b'"
same aion_wake_topic_max_starts 'topic=mon_b' "SELECT max_starts FROM aion_wake.topics WHERE topic = 'mon_b'"
same aion_wake_topic_rate_per_seconds 'topic=mon_b' "SELECT extract(epoch FROM per)::int FROM aion_wake.topics WHERE topic = 'mon_b'"
same aion_wake_topic_window_starts 'topic=mon_b' "SELECT window_starts FROM aion_wake.topics WHERE topic = 'mon_b'"
same aion_wake_topic_paused 'topic=mon_c' "SELECT (paused_until IS NOT NULL)::int FROM aion_wake.topics WHERE topic = 'mon_c'"
same aion_wake_topic_reoffered_total 'topic=mon_a' "SELECT reoffered FROM aion_wake.topics WHERE topic = 'mon_a'"
same aion_wake_backlog_claimable 'topic=mon_a' "SELECT claimable FROM aion_wake.backlog() WHERE topic = 'mon_a'"
same aion_wake_backlog_claimable 'topic=mon_b' "SELECT claimable FROM aion_wake.backlog() WHERE topic = 'mon_b'"
same aion_wake_backlog_claimable 'topic=mon_c' "SELECT 0"
same aion_wake_status_lost_wakes_total '' "SELECT lost_wakes FROM aion_wake.status"
same aion_wake_topic_health_claims_total 'topic=mon_a' "SELECT claims FROM aion_wake.topic_health WHERE topic = 'mon_a'"
same aion_wake_topic_health_rows_claimed_total 'topic=mon_b' "SELECT rows_claimed FROM aion_wake.topic_health WHERE topic = 'mon_b'"
same aion_wake_topic_health_wakes_total 'topic=mon_w' "SELECT 1"
same aion_wake_topic_health_wakes_found_row_total 'topic=mon_w' "SELECT 1"
same aion_wake_topic_health_rows_claimed_total 'topic=mon_w' "SELECT 1"
same aion_wake_topic_health_claims_timed_out_total 'topic=mon_t' "SELECT 1"
same aion_wake_topic_health_lost_wakes_total 'topic=mon_w' "SELECT 0"
same aion_wake_topic_health_parked_confirmed 'topic=mon_a' "SELECT parked_confirmed FROM aion_wake.topic_health WHERE topic = 'mon_a'"
same aion_wake_claim_wait_seconds_count '' "SELECT count FROM aion_wake.claim_histogram WHERE histogram = 'claim_wait'"
same aion_wake_claim_wait_seconds_bucket 'le=60' "SELECT buckets[14] FROM aion_wake.claim_histogram WHERE histogram = 'claim_wait'"
same aion_wake_claim_latency_seconds_count '' "SELECT count FROM aion_wake.claim_histogram WHERE histogram = 'claim_latency'"
same aion_wake_claim_latency_seconds_bucket 'le=0.001' "SELECT buckets[1] FROM aion_wake.claim_histogram WHERE histogram = 'claim_latency'"
check "claim_wait: the blocked claim on mon_w was observed" \
	"$(perl -e 'print(($ARGV[0] ne "" && $ARGV[0] >= 1) ? "yes" : "no")' "$(metric aion_wake_claim_wait_seconds_count)")"
check "claim_latency: the workload's 5 claimed rows were observed" \
	"$(perl -e 'print(($ARGV[0] ne "" && $ARGV[0] >= 5) ? "yes" : "no")' "$(metric aion_wake_claim_latency_seconds_count)")"
check "mon_a: 5 rows claimable (6, one leased), as the workload left them" \
	"$([ "$(metric aion_wake_backlog_claimable topic=mon_a)" = 5 ] && echo yes || echo no)"
check "mon_a: the oldest claimable row is at least 1 s old" \
	"$(perl -e 'print(($ARGV[0] ne "" && $ARGV[0] >= 1) ? "yes" : "no")' "$(metric aion_wake_backlog_oldest_claimable_seconds topic=mon_a)")"
check "mon_c: no claimable row, age 0" \
	"$([ "$(metric aion_wake_backlog_oldest_claimable_seconds topic=mon_c)" = 0 ] && echo yes || echo no)"
check "the exporter's role cannot read the outbox (payloads)" \
	"$(runuser -u postgres -- "$PGBIN/psql" -h "$TMP" -p "$PORT" -U aion_wake_exporter -d postgres -X -q -A -t \
		-c 'SELECT payload FROM aion_wake.outbox LIMIT 1' >/dev/null 2>&1 && echo no || echo yes)"

echo "monitoring: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
