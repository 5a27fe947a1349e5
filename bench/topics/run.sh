#!/usr/bin/env bash
#
# bench/topics/run.sh -- one claimer waiting on many topics (1.1):
# what claim(topics[], ..., wait) costs and saves.  A measurement, not a
# test: it prints a table with PASS/MISS against the targets and exits 0
# either way (non-zero only if the run itself fails).
#
#  a. enqueue -> claim: one connection blocked in claim() on 64 topics
#     against 64 connections blocked on one topic each; p50 and p99 side by
#     side (target: the one connection within 1.5x of the 64), and the
#     backends each way uses (1 against 64).
#  b. a dispatcher pool of 4 connections serving 50 topics, each topic with
#     the headline's consumer (C = 4 slots, 20 ms per row, known to
#     aion_wake as set_limit(topic, 4)), 400 rows per topic: the aggregate
#     makespan against the ideal 400 x 20 ms / 4 = 2 s, and the CPU of the 4
#     connections blocked on the 50 topics over 60 s once all is done
#     (target: 0 ticks).
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp
# directory, Unix socket only, durability settings left at their defaults),
# builds topics.c there, and stops and removes the cluster on exit.
# Outputs: bench/topics/results.txt (the table), data/*.dat (sorted
# latencies of a), data/results.raw (every RESULT line), data/server.log,
# and topics_cdf.png / .svg (gnuplot; installed if missing and run as root).
# Git keeps all but results.raw and server.log, which every run writes
# afresh.
# About 3 minutes.
#
# Usage (as root -- the server and the harness then run as postgres -- or
# as postgres):   bench/topics/run.sh
# Environment:
#   TOPICS_PORT (5580)        port of the throwaway cluster
#   TOPICS_SAMPLES (300)      samples per latency variant (a)
#   TOPICS_N (64)             topics of (a)
#   POOL_TOPICS (50), POOL_ROWS (400), POOL_SLOTS (4), POOL_SERVICE_MS (20),
#   POOL_CONNS (4), POOL_MAX_ROWS (32)     the pool of (b)
#   IDLE_SECONDS (60)         the idle window of (b)
#   IDLE_SETTLE (11)          seconds between the connections blocking and
#                             the window: PostgreSQL's idle statistics timer,
#                             armed when a statement ends, may set a
#                             backend's latch once, up to 10 s later
#   TOPICS_OUT (bench/topics) where results, data and plots are written
#   PG_BINDIR                 PostgreSQL binaries (default: pg_config --bindir)

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}
PORT=${TOPICS_PORT:-5580}
SAMPLES=${TOPICS_SAMPLES:-300}
NTOPICS=${TOPICS_N:-64}
POOL_TOPICS=${POOL_TOPICS:-50}
POOL_ROWS=${POOL_ROWS:-400}
POOL_SLOTS=${POOL_SLOTS:-4}
POOL_SERVICE_MS=${POOL_SERVICE_MS:-20}
POOL_CONNS=${POOL_CONNS:-4}
POOL_MAX_ROWS=${POOL_MAX_ROWS:-32}
IDLE_SECONDS=${IDLE_SECONDS:-60}
IDLE_SETTLE=${IDLE_SETTLE:-11}
OUT=${TOPICS_OUT:-$here}

if ! command -v gnuplot >/dev/null && [ "$(id -u)" -eq 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null \
		|| echo "run.sh: could not install gnuplot-nox: no plot" >&2
fi

# the throwaway cluster: bench/lib.sh starts it, and stops and removes it on exit
BENCH_PORT=$PORT
# shellcheck source=../lib.sh
. "$here/../lib.sh"
as_pg() { bench_as_pg "$@"; }
log() { bench_log "$@"; }
sql() { bench_sql "$1"; }

# what is measured: the library the cluster loads at start
version="tree at $(git -c safe.directory='*' -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), library installed $(date -u -r "$(pg_config --pkglibdir)/aion_wake.so" '+%Y-%m-%d %H:%M UTC')"

# (a) blocks 64 claimers at once; the idle window of (b) is longer than the
# default aion_wake.max_wait; authentication_timeout: the timer PostgreSQL
# leaves armed after a backend starts sets its latch once, that long after
bench_start "max_connections = $((NTOPICS + POOL_CONNS + 20))" \
	"aion_wake.max_wait = '$((IDLE_SECONDS + IDLE_SETTLE + 120))s'" \
	"authentication_timeout = '2s'"
tmp=$BENCH_TMP

gcc -O2 -Wall -Wextra -Werror -pthread -I"$(pg_config --includedir)" \
	-o "$tmp/topics" "$here/topics.c" -L"$(pg_config --libdir)" -lpq
chmod 755 "$tmp/topics"
tp() { as_pg env PGHOST="$tmp" PGPORT="$PORT" PGDATABASE=postgres PGUSER=postgres "$tmp/topics" "$@"; }

for _ in $(seq 1 500); do
	[ "$(sql "SELECT listening FROM aion_wake.status")" = t ] && break
	sleep 0.02
done
mkdir "$tmp/dat"
chown --reference="$tmp" "$tmp/dat"
results=$tmp/results.raw
: >"$results"
chmod 666 "$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# --- a. one connection on 64 topics against 64 connections on one each -----
for how in one many; do
	log "a. enqueue -> claim, $how ($([ $how = one ] && echo "1 connection on $NTOPICS topics" || echo "$NTOPICS connections on 1 topic each")), $SAMPLES samples"
	tp latency "$how" "$how" "$NTOPICS" "$SAMPLES" "$tmp/dat/enqclaim_$how.dat" | tee -a "$results"
done

# what one look at the topics costs, 1 against 64 (a waiting claim looks at
# all its topics when it starts and when its wait ends)
for n in 1 "$NTOPICS"; do
	tp probe "$n" 500 | tee -a "$results"
done

# --- b. a dispatcher pool ------------------------------------------------------
log "b. $POOL_TOPICS topics x $POOL_ROWS rows, set_limit(topic, $POOL_SLOTS)"
sql "SELECT count(*) FROM (SELECT aion_wake.set_limit('p' || t, $POOL_SLOTS) FROM generate_series(1, $POOL_TOPICS) t) s" >/dev/null
# row g of every topic, then row g + 1: the topics' fences interleave
sql "SELECT count(*) FROM generate_series(1, $POOL_ROWS) g, generate_series(1, $POOL_TOPICS) t,
            aion_wake.enqueue('p' || t || '-' || g, '{}', 'p' || t) e WHERE e" >/dev/null
sql "VACUUM ANALYZE aion_wake.outbox" >/dev/null
log "b. pool of $POOL_CONNS connections, claim(topics[], $POOL_MAX_ROWS), consumer C=$POOL_SLOTS x ${POOL_SERVICE_MS} ms; then ${IDLE_SECONDS} s idle"
cpu_jiffies() { awk '/^cpu / { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }
c0=$(cpu_jiffies)
tp pool "$POOL_TOPICS" "$POOL_ROWS" "$POOL_SLOTS" "$POOL_SERVICE_MS" "$POOL_CONNS" "$POOL_MAX_ROWS" \
	"$IDLE_SECONDS" "$IDLE_SETTLE" | tee -a "$results"
machine_cpu=$(awk -v a="$c0" -v b="$(cpu_jiffies)" 'BEGIN { split(a, x, " "); split(b, y, " ");
	printf "%.0f", (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0 }')

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
{
	echo "aion_wake many-topic benchmark -- $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: nproc $(nproc), $(uname -r), $("$PG_BINDIR/postgres" --version); aion_wake: $version"
	echo "machine busy before the run: ${BENCH_BUSY_BEFORE}% of $(nproc) CPUs; load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "a. enqueue -> claim, $SAMPLES samples each (ms, client clock, from the enqueue's return; each includes the claim's commit)"
	printf '  %-42s %7s %7s %7s %7s %8s %8s %8s %8s\n' "" p50 p90 p99 max "p50 send" "p99 send" backends waiters
	for how in one many; do
		label=$([ $how = one ] && echo "1 connection, claim(ARRAY[$NTOPICS topics])" || echo "$NTOPICS connections, claim(topic) each")
		printf '  %-42s %7s %7s %7s %7s %8s %8s %8s %8s\n' "$label" "$(r name $how p50)" "$(r name $how p90)" \
			"$(r name $how p99)" "$(r name $how max)" "$(r name $how p50_from_send)" "$(r name $how p99_from_send)" \
			"$(r name $how backends)" "$(r name $how waiters)"
	done
	echo "  (\"send\": from the moment the enqueue was sent; from its return, a claim can come first: $(r name one negative) and $(r name many negative) samples < 0)"
	p50o=$(r name one p50); p50m=$(r name many p50); p99o=$(r name one p99); p99m=$(r name many p99)
	echo "  one / many: p50 x$(ratio "$p50o" "$p50m"), p99 x$(ratio "$p99o" "$p99m")"
	echo "  target, the one connection within 1.5x of the $NTOPICS: p50 $(verdict "$(ratio "$p50o" "$p50m")" '<=' 1.5), p99 $(verdict "$(ratio "$p99o" "$p99m")" '<=' 1.5)"
	echo "  one look at empty topics, claim(ARRAY[...], 1) finding nothing (500 calls, round trip included):"
	echo "    1 topic $(r probe 1 ms_per_call) ms ($(r probe 1 backend_us_per_call) us of backend CPU), $NTOPICS topics $(r probe "$NTOPICS" ms_per_call) ms ($(r probe "$NTOPICS" backend_us_per_call) us)"
	echo
	echo "b. dispatcher pool: $POOL_CONNS connections, $POOL_TOPICS topics x $POOL_ROWS rows, consumer C=$POOL_SLOTS x ${POOL_SERVICE_MS} ms per topic"
	echo "   (set_limit(topic, $POOL_SLOTS); each connection completes the finished rows in one statement, then"
	echo "   claim(topics[], $POOL_MAX_ROWS), blocking only while nothing is in flight)"
	echo "  makespan $(r pool run makespan_s) s, ideal $(r pool run ideal_s) s: x$(r pool run x_ideal); utilisation $(awk -v u="$(r pool run utilisation)" 'BEGIN { printf "%.1f%%", u * 100 }');" \
		"$(r pool run rows_per_s) rows/s; BUSY answers $(r pool run bounces); machine CPU busy ${machine_cpu}% (run + idle)"
	echo "  statements: $(r pool run claims) claims ($(r pool run empty_claims) empty, $(r pool run blocking_claims) blocking), $(r pool run rows_per_claim) rows per claim that got rows;" \
		"$(r pool run completes) completes, $(r pool run rows_per_complete) rows each"
	echo "  idle, ${IDLE_SECONDS} s with all $POOL_CONNS connections blocked on $POOL_TOPICS topics (after ${IDLE_SETTLE} s to settle; 1 tick = 1/$(getconf CLK_TCK) s):"
	printf '    %-14s %6s %7s %10s %8s\n' processes procs ticks "run ms" "ctx sw"
	for g in dispatchers worker listener; do
		printf '    %-14s %6s %7s %10s %8s\n' "$g" "$(r idle $g procs)" "$(r idle $g ticks)" "$(r idle $g run_ms)" "$(r idle $g ctxsw)"
	done
	echo "    claims that returned inside the window (must be 0): $(r check idle returned_early)"
	echo "  target, 0 ticks for the blocked connections: $(r idle dispatchers ticks) ticks: $(verdict "$(r idle dispatchers ticks)" '<=' 0)"
} >"$table"

# --- outputs -----------------------------------------------------------------
mkdir -p "$OUT/data"
cp "$tmp"/dat/*.dat "$OUT/data/"
cp "$table" "$OUT/results.txt"
cp "$results" "$OUT/data/results.raw"
cp "$tmp/server.log" "$OUT/data/server.log"
chmod 644 "$OUT/data/server.log"
if command -v gnuplot >/dev/null; then
	gnuplot -e "datadir='$OUT/data'; outbase='$OUT/topics_cdf'; n='$NTOPICS'" "$here/topics_cdf.gp"
else
	log "gnuplot not found (apt-get install gnuplot-nox): no plot"
fi
if [ "$(id -u)" -eq 0 ]; then
	chown -R --reference="$here" "$OUT/data" "$OUT/results.txt" "$OUT"/topics_cdf.* 2>/dev/null || true
fi
echo
cat "$table"
