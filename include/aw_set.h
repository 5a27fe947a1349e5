/*-------------------------------------------------------------------------
 *
 * aw_set.h
 *	  The parked set: rows turned away for want of capacity, their topics,
 *	  and how pulses are spent on them.
 *
 *	  The set is an accelerator, never a source of truth: every fence it
 *	  knows of is also in the table, so losing it (a crash-restart) costs
 *	  latency only.  It lives in the main shared memory segment, sized once
 *	  at postmaster start; its structures are private to parked_set.c, and
 *	  every operation below takes the set's lock itself and never raises
 *	  while holding it.
 *
 *	  The set decides, it does not wake: an operation that leaves a slot to
 *	  spend or a retry to time says so in an AwWake, and the caller wakes a
 *	  blocked claimer or the worker after the lock is released
 *	  (aw_waiters_wake_for).
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

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "aw_names.h"
#include "aw_waiters.h"			/* AwWake */

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

/* counters shown by aion_wake.status */
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
	uint64		leases_expired;
	uint64		limits_not_loaded;	/* claims of a topic whose limit was not
									 * loaded yet, which took nothing of it */
	TimestampTz last_pulse_at;
} AwCounters;

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
	int			slot_cap;		/* take at most this many slots; 0: all */
	int			own_slots;		/* slots the caller brings (spent first) */
	int			own;			/* ... of them, counted in slots */
	int			own_left;		/* ... of those, not spent (aw_set_settle) */
	bool		claiming;		/* a round that leases the rows it moves */
	bool		(*skip) (const char *key);	/* entries the round leaves alone */
	bool		settled;
	AwTake	   *takes;
	AwTakeOutcome *outcomes;
} AwTakeBatch;

/* an UNFENCED entry handed back by take_confirmed() */
typedef struct AwUnfencedTake
{
	char		key[AW_KEY_MAXLEN + 1];
	int32		attempt;
} AwUnfencedTake;

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
	int32		max_in_flight;	/* 0: unlimited */
	int32		in_flight;
} AwTopicRow;

/* a live lease found in the table (set_limit(), loading limits) */
typedef struct AwLiveLease
{
	char		key[AW_KEY_MAXLEN + 1];
	char		topic[AW_TOPIC_MAXLEN + 1];
	int64		token;
	TimestampTz ends;
} AwLiveLease;

/*
 * A lease of a limited topic a transaction settled: a claim in the same
 * transaction may take over its slot (the zero-gap hand-off).  pulse: the
 * settle was not park(), so the slot may go to a parked row.
 */
typedef struct AwSettledLease
{
	char		key[AW_KEY_MAXLEN + 1];
	int64		token;
	bool		pulse;
} AwSettledLease;

/*
 * The states of a lease record (parked_set.c, "the ledger"): OPEN while the
 * claim that took it is open, LIVE once it committed, SETTLED while a
 * settle of it by an open transaction (owner) has not ended.
 */
typedef enum AwLeaseState
{
	AW_LEASE_OPEN,
	AW_LEASE_LIVE,
	AW_LEASE_SETTLED
} AwLeaseState;

/* what aw_set_lease_settle did */
typedef enum AwSettleMark
{
	AW_SETTLE_NONE,				/* no live record of the lease: nothing to
								 * release */
	AW_SETTLE_MARKED,			/* now SETTLED by this transaction */
	AW_SETTLE_REPEAT			/* SETTLED by this transaction already */
} AwSettleMark;

/* a lease released because its end passed: wake one claimer of its topic */
typedef struct AwReleased
{
	Oid			dbid;
	char		topic[AW_TOPIC_MAXLEN + 1];
} AwReleased;

typedef enum AwLimitResult
{
	AW_LIMIT_OK,
	AW_LIMIT_TOPICS_FULL,		/* the topic table cannot hold the topic */
	AW_LIMIT_POOL_FULL,			/* the sum of limits would exceed the pool */
	AW_LIMIT_LEASES_FULL		/* the pool's records are held by live
								 * leases: the topic's own, to take in, or
								 * those of lowered limits, draining */
} AwLimitResult;

/* shared memory (from aion_wake.c's hooks) */
extern Size aw_set_shmem_size(void);
extern void aw_set_shmem_init(void);
extern bool aw_set_attached(void);

/* parks: park(), park_pending(), and their ends */
extern AwParkResult aw_set_park(AwKind kind, const char *key, const char *topic,
								int32 attempt, TimestampTz parked_at,
								TimestampTz fence, uint64 *generation,
								AwSavedEntry *saved);
extern void aw_warn_park_failed(AwParkResult r, const char *key, bool fenced);
extern bool aw_set_confirm(AwKind kind, const char *key, uint64 generation,
						   bool *found, AwWake *wake, char *topic);
extern bool aw_set_abandon(AwKind kind, const char *key, uint64 generation,
						   const AwSavedEntry *restore, bool *was_pending,
						   AwWake *wake);
extern AwWake aw_set_abandon_owned_by_me(void);
extern uint64 aw_set_generation_of(const char *key);
extern AwWake aw_set_forget(const char *key, uint64 generation);
extern bool aw_set_restore(const char *key, const char *topic, int32 attempt,
						   TimestampTz parked_at, TimestampTz fence);

/* pulses */
extern bool aw_set_add_slots(const char *topic, int64 slots, bool create);
extern void aw_set_count_ignored_pulse(bool malformed);

/* re-offer rounds (reoffer.c) */
extern void aw_set_take(AwTakeBatch *b, uint64 add_slots, int want);
extern AwWake aw_set_settle(AwTakeBatch *b);
extern AwWake aw_set_undo_take(AwTakeBatch *b);
extern List *aw_set_work_topics(void);
extern bool aw_set_has_work(void);
extern bool aw_set_topic_has_work(const char *topic);
extern bool aw_set_spender_active(const char *topic);
extern bool aw_set_spender_hand(const char *topic, int procno, uint64 registration);
extern uint64 aw_set_last_hand(void);
extern AwWake aw_set_spender_release(char **topics, int ntopics, uint64 hand);

/* take_confirmed() */
extern int	aw_set_take_unfenced(const char *topic, int64 *want,
								 AwUnfencedTake *out, int max_out, bool *done);

/* known capacity: limits, reservations, leases */
extern int32 aw_set_reserve(const char *topic, int32 want, bool *limited);
extern void aw_set_unreserve(const char *topic, int32 n,
							 const AwSettledLease *handing, int n_handing);
extern bool aw_set_leases_open(const AwLiveLease *leases, const AwSettledLease **preds,
							   int n);
extern void aw_set_leases_commit(const AwLiveLease *leases, int n);
extern void aw_set_leases_rollback(const AwLiveLease *leases, int n);
/* what aw_set_lease_release did */
#define AW_RELEASE_NONE		0	/* no such live lease */
#define AW_RELEASE_FREED	1	/* its slot is free */
#define AW_RELEASE_PASSED	2	/* its successor holds the slot */

extern AwSettleMark aw_set_lease_settle(const char *key, int64 token, AwLeaseState *prev);
extern void aw_set_lease_unsettle(const char *key, int64 token, AwLeaseState prev);
extern int	aw_set_lease_release(const char *key, int64 token, char *topic);
extern int32 aw_set_reserve_handed(const char *topic, AwSettledLease *settled, int n,
								   int32 *left);
extern int	aw_set_expire_leases(TimestampTz now, AwReleased *out, int max_out,
								 TimestampTz *next);
extern int32 aw_set_free_slots(const char *topic);
extern bool aw_set_topic_limited(const char *topic, int32 *max_in_flight);
extern AwLimitResult aw_set_limit_promise(const char *topic, int32 max_in_flight,
										  int32 n_leases, int32 *old_max);
extern bool aw_set_limit_repromise(const char *topic, int32 max_in_flight, int32 n_leases);
extern int32 aw_set_limit_end(const char *topic, int32 max_in_flight, int32 old_max,
							  const AwLiveLease *leases, int32 n_leases, bool apply);
extern AwLimitResult aw_set_limit_load(const char *topic, int32 max_in_flight,
									   const AwLiveLease *leases, int32 n_leases,
									   int32 *wake);
extern void aw_set_forget_limits(Oid dbid);
extern void aw_set_count_limit_not_loaded(void);
extern int64 aw_set_lease_count(void);

/* the worker's timers */
extern TimestampTz aw_set_next_retry(void);
extern void aw_set_recover_in_flight(void);
extern TimestampTz aw_set_expire(TimestampTz now);

/* the views */
extern void aw_set_counters(AwCounters *out);
extern AwParkedRow *aw_set_copy_entries(int *n);
extern AwTopicRow *aw_set_copy_topics(int *n);

#endif							/* AW_SET_H */
