# Copyright (c) 2026, aion_wake authors
#
# 025_large_pulse.pl: a claimer blocked with a large max_rows spends a large
# pulse in time linear in its size.
#
# A pulse is handed to a claimer blocked on its topic, which re-offers the
# rows itself and claims them in the same probe.  The rows it moved must be
# matched with the rows it claimed (so that the ones it did not claim wake
# someone else), and the outcome of each candidate with its entry; done
# with nested loops over keys, a pulse of 40,000 slots took 7.5 times as
# long as one of 10,000 (quadratic, on the reviewer's machine).  With
# matching by position and by hash it is linear.
#
# This is the one test here that compares times, and only as a ratio of two
# runs on the same cluster, each the best of three: 5,000 rows against
# 40,000 (linear: 8 times; quadratic: 64 times).  The bound, 20 times, is
# far from both.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use AionWake::Test;

my $node = aw_node('largepulse');

# Park n rows of a topic, then time a blocked claim(max_rows => n) from the
# commit of pulse(topic, n) to its return with all n rows.
sub pulse_to_claim
{
	my ($topic, $n) = @_;
	$node->safe_psql('postgres', qq{
SELECT count(aion_wake.enqueue('$topic-' || g, '{}', '$topic')) FROM generate_series(1, $n) g;
SELECT count(aion_wake.park('$topic-' || g, '1 hour')) FROM generate_series(1, $n) g;});
	my $w = aw_session($node);
	aw_start($w,
		"SELECT count(*) FROM aion_wake.claim('$topic', $n, '1 hour', '60 s')");
	$node->poll_query_until('postgres',
		"SELECT waiters = 1 FROM aion_wake.status")
	  or die "the claimer did not block";
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('$topic', $n)");
	my ($out, $err) = aw_finish($w);
	my $elapsed = time - $t0;
	$w->quit;
	is($out, $n, "the blocked claim got all $n rows the pulse re-offered");
	return $elapsed;
}

sub best_of_three
{
	my ($n) = @_;
	my @t = map { pulse_to_claim("lp${n}_$_", $n) } 1 .. 3;
	my ($best) = sort { $a <=> $b } @t;
	note(sprintf("%d rows: best %.3f s of %s", $n, $best,
			join(', ', map { sprintf('%.3f', $_) } @t)));
	return $best;
}

my $small = best_of_three(5000);
my $large = best_of_three(40000);
my $ratio = $large / $small;
cmp_ok($ratio, '<', 20,
	sprintf("40,000 rows take %.1f times as long as 5,000 (linear: 8)", $ratio));

done_testing();
