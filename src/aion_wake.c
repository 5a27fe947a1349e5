/*-------------------------------------------------------------------------
 *
 * aion_wake.c
 *	  Module load: settings, the shared memory request, the background
 *	  workers, and the argument checks every SQL function shares.
 *
 *	  aion_wake only works when preloaded through shared_preload_libraries,
 *	  because its parked set lives in the main shared memory segment.  A
 *	  library loaded any other way (CREATE EXTENSION, pg_restore, a plain
 *	  LOAD) must still load without error, so _PG_init then does nothing and
 *	  every SQL function raises 55000 with a hint naming the setting.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/aion_wake.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "aion_wake.h"
#include "aw_pulse_parse.h"
#include "aw_set.h"
#include "aw_waiters.h"
#include "aw_plans.h"
#include "aw_worker.h"
#include "aw_worker_slots.h"

PG_MODULE_MAGIC;

/* GUC variables */
char	   *aw_database_list = NULL;
int			aw_max_parked_rows = 65536;
int			aw_max_topics = 1024;
int			aw_unfenced_max_age_ms = 600000;
int			aw_pulse_credit_ms = 250;
int			aw_max_wait_ms = 60000;
bool		aw_listen = true;
bool		aw_notify_ready = true;
char	   *aw_worker_role = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void aw_shmem_request(void);
static void aw_shmem_startup(void);

void		_PG_init(void);

/*
 * Module load callback.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomStringVariable("aion_wake.database",
							   "Comma-separated list of databases served by an aion_wake worker.",
							   NULL,
							   &aw_database_list,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_parked_rows",
							"Size of the shared-memory set of parked rows.",
							"A park that finds the set full falls back to its durable fence.",
							&aw_max_parked_rows,
							65536, 16, 16 * 1024 * 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_topics",
							"Size of the shared-memory topic table.",
							NULL,
							&aw_max_topics,
							1024, 4, 1024 * 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.unfenced_max_age",
							"Age after which a confirmed park_pending entry is dropped.",
							NULL,
							&aw_unfenced_max_age_ms,
							600000, 1000, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.pulse_credit_ms",
							"How long the unspent slots of a pulse wait for a park to confirm.",
							NULL,
							&aw_pulse_credit_ms,
							250, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_wait",
							"Longest time a blocking claim may wait.",
							NULL,
							&aw_max_wait_ms,
							60000, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("aion_wake.listen",
							 "Accept capacity pulses sent with NOTIFY aion_wake_capacity.",
							 NULL,
							 &aw_listen,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("aion_wake.notify_ready",
							 "Send NOTIFY aion_wake_ready after each batch of re-offers.",
							 NULL,
							 &aw_notify_ready,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("aion_wake.worker_role",
							   "Role the worker's listening connection logs in as.",
							   "Empty means the bootstrap superuser.",
							   &aw_worker_role,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("aion_wake");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = aw_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = aw_shmem_startup;

	aw_plans_init();
	aw_worker_slots_init();
	aw_register_workers();
}

/*
 * Request the set's shared memory and its LWLock tranche.  On 15 and later
 * this is only allowed here.
 */
static void
aw_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(aw_set_shmem_size(), aw_waiters_shmem_size()),
									aw_worker_slots_shmem_size()));
	/* [0] the parked set, [1] the waiter registry */
	RequestNamedLWLockTranche("aion_wake", 2);
}

static void
aw_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	aw_set_shmem_init();
	aw_waiters_shmem_init();
	aw_worker_slots_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

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

/*
 * Every SQL function starts here: without preloading there is no set.
 */
void
aw_require_loaded(void)
{
	if (aw_shared == NULL)
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

/*
 * A non-negative interval argument, in microseconds.  Months count as 30
 * days, as in interval arithmetic on a fixed-length basis.
 */
int64
aw_arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval   *iv;
	int64		us;
	int64		days_us;

	aw_arg_not_null(fcinfo, argno, name);
	iv = PG_GETARG_INTERVAL_P(argno);
	if (pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH + iv->day,
							USECS_PER_DAY, &days_us) ||
		pg_add_s64_overflow(iv->time, days_us, &us) ||
		us > (int64) 1000 * 365 * USECS_PER_DAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range", name),
				 errdetail("It may be at most 1000 years.")));
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name)));
	return us;
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
