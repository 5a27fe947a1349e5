/*-------------------------------------------------------------------------
 *
 * protocol.c
 *	  The non-transactional shared-memory protocol (park_pending, confirm,
 *	  abandon, take_confirmed) and the views aion_wake.status and
 *	  aion_wake.parked.
 *
 *	  The protocol functions mirror what park() does inside a transaction,
 *	  for callers that keep their own table and write their own fences.
 *	  Their entries are UNFENCED: the worker never re-offers them and pulses
 *	  never spend slots on them; take_confirmed() hands them back.  A backend
 *	  that exits abandons the pending entries it still owns.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/protocol.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "aw_args.h"
#include "aw_lease_ledger.h"
#include "aw_monitor.h"
#include "aw_parked_set.h"
#include "aw_pulse_spend.h"
#include "aw_set_views.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"

PG_FUNCTION_INFO_V1(aw_park_pending);
PG_FUNCTION_INFO_V1(aw_confirm);
PG_FUNCTION_INFO_V1(aw_abandon);
PG_FUNCTION_INFO_V1(aw_take_confirmed);
PG_FUNCTION_INFO_V1(aw_status);
PG_FUNCTION_INFO_V1(aw_parked);
PG_FUNCTION_INFO_V1(aw_topics_view);

/* rows moved out of the set per hold of its lock */
#define AW_TAKE_CHUNK 256

/* pending UNFENCED entries this backend may still own */
static int64 aw_my_pending = 0;
static bool aw_exit_registered = false;

static void
aw_protocol_exit(int code, Datum arg)
{
	if (aw_my_pending > 0)
		aw_waiters_wake_for(aw_set_abandon_owned_by_me(), MyDatabaseId, NULL);
}

/*
 * park_pending(dispatch_key, attempt, topic): remember a row as pending.
 * False, with a WARNING, when the set is full.
 */
Datum
aw_park_pending(PG_FUNCTION_ARGS)
{
	char	   *key;
	int32		attempt;
	char	   *topic;
	uint64		generation;
	AwParkResult r;

	aw_require_loaded();
	key = aw_arg_key(fcinfo, 0);
	aw_arg_not_null(fcinfo, 1, "attempt");
	attempt = PG_GETARG_INT32(1);
	topic = aw_arg_topic(fcinfo, 2);

	if (!aw_exit_registered)
	{
		/* runs after the transaction is aborted and before ProcKill */
		on_shmem_exit(aw_protocol_exit, (Datum) 0);
		aw_exit_registered = true;
	}
	r = aw_set_park(AW_KIND_UNFENCED, key, topic, attempt,
					GetCurrentTimestamp(), 0, &generation, NULL);
	if (r != AW_PARK_OK)
	{
		aw_warn_park_failed(r, key, false);
		PG_RETURN_BOOL(false);
	}
	aw_my_pending++;
	PG_RETURN_BOOL(true);
}

/*
 * confirm(dispatch_key): the fence is durable.  True means a wake came while
 * pending: the entry is gone and the caller must re-offer the row now.
 */
Datum
aw_confirm(PG_FUNCTION_ARGS)
{
	char	   *key;
	bool		found;
	bool		woken;
	AwWake		wake;			/* UNFENCED entries hold no slot: none */
	char		topic[AW_TOPIC_MAXLEN + 1];

	aw_require_loaded();
	key = aw_arg_key(fcinfo, 0);
	woken = aw_set_confirm(AW_KIND_UNFENCED, key, 0, &found, &wake, topic);
	if (found && aw_my_pending > 0)
		aw_my_pending--;
	PG_RETURN_BOOL(woken);
}

/*
 * abandon(dispatch_key): the fence write failed; forget the row.
 */
Datum
aw_abandon(PG_FUNCTION_ARGS)
{
	char	   *key;
	bool		removed;
	bool		was_pending;
	AwWake		wake;

	aw_require_loaded();
	key = aw_arg_key(fcinfo, 0);
	removed = aw_set_abandon(AW_KIND_UNFENCED, key, 0, NULL, &was_pending, &wake);
	aw_waiters_wake_for(wake, MyDatabaseId, NULL);
	if (was_pending && aw_my_pending > 0)
		aw_my_pending--;
	PG_RETURN_BOOL(removed);
}

/*
 * take_confirmed(topic, max_rows): remove and return confirmed UNFENCED
 * rows, oldest first; when fewer than max_rows were confirmed, mark pending
 * ones woken (one per row still wanted) so their confirm returns true.
 * Works in chunks so the set lock is never held for long.
 */
Datum
aw_take_confirmed(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *topic = NULL;
	int64		want = PG_INT64_MAX;
	AwUnfencedTake *chunk;
	bool		done = false;

	aw_require_loaded();
	if (!PG_ARGISNULL(0))
		topic = aw_arg_topic(fcinfo, 0);
	if (!PG_ARGISNULL(1))
		want = aw_arg_int_range(fcinfo, 1, "max_rows", 1, AW_MAX_ROWS_LIMIT);

	InitMaterializedSRF(fcinfo, 0);
	chunk = palloc(sizeof(AwUnfencedTake) * AW_TAKE_CHUNK);
	while (!done)
	{
		int			n = aw_set_take_unfenced(topic, &want, chunk, AW_TAKE_CHUNK, &done);
		int			i;

		for (i = 0; i < n; i++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			values[0] = CStringGetTextDatum(chunk[i].key);
			values[1] = Int32GetDatum(chunk[i].attempt);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/* columns of aion_wake.status_internal(): 29 in the 1.2 schema */
#define AW_STATUS_MAX_NATTS 29

/*
 * aion_wake.status: one row of counters.  Reads counters only; never scans
 * the set.
 */
Datum
aw_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[AW_STATUS_MAX_NATTS];
	bool		nulls[AW_STATUS_MAX_NATTS];
	AwCounters	c;
	AwWorkerSlot *slot;
	int			pid = 0;
	TimestampTz started_at = 0;
	bool		listening = false;
	char		listen_error[256];
	char	   *dbname;
	NameData	dbname_name;	/* worker_database is of type name */
	int			i = 0;

	aw_require_loaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts > AW_STATUS_MAX_NATTS)
		elog(ERROR, "aion_wake.status_internal() has %d columns, more than %d",
			 tupdesc->natts, AW_STATUS_MAX_NATTS);
	memset(nulls, 0, sizeof(nulls));
	listen_error[0] = '\0';
	dbname = get_database_name(MyDatabaseId);

	aw_set_counters(&c);
	slot = aw_worker_slot_named(dbname);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		if (slot->connected && slot->dbid == MyDatabaseId)
		{
			pid = slot->pid;
			started_at = slot->started_at;
			listening = slot->listening;
			strlcpy(listen_error, slot->listen_error, sizeof(listen_error));
		}
		SpinLockRelease(&slot->mutex);
	}
	/* the error names roles and socket paths: as pg_stat_activity.query */
	if (listen_error[0] != '\0' &&
		!has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS))
		strlcpy(listen_error, "<insufficient privilege>", sizeof(listen_error));

	/* worker_pid, worker_database, served */
	values[i] = Int32GetDatum(pid);
	nulls[i++] = (pid == 0);
	namestrcpy(&dbname_name, dbname);
	values[i] = NameGetDatum(&dbname_name);
	nulls[i++] = (slot == NULL);
	values[i++] = BoolGetDatum(slot != NULL);
	/* listening, listen_error */
	values[i++] = BoolGetDatum(pid != 0 && listening);
	values[i] = CStringGetTextDatum(listen_error);
	nulls[i++] = (listen_error[0] == '\0');
	values[i++] = Int32GetDatum(aw_max_parked_rows);
	values[i++] = Int64GetDatum(c.parked_pending);
	values[i++] = Int64GetDatum(c.parked_confirmed);
	values[i++] = Int32GetDatum(aw_waiters_total());
	values[i++] = Int64GetDatum((int64) c.pulses_received);
	values[i++] = Int64GetDatum((int64) c.slots_received);
	values[i++] = Int64GetDatum((int64) c.rows_reoffered);
	values[i++] = Int64GetDatum((int64) c.wakes_deferred);
	values[i++] = Int64GetDatum((int64) c.bad_pulses);
	values[i++] = Int64GetDatum((int64) c.set_full);
	values[i++] = Int64GetDatum((int64) c.fences_expired);
	values[i++] = Int64GetDatum((int64) c.unfenced_expired);
	values[i++] = Int64GetDatum((int64) c.credits_used);
	values[i++] = Int64GetDatum((int64) c.slots_returned);
	values[i] = TimestampTzGetDatum(c.last_pulse_at);
	nulls[i++] = (c.last_pulse_at == 0);
	values[i] = TimestampTzGetDatum(started_at);
	nulls[i++] = (pid == 0);
	/* the 1.1 schema's columns: the 1.0 view stops before them */
	if (tupdesc->natts > i)
	{
		values[i++] = Int64GetDatum((int64) c.pulses_ignored);
		values[i++] = Int64GetDatum((int64) c.leases_expired);
		values[i++] = Int32GetDatum(aw_max_leases);
		values[i++] = Int64GetDatum(aw_ledger_lease_count());
	}
	/* the 1.2 schema's: claims that found a limit, rate or pause not loaded
	 * yet, and claims that a rate or a pause cut short */
	if (tupdesc->natts > i)
		values[i++] = Int64GetDatum((int64) c.limits_not_loaded);
	if (tupdesc->natts > i)
	{
		values[i++] = Int64GetDatum((int64) c.claims_rate_delayed);
		values[i++] = Int64GetDatum((int64) c.claims_paused);
	}
	/* Monitoring: the columns the 1.2 schema's Monitoring part adds */
	if (tupdesc->natts > i)
		values[i++] = Int64GetDatum((int64) aw_monitor_lost_wakes());
	if (i != tupdesc->natts)
		elog(ERROR, "aion_wake.status_internal() has %d columns, not %d",
			 tupdesc->natts, i);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * aion_wake.parked: one row per entry of this database.  The entries are
 * copied under the set lock and turned into rows after it is released.
 */
Datum
aw_parked(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	AwParkedRow *rows;
	int			n;
	int			i;

	aw_require_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = aw_set_copy_entries(&n);
	for (i = 0; i < n; i++)
	{
		AwParkedRow *r = &rows[i];
		Datum		values[8];
		bool		nulls[8];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(r->key);
		values[1] = CStringGetTextDatum(r->topic);
		values[2] = Int32GetDatum(r->attempt);
		values[3] = CStringGetTextDatum(r->pending ? "pending" : "confirmed");
		values[4] = BoolGetDatum(r->woken);
		values[5] = TimestampTzGetDatum(r->parked_at);
		values[6] = TimestampTzGetDatum(r->fence);
		nulls[6] = !r->fenced;
		values[7] = Int32GetDatum(r->owner_pid);
		nulls[7] = !r->pending;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * aion_wake.topics: one row per topic of this database in the topic table,
 * with its waiters.  Topics are copied under the set lock; the waiter
 * registry is asked afterwards, under its own lock.
 */
Datum
aw_topics_view(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	AwTopicRow *rows;
	int			n;
	int			i;

	aw_require_loaded();
	InitMaterializedSRF(fcinfo, 0);
	rows = aw_set_copy_topics(&n);
	for (i = 0; i < n; i++)
	{
		AwTopicRow *r = &rows[i];
		Datum		values[14];
		bool		nulls[14];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(r->name);
		values[1] = Int64GetDatum(r->parked);
		values[2] = Int64GetDatum(r->unspent_slots);
		values[3] = Int64GetDatum(r->credit);
		values[4] = Int32GetDatum(aw_waiters_of_topic(MyDatabaseId, r->name));
		values[5] = Int64GetDatum(r->pulses);
		values[6] = Int64GetDatum(r->reoffered);
		/* the 1.1 schema's columns: null for a topic with no limit */
		values[7] = Int32GetDatum(r->max_in_flight);
		nulls[7] = (r->max_in_flight == 0);
		values[8] = Int32GetDatum(r->in_flight);
		nulls[8] = (r->max_in_flight == 0);
		/* the 1.2 schema's: the rate (null when none) and the pause */
		values[9] = Int32GetDatum(r->rate.max_starts);
		nulls[9] = (r->rate.max_starts == 0);
		values[10] = IntervalPGetDatum(aw_interval_from_us(r->rate.per));
		nulls[10] = (r->rate.max_starts == 0);
		values[11] = Int64GetDatum(r->rate.window_starts);
		nulls[11] = (r->rate.max_starts == 0);
		values[12] = TimestampTzGetDatum(r->rate.next_start_at);
		nulls[12] = (r->rate.next_start_at == 0);
		values[13] = TimestampTzGetDatum(r->rate.paused_until);
		nulls[13] = (r->rate.paused_until == 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
