# Copyright (c) 2026, aion_wake authors
#
# The third look of a claim's first look without the executor
# (src/claim_direct.c, doc/design.md "The first look without the
# executor"): a look that finds its row updated since its snapshot passes
# it over and looks again under a new snapshot; the third look instead
# locks the row's latest version and takes it only if that version still
# qualifies, as the claim's statement rechecks a row updated under it.
#
# Nothing but a pause between a look's snapshot and its scan makes a claim
# look three times, so the test uses the hook aion_wake.debug_look_lock
# (superuser, 0 by default): set to K, look N waits for the advisory lock
# (K, N).  The test holds (K, 1..3) and updates the row after each look's
# snapshot, before it lets that look go on.
#
#   (a) the latest version still qualifies: the claim takes it, with the
#       latest version's columns, after three looks
#   (b) the latest version was leased by another since: the claim takes
#       nothing, leaves the other's lease alone, and holds the row's lock
#       until its transaction ends

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/perl';
use AionWake::Test;

my $node = aw_node('third_look');
my $key = 4747;

# Hold look N's lock in $locker until the claimer waits for it; then run
# $change in its own transaction, and let the look go on.
sub hold_look
{
	my ($locker, $claimer, $n, $change, $what) = @_;
	ok( aw_poll_for(
			$node, 'postgres', qq{
SELECT count(*) = 1 FROM pg_locks
 WHERE pid = $claimer->{pid} AND locktype = 'advisory' AND NOT granted
   AND classid = $key AND objid = $n}, 30),
		"$what: look $n waits after its snapshot");
	$node->safe_psql('postgres', $change);
	$locker->query_safe("SELECT pg_advisory_unlock($key, $n)");
	return;
}

sub run_claim
{
	my ($topic, $last_change, $what, $in_xact) = @_;
	my $locker = aw_session($node);
	my $claimer = aw_session($node);

	$locker->query_safe(
		"SELECT pg_advisory_lock($key, 1), pg_advisory_lock($key, 2), pg_advisory_lock($key, 3)"
	);
	$claimer->query_safe("SET aion_wake.debug_look_lock = $key");
	$claimer->query_safe('BEGIN') if $in_xact;
	aw_start($claimer, qq{
SELECT dispatch_key, attempt, lease_token IS NOT NULL
  FROM aion_wake.claim('$topic', 1, lease => '30 s')});
	my $bump = "UPDATE aion_wake.outbox SET attempt = attempt + 1 WHERE topic = '$topic'";
	hold_look($locker, $claimer, 1, $bump, $what);
	hold_look($locker, $claimer, 2, $bump, $what);
	hold_look($locker, $claimer, 3, $last_change, $what);
	my ($out, $err) = aw_finish($claimer);
	is($err, '', "$what: the claim raised nothing");
	$locker->quit;
	return ($out, $claimer);
}

# (a) three updates that keep the row claimable
$node->safe_psql('postgres', "SELECT aion_wake.enqueue('a1', '{}', 'look_a')");
my ($out, $claimer) = run_claim('look_a',
	"UPDATE aion_wake.outbox SET attempt = attempt + 1 WHERE topic = 'look_a'",
	'(a)');
is($out, 'a1|3|t',
	'(a) the third look took the row in its latest version (attempt 3)');
is( $node->safe_psql(
		'postgres', q{
SELECT attempt, lease_token IS NOT NULL, visible_after > clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = 'a1'}),
	'3|t|t',
	'(a) the lease was written on the latest version');
$claimer->quit;

# (b) two updates that keep the row claimable, then another's lease
$node->safe_psql('postgres', "SELECT aion_wake.enqueue('b1', '{}', 'look_b')");
($out, $claimer) = run_claim(
	'look_b', q{
UPDATE aion_wake.outbox
   SET lease_token = -7, leased_until = clock_timestamp() + interval '1 hour',
       visible_after = clock_timestamp() + interval '1 hour'
 WHERE topic = 'look_b'}, '(b)', 1);
is($out, '', '(b) the claim took nothing: the latest version is leased');
is( $node->safe_psql(
		'postgres', q{
SELECT lease_token, visible_after > clock_timestamp() + interval '50 minutes'
  FROM aion_wake.outbox WHERE dispatch_key = 'b1'}),
	'-7|t',
	'(b) the other lease is untouched');
my $lockable = q{
SELECT dispatch_key FROM aion_wake.outbox WHERE dispatch_key = 'b1'
   FOR UPDATE SKIP LOCKED};
is($node->safe_psql('postgres', $lockable),
	'',
	'(b) the claim holds the row it followed until its transaction ends');
$claimer->query_safe('COMMIT');
is($node->safe_psql('postgres', $lockable),
	'b1',
	'(b) and lets it go at its commit');
$claimer->quit;

$node->stop;
done_testing();
