#!/usr/bin/env bash
#
# bench/rates/run.sh -- rates and pauses (1.2, issue 24 "Measure"): what
# set_rate(), pause() and resume() deliver.  A measurement, not a test: it
# prints a table with PASS/MISS against the issue's targets and exits 0
# either way (non-zero only if a run itself fails).
#
#  1. Wake precision: a claim held back only by the rate returns at the
#     moment the window admits its start (the start that leaves the window
#     + per, from the server-side lease starts leased_until - lease) --
#     p50 <= 1 ms, p99 <= 5 ms; p50/p95/p99/max of every such start of the
#     three topics of 2 (and the one wake of 3).
#  2. No under-admission: three topics with a backlog, side by side in one
#     run of RATES_SECONDS (300) -- 100 per second, 20 per 10 s and 5 per
#     minute -- each start >= 99 % of max_starts / per over the run.  Each
#     topic has its own claimers: claim(topic, 1, '1 hour', '90 s') then
#     complete(key, token), in a loop.  G10 is checked on the way: the
#     most starts in any window of length per, by lease start.
#  3. No polling: IDLE_WAITERS claimers blocked by a rate of 1 start per
#     IDLE_SETTLE + IDLE_SECONDS + 9 s after the window's one start; the
#     CPU (utime + stime from /proc/PID/stat, and schedstat's time on CPU)
#     and context switches of their backends and of the worker over
#     IDLE_SECONDS, IDLE_SETTLE s after they blocked (PostgreSQL's idle
#     statistics timer may set a backend's latch once, up to 10 s after a
#     statement ends -- the server's, not aion_wake's).  Target: 0 ticks.
#  4. A partner that refuses above its rate (HTTP-like: 429 with
#     Retry-After when more than PARTNER_LIMIT calls in PARTNER_PER_MS):
#     PARTNER_ROWS rows, PARTNER_THREADS dispatchers, three wirings side by
#     side, PARTNER_REPS runs each, interleaved:
#       park   today's wiring: park(key, retry_after, token) on 429
#       pause  BEGIN; park(key, retry_after, token);
#              pause(topic, now() + retry_after); COMMIT
#       rate   set_rate(topic, PARTNER_LIMIT, PARTNER_PER_MS) up front
#     each with complete(key, token, next_rows => 1) on delivery.
#     Makespan against the ideal rows / rate (20 s), refusals, and per
#     delivered row: outbox (+ pauses) row writes, WAL bytes and COMMIT
#     records (pg_waldump over the run's LSN range, every transaction that
#     wrote, the worker's included).  Target for rate: <= 1.02 x ideal
#     with 0 refusals.
#
# It starts a throwaway cluster with bench/lib.sh (initdb in a mktemp
# directory, Unix socket only, fsync and synchronous_commit left on,
# aion_wake.max_wait = 180 s, authentication_timeout = 1 s), builds
# rates.c there, and stops and removes the cluster on exit.  Outputs:
# bench/rates/results/table.txt (the table; git keeps it), data/ (what the
# plots are drawn from: wake CDF quantiles, the median run of each partner
# wiring; git keeps it), the plots wake_cdf.png/.svg and partner.png/.svg,
# and, rewritten by every run and ignored by git, results/*.csv (every
# start and every partner answer) and data/results.raw (every RESULT
# line).  About 12 minutes with the defaults.
#
# Usage (as root -- the server and the probes then run as postgres -- or
# as postgres):   PG_CONFIG=/path/to/pg_config bench/rates/run.sh
# Environment:
#   PG_CONFIG (pg_config)       the PostgreSQL whose binaries and aion_wake.so run
#   RATES_PORT (5581)           port of the throwaway cluster
#   RATES_SECONDS (300)         length of run 2 (from the first start)
#   RATES_TOPICS ("r100ps:8:100:1000 r20p10s:4:20:10000 r5pm:3:5:60000")
#                               TOPIC:CLAIMERS:MAX_STARTS:PER_MS of run 2
#   IDLE_WAITERS (4), IDLE_SETTLE (11), IDLE_SECONDS (30)      run 3
#   PARTNER_ROWS (2000), PARTNER_THREADS (8), PARTNER_LIMIT (100),
#   PARTNER_PER_MS (1000), PARTNER_SERVICE_MS (10), PARTNER_REPS (3),
#   PARTNER_MODES ("park pause rate"), PARTNER_RATE_PER_MS (PARTNER_PER_MS:
#   the per of the rate wiring's set_rate)                     run 4
#   RATES_PARTS ("window idle partner")   which parts run
#   RATES_QUIET_MAX (20), RATES_QUIET_CPU (0.5)   wait (at most MAX s)
#                               before each partner run until other
#                               processes use less than CPU CPUs
#   RATES_OUT (bench/rates)     where results/, data/ and the plots go
#   RATES_PLOT_ONLY (unset)     1: no cluster, no runs; only the plots, from data/

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
PG_BINDIR=$($PG_CONFIG --bindir)
PORT=${RATES_PORT:-5581}
BENCH_PORT=$PORT
SECS=${RATES_SECONDS:-300}
TOPICS=${RATES_TOPICS:-r100ps:8:100:1000 r20p10s:4:20:10000 r5pm:3:5:60000}
IDLE_WAITERS=${IDLE_WAITERS:-4}
IDLE_SETTLE=${IDLE_SETTLE:-11}
IDLE_SECONDS=${IDLE_SECONDS:-30}
P_ROWS=${PARTNER_ROWS:-2000}
P_THREADS=${PARTNER_THREADS:-8}
P_LIMIT=${PARTNER_LIMIT:-100}
P_PER_MS=${PARTNER_PER_MS:-1000}
# the per of set_rate in the rate wiring (default: the partner's own)
P_RATE_PER_MS=${PARTNER_RATE_PER_MS:-$P_PER_MS}
P_SERVICE_MS=${PARTNER_SERVICE_MS:-10}
P_REPS=${PARTNER_REPS:-3}
P_MODES=${PARTNER_MODES:-park pause rate}
PARTS=${RATES_PARTS:-window idle partner}
QUIET_MAX=${RATES_QUIET_MAX:-20}
QUIET_CPU=${RATES_QUIET_CPU:-0.5}
OUT=${RATES_OUT:-$here}
results=$OUT/results
data=$OUT/data
raw=$data/results.raw

# shellcheck source=../lib.sh
. "$here/../lib.sh"
log() { bench_log "$@"; }
sql() { bench_sql "$1"; }
has_part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
verdict() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0); print ok ? "PASS" : "MISS" }'; }

if ! command -v gnuplot >/dev/null; then
	if [ "$(id -u)" -eq 0 ]; then
		log "installing gnuplot-nox"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
	else
		echo "run.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2
		exit 1
	fi
fi

if [ -z "${RATES_PLOT_ONLY:-}" ]; then

bench_start "max_connections = 60" "aion_wake.max_wait = '180s'" "authentication_timeout = '1s'" \
	"wal_keep_size = '8GB'" "max_wal_size = '8GB'"
tmp=$BENCH_TMP
[ "$(sql "SELECT worker_pid IS NOT NULL FROM aion_wake.status")" = t ] \
	|| { echo "run.sh: no aion_wake worker" >&2; exit 1; }
pgversion=$(sql "SHOW server_version")
gcc -O2 -Wall -Wextra -Werror -pthread -I"$($PG_CONFIG --includedir)" \
	"$here/rates.c" -L"$($PG_CONFIG --libdir)" -lpq -o "$tmp/rates"
chmod 755 "$tmp/rates"
conninfo="host=$tmp port=$PORT dbname=postgres user=postgres"
probe() { bench_as_pg "$tmp/rates" "$@"; }

mkdir -p "$results" "$data"
: >"$raw"
chown postgres "$tmp" 2>/dev/null || true
t_start=$(date +%s)
bg_before=$(m=$(bench_load_mark); sleep 3; bench_load_since "$m")
log "with our cluster idle, other processes use ${bg_before#* } CPUs (machine ${bg_before% *}% busy)"

# --- 1 + 2: three rates side by side ---------------------------------------
if has_part window; then
	specs=()
	for s in $TOPICS; do
		IFS=: read -r t c n p <<<"$s"
		specs+=("$s")
		rows=$(awk -v s="$SECS" -v n="$n" -v p="$p" 'BEGIN { printf "%d", s * 1000 / p * n * 1.05 + 3 * n + 20 }')
		sql "SELECT count(aion_wake.enqueue('$t-' || g, '{}', '$t')) FROM generate_series(1, $rows) g" >/dev/null
		sql "SELECT aion_wake.set_rate('$t', $n, '$p ms')" >/dev/null
		log "window: topic $t, $n starts per $p ms, $c claimers, $rows rows"
	done
	sql "VACUUM ANALYZE aion_wake.outbox" >/dev/null
	mark=$(bench_load_mark)
	probe window "$conninfo" "$SECS" "$tmp/starts.csv" "${specs[@]}" | tee -a "$raw"
	load=$(bench_load_since "$mark")
	echo "RESULT window=load machine_busy_pct=${load% *} foreign_cpus=${load#* }" | tee -a "$raw"
	sql "SELECT 'RESULT window=status claims_rate_delayed=' || claims_rate_delayed || ' claims_paused=' || claims_paused FROM aion_wake.status" | tee -a "$raw"
	cp "$tmp/starts.csv" "$results/starts.csv"
	for s in $TOPICS; do
		t=${s%%:*}
		sql "SELECT aion_wake.set_rate('$t', NULL)" >/dev/null
		# quantiles of the delays counted (the plot's data)
		awk -F, -v t="$t" '$1 == t && $4 == 1 { print $3 / 1000 }' "$tmp/starts.csv" | sort -g |
			awk '{ v[NR] = $1 } END { for (i = 1; i <= NR; i++) if (NR <= 2000 || i % int(NR / 2000) == 0 || i == NR) printf "%.3f %.5f\n", v[i], i / NR }' \
			>"$data/wake_$t.dat"
	done
	sql "DELETE FROM aion_wake.outbox" >/dev/null
fi

# --- 3: no polling between admissions --------------------------------------
if has_part idle; then
	per=$((IDLE_SETTLE + IDLE_SECONDS + 9))
	sql "SELECT aion_wake.set_rate('idle', 1, '$per s')" >/dev/null
	sql "SELECT count(aion_wake.enqueue('idle-' || g, '{}', 'idle')) FROM generate_series(1, 5) g" >/dev/null
	sql "SELECT aion_wake.enqueue('idle-warm', '{}', 'idle-warm')" >/dev/null
	log "idle: $IDLE_WAITERS claimers held back by a rate of 1 per $per s"
	mark=$(bench_load_mark)
	probe idle "$conninfo" idle "$IDLE_WAITERS" "$IDLE_SETTLE" "$IDLE_SECONDS" | tee -a "$raw"
	load=$(bench_load_since "$mark")
	echo "RESULT idle=load machine_busy_pct=${load% *} foreign_cpus=${load#* }" | tee -a "$raw"
	sql "SELECT aion_wake.set_rate('idle', NULL)" >/dev/null
	sql "DELETE FROM aion_wake.outbox" >/dev/null
fi

# --- 4: a partner that refuses above its rate -------------------------------
tabwrites() {
	sql "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables
	      WHERE schemaname = 'aion_wake' AND relname IN ('outbox', 'pauses', 'rates')"
}
if has_part partner; then
	rm -f "$results"/partner_*.csv "$data"/partner_*.csv
	for ((rep = 1; rep <= P_REPS; rep++)); do
		for mode in $P_MODES; do
			tag=${mode}_$rep
			sql "DELETE FROM aion_wake.outbox" >/dev/null
			sql "SELECT aion_wake.resume('partner'), aion_wake.set_rate('partner', NULL)" >/dev/null
			sql "SELECT count(aion_wake.enqueue('p-' || g, '{}', 'partner')) FROM generate_series(1, $P_ROWS) g" >/dev/null
			[ "$mode" = rate ] && sql "SELECT aion_wake.set_rate('partner', $P_LIMIT, '$P_RATE_PER_MS ms')" >/dev/null
			sql "VACUUM ANALYZE aion_wake.outbox" >/dev/null
			sql "CHECKPOINT" >/dev/null
			bench_wait_quiet "$QUIET_MAX" "$QUIET_CPU" || true
			sleep 1
			w0=$(tabwrites)
			lsn0=$(sql "SELECT pg_current_wal_insert_lsn()")
			mark=$(bench_load_mark)
			line=$(probe partner "$conninfo" "$mode" "$P_ROWS" "$P_THREADS" "$P_LIMIT" "$P_PER_MS" \
				"$P_SERVICE_MS" "$tmp/partner_$tag.csv")
			load=$(bench_load_since "$mark")
			lsn1=$(sql "SELECT pg_current_wal_insert_lsn()")
			sleep 1.5
			w1=$(tabwrites)
			walb=$(sql "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
			sql "CHECKPOINT" >/dev/null
			commits=$(bench_as_pg "$PG_BINDIR/pg_waldump" -p "$BENCH_DATA/pg_wal" -s "$lsn0" -e "$lsn1" \
				"$(sql "SELECT pg_walfile_name('$lsn0')")" "$(sql "SELECT pg_walfile_name('$lsn1')")" \
				--stats=record 2>"$tmp/waldump.err" |
				awk '$1 == "Transaction/COMMIT" { print $2 }') || true
			[ -n "$commits" ] || log "$tag: pg_waldump counted no COMMIT: $(head -c 300 "$tmp/waldump.err")"
			commits=${commits:-0}
			delivered=$(sed -n 's/.* delivered=\([0-9]*\).*/\1/p' <<<"$line")
			line="$line rep=$rep writes_per_row=$(bench_div $((w1 - w0)) "$delivered") wal_bytes_per_row=$(bench_div "$walb" "$delivered" | cut -d. -f1) commits_per_row=$(bench_div "$commits" "$delivered") foreign_cpus=${load#* }"
			# G10: the most lease starts (every call is one start) in any window of PER
			most=$(awk -F, 'NR > 1 { print $3 }' "$tmp/partner_$tag.csv" | sort -n |
				awk -v p="$((P_PER_MS * 1000))" '{ v[NR] = $1; while (v[NR] - v[lo + 1] >= p) lo++; if (NR - lo > m) m = NR - lo } END { print m + 0 }')
			line="$line most_starts_in_window=$most"
			echo "$line" | tee -a "$raw"
			cp "$tmp/partner_$tag.csv" "$results/"
			# every 429: the accepted call it collided with (the oldest in the
			# partner's window, LIMIT accepted calls before it), on the server's
			# clock (their lease starts) and at the partner (their calls); lag =
			# call - lease start (the rest of the claim, its commit, the trip back)
			awk -F, -v l="$P_LIMIT" -v tag="$tag" 'BEGIN { na = 0; n = 0; early = 0 } NR > 1 {
				if ($2 == 200) { ls[na] = $3; cl[na] = $4; na++; next }
				if (na < l) { early++; next }
				k = na - l; n++
				sg = ($3 - ls[k]) / 1000; cg = ($4 - cl[k]) / 1000
				if (n == 1 || sg < smin) smin = sg
				if (n == 1 || cg > cmax) cmax = cg
				lj += ($4 - $3) / 1000; lk += (cl[k] - ls[k]) / 1000 }
				END { if (n) printf "RESULT refusals=%s n=%d first_window=%d server_gap_min_ms=%.3f call_gap_max_ms=%.3f lag_refused_mean_ms=%.3f lag_oldest_mean_ms=%.3f\n", tag, n, early, smin, cmax, lj / n, lk / n
				else printf "RESULT refusals=%s n=0 first_window=%d\n", tag, early }' \
				"$tmp/partner_$tag.csv" | tee -a "$raw"
		done
	done
	sql "SELECT aion_wake.resume('partner'), aion_wake.set_rate('partner', NULL)" >/dev/null
fi
bg_after=$(m=$(bench_load_mark); sleep 3; bench_load_since "$m")
t_end=$(date +%s)
cp "$BENCH_TMP/server.log" "$data/server.log" 2>/dev/null || true

# --- the table ------------------------------------------------------------------
# r KEY=VALUE FIELD: FIELD of the RESULT line holding KEY=VALUE
r() { awk -v k="$1" -v f="$2" '{ hit = 0; v = ""
		for (i = 2; i <= NF; i++) { if ($i == k) hit = 1; if (index($i, f "=") == 1) v = substr($i, length(f) + 2) }
		if (hit) { print v; exit } }' "$raw"; }
# median of FIELD over the partner runs of MODE
pmed() { awk -v m="partner=$1" -v f="$2" '$2 == m { for (i = 2; i <= NF; i++) if (index($i, f "=") == 1) print substr($i, length(f) + 2) }' "$raw" |
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
pmax() { awk -v m="partner=$1" -v f="$2" '$2 == m { for (i = 2; i <= NF; i++) if (index($i, f "=") == 1) print substr($i, length(f) + 2) }' "$raw" | sort -g | tail -1; }
so=$PG_CONFIG
{
	echo "== aion_wake rates benchmark (bench/rates/run.sh) =="
	echo "date: $(date -u -d "@$t_start" '+%Y-%m-%d %H:%M')-$(date -u -d "@$t_end" '+%H:%M UTC')  nproc: $(nproc)  PostgreSQL $pgversion"
	echo "aion_wake.so: $(md5sum "$($so --pkglibdir)/aion_wake.so" | cut -c1-12) built $(date -u -r "$($so --pkglibdir)/aion_wake.so" '+%Y-%m-%d %H:%M UTC'); bench tree at $(git -c safe.directory='*' -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "other processes (not this cluster, not this script), in CPUs of $(nproc): ${bg_before#* } before, ${bg_after#* } after"
	if has_part window; then
		echo
		echo "1+2. three rates side by side, one run of ${SECS} s from each topic's first start; claimers loop"
		echo "     claim(topic, 1, '1 hour', '90 s') + complete(key, token); starts are lease starts (server clock);"
		echo "     foreign CPUs during the run: $(r window=load foreign_cpus)"
		printf '  %-9s %6s %7s %4s %8s %8s %7s %7s %11s | %7s %7s %7s %7s %7s %7s %6s\n' topic max per cl starts expected ratio most period_ms n_wake min p50 p95 p99 max busy
		for s in $TOPICS; do
			t=${s%%:*}
			printf '  %-9s %6s %5ss %4s %8s %8s %7s %7s %11s | %7s %7s %7s %7s %7s %7s %6s\n' "$t" \
				"$(r "window=$t" max_starts)" "$(awk -v p="$(r "window=$t" per_ms)" 'BEGIN { print p / 1000 }')" \
				"$(r "window=$t" claimers)" "$(r "window=$t" starts)" "$(r "window=$t" expected)" \
				"$(r "window=$t" ratio)" "$(r "window=$t" most_in_window)" "$(r "window=$t" mean_period_ms)" \
				"$(r "window=$t" wake_n)" "$(r "window=$t" wake_min_ms)" "$(r "window=$t" wake_p50_ms)" \
				"$(r "window=$t" wake_p95_ms)" "$(r "window=$t" wake_p99_ms)" "$(r "window=$t" wake_max_ms)" \
				"$(r "window=$t" wakes_claimer_busy)"
		done
		printf '  %-9s %73s | %7s %7s %7s %7s %7s %7s\n' all "" "$(r window=all wake_n)" "$(r window=all wake_min_ms)" \
			"$(r window=all wake_p50_ms)" "$(r window=all wake_p95_ms)" "$(r window=all wake_p99_ms)" "$(r window=all wake_max_ms)"
		echo "  (ratio: starts in [first, first + ${SECS} s) / (${SECS} s x max / per); most: the most starts in any window of"
		echo "   length per, by lease start (G10: <= max); period_ms: mean of start j - start j-max (ideal: per);"
		echo "   wake, ms: start j - (start j-max + per), for the starts whose claimer had sent its claim by that"
		echo "   moment; busy: starts whose claimer had not (left out))"
		echo "  status: $(r window=status claims_rate_delayed | sed 's/^/claims_rate_delayed=/')"
	fi
	if has_part idle; then
		echo
		echo "3. idle: $IDLE_WAITERS claimers held back by a rate of 1 per $((IDLE_SETTLE + IDLE_SECONDS + 9)) s, measured over ${IDLE_SECONDS} s, ${IDLE_SETTLE} s after they blocked"
		echo "   (1 tick = 1/$(getconf CLK_TCK) s; run_ms from /proc/PID/schedstat)"
		for g in waiters worker listener; do
			[ -n "$(r "idle=$g" ticks)" ] || continue
			printf '   %-9s procs %2s  ticks %4s  run_ms %8s  context switches %4s\n' "$g" "$(r "idle=$g" procs)" \
				"$(r "idle=$g" ticks)" "$(r "idle=$g" run_ms)" "$(r "idle=$g" ctxsw)"
		done
		echo "   context switches by second (+s:n): $(r idle=check context_switches_by_second); waiters returned early: $(r idle=waiters returned_early)"
		echo "   then the wake at the window's end: $(r idle=wake delay_ms) ms after the moment ($(r idle=wake after_next_start_at_ms) ms after the"
		echo "   topic's next_start_at, the server's moment: the start logged after the claim's statement + per);"
		echo "   other waiters returned: $(r idle=wake others_returned); foreign CPUs: $(r idle=load foreign_cpus)"
	fi
	if has_part partner; then
		echo
		echo "4. a partner refusing above $P_LIMIT calls per $P_PER_MS ms (429 + Retry-After, ms): $P_ROWS rows, $P_THREADS dispatchers,"
		echo "   accepted call $P_SERVICE_MS ms; ideal makespan rows / rate = $((P_ROWS * P_PER_MS / P_LIMIT)) ms; $P_REPS runs per wiring, interleaved;"
		echo "   the rate wiring: set_rate('partner', $P_LIMIT, '$P_RATE_PER_MS ms')"
		printf '   %-6s %3s %10s %8s %8s %8s %10s %8s %8s %6s\n' wiring rep makespan x_ideal refusals writes wal_B commits foreign most
		awk '$2 ~ /^partner=/' "$raw" | while read -r l; do
			g() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $l"; }
			printf '   %-6s %3s %8.2f s %8s %8s %8s %10s %8s %8s %6s\n' "$(g partner)" "$(g rep)" \
				"$(awk -v v="$(g makespan_ms)" 'BEGIN { print v / 1000 }')" "$(g x_ideal)" "$(g refusals)" \
				"$(g writes_per_row)" "$(g wal_bytes_per_row)" "$(g commits_per_row)" "$(g foreign_cpus)" \
				"$(g most_starts_in_window)"
		done
		echo "   medians:"
		for mode in $P_MODES; do
			printf '   %-6s     %8.2f s %8s %8s %8s %10s %8s\n' "$mode" \
				"$(awk -v v="$(pmed "$mode" makespan_ms)" 'BEGIN { print v / 1000 }')" "$(pmed "$mode" x_ideal)" \
				"$(pmed "$mode" refusals)" "$(pmed "$mode" writes_per_row)" "$(pmed "$mode" wal_bytes_per_row)" \
				"$(pmed "$mode" commits_per_row)"
		done
		if grep -q '^RESULT refusals=rate' "$raw"; then
			echo "   every 429 of the rate wiring against the accepted call it collided with (the oldest in the partner's"
			echo "   window): gap of their lease starts (server) and of their calls (partner), and lag = call - lease start:"
			grep '^RESULT refusals=rate' "$raw" | sed 's/^RESULT refusals=/     /'
		fi
		echo "   (writes: outbox + pauses + rates row writes per delivered row, the enqueue not counted; wal_B: WAL"
		echo "    bytes per delivered row; commits: COMMIT records in WAL per delivered row; foreign: CPUs used by others;"
		echo "    most: the most lease starts (every call is one) in any window of $P_PER_MS ms)"
	fi
	echo
	if has_part window; then
		echo "wake p50 <= 1 ms (all topics):              $(verdict "$(r window=all wake_p50_ms)" '<=' 1) ($(r window=all wake_p50_ms) ms)"
		echo "wake p99 <= 5 ms (all topics):              $(verdict "$(r window=all wake_p99_ms)" '<=' 5) ($(r window=all wake_p99_ms) ms)"
		for s in $TOPICS; do
			t=${s%%:*}
			printf '%-43s %s (%s)\n' "starts >= 99% of the rate ($t):" "$(verdict "$(r "window=$t" ratio)" '>=' 0.99)" "$(r "window=$t" ratio)"
			printf '%-43s %s (%s <= %s)\n' "G10, never over the rate ($t):" "$(verdict "$(r "window=$t" most_in_window)" '<=' "$(r "window=$t" max_starts)")" \
				"$(r "window=$t" most_in_window)" "$(r "window=$t" max_starts)"
		done
	fi
	if has_part idle; then
		echo "idle waiters + worker: 0 ticks:             $(verdict "$(( $(r idle=waiters ticks) + $(r idle=worker ticks) ))" '<=' 0) ($(r idle=waiters ticks) + $(r idle=worker ticks))"
	fi
	if has_part partner && [ "$(pmed rate x_ideal)" != - ]; then
		echo "rate: makespan <= 1.02 x ideal (median):    $(verdict "$(pmed rate x_ideal)" '<=' 1.02) ($(pmed rate x_ideal))"
		echo "rate: 0 refusals (every run):               $(verdict "$(pmax rate refusals)" '<=' 0) (most $(pmax rate refusals))"
	fi
} | tee "$results/table.txt"

fi	# RATES_PLOT_ONLY

# --- the plots ------------------------------------------------------------------
# the median run (by makespan) of each partner wiring: the plot's data
if has_part partner; then
	for mode in $P_MODES; do
		rep=$(awk -v m="partner=$mode" '$2 == m { ms = ""; rp = ""; for (i = 2; i <= NF; i++) { if (index($i, "makespan_ms=") == 1) ms = substr($i, 13); if (index($i, "rep=") == 1) rp = substr($i, 5) } print ms, rp }' "$raw" |
			sort -g | awk '{ r[NR] = $2 } END { print r[int((NR + 1) / 2)] }')
		# one point per 10 ms (the last of it)
		awk -F, 'NR > 1 { b = int($1 / 10); if (NR > 2 && b != pb) print line; pb = b
				if ($2 == 200) a++; else f++; line = sprintf("%.1f,%d,%d", $1, a, f) }
			END { print line }' \
			"$results/partner_${mode}_$rep.csv" >"$data/partner_$mode.csv"
	done
	refused=$(for mode in $P_MODES; do tail -1 "$data/partner_$mode.csv"; done | awk -F, '{ s += $3 } END { print s + 0 }')
	for term in png svg; do
		if [ $term = png ]; then st="set terminal pngcairo size 1000,760 font 'DejaVu Sans,10'"
		else st="set terminal svg size 1000,760 font 'DejaVu Sans,10' background '#ffffff'"; fi
		gnuplot <<GP
$st
set output '$OUT/partner.$term'
set datafile separator ','
set termoption noenhanced
set multiplot layout 2,1 title "A partner refusing above $P_LIMIT calls per $P_PER_MS ms: $P_ROWS rows, $P_THREADS dispatchers (the median run of each wiring)"
set key top left
set grid
set xrange [0:*]
set ylabel 'accepted calls'
set title 'accepted (200)' font ',10'
plot $(i=0; for mode in $P_MODES; do
	i=$((i + 1))
	c=$(case $mode in park) echo '#c0392b' ;; pause) echo '#d68910' ;; *) echo '#1d6fb8' ;; esac)
	[ $i -gt 1 ] && printf ', '
	printf "'%s' using (\$1/1000):2 with lines lw 2 lc rgb '%s' title '%s'" "$data/partner_$mode.csv" "$c" "$mode"
done), (x < $((P_ROWS * P_PER_MS / P_LIMIT / 1000)) ? x * $P_LIMIT * 1000 / $P_PER_MS : 1/0) with lines lc rgb '#888888' dt 3 title 'rows / rate'
set xlabel 'time since start (s)'
set ylabel 'refusals'
$(if [ "$refused" -gt 0 ]; then echo "set title 'refused (429), cumulative, log scale' font ',10'"; echo "set logscale y"
  else echo "set title 'refused (429): none' font ',10'"; echo "set yrange [0:1]"; fi)
plot $(i=0; for mode in $P_MODES; do
	i=$((i + 1))
	c=$(case $mode in park) echo '#c0392b' ;; pause) echo '#d68910' ;; *) echo '#1d6fb8' ;; esac)
	[ $i -gt 1 ] && printf ', '
	if [ "$refused" -gt 0 ]; then
		printf "'%s' using (\$1/1000):(\$3 > 0 ? \$3 : 1/0) with lines lw 2 lc rgb '%s' title '%s'" "$data/partner_$mode.csv" "$c" "$mode"
	else
		printf "'%s' using (\$1/1000):3 with lines lw 2 lc rgb '%s' title '%s'" "$data/partner_$mode.csv" "$c" "$mode"
	fi
done)
unset multiplot
GP
	done
	log "plot: $OUT/partner.png and .svg"
fi
if has_part window; then
	for term in png svg; do
		if [ $term = png ]; then st="set terminal pngcairo size 900,520 font 'DejaVu Sans,10'"
		else st="set terminal svg size 900,520 font 'DejaVu Sans,10' background '#ffffff'"; fi
		gnuplot <<GP
$st
set output '$OUT/wake_cdf.$term'
set termoption noenhanced
set key bottom right
set title "Claims held back by the rate: return after the moment the window admits them (one run of ${SECS} s)"
set xlabel 'lease start - (start leaving the window + per), ms'
set ylabel 'fraction of starts'
set logscale x
set xrange [0.05:*]
set yrange [0:1]
set grid
set arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 2 lc rgb '#444444'
set arrow 2 from 5, graph 0 to 5, graph 1 nohead dt 2 lc rgb '#444444'
plot $(i=0; for s in $TOPICS; do
	t=${s%%:*}
	i=$((i + 1))
	[ $i -gt 1 ] && printf ', '
	printf "'%s' using (\$1 < 0.05 ? 0.05 : \$1):2 with lines lw 2 title '%s'" "$data/wake_$t.dat" "$t"
done)
GP
	done
	log "plot: $OUT/wake_cdf.png and .svg"
fi
