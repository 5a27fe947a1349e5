# Copyright (c) 2026, aion_wake authors
#
# 027_limits_restart.pl: known capacity across restarts and crashes (G8
# under faults; doc/design.md, Limits and Exactness rules: 3).
#
#   (a) pg_terminate_backend() of the worker, while shared memory survives:
#       the counts are kept (an open claim's lease too, which no rebuild from
#       the table could know of), nothing more is granted, a blocked claimer
#       is still woken by a settle, and the new worker ends a lease taken
#       before it started, on time;
#   (b) kill -9 of a backend holding an open claim of a limited topic: crash
#       restart; the live leases are rebuilt from leased_until (the open
#       claim's is gone), the limit is never exceeded afterwards, a blocked
#       claimer is woken when those leases end, and the limit's full
#       capacity is usable once they have;
#   (c) kill -9 of the worker: the same;
#   (d) an immediate shutdown under a pgbench load of claimers and settlers
#       on two limited topics (claims that roll back, settles that roll
#       back to a savepoint, leases abandoned to expire), then a start:
#       in_flight equals the committed live leases, everything drains, the
#       whole capacity is usable afterwards, and neither the samples taken
#       under the load nor the ledger of every lease (claim to the commit of
#       its settle, or its end) ever shows more live leases than the limit.
#
# "Promptly" is the contract's 200 ms, measured on the server's clock from a
# lease's end (its leased_until) or a commit (its commit timestamp) to the
# moment the woken claim took its row.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use AionWake::Test;

my $prompt = aw_prompt(0.2);

# the test framework turns restart_after_crash off; the kills need it;
# statement_timeout: a statement that hangs where it must not fails its
# test instead of the whole run
my $node = aw_node(
	'limrestart', conf => q{
statement_timeout = '90s'
restart_after_crash = on
track_commit_timestamp = on
});
$node->safe_psql('postgres', 'CREATE TABLE public.ev (name text PRIMARY KEY)');

# -- helpers (as in 026_limits.pl) ----------------------------------------

sub sql
{
	return $node->safe_psql('postgres', $_[0]);
}

sub lim { return aw_limit_of($node, $_[0]); }

sub live_rows { return aw_live_leases($node, $_[0]); }

sub enqueue
{
	my ($t, @keys) = @_;
	sql(join '', map { "SELECT aion_wake.enqueue('$_', '{}', '$t');\n" } @keys);
	return;
}

sub claim_now
{
	my ($t, $n, $lease) = @_;
	$lease //= '1 hour';
	my $out = sql(qq{
SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until)
  FROM aion_wake.claim('$t', $n, '$lease') ORDER BY dispatch_key});
	return map { [ split /\|/ ] } grep { $_ ne '' } split /\n/, $out;
}

sub start_claim
{
	my ($s, $t, $wait) = @_;
	$wait //= '20 s';
	aw_start($s, qq{
SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('$t', 1, '1 hour', '$wait')});
	return;
}

sub woken_ok
{
	my ($s, $from, $what) = @_;
	my @rows = aw_finish_rows($s);
	return aw_taken_promptly(\@rows, $from, $prompt, $what) // [ '', '', 0 ];
}

sub commit_event
{
	my ($name, $stmt) = @_;
	sql("BEGIN; $stmt; INSERT INTO public.ev VALUES ('$name'); COMMIT;");
	return sql(qq{
SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) FROM public.ev WHERE name = '$name'});
}

sub waiters_of
{
	my ($t, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT coalesce((SELECT waiters FROM aion_wake.topics WHERE topic = '$t'), 0) = $n");
}

# after a restart: until the worker (or a claim) has loaded the limit
sub limit_loaded
{
	my ($t, $max) = @_;
	return $node->poll_query_until('postgres',
		"SELECT max_in_flight = $max FROM aion_wake.topics WHERE topic = '$t'");
}

# in_flight of a topic beside its rows with a live lease, read where no
# lease of the topic ends within 100 ms either side (else read again):
# "in_flight|live rows"
sub in_flight_and_live
{
	my ($t) = @_;
	for (1 .. 50)
	{
		my ($if, $before, $after) = split /\|/, sql(qq{
SELECT (SELECT in_flight FROM aion_wake.topics WHERE topic = '$t'),
       count(*) FILTER (WHERE leased_until > c.t - interval '100 ms'),
       count(*) FILTER (WHERE leased_until > c.t + interval '100 ms')
  FROM (SELECT clock_timestamp() AS t) c, aion_wake.outbox o
 WHERE o.topic = '$t' AND o.lease_token IS NOT NULL});
		return "$if|$after" if $before == $after;
		usleep(50_000);
	}
	return 'a lease ends at every look';
}

# The most leases of the ledger (public.claims, public.settles) that
# overlapped: a lease runs from its claim to the commit of its settle, or to
# its end, whichever is first.  Its end is taken 5 ms early, since the
# claim after it reads the clock before it reserves its slot; a lease over
# the limit overlaps for the 20 ms of work at least.
sub overlap_sql
{
	my ($where) = @_;
	return qq{
WITH iv AS (
	SELECT c.claimed_at AS s,
	       least(coalesce(pg_xact_commit_timestamp(st.xmin), c.lease_end), c.lease_end)
	         - interval '5 ms' AS e
	  FROM public.claims c LEFT JOIN public.settles st USING (token)
	 WHERE $where),
ev AS (SELECT s AS t, 1 AS d FROM iv WHERE e > s
       UNION ALL SELECT e, -1 FROM iv WHERE e > s)
SELECT coalesce(max(n), 0) FROM (SELECT sum(d) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n FROM ev) x};
}

# ---------------------------------------------------------------------
# (a) the worker terminated, shared memory intact
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('kt', 4)");
enqueue('kt', map { "kt$_" } 1 .. 8);
my @long = claim_now('kt', 2, '1 hour');
my ($short) = claim_now('kt', 1, '8 s');
my $s1 = aw_session($node);
$s1->query_safe('BEGIN');
is($s1->query_safe("SELECT count(*) FROM aion_wake.claim('kt', 1, '1 hour')"),
	'1', '(a) an open claim takes the fourth slot');
is(lim('kt'), '4/4', '(a) the topic is full: three committed leases and an open one');
my $c0 = aw_session($node);
start_claim($c0, 'kt');
ok(waiters_of('kt', 1), '(a) a claimer waits');

my $pid = aw_worker_pid($node);
my $log_offset = -s $node->logfile;
is(sql("SELECT pg_terminate_backend($pid)"), 't', '(a) the worker is terminated');
my $new_pid = aw_wait_new_worker($node, $pid);
ok(defined $new_pid, '(a) a new worker comes back');
unlike(slurp_file($node->logfile, $log_offset), qr/reinitializing/,
	'(a) without a crash restart');

is(lim('kt'), '4/4', '(a) the new worker keeps the counts, the open lease too');
is(sql("SELECT count(*) FROM aion_wake.claim('kt', 5)"), '0', '(a) nothing is granted');
ok(!aw_done($c0), '(a) the claimer still waits');
$s1->query_safe('COMMIT');
is(lim('kt'), '4/4', '(a) the open claim commits: still 4');
my $t = commit_event('kt_complete', "SELECT aion_wake.complete('$long[0][0]', $long[0][1])");
my $row = woken_ok($c0, $t, '(a) a complete wakes the claimer promptly');
is(lim('kt'), '4/4', '(a) whose lease takes the slot');

# a lease taken before the worker was terminated ends on time
SKIP:
{
	skip 'the new worker came after the 8 s lease had ended', 2
	  if sql("SELECT clock_timestamp() > to_timestamp($short->[2])") eq 't';
	start_claim($c0, 'kt');
	ok(waiters_of('kt', 1), '(a) a claimer waits again');
	woken_ok($c0, $short->[2],
		'(a) the new worker ends a lease taken before it started, on time: the claimer returns promptly');
}
$s1->quit;
$c0->quit;
sql("SELECT aion_wake.set_limit('kt', NULL)");

# ---------------------------------------------------------------------
# (b) kill -9 of a backend holding an open claim
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('kb', 3)");
enqueue('kb', map { "kb$_" } 1 .. 8);
# leases of 15 s: they must outlast the crash restart and the checks
# before their end, on a loaded machine too
my @committed = claim_now('kb', 2, '15 s');
$s1 = aw_session($node);
$s1->query_safe('BEGIN');
is($s1->query_safe("SELECT dispatch_key FROM aion_wake.claim('kb', 1, '1 hour')"),
	'kb3', '(b) an open claim leases kb3');
is(lim('kb'), '3/3', '(b) the topic is full');

$pid = aw_worker_pid($node);
$log_offset = -s $node->logfile;
kill 'KILL', $s1->{pid};
eval { $s1->{run}->kill_kill; 1 };
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
pass('(b) the kill -9 makes a crash restart');
ok(defined aw_wait_new_worker($node, $pid), '(b) a new worker runs');
ok(limit_loaded('kb', 3), '(b) the limit is back');
is(in_flight_and_live('kb'), '2|2',
	'(b) in_flight is rebuilt from leased_until: the two committed leases, not the open one');
is( sql(q{
SELECT visible_after <= clock_timestamp() FROM aion_wake.outbox WHERE dispatch_key = 'kb3'}),
	't', '(b) kb3 is claimable: its claim rolled back');
my @granted = claim_now('kb', 5);
is(scalar(@granted), 1, '(b) a claim of 5 gets the one slot left: the limit holds');
is(lim('kb'), '3/3', '(b) full again');
$c0 = aw_session($node);
start_claim($c0, 'kb');
ok(waiters_of('kb', 1), '(b) a claimer waits');
$row = woken_ok($c0, $committed[0][2],
	'(b) the end of the leases from before the crash wakes it promptly');
# (a row that did not come, after a failure above, is left alone)
sql("SELECT aion_wake.complete('$_->[0]', $_->[1])") foreach grep { $_->[0] ne '' } ($row, @granted);
is(lim('kb'), '3/0', '(b) nothing is left in flight');
is(scalar(claim_now('kb', 10)), 3, '(b) the full capacity of 3 is usable: no slot stranded');

# ---------------------------------------------------------------------
# (c) kill -9 of the worker
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('kw', 2)");
enqueue('kw', map { "kw$_" } 1 .. 6);
@committed = claim_now('kw', 2, '15 s');
$c0 = aw_session($node);
start_claim($c0, 'kw');
ok(waiters_of('kw', 1), '(c) a claimer waits on the full topic');

$pid = aw_worker_pid($node);
$log_offset = -s $node->logfile;
kill 'KILL', $pid;
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
pass('(c) the kill -9 of the worker makes a crash restart');
eval { $c0->{run}->kill_kill; 1 };
ok(defined aw_wait_new_worker($node, $pid), '(c) a new worker runs');
ok(limit_loaded('kw', 2), '(c) the limit is back');
is(in_flight_and_live('kw'), '2|2', '(c) in_flight is rebuilt from leased_until');
is(scalar(claim_now('kw', 5)), 0, '(c) nothing is granted');
$c0 = aw_session($node);
start_claim($c0, 'kw');
ok(waiters_of('kw', 1), '(c) a claimer waits');
$row = woken_ok($c0, $committed[0][2],
	'(c) the end of the leases from before the crash wakes it promptly');
sql("SELECT aion_wake.complete('$row->[0]', $row->[1])") if $row->[0] ne '';
is(lim('kw'), '2/0', '(c) nothing is left in flight');
is(scalar(claim_now('kw', 10)), 2, '(c) the full capacity of 2 is usable: no slot stranded');
$c0->quit;

# ---------------------------------------------------------------------
# (d) an immediate shutdown under load
# ---------------------------------------------------------------------
my %limit = (la => 2, lb => 3);
sql(qq{
SELECT aion_wake.set_limit('la', $limit{la});
SELECT aion_wake.set_limit('lb', $limit{lb});
SELECT count(*) FROM (SELECT aion_wake.enqueue('l' || g, '{}', CASE WHEN g % 2 = 0 THEN 'la' ELSE 'lb' END)
                        FROM generate_series(1, 2000) g) e;
-- every committed claim, and every settle that committed and acted
CREATE TABLE public.claims (token bigint PRIMARY KEY, dispatch_key text, topic text,
                            claimed_at timestamptz, lease_end timestamptz);
CREATE TABLE public.settles (token bigint PRIMARY KEY, how text);
CREATE TABLE public.samples (topic text, in_flight int, live_rows bigint);

CREATE FUNCTION public.ld_claim(tp int, r int) RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE
	t text := CASE tp WHEN 1 THEN 'la' ELSE 'lb' END;
	c record;
BEGIN
	SELECT * INTO c FROM aion_wake.claim(t, 1, '2 s', CASE WHEN r <= 50 THEN '1 s' ELSE '0' END::interval);
	IF NOT FOUND THEN
		RETURN 0;
	END IF;
	INSERT INTO public.claims VALUES (c.lease_token, c.dispatch_key, t,
	                                  c.leased_until - interval '2 s', c.leased_until);
	RETURN c.lease_token;
END
\$\$;

-- settle the lease tok: r picks how; 3 in 100 are abandoned to expire, 3
-- in 100 settle and roll back to a savepoint
CREATE FUNCTION public.ld_settle(tok bigint, r int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
	k text;
	ok boolean;
	how text;
BEGIN
	SELECT dispatch_key INTO k FROM public.claims WHERE token = tok;
	IF NOT FOUND OR r <= 3 THEN
		RETURN 'none';
	END IF;
	PERFORM pg_sleep(0.02);		-- the consumer works while the lease is held
	IF r <= 6 THEN
		BEGIN
			PERFORM aion_wake.complete(k, tok);
			RAISE EXCEPTION 'roll the complete back';
		EXCEPTION WHEN raise_exception THEN
			RETURN 'rolled back';
		END;
	ELSIF r <= 60 THEN
		how := 'complete';
		ok := aion_wake.complete(k, tok);
	ELSIF r <= 75 THEN
		how := 'fail';
		ok := aion_wake.fail(k, 'boom', '0', tok);
	ELSIF r <= 90 THEN
		how := 'park';
		ok := aion_wake.park(k, '1 hour', tok);
	ELSE
		how := 'dead_letter';
		ok := aion_wake.dead_letter(k, 'gave up', tok);
	END IF;
	IF ok THEN
		INSERT INTO public.settles VALUES (tok, how);
	END IF;
	RETURN how;
END
\$\$;

CREATE PROCEDURE public.sample() LANGUAGE plpgsql AS \$\$
BEGIN
	LOOP
		INSERT INTO public.samples
		SELECT t.topic, t.in_flight,
		       (SELECT count(*) FROM aion_wake.outbox o
		         WHERE o.topic = t.topic AND o.lease_token IS NOT NULL
		           AND o.leased_until > clock_timestamp())
		  FROM aion_wake.topics t WHERE t.topic IN ('la', 'lb');
		COMMIT;
		PERFORM pg_sleep(0.002);
	END LOOP;
END
\$\$;

-- after the restart: claim and complete whatever is visible, each round a
-- transaction of its own; when nothing is, pulse the parks back and wait a
-- little for leases to end; until no row of la and lb is left, or for at
-- most 30 s
CREATE PROCEDURE public.drain() LANGUAGE plpgsql AS \$\$
DECLARE
	c record;
	n int;
	deadline timestamptz := clock_timestamp() + interval '30 s';
BEGIN
	WHILE EXISTS (SELECT 1 FROM aion_wake.outbox WHERE topic IN ('la', 'lb'))
	      AND clock_timestamp() < deadline LOOP
		n := 0;
		FOR c IN SELECT * FROM aion_wake.claim(ARRAY['la', 'lb'], 1000, '2 s') LOOP
			INSERT INTO public.claims VALUES (c.lease_token, c.dispatch_key, c.topic,
			                                  c.leased_until - interval '2 s', c.leased_until);
			IF aion_wake.complete(c.dispatch_key, c.lease_token) THEN
				INSERT INTO public.settles VALUES (c.lease_token, 'drain');
			END IF;
			n := n + 1;
		END LOOP;
		IF n = 0 THEN
			PERFORM aion_wake.pulse('la', 1000), aion_wake.pulse('lb', 1000);
		END IF;
		COMMIT;
		IF n = 0 THEN
			PERFORM pg_sleep(0.01);
		END IF;
	END LOOP;
END
\$\$;
});

my $script = "${PostgreSQL::Test::Utils::tmp_check}/027_load.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set r random(1, 100)
\set tp random(1, 2)
\set rb random(1, 10)
BEGIN;
SELECT public.ld_claim(:tp, :r) AS tok \gset
\if :rb = 1
ROLLBACK;
\else
COMMIT;
\endif
SELECT public.ld_settle(:tok, :r);
});

my $sampler = aw_session($node);
aw_start($sampler, 'CALL public.sample()');
my ($bout, $berr) = ('', '');
my $bench;
{
	local $ENV{PGAPPNAME} = 'aw_load';
	$bench = IPC::Run::start(
		[
			'pgbench', '-n', '-c', 4, '-j', 2, '-T', 120, '-f', $script,
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'<', \undef, '>', \$bout, '2>', \$berr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
}
my $expired0 = aw_status($node, 'leases_expired');
ok( $node->poll_query_until(
		'postgres', qq{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aw_load') = 4
   AND (SELECT count(*) >= 150 FROM public.claims)
   AND (SELECT leases_expired >= $expired0 + 3 FROM aion_wake.status)
   AND (SELECT count(*) >= 10 FROM public.settles WHERE how = 'park')
   AND (SELECT count(*) >= 3 FROM public.settles WHERE how = 'dead_letter')
   AND (SELECT count(*) >= 10 FROM public.settles WHERE how = 'fail')}),
	'(d) the load claims, completes, fails, parks, dead-letters and lets leases expire');
unlike(slurp_file($node->logfile, $log_offset), qr/PANIC|TRAP/, '(d) no PANIC so far');

$node->stop('immediate');
$node->start;
pass('(d) the server starts again after an immediate shutdown under the load');
eval { $bench->finish; 1 } or $bench->kill_kill;
eval { $sampler->{run}->kill_kill; 1 };
note('pgbench stderr (tail): ' . (length($berr) > 400 ? substr($berr, -400) : $berr));

ok(aw_wait_status($node, 'worker_pid IS NOT NULL'), '(d) a worker runs');
foreach my $tp (sort keys %limit)
{
	ok(limit_loaded($tp, $limit{$tp}), "(d) $tp: the limit is back");
	my ($if, $live) = split /\|/, in_flight_and_live($tp);
	is($if, $live, "(d) $tp: in_flight equals the committed live leases ($live)");
	cmp_ok($if, '<=', $limit{$tp}, "(d) $tp: within the limit");
}
note('after the restart: '
	  . sql(q{
SELECT string_agg(topic || ' in_flight ' || in_flight, ', ') FROM aion_wake.topics WHERE topic IN ('la', 'lb')})
	  . ', '
	  . sql(q{
SELECT count(*) || ' rows left, ' || count(parked_at) || ' parked'
  FROM aion_wake.outbox WHERE topic IN ('la', 'lb')}));

sql('CALL public.drain()');
is(sql("SELECT count(*) FROM aion_wake.outbox WHERE topic IN ('la', 'lb')"),
	'0', '(d) claims and pulses drain the outbox');
ok( $node->poll_query_until(
		'postgres',
		"SELECT bool_and(in_flight = 0) FROM aion_wake.topics WHERE topic IN ('la', 'lb')"),
	'(d) nothing is left in flight once the last leases have ended');
foreach my $tp (sort keys %limit)
{
	enqueue($tp, map { "${tp}_after$_" } 1 .. $limit{$tp} + 2);
	is(scalar(claim_now($tp, 100)), $limit{$tp},
		"(d) $tp: the full capacity of $limit{$tp} is usable: no slot stranded");
}

my ($nsamples) = sql('SELECT count(*) FROM public.samples');
cmp_ok($nsamples, '>=', 50, "(d) $nsamples samples were taken under the load");
foreach my $tp (sort keys %limit)
{
	is( sql(qq{
SELECT coalesce(max(in_flight), 0) <= $limit{$tp} AND coalesce(max(live_rows), 0) <= $limit{$tp}
  FROM public.samples WHERE topic = '$tp'}),
		't',
		"(d) $tp: sampled in_flight and rows with a live lease stayed within the limit")
	  or diag(sql("SELECT max(in_flight), max(live_rows) FROM public.samples WHERE topic = '$tp'"));

	my $overlap = sql(overlap_sql("c.topic = '$tp'"));
	cmp_ok($overlap, '<=', $limit{$tp},
		"(d) $tp: in the ledger, at most $overlap leases overlapped (limit $limit{$tp})");
}
note('ledger: '
	  . sql(q{
SELECT count(*) || ' leases, ' || count(st.token) || ' settled' FROM public.claims c
  LEFT JOIN public.settles st USING (token)}));

$node->stop;
done_testing();
