# Copyright (c) 2026, aion_wake authors
#
# 026_limits.pl: known capacity (doc/design.md, Limits; G8), through the
# SQL interface and the wakes it promises.
#
#   (a) set_limit() applies at commit, not before; a rolled-back set_limit()
#       (or one rolled back to a savepoint) changes nothing;
#   (b) claim(topic, n) takes at most max_in_flight - live leases rows, the
#       array form too; a reservation the claim does not use is returned at
#       once, not when its transaction ends;
#   (c) claim(wait) on a full topic blocks, and is woken exactly when a slot
#       frees and a row is claimable: by complete, fail, dead_letter (each
#       also a pulse of one slot, which re-offers the oldest confirmed park)
#       and park (no pulse: the row just parked stays parked); not by a row
#       arriving while the topic is full, nor by a slot freeing while no row
#       is claimable;
#   (d) a claim's rollback, and ROLLBACK TO SAVEPOINT, returns its slots and
#       wakes a blocked claimer;
#   (e) a lease's end releases its slot then (leases_expired rises) and
#       wakes a blocked claimer, and so does the end of a lease no claimer
#       waits for (the worker must time it); a late complete of an expired lease that
#       nobody re-claimed returns true and releases nothing; a stale token
#       releases nothing; a settle releases at its commit, not before, and
#       a rolled-back settle releases nothing;
#   (f) leases taken before set_limit() count against it from its commit
#       (committed ones, one open when set_limit() is called, and ones
#       taken or settled in set_limit()'s own transaction); lowering lets
#       leases drain and grants nothing until they are below the limit;
#       raising wakes claimers for the new slots; removing wakes them all;
#       the zero-gap hand-off (settle and claim the next row in one
#       transaction) passes the slot on and counts only the new lease;
#   (g) bad input: 22023, 22004, 53400 (aion_wake.max_leases);
#   (h) several claimers blocked on a limit-1 topic with many rows: each
#       release wakes exactly one (no herd: counted as the claim statements
#       run, with pg_stat_statements), and live leases never exceed the
#       limit; then a pgbench load of claimers and settlers, sampled
#       (topics.in_flight, rows with a live leased_until) and checked
#       against a ledger of every lease (its claim and the commit of its
#       settle: the most leases that overlapped);
#   (i) in a database no worker serves, limits hold and a blocked claimer
#       returns at the end of the lease that blocks it.
#
# "Promptly" is the contract's 200 ms, measured on the server's clock from
# the freeing event to the moment the woken claim took its row (its
# leased_until minus its lease): a commit's time is its commit timestamp
# (track_commit_timestamp), a rollback's the clock read just before it, a
# lease's end its leased_until.  A claimer that must not be woken by an
# event is checked twice: it has not returned right after the event, and
# the row it takes later was taken after the event that should wake it.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use AionWake::Test;

my $prompt = aw_prompt(0.2);    # seconds: how late a wake may be
my $max_leases = 64;

# statement_timeout: a statement that hangs where it must not fails its
# test instead of the whole run
my $node = aw_node(
	'limits', conf => qq{
statement_timeout = '90s'
track_commit_timestamp = on
aion_wake.max_leases = $max_leases
shared_preload_libraries = 'aion_wake, pg_stat_statements'
pg_stat_statements.track = all
});

aw_create_sqlstate_of($node);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_stat_statements;
-- events whose commit time the test measures from
CREATE TABLE public.ev (name text PRIMARY KEY);
});

# -- helpers ------------------------------------------------------------

sub sql
{
	return $node->safe_psql('postgres', $_[0]);
}

# "max_in_flight/in_flight" of a topic, '-' for null (or no topic row)
sub lim { return aw_limit_of($node, $_[0]); }

# rows of a topic that carry a live lease, as committed
sub live_rows { return aw_live_leases($node, $_[0]); }

sub enqueue
{
	my ($t, @keys) = @_;
	sql(join '', map { "SELECT aion_wake.enqueue('$_', '{}', '$t');\n" } @keys);
	return;
}

# claim now, no wait: a list of [key, token, leased_until (epoch)]
sub claim_now
{
	my ($t, $n, $lease) = @_;
	$lease //= '1 hour';
	my $out = sql(qq{
SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until)
  FROM aion_wake.claim('$t', $n, '$lease') ORDER BY dispatch_key});
	return map { [ split /\|/ ] } grep { $_ ne '' } split /\n/, $out;
}

# the SQL of a claim that may wait; each row it takes comes back as
# "key|token|the clock at the claim (epoch)"
sub claim_sql
{
	my ($t, $n, $wait, $lease) = @_;
	$lease //= '1 hour';
	return qq{
SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until - interval '$lease')
  FROM aion_wake.claim('$t', $n, '$lease', '$wait')};
}

sub start_claim
{
	my ($s, $t, $wait, $lease) = @_;
	aw_start($s, claim_sql($t, 1, $wait // '10 s', $lease));
	return;
}

# the rows a claim started with start_claim took
sub finish_claim { return aw_finish_rows($_[0]); }

# The claim of $s returns one row, taken no earlier than $from (epoch) and
# no later than $prompt after it.  Returns the row.
sub woken_ok
{
	my ($s, $from, $what) = @_;
	my @rows = finish_claim($s);
	return aw_taken_promptly(\@rows, $from, $prompt, $what) // [ '', '', 0 ];
}

# run $sql and record the event $name in the same transaction; returns
# the commit time (epoch)
sub commit_event
{
	my ($name, $sql) = @_;
	sql("BEGIN; $sql; INSERT INTO public.ev VALUES ('$name'); COMMIT;");
	return sql(qq{
SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) FROM public.ev WHERE name = '$name'});
}

# until $n of the sessions have finished their statements (bounded by the
# default timeout); returns those finished
sub wait_done
{
	my ($n, @s) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (1)
	{
		my @done = grep { aw_done($_) } @s;
		return @done if @done >= $n || time > $deadline;
		usleep(5_000);
	}
}

sub waiters_of
{
	my ($t, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT coalesce((SELECT waiters FROM aion_wake.topics WHERE topic = '$t'), 0) = $n");
}

sub status
{
	return aw_status($node, $_[0]);
}

# until the slots of earlier pulses of a topic are spent or have lapsed
# (a pulse that finds no park leaves its slots as a credit for
# aion_wake.pulse_credit_ms, which a park confirming meanwhile takes)
sub no_credit
{
	my ($t) = @_;
	return $node->poll_query_until('postgres',
		"SELECT credit = 0 AND unspent_slots = 0 FROM aion_wake.topics WHERE topic = '$t'");
}

sub topic_pulses
{
	return sql("SELECT pulses FROM aion_wake.topics WHERE topic = '$_[0]'");
}

my $s1 = aw_session($node);
my @c = map { aw_session($node) } 1 .. 4;

# ---------------------------------------------------------------------
# (a) set_limit applies at commit
# ---------------------------------------------------------------------
enqueue('a', map { "a$_" } 1 .. 6);
is(lim('a'), '-/-', '(a) a topic without a limit has no max_in_flight nor in_flight');
$s1->query_safe("BEGIN; SELECT aion_wake.set_limit('a', 2)");
is(lim('a'), '-/-', '(a) set_limit() does not apply before its commit');
is(sql("SELECT count(*) FROM aion_wake.limits WHERE topic = 'a'"), '0',
	'(a) nor is its row visible');
$s1->query_safe('COMMIT');
is(lim('a'), '2/0', '(a) at its commit the limit applies');
is(sql("SELECT max_in_flight FROM aion_wake.limits WHERE topic = 'a'"), '2',
	'(a) and aion_wake.limits holds it');

$s1->query_safe("BEGIN; SELECT aion_wake.set_limit('a', 5); ROLLBACK");
is(lim('a'), '2/0', '(a) a rolled-back raise changes nothing');
$s1->query_safe("BEGIN; SELECT aion_wake.set_limit('a', NULL); ROLLBACK");
is(lim('a'), '2/0', '(a) a rolled-back removal changes nothing');
$s1->query_safe(
	"BEGIN; SAVEPOINT sp; SELECT aion_wake.set_limit('a', 1); ROLLBACK TO SAVEPOINT sp; COMMIT");
is(lim('a'), '2/0', '(a) a set_limit() rolled back to a savepoint changes nothing');
is(sql("SELECT max_in_flight FROM aion_wake.limits WHERE topic = 'a'"), '2',
	'(a) and the table still says 2');

# ---------------------------------------------------------------------
# (b) claims within the limit
# ---------------------------------------------------------------------
is(scalar(claim_now('a', 1)), 1, '(b) a claim of one row on a limit of 2 takes it');
is(scalar(claim_now('a', 5)), 1, '(b) a claim of 5 takes only the slot left');
is(lim('a'), '2/2', '(b) in_flight counts both leases');
is(scalar(claim_now('a', 5)), 0, '(b) a full topic grants nothing');
is(live_rows('a'), '2', '(b) two rows carry a live lease');
enqueue('a_free', 'af1', 'af2');
is( sql(qq{
SELECT string_agg(topic, ',' ORDER BY topic)
  FROM aion_wake.claim(ARRAY['a', 'a_free'], 5, '1 hour')}),
	'a_free,a_free',
	'(b) claim(topics[]) takes nothing of the full topic and all of the free one');

# an unused reservation goes back at once: a claim of 5 on a limit of 3
# that finds one row leaves 2 slots to the next claim, while it is open
enqueue('u3', 'u3a');
sql("SELECT aion_wake.set_limit('u3', 3)");
$s1->query_safe('BEGIN');
is($s1->query_safe("SELECT count(*) FROM aion_wake.claim('u3', 5, '1 hour')"),
	'1', '(b) an open claim of 5 finds the one row there is');
enqueue('u3', 'u3b', 'u3c', 'u3d');
is(scalar(claim_now('u3', 5)), 2,
	'(b) another claim takes the 2 slots the open claim did not use');
is(lim('u3'), '3/3', '(b) in_flight counts the open lease');
$s1->query_safe('COMMIT');
is(lim('u3'), '3/3', '(b) and keeps it once committed');

# ---------------------------------------------------------------------
# (c) blocked claimers woken by settles
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('w', 1)");
enqueue('w', qw(w1 w2 w3));
my ($hold) = claim_now('w', 1);
is($hold->[0], 'w1', '(c) the holder leases w1: the topic is full');

start_claim($c[0], 'w');
ok(waiters_of('w', 1), '(c) a claim on the full topic waits');
enqueue('w', 'w4');
ok(!aw_done($c[0]), '(c) a row arriving while the topic is full wakes nobody');

my ($p0, $s0) = (topic_pulses('w'), status('slots_received'));
my $t = commit_event('w_complete', "SELECT aion_wake.complete('w1', $hold->[1])");
my $row = woken_ok($c[0], $t, '(c) complete() wakes the blocked claimer promptly');
is($row->[0], 'w2', '(c) which takes the oldest row');
is(topic_pulses('w') - $p0, 1, '(c) complete() is a pulse of the topic');
is(status('slots_received') - $s0, 1, '(c) of one slot');

start_claim($c[0], 'w');
ok(waiters_of('w', 1), '(c) the claimer waits again');
$p0 = topic_pulses('w');
$t = commit_event('w_fail', "SELECT aion_wake.fail('w2', 'boom', '1 hour', $row->[1])");
$row = woken_ok($c[0], $t, '(c) fail() wakes the blocked claimer promptly');
is($row->[0], 'w3', '(c) which takes the next row (the failed one waits out its back-off)');
is(topic_pulses('w') - $p0, 1, '(c) fail() is a pulse of one slot');

start_claim($c[0], 'w');
ok(waiters_of('w', 1), '(c) the claimer waits again');
$p0 = topic_pulses('w');
$t = commit_event('w_dead', "SELECT aion_wake.dead_letter('w3', 'gone', $row->[1])");
$row = woken_ok($c[0], $t, '(c) dead_letter() wakes the blocked claimer promptly');
is($row->[0], 'w4', '(c) which takes the next row');
is(topic_pulses('w') - $p0, 1, '(c) dead_letter() is a pulse of one slot');

enqueue('w', 'w5');
start_claim($c[0], 'w');
ok(waiters_of('w', 1), '(c) the claimer waits again');
ok(no_credit('w'), '(c) the pulses so far have no slot left');
$p0 = topic_pulses('w');
$t = commit_event('w_park', "SELECT aion_wake.park('w4', '1 hour', $row->[1])");
is(topic_pulses('w') - $p0, 0, '(c) park() is no pulse');
$row = woken_ok($c[0], $t, '(c) park() wakes the blocked claimer promptly');
is($row->[0], 'w5', '(c) which takes another row');
is(aw_still_parked($node, 'w'), 'w4', '(c) the row just parked stays parked');

# two confirmed parks (w4, then w5), the slot free; a holder takes w6
ok(no_credit('w'), '(c) no pulse has a slot left');
$t = commit_event('w_park2', "SELECT aion_wake.park('w5', '1 hour', $row->[1])");
ok(aw_wait_confirmed($node, 'w', 2), '(c) w4 and w5 are confirmed parks');
is(lim('w'), '1/0', '(c) the parks released their slots');
enqueue('w', 'w6');
($hold) = claim_now('w', 1);
is($hold->[0], 'w6', '(c) a holder leases w6, the only claimable row');
start_claim($c[0], 'w');
ok(waiters_of('w', 1), '(c) a claimer waits: no slot and no row');
$t = commit_event('w_complete2', "SELECT aion_wake.complete('w6', $hold->[1])");
$row = woken_ok($c[0], $t,
	'(c) complete() frees the slot and, as a pulse, makes a row claimable: the claimer returns promptly');
is($row->[0], 'w4', '(c) with the oldest confirmed park, re-offered');
is(aw_still_parked($node, 'w'), 'w5', '(c) the pulse was of one slot: w5 stays parked');

# a slot that frees while no row is claimable wakes nobody; a row later does
sql("SELECT aion_wake.complete('w5')");
start_claim($c[0], 'w');
ok(waiters_of('w', 1), '(c) the claimer waits (w4 is leased)');
$t = commit_event('w_norow', "SELECT aion_wake.complete('w4', $row->[1])");
is(lim('w'), '1/0', '(c) the slot is free');
ok(!aw_done($c[0]), '(c) but no row is claimable: the claimer still waits');
$t = commit_event('w_enq', "SELECT aion_wake.enqueue('w7', '{}', 'w')");
$row = woken_ok($c[0], $t, '(c) a row enqueued then wakes it promptly');
is($row->[0], 'w7', '(c) and it takes that row');
sql("SELECT aion_wake.complete('w7')");

# ---------------------------------------------------------------------
# (d) rollback of a claim
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('r', 1)");
enqueue('r', qw(r1 r2 r3));
$s1->query_safe('BEGIN');
is($s1->query_safe("SELECT dispatch_key FROM aion_wake.claim('r', 1, '1 hour')"),
	'r1', '(d) an open claim leases r1');
is(lim('r'), '1/1', '(d) its lease counts while open');
start_claim($c[0], 'r');
ok(waiters_of('r', 1), '(d) a claimer waits');
$t = $s1->query_safe("SELECT extract(epoch FROM clock_timestamp()); ROLLBACK");
$row = woken_ok($c[0], $t, '(d) the rollback wakes it promptly');
is($row->[0], 'r1', '(d) and it takes r1, given back');
is(lim('r'), '1/1', '(d) one lease: the rolled-back one is gone');

$s1->query_safe('BEGIN; SAVEPOINT sp');
is($s1->query_safe("SELECT count(*) FROM aion_wake.claim('r', 1, '1 hour')"),
	'0', '(d) the topic is full: an open claim in a savepoint takes nothing');
sql("SELECT aion_wake.complete('r1', $row->[1])");
is($s1->query_safe("SELECT dispatch_key FROM aion_wake.claim('r', 1, '1 hour')"),
	'r2', '(d) once free, the claim in the savepoint leases r2');
start_claim($c[0], 'r');
ok(waiters_of('r', 1), '(d) a claimer waits');
$t = $s1->query_safe(
	"SELECT extract(epoch FROM clock_timestamp()); ROLLBACK TO SAVEPOINT sp");
$row = woken_ok($c[0], $t,
	'(d) ROLLBACK TO SAVEPOINT returns the slot and wakes it promptly, the transaction still open');
$s1->query_safe('COMMIT');
is(lim('r'), '1/1', '(d) one lease, the woken claimer\'s');
sql("SELECT aion_wake.complete('$row->[0]', $row->[1])");
is(lim('r'), '1/0', '(d) none once it completes');

# ---------------------------------------------------------------------
# (e) lease ends, late and stale settles
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('e', 1)");
enqueue('e', qw(e1 e2));
my $expired0 = status('leases_expired');
my ($short) = claim_now('e', 1, '1 s');
is($short->[0], 'e1', '(e) e1 leased for a second');
start_claim($c[0], 'e');
ok(waiters_of('e', 1), '(e) a claimer waits on the full topic');
$row = woken_ok($c[0], $short->[2], '(e) the lease\'s end wakes it promptly, not before');
cmp_ok(status('leases_expired'), '>', $expired0, '(e) leases_expired rises');
is(lim('e'), '1/1', '(e) one lease: the woken claimer\'s');
sql("SELECT aion_wake.complete('$row->[0]', $row->[1])");

# a late complete of an expired lease nobody re-claimed
sql("SELECT aion_wake.set_limit('e2', 1)");
enqueue('e2', qw(x1 x2 x3));
($short) = claim_now('e2', 1, '1 s');
is($short->[0], 'x1', '(e) x1 leased for a second');
start_claim($c[0], 'e2');
ok(waiters_of('e2', 1), '(e) a claimer waits');
$row = woken_ok($c[0], $short->[2], '(e) x1\'s end wakes it promptly');
is($row->[0], 'x2', '(e) it takes x2 (x1\'s fence is younger): nobody re-claimed x1');
is(sql("SELECT aion_wake.complete('x1', $short->[1])"), 't',
	'(e) the late complete of x1 returns true: the row is delivered');
is(lim('e2'), '1/1', '(e) and releases nothing: x2\'s lease still counts');
is(scalar(claim_now('e2', 5)), 0, '(e) so nothing is granted');
sql("SELECT aion_wake.complete('x2', $row->[1])");
is(lim('e2'), '1/0', '(e) x2\'s complete releases its slot');

# a stale token
sql("SELECT aion_wake.set_limit('e3', 1)");
enqueue('e3', 'y1');
($short) = claim_now('e3', 1, '1 s');
start_claim($c[0], 'e3');
ok(waiters_of('e3', 1), '(e) a claimer waits for y1');
my $again = woken_ok($c[0], $short->[2], '(e) y1\'s end wakes it promptly');
is($again->[0], 'y1', '(e) y1 is claimed again, with a new token');
isnt($again->[1], $short->[1], '(e) (a new token)');
is( sql(qq{
SELECT aion_wake.complete('y1', $short->[1])::text || aion_wake.fail('y1', 'x', '0', $short->[1])::text
    || aion_wake.park('y1', '1 hour', $short->[1])::text
    || aion_wake.dead_letter('y1', 'x', $short->[1])::text}),
	'falsefalsefalsefalse',
	'(e) complete, fail, park and dead_letter with the stale token refuse');
is(lim('e3'), '1/1', '(e) and release nothing');
$s1->query_safe("BEGIN; SELECT aion_wake.complete('y1', $again->[1])");
is(lim('e3'), '1/1', '(e) an open complete has not released yet');
$s1->query_safe('ROLLBACK');
is(lim('e3'), '1/1', '(e) a rolled-back complete releases nothing');
$s1->query_safe("BEGIN; SELECT aion_wake.complete('y1', $again->[1])");
$s1->query_safe('COMMIT');
is(lim('e3'), '1/0', '(e) a committed complete with the live token releases');
enqueue('e3', 'y2');
claim_now('e3', 1);
is(sql("SELECT aion_wake.complete('y2')"), 't', '(e) a complete without a token');
is(lim('e3'), '1/0', '(e) releases too');

# a lease whose end no claimer waits for is released at that end too;
# claimed once the worker sleeps with nothing due (no slots to spend, no
# waiter), so that only the lease itself can make it look at the clock
sql("SELECT aion_wake.set_limit('e4', 1)");
enqueue('e4', qw(z1 z2));
$expired0 = status('leases_expired');
my $wpid = aw_worker_pid($node);
ok( $node->poll_query_until(
		'postgres', qq{
SELECT (SELECT bool_and(credit = 0 AND unspent_slots = 0 AND waiters = 0) FROM aion_wake.topics)
   AND (SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $wpid)}),
	'(e) the worker sleeps with nothing to do');
($short) = claim_now('e4', 1, '1 s');
ok( $node->poll_query_until(
		'postgres', "SELECT clock_timestamp() > to_timestamp($short->[2]) + interval '$prompt s'"),
	'(e) a lease nobody waits for ends');
is(lim('e4'), '1/0', '(e) its slot was released at its end');
cmp_ok(status('leases_expired'), '>', $expired0, '(e) leases_expired rose');
is(scalar(claim_now('e4', 1)), 1, '(e) a claim (not waiting) takes the slot');

# ---------------------------------------------------------------------
# (f) leases taken before set_limit, lowering, raising, removing
# ---------------------------------------------------------------------
enqueue('b', map { "b$_" } 1 .. 6);
my @pre = claim_now('b', 3);
is(scalar(@pre), 3, '(f) three leases on the unlimited topic');
sql("SELECT aion_wake.set_limit('b', 2)");
is(lim('b'), '2/3', '(f) they count against the limit set after them');
is(scalar(claim_now('b', 5)), 0, '(f) over the limit: nothing is granted');
start_claim($c[0], 'b');
ok(waiters_of('b', 1), '(f) a claimer waits');
sql("SELECT aion_wake.complete('$pre[0][0]', $pre[0][1])");
is(lim('b'), '2/2', '(f) one lease drains');
ok(!aw_done($c[0]), '(f) at the limit, still nothing is granted');
$t = commit_event('b_drain', "SELECT aion_wake.complete('$pre[1][0]', $pre[1][1])");
woken_ok($c[0], $t, '(f) below it, the claimer is woken promptly (and not before)');
is(lim('b'), '2/2', '(f) back at the limit');

# a claim open when set_limit() is called is counted at its commit
enqueue('b2', map { "bb$_" } 1 .. 5);
$s1->query_safe('BEGIN');
is($s1->query_safe("SELECT count(*) FROM aion_wake.claim('b2', 2, '1 hour')"),
	'2', '(f) an open claim leases two rows of an unlimited topic');
aw_start($c[1], "SELECT aion_wake.set_limit('b2', 2)");
$s1->query_safe('COMMIT');
my ($out, $err) = aw_finish($c[1]);
is($err, '', '(f) set_limit() called meanwhile succeeds');
is(lim('b2'), '2/2', '(f) and counts the open claim\'s leases');
is(scalar(claim_now('b2', 5)), 0, '(f) nothing more is granted');

# a claim in set_limit()'s own transaction, after it, counts from its commit
enqueue('b3', map { "bc$_" } 1 .. 5);
$s1->query_safe("BEGIN; SELECT aion_wake.set_limit('b3', 1)");
my $got = $s1->query_safe("SELECT count(*) FROM aion_wake.claim('b3', 3, '1 hour')");
$s1->query_safe('COMMIT');
is(lim('b3'), "1/$got",
	"(f) $got lease(s) taken in set_limit()'s transaction count from its commit");
is(scalar(claim_now('b3', 5)), 0, '(f) so nothing more is granted');
is(live_rows('b3'), $got, '(f) the live leases are those');

# a lease settled in set_limit()'s own transaction does not count
enqueue('b4', map { "bd$_" } 1 .. 5);
my @b4 = claim_now('b4', 2);
$s1->query_safe(
	"BEGIN; SELECT aion_wake.set_limit('b4', 2); SELECT aion_wake.complete('$b4[0][0]', $b4[0][1]); COMMIT"
);
is(lim('b4'), '2/1', '(f) a lease completed in set_limit()\'s transaction is released');
is(scalar(claim_now('b4', 5)), 1, '(f) its slot is granted');

# raising wakes claimers for the new slots; removing wakes them all
sql("SELECT aion_wake.set_limit('rs', 1)");
enqueue('rs', map { "rs$_" } 1 .. 8);
claim_now('rs', 1);
start_claim($_, 'rs') foreach @c;
ok(waiters_of('rs', 4), '(f) four claimers wait on a full limit of 1');
$t = commit_event('rs_raise', "SELECT aion_wake.set_limit('rs', 3)");
my @done = wait_done(2, @c);
is(scalar(@done), 2, '(f) raising the limit to 3 wakes two claimers');
my @rest = grep { my $x = $_; !grep { $_ == $x } @done } @c;
woken_ok($_, $t, '(f) a claimer woken by the raise returns promptly') foreach @done;
is(scalar(grep { aw_done($_) } @rest), 0, '(f) the others have not returned');
is(scalar(@rest), 2, '(f) two still wait');
is(lim('rs'), '3/3', '(f) in_flight 3');
$t = commit_event('rs_remove', "SELECT aion_wake.set_limit('rs', NULL)");
woken_ok($_, $t, '(f) removing the limit wakes every remaining claimer promptly') foreach @rest;
is(lim('rs'), '-/-', '(f) the topic has no limit any more');
is(sql("SELECT count(*) FROM aion_wake.limits WHERE topic = 'rs'"), '0',
	'(f) nor a row in aion_wake.limits');

# the zero-gap hand-off: settle a lease and take the next row in one
# transaction; the slot passes on (the topic is not over its limit), and a
# lease settled by the transaction that holds its successor does not count
sql("SELECT aion_wake.set_limit('j', 1)");
enqueue('j', qw(j1 j2 j3));
my ($j) = claim_now('j', 1);
$s1->query_safe("BEGIN; SELECT aion_wake.complete('$j->[0]', $j->[1])");
is($s1->query_safe("SELECT dispatch_key FROM aion_wake.claim('j', 1, '1 hour')"),
	'j2', '(f) hand-off: a claim after complete() in the same transaction takes the next row');
$s1->query_safe('COMMIT');
my $jl = live_rows('j');
is(lim('j'), "1/$jl", "(f) hand-off: in_flight is the live leases ($jl)");
is(scalar(claim_now('j', 5)), 1 - $jl, '(f) hand-off: and claims get what is left');

# the same row handed to itself: fail() with no back-off, then claimed again
sql("SELECT aion_wake.set_limit('jk', 1)");
enqueue('jk', 'k1');
($j) = claim_now('jk', 1);
$s1->query_safe(
	"BEGIN; SELECT aion_wake.fail('k1', 'again', '0', $j->[1]); SELECT count(*) FROM aion_wake.claim('jk', 1, '1 hour'); COMMIT"
);
$jl = live_rows('jk');
is(lim('jk'), "1/$jl", "(f) a row failed and claimed again in one transaction: in_flight is its live leases ($jl)");
enqueue('jk', 'k2');
is(scalar(claim_now('jk', 5)), 1 - $jl, '(f) and claims get what is left');

# ---------------------------------------------------------------------
# (g) bad input
# ---------------------------------------------------------------------
my %bad = (
	"aion_wake.set_limit('g', 0)"                   => '22023',
	"aion_wake.set_limit('g', -1)"                  => '22023',
	"aion_wake.set_limit('g', 1000001)"             => '22023',
	"aion_wake.set_limit(NULL, 1)"                  => '22004',
	"aion_wake.set_limit(NULL, NULL)"               => '22004',
	"aion_wake.set_limit('bad topic', 1)"           => '22023',
	"aion_wake.set_limit('', 1)"                    => '22023',
	"aion_wake.set_limit(repeat('x', 64), 1)"       => '22023',
	"aion_wake.set_limit('g', $max_leases + 1)"     => '53400',
	"aion_wake.set_limit('g', 1000000)"             => '53400',);
foreach my $call (sort keys %bad)
{
	is(sql("SELECT public.sqlstate_of(\$\$SELECT $call\$\$)"),
		$bad{$call}, "(g) $call raises $bad{$call}");
}
is(lim('g'), '-/-', '(g) and none of them set a limit');
# the sum of all limits may not exceed the pool
my $room = $max_leases - sql('SELECT sum(max_in_flight) FROM aion_wake.limits');
cmp_ok($room, '>', 1, '(g) the pool has room left');
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('g', $room + 1)\$\$)"),
	'53400', '(g) a limit beyond the room the other limits leave: 53400');
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('g', $room)\$\$)"),
	'ok', '(g) one that fills it exactly is taken');
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('g2', 1)\$\$)"),
	'53400', '(g) then another topic\'s limit of 1 is refused');
sql("SELECT aion_wake.set_limit('g', NULL)");
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('g2', 1)\$\$)"),
	'ok', '(g) once the limit is removed, its room is free again');
is(status('lease_capacity'), $max_leases, '(g) status.lease_capacity is the pool');

# clear every limit but those the next parts set
sql("SELECT aion_wake.set_limit(topic, NULL) FROM aion_wake.limits");

# ---------------------------------------------------------------------
# (h) no herd, and never over the limit under load
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('h', 1)");
enqueue('h', map { sprintf('h%02d', $_) } 1 .. 20);
($hold) = claim_now('h', 1);
# sessions that run nothing before their claim: a backend idle with
# statistics to flush arms a timer that sets its latch while its next
# statement runs (AionWake::Test::aw_waiter), which would count as a wake
my @hw = map { aw_waiter($node) } 1 .. 4;
start_claim($_, 'h', '30 s') foreach @hw;
my $pids = join ',', map { $_->{pid} } @hw;
ok( $node->poll_query_until(
		'postgres', qq{
SELECT count(*) = 4 FROM pg_stat_activity
 WHERE pid IN ($pids) AND wait_event_type = 'Extension'}),
	'(h) four claimers sleep on a full limit of 1');
my $probes_sql = q{
SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
 WHERE query LIKE '%SKIP LOCKED%' AND query LIKE '%lease_token%'};
my $probes0 = sql($probes_sql);

# A claimer asleep on its latch makes no voluntary context switch (Linux
# /proc); one woken makes at least one as it goes back to sleep.  Before
# each release, every claimer still waiting must not have woken since it
# fell asleep.
sub ctx_switches
{
	my ($pid) = @_;
	open my $f, '<', "/proc/$pid/status" or return -1;
	while (my $line = <$f>)
	{
		return $1 if $line =~ /^voluntary_ctxt_switches:\s+(\d+)/;
	}
	return -1;
}
my %asleep = map { $_->{pid} => ctx_switches($_->{pid}) } @hw;
my %woke;
my @waiting = @hw;
my $rounds = 0;
my ($max_if, $max_rows) = (0, 0);
while (@waiting)
{
	$rounds++;
	$node->poll_query_until('postgres', qq{
SELECT count(*) = @{[ scalar(@waiting) ]} FROM pg_stat_activity
 WHERE pid IN (@{[ join ',', map { $_->{pid} } @waiting ]}) AND wait_event_type = 'Extension'});
	foreach (@waiting)
	{
		$woke{ $_->{pid} } = $rounds
		  if !$woke{ $_->{pid} } && ctx_switches($_->{pid}) != $asleep{ $_->{pid} };
	}
	$t = commit_event("h_release_$rounds",
		"SELECT aion_wake.complete('$hold->[0]', $hold->[1])");
	@done = wait_done(1, @waiting);
	is(scalar(@done), 1, "(h) release $rounds returns exactly one claimer");
	$hold = woken_ok($done[0], $t, "(h) release $rounds wakes it promptly");
	@waiting = grep { $_ != $done[0] } @waiting;
	my $if = (split m{/}, lim('h'))[1];
	$max_if = $if if $if > $max_if;
	my $lr = live_rows('h');
	$max_rows = $lr if $lr > $max_rows;
	is(scalar(grep { aw_done($_) } @waiting), 0, "(h) after release $rounds the others still wait");
}
is(join(',', map { "$_ woke before release $woke{$_}" } sort keys %woke),
	'', '(h) no claimer woke before the release that was its own: no herd');
my $probes = sql($probes_sql) - $probes0;
cmp_ok($probes, '<=', $rounds + 1,
	"(h) $rounds releases ran $probes claim statements: only the woken claimers probed the table");
is($max_if, 1, '(h) in_flight never went over the limit');
is($max_rows, 1, '(h) nor did the rows with a live lease');
sql("SELECT aion_wake.complete('$hold->[0]', $hold->[1])");

# a load: pgbench clients claim (waiting or not), work 20 ms holding the
# lease, then complete or fail, in a transaction of its own; every claim and
# every settle that succeeded is in a ledger.  A sampler watches in_flight
# and the rows with a live lease meanwhile.
my $limit = 2;
sql(qq{
SELECT aion_wake.set_limit('ld', $limit);
SELECT count(*) FROM (SELECT aion_wake.enqueue('ld' || g, '{}', 'ld') FROM generate_series(1, 400) g) e;
CREATE TABLE public.claims (token bigint PRIMARY KEY, dispatch_key text, claimed_at timestamptz, lease_end timestamptz);
CREATE TABLE public.settles (token bigint PRIMARY KEY);
CREATE TABLE public.samples (in_flight int, live_rows bigint);
CREATE TABLE public.stop (b boolean);

-- the lease token taken, 0 for none
CREATE FUNCTION public.ld_claim(r int) RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE
	c record;
BEGIN
	SELECT * INTO c FROM aion_wake.claim('ld', 1, '30 s', CASE WHEN r <= 50 THEN '2 s' ELSE '0' END::interval);
	IF NOT FOUND THEN
		RETURN 0;
	END IF;
	INSERT INTO public.claims VALUES (c.lease_token, c.dispatch_key, c.leased_until - interval '30 s', c.leased_until);
	RETURN c.lease_token;
END
\$\$;

CREATE FUNCTION public.ld_settle(tok bigint, r int) RETURNS boolean LANGUAGE plpgsql AS \$\$
DECLARE
	k text;
	ok boolean;
BEGIN
	SELECT dispatch_key INTO k FROM public.claims WHERE token = tok;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM pg_sleep(0.02);		-- the consumer works while the lease is held
	IF r <= 80 THEN
		ok := aion_wake.complete(k, tok);
	ELSE
		ok := aion_wake.fail(k, 'busy', '0', tok);
	END IF;
	IF ok THEN
		INSERT INTO public.settles VALUES (tok);
	END IF;
	RETURN ok;
END
\$\$;

CREATE PROCEDURE public.sample() LANGUAGE plpgsql AS \$\$
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM public.stop) LOOP
		INSERT INTO public.samples
		SELECT (SELECT in_flight FROM aion_wake.topics WHERE topic = 'ld'),
		       (SELECT count(*) FROM aion_wake.outbox
		         WHERE topic = 'ld' AND lease_token IS NOT NULL AND leased_until > clock_timestamp());
		COMMIT;
		PERFORM pg_sleep(0.002);
	END LOOP;
END
\$\$;
});

my $script = "${PostgreSQL::Test::Utils::tmp_check}/026_load.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set r random(1, 100)
SELECT public.ld_claim(:r) AS tok \gset
SELECT public.ld_settle(:tok, :r);
});
aw_start($s1, 'CALL public.sample()');
my ($bout, $berr) = ('', '');
my $bench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', 4, '-j', 2, '-t', 60, '-f', $script,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'<', \undef, '>', \$bout, '2>', \$berr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
ok($bench->finish, '(h) the pgbench load ran') or diag($berr);
sql('INSERT INTO public.stop VALUES (true)');
aw_finish($s1);
my ($nsamples, $smax_if, $smax_rows) = split /\|/,
  sql('SELECT count(*), max(in_flight), max(live_rows) FROM public.samples');
cmp_ok($nsamples, '>=', 50, "(h) $nsamples samples taken under the load");
cmp_ok($smax_if, '<=', $limit, "(h) in_flight never went over the limit (at most $smax_if)");
cmp_ok($smax_rows, '<=', $limit,
	"(h) nor did the rows with a live lease (at most $smax_rows)");

# the most leases of the ledger that overlapped: a lease runs from its
# claim to the commit of its settle, or to its end, whichever is first; its
# end is taken 5 ms early, since the claim after it reads the clock before
# it reserves its slot (a lease over the limit overlaps for the 20 ms of
# work)
my $overlap = sql(q{
WITH iv AS (
	SELECT c.claimed_at AS s,
	       least(coalesce(pg_xact_commit_timestamp(st.xmin), c.lease_end), c.lease_end)
	         - interval '5 ms' AS e
	  FROM public.claims c LEFT JOIN public.settles st USING (token)),
ev AS (SELECT s AS t, 1 AS d FROM iv WHERE e > s
       UNION ALL SELECT e, -1 FROM iv WHERE e > s)
SELECT coalesce(max(n), 0) FROM (SELECT sum(d) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n FROM ev) x});
my $nclaims = sql('SELECT count(*) FROM public.claims');
cmp_ok($nclaims, '>=', 100, "(h) the ledger holds $nclaims leases");
cmp_ok($overlap, '<=', $limit, "(h) at most $overlap of them overlapped (limit $limit)");
ok($node->poll_query_until('postgres', "SELECT in_flight = 0 FROM aion_wake.topics WHERE topic = 'ld'"),
	'(h) in_flight is 0 once the load is over');

$_->quit foreach ($s1, @c, @hw);

# ---------------------------------------------------------------------
# (i) a database no worker serves
# ---------------------------------------------------------------------
my $un = aw_node('unserved', databases => '', create => 0, conf => "statement_timeout = '90s'\n");
$un->safe_psql('postgres', 'CREATE EXTENSION aion_wake');
is($un->safe_psql('postgres', 'SELECT worker_pid IS NULL FROM aion_wake.status'),
	't', '(i) no worker serves the database');
$un->safe_psql(
	'postgres', q{
SELECT aion_wake.set_limit('nw', 1);
SELECT aion_wake.enqueue('n' || g, '{}', 'nw') FROM generate_series(1, 4) g;
});
my ($nl) = map { [ split /\|/ ] } split /\n/,
  $un->safe_psql('postgres',
	"SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until) FROM aion_wake.claim('nw', 1, '1 s')"
  );
is($un->safe_psql('postgres', "SELECT count(*) FROM aion_wake.claim('nw', 5, '1 hour')"),
	'0', '(i) the limit holds without a worker');
my $uc = aw_session($un);
start_claim($uc, 'nw', '10 s');
woken_ok($uc, $nl->[2], '(i) a blocked claimer returns promptly at the end of the lease that blocks it');
is($un->safe_psql('postgres', "SELECT in_flight FROM aion_wake.topics WHERE topic = 'nw'"),
	'1', '(i) the expired lease was released, the new one counts');
cmp_ok($un->safe_psql('postgres', 'SELECT leases_expired FROM aion_wake.status'),
	'>=', 1, '(i) leases_expired rises');

# a claim that does not wait releases expired leases too
$un->safe_psql('postgres', q{
SELECT aion_wake.complete(dispatch_key, lease_token) FROM aion_wake.outbox
 WHERE topic = 'nw' AND leased_until > clock_timestamp()});
($nl) = map { [ split /\|/ ] } split /\n/,
  $un->safe_psql('postgres',
	"SELECT dispatch_key || '|' || lease_token || '|' || extract(epoch FROM leased_until) FROM aion_wake.claim('nw', 1, '1 s')"
  );
ok($un->poll_query_until('postgres', "SELECT clock_timestamp() > to_timestamp($nl->[2])"),
	'(i) a short lease ends');
is($un->safe_psql('postgres', "SELECT count(*) FROM aion_wake.claim('nw', 5, '1 hour')"),
	'1', '(i) the next claim releases it and takes the slot');
$uc->quit;
$un->stop;

$node->stop;
done_testing();
