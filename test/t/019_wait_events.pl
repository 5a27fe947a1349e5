# Copyright (c) 2026, aion_wake authors
#
# 019_wait_events.pl: what pg_stat_activity shows of aion_wake's waits, on
# the major it runs on.
#
# From PostgreSQL 17 on, an extension names its own wait events
# (WaitEventExtensionNew): a claim blocked in claim(wait => ...) waits on
# 'AionWakeClaim' and the worker with nothing to do on 'AionWakeWorker',
# both of wait_event_type 'Extension', and pg_wait_events lists them.  The
# worker opening its listening connection (connect and LISTEN) waits on
# 'AionWakeListenerConnect', listed once the worker has opened it.  On 15
# all are 'Extension'/'Extension'.  The names are obtained lazily in each
# process and kept, so a second wait in the same session shows the same
# name, and so does a claim in a session started later.
#
# On 18 and later the library's magic block (PG_MODULE_MAGIC_EXT) also
# carries its name and version, which pg_get_loaded_modules() shows; the
# version must be the extension's default_version.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use AionWake::Test;

my $node = aw_node('wait_events');
my $major = aw_server_major($node);
my $claim_event = $major >= 17 ? 'AionWakeClaim' : 'Extension';
my $worker_event = $major >= 17 ? 'AionWakeWorker' : 'Extension';
note "PostgreSQL $major: claim waits on $claim_event, the worker on $worker_event";

# the wait of one process, as "type:event"
sub wait_of
{
	my ($pid) = @_;
	return "SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE pid = $pid";
}

# --- the idle worker ---------------------------------------------------------

my $worker = aw_worker_pid($node);
ok($node->poll_query_until('postgres', wait_of($worker), "Extension:$worker_event"),
	"the idle worker waits on Extension:$worker_event");

# --- a blocked claim, twice in one session, then in another session ---------

my $s = aw_session($node);
for my $round (1, 2)
{
	aw_start($s, "SELECT dispatch_key FROM aion_wake.claim('we', 1, '30s', '30s')");
	aw_poll_waiters($node, 1, "claim $round: the claim is registered as a waiter");
	ok( $node->poll_query_until(
			'postgres', wait_of($s->{pid}), "Extension:$claim_event"),
		"claim $round: the blocked claim waits on Extension:$claim_event");
	$node->safe_psql('postgres', "SELECT aion_wake.enqueue('we$round', '{}', 'we')");
	my ($out, $err) = aw_finish($s);
	is($out, "we$round", "claim $round: an enqueue ends the wait");
	is($err, '', "claim $round: without error");
}

my $s2 = aw_session($node);
aw_start($s2, "SELECT dispatch_key FROM aion_wake.claim('we', 1, '30s', '30s')");
aw_poll_waiters($node, 1, 'a claim in a second session is registered');
ok($node->poll_query_until('postgres', wait_of($s2->{pid}), "Extension:$claim_event"),
	"a second session's claim waits on Extension:$claim_event too");
$node->safe_psql('postgres', "SELECT aion_wake.enqueue('we3', '{}', 'we')");
my ($out, $err) = aw_finish($s2);
is($out, 'we3', 'the second session is woken too');

# the worker went back to sleep on its own wait event after the wakes
ok($node->poll_query_until('postgres', wait_of($worker), "Extension:$worker_event"),
	"the worker waits on Extension:$worker_event again");

# --- what the server lists ------------------------------------------------------

SKIP:
{
	skip 'pg_wait_events exists from PostgreSQL 17 on', 2 if $major < 17;
	ok($node->poll_query_until('postgres', 'SELECT listening FROM aion_wake.status'),
		'the worker has opened its listening connection');
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(type || ':' || name, ',' ORDER BY name) FROM pg_wait_events WHERE name LIKE 'AionWake%'"
		),
		'Extension:AionWakeClaim,Extension:AionWakeListenerConnect,Extension:AionWakeWorker',
		'pg_wait_events lists the three wait events used, once each');
}

SKIP:
{
	skip 'PG_MODULE_MAGIC_EXT exists from PostgreSQL 18 on', 1 if $major < 18;
	my $version = $node->safe_psql('postgres',
		"SELECT default_version FROM pg_available_extensions WHERE name = 'aion_wake'");
	is( $node->safe_psql(
			'postgres',
			"SELECT module_name || ' ' || version FROM pg_get_loaded_modules() WHERE file_name = 'aion_wake.so'"
		),
		"aion_wake $version",
		"the loaded library names itself and its version, $version");
}

$s->quit;
$s2->quit;
$node->stop;
done_testing();
