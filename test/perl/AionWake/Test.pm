# Copyright (c) 2026, aion_wake authors
#
# AionWake::Test: the set-up every TAP test of aion_wake shares.
#
# A cluster with aion_wake preloaded and a worker serving it, background
# psql sessions that may block (a claim that waits, an UPDATE behind a
# lock) while the test goes on, the queries on aion_wake.status that most
# tests poll, and the few that say which rows of a topic are parked,
# re-offered or confirmed in the set.  Tests wait for conditions
# (aw_poll_for, poll_query_until, wait_for_log), never for a fixed time.
#
# Usage:
#   use lib 'test/perl';      # (the Makefile's PROVE_FLAGS adds it)
#   use AionWake::Test;
#   my $node = aw_node('name');                         # started, extension made
#   my $node = aw_node('name', conf => "aion_wake.listen = off\n",
#                      databases => 'postgres, other', create => 0);
#   ok(aw_wait_status($node, 'listening'), 'the worker listens');
#   aw_park_rows($node, 't', qw(k1 k2));                # parked for an hour
#   ok(aw_wait_reoffered($node, 'k1'));  is(aw_still_parked($node, 't'), 'k2');
#   my $s = aw_session($node);                          # $s->{pid}
#   my $w = aw_waiter($node);     # a session for a claim that will block
#   aw_start($s, "SELECT ... FROM aion_wake.claim('t', 1, '30s', '30s')");
#   ok(!aw_done($s));   ... my ($out, $err) = aw_finish($s);
#   ok(aw_poll_for($node, 'postgres', 'SELECT ...', 30), 'soon');
#   aw_wait_event($node, 'claim')  # a blocked claim's wait_event on this major

package AionWake::Test;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use IPC::Run ();

our @EXPORT = qw(aw_node aw_preload aw_create_extension aw_session aw_start aw_done
  aw_finish aw_status aw_wait_status aw_worker_pid aw_wait_new_worker aw_poll_waiters
  aw_park_rows aw_wait_reoffered aw_reoffered aw_still_parked aw_confirmed
  aw_wait_confirmed aw_poll_for aw_waiter aw_server_major aw_wait_event
  aw_limit_of aw_live_leases aw_finish_rows aw_taken_promptly aw_create_sqlstate_of aw_prompt);

# A new cluster with aion_wake in shared_preload_libraries, started.
# Options:
#   databases  aion_wake.database (default 'postgres')
#   conf       more postgresql.conf lines (after aion_wake's: a line of its
#              own for shared_preload_libraries wins)
#   init       a hash ref of options for init() (allows_streaming, ...)
#   preload    0: a cluster without aion_wake's lines, as a user who did not
#              read the install notes has (default 1); aw_preload adds them
#   create     make the extension in 'postgres' and wait for the worker
#              (default: as preload)
sub aw_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opt{init} // {} });
	my $preload = $opt{preload} // 1;
	aw_preload($node, $opt{databases}) if $preload;
	$node->append_conf('postgresql.conf', $opt{conf}) if defined $opt{conf};
	$node->start;
	if ($opt{create} // $preload)
	{
		aw_create_extension($node, 'postgres');
	}
	return $node;
}

# Preload aion_wake and serve $dbs (default 'postgres'): the two lines of
# postgresql.conf the install notes give.  Takes effect at the next start.
sub aw_preload
{
	my ($node, $dbs) = @_;
	$dbs //= 'postgres';
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'aion_wake'\naion_wake.database = '$dbs'\n");
	return;
}

# CREATE EXTENSION aion_wake in a served database, and wait until its
# worker runs and has rebuilt the set (it does at the commit), so that
# what the test parks next is not read again by the rebuild.
sub aw_create_extension
{
	my ($node, $db) = @_;
	my $offset = -s $node->logfile;
	$node->safe_psql($db, 'CREATE EXTENSION aion_wake');
	aw_wait_status($node, 'worker_pid IS NOT NULL', $db)
	  or die "no aion_wake worker came up in database $db";
	$node->wait_for_log(
		qr/aion_wake worker rebuilt the parked set of database "$db"/, $offset);
	return;
}

# A background psql session that goes on after an error; $s->{pid} is its
# backend's pid.
sub aw_session
{
	my ($node, $db) = @_;
	my $h = $node->background_psql($db // 'postgres', on_error_stop => 0);
	my $pid = $h->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	$h->{pid} = $pid;
	return $h;
}

# A session for one claim that will block, with no timer armed that could
# set its latch.  A backend that goes idle with statistics it may not flush
# yet (its last flush was less than 1 s ago) arms a timer to flush them
# 10 s later, and on 15 leaves it armed while its next statement runs: the
# timer's handler sets the latch, so a claim blocked then wakes, probes and
# finds a row it was never woken for, and a lost wake looks like one 10 s
# late.  The first idle of a backend flushes and arms nothing, so this
# session runs no statement before the one given to aw_start (its pid is
# looked up by application_name); use it for one blocking claim only.
my $waiter_seq = 0;

sub aw_waiter
{
	my ($node, $db) = @_;
	my $name = 'aw_waiter_' . ++$waiter_seq;
	my $h;
	{
		local $ENV{PGAPPNAME} = $name;
		$h = $node->background_psql($db // 'postgres', on_error_stop => 0);
	}
	$h->{pid} = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$name'");
	die "no backend for $name" unless $h->{pid} =~ /^\d+$/;
	return $h;
}

# Send a statement without waiting for it: it may block.  A marker echoed
# on stdout and stderr after it tells when it has finished.
my $marker_seq = 0;

sub aw_start
{
	my ($h, $sql) = @_;
	my $marker = 'aw_done_' . ++$marker_seq;
	$h->{stdout} = '';
	$h->{stderr} = '';
	$h->{aw_marker} = $marker;
	$h->{stdin} .= "$sql;\n\\echo '$marker'\n\\warn '$marker'\n";
	$h->{run}->pump_nb;
	return;
}

# Has the statement sent with aw_start finished?  Never blocks.
sub aw_done
{
	my ($h) = @_;
	my $m = $h->{aw_marker};
	$h->{run}->pump_nb if $h->{run}->pumpable;
	return ($h->{stdout} =~ /$m\n/ && $h->{stderr} =~ /$m\n/) ? 1 : 0;
}

# Wait (bounded by the session's timeout) until the statement has
# finished; return its stdout and stderr without the marker.
sub aw_finish
{
	my ($h) = @_;
	my $m = $h->{aw_marker};
	$h->{run}->pump until aw_done($h);
	my ($out, $err) = ($h->{stdout}, $h->{stderr});
	$out =~ s/\n?$m\n//;
	$err =~ s/\n?$m\n//;
	$h->{stdout} = '';
	$h->{stderr} = '';
	return ($out, $err);
}

# One column of aion_wake.status.
sub aw_status
{
	my ($node, $col, $db) = @_;
	return $node->safe_psql($db // 'postgres',
		"SELECT $col FROM aion_wake.status");
}

# Poll until $cond, an expression over aion_wake.status's columns, is true
# ("listening", "worker_pid IS NOT NULL", "parked_pending = 0"); returns
# true once it holds, false at the timeout (aw_poll_for's).
sub aw_wait_status
{
	my ($node, $cond, $db) = @_;
	return aw_poll_for($node, $db // 'postgres',
		"SELECT $cond FROM aion_wake.status");
}

sub aw_worker_pid
{
	my ($node, $db) = @_;
	return aw_status($node, 'worker_pid', $db);
}

# Wait for a worker other than $old_pid; return its pid, or undef.
sub aw_wait_new_worker
{
	my ($node, $old_pid, $db) = @_;
	aw_poll_for($node, $db // 'postgres', qq{
SELECT worker_pid IS NOT NULL AND worker_pid <> $old_pid
  FROM aion_wake.status})
	  or return undef;
	return aw_worker_pid($node, $db);
}

# The server's major version: 15, 17, 18, ...
sub aw_server_major
{
	my ($node) = @_;
	return int(
		$node->safe_psql('postgres', 'SHOW server_version_num') / 10000);
}

# The wait_event that pg_stat_activity shows (wait_event_type 'Extension')
# for a claim blocked in claim(wait => ...) ('claim') or for the worker
# with nothing to do ('worker'): a name of its own from PostgreSQL 17 on
# (WaitEventExtensionNew), plain 'Extension' before.
sub aw_wait_event
{
	my ($node, $which) = @_;
	my %name = (claim => 'AionWakeClaim', worker => 'AionWakeWorker');
	die "aw_wait_event: unknown wait '$which'" unless exists $name{$which};
	return aw_server_major($node) >= 17 ? $name{$which} : 'Extension';
}

# ok() once aion_wake.status says $n claimers wait.
sub aw_poll_waiters
{
	my ($node, $n, $what, $db) = @_;
	ok(aw_wait_status($node, "waiters = $n", $db), $what);
}

# Enqueue rows of a topic and park each for an hour, each park in a
# transaction of its own (psql runs each statement in its own transaction),
# so that parked_at follows the order given.
sub aw_park_rows
{
	my ($node, $topic, @keys) = @_;
	my $sql = '';
	foreach my $k (@keys)
	{
		$sql .= "SELECT aion_wake.enqueue('$k', '{}', '$topic');\n";
		$sql .= "SELECT aion_wake.park('$k', '1 hour');\n";
	}
	$node->safe_psql('postgres', $sql);
	return;
}

# Poll until the row $key is re-offered: no longer parked and visible now.
# Returns what aw_poll_for does.
sub aw_wait_reoffered
{
	my ($node, $key, $db) = @_;
	return aw_poll_for(
		$node, $db // 'postgres', qq{
SELECT parked_at IS NULL AND visible_after <= clock_timestamp()
  FROM aion_wake.outbox WHERE dispatch_key = '$key'});
}


# Poll until the parked set holds $n confirmed entries of $topic (after a
# rebuild, or once parks have committed).  Returns what aw_poll_for does.
sub aw_wait_confirmed
{
	my ($node, $topic, $n) = @_;
	return aw_poll_for($node, 'postgres', qq{
SELECT count(*) = $n FROM aion_wake.parked
 WHERE topic = '$topic' AND state = 'confirmed'});
}

# The keys of a topic's rows in one state, sorted and comma-separated (''
# for none), for comparing with the keys expected:
#   aw_reoffered     re-offered: no longer parked, and visible now
#   aw_still_parked  parked: parked_at set, fence still more than 50
#                    minutes ahead (the parks of these tests are for an hour)
#   aw_confirmed     confirmed entries of the parked set, no backend's own
sub aw_reoffered
{
	my ($node, $topic) = @_;
	return keys_where($node, 'aion_wake.outbox', qq{
topic = '$topic' AND parked_at IS NULL
   AND visible_after <= clock_timestamp()});
}

sub aw_still_parked
{
	my ($node, $topic) = @_;
	return keys_where($node, 'aion_wake.outbox', qq{
topic = '$topic' AND parked_at IS NOT NULL
   AND visible_after > clock_timestamp() + interval '50 minutes'});
}

sub aw_confirmed
{
	my ($node, $topic) = @_;
	return keys_where($node, 'aion_wake.parked', qq{
topic = '$topic' AND state = 'confirmed' AND owner_pid IS NULL});
}

# SELECT the sorted, comma-separated keys of $from WHERE $where.
sub keys_where
{
	my ($node, $from, $where) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT coalesce(string_agg(dispatch_key, ',' ORDER BY dispatch_key), '')
  FROM $from
 WHERE $where});
}

# Poll a query until it returns true or $secs seconds have passed; return
# whether it did.  Without $secs, the time poll_query_until gives (180 s
# by default), and a note of the last answer when it runs out.  With it,
# for what must happen promptly, where 180 s would only slow down the
# report of a failure, and for the short windows in which a negative check
# looks for something that must not happen; then it says nothing when the
# time runs out: the caller's ok() does.
#
# Each attempt is a psql of its own with the query in -c, and an attempt
# that fails is only tried again: poll_query_until writes its query to
# psql's standard input, and a psql that finds the server restarting
# (after a kill -9 or a crash) may exit before the write, which kills the
# test with "ack Broken pipe" from IPC::Run.  One statement per query: -c
# prints only the last one's result.
sub aw_poll_for
{
	my ($node, $db, $sql, $secs) = @_;
	my $end = Time::HiRes::time()
	  + ($secs // $PostgreSQL::Test::Utils::timeout_default);
	my @psql = ($node->installed_command('psql'),
		'-XAtq', '-d', $node->connstr($db), '-c', $sql);
	my ($out, $err);

	for (;;)
	{
		($out, $err) = ('', '');
		my $ran = eval {
			IPC::Run::run(\@psql, '<', '/dev/null', '>', \$out, '2>', \$err);
		};
		chomp $out;
		return 1 if $ran && $out eq 't';
		last if Time::HiRes::time() >= $end;
		Time::HiRes::usleep(100_000);
	}
	diag("aw_poll_for timed out on:\n$sql\nlast output: $out\nlast error: $err")
	  unless defined $secs;
	return 0;
}

# public.sqlstate_of(stmt) in database $db (default 'postgres'): run stmt
# and return the SQLSTATE it raised, 'ok' if none.
sub aw_create_sqlstate_of
{
	my ($node, $db) = @_;
	$node->safe_psql($db // 'postgres', q{
CREATE FUNCTION public.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;});
	return;
}

# "max_in_flight/in_flight" of a topic, '-' for null (or no topic row)
sub aw_limit_of
{
	my ($node, $topic) = @_;
	return $node->safe_psql('postgres', qq{
SELECT coalesce((SELECT coalesce(max_in_flight::text, '-') || '/' || coalesce(in_flight::text, '-')
                   FROM aion_wake.topics WHERE topic = '$topic'), '-/-')});
}

# rows of a topic that carry a live lease, as committed
sub aw_live_leases
{
	my ($node, $topic) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM aion_wake.outbox
 WHERE topic = '$topic' AND lease_token IS NOT NULL AND leased_until > clock_timestamp()});
}

# The rows a statement started with aw_start printed, each split on '|'.
sub aw_finish_rows
{
	my ($h) = @_;
	my ($out, $err) = aw_finish($h);
	diag("claim said: $err") if $err ne '';
	return map { [ split /\|/ ] } grep { $_ ne '' } split /\n/, $out;
}

# How late a check lets "promptly" be: $secs seconds (0.2 for the wakes
# the limits and rates promise), times AW_TEST_TIME_SCALE when that is set.
# test/sanitize/run.sh sets it: under AddressSanitizer every server
# process runs several times slower, and a wake that takes 5 ms here can
# take 300 there without anything being wrong.  The unsanitized suites
# hold the code to the figure itself.
sub aw_prompt
{
	my ($secs) = @_;
	return $secs * ($ENV{AW_TEST_TIME_SCALE} // 1);
}

# One row came, taken (its third column, epoch) no earlier than $from
# ($slack seconds of clock skew allowed) and no later than $prompt after
# it: pass, or fail saying what came.  Returns the row, or undef.
sub aw_taken_promptly
{
	my ($rows, $from, $prompt, $what, $slack) = @_;
	my $row = $rows->[0];
	if (@$rows == 1 && $row->[2] >= $from - ($slack // 0) && $row->[2] - $from <= $prompt)
	{
		pass($what);
		note(sprintf("%s: %.1f ms", $what, 1000 * ($row->[2] - $from)));
	}
	else
	{
		fail($what);
		diag(@$rows
			? sprintf("%d row(s); the first, %s, taken %.1f ms after the event",
				scalar(@$rows), $row->[0], 1000 * ($row->[2] - $from))
			: 'the claim returned no row');
	}
	return $row;
}

1;
