#!/usr/bin/env bash
#
# test/examples/run.sh [python] [node]: run the example dispatchers
# (examples/dispatcher.py, examples/dispatcher.js) against a throwaway
# cluster and check that each drains an outbox through a consumer too small
# for it without losing a row or delivering one twice.
#
# Why: the examples are what users copy into their own dispatchers.  They
# must keep doing exactly what README's "Wiring a dispatcher" says, and this
# is what shows that they do, end to end, with the extension installed.
#
# It starts a cluster in a mktemp directory (Unix socket only, port
# $EXAMPLES_PORT, default 5597; aion_wake preloaded and serving database
# postgres).  For each example, a topic of its own gets $EXAMPLES_ROWS rows
# (default 400), every 50th of them "poison" (the consumer always fails it:
# fail() twice, then dead_letter() at the third attempt).  The example runs
# with --drain (it stops once its topic is empty): 8 dispatchers, a consumer
# of 4 slots x 5 ms, a BUSY back-off of 2 s, bounded by $EXAMPLES_SECONDS
# (default 120).  (Each settle hands its freed slot to the next row,
# the oldest parked one first; a row that bounces again takes a slot
# without a delivery, so some parked rows wait for their fence: the
# back-off is the floor, as README says.)  Each example prints one line
# per outcome ("delivered KEY", "busy KEY", ...).  Then:
#   - it exited 0 within the bound, and its topic has no row left;
#   - every non-poison key was printed "delivered" exactly once, and no
#     other key was;
#   - the poison keys are exactly the topic's dead_letters, each printed
#     "failed" twice and "dead" once;
#   - no call was refused for a stale lease_token;
#   - the consumer was overloaded (BUSY answers) and pulses re-offered
#     parked rows (aion_wake.status.rows_reoffered grew).
# One summary line per example, then "examples: N passed, M failed"; exit 1
# on any failure.  The temp dir (server log, the examples' output) is kept
# when a check fails.
#
# The Node example's pg comes from the npm registry: this script runs
# `npm install` in examples/ (examples/package.json; node_modules is not
# committed).  The Python one needs Debian's python3-psycopg2 (run with
# /usr/bin/python3 unless EXAMPLES_PYTHON names another interpreter).
#
# Run as root (the server then runs as postgres) or as postgres.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PGBIN=${PG_BINDIR:-$(pg_config --bindir)}
PORT=${EXAMPLES_PORT:-5597}
ROWS=${EXAMPLES_ROWS:-400}
BOUND=${EXAMPLES_SECONDS:-120}
EXAMPLES=("$@")
[ ${#EXAMPLES[@]} -gt 0 ] || EXAMPLES=(python node)
export LC_ALL=C

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

TMP=$(mktemp -d /tmp/aion_wake_examples.XXXXXX)
chmod 700 "$TMP"
[ "$(id -u)" -eq 0 ] && chown postgres "$TMP"
DATA=$TMP/data
FAILED=0
PASSED=0

cleanup() {
	local rc=$?
	if [ -f "$DATA/postmaster.pid" ]; then
		as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || true
	fi
	if [ "$rc" -ne 0 ] || [ "$FAILED" -ne 0 ]; then
		echo "examples: kept $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

q() {
	as_pg "$PGBIN/psql" -h "$TMP" -p "$PORT" -d postgres -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"
}

as_pg "$PGBIN/initdb" -D "$DATA" -U postgres -A trust --no-sync -E UTF8 --locale=C \
	>"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log" >&2; exit 1; }
cat <<CONF | as_pg tee -a "$DATA/postgresql.conf" >/dev/null
# aion_wake example dispatchers
port = $PORT
listen_addresses = ''
unix_socket_directories = '$TMP'
max_connections = 40
shared_preload_libraries = 'aion_wake'
aion_wake.database = 'postgres'
fsync = off
log_min_messages = warning
CONF
as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$TMP/server.log" -w -t 60 start >/dev/null \
	|| { cat "$TMP/server.log" >&2; exit 1; }
q "CREATE EXTENSION aion_wake" >/dev/null
# The worker looks for the extension when something wakes it, then rebuilds
# its (empty) set: let that happen before the first example runs.
q "SELECT aion_wake.pulse('warm_up', 1)" >/dev/null
for _ in $(seq 300); do
	grep -q 'rebuilt the parked set' "$TMP/server.log" && break
	sleep 0.1
done

# run_example NAME COMMAND...: one example against a topic of its own.
run_example() {
	local name=$1 topic=ex_$1 out=$TMP/$1.out
	shift
	local problems=() r0 r1 t0 t1 rc=0
	q "SELECT count(*) FROM (SELECT aion_wake.enqueue('$name-' || g,
	       jsonb_build_object('n', g, 'poison', g % 50 = 0), '$topic')
	     FROM generate_series(1, $ROWS) g) e" >/dev/null
	seq 1 "$ROWS" | awk -v n="$name" '$1 % 50 != 0 { print n "-" $1 }' | sort >"$TMP/$name.want_delivered"
	seq 1 "$ROWS" | awk -v n="$name" '$1 % 50 == 0 { print n "-" $1 }' | sort >"$TMP/$name.want_dead"
	r0=$(q "SELECT rows_reoffered FROM aion_wake.status")
	t0=$(date +%s.%N)
	PGHOST=$TMP PGPORT=$PORT PGDATABASE=postgres PGUSER=postgres \
		timeout "$BOUND" "$@" --topic "$topic" --drain --dispatchers 8 --slots 4 \
		--service-ms 5 --backoff '2 s' --retry-after '100 ms' --max-attempts 3 \
		--wait '1 s' >"$out" 2>"$TMP/$name.err" || rc=$?
	t1=$(date +%s.%N)
	r1=$(q "SELECT rows_reoffered FROM aion_wake.status")

	awk '$1 == "delivered" { print $2 }' "$out" | sort >"$TMP/$name.delivered"
	awk '$1 == "dead" { print $2 }' "$out" | sort >"$TMP/$name.dead"
	q "SELECT dispatch_key FROM aion_wake.dead_letters WHERE topic = '$topic'" | sort >"$TMP/$name.dead_letters"
	local left twice lost extra stale busy reoffered dead failed_ok
	left=$(q "SELECT count(*) FROM aion_wake.outbox WHERE topic = '$topic'")
	twice=$(uniq -d "$TMP/$name.delivered" | wc -l)
	lost=$(sort -u "$TMP/$name.delivered" "$TMP/$name.dead_letters" \
		| comm -13 - <(sort "$TMP/$name.want_delivered" "$TMP/$name.want_dead") | wc -l)
	extra=$(sort -u "$TMP/$name.delivered" | comm -23 - "$TMP/$name.want_delivered" | wc -l)
	stale=$(grep -c '^stale ' "$out" || true)
	busy=$(grep -c '^busy ' "$out" || true)
	dead=$(wc -l <"$TMP/$name.dead")
	failed_ok=$(awk '$1 == "failed" { n[$2]++ } END { for (k in n) if (n[k] == 2) c++; print c + 0 }' "$out")
	reoffered=$((r1 - r0))

	if [ "$rc" -eq 124 ]; then
		problems+=("did not drain within ${BOUND} s")
	elif [ "$rc" -ne 0 ]; then
		problems+=("exited $rc: $(head -c 300 "$TMP/$name.err")")
	fi
	[ "$left" -eq 0 ] || problems+=("$left rows left in the outbox")
	[ "$twice" -eq 0 ] || problems+=("$twice keys delivered twice")
	[ "$lost" -eq 0 ] || problems+=("$lost keys neither delivered nor dead-lettered")
	[ "$extra" -eq 0 ] || problems+=("$extra poison or unknown keys delivered")
	cmp -s "$TMP/$name.dead_letters" "$TMP/$name.want_dead" \
		|| problems+=("dead_letters is not exactly the poison rows")
	cmp -s "$TMP/$name.dead" "$TMP/$name.want_dead" \
		|| problems+=("the dead-lettered rows printed are not exactly the poison rows")
	[ "$failed_ok" -eq "$(wc -l <"$TMP/$name.want_dead")" ] \
		|| problems+=("poison rows were not each failed twice before dead_letter")
	[ "$stale" -eq 0 ] || problems+=("$stale calls refused for a stale lease_token")
	[ "$busy" -gt 0 ] || problems+=("the consumer never answered BUSY: nothing was parked")
	[ "$reoffered" -gt 0 ] || problems+=("no parked row was re-offered by a pulse")

	printf '%-7s %d rows: %d delivered once, %d dead-lettered, %d lost, %d twice, %d BUSY parks, %d re-offered, %.1f s: %s\n' \
		"$name" "$ROWS" "$(sort -u "$TMP/$name.delivered" | wc -l)" "$dead" "$lost" "$twice" \
		"$busy" "$reoffered" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		"$([ ${#problems[@]} -eq 0 ] && echo ok || echo FAIL)"
	if [ ${#problems[@]} -eq 0 ]; then
		PASSED=$((PASSED + 1))
	else
		FAILED=$((FAILED + 1))
		printf '        %s\n' "${problems[@]}"
	fi
}

for ex in "${EXAMPLES[@]}"; do
	case $ex in
	python)
		# Debian's python3-psycopg2 is for Debian's python3, which another
		# python3 earlier in PATH (pyenv, a venv) may hide
		py=
		for p in ${EXAMPLES_PYTHON:-} /usr/bin/python3 python3; do
			if "$p" -c 'import psycopg2' 2>/dev/null; then py=$p; break; fi
		done
		if [ -z "$py" ]; then
			echo "python  cannot run: python3 with psycopg2 is needed (apt-get install python3-psycopg2): FAIL"
			FAILED=$((FAILED + 1))
			continue
		fi
		run_example python "$py" "$ROOT/examples/dispatcher.py"
		;;
	node)
		if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
			echo "node    cannot run: node and npm are needed (apt-get install nodejs npm): FAIL"
			FAILED=$((FAILED + 1))
			continue
		fi
		if ! (cd "$ROOT/examples" && npm install --no-audit --no-fund --loglevel=error \
			>"$TMP/npm.log" 2>&1); then
			echo "node    cannot run: npm install in examples/ failed: FAIL"
			tail -5 "$TMP/npm.log" | sed 's/^/        /'
			FAILED=$((FAILED + 1))
			continue
		fi
		run_example node node "$ROOT/examples/dispatcher.js"
		;;
	*)
		echo "usage: $0 [python] [node]" >&2
		exit 2
		;;
	esac
done

echo "examples: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
