# Copyright (c) 2026, aion_wake authors
#
# 029_many_topics.pl: one claimer waiting on many topics
# (claim(topics[], max_rows, lease, wait); doc/design.md, Many-topic
# waits; G9).
#
# A claim over up to 64 topics registers on each; a row made claimable on
# any of them wakes exactly one waiter registered on that topic, the oldest;
# wakes for one waiter coalesce in its ready inbox (its latch is set once,
# however many of its topics become ready before it runs); a wake the
# waiter does not use is passed on to the next waiter of that topic; a fence
# passing on any of its topics wakes it at that moment.  The isolation spec
# topics.spec holds what one waiter shows; this test holds what needs
# several waiters, a stopped process or a cancel:
#   (a) a row on any of 64 topics (the first, the middle, the last) wakes
#       the claim; it counts once in status.waiters and once in
#       topics.waiters of each topic; duplicates in the array are ignored;
#   (b) a row of an unrelated topic wakes none of three claimers waiting
#       on three topics; a row of one of their topics wakes exactly one
#       (the oldest), the other two are not even woken (no herd);
#   (c) a claim that finds its row at once, or whose wait ends, wakes no
#       claimer waiting on its other topics (nothing to wake it for);
#   (d) coalescing: three topics made ready while the claimer is stopped
#       (SIGSTOP) give it one wake and, with max_rows 3, all three rows in
#       one call, oldest fence first; with max_rows 1 it takes the oldest,
#       and the claimers next in line, which were not woken while it was
#       stopped, get the two other rows at once; a wake that reaches it
#       while it probes other topics is passed on as it leaves;
#   (e) cancel and terminate while waiting on many topics: the registry is
#       cleaned (status.waiters and topics.waiters back to 0) and a later
#       wake reaches the other waiters; the cancelled session waits again;
#   (f) a claimer woken for a row that is cancelled or terminated in the
#       middle of its probe (here: blocked in its UPDATE of the row, by a
#       trigger that waits for an advisory lock) passes the wake on: the next waiter of the topic
#       gets the row when the lock goes, not at the end of its wait (G9);
#   (g) a fence passing on any of the topics wakes the claim at that
#       moment: a fence written while it sleeps, and fences that were there
#       before it registered, oldest first across the topics.
#
# Every claimer is an aw_waiter session (no statistics timer armed that
# could set its latch and let it find by chance a row it was never woken
# for), used for one claim, except where said.  "Not woken" is read from
# /proc: a backend sleeping in claim(wait) makes no context switch until
# its latch is set; those claimers are also older than
# authentication_timeout, set to 1 s here (a backend's authentication timer
# stays armed and sets its latch once, that long after it started).  The
# windows in which a wake must not come are short polls, not
# synchronisation: each follows the commit that would have set the latch.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use AionWake::Test;

if (!-r "/proc/$$/status")
{
	plan skip_all => 'needs /proc/PID/status';
}

my $node = aw_node('many_topics', conf => "authentication_timeout = '1s'\n");

# context switches of a process so far
sub ctxsw
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or die "cannot read /proc/$pid/status: $!";
	my $n = 0;
	while (my $line = <$fh>)
	{
		$n += $1 if $line =~ /^(?:non)?voluntary_ctxt_switches:\s+(\d+)/;
	}
	close $fh;
	return $n;
}

# Poll until these backends sleep in claim(wait) and are older than
# authentication_timeout, so that no stray timer sets their latch: from
# then on only a wake does.  Returns their context switches then, by pid.
sub settled
{
	my (@h) = @_;
	my $pids = join(',', map { $_->{pid} } @h);
	my $n = scalar(@h);
	$node->poll_query_until('postgres', qq{
SELECT count(*) = $n FROM pg_stat_activity
 WHERE pid IN ($pids) AND state = 'active' AND wait_event_type = 'Extension'
   AND backend_start < clock_timestamp() - interval '1.5 s'})
	  or die "backends $pids never settled in their wait";
	return { map { $_->{pid} => ctxsw($_->{pid}) } @h };
}

# The sessions of @h whose backend woke (made a context switch) since
# $base, watched for $secs seconds; empty if none did.
sub woken_within
{
	my ($base, $secs, @h) = @_;
	my $end = time + $secs;
	for (;;)
	{
		my @woken = grep { ctxsw($_->{pid}) != $base->{ $_->{pid} } } @h;
		return @woken if @woken || time >= $end;
		usleep(20_000);
	}
}

sub enqueue
{
	my ($key, $topic, $delay) = @_;
	$delay //= '0';
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('$key', '{}', '$topic', '$delay')");
	return;
}

sub waiters { return aw_status($node, 'waiters'); }

# topics.waiters of some topics, "topic:n" joined by spaces, in their order
sub topic_waiters
{
	my (@t) = @_;
	my $list = join(',', map { "'$_'" } @t);
	return $node->safe_psql('postgres', qq{
SELECT string_agg(t || ':' || coalesce(v.waiters::text, 'absent'), ' ' ORDER BY o)
  FROM unnest(ARRAY[$list]) WITH ORDINALITY AS u(t, o)
  LEFT JOIN aion_wake.topics v ON v.topic = u.t});
}

# put topics in the topic table, so that aion_wake.topics shows them (a
# pulse with nothing parked leaves a short-lived credit)
sub in_topic_table
{
	my (@t) = @_;
	my $list = join(',', map { "'$_'" } @t);
	$node->safe_psql('postgres',
		"SELECT count(*) FROM (SELECT aion_wake.pulse(t) FROM unnest(ARRAY[$list]) t) p");
	return;
}

sub array_of { return 'ARRAY[' . join(',', map { "'$_'" } @_) . ']'; }

# --- (a) a row on any of 64 topics --------------------------------------------

{
	my @t = map { "m$_" } 1 .. 64;
	in_topic_table(@t);
	# 64 distinct topics, ten of them twice
	my $arr = array_of(@t, @t[0 .. 9]);
	foreach my $n (64, 1, 33)
	{
		my $h = aw_waiter($node);
		aw_start($h, "SELECT dispatch_key FROM aion_wake.claim($arr, 1, '30 s', '20 s')");
		settled($h);
		if ($n == 64)
		{
			is(waiters(), 1, '(a) a claim on 64 topics is one waiter in status.waiters');
			is( $node->safe_psql('postgres',
					"SELECT count(*) FILTER (WHERE waiters = 1) FROM aion_wake.topics WHERE topic ~ '^m[0-9]+\$'"),
				64,
				'(a) ... and one in topics.waiters of each of its 64 topics (duplicates ignored)');
		}
		my $t0 = time;
		enqueue("m$n-row", "m$n");
		my ($out, $err) = aw_finish($h);
		my $elapsed = time - $t0;
		is($out, "m$n-row", "(a) a row on topic $n of 64 wakes the claim, which takes it");
		is($err, '', "(a) ... without error");
		cmp_ok($elapsed, '<', 5, "(a) ... at the commit, not at the end of the wait (${elapsed}s)");
		$h->quit;
	}
	is(waiters(), 0, '(a) the claim has left the registry');
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM aion_wake.topics WHERE topic ~ '^m[0-9]+\$' AND waiters <> 0"),
		0,
		'(a) ... and every topic of it');
}

# --- (b) an unrelated topic wakes nobody; one waiter per row, no herd ----------

{
	my @w;
	for my $i (0 .. 2)
	{
		$w[$i] = aw_waiter($node);
		aw_start($w[$i],
			"SELECT dispatch_key FROM aion_wake.claim(ARRAY['h1', 'h2', 'h3'], 1, '30 s', '25 s')");
		# one at a time, so that "oldest" is well defined
		aw_poll_waiters($node, $i + 1, "(b) claimer $i waits on h1, h2, h3");
	}
	my $u = aw_waiter($node);
	aw_start($u, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['u1', 'u2'], 1, '30 s', '25 s')");
	my $base = settled(@w, $u);

	enqueue('u-row', 'u2');
	my ($out, $err) = aw_finish($u);
	is($out, 'u-row', '(b) a row of u2 wakes the claimer of u1, u2');
	my @woken = woken_within($base, 0.5, @w);
	is(scalar(@woken), 0, '(b) ... and none of the three claimers of h1, h2, h3');
	ok(!aw_done($_), '(b) ... which still wait') for @w;

	enqueue('h-row', 'h2');
	aw_poll_waiters($node, 2, '(b) a row of h2: one claimer returns');
	my @done = grep { aw_done($w[$_]) } 0 .. 2;
	is("@done", '0', '(b) ... exactly one, the oldest');
	($out, $err) = aw_finish($w[0]);
	is($out, 'h-row', '(b) ... with the row');
	@woken = woken_within($base, 0.5, @w[1, 2]);
	is(scalar(@woken), 0, '(b) the two others were not even woken (no herd)');

	$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('h1-row', '{}', 'h1') AND aion_wake.enqueue('h3-row', '{}', 'h3')});
	my @got = map { (aw_finish($w[$_]))[0] } 1, 2;
	is(join(',', sort @got), 'h1-row,h3-row',
		'(b) two rows of two topics in one commit: both claimers return, one row each');
	is(waiters(), 0, '(b) no claimer is left');
	$_->quit for @w, $u;
}

# --- (c) a claim that needs no wake wakes nobody -------------------------------

{
	my $x = aw_waiter($node);
	aw_start($x, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['sb'], 1, '30 s', '25 s')");
	my $base = settled($x);

	enqueue('sa-row', 'sa');
	is( $node->safe_psql('postgres',
			"SELECT dispatch_key FROM aion_wake.claim(ARRAY['sa', 'sb', 'sc'], 1, '30 s', '10 s')"),
		'sa-row',
		'(c) a claim over sa, sb, sc finds the row of sa at once');
	my @woken = woken_within($base, 0.5, $x);
	is(scalar(@woken), 0, '(c) ... and wakes nobody: not the claimer waiting on sb');

	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM aion_wake.claim(ARRAY['sb', 'sc'], 1, '30 s', '200 ms')"),
		0,
		'(c) a claim over sb, sc whose wait ends finds nothing');
	@woken = woken_within($base, 0.5, $x);
	is(scalar(@woken), 0, '(c) ... and wakes nobody either');

	enqueue('sb-row', 'sb');
	my ($out, $err) = aw_finish($x);
	is($out, 'sb-row', '(c) the claimer of sb still waits, and a row of sb wakes it');
	$x->quit;
}

# --- (d) coalescing ---------------------------------------------------------------

{
	my $w = aw_waiter($node);
	aw_start($w, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['c1', 'c2', 'c3'], 3, '30 s', '25 s')");
	settled($w);
	kill 'STOP', $w->{pid};
	# three commits; the fences follow their order
	enqueue('c2-row', 'c2');
	enqueue('c3-row', 'c3');
	enqueue('c1-row', 'c1');
	is(waiters(), 1, '(d) rows of three topics committed while the claimer is stopped');
	kill 'CONT', $w->{pid};
	my ($out, $err) = aw_finish($w);
	is($out, "c2-row\nc3-row\nc1-row",
		'(d) with max_rows 3 it takes all three in one call, oldest fence first');
	is($err, '', '(d) ... without error');
	$w->quit;
}

{
	my $w = aw_waiter($node);
	aw_start($w, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['e1', 'e2', 'e3'], 1, '30 s', '25 s')");
	aw_poll_waiters($node, 1, '(d) a claimer waits on e1, e2, e3 (max_rows 1)');
	my $y2 = aw_waiter($node);
	aw_start($y2, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['ex', 'e2'], 1, '30 s', '20 s')");
	aw_poll_waiters($node, 2, '(d) ... then one on ex, e2');
	my $y3 = aw_waiter($node);
	aw_start($y3, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['e3'], 1, '30 s', '20 s')");
	aw_poll_waiters($node, 3, '(d) ... then one on e3');
	my $base = settled($w, $y2, $y3);

	kill 'STOP', $w->{pid};
	enqueue('e1-row', 'e1');
	enqueue('e2-row', 'e2');
	enqueue('e3-row', 'e3');
	my @woken = woken_within($base, 0.5, $y2, $y3);
	is(scalar(@woken), 0,
		'(d) three commits on e1, e2, e3 while the first claimer is stopped: all three wakes go to it, none to the claimers behind it');
	my $t0 = time;
	kill 'CONT', $w->{pid};
	my ($out, $err) = aw_finish($w);
	is($out, 'e1-row', '(d) resumed, it takes the oldest row');
	($out, $err) = aw_finish($y2);
	is($out, 'e2-row', '(d) the wake of e2 it did not use is passed on to the claimer of ex, e2');
	($out, $err) = aw_finish($y3);
	my $elapsed = time - $t0;
	is($out, 'e3-row', '(d) the wake of e3 to the claimer of e3');
	cmp_ok($elapsed, '<', 5, "(d) ... both at once, not at the end of their waits (${elapsed}s)");
	is(waiters(), 0, '(d) no claimer is left');
	$_->quit for $w, $y2, $y3;
}

# A wake that reaches the claimer while it probes, for a topic it does not
# look at in that probe, is passed on as it leaves with its row.  (Above,
# the two rows the first claimer locked but did not take woke the others
# at its commit; here it never locks the second row.)  Its probe is held in
# the middle, in its UPDATE of the row of n1 (a trigger waits for an
# advisory lock the test holds), while the row of n2 commits.
{
	$node->safe_psql('postgres', q{
CREATE FUNCTION public.hold_probe() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.topic IN ('n1', 'pa') THEN
		PERFORM pg_advisory_xact_lock(20029);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER hold_probe BEFORE UPDATE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION public.hold_probe();});
	my $w = aw_waiter($node);
	aw_start($w, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['n1', 'n2'], 1, '30 s', '25 s')");
	aw_poll_waiters($node, 1, '(d) a claimer waits on n1, n2');
	my $y = aw_waiter($node);
	aw_start($y, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['n2'], 1, '30 s', '20 s')");
	aw_poll_waiters($node, 2, '(d) ... then one on n2');
	my $base = settled($w, $y);

	my $s = aw_session($node);
	$s->query_safe('BEGIN');
	$s->query_safe('SELECT pg_advisory_xact_lock(20029)');
	enqueue('n1-row', 'n1');
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $w->{pid}"),
		"(d) a row of n1 wakes the first claimer, whose probe waits in the middle");
	enqueue('n2-row', 'n2');
	my @woken = woken_within($base, 0.5, $y);
	is(scalar(@woken), 0, '(d) a row of n2 then: its wake goes to the first claimer too, not to the claimer of n2');
	my $t0 = time;
	$s->query_safe('ROLLBACK');
	my ($out, $err) = aw_finish($w);
	is($out, 'n1-row', '(d) the lock gone, the first claimer takes the row of n1');
	($out, $err) = aw_finish($y);
	my $elapsed = time - $t0;
	is($out, 'n2-row', '(d) the wake of n2 it held is passed on: the claimer of n2 gets its row');
	cmp_ok($elapsed, '<', 5, "(d) ... at once, not at the end of its wait (${elapsed}s)");
	is(waiters(), 0, '(d) no claimer is left');
	$_->quit for $w, $y, $s;
}

# --- (e) cancel and terminate while waiting on many topics ---------------------

{
	my @k = map { "k$_" } 1 .. 8;
	in_topic_table(@k);
	my $arr = array_of(@k);
	my $h = aw_waiter($node);

	aw_start($h, "SELECT dispatch_key FROM aion_wake.claim($arr, 1, '30 s', '25 s')");
	settled($h);
	is(topic_waiters(@k), join(' ', map { "$_:1" } @k),
		'(e) a claim on k1..k8 counts in topics.waiters of each');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($h->{pid})");
	my ($out, $err) = aw_finish($h);
	like($err, qr/canceling statement due to user request/, '(e) pg_cancel_backend ends the wait');
	is(waiters(), 0, '(e) the cancelled claim has left status.waiters');
	is(topic_waiters(@k), join(' ', map { "$_:0" } @k), '(e) ... and topics.waiters of each topic');

	my $x = aw_waiter($node);
	aw_start($x, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['k5'], 1, '30 s', '25 s')");
	settled($x);
	enqueue('k5-row', 'k5');
	($out, $err) = aw_finish($x);
	is($out, 'k5-row', '(e) a later row of k5 wakes another claimer');

	# (a second claim in that session: a statistics timer may be armed)
	aw_start($h, "SELECT dispatch_key FROM aion_wake.claim($arr, 1, '30 s', '25 s')");
	settled($h);
	enqueue('k8-row', 'k8');
	($out, $err) = aw_finish($h);
	is($out, 'k8-row', '(e) the cancelled session waits on k1..k8 again and is woken');

	# terminate one claim on k1..k8 that is first in line; the next waiter
	# of k3 is still woken
	my $t = aw_waiter($node);
	aw_start($t, "SELECT dispatch_key FROM aion_wake.claim($arr, 1, '30 s', '25 s')");
	aw_poll_waiters($node, 1, '(e) a claimer waits on k1..k8');
	my $x2 = aw_waiter($node);
	aw_start($x2, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['k3'], 1, '30 s', '25 s')");
	aw_poll_waiters($node, 2, '(e) ... and behind it one on k3');
	settled($t, $x2);
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($t->{pid})");
	aw_poll_waiters($node, 1, '(e) a terminated claim leaves status.waiters');
	is(topic_waiters(@k), join(' ', map { $_ eq 'k3' ? "$_:1" : "$_:0" } @k),
		'(e) ... and topics.waiters of each of its topics');
	$t->{run}->pump while $t->{run}->pumpable;
	like($t->{stderr}, qr/terminating connection due to administrator command/,
		'(e) the claim was terminated');
	eval { $t->{run}->finish; };
	my $t0 = time;
	enqueue('k3-row', 'k3');
	($out, $err) = aw_finish($x2);
	my $elapsed = time - $t0;
	is($out, 'k3-row', '(e) a later row of k3 wakes the claimer that was behind it');
	cmp_ok($elapsed, '<', 5, "(e) ... at the commit (${elapsed}s)");
	is(waiters(), 0, '(e) no claimer is left');
	$_->quit for $h, $x, $x2;
}

# --- (f) cancelled or terminated in the middle of a probe ------------------------

foreach my $how ('pg_cancel_backend', 'pg_terminate_backend')
{
	my $key = $how eq 'pg_cancel_backend' ? 'p-cancel' : 'p-terminate';
	my $w = aw_waiter($node);
	aw_start($w, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['pa', 'pb'], 1, '30 s', '25 s')");
	aw_poll_waiters($node, 1, "(f) $how: a claimer waits on pa, pb");
	my $x = aw_waiter($node);
	aw_start($x, "SELECT dispatch_key FROM aion_wake.claim(ARRAY['pa'], 1, '30 s', '20 s')");
	aw_poll_waiters($node, 2, "(f) $how: ... and behind it one on pa");
	settled($w, $x);

	# the trigger of (d) holds a probe's UPDATE of a row of pa until the
	# advisory lock goes
	my $s = aw_session($node);
	$s->query_safe('BEGIN');
	$s->query_safe('SELECT pg_advisory_xact_lock(20029)');
	enqueue($key, 'pa');
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $w->{pid}"),
		"(f) $how: the row wakes the first claimer, whose probe waits in the middle");
	$node->safe_psql('postgres', "SELECT $how($w->{pid})");
	my $t0 = time;
	$s->query_safe('ROLLBACK');
	my ($out, $err) = aw_finish($x);
	my $elapsed = time - $t0;
	is($out, $key, "(f) $how: the claimer behind it gets the row");
	cmp_ok($elapsed, '<', 5,
		"(f) $how: ... once the lock goes, not at the end of its wait: the wake was passed on (${elapsed}s)");
	if ($how eq 'pg_cancel_backend')
	{
		($out, $err) = aw_finish($w);
		like($err, qr/canceling statement due to user request/, "(f) $how: the first claim was cancelled");
		$w->quit;
	}
	else
	{
		$w->{run}->pump while $w->{run}->pumpable;
		eval { $w->{run}->finish; };
	}
	aw_poll_waiters($node, 0, "(f) $how: no claimer is left");
	$_->quit for $x, $s;
}
$node->safe_psql('postgres',
	'DROP TRIGGER hold_probe ON aion_wake.outbox; DROP FUNCTION public.hold_probe()');

# --- (g) fences on any of the topics ------------------------------------------------

{
	# the claim's clock when it took the row (it leases for 30 s) minus the
	# row's fence (enqueued_at + delay), by the server's clock
	my $late = "extract(epoch FROM visible_after - interval '30 s' - enqueued_at - (payload->>'delay')::interval)";

	# a fence written while the claim sleeps
	my $h = aw_waiter($node);
	aw_start($h, "SELECT dispatch_key, $late FROM aion_wake.claim(ARRAY['f1', 'f2', 'f3'], 1, '30 s', '25 s')");
	settled($h);
	$node->safe_psql('postgres',
		q{SELECT aion_wake.enqueue('f3-row', '{"delay": "1.5 s"}', 'f3', '1.5 s')});
	my ($out, $err) = aw_finish($h);
	my ($key, $after) = split /\|/, $out;
	is($key, 'f3-row', '(g) a fence passing on f3 wakes the claim on f1, f2, f3');
	cmp_ok($after, '>=', 0, "(g) ... which takes the row at its fence, not before (${after}s after it)");
	cmp_ok($after, '<', 1, '(g) ... and not long after it');

	# fences that are there before the claim registers: the worker finds
	# them, and the earliest across the topics comes first
	$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('g1-row', '{"delay": "3 s"}', 'g1', '3 s');
SELECT aion_wake.enqueue('g3-row', '{"delay": "1.5 s"}', 'g3', '1.5 s');});
	foreach my $want ('g3-row', 'g1-row')
	{
		$h->quit;
		$h = aw_waiter($node);
		aw_start($h, "SELECT dispatch_key, $late FROM aion_wake.claim(ARRAY['g1', 'g2', 'g3'], 1, '30 s', '25 s')");
		($out, $err) = aw_finish($h);
		($key, $after) = split /\|/, $out;
		is($key, $want, "(g) fences ahead on g1 and g3 before the claim: it gets $want");
		cmp_ok($after, '>=', 0, "(g) ... at its fence, not before (${after}s after it)");
		cmp_ok($after, '<', 1, '(g) ... and not long after it');
	}
	is(waiters(), 0, '(g) no claimer is left');
	$h->quit;
}

$node->stop;
done_testing();
