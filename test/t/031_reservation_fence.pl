# Copyright (c) 2026, aion_wake authors
#
# 031_reservation_fence.pl: a fence that passes while a claim holds the
# topic's only slot reserved wakes a blocked claimer when that claim gives
# the slot back unused (G8, G9; doc/design.md, Wake rules: 3).
#
# Found by the spin model of limits (test/model/aion_wake_limits.pml,
# finding F8).  The worker, looking at a limited topic's passed fences,
# wakes at most as many claimers as the topic has free slots, and a slot
# reserved by a claim under way is not free.  That claim looked at the
# topic before the fence passed, so it does not take the row, and it gives
# its reservation back.  Wake rule 3 says it must then wake one blocked
# claimer if a row became claimable since it looked; but the worker recorded
# that only when it woke someone, and here it woke nobody.  The blocked claimer
# slept to its deadline beside a free slot and a claimable row.
#
# Topic f8 has limit 1 and one row, r1, delayed 6 s (time for the
# sessions below to start on a loaded machine); W blocks on f8.  A
# claims from f8 and slow in one claim(topics[], 1): it reserves f8's slot,
# sees only slow's row s1 (r1's fence has not passed), and the UPDATE of
# s1 runs a trigger that sleeps until 1.5 s after r1's fence, so the
# worker's look at f8 meets the reservation.  Then A returns f8's slot
# unused: W must return r1 promptly (within 5 s; its wait is 60 s).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use AionWake::Test;

my $node = aw_node('reservation');

$node->safe_psql('postgres', q{
SELECT aion_wake.set_limit('f8', 1);
CREATE FUNCTION public.slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- until 1.5 s after r1's fence
	PERFORM pg_catalog.pg_sleep(0.05)
	  FROM generate_series(1, 200)
	 WHERE pg_catalog.clock_timestamp() <
	       (SELECT visible_after + interval '1.5 s' FROM aion_wake.outbox
	         WHERE dispatch_key = 'r1');
	RETURN NEW;
END $$;
CREATE TRIGGER slow_claim BEFORE UPDATE ON aion_wake.outbox
	FOR EACH ROW WHEN (NEW.topic = 'slow') EXECUTE FUNCTION public.slow_claim();
SELECT aion_wake.enqueue('s1', '{}', 'slow');
SELECT aion_wake.enqueue('r1', '{}', 'f8', '6 s');
});

my $r1_fence = $node->safe_psql('postgres',
	"SELECT visible_after FROM aion_wake.outbox WHERE dispatch_key = 'r1'");

my $w = aw_waiter($node);
aw_start($w,
	"SELECT dispatch_key FROM aion_wake.claim('f8', 1, '30 s', '60 s')");
aw_poll_waiters($node, 1, 'W waits on f8');

my $a = aw_session($node);
aw_start($a,
	"SELECT dispatch_key FROM aion_wake.claim(ARRAY['f8', 'slow'], 1, '30 s', '0')");
ok( $node->poll_query_until(
		'postgres', qq{
SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                WHERE pid = $a->{pid} AND query LIKE '%aion_wake.claim%'
                  AND state = 'active')
       AND (SELECT pg_catalog.clock_timestamp() < visible_after
              FROM aion_wake.outbox WHERE dispatch_key = 'r1')}),
	'A is claiming before r1 is visible')
  or BAIL_OUT('A started too late to hold the reservation');

my ($out, $err) = aw_finish($a);
my $a_done = time;
is($out, 's1', "A got slow's row, not r1 (it looked before r1's fence)");
is($node->safe_psql('postgres', "SELECT clock_timestamp() > '$r1_fence'::timestamptz + '1 s'"),
	't', "r1's fence had passed while A still held the reservation");

($out, $err) = aw_finish($w);
my $elapsed = time - $a_done;
is($out, 'r1', 'W gets r1');
cmp_ok($elapsed, '<', 5,
	sprintf('... promptly after A returned the slot (%.1f s), not at its deadline', $elapsed));
is($node->safe_psql('postgres', "SELECT in_flight FROM aion_wake.topics WHERE topic = 'f8'"),
	'1', 'f8 has one lease, W\'s');

$a->quit;
$w->quit;
$node->stop;
done_testing();
