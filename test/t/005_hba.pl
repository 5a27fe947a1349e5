# Copyright (c) 2026, aion_wake authors
#
# 005_hba.pl: the worker cannot open its listening connection.
#
# Raw NOTIFY pulses come in over a libpq connection the worker opens to its
# own server.  When that connection is refused (a role that does not exist,
# a pg_hba.conf reject line), the worker must say so in the status view
# (listening = false, listen_error saying why), keep working for pulse(),
# and retry with a growing delay, so that once the connection is allowed it
# listens again without a restart.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('hba', conf => "aion_wake.worker_role = 'aw_nobody'\n");

# Park a row and pulse it with pulse(); wait until it is re-offered.
sub pulse_works
{
	my ($key, $topic) = @_;
	$node->safe_psql(
		'postgres', qq{
SELECT aion_wake.enqueue('$key', '{}', '$topic');
SELECT aion_wake.park('$key', '1 hour');
SELECT aion_wake.pulse('$topic', 1);
});
	return aw_wait_reoffered($node, $key);
}

# ---------------------------------------------------------------------
# A role that does not exist
# ---------------------------------------------------------------------
ok(aw_wait_status($node, 'worker_pid IS NOT NULL AND listen_error IS NOT NULL'),
	'the worker reports a listen error');
is(aw_status($node, 'listening'), 'f', 'the worker is not listening');
like(aw_status($node, 'listen_error'), qr/aw_nobody.*does not exist/,
	'listen_error names the missing role');
ok($node->log_contains(qr/aion_wake worker is not listening for capacity pulses/),
	'the log says the worker is not listening');
my $worker_pid = aw_worker_pid($node);

ok(pulse_works('n1', 'tn'), 'pulse() re-offers a parked row without listening');

# ---------------------------------------------------------------------
# The role exists, but pg_hba.conf rejects it
# ---------------------------------------------------------------------
my $hba = slurp_file($node->data_dir . '/pg_hba.conf');
open my $fh, '>', $node->data_dir . '/pg_hba.conf' or die $!;
print $fh "local all aw_nobody reject\n" . $hba;
close $fh;
$node->reload;
$node->safe_psql('postgres', 'CREATE ROLE aw_nobody LOGIN');

# the retry delay starts at 1 s and doubles
ok(aw_wait_status($node, "listen_error ~ 'pg_hba.conf'"),
	'listen_error names pg_hba.conf once the role exists');
like(aw_status($node, 'listen_error'), qr/rejects connection.*aw_nobody/,
	'listen_error says the role is rejected');
is(aw_status($node, 'listening'), 'f', 'the worker is still not listening');
ok(pulse_works('h1', 'th'), 'pulse() still re-offers a parked row');

# a raw NOTIFY has no one to hear it
my $pulses = aw_status($node, 'pulses_received');
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('h2', '{}', 'th');
SELECT aion_wake.park('h2', '1 hour');
NOTIFY aion_wake_capacity, 'th:1';
});
ok(pulse_works('h3', 'th2'), 'barrier: a later pulse() is spent');
is( $node->safe_psql(
		'postgres',
		"SELECT parked_at IS NOT NULL FROM aion_wake.outbox WHERE dispatch_key = 'h2'"
	),
	't',
	'a raw NOTIFY is not received while the connection is refused');
is(aw_status($node, 'pulses_received'), $pulses + 1,
	'only the pulse() was received');

# ---------------------------------------------------------------------
# Allowed again: the worker connects on a retry, without a restart
# ---------------------------------------------------------------------
open $fh, '>', $node->data_dir . '/pg_hba.conf' or die $!;
print $fh $hba;
close $fh;
$node->reload;

# the delay has grown to a few seconds by now; it is capped at 60 s
my $t0 = time;
ok(aw_wait_status($node, 'listening AND listen_error IS NULL'),
	'the worker listens once pg_hba.conf allows it');
note 'reconnected after ' . (time - $t0) . ' s';
is(aw_worker_pid($node), $worker_pid, 'the same worker, no restart');
is( $node->safe_psql(
		'postgres',
		"SELECT usename FROM pg_stat_activity WHERE application_name = 'aion_wake listener'"
	),
	'aw_nobody',
	'the listening connection logs in as aion_wake.worker_role');

# h2 is still parked; a raw pulse now re-offers it
$node->safe_psql('postgres', "NOTIFY aion_wake_capacity, 'th:1'");
ok(aw_wait_reoffered($node, 'h2'), 'a raw NOTIFY is received again');

# ---------------------------------------------------------------------
# aion_wake.worker_role is a reload setting: a change takes effect without
# a restart, the worker reconnects as the new role.
# ---------------------------------------------------------------------
$node->append_conf('postgresql.conf', "aion_wake.worker_role = 'aw_gone'\n");
$node->reload;
ok( $node->poll_query_until(
		'postgres',
		"SELECT setting = 'aw_gone' FROM pg_settings WHERE name = 'aion_wake.worker_role'"
	),
	'the new worker_role is loaded');
ok(aw_wait_status($node, "NOT listening AND listen_error ~ 'aw_gone'"),
	'after a reload the worker logs in as the new worker_role');

$node->stop;

done_testing();
