# Copyright (c) 2026, aion_wake authors
#
# 018_drop_database.pl: a served database can be dropped and renamed
# (a defect of 1.0).
#
# The worker of a database and its listening connection stay connected to
# it, so DROP DATABASE failed ("being accessed by other users") and so did
# ALTER DATABASE ... RENAME; with FORCE the drop went through, and then the
# worker restarted every 2 s with FATAL "database ... does not exist",
# forever.  The worker must leave a database that is being dropped or
# renamed, as autovacuum does, say so in one LOG line, not restart in a
# loop while its database does not exist, and serve it again once it
# exists again, without a server restart.
#
#   (a) DROP DATABASE (no FORCE) of a served database succeeds; one LOG
#       line; no FATAL loop;
#   (b) CREATE DATABASE and CREATE EXTENSION again: the worker serves it,
#       and a park and a pulse there are re-offered;
#   (c) ALTER DATABASE ... RENAME TO succeeds: the worker leaves; renamed
#       back, it is served again;
#   (d) DROP DATABASE ... WITH (FORCE) leaves no FATAL loop.
#
# That the worker does not restart in a loop is looked for during a short
# window of about three restart periods (the restart delay is 2 s).

use strict;
use warnings;

use AionWake::Test;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# the LOG line of the worker leaving (or waiting for) its database
my $left_line = qr/^.*LOG:\s+[^\n]*aion_wake[^\n]*"dropme"[^\n]*$/m;
my $fatal_line = qr/FATAL:\s+database "dropme" does not exist/;
my $window = 7;    # seconds: three restart periods and a half

my $node = aw_node('dropdb', databases => 'postgres, dropme');
my $postgres_worker = aw_worker_pid($node);

sub count_matches
{
	my ($re, $offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @m = $log =~ /$re/g;
	return scalar(@m);
}

# LOG lines about dropme from aion_wake, but not the rebuild's
sub left_lines
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	return grep { !/rebuilt the parked set/ } ($log =~ /$left_line/g);
}

# Create dropme with the extension, and wait until its worker serves it
# and listens there.
sub create_served
{
	my ($what) = @_;
	$node->safe_psql('postgres', 'CREATE DATABASE dropme');
	aw_create_extension($node, 'dropme');
	ok( $node->poll_query_until(
			'dropme', 'SELECT worker_pid IS NOT NULL AND listening FROM aion_wake.status'),
		"$what a worker serves dropme and listens there");
}

# No restart loop: at most one FATAL "does not exist" for dropme during the
# window; stop looking as soon as a second one shows.
sub no_restart_loop
{
	my ($what, $offset) = @_;
	my $end = time + $window;
	my $n;
	while (1)
	{
		$n = count_matches($fatal_line, $offset);
		last if $n >= 2 || time >= $end;
		usleep(200_000);
	}
	cmp_ok($n, '<=', 1,
		"$what the worker does not restart in a loop ($n FATAL \"does not exist\" in ${window}s)");
}

# ---------------------------------------------------------------------
# (a) DROP DATABASE without FORCE
# ---------------------------------------------------------------------
create_served('(a)');
my $offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE dropme');
is($ret, 0, '(a) DROP DATABASE of a served database succeeds')
  or diag($err);
if ($ret != 0)
{
	# so that the checks below still run on code whose worker cannot leave
	$node->safe_psql('postgres', 'DROP DATABASE dropme WITH (FORCE)');
}
ok( aw_poll_for(
		$node, 'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'dropme'", 10),
	'(a) nothing is connected to dropme any more');
no_restart_loop('(a)', $offset);
my @left = left_lines($offset);
is(scalar(@left), 1, '(a) one LOG line says the worker left dropme')
  or diag("aion_wake LOG lines about dropme:\n" . join("\n", @left));
is(aw_worker_pid($node), $postgres_worker, "(a) postgres's worker is the same");

# ---------------------------------------------------------------------
# (b) the database exists again
# ---------------------------------------------------------------------
create_served('(b)');
$node->safe_psql(
	'dropme', q{
SELECT aion_wake.enqueue('r1', '{}', 'rt');
SELECT count(*) FROM aion_wake.claim('rt', 1, '1 hour');
SELECT aion_wake.park('r1', '1 hour');});
ok( $node->poll_query_until(
		'dropme',
		"SELECT state = 'confirmed' FROM aion_wake.parked WHERE dispatch_key = 'r1'"),
	'(b) a park in dropme enters the set');
$node->safe_psql('dropme', "SELECT aion_wake.pulse('rt', 1)");
ok( $node->poll_query_until(
		'dropme', q{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = 'r1'}),
	'(b) ... and a pulse there re-offers it');

# ---------------------------------------------------------------------
# (c) ALTER DATABASE ... RENAME
# ---------------------------------------------------------------------
$offset = -s $node->logfile;
($ret, $out, $err) = $node->psql('postgres', 'ALTER DATABASE dropme RENAME TO dropped');
is($ret, 0, '(c) ALTER DATABASE ... RENAME of a served database succeeds')
  or diag($err);
SKIP:
{
	skip 'the rename failed', 4 if $ret != 0;

	ok( aw_poll_for(
			$node, 'postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'dropped'", 10),
		'(c) the worker and its listener left the renamed database');
	no_restart_loop('(c)', $offset);
	$node->safe_psql('postgres', 'ALTER DATABASE dropped RENAME TO dropme');
	ok( $node->poll_query_until(
			'dropme', 'SELECT worker_pid IS NOT NULL AND listening FROM aion_wake.status'),
		'(c) renamed back, dropme is served again');
	is(aw_worker_pid($node), $postgres_worker, "(c) postgres's worker is the same");
}

# ---------------------------------------------------------------------
# (d) DROP DATABASE ... WITH (FORCE)
# ---------------------------------------------------------------------
$offset = -s $node->logfile;
$node->safe_psql('postgres', 'DROP DATABASE dropme WITH (FORCE)');
pass('(d) DROP DATABASE ... WITH (FORCE) of a served database');
no_restart_loop('(d)', $offset);
cmp_ok(scalar(left_lines($offset)), '>=', 1,
	'(d) a LOG line says the worker left dropme');
is(aw_worker_pid($node), $postgres_worker, "(d) postgres's worker is the same");

$node->stop;
done_testing();
