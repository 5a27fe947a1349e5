#!/usr/bin/env bash
#
# test/examples/run.sh [RUN...]: run the example dispatchers
# (examples/dispatcher.py, examples/dispatcher.js, examples/dispatcher.c)
# against a throwaway cluster and check that each drains an outbox through a
# consumer too small for it without losing a row or delivering one twice.
# A RUN is python, node or c (the single-row wiring) or python-batch,
# node-batch or c-batch (the batched wiring, --batch 8); all six by default.
#
# Why: the examples are what users copy into their own dispatchers.  They
# must keep doing exactly what README's "Wiring a dispatcher" says, and this
# is what shows that they do, end to end, with the extension installed.
#
# It starts a cluster in a mktemp directory (Unix socket only, port
# $EXAMPLES_PORT, default 5597; aion_wake preloaded and serving database
# postgres).  For each run, a topic of its own gets $EXAMPLES_ROWS rows
# (default 400); for Python and Node every 50th of them is "poison" (the
# consumer always fails it: fail() twice, then dead_letter() at the third
# attempt; the C dispatcher has no failure path).  The Python and Node
# examples run with --drain (they stop once their topic is empty), the C
# one stops when it has delivered every row it counted at the start: a
# consumer of 4 slots x 5 ms, a BUSY back-off of 2 s, 8 dispatchers
# single-row or 2 dispatchers of 8 rows in flight each batched, bounded by
# $EXAMPLES_SECONDS (default 120).  (Each settle hands its freed slots to
# the next rows, the oldest parked first; a row that bounces again takes
# a slot without a delivery, so some parked rows wait for their fence: the
# back-off is the floor, as README says.)  Each example prints one line
# per outcome ("delivered KEY", "busy KEY", ...; the C one with
# --print-outcomes).  Then:
#   - it exited 0 within the bound, and its topic has no row left and no
#     entry in the parked set (aion_wake.parked, waited for);
#   - every non-poison key was printed "delivered" exactly once, and no
#     other key was;
#   - the poison keys are exactly the topic's dead_letters, each printed
#     "failed" twice and "dead" once;
#   - no call was refused for a stale lease_token;
#   - the consumer was overloaded (BUSY answers) and pulses re-offered
#     parked rows (aion_wake.status.rows_reoffered grew);
#   - batched runs: the batch forms were called (complete_many(keys,
#     tokens, next_rows) and park_many(keys, backoff, tokens) in
#     pg_stat_user_functions, waited for: a backend reports its counts when
#     it exits).
# The batched runs need aion_wake 1.2: with an older extversion each is
# skipped with a message saying so.  One summary line per run, then
# "examples: N passed, M failed, K skipped"; exit 1 on any failure.  The
# temp dir (server log, the examples' output) is kept when a check fails.
#
# The Node example's pg comes from the npm registry: this script runs
# `npm install` in examples/ (examples/package.json; node_modules is not
# committed).  The Python one needs Debian's python3-psycopg2 (run with
# /usr/bin/python3 unless EXAMPLES_PYTHON names another interpreter).  The
# C one is built into the temp dir with $PG_BINDIR/pg_config's libpq.
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
[ ${#EXAMPLES[@]} -gt 0 ] || EXAMPLES=(python node c python-batch node-batch c-batch)
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
SKIPPED=0

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
track_functions = all
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

# calls of one aion_wake function (its signature), as backends reported
# them; 0 when there is no such function
calls() {
	q "SELECT coalesce((SELECT calls FROM pg_stat_user_functions
	                     WHERE funcid = to_regprocedure('aion_wake.$1')), 0)"
}
BATCH_COMPLETE='complete_many(text[],bigint[],integer,interval)'
BATCH_PARK='park_many(text[],interval,bigint[])'

# wait_for SQL: poll until SQL returns t, at most 10 s; false if it never did
wait_for() {
	local _
	for _ in $(seq 100); do
		[ "$(q "$1")" = t ] && return 0
		sleep 0.1
	done
	return 1
}

# The options of the Python and Node examples (the C one has its own).
PY_NODE=(--drain --slots 4 --service-ms 5 --backoff '2 s' --retry-after '100 ms'
	--max-attempts 3 --wait '1 s')
C_OPTS=(--print-outcomes --slots 4 --service-ms 5 --backoff-ms 2000 --wait-ms 1000)
SINGLE=(--dispatchers 8)
BATCHED=(--dispatchers 2 --batch 8)

# run_example NAME POISON COMMAND...: one run against a topic of its own;
# every POISON-th row is poison (0: none).
run_example() {
	local name=$1 topic=ex_$1 out=$TMP/$1.out poison=$2
	shift 2
	local problems=() r0 r1 c0=0 c1 p0=0 p1 t0 t1 rc=0 batched=
	case $name in *-batch) batched=1 ;; esac
	q "SELECT count(*) FROM (SELECT aion_wake.enqueue('$name-' || g,
	       jsonb_build_object('n', g, 'poison', $poison > 0 AND g % greatest($poison, 1) = 0),
	       '$topic')
	     FROM generate_series(1, $ROWS) g) e" >/dev/null
	seq 1 "$ROWS" | awk -v n="$name" -v p="$poison" 'p == 0 || $1 % p != 0 { print n "-" $1 }' \
		| sort >"$TMP/$name.want_delivered"
	seq 1 "$ROWS" | awk -v n="$name" -v p="$poison" 'p > 0 && $1 % p == 0 { print n "-" $1 }' \
		| sort >"$TMP/$name.want_dead"
	r0=$(q "SELECT rows_reoffered FROM aion_wake.status")
	if [ -n "$batched" ]; then
		c0=$(calls "$BATCH_COMPLETE")
		p0=$(calls "$BATCH_PARK")
	fi
	t0=$(date +%s.%N)
	PGHOST=$TMP PGPORT=$PORT PGDATABASE=postgres PGUSER=postgres \
		timeout "$BOUND" "$@" --topic "$topic" >"$out" 2>"$TMP/$name.err" || rc=$?
	t1=$(date +%s.%N)
	r1=$(q "SELECT rows_reoffered FROM aion_wake.status")

	awk '$1 == "delivered" { print $2 }' "$out" | sort >"$TMP/$name.delivered"
	awk '$1 == "dead" { print $2 }' "$out" | sort >"$TMP/$name.dead"
	q "SELECT dispatch_key FROM aion_wake.dead_letters WHERE topic = '$topic'" | sort >"$TMP/$name.dead_letters"
	local left twice lost extra stale busy reoffered dead failed_ok
	left=$(q "SELECT count(*) FROM aion_wake.outbox WHERE topic = '$topic'")
	# a settled row's park is forgotten at its commit
	wait_for "SELECT NOT EXISTS (SELECT FROM aion_wake.parked WHERE topic = '$topic')" \
		|| problems+=("$(q "SELECT count(*) FROM aion_wake.parked WHERE topic = '$topic'") rows left in the parked set")
	if [ -n "$batched" ]; then
		wait_for "SELECT coalesce((SELECT calls FROM pg_stat_user_functions
		            WHERE funcid = to_regprocedure('aion_wake.$BATCH_COMPLETE')), 0) > $c0
		          AND coalesce((SELECT calls FROM pg_stat_user_functions
		            WHERE funcid = to_regprocedure('aion_wake.$BATCH_PARK')), 0) > $p0" \
			|| problems+=("the batch forms were not both called (complete: $c0 -> $(calls "$BATCH_COMPLETE"), park: $p0 -> $(calls "$BATCH_PARK"))")
	fi
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

	printf '%-12s %d rows: %d delivered once, %d dead-lettered, %d lost, %d twice, %d BUSY parks, %d re-offered, %.1f s: %s\n' \
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

VERSION=$(q "SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'")
NODE_READY=
for ex in "${EXAMPLES[@]}"; do
	case $ex in
	python | node | c | python-batch | node-batch | c-batch) ;;
	*)
		echo "usage: $0 [python] [node] [c] [python-batch] [node-batch] [c-batch]" >&2
		exit 2
		;;
	esac
	if [ "$ex" != "${ex%-batch}" ] &&
		[ "$(q "SELECT string_to_array('$VERSION', '.')::int[] < '{1,2}'")" = t ]; then
		printf '%-12s skipped: the batched mode needs aion_wake 1.2, the installed extversion is %s\n' \
			"$ex" "$VERSION"
		SKIPPED=$((SKIPPED + 1))
		continue
	fi
	case $ex in
	python*)
		# Debian's python3-psycopg2 is for Debian's python3, which another
		# python3 earlier in PATH (pyenv, a venv) may hide
		py=
		for p in ${EXAMPLES_PYTHON:-} /usr/bin/python3 python3; do
			if "$p" -c 'import psycopg2' 2>/dev/null; then py=$p; break; fi
		done
		if [ -z "$py" ]; then
			printf '%-12s cannot run: python3 with psycopg2 is needed (apt-get install python3-psycopg2): FAIL\n' "$ex"
			FAILED=$((FAILED + 1))
			continue
		fi
		if [ "$ex" = python ]; then
			run_example "$ex" 50 "$py" "$ROOT/examples/dispatcher.py" "${PY_NODE[@]}" "${SINGLE[@]}"
		else
			run_example "$ex" 50 "$py" "$ROOT/examples/dispatcher.py" "${PY_NODE[@]}" "${BATCHED[@]}"
		fi
		;;
	node*)
		if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
			printf '%-12s cannot run: node and npm are needed (apt-get install nodejs npm): FAIL\n' "$ex"
			FAILED=$((FAILED + 1))
			continue
		fi
		if [ -z "$NODE_READY" ] && ! (cd "$ROOT/examples" &&
			npm install --no-audit --no-fund --loglevel=error >"$TMP/npm.log" 2>&1); then
			printf '%-12s cannot run: npm install in examples/ failed: FAIL\n' "$ex"
			tail -5 "$TMP/npm.log" | sed 's/^/        /'
			FAILED=$((FAILED + 1))
			continue
		fi
		NODE_READY=1
		if [ "$ex" = node ]; then
			run_example "$ex" 50 node "$ROOT/examples/dispatcher.js" "${PY_NODE[@]}" "${SINGLE[@]}"
		else
			run_example "$ex" 50 node "$ROOT/examples/dispatcher.js" "${PY_NODE[@]}" "${BATCHED[@]}"
		fi
		;;
	c*)
		if [ ! -x "$TMP/dispatcher" ] && ! cc -O2 -Wall -Wextra -Werror -pthread \
			-I"$("$PGBIN/pg_config" --includedir)" "$ROOT/examples/dispatcher.c" \
			-L"$("$PGBIN/pg_config" --libdir)" -lpq -o "$TMP/dispatcher" >"$TMP/cc.log" 2>&1; then
			printf '%-12s cannot run: examples/dispatcher.c did not build: FAIL\n' "$ex"
			tail -5 "$TMP/cc.log" | sed 's/^/        /'
			FAILED=$((FAILED + 1))
			continue
		fi
		# --threads, not --dispatchers: the C dispatcher's own name
		if [ "$ex" = c ]; then
			run_example "$ex" 0 "$TMP/dispatcher" "${C_OPTS[@]}" --threads 8
		else
			run_example "$ex" 0 "$TMP/dispatcher" "${C_OPTS[@]}" --threads 2 --batch 8
		fi
		;;
	esac
done

echo "examples: $PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
