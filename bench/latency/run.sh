#!/usr/bin/env bash
#
# bench/latency/run.sh -- wake-up latency and idle cost of aion_wake
# (issues 4 and 5).  A measurement, not a test: it prints a table with
# PASS/MISS against the targets and exits 0 either way (non-zero only if the
# run itself fails).
#
#  1. pulse -> re-offer: time from the pulse's commit (pulse() or a raw
#     NOTIFY aion_wake_capacity) until a claimer blocked in claim(wait) gets
#     the parked row, and until the row reads visible to a tight poller;
#     with 10 and with 100,000 other rows parked.
#     Targets: pulse() p50 <= 1 ms, p99 <= 5 ms; at 100k parked within 2x.
#  2. pulse throughput at 2 clients: pgbench with pulse(), bare NOTIFY and
#     SELECT 1.
#  3. enqueue -> claim: blocking claim, LISTEN/NOTIFY consumer, 100 ms
#     polling.  Target: blocking p50 <= 1 ms and >= 20x better than polling.
#  4. CPU of 50 idle waiters, the worker and its listener over a window.
#     Target: no measurable CPU.
#  5. where the time goes: sections 1 and 3 again with the ready NOTIFY
#     off, then with this program's sessions (the claimer, the enqueuer)
#     committing asynchronously too.
#
# A full run takes about 5 minutes on a quiet 2-CPU machine.
#
# It starts a throwaway cluster (initdb in a mktemp directory, Unix socket
# only, durability settings left at their defaults) and stops it on exit.
# Outputs: bench/latency/data/*.dat (sorted latencies per variant),
# data/results.raw (every RESULT line), data/server.log, results.txt (the
# table) and latency_cdf.png / .svg (via latency_cdf.gp).  Git keeps the
# table, the plot and the .dat files it is drawn from; the rest (the log,
# the raw figures, section 5's explain_*.dat) every run writes afresh.
#
# Usage (as root or as postgres):  bench/latency/run.sh
# Environment:
#   LAT_PORT (5570)          port of the throwaway cluster
#   LAT_SAMPLES (500)        samples per latency variant (sections 1 and 3)
#   LAT_POLL_SAMPLES         samples of the 100 ms polling consumer
#                            (default LAT_SAMPLES; each takes ~0.1 s)
#   LAT_BALLAST (100000)     rows parked in the big-set case
#   LAT_PGBENCH_SECONDS (10) length of each pgbench run
#   IDLE_SECONDS (60)        idle measurement window
#   IDLE_WAITERS (50)        idle blocked claimers
#   LAT_EXPLAIN (1)          0 skips section 5 (where the time goes)
#   LAT_OUT (bench/latency)  where results, data and plots are written
#   LAT_QUIET_MAX (10)       before each measurement, wait at most this many
#   LAT_QUIET_CPU (0.25)     seconds until other processes on the machine use
#                            less than this many CPUs (0 seconds: no wait);
#                            the table shows what they used in each case
#   LAT_NICE (0)             nice level of the cluster, this program and
#                            pgbench; -10 (as root) keeps CPU-bound
#                            neighbours on a shared machine from delaying
#                            their wake-ups (the table says which was used)
#   PG_BINDIR                PostgreSQL binaries (default: pg_config --bindir)

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}
PORT=${LAT_PORT:-5570}
SAMPLES=${LAT_SAMPLES:-500}
POLL_SAMPLES=${LAT_POLL_SAMPLES:-$SAMPLES}
BALLAST=${LAT_BALLAST:-100000}
PGBENCH_SECONDS=${LAT_PGBENCH_SECONDS:-10}
IDLE_SECONDS=${IDLE_SECONDS:-60}
IDLE_WAITERS=${IDLE_WAITERS:-50}
EXPLAIN=${LAT_EXPLAIN:-1}
OUT=${LAT_OUT:-$here}
QUIET_MAX=${LAT_QUIET_MAX:-10}
QUIET_CPU=${LAT_QUIET_CPU:-0.25}
# idle waiters wait longer than the window, so none returns inside it
IDLE_WAIT=$((IDLE_SECONDS + 60))
MAX_WAIT=$((IDLE_WAIT > 120 ? IDLE_WAIT : 120))

NICE=${LAT_NICE:-0}

# the throwaway cluster: bench/lib.sh starts it (at nice level LAT_NICE), and
# stops and removes it on exit
BENCH_PORT=$PORT
BENCH_NICE=$NICE
BENCH_MAX_PARKED_ROWS=200000
# shellcheck source=../lib.sh
. "$here/../lib.sh"
as_pg() { bench_as_pg "$@"; }
log() { bench_log "$@"; }

# what is measured: the library the cluster loads at start
version="tree at $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), library installed $(date -u -r "$(pg_config --pkglibdir)/aion_wake.so" '+%Y-%m-%d %H:%M UTC')"

# --- cluster ---------------------------------------------------------------
# PostgreSQL leaves the authentication_timeout timer armed after a backend
# has started; it fires once, authentication_timeout later, and its SIGALRM
# sets the latch of a backend sleeping in claim(wait).  Keep that one stray
# wake out of the idle window (section 4 starts it after this has passed).
# The idle section blocks IDLE_WAITERS claimers at once.
bench_start "max_connections = $((IDLE_WAITERS + 20))" "aion_wake.max_wait = '${MAX_WAIT}s'" \
	"track_wal_io_timing = on" "authentication_timeout = '2s'"
tmp=$BENCH_TMP

# --- build -----------------------------------------------------------------
gcc -O2 -Wall -Wextra -Werror -pthread -I"$(pg_config --includedir)" \
	-o "$tmp/latency" "$here/latency.c" -L"$(pg_config --libdir)" -lpq
chmod 755 "$tmp/latency"

export PGHOST=$tmp PGPORT=$PORT PGDATABASE=postgres PGUSER=postgres
sql() { as_pg env PGHOST="$tmp" PGPORT="$PORT" "$PG_BINDIR/psql" -d postgres -U postgres -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
LAT_PGOPTIONS=""
lat() { as_pg env PGHOST="$tmp" PGPORT="$PORT" PGDATABASE=postgres PGUSER=postgres PGOPTIONS="$LAT_PGOPTIONS" "$tmp/latency" "$@"; }

# the worker listens once it sees the extension; wait for it (bounded)
for _ in $(seq 1 500); do
	[ "$(sql "SELECT listening FROM aion_wake.status")" = t ] && break
	sleep 0.02
done
[ "$(sql "SELECT listening FROM aion_wake.status")" = t ] || { echo "worker is not listening" >&2; exit 1; }
log "cluster up in $tmp (port $PORT); $(sql 'SELECT version()' | cut -d, -f1)"

mkdir "$tmp/dat"
chown --reference="$tmp" "$tmp/dat"
results=$tmp/results.raw
: >"$results"
chmod 666 "$results"

# gate LABEL: wait (bounded) for the machine to be quiet before a measurement
gate() {
	[ "$QUIET_MAX" -gt 0 ] || return 0
	local line
	line=$(lat quiet "$QUIET_MAX" "$QUIET_CPU")
	echo "RESULT gate=$1 ${line#RESULT }" >>"$results"
	case $line in *quiet=no*) log "machine still busy after ${QUIET_MAX}s: ${line#RESULT }";; esac
}

# park N more rows of topic 'ballast' (fence 1 day ahead, never pulsed)
ballast_to() {
	local want=$1 have
	have=$(sql "SELECT count(*) FROM aion_wake.outbox WHERE topic = 'ballast'")
	[ "$have" -ge "$want" ] && return
	sql "SELECT count(*) FROM generate_series($((have + 1)), $want) g,
	            aion_wake.enqueue('ballast-' || g, '{}', 'ballast') e WHERE e" >/dev/null
	sql "SELECT count(*) FROM aion_wake.claim('ballast', $((want - have)), '1 hour') c,
	            aion_wake.park(c.dispatch_key, '1 day', c.lease_token) p WHERE p" >/dev/null
	sql "VACUUM ANALYZE aion_wake.outbox"
	log "parked set: $(sql "SELECT parked_confirmed FROM aion_wake.status") confirmed entries"
}

reoffer_set() {
	local size=$1 tag=$2 how obs
	ballast_to "$size"
	for obs in claim visible; do
		for how in pulse notify; do
			gate "${how}_${obs}_${tag}"
			log "pulse -> re-offer: $how, observed by $obs, $tag parked ($SAMPLES samples)"
			lat reoffer "${how}_${obs}_${tag}" "$how" "$obs" "$SAMPLES" "$tmp/dat/reoffer_${how}_${obs}_${tag}.dat" | tee -a "$results"
		done
	done
}

# --- 1. pulse -> re-offer --------------------------------------------------
reoffer_set 10 10
reoffer_set "$BALLAST" big
sql "SELECT 'status', pulses_received, slots_received, rows_reoffered, credits_used, set_full FROM aion_wake.status" >>"$tmp/status.txt"

# --- 2. pulse throughput -----------------------------------------------------
echo "SELECT aion_wake.pulse('thr', 1);" >"$tmp/pulse.sql"
echo "NOTIFY aion_wake_capacity, 'thr:1';" >"$tmp/notify.sql"
echo "SELECT 1;" >"$tmp/select1.sql"
chmod 644 "$tmp"/*.sql
for s in select1 pulse notify; do
	gate "$s"
	log "pgbench -c 2 -j 2 -T $PGBENCH_SECONDS: $(cat "$tmp/$s.sql")"
	lat wrap "$tmp/load_$s" "$PG_BINDIR/pgbench" -n -h "$tmp" -p "$PORT" -U postgres -c 2 -j 2 \
		-T "$PGBENCH_SECONDS" -f "$tmp/$s.sql" postgres >"$tmp/pgbench_$s.out" 2>&1 \
		|| { cat "$tmp/pgbench_$s.out" >&2; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/pgbench_$s.out" | tail -1)
	latavg=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$tmp/pgbench_$s.out")
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/pgbench_$s.out")
	echo "RESULT tput=$s tps=$tps lat_ms=$latavg xacts=$xacts $(cat "$tmp/load_$s")" | tee -a "$results"
done
sql "SELECT 'status after pgbench', pulses_received, slots_received, rows_reoffered, bad_pulses FROM aion_wake.status" >>"$tmp/status.txt"

# --- 3. enqueue -> claim -----------------------------------------------------
for how in block listen; do
	gate "$how"
	log "enqueue -> claim: $how ($SAMPLES samples)"
	lat enqclaim "$how" "$how" "$SAMPLES" "$tmp/dat/enqclaim_$how.dat" | tee -a "$results"
done
gate poll100ms
log "enqueue -> claim: poll every 100 ms ($POLL_SAMPLES samples)"
lat enqclaim poll100ms poll "$POLL_SAMPLES" "$tmp/dat/enqclaim_poll100ms.dat" | tee -a "$results"

# --- 4. idle ---------------------------------------------------------------
gate idle
log "idle: $IDLE_WAITERS waiters blocked in claim(wait => '${IDLE_WAIT} s'), ${IDLE_SECONDS} s window"
lat idle "$IDLE_WAITERS" "$IDLE_SECONDS" "$IDLE_WAIT" | tee -a "$results"

# --- 5. where the time goes -------------------------------------------------
# What is left on the paths once the set is out of the way: the ready NOTIFY
# the worker sends after each batch of re-offers (a global lock, a queue
# write and a signal to every listening backend) and the WAL flush of the
# claimer's (and enqueuer's) own commit.  Take them away one at a time (the
# cluster is thrown away afterwards):
#   x_ready_off:  aion_wake.notify_ready = off
#   x_all_async:  ... and synchronous_commit = off in this program's sessions
# (The worker already commits its re-offers without waiting for the flush.)
if [ "$EXPLAIN" = 1 ]; then
	explain_run() { # TAG
		local tag=$1 obs
		for obs in claim visible; do
			gate "pulse_${obs}_$tag"
			log "where the time goes: $tag, pulse() observed by $obs ($SAMPLES samples)"
			lat reoffer "pulse_${obs}_$tag" pulse "$obs" "$SAMPLES" "$tmp/dat/explain_pulse_${obs}_$tag.dat" | tee -a "$results"
		done
		gate "block_$tag"
		log "where the time goes: $tag, enqueue -> blocking claim ($SAMPLES samples)"
		lat enqclaim "block_$tag" block "$SAMPLES" "$tmp/dat/explain_block_$tag.dat" | tee -a "$results"
	}
	sql "ALTER SYSTEM SET aion_wake.notify_ready = off" && sql "SELECT pg_reload_conf()" >/dev/null
	explain_run x_ready_off
	LAT_PGOPTIONS="-c synchronous_commit=off"
	explain_run x_all_async
	LAT_PGOPTIONS=""
	sql "ALTER SYSTEM RESET ALL" && sql "SELECT pg_reload_conf()" >/dev/null
fi
wal_sync=$(sql "SELECT round((wal_sync_time / nullif(wal_sync, 0))::numeric, 3) FROM pg_stat_wal")
rtt=$(awk '/^RESULT tput=select1/ { for (i = 2; i <= NF; i++) if ($i ~ /^lat_ms=/) print substr($i, 8) }' "$results")

# --- table -------------------------------------------------------------------
# r KEY VALUE FIELD: FIELD of the RESULT line whose KEY is VALUE
r() {
	awk -v k="$1" -v v="$2" -v f="$3" '
		{ ok = 0; val = ""
		  for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k && kv[2] == v) ok = 1; if (kv[1] == f) val = kv[2] }
		  if (ok) { print val; exit } }' "$results"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.2f", a / b }'; }
verdict() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0); print ok ? "PASS" : "MISS" }'; }

table=$tmp/results.txt
row_fmt='  %-44s %8s %8s %8s %8s %8s\n'
lat_row() { # LABEL NAME
	printf "$row_fmt" "$1" "$(r name "$2" p50)" "$(r name "$2" p99)" "$(r name "$2" max)" \
		"$(r name "$2" p50_from_send)" "$(r name "$2" others_cpu)"
}
{
	echo "aion_wake latency benchmark -- $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: nproc $(nproc), $(uname -r), $("$PG_BINDIR/postgres" --version)"
	echo "aion_wake: $version (at the start of the run)"
	echo "samples: $SAMPLES per variant (polling: $POLL_SAMPLES); latencies in ms from the causing statement's"
	echo "return to its client (\"from send\": from the moment it was sent); \"others\": CPUs used meanwhile"
	echo "by processes outside this run (the machine has $(nproc)); nice level of this run: $NICE"
	echo
	echo "1. pulse -> re-offer"
	printf "$row_fmt" "" p50 p99 max "p50 send" others
	for tag in 10 big; do
		size=$([ "$tag" = 10 ] && echo 10 || echo "$BALLAST")
		for obs in claim visible; do
			for how in pulse notify; do
				label="$([ "$how" = pulse ] && echo "pulse()" || echo "NOTIFY") -> $([ "$obs" = claim ] && echo "blocked claim" || echo "row visible (poll)"), $size parked"
				lat_row "$label" "${how}_${obs}_${tag}"
			done
		done
	done
	p50s=$(r name pulse_claim_10 p50); p99s=$(r name pulse_claim_10 p99)
	p50b=$(r name pulse_claim_big p50); p99b=$(r name pulse_claim_big p99)
	echo "  target, pulse() -> blocked claim, 10 parked: p50 $p50s <= 1 ms: $(verdict "$p50s" '<=' 1); p99 $p99s <= 5 ms: $(verdict "$p99s" '<=' 5)"
	echo "  target, $BALLAST parked, within 2x: p50 $p50b <= 2 ms: $(verdict "$p50b" '<=' 2); p99 $p99b <= 10 ms: $(verdict "$p99b" '<=' 10)"
	echo "          (measured big/small: p50 x$(ratio "$p50b" "$p50s"), p99 x$(ratio "$p99b" "$p99s"))"
	echo
	echo "2. pulse throughput, pgbench -c 2 -j 2 -T $PGBENCH_SECONDS (simple protocol)"
	t1=$(r tput select1 tps); tp=$(r tput pulse tps); tn=$(r tput notify tps)
	tput_row() { # LABEL NAME TPS
		local x w l wc
		x=$(r tput "$2" xacts); w=$(r tput "$2" worker_ms); l=$(r tput "$2" listener_ms); wc=$(r tput "$2" worker_ctxsw)
		printf '  %-38s %9.0f %7s %7s %7s %9s %9s %9s\n' "$1" "$3" "$(r tput "$2" lat_ms)" "$(ratio "$3" "$t1")" \
			"$(r tput "$2" others_cpu)" "$(awk -v w="$w" -v x="$x" 'BEGIN { printf "%.1f", x ? w * 1000 / x : 0 }')" \
			"$(awk -v w="$l" -v x="$x" 'BEGIN { printf "%.1f", x ? w * 1000 / x : 0 }')" \
			"$(awk -v w="$wc" -v x="$x" 'BEGIN { printf "%.2f", x ? w / x : 0 }')"
	}
	printf '  %-38s %9s %7s %7s %7s %9s %9s %9s\n' "" tps "avg ms" "xSEL1" others "worker us" "listen us" "wk wakes"
	tput_row "SELECT 1;" select1 "$t1"
	tput_row "SELECT aion_wake.pulse('thr', 1);" pulse "$tp"
	tput_row "NOTIFY aion_wake_capacity, 'thr:1';" notify "$tn"
	echo "  pulse() / NOTIFY tps: x$(ratio "$tp" "$tn"); worker us, listen us: CPU time of the worker and of its"
	echo "  listener backend per transaction; wk wakes: the worker's context switches per transaction"
	echo
	echo "3. enqueue -> claim"
	printf "$row_fmt" "" p50 p99 max "p50 send" others
	lat_row "blocking claim(wait => '5 s')" block
	lat_row "LISTEN/NOTIFY, then claim()" listen
	lat_row "claim() polled every 100 ms" poll100ms
	pb=$(r name block p50); pp=$(r name poll100ms p50)
	echo "  target: blocking p50 $pb <= 1 ms: $(verdict "$pb" '<=' 1); polling/blocking p50 x$(ratio "$pp" "$pb") >= 20: $(verdict "$(ratio "$pp" "$pb")" '>=' 20)"
	echo
	echo "4. idle: $IDLE_WAITERS claimers blocked in claim(wait), ${IDLE_SECONDS} s window (1 tick = 1/$(getconf CLK_TCK) s)"
	printf '  %-30s %6s %7s %8s %10s %8s\n' processes procs ticks "cpu s" "run ms" "ctx sw"
	for g in waiters worker listener waiters+worker+listener other_server_processes; do
		printf '  %-30s %6s %7s %8s %10s %8s\n' "$g" "$(r idle "$g" procs)" "$(r idle "$g" ticks)" \
			"$(r idle "$g" cpu_s)" "$(r idle "$g" run_ms)" "$(r idle "$g" ctxsw)"
	done
	ti=$(r idle waiters+worker+listener ticks); rm_=$(r idle waiters+worker+listener run_ms)
	echo "  claimers that returned inside the window (must be 0): $(r check idle waiters_returned_early); others: $(r check idle others_cpu) CPUs"
	echo "  autovacuum/autoanalyze runs that ended inside the window (count:table@end): $(r check idle autovacuum_in_window)"
	echo "  context switches of waiters + worker + listener, per second of the window (+s:count): $(r check idle wakes)"
	echo "  target, no measurable CPU: $ti ticks, $rm_ ms on CPU: $(verdict "$ti" '<=' 0)"
	if [ "$EXPLAIN" = 1 ]; then
		echo
		echo "5. where the time goes ($BALLAST parked; compare with the $BALLAST-parked rows of 1 and with 3)"
		printf "$row_fmt" "" p50 p99 max "p50 send" others
		lat_row "pulse() -> claim, as shipped" pulse_claim_big
		lat_row "  notify_ready off" pulse_claim_x_ready_off
		lat_row "  + sessions synchronous_commit off" pulse_claim_x_all_async
		lat_row "pulse() -> row visible, as shipped" pulse_visible_big
		lat_row "  notify_ready off" pulse_visible_x_ready_off
		lat_row "  + sessions synchronous_commit off" pulse_visible_x_all_async
		lat_row "enqueue -> blocking claim, as shipped" block
		lat_row "  notify_ready off" block_x_ready_off
		lat_row "  + sessions synchronous_commit off" block_x_all_async
		echo "  for scale: mean WAL flush (pg_stat_wal) $wal_sync ms; SELECT 1 round trip at 2 clients $rtt ms"
	fi
	if grep -q 'quiet=no' "$results"; then
		echo
		echo "note: the machine was still busy before: $(awk '/quiet=no/ { for (i = 2; i <= NF; i++) if ($i ~ /^gate=/) printf "%s ", substr($i, 6) }' "$results")"
	fi
} >"$table"

# --- outputs -----------------------------------------------------------------
mkdir -p "$OUT/data"
cp "$tmp"/dat/*.dat "$OUT/data/"
cp "$table" "$OUT/results.txt"
cp "$tmp/server.log" "$OUT/data/server.log"; chmod 644 "$OUT/data/server.log"
cp "$results" "$OUT/data/results.raw"
cat "$tmp/status.txt" >>"$OUT/data/results.raw"
if command -v gnuplot >/dev/null; then
	gnuplot -e "datadir='$OUT/data'; outbase='$OUT/latency_cdf'; big='$(numfmt --to=si $BALLAST)'" "$here/latency_cdf.gp"
else
	log "gnuplot not found (apt-get install gnuplot-nox): no plot"
fi
if [ "$(id -u)" -eq 0 ]; then
	chown -R --reference="$here" "$OUT/data" "$OUT/results.txt" "$OUT"/latency_cdf.* 2>/dev/null || true
fi
echo
cat "$table"
