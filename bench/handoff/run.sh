#!/usr/bin/env bash
#
# bench/handoff/run.sh -- the zero-gap hand-off and known capacity, measured
# (the measurements asked of the 1.1 hand-off and of known capacity):
#
#  1. freed slot -> next call starts, p50 and p99 (handoff.c): the
#     settle-and-take path (complete(next_rows => 1), unlimited and
#     limited), the blocked-claimer hand-off (complete + pulse handed to a
#     claimer, spent in its claim), the 1.0 three-commit path (complete,
#     re-offer, claim), and release -> next claim returns for a claimer
#     blocked on a full limited topic.
#     Target (known capacity): release -> claim p50 <= 0.3 ms, p99 <= 2 ms.
#  2. claim() throughput on a topic whose limit never binds against an
#     unlimited topic, pgbench, the two side by side in one run (and each
#     alone): claim and settle in one statement (in flight <= clients), and
#     claim alone with hour-long leases (live leases pile up to tens of
#     thousands).  Target (known capacity): >= 0.9x.
#  3. shared memory per lease record, per topic and per parked row, from
#     pg_shmem_allocations at two settings of each (a cluster started per
#     setting).
#
# Why: these are the figures issues 14 and 17 ask for beside the headline;
# they say where a freed slot's time goes, path by path.  A measurement,
# not a test: it prints PASS/MISS and exits 0 either way (non-zero only if
# the run itself fails).
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp
# directory, Unix socket only, durability defaults kept), builds handoff.c,
# and stops the cluster on exit.  Before each measurement it waits (at most
# HANDOFF_QUIET_MAX s) until other processes use less than
# HANDOFF_QUIET_CPU CPUs, and it prints what they used during it.
# Outputs: bench/handoff/results.txt (the table), data/*.dat (sorted
# latencies), data/results.raw (every RESULT line), latency_cdf.png / .svg
# (gnuplot).  Git keeps all but results.raw, which every run writes afresh.
#
# Usage (as root or as postgres):  bench/handoff/run.sh
# Environment: HANDOFF_PORT (5575), HANDOFF_SAMPLES (1000),
# HANDOFF_PGBENCH_SECONDS (10), HANDOFF_CLAIM_ROWS (150000 rows per topic
# for the claim-alone runs), HANDOFF_QUIET_MAX (20), HANDOFF_QUIET_CPU
# (0.25), HANDOFF_SECTIONS ("latency throughput shmem"), HANDOFF_OUT
# (bench/handoff).
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PORT=${HANDOFF_PORT:-5575}
SAMPLES=${HANDOFF_SAMPLES:-1000}
CLAIM_ROWS=${HANDOFF_CLAIM_ROWS:-150000}
QUIET_MAX=${HANDOFF_QUIET_MAX:-20}
QUIET_CPU=${HANDOFF_QUIET_CPU:-0.25}
SECTIONS=${HANDOFF_SECTIONS:-latency throughput shmem}
OUT=${HANDOFF_OUT:-$here}
# the limited topic of the claim-alone runs keeps every lease it grants
# for an hour: its limit (and the pool) must be above what a run claims
BIG_LIMIT=250000
MAX_LEASES=262144

BENCH_PORT=$PORT
BENCH_SECONDS=${HANDOFF_PGBENCH_SECONDS:-10}
# shellcheck source=../lib.sh
. "$here/../lib.sh"
log() { bench_log "$@"; }
sql() { bench_sql "$1"; }
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

bench_start "aion_wake.max_leases = $MAX_LEASES" "track_wal_io_timing = on"
tmp=$BENCH_TMP
# what outlives the cluster (section 3 starts others)
work=$(mktemp -d /tmp/aion_wake_handoff.XXXXXX)
chmod 755 "$work"
trap 'rc=$?; rm -rf "$work"; (exit $rc); bench_cleanup' EXIT
pgversion=$(sql "SHOW server_version")
gcc -O2 -Wall -Wextra -Werror -pthread -I"$(pg_config --includedir)" \
	-o "$tmp/handoff" "$here/handoff.c" -L"$(pg_config --libdir)" -lpq
chmod 755 "$tmp/handoff"
mkdir "$work/dat"
chown --reference="$tmp" "$work/dat"
raw=$work/results.raw
: >"$raw"
conninfo="host=$tmp port=$PORT dbname=postgres user=postgres"
t_start=$(date +%s)

# WAL flushes so far, and their time (ms): each commit of these paths waits
# for one, so the mean flush time says how much of a latency is the disk's
walflush() { sql "SELECT wal_sync || ' ' || wal_sync_time FROM pg_stat_wal"; }
flush_ms() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
	n = y[1] - x[1]; printf "%.3f", (n > 0 ? (y[2] - x[2]) / n : 0) }'; }

# --- 1. freed slot -> next call starts ----------------------------------------
if has latency; then
	# the five scenarios interleaved (handoff.c), so that they meet the same load
	bench_wait_quiet "$QUIET_MAX" "$QUIET_CPU" || true
	log "latency: five scenarios interleaved, $SAMPLES samples each"
	m=$(bench_load_mark)
	w0=$(walflush)
	bench_as_pg "$tmp/handoff" "$conninfo" "$SAMPLES" "$work/dat" >"$work/latency.out"
	load=$(bench_load_since "$m")
	w1=$(walflush)
	sed "s/\$/ foreign=${load#* } flush_ms=$(flush_ms "$w0" "$w1")/" "$work/latency.out" | tee -a "$raw"
	sql "SELECT 'status', rows_reoffered, pulses_received, leases_expired FROM aion_wake.status" >>"$raw"
fi

# --- 2. claim() throughput, limit that never binds vs unlimited ---------------
if has throughput; then
	# claim and settle: fail() with no back-off puts the row straight back,
	# so a few thousand rows serve every run; a limit of 64 never binds
	sql "SELECT count(*) FROM generate_series(1, 5000) g,
	     LATERAL (SELECT aion_wake.enqueue('s-free-' || g, '{}', 'tp_free'),
	                     aion_wake.enqueue('s-lim-' || g, '{}', 'tp_lim')) e" >/dev/null
	sql "SELECT aion_wake.set_limit('tp_lim', 64)" >/dev/null
	# claim alone, hour-long leases: rows are used up, and each lease of the
	# limited topic stays live
	sql "SELECT count(*) FROM generate_series(1, $CLAIM_ROWS) g,
	     LATERAL (SELECT aion_wake.enqueue('c-free-' || g, '{}', 'tc_free'),
	                     aion_wake.enqueue('c-lim-' || g, '{}', 'tc_lim')) e" >/dev/null
	sql "SELECT aion_wake.set_limit('tc_lim', $BIG_LIMIT)" >/dev/null
	sql "VACUUM ANALYZE aion_wake.outbox"
	for t in tp_free tp_lim; do
		echo "SELECT aion_wake.fail(dispatch_key, 'bench', '0', lease_token) FROM aion_wake.claim('$t', 1, '30 s');" >"$tmp/settle_$t.sql"
	done
	for t in tc_free tc_lim; do
		echo "SELECT dispatch_key FROM aion_wake.claim('$t', 1, '1 hour');" >"$tmp/claim_$t.sql"
	done
	chmod 644 "$tmp"/*.sql
	tput() { # LABEL CLIENTS BASE CAND
		bench_wait_quiet "$QUIET_MAX" "$QUIET_CPU" || true
		m=$(bench_load_mark)
		w0=$(walflush)
		bench_compare "$1" "$2" "$3" "$4"
		load=$(bench_load_since "$m")
		w1=$(walflush)
		# side by side, weight 1 each: each script's throughput is the inverse of its latency
		echo "RESULT tput=$1 clients=$2 base_tps=$CMP_B_TPS cand_tps=$CMP_C_TPS ratio_alone=$(bench_div "$CMP_C_TPS" "$CMP_B_TPS") base_lat=$CMP_MB_LAT cand_lat=$CMP_MC_LAT ratio_same=$(bench_div "$CMP_MB_LAT" "$CMP_MC_LAT") base_srv_us=$CMP_B_SRV cand_srv_us=$CMP_C_SRV foreign=${load#* } flush_ms=$(flush_ms "$w0" "$w1")" | tee -a "$raw"
	}
	for c in 1 2; do
		tput settle "$c" "$tmp/settle_tp_free.sql" "$tmp/settle_tp_lim.sql"
	done
	for c in 1 2; do
		tput claim "$c" "$tmp/claim_tc_free.sql" "$tmp/claim_tc_lim.sql"
	done
	left_free=$(sql "SELECT count(*) FROM aion_wake.outbox WHERE topic = 'tc_free' AND visible_after <= clock_timestamp()")
	left_lim=$(sql "SELECT count(*) FROM aion_wake.outbox WHERE topic = 'tc_lim' AND visible_after <= clock_timestamp()")
	inflight=$(sql "SELECT in_flight FROM aion_wake.topics WHERE topic = 'tc_lim'")
	echo "RESULT check=claim left_free=$left_free left_lim=$left_lim in_flight_lim=$inflight" | tee -a "$raw"
	[ "$left_free" -gt 0 ] && [ "$left_lim" -gt 0 ] \
		|| log "WARNING: a claim-alone topic ran dry: raise HANDOFF_CLAIM_ROWS, those figures are not valid"
fi
t_end=$(date +%s)

# --- 3. shared memory ------------------------------------------------------------
# aion_wake allocates its hash tables whole at start: their entries are in
# the "<anonymous>" allocation, beside the named headers.  Everything else
# equal, the difference between two settings is what the extra entries cost.
mkdir -p "$OUT/data"
if has latency; then cp "$work"/dat/*.dat "$OUT/data/"; fi
if has shmem; then
	# (not in a command substitution: the cluster each start leaves must
	# be the one bench/lib.sh stops)
	shm() { # SETTING...
		bench_start "$@" >/dev/null 2>&1
		SHM=$(sql "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name ILIKE 'aion_wake%' OR name = '<anonymous>'")
	}
	shm; base=$SHM
	shm "aion_wake.max_leases = 1048576"; leases=$SHM
	shm "aion_wake.max_topics = 4096"; topics=$SHM
	shm "aion_wake.max_parked_rows = 131072"; parked=$SHM
	bench_stop
	echo "RESULT shmem base=$base per_lease=$(awk -v a="$base" -v b="$leases" 'BEGIN { printf "%.1f", (b - a) / (1048576 - 16384) }') per_topic=$(awk -v a="$base" -v b="$topics" 'BEGIN { printf "%.1f", (b - a) / (4096 - 1024) }') per_parked=$(awk -v a="$base" -v b="$parked" 'BEGIN { printf "%.1f", (b - a) / (131072 - 65536) }')" | tee -a "$raw"
fi

# --- the table ---------------------------------------------------------------------
r() { # KEY VALUE FIELD: FIELD of the RESULT line whose KEY is VALUE
	awk -v k="$1" -v v="$2" -v f="$3" '
		{ ok = 0; val = ""
		  for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k && kv[2] == v) ok = 1; if (kv[1] == f) val = kv[2] }
		  if (ok) { print val; exit } }' "$raw"
}
rc() { # TPUT CLIENTS FIELD
	awk -v t="$1" -v c="$2" -v f="$3" '$2 == "tput=" t && $3 == "clients=" c {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) { print kv[2]; exit } } }' "$raw"
}
verdict() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { if (v == "") { print "-"; exit } ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0); print ok ? "PASS" : "MISS" }'; }
table=$work/results.txt
{
	echo "aion_wake hand-off benchmark -- $(date -u -d "@$t_start" '+%Y-%m-%d %H:%M')-$(date -u -d "@$t_end" '+%H:%M UTC')"
	echo "machine: nproc $(nproc), $(uname -r), $("$PG_BINDIR/postgres" --version)"
	echo "aion_wake.so $(md5sum "$(pg_config --pkglibdir)/aion_wake.so" | cut -c1-12), built $(date -u -r "$(pg_config --pkglibdir)/aion_wake.so" '+%Y-%m-%d %H:%M UTC')"
	echo "foreign: CPUs (of $(nproc)) used during the measurement by processes other than this cluster and this script"
	if has latency; then
		echo
		echo "1. freed slot -> next call starts, ms, $SAMPLES samples each (client clock, from the send of the"
		echo "   first statement after the slot freed; \"return\": from the return of the settling statement)"
		printf '  %-58s %7s %7s %7s %7s %8s %8s %7s %7s\n' "" p50 p90 p99 max "ret p50" "ret p99" foreign flush
		row() { # LABEL NAME
			printf '  %-58s %7s %7s %7s %7s %8s %8s %7s %7s\n' "$1" "$(r name "$2" p50)" "$(r name "$2" p90)" \
				"$(r name "$2" p99)" "$(r name "$2" max)" "$(r name "$2" ret_p50)" "$(r name "$2" ret_p99)" \
				"$(r name "$2" foreign)" "$(r name "$2" flush_ms)"
		}
		row "settle and take: complete(next_rows => 1), oldest park" settle_take
		row "settle and take, limited topic (the slot passes on)" settle_take_limit
		row "complete + pulse -> blocked claimer spends it (2 commits)" pulse_claimer
		row "1.0 path: complete; re-offer; blocked claim (3 commits)" three_commit
		row "full limited topic: complete releases -> blocked claim" release_claimer
		p50=$(r name release_claimer ret_p50); p99=$(r name release_claimer ret_p99)
		echo "  the scenarios ran interleaved (a sample of each in turn): foreign and flush are over all of them;"
		echo "  flush: mean WAL flush (pg_stat_wal, track_wal_io_timing), ms; each commit on these paths waits for one"
		echo "  target, release -> next claim returns (from the release's return): p50 $p50 <= 0.3 ms: $(verdict "$p50" '<=' 0.3); p99 $p99 <= 2 ms: $(verdict "$p99" '<=' 2)"
	fi
	if has throughput; then
		echo
		echo "2. claim() throughput, a limit that never binds vs no limit (pgbench -M $BENCH_MODE, ${BENCH_SECONDS} s per run;"
		echo "   alone: each script in a run of its own; same run: both side by side, weight 1 each, tps ratio from latencies)"
		printf '  %-44s %3s %10s %10s %8s %9s %10s %10s %7s %7s\n' "" c "tps free" "tps limit" "alone" "same run" "srv us fr" "srv us lim" foreign flush
		for t in settle claim; do
			for c in 1 2; do
				lbl=$([ $t = settle ] && echo "claim + fail(0) in one statement, limit 64" || echo "claim alone, 1 h leases, limit $BIG_LIMIT")
				printf '  %-44s %3s %10.0f %10.0f %8s %9s %10s %10s %7s %7s\n' "$lbl" "$c" "$(rc $t $c base_tps)" "$(rc $t $c cand_tps)" \
					"$(rc $t $c ratio_alone)" "$(rc $t $c ratio_same)" "$(rc $t $c base_srv_us)" "$(rc $t $c cand_srv_us)" "$(rc $t $c foreign)" "$(rc $t $c flush_ms)"
			done
		done
		echo "  live leases of the limited claim-alone topic at the end: $(r check claim in_flight_lim); rows left: $(r check claim left_free) / $(r check claim left_lim)"
		for t in settle claim; do
			for c in 1 2; do
				v=$(rc $t $c ratio_same)
				echo "  target, $t at $c client(s), same run >= 0.9x: $(verdict "$v" '>=' 0.9) ($v)"
			done
		done
	fi
	if has shmem; then
		echo
		echo "3. shared memory (pg_shmem_allocations: aion_wake's named allocations and <anonymous>, differences between settings)"
		echo "  per lease record (aion_wake.max_leases 16384 -> 1048576):     $(awk '/^RESULT shmem/ { for (i = 2; i <= NF; i++) if ($i ~ /^per_lease=/) print substr($i, 11) }' "$raw") bytes"
		echo "  per topic slot (aion_wake.max_topics 1024 -> 4096):           $(awk '/^RESULT shmem/ { for (i = 2; i <= NF; i++) if ($i ~ /^per_topic=/) print substr($i, 11) }' "$raw") bytes"
		echo "  per parked row (aion_wake.max_parked_rows 65536 -> 131072):   $(awk '/^RESULT shmem/ { for (i = 2; i <= NF; i++) if ($i ~ /^per_parked=/) print substr($i, 12) }' "$raw") bytes"
		echo "  a limited topic adds nothing to its topic slot; its max_in_flight lease records come from the pool"
	fi
} >"$table"

cp "$raw" "$OUT/data/results.raw"
cp "$table" "$OUT/results.txt"
if has latency && command -v gnuplot >/dev/null; then
	for term in png svg; do
		if [ $term = png ]; then st="set terminal pngcairo size 900,520 font 'DejaVu Sans,10'"; else st="set terminal svg size 900,520 font 'DejaVu Sans,10' background '#ffffff'"; fi
		gnuplot <<GP
$st
set output '$OUT/latency_cdf.$term'
set title "Freed slot -> next call starts ($SAMPLES samples each)"
set logscale x
set xlabel 'ms (log scale)'
set ylabel 'fraction of samples'
set key bottom right
set grid
plot '$OUT/data/settle_take.dat' using 1:2 with lines lw 2 title 'complete(next_rows => 1), oldest park', \
     '$OUT/data/settle_take_limit.dat' using 1:2 with lines lw 2 title 'complete(next_rows => 1), limited topic', \
     '$OUT/data/release_claimer.dat' using 1:2 with lines lw 2 title 'limited topic: complete releases -> blocked claim', \
     '$OUT/data/pulse_claimer.dat' using 1:2 with lines lw 2 title 'complete + pulse -> blocked claimer (2 commits)', \
     '$OUT/data/three_commit.dat' using 1:2 with lines lw 2 title '1.0: complete; re-offer; claim (3 commits)'
GP
	done
fi
if [ "$(id -u)" -eq 0 ]; then
	chown -R --reference="$here" "$OUT/data" "$OUT/results.txt" "$OUT"/latency_cdf.* 2>/dev/null || true
fi
echo
cat "$table"
