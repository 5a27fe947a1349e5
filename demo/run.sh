#!/usr/bin/env bash
#
# demo/run.sh: the README's first command.  On a fresh Debian 12 machine,
# as root: install PostgreSQL 15 and the build tools, build and install
# aion_wake, start a throwaway cluster, show rows parked and woken, and
# stop the cluster again.  Nothing is left running.
#
#   sudo ./demo/run.sh            (SKIP_INSTALL=1 skips apt-get and the build)
#
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
PGBIN=/usr/lib/postgresql/15/bin
PORT=${DEMO_PORT:-5488}

if [ "$(id -u)" != 0 ]; then
	echo "demo: run as root (it installs packages; the cluster runs as postgres)" >&2
	exit 2
fi

if [ -z "${SKIP_INSTALL:-}" ]; then
	echo "== installing PostgreSQL 15 and build tools (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-server-dev-15 make gcc >/dev/null
	pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
	echo "== building and installing aion_wake"
	make -s PG_CONFIG=$PGBIN/pg_config >/dev/null
	make -s PG_CONFIG=$PGBIN/pg_config install >/dev/null
fi

dir=$(mktemp -d /tmp/aion_wake_demo.XXXXXX)
chown postgres "$dir"
stop() { runuser -u postgres -- $PGBIN/pg_ctl -D "$dir/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap stop EXIT

echo "== starting a throwaway cluster in $dir (port $PORT, Unix socket only)"
runuser -u postgres -- $PGBIN/initdb -D "$dir/data" -A trust >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'aion_wake'
aion_wake.database = 'postgres'
CONF
runuser -u postgres -- $PGBIN/pg_ctl -D "$dir/data" -l "$dir/log" -w start >/dev/null

sql() { runuser -u postgres -- $PGBIN/psql -h "$dir" -p $PORT -d postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
show() { sql -c "SELECT dispatch_key, CASE WHEN visible_after <= clock_timestamp() THEN 'claimable' ELSE 'fenced for ' || to_char(visible_after - clock_timestamp(), 'MI:SS') END AS state, parked_at IS NOT NULL AS parked, attempt FROM aion_wake.outbox ORDER BY enqueued_at"; }

sql -c "CREATE EXTENSION aion_wake"

say "1. Six jobs arrive for a partner API that takes two requests at a time."
sql -c "SELECT count(*) AS enqueued FROM generate_series(1, 6) g, aion_wake.enqueue('job-' || g, jsonb_build_object('n', g), 'api')"

say "2. The dispatcher claims all six; two are accepted, four are answered BUSY and parked with a 1-hour back-off."
sql <<'SQL'
CREATE TEMP TABLE claimed AS SELECT * FROM aion_wake.claim('api', 6, '30 s');
SELECT dispatch_key, lease_token FROM claimed ORDER BY dispatch_key;
SELECT count(*) AS parked FROM claimed, aion_wake.park(dispatch_key, '1 hour', lease_token) p
 WHERE dispatch_key NOT IN ('job-1', 'job-2') AND p;
SQL
show
sql -c "SELECT dispatch_key, state, woken FROM aion_wake.parked ORDER BY parked_at"

say "3. job-1 is delivered: the consumer frees a slot and the dispatcher sends one capacity pulse."
t0=$(date +%s%N)
sql -c "SELECT aion_wake.complete('job-1'), aion_wake.pulse('api', 1)"
sql -c "SELECT dispatch_key AS reoffered FROM aion_wake.claim('api', 1, '30 s', '5 s')"
t1=$(date +%s%N)
echo "   the oldest parked row (job-3) was back $(( (t1 - t0) / 1000000 )) ms later (two psql start-ups included), not in an hour"
show

say "4. Any client can pulse with plain NOTIFY: three more slots free."
sql -c "NOTIFY aion_wake_capacity, 'api:3'"
sql -c "SELECT string_agg(dispatch_key, ', ') AS claimed_after_notify FROM aion_wake.claim('api', 3, '30 s', '5 s')"
show

say "5. job-4 is BUSY again. A pulse that lands before its park commits is not lost: it is acted on at COMMIT."
sql <<'SQL' &
BEGIN;
SELECT aion_wake.park('job-4', '1 hour');
SELECT pg_sleep(1);
COMMIT;
SQL
sleep 0.3
sql -c "SELECT dispatch_key, state, woken FROM aion_wake.parked WHERE dispatch_key = 'job-4'"
sql -c "SELECT aion_wake.pulse('api', 1)"
sql -c "SELECT dispatch_key, state, woken AS pulse_recorded FROM aion_wake.parked WHERE dispatch_key = 'job-4'"
wait
sql -c "SELECT dispatch_key AS reoffered_at_commit FROM aion_wake.claim('api', 1, '30 s', '5 s')"

say "6. Workers need no polling: a blocked claim wakes the moment a row arrives."
( sql -c "SELECT dispatch_key AS woken_claimer_got, to_char(clock_timestamp(), 'HH24:MI:SS.MS') AS at FROM aion_wake.claim('mail', 1, '30 s', '20 s')" ) &
sql -c "SELECT pg_sleep(0.1) FROM generate_series(1, 50) WHERE (SELECT waiters FROM aion_wake.status) = 0 LIMIT 1" >/dev/null || true
sql -c "SELECT aion_wake.enqueue('mail-1', '{}', 'mail'), to_char(clock_timestamp(), 'HH24:MI:SS.MS') AS enqueued_at"
wait

say "7. What the worker saw:"
sql -x -c "SELECT worker_pid IS NOT NULL AS worker_running, listening, parked_pending, parked_confirmed, pulses_received, slots_received, rows_reoffered, wakes_deferred, waiters FROM aion_wake.status"

say "Done: the cluster is stopped and removed."
