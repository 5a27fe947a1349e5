/*-------------------------------------------------------------------------
 *
 * waiters.c
 *	  The waiter registry: one slot per backend, and per topic a FIFO of
 *	  the claimers blocked on it.
 *
 *	  A blocked claim registers on each of its topics (up to 64), resets its
 *	  latch, probes the table, then sleeps on its latch; so a wake that
 *	  comes between the probe and the sleep is never lost.  Wakers take
 *	  waiters from the head of the topic's FIFO, one per row that became
 *	  claimable (G7, G9).  A woken waiter does not leave its other topics'
 *	  queues: it has a ready inbox, one bit per topic it waits on, and a wake
 *	  for any of its topics sets that topic's bit, setting the waiter's
 *	  latch only on the empty to non-empty edge, so wakes for one waiter
 *	  coalesce however many of its topics become ready before it runs.  Its
 *	  next probe reads the ready topics first.  A slot is indexed by
 *	  process number and carries the pid it was registered with, so a stale
 *	  slot is never woken in place of a live backend.  A claimer that
 *	  leaves holding a wake it did not use passes it on to another waiter of
 *	  that topic.  Registering and leaving cost O(topics); a wake costs O(1)
 *	  per waiter woken, whatever the number of backends.
 *
 *	  Rows also become claimable when a fence passes (a delayed enqueue, a
 *	  back-off, an expired lease).  Nobody commits at that moment, so the
 *	  worker keeps, per topic with waiters, the next fence that could make
 *	  a row visible, and sleeps until it.  Then it counts the rows whose
 *	  fence passed since its last look at the topic (the first look counts
 *	  from the moment the topic's first waiter registered: older rows its
 *	  probe saw) and wakes that many waiters -- one per row, never one for a
 *	  row that was visible but locked before.  Writers tell the worker of
 *	  their fences at COMMIT; a transaction that commits after the worker
 *	  has looked past its fence (a fence that passed before the commit, or
 *	  while the worker was busy) wakes the waiters for its rows itself.
 *
 *	  Everything here is guarded by the waiter lock (AW_LOCK_WAITERS of the
 *	  tranche, aion_wake.c); nothing raises while holding it.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/waiters.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "aion_wake.h"
#include "aw_pulse_spend.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"

typedef struct AwWaitTopicKey
{
	Oid			dbid;
	char		name[AW_TOPIC_MAXLEN + 1];
} AwWaitTopicKey;

typedef struct AwWaitTopic
{
	AwWaitTopicKey key;			/* hash key: must be first */
	dlist_head	queue;			/* memberships not woken, oldest first */
	int			n_waiters;		/* memberships, woken or not */
	int			n_ready;		/* woken and not yet back in the queue */
	uint64		ready_gen;		/* the last readiness event of the topic */
	TimestampTz next_fence;		/* 0: unknown; DT_NOEND: none */
	TimestampTz checked_upto;	/* rows whose fence is past this are new */
	bool		checking;		/* the worker is counting them */
	TimestampTz hint_since;		/* lowest hint since the worker looked */
	uint64		events;			/* wakes and readiness events of the topic
								 * (the lost-wake detector's witness) */
} AwWaitTopic;

/* a waiter's place in the queue of one of its topics */
typedef struct AwWaitMember
{
	AwWaitTopic *topic;
	int32		slotno;			/* the waiter's slot */
	bool		queued;
	dlist_node	node;
} AwWaitMember;

typedef struct AwWaiter
{
	int			pid;			/* 0: slot free */
	/*
	 * This registration's number, 0 when not waiting.  Written under the
	 * waiter lock, read without it by the set (aw_waiter_is_registered):
	 * a topic's spender is a registration, and stops being one the moment
	 * its claimer leaves.
	 */
	pg_atomic_uint64 registration;
	int			ntopics;
	uint64		inbox;			/* bit i: members[i]'s topic is ready */
	AwWaitMember members[AW_WAIT_MAX_TOPICS];
} AwWaiter;

typedef struct AwWaitShared
{
	LWLock	   *lock;
	pg_atomic_uint32 n_waiters;
	uint64		next_ready_gen; /* numbers readiness events, all topics */
	uint64		next_registration;	/* numbers registrations, never 0 */
	int			nslots;
	AwWaiter	slots[FLEXIBLE_ARRAY_MEMBER];
} AwWaitShared;

static AwWaitShared *aw_wait = NULL;
static HTAB *aw_wait_topics = NULL;

/* each topic's events as this waiter's last rearm found them */
static uint64 aw_my_events[AW_WAIT_MAX_TOPICS];

/* one slot per PGPROC: backends, auxiliary processes, prepared xacts */
static int
aw_waiters_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/* at most every slot waiting on AW_WAIT_MAX_TOPICS topics of its own */
static long
aw_waiters_ntopics(void)
{
	return (long) aw_waiters_nslots() * AW_WAIT_MAX_TOPICS;
}

Size
aw_waiters_shmem_size(void)
{
	Size		size = add_size(offsetof(AwWaitShared, slots),
								mul_size(aw_waiters_nslots(), sizeof(AwWaiter)));

	return add_size(MAXALIGN(size),
					hash_estimate_size(aw_waiters_ntopics(), sizeof(AwWaitTopic)));
}

/* Called from shmem_startup_hook with AddinShmemInitLock held. */
void
aw_waiters_shmem_init(void)
{
	bool		found;
	HASHCTL		info;
	int			n = aw_waiters_nslots();

	aw_wait = ShmemInitStruct("aion_wake waiters",
							  add_size(offsetof(AwWaitShared, slots),
									   mul_size(n, sizeof(AwWaiter))),
							  &found);
	if (!found)
	{
		memset(aw_wait, 0, offsetof(AwWaitShared, slots) + n * sizeof(AwWaiter));
		aw_wait->lock = AW_LWLOCK(AW_LOCK_WAITERS);
		pg_atomic_init_u32(&aw_wait->n_waiters, 0);
		aw_wait->nslots = n;
		for (int i = 0; i < n; i++)
			pg_atomic_init_u64(&aw_wait->slots[i].registration, 0);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwWaitTopicKey);
	info.entrysize = sizeof(AwWaitTopic);
	aw_wait_topics = aw_shmem_init_hash("aion_wake waiting topics",
										aw_waiters_ntopics(), &info,
										HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

static AwWaitTopic *
aw_wait_topic_find(Oid dbid, const char *name, HASHACTION action)
{
	AwWaitTopicKey key;
	bool		found;
	AwWaitTopic *t;

	memset(&key, 0, sizeof(key));
	key.dbid = dbid;
	strlcpy(key.name, name, sizeof(key.name));
	t = (AwWaitTopic *) hash_search(aw_wait_topics, &key, action, &found);
	if (t != NULL && action == HASH_ENTER_NULL && !found)
	{
		dlist_init(&t->queue);
		t->n_waiters = 0;
		t->n_ready = 0;
		t->ready_gen = ++aw_wait->next_ready_gen;
		t->next_fence = 0;
		/* the registering waiter's probe sees every row visible now */
		t->checked_upto = GetCurrentTimestamp();
		t->checking = false;
		t->hint_since = DT_NOEND;
		t->events = 0;
	}
	return t;
}

/*
 * Wake up to n waiters of a topic, oldest first: take their memberships
 * off the topic's queue and set the topic's bit in their inboxes.  The
 * process numbers of those whose inbox was empty (their latch must be set)
 * go to procnos.  Slots whose backend is gone are dropped without
 * counting.  Returns the waiters woken.  Caller holds the waiter lock
 * exclusively.
 */
static int
aw_wait_topic_wake(AwWaitTopic *t, int64 n, int *procnos, int max_out, int *nprocs)
{
	int			taken = 0;

	t->events++;
	while (taken < n && *nprocs < max_out && !dlist_is_empty(&t->queue))
	{
		AwWaitMember *m = dlist_head_element(AwWaitMember, node, &t->queue);
		AwWaiter   *w = &aw_wait->slots[m->slotno];

		dlist_pop_head_node(&t->queue);
		m->queued = false;
		if (GetPGProcByNumber(m->slotno)->pid != w->pid)
			continue;			/* stale: its backend is gone */
		t->n_ready++;
		if (w->inbox == 0)
			procnos[(*nprocs)++] = m->slotno;
		w->inbox |= UINT64CONST(1) << (m - w->members);
		taken++;
	}
	return taken;
}

static void
aw_wake_procs(const int *procnos, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		SetLatch(&GetPGProcByNumber(procnos[i])->procLatch);
}

/*
 * Register this backend as waiting on topics (1 to AW_WAIT_MAX_TOPICS,
 * distinct).  The first waiter of a topic whose next fence is unknown asks
 * the worker to find it.
 */
void
aw_waiter_register(char **topics, int ntopics)
{
	AwWaiter   *w = &aw_wait->slots[AW_MY_PROCNO];
	bool		ask_worker = false;
	int			i;

	Assert(ntopics >= 1 && ntopics <= AW_WAIT_MAX_TOPICS);
	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	w->pid = MyProcPid;
	w->ntopics = ntopics;
	w->inbox = 0;
	pg_atomic_write_u64(&w->registration, ++aw_wait->next_registration);
	for (i = 0; i < ntopics; i++)
	{
		AwWaitMember *m = &w->members[i];
		AwWaitTopic *t = aw_wait_topic_find(MyDatabaseId, topics[i], HASH_ENTER_NULL);

		Assert(t != NULL);		/* sized for every slot on its maximum */
		m->topic = t;
		m->slotno = AW_MY_PROCNO;
		m->queued = true;
		dlist_push_tail(&t->queue, &m->node);
		t->n_waiters++;
		ask_worker |= (t->next_fence == 0);
	}
	pg_atomic_fetch_add_u32(&aw_wait->n_waiters, 1);
	LWLockRelease(aw_wait->lock);

	if (ask_worker)
		aw_wake_worker(MyDatabaseId);
}

/*
 * Before each probe: empty the inbox and queue again, at the head, where a
 * wake took this waiter off a topic's queue (a woken waiter that is still
 * waiting keeps its place in line).  Returns the inbox as it was: bit i
 * set when the i-th topic registered became ready, which the probe reads
 * first.  A wake after this is kept in the inbox and on the latch.
 */
uint64
aw_waiter_rearm(void)
{
	AwWaiter   *w = &aw_wait->slots[AW_MY_PROCNO];
	uint64		ready;
	int			i;

	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	ready = w->inbox;
	for (i = 0; i < w->ntopics; i++)
	{
		AwWaitMember *m = &w->members[i];

		if (ready & (UINT64CONST(1) << i))
			m->topic->n_ready--;
		aw_my_events[i] = m->topic->events;
		if (!m->queued)
		{
			dlist_push_head(&m->topic->queue, &m->node);
			m->queued = true;
		}
	}
	w->inbox = 0;
	LWLockRelease(aw_wait->lock);
	return ready;
}

/*
 * Leave the registry: at the end of the wait, on error, on cancel and at
 * exit.  The wakes of the topics in the inbox (they came after the last
 * probe) and of the topics in unused (woken before it, but the probe took
 * none of their rows) are each passed to the next waiter of the topic.
 * Pulse slots this claimer was made the spender of are not a wake: the
 * caller gives them back to the set (aw_set_spender_release).  Never
 * raises.
 */
void
aw_waiter_leave(uint64 unused)
{
	AwWaiter   *w = &aw_wait->slots[AW_MY_PROCNO];
	int			procnos[AW_WAIT_MAX_TOPICS];
	int			nprocs = 0;
	int			i;

	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	if (w->pid != MyProcPid)
	{
		LWLockRelease(aw_wait->lock);
		return;
	}
	for (i = 0; i < w->ntopics; i++)
	{
		AwWaitMember *m = &w->members[i];
		AwWaitTopic *t = m->topic;
		uint64		bit = UINT64CONST(1) << i;

		if (m->queued)
			dlist_delete(&m->node);
		m->queued = false;
		if (w->inbox & bit)
			t->n_ready--;
		if ((w->inbox | unused) & bit)
			(void) aw_wait_topic_wake(t, 1, procnos, lengthof(procnos), &nprocs);
		if (--t->n_waiters == 0)
			hash_search(aw_wait_topics, &t->key, HASH_REMOVE, NULL);
	}
	w->pid = 0;
	w->ntopics = 0;
	w->inbox = 0;
	/* a full barrier: from here on the set sees this claimer as gone */
	(void) pg_atomic_exchange_u64(&w->registration, 0);
	pg_atomic_fetch_sub_u32(&aw_wait->n_waiters, 1);
	LWLockRelease(aw_wait->lock);
	aw_wake_procs(procnos, nprocs);
}

/* Is anybody waiting at all?  Read without the lock (see aw_waiters_wake). */
static inline bool
aw_anyone_waits(void)
{
	if (aw_wait == NULL)
		return false;
	pg_memory_barrier();
	return pg_atomic_read_u32(&aw_wait->n_waiters) > 0;
}

/*
 * rows rows of a topic became claimable (at the COMMIT that made them so):
 * wake that many waiters, and return how many were woken.  A waiter
 * registers before it probes, and the rows are visible before this runs,
 * so a waiter this misses because the count read zero will see the rows in
 * its probe.
 */
static int64 aw_waiters_wake_some(Oid dbid, const char *topic, int64 rows, bool ready);

int64
aw_waiters_wake(Oid dbid, const char *topic, int64 rows)
{
	return aw_waiters_wake_some(dbid, topic, rows, true);
}

/*
 * n starts of a topic's rate (or its pause's end) became possible: wake
 * that many waiters, as aw_waiters_wake does, but count no readiness event
 * (no row became claimable).  A claim that gives starts back unused wakes
 * claimers only after a readiness event since it looked (limits.c); were
 * these wakes one, two waiters and the worker could wake one another
 * without end while no row is claimable (finding R-F5 of
 * test/model/aion_wake_rates.pml).
 */
int64
aw_waiters_wake_starts(Oid dbid, const char *topic, int64 n)
{
	return aw_waiters_wake_some(dbid, topic, n, false);
}

static int64
aw_waiters_wake_some(Oid dbid, const char *topic, int64 rows, bool ready)
{
	int			procnos[64];
	int			nprocs;
	int64		woken = 0;
	AwWaitTopic *t;

	if (rows <= 0 || !aw_anyone_waits())
		return 0;
	/* the test hook of the lost-wake detector (test/t/046_lost_wake.pl) */
	if (unlikely(aw_debug_drop_wakes))
		return 0;
	for (;;)
	{
		int			n = 0;

		nprocs = 0;
		LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
		t = aw_wait_topic_find(dbid, topic, HASH_FIND);
		if (t != NULL)
		{
			if (ready)
				t->ready_gen = ++aw_wait->next_ready_gen;
			n = aw_wait_topic_wake(t, rows, procnos, lengthof(procnos), &nprocs);
		}
		LWLockRelease(aw_wait->lock);
		aw_wake_procs(procnos, nprocs);
		woken += n;
		rows -= n;
		/* stop when the queue ran dry, or every wake asked for went out */
		if (rows <= 0 || nprocs < (int) lengthof(procnos))
			break;
	}
	return woken;
}

/*
 * Wake every waiter of a database, each once (a wake that cannot say which
 * topics became ready: every waiter probes).  Never raises.
 */
void
aw_waiters_wake_database(Oid dbid)
{
	HASH_SEQ_STATUS status;
	AwWaitTopic *t;
	int		   *procnos;
	int			nprocs = 0;

	if (!aw_anyone_waits())
		return;
	procnos = palloc_extended(sizeof(int) * aw_wait->nslots, MCXT_ALLOC_NO_OOM);
	if (procnos == NULL)
		return;
	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_wait_topics);
	while ((t = (AwWaitTopic *) hash_seq_search(&status)) != NULL)
	{
		if (t->key.dbid != dbid)
			continue;
		t->ready_gen = ++aw_wait->next_ready_gen;
		(void) aw_wait_topic_wake(t, PG_INT64_MAX, procnos, aw_wait->nslots, &nprocs);
	}
	LWLockRelease(aw_wait->lock);
	aw_wake_procs(procnos, nprocs);
	pfree(procnos);
}

/*
 * Rows of a topic became claimable, and wakes for them may be held back by
 * the topic's limit: record a readiness event without waking anyone.
 */
void
aw_waiters_mark_ready(Oid dbid, const char *topic)
{
	AwWaitTopic *t;

	if (!aw_anyone_waits())
		return;
	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	t = aw_wait_topic_find(dbid, topic, HASH_FIND);
	if (t != NULL)
		t->ready_gen = ++aw_wait->next_ready_gen;
	LWLockRelease(aw_wait->lock);
}

/*
 * The number of the last readiness event of a topic (rows made claimable,
 * slots released) while claimers wait on it, or 0 when none waits.  A
 * claim that returns reserved slots unused compares it with the value it
 * read before it looked: a change means a blocked claimer may have found
 * no slot for a row the claim did not see, and must be woken
 * (doc/design.md, Wake rules: 3).  Numbers are never reused.
 */
uint64
aw_waiters_ready_gen(Oid dbid, const char *topic)
{
	AwWaitTopic *t;
	uint64		gen;

	if (!aw_anyone_waits())
		return 0;
	LWLockAcquire(aw_wait->lock, LW_SHARED);
	t = aw_wait_topic_find(dbid, topic, HASH_FIND);
	gen = t ? t->ready_gen : 0;
	LWLockRelease(aw_wait->lock);
	return gen;
}

/*
 * Is this registration (a number aw_waiter_register gave) still waiting?
 * Read without the waiter lock, so that the set can ask under its own.
 */
bool
aw_waiter_is_registered(int procno, uint64 registration)
{
	return registration != 0 && procno >= 0 && procno < aw_wait->nslots &&
		pg_atomic_read_u64(&aw_wait->slots[procno].registration) == registration;
}

/*
 * A topic's pulse slots (or due entries) wait to be spent: make sure
 * exactly one process spends them (doc/design.md, Where pulses come from,
 * and who spends them).  If a claimer is their spender already, it spends
 * them or gives them back when it finishes.  Else one claimer blocked on
 * the topic becomes the spender, recorded on the topic in the set before
 * its latch is set, so it spends them in its own probe and claims what
 * they move -- which saves the worker's transaction and a process wake-up
 * between a freed slot and a claimed row -- and the worker leaves the
 * topic alone.  The two locks are never held together: a claimer that left
 * between its wake and the record is no longer registered, and the next
 * waiter is tried.  Returns false when the worker is the spender (nobody
 * waits): the caller wakes it.  Never raises.
 */
bool
aw_waiters_wake_spender(Oid dbid, const char *topic)
{
	int			tries;

	for (tries = 0; tries < 4; tries++)
	{
		AwWaitTopic *t;
		int			procno = -1;
		uint64		registration = 0;

		if (aw_set_spender_active(topic))
			return true;
		if (!aw_anyone_waits())
			return false;
		LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
		t = aw_wait_topic_find(dbid, topic, HASH_FIND);
		if (t != NULL)
			t->events++;
		/* as aw_wait_topic_wake, for one waiter whose latch is set below */
		while (t != NULL && !dlist_is_empty(&t->queue))
		{
			AwWaitMember *m = dlist_head_element(AwWaitMember, node, &t->queue);
			AwWaiter   *w = &aw_wait->slots[m->slotno];

			dlist_pop_head_node(&t->queue);
			m->queued = false;
			if (GetPGProcByNumber(m->slotno)->pid != w->pid)
				continue;		/* stale: its backend is gone */
			t->n_ready++;
			w->inbox |= UINT64CONST(1) << (m - w->members);
			procno = m->slotno;
			registration = pg_atomic_read_u64(&w->registration);
			break;
		}
		LWLockRelease(aw_wait->lock);
		if (procno < 0)
			return false;
		if (aw_set_spender_hand(topic, procno, registration))
		{
			/*
			 * Even if its inbox held a wake already: it may have read that
			 * one before the record, and must probe again.
			 */
			aw_wake_procs(&procno, 1);
			return true;
		}
		/* it left in between, passing the wake on: give the next a turn */
	}
	return false;
}

/*
 * Act on what a set operation left to be woken (aw_parked_set.h, aw_pulse_spend.h): slots of a
 * topic to spend go to their spender (aw_waiters_wake_spender), or, when
 * nobody waits, to the worker.  Never raises.
 */
void
aw_waiters_wake_for(AwWake wake, Oid dbid, const char *topic)
{
	if (wake == AW_WAKE_SPENDER && aw_waiters_wake_spender(dbid, topic))
		return;
	if (wake != AW_WAKE_NONE)
		aw_wake_worker(dbid);
}

/*
 * rows rows of a topic were given fences, the earliest of them fence, by a
 * transaction that has just committed.  If the worker is looking at the
 * topic now, or has looked past that fence already, it will not count
 * them: wake as many waiters here.  Otherwise, if the fence is earlier
 * than the next one the worker knows of, lower that and wake the worker so
 * it sleeps until the new one.  In a database no worker serves, wake one
 * waiter instead, which then sleeps no longer than the fence.
 */
void
aw_waiters_fence_hint(Oid dbid, const char *topic, TimestampTz fence, int64 rows)
{
	AwWaitTopic *t;
	bool		lowered = false;
	int64		now_ready = 0;
	int			procno;
	int			n = 0;

	if (!aw_anyone_waits())
		return;
	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	t = aw_wait_topic_find(dbid, topic, HASH_FIND);
	if (t != NULL && aw_worker_slot_for(dbid) == NULL)
	{
		/* no worker: wake one waiter to shorten its own sleep to the fence */
		(void) aw_wait_topic_wake(t, 1, &procno, 1, &n);
	}
	else if (t != NULL && (t->checking || fence <= t->checked_upto))
		now_ready = rows;
	else if (t != NULL)
	{
		if (fence < t->hint_since)
			t->hint_since = fence;
		if (t->next_fence != 0 && fence < t->next_fence)
		{
			t->next_fence = fence;
			lowered = true;
		}
	}
	LWLockRelease(aw_wait->lock);
	aw_wake_procs(&procno, n);
	if (now_ready > 0)
		aw_waiters_wake(dbid, topic, now_ready);
	if (lowered)
		aw_wake_worker(dbid);
}

/*
 * The worker: topics of its database with waiters whose next fence is
 * unknown or has passed, at most max_out of them, with the time since
 * which rows are new and the number of waiters of each (how many rows are
 * worth counting).  Starts a new hint window for each.
 */
int
aw_waiters_due_fences(TimestampTz now, AwFenceCheck *out, int max_out)
{
	HASH_SEQ_STATUS status;
	AwWaitTopic *t;
	int			n = 0;

	if (!aw_anyone_waits())
		return 0;
	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_wait_topics);
	while ((t = (AwWaitTopic *) hash_seq_search(&status)) != NULL)
	{
		if (t->key.dbid != MyDatabaseId ||
			(t->next_fence != 0 && t->next_fence > now))
			continue;
		strlcpy(out[n].topic, t->key.name, sizeof(out[n].topic));
		out[n].checked_upto = t->checked_upto;
		out[n].waiters = t->n_waiters;
		t->checking = true;
		t->hint_since = DT_NOEND;
		if (++n >= max_out)
		{
			hash_seq_term(&status);
			break;
		}
	}
	LWLockRelease(aw_wait->lock);
	return n;
}

/*
 * The worker looked at a topic: visible_rows rows became claimable between
 * the last look and upto (counted up to the number of waiters), and
 * next_fence (DT_NOEND for none) is the next fence ahead.  Wake that many
 * waiters.  A hint that came in while it looked still counts.
 */
void
aw_waiters_fence_result(const char *topic, TimestampTz upto, int64 visible_rows,
						TimestampTz next_fence)
{
	AwWaitTopic *t;

	LWLockAcquire(aw_wait->lock, LW_EXCLUSIVE);
	t = aw_wait_topic_find(MyDatabaseId, topic, HASH_FIND);
	if (t != NULL)
	{
		t->next_fence = Min(next_fence, t->hint_since);
		t->checked_upto = upto;
		t->checking = false;
	}
	LWLockRelease(aw_wait->lock);
	aw_waiters_wake(MyDatabaseId, topic, visible_rows);
}

/* The worker: the earliest known next fence of its topics, or 0. */
TimestampTz
aw_waiters_next_fence(void)
{
	HASH_SEQ_STATUS status;
	AwWaitTopic *t;
	TimestampTz next = 0;

	if (!aw_anyone_waits())
		return 0;
	LWLockAcquire(aw_wait->lock, LW_SHARED);
	hash_seq_init(&status, aw_wait_topics);
	while ((t = (AwWaitTopic *) hash_seq_search(&status)) != NULL)
	{
		if (t->key.dbid != MyDatabaseId || t->next_fence == 0 || t->next_fence == DT_NOEND)
			continue;
		if (next == 0 || t->next_fence < next)
			next = t->next_fence;
	}
	LWLockRelease(aw_wait->lock);
	return next;
}

/*
 * The lost-wake detector (claim_wait.c): this waiter's last rearm found
 * the events of its topics as they are in the array returned; the caller
 * keeps a copy from one rearm to the next.
 */
const uint64 *
aw_waiter_events(void)
{
	return aw_my_events;
}

/*
 * The lost-wake detector: was a row of this waiter's i-th topic, whose
 * fence is fence, left without a wake?  True when no wake or readiness
 * event of the topic happened since the rearm that found events_before
 * (nobody was told of the row: not this waiter, not another one that
 * will take it shortly), and the row is not one the worker is still to
 * look at: a fence that passed while the worker is counting the topic, or
 * one past its last look with its next look due at or before it (a fence
 * in the future at the commit that wrote it: the worker wakes for it, and
 * may be late).  A row made claimable by a commit after its fence passed
 * is the committer's to wake for, at once.
 */
bool
aw_waiter_wake_missed(int i, uint64 events_before, TimestampTz fence)
{
	AwWaiter   *w = &aw_wait->slots[AW_MY_PROCNO];
	bool		missed = false;

	LWLockAcquire(aw_wait->lock, LW_SHARED);
	if (w->pid == MyProcPid && i < w->ntopics)
	{
		AwWaitTopic *t = w->members[i].topic;

		bool		worker_due = t->checking ||
			(t->checked_upto < fence && (t->next_fence == 0 || t->next_fence <= fence));

		missed = (t->events == events_before && !worker_due);
	}
	LWLockRelease(aw_wait->lock);
	return missed;
}

int
aw_waiters_total(void)
{
	return aw_wait ? (int) pg_atomic_read_u32(&aw_wait->n_waiters) : 0;
}

int
aw_waiters_of_topic(Oid dbid, const char *topic)
{
	AwWaitTopic *t;
	int			n;

	LWLockAcquire(aw_wait->lock, LW_SHARED);
	t = aw_wait_topic_find(dbid, topic, HASH_FIND);
	n = t ? t->n_waiters : 0;
	LWLockRelease(aw_wait->lock);
	return n;
}
