/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background worker: one per database named in aion_wake.database.
 *
 *	  The worker rebuilds the parked set from the table when it starts,
 *	  spends the pulses that backends leave on the topics' counters (setting
 *	  its latch at COMMIT), expires entries whose fence has passed, and
 *	  receives raw NOTIFY aion_wake_capacity pulses.  Core refuses LISTEN in
 *	  a background process, so for the NOTIFY wire the worker holds one libpq
 *	  connection to its own server over the Unix socket and waits on its
 *	  socket together with its latch.
 *
 *	  That connection is an ordinary client backend, which would hold up a
 *	  smart shutdown forever: the postmaster waits for client backends to
 *	  leave before it stops background workers.  The worker therefore
 *	  watches postmaster.pid (with inotify, so idle costs nothing), where the
 *	  postmaster writes "stopping" when a shutdown begins, and then closes
 *	  the connection for good.
 *
 *	  With nothing to do the worker sleeps until an event, or until the
 *	  next fence it must expire (G5).  Errors end the process; the
 *	  postmaster starts it again after a short delay.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#define AW_HAVE_INOTIFY 1
#endif

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/pidfile.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "aion_wake.h"
#include "aw_pulse_parse.h"
#include "aw_reoffer.h"
#include "aw_set.h"
#include "aw_waiters.h"
#include "aw_worker.h"

/* restart delay after a failure, seconds */
#define AW_WORKER_RESTART_SECS	2
/* bounds of the delay between attempts to open the listening connection */
#define AW_CONNECT_MIN_MS		1000
#define AW_CONNECT_MAX_MS		60000
/* at most one log line per this many ms for malformed pulses */
#define AW_BAD_PULSE_LOG_MS		10000
/* rows read per fetch while rebuilding the set */
#define AW_REBUILD_FETCH		1000

static AwWorkerSlot *aw_slot = NULL;
static PGconn *aw_conn = NULL;
static TimestampTz aw_next_connect = 0;
static int	aw_connect_delay_ms = AW_CONNECT_MIN_MS;
static bool aw_stopping = false;
static int	aw_inotify_fd = -1;
static bool aw_pid_file_changed = true;
static uint32 aw_conn_generation = 0;
static char *aw_login_role = NULL;
static char aw_conn_role[NAMEDATALEN];	/* role of the open connection */

/*
 * The databases named in aion_wake.database, at most AW_MAX_WORKERS.  The
 * postmaster parses it twice (to register workers and to size their slots),
 * always the same way.
 */
List *
aw_database_names(void)
{
	char	   *raw = pstrdup(aw_database_list ? aw_database_list : "");
	List	   *names = NIL;
	List	   *result = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(raw, ',', &names))
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in parameter \"%s\"", "aion_wake.database")));
	foreach(lc, names)
	{
		if (list_length(result) >= AW_MAX_WORKERS)
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("aion_wake serves at most %d databases", AW_MAX_WORKERS),
					 errdetail("Database \"%s\" and those after it in \"%s\" get no worker.",
							   (char *) lfirst(lc), "aion_wake.database")));
			break;
		}
		result = lappend(result, pstrdup((char *) lfirst(lc)));
	}
	return result;
}

/*
 * Register one worker per database.  Called from _PG_init in the postmaster.
 */
void
aw_register_workers(void)
{
	List	   *names = aw_database_names();
	ListCell   *lc;
	int			i = 0;

	foreach(lc, names)
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = AW_WORKER_RESTART_SECS;
		strlcpy(worker.bgw_library_name, "aion_wake", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, "aw_worker_main", BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "aion_wake worker for database %s",
				 (char *) lfirst(lc));
		strlcpy(worker.bgw_type, "aion_wake worker", BGW_MAXLEN);
		worker.bgw_main_arg = Int32GetDatum(i++);
		RegisterBackgroundWorker(&worker);
	}
}

static void
aw_set_listen_state(bool listening, const char *error)
{
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_slot->listening = listening;
	LWLockRelease(aw_shared->lock);
	SpinLockAcquire(&aw_slot->mutex);
	strlcpy(aw_slot->listen_error, error ? error : "", sizeof(aw_slot->listen_error));
	SpinLockRelease(&aw_slot->mutex);
}

static void
aw_worker_detach(int code, Datum arg)
{
	if (aw_conn != NULL)
	{
		PQfinish(aw_conn);
		aw_conn = NULL;
	}
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_slot->pid = 0;
	aw_slot->procno = -1;
	aw_slot->listening = false;
	LWLockRelease(aw_shared->lock);
}

/* ---------------------------------------------------------------------
 * Smart shutdown: watch postmaster.pid for the "stopping" status.
 * ---------------------------------------------------------------------
 */

/* Has the postmaster begun to shut down?  Reads line 8 of postmaster.pid. */
static bool
aw_postmaster_stopping(void)
{
	char		path[MAXPGPATH];
	char		buf[1024];
	FILE	   *f;
	int			line = 1;
	bool		stopping = false;

	snprintf(path, sizeof(path), "%s/postmaster.pid", DataDir);
	f = AllocateFile(path, "r");
	if (f == NULL)
		return true;			/* the postmaster removes it when it is gone */
	while (fgets(buf, sizeof(buf), f) != NULL)
	{
		if (line++ == LOCK_FILE_LINE_PM_STATUS)
		{
			stopping = strncmp(buf, PM_STATUS_STOPPING, strlen(PM_STATUS_STOPPING)) == 0;
			break;
		}
	}
	FreeFile(f);
	return stopping;
}

static void
aw_watch_postmaster_pid(void)
{
#ifdef AW_HAVE_INOTIFY
	char		path[MAXPGPATH];

	if (!AcquireExternalFD())
		return;
	aw_inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (aw_inotify_fd < 0)
	{
		ReleaseExternalFD();
		return;
	}
	snprintf(path, sizeof(path), "%s/postmaster.pid", DataDir);
	if (inotify_add_watch(aw_inotify_fd, path, IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF) < 0)
	{
		close(aw_inotify_fd);
		aw_inotify_fd = -1;
		ReleaseExternalFD();
	}
#endif
}

static void
aw_drain_inotify(void)
{
#ifdef AW_HAVE_INOTIFY
	char		buf[4096] pg_attribute_aligned(8);

	while (read(aw_inotify_fd, buf, sizeof(buf)) > 0)
		;
#endif
}

/* ---------------------------------------------------------------------
 * The listening connection for raw NOTIFY aion_wake_capacity.
 * ---------------------------------------------------------------------
 */

static void
aw_listen_disconnect(const char *why)
{
	if (aw_conn != NULL)
	{
		libpqsrv_disconnect(aw_conn);
		aw_conn = NULL;
		aw_conn_generation++;
	}
	aw_set_listen_state(false, why);
}

static void
aw_listen_failed(const char *what, const char *detail)
{
	char		msg[256];
	char	   *nl;

	snprintf(msg, sizeof(msg), "%s: %s", what, detail ? detail : "");
	if ((nl = strchr(msg, '\n')) != NULL)
		*nl = '\0';
	ereport(LOG,
			(errmsg("aion_wake worker is not listening for capacity pulses"),
			 errdetail("%s", msg),
			 errhint("aion_wake.pulse() keeps working. Allow the worker's connection in pg_hba.conf, or set \"%s\" to off.",
					 "aion_wake.listen")));
	aw_listen_disconnect(msg);
	aw_next_connect = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), aw_connect_delay_ms);
	aw_connect_delay_ms = Min(aw_connect_delay_ms * 2, AW_CONNECT_MAX_MS);
}

/* The role the listening connection logs in as. */
static const char *
aw_listen_role(void)
{
	return (aw_worker_role && aw_worker_role[0]) ? aw_worker_role : aw_login_role;
}

/*
 * Open the loopback connection over the first Unix socket directory (or
 * localhost when there is none) and LISTEN.
 */
static void
aw_listen_connect(void)
{
	char		port[16];
	char	   *host;
	char	   *dirs = pstrdup(Unix_socket_directories ? Unix_socket_directories : "");
	List	   *dirlist = NIL;
	const char *keywords[] = {"host", "port", "dbname", "user", "application_name",
	"options", "sslmode", "gssencmode", "connect_timeout", NULL};
	const char *values[10];
	PGresult   *res;

	host = "localhost";
	if (SplitDirectoriesString(dirs, ',', &dirlist) && dirlist != NIL &&
		((char *) linitial(dirlist))[0] != '@')
		host = (char *) linitial(dirlist);
	snprintf(port, sizeof(port), "%d", PostPortNumber);

	values[0] = host;
	values[1] = port;
	values[2] = aw_slot->dbname;
	values[3] = aw_listen_role();
	strlcpy(aw_conn_role, values[3], sizeof(aw_conn_role));
	values[4] = "aion_wake listener";
	values[5] = "-c idle_session_timeout=0 -c idle_in_transaction_session_timeout=0 -c statement_timeout=0";
	values[6] = "disable";
	values[7] = "disable";
	values[8] = "10";
	values[9] = NULL;

	aw_conn = libpqsrv_connect_params(keywords, values, false, PG_WAIT_EXTENSION);
	aw_conn_generation++;
	list_free(dirlist);
	pfree(dirs);
	if (aw_conn == NULL || PQstatus(aw_conn) != CONNECTION_OK)
	{
		aw_listen_failed("could not connect", aw_conn ? PQerrorMessage(aw_conn) : "out of memory");
		return;
	}
	res = libpqsrv_exec(aw_conn, "LISTEN aion_wake_capacity", PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		aw_listen_failed("LISTEN failed", PQerrorMessage(aw_conn));
		PQclear(res);
		return;
	}
	PQclear(res);
	if (PQsetnonblocking(aw_conn, 1) != 0)
	{
		aw_listen_failed("could not make the connection non-blocking", PQerrorMessage(aw_conn));
		return;
	}
	aw_connect_delay_ms = AW_CONNECT_MIN_MS;
	aw_set_listen_state(true, NULL);
	ereport(LOG, (errmsg("aion_wake worker is listening on channel \"%s\"", "aion_wake_capacity")));
}

/* One raw pulse: add its slots, or count and (rarely) log it. */
static void
aw_handle_raw_pulse(const char *payload)
{
	static TimestampTz last_log = 0;
	static uint64 suppressed = 0;
	char		topic[AW_TOPIC_MAXLEN + 1];
	int32_t		slots;
	AwPulseParseResult r;
	TimestampTz now;

	r = aw_parse_pulse(payload, strlen(payload), topic, &slots);
	if (r == AW_PULSE_OK)
	{
		aw_set_add_slots(topic, slots, false);
		return;
	}

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_shared->counters.bad_pulses++;
	LWLockRelease(aw_shared->lock);

	now = GetCurrentTimestamp();
	if (last_log != 0 && !TimestampDifferenceExceeds(last_log, now, AW_BAD_PULSE_LOG_MS))
	{
		suppressed++;
		return;
	}
	ereport(LOG,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("aion_wake ignored a malformed capacity pulse: %s",
					aw_pulse_parse_error(r)),
			 errdetail("The payload was \"%.64s\"%s; %llu more were ignored since the last report.",
					   payload, strlen(payload) > 64 ? "..." : "",
					   (unsigned long long) suppressed),
			 errhint("A payload is \"topic\" or \"topic:slots\", slots from 1 to %d.",
					 AW_PULSE_MAX_SLOTS)));
	last_log = now;
	suppressed = 0;
}

/* Read what the socket has and handle every notification buffered. */
static void
aw_listen_drain(void)
{
	PGnotify   *n;

	if (!PQconsumeInput(aw_conn))
	{
		aw_listen_failed("connection lost", PQerrorMessage(aw_conn));
		return;
	}
	while ((n = PQnotifies(aw_conn)) != NULL)
	{
		if (aw_listen && strcmp(n->relname, "aion_wake_capacity") == 0)
			aw_handle_raw_pulse(n->extra);
		PQfreemem(n);
	}
}

/* ---------------------------------------------------------------------
 * Work in transactions.
 * ---------------------------------------------------------------------
 */

static void
aw_begin(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	debug_query_string = activity;
	pgstat_report_activity(STATE_RUNNING, activity);
}

static void
aw_end(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	debug_query_string = NULL;
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * If the extension is installed, rebuild the set from the table: every row
 * parked for capacity whose fence is still ahead becomes a confirmed entry.
 * Returns false while the extension is not installed.
 */
static bool
aw_worker_rebuild(void)
{
	Portal		portal;
	SPIPlanPtr	plan;
	Oid			types[1] = {TIMESTAMPTZOID};
	Datum		args[1];
	int64		rows = 0;
	bool		installed;

	aw_begin("aion_wake: rebuilding the parked set");
	installed = OidIsValid(get_extension_oid("aion_wake", true));
	if (installed)
	{
		args[0] = TimestampTzGetDatum(GetCurrentTimestamp());
		plan = SPI_prepare("SELECT dispatch_key, topic, attempt, parked_at, visible_after "
						   "  FROM aion_wake.outbox "
						   " WHERE parked_at IS NOT NULL "
						   "   AND visible_after OPERATOR(pg_catalog.>) $1 "
						   " ORDER BY parked_at DESC", 1, types);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		portal = SPI_cursor_open(NULL, plan, args, NULL, true);
		for (;;)
		{
			uint64		i;

			SPI_cursor_fetch(portal, true, AW_REBUILD_FETCH);
			if (SPI_processed == 0)
				break;
			for (i = 0; i < SPI_processed; i++)
			{
				HeapTuple	tup = SPI_tuptable->vals[i];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				bool		isnull;

				if (aw_set_restore(SPI_getvalue(tup, desc, 1),
								   SPI_getvalue(tup, desc, 2),
								   DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull)),
								   DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull)),
								   DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull))))
					rows++;
			}
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(portal);
	}
	aw_end();
	aw_slot->rebuilt = installed;
	if (installed)
		ereport(LOG,
				(errmsg("aion_wake worker rebuilt the parked set of database \"%s\" from %lld parked rows",
						aw_slot->dbname, (long long) rows)));
	return installed;
}

/* Spend every pulse waiting for this database, in one transaction. */
static void
aw_worker_spend(void)
{
	aw_begin("aion_wake: re-offering parked rows");
	(void) aw_reoffer_round(NULL, 0, aw_notify_ready, NULL);
	aw_end();
}

/*
 * For topics with waiters whose next fence has passed (or is not known
 * yet): count the rows that became visible since the last look and wake as
 * many waiters, then find the next fence ahead.  Two index probes per
 * topic, on (topic, visible_after).
 */
static void
aw_worker_check_fences(void)
{
	static SPIPlanPtr count_plan = NULL;
	static SPIPlanPtr next_plan = NULL;
	AwFenceCheck checks[32];
	Oid			types[3] = {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	int			n;
	int			i;

	n = aw_waiters_due_fences(GetCurrentTimestamp(), checks, lengthof(checks));
	if (n == 0)
		return;

	aw_begin("aion_wake: looking for fences that passed");
	if (count_plan == NULL)
	{
		count_plan = SPI_prepare("SELECT pg_catalog.count(*) FROM aion_wake.outbox "
								 " WHERE topic OPERATOR(pg_catalog.=) $1 "
								 "   AND visible_after OPERATOR(pg_catalog.>) $2 "
								 "   AND visible_after OPERATOR(pg_catalog.<=) $3", 3, types);
		next_plan = SPI_prepare("SELECT pg_catalog.min(visible_after) FROM aion_wake.outbox "
								" WHERE topic OPERATOR(pg_catalog.=) $1 "
								"   AND visible_after OPERATOR(pg_catalog.>) $2", 2, types);
		if (count_plan == NULL || next_plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(count_plan);
		SPI_keepplan(next_plan);
	}
	for (i = 0; i < n; i++)
	{
		TimestampTz now = GetCurrentTimestamp();
		Datum		args[3];
		int64		visible = 0;
		TimestampTz next = DT_NOEND;
		bool		isnull;

		args[0] = CStringGetTextDatum(checks[i].topic);
		args[1] = TimestampTzGetDatum(checks[i].checked_upto);
		args[2] = TimestampTzGetDatum(now);
		if (checks[i].known)
		{
			if (SPI_execute_plan(count_plan, args, NULL, false, 1) != SPI_OK_SELECT)
				elog(ERROR, "aion_wake: fence count failed");
			visible = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
		}
		args[1] = TimestampTzGetDatum(now);
		if (SPI_execute_plan(next_plan, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "aion_wake: next fence lookup failed");
		{
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
				next = DatumGetTimestampTz(d);
		}
		aw_waiters_fence_result(checks[i].topic, now, visible, next);
	}
	aw_end();
}

/* Is there work for this database on the work list? */
static bool
aw_worker_has_work(void)
{
	dlist_iter	iter;
	bool		found = false;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	dlist_foreach(iter, &aw_shared->work)
	{
		if (dlist_container(AwTopic, work_node, iter.cur)->key.dbid == MyDatabaseId)
		{
			found = true;
			break;
		}
	}
	LWLockRelease(aw_shared->lock);
	return found;
}

/*
 * Build the set of events to wait for: the latch, postmaster death, the
 * listening socket and the postmaster.pid watch.
 */
static WaitEventSet *
aw_make_wait_set(void)
{
	WaitEventSet *set;

#if PG_VERSION_NUM >= 170000
	set = CreateWaitEventSet(NULL, 4);
#else
	set = CreateWaitEventSet(TopMemoryContext, 4);
#endif
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	if (aw_conn != NULL)
		AddWaitEventToSet(set, WL_SOCKET_READABLE, PQsocket(aw_conn), NULL, NULL);
	if (aw_inotify_fd >= 0)
		AddWaitEventToSet(set, WL_SOCKET_READABLE, aw_inotify_fd, NULL, NULL);
	return set;
}

void
aw_worker_main(Datum main_arg)
{
	int			index = DatumGetInt32(main_arg);
	bool		ready = false;
	WaitEventSet *wait_set = NULL;
	uint32		wait_generation = 0;

	aw_slot = &aw_shared->workers[index];
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(aw_slot->dbname, NULL, 0);

	/* the role the listening connection logs in as by default */
	StartTransactionCommand();
	aw_login_role = MemoryContextStrdup(TopMemoryContext,
										GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false));
	CommitTransactionCommand();

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_slot->dbid = MyDatabaseId;
	aw_slot->pid = MyProcPid;
	aw_slot->procno = AW_MY_PROCNO;
	aw_slot->started_at = GetCurrentTimestamp();
	aw_slot->listening = false;
	aw_slot->rebuilt = false;
	LWLockRelease(aw_shared->lock);
	before_shmem_exit(aw_worker_detach, (Datum) 0);
	aw_set_listen_state(false, NULL);

	/* entries a previous incarnation left in flight go back */
	aw_set_recover_in_flight();
	aw_watch_postmaster_pid();

	for (;;)
	{
		WaitEvent	events[4];
		TimestampTz now;
		TimestampTz next;
		long		timeout = -1;
		int			nevents;
		int			i;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (!aw_listen && aw_conn != NULL)
				aw_listen_disconnect("aion_wake.listen is off");
			if (aw_conn != NULL && strcmp(aw_conn_role, aw_listen_role()) != 0)
			{
				aw_listen_disconnect(NULL);
				aw_next_connect = 0;
				aw_connect_delay_ms = AW_CONNECT_MIN_MS;
			}
		}

		/* without inotify, look at postmaster.pid on every wake */
		if (aw_inotify_fd < 0)
			aw_pid_file_changed = true;
		if (aw_pid_file_changed && !aw_stopping && aw_postmaster_stopping())
		{
			aw_stopping = true;
			aw_listen_disconnect("the server is shutting down");
		}

		now = GetCurrentTimestamp();
		if (aw_listen && !aw_stopping && aw_conn == NULL && now >= aw_next_connect)
			aw_listen_connect();
		if (aw_conn != NULL)
			aw_listen_drain();

		if (!ready)
			ready = aw_worker_rebuild();
		if (ready && aw_worker_has_work())
			aw_worker_spend();
		if (ready)
			aw_worker_check_fences();

		/* sleep until an event or the next deadline */
		now = GetCurrentTimestamp();
		next = aw_set_expire(now);
		{
			TimestampTz fence = aw_waiters_next_fence();
			TimestampTz retry = aw_set_next_retry();

			if (fence != 0 && (next == 0 || fence < next))
				next = fence;
			if (retry != 0 && (next == 0 || retry < next))
				next = retry;
		}
		if (aw_listen && !aw_stopping && aw_conn == NULL &&
			(next == 0 || aw_next_connect < next))
			next = aw_next_connect;
		if (next != 0)
			timeout = Max(0, (long) ((next - now + 999) / 1000));
		/* without inotify, a connection held open needs a look now and then */
		if (aw_inotify_fd < 0 && aw_conn != NULL && (timeout < 0 || timeout > 2000))
			timeout = 2000;
		aw_pid_file_changed = false;

		if (wait_set == NULL || wait_generation != aw_conn_generation)
		{
			if (wait_set != NULL)
				FreeWaitEventSet(wait_set);
			wait_set = aw_make_wait_set();
			wait_generation = aw_conn_generation;
		}
		nevents = WaitEventSetWait(wait_set, timeout, events, lengthof(events),
								   PG_WAIT_EXTENSION);
		for (i = 0; i < nevents; i++)
		{
			if ((events[i].events & WL_SOCKET_READABLE) && events[i].fd == aw_inotify_fd)
			{
				aw_drain_inotify();
				aw_pid_file_changed = true;
			}
		}
	}
}
