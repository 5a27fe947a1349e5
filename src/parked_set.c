/*-------------------------------------------------------------------------
 *
 * parked_set.c
 *	  The parked set in shared memory: entries, topics, lists and the fence
 *	  heap, and every operation that changes them.
 *
 *	  All state lives in the main shared memory segment, sized once from
 *	  aion_wake.max_parked_rows and aion_wake.max_topics, so nothing here can
 *	  grow: a full set or topic table is reported to the caller, who falls
 *	  back to the durable fence.  Entries live in a fixed-size dynahash keyed
 *	  by (database, kind, dispatch key); each sits on exactly one list of its
 *	  topic according to its state, so taking k rows costs O(k) whatever the
 *	  size of the set.  Confirmed fenced entries are also kept in a min-heap
 *	  ordered by fence, so expiry costs O(log n).
 *
 *	  Every public function takes the set lock itself; functions that expect
 *	  the caller to hold it say so.  Nothing here raises an error while the
 *	  lock is held, so the COMMIT callbacks may call into this file; and
 *	  nothing here wakes anyone: an operation that leaves work for a blocked
 *	  claimer or the worker returns an AwWake, and the caller wakes them
 *	  once the lock is released.
 *
 *	  Everything here is guarded by the set lock (AW_LOCK_SET; the
 *	  inventory of every lock is in aion_wake.c, beside the request).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/parked_set.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "aion_wake.h"
#include "aw_compat.h"
#include "aw_fence_heap.h"
#include "aw_set.h"
#include "aw_settings.h"
#include "aw_waiters.h"

/* first delay before a re-offer that found its row locked is retried */
#define AW_RETRY_MIN_MS 5

#define AW_NUM_KINDS 2

/*
 * Life of an entry.  PENDING: its fence is not yet committed; a wake is only
 * recorded on it.  CONFIRMED: waiting in its topic's FIFO for a pulse.  DUE:
 * holding a slot, either woken while pending or found locked by a re-offer
 * (then retried at retry_at); re-offered without spending another slot.
 * IN_FLIGHT: taken by a re-offer round that has not settled yet.
 */
typedef enum AwState
{
	AW_PENDING = 0,
	AW_CONFIRMED,
	AW_DUE,
	AW_IN_FLIGHT
} AwState;

typedef struct AwKey
{
	Oid			dbid;
	int32		kind;			/* AwKind */
	char		key[AW_KEY_MAXLEN + 1];
} AwKey;

typedef struct AwTopicKey
{
	Oid			dbid;
	char		name[AW_TOPIC_MAXLEN + 1];
} AwTopicKey;

typedef struct AwTopic
{
	AwTopicKey	key;			/* hash key: must be first */
	dlist_head	pending[AW_NUM_KINDS];	/* oldest park first */
	dlist_head	confirmed[AW_NUM_KINDS];	/* oldest parked_at first */
	dlist_head	due;			/* FENCED entries holding a slot */
	int64		n_entries;		/* entries of any kind and state */
	uint64		slots;			/* pulse slots not yet spent (saturating) */
	uint64		credit;			/* slots left over by a pulse */
	TimestampTz credit_until;	/* ... usable by parks confirming before */
	bool		in_work;		/* linked into AwShared.work */
	dlist_node	work_node;
	bool		quiet;			/* linked into AwShared.quiet */
	dlist_node	quiet_node;
	uint64		pulses;			/* per-topic counters */
	uint64		reoffered;
	/*
	 * The spender of the topic's slots and due entries: a blocked claimer
	 * they were handed to (its process number and waiter registration), or
	 * none (spender_registration 0, or a registration that has left): the
	 * worker.  Only the spender takes them (aw_take_topic).
	 */
	int32		spender_procno;
	uint64		spender_registration;
	uint64		spender_hand;	/* the hand that made it the spender */
	/* known capacity (G8); a limited topic is never recycled */
	int32		max_in_flight;	/* 0: unlimited */
	int32		reserved;		/* slots claims in progress reserved */
	int32		n_leases;		/* lease records: live leases */
	int32		untracked;		/* live leases the pool had no room for */
	int32		handoffs;		/* slots two leases of a hand-off share */
	int32		handing;		/* reservations that share a lease's slot */
	TimestampTz untracked_until;	/* ... released together at this time */
	int32		limit_pins;		/* set_limit() calls not yet ended */
	int32		limit_floor;	/* the largest limit they set (while pinned) */
	int64		hold_floor;		/* records they promised (while pinned) */
	int32		limit_held;		/* of the sum of limits: max_in_flight, or
								 * limit_floor if larger */
	int64		pool_held;		/* records of the pool it holds (aw_topic_hold) */
	dlist_head	leases;			/* its lease records */
} AwTopic;

typedef struct AwEntry
{
	AwKey		key;			/* hash key: must be first */
	AwTopic    *topic;
	int32		attempt;
	int32		state;			/* AwState */
	bool		woken;			/* a wake came while pending */
	int32		owner_procno;	/* pending or in flight: whose; else -1 */
	int32		owner_pid;
	TimestampTz parked_at;
	TimestampTz fence;			/* FENCED only; 0 for UNFENCED */
	TimestampTz confirmed_at;
	uint64		generation;		/* unique per park, never reused */
	uint64		seq;			/* tie-break for "oldest first" */
	TimestampTz retry_at;		/* DUE after a re-offer found the row locked */
	int32		retries;
	AwHeapNode	fence_node;		/* in AwShared.fences: CONFIRMED FENCED */
	dlist_node	list_node;		/* pending, confirmed or due list */
	dlist_node	age_node;		/* AwShared.unfenced_age (UNFENCED confirmed) */
} AwEntry;

/*
 * The record of a live lease of a limited topic, from the claim that took
 * it until it is released (see "the ledger" below for its states).  Keyed
 * by row and token: a row settled and claimed again by one transaction has
 * two leases until that transaction ends.
 */
typedef struct AwLeaseKey
{
	Oid			dbid;
	char		key[AW_KEY_MAXLEN + 1];
	int64		token;			/* the claim's lease_token */
} AwLeaseKey;

typedef struct AwLease
{
	AwLeaseKey	key;			/* hash key: must be first */
	AwTopic    *topic;
	TimestampTz ends;
	AwLeaseState state;
	int32		owner_pid;		/* OPEN: the claimer; SETTLED: the settler */
	bool		handed;			/* SETTLED, its slot passed to a successor */
	bool		handing;		/* SETTLED, a slot reserved for its successor
								 * shares its slot (aw_set_reserve_handed) */
	struct AwLease *partner;	/* the other lease of a hand-off pair */
	AwHeapNode	end_node;		/* in AwShared.lease_ends */
	dlist_node	topic_node;		/* in its topic's leases */
} AwLease;

/* records in the lease pool: three per slot (see "the ledger") */
#define AW_LEASE_RECORDS (3 * aw_max_leases)

typedef struct AwShared
{
	LWLock	   *lock;			/* guards everything here */
	uint64		next_generation;
	uint64		next_seq;
	uint64		next_hand;		/* numbers hands of slots to a claimer */
	AwCounters	counters;
	dlist_head	work;			/* topics with slots or due entries */
	dlist_head	quiet;			/* topics with no entry, slot or work, the
								 * one quiet longest first: what a full
								 * topic table recycles */
	dlist_head	unfenced_age;	/* UNFENCED confirmed, oldest confirm first */
	AwHeap		fences;			/* CONFIRMED FENCED entries by fence */
	AwHeap		lease_ends;		/* lease records by end */
	int64		limits_held;	/* the limit_held of every topic */
	int64		pool_held;		/* the pool_held of every topic */
} AwShared;

static AwShared *aw_shared = NULL;
static HTAB *aw_entries = NULL;
static HTAB *aw_topics = NULL;
static HTAB *aw_leases = NULL;

/* "Oldest first" order: earliest parked_at, ties by sequence number. */
static inline bool
aw_entry_older(const AwEntry *a, const AwEntry *b)
{
	return a->parked_at < b->parked_at ||
		(a->parked_at == b->parked_at && a->seq < b->seq);
}

static void aw_entry_unlink(AwEntry *e);
static void aw_entry_link(AwEntry *e, AwState state);
static void aw_entry_set_state(AwEntry *e, AwState state);
static void aw_topic_add_slots(AwTopic *t, uint64 slots);
static int32 aw_topic_apply_limit(AwTopic *t, int32 max_in_flight,
								  const AwLiveLease *leases, int32 n_leases);
static void aw_topic_update_quiet(AwTopic *t);
static void aw_topic_pool_sync(AwTopic *t);

/*
 * Bytes of shared memory needed for the set, requested by aion_wake.c in
 * shmem_request_hook.
 */
Size
aw_set_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(sizeof(AwShared));
	size = add_size(size, MAXALIGN(mul_size(aw_max_parked_rows, sizeof(AwHeapNode *))));
	size = add_size(size, hash_estimate_size(aw_max_parked_rows, sizeof(AwEntry)));
	size = add_size(size, hash_estimate_size(aw_max_topics, sizeof(AwTopic)));
	size = add_size(size, MAXALIGN(mul_size(AW_LEASE_RECORDS, sizeof(AwHeapNode *))));
	size = add_size(size, hash_estimate_size(AW_LEASE_RECORDS, sizeof(AwLease)));
	return size;
}

/*
 * Attach to (or create) the set.  Called from shmem_startup_hook with
 * AddinShmemInitLock held.  After a crash-restart the segment is new and the
 * set comes back empty; the worker rebuilds it from the table.
 */
void
aw_set_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	aw_shared = ShmemInitStruct("aion_wake state",
								MAXALIGN(sizeof(AwShared)) +
								MAXALIGN(mul_size(aw_max_parked_rows, sizeof(AwHeapNode *))) +
								MAXALIGN(mul_size(AW_LEASE_RECORDS, sizeof(AwHeapNode *))),
								&found);
	if (!found)
	{
		memset(aw_shared, 0, sizeof(AwShared));
		aw_shared->lock = AW_LWLOCK(AW_LOCK_SET);
		aw_shared->next_generation = 1;
		aw_shared->next_seq = 1;
		dlist_init(&aw_shared->work);
		dlist_init(&aw_shared->quiet);
		dlist_init(&aw_shared->unfenced_age);
		aw_heap_init(&aw_shared->fences,
					 (AwHeapNode **) ((char *) aw_shared + MAXALIGN(sizeof(AwShared))),
					 aw_max_parked_rows);
		aw_heap_init(&aw_shared->lease_ends,
					 (AwHeapNode **) ((char *) aw_shared + MAXALIGN(sizeof(AwShared)) +
									  MAXALIGN(mul_size(aw_max_parked_rows, sizeof(AwHeapNode *)))),
					 AW_LEASE_RECORDS);
	}

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwKey);
	info.entrysize = sizeof(AwEntry);
	aw_entries = aw_shmem_init_hash("aion_wake parked set",
									aw_max_parked_rows, &info,
									HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwTopicKey);
	info.entrysize = sizeof(AwTopic);
	aw_topics = aw_shmem_init_hash("aion_wake topics",
								   aw_max_topics, &info,
								   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwLeaseKey);
	info.entrysize = sizeof(AwLease);
	aw_leases = aw_shmem_init_hash("aion_wake leases",
								   AW_LEASE_RECORDS, &info,
								   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

/* Is the set there?  Not when the library was loaded without preloading. */
bool
aw_set_attached(void)
{
	return aw_shared != NULL;
}

/* The confirmed fenced entry with the earliest fence, or NULL. */
static AwEntry *
aw_fence_top(void)
{
	AwHeapNode *n = aw_heap_top(&aw_shared->fences);

	return n ? (AwEntry *) ((char *) n - offsetof(AwEntry, fence_node)) : NULL;
}

/* ---------------------------------------------------------------------
 * Topics and entries.  Caller must hold the set lock exclusively.
 * ---------------------------------------------------------------------
 */

/*
 * Keep a topic on the quiet list exactly while nothing in the set refers to
 * it: no entry, no unspent slot, not on the work list, no limit, lease or
 * record of the pool.  The list is in the order topics fell quiet, so its
 * head is the first to recycle.  Every change to a topic's leases ends
 * here, so its share of the lease pool is brought up to date here too.
 */
static void
aw_topic_update_quiet(AwTopic *t)
{
	bool		quiet;

	aw_topic_pool_sync(t);
	quiet = (t->n_entries == 0 && t->slots == 0 && !t->in_work &&
			 t->max_in_flight == 0 && t->reserved == 0 &&
			 t->n_leases == 0 && t->untracked == 0 &&
			 t->limit_pins == 0 && t->pool_held == 0);

	if (quiet == t->quiet)
		return;
	if (quiet)
		dlist_push_tail(&aw_shared->quiet, &t->quiet_node);
	else
		dlist_delete(&t->quiet_node);
	t->quiet = quiet;
}

/* Change a topic's entry count. */
static inline void
aw_topic_count_entries(AwTopic *t, int delta)
{
	t->n_entries += delta;
	aw_topic_update_quiet(t);
}

/*
 * Find a topic of a database; with create, make it, recycling the topic
 * that has been quiet longest if the table is full.  A quiet topic whose
 * pulse credit is still live is not recycled, and since credits are given
 * in the order topics go quiet (aw_take_topic moves a topic it credits to
 * the tail), if the head's credit is live every quiet topic's is: the table
 * is full, found in O(1).  Returns NULL when not found, or when the table
 * is full.  Never raises.
 */
static AwTopic *
aw_topic_find(Oid dbid, const char *name, bool create)
{
	AwTopicKey	key;
	AwTopic    *t;
	bool		found;
	int			k;

	memset(&key, 0, sizeof(key));
	key.dbid = dbid;
	strlcpy(key.name, name, sizeof(key.name));

	if (!create)
		return (AwTopic *) hash_search(aw_topics, &key, HASH_FIND, NULL);

	t = (AwTopic *) hash_search(aw_topics, &key, HASH_ENTER_NULL, &found);
	if (t == NULL)
	{
		AwTopic    *victim;

		if (dlist_is_empty(&aw_shared->quiet))
			return NULL;
		victim = dlist_head_element(AwTopic, quiet_node, &aw_shared->quiet);
		if (victim->credit > 0 && victim->credit_until > GetCurrentTimestamp())
			return NULL;
		dlist_delete(&victim->quiet_node);
		hash_search(aw_topics, &victim->key, HASH_REMOVE, NULL);
		t = (AwTopic *) hash_search(aw_topics, &key, HASH_ENTER_NULL, &found);
		if (t == NULL)
			return NULL;
	}
	if (!found)
	{
		for (k = 0; k < AW_NUM_KINDS; k++)
		{
			dlist_init(&t->pending[k]);
			dlist_init(&t->confirmed[k]);
		}
		dlist_init(&t->due);
		t->n_entries = 0;
		t->slots = 0;
		t->credit = 0;
		t->credit_until = 0;
		t->in_work = false;
		t->quiet = false;
		t->pulses = 0;
		t->reoffered = 0;
		t->spender_procno = -1;
		t->spender_registration = 0;
		t->spender_hand = 0;
		t->max_in_flight = 0;
		t->reserved = 0;
		t->n_leases = 0;
		t->untracked = 0;
		t->untracked_until = 0;
		t->handoffs = 0;
		t->handing = 0;
		t->limit_pins = 0;
		t->limit_floor = 0;
		t->hold_floor = 0;
		t->limit_held = 0;
		t->pool_held = 0;
		dlist_init(&t->leases);
		aw_topic_update_quiet(t);
	}
	return t;
}

/* Put a topic on the work list the worker drains. */
static void
aw_topic_mark_work(AwTopic *t)
{
	if (!t->in_work)
	{
		dlist_push_tail(&aw_shared->work, &t->work_node);
		t->in_work = true;
		aw_topic_update_quiet(t);
	}
}

/* Add unspent slots to a topic's pulse counter; it saturates. */
static void
aw_topic_add_slots(AwTopic *t, uint64 slots)
{
	if (slots == 0)
		return;
	t->slots = (t->slots > PG_UINT64_MAX - slots) ? PG_UINT64_MAX : t->slots + slots;
	aw_topic_mark_work(t);
}

/* Build a hash key; the padding is zeroed because keys are hashed as blobs. */
static inline void
aw_key_init(AwKey *k, Oid dbid, AwKind kind, const char *key)
{
	memset(k, 0, sizeof(*k));
	k->dbid = dbid;
	k->kind = kind;
	strlcpy(k->key, key, sizeof(k->key));
}

static AwEntry *
aw_entry_find(Oid dbid, AwKind kind, const char *key)
{
	AwKey		k;

	aw_key_init(&k, dbid, kind, key);
	return (AwEntry *) hash_search(aw_entries, &k, HASH_FIND, NULL);
}

/*
 * Find or make the entry of a key of this database; NULL when the set is
 * full.  A new entry has only its key set.  Caller holds the set lock.
 */
static AwEntry *
aw_entry_enter(AwKind kind, const char *key, bool *found)
{
	AwKey		k;

	aw_key_init(&k, MyDatabaseId, kind, key);
	return (AwEntry *) hash_search(aw_entries, &k, HASH_ENTER_NULL, found);
}

/*
 * Take an entry off whatever list its state put it on, and out of the
 * gauges.  The entry keeps its state field; aw_entry_link sets a new one.
 */
static void
aw_entry_unlink(AwEntry *e)
{
	switch ((AwState) e->state)
	{
		case AW_PENDING:
			dlist_delete(&e->list_node);
			aw_shared->counters.parked_pending--;
			return;
		case AW_CONFIRMED:
			dlist_delete(&e->list_node);
			if (e->fence_node.index >= 0)
				aw_heap_remove(&aw_shared->fences, &e->fence_node);
			if (e->key.kind == AW_KIND_UNFENCED)
				dlist_delete(&e->age_node);
			break;
		case AW_DUE:
			dlist_delete(&e->list_node);
			break;
		case AW_IN_FLIGHT:
			break;
	}
	aw_shared->counters.parked_confirmed--;
}

/*
 * Put an entry on the list of its new state.  Confirmed entries are kept in
 * parked_at order (ties by sequence); a confirm almost always belongs at the
 * tail, so the search walks back from there, and the worker's rebuild adds
 * entries newest first, each older than the head: O(1) either way.
 */
static void
aw_entry_link(AwEntry *e, AwState state)
{
	AwTopic    *t = e->topic;
	int			kind = e->key.kind;

	e->state = state;
	switch (state)
	{
		case AW_PENDING:
			dlist_push_tail(&t->pending[kind], &e->list_node);
			aw_shared->counters.parked_pending++;
			return;
		case AW_CONFIRMED:
			{
				dlist_head *head = &t->confirmed[kind];
				dlist_node *pos = NULL;

				if (!dlist_is_empty(head) &&
					aw_entry_older(e, dlist_head_element(AwEntry, list_node, head)))
				{
					/* older than all: the rebuild adds entries newest first */
				}
				else if (!dlist_is_empty(head))
				{
					dlist_node *n = dlist_tail_node(head);

					for (;;)
					{
						AwEntry    *o = dlist_container(AwEntry, list_node, n);

						if (aw_entry_older(o, e))
						{
							pos = n;
							break;
						}
						if (!dlist_has_prev(head, n))
							break;
						n = dlist_prev_node(head, n);
					}
				}
				if (pos != NULL)
					dlist_insert_after(pos, &e->list_node);
				else
					dlist_push_head(head, &e->list_node);

				if (kind == AW_KIND_FENCED)
				{
					/* sized for every entry: it always has room */
					e->fence_node.at = e->fence;
					e->fence_node.seq = e->seq;
					(void) aw_heap_push(&aw_shared->fences, &e->fence_node);
				}
				else
				{
					e->confirmed_at = GetCurrentTimestamp();
					dlist_push_tail(&aw_shared->unfenced_age, &e->age_node);
				}
				e->owner_procno = -1;
				e->owner_pid = 0;
				break;
			}
		case AW_DUE:
			dlist_push_tail(&t->due, &e->list_node);
			aw_topic_mark_work(t);
			e->owner_procno = -1;
			e->owner_pid = 0;
			break;
		case AW_IN_FLIGHT:
			break;
	}
	aw_shared->counters.parked_confirmed++;
}

static void
aw_entry_set_state(AwEntry *e, AwState state)
{
	aw_entry_unlink(e);
	aw_entry_link(e, state);
}

/*
 * Does this entry hold a slot that a pulse gave it?  A pending entry woken
 * by a pulse does, and so does a due one.
 */
static inline bool
aw_entry_holds_slot(AwEntry *e)
{
	return e->key.kind == AW_KIND_FENCED &&
		((e->state == AW_PENDING && e->woken) || e->state == AW_DUE);
}

/*
 * Remove an entry from the set.  With give_back_slot, a slot the entry held
 * goes back into its topic's pulse counter, to be spent again (G2).
 */
static void
aw_entry_remove(AwEntry *e, bool give_back_slot)
{
	AwTopic    *t = e->topic;

	if (give_back_slot && aw_entry_holds_slot(e))
	{
		aw_topic_add_slots(t, 1);
		aw_shared->counters.slots_returned++;
	}
	aw_entry_unlink(e);
	aw_topic_count_entries(t, -1);
	hash_search(aw_entries, &e->key, HASH_REMOVE, NULL);
}

/*
 * Does the entry belong to this call?  With a generation, the entry must be
 * the one that park made; without, it must be pending and owned by this
 * backend (the non-transactional protocol).
 */
static inline bool
aw_entry_is_mine(AwEntry *e, uint64 generation)
{
	if (generation != 0)
		return e->generation == generation;
	return e->state == AW_PENDING &&
		e->owner_procno == AW_MY_PROCNO && e->owner_pid == MyProcPid;
}

/*
 * Fill a new or reused entry (already unlinked) for a topic.  The caller
 * links it with the state it wants.  Caller holds the set lock exclusively.
 */
static void
aw_entry_fill(AwEntry *e, AwTopic *t, int32 attempt, TimestampTz parked_at,
			  TimestampTz fence)
{
	e->topic = t;
	aw_topic_count_entries(t, 1);
	e->attempt = attempt;
	e->woken = false;
	e->owner_procno = -1;
	e->owner_pid = 0;
	e->parked_at = parked_at;
	e->fence = fence;
	e->confirmed_at = 0;
	e->generation = aw_shared->next_generation++;
	e->seq = aw_shared->next_seq++;
	e->retry_at = 0;
	e->retries = 0;
	e->fence_node.index = -1;
}

/*
 * Make (or correct) a confirmed entry from what the table says: a restore
 * after a rollback, or the worker's rebuild.  An entry that is pending or in
 * flight is left alone: its owner will settle it.  Returns false when the
 * set or the topic table is full.  Caller holds the set lock exclusively.
 */
static bool
aw_entry_put_confirmed(AwKind kind, const char *key, const char *topic,
					   int32 attempt, TimestampTz parked_at, TimestampTz fence)
{
	AwTopic    *t = aw_topic_find(MyDatabaseId, topic, true);
	AwEntry    *e;
	bool		found;

	e = t ? aw_entry_enter(kind, key, &found) : NULL;
	if (e == NULL)
	{
		aw_shared->counters.set_full++;
		return false;
	}
	if (found)
	{
		/*
		 * An entry made by a park at least as recent as the row the caller
		 * read (the rebuild's snapshot may be older than a park that
		 * committed since) is left alone; so is one its owner will settle.
		 */
		if (e->state == AW_PENDING || e->state == AW_IN_FLIGHT ||
			e->parked_at >= parked_at)
			return true;
		aw_entry_unlink(e);
		aw_topic_count_entries(e->topic, -1);
	}
	aw_entry_fill(e, t, attempt, parked_at, fence);
	aw_entry_link(e, AW_CONFIRMED);
	return true;
}

/*
 * The worker's rebuild: a row of this database parked for capacity with its
 * fence still ahead.
 */
bool
aw_set_restore(const char *key, const char *topic, int32 attempt,
			   TimestampTz parked_at, TimestampTz fence)
{
	bool		ok;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	ok = aw_entry_put_confirmed(AW_KIND_FENCED, key, topic, attempt, parked_at, fence);
	LWLockRelease(aw_shared->lock);
	return ok;
}

/* Drop UNFENCED confirmed entries older than aion_wake.unfenced_max_age. */
static void
aw_expire_unfenced(TimestampTz now)
{
	TimestampTz cutoff = now - (int64) aw_unfenced_max_age_ms * 1000;

	while (!dlist_is_empty(&aw_shared->unfenced_age))
	{
		AwEntry    *e = dlist_head_element(AwEntry, age_node, &aw_shared->unfenced_age);

		if (e->confirmed_at > cutoff)
			break;
		aw_entry_remove(e, false);
		aw_shared->counters.unfenced_expired++;
	}
}

/* ---------------------------------------------------------------------
 * Operations for the SQL functions and the transaction callbacks.  Each
 * takes the set lock itself.
 * ---------------------------------------------------------------------
 */

/*
 * Remember a row as pending, owned by this backend.  An entry of the same
 * key is replaced: the new one inherits a wake the old one held, and is
 * copied to *saved when a rollback must put it back (see below); when it is
 * not, the caller fills *saved from the row as its UPDATE found it.
 * Returns the new entry's generation in *generation.
 */
AwParkResult
aw_set_park(AwKind kind, const char *key, const char *topic, int32 attempt,
			TimestampTz parked_at, TimestampTz fence, uint64 *generation,
			AwSavedEntry *saved)
{
	AwEntry    *e;
	AwTopic    *t;
	bool		found;
	bool		inherit = false;

	if (saved)
		saved->valid = false;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, true);
	if (t == NULL)
	{
		aw_shared->counters.set_full++;
		LWLockRelease(aw_shared->lock);
		return AW_PARK_TOPICS_FULL;
	}
	e = aw_entry_enter(kind, key, &found);
	if (e == NULL)
	{
		aw_shared->counters.set_full++;
		LWLockRelease(aw_shared->lock);
		return AW_PARK_SET_FULL;
	}
	if (found)
	{
		inherit = aw_entry_holds_slot(e) ||
			(e->state == AW_PENDING && e->woken);
		/*
		 * What a rollback of this park must put back: the pending entry of
		 * an earlier park of this transaction, as it was; or a confirmed,
		 * due or in-flight entry, whose fence is committed.  The pending
		 * entry of another transaction is not saved: that transaction has
		 * ended (we hold the row's lock) and may have rolled back, so the
		 * caller uses the row as its UPDATE found it instead.
		 */
		if (saved && (e->state != AW_PENDING || aw_entry_is_mine(e, 0)))
		{
			saved->valid = true;
			saved->pending = (e->state == AW_PENDING);
			saved->woken = e->woken;
			saved->generation = e->generation;
			strlcpy(saved->topic, e->topic->key.name, sizeof(saved->topic));
			saved->attempt = e->attempt;
			saved->parked_at = e->parked_at;
			saved->fence = e->fence;
		}
		aw_entry_unlink(e);
		aw_topic_count_entries(e->topic, -1);
	}
	aw_entry_fill(e, t, attempt, parked_at, fence);
	e->woken = inherit;
	e->owner_procno = AW_MY_PROCNO;
	e->owner_pid = MyProcPid;
	aw_entry_link(e, AW_PENDING);
	*generation = e->generation;
	LWLockRelease(aw_shared->lock);
	return AW_PARK_OK;
}

/*
 * The fence of a pending entry is durable.  Returns true when a wake came
 * while it was pending (or a pulse's credit is there to take): a FENCED
 * entry then goes to its topic's due list, holding a slot to be spent (as a
 * pulse's: *wake is AW_WAKE_SPENDER and topic, of AW_TOPIC_MAXLEN + 1
 * bytes, receives its name); an UNFENCED one leaves the set and the caller
 * must re-offer it.  *found says whether this call's entry was still
 * there.  Never raises: COMMIT callbacks call it.
 */
bool
aw_set_confirm(AwKind kind, const char *key, uint64 generation, bool *found,
			   AwWake *wake, char *topic)
{
	AwEntry    *e;
	bool		woken = false;

	*wake = AW_WAKE_NONE;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	e = aw_entry_find(MyDatabaseId, kind, key);
	*found = (e != NULL && e->state == AW_PENDING && aw_entry_is_mine(e, generation));
	if (*found)
	{
		AwTopic    *t = e->topic;

		strlcpy(topic, t->key.name, AW_TOPIC_MAXLEN + 1);
		woken = e->woken;
		if (kind == AW_KIND_UNFENCED)
		{
			if (woken)
			{
				aw_shared->counters.wakes_deferred++;
				aw_entry_remove(e, false);
			}
			else
				aw_entry_set_state(e, AW_CONFIRMED);
		}
		else
		{
			TimestampTz now = GetCurrentTimestamp();

			if (!woken && t->credit > 0 && now < t->credit_until)
			{
				t->credit--;
				aw_shared->counters.credits_used++;
				woken = true;
			}
			else if (woken)
				aw_shared->counters.wakes_deferred++;
			e->woken = false;
			aw_entry_set_state(e, woken ? AW_DUE : AW_CONFIRMED);

			/*
			 * Pulse slots the topic still holds are spent on it now.  A
			 * claimer handed them may have found this park still pending
			 * (a claiming round takes confirmed entries only) and gone back
			 * to sleep: nobody else would wake for them.
			 */
			if (woken || t->slots > 0)
				*wake = AW_WAKE_SPENDER;
		}
	}
	LWLockRelease(aw_shared->lock);
	return woken;
}

/*
 * Forget this call's entry: its fence write failed or rolled back.  A slot
 * the entry held goes back to its topic.  With restore, the entry the park
 * replaced is put back: a confirmed one as it was, or the pending entry of
 * an earlier park of this transaction, which then keeps the wake.  Returns
 * whether an entry was removed, and in *was_pending whether it was pending;
 * *wake says whether the worker has a slot or a due entry to see to.
 * Never raises: ABORT callbacks call it.
 */
bool
aw_set_abandon(AwKind kind, const char *key, uint64 generation,
			   const AwSavedEntry *restore, bool *was_pending, AwWake *wake)
{
	AwEntry    *e;
	bool		removed = false;
	bool		held_slot = false;
	bool		restore_pending = (restore != NULL && restore->valid && restore->pending);
	bool		wake_worker = false;

	if (was_pending)
		*was_pending = false;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	e = aw_entry_find(MyDatabaseId, kind, key);
	if (e != NULL && e->state != AW_IN_FLIGHT &&
		(aw_entry_is_mine(e, generation) ||
		 (generation == 0 && e->state == AW_CONFIRMED)))
	{
		held_slot = aw_entry_holds_slot(e);
		if (was_pending)
			*was_pending = (e->state == AW_PENDING);
		/* a pending entry put back below keeps the slot as its wake */
		aw_entry_remove(e, !restore_pending);
		wake_worker = held_slot && !restore_pending;
		removed = true;
	}
	if (restore != NULL && restore->valid && (removed || e == NULL))
	{
		if (!restore_pending)
		{
			/*
			 * Put back as confirmed, and like the confirm this replaced
			 * entry may have missed, take a live credit if there is one.
			 */
			if (aw_entry_put_confirmed(kind, key, restore->topic, restore->attempt,
									   restore->parked_at, restore->fence) &&
				(e = aw_entry_find(MyDatabaseId, kind, key)) != NULL &&
				e->state == AW_CONFIRMED && kind == AW_KIND_FENCED &&
				e->topic->credit > 0 && GetCurrentTimestamp() < e->topic->credit_until)
			{
				e->topic->credit--;
				aw_shared->counters.credits_used++;
				aw_entry_set_state(e, AW_DUE);
				wake_worker = true;
			}
		}
		else
		{
			AwTopic    *t = aw_topic_find(MyDatabaseId, restore->topic, true);
			bool		found;

			e = t ? aw_entry_enter(kind, key, &found) : NULL;
			if (e != NULL && !found)
			{
				aw_entry_fill(e, t, restore->attempt, restore->parked_at, restore->fence);
				e->generation = restore->generation;
				e->woken = restore->woken || held_slot;
				e->owner_procno = AW_MY_PROCNO;
				e->owner_pid = MyProcPid;
				aw_entry_link(e, AW_PENDING);
			}
		}
	}
	LWLockRelease(aw_shared->lock);
	*wake = wake_worker ? AW_WAKE_WORKER : AW_WAKE_NONE;
	return removed;
}

/*
 * The generation of the FENCED entry of a key of this database, or 0 when
 * there is none.  Called while the caller holds the row's lock, so the
 * entry seen is the one that belongs to the row as the caller found it.
 */
uint64
aw_set_generation_of(const char *key)
{
	AwEntry    *e;
	uint64		generation;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	e = aw_entry_find(MyDatabaseId, AW_KIND_FENCED, key);
	generation = e ? e->generation : 0;
	LWLockRelease(aw_shared->lock);
	return generation;
}

/*
 * The row behind a FENCED entry was delivered, claimed, failed or moved to
 * the dead letters: at commit, forget the entry the call found, and give a
 * slot it held back to its topic.  A newer entry of the same key (a park
 * that committed after this transaction) is left alone, and so is an entry
 * in flight: the worker's compare-and-set will find the row changed.
 * Returns AW_WAKE_WORKER when a slot went back.  Never raises: COMMIT
 * callbacks call it.
 */
AwWake
aw_set_forget(const char *key, uint64 generation)
{
	AwEntry    *e;
	bool		wake_worker = false;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	e = aw_entry_find(MyDatabaseId, AW_KIND_FENCED, key);
	if (e != NULL && e->generation == generation && e->state != AW_IN_FLIGHT)
	{
		wake_worker = aw_entry_holds_slot(e);
		aw_entry_remove(e, true);
	}
	LWLockRelease(aw_shared->lock);
	return wake_worker ? AW_WAKE_WORKER : AW_WAKE_NONE;
}

/*
 * A capacity pulse of this database: add its slots to the topic's counter,
 * for the caller to have spent (see aw_waiters_wake_for).  Returns false
 * when the pulse was not taken.
 *
 * Without create, a pulse for a topic the table does not hold is not
 * taken (returns false, counts nothing): a raw NOTIFY may come from any
 * role, and must not fill the topic table with names nobody uses (the
 * worker creates the topic only when the outbox holds a row of it).  A
 * full topic table drops the pulse (the rows keep their fences) and counts
 * it in set_full.  Never raises.
 */
bool
aw_set_add_slots(const char *topic, int64 slots, bool create)
{
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, create);
	if (t == NULL && !create)
	{
		LWLockRelease(aw_shared->lock);
		return false;
	}
	aw_shared->counters.pulses_received++;
	aw_shared->counters.slots_received += slots;
	aw_shared->counters.last_pulse_at = GetCurrentTimestamp();
	if (t != NULL)
	{
		t->pulses++;
		aw_topic_add_slots(t, slots);
	}
	else
		aw_shared->counters.set_full++;
	LWLockRelease(aw_shared->lock);
	return t != NULL;
}

/*
 * A raw pulse for a topic that has no row in the outbox: counted, ignored.
 */
void
aw_set_count_ignored_pulse(bool malformed)
{
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	if (malformed)
		aw_shared->counters.bad_pulses++;
	else
		aw_shared->counters.pulses_ignored++;
	LWLockRelease(aw_shared->lock);
}

/*
 * At backend exit: abandon every pending entry this backend still owns, so
 * a client that disconnects between park_pending and confirm holds no slot.
 * This scans the set, so callers only come here when they know they left
 * something pending.
 */
AwWake
aw_set_abandon_owned_by_me(void)
{
	HASH_SEQ_STATUS status;
	AwEntry    *e;
	AwWake		wake = AW_WAKE_NONE;

	if (aw_shared == NULL)
		return wake;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_entries);
	while ((e = (AwEntry *) hash_seq_search(&status)) != NULL)
	{
		if (e->state == AW_PENDING && aw_entry_is_mine(e, 0))
		{
			if (aw_entry_holds_slot(e))
				wake = AW_WAKE_WORKER;
			aw_entry_remove(e, true);
		}
	}
	LWLockRelease(aw_shared->lock);
	return wake;
}

/* ---------------------------------------------------------------------
 * Spending pulses (doc/design.md, How a pulse is spent).
 * ---------------------------------------------------------------------
 */

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
aw_take_topic(AwTopic *t, TimestampTz now, AwTakeBatch *b, int want)
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
 * AwTakeBatch).  Sets b->n and b->slots; b->n is 0 when there is nothing
 * to re-offer.  The entries taken are IN_FLIGHT, owned by this backend,
 * until aw_set_settle or aw_set_undo_take.
 */
void
aw_set_take(AwTakeBatch *b, uint64 add_slots, int want)
{
	AwTopic    *t;

	b->n = 0;
	b->slots = 0;
	b->settled = false;
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
 * Are slots or due entries of a topic of this database waiting to be spent?
 */
bool
aw_set_topic_has_work(const char *topic)
{
	AwTopic    *t;
	bool		work;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	work = (t != NULL && (t->slots > 0 || !dlist_is_empty(&t->due)));
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
aw_set_settle(AwTakeBatch *b)
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
	b->settled = true;
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
aw_set_undo_take(AwTakeBatch *b)
{
	int			i;
	int			own_moved;
	TimestampTz now = GetCurrentTimestamp();

	if (!b->settled)
	{
		for (i = 0; i < b->n; i++)
			b->outcomes[i] = AW_TAKE_VALID;
		(void) aw_set_settle(b);
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
 * At worker start: entries left in flight by a process that is gone go
 * back to the confirmed list, and their slots back to their topics.  Every
 * way out of a backend runs the ABORT callback, which settles its rounds,
 * so this is a safety net; entries a live backend holds are its own.
 */
void
aw_set_recover_in_flight(void)
{
	HASH_SEQ_STATUS status;
	AwEntry    *e;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_entries);
	while ((e = (AwEntry *) hash_seq_search(&status)) != NULL)
	{
		if (e->key.dbid == MyDatabaseId && e->state == AW_IN_FLIGHT &&
			(e->owner_procno < 0 ||
			 GetPGProcByNumber(e->owner_procno)->pid != e->owner_pid))
		{
			aw_topic_add_slots(e->topic, 1);
			aw_entry_set_state(e, AW_CONFIRMED);
		}
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * Drop entries whose fence has passed (their rows are claimable anyway) and
 * UNFENCED entries past their maximum age.  Returns when the next of either
 * falls due, or 0 when nothing is waiting.
 */
TimestampTz
aw_set_expire(TimestampTz now)
{
	AwEntry    *e;
	TimestampTz next = 0;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	while ((e = aw_fence_top()) != NULL && e->fence <= now)
	{
		aw_entry_remove(e, false);
		aw_shared->counters.fences_expired++;
	}
	if (e != NULL)
		next = e->fence;
	aw_expire_unfenced(now);
	if (!dlist_is_empty(&aw_shared->unfenced_age))
	{
		TimestampTz at;

		e = dlist_head_element(AwEntry, age_node, &aw_shared->unfenced_age);
		at = e->confirmed_at + (int64) aw_unfenced_max_age_ms * 1000;
		if (next == 0 || at < next)
			next = at;
	}
	LWLockRelease(aw_shared->lock);
	return next;
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

/*
 * Copy this database's entries for aion_wake.parked: the buffer is sized
 * before the lock is taken (from a count read without it) and, in the rare
 * case the set grew meanwhile, sized again.
 */
AwParkedRow *
aw_set_copy_entries(int *n)
{
	long		room = hash_get_num_entries(aw_entries) + 16;

	for (;;)
	{
		AwParkedRow *rows = palloc(sizeof(AwParkedRow) * room);
		HASH_SEQ_STATUS status;
		AwEntry    *e;
		long		count = 0;
		bool		fits;

		LWLockAcquire(aw_shared->lock, LW_SHARED);
		fits = (hash_get_num_entries(aw_entries) <= room);
		if (fits)
		{
			hash_seq_init(&status, aw_entries);
			while ((e = (AwEntry *) hash_seq_search(&status)) != NULL)
			{
				AwParkedRow *r = &rows[count];

				if (e->key.dbid != MyDatabaseId)
					continue;
				strlcpy(r->key, e->key.key, sizeof(r->key));
				strlcpy(r->topic, e->topic->key.name, sizeof(r->topic));
				r->attempt = e->attempt;
				r->pending = (e->state == AW_PENDING);
				/* due and in-flight entries hold a slot: woken, for the reader */
				r->woken = e->woken || e->state == AW_DUE || e->state == AW_IN_FLIGHT;
				r->fenced = (e->key.kind == AW_KIND_FENCED);
				r->parked_at = e->parked_at;
				r->fence = e->fence;
				r->owner_pid = e->owner_pid;
				count++;
			}
		}
		else
			room = hash_get_num_entries(aw_entries) + 16;
		LWLockRelease(aw_shared->lock);
		if (fits)
		{
			*n = (int) count;
			return rows;
		}
		pfree(rows);
	}
}

/* Copy this database's topics for aion_wake.topics, as above. */
AwTopicRow *
aw_set_copy_topics(int *n)
{
	long		room = hash_get_num_entries(aw_topics) + 16;
	TimestampTz now = GetCurrentTimestamp();

	for (;;)
	{
		AwTopicRow *rows = palloc(sizeof(AwTopicRow) * room);
		HASH_SEQ_STATUS status;
		AwTopic    *t;
		long		count = 0;
		bool		fits;

		LWLockAcquire(aw_shared->lock, LW_SHARED);
		fits = (hash_get_num_entries(aw_topics) <= room);
		if (fits)
		{
			hash_seq_init(&status, aw_topics);
			while ((t = (AwTopic *) hash_seq_search(&status)) != NULL)
			{
				AwTopicRow *r = &rows[count];

				if (t->key.dbid != MyDatabaseId)
					continue;
				strlcpy(r->name, t->key.name, sizeof(r->name));
				r->parked = t->n_entries;
				r->unspent_slots = (int64) Min(t->slots, (uint64) PG_INT64_MAX);
				r->credit = t->credit_until > now ?
					(int64) Min(t->credit, (uint64) PG_INT64_MAX) : 0;
				r->pulses = (int64) Min(t->pulses, (uint64) PG_INT64_MAX);
				r->reoffered = (int64) Min(t->reoffered, (uint64) PG_INT64_MAX);
				r->max_in_flight = t->max_in_flight;
				r->in_flight = t->n_leases + t->untracked - t->handoffs;
				count++;
			}
		}
		else
			room = hash_get_num_entries(aw_topics) + 16;
		LWLockRelease(aw_shared->lock);
		if (fits)
		{
			*n = (int) count;
			return rows;
		}
		pfree(rows);
	}
}

/* The counters of aion_wake.status, copied under the set lock. */
void
aw_set_counters(AwCounters *out)
{
	LWLockAcquire(aw_shared->lock, LW_SHARED);
	*out = aw_shared->counters;
	LWLockRelease(aw_shared->lock);
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

/* ---------------------------------------------------------------------
 * Known capacity: limits, reservations and leases (G8) -- the ledger.
 *
 * A limited topic has max_in_flight slots.  A slot is in use while a claim
 * in progress has reserved it or a lease holds it (the two leases of a
 * hand-off hold one); it is free while reservations, leases and untracked
 * leases together are below the limit.  Each lease has a record, from a
 * pool, ordered by end in a heap so that expiry costs O(log n).
 *
 * The life of a lease and of the slot it holds:
 *
 *   free     --a claim reserves-->                     RESERVED
 *   RESERVED --the claim leases a row-->               OPEN (owner: claimer)
 *   RESERVED --the claim does not use it, or aborts--> free
 *   OPEN     --the claim commits-->                    LIVE
 *   OPEN     --the claim rolls back-->                 released
 *   OPEN, LIVE --complete, fail, park, dead_letter-->  SETTLED (owner: settler)
 *   SETTLED  --a claim of the settler's transaction
 *              takes over the slot-->                  SETTLED, handed
 *   SETTLED  --a second settle of it, same xact-->     SETTLED (a repeat)
 *   SETTLED  --the settle rolls back (savepoints too)--> OPEN or LIVE again
 *   SETTLED  --the settle commits-->                   released
 *   any      --its end passes-->                       released, expired
 *
 * RESERVED is a count on the topic, not a record; released means the
 * record is gone, and its slot is free unless it was handed to a
 * successor, which then holds it alone.  Why it is written this way:
 *
 *  - A settle marks the record SETTLED in shared memory, and a rollback
 *    puts back the state it found.  So a second settle of the same lease
 *    in that transaction (fail, then dead_letter) finds it SETTLED by its
 *    own transaction and is only a repeat: a lease is settled, and its
 *    slot handed on, once.
 *  - Records are keyed by row and token.  A row settled and claimed again
 *    by one transaction (fail with no back-off, then claim) has both
 *    leases until that transaction ends, the new one handed the old one's
 *    slot; a rollback drops the new one and restores the old one, which
 *    is live again in the table.  Only the lease's own settle, the
 *    rollback of its claim or its end remove a record, so leases_expired
 *    counts leases that ended, and no record stands for a lease that
 *    still runs.
 *  - A settle that finds the record OPEN or SETTLED by another backend
 *    meets a transaction that has committed or rolled back (the row was
 *    locked until then) whose callback has not run yet: OPEN is then
 *    LIVE, and SETTLED is taken over (that settle's release still removes
 *    the record if it committed; its restore leaves a record it no longer
 *    owns alone).
 *
 * The pool.  A slot may need two records at once (a hand-off keeps the
 * settled lease and its successor until the commit), and leases above
 * their topic's limit (draining after a lowering, or more than it taken in
 * with a first limit) hold records of their own, so the pool holds three
 * records per slot of aion_wake.max_leases: two for every slot the limits
 * allow, and a reserve as large as all the slots for leases above limits.
 * Each topic holds
 *     max(2 * max_in_flight, records + reservations, hold_floor)
 * of it (aw_topic_hold): twice its limit, more while leases above it are
 * live, and at least what a set_limit() not yet ended promised
 * (hold_floor).  A claim reserves only while its topic is below its limit,
 * and a hand-off only while it is not over it, so records and reservations
 * never outgrow twice the limit that way, and above it they only drain.
 * set_limit() refuses a limit that would make the sum of limits exceed
 * aion_wake.max_leases, or the holds of all topics exceed the pool (only
 * when leases above limits outnumber the slots: several lowerings still
 * draining), and a limit is loaded only under the same check; so every
 * lease the limits allow has a record.  Untracked leases (no record,
 * released all together at their latest end) are a fallback that should
 * never be used.
 * ---------------------------------------------------------------------
 */

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
	return (int64) t->n_leases + t->reserved + t->untracked - t->handoffs - t->handing;
}

/* Records of the pool a topic holds (see above). */
static inline int64
aw_topic_hold(AwTopic *t)
{
	int64		hold = 2 * (int64) t->max_in_flight;

	hold = Max(hold, (int64) t->n_leases + t->reserved);
	return Max(hold, t->hold_floor);
}

/*
 * Bring a topic's share of the pool, and of the sum of limits, up to date.
 * While a set_limit() of it has not ended, both its limit and the one set
 * count.  Caller holds the set lock.
 */
static void
aw_topic_pool_sync(AwTopic *t)
{
	int64		hold = aw_topic_hold(t);
	int32		limit = Max(t->max_in_flight, t->limit_floor);

	aw_shared->pool_held += hold - t->pool_held;
	t->pool_held = hold;
	aw_shared->limits_held += (int64) limit - t->limit_held;
	t->limit_held = limit;
}

/*
 * The records a topic will hold once max_in_flight is its limit, with
 * n_take_in live leases taken in when it has none yet.
 */
static int64
aw_topic_hold_with(AwTopic *t, int32 max_in_flight, int32 n_take_in)
{
	int64		records = (int64) t->n_leases + t->reserved;

	if (max_in_flight == 0)
		return 0;
	if (t->max_in_flight == 0)
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
	if (aw_shared->limits_held + Max(0, (int64) max_in_flight - t->limit_held) >
		aw_max_leases)
		return AW_LIMIT_POOL_FULL;
	if (hold > t->pool_held &&
		aw_shared->pool_held + (hold - t->pool_held) > AW_LEASE_RECORDS)
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
		t->handing--;
	if (l->handed)
		t->handoffs--;			/* the predecessor: the successor keeps it */
	else if (l->partner != NULL)
	{
		/* the successor: the slot goes back to the predecessor */
		l->partner->handed = false;
		t->handoffs--;
	}
	if (l->partner != NULL)
		l->partner->partner = NULL;
	if (l->end_node.index >= 0)
		aw_heap_remove(&aw_shared->lease_ends, &l->end_node);
	dlist_delete(&l->topic_node);
	t->n_leases--;
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
		t->untracked++;
		t->untracked_until = Max(t->untracked_until, ends);
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
	dlist_push_tail(&t->leases, &l->topic_node);
	t->n_leases++;
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
 * A claim of a topic is about to lock rows: reserve up to want slots of it.
 * Returns the slots reserved (want when the topic is unlimited, and then
 * *limited is false).  Untracked leases whose time has come are released
 * here.
 */
int32
aw_set_reserve(const char *topic, int32 want, bool *limited)
{
	AwTopic    *t;
	int32		got = want;

	*limited = false;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->max_in_flight > 0)
	{
		if (t->untracked > 0 && t->untracked_until <= GetCurrentTimestamp())
			t->untracked = 0;
		*limited = true;
		got = (int32) Max(0, Min((int64) want, t->max_in_flight - aw_topic_used(t)));
		t->reserved += got;
		aw_topic_update_quiet(t);
	}
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
		l->topic->handing--;
	}
}

/*
 * Give back n slots a claim reserved and did not use; among them, those
 * reserved for the successors of the n_handing settled leases in handing
 * (aw_set_reserve_handed).
 */
void
aw_set_unreserve(const char *topic, int32 n, const AwSettledLease *handing, int n_handing)
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
		t->reserved = Max(0, t->reserved - n);
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
}

/*
 * A claim leased rows of limited topics: one reserved slot of each row's
 * topic becomes a lease, OPEN until the claim commits.  A lease that took
 * the slot reserved for a settled one (preds[i], see
 * aw_set_reserve_handed) is paired with it: they share the slot until
 * both are over.  When that lease is gone already (its end passed), the
 * new one simply holds the slot it took.  Returns true when one of them is
 * now the first lease to end: the worker must look again.
 */
bool
aw_set_leases_open(const AwLiveLease *leases, const AwSettledLease **preds, int n)
{
	bool		first = false;
	int			i;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < n; i++)
	{
		AwTopic    *t = aw_topic_find(MyDatabaseId, leases[i].topic, false);

		if (t == NULL)
			continue;
		t->reserved = Max(0, t->reserved - 1);
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
				t->handoffs++;
			}
		}
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return first;
}

/* The claim that took these leases committed: OPEN -> LIVE.  Never raises. */
void
aw_set_leases_commit(const AwLiveLease *leases, int n)
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
aw_set_leases_rollback(const AwLiveLease *leases, int n)
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
aw_set_lease_settle(const char *key, int64 token, AwLeaseState *prev)
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
 * Claims of the same transaction that took over its slot were undone
 * before (newest first), so it is handed to nobody.  Never raises.
 */
void
aw_set_lease_unsettle(const char *key, int64 token, AwLeaseState prev)
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
aw_set_lease_release(const char *key, int64 token, char *topic)
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
 * The zero-gap hand-off: the transaction that settled these n leases of a
 * topic (of this database) claims its next rows, and a lease's slot passes
 * to a new one without ever being free.  Reserve one slot for each of them
 * that is still SETTLED by this transaction and has passed its slot to no
 * successor yet -- only while the topic is not over its limit (after a
 * lowering, the slots are released instead).  Those come first in settled
 * (moved there), and *left counts them at once, so that an error gives
 * them back.  Each settled lease and the slot reserved for its successor
 * share one slot (see aw_topic_used) until the successor's lease is open,
 * the reservation is given back, or the settled lease ends first.  Returns
 * how many.  The claim pairs each with the lease that takes its slot
 * (aw_set_leases_open), or gives the slot back (aw_set_unreserve).
 */
int32
aw_set_reserve_handed(const char *topic, AwSettledLease *settled, int n, int32 *left)
{
	AwTopic    *t;
	int32		handed = 0;
	int			i;

	if (n == 0)
		return 0;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->max_in_flight > 0 && aw_topic_used(t) <= t->max_in_flight)
	{
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
			t->reserved++;
			l->handing = true;
			t->handing++;
			(*left)++;
		}
		aw_topic_update_quiet(t);
	}
	LWLockRelease(aw_shared->lock);
	return handed;
}

/*
 * Release every lease whose end has passed, of any database: their slots
 * are free and their rows claimable.  Writes the database and topic of
 * each to out (at most max_out; call again while it returns max_out), for
 * the caller to wake one blocked claimer each.  *next receives the next
 * lease end, or 0.
 */
int
aw_set_expire_leases(TimestampTz now, AwReleased *out, int max_out, TimestampTz *next)
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
aw_set_free_slots(const char *topic)
{
	AwTopic    *t;
	int32		free_slots = -1;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->max_in_flight > 0)
		free_slots = (int32) Max(0, t->max_in_flight - aw_topic_used(t));
	LWLockRelease(aw_shared->lock);
	return free_slots;
}

/* Is the topic limited?  The limit itself in *max_in_flight. */
bool
aw_set_topic_limited(const char *topic, int32 *max_in_flight)
{
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	t = aw_topic_find(MyDatabaseId, topic, false);
	*max_in_flight = (t != NULL) ? t->max_in_flight : 0;
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
aw_set_limit_promise(const char *topic, int32 max_in_flight, int32 n_leases,
					 int32 *old_max)
{
	AwTopic    *t;
	AwLimitResult r = AW_LIMIT_OK;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, max_in_flight > 0);
	*old_max = t ? t->max_in_flight : 0;
	if (t == NULL && max_in_flight > 0)
		r = AW_LIMIT_TOPICS_FULL;
	else if (t != NULL)
	{
		int64		hold = aw_topic_hold_with(t, max_in_flight, n_leases);

		r = aw_pool_check(t, hold, max_in_flight);
		if (r == AW_LIMIT_OK)
		{
			t->limit_floor = Max(t->limit_floor, max_in_flight);
			t->hold_floor = Max(t->hold_floor, hold);
			t->limit_pins++;
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
aw_set_limit_repromise(const char *topic, int32 max_in_flight, int32 n_leases)
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
			t->hold_floor = Max(t->hold_floor, hold);
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
aw_set_limit_end(const char *topic, int32 max_in_flight, int32 old_max,
				 const AwLiveLease *leases, int32 n_leases, bool apply)
{
	AwTopic    *t;
	int32		wake = 0;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, false);
	if (t != NULL && t->limit_pins > 0)
	{
		t->limit_pins--;
		if (apply)
			wake = aw_topic_apply_limit(t, max_in_flight, leases, n_leases);
		if (t->limit_pins == 0)
		{
			t->limit_floor = 0;
			t->hold_floor = 0;
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

	old_free = t->max_in_flight > 0 ?
		(int32) Max(0, t->max_in_flight - aw_topic_used(t)) : 0;
	if (max_in_flight == 0)
	{
		while (!dlist_is_empty(&t->leases))
			(void) aw_lease_remove(dlist_head_element(AwLease, topic_node, &t->leases));
		t->untracked = 0;
		t->max_in_flight = 0;
		aw_topic_update_quiet(t);
		return -1;
	}
	if (t->max_in_flight == 0)
	{
		for (i = 0; i < n_leases; i++)
		{
			if (leases[i].ends > now)
				(void) aw_lease_add(t, leases[i].key, leases[i].token, leases[i].ends,
									AW_LEASE_LIVE);
		}
	}
	t->max_in_flight = max_in_flight;
	aw_topic_update_quiet(t);
	return (int32) Max(0, Max(0, t->max_in_flight - aw_topic_used(t)) - old_free);
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
aw_set_limit_load(const char *topic, int32 max_in_flight, const AwLiveLease *leases,
				  int32 n_leases, int32 *wake)
{
	AwTopic    *t;
	AwLimitResult r = AW_LIMIT_TOPICS_FULL;

	*wake = 0;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, true);
	if (t != NULL && t->max_in_flight > 0)
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
aw_set_forget_limits(Oid dbid)
{
	HASH_SEQ_STATUS status;
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_topics);
	while ((t = (AwTopic *) hash_seq_search(&status)) != NULL)
	{
		if (t->key.dbid == dbid && t->max_in_flight > 0)
		{
			(void) aw_topic_apply_limit(t, 0, NULL, 0);
			aw_topic_update_quiet(t);
		}
	}
	LWLockRelease(aw_shared->lock);
}

/* A claim found a limited topic whose limit is not loaded yet (status). */
void
aw_set_count_limit_not_loaded(void)
{
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	aw_shared->counters.limits_not_loaded++;
	LWLockRelease(aw_shared->lock);
}

/* Lease records in use, cluster-wide (aion_wake.status). */
int64
aw_set_lease_count(void)
{
	int64		n;

	LWLockAcquire(aw_shared->lock, LW_SHARED);
	n = hash_get_num_entries(aw_leases);
	LWLockRelease(aw_shared->lock);
	return n;
}
