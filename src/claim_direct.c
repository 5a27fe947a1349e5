/*-------------------------------------------------------------------------
 *
 * claim_direct.c
 *	  The first look of a claim of one topic (claim.c), done without the
 *	  executor: one index probe for the topic's priority, one index scan
 *	  of that priority's visible rows, tuple locks that skip rows others
 *	  hold, and heap updates with their index entries.
 *
 *	  Why: as a statement (aw_claim_top_sql in claim.c), most of what a
 *	  claim of one row costs beyond its index reads is the statement's
 *	  plan start-up and the outbox's CHECK constraints, which PostgreSQL
 *	  parses again for every UPDATE although none of them reads a column
 *	  a claim writes (bench/throughput/count.sh counts both).  This file
 *	  does the same work as that statement, row for row: the same rows
 *	  found in the same order under a fresh snapshot, locked as FOR UPDATE
 *	  SKIP LOCKED locks them, and updated with the same values.  One
 *	  difference, on purpose: a row updated since the snapshot is passed
 *	  over without a lock, and looked at again under a new snapshot,
 *	  where the statement would lock its latest version before checking
 *	  it, and keep that lock (aw_direct_lock says why).
 *
 *	  It does so only where nothing but those steps would happen: in a
 *	  READ COMMITTED transaction that may write, when the caller may read
 *	  and update the outbox and no permission hook watches, and when the
 *	  outbox has no triggers, rules, row security, partitions or children,
 *	  stored generated columns, constraint that a claim's update could
 *	  break, and has the index the statement would use, in its order.
 *	  Anywhere else it says so, and the claim runs
 *	  the statement, which does whatever else applies (or raises what the
 *	  statement would raise).  doc/design.md, "The first look without the
 *	  executor", says what is kept and how the tests hold it.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/claim_direct.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "aw_claim_internal.h"
#include "aw_compat.h"
#include "aw_direct.h"
#include "aw_settings.h"

/* looks under a new snapshot before one follows rows updated since */
#define AW_DIRECT_LOOKS 3

/* the outbox's columns, in the order of a claim's result */
static const char *const aw_direct_colnames[AW_OUTBOX_MAX_NATTS] = {
	"dispatch_key", "topic", "payload", "attempt", "visible_after",
	"enqueued_at", "last_error", "lease_token", "parked_at",
	"leased_until", "priority"
};
static const Oid aw_direct_coltypes[AW_OUTBOX_MAX_NATTS] = {
	TEXTOID, TEXTOID, JSONBOID, INT4OID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TEXTOID, INT8OID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, INT2OID
};

enum
{
	AW_COL_KEY, AW_COL_TOPIC, AW_COL_PAYLOAD, AW_COL_ATTEMPT,
	AW_COL_VISIBLE_AFTER, AW_COL_ENQUEUED_AT, AW_COL_LAST_ERROR,
	AW_COL_LEASE_TOKEN, AW_COL_PARKED_AT, AW_COL_LEASED_UNTIL,
	AW_COL_PRIORITY
};

/* the columns a claim writes */
static const int aw_direct_written[] = {
	AW_COL_VISIBLE_AFTER, AW_COL_LEASE_TOKEN, AW_COL_PARKED_AT, AW_COL_LEASED_UNTIL
};

/* Whether a claim writes column a of the outbox. */
static bool
aw_direct_writes(const AttrNumber *att, AttrNumber a)
{
	for (int w = 0; w < (int) lengthof(aw_direct_written); w++)
		if (att[aw_direct_written[w]] == a)
			return true;
	return false;
}

/*
 * What the first look needs of the catalogs, found once and kept (c).
 */
typedef struct AwDirectShape
{
	AwDirectCache c;			/* known: the fields below are filled */
	Oid			index;			/* its (topic, priority DESC, visible_after) */
	Oid			seq;			/* aion_wake.lease_token_seq */
	AttrNumber	att[AW_OUTBOX_MAX_NATTS];	/* by AW_COL_* */
	Oid			topic_eq;		/* the index's operators' functions */
	Oid			prio_eq;
	Oid			prio_lt;
	Oid			prio_gt;
	Oid			fence_le;
	Oid			topic_coll;		/* the index's collation of topic */
} AwDirectShape;

static AwDirectShape aw_direct_shape;

/* The function of the index column's operator strategy, or InvalidOid. */
Oid
aw_direct_op(Relation index, int col, Oid righttype, int16 strategy)
{
	Oid			op = get_opfamily_member(index->rd_opfamily[col],
										 index->rd_opcintype[col],
										 righttype, strategy);

	return OidIsValid(op) ? get_opcode(op) : InvalidOid;
}

/* Whether index column col has type's default btree operator class. */
bool
aw_direct_default_opclass(Relation index, int col, Oid type)
{
	Oid			opclass = GetDefaultOpClass(type, BTREE_AM_OID);

	return OidIsValid(opclass) && index->rd_opfamily[col] == get_opclass_family(opclass);
}

/*
 * Whether rel is a plain table, where a write of a row does nothing but
 * write it: not partitioned or inherited from, no row security, triggers
 * (foreign keys that reference it among them) or rules.
 */
bool
aw_direct_rel_plain(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relhassubclass &&
		!rel->rd_rel->relispartition && !rel->rd_rel->relrowsecurity &&
		rel->trigdesc == NULL && rel->rd_rules == NULL;
}

/* A relcache invalidation: what the cache at arg learned may be stale. */
static void
aw_direct_forget(Datum arg, Oid relid)
{
	((AwDirectCache *) DatumGetPointer(arg))->known = false;
}

/*
 * aion_wake.outbox, locked in RowExclusiveLock, if the caller has the
 * privileges in need on the whole table and cache does not know it unfit;
 * else InvalidOid.  Looked up by name and checked after the lock is
 * taken, as a statement is: taking it takes in what other sessions
 * committed to the catalogs meanwhile (a REVOKE; the table renamed, and
 * another made in its place).  The lock is what the statement would take.
 */
Oid
aw_direct_outbox(AwDirectCache *cache, AclMode need)
{
	Oid			relid;

	if (!cache->registered)
	{
		CacheRegisterRelcacheCallback(aw_direct_forget, PointerGetDatum(cache));
		cache->registered = true;
	}
	relid = RangeVarGetRelidExtended(makeRangeVar("aion_wake", "outbox", -1),
									 RowExclusiveLock, RVR_MISSING_OK, NULL, NULL);
	if (!OidIsValid(relid) ||
		pg_class_aclmask(relid, GetUserId(), need, ACLMASK_ALL) != need)
		return InvalidOid;
	if (cache->known && relid != cache->rel)
		cache->known = false;
	if (cache->known && !cache->fit)
		return InvalidOid;
	cache->rel = relid;
	return relid;
}

/* The column of desc named name, of type type; else InvalidAttrNumber. */
AttrNumber
aw_direct_column(TupleDesc desc, const char *name, Oid type)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
			return attr->atttypid == type ? attr->attnum : InvalidAttrNumber;
	}
	return InvalidAttrNumber;
}

/*
 * Whether a CHECK constraint of rel could fail on a claim's update: one
 * that reads a column a claim writes (the new values could break it), one
 * not validated (a row may break it already) or one that calls a function
 * not immutable (its answer may have changed).  A validated, immutable
 * constraint of columns the update leaves alone holds after it, since it
 * held before; if any other exists, the statement, which checks them all,
 * must run.
 */
static bool
aw_direct_checks_may_fail(Relation rel, const AttrNumber *att)
{
	TupleConstr *constr = rel->rd_att->constr;

	if (constr == NULL)
		return false;
	for (int i = 0; i < constr->num_check; i++)
	{
		Node	   *expr = stringToNode(constr->check[i].ccbin);
		Bitmapset  *cols = NULL;

		if (!constr->check[i].ccvalid || contain_mutable_functions(expr))
			return true;
		pull_varattnos(expr, 1, &cols);
		if (bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, cols))
			return true;		/* reads the whole row */
		for (int w = 0; w < (int) lengthof(aw_direct_written); w++)
			if (bms_is_member(att[aw_direct_written[w]] - FirstLowInvalidHeapAttributeNumber,
							  cols))
				return true;
	}
	return false;
}

/*
 * Fill aw_direct_shape from the catalogs and the opened outbox rel and its
 * index.  Leaves fit false where the first look must not run.
 */
static void
aw_direct_learn(Relation rel, Relation index)
{
	AwDirectShape *s = &aw_direct_shape;
	TupleDesc	desc = RelationGetDescr(rel);
	Form_pg_index ix = index->rd_index;
	int			c;

	s->c.fit = false;
	s->c.known = true;

	/* nothing else may happen on an update of the outbox */
	if (!aw_direct_rel_plain(rel) ||
		(desc->constr != NULL && desc->constr->has_generated_stored))
		return;

	/* every column a claim returns or writes, of its type */
	for (c = 0; c < AW_OUTBOX_MAX_NATTS; c++)
	{
		s->att[c] = aw_direct_column(desc, aw_direct_colnames[c], aw_direct_coltypes[c]);
		if (s->att[c] == InvalidAttrNumber)
			return;
	}
	for (int i = 0; i < desc->natts; i++)
		if (aw_not_null_unvalidated(desc, i))
			return;
	if (TupleDescAttr(desc, s->att[AW_COL_PARKED_AT] - 1)->attnotnull ||
		aw_direct_checks_may_fail(rel, s->att))
		return;

	/* the index, as the statement's plan would scan it */
	if (index->rd_rel->relam != BTREE_AM_OID || ix->indrelid != RelationGetRelid(rel) ||
		!ix->indisvalid || !ix->indisready || !ix->indislive ||
		ix->indnatts != 3 || ix->indnkeyatts != 3 ||
		ix->indkey.values[0] != s->att[AW_COL_TOPIC] ||
		ix->indkey.values[1] != s->att[AW_COL_PRIORITY] ||
		ix->indkey.values[2] != s->att[AW_COL_VISIBLE_AFTER] ||
		RelationGetIndexExpressions(index) != NIL ||
		RelationGetIndexPredicate(index) != NIL)
		return;
	/*
	 * in the order the statement's ORDER BY and probe read it: priority
	 * DESC, fences ascending, each column's own operator class and the
	 * topic's own collation (an index someone rebuilt otherwise would give
	 * the rows in another order, and a plan would not use it for that
	 * ORDER BY)
	 */
	for (c = 0; c < 3; c++)
	{
		AttrNumber	a = ix->indkey.values[c];

		if (((index->rd_indoption[c] & INDOPTION_DESC) != 0) != (c == 1) ||
			!aw_direct_default_opclass(index, c, TupleDescAttr(desc, a - 1)->atttypid))
			return;
	}
	if (index->rd_indcollation[0] != TupleDescAttr(desc, s->att[AW_COL_TOPIC] - 1)->attcollation)
		return;
	s->topic_eq = aw_direct_op(index, 0, TEXTOID, BTEqualStrategyNumber);
	s->prio_eq = aw_direct_op(index, 1, INT2OID, BTEqualStrategyNumber);
	s->prio_lt = aw_direct_op(index, 1, INT2OID, BTLessStrategyNumber);
	s->prio_gt = aw_direct_op(index, 1, INT2OID, BTGreaterStrategyNumber);
	s->fence_le = aw_direct_op(index, 2, TIMESTAMPTZOID, BTLessEqualStrategyNumber);
	s->topic_coll = index->rd_indcollation[0];
	if (!OidIsValid(s->topic_eq) || !OidIsValid(s->prio_eq) || !OidIsValid(s->prio_lt) ||
		!OidIsValid(s->prio_gt) || !OidIsValid(s->fence_le))
		return;
	s->c.fit = true;
}

/*
 * Tell each index whether a claim's update leaves its key unchanged, the
 * hint index_insert() passes on (btree's bottom-up deletion uses it): the
 * executor works it out from the statement's updated columns, which only
 * a statement has.  An index on expressions is taken as changed.
 */
static void
aw_direct_hint_unchanged(ResultRelInfo *rri)
{
	AwDirectShape *s = &aw_direct_shape;

	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
		bool		unchanged = true;

		for (int k = 0; k < ii->ii_NumIndexKeyAttrs; k++)
		{
			AttrNumber	a = ii->ii_IndexAttrNumbers[k];

			if (a <= 0 || aw_direct_writes(s->att, a))
				unchanged = false;
		}
		ii->ii_CheckedUnchanged = true;
		ii->ii_IndexUnchanged = unchanged;
	}
}

/* The index's entries of topic whose priority is op than value. */
static void
aw_direct_keys(ScanKey keys, Datum topic, Oid prio_op, int16 prio_strategy, int16 prio)
{
	AwDirectShape *s = &aw_direct_shape;

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, TEXTOID,
						   s->topic_coll, s->topic_eq, topic);
	ScanKeyEntryInitialize(&keys[1], 0, 2, prio_strategy, INT2OID,
						   InvalidOid, prio_op, Int16GetDatum(prio));
}

/*
 * Whether slot's row still qualifies: of topic, of priority prio, its
 * fence at now or before.  A row locked in a version newer than the
 * snapshot's is taken only if it does, as the statement's EvalPlanQual
 * recheck takes it.
 */
static bool
aw_direct_recheck(TupleTableSlot *slot, ScanKey keys)
{
	AwDirectShape *s = &aw_direct_shape;
	const int	cols[3] = {AW_COL_TOPIC, AW_COL_PRIORITY, AW_COL_VISIBLE_AFTER};

	for (int k = 0; k < 3; k++)
	{
		bool		isnull;
		Datum		v = slot_getattr(slot, s->att[cols[k]], &isnull);

		if (isnull ||
			!DatumGetBool(FunctionCall2Coll(&keys[k].sk_func, keys[k].sk_collation,
											v, keys[k].sk_argument)))
			return false;
	}
	return true;
}

/*
 * What a look has leased so far: the rows' new versions, in the order
 * taken, with each one's fence before and whether it was parked.
 */
typedef struct AwDirectLease
{
	HeapTuple	tuple;			/* the new version */
	TimestampTz old_fence;
	bool		was_parked;
} AwDirectLease;

typedef struct AwDirectLeases
{
	Relation	rel;
	ResultRelInfo *rri;
	EState	   *estate;
	TimestampTz lease_end;
	int			max;			/* rows wanted */
	int			n;				/* rows leased */
	int			room;			/* of leases */
	AwDirectLease *leases;
	int16		looked;			/* the lowest priority a look scanned */
	Datum	   *values;			/* a row's columns, reused for each lease */
	bool	   *nulls;
	TupleTableSlot *newslot;	/* a new version, reused for each lease */
} AwDirectLeases;

/*
 * Lease the row version locked holds, as the statement's UPDATE does: the
 * fence and leased_until at the lease's end, parked_at NULL, a token from
 * lease_token_seq; then its index entries.
 */
static void
aw_direct_lease(AwDirectLeases *l, Snapshot snapshot, TupleTableSlot *locked)
{
	AwDirectShape *s = &aw_direct_shape;
	TupleDesc	desc = RelationGetDescr(l->rel);
	Datum	   *rowvals = l->values;
	bool	   *rownulls = l->nulls;
	TupleTableSlot *newslot = l->newslot;
	AwUpdateIndexes update_indexes;
	AwDirectLease *lease;

	if (l->n == l->room)
	{
		l->room *= 2;
		l->leases = repalloc(l->leases, sizeof(AwDirectLease) * l->room);
	}
	lease = &l->leases[l->n++];

	slot_getallattrs(locked);
	memcpy(rowvals, locked->tts_values, sizeof(Datum) * desc->natts);
	memcpy(rownulls, locked->tts_isnull, sizeof(bool) * desc->natts);
	lease->old_fence = DatumGetTimestampTz(rowvals[s->att[AW_COL_VISIBLE_AFTER] - 1]);
	lease->was_parked = !rownulls[s->att[AW_COL_PARKED_AT] - 1];

	rowvals[s->att[AW_COL_VISIBLE_AFTER] - 1] = TimestampTzGetDatum(l->lease_end);
	rowvals[s->att[AW_COL_LEASED_UNTIL] - 1] = TimestampTzGetDatum(l->lease_end);
	rownulls[s->att[AW_COL_LEASED_UNTIL] - 1] = false;
	rowvals[s->att[AW_COL_LEASE_TOKEN] - 1] = Int64GetDatum(nextval_internal(s->seq, true));
	rownulls[s->att[AW_COL_LEASE_TOKEN] - 1] = false;
	rownulls[s->att[AW_COL_PARKED_AT] - 1] = true;

	lease->tuple = heap_form_tuple(desc, rowvals, rownulls);
	ExecStoreHeapTuple(lease->tuple, newslot, false);
	simple_table_tuple_update(l->rel, &locked->tts_tid, newslot, snapshot, &update_indexes);
	if (AW_UPDATE_INDEXES_ANY(update_indexes))
		list_free(aw_insert_update_index_tuples(l->rri, newslot, l->estate, update_indexes));
}

/*
 * Whether the row version found carries the xmax of another transaction
 * still in progress: a lock or an update not yet committed.  A tuple lock
 * in LockTupleExclusive mode with LockWaitSkip would then answer
 * TM_WouldBlock, after an exclusive lock on the heap page and three trips
 * through the shared lock table (the tuple lock taken and given back, the
 * holder's transaction lock tried); this costs a share lock on the page
 * and the in-progress check that tuple lock would make too.  When many
 * claims walk the same head of the index at once, most rows a walk meets
 * are held this way, and those trips were where its workers waited
 * (bench/throughput/results/held_rows.md).
 *
 * Under SKIP LOCKED a row held at the moment it is looked at is passed
 * over, whoever holds it: this is that check made earlier.  Anything else
 * (no xmax, a committed or aborted one, a MultiXact, this transaction's
 * own) answers false and goes to the tuple lock, which decides.
 */
static bool
aw_direct_held(TupleTableSlot *found)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) found;
	HeapTupleHeader htup;
	uint16		infomask;
	TransactionId xmax;

	if (!TTS_IS_BUFFERTUPLE(found) || !BufferIsValid(bslot->buffer))
		return false;
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	htup = bslot->base.tuple->t_data;
	infomask = htup->t_infomask;
	xmax = HeapTupleHeaderGetRawXmax(htup);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);

	if ((infomask & (HEAP_XMAX_INVALID | HEAP_XMAX_COMMITTED | HEAP_XMAX_IS_MULTI)) != 0 ||
		!TransactionIdIsNormal(xmax) || TransactionIdIsCurrentTransactionId(xmax))
		return false;
	return TransactionIdIsInProgress(xmax);
}

/*
 * One look under snapshot: probe for the priority, scan its visible rows
 * and lease those nobody holds until l has all it wants.
 *
 * A row updated and committed since the snapshot is, when follow, locked
 * in its latest version and taken only if that version still qualifies,
 * as the statement's EvalPlanQual recheck takes it; a version that fails
 * the recheck stays locked until the transaction ends, and its lease
 * holder's settle waits for that.  So unless follow such a row is passed
 * over without a lock and *stale set: the caller looks again under a new
 * snapshot, in which the row's latest version is found or not by the
 * scan itself.  (Unless follow no flag is passed: with
 * TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS, heap_lock_tuple locks the
 * newer versions of a row whose updater commits while it looks, and
 * still answers TM_Updated.)
 */
static void
aw_direct_lock(AwDirectLeases *l, Relation index, Snapshot snapshot, CommandId cid,
			   Datum topic_datum, int32 below, TimestampTz now, bool follow,
			   TupleTableSlot *found, TupleTableSlot *locked, bool *stale)
{
	AwDirectShape *s = &aw_direct_shape;
	IndexScanDesc scan;
	ScanKeyData keys[3];
	int16		prio = 0;

	/* the highest priority below below and above 0 that has a row, else 0 */
	scan = aw_index_beginscan(l->rel, index, snapshot, 3);
	aw_direct_keys(keys, topic_datum, s->prio_lt, BTLessStrategyNumber, (int16) below);
	ScanKeyEntryInitialize(&keys[2], 0, 2, BTGreaterStrategyNumber, INT2OID,
						   InvalidOid, s->prio_gt, Int16GetDatum(0));
	index_rescan(scan, keys, 3, NULL, 0);
	if (index_getnext_slot(scan, ForwardScanDirection, found))
	{
		bool		isnull;

		prio = DatumGetInt16(slot_getattr(found, s->att[AW_COL_PRIORITY], &isnull));
	}
	index_endscan(scan);
	l->looked = Min(l->looked, prio);

	/*
	 * Its rows visible at now, oldest fence first: lease each nobody holds.
	 * The entries a lease adds lie past now in the index, where the scan
	 * ends, and are not visible to its snapshot.
	 */
	aw_direct_keys(keys, topic_datum, s->prio_eq, BTEqualStrategyNumber, prio);
	ScanKeyEntryInitialize(&keys[2], 0, 3, BTLessEqualStrategyNumber, TIMESTAMPTZOID,
						   InvalidOid, s->fence_le, TimestampTzGetDatum(now));
	scan = aw_index_beginscan(l->rel, index, snapshot, 3);
	index_rescan(scan, keys, 3, NULL, 0);
	while (l->n < l->max && index_getnext_slot(scan, ForwardScanDirection, found))
	{
		TM_FailureData tmfd;
		TM_Result	r;

		CHECK_FOR_INTERRUPTS();
		if (aw_direct_held(found))
			continue;
		r = table_tuple_lock(l->rel, &found->tts_tid, snapshot, locked, cid,
							 LockTupleExclusive, LockWaitSkip,
							 follow ? (TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS |
									   TUPLE_LOCK_FLAG_FIND_LAST_VERSION) : 0,
							 &tmfd);
		switch (r)
		{
			case TM_Ok:
				if (!tmfd.traversed || aw_direct_recheck(locked, keys))
					aw_direct_lease(l, snapshot, locked);
				break;
			case TM_Updated:	/* only when !follow: nothing locked */
				*stale = true;
				break;
			case TM_WouldBlock:	/* held by another: skipped */
			case TM_SelfModified:	/* changed by this transaction since */
			case TM_Deleted:	/* gone since the snapshot */
				break;
			case TM_Invisible:
				elog(ERROR, "attempted to lock invisible tuple");
				break;
			default:
				elog(ERROR, "unexpected table_tuple_lock status: %u", r);
				break;
		}
	}
	index_endscan(scan);
}

/*
 * The looks, on the opened outbox and its index, into l.
 *
 * Each runs as a statement of a function would: after a
 * CommandCounterIncrement(), so that it sees what came before it in this
 * transaction, under a snapshot of its own.  A look that passed over
 * rows updated since its snapshot and is still short looks again under a
 * new one; the last look follows such rows as the statement does, so a
 * claim never comes back short for rows that were only stale to it.
 */
static void
aw_direct_take(AwDirectLeases *l, Relation index, const char *topic, int32 below,
			   TimestampTz now)
{
	TupleTableSlot *found = table_slot_create(l->rel, NULL);
	TupleTableSlot *locked = table_slot_create(l->rel, NULL);
	Datum		topic_datum = CStringGetTextDatum(topic);

	for (int look = 1;; look++)
	{
		bool		follow = look == AW_DIRECT_LOOKS;
		bool		stale = false;
		CommandId	cid;
		Snapshot	snapshot;

		CommandCounterIncrement();
		cid = GetCurrentCommandId(true);
		PushActiveSnapshot(GetTransactionSnapshot());
		snapshot = GetActiveSnapshot();

		/*
		 * The test hook aion_wake.debug_look_lock = K: look N waits for
		 * the advisory lock (K, N) in share mode, so that a test holding
		 * it can change a row after this look's snapshot and before its
		 * scan (test/t/047_third_look.pl)
		 */
		if (unlikely(aw_debug_look_lock != 0))
			DirectFunctionCall2(pg_advisory_xact_lock_shared_int4,
								Int32GetDatum(aw_debug_look_lock), Int32GetDatum(look));
		l->estate->es_snapshot = snapshot;
		l->estate->es_output_cid = cid;
		aw_direct_lock(l, index, snapshot, cid, topic_datum, below, now, follow,
					   found, locked, &stale);
		PopActiveSnapshot();
		if (l->n == l->max || !stale || follow)
			break;
	}
	CommandCounterIncrement();
	ExecDropSingleTupleTableSlot(found);
	ExecDropSingleTupleTableSlot(locked);
}

/*
 * For qsort_arg: rows by priority, highest first, then fence before, then
 * key, as the walk returns them.
 */
static int
aw_direct_row_cmp(const void *a, const void *b, void *arg)
{
	const AwDirectRow *ra = a;
	const AwDirectRow *rb = b;
	int16		pa = DatumGetInt16(ra->values[AW_COL_PRIORITY]);
	int16		pb = DatumGetInt16(rb->values[AW_COL_PRIORITY]);

	if (pa != pb)
		return pa > pb ? -1 : 1;
	if (ra->old_fence != rb->old_fence)
		return ra->old_fence < rb->old_fence ? -1 : 1;
	return DatumGetInt32(DirectFunctionCall2Coll(bttextcmp, *(Oid *) arg,
												 ra->values[AW_COL_KEY],
												 rb->values[AW_COL_KEY]));
}

/*
 * Whether the first look may run in this transaction at all, whatever the
 * outbox: where aw_direct_xact_may() allows a write without the executor,
 * and for a priority below in range.
 */
bool
aw_claim_direct_may(int32 below)
{
	return aw_direct_xact_may() && below > 0 && below <= PG_INT16_MAX;
}

/*
 * Whether a write without the executor may run in this transaction at
 * all: only in READ COMMITTED (a statement in another level raises where
 * a concurrent update meets it, and takes predicate locks), in a
 * transaction that may write and is not parallel, and with no permission
 * hook (sepgsql, pgaudit) that the statement's executor would call.
 */
bool
aw_direct_xact_may(void)
{
	return XactIsoLevel == XACT_READ_COMMITTED && !XactReadOnly &&
		!IsInParallelMode() && ExecutorCheckPerms_hook == NULL;
}

/*
 * The first look of a claim of max_rows rows of topic: the oldest rows
 * nobody holds, visible at now, of the topic's highest priority below
 * below and above 0 that has a row (else of priority 0), leased until
 * lease_end, which must lie after now (else a look after the first
 * would find them again).  Returns false when the look is not done here:
 * the caller runs a statement.  Else *nrows rows were leased (0: no such
 * row), and *rows (allocated in the caller's memory) holds their columns
 * in the order of a claim's result, each one's fence before and whether
 * it was parked, ordered as the walk returns them; *nrows may be short of
 * max_rows when that priority has no more, and *looked is then the lowest
 * priority a look scanned (a look that passed over stale rows probes
 * again).
 */
bool
aw_claim_direct(const char *topic, int32 below, int max_rows, TimestampTz now,
				TimestampTz lease_end, AwDirectRow **rows, int *nrows, int16 *looked)
{
	AwDirectShape *s = &aw_direct_shape;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt;
	Relation	rel;
	Relation	index = NULL;
	EState	   *estate;
	ResultRelInfo *rri;
	Oid			relid;
	bool		fit;

	*nrows = 0;

	/*
	 * Not here: a transaction aw_claim_direct_may refuses, a caller without
	 * SELECT and UPDATE on the whole outbox (the statement raises, or
	 * checks column privileges), an outbox found unfit before.
	 */
	if (!aw_claim_direct_may(below))
		return false;
	relid = aw_direct_outbox(&s->c, ACL_SELECT | ACL_UPDATE);
	if (!OidIsValid(relid))
		return false;
	if (!s->c.known)
	{
		Oid			nsp = get_namespace_oid("aion_wake", false);

		s->index = get_relname_relid("outbox_topic_priority_visible_idx", nsp);
		s->seq = get_relname_relid("lease_token_seq", nsp);
		if (!OidIsValid(s->index) || !OidIsValid(s->seq))
			return false;
	}

	/* what the look allocates goes when it ends; a waiting claim looks often */
	cxt = AllocSetContextCreate(caller, "aion_wake claim look", ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(cxt);
	rel = table_open(relid, NoLock);
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, false);
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (RelationGetRelid(rri->ri_IndexRelationDescs[i]) == s->index)
			index = rri->ri_IndexRelationDescs[i];
	if (index != NULL && !s->c.known)
		aw_direct_learn(rel, index);

	/*
	 * Decided once: an invalidation taken in during the look (nextval opens
	 * the sequence) forgets the shape, and must not turn a row leased into
	 * an answer that makes the caller look again without it.
	 */
	fit = index != NULL && s->c.known && s->c.fit;
	if (fit)
	{
		AwDirectLeases l = {
			.rel = rel,.rri = rri,.estate = estate,.lease_end = lease_end,
			.max = max_rows,.n = 0,.room = Min(max_rows, 64),
			.looked = PG_INT16_MAX
		};
		TupleDesc	desc = RelationGetDescr(rel);
		Datum	   *rowvals = palloc(sizeof(Datum) * desc->natts);
		bool	   *rownulls = palloc(sizeof(bool) * desc->natts);
		Oid			key_coll = TupleDescAttr(desc, s->att[AW_COL_KEY] - 1)->attcollation;

		Assert(lease_end > now);
		l.leases = palloc(sizeof(AwDirectLease) * l.room);
		l.values = rowvals;
		l.nulls = rownulls;
		l.newslot = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
		CheckCmdReplicaIdentity(rel, CMD_UPDATE);
		aw_direct_hint_unchanged(rri);
		aw_direct_take(&l, index, topic, below, now);
		ExecDropSingleTupleTableSlot(l.newslot);

		/* the leased rows' columns, in the caller's memory */
		MemoryContextSwitchTo(caller);
		if (l.n > 0)
			*rows = palloc(sizeof(AwDirectRow) * l.n);
		for (int r = 0; r < l.n; r++)
		{
			AwDirectRow *row = &(*rows)[r];

			heap_deform_tuple(heap_copytuple(l.leases[r].tuple), desc, rowvals, rownulls);
			for (int c = 0; c < AW_OUTBOX_MAX_NATTS; c++)
			{
				row->values[c] = rowvals[s->att[c] - 1];
				row->nulls[c] = rownulls[s->att[c] - 1];
			}
			row->old_fence = l.leases[r].old_fence;
			row->was_parked = l.leases[r].was_parked;
		}
		if (l.n > 1)
			qsort_arg(*rows, l.n, sizeof(AwDirectRow), aw_direct_row_cmp, &key_coll);
		*nrows = l.n;
		*looked = l.looked;
		MemoryContextSwitchTo(cxt);
	}
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	return fit;
}
