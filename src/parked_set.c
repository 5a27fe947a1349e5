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
 *	  lock is held, so the COMMIT callbacks may call into this file.
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

#include "aw_set.h"
#include "aw_waiters.h"
#include "aw_worker.h"

/* first delay before a re-offer that found its row locked is retried */
#define AW_RETRY_MIN_MS 5

AwShared   *aw_shared = NULL;
HTAB	   *aw_entries = NULL;
HTAB	   *aw_topics = NULL;

static void aw_entry_unlink(AwEntry *e);
static void aw_entry_link(AwEntry *e, AwState state);
static void aw_entry_set_state(AwEntry *e, AwState state);
static void aw_topic_add_slots(AwTopic *t, uint64 slots);

/*
 * Bytes of shared memory needed for the set, requested by aion_wake.c in
 * shmem_request_hook.
 */
Size
aw_set_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(sizeof(AwShared));
	size = add_size(size, MAXALIGN(mul_size(aw_max_parked_rows, sizeof(AwEntry *))));
	size = add_size(size, hash_estimate_size(aw_max_parked_rows, sizeof(AwEntry)));
	size = add_size(size, hash_estimate_size(aw_max_topics, sizeof(AwTopic)));
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
								MAXALIGN(mul_size(aw_max_parked_rows, sizeof(AwEntry *))),
								&found);
	if (!found)
	{
		List	   *names;
		ListCell   *lc;

		memset(aw_shared, 0, sizeof(AwShared));
		aw_shared->lock = &(GetNamedLWLockTranche("aion_wake"))->lock;
		aw_shared->next_generation = 1;
		aw_shared->next_seq = 1;
		dlist_init(&aw_shared->work);
		dlist_init(&aw_shared->unfenced_age);
		aw_shared->heap = (AwEntry **) ((char *) aw_shared + MAXALIGN(sizeof(AwShared)));
		aw_shared->heap_size = 0;

		/* one worker slot per database named in aion_wake.database */
		names = aw_database_names();
		foreach(lc, names)
		{
			AwWorkerSlot *slot = &aw_shared->workers[aw_shared->nworkers++];

			strlcpy(slot->dbname, (char *) lfirst(lc), NAMEDATALEN);
			slot->dbid = InvalidOid;
			slot->procno = -1;
			SpinLockInit(&slot->mutex);
		}
	}

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwKey);
	info.entrysize = sizeof(AwEntry);
	aw_entries = ShmemInitHash("aion_wake parked set",
							   aw_max_parked_rows, aw_max_parked_rows, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwTopicKey);
	info.entrysize = sizeof(AwTopic);
	aw_topics = ShmemInitHash("aion_wake topics",
							  aw_max_topics, aw_max_topics, &info,
							  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

/*
 * The worker slot that serves a database, or NULL.  Slots are matched by
 * the OID the worker published, so a slot whose worker has never connected
 * serves nothing yet.  Caller needs no lock: dbid is written once.
 */
AwWorkerSlot *
aw_worker_slot_for(Oid dbid)
{
	int			i;

	for (i = 0; i < aw_shared->nworkers; i++)
	{
		if (aw_shared->workers[i].dbid == dbid)
			return &aw_shared->workers[i];
	}
	return NULL;
}

/*
 * Set the latch of the worker serving a database, if one runs.  Safe in a
 * COMMIT callback: it never raises.  A stale procno only costs a spurious
 * wake of another process, which re-checks its condition.
 */
void
aw_wake_worker(Oid dbid)
{
	AwWorkerSlot *slot = aw_worker_slot_for(dbid);
	int			procno;

	if (slot == NULL || slot->pid == 0)
		return;
	procno = slot->procno;
	if (procno >= 0 && GetPGProcByNumber(procno)->pid == slot->pid)
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

/*
 * A park in a database whose worker has not rebuilt the set yet (it waits
 * for the extension to exist): wake it, so the rebuild happens now rather
 * than at the next pulse.
 */
void
aw_nudge_worker(Oid dbid)
{
	AwWorkerSlot *slot = aw_worker_slot_for(dbid);

	if (slot != NULL && !slot->rebuilt)
		aw_wake_worker(dbid);
}

const char *
aw_state_name(AwState state)
{
	return state == AW_PENDING ? "pending" : "confirmed";
}

/* ---------------------------------------------------------------------
 * The fence heap: a binary min-heap of CONFIRMED FENCED entries, each of
 * which remembers its position so it can be removed in O(log n).
 * Caller must hold the set lock exclusively.
 * ---------------------------------------------------------------------
 */
static inline bool
aw_heap_less(AwEntry *a, AwEntry *b)
{
	if (a->fence != b->fence)
		return a->fence < b->fence;
	return a->seq < b->seq;
}

static inline void
aw_heap_set(int i, AwEntry *e)
{
	aw_shared->heap[i] = e;
	e->heap_index = i;
}

static void
aw_heap_sift_up(int i)
{
	AwEntry    *e = aw_shared->heap[i];

	while (i > 0)
	{
		int			parent = (i - 1) / 2;

		if (!aw_heap_less(e, aw_shared->heap[parent]))
			break;
		aw_heap_set(i, aw_shared->heap[parent]);
		i = parent;
	}
	aw_heap_set(i, e);
}

static void
aw_heap_sift_down(int i)
{
	AwEntry    *e = aw_shared->heap[i];
	int			n = aw_shared->heap_size;

	for (;;)
	{
		int			child = 2 * i + 1;

		if (child >= n)
			break;
		if (child + 1 < n && aw_heap_less(aw_shared->heap[child + 1], aw_shared->heap[child]))
			child++;
		if (!aw_heap_less(aw_shared->heap[child], e))
			break;
		aw_heap_set(i, aw_shared->heap[child]);
		i = child;
	}
	aw_heap_set(i, e);
}

static void
aw_heap_push(AwEntry *e)
{
	Assert(aw_shared->heap_size < aw_max_parked_rows);
	aw_heap_set(aw_shared->heap_size++, e);
	aw_heap_sift_up(e->heap_index);
}

static void
aw_heap_remove(AwEntry *e)
{
	int			i = e->heap_index;
	AwEntry    *last;

	Assert(i >= 0 && i < aw_shared->heap_size && aw_shared->heap[i] == e);
	e->heap_index = -1;
	last = aw_shared->heap[--aw_shared->heap_size];
	if (last == e)
		return;
	aw_heap_set(i, last);
	aw_heap_sift_up(i);
	aw_heap_sift_down(last->heap_index);
}

/* The confirmed fenced entry with the earliest fence, or NULL. */
static AwEntry *
aw_heap_top(void)
{
	return aw_shared->heap_size > 0 ? aw_shared->heap[0] : NULL;
}

/* ---------------------------------------------------------------------
 * Topics and entries.  Caller must hold the set lock exclusively.
 * ---------------------------------------------------------------------
 */

/*
 * Can a topic be dropped from the table to make room?  Only when nothing
 * refers to it: no entry, no unspent slot or live credit, no waiter.
 */
static bool
aw_topic_idle(AwTopic *t, TimestampTz now)
{
	return t->n_entries == 0 && t->slots == 0 && !t->in_work &&
		t->waiters == 0 && (t->credit == 0 || t->credit_until <= now);
}

/*
 * Find a topic of a database; with create, make it, dropping one idle topic
 * if the table is full.  Returns NULL when not found, or when the table is
 * full of topics in use.  Never raises.
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
		HASH_SEQ_STATUS status;
		AwTopic    *victim = NULL;
		TimestampTz now = GetCurrentTimestamp();

		hash_seq_init(&status, aw_topics);
		while ((victim = (AwTopic *) hash_seq_search(&status)) != NULL)
		{
			if (aw_topic_idle(victim, now))
			{
				hash_seq_term(&status);
				break;
			}
		}
		if (victim == NULL)
			return NULL;
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
		t->waiters = 0;
		t->pulses = 0;
		t->reoffered = 0;
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
			if (e->heap_index >= 0)
				aw_heap_remove(e);
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
					aw_heap_push(e);
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
	t->n_entries--;
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
	t->n_entries++;
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
	e->heap_index = -1;
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
		if (e->state == AW_PENDING || e->state == AW_IN_FLIGHT ||
			(e->fence == fence && e->topic == t))
			return true;
		aw_entry_unlink(e);
		e->topic->n_entries--;
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
		e->topic->n_entries--;
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
 * entry then goes to its topic's due list for the worker, an UNFENCED one
 * leaves the set and the caller must re-offer it.  *found says whether this
 * call's entry was still there.  Never raises: COMMIT callbacks call it.
 */
bool
aw_set_confirm(AwKind kind, const char *key, uint64 generation, bool *found)
{
	AwEntry    *e;
	bool		woken = false;
	bool		wake_worker = false;
	char		topic_name[AW_TOPIC_MAXLEN + 1];

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	e = aw_entry_find(MyDatabaseId, kind, key);
	*found = (e != NULL && e->state == AW_PENDING && aw_entry_is_mine(e, generation));
	if (*found)
	{
		AwTopic    *t = e->topic;

		strlcpy(topic_name, t->key.name, sizeof(topic_name));

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
			wake_worker = woken;
		}
	}
	LWLockRelease(aw_shared->lock);
	/* as for a pulse (aw_set_add_slots): a waiter spends it, or the worker */
	if (wake_worker && aw_waiters_wake(MyDatabaseId, topic_name, 1) == 0)
		aw_wake_worker(MyDatabaseId);
	return woken;
}

/*
 * Forget this call's entry: its fence write failed or rolled back.  A slot
 * the entry held goes back to its topic.  With restore, the entry the park
 * replaced is put back: a confirmed one as it was, or the pending entry of
 * an earlier park of this transaction, which then keeps the wake.  Returns
 * whether an entry was removed, and in *was_pending whether it was pending.
 * Never raises: ABORT callbacks call it.
 */
bool
aw_set_abandon(AwKind kind, const char *key, uint64 generation,
			   const AwSavedEntry *restore, bool *was_pending)
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
	if (wake_worker)
		aw_wake_worker(MyDatabaseId);
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
 * Never raises: COMMIT callbacks call it.
 */
void
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
	if (wake_worker)
		aw_wake_worker(MyDatabaseId);
}

/*
 * A capacity pulse of this database has committed: add its slots to the
 * topic's counter and have them spent.  With to_waiter (pulse() at
 * COMMIT), a claimer blocked on the topic spends them itself and claims
 * what they move (outbox.c), which saves the worker's transaction and a
 * process wake-up between a freed slot and a claimed row; the worker is
 * woken only when nobody waits.  A waiter that leaves with slots of its
 * topic unspent wakes the worker (aw_waiter_leave), so the slots are spent
 * either way.  Without (a raw NOTIFY, received by the worker), the worker,
 * already awake, spends them: handing them on as well would only make the
 * two race.  A full topic table drops the pulse (the rows keep their
 * fences) and counts it.  Never raises.
 */
void
aw_set_add_slots(const char *topic, int64 slots, bool to_waiter)
{
	AwTopic    *t;

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	t = aw_topic_find(MyDatabaseId, topic, true);
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
	if (t == NULL || !to_waiter || aw_waiters_wake(MyDatabaseId, topic, 1) == 0)
		aw_wake_worker(MyDatabaseId);
}

/*
 * At backend exit: abandon every pending entry this backend still owns, so
 * a client that disconnects between park_pending and confirm holds no slot.
 * This scans the set, so callers only come here when they know they left
 * something pending.
 */
void
aw_set_abandon_owned_by_me(void)
{
	HASH_SEQ_STATUS status;
	AwEntry    *e;

	if (aw_shared == NULL)
		return;
	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, aw_entries);
	while ((e = (AwEntry *) hash_seq_search(&status)) != NULL)
	{
		if (e->state == AW_PENDING && aw_entry_is_mine(e, 0))
			aw_entry_remove(e, true);
	}
	LWLockRelease(aw_shared->lock);
}

/* ---------------------------------------------------------------------
 * Spending pulses: "How a pulse is spent" in DESIGN.md.
 * ---------------------------------------------------------------------
 */

static void
aw_take_entry(AwEntry *e, AwTake *out)
{
	strlcpy(out->key, e->key.key, sizeof(out->key));
	out->generation = e->generation;
	out->saved.valid = true;
	out->saved.pending = false;
	out->saved.woken = false;
	out->saved.generation = 0;
	strlcpy(out->saved.topic, e->topic->key.name, sizeof(out->saved.topic));
	out->saved.attempt = e->attempt;
	out->saved.parked_at = e->parked_at;
	out->saved.fence = e->fence;
	aw_entry_set_state(e, AW_IN_FLIGHT);
}

/*
 * Spend one topic's slots, writing the entries taken to out[].  All of it
 * happens under one hold of the set lock, so no park can confirm between
 * the last look at the confirmed list and the marking of pending entries.
 * Returns the number taken; stops early, leaving the rest of the slots on
 * the topic, when out[] is full.  Caller holds the set lock exclusively.
 */
static int
aw_take_topic(AwTopic *t, TimestampTz now, AwTake *out, int max_out)
{
	int			n = 0;
	uint64		k;
	dlist_mutable_iter iter;

	/*
	 * Due entries already hold a slot.  One whose fence has passed needs no
	 * re-offer: its slot goes back.  One whose row was locked at the last
	 * try waits for its retry time.
	 */
	dlist_foreach_modify(iter, &t->due)
	{
		AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

		if (n >= max_out)
			break;
		if (e->fence <= now)
		{
			aw_entry_remove(e, true);
			aw_shared->counters.fences_expired++;
		}
		else if (e->retry_at <= now)
			aw_take_entry(e, &out[n++]);
	}
	k = t->slots;

	/* 1. confirmed entries, oldest park first */
	dlist_foreach_modify(iter, &t->confirmed[AW_KIND_FENCED])
	{
		AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

		if (k == 0 || n >= max_out)
			break;
		if (e->fence <= now)
		{
			/* already claimable: no slot is needed to re-offer it */
			aw_entry_remove(e, false);
			aw_shared->counters.fences_expired++;
			continue;
		}
		aw_take_entry(e, &out[n++]);
		k--;
	}
	if (n >= max_out && k > 0)
	{
		t->slots = k;
		return n;
	}

	/* 2. slots left: mark pending parks woken, oldest first */
	dlist_foreach_modify(iter, &t->pending[AW_KIND_FENCED])
	{
		AwEntry    *e = dlist_container(AwEntry, list_node, iter.cur);

		if (k == 0)
			break;
		if (!e->woken)
		{
			e->woken = true;
			k--;
		}
	}

	/* 3. slots still left become a short-lived credit */
	if (k > 0 && aw_pulse_credit_ms > 0)
	{
		if (t->credit_until <= now)
			t->credit = 0;
		t->credit = (t->credit > PG_UINT64_MAX - k) ? PG_UINT64_MAX : t->credit + k;
		t->credit_until = now + (int64) aw_pulse_credit_ms * 1000;
	}
	t->slots = 0;
	/* due entries waiting to be retried keep the topic on the work list */
	if (t->in_work && dlist_is_empty(&t->due))
	{
		dlist_delete(&t->work_node);
		t->in_work = false;
	}
	return n;
}

/*
 * Take entries to re-offer: from one topic (after adding add_slots to it),
 * or from every topic of this database on the work list.  Entries taken are
 * IN_FLIGHT until aw_set_settle.  Returns how many were taken.
 */
int
aw_set_take(const char *only_topic, uint64 add_slots, AwTake *out, int max_out)
{
	int			n = 0;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	if (only_topic != NULL)
	{
		AwTopic    *t = aw_topic_find(MyDatabaseId, only_topic, add_slots > 0);

		if (t != NULL)
		{
			aw_topic_add_slots(t, add_slots);
			n = aw_take_topic(t, now, out, max_out);
		}
	}
	else
	{
		dlist_mutable_iter iter;

		dlist_foreach_modify(iter, &aw_shared->work)
		{
			AwTopic    *t = dlist_container(AwTopic, work_node, iter.cur);

			if (t->key.dbid != MyDatabaseId)
				continue;
			n += aw_take_topic(t, now, out + n, max_out - n);
			if (n >= max_out)
				break;
		}
	}
	LWLockRelease(aw_shared->lock);
	return n;
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
 * Settle the entries a re-offer took.  A row moved: its entry leaves the
 * set.  A row locked by a transaction still in progress: the entry keeps
 * its slot and is retried after a short, growing delay, so that if the
 * transaction rolls back the row is still re-offered, and if it changes the
 * row, its forget at commit gives the slot back.  A row that changed since
 * its park: the entry is dropped and its slot goes back to its topic, to be
 * spent again (G2).  An entry that a newer park replaced meanwhile is left
 * alone, and the slot goes back.
 */
void
aw_set_settle(const AwTake *takes, const AwTakeOutcome *outcomes, int n)
{
	int			i;
	bool		returned = false;	/* wake the worker */
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(aw_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < n; i++)
	{
		AwEntry    *e = aw_entry_find(MyDatabaseId, AW_KIND_FENCED, takes[i].key);
		bool		mine = (e != NULL && e->state == AW_IN_FLIGHT &&
							e->generation == takes[i].generation);

		if (outcomes[i] == AW_TAKE_MOVED)
		{
			aw_shared->counters.rows_reoffered++;
			if (mine)
			{
				e->topic->reoffered++;
				aw_entry_remove(e, false);
			}
			continue;
		}
		if (mine && outcomes[i] == AW_TAKE_LOCKED)
		{
			e->retry_at = now + ((int64) AW_RETRY_MIN_MS << Min(e->retries, 8)) * 1000;
			e->retries++;
			aw_entry_set_state(e, AW_DUE);
			returned = true;	/* the worker must learn of the retry time */
			continue;
		}
		if (mine)
			aw_entry_remove(e, false);
		{
			AwTopic    *t = aw_topic_find(MyDatabaseId, takes[i].saved.topic, true);

			if (t != NULL)
			{
				aw_topic_add_slots(t, 1);
				aw_shared->counters.slots_returned++;
				returned = true;
			}
		}
	}
	LWLockRelease(aw_shared->lock);
	if (returned)
		aw_wake_worker(MyDatabaseId);
}

/*
 * The worker: the earliest retry time of a due entry of its database, or 0.
 * Only topics on the work list can hold due entries.
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
 * At worker start: entries a previous worker left in flight go back to the
 * confirmed list, and their slots back to their topics.
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
		if (e->key.dbid == MyDatabaseId && e->state == AW_IN_FLIGHT)
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
	while ((e = aw_heap_top()) != NULL && e->fence <= now)
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
			 errmsg("aion_wake %s is full",
					r == AW_PARK_SET_FULL ? "parked set" : "topic table"),
			 fenced ?
			 errdetail("Row \"%s\" waits until its fence; no pulse will re-offer it.", key) :
			 errdetail("Row \"%s\" was not parked.", key),
			 errhint("Increase \"%s\".", r == AW_PARK_SET_FULL ?
					 "aion_wake.max_parked_rows" : "aion_wake.max_topics")));
}
