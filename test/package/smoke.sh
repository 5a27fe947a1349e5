#!/usr/bin/env bash
#
# Smoke test of an installed aion_wake package (postgresql-NN-aion-wake):
# what a user does first after `apt install`.  test/package/run.sh runs it
# in a clean chroot where the package was installed with dpkg -i, and it is
# the package's autopkgtest (debian/tests/control).  Run as root on the
# machine where the package is installed:
#
#   test/package/smoke.sh [PGMAJOR [EXPECTED_EXTVERSION]]
#
# PGMAJOR defaults to the only installed postgresql-NN-aion-wake, the
# expected version to default_version of the installed aion_wake.control.
# It starts a throwaway cluster (its own directory, Unix socket only) as
# postgres with shared_preload_libraries = 'aion_wake', then:
#   * CREATE EXTENSION; extversion is the expected version;
#   * every version the package ships updates to the default one;
#   * a pulse round trip: enqueue a row, claim it, park it with a one-hour
#     back-off, pulse(), and poll (bounded) until the worker has re-offered
#     it (visible_after <= clock_timestamp(), parked_at IS NULL); claim it
#     again with wait and complete it.
# Prints "smoke: ok ..." or "smoke: FAILED ..." and exits non-zero on failure.
#
set -euo pipefail

fail() {
	echo "smoke: FAILED: $*"
	exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root (the cluster runs as postgres)"

pgmajor=${1:-}
if [ -z "$pgmajor" ]; then
	pkgs=$(dpkg-query -W -f '${db:Status-Status} ${Package}\n' 'postgresql-*-aion-wake' 2>/dev/null |
		sed -n 's/^installed postgresql-\([0-9]*\)-aion-wake$/\1/p')
	[ "$(echo "$pkgs" | wc -w)" = 1 ] ||
		fail "name the PostgreSQL major: installed aion_wake packages for '${pkgs//$'\n'/ }'"
	pgmajor=$pkgs
fi
bindir=/usr/lib/postgresql/$pgmajor/bin
sharedir=/usr/share/postgresql/$pgmajor/extension
[ -x "$bindir/postgres" ] || fail "no PostgreSQL $pgmajor in $bindir"
[ -f "$sharedir/aion_wake.control" ] || fail "no aion_wake.control in $sharedir"
expected=${2:-$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" "$sharedir/aion_wake.control")}

port=${AW_SMOKE_PORT:-54329}
dir=$(mktemp -d /tmp/aw-smoke.XXXXXX)
chown postgres: "$dir"
started=

cleanup() {
	if [ -n "$started" ]; then
		runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 ||
			runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

runuser -u postgres -- "$bindir/initdb" -D "$dir/data" -A trust -E UTF8 --locale=C.UTF-8 \
	>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; fail "initdb"; }
cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'aion_wake'
aion_wake.database = 'postgres'
EOF
started=1
runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null ||
	{ cat "$dir/server.log"; fail "the server did not start with shared_preload_libraries = 'aion_wake'"; }

# psql as postgres on the throwaway cluster; one value per row, unaligned
q() {
	runuser -u postgres -- "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 \
		-h "$dir" -p "$port" -d postgres "$@"
}

# poll SQL until it returns t, at most $2 seconds
poll() {
	local sql=$1 limit=$2 i
	for ((i = 0; i < limit * 20; i++)); do
		[ "$(q -c "$sql")" = t ] && return 0
		sleep 0.05
	done
	return 1
}

q -c 'CREATE EXTENSION aion_wake' || fail "CREATE EXTENSION aion_wake"
got=$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'")
[ "$got" = "$expected" ] || fail "CREATE EXTENSION installed version $got, expected $expected"

# every other version the package ships can be updated to the default one
updates=
n=0
for v in $(q -c "SELECT version FROM pg_available_extension_versions
	WHERE name = 'aion_wake' AND version <> '$expected' ORDER BY version"); do
	db=aw_update_$n
	q -c "CREATE DATABASE $db" >/dev/null
	q -d "$db" -c "CREATE EXTENSION aion_wake VERSION '$v'" ||
		fail "CREATE EXTENSION aion_wake VERSION '$v'"
	q -d "$db" -c "ALTER EXTENSION aion_wake UPDATE" || fail "ALTER EXTENSION aion_wake UPDATE from $v"
	got=$(q -d "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'")
	[ "$got" = "$expected" ] || fail "update from $v ended at $got, expected $expected"
	q -c "DROP DATABASE $db" >/dev/null
	updates="$updates${updates:+, }$v"
	n=$((n + 1))
done

poll "SELECT worker_pid IS NOT NULL FROM aion_wake.status" 30 ||
	{ tail -20 "$dir/server.log"; fail "no aion_wake worker in database postgres after 30 s"; }

q -c "SELECT aion_wake.enqueue('smoke-1', '{\"n\": 1}', 'smoke')" >/dev/null
token=$(q -c "SELECT lease_token FROM aion_wake.claim('smoke', 1, lease => '30 s')")
[ -n "$token" ] || fail "claim returned no row"
[ "$(q -c "SELECT aion_wake.park('smoke-1', '1 hour', $token)")" = t ] || fail "park returned false"
[ "$(q -c "SELECT visible_after > clock_timestamp() + interval '59 min' AND parked_at IS NOT NULL
	FROM aion_wake.outbox WHERE dispatch_key = 'smoke-1'")" = t ] || fail "park did not fence the row"
[ "$(q -c "SELECT state FROM aion_wake.parked WHERE dispatch_key = 'smoke-1'")" = confirmed ] ||
	fail "the committed park is not a confirmed entry of aion_wake.parked"

# the pulse is delivered when this statement commits, just after the clock read
pulsed_at=$(q -c "SELECT aion_wake.pulse('smoke', 1), clock_timestamp()" | cut -d '|' -f 2)
poll "SELECT visible_after <= clock_timestamp() AND parked_at IS NULL
	FROM aion_wake.outbox WHERE dispatch_key = 'smoke-1'" 10 ||
	{ q -c "TABLE aion_wake.status" -c "TABLE aion_wake.outbox"; tail -20 "$dir/server.log";
	  fail "the parked row was not re-offered within 10 s of pulse()"; }
ms=$(q -c "SELECT round(extract(epoch FROM visible_after - '$pulsed_at'::timestamptz) * 1000, 1)
	FROM aion_wake.outbox WHERE dispatch_key = 'smoke-1'")

token=$(q -c "SELECT lease_token FROM aion_wake.claim('smoke', 1, lease => '30 s', wait => '5 s')")
[ -n "$token" ] || fail "the re-offered row could not be claimed"
[ "$(q -c "SELECT aion_wake.complete('smoke-1', $token)")" = t ] || fail "complete returned false"
[ "$(q -c "SELECT count(*) FROM aion_wake.outbox")" = 0 ] || fail "the outbox is not empty after complete"
reoffered=$(q -c "SELECT rows_reoffered FROM aion_wake.status")
[ "$reoffered" -ge 1 ] || fail "status.rows_reoffered is $reoffered"

echo "smoke: ok PostgreSQL $pgmajor, aion_wake $expected: CREATE EXTENSION," \
	"${updates:+ALTER EXTENSION UPDATE from $updates, }the parked row re-offered ${ms} ms after pulse(), claimed and completed"
