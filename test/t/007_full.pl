# Copyright (c) 2026, aion_wake authors
#
# 007_full.pl: a full parked set and a full topic table (G6, G1).
#
# The set and the topic table have fixed sizes.  When one is full a park
# still writes its durable fence and returns true: the row falls back to
# its fence, set_full rises, and a WARNING reaches both the client and the
# server log; the caller's transaction never fails.  This test runs with
# the smallest sizes (16 rows, 4 topics) and holds that:
#   (a) 20 parks into a set of 16: all return true, all 20 fences and
#       parked_at are written, set_full rises by 4, the WARNING is seen by
#       the client and in the log, no ERROR;
#   (b) a pulse of 20 re-offers exactly the 16 rows in the set; the 4 that
#       fell back stay behind their fences (nothing lost);
#   (c) with 4 topics pinned by entries, pulses on 5 new topics are dropped
#       and counted, without error; a park on a new topic warns, counts and
#       still writes its fence;
#   (d) park_pending on a full set returns false with a WARNING.
# aion_wake.pulse_credit_ms is 0 so that slots left over by a pulse never
# keep a topic in use.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

# aw_node waits for the worker to rebuild the set at the commit of CREATE
# EXTENSION, so that the parks below are not read again by the rebuild
my $node = aw_node('full', conf => q{
aion_wake.max_parked_rows = 16
aion_wake.max_topics = 4
aion_wake.pulse_credit_ms = 0
});
pass('the worker runs and has rebuilt the set');
is(aw_status($node, 'capacity'), 16, 'the set holds 16 rows');

# psql script: enqueue, claim and park one row, each in a transaction of its
# own; prints "park:<result>"
sub park_script
{
	my ($key, $topic) = @_;
	return qq{
SELECT aion_wake.enqueue('$key', '{}', '$topic') \\gset
SELECT lease_token AS tok FROM aion_wake.claim('$topic', 1, '30s') \\gset
SELECT 'park:' || aion_wake.park('$key', '1 hour', :tok);
};
}

sub run_psql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $ret = $node->psql(
		'postgres', $sql,
		stdout => \$out,
		stderr => \$err,
		on_error_stop => 1);
	return ($ret, $out, $err);
}

# --- (a) 20 parks into a set of 16 -----------------------------------------

my @keys = map { sprintf('p%02d', $_) } 1 .. 20;
my $set_full0 = aw_status($node, 'set_full');
my $log_offset = -s $node->logfile;
my ($ret, $out, $err) = run_psql(join('', map { park_script($_, 'full') } @keys));
is($ret, 0, '(a) the 20 parks ran without error');
is(scalar(() = $out =~ /^park:true$/mg), 20, '(a) every park returned true');
unlike($err, qr/ERROR/, '(a) no ERROR reached the client');
is(scalar(() = $err =~ /WARNING:  aion_wake parked set is full/g),
	4, '(a) the client got a WARNING for each of the 4 parks that did not fit');
like($err, qr/Row "p17" waits until its fence/, '(a) ... naming the row');
is(aw_status($node, 'set_full') - $set_full0, 4, '(a) set_full rose by 4');
ok($node->log_contains(qr/WARNING:  aion_wake parked set is full/, $log_offset),
	'(a) the WARNING is in the server log');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox
 WHERE topic = 'full' AND parked_at IS NOT NULL
   AND visible_after > clock_timestamp() + interval '50 minutes'}),
	20,
	'(a) the fence and parked_at are written for all 20 rows');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(dispatch_key, ',' ORDER BY dispatch_key) FROM aion_wake.parked
 WHERE state = 'confirmed'}),
	join(',', @keys[0 .. 15]),
	'(a) the set holds the first 16 parks, confirmed');

# --- (b) a pulse of 20 re-offers the 16 in the set ---------------------------

my $reoffered0 = aw_status($node, 'rows_reoffered');
$node->safe_psql('postgres', "SELECT aion_wake.pulse('full', 20)");
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 16 FROM aion_wake.outbox
 WHERE topic = 'full' AND parked_at IS NULL
   AND visible_after <= clock_timestamp()}),
	'(b) a pulse of 20 re-offers the 16 rows in the set');
ok(aw_wait_status($node, 'parked_pending + parked_confirmed = 0'),
	'(b) the set is empty again');
is(aw_status($node, 'rows_reoffered') - $reoffered0, 16,
	'(b) rows_reoffered rose by 16');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(dispatch_key, ',' ORDER BY dispatch_key) FROM aion_wake.outbox
 WHERE topic = 'full' AND visible_after <= clock_timestamp()}),
	join(',', @keys[0 .. 15]),
	'(b) the re-offered rows are the 16 that were in the set');
is(aw_still_parked($node, 'full'), join(',', @keys[16 .. 19]),
	'(b) the 4 that did not fit stay behind their fences');
is($node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox'),
	20, '(b) nothing is lost');

# --- (c) a full topic table ----------------------------------------------------

# pin four topics with one entry each: p17 parked again (there is room now)
# in 'full', and a row in each of tp2, tp3, tp4
($ret, $out, $err) = run_psql(
	"SELECT 'park:' || aion_wake.park('p17', '1 hour');\n"
	  . join('', map { park_script("k_$_", $_) } qw(tp2 tp3 tp4)));
is($ret, 0, '(c) four parks in four topics');
is(scalar(() = $out =~ /^park:true$/mg), 4, '(c) ... all return true');
is($err, '', '(c) ... without warning: four topics fit');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(topic, ',' ORDER BY topic) FROM aion_wake.parked"),
	'full,tp2,tp3,tp4',
	'(c) four topics are pinned by confirmed entries');

$set_full0 = aw_status($node, 'set_full');
my $pulses0 = aw_status($node, 'pulses_received');
($ret, $out, $err) = run_psql(
	"SELECT aion_wake.pulse('n' || i, 3) FROM generate_series(1, 5) i;");
is($ret, 0, '(c) pulses on 5 new topics in a full topic table do not fail');
unlike($err, qr/ERROR/, '(c) ... no ERROR');
is(aw_status($node, 'pulses_received') - $pulses0, 5,
	'(c) the 5 pulses were received');
is(aw_status($node, 'set_full') - $set_full0, 5,
	'(c) ... and each one counted in set_full');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(topic, ',' ORDER BY topic) FROM aion_wake.parked"),
	'full,tp2,tp3,tp4',
	'(c) the pinned topics keep their entries');

$set_full0 = aw_status($node, 'set_full');
$log_offset = -s $node->logfile;
($ret, $out, $err) = run_psql(park_script('k_tp5', 'tp5'));
is($ret, 0, '(c) a park on a fifth topic does not fail');
like($out, qr/^park:true$/m, '(c) ... and returns true');
like(
	$err,
	qr/WARNING:  aion_wake topic table is full/,
	'(c) ... with a WARNING to the client');
unlike($err, qr/ERROR/, '(c) ... no ERROR');
ok($node->log_contains(qr/WARNING:  aion_wake topic table is full/, $log_offset),
	'(c) the WARNING is in the server log');
is(aw_status($node, 'set_full') - $set_full0, 1, '(c) set_full rose by 1');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM aion_wake.outbox
 WHERE dispatch_key = 'k_tp5' AND parked_at IS NOT NULL
   AND visible_after > clock_timestamp() + interval '50 minutes'}),
	1,
	'(c) the row still has its fence');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM aion_wake.parked WHERE dispatch_key = 'k_tp5'"),
	0, '(c) ... but no entry');

# --- (d) park_pending on a full set ---------------------------------------------

my $used = aw_status($node, 'parked_pending + parked_confirmed');
is($used, 4, '(d) four entries in the set');
$set_full0 = aw_status($node, 'set_full');
# one session: pending entries are abandoned when their backend exits
($ret, $out, $err) = run_psql(
	q{SELECT aion_wake.park_pending('pp' || i, 0, 'full') FROM generate_series(1, 13) i;
SELECT 'pending:' || parked_pending FROM aion_wake.status;});
is($ret, 0, '(d) park_pending on a full set does not fail');
is($out, join("\n", ('t') x 12, 'f', 'pending:12'),
	'(d) 12 park_pending fill the set, the 13th returns false');
like(
	$err,
	qr/WARNING:  aion_wake parked set is full.*Row "pp13" was not parked/s,
	'(d) ... with a WARNING');
is(aw_status($node, 'set_full') - $set_full0, 1, '(d) set_full rose by 1');
ok(aw_wait_status($node, 'parked_pending = 0'),
	'(d) the pending entries went with their session');

$node->stop;
done_testing();
