# Copyright (c) 2026, aion_wake authors
#
# 041_handoff_credit.pl: an entry that a hand-off took and gives back --
# its transaction rolled back, or its row was locked -- takes a live pulse
# credit, as a confirming park does (G2).
#
# While a hand-off's transaction holds a parked row it took, the row has no
# confirmed entry: a pulse for the topic that comes meanwhile finds nothing
# to spend and becomes a short-lived credit (doc/design.md, How a pulse is
# spent: step 3).  When the hand-off rolls back, its entry comes back
# confirmed, without the hand-off's own slot (a slot the rollback unmade);
# it must still take that credit, or the pulse expires beside the row and
# the row sleeps out its fence.  Found by the protocol model (F13 in
# test/model/README.md).  The credit window is made a minute long so that
# the check does not depend on how fast the steps follow each other.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use AionWake::Test;

my $node = aw_node('handoffcredit', conf => "aion_wake.pulse_credit_ms = 60000\n");

# Two rows of topic hc: c1 parked for an hour (confirmed), c2 leased.
$node->safe_psql('postgres', q{
SELECT aion_wake.enqueue('c1', '{}', 'hc');
SELECT aion_wake.park('c1', '1 hour');
SELECT aion_wake.enqueue('c2', '{}', 'hc');});
ok(aw_wait_confirmed($node, 'hc', 1), 'c1 is parked and confirmed');
my $tok = $node->safe_psql('postgres',
	"SELECT lease_token FROM aion_wake.claim('hc', 1, '1 hour')");
like($tok, qr/^\d+$/, 'c2 is leased');

# The hand-off takes c1 straight from its fence, and stays open.
my $a = aw_session($node);
my $got = $a->query_safe(
	"BEGIN; SELECT dispatch_key FROM aion_wake.complete('c2', $tok, next_rows => 1)");
like($got, qr/c1/, 'the hand-off took the parked row c1');

# A pulse now finds no confirmed entry of hc: it becomes credit.
$node->safe_psql('postgres', "SELECT aion_wake.pulse('hc', 1)");
ok($node->poll_query_until('postgres',
		"SELECT credit = 1 FROM aion_wake.topics WHERE topic = 'hc'"),
	'the pulse became a credit while c1 was taken');

# The hand-off rolls back: c1 is parked again, and takes the credit.
$a->query_safe('ROLLBACK');
ok(aw_poll_for($node, 'postgres', q{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = 'c1'}, 20),
	'c1 is re-offered for the pulse that came while the hand-off held it');
is($node->safe_psql('postgres',
		"SELECT credit FROM aion_wake.topics WHERE topic = 'hc'"),
	'0', 'the credit was used');
$a->quit;

$node->stop;
done_testing();
