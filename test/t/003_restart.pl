# Copyright (c) 2026, aion_wake authors
#
# 003_restart.pl: no park is lost when the worker or the server goes down.
#
# The parked set is only an accelerator: every fence and every parked_at is
# in the table, and the worker rebuilds the set from it at every start (G1).
#   (a) kill -9 of the worker makes the postmaster reinitialize shared
#       memory; the new worker rebuilds the set with exactly the parked rows,
#       and a pulse re-offers them;
#   (b) pg_terminate_backend() of the worker is an orderly exit: a new worker
#       comes within a few seconds, without a crash restart, and the set
#       (even a pending park, which no rebuild could restore) is intact;
#   (c) an immediate shutdown and a start: the rows and the set come back;
#   (d) the worker's listening connection is terminated: the same worker
#       connects again and raw NOTIFY pulses work again.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

# the test framework turns restart_after_crash off; (a) needs it
my $node = aw_node('restart', conf => "restart_after_crash = on\n");
like(aw_worker_pid($node), qr/^\d+$/, 'the worker runs');

# A query that is true once at least $n rows of the topic are re-offered
# (poll for it, then check the exact rows, so that too many fails fast).
sub reoffered_at_least
{
	my ($topic, $n) = @_;
	return qq{
SELECT count(*) >= $n FROM aion_wake.outbox
 WHERE topic = '$topic' AND parked_at IS NULL
   AND visible_after <= clock_timestamp()};
}

# ---------------------------------------------------------------------
# (a) kill -9 of the worker: crash restart, the set rebuilt from the table
# ---------------------------------------------------------------------
aw_park_rows($node, 'ra', qw(ra1 ra2 ra3));
# a row of the same topic that is not parked must not enter the set
$node->safe_psql('postgres',
	"SELECT aion_wake.enqueue('ra_plain', '{}', 'ra', '1 hour')");
is(aw_confirmed($node, 'ra'), 'ra1,ra2,ra3',
	'(a) three confirmed parks before the crash');
my $rows_before =
  $node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox');

my $pid = aw_worker_pid($node);
like($pid, qr/^\d+$/, '(a) the worker has a pid');
my $log_offset = -s $node->logfile;
kill 'KILL', $pid or die "could not kill worker $pid: $!";

$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
pass('(a) the server goes through a crash restart');

my $new_pid = aw_wait_new_worker($node, $pid);
ok(defined $new_pid, '(a) a new worker runs after the crash restart');
ok(aw_wait_confirmed($node, 'ra', 3), '(a) the set is rebuilt');
is(aw_confirmed($node, 'ra'), 'ra1,ra2,ra3',
	'(a) the rebuilt set holds exactly the parked rows');
is($node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox'),
	$rows_before, '(a) no row was lost from the outbox');

$node->safe_psql('postgres', "SELECT aion_wake.pulse('ra', 3)");
ok($node->poll_query_until('postgres', reoffered_at_least('ra', 3)),
	'(a) a pulse of 3 re-offers the three rebuilt parks');
is( $node->safe_psql(
		'postgres',
		"SELECT visible_after > clock_timestamp() FROM aion_wake.outbox WHERE dispatch_key = 'ra_plain'"
	),
	't',
	'(a) the row that was never parked keeps its fence');
ok(aw_wait_status($node, 'listening'), '(a) the new worker listens again');

# ---------------------------------------------------------------------
# (b) pg_terminate_backend(): a new worker, no crash restart, set intact
# ---------------------------------------------------------------------
aw_park_rows($node, 'rb', qw(rb1 rb2));
$node->safe_psql('postgres', "SELECT aion_wake.enqueue('rb_pending', '{}', 'rb')");

# A client session that must survive (no crash restart) and that holds a
# pending park, which only an intact set can still know about.
my $bg = $node->background_psql('postgres');
my $bg_pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('BEGIN');
is($bg->query_safe("SELECT aion_wake.park('rb_pending', '1 hour')"),
	't', '(b) a park pending in an open transaction');

$pid = aw_worker_pid($node);
$log_offset = -s $node->logfile;
is( $node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"),
	't', '(b) the worker is terminated');

# bgw_restart_time is 2 s; allow a few seconds.
my $t0 = time;
$new_pid = aw_wait_new_worker($node, $pid);
ok(defined $new_pid, '(b) a new worker comes back');
cmp_ok(time - $t0, '<=', 15, '(b) within a few seconds');

is($bg->query_safe('SELECT pg_backend_pid()'),
	$bg_pid, '(b) the client session survived: no crash restart');
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/terminating any other active server processes|reinitializing/,
	'(b) the log shows no crash restart');
is( $node->safe_psql(
		'postgres',
		"SELECT state, owner_pid FROM aion_wake.parked WHERE dispatch_key = 'rb_pending'"
	),
	"pending|$bg_pid",
	'(b) the pending park is still in the set');
is(aw_confirmed($node, 'rb'), 'rb1,rb2',
	'(b) the confirmed parks are still in the set');

$bg->query_safe('COMMIT');
is(aw_confirmed($node, 'rb'), 'rb1,rb2,rb_pending',
	'(b) the pending park confirms');
$bg->quit;

$node->safe_psql('postgres', "SELECT aion_wake.pulse('rb', 3)");
ok($node->poll_query_until('postgres', reoffered_at_least('rb', 3)),
	'(b) the new worker re-offers all three');

# ---------------------------------------------------------------------
# (c) immediate shutdown and start: rows kept, set rebuilt
# ---------------------------------------------------------------------
aw_park_rows($node, 'rc', qw(rc1 rc2 rc3));
$rows_before =
  $node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox');
$node->stop('immediate');
$node->start;

is($node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox'),
	$rows_before, '(c) every row survives an immediate shutdown');
is(aw_still_parked($node, 'rc'), 'rc1,rc2,rc3',
	'(c) the parked rows keep their fence and parked_at');
ok(aw_wait_confirmed($node, 'rc', 3), '(c) the set is rebuilt after the start');
is(aw_confirmed($node, 'rc'), 'rc1,rc2,rc3',
	'(c) the rebuilt set holds the parked rows');

$node->safe_psql('postgres', "SELECT aion_wake.pulse('rc', 2)");
ok($node->poll_query_until('postgres', reoffered_at_least('rc', 2)),
	'(c) a pulse re-offers rebuilt parks');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(dispatch_key, ',' ORDER BY dispatch_key) FROM aion_wake.outbox
 WHERE topic = 'rc' AND parked_at IS NULL}),
	'rc1,rc2',
	'(c) oldest first, after the rebuild too');

# ---------------------------------------------------------------------
# (d) the listening connection is terminated: the worker reconnects
# ---------------------------------------------------------------------
ok(aw_wait_status($node, 'listening'), '(d) the worker listens');
$pid = aw_worker_pid($node);
my $listener = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'aion_wake listener'"
);
like($listener, qr/^\d+$/, '(d) one listening connection');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($listener)");
ok( $node->poll_query_until(
		'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE application_name = 'aion_wake listener' AND pid <> $listener}),
	'(d) a new listening connection is opened');
ok(aw_wait_status($node, 'listening'), '(d) the worker listens again');
is(aw_worker_pid($node), $pid, '(d) by the same worker');
aw_park_rows($node, 'rd', 'rd1');
$node->safe_psql('postgres', "NOTIFY aion_wake_capacity, 'rd:1'");
ok($node->poll_query_until('postgres', reoffered_at_least('rd', 1)),
	'(d) a raw NOTIFY is received on the new connection');

$node->stop;

done_testing();
