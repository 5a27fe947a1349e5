# Copyright (c) 2026, aion_wake authors
#
# 015_fence_before_commit.pl: a row whose fence passes before its
# transaction commits wakes a waiter at that commit (a defect of 1.0; G5;
# doc/design.md, Fences that pass).
#
# When a fence passes, nobody commits, so the worker keeps per topic with
# waiters the next fence, sleeps until it and counts the rows that became
# visible since it last looked (checked_upto).  A writer tells it of a new
# fence at COMMIT.  A row whose fence is already behind when its
# transaction commits is visible from that commit on, but its fence lies
# before checked_upto if the worker looked at the topic meanwhile (here:
# for another row whose fence passed while the slow transaction was open),
# so the worker's count missed it and the waiter slept to its deadline.
#
# Each case: two waiters W1, W2 on a topic; session A writes a fence of
# 1 s in a transaction it keeps open; session B enqueues a row of the topic
# with a 2 s delay in autocommit, so W1 is woken at +2 s and the worker's
# look moves past A's fence; W1's row is completed.  Once A's fence has
# passed, A commits.  W2 must return A's row promptly (within 5 s, far
# below its 60 s wait).  Before the fix it returned nothing, at 60 s.
#
#   (a) enqueue(..., delay => '1 s') in a slow transaction;
#   (b) fail(..., backoff => '1 s') in a slow transaction;
#   (c) claim(..., lease => '1 s') in a long transaction, committed after
#       the lease ended (an abandoned claim: the row is claimable again).
#
# No timer may set a blocked claim's latch here (no
# client_connection_check_interval, and waiter sessions from aw_waiter, so
# that no statistics flush timer is armed): it would hide the defect.

use strict;
use warnings;

use AionWake::Test;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = aw_node('fencecommit');

# One case.  $setup runs in autocommit first; $slow runs in A's open
# transaction and gives row $key a fence 1 s ahead.
sub slow_fence_case
{
	my ($what, $topic, $key, $setup, $slow) = @_;

	$node->safe_psql('postgres', $setup) if $setup;

	my $a = aw_session($node);
	$a->query_safe('BEGIN');
	$a->query_safe($slow);

	my $w1 = aw_waiter($node);
	aw_start($w1,
		"SELECT dispatch_key FROM aion_wake.claim('$topic', 1, '30 s', '60 s')");
	aw_poll_waiters($node, 1, "$what W1 waits on $topic");
	my $w2 = aw_waiter($node);
	aw_start($w2,
		"SELECT dispatch_key, attempt FROM aion_wake.claim('$topic', 1, '30 s', '60 s')");
	aw_poll_waiters($node, 2, "$what W2 waits on $topic too");

	my $t0 = time;
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('$key-b', '{}', '$topic', '2 s')");
	my ($out, $err) = aw_finish($w1);
	my $elapsed = time - $t0;
	is($out, "$key-b", "$what W1 gets B's row when its fence passes");
	cmp_ok($elapsed, '>=', 1.5, sprintf("$what ... at its fence (%.1fs)", $elapsed));
	cmp_ok($elapsed, '<', 10, "$what ... not at W1's deadline");
	ok(!aw_done($w2), "$what W2 still waits");
	# delivered: its lease will not end and wake anyone
	is($node->safe_psql('postgres', "SELECT aion_wake.complete('$key-b')"),
		't', "$what B's row is delivered");

	# A's own view of its row: its fence is behind once this is true
	my $passed;
	for (my $i = 0; $i < 100; $i++)
	{
		$passed = $a->query_safe(
			"SELECT visible_after < clock_timestamp() FROM aion_wake.outbox WHERE dispatch_key = '$key'");
		last if $passed eq 't';
		usleep(100_000);
	}
	is($passed, 't', "$what the fence of A's row has passed, A still open");
	is($node->safe_psql('postgres', 'SELECT waiters FROM aion_wake.status'),
		'1', "$what W2 is still registered");

	my $t1 = time;
	$a->query_safe('COMMIT');
	($out, $err) = aw_finish($w2);
	$elapsed = time - $t1;
	like($out, qr/^\Q$key\E\|/, "$what W2 gets A's row after A's commit");
	cmp_ok($elapsed, '<', 5,
		sprintf("$what ... within 5 s of the commit, not at its 60 s deadline (%.1fs)",
			$elapsed));
	is($err, '', "$what ... without error");
	aw_poll_waiters($node, 0, "$what no waiter is left");
	$_->quit for ($a, $w1, $w2);
	return $out;
}

# (a) a delayed enqueue that commits after its delay
slow_fence_case('(a)', 'ya', 'a1', undef,
	"SELECT aion_wake.enqueue('a1', '{}', 'ya', '1 s')");

# (b) fail() with a short back-off in a slow transaction
my $out = slow_fence_case(
	'(b)', 'yb', 'f1', q{
SELECT aion_wake.enqueue('f1', '{}', 'yb');
SELECT count(*) FROM aion_wake.claim('yb', 1, '1 hour');},
	"SELECT aion_wake.fail('f1', 'boom', '1 s')");
is($out, 'f1|1', '(b) the failed attempt is counted');

# (c) a short lease in a long claim transaction, committed after it ended
slow_fence_case('(c)', 'yc', 'l1',
	"SELECT aion_wake.enqueue('l1', '{}', 'yc')",
	"SELECT count(*) FROM aion_wake.claim('yc', 1, lease => '1 s')");

$node->stop;
done_testing();
