# Copyright (c) 2026, aion_wake authors
#
# 009_dump.pl: pg_dump and pg_restore keep every outbox and dead-letter row
# (both tables are marked with pg_extension_config_dump), their fences,
# attempts and lease tokens, and the lease token sequence, so tokens issued
# after a restore never repeat old ones.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

# the extension is made in src, which no worker serves, and restored into dst
my $node = aw_node('dump', create => 0);

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION aion_wake;
	SELECT aion_wake.enqueue('k' || g, jsonb_build_object('g', g), 'dump', (g || ' minutes')::interval)
	  FROM generate_series(1, 50) g;
	UPDATE aion_wake.outbox SET visible_after = clock_timestamp() - interval '1 s'
	 WHERE dispatch_key IN ('k1', 'k2', 'k3');
	SELECT count(*) FROM aion_wake.claim('dump', 3, '1 hour');
	SELECT aion_wake.park('k1', '2 hours');
	SELECT aion_wake.fail('k2', 'boom', '1 hour');
	SELECT aion_wake.dead_letter('k3', 'poison');
});

my $snapshot = q{
	SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s', dispatch_key, topic, payload,
	       attempt, visible_after, enqueued_at, last_error, lease_token, parked_at), E'\n'
	       ORDER BY dispatch_key) FROM aion_wake.outbox
	UNION ALL
	SELECT string_agg(format('%s|%s|%s', dispatch_key, reason, dead_at), E'\n')
	  FROM aion_wake.dead_letters
};
my $before = $node->safe_psql('src', $snapshot);
my $max_token = $node->safe_psql('src', 'SELECT max(lease_token) FROM aion_wake.outbox');

my $dump = $node->basedir . '/src.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dump ], 'pg_dump succeeds');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
command_ok([ 'pg_restore', '-d', $node->connstr('dst'), $dump ], 'pg_restore succeeds');

is($node->safe_psql('dst', $snapshot), $before, 'every outbox and dead-letter row survives the round trip');
is($node->safe_psql('dst', 'SELECT count(*) FROM aion_wake.outbox'), '49', '49 rows in the outbox');

# the sequence came along: a new claim gets a token above every old one
$node->safe_psql('dst', q{UPDATE aion_wake.outbox SET visible_after = clock_timestamp() - interval '1 s' WHERE dispatch_key = 'k10'});
my $token = $node->safe_psql('dst', q{SELECT lease_token FROM aion_wake.claim('dump', 1)});
cmp_ok($token, '>', $max_token, 'lease tokens continue after the restore');

$node->stop;
done_testing();
