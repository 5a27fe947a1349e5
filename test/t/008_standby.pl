# Copyright (c) 2026, aion_wake authors
#
# 008_standby.pl: aion_wake on a hot standby, and after its promotion.
#
# The parked set is an accelerator rebuilt from the table, so a standby
# needs none: it runs no worker, and every function that writes is refused
# with 25006 (read_only_sql_transaction) rather than half-working.  When the
# standby is promoted its worker starts and rebuilds the set from the
# replicated fences (G1: nothing lost across a failover), and pulses
# re-offer the parked rows again.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $primary = aw_node('primary', init => { allows_streaming => 1 });
like(aw_worker_pid($primary), qr/^\d+$/, 'the primary runs a worker');

# three parked rows (a back-off of an hour) and one plain row
$primary->safe_psql(
	'postgres', q{
SELECT aion_wake.enqueue('s' || i, '{}', 'sb') FROM generate_series(1, 3) i;
SELECT count(*) FROM aion_wake.claim('sb', 3, '30s');
SELECT aion_wake.park('s1', '1 hour');
SELECT aion_wake.park('s2', '1 hour');
SELECT aion_wake.park('s3', '1 hour');
SELECT aion_wake.enqueue('plain', '{}', 'sb');});
is($primary->safe_psql('postgres',
		"SELECT count(*) FROM aion_wake.parked WHERE state = 'confirmed'"),
	3, 'three rows are parked on the primary');

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox'),
	4, 'the standby has the rows');

# --- the standby refuses writes ------------------------------------------------

my $token = $standby->safe_psql('postgres',
	"SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 's1'");
my %calls = (
	park => "aion_wake.park('plain', '1 hour')",
	enqueue => "aion_wake.enqueue('new', '{}', 'sb')",
	pulse => "aion_wake.pulse('sb', 1)",
	claim => "aion_wake.claim('sb', 1, '30s')",
	'claim with wait' => "aion_wake.claim('sb', 1, '30s', '1s')",
	complete => "aion_wake.complete('s1', $token)",
	fail => "aion_wake.fail('plain', 'x', '1s')",
	dead_letter => "aion_wake.dead_letter('plain', 'x')",
	reoffer => "aion_wake.reoffer('sb', 3)");
foreach my $name (sort keys %calls)
{
	my ($out, $err) = ('', '');
	$standby->psql(
		'postgres',
		"\\set VERBOSITY verbose\nSELECT * FROM $calls{$name};",
		stdout => \$out,
		stderr => \$err);
	like(
		$err,
		qr/ERROR:  25006: cannot execute .* during recovery/,
		"$name is refused on the standby with 25006");
}

# the same, caught by its condition name
my ($out, $err) = ('', '');
$standby->psql(
	'postgres', q{
DO $$
BEGIN
  PERFORM aion_wake.park('s2', '1 second');
  RAISE NOTICE 'not refused';
EXCEPTION WHEN read_only_sql_transaction THEN
  RAISE NOTICE 'refused';
END $$;},
	stdout => \$out,
	stderr => \$err);
like($err, qr/NOTICE:  refused/, 'the error is read_only_sql_transaction');
unlike($err, qr/not refused/, '... and park() did not go through');

is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'"
	),
	0,
	'no aion_wake worker runs on the standby');
is( $primary->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'"
	),
	1,
	'(while the primary runs one)');
is(aw_status($standby, 'worker_pid IS NULL'),
	't', 'the standby status shows no worker');
is( $standby->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox
 WHERE parked_at IS NOT NULL AND visible_after > clock_timestamp() + interval '50 minutes'}),
	3,
	'the fences of the parked rows reached the standby');

# --- promotion ------------------------------------------------------------------

# the old primary goes away, as in a failover
$primary->stop;
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'the standby is promoted');
ok(aw_wait_status($standby, 'worker_pid IS NOT NULL'),
	'the new primary starts a worker');
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 3 FROM aion_wake.parked WHERE state = 'confirmed'"),
	'the worker rebuilds the set');
is( $standby->safe_psql(
		'postgres', q{
SELECT string_agg(p.dispatch_key, ',' ORDER BY p.dispatch_key)
  FROM aion_wake.parked p JOIN aion_wake.outbox o USING (dispatch_key)
 WHERE p.state = 'confirmed' AND p.topic = 'sb' AND p.fence = o.visible_after
   AND p.parked_at = o.parked_at AND p.attempt = o.attempt}),
	's1,s2,s3',
	'the rebuilt entries are the three parked rows, with their fences');
# the worker logs the rebuild after its entries are in the set
ok( $standby->wait_for_log(
		qr/aion_wake worker rebuilt the parked set of database "postgres" from 3 parked rows/),
	'the rebuild is logged');

$standby->safe_psql('postgres', "SELECT aion_wake.pulse('sb', 3)");
ok( $standby->poll_query_until(
		'postgres', q{
SELECT count(*) = 3 FROM aion_wake.outbox
 WHERE dispatch_key IN ('s1', 's2', 's3')
   AND parked_at IS NULL AND visible_after <= clock_timestamp()}),
	'a pulse of 3 re-offers the three rows on the new primary');
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(dispatch_key || ':' || attempt, ',' ORDER BY dispatch_key) FROM aion_wake.outbox"
	),
	'plain:0,s1:0,s2:0,s3:0',
	'the outbox still has every row, attempts unchanged');
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(dispatch_key, ',' ORDER BY dispatch_key) FROM aion_wake.claim('sb', 10, '30s')"
	),
	'plain,s1,s2,s3',
	'and all four can be claimed');

$standby->stop;
done_testing();
