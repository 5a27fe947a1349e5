# Copyright (c) 2026, aion_wake authors
#
# 013_no_lock_asleep.pl: a claimer asleep in claim(wait) holds no row lock.
#
# FOR UPDATE SKIP LOCKED in READ COMMITTED follows a row updated after the
# statement's snapshot to its newest version and locks it, and keeps the
# lock when that version no longer qualifies (another claimer took the row
# meanwhile).  A blocking claim that then went to sleep held that lock for
# the rest of its wait, and the complete() of the dispatcher that did get
# the row waited for it: 2 s stalls in the headline benchmark.  Each probe
# of a waiting claim now runs in a subtransaction that is rolled back when
# it finds nothing.
#
# The race needs many claimers on few rows: twelve pgbench clients claim
# one row of a topic holding three (40% of them waiting up to 2 s), then
# complete it and enqueue another.  Meanwhile the test samples, every
# 100 ms, for a backend waiting for a lock held by a backend asleep in
# claim(wait) (wait event Extension), seen twice 0.3 s apart in the same
# claim() call.  Before the fix this found about 70 such waits in 15 s.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use AionWake::Test;

my $node = aw_node('asleep', conf => "max_connections = 40\n");
$node->safe_psql('postgres', q{
	SELECT aion_wake.enqueue(g::text, '{}', 'h') FROM generate_series(1, 3) g;
	CREATE FUNCTION stray_locks() RETURNS SETOF text LANGUAGE plpgsql AS $$
	DECLARE
		first text[];
	BEGIN
		PERFORM pg_stat_clear_snapshot();
		SELECT array_agg(a.pid || '/' || s.pid || '/' || s.query_start) INTO first
		  FROM pg_stat_activity a, unnest(pg_blocking_pids(a.pid)) AS b(pid), pg_stat_activity s
		 WHERE a.wait_event_type = 'Lock' AND s.pid = b.pid AND s.wait_event_type = 'Extension';
		IF first IS NULL THEN
			RETURN;
		END IF;
		PERFORM pg_sleep(0.3);
		PERFORM pg_stat_clear_snapshot();
		RETURN QUERY
			SELECT 'pid ' || a.pid || ' waited for pid ' || s.pid || ', asleep in: ' || s.query
			  FROM pg_stat_activity a, unnest(pg_blocking_pids(a.pid)) AS b(pid), pg_stat_activity s
			 WHERE a.wait_event_type = 'Lock' AND s.pid = b.pid AND s.wait_event_type = 'Extension'
			   AND (a.pid || '/' || s.pid || '/' || s.query_start) = ANY (first);
	END
	$$;
});
like(aw_worker_pid($node), qr/^\d+$/, 'the worker runs');

my $script = "$PostgreSQL::Test::Utils::tmp_check/asleep.sql";
PostgreSQL::Test::Utils::append_to_file($script, q{
\set r random(1, 100)
\set w 0
\if :r <= 40
\set w 2
\endif
WITH c AS (SELECT * FROM aion_wake.claim('h', 1, '30 s', make_interval(secs => :w)))
SELECT (SELECT count(*) FROM c) AS n, coalesce((SELECT dispatch_key FROM c), '0')::bigint AS k,
       coalesce((SELECT lease_token FROM c), 0) AS tok \gset
\if :n > 0
SELECT aion_wake.complete(:k::text, :tok), aion_wake.enqueue((:k + 1000000)::text, '{}', 'h');
\endif
});

my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '12', '-j', '4', '-T', '12',
		'-h', $node->host, '-p', $node->port, '-f', $script, 'postgres'
	],
	'>', \$out, '2>', \$err);

my @stray;
my $asleep = 0;
while ($load->pumpable)
{
	$load->pump_nb;
	push @stray, grep { $_ ne '' } split /\n/,
	  $node->safe_psql('postgres', 'SELECT * FROM stray_locks()');
	$asleep++
	  if $node->safe_psql('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%claim(%'"
	  ) eq 't';
	sleep 0.1;
}
$load->finish;
is($?, 0, 'the load ran without errors') or diag($err);
my ($done) = $out =~ /number of transactions actually processed: (\d+)/;
cmp_ok($done // 0, '>', 200, "the load did work ($done claims)");
cmp_ok($asleep, '>', 5, "claimers were asleep in claim(wait) during the load ($asleep samples)");
is(scalar(@stray), 0, 'no backend waited for a row lock held by a claimer asleep in claim(wait)')
  or diag(join("\n", @stray[0 .. ($#stray < 9 ? $#stray : 9)]));

# every row is still there: each claimed row was completed and replaced
is($node->safe_psql('postgres', "SELECT count(*) FROM aion_wake.outbox WHERE topic = 'h'"),
	'3', 'three rows in the topic, as at the start');

$node->stop;
done_testing();
