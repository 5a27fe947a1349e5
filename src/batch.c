/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  complete, fail, park and dead_letter over many leased rows at once:
 *	  complete(dispatch_keys[], lease_tokens[]) and the like, which return
 *	  the rows settled, and the forms with next_rows, which take the next
 *	  rows of the settled rows' topics in the same statement (the zero-gap
 *	  hand-off of a whole batch, claim.c's aw_claim_next_topics).
 *
 *	  A call settles every (key, token) pair whose row still carries that
 *	  token, in one statement over the arrays (unnest), as a hand-written
 *	  batch DELETE or UPDATE would; a stale token or a missing key settles
 *	  nothing for its pair.  complete_many deletes its rows without the
 *	  executor where that statement would do nothing else
 *	  (settle_direct.c).  Each row settled is then recorded exactly as
 *	  its single-row settle records it (outbox.c): the lease it ended (a
 *	  limited topic's slot released at commit, once, and passed on to the
 *	  next rows taken), the park forgotten at commit, a park's entry in the
 *	  set.  Each topic's lock is taken once per call.
 *
 *	  The keys are sorted before the statement runs, which reads the rows
 *	  in key order (the primary key's index, "dispatch_key = ANY" of the
 *	  keys: plans.c allows only index plans), so two calls that settle
 *	  overlapping keys lock the rows in the same order and never deadlock
 *	  (settle_direct.c deletes them in that order too).
 *	  A key given twice is an error: its row would be settled twice.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/batch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "aw_args.h"
#include "aw_batch.h"
#include "aw_claim.h"
#include "aw_direct.h"
#include "aw_limits.h"
#include "aw_plans.h"
#include "aw_parked_set.h"
#include "aw_worker_slots.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_complete_batch);
PG_FUNCTION_INFO_V1(aw_fail_batch);
PG_FUNCTION_INFO_V1(aw_park_batch);
PG_FUNCTION_INFO_V1(aw_dead_letter_batch);
PG_FUNCTION_INFO_V1(aw_complete_batch_next);
PG_FUNCTION_INFO_V1(aw_fail_batch_next);
PG_FUNCTION_INFO_V1(aw_park_batch_next);
PG_FUNCTION_INFO_V1(aw_dead_letter_batch_next);

typedef enum AwBatchKind
{
	AW_BATCH_COMPLETE,
	AW_BATCH_FAIL,
	AW_BATCH_PARK,
	AW_BATCH_DEAD_LETTER,
	AW_BATCH_KINDS
} AwBatchKind;

/* one (key, token) pair of a call */
typedef struct AwBatchPair
{
	const char *key;
	int64		token;
	int			pos;			/* in the arrays as given */
} AwBatchPair;

/* one topic of the rows a call settled */
typedef struct AwBatchTopic
{
	char		name[AW_TOPIC_MAXLEN + 1];	/* hash key: must be first */
	int			first;			/* the first position of a row of it */
	int32		settled;		/* rows of it settled */
	bool		limited;
} AwBatchTopic;

/* one row a call settled: what its settle returned of it */
typedef struct AwBatchRow
{
	int			pair;			/* in AwBatch.pairs */
	char		topic[AW_TOPIC_MAXLEN + 1];
	TimestampTz old_fence;		/* its fence before the call */
	/* what the kind returns beyond those */
	Datum		col5;			/* complete: was it parked (bool); park: its
								 * attempt (int4); by value on every platform */
	TimestampTz parked_at;		/* park: its parked_at before, unless */
	bool		parked_at_null;
} AwBatchRow;

/* one call: its arguments, then what it settled */
typedef struct AwBatch
{
	AwBatchKind kind;
	const char *fname;
	int			n;
	AwBatchPair *pairs;			/* sorted by key */
	Datum		text_arg;		/* fail's error, dead_letter's reason */
	bool		text_null;
	int64		backoff;		/* fail, park */
	HTAB	   *topics;
	int			ntopics;
} AwBatch;

static SPIPlanPtr aw_batch_plans[AW_BATCH_KINDS];

/*
 * The settle statements.  $1 and $2 are the keys, sorted, and their
 * tokens; every row whose key and token match is settled.  Every scan of
 * the outbox has "dispatch_key = ANY ($1)" for its index condition, so
 * that a kept plan made while the table was small (which would join the
 * keys to a read of the whole primary key index) still reads only the
 * keys' rows at any size (plans.c).  Each returns
 * the row's key, topic, lease token and fence before the call, then what
 * its single-row form returns beyond those (outbox.c).  fail and park lock
 * the rows first (b), so that the fence returned is the latest committed
 * one, as in their single-row forms.
 */
static const char *const aw_batch_sql[AW_BATCH_KINDS] = {
	[AW_BATCH_COMPLETE] =
	"DELETE FROM aion_wake.outbox o "
	" USING ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS q(k, t) "
	" WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY ($1) "
	"   AND o.dispatch_key OPERATOR(pg_catalog.=) q.k "
	"   AND o.lease_token OPERATOR(pg_catalog.=) q.t "
	"RETURNING o.dispatch_key, o.topic, o.lease_token, o.visible_after, "
	"          o.parked_at IS NOT NULL",

	[AW_BATCH_FAIL] =
	"WITH b AS (SELECT o.dispatch_key, q.t, o.visible_after "
	"             FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS q(k, t) "
	"             JOIN aion_wake.outbox o ON o.dispatch_key OPERATOR(pg_catalog.=) ANY ($1) "
	"                                    AND o.dispatch_key OPERATOR(pg_catalog.=) q.k "
	"                                    AND o.lease_token OPERATOR(pg_catalog.=) q.t "
	"              FOR UPDATE OF o) "
	"UPDATE aion_wake.outbox o "
	"   SET attempt = o.attempt OPERATOR(pg_catalog.+) 1, visible_after = $4, "
	"       last_error = $3, parked_at = NULL, leased_until = NULL "
	"  FROM b "
	" WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY ($1) "
	"   AND o.dispatch_key OPERATOR(pg_catalog.=) b.dispatch_key "
	"   AND o.lease_token OPERATOR(pg_catalog.=) b.t "
	"RETURNING o.dispatch_key, o.topic, o.lease_token, b.visible_after",

	[AW_BATCH_PARK] =
	"WITH b AS (SELECT o.dispatch_key, q.t, o.visible_after, o.parked_at "
	"             FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS q(k, t) "
	"             JOIN aion_wake.outbox o ON o.dispatch_key OPERATOR(pg_catalog.=) ANY ($1) "
	"                                    AND o.dispatch_key OPERATOR(pg_catalog.=) q.k "
	"                                    AND o.lease_token OPERATOR(pg_catalog.=) q.t "
	"              FOR UPDATE OF o) "
	"UPDATE aion_wake.outbox o SET visible_after = $3, parked_at = $4, leased_until = NULL "
	"  FROM b "
	" WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY ($1) "
	"   AND o.dispatch_key OPERATOR(pg_catalog.=) b.dispatch_key "
	"   AND o.lease_token OPERATOR(pg_catalog.=) b.t "
	"RETURNING o.dispatch_key, o.topic, o.lease_token, b.visible_after, o.attempt, "
	"          b.parked_at",

	[AW_BATCH_DEAD_LETTER] =
	"WITH d AS (DELETE FROM aion_wake.outbox o "
	"            USING ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS q(k, t) "
	"            WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY ($1) "
	"              AND o.dispatch_key OPERATOR(pg_catalog.=) q.k "
	"              AND o.lease_token OPERATOR(pg_catalog.=) q.t "
	"           RETURNING o.*) "
	"INSERT INTO aion_wake.dead_letters AS l "
	"  (dispatch_key, topic, payload, attempt, visible_after, enqueued_at, "
	"   last_error, lease_token, parked_at, reason, dead_at, priority) "
	"SELECT d.dispatch_key, d.topic, d.payload, d.attempt, d.visible_after, "
	"       d.enqueued_at, d.last_error, d.lease_token, d.parked_at, $3, $4, d.priority "
	"  FROM d "
	"ON CONFLICT (dispatch_key) DO UPDATE SET topic = EXCLUDED.topic, "
	"   payload = EXCLUDED.payload, attempt = EXCLUDED.attempt, "
	"   visible_after = EXCLUDED.visible_after, enqueued_at = EXCLUDED.enqueued_at, "
	"   last_error = EXCLUDED.last_error, lease_token = EXCLUDED.lease_token, "
	"   parked_at = EXCLUDED.parked_at, reason = EXCLUDED.reason, "
	"   dead_at = EXCLUDED.dead_at, leased_until = NULL, priority = EXCLUDED.priority "
	"RETURNING l.dispatch_key, l.topic, l.lease_token, l.visible_after",
};

static const Oid aw_batch_types[AW_BATCH_KINDS][4] = {
	[AW_BATCH_COMPLETE] = {TEXTARRAYOID, INT8ARRAYOID},
	[AW_BATCH_FAIL] = {TEXTARRAYOID, INT8ARRAYOID, TEXTOID, TIMESTAMPTZOID},
	[AW_BATCH_PARK] = {TEXTARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
	[AW_BATCH_DEAD_LETTER] = {TEXTARRAYOID, INT8ARRAYOID, TEXTOID, TIMESTAMPTZOID},
};

static const int aw_batch_nargs[AW_BATCH_KINDS] = {2, 4, 4, 4};

static int
aw_pair_cmp(const void *a, const void *b)
{
	return strcmp(((const AwBatchPair *) a)->key, ((const AwBatchPair *) b)->key);
}

/*
 * A one-dimensional array argument, not null, as its elements.  Returns
 * the number of elements.
 */
static int
aw_batch_array(FunctionCallInfo fcinfo, int argno, const char *name, Oid elemtype,
			   int elemlen, bool byval, char align, Datum **elems, bool **nulls)
{
	ArrayType  *arr;
	int			n;

	aw_arg_not_null(fcinfo, argno, name);
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", name)));
	deconstruct_array(arr, elemtype, elemlen, byval, align, elems, nulls, &n);
	return n;
}

/*
 * Check a call's keys and tokens and sort them by key.  Every check comes
 * before anything is changed.
 */
static void
aw_batch_pairs(FunctionCallInfo fcinfo, AwBatch *b, int argno_keys, int argno_tokens)
{
	Datum	   *keys;
	Datum	   *tokens;
	bool	   *key_nulls;
	bool	   *token_nulls;
	int			nkeys;
	int			ntokens;
	int			i;

	nkeys = aw_batch_array(fcinfo, argno_keys, "dispatch_keys", TEXTOID, -1, false,
						   TYPALIGN_INT, &keys, &key_nulls);
	ntokens = aw_batch_array(fcinfo, argno_tokens, "lease_tokens", INT8OID, 8,
							 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &tokens, &token_nulls);
	if (nkeys != ntokens)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dispatch_keys and lease_tokens must have the same length"),
				 errdetail("dispatch_keys has %d and lease_tokens %d elements.",
						   nkeys, ntokens)));
	if (nkeys > AW_BATCH_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s takes at most %d keys", b->fname, AW_BATCH_MAX_KEYS),
				 errdetail("%d keys were given.", nkeys),
				 errhint("Settle the rows in several calls.")));
	b->n = nkeys;
	b->pairs = palloc(sizeof(AwBatchPair) * Max(nkeys, 1));
	for (i = 0; i < nkeys; i++)
	{
		text	   *t;
		int			len;

		if (key_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("dispatch_keys must not contain null"),
					 errdetail("Element %d is null.", i + 1)));
		if (token_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("lease_tokens must not contain null"),
					 errdetail("Element %d is null.", i + 1),
					 errhint("Every row of a batch is settled with the token of its lease.")));
		t = DatumGetTextPP(keys[i]);
		len = VARSIZE_ANY_EXHDR(t);
		if (len < 1 || len > AW_KEY_MAXLEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("dispatch_key must be 1 to %d bytes long", AW_KEY_MAXLEN),
					 errdetail("Element %d of dispatch_keys is %d bytes long.", i + 1, len)));
		b->pairs[i].key = text_to_cstring(t);
		b->pairs[i].token = DatumGetInt64(tokens[i]);
		b->pairs[i].pos = i;
	}
	if (nkeys > 1)
		qsort(b->pairs, nkeys, sizeof(AwBatchPair), aw_pair_cmp);
	for (i = 1; i < nkeys; i++)
	{
		if (strcmp(b->pairs[i - 1].key, b->pairs[i].key) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("dispatch_keys must not contain a key twice"),
					 errdetail("Key \"%s\" is given more than once.", b->pairs[i].key)));
	}
}

/* The pair (in b->pairs) of a key the statement settled. */
static int
aw_batch_pair(AwBatch *b, const char *key)
{
	AwBatchPair probe;
	AwBatchPair *p;

	probe.key = key;
	p = bsearch(&probe, b->pairs, b->n, sizeof(AwBatchPair), aw_pair_cmp);
	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s settled a row whose key is not byte for byte a key given", b->fname),
				 errdetail("The row's key is \"%s\".", key),
				 errhint("aion_wake.outbox.dispatch_key must keep a deterministic collation.")));
	return p - b->pairs;
}

/* The topic of a settled row, entered with its first row. */
static AwBatchTopic *
aw_batch_topic(AwBatch *b, const char *name, int pos)
{
	AwBatchTopic *t;
	bool		found;

	t = hash_search(b->topics, name, HASH_ENTER, &found);
	if (!found)
	{
		t->first = pos;
		t->settled = 0;
		t->limited = false;
		b->ntopics++;
	}
	else
		t->first = Min(t->first, pos);
	t->settled++;
	return t;
}

/*
 * Hold the lock of every topic of the rows settled, in share mode until
 * the transaction ends, as every settle holds it (limits.c), each once per
 * call and in the claims' order (by lock key, 64 at a time: share locks
 * never wait for each other, and the exclusive holders -- set_limit's
 * commit, the loading of a limit -- never wait while they hold one); then
 * read each topic's limit once: no set_limit() of it can commit meanwhile.
 */
static void
aw_batch_lock_topics(AwBatch *b)
{
	HASH_SEQ_STATUS status;
	AwBatchTopic *t;
	AwBatchTopic *chunk[64];
	char	   *names[64];
	int			n = 0;
	int			i;

	hash_seq_init(&status, b->topics);
	for (;;)
	{
		t = hash_seq_search(&status);
		if (t != NULL)
		{
			chunk[n] = t;
			names[n++] = t->name;
		}
		if (n == 64 || (t == NULL && n > 0))
		{
			aw_lock_topics_shared(names, n, n == 64 ? ~UINT64CONST(0) :
								  (UINT64CONST(1) << n) - 1);
			for (i = 0; i < n; i++)
			{
				int32		max_in_flight;

				chunk[i]->limited = aw_limits_topic_limited(chunk[i]->name, &max_in_flight);
			}
			n = 0;
		}
		if (t == NULL)
			break;
	}
}

/*
 * Settle the call's rows into rows[] (room for b->n): complete's delete
 * without the executor where settle_direct.c may run it, else the kind's
 * statement.  Returns the rows settled.
 */
static int
aw_batch_run(AwBatch *b, TimestampTz now, TimestampTz fence, AwBatchRow *rows)
{
	Datum	   *keys;
	Datum	   *tokens;
	Datum		args[4];
	char		nulls[5] = "    ";
	uint64		n;
	int			i;

	if (b->kind == AW_BATCH_COMPLETE)
	{
		const char **ckeys = palloc(sizeof(char *) * b->n);
		int64	   *ctokens = palloc(sizeof(int64) * b->n);
		AwDirectDeleted *deleted = palloc(sizeof(AwDirectDeleted) * b->n);
		int			nd;

		for (i = 0; i < b->n; i++)
		{
			ckeys[i] = b->pairs[i].key;
			ctokens[i] = b->pairs[i].token;
		}
		if (aw_settle_direct_complete(ckeys, ctokens, b->n, deleted, &nd))
		{
			for (i = 0; i < nd; i++)
			{
				rows[i].pair = deleted[i].pair;
				memcpy(rows[i].topic, deleted[i].topic, sizeof(rows[i].topic));
				rows[i].old_fence = deleted[i].old_fence;
				rows[i].col5 = BoolGetDatum(deleted[i].was_parked);
			}
			return nd;
		}
	}

	keys = palloc(sizeof(Datum) * b->n);
	tokens = palloc(sizeof(Datum) * b->n);
	for (i = 0; i < b->n; i++)
	{
		keys[i] = CStringGetTextDatum(b->pairs[i].key);
		tokens[i] = Int64GetDatum(b->pairs[i].token);
	}
	args[0] = PointerGetDatum(construct_array(keys, b->n, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_array(tokens, b->n, INT8OID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	switch (b->kind)
	{
		case AW_BATCH_COMPLETE:
			break;
		case AW_BATCH_FAIL:
			args[2] = b->text_arg;
			nulls[2] = b->text_null ? 'n' : ' ';
			args[3] = TimestampTzGetDatum(fence);
			break;
		case AW_BATCH_PARK:
			args[2] = TimestampTzGetDatum(fence);
			args[3] = TimestampTzGetDatum(now);
			break;
		case AW_BATCH_DEAD_LETTER:
			args[2] = b->text_arg;
			nulls[2] = b->text_null ? 'n' : ' ';
			args[3] = TimestampTzGetDatum(now);
			break;
		case AW_BATCH_KINDS:
			pg_unreachable();
	}

	SPI_connect();
	n = aw_plan_run(aw_plan_prepare(&aw_batch_plans[b->kind], aw_batch_sql[b->kind],
									aw_batch_nargs[b->kind], aw_batch_types[b->kind]),
					args, nulls,
					b->kind == AW_BATCH_COMPLETE ? SPI_OK_DELETE_RETURNING :
					b->kind == AW_BATCH_DEAD_LETTER ? SPI_OK_INSERT_RETURNING :
					SPI_OK_UPDATE_RETURNING);
	for (uint64 r = 0; r < n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char		key[AW_KEY_MAXLEN + 1];
		bool		isnull;

		text_to_cstring_buffer(DatumGetTextPP(SPI_getbinval(tup, desc, 1, &isnull)),
							   key, sizeof(key));
		rows[r].pair = aw_batch_pair(b, key);
		text_to_cstring_buffer(DatumGetTextPP(SPI_getbinval(tup, desc, 2, &isnull)),
							   rows[r].topic, sizeof(rows[r].topic));
		Assert(DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull)) ==
			   b->pairs[rows[r].pair].token);
		rows[r].old_fence = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		/* read now: a timestamptz is by reference where int8 is, and SPI_finish frees it */
		if (desc->natts >= 5)
			rows[r].col5 = SPI_getbinval(tup, desc, 5, &isnull);
		rows[r].parked_at = 0;
		rows[r].parked_at_null = true;
		if (desc->natts >= 6)
			rows[r].parked_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 6,
																  &rows[r].parked_at_null));
	}
	SPI_finish();
	return (int) n;
}

/*
 * Settle the call's rows and record every row settled as its single-row
 * form does.  Returns the rows settled.
 */
static int
aw_batch_settle(AwBatch *b)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz fence = 0;
	bool		served = aw_database_is_served();
	bool		parked = false;
	AwBatchRow *rows;
	int			n;
	int			r;
	HASHCTL		ctl;

	if (b->n == 0)
		return 0;

	/* in the caller's memory: the claim that follows reads the topics */
	ctl.keysize = AW_TOPIC_MAXLEN + 1;
	ctl.entrysize = sizeof(AwBatchTopic);
	ctl.hcxt = CurrentMemoryContext;
	b->topics = hash_create("aion_wake batch topics", 8, &ctl,
							HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	if (b->kind == AW_BATCH_FAIL || b->kind == AW_BATCH_PARK)
		fence = aw_clock_plus(now, b->backoff);
	rows = palloc(sizeof(AwBatchRow) * b->n);
	n = aw_batch_run(b, now, fence, rows);

	/* the topics first: their locks, then each row */
	for (r = 0; r < n; r++)
		(void) aw_batch_topic(b, rows[r].topic, b->pairs[rows[r].pair].pos);
	if (n > 0)
		aw_batch_lock_topics(b);
	for (r = 0; r < n; r++)
	{
		const char *key = b->pairs[rows[r].pair].key;
		const char *topic = rows[r].topic;
		int64		token = b->pairs[rows[r].pair].token;
		TimestampTz old_fence = rows[r].old_fence;
		AwBatchTopic *t = hash_search(b->topics, topic, HASH_FIND, NULL);

		/* the lease ended: released at commit, a pulse unless park */
		aw_xact_record_settle(key, token, topic, t->limited, b->kind != AW_BATCH_PARK,
							  old_fence);
		switch (b->kind)
		{
			case AW_BATCH_COMPLETE:
				if (DatumGetBool(rows[r].col5))
					aw_xact_record_forget(key);
				break;
			case AW_BATCH_FAIL:
				aw_xact_record_forget(key);
				aw_xact_record_visibility(topic, fence, now);
				break;
			case AW_BATCH_DEAD_LETTER:
				aw_xact_record_forget(key);
				break;
			case AW_BATCH_PARK:
				{
					int32		attempt = DatumGetInt32(rows[r].col5);
					AwSavedEntry before;
					AwParkRecord *rec;
					AwParkResult pr;

					/* if the row was parked before, a rollback must restore its entry */
					memset(&before, 0, sizeof(before));
					before.parked_at = rows[r].parked_at;
					before.valid = !rows[r].parked_at_null;
					before.fence = old_fence;
					before.attempt = attempt;
					strlcpy(before.topic, topic, sizeof(before.topic));

					aw_xact_record_visibility(topic, fence, now);
					if (!served)
						break;
					/* recorded before the set changes, so nothing can fail in between */
					rec = aw_xact_prepare_park(key);
					pr = aw_set_park(AW_KIND_FENCED, key, topic, attempt, now, fence,
									 &rec->generation, &rec->saved);
					if (pr == AW_PARK_OK)
					{
						if (!rec->saved.valid)
							rec->saved = before;
						parked = true;
					}
					else
						aw_warn_park_failed(pr, key, true);
				}
				break;
			case AW_BATCH_KINDS:
				pg_unreachable();
		}
	}
	if (b->kind == AW_BATCH_PARK && n > 0 && !served)
		aw_warn_unserved_once();
	if (parked)
		aw_nudge_worker(MyDatabaseId);
	return n;
}

/*
 * The arguments a kind takes beyond the keys and tokens, at the single-row
 * form's positions with dispatch_keys for dispatch_key and lease_tokens
 * for lease_token.  Returns the position of lease_tokens; next_rows and
 * lease follow it.
 */
static int
aw_batch_args(FunctionCallInfo fcinfo, AwBatch *b, AwBatchKind kind)
{
	static const char *const fnames[AW_BATCH_KINDS] = {
		"aion_wake.complete_many()", "aion_wake.fail_many()", "aion_wake.park_many()",
		"aion_wake.dead_letter_many()"
	};
	/* where lease_tokens is: complete 1, fail 3, park 2, dead_letter 2 */
	static const int argno_tokens[AW_BATCH_KINDS] = {1, 3, 2, 2};

	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->fname = fnames[kind];
	aw_begin_write(b->fname);
	switch (kind)
	{
		case AW_BATCH_FAIL:
		case AW_BATCH_DEAD_LETTER:
			/* fail's error and dead_letter's reason may be null, as for one row */
			b->text_null = PG_ARGISNULL(1);
			b->text_arg = b->text_null ? (Datum) 0 : PG_GETARG_DATUM(1);
			if (kind == AW_BATCH_FAIL)
				b->backoff = aw_arg_interval_us(fcinfo, 2, "backoff");
			break;
		case AW_BATCH_PARK:
			b->backoff = aw_arg_interval_us(fcinfo, 1, "backoff");
			break;
		default:
			break;
	}
	return argno_tokens[kind];
}

/* The forms without next_rows: the number of rows settled. */
static Datum
aw_batch_count(FunctionCallInfo fcinfo, AwBatchKind kind)
{
	AwBatch		b;
	int			argno_tokens = aw_batch_args(fcinfo, &b, kind);

	aw_batch_pairs(fcinfo, &b, 0, argno_tokens);
	PG_RETURN_INT32(aw_batch_settle(&b));
}

static int
aw_batch_topic_cmp(const void *a, const void *b)
{
	return (*(AwBatchTopic *const *) a)->first - (*(AwBatchTopic *const *) b)->first;
}

/*
 * The forms with next_rows: settle, then take up to next_rows rows in all
 * from the topics of the rows settled, in the order their first row has in
 * the arrays, leased for lease (aw_claim_next_topics).  next_rows and lease
 * are checked before anything changes.
 */
static Datum
aw_batch_next(FunctionCallInfo fcinfo, AwBatchKind kind)
{
	AwBatch		b;
	int			argno_tokens = aw_batch_args(fcinfo, &b, kind);
	int32		next_rows = aw_arg_int_range(fcinfo, argno_tokens + 1, "next_rows", 0,
											 AW_MAX_ROWS_LIMIT);
	int64		lease = aw_arg_interval_us(fcinfo, argno_tokens + 2, "lease");
	const char **names = NULL;
	int32	   *settled = NULL;
	int			i = 0;

	aw_batch_pairs(fcinfo, &b, 0, argno_tokens);
	(void) aw_batch_settle(&b);
	if (b.ntopics > 0)
	{
		AwBatchTopic **order = palloc(sizeof(AwBatchTopic *) * b.ntopics);
		HASH_SEQ_STATUS status;
		AwBatchTopic *t;

		hash_seq_init(&status, b.topics);
		while ((t = hash_seq_search(&status)) != NULL)
			order[i++] = t;
		qsort(order, b.ntopics, sizeof(AwBatchTopic *), aw_batch_topic_cmp);
		names = palloc(sizeof(char *) * b.ntopics);
		settled = palloc(sizeof(int32) * b.ntopics);
		for (i = 0; i < b.ntopics; i++)
		{
			names[i] = order[i]->name;
			settled[i] = order[i]->settled;
		}
	}
	/* after park the next rows are never parked ones: the consumer is full */
	aw_claim_next_topics(fcinfo, names, settled, b.ntopics, next_rows, lease,
						 kind != AW_BATCH_PARK);
	return (Datum) 0;
}

Datum
aw_complete_batch(PG_FUNCTION_ARGS)
{
	return aw_batch_count(fcinfo, AW_BATCH_COMPLETE);
}

Datum
aw_fail_batch(PG_FUNCTION_ARGS)
{
	return aw_batch_count(fcinfo, AW_BATCH_FAIL);
}

Datum
aw_park_batch(PG_FUNCTION_ARGS)
{
	return aw_batch_count(fcinfo, AW_BATCH_PARK);
}

Datum
aw_dead_letter_batch(PG_FUNCTION_ARGS)
{
	return aw_batch_count(fcinfo, AW_BATCH_DEAD_LETTER);
}

Datum
aw_complete_batch_next(PG_FUNCTION_ARGS)
{
	return aw_batch_next(fcinfo, AW_BATCH_COMPLETE);
}

Datum
aw_fail_batch_next(PG_FUNCTION_ARGS)
{
	return aw_batch_next(fcinfo, AW_BATCH_FAIL);
}

Datum
aw_park_batch_next(PG_FUNCTION_ARGS)
{
	return aw_batch_next(fcinfo, AW_BATCH_PARK);
}

Datum
aw_dead_letter_batch_next(PG_FUNCTION_ARGS)
{
	return aw_batch_next(fcinfo, AW_BATCH_DEAD_LETTER);
}
