# Copyright (c) 2026, aion_wake authors
#
# 044_rates.pl: rates and pauses (G10; doc/design.md, Rates and pauses).
#
#   (a) exactness: eight claimers claim with wait from a topic of 3 starts
#       per 400 ms, rolling back a third of their claims; from every
#       start's server clock (its lease's start), no window of 400 ms holds
#       more than 3 starts, rolled-back claims included;
#   (b) a claimer held back only by the rate is woken when the window
#       admits its start: not before, and promptly after;
#   (c) a pause: a blocked claimer returns at its end, not before; resume()
#       wakes a blocked claimer at its commit;
#   (d) set_rate while claimers block: a raise wakes one, the removal
#       wakes all;
#   (e) a database no worker serves: a blocked claimer sleeps no longer
#       than the moment the window admits it;
#   (f) kill -9 of a backend, and an immediate shutdown, with a window
#       open: the rate is loaded with a full window, so that no window
#       across the crash holds more than max_starts starts, and a claimer
#       blocked after it is woken when the window ends.
#
# "Promptly" is the contract's 200 ms, on the server's clock.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use AionWake::Test;

my $prompt = aw_prompt(0.2);

my $node = aw_node(
	'rates', conf => q{
statement_timeout = '90s'
restart_after_crash = on
});

sub sql
{
	return $node->safe_psql($_[1] // 'postgres', $_[0]);
}

sub enqueue
{
	my ($t, $n, $db) = @_;
	sql("SELECT count(aion_wake.enqueue('$t' || g, '{}', '$t')) FROM generate_series(1, $n) g",
		$db);
	return;
}

# a claim now: the start (epoch) of each row it took
sub claim_now
{
	my ($t, $n, $db) = @_;
	my $out = sql(qq{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('$t', $n, '1 hour')}, $db);
	return grep { $_ ne '' } split /\n/, $out;
}

# a blocking claim of one row in session $s
sub start_claim
{
	my ($s, $t, $wait) = @_;
	$wait //= '20 s';
	aw_start($s, qq{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('$t', 1, '1 hour', '$wait')});
	return;
}

# the start the blocked claim returned, or '' when it took nothing
sub finished_start
{
	my ($s) = @_;
	my ($out) = aw_finish($s);
	$out =~ s/\s+//g;
	return $out;
}

sub waiters_of
{
	my ($t, $n, $db) = @_;
	return $node->poll_query_until($db // 'postgres',
		"SELECT coalesce((SELECT waiters FROM aion_wake.topics WHERE topic = '$t'), 0) = $n");
}

# the most starts in any window [s, s + per) of a sorted list of starts
sub most_in_a_window
{
	my ($per, @starts) = @_;
	my $most = 0;
	my $j = 0;
	@starts = sort { $a <=> $b } @starts;
	for my $i (0 .. $#starts)
	{
		$j++ while $starts[$i] - $starts[$j] >= $per;
		$most = $i - $j + 1 if $i - $j + 1 > $most;
	}
	return $most;
}

# ---------------------------------------------------------------------
# (a) exactness with eight claimers and rollbacks
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_rate('ra', 3, '400 ms')");
enqueue('ra', 400);
my @claimers = map { aw_session($node) } 1 .. 8;
my @starts;
my $rolled_back = 0;
my $until = time + 4;
my %open;
for my $i (0 .. $#claimers)
{
	$claimers[$i]->query_safe('BEGIN');
	start_claim($claimers[$i], 'ra', '2 s');
	$open{$i} = 1;
}
while (%open)
{
	for my $i (keys %open)
	{
		my $s = $claimers[$i];
		next unless aw_done($s);
		my $start = finished_start($s);
		push @starts, $start if $start ne '';
		# every third claim that started a row rolls back: its start counts
		# all the same
		if ($start ne '' && @starts % 3 == 1)
		{
			$s->query_safe('ROLLBACK');
			$rolled_back++;
		}
		else
		{
			$s->query_safe('COMMIT');
		}
		if (time < $until)
		{
			$s->query_safe('BEGIN');
			start_claim($s, 'ra', '2 s');
		}
		else
		{
			delete $open{$i};
		}
	}
	usleep(2_000);
}
$_->quit for @claimers;
cmp_ok(scalar(@starts), '>=', 20, '(a) the claimers started rows (' . scalar(@starts) . ')');
cmp_ok($rolled_back, '>', 0, "(a) some of the claims rolled back ($rolled_back)");
is(most_in_a_window(0.4, @starts), 3,
	'(a) no window of 400 ms holds more than 3 starts, rolled-back claims included');

# ---------------------------------------------------------------------
# (b) a claimer held back by the rate is woken when the window admits it
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_rate('rb', 1, '2 s')");
enqueue('rb', 3);
my ($s0) = claim_now('rb', 1);
my $w = aw_waiter($node);
start_claim($w, 'rb');
ok(waiters_of('rb', 1), '(b) a claimer waits, held back by the rate');
my $s1 = finished_start($w);
ok($s1 ne '', '(b) it takes a row');
cmp_ok($s1 - $s0, '>=', 2, '(b) not before the window admits it');
cmp_ok($s1 - ($s0 + 2), '<=', $prompt, '(b) promptly after');

# ---------------------------------------------------------------------
# (c) pause and resume
# ---------------------------------------------------------------------
enqueue('pc', 2);
my $end = sql(q{
SELECT extract(epoch FROM t) FROM (SELECT clock_timestamp() + interval '1.5 s' AS t) x,
  LATERAL aion_wake.pause('pc', x.t)});
$w = aw_waiter($node);
start_claim($w, 'pc');
ok(waiters_of('pc', 1), '(c) a claimer waits on a paused topic');
my $s2 = finished_start($w);
cmp_ok($s2, '>=', $end, '(c) it takes a row no earlier than the end of the pause');
cmp_ok($s2 - $end, '<=', $prompt, '(c) and promptly at it');

sql(q{SELECT aion_wake.pause('pc', clock_timestamp() + interval '1 hour')});
$w = aw_waiter($node);
start_claim($w, 'pc');
ok(waiters_of('pc', 1), '(c) a claimer waits on a topic paused for an hour');
my $t0 = time;
sql(q{SELECT aion_wake.resume('pc')});
ok(finished_start($w) ne '', '(c) resume() wakes it');
cmp_ok(time - $t0, '<=', 2, '(c) at the commit, not at the end of the hour');

# ---------------------------------------------------------------------
# (d) a raise wakes one blocked claimer, the removal wakes all
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_rate('rd', 1, '1 hour')");
enqueue('rd', 4);
claim_now('rd', 1);
my @w = map { aw_waiter($node) } 1 .. 3;
start_claim($_, 'rd') for @w;
ok(waiters_of('rd', 3), '(d) three claimers wait');
sql("SELECT aion_wake.set_rate('rd', 2, '1 hour')");
ok($node->poll_query_until('postgres',
	"SELECT waiters = 2 FROM aion_wake.topics WHERE topic = 'rd'"),
	'(d) a raise by one start wakes one claimer, which takes a row');
usleep(300_000);
is(sql("SELECT waiters FROM aion_wake.topics WHERE topic = 'rd'"), '2',
	'(d) and only one');
sql("SELECT aion_wake.set_rate('rd', NULL)");
ok(waiters_of('rd', 0), '(d) removing the rate wakes the others');
my @took = grep { $_ ne '' } map { finished_start($_) } @w;
is(scalar(@took), 3, '(d) each took a row');

# ---------------------------------------------------------------------
# (e) a database no worker serves
# ---------------------------------------------------------------------
sql('CREATE DATABASE unserved');
sql('CREATE EXTENSION aion_wake', 'unserved');
sql("SELECT aion_wake.set_rate('re', 1, '1.5 s')", 'unserved');
enqueue('re', 2, 'unserved');
my ($s3) = claim_now('re', 1, 'unserved');
$w = aw_waiter($node, 'unserved');
start_claim($w, 're');
my $s4 = finished_start($w);
ok($s4 ne '', '(e) a claimer in a database no worker serves takes a row');
cmp_ok($s4 - $s3, '>=', 1.5, '(e) not before the window admits it');
cmp_ok($s4 - ($s3 + 1.5), '<=', $prompt, '(e) promptly after');

# ---------------------------------------------------------------------
# (f) crashes with a window open
# ---------------------------------------------------------------------
sub crash_case
{
	my ($what, $crash) = @_;
	my $t = "rf_$what";
	sql("SELECT aion_wake.set_rate('$t', 2, '3 s')");
	enqueue($t, 6);
	my @before = claim_now($t, 2);
	is(scalar(@before), 2, "(f) $what: two starts fill the window");
	$crash->();
	# claims before the rate is loaded take nothing; a blocked one waits
	my $w = aw_waiter($node);
	start_claim($w, $t);
	my $first = finished_start($w);
	ok($first ne '', "(f) $what: a claimer after the restart takes a row");
	my @after = claim_now($t, 4);
	is(most_in_a_window(3, @before, $first, @after), 2,
		"(f) $what: no window of 3 s across the crash holds more than 2 starts");
	return;
}

crash_case('kill9', sub {
	my $s = aw_session($node);
	my $offset = -s $node->logfile;
	kill 'KILL', $s->{pid};
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	$node->poll_query_until('postgres', 'SELECT worker_pid IS NOT NULL FROM aion_wake.status');
	eval { $s->quit };
});

crash_case('immediate', sub {
	$node->stop('immediate');
	$node->start;
	$node->poll_query_until('postgres', 'SELECT worker_pid IS NOT NULL FROM aion_wake.status');
});

$node->stop;
done_testing();
