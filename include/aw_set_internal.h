/*-------------------------------------------------------------------------
 *
 * aw_set_internal.h
 *	  The parked set's private structures, shared by the set's own files
 *	  and by nothing else:
 *	    parked_set.c    the set in shared memory, topics, entries and the
 *	                    life of a park;
 *	    pulse_spend.c   who spends a topic's slots, and the rounds that
 *	                    spend them (what test/model/aion_wake.pml mirrors);
 *	    lease_ledger.c  limits, reservations and lease records;
 *	    set_views.c     the copies the views read.
 *
 *	  Every function here expects the caller to hold the set lock
 *	  (aw_shared->lock, AW_LOCK_SET) exclusively, unless it says otherwise,
 *	  and none raises.  Nothing here wakes anybody: the exported operations
 *	  return an AwWake and their callers wake once the lock is released.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_set_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_SET_INTERNAL_H
#define AW_SET_INTERNAL_H

#include "lib/ilist.h"
#include "storage/lwlock.h"
#include "utils/hsearch.h"

#include "aw_fence_heap.h"
#include "aw_lease_ledger.h"
#include "aw_names.h"
#include "aw_parked_set.h"
#include "aw_pulse_spend.h"
#include "aw_rate_ledger.h"
#include "aw_set_views.h"

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
	/* known capacity (G8): the lease ledger's fields (aw_lease_ledger.h) */
	AwCapacity	cap;
	/* its rate and pause (G10): the rate ledger's fields (aw_rate_ledger.h) */
	AwRate		rate;
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
 * it until it is released (its states: lease_ledger.c).  Keyed
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
								 * shares its slot (aw_topic_reserve_handed) */
	struct AwLease *partner;	/* the other lease of a hand-off pair */
	AwHeapNode	end_node;		/* in AwShared.lease_ends */
	dlist_node	topic_node;		/* in its topic's leases */
} AwLease;

/* records in the lease pool: three per slot (lease_ledger.c, the pool) */
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
	dlist_head	rate_blocked;	/* topics whose claims a rate or a pause
								 * cut short: the worker times the moment
								 * they may start again (rate_ledger.c) */
} AwShared;

/* the set (parked_set.c) */
extern AwShared *aw_shared;
extern HTAB *aw_entries;
extern HTAB *aw_topics;
extern HTAB *aw_leases;

/* "Oldest first" order: earliest parked_at, ties by sequence number. */
static inline bool
aw_entry_older(const AwEntry *a, const AwEntry *b)
{
	return a->parked_at < b->parked_at ||
		(a->parked_at == b->parked_at && a->seq < b->seq);
}

/* topics and entries (parked_set.c) */
extern AwTopic *aw_topic_find(Oid dbid, const char *name, bool create);
extern void aw_topic_update_quiet(AwTopic *t);
extern void aw_topic_add_slots(AwTopic *t, uint64 slots);
extern AwEntry *aw_entry_find(Oid dbid, AwKind kind, const char *key);
extern AwEntry *aw_entry_enter(AwKind kind, const char *key, bool *found);
extern void aw_entry_unlink(AwEntry *e);
extern void aw_entry_link(AwEntry *e, AwState state);
extern void aw_entry_set_state(AwEntry *e, AwState state);
extern void aw_entry_remove(AwEntry *e, bool give_back_slot);
extern void aw_entry_fill(AwEntry *e, AwTopic *t, int32 attempt, TimestampTz parked_at,
						  TimestampTz fence);
extern void aw_expire_unfenced(TimestampTz now);

/* a topic's capacity (lease_ledger.c) */
extern void aw_capacity_init(AwCapacity *c);
extern bool aw_capacity_idle(const AwCapacity *c);
extern int32 aw_capacity_in_flight(const AwCapacity *c);
extern void aw_topic_pool_sync(AwTopic *t);

/* a topic's rate and pause (rate_ledger.c) */
extern void aw_rate_init(AwRate *r);
extern bool aw_rate_idle(const AwRate *r);
extern int32 aw_rate_admit(AwTopic *t, int32 want, TimestampTz now, bool *blocked);
extern void aw_rate_copy(AwTopic *t, AwRateRow *row, TimestampTz now);
extern int64 aw_topic_free_slots(AwTopic *t);

#endif							/* AW_SET_INTERNAL_H */
