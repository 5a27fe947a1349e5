# Copyright (c) 2026, aion_wake authors
#
# 024_stale_entries.pl: a pulse of k slots costs O(k) statements however
# many stale entries lie before its rows (G7).
#
# Entries whose rows were deleted behind aion_wake's back (a plain DELETE
# or TRUNCATE of aion_wake.outbox) stay in the set until a re-offer finds
# them stale.  A re-offer that took one entry per slot and tried each in a
# statement of its own would spend 20,000 statements on 20,000 stale
# entries before reaching the one live row.  Rounds that meet stale
# entries look further ahead (src/reoffer.c), so the count of re-offer
# statements grows with the logarithm of the stale entries.
#
# The statements are counted with pg_stat_statements (nested statements
# tracked; the re-offer is the statement that sets visible_after = $3 and
# parked_at to NULL, which pg_stat_statements shows as a parameter), not
# timed.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('stale', conf => <<'CONF');
shared_preload_libraries = 'aion_wake, pg_stat_statements'
pg_stat_statements.track = all
CONF
$node->safe_psql('postgres', 'CREATE EXTENSION pg_stat_statements');

# 20,000 parked rows, then deleted without aion_wake knowing
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('st' || g, '{}', 'st') FROM generate_series(1, 20000) g;
SELECT count(aion_wake.park('st' || g, '1 hour')) FROM generate_series(1, 20000) g;});
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM aion_wake.parked WHERE topic = 'st'"),
	20000, '20,000 entries in the set');
$node->safe_psql('postgres', "DELETE FROM aion_wake.outbox WHERE topic = 'st'");

# one live row, parked after the stale ones (so it is the youngest)
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('live', '{}', 'st');
SELECT aion_wake.park('live', '1 hour');
SELECT pg_stat_statements_reset();});

# the re-offer runs in this transaction: reoffer() spends one slot as the
# worker would
is($node->safe_psql('postgres', "SELECT aion_wake.reoffer('st', 1)"),
	1, 'a pulse of one slot re-offers the live row');
is( $node->safe_psql('postgres',
		"SELECT parked_at IS NULL AND visible_after <= clock_timestamp() FROM aion_wake.outbox WHERE dispatch_key = 'live'"),
	't', 'the live row is claimable');
my $statements = $node->safe_psql('postgres', q{
SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
 WHERE query LIKE '%UPDATE aion_wake.outbox o SET visible_after = $3, parked_at = $%'});
ok($statements > 0 && $statements <= 20,
	"it took $statements re-offer statements, not one per stale entry");
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM aion_wake.parked WHERE topic = 'st'"),
	0, 'the stale entries are gone from the set');

# the worker's path: a pulse() over a fresh batch of stale entries
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('su' || g, '{}', 'su') FROM generate_series(1, 5000) g;
SELECT count(aion_wake.park('su' || g, '1 hour')) FROM generate_series(1, 5000) g;
DELETE FROM aion_wake.outbox WHERE topic = 'su';
SELECT aion_wake.enqueue('live2', '{}', 'su');
SELECT aion_wake.park('live2', '1 hour');
SELECT pg_stat_statements_reset();
SELECT aion_wake.pulse('su', 1);});
ok( $node->poll_query_until('postgres',
		"SELECT parked_at IS NULL FROM aion_wake.outbox WHERE dispatch_key = 'live2'"),
	'the worker re-offers the live row behind 5,000 stale entries');
$statements = $node->safe_psql('postgres', q{
SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
 WHERE query LIKE '%UPDATE aion_wake.outbox o SET visible_after = $3, parked_at = $%'});
ok($statements > 0 && $statements <= 20,
	"the worker took $statements re-offer statements (counted, and few)");

done_testing();
