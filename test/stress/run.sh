#!/usr/bin/env bash
#
# test/stress/run.sh [SECONDS] [SEED]: a randomized, seeded stress test of
# aion_wake, with the guarantees checked from a ledger afterwards.
#
# Why: the regression, isolation and TAP suites pin down interleavings one
# at a time; this one lets many dispatchers, producers, pulses, re-offers,
# rollbacks, expiring leases and a parked set that fills run into each other
# for minutes, then accounts for every row.
#
# It starts a throwaway cluster (mktemp dir, Unix socket only, port
# $STRESS_PORT default 5580, aion_wake serving database postgres,
# max_parked_rows = 1024 so the set fills now and then, pulse_credit_ms =
# 250), loads setup.sql (a ledger table, stress_log, filled by a trigger on
# aion_wake.outbox and by the scripts in the same transactions as the calls),
# and runs pgbench for SECONDS (default 120) with $STRESS_CLIENTS clients
# (default 6), --random-seed=SEED (default $RANDOM) and these scripts:
#   dispatch.sql  claim (sometimes blocking) / offer / complete, park, fail,
#                 dead_letter or abandon, each in its own transaction,
#                 rolled back at random; pulses and raw NOTIFYs on complete
#   enqueue.sql   producers, some rows delayed
#   pulse.sql     pulse(), raw NOTIFY 'topic:k' and 'topic', rolled-back and
#                 summed pulses, malformed payloads, big (draining) pulses,
#                 reoffer() committed or rolled back
#   batch.sql     claim 5-25 rows and park them all in the same transaction
#   stale.sql     complete/park/fail with a lease token that may be stale
#   repark.sql    re-park one of the oldest parked rows, rolled back 40% of
#                 the time
#   probe.sql     a lone park in a topic of its own, a pulse from another
#                 session while pending (dblink) or after commit: the row must
#                 come back; or a wake whose fence passes before commit
#   limited.sql   a dispatcher of the limited topics l0 (limit 1) and l1
#                 (limit 3): claims from one, from both, or from l1, t2 and
#                 l0 at once (claim(topics[])), blocking or not; complete,
#                 park, fail, dead_letter or let the lease expire, rolled
#                 back at random
#   sample.sql    a sample of aion_wake.topics' in_flight of l0 and l1
#   rated.sql     a dispatcher of the rated topics q0 (5 starts per 200 ms),
#                 q1 (2 per 1 s, and a limit of 1), q2 (300 per 500 ms, so
#                 that a window holds more than 256 starts) and q3 (4 per
#                 3 s, longer than a restart takes): claims of
#                 one, of it and t1, or of all three (claim(topics[])),
#                 blocking or not, 12% rolled back; then a hand-off
#                 (complete with next_rows, or complete_many with next_rows
#                 over every row taken), a park with a pulse, or nothing (the
#                 leases expire); every row a claim or a hand-off returned is
#                 logged as a start in stress_starts at leased_until - lease,
#                 and logged again after a ROLLBACK, whose starts count too
# and, beside pgbench, a controller that every 1-3 s pauses a rated topic
# for 100-600 ms (sometimes rolled back, sometimes resumed early) and, in
# the middle of the load, raises q0 to 8 starts per 200 ms.
# Then it stops the load and checks, from the ledger and the tables:
#   G2  no pending entry or waiter is left; every committed park that entered
#       the set is still there, confirmed, at its fence; one pulse per topic
#       re-offers all of them (the worker does, after the pulse); every probe
#       got its row back; no re-offer was spent on a row whose fence had
#       passed; rows left out of the set are no more than set_full
#   G1  every key enqueued is in exactly one of outbox, dead_letters,
#       completed, and left only through complete() or dead_letter()
#   G4  attempt = the number of committed fail() calls; park, re-offer and
#       claim never change it
#   G3  every re-offer (the worker's, or a claimer's spending a pulse slot
#       on a parked row: re-offer and claim in one UPDATE) acted on the row's
#       latest committed park, at that park's fence, with nothing committed
#       on the row in between; every complete/park/fail/dead_letter that
#       acted carried the row's current lease token; claims took only
#       visible rows or parks so spent, each with a fresh token;
#       every function returned true exactly when it changed the row
#   G8  the leases of each limited topic, taken from the ledger (from the
#       claim's UPDATE, row_claim or row_claim_parked, to the first later
#       change of the row, or the lease's end if that comes first), never
#       overlap more than its limit; no
#       sample of topics.in_flight exceeds it; once the load stopped and
#       every lease ended, in_flight is 0 (no slot leaked), and a claim of
#       each limited topic that has a visible row gets one at once (no
#       reservation leaked)
#   G10 from the starts' ledger: no window [t, t + per) of a rated topic
#       holds more than max_starts starts, rolled-back ones included, each
#       window judged by the rate in force at its end (q0's rate is only
#       raised, per unchanged); the largest count in any window and the
#       rate achieved (starts per second against max_starts / per, for
#       information) are printed; no start falls in a pause while it was
#       certainly in force (from the clock after its commit to its end or
#       the clock before the next call of its topic); and once every window
#       has passed, a claim of each rated topic takes as many rows as its
#       rate, limit and visible rows allow (no start or reservation leaked)
#   and that the worker never restarted, the lost-wake detector never fired
#   (status.lost_wakes is 0, no "lost wake" line in the log) and the server
#   log holds no crash, PANIC, TRAP, FATAL or ERROR.  The status counters
#   are printed.
# The last line is "stress: mode M: N passed, F failed (seed S)"; exit 1 on
# failure.
# The seed fixes every random choice of the scripts, not the timing, so a
# race found once may need a few runs to show again.
#
# That is mode one.  Mode two (STRESS_MODE=two) aims at the limits'
# bookkeeping across databases, restarts and settles that are not the
# plain one-per-lease kind:
#   * aion_wake.database = 'db1,db2', two databases each served by a
#     worker, each with the ledger of setup.sql, the limited topics l0
#     (limit 1) and l1 (limit 3), and one limited topic per client, r0, r1,
#     ... (limit 1); a pgbench per database, $STRESS_CLIENTS / 2 clients
#     each (at least 2), the same topic names in both (the limits are per
#     database and must not mix);
#   * the load runs in three parts: after the first third the server is
#     restarted with pg_ctl restart -m fast, after the second it is stopped
#     with -m immediate and started again (crash recovery), each time with
#     leases live and transactions open (the clients that were cut off end,
#     a new pgbench takes over): the limits' counts are rebuilt from
#     leased_until each time;
#   * the scripts: limited.sql, enqueue.sql, stale.sql, sample.sql and
#     rated.sql as in mode one (with the controller: q0's raise comes
#     between the two restarts, so that the crash restart loads the raised
#     rate, each time with a full window, and the windows across both
#     restarts are checked), and
#       twice.sql   one lease settled twice in one transaction (fail then
#                   dead_letter then claim; fail then complete, fail, or
#                   park then dead_letter with next_rows), rolled back at
#                   random: its slot must be handed on once
#       retake.sql  a lease settled with back-off 0 and its row claimed
#                   again by the same transaction, then ROLLBACK or
#                   ROLLBACK TO SAVEPOINT: the first lease is live again and
#                   its slot held, so a claim of a second row of that topic
#                   must get nothing while it lasts
#   then, in each database: G1, G4, G3, G8 and G10 as above (the ledger never
#   holds more live leases of a topic than its limit, in_flight returns to
#   0, no reservation leaked); both workers run at the end; the server log
#   holds no crash, PANIC, TRAP, FATAL or ERROR outside the two restarts;
#   the pgbench that ran last had no failure, the two cut off by a restart
#   none but lost connections.
# By default (STRESS_MODE=both) mode one runs for SECONDS, then mode two for
# $STRESS_TWO_SECONDS (default the smaller of SECONDS and 55), with the same
# seed; STRESS_MODE=one or two runs one of them for SECONDS.  The server and
# clients are those of $PG_CONFIG (default the pg_config on PATH), or of
# $PG_BINDIR.
#
# Run as root (the server, psql and pgbench then run as postgres) or as
# postgres.  The temp dir (data, server log, pgbench output) is kept when the
# run fails, or always with STRESS_KEEP=1.  STRESS_MUTATE='SQL' runs SQL
# between the load and the checks (in mode two: in each database), to see a
# check fail.

set -euo pipefail

# The whole script is one compound command, read before it runs, so that
# editing this file during a run does not change the run.
{

DURATION=${1:-120}
SEED=${2:-$RANDOM}
CLIENTS=${STRESS_CLIENTS:-6}
PORT=${STRESS_PORT:-5580}
MODE=${STRESS_MODE:-both}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PGBIN=${PG_BINDIR:-$("${PG_CONFIG:-pg_config}" --bindir)}

case "$DURATION$SEED$CLIENTS${STRESS_TWO_SECONDS:-}" in
*[!0-9]*) echo "usage: $0 [SECONDS] [SEED]  (integers; env STRESS_MODE, STRESS_CLIENTS, STRESS_PORT)" >&2; exit 2 ;;
esac
case "$MODE" in
one | two) ;;
both)
	# one mode after the other, each on its own cluster
	rc1=0 rc2=0
	STRESS_MODE=one bash "$HERE/run.sh" "$DURATION" "$SEED" || rc1=$?
	two_seconds=${STRESS_TWO_SECONDS:-$((DURATION < 55 ? DURATION : 55))}
	STRESS_MODE=two bash "$HERE/run.sh" "$two_seconds" "$SEED" || rc2=$?
	echo "stress: mode one $([ $rc1 = 0 ] && echo passed || echo FAILED), mode two $([ $rc2 = 0 ] && echo passed || echo FAILED) (seed $SEED)"
	[ $rc1 = 0 ] && [ $rc2 = 0 ] && exit 0
	exit 1
	;;
*) echo "$0: STRESS_MODE is one, two or both, not '$MODE'" >&2; exit 2 ;;
esac
if [ "$MODE" = two ]; then
	DBS="db1 db2"
	# a pgbench per database, half the clients each
	DB_CLIENTS=$(( (CLIENTS + 1) / 2 < 2 ? 2 : (CLIENTS + 1) / 2 ))
else
	DBS=postgres
	DB_CLIENTS=$CLIENTS
fi
DB=${DBS%% *}

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

TMP=$(mktemp -d /tmp/aion_wake_stress.XXXXXX)
chmod 700 "$TMP"
[ "$(id -u)" -eq 0 ] && chown postgres "$TMP"
DATA=$TMP/data
LOG=$TMP/server.log

cleanup() {
	local rc=$?
	if [ -f "$DATA/postmaster.pid" ]; then
		as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || true
	fi
	if [ -n "${STRESS_KEEP:-}" ] || [ "$rc" -ne 0 ]; then
		echo "stress: kept $TMP (start it with: pg_ctl -D $TMP/data -l $TMP/server.log start, as postgres)" >&2
	else
		rm -rf "$TMP"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s  %s\n' "$(date +%H:%M:%S)" "$*"; }

# q SQL: run SQL in database $DB, print unaligned tuples
q() {
	as_pg "$PGBIN/psql" -h "$TMP" -p "$PORT" -d "$DB" -X -q -A -t -F ' | ' \
		-v ON_ERROR_STOP=1 -c "$1"
}

# The rates' controller (G10), in the background during the load: every
# 1-3 s it pauses a rated topic (q0, q1, q2) of one database for 100-600 ms
# (10% rolled back; 40% resumed at half time), recording each pause and
# resume in stress_pauses with the clock before and after its commit; and
# at RAISE (the load's middle: in mode two, between the two restarts) it
# raises q0 from 5 to 8 starts per 200 ms in every database, recording the
# raise in stress_rates in the same transaction.  A call cut off by a
# restart is left as it is (the raise is tried again).  Its random choices
# follow SEED.
# ctl DB SQL...: psql in database DB, one -c per argument, one session
ctl() {
	local db=$1 s
	shift
	local args=()
	for s in "$@"; do args+=(-c "$s"); done
	as_pg "$PGBIN/psql" -h "$TMP" -p "$PORT" -d "$db" -X -q -A -t -v ON_ERROR_STOP=1 "${args[@]}"
}
# Stopped with TERM at the load's end: it ends then, or when the psql in
# flight has returned (a call is never cut off by the stop).
controller() {
	local end=$1 raise=$2 raised="" db t ms k
	trap 'kill $! 2>/dev/null; exit 0' TERM
	RANDOM=$((SEED + 7))
	while :; do
		sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))" &
		wait $!
		[ "$(date +%s)" -lt "$end" ] || break
		if [ "$(date +%s)" -ge "$raise" ]; then
			for db in $DBS; do
				[[ " $raised " != *" $db "* ]] || continue
				if ctl "$db" "BEGIN" "INSERT INTO stress_rates VALUES ('q0', 8, '200 ms', clock_timestamp())" \
					"SELECT aion_wake.set_rate('q0', 8, '200 ms')" "COMMIT"; then
					raised="$raised $db"
					echo "$(date +%T.%N) $db: q0 raised to 8 per 200 ms"
				fi
			done
		fi
		set -- $DBS
		shift $((RANDOM % $#))
		db=$1 t=q$((RANDOM % 3)) ms=$((100 + RANDOM % 500)) k=$((RANDOM % 100))
		if [ "$k" -lt 10 ]; then
			ctl "$db" "BEGIN" "SELECT aion_wake.pause('$t', clock_timestamp() + interval '$ms ms')" "ROLLBACK" \
				&& echo "$(date +%T.%N) $db: $t paused for $ms ms, rolled back"
			continue
		fi
		ctl "$db" "BEGIN" "SELECT stress_pause('$t', $ms)" "COMMIT" \
			"UPDATE stress_pauses SET committed = clock_timestamp() WHERE id = currval('stress_pauses_id_seq')" \
			&& echo "$(date +%T.%N) $db: $t paused for $ms ms"
		if [ "$k" -ge 60 ]; then
			sleep "0.$(printf '%03d' $((ms / 2)))" &
			wait $!
			ctl "$db" "BEGIN" "SELECT stress_resume('$t')" "COMMIT" \
				"UPDATE stress_pauses SET committed = clock_timestamp() WHERE id = currval('stress_pauses_id_seq')" \
				&& echo "$(date +%T.%N) $db: $t resumed"
		fi
	done >>"$TMP/controller.log" 2>&1
}

say "stress: mode $MODE, ${DURATION}s, $CLIENTS clients, seed $SEED, cluster in $TMP (port $PORT)"
as_pg "$PGBIN/initdb" -D "$DATA" -U postgres -A trust --no-sync -E UTF8 --locale=C \
	>"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log" >&2; exit 1; }
cat <<CONF | as_pg tee -a "$DATA/postgresql.conf" >/dev/null
# aion_wake stress cluster
port = $PORT
listen_addresses = ''
unix_socket_directories = '$TMP'
max_connections = $((CLIENTS + 20))
shared_preload_libraries = 'aion_wake'
aion_wake.database = '${DBS// /,}'
aion_wake.max_parked_rows = 1024
aion_wake.pulse_credit_ms = 250
fsync = off
log_line_prefix = '%m [%p] %b '
log_min_messages = warning
log_min_error_statement = error
CONF
as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null \
	|| { cat "$LOG" >&2; exit 1; }

for DB in $DBS; do
	if [ "$DB" != postgres ]; then
		as_pg "$PGBIN/psql" -h "$TMP" -p "$PORT" -d postgres -X -q -v ON_ERROR_STOP=1 \
			-c "CREATE DATABASE $DB" >/dev/null
	fi
	as_pg "$PGBIN/psql" -h "$TMP" -p "$PORT" -d "$DB" -X -q -v ON_ERROR_STOP=1 \
		-f "$HERE/setup.sql" >/dev/null
	q "INSERT INTO stress_conf VALUES ('host=$TMP port=$PORT dbname=$DB user=postgres')" >/dev/null
	if [ "$MODE" = two ]; then
		# retake.sql's topics, one per client, limit 1 (the limits are per
		# database: r0 of db1 and r0 of db2 are two topics); and more rows
		# for l0 and l1, which twice.sql dead-letters fast
		q "SELECT aion_wake.set_limit('r' || g, 1) FROM generate_series(0, $DB_CLIENTS - 1) g" >/dev/null
		q "WITH k AS (SELECT nextval('stress_key_seq')::text AS k, g % 2 AS t FROM generate_series(1, 400) g),
		        e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', 'l' || t))
		   INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e" >/dev/null
	fi
	# the worker must be up (and have rebuilt its set) before the load starts
	if [ "$(q "SELECT stress_wait('(SELECT worker_pid IS NOT NULL AND listening FROM aion_wake.status)', '30 s')")" != t ]; then
		echo "stress: the aion_wake worker of database $DB did not start" >&2
		q "SELECT * FROM aion_wake.status" >&2 || true
		exit 1
	fi
	# The worker looks for the extension when something wakes it; a pulse
	# does, and it then rebuilds its (empty) set.  Wait for that, so that no
	# rebuild runs in the middle of the load and papers over a lost entry.
	q "SELECT aion_wake.pulse('t0', 1)" >/dev/null
	for _ in $(seq 300); do
		grep -q "rebuilt the parked set of database \"$DB\"" "$LOG" && break
		sleep 0.1
	done
	if ! grep -q "rebuilt the parked set of database \"$DB\"" "$LOG"; then
		echo "stress: the aion_wake worker of database $DB did not rebuild its set" >&2
		exit 1
	fi
done
DB=${DBS%% *}
WORKER0=$(q "SELECT worker_pid || ' ' || started_at FROM aion_wake.status")
# Until CREATE DATABASE, a worker of db1 or db2 exits at once ("database
# does not exist") and is started again: in mode two the log check leaves
# out everything written before both workers listen.
LOG_SKIP=""
[ "$MODE" = one ] || LOG_SKIP=" 1,$(wc -l <"$LOG")"

# ---------------------------------------------------------------------------
# The load
# ---------------------------------------------------------------------------
PGBENCH_OPTS=(-h "$TMP" -p "$PORT" -n -c "$DB_CLIENTS" -j "$DB_CLIENTS"
	--max-tries=10 --failures-detailed -D skid=0 -D stok=0)
if [ "$MODE" = one ]; then
	say "load: pgbench -c $CLIENTS -T $DURATION --random-seed=$SEED"
	controller $(($(date +%s) + DURATION)) $(($(date +%s) + DURATION / 2)) &
	CTL_PID=$!
	set +e
	as_pg "$PGBIN/pgbench" "${PGBENCH_OPTS[@]}" --random-seed="$SEED" -T "$DURATION" -P 30 \
		-f "$HERE/dispatch.sql@50" -f "$HERE/enqueue.sql@22" -f "$HERE/pulse.sql@14" \
		-f "$HERE/batch.sql@6" -f "$HERE/stale.sql@8" -f "$HERE/probe.sql@4" \
		-f "$HERE/repark.sql@8" -f "$HERE/limited.sql@30" -f "$HERE/sample.sql@6" \
		-f "$HERE/rated.sql@20" \
		postgres >"$TMP/pgbench.out" 2>&1
	PGBENCH_RC=$?
	kill "$CTL_PID" 2>/dev/null
	wait "$CTL_PID" 2>/dev/null
	set -e
else
	# Three parts, a pgbench per database in each; a restart ends the first
	# two.  pgbench connects once, so the clients a restart cuts off end and
	# the next part starts new ones.  Each part and database has a seed of
	# its own, SEED + 100 * (database - 1) + (part - 1): the same SEED
	# repeats the random choices, not the timing.  The log lines a restart
	# writes (terminated connections, recovery) are left out of the log
	# check: LOG_SKIP holds their line ranges.
	part_start=$(date +%s)
	controller $((part_start + DURATION)) $((part_start + DURATION / 2)) &
	CTL_PID=$!
	for part in 1 2 3; do
		part_end=$((part_start + DURATION * part / 3))
		secs=$((part_end - $(date +%s)))
		[ "$secs" -ge 5 ] || secs=5
		say "load, part $part of 3: pgbench -c $DB_CLIENTS -T $secs on each of $DBS"
		pids=()
		dbi=0
		for DB in $DBS; do
			# pgbench -T counts from its start; a restart ends parts 1 and 2
			# sooner, so their -T leaves room for it
			as_pg "$PGBIN/pgbench" "${PGBENCH_OPTS[@]}" --random-seed=$((SEED + 100 * dbi + part - 1)) \
				-T $((part < 3 ? secs + 60 : secs)) \
				-f "$HERE/limited.sql@25" -f "$HERE/twice.sql@30" -f "$HERE/retake.sql@20" \
				-f "$HERE/enqueue.sql@18" -f "$HERE/stale.sql@5" -f "$HERE/sample.sql@4" \
				-f "$HERE/rated.sql@15" \
				"$DB" >"$TMP/pgbench.$DB.$part.out" 2>&1 &
			pids+=($!)
			dbi=$((dbi + 1))
		done
		if [ "$part" -lt 3 ]; then
			# the load runs until the part's end; then the restart (this
			# sleep paces the load, it waits for nothing)
			sleep "$secs"
			skip_from=$(($(wc -l <"$LOG") + 1))
			stop_at=$(date -u '+%F %T.%N+00')
			if [ "$part" = 1 ]; then
				say "restart: pg_ctl restart -m fast"
				as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -m fast -w -t 60 restart >/dev/null \
					|| { tail -n 30 "$LOG" >&2; exit 1; }
			else
				say "restart: pg_ctl stop -m immediate, then start (crash recovery)"
				as_pg "$PGBIN/pg_ctl" -D "$DATA" -m immediate -w -t 60 stop >/dev/null \
					|| { tail -n 30 "$LOG" >&2; exit 1; }
				as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null \
					|| { tail -n 30 "$LOG" >&2; exit 1; }
			fi
			LOG_SKIP="$LOG_SKIP $skip_from,$(wc -l <"$LOG")"
			# for G10's report of the windows across the restarts
			RESTARTS="${RESTARTS:+$RESTARTS, }('$([ "$part" = 1 ] && echo fast || echo crash)', '$stop_at'::timestamptz, '$(date -u '+%F %T.%N+00')'::timestamptz)"
		fi
		set +e
		for pid in "${pids[@]}"; do
			wait "$pid"
		done
		set -e
	done
	kill "$CTL_PID" 2>/dev/null || true
	wait "$CTL_PID" 2>/dev/null || true
	PGBENCH_RC=0
	DB=${DBS%% *}
fi

# To check the checker: STRESS_MUTATE='SQL' runs SQL here, between the load
# and the checks (break a guarantee by hand and watch its check fail).
if [ -n "${STRESS_MUTATE:-}" ]; then
	for DB in $DBS; do
		say "mutating ($DB): $STRESS_MUTATE"
		q "$STRESS_MUTATE" >/dev/null
	done
	DB=${DBS%% *}
fi

# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------
PASSED=0
FAILED=0
# in mode two the checks of one database name it first (DBP)
DBP=""
ok() { PASSED=$((PASSED + 1)); printf 'ok    %s%s\n' "$DBP" "$1"; }
fail() {
	FAILED=$((FAILED + 1))
	printf 'FAIL  %s%s\n' "$DBP" "$1"
	if [ -n "${2:-}" ]; then printf '%s\n' "$2" | head -n 15 | sed 's/^/      /'; fi
}
# history KEY...: the ledger of a few keys, to show why a check failed
history() {
	local k
	for k in "$@"; do
		echo "      ledger of key $k:"
		q "SELECT id, xid, op, lease_token, fence, new_fence, attempt, backend_type, at
		     FROM stress_log WHERE dispatch_key = '$k' ORDER BY id" | sed 's/^/        /'
	done
}
# check NAME SQL: the SQL lists violations, one per row; none is a pass
check() {
	local out
	if ! out=$(q "$2" 2>&1); then
		fail "$1" "checker query failed: $out"
	elif [ -n "$out" ]; then
		fail "$1" "$out"
	else
		ok "$1"
	fi
}

echo "---- pgbench"
if [ "$MODE" = one ]; then
	grep -E '^(number of (transactions|failed|transactions retried|total retries)|tps|latency average|SQL script|  - [0-9]+ transactions|  - number of failed)' \
		"$TMP/pgbench.out" | sed 's/^/      /' || true
	failed_tx=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$TMP/pgbench.out")
	processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$TMP/pgbench.out")
	if [ "$PGBENCH_RC" -eq 0 ] && [ "${failed_tx:-x}" = 0 ] && [ "${processed:-0}" -gt 0 ] \
		&& ! grep -q 'aborted' "$TMP/pgbench.out"; then
		ok "load: pgbench ran $processed transactions, none failed, no client aborted"
	else
		fail "load: pgbench exit $PGBENCH_RC, failed transactions ${failed_tx:-?}" \
			"$(grep -E 'error|abort|FATAL|ERROR' "$TMP/pgbench.out" | head -n 15)"
	fi
else
	# The parts a restart ended: their clients end with a lost connection
	# (or a fast shutdown's termination, with the CONTEXT of the statement
	# it cut, or on a line of its own when it reached an idle client),
	# nothing else.  The last part: no failure at all.
	for DB in $DBS; do
		for part in 1 2 3; do
			out=$TMP/pgbench.$DB.$part.out
			processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
			failed_tx=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
			unexpected=$(grep -E 'error|abort|FATAL|ERROR' "$out" \
				| grep -vE 'aborted in command [0-9]+ query [0-9]+: FATAL:  terminating connection due to administrator command$|aborted in command [0-9]+ \(SQL\) of script [0-9]+; perhaps the backend died while processing$|Run was aborted; the above results are incomplete|^FATAL:  terminating connection due to administrator command$|server closed the connection unexpectedly|^\s*(This probably means the server terminated abnormally|before or while processing the request)|^CONTEXT:  ' || true)
			if [ "$part" = 3 ]; then
				if [ "${failed_tx:-x}" = 0 ] && [ "${processed:-0}" -gt 0 ] && ! grep -q 'aborted' "$out"; then
					ok "load ($DB, part 3): pgbench ran $processed transactions, none failed, no client aborted"
				else
					fail "load ($DB, part 3): failed transactions ${failed_tx:-?}" \
						"$(grep -E 'error|abort|FATAL|ERROR' "$out" | head -n 15)"
				fi
			elif [ -z "$unexpected" ] && [ "${failed_tx:-x}" = 0 ] && [ "${processed:-0}" -gt 0 ]; then
				ok "load ($DB, part $part, cut by a restart): pgbench ran $processed transactions; nothing failed but connections the restart ended"
			else
				fail "load ($DB, part $part): ${processed:-no} transactions, ${failed_tx:-?} failed, unexpected errors" "$unexpected"
			fi
		done
		grep -E '^(SQL script|  - [0-9]+ transactions)' "$TMP/pgbench.$DB.3.out" | sed 's/^/      part 3: /' || true
	done
fi
if [ "$MODE" = one ]; then
	rows=$(q "SELECT (SELECT count(*) FROM stress_log WHERE op LIKE 'row\_%')
		|| ' row changes; ' || (SELECT count(*) FROM stress_log WHERE op = 'row_reoffer') || ' re-offers ('
		|| (SELECT count(*) FILTER (WHERE backend_type = 'aion_wake worker') FROM stress_log WHERE op = 'row_reoffer')
		|| ' by the worker); ' || (SELECT count(*) FROM stress_log WHERE op = 'row_claim_parked')
		|| ' claimed straight from their park; ' || (SELECT count(*) FROM stress_log WHERE op = 'park') || ' parks; '
		|| (SELECT count(*) FROM stress_log WHERE op = 'complete') || ' completed; '
		|| (SELECT count(*) FROM aion_wake.outbox) || ' rows left, '
		|| (SELECT count(*) FROM aion_wake.outbox WHERE parked_at IS NOT NULL AND visible_after > clock_timestamp())
		|| ' of them parked'")
	echo "      ledger: $rows"

	# how full the set was: parks per 20 s of load, and how many of them found it full
	q "SELECT string_agg(b || 's ' || parks || '/' || missed, '  ' ORDER BY b)
	     FROM (SELECT (extract(epoch FROM l.at - s.t0)::int / 20) * 20 AS b, count(*) AS parks,
	                  count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM stress_log i WHERE i.op = 'in_set'
	                                     AND i.xid = l.xid AND i.dispatch_key = l.dispatch_key)) AS missed
	             FROM stress_log l, (SELECT min(at) AS t0 FROM stress_log) s
	            WHERE l.op = 'park' GROUP BY 1) x" | sed 's/^/      parks\/set full, per 20 s: /'
	echo "---- G2: no lost wake"
	check "G2: no pending entry and no waiter left once the load stopped" \
		"SELECT 'parked_pending=' || parked_pending || ' waiters=' || waiters
		   FROM aion_wake.status
		  WHERE NOT stress_wait('(SELECT parked_pending = 0 AND waiters = 0 FROM aion_wake.status)', '10 s')"

	# Rows parked now (fence ahead) whose last committed change is a park that
	# entered the set (in_set logged in that transaction) must be in the set,
	# confirmed, at that fence.  Re-offers still in flight settle within moments,
	# so the condition is polled for a few seconds before it counts as a failure.
	G2A_VIOLATIONS="
	WITH o AS (SELECT dispatch_key, topic, visible_after, parked_at FROM aion_wake.outbox
	            WHERE parked_at IS NOT NULL AND visible_after > clock_timestamp() + interval '1 s'),
	     last AS (SELECT DISTINCT ON (l.dispatch_key) l.dispatch_key, l.op, l.fence, l.xid
	                FROM stress_log l JOIN o USING (dispatch_key)
	               WHERE l.op LIKE 'row\_%'
	               ORDER BY l.dispatch_key, l.id DESC)
	SELECT o.dispatch_key, o.topic, o.visible_after AS fence, last.op AS last_change,
	       CASE WHEN last.op IS DISTINCT FROM 'row_park' OR last.fence <> o.visible_after
	            THEN 'ledger does not match the row' ELSE 'confirmed park missing from the set' END AS problem,
	       (SELECT string_agg(p.state || ' ' || p.fence, ', ') FROM aion_wake.parked p
	         WHERE p.dispatch_key = o.dispatch_key) AS set_entries
	  FROM o LEFT JOIN last USING (dispatch_key)
	 WHERE last.op IS DISTINCT FROM 'row_park' OR last.fence <> o.visible_after
	    OR (EXISTS (SELECT 1 FROM stress_log i
	                 WHERE i.op = 'in_set' AND i.xid = last.xid
	                   AND i.dispatch_key = o.dispatch_key AND i.fence = o.visible_after)
	        AND NOT EXISTS (SELECT 1 FROM aion_wake.parked p
	                         WHERE p.dispatch_key = o.dispatch_key AND p.fence = o.visible_after
	                           AND p.state <> 'pending'))"
	q "SELECT stress_wait(\$c\$NOT EXISTS ($G2A_VIOLATIONS)\$c\$, '5 s')" >/dev/null
	check "G2: every committed park that entered the set is in it, confirmed, at its fence" \
		"$G2A_VIOLATIONS ORDER BY 1 LIMIT 15"
	G2A_KEYS=$(q "SELECT dispatch_key FROM ($G2A_VIOLATIONS) v ORDER BY 1 LIMIT 2")

	# Targets: those parks, with a fence far enough ahead that only a re-offer
	# can release them within the wait.
	q "CREATE TABLE stress_g2_target AS
	   SELECT o.dispatch_key, o.topic, o.visible_after AS fence FROM aion_wake.outbox o
	    WHERE o.parked_at IS NOT NULL AND o.visible_after > clock_timestamp() + interval '30 s'
	      AND EXISTS (SELECT 1 FROM aion_wake.parked p
	                   WHERE p.dispatch_key = o.dispatch_key AND p.fence = o.visible_after
	                     AND p.state <> 'pending')" >/dev/null
	ntarget=$(q "SELECT count(*) FROM stress_g2_target")
	nparked=$(q "SELECT count(*) FROM aion_wake.outbox WHERE parked_at IS NOT NULL AND visible_after > clock_timestamp() + interval '30 s'")
	G2_PULSE_AT=$(q "SELECT max(id) FROM stress_log")
	q "BEGIN;
	   SELECT aion_wake.pulse(t, 1 + (SELECT count(*)::int FROM aion_wake.outbox o
	                                  WHERE o.topic = t AND o.parked_at IS NOT NULL))
	     FROM (SELECT DISTINCT topic FROM aion_wake.outbox WHERE parked_at IS NOT NULL) p(t);
	   COMMIT;" >/dev/null
	G2_T0=$(date +%s%N)
	check "G2: one pulse per topic (slots = its parked rows + 1) re-offers all $ntarget parks in the set" \
		"SELECT t.dispatch_key, t.topic, t.fence, o.visible_after AS fence_now, o.parked_at
		   FROM stress_g2_target t JOIN aion_wake.outbox o USING (dispatch_key)
		  WHERE NOT stress_wait('NOT EXISTS (SELECT 1 FROM stress_g2_target t JOIN aion_wake.outbox o USING (dispatch_key)
		                                      WHERE o.visible_after = t.fence AND o.parked_at IS NOT NULL)', '40 s')
		    AND o.visible_after = t.fence AND o.parked_at IS NOT NULL
		  ORDER BY 1 LIMIT 15"
	echo "      (the last of them after $(( ($(date +%s%N) - G2_T0) / 1000000 )) ms; 40 s allowed, for a stalled machine)"
	check "G2: those re-offers were made by the worker, after the pulse" \
		"SELECT t.dispatch_key, l.op, l.backend_type, l.id
		   FROM stress_g2_target t
		   LEFT JOIN LATERAL (SELECT * FROM stress_log l WHERE l.dispatch_key = t.dispatch_key
		                       AND l.op LIKE 'row\_%' ORDER BY l.id DESC LIMIT 1) l ON true
		  WHERE l.op IS DISTINCT FROM 'row_reoffer' OR l.fence <> t.fence
		     OR l.backend_type IS DISTINCT FROM 'aion_wake worker' OR l.id <= $G2_PULSE_AT
		  ORDER BY 1 LIMIT 15"
	check "G2: each probe (a lone park in its own topic, then one slot pulsed) got its row back ($(q "SELECT count(*) FILTER (WHERE op = 'probe_ok') || ' ok, ' || count(*) FILTER (WHERE op = 'probe_slow') || ' slow, ' || count(*) FILTER (WHERE op = 'probe_skipped') || ' mode 4 or set full' FROM stress_log"))" \
		"SELECT dispatch_key, 'probe mode ' || attempt || ' missed' FROM stress_log
		  WHERE op = 'probe_miss' ORDER BY id LIMIT 15"
	check "G2: no re-offer was spent on a row whose fence had already passed (it moves nothing; its slot goes back)" \
		"SELECT r.id, r.dispatch_key, r.fence AS old_fence, r.new_fence, r.new_fence - r.fence AS pushed_later_by,
		        r.backend_type
		   FROM stress_log r
		  WHERE r.op = 'row_reoffer' AND r.new_fence >= r.fence
		  ORDER BY 1 LIMIT 15"
	check "G2: parked rows left out of the set ($((nparked - ntarget))) are no more than the set_full count" \
		"SELECT 'left out: ' || count(*) || ', set_full: ' || (SELECT set_full FROM aion_wake.status)
		   FROM aion_wake.outbox o
		  WHERE o.parked_at IS NOT NULL AND o.visible_after > clock_timestamp() + interval '30 s'
		 HAVING count(*) > (SELECT set_full FROM aion_wake.status)"
fi

# The ledger checks, in each database: every database has its own ledger,
# its own limits and its own counts.
for DB in $DBS; do
	if [ "$MODE" = two ]; then
		DBP="$DB: "
		echo "==== database $DB"
		# how often the cases mode two is for ran (committed ones from the
		# settles of one key in one transaction, rolled-back ones from the
		# scripts' notes)
		q "WITH two AS (SELECT string_agg(op, ' then ' ORDER BY id) AS kind FROM stress_log
		                 WHERE op IN ('complete', 'fail', 'park', 'dead_letter')
		                 GROUP BY xid, dispatch_key HAVING count(*) > 1)
		   SELECT 'ledger: ' || (SELECT count(*) FROM two) || ' leases settled twice in one transaction ('
		          || coalesce((SELECT string_agg(kind || ' ' || n, ', ' ORDER BY kind)
		                         FROM (SELECT kind, count(*) AS n FROM two GROUP BY kind) k), 'none')
		          || '), ' || count(*) FILTER (WHERE op = 'note_settles_rolled_back') || ' rolled back; '
		          || count(*) FILTER (WHERE op LIKE 'note_retaken%') || ' re-takes rolled back ('
		          || count(*) FILTER (WHERE op = 'note_retaken_rolled_back_to_savepoint') || ' to a savepoint)'
		     FROM stress_log" | sed 's/^/      /'
	fi
	echo "---- G1: nothing lost"
	check "G1: every key enqueued is in exactly one of outbox, dead_letters, completed" \
		"WITH k AS (SELECT dispatch_key,
		                   count(*) FILTER (WHERE op = 'row_insert') AS inserted,
		                   count(*) FILTER (WHERE op = 'enqueue') AS enqueued,
		                   count(*) FILTER (WHERE op = 'dup_enqueue') AS dup_enqueued,
		                   count(*) FILTER (WHERE op = 'row_delete') AS deleted,
		                   count(*) FILTER (WHERE op = 'complete') AS completed,
		                   count(*) FILTER (WHERE op = 'dead_letter') AS dead_lettered
		              FROM stress_log GROUP BY dispatch_key)
		 SELECT k.dispatch_key, k.inserted, k.enqueued, k.dup_enqueued, k.deleted, k.completed,
		        k.dead_lettered, o.dispatch_key IS NOT NULL AS in_outbox,
		        d.dispatch_key IS NOT NULL AS in_dead_letters
		   FROM k LEFT JOIN aion_wake.outbox o USING (dispatch_key)
		          LEFT JOIN aion_wake.dead_letters d USING (dispatch_key)
		  WHERE k.inserted <> 1 OR k.enqueued <> 1 OR k.dup_enqueued <> 0
		     OR (o.dispatch_key IS NOT NULL)::int + (d.dispatch_key IS NOT NULL)::int + k.completed <> 1
		     OR k.dead_lettered <> (d.dispatch_key IS NOT NULL)::int
		     OR k.deleted <> k.completed + k.dead_lettered
		  ORDER BY 1 LIMIT 15"
	check "G1: no row in outbox or dead_letters that was never enqueued" \
		"SELECT 'outbox', dispatch_key FROM aion_wake.outbox o
		  WHERE NOT EXISTS (SELECT 1 FROM stress_log l WHERE l.dispatch_key = o.dispatch_key AND l.op = 'enqueue')
		 UNION ALL
		 SELECT 'dead_letters', dispatch_key FROM aion_wake.dead_letters d
		  WHERE NOT EXISTS (SELECT 1 FROM stress_log l WHERE l.dispatch_key = d.dispatch_key AND l.op = 'enqueue')
		 LIMIT 15"

	echo "---- G4: waiting for capacity costs no attempt"
	check "G4: attempt = committed fail() calls, for rows in outbox and dead_letters" \
		"WITH f AS (SELECT dispatch_key, count(*) FILTER (WHERE op = 'fail') AS fails,
		                   count(*) FILTER (WHERE op = 'row_fail') AS row_fails
		              FROM stress_log GROUP BY dispatch_key),
		      r AS (SELECT 'outbox' AS t, dispatch_key, attempt FROM aion_wake.outbox
		            UNION ALL SELECT 'dead_letters', dispatch_key, attempt FROM aion_wake.dead_letters)
		 SELECT r.t, r.dispatch_key, r.attempt, f.fails, f.row_fails
		   FROM r LEFT JOIN f USING (dispatch_key)
		  WHERE r.attempt <> coalesce(f.fails, 0) OR r.attempt <> coalesce(f.row_fails, 0)
		  ORDER BY 2 LIMIT 15"
	check "G4: every park and re-offer left attempt unchanged" \
		"SELECT l.id, l.dispatch_key, l.op, l.attempt, p.op AS before, p.attempt AS attempt_before
		   FROM stress_log l
		   JOIN LATERAL (SELECT * FROM stress_log p WHERE p.dispatch_key = l.dispatch_key AND p.id < l.id
		                  AND p.op LIKE 'row\_%' ORDER BY p.id DESC LIMIT 1) p ON true
		  WHERE l.op IN ('row_park', 'row_reoffer', 'row_claim', 'row_claim_parked') AND l.attempt <> p.attempt
		  ORDER BY 1 LIMIT 15"

	echo "---- G3: one writer per row"
	check "G3: every re-offer (by the worker, or by a claimer spending a pulse slot) acted on the latest committed park of its row, at that park's fence" \
		"SELECT r.id, r.dispatch_key, r.fence AS old_fence, r.new_fence, r.at, r.backend_type,
		        p.op AS change_before, p.fence AS fence_before
		   FROM stress_log r
		   LEFT JOIN LATERAL (SELECT * FROM stress_log p WHERE p.dispatch_key = r.dispatch_key AND p.id < r.id
		                       AND p.op LIKE 'row\_%' ORDER BY p.id DESC LIMIT 1) p ON true
		  WHERE r.op IN ('row_reoffer', 'row_claim_parked')
		    AND (p.op IS DISTINCT FROM 'row_park' OR p.fence <> r.fence
		         OR (r.op = 'row_reoffer'
		             AND (r.new_fence > r.at
		                  OR r.backend_type NOT IN ('aion_wake worker', 'client backend'))))
		  ORDER BY 1 LIMIT 15"
	check "G3: complete/park/fail/dead_letter acted only with the row's current lease token" \
		"SELECT a.id, a.dispatch_key, a.op, a.lease_token, c.lease_token AS current_token
		   FROM stress_log a
		   LEFT JOIN LATERAL (SELECT lease_token FROM stress_log c WHERE c.dispatch_key = a.dispatch_key
		                       AND c.id < a.id AND c.op IN ('row_claim', 'row_claim_parked')
		                     ORDER BY c.id DESC LIMIT 1) c ON true
		  WHERE a.op IN ('complete', 'park', 'fail', 'dead_letter')
		    AND a.lease_token IS DISTINCT FROM c.lease_token
		  ORDER BY 1 LIMIT 15"
	check "G3: claims took only visible rows, each with a fresh lease token; no unexplained row change" \
		"SELECT op, count(*)::text FROM stress_log
		  WHERE op IN ('row_bad_claim', 'row_bad_fail', 'row_other') GROUP BY op
		 UNION ALL
		 SELECT 'lease token ' || lease_token || ' issued twice', count(*)::text FROM stress_log
		  WHERE op IN ('row_claim', 'row_claim_parked') GROUP BY lease_token HAVING count(*) > 1
		 LIMIT 15"
	check "G3: each function returned true exactly when it changed the row (same transaction)" \
		"WITH x AS (SELECT xid, dispatch_key,
		                   count(*) FILTER (WHERE op = 'enqueue') AS enqueue,
		                   count(*) FILTER (WHERE op = 'row_insert') AS row_insert,
		                   count(*) FILTER (WHERE op = 'park') AS park,
		                   count(*) FILTER (WHERE op = 'row_park') AS row_park,
		                   count(*) FILTER (WHERE op = 'fail') AS fail,
		                   count(*) FILTER (WHERE op = 'row_fail') AS row_fail,
		                   count(*) FILTER (WHERE op IN ('complete', 'dead_letter')) AS removed,
		                   count(*) FILTER (WHERE op = 'row_delete') AS row_delete
		              FROM stress_log GROUP BY xid, dispatch_key)
		 SELECT * FROM x
		  WHERE enqueue <> row_insert OR park <> row_park OR fail <> row_fail OR removed <> row_delete
		  ORDER BY 1 LIMIT 15"

	echo "---- G8: never over the limit"
	# Each lease of a limited topic, from the ledger: from its claim's UPDATE
	# (the slot was reserved before it) to the first later change of the row
	# (the settle's statement; its slot is released at its commit, later) or
	# the lease's end, whichever comes first (a new claim of the row comes
	# after that end).  So each interval lies inside the time its slot was
	# held, and their overlap can only be less than the real one: any overlap
	# above the limit is a real excess.  Claims that rolled back left no entry.
	G8_LEASES="
	WITH lim AS (SELECT topic, max_in_flight FROM aion_wake.limits),
	     l AS (SELECT c.topic, c.dispatch_key, c.id, c.xid, c.at AS s,
	                  least(c.new_fence, coalesce(n.at, 'infinity'::timestamptz)) AS e
	             FROM stress_log c JOIN lim USING (topic)
	             LEFT JOIN LATERAL (SELECT n.at FROM stress_log n
	                                 WHERE n.dispatch_key = c.dispatch_key AND n.id > c.id
	                                   AND n.op LIKE 'row\_%' ORDER BY n.id LIMIT 1) n ON true
	            WHERE c.op IN ('row_claim', 'row_claim_parked')),
	     ev AS (SELECT topic, s AS t, 1 AS d FROM l WHERE e > s
	            UNION ALL SELECT topic, e, -1 FROM l WHERE e > s),
	     run AS (SELECT topic, t, d,
	                    sum(d) OVER (PARTITION BY topic ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS live
	               FROM ev)"
	q "$G8_LEASES
	   SELECT lim.topic || ': ' || (SELECT count(*) FROM l WHERE l.topic = lim.topic) || ' leases, at most '
	          || coalesce((SELECT max(live) FROM run WHERE run.topic = lim.topic), 0) || ' at once (limit '
	          || lim.max_in_flight || ')'
	     FROM lim ORDER BY lim.topic" | sed 's/^/      /'
	failed_before=$FAILED
	check "G8: the leases of each limited topic (from the ledger) never overlap more than its limit" \
		"$G8_LEASES
		 SELECT run.topic, run.t AS at, run.live, lim.max_in_flight,
		        (SELECT string_agg(l.dispatch_key || ' ' || l.s || '..' || l.e, ', ' ORDER BY l.s) FROM l
		          WHERE l.topic = run.topic AND l.s <= run.t AND l.e > run.t) AS leases
		   FROM run JOIN lim USING (topic)
		  WHERE run.live > lim.max_in_flight
		  ORDER BY run.t LIMIT 15"
	if [ "$FAILED" -gt "$failed_before" ]; then
		# why: at the first moments over the limit, each live lease, the
		# transaction that took it (all its ledger entries), and the notes
		# the scripts left on its row since (note_*: what rolled back)
		echo "      why: the first times over the limit, each lease live then (key, claimed at), its transaction, notes since"
		q "$G8_LEASES,
		   over AS (SELECT run.topic, run.t FROM run JOIN lim USING (topic)
		             WHERE run.live > lim.max_in_flight AND run.d = 1 ORDER BY run.t LIMIT 4)
		   SELECT over.topic, over.t, l.dispatch_key, l.s,
		          (SELECT string_agg(x.op || ' ' || x.dispatch_key, ', ' ORDER BY x.id)
		             FROM stress_log x WHERE x.xid = l.xid) AS its_transaction,
		          (SELECT string_agg(n.op, ', ' ORDER BY n.id) FROM stress_log n
		            WHERE n.dispatch_key = l.dispatch_key AND n.id > l.id AND n.at <= over.t
		              AND n.op LIKE 'note\_%') AS notes_since
		     FROM over JOIN l ON l.topic = over.topic AND l.s <= over.t AND l.e > over.t
		    ORDER BY over.t, l.s" | sed 's/^/        /'
	fi
	q "SELECT topic || ': ' || count(*) || ' samples of in_flight, ' || count(*) FILTER (WHERE in_flight = max_in_flight)
	          || ' at the limit (' || max_in_flight || '), largest ' || max(in_flight)
	     FROM stress_inflight GROUP BY topic, max_in_flight ORDER BY topic" | sed 's/^/      /'
	check "G8: no sample of topics.in_flight taken during the load exceeds the limit" \
		"SELECT at, topic, in_flight, max_in_flight FROM stress_inflight
		  WHERE in_flight IS NULL OR max_in_flight IS NULL OR in_flight > max_in_flight
		  ORDER BY at LIMIT 15"
	check "G8: once every lease has ended, in_flight is 0 (no slot leaked)" \
		"SELECT t.topic, t.in_flight,
		        (SELECT count(*) FROM aion_wake.outbox o
		          WHERE o.topic = t.topic AND o.leased_until > clock_timestamp()) AS live_in_table
		   FROM aion_wake.topics t
		  WHERE t.max_in_flight IS NOT NULL
		    AND NOT stress_wait('(SELECT coalesce(sum(in_flight), 0) = 0 FROM aion_wake.topics
		                          WHERE max_in_flight IS NOT NULL)', '15 s')
		  ORDER BY 1"
	# A reservation that was never given back would keep a slot from every
	# later claim without showing in in_flight: a claim (without waiting) of
	# each limited topic that has a visible row must get one.
	check "G8: a claim of each limited topic with a visible row gets one (no reservation leaked)" \
		"WITH lim AS (SELECT topic FROM aion_wake.limits
		               WHERE EXISTS (SELECT 1 FROM aion_wake.outbox o
		                              WHERE o.topic = limits.topic AND o.visible_after <= clock_timestamp()))
		 SELECT lim.topic, 'claimed ' || c.n || ' rows' FROM lim,
		        LATERAL (SELECT count(*) AS n FROM aion_wake.claim(lim.topic, 1, '1 s', '0')) c
		  WHERE c.n <> 1
		  ORDER BY 1"

	echo "---- G10: never over the rate"
	# Every start of a rated topic, from stress_starts (rolled-back claims and
	# hand-offs included), at its server time, leased_until - lease.  A
	# running count over the starts and the moments they leave the window
	# (start + per; a start leaves before one begins at the same moment)
	# gives, at each start t, the starts in the window (t - per, t]; the
	# largest of these is the largest number in any window of length per
	# (a window [t, t + per) holding starts holds them all in the window
	# that ends at its last start).  Each is judged against the rate in
	# force at its end: rates here are only ever raised (q0, mid-run), with
	# per unchanged, so that is the highest rate in force during the window.
	# A raise counts from the clock just before its commit (stress_rates),
	# which is never later than the moment it applied.
	G10_WINDOWS="
	WITH rate AS (SELECT topic, max_starts, per, from_at,
	                     coalesce(lead(from_at) OVER (PARTITION BY topic ORDER BY from_at), 'infinity') AS to_at
	                FROM stress_rates),
	     per AS (SELECT DISTINCT topic, per FROM stress_rates),
	     ev AS (SELECT s.topic, s.start_at AS t, 1 AS d FROM stress_starts s JOIN per USING (topic)
	            UNION ALL
	            SELECT s.topic, s.start_at + per.per, -1 FROM stress_starts s JOIN per USING (topic)),
	     run AS (SELECT topic, t, d,
	                    sum(d) OVER (PARTITION BY topic ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n
	               FROM ev),
	     win AS (SELECT run.topic, run.t, run.n, rate.max_starts, rate.per, rate.from_at
	               FROM run JOIN rate ON rate.topic = run.topic AND run.t >= rate.from_at AND run.t < rate.to_at
	              WHERE run.d = 1)"
	q "$G10_WINDOWS,
	   busiest AS (SELECT topic, from_at, max_starts, per, max(n) AS most,
	                      count(*) FILTER (WHERE n = max_starts) AS at_rate
	                 FROM win GROUP BY topic, from_at, max_starts, per)
	   SELECT b.topic || ' (' || b.max_starts || ' per ' || round(extract(epoch FROM b.per) * 1000) || ' ms'
	          || CASE WHEN b.from_at > '-infinity' THEN ', from ' || to_char(b.from_at, 'HH24:MI:SS.MS') ELSE '' END
	          || '): at most ' || b.most || ' starts in any window'
	          || CASE WHEN b.most > 256 THEN ' (over 256: the grouped log)' ELSE '' END
	          || ', ' || b.at_rate || ' windows at the rate'
	     FROM busiest b ORDER BY b.topic, b.from_at" | sed 's/^/      /'
	# the rate achieved, for information (no timing is asserted): starts per
	# second over the span of each rate's starts, against max_starts / per
	q "WITH rate AS (SELECT topic, max_starts, per, from_at,
	                        coalesce(lead(from_at) OVER (PARTITION BY topic ORDER BY from_at), 'infinity') AS to_at
	                   FROM stress_rates),
	        s AS (SELECT rate.topic, rate.max_starts, rate.per, rate.from_at, count(*) AS n,
	                     count(*) FILTER (WHERE st.how LIKE '%rolled_back') AS rolled_back,
	                     count(*) FILTER (WHERE st.how LIKE 'handoff%') AS handed_off,
	                     count(*) FILTER (WHERE st.how LIKE 'claim_topics%') AS many_topics,
	                     count(*) FILTER (WHERE EXISTS (SELECT 1 FROM stress_log l
	                                                     WHERE l.op = 'row_claim_parked'
	                                                       AND l.dispatch_key = st.dispatch_key
	                                                       AND l.lease_token = st.lease_token)) AS from_park,
	                     extract(epoch FROM max(st.start_at) - min(st.start_at)) AS span
	                FROM rate JOIN stress_starts st ON st.topic = rate.topic
	                 AND st.start_at >= rate.from_at AND st.start_at < rate.to_at
	               GROUP BY 1, 2, 3, 4)
	   SELECT topic || ': ' || n || ' starts (' || rolled_back || ' rolled back, ' || handed_off || ' by hand-offs, '
	          || many_topics || ' by claim(topics[]), ' || from_park || ' straight from a park, spending a pulse) over ' || round(span, 1) || ' s: '
	          || round(n / nullif(span, 0), 1) || '/s, the rate allows '
	          || round(max_starts / extract(epoch FROM per), 1) || '/s ('
	          || round(100 * n / nullif(span, 0) / (max_starts / extract(epoch FROM per)), 0) || '%)'
	     FROM s ORDER BY topic, from_at" | sed 's/^/      achieved: /'
	if [ -n "${RESTARTS:-}" ]; then
		# around each restart: the starts of each rated topic in the last
		# per before the server stopped, and when the first start came
		# after it was up again (the rate is loaded with a full window, so
		# not before per has passed; the windows across the restart are in
		# the check below)
		q "SELECT r.kind || ' restart (' || to_char(r.stop_at, 'HH24:MI:SS.MS') || ' to '
		          || to_char(r.up_at, 'HH24:MI:SS.MS') || '): '
		          || string_agg(p.topic || ' ' || (SELECT count(*) FROM stress_starts s WHERE s.topic = p.topic
		                                            AND s.start_at > r.stop_at - p.per AND s.start_at < r.stop_at)
		                        || ' in the last ' || round(extract(epoch FROM p.per) * 1000) || ' ms before, the next '
		                        || coalesce(round(extract(epoch FROM (SELECT min(s.start_at) FROM stress_starts s
		                                                               WHERE s.topic = p.topic AND s.start_at > r.stop_at)
		                                                      - r.up_at) * 1000) || ' ms after it was up', 'none'),
		                        '; ' ORDER BY p.topic)
		     FROM (VALUES $RESTARTS) r(kind, stop_at, up_at), (SELECT DISTINCT topic, per FROM stress_rates) p
		    GROUP BY r.kind, r.stop_at, r.up_at ORDER BY r.stop_at" | sed 's/^/      /'
	fi
	failed_before=$FAILED
	check "G10: no window of length per holds more starts of a rated topic than its max_starts (from the ledger, rolled-back starts included)" \
		"$G10_WINDOWS
		 SELECT topic, t AS window_end, n AS starts, max_starts FROM win
		  WHERE n > max_starts ORDER BY t LIMIT 15"
	if [ "$FAILED" -gt "$failed_before" ]; then
		echo "      why: the first windows over the rate, the starts in each (key, start, how, logged at)"
		q "$G10_WINDOWS,
		   over AS (SELECT DISTINCT topic, t, per FROM win WHERE n > max_starts ORDER BY t LIMIT 3)
		   SELECT over.topic, over.t, s.dispatch_key, s.start_at, s.how, s.logged_at
		     FROM over JOIN stress_starts s ON s.topic = over.topic
		      AND s.start_at > over.t - over.per AND s.start_at <= over.t
		    ORDER BY over.t, s.start_at LIMIT 60" | sed 's/^/        /'
	fi
	# A pause is certainly in force from the clock after its commit until
	# its end or the clock before the next call (pause or resume) of its
	# topic, whichever is first (the controller makes one call at a time).
	q "SELECT 'pauses: ' || count(*) FILTER (WHERE until IS NOT NULL) || ' (' || count(*) FILTER (WHERE until IS NOT NULL AND committed IS NULL)
	          || ' cut off by a restart), ' || count(*) FILTER (WHERE until IS NULL) || ' resumes; claims_paused='
	          || (SELECT claims_paused FROM aion_wake.status) || ' claims_rate_delayed='
	          || (SELECT claims_rate_delayed FROM aion_wake.status)
	     FROM stress_pauses" | sed 's/^/      /'
	check "G10: no start of a paused topic while its pause was in force" \
		"WITH p AS (SELECT p.topic, p.committed,
		                   least(p.until, (SELECT min(n.called) FROM stress_pauses n
		                                    WHERE n.topic = p.topic AND n.called > p.called)) AS ends
		              FROM stress_pauses p WHERE p.until IS NOT NULL AND p.committed IS NOT NULL)
		 SELECT p.topic, p.committed AS paused_from, p.ends AS paused_until, s.dispatch_key, s.start_at, s.how
		   FROM p JOIN stress_starts s ON s.topic = p.topic AND s.start_at >= p.committed AND s.start_at < p.ends
		  ORDER BY s.start_at LIMIT 15"
	# Once every window has passed, no pause is in force and every lease has
	# ended, each rated topic admits a full window again: a start or a
	# reservation that was never let go would keep some out.
	q "SELECT stress_wait('(SELECT coalesce(max(window_starts), 0) = 0 AND bool_and(paused_until IS NULL)
	                             AND coalesce(sum(in_flight), 0) = 0
	                        FROM aion_wake.topics WHERE max_starts IS NOT NULL)', '15 s')" >/dev/null
	check "G10: then a claim of each rated topic takes as many rows as its rate, limit and visible rows allow (no start or reservation leaked)" \
		"WITH w AS MATERIALIZED (
		      SELECT t.topic, t.max_starts, t.window_starts, t.in_flight,
		             least(t.max_starts, coalesce(t.max_in_flight - t.in_flight, t.max_starts),
		                   (SELECT count(*) FROM aion_wake.outbox o
		                     WHERE o.topic = t.topic AND o.visible_after <= clock_timestamp())) AS want
		        FROM aion_wake.topics t WHERE t.max_starts IS NOT NULL)
		 SELECT w.topic, 'wanted ' || w.want || ', claimed ' || c.n, 'window_starts ' || w.window_starts,
		        'in_flight ' || w.in_flight
		   FROM w, LATERAL (SELECT count(*) AS n FROM aion_wake.claim(w.topic, w.max_starts, '1 s')) c
		  WHERE c.n <> w.want ORDER BY 1"
	# The lost-wake detector (README, Monitoring): no blocked claim took a
	# row that had been claimable past aion_wake.lost_wake_tolerance
	# without a wake (in mode two, since the last restart; the server log
	# check below covers the whole run).
	check "no lost wake: status.lost_wakes is 0" \
		"SELECT 'lost_wakes=' || lost_wakes || ' on: ' ||
		        (SELECT string_agg(topic || ' ' || lost_wakes, ', ') FROM aion_wake.topic_health
		          WHERE lost_wakes > 0)
		   FROM aion_wake.status WHERE lost_wakes <> 0"

	echo "---- counters (information)"
	q "SELECT 'set_full=' || set_full || ' rows_reoffered=' || rows_reoffered
	          || ' (ledger: ' || (SELECT count(*) FROM stress_log WHERE op IN ('row_reoffer', 'row_claim_parked')) || ')'
	          || ' wakes_deferred=' || wakes_deferred || ' credits_used=' || credits_used
	          || ' pulses_received=' || pulses_received || ' slots_received=' || slots_received
	          || ' slots_returned=' || slots_returned || ' fences_expired=' || fences_expired
	          || ' bad_pulses=' || bad_pulses || ' parked_confirmed=' || parked_confirmed
	     FROM aion_wake.status" | sed 's/^/      /'
	# what the lost-wake detector looked at: blocked claims that slept and
	# then got a row (claim_wait), wakes, timeouts
	q "SELECT 'claims=' || coalesce(sum(claims), 0) || ' wakes=' || coalesce(sum(wakes), 0)
	          || ' wakes_found_row=' || coalesce(sum(wakes_found_row), 0)
	          || ' claims_timed_out=' || coalesce(sum(claims_timed_out), 0)
	          || ' blocked claims that got a row after a sleep: '
	          || (SELECT count FROM aion_wake.claim_histogram WHERE histogram = 'claim_wait')
	     FROM aion_wake.topic_health_internal()" | sed 's/^/      /'
done
DB=${DBS%% *}
DBP=""

echo "---- the server"
if [ "$MODE" = one ]; then
	WORKER1=$(q "SELECT coalesce(worker_pid || ' ' || started_at, 'none') FROM aion_wake.status")
	if [ "$WORKER0" = "$WORKER1" ]; then
		ok "the worker never restarted (pid ${WORKER0%% *})"
	else
		fail "the worker restarted: before '$WORKER0', after '$WORKER1'"
	fi
else
	# each database's worker came back after the restarts
	for DB in $DBS; do
		check "the worker of $DB runs and listens again after the restarts" \
			"SELECT 'worker_pid=' || coalesce(worker_pid::text, 'null') || ' listening=' || coalesce(listening::text, 'null')
			   FROM aion_wake.status
			  WHERE NOT stress_wait('(SELECT worker_pid IS NOT NULL AND listening FROM aion_wake.status)', '30 s')"
	done
	DB=${DBS%% *}
fi
# Nothing in the workload raises an error; the only WARNINGs expected are a
# full set and a malformed pulse.  In mode two the lines a restart writes
# (LOG_SKIP: from just before pg_ctl stops the server to the moment it
# accepts connections again) are left out.
bad_log=$(awk -v skip="${LOG_SKIP:-}" '
	BEGIN { n = split(skip, r, " "); for (i = 1; i <= n; i++) { split(r[i], b, ","); lo[i] = b[1]; hi[i] = b[2] } }
	{ for (i = 1; i <= n; i++) if (NR >= lo[i] && NR <= hi[i]) next; print }' "$LOG" \
	| grep -E 'PANIC|TRAP:|terminated by signal|was terminated|exited with exit code|server process|ERROR:|FATAL:|WARNING:|lost wake on topic' \
	| grep -vE 'WARNING: +aion_wake parked set is full' || true)
if [ -z "$bad_log" ]; then
	ok "server log: no crash, PANIC, TRAP, FATAL or ERROR${LOG_SKIP:+ (outside the restarts, lines$LOG_SKIP)}"
else
	fail "server log: $(printf '%s\n' "$bad_log" | wc -l) unexpected lines" "$bad_log"
fi

if [ -n "${G2A_KEYS:-}" ]; then
	echo "---- why: parks missing from the set"
	# shellcheck disable=SC2086
	history $G2A_KEYS
fi

if [ "$FAILED" -gt 0 ]; then
	echo "---- server log (last 30 lines, set-full warnings left out)"
	grep -vE 'parked set is full|waits until its fence|Increase "aion_wake.max_parked_rows"' "$LOG" | tail -n 30
	echo "reproduce: STRESS_MODE=$MODE STRESS_CLIENTS=$CLIENTS $0 $DURATION $SEED   (same random choices; timing differs)"
fi
echo "stress: mode $MODE: $PASSED passed, $FAILED failed (seed $SEED)"
[ "$FAILED" -eq 0 ] || exit 1
exit 0
}
