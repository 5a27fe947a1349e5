#!/usr/bin/env bash
#
# bench/headline/run.sh -- the headline benchmark: how long 2,000 rows take
# to get through a consumer of 4 slots and 20 ms service time, fed by 16
# dispatcher connections, in five wirings of the reference dispatcher
# (examples/dispatcher.c):
#
#   aion     the 1.0 wiring: park on BUSY, complete + pulse(topic, 1) on
#            delivery, every row through a blocking claim
#   handoff  capacity unknown (1.1): park on BUSY, complete(key, token,
#            next_rows => 1) on delivery -- the settle and the next row
#            (the oldest confirmed park first) in one statement and commit,
#            offered at once; no pulse() call
#   limit    capacity known (1.1): set_limit(topic, 4), no BUSY possible,
#            no park, no pulse; complete(key, token, next_rows => 1)
#   fence    park on BUSY + blocking claim, no pulse: rows wait out the
#            back-off
#   poll     plain fences + a non-blocking claim, 100 ms sleep when empty
#
# Why: this is the figure README.md leads with.  The zero-gap hand-off
# (1.1) is measured against the 1.0 wiring on the same run, five times
# each, worst and median, and the known-capacity wiring (set_limit, 1.1)
# beside them.  The ideal makespan is rows * S / C = 2000 * 20 ms / 4 = 10
# s.  Targets: handoff makespan <= 1.05 x ideal and utilisation >= 95 %
# (median), worst run >= 92 %; limit utilisation >= 97 % (median), 0
# bounces, <= 3.5 table writes per row.  This is a measurement, not a test:
# it prints PASS/MISS and exits 0 either way (non-zero only if a run itself
# fails).
#
# The aion-family modes (aion, handoff, limit) run HEADLINE_REPS times
# (default 5), interleaved (aion, handoff, limit, aion, ...) so that a
# change in the machine's load hits every mode alike; fence and poll run
# once.  The machine is shared: before each run the script waits (at most
# HEADLINE_QUIET_MAX s) until other processes use less than
# HEADLINE_QUIET_CPU CPUs, measures what they used during the run (from
# /proc/stat, minus this cluster's and this script's processes), and runs
# it again (at most HEADLINE_RETRIES times) when that was more than
# HEADLINE_FOREIGN_MAX CPUs.  Every run's foreign load is in the table.
#
# Per run it records, besides what the dispatcher measures (makespan,
# utilisation, bounces, slot gaps, table writes per row): the COMMIT
# records written to WAL during the run (pg_waldump over the run's LSN
# range: every transaction that wrote, the worker's included), and
# pg_stat_wal's wal_sync (WAL flushes, all processes; read 1 s after the
# run so that the worker and the WAL writer have reported) and the mean
# time of a flush (track_wal_io_timing): every synchronous commit waits for
# one, so on a shared disk it bounds how fast a slot can be refilled.
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp
# directory, Unix socket only, fsync and synchronous_commit left on),
# builds the dispatcher, runs the modes, writes bench/headline/results/ (a
# summary and a CSV of busy slots every 10 ms per run, table.txt) and plots
# bench/headline/busy_slots.png and .svg with gnuplot (the median run of
# each mode).  The cluster is stopped and removed on exit.
#
# Usage (as root -- the server and the dispatcher then run as postgres --
# or as postgres):   bench/headline/run.sh
# Environment: HEADLINE_PORT (default 5560), HEADLINE_ROWS (2000),
# HEADLINE_THREADS (16), HEADLINE_SLOTS (4), HEADLINE_SERVICE_MS (20),
# HEADLINE_BACKOFF_MS (1000), HEADLINE_PLOT_ONLY (1: no runs, only the plot
# from results/), HEADLINE_MODES ("aion handoff limit fence
# poll"), HEADLINE_REPS (5), HEADLINE_OUT (where results/ and the plot
# go; default bench/headline), HEADLINE_CONNOPTS (options of the dispatcher's
# sessions, none by default), HEADLINE_QUIET_MAX (30), HEADLINE_QUIET_CPU
# (0.3), HEADLINE_FOREIGN_MAX (0.5), HEADLINE_RETRIES (2).
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# where results/ and the plot go (a diagnosis run can write elsewhere)
out=${HEADLINE_OUT:-$here}
results=$out/results

PORT=${HEADLINE_PORT:-5560}
ROWS=${HEADLINE_ROWS:-2000}
THREADS=${HEADLINE_THREADS:-16}
SLOTS=${HEADLINE_SLOTS:-4}
SERVICE_MS=${HEADLINE_SERVICE_MS:-20}
BACKOFF_MS=${HEADLINE_BACKOFF_MS:-1000}
MODES=${HEADLINE_MODES:-aion handoff limit fence poll}
REPS=${HEADLINE_REPS:-5}
QUIET_MAX=${HEADLINE_QUIET_MAX:-30}
QUIET_CPU=${HEADLINE_QUIET_CPU:-0.3}
FOREIGN_MAX=${HEADLINE_FOREIGN_MAX:-0.5}
RETRIES=${HEADLINE_RETRIES:-2}
# options for the dispatcher's sessions, e.g. '-c synchronous_commit=off'
# for a diagnosis of what the WAL flushes cost (not the headline figure)
CONNOPTS=${HEADLINE_CONNOPTS:-}
PG_CONFIG=${PG_CONFIG:-pg_config}
PG_BINDIR=$($PG_CONFIG --bindir)
BENCH_PORT=$PORT

# the throwaway cluster: bench/lib.sh starts it, and stops and removes it on exit
# shellcheck source=../lib.sh
. "$here/../lib.sh"
log() { bench_log "$@"; }
as_pg() { bench_as_pg "$@"; }
sql() { bench_sql "$1"; }

if ! command -v gnuplot >/dev/null; then
	if [ "$(id -u)" -eq 0 ]; then
		log "installing gnuplot-nox"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
	else
		echo "run.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2
		exit 1
	fi
fi

# the modes run several times, and the others
family=()
others=()
for m in $MODES; do
	case $m in
	aion | handoff | limit) family+=("$m") ;;
	fence | poll) others+=("$m") ;;
	*) echo "run.sh: unknown mode $m" >&2; exit 2 ;;
	esac
done

# --- helpers over results/ ----------------------------------------------------

get() { sed -n "s/^$2=//p" "$results/summary_$1.txt"; }
# mstat MODE FIELD median|min|max: over the runs of MODE
mstat() {
	local f
	for f in "$results"/summary_"$1"_*.txt; do sed -n "s/^$2=//p" "$f"; done | sort -g |
		awk -v w="$3" '{ v[NR] = $1 } END {
			if (NR == 0) { print "-"; exit }
			if (w == "min") print v[1]; else if (w == "max") print v[NR];
			else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
nruns() { ls "$results"/summary_"$1"_*.txt 2>/dev/null | wc -l; }
pct() { awk -v v="$1" 'BEGIN { printf "%.1f%%", v * 100 }'; }
verdict() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0); print ok ? "PASS" : "MISS" }'; }
# the run of MODE whose utilisation is the median (for the plot)
median_run() {
	local f
	for f in "$results"/summary_"$1"_*.txt; do echo "$(sed -n 's/^utilisation=//p' "$f") $(basename "$f" .txt)"; done |
		sort -g | awk '{ r[NR] = $2 } END { print substr(r[int((NR + 1) / 2)], 9) }'
}

if [ -z "${HEADLINE_PLOT_ONLY:-}" ]; then

# --- the cluster --------------------------------------------------------------

# 16 dispatcher connections, the control connection, the hand-off probe;
# WAL kept so that pg_waldump can count each run's commits
bench_start "max_connections = 100" "wal_keep_size = '8GB'" "max_wal_size = '8GB'" \
	"track_wal_io_timing = on"
tmp=$BENCH_TMP
pgversion=$(sql "SHOW server_version")
[ "$(sql "SELECT worker_pid IS NOT NULL FROM aion_wake.status")" = t ] \
	|| { echo "run.sh: no aion_wake worker" >&2; exit 1; }

# --- the dispatcher -----------------------------------------------------------

log "building examples/dispatcher.c and bench/headline/handoff.c"
gcc -O2 -Wall -Wextra -Werror -pthread -I"$($PG_CONFIG --includedir)" \
	"$top/examples/dispatcher.c" -L"$($PG_CONFIG --libdir)" -lpq \
	-o "$tmp/dispatcher"
gcc -O2 -Wall -Wextra -Werror -pthread -I"$($PG_CONFIG --includedir)" \
	"$here/handoff.c" -L"$($PG_CONFIG --libdir)" -lpq -o "$tmp/handoff"
chmod 755 "$tmp/dispatcher" "$tmp/handoff"

# --- the machine's load -------------------------------------------------------

# bench/lib.sh measures it: bench_load_mark, bench_load_since, bench_wait_quiet
load_mark() { bench_load_mark; }
load_since() { bench_load_since "$1"; }
wait_quiet() { bench_wait_quiet "$QUIET_MAX" "$QUIET_CPU" || true; }

# --- the runs -----------------------------------------------------------------

mkdir -p "$results"
rm -f "$results"/summary_*.txt "$results"/busy_*.csv "$results"/handoff.txt "$results"/table.txt
conninfo="host=$tmp port=$PORT dbname=postgres user=postgres${CONNOPTS:+ options='$CONNOPTS'}"
walstats() { sql "SELECT wal_sync || ' ' || wal_records || ' ' || wal_sync_time FROM pg_stat_wal"; }
repeated=0

# one_run MODE REP: one run of the dispatcher, into results/summary_MODE_REP.txt
one_run() {
	local mode=$1 rep=$2 tag=$1_$2 try lsn0 lsn1 w0 w1 mark load commits rows
	for ((try = 0; try <= RETRIES; try++)); do
		sql "TRUNCATE aion_wake.outbox" >/dev/null
		sql "SELECT count(*) FROM generate_series(1, $ROWS) g,
		            aion_wake.enqueue('row-' || g, jsonb_build_object('n', g), 'api')" >/dev/null
		left=$(sql "SELECT parked_pending + parked_confirmed FROM aion_wake.status")
		[ "$left" = 0 ] || log "warning: $left entries left in the parked set before $tag"
		sql "CHECKPOINT" >/dev/null
		wait_quiet
		sql "SELECT pg_stat_reset()" >/dev/null
		w0=$(walstats)
		lsn0=$(sql "SELECT pg_current_wal_insert_lsn()")
		mark=$(load_mark)
		if ! as_pg "$tmp/dispatcher" --conninfo "$conninfo" \
			--mode "$mode" --topic api --threads "$THREADS" --slots "$SLOTS" \
			--service-ms "$SERVICE_MS" --backoff-ms "$BACKOFF_MS" \
			--csv "$tmp/busy_$tag.csv" >"$tmp/summary_$tag.txt"; then
			cp "$tmp/summary_$tag.txt" "$results/failed_$tag.txt"
			log "$tag: the dispatcher failed (summary in results/failed_$tag.txt)"
			exit 1
		fi
		load=$(load_since "$mark")
		lsn1=$(sql "SELECT pg_current_wal_insert_lsn()")
		sleep 1
		w1=$(walstats)
		# every record up to lsn1 on disk (the worker commits asynchronously)
		sql "CHECKPOINT" >/dev/null
		# (the first segment named: pg_waldump -p alone takes the segment size
		# from whichever file it finds first, which may be a recycled one)
		if ! commits=$(as_pg "$PG_BINDIR/pg_waldump" -p "$BENCH_DATA/pg_wal" -s "$lsn0" -e "$lsn1" \
			"$(sql "SELECT pg_walfile_name('$lsn0')")" \
			--stats=record 2>"$tmp/waldump.err" | awk '$1 == "Transaction/COMMIT" { print $2 }'); then
			log "$tag: pg_waldump failed: $(head -c 300 "$tmp/waldump.err")"
		fi
		commits=${commits:-0}
		rows=$(sed -n 's/^rows=//p' "$tmp/summary_$tag.txt")
		{
			echo "rep=$rep"
			echo "machine_cpu_busy_pct=${load% *}"
			echo "foreign_cpus=${load#* }"
			echo "commit_records=$commits"
			echo "commits_per_row=$(bench_div "$commits" "$rows")"
			set -- $w0 $w1
			echo "wal_sync=$(($4 - $1))"
			echo "wal_syncs_per_row=$(bench_div $(($4 - $1)) "$rows")"
			echo "wal_records_per_row=$(bench_div $(($5 - $2)) "$rows")"
			echo "wal_flush_ms=$(awk -v a="$3" -v b="$6" -v n=$(($4 - $1)) 'BEGIN { printf "%.3f", (n > 0 ? (b - a) / n : 0) }')"
		} >>"$tmp/summary_$tag.txt"
		log "$tag: $(grep -E '^(x_ideal|utilisation|bounces|writes_per_row|commits_per_row|wal_syncs_per_row|slot_gap_mean_ms|slot_gap_p99_ms|foreign_cpus)=' \
			"$tmp/summary_$tag.txt" | tr '\n' ' ')"
		if awk -v f="${load#* }" -v m="$FOREIGN_MAX" 'BEGIN { exit !(f > m) }' && [ "$try" -lt "$RETRIES" ]; then
			log "$tag: other processes used ${load#* } CPUs (> $FOREIGN_MAX): running it again"
			repeated=$((repeated + 1))
			continue
		fi
		break
	done
	cp "$tmp/busy_$tag.csv" "$tmp/summary_$tag.txt" "$results/"
}

bg_before=$(m=$(load_mark); sleep 3; load_since "$m")
log "with our cluster idle, other processes use ${bg_before#* } CPUs (machine ${bg_before% *}% busy)"
log "$ROWS rows, C=$SLOTS, S=${SERVICE_MS} ms, $THREADS connections, back-off ${BACKOFF_MS} ms; ${family[*]} x $REPS, ${others[*]} x 1"
t_start=$(date +%s)
for ((rep = 1; rep <= REPS; rep++)); do
	for mode in "${family[@]}"; do
		one_run "$mode" "$rep"
	done
done
for mode in "${others[@]}"; do
	one_run "$mode" 1
done

# The hand-off latency behind the slot gaps (see handoff.c).
sql "TRUNCATE aion_wake.outbox" >/dev/null
log "hand-off latency: enqueue / pulse / reoffer -> blocked claimer"
as_pg "$tmp/handoff" "$conninfo" 100 >"$tmp/handoff.txt"
cp "$tmp/handoff.txt" "$results/"
bg_after=$(m=$(load_mark); sleep 3; load_since "$m")
log "with our cluster idle, other processes use ${bg_after#* } CPUs (machine ${bg_after% *}% busy)"
t_end=$(date +%s)

# --- the table ----------------------------------------------------------------

{
	echo "date: $(date -u -d "@$t_start" '+%Y-%m-%d %H:%M')-$(date -u -d "@$t_end" '+%H:%M UTC')  nproc: $(nproc)  PostgreSQL $pgversion"
	echo "aion_wake.so: $(md5sum "$($PG_CONFIG --pkglibdir)/aion_wake.so" | cut -c1-12) built $(date -u -r "$($PG_CONFIG --pkglibdir)/aion_wake.so" '+%Y-%m-%d %H:%M UTC'); bench tree at $(git -c safe.directory='*' -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "rows $ROWS, consumer C=$SLOTS slots x S=${SERVICE_MS} ms, $THREADS dispatcher connections, back-off ${BACKOFF_MS} ms${CONNOPTS:+; dispatcher sessions: $CONNOPTS}"
	echo "ideal makespan = rows x S / C = $((ROWS * SERVICE_MS / SLOTS)) ms; a slot is held for S and freed when the service ends"
	echo "other processes (not this cluster, not this script), in CPUs of $(nproc): ${bg_before#* } before the runs, ${bg_after#* } after;"
	echo "runs repeated because others used more than $FOREIGN_MAX CPUs: $repeated"
	echo
	echo "every run (writes: outbox row writes per delivered row, the row's insert not counted;"
	echo "commits: COMMIT records in WAL per delivered row; flushes: pg_stat_wal.wal_sync per row;"
	echo "gap: how long a freed consumer slot stood idle; foreign: CPUs used by other processes;"
	echo "flush_ms: mean time of one WAL flush during the run)"
	printf '%-8s %3s %9s %7s %7s %7s %7s %8s %8s %8s %8s %8s %8s\n' mode rep makespan x_ideal util bounces writes commits flushes gap_mean gap_p99 foreign flush_ms
	for mode in "${family[@]}" "${others[@]}"; do
		for f in "$results"/summary_"$mode"_*.txt; do
			t=$(basename "$f" .txt); t=${t#summary_}
			printf '%-8s %3s %7.2f s %7.3f %7s %7d %7.2f %8.2f %8.2f %5.2f ms %5.2f ms %8s %8s\n' "$mode" "$(get "$t" rep)" \
				"$(awk -v v="$(get "$t" makespan_ms)" 'BEGIN { print v / 1000 }')" "$(get "$t" x_ideal)" \
				"$(pct "$(get "$t" utilisation)")" "$(get "$t" bounces)" "$(get "$t" writes_per_row)" \
				"$(get "$t" commits_per_row)" "$(get "$t" wal_syncs_per_row)" \
				"$(get "$t" slot_gap_mean_ms)" "$(get "$t" slot_gap_p99_ms)" "$(get "$t" foreign_cpus)" \
				"$(get "$t" wal_flush_ms)"
		done
	done
	echo
	echo "per mode, over its runs: median (worst) of makespan/ideal and utilisation; medians of the rest"
	printf '%-8s %4s %15s %17s %8s %7s %8s %8s %9s %9s %12s %9s\n' mode runs x_ideal utilisation bounces writes commits flushes gap_mean gap_p99 foreign_max flush_ms
	for mode in "${family[@]}" "${others[@]}"; do
		printf '%-8s %4s %6.3f (%6.3f) %7s (%6s) %8.0f %7.2f %8.2f %8.2f %6.2f ms %6.2f ms %12s %9s\n' "$mode" "$(nruns "$mode")" \
			"$(mstat "$mode" x_ideal median)" "$(mstat "$mode" x_ideal max)" \
			"$(pct "$(mstat "$mode" utilisation median)")" "$(pct "$(mstat "$mode" utilisation min)")" \
			"$(mstat "$mode" bounces median)" "$(mstat "$mode" writes_per_row median)" \
			"$(mstat "$mode" commits_per_row median)" "$(mstat "$mode" wal_syncs_per_row median)" \
			"$(mstat "$mode" slot_gap_mean_ms median)" "$(mstat "$mode" slot_gap_p99_ms median)" \
			"$(mstat "$mode" foreign_cpus max)" "$(mstat "$mode" wal_flush_ms median)"
	done
	echo
	echo "utilisation (busy slots / C) in 2-second windows, the median run of each mode:"
	for mode in "${family[@]}" "${others[@]}"; do
		awk -F, -v m="$mode" -v c="$SLOTS" 'NR > 1 { w = int($1 / 2000); b[w] += $2; n[w]++ }
			END { printf "%-8s", m
				  for (i = 0; i in n; i++) printf " %3.0f%%", 100 * b[i] / n[i] / c
				  print "" }' "$results/busy_$(median_run "$mode").csv"
	done
	echo
	echo "hand-off, client clock, from the statement that frees a row to a blocked claim returning it:"
	cat "$results/handoff.txt"
	# the sampler wakes every 10 ms: a longer hole means the whole machine stalled
	for f in "$results"/busy_*.csv; do
		awk -F, -v m="$(basename "$f" .csv)" 'NR > 2 && $1 - p > 100 { n++; if ($1 - p > mx) mx = $1 - p } { p = $1 }
			END { if (n) printf "WARNING: %s: the sampler stalled %d times (longest %.0f ms): the machine was stalled\n", m, n, mx }' "$f"
	done
	echo
	if [ "$(nruns handoff)" -gt 0 ]; then
		x=$(mstat handoff x_ideal median); u=$(mstat handoff utilisation median); w=$(mstat handoff utilisation min)
		echo "handoff makespan <= 1.05 x ideal (median): $(verdict "$x" '<=' 1.05) ($x)"
		echo "handoff utilisation >= 95% (median):       $(verdict "$u" '>=' 0.95) ($(pct "$u"))"
		echo "handoff utilisation >= 92% (worst run):    $(verdict "$w" '>=' 0.92) ($(pct "$w"))"
	fi
	if [ "$(nruns limit)" -gt 0 ]; then
		u=$(mstat limit utilisation median); b=$(mstat limit bounces max); wr=$(mstat limit writes_per_row max)
		echo "limit utilisation >= 97% (median):         $(verdict "$u" '>=' 0.97) ($(pct "$u"))"
		echo "limit bounces = 0 (every run):             $(verdict "$b" '<=' 0) ($b)"
		echo "limit writes per row <= 3.5 (every run):   $(verdict "$(awk -v v="$wr" 'BEGIN { print v + 1 }')" '<=' 3.5) ($wr, $(awk -v v="$wr" 'BEGIN { print v + 1 }') with the insert)"
	fi
	if [ "$(nruns aion)" -gt 0 ]; then
		x=$(mstat aion x_ideal median); u=$(mstat aion utilisation median)
		echo "aion (1.0 wiring) <= 1.1 x ideal, >= 90% (median, the 1.0 targets): $(verdict "$x" '<=' 1.1) ($x), $(verdict "$u" '>=' 0.9) ($(pct "$u"))"
	fi
} | tee "$results/table.txt"

fi	# HEADLINE_PLOT_ONLY
tmp=${tmp:-$(mktemp -d /tmp/aion_wake_plot.XXXXXX)}

# --- the plot -----------------------------------------------------------------

ideal_s=$(awk -v r="$ROWS" -v s="$SERVICE_MS" -v c="$SLOTS" 'BEGIN { print r * s / c / 1000 }')
plotted=()
for mode in "${family[@]}" "${others[@]}"; do plotted+=("$(median_run "$mode")"); done
xmax=$(for t in "${plotted[@]}"; do tail -1 "$results/busy_$t.csv" | cut -d, -f1; done \
	| sort -n | tail -1 | awk '{ print int($1 / 1000) + 1 }')
nmodes=${#plotted[@]}
label() {
	case $1 in
	aion) echo "aion (1.0 wiring): park + complete and pulse + blocking claim" ;;
	handoff) echo "handoff (capacity unknown): park + complete(next_rows => 1)" ;;
	limit) echo "limit (capacity known): set_limit(topic, $SLOTS) + complete(next_rows => 1)" ;;
	fence) echo "fence only: park, no pulse" ;;
	poll) echo "polling every 100 ms, plain fences" ;;
	esac
}
# a 250 ms moving average (25 samples) drawn over the raw samples
for t in "${plotted[@]}"; do
	awk -F, 'NR > 1 { t[n] = $1; b[n] = $2; s += $2; n++
		if (n > 25) s -= b[n - 26]
		if (n >= 25) printf "%.1f,%.3f\n", t[n - 13], s / 25 }' \
		"$results/busy_$t.csv" >"$tmp/avg_$t.csv"
done
for term in png svg; do
	if [ $term = png ]; then
		setterm="set terminal pngcairo size 1100,$((190 * nmodes + 60)) font 'DejaVu Sans,10'"
	else
		setterm="set terminal svg size 1100,$((190 * nmodes + 60)) font 'DejaVu Sans,10' background '#ffffff'"
	fi
	gnuplot <<GP
$setterm
set output '$out/busy_slots.$term'
set datafile separator ','
set termoption noenhanced
set key top right
set multiplot layout $nmodes,1 title "Busy consumer slots, the median run of each mode ($ROWS rows, C=$SLOTS, S=${SERVICE_MS} ms, $THREADS dispatchers, back-off ${BACKOFF_MS} ms)"
set xrange [0:$xmax]
set yrange [0:$SLOTS + 0.6]
set ytics 1
set grid ytics
set ylabel 'busy slots'
set arrow 1 from $ideal_s, graph 0 to $ideal_s, graph 1 nohead dt 2 lc rgb '#444444'
set label 1 'ideal ${ideal_s} s' at $ideal_s, graph 0.9 offset 0.5,0 font ',9'
$(i=0; for t in "${plotted[@]}"; do
	i=$((i + 1))
	mode=${t%_*}
	ms=$(awk -v v="$(get "$t" makespan_ms)" 'BEGIN { printf "%.1f", v / 1000 }')
	ut=$(awk -v v="$(get "$t" utilisation)" 'BEGIN { printf "%.1f", v * 100 }')
	b=$(get "$t" bounces)
	[ $i -eq "$nmodes" ] && echo "set xlabel 'time since start (s)'"
	echo "set title '$(label "$mode"): ${ms} s, ${ut}%, ${b} bounces' font ',10'"
	echo "plot '$results/busy_$t.csv' every ::1 using (\$1/1000):2 with filledcurves y1=0 fs solid 0.35 noborder lc rgb '#4a7ab5' title 'sampled every 10 ms', \\"
	echo "     '$tmp/avg_$t.csv' using (\$1/1000):2 with lines lw 1.5 lc rgb '#1d3f6e' title '250 ms mean'"
done)
unset multiplot
GP
done
log "plot: $out/busy_slots.png and busy_slots.svg"
[ -z "${HEADLINE_PLOT_ONLY:-}" ] || rm -rf "$tmp"
