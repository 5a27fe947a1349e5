/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  The SQL functions of the row life cycle but claims (claim.c):
 *	  enqueue, complete, fail, park, dead_letter, pulse and reoffer.
 *
 *	  Each works on aion_wake.outbox through SPI, in the caller's
 *	  transaction and with the caller's privileges, using statements
 *	  prepared once per backend in which every name and operator is
 *	  schema-qualified (see plans.c).  Times come from the clock at the
 *	  call, never from the transaction's start.  What a function means for
 *	  the parked set is recorded with aw_xact.h and settled when the
 *	  transaction ends.
 *
 *	  complete, fail, park and dead_letter settle the row's lease: each
 *	  holds its topic's lock in share mode (limits.c) and records the lease
 *	  it ended, so that a limited topic's slot is released at commit,
 *	  exactly once, and a rolled-back settle of a row whose lease had ended
 *	  wakes a claimer.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "aw_args.h"
#include "aw_claim.h"
#include "aw_limits.h"
#include "aw_plans.h"
#include "aw_pulse_parse.h"
#include "aw_reoffer.h"
#include "aw_lease_ledger.h"
#include "aw_parked_set.h"
#include "aw_worker_slots.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_enqueue);
PG_FUNCTION_INFO_V1(aw_complete);
PG_FUNCTION_INFO_V1(aw_fail);
PG_FUNCTION_INFO_V1(aw_park);
PG_FUNCTION_INFO_V1(aw_dead_letter);
PG_FUNCTION_INFO_V1(aw_pulse);
PG_FUNCTION_INFO_V1(aw_reoffer);
PG_FUNCTION_INFO_V1(aw_complete_next);
PG_FUNCTION_INFO_V1(aw_fail_next);
PG_FUNCTION_INFO_V1(aw_park_next);
PG_FUNCTION_INFO_V1(aw_dead_letter_next);

/* one kept plan per statement and schema version */
typedef enum AwStmt
{
	AW_STMT_ENQUEUE,
	AW_STMT_COMPLETE,
	AW_STMT_FAIL,
	AW_STMT_PARK,
	AW_STMT_DEAD_LETTER,
	AW_NUM_STMTS
} AwStmt;

static SPIPlanPtr aw_plans[AW_NUM_STMTS][3];	/* by schema: 1.0, 1.1, 1.2 */

/*
 * A kept plan for one of the statements of this file, prepared on first use
 * (see plans.c).  A statement's "%s" takes what the 1.1 schema adds (1.0
 * has no leased_until); a statement that the 1.2 schema changes beyond
 * that (priority) has its 1.2 form whole in v12, or, if its "%1$s" is
 * 1.1's, what 1.2 adds at "%2$s" to "%4$s" in v12_adds.  The lease_token
 * match is "$n IS NULL OR lease_token = $n": a NULL token means any
 * lease.  Every settle returns the row's topic, its lease token and its
 * fence before the call.
 */
static SPIPlanPtr
aw_stmt(AwStmt stmt)
{
	static const struct
	{
		const char *sql;
		const char *v11;
		int			nargs;
		Oid			types[6];
		const char *v12;		/* the 1.2 form whole, or NULL */
		const char *v12_adds[3];	/* or what the 1.2 schema adds at %2$s.. */
	}			stmts[AW_NUM_STMTS] = {
		[AW_STMT_ENQUEUE] = {
			/* $6, the priority, is the 1.2 schema's; before it, unused */
			"INSERT INTO aion_wake.outbox AS o "
			"  (dispatch_key, topic, payload, visible_after, enqueued_at) "
			"VALUES ($1, $2, $3, $4, $5) ON CONFLICT (dispatch_key) DO NOTHING%s",
			"",
			6, {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT2OID},
			"INSERT INTO aion_wake.outbox AS o "
			"  (dispatch_key, topic, payload, visible_after, enqueued_at, priority) "
			"VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (dispatch_key) DO NOTHING"
		},
		[AW_STMT_COMPLETE] = {
			"DELETE FROM aion_wake.outbox "
			" WHERE dispatch_key OPERATOR(pg_catalog.=) $1 "
			"   AND ($2 IS NULL OR lease_token OPERATOR(pg_catalog.=) $2) "
			"RETURNING topic, lease_token, visible_after, parked_at IS NOT NULL%s",
			"",
			2, {TEXTOID, INT8OID}
		},
		[AW_STMT_FAIL] = {
			"WITH b AS (SELECT visible_after FROM aion_wake.outbox "
			"            WHERE dispatch_key OPERATOR(pg_catalog.=) $1 FOR UPDATE) "
			"UPDATE aion_wake.outbox o "
			"   SET attempt = o.attempt OPERATOR(pg_catalog.+) 1, visible_after = $3, "
			"       last_error = $2, parked_at = NULL%s "
			"  FROM b "
			" WHERE o.dispatch_key OPERATOR(pg_catalog.=) $1 "
			"   AND ($4 IS NULL OR o.lease_token OPERATOR(pg_catalog.=) $4) "
			"RETURNING o.topic, o.lease_token, b.visible_after",
			", leased_until = NULL",
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
			"UPDATE aion_wake.outbox o SET visible_after = $2, parked_at = $3%s "
			"  FROM b "
			" WHERE o.dispatch_key OPERATOR(pg_catalog.=) $1 "
			"   AND ($4 IS NULL OR o.lease_token OPERATOR(pg_catalog.=) $4) "
			"RETURNING o.topic, o.lease_token, b.visible_after, o.attempt, b.parked_at",
			", leased_until = NULL",
			4, {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
		},
		[AW_STMT_DEAD_LETTER] = {
			"WITH d AS (DELETE FROM aion_wake.outbox "
			"            WHERE dispatch_key OPERATOR(pg_catalog.=) $1 "
			"              AND ($3 IS NULL OR lease_token OPERATOR(pg_catalog.=) $3) "
			"           RETURNING *) "
			"INSERT INTO aion_wake.dead_letters AS l "
			"  (dispatch_key, topic, payload, attempt, visible_after, enqueued_at, "
			"   last_error, lease_token, parked_at, reason, dead_at%2$s) "
			"SELECT d.dispatch_key, d.topic, d.payload, d.attempt, d.visible_after, "
			"       d.enqueued_at, d.last_error, d.lease_token, d.parked_at, $2, $4%3$s "
			"  FROM d "
			"ON CONFLICT (dispatch_key) DO UPDATE SET topic = EXCLUDED.topic, "
			"   payload = EXCLUDED.payload, attempt = EXCLUDED.attempt, "
			"   visible_after = EXCLUDED.visible_after, enqueued_at = EXCLUDED.enqueued_at, "
			"   last_error = EXCLUDED.last_error, lease_token = EXCLUDED.lease_token, "
			"   parked_at = EXCLUDED.parked_at, reason = EXCLUDED.reason, "
			"   dead_at = EXCLUDED.dead_at%1$s%4$s "
			"RETURNING l.topic, l.lease_token, l.visible_after",
			", leased_until = NULL",
			4, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID},
			NULL,
			/* dead_letters keeps the row's priority */
			{", priority", ", d.priority", ", priority = EXCLUDED.priority"}
		},
	};
	int			version = aw_schema_version();
	int			v = version >= 12 ? 2 : version >= 11 ? 1 : 0;

	if (aw_plans[stmt][v] == NULL)
	{
		char	   *sql;

		if (v == 2 && stmts[stmt].v12 != NULL)
			sql = pstrdup(stmts[stmt].v12);
		else if (stmts[stmt].v12_adds[0] != NULL)
			sql = psprintf(stmts[stmt].sql, v ? stmts[stmt].v11 : "",
						   v == 2 ? stmts[stmt].v12_adds[0] : "",
						   v == 2 ? stmts[stmt].v12_adds[1] : "",
						   v == 2 ? stmts[stmt].v12_adds[2] : "");
		else
			sql = psprintf(stmts[stmt].sql, v ? stmts[stmt].v11 : "");

		(void) aw_plan_prepare(&aw_plans[stmt][v], sql, stmts[stmt].nargs,
							   stmts[stmt].types);
		pfree(sql);
	}
	return aw_plans[stmt][v];
}

/*
 * Run a kept statement.  nulls follows SPI's convention (' ' or 'n').
 */
static uint64
aw_run(AwStmt stmt, Datum *args, const char *nulls, int expected)
{
	return aw_plan_run(aw_stmt(stmt), args, nulls, expected);
}

/*
 * enqueue(dispatch_key, payload, topic, delay, priority): insert a row;
 * false when the key is already there.  The 1.0 and 1.1 schemas' enqueue
 * has no priority argument; their rows have no priority.
 */
Datum
aw_enqueue(PG_FUNCTION_ARGS)
{
	char	   *key;
	char	   *topic;
	int64		delay;
	int32		priority = 0;
	TimestampTz now;
	Datum		args[6];
	uint64		n;

	aw_begin_write("aion_wake.enqueue()");
	key = aw_arg_key(fcinfo, 0);
	aw_arg_not_null(fcinfo, 1, "payload");
	topic = aw_arg_topic(fcinfo, 2);
	delay = aw_arg_interval_us(fcinfo, 3, "delay");
	if (PG_NARGS() > 4)
	{
		aw_arg_not_null(fcinfo, 4, "priority");
		priority = PG_GETARG_INT32(4);
		if (priority < AW_PRIORITY_MIN || priority > AW_PRIORITY_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("priority must be between %d and %d", AW_PRIORITY_MIN,
							AW_PRIORITY_MAX),
					 errdetail("The value given was %d.", priority)));
	}
	now = GetCurrentTimestamp();

	args[0] = CStringGetTextDatum(key);
	args[1] = CStringGetTextDatum(topic);
	args[2] = PG_GETARG_DATUM(1);
	args[3] = TimestampTzGetDatum(aw_clock_plus(now, delay));
	args[4] = TimestampTzGetDatum(now);
	args[5] = Int16GetDatum((int16) priority);

	SPI_connect();
	n = aw_run(AW_STMT_ENQUEUE, args, NULL, SPI_OK_INSERT);
	SPI_finish();
	if (n == 1)
		aw_xact_record_visibility(topic, DatumGetTimestampTz(args[3]), now);
	PG_RETURN_BOOL(n == 1);
}

/* What a settle statement returned about the row it settled. */
typedef struct AwSettled
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	int64		token;			/* the lease token the row carried */
	bool		has_token;
	TimestampTz old_fence;		/* visible_after before the call */
} AwSettled;

/*
 * Read the first three columns every settle returns (topic, lease_token,
 * the old visible_after).  Caller is connected to SPI, and one row came.
 */
static void
aw_read_settled(AwSettled *out)
{
	HeapTuple	tup = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;
	Datum		d;

	text_to_cstring_buffer(DatumGetTextPP(SPI_getbinval(tup, desc, 1, &isnull)),
						   out->topic, sizeof(out->topic));
	d = SPI_getbinval(tup, desc, 2, &isnull);
	out->has_token = !isnull;
	out->token = isnull ? 0 : DatumGetInt64(d);
	out->old_fence = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
}

/*
 * After a settle's statement: hold the topic's lock in share mode until
 * the transaction ends (so that a set_limit() counts this lease exactly),
 * and record the lease ended for the commit (release, with a pulse unless
 * park) and for the rollback (a wake if the row is claimable again).
 */
static void
aw_record_settled(const char *key, const AwSettled *s, bool pulse)
{
	int32		max_in_flight;
	bool		limited = false;

	if (aw_schema_version() >= 11)
	{
		aw_lock_topic(s->topic, AccessShareLock);
		limited = s->has_token && aw_limits_topic_limited(s->topic, &max_in_flight);
	}
	aw_xact_record_settle(key, s->token, s->topic, limited, pulse, s->old_fence);
}

/*
 * complete(dispatch_key, lease_token): delivered, delete the row.  Returns
 * whether it was there; *settled describes it.
 */
static bool
aw_do_complete(FunctionCallInfo fcinfo, char **keyp, AwSettled *settled)
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

		aw_read_settled(settled);
		was_parked = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 4, &isnull));
		aw_record_settled(key, settled, true);
	}
	SPI_finish();
	if (was_parked)
		aw_xact_record_forget(key);
	*keyp = key;
	return n == 1;
}

Datum
aw_complete(PG_FUNCTION_ARGS)
{
	char	   *key;
	AwSettled	settled;

	PG_RETURN_BOOL(aw_do_complete(fcinfo, &key, &settled));
}

/*
 * fail(dispatch_key, error, backoff, lease_token): a real failed delivery:
 * attempt + 1, fence at clock + backoff, no longer parked or leased.
 */
static bool
aw_do_fail(FunctionCallInfo fcinfo, char **keyp, AwSettled *settled)
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
		aw_read_settled(settled);
		aw_record_settled(key, settled, true);
		aw_xact_record_forget(key);
		aw_xact_record_visibility(settled->topic, DatumGetTimestampTz(args[2]), now);
	}
	SPI_finish();
	*keyp = key;
	return n == 1;
}

Datum
aw_fail(PG_FUNCTION_ARGS)
{
	char	   *key;
	AwSettled	settled;

	PG_RETURN_BOOL(aw_do_fail(fcinfo, &key, &settled));
}

/*
 * park(dispatch_key, backoff, lease_token): BUSY.  Write the fence in this
 * transaction (the UPDATE takes the row's lock before the set is touched),
 * remember the row as pending, confirm at COMMIT, forget at ROLLBACK.  The
 * lease's slot is released at commit but is no pulse: the consumer has just
 * said it has no room.
 */
static bool
aw_do_park(FunctionCallInfo fcinfo, char **keyp, AwSettled *settled)
{
	char	   *key;
	int64		backoff;
	TimestampTz now;
	TimestampTz fence;
	Datum		args[4];
	char		nulls[5] = "    ";
	uint64		n;
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

		aw_read_settled(settled);
		attempt = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 4, &isnull));

		/* if the row was parked before, a rollback must restore its entry */
		memset(&before, 0, sizeof(before));
		before.parked_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 5,
															 &isnull));
		before.valid = !isnull;
		before.fence = settled->old_fence;
		before.attempt = attempt;
		strlcpy(before.topic, settled->topic, sizeof(before.topic));
		aw_record_settled(key, settled, false);
	}
	SPI_finish();
	*keyp = key;
	if (n != 1)
		return false;

	aw_xact_record_visibility(settled->topic, fence, now);
	if (!aw_database_is_served())
		aw_warn_unserved_once();
	else
	{
		/* recorded before the set changes, so nothing can fail in between */
		AwParkRecord *rec = aw_xact_prepare_park(key);
		AwParkResult r;

		r = aw_set_park(AW_KIND_FENCED, key, settled->topic, attempt, now, fence,
						&rec->generation, &rec->saved);
		if (r == AW_PARK_OK)
		{
			if (!rec->saved.valid)
				rec->saved = before;
			aw_nudge_worker(MyDatabaseId);
		}
		else
			aw_warn_park_failed(r, key, true);
	}
	return true;
}

Datum
aw_park(PG_FUNCTION_ARGS)
{
	char	   *key;
	AwSettled	settled;

	PG_RETURN_BOOL(aw_do_park(fcinfo, &key, &settled));
}

/*
 * dead_letter(dispatch_key, reason, lease_token): move the row to
 * aion_wake.dead_letters.
 */
static bool
aw_do_dead_letter(FunctionCallInfo fcinfo, char **keyp, AwSettled *settled)
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
	n = aw_run(AW_STMT_DEAD_LETTER, args, nulls, SPI_OK_INSERT_RETURNING);
	if (n == 1)
	{
		aw_read_settled(settled);
		aw_record_settled(key, settled, true);
	}
	SPI_finish();
	if (n == 1)
		aw_xact_record_forget(key);
	*keyp = key;
	return n == 1;
}

Datum
aw_dead_letter(PG_FUNCTION_ARGS)
{
	char	   *key;
	AwSettled	settled;

	PG_RETURN_BOOL(aw_do_dead_letter(fcinfo, &key, &settled));
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

/*
 * The forms with next_rows: settle, then take up to next_rows rows of the
 * same topic in the same transaction (claim.c, aw_claim_next).  They return
 * the rows taken; nothing when the settle found no row (unknown key, or a
 * lease_token that no longer matches).  next_rows and lease, at argno_next
 * and after, are checked before the settle changes anything.
 */
typedef bool (*AwSettleFn) (FunctionCallInfo fcinfo, char **keyp, AwSettled *settled);

static Datum
aw_settle_next(FunctionCallInfo fcinfo, AwSettleFn settle, int argno_next,
			   bool spend_parked)
{
	char	   *key;
	AwSettled	s = {0};
	int32		next_rows = aw_arg_int_range(fcinfo, argno_next, "next_rows", 0,
											 AW_MAX_ROWS_LIMIT);
	int64		lease = aw_arg_interval_us(fcinfo, argno_next + 1, "lease");
	bool		found = settle(fcinfo, &key, &s);

	aw_claim_next(fcinfo, found ? s.topic : NULL, next_rows, lease, spend_parked);
	return (Datum) 0;
}

Datum
aw_complete_next(PG_FUNCTION_ARGS)
{
	return aw_settle_next(fcinfo, aw_do_complete, 2, true);
}

Datum
aw_fail_next(PG_FUNCTION_ARGS)
{
	return aw_settle_next(fcinfo, aw_do_fail, 4, true);
}

/* after park() the next row is never a parked one: the consumer is full */
Datum
aw_park_next(PG_FUNCTION_ARGS)
{
	return aw_settle_next(fcinfo, aw_do_park, 3, false);
}

Datum
aw_dead_letter_next(PG_FUNCTION_ARGS)
{
	return aw_settle_next(fcinfo, aw_do_dead_letter, 3, true);
}
