#!/usr/bin/env bash
# bench/protocol.sh -- cost of the shared-memory protocol (1.0).
#
# A measurement, not a test: it prints figures and PASS/MISS against the
# targets, and exits 0 either way (non-zero only if a run itself fails).
#
#  (a) park_pending + confirm of a fresh key, against two SELECT 1 (the same
#      number of round trips), at 1 and 2 clients.  Target: latency ratio
#      <= 1.25.  Each pair is measured alone and both side by side in one run;
#      the verdict uses the side-by-side run, which is immune to the run-to-run
#      drift of single-client pgbench on a small VM.
#  (b) take_confirmed(max_rows => 10) with 1,000 and with 1,000,000 confirmed
#      entries in the set.  Every transaction puts 10 fresh entries back, so
#      the set keeps its size; the take statement's own latency comes from
#      pgbench -r.  Target: latency ratio big/small <= 2.
#  Shared memory per entry: pg_shmem_allocations with the default
#  max_parked_rows (65536), and the marginal cost per entry between 65536
#  and the 1,100,000 used for (b).
#
# Usage (as root or as postgres):  bench/protocol.sh
# Environment: see lib.sh (BENCH_PORT, BENCH_SECONDS, BENCH_MODE).
# PROTO_BIG (default 1000000) and PROTO_SMALL (default 1000) set the sizes;
# the cluster gets max_parked_rows = PROTO_BIG + 100000.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROTO_SMALL=${PROTO_SMALL:-1000}
PROTO_BIG=${PROTO_BIG:-1000000}
SQLDIR=$BENCH_DIR_SQL

# --- shared memory per entry ------------------------------------------------

shmem_named() {
	bench_sql "SELECT sum(allocated_size) FROM pg_shmem_allocations
	            WHERE name IN ('aion_wake parked set', 'aion_wake state')"
}
shmem_total() {
	bench_sql "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL"
}

BENCH_MAX_PARKED_ROWS='' bench_start
rows_default=$(bench_sql "SHOW aion_wake.max_parked_rows")
named_default=$(shmem_named)
total_default=$(shmem_total)
bench_sql "SELECT name, allocated_size FROM pg_shmem_allocations
            WHERE name LIKE 'aion_wake%' ORDER BY name" | sed 's/^/    /' >&2

BENCH_MAX_PARKED_ROWS=$((PROTO_BIG + 100000))
bench_start
rows_big=$(bench_sql "SHOW aion_wake.max_parked_rows")
named_big=$(shmem_named)
total_big=$(shmem_total)

per_entry_named=$(bench_div "$named_default" "$rows_default")
per_entry_marginal=$(bench_div "$((total_big - total_default))" "$((rows_big - rows_default))")
bench_log "shared memory: named allocations ${named_default} B at ${rows_default} rows = ${per_entry_named} B/entry; marginal (all allocations, ${rows_default} -> ${rows_big} rows) = ${per_entry_marginal} B/entry"

# --- (a) park_pending + confirm vs two SELECT 1 -------------------------------

BENCH_SUMMARY=()
bench_summary_add '%-34s %2s %8s %7s %6s | %8s %7s %6s | %6s %6s %6s  %s' \
	"what" "c" "tps" "lat ms" "srv us" "base tps" "lat ms" "srv us" "alone" "same" "target" "verdict"
# each pair leaves a confirmed entry: empty the set before every run
drain_pair() { bench_sql "SELECT count(*) FROM aion_wake.take_confirmed('pair')" >/dev/null; }
BENCH_BEFORE_RUN=drain_pair
CMP_EXTRA=$SQLDIR/pair_shape.sql
declare -A SHAPE_LINE
for c in 1 2; do
	bench_compare "pair" "$c" "$SQLDIR/select1x2.sql" "$SQLDIR/pair.sql"
	SHAPE_LINE[$c]=$(printf '%-34s %2d  same run: pair %.4f ms, same-shape statements without aion_wake %.4f ms, 2x SELECT 1 %.4f ms -> pair / same-shape %s' \
		"" "$c" "$CMP_MC_LAT" "$CMP_MX_LAT" "$CMP_MB_LAT" "$(bench_div "$CMP_MC_LAT" "$CMP_MX_LAT")")
	bench_summary_add '%-34s %2d %8.0f %7.4f %6.0f | %8.0f %7.4f %6.0f | %6.3f %6.3f %6s  %s' \
		"park_pending+confirm / 2x SELECT 1" "$c" "$CMP_C_TPS" "$CMP_C_LAT" "$CMP_C_SRV" \
		"$CMP_B_TPS" "$CMP_B_LAT" "$CMP_B_SRV" "$CMP_R_ALONE" "$CMP_R_SAME" "<=1.25" \
		"$(bench_verdict "$CMP_R_SAME" '<=' 1.25) (alone: $(bench_verdict "$CMP_R_ALONE" '<=' 1.25))"
done
BENCH_BEFORE_RUN=
CMP_EXTRA=
bench_summary_add '%s' "${SHAPE_LINE[1]}"
bench_summary_add '%s' "${SHAPE_LINE[2]}"
bench_sql "SELECT 'set after (a): ' || parked_confirmed || ' confirmed, ' || parked_pending
            || ' pending, set_full ' || set_full FROM aion_wake.status" >&2
drain_pair

# the same pair timed inside one backend (no round trips): least of 3
bench_load_inserver
us_noop=$(bench_min_of 3 "SELECT bench_noop2(100000)")
us_pair=$(bench_min_of 3 "SELECT bench_pair(100000)")
bench_log "in-server: park_pending+confirm ${us_pair} us, two no-op statements ${us_noop} us"
bench_summary_add '%-34s    in-server, no round trip: %s us per pair, %s us per two no-op statements' \
	"" "$us_pair" "$us_noop"

# --- (b) take_confirmed at 1,000 and 1,000,000 entries ------------------------

fill() {	# fill FROM TO: confirmed UNFENCED entries f<FROM>..f<TO>, topic bench
	bench_sql "SELECT count(*) FILTER (WHERE aion_wake.park_pending('f' || g, 0, 'bench')
	                                    AND NOT aion_wake.confirm('f' || g))
	             FROM generate_series($1, $2) g"
}
confirmed() { bench_sql "SELECT parked_confirmed FROM aion_wake.status"; }

# empty the set left by (a)
bench_sql "SELECT count(*) FROM aion_wake.take_confirmed()" >/dev/null
n=$(fill 1 "$PROTO_SMALL")
bench_log "filled $n entries; set holds $(confirmed)"

declare -A TAKE_LAT SEL_LAT SCRIPT_LAT SCRIPT_TPS TAKE_US
for size in small big; do
	if [ $size = big ]; then
		t0=$(date +%s.%N)
		n=$(fill $((PROTO_SMALL + 1)) "$PROTO_BIG")
		t1=$(date +%s.%N)
		bench_log "filled $n more entries in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s; set holds $(confirmed)"
	fi
	for c in 1 2; do
		bench_pgbench "take 10 + refill 10 ($size)" "$c" "$SQLDIR/take.sql"
		TAKE_LAT[$size.$c]=$(bench_stmt_lat 'aion_wake.take_confirmed')
		SEL_LAT[$size.$c]=$(bench_stmt_lat 'SELECT 1;')
		SCRIPT_LAT[$size.$c]=$BENCH_LAT
		SCRIPT_TPS[$size.$c]=$BENCH_TPS
		bench_log "  take statement ${TAKE_LAT[$size.$c]} ms, SELECT 1 ${SEL_LAT[$size.$c]} ms; set holds $(confirmed)"
	done
	TAKE_US[$size]=$(bench_min_of 3 "SELECT bench_take(20000, 'bench')")
	bench_log "  in-server take_confirmed(10): ${TAKE_US[$size]} us; set holds $(confirmed)"
done

bench_summary_add ''
bench_summary_add '%-34s %2s %9s %9s %9s %9s | %7s %7s %7s  %s' \
	"take_confirmed(max_rows => 10)" "c" "take ms" "SELECT1" "script" "tps" \
	"big/sm" "norm." "target" "verdict"
for c in 1 2; do
	for size in small big; do
		bench_summary_add '%-34s %2d %9.4f %9.4f %9.4f %9.0f |' \
			"  $([ $size = small ] && echo "$PROTO_SMALL" || echo "$PROTO_BIG") entries" "$c" \
			"${TAKE_LAT[$size.$c]}" "${SEL_LAT[$size.$c]}" "${SCRIPT_LAT[$size.$c]}" "${SCRIPT_TPS[$size.$c]}"
	done
	r=$(bench_div "${TAKE_LAT[big.$c]}" "${TAKE_LAT[small.$c]}")
	# the same ratio with each take normalised by the SELECT 1 of its own run
	rn=$(awk -v tb="${TAKE_LAT[big.$c]}" -v sb="${SEL_LAT[big.$c]}" \
	         -v ts="${TAKE_LAT[small.$c]}" -v ss="${SEL_LAT[small.$c]}" \
	         'BEGIN { printf "%.3f", (tb / sb) / (ts / ss) }')
	bench_summary_add '%-34s %2d %9s %9s %9s %9s | %7.3f %7.3f %7s  %s' \
		"  ratio big/small" "$c" "" "" "" "" "$r" "$rn" "<=2" "$(bench_verdict "$r" '<=' 2)"
done

bench_summary_add '%-34s    in-server, no round trip: %s us per take at %s entries, %s us at %s (ratio %s)' \
	"" "${TAKE_US[small]}" "$PROTO_SMALL" "${TAKE_US[big]}" "$PROTO_BIG" \
	"$(bench_div "${TAKE_US[big]}" "${TAKE_US[small]}")"

bench_summary_add ''
bench_summary_add 'shared memory: %s B in "aion_wake parked set" + "aion_wake state" at max_parked_rows %s = %s B/entry' \
	"$named_default" "$rows_default" "$per_entry_named"
bench_summary_add '               marginal, all allocations, %s -> %s rows: %s B/entry (hash elements are allocated anonymously)' \
	"$rows_default" "$rows_big" "$per_entry_marginal"

bench_summary_print "aion_wake protocol benchmark (bench/protocol.sh)"
