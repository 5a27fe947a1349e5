/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background worker: one per database named in aion_wake.database.
 *
 *	  The worker rebuilds the parked set from the table when it starts,
 *	  spends the pulses that backends leave on the topics' counters (setting
 *	  its latch at COMMIT), expires entries whose fence has passed, and
 *	  spends raw NOTIFY aion_wake_capacity pulses.  The connection that
 *	  receives those, and its part of the wait, are src/listener.c's; the
 *	  worker parses each payload it hands over (aw_handle_raw_pulse).
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

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "aion_wake.h"
#include "aw_listener.h"
#include "aw_pulse_parse.h"
#include "aw_reoffer.h"
#include "aw_limits.h"
#include "aw_rates.h"
#include "aw_plans.h"
#include "aw_lease_ledger.h"
#include "aw_parked_set.h"
#include "aw_pulse_spend.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker.h"
#include "aw_worker_slots.h"

/* restart delay after a failure, seconds */
#define AW_WORKER_RESTART_SECS	2
/* at most one log line per this many ms for malformed pulses */
#define AW_BAD_PULSE_LOG_MS		10000
/* how often the worker tries again to load limits it could not */
#define AW_LIMITS_RETRY_MS 250

/* a load of limits left some out: when to try again, and whether it was said */
static TimestampTz aw_limits_retry_at = 0;
static bool aw_limits_load_failed = false;

/* rows read per fetch while rebuilding the set */
#define AW_REBUILD_FETCH		1000

/* a raw pulse for a topic the set does not hold (aw_handle_raw_pulse) */
typedef struct AwUnknownPulse
{
	char		topic[AW_TOPIC_MAXLEN + 1];	/* hash key: must be first */
	int64		slots;
} AwUnknownPulse;

static AwWorkerSlot *aw_slot = NULL;
static HTAB *aw_unknown_pulses = NULL;

/*
 * Register one worker per database.  Called from _PG_init in the postmaster.
 */
void
aw_register_workers(void)
{
	List	   *names = aw_database_names(true);
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
aw_worker_detach(int code, Datum arg)
{
	aw_listener_exit();
	SpinLockAcquire(&aw_slot->mutex);
	aw_slot->pid = 0;
	aw_slot->procno = -1;
	aw_slot->connected = false;
	aw_slot->listening = false;
	SpinLockRelease(&aw_slot->mutex);
}

/* ---------------------------------------------------------------------
 * Raw pulses, as the listener hands them over.
 * ---------------------------------------------------------------------
 */

/*
 * One raw pulse: add its slots, or count and (rarely) log it.  A pulse for
 * a topic the set does not know yet waits in aw_unknown_pulses until the
 * worker has looked in the outbox for a row of that topic
 * (aw_admit_unknown_pulses): a raw NOTIFY can come from any role, and
 * junk topic names must not fill the topic table.
 */
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
		if (aw_set_add_slots(topic, slots, false))
			(void) aw_waiters_wake_spender(MyDatabaseId, topic);
		else
		{
			AwUnknownPulse *u;
			bool		found;

			if (aw_unknown_pulses == NULL)
			{
				HASHCTL		ctl;

				ctl.keysize = AW_TOPIC_MAXLEN + 1;
				ctl.entrysize = sizeof(AwUnknownPulse);
				ctl.hcxt = CurrentMemoryContext;
				aw_unknown_pulses = hash_create("aion_wake unknown pulses", 64, &ctl,
												HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
			}
			u = hash_search(aw_unknown_pulses, topic, HASH_ENTER, &found);
			u->slots = (found ? Min(u->slots + slots, PG_INT64_MAX / 2) : slots);
		}
		return;
	}

	aw_set_count_ignored_pulse(true);

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

/* ---------------------------------------------------------------------
 * Work in transactions.
 * ---------------------------------------------------------------------
 */

static void aw_begin(const char *activity);
static void aw_end(void);

/*
 * Raw pulses for topics the set does not hold: those with a row in the
 * outbox make their topic and are spent, the rest are counted and
 * ignored.  One index probe per topic, in one transaction.
 */
static void
aw_admit_unknown_pulses(bool installed)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {TEXTOID};
	HASH_SEQ_STATUS status;
	AwUnknownPulse *u;

	if (aw_unknown_pulses == NULL)
		return;
	if (installed)
		aw_begin("aion_wake: looking up the topics of raw pulses");
	hash_seq_init(&status, aw_unknown_pulses);
	while ((u = hash_seq_search(&status)) != NULL)
	{
		bool		known = false;

		if (installed)
		{
			Datum		args[1];

			args[0] = CStringGetTextDatum(u->topic);
			known = aw_plan_run(aw_plan_prepare(&plan,
												"SELECT 1 FROM aion_wake.outbox "
												" WHERE topic OPERATOR(pg_catalog.=) $1 LIMIT 1",
												1, types),
								args, NULL, SPI_OK_SELECT) > 0;
		}
		if (known && aw_set_add_slots(u->topic, u->slots, true))
			(void) aw_waiters_wake_spender(MyDatabaseId, u->topic);
		else if (!known)
			aw_set_count_ignored_pulse(false);
	}
	if (installed)
		aw_end();
	aw_unknown_pulses = NULL;	/* in the loop's memory context */
}

static void
aw_begin(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();

	/*
	 * Whatever default_transaction_isolation says: a re-offer judges each
	 * row by its latest committed state, and every statement must see the
	 * parks committed before it (set before the first snapshot is taken).
	 */
	XactIsoLevel = XACT_READ_COMMITTED;
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
 * The OID of the extension in this database, or InvalidOid.  Read from
 * pg_extension with the transaction's fresh catalog snapshot, not through
 * get_extension_oid(): from PostgreSQL 18 that looks the name up in a
 * catalog cache, which can keep a "not found" from an earlier look until
 * the creating transaction's invalidations arrive -- and they are sent
 * after the COMMIT callback that woke the worker for it (worker_slots.c),
 * so the worker would sleep on.
 */
static Oid
aw_extension_oid(void)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	Oid			extoid = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("aion_wake"));
	rel = table_open(ExtensionRelationId, AccessShareLock);
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		extoid = ((Form_pg_extension) GETSTRUCT(tup))->oid;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return extoid;
}

/*
 * Is the extension installed in this database?  If it is, lock it against
 * DROP EXTENSION until the transaction ends.  The rebuild reads
 * aion_wake.limits and then aion_wake.outbox; DROP EXTENSION locks the
 * extension first and then its tables one by one, so without this a DROP
 * right after a start could lock one table while the worker held the
 * other, and one of them died of a deadlock.
 */
static bool
aw_extension_lock(void)
{
	Oid			extoid = aw_extension_oid();

	if (!OidIsValid(extoid))
		return false;
	LockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock);
	/* a DROP that held it has committed meanwhile: look again */
	return aw_extension_oid() == extoid;
}

/*
 * Load this database's limits, each with its topic's live leases, into the
 * set (limits.c): one short transaction lists them, and one per topic
 * loads it, so that a topic lock is held only while its own leases are
 * counted.  A topic whose lock someone holds (a prepared transaction may,
 * for ever), or that the topic table or the lease pool has no room for,
 * is left for the next try; its claims take nothing meanwhile.  Returns
 * true, and marks the slot, when every limit is loaded.
 */
static bool
aw_worker_load_limits(void)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr plan_rates = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	List	   *topics = NIL;
	ListCell   *lc;
	Oid			table = InvalidOid;
	bool		all = true;
	bool		rates = false;
	uint32		gen;

	/* before the tables are read: a clearing after this loads them again */
	SpinLockAcquire(&aw_slot->mutex);
	gen = aw_slot->limits_gen;
	SpinLockRelease(&aw_slot->mutex);

	aw_begin("aion_wake: loading limits");
	if (aw_extension_lock() && aw_schema_version() >= 11)
	{
		uint64		n;
		uint64		i;

		table = aw_limits_table();
		rates = OidIsValid(aw_rates_table());
		if (rates)
			n = aw_plan_run(aw_plan_prepare(&plan_rates,
											"SELECT topic FROM aion_wake.limits UNION "
											"SELECT topic FROM aion_wake.rates UNION "
											"SELECT topic FROM aion_wake.pauses ORDER BY topic",
											0, NULL),
							NULL, NULL, SPI_OK_SELECT);
		else
			n = aw_plan_run(aw_plan_prepare(&plan,
											"SELECT topic FROM aion_wake.limits ORDER BY topic",
											0, NULL),
							NULL, NULL, SPI_OK_SELECT);
		for (i = 0; i < n; i++)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			topics = lappend(topics, SPI_getvalue(SPI_tuptable->vals[i],
												  SPI_tuptable->tupdesc, 1));
			MemoryContextSwitchTo(old);
		}
	}
	aw_end();
	MemoryContextSwitchTo(cxt);

	foreach(lc, topics)
	{
		AwLoadResult r = AW_LOAD_DONE;

		aw_begin("aion_wake: loading a limit");
		if (aw_extension_lock())
		{
			r = aw_limits_load_topic((char *) lfirst(lc));
			if (r == AW_LOAD_DONE && rates && !aw_rates_load_topic((char *) lfirst(lc)))
				r = AW_LOAD_FULL;
		}
		aw_end();
		MemoryContextSwitchTo(cxt);
		if (r != AW_LOAD_DONE)
		{
			all = false;
			if (!aw_limits_load_failed)
				ereport(LOG,
						(errmsg("aion_wake worker could not load the limit of topic \"%s\" in database \"%s\" yet",
								(char *) lfirst(lc), aw_slot->dbname),
						 errdetail(r == AW_LOAD_BUSY ?
								   "Another transaction holds the topic's lock." :
								   "The topic table, the lease pool or the pool of rates has no room for it."),
						 errhint("Claims of the topic take nothing until it is loaded; the worker retries every %d ms.",
								 AW_LIMITS_RETRY_MS)));
		}
	}
	aw_limits_load_failed = !all;
	aw_limits_retry_at = all ? 0 :
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), AW_LIMITS_RETRY_MS);
	if (all)
	{
		/*
		 * Unless the settings were written behind this load's back (a
		 * restore's COPY, CREATE or DROP EXTENSION committed while it ran):
		 * then the clearing woke this worker, which loads them again.
		 */
		SpinLockAcquire(&aw_slot->mutex);
		aw_slot->limits_table = table;
		aw_slot->limits_loaded = (aw_slot->limits_gen == gen);
		SpinLockRelease(&aw_slot->mutex);
		if (topics != NIL)
			ereport(LOG,
					(errmsg("aion_wake worker loaded %d limits of database \"%s\"",
							list_length(topics), aw_slot->dbname)));
	}
	return all;
}

/*
 * If the extension is installed, rebuild the set from the table: every row
 * parked for capacity whose fence is still ahead becomes a confirmed entry.
 * Returns false while the extension is not installed.
 */
static bool
aw_worker_rebuild(void)
{
	static SPIPlanPtr rebuild_plan = NULL;
	static const Oid types[1] = {TIMESTAMPTZOID};
	Portal		portal;
	SPIPlanPtr	plan;
	Datum		args[1];
	int64		rows = 0;
	bool		installed;

	/* the limits first: claims of a limited topic take nothing before */
	(void) aw_worker_load_limits();

	aw_begin("aion_wake: rebuilding the parked set");
	installed = aw_extension_lock();
	if (installed)
	{
		args[0] = TimestampTzGetDatum(GetCurrentTimestamp());
		plan = aw_plan_prepare(&rebuild_plan,
							   "SELECT dispatch_key, topic, attempt, parked_at, visible_after "
							   "  FROM aion_wake.outbox "
							   " WHERE parked_at IS NOT NULL "
							   "   AND visible_after OPERATOR(pg_catalog.>) $1 "
							   " ORDER BY parked_at DESC", 1, types);
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

/*
 * Spend every pulse waiting for this database: topic by topic, each round
 * of a re-offer in a transaction of its own, so a huge pulse never holds
 * one long transaction (nor its memory).  A topic whose slots were handed
 * to a blocked claimer is left to it: its rounds take nothing
 * (aw_take_topic), and the claimer wakes the worker for what it leaves.
 */
static void
aw_worker_spend(void)
{
	List	   *topics = aw_set_work_topics();
	ListCell   *lc;

	foreach(lc, topics)
	{
		AwReoffer	r;

		aw_reoffer_start(&r);
		while (!r.done)
		{
			aw_begin("aion_wake: re-offering parked rows");
			(void) aw_reoffer_step((char *) lfirst(lc), 0, &r, aw_notify_ready, NULL);
			aw_end();
		}
	}
}

/*
 * For topics with waiters whose next fence has passed (or is not known
 * yet): count the rows whose fence passed since the last look, up to the
 * number of waiters, and wake as many; and find the next fence ahead.  One
 * statement per topic does both, in batches until no topic is due: two
 * index probes on (topic, visible_after); from the 1.2 schema, on (topic,
 * priority DESC, visible_after), a walk down the topic's priorities
 * (AW_TOPIC_PRIORITIES), made once for both, and two range probes per
 * priority.
 */
static void
aw_worker_check_fences(void)
{
	static SPIPlanPtr plans[2];	/* before 1.2, from 1.2 */
	static const Oid types[4] = {TEXTOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID};
	AwFenceCheck checks[32];
	int			n;
	int			i;

	while ((n = aw_waiters_due_fences(GetCurrentTimestamp(), checks, lengthof(checks))) > 0)
	{
		SPIPlanPtr	plan;

		aw_begin("aion_wake: looking for fences that passed");
		if (aw_schema_version() >= 12)
			plan = aw_plan_prepare(&plans[1],
								   AW_TOPIC_PRIORITIES("$1")
								   "SELECT (SELECT pg_catalog.count(*) FROM ("
								   "          SELECT 1 FROM r, "
								   "            LATERAL (SELECT 1 FROM aion_wake.outbox o "
								   "                      WHERE o.topic OPERATOR(pg_catalog.=) $1 "
								   "                        AND o.priority OPERATOR(pg_catalog.=) r.p "
								   "                        AND o.visible_after OPERATOR(pg_catalog.<=) $2 "
								   "                        AND o.visible_after OPERATOR(pg_catalog.>) $4 "
								   "                      LIMIT $3) x "
								   "           LIMIT $3) v), "
								   "       (SELECT pg_catalog.min(x.m) FROM r, "
								   "          LATERAL (SELECT pg_catalog.min(o.visible_after) AS m "
								   "                     FROM aion_wake.outbox o "
								   "                    WHERE o.topic OPERATOR(pg_catalog.=) $1 "
								   "                      AND o.priority OPERATOR(pg_catalog.=) r.p "
								   "                      AND o.visible_after OPERATOR(pg_catalog.>) $2) x)",
								   4, types);
		else
			plan = aw_plan_prepare(&plans[0],
								   "SELECT (SELECT pg_catalog.count(*) FROM ("
								   "          SELECT 1 FROM aion_wake.outbox "
								   "           WHERE topic OPERATOR(pg_catalog.=) $1 "
								   "             AND visible_after OPERATOR(pg_catalog.<=) $2 "
								   "             AND visible_after OPERATOR(pg_catalog.>) $4 "
								   "           LIMIT $3) v), "
								   "       (SELECT pg_catalog.min(visible_after) FROM aion_wake.outbox "
								   "         WHERE topic OPERATOR(pg_catalog.=) $1 "
								   "           AND visible_after OPERATOR(pg_catalog.>) $2)",
								   4, types);
		for (i = 0; i < n; i++)
		{
			TimestampTz now = GetCurrentTimestamp();
			Datum		args[4];
			int64		visible;
			int32		free_slots;
			TimestampTz next = DT_NOEND;
			bool		isnull;
			Datum		d;

			args[0] = CStringGetTextDatum(checks[i].topic);
			args[1] = TimestampTzGetDatum(now);
			args[2] = Int32GetDatum(checks[i].waiters);
			args[3] = TimestampTzGetDatum(checks[i].checked_upto);
			(void) aw_plan_run(plan, args, NULL, SPI_OK_SELECT);
			visible = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
			if (!isnull)
				next = DatumGetTimestampTz(d);

			/*
			 * Of a limited topic, only as many as it has free slots.  Rows
			 * became claimable: say so first, so that a claim whose
			 * reservation is counted here, and which returns it unused
			 * because it looked before these fences passed, wakes one
			 * (doc/design.md, Wake rules: 3).
			 */
			if (visible > 0)
				aw_waiters_mark_ready(MyDatabaseId, checks[i].topic);
			free_slots = aw_ledger_free_slots(checks[i].topic);
			if (free_slots >= 0)
				visible = Min(visible, free_slots);
			aw_waiters_fence_result(checks[i].topic, now, visible, next);
		}
		aw_end();
	}
}

/* the most events the worker waits for at once */
#define AW_WORKER_WAIT_EVENTS	(2 + AW_LISTENER_WAIT_EVENTS)

/*
 * Build the set of events to wait for: the latch, postmaster death, and
 * the listener's (its socket and the postmaster.pid watch).
 */
static WaitEventSet *
aw_make_wait_set(void)
{
	WaitEventSet *set;

	set = aw_create_wait_event_set(AW_WORKER_WAIT_EVENTS);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	aw_listener_add_wait_events(set);
	return set;
}

/*
 * Wait, without connecting, while the slot's database is being dropped or
 * renamed, or is missing (a connection attempt failed: the database does
 * not exist or refuses connections).  A CREATE, ALTER or RENAME TO of the
 * database, or a configuration reload, ends the wait (worker_slots.c).
 * One LOG line says so; the wait costs nothing.
 */
static void
aw_worker_wait_for_database(void)
{
	bool		logged = false;

	for (;;)
	{
		bool		missing;
		bool		ddl;

		SpinLockAcquire(&aw_slot->mutex);
		missing = aw_slot->db_missing;
		ddl = (aw_slot->ddl_pid != 0);
		/* published so that the statement that brings it back can wake us */
		aw_slot->pid = (missing || ddl) ? MyProcPid : 0;
		aw_slot->procno = (missing || ddl) ? AW_MY_PROCNO : -1;
		SpinLockRelease(&aw_slot->mutex);
		if (!missing && !ddl)
			return;
		if (!logged)
			ereport(LOG,
					(errmsg("aion_wake worker is waiting for database \"%s\"", aw_slot->dbname),
					 ddl ? errdetail("The database is being dropped or renamed.") :
					 errdetail("The database does not exist or does not accept connections."),
					 errhint("The worker connects when a database of that name is created, altered or renamed to it, or when the configuration is reloaded.")));
		logged = true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L,
						 aw_wait_event_wait_database());
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			SpinLockAcquire(&aw_slot->mutex);
			aw_slot->db_missing = false;
			SpinLockRelease(&aw_slot->mutex);
		}
	}
}

/*
 * Connect to the slot's database and publish this worker in its slot.  A
 * failed connection ends the process with FATAL before db_missing is
 * cleared, so the next start waits instead of failing again.
 */
static void
aw_worker_attach(void)
{
	SpinLockAcquire(&aw_slot->mutex);
	aw_slot->db_missing = true;
	SpinLockRelease(&aw_slot->mutex);

	BackgroundWorkerInitializeConnection(aw_slot->dbname, NULL, 0);

	aw_listener_init(aw_slot, aw_handle_raw_pulse);

	SpinLockAcquire(&aw_slot->mutex);
	aw_slot->db_missing = false;
	aw_slot->dbid = MyDatabaseId;
	aw_slot->pid = MyProcPid;
	aw_slot->procno = AW_MY_PROCNO;
	aw_slot->started_at = GetCurrentTimestamp();
	aw_slot->connected = true;
	aw_slot->listening = false;
	aw_slot->listen_error[0] = '\0';
	aw_slot->rebuilt = false;
	aw_slot->limits_loaded = false;
	SpinLockRelease(&aw_slot->mutex);
	before_shmem_exit(aw_worker_detach, (Datum) 0);
}

/* A configuration reload: the listening connection may have to change. */
static void
aw_worker_reload(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	aw_listener_reload();
}

/*
 * A DROP DATABASE or RENAME of this database has begun: leave it, as
 * autovacuum does, so that the statement can go on.  The postmaster starts
 * the worker again, which waits for the statement to end.
 */
static void
aw_worker_leave_if_asked(void)
{
	if (aw_slot->ddl_pid == 0)
		return;
	/* the worker started next says it waits, with why: one LOG line */
	aw_listener_close("the database is being dropped or renamed");
	proc_exit(1);
}

/*
 * When the worker must look again although nothing wakes it: the next
 * fence to expire or to wake waiters at, the next retry of a locked row,
 * the next lease to end, the listener's next look (its next attempt to
 * connect), the next moment a topic a rate or a pause held back may start
 * rows.  Leases whose end has passed are released here, each waking one
 * blocked claimer, and so are the claimers of those topics that may start
 * rows now, one per start.  Returns 0 for none.
 */
static TimestampTz
aw_worker_next_deadline(TimestampTz now)
{
	TimestampTz next = aw_set_expire(now);
	TimestampTz fence = aw_waiters_next_fence();
	TimestampTz retry = aw_set_next_retry();
	TimestampTz lease_end = aw_limits_expire(now);
	TimestampTz rate = aw_rates_wake(now);
	TimestampTz listener = aw_listener_next_deadline(now);

	if (fence != 0 && (next == 0 || fence < next))
		next = fence;
	if (retry != 0 && (next == 0 || retry < next))
		next = retry;
	if (lease_end != 0 && (next == 0 || lease_end < next))
		next = lease_end;
	if (rate != 0 && (next == 0 || rate < next))
		next = rate;
	if (aw_limits_retry_at != 0 && !aw_slot->limits_loaded &&
		(next == 0 || aw_limits_retry_at < next))
		next = aw_limits_retry_at;
	if (listener != 0 && (next == 0 || listener < next))
		next = listener;
	return next;
}

/*
 * The worker's main loop: wake, take in pulses, spend them, wake waiters
 * whose fences passed, sleep until the next event or deadline.  Each pass
 * allocates in a memory context that is reset at its end.
 */
void
aw_worker_main(Datum main_arg)
{
	bool		ready = false;
	WaitEventSet *wait_set = NULL;
	uint32		wait_generation = 0;
	MemoryContext loop_cxt;

	aw_slot = aw_worker_slot(DatumGetInt32(main_arg));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	aw_worker_wait_for_database();
	aw_worker_attach();

	/* entries a process that is gone left in flight go back */
	aw_set_recover_in_flight();
	aw_listener_watch_shutdown();

	loop_cxt = AllocSetContextCreate(TopMemoryContext, "aion_wake worker loop",
									 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		WaitEvent	events[AW_WORKER_WAIT_EVENTS];
		TimestampTz now;
		TimestampTz next;
		long		timeout = -1;
		int			nevents;
		int			i;

		MemoryContextSwitchTo(loop_cxt);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			aw_worker_reload();
		aw_worker_leave_if_asked();

		/* pulses in (and the listening connection's shutdown watch) */
		aw_listener_poll();

		/* work */
		if (!ready)
			ready = aw_worker_rebuild();
		else if (!aw_slot->limits_loaded &&
				 GetCurrentTimestamp() >= aw_limits_retry_at)
			(void) aw_worker_load_limits();
		aw_admit_unknown_pulses(ready);
		if (ready && aw_set_has_work())
			aw_worker_spend();
		if (ready)
			aw_worker_check_fences();

		/* sleep until an event or the next deadline */
		now = GetCurrentTimestamp();
		next = aw_worker_next_deadline(now);
		/*
		 * WaitEventSetWait takes at most INT_MAX ms (it asserts so, and
		 * hands the timeout on as an int): a deadline further ahead, such
		 * as the end of pause(topic, now() + '30 days'), is looked at again
		 * after that long, instead of being cut to a negative int (wait
		 * for ever) or tripping the assertion.
		 */
		if (next != 0)
			timeout = (long) Max(0, Min((next - now + 999) / 1000, (int64) INT_MAX));

		/*
		 * Linux lets an epoll timeout fire up to 0.1 % of its length late
		 * (at most 100 ms): a wake at the end of a rate's window of 50 s
		 * came 50 ms late (bench/rates).  A long wait sleeps its last
		 * second as a wait of its own, whose slack is 1 ms: one more look
		 * per long wait, never a poll.
		 */
		if (timeout > 2000)
			timeout -= 1000;

		if (wait_set == NULL || wait_generation != aw_listener_generation())
		{
			if (wait_set != NULL)
				FreeWaitEventSet(wait_set);
			wait_set = aw_make_wait_set();
			wait_generation = aw_listener_generation();
		}
		MemoryContextReset(loop_cxt);
		nevents = WaitEventSetWait(wait_set, timeout, events, lengthof(events),
								   aw_wait_event_worker());
		for (i = 0; i < nevents; i++)
			aw_listener_event(&events[i]);
	}
}
