# Copyright (c) 2026, aion_wake authors
#
# 046_lost_wake.pl: the lost-wake detector (README, Monitoring;
# doc/design.md, Monitoring).
#
# A blocked claim that takes, after a sleep, a row of a topic whose wake
# did not reach it, fenced after its previous look and more than
# aion_wake.lost_wake_tolerance before the probe, while no wake of the
# topic went to anybody, counts a lost wake (status.lost_wakes,
# topic_health.lost_wakes) and logs one line.  The test shows:
#   (a) wakes as they are: a waiter woken by a commit, one woken by the
#       worker at a fence, one woken for a claim rolled back, and one that
#       ends at its deadline with nothing count no lost wake;
#   (b) a row the waiter's first look saw, locked by another session that
#       then commits (which wakes nobody: README, Limits) is not counted --
#       the detector counts only rows fenced after the waiter's last look;
#   (c) with the test hook aion_wake.debug_drop_wakes on, which drops every
#       wake that rows becoming claimable send, a waiter sleeps to its
#       deadline beside an enqueued row, takes it there, and the detector
#       fires: the count, the topic's count, one line in the log; the same
#       for a delayed enqueue whose fence the worker finds (its wake
#       dropped); with aion_wake.lost_wake_tolerance = 0 it stays off;
#   (d) with the hook off again, wakes come as before and the count stays.
# The deadline is what ends the waits in (c): a loose bound tells "slept
# to the deadline" from "woken".  The waits are seconds long: what a slow
# server spends setting up a waiter comes out of them.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use AionWake::Test;

my $node = aw_node('lost_wake');
like(aw_worker_pid($node), qr/^\d+$/, 'the worker runs');

sub lost
{
	return aw_status($node, 'lost_wakes');
}

sub topic_lost
{
	my ($topic) = @_;
	return $node->safe_psql('postgres',
		"SELECT lost_wakes FROM aion_wake.topic_health WHERE topic = '$topic'");
}

# a blocked claim of one row of $topic, waiting $wait; returns the session
sub block
{
	my ($topic, $wait, $what) = @_;
	my $h = aw_waiter($node);
	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('$topic', 1, '30s', '$wait')");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $h->{pid} "
			  . "AND wait_event_type = 'Extension'"),
		"$what: the claim sleeps");
	return $h;
}

# --- (a) wakes as they are ---------------------------------------------------

{
	my $h = block('ok_commit', '30s', '(a) commit');
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('c1', '{}', 'ok_commit')");
	my ($out) = aw_finish($h);
	is($out, 'c1', '(a) a commit wakes the waiter');
	$h->quit;

	$h = block('ok_fence', '30s', '(a) fence');
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('f1', '{}', 'ok_fence', '300 ms')");
	($out) = aw_finish($h);
	is($out, 'f1', '(a) the worker wakes the waiter at the fence');
	$h->quit;

	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('r1', '{}', 'ok_rollback')");
	my $locker = aw_session($node);
	$locker->query_safe("BEGIN");
	$locker->query_safe("SELECT count(*) FROM aion_wake.claim('ok_rollback', 1)");
	$h = block('ok_rollback', '30s', '(a) rollback');
	$locker->query_safe("ROLLBACK");
	($out) = aw_finish($h);
	is($out, 'r1', '(a) a claim rolled back wakes the waiter');
	$h->quit;

	$h = block('ok_empty', '2 s', '(a) deadline');
	($out) = aw_finish($h);
	is($out, '', '(a) a waiter ends at its deadline with nothing');
	$h->quit;

	is(lost(), 0, '(a) no lost wake');
	is( $node->safe_psql('postgres',
			"SELECT claims_timed_out FROM aion_wake.topic_health WHERE topic = 'ok_empty'"),
		1, '(a) topic_health counts the claim that timed out');

	# (b) a row the first look saw locked, given back by a commit that
	# wakes nobody: the waiter takes it at its deadline, uncounted
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('l1', '{}', 'locked')");
	$locker->query_safe("BEGIN");
	$locker->query_safe(
		"SELECT 1 FROM aion_wake.outbox WHERE dispatch_key = 'l1' FOR UPDATE");
	$h = block('locked', '4 s', '(b) locked');
	$locker->query_safe("COMMIT");
	($out) = aw_finish($h);
	is($out, 'l1', '(b) the waiter takes the row at its deadline');
	is(lost(), 0, '(b) a row its first look saw is not counted');
	$h->quit;
	$locker->quit;
}

# --- (c) the test hook drops every wake --------------------------------------

my $offset = -s $node->logfile;
$node->safe_psql('postgres', "ALTER SYSTEM SET aion_wake.debug_drop_wakes = on");
$node->reload;
# a new session reads the file: every later one drops its wakes
$node->poll_query_until('postgres', "SHOW aion_wake.debug_drop_wakes", 'on')
  or die 'the hook did not come on';

{
	my $h = block('drop_commit', '4 s', '(c) commit');
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('d1', '{}', 'drop_commit')");
	my ($out) = aw_finish($h);
	my $elapsed = time - $t0;
	is($out, 'd1', '(c) the waiter takes the row at its deadline');
	cmp_ok($elapsed, '>', 1, "(c) not woken: it slept to the deadline (${elapsed}s)");
	is(lost(), 1, '(c) the detector counts one lost wake');
	is(topic_lost('drop_commit'), 1, "(c) and so does the topic's row of topic_health");
	ok( $node->wait_for_log(
			qr/LOG:  aion_wake: lost wake on topic "drop_commit": a blocked claim took a row claimable for \d+\.\d ms/,
			$offset),
		'(c) one line in the log names the topic and the delay');
	$h->quit;

	# a fence the worker finds: the worker's wake is dropped (it reloads
	# on SIGHUP; by now it has)
	$h = block('drop_fence', '4 s', '(c) fence');
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('d2', '{}', 'drop_fence', '200 ms')");
	($out) = aw_finish($h);
	is($out, 'd2', '(c) the waiter takes the delayed row at its deadline');
	is(lost(), 2, '(c) the detector counts it');
	is(topic_lost('drop_fence'), 1, "(c) on the delayed row's topic");
	$h->quit;

	# tolerance 0: the detector is off
	$node->safe_psql('postgres', "ALTER SYSTEM SET aion_wake.lost_wake_tolerance = 0");
	$node->reload;
	$node->poll_query_until('postgres', "SHOW aion_wake.lost_wake_tolerance", '0')
	  or die 'the tolerance did not change';
	$h = block('drop_off', '3 s', '(c) off');
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('d3', '{}', 'drop_off')");
	($out) = aw_finish($h);
	is($out, 'd3', '(c) tolerance 0: the waiter takes the row at its deadline');
	is(lost(), 2, '(c) tolerance 0: nothing counted');
	$h->quit;
}

# --- (d) the hook off again --------------------------------------------------

$node->safe_psql('postgres', "ALTER SYSTEM RESET aion_wake.debug_drop_wakes");
$node->safe_psql('postgres', "ALTER SYSTEM RESET aion_wake.lost_wake_tolerance");
$node->reload;
$node->poll_query_until('postgres', "SHOW aion_wake.debug_drop_wakes", 'off')
  or die 'the hook did not go off';
{
	my $h = block('ok_again', '30s', '(d) commit');
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('a1', '{}', 'ok_again')");
	my ($out) = aw_finish($h);
	is($out, 'a1', '(d) a commit wakes the waiter again');
	$h->quit;
	is(lost(), 2, '(d) the count stays');
}

$node->stop;
done_testing();
