# Copyright (c) 2026, aion_wake authors
#
# 016_worker_busy_fences.pl: waiters registered while the worker is busy
# are woken at their fences once it is free (a defect of 1.0; G5;
# doc/design.md, Fences that pass).
#
# A waiter on a topic whose next fence nobody knows asks the worker to look
# it up, and the worker then wakes it when that fence passes.  Two defects
# showed when the worker was busy at that moment:
#
#   (a) its first look at the topic asked only for the next fence ahead, so
#       a row whose fence had passed meanwhile (visible, but after the
#       waiter's probe) was never counted: enqueue('u1', delay => '3 s'),
#       then a waiter on u; worker free at +4 s; the waiter returned at
#       its 20 s deadline;
#   (b) it looked at no more than 32 topics per pass and left the others
#       out of its sleep deadline: of 80 topics whose waiters registered
#       while it was busy, with fences after it was free, 48 waiters waited
#       out their deadline.
#
# The worker is held busy as in 011_kill_worker_batch.pl: a test trigger
# makes its re-offer of a row of topic "busy" wait for an advisory lock the
# test holds, and the test waits until the worker waits on that lock.
# Each waiter reports how long after its row's fence it returned.
#
# No timer may set a blocked claim's latch here (waiter sessions come from
# aw_waiter, so no statistics flush timer is armed): it would hide the
# defect.

use strict;
use warnings;

use AionWake::Test;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $lock_id = 7016;
my $nb = 80;

my $node = aw_node('busyfences', conf => "max_connections = 120\n");

$node->safe_psql(
	'postgres', qq{
CREATE FUNCTION public.aw_test_hold() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	IF NEW.topic = 'busy' AND OLD.parked_at IS NOT NULL AND NEW.parked_at IS NULL THEN
		PERFORM pg_catalog.pg_advisory_xact_lock($lock_id);
	END IF;
	RETURN NEW;
END
\$\$;
CREATE TRIGGER aw_test_hold BEFORE UPDATE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION public.aw_test_hold();
});

my $worker = aw_worker_pid($node);
like($worker, qr/^\d+$/, 'the worker runs');

# Hold the advisory lock, park a row of topic busy and pulse it: the worker
# blocks in its re-offer.  Returns the session holding the lock.
sub make_worker_busy
{
	my ($key, $what) = @_;
	my $holder = aw_session($node);
	$holder->query_safe("SELECT pg_advisory_lock($lock_id)");
	$node->safe_psql(
		'postgres', qq{
SELECT aion_wake.enqueue('$key', '{}', 'busy');
SELECT count(*) FROM aion_wake.claim('busy', 1, '1 hour');
SELECT aion_wake.park('$key', '1 hour');
SELECT aion_wake.pulse('busy', 1);});
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE pid = $worker AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
		"$what the worker is held inside its re-offer");
	return $holder;
}

# What a waiter prints when its claim returns: the key and how many seconds
# after the row's fence ($delay after its enqueue).
sub claim_sql
{
	my ($topic, $delay, $wait) = @_;
	return qq{
SELECT dispatch_key || ' ' || round(extract(epoch FROM
         clock_timestamp() - enqueued_at - interval '$delay')::numeric, 2)
  FROM aion_wake.claim('$topic', 1, '30 s', '$wait')};
}

# ---------------------------------------------------------------------
# (a) a row whose fence passed before the worker's first look
# ---------------------------------------------------------------------
{
	my $holder = make_worker_busy('bz1', '(a)');
	my $w = aw_waiter($node);
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('u1', '{}', 'u', '3 s')");
	aw_start($w, claim_sql('u', '1 s', '20 s'));
	aw_poll_waiters($node, 1, '(a) a claimer waits on topic u');

	ok( $node->poll_query_until(
			'postgres',
			"SELECT visible_after < clock_timestamp() FROM aion_wake.outbox WHERE dispatch_key = 'u1'"
		),
		"(a) u1's fence has passed");
	# still registered and u1 unclaimed: its probe ran before u1's fence
	is( $node->safe_psql(
			'postgres', q{
SELECT s.waiters || '/' || (o.lease_token IS NULL)
  FROM aion_wake.status s, aion_wake.outbox o WHERE o.dispatch_key = 'u1'}),
		'1/true',
		'(a) the claimer sleeps, u1 visible and unclaimed, the worker busy');

	my $t0 = time;
	$holder->query_safe("SELECT pg_advisory_unlock($lock_id)");
	my ($out, $err) = aw_finish($w);
	my $elapsed = time - $t0;
	like($out, qr/^u1 /, '(a) the claimer gets u1 once the worker is free');
	cmp_ok($elapsed, '<', 5,
		sprintf('(a) ... within 5 s of the release, not at its 20 s deadline (%.1fs)',
			$elapsed));
	is($err, '', '(a) ... without error');
	ok( $node->poll_query_until(
			'postgres',
			"SELECT parked_at IS NULL FROM aion_wake.outbox WHERE dispatch_key = 'bz1'"),
		'(a) the worker finished the re-offer that held it');
	aw_poll_waiters($node, 0, '(a) no waiter is left');
	$w->quit;
	$holder->quit;
}

# ---------------------------------------------------------------------
# (b) 80 topics whose waiters register while the worker is busy
# ---------------------------------------------------------------------
{
	my $holder = make_worker_busy('bz2', '(b)');
	my @w;
	for my $i (1 .. $nb)
	{
		$w[$i] = aw_waiter($node);
		aw_start($w[$i], claim_sql("v$i", '3 s', '30 s'));
	}
	aw_poll_waiters($node, $nb, "(b) $nb claimers wait, one per topic");

	# Rows with fences 3 s ahead, and the worker free before any of them.
	$node->safe_psql('postgres', qq{
SELECT count(*) FROM (SELECT aion_wake.enqueue('v' || g, '{}', 'v' || g, '3 s')
                        FROM generate_series(1, $nb) g) e});
	$holder->query_safe("SELECT pg_advisory_unlock($lock_id)");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM aion_wake.outbox
 WHERE topic ~ '^v[0-9]+\$' AND visible_after > clock_timestamp()}),
		$nb,
		'(b) the worker is free before the first of their fences');

	my (@late, @missed);
	my $worst = 0;
	for my $i (1 .. $nb)
	{
		my ($out, $err) = aw_finish($w[$i]);
		if ($out =~ /^v$i (-?[\d.]+)$/)
		{
			$worst = $1 if $1 > $worst;
			push @late, "v$i ($1 s)" if $1 >= 5;
		}
		else
		{
			push @missed, "v$i" . ($err ne '' ? " ($err)" : '');
		}
		$w[$i]->quit;
	}
	is(scalar(@missed), 0,
		"(b) each of the $nb claimers gets its own row")
	  or diag('without their row: ' . join(', ', @missed));
	is(scalar(@late), 0,
		"(b) none waits out its deadline: each returns within 5 s of its fence (worst: ${worst}s)")
	  or diag('late: ' . join(', ', @late));
	aw_poll_waiters($node, 0, '(b) no waiter is left');
	$holder->quit;
}

$node->stop;
done_testing();
