# Copyright (c) 2026, aion_wake authors
#
# 045_rates_attacks.pl: schedules that tried to break G10 (never over the
# rate) and the pause, as a hostile application and a hostile operator
# would.  Each part names what it checks; those marked "broke" failed on
# the code of the commit that added rates.
#
#   (a) broke: a claimer blocked only because another claim held the
#       window's last start as a reservation is woken when that start
#       leaves the window, after the reservation became a logged start
#       (the claim's transaction still open: no commit wakes the worker);
#   (l) broke: in a database no worker serves, a claim in the transaction
#       that called pause() or set_rate() loaded the uncommitted pause and
#       rate into shared memory, where they stayed after its rollback;
#       and a claim under REPEATABLE READ whose snapshot still held a
#       pause ended since by resume() took nothing;
#   (m) held: set_rate() under REPEATABLE READ racing another fails with
#       40001 (to retry), and the committed rate holds;
#   (b) broke: after shared memory is lost, set_rate(t, NULL) and
#       set_rate(t, n, per) in one transaction (in a database no worker
#       serves, before the rate is loaded) restore the window as full, as
#       the last call alone does;
#   (c) broke: a rate's per, loaded after a restart, is the per set_rate()
#       enforced (an interval with negative years counted the same way);
#   (d) held: a claim under REPEATABLE READ and a rate loaded after a
#       restart in a served database: a full window;
#   (e) broke: pg_restore --data-only into a served database whose worker
#       has loaded its (empty) settings: the restored rate, pause and limit
#       hold;
#   (f) held: the worker terminated while a claimer is blocked by a rate:
#       the new worker wakes it when the window admits it;
#   (h) broke: three claimers blocked by a rate of one start per 2 s
#       are woken one per 2 s, not one and then the others at their
#       deadline;
#   (i) held: a pulse spent by a claimer blocked on a rated topic, whose
#       rows are all parked: its claiming round takes no more than the
#       window's starts;
#   (j) broke: a claim that waited for its topic's lock after reading
#       its clock was admitted when the window had room but stamped its
#       rows' lease start (the start as the tests read it) with the
#       earlier clock, inside the window of the start before it;
#   (n) held: after a promotion, the rate is loaded with a full window;
#   (g) on a small cluster (aion_wake.max_rates = 2, max_topics = 4):
#       held: the third rate is refused with 53400 and a removal gives its
#       log back; broke: a topic whose claims a rate cut short, in a
#       database no worker serves, stayed in the topic table for ever after
#       its rate was removed, so the table filled up;
#   (k) broke: set_rate() and pause() in the transaction that dropped the
#       extension applied after the drop had forgotten the database's
#       rates and pauses: the extension made again had a rate and a pause
#       that no table showed.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(max);
use Time::HiRes qw(usleep time);
use AionWake::Test;

my $prompt = aw_prompt(0.5);

my $node = aw_node(
	'rattack',
	databases => 'postgres, dst',
	init => { allows_streaming => 1 },    # (j): a synchronous commit
	conf => q{
statement_timeout = '90s'
});
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION aion_wake');
$node->safe_psql('postgres', 'CREATE DATABASE dst');

sub sql
{
	return $node->safe_psql($_[1] // 'postgres', $_[0]);
}

sub enqueue
{
	my ($t, $n, $db) = @_;
	sql("SELECT count(aion_wake.enqueue('$t' || g, '{}', '$t')) FROM generate_series(1, $n) g",
		$db);
	return;
}

sub claimed
{
	my ($t, $n, $db) = @_;
	return sql("SELECT count(*) FROM aion_wake.claim('$t', $n, '1 hour')", $db);
}

# ---------------------------------------------------------------------
# (a) a reservation fills the window, then becomes a start
# ---------------------------------------------------------------------
# A trigger holds claim A between its reservation and its statement's end
# (a hostile application may add one; a slow statement does the same).
# In the served database, and in one no worker serves.
sub gate
{
	my ($db) = @_;
	sql(q{
CREATE FUNCTION public.hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.topic = 'gate' THEN
		PERFORM pg_advisory_xact_lock_shared(4242);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER hold BEFORE UPDATE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION public.hold();
SELECT aion_wake.set_rate('gate', 1, '2 s');
}, $db);
	enqueue('gate', 3, $db);
	my $holder = aw_session($node, $db);
	$holder->query_safe('SELECT pg_advisory_lock(4242)');
	my $a = aw_session($node, $db);
	$a->query_safe('BEGIN');
	aw_start($a, q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('gate', 1, '1 hour')});
	ok( $node->poll_query_until($db, qq{
SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $a->{pid}}),
		"(a) $db: claim A holds its reservation, stopped by the trigger");
	my $b = aw_waiter($node, $db);
	aw_start($b, q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('gate', 1, '1 hour', '12 s')});
	ok( $node->poll_query_until($db,
			"SELECT waiters = 1 FROM aion_wake.topics WHERE topic = 'gate'"),
		"(a) $db: claimer B blocks: the window is full of A's reservation");
	# B may start at A + per, or at A's end if that comes later (a slow
	# server may take longer than per to get here)
	my ($unlocked) = split /\n/, sql('SELECT extract(epoch FROM clock_timestamp())', $db);
	$holder->query_safe('SELECT pg_advisory_unlock(4242)');
	my ($a_out) = aw_finish($a);
	$a_out =~ s/\s+//g;
	my ($b_out) = aw_finish($b);
	$b_out =~ s/\s+//g;
	ok($a_out ne '' && $b_out ne '', "(a) $db: both claims took a row");
	cmp_ok($b_out - $a_out, '>=', 2 - 0.01, "(a) $db: B started no earlier than A + per");
	cmp_ok($b_out - max($a_out + 2, $unlocked), '<=', $prompt,
		"(a) $db: B was woken when A's start left the window, not at its deadline");
	$a->query_safe('COMMIT');
	sql('DROP TRIGGER hold ON aion_wake.outbox', $db);
	$_->quit for ($holder, $a, $b);
	return;
}
gate('postgres');
gate('other');

# ---------------------------------------------------------------------
# (l) a database no worker serves loads a topic's settings at a claim
# ---------------------------------------------------------------------
# A claim in the transaction that called pause() or set_rate() found the
# table's (uncommitted) row missing from shared memory and loaded it:
# the transaction rolled back, and the pause and the rate stayed.
enqueue($_, 3, 'other') for qw(rbp rbr rrp);
sql(q{
BEGIN;
SELECT aion_wake.pause('rbp', clock_timestamp() + '1 hour');
SELECT aion_wake.set_rate('rbr', 1, '1 hour');
SELECT count(*) FROM aion_wake.claim(ARRAY['rbp', 'rbr'], 2);
ROLLBACK;}, 'other');
is( sql(q{SELECT topic || ':' || count(*) FROM aion_wake.claim(ARRAY['rbp', 'rbr'], 9)
           GROUP BY topic ORDER BY 1}, 'other'),
	"rbp:3\nrbr:3", '(l) a pause and a rate rolled back hold nothing back');
# a claim under REPEATABLE READ whose snapshot still has a pause that a
# resume() has ended since
sql("SELECT aion_wake.pause('rrp', clock_timestamp() + '1 hour')", 'other');
my $rr = aw_session($node, 'other');
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$rr->query_safe('SELECT count(*) FROM aion_wake.pauses');
sql("SELECT aion_wake.resume('rrp')", 'other');
my ($rr_out, $rr_err) = $rr->query("SELECT count(*) FROM aion_wake.claim('rrp', 3)");
$rr->query('COMMIT');
is($rr_out, '3', '(l) a claim under REPEATABLE READ takes the rows of a topic resumed since its snapshot')
  or diag($rr_err);
$rr->quit;

# ---------------------------------------------------------------------
# (m) set_rate() under REPEATABLE READ racing another set_rate()
# ---------------------------------------------------------------------
# The REPEATABLE READ one's snapshot is older than the other's commit (had
# they overlapped, it would have waited for the other's writer lock), so
# its upsert fails as any REPEATABLE READ update of a row changed since
# does (40001, to retry), and the committed rate holds.
aw_create_sqlstate_of($node);
my $rr1 = aw_session($node);
$rr1->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$rr1->query_safe('SELECT count(*) FROM aion_wake.rates');
sql("SELECT aion_wake.set_rate('race', 2, '1 hour')");
is( $rr1->query_safe(
		"SELECT sqlstate_of(\$\$SELECT aion_wake.set_rate('race', 5, '1 hour')\$\$)"),
	'40001', '(m) the REPEATABLE READ set_rate fails with 40001');
$rr1->query('COMMIT');
$rr1->quit;
is(sql("SELECT max_starts FROM aion_wake.topics WHERE topic = 'race'"),
	'2', '(m) the committed rate holds, in the table and in the set');
sql("SELECT aion_wake.set_rate('race', NULL)");

# ---------------------------------------------------------------------
# (b), (c), (d): shared memory lost
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_rate('nv', 2, '1 hour')", 'other');
enqueue('nv', 6, 'other');
is(claimed('nv', 5, 'other'), '2', '(b) two starts before the restart');
sql("SELECT aion_wake.set_rate('neg', 1, '-1 year 360 days 1 hour')", 'other');
is(sql("SELECT per FROM aion_wake.topics WHERE topic = 'neg'", 'other'),
	'01:00:00', '(c) set_rate enforces a per of an hour');
enqueue('neg', 6, 'other');
is(claimed('neg', 5, 'other'), '1', '(c) one start before the restart');
sql("SELECT aion_wake.set_rate('sv', 2, '1 hour')");
enqueue('sv', 6);
is(claimed('sv', 5), '2', '(d) two starts before the restart');

$node->stop('fast');
$node->start;

sql(q{
BEGIN;
SELECT aion_wake.set_rate('nv', NULL);
SELECT aion_wake.set_rate('nv', 2, '1 hour');
COMMIT;}, 'other');
is(claimed('nv', 5, 'other'), '0',
	'(b) NULL then a rate in one transaction: the window is restored as full');
my $neg = 0;
$neg += claimed('neg', 5, 'other') for 1 .. 3;
is($neg, 0, '(c) no start within the hour after the restart');
is(sql("SELECT per FROM aion_wake.topics WHERE topic = 'neg'", 'other'),
	'01:00:00', '(c) the per loaded after the restart is the per set');

ok( $node->poll_query_until('postgres',
		"SELECT max_starts = 2 FROM aion_wake.topics WHERE topic = 'sv'"),
	'(d) the worker loaded the rate');
is( sql(q{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM aion_wake.outbox WHERE topic = 'sv';
SELECT count(*) FROM aion_wake.claim('sv', 5, '1 hour');
COMMIT;}),
	"6\n0", '(d) a claim under REPEATABLE READ: the window is full');

# ---------------------------------------------------------------------
# (e) pg_restore --data-only into a served database
# ---------------------------------------------------------------------
sql(q{
SELECT aion_wake.set_rate('rs', 1, '1 hour'),
       aion_wake.pause('ps', clock_timestamp() + '1 hour'),
       aion_wake.set_limit('ls', 1);}, 'other');
my $dump = $node->basedir . '/other.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-d', $node->connstr('other'), '-f', $dump ],
	'(e) pg_dump of a database with a rate, a pause and a limit');
aw_create_extension($node, 'dst');
$node->command_ok(
	[ 'pg_restore', '--data-only', '-d', $node->connstr('dst'), $dump ],
	'(e) pg_restore --data-only into a served database');
is( sql(q{SELECT string_agg(topic, ',' ORDER BY topic) FROM
  (SELECT topic FROM aion_wake.rates UNION ALL SELECT topic FROM aion_wake.pauses
   UNION ALL SELECT topic FROM aion_wake.limits) s
 WHERE topic IN ('rs', 'ps', 'ls')}, 'dst'),
	'ls,ps,rs', '(e) the settings are restored');
# two claims of the restored topics in 'dst': the rows each topic gave
sub restored_took
{
	my %took;
	for (1 .. 2)
	{
		my $out = sql(q{
SELECT topic, count(*) FROM aion_wake.claim(ARRAY['rs', 'ps', 'ls'], 9, '1 hour')
 GROUP BY 1}, 'dst');
		for (split /\n/, $out)
		{
			my ($t, $n) = split /\|/;
			$took{$t} += $n;
		}
	}
	return %took;
}

enqueue($_, 3, 'dst') for qw(rs ps ls);
my %took = restored_took();
cmp_ok($took{rs} // 0, '<=', 1, '(e) the restored rate holds');
is($took{ps} // 0, 0, '(e) the restored pause holds');
cmp_ok($took{ls} // 0, '<=', 1, '(e) the restored limit holds');

# a whole pg_restore into the served database, made anew: the worker
# loads at CREATE EXTENSION's commit, the settings' COPY comes after
sql('DROP EXTENSION aion_wake', 'dst');
sql('DROP SCHEMA aion_wake CASCADE', 'dst');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('dst'), $dump ],
	'(e) a whole pg_restore into the served database');
enqueue($_, 3, 'dst') for qw(rs ps ls);
%took = restored_took();
cmp_ok($took{rs} // 0, '<=', 1, '(e) whole restore: the rate holds');
is($took{ps} // 0, 0, '(e) whole restore: the pause holds');
cmp_ok($took{ls} // 0, '<=', 1, '(e) whole restore: the limit holds');

# ---------------------------------------------------------------------
# (f) the worker terminated while a claimer is blocked by the rate
# ---------------------------------------------------------------------
sql("SELECT aion_wake.set_rate('wk', 1, '3 s')");
enqueue('wk', 3);
my ($first) = split /\n/, sql(q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('wk', 1, '1 hour')});
my $w = aw_waiter($node);
aw_start($w, q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('wk', 1, '1 hour', '20 s')});
ok( $node->poll_query_until('postgres',
		"SELECT waiters = 1 FROM aion_wake.topics WHERE topic = 'wk'"),
	'(f) a claimer blocks on the rate');
my $old = aw_worker_pid($node);
sql("SELECT pg_terminate_backend($old)");
my $new = aw_wait_new_worker($node, $old);
ok(defined $new, '(f) a new worker runs');
# it wakes the claimer when the window admits it, or when it has started
# and looked, if that is later (a slow server)
my ($new_start) = split /\n/, sql(
	"SELECT extract(epoch FROM backend_start) FROM pg_stat_activity WHERE pid = "
	  . ($new // 0));
$new_start = 0 if !defined $new_start || $new_start eq '';
my ($w_out) = aw_finish($w);
$w_out =~ s/\s+//g;
ok( $w_out ne ''
	  && $w_out - $first >= 3 - 0.01
	  && $w_out - max($first + 3, $new_start) <= 2,
	'(f) the new worker woke the claimer when the window admitted it')
  or diag("started " . ($w_out eq '' ? 'nothing' : $w_out - $first) . " s after the first");
$w->quit;

# ---------------------------------------------------------------------
# (h) several claimers blocked by the rate: each is woken in its turn
# ---------------------------------------------------------------------
# The worker's look at the window's end wakes one claimer per free start
# and takes the topic's mark off; the claimer woken fills the window
# without being cut short, so the next end must be timed all the same.
sql("SELECT aion_wake.set_rate('turn', 1, '2 s')");
enqueue('turn', 4);
my ($t0) = split /\n/, sql(q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('turn', 1, '1 hour')});
my @turn = map { aw_waiter($node) } 1 .. 3;
for my $i (0 .. 2)
{
	aw_start($turn[$i], q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('turn', 1, '1 hour', '10 s')});
	# blocked, or (on a slow server) already woken in its turn and leased
	ok( $node->poll_query_until('postgres', qq{
SELECT waiters + (SELECT count(*) FROM aion_wake.outbox
                   WHERE topic = 'turn' AND leased_until IS NOT NULL) - 1 = @{[$i + 1]}
  FROM aion_wake.topics WHERE topic = 'turn'}),
		"(h) claimer $i blocks on the rate");
}
my ($all_blocked) = split /\n/, sql('SELECT extract(epoch FROM clock_timestamp())');
my @took;
for my $h (@turn)
{
	my ($out) = aw_finish($h);
	$out =~ s/\s+//g;
	push @took, $out if $out ne '';
	$h->quit;
}
@took = sort { $a <=> $b } @took;
is(scalar(@took), 3, '(h) each of the three blocked claimers took a row');
SKIP:
{
	skip 'the server took longer than per to block the three claimers', 1
	  if $all_blocked > $t0 + 2;
	ok( @took == 3 && $took[2] - $t0 <= 6 + 2 * $prompt,
		'(h) the third started within its turn (6 s after the first start), not at its deadline')
	  or diag('starts after the first: ' . join(', ', map { sprintf('%.2f', $_ - $t0) } @took));
}
my $gaps_ok = 1;
my $prev = $t0;
for (@took)
{
	$gaps_ok = 0 if $_ - $prev < 2 - 0.01;
	$prev = $_;
}
ok($gaps_ok, '(h) no two starts less than per apart');

# ---------------------------------------------------------------------
# (i) a pulse spent by a claimer blocked on a rated topic
# ---------------------------------------------------------------------
# The rows are parked: the blocked claimer, handed the pulse, claims them
# straight from their fences (a claiming round); every one is a start.
sql("SELECT aion_wake.set_rate('pz', 2, '1 hour')");
aw_park_rows($node, 'pz', qw(pz1 pz2 pz3));
my $pz = aw_waiter($node);
aw_start($pz, q{
SELECT dispatch_key FROM aion_wake.claim('pz', 5, '1 hour', '10 s')});
ok( $node->poll_query_until('postgres',
		"SELECT waiters = 1 FROM aion_wake.topics WHERE topic = 'pz'"),
	'(i) a claimer blocks: every row of the topic is parked');
sql("SELECT aion_wake.pulse('pz', 3)");
my ($pz_out) = aw_finish($pz);
my @pz_rows = grep { $_ ne '' } split /\n/, $pz_out;
is(scalar(@pz_rows), 2, '(i) the claimer spent the pulse on two parked rows: the rate\'s two starts');
is(claimed('pz', 5), '0', '(i) the window is full: the row re-offered is not claimed');
is(sql("SELECT window_starts FROM aion_wake.topics WHERE topic = 'pz'"), '2',
	'(i) two starts in the window');
$pz->quit;

# ---------------------------------------------------------------------
# (j) a claim that waits for its topic's lock stamps its start after it
# ---------------------------------------------------------------------
# A row's start, as the tests read it, is its lease's start
# (leased_until - lease).  A claim read its clock before it took its
# topic's lock and reserved its starts: held at that lock (here by a
# set_limit() whose commit waits for a synchronous standby that never
# comes), it was admitted once the window had room, but stamped with the
# earlier clock, inside the window of the start before it.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET synchronous_standby_names = 'nobody';
ALTER SYSTEM SET synchronous_commit = 'local';
SELECT pg_reload_conf();});
ok( $node->poll_query_until('postgres',
		"SELECT current_setting('synchronous_standby_names') = 'nobody' "
		  . "AND current_setting('synchronous_commit') = 'local'"),
	'(j) only a session that asks for it waits for a synchronous standby');
# whether a commit waits for a standby is a flag in shared memory that the
# checkpointer sets when it takes in the reload; it handles a pending
# reload before a checkpoint it is asked for
$node->safe_psql('postgres', 'CHECKPOINT');
sql("SELECT aion_wake.set_rate('st', 1, '2 s')");
enqueue('st', 3);
my ($n1) = split /\n/, sql(q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('st', 1, '1 hour')});
my $syncer = aw_session($node);
$syncer->query_safe('SET synchronous_commit = on');
aw_start($syncer, "SELECT aion_wake.set_limit('st', 100)");
ok( aw_poll_for($node, 'postgres', qq{
SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $syncer->{pid}}, 30),
	'(j) set_limit\'s commit waits, its topic lock held')
  or BAIL_OUT('(j) a commit did not wait for the synchronous standby');
my $c2 = aw_session($node);
aw_start($c2, q{
SELECT extract(epoch FROM leased_until - interval '1 hour')
  FROM aion_wake.claim('st', 1, '1 hour')});
ok( $node->poll_query_until('postgres', qq{
SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $c2->{pid}}),
	'(j) a claim waits for the topic lock');
ok( $node->poll_query_until('postgres',
		"SELECT extract(epoch FROM clock_timestamp()) >= $n1 + 2.2"),
	'(j) the first start has left the window');
sql("SELECT pg_cancel_backend($syncer->{pid})");
aw_finish($syncer);
my ($n2) = aw_finish($c2);
$n2 =~ s/\s+//g;
ok($n2 ne '', '(j) the claim that waited took a row');
cmp_ok($n2 - $n1, '>=', 2 - 0.01,
	'(j) its start is stamped no earlier than the first start + per');
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET synchronous_standby_names;
ALTER SYSTEM RESET synchronous_commit;
SELECT pg_reload_conf();});
$_->quit for ($syncer, $c2);

# ---------------------------------------------------------------------
# (n) promotion: the window is restored as full
# ---------------------------------------------------------------------
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('rattack_standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
sql("SELECT aion_wake.set_rate('pr', 2, '1 hour')");
enqueue('pr', 6);
is(claimed('pr', 5), '2', '(n) two starts on the primary');
$node->wait_for_catchup($standby);
$node->stop('immediate');
$standby->promote;
ok( $standby->poll_query_until('postgres',
		"SELECT max_starts = 2 FROM aion_wake.topics WHERE topic = 'pr'"),
	'(n) the promoted standby\'s worker loaded the rate');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM aion_wake.claim('pr', 5, '1 hour')"),
	'0', '(n) no start within the hour after the promotion');
$standby->stop;

# ---------------------------------------------------------------------
# (g) a small cluster: the pool of rates and the topic table
# ---------------------------------------------------------------------
my $tiny = aw_node(
	'rtiny', conf => q{
aion_wake.max_rates = 2
aion_wake.max_topics = 4
});
$tiny->safe_psql('postgres', 'CREATE DATABASE other');
$tiny->safe_psql('other', 'CREATE EXTENSION aion_wake');
aw_create_sqlstate_of($tiny);
aw_create_sqlstate_of($tiny, 'other');
$tiny->safe_psql('postgres',
	"SELECT aion_wake.set_rate('t1', 1, '1 hour'), aion_wake.set_rate('t2', 1, '1 hour')");
is( $tiny->safe_psql('postgres',
		"SELECT sqlstate_of(\$\$SELECT aion_wake.set_rate('t3', 1, '1 hour')\$\$)"),
	'53400', '(g) a third rate is refused with 53400');
$tiny->safe_psql('postgres', "SELECT aion_wake.set_rate('t1', NULL)");
is( $tiny->safe_psql('postgres',
		"SELECT sqlstate_of(\$\$SELECT aion_wake.set_rate('t3', 1, '1 hour')\$\$)"),
	'ok', '(g) a removal gives its log back');
$tiny->safe_psql('postgres',
	"SELECT aion_wake.set_rate('t2', NULL), aion_wake.set_rate('t3', NULL)");
# a rate cuts a claim short in a database no worker serves, then goes
$tiny->safe_psql('other', q{
SELECT aion_wake.set_rate('lk', 1, '1 hour');
SELECT count(aion_wake.enqueue('lk' || g, '{}', 'lk')) FROM generate_series(1, 3) g;
SELECT count(*) FROM aion_wake.claim('lk', 3);
SELECT aion_wake.set_rate('lk', NULL);});
is( $tiny->safe_psql('other', q{
BEGIN;
SELECT aion_wake.set_limit('f1', 1), aion_wake.set_limit('f2', 1),
       aion_wake.set_limit('f3', 1);
SELECT sqlstate_of($$SELECT aion_wake.set_limit('f4', 1)$$);
ROLLBACK;}),
	"||\nok", '(g) the whole topic table is usable once every rate is gone');
# set_rate() and pause() in the transaction that drops the extension: the
# drop forgets the database's rates and pauses at its commit, and must not
# be undone by them; the extension made again has none
$tiny->safe_psql('postgres', 'CREATE DATABASE ghost');
$tiny->safe_psql('ghost', q{
CREATE EXTENSION aion_wake;
BEGIN;
SELECT aion_wake.set_rate('gh', 1, '1 hour');
SELECT aion_wake.pause('gp', clock_timestamp() + '1 day');
DROP EXTENSION aion_wake;
COMMIT;
CREATE EXTENSION aion_wake;});
is( $tiny->safe_psql('ghost', q{
SELECT count(*) FROM aion_wake.topics
 WHERE max_starts IS NOT NULL OR paused_until IS NOT NULL}),
	'0', '(k) no rate or pause outlives DROP EXTENSION in its transaction');
$tiny->safe_psql('ghost', q{
SELECT count(aion_wake.enqueue(t || g, '{}', t))
  FROM generate_series(1, 3) g, unnest(ARRAY['gh', 'gp']) t});
is( $tiny->safe_psql('ghost',
		"SELECT count(*) FROM aion_wake.claim(ARRAY['gh', 'gp'], 9)"),
	'6', '(k) claims of the extension made again are held back by nothing');

$tiny->stop;

done_testing();
