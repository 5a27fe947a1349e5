# Copyright (c) 2026, aion_wake authors
#
# 023_kept_plans.pl: every statement aion_wake keeps a plan for is planned
# as an index plan, whatever the table held when the plan was made.
#
# aion_wake prepares its statements once per backend and keeps their
# generic plans.  A plan made while aion_wake.outbox held three rows would,
# left to the statistics, scan the table sequentially (or join it through
# a hash of the whole table), and keep doing so when the table has grown a
# thousandfold: claims, parks and re-offers would then cost O(table) each,
# exactly when a backlog needs them cheap (G7).  src/plans.c plans
# aion_wake's statements with sequential and bitmap scans off, and the
# statements are written so that an index plan exists for each.
#
# Claims of the 1.2 schema walk a topic's priorities (src/claim.c): the
# rows enqueued here have several, and the table grows with rows of ten
# priorities whose fences are ahead, the rows a claim must not read.  At
# the end, in a database of its own, a claim's plan is made on rows of one
# priority, analyzed, in a topic whose indexes had grown (the plan then
# chose to scan (topic, visible_after) and filter the priority, before the
# update script set the column's n_distinct and dropped that index), and
# used on rows of ten.
#
# The test makes every kept plan while the table holds three analyzed
# rows -- in a session (claim of one topic and of two, park with and
# without a lease token, complete, fail, dead_letter, enqueue, reoffer,
# the batch settles of each kind and a batch hand-off)
# and in the worker (its re-offer, its fence look-ups) -- then grows the
# table to 20,000 rows without analyzing it, and reads the plans that
# auto_explain logs for the nested statements: none may scan
# aion_wake.outbox other than by index.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use AionWake::Test;

my $node = aw_node('plans', conf => <<'CONF');
shared_preload_libraries = 'aion_wake, auto_explain'
auto_explain.log_min_duration = -1
auto_explain.log_nested_statements = on
autovacuum = off
CONF

# three analyzed rows: the statistics a small table has
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('s' || g, '{}', 'small') FROM generate_series(1, 3) g;
ANALYZE aion_wake.outbox;});

# Log the plan of every statement from now on, nested ones too (with how
# it ran when analyze is set), once session h has taken in the reload;
# returns where the log is now.  pg_reload_conf() only signals the
# postmaster, which signals each backend after it has read the file
# itself: a session's next statement may come before that, so h is
# asked until it shows the new settings.
sub start_logging_plans
{
	my ($h, $analyze) = @_;
	$node->safe_psql('postgres',
		    'ALTER SYSTEM SET auto_explain.log_min_duration = 0;'
		  . 'ALTER SYSTEM SET auto_explain.log_analyze = '
		  . ($analyze ? 'on' : 'off') . ';'
		  . 'SELECT pg_reload_conf();');
	wait_for_settings($h, '0', $analyze ? 'on' : 'off');
	return -s $node->logfile;
}

# back to logging no plan, and session h has taken that in too
sub stop_logging_plans
{
	my ($h) = @_;
	$node->safe_psql('postgres', q{
ALTER SYSTEM RESET auto_explain.log_min_duration;
ALTER SYSTEM RESET auto_explain.log_analyze;
SELECT pg_reload_conf();});
	wait_for_settings($h, '-1', 'off');
}

# wait until session h's auto_explain settings are these
sub wait_for_settings
{
	my ($h, $min_duration, $analyze) = @_;
	my $want = "$min_duration|$analyze";
	my $end = time + $PostgreSQL::Test::Utils::timeout_default;
	my $got;
	while (1)
	{
		$got = $h->query_safe(q{
SELECT current_setting('auto_explain.log_min_duration') || '|'
       || current_setting('auto_explain.log_analyze')});
		last if $got eq $want || time >= $end;
		Time::HiRes::usleep(50_000);
	}
	die "a session did not take in auto_explain = $want (it has $got)"
	  unless $got eq $want;
}

# the session that keeps plans made now
my $s = aw_session($node);
my $waiter = aw_session($node);

sub run_everything
{
	my ($tag) = @_;
	$s->query_safe(qq{
SELECT aion_wake.enqueue('$tag-a', '{}', 'small', priority => 5);
SELECT aion_wake.enqueue('$tag-b', '{}', 'small', priority => -5);
SELECT aion_wake.enqueue('$tag-c', '{}', 'small');
SELECT aion_wake.enqueue('$tag-d', '{}', 'small');
SELECT aion_wake.enqueue('$tag-e', '{}', 'small');
SELECT count(*) FROM aion_wake.claim('small', 5);
SELECT aion_wake.enqueue('$tag-f', '{}', 'small2', priority => 3);
SELECT count(*) FROM aion_wake.claim(ARRAY['small', 'small2'], 2);
SELECT aion_wake.park('$tag-a', '1 hour');
SELECT aion_wake.park('$tag-b', '1 hour',
       (SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = '$tag-b'));
SELECT aion_wake.complete('$tag-c');
SELECT aion_wake.fail('$tag-d', 'x', '1 hour');
SELECT aion_wake.dead_letter('$tag-e', 'x');
SELECT aion_wake.reoffer('small', 1);
SELECT aion_wake.pulse('small', 1);
SELECT count(aion_wake.enqueue('$tag-' || k, '{}', 'smallb'))
  FROM unnest(ARRAY['g', 'h', 'i', 'j', 'k']) k;
SELECT count(*) FROM aion_wake.claim('smallb', 5);
SELECT aion_wake.complete_many(ARRAY['$tag-g'],
       ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = '$tag-g'));
SELECT aion_wake.fail_many(ARRAY['$tag-h'], 'x', '1 hour',
       ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = '$tag-h'));
SELECT aion_wake.park_many(ARRAY['$tag-i'], '1 hour',
       ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = '$tag-i'));
SELECT aion_wake.dead_letter_many(ARRAY['$tag-j'], 'x',
       ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = '$tag-j'));
SELECT count(*) FROM aion_wake.complete_many(ARRAY['$tag-k'],
       ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = '$tag-k'), 1);
SELECT aion_wake.enqueue('$tag-p' || p, '{}', 'prio', priority => p)
  FROM generate_series(-2, 2) p;
SELECT aion_wake.enqueue('$tag-q', '{}', 'prio2', priority => 1);});
	# claims take the highest priority first, whatever the plan was made
	# on: a claim of one row looks at the priority the walk starts at
	# first (in the big table priority 9, whose rows' fences are all
	# ahead, so it walks on).  Under REPEATABLE READ that look runs its
	# statement, whose plan is kept here too; in READ COMMITTED it runs
	# without the executor (src/claim_direct.c).
	$s->query_safe(qq{
SELECT aion_wake.enqueue('$tag-r', '{}', 'prio', priority => 2)});
	$s->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	is( $s->query_safe(q{
SELECT priority FROM aion_wake.claim('prio', 1)}),
		'2', "$tag: a claim of one row takes the highest priority first");
	$s->query_safe('COMMIT');
	is( $s->query_safe(q{
SELECT priority FROM aion_wake.claim('prio', 1)}),
		'2', "$tag: in READ COMMITTED too");
	# (under REPEATABLE READ: in READ COMMITTED its first look, at
	# priority 2, whose rows are leased now, would find nothing, and the
	# session's next claims of the topic would walk straight away)
	$s->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	is( $s->query_safe(q{
SELECT string_agg(priority::text, ',') FROM aion_wake.claim('prio', 2)}),
		'1,0', "$tag: a claim of two rows too");
	$s->query_safe('COMMIT');
	is( $s->query_safe(q{
SELECT string_agg(topic || ':' || priority, ',') FROM aion_wake.claim(ARRAY['prio', 'prio2'], 2)}),
		'prio2:1,prio:-1', "$tag: a claim of two topics too");
	$s->query_safe(qq{
DELETE FROM aion_wake.outbox WHERE dispatch_key LIKE '$tag-p%' OR topic = 'prio2'});
	# the worker: a fence look-up for a waiter, and a re-offer
	aw_start($waiter,
		"SELECT count(*) FROM aion_wake.claim('wait_$tag', 1, '30 s', '1 s')");
	aw_finish($waiter);
	ok( $node->poll_query_until('postgres', qq{
SELECT parked_at IS NULL FROM aion_wake.outbox WHERE dispatch_key = '$tag-b'}),
		"$tag: the worker re-offered the row pulse() was for");
}

run_everything('small');

# grow the table without telling the planner
$node->safe_psql('postgres', q{
INSERT INTO aion_wake.outbox (dispatch_key, topic, visible_after, enqueued_at, parked_at,
                              priority)
SELECT 'grown-' || t || g, t, clock_timestamp() + interval '1 hour',
       clock_timestamp(), CASE WHEN g % 2 = 0 THEN clock_timestamp() END, g % 10
  FROM generate_series(1, 20000) g, unnest(ARRAY['small', 'prio']) t;});
is( $node->safe_psql('postgres',
		"SELECT reltuples < 100 FROM pg_class WHERE oid = 'aion_wake.outbox'::regclass"),
	't', 'the statistics still describe a small table');

# from now on every statement's plan is logged, nested ones too
my $offset = start_logging_plans($s, 0);
run_everything('big');
# the worker's fence look-up is logged by the worker, in its own time
eval { $node->wait_for_log(qr/SELECT\s+pg_catalog\.min\(x\.m\)\s+FROM\s+r,/, $offset) };
stop_logging_plans($s);

my $log = slurp_file($node->logfile, $offset);
my @plans = grep { /Query Text: \/\* aion_wake \*\// } split /LOG:  duration:/, $log;
cmp_ok(scalar(@plans), '>=', 12, 'aion_wake statements were planned and logged');
my @bad = grep { /(Seq Scan|Bitmap Heap Scan) on outbox/ } @plans;
is(scalar(@bad), 0, 'no plan scans aion_wake.outbox other than by index')
  or diag(join("\n----\n", @bad));
# nor reads a whole index of it: every index scan of the outbox has an
# index condition (a batch settle's plan made at three rows joined its
# keys to a read of all of outbox_pkey, an index scan without one)
my @unbounded;
for my $plan (@plans)
{
	my @lines = split /\n/, $plan;
	for my $i (0 .. $#lines)
	{
		next unless $lines[$i] =~ /Index (Only )?Scan (Backward )?using \S+ on outbox/;
		my $cond = 0;
		for my $j ($i + 1 .. $#lines)
		{
			last if $lines[$j] =~ /->/;
			$cond = 1 if $lines[$j] =~ /Index Cond:/;
		}
		push @unbounded, $plan unless $cond;
	}
}
is(scalar(@unbounded), 0, 'every index scan of aion_wake.outbox has an index condition')
  or diag(join("\n----\n", @unbounded));
# each kind of statement was among them (whitespace as in the source)
for my $what (
	'UPDATE aion_wake.outbox o SET visible_after = \$3, parked_at = NULL',
	'WITH q AS \(SELECT \* FROM ROWS FROM',
	'WITH c AS \(SELECT x.\* FROM \(SELECT \$1\[1\] AS topic',
	'WITH c AS \(SELECT o.dispatch_key, o.visible_after AS old_fence',
	'SELECT k.topic, pg_catalog.count\(\*\)::pg_catalog.int4, pg_catalog.min\(k.priority\)',
	'WITH b AS \(SELECT visible_after, parked_at FROM aion_wake.outbox',
	'SELECT pg_catalog.count\(\*\) FROM \(',
	'SELECT pg_catalog.min\(x.m\) FROM r,',
	'DELETE FROM aion_wake.outbox o USING ROWS FROM',
	'WITH b AS \(SELECT o.dispatch_key, q.t, o.visible_after FROM ROWS FROM',
	'LATERAL \(WITH RECURSIVE r\(p\) AS')
{
	(my $re = $what) =~ s/ /\\s+/g;
	ok((grep { /$re/ } @plans), "a plan was logged for: $what");
}

# the claim's walk over priorities reads no row of a higher priority whose
# fence is ahead: topic prio holds 20,000 such rows over ten priorities,
# and one visible row of priority 0; every index scan of the claim's plan
# (a probe per priority, a range scan per priority) returns at most one
# row per loop and nothing is filtered out
$s->query_safe(q{SELECT aion_wake.enqueue('walk-0', '{}', 'prio', priority => 0)});
$offset = start_logging_plans($s, 1);
is($s->query_safe(q{SELECT dispatch_key FROM aion_wake.claim('prio', 1)}),
	'walk-0', 'the claim finds the one visible row below ten fenced priorities');
stop_logging_plans($s);
$log = slurp_file($node->logfile, $offset);
my ($walk) = grep { /LATERAL \(WITH RECURSIVE r\(p\) AS/ } split /LOG:  duration:/, $log;
ok(defined $walk, 'the claim\'s plan was logged with its execution');
$walk //= '';
my @scans = ($walk =~ /(Index (?:Only )?Scan (?:Backward )?using \S+ on outbox[^\n]*)/g);
cmp_ok(scalar(@scans), '>=', 3, 'the walk scans the outbox by index');
# rows is the mean per loop, shown with two decimals from PostgreSQL 18 on;
# a scan never executed (the probe of a walk that starts at or below 0)
# returns nothing
my @wide = grep { !/\(never executed\)/ && !(/actual time=\S+ rows=([\d.]+) loops=\d+/ && $1 <= 1) } @scans;
is(scalar(@wide), 0, 'each of its index scans returns at most one row per loop')
  or diag(join("\n", @wide));
unlike($walk, qr/Rows Removed by Filter: [1-9]/, 'and filters out nothing')
  or diag($walk);
like($walk, qr/CTE Scan on r .*\(actual time=\S+ rows=10(?:\.00)? loops=1\)/,
	'it walked the ten priorities, no more')
  or diag($walk);

# a topic whose rows all have the default priority, 0: the walk's first
# probe, for priorities above 0, compares index keys only and reads no
# row, however many versions of rows just claimed and deleted head the
# topic in the index (a probe for the topic's highest priority of any
# value would visit each of them before the range scan of priority 0
# visits them again).  A session holding a snapshot keeps 200 such
# versions from being pruned.
$s->query_safe(q{
SELECT count(aion_wake.enqueue('z' || g, '{}', 'zero')) FROM generate_series(1, 400) g});
$node->safe_psql('postgres', 'VACUUM aion_wake.outbox');
my $holder = aw_session($node);
$holder->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$holder->query_safe('SELECT count(*) FROM aion_wake.outbox');
is($s->query_safe(q{
SELECT count(aion_wake.complete(dispatch_key, lease_token)) FROM aion_wake.claim('zero', 200)}),
	'200', 'two hundred rows of topic zero claimed and deleted');
# the versions are there: a probe for the highest priority visits them
my $probe = $node->safe_psql('postgres', q{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
SELECT priority FROM aion_wake.outbox WHERE topic = 'zero' ORDER BY priority DESC LIMIT 1});
like($probe, qr/Heap Fetches: (?:[2-9]\d\d|\d{4,})/,
	'a probe for the highest priority visits the versions that head the topic')
  or diag($probe);
# under REPEATABLE READ a claim of one row looks at the walk's first
# priority alone with its statement; a claim of two walks
$offset = start_logging_plans($s, 1);
$s->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($s->query_safe(q{SELECT dispatch_key FROM aion_wake.claim('zero', 1)}),
	'z201', 'the claim of one row takes the oldest row left');
is($s->query_safe(q{SELECT string_agg(dispatch_key, ',') FROM aion_wake.claim('zero', 2)}),
	'z202,z203', 'the claim of two rows the next two');
$s->query_safe('COMMIT');
stop_logging_plans($s);
$log = slurp_file($node->logfile, $offset);

# in READ COMMITTED a claim of one topic runs no statement while its
# first priority has the rows it wants: its first look finds, locks and
# leases them without the executor
$offset = start_logging_plans($s, 1);
is($s->query_safe(q{SELECT dispatch_key FROM aion_wake.claim('zero', 1)}),
	'z204', 'in READ COMMITTED, the claim of one row takes the next');
is($s->query_safe(q{SELECT string_agg(dispatch_key, ',') FROM aion_wake.claim('zero', 3)}),
	'z205,z206,z207', 'and a claim of three rows the next three');
stop_logging_plans($s);
$holder->query_safe('COMMIT');
$holder->quit;
my $direct_log = slurp_file($node->logfile, $offset);
like($direct_log, qr/Query Text: SELECT dispatch_key FROM aion_wake\.claim\('zero', 1\)/,
	'its call\'s plan was logged');
unlike($direct_log, qr/WITH c AS|WITH RECURSIVE/,
	'but neither ran the first look\'s statement nor the walk')
  or diag($direct_log);
for my $which (['walk', qr/LATERAL \(WITH RECURSIVE r\(p\) AS/],
	['first look', qr/WITH c AS \(SELECT o.dispatch_key, o.visible_after AS old_fence/])
{
	my ($name, $re) = @$which;
	my ($plan) = grep { /$re/ } split /LOG:  duration:/, $log;
	$plan //= '';
	# each index-only scan of the outbox in the plan, with the lines below
	# it up to the next node
	my @only = ($plan =~ /(Index Only Scan using \S+ on outbox.*?\n(?:(?!\s*->)[^\n]*\n)*)/g);
	cmp_ok(scalar(grep { /actual time/ } @only), '>=', 1,
		"the claim's $name ran an index-only probe")
	  or diag($plan);
	is(scalar(grep { !/Heap Fetches: 0\n/ } @only), 0,
		"and no probe of the $name read a row")
	  or diag(join("\n", @only));
}

# a kept claim made while every row had one priority: the statistics then
# say "priority = p" filters nothing, and left to them the range scan of
# each priority would read (topic, visible_after) and filter the other
# priorities out, which costs as many rows as the other priorities have
# once they come.  The scan must stay on (topic, priority DESC,
# visible_after), with the priority in its index condition.
$node->safe_psql('postgres', 'CREATE DATABASE onep');
$node->safe_psql('onep', q{
CREATE EXTENSION aion_wake;
INSERT INTO aion_wake.outbox (dispatch_key, topic, visible_after, enqueued_at, priority)
SELECT 'gone' || g, 'one', clock_timestamp(), clock_timestamp(), g % 9
  FROM generate_series(1, 50000) g;
DELETE FROM aion_wake.outbox;});
# (the indexes keep the pages those rows took: a topic that had many rows)
$node->safe_psql('onep', 'VACUUM aion_wake.outbox');
$node->safe_psql('onep', q{
SELECT count(aion_wake.enqueue('o' || g, '{}', 'one')) FROM generate_series(1, 1000) g;
UPDATE aion_wake.outbox SET visible_after = visible_after - interval '1 hour';});
$node->safe_psql('onep', 'VACUUM ANALYZE aion_wake.outbox');
my $one = aw_session($node, 'onep');
is($one->query_safe(q{SELECT count(*) FROM aion_wake.claim(ARRAY['one', 'two'], 1)}),
	'1', 'a claim made on rows of one priority');
$one->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($one->query_safe(q{SELECT count(*) FROM aion_wake.claim('one', 1)}),
	'1', 'and a claim of one row of one topic (its statement)');
$one->query_safe('COMMIT');
$node->safe_psql('onep', q{
INSERT INTO aion_wake.outbox (dispatch_key, topic, visible_after, enqueued_at, priority)
SELECT 'm' || g, 'one', clock_timestamp() - interval '1 hour', clock_timestamp(), 1 + g % 9
  FROM generate_series(1, 5000) g;});
$offset = start_logging_plans($one, 0);
$one->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($one->query_safe(q{SELECT priority FROM aion_wake.claim('one', 1)}),
	'9', 'used on rows of ten priorities, it takes the highest');
$one->query_safe('COMMIT');
$one->query_safe(q{SELECT count(*) FROM aion_wake.claim(ARRAY['one', 'two'], 2)});
stop_logging_plans($one);
$log = slurp_file($node->logfile, $offset);
my @walks = grep { /LATERAL \(WITH RECURSIVE r\(p\) AS/ } split /LOG:  duration:/, $log;
cmp_ok(scalar(@walks), '>=', 2, 'its plans and the shares\' were logged');
my @filtering = grep { /Filter: \(priority = / || !/Index Cond: \(\(topic = (?:q\.topic|\(\$1\)\[1\])\) AND \(priority = r\S*\.p\)/ } @walks;
is(scalar(@filtering), 0,
	'each scans a priority\'s rows by (topic, priority, fence), filtering no priority out')
  or diag(join("\n----\n", @filtering));
# (the initplan's value shows as $N before PostgreSQL 17, as
# "(InitPlan 1).col1" on 17 and 18, as "(InitPlan expr_1).col1" from 19)
my @firsts = grep { /WITH c AS \(SELECT o.dispatch_key, o.visible_after AS old_fence/ }
  split /LOG:  duration:/, $log;
cmp_ok(scalar(@firsts), '>=', 1, 'the claim of one row\'s plan was logged');
is(scalar(grep { /Filter: \(priority = / || !/Index Cond: \(\(topic = \(\$1\)\[1\]\) AND \(priority = COALESCE\(\((?:\$\d+|\(InitPlan \S+\)\.col\d+)\)::integer, 0\)\) AND \(visible_after <= \$3\)\)/ } @firsts),
	0, 'it scans the priority\'s rows by (topic, priority, fence) too')
  or diag(join("\n----\n", @firsts));
$one->quit;

$s->quit;
$waiter->quit;
done_testing();
