/*-------------------------------------------------------------------------
 *
 * parked_set.c
 *	  The parked set in shared memory: entries, topics, lists and the fence
 *	  heap, and the life of a park (park, confirm, abandon, forget,
 *	  restore, expiry).  How slots are spent is in pulse_spend.c, limits and
 *	  leases in lease_ledger.c, the views' copies in set_views.c; they share
 *	  the structures of aw_set_internal.h.
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
 *	  Every exported function takes the set lock itself; functions that
 *	  expect the caller to hold it say so.  Nothing here raises an error while the
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
 */#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "aion_wake.h"
#include "aw_compat.h"
#include "aw_set_internal.h"
#include "aw_settings.h"

AwShared   *aw_shared = NULL;
HTAB	   *aw_entries = NULL;
HTAB	   *aw_topics = NULL;
HTAB	   *aw_leases = NULL;

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
	size = add_size(size, aw_rate_shmem_size());
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
		dlist_init(&aw_shared->rate_blocked);
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

	aw_rate_shmem_init();
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
void
aw_topic_update_quiet(AwTopic *t)
{
	bool		quiet;

	aw_topic_pool_sync(t);
	quiet = (t->n_entries == 0 && t->slots == 0 && !t->in_work &&
			 aw_capacity_idle(&t->cap) && aw_rate_idle(&t->rate));

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
AwTopic *
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
		aw_capacity_init(&t->cap);
		aw_rate_init(&t->rate);
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
void
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

AwEntry *
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
AwEntry *
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
void
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
void
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

void
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
void
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
void
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
void
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
