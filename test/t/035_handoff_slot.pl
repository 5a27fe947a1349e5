# Copyright (c) 2026, aion_wake authors
#
# 035_handoff_slot.pl: the slot a settle with next_rows frees on an
# unlimited topic is spent exactly once (G2, G7), whatever the caller's
# isolation level, row locks and rollbacks.  Held here:
#
#   (a) a hand-off in a REPEATABLE READ transaction whose snapshot predates
#       the parks of its topic drops none of their entries: the parks'
#       rows are judged by their latest committed state; the slot it could
#       not spend on them is a pulse at its commit, and later pulses
#       re-offer every row;
#   (b) with default_transaction_isolation = 'repeatable read' the worker
#       still re-offers in READ COMMITTED (a trigger records the level of
#       the worker's UPDATE);
#   (c) next_rows => 0 takes nothing and its freed slot is a pulse: the
#       oldest confirmed park is re-offered;
#   (d) when the oldest park's row is locked, the slot goes to the visible
#       row and the park keeps none: once the lock is gone it is still
#       parked, not woken; with no visible row either, the slot is one
#       pulse at commit, spent on that park once its lock is gone;
#   (e) a hand-off that took a parked row and rolled back (ROLLBACK,
#       ROLLBACK TO SAVEPOINT, a PL/pgSQL exception block) puts the entry
#       back confirmed, holding no slot: the worker does not re-offer it;
#   (f) PREPARE TRANSACTION after a hand-off that took a visible row
#       succeeds; after one that took a parked row, or took nothing (its
#       slot a pulse), it is refused with an error naming the hand-off;
#   (g) an entry whose row was removed by a plain DELETE is dropped by the
#       first round that meets it, and the slot goes to the next park.
#
# A negative check (a park not re-offered) looks after a sentinel park of
# another topic, pulsed later, has been re-offered: by then the worker has
# made a pass over every topic with work.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('handoff_slot', conf => "max_prepared_transactions = 2\n");

$node->safe_psql('postgres', q{
CREATE TABLE public.iso_seen (pid int, key text, iso text);
CREATE FUNCTION public.iso_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.iso_seen
	VALUES (pg_backend_pid(), NEW.dispatch_key, current_setting('transaction_isolation'));
	RETURN NULL;
END
$$;
CREATE TRIGGER iso_log AFTER UPDATE ON aion_wake.outbox
	FOR EACH ROW WHEN (OLD.parked_at IS NOT NULL AND NEW.parked_at IS NULL)
	EXECUTE FUNCTION public.iso_log();
});

# Enqueue rows of a topic and lease each for an hour: their lease tokens.
sub lease_rows
{
	my ($topic, @keys) = @_;
	my %tok;
	foreach my $k (@keys)
	{
		$node->safe_psql('postgres', "SELECT aion_wake.enqueue('$k', '{}', '$topic')");
		$tok{$k} = $node->safe_psql('postgres',
			"SELECT lease_token FROM aion_wake.claim('$topic', 1, '1 hour')");
	}
	return %tok;
}

# Park leased rows for an hour, each in a transaction of its own.
sub park
{
	my (@keys) = @_;
	$node->safe_psql('postgres', "SELECT aion_wake.park('$_', '1 hour')") foreach @keys;
	return;
}

# The worker has made a pass over every topic with work since now.
my $sentinels = 0;

sub worker_pass
{
	my $k = 'sentinel' . ++$sentinels;
	lease_rows("sent$sentinels", $k);
	park($k);
	aw_wait_confirmed($node, "sent$sentinels", 1) or die "no confirm of $k";
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('sent$sentinels')");
	aw_wait_reoffered($node, $k) or die "the sentinel $k was not re-offered";
	return;
}

sub entry_of
{
	my ($key) = @_;
	return $node->safe_psql('postgres',
		"SELECT state || '/' || woken FROM aion_wake.parked WHERE dispatch_key = '$key'");
}

# (a) a REPEATABLE READ hand-off whose snapshot predates the parks
{
	my %tok = lease_rows('rr', 'rr0', map { "rr$_" } 1 .. 5);
	my $s = aw_session($node);
	$s->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$s->query_safe('SELECT count(*) FROM aion_wake.outbox');
	park(map { "rr$_" } 1 .. 5);
	ok(aw_wait_confirmed($node, 'rr', 5), '(a) five parks confirmed');
	is($s->query_safe(
			"SELECT count(*) FROM aion_wake.complete('rr0', $tok{rr0}, next_rows => 1)"),
		'0', '(a) the hand-off in the old snapshot takes nothing');
	is(aw_confirmed($node, 'rr'), 'rr1,rr2,rr3,rr4,rr5',
		'(a) and drops none of the entries it could not see');
	$s->query_safe('COMMIT');
	$s->quit;
	ok(aw_wait_reoffered($node, 'rr1'),
		'(a) its freed slot, a pulse at commit, re-offers the oldest park');
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('rr', 4)");
	ok( aw_poll_for(
			$node, 'postgres', q{
SELECT count(*) = 5 FROM aion_wake.outbox
 WHERE topic = 'rr' AND parked_at IS NULL AND visible_after <= clock_timestamp()}, 30),
		'(a) a later pulse re-offers the other four');
}

# (c) next_rows => 0: the freed slot is a pulse
foreach my $fn ('complete', 'fail', 'dead_letter')
{
	my $t = "z$fn";
	my %tok = lease_rows($t, "${t}0", "${t}1");
	park("${t}1");
	ok(aw_wait_confirmed($node, $t, 1), "(c) $fn: park confirmed");
	my $args = {
		complete => "'${t}0', $tok{\"${t}0\"}",
		fail => "'${t}0', 'x', '1 hour', $tok{\"${t}0\"}",
		dead_letter => "'${t}0', 'x', $tok{\"${t}0\"}" }->{$fn};
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM aion_wake.$fn($args, next_rows => 0)"),
		'0', "(c) $fn with next_rows => 0 takes nothing");
	ok(aw_poll_for($node, 'postgres', qq{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = '${t}1'}, 30),
		"(c) $fn with next_rows => 0: its slot re-offers the oldest park");
}

# (d) the oldest park's row is locked: one slot, one row
{
	my %tok = lease_rows('lk', 'lk0', 'lk1', 'lk2');
	park('lk1');
	ok(aw_wait_confirmed($node, 'lk', 1), '(d) park confirmed');
	$node->safe_psql('postgres', q{
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() - interval '1 s'
 WHERE dispatch_key = 'lk2'});
	my $locker = aw_session($node);
	$locker->query_safe('BEGIN');
	$locker->query_safe(
		"SELECT 1 FROM aion_wake.outbox WHERE dispatch_key = 'lk1' FOR UPDATE");
	is($node->safe_psql('postgres',
			"SELECT string_agg(dispatch_key, ',') FROM aion_wake.complete('lk0', $tok{lk0}, next_rows => 1)"),
		'lk2', '(d) the slot goes to the visible row');
	is(entry_of('lk1'), 'confirmed/false', '(d) and the locked park keeps no slot');
	$locker->query_safe('ROLLBACK');
	worker_pass();
	is(aw_still_parked($node, 'lk'), 'lk1',
		'(d) once its lock is gone the park is not re-offered for that slot');
	is(entry_of('lk1'), 'confirmed/false', '(d) nor woken');

	# no visible row: the slot is a pulse at commit, which finds the park
	my %tok2 = lease_rows('lk', 'lk3');
	$locker->query_safe('BEGIN');
	$locker->query_safe(
		"SELECT 1 FROM aion_wake.outbox WHERE dispatch_key = 'lk1' FOR UPDATE");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM aion_wake.complete('lk3', $tok2{lk3}, next_rows => 1)"),
		'0', '(d) nothing visible: the hand-off takes nothing');
	is(aw_still_parked($node, 'lk'), 'lk1', '(d) the park is still parked while locked');
	$locker->query_safe('ROLLBACK');
	ok(aw_wait_reoffered($node, 'lk1'),
		'(d) the pulse re-offers it once its lock is gone');
	$locker->quit;
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM aion_wake.parked WHERE topic = 'lk'"),
		'0', '(d) no entry of the topic is left');
}

# (e) a hand-off that rolls back spends no slot
foreach my $how ('rollback', 'savepoint', 'plpgsql')
{
	my $t = "rb$how";
	my %tok = lease_rows($t, "${t}0", "${t}1");
	park("${t}1");
	ok(aw_wait_confirmed($node, $t, 1), "(e) $how: park confirmed");
	my $handoff =
	  "SELECT count(*) FROM aion_wake.complete('${t}0', $tok{\"${t}0\"}, next_rows => 1)";
	my $sql = {
		rollback => "BEGIN; $handoff; ROLLBACK;",
		savepoint => "BEGIN; SAVEPOINT s; $handoff; ROLLBACK TO SAVEPOINT s; COMMIT;",
		plpgsql => qq{DO \$\$
BEGIN
	BEGIN
		PERFORM * FROM aion_wake.complete('${t}0', $tok{"${t}0"}, next_rows => 1);
		IF NOT EXISTS (SELECT FROM aion_wake.outbox
		                WHERE dispatch_key = '${t}1' AND parked_at IS NULL) THEN
			RAISE 'the hand-off took no parked row';
		END IF;
		RAISE SQLSTATE 'P0003';
	EXCEPTION WHEN SQLSTATE 'P0003' THEN
		NULL;
	END;
END
\$\$;} }->{$how};
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	is($err, '', "(e) $how: the hand-off ran");
	like($out, qr/^1$/m, "(e) $how: it took the park") unless $how eq 'plpgsql';
	is(entry_of("${t}1"), 'confirmed/false', "(e) $how: the entry is back, holding no slot");
	worker_pass();
	is(aw_still_parked($node, $t), "${t}1", "(e) $how: the worker did not re-offer it");
	is(aw_confirmed($node, $t), "${t}1", "(e) $how: still in the set, confirmed");
}

# (f) PREPARE TRANSACTION after a hand-off on an unlimited topic
{
	my %tok = lease_rows('tp', 'tp0', 'tp1');
	$node->safe_psql('postgres', q{
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() - interval '1 s'
 WHERE dispatch_key = 'tp1'});
	my ($ret, $out, $err) = $node->psql('postgres', qq{
BEGIN;
SELECT dispatch_key FROM aion_wake.complete('tp0', $tok{tp0}, next_rows => 1);
PREPARE TRANSACTION 'tp_visible';
COMMIT PREPARED 'tp_visible';});
	is($err, '', '(f) a hand-off that took a visible row prepares');
	is($node->safe_psql('postgres',
			"SELECT string_agg(dispatch_key || '/' || (lease_token IS NOT NULL), ',') FROM aion_wake.outbox WHERE topic = 'tp'"),
		'tp1/true', '(f) and COMMIT PREPARED settles and leases');

	my $tp1 = $node->safe_psql('postgres',
		"SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'tp1'");
	($ret, $out, $err) = $node->psql('postgres', qq{
BEGIN;
SELECT count(*) FROM aion_wake.complete('tp1', $tp1, next_rows => 1);
PREPARE TRANSACTION 'tp_pulse';});
	like($err, qr/cannot PREPARE a transaction whose settle with next_rows/,
		'(f) one that took nothing (a pulse) is refused, naming the hand-off');

	my %tok2 = lease_rows('tp', 'tp2', 'tp3');
	park('tp3');
	ok(aw_wait_confirmed($node, 'tp', 1), '(f) park confirmed');
	($ret, $out, $err) = $node->psql('postgres', qq{
BEGIN;
SELECT dispatch_key FROM aion_wake.complete('tp2', $tok2{tp2}, next_rows => 1);
PREPARE TRANSACTION 'tp_parked';});
	like($out, qr/^tp3$/m, '(f) the hand-off took the park');
	like($err, qr/cannot PREPARE a transaction whose settle with next_rows/,
		'(f) and is refused, naming the hand-off');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
		'0', '(f) nothing is left prepared');
	is(entry_of('tp3'), 'confirmed/false', '(f) the park is back in the set');
}

# (g) a row removed by a plain DELETE
{
	my %tok = lease_rows('del', 'del1', 'del2');
	park('del1', 'del2');
	ok(aw_wait_confirmed($node, 'del', 2), '(g) parks confirmed');
	$node->safe_psql('postgres', "DELETE FROM aion_wake.outbox WHERE dispatch_key = 'del1'");
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('del')");
	ok(aw_wait_reoffered($node, 'del2'), '(g) the slot goes to the next park');
	is(aw_confirmed($node, 'del'), '', '(g) the entry of the deleted row is dropped');
}

# (b) the worker re-offers in READ COMMITTED whatever the default is
{
	$node->append_conf('postgresql.conf',
		"default_transaction_isolation = 'repeatable read'\n");
	$node->restart;
	aw_wait_status($node, 'worker_pid IS NOT NULL') or die 'no worker';
	my %tok = lease_rows('iso', 'iso1');
	park('iso1');
	ok(aw_wait_confirmed($node, 'iso', 1), '(b) park confirmed');
	$node->safe_psql('postgres', "SELECT aion_wake.pulse('iso')");
	ok(aw_wait_reoffered($node, 'iso1'), '(b) re-offered');
	is($node->safe_psql('postgres', q{
SELECT string_agg(iso, ',') FROM public.iso_seen
 WHERE key = 'iso1' AND pid = (SELECT worker_pid FROM aion_wake.status)}),
		'read committed', '(b) by the worker, in READ COMMITTED');
}

done_testing();
