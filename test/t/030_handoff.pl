# Copyright (c) 2026, aion_wake authors
#
# 030_handoff.pl: the zero-gap hand-off (doc/design.md, The zero-gap
# hand-off, Exactness rules: 5 and Wake rules: 1; G2, G3, G4, G8).
#
# complete, fail, park and dead_letter with next_rows settle a lease and
# take up to next_rows rows of the same topic in the same statement and
# transaction; a pulse handed to a blocked claimer is spent inside that
# claimer's claim.  Held here:
#
#   (a) the rows returned and their leases: oldest first, a fresh
#       lease_token each, leased_until = visible_after = clock + lease,
#       parked_at null, attempt unchanged; next_rows 0 takes nothing; a
#       hand-off that took a row on an unlimited topic is no pulse;
#   (b) after complete, fail and dead_letter the freed slot goes first to
#       the oldest confirmed park, moved from its parked fence to the new
#       lease in one UPDATE (a trigger keeps a ledger of every UPDATE of
#       the outbox), attempt unchanged (G4); one park per settle, the rest
#       are visible rows; a pending park is not taken, and when the slot
#       has nowhere else to go it wakes the pending park at its commit
#       (G2, G3);
#   (c) park(..., next_rows) never returns a parked row, and taking
#       nothing it is no pulse;
#   (d) a stale token or an unknown key returns no rows and takes nothing;
#   (e) on a limited topic (limit 1) the slot passes from the settled lease
#       to the new one: while the hand-off transaction is open, seen from
#       other sessions, in_flight and the rows with a live lease stay
#       within the limit and no claim gets a slot, not even in the middle
#       of the hand-off's statement (held there by the ledger trigger), nor
#       the slot another claim holds while the hand-off runs;
#       after its commit the same, and the claimer blocked on the full
#       topic is not woken and no pulse is counted; settling the new lease
#       then wakes it;
#   (f) a rollback of the hand-off gives the slot back to the old lease
#       (in_flight unchanged, no claim gets it) and the row taken is
#       claimable again: one blocked claimer wakes and takes it (Wake
#       rules: 1);
#       a hand-off that took nothing keeps the old lease's slot until its
#       commit, and a rollback of it too; its commit releases the slot;
#   (g) a new lease that ends while the hand-off transaction is open keeps
#       the slot until the commit (the worker sees it end at its end all
#       the same);
#   (h) after a lowering, while the topic is over its limit, no slot
#       passes: it is released instead; at the limit it passes again;
#   (i) on an unlimited topic a hand-off that takes nothing turns the freed
#       slot into a pulse: a park confirming just after takes its credit;
#   (j) a pulse() handed to a blocked claimer is spent in the claimer's own
#       claim: the parked row comes back leased to it, moved by one UPDATE
#       in its backend, rows_reoffered rises, and a second claimer racing
#       with claims in a tight loop never gets the row; the same for a raw
#       NOTIFY aion_wake_capacity;
#   (k) a database on the 1.0 schema (CREATE EXTENSION aion_wake VERSION
#       '1.0') still serves plain claims with handed pulses, both kinds;
#   (l) bad input: next_rows negative or over 1000000 raises 22023, NULL
#       raises 22004 (lease too), even for an unknown key, and a settle
#       that raised changed nothing;
#   (m) a pgbench load of hand-offs (and plain claims and settles) by
#       four clients on a limit-2 topic: in_flight and the rows with a
#       live lease, sampled, never exceed 2, nor do the leases of a ledger
#       of every lease (from the commit that took it to the commit that
#       settled it).
#
# "Promptly" is the contract's 200 ms, on the server's clock, from the
# clock read just before the freeing event (or its commit timestamp) to
# the moment the woken claim took its row (its lease's end minus its
# lease).  A negative check on a blocked claimer looks for a short window
# (aw_poll_for's way) after what would have woken it has been seen to
# happen.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use AionWake::Test;

my $prompt = aw_prompt(0.2);    # seconds: how late a wake may be

my $node = aw_node(
	'handoff',
	databases => 'postgres, old10',
	conf => qq{
track_commit_timestamp = on
# a park confirming "shortly after" a pulse finds its credit on a busy machine
aion_wake.pulse_credit_ms = 3000
});

# The ledger of every UPDATE of aion_wake.outbox (but the load's topic):
# who made it, in which transaction, from what to what.  A key in
# public.pause makes the UPDATE that touches it wait there, inside the
# statement that runs it.  Made in each database that the test uses;
# leased_until is read through jsonb so that the 1.0 schema, which has no
# such column, works too.
my $ledger_sql = q{
CREATE TABLE public.upd (id bigserial PRIMARY KEY, xid xid8 DEFAULT pg_current_xact_id(),
	pid int DEFAULT pg_backend_pid(), key text, old_parked boolean, old_token bigint,
	new_parked boolean, new_token bigint, new_fence timestamptz, new_leased timestamptz);
CREATE TABLE public.pause (key text PRIMARY KEY, secs float8 NOT NULL);
CREATE FUNCTION public.upd_log() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	secs float8;
BEGIN
	INSERT INTO public.upd (key, old_parked, old_token, new_parked, new_token, new_fence, new_leased)
	VALUES (NEW.dispatch_key, OLD.parked_at IS NOT NULL, OLD.lease_token,
	        NEW.parked_at IS NOT NULL, NEW.lease_token, NEW.visible_after,
	        (to_jsonb(NEW) ->> 'leased_until')::timestamptz);
	SELECT p.secs INTO secs FROM public.pause p WHERE p.key = NEW.dispatch_key;
	IF FOUND THEN
		PERFORM pg_sleep(secs);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER upd_log AFTER UPDATE ON aion_wake.outbox
	FOR EACH ROW WHEN (NEW.topic <> 'ld') EXECUTE FUNCTION public.upd_log();
-- a second claimer: claims of a topic (not waiting) in a tight loop, each
-- in a transaction of its own, until public.stop names the topic; what it
-- got goes to public.raced
CREATE TABLE public.stop (topic text PRIMARY KEY);
CREATE TABLE public.raced (topic text, key text);
CREATE PROCEDURE public.race(t text) LANGUAGE plpgsql AS $$
DECLARE
	k text;
	deadline timestamptz := clock_timestamp() + interval '60 s';
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		k := NULL;
		SELECT c.dispatch_key INTO k FROM aion_wake.claim(t, 1, '1 hour') c;
		IF k IS NOT NULL THEN
			INSERT INTO public.raced VALUES (t, k);
		END IF;
		COMMIT;
		EXIT WHEN EXISTS (SELECT 1 FROM public.stop s WHERE s.topic = t);
	END LOOP;
END
$$;
-- events whose commit time the test measures from
CREATE TABLE public.ev (name text PRIMARY KEY);
};
$node->safe_psql('postgres', $ledger_sql);
aw_create_sqlstate_of($node);

# -- helpers ------------------------------------------------------------

sub sql
{
	return $node->safe_psql('postgres', $_[0]);
}

# What each row a settle with next_rows (or a claim) returns is checked
# by: key | token | attempt | leased (parked_at null, leased_until =
# visible_after, an hour ahead).  The calls here all lease for an hour.
my $shape = q{dispatch_key || '|' || lease_token || '|' || attempt || '|' ||
	(parked_at IS NULL AND leased_until = visible_after
	 AND leased_until BETWEEN clock_timestamp() + interval '59 min'
	                      AND clock_timestamp() + interval '61 min')::text};

# rows in $shape out of psql's output: a list of hashes
sub rows_of
{
	my ($out) = @_;
	return map {
		my @f = split /\|/;
		{ key => $f[0], token => $f[1], attempt => $f[2], leased => $f[3] }
	} grep { $_ ne '' } split /\n/, $out;
}

# the token of the i-th row, 0 (no lease matches it) when there is none,
# so that a broken build fails the checks that follow and the test goes on
sub tok
{
	my ($rows, $i) = @_;
	return $rows->[$i // 0]{token} // 0;
}

sub keys_of
{
	return join ',', map { $_->{key} } @_;
}

# run "SELECT $shape FROM aion_wake.$call" in $s (a session) or autocommit
sub call
{
	my ($call, $s) = @_;
	my $q = "SELECT $shape FROM aion_wake.$call";
	return rows_of($s ? $s->query_safe($q) : sql($q));
}

# Every row returned carries a fresh lease: leased for an hour, a token
# newer than $after and than every other row's, and, once committed, the
# row in the outbox has that token and lease.
sub leases_ok
{
	my ($what, $after, @rows) = @_;
	my %seen;
	my @bad;
	foreach my $r (@rows)
	{
		push @bad, "$r->{key}: not leased for an hour" if $r->{leased} ne 'true';
		push @bad, "$r->{key}: token $r->{token} not after $after"
		  unless $r->{token} > $after;
		push @bad, "$r->{key}: token $r->{token} twice" if $seen{ $r->{token} }++;
		my $row = sql(qq{
SELECT lease_token || '|' || (leased_until = visible_after AND leased_until > clock_timestamp() + interval '59 min')::text
  FROM aion_wake.outbox WHERE dispatch_key = '$r->{key}'});
		push @bad, "$r->{key}: the table says '$row'" if $row ne "$r->{token}|true";
	}
	ok(@rows > 0 && !@bad, $what) or diag(join("\n", @bad, 'no rows') );
}

sub enqueue
{
	my ($t, @keys) = @_;
	sql(join '', map { "SELECT aion_wake.enqueue('$_', '{}', '$t');\n" } @keys);
	return;
}

# claim now, no wait, for an hour: a list of [key, token]
sub claim_now
{
	my ($t, $n) = @_;
	return map { [ $_->{key}, $_->{token} ] } call("claim('$t', $n, '1 hour')");
}

# Park rows of a topic for an hour, each in a transaction of its own (so in
# that order), after setting their attempt; wait until they are confirmed.
sub park_rows
{
	my ($t, $attempt, @keys) = @_;
	my $before = sql(
		"SELECT count(*) FROM aion_wake.parked WHERE topic = '$t' AND state = 'confirmed'");
	foreach my $k (@keys)
	{
		sql(qq{
SELECT aion_wake.enqueue('$k', '{}', '$t');
UPDATE aion_wake.outbox SET attempt = $attempt WHERE dispatch_key = '$k';
SELECT aion_wake.park('$k', '1 hour');});
	}
	aw_wait_confirmed($node, $t, $before + @keys)
	  or die "the parks of topic $t were not confirmed";
	return;
}

# "max_in_flight/in_flight" of a topic
sub lim { return aw_limit_of($node, $_[0]); }

# rows of a topic that carry a live lease, as committed
sub live_rows { return aw_live_leases($node, $_[0]); }

sub pulses
{
	return sql(
		"SELECT coalesce((SELECT pulses FROM aion_wake.topics WHERE topic = '$_[0]'), 0)");
}

sub status
{
	return aw_status($node, $_[0]);
}

sub last_upd
{
	return sql('SELECT coalesce(max(id), 0) FROM public.upd');
}

# The UPDATEs of a row since ledger id $since: "count|made by|from parked
# to not parked|new token|new lease set", of the only one when one.
sub updates_of
{
	my ($key, $since, $db) = @_;
	$db //= 'postgres';
	return $node->safe_psql($db, qq{
SELECT count(*) || '|' || coalesce(min(pid), 0) || '|' ||
       coalesce(bool_and(old_parked AND NOT new_parked)::text, '-') || '|' ||
       coalesce(min(new_token), 0) || '|' ||
       coalesce(bool_and(new_leased IS NOT NULL OR '$db' = 'old10')::text, '-')
  FROM public.upd WHERE key = '$key' AND id > $since});
}

# the claim a waiter runs: each row as key|token|the clock at the claim
# (epoch)|attempt|parked_at null
sub claim_sql
{
	my ($t, $wait, $lease) = @_;
	$lease //= '1 hour';
	return qq{
SELECT dispatch_key || '|' || lease_token || '|' ||
       extract(epoch FROM visible_after - interval '$lease') || '|' || attempt || '|' ||
       (parked_at IS NULL)::text
  FROM aion_wake.claim('$t', 1, '$lease', '$wait')};
}

# a new session blocked in a claim of $t; returned once it waits
sub blocked_claimer
{
	my ($t, $db) = @_;
	$db //= 'postgres';
	my $w = aw_waiter($node, $db);
	aw_start($w, claim_sql($t, '60 s'));
	$node->poll_query_until($db, qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE pid = $w->{pid} AND wait_event_type = 'Extension'})
	  or die "the claimer of $t did not block";
	return $w;
}

# the rows a claim started with blocked_claimer took: [key, token, at, attempt, unparked]
sub finish_claim { return aw_finish_rows($_[0]); }

# finish_claim, but for a claim that must return within $secs: one that
# does not is cancelled, and returns nothing
sub finish_within
{
	my ($w, $secs) = @_;
	my $end = time + $secs;
	usleep(5_000) while !aw_done($w) && time < $end;
	if (!aw_done($w))
	{
		diag("the claim of pid $w->{pid} did not return within $secs s: cancelled");
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($w->{pid})");
	}
	my @r = finish_claim($w);
	return grep { @$_ >= 5 } @r;
}

# The claim of $w returns one row, taken no earlier than $from (epoch) and
# no later than $prompt after it.  Returns the row.
sub woken_ok
{
	my ($w, $from, $what) = @_;
	my @rows = finish_within($w, 10);
	# 1 ms of slack: the event time and the claim time are read in different
	# backends
	return aw_taken_promptly(\@rows, $from, $prompt, $what, 0.001) // [ '', 0, 0, '', '' ];
}

# $w is still blocked, and stays so for a short window
sub still_blocked
{
	my ($w, $what) = @_;
	my $end = time + 0.3;
	my $done = aw_done($w);
	while (!$done && time < $end)
	{
		usleep(20_000);
		$done = aw_done($w);
	}
	ok(!$done, $what);
}

# the clock of the server, epoch
sub clock
{
	my ($s) = @_;
	my $q = 'SELECT extract(epoch FROM clock_timestamp())';
	return $s ? $s->query_safe($q) : sql($q);
}

# run $sql and record the event $name in the same transaction; returns
# its commit time (epoch)
sub commit_event
{
	my ($name, $sql) = @_;
	sql("BEGIN; $sql; INSERT INTO public.ev VALUES ('$name'); COMMIT;");
	return sql(qq{
SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) FROM public.ev WHERE name = '$name'});
}

# the hand-off forms, by kind: settle $key (token $tok) and take $n rows
# for an hour
sub settle_next
{
	my ($kind, $key, $tok, $n) = @_;
	return {
		complete    => "complete('$key', $tok, $n, '1 hour')",
		fail        => "fail('$key', 'boom', '1 hour', $tok, $n, '1 hour')",
		park        => "park('$key', '1 hour', $tok, $n, '1 hour')",
		dead_letter => "dead_letter('$key', 'gone', $tok, $n, '1 hour')",
	}->{$kind};
}

my $s = aw_session($node);
$s->set_query_timer_restart;

# ---------------------------------------------------------------------
# (a) what the hand-off returns, unlimited topic
# ---------------------------------------------------------------------
enqueue('ua', map { "ua$_" } 1 .. 6);
my ($h) = claim_now('ua', 1);
is($h->[0], 'ua1', '(a) a dispatcher holds ua1');
my ($p0, $sl0) = (pulses('ua'), status('slots_received'));
my @got = call("complete('ua1', $h->[1], 2, '1 hour')");
is(keys_of(@got), 'ua2,ua3', '(a) complete(next_rows => 2) returns the two oldest rows');
leases_ok('(a) each with a fresh lease of its own', $h->[1], @got);
is(sql("SELECT count(*) FROM aion_wake.outbox WHERE dispatch_key = 'ua1'"),
	'0', '(a) and the settled row is gone');
is(join(',', map { $_->{attempt} } @got), '0,0', '(a) attempt is untouched');
is(pulses('ua') - $p0, 0, '(a) a hand-off that took rows is no pulse');
is(status('slots_received') - $sl0, 0, '(a) no slot was received');

my @f = call("fail('ua2', 'boom', '1 hour', ${\ tok(\@got, 0)}, 1, '1 hour')");
is(keys_of(@f), 'ua4', '(a) fail(next_rows => 1) returns the next row');
leases_ok('(a) leased', tok(\@got, 0), @f);
is( sql(q{
SELECT attempt || '|' || last_error || '|' || (visible_after > clock_timestamp() + interval '59 min')::text
       || '|' || coalesce(leased_until::text, 'null')
  FROM aion_wake.outbox WHERE dispatch_key = 'ua2'}),
	'1|boom|true|null', '(a) and the failed row has its attempt, error and back-off, no lease');

my @d = call("dead_letter('ua3', 'gone', ${\ tok(\@got, 1)}, 1, '1 hour')");
is(keys_of(@d), 'ua5', '(a) dead_letter(next_rows => 1) returns the next row');
leases_ok('(a) leased', tok(\@got, 1), @d);
is(sql("SELECT reason FROM aion_wake.dead_letters WHERE dispatch_key = 'ua3'"),
	'gone', '(a) and the row is dead-lettered');

my @z = call("complete('ua4', ${\ tok(\@f, 0)}, 0, '1 hour')");
is(scalar(@z), 0, '(a) next_rows => 0 takes nothing');
is(sql("SELECT count(*) FROM aion_wake.outbox WHERE dispatch_key = 'ua4'"),
	'0', '(a) and still settles');
is(sql("SELECT count(*) FROM aion_wake.outbox WHERE dispatch_key = 'ua6' AND lease_token IS NULL"),
	'1', '(a) ua6 was not taken');

# ---------------------------------------------------------------------
# (b) the oldest confirmed park first, in one UPDATE; pending parks stay
# ---------------------------------------------------------------------
enqueue('pb', 'pbx');
($h) = claim_now('pb', 1);
enqueue('pb', 'pbv1', 'pbv2');    # visible, older than the parks
park_rows('pb', 2, 'pbp1', 'pbp2', 'pbp3');
my $r0 = status('rows_reoffered');
my $u0 = last_upd();
@got = call("complete('pbx', $h->[1], 1, '1 hour')");
is(keys_of(@got), 'pbp1',
	'(b) complete(next_rows => 1) takes the oldest confirmed park, before older visible rows');
leases_ok('(b) leased', $h->[1], @got);
is($got[0]{attempt}, '2', '(b) with its attempt unchanged (G4)');
my ($n, $pid, $moved, $tok, $leased) = split /\|/, updates_of('pbp1', $u0);
is("$n|$moved|$tok|$leased", "1|true|${\ tok(\@got, 0)}|true",
	'(b) moved from its parked fence straight to the lease, in one UPDATE');
is(status('rows_reoffered') - $r0, 1, '(b) rows_reoffered counts it');
is(aw_confirmed($node, 'pb'), 'pbp2,pbp3', '(b) it left the parked set, the others stay');

$u0 = last_upd();
@got = call("fail('pbp1', 'boom', '1 hour', ${\ tok(\@got, 0)}, 3, '1 hour')");
is(keys_of(@got), 'pbp2,pbv1,pbv2',
	'(b) fail(next_rows => 3): the oldest park for the freed slot, then visible rows');
leases_ok('(b) leased', 0, @got);
is($got[0]{attempt}, '2', '(b) attempt unchanged');
($n, $pid, $moved, $tok, $leased) = split /\|/, updates_of('pbp2', $u0);
is("$n|$moved|$tok", "1|true|${\ tok(\@got, 0)}", '(b) in one UPDATE');
is(aw_still_parked($node, 'pb'), 'pbp3', '(b) one slot, one park: pbp3 stays parked');

@d = call("dead_letter('pbv1', 'gone', ${\ tok(\@got, 1)}, 1, '1 hour')");
is(keys_of(@d), 'pbp3', '(b) dead_letter(next_rows => 1) takes the oldest park too');
is($d[0]{attempt}, '2', '(b) attempt unchanged');

# a pending park is not taken; with nowhere else to go the slot is a pulse
# that wakes it at its commit (G2)
enqueue('pg', 'pgx', 'pgp');
my @hh = claim_now('pg', 2);
my $wd0 = status('wakes_deferred');
$s->query_safe("BEGIN; SELECT aion_wake.park('pgp', '1 hour', $hh[1][1])");
is(sql("SELECT state FROM aion_wake.parked WHERE dispatch_key = 'pgp'"),
	'pending', '(b) pgp is a pending park');
$u0 = last_upd();
@got = call("complete('pgx', $hh[0][1], 1, '1 hour')");
is(scalar(@got), 0, '(b) a hand-off does not take a pending park');
is(updates_of('pgp', $u0), '0|0|-|0|-', '(b) nor touches its row');
ok( aw_poll_for($node, 'postgres', q{
SELECT state = 'pending' AND woken FROM aion_wake.parked WHERE dispatch_key = 'pgp'}, 10),
	'(b) the freed slot, a pulse spent by the worker, is recorded on the pending park');
$s->query_safe('COMMIT');
ok(aw_poll_for($node, 'postgres', q{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = 'pgp'}, 10),
	'(b) and at its commit the park is re-offered');
is(status('wakes_deferred') - $wd0, 1, '(b) as a deferred wake');

# ---------------------------------------------------------------------
# (c) park(..., next_rows) never takes a parked row
# ---------------------------------------------------------------------
enqueue('pk', 'pkx');
($h) = claim_now('pk', 1);
park_rows('pk', 0, 'pkp1');
enqueue('pk', 'pkv1');
$p0 = pulses('pk');
@got = call("park('pkx', '1 hour', $h->[1], 2, '1 hour')");
is(keys_of(@got), 'pkv1', '(c) park(next_rows => 2) takes the visible row, not the confirmed park');
leases_ok('(c) leased', $h->[1], @got);
@got = call("park('pkv1', '1 hour', ${\ tok(\@got, 0)}, 1, '1 hour')");
is(scalar(@got), 0, '(c) with only parked rows left, park(next_rows => 1) takes nothing');
is(aw_still_parked($node, 'pk'), 'pkp1,pkv1,pkx', '(c) all three stay parked');
is(pulses('pk') - $p0, 0, '(c) and park frees no pulse');

# ---------------------------------------------------------------------
# (d) a stale token or an unknown key takes nothing
# ---------------------------------------------------------------------
enqueue('st', 'st1');
($h) = claim_now('st', 1);
enqueue('st', 'st2');
park_rows('st', 0, 'stp');
my $stale = $h->[1] + 1000;
$u0 = last_upd();
$p0 = pulses('st');
foreach my $kind (qw(complete fail park dead_letter))
{
	@got = call(settle_next($kind, 'st1', $stale, 5));
	is(scalar(@got), 0, "(d) $kind with a stale token returns no rows");
	@got = call(settle_next($kind, 'nosuchkey', $h->[1], 5));
	is(scalar(@got), 0, "(d) $kind of an unknown key returns no rows");
}
is(sql("SELECT count(*) FROM public.upd WHERE id > $u0 AND key LIKE 'st%'"), '0',
	'(d) and no row of the topic was updated');
is( sql(q{
SELECT string_agg(dispatch_key || ':' || coalesce(lease_token::text, '-') || ':' || (parked_at IS NOT NULL)::text, ',' ORDER BY dispatch_key)
  FROM aion_wake.outbox WHERE topic = 'st'}),
	"st1:$h->[1]:false,st2:-:false,stp:-:true",
	'(d) st1 keeps its lease, st2 is not taken, stp stays parked');
is(pulses('st') - $p0, 0, '(d) and no pulse');

# ---------------------------------------------------------------------
# (e) limit 1: the slot passes, never free in between
# ---------------------------------------------------------------------
foreach my $kind (qw(complete fail dead_letter park))
{
	my $t = "l1_$kind";
	sql("SELECT aion_wake.set_limit('$t', 1)");
	enqueue($t, "${t}_x");
	($h) = claim_now($t, 1);
	enqueue($t, "${t}_v1", "${t}_v2");
	park_rows($t, 3, "${t}_p");
	is(lim($t), '1/1', "(e) $kind: the topic is full");
	my $w = blocked_claimer($t);
	my ($pp, $ps) = (pulses($t), status('slots_received'));
	$u0 = last_upd();

	$s->query_safe('BEGIN');
	@got = call(settle_next($kind, "${t}_x", $h->[1], 1), $s);
	my $want = $kind eq 'park' ? "${t}_v1" : "${t}_p";
	is(keys_of(@got), $want,
		$kind eq 'park'
		? "(e) park(next_rows => 1) takes a visible row"
		: "(e) $kind(next_rows => 1) takes the oldest confirmed park");
	is($got[0]{leased}, 'true', "(e) $kind: leased");
	is(lim($t), '1/1', "(e) $kind: while the hand-off is open, in_flight is 1 (the pair shares one slot)");
	is(live_rows($t), '1', "(e) $kind: one row carries a live lease, as committed");
	is(scalar(claim_now($t, 5)), 0, "(e) $kind: no claim gets a slot meanwhile");
	still_blocked($w, "(e) $kind: the blocked claimer still waits");
	$s->query_safe('COMMIT');

	is(lim($t), '1/1', "(e) $kind: after the commit, in_flight is 1");
	is(live_rows($t), '1', "(e) $kind: one live lease, the new one");
	is(scalar(claim_now($t, 5)), 0, "(e) $kind: no claim gets a slot");
	is(pulses($t) - $pp, 0, "(e) $kind: the slot passed: no pulse");
	is(status('slots_received') - $ps, 0, "(e) $kind: no slot received");
	still_blocked($w, "(e) $kind: the claimer blocked on the full topic is not woken");
	if ($kind ne 'park')
	{
		($n, $pid, $moved, $tok) = split /\|/, updates_of("${t}_p", $u0);
		is("$n|$pid|$moved|$tok", "1|$s->{pid}|true|${\ tok(\@got, 0)}",
			"(e) $kind: the park went from its fence to the lease in one UPDATE of the hand-off");
		is($got[0]{attempt}, '3', "(e) $kind: attempt unchanged");
	}
	else
	{
		is(aw_still_parked($node, $t), "${t}_p,${t}_x", '(e) park: both parked rows stay parked');
	}

	my $at = commit_event("e_$kind",
		"SELECT aion_wake.complete('${\ ($got[0]{key} // 'none')}', ${\ tok(\@got, 0)})");
	my $row = woken_ok($w, $at, "(e) $kind: settling the new lease wakes the blocked claimer");
	is(lim($t), '1/1', "(e) $kind: which holds the slot");
	$w->quit;
	sql("SELECT aion_wake.complete('$row->[0]', $row->[1])") if $row->[0] ne '';
}

# the slot is not free even inside the hand-off's statement: the ledger
# trigger holds the UPDATE that leases the next row for a while
sql("SELECT aion_wake.set_limit('ps', 1)");
enqueue('ps', 'ps1');
($h) = claim_now('ps', 1);
enqueue('ps', 'ps2', 'ps3');
sql("INSERT INTO public.pause VALUES ('ps2', 2)");
aw_start($s, "SELECT $shape FROM aion_wake.complete('ps1', $h->[1], 1, '1 hour')");
ok( aw_poll_for(
		$node, 'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $s->{pid} AND wait_event = 'PgSleep'}, 10),
	'(e) a hand-off is held inside its statement, its next row locked');
cmp_ok((split m{/}, lim('ps'))[1], '<=', 1, '(e) in_flight is within the limit meanwhile');
is(scalar(claim_now('ps', 5)), 0, '(e) and no claim gets the slot (ps3 is claimable)');
my ($out, $err) = aw_finish($s);
is(keys_of(rows_of($out)), 'ps2', '(e) the hand-off then returns ps2');
sql("DELETE FROM public.pause");
is(lim('ps'), '1/1', '(e) in_flight 1');
is(scalar(claim_now('ps', 5)), 0, '(e) and still no claim gets a slot');

# the hand-off's slot is its own, not another claim's: limit 2, pr1 leased,
# a claim holds the other slot while the trigger holds it inside its
# statement; a hand-off meanwhile, then a third claim, which must find
# no slot (the pair holds one, the open claim the other)
sql("SELECT aion_wake.set_limit('pr', 2)");
enqueue('pr', 'pr1');
($h) = claim_now('pr', 1);
enqueue('pr', 'prb', 'prs', 'prc');
sql("INSERT INTO public.pause VALUES ('prb', 2)");
my $b = aw_session($node);
aw_start($b, "SELECT dispatch_key FROM aion_wake.claim('pr', 1, '1 hour')");
ok( aw_poll_for(
		$node, 'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $b->{pid} AND wait_event = 'PgSleep'}, 10),
	'(e) a claim holds the second slot of a limit of 2, inside its statement');
is(keys_of(call("complete('pr1', $h->[1], 1, '1 hour')")), 'prs',
	'(e) meanwhile a hand-off passes the first slot on to prs');
is(scalar(claim_now('pr', 5)), 0, '(e) and a third claim finds no slot');
($out, $err) = aw_finish($b);
is($out, 'prb', '(e) the held claim then takes prb');
sql("DELETE FROM public.pause");
is(lim('pr'), '2/2', '(e) in_flight 2');
is(scalar(claim_now('pr', 5)), 0, '(e) and no claim gets a slot');
$b->quit;

# ---------------------------------------------------------------------
# (f) rollback of a hand-off
# ---------------------------------------------------------------------
# limit 2: rb1 leased; the hand-off takes rb2, the only other row, so two
# claimers block (a slot is free, no row); the rollback makes rb2 claimable
# and wakes one of them
sql("SELECT aion_wake.set_limit('rb', 2)");
enqueue('rb', 'rb1');
($h) = claim_now('rb', 1);
enqueue('rb', 'rb2');
$s->query_safe('BEGIN');
@got = call("complete('rb1', $h->[1], 1, '1 hour')", $s);
is(keys_of(@got), 'rb2', '(f) an open hand-off took rb2');
my @w = map { blocked_claimer('rb') } 1 .. 2;
cmp_ok((split m{/}, lim('rb'))[1], '<=', 2, '(f) in_flight is within the limit');
my $t0 = clock($s);
$s->query_safe('ROLLBACK');
my @done;
my $deadline = time + 10;
while (!@done && time < $deadline)
{
	@done = grep { aw_done($_) } @w;
	usleep(5_000);
}
is(scalar(@done), 1, '(f) its rollback wakes one blocked claimer');
my $first = $done[0] // $w[0];
my ($waited) = grep { $_ != $first } @w;
my $row = woken_ok($first, $t0, '(f) promptly');
is($row->[0], 'rb2', '(f) which takes the row given back');
is(lim('rb'), '2/2', '(f) the old lease kept its slot: in_flight 2');
is( sql(q{
SELECT lease_token || '|' || (leased_until > clock_timestamp() + interval '59 min')::text
  FROM aion_wake.outbox WHERE dispatch_key = 'rb1'}),
	"$h->[1]|true", '(f) rb1 still carries its old lease');
enqueue('rb', 'rb3');
is(scalar(claim_now('rb', 5)), 0, '(f) at the limit, no claim gets a slot');
still_blocked($waited, '(f) the other claimer still waits');
my $at = commit_event('rb_release', "SELECT aion_wake.complete('rb1', $h->[1])");
$row = woken_ok($waited, $at, '(f) the old lease, settled later, releases its slot: the other claimer wakes');
is($row->[0], 'rb3', '(f) and takes rb3');
$_->quit foreach @w;

# limit 1: after the rollback no claim gets the slot
sql("SELECT aion_wake.set_limit('rb1t', 1)");
enqueue('rb1t', 'x1');
($h) = claim_now('rb1t', 1);
enqueue('rb1t', 'x2');
$s->query_safe('BEGIN');
@got = call("complete('x1', $h->[1], 1, '1 hour')", $s);
is(keys_of(@got), 'x2', '(f) limit 1: an open hand-off took x2');
$s->query_safe('ROLLBACK');
is(lim('rb1t'), '1/1', '(f) limit 1: after its rollback, in_flight is 1');
is(scalar(claim_now('rb1t', 5)), 0, '(f) limit 1: the old lease holds the slot: no claim gets x2');
sql("SELECT aion_wake.complete('x1', $h->[1])");
is(lim('rb1t'), '1/0', '(f) limit 1: settled, the old lease releases it');
is(keys_of(call("claim('rb1t', 5, '1 hour')")), 'x2', '(f) limit 1: and x2 is claimable');

# a hand-off that takes nothing: the old lease holds the slot until the
# commit; a rollback keeps it there
sql("SELECT aion_wake.set_limit('tb', 1)");
enqueue('tb', 'y1');
($h) = claim_now('tb', 1);
$s->query_safe('BEGIN');
@got = call("complete('y1', $h->[1], 1, '1 hour')", $s);
is(scalar(@got), 0, '(f) a hand-off with no row to take takes nothing');
enqueue('tb', 'y2');
is(lim('tb'), '1/1', '(f) while it is open, in_flight is 1');
is(scalar(claim_now('tb', 5)), 0, '(f) and no claim gets the slot (y2 arrived)');
$s->query_safe('ROLLBACK');
is(lim('tb'), '1/1', '(f) after its rollback the old lease keeps the slot');
is(scalar(claim_now('tb', 5)), 0, '(f) no claim gets it');

# committed, it releases the slot (a pulse) and wakes a blocked claimer
sql("SELECT aion_wake.set_limit('tc', 1)");
enqueue('tc', 'z1');
($h) = claim_now('tc', 1);
my $w1 = blocked_claimer('tc');
$p0 = pulses('tc');
$s->query_safe('BEGIN');
@got = call("complete('z1', $h->[1], 1, '1 hour')", $s);
is(scalar(@got), 0, '(f) a hand-off takes nothing');
enqueue('tc', 'z2');
is(scalar(claim_now('tc', 5)), 0, '(f) while it is open, no claim gets the slot');
still_blocked($w1, '(f) nor does the blocked claimer');
$t0 = clock($s);
$s->query_safe('COMMIT');
$row = woken_ok($w1, $t0, '(f) its commit releases the slot and wakes the blocked claimer');
is($row->[0], 'z2', '(f) which takes z2');
is(pulses('tc') - $p0, 1, '(f) the slot freed by complete is a pulse');
is(lim('tc'), '1/1', '(f) in_flight 1');
$w1->quit;

# ---------------------------------------------------------------------
# (g) the new lease ends while the hand-off transaction is open
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('ex', 1)");
enqueue('ex', 'e1');
($h) = claim_now('ex', 1);
enqueue('ex', 'e2', 'e3');
$w1 = blocked_claimer('ex');
my $exp0 = status('leases_expired');
$s->query_safe('BEGIN');
my $e2 = $s->query_safe(qq{
SELECT dispatch_key || '|' || extract(epoch FROM leased_until)
  FROM aion_wake.complete('e1', $h->[1], 1, '1 s')});
my ($e2key, $e2end) = split /\|/, $e2;
($e2key, $e2end) = ('', 0) if !defined $e2end;
is($e2key, 'e2', '(g) an open hand-off takes e2 for a lease of 1 s');
ok( $node->poll_query_until(
		'postgres', "SELECT clock_timestamp() > to_timestamp($e2end) + interval '$prompt s'"),
	'(g) the new lease ends');
# a lease's end is timed exactly, also while the claim that took it is
# open: by now (its end and 200 ms) the worker has seen it end
cmp_ok(status('leases_expired'), '>', $exp0, '(g) the worker saw it end, promptly');
is(lim('ex'), '1/1', '(g) the slot is still held: in_flight 1');
is(scalar(claim_now('ex', 5)), 0, '(g) no claim gets it (e3 is claimable)');
still_blocked($w1, '(g) the blocked claimer is not given it');
$t0 = clock($s);
$s->query_safe('COMMIT');
$row = woken_ok($w1, $t0, '(g) the commit releases the slot: the blocked claimer wakes');
is(lim('ex'), '1/1', '(g) and holds it');
$w1->quit;

# ---------------------------------------------------------------------
# (h) a lowered limit: no pass while over it
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('lw', 2)");
enqueue('lw', map { "lw$_" } 1 .. 5);
my @l = claim_now('lw', 2);
sql("SELECT aion_wake.set_limit('lw', 1)");
is(lim('lw'), '1/2', '(h) lowered to 1 under two leases');
$s->query_safe('BEGIN');
@got = call("complete('$l[0][0]', $l[0][1], 1, '1 hour')", $s);
is(scalar(@got), 0, '(h) over the limit, the hand-off takes nothing');
is(scalar(claim_now('lw', 5)), 0, '(h) while it is open no claim gets a slot');
$s->query_safe('COMMIT');
is(lim('lw'), '1/1', '(h) at its commit the slot is released, not passed');
is(scalar(claim_now('lw', 5)), 0, '(h) at the limit no claim gets a slot');
@got = call("complete('$l[1][0]', $l[1][1], 1, '1 hour')");
is(scalar(@got), 1, '(h) at the limit (not over it) the slot passes again');
is(lim('lw'), '1/1', '(h) in_flight 1');
is(scalar(claim_now('lw', 5)), 0, '(h) and no claim gets a slot');

# ---------------------------------------------------------------------
# (i) unlimited topic, nothing to take: the freed slot is a pulse
# ---------------------------------------------------------------------
enqueue('cr', 'c1', 'c2');
@l = claim_now('cr', 2);
($p0, $sl0) = (pulses('cr'), status('slots_received'));
my $cu0 = status('credits_used');
@got = call("complete('c1', $l[0][1], 1, '1 hour')");
is(scalar(@got), 0, '(i) a hand-off with nothing to take takes nothing');
is(pulses('cr') - $p0, 1, '(i) the freed slot is a pulse of the topic')
  or diag('topics with pulses: ',
	sql(q{SELECT string_agg(quote_literal(topic) || ' ' || pulses, ', ') FROM aion_wake.topics WHERE pulses > 0}));
is(status('slots_received') - $sl0, 1, '(i) of one slot');
sql("SELECT aion_wake.park('c2', '1 hour', $l[1][1])");
ok(aw_poll_for($node, 'postgres', q{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = 'c2'}, 10),
	'(i) a park confirming just after is re-offered by it');
is(status('credits_used') - $cu0, 1, '(i) through the credit');

# ---------------------------------------------------------------------
# (j) a pulse handed to a blocked claimer is spent in its claim
# ---------------------------------------------------------------------
# each round: a parked row, a claimer blocked on its topic, a racer
# claiming in a tight loop; then a pulse (pulse() or raw NOTIFY)
ok(aw_wait_status($node, 'listening'), '(j) the worker listens for raw pulses');
my $racer = aw_session($node);
foreach my $how ('pulse', 'notify')
{
	my $t = "hp_$how";
	my ($ok_rows, $ok_one, $raced) = (0, 0, 0);
	my @bad;
	my $rounds = 5;
	my $ro0 = status('rows_reoffered');
	for my $i (1 .. $rounds)
	{
		my $k = "${t}_$i";
		park_rows($t, 2, $k);
		my $w = blocked_claimer($t);
		sql("DELETE FROM public.stop");
		aw_start($racer, "CALL public.race('$t')");
		$node->poll_query_until('postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE pid = $racer->{pid} AND state = 'active' AND query LIKE 'CALL public.race%'})
		  or die 'the racer did not start';
		$u0 = last_upd();
		sql($how eq 'pulse'
			? "SELECT aion_wake.pulse('$t', 1)"
			: "NOTIFY aion_wake_capacity, '$t:1'");
		my @r = finish_within($w, 10);
		sql("INSERT INTO public.stop VALUES ('$t')");
		aw_finish($racer);
		if (@r == 1 && $r[0][0] eq $k && $r[0][3] eq '2' && $r[0][4] eq 'true')
		{
			$ok_rows++;
		}
		else
		{
			push @bad, "round $i: the claimer got " . (join(' ', map { $_->[0] } @r) || 'nothing');
		}
		($n, $pid, $moved, $tok) = split /\|/, updates_of($k, $u0);
		if ($n == 1 && $pid == $w->{pid} && $moved eq 'true' && @r && $tok == $r[0][1])
		{
			$ok_one++;
		}
		else
		{
			push @bad, "round $i: $n UPDATE(s) of $k, the first by pid $pid (the claimer is $w->{pid})";
		}
		$w->quit;
	}
	$raced = sql("SELECT count(*) FROM public.raced WHERE topic = '$t'");
	is($ok_rows, $rounds,
		"(j) $how: each time the blocked claimer returns the parked row, attempt unchanged")
	  or diag(join("\n", @bad));
	is($ok_one, $rounds,
		"(j) $how: moved from its fence to the claimer's lease by one UPDATE in the claimer's backend")
	  or diag(join("\n", @bad));
	is($raced, '0', "(j) $how: the racing claimer never got it");
	is(status('rows_reoffered') - $ro0, $rounds, "(j) $how: rows_reoffered rises by one each time");
}
$racer->quit;

# ---------------------------------------------------------------------
# (k) the 1.0 schema
# ---------------------------------------------------------------------
sql('CREATE DATABASE old10');
{
	my $offset = -s $node->logfile;
	$node->safe_psql('old10', "CREATE EXTENSION aion_wake VERSION '1.0'");
	$node->poll_query_until('old10', 'SELECT worker_pid IS NOT NULL AND listening FROM aion_wake.status')
	  or die 'no worker serves old10';
	$node->wait_for_log(qr/aion_wake worker rebuilt the parked set of database "old10"/, $offset);
}
$node->safe_psql('old10', $ledger_sql);
is($node->safe_psql('old10', "SELECT extversion FROM pg_extension WHERE extname = 'aion_wake'"),
	'1.0', '(k) old10 has the 1.0 schema');
foreach my $how ('pulse', 'notify')
{
	my $k = "o_$how";
	$node->safe_psql('old10', qq{
SELECT aion_wake.enqueue('$k', '{}', 'o');
UPDATE aion_wake.outbox SET attempt = 2 WHERE dispatch_key = '$k';
SELECT aion_wake.park('$k', '1 hour');});
	$node->poll_query_until('old10',
		"SELECT count(*) = 1 FROM aion_wake.parked WHERE dispatch_key = '$k' AND state = 'confirmed'")
	  or die "$k was not confirmed";
	my $w = blocked_claimer('o', 'old10');
	my $ro = $node->safe_psql('old10', 'SELECT rows_reoffered FROM aion_wake.status');
	$u0 = $node->safe_psql('old10', 'SELECT coalesce(max(id), 0) FROM public.upd');
	$at = time;
	$node->safe_psql('old10',
		$how eq 'pulse'
		? "SELECT aion_wake.pulse('o', 1)"
		: "NOTIFY aion_wake_capacity, 'o:1'");
	my @r = finish_within($w, 10);
	is(join(',', map { "$_->[0]:$_->[3]:$_->[4]" } @r), "$k:2:true",
		"(k) 1.0, $how: the blocked claimer returns the parked row, attempt unchanged");
	cmp_ok(time - $at, '<', 10, "(k) 1.0, $how: woken by the pulse");
	is($node->safe_psql('old10', 'SELECT rows_reoffered FROM aion_wake.status') - $ro,
		1, "(k) 1.0, $how: rows_reoffered rises");
	($n, $pid, $moved, $tok) = split /\|/, updates_of($k, $u0, 'old10');
	is("$n|$pid|$moved|$tok", "1|$w->{pid}|true|" . ($r[0][1] // ''),
		"(k) 1.0, $how: one UPDATE, in the claimer's backend");
	$w->quit;
}

# ---------------------------------------------------------------------
# (l) bad input
# ---------------------------------------------------------------------
enqueue('bi', 'bi1');
($h) = claim_now('bi', 1);
my %bad;
foreach my $key ('bi1', 'nosuchkey')
{
	foreach my $kind (qw(complete fail park dead_letter))
	{
		my $c = settle_next($kind, $key, $h->[1], 1);
		foreach my $v ([ '-1', '22023' ], [ '1000001', '22023' ], [ 'NULL::int', '22004' ])
		{
			(my $bad = $c) =~ s/, 1, '1 hour'\)$/, $v->[0], '1 hour')/;
			$bad{$bad} = $v->[1];
		}
		(my $neg = $c) =~ s/'1 hour'\)$/'-1 s')/;
		$bad{$neg} = '22023';
		(my $nul = $c) =~ s/'1 hour'\)$/NULL::interval)/;
		$bad{$nul} = '22004';
	}
}
foreach my $call (sort keys %bad)
{
	is(sql("SELECT public.sqlstate_of(\$\$SELECT * FROM aion_wake.$call\$\$)"),
		$bad{$call}, "(l) $call raises $bad{$call}");
}
is( sql(q{
SELECT lease_token || '|' || attempt || '|' || (parked_at IS NULL)::text
  FROM aion_wake.outbox WHERE dispatch_key = 'bi1'}),
	"$h->[1]|0|true", '(l) the settles that raised changed nothing');
is(sql("SELECT count(*) FROM aion_wake.dead_letters WHERE dispatch_key = 'bi1'"),
	'0', '(l) nor dead-lettered it');
@got = call("complete('bi1', $h->[1], 1000000, '1 hour')");
is(scalar(@got), 0, '(l) next_rows => 1000000 is accepted');

# ---------------------------------------------------------------------
# (m) a load of hand-offs on a limit-2 topic
# ---------------------------------------------------------------------
# Four pgbench clients.  A client that holds no row claims one (waiting
# up to 300 ms); one that holds a row works 5 ms with it, then settles it:
# mostly complete, fail or park with next_rows => 1 (the hand-off), else a
# plain complete.  Every lease taken is in public.leases (by the
# transaction that took it), every lease settled in public.settled (by
# the transaction that settled it), so a lease runs from the commit of
# the one to the commit of the other.  A sampler reads in_flight and the
# rows with a live lease meanwhile.
my $limit = 2;
sql(qq{
SELECT aion_wake.set_limit('ld', $limit);
SELECT count(*) FROM (SELECT aion_wake.enqueue('ld' || g, '{}', 'ld') FROM generate_series(1, 3000) g) e;
CREATE TABLE public.hold (client int PRIMARY KEY, key text, token bigint);
INSERT INTO public.hold SELECT g, NULL, NULL FROM generate_series(0, 3) g;
CREATE TABLE public.leases (token bigint PRIMARY KEY, key text, via text, lease_end timestamptz);
CREATE TABLE public.settled (token bigint PRIMARY KEY);
CREATE TABLE public.samples (in_flight int, live bigint);
CREATE TABLE public.stop_sampling (b boolean);

CREATE FUNCTION public.ld_step(c int, r int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
	k text;
	tok bigint;
	n record;
	nk text;
	ntok bigint;
	via text := 'claim';
BEGIN
	SELECT h.key, h.token INTO k, tok FROM public.hold h WHERE h.client = c;
	IF k IS NULL THEN
		-- nothing written yet in this transaction: the claim may wait
		FOR n IN SELECT * FROM aion_wake.claim('ld', 1, '30 s', '300 ms') LOOP
			nk := n.dispatch_key;
			ntok := n.lease_token;
			INSERT INTO public.leases VALUES (ntok, nk, 'claim', n.leased_until);
		END LOOP;
		UPDATE public.hold SET key = nk, token = ntok WHERE client = c;
		RETURN coalesce(nk, '-');
	END IF;
	PERFORM pg_sleep(0.005);	-- the consumer works while the lease is held
	IF r <= 60 THEN
		FOR n IN SELECT * FROM aion_wake.complete(k, tok, 1, '30 s') LOOP
			nk := n.dispatch_key; ntok := n.lease_token;
		END LOOP;
	ELSIF r <= 72 THEN
		FOR n IN SELECT * FROM aion_wake.fail(k, 'boom', '0', tok, 1, '30 s') LOOP
			nk := n.dispatch_key; ntok := n.lease_token;
		END LOOP;
	ELSIF r <= 80 THEN
		FOR n IN SELECT * FROM aion_wake.park(k, '50 ms', tok, 1, '30 s') LOOP
			nk := n.dispatch_key; ntok := n.lease_token;
		END LOOP;
	ELSE
		PERFORM aion_wake.complete(k, tok);
	END IF;
	IF NOT EXISTS (SELECT 1 FROM aion_wake.outbox o
	                WHERE o.dispatch_key = k AND o.lease_token = tok AND o.leased_until IS NOT NULL) THEN
		INSERT INTO public.settled VALUES (tok);
	END IF;
	IF nk IS NOT NULL THEN
		INSERT INTO public.leases SELECT ntok, nk, 'handoff', o.leased_until
		  FROM aion_wake.outbox o WHERE o.dispatch_key = nk;
	END IF;
	UPDATE public.hold SET key = nk, token = ntok WHERE client = c;
	PERFORM pg_sleep(0.002);	-- the hand-off's transaction stays open a while
	RETURN coalesce(nk, '-');
END
\$\$;

CREATE FUNCTION public.ld_drain() RETURNS bigint LANGUAGE sql AS \$\$
	WITH d AS (SELECT h.token FROM public.hold h WHERE h.key IS NOT NULL AND aion_wake.complete(h.key, h.token)),
	     i AS (INSERT INTO public.settled SELECT token FROM d RETURNING 1)
	SELECT count(*) FROM i;
\$\$;

CREATE PROCEDURE public.sample() LANGUAGE plpgsql AS \$\$
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM public.stop_sampling) LOOP
		INSERT INTO public.samples
		SELECT (SELECT in_flight FROM aion_wake.topics WHERE topic = 'ld'),
		       (SELECT count(*) FROM aion_wake.outbox
		         WHERE topic = 'ld' AND leased_until > clock_timestamp());
		COMMIT;
		PERFORM pg_sleep(0.001);
	END LOOP;
END
\$\$;
});

my $script = "${PostgreSQL::Test::Utils::tmp_check}/030_load.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set r random(1, 100)
SELECT public.ld_step(:client_id, :r);
});
my $sampler = aw_session($node);
aw_start($sampler, 'CALL public.sample()');
my ($bout, $berr) = ('', '');
my $bench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', 4, '-j', 2, '-T', 8, '-f', $script,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'<', \undef, '>', \$bout, '2>', \$berr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$bench->finish;
is($bench->result(0), 0, '(m) the pgbench load ran') or diag($berr);
note(join '; ', $bout =~ /^(number of transactions actually processed: .*|tps = [\d.]+)/mg);
sql('INSERT INTO public.stop_sampling VALUES (true)');
aw_finish($sampler);
$sampler->quit;
sql('SELECT public.ld_drain()');

my ($nsamples, $smax_if, $smax_live) = split /\|/,
  sql('SELECT count(*) || \'|\' || max(in_flight) || \'|\' || max(live) FROM public.samples');
cmp_ok($nsamples, '>=', 200, "(m) $nsamples samples taken under the load");
cmp_ok($smax_if, '<=', $limit, "(m) in_flight never went over the limit (at most $smax_if)");
cmp_ok($smax_live, '<=', $limit,
	"(m) nor did the rows with a live lease (at most $smax_live)");
my ($nleases, $nhand) = split /\|/,
  sql(q{SELECT count(*) || '|' || count(*) FILTER (WHERE via = 'handoff') FROM public.leases});
cmp_ok($nhand, '>=', 100, "(m) $nhand of the $nleases leases came from hand-offs");
my $overlap = sql(q{
WITH iv AS (
	SELECT pg_xact_commit_timestamp(l.xmin) AS s,
	       least(coalesce(pg_xact_commit_timestamp(st.xmin), l.lease_end), l.lease_end) AS e
	  FROM public.leases l LEFT JOIN public.settled st USING (token))
SELECT max((SELECT count(*) FROM iv b WHERE b.s <= a.s AND b.e > a.s)) FROM iv a});
cmp_ok($overlap, '<=', $limit,
	"(m) at most $overlap leases of the ledger overlapped (limit $limit)");
is(sql('SELECT count(*) FROM public.leases l LEFT JOIN public.settled s USING (token) WHERE s.token IS NULL'),
	'0', '(m) every lease taken was settled');
ok($node->poll_query_until('postgres', "SELECT in_flight = 0 FROM aion_wake.topics WHERE topic = 'ld'"),
	'(m) in_flight is 0 once the load is over');

$s->quit;
$node->stop;
done_testing();
