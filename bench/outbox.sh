#!/usr/bin/env bash
# bench/outbox.sh -- cost of the outbox functions against the SQL they
# replace, and table bloat under park/re-offer churn (the 1.0 outbox).
#
# A measurement, not a test: it prints figures and PASS/MISS against the
# targets, and exits 0 either way (non-zero only if a run itself fails).
#
#  (a) park() of a random row among OUTBOX_ROWS (100k) against the bare fence
#      UPDATE it replaces, at 1 and 2 clients.  Target: latency ratio <= 1.15.
#  (b) claim('bench', 1, '1 hour') against the same claim written by hand
#      (FOR UPDATE SKIP LOCKED), over CLAIM_ROWS (200k) rows visible now; the
#      table is reset (every fence back to the past, VACUUM ANALYZE) before
#      each run.  Target: throughput ratio claim/by-hand >= 0.9.
#  Each pair is measured alone and side by side in one run (weight 1 each,
#  same conditions); the verdict uses the side-by-side run.
#  (c) bloat: BLOAT_ROUNDS (100) rounds of "park all BLOAT_SET (1000) rows in
#      one transaction, then reoffer('bloat', 1000)" = 100k park/re-offer
#      cycles, with autovacuum on; table and index sizes, n_dead_tup and the
#      autovacuum count every 10 rounds.  Run twice: with the default
#      autovacuum_naptime (1 min), and with autovacuum_naptime = 1s for
#      BLOAT_ROUNDS_LONG (300) rounds, long enough to see it level off.
#
# Usage (as root or as postgres):  bench/outbox.sh [a] [b] [c]   (default: all)
# Environment: see lib.sh (BENCH_PORT, BENCH_SECONDS, BENCH_MODE).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUTBOX_ROWS=${OUTBOX_ROWS:-100000}
CLAIM_ROWS=${CLAIM_ROWS:-200000}
BLOAT_SET=${BLOAT_SET:-1000}
BLOAT_ROUNDS=${BLOAT_ROUNDS:-100}
BLOAT_ROUNDS_LONG=${BLOAT_ROUNDS_LONG:-300}
SQLDIR=$BENCH_DIR_SQL
PARTS=${*:-a b c}

BENCH_SUMMARY=()
bench_summary_add '%-32s %2s %8s %7s %6s | %8s %7s %6s | %6s %6s %6s  %s' \
	"what" "c" "tps" "lat ms" "srv us" "base tps" "lat ms" "srv us" "alone" "same" "target" "verdict"

# --- (a) park() vs the bare fence UPDATE --------------------------------------

part_a() {
	# every park leaves an entry: room for all of them, so the set never fills
	BENCH_MAX_PARKED_ROWS=$((OUTBOX_ROWS + 50000)) bench_start
	bench_sql "SELECT count(*) FILTER (WHERE aion_wake.enqueue('r' || g, '{}', 'bench'))
	             FROM generate_series(1, $OUTBOX_ROWS) g" >/dev/null
	bench_sql "VACUUM ANALYZE aion_wake.outbox"
	bench_log "enqueued $OUTBOX_ROWS rows"
	local c
	for c in 1 2; do
		bench_compare "park" "$c" "$SQLDIR/fence_update.sql" "$SQLDIR/park.sql" \
			-- -D nrows="$OUTBOX_ROWS"
		bench_summary_add '%-32s %2d %8.0f %7.3f %6.0f | %8.0f %7.3f %6.0f | %6.3f %6.3f %6s  %s' \
			"park() / fence UPDATE (latency)" "$c" "$CMP_C_TPS" "$CMP_C_LAT" "$CMP_C_SRV" \
			"$CMP_B_TPS" "$CMP_B_LAT" "$CMP_B_SRV" "$CMP_R_ALONE" "$CMP_R_SAME" "<=1.15" \
			"$(bench_verdict "$CMP_R_SAME" '<=' 1.15) (alone: $(bench_verdict "$CMP_R_ALONE" '<=' 1.15))"
	done
	# the same calls timed inside one backend (no round trip, no commit)
	bench_load_inserver
	local us_upd us_park
	us_upd=$(bench_min_of 3 "SELECT bench_fence_update(20000, $OUTBOX_ROWS)")
	us_park=$(bench_min_of 3 "SELECT bench_park(20000, $OUTBOX_ROWS)")
	bench_log "in-server: park() ${us_park} us, fence UPDATE ${us_upd} us"
	bench_summary_add '%-32s    in-server, no round trip or commit: park() %s us, fence UPDATE %s us (ratio %s)' \
		"" "$us_park" "$us_upd" "$(bench_div "$us_park" "$us_upd")"
	bench_sql "SELECT 'set after (a): ' || parked_confirmed || ' confirmed, set_full '
	                  || set_full FROM aion_wake.status" >&2
}

# --- (b) claim() vs the hand-written claim --------------------------------------

claim_reset() {
	bench_sql "UPDATE aion_wake.outbox
	              SET visible_after = clock_timestamp() - interval '1 s',
	                  lease_token = NULL, parked_at = NULL" >/dev/null
	bench_sql "VACUUM ANALYZE aion_wake.outbox"
}
claim_left() {
	bench_sql "SELECT count(*) FROM aion_wake.outbox WHERE visible_after <= clock_timestamp()"
}

part_b() {
	bench_start
	bench_sql "SELECT count(*) FILTER (WHERE aion_wake.enqueue('c' || g, '{}', 'bench'))
	             FROM generate_series(1, $CLAIM_ROWS) g" >/dev/null
	bench_log "enqueued $CLAIM_ROWS rows"
	local c left
	for c in 1 2; do
		BENCH_BEFORE_RUN=claim_reset
		bench_compare "claim" "$c" "$SQLDIR/claim_by_hand.sql" "$SQLDIR/claim.sql"
		BENCH_BEFORE_RUN=
		left=$(claim_left)
		bench_log "  rows still visible after the side-by-side run: $left"
		if [ "$left" -eq 0 ]; then
			bench_log "  the queue ran dry: raise CLAIM_ROWS, the figures above are not valid"
		fi
		# throughput ratio: tps alone, and the inverse latency ratio side by side
		local r_alone r_same
		r_alone=$(bench_div "$CMP_C_TPS" "$CMP_B_TPS")
		r_same=$(bench_div "$CMP_MB_LAT" "$CMP_MC_LAT")
		bench_summary_add '%-32s %2d %8.0f %7.3f %6.0f | %8.0f %7.3f %6.0f | %6.3f %6.3f %6s  %s' \
			"claim() / by hand (throughput)" "$c" "$CMP_C_TPS" "$CMP_C_LAT" "$CMP_C_SRV" \
			"$CMP_B_TPS" "$CMP_B_LAT" "$CMP_B_SRV" "$r_alone" "$r_same" ">=0.9" \
			"$(bench_verdict "$r_same" '>=' 0.9) (alone: $(bench_verdict "$r_alone" '>=' 0.9))"
	done
}

# Where claim() spends its time: plans and planning time of every statement
# (the one claim() runs through SPI included), from pg_stat_statements with
# track = all and track_planning = on, in a cluster of its own so that the
# extra bookkeeping does not touch the figures above.
claim_diag() {
	bench_start "shared_preload_libraries = 'aion_wake, pg_stat_statements'" \
		"pg_stat_statements.track = all" "pg_stat_statements.track_planning = on"
	bench_sql "CREATE EXTENSION pg_stat_statements"
	bench_sql "SELECT count(*) FILTER (WHERE aion_wake.enqueue('c' || g, '{}', 'bench'))
	             FROM generate_series(1, 100000) g" >/dev/null
	bench_sql "VACUUM ANALYZE aion_wake.outbox"
	bench_sql "SELECT pg_stat_statements_reset()" >/dev/null
	BENCH_SECONDS=3 bench_pgbench "claim (pg_stat_statements)" 1 "$SQLDIR/claim.sql"
	BENCH_SECONDS=3 bench_pgbench "by hand (pg_stat_statements)" 1 "$SQLDIR/claim_by_hand.sql"
	bench_summary_add ''
	bench_summary_add 'claim statements, 1 client, 3 s each (pg_stat_statements, track_planning):'
	bench_summary_add '  %8s %8s %9s %9s  %s' "calls" "plans" "plan ms" "exec ms" "statement"
	local line
	while IFS='|' read -r calls plans pt et q; do
		bench_summary_add '  %8d %8d %9.4f %9.4f  %s' "$calls" "$plans" "$pt" "$et" "$q"
	done < <(bench_sql "SELECT calls, plans, round(mean_plan_time::numeric, 4),
	                           round(mean_exec_time::numeric, 4),
	                           left(regexp_replace(query, '\s+', ' ', 'g'), 70)
	                      FROM pg_stat_statements
	                     WHERE calls > 100 AND (query ILIKE '%outbox%' OR query ILIKE '%claim%')
	                     ORDER BY query ILIKE '%aion_wake.claim(%' DESC, calls DESC")
}

# --- (c) bloat under park/re-offer churn ----------------------------------------

# bloat_run LABEL ROUNDS EVERY [postgresql.conf line ...]
bloat_run() {
	local label=$1 rounds=$2 every=$3
	shift 3
	bench_start "$@"
	bench_sql "SELECT count(*) FILTER (WHERE aion_wake.enqueue('x' || g, '{}', 'bloat'))
	             FROM generate_series(1, $BLOAT_SET) g" >/dev/null
	bench_sql "VACUUM ANALYZE aion_wake.outbox"
	local script=$BENCH_TMP/bloat.sql r
	{
		echo "\\set ON_ERROR_STOP on"
		echo "\\pset format unaligned"
		echo "\\pset tuples_only on"
		echo "\\pset fieldsep ' '"
		local sizes="SELECT %s, pg_relation_size('aion_wake.outbox'), pg_indexes_size('aion_wake.outbox'),
		                    n_live_tup, n_dead_tup, autovacuum_count,
		                    round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 1)
		               FROM pg_stat_user_tables WHERE relid = 'aion_wake.outbox'::regclass;"
		echo "SELECT clock_timestamp() AS t0 \\gset"
		# shellcheck disable=SC2059
		printf "$sizes\n" 0
		for ((r = 1; r <= rounds; r++)); do
			echo "SELECT 'park', count(aion_wake.park(dispatch_key, '1 hour')) FROM aion_wake.outbox WHERE topic = 'bloat';"
			echo "SELECT 'reoffer', aion_wake.reoffer('bloat', $BLOAT_SET);"
			if ((r % every == 0)); then
				echo "SELECT pg_stat_force_next_flush() \\g /dev/null"
				# shellcheck disable=SC2059
				printf "$sizes\n" "$r"
			fi
		done
	} >"$script"
	chmod 644 "$script"
	bench_log "bloat ($label): $rounds rounds of park $BLOAT_SET + reoffer $BLOAT_SET"
	local out=$BENCH_TMP/bloat.out
	bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres -X -q \
		-f "$script" >"$out"
	local parked reoffered
	parked=$(awk '$1 == "park" { s += $2 } END { print s + 0 }' "$out")
	reoffered=$(awk '$1 == "reoffer" { s += $2 } END { print s + 0 }' "$out")
	bench_summary_add ''
	bench_summary_add 'bloat, %s: %d parks and %d re-offers over %d rows' \
		"$label" "$parked" "$reoffered" "$BLOAT_SET"
	bench_summary_add '  %5s %10s %10s %8s %8s %9s %7s' \
		"round" "heap KB" "index KB" "live" "dead" "autovac" "secs"
	local line
	while read -r line; do
		bench_summary_add '  %5d %10.0f %10.0f %8d %8d %9d %7.1f' \
			$(awk '{ print $1, $2 / 1024, $3 / 1024, $4, $5, $6, $7 }' <<<"$line")
	done < <(grep -v -e '^park ' -e '^reoffer ' "$out")
	if [ "$parked" -ne $((rounds * BLOAT_SET)) ] || [ "$reoffered" -ne $((rounds * BLOAT_SET)) ]; then
		bench_summary_add '  NOTE: not every park/re-offer moved a row (expected %d each)' \
			$((rounds * BLOAT_SET))
	fi
	# where the 100k cycles leave the table once autovacuum has had its turn
	bench_sql "VACUUM aion_wake.outbox"
	bench_summary_add '  after a manual VACUUM: heap %s KB, indexes %s KB' \
		"$(bench_sql "SELECT pg_relation_size('aion_wake.outbox') / 1024")" \
		"$(bench_sql "SELECT pg_indexes_size('aion_wake.outbox') / 1024")"
}

part_c() {
	bloat_run "autovacuum_naptime 1min (default)" "$BLOAT_ROUNDS" $((BLOAT_ROUNDS / 10))
	bloat_run "autovacuum_naptime 1s" "$BLOAT_ROUNDS_LONG" $((BLOAT_ROUNDS_LONG / 10)) \
		"autovacuum_naptime = 1s"
}

for p in $PARTS; do
	case $p in
		a) part_a ;;
		b) part_b; claim_diag ;;
		c) part_c ;;
		*) echo "unknown part $p (a, b or c)" >&2; exit 2 ;;
	esac
done

bench_summary_print "aion_wake outbox benchmark (bench/outbox.sh $PARTS)"
