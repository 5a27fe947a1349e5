/*-------------------------------------------------------------------------
 *
 * aw_waiters.h
 *	  The waiter registry: claimers blocked in claim(..., wait => ...) and
 *	  the exact wake-ups that end their wait.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_waiters.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_WAITERS_H
#define AW_WAITERS_H

#include "datatype/timestamp.h"

#include "aw_names.h"

/*
 * What an operation of the parked set leaves to be woken once its lock is
 * released: the set decides, its callers wake (aw_waiters_wake_for).
 */
typedef enum AwWake
{
	AW_WAKE_NONE = 0,
	AW_WAKE_WORKER,				/* the worker must look (a retry time, an
								 * entry put back, slots left over) */
	AW_WAKE_SPENDER				/* a slot of the topic to spend: a claimer
								 * blocked on it, or else the worker */
} AwWake;

/* a topic whose rows the worker must look at (aw_waiters_due_fences) */
typedef struct AwFenceCheck
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	TimestampTz checked_upto;	/* rows whose fence is past this are new */
	int			waiters;		/* count them up to this many */
} AwFenceCheck;

extern Size aw_waiters_shmem_size(void);
extern void aw_waiters_shmem_init(void);

/* the most topics one claim may wait on */
#define AW_WAIT_MAX_TOPICS 64

/* the blocked claimer's side */
extern void aw_waiter_register(char **topics, int ntopics);
extern uint64 aw_waiter_rearm(void);
extern void aw_waiter_leave(uint64 unused);
extern bool aw_waiter_is_registered(int procno, uint64 registration);
extern const uint64 *aw_waiter_events(void);
extern bool aw_waiter_wake_missed(int i, uint64 events_before, TimestampTz fence);

/* the wakers' side; both are cheap when nobody waits and never raise */
extern int64 aw_waiters_wake(Oid dbid, const char *topic, int64 rows);
extern int64 aw_waiters_wake_starts(Oid dbid, const char *topic, int64 n);
extern void aw_waiters_fence_hint(Oid dbid, const char *topic, TimestampTz fence,
								  int64 rows);
extern bool aw_waiters_wake_spender(Oid dbid, const char *topic);
extern void aw_waiters_wake_for(AwWake wake, Oid dbid, const char *topic);
extern void aw_waiters_wake_database(Oid dbid);
extern void aw_waiters_mark_ready(Oid dbid, const char *topic);
extern uint64 aw_waiters_ready_gen(Oid dbid, const char *topic);

/* the worker's side */
extern int	aw_waiters_due_fences(TimestampTz now, AwFenceCheck *out, int max_out);
extern void aw_waiters_fence_result(const char *topic, TimestampTz upto,
									int64 visible_rows, TimestampTz next_fence);
extern TimestampTz aw_waiters_next_fence(void);

/* for the views */
extern int	aw_waiters_total(void);
extern int	aw_waiters_of_topic(Oid dbid, const char *topic);

#endif							/* AW_WAITERS_H */
