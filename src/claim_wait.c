/*-------------------------------------------------------------------------
 *
 * claim_wait.c
 *	  The blocking part of claim(..., wait => ...): sleep until a row of one
 *	  of the claim's topics is ready, then claim it (claim.c).
 *
 *	  A waiting claim registers on every topic it waits on (waiters.c),
 *	  then repeats: reset its latch, probe, sleep.  Each probe runs in an
 *	  internal subtransaction, rolled back when it finds nothing, so that a
 *	  sleeping claimer holds no row lock (FOR UPDATE SKIP LOCKED in READ
 *	  COMMITTED keeps the lock on a row it followed to a newer version that
 *	  no longer qualifies).  A probe spends the pulses handed to it for its
 *	  ready topics (re-offering parked rows in its own transaction) and
 *	  claims from the ready topics first, then from all.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/claim_wait.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "aw_args.h"
#include "aw_claim_internal.h"
#include "aw_compat.h"
#include "aw_limits.h"
#include "aw_monitor.h"
#include "aw_plans.h"
#include "aw_rate_ledger.h"
#include "aw_pulse_spend.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"

/*
 * In a database no worker serves, a claim waiting on a topic whose limit it
 * could not load (its lock was held) tries again this often.
 */
#define AW_MISSING_LIMIT_RETRY_MS 250

static SPIPlanPtr aw_next_fence_plans[2];	/* before 1.2, from 1.2 */

/* the topics this backend waits on, for its exit callback */
static char aw_waiting_on[AW_WAIT_MAX_TOPICS][AW_TOPIC_MAXLEN + 1];
static char *aw_waiting_names[AW_WAIT_MAX_TOPICS];
static int	aw_waiting_n = 0;
static uint64 aw_waiting_woken = 0;	/* the wakes the probe under way serves */
static bool aw_claim_exit_registered = false;

/*
 * In a database no worker serves, nobody wakes waiters when a fence passes
 * or a lease ends: a waiter looks up the next fence of its topics itself
 * and sleeps no longer than that, the next lease end, or the moment a
 * topic its rate or pause held back may start rows again.  Returns
 * milliseconds, or LONG_MAX when nothing is ahead.
 */
static long
aw_ms_until_next_event(AwClaim *c, TimestampTz now)
{
	static const Oid types[2] = {TEXTARRAYOID, TIMESTAMPTZOID};
	Datum	   *names = palloc(sizeof(Datum) * c->ntopics);
	Datum		args[2];
	TimestampTz next = aw_limits_expire(now);
	SPIPlanPtr	plan;
	bool		isnull;
	Datum		d;
	int			i;

	for (i = 0; i < c->ntopics; i++)
	{
		TimestampTz moment = aw_ledger_rate_moment(c->topics[i].name);

		if (moment != 0 && (next == 0 || moment < next))
			next = moment;
		names[i] = CStringGetTextDatum(c->topics[i].name);
	}
	args[0] = PointerGetDatum(construct_array(names, c->ntopics, TEXTOID, -1, false,
											  TYPALIGN_INT));
	args[1] = TimestampTzGetDatum(now);
	if (aw_schema_version() >= 12)
		plan = aw_plan_prepare(&aw_next_fence_plans[1],
							   "SELECT pg_catalog.min(f.m) FROM pg_catalog.unnest($1) AS q(topic), "
							   "  LATERAL (" AW_TOPIC_PRIORITIES("q.topic")
							   "           SELECT pg_catalog.min(x.m) AS m FROM r, "
							   "             LATERAL (SELECT pg_catalog.min(o.visible_after) AS m "
							   "                        FROM aion_wake.outbox o "
							   "                       WHERE o.topic OPERATOR(pg_catalog.=) q.topic "
							   "                         AND o.priority OPERATOR(pg_catalog.=) r.p "
							   "                         AND o.visible_after OPERATOR(pg_catalog.>) $2) x) f",
							   2, types);
	else
		plan = aw_plan_prepare(&aw_next_fence_plans[0],
							   "SELECT pg_catalog.min(f.m) FROM pg_catalog.unnest($1) AS q(topic), "
							   "  LATERAL (SELECT pg_catalog.min(visible_after) AS m "
							   "             FROM aion_wake.outbox "
							   "            WHERE topic OPERATOR(pg_catalog.=) q.topic "
							   "              AND visible_after OPERATOR(pg_catalog.>) $2) f",
							   2, types);
	(void) aw_plan_run(plan, args, NULL, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull && (next == 0 || DatumGetTimestampTz(d) < next))
		next = DatumGetTimestampTz(d);
	if (next == 0)
		return LONG_MAX;
	return (long) Max(0, (next - now + 999) / 1000);
}

/*
 * One probe of a waiting claim, over the topics in ready (the topics whose
 * wake reached this claimer since the last probe; all of them when it was
 * woken by no wake): spend the pulses handed to it for those topics,
 * claiming the parked rows they free straight from their fences, and claim
 * visible rows of them, and if that finds nothing, of all its topics.
 * Returns true if it claimed rows; *unused then receives the ready topics
 * of which it took no row, whose wakes the claimer must pass on as it
 * leaves.
 *
 * The probe runs in a subtransaction of its own, rolled back when it finds
 * nothing, so that a sleeping claimer holds no row lock (see the file
 * header).
 */
typedef struct AwProbe
{
	AwClaim    *c;
	uint64		ready;
	uint64	   *unused;
} AwProbe;

static bool
aw_claim_probe_step(void *arg)
{
	AwProbe    *p = (AwProbe *) arg;
	AwClaim    *c = p->c;
	uint64		all = (c->ntopics == 64) ? ~UINT64CONST(0) :
		(UINT64CONST(1) << c->ntopics) - 1;
	uint64		claimed;
	int			i;

	if (!c->served)
		(void) aw_limits_expire(GetCurrentTimestamp());
	claimed = aw_claim_once(c, p->ready, c->served ? p->ready : 0);
	for (i = 0; i < c->ntopics; i++)
	{
		if ((p->ready & (UINT64CONST(1) << i)) && c->topics[i].got == 0)
			*p->unused |= UINT64CONST(1) << i;
	}
	/* rows still wanted: from the other topics */
	if (claimed < (uint64) c->max_rows && p->ready != all)
	{
		int32		max_rows = c->max_rows;

		c->max_rows -= (int32) claimed;
		claimed += aw_claim_once(c, all & ~p->ready, 0);
		c->max_rows = max_rows;
	}
	return claimed > 0;
}

static bool
aw_claim_probe(AwClaim *c, uint64 ready, uint64 hand, uint64 *unused)
{
	AwProbe		p = {c, ready, unused};
	bool		found;

	*unused = 0;
	found = aw_in_subtransaction(aw_claim_probe_step, &p);

	/*
	 * The pulses handed to it before it looked are spent as far as it
	 * could; what is left (and what a rollback of the probe gave back)
	 * goes to the worker.
	 */
	aw_waiters_wake_for(aw_set_spender_release(aw_waiting_names, aw_waiting_n, hand),
						MyDatabaseId, NULL);
	return found;
}

/*
 * The lost-wake detector, after a probe that followed a sleep took rows:
 * a row of a topic whose wake did not reach this claimer (not in woken),
 * whose fence passed after the claimer's previous look (c->mon_after, so
 * that look could not take it) and before upto (the tolerance before this
 * probe began), is a lost wake if no wake or readiness event of the topic
 * happened since the previous probe, to this claimer or any other, and
 * the worker is not still due to look at that fence (aw_waiter_wake_missed;
 * doc/design.md, The lost-wake detector).  A row
 * that came back by a rollback, a released lock or a freed slot has an
 * older fence, or an event; one that was held by a limit, a rate or a
 * pause became claimable by an event too.  Such rows are not counted: the
 * detector never second-guesses them, it only trusts events.  Costs
 * nothing while the claimer sleeps: it runs after a probe that took rows.
 */
static void
aw_claim_detect_lost(AwClaim *c, uint64 woken, TimestampTz upto, TimestampTz began,
					 const uint64 *events_before)
{
	int			i;

	for (i = 0; i < c->ntopics; i++)
	{
		TimestampTz fence = c->topics[i].mon_fence;

		if ((woken & (UINT64CONST(1) << i)) || fence == 0 || fence > upto)
			continue;
		if (!aw_waiter_wake_missed(i, events_before[i], fence))
			continue;
		c->topics[i].mon.lost_wakes++;
		aw_monitor_lost_wake(c->topics[i].name, began - fence);
	}
}

/*
 * Leave the waiter registry, passing on the wakes of the topics in unused.
 * Pulses handed to this claimer and not spent -- it was cancelled before
 * its probe spent them, say -- go to the worker.  Leaving comes first: from
 * then on no pulse is handed to this claimer (aw_set_spender_hand sees it
 * gone), so none can be recorded after the release.  Never raises.
 */
static void
aw_claim_leave(uint64 unused)
{
	aw_waiter_leave(unused);
	aw_waiters_wake_for(aw_set_spender_release(aw_waiting_names, aw_waiting_n,
											   PG_UINT64_MAX),
						MyDatabaseId, NULL);
	aw_waiting_n = 0;
	aw_waiting_woken = 0;
}

/* A backend that exits while waiting leaves the registry the same way. */
static void
aw_claim_exit(int code, Datum arg)
{
	if (aw_waiting_n > 0)
		aw_claim_leave(aw_waiting_woken);
}

/*
 * The blocking part of claim(wait => ...): register as a waiter on every
 * topic, then repeat reset latch, probe, sleep until a row is claimed or
 * the wait ends.  The latch is set by a commit that makes a row of one of
 * the topics claimable, or releases a slot of one, or by the worker when a
 * fence passes or a lease ends; cancel and statement_timeout set it too
 * and end the wait at CHECK_FOR_INTERRUPTS.
 */
void
aw_claim_wait(AwClaim *c, int64 wait)
{
	TimestampTz deadline;
	uint64		all = (c->ntopics == 64) ? ~UINT64CONST(0) :
		(UINT64CONST(1) << c->ntopics) - 1;
	uint64		unused = 0;
	volatile uint64 pass = 0;
	volatile bool first = true;
	int			i;
	TimestampTz called = GetCurrentTimestamp();
	int64		tolerance = (int64) aw_lost_wake_tolerance_ms * 1000;
	TimestampTz looked = 0;		/* the previous probe's look; 0: none yet */
	uint64		events_before[AW_WAIT_MAX_TOPICS];
	bool		timed_out = false;

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("claim() cannot wait under REPEATABLE READ or SERIALIZABLE"),
				 errdetail("A waiting claim must see rows committed while it waits."),
				 errhint("Use READ COMMITTED, or call claim() with wait => '0'.")));
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("claim() cannot wait in a transaction that has already written"),
				 errdetail("The transaction would hold its locks and its transaction ID for the whole wait."),
				 errhint("Call claim() with wait in a transaction of its own.")));

	deadline = aw_clock_plus(called, Min(wait, (int64) aw_max_wait_ms * 1000));
	if (!aw_claim_exit_registered)
	{
		/* runs after the transaction is aborted and before ProcKill */
		on_shmem_exit(aw_claim_exit, (Datum) 0);
		aw_claim_exit_registered = true;
	}
	for (i = 0; i < c->ntopics; i++)
	{
		strlcpy(aw_waiting_on[i], c->names[i], sizeof(aw_waiting_on[i]));
		aw_waiting_names[i] = aw_waiting_on[i];
	}
	aw_waiting_n = c->ntopics;
	aw_waiter_register(c->names, c->ntopics);
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;
			TimestampTz began = GetCurrentTimestamp();
			long		timeout;
			uint64		woken;
			uint64		ready;
			uint64		hand;

			ResetLatch(MyLatch);
			/* before the inbox: see aw_set_last_hand */
			hand = aw_set_last_hand();
			woken = aw_waiting_woken = aw_waiter_rearm();
			/* the first probe, a fence or the deadline passing: look at all */
			ready = (first || woken == 0) ? all : woken;
			first = false;
			/* the lost-wake detector: rows fenced after the last look */
			c->mon_after = (looked != 0 && tolerance > 0) ? looked : DT_NOEND;
			for (i = 0; i < c->ntopics; i++)
			{
				c->topics[i].mon_fence = 0;
				if (woken & (UINT64CONST(1) << i))
					c->topics[i].mon.wakes++;
			}
			if (aw_claim_probe(c, ready, hand, &unused))
			{
				/* the wakes it received and took no row for go on */
				pass = unused & woken;
				for (i = 0; i < c->ntopics; i++)
				{
					if ((woken & ~unused) & (UINT64CONST(1) << i))
						c->topics[i].mon.wakes_found++;
				}
				if (looked != 0)
				{
					aw_claim_detect_lost(c, woken, began - tolerance, began,
										 events_before);
					aw_monitor_observe(AW_HIST_CLAIM_WAIT, GetCurrentTimestamp() - called);
				}
				break;
			}
			/* wakes that found nothing to claim are spent */
			aw_waiting_woken = 0;
			looked = c->mon_looked;
			memcpy(events_before, aw_waiter_events(), sizeof(uint64) * c->ntopics);
			now = GetCurrentTimestamp();
			if (now >= deadline)
			{
				timed_out = true;
				break;
			}
			timeout = (long) ((deadline - now + 999) / 1000);
			if (!c->served)
				timeout = Min(timeout, aw_ms_until_next_event(c, now));
			/* no worker loads a missing limit here: this claim tries again */
			if (!c->served && c->missing != 0)
				timeout = Min(timeout, AW_MISSING_LIMIT_RETRY_MS);
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, aw_wait_event_claim());
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* cancelled in the middle of a probe: its wakes go on */
		aw_claim_leave(aw_waiting_woken);
		PG_RE_THROW();
	}
	PG_END_TRY();
	aw_claim_leave(pass);
	for (i = 0; i < c->ntopics && timed_out; i++)
		c->topics[i].mon.timeouts++;
}
