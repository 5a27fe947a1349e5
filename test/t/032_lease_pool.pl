# Copyright (c) 2026, aion_wake authors
#
# 032_lease_pool.pl: the lease pool (aion_wake.max_leases) holds a record
# for every lease the limits allow, so that every lease's settle releases
# its slot and wakes a blocked claimer.  A lease without a record would be
# released only at its end: a claimer would sleep beside a free slot.
#
#   (a) the zero-gap hand-off on a pool the limits fill: the settled lease
#       and its successor both hold a record until the commit;
#   (b) a lowered limit leaves live leases draining: their records stay
#       taken; the pool's reserve for leases above their limits holds one
#       lowering, and a limit that would need more is refused (53400)
#       until they have ended;
#   (c) CREATE DATABASE ... TEMPLATE copies aion_wake.limits: the copy's
#       limits are loaded through the same pool check as set_limit(), and
#       the limits loaded never add up to more than the pool.
#
# After each part: every live lease of a limited topic has a record
# (status.leases), and a claimer blocked on a full topic returns with a row
# as soon as one lease is completed (the lease itself is an hour long, the
# claim would wait two minutes).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use AionWake::Test;

my $pool = 16;    # aion_wake.max_leases: its minimum

my $node = aw_node(
	'lease_pool', conf => qq{
statement_timeout = '150s'
aion_wake.max_leases = $pool
});

aw_create_sqlstate_of($node);

sub sql
{
	my ($q, $db) = @_;
	return $node->safe_psql($db // 'postgres', $q);
}

sub enqueue
{
	my ($db, $t, $n) = @_;
	sql("SELECT count(aion_wake.enqueue('$t' || g, '{}', '$t')) FROM generate_series(1, $n) g",
		$db);
	return;
}

# claim now, no wait: a list of [key, token]
sub claim_now
{
	my ($db, $t, $n) = @_;
	my $out = sql(qq{
SELECT dispatch_key || '|' || lease_token FROM aion_wake.claim('$t', $n, '1 hour')
 ORDER BY dispatch_key}, $db);
	return map { [ split /\|/ ] } grep { $_ ne '' } split /\n/, $out;
}

# one live lease of a topic: [key, token]
sub claim_lease
{
	my ($t) = @_;
	return [ split /\|/, sql(qq{
SELECT dispatch_key || '|' || lease_token FROM aion_wake.outbox
 WHERE topic = '$t' AND leased_until > clock_timestamp() ORDER BY 1 LIMIT 1}) ];
}

# live leases of limited topics in a database, as the table has them
sub live_limited
{
	my ($db) = @_;
	return sql(qq{
SELECT count(*) FROM aion_wake.outbox o JOIN aion_wake.topics t USING (topic)
 WHERE t.max_in_flight IS NOT NULL AND o.leased_until > clock_timestamp()}, $db);
}

# every live lease of a limited topic, in any of the databases, has a
# record of the pool
sub records_ok
{
	my ($what, @dbs) = @_;
	my $live = 0;
	$live += live_limited($_) foreach @dbs;
	is(aw_status($node, 'leases'), $live, "$what: every live lease has a record ($live)");
	return;
}

# A claimer blocked on the full topic $t of $db returns with a row once the
# lease [key, token] is completed.
sub complete_wakes_ok
{
	my ($db, $t, $lease, $what) = @_;
	my $w = aw_waiter($node, $db);
	aw_start($w, qq{
SELECT dispatch_key FROM aion_wake.claim('$t', 1, '1 hour', '120 s')});
	ok( $node->poll_query_until($db,
			"SELECT waiters = 1 FROM aion_wake.topics WHERE topic = '$t'"),
		"$what: a claimer waits on the full topic");
	ok(!aw_done($w), "$what: and has not returned");
	sql("SELECT aion_wake.complete('$lease->[0]', $lease->[1])", $db);
	# promptly is the contract's 200 ms; 10 s here tells a wake under load
	# from none at all (the claim would wait two minutes)
	my $deadline = Time::HiRes::time() + 10;
	Time::HiRes::usleep(10_000) while !aw_done($w) && Time::HiRes::time() < $deadline;
	ok(aw_done($w), "$what: the complete of a lease wakes it");
	my ($out, $err) = aw_finish($w);
	like($out, qr/^$t\d+$/, "$what: and it takes a row");
	$w->quit;
	return;
}

# ---------------------------------------------------------------------
# (a) the hand-off on a pool the limits fill
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('ha', $pool)");
enqueue('postgres', 'ha', 3 * $pool);
my @held = claim_now('postgres', 'ha', $pool);
is(scalar(@held), $pool, '(a) the topic is full');
my $first = shift @held;
my $next = sql(qq{
SELECT dispatch_key || '|' || lease_token
  FROM aion_wake.complete('$first->[0]', $first->[1], next_rows => 1, lease => '1 hour')});
my @next = split /\|/, $next;
like($next[0], qr/^ha\d+$/, '(a) the settle hands its slot to the next row');
is(aw_limit_of($node, 'ha'), "$pool/$pool", '(a) the topic is full again');
records_ok('(a)', 'postgres');
complete_wakes_ok('postgres', 'ha', \@next, '(a) the lease taken by the hand-off');
sql("SELECT aion_wake.set_limit('ha', NULL); DELETE FROM aion_wake.outbox");

# ---------------------------------------------------------------------
# (b) lowered limits: their draining leases keep their records.  The pool
# holds a reserve as large as all the slots for leases above their limits:
# one lowering fits in it, a second one while the first still drains does
# not, and the limit that would need it waits until they have drained.
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_limit('la', $pool)");
enqueue('postgres', 'la', $pool);
my @la = claim_now('postgres', 'la', $pool);
is(scalar(@la), $pool, '(b) the topic is full');
sql("SELECT aion_wake.set_limit('la', 1)");
is(aw_limit_of($node, 'la'), "1/$pool", '(b) lowered: its leases drain');
my $lb = $pool - 1;
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('lb', $lb)\$\$)"),
	'ok', '(b) the room the lowering left in the sum of limits is taken');
enqueue('postgres', 'lb', $lb);
is(scalar(claim_now('postgres', 'lb', $pool)), $lb, "(b) its claims take $lb");
records_ok('(b) one lowering draining', 'postgres');
sql("SELECT aion_wake.set_limit('lb', 1)");
my $lc = $pool - 2;
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('lc', $lc)\$\$)"),
	'53400', '(b) with a second lowering draining, a limit that needs their records is refused');
enqueue('postgres', 'lc', 2 * $pool);
is(scalar(claim_now('postgres', 'lc', $lc)), $lc, "(b) $lc leases of that topic, unlimited");
records_ok('(b) two lowerings draining', 'postgres');
sql("SELECT aion_wake.complete('$_->[0]', $_->[1])") foreach @la;
is(aw_limit_of($node, 'la'), '1/0', '(b) the first one drained');
is(sql("SELECT public.sqlstate_of(\$\$SELECT aion_wake.set_limit('lc', $lc)\$\$)"),
	'ok', '(b) then the limit is taken');
is(aw_limit_of($node, 'lc'), "$lc/$lc", '(b) with the leases taken before it');
is(scalar(claim_now('postgres', 'lc', 1)), 0, '(b) the topic is full');
records_ok('(b) one lowering draining again', 'postgres');
complete_wakes_ok('postgres', 'lc', claim_lease('lc'), '(b) a lease of the new limit');
complete_wakes_ok('postgres', 'lc', claim_lease('lc'), '(b) another one');
sql("SELECT aion_wake.set_limit(topic, NULL) FROM aion_wake.limits; DELETE FROM aion_wake.outbox");
is(aw_status($node, 'leases'), '0', '(b) no record left');

# ---------------------------------------------------------------------
# (c) CREATE DATABASE ... TEMPLATE copies the limits
# ---------------------------------------------------------------------
sql('CREATE DATABASE tpl');
sql('CREATE EXTENSION aion_wake', 'tpl');
sql("SELECT aion_wake.set_limit('ct', $pool)", 'tpl');
sql('CREATE DATABASE cp TEMPLATE tpl');
is(sql("SELECT max_in_flight FROM aion_wake.limits WHERE topic = 'ct'", 'cp'),
	$pool, '(c) the copy has the limit in its table');
# the copy loads its limits on its first claim; the pool has no room
enqueue('cp', 'ct', $pool);
my ($cout, $cerr) = ('', '');
$node->psql('cp', "SELECT count(*) FROM aion_wake.claim('ct', $pool, '1 hour')",
	stdout => \$cout, stderr => \$cerr);
note("the copy's first claim: $cout; $cerr");
my $loaded = 0;
foreach my $db (qw(tpl cp))
{
	$loaded += sql(qq{
SELECT coalesce(sum(max_in_flight), 0) FROM aion_wake.topics}, $db);
}
cmp_ok($loaded, '<=', $pool, "(c) the limits loaded add up to no more than the pool ($loaded)");
enqueue('tpl', 'ct', 2 * $pool);
my @ct = claim_now('tpl', 'ct', $pool);
is(scalar(@ct), $pool, "(c) the template's topic takes its $pool");
records_ok('(c)', 'tpl', 'cp');
complete_wakes_ok('tpl', 'ct', $ct[0], "(c) a lease of the template's topic");

$node->stop;
done_testing();
