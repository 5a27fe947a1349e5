/*-------------------------------------------------------------------------
 *
 * args.c
 *	  The checks every SQL-callable function of aion_wake makes on its way
 *	  in: that the library was preloaded, and that each argument is in
 *	  range, with the same message and SQLSTATE everywhere.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/args.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "common/int.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "aw_args.h"
#include "aw_pulse_parse.h"
#include "aw_parked_set.h"
#include "aw_worker_slots.h"

/*
 * park() and pulse() in a database no worker serves: say so once per
 * session.  Fences still protect every row.
 */
void
aw_warn_unserved_once(void)
{
	static bool warned = false;

	if (warned || aw_database_is_served())
		return;
	warned = true;
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("no aion_wake worker serves database \"%s\"",
					get_database_name(MyDatabaseId)),
			 errdetail("Parked rows wait until their fence; nothing re-offers them when capacity frees."),
			 errhint("Add the database to \"%s\" and restart the server.",
					 "aion_wake.database")));
}

/* Every writing function: the table is read-only during recovery. */
void
aw_begin_write(const char *fname)
{
	aw_require_loaded();
	PreventCommandDuringRecovery(fname);
}

/* now + us, or 22008 when that is no timestamp. */
TimestampTz
aw_clock_plus(TimestampTz now, int64 us)
{
	TimestampTz result;

	if (pg_add_s64_overflow(now, us, &result) || !IS_VALID_TIMESTAMP(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return result;
}

/* The optional lease_token argument, for SPI (nulls ' ' or 'n'). */
void
aw_arg_token(FunctionCallInfo fcinfo, int argno, Datum *value, char *null)
{
	*null = PG_ARGISNULL(argno) ? 'n' : ' ';
	*value = PG_ARGISNULL(argno) ? (Datum) 0 : PG_GETARG_DATUM(argno);
}

/*
 * Every SQL function starts here: without preloading there is no set.
 */
void
aw_require_loaded(void)
{
	if (!aw_set_attached())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("aion_wake must be loaded via \"%s\"",
						"shared_preload_libraries"),
				 errhint("Add aion_wake to \"%s\" and restart the server.",
						 "shared_preload_libraries")));
}

void
aw_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/*
 * A dispatch key: 1 to 255 bytes.  Returns a palloc'd C string.
 */
char *
aw_arg_key(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;
	int			len;

	aw_arg_not_null(fcinfo, argno, "dispatch_key");
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len < 1 || len > AW_KEY_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dispatch_key must be 1 to %d bytes long", AW_KEY_MAXLEN),
				 errdetail("The key given is %d bytes long.", len)));
	return text_to_cstring(t);
}

/*
 * A topic name: 1 to 63 bytes of [A-Za-z0-9_.-].  Returns a palloc'd C
 * string.
 */
char *
aw_arg_topic(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;

	aw_arg_not_null(fcinfo, argno, "topic");
	t = PG_GETARG_TEXT_PP(argno);
	if (!aw_topic_name_valid(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid topic name \"%s\"", text_to_cstring(t)),
				 errdetail("A topic name is 1 to %d bytes of letters, digits, \"_\", \".\" and \"-\".",
						   AW_TOPIC_MAXLEN)));
	return text_to_cstring(t);
}

/* the longest interval an argument may be: 1000 years, as intervals count them */
#define AW_MAX_INTERVAL_US \
	((int64) 1000 * MONTHS_PER_YEAR * DAYS_PER_MONTH * USECS_PER_DAY)

/*
 * An interval in microseconds, months counting as 30 days, as in interval
 * arithmetic on a fixed-length basis and PostgreSQL's own comparison of
 * intervals (not as date_part('epoch'), which counts a year as 365.25
 * days).  Every interval aion_wake keeps is turned into microseconds here,
 * when it is given and when it is read back from a table, so that both
 * agree.  False on overflow.
 */
bool
aw_interval_us(const Interval *iv, int64 *us)
{
	int64		days_us;

	return !pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH + iv->day,
								USECS_PER_DAY, &days_us) &&
		!pg_add_s64_overflow(iv->time, days_us, us);
}

/*
 * A non-negative interval argument, in microseconds (aw_interval_us), so a
 * year is 360 days and the bound is exactly '1000 years' (which
 * PostgreSQL's own comparison of intervals agrees with).
 */
int64
aw_arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval   *iv;
	int64		us;

	aw_arg_not_null(fcinfo, argno, name);
	iv = PG_GETARG_INTERVAL_P(argno);
	if (!aw_interval_us(iv, &us) || us > AW_MAX_INTERVAL_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range", name),
				 errdetail("It may be at most 1000 years, a month counting as 30 days.")));
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name)));
	return us;
}

/* An interval of us microseconds, for a view (no days, no months). */
Interval *
aw_interval_from_us(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return iv;
}

/* An integer argument that must lie in [min, max]. */
int32
aw_arg_int_range(FunctionCallInfo fcinfo, int argno, const char *name,
				 int32 min, int32 max)
{
	int32		v;

	aw_arg_not_null(fcinfo, argno, name);
	v = PG_GETARG_INT32(argno);
	if (v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between %d and %d", name, min, max),
				 errdetail("The value given is %d.", v)));
	return v;
}

/*
 * The WARNING for a park that found the set or the topic table full (G6):
 * the caller's transaction goes on, the row keeps its fence.  Called
 * without the set lock.
 */
void
aw_warn_park_failed(AwParkResult r, const char *key, bool fenced)
{
	ereport(WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 r == AW_PARK_SET_FULL ?
			 errmsg("aion_wake parked set is full") :
			 errmsg("aion_wake topic table is full"),
			 fenced ?
			 errdetail("Row \"%s\" waits until its fence; no pulse will re-offer it.", key) :
			 errdetail("Row \"%s\" was not parked.", key),
			 errhint("Increase \"%s\".", r == AW_PARK_SET_FULL ?
					 "aion_wake.max_parked_rows" : "aion_wake.max_topics")));
}
