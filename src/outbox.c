/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  The SQL functions of the row life cycle: enqueue, claim, complete,
 *	  fail, park, dead_letter, pulse and reoffer.
 *
 *	  Each works on aion_wake.outbox through SPI, in the caller's
 *	  transaction and with the caller's privileges, using statements
 *	  prepared once per backend in which every name and operator is
 *	  schema-qualified.  Times come from the clock at the call, never from
 *	  the transaction's start.  What a function means for the parked set is
 *	  recorded with aw_xact.h and settled when the transaction ends.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "tcop/utility.h"
#include "utils/resowner.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "storage/ipc.h"

#include "aw_args.h"
#include "aw_plans.h"
#include "aw_reoffer.h"
#include "aw_set.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_enqueue);
PG_FUNCTION_INFO_V1(aw_claim);
PG_FUNCTION_INFO_V1(aw_complete);
PG_FUNCTION_INFO_V1(aw_fail);
PG_FUNCTION_INFO_V1(aw_park);
PG_FUNCTION_INFO_V1(aw_dead_letter);
PG_FUNCTION_INFO_V1(aw_pulse);
PG_FUNCTION_INFO_V1(aw_reoffer);

/* the columns of aion_wake.outbox, in order */
#define AW_OUTBOX_NATTS 9

/* one kept plan per statement */
typedef enum AwStmt
{
	AW_STMT_ENQUEUE,
	AW_STMT_CLAIM,
	AW_STMT_COMPLETE,
	AW_STMT_FAIL,
	AW_STMT_PARK,
	AW_STMT_DEAD_LETTER,
	AW_STMT_NEXT_FENCE,
	AW_NUM_STMTS
} AwStmt;

static SPIPlanPtr aw_plans[AW_NUM_STMTS];
static bool aw_claim_exit_registered = false;

/*
 * A kept plan for one of the statements of this file, prepared on first use
 * (see plans.c).  The lease_token match is "$n IS NULL OR lease_token = $n":
 * a NULL token means any lease.
 */
static SPIPlanPtr
aw_stmt(AwStmt stmt)
{
	static const struct
	{
		const char *sql;
		int			nargs;
		Oid			types[5];
	}			stmts[AW_NUM_STMTS] = {
		[AW_STMT_ENQUEUE] = {
			"INSERT INTO aion_wake.outbox AS o "
			"  (dispatch_key, topic, payload, visible_after, enqueued_at) "
			"VALUES ($1, $2, $3, $4, $5) ON CONFLICT (dispatch_key) DO NOTHING",
			5, {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
		},
		[AW_STMT_CLAIM] = {
			/*
			 * The UPDATE finds its rows through "= ANY (ARRAY(...))" on the
			 * primary key rather than a join with c: with LIMIT $3 the
			 * planner guesses c holds a tenth of the table and would hash
			 * join against a sequential scan in the generic plan.
			 */
			"WITH c AS (SELECT dispatch_key, visible_after AS old_fence, "
			"                  parked_at IS NOT NULL AS was_parked "
			"             FROM aion_wake.outbox "
			"            WHERE topic OPERATOR(pg_catalog.=) $1 "
			"              AND visible_after OPERATOR(pg_catalog.<=) $2 "
			"            ORDER BY visible_after LIMIT $3 "
			"              FOR UPDATE SKIP LOCKED), "
			"u AS (UPDATE aion_wake.outbox o "
			"         SET visible_after = $4, parked_at = NULL, "
			"             lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass) "
			"       WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.dispatch_key FROM c)) "
			"   RETURNING o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
			"             o.enqueued_at, o.last_error, o.lease_token, o.parked_at) "
			"SELECT u.*, c.old_fence, c.was_parked "
			"  FROM u JOIN c ON u.dispatch_key OPERATOR(pg_catalog.=) c.dispatch_key "
			" ORDER BY c.old_fence, u.dispatch_key",
			4, {TEXTOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID}
		},
		[AW_STMT_COMPLETE] = {
			"DELETE FROM aion_wake.outbox "
			" WHERE dispatch_key OPERATOR(pg_catalog.=) $1 "
			"   AND ($2 IS NULL OR lease_token OPERATOR(pg_catalog.=) $2) "
			"RETURNING parked_at IS NOT NULL",
			2, {TEXTOID, INT8OID}
		},
		[AW_STMT_FAIL] = {
			"UPDATE aion_wake.outbox "
			"   SET attempt = attempt OPERATOR(pg_catalog.+) 1, visible_after = $3, "
			"       last_error = $2, parked_at = NULL "
			" WHERE dispatch_key OPERATOR(pg_catalog.=) $1 "
			"   AND ($4 IS NULL OR lease_token OPERATOR(pg_catalog.=) $4) "
			"RETURNING topic",
			4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID}
		},
		[AW_STMT_PARK] = {
			/*
			 * The row as it was before this park (locked first, so it is the
			 * latest committed version) is what a rollback returns to.  Both
			 * sides look the row up by its key.
			 */
			"WITH b AS (SELECT visible_after, parked_at FROM aion_wake.outbox "
			"            WHERE dispatch_key OPERATOR(pg_catalog.=) $1 FOR UPDATE) "
			"UPDATE aion_wake.outbox o SET visible_after = $2, parked_at = $3 "
			"  FROM b "
			" WHERE o.dispatch_key OPERATOR(pg_catalog.=) $1 "
			"   AND ($4 IS NULL OR o.lease_token OPERATOR(pg_catalog.=) $4) "
			"RETURNING o.topic, o.attempt, b.visible_after, b.parked_at",
			4, {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
		},
		[AW_STMT_DEAD_LETTER] = {
			"WITH d AS (DELETE FROM aion_wake.outbox "
			"            WHERE dispatch_key OPERATOR(pg_catalog.=) $1 "
			"              AND ($3 IS NULL OR lease_token OPERATOR(pg_catalog.=) $3) "
			"           RETURNING *) "
			"INSERT INTO aion_wake.dead_letters AS l "
			"SELECT d.dispatch_key, d.topic, d.payload, d.attempt, d.visible_after, "
			"       d.enqueued_at, d.last_error, d.lease_token, d.parked_at, $2, $4 "
			"  FROM d "
			"ON CONFLICT (dispatch_key) DO UPDATE SET topic = EXCLUDED.topic, "
			"   payload = EXCLUDED.payload, attempt = EXCLUDED.attempt, "
			"   visible_after = EXCLUDED.visible_after, enqueued_at = EXCLUDED.enqueued_at, "
			"   last_error = EXCLUDED.last_error, lease_token = EXCLUDED.lease_token, "
			"   parked_at = EXCLUDED.parked_at, reason = EXCLUDED.reason, "
			"   dead_at = EXCLUDED.dead_at",
			4, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID}
		},
		[AW_STMT_NEXT_FENCE] = {
			"SELECT pg_catalog.min(visible_after) FROM aion_wake.outbox "
			" WHERE topic OPERATOR(pg_catalog.=) $1 "
			"   AND visible_after OPERATOR(pg_catalog.>) $2",
			2, {TEXTOID, TIMESTAMPTZOID}
		},
	};

	return aw_plan_prepare(&aw_plans[stmt], stmts[stmt].sql, stmts[stmt].nargs,
						   stmts[stmt].types);
}

/*
 * Run a kept statement.  nulls follows SPI's convention (' ' or 'n').
 */
static uint64
aw_run(AwStmt stmt, Datum *args, const char *nulls, int expected)
{
	return aw_plan_run(aw_stmt(stmt), args, nulls, expected);
}

/* Every writing function: the table is read-only during recovery. */
static void
aw_begin_write(const char *fname)
{
	aw_require_loaded();
	PreventCommandDuringRecovery(fname);
}

/* The optional lease_token argument. */
static inline void
aw_arg_token(FunctionCallInfo fcinfo, int argno, Datum *value, char *null)
{
	*null = PG_ARGISNULL(argno) ? 'n' : ' ';
	*value = PG_ARGISNULL(argno) ? (Datum) 0 : PG_GETARG_DATUM(argno);
}

static TimestampTz
aw_clock_plus(TimestampTz now, int64 us)
{
	TimestampTz result;

	if (pg_add_s64_overflow(now, us, &result) || !IS_VALID_TIMESTAMP(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return result;
}

/*
 * A row of topic now has fence `fence`, written at `now`: at commit, a
 * waiter wakes for it at once, or the worker learns of the fence.
 */
static void
aw_record_visibility(const char *topic, TimestampTz fence, TimestampTz now)
{
	if (fence <= now)
		aw_xact_record_ready(topic, 1);
	else
		aw_xact_record_fence(topic, fence);
}

/*
 * enqueue(dispatch_key, payload, topic, delay): insert a row; false when the
 * key is already there.
 */
Datum
aw_enqueue(PG_FUNCTION_ARGS)
{
	char	   *key;
	char	   *topic;
	int64		delay;
	TimestampTz now;
	Datum		args[5];
	uint64		n;

	aw_begin_write("aion_wake.enqueue()");
	key = aw_arg_key(fcinfo, 0);
	aw_arg_not_null(fcinfo, 1, "payload");
	topic = aw_arg_topic(fcinfo, 2);
	delay = aw_arg_interval_us(fcinfo, 3, "delay");
	now = GetCurrentTimestamp();

	args[0] = CStringGetTextDatum(key);
	args[1] = CStringGetTextDatum(topic);
	args[2] = PG_GETARG_DATUM(1);
	args[3] = TimestampTzGetDatum(aw_clock_plus(now, delay));
	args[4] = TimestampTzGetDatum(now);

	SPI_connect();
	n = aw_run(AW_STMT_ENQUEUE, args, NULL, SPI_OK_INSERT);
	SPI_finish();
	if (n == 1)
		aw_record_visibility(topic, DatumGetTimestampTz(args[3]), now);
	PG_RETURN_BOOL(n == 1);
}

/*
 * A set of dispatch keys, to look them up in O(1): the rows a waiting claim
 * re-offered itself.
 */
static HTAB *
aw_key_set(List *keys)
{
	HASHCTL		ctl;
	HTAB	   *set;
	ListCell   *lc;

	ctl.keysize = AW_KEY_MAXLEN + 1;
	ctl.entrysize = AW_KEY_MAXLEN + 1;
	ctl.hcxt = CurrentMemoryContext;
	set = hash_create("aion_wake re-offered keys", list_length(keys), &ctl,
					  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	foreach(lc, keys)
		(void) hash_search(set, lfirst(lc), HASH_ENTER, NULL);
	return set;
}

/*
 * One claim attempt: lease up to max_rows visible rows into the result
 * tuplestore.  Returns the number claimed.  Caller is connected to SPI.
 */
static uint64
aw_claim_once(ReturnSetInfo *rsinfo, const char *topic, int32 max_rows, int64 lease,
			  HTAB *moved, int *claimed_moved)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz fence = aw_clock_plus(now, lease);
	Datum		args[4];
	uint64		n;
	uint64		i;

	args[0] = CStringGetTextDatum(topic);
	args[1] = TimestampTzGetDatum(now);
	args[2] = Int32GetDatum(max_rows);
	args[3] = TimestampTzGetDatum(fence);

	n = aw_run(AW_STMT_CLAIM, args, NULL, SPI_OK_SELECT);
	for (i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Datum		values[AW_OUTBOX_NATTS];
		bool		nulls[AW_OUTBOX_NATTS];
		bool		isnull;
		int			a;

		for (a = 0; a < AW_OUTBOX_NATTS; a++)
			values[a] = SPI_getbinval(tup, desc, a + 1, &nulls[a]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);

		/* a claimed row is no longer parked: forget its entry at commit */
		if (DatumGetBool(SPI_getbinval(tup, desc, AW_OUTBOX_NATTS + 2, &isnull)))
			aw_xact_record_forget(TextDatumGetCString(values[0]));

		/* a row this claimer re-offered itself needs no other waiter */
		if (moved != NULL)
		{
			char		k[AW_KEY_MAXLEN + 1];

			text_to_cstring_buffer(DatumGetTextPP(values[0]), k, sizeof(k));
			if (hash_search(moved, k, HASH_FIND, NULL) != NULL)
				(*claimed_moved)++;
		}
	}
	/*
	 * The lease is a fence: an abandoned claim reappears to waiters when it
	 * passes; a claim that rolls back gives its rows back at once.
	 */
	if (n > 0)
	{
		aw_xact_record_fence(topic, fence);
		aw_xact_record_claimed(topic, n);
	}
	return n;
}

/*
 * In a database no worker serves, nobody wakes waiters when a fence passes:
 * a waiter looks up the next fence of its topic itself and sleeps no
 * longer than that.  Returns milliseconds, or LONG_MAX when none is ahead.
 */
static long
aw_ms_until_next_fence(const char *topic, TimestampTz now)
{
	Datum		args[2];
	bool		isnull;
	Datum		d;

	args[0] = CStringGetTextDatum(topic);
	args[1] = TimestampTzGetDatum(now);
	(void) aw_run(AW_STMT_NEXT_FENCE, args, NULL, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return LONG_MAX;
	return (long) ((DatumGetTimestampTz(d) - now + 999) / 1000);
}

/*
 * One probe of a waiting claim: spend a pulse of the topic if one is
 * waiting, then claim.  Returns true if it claimed or moved rows.
 *
 * The probe runs in a subtransaction of its own, rolled back when it finds
 * nothing.  FOR UPDATE SKIP LOCKED in READ COMMITTED follows a row that was
 * updated after the statement's snapshot, locks its newest version, and
 * keeps that lock even when the version no longer qualifies (a row claimed
 * or re-parked meanwhile).  A claimer that then went to sleep would hold
 * the lock for the rest of its wait, and complete(), park() or a re-offer
 * of that row would wait for it (measured: 2 s stalls in the headline
 * benchmark).  Rolling the probe back releases such locks before sleeping.
 */
static bool
aw_claim_probe(ReturnSetInfo *rsinfo, const char *topic, int32 max_rows,
			   int64 lease, bool served)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	List	   *moved = NIL;
	int			claimed_moved = 0;
	bool		found;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		HTAB	   *moved_set = NULL;

		/*
		 * A pulse of this topic is handed to a waiter rather than to the
		 * worker (aw_set_add_slots): spending it here saves the worker's
		 * transaction and a wake-up on the way from a freed slot to a
		 * claimed row.  Rows moved here are locked by this transaction, so
		 * the claim below takes them; the ones it does not take wake others.
		 */
		if (served && aw_set_topic_has_work(topic))
			(void) aw_reoffer_topic(topic, 0, aw_notify_ready, &moved);
		if (moved != NIL)
			moved_set = aw_key_set(moved);
		found = aw_claim_once(rsinfo, topic, max_rows, lease, moved_set, &claimed_moved) > 0 ||
			moved != NIL;
		if (list_length(moved) > claimed_moved)
			aw_xact_record_ready(topic, list_length(moved) - claimed_moved);
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

	if (found)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
	return found;
}

/*
 * Leave the waiter registry.  A pulse is handed to a blocked claimer rather
 * than to the worker (aw_waiters_wake_for), so if slots of the topic are
 * still unspent when this claimer leaves without passing a wake on -- it
 * was cancelled before its probe spent them, say -- the worker is woken to
 * spend them.  Never raises.
 */
static void
aw_claim_leave(void)
{
	char		topic[AW_TOPIC_MAXLEN + 1];

	if (aw_waiter_leave(topic) && aw_set_topic_has_work(topic))
		aw_wake_worker(MyDatabaseId);
}

/* A backend that exits while waiting leaves the registry the same way. */
static void
aw_claim_exit(int code, Datum arg)
{
	aw_claim_leave();
}

/*
 * The blocking part of claim(wait => ...): register as a waiter, then
 * repeat reset latch, probe, sleep until a row is claimed or the wait ends.
 * The latch is set by a commit that makes a row of the topic claimable, or
 * by the worker when a fence passes; cancel and statement_timeout set it
 * too and end the wait at CHECK_FOR_INTERRUPTS.
 */
static void
aw_claim_wait(ReturnSetInfo *rsinfo, const char *topic, int32 max_rows,
			  int64 lease, int64 wait)
{
	TimestampTz deadline;
	bool		served;

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("claim() cannot wait under REPEATABLE READ or SERIALIZABLE"),
				 errdetail("A waiting claim must see rows committed while it waits."),
				 errhint("Use READ COMMITTED, or call claim() with wait => '0'.")));
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("claim() cannot wait in a transaction that has already written"),
				 errdetail("The transaction would hold its locks and its transaction ID for the whole wait."),
				 errhint("Call claim() with wait in a transaction of its own.")));

	deadline = aw_clock_plus(GetCurrentTimestamp(), Min(wait, (int64) aw_max_wait_ms * 1000));
	served = aw_database_is_served();
	if (!aw_claim_exit_registered)
	{
		/* runs after the transaction is aborted and before ProcKill */
		on_shmem_exit(aw_claim_exit, (Datum) 0);
		aw_claim_exit_registered = true;
	}
	aw_waiter_register(topic);
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;
			long		timeout;

			ResetLatch(MyLatch);
			aw_waiter_rearm();
			if (aw_claim_probe(rsinfo, topic, max_rows, lease, served))
				break;
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			timeout = (long) ((deadline - now + 999) / 1000);
			if (!served)
				timeout = Min(timeout, aw_ms_until_next_fence(topic, now));
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, PG_WAIT_EXTENSION);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		aw_claim_leave();
		PG_RE_THROW();
	}
	PG_END_TRY();
	aw_claim_leave();
}

/*
 * claim(topic, max_rows, lease, wait): lease visible rows of a topic, oldest
 * fence first, skipping rows other claimers hold.  With wait > 0 and
 * nothing visible, block until a row is ready or wait passes.
 */
Datum
aw_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *topic;
	int32		max_rows;
	int64		lease;
	int64		wait;

	aw_begin_write("aion_wake.claim()");
	topic = aw_arg_topic(fcinfo, 0);
	max_rows = aw_arg_int_range(fcinfo, 1, "max_rows", 1, AW_MAX_ROWS_LIMIT);
	lease = aw_arg_interval_us(fcinfo, 2, "lease");
	wait = aw_arg_interval_us(fcinfo, 3, "wait");

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	if (wait > 0 && aw_max_wait_ms > 0)
		aw_claim_wait(rsinfo, topic, max_rows, lease, wait);
	else
		(void) aw_claim_once(rsinfo, topic, max_rows, lease, NULL, NULL);
	SPI_finish();
	return (Datum) 0;
}

/*
 * complete(dispatch_key, lease_token): delivered, delete the row.
 */
Datum
aw_complete(PG_FUNCTION_ARGS)
{
	char	   *key;
	Datum		args[2];
	char		nulls[3] = "  ";
	uint64		n;
	bool		was_parked = false;

	aw_begin_write("aion_wake.complete()");
	key = aw_arg_key(fcinfo, 0);
	args[0] = CStringGetTextDatum(key);
	aw_arg_token(fcinfo, 1, &args[1], &nulls[1]);

	SPI_connect();
	n = aw_run(AW_STMT_COMPLETE, args, nulls, SPI_OK_DELETE_RETURNING);
	if (n == 1)
	{
		bool		isnull;

		was_parked = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	if (was_parked)
		aw_xact_record_forget(key);
	PG_RETURN_BOOL(n == 1);
}

/*
 * fail(dispatch_key, error, backoff, lease_token): a real failed delivery:
 * attempt + 1, fence at clock + backoff, no longer parked.
 */
Datum
aw_fail(PG_FUNCTION_ARGS)
{
	char	   *key;
	int64		backoff;
	TimestampTz now;
	Datum		args[4];
	char		nulls[5] = "    ";
	uint64		n;

	aw_begin_write("aion_wake.fail()");
	key = aw_arg_key(fcinfo, 0);
	backoff = aw_arg_interval_us(fcinfo, 2, "backoff");
	now = GetCurrentTimestamp();
	args[0] = CStringGetTextDatum(key);
	if (PG_ARGISNULL(1))
		nulls[1] = 'n';
	else
		args[1] = PG_GETARG_DATUM(1);
	args[2] = TimestampTzGetDatum(aw_clock_plus(now, backoff));
	aw_arg_token(fcinfo, 3, &args[3], &nulls[3]);

	SPI_connect();
	n = aw_run(AW_STMT_FAIL, args, nulls, SPI_OK_UPDATE_RETURNING);
	if (n == 1)
	{
		aw_xact_record_forget(key);
		aw_record_visibility(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
							 DatumGetTimestampTz(args[2]), now);
	}
	SPI_finish();
	PG_RETURN_BOOL(n == 1);
}

/*
 * park(dispatch_key, backoff, lease_token): BUSY.  Write the fence in this
 * transaction (the UPDATE takes the row's lock before the set is touched),
 * remember the row as pending, confirm at COMMIT, forget at ROLLBACK.
 */
Datum
aw_park(PG_FUNCTION_ARGS)
{
	char	   *key;
	int64		backoff;
	TimestampTz now;
	TimestampTz fence;
	Datum		args[4];
	char		nulls[5] = "    ";
	uint64		n;
	char	   *topic = NULL;
	int32		attempt = 0;
	AwSavedEntry before;

	aw_begin_write("aion_wake.park()");
	key = aw_arg_key(fcinfo, 0);
	backoff = aw_arg_interval_us(fcinfo, 1, "backoff");
	now = GetCurrentTimestamp();
	fence = aw_clock_plus(now, backoff);
	args[0] = CStringGetTextDatum(key);
	args[1] = TimestampTzGetDatum(fence);
	args[2] = TimestampTzGetDatum(now);
	aw_arg_token(fcinfo, 2, &args[3], &nulls[3]);

	SPI_connect();
	n = aw_run(AW_STMT_PARK, args, nulls, SPI_OK_UPDATE_RETURNING);
	if (n == 1)
	{
		bool		isnull;

		topic = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		topic = MemoryContextStrdup(CurTransactionContext, topic);
		attempt = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 2, &isnull));

		/* if the row was parked before, a rollback must restore its entry */
		memset(&before, 0, sizeof(before));
		before.parked_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 4,
															 &isnull));
		before.valid = !isnull;
		before.fence = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 3, &isnull));
		before.attempt = attempt;
		strlcpy(before.topic, topic, sizeof(before.topic));
	}
	SPI_finish();
	if (n != 1)
		PG_RETURN_BOOL(false);

	aw_record_visibility(topic, fence, now);
	if (!aw_database_is_served())
		aw_warn_unserved_once();
	else
	{
		/* recorded before the set changes, so nothing can fail in between */
		AwParkRecord *rec = aw_xact_prepare_park(key);
		AwParkResult r;

		r = aw_set_park(AW_KIND_FENCED, key, topic, attempt, now, fence,
						&rec->generation, &rec->saved);
		if (r == AW_PARK_OK)
		{
			if (!rec->saved.valid)
				rec->saved = before;
			aw_nudge_worker(MyDatabaseId);
		}
		else
		{
			rec->generation = 0;
			aw_warn_park_failed(r, key, true);
		}
	}
	PG_RETURN_BOOL(true);
}

/*
 * dead_letter(dispatch_key, reason, lease_token): move the row to
 * aion_wake.dead_letters.
 */
Datum
aw_dead_letter(PG_FUNCTION_ARGS)
{
	char	   *key;
	Datum		args[4];
	char		nulls[5] = "    ";
	uint64		n;

	aw_begin_write("aion_wake.dead_letter()");
	key = aw_arg_key(fcinfo, 0);
	args[0] = CStringGetTextDatum(key);
	if (PG_ARGISNULL(1))
		nulls[1] = 'n';
	else
		args[1] = PG_GETARG_DATUM(1);
	aw_arg_token(fcinfo, 2, &args[2], &nulls[2]);
	args[3] = TimestampTzGetDatum(GetCurrentTimestamp());

	SPI_connect();
	n = aw_run(AW_STMT_DEAD_LETTER, args, nulls, SPI_OK_INSERT);
	SPI_finish();
	if (n == 1)
		aw_xact_record_forget(key);
	PG_RETURN_BOOL(n == 1);
}

/*
 * pulse(topic, slots): k slots of a topic freed.  Delivered at COMMIT; the
 * pulses of one transaction add up.
 */
Datum
aw_pulse(PG_FUNCTION_ARGS)
{
	char	   *topic;
	int32		slots;

	aw_begin_write("aion_wake.pulse()");
	topic = aw_arg_topic(fcinfo, 0);
	slots = aw_arg_int_range(fcinfo, 1, "slots", 1, AW_PULSE_MAX_SLOTS);
	/* with no worker to spend them, slots would only pile up */
	if (aw_database_is_served())
		aw_xact_record_pulse(topic, slots);
	else
		aw_warn_unserved_once();
	PG_RETURN_VOID();
}

/*
 * reoffer(topic, max_rows): spend max_rows slots of a topic now, in this
 * transaction, exactly as the worker spends a pulse.  Returns the rows
 * re-offered.  For operators and tests; the worker does this by itself.
 */
Datum
aw_reoffer(PG_FUNCTION_ARGS)
{
	char	   *topic;
	int32		max_rows;
	int64		n;

	aw_begin_write("aion_wake.reoffer()");
	topic = aw_arg_topic(fcinfo, 0);
	max_rows = aw_arg_int_range(fcinfo, 1, "max_rows", 1, AW_MAX_ROWS_LIMIT);

	SPI_connect();
	n = aw_reoffer_topic(topic, max_rows, false, NULL);
	SPI_finish();
	PG_RETURN_INT64(n);
}
