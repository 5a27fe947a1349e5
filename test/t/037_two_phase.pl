# Copyright (c) 2026, aion_wake authors
#
# 037_two_phase.pl: the second phase of a prepared transaction wakes the
# claimers its commit or rollback would have woken (G9), in whichever
# session it runs.
#
# A transaction that enqueues a row wakes a blocked claimer at its commit;
# one that claims a row and rolls back wakes one for the row it gives back.
# After PREPARE TRANSACTION neither happens in the preparing backend, and
# COMMIT PREPARED or ROLLBACK PREPARED run in another session whose
# transaction callbacks know nothing of it: without the wakes kept for the
# second phase, the claimer slept out its whole wait (60 s here) beside a
# claimable row.  Each case below must return its row within 2 s.
#
#   1. COMMIT PREPARED of an enqueue, from another session;
#   2. ROLLBACK PREPARED of a claim of an unlimited topic;
#   3. COMMIT PREPARED of a transaction that enqueued into more topics
#      than an entry keeps one by one (17): a claimer waits on each of them
#      in turn, so one waits on a topic that fell out of the entry;
#   4. a transaction prepared before a claimer came, with rows of a
#      limited topic with a free slot.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use AionWake::Test;

my $prompt = aw_prompt(2);
my $wait = '60 s';

my $node = aw_node('two_phase', conf => "max_prepared_transactions = 4\n");

# each row a claim takes: "key|token|the clock at the claim (epoch)"
sub claim_sql
{
	my ($topics, $wait) = @_;
	return qq{
SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim($topics, 1, '1 hour', '$wait')};
}

# Start a claim that blocks on $topics (an SQL expression), and wait until
# it does.
sub blocked_claimer
{
	my ($topics, $what) = @_;
	my $w = aw_waiter($node);
	aw_start($w, claim_sql($topics, $wait));
	aw_poll_waiters($node, 1, $what);
	return $w;
}

# 1. COMMIT PREPARED of an enqueue
{
	my $s = aw_session($node);
	$s->query_safe(q{BEGIN;
SELECT aion_wake.enqueue('e1', '{}', 'e');
PREPARE TRANSACTION 'p_enqueue'});
	my $w = blocked_claimer("'e'", 'W blocks on e beside the prepared enqueue');
	ok(!aw_done($w), 'the prepared row is not claimable yet');
	my $from = time;
	$node->safe_psql('postgres', "COMMIT PREPARED 'p_enqueue'");
	my @rows = aw_finish_rows($w);
	my $row = aw_taken_promptly(\@rows, $from, $prompt,
		'COMMIT PREPARED of an enqueue wakes the blocked claimer');
	is($row->[0] // '', 'e1', 'it took the row committed');
	$s->quit;
	$w->quit;
}

# 2. ROLLBACK PREPARED of a claim of an unlimited topic
{
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('c1', '{}', 'c')");
	my $s = aw_session($node);
	my $got = $s->query_safe(q{BEGIN;
SELECT dispatch_key FROM aion_wake.claim('c', 1, '1 hour');
PREPARE TRANSACTION 'p_claim'});
	like($got, qr/c1/, 'the prepared transaction claimed c1');
	my $w = blocked_claimer("'c'", 'W blocks on c while c1 is held');
	my $from = time;
	$node->safe_psql('postgres', "ROLLBACK PREPARED 'p_claim'");
	my @rows = aw_finish_rows($w);
	my $row = aw_taken_promptly(\@rows, $from, $prompt,
		'ROLLBACK PREPARED of a claim wakes the blocked claimer');
	is($row->[0] // '', 'c1', 'it took the row given back');
	$s->quit;
	$w->quit;
}

# 3. more topics than an entry keeps one by one: run i prepares enqueues
# into 17 topics of its own, mi.1 .. mi.17, and the claimer waits on mi.i,
# so that some run waits on a topic the entry had no room for, whichever
# that is
{
	my $s = aw_session($node);
	my $late = 0;
	for my $i (1 .. 17)
	{
		$s->query_safe(qq{BEGIN;
SELECT aion_wake.enqueue('m$i.' || j, '{}', 'm$i.' || j) FROM generate_series(1, 17) AS j;
PREPARE TRANSACTION 'p_many'});
		my $w = blocked_claimer("'m$i.$i'", "W blocks on m$i.$i");
		my $from = time;
		$node->safe_psql('postgres', "COMMIT PREPARED 'p_many'");
		my @rows = aw_finish_rows($w);
		my $row = $rows[0] // [ '', '', 0 ];
		if (@rows != 1 || $row->[2] - $from > $prompt)
		{
			$late++;
			diag(sprintf("m%d: %s taken %.1f ms after COMMIT PREPARED",
				$i, $row->[0], 1000 * ($row->[2] - $from)));
		}
		$w->quit;
	}
	is($late, 0, 'COMMIT PREPARED of enqueues into 17 topics wakes a claimer of each');
	$s->quit;
}

# 4. a limited topic with a free slot
{
	$node->safe_psql('postgres', "SELECT aion_wake.set_limit('l', 2)");
	my $s = aw_session($node);
	$s->query_safe(q{BEGIN;
SELECT aion_wake.enqueue('l1', '{}', 'l');
PREPARE TRANSACTION 'p_limited'});
	my $w = blocked_claimer("'l'", 'W blocks on the limited topic l');
	my $from = time;
	$node->safe_psql('postgres', "COMMIT PREPARED 'p_limited'");
	my @rows = aw_finish_rows($w);
	my $row = aw_taken_promptly(\@rows, $from, $prompt,
		'COMMIT PREPARED of an enqueue into a limited topic wakes the claimer');
	is($row->[0] // '', 'l1', 'it took the row');
	is(aw_limit_of($node, 'l'), '2/1', 'the row it took is a live lease');
	$s->quit;
	$w->quit;
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction is left');

$node->stop;
done_testing();
