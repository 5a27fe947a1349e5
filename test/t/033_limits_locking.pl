# Copyright (c) 2026, aion_wake authors
#
# 033_limits_locking.pl: the topic locks that keep a limit exact (G8).
#
#   (a) set_limit() under REPEATABLE READ and SERIALIZABLE counts the live
#       leases of the claim whose topic lock it waited for: it counts with
#       a snapshot taken once the lock is held, not the transaction's;
#   (b) claim(ARRAY['b', 'a']) and a transaction that calls set_limit('a')
#       then set_limit('b') (and the other way round) never deadlock:
#       topics are locked in one order, and set_limit() waits for a topic
#       lock only while it holds none;
#   (c) counting a topic's live leases is an index range scan bounded by
#       visible_after (which equals leased_until for every live lease), not
#       a walk over every row of the topic: the plan, read with
#       auto_explain, says so.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('locking', conf => "deadlock_timeout = '200ms'\n");

# a session is waiting for a heavyweight lock, or has finished its statement
sub blocked_or_done
{
	my ($s) = @_;
	return $node->poll_query_until('postgres', qq{
SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $s->{pid} AND NOT granted)
    OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $s->{pid} AND state = 'active')});
}

# ---------------------------------------------------------------------
# (a) the count sees the claim it waited for, whatever the isolation
# ---------------------------------------------------------------------
foreach my $level ('REPEATABLE READ', 'SERIALIZABLE')
{
	my $t = $level eq 'SERIALIZABLE' ? 'sz' : 'rr';
	$node->safe_psql('postgres',
		"SELECT aion_wake.enqueue('$t' || g, '{}', '$t') FROM generate_series(1, 3) g");
	my $claimer = aw_session($node);
	my $limiter = aw_session($node);
	$claimer->query_safe('BEGIN');
	is($claimer->query_safe("SELECT count(*) FROM aion_wake.claim('$t', 1, '1 hour')"),
		'1', "(a) $level: an open claim holds a lease of the unlimited topic");
	$limiter->query_safe("BEGIN ISOLATION LEVEL $level");
	# the transaction's snapshot is taken now, before the claim commits
	$limiter->query_safe('SELECT count(*) FROM aion_wake.outbox');
	aw_start($limiter, "SELECT aion_wake.set_limit('$t', 1); COMMIT");
	ok(blocked_or_done($limiter), "(a) $level: set_limit waits for the claim or is done");
	$claimer->query_safe('COMMIT');
	my ($out, $err) = aw_finish($limiter);
	is($err, '', "(a) $level: set_limit commits");
	is(aw_limit_of($node, $t), '1/1', "(a) $level: the committed claim's lease counts");
	is($node->safe_psql('postgres', "SELECT count(*) FROM aion_wake.claim('$t', 5, '1 hour')"),
		'0', "(a) $level: nothing more is granted at the limit");
	is(aw_live_leases($node, $t), '1', "(a) $level: one live lease under a limit of 1");
	$claimer->quit;
	$limiter->quit;
}

# ---------------------------------------------------------------------
# (b) no deadlock between a claim of two topics and two set_limit calls
# ---------------------------------------------------------------------
foreach my $order ([ 'a', 'b' ], [ 'b', 'a' ])
{
	my ($first, $second) = @$order;
	my $label = "set_limit('$first'); set_limit('$second')";
	$node->safe_psql('postgres', q{
SELECT aion_wake.set_limit(t, NULL) FROM unnest(ARRAY['a', 'b']) t;
SELECT aion_wake.enqueue(t || g || clock_timestamp(), '{}', t)
  FROM unnest(ARRAY['a', 'b']) t, generate_series(1, 2) g;});
	my $limiter = aw_session($node);
	my $claimer = aw_session($node);
	$limiter->query_safe('BEGIN');
	$limiter->query_safe("SELECT aion_wake.set_limit('$first', 5)");
	aw_start($claimer, "BEGIN; SELECT count(*) FROM aion_wake.claim(ARRAY['$second', '$first'], 4, '1 s')");
	ok(blocked_or_done($claimer), "(b) $label: the claim waits or is done");
	aw_start($limiter, "SELECT aion_wake.set_limit('$second', 5)");
	ok(blocked_or_done($limiter), "(b) $label: the second set_limit waits or is done");
	# the deadlock detector (200 ms here) would end one of them with an error
	ok($node->poll_query_until('postgres', qq{
SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity
                    WHERE pid IN ($claimer->{pid}, $limiter->{pid}) AND state = 'active')}),
		"(b) $label: both statements have ended");
	my @errs;
	foreach my $s ($claimer, $limiter)
	{
		my ($out, $err) = aw_finish($s);
		push @errs, $err if $err ne '';
	}
	# the claim commits first: set_limit's commit waits for its topic locks
	foreach my $s ($claimer, $limiter)
	{
		aw_start($s, 'COMMIT');
		my ($out, $err) = aw_finish($s);
		push @errs, $err if $err ne '' && $err !~ /no transaction|ROLLBACK/;
	}
	is(join('', @errs), '', "(b) $label against claim(ARRAY['$second', '$first']): no deadlock, no error");
	is($node->safe_psql('postgres',
		"SELECT string_agg(topic || '=' || max_in_flight, ',' ORDER BY topic) FROM aion_wake.limits WHERE topic IN ('a', 'b')"),
		'a=5,b=5', "(b) $label: both limits committed");
	$claimer->quit;
	$limiter->quit;
}

# ---------------------------------------------------------------------
# (c) the live-lease count is an index range scan on visible_after
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	"SELECT aion_wake.enqueue('plan' || g, '{}', 'plan') FROM generate_series(1, 50) g");
$node->safe_psql('postgres', "SELECT count(*) FROM aion_wake.claim('plan', 3, '1 hour')");
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SELECT aion_wake.set_limit('plan', 5);});
is(aw_limit_of($node, 'plan'), '5/3', '(c) the three live leases count');
my $log = slurp_file($node->logfile, $offset);
my @plans = grep { /leased_until OPERATOR\(pg_catalog\.>\)/ && /Index/ }
  split /LOG:  duration: /, $log;
ok(scalar(@plans) > 0, '(c) the plan of the live-lease count is logged');
# (a range of fences per priority of the topic: AW_TOPIC_PRIORITIES)
ok((grep { /Index Cond: \(\(topic = \$1\) AND \(priority = r\.p\) AND \(visible_after > \$2\)\)/ } @plans) == @plans,
	'(c) every live-lease count is bounded by visible_after in its index condition')
  or diag(join("\n----\n", @plans));

$node->stop;
done_testing();
