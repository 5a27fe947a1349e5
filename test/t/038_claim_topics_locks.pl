# Copyright (c) 2026, aion_wake authors
#
# 038_claim_topics_locks.pl: claim(topics[], max_rows) row-locks only the
# rows it leases, so the rest stay claimable while its transaction is open.
#
# The claim leases the oldest max_rows rows across its topics.  It used to
# lock up to max_rows rows of every topic first (FOR UPDATE SKIP LOCKED per
# topic) and lease the oldest max_rows of those: the others stayed locked
# until its transaction ended, neither leased nor claimable, so a claimer of
# another topic in the meantime got nothing (and one that waited slept
# until that commit).
#
# Topics a and b hold three rows each, a's older.  S, in an open
# transaction, claims 2 rows of a and b: it gets a1 and a2.  Meanwhile a
# claim of b must get b1, b2 and b3; one of a and b together must get a3
# and then b's rows, oldest first; and with two rows each, a waiting claim
# of b returns b1 at once (it slept out its 5 s before).  Each case runs
# on unlimited topics and on limited ones (a reservation per topic).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('claim_topics_locks');

# Topics $tag-a and $tag-b with $n rows each, a's older than b's.
sub fill
{
	my ($tag, $n, $limited) = @_;
	$node->safe_psql('postgres', qq{
SELECT aion_wake.set_limit('$tag-a', 10);
SELECT aion_wake.set_limit('$tag-b', 10);}) if $limited;
	$node->safe_psql('postgres', qq{
SELECT aion_wake.enqueue('$tag-a' || i, '{}', '$tag-a', (i * 2) * interval '1 ms') FROM generate_series(1, $n) AS i;
SELECT aion_wake.enqueue('$tag-b' || i, '{}', '$tag-b', (10 + i) * interval '1 ms') FROM generate_series(1, $n) AS i;
SELECT pg_sleep(0.05);});
	return;
}

# S, left open: claims 2 rows of a and b, which must be a1 and a2.
sub open_claim
{
	my ($tag, $what) = @_;
	my $s = aw_session($node);
	my $got = $s->query_safe(qq{BEGIN;
SELECT dispatch_key FROM aion_wake.claim(ARRAY['$tag-a', '$tag-b'], 2, '1 hour') ORDER BY 1});
	is(join(',', split /\n/, $got), "$tag-a1,$tag-a2", "$what: S leases the two oldest rows, of a");
	return $s;
}

sub keys_of
{
	my ($sql) = @_;
	return join(',', split /\n/, $node->safe_psql('postgres', $sql));
}

for my $case ('unlimited', 'limited')
{
	my $l = $case eq 'limited';
	my $t = $l ? 'l' : 'u';

	fill("$t.1", 3, $l);
	my $s = open_claim("$t.1", $case);
	is(keys_of(qq{SELECT dispatch_key FROM aion_wake.claim('$t.1-b', 5, '1 hour') ORDER BY 1}),
		"$t.1-b1,$t.1-b2,$t.1-b3",
		"$case: while S is open, a claim of b gets all of b's rows");
	$s->query_safe('COMMIT');
	$s->quit;

	fill("$t.2", 3, $l);
	$s = open_claim("$t.2", $case);
	is( keys_of(qq{SELECT dispatch_key FROM aion_wake.claim(ARRAY['$t.2-a', '$t.2-b'], 3, '1 hour')}),
		"$t.2-a3,$t.2-b1,$t.2-b2",
		"$case: while S is open, a claim of a and b gets a3 and the oldest of b, in order");
	$s->query_safe('COMMIT');
	$s->quit;

	# b's only rows were locked by S: a waiting claim used to sleep out its wait
	fill("$t.3", 2, $l);
	$s = open_claim("$t.3", $case);
	my $w = aw_waiter($node);
	aw_start($w, qq{SELECT dispatch_key FROM aion_wake.claim('$t.3-b', 1, '1 hour', '5 s')});
	my ($out, $err) = aw_finish($w);
	is($out, "$t.3-b1", "$case: a waiting claim of b takes b1 while S is open");
	$w->quit;
	$s->query_safe('COMMIT');
	$s->quit;
}

$node->stop;
done_testing();
