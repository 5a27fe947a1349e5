# shellcheck shell=bash
# bench/throughput/setup.sh: what run.sh and count.sh set up alike.
# Sourced after bench/lib.sh, with here (this directory) and PG_CONFIG
# set by the script.
#
# throughput_setup NAME [postgresql.conf line...]: a directory of the
# run's own, $tmp (removed on exit, with the cluster), the client built
# into it ($tmp/throughput), a throwaway cluster (bench_start with the
# given lines) and the hand-written queue in it (jobs.sql).

tmp=""

# shellcheck disable=SC2154
throughput_setup() {
	local name=$1
	shift
	tmp=$(mktemp -d "/tmp/aion_wake_$name.XXXXXX")
	chmod 755 "$tmp"
	trap 'rm -rf "$tmp"; bench_cleanup' EXIT
	gcc -O2 -Wall -Wextra -Werror -pthread -I"$($PG_CONFIG --includedir)" \
		"$here/throughput.c" -L"$($PG_CONFIG --libdir)" -lpq -o "$tmp/throughput"
	bench_start "$@"
	bench_sql "$(cat "$here/jobs.sql")" >/dev/null
}
