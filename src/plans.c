/*-------------------------------------------------------------------------
 *
 * plans.c
 *	  Kept plans for aion_wake's own statements, always index plans.
 *
 *	  Every statement aion_wake runs touches a handful of rows of
 *	  aion_wake.outbox through an index, whatever its parameters, so each is
 *	  prepared once per backend and its generic plan is kept
 *	  (CURSOR_OPT_GENERIC_PLAN): re-planning per call would cost more than
 *	  the statement.  A kept plan is built from the statistics of the moment,
 *	  though, and a plan built while the table held three rows scans it
 *	  sequentially -- and keeps doing so at a million rows until something
 *	  invalidates it.  So aion_wake's statements are always planned with
 *	  sequential and bitmap scans disabled: the planner hook below recognises
 *	  them by a comment that aw_plan_prepare puts at the head of their text,
 *	  and plans them (first, and again after any invalidation) with
 *	  enable_seqscan and enable_bitmapscan off.  The statements themselves
 *	  are written so that every access to the outbox has an index condition
 *	  (a key, "= ANY" of keys, a topic, a LATERAL lookup per key) and no
 *	  subquery can be turned into a hashed scan of the whole table; the
 *	  planner then has nothing but index plans to choose from.  They are
 *	  also planned with jit off: a generic plan's cost is estimated without
 *	  the parameters' values ("visible_after <= $3" is taken to match a
 *	  third of the table), so it grows with the table, and past a few
 *	  hundred thousand rows the claim's is above jit_above_cost; the
 *	  executor would then compile the plan's expressions at every
 *	  execution (about 10 ms) to lease one row.  Statements of other code,
 *	  including triggers that run inside ours, are planned as usual.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/attnum.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "jit/jit.h"
#include "optimizer/cost.h"
#include "optimizer/planner.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "aw_compat.h"
#include "aw_plans.h"

/* the head of every statement aion_wake prepares */
#define AW_PLAN_TAG "/* aion_wake */ "

static planner_hook_type prev_planner_hook = NULL;

/* the installed schema's version, 0 until looked up (aw_schema_version) */
static int	aw_schema = 0;
static bool aw_schema_callback_registered = false;

static PlannedStmt *
aw_planner(AW_PLANNER_HOOK_PARAMS)
{
	PlannedStmt *result;
	bool		save_seqscan = enable_seqscan;
	bool		save_bitmapscan = enable_bitmapscan;
	bool		save_jit = jit_enabled;
	bool		ours = (query_string != NULL &&
						strncmp(query_string, AW_PLAN_TAG, strlen(AW_PLAN_TAG)) == 0);

	if (ours)
	{
		enable_seqscan = false;
		enable_bitmapscan = false;
		jit_enabled = false;
	}
	PG_TRY();
	{
		if (prev_planner_hook)
			result = prev_planner_hook(AW_PLANNER_HOOK_ARGS);
		else
			result = standard_planner(AW_PLANNER_HOOK_ARGS);
	}
	PG_FINALLY();
	{
		enable_seqscan = save_seqscan;
		enable_bitmapscan = save_bitmapscan;
		jit_enabled = save_jit;
	}
	PG_END_TRY();
	return result;
}

/* Install the planner hook (from _PG_init, when preloaded). */
void
aw_plans_init(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = aw_planner;
}

/*
 * Prepare one of aion_wake's statements, once per backend: *cache keeps the
 * plan.  The caller is connected to SPI.
 */
SPIPlanPtr
aw_plan_prepare(SPIPlanPtr *cache, const char *sql, int nargs, const Oid *argtypes)
{
	if (*cache == NULL)
	{
		char	   *tagged = psprintf("%s%s", AW_PLAN_TAG, sql);
		SPIPlanPtr	plan = SPI_prepare_cursor(tagged, nargs, (Oid *) argtypes,
											  CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed for \"%s\"", sql);
		pfree(tagged);
		*cache = plan;
	}
	return *cache;
}

/*
 * Run a kept plan; raise if SPI does not answer `expected`.  nulls follows
 * SPI's convention (' ' or 'n', NULL for none).  Returns the rows processed.
 */
uint64
aw_plan_run(SPIPlanPtr plan, Datum *args, const char *nulls, int expected)
{
	int			rc = SPI_execute_plan(plan, args, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "aion_wake statement failed: %s (expected %s)",
			 SPI_result_code_string(rc), SPI_result_code_string(expected));
	return SPI_processed;
}

/*
 * aw_plan_run, read only, with a snapshot taken now instead of the
 * caller's: for counts and checks that must see every committed row even
 * under REPEATABLE READ (a snapshot taken after a lock was granted sees
 * what the lock's holder committed).
 */
uint64
aw_plan_run_latest(SPIPlanPtr plan, Datum *args, const char *nulls, int expected)
{
	int			rc = SPI_execute_snapshot(plan, args, nulls, GetLatestSnapshot(),
										  InvalidSnapshot, true, false, 0);

	if (rc != expected)
		elog(ERROR, "aion_wake statement failed: %s (expected %s)",
			 SPI_result_code_string(rc), SPI_result_code_string(expected));
	return SPI_processed;
}

static void
aw_schema_forget(Datum arg, Oid relid)
{
	aw_schema = 0;
}

/*
 * The version of the installed schema this library serves: 12 once
 * aion_wake.outbox has priority (1.2), 11 once it has leased_until (1.1),
 * 10 before (1.0; the library keeps serving an older schema until ALTER
 * EXTENSION ... UPDATE).  Looked up in
 * the catalogs once and kept until a relcache invalidation, which ALTER
 * EXTENSION UPDATE (ALTER TABLE ... ADD COLUMN) and DROP/CREATE EXTENSION
 * send.  Caller is in a transaction.
 */
int
aw_schema_version(void)
{
	if (!aw_schema_callback_registered)
	{
		CacheRegisterRelcacheCallback(aw_schema_forget, (Datum) 0);
		aw_schema_callback_registered = true;
	}
	if (aw_schema == 0)
	{
		Oid			nsp = get_namespace_oid("aion_wake", true);
		Oid			rel = OidIsValid(nsp) ? get_relname_relid("outbox", nsp) : InvalidOid;

		if (OidIsValid(rel) && get_attnum(rel, "priority") != InvalidAttrNumber)
			aw_schema = 12;
		else if (OidIsValid(rel) && get_attnum(rel, "leased_until") != InvalidAttrNumber)
			aw_schema = 11;
		else
			aw_schema = 10;
	}
	return aw_schema;
}

/*
 * Run fn(arg) in an internal subtransaction of its own: kept (released
 * into the caller's transaction) when fn returns true, rolled back when it
 * returns false, rolled back with the error re-thrown when it raises.  The
 * caller's memory context and resource owner are restored in every case.
 * Returns what fn returned.
 */
bool
aw_in_subtransaction(bool (*fn) (void *arg), void *arg)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	bool		keep = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		keep = fn(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	if (keep)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
	return keep;
}
