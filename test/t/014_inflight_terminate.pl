# Copyright (c) 2026, aion_wake authors
#
# 014_inflight_terminate.pl: a claimer terminated while it spends a pulse
# (a defect of 1.0; G2).
#
# A pulse of a topic with a blocked claimer goes to that claimer, which
# takes the topic's parked entries (they are then in flight, holding the
# pulse's slots) and runs the compare-and-set UPDATE itself.  If the
# claimer's backend ends there with FATAL (pg_terminate_backend, a lost
# client, proc exit), the PG_CATCH of the re-offer never runs and nothing
# of the take is recorded for the abort: the entry stayed in flight for
# good, its slot lost beside a parked row, and neither complete() nor the
# fence passing removed it.  Whatever ends the backend, its in-flight
# entries must go back with their slots.
#
# To stop the claimer inside its UPDATE, another session holds SHARE lock on
# aion_wake.outbox in an open transaction; the test waits until the claimer
# waits on that lock, terminates it, then lets the lock go.
#
#   (a) with no new pulse, the worker re-offers the row (the slot went back
#       with the entry), and the set holds nothing for it afterwards;
#   (b) complete() of the row after the termination leaves no entry behind.
#
# No timer may set the blocked claimer's latch here (no
# client_connection_check_interval): it would hide the defect.

use strict;
use warnings;

use AionWake::Test;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = aw_node('inflight');

# Park one row of a topic for an hour; return once the park is confirmed.
sub park_for_an_hour
{
	my ($key, $topic) = @_;
	$node->safe_psql(
		'postgres', qq{
SELECT aion_wake.enqueue('$key', '{}', '$topic');
SELECT count(*) FROM aion_wake.claim('$topic', 1, '1 hour');
SELECT aion_wake.park('$key', '1 hour');});
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT state = 'confirmed' AND NOT woken FROM aion_wake.parked
 WHERE dispatch_key = '$key'}),
		"$key is parked for an hour and confirmed");
}

# A claimer blocked on $topic is handed a pulse and stops in its re-offer
# UPDATE behind a SHARE lock; it is terminated there.  Returns the session
# that holds the lock, its transaction still open.
sub terminate_inside_reoffer
{
	my ($key, $topic, $what) = @_;

	my $w = aw_waiter($node);
	aw_start($w,
		"SELECT dispatch_key FROM aion_wake.claim('$topic', 1, '30 s', '60 s')");
	aw_poll_waiters($node, 1, "$what a claimer waits on topic $topic");

	my $locker = aw_session($node);
	$locker->query_safe('BEGIN');
	$locker->query_safe('LOCK TABLE aion_wake.outbox IN SHARE MODE');

	$node->safe_psql('postgres', "SELECT aion_wake.pulse('$topic', 1)");
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT wait_event_type = 'Lock' AND wait_event = 'relation'
  FROM pg_stat_activity WHERE pid = $w->{pid}}),
		"$what the claimer spends the pulse and blocks in its re-offer UPDATE");
	is( $node->safe_psql(
			'postgres',
			"SELECT woken FROM aion_wake.parked WHERE dispatch_key = '$key'"),
		't',
		"$what $key is taken (in flight, holding the pulse's slot)");

	$node->safe_psql('postgres', "SELECT pg_terminate_backend($w->{pid})");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $w->{pid}"),
		"$what the claimer's backend is gone");
	$w->{run}->pump while $w->{run}->pumpable;
	like(
		$w->{stderr},
		qr/terminating connection due to administrator command/,
		"$what the claimer was terminated");
	eval { $w->{run}->finish; };
	aw_poll_waiters($node, 0, "$what no waiter is left");
	return $locker;
}

# ---------------------------------------------------------------------
# (a) the worker re-offers the row without a new pulse
# ---------------------------------------------------------------------
park_for_an_hour('p1', 'x');
my $locker = terminate_inside_reoffer('p1', 'x', '(a)');
$locker->query_safe('COMMIT');
$locker->quit;

# The worker acts as soon as the entry is back; 30 s is only a bound.
ok( aw_poll_for(
		$node, 'postgres', q{
SELECT visible_after <= clock_timestamp() AND parked_at IS NULL
  FROM aion_wake.outbox WHERE dispatch_key = 'p1'}, 30),
	'(a) p1 is re-offered with no new pulse: its slot went back with the entry');
ok( aw_poll_for(
		$node, 'postgres',
		"SELECT count(*) = 0 FROM aion_wake.parked WHERE dispatch_key = 'p1'", 30),
	'(a) the set holds no entry for p1 afterwards');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(dispatch_key || '/' || state || '/' || woken, ',') FROM aion_wake.parked"),
	'',
	'(a) nothing is left in the set');
is( $node->safe_psql(
		'postgres', "SELECT dispatch_key FROM aion_wake.claim('x', 10, '1 hour')"),
	'p1',
	'(a) p1 is claimable');

# ---------------------------------------------------------------------
# (b) complete() after the termination leaves no entry behind
# ---------------------------------------------------------------------
park_for_an_hour('p2', 'x2');
$locker = terminate_inside_reoffer('p2', 'x2', '(b)');
# the session holding SHARE lock may write the table itself
is($locker->query_safe("SELECT aion_wake.complete('p2')"),
	't', '(b) complete(p2) in the transaction that holds the lock');
$locker->query_safe('COMMIT');
$locker->quit;
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM aion_wake.outbox WHERE dispatch_key = 'p2'"),
	'0',
	'(b) p2 is delivered');
ok( aw_poll_for(
		$node, 'postgres',
		"SELECT count(*) = 0 FROM aion_wake.parked WHERE dispatch_key = 'p2'", 30),
	'(b) the set holds no entry for p2 after its complete()');
is( $node->safe_psql(
		'postgres', 'SELECT parked_confirmed + parked_pending FROM aion_wake.status'),
	'0',
	'(b) the status counts no parked entry');

$node->stop;
done_testing();
