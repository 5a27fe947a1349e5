# Copyright (c) 2026, aion_wake authors
#
# 040_one_spender.pl: a pulse handed to a blocked claimer is spent by that
# claimer alone.
#
# A pulse of k slots committed while a claimer blocks on its topic is
# handed to that claimer, which re-offers the parked rows and claims them
# in one probe.  The worker must leave the topic alone meanwhile, even
# when something else wakes it: here a pulse of another topic, nobody
# waiting on it, committed in the same transaction.  Before the spender
# was recorded on the topic, the worker spent part of the pulse in the
# same moment; the rows it re-offered got fences later than the claimer's
# look, so the claim returned with fewer than k rows (025_large_pulse.pl
# saw this under load, woken by chance).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('onespender');
my $n = 5000;

# the other topic: the worker wakes for its pulse (nobody waits on it)
$node->safe_psql('postgres', q{
SELECT count(aion_wake.enqueue('other-' || g, '{}', 'other')) FROM generate_series(1, 3) g;
SELECT count(aion_wake.park('other-' || g, '1 hour')) FROM generate_series(1, 3) g;});

for my $i (1 .. 3)
{
	my $topic = "one$i";
	$node->safe_psql('postgres', qq{
SELECT count(aion_wake.enqueue('$topic-' || g, '{}', '$topic')) FROM generate_series(1, $n) g;
SELECT count(aion_wake.park('$topic-' || g, '1 hour')) FROM generate_series(1, $n) g;});
	my $w = aw_session($node);
	aw_start($w,
		"SELECT count(*) FROM aion_wake.claim('$topic', $n, '1 hour', '60 s')");
	$node->poll_query_until('postgres',
		"SELECT waiters = 1 FROM aion_wake.status")
	  or die "the claimer did not block";
	$node->safe_psql('postgres',
		"SELECT aion_wake.pulse('$topic', $n), aion_wake.pulse('other', 1)");
	my ($out, $err) = aw_finish($w);
	$w->quit;
	is($out, $n, "run $i: the blocked claim got all $n rows of the pulse handed to it");
	# the other topic's pulse was the worker's: its row was re-offered
	$node->poll_query_until('postgres',
		"SELECT count(*) = $i FROM aion_wake.outbox WHERE topic = 'other' AND parked_at IS NULL")
	  or die "the worker did not spend the other topic's pulse";
}

done_testing();
