# Copyright (c) 2026, aion_wake authors
#
# 017_duplicate_database.pl: a database named twice in aion_wake.database
# gets one worker (a defect of 1.0; G7).
#
# aion_wake.database is a list of identifiers, folded to lower case unless
# quoted, so 'postgres, POSTGRES' names postgres twice.  Each name got a
# worker: two workers served one database, each listened on the capacity
# channel, and one raw NOTIFY aion_wake_capacity, 'dup:1' added its slot
# twice and moved two parked rows (G7: a pulse of k slots re-offers at most
# k rows).  The list must be deduplicated after folding, with a WARNING
# naming the duplicate.
#
# Checked once with 'postgres, POSTGRES' and, after a restart, with
# 'postgres, postgres': one worker process for postgres, a WARNING in the
# log, and one raw NOTIFY of one slot re-offers one of two parked rows.
# That no second worker comes and no second row moves is looked for during
# a short window each (a second worker starts with the first, and a second
# re-offer follows the first by milliseconds).

use strict;
use warnings;

use AionWake::Test;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# the WARNING: names the database and says it is there more than once
my $dup_warning = qr/WARNING:[^\n]*(?:duplicate|twice|more than once|repeated|again)[^\n]*/i;

my $node = aw_node('dupdb', databases => 'postgres, POSTGRES');

sub check_one_worker
{
	my ($what, $log_offset) = @_;

	ok( $node->poll_query_until(
			'postgres', 'SELECT listening FROM aion_wake.status'),
		"$what a worker serves postgres and listens");

	# a second worker would start together with the first: 3 s is plenty
	ok( !aw_poll_for(
			$node, 'postgres', q{
SELECT count(*) >= 2 FROM pg_stat_activity
 WHERE backend_type = 'aion_wake worker' AND datname = 'postgres'}, 3),
		"$what no second worker comes up for postgres");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM pg_stat_activity
 WHERE backend_type = 'aion_wake worker' AND datname = 'postgres'}),
		'1',
		"$what exactly one aion_wake worker process serves postgres");

	# every worker's listener has run its LISTEN before the NOTIFY
	ok( $node->poll_query_until(
			'postgres', q{
SELECT count(*) FILTER (WHERE backend_type = 'aion_wake worker')
       = count(*) FILTER (WHERE application_name = 'aion_wake listener'
                            AND state = 'idle' AND query ~ 'LISTEN')
  FROM pg_stat_activity WHERE datname = 'postgres'}),
		"$what every worker listens");

	my $log = slurp_file($node->logfile, $log_offset);
	my @warnings;
	while ($log =~ /($dup_warning(?:\n[^\n]*DETAIL:[^\n]*)?)/g)
	{
		push @warnings, $1;
	}
	ok(scalar(grep { /postgres/i } @warnings) >= 1,
		"$what the log has a WARNING naming the duplicate")
	  or diag("WARNING lines found:\n" . join("\n", $log =~ /^.*WARNING:.*$/mg));

	# two rows of topic dup parked for an hour; one raw NOTIFY of one slot
	$node->safe_psql(
		'postgres', q{
DELETE FROM aion_wake.outbox WHERE topic = 'dup';
SELECT aion_wake.enqueue('dup' || g, '{}', 'dup') FROM generate_series(1, 2) g;
SELECT count(*) FROM aion_wake.claim('dup', 2, '1 hour');
SELECT aion_wake.park('dup' || g, '1 hour') FROM generate_series(1, 2) g;});
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 2 FROM aion_wake.parked WHERE topic = 'dup' AND state = 'confirmed'"
		),
		"$what two rows of topic dup are parked");
	$node->safe_psql('postgres', "NOTIFY aion_wake_capacity, 'dup:1'");
	my $moved = q{
SELECT count(*) FROM aion_wake.outbox
 WHERE topic = 'dup' AND parked_at IS NULL AND visible_after <= clock_timestamp()};
	ok($node->poll_query_until('postgres', "SELECT ($moved) >= 1"),
		"$what the NOTIFY re-offers a row");
	# a second worker's re-offer comes milliseconds after the first
	ok(!aw_poll_for($node, 'postgres', "SELECT ($moved) >= 2", 2),
		"$what ... and no second one comes");
	is($node->safe_psql('postgres', $moved),
		'1', "$what one raw NOTIFY of one slot re-offered exactly one row");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM aion_wake.outbox WHERE topic = 'dup' AND parked_at IS NOT NULL"),
		'1',
		"$what the other row stays parked");
}

check_one_worker("'postgres, POSTGRES':", 0);

my $offset = -s $node->logfile;
$node->append_conf('postgresql.conf', "aion_wake.database = 'postgres, postgres'\n");
$node->restart;
check_one_worker("'postgres, postgres':", $offset);

$node->stop;
done_testing();
