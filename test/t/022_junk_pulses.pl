# Copyright (c) 2026, aion_wake authors
#
# 022_junk_pulses.pl: a role with no grants cannot disable the fast path
# with raw NOTIFY, nor read the listening connection's error (a defect of
# 1.0; G6).
#
# Any client may send a raw pulse (NOTIFY aion_wake_capacity): that is the
# point of the wire.  Each pulse for a topic name the table did not hold
# took a slot of the fixed topic table, so a role with no privilege at all
# that sent pulses for 1,100 made-up topics (aion_wake.max_topics is 1,024)
# filled it: a park() on a new topic then fell back to its fence ("topic
# table is full") and a pulse for a new topic was dropped, until the junk
# topics' credits ran out.  A pulse for a topic with no parked row, no
# waiter and no live credit must take no slot: a credit for a topic nobody
# uses is worth nothing.  aion_wake.pulse_credit_ms is set to its maximum
# here so that the junk topics would hold the table for the whole test.
#
# aion_wake.status is readable by PUBLIC; its listen_error says why the
# worker cannot listen, with role names and socket paths.  A role without
# pg_read_all_stats must see "<insufficient privilege>" instead, as in
# pg_stat_activity; a member of pg_read_all_stats, and a superuser, see the
# text.

use strict;
use warnings;

use AionWake::Test;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $njunk = 1100;

my $node = aw_node('junk', conf => "aion_wake.pulse_credit_ms = '60s'\n");
$node->safe_psql(
	'postgres', q{
CREATE ROLE aw_junk LOGIN;
CREATE ROLE aw_stats LOGIN IN ROLE pg_read_all_stats;});

sub as_junk
{
	my ($sql) = @_;
	return $node->psql('postgres', $sql, extra_params => [ '-U', 'aw_junk' ]);
}

sub status
{
	my ($col) = @_;
	return aw_status($node, $col);
}

# Park rows of a topic for an hour, oldest first.  Returns what psql said
# on stderr.
sub park_for_an_hour
{
	my ($topic, @keys) = @_;
	my ($ret, $out, $err);
	foreach my $key (@keys)
	{
		my ($r, $o, $e) = $node->psql(
			'postgres', qq{
SELECT aion_wake.enqueue('$key', '{}', '$topic');
SELECT count(*) FROM aion_wake.claim('$topic', 1, '1 hour');
SELECT aion_wake.park('$key', '1 hour');});
		is($r, 0, "park of $key on topic $topic");
		$err .= $e;
	}
	return $err;
}

sub reoffered
{
	my ($key) = @_;
	return qq{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = '$key'};
}

ok($node->poll_query_until('postgres', 'SELECT listening FROM aion_wake.status'),
	'the worker listens');
my ($ret, $out, $err) = as_junk("SELECT aion_wake.pulse('t', 1)");
like($err, qr/permission denied/, 'aw_junk has no privilege on aion_wake');

# A row of an existing topic, to learn when the worker has read the junk:
# its pulse is sent after the junk.  Legitimate topics here keep a second
# row parked, so they stay in use and no park can take their place in the
# topic table.
park_for_an_hour('marker', 'mk1', 'mk2');
my $set_full = status('set_full');

# ---------------------------------------------------------------------
# The junk, then a legitimate pulse on the wire behind it
# ---------------------------------------------------------------------
($ret, $out, $err) = as_junk(qq{
SELECT count(pg_notify('aion_wake_capacity', 'junk' || g)) FROM generate_series(1, $njunk) g;
NOTIFY aion_wake_capacity, 'marker:1';});
is($ret, 0, "aw_junk sends $njunk raw pulses for made-up topics, then one for marker");
ok($node->poll_query_until('postgres', reoffered('mk1')),
	'the worker has read them all: the pulse behind them re-offered mk1');
is(status('set_full'), $set_full, 'the junk did not find the topic table full');

# ---------------------------------------------------------------------
# park() and pulse() on a brand-new topic
# ---------------------------------------------------------------------
$err = park_for_an_hour('fresh1', 'n1', 'n1b');
unlike($err, qr/topic table is full/, 'a park on a new topic gets no WARNING');
is( $node->safe_psql(
		'postgres', "SELECT state FROM aion_wake.parked WHERE dispatch_key = 'n1'"),
	'confirmed',
	'... it enters the set, confirmed');
is( $node->safe_psql(
		'postgres', "SELECT state FROM aion_wake.parked WHERE dispatch_key = 'n1b'"),
	'confirmed',
	'... and so does a second one');
is(status('set_full'), $set_full, '... and set_full is unchanged');
$node->safe_psql('postgres', "SELECT aion_wake.pulse('fresh1', 1)");
ok(aw_poll_for($node, 'postgres', reoffered('n1'), 30),
	'pulse() on the new topic re-offers it');

# a raw pulse on another new topic with a parked row is not dropped
$err = park_for_an_hour('fresh2', 'n2');
unlike($err, qr/topic table is full/, 'a park on another new topic gets no WARNING');
($ret, $out, $err) = as_junk("NOTIFY aion_wake_capacity, 'fresh2:1'");
is($ret, 0, 'a raw pulse on that topic');
ok(aw_poll_for($node, 'postgres', reoffered('n2'), 30),
	'... re-offers its parked row');
is(status('set_full'), $set_full, 'set_full is unchanged at the end');
ok(!$node->log_contains(qr/topic table is full/),
	'the server log has no "topic table is full" WARNING');

# ---------------------------------------------------------------------
# listen_error is for pg_read_all_stats
# ---------------------------------------------------------------------
$node->append_conf('postgresql.conf', "aion_wake.worker_role = 'aw_ghost'\n");
$node->reload;
ok( $node->poll_query_until(
		'postgres',
		"SELECT NOT listening AND listen_error ~ 'aw_ghost' FROM aion_wake.status"),
	'with a worker_role that does not exist the worker cannot listen');
like(status('listen_error'), qr/aw_ghost/, 'a superuser reads the error');
is( $node->safe_psql(
		'postgres', 'SELECT listen_error FROM aion_wake.status',
		extra_params => [ '-U', 'aw_stats' ]),
	$node->safe_psql('postgres', 'SELECT listen_error FROM aion_wake.status'),
	'a member of pg_read_all_stats reads the same text');
is( $node->safe_psql(
		'postgres', 'SELECT listen_error FROM aion_wake.status',
		extra_params => [ '-U', 'aw_junk' ]),
	'<insufficient privilege>',
	'a role without pg_read_all_stats reads <insufficient privilege>');
is( $node->safe_psql(
		'postgres', 'SELECT listening FROM aion_wake.status',
		extra_params => [ '-U', 'aw_junk' ]),
	'f',
	'... and still sees that the worker is not listening');

$node->stop;
done_testing();
