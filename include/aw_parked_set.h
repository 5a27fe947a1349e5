/*-------------------------------------------------------------------------
 *
 * aw_parked_set.h
 *	  The parked set: rows turned away for want of capacity, their topics,
 *	  and the life of a park (parked_set.c).
 *
 *	  The set is an accelerator, never a source of truth: every fence it
 *	  knows of is also in the table, so losing it (a crash-restart) costs
 *	  latency only.  It lives in the main shared memory segment, sized once
 *	  at postmaster start; its structures are private to its own files
 *	  (aw_set_internal.h: parked_set.c, pulse_spend.c, lease_ledger.c,
 *	  set_views.c), and every operation they export takes the set lock
 *	  itself and never raises while holding it.
 *
 *	  The set decides, it does not wake: an operation that leaves a slot to
 *	  spend or a retry to time says so in an AwWake, and the caller wakes a
 *	  blocked claimer or the worker after the lock is released
 *	  (aw_waiters_wake_for).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_parked_set.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_PARKED_SET_H
#define AW_PARKED_SET_H

#include "datatype/timestamp.h"

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

/* shared memory (from aion_wake.c's hooks) */
extern Size aw_set_shmem_size(void);
extern void aw_set_shmem_init(void);
extern bool aw_set_attached(void);

/* parks: park(), park_pending(), and their ends */
extern AwParkResult aw_set_park(AwKind kind, const char *key, const char *topic,
								int32 attempt, TimestampTz parked_at,
								TimestampTz fence, uint64 *generation,
								AwSavedEntry *saved);
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

/* the worker's timers */
extern void aw_set_recover_in_flight(void);
extern TimestampTz aw_set_expire(TimestampTz now);

#endif							/* AW_PARKED_SET_H */
