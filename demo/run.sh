#!/usr/bin/env bash
#
# demo/run.sh: the README's first command.  On a fresh Debian 12 machine,
# as root: install PostgreSQL 15 and the build tools, build and install
# aion_wake and the reference dispatcher (examples/dispatcher.c), start a
# throwaway cluster, and run a small version of the headline benchmark
# three times -- rows that meet a busy consumer wait out their back-off;
# the same rows with the zero-gap hand-off (each delivery settles and takes
# the next row, the oldest parked one first, in one statement); then with
# the consumer's capacity declared by set_limit(), so that no row meets
# BUSY at all -- with a live progress line; then print aion_wake.status
# and stop the cluster.  Nothing is left running.
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
	apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-server-dev-15 make gcc libpq-dev >/dev/null
	pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
	echo "== building and installing aion_wake"
	make -s PG_CONFIG=$PGBIN/pg_config >/dev/null
	make -s PG_CONFIG=$PGBIN/pg_config install >/dev/null
fi
ROWS=${DEMO_ROWS:-800}

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

gcc -O2 -Wall -Wextra -Werror -pthread -I"$($PGBIN/pg_config --includedir)" \
	examples/dispatcher.c -L"$($PGBIN/pg_config --libdir)" -lpq -o "$dir/dispatcher"

# One run of the reference dispatcher over $ROWS fresh rows; $1 is its mode.
run() {
	sql -c "SELECT count(*) FROM generate_series(1, $ROWS) g, aion_wake.enqueue('job-' || g, '{}', 'api')" >/dev/null
	runuser -u postgres -- "$dir/dispatcher" --conninfo "host=$dir port=$PORT dbname=postgres" \
		--mode "$1" --topic api --threads 16 --slots 4 --service-ms 20 --backoff-ms 1000 \
		--progress >"$dir/summary_$1"
}
field() { sed -n "s/^$2=//p" "$dir/summary_$1"; }

say "$ROWS jobs for a partner API that serves 4 requests at a time, 20 ms each: at best $((ROWS * 20 / 4 / 1000)) s."
cat <<'TEXT'
16 dispatchers claim jobs and offer them to the API.  A job that finds all
4 slots taken is answered BUSY and parked with a 1 s back-off: its fence
(visible_after) is the durable record that it must wait.

First without aion_wake's fast path: a parked job waits out its back-off,
and slots stand idle meanwhile.
TEXT
run fence

say "Now with the zero-gap hand-off: capacity unknown, BUSY still possible."
cat <<'TEXT'
Each delivery is complete(key, lease_token, next_rows => 1): in the same
statement and commit the freed slot re-offers the oldest parked job (its
fence moved straight to a new lease, compare-and-set), and the dispatcher
offers it at once, with no claim in between.  The back-off is still
written; it is only the floor.
TEXT
run handoff

say "Now with the capacity known: set_limit('api', 4)."
cat <<'TEXT'
No more than 4 jobs are ever leased at once, so none meets BUSY: nothing
is parked, nothing is pulsed.  A dispatcher without a slot blocks in
claim(wait) and is woken when one frees; each delivery hands its slot
straight to the next job (complete(..., next_rows => 1)).
TEXT
run limit

say "The three runs side by side:"
printf '%-36s %10s %12s %9s %11s\n' "" makespan utilisation bounces re-offered
for m in fence handoff limit; do
	case $m in
	fence) label="back-off only (fence)" ;;
	handoff) label="hand-off, capacity unknown" ;;
	limit) label="set_limit, capacity known" ;;
	esac
	printf '%-36s %8.2f s %11.0f%% %9s %11s\n' "$label" \
		"$(awk "BEGIN { print $(field $m makespan_ms) / 1000 }")" \
		"$(awk "BEGIN { print 100 * $(field $m utilisation) }")" \
		"$(field $m bounces)" "$(field $m reoffered)"
done
cat <<'TEXT'
(The 1.0 wiring -- complete() + pulse(topic, 1), every row through a claim --
keeps working: examples/dispatcher.c --mode aion.)
TEXT

say "What the worker saw (aion_wake.status):"
sql -x -c "SELECT * FROM aion_wake.status"

say "Done: the cluster is stopped and removed.  Next: README.md, 'Five minutes in psql'."
