/*-------------------------------------------------------------------------
 *
 * prepared.c
 *	  The wakes a prepared transaction owes blocked claimers, kept in
 *	  shared memory from PREPARE TRANSACTION until its second phase.
 *
 *	  A transaction that enqueues rows, or claims rows of an unlimited
 *	  topic, wakes claimers at its commit or rollback (xact.c).  After
 *	  PREPARE TRANSACTION neither comes in this backend: COMMIT PREPARED
 *	  or ROLLBACK PREPARED may run in any session of the database, whose
 *	  transaction callbacks know nothing of the prepared one, and until
 *	  then the prepared transaction holds its rows' locks.  So at PREPARE
 *	  the transaction's per-topic sums are stashed here under its global
 *	  identifier, and the utility hook, once COMMIT PREPARED or ROLLBACK
 *	  PREPARED of that identifier has returned (the outcome is durable and
 *	  visible, the row locks are gone), wakes what the commit or the
 *	  rollback would have woken.
 *
 *	  There is one entry per prepared transaction (max_prepared_transactions
 *	  of them), each with room for AW_PREPARED_TOPICS topics; a transaction
 *	  that touched more marks its entry, and its second phase wakes every
 *	  claimer of the database instead (each probes once), so no wake is
 *	  lost.  The stash lives in shared memory only: after a restart a
 *	  transaction prepared before it wakes nobody at its second phase, as
 *	  a restart may lose other wakes in flight; claimers then find its rows
 *	  at their next wake, fence or deadline.  A prepared transaction whose
 *	  PREPARE did not pass through the utility hook (a logical replication
 *	  apply worker's) has no entry either.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/prepared.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/timestamp.h"

#include "aion_wake.h"
#include "aw_prepared.h"
#include "aw_waiters.h"

typedef struct AwPreparedXact
{
	Oid			dbid;			/* InvalidOid: the entry is free */
	char		gid[GIDSIZE];
	int			ntopics;
	bool		overflow;		/* more topics than fit: wake them all */
	AwPreparedTopic topics[AW_PREPARED_TOPICS];
} AwPreparedXact;

typedef struct AwPreparedShared
{
	LWLock	   *lock;
	int			nentries;
	AwPreparedXact entries[FLEXIBLE_ARRAY_MEMBER];
} AwPreparedShared;

static AwPreparedShared *aw_prepared = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* the identifier of the PREPARE TRANSACTION this backend is running */
static char aw_prepare_gid[GIDSIZE];
static bool aw_gid_callback_registered = false;

static Size
aw_prepared_size(int n)
{
	return add_size(offsetof(AwPreparedShared, entries),
					mul_size(n, sizeof(AwPreparedXact)));
}

Size
aw_prepared_shmem_size(void)
{
	return aw_prepared_size(max_prepared_xacts);
}

/* Called from shmem_startup_hook with AddinShmemInitLock held. */
void
aw_prepared_shmem_init(void)
{
	bool		found;

	aw_prepared = ShmemInitStruct("aion_wake prepared wakes",
								  aw_prepared_size(max_prepared_xacts), &found);
	if (!found)
	{
		memset(aw_prepared, 0, aw_prepared_size(max_prepared_xacts));
		aw_prepared->lock = AW_LWLOCK(AW_LOCK_PREPARED);
		aw_prepared->nentries = max_prepared_xacts;
	}
}

/*
 * At PREPARE (XACT_EVENT_PREPARE, after the transaction is prepared and
 * before any session can finish it): keep what its second phase must
 * wake, under the identifier this backend's PREPARE TRANSACTION gave.
 * Nothing is kept when no identifier was seen.  Never raises.
 */
void
aw_prepared_stash(const AwPreparedTopic *topics, int ntopics, bool overflow)
{
	int			i;

	if (aw_prepared == NULL || aw_prepare_gid[0] == '\0' ||
		(ntopics == 0 && !overflow))
	{
		aw_prepare_gid[0] = '\0';
		return;
	}
	LWLockAcquire(aw_prepared->lock, LW_EXCLUSIVE);
	for (i = 0; i < aw_prepared->nentries; i++)
	{
		AwPreparedXact *e = &aw_prepared->entries[i];

		/* one entry per prepared transaction: a free one is always there */
		if (e->dbid != InvalidOid)
			continue;
		e->dbid = MyDatabaseId;
		strlcpy(e->gid, aw_prepare_gid, sizeof(e->gid));
		e->ntopics = Min(ntopics, AW_PREPARED_TOPICS);
		e->overflow = overflow || ntopics > AW_PREPARED_TOPICS;
		memcpy(e->topics, topics, sizeof(AwPreparedTopic) * e->ntopics);
		break;
	}
	LWLockRelease(aw_prepared->lock);
	aw_prepare_gid[0] = '\0';
}

/*
 * COMMIT PREPARED or ROLLBACK PREPARED of gid has returned: wake what the
 * prepared transaction's commit or rollback would have.  Never raises:
 * the outcome is already durable.
 */
static void
aw_prepared_finish(const char *gid, bool commit)
{
	AwPreparedXact x;
	TimestampTz now = GetCurrentTimestamp();
	bool		found = false;
	int			i;

	if (aw_prepared == NULL)
		return;
	LWLockAcquire(aw_prepared->lock, LW_EXCLUSIVE);
	for (i = 0; i < aw_prepared->nentries && !found; i++)
	{
		AwPreparedXact *e = &aw_prepared->entries[i];

		if (e->dbid != MyDatabaseId || strcmp(e->gid, gid) != 0)
			continue;
		memcpy(&x, e, offsetof(AwPreparedXact, topics) +
			   sizeof(AwPreparedTopic) * e->ntopics);
		e->dbid = InvalidOid;
		found = true;
	}
	LWLockRelease(aw_prepared->lock);
	if (!found)
		return;

	if (x.overflow)
		aw_waiters_wake_database(MyDatabaseId);
	for (i = 0; i < x.ntopics; i++)
	{
		AwPreparedTopic *t = &x.topics[i];

		if (commit)
		{
			aw_waiters_wake(MyDatabaseId, t->name, t->ready + t->released);
			if (t->fences > 0)
				aw_waiters_fence_hint(MyDatabaseId, t->name, t->fence, t->fences);
		}
		else
		{
			/* a settle undone makes its row claimable if its lease ended */
			aw_waiters_wake(MyDatabaseId, t->name,
							t->claimed + t->released +
							(t->settled > 0 && t->settled_fence <= now ? t->settled : 0));
		}
	}
}

/* A PREPARE TRANSACTION that did not prepare leaves no identifier behind. */
static void
aw_prepared_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		aw_prepare_gid[0] = '\0';
}

/*
 * The utility hook: note the identifier of PREPARE TRANSACTION (the
 * transaction is prepared when the statement ends, and the stash is made
 * then); after COMMIT PREPARED and ROLLBACK PREPARED, the wakes.
 */
static void
aw_prepared_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	TransactionStmt *stmt = NULL;
	char		gid[GIDSIZE];

	if (IsA(pstmt->utilityStmt, TransactionStmt))
	{
		stmt = (TransactionStmt *) pstmt->utilityStmt;
		if (stmt->gid == NULL)
			stmt = NULL;
		else
			strlcpy(gid, stmt->gid, sizeof(gid));
	}
	if (stmt != NULL && stmt->kind == TRANS_STMT_PREPARE)
	{
		if (!aw_gid_callback_registered)
		{
			RegisterXactCallback(aw_prepared_xact_callback, NULL);
			aw_gid_callback_registered = true;
		}
		strlcpy(aw_prepare_gid, gid, sizeof(aw_prepare_gid));
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	if (stmt != NULL && (stmt->kind == TRANS_STMT_COMMIT_PREPARED ||
						 stmt->kind == TRANS_STMT_ROLLBACK_PREPARED))
		aw_prepared_finish(gid, stmt->kind == TRANS_STMT_COMMIT_PREPARED);
}

/* Install the utility hook (from _PG_init, when preloaded). */
void
aw_prepared_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = aw_prepared_utility;
}
