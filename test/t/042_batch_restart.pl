# Copyright (c) 2026, aion_wake authors
#
# 042_batch_restart.pl: batch settles (1.2) across a crash restart, a fast
# restart and the second phase of a prepared transaction.
#
#   1. kill -9 of a backend holding an open complete_many with next_rows
#      on a limited topic: the crash restart rebuilds the count from
#      leased_until, which holds the settled leases again (the batch rolled
#      back) and not the new ones; nothing is claimable beyond the limit;
#   2. a fast restart after a committed batch hand-off: the new leases are
#      counted, exactly, and the topic is full;
#   3. ROLLBACK PREPARED of a complete_many of two rows whose leases had
#      ended, in another session: both rows are claimable again, and each
#      wakes a blocked claimer (doc/design.md, Wake rules: 1), as the
#      rollback of two single-row settles would.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use AionWake::Test;

my $prompt = aw_prompt(2);

# the test framework turns restart_after_crash off; the kill needs it
my $node = aw_node('batch_restart', conf => q{
statement_timeout = '90s'
restart_after_crash = on
max_prepared_transactions = 4
});

sub sql { return $node->safe_psql('postgres', $_[0]); }

# in_flight of a topic and its rows with a live lease
sub books
{
	my ($t) = @_;
	return sql(qq{
SELECT (SELECT in_flight FROM aion_wake.topics WHERE topic = '$t') || '|' ||
       (SELECT count(*) FROM aion_wake.outbox WHERE topic = '$t' AND leased_until > clock_timestamp())});
}

sub limit_loaded
{
	my ($t, $max) = @_;
	return $node->poll_query_until('postgres',
		"SELECT max_in_flight = $max FROM aion_wake.topics WHERE topic = '$t'");
}

# 1. kill -9 of a backend holding an open batch hand-off
sql(q{SELECT aion_wake.set_limit('bk', 3)});
sql(q{SELECT count(aion_wake.enqueue('bk' || g, '{}', 'bk')) FROM generate_series(1, 9) g});
sql(q{CREATE TABLE tok AS SELECT dispatch_key, lease_token FROM aion_wake.claim('bk', 3, '1 hour')});
is(books('bk'), '3|3', '(1) three leases, the limit');
my $s = aw_session($node);
$s->query_safe('BEGIN');
is( $s->query_safe(q{
SELECT count(*) FROM aion_wake.complete_many(
    (SELECT array_agg(dispatch_key ORDER BY dispatch_key) FROM tok),
    (SELECT array_agg(lease_token ORDER BY dispatch_key) FROM tok),
    next_rows => 3, lease => '1 hour')}),
	'3', '(1) the open batch passed its three slots to three new leases');
my $pid = aw_worker_pid($node);
my $log_offset = -s $node->logfile;
kill 'KILL', $s->{pid};
eval { $s->{run}->kill_kill; 1 };
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
pass('(1) the kill -9 makes a crash restart');
ok(defined aw_wait_new_worker($node, $pid), '(1) a new worker runs');
ok(limit_loaded('bk', 3), '(1) the limit is back');
is(books('bk'), '3|3', '(1) in_flight rebuilt from leased_until: the settled leases, not the new ones');
is( sql(q{SELECT count(*) FROM tok t JOIN aion_wake.outbox o USING (dispatch_key, lease_token)
           WHERE o.leased_until > clock_timestamp()}),
	'3', '(1) the three settled leases are intact');
is(sql(q{SELECT count(*) FROM aion_wake.claim('bk', 3)}), '0', '(1) nothing claimable over the limit');

# 2. a fast restart after a committed batch hand-off
is( sql(q{
SELECT count(*) FROM aion_wake.complete_many(
    (SELECT array_agg(dispatch_key ORDER BY dispatch_key) FROM tok),
    (SELECT array_agg(lease_token ORDER BY dispatch_key) FROM tok),
    next_rows => 5, lease => '1 hour')}),
	'3', '(2) the batch hands its three slots on, no more');
is(books('bk'), '3|3', '(2) three leases after the commit');
$node->restart;
ok(limit_loaded('bk', 3), '(2) the limit is back after the restart');
is(books('bk'), '3|3', '(2) the new leases are counted, once');
is(sql(q{SELECT count(*) FROM aion_wake.claim('bk', 3)}), '0', '(2) the topic is full');

# 3. ROLLBACK PREPARED of a batch settle of two rows whose leases ended
sql(q{SELECT count(aion_wake.enqueue('bp' || g, '{}', 'bp')) FROM generate_series(1, 2) g});
sql(q{CREATE TABLE tokp AS SELECT dispatch_key, lease_token, leased_until
        FROM aion_wake.claim('bp', 2, '1 s')});
ok( $node->poll_query_until('postgres',
		q{SELECT bool_and(leased_until < clock_timestamp()) FROM tokp}),
	'(3) both leases have ended');
$s = aw_session($node);
is( $s->query_safe(q{BEGIN;
SELECT aion_wake.complete_many(
    (SELECT array_agg(dispatch_key ORDER BY dispatch_key) FROM tokp),
    (SELECT array_agg(lease_token ORDER BY dispatch_key) FROM tokp));
PREPARE TRANSACTION 'p_batch'}),
	'2', '(3) a prepared batch settled both rows');
my @w = map { aw_waiter($node) } 1 .. 2;
for my $i (0 .. 1)
{
	aw_start($w[$i], q{
SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('bp', 1, '1 hour', '60 s')});
	aw_poll_waiters($node, $i + 1, "(3) claimer $i blocks on bp");
}
my $from = time;
sql(q{ROLLBACK PREPARED 'p_batch'});
for my $i (0 .. 1)
{
	my @rows = aw_finish_rows($w[$i]);
	aw_taken_promptly(\@rows, $from, $prompt,
		"(3) ROLLBACK PREPARED of the batch wakes claimer $i");
	$w[$i]->quit;
}
$s->quit;

done_testing();
