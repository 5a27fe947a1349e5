/*-------------------------------------------------------------------------
 *
 * reoffer.c
 *	  The compare-and-set re-offer: pull a parked row's fence forward to now,
 *	  but only if the row still carries the fence its park wrote.
 *
 *	  A re-offer goes in rounds.  Each round takes candidates from the set
 *	  under its lock (pulse_spend.c decides where every slot goes), then one
 *	  statement moves the first rows among them that still carry their
 *	  park's fence, up to the round's slots, skipping rows that are locked,
 *	  and reports for every candidate whether it moved, is still parked, or
 *	  changed since its park; the set is settled with that.  A row claimed,
 *	  completed or re-fenced since its park no longer matches its fence and
 *	  is never pulled forward (G3); attempt is left alone (G4).  A round that
 *	  meets stale entries (rows deleted behind aion_wake's back, say) looks
 *	  twice as far ahead in the next, so a pulse of k slots costs O(k + log n)
 *	  statements whatever the number n of stale entries before its rows.
 *
 *	  Each round is recorded in the transaction (aw_xact_prepare_round) before
 *	  its entries are taken, so however the transaction ends -- ROLLBACK, an
 *	  error, a FATAL on the way out of a terminated backend -- the ABORT
 *	  callback gives the entries and their slots back.  The worker runs each
 *	  round in a transaction of its own; aion_wake.reoffer() and a claimer
 *	  that spends a pulse run them in the caller's.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/reoffer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "aw_plans.h"
#include "aw_reoffer.h"
#include "aw_waiters.h"
#include "aw_xact.h"

/* candidates per round: the first round's, and the most a round may take */
#define AW_ROUND_MIN 256
#define AW_ROUND_MAX 8192

static SPIPlanPtr aw_cas_plans[2][3];	/* [claim][schema: 1.0, 1.1, 1.2] */

/*
 * The compare-and-set over a round's candidates, in their order: lock and
 * move the first $4 rows still parked at their fence (skipping locked
 * rows), then report each candidate by its position: moved, or still
 * parked at its fence (valid), or neither (stale).  Every access to the
 * outbox is by key, one candidate at a time (LATERAL), so the plan is an
 * index plan whatever the table's size (see plans.c).
 *
 * The "%s" are the SET and RETURNING of the two kinds of round: a plain
 * re-offer moves the fence to now ($3); a claiming one moves it straight to
 * a lease for the caller ($5) and returns the leased rows.
 */
static const char aw_cas_sql[] =
"WITH t AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) "
"                          WITH ORDINALITY AS t(k, f, n)), "
"c AS (SELECT x.dispatch_key FROM t, "
"      LATERAL (SELECT o.dispatch_key FROM aion_wake.outbox o "
"                WHERE o.dispatch_key OPERATOR(pg_catalog.=) t.k "
"                  AND o.visible_after OPERATOR(pg_catalog.=) t.f "
"                  AND o.visible_after OPERATOR(pg_catalog.>) $3 "
"                  AND o.parked_at IS NOT NULL "
"                  FOR UPDATE OF o SKIP LOCKED) x "
"      LIMIT $4), "
"u AS (UPDATE aion_wake.outbox o SET %s "
"       WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.dispatch_key FROM c)) "
"      RETURNING %s) "
"SELECT t.n, u.dispatch_key IS NOT NULL, v.parked%s "
"  FROM t LEFT JOIN u ON u.dispatch_key OPERATOR(pg_catalog.=) t.k, "
"       LATERAL (SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS parked "
"                  FROM aion_wake.outbox o "
"                 WHERE o.dispatch_key OPERATOR(pg_catalog.=) t.k "
"                   AND o.visible_after OPERATOR(pg_catalog.=) t.f "
"                   AND o.visible_after OPERATOR(pg_catalog.>) $3 "
"                   AND o.parked_at IS NOT NULL) v";

/*
 * Which candidates are still parked at their fence, by the latest committed
 * state of their rows: read with a fresh snapshot, never the caller's
 * transaction snapshot (see aw_reoffer_execute).
 */
static const char aw_parked_sql[] =
"SELECT t.n FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) "
"                 WITH ORDINALITY AS t(k, f, n) "
" WHERE EXISTS (SELECT 1 FROM aion_wake.outbox o "
"                WHERE o.dispatch_key OPERATOR(pg_catalog.=) t.k "
"                  AND o.visible_after OPERATOR(pg_catalog.=) t.f "
"                  AND o.visible_after OPERATOR(pg_catalog.>) $3 "
"                  AND o.parked_at IS NOT NULL)";

static SPIPlanPtr aw_parked_plan = NULL;

/* The kept plan of a plain (claim = false) or claiming round. */
static SPIPlanPtr
aw_cas_plan(bool claim)
{
	static const Oid types[5] = {TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID,
	INT4OID, TIMESTAMPTZOID};
	int			version = aw_schema_version();
	bool		v11 = version >= 11;
	int			v = version >= 12 ? 2 : v11 ? 1 : 0;

	if (aw_cas_plans[claim][v] == NULL)
	{
		char	   *sql;

		if (!claim)
			sql = psprintf(aw_cas_sql,
						   v11 ? "visible_after = $3, parked_at = NULL, leased_until = NULL" :
						   "visible_after = $3, parked_at = NULL",
						   "o.dispatch_key", "");
		else
			sql = psprintf(aw_cas_sql,
						   v11 ?
						   "visible_after = $5, parked_at = NULL, leased_until = $5, "
						   "lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass)" :
						   "visible_after = $5, parked_at = NULL, "
						   "lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass)",
						   v == 2 ?
						   "o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
						   "o.enqueued_at, o.last_error, o.lease_token, o.parked_at, o.leased_until, "
						   "o.priority" :
						   v11 ?
						   "o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
						   "o.enqueued_at, o.last_error, o.lease_token, o.parked_at, o.leased_until" :
						   "o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
						   "o.enqueued_at, o.last_error, o.lease_token, o.parked_at",
						   ", u.*");
		(void) aw_plan_prepare(&aw_cas_plans[claim][v], sql, claim ? 5 : 4, types);
		pfree(sql);
	}
	return aw_cas_plans[claim][v];
}

/* Run the compare-and-set over a round; fill b->outcomes.  Returns rows moved. */
static int
aw_reoffer_execute(AwRound *b, AwReofferClaim *claim)
{
	Datum	   *keys = palloc(sizeof(Datum) * b->n);
	Datum	   *fences = palloc(sizeof(Datum) * b->n);
	Datum		args[5];
	int			moved = 0;
	int			stale = 0;
	int			i;
	uint64		r;

	for (i = 0; i < b->n; i++)
	{
		keys[i] = CStringGetTextDatum(b->takes[i].key);
		fences[i] = TimestampTzGetDatum(b->takes[i].fence);
	}
	args[0] = PointerGetDatum(construct_array(keys, b->n, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_array(fences, b->n, TIMESTAMPTZOID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[2] = TimestampTzGetDatum(GetCurrentTimestamp());
	args[3] = Int32GetDatum(b->slots);
	args[4] = TimestampTzGetDatum(claim ? claim->lease_end : 0);

	(void) aw_plan_run(aw_cas_plan(claim != NULL), args, NULL, SPI_OK_SELECT);
	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		pos = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));

		if (pos < 1 || pos > b->n)
			elog(ERROR, "aion_wake re-offer returned candidate %lld of %d",
				 (long long) pos, b->n);
		if (DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull)))
		{
			b->outcomes[pos - 1] = AW_TAKE_MOVED;
			moved++;
			if (claim)
				claim->row(claim->arg, tup, desc, 4);
		}
		else if (DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull)))
			b->outcomes[pos - 1] = AW_TAKE_VALID;
		else
		{
			b->outcomes[pos - 1] = AW_TAKE_STALE;
			stale++;
		}
	}

	/*
	 * Under REPEATABLE READ or SERIALIZABLE the statement above judged the
	 * rows by the transaction's snapshot, which may predate their parks: a
	 * park committed since looks stale, and its entry would be dropped
	 * although the row waits at its fence.  So a candidate that looked
	 * stale is judged again by the latest committed state (a read only, as
	 * PostgreSQL's own foreign key checks do at these levels), and if it is
	 * still parked its entry is kept.  The row itself is not moved by this
	 * transaction: updating a version its snapshot cannot see is what
	 * these levels refuse (40001).  The entry stays for a re-offer that can
	 * see it, and the slot is not spent on it.
	 */
	if (stale > 0 && IsolationUsesXactSnapshot())
	{
		static const Oid types[3] = {TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID};

		(void) aw_plan_run_latest(aw_plan_prepare(&aw_parked_plan, aw_parked_sql, 3, types),
								  args, NULL, SPI_OK_SELECT);
		for (r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			int64		pos = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r],
														  SPI_tuptable->tupdesc, 1,
														  &isnull));

			if (pos >= 1 && pos <= b->n && b->outcomes[pos - 1] == AW_TAKE_STALE)
				b->outcomes[pos - 1] = AW_TAKE_VALID;
		}
	}
	pfree(keys);
	pfree(fences);
	return moved;
}

void
aw_reoffer_start(AwReoffer *r)
{
	r->want = 0;
	r->max = AW_ROUND_MIN;
	r->slot_cap = 0;
	r->own_slots = 0;
	r->own_unspent = 0;
	r->done = false;
	r->claim = NULL;
}

/*
 * One round over a topic, after adding add_slots to it (the caller is
 * connected to SPI).  Each row moved wakes a waiter at commit; with
 * moved_keys, the keys are added there instead and waking is left to the
 * caller.  Sets r->done when the topic has nothing left to re-offer now.
 * Returns the number of rows moved.
 */
int64
aw_reoffer_step(const char *topic, uint64 add_slots, AwReoffer *r,
				bool notify_ready, List **moved_keys)
{
	AwRound *b = aw_xact_prepare_round(topic, r->max);
	int			moved = 0;
	int			stale = 0;
	int			taken;
	int			i;

	b->slot_cap = r->slot_cap;
	b->own_slots = r->own_slots;
	b->claiming = (r->claim != NULL);
	aw_set_take(b, add_slots, r->want);
	taken = b->n;
	if (taken == 0)
	{
		r->own_unspent += r->own_slots;
		r->own_slots = 0;
		r->done = true;
		return 0;
	}
	moved = aw_reoffer_execute(b, r->claim);
	aw_waiters_wake_for(aw_set_finish_round(b), MyDatabaseId, NULL);

	/* keep only what a rollback needs: the rows moved */
	b->n = 0;
	for (i = 0; i < taken; i++)
	{
		if (b->outcomes[i] == AW_TAKE_STALE)
			stale++;
		if (b->outcomes[i] != AW_TAKE_MOVED)
			continue;
		b->takes[b->n] = b->takes[i];
		b->outcomes[b->n] = AW_TAKE_MOVED;
		b->n++;
		/* a row moved is claimable, unless the round claimed it */
		if (r->claim != NULL)
			continue;
		if (moved_keys != NULL)
			*moved_keys = lappend(*moved_keys, pstrdup(b->takes[i].key));
		else
			aw_xact_record_ready(topic, 1);
	}
	if (moved > 0 && notify_ready && r->claim == NULL)
		Async_Notify("aion_wake_ready", topic);

	/*
	 * The caller's own slots this round did not spend (aw_set_finish_round hands
	 * them back): the next round tries them further on when this one met
	 * stale entries (dropped now, so each such round gets further); else
	 * the candidates it could reach were locked or not movable by this
	 * transaction, and would only be met again: they go back to the caller
	 * unspent.
	 */
	r->own_slots -= b->own - b->own_left;
	if (stale == 0)
	{
		r->own_unspent += r->own_slots;
		r->own_slots = 0;
	}
	if (r->slot_cap > 0)
	{
		r->slot_cap -= Min(moved, r->slot_cap);
		if (r->slot_cap == 0)
		{
			r->own_unspent += r->own_slots;
			r->own_slots = 0;
			r->done = true;
			return moved;
		}
	}

	/* stale entries, or a round too small for its slots: look further */
	if (stale > 0 || taken == r->max)
	{
		r->max = Min(r->max * 2, AW_ROUND_MAX);
		if (stale > 0)
			r->want = r->max;
	}
	return moved;
}

/*
 * Spend a topic's slots (after adding add_slots) in the current
 * transaction, round after round, until none is left to spend now.
 */
int64
aw_reoffer_topic(const char *topic, uint64 add_slots, bool notify_ready,
				 List **moved_keys)
{
	AwReoffer	r;
	int64		total = 0;

	aw_reoffer_start(&r);
	while (!r.done)
	{
		total += aw_reoffer_step(topic, add_slots, &r, notify_ready, moved_keys);
		add_slots = 0;
	}
	return total;
}
