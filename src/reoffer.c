/*-------------------------------------------------------------------------
 *
 * reoffer.c
 *	  The compare-and-set re-offer: pull a parked row's fence forward to now,
 *	  but only if the row still carries the fence its park wrote.
 *
 *	  Entries are taken from the set under its lock (parked_set.c decides
 *	  where every slot goes), then one UPDATE moves every row taken, skipping
 *	  rows that are locked, and the set is settled with what moved.  A row
 *	  claimed, completed or re-fenced since its park no longer matches its
 *	  fence and is never pulled forward (G3); attempt is left alone (G4).
 *	  The worker runs this in its own transactions; aion_wake.reoffer() runs
 *	  it in the caller's.  If the transaction rolls back, the entries of the
 *	  rows it moved are put back by the ABORT callback.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/reoffer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "aw_reoffer.h"
#include "aw_set.h"
#include "aw_xact.h"

/* entries taken per UPDATE */
#define AW_REOFFER_BATCH 256

static SPIPlanPtr aw_cas_plan = NULL;
static SPIPlanPtr aw_still_parked_plan = NULL;

/*
 * Prepare a statement once per backend and keep it.
 */
static SPIPlanPtr
aw_prepare(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	if (*cache == NULL)
	{
		/* index lookups whatever the arrays hold: keep the generic plan */
		SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		*cache = plan;
	}
	return *cache;
}

/* Run the compare-and-set over the entries taken; fill outcomes[]. */
static int
aw_reoffer_execute(const AwTake *takes, int n, AwTakeOutcome *outcomes)
{
	Datum	   *keys = palloc(sizeof(Datum) * n);
	Datum	   *fences = palloc(sizeof(Datum) * n);
	Datum		args[3];
	Oid			types[3] = {TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID};
	int			moved = 0;
	int			i;
	uint64		r;
	SPIPlanPtr	plan;

	for (i = 0; i < n; i++)
	{
		keys[i] = CStringGetTextDatum(takes[i].key);
		fences[i] = TimestampTzGetDatum(takes[i].saved.fence);
		outcomes[i] = AW_TAKE_STALE;
	}
	args[0] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_array(fences, n, TIMESTAMPTZOID, 8,
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[2] = TimestampTzGetDatum(GetCurrentTimestamp());

	plan = aw_prepare(&aw_cas_plan,
					  "WITH t(k, f) AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))), "
					  "c AS (SELECT o.dispatch_key FROM aion_wake.outbox o, t "
					  "      WHERE o.dispatch_key OPERATOR(pg_catalog.=) t.k "
					  "        AND o.visible_after OPERATOR(pg_catalog.=) t.f "
					  "        AND o.visible_after OPERATOR(pg_catalog.>) $3 "
					  "        AND o.parked_at IS NOT NULL "
					  "      FOR UPDATE OF o SKIP LOCKED) "
					  "UPDATE aion_wake.outbox o SET visible_after = $3, parked_at = NULL "
					  "  FROM c WHERE o.dispatch_key OPERATOR(pg_catalog.=) c.dispatch_key "
					  "RETURNING o.dispatch_key",
					  3, types);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "aion_wake: re-offer update failed");
	for (r = 0; r < SPI_processed; r++)
	{
		char	   *k = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

		for (i = 0; i < n; i++)
		{
			if (outcomes[i] != AW_TAKE_MOVED && strcmp(takes[i].key, k) == 0)
			{
				outcomes[i] = AW_TAKE_MOVED;
				moved++;
				break;
			}
		}
	}
	if (moved == n)
		return moved;

	/* rows not moved but still parked at their fence were locked */
	plan = aw_prepare(&aw_still_parked_plan,
					  "SELECT o.dispatch_key FROM aion_wake.outbox o, "
					  "       ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS t(k, f) "
					  " WHERE o.dispatch_key OPERATOR(pg_catalog.=) t.k "
					  "   AND o.visible_after OPERATOR(pg_catalog.=) t.f "
					  "   AND o.visible_after OPERATOR(pg_catalog.>) $3 "
					  "   AND o.parked_at IS NOT NULL",
					  3, types);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "aion_wake: re-offer check failed");
	for (r = 0; r < SPI_processed; r++)
	{
		char	   *k = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

		for (i = 0; i < n; i++)
		{
			if (outcomes[i] == AW_TAKE_STALE && strcmp(takes[i].key, k) == 0)
			{
				outcomes[i] = AW_TAKE_LOCKED;
				break;
			}
		}
	}
	return moved;
}

int64
aw_reoffer_round(const char *only_topic, int32 slots, bool notify_ready,
				 List **moved_keys)
{
	AwTake	   *takes = palloc(sizeof(AwTake) * AW_REOFFER_BATCH);
	AwTakeOutcome *outcomes = palloc(sizeof(AwTakeOutcome) * AW_REOFFER_BATCH);
	uint64		add = slots > 0 ? slots : 0;
	int64		total = 0;

	for (;;)
	{
		int			n = aw_set_take(only_topic, add, takes, AW_REOFFER_BATCH);
		int			i;

		add = 0;
		if (n == 0)
			break;

		PG_TRY();
		{
			total += aw_reoffer_execute(takes, n, outcomes);
		}
		PG_CATCH();
		{
			/* nothing moved that will stay moved: retry every entry later */
			for (i = 0; i < n; i++)
				outcomes[i] = AW_TAKE_LOCKED;
			aw_set_settle(takes, outcomes, n);
			PG_RE_THROW();
		}
		PG_END_TRY();

		aw_set_settle(takes, outcomes, n);
		for (i = 0; i < n; i++)
		{
			if (outcomes[i] != AW_TAKE_MOVED)
				continue;
			aw_xact_record_reoffer(takes[i].key, &takes[i].saved);
			if (moved_keys != NULL)
				*moved_keys = lappend(*moved_keys, pstrdup(takes[i].key));
			else
				aw_xact_record_ready(takes[i].saved.topic, 1);
			if (notify_ready)
				Async_Notify("aion_wake_ready", takes[i].saved.topic);
		}
	}
	pfree(takes);
	pfree(outcomes);
	return total;
}
