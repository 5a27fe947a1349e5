# Copyright (c) 2026, aion_wake authors
#
# 020_pgbouncer.pl: the dispatcher wiring through a real PgBouncer in
# transaction mode.
#
# Every call of the wiring is one statement in autocommit, and
# claim(wait => ...) blocks inside its one statement: nothing of it lives in
# the session (no LISTEN, no prepared statement, no temp table), so a pool
# that hands each transaction to any server connection runs it unchanged.
# PgBouncer (pool_mode = transaction, default_pool_size = 2) sits in front
# of the cluster on a Unix socket directory of the test's own; four pooled
# clients share its two server connections, and they:
#   (a) block a claim on an empty topic and wake it with an enqueue from
#       another pooled client (the claim holds one server connection while
#       it sleeps; the enqueue runs on the other);
#   (b) park the row with its lease_token, block a claim again, pulse()
#       from another client: the parked row comes back and the blocked
#       claim takes it; complete() with the stale token is refused, with the
#       new one the row is delivered;
#   (c) pin both server connections with blocked claims: a third client's
#       enqueue then queues in PgBouncer until one claim ends (the reason
#       the pool must be larger than the number of blocked claimers);
#   (d) a claim that waits longer than PgBouncer's query_timeout is cut:
#       the client gets PgBouncer's error and its server connection is
#       closed; the backend notices at once (client_connection_check_interval)
#       and leaves the waiter registry, and the pool serves the other
#       clients and new ones as before.
# PgBouncer is stopped at the end.  Without /usr/sbin/pgbouncer the test is
# skipped, unless AW_REQUIRE_PGBOUNCER=1 (CI sets it): then it fails.

use strict;
use warnings;

use AionWake::Test;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $pgbouncer = $ENV{AW_PGBOUNCER} // '/usr/sbin/pgbouncer';
if (!-x $pgbouncer)
{
	if (($ENV{AW_REQUIRE_PGBOUNCER} // '') eq '1')
	{
		fail("$pgbouncer is missing, and AW_REQUIRE_PGBOUNCER=1 requires it "
			  . '(apt-get install pgbouncer)');
		done_testing();
		exit;
	}
	plan skip_all => "$pgbouncer is missing (apt-get install pgbouncer; "
	  . 'set AW_REQUIRE_PGBOUNCER=1 to fail instead of skipping)';
}

# The server: a backend whose client went away while it waited must notice
# without waiting for the end of its wait (d); waits up to 10 minutes are
# allowed, so that only PgBouncer can end the claims below early.
my $node = aw_node('bouncer', conf => <<'CONF');
client_connection_check_interval = '100ms'
aion_wake.max_wait = '10min'
CONF
my $user = $node->safe_psql('postgres', 'SELECT current_user');

# A Cluster object that is never initialised stands for PgBouncer: its host
# (a socket directory of its own) and port are where PgBouncer listens, so
# psql, background sessions and poll_query_until go through the pool.  Its
# base directory holds PgBouncer's configuration and auth file.
my $pool = PostgreSQL::Test::Cluster->new('pool', own_host => 1);
my $dir = $pool->basedir;
my $bouncer_log = $pool->logfile;
PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt", qq{"$user" ""\n});
PostgreSQL::Test::Utils::append_to_file(
	"$dir/pgbouncer.ini", sprintf(<<'INI',
[databases]
postgres = host=%s port=%d dbname=postgres

[pgbouncer]
unix_socket_dir = %s
listen_port = %d
auth_type = trust
auth_file = %s/userlist.txt
admin_users = %s
pool_mode = transaction
default_pool_size = 2
reserve_pool_size = 0
max_client_conn = 20
query_timeout = 0
logfile = %s
pidfile = %s/pgbouncer.pid
INI
		$node->host, $node->port, $pool->host, $pool->port, $dir, $user,
		$bouncer_log, $dir));

my ($bouncer_out, $bouncer_err) = ('', '');
my $bouncer;
END
{
	# a test that dies on the way leaves no PgBouncer behind
	my $rc = $?;
	eval { $bouncer->kill_kill if $bouncer && $bouncer->pumpable; 1 };
	$? = $rc;
}
$bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'<', \undef, '>', \$bouncer_out, '2>', \$bouncer_err);
ok( $pool->poll_query_until('postgres', 'SELECT true'),
	'PgBouncer accepts connections on its socket');

# One row of SHOW POOLS (database postgres) from the admin console.
sub pool_row
{
	my $out = $pool->safe_psql('pgbouncer', "\\pset tuples_only off\nSHOW POOLS");
	my @lines = split /\n/, $out;
	my @cols = split /\|/, shift @lines;
	foreach my $line (@lines)
	{
		my %row;
		@row{@cols} = split /\|/, $line;
		return \%row if ($row{database} // '') eq 'postgres';
	}
	return {};
}

# Server connections of the pool, in any state.
sub pool_servers
{
	my $r = shift;
	my $n = 0;
	$n += $r->{$_} // 0 foreach grep { /^sv_/ } keys %$r;
	return $n;
}

# Wait (bounded) until SHOW POOLS satisfies $cond.
sub poll_pool
{
	my ($cond) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		return 1 if $cond->(pool_row());
		Time::HiRes::sleep(0.1);
	}
	return 0;
}

is($node->safe_psql('postgres', 'SHOW client_connection_check_interval'),
	'100ms', 'the server checks for lost clients while a query runs');

# four pooled clients
my ($p, $w, $d, $x) = map { aw_session($pool) } 1 .. 4;
my $row = pool_row();
is($row->{pool_mode}, 'transaction', 'PgBouncer pools by transaction');
cmp_ok($row->{cl_active}, '>=', 4, 'four clients are connected to the pool');
cmp_ok(pool_servers($row), '<=', 2,
	'... sharing at most two server connections');

# --- (a) a blocked claim woken by an enqueue from another pooled client ------

aw_start($w,
	"SELECT dispatch_key || ':' || lease_token FROM aion_wake.claim('pb', 1, '1 min', '5 min')"
);
aw_poll_waiters($node, 1, '(a) a claim through the pool blocks on the empty topic');
ok(poll_pool(sub { $_[0]->{sv_active} == 1 }),
	'(a) the blocked claim holds one server connection');
ok(!aw_done($w), '(a) the claim is still waiting');
is($p->query_safe("SELECT aion_wake.enqueue('pb-1', '{\"n\": 1}', 'pb')"),
	't', '(a) another pooled client enqueues, on the other server connection');
my ($out, $err) = aw_finish($w);
like($out, qr/^pb-1:\d+$/, '(a) the enqueue wakes the blocked claim, which takes the row');
is($err, '', '(a) without an error');
my ($tok1) = $out =~ /:(\d+)$/;
aw_poll_waiters($node, 0, '(a) no claimer waits any more');

# --- (b) park with its token, pulse, the row comes back, complete -----------

is($d->query_safe("SELECT aion_wake.park('pb-1', '1 hour', $tok1)"),
	't', '(b) BUSY: park with the lease_token through the pool');
is( $node->safe_psql(
		'postgres', q{
SELECT p.state || ' ' || (o.visible_after > clock_timestamp() + interval '50 minutes')
  FROM aion_wake.parked p JOIN aion_wake.outbox o USING (dispatch_key)
 WHERE dispatch_key = 'pb-1'}),
	'confirmed true',
	'(b) the park committed: the row is in the set, fenced an hour ahead');

aw_start($w,
	"SELECT dispatch_key || ':' || lease_token || ':' || attempt FROM aion_wake.claim('pb', 1, '1 min', '5 min')"
);
aw_poll_waiters($node, 1, '(b) a claim blocks: the only row is parked');
ok(!aw_done($w), '(b) the claim is still waiting');
$x->query_safe("SELECT aion_wake.pulse('pb', 1)");
($out, $err) = aw_finish($w);
like($out, qr/^pb-1:\d+:0$/,
	'(b) a pulse from another pooled client re-offers the parked row to the blocked claim');
my ($tok2) = $out =~ /^pb-1:(\d+):/;
isnt($tok2 // '', $tok1, '(b) with a new lease_token');

is($d->query_safe("SELECT aion_wake.complete('pb-1', $tok1)"),
	'f', '(b) complete() with the first token is refused');
is( $d->query_safe(
		"SELECT aion_wake.complete('pb-1', $tok2), aion_wake.pulse('pb', 1)"),
	't|',
	'(b) complete() with the current token, and the pulse for the freed slot, in one statement'
);
is($node->safe_psql('postgres', 'SELECT count(*) FROM aion_wake.outbox'),
	'0', '(b) the row is delivered: the outbox is empty');

# --- (c) blocked claims that pin the whole pool -------------------------------

aw_start($w,
	"SELECT dispatch_key FROM aion_wake.claim('pc', 1, '1 min', '5 min')");
aw_start($x,
	"SELECT dispatch_key FROM aion_wake.claim('pc', 1, '1 min', '5 min')");
aw_poll_waiters($node, 2, '(c) two claims block, one per server connection');
aw_start($p, "SELECT aion_wake.enqueue('pc-1', '{}', 'pc')");
ok(poll_pool(sub { $_[0]->{cl_waiting} == 1 && $_[0]->{sv_active} == 2 }),
	'(c) a third client\'s enqueue queues in PgBouncer: no server connection is free');
ok(!aw_done($p), '(c) the enqueue has not run');

# One claim is cancelled (from outside the pool); its server connection
# goes to the enqueue, whose commit wakes the other claim.
my $victim = $node->safe_psql(
	'postgres', q{
SELECT pid FROM pg_stat_activity
 WHERE query LIKE '%aion_wake.claim(''pc''%' AND pid <> pg_backend_pid()
 ORDER BY backend_start LIMIT 1});
$node->safe_psql('postgres', "SELECT pg_cancel_backend($victim)");
($out, $err) = aw_finish($p);
is($out, 't', '(c) a cancelled claim frees its server connection: the enqueue runs');
my ($ow, $ew) = aw_finish($w);
my ($ox, $ex) = aw_finish($x);
is( join(',', sort grep { $_ ne '' } ($ow, $ox)),
	'pc-1', '(c) the other claim takes the row');
like($ew . $ex, qr/canceling statement due to user request/,
	'(c) the cancelled claim got the cancel');
aw_poll_waiters($node, 0, '(c) no claimer waits any more');
is($d->query_safe("SELECT count(*) FROM aion_wake.outbox WHERE topic = 'pc'"),
	'1', '(c) the claimed row is leased, not lost');

# --- (d) PgBouncer's query_timeout cuts a blocked claim -----------------------

# A claim must wait less than query_timeout; this one waits 5 minutes
# against 5 s.  (The pool's own default here is 0, no timeout.)
$pool->safe_psql('pgbouncer', 'SET query_timeout = 5');
my $log_offset = -s $node->logfile;
my ($cut_out, $cut_err) = ('', '');
my $t0 = time;
my $cut = IPC::Run::start(
	[
		'psql', '-X', '-d', $pool->connstr('postgres'), '-c',
		"SELECT * FROM aion_wake.claim('pd', 1, '1 min', '5 min')"
	],
	'<', \undef, '>', \$cut_out, '2>', \$cut_err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
aw_poll_waiters($node, 1, '(d) a claim waits through the pool');
my $cut_ok = eval { $cut->finish; 1 };
my $elapsed = time - $t0;
ok(!$cut_ok || $cut->result != 0, '(d) the client\'s statement fails');
like($cut_err, qr/query.timeout/, '(d) with PgBouncer\'s query_timeout error');
cmp_ok($elapsed, '<', 120, '(d) long before its 5 minute wait would end');
note("(d) claim cut after " . sprintf('%.1f', $elapsed) . " s: $cut_err");
$node->wait_for_log(qr/connection to client lost/, $log_offset);
pass('(d) the backend noticed that PgBouncer closed its connection');
aw_poll_waiters($node, 0, '(d) aion_wake.status.waiters returns to 0');

# the pool goes on: old clients and a new one
is($p->query_safe("SELECT aion_wake.enqueue('pd-1', '{}', 'pd')"),
	't', '(d) an old pooled client enqueues after the cut');
is( $pool->safe_psql(
		'postgres',
		"SELECT dispatch_key || ':' || aion_wake.complete(dispatch_key, lease_token) FROM aion_wake.claim('pd', 1, '1 min', '10 s')"
	),
	'pd-1:true',
	'(d) a new pooled client claims and completes it');
ok(poll_pool(sub { $_[0]->{cl_waiting} == 0 && pool_servers($_[0]) <= 2 }),
	'(d) nobody waits in the pool, which still has at most two server connections');

# --- the end -------------------------------------------------------------------

$_->quit foreach ($p, $w, $d, $x);
$bouncer->signal('TERM');
ok(eval { $bouncer->finish; 1 }, 'PgBouncer stops on SIGTERM');
ok(!-e "$dir/pgbouncer.pid", '... and is gone');
if (!Test::More->builder->is_passing)
{
	my @lines = split /\n/, slurp_file($bouncer_log);
	splice(@lines, 0, -30) if @lines > 30;
	diag("PgBouncer log (tail):\n" . join("\n", @lines));
}

$node->stop;
done_testing();
