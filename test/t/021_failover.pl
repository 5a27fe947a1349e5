# Copyright (c) 2026, aion_wake authors
#
# 021_failover.pl: a failover under a running dispatcher load.
#
# A primary and a streaming standby with synchronous replication
# (synchronous_standby_names = '*'), so every commit acknowledged to a
# client is on the standby.  400 rows are enqueued; pgbench clients then
# run the README's wiring, one transaction per step: a blocking claim
# (lease 5 s, wait 0.5 s); the consumer answers BUSY (park with the
# lease_token, an hour's back-off: only a pulse brings the row back in
# time), accepts (complete with the token and pulse(topic, 1) for the
# freed slot) or fails (fail, or dead_letter after two attempts); a claim
# that finds nothing pulses 8 slots (an idle consumer has its slots free).
# Each park and complete writes a ledger row in the same transaction
# (aw_parks, aw_done, with the port of the server that committed it), and
# after each commit that returned, pgbench appends the outcome to a
# client-side log: what was acknowledged.
#
# The dispatchers' connection string lists both servers with
# target_session_attrs=read-write, as a real dispatcher's would.  Mid-load
# the primary is stopped with -m immediate and the standby promoted;
# pgbench cannot reconnect within a run, so the dispatchers are started
# again with the same string, as a supervisor would restart them, and they
# find the new primary.  Checks:
#   - every park and complete acknowledged on the old primary is on the new
#     one (synchronous replication);
#   - before any dispatcher reconnects, the rows parked on the old primary
#     at the stop (counted under a lock that holds the outbox still) are
#     exactly the rows parked on the new one (parked_at set, fence an hour ahead, the
#     lease_token of a park committed there), the new primary's worker has
#     rebuilt its set from them, fences included, and nothing has been
#     re-offered yet;
#   - the dispatchers drain the outbox on the new primary: every parked row
#     of the old primary is re-offered there by a pulse (its fence is an
#     hour away) and delivered on the new primary;
#   - every row is in exactly one of the completed ledger and dead_letters,
#     the outbox is empty, and no key is completed twice.

use strict;
use warnings;

use AionWake::Test;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $nrows = 400;
my $clients = 4;

my $primary = aw_node('fo_primary', init => { allows_streaming => 1 });

$primary->safe_psql(
	'postgres', q{
CREATE TABLE public.aw_parks (
	dispatch_key text NOT NULL,
	lease_token bigint NOT NULL,
	ok boolean NOT NULL,
	port int NOT NULL DEFAULT current_setting('port')::int,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE public.aw_done (LIKE public.aw_parks INCLUDING DEFAULTS);
});
$primary->safe_psql('postgres',
	"SELECT count(*) FROM (SELECT aion_wake.enqueue('fo' || g, '{}', 'fo') FROM generate_series(1, $nrows) g) e"
);

# the standby, then synchronous replication (commits before it would hang)
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('fo_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->append_conf('postgresql.conf', "synchronous_standby_names = '*'\n");
$primary->reload;
ok( $primary->poll_query_until(
		'postgres', "SELECT sync_state = 'sync' FROM pg_stat_replication"),
	'the standby replicates synchronously');
# commits wait for it once the checkpointer has taken in the reload (it
# sets that flag in shared memory), which it does before a checkpoint
$primary->safe_psql('postgres', 'CHECKPOINT');
my $old_port = $primary->port;
my $new_port = $standby->port;

# One dispatcher step, the README's wiring.  :ack is the client-side log.
my $script = "${PostgreSQL::Test::Utils::tmp_check}/021_dispatch.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set r random(1, 100)
SELECT coalesce(min(dispatch_key), '') AS key, coalesce(min(lease_token), 0) AS tok,
       coalesce(min(attempt), 0) AS att
  FROM aion_wake.claim('fo', 1, '5 s', '0.5 s') \gset
\if :tok = 0
SELECT aion_wake.pulse('fo', 8);
\elif :r <= 55
WITH p AS (SELECT aion_wake.park(:key, '1 hour', :tok) AS ok)
INSERT INTO public.aw_parks (dispatch_key, lease_token, ok)
SELECT :key, :tok, ok FROM p RETURNING ok \gset
\shell echo park :key :tok :ok >> :ack
\elif :r <= 92
WITH c AS (SELECT aion_wake.complete(:key, :tok) AS ok, aion_wake.pulse('fo', 1))
INSERT INTO public.aw_done (dispatch_key, lease_token, ok)
SELECT :key, :tok, ok FROM c RETURNING ok \gset
\shell echo done :key :tok :ok >> :ack
\elif :att >= 2
SELECT aion_wake.dead_letter(:key, 'gave up', :tok);
\else
SELECT aion_wake.fail(:key, 'consumer error', '0 s', :tok);
\endif
});

my $conninfo = sprintf(
	'host=%s,%s port=%d,%d dbname=postgres target_session_attrs=read-write',
	$primary->host, $standby->host, $old_port, $new_port);

# Start pgbench as the dispatchers; $ack is the client-side log.
sub dispatchers
{
	my ($ack, @opts) = @_;
	my ($out, $err) = ('', '');
	local $ENV{PGAPPNAME} = 'aw_dispatch';
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-M', 'extended', '-c', $clients, '-j', 2,
			@opts, '-D', "ack=$ack", '-f', $script, $conninfo
		],
		'<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default * 2));
	return { h => $h, out => \$out, err => \$err };
}

sub finish_dispatchers
{
	my ($d, $kill) = @_;
	if ($kill)
	{
		$d->{h}->kill_kill;
	}
	else
	{
		eval { $d->{h}->finish; 1 } or $d->{h}->kill_kill;
	}
	my $err = ${ $d->{err} };
	note('pgbench stderr (tail): '
		  . (length($err) > 600 ? substr($err, -600) : $err));
}

# Acknowledged outcomes from a client-side log, as a VALUES list.
sub acked
{
	my ($file) = @_;
	my @rows;
	foreach my $line (split /\n/, slurp_file($file))
	{
		my ($what, $key, $tok, $ok) = split / /, $line;
		push @rows, "('$what', '$key', $tok, '$ok'::boolean)";
	}
	return @rows;
}

# --- the load on the primary ---------------------------------------------------

my $ack1 = "${PostgreSQL::Test::Utils::tmp_check}/021_acked_primary.log";
PostgreSQL::Test::Utils::append_to_file($ack1, '');
my $load = dispatchers($ack1, '-R', 150, '-T', 120);
ok( $primary->poll_query_until(
		'postgres', qq{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aw_dispatch') = $clients
   AND (SELECT rows_reoffered >= 10 FROM aion_wake.status)
   AND (SELECT count(*) >= 40 FROM public.aw_done WHERE ok)
   AND (SELECT count(*) >= 15 FROM aion_wake.outbox WHERE parked_at IS NOT NULL)}),
	'the dispatchers claim, park, pulse and complete on the primary');

# --- failover ----------------------------------------------------------------------

# Hold the outbox still for the count the new primary must match: a
# session's EXCLUSIVE lock waits for the writes in flight and blocks the
# dispatchers' next ones (a claim waits at most 0.5 s), so the rows parked
# under the lock are exactly the rows parked at the stop.  Replication is
# synchronous, so every one of them reached the standby.  The dispatchers
# stay connected, blocked mid-load, when the primary stops.
my $hold = aw_session($primary);
my $parked_at_stop = 0;
my $hold_deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while (time < $hold_deadline)
{
	$hold->query_safe('BEGIN');
	$hold->query_safe('LOCK TABLE aion_wake.outbox IN EXCLUSIVE MODE');
	$parked_at_stop = $hold->query_safe(
		'SELECT count(*) FROM aion_wake.outbox WHERE parked_at IS NOT NULL');
	chomp $parked_at_stop;
	last if $parked_at_stop >= 15;
	$hold->query_safe('ROLLBACK');
}
cmp_ok($parked_at_stop, '>=', 15, "the old primary holds $parked_at_stop parked rows at the stop");

$primary->stop('immediate');
eval { $hold->quit; 1 };
finish_dispatchers($load);
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'the standby is promoted');
ok( $standby->poll_query_until(
		'postgres', 'SELECT worker_pid IS NOT NULL FROM aion_wake.status'),
	'the new primary runs a worker');

my @acked1 = acked($ack1);
cmp_ok(scalar(@acked1), '>=', 60, 'the dispatchers were acknowledged parks and completes');
my $values = join(",\n", @acked1);
is( $standby->safe_psql(
		'postgres', qq{
SELECT count(*) FROM (VALUES $values) a(what, key, tok, ok)
 WHERE NOT EXISTS (
	SELECT 1 FROM public.aw_parks p
	 WHERE a.what = 'park' AND p.dispatch_key = a.key AND p.lease_token = a.tok
	   AND p.ok = a.ok AND p.port = $old_port
	UNION ALL
	SELECT 1 FROM public.aw_done d
	 WHERE a.what = 'done' AND d.dispatch_key = a.key AND d.lease_token = a.tok
	   AND d.ok = a.ok AND d.port = $old_port)}),
	'0',
	'every park and complete acknowledged on the old primary is on the new one');

# The rows parked on the old primary, as the new one has them before any
# dispatcher reconnects.
$standby->safe_psql(
	'postgres', q{
CREATE TABLE public.aw_parked_at_failover AS
SELECT dispatch_key, lease_token, visible_after, parked_at
  FROM aion_wake.outbox WHERE parked_at IS NOT NULL});
my $nparked = $standby->safe_psql('postgres',
	'SELECT count(*) FROM public.aw_parked_at_failover');
is($nparked, $parked_at_stop, "the rows parked on the old primary are parked on the new one ($nparked)");
is( $standby->safe_psql(
		'postgres', qq{
SELECT count(*) FROM public.aw_parked_at_failover f
 WHERE f.visible_after < clock_timestamp() + interval '50 minutes'
    OR NOT EXISTS (SELECT 1 FROM public.aw_parks p
                    WHERE p.dispatch_key = f.dispatch_key AND p.lease_token = f.lease_token
                      AND p.ok AND p.port = $old_port)}),
	'0',
	'each is fenced an hour ahead by a park that committed on the old primary');
ok( $standby->poll_query_until(
		'postgres',
		"SELECT parked_confirmed = $nparked AND parked_pending = 0 FROM aion_wake.status"),
	'the new primary\'s worker rebuilds its set from the table');
ok( $standby->wait_for_log(
		qr/aion_wake worker rebuilt the parked set of database "postgres" from $nparked parked rows/),
	'the rebuild is logged with that count');
is( $standby->safe_psql(
		'postgres', q{
SELECT count(*) FROM public.aw_parked_at_failover f
  JOIN aion_wake.parked p USING (dispatch_key)
 WHERE p.state = 'confirmed' AND p.topic = 'fo'
   AND p.fence = f.visible_after AND p.parked_at = f.parked_at}),
	$nparked,
	'the set holds exactly those rows, with their fences');
is(aw_status($standby, 'rows_reoffered'),
	'0', 'nothing has been re-offered on the new primary yet');

# --- the dispatchers reconnect and drain the outbox --------------------------

my $ack2 = "${PostgreSQL::Test::Utils::tmp_check}/021_acked_new_primary.log";
PostgreSQL::Test::Utils::append_to_file($ack2, '');
my $drain = dispatchers($ack2, '-T', 300);
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = $clients FROM pg_stat_activity WHERE application_name = 'aw_dispatch'"),
	'the dispatchers reconnect, to the new primary');
ok($standby->poll_query_until('postgres', 'SELECT count(*) = 0 FROM aion_wake.outbox'),
	'they drain the outbox there');
finish_dispatchers($drain, 1);

my $accounted = qq{
SELECT count(*) FILTER (WHERE n = 1) || '/' || count(*) FILTER (WHERE n <> 1)
  FROM (SELECT 'fo' || g AS dispatch_key FROM generate_series(1, $nrows) g) k
  LEFT JOIN LATERAL (
        SELECT (SELECT count(*) FROM aion_wake.outbox o WHERE o.dispatch_key = k.dispatch_key)
             + (SELECT count(*) FROM public.aw_done d WHERE d.dispatch_key = k.dispatch_key AND d.ok)
             + (SELECT count(*) FROM aion_wake.dead_letters l WHERE l.dispatch_key = k.dispatch_key) AS n) c
    ON true};
is($standby->safe_psql('postgres', $accounted),
	"$nrows/0",
	'every row is in exactly one of the completed ledger, dead_letters and the outbox');
is( $standby->safe_psql(
		'postgres', q{
SELECT count(*) FROM (SELECT dispatch_key FROM public.aw_done WHERE ok
                       GROUP BY dispatch_key HAVING count(*) > 1) twice}),
	'0',
	'no key is completed twice');
is( $standby->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM public.aw_done WHERE ok) + (SELECT count(*) FROM aion_wake.dead_letters)}),
	$nrows,
	'and there is nothing else in the ledger or dead_letters');

is( $standby->safe_psql(
		'postgres', qq{
SELECT count(*) FROM public.aw_parked_at_failover f
 WHERE (SELECT count(*) FROM public.aw_done d
         WHERE d.dispatch_key = f.dispatch_key AND d.ok AND d.port = $new_port
           AND d.at < f.visible_after)
     + (SELECT count(*) FROM aion_wake.dead_letters l
         WHERE l.dispatch_key = f.dispatch_key AND l.dead_at < f.visible_after) = 1}),
	$nparked,
	'each row parked on the old primary is delivered once, on the new one, long before its fence');
cmp_ok(aw_status($standby, 'rows_reoffered'),
	'>=', $nparked, 'pulses on the new primary re-offered at least as many rows');
note(
	'after the drain: '
	  . $standby->safe_psql(
		'postgres', qq{
SELECT 'completed on the old primary ' || count(*) FILTER (WHERE port = $old_port)
    || ', on the new ' || count(*) FILTER (WHERE port = $new_port)
    || ', refused (stale token) ' || (SELECT count(*) FROM public.aw_done WHERE NOT ok)
       + (SELECT count(*) FROM public.aw_parks WHERE NOT ok)
    || ', dead ' || (SELECT count(*) FROM aion_wake.dead_letters)
    || ', re-offered on the new primary ' || (SELECT rows_reoffered FROM aion_wake.status)
  FROM public.aw_done WHERE ok}));

$standby->stop;
done_testing();
