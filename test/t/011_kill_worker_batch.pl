# Copyright (c) 2026, aion_wake authors
#
# 011_kill_worker_batch.pl: the background worker dies in the middle of a
# re-offer batch.
#
# The worker re-offers parked rows with one compare-and-set UPDATE per batch,
# in a transaction of its own (src/reoffer.c, src/worker.c).  A test trigger
# on aion_wake.outbox lets the first re-offered row of a transaction through
# and makes every later one wait for an advisory lock the test holds, so the
# worker stops inside its UPDATE with one row already rewritten by its open
# transaction (checked with pageinspect: one heap tuple carries its xid).
# Whatever order the UPDATE visits the rows in, the trap springs on the
# second.  No sleeps: the test waits for the worker's advisory lock wait.
#
#   (a) kill -9 of the worker there.  After the crash restart every parked
#       row is exactly as its park left it: same fence, parked_at and
#       attempt (the aborted batch moved nothing durable: G1, G3, G4); the
#       rebuilt set holds each as confirmed with that fence; the pulse spent
#       in the killed batch may be lost (a restart may lose pulses in
#       flight), but a new pulse re-offers every row, and each is then
#       claimed exactly once.
#   (b) pg_terminate_backend() of the worker there: an orderly exit, no
#       crash restart.  The entries the batch had taken are restored in the
#       set and their slots spent again by the next worker (G2: a slot given
#       to a re-offer that moves nothing is spent again): with no new pulse,
#       the new worker runs the batch again, and once the trap lets it, every
#       row is re-offered and then claimed exactly once.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $lock_id = 7011;

# the test framework turns restart_after_crash off; (a) needs it
my $node = aw_node('killbatch', conf => "restart_after_crash = on\n");
$node->safe_psql('postgres', 'CREATE EXTENSION pageinspect');
like(aw_worker_pid($node), qr/^\d+$/, 'the worker runs');

# The trap.  A re-offer clears parked_at; the first such row in a transaction
# goes through, every later one waits for the advisory lock.  The sequence
# counts the rows the trigger saw (it is not transactional, so the test can
# read it while the worker's transaction is open).
$node->safe_psql(
	'postgres', qq{
CREATE SEQUENCE public.aw_test_seen;
CREATE FUNCTION public.aw_test_hold() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	IF NEW.topic IN ('kb', 'kt') AND OLD.parked_at IS NOT NULL AND NEW.parked_at IS NULL THEN
		PERFORM pg_catalog.nextval('public.aw_test_seen');
		IF pg_catalog.current_setting('aw_test.first_done', true) IS DISTINCT FROM 'on' THEN
			PERFORM pg_catalog.set_config('aw_test.first_done', 'on', true);
		ELSE
			PERFORM pg_catalog.pg_advisory_xact_lock($lock_id);
		END IF;
	END IF;
	RETURN NEW;
END
\$\$;
CREATE TRIGGER aw_test_hold BEFORE UPDATE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION public.aw_test_hold();
});

# Every row of a topic as the table holds it: key, attempt, fence, parked_at.
sub rows_of
{
	my ($topic) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT string_agg(dispatch_key || '/' || attempt || '/' || visible_after || '/'
                  || coalesce(parked_at::text, '-'), ',' ORDER BY dispatch_key)
  FROM aion_wake.outbox WHERE topic = '$topic'});
}

sub seen
{
	return $node->safe_psql('postgres',
		'SELECT last_value FROM public.aw_test_seen');
}

# Wait until the worker $pid is caught by the trap, and check that one row
# is already rewritten in its open transaction.  $what names the worker.
sub blocked_mid_batch
{
	my ($pid, $what) = @_;
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE pid = $pid AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
		"$what blocks inside its re-offer UPDATE");
	my $xid = $node->safe_psql('postgres',
		"SELECT backend_xid FROM pg_stat_activity WHERE pid = $pid");
	like($xid, qr/^\d+$/, "$what has a transaction id");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*)
  FROM generate_series(0, pg_relation_size('aion_wake.outbox')
                          / current_setting('block_size')::int - 1) b,
       heap_page_items(get_raw_page('aion_wake.outbox', b::int)) h
 WHERE h.t_xmin::text = '$xid'}),
		'1',
		"$what has one row already updated in its open transaction");
}

# Claim every row of a topic, a few at a time: each exactly once.
sub claim_all
{
	my ($topic, $n, $what) = @_;
	my %claimed;
	my $claims = 0;
	for (my $i = 0; $i < 2 * $n; $i++)
	{
		my $got = $node->safe_psql('postgres',
			"SELECT dispatch_key FROM aion_wake.claim('$topic', 7, '1 hour')");
		last if $got eq '';
		foreach my $k (split /\n/, $got)
		{
			$claimed{$k}++;
			$claims++;
		}
	}
	is($claims, $n, "$what $n claims in all");
	is(scalar(keys %claimed), $n, "$what each of them a different row");
	is( $node->safe_psql(
			'postgres', "SELECT count(*) FROM aion_wake.claim('$topic', 1000)"),
		'0', "$what nothing is left to claim");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM aion_wake.outbox
 WHERE topic = '$topic' AND parked_at IS NULL
   AND visible_after > clock_timestamp() + interval '50 minutes'}),
		$n,
		"$what every row is leased once");
}

# ---------------------------------------------------------------------
# (a) kill -9 of the worker in the middle of a batch
# ---------------------------------------------------------------------
# Rows kb1..kb50, every fifth with one failed attempt behind it (so that an
# unchanged attempt means something), all parked for an hour in one
# transaction: only a pulse can bring them back before the test ends.
my $nkb = 50;
$node->safe_psql(
	'postgres', qq{
SELECT count(*) FROM (SELECT aion_wake.enqueue('kb' || g, '{}', 'kb')
                        FROM generate_series(1, $nkb) g) e;
SELECT count(*) FROM aion_wake.claim('kb', $nkb, '1 hour');
SELECT count(*) FROM (SELECT aion_wake.fail('kb' || g, 'boom', '0')
                        FROM generate_series(5, $nkb, 5) g) f;
SELECT count(*) FROM aion_wake.claim('kb', $nkb, '1 hour');
SELECT count(*) FROM (SELECT aion_wake.park('kb' || g, '1 hour')
                        FROM generate_series(1, $nkb) g) p;
});
my $kb_parked = rows_of('kb');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE parked_at IS NOT NULL
                          AND visible_after > clock_timestamp() + interval '50 minutes'),
       count(*) FILTER (WHERE attempt = 1)
  FROM aion_wake.outbox WHERE topic = 'kb'}),
	"$nkb|10",
	"(a) $nkb rows parked for an hour, 10 of them with a failed attempt");
ok(aw_wait_confirmed($node, 'kb', $nkb), '(a) all parks are confirmed in the set');

my $holder = aw_session($node);
$holder->query_safe("SELECT pg_advisory_lock($lock_id)");
my $worker = aw_worker_pid($node);
like($worker, qr/^\d+$/, '(a) the worker has a pid');

$node->safe_psql('postgres', "SELECT aion_wake.pulse('kb', $nkb)");
blocked_mid_batch($worker, '(a) the worker');
is(seen(), '2', '(a) the trigger let one row through and holds the second');
is(rows_of('kb'), $kb_parked,
	'(a) other sessions still see every row as parked');

# Kill the worker where it stands.
my $log_offset = -s $node->logfile;
kill 'KILL', $worker or die "could not kill worker $worker: $!";
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
pass('(a) the server goes through a crash restart');
# the session holding the advisory lock went down with the crash
$holder->{run}->finish;

ok(defined aw_wait_new_worker($node, $worker),
	'(a) a new worker runs after the crash restart');
ok(aw_wait_confirmed($node, 'kb', $nkb), '(a) the set is rebuilt');

# Nothing of the killed batch survived: every row keeps its park's fence,
# parked_at and attempt, and none is lost.
is(rows_of('kb'), $kb_parked, '(a) every row is exactly as its park left it');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox o
  FULL JOIN (SELECT * FROM aion_wake.parked WHERE topic = 'kb') p USING (dispatch_key)
 WHERE o.topic = 'kb' OR p.dispatch_key IS NOT NULL}),
	$nkb, '(a) no row lost, no entry without a row');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox o
  JOIN aion_wake.parked p USING (dispatch_key)
 WHERE o.topic = 'kb' AND p.state = 'confirmed' AND p.owner_pid IS NULL
   AND p.fence = o.visible_after AND p.parked_at = o.parked_at
   AND p.attempt = o.attempt AND p.topic = o.topic}),
	$nkb,
	'(a) the rebuilt set holds every parked row as confirmed, with its fence, parked_at and attempt'
);

# Nobody holds the advisory lock any more (its session died in the crash),
# so the trap lets every row through; a new pulse re-offers every row.
$node->safe_psql('postgres', "SELECT aion_wake.pulse('kb', $nkb)");
ok( $node->poll_query_until(
		'postgres', qq{
SELECT count(*) = $nkb FROM aion_wake.outbox
 WHERE topic = 'kb' AND parked_at IS NULL AND visible_after <= clock_timestamp()}),
	'(a) a pulse after the restart re-offers every row');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE attempt = 1) || '/' || sum(attempt) FROM aion_wake.outbox WHERE topic = 'kb'"
	),
	'10/10',
	'(a) the re-offer left attempt alone');
claim_all('kb', $nkb, '(a)');

# ---------------------------------------------------------------------
# (b) pg_terminate_backend() of the worker in the middle of a batch
# ---------------------------------------------------------------------
my $nkt = 20;
$node->safe_psql(
	'postgres', qq{
SELECT count(*) FROM (SELECT aion_wake.enqueue('kt' || g, '{}', 'kt')
                        FROM generate_series(1, $nkt) g) e;
SELECT count(*) FROM (SELECT aion_wake.park('kt' || g, '1 hour')
                        FROM generate_series(1, $nkt) g) p;
});
ok(aw_wait_confirmed($node, 'kt', $nkt), '(b) all parks are confirmed in the set');
my $kt_parked = rows_of('kt');

$holder = aw_session($node);
$holder->query_safe("SELECT pg_advisory_lock($lock_id)");
my $seen_before = seen();
$worker = aw_worker_pid($node);
$node->safe_psql('postgres', "SELECT aion_wake.pulse('kt', $nkt)");
blocked_mid_batch($worker, '(b) the worker');
is(seen(), $seen_before + 2,
	'(b) the trigger let one row through and holds the second');

$log_offset = -s $node->logfile;
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($worker)"),
	't', '(b) the worker is terminated');
ok(defined aw_wait_new_worker($node, $worker),
	'(b) a new worker comes back');

# The taken entries were restored with their slots: the new worker runs the
# batch again by itself, and runs into the trap again.
blocked_mid_batch(aw_worker_pid($node), '(b) with no new pulse, the new worker');
is($holder->query_safe('SELECT 1'),
	'1', '(b) the session holding the lock survived: no crash restart');
unlike(slurp_file($node->logfile, $log_offset),
	qr/reinitializing/, '(b) the log shows no crash restart');
is(rows_of('kt'), $kt_parked, '(b) every row is still as its park left it');
is($node->safe_psql('postgres', "SELECT count(*) FROM aion_wake.parked WHERE topic = 'kt'"),
	$nkt, '(b) every entry is still in the set');

# Let the batch through: every row is re-offered, with no new pulse.
$holder->query_safe("SELECT pg_advisory_unlock($lock_id)");
ok( $node->poll_query_until(
		'postgres', qq{
SELECT count(*) = $nkt FROM aion_wake.outbox
 WHERE topic = 'kt' AND parked_at IS NULL AND visible_after <= clock_timestamp()}),
	'(b) the new worker re-offers every row');
is( $node->safe_psql(
		'postgres', "SELECT sum(attempt) FROM aion_wake.outbox WHERE topic = 'kt'"),
	'0', '(b) attempt untouched');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM aion_wake.parked WHERE topic = 'kt'"),
	'(b) the set lets them go');
claim_all('kt', $nkt, '(b)');
$holder->quit;

$node->stop;

done_testing();
