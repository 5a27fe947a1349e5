# bench/lib.sh -- shared helpers for the aion_wake benchmarks.
#
# Source it from a benchmark script.  It starts a throwaway cluster in a
# mktemp directory (Unix socket only, durability defaults kept: fsync and
# synchronous_commit stay on), with aion_wake preloaded and serving the
# database "postgres", stops it and removes the directory on exit, and runs
# pgbench against it, extracting tps and mean latency.
#
# Works when run as root (server, psql and pgbench then run as the postgres
# OS user through runuser) and when run as postgres.
#
# Environment:
#   BENCH_PORT              port of the throwaway cluster (default 5540)
#   BENCH_SECONDS           length of each pgbench run (default 10)
#   BENCH_MAX_PARKED_ROWS   aion_wake.max_parked_rows (default: the GUC's
#                           default, 65536; scripts may override)
#   BENCH_MODE              pgbench query mode: simple, extended or prepared
#                           (default prepared: what drivers with statement
#                           caching do, and the mode in which a function's own
#                           cost is least hidden by parse/plan time)
#   BENCH_NICE              nice level of the cluster, psql and pgbench
#                           (default 0)
#   PG_BINDIR               PostgreSQL binaries (default: pg_config --bindir)

set -euo pipefail

BENCH_PORT=${BENCH_PORT:-5540}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_MODE=${BENCH_MODE:-prepared}
PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}
BENCH_DIR_SQL=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/sql

BENCH_TMP=""
BENCH_DATA=""

# Run a command as the postgres OS user (directly if we already are not
# root), at nice level BENCH_NICE (default 0; negative needs root).
bench_as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		nice -n "${BENCH_NICE:-0}" runuser -u postgres -- "$@"
	else
		nice -n "${BENCH_NICE:-0}" "$@"
	fi
}

bench_log() { printf '%s  %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Stop the cluster (if running) and remove its directory.
bench_stop() {
	if [ -n "$BENCH_DATA" ] && [ -f "$BENCH_DATA/postmaster.pid" ]; then
		bench_as_pg "$PG_BINDIR/pg_ctl" -D "$BENCH_DATA" -m fast -w stop >/dev/null 2>&1 || true
	fi
	if [ -n "$BENCH_TMP" ] && [ -d "$BENCH_TMP" ]; then
		rm -rf "$BENCH_TMP"
	fi
	BENCH_TMP=""
	BENCH_DATA=""
}

bench_cleanup() {
	local rc=$?
	bench_stop
	exit $rc
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# bench_start [extra postgresql.conf line ...]
# Start a fresh cluster; a running one is stopped and removed first.
bench_start() {
	bench_stop
	BENCH_TMP=$(mktemp -d /tmp/aion_wake_bench.XXXXXX)
	chmod 700 "$BENCH_TMP"
	if [ "$(id -u)" -eq 0 ]; then chown postgres "$BENCH_TMP"; fi
	BENCH_DATA=$BENCH_TMP/data
	bench_as_pg "$PG_BINDIR/initdb" -D "$BENCH_DATA" -U postgres -A trust \
		--no-sync -E UTF8 --locale=C >"$BENCH_TMP/initdb.log" 2>&1 \
		|| { cat "$BENCH_TMP/initdb.log" >&2; return 1; }
	{
		echo "# aion_wake benchmark cluster"
		echo "port = $BENCH_PORT"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$BENCH_TMP'"
		echo "shared_buffers = 256MB"
		echo "max_connections = 20"
		echo "shared_preload_libraries = 'aion_wake'"
		echo "aion_wake.database = 'postgres'"
		if [ -n "${BENCH_MAX_PARKED_ROWS:-}" ]; then
			echo "aion_wake.max_parked_rows = $BENCH_MAX_PARKED_ROWS"
		fi
		echo "log_min_messages = warning"
		echo "log_checkpoints = on"
		echo "log_autovacuum_min_duration = -1"
		local l
		for l in "$@"; do echo "$l"; done
	} | bench_as_pg tee -a "$BENCH_DATA/postgresql.conf" >/dev/null
	bench_as_pg "$PG_BINDIR/pg_ctl" -D "$BENCH_DATA" -l "$BENCH_TMP/server.log" \
		-w -t 60 start >/dev/null \
		|| { cat "$BENCH_TMP/server.log" >&2; return 1; }
	bench_sql "CREATE EXTENSION aion_wake" >/dev/null
	# The worker rebuilds the set from the table the first time it wakes
	# with the extension installed, and it sleeps until something wakes it.
	# Wake it now, while the table is empty: otherwise the rebuild lands in
	# the middle of a measured run (see README, "Findings").
	bench_wake_worker "$BENCH_TMP/server.log"
	bench_log "cluster up in $BENCH_TMP (port $BENCH_PORT, max_parked_rows $(bench_sql "SHOW aion_wake.max_parked_rows"))"
}

# bench_wake_worker LOG: wake the aion_wake worker and wait (30 s at
# most) until LOG, the server's, says it rebuilt its set.
bench_wake_worker() {
	local i
	bench_sql "SELECT aion_wake.pulse('bench_start', 1)" >/dev/null
	for ((i = 0; i < 3000; i++)); do
		grep -q 'rebuilt the parked set' "$1" && return 0
		sleep 0.01
	done
	bench_log "warning: the aion_wake worker has not rebuilt its set yet"
}

# bench_sql SQL: run SQL in database postgres, print unaligned tuples.
bench_sql() {
	bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres \
		-X -q -A -t -v ON_ERROR_STOP=1 -c "$1"
}

# bench_pgbench LABEL CLIENTS SCRIPT... [-- extra pgbench args ...]
# One pgbench run of BENCH_SECONDS with -c CLIENTS -j CLIENTS and -r (per
# statement latencies).  With one script, sets BENCH_TPS and BENCH_LAT (mean
# latency, ms).  With several (each at weight 1, chosen at random per
# transaction, so they run side by side under the same conditions), the
# per-script figures are read with bench_script_lat / bench_script_tps.
# The raw output stays in $BENCH_OUT for bench_stmt_lat.
BENCH_TPS=0
BENCH_LAT=0
BENCH_OUT=""
bench_pgbench() {
	local label=$1 clients=$2
	shift 2
	local args=() s
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=(-f "$1"); shift; done
	[ $# -gt 0 ] && shift
	BENCH_OUT=$BENCH_TMP/pgbench.out
	local srv0 cli0 srv1 cli1 ntx me=$BASHPID nb
	nb=$(bench_backends)
	srv0=$(bench_children_ticks "$(head -1 "$BENCH_DATA/postmaster.pid")")
	cli0=$(bench_children_ticks "$me")
	if ! bench_as_pg "$PG_BINDIR/pgbench" -n -r -h "$BENCH_TMP" -p "$BENCH_PORT" 		-M "$BENCH_MODE" -c "$clients" -j "$clients" -T "$BENCH_SECONDS" 		"${args[@]}" "$@" postgres >"$BENCH_OUT" 2>&1; then
		cat "$BENCH_OUT" >&2
		return 1
	fi
	bench_wait_backends "$nb"
	srv1=$(bench_children_ticks "$(head -1 "$BENCH_DATA/postmaster.pid")")
	cli1=$(bench_children_ticks "$me")
	ntx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$BENCH_OUT")
	BENCH_SRV_CPU=$(awk -v a="$srv0" -v b="$srv1" -v n="$ntx" -v hz="$BENCH_HZ" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')
	BENCH_CLI_CPU=$(awk -v a="$cli0" -v b="$cli1" -v n="$ntx" -v hz="$BENCH_HZ" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }')
	BENCH_TPS=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$BENCH_OUT" | tail -1)
	BENCH_LAT=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$BENCH_OUT")
	local failed
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$BENCH_OUT")
	if [ -z "$BENCH_TPS" ] || [ -z "$BENCH_LAT" ]; then
		cat "$BENCH_OUT" >&2
		echo "could not parse pgbench output" >&2
		return 1
	fi
	if [ -n "$failed" ] && [ "$failed" != 0 ]; then
		cat "$BENCH_OUT" >&2
		echo "pgbench reported $failed failed transactions" >&2
		return 1
	fi
	if grep -q 'WARNING' "$BENCH_OUT"; then
		grep 'WARNING' "$BENCH_OUT" | sort | uniq -c | head -5 >&2
	fi
	if [ ${#args[@]} -eq 2 ]; then
		bench_log "$(printf '%-40s c=%d  tps %9.1f  lat %7.3f ms  cpu/tx: server %5.1f us, pgbench %5.1f us' "$label" "$clients" "$BENCH_TPS" "$BENCH_LAT" "$BENCH_SRV_CPU" "$BENCH_CLI_CPU")"
	else
		local n=$(( ${#args[@]} / 2 )) i msg="$label c=$clients same run:"
		for ((i = 1; i <= n; i++)); do
			msg+=$(printf '  #%d lat %.3f ms' "$i" "$(bench_script_lat "$i")")
		done
		bench_log "$msg$(printf '  cpu/tx: server %.1f us, pgbench %.1f us' "$BENCH_SRV_CPU" "$BENCH_CLI_CPU")"
	fi
}

# CPU accounting.  Backends are children of the postmaster and pgbench is a
# child of this shell: once they have exited and been reaped, their CPU time
# is in the parent's cutime + cstime (/proc/PID/stat fields 16 and 17).  So
# CPU per transaction is measured, not inferred from latency, and is little
# disturbed by other load on the machine.
BENCH_HZ=$(getconf CLK_TCK)
BENCH_SRV_CPU=0
BENCH_CLI_CPU=0
bench_children_ticks() {
	# the command name (field 2) may hold spaces: cut after the last ')'
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $14 + $15 }'
}
# Client backends alive now (the worker's own loopback connection is one).
bench_backends() {
	pgrep -c -P "$(head -1 "$BENCH_DATA/postmaster.pid")" \
		-f '^postgres: postgres postgres \[local\]' || true
}
# bench_wait_backends N: wait (bounded) until no more than N client backends
# are left, i.e. the postmaster has reaped those of the last run.
bench_wait_backends() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(bench_backends)" -le "$1" ] && return 0
		sleep 0.01
	done
	bench_log "warning: backends of the last run still alive; its server CPU figure is low"
}

# bench_script_lat N / bench_script_tps N: mean latency (ms) and tps of
# script N of the last multi-script run.
bench_script_lat() {
	awk -v n="$1" '/^SQL script [0-9]+:/ { cur = $3 + 0 }
		cur == n && /- latency average = / { print $5; exit }' "$BENCH_OUT"
}
bench_script_tps() {
	awk -v n="$1" '/^SQL script [0-9]+:/ { cur = $3 + 0 }
		cur == n && /tps = / { sub(/.*tps = /, ""); sub(/\).*/, ""); print; exit }' "$BENCH_OUT"
}

# bench_stmt_lat PATTERN: mean latency (ms) of the first statement of the
# last run whose text contains PATTERN (from pgbench -r).
bench_stmt_lat() {
	awk -v p="$1" 'index($0, p) && $1 ~ /^[0-9.]+$/ { print $1; exit }' "$BENCH_OUT"
}

# bench_div A B: A / B with 3 decimals.
bench_div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.3f", a / b }'; }

# bench_verdict VALUE OP TARGET (OP is <= or >=): prints PASS or MISS.
bench_verdict() {
	awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
		ok = (op == "<=") ? (v <= t) : (v >= t);
		print ok ? "PASS" : "MISS" }'
}

# bench_busy: CPU busy (%) of the whole machine over 2 s, other load
# included.  Benchmarks print it before they start: figures taken while
# something else keeps the CPUs busy are not comparable.
bench_busy() {
	local a b
	a=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
	sleep 2
	b=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
		busy = y[1] - x[1]; idle = y[2] - x[2];
		printf "%.0f", 100 * busy / (busy + idle) }'
}
BENCH_BUSY_BEFORE=$(bench_busy)
bench_log "machine busy before the benchmark: ${BENCH_BUSY_BEFORE}% of $(nproc) CPUs (load average $(cut -d' ' -f1-3 /proc/loadavg))"

# Summary table, printed on stdout at the end of a script.
BENCH_SUMMARY=()
bench_summary_add() { BENCH_SUMMARY+=("$(printf "$@")"); }
bench_summary_print() {
	local title=$1 line
	echo
	echo "== $title =="
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')  nproc: $(nproc)  $("$PG_BINDIR/postgres" --version)"
	echo "pgbench -M $BENCH_MODE, ${BENCH_SECONDS}s per run; machine busy before start: ${BENCH_BUSY_BEFORE}%, load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "aion_wake.so: $(md5sum "$(pg_config --pkglibdir)/aion_wake.so" | cut -c1-12) ($(date -u -r "$(pg_config --pkglibdir)/aion_wake.so" '+%Y-%m-%d %H:%M UTC')), tree at $(git -c safe.directory='*' -C "$BENCH_DIR_SQL" rev-parse --short HEAD 2>/dev/null || echo '?')"
	for line in "${BENCH_SUMMARY[@]}"; do echo "$line"; done
}

# bench_compare LABEL CLIENTS BASE_SCRIPT CAND_SCRIPT [-- pgbench args ...]
# Three runs: the baseline alone, the candidate alone, then both side by
# side in one run (weight 1 each).  If BENCH_BEFORE_RUN names a function, it
# is called before each run (to reset the table).  Sets
#   CMP_B_TPS CMP_B_LAT CMP_B_SRV   baseline alone (SRV: server CPU us/tx)
#   CMP_C_TPS CMP_C_LAT CMP_C_SRV   candidate alone
#   CMP_MB_LAT CMP_MC_LAT mean latencies in the side-by-side run
#   CMP_R_ALONE = CMP_C_LAT / CMP_B_LAT, CMP_R_SAME = CMP_MC_LAT / CMP_MB_LAT
# If CMP_EXTRA names a third script, it joins the side-by-side run as a
# reference and its mean latency is CMP_MX_LAT.
bench_compare() {
	local label=$1 clients=$2 base=$3 cand=$4
	shift 4
	[ $# -gt 0 ] && [ "$1" = "--" ] && shift
	if [ -n "${BENCH_BEFORE_RUN:-}" ]; then "$BENCH_BEFORE_RUN"; fi
	bench_pgbench "$label: $(basename "$base") alone" "$clients" "$base" -- "$@"
	CMP_B_TPS=$BENCH_TPS CMP_B_LAT=$BENCH_LAT CMP_B_SRV=$BENCH_SRV_CPU
	if [ -n "${BENCH_BEFORE_RUN:-}" ]; then "$BENCH_BEFORE_RUN"; fi
	bench_pgbench "$label: $(basename "$cand") alone" "$clients" "$cand" -- "$@"
	CMP_C_TPS=$BENCH_TPS CMP_C_LAT=$BENCH_LAT CMP_C_SRV=$BENCH_SRV_CPU
	if [ -n "${BENCH_BEFORE_RUN:-}" ]; then "$BENCH_BEFORE_RUN"; fi
	bench_pgbench "$label: both" "$clients" "$base" "$cand" ${CMP_EXTRA:+"$CMP_EXTRA"} -- "$@"
	CMP_MB_LAT=$(bench_script_lat 1) CMP_MC_LAT=$(bench_script_lat 2)
	CMP_MX_LAT=$(bench_script_lat 3)
	CMP_R_ALONE=$(bench_div "$CMP_C_LAT" "$CMP_B_LAT")
	CMP_R_SAME=$(bench_div "$CMP_MC_LAT" "$CMP_MB_LAT")
}

# Load bench/sql/inserver.sql (per-call cost loops) into the cluster.
bench_load_inserver() {
	bench_as_pg "$PG_BINDIR/psql" -h "$BENCH_TMP" -p "$BENCH_PORT" -d postgres \
		-X -q -v ON_ERROR_STOP=1 -f "$BENCH_DIR_SQL/inserver.sql" >/dev/null
}
# bench_min_of N SQL: run SQL (returning one number) N times, print the least.
bench_min_of() {
	local n=$1 sql=$2 i v best=""
	for ((i = 0; i < n; i++)); do
		v=$(bench_sql "$sql")
		best=$(awk -v a="$best" -v b="$v" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }')
	done
	printf '%.2f' "$best"
}

# The machine's other load.  The machine is shared: what other processes
# use while a benchmark runs is measured, not guessed, so that a figure can
# be read with it (and a run repeated when it was high).
# bench_cpu_jiffies: CPU ticks of the whole machine, "BUSY TOTAL" (busy:
# user nice system irq softirq steal).
bench_cpu_jiffies() { awk '/^cpu / { b = $2+$3+$4+$7+$8+$9; print b, b + $5 + $6 }' /proc/stat; }
# bench_ours_ticks: CPU ticks of our own processes: the postmaster and its
# children (backends, the worker; those that ended are in the postmaster's
# cutime), and this shell with everything it ran and waited for (psql,
# pgbench, the benchmark's programs).  Fields 14-17 of /proc/PID/stat.
bench_ours_ticks() {
	local pm p pids
	pm=$(head -1 "$BENCH_DATA/postmaster.pid")
	pids="$pm $(pgrep -P "$pm" | tr '\n' ' ') $BASHPID"
	for p in $pids; do
		sed 's/.*) //' "/proc/$p/stat" 2>/dev/null || true
	done | awk '{ s += $12 + $13 + $14 + $15 } END { print s + 0 }'
}
bench_load_mark() { echo "$(bench_cpu_jiffies) $(bench_ours_ticks)"; }
# bench_load_since "MARK": "MACHINE_BUSY_PCT FOREIGN_CPUS" since MARK: how
# busy the machine was, and how many CPUs (of nproc) processes other than
# ours used.
bench_load_since() {
	local now
	now=$(bench_load_mark)
	awk -v a="$1" -v b="$now" -v n="$(nproc)" 'BEGIN { split(a, x, " "); split(b, y, " ");
		tot = y[2] - x[2]; busy = y[1] - x[1]; ours = y[3] - x[3];
		if (tot <= 0) { print "0 0.00"; exit }
		f = (busy - ours) / tot * n; if (f < 0) f = 0;
		printf "%.0f %.2f\n", 100 * busy / tot, f }'
}
# bench_wait_quiet MAX_S CPUS: wait (at most MAX_S seconds) until other
# processes use less than CPUS CPUs over one second.  Returns 1 if they
# never did.
bench_wait_quiet() {
	local i m f=?
	for ((i = 0; i < $1; i++)); do
		m=$(bench_load_mark)
		sleep 1
		f=$(bench_load_since "$m" | cut -d' ' -f2)
		awk -v f="$f" -v q="$2" 'BEGIN { exit !(f < q) }' && return 0
	done
	bench_log "machine still busy after $1 s (others use $f CPUs): measuring anyway"
	return 1
}
