/*-------------------------------------------------------------------------
 *
 * limits.c
 *	  Known capacity: set_limit(), the topic locks that keep a limit exact,
 *	  and loading limits and live leases from the table into the set.
 *
 *	  A limit lives in two places: the row of aion_wake.limits (durable,
 *	  written by set_limit() in the caller's transaction) and the topic in
 *	  the parked set (where claims reserve its slots, applied at commit).
 *	  Leases taken while the topic had no limit count against it from its
 *	  commit, so set_limit() reads the topic's live leases (leased_until
 *	  ahead) and the set takes them in.  To make that count exact, every
 *	  claim and every settle holds a lock on its topic in share mode until
 *	  its transaction ends, and set_limit() takes it exclusively before it
 *	  counts: no claim or settle of the topic can then change leased_until
 *	  until the limit applies (doc/design.md, Exactness rules: 1).  The
 *	  lock is a heavyweight lock on a database object that exists nowhere
 *	  else (pg_extension, the topic's hash, sub-id AW_TOPIC_LOCK_SUBID); in
 *	  pg_locks it is an "object" lock.
 *
 *	  When shared memory is new (postmaster start, crash restart) the set
 *	  holds no limit: the first claim, settle or set_limit() of a database,
 *	  or its worker at start, loads them from aion_wake.limits, with each
 *	  topic's live leases, under the same exclusive topic locks.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/limits.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "aw_args.h"
#include "aw_limits.h"
#include "aw_plans.h"
#include "aw_set.h"
#include "aw_waiters.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_set_limit);

/* the object sub-id that sets topic locks apart from real pg_extension locks */
#define AW_TOPIC_LOCK_SUBID 0xA10E

static SPIPlanPtr aw_live_leases_plan = NULL;

/*
 * Lock a topic of this database until the end of the transaction: claims
 * and settles in AccessShareLock, set_limit() and the loading of limits in
 * AccessExclusiveLock.  Two topics whose names hash alike share a lock,
 * which only costs some waiting.
 */
void
aw_lock_topic(const char *topic, LOCKMODE mode)
{
	uint32		h = hash_bytes((const unsigned char *) topic, (int) strlen(topic));

	LockDatabaseObject(ExtensionRelationId, (Oid) h, AW_TOPIC_LOCK_SUBID, mode);
}

/*
 * The live leases of a topic, from the table: rows whose leased_until is
 * ahead.  Returns them in an array allocated in TopTransactionContext (the
 * commit callback applies them), their number in *n.  Caller is connected
 * to SPI and holds the topic's lock exclusively.
 */
static AwLiveLease *
aw_read_live_leases(const char *topic, int32 *n)
{
	static const Oid types[2] = {TEXTOID, TIMESTAMPTZOID};
	Datum		args[2];
	AwLiveLease *leases;
	uint64		i;

	args[0] = CStringGetTextDatum(topic);
	args[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	(void) aw_plan_run(aw_plan_prepare(&aw_live_leases_plan,
									   "SELECT dispatch_key, lease_token, leased_until "
									   "  FROM aion_wake.outbox "
									   " WHERE topic OPERATOR(pg_catalog.=) $1 "
									   "   AND leased_until OPERATOR(pg_catalog.>) $2 "
									   "   AND lease_token IS NOT NULL",
									   2, types),
					   args, NULL, SPI_OK_SELECT);
	if (SPI_processed > (uint64) aw_max_leases)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("topic \"%s\" has more live leases than the lease pool holds", topic),
				 errdetail("It has %llu live leases; \"%s\" is %d.",
						   (unsigned long long) SPI_processed, "aion_wake.max_leases",
						   aw_max_leases),
				 errhint("Wait for the leases to end, or increase \"%s\".",
						 "aion_wake.max_leases")));
	*n = (int32) SPI_processed;
	leases = MemoryContextAllocZero(TopTransactionContext,
									sizeof(AwLiveLease) * Max(*n, 1));
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		text_to_cstring_buffer(DatumGetTextPP(SPI_getbinval(tup, desc, 1, &isnull)),
							   leases[i].key, sizeof(leases[i].key));
		leases[i].token = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		leases[i].ends = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
	}
	return leases;
}

/*
 * Make sure the set holds this database's limits: load them from
 * aion_wake.limits, each with its topic's live leases, if shared memory is
 * new.  Every claim, settle and set_limit() calls this first, and the
 * worker at start.  With the 1.0 schema there are no limits.
 */
void
aw_limits_ensure_loaded(void)
{
	static SPIPlanPtr plan = NULL;
	uint64		i;
	uint64		n;
	char	  **topics;
	int32	   *maxes;
	Oid			table;

	if (aw_schema_version() < 11)
		return;
	table = get_relname_relid("limits", get_namespace_oid("aion_wake", false));
	if (aw_set_limits_loaded(table))
		return;

	SPI_connect();
	n = aw_plan_run(aw_plan_prepare(&plan,
									"SELECT topic, max_in_flight FROM aion_wake.limits",
									0, NULL),
					NULL, NULL, SPI_OK_SELECT);
	topics = palloc(sizeof(char *) * Max(n, 1));
	maxes = palloc(sizeof(int32) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		topics[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		maxes[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
											   SPI_tuptable->tupdesc, 2, &isnull));
	}
	for (i = 0; i < n; i++)
	{
		int32		n_leases;
		AwLiveLease *leases;

		AwLimitResult r;

		aw_lock_topic(topics[i], AccessExclusiveLock);
		leases = aw_read_live_leases(topics[i], &n_leases);
		/* the pool is checked as set_limit() checks it */
		r = aw_set_limit_load(topics[i], maxes[i], leases, n_leases);
		if (r != AW_LIMIT_OK)
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 r == AW_LIMIT_TOPICS_FULL ?
					 errmsg("aion_wake topic table is full") :
					 errmsg("aion_wake lease pool cannot hold the limit of topic \"%s\"",
							topics[i]),
					 errdetail("The limit of topic \"%s\" could not be loaded; its claims are not limited.",
							   topics[i]),
					 errhint("Increase \"%s\".", r == AW_LIMIT_TOPICS_FULL ?
							 "aion_wake.max_topics" : "aion_wake.max_leases")));
		pfree(leases);
	}
	SPI_finish();
	aw_set_mark_limits_loaded(table);
}

/* set_limit() cannot promise what the limit needs: say why */
static void
aw_limit_refused(const char *topic, AwLimitResult r, int32 n_leases)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 r == AW_LIMIT_TOPICS_FULL ?
			 errmsg("aion_wake topic table is full") :
			 errmsg("aion_wake lease pool cannot hold this limit"),
			 r == AW_LIMIT_TOPICS_FULL ?
			 errdetail("Topic \"%s\" could not be added to it.", topic) :
			 r == AW_LIMIT_POOL_FULL ?
			 errdetail("The limits of all topics together may not exceed %d.", aw_max_leases) :
			 errdetail("Live leases hold the records of the pool that this limit needs: leases of lowered limits that still drain, or the %d live leases of topic \"%s\" it would take in.",
					   n_leases, topic),
			 r == AW_LIMIT_LEASES_FULL ?
			 errhint("Wait for those leases to end, or increase \"%s\".",
					 "aion_wake.max_leases") :
			 errhint("Increase \"%s\".", r == AW_LIMIT_TOPICS_FULL ?
					 "aion_wake.max_topics" : "aion_wake.max_leases")));
}

/*
 * Just before the commit of a set_limit() that gives a topic its first
 * limit: count its live leases again.  The transaction holds the topic's
 * lock exclusively, so only its own claims and settles, made after
 * set_limit() counted, can have changed them; those count too.
 */
static void
aw_limits_recount(const char *topic, int32 max_in_flight, AwLiveLease **leases,
				  int32 *n_leases)
{
	AwLiveLease *now_live;
	int32		n;

	/* no portal is left at this point: the statement needs a snapshot */
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	now_live = aw_read_live_leases(topic, &n);
	SPI_finish();
	PopActiveSnapshot();
	if (!aw_set_limit_repromise(topic, max_in_flight, n))
		aw_limit_refused(topic, AW_LIMIT_LEASES_FULL, n);
	pfree(*leases);
	*leases = now_live;
	*n_leases = n;
}

/*
 * set_limit(topic, max_in_flight): at most max_in_flight rows of the topic
 * leased at once, from the commit of this transaction; NULL removes the
 * limit.  Refused (53400) when the lease pool cannot hold it, or the topic
 * table has no room for the topic: a limit is never silently exceeded.
 */
Datum
aw_set_limit(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr upsert_plan = NULL;
	static SPIPlanPtr delete_plan = NULL;
	static const Oid types[3] = {TEXTOID, INT4OID, TIMESTAMPTZOID};
	char	   *topic;
	int32		max_in_flight = 0;
	int32		current;
	AwLimitRecord *rec;
	int32		n_leases = 0;
	AwLiveLease *leases = NULL;
	AwLimitResult r;
	Datum		args[3];

	aw_require_loaded();
	PreventCommandDuringRecovery("aion_wake.set_limit()");
	topic = aw_arg_topic(fcinfo, 0);
	if (!PG_ARGISNULL(1))
		max_in_flight = aw_arg_int_range(fcinfo, 1, "max_in_flight", 1, AW_MAX_IN_FLIGHT);

	aw_limits_ensure_loaded();
	aw_lock_topic(topic, AccessExclusiveLock);

	SPI_connect();
	args[0] = CStringGetTextDatum(topic);
	args[1] = Int32GetDatum(max_in_flight);
	args[2] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (max_in_flight > 0)
		(void) aw_plan_run(aw_plan_prepare(&upsert_plan,
										   "INSERT INTO aion_wake.limits AS l (topic, max_in_flight, updated_at) "
										   "VALUES ($1, $2, $3) ON CONFLICT (topic) DO UPDATE "
										   "   SET max_in_flight = EXCLUDED.max_in_flight, "
										   "       updated_at = EXCLUDED.updated_at",
										   3, types),
						   args, NULL, SPI_OK_INSERT);
	else
		(void) aw_plan_run(aw_plan_prepare(&delete_plan,
										   "DELETE FROM aion_wake.limits "
										   " WHERE topic OPERATOR(pg_catalog.=) $1",
										   1, types),
						   args, NULL, SPI_OK_DELETE);

	/* a topic that gets its first limit takes in its live leases */
	if (max_in_flight > 0 && !aw_set_topic_limited(topic, &current))
		leases = aw_read_live_leases(topic, &n_leases);
	SPI_finish();

	rec = aw_xact_record_limit(topic, max_in_flight, leases, n_leases,
							   leases != NULL ? aw_limits_recount : NULL);
	r = aw_set_limit_promise(topic, max_in_flight, n_leases, &rec->old_max);
	rec->promised = (r == AW_LIMIT_OK);
	if (r != AW_LIMIT_OK)
		aw_limit_refused(topic, r, n_leases);
	PG_RETURN_VOID();
}

/*
 * Release every lease whose end has passed, and wake one blocked claimer
 * of each one's topic: the slot is free and the row claimable again.  The
 * worker does this at each lease end; in a database no worker serves,
 * waiting claimers do it themselves.  Returns the next lease end, or 0.
 */
TimestampTz
aw_limits_expire(TimestampTz now)
{
	AwReleased	released[32];
	TimestampTz next;
	int			n;
	int			i;

	do
	{
		n = aw_set_expire_leases(now, released, lengthof(released), &next);
		for (i = 0; i < n; i++)
			aw_waiters_wake(released[i].dbid, released[i].topic, 1);
	} while (n == lengthof(released));
	return next;
}
