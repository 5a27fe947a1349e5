/*-------------------------------------------------------------------------
 *
 * lease_ledger.c
 *	  The lease ledger: known capacity (G8) -- limits, reservations and the
 *	  records of leases of limited topics.  limits.c is its one caller
 *	  outside the set; a topic's fields are its AwCapacity
 *	  (aw_lease_ledger.h), kept in the set's topic entry.
 *
 *	  A limited topic has max_in_flight slots.  A slot is in use while a claim
 *	  in progress has reserved it or a lease holds it (the two leases of a
 *	  hand-off hold one); it is free while reservations, leases and untracked
 *	  leases together are below the limit.  Each lease has a record, from a
 *	  pool, ordered by end in a heap so that expiry costs O(log n).
 *
 *	  The life of a lease and of the slot it holds:
 *
 *	    free     --a claim reserves-->                     RESERVED
 *	    RESERVED --the claim leases a row-->               OPEN (owner: claimer)
 *	    RESERVED --the claim does not use it, or aborts--> free
 *	    OPEN     --the claim commits-->                    LIVE
 *	    OPEN     --the claim rolls back-->                 released
 *	    OPEN, LIVE --complete, fail, park, dead_letter-->  SETTLED (owner: settler)
 *	    SETTLED  --a claim of the settler's transaction
 *	               inherits the slot-->                  SETTLED, handed
 *	    SETTLED  --a second settle of it, same xact-->     SETTLED (a repeat)
 *	    SETTLED  --the settle rolls back (savepoints too)--> OPEN or LIVE again
 *	    SETTLED  --the settle commits-->                   released
 *	    any      --its end passes-->                       released, expired
 *
 *	  RESERVED is a count on the topic, not a record; released means the
 *	  record is gone, and its slot is free unless it was handed to a
 *	  successor, which then holds it alone.  Why it is written this way:
 *
 *	   - A settle marks the record SETTLED in shared memory, and a rollback
 *	     puts back the state it found.  So a second settle of the same lease
 *	     in that transaction (fail, then dead_letter) finds it SETTLED by its
 *	     own transaction and is only a repeat: a lease is settled, and its
 *	     slot handed on, once.
 *	   - Records are keyed by row and token.  A row settled and claimed again
 *	     by one transaction (fail with no back-off, then claim) has both
 *	     leases until that transaction ends, the new one handed the old one's
 *	     slot; a rollback drops the new one and restores the old one, which
 *	     is live again in the table.  Only the lease's own settle, the
 *	     rollback of its claim or its end remove a record, so leases_expired
 *	     counts leases that ended, and no record stands for a lease that
 *	     still runs.
 *	   - A settle that finds the record OPEN or SETTLED by another backend
 *	     meets a transaction that has committed or rolled back (the row was
 *	     locked until then) whose callback has not run yet: OPEN is then
 *	     LIVE, and SETTLED is taken over (that settle's release still removes
 *	     the record if it committed; its restore leaves a record it no longer
 *	     owns alone).
 *
 *	  The pool.  A slot may need two records at once (a hand-off keeps the
 *	  settled lease and its successor until the commit), and leases above
 *	  their topic's limit (draining after a lowering, or more than it taken in
 *	  with a first limit) hold records of their own, so the pool holds three
 *	  records per slot of aion_wake.max_leases: two for every slot the limits
 *	  allow, and a reserve as large as all the slots for leases above limits.
 *	  Each topic holds
 *	      max(2 * max_in_flight, records + reservations, hold_floor)
 *	  of it (aw_topic_hold): twice its limit, more while leases above it are
 *	  live, and at least what a set_limit() not yet ended promised
 *	  (hold_floor).  A claim reserves only while its topic is below its limit,
 *	  and a hand-off only while it is not over it, so records and reservations
 *	  never outgrow twice the limit that way, and above it they only drain.
 *	  set_limit() refuses a limit that would make the sum of limits exceed
 *	  aion_wake.max_leases, or the holds of all topics exceed the pool (only
 *	  when leases above limits outnumber the slots: several lowerings still
 *	  draining), and a limit is loaded only under the same check; so every
 *	  lease the limits allow has a record.  Untracked leases (no record,
 *	  released all together at their latest end) are a fallback that should
 *	  never be used.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/lease_ledger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "aw_set_internal.h"
#include "aw_settings.h"

static int32 aw_topic_apply_limit(AwTopic *t, int32 max_in_flight,
								  const AwLiveLease *leases, int32 n_leases);

/* A new topic has no limit, reservation or lease. */
void
aw_capacity_init(AwCapacity *c)
{
	memset(c, 0, sizeof(*c));
	dlist_init(&c->leases);
}

/*
 * Does the ledger hold nothing of a topic: no limit, reservation, lease,
 * pin or record of the pool?  Only such a topic may be recycled.
 */
bool
aw_capacity_idle(const AwCapacity *c)
{
	return c->max_in_flight == 0 && c->reserved == 0 &&
		c->n_leases == 0 && c->untracked == 0 &&
		c->limit_pins == 0 && c->pool_held == 0;
}

/* The leases of a topic that hold a slot (aion_wake.topics' in_flight). */
int32
aw_capacity_in_flight(const AwCapacity *c)
{
	return c->n_leases + c->untracked - c->handoffs;
}


/*
 * Slots of a limited topic in use.  The two leases of a hand-off (a lease
 * settled by the transaction that holds its successor) share one slot, and
 * so do a settled lease and the slot reserved for its successor while the
 * hand-off's claim is under way: counted as two, the topic would look one
 * over its limit for that moment, and another hand-off would take nothing
 * and a claimer woken by a released slot would find none free.
 */
static inline int64
aw_topic_used(AwTopic *t)
{
	return (int64) t->cap.n_leases + t->cap.reserved + t->cap.untracked - t->cap.handoffs - t->cap.handing;
}

/* Free slots of a topic: INT64_MAX when it is unlimited. */
int64
aw_topic_free_slots(AwTopic *t)
{
	if (t->cap.max_in_flight == 0)
		return PG_INT64_MAX;
	return Max(0, t->cap.max_in_flight - aw_topic_used(t));
}

/* Records of the pool a topic holds (see above). */
static inline int64
aw_topic_hold(AwTopic *t)
{
	int64		hold = 2 * (int64) t->cap.max_in_flight;

	hold = Max(hold, (int64) t->cap.n_leases + t->cap.reserved);
	return Max(hold, t->cap.hold_floor);
}

/*
 * Bring a topic's share of the pool, and of the sum of limits, up to date.
 * While a set_limit() of it has not ended, both its limit and the one set
 * count.  Caller holds the set lock.
 */
void
aw_topic_pool_sync(AwTopic *t)
{
	int64		hold = aw_topic_hold(t);
	int32		limit = Max(t->cap.max_in_flight, t->cap.limit_floor);

	aw_shared->pool_held += hold - t->cap.pool_held;
	t->cap.pool_held = hold;
	aw_shared->limits_held += (int64) limit - t->cap.limit_held;
	t->cap.limit_held = limit;
}

/*
 * The records a topic will hold once max_in_flight is its limit, with
 * n_take_in live leases taken in when it has none yet.
 */
static int64
aw_topic_hold_with(AwTopic *t, int32 max_in_flight, int32 n_take_in)
{
	int64		records = (int64) t->cap.n_leases + t->cap.reserved;

	if (max_in_flight == 0)
		return 0;
	if (t->cap.max_in_flight == 0)
		records += n_take_in;
	return Max(2 * (int64) max_in_flight, records);
}

/*
 * Can a topic have the limit max_in_flight and hold `hold` records?  Else
 * why not: the sum of limits would exceed aion_wake.max_leases, or leases
 * above their limits hold the records of the pool.
 */
static AwLimitResult
aw_pool_check(AwTopic *t, int64 hold, int32 max_in_flight)
{
	if (aw_shared->limits_held + Max(0, (int64) max_in_flight - t->cap.limit_held) >
		aw_max_leases)
		return AW_LIMIT_POOL_FULL;
	if (hold > t->cap.pool_held &&
		aw_shared->pool_held + (hold - t->cap.pool_held) > AW_LEASE_RECORDS)
		return AW_LIMIT_LEASES_FULL;
	return AW_LIMIT_OK;
}

static void
aw_lease_key_init(AwLeaseKey *k, Oid dbid, const char *key, int64 token)
{
	memset(k, 0, sizeof(*k));
	k->dbid = dbid;
	strlcpy(k->key, key, sizeof(k->key));
	k->token = token;
}

/*
 * Drop a lease record (released).  Returns true when its slot is free;
 * false when the lease was one of a hand-off pair, and the other keeps the
 * slot: the slot is released only when both leases are over.  Caller holds
 * the set lock.
 */
static bool
aw_lease_remove(AwLease *l)
{
	AwTopic    *t = l->topic;
	bool		freed = !(l->handed || l->partner != NULL);

	/* a reservation that shared its slot holds one of its own now */
	if (l->handing)
		t->cap.handing--;
	if (l->handed)
		t->cap.handoffs--;			/* the predecessor: the successor keeps it */
	else if (l->partner != NULL)
	{
		/* the successor: the slot goes back to the predecessor */
		l->partner->handed = false;
		t->cap.handoffs--;
	}
	if (l->partner != NULL)
		l->partner->partner = NULL;
	if (l->end_node.index >= 0)
		aw_heap_remove(&aw_shared->lease_ends, &l->end_node);
	dlist_delete(&l->topic_node);
	t->cap.n_leases--;
	hash_search(aw_leases, &l->key, HASH_REMOVE, NULL);
	aw_topic_update_quiet(t);
	return freed;
}

/*
 * Record a lease of a limited topic, in state (OPEN for a claim, owner
 * this backend; LIVE when taken in from the table).  A record the lease has
 * already is kept (a reload).  Should the pool be full all the same, the
 * lease is untracked, released with the others at the latest of their
 * ends -- late, never early.  Returns true when the lease is now the first
 * to end: whoever sleeps until a lease end must look again.  Caller holds
 * the set lock exclusively.
 */
static bool
aw_lease_add(AwTopic *t, const char *key, int64 token, TimestampTz ends,
			 AwLeaseState state)
{
	AwLeaseKey	k;
	AwLease    *l;
	bool		found;

	aw_lease_key_init(&k, MyDatabaseId, key, token);
	l = hash_search(aw_leases, &k, HASH_ENTER_NULL, &found);
	if (l != NULL && found)
		return false;
	if (l == NULL)
	{
		t->cap.untracked++;
		t->cap.untracked_until = Max(t->cap.untracked_until, ends);
		aw_topic_update_quiet(t);
		return false;
	}
	l->topic = t;
	l->ends = ends;
	l->state = state;
	l->owner_pid = (state == AW_LEASE_LIVE) ? 0 : MyProcPid;
	l->handed = false;
	l->handing = false;
	l->partner = NULL;
	l->end_node.at = ends;
	l->end_node.seq = aw_shared->next_seq++;
	l->end_node.index = -1;
	(void) aw_heap_push(&aw_shared->lease_ends, &l->end_node);	/* sized for the pool */
	dlist_push_tail(&t->cap.leases, &l->topic_node);
	t->cap.n_leases++;
	aw_topic_update_quiet(t);
	return l->end_node.index == 0;
}

/* The record of the lease (row and token) of this database, or NULL. */
static AwLease *
aw_lease_find(const char *key, int64 token)
{
	AwLeaseKey	k;

	aw_lease_key_init(&k, MyDatabaseId, key, token);
	return hash_search(aw_leases, &k, HASH_FIND, NULL);
}

/* Is the lease SETTLED by this backend's transaction? */
static inline bool
aw_lease_settled_by_me(const AwLease *l)
{
	return l->state == AW_LEASE_SETTLED && l->owner_pid == MyProcPid;
}

/*
 * The zero-gap hand-off: the transaction that settled these n leases of a
 * topic (of this database) claims its next rows, and a lease's slot passes
 * to a new one without ever being free.  Reserve one slot for each of them
 * that is still SETTLED by this transaction and has passed its slot to no
 * successor yet -- only while the topic is not over its limit (after a
 * lowering, the slots are released instead).  Those come first in settled
 * (moved there).  Each settled lease and the slot reserved for its
 * successor share one slot (see aw_topic_used) until the successor's
 * lease is open, the reservation is given back, or the settled lease ends
 * first.  Returns how many.  The claim pairs each with the lease that
 * takes its slot (aw_ledger_open), or gives the slot back
 * (aw_ledger_unreserve).  Caller holds the set lock exclusively; the
 * topic is limited.
 */
static int32
aw_topic_reserve_handed(AwTopic *t, AwSettledLease *settled, int n)
{
	int32		handed = 0;
	int			i;

	if (n == 0 || aw_topic_used(t) > t->cap.max_in_flight)
		return 0;
	for (i = 0; i < n; i++)
	{
		AwLease    *l = aw_lease_find(settled[i].key, settled[i].token);

		if (l == NULL || l->topic != t || !aw_lease_settled_by_me(l) ||
			l->handed || l->handing || l->partner != NULL)
			continue;
		if (i != handed)
		{
			AwSettledLease tmp = settled[handed];

			settled[handed] = settled[i];
			settled[i] = tmp;
		}
		handed++;
		t->cap.reserved++;
		l->handing = true;
		t->cap.handing++;
	}
	return handed;
}

/*
 * A claim of a topic is about to lock rows: reserve up to want slots of
 * it, in one hold of the set lock.  The first are those of the n_settled
 * leases of it this transaction settled that pass their slots on (see
 * aw_topic_reserve_handed; *handed counts them, moved to the front of
 * settled); the rest are free slots.  Returns the slots reserved, handed
 * ones included (want when the topic is unlimited, and then *limited is
 * false).  Untracked leases whose time has come are released here.  A
 * topic with a rate or a pause admits first only the rows that may start
 * now (rate_ledger.c), and reserves as many starts as slots: *rated is
 * their number, or -1 when neither holds the topic back; *blocked when
 * the topic has just become blocked by them, for the worker to time.
 */
int32
aw_ledger_reserve(const char *topic, int32 want, AwSettledLease *settled, int n_settled,
				  int32 *handed, bool *limited, int32 *rated, bool *blocked)
{
	AwTopic    *t;
	int32		got;

	*handed = 0;
	*limited = false;
	*rated = -1;
	*blocked = false;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	/* the rate and the pause first: every row a claim takes is a start */
	if (t != NULL && (t->rate.max_starts > 0 || t->rate.paused_until != 0))
	{
		want = aw_rate_admit(t, want, GetCurrentTimestamp(), blocked);
		n_settled = Min(n_settled, want);
		*rated = 0;
	}
	got = want;
	if (t != NULL && t->cap.max_in_flight > 0)
	{
		int32		free_got;

		*handed = aw_topic_reserve_handed(t, settled, n_settled);
		if (t->cap.untracked > 0 && t->cap.untracked_until <= GetCurrentTimestamp())
			t->cap.untracked = 0;
		*limited = true;
		free_got = (int32) Max(0, Min((int64) want - *handed,
									  t->cap.max_in_flight - aw_topic_used(t)));
		t->cap.reserved += free_got;
		got = *handed + free_got;
	}
	if (*rated == 0)
	{
		t->rate.reserved += got;
		*rated = got;
	}
	if (t != NULL)
		aw_topic_update_quiet(t);
	LWLockRelease(aw_shared->lock);
	return got;
}

/* A settled lease's successor took its reserved slot, or never will. */
static void
aw_lease_unhand(const AwSettledLease *s)
{
	AwLease    *l = aw_lease_find(s->key, s->token);

	if (l != NULL && l->handing)
	{
		l->handing = false;
		l->topic->cap.handing--;
	}
}

/*
 * Give back n slots a claim reserved and did not use; among them, those
 * reserved for the successors of the n_handing settled leases in handing
 * (aw_topic_reserve_handed).
 */
void
aw_ledger_unreserve(const char *topic, int32 n, const AwSettledLease *handing, int n_handing)
{
	AwTopic    *t;
	int			i;

	if (n <= 0)
		return;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < n_handing; i++)
		aw_lease_unhand(&handing[i]);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL)
	{
		t->cap.reserved = Max(0, t->cap.reserved - n);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * A claim leased rows of limited topics: one reserved slot of each row's
 * topic becomes a lease, OPEN until the claim commits.  A lease that took
 * the slot reserved for a settled one (preds[i], see
 * aw_topic_reserve_handed) is paired with it: they share the slot until
 * both are over.  When that lease is gone already (its end passed), the
 * new one simply holds the slot it took.  Returns true when one of them is
 * now the first lease to end: the worker must look again.
 */
bool
aw_ledger_open(const AwLiveLease *leases, const AwSettledLease **preds, int n)
{
	bool		first = false;
	int			i;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < n; i++)
	{
		AwTopic    *t = aw_topic_find(MyDatabaseId, leases[i].topic, false);

		if (t == NULL)
			continue;
		t->cap.reserved = Max(0, t->cap.reserved - 1);
		first |= aw_lease_add(t, leases[i].key, leases[i].token, leases[i].ends,
							  AW_LEASE_OPEN);
		if (preds[i] != NULL)
		{
			AwLease    *pred = aw_lease_find(preds[i]->key, preds[i]->token);
			AwLease    *succ = aw_lease_find(leases[i].key, leases[i].token);

			/* the slot reserved for the successor is its slot now */
			aw_lease_unhand(preds[i]);

			if (pred != NULL && aw_lease_settled_by_me(pred) && !pred->handed &&
				pred->partner == NULL && pred->topic == t && succ != NULL &&
				succ->partner == NULL)
			{
				pred->handed = true;
				pred->partner = succ;
				succ->partner = pred;
				t->cap.handoffs++;
			}
		}
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return first;
}

/* The claim that took these leases committed: OPEN -> LIVE.  Never raises. */
void
aw_ledger_commit(const AwLiveLease *leases, int n)
{
	int			i;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < n; i++)
	{
		AwLease    *l = aw_lease_find(leases[i].key, leases[i].token);

		/* one its own transaction settled stays SETTLED, for the release */
		if (l != NULL && l->state == AW_LEASE_OPEN && l->owner_pid == MyProcPid)
		{
			l->state = AW_LEASE_LIVE;
			l->owner_pid = 0;
		}
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * The claim that took these leases rolled back: release those still open
 * (one that expired meanwhile was released then).  A settle of them in the
 * same transaction was undone first (newest first), so they are OPEN
 * again; one still SETTLED by this transaction is released all the same.
 * The rows wake claimers as rows claimable again, so nothing is woken
 * here.  Never raises.
 */
void
aw_ledger_rollback(const AwLiveLease *leases, int n)
{
	int			i;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < n; i++)
	{
		AwLease    *l = aw_lease_find(leases[i].key, leases[i].token);

		if (l != NULL && l->owner_pid == MyProcPid &&
			(l->state == AW_LEASE_OPEN || l->state == AW_LEASE_SETTLED))
			(void) aw_lease_remove(l);
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * A settle of a row whose lease carried token, in this transaction: mark
 * the lease's record SETTLED by it (OPEN, LIVE -> SETTLED), *prev the state
 * to restore if the settle rolls back.  AW_SETTLE_REPEAT when this
 * transaction has settled the lease already; AW_SETTLE_NONE when it has no
 * record (it ended, or the topic is not limited).  Never raises.
 */
AwSettleMark
aw_ledger_settle(const char *key, int64 token, AwLeaseState *prev)
{
	AwLease    *l;
	AwSettleMark r = AW_SETTLE_NONE;

	*prev = AW_LEASE_LIVE;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	l = aw_lease_find(key, token);
	if (l != NULL && aw_lease_settled_by_me(l))
		r = AW_SETTLE_REPEAT;
	else if (l != NULL)
	{
		/*
		 * OPEN by this backend: claimed by this transaction.  OPEN or
		 * SETTLED by another: that transaction has ended, its callback is
		 * still to run (see above), and the lease is LIVE.
		 */
		if (l->state == AW_LEASE_OPEN && l->owner_pid == MyProcPid)
			*prev = AW_LEASE_OPEN;
		l->state = AW_LEASE_SETTLED;
		l->owner_pid = MyProcPid;
		r = AW_SETTLE_MARKED;
	}
	LWLockRelease(aw_shared->lock);
	return r;
}

/*
 * A settle that marked a lease rolled back: restore the state it found.
 * Claims of the same transaction that inherited its slot were undone
 * before (newest first), so it is handed to nobody.  Never raises.
 */
void
aw_ledger_unsettle(const char *key, int64 token, AwLeaseState prev)
{
	AwLease    *l;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	l = aw_lease_find(key, token);
	if (l != NULL && aw_lease_settled_by_me(l))
	{
		Assert(!l->handed);
		l->state = prev;
		l->owner_pid = (prev == AW_LEASE_OPEN) ? MyProcPid : 0;
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * A settle of a lease committed: release it (SETTLED -> released), if it
 * still has a record.  Returns AW_RELEASE_FREED, with the topic's name in
 * topic (AW_TOPIC_MAXLEN + 1 bytes), when a slot was released -- exactly
 * once: a lease that expired, or was released before, has no record
 * (AW_RELEASE_NONE); AW_RELEASE_PASSED when the lease handed its slot to a
 * successor that still holds it.  Whoever owns the record now: a settle
 * that committed ended the lease.  Never raises.
 */
int
aw_ledger_release(const char *key, int64 token, char *topic)
{
	AwLease    *l;
	int			r = AW_RELEASE_NONE;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	l = aw_lease_find(key, token);
	if (l != NULL)
	{
		strlcpy(topic, l->topic->key.name, AW_TOPIC_MAXLEN + 1);
		r = aw_lease_remove(l) ? AW_RELEASE_FREED : AW_RELEASE_PASSED;
	}
	LWLockRelease(aw_shared->lock);
	return r;
}

/*
 * Release every lease whose end has passed, of any database: their slots
 * are free and their rows claimable.  Writes the database and topic of
 * each to out (at most max_out; call again while it returns max_out), for
 * the caller to wake one blocked claimer each.  *next receives the next
 * lease end, or 0.
 */
int
aw_ledger_expire(TimestampTz now, AwReleased *out, int max_out, TimestampTz *next)
{
	AwHeapNode *n;
	int			count = 0;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	while (count < max_out &&
		   (n = aw_heap_top(&aw_shared->lease_ends)) != NULL && n->at <= now)
	{
		AwLease    *l = (AwLease *) ((char *) n - offsetof(AwLease, end_node));

		out[count].dbid = l->key.dbid;
		strlcpy(out[count].topic, l->topic->key.name, sizeof(out[count].topic));
		aw_shared->counters.leases_expired++;
		if (aw_lease_remove(l))
			count++;			/* a hand-off's partner keeps the slot */
	}
	n = aw_heap_top(&aw_shared->lease_ends);
	*next = n ? n->at : 0;
	LWLockRelease(aw_shared->lock);
	return count;
}

/*
 * Free slots of a topic: -1 when unlimited.
 */
int32
aw_ledger_free_slots(const char *topic)
{
	AwTopic    *t;
	int32		free_slots = -1;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->cap.max_in_flight > 0)
		free_slots = (int32) Max(0, t->cap.max_in_flight - aw_topic_used(t));
	LWLockRelease(aw_shared->lock);
	return free_slots;
}

/* Is the topic limited?  The limit itself in *max_in_flight. */
bool
aw_ledger_topic_limited(const char *topic, int32 *max_in_flight)
{
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	*max_in_flight = (t != NULL) ? t->cap.max_in_flight : 0;
	LWLockRelease(aw_shared->lock);
	return *max_in_flight > 0;
}

/*
 * set_limit() of a topic, called with the topic locked exclusively: check
 * that the sum of limits with this one stays within aion_wake.max_leases,
 * and that the pool can hold the records the topic will hold (twice the
 * limit, or its n_leases live leases now when it has no limit yet and they
 * are more, or the records it holds now if more) beside those of every
 * other topic; promise both (limit_floor, hold_floor), so that concurrent
 * calls on other topics cannot oversell them; pin the topic in the table
 * until the transaction ends.  Two calls on one topic in one transaction
 * promise the larger of each.  Returns AW_LIMIT_OK, or why not.
 */
AwLimitResult
aw_ledger_limit_promise(const char *topic, int32 max_in_flight, int32 n_leases,
					 int32 *old_max)
{
	AwTopic    *t;
	AwLimitResult r = AW_LIMIT_OK;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, max_in_flight > 0);
	*old_max = t ? t->cap.max_in_flight : 0;
	if (t == NULL && max_in_flight > 0)
		r = AW_LIMIT_TOPICS_FULL;
	else if (t != NULL)
	{
		int64		hold = aw_topic_hold_with(t, max_in_flight, n_leases);

		r = aw_pool_check(t, hold, max_in_flight);
		if (r == AW_LIMIT_OK)
		{
			t->cap.limit_floor = Max(t->cap.limit_floor, max_in_flight);
			t->cap.hold_floor = Max(t->cap.hold_floor, hold);
			t->cap.limit_pins++;
			aw_topic_update_quiet(t);
		}
	}
	LWLockRelease(aw_shared->lock);
	return r;
}

/*
 * Just before the commit of a set_limit() that gives a topic its first
 * limit, its live leases were counted again, n_leases now: promise the
 * pool what they need.  Returns false when it cannot hold them.
 */
bool
aw_ledger_limit_repromise(const char *topic, int32 max_in_flight, int32 n_leases)
{
	AwTopic    *t;
	bool		ok = true;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL)
	{
		int64		hold = aw_topic_hold_with(t, max_in_flight, n_leases);

		ok = (aw_pool_check(t, hold, max_in_flight) == AW_LIMIT_OK);
		if (ok)
		{
			t->cap.hold_floor = Max(t->cap.hold_floor, hold);
			aw_topic_update_quiet(t);
		}
	}
	LWLockRelease(aw_shared->lock);
	return ok;
}

/*
 * A set_limit() ended.  With apply (its transaction committed, and it was
 * the topic's last set_limit() in it) the limit applies: a topic that had
 * none takes in the leases set_limit() found (those still live); a limit
 * removed drops the topic's lease records.  Returns how many blocked
 * claimers to wake: those the new slots can take (-1: all of them, the
 * limit is gone).  Without, only the pin is taken back.  The promise ends
 * with the transaction's last pin.  Never raises.
 */
int32
aw_ledger_limit_end(const char *topic, int32 max_in_flight, int32 old_max,
				 const AwLiveLease *leases, int32 n_leases, bool apply)
{
	AwTopic    *t;
	int32		wake = 0;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->cap.limit_pins > 0)
	{
		t->cap.limit_pins--;
		if (apply)
			wake = aw_topic_apply_limit(t, max_in_flight, leases, n_leases);
		if (t->cap.limit_pins == 0)
		{
			t->cap.limit_floor = 0;
			t->cap.hold_floor = 0;
		}
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return wake;
}

/*
 * Make max_in_flight a topic's limit (0: none), and when it had none, take
 * in its live leases (a lease whose end has passed is skipped; one the set
 * records already is kept).  Returns the claimers to wake, as above.
 * Caller holds the set lock exclusively, and has checked the pool.
 */
static int32
aw_topic_apply_limit(AwTopic *t, int32 max_in_flight, const AwLiveLease *leases,
					 int32 n_leases)
{
	TimestampTz now = GetCurrentTimestamp();
	int32		old_free;
	int32		i;

	old_free = t->cap.max_in_flight > 0 ?
		(int32) Max(0, t->cap.max_in_flight - aw_topic_used(t)) : 0;
	if (max_in_flight == 0)
	{
		while (!dlist_is_empty(&t->cap.leases))
			(void) aw_lease_remove(dlist_head_element(AwLease, topic_node, &t->cap.leases));
		t->cap.untracked = 0;
		t->cap.max_in_flight = 0;
		aw_topic_update_quiet(t);
		return -1;
	}
	if (t->cap.max_in_flight == 0)
	{
		for (i = 0; i < n_leases; i++)
		{
			if (leases[i].ends > now)
				(void) aw_lease_add(t, leases[i].key, leases[i].token, leases[i].ends,
									AW_LEASE_LIVE);
		}
	}
	t->cap.max_in_flight = max_in_flight;
	aw_topic_update_quiet(t);
	return (int32) Max(0, Max(0, t->cap.max_in_flight - aw_topic_used(t)) - old_free);
}

/*
 * Loading a database's limits from aion_wake.limits after shared memory was
 * made, or in a database made from a template (limits.c): apply one
 * topic's limit with its live leases, as at the commit of set_limit() --
 * and only if the pool can hold it, as set_limit() checks.  The caller
 * holds the topic's lock exclusively and read the limit and the leases
 * after it had it.  A topic that is limited already keeps its limit and
 * counts: a set_limit() committed it, or an earlier load, and either is at
 * least as new as what the caller read.  Returns AW_LIMIT_OK, with the
 * blocked claimers to wake in *wake, or why it was not applied.
 */
AwLimitResult
aw_ledger_limit_load(const char *topic, int32 max_in_flight, const AwLiveLease *leases,
				  int32 n_leases, int32 *wake)
{
	AwTopic    *t;
	AwLimitResult r = AW_LIMIT_TOPICS_FULL;

	*wake = 0;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, true);
	if (t != NULL && t->cap.max_in_flight > 0)
		r = AW_LIMIT_OK;
	else if (t != NULL)
	{
		r = aw_pool_check(t, aw_topic_hold_with(t, max_in_flight, n_leases),
						  max_in_flight);
		if (r == AW_LIMIT_OK)
			*wake = aw_topic_apply_limit(t, max_in_flight, leases, n_leases);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return r;
}

/*
 * Drop every limit and lease record of a database, giving its limits back
 * to the cluster-wide pool: at the commit of DROP DATABASE or DROP
 * EXTENSION (limits.c).  Never raises.
 */
void
aw_ledger_forget_limits(Oid dbid)
{
	HASH_SEQ_STATUS status;
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_topics);
	while ((t = (AwTopic *) hash_seq_search(&status)) != NULL)
	{
		if (t->key.dbid == dbid && t->cap.max_in_flight > 0)
		{
			(void) aw_topic_apply_limit(t, 0, NULL, 0);
			aw_topic_update_quiet(t);
		}
	}
	LWLockRelease(aw_shared->lock);
}

/* A claim found a limited topic whose limit is not loaded yet (status). */
void
aw_ledger_count_limit_not_loaded(void)
{
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_shared->counters.limits_not_loaded++;
	LWLockRelease(aw_shared->lock);
}

/* Lease records in use, cluster-wide (aion_wake.status). */
int64
aw_ledger_lease_count(void)
{
	int64		n;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	n = hash_get_num_entries(aw_leases);
	LWLockRelease(aw_shared->lock);
	return n;
}