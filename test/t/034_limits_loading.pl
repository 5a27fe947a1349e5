# Copyright (c) 2026, aion_wake authors
#
# 034_limits_loading.pl: who loads a database's limits into shared memory,
# when, and under which locks (G8 after a restart).
#
#   (a) a limit that cannot be loaded (the topic table is full of another
#       database's parks) is never silently absent: a claim of its topic
#       takes nothing, with a WARNING and limits_not_loaded rising, and
#       the worker retries the load until the table has room;
#   (b) a prepared transaction holding a limited topic's share lock across
#       a restart stalls neither the worker nor the claims of other topics:
#       only that topic waits (its claims take nothing) until the prepared
#       transaction ends;
#   (c) in a database no worker serves, the first claim after a restart
#       loads the limits of its own topics in a subtransaction of its own:
#       a claim(wait) of another topic holds no exclusive topic lock while
#       it sleeps;
#   (d) DROP DATABASE and DROP EXTENSION give that database's limits back
#       to the cluster-wide lease pool;
#   (e) more than 64 databases that used aion_wake since the start change
#       nothing: a claim(wait) in the next one holds no exclusive topic
#       lock either.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node(
	'loading',
	databases => 'postgres, lim',
	conf => "aion_wake.max_topics = 8\naion_wake.max_leases = 20\n"
	  . "max_prepared_transactions = 2\nmax_connections = 30\n");

# exclusive topic locks (object locks on pg_extension) a backend holds
sub exclusive_topic_locks
{
	my ($pid) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM pg_locks
 WHERE pid = $pid AND locktype = 'object' AND mode = 'AccessExclusiveLock'
   AND classid = 'pg_extension'::regclass AND granted});
}

# The counter aion_wake.status gains in the next schema version, read
# through a function of the test's own over the same C function.
sub limits_not_loaded
{
	my ($db) = @_;
	my ($ret, $out, $err) = $node->psql($db, q{
CREATE OR REPLACE FUNCTION pg_temp.status_next(
	OUT worker_pid int, OUT worker_database name, OUT served boolean,
	OUT listening boolean, OUT listen_error text, OUT capacity int,
	OUT parked_pending bigint, OUT parked_confirmed bigint, OUT waiters int,
	OUT pulses_received bigint, OUT slots_received bigint,
	OUT rows_reoffered bigint, OUT wakes_deferred bigint, OUT bad_pulses bigint,
	OUT set_full bigint, OUT fences_expired bigint, OUT unfenced_expired bigint,
	OUT credits_used bigint, OUT slots_returned bigint,
	OUT last_pulse_at timestamptz, OUT started_at timestamptz,
	OUT pulses_ignored bigint, OUT leases_expired bigint,
	OUT lease_capacity int, OUT leases bigint, OUT limits_not_loaded bigint)
RETURNS record AS 'aion_wake', 'aw_status' LANGUAGE C;
SELECT limits_not_loaded FROM pg_temp.status_next();});
	return $ret == 0 ? $out : -1;
}

# ---------------------------------------------------------------------
# (a) a limit the topic table has no room for: fail closed, then retry
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE EXTENSION aion_wake;
SELECT aion_wake.set_limit('lt', 1);
SELECT aion_wake.enqueue('l' || g, '{}', 'lt') FROM generate_series(1, 5) g;});
# fill the topic table with confirmed park_pending entries of 'postgres'
my $filled = 0;
foreach my $i (1 .. 64)
{
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT aion_wake.park_pending('fill$i', 0, 'fill$i') AND NOT aion_wake.confirm('fill$i')");
	last if $out ne 't';
	$filled++;
}
cmp_ok($filled, '<', 64, '(a) the topic table is full');
my $offset = -s $node->logfile;
# a copy of src under a served name: its worker loads the limits at start
$node->safe_psql('postgres', 'CREATE DATABASE lim TEMPLATE src');
ok($node->poll_query_until('lim', 'SELECT worker_pid IS NOT NULL FROM aion_wake.status'),
	"(a) the worker of 'lim' runs");
$node->wait_for_log(qr/aion_wake worker rebuilt the parked set of database "lim"/, $offset);
my ($ret, $out, $err) = $node->psql('lim', "SELECT count(*) FROM aion_wake.claim('lt', 5, '1 hour')");
is($out, '0', '(a) a claim of a topic whose limit is not loaded takes nothing');
like($err, qr/limit, rate or pause of topic "lt" is not loaded/, '(a) ... and says so');
cmp_ok(limits_not_loaded('lim'), '>=', 1, '(a) limits_not_loaded rises');
# room again: the worker's retry loads the limit
$node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.take_confirmed()');
ok($node->poll_query_until('lim',
	"SELECT max_in_flight = 1 FROM aion_wake.topics WHERE topic = 'lt'"),
	'(a) the load is retried once the table has room');
is($node->safe_psql('lim', "SELECT count(*) FROM aion_wake.claim('lt', 5, '1 hour')"),
	'1', '(a) the limit then holds: one row of five');
is($node->safe_psql('lim', "SELECT count(*) FROM aion_wake.claim('lt', 5, '1 hour')"),
	'0', '(a) and no more');

# ---------------------------------------------------------------------
# (b) a prepared transaction holding a topic's share lock across a restart
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
SELECT aion_wake.set_limit('pt', 2);
SELECT aion_wake.set_limit('po', 2);
SELECT aion_wake.enqueue('pt' || g, '{}', 'pt') FROM generate_series(1, 3) g;
SELECT aion_wake.enqueue('po' || g, '{}', 'po') FROM generate_series(1, 3) g;
SELECT aion_wake.enqueue('pf' || g, '{}', 'pf') FROM generate_series(1, 3) g;
BEGIN;
SELECT aion_wake.complete('pt1');
PREPARE TRANSACTION 'holds_pt';});
$offset = -s $node->logfile;
$node->restart;
$node->wait_for_log(qr/aion_wake worker rebuilt the parked set of database "postgres"/, $offset);
pass('(b) the worker is ready although a prepared transaction holds a topic lock');
($ret, $out, $err) = $node->psql('postgres', q{
SET statement_timeout = '10s';
SELECT count(*) FROM aion_wake.claim('po', 5, '1 hour');});
is($out, '2', '(b) a claim of another limited topic goes on, within its limit');
($ret, $out, $err) = $node->psql('postgres', q{
SET statement_timeout = '10s';
SELECT count(*) FROM aion_wake.claim('pf', 1, '1 hour');});
is($out, '1', '(b) so does a claim of an unlimited topic');
($ret, $out, $err) = $node->psql('postgres', q{
SET statement_timeout = '10s';
SELECT count(*) FROM aion_wake.claim('pt', 5, '1 hour');});
is($out, '0', '(b) the topic whose lock is held takes nothing');
like($err, qr/limit, rate or pause of topic "pt" is not loaded/, '(b) ... and says so');
$node->safe_psql('postgres', "ROLLBACK PREPARED 'holds_pt'");
ok($node->poll_query_until('postgres',
	"SELECT max_in_flight = 2 FROM aion_wake.topics WHERE topic = 'pt'"),
	'(b) the load is retried once the prepared transaction ends');
is($node->safe_psql('postgres', "SELECT count(*) FROM aion_wake.claim('pt', 5, '1 hour')"),
	'2', '(b) the limit then holds');

# ---------------------------------------------------------------------
# (c) a database no worker serves: bounded loading by the claim itself
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE unserved');
$node->safe_psql('unserved', q{
CREATE EXTENSION aion_wake;
SELECT aion_wake.set_limit('ul', 1);
SELECT aion_wake.enqueue('u' || g, '{}', 'ul') FROM generate_series(1, 3) g;});
$node->restart;
my $w = aw_waiter($node, 'unserved');
aw_start($w, "SELECT count(*) FROM aion_wake.claim('other', 1, '1 s', '30 s')");
ok($node->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $w->{pid}"),
	'(c) the claim of another topic waits');
is(exclusive_topic_locks($w->{pid}), '0', '(c) ... holding no exclusive topic lock');
is($node->safe_psql('unserved', "SELECT count(*) FROM aion_wake.claim('ul', 5, '1 hour')"),
	'1', '(c) the limit of a database no worker serves holds after the restart');
$node->safe_psql('unserved', "SELECT pg_cancel_backend($w->{pid})");
aw_finish($w);
$w->quit;

# ---------------------------------------------------------------------
# (d) DROP DATABASE and DROP EXTENSION give the pool back
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
SELECT aion_wake.set_limit(topic, NULL) FROM aion_wake.limits;});
$node->safe_psql('postgres', 'DROP DATABASE lim');
$node->safe_psql('postgres', 'DROP DATABASE src');
$node->safe_psql('unserved', "SELECT aion_wake.set_limit('ul', NULL)");
$node->safe_psql('postgres', 'CREATE DATABASE gone');
$node->safe_psql('gone', "CREATE EXTENSION aion_wake; SELECT aion_wake.set_limit('g', 15)");
($ret, $out, $err) = $node->psql('postgres', "SELECT aion_wake.set_limit('p', 15)");
like($err, qr/lease pool cannot hold this limit/, '(d) the pool is promised to the other database');
$node->safe_psql('postgres', 'DROP DATABASE gone');
($ret, $out, $err) = $node->psql('postgres', "SELECT aion_wake.set_limit('p', 15)");
is($err, '', '(d) DROP DATABASE gave its limits back to the pool');
$node->safe_psql('postgres', "SELECT aion_wake.set_limit('p', NULL)");
$node->safe_psql('unserved', "SELECT aion_wake.set_limit('ue', 15)");
$node->safe_psql('unserved', 'DROP EXTENSION aion_wake');
($ret, $out, $err) = $node->psql('postgres', "SELECT aion_wake.set_limit('p', 15)");
is($err, '', '(d) DROP EXTENSION gave its limits back to the pool');
$node->safe_psql('postgres', "SELECT aion_wake.set_limit('p', NULL)");

# ---------------------------------------------------------------------
# (e) past 64 databases
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE many');
$node->safe_psql('many', 'CREATE EXTENSION aion_wake');
foreach my $i (1 .. 65)
{
	$node->safe_psql('postgres', "CREATE DATABASE many$i TEMPLATE many");
	$node->safe_psql("many$i", "SELECT count(*) FROM aion_wake.claim('x')");
	$node->safe_psql('postgres', "DROP DATABASE many$i");
}
$node->safe_psql('many', "SELECT aion_wake.set_limit('ml', 1)");
$w = aw_waiter($node, 'many');
aw_start($w, "SELECT count(*) FROM aion_wake.claim('other', 1, '1 s', '30 s')");
ok($node->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $w->{pid}"),
	'(e) the claim of another topic waits');
is(exclusive_topic_locks($w->{pid}), '0', '(e) ... holding no exclusive topic lock');
$node->safe_psql('many', "SELECT pg_cancel_backend($w->{pid})");
aw_finish($w);
$w->quit;

$node->stop;
done_testing();
