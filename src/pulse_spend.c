/*-------------------------------------------------------------------------
 *
 * pulse_spend.c
 *	  Spending pulses (doc/design.md, How a pulse is spent): who may spend a
 *	  topic's slots and due entries (its one spender), the rounds that take
 *	  candidates, finish with their outcomes or are undone, and the
 *	  take_confirmed() of UNFENCED entries.  test/model/aion_wake.pml models
 *	  this file's steps; its comments name the functions.
 *
 *	  Every exported function takes the set lock itself and never raises
 *	  while holding it (aw_set_internal.h).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/pulse_spend.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "aw_compat.h"
#include "aw_set_internal.h"
#include "aw_settings.h"
#include "aw_waiters.h"

/* first delay before a re-offer that found its row locked is retried */
#define AW_RETRY_MIN_MS 5

/* Is a claimer the spender of the topic's slots, and still waiting? */
static inline bool
aw_topic_spender_live(AwTopic *t)
{
	return t->spender_registration != 0 &&
		aw_waiter_is_registered(t->spender_procno, t->spender_registration);
}

/*
 * May this backend's round spend the topic's slots and due entries?  Only
 * their one spender may (doc/design.md, Where pulses come from, and who
 * spends them): the claimer they were handed to while it waits, else the
 * worker -- or reoffer(), which spends on request.  A claiming round of
 * anyone else (a claimer woken for rows, a hand-off) spends only the slots
 * it brings, so that a pulse handed to a claimer is never split with
 * another process whose re-offers that claimer then misses.
 */
static bool
aw_topic_may_spend(AwTopic *t, bool claiming)
{
	if (aw_topic_spender_live(t))
		return t->spender_procno == AW_MY_PROCNO;
	return !claiming;
}

/* Take an entry for a re-offer by this backend; copy what it needs. */
static void
aw_take_entry(AwEntry *e, AwTake *out)
{
	strlcpy(out->key, e->key.key, sizeof(out->key));
	out->generation = e->generation;
	out->attempt = e->attempt;
	out->parked_at = e->parked_at;
	out->fence = e->fence;
	aw_entry_set_state(e, AW_IN_FLIGHT);
	e->owner_procno = AW_MY_PROCNO;
	e->owner_pid = MyProcPid;
}

/*
 * Spend one topic's slots: take candidates into b, and set b->slots to the
 * rows the round may move.  Due entries come first, each with a slot of its
 * own; then confirmed entries, oldest first, one per unspent slot, and
 * beyond that as many as `want` asks for (looking ahead past entries that
 * may be stale).  When the confirmed list runs out with slots left, steps
 * 2 and 3 of "How a pulse is spent" follow, all under this one hold of the
 * set lock, so no park can confirm between the last look at the confirmed
 * list and the marking of pending entries.  Caller holds the set lock
 * exclusively.
 */
static void
aw_take_topic(AwTopic *t, TimestampTz now, AwRound *b, int want)
{
	int			n = 0;
	uint64		k = 0;			/* slots of this round */
	uint64		cap = b->slot_cap > 0 ? (uint64) b->slot_cap : PG_UINT64_MAX;
	uint64		own;			/* the caller's slots, spent first */
	uint64		avail;			/* slots this round may use, own included */
	uint64		used = 0;		/* ... and has used */
	bool		exhausted = true;
	bool		spend = aw_topic_may_spend(t, b->claiming);
	dlist_mutable_iter iter;

	/*
	 * Due entries already hold a slot.  One whose fence has passed needs no
	 * re-offer: its slot goes back.  One whose row was locked at the last
	 * try waits for its retry time.
	 */
	dlist_foreach_modify(iter, &t->due)
	{
		AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

		if (n >= b->max || k >= cap || !spend)
			break;
		if (e->fence <= now)
		{
			aw_entry_remove(e, true);
			aw_shared->counters.fences_expired++;
		}
		else if (b->skip != NULL && b->skip(e->key.key))
			continue;
		else if (e->retry_at <= now)
		{
			aw_take_entry(e, &b->takes[n++]);
			k++;
		}
	}
	own = Min((uint64) b->own_slots, cap - Min(k, cap));
	avail = own + (spend ? Min(t->slots, cap - Min(k, cap) - own) : 0);

	/* 1. confirmed entries, oldest park first */
	dlist_foreach_modify(iter, &t->confirmed[AW_KIND_FENCED])
	{
		AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

		if ((used == avail && (k == 0 || n >= want)) || n >= b->max)
		{
			exhausted = false;
			break;
		}
		if (e->fence <= now)
		{
			/* already claimable: no slot is needed to re-offer it */
			aw_entry_remove(e, false);
			aw_shared->counters.fences_expired++;
			continue;
		}
		if (b->skip != NULL && b->skip(e->key.key))
			continue;
		aw_take_entry(e, &b->takes[n++]);
		if (used < avail)
		{
			used++;
			k++;
		}
	}

	/* steps 2 and 3 spend all the topic's slots: only a plain round does */
	if (exhausted && used < avail && b->slot_cap == 0 && own == 0 && spend)
	{
		uint64		left = avail - used;

		/* 2. slots left: mark pending parks woken, oldest first */
		dlist_foreach_modify(iter, &t->pending[AW_KIND_FENCED])
		{
			AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

			if (left == 0)
				break;
			if (!e->woken)
			{
				e->woken = true;
				left--;
			}
		}

		/* 3. slots still left become a short-lived credit */
		if (left > 0 && aw_pulse_credit_ms > 0)
		{
			if (t->credit_until <= now)
				t->credit = 0;
			t->credit = (t->credit > PG_UINT64_MAX - left) ? PG_UINT64_MAX : t->credit + left;
			t->credit_until = now + (int64) aw_pulse_credit_ms * 1000;
			/* credited last: the quiet list stays in credit order */
			if (t->quiet)
			{
				dlist_delete(&t->quiet_node);
				dlist_push_tail(&aw_shared->quiet, &t->quiet_node);
			}
		}
		used = avail;
	}
	t->slots -= (used > own) ? used - own : 0;
	b->own = (int) Min(own, used);
	b->own_left = 0;
	/* due entries waiting to be retried keep the topic on the work list */
	if (t->in_work && t->slots == 0 && dlist_is_empty(&t->due))
	{
		dlist_delete(&t->work_node);
		t->in_work = false;
	}
	aw_topic_update_quiet(t);
	b->n = n;
	b->slots = (int) k;
}

/*
 * Take a round's candidates from b->topic, after adding add_slots to it;
 * want asks for look-ahead candidates beyond one per slot (see
 * AwRound).  Sets b->n and b->slots; b->n is 0 when there is nothing
 * to re-offer.  The entries taken are IN_FLIGHT, owned by this backend,
 * until aw_set_finish_round or aw_set_undo_take.
 */
void
aw_set_take(AwRound *b, uint64 add_slots, int want)
{
	AwTopic    *t;

	b->n = 0;
	b->slots = 0;
	b->finished = false;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, b->topic, add_slots > 0);
	if (t != NULL)
	{
		aw_topic_add_slots(t, add_slots);
		aw_take_topic(t, GetCurrentTimestamp(), b, want);
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * The topics of this database on the work list, as a list of palloc'd
 * names: what the worker spends, one topic at a time.
 */
List *
aw_set_work_topics(void)
{
	List	   *names = NIL;
	dlist_iter	iter;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	dlist_foreach(iter, &aw_shared->work)
	{
		AwTopic    *t = dlist_container(AwTopic, work_node, iter.cur);

		if (t->key.dbid == MyDatabaseId)
			names = lappend(names, pstrdup(t->key.name));
	}
	LWLockRelease(aw_shared->lock);
	return names;
}

/* Is any topic of this database on the work list? */
bool
aw_set_has_work(void)
{
	dlist_iter	iter;
	bool		found = false;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	dlist_foreach(iter, &aw_shared->work)
	{
		if (dlist_container(AwTopic, work_node, iter.cur)->key.dbid == MyDatabaseId)
		{
			found = true;
			break;
		}
	}
	LWLockRelease(aw_shared->lock);
	return found;
}

/*
 * Would a claiming round of a topic of this database take anything: are
 * due entries waiting, and slots (the topic's, or with own_slots the
 * caller's, which a round spends on confirmed parks only) with something
 * to spend them on?  Under the lock held shared, so that a hand-off of a
 * topic without parks, the common case, never takes it exclusively.
 */
bool
aw_set_topic_has_work(const char *topic, bool own_slots)
{
	AwTopic    *t;
	bool		work;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	work = (t != NULL &&
			(!dlist_is_empty(&t->due) ||
			 (own_slots ? !dlist_is_empty(&t->confirmed[AW_KIND_FENCED]) : t->slots > 0)));
	LWLockRelease(aw_shared->lock);
	return work;
}

/*
 * Is a blocked claimer the spender of the topic's slots (aw_waiters.c,
 * aw_waiters_wake_spender)?
 */
bool
aw_set_spender_active(const char *topic)
{
	AwTopic    *t;
	bool		active;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	active = (t != NULL && aw_topic_spender_live(t));
	LWLockRelease(aw_shared->lock);
	return active;
}

/*
 * Make a blocked claimer, woken for the purpose, the spender of the
 * topic's slots, unless another still waiting is already.  Returns false
 * when that claimer has left the registry since it was woken (then it
 * cannot be the spender).  Never raises.
 */
bool
aw_set_spender_hand(const char *topic, int procno, uint64 registration)
{
	AwTopic    *t;
	bool		handed = true;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && !aw_topic_spender_live(t))
	{
		if (aw_waiter_is_registered(procno, registration))
		{
			t->spender_procno = procno;
			t->spender_registration = registration;
			t->spender_hand = ++aw_shared->next_hand;
		}
		else
			handed = false;
	}
	LWLockRelease(aw_shared->lock);
	return handed;
}

/*
 * The number of the last hand of slots to a claimer.  A claimer reads it
 * before it reads its inbox for a probe: a topic handed to it up to then
 * is among the probe's ready topics (the hand sets the inbox bit first).
 */
uint64
aw_set_last_hand(void)
{
	uint64		hand;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	hand = aw_shared->next_hand;
	LWLockRelease(aw_shared->lock);
	return hand;
}

/*
 * This claimer stops spending the topics it waits on that were handed to
 * it up to hand (aw_set_last_hand before its probe; PG_UINT64_MAX when it
 * leaves the registry).  A topic handed to it later stays its own: the
 * hand came while the probe ran, perhaps after it looked at the topic,
 * and its latch is set, so its next probe spends it.  Of a topic it
 * releases, the slots and due entries its probe did not spend (it had no
 * room for more rows, it met only pending parks, or it was cancelled) go
 * to the worker, which spends them all.  Returns AW_WAKE_WORKER when there
 * are such.  Never raises.
 */
AwWake
aw_set_spender_release(char **topics, int ntopics, uint64 hand)
{
	AwWake		wake = AW_WAKE_NONE;
	int			i;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < ntopics; i++)
	{
		AwTopic    *t = aw_topic_find(MyDatabaseId, topics[i], false);

		if (t == NULL || t->spender_registration == 0 ||
			t->spender_procno != AW_MY_PROCNO || t->spender_hand > hand)
			continue;
		t->spender_procno = -1;
		t->spender_registration = 0;
		if (t->slots > 0 || !dlist_is_empty(&t->due))
			wake = AW_WAKE_WORKER;
	}
	LWLockRelease(aw_shared->lock);
	return wake;
}

/* Is this in-flight entry the one this backend took as `take`? */
static inline bool
aw_entry_taken_by_me(AwEntry *e, const AwTake *take)
{
	return e != NULL && e->state == AW_IN_FLIGHT &&
		e->generation == take->generation &&
		e->owner_procno == AW_MY_PROCNO && e->owner_pid == MyProcPid;
}

/*
 * The state in which an entry a round held goes back to its topic: like a
 * confirming park, it takes a live credit if there is one and is then due
 * (its slot).  While the round held it the entry was not confirmed, so a
 * pulse that came meanwhile found nothing to spend and became that credit;
 * without this the slot would expire beside the row (G2).  Caller holds
 * the set lock exclusively.
 */
static AwState
aw_entry_back_state(AwTopic *t, TimestampTz now)
{
	if (t->credit > 0 && now < t->credit_until)
	{
		t->credit--;
		aw_shared->counters.credits_used++;
		return AW_DUE;
	}
	return AW_CONFIRMED;
}

/*
 * Settle a round with the outcomes of its compare-and-set.  A row moved:
 * its entry leaves the set.  A row that changed since its park: its entry
 * is dropped.  A row still parked at its fence was either locked (by a
 * transaction still in progress) or not reached because the round's slots
 * were spent on older rows; while the round has slots it did not use, such
 * entries keep one each and are retried after a short, growing delay (so
 * that if the lock holder rolls back the row is still re-offered, and if it
 * changes the row its forget at commit gives the slot back); the others go
 * back to the confirmed list, taking a live credit if there is one
 * (aw_entry_back_state).  The caller's own slots are the exception:
 * what the rows moved did not spend of them is handed back in b->own_left,
 * and no entry keeps one.  Slots the round did not use at all go back to
 * the topic, for the caller's next round to spend (G2).  An entry that a
 * newer park replaced meanwhile is left alone.  Returns AW_WAKE_WORKER when
 * the worker must learn of a retry time.  Never raises: the ABORT callback
 * calls it.
 */
AwWake
aw_set_finish_round(AwRound *b)
{
	int			i;
	int			slots_left;
	bool		wake_worker = false;
	TimestampTz now = GetCurrentTimestamp();

	int			moved = 0;

	for (i = 0; i < b->n; i++)
	{
		if (b->outcomes[i] == AW_TAKE_MOVED)
			moved++;
	}

	/*
	 * The rows moved spend the caller's own slots first.  An own slot left
	 * over goes back to the caller, never to a row found locked nor to the
	 * topic: it was never a pulse.  The caller spends it on a visible row
	 * or turns it into a pulse at its commit, so it is spent once; and if
	 * the caller's transaction rolls back, the slot never existed.
	 */
	b->own_left = Max(0, b->own - moved);
	slots_left = b->slots - moved - b->own_left;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < b->n; i++)
	{
		AwEntry    *e = aw_entry_find(MyDatabaseId, AW_KIND_FENCED, b->takes[i].key);

		if (!aw_entry_taken_by_me(e, &b->takes[i]))
		{
			if (b->outcomes[i] == AW_TAKE_MOVED)
				aw_shared->counters.rows_reoffered++;
			continue;
		}
		switch (b->outcomes[i])
		{
			case AW_TAKE_MOVED:
				aw_shared->counters.rows_reoffered++;
				e->topic->reoffered++;
				aw_entry_remove(e, false);
				break;
			case AW_TAKE_STALE:
				aw_entry_remove(e, false);
				break;
			case AW_TAKE_VALID:
				if (slots_left > 0)
				{
					slots_left--;
					e->retry_at = now + ((int64) AW_RETRY_MIN_MS << Min(e->retries, 8)) * 1000;
					e->retries++;
					aw_entry_set_state(e, AW_DUE);
					wake_worker = true; /* it must learn of the retry time */
				}
				else if (aw_entry_back_state(e->topic, now) == AW_DUE)
				{
					aw_entry_set_state(e, AW_DUE);
					wake_worker = true;
				}
				else
					aw_entry_set_state(e, AW_CONFIRMED);
				break;
		}
	}
	if (slots_left > 0)
	{
		AwTopic    *t = aw_topic_find(MyDatabaseId, b->topic, true);

		/* the caller's next round spends them (aw_reoffer_step) */
		if (t != NULL)
		{
			aw_topic_add_slots(t, slots_left);
			aw_shared->counters.slots_returned += slots_left;
		}
	}
	LWLockRelease(aw_shared->lock);
	b->finished = true;
	return wake_worker ? AW_WAKE_WORKER : AW_WAKE_NONE;
}

/*
 * The transaction of a round ended without committing (ROLLBACK, an error,
 * a FATAL on the way out of the backend).  A round not yet settled gives
 * its entries back as though every row were still parked (locked): each of
 * its slots stays with one of them, retried shortly.  A settled round's
 * moved rows are parked again, their UPDATE rolled back: their entries come
 * back holding a slot each, to be re-offered at once (G2) -- but for those
 * the caller's own slots moved (a hand-off's freed slot, which a rollback
 * of the settle unmakes): they come back confirmed, holding none of those,
 * though like any entry given back they take a live credit.  Either
 * way the worker must look: at the slots and due entries left
 * (AW_WAKE_WORKER), since no next round of this caller will.  Never
 * raises.
 */
AwWake
aw_set_undo_take(AwRound *b)
{
	int			i;
	int			own_moved;
	TimestampTz now = GetCurrentTimestamp();

	if (!b->finished)
	{
		for (i = 0; i < b->n; i++)
			b->outcomes[i] = AW_TAKE_VALID;
		(void) aw_set_finish_round(b);
		return b->n > 0 ? AW_WAKE_WORKER : AW_WAKE_NONE;
	}
	/* the rows the caller's own slots moved: those slots never existed */
	own_moved = b->own - b->own_left;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < b->n; i++)
	{
		const AwTake *tk = &b->takes[i];
		AwTopic    *t;
		AwEntry    *e;
		bool		found;

		if (b->outcomes[i] != AW_TAKE_MOVED)
			continue;
		t = aw_topic_find(MyDatabaseId, b->topic, true);
		e = t ? aw_entry_enter(AW_KIND_FENCED, tk->key, &found) : NULL;
		if (e == NULL)
		{
			aw_shared->counters.set_full++;
			continue;
		}
		if (found)
			continue;			/* a newer park of the row */
		aw_entry_fill(e, t, tk->attempt, tk->parked_at, tk->fence);
		if (own_moved > 0)
		{
			own_moved--;
			aw_entry_link(e, aw_entry_back_state(t, now));
		}
		else
			aw_entry_link(e, AW_DUE);
	}
	LWLockRelease(aw_shared->lock);
	b->n = 0;

	/*
	 * The entries put back, and slots a settled round returned to the topic
	 * for a next round that will not come: the worker spends them.
	 */
	return AW_WAKE_WORKER;
}

/*
 * The earliest retry time of a due entry of this database, or 0.  Only
 * topics on the work list can hold due entries.
 */
TimestampTz
aw_set_next_retry(void)
{
	dlist_iter	ti;
	TimestampTz next = 0;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	dlist_foreach(ti, &aw_shared->work)
	{
		AwTopic    *t = dlist_container(AwTopic, work_node, ti.cur);
		dlist_iter	ei;

		if (t->key.dbid != MyDatabaseId)
			continue;
		dlist_foreach(ei, &t->due)
		{
			AwEntry    *e = dlist_container(AwEntry, list_node, ei.cur);

			if (e->retry_at != 0 && (next == 0 || e->retry_at < next))
				next = e->retry_at;
		}
	}
	LWLockRelease(aw_shared->lock);
	return next;
}

/*
 * The UNFENCED entry of these topics that confirmed first (the heads of
 * their confirmed lists), or NULL.  Caller holds the set lock.
 */
static AwEntry *
aw_oldest_unfenced_confirmed(AwTopic **topics, int ntopics)
{
	AwEntry    *best = NULL;
	int			i;

	for (i = 0; i < ntopics; i++)
	{
		AwEntry    *e;

		if (dlist_is_empty(&topics[i]->confirmed[AW_KIND_UNFENCED]))
			continue;
		e = dlist_head_element(AwEntry, list_node, &topics[i]->confirmed[AW_KIND_UNFENCED]);
		if (best == NULL || aw_entry_older(e, best))
			best = e;
	}
	return best;
}

/*
 * The oldest pending UNFENCED entry of these topics not yet woken, or NULL.
 * Caller holds the set lock.
 */
static AwEntry *
aw_oldest_unfenced_unwoken(AwTopic **topics, int ntopics)
{
	AwEntry    *best = NULL;
	int			i;

	for (i = 0; i < ntopics; i++)
	{
		dlist_iter	iter;

		dlist_foreach(iter, &topics[i]->pending[AW_KIND_UNFENCED])
		{
			AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

			if (e->woken)
				continue;
			if (best == NULL || aw_entry_older(e, best))
				best = e;
			break;
		}
	}
	return best;
}

/*
 * take_confirmed(): remove up to max_out confirmed UNFENCED entries of a
 * topic (or of every topic of this database), oldest first, into out[],
 * and count them off *want.  When the confirmed ones run out, mark pending
 * ones woken, one per row still wanted, and set *done.  Callers loop until
 * *done, so the lock is held for one chunk at a time.  Returns the number
 * copied.
 */
int
aw_set_take_unfenced(const char *topic, int64 *want, AwUnfencedTake *out,
					 int max_out, bool *done)
{
	AwTopic   **topics = palloc(sizeof(AwTopic *) * aw_max_topics);
	int			ntopics = 0;
	int			n = 0;

	*done = false;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_expire_unfenced(GetCurrentTimestamp());
	if (topic != NULL)
	{
		AwTopic    *t = aw_topic_find(MyDatabaseId, topic, false);

		if (t != NULL)
			topics[ntopics++] = t;
	}
	else
	{
		HASH_SEQ_STATUS status;
		AwTopic    *t;

		hash_seq_init(&status, aw_topics);
		while ((t = (AwTopic *) hash_seq_search(&status)) != NULL)
		{
			if (t->key.dbid == MyDatabaseId)
				topics[ntopics++] = t;
		}
	}

	while (n < max_out && *want > 0)
	{
		AwEntry    *e = aw_oldest_unfenced_confirmed(topics, ntopics);

		if (e == NULL)
			break;
		strlcpy(out[n].key, e->key.key, sizeof(out[n].key));
		out[n].attempt = e->attempt;
		n++;
		(*want)--;
		aw_entry_remove(e, false);
	}
	if (n < max_out || *want == 0)
	{
		/* confirmed ones exhausted: wake pending ones, oldest first */
		while (*want > 0)
		{
			AwEntry    *e = aw_oldest_unfenced_unwoken(topics, ntopics);

			if (e == NULL)
				break;
			e->woken = true;
			(*want)--;
		}
		*done = true;
	}
	LWLockRelease(aw_shared->lock);
	pfree(topics);
	return n;
}
