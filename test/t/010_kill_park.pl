# Copyright (c) 2026, aion_wake authors
#
# 010_kill_park.pl: kill -9 of a backend inside park()'s transaction.  The
# server restarts (crash recovery), the uncommitted fence is gone, the
# committed parks come back into the rebuilt set, and nothing is lost (G1).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

# the test framework turns restart_after_crash off; the kill needs it
my $node = aw_node('killpark', conf => "restart_after_crash = on\n");
$node->safe_psql('postgres', q{
	SELECT aion_wake.enqueue('k' || g, '{}', 'kp') FROM generate_series(1, 3) g;
	SELECT count(*) FROM aion_wake.claim('kp', 3, '1 hour');
	SELECT aion_wake.park('k1', '1 hour');
});
my $before = $node->safe_psql('postgres',
	"SELECT visible_after FROM aion_wake.outbox WHERE dispatch_key = 'k2'");

my $old_worker = aw_worker_pid($node);

# a session parks k2 and is killed before it commits
my $h = aw_session($node);
$h->query_safe('BEGIN');
is($h->query_safe("SELECT aion_wake.park('k2', '2 hours')"), 't', 'k2 parked in an open transaction');
is($node->safe_psql('postgres', "SELECT state FROM aion_wake.parked WHERE dispatch_key = 'k2'"),
	'pending', 'its entry is pending');
kill 'KILL', $h->{pid};
$h->{run}->finish;

# the server goes through crash recovery; the worker comes back and rebuilds
ok(defined aw_wait_new_worker($node, $old_worker),
	'a new worker runs after the crash restart');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM aion_wake.parked WHERE dispatch_key = 'k1' AND state = 'confirmed'"),
	'the committed park is in the rebuilt set');
is($node->safe_psql('postgres', "SELECT count(*) FROM aion_wake.parked WHERE dispatch_key = 'k2'"),
	'0', 'the killed park left no entry');
is($node->safe_psql('postgres',
		"SELECT visible_after = '$before' AND parked_at IS NULL FROM aion_wake.outbox WHERE dispatch_key = 'k2'"),
	't', 'k2 keeps its lease fence: the park rolled back');
is($node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox'), '3', 'no row lost');

# and the rebuilt park still answers a pulse
$node->safe_psql('postgres', "SELECT aion_wake.pulse('kp', 1)");
ok(aw_wait_reoffered($node, 'k1'), 'a pulse re-offers the rebuilt park');

$node->stop;
done_testing();
