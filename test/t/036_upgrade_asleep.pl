# Copyright (c) 2026, aion_wake authors
#
# 036_upgrade_asleep.pl: a claim asleep on the 1.0 schema across a live
# ALTER EXTENSION aion_wake UPDATE acts on the schema it finds when it
# wakes.
#
#   (a) the update does not wait for the sleeping claim (in a served
#       database a waiting claim holds no lock on aion_wake.outbox);
#   (b) woken by a row enqueued after the update, the claim leases it the
#       1.1 way, with leased_until, so a set_limit() after it counts the
#       lease;
#   (c) woken by the commit of a set_limit() of its topic after the
#       update, the claim goes on waiting (no error) and takes the next row
#       within the limit.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('asleep_update', databases => 'up, up2', create => 0,
	conf => "statement_timeout = '90s'\n");
my $db;

sub up
{
	return $node->safe_psql($db, $_[0]);
}

# a served database of its own, with the 1.0 schema
sub install_10
{
	($db) = @_;
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	up(q{CREATE EXTENSION aion_wake VERSION '1.0'});
	$node->wait_for_log(qr/aion_wake worker rebuilt the parked set of database "$db"/, $offset);
}

sub wait_asleep
{
	my ($w, $what) = @_;
	ok($node->poll_query_until($db,
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $w->{pid}"),
		$what);
}

# (a), (b)
install_10('up');
my $w = aw_waiter($node, $db);
aw_start($w, "SELECT dispatch_key FROM aion_wake.claim('t', 1, '1 hour', '60 s')");
wait_asleep($w, '(a) a claim sleeps on the 1.0 schema');
my ($ret, $out, $err) = $node->psql($db, q{
SET lock_timeout = '10s';
ALTER EXTENSION aion_wake UPDATE;});
is($err, '', '(a) the update does not wait for the sleeping claim');
up(q{SELECT aion_wake.enqueue('k1', '{}', 't')});
($out, $err) = aw_finish($w);
is($out, 'k1', '(b) the claim is woken by the row and takes it');
is(up(q{SELECT leased_until IS NOT NULL FROM aion_wake.outbox WHERE dispatch_key = 'k1'}),
	't', '(b) ... leased the 1.1 way, with leased_until');
up(q{SELECT aion_wake.set_limit('t', 1)});
is(up(q{SELECT in_flight FROM aion_wake.topics WHERE topic = 't'}), '1',
	'(b) set_limit counts that lease');
up(q{SELECT aion_wake.enqueue('k2', '{}', 't')});
is(up(q{SELECT count(*) FROM aion_wake.claim('t', 5, '1 hour')}), '0',
	'(b) nothing more is granted under a limit of 1');
$w->quit;

# (c)
install_10('up2');
$w = aw_waiter($node, $db);
aw_start($w, "SELECT dispatch_key FROM aion_wake.claim('u', 1, '1 hour', '60 s')");
wait_asleep($w, '(c) a claim sleeps on the 1.0 schema');
up(q{ALTER EXTENSION aion_wake UPDATE});
up(q{SELECT aion_wake.set_limit('u', 1)});
ok($node->poll_query_until($db, qq{
SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $w->{pid}
   AND (SELECT count(*) FROM aion_wake.outbox) = 0}), '(c) woken by set_limit, it sleeps on')
  or diag(join(' / ', aw_finish($w)));
up(q{SELECT aion_wake.enqueue('m1', '{}', 'u')});
($out, $err) = aw_finish($w);
is($out, 'm1', '(c) then takes the next row');
is($err, '', '(c) without an error');
is(up(q{SELECT in_flight FROM aion_wake.topics WHERE topic = 'u'}), '1',
	'(c) its lease counts against the limit');
$w->quit;

$node->stop;
done_testing();
