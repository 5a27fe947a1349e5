/*-------------------------------------------------------------------------
 *
 * rate_ledger.c
 *	  The rate ledger: a topic's rate and pause (G10) in shared memory.
 *	  rates.c is its caller outside the set, and the lease ledger's
 *	  reservation (aw_ledger_reserve) asks it how many rows may start.
 *
 *	  A rated topic has a log of its recent starts (aw_rate_window.h), one
 *	  of a pool of aion_wake.max_rates beside the set.  A claim reserves
 *	  starts under the set lock, in the same hold as its limit's slots,
 *	  before it locks rows: a start is admitted while the starts logged in
 *	  the window that ends now, plus those reserved by claims in progress,
 *	  are fewer than max_starts, and while the topic is not paused.  After
 *	  its statement the claim logs the rows it took at the clock read then,
 *	  under the lock, which is never earlier than the statement's own
 *	  clock, and returns the reservation.  So concurrent claims never
 *	  overshoot, and every window of length per, whichever clock a reader
 *	  of the rows' lease starts takes, holds at most max_starts starts.
 *	  The life of a start:
 *
 *	    admitted  --the claim reserves it-->               reserved
 *	    reserved  --the claim leases a row-->              logged at the
 *	                                                       clock after its
 *	                                                       statement
 *	    reserved  --the claim does not use it, or aborts--> returned
 *	    logged    --per has passed since-->                out of the window
 *
 *	  A logged start stays logged whatever its transaction does: the
 *	  caller held the row and may have offered it, so a rolled-back claim's
 *	  starts count.  A reservation counts in every window until it is
 *	  logged or returned.
 *
 *	  A claim that took fewer rows than it wanted because of the rate or
 *	  the pause marks the topic blocked.  The worker times the blocked
 *	  topics of its database (aw_ledger_rate_wakes): at the moment the
 *	  oldest starts leave the window, or the pause ends, it wakes one
 *	  blocked claimer per start that may begin (capped by the limit's free
 *	  slots), and the mark goes; a claimer cut short again marks it again.
 *	  In a database no worker serves, a blocked claimer sleeps no longer
 *	  than that moment (aw_ledger_rate_moment).
 *
 *	  set_rate(), pause() and resume() take a log from the pool (and pin
 *	  the topic in the table) at the call, so that their commit cannot
 *	  fail, and apply at commit.  A rate keeps its log across changes of
 *	  max_starts and per: a lowering lets the starts logged drain, and a
 *	  longer per counts only the starts the log still holds (those of the
 *	  last old per).  After shared memory is lost, a rate is loaded with a
 *	  full window: max_starts starts logged at the moment of the load,
 *	  which is later than every start before the loss, since shared memory
 *	  is only made anew once every old process has exited.  That may admit
 *	  nothing for one period, never more than the rate.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/rate_ledger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "aw_rate_window.h"
#include "aw_set_internal.h"
#include "aw_settings.h"

/* the pool of logs: aion_wake.max_rates of them, and which are in use */
static AwRateWindow *aw_rate_windows = NULL;
static bool *aw_rate_window_used = NULL;

Size
aw_rate_shmem_size(void)
{
	return add_size(MAXALIGN(mul_size(aw_max_rates, sizeof(AwRateWindow))),
					MAXALIGN(mul_size(aw_max_rates, sizeof(bool))));
}

/* Called by aw_set_shmem_init, with AddinShmemInitLock held. */
void
aw_rate_shmem_init(void)
{
	bool		found;
	char	   *base = ShmemInitStruct("aion_wake rate windows", aw_rate_shmem_size(),
									   &found);

	aw_rate_windows = (AwRateWindow *) base;
	aw_rate_window_used = (bool *) (base +
									MAXALIGN(mul_size(aw_max_rates, sizeof(AwRateWindow))));
	if (!found)
		memset(aw_rate_window_used, 0, sizeof(bool) * aw_max_rates);
}

/* A new topic has no rate and no pause. */
void
aw_rate_init(AwRate *r)
{
	memset(r, 0, sizeof(*r));
	r->window = -1;
}

/* Does the rate ledger hold nothing of a topic?  Only such a topic may be recycled. */
bool
aw_rate_idle(const AwRate *r)
{
	return r->max_starts == 0 && r->paused_until == 0 && r->reserved == 0 &&
		r->pins == 0 && !r->blocked && r->window < 0;
}

static inline AwRateWindow *
aw_rate_log(AwRate *r)
{
	return &aw_rate_windows[r->window];
}

/* Take a log from the pool for a topic that has none; false if none is free. */
static bool
aw_rate_take_log(AwRate *r)
{
	int			i;

	if (r->window >= 0)
		return true;
	for (i = 0; i < aw_max_rates; i++)
	{
		if (!aw_rate_window_used[i])
		{
			aw_rate_window_used[i] = true;
			aw_rate_window_init(&aw_rate_windows[i]);
			r->window = i;
			return true;
		}
	}
	return false;
}

/* Give a topic's log back when nothing needs it any more. */
static void
aw_rate_give_log(AwRate *r)
{
	if (r->window >= 0 && r->max_starts == 0 && r->pins == 0 && r->reserved == 0)
	{
		aw_rate_window_used[r->window] = false;
		r->window = -1;
	}
}

static void
aw_rate_block(AwTopic *t)
{
	if (!t->rate.blocked)
	{
		t->rate.blocked = true;
		dlist_push_tail(&aw_shared->rate_blocked, &t->rate.blocked_node);
	}
}

static void
aw_rate_unblock(AwTopic *t)
{
	if (t->rate.blocked)
	{
		t->rate.blocked = false;
		dlist_delete(&t->rate.blocked_node);
	}
}

/* Is the topic paused at now?  A pause that has ended is cleared. */
static bool
aw_rate_paused(AwRate *r, TimestampTz now)
{
	if (r->paused_until != 0 && r->paused_until <= now)
		r->paused_until = 0;
	return r->paused_until != 0;
}

/*
 * Starts the topic may begin at now, and, when none, in *moment when one
 * may (0: when a reservation is returned, which wakes by itself).
 * PG_INT32_MAX when neither a rate nor a pause holds it back.
 */
static int64
aw_rate_free(AwTopic *t, TimestampTz now, TimestampTz *moment)
{
	AwRate	   *r = &t->rate;
	int64		free_starts;

	*moment = 0;
	if (aw_rate_paused(r, now))
	{
		*moment = r->paused_until;
		return 0;
	}
	if (r->max_starts == 0)
		return PG_INT32_MAX;
	free_starts = aw_rate_window_free(aw_rate_log(r), now, r->per, r->max_starts,
									  r->reserved);
	if (free_starts == 0)
		*moment = aw_rate_window_next(aw_rate_log(r), r->per, r->max_starts, r->reserved);
	return free_starts;
}

/*
 * A claim of the topic wants want rows: how many may start now.  A claim
 * cut short marks the topic blocked (*blocked: it was not, and the worker
 * must time it) and is counted; one that fills the window marks it too.  The caller reserves
 * what it takes (rate.reserved).  Caller holds the set lock exclusively.
 */
int32
aw_rate_admit(AwTopic *t, int32 want, TimestampTz now, bool *blocked)
{
	TimestampTz moment;
	int64		free_starts;

	if (t->rate.max_starts == 0 && t->rate.paused_until == 0)
		return want;
	free_starts = aw_rate_free(t, now, &moment);
	if (free_starts < want)
	{
		*blocked = !t->rate.blocked;
		aw_rate_block(t);
		if (t->rate.paused_until != 0)
			aw_shared->counters.claims_paused++;
		else
			aw_shared->counters.claims_rate_delayed++;
		return (int32) free_starts;
	}

	/*
	 * A claim that fills the window marks the topic blocked too, so that
	 * the worker times the window's next end.  The worker's look takes the
	 * mark off as it wakes one claimer per free start; a claimer it woke
	 * is not cut short, and without this the claimers still asleep were
	 * timed by nobody until another claim was cut short.
	 */
	if (free_starts == want && t->rate.max_starts > 0)
	{
		*blocked = !t->rate.blocked;
		aw_rate_block(t);
	}
	return want;
}

/*
 * After a claim's statement: of the reserved starts it reserved, used
 * became rows; they are logged now, and the reservation goes.  Returns
 * how many blocked claimers to wake for starts it did not use (they may
 * have found none free because of this reservation).  *retime when the
 * topic is blocked and starts were logged: whoever last timed it (the
 * worker, or a claimer asleep in a database no worker serves) may have
 * found the window full of reservations alone, whose moment is unknown
 * (aw_rate_window_next returns 0), and must look again now that it is
 * known, or the blocked claimers sleep past it.
 */
int32
aw_ledger_rate_return(const char *topic, int32 reserved, int32 used, bool *retime)
{
	AwTopic    *t;
	int32		wake = 0;

	*retime = false;
	if (reserved <= 0)
		return 0;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL)
	{
		AwRate	   *r = &t->rate;

		r->reserved = Max(0, r->reserved - reserved);
		if (used > 0 && r->max_starts > 0 && r->window >= 0)
			aw_rate_window_log(aw_rate_log(r), GetCurrentTimestamp(), used, r->per,
							   r->max_starts);
		if (reserved > used && r->blocked)
			wake = reserved - used;
		*retime = (used > 0 && r->blocked);
		aw_rate_give_log(r);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return wake;
}

/*
 * set_rate() (rate) or pause()/resume() of a topic, at the call: make the
 * topic (when create), take a log for a rate, and pin both until the
 * transaction ends, so that the commit cannot fail.  AW_RATE_NONE: the
 * topic is not in the table and need not be (a removal or a resume), and
 * nothing is pinned.
 */
AwRateResult
aw_ledger_rate_promise(const char *topic, bool rate, bool create)
{
	AwTopic    *t;
	AwRateResult r = AW_RATE_OK;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, create);
	if (t == NULL)
		r = create ? AW_RATE_TOPICS_FULL : AW_RATE_NONE;
	else if (rate && !aw_rate_take_log(&t->rate))
		r = AW_RATE_POOL_FULL;
	else
		t->rate.pins++;
	if (t != NULL)
		aw_topic_update_quiet(t);
	LWLockRelease(aw_shared->lock);
	return r;
}

/*
 * A set_rate() (set_rate) or pause()/resume() (set_pause) promised ends:
 * with apply, it committed and is its topic's last of the transaction.  A
 * topic that gets a rate where shared memory held none starts with an
 * empty log, unless the table held a rate before (had_rate): shared memory
 * was lost and the rate not loaded yet, so the window is taken as full.
 * Returns the blocked claimers to wake: as many as the starts it frees, or
 * -1 for all of them (the rate or the pause is gone); *blocked when the
 * topic admits nothing now and the worker must time it.  Never raises.
 */
int32
aw_ledger_rate_end(const char *topic, bool set_rate, int32 max_starts, int64 per,
				   bool had_rate, bool set_pause, TimestampTz paused_until, bool apply,
				   bool *blocked)
{
	AwTopic    *t;
	int32		wake = 0;

	*blocked = false;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL)
	{
		AwRate	   *r = &t->rate;
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz moment;
		int64		before = aw_rate_free(t, now, &moment);

		r->pins = Max(0, r->pins - 1);
		if (apply && set_rate && max_starts > 0 && r->window >= 0)
		{
			if (r->max_starts == 0)
			{
				aw_rate_window_init(aw_rate_log(r));
				if (had_rate)
					aw_rate_window_log(aw_rate_log(r), now, max_starts, per, max_starts);
			}
			r->max_starts = max_starts;
			r->per = per;
		}
		else if (apply && set_rate)
			r->max_starts = 0;
		if (apply && set_pause)
			r->paused_until = paused_until > now ? paused_until : 0;
		if (apply)
		{
			int64		after = aw_rate_free(t, now, &moment);

			if (after == PG_INT32_MAX && (before < PG_INT32_MAX || t->rate.blocked))
				wake = -1;
			else if (after > before)
				wake = (int32) (after - before);
			if (after == 0 && !t->rate.blocked)
			{
				aw_rate_block(t);
				*blocked = true;
			}

			/*
			 * Neither a rate nor a pause holds the topic back any more: its
			 * blocked claimers are all woken, and nobody need time it.  Left
			 * blocked, a topic of a database no worker serves (where only
			 * the worker unblocks) stayed in the topic table for ever.
			 */
			if (after == PG_INT32_MAX)
				aw_rate_unblock(t);
		}
		aw_rate_give_log(r);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return wake;
}

/*
 * Loading a topic's rate and pause from the tables into shared memory
 * that lost them: a rate shared memory does not hold yet gets a full
 * window (see above); a pause still ahead that it does not hold is
 * applied.  The topic is marked blocked, so that the worker wakes its
 * claimers when it may start again.  False when the topic table or the
 * pool has no room.
 */
bool
aw_ledger_rate_load(const char *topic, int32 max_starts, int64 per,
					TimestampTz paused_until, int32 *wake)
{
	AwTopic    *t;
	bool		ok = true;

	*wake = 0;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, max_starts > 0 || paused_until != 0);
	if (t == NULL)
		ok = (max_starts == 0 && paused_until == 0);
	else
	{
		AwRate	   *r = &t->rate;
		TimestampTz now = GetCurrentTimestamp();

		if (max_starts > 0 && r->max_starts == 0)
		{
			if (aw_rate_take_log(r))
			{
				aw_rate_window_init(aw_rate_log(r));
				aw_rate_window_log(aw_rate_log(r), now, max_starts, per, max_starts);
				r->max_starts = max_starts;
				r->per = per;
			}
			else
				ok = false;
		}
		if (paused_until > now && r->paused_until == 0)
			r->paused_until = paused_until;
		if (r->max_starts > 0 || r->paused_until != 0)
			aw_rate_block(t);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return ok;
}

/*
 * Does shared memory hold what the tables say of a topic: its rate (when
 * rate), and its pause when it is still ahead?
 */
bool
aw_ledger_rate_loaded(const char *topic, bool rate, TimestampTz paused_until)
{
	AwTopic    *t;
	bool		loaded;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	loaded = (!rate || (t != NULL && t->rate.max_starts > 0)) &&
		(paused_until <= GetCurrentTimestamp() ||
		 (t != NULL && t->rate.paused_until != 0));
	LWLockRelease(aw_shared->lock);
	return loaded;
}

/*
 * The worker's look at the blocked topics of its database: each that may
 * start rows now leaves the list, with the claimers to wake in out (one per
 * start it may begin, capped by its limit's free slots; -1: all); for the
 * others, *next is the earliest moment one may.  Returns how many are in
 * out; when out is full, *next is now, to look again at once.
 */
int
aw_ledger_rate_wakes(Oid dbid, TimestampTz now, AwRateWake *out, int max_out,
					 TimestampTz *next)
{
	dlist_mutable_iter iter;
	int			n = 0;

	*next = 0;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	dlist_foreach_modify(iter, &aw_shared->rate_blocked)
	{
		AwTopic    *t = dlist_container(AwTopic, rate.blocked_node, iter.cur);
		TimestampTz moment;
		int64		free_starts;

		if (t->key.dbid != dbid)
			continue;
		free_starts = aw_rate_free(t, now, &moment);
		if (free_starts > 0)
		{
			if (n == max_out)
			{
				*next = now;
				break;
			}
			free_starts = Min(free_starts, aw_topic_free_slots(t));
			strlcpy(out[n].topic, t->key.name, sizeof(out[n].topic));
			out[n].n = free_starts >= PG_INT32_MAX ? -1 : (int32) free_starts;
			n++;
			aw_rate_unblock(t);
			aw_topic_update_quiet(t);
		}
		else if (moment != 0 && (*next == 0 || moment < *next))
			*next = moment;
	}
	LWLockRelease(aw_shared->lock);
	return n;
}

/*
 * In a database no worker serves: when a claimer blocked on the topic by
 * its rate or pause should look again (now, if it may start a row already);
 * 0 when the topic is not blocked.
 */
TimestampTz
aw_ledger_rate_moment(const char *topic)
{
	AwTopic    *t;
	TimestampTz moment = 0;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->rate.blocked)
	{
		TimestampTz now = GetCurrentTimestamp();

		/*
		 * It may start rows now: this claimer looks at once, and the mark
		 * goes, as the worker's look takes it off in a served database
		 * (a claimer cut short again marks it again).
		 */
		if (aw_rate_free(t, now, &moment) > 0)
		{
			moment = now;
			aw_rate_unblock(t);
			aw_topic_update_quiet(t);
		}
	}
	LWLockRelease(aw_shared->lock);
	return moment;
}

/* DROP DATABASE or DROP EXTENSION committed: the database's rates and pauses go. */
void
aw_ledger_forget_rates(Oid dbid)
{
	HASH_SEQ_STATUS status;
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_topics);
	while ((t = (AwTopic *) hash_seq_search(&status)) != NULL)
	{
		if (t->key.dbid != dbid)
			continue;
		t->rate.max_starts = 0;
		t->rate.paused_until = 0;
		aw_rate_unblock(t);
		aw_rate_give_log(&t->rate);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
}

/* A claim found a rate or pause of its topic not loaded yet (status). */
void
aw_ledger_count_rate_not_loaded(void)
{
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_shared->counters.limits_not_loaded++;
	LWLockRelease(aw_shared->lock);
}

/*
 * The topic's rate and pause for aion_wake.topics, as of now, changing
 * nothing.  Caller holds the set lock.
 */
void
aw_rate_copy(AwTopic *t, AwRateRow *row, TimestampTz now)
{
	static AwRateWindow copy;
	AwRate	   *r = &t->rate;

	memset(row, 0, sizeof(*row));
	row->max_starts = r->max_starts;
	row->per = r->per;
	if (r->paused_until > now)
		row->paused_until = row->next_start_at = r->paused_until;
	if (r->max_starts > 0 && r->window >= 0)
	{
		memcpy(&copy, aw_rate_log(r), sizeof(copy));
		if (aw_rate_window_free(&copy, now, r->per, r->max_starts, r->reserved) == 0 &&
			row->next_start_at == 0)
			row->next_start_at = aw_rate_window_next(&copy, r->per, r->max_starts,
													 r->reserved);
		row->window_starts = copy.in_window + r->reserved;
	}
}
