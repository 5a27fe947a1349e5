# Copyright (c) 2026, aion_wake authors
#
# 002_worker.pl: the worker turning capacity pulses into re-offers.
#
# Pulses reach the worker two ways: pulse() settles at COMMIT into shared
# memory, and a raw NOTIFY aion_wake_capacity arrives on the worker's own
# loopback connection.  This test holds the worker to the contract for both:
#   (a) a raw pulse of k slots re-offers exactly the k oldest confirmed parks
#       of its topic, leaving the rest parked and every attempt unchanged
#       (G4, G7);
#   (b) pulse() with one slot re-offers exactly one row;
#   (c) a pulse that arrives while a park is pending is not acted on before
#       the park commits (G3), and is acted on right after (G2);
#   (d) malformed payloads are counted, logged at a limited rate, and do not
#       hurt the worker;
#   (e) a rolled-back pulse() re-offers nothing;
#   (f) with aion_wake.listen off, raw NOTIFY is ignored but pulse() works.
# Each part uses a topic of its own, so a credit left by one part can never
# wake a row of another.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('worker');

ok(aw_wait_status($node, 'listening'), 'the worker listens for raw pulses');

my $worker_pid = aw_worker_pid($node);
like($worker_pid, qr/^\d+$/, 'the worker runs');

# A barrier: park a row of topic "barrier", pulse it (by raw NOTIFY or by
# pulse()) and wait until it is re-offered.  The worker handles pulses in
# order of arrival and spends everything pending in one round, so once the
# barrier row has moved, every pulse sent before it has been spent.
my $barrier_no = 0;

sub barrier
{
	my ($how) = @_;
	my $key = 'barrier' . ++$barrier_no;
	aw_park_rows($node, 'barrier', $key);
	if ($how eq 'notify')
	{
		$node->safe_psql('postgres',
			"NOTIFY aion_wake_capacity, 'barrier:1'");
	}
	else
	{
		$node->safe_psql('postgres', "SELECT aion_wake.pulse('barrier', 1)");
	}
	return aw_wait_reoffered($node, $key);
}

# ---------------------------------------------------------------------
# (a) a raw NOTIFY of 2 slots re-offers the 2 oldest of 5 parked rows
# ---------------------------------------------------------------------
aw_park_rows($node, 'ta', qw(a1 a2 a3 a4 a5));
$node->safe_psql('postgres',
	"UPDATE aion_wake.outbox SET attempt = 3 WHERE topic = 'ta'");
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(dispatch_key || ':' || state, ',' ORDER BY parked_at)
  FROM aion_wake.parked WHERE topic = 'ta'}),
	'a1:confirmed,a2:confirmed,a3:confirmed,a4:confirmed,a5:confirmed',
	'(a) five confirmed parks, in parking order');

$node->safe_psql('postgres', "NOTIFY aion_wake_capacity, 'ta:2'");
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) >= 2 FROM aion_wake.outbox
 WHERE topic = 'ta' AND parked_at IS NULL}),
	'(a) the raw pulse re-offers rows');
ok(barrier('notify'), '(a) barrier after the raw pulse');

is(aw_reoffered($node, 'ta'), 'a1,a2',
	'(a) exactly the two oldest parks are re-offered');
is(aw_still_parked($node, 'ta'), 'a3,a4,a5',
	'(a) the other three keep their fence and parked_at');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(DISTINCT attempt::text, ',') FROM aion_wake.outbox WHERE topic = 'ta'"
	),
	'3',
	'(a) attempt is unchanged by park and re-offer');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(dispatch_key, ',' ORDER BY parked_at)
  FROM aion_wake.parked WHERE topic = 'ta' AND state = 'confirmed'}),
	'a3,a4,a5',
	'(a) the set still holds the three rows not re-offered');

# ---------------------------------------------------------------------
# (b) pulse() with one slot re-offers exactly one row
# ---------------------------------------------------------------------
aw_park_rows($node, 'tb', qw(b1 b2 b3));
$node->safe_psql('postgres', "SELECT aion_wake.pulse('tb', 1)");
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) >= 1 FROM aion_wake.outbox
 WHERE topic = 'tb' AND parked_at IS NULL}),
	'(b) pulse() re-offers a row');
ok(barrier('pulse'), '(b) barrier after pulse()');
is(aw_reoffered($node, 'tb'), 'b1', '(b) exactly the oldest park is re-offered');
is(aw_still_parked($node, 'tb'), 'b2,b3', '(b) the other two stay parked');

# ---------------------------------------------------------------------
# (c) a pulse during a pending park is deferred until the park commits
# ---------------------------------------------------------------------
$node->safe_psql('postgres', "SELECT aion_wake.enqueue('c1', '{}', 'tc')");
my $token = $node->safe_psql('postgres',
	"SELECT lease_token FROM aion_wake.claim('tc', 1, '1 hour')");
like($token, qr/^\d+$/, '(c) the row is claimed');
my $deferred_before = aw_status($node, 'wakes_deferred');

my $bg = $node->background_psql('postgres');
$bg->query_safe('BEGIN');
is($bg->query_safe("SELECT aion_wake.park('c1', '1 hour', $token)"),
	't', '(c) park() in an open transaction');
is( $node->safe_psql(
		'postgres',
		"SELECT state, woken FROM aion_wake.parked WHERE dispatch_key = 'c1'"),
	'pending|f',
	'(c) the park is pending');

$node->safe_psql('postgres', "SELECT aion_wake.pulse('tc', 1)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT woken FROM aion_wake.parked WHERE dispatch_key = 'c1' AND state = 'pending'"
	),
	'(c) the pulse marks the pending park woken');
ok(barrier('pulse'), '(c) barrier after the pulse');
is( $node->safe_psql(
		'postgres', q{
SELECT visible_after > clock_timestamp() + interval '50 minutes'
  FROM aion_wake.outbox WHERE dispatch_key = 'c1'}),
	't',
	'(c) others still see the claim fence: the row is not re-offered');
is( $bg->query_safe(
		q{
SELECT visible_after > clock_timestamp() + interval '50 minutes' AND parked_at IS NOT NULL
  FROM aion_wake.outbox WHERE dispatch_key = 'c1'}),
	't',
	'(c) the parking transaction still sees its own fence');
is( $node->safe_psql(
		'postgres',
		"SELECT state, woken FROM aion_wake.parked WHERE dispatch_key = 'c1'"),
	'pending|t',
	'(c) the entry is still pending and woken before COMMIT');

$bg->query_safe('COMMIT');
ok(aw_wait_reoffered($node, 'c1'), '(c) the row is re-offered right after COMMIT');
cmp_ok(aw_status($node, 'wakes_deferred'), '>', $deferred_before,
	'(c) the deferred wake is counted');
$bg->quit;

# ---------------------------------------------------------------------
# (d) malformed payloads: counted, logged at a limited rate, harmless
# ---------------------------------------------------------------------
my $started_at = aw_status($node, 'started_at');
my $bad_before = aw_status($node, 'bad_pulses');
my $log_offset = -s $node->logfile;
my @bad = (
	q{NOTIFY aion_wake_capacity, ''},
	q{NOTIFY aion_wake_capacity, ':'},
	q{NOTIFY aion_wake_capacity, 't:-1'},
	q{NOTIFY aion_wake_capacity, 't:abc'},
	q{NOTIFY aion_wake_capacity, 'a topic:1'},
	q{SELECT pg_notify('aion_wake_capacity', repeat('a', 7999))});
$node->safe_psql('postgres', join(";\n", @bad) . ";\n");
ok( $node->poll_query_until(
		'postgres',
		'SELECT bad_pulses - ' . $bad_before . ' FROM aion_wake.status',
		scalar(@bad)),
	'(d) every malformed payload raises bad_pulses');
is(aw_worker_pid($node), $worker_pid, '(d) the worker did not restart');
is(aw_status($node, 'started_at'), $started_at,
	'(d) the worker kept its start time');
is(aw_status($node, 'listening'),  't',         '(d) the worker still listens');

aw_park_rows($node, 'td', 'd1');
$node->safe_psql('postgres', "NOTIFY aion_wake_capacity, 'td:1'");
ok(aw_wait_reoffered($node, 'd1'),
	'(d) a good raw pulse afterwards still re-offers');

$node->wait_for_log(qr/aion_wake ignored a malformed capacity pulse/,
	$log_offset);
my $log = slurp_file($node->logfile, $log_offset);
my $lines = () = $log =~ /aion_wake ignored a malformed capacity pulse/g;
cmp_ok($lines, '>=', 1, '(d) a malformed pulse is logged');
cmp_ok($lines, '<', scalar(@bad),
	"(d) the log is rate limited ($lines lines for " . scalar(@bad) . " payloads)");

# ---------------------------------------------------------------------
# (e) a rolled-back pulse() re-offers nothing
# ---------------------------------------------------------------------
aw_park_rows($node, 'te', 'e1');
my $pulses_before = aw_status($node, 'pulses_received');
$node->safe_psql('postgres',
	"BEGIN; SELECT aion_wake.pulse('te', 1); ROLLBACK;");
ok(barrier('pulse'), '(e) barrier after the rolled-back pulse');
is(aw_still_parked($node, 'te'), 'e1', '(e) the row stays parked');
is(aw_status($node, 'pulses_received'), $pulses_before + 1,
	'(e) only the barrier pulse was received');

# ---------------------------------------------------------------------
# (f) aion_wake.listen = off: raw NOTIFY is ignored, pulse() works
# ---------------------------------------------------------------------
aw_park_rows($node, 'tf', 'f1');
$node->append_conf('postgresql.conf', "aion_wake.listen = off\n");
$node->reload;
ok(aw_wait_status($node, 'NOT listening'), '(f) status.listening becomes false');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'aion_wake listener'"
	),
	'(f) the listening connection is closed');
$pulses_before = aw_status($node, 'pulses_received');
$node->safe_psql('postgres', "NOTIFY aion_wake_capacity, 'tf:1'");
ok(barrier('pulse'), '(f) barrier after the raw pulse');
is(aw_still_parked($node, 'tf'), 'f1', '(f) the raw pulse is ignored');
is(aw_status($node, 'pulses_received'), $pulses_before + 1,
	'(f) only the barrier pulse was received');

$node->safe_psql('postgres', "SELECT aion_wake.pulse('tf', 1)");
ok(aw_wait_reoffered($node, 'f1'), '(f) pulse() still re-offers');
is(aw_worker_pid($node), $worker_pid, '(f) the same worker throughout');

# Back on: the worker listens again.
$node->append_conf('postgresql.conf', "aion_wake.listen = on\n");
$node->reload;
ok(aw_wait_status($node, 'listening'),
	'(f) listening again once aion_wake.listen is back on');

$node->stop;

done_testing();
