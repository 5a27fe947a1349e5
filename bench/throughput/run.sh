#!/usr/bin/env bash
#
# bench/throughput/run.sh -- throughput of aion_wake against the hand-written
# FOR UPDATE SKIP LOCKED queue, the way queue benchmarks are usually run:
#
#   burn-down   N jobs enqueued in one transaction, W workers with a no-op
#               handler drain them; makespan and jobs/s
#   continuous  producers insert at a fixed total rate R for T seconds;
#               latency from each row's scheduled enqueue time to the
#               return of its settle's commit (p50/p95/p99), and whether
#               every row was settled within 1 s of the end of the schedule
#               ("kept up")
#
# for six modes, in the same run on the same cluster (see throughput.c):
#   sql       hand-written: UPDATE ... SKIP LOCKED LIMIT 1 RETURNING, then
#             DELETE (two commits a row)                  -- the baseline
#   single    aion_wake.claim(topic, 1), then complete(key, token)
#   handoff   complete(key, token, next_rows => 1)
#   sqlhandoff  hand-written: the DELETE and the next claim in one statement
#             (data-modifying WITH), one commit a row
#   sqlbatch  hand-written, LIMIT B and one DELETE of the batch
#   batch     claim(topic, B), then complete_many(keys[], tokens[], next_rows => B)
#             (1.2; printed as "needs 1.2" when the function is missing)
#
# Durability stays on (fsync, synchronous_commit).  Every mode starts from an
# emptied and vacuumed table and right after a CHECKPOINT.  The burn-down
# runs REPS times, the modes interleaved (sql, single, sqlhandoff, handoff,
# sqlbatch, batch, sql, ...) so that a change in the machine's other load hits every
# mode alike; the table shows the median run and the ratio of each mode's
# median to the hand-written baseline's median of the same run.  For each
# measured phase it reports WAL bytes (pg_current_wal_lsn), WAL flushes
# (pg_stat_wal.wal_sync) and commits (pg_stat_database.xact_commit, every
# transaction of the database, read-only ones included: a claim that found
# nothing counts) per delivered row, the server's CPU time per row (the
# backends of the phase, read from the postmaster's cutime + cstime once
# they have exited, plus the aion_wake worker and its listener), and what
# the workers' backends waited for (pg_stat_activity.wait_event sampled
# every 10 ms; "CPU" when none).  In the continuous run the hand-written
# queue runs twice: its workers LISTEN (a statement trigger NOTIFYs on
# every insert, which wakes every listener) and then poll every
# THROUGHPUT_POLL_MS ms.
#
# With THROUGHPUT_BACKLOG="10000 1000000" (the default: "", none) it also
# times, on one connection, claim, complete and the hand-off with that many
# visible rows queued, and prints the ratio of the largest to the smallest.
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp
# directory, Unix socket only), builds throughput.c, and writes
# results/throughput.md (the tables, markdown) and results/raw.txt (the
# RESULT lines).  Exits 0 whatever the figures; non-zero only if a run fails.
#
# With THROUGHPUT_PEERS=1 the burn-down also runs, once per round, on the
# same cluster, with npm installing them into the run's directory (needs
# node and npm):
#   graphile-worker (THROUGHPUT_GRAPHILE_VERSION, 0.17.3) with the
#   configuration of its own Performance page (peers/graphile.js);
#   pg-boss (THROUGHPUT_PGBOSS_VERSION, 12.38.0, run by Node 22 from npm's
#   node package, as pg-boss 11 and later need Node 22 and Debian 12 has
#   18) with the settings its option documentation gives for a backlog
#   (peers/pgboss.js): THROUGHPUT_WORKERS workers fetching and completing
#   THROUGHPUT_BATCH jobs at a time, fetching again at once while batches
#   come back full.
#
# Usage (as root -- the server and the client then run as postgres -- or as
# postgres):   bench/throughput/run.sh
# Environment: THROUGHPUT_PORT (5541), THROUGHPUT_JOBS (20000),
# THROUGHPUT_WORKERS (16), THROUGHPUT_BATCH (100), THROUGHPUT_REPS (3),
# THROUGHPUT_MODES ("sql single sqlhandoff handoff sqlbatch batch"),
# THROUGHPUT_RATE (500 rows/s), THROUGHPUT_POLL_MS (10), THROUGHPUT_SECONDS (10),
# THROUGHPUT_PRODUCERS (4), THROUGHPUT_CONT (1; 0: no continuous run),
# THROUGHPUT_BACKLOG (""), THROUGHPUT_SAMPLES (2000),
# THROUGHPUT_SWEEP ("": none; e.g. "1 2 4 8 16 32": the burn-down also runs
# with each of these numbers of workers, in the same rounds, and a table
# gives each mode's median at each and at its best, and the batch's best
# against the single-row hand-off's),
# THROUGHPUT_OUT (where results/ goes; default bench/throughput),
# THROUGHPUT_TRACE (0; 1: each run prints, on stderr, when each worker's
# first claim returned and its last settle committed), PG_CONFIG (pg_config).
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${THROUGHPUT_OUT:-$here}
results=$out/results
JOBS=${THROUGHPUT_JOBS:-20000}
WORKERS=${THROUGHPUT_WORKERS:-16}
BATCH=${THROUGHPUT_BATCH:-100}
REPS=${THROUGHPUT_REPS:-3}
MODES=${THROUGHPUT_MODES:-sql single sqlhandoff handoff sqlbatch batch}
RATE=${THROUGHPUT_RATE:-500}
POLL_MS=${THROUGHPUT_POLL_MS:-10}
SECONDS_CONT=${THROUGHPUT_SECONDS:-10}
PRODUCERS=${THROUGHPUT_PRODUCERS:-4}
CONT=${THROUGHPUT_CONT:-1}
BACKLOG=${THROUGHPUT_BACKLOG:-}
SWEEP=${THROUGHPUT_SWEEP:-}
# the numbers of workers the burn-down runs with: WORKERS, and the sweep's
COUNTS=$(echo "$WORKERS $SWEEP" | tr ' ' '\n' | sed '/^$/d' | sort -nu | paste -sd' ')
MAXCOUNT=$(echo "$COUNTS" | tr ' ' '\n' | tail -1)
PEERS=${THROUGHPUT_PEERS:-0}
GW_VERSION=${THROUGHPUT_GRAPHILE_VERSION:-0.17.3}
PB_VERSION=${THROUGHPUT_PGBOSS_VERSION:-12.38.0}
SAMPLES=${THROUGHPUT_SAMPLES:-2000}
PG_CONFIG=${PG_CONFIG:-pg_config}
PG_BINDIR=$($PG_CONFIG --bindir)
BENCH_PORT=${THROUGHPUT_PORT:-5541}

# shellcheck source=../lib.sh
. "$here/../lib.sh"
# shellcheck source=setup.sh
. "$here/setup.sh"
log() { bench_log "$@"; }

# the most workers, the producers, the monitor and the worker's own connection
throughput_setup throughput "max_connections = $((MAXCOUNT + PRODUCERS + 10))" "max_wal_size = 8GB"

if [ "$PEERS" = 1 ]; then
	# graphile-worker from npm, into the run's own directory
	mkdir -p "$tmp/gw"
	cp "$here/peers/graphile.js" "$tmp/gw/"
	(cd "$tmp/gw" && npm install --silent --no-audit --no-fund "graphile-worker@$GW_VERSION" >/dev/null)
	# pg-boss, and the Node it needs
	mkdir -p "$tmp/pb"
	cp "$here/peers/pgboss.js" "$tmp/pb/"
	(cd "$tmp/pb" && npm install --silent --no-audit --no-fund node@22 "pg-boss@$PB_VERSION" pg >/dev/null)
	chmod -R a+rX "$tmp/gw" "$tmp/pb"
fi
peer_url="postgres://postgres@/postgres?host=$BENCH_TMP&port=$BENCH_PORT"
peer_graphile() {
	bench_as_pg env GW_URL="$peer_url" node "$tmp/gw/graphile.js" "$JOBS"
}
peer_pgboss() {
	bench_as_pg env PB_URL="$peer_url" "$tmp/pb/node_modules/.bin/node" "$tmp/pb/pgboss.js" \
		"$JOBS" "$WORKERS" "$BATCH"
}

client() {
	bench_as_pg env PGHOST="$BENCH_TMP" PGPORT="$BENCH_PORT" PGDATABASE=postgres \
		PGUSER=postgres THROUGHPUT_WAITS=1 THROUGHPUT_POLL_MS="${poll:-0}" \
		THROUGHPUT_TRACE="${THROUGHPUT_TRACE:-0}" \
		"$tmp/throughput" "$@"
}

mkdir -p "$results"
raw=$tmp/raw.txt
: >"$raw"
loadmark=$(bench_load_mark)
for ((rep = 1; rep <= REPS; rep++)); do
	for w in $COUNTS; do
		for m in $MODES; do
			b=1
			case $m in batch | sqlbatch) b=$BATCH ;; esac
			line=$(client "$m" burn "$JOBS" "$w" "$b")
			echo "$line rep=$rep" >>"$raw"
			log "burn $rep $line"
		done
	done
	if [ "$PEERS" = 1 ]; then
		for peer in peer_graphile peer_pgboss; do
			line=$($peer)
			echo "$line rep=$rep" >>"$raw"
			log "burn $rep $line"
		done
	fi
done
if [ "$CONT" = 1 ]; then
	for m in $MODES; do
		b=1
		case $m in batch | sqlbatch) b=$BATCH ;; esac
		line=$(client "$m" cont "$RATE" "$SECONDS_CONT" "$WORKERS" "$b" "$PRODUCERS")
		echo "$line" >>"$raw"
		log "cont $line"
		# the hand-written queue again, its workers polling instead of
		# listening (every NOTIFY wakes all 16, and each claims)
		case $m in sql | sqlhandoff | sqlbatch)
			line=$(poll=$POLL_MS client "$m" cont "$RATE" "$SECONDS_CONT" "$WORKERS" "$b" "$PRODUCERS")
			echo "$line" >>"$raw"
			log "cont $line"
			;;
		esac
	done
fi
for n in $BACKLOG; do
	line=$(client single latency "$n" "$SAMPLES")
	echo "$line" >>"$raw"
	log "latency $line"
done
load=$(bench_load_since "$loadmark")

# --- the tables ---------------------------------------------------------------

# field FIELD < lines: the value of FIELD=... on each line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# atworkers [N] < lines: the burn-down's lines with N workers (default
# WORKERS; a peer's line, which has no workers=, counts as such)
atworkers() { awk -v w="${1:-$WORKERS}" '!match($0, / workers=[0-9]+ /) || substr($0, RSTART + 9, RLENGTH - 10) == w'; }
# (a mode not run gives "-")
burnstat() { { grep "mode=$1 phase=burn " "$raw" || true; } | atworkers "${3:-}" | { grep -v skip= || true; } | field "$2" | median; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
label() {
	case $1 in
	sql) echo "hand-written SKIP LOCKED, claim then DELETE (2 commits)" ;;
	single) echo "aion_wake claim + complete (2 commits)" ;;
	handoff) echo "aion_wake complete(..., next_rows => 1)" ;;
	sqlhandoff) echo "hand-written hand-off: DELETE + next claim in one statement (1 commit)" ;;
	sqlbatch) echo "hand-written batch claim + DELETE, B = $BATCH" ;;
	batch) echo "aion_wake claim(B) + complete_many(keys[], tokens[], next_rows => B), B = $BATCH" ;;
	graphile) echo "graphile-worker $GW_VERSION, its Performance page's configuration (concurrentJobs 24, maxPoolSize 25, localQueue 500, completeJobBatchDelay 0, failJobBatchDelay 0)" ;;
	pgboss) echo "pg-boss $PB_VERSION: localConcurrency $WORKERS, batchSize $BATCH, burstWhenBatchFull, pollingIntervalSeconds 0.5" ;;
	esac
}

base=$(burnstat sql jobs_s)
bbase=$(burnstat sqlbatch jobs_s)
hbase=$(burnstat sqlhandoff jobs_s)
so=$("$PG_CONFIG" --pkglibdir)/aion_wake.so
{
	echo "# aion_wake throughput (bench/throughput/run.sh)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs shared with other work (others used $(echo "$load" | cut -d' ' -f2) CPUs on average during the run), $("$PG_BINDIR/postgres" --version | sed 's/^postgres //'), fsync and synchronous_commit on."
	echo "aion_wake.so $(md5sum "$so" | cut -c1-12), tree at $(git -c safe.directory='*' -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')."
	echo
	echo "## Burn-down: $JOBS no-op jobs enqueued in one transaction, $WORKERS workers, median of $REPS runs"
	echo
	echo "| mode | jobs/s | makespan s | / hand-written | / hand-written of its kind | server CPU us/row | WAL B/row | WAL flushes/row | commits/row | statements/row | runs (jobs/s) | wait events (median run) |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	burnmodes=$MODES
	[ "$PEERS" = 1 ] && burnmodes="$MODES graphile pgboss"
	for m in $burnmodes; do
		if grep -q "mode=$m phase=burn skip=" "$raw"; then
			echo "| $(label "$m") | needs 1.2 (aion_wake.complete_many missing) | | | | | | | | | | |"
			continue
		fi
		j=$(burnstat "$m" jobs_s)
		rb="-"
		case $m in
		batch | sqlbatch | graphile | pgboss) rb=$(div "$j" "$bbase") ;;
		handoff | sqlhandoff) rb=$(div "$j" "$hbase") ;;
		esac
		runs=$(grep "mode=$m phase=burn " "$raw" | atworkers | field jobs_s | paste -sd' ')
		# the wait events of the run whose jobs/s is the median
		waits=$(grep "mode=$m phase=burn .* jobs_s=$j " "$raw" | atworkers | head -1 | field waits | cut -d, -f1-3 | sed 's/,/, /g')
		echo "| $(label "$m") | $j | $(burnstat "$m" seconds) | $(div "$j" "$base") | $rb | $(burnstat "$m" server_cpu_us_row) | $(burnstat "$m" wal_bytes_row) | $(burnstat "$m" wal_sync_row) | $(burnstat "$m" commits_row) | $(burnstat "$m" stmts_row) | $runs | ${waits:--} |"
	done
	s1=$(burnstat single jobs_s)
	h1=$(burnstat handoff jobs_s)
	if [ "$s1" != "-" ] && [ "$h1" != "-" ]; then
		echo
		echo "The hand-off does $(div "$h1" "$s1")x the jobs/s of aion_wake's claim + complete."
	fi
	if [ -n "$SWEEP" ]; then
		echo
		echo "## Burn-down by number of workers: jobs/s, median of $REPS runs"
		echo
		echo "| mode | ${COUNTS// / | } | best (workers) |"
		echo "|---|$(echo "$COUNTS" | sed 's/[0-9]*/---|/g; s/ //g')---|"
		declare -A best
		for m in $MODES; do
			row="| $(label "$m") |"
			bestj=0
			bestw=-
			for w in $COUNTS; do
				j=$(burnstat "$m" jobs_s "$w")
				row="$row $j |"
				if [ "$j" != "-" ] && awk -v a="$j" -v b="$bestj" 'BEGIN { exit !(a > b) }'; then
					bestj=$j
					bestw=$w
				fi
			done
			echo "$row $bestj ($bestw) |"
			best[$m]=$bestj
		done
		if [ -n "${best[batch]:-}" ] && [ -n "${best[handoff]:-}" ]; then
			echo
			echo "Each at its best, the batch does $(div "${best[batch]}" "${best[handoff]}")x the single-row hand-off's jobs/s; with $WORKERS workers each, $(div "$(burnstat batch jobs_s)" "$(burnstat handoff jobs_s)")x."
		fi
	fi
	if [ "$CONT" = 1 ]; then
		echo
		echo "## Continuous: $RATE rows/s for $SECONDS_CONT s from $PRODUCERS producers (one autocommit insert each row), $WORKERS workers"
		echo
		echo "Latency from the row's scheduled enqueue time to the return of its settle's commit."
		echo
		echo "| mode | workers wait by | p50 ms | p95 ms | p99 ms | max ms | kept up | producer max lag ms | server CPU us/row | WAL B/row | WAL flushes/row | commits/row |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
		grep "phase=cont " "$raw" | while read -r l; do
			m=$(echo "$l" | sed 's/.*mode=\([a-z]*\) .*/\1/')
			if echo "$l" | grep -q skip=; then
				echo "| $(label "$m") | | needs 1.2 | | | | | | | | | |"
				continue
			fi
			f() { echo "$l" | field "$1"; }
			wake=$(f sql_wake)
			case $wake in
			claim_wait) wake="claim(..., wait => '200 ms')" ;;
			notify) wake="LISTEN; a statement trigger NOTIFYs" ;;
			poll) wake="sleep $POLL_MS ms when empty" ;;
			esac
			echo "| $(label "$m") | $wake | $(f p50_ms) | $(f p95_ms) | $(f p99_ms) | $(f max_ms) | $(f kept_up) | $(f producer_max_lag_ms) | $(f server_cpu_us_row) | $(f wal_bytes_row) | $(f wal_sync_row) | $(f commits_row) |"
		done
	fi
	if [ -n "$BACKLOG" ]; then
		echo
		echo "## Backlog: one connection, $SAMPLES rounds, visible rows queued (ms, p50 / p99)"
		echo
		echo "| backlog rows | claim | complete | hand-off complete(next_rows => 1) | enqueue |"
		echo "|---|---|---|---|---|"
		for n in $BACKLOG; do
			l=$(grep "phase=latency backlog=$n " "$raw")
			f() { echo "$l" | field "$1"; }
			echo "| $n | $(f claim_p50_ms) / $(f claim_p99_ms) | $(f complete_p50_ms) / $(f complete_p99_ms) | $(f handoff_p50_ms) / $(f handoff_p99_ms) | $(f enqueue_p50_ms) / $(f enqueue_p99_ms) |"
		done
		lo=$(echo "$BACKLOG" | tr ' ' '\n' | sort -g | head -1)
		hi=$(echo "$BACKLOG" | tr ' ' '\n' | sort -g | tail -1)
		if [ "$lo" != "$hi" ]; then
			l1=$(grep "phase=latency backlog=$lo " "$raw")
			l2=$(grep "phase=latency backlog=$hi " "$raw")
			r() { div "$(echo "$l2" | field "$1")" "$(echo "$l1" | field "$1")"; }
			echo "| ratio $hi / $lo (p50) | $(r claim_p50_ms) | $(r complete_p50_ms) | $(r handoff_p50_ms) | $(r enqueue_p50_ms) |"
		fi
	fi
} >"$results/throughput.md"
cp "$raw" "$results/raw.txt"
cat "$results/throughput.md"
