/*-------------------------------------------------------------------------
 *
 * aw_set.h
 *	  The parked set: aion_wake's shared memory and the operations on it.
 *
 *	  The set remembers rows that were turned away for want of capacity.  It
 *	  is an accelerator, never a source of truth: every fence it knows of is
 *	  also in the table, so losing the set (a crash-restart) costs latency
 *	  only.  Everything here lives in the main shared memory segment, sized
 *	  once at postmaster start, and is guarded by the LWLocks of the
 *	  "aion_wake" tranche.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_set.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_SET_H
#define AW_SET_H

#include "aion_wake.h"
#include "aw_pulse_parse.h"
#include "lib/ilist.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"

/*
 * Two kinds of entry share the set.  FENCED entries are made by park() and
 * carry the fence they wrote in aion_wake.outbox; the worker re-offers them.
 * UNFENCED entries are made by park_pending() for callers that keep their
 * own table; only take_confirmed() returns them.
 */
typedef enum AwKind
{
	AW_KIND_FENCED = 0,
	AW_KIND_UNFENCED = 1
} AwKind;

#define AW_NUM_KINDS 2

/*
 * Life of an entry.  PENDING: its fence is not yet committed; a wake is only
 * recorded on it.  CONFIRMED: waiting in its topic's FIFO for a pulse.  DUE:
 * holding a slot, either woken while pending or found locked by a re-offer
 * (then retried at retry_at); re-offered without spending another slot.
 * IN_FLIGHT: taken by the worker, whose re-offer has not yet committed.
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
	dlist_head	due;			/* FENCED entries woken while pending */
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
	int32		heap_index;		/* position in the fence heap, or -1 */
	dlist_node	list_node;		/* pending, confirmed or due list */
	dlist_node	age_node;		/* AwShared.unfenced_age (UNFENCED confirmed) */
} AwEntry;

/* counters shown by aion_wake.status; all guarded by the set lock */
typedef struct AwCounters
{
	int64		parked_pending;
	int64		parked_confirmed;
	uint64		pulses_received;
	uint64		slots_received;
	uint64		rows_reoffered;
	uint64		wakes_deferred;
	uint64		bad_pulses;
	uint64		pulses_ignored; /* raw pulses for topics with no row */
	uint64		set_full;
	uint64		fences_expired;
	uint64		unfenced_expired;
	uint64		credits_used;
	uint64		slots_returned;
	TimestampTz last_pulse_at;
} AwCounters;

typedef struct AwShared
{
	LWLock	   *lock;			/* guards everything below but the slots */
	uint64		next_generation;
	uint64		next_seq;
	AwCounters	counters;
	dlist_head	work;			/* topics with slots or due entries */
	dlist_head	quiet;			/* topics with no entry, slot or work, the
								 * one quiet longest first: what a full
								 * topic table recycles */
	dlist_head	unfenced_age;	/* UNFENCED confirmed, oldest confirm first */
	int			heap_size;
	AwEntry   **heap;			/* min-heap of CONFIRMED FENCED by fence */
} AwShared;

extern PGDLLIMPORT AwShared *aw_shared;
extern PGDLLIMPORT HTAB *aw_entries;
extern PGDLLIMPORT HTAB *aw_topics;

/* shared memory set-up (parked_set.c) */
extern Size aw_set_shmem_size(void);
extern void aw_set_shmem_init(void);

/* outcome of aw_set_park */
typedef enum AwParkResult
{
	AW_PARK_OK,
	AW_PARK_SET_FULL,
	AW_PARK_TOPICS_FULL
} AwParkResult;

/*
 * A saved copy of the entry a park replaced, so that a rollback of that park
 * can put it back: a confirmed entry, or a pending one made by an earlier
 * park of the same transaction (a re-park in a savepoint).
 */
typedef struct AwSavedEntry
{
	bool		valid;
	bool		pending;		/* restore as this backend's pending entry */
	bool		woken;			/* pending only */
	uint64		generation;		/* pending only: the earlier park's */
	char		topic[AW_TOPIC_MAXLEN + 1];
	int32		attempt;
	TimestampTz parked_at;
	TimestampTz fence;
} AwSavedEntry;

/* the set's operations; each takes and releases the set lock itself */
extern AwParkResult aw_set_park(AwKind kind, const char *key, const char *topic,
								int32 attempt, TimestampTz parked_at,
								TimestampTz fence, uint64 *generation,
								AwSavedEntry *saved);
extern void aw_warn_park_failed(AwParkResult r, const char *key, bool fenced);
extern bool aw_set_confirm(AwKind kind, const char *key, uint64 generation,
						   bool *found);
extern bool aw_set_abandon(AwKind kind, const char *key, uint64 generation,
						   const AwSavedEntry *restore, bool *was_pending);
extern uint64 aw_set_generation_of(const char *key);
extern void aw_set_forget(const char *key, uint64 generation);
extern bool aw_set_restore(const char *key, const char *topic, int32 attempt,
						   TimestampTz parked_at, TimestampTz fence);
extern bool aw_set_add_slots(const char *topic, int64 slots, bool to_waiter,
							 bool create);
extern void aw_set_count_ignored_pulse(bool malformed);
extern void aw_set_abandon_owned_by_me(void);

/*
 * An entry taken for a re-offer: what the compare-and-set needs, and what a
 * rollback needs to put the entry back.
 */
typedef struct AwTake
{
	char		key[AW_KEY_MAXLEN + 1];
	uint64		generation;
	int32		attempt;
	TimestampTz parked_at;
	TimestampTz fence;
} AwTake;

typedef enum AwTakeOutcome
{
	AW_TAKE_MOVED,				/* the row's fence was pulled forward */
	AW_TAKE_VALID,				/* still parked at its fence: locked, or the
								 * round's slots were spent on older rows */
	AW_TAKE_STALE				/* the row changed since its park, or is gone */
} AwTakeOutcome;

/*
 * One round of a re-offer: candidates taken from one topic, oldest first
 * (entries that hold a slot of their own before the rest), and the number
 * of rows the round may move.  There may be more candidates than slots: a
 * round that meets stale entries looks further ahead in the next, so a
 * pulse costs O(k + log n) statements however many stale entries lie
 * before its k live rows.  Candidates are IN_FLIGHT until the round is
 * settled; a round that is never settled (its transaction ended first) is
 * undone by aw_set_undo_take.
 */
typedef struct AwTakeBatch
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	int			max;			/* room in takes[] and outcomes[] */
	int			n;				/* candidates taken */
	int			slots;			/* rows this round may move */
	bool		settled;
	AwTake	   *takes;
	AwTakeOutcome *outcomes;
} AwTakeBatch;

extern void aw_set_take(AwTakeBatch *b, uint64 add_slots, int want);
extern void aw_set_settle(AwTakeBatch *b);
extern void aw_set_undo_take(AwTakeBatch *b);
extern List *aw_set_work_topics(void);
extern bool aw_set_has_work(void);
extern TimestampTz aw_set_next_retry(void);
extern bool aw_set_topic_has_work(const char *topic);
extern void aw_set_recover_in_flight(void);
extern TimestampTz aw_set_expire(TimestampTz now);

/* helpers for callers that hold the set lock */
extern AwTopic *aw_topic_find(Oid dbid, const char *name, bool create);
extern void aw_entry_remove(AwEntry *e, bool give_back_slot);
extern void aw_expire_unfenced(TimestampTz now);

/* copies for the views, made under the set lock */
typedef struct AwParkedRow
{
	char		key[AW_KEY_MAXLEN + 1];
	char		topic[AW_TOPIC_MAXLEN + 1];
	int32		attempt;
	bool		pending;
	bool		woken;			/* a wake is recorded, or a slot held */
	bool		fenced;
	TimestampTz parked_at;
	TimestampTz fence;
	int32		owner_pid;
} AwParkedRow;

typedef struct AwTopicRow
{
	char		name[AW_TOPIC_MAXLEN + 1];
	int64		parked;
	int64		unspent_slots;
	int64		credit;
	int64		pulses;
	int64		reoffered;
} AwTopicRow;

extern AwParkedRow *aw_set_copy_entries(int *n);
extern AwTopicRow *aw_set_copy_topics(int *n);

/* "Oldest first" order: earliest parked_at, ties by sequence number. */
static inline bool
aw_entry_older(const AwEntry *a, const AwEntry *b)
{
	return a->parked_at < b->parked_at ||
		(a->parked_at == b->parked_at && a->seq < b->seq);
}

#endif							/* AW_SET_H */
