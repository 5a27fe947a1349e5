# Copyright (c) 2026, aion_wake authors
#
# 028_upgrade.pl: the update paths 1.0 -> 1.1 -> 1.2 and 1.1 -> 1.2
# (README.md, Deploying: Upgrading; every schema change ships an update
# script that CI runs).
#
#   (a) CREATE EXTENSION aion_wake VERSION '1.0': the library serves the 1.0
#       schema; enqueue, claim (a waiting one too), park, a pulse's re-offer,
#       complete, fail and dead_letter all work on it;
#   (b) with rows enqueued, delayed, leased, parked (confirmed, with their
#       fences), failed and dead-lettered, ALTER EXTENSION aion_wake UPDATE
#       TO '1.1':
#       every row keeps every 1.0 column (fence, attempt, parked_at, lease
#       token ...), the dead letters too, the parks stay in the set, and a
#       pulse after the update re-offers the oldest of them;
#   (c) the worker picks the update up without a restart: the same worker,
#       set_limit() works and claims honour it at once (the leases taken
#       under 1.0 count against it), a lease's end wakes a blocked claimer
#       on time, and a session that used the 1.0 schema before the update
#       takes leases that count;
#   (d) ALTER EXTENSION aion_wake UPDATE takes it on to 1.2: every row and
#       park kept, the limits and their leases too, the same worker, the
#       status view's 1.2 columns; every row, in every state (visible,
#       delayed, leased, parked, failed, dead-lettered), gets priority 0,
#       and rows of higher priorities enqueued after the update are
#       claimed first, by a new session and by one that used the 1.1
#       schema before the update, while the old rows keep their order; a
#       role granted the old enqueue is named in a WARNING; a database
#       created at 1.1 updates to 1.2 the same way, and one created at 1.0,
#       with rows leased, parked and dead-lettered, updates to 1.2 in one
#       ALTER EXTENSION, keeping them, and takes a rate and a pause at once;
#   (e) both updated schemas equal a fresh 1.2 install: pg_dump
#       --schema-only of both databases, plain and --binary-upgrade (which
#       dumps the extension's own objects one by one), and the columns of
#       every table, in order (priority last in outbox and dead_letters).
#       Normalised, because they must differ
#       between two databases (only the last applies to the plain dumps,
#       which name the extension and nothing of it): the OIDs
#       and relfilenodes pg_dump pins (binary_upgrade_set_next_* and the
#       config tables' OIDs in binary_upgrade_create_empty_extension, the
#       TOAST tables' OIDs whose frozen ids are set, the attribute versions
#       some pg_dump 17 pins), the frozen transaction ids (relfrozenxid,
#       relminmxid, and datfrozenxid, datminmxid should a dump carry them),
#       the state of lease_token_seq (a config sequence, whose
#       setval() even --schema-only dumps), the random key of pg_dump's
#       \restrict lines, and the database's name, should a dump carry it
#       (those of PostgreSQL 15 do not).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $prompt = aw_prompt(0.2);

# statement_timeout: a statement that hangs fails its test, not the run
my $node = aw_node('upgrade', databases => 'up, up11, up10', create => 0,
	conf => "statement_timeout = '90s'\n");
$node->safe_psql('postgres', 'CREATE DATABASE up');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('postgres', 'CREATE DATABASE up11');
$node->safe_psql('postgres', 'CREATE DATABASE up10');

sub up
{
	return $node->safe_psql('up', $_[0]);
}

my $offset = -s $node->logfile;
up(q{CREATE EXTENSION aion_wake VERSION '1.0'});
is(up(q{SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'}),
	'1.0', '(a) version 1.0 is installed');
ok($node->poll_query_until('up', 'SELECT worker_pid IS NOT NULL FROM aion_wake.status'),
	'(a) a worker serves the 1.0 schema');
$node->wait_for_log(qr/aion_wake worker rebuilt the parked set of database "up"/, $offset);
my $worker = $node->safe_psql('up', 'SELECT worker_pid FROM aion_wake.status');

# -- (a) the 1.0 schema works ---------------------------------------------
is( up(q{
SELECT count(*) FILTER (WHERE e) FROM (
	SELECT aion_wake.enqueue('q' || g, jsonb_build_object('g', g), 't') AS e FROM generate_series(1, 8) g
	UNION ALL SELECT aion_wake.enqueue('d1', '{}', 't', '1 hour')
	UNION ALL SELECT aion_wake.enqueue('f1', '{}', 'f')
	UNION ALL SELECT aion_wake.enqueue('r1', '{}', 'rt')
	UNION ALL SELECT aion_wake.enqueue('c1', '{}', 'c')) x}),
	'12', '(a) enqueue');

# a session that uses the 1.0 schema and lives on across the update
my $old = aw_session($node, 'up');
is( $old->query_safe(q{
SELECT aion_wake.complete(dispatch_key, lease_token) FROM aion_wake.claim('c', 1, '1 hour')}),
	't', '(a) claim and complete');
is(up(q{SELECT count(*) FROM aion_wake.outbox WHERE topic = 'c'}), '0', '(a) the row is gone');

my %tok = map { split /\|/ } split /\n/,
  up(q{SELECT dispatch_key || '|' || lease_token FROM aion_wake.claim('t', 6, '1 hour')});
is(join(',', sort keys %tok), 'q1,q2,q3,q4,q5,q6', '(a) claim takes the six oldest rows');
up("SELECT aion_wake.park('q3', '1 hour', $tok{q3})");
up("SELECT aion_wake.park('q4', '2 hours', $tok{q4})");
is( $node->safe_psql('up', q{
SELECT string_agg(dispatch_key || ':' || state, ',' ORDER BY parked_at) FROM aion_wake.parked}),
	'q3:confirmed,q4:confirmed', '(a) park: two confirmed parks');
is(up("SELECT aion_wake.fail('q5', 'boom', '0', $tok{q5})"), 't', '(a) fail');
is(up("SELECT aion_wake.dead_letter('q6', 'poison', $tok{q6})"), 't', '(a) dead_letter');
my ($ftok) = up(q{SELECT lease_token FROM aion_wake.claim('f', 1, '1 hour')});
up("SELECT aion_wake.fail('f1', 'busy', '1 hour', $ftok)");

up(q{SELECT lease_token FROM aion_wake.claim('rt', 1, '1 hour')});
up(q{SELECT aion_wake.park('r1', '1 hour')});
up(q{SELECT aion_wake.pulse('rt', 1)});
ok(aw_wait_reoffered($node, 'r1', 'up'), '(a) a pulse re-offers a park');

my $w = aw_session($node, 'up');
aw_start($w, q{SELECT dispatch_key FROM aion_wake.claim('wt', 1, '1 hour', '10 s')});
ok($node->poll_query_until('up', 'SELECT waiters = 1 FROM aion_wake.status'),
	'(a) a claim waits');
up(q{SELECT aion_wake.enqueue('w1', '{}', 'wt')});
my ($wout) = aw_finish($w);
is($wout, 'w1', '(a) and an enqueue wakes it');

# -- (b) the update keeps every row ---------------------------------------
my $rows_sql = q{
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s', dispatch_key, topic, payload, attempt,
       visible_after, enqueued_at, last_error, lease_token, parked_at), E'\n' ORDER BY dispatch_key)
  FROM aion_wake.outbox};
my $dead_sql = q{
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', dispatch_key, topic, payload, attempt,
       visible_after, enqueued_at, last_error, lease_token, parked_at, reason, dead_at), E'\n'
       ORDER BY dispatch_key)
  FROM aion_wake.dead_letters};
my $parked_sql = q{
SELECT string_agg(format('%s|%s|%s|%s|%s|%s', dispatch_key, topic, attempt, state, parked_at, fence),
       E'\n' ORDER BY parked_at)
  FROM aion_wake.parked};
my ($rows0, $dead0, $parked0) = (up($rows_sql), up($dead_sql), up($parked_sql));
my $seq0 = up('SELECT last_value FROM aion_wake.lease_token_seq');

up(q{ALTER EXTENSION aion_wake UPDATE TO '1.1'});
is(up(q{SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'}),
	'1.1', q{(b) ALTER EXTENSION aion_wake UPDATE TO '1.1' makes it 1.1});
is(up($rows_sql), $rows0,
	'(b) every outbox row keeps its fence, attempt, last_error, lease token and parked_at');
is(up($dead_sql), $dead0, '(b) the dead letters are intact');
is( up(q{SELECT count(*) FROM aion_wake.dead_letters WHERE leased_until IS NOT NULL}),
	'0', '(b) and carry no lease');
is(up($parked_sql), $parked0, '(b) the parks are still in the set, confirmed, with their fences');
# f1 failed under 1.0 with a back-off of an hour: the table cannot tell its
# fence from a lease's, so whether it counts as leased is left open
is( up(q{
SELECT string_agg(dispatch_key || ' ' || (leased_until = visible_after), ',' ORDER BY dispatch_key)
  FROM aion_wake.outbox WHERE leased_until IS NOT NULL AND dispatch_key <> 'f1'}),
	'q1 true,q2 true,w1 true',
	'(b) the rows leased under 1.0 carry their lease in leased_until, the others none');
note('f1, failed under 1.0 with a fence ahead: leased_until '
	  . up(q{SELECT coalesce(leased_until::text, 'null') FROM aion_wake.outbox WHERE dispatch_key = 'f1'}));
is(up('SELECT last_value FROM aion_wake.lease_token_seq'), $seq0, '(b) the token sequence is kept');
is(up(q{SELECT worker_pid FROM aion_wake.status}), $worker,
	'(b) the same worker serves the updated schema');

up(q{SELECT aion_wake.pulse('t', 1)});
ok(aw_wait_reoffered($node, 'q3', 'up'), '(b) a pulse after the update re-offers the oldest park');
is( up(q{
SELECT parked_at IS NOT NULL AND visible_after > clock_timestamp() + interval '1 hour'
  FROM aion_wake.outbox WHERE dispatch_key = 'q4'}),
	't', '(b) and only it: q4 stays parked');

# -- (c) the updated schema in use ----------------------------------------
up(q{SELECT aion_wake.set_limit('t', 3)});
is( up(q{SELECT max_in_flight || '/' || in_flight FROM aion_wake.topics WHERE topic = 't'}),
	'3/2', '(c) set_limit() works: the two leases taken under 1.0 count');
my @granted = split /\n/,
  up(q{SELECT dispatch_key || '|' || lease_token FROM aion_wake.claim('t', 5, '1 hour')});
is(scalar(@granted), 1, '(c) a claim of 5 takes the one slot left');
is(up(q{SELECT count(*) FROM aion_wake.claim('t', 5, '1 hour')}), '0', '(c) then none');
my ($gk, $gt) = split /\|/, $granted[0];
up("SELECT aion_wake.complete('$gk', $gt)");
is(up(q{SELECT in_flight FROM aion_wake.topics WHERE topic = 't'}), '2',
	'(c) a complete releases its slot');

my ($short_key, $short_end) = split /\|/,
  up(q{SELECT dispatch_key || '|' || extract(epoch FROM leased_until) FROM aion_wake.claim('t', 1, '1 s')});
ok($short_key, '(c) the last slot leased for a second');
aw_start($w, q{
SELECT extract(epoch FROM leased_until - interval '1 hour') FROM aion_wake.claim('t', 1, '1 hour', '10 s')});
($wout) = aw_finish($w);
ok( $wout ne '' && $wout >= $short_end && $wout - $short_end <= $prompt,
	'(c) a claimer blocked on the full topic returns promptly at the lease\'s end')
  or diag($wout eq '' ? 'no row' : sprintf('%.1f ms after it', 1000 * ($wout - $short_end)));

# the session that used 1.0 before the update
is( $old->query_safe(q{
SELECT leased_until IS NOT NULL FROM aion_wake.claim('t2', 1, '1 hour')}),
	'', '(c) (t2 has no row yet)');
up(q{SELECT aion_wake.enqueue('t2_' || g, '{}', 't2') FROM generate_series(1, 3) g});
is($old->query_safe(q{SELECT leased_until IS NOT NULL FROM aion_wake.claim('t2', 1, '1 hour')}),
	't', '(c) a session that used 1.0 sets leased_until once updated');
up(q{SELECT aion_wake.set_limit('t2', 1)});
is($old->query_safe(q{SELECT count(*) FROM aion_wake.claim('t2', 5, '1 hour')}),
	'0', '(c) its lease counts: the limit of 1 grants nothing more');

# -- (d) on to 1.2 ---------------------------------------------------------
my $status_cols = q{
SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
 WHERE attrelid = 'aion_wake.status'::regclass AND attnum > 0};
unlike(up($status_cols), qr/limits_not_loaded/, '(d) the 1.1 status view has no limits_not_loaded');
ok(up(q{SELECT leases >= 0 FROM aion_wake.status}), '(d) and the 1.2 library serves it');
my $rows11_sql = q{
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', dispatch_key, topic, payload, attempt,
       visible_after, enqueued_at, last_error, lease_token, parked_at, leased_until), E'\n'
       ORDER BY dispatch_key)
  FROM aion_wake.outbox};
my $limits_sql = q{
SELECT string_agg(format('%s|%s|%s', topic, max_in_flight, in_flight), ',' ORDER BY topic)
  FROM aion_wake.topics WHERE max_in_flight IS NOT NULL};
# a session that uses the 1.1 schema (kept plans of 1.1) across the update
$old->query_safe(q{SELECT count(*) FROM aion_wake.claim('pt', 1, '1 hour')});
$old->query_safe(q{SELECT aion_wake.enqueue('pt-old', '{}', 'pt')});
# and a row parked now (the parks of (a) were re-offered since)
up(q{SELECT aion_wake.enqueue('pd1', '{}', 'pd')});
up(q{SELECT aion_wake.park('pd1', '1 hour')});
my ($rows1, $dead1, $parked1, $limits1) =
  (up($rows11_sql), up($dead_sql), up($parked_sql), up($limits_sql));
# the states before the update: every row's state, to see each one kept
my $states_sql = q{
SELECT string_agg(dispatch_key || ':' ||
       CASE WHEN parked_at IS NOT NULL THEN 'parked'
            WHEN leased_until > clock_timestamp() THEN 'leased'
            WHEN last_error IS NOT NULL THEN 'failed'
            WHEN visible_after > clock_timestamp() THEN 'delayed'
            ELSE 'visible' END, ',' ORDER BY dispatch_key)
  FROM aion_wake.outbox};
my $states1 = up($states_sql);
my $count1 = up('SELECT count(*) FROM aion_wake.outbox');
like($states1, qr/parked/, '(d) before the update, rows are parked');
like($states1, qr/leased/, '(d) leased');
like($states1, qr/delayed|failed/, '(d) delayed or failed');
like($states1, qr/visible/, '(d) and visible');

# an application role granted the 1.1 enqueue
up(q{CREATE ROLE upapp});
up(q{GRANT EXECUTE ON FUNCTION aion_wake.enqueue(text, jsonb, text, interval) TO upapp});
my ($rc, $out, $err) = $node->psql('up', 'ALTER EXTENSION aion_wake UPDATE');
is($rc, 0, '(d) ALTER EXTENSION aion_wake UPDATE succeeds');
like($err, qr/WARNING:  role upapp loses EXECUTE on aion_wake.enqueue\(\)/,
	'(d) and names the role that loses EXECUTE on enqueue');
is(up(q{SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'}),
	'1.2', '(d) ALTER EXTENSION aion_wake UPDATE makes it 1.2');
is(up($rows11_sql), $rows1, '(d) every outbox row is kept, leased_until too');
is(up($dead_sql), $dead1, '(d) the dead letters are intact');
is(up($parked_sql), $parked1, '(d) the parks are still in the set');
is(up($limits_sql), $limits1, '(d) the limits and their leases are kept');
is(up($states_sql), $states1, '(d) every row keeps its state');
is( up(q{SELECT count(*) FILTER (WHERE priority <> 0) || '/' || count(*) FROM aion_wake.outbox}),
	"0/$count1", '(d) every row has priority 0');
is( up(q{SELECT count(*) FILTER (WHERE priority = 0) > 0 AND bool_and(priority = 0)
  FROM aion_wake.dead_letters}),
	't', '(d) every dead letter too');
is( up(q{SELECT has_function_privilege('upapp',
         'aion_wake.enqueue(text, jsonb, text, interval, int)', 'EXECUTE')}),
	'f', '(d) the new enqueue is not granted to the role');
up(q{SELECT aion_wake.enqueue('pt-hi', '{}', 'pt', priority => 9)});
up(q{SELECT aion_wake.enqueue('pt-mid', '{}', 'pt', priority => 3)});
is( $old->query_safe(q{
SELECT string_agg(dispatch_key || ':' || priority, ',') FROM aion_wake.claim('pt', 2, '1 hour')}),
	'pt-hi:9,pt-mid:3',
	'(d) a session that used 1.1 claims by priority after the update, with the column');
is( up(q{SELECT string_agg(dispatch_key || ':' || priority, ',') FROM aion_wake.claim('pt', 2, '1 hour')}),
	'pt-old:0', '(d) then the row enqueued before the update');
is(up(q{SELECT worker_pid FROM aion_wake.status}), $worker,
	'(d) the same worker serves the 1.2 schema');
like(up($status_cols), qr/,leases,limits_not_loaded,claims_rate_delayed,claims_paused,lost_wakes$/,
	'(d) the status view ends with limits_not_loaded, claims_rate_delayed, claims_paused, then lost_wakes (Monitoring)');
is(up(q{SELECT limits_not_loaded >= 0 FROM aion_wake.status}), 't', '(d) and fills it');
is(up(q{SELECT lost_wakes FROM aion_wake.status}), '0', '(d) and lost_wakes');
is(up(q{SELECT count(*) > 0 FROM aion_wake.topic_health}), 't',
	'(d) the updated schema has topic_health, over the rows kept');
is($old->query_safe(q{SELECT limits_not_loaded >= 0 FROM aion_wake.status}),
	't', '(d) a session that used 1.1 before the update reads it too');
$old->quit;
$w->quit;

$node->safe_psql('up11', q{CREATE EXTENSION aion_wake VERSION '1.1'});
$node->safe_psql('up11', q{SELECT aion_wake.set_limit('x', 2)});
is($node->safe_psql('up11', q{SELECT aion_wake.enqueue('a', '{}', 'x')}),
	't', '(d) a database at 1.1, with a limit and a row');
my ($tok11) = $node->safe_psql('up11', q{SELECT lease_token FROM aion_wake.claim('x', 1, '1 hour')});
# rows in every state: visible, delayed, leased, parked, failed, dead-lettered
$node->safe_psql('up11', q{
SELECT aion_wake.enqueue(k, '{}', 'y') FROM unnest(ARRAY['y-lease', 'y-park', 'y-fail', 'y-dead']) k;
SELECT count(*) FROM aion_wake.claim('y', 4, '1 hour');
SELECT aion_wake.enqueue('y-vis', '{}', 'y');
SELECT aion_wake.enqueue('y-delay', '{}', 'y', '1 hour');});
$node->safe_psql('up11', q{
SELECT aion_wake.park('y-park', '1 hour');
SELECT aion_wake.fail('y-fail', 'boom', '1 hour');
SELECT aion_wake.dead_letter('y-dead', 'poison');});
my $states11 = $node->safe_psql('up11', $states_sql);
is($states11, 'a:leased,y-delay:delayed,y-fail:failed,y-lease:leased,y-park:parked,y-vis:visible',
	'(d) a database at 1.1 with rows in every state')
  or diag($states11);
$node->safe_psql('up11', 'ALTER EXTENSION aion_wake UPDATE');
is($node->safe_psql('up11', $states_sql), $states11, '(d) from 1.1: every row keeps its state');
is( $node->safe_psql('up11', q{
SELECT (SELECT count(*) FROM aion_wake.outbox WHERE priority = 0) || '/' ||
       (SELECT count(*) FROM aion_wake.dead_letters WHERE priority = 0)}),
	'6/1', '(d) from 1.1: every row and dead letter has priority 0');
is( $node->safe_psql('up11', q{SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'}),
	'1.2', '(d) updates from 1.1 to 1.2');
is( $node->safe_psql('up11', q{
SELECT max_in_flight || '/' || in_flight FROM aion_wake.topics WHERE topic = 'x'}),
	'2/1', '(d) keeping its limit and lease');
is($node->safe_psql('up11', "SELECT aion_wake.complete('a', $tok11)"),
	't', '(d) and the lease taken under 1.1 settles under 1.2');

# 1.0 -> 1.2 in one step
sub up10
{
	return $node->safe_psql('up10', $_[0]);
}
up10(q{CREATE EXTENSION aion_wake VERSION '1.0'});
up10(q{
SELECT aion_wake.enqueue('k' || g, '{}', 't10') FROM generate_series(1, 6) g;
SELECT count(*) FROM aion_wake.claim('t10', 2, '1 hour');
SELECT aion_wake.park('k1', '1 hour');
SELECT aion_wake.dead_letter('k2', 'gone');});
my $rows10_sql = q{
SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s', dispatch_key, topic, attempt, visible_after,
       lease_token, parked_at, last_error), E'\n' ORDER BY dispatch_key)
  FROM aion_wake.outbox};
my $dead10_sql = q{SELECT string_agg(dispatch_key || '|' || reason, ',') FROM aion_wake.dead_letters};
my ($rows10, $dead10) = (up10($rows10_sql), up10($dead10_sql));
up10('ALTER EXTENSION aion_wake UPDATE');
is(up10(q{SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'}),
	'1.2', '(d) a database at 1.0 updates to 1.2 in one step');
is(up10($rows10_sql), $rows10, '(d) keeping every row, the leased and the parked one too');
is(up10($dead10_sql), $dead10, '(d) and the dead letter');
up10(q{SELECT aion_wake.set_rate('t10', 1, '1 hour')});
is(up10(q{SELECT count(*) FROM aion_wake.claim('t10', 3)}), '1',
	'(d) a rate set after it holds claims at once');
up10(q{SELECT aion_wake.pause('t10', clock_timestamp() + interval '1 hour'), aion_wake.set_rate('t10', NULL)});
is(up10(q{SELECT count(*) FROM aion_wake.claim('t10', 3)}), '0', '(d) and so does a pause');

# -- (e) the same schema as a fresh install -------------------------------
$node->safe_psql('fresh', 'CREATE EXTENSION aion_wake');
is($node->safe_psql('fresh', q{SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'}),
	'1.2', '(e) a fresh install is 1.2');

my $columns_sql = q{
SELECT string_agg(format('%s.%s: %s %s %s %s', c.relname, a.attnum, a.attname,
       pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid)), E'\n' ORDER BY c.relname, a.attnum)
  FROM pg_catalog.pg_attribute a
  JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname = 'aion_wake' AND a.attnum > 0 AND NOT a.attisdropped};
is(up($columns_sql), $node->safe_psql('fresh', $columns_sql),
	'(e) every table and view has the same columns, in the same order');
is($node->safe_psql('up11', $columns_sql), $node->safe_psql('fresh', $columns_sql),
	'(e) from 1.1 too');
is(up10($columns_sql), $node->safe_psql('fresh', $columns_sql), '(e) and from 1.0 in one step');
like(up($columns_sql), qr/^outbox\.10: leased_until /m, '(e) leased_until is the last column of outbox');
like(up($columns_sql), qr/^dead_letters\.12: leased_until /m, '(e) and of dead_letters');
like(up($columns_sql), qr/^outbox\.11: priority smallint t 0$/m, '(e) priority is the last column of outbox');
like(up($columns_sql), qr/^dead_letters\.13: priority smallint t 0$/m, '(e) and of dead_letters');

sub dump_schema
{
	my ($db, @opts) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'pg_dump', '--schema-only', @opts, '-h', $node->host,
			'-p', $node->port, '-d', $db
		],
		'>', \$out, '2>', \$err) or die "pg_dump $db failed: $err";
	return $out;
}

# what must differ between two databases' --binary-upgrade dumps
sub normalise
{
	my ($dump, $db) = @_;
	$dump =~ s/^(SELECT pg_catalog\.binary_upgrade_set_next_\w+\()'\d+'/$1'N'/mg;
	$dump =~ s/^(SELECT pg_catalog\.binary_upgrade_create_empty_extension\(.*?, )'\{[\d,]*\}'/$1'{N}'/mg;
	$dump =~ s/(rel|dat)(frozenxid|minmxid) = '\d+'/$1$2 = 'N'/g;
	$dump =~ s/^WHERE oid = '\d+';$/WHERE oid = 'N';/mg;
	$dump =~ s/^(SELECT pg_catalog\.setval\('aion_wake\.lease_token_seq', )\d+, \w+\)/$1N)/mg;
	$dump =~ s/datname = '\Q$db\E'/datname = 'DB'/g;
	$dump =~ s/^\\((?:un)?restrict) \S+$/\\$1 KEY/mg;
	$dump =~ s/^(SELECT pg_catalog\.binary_upgrade_set_next_attribute_versions\()'\{[\w\/,]*\}'/$1'{N}'/mg;
	return $dump;
}

my ($plain_fresh, $bin_fresh) =
  (dump_schema('fresh'), dump_schema('fresh', '--binary-upgrade'));
my $n_fresh = normalise($bin_fresh, 'fresh');
for my $db ('up', 'up11', 'up10')
{
	my $plain = dump_schema($db);
	like($plain, qr/CREATE EXTENSION IF NOT EXISTS aion_wake/,
		"(e) $db: the plain dump names the extension");
	is(normalise($plain, $db), normalise($plain_fresh, 'fresh'),
		"(e) $db: pg_dump --schema-only: the same");

	my $bin = dump_schema($db, '--binary-upgrade');
	like($bin, qr/CREATE TABLE aion_wake\.limits/,
		"(e) $db: the --binary-upgrade dump holds the extension's own objects");
	my $n_up = normalise($bin, $db);
	if ($n_up eq $n_fresh)
	{
		pass("(e) $db: pg_dump --schema-only --binary-upgrade: the same, once normalised");
	}
	else
	{
		my $dir = $PostgreSQL::Test::Utils::tmp_check;
		PostgreSQL::Test::Utils::append_to_file("$dir/028_$db.sql", $n_up);
		PostgreSQL::Test::Utils::append_to_file("$dir/028_fresh.sql", $n_fresh);
		my ($diff) = ('');
		IPC::Run::run([ 'diff', '-u', "$dir/028_fresh.sql", "$dir/028_$db.sql" ], '>', \$diff);
		fail("(e) $db: pg_dump --schema-only --binary-upgrade: the same, once normalised");
		diag(length($diff) > 4000 ? substr($diff, 0, 4000) : $diff);
	}
}

$node->stop;
done_testing();
