#!/usr/bin/env bash
#
# bench/throughput/count.sh: instructions per settled row, aion_wake
# against the hand-written queue, counted by callgrind.
#
# Why: on a small shared machine the burn-down's jobs/s move by up to 0.2
# of a ratio between runs of the same code, so a change of 10 % in what a
# claim costs does not show in them.  The instructions a backend executes
# for the same work from the same table are the same from run to run.
#
# How: a throwaway cluster (the burn-down's settings, locale C, but no
# autovacuum, whose visits would land in one run and not in another) runs
# under valgrind --tool=callgrind, each process counted on its own.  For each
# mode and each of two counts of rows, `throughput MODE count JOBS OPS
# BATCH` enqueues JOBS jobs, checkpoints, and one connection settles OPS
# rows as a burn-down worker does (throughput.c).  The instructions of that
# backend alone, at the larger count less the smaller, divided by the
# difference in rows, are what one more row costs: the connection, the
# first plans and the load cancel out.  Only the server's instructions
# count, not waits: a commit's WAL flush is the same in every mode of a
# kind (run.sh's WAL flushes/row).
#
# Usage (as root, or as a user that can run postgres; valgrind installed):
#   bench/throughput/count.sh
# Settings (environment): COUNT_MODES ("sql single sqlhandoff handoff
# sqlbatch batch"), COUNT_JOBS (5000), COUNT_OPS ("1000 3000"),
# COUNT_BATCH (100, the batch modes' B), COUNT_KEEP (a directory: keep
# each run's callgrind file there as MODE.OPS, for callgrind_annotate),
# PG_CONFIG (pg_config).  Takes about 5 minutes with the defaults.
#
# Prints one line per mode: instructions per row, and the ratio of the
# hand-written mode of its kind to it (1.00: the same cost; above 1:
# aion_wake costs less).
#
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODES=${COUNT_MODES:-sql single sqlhandoff handoff sqlbatch batch}
JOBS=${COUNT_JOBS:-5000}
read -r OPS1 OPS2 <<<"${COUNT_OPS:-1000 3000}"
BATCH=${COUNT_BATCH:-100}
PG_CONFIG=${PG_CONFIG:-pg_config}
PG_BINDIR=$($PG_CONFIG --bindir)
BENCH_PORT=${COUNT_PORT:-5542}

# shellcheck source=../lib.sh
. "$here/../lib.sh"
# shellcheck source=setup.sh
. "$here/setup.sh"

command -v valgrind >/dev/null || { echo "count.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
if [ "$OPS2" -le "$OPS1" ] || [ "$OPS2" -gt "$JOBS" ]; then
	echo "count.sh: COUNT_OPS needs two counts, rising, at most COUNT_JOBS" >&2
	exit 2
fi

throughput_setup count "max_wal_size = 8GB" "autovacuum = off"
bench_as_pg "$PG_BINDIR/pg_ctl" -D "$BENCH_DATA" -m fast -w stop >/dev/null
mkdir "$BENCH_TMP/cg"
chown postgres "$BENCH_TMP/cg" 2>/dev/null || true
bench_as_pg valgrind --tool=callgrind --callgrind-out-file="$BENCH_TMP/cg/%p" \
	"$PG_BINDIR/postgres" -D "$BENCH_DATA" >"$BENCH_TMP/valgrind.log" 2>&1 &
for ((i = 0; i < 600; i++)); do
	bench_sql "SELECT 1" >/dev/null 2>&1 && break
	sleep 0.2
done
bench_sql "SELECT 1" >/dev/null
# the restarted worker rebuilds the parked set when first woken: not in
# the middle of a counted run
bench_wake_worker "$BENCH_TMP/valgrind.log"

# "rows settled, instructions" of one count run's worker backend, once
# it has exited (a batch settles whole batches: OPS rounded up to B)
count() {
	local line pid rows
	line=$(bench_as_pg env PGHOST="$BENCH_TMP" PGPORT="$BENCH_PORT" PGDATABASE=postgres \
		PGUSER=postgres "$tmp/throughput" "$1" count "$JOBS" "$2" "$BATCH" | grep '^RESULT')
	pid=${line##*pid=}
	rows=${line##*settled=}
	rows=${rows%% *}
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	if [ -n "${COUNT_KEEP:-}" ]; then cp "$BENCH_TMP/cg/$pid" "$COUNT_KEEP/$1.$2"; fi
	echo "$rows $(awk '/^summary:/ { print $2; exit }' "$BENCH_TMP/cg/$pid")"
}

declare -A per_row
for m in $MODES; do
	read -r ra a <<<"$(count "$m" "$OPS1")"
	read -r rb b <<<"$(count "$m" "$OPS2")"
	per_row[$m]=$(( (b - a) / (rb - ra) ))
	bench_log "$m: $a instructions for $ra rows, $b for $rb"
done

kind() {
	case $1 in
		single) echo sql ;;
		handoff) echo sqlhandoff ;;
		batch) echo sqlbatch ;;
		*) echo - ;;
	esac
}
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $("$PG_BINDIR/postgres" --version | sed 's/^postgres //'), $JOBS jobs, rows $OPS1 → $OPS2, B = $BATCH for the batch modes"
echo
echo "| mode | instructions/row | hand-written of its kind / mode |"
echo "|---|---:|---:|"
for m in $MODES; do
	k=$(kind "$m")
	r=-
	if [ "$k" != - ] && [ -n "${per_row[$k]:-}" ]; then
		r=$(bench_div "${per_row[$k]}" "${per_row[$m]}")
	fi
	echo "| $m | ${per_row[$m]} | $r |"
done

# stop the server here, and wait for valgrind to write the postmaster's
# file, before the cleanup removes the directory it writes to
pm=$(head -1 "$BENCH_DATA/postmaster.pid")
bench_as_pg "$PG_BINDIR/pg_ctl" -D "$BENCH_DATA" -m fast -w stop >/dev/null
while kill -0 "$pm" 2>/dev/null; do sleep 0.1; done
