/*-------------------------------------------------------------------------
 *
 * worker_slots.c
 *	  One slot per database named in aion_wake.database: who its worker is,
 *	  how to wake it, and what happens to it when its database is dropped,
 *	  renamed or created.
 *
 *	  Everything that sets a worker's latch goes through here, and so does
 *	  the parsing of aion_wake.database (folded like identifiers, duplicates
 *	  dropped: one database, one worker).
 *
 *	  A worker connected to a database would make DROP DATABASE and ALTER
 *	  DATABASE ... RENAME of it fail ("being accessed by other users"), and
 *	  a worker whose database is gone would be restarted by the postmaster
 *	  every two seconds, failing each time.  So a utility hook marks the
 *	  slot of a database that such a statement is taking away (ddl_pid) and
 *	  wakes its worker, which leaves (as autovacuum does); the worker that
 *	  the postmaster starts next waits, without connecting, until the
 *	  statement has ended.  If the database is then gone, or whenever the
 *	  worker fails to connect, the slot is marked db_missing and the worker
 *	  waits, idle, until a CREATE DATABASE, ALTER DATABASE or RENAME TO of
 *	  that name commits, or the configuration is reloaded.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/worker_slots.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "aw_plans.h"
#include "aw_settings.h"
#include "aw_worker_slots.h"

typedef struct AwWorkerSlots
{
	int			nslots;
	AwWorkerSlot slots[AW_MAX_WORKERS];
} AwWorkerSlots;

static AwWorkerSlots *aw_slots = NULL;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* slots whose database this backend's transaction takes away or brings */
static int	aw_leaving_slot = -1;
static int	aw_arriving_slot = -1;

/* this transaction creates or updates the extension: wake the worker */
static bool aw_extension_changed = false;

/* a set_limit(), set_rate(), pause() or resume() writes its table now */
static bool aw_settings_by_call = false;
static bool aw_xact_callback_registered = false;

Size
aw_worker_slots_shmem_size(void)
{
	return MAXALIGN(sizeof(AwWorkerSlots));
}

/*
 * Attach to (or create) the slots.  Called from shmem_startup_hook with
 * AddinShmemInitLock held.
 */
void
aw_worker_slots_shmem_init(void)
{
	bool		found;

	aw_slots = ShmemInitStruct("aion_wake worker slots", sizeof(AwWorkerSlots), &found);
	if (!found)
	{
		List	   *names = aw_database_names(false);
		ListCell   *lc;

		memset(aw_slots, 0, sizeof(AwWorkerSlots));
		foreach(lc, names)
		{
			AwWorkerSlot *slot = &aw_slots->slots[aw_slots->nslots++];

			strlcpy(slot->dbname, (char *) lfirst(lc), NAMEDATALEN);
			slot->dbid = InvalidOid;
			slot->procno = -1;
			SpinLockInit(&slot->mutex);
		}
	}
}

/*
 * The databases named in aion_wake.database, folded like identifiers, each
 * once, at most AW_MAX_WORKERS.  The postmaster parses it twice (to
 * register workers, warn set, and to size their slots), always the same
 * way.
 */
List *
aw_database_names(bool warn)
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
		char	   *name = (char *) lfirst(lc);
		ListCell   *seen;
		bool		duplicate = false;

		foreach(seen, result)
			duplicate |= (strcmp((char *) lfirst(seen), name) == 0);
		if (duplicate)
		{
			if (warn)
				ereport(WARNING,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("database \"%s\" is named more than once in \"%s\"",
								name, "aion_wake.database"),
						 errdetail("It gets one worker.")));
			continue;
		}
		if (list_length(result) >= AW_MAX_WORKERS)
		{
			if (warn)
				ereport(WARNING,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("aion_wake serves at most %d databases", AW_MAX_WORKERS),
						 errdetail("Database \"%s\" and those after it in \"%s\" get no worker.",
								   name, "aion_wake.database")));
			break;
		}
		result = lappend(result, pstrdup(name));
	}
	return result;
}

/*
 * Is the current database named in aion_wake.database?  Worked out once per
 * session: the setting only changes with a restart.
 */
bool
aw_database_is_served(void)
{
	static int	served = -1;

	if (served < 0)
	{
		char	   *dbname = get_database_name(MyDatabaseId);

		served = (dbname != NULL && aw_worker_slot_named(dbname) != NULL) ? 1 : 0;
	}
	return served == 1;
}

/* The slot of the index-th served database (the worker's own). */
AwWorkerSlot *
aw_worker_slot(int index)
{
	Assert(index >= 0 && index < aw_slots->nslots);
	return &aw_slots->slots[index];
}

/*
 * The slot whose worker serves a database, or NULL.  Slots are matched by
 * the OID the worker published, so a slot whose worker has never connected
 * serves nothing yet.
 */
AwWorkerSlot *
aw_worker_slot_for(Oid dbid)
{
	int			i;

	for (i = 0; i < aw_slots->nslots; i++)
	{
		if (aw_slots->slots[i].dbid == dbid)
			return &aw_slots->slots[i];
	}
	return NULL;
}

/* The slot of a database named in aion_wake.database, or NULL. */
AwWorkerSlot *
aw_worker_slot_named(const char *dbname)
{
	int			i;

	for (i = 0; i < aw_slots->nslots; i++)
	{
		if (strcmp(aw_slots->slots[i].dbname, dbname) == 0)
			return &aw_slots->slots[i];
	}
	return NULL;
}

/* Set the latch of a slot's worker, if one runs.  Never raises. */
static void
aw_wake_slot(AwWorkerSlot *slot)
{
	int			pid = slot->pid;
	int			procno = slot->procno;

	if (pid != 0 && procno >= 0 && GetPGProcByNumber(procno)->pid == pid)
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

/*
 * Set the latch of the worker serving a database, if one runs.  Safe in a
 * COMMIT callback: it never raises.
 */
void
aw_wake_worker(Oid dbid)
{
	AwWorkerSlot *slot = aw_worker_slot_for(dbid);

	if (slot != NULL)
		aw_wake_slot(slot);
}

/*
 * A park in a database whose worker has not rebuilt the set yet (it waits
 * for the extension to exist): wake it, so the rebuild happens now rather
 * than at the next pulse.
 */
void
aw_nudge_worker(Oid dbid)
{
	AwWorkerSlot *slot = aw_worker_slot_for(dbid);

	if (slot != NULL && !slot->rebuilt)
		aw_wake_slot(slot);
}

/* ---------------------------------------------------------------------
 * DROP, RENAME and CREATE of a served database.
 * ---------------------------------------------------------------------
 */

static int
aw_slot_index_named(const char *dbname)
{
	AwWorkerSlot *slot = dbname ? aw_worker_slot_named(dbname) : NULL;

	return slot ? (int) (slot - aw_slots->slots) : -1;
}

static void aw_ddl_xact_callback(XactEvent event, void *arg);

/*
 * The settings of the slot's database must be loaded again.  The count
 * tells a load that began before this (and may have read the tables as
 * they were) not to mark them loaded when it ends (aw_worker_load_limits).
 * Never raises.
 */
void
aw_worker_slot_unload(AwWorkerSlot *slot)
{
	SpinLockAcquire(&slot->mutex);
	slot->limits_loaded = false;
	slot->limits_gen++;
	SpinLockRelease(&slot->mutex);
}

/*
 * Run a set_limit(), set_rate(), pause() or resume() statement on its
 * table: those apply to the set themselves, at their commit, so their
 * writes are not news to the worker (aw_settings_written).
 */
uint64
aw_settings_run(SPIPlanPtr plan, Datum *args, int expected)
{
	uint64		n;

	aw_settings_by_call = true;
	PG_TRY();
	{
		n = aw_plan_run(plan, args, NULL, expected);
	}
	PG_FINALLY();
	{
		aw_settings_by_call = false;
	}
	PG_END_TRY();
	return n;
}

/*
 * The statement trigger of aion_wake.limits, rates and pauses: rows
 * written there other than by set_limit(), set_rate(), pause() or
 * resume() -- pg_restore --data-only, a COPY or an INSERT of a dump --
 * are in no shared memory.  The worker of a served database that has
 * loaded its settings is not told otherwise, and claims would go on
 * without them (no rate, no pause, no limit).  At the commit its mark is
 * cleared, as after CREATE EXTENSION: claims take nothing of those topics
 * until the worker has loaded them (a rate with a full window).
 */
PG_FUNCTION_INFO_V1(aw_settings_written);

Datum
aw_settings_written(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("aion_wake.settings_written() may only be called as a trigger")));
	if (!aw_settings_by_call)
	{
		aw_extension_changed = true;
		if (!aw_xact_callback_registered)
		{
			RegisterXactCallback(aw_ddl_xact_callback, NULL);
			aw_xact_callback_registered = true;
		}
	}
	return PointerGetDatum(NULL);
}

/*
 * The transaction that dropped, renamed or created a database ended.
 * COMMIT: a database taken away is missing now (its worker keeps waiting),
 * and one brought under a served name wakes its waiting worker.  ABORT:
 * nothing was taken away; the worker connects again.  Never raises.
 */
static void
aw_ddl_xact_callback(XactEvent event, void *arg)
{
	bool		commit = (event == XACT_EVENT_COMMIT ||
						  event == XACT_EVENT_PARALLEL_COMMIT);

	if (!commit && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	if (aw_extension_changed && commit)
	{
		AwWorkerSlot *slot = aw_worker_slot_for(MyDatabaseId);

		/*
		 * a new aion_wake.limits (or the first, from 1.0), or settings
		 * written by hand: load them again
		 */
		if (slot != NULL)
			aw_worker_slot_unload(slot);
		aw_wake_worker(MyDatabaseId);
	}
	aw_extension_changed = false;
	if (aw_leaving_slot >= 0)
	{
		AwWorkerSlot *slot = &aw_slots->slots[aw_leaving_slot];

		SpinLockAcquire(&slot->mutex);
		slot->ddl_pid = 0;
		if (commit)
		{
			slot->db_missing = true;
			slot->dbid = InvalidOid;
		}
		SpinLockRelease(&slot->mutex);
		aw_wake_slot(slot);
		aw_leaving_slot = -1;
	}
	if (aw_arriving_slot >= 0)
	{
		AwWorkerSlot *slot = &aw_slots->slots[aw_arriving_slot];

		if (commit)
		{
			SpinLockAcquire(&slot->mutex);
			slot->db_missing = false;
			SpinLockRelease(&slot->mutex);
			aw_wake_slot(slot);
		}
		aw_arriving_slot = -1;
	}
}

/*
 * The utility hook: before DROP DATABASE or ALTER DATABASE ... RENAME of a
 * served database, make its worker leave (the statement itself waits up to
 * five seconds for other sessions to go); after CREATE DATABASE, ALTER
 * DATABASE or a RENAME TO a served name, wake its worker at commit.  CREATE
 * and ALTER EXTENSION aion_wake wake this database's worker at commit, so
 * that it rebuilds the set, or takes in a new schema, at once.
 */
static void
aw_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	const char *leaving = NULL;
	const char *arriving = NULL;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			leaving = ((DropdbStmt *) parsetree)->dbname;
			break;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
			{
				leaving = ((RenameStmt *) parsetree)->subname;
				arriving = ((RenameStmt *) parsetree)->newname;
			}
			break;
		case T_CreatedbStmt:
			arriving = ((CreatedbStmt *) parsetree)->dbname;
			break;
		case T_AlterDatabaseStmt:
			arriving = ((AlterDatabaseStmt *) parsetree)->dbname;
			break;
		case T_CreateExtensionStmt:
			aw_extension_changed |=
				strcmp(((CreateExtensionStmt *) parsetree)->extname, "aion_wake") == 0;
			break;
		case T_AlterExtensionStmt:
			aw_extension_changed |=
				strcmp(((AlterExtensionStmt *) parsetree)->extname, "aion_wake") == 0;
			break;
		default:
			break;
	}
	if (aw_extension_changed && !aw_xact_callback_registered)
	{
		RegisterXactCallback(aw_ddl_xact_callback, NULL);
		aw_xact_callback_registered = true;
	}
	if (aw_slot_index_named(leaving) >= 0 || aw_slot_index_named(arriving) >= 0)
	{
		if (!aw_xact_callback_registered)
		{
			RegisterXactCallback(aw_ddl_xact_callback, NULL);
			aw_xact_callback_registered = true;
		}
		aw_arriving_slot = aw_slot_index_named(arriving);
		aw_leaving_slot = aw_slot_index_named(leaving);
		if (aw_leaving_slot >= 0)
		{
			AwWorkerSlot *slot = &aw_slots->slots[aw_leaving_slot];

			SpinLockAcquire(&slot->mutex);
			slot->ddl_pid = MyProcPid;
			SpinLockRelease(&slot->mutex);
			aw_wake_slot(slot);
		}
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/* Install the utility hook (from _PG_init, when preloaded). */
void
aw_worker_slots_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = aw_process_utility;
}
