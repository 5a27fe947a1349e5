# Copyright (c) 2026, aion_wake authors
#
# 012_immediate_under_load.pl: an immediate shutdown while dispatchers claim,
# park, complete, fail, dead-letter and pulse, then a start.
#
# 300 rows are enqueued; pgbench clients then run transactions that claim a
# row and park it (for an hour, so only a pulse brings it back before the
# test ends; sometimes after a park rolled back to a savepoint), complete
# it, fail it, dead-letter it, or only pulse; one transaction in ten rolls
# back.  Every complete() and fail() writes a ledger row in the same
# transaction, so the ledgers hold exactly what committed.  Once
# the load has done real work the server is stopped in immediate mode under
# it and started again.  Then:
#   - every row is in exactly one of the outbox, the completed ledger and
#     dead_letters: nothing lost, nothing done twice (G1);
#   - each row's attempt equals the fails that committed for it: parks and
#     re-offers never touched it (G4);
#   - no row is left behind a lease: each is claimable now or parked;
#   - the rebuilt set holds exactly the rows whose parked_at is set, as
#     confirmed entries with their fences (a restart loses no park);
#   - pulses and claims drain the outbox to the last row: nothing is stuck
#     behind its one-hour fence.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $nrows = 300;
my $clients = 4;

my $node = aw_node('immload');
like(aw_worker_pid($node), qr/^\d+$/, 'the worker runs');

# The ledgers, and one step of a dispatcher.  r (1..100) picks the action.
$node->safe_psql(
	'postgres', q{
CREATE TABLE public.aw_done (dispatch_key text NOT NULL, attempt int NOT NULL);
CREATE TABLE public.aw_fails (dispatch_key text NOT NULL);
-- a call that should have acted on the row just claimed and did not
CREATE TABLE public.aw_anomaly (what text NOT NULL, dispatch_key text NOT NULL);

CREATE FUNCTION public.aw_load_step(r int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c record;
	ok boolean;
BEGIN
	IF r <= 5 THEN
		PERFORM aion_wake.pulse('ld', 1);
		RETURN 'pulse';
	END IF;
	SELECT * INTO c FROM aion_wake.claim('ld', 1, '1 hour');
	IF NOT FOUND THEN
		RETURN 'none';
	END IF;
	IF r <= 60 THEN
		ok := aion_wake.park(c.dispatch_key, '1 hour', c.lease_token);
	ELSIF r <= 72 THEN
		ok := aion_wake.complete(c.dispatch_key, c.lease_token);
		IF ok THEN
			INSERT INTO public.aw_done VALUES (c.dispatch_key, c.attempt);
		END IF;
		IF r % 2 = 0 THEN
			PERFORM aion_wake.pulse('ld', 1);
		END IF;
	ELSIF r <= 88 THEN
		ok := aion_wake.fail(c.dispatch_key, 'boom', '0', c.lease_token);
		IF ok THEN
			INSERT INTO public.aw_fails VALUES (c.dispatch_key);
		END IF;
	ELSIF r <= 91 THEN
		ok := aion_wake.dead_letter(c.dispatch_key, 'gave up', c.lease_token);
	ELSE
		-- a park rolled back to a savepoint, then a park that stays
		BEGIN
			PERFORM aion_wake.park(c.dispatch_key, '2 hours', c.lease_token);
			RAISE EXCEPTION 'roll the park back';
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
		ok := aion_wake.park(c.dispatch_key, '1 hour', c.lease_token);
	END IF;
	IF NOT ok THEN
		INSERT INTO public.aw_anomaly VALUES ('r=' || r, c.dispatch_key);
	END IF;
	RETURN 'done';
END
$$;
});

$node->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT aion_wake.enqueue('ld' || g, '{}', 'ld') FROM generate_series(1, $nrows) g) e"
);

my $script = "${PostgreSQL::Test::Utils::tmp_check}/012_load.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set r random(1, 100)
\set rb random(1, 10)
BEGIN;
SELECT public.aw_load_step(:r);
\if :rb = 1
ROLLBACK;
\else
COMMIT;
\endif
});

# The load: throttled, so that the outbox is far from drained when the
# server goes down; -T only bounds it should the stop never come.  Parks
# outnumber the slots that pulses free, so rows pile up in the set.
my ($stdout, $stderr) = ('', '');
my $log_offset = -s $node->logfile;
my $pgbench;
{
	local $ENV{PGAPPNAME} = 'aw_load';
	$pgbench = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', 2, '-R', 300, '-T', 120,
			'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'<', \undef, '>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
}

ok( $node->poll_query_until(
		'postgres', qq{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aw_load') = $clients
   AND (SELECT rows_reoffered >= 20 FROM aion_wake.status)
   AND (SELECT count(*) >= 20 FROM public.aw_done)
   AND (SELECT count(*) >= 10 FROM public.aw_fails)
   AND (SELECT count(*) >= 1 FROM aion_wake.dead_letters)
   AND (SELECT count(*) >= 20 FROM aion_wake.outbox WHERE parked_at IS NOT NULL)}),
	'the load parks, re-offers, completes, fails and dead-letters');
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/ERROR:|FATAL:|PANIC:/, 'no error under the load so far');

$node->stop('immediate');
$node->start;
pass('the server starts again after an immediate shutdown under load');

# pgbench loses its connections and gives up
eval { $pgbench->finish; 1 } or $pgbench->kill_kill;
note("pgbench stderr (tail): "
	  . (length($stderr) > 600 ? substr($stderr, -600) : $stderr));

ok(aw_wait_status($node, 'worker_pid IS NOT NULL'),
	'a worker runs after the start');

# -- the rows ---------------------------------------------------------------

is($node->safe_psql('postgres', 'SELECT count(*) FROM public.aw_anomaly'),
	'0', 'every park, complete, fail and dead_letter of a claimed row acted');
my $accounted = qq{
SELECT count(*) FILTER (WHERE n = 1) || '/' || count(*) FILTER (WHERE n <> 1)
  FROM (SELECT 'ld' || g AS dispatch_key FROM generate_series(1, $nrows) g) k
  LEFT JOIN LATERAL (
        SELECT (SELECT count(*) FROM aion_wake.outbox o WHERE o.dispatch_key = k.dispatch_key)
             + (SELECT count(*) FROM public.aw_done d WHERE d.dispatch_key = k.dispatch_key)
             + (SELECT count(*) FROM aion_wake.dead_letters l WHERE l.dispatch_key = k.dispatch_key) AS n) c
    ON true};
is($node->safe_psql('postgres', $accounted),
	"$nrows/0",
	'every row is in exactly one of outbox, completed, dead_letters');
is( $node->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM aion_wake.outbox) + (SELECT count(*) FROM public.aw_done)
       + (SELECT count(*) FROM aion_wake.dead_letters)}),
	$nrows,
	'and there is nothing else');
note(
	'after the restart: '
	  . $node->safe_psql(
		'postgres', q{
SELECT 'outbox ' || (SELECT count(*) FROM aion_wake.outbox)
    || ', parked ' || (SELECT count(*) FROM aion_wake.outbox WHERE parked_at IS NOT NULL)
    || ', completed ' || (SELECT count(*) FROM public.aw_done)
    || ', dead ' || (SELECT count(*) FROM aion_wake.dead_letters)
    || ', fails ' || (SELECT count(*) FROM public.aw_fails)}));

my $attempts_off = q{
SELECT count(*) FROM (
	SELECT dispatch_key, attempt FROM aion_wake.outbox
	UNION ALL SELECT dispatch_key, attempt FROM public.aw_done
	UNION ALL SELECT dispatch_key, attempt FROM aion_wake.dead_letters) r
 WHERE attempt <> (SELECT count(*) FROM public.aw_fails f WHERE f.dispatch_key = r.dispatch_key)};
is($node->safe_psql('postgres', $attempts_off),
	'0', 'attempt rose exactly with the committed fails');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM public.aw_fails'),
	'>=', 10, 'fails are among them');

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox
 WHERE visible_after > clock_timestamp() AND parked_at IS NULL}),
	'0',
	'no row is left behind a lease: each is claimable or parked');

# -- the rebuilt set --------------------------------------------------------

my $nparked = $node->safe_psql('postgres',
	'SELECT count(*) FROM aion_wake.outbox WHERE parked_at IS NOT NULL');
cmp_ok($nparked, '>=', 20, 'rows are parked after the restart');
ok(aw_wait_status($node, "parked_confirmed = $nparked AND parked_pending = 0"),
	'the set holds as many confirmed parks as the table has parked rows');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox o
  FULL JOIN aion_wake.parked p USING (dispatch_key)
 WHERE o.parked_at IS NOT NULL OR p.dispatch_key IS NOT NULL}),
	$nparked,
	'the same rows');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox o JOIN aion_wake.parked p USING (dispatch_key)
 WHERE p.state = 'confirmed' AND p.topic = o.topic AND p.fence = o.visible_after
   AND p.parked_at = o.parked_at AND p.attempt = o.attempt}),
	$nparked,
	'each entry carries its row\'s fence, parked_at and attempt');

# -- drain ------------------------------------------------------------------

# Each call claims and completes whatever is visible, then pulses for the
# rest; it is true once the outbox is empty.  Rows stranded behind their
# one-hour fences would make it time out.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION public.aw_drain_step() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	FOR c IN SELECT * FROM aion_wake.claim('ld', 1000, '1 hour') LOOP
		IF aion_wake.complete(c.dispatch_key, c.lease_token) THEN
			INSERT INTO public.aw_done VALUES (c.dispatch_key, c.attempt);
		ELSE
			INSERT INTO public.aw_anomaly VALUES ('drain', c.dispatch_key);
		END IF;
	END LOOP;
	IF EXISTS (SELECT 1 FROM aion_wake.outbox) THEN
		PERFORM aion_wake.pulse('ld', 1000);
		RETURN false;
	END IF;
	RETURN true;
END
$$;
});
ok($node->poll_query_until('postgres', 'SELECT public.aw_drain_step()'),
	'pulses and claims drain the outbox');
is($node->safe_psql('postgres', $accounted),
	"$nrows/0", 'every row was completed or dead-lettered exactly once');
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.aw_anomaly'),
	'0', 'no claimed row refused its complete');
is($node->safe_psql('postgres', $attempts_off),
	'0', 'attempts still match the fails');
ok( $node->poll_query_until(
		'postgres', 'SELECT count(*) = 0 FROM aion_wake.parked'),
	'the set is empty');

$node->stop;

done_testing();
