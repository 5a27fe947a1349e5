/*-------------------------------------------------------------------------
 *
 * settle_direct.c
 *	  complete_many's delete of the rows it settles, done without the
 *	  executor: for each key, one probe of the outbox's primary key, the
 *	  token checked, the row deleted.
 *
 *	  Why: as a statement (batch.c's DELETE ... USING unnest), a batch's
 *	  settle costs more than the rows' deletes themselves: the join of the
 *	  keys to their tokens, the executor's start-up and the statement's
 *	  result, about a third of a batch row's instructions
 *	  (bench/throughput/count.sh).  This file does the same work as that
 *	  statement, row for row: each key's row found under a fresh snapshot,
 *	  deleted if it carries the token, a row another transaction is
 *	  changing waited for, and one updated meanwhile checked again in its
 *	  latest version, as the statement's EvalPlanQual recheck checks it.
 *	  The rows are deleted in the primary key's order, the order the
 *	  statement reads them in, so that two settles that name the same rows
 *	  wait for each other and never deadlock, whichever way each runs.
 *
 *	  It does so only where nothing else would happen: in a READ
 *	  COMMITTED transaction that may write, when the caller may read and
 *	  delete from the whole outbox, and when the outbox has no triggers
 *	  (no foreign key refers to it), rules, row security, partitions or
 *	  children, and its primary key is the btree on dispatch_key.
 *	  Anywhere else it says so, and batch.c runs the statement, which
 *	  does whatever else applies (or raises what it raises).
 *	  doc/design.md ("Batches": complete_many's delete without the
 *	  executor) says how the tests hold it to the statement.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/settle_direct.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "aw_compat.h"
#include "aw_direct.h"

/* the outbox's columns the delete reads */
enum
{
	AW_SD_KEY, AW_SD_TOPIC, AW_SD_TOKEN, AW_SD_FENCE, AW_SD_PARKED_AT, AW_SD_NCOLS
};

static const char *const aw_sd_colnames[AW_SD_NCOLS] = {
	"dispatch_key", "topic", "lease_token", "visible_after", "parked_at"
};
static const Oid aw_sd_coltypes[AW_SD_NCOLS] = {
	TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID
};

/* What the delete needs of the catalogs, found once and kept (c). */
typedef struct AwSettleShape
{
	AwDirectCache c;			/* known: the fields below are filled */
	AttrNumber	att[AW_SD_NCOLS];
	Oid			pkey;			/* its primary key's index */
	Oid			key_eq;			/* the index's = for text */
	Oid			key_coll;		/* and its collation */
} AwSettleShape;

static AwSettleShape aw_sd_shape;

/* Fill aw_sd_shape from the opened outbox; fit stays false where unfit. */
static void
aw_sd_learn(Relation rel)
{
	AwSettleShape *s = &aw_sd_shape;
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			pkey;
	Relation	index;
	Form_pg_index ix;

	s->c.known = true;
	s->c.fit = false;
	if (!aw_direct_rel_plain(rel))
		return;
	for (int c = 0; c < AW_SD_NCOLS; c++)
	{
		s->att[c] = aw_direct_column(desc, aw_sd_colnames[c], aw_sd_coltypes[c]);
		if (s->att[c] == InvalidAttrNumber)
			return;
	}

	/*
	 * the primary key: a btree on dispatch_key alone, by its default class,
	 * not deferrable (so that a snapshot sees one version of a key at most)
	 */
	pkey = aw_primary_key_index(rel);
	if (!OidIsValid(pkey))
		return;
	index = index_open(pkey, AccessShareLock);
	ix = index->rd_index;
	if (index->rd_rel->relam == BTREE_AM_OID && ix->indisunique && ix->indimmediate &&
		ix->indisvalid &&
		ix->indisready && ix->indislive && ix->indnatts == 1 && ix->indnkeyatts == 1 &&
		ix->indkey.values[0] == s->att[AW_SD_KEY] &&
		RelationGetIndexExpressions(index) == NIL &&
		RelationGetIndexPredicate(index) == NIL &&
		(index->rd_indoption[0] & INDOPTION_DESC) == 0 &&
		aw_direct_default_opclass(index, 0, TEXTOID))
	{
		s->pkey = pkey;
		s->key_eq = aw_direct_op(index, 0, TEXTOID, BTEqualStrategyNumber);
		s->key_coll = index->rd_indcollation[0];
		/*
		 * a collation that is not deterministic makes keys of other bytes
		 * equal: the statement's join then pairs one row with several
		 * keys, and the bytes of the key it returns may be none of them
		 */
		s->c.fit = OidIsValid(s->key_eq) && get_collation_isdeterministic(s->key_coll);
	}
	index_close(index, AccessShareLock);
}

/* For qsort_arg: keys in the primary key's order (arg: its collation). */
static int
aw_sd_key_cmp(const void *a, const void *b, void *arg)
{
	return DatumGetInt32(DirectFunctionCall2Coll(bttextcmp, *(Oid *) arg,
												 *(const Datum *) a, *(const Datum *) b));
}

/* The columns of a deleted version that the caller gets. */
static void
aw_sd_result(TupleTableSlot *slot, AwDirectDeleted *out, int pair)
{
	AwSettleShape *s = &aw_sd_shape;
	bool		isnull;

	out->pair = pair;
	text_to_cstring_buffer(DatumGetTextPP(slot_getattr(slot, s->att[AW_SD_TOPIC], &isnull)),
						   out->topic, sizeof(out->topic));
	out->old_fence = DatumGetTimestampTz(slot_getattr(slot, s->att[AW_SD_FENCE], &isnull));
	(void) slot_getattr(slot, s->att[AW_SD_PARKED_AT], &isnull);
	out->was_parked = !isnull;
}

/* Whether slot's version is key's and carries token. */
static bool
aw_sd_matches(TupleTableSlot *slot, ScanKey skey, int64 token)
{
	AwSettleShape *s = &aw_sd_shape;
	bool		isnull;
	Datum		v;

	v = slot_getattr(slot, s->att[AW_SD_TOKEN], &isnull);
	if (isnull || DatumGetInt64(v) != token)
		return false;
	v = slot_getattr(slot, s->att[AW_SD_KEY], &isnull);
	return !isnull && DatumGetBool(FunctionCall2Coll(&skey->sk_func, skey->sk_collation,
													 v, skey->sk_argument));
}

/*
 * Delete the version at tid, found under snapshot and carrying token, as
 * the statement's DELETE does: wait for a transaction changing it; if it
 * was updated meanwhile, lock its latest version and delete that one if
 * it still is key's and carries token (the statement's EvalPlanQual
 * recheck of its quals), else leave it, locked, as that recheck leaves
 * it.  Returns whether a version was deleted; *from_locked then says
 * whether it is the one in locked (else the one at tid).
 */
static bool
aw_sd_delete(Relation rel, ItemPointer tid, Snapshot snapshot, CommandId cid,
			 ScanKey skey, int64 token, TupleTableSlot *locked, bool *from_locked)
{
	ItemPointerData target = *tid;

	*from_locked = false;
	for (;;)
	{
		TM_FailureData tmfd;
		TM_Result	r;

		r = aw_tuple_delete(rel, &target, cid, snapshot, InvalidSnapshot, true, &tmfd);
		switch (r)
		{
			case TM_Ok:
				return true;
			case TM_Deleted:	/* settled, or gone, meanwhile */
				return false;
			case TM_Updated:
				r = table_tuple_lock(rel, &target, snapshot, locked, cid,
									 LockTupleExclusive, LockWaitBlock,
									 TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
				if (r == TM_Deleted)
					return false;
				if (r != TM_Ok)
					elog(ERROR, "unexpected table_tuple_lock status: %u", r);
				if (!aw_sd_matches(locked, skey, token))
					return false;
				target = locked->tts_tid;
				*from_locked = true;
				break;
			default:
				/* TM_SelfModified: only a trigger could, and there is none */
				elog(ERROR, "unexpected table_tuple_delete status: %u", r);
				break;
		}
	}
}

/*
 * Delete the rows of keys[i] that carry tokens[i], for i below n (keys
 * distinct), as complete_many's statement does.  Returns false when the
 * delete does not run here: the caller runs the statement.  Else *ndeleted
 * rows were deleted, and deleted[] (room for n) says which and what they
 * held.
 */
bool
aw_settle_direct_complete(const char *const *keys, const int64 *tokens, int n,
						  AwDirectDeleted *deleted, int *ndeleted)
{
	AwSettleShape *s = &aw_sd_shape;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt;
	Relation	rel;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *found;
	TupleTableSlot *locked;
	Snapshot	snapshot;
	CommandId	cid;
	Oid			relid;
	Datum	   *order;
	int		   *pos;
	int			got = 0;

	*ndeleted = 0;
	if (!aw_direct_xact_may())
		return false;
	relid = aw_direct_outbox(&s->c, ACL_SELECT | ACL_DELETE);
	if (!OidIsValid(relid))
		return false;

	cxt = AllocSetContextCreate(caller, "aion_wake settle", ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(cxt);
	rel = table_open(relid, NoLock);
	if (!s->c.known)
		aw_sd_learn(rel);
	if (!s->c.known || !s->c.fit)
	{
		table_close(rel, NoLock);
		MemoryContextSwitchTo(caller);
		MemoryContextDelete(cxt);
		return false;
	}
	index = index_open(s->pkey, RowExclusiveLock);
	CheckCmdReplicaIdentity(rel, CMD_DELETE);

	/*
	 * The keys in the index's order: each Datum is followed by its place in
	 * keys, so that sorting pairs them
	 */
	order = palloc(sizeof(Datum) * 2 * n);
	for (int i = 0; i < n; i++)
	{
		order[2 * i] = CStringGetTextDatum(keys[i]);
		order[2 * i + 1] = Int32GetDatum(i);
	}
	qsort_arg(order, n, sizeof(Datum) * 2, aw_sd_key_cmp, &s->key_coll);
	pos = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
		pos[i] = DatumGetInt32(order[2 * i + 1]);

	/* as a statement of a function runs: after what came before, its own snapshot */
	CommandCounterIncrement();
	cid = GetCurrentCommandId(true);
	PushActiveSnapshot(GetTransactionSnapshot());
	snapshot = GetActiveSnapshot();
	found = table_slot_create(rel, NULL);
	locked = table_slot_create(rel, NULL);
	scan = aw_index_beginscan(rel, index, snapshot, 1);
	for (int i = 0; i < n; i++)
	{
		int			k = pos[i];
		ScanKeyData skey;
		bool		from_locked;

		CHECK_FOR_INTERRUPTS();
		ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, TEXTOID,
							   s->key_coll, s->key_eq, order[2 * i]);
		index_rescan(scan, &skey, 1, NULL, 0);
		/* a unique index: one version at most is visible */
		if (!index_getnext_slot(scan, ForwardScanDirection, found) ||
			!aw_sd_matches(found, &skey, tokens[k]))
			continue;
		if (aw_sd_delete(rel, &found->tts_tid, snapshot, cid, &skey, tokens[k], locked,
						 &from_locked))
			aw_sd_result(from_locked ? locked : found, &deleted[got++], k);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(found);
	ExecDropSingleTupleTableSlot(locked);
	PopActiveSnapshot();
	CommandCounterIncrement();

	index_close(index, NoLock);
	table_close(rel, NoLock);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	*ndeleted = got;
	return true;
}
