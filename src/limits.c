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
 *	  Claims of several topics lock them in one order (by lock key), and
 *	  set_limit() takes its exclusive locks only just before its commit,
 *	  all of its transaction's topics at once in that order, waiting only
 *	  while it holds none of them: a claim and a set_limit() never wait
 *	  for each other in a cycle.  set_limit() calls on one topic are kept
 *	  apart by a second lock (AW_LIMIT_WRITER_SUBID) taken at the call,
 *	  which claims never take.
 *
 *	  When shared memory is new (postmaster start, crash restart) the set
 *	  holds no limit.  In a database a worker serves, the worker loads them
 *	  at start, before it marks the database ready, one topic per short
 *	  transaction of its own: it takes the topic's lock only if it is free
 *	  (a prepared transaction may hold it in share mode for ever), reads
 *	  the limit and the live leases with a snapshot taken after it holds
 *	  the lock, and retries what it could not load.  In a database no
 *	  worker serves, a claim loads the limits of its own topics the same
 *	  way, in a subtransaction that is rolled back at once (so it keeps no
 *	  lock; what it put in shared memory stays).  Until a topic's limit is
 *	  loaded, a claim of it takes nothing (with a WARNING, counted in
 *	  aion_wake.status.limits_not_loaded): a limit is never silently
 *	  absent.  DROP DATABASE and DROP EXTENSION give the database's limits
 *	  back to the cluster-wide pool at their commit.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/limits.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "aw_args.h"
#include "aw_limits.h"
#include "aw_plans.h"
#include "aw_lease_ledger.h"
#include "aw_parked_set.h"
#include "aw_rate_ledger.h"
#include "aw_rates.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_set_limit);

/* the object sub-ids that set topic locks apart from real pg_extension locks */
#define AW_TOPIC_LOCK_SUBID 0xA10E
#define AW_LIMIT_WRITER_SUBID 0xA10F

static SPIPlanPtr aw_live_leases_plans[2];	/* before 1.2, from 1.2 */
static SPIPlanPtr aw_limit_of_plan = NULL;

/* the topics this transaction called set_limit() for (TopTransactionContext) */
static List *aw_limit_topics = NIL;
static TransactionId aw_limit_topics_xid = InvalidTransactionId;
static TransactionId aw_limit_locked_xid = InvalidTransactionId;

/* databases whose limits this transaction's DROP gives back at commit */
static List *aw_dropped_dbs = NIL;
static object_access_hook_type prev_object_access_hook = NULL;

static uint32
aw_topic_lock_key(const char *topic)
{
	return hash_bytes((const unsigned char *) topic, (int) strlen(topic));
}

static int
aw_key_cmp(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return (x > y) - (x < y);
}

/* Sort lock keys and drop duplicates; returns how many are left. */
static int
aw_keys_sort(uint32 *keys, int n)
{
	int			i;
	int			m = 0;

	qsort(keys, n, sizeof(uint32), aw_key_cmp);
	for (i = 0; i < n; i++)
	{
		if (m == 0 || keys[m - 1] != keys[i])
			keys[m++] = keys[i];
	}
	return m;
}

/*
 * Lock a topic of this database until the end of the transaction: claims
 * and settles in AccessShareLock, set_limit() and the loading of limits in
 * AccessExclusiveLock.  Two topics whose names hash alike share a lock,
 * which only costs some waiting.
 */
void
aw_lock_topic(const char *topic, LOCKMODE mode)
{
	LockDatabaseObject(ExtensionRelationId, (Oid) aw_topic_lock_key(topic),
					   AW_TOPIC_LOCK_SUBID, mode);
}

/*
 * Lock the topics whose bit is set in mask in share mode, in the one order
 * every multi-topic locker uses (by lock key), until the transaction ends.
 */
void
aw_lock_topics_shared(char **topics, int ntopics, uint64 mask)
{
	uint32		keys[64];
	int			n = 0;
	int			i;

	for (i = 0; i < ntopics && i < 64; i++)
	{
		if (mask & (UINT64CONST(1) << i))
			keys[n++] = aw_topic_lock_key(topics[i]);
	}
	n = aw_keys_sort(keys, n);
	for (i = 0; i < n; i++)
		LockDatabaseObject(ExtensionRelationId, (Oid) keys[i], AW_TOPIC_LOCK_SUBID,
						   AccessShareLock);
}

/*
 * Lock every topic this transaction's set_limit() calls named, exclusively,
 * until the transaction ends: in key order, and without ever waiting while
 * holding one of them (a claim may hold one and wait for another).  When a
 * lock is taken, those this call took are let go, the caller waits for
 * that one alone, lets it go and starts again.
 */
static void
aw_lock_limit_topics(void)
{
	uint32	   *keys = palloc(sizeof(uint32) * Max(list_length(aw_limit_topics), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, aw_limit_topics)
		keys[n++] = aw_topic_lock_key((char *) lfirst(lc));
	n = aw_keys_sort(keys, n);
	for (;;)
	{
		int			failed = -1;
		int			i;

		for (i = 0; i < n && failed < 0; i++)
		{
			if (!ConditionalLockDatabaseObject(ExtensionRelationId, (Oid) keys[i],
											   AW_TOPIC_LOCK_SUBID, AccessExclusiveLock))
				failed = i;
		}
		if (failed < 0)
			break;
		for (i = 0; i < failed; i++)
			UnlockDatabaseObject(ExtensionRelationId, (Oid) keys[i], AW_TOPIC_LOCK_SUBID,
								 AccessExclusiveLock);
		LockDatabaseObject(ExtensionRelationId, (Oid) keys[failed], AW_TOPIC_LOCK_SUBID,
						   AccessExclusiveLock);
		UnlockDatabaseObject(ExtensionRelationId, (Oid) keys[failed], AW_TOPIC_LOCK_SUBID,
							 AccessExclusiveLock);
		CHECK_FOR_INTERRUPTS();
	}
	pfree(keys);
}

/*
 * The live leases of a topic, from the table: rows whose leased_until is
 * ahead, read with a snapshot taken now (not the transaction's: under
 * REPEATABLE READ that would miss the claims whose topic locks the caller
 * waited for).  A live lease's visible_after equals its leased_until (the
 * claim set both), so visible_after bounds the scan of the (topic,
 * visible_after) index to the leases ahead instead of every row of the
 * topic.  Returns them in an array allocated in TopTransactionContext (the
 * commit callback applies them), their number in *n; NULL, when the pool
 * could not hold them, if !raise (else that is an error).  Caller is
 * connected to SPI and holds the topic's lock exclusively.
 */
static AwLiveLease *
aw_read_live_leases(const char *topic, int32 *n, bool raise)
{
	static const Oid types[2] = {TEXTOID, TIMESTAMPTZOID};
	Datum		args[2];
	SPIPlanPtr	plan;
	AwLiveLease *leases;
	uint64		i;

	args[0] = CStringGetTextDatum(topic);
	args[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (aw_schema_version() >= 12)
		plan = aw_plan_prepare(&aw_live_leases_plans[1],
							   AW_TOPIC_PRIORITIES("$1")
							   "SELECT x.* FROM r, "
							   "  LATERAL (SELECT o.dispatch_key, o.lease_token, o.leased_until "
							   "             FROM aion_wake.outbox o "
							   "            WHERE o.topic OPERATOR(pg_catalog.=) $1 "
							   "              AND o.priority OPERATOR(pg_catalog.=) r.p "
							   "              AND o.visible_after OPERATOR(pg_catalog.>) $2 "
							   "              AND o.leased_until OPERATOR(pg_catalog.>) $2 "
							   "              AND o.lease_token IS NOT NULL OFFSET 0) x",
							   2, types);
	else
		plan = aw_plan_prepare(&aw_live_leases_plans[0],
							   "SELECT dispatch_key, lease_token, leased_until "
							   "  FROM aion_wake.outbox "
							   " WHERE topic OPERATOR(pg_catalog.=) $1 "
							   "   AND visible_after OPERATOR(pg_catalog.>) $2 "
							   "   AND leased_until OPERATOR(pg_catalog.>) $2 "
							   "   AND lease_token IS NOT NULL",
							   2, types);
	(void) aw_plan_run_latest(plan, args, NULL, SPI_OK_SELECT);
	if (SPI_processed > (uint64) aw_max_leases)
	{
		if (!raise)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("topic \"%s\" has more live leases than the lease pool holds", topic),
				 errdetail("It has %llu live leases; \"%s\" is %d.",
						   (unsigned long long) SPI_processed, "aion_wake.max_leases",
						   aw_max_leases),
				 errhint("Wait for the leases to end, or increase \"%s\".",
						 "aion_wake.max_leases")));
	}
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

/* The OID of this database's aion_wake.limits, or InvalidOid. */
Oid
aw_limits_table(void)
{
	Oid			nsp = get_namespace_oid("aion_wake", true);

	return OidIsValid(nsp) ? get_relname_relid("limits", nsp) : InvalidOid;
}

/*
 * Load one topic's limit, with its live leases, into the set, unless it is
 * there already.  Takes the topic's lock exclusively only if nobody holds
 * it (AW_LOAD_BUSY if someone does: try again later), then reads the limit
 * and the leases with a snapshot taken after that, so that every set_limit()
 * committed before is seen and every one after applies itself on top.
 * The caller ends its (sub)transaction soon after, and with it the lock.
 * Caller is connected to SPI; the 1.1 schema is installed.
 */
AwLoadResult
aw_limits_load_topic(const char *topic)
{
	static const Oid types[1] = {TEXTOID};
	Datum		args[1];
	int32		max_in_flight;
	int32		n_leases = 0;
	AwLiveLease *leases;
	AwLimitResult r;
	int32		wake;
	bool		isnull;

	if (aw_ledger_topic_limited(topic, &max_in_flight))
		return AW_LOAD_DONE;
	if (!ConditionalLockDatabaseObject(ExtensionRelationId, (Oid) aw_topic_lock_key(topic),
									   AW_TOPIC_LOCK_SUBID, AccessExclusiveLock))
		return AW_LOAD_BUSY;

	args[0] = CStringGetTextDatum(topic);
	(void) aw_plan_run_latest(aw_plan_prepare(&aw_limit_of_plan,
											  "SELECT max_in_flight FROM aion_wake.limits "
											  " WHERE topic OPERATOR(pg_catalog.=) $1",
											  1, types),
							  args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return AW_LOAD_DONE;	/* no limit (any more) */
	max_in_flight = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	leases = aw_read_live_leases(topic, &n_leases, false);
	if (leases == NULL)
		return AW_LOAD_FULL;
	/* the pool is checked as set_limit() checks it */
	r = aw_ledger_limit_load(topic, max_in_flight, leases, n_leases, &wake);
	pfree(leases);
	if (r != AW_LIMIT_OK)
		return AW_LOAD_FULL;
	/* claims that found the limit missing sleep: the slots are there now */
	if (wake > 0)
		(void) aw_waiters_wake(MyDatabaseId, topic, wake);
	return AW_LOAD_DONE;
}

/* Did this transaction call set_limit() for topic? */
static bool
aw_limit_topic_listed(const char *topic)
{
	ListCell   *lc;

	foreach(lc, aw_limit_topics)
	{
		if (strcmp((char *) lfirst(lc), topic) == 0)
			return true;
	}
	return false;
}

/*
 * In a database no worker serves: load one topic's limit in a
 * subtransaction that is rolled back at once, so that the caller's
 * transaction keeps no lock of it (what it put in shared memory stays).
 */
static bool
aw_limits_load_step(void *arg)
{
	SPI_connect();
	if (aw_limits_load_topic((const char *) arg) == AW_LOAD_DONE &&
		OidIsValid(aw_rates_table()))
		(void) aw_rates_load_topic((const char *) arg);
	SPI_finish();
	return false;				/* roll back: keep no lock */
}

static void
aw_limits_load_detached(const char *topic)
{
	(void) aw_in_subtransaction(aw_limits_load_step, (void *) topic);
}

/* A claim takes nothing of a topic whose settings are not loaded: say so. */
static void
aw_limits_warn_missing(const char *topic, bool limit, bool served, bool warn)
{
	aw_ledger_count_limit_not_loaded();
	if (warn)
		ereport(WARNING,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 limit ?
				 errmsg("the limit of topic \"%s\" is not loaded yet", topic) :
				 errmsg("the rate or pause of topic \"%s\" is not loaded yet", topic),
				 errdetail("A claim takes no row of a topic until its limit and live leases, its rate and its pause are in shared memory."),
				 served ?
				 errhint("The worker of this database loads it, and retries until it can.") :
				 errhint("Each claim of the topic retries the load; it waits for no transaction that holds the topic's lock.")));
}

/*
 * Before a claim of the topics whose bit is set in mask reserves slots:
 * which of them have a limit in aion_wake.limits that the set does not
 * hold yet?  The claim takes nothing of those (it fails closed, with a
 * WARNING when warn, and the counter rises).  In a database whose worker
 * has loaded every limit there is nothing to look up; in one it serves
 * but has not loaded yet, the worker is woken to load them; in one no
 * worker serves, the claim loads them itself first (bounded: it never
 * waits for a lock, and keeps none).  Returns the mask of those topics.
 * Caller is connected to SPI; the 1.1 schema is installed.
 */
uint64
aw_limits_missing(char **topics, int ntopics, uint64 mask, bool served, bool warn)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr plan_rates = NULL;
	static const Oid types[2] = {TEXTARRAYOID, TIMESTAMPTZOID};
	AwWorkerSlot *slot = served ? aw_worker_slot_for(MyDatabaseId) : NULL;
	Datum	   *names = palloc(sizeof(Datum) * ntopics);
	Datum		args[2];
	uint64		missing = 0;
	uint64		looked = 0;
	uint64		n = 0;
	uint64		r;
	int			nq = 0;
	int			i;
	bool		rates;

	if (slot != NULL && slot->limits_loaded && slot->limits_table == aw_limits_table())
		return 0;
	rates = OidIsValid(aw_rates_table());
	for (i = 0; i < ntopics; i++)
	{
		int32		max_in_flight;

		if ((mask & (UINT64CONST(1) << i)) &&
			(rates || !aw_ledger_topic_limited(topics[i], &max_in_flight)))
			names[nq++] = CStringGetTextDatum(topics[i]);
	}
	if (nq == 0)
		return 0;
	args[0] = PointerGetDatum(construct_array(names, nq, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = TimestampTzGetDatum(GetCurrentTimestamp());

	/*
	 * With a snapshot taken now, not the transaction's: under REPEATABLE
	 * READ, a limit, rate or pause removed since the snapshot (which shared
	 * memory no longer holds) would look not loaded, and the claim would
	 * take nothing until the transaction ended.
	 */
	if (rates)
		n = aw_plan_run_latest(aw_plan_prepare(&plan_rates,
											   "SELECT q.topic, l.topic IS NOT NULL, r.topic IS NOT NULL, "
											   "       COALESCE(p.paused_until, '-infinity'::pg_catalog.timestamptz) "
											   "  FROM pg_catalog.unnest($1) AS q(topic) "
											   "  LEFT JOIN aion_wake.limits l ON l.topic OPERATOR(pg_catalog.=) q.topic "
											   "  LEFT JOIN aion_wake.rates r ON r.topic OPERATOR(pg_catalog.=) q.topic "
											   "  LEFT JOIN aion_wake.pauses p ON p.topic OPERATOR(pg_catalog.=) q.topic "
											   "        AND p.paused_until OPERATOR(pg_catalog.>) $2 "
											   " WHERE l.topic IS NOT NULL OR r.topic IS NOT NULL "
											   "    OR p.topic IS NOT NULL",
											   2, types),
							   args, NULL, SPI_OK_SELECT);
	else
		n = aw_plan_run_latest(aw_plan_prepare(&plan,
											   "SELECT topic, true, false, '-infinity'::pg_catalog.timestamptz "
											   "  FROM aion_wake.limits "
											   " WHERE topic OPERATOR(pg_catalog.=) ANY ($1)",
											   1, types),
							   args, NULL, SPI_OK_SELECT);
	{
		char	  **held = palloc(sizeof(char *) * Max(n, 1));
		bool	   *has_limit = palloc(sizeof(bool) * Max(n, 1));
		bool	   *has_rate = palloc(sizeof(bool) * Max(n, 1));
		TimestampTz *paused_until = palloc(sizeof(TimestampTz) * Max(n, 1));

		for (r = 0; r < n; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;

			held[r] = SPI_getvalue(tup, desc, 1);
			has_limit[r] = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
			has_rate[r] = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
			paused_until[r] = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		}
		for (r = 0; r < n; r++)
		{
			int32		max_in_flight;
			bool		own = false;
			bool		rate_set = false;
			bool		had_rate = false;
			bool		pause_set = false;
			TimestampTz had_paused_until = 0;

			for (i = 0; i < ntopics; i++)
			{
				if (strcmp(topics[i], held[r]) == 0)
					looked |= UINT64CONST(1) << i;
			}

			/*
			 * This transaction's own set_rate(), pause() and resume() are in
			 * the tables, not yet in shared memory: what shared memory must
			 * hold is what the tables held before them.  Nor may the tables
			 * be loaded now: the load would take in the uncommitted rows,
			 * which a rollback would leave behind in shared memory.
			 */
			own = rates && aw_xact_rate_before(held[r], &rate_set, &had_rate, &pause_set,
											   &had_paused_until);
			if (rate_set)
				has_rate[r] = had_rate;
			if (pause_set)
				paused_until[r] = had_paused_until;

			/* this transaction's own set_limit() counts it at its commit */
			if (has_limit[r] && !has_rate[r] &&
				aw_limit_topics_xid == GetTopTransactionIdIfAny() &&
				TransactionIdIsValid(aw_limit_topics_xid) &&
				aw_limit_topic_listed(held[r]))
				continue;
			if ((!has_limit[r] || aw_ledger_topic_limited(held[r], &max_in_flight)) &&
				aw_ledger_rate_loaded(held[r], has_rate[r], paused_until[r]))
				continue;
			if (!served && !own)
			{
				aw_limits_load_detached(held[r]);
				if ((!has_limit[r] || aw_ledger_topic_limited(held[r], &max_in_flight)) &&
					aw_ledger_rate_loaded(held[r], has_rate[r], paused_until[r]))
					continue;
			}
			for (i = 0; i < ntopics; i++)
			{
				if (strcmp(topics[i], held[r]) == 0)
					missing |= UINT64CONST(1) << i;
			}
			aw_limits_warn_missing(held[r],
								   has_limit[r] && !aw_ledger_topic_limited(held[r], &max_in_flight),
								   served, warn);
		}
	}

	/*
	 * A topic the tables show nothing of, because this transaction removed
	 * its rate or ended its pause: shared memory must still hold what they
	 * held before, until the commit.
	 */
	for (i = 0; rates && i < ntopics; i++)
	{
		bool		rate_set;
		bool		had_rate;
		bool		pause_set;
		TimestampTz had_paused_until;

		if ((mask & (UINT64CONST(1) << i)) == 0 || (looked & (UINT64CONST(1) << i)) != 0 ||
			!aw_xact_rate_before(topics[i], &rate_set, &had_rate, &pause_set,
								 &had_paused_until))
			continue;
		if (aw_ledger_rate_loaded(topics[i], rate_set && had_rate,
								  pause_set ? had_paused_until : 0))
			continue;
		missing |= UINT64CONST(1) << i;
		aw_limits_warn_missing(topics[i], false, served, warn);
	}
	if (missing != 0 && served)
		aw_wake_worker(MyDatabaseId);
	return missing;
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
 * Just before the commit of a set_limit(), called for each of its topics:
 * the first call locks every topic of the transaction's set_limit() calls
 * exclusively (aw_lock_limit_topics), and the limit applies at the commit
 * under those locks.  A topic that gets its first limit counts its live
 * leases again, now that no claim or settle of it can be open in another
 * transaction: with a snapshot taken after the lock, whatever the
 * caller's isolation, so the claims it waited for count, and so do its
 * own claims and settles made after set_limit() counted.
 */
static void
aw_limits_before_commit(const char *topic, int32 max_in_flight, AwLiveLease **leases,
						int32 *n_leases)
{
	AwLiveLease *now_live;
	int32		n;

	if (aw_limit_locked_xid != GetTopTransactionIdIfAny())
	{
		aw_lock_limit_topics();
		aw_limit_locked_xid = GetTopTransactionIdIfAny();
	}
	if (*leases == NULL)
		return;					/* the topic had a limit: its leases are counted */
	SPI_connect();
	now_live = aw_read_live_leases(topic, &n, true);
	SPI_finish();
	if (!aw_ledger_limit_repromise(topic, max_in_flight, n))
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
 * The topic lock is taken just before the commit (see above); here only
 * the lock that keeps set_limit() calls of one topic apart, which claims
 * never take.
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
	MemoryContext oldcontext;

	aw_require_loaded();
	PreventCommandDuringRecovery("aion_wake.set_limit()");
	topic = aw_arg_topic(fcinfo, 0);
	if (!PG_ARGISNULL(1))
		max_in_flight = aw_arg_int_range(fcinfo, 1, "max_in_flight", 1, AW_MAX_IN_FLIGHT);

	LockDatabaseObject(ExtensionRelationId, (Oid) aw_topic_lock_key(topic),
					   AW_LIMIT_WRITER_SUBID, AccessExclusiveLock);

	SPI_connect();
	args[0] = CStringGetTextDatum(topic);
	args[1] = Int32GetDatum(max_in_flight);
	args[2] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (max_in_flight > 0)
		(void) aw_settings_run(aw_plan_prepare(&upsert_plan,
										   "INSERT INTO aion_wake.limits AS l (topic, max_in_flight, updated_at) "
										   "VALUES ($1, $2, $3) ON CONFLICT (topic) DO UPDATE "
										   "   SET max_in_flight = EXCLUDED.max_in_flight, "
										   "       updated_at = EXCLUDED.updated_at",
										   3, types),
						   args, SPI_OK_INSERT);
	else
		(void) aw_settings_run(aw_plan_prepare(&delete_plan,
										   "DELETE FROM aion_wake.limits "
										   " WHERE topic OPERATOR(pg_catalog.=) $1",
										   1, types),
						   args, SPI_OK_DELETE);

	/*
	 * A topic that gets its first limit takes in its live leases: counted
	 * here for the pool's promise, and again under the lock before the
	 * commit.
	 */
	if (max_in_flight > 0 && !aw_ledger_topic_limited(topic, &current))
		leases = aw_read_live_leases(topic, &n_leases, true);
	SPI_finish();

	/* the topics to lock before the commit */
	if (aw_limit_topics_xid != GetTopTransactionId())
	{
		aw_limit_topics = NIL;
		aw_limit_topics_xid = GetTopTransactionId();
	}
	oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	aw_limit_topics = lappend(aw_limit_topics, pstrdup(topic));
	MemoryContextSwitchTo(oldcontext);

	rec = aw_xact_record_limit(topic, max_in_flight, leases, n_leases,
							   aw_limits_before_commit);
	r = aw_ledger_limit_promise(topic, max_in_flight, n_leases, &rec->old_max);
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
		n = aw_ledger_expire(now, released, lengthof(released), &next);
		for (i = 0; i < n; i++)
			aw_waiters_wake(released[i].dbid, released[i].topic, 1);
	} while (n == lengthof(released));
	return next;
}

/* Is the topic limited in shared memory?  The limit in *max_in_flight. */
bool
aw_limits_topic_limited(const char *topic, int32 *max_in_flight)
{
	return aw_ledger_topic_limited(topic, max_in_flight);
}

/*
 * A claim of a topic is about to lock rows (its topic lock held in share
 * mode): reserve up to want slots of it, in one hold of the set lock.  The
 * first are the slots of the leases of it this transaction settled that
 * pass them on (the zero-gap hand-off: up to max_settled of them are
 * looked up into settled, and those handed come first there, *handed
 * counting them); the rest are free slots.  The record that gives back
 * what is left if the transaction ends first is made before anything is
 * reserved, and the topic's readiness number is read before that.
 * *allow receives the rows the claim may take of the topic (want when it
 * is unlimited and has no rate or pause, and then *limited is false).
 * Returns the record, for aw_limits_return.
 */
AwReserveRecord *
aw_limits_reserve(const char *topic, int32 want, AwSettledLease *settled, int max_settled,
				  int32 *allow, int32 *handed, bool *limited)
{
	uint64		ready_gen;
	AwReserveRecord *rec;
	int32		rated;
	bool		blocked;
	int			n;

	/* before reserving (doc/design.md, Wake rules: 3) */
	ready_gen = aw_waiters_ready_gen(MyDatabaseId, topic);
	/* recorded first: an error gives back what is reserved */
	rec = aw_xact_prepare_reserve(topic);
	rec->ready_gen = ready_gen;
	n = aw_xact_settled_leases(topic, settled, max_settled);
	if (n > 0)					/* allocated first: an error gives them back */
		rec->handing = MemoryContextAlloc(TopTransactionContext,
										  sizeof(AwSettledLease) * n);
	*allow = aw_ledger_reserve(topic, want, settled, n, handed, limited, &rated, &blocked);
	if (rated >= 0)
		rec->rate_left = rated;
	/* cut short by a rate or a pause: the worker times when it may start */
	if (blocked)
		aw_waiters_wake_for(AW_WAKE_WORKER, MyDatabaseId, NULL);
	if (*handed > 0)
		memcpy(rec->handing, settled, sizeof(AwSettledLease) * *handed);
	rec->n_handing = *handed;
	if (*limited)
		rec->left = *allow;
	return rec;
}

/*
 * The rows a claim leased of limited topics become leases, OPEN until the
 * claim commits: one reserved slot each.  preds[i], when set, is the
 * settled lease whose slot leases[i] inherits (a hand-off pair).  The
 * record that releases them if the claim rolls back is made first.
 */
void
aw_limits_open_leases(const AwLiveLease *leases, const AwSettledLease **preds, int n)
{
	AwLiveLease *kept = aw_xact_prepare_leases(n);

	memcpy(kept, leases, sizeof(AwLiveLease) * n);
	/* a lease that ends before all others: the worker must look again */
	if (aw_ledger_open(kept, preds, n))
		aw_waiters_wake_for(AW_WAKE_WORKER, MyDatabaseId, NULL);
}

/*
 * After a claim's attempt: used of the rows rec reserved were taken.  Of
 * a rated topic, they are starts, logged now (after the claim's
 * statement), and the reserved starts go back.  Of a limited one, they
 * became leases; the other slots go back at once (the handed ones the leases did not take came
 * first), and if a row of the topic became claimable since the claim read
 * reserved, a blocked claimer (which may have found no slot for it) is
 * woken (doc/design.md, Wake rules: 3).
 */
void
aw_limits_return(AwReserveRecord *rec, int32 used)
{
	if (rec->rate_left > 0)
	{
		bool		retime;
		int32		wake = aw_ledger_rate_return(rec->topic, rec->rate_left, used,
												 &retime);

		rec->rate_left = 0;

		/*
		 * Starts given back unused wake blocked claimers only after a
		 * readiness event since this claim looked, as slots do (below):
		 * else the claimer woken could be this one, probing again, and
		 * again (finding R-F4 of test/model/aion_wake_rates.pml).
		 */
		if (wake > 0 && aw_waiters_ready_gen(MyDatabaseId, rec->topic) != rec->ready_gen)
			aw_waiters_wake_starts(MyDatabaseId, rec->topic, wake);
		else if (retime)
		{
			/* the window's next moment is known now: have it timed */
			if (aw_database_is_served())
				aw_waiters_wake_for(AW_WAKE_WORKER, MyDatabaseId, NULL);
			else
				aw_waiters_wake_starts(MyDatabaseId, rec->topic, 1);
		}
	}
	rec->left -= used;
	if (rec->left > 0)
	{
		int32		paired = Min(rec->n_handing, used);

		aw_ledger_unreserve(rec->topic, rec->left, rec->handing + paired,
							rec->n_handing - paired);
		rec->left = 0;
		if (aw_waiters_ready_gen(MyDatabaseId, rec->topic) != rec->ready_gen)
			aw_waiters_wake(MyDatabaseId, rec->topic, 1);
	}
	rec->n_handing = 0;
}

/*
 * A settle (complete, fail, park, dead_letter) of a row of a limited topic
 * whose lease carried token: mark its record SETTLED by this transaction,
 * *prev the state to restore if the settle rolls back.  Never raises.
 */
AwSettleMark
aw_limits_mark_settled(const char *key, int64 token, AwLeaseState *prev)
{
	return aw_ledger_settle(key, token, prev);
}

/* The claim that took these leases committed: OPEN -> LIVE. */
void
aw_limits_at_commit_leases(const AwLiveLease *leases, int n)
{
	aw_ledger_commit(leases, n);
}

/*
 * A settle that marked its lease committed: release the lease's slot,
 * once.  A slot released wakes one blocked claimer; unless the settle was
 * park() (pulse false), it is a pulse of one slot of the topic too.
 */
void
aw_limits_at_commit_settle(const char *key, int64 token, bool pulse)
{
	char		topic[AW_TOPIC_MAXLEN + 1];

	if (aw_ledger_release(key, token, topic) != AW_RELEASE_FREED)
		return;
	if (pulse && aw_set_add_slots(topic, 1, true))
		aw_waiters_wake_for(AW_WAKE_SPENDER, MyDatabaseId, topic);
	else
		aw_waiters_wake(MyDatabaseId, topic, 1);
}

/*
 * A set_limit() committed.  With apply (the topic's last set_limit() of
 * the transaction) the limit applies with the live leases it found, and
 * the claimers its new slots can take are woken; without, only its pin on
 * the pool is taken back.
 */
void
aw_limits_at_commit_limit(const char *topic, int32 max_in_flight, int32 old_max,
						  const AwLiveLease *leases, int32 n_leases, bool apply)
{
	int32		wake;

	if (!apply)
	{
		(void) aw_ledger_limit_end(topic, max_in_flight, old_max, leases, n_leases, false);
		return;
	}
	wake = aw_ledger_limit_end(topic, max_in_flight, old_max, leases, n_leases, true);
	aw_waiters_wake(MyDatabaseId, topic, wake < 0 ? PG_INT32_MAX : wake);
	/* the worker must learn of the leases' ends */
	if (n_leases > 0)
		aw_waiters_wake_for(AW_WAKE_WORKER, MyDatabaseId, NULL);
}

/* A claim's transaction ended with slots still reserved: they go back. */
void
aw_limits_at_abort_reserve(const AwReserveRecord *rec)
{
	bool		retime;
	int32		wake = aw_ledger_rate_return(rec->topic, rec->rate_left, 0, &retime);

	aw_ledger_unreserve(rec->topic, rec->left, rec->handing, rec->n_handing);

	/*
	 * Slots and starts given back at the abort were never used: a blocked
	 * claimer may have found none free because of them (doc/design.md,
	 * Wake rules: 3; finding R-F3 of test/model/aion_wake_rates.pml).  A
	 * waiting claim's probe gives its reservations back before its
	 * subtransaction ends, so this is never a claimer waking itself.
	 */
	if (rec->left > 0)
		aw_waiters_wake(MyDatabaseId, rec->topic, 1);
	if (wake > 0)
		aw_waiters_wake_starts(MyDatabaseId, rec->topic, wake);
}

/*
 * The claim that took these leases rolled back: release those still open.
 * The rows wake claimers as rows claimable again (xact.c), not here.
 */
void
aw_limits_at_abort_leases(const AwLiveLease *leases, int n)
{
	aw_ledger_rollback(leases, n);
}

/* A settle that marked its lease rolled back: restore the state it found. */
void
aw_limits_at_abort_settle(const char *key, int64 token, AwLeaseState prev)
{
	aw_ledger_unsettle(key, token, prev);
}

/* A set_limit() rolled back: its promise to the pool is taken back. */
void
aw_limits_at_abort_limit(const char *topic, int32 max_in_flight, int32 old_max,
						 const AwLiveLease *leases, int32 n_leases)
{
	(void) aw_ledger_limit_end(topic, max_in_flight, old_max, leases, n_leases, false);
}

/*
 * At the commit of DROP DATABASE or DROP EXTENSION aion_wake: the
 * database's limits go back to the cluster-wide pool, and its worker (if
 * it has one) loads them again should the extension be made again.  Never
 * raises.
 */
static void
aw_limits_drop_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_PARALLEL_COMMIT &&
		event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		foreach(lc, aw_dropped_dbs)
		{
			Oid			dbid = lfirst_oid(lc);
			AwWorkerSlot *slot = aw_worker_slot_for(dbid);

		{
			aw_ledger_forget_limits(dbid);
			aw_ledger_forget_rates(dbid);
		}
			if (slot != NULL)
				aw_worker_slot_unload(slot);
		}
	}
	aw_dropped_dbs = NIL;		/* was in TopTransactionContext */
}

/*
 * The object access hook: note a DROP DATABASE, or a drop of the
 * aion_wake extension (DROP EXTENSION, or a CASCADE that reaches it), for
 * the commit.
 */
static void
aw_limits_object_access(ObjectAccessType access, Oid classId, Oid objectId,
						int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_DROP || !aw_set_attached())
		return;
	if (classId == DatabaseRelationId ||
		(classId == ExtensionRelationId && subId == 0 &&
		 objectId == get_extension_oid("aion_wake", true)))
	{
		MemoryContext oldcontext = MemoryContextSwitchTo(TopTransactionContext);

		aw_dropped_dbs = lappend_oid(aw_dropped_dbs,
									 classId == DatabaseRelationId ? objectId : MyDatabaseId);
		MemoryContextSwitchTo(oldcontext);
	}
}

/*
 * Install the object access hook (from _PG_init, when preloaded), and the
 * callback that forgets a dropped database's settings at the commit.  The
 * callback is registered here, before any other of aion_wake's (they
 * register on first use), because PostgreSQL calls the callbacks
 * registered last first: the settings that set_limit(), set_rate() and
 * pause() of the dropping transaction apply at its commit must be applied
 * before the drop forgets them, or they outlive the extension.
 */
void
aw_limits_init(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = aw_limits_object_access;
	RegisterXactCallback(aw_limits_drop_callback, NULL);
}
