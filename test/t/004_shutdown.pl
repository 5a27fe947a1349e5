# Copyright (c) 2026, aion_wake authors
#
# 004_shutdown.pl: the worker's listening connection does not hold up a
# smart shutdown.
#
# For raw NOTIFY pulses the worker keeps a libpq connection to its own
# server.  That connection is an ordinary client backend, and a smart
# shutdown waits for every client backend to leave before it stops the
# background workers: unless the worker notices the shutdown and lets go,
# "pg_ctl stop -m smart" never completes.  pg_ctl runs with a 30 s limit so
# that the test fails instead of hanging.  After a start the worker must be
# back and listening, and a second smart stop must complete too.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use AionWake::Test;

my $node = aw_node('shutdown');

# Stop the node in smart mode with pg_ctl's own 30 s limit (and a harder
# limit around it); returns pg_ctl's exit status and the time taken.
sub smart_stop
{
	my ($stdout, $stderr) = ('', '');
	my $t0 = time;
	local %ENV = $node->_get_env();
	my $h = IPC::Run::start(
		[ 'pg_ctl', '-D', $node->data_dir, '-m', 'smart', '-t', '30', 'stop' ],
		'>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout(60));
	my $ok = eval { $h->finish; 1 };
	my $rc;
	if ($ok)
	{
		$rc = $h->result(0);
	}
	else
	{
		$h->kill_kill;
		$rc = -1;
	}
	note "pg_ctl smart stop: rc $rc\nstdout: $stdout\nstderr: $stderr";
	my $elapsed = time - $t0;

	# tell the test framework what state the node is in now
	$node->_update_pid(-1);
	return ($rc, $elapsed);
}

foreach my $round (1, 2)
{
	ok(aw_wait_status($node, 'listening'),
		"round $round: the worker is listening");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aion_wake listener'"
		),
		'1',
		"round $round: its listening connection is a client backend");

	my $log_offset = -s $node->logfile;
	my ($rc, $elapsed) = smart_stop();
	is($rc, 0, "round $round: pg_ctl stop -m smart completes");
	cmp_ok($elapsed, '<', 30, "round $round: within 30 s (took "
		  . sprintf('%.1f', $elapsed) . ' s)');
	ok(!defined $node->{_pid}, "round $round: the postmaster is gone");
	my $log = slurp_file($node->logfile, $log_offset);
	like($log, qr/received smart shutdown request/,
		"round $round: the shutdown was a smart one");
	like($log, qr/database system is shut down/,
		"round $round: the server shut down cleanly");

	# if the smart stop failed, do not leave the server behind
	$node->stop('fast') if defined $node->{_pid};

	$node->start;
	ok(aw_wait_status($node, 'worker_pid IS NOT NULL'),
		"round $round: the worker is back after the start");
}

# The worker still works after the restarts.  A raw NOTIFY sent before the
# worker listens is lost by design, so wait for it to listen first.
ok(aw_wait_status($node, 'listening'), 'the restarted worker listens');
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('s1', '{}', 'ts');
SELECT aion_wake.park('s1', '1 hour');
NOTIFY aion_wake_capacity, 'ts:1';
});
ok(aw_wait_reoffered($node, 's1'), 'the restarted worker re-offers on a raw pulse')
  or diag_state();

# On failure, show what the worker and the set looked like.
sub diag_state
{
	diag $node->safe_psql('postgres', q{
SELECT * FROM aion_wake.status;
SELECT * FROM aion_wake.parked;
SELECT * FROM aion_wake.outbox;
SELECT pid, backend_type, application_name, state, wait_event_type, wait_event
  FROM pg_stat_activity;});
}

$node->stop;

done_testing();
