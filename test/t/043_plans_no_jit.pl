# Copyright (c) 2026, aion_wake authors
#
# 043_plans_no_jit.pl: aion_wake's own statements are never JIT-compiled,
# whatever their plans' estimated cost.
#
# aion_wake keeps one generic plan per statement (src/plans.c).  A generic
# plan's cost is estimated without the parameters' values: "visible_after
# <= $3" is taken to match a third of the table, so the claim's estimated
# cost grows with the table, and past a few hundred thousand rows it is
# above jit_above_cost (100000 by default).  The executor then compiles the
# plan's expressions at every execution -- about 10 ms on the development
# machine, to lease one row: at a backlog of 1,000,000 rows, claim() and
# the hand-off took 17 ms instead of 1.6 ms.  Every one of these statements
# touches a handful of rows through an index, so JIT can only cost.
#
# The test sets jit_above_cost = 0, so that every statement's plan asks for
# JIT (a hand-written statement in the same session shows that it does),
# runs each kind of aion_wake statement, and reads the plans auto_explain
# logs for the nested statements: none of aion_wake's may use JIT.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('nojit', conf => <<'CONF');
shared_preload_libraries = 'aion_wake, auto_explain'
jit = on
jit_above_cost = 0
jit_inline_above_cost = -1
jit_optimize_above_cost = -1
auto_explain.log_min_duration = 0
auto_explain.log_nested_statements = on
auto_explain.log_analyze = on
autovacuum = off
CONF

if ($node->safe_psql('postgres', 'SELECT pg_jit_available()') ne 't')
{
	plan skip_all => 'JIT is not available in this installation';
}

my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
SELECT count(*) FROM aion_wake.outbox WHERE topic = 'control';
SELECT aion_wake.enqueue('k' || g, '{}', 'nojit') FROM generate_series(1, 6) g;
SELECT count(*) FROM aion_wake.claim('nojit', 1);
SELECT count(*) FROM aion_wake.claim(ARRAY['nojit', 'other'], 1);
SELECT aion_wake.complete('k1');
SELECT count(*) FROM aion_wake.complete('k2',
       (SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'k2'), 1);
SELECT aion_wake.park('k3', '1 hour');
SELECT aion_wake.fail('k4', 'x', '1 hour');
SELECT aion_wake.dead_letter('k5', 'x');
SELECT aion_wake.reoffer('nojit', 1);});

my $log = slurp_file($node->logfile, $offset);
my @plans = split /LOG:  duration:/, $log;
my @control = grep { /Query Text: SELECT count\(\*\) FROM aion_wake.outbox WHERE topic = 'control'/ } @plans;
is(scalar(@control), 1, 'the hand-written statement was logged');
like($control[0] // '', qr/JIT:/,
	'a hand-written statement is JIT-compiled at jit_above_cost = 0');

my @ours = grep { /Query Text: \/\* aion_wake \*\// } @plans;
cmp_ok(scalar(@ours), '>=', 8, 'aion_wake statements were logged');
my @jit = grep { /JIT:/ } @ours;
is(scalar(@jit), 0, 'no aion_wake statement is JIT-compiled')
  or diag(join("\n----\n", map { substr($_, 0, 300) } @jit));
# the claim and the settles were among them (whitespace as in the source)
for my $what (
	'FOR UPDATE OF o SKIP LOCKED',
	'DELETE FROM aion_wake.outbox WHERE dispatch_key',
	'INSERT INTO aion_wake.outbox AS o')
{
	(my $re = $what) =~ s/ /\\s+/g;
	ok((grep { /$re/ } @ours), "a plan was logged for: $what");
}

done_testing();
