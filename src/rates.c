/*-------------------------------------------------------------------------
 *
 * rates.c
 *	  Rates and pauses (G10): set_rate(), pause() and resume(), applied at
 *	  commit; loading them from their tables after shared memory is lost;
 *	  and the worker's wakes of claimers a rate or a pause held back.
 *
 *	  A rate ("at most max_starts claims of the topic start in any window
 *	  of length per") and a pause live in two places, like a limit: a row
 *	  of aion_wake.rates or aion_wake.pauses (durable, written in the
 *	  caller's transaction, kept by pg_dump) and the topic in the set
 *	  (rate_ledger.c), where claims reserve their starts.  The set's copy
 *	  changes at the commit: the topic's last set_rate() of the
 *	  transaction applies, and its last pause() or resume(), as either
 *	  would alone.  set_rate() and pause() calls of one topic are kept
 *	  apart by a lock on the topic's writer (as set_limit()'s), which
 *	  claims never take.  Claims need no topic lock for rates: a rate
 *	  counts the starts made from its commit on, so there is nothing to
 *	  count before it applies.
 *
 *	  When shared memory is new, the worker loads rates and pauses with
 *	  the limits (limits.c, worker.c), each rate with a full window (see
 *	  rate_ledger.c); a claim of a topic whose rate or pause is not loaded
 *	  yet takes nothing, as with a limit.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/rates.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "aw_args.h"
#include "aw_plans.h"
#include "aw_rate_ledger.h"
#include "aw_rates.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_set_rate);
PG_FUNCTION_INFO_V1(aw_pause);
PG_FUNCTION_INFO_V1(aw_resume);

/* sub-ids of the locks that keep set_rate() and pause() calls of a topic apart */
#define AW_RATE_WRITER_SUBID 0xA110
#define AW_PAUSE_WRITER_SUBID 0xA111

/* the shortest and the longest window of a rate */
#define AW_RATE_MIN_PER_US ((int64) 1000)
#define AW_RATE_MAX_PER_US USECS_PER_DAY

/* The OID of aion_wake.rates, or InvalidOid before the 1.2 schema. */
Oid
aw_rates_table(void)
{
	Oid			nsp = get_namespace_oid("aion_wake", true);

	return OidIsValid(nsp) ? get_relname_relid("rates", nsp) : InvalidOid;
}

/* Keep calls of one kind on one topic apart until the transaction ends. */
static void
aw_rates_lock_writer(const char *topic, int subid)
{
	LockDatabaseObject(ExtensionRelationId,
					   (Oid) hash_bytes((const unsigned char *) topic, (int) strlen(topic)),
					   subid, AccessExclusiveLock);
}

/* Record a call for its commit, and pin what its commit needs in the set. */
static void
aw_rates_record(const char *topic, const AwRateSetting *s)
{
	AwRateSetting *rec = aw_xact_record_rate(topic, s);
	bool		create = s->pause ? s->paused_until != 0 : s->max_starts > 0;
	AwRateResult r = aw_ledger_rate_promise(topic, !s->pause && s->max_starts > 0, create);

	if (r == AW_RATE_OK)
		rec->promised = true;
	else if (r != AW_RATE_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 r == AW_RATE_TOPICS_FULL ?
				 errmsg("aion_wake topic table is full") :
				 errmsg("too many topics have a rate"),
				 r == AW_RATE_TOPICS_FULL ?
				 errdetail("Topic \"%s\" could not be added to it.", topic) :
				 errdetail("At most %d topics may have a rate at once.", aw_max_rates),
				 errhint("Increase \"%s\".", r == AW_RATE_TOPICS_FULL ?
						 "aion_wake.max_topics" : "aion_wake.max_rates")));
}

/*
 * set_rate(topic, max_starts, per): at most max_starts claims of the topic
 * start in any window of length per, from the commit of this transaction;
 * max_starts NULL removes the rate.  Every row a claim or a hand-off takes
 * is a start.  Refused (53400) when aion_wake.max_rates topics have a rate
 * already.
 */
Datum
aw_set_rate(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr had_plan = NULL;
	static SPIPlanPtr upsert_plan = NULL;
	static SPIPlanPtr delete_plan = NULL;
	static const Oid types[4] = {TEXTOID, INT4OID, INTERVALOID, TIMESTAMPTZOID};
	AwRateSetting s;
	char	   *topic;
	Datum		args[4];

	aw_require_loaded();
	PreventCommandDuringRecovery("aion_wake.set_rate()");
	topic = aw_arg_topic(fcinfo, 0);
	memset(&s, 0, sizeof(s));
	if (!PG_ARGISNULL(1))
	{
		s.max_starts = aw_arg_int_range(fcinfo, 1, "max_starts", 1, AW_MAX_STARTS);
		s.per = aw_arg_interval_us(fcinfo, 2, "per");
		if (s.per < AW_RATE_MIN_PER_US || s.per > AW_RATE_MAX_PER_US)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("per must be between 1 millisecond and 1 day")));
	}

	aw_rates_lock_writer(topic, AW_RATE_WRITER_SUBID);
	SPI_connect();
	args[0] = CStringGetTextDatum(topic);
	args[1] = Int32GetDatum(s.max_starts);
	args[2] = s.max_starts > 0 ? PG_GETARG_DATUM(2) : (Datum) 0;
	args[3] = TimestampTzGetDatum(GetCurrentTimestamp());
	s.had_rate = aw_plan_run(aw_plan_prepare(&had_plan,
											 "SELECT 1 FROM aion_wake.rates "
											 " WHERE topic OPERATOR(pg_catalog.=) $1",
											 1, types),
							 args, NULL, SPI_OK_SELECT) > 0;
	if (s.max_starts > 0)
		(void) aw_settings_run(aw_plan_prepare(&upsert_plan,
										   "INSERT INTO aion_wake.rates AS r (topic, max_starts, per, updated_at) "
										   "VALUES ($1, $2, $3, $4) ON CONFLICT (topic) DO UPDATE "
										   "   SET max_starts = EXCLUDED.max_starts, per = EXCLUDED.per, "
										   "       updated_at = EXCLUDED.updated_at",
										   4, types),
						   args, SPI_OK_INSERT);
	else
		(void) aw_settings_run(aw_plan_prepare(&delete_plan,
										   "DELETE FROM aion_wake.rates "
										   " WHERE topic OPERATOR(pg_catalog.=) $1",
										   1, types),
						   args, SPI_OK_DELETE);
	SPI_finish();
	aw_rates_record(topic, &s);
	PG_RETURN_VOID();
}

/* pause() with until, or resume() (until 0): the row of aion_wake.pauses */
static void
aw_pause_topic(const char *topic, TimestampTz until)
{
	static SPIPlanPtr had_plan = NULL;
	static SPIPlanPtr upsert_plan = NULL;
	static SPIPlanPtr delete_plan = NULL;
	static const Oid types[3] = {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	AwRateSetting s;
	Datum		args[3];
	TimestampTz now = GetCurrentTimestamp();

	memset(&s, 0, sizeof(s));
	s.pause = true;
	s.paused_until = until > now ? until : 0;
	aw_rates_lock_writer(topic, AW_PAUSE_WRITER_SUBID);
	SPI_connect();
	args[0] = CStringGetTextDatum(topic);
	args[1] = TimestampTzGetDatum(until);
	args[2] = TimestampTzGetDatum(now);
	/* what the table held before: a claim of this transaction needs it */
	if (aw_plan_run(aw_plan_prepare(&had_plan,
									"SELECT paused_until FROM aion_wake.pauses "
									" WHERE topic OPERATOR(pg_catalog.=) $1",
									1, types),
					args, NULL, SPI_OK_SELECT) > 0)
	{
		bool		isnull;

		s.had_paused_until = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															   SPI_tuptable->tupdesc, 1,
															   &isnull));
	}
	if (s.paused_until != 0)
		(void) aw_settings_run(aw_plan_prepare(&upsert_plan,
										   "INSERT INTO aion_wake.pauses AS p (topic, paused_until, updated_at) "
										   "VALUES ($1, $2, $3) ON CONFLICT (topic) DO UPDATE "
										   "   SET paused_until = EXCLUDED.paused_until, "
										   "       updated_at = EXCLUDED.updated_at",
										   3, types),
						   args, SPI_OK_INSERT);
	else
		(void) aw_settings_run(aw_plan_prepare(&delete_plan,
										   "DELETE FROM aion_wake.pauses "
										   " WHERE topic OPERATOR(pg_catalog.=) $1",
										   1, types),
						   args, SPI_OK_DELETE);
	SPI_finish();
	aw_rates_record(topic, &s);
}

/*
 * pause(topic, until): no claim or hand-off of the topic takes a row
 * before until, from the commit of this transaction; blocked claimers are
 * woken at until.  A moment already past resumes the topic.
 */
Datum
aw_pause(PG_FUNCTION_ARGS)
{
	char	   *topic;

	aw_require_loaded();
	PreventCommandDuringRecovery("aion_wake.pause()");
	topic = aw_arg_topic(fcinfo, 0);
	aw_arg_not_null(fcinfo, 1, "until");
	aw_pause_topic(topic, PG_GETARG_TIMESTAMPTZ(1));
	PG_RETURN_VOID();
}

/* resume(topic): the topic's pause ends at the commit of this transaction. */
Datum
aw_resume(PG_FUNCTION_ARGS)
{
	char	   *topic;

	aw_require_loaded();
	PreventCommandDuringRecovery("aion_wake.resume()");
	topic = aw_arg_topic(fcinfo, 0);
	aw_pause_topic(topic, 0);
	PG_RETURN_VOID();
}

/*
 * A set_rate(), pause() or resume() ends: with apply, it committed and is
 * its topic's last of its kind.  Wakes the claimers it lets start, and the
 * worker when the topic admits nothing now.  Runs in the transaction
 * callbacks: never raises.
 */
void
aw_rates_at_end(const char *topic, const AwRateSetting *s, bool apply)
{
	bool		blocked;
	int32		wake = aw_ledger_rate_end(topic, !s->pause, s->max_starts, s->per, s->had_rate,
										  s->pause, s->paused_until, apply, &blocked);

	if (wake != 0)
		aw_waiters_wake_starts(MyDatabaseId, topic, wake < 0 ? PG_INT32_MAX : wake);
	if (blocked)
		aw_waiters_wake_for(AW_WAKE_WORKER, MyDatabaseId, NULL);
}

/*
 * Load a topic's rate and its pause still ahead, when shared memory does
 * not hold them.  False when the topic table or the pool of logs has no
 * room.  Caller is connected to SPI; the 1.2 schema is installed.
 */
bool
aw_rates_load_topic(const char *topic)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {TEXTOID};
	Datum		args[1];
	int32		max_starts = 0;
	int64		per = 0;
	TimestampTz paused_until = 0;
	int32		wake;
	bool		isnull;
	Datum		d;

	args[0] = CStringGetTextDatum(topic);
	(void) aw_plan_run_latest(aw_plan_prepare(&plan,
											  "SELECT r.max_starts, r.per, p.paused_until "
											  "  FROM (SELECT $1 AS topic) t "
											  "  LEFT JOIN aion_wake.rates r ON r.topic OPERATOR(pg_catalog.=) t.topic "
											  "  LEFT JOIN aion_wake.pauses p ON p.topic OPERATOR(pg_catalog.=) t.topic",
											  1, types),
							  args, NULL, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		max_starts = DatumGetInt32(d);

		/*
		 * As set_rate() counted it (months of 30 days), which the table's
		 * CHECK agrees with; not date_part('epoch'), whose years of 365.25
		 * days made '-1 year 360 days 1 hour' (an hour for set_rate) a
		 * negative window: no rate at all after a restart.  Out of the
		 * bounds only by a hand-made row: the longest window then.
		 */
		if (!aw_interval_us(DatumGetIntervalP(SPI_getbinval(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, 2,
															&isnull)), &per) ||
			per < AW_RATE_MIN_PER_US || per > AW_RATE_MAX_PER_US)
			per = AW_RATE_MAX_PER_US;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	if (!isnull)
		paused_until = DatumGetTimestampTz(d);
	if (!aw_ledger_rate_load(topic, max_starts, per, paused_until, &wake))
		return false;
	return true;
}

/*
 * The worker, at each look: wake the claimers of its database's topics
 * that a rate or a pause held back and that may start rows now, one per
 * start; returns the next moment one of the others may, or 0.
 */
TimestampTz
aw_rates_wake(TimestampTz now)
{
	AwRateWake	wakes[32];
	TimestampTz next;
	int			n;
	int			i;

	n = aw_ledger_rate_wakes(MyDatabaseId, now, wakes, lengthof(wakes), &next);
	for (i = 0; i < n; i++)
		aw_waiters_wake_starts(MyDatabaseId, wakes[i].topic,
						wakes[i].n < 0 ? PG_INT32_MAX : wakes[i].n);
	return next;
}
