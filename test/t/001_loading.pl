# Copyright (c) 2026, aion_wake authors
#
# 001_loading.pl: aion_wake without and then with shared_preload_libraries.
#
# The parked set lives in the main shared memory segment, so the library
# only works when preloaded.  Loaded any other way (CREATE EXTENSION,
# pg_restore, LOAD) it must load without error, so that installing and
# restoring work, and every SQL function and the status view must then fail
# with SQLSTATE 55000 and a hint naming shared_preload_libraries.  Once the
# server is restarted with the library preloaded, the background worker must
# run and be the process the status view reports, and DROP EXTENSION right
# after a start must not deadlock with the worker's rebuild.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('loading', preload => 0);

# Installing works without preloading: the install script calls none of the
# library's functions.
$node->safe_psql('postgres', 'CREATE EXTENSION aion_wake');
is( $node->safe_psql(
		'postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'"),
	'1.2',
	'CREATE EXTENSION succeeds without shared_preload_libraries');

# Run one statement with verbose errors, so stderr carries the SQLSTATE.
sub verbose_psql
{
	my ($sql) = @_;
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return ($ret, $stderr);
}

# Each entry point must fail with 55000 and a hint naming the setting.
foreach my $sql (
	"SELECT aion_wake.enqueue('k')",
	"SELECT aion_wake.pulse()",
	"SELECT * FROM aion_wake.status",
	"SELECT aion_wake.park('k')",
	"SELECT * FROM aion_wake.claim()",
	"SELECT * FROM aion_wake.claim(ARRAY['a', 'b'])",
	"SELECT aion_wake.set_limit('a', 1)",
	"SELECT * FROM aion_wake.topics",
	"SELECT * FROM aion_wake.parked")
{
	my ($ret, $stderr) = verbose_psql($sql);
	isnt($ret, 0, "without preloading, \"$sql\" fails");
	like(
		$stderr,
		qr/ERROR:\s+55000: aion_wake must be loaded via "shared_preload_libraries"/,
		"without preloading, \"$sql\" raises SQLSTATE 55000");
	like(
		$stderr,
		qr/HINT:\s+.*shared_preload_libraries/,
		"without preloading, \"$sql\" hints at shared_preload_libraries");
}

# The same SQLSTATE, caught by its condition name in PL/pgSQL.
is( $node->safe_psql(
		'postgres', q{
DO $$
BEGIN
	PERFORM aion_wake.enqueue('k');
	RAISE EXCEPTION 'enqueue did not fail';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE 'caught';
END
$$;
SELECT count(*) FROM aion_wake.outbox;
}),
	'0',
	'the error is object_not_in_prerequisite_state and nothing was written');

# A plain LOAD does not error, and does not make the functions usable.
{
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', "LOAD 'aion_wake'; SELECT 1");
	is($ret, 0, "LOAD 'aion_wake' succeeds without preloading");
	is($stderr, '', "LOAD 'aion_wake' reports nothing");

	($ret, $stderr) =
	  verbose_psql("LOAD 'aion_wake';\nSELECT * FROM aion_wake.status");
	like($stderr, qr/ERROR:\s+55000:/,
		'after LOAD, the status view still raises 55000');
}

# No worker runs without preloading.
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'"
	),
	'0',
	'no aion_wake worker without preloading');

# Now preload the library and serve this database.
aw_preload($node);
$node->restart;

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'"
	),
	'the worker appears in pg_stat_activity after the restart');

my $activity_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'"
);
# the worker shows in pg_stat_activity before it has set up its slot
ok(aw_wait_status($node, 'worker_pid IS NOT NULL'), 'status.worker_pid is set');
my $status_pid = aw_worker_pid($node);
like($activity_pid, qr/^\d+$/, 'the worker has a pid');
is($status_pid, $activity_pid, 'status.worker_pid is the worker in pg_stat_activity');
is( $node->safe_psql(
		'postgres',
		"SELECT worker_database, served, capacity > 0 FROM aion_wake.status"),
	'postgres|t|t',
	'the status view reports the served database');

# The functions work now.
is( $node->safe_psql(
		'postgres', "SELECT aion_wake.enqueue('k'); SELECT aion_wake.pulse()"),
	"t\n",
	'enqueue and pulse work once preloaded');

# DROP EXTENSION right after a start meets the worker rebuilding the set:
# it reads aion_wake.limits and then aion_wake.outbox, while DROP locks the
# tables one by one.  The worker locks the extension first, so the DROP
# waits for it, or it for the DROP; neither dies of a deadlock (before,
# the DROP did, nearly every time).  Then the extension made again is
# served with no restart: a pulse re-offers its parked row.
$node->safe_psql('postgres', "SELECT aion_wake.set_limit('api', 2)");
for my $round (1 .. 3)
{
	$node->restart;
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', 'DROP EXTENSION aion_wake');
	is($ret, 0, "round $round: DROP EXTENSION right after a start succeeds")
	  or diag($stderr);
	$node->safe_psql('postgres', 'CREATE EXTENSION aion_wake');
	# a row of the new extension, parked for an hour, comes back on a pulse
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('r$round', '{}', 'r')");
	my $tok = $node->safe_psql('postgres',
		"SELECT lease_token FROM aion_wake.claim('r', 1)");
	$node->safe_psql('postgres',
		"SELECT aion_wake.park('r$round', '1 hour', $tok)");
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('r', 1)");
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT visible_after < clock_timestamp() + interval '1 minute'
  FROM aion_wake.outbox WHERE dispatch_key = 'r$round'}),
		"round $round: ... and the worker serves the new extension (a pulse re-offers a parked row)"
	);
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM aion_wake.topics WHERE max_in_flight IS NOT NULL"),
		'0',
		"round $round: ... with no limit left from the extension dropped");
	$node->safe_psql('postgres', "SELECT aion_wake.set_limit('api', 2)");
}

$node->stop;

done_testing();
