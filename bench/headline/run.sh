#!/usr/bin/env bash
#
# bench/headline/run.sh -- the headline benchmark: how long 2,000 rows take
# to get through a consumer of 4 slots and 20 ms service time, fed by 16
# dispatcher connections, in three wirings (examples/dispatcher.c):
#
#   aion   park on BUSY + pulse on delivery + blocking claim (README's wiring)
#   fence  park on BUSY + blocking claim, no pulse: rows wait out the back-off
#   poll   plain fences + a non-blocking claim, 100 ms sleep when empty
#
# The ideal makespan is rows * S / C = 2000 * 20 ms / 4 = 10 s.  Targets for
# aion: makespan <= 1.1 x ideal and utilisation >= 90%.  This is a
# measurement, not a test: it prints PASS/MISS and exits 0 either way
# (non-zero only if a run itself fails).
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp directory, Unix socket
# only, fsync and synchronous_commit left on), builds the dispatcher, runs
# the three modes, writes bench/headline/results/ (a summary and a CSV of
# busy slots every 10 ms per mode, table.txt) and plots
# bench/headline/busy_slots.png and .svg with gnuplot.  The cluster is
# stopped and removed on exit.
#
# Usage (as root -- the server and the dispatcher then run as postgres --
# or as postgres):   bench/headline/run.sh
# Environment: HEADLINE_PORT (default 5560), HEADLINE_ROWS (2000),
# HEADLINE_THREADS (16), HEADLINE_SLOTS (4), HEADLINE_SERVICE_MS (20),
# HEADLINE_BACKOFF_MS (1000), HEADLINE_MODES ("aion fence poll").
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
results=$here/results

PORT=${HEADLINE_PORT:-5560}
ROWS=${HEADLINE_ROWS:-2000}
THREADS=${HEADLINE_THREADS:-16}
SLOTS=${HEADLINE_SLOTS:-4}
SERVICE_MS=${HEADLINE_SERVICE_MS:-20}
BACKOFF_MS=${HEADLINE_BACKOFF_MS:-1000}
MODES=${HEADLINE_MODES:-aion fence poll}
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

# --- the cluster --------------------------------------------------------------

# 16 dispatcher connections, the control connection, the hand-off probe
bench_start "max_connections = 100"
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

# --- the runs -----------------------------------------------------------------

mkdir -p "$results"
rm -f "$results"/summary_*.txt "$results"/busy_*.csv "$results"/handoff.txt
conninfo="host=$tmp port=$PORT dbname=postgres user=postgres"
# The machine may be shared with other work: note how busy its CPUs are
# (all processes, from /proc/stat) while our cluster idles, and during each run.
cpu_jiffies() { awk '/^cpu / { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }
cpu_busy_since() {	# cpu_busy_since "BUSY TOTAL": percent busy since then
	local now
	now=$(cpu_jiffies)
	awk -v a="$1" -v b="$now" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%.0f", (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0 }'
}
background_busy() {	# over 3 s of our cluster idling
	local t0
	t0=$(cpu_jiffies)
	sleep 3
	cpu_busy_since "$t0"
}
bg_before=$(background_busy)
log "CPU busy with our cluster idle (other work on the machine): ${bg_before}%"

for mode in $MODES; do
	sql "TRUNCATE aion_wake.outbox" >/dev/null
	sql "SELECT count(*) FROM generate_series(1, $ROWS) g,
	            aion_wake.enqueue('row-' || g, jsonb_build_object('n', g), 'api')" >/dev/null
	left=$(sql "SELECT parked_pending + parked_confirmed FROM aion_wake.status")
	[ "$left" = 0 ] || log "warning: $left entries left in the parked set before $mode"
	sql "SELECT pg_stat_reset()" >/dev/null
	cpu0=$(cpu_jiffies)
	log "mode $mode: $ROWS rows, C=$SLOTS, S=${SERVICE_MS} ms, $THREADS connections, back-off ${BACKOFF_MS} ms"
	as_pg "$tmp/dispatcher" --conninfo "$conninfo" \
		--mode "$mode" --topic api --threads "$THREADS" --slots "$SLOTS" \
		--service-ms "$SERVICE_MS" --backoff-ms "$BACKOFF_MS" \
		--csv "$tmp/busy_$mode.csv" >"$tmp/summary_$mode.txt"
	echo "machine_cpu_busy_pct=$(cpu_busy_since "$cpu0")" >>"$tmp/summary_$mode.txt"
	cp "$tmp/busy_$mode.csv" "$tmp/summary_$mode.txt" "$results/"
	log "mode $mode: $(grep -E '^(makespan_ms|x_ideal|utilisation|bounces|writes_per_row)=' \
		"$results/summary_$mode.txt" | tr '\n' ' ')"
done

# The hand-off latency behind the slot gaps (see handoff.c).
sql "TRUNCATE aion_wake.outbox" >/dev/null
log "hand-off latency: enqueue / pulse / reoffer -> blocked claimer"
as_pg "$tmp/handoff" "$conninfo" 100 >"$tmp/handoff.txt"
cp "$tmp/handoff.txt" "$results/"
bg_after=$(background_busy)
log "CPU busy with our cluster idle (other work on the machine): ${bg_after}%"

# --- the table ----------------------------------------------------------------

get() { sed -n "s/^$2=//p" "$results/summary_$1.txt"; }

{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')  nproc: $(nproc)  PostgreSQL $pgversion"
	echo "rows $ROWS, consumer C=$SLOTS slots x S=${SERVICE_MS} ms, $THREADS dispatcher connections, back-off ${BACKOFF_MS} ms"
	echo "ideal makespan = rows x S / C = $(get "${MODES%% *}" ideal_ms | cut -d. -f1) ms; a slot is held for S and freed when the service ends"
	echo "CPU busy with the cluster idle (other work on this machine): ${bg_before}% before the runs, ${bg_after}% after"
	echo
	printf '%-6s %11s %8s %12s %8s %11s %14s %8s\n' mode makespan_s x_ideal utilisation bounces writes/row slot_gap_mean machine_cpu
	for mode in $MODES; do
		printf '%-6s %11.2f %8.2f %11.1f%% %8d %11.2f %11.2f ms %7s%%\n' "$mode" \
			"$(awk -v v="$(get $mode makespan_ms)" 'BEGIN { print v / 1000 }')" \
			"$(get $mode x_ideal)" \
			"$(awk -v v="$(get $mode utilisation)" 'BEGIN { print v * 100 }')" \
			"$(get $mode bounces)" "$(get $mode writes_per_row)" \
			"$(get $mode slot_gap_mean_ms)" "$(get $mode machine_cpu_busy_pct)"
	done
	echo
	echo "utilisation (busy slots / C) in 2-second windows:"
	for mode in $MODES; do
		awk -F, -v m="$mode" -v c="$SLOTS" 'NR > 1 { w = int($1 / 2000); b[w] += $2; n[w]++ }
			END { printf "%-6s", m
				  for (i = 0; i in n; i++) printf " %3.0f%%", 100 * b[i] / n[i] / c
				  print "" }' "$results/busy_$mode.csv"
	done
	echo
	echo "hand-off, client clock, from the statement that frees a row to a blocked claim returning it:"
	cat "$results/handoff.txt"
	# the sampler wakes every 10 ms: a longer hole means the whole machine stalled
	for mode in $MODES; do
		awk -F, -v m="$mode" 'NR > 2 && $1 - p > 100 { n++; if ($1 - p > mx) mx = $1 - p } { p = $1 }
			END { if (n) printf "WARNING: %s: the sampler stalled %d times (longest %.0f ms): the machine was stalled, rerun\n", m, n, mx }' \
			"$results/busy_$mode.csv"
	done
	if [ -f "$results/summary_aion.txt" ]; then
		echo
		x=$(get aion x_ideal)
		u=$(get aion utilisation)
		echo "aion makespan <= 1.1 x ideal: $(awk -v v="$x" 'BEGIN { print (v <= 1.1) ? "PASS" : "MISS" }') ($x)"
		echo "aion utilisation >= 90%:      $(awk -v v="$u" 'BEGIN { print (v >= 0.9) ? "PASS" : "MISS" }') ($u)"
	fi
} | tee "$results/table.txt"

# --- the plot -----------------------------------------------------------------

ideal_s=$(awk -v r="$ROWS" -v s="$SERVICE_MS" -v c="$SLOTS" 'BEGIN { print r * s / c / 1000 }')
xmax=$(for mode in $MODES; do tail -1 "$results/busy_$mode.csv" | cut -d, -f1; done \
	| sort -n | tail -1 | awk '{ print int($1 / 1000) + 1 }')
nmodes=$(echo $MODES | wc -w)
# a 250 ms moving average (25 samples) drawn over the raw samples
for mode in $MODES; do
	awk -F, 'NR > 1 { t[n] = $1; b[n] = $2; s += $2; n++
		if (n > 25) s -= b[n - 26]
		if (n >= 25) printf "%.1f,%.3f\n", t[n - 13], s / 25 }' \
		"$results/busy_$mode.csv" >"$tmp/avg_$mode.csv"
done
for term in png svg; do
	if [ $term = png ]; then
		setterm="set terminal pngcairo size 1100,$((230 * nmodes + 60)) font 'DejaVu Sans,10'"
	else
		setterm="set terminal svg size 1100,$((230 * nmodes + 60)) font 'DejaVu Sans,10' background '#ffffff'"
	fi
	gnuplot <<GP
$setterm
set output '$here/busy_slots.$term'
set datafile separator ','
set key top right
set multiplot layout $nmodes,1 title "Busy consumer slots ($ROWS rows, C=$SLOTS, S=${SERVICE_MS} ms, $THREADS dispatchers, back-off ${BACKOFF_MS} ms)"
set xrange [0:$xmax]
set yrange [0:$SLOTS + 0.6]
set ytics 1
set grid ytics
set ylabel 'busy slots'
set arrow 1 from $ideal_s, graph 0 to $ideal_s, graph 1 nohead dt 2 lc rgb '#444444'
set label 1 'ideal ${ideal_s} s' at $ideal_s, graph 0.93 offset 0.5,0 font ',9'
$(i=0; for mode in $MODES; do
	i=$((i + 1))
	ms=$(awk -v v="$(get $mode makespan_ms)" 'BEGIN { printf "%.1f", v / 1000 }')
	ut=$(awk -v v="$(get $mode utilisation)" 'BEGIN { printf "%.0f", v * 100 }')
	b=$(get $mode bounces)
	[ $i -eq "$nmodes" ] && echo "set xlabel 'time since start (s)'"
	echo "set title '$mode: makespan ${ms} s, utilisation ${ut}%, ${b} bounces' font ',11'"
	echo "plot '$results/busy_$mode.csv' every ::1 using (\$1/1000):2 with filledcurves y1=0 fs solid 0.35 noborder lc rgb '#4a7ab5' title 'sampled every 10 ms', \\"
	echo "     '$tmp/avg_$mode.csv' using (\$1/1000):2 with lines lw 1.5 lc rgb '#1d3f6e' title '250 ms mean'"
done)
unset multiplot
GP
done
log "plot: $here/busy_slots.png and busy_slots.svg"
