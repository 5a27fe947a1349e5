# Copyright (c) 2026, aion_wake authors
#
# 006_waiters.pl: blocking claims (claim(..., wait => ...)).
#
# A waiter registers, probes and sleeps on its latch; a COMMIT that makes
# rows of its topic claimable wakes one waiter per row, oldest first, and
# the worker wakes waiters when a fence passes.  pg_regress cannot hold a
# session blocked while another commits, so this test does, with
# background psql sessions:
#   (a) a blocked claim returns the row soon after an enqueue commits, not
#       at the end of its wait;
#   (b) one row wakes exactly one of five waiters (the oldest), the other
#       four stay registered; four rows in one commit wake all four (G7);
#   (c) a delayed enqueue wakes a waiter when its fence passes, not before
#       and not at the end of the wait;
#   (h) an expired lease wakes a waiter (a fence the worker must find
#       itself), and fail() with zero back-off wakes one at its commit;
#   (i) a pulse's re-offer, reoffer() and park() with zero back-off wake
#       a waiter;
#   (j) a claim that rolls back wakes a waiter for the rows it gives back,
#       and so does a claim in a savepoint that rolls back;
#   (k) in a database no worker serves, a waiter still wakes at a fence;
#   (d) statement_timeout and pg_cancel_backend end a wait, and the waiter
#       leaves the registry;
#   (e) a waiter whose backend is terminated leaves the registry, and a new
#       waiter is still woken;
#   (g) idle waiters and the idle worker use no CPU (G5);
#   (l) a pulse handed to a waiter that is cancelled before it spends it
#       is spent by the worker (G2);
#   (f) aion_wake.max_wait caps a wait.
# Each part uses a topic of its own.  Timing assertions are loose: they
# only tell "woken by the event" from "slept until the wait ended".

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use AionWake::Test;

my $node = aw_node('waiters');
like(aw_worker_pid($node), qr/^\d+$/, 'the worker runs');

# --- (a) one waiter, one enqueue -------------------------------------------

{
	my $h = aw_session($node);
	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('t', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(a) the blocked claim is registered as a waiter');
	# the claim's own wait event from 17 on, plain 'Extension' on 15; it
	# registers before its first probe, so it may not be asleep yet
	my $claim_event = aw_wait_event($node, 'claim');
	ok( $node->poll_query_until(
			'postgres',
			"SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE pid = $h->{pid}",
			"Extension:$claim_event"),
		"(a) the waiter sleeps on its latch (Extension:$claim_event)");
	ok(!aw_done($h), '(a) the claim blocks while the topic is empty');

	my $t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('t1', '{}', 't')");
	my ($out, $err) = aw_finish($h);
	my $elapsed = time - $t0;
	is($out, 't1', '(a) the waiter returns the enqueued row');
	is($err, '', '(a) without error');
	cmp_ok($elapsed, '<', 5,
		"(a) woken by the commit, not by its 30 s wait (took ${elapsed}s)");
	aw_poll_waiters($node, 0, '(a) the waiter has left the registry');
	$h->quit;
}

# --- (b) five waiters, one row, then four rows ------------------------------

{
	my @h;
	for my $i (0 .. 4)
	{
		$h[$i] = aw_session($node);
		aw_start($h[$i],
			"SELECT dispatch_key FROM aion_wake.claim('five', 1, '30s', '20s')");
		# register one at a time, so "oldest" is well defined
		aw_poll_waiters($node, $i + 1, "(b) waiter $i registered");
	}

	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('f1', '{}', 'five')");
	my ($out, $err) = aw_finish($h[0]);
	is($out, 'f1', '(b) one row wakes the oldest waiter, which claims it');
	is($err, '', '(b) without error');
	aw_poll_waiters($node, 4, '(b) the other four are still waiting');
	is(aw_status($node, 'waiters'), 4,
		'(b) ... and stay waiting once the first has returned');
	for my $i (1 .. 4)
	{
		ok(!aw_done($h[$i]), "(b) waiter $i is still blocked");
	}
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM aion_wake.outbox WHERE topic = 'five' AND visible_after <= clock_timestamp()"
		),
		0,
		'(b) the row is leased, nothing else is visible');

	$node->safe_psql(
		'postgres', qq{
BEGIN;
SELECT aion_wake.enqueue('f' || i, '{}', 'five') FROM generate_series(2, 5) i;
COMMIT;});
	my @got;
	for my $i (1 .. 4)
	{
		($out, $err) = aw_finish($h[$i]);
		is($err, '', "(b) waiter $i returns without error");
		push @got, $out;
	}
	is( join(',', sort @got),
		'f2,f3,f4,f5',
		'(b) four rows in one commit wake all four waiters, one row each');
	aw_poll_waiters($node, 0, '(b) no waiter is left');
	$_->quit for @h;
}

# --- (c) a fence passing wakes a waiter --------------------------------------

{
	my $h = aw_session($node);
	# the row's visible_after after the claim is the claim's clock + lease,
	# so visible_after - lease - enqueued_at is how long after the enqueue
	# the claim happened, by the server's clock
	aw_start($h,
		"SELECT dispatch_key, extract(epoch FROM visible_after - interval '30 s' - enqueued_at) FROM aion_wake.claim('f', 1, '30s', '30s')"
	);
	aw_poll_waiters($node, 1, '(c) the waiter is registered');

	my $t0 = time;
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('fence1', '{}', 'f', '2 s')");
	ok(!aw_done($h), '(c) a row behind a fence does not wake the waiter');
	my ($out, $err) = aw_finish($h);
	my $elapsed = time - $t0;
	is($err, '', '(c) without error');
	my ($key, $after) = split /\|/, $out;
	is($key, 'fence1', '(c) the waiter returns the row once its fence passes');
	cmp_ok($after, '>=', 2.0,
		"(c) the claim happened after the fence, by the server's clock (${after}s)");
	cmp_ok($after, '<', 5.0, '(c) ... and soon after it');
	cmp_ok($elapsed, '>=', 1.9, "(c) the waiter slept until the fence (${elapsed}s)");
	cmp_ok($elapsed, '<', 10, '(c) ... and not until its 30 s wait ended');
	aw_poll_waiters($node, 0, '(c) the waiter has left the registry');
	$h->quit;
}

# --- (h) an expired lease and a zero back-off wake waiters ------------------

{
	# a lease that is already there when the waiter registers: the worker
	# must find that fence itself
	$node->safe_psql('postgres', qq{
SELECT aion_wake.enqueue('l1', '{}', 'l');
SELECT count(*) FROM aion_wake.claim('l', 1, '1500ms');});
	my $h = aw_session($node);
	my $t0 = time;
	aw_start($h,
		"SELECT dispatch_key, attempt, lease_token FROM aion_wake.claim('l', 1, '30s', '30s')");
	my ($out, $err) = aw_finish($h);
	my $elapsed = time - $t0;
	my ($key, $attempt, $token) = split /\|/, $out;
	is($key, 'l1', '(h) an expired lease wakes a waiter with the row');
	is($attempt, 0, '(h) ... whose attempt is unchanged');
	cmp_ok($elapsed, '<', 10, "(h) ... when the lease ends (${elapsed}s)");

	# fail() with no back-off makes the row claimable at its commit
	aw_start($h,
		"SELECT dispatch_key, attempt FROM aion_wake.claim('l', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(h) a waiter is registered behind the 30 s lease');
	$t0 = time;
	is( $node->safe_psql(
			'postgres', "SELECT aion_wake.fail('l1', 'boom', '0', $token)"),
		't',
		'(h) fail() with zero back-off');
	($out, $err) = aw_finish($h);
	$elapsed = time - $t0;
	is($out, 'l1|1', '(h) wakes the waiter with the row, attempt counted');
	cmp_ok($elapsed, '<', 5, "(h) ... at the commit, not at the lease's end (${elapsed}s)");
	is($err, '', '(h) without error');
	aw_poll_waiters($node, 0, '(h) no waiter is left');
	$h->quit;
}

# --- (i) re-offers and a zero-back-off park wake waiters -------------------

{
	# two rows parked for an hour
	$node->safe_psql(
		'postgres', q{
SELECT aion_wake.enqueue('r1', '{}', 'r');
SELECT count(*) FROM aion_wake.claim('r');
SELECT aion_wake.park('r1', '1 hour');
SELECT aion_wake.enqueue('r2', '{}', 'r');
SELECT count(*) FROM aion_wake.claim('r');
SELECT aion_wake.park('r2', '1 hour');});
	my $h = aw_session($node);
	my ($t0, $out, $err, $elapsed);

	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('r', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(i) a waiter is registered behind two parked rows');
	$t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('r', 1)");
	($out, $err) = aw_finish($h);
	$elapsed = time - $t0;
	is($out, 'r1', "(i) the worker's re-offer of a pulse wakes the waiter");
	cmp_ok($elapsed, '<', 5, "(i) ... at once (${elapsed}s)");

	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('r', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(i) the waiter waits again');
	$t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.reoffer('r', 1)");
	($out, $err) = aw_finish($h);
	$elapsed = time - $t0;
	is($out, 'r2', '(i) reoffer() wakes the waiter at its commit');
	cmp_ok($elapsed, '<', 5, "(i) ... at once (${elapsed}s)");

	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('r', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(i) the waiter waits again');
	$t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.park('r1', '0')");
	($out, $err) = aw_finish($h);
	$elapsed = time - $t0;
	is($out, 'r1', '(i) park() with zero back-off wakes the waiter');
	cmp_ok($elapsed, '<', 5, "(i) ... at its commit (${elapsed}s)");
	is($err, '', '(i) without error');
	aw_poll_waiters($node, 0, '(i) no waiter is left');
	$h->quit;
}

# --- (j) a claim that rolls back ----------------------------------------------

# A claim whose transaction (or savepoint) rolls back leaves its rows
# claimable at once, and wakes one waiter per row at the rollback.
foreach my $how ('ROLLBACK', 'ROLLBACK TO SAVEPOINT s')
{
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('rb1', '{}', 'rb')");
	my $a = aw_session($node);
	my $h = aw_session($node);
	$a->query_safe('BEGIN');
	$a->query_safe('SAVEPOINT s');
	is($a->query_safe("SELECT dispatch_key FROM aion_wake.claim('rb')"),
		'rb1', "(j) $how: a transaction claims the row");
	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('rb', 1, '30s', '20s')");
	aw_poll_waiters($node, 1, "(j) $how: a waiter is registered");
	my $t0 = time;
	$a->query_safe($how);
	my ($out, $err) = aw_finish($h);
	my $elapsed = time - $t0;
	is($out, 'rb1', "(j) $how: the waiter gets the row back");
	cmp_ok($elapsed, '<', 10,
		"(j) $how: ... at the rollback, not when its wait ends (${elapsed}s)");
	$a->query_safe('ROLLBACK') if $how ne 'ROLLBACK';
	$node->safe_psql('postgres', "SELECT aion_wake.complete('rb1')");
	$a->quit;
	$h->quit;
}

# --- (k) a database no worker serves -------------------------------------------

# Without a worker nobody finds passing fences for the waiters, so a
# waiter there sleeps no longer than its topic's next fence.
{
	$node->safe_psql('postgres', 'CREATE DATABASE unserved');
	$node->safe_psql('unserved', 'CREATE EXTENSION aion_wake');
	my $h = aw_session($node, 'unserved');
	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('u', 1, '30s', '25s')");
	ok( $node->poll_query_until(
			'unserved', "SELECT waiters >= 1 FROM aion_wake.status"),
		'(k) a waiter is registered in the unserved database');
	my $t0 = time;
	$node->safe_psql('unserved',
		"SELECT aion_wake.enqueue('u1', '{}', 'u', '1 s')");
	my ($out, $err) = aw_finish($h);
	my $elapsed = time - $t0;
	is($out, 'u1', '(k) the waiter gets the delayed row');
	cmp_ok($elapsed, '<', 15, "(k) ... at its fence, not when its wait ends (${elapsed}s)");
	$h->quit;
}

# --- (d) statement_timeout and cancel ----------------------------------------

{
	my $h = aw_session($node);
	$h->query_safe("SET statement_timeout = '300ms'");
	my $t0 = time;
	aw_start($h, "SELECT * FROM aion_wake.claim('c', 1, '1s', '20s')");
	my ($out, $err) = aw_finish($h);
	my $elapsed = time - $t0;
	like(
		$err,
		qr/canceling statement due to statement timeout/,
		'(d) statement_timeout ends a wait');
	cmp_ok($elapsed, '<', 5, "(d) ... when it fires (${elapsed}s)");
	aw_poll_waiters($node, 0, '(d) the timed-out waiter has left the registry');
	$h->query_safe('RESET statement_timeout');

	aw_start($h, "SELECT * FROM aion_wake.claim('c', 1, '1s', '20s')");
	aw_poll_waiters($node, 1, '(d) a second wait is registered');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($h->{pid})");
	($out, $err) = aw_finish($h);
	like(
		$err,
		qr/canceling statement due to user request/,
		'(d) pg_cancel_backend ends a wait');
	aw_poll_waiters($node, 0, '(d) the cancelled waiter has left the registry');

	# the session's registry slot is clean: it waits and is woken again
	aw_start($h,
		"SELECT dispatch_key FROM aion_wake.claim('c', 1, '1s', '20s')");
	aw_poll_waiters($node, 1, '(d) the same session waits again');
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('c1', '{}', 'c')");
	($out, $err) = aw_finish($h);
	is($out, 'c1', '(d) ... and is woken by an enqueue');
	is($err, '', '(d) ... without error');
	$h->quit;
}

# --- (e) a waiter's backend is terminated ------------------------------------

{
	my $h = aw_session($node);
	aw_start($h, "SELECT * FROM aion_wake.claim('e', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(e) the waiter is registered');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($h->{pid})");
	aw_poll_waiters($node, 0, '(e) a terminated waiter leaves the registry');
	$h->{run}->pump while $h->{run}->pumpable;
	like(
		$h->{stderr},
		qr/terminating connection due to administrator command/,
		'(e) the waiter was terminated');
	eval { $h->{run}->finish; };

	my $h2 = aw_session($node);
	aw_start($h2,
		"SELECT dispatch_key FROM aion_wake.claim('e', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(e) a new waiter is registered');
	my $t0 = time;
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('e1', '{}', 'e')");
	my ($out, $err) = aw_finish($h2);
	my $elapsed = time - $t0;
	is($out, 'e1', '(e) the new waiter, not the dead one, is woken');
	cmp_ok($elapsed, '<', 5, "(e) ... at the commit (${elapsed}s)");
	aw_poll_waiters($node, 0, '(e) no waiter is left');
	$h2->quit;
}

# --- (g) idle waiters and the idle worker use no CPU (G5) -------------------

# utime + stime of a process, in clock ticks (fields 14 and 15 of
# /proc/<pid>/stat; the command name, field 2, may hold spaces)
sub cpu_ticks
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or die "cannot read /proc/$pid/stat: $!";
	my $line = <$fh>;
	close $fh;
	$line =~ s/^.*\)\s+//;
	my @f = split /\s+/, $line;
	# $f[0] is field 3 (state), so field 14 is $f[11]
	return $f[11] + $f[12];
}

SKIP:
{
	skip 'no /proc', 1 unless -r "/proc/$$/stat";

	my @h;
	for my $i (0 .. 9)
	{
		$h[$i] = aw_session($node);
		aw_start($h[$i],
			"SELECT dispatch_key FROM aion_wake.claim('idle', 1, '30s', '20s')");
	}
	aw_poll_waiters($node, 10, '(g) ten waiters are registered');
	my $worker = aw_worker_pid($node);
	my $listener = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'aion_wake listener'"
	);
	like($listener, qr/^\d+$/, "(g) the worker's listening backend runs");

	# registered is not yet asleep: the window opens once the ten and the
	# worker have done their first looks and sleep (a slow server is still
	# at them when the ten are registered)
	my @pid = map { $_->{pid} } @h;
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) = 11 FROM pg_stat_activity
 WHERE pid IN (@{[join(', ', @pid, $worker)]}) AND wait_event_type = 'Extension'}),
		'(g) the ten and the worker sleep');

	# a measurement window, not a synchronisation: nothing happens in it
	my @before = map { cpu_ticks($_) } @pid;
	my $worker_before = cpu_ticks($worker);
	my $listener_before = cpu_ticks($listener);
	sleep 3;
	my @after = map { cpu_ticks($_) } @pid;
	my $worker_after = cpu_ticks($worker);
	my $listener_after = cpu_ticks($listener);

	my $delta = 0;
	$delta += $after[$_] - $before[$_] for 0 .. 9;
	cmp_ok($delta, '<=', 2,
		"(g) ten idle waiters used at most 2 clock ticks in 3 s ($delta)");
	my $wd = $worker_after - $worker_before;
	my $ld = $listener_after - $listener_before;
	cmp_ok($wd, '<=', 2,
		"(g) the idle worker used at most 2 clock ticks in 3 s ($wd)");
	cmp_ok($ld, '<=', 2, "(g) the worker's listening backend too ($ld)");
	is(aw_status($node, 'waiters'), 10, '(g) all ten are still waiting');
	ok(!aw_done($h[$_]), "(g) waiter $_ is still blocked") for 0 .. 9;

	# they were live waiters: ten rows in one commit wake all ten
	$node->safe_psql(
		'postgres', qq{
BEGIN;
SELECT aion_wake.enqueue('i' || i, '{}', 'idle') FROM generate_series(1, 10) i;
COMMIT;});
	my @got;
	for my $i (0 .. 9)
	{
		my ($out, $err) = aw_finish($h[$i]);
		push @got, $out;
	}
	is(scalar(grep { /^i\d+$/ } @got), 10, '(g) ten rows wake all ten waiters');
	my %seen = map { $_ => 1 } @got;
	is(scalar(keys %seen), 10, '(g) ... each with a row of its own');
	aw_poll_waiters($node, 0, '(g) no waiter is left');
	$_->quit for @h;
}

# --- (l) a pulse handed to a waiter that is cancelled before spending it ----
#
# A pulse goes to a claimer blocked on its topic, which spends it itself;
# the worker is woken only when nobody waits.  If that claimer then ends
# without spending it, its exit must wake the worker (G2).  The waiter is
# stopped (SIGSTOP) so that the pulse and a cancel both reach it before it
# runs again; when it resumes, its first step is the cancel.

{
	$node->safe_psql('postgres', q{
		SELECT aion_wake.enqueue('l1', '{}', 'l');
		SELECT aion_wake.park(dispatch_key, '1 hour', lease_token)
		  FROM aion_wake.claim('l', 1, '30 s');
	});
	my $h = aw_session($node);
	aw_start($h, "SELECT dispatch_key FROM aion_wake.claim('l', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, '(l) a claimer waits on topic l');
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event = '" . aw_wait_event($node, 'claim')
			  . "' FROM pg_stat_activity WHERE pid = $h->{pid}"),
		'(l) ... asleep on its latch');
	kill 'STOP', $h->{pid};
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('l', 1)");
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($h->{pid})");
	kill 'CONT', $h->{pid};
	my ($out, $err) = aw_finish($h);
	like($err, qr/canceling statement due to user request/,
		'(l) the waiter was cancelled before it spent the pulse');
	ok(aw_wait_reoffered($node, 'l1'),
		'(l) the pulse is spent all the same: the parked row is re-offered');
	aw_poll_waiters($node, 0, '(l) no waiter is left');
	$h->quit;
}

# --- (f) aion_wake.max_wait caps a wait --------------------------------------

{
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET aion_wake.max_wait = '500ms'; SELECT pg_reload_conf();"
	);
	ok( $node->poll_query_until(
			'postgres', "SELECT current_setting('aion_wake.max_wait') = '500ms'"),
		'(f) max_wait is 500ms for new sessions');
	my $t0 = time;
	my $n = $node->safe_psql('postgres',
		"SELECT count(*) FROM aion_wake.claim('empty', 1, '30s', '30 s')");
	my $elapsed = time - $t0;
	is($n, 0, '(f) a capped wait on an empty topic returns no row');
	cmp_ok($elapsed, '<', 10, "(f) ... well before its 30 s wait (${elapsed}s)");
	cmp_ok($elapsed, '>=', 0.45, '(f) ... after waiting about max_wait');
	is(aw_status($node, 'waiters'), 0, '(f) and leaves the registry');
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET aion_wake.max_wait; SELECT pg_reload_conf();');
}

$node->stop;
done_testing();
