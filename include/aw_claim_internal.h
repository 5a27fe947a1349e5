/*-------------------------------------------------------------------------
 *
 * aw_claim_internal.h
 *	  What claim.c and claim_wait.c share: one call of claim() and its
 *	  topics, one claim attempt, and the blocking wait.  Nothing else
 *	  includes it; the rest of the extension uses aw_claim.h.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_claim_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_CLAIM_INTERNAL_H
#define AW_CLAIM_INTERNAL_H

#include "funcapi.h"
#include "utils/timestamp.h"

#include "aw_limits.h"
#include "aw_monitor.h"
#include "aw_names.h"
#include "aw_waiters.h"

/* columns of aion_wake.outbox: 9 in the 1.0 schema, 10 in 1.1, 11 from 1.2 */
#define AW_OUTBOX_MAX_NATTS 11

/* one topic of a claim */
typedef struct AwClaimTopic
{
	char		name[AW_TOPIC_MAXLEN + 1];
	int32		allow;			/* rows this attempt may take of it */
	int32		got;			/* rows it took */
	int32		excess;			/* rows it locked and did not take */
	int32		share;			/* of the rows wanted, this round (several topics) */
	int32		got_before;		/* got when this round began */
	bool		limited;
	AwReserveRecord *reserve;
	/* the zero-gap hand-off: leases this transaction settled pass their slots */
	AwSettledLease *from;		/* the leases, handed of them */
	int32		handed;
	int32		own_slots;		/* slots spent on the oldest confirmed parks first */
	/* monitoring (monitor.c): what this call adds to the topic's counters */
	AwTopicCounts mon;
	TimestampTz mon_fence;		/* the oldest fence past mon_after of the
								 * rows the probe under way took; 0: none */
} AwClaimTopic;

/* one call of claim() */
typedef struct AwClaim
{
	ReturnSetInfo *rsinfo;
	int			natts;			/* columns of aion_wake.outbox */
	int32		max_rows;
	int64		lease;
	bool		served;
	int			ntopics;
	char	   *names[AW_WAIT_MAX_TOPICS];
	AwClaimTopic topics[AW_WAIT_MAX_TOPICS];
	/*
	 * Settles with next_rows (aw_claim_next_topics): the slots their rows
	 * freed, per topic, spent first on the oldest confirmed parks of the
	 * unlimited ones; and the rows settled of each topic, whose leases may
	 * pass their slots to this claim on a limited one (AW_HANDOFF_MAX of
	 * them at least).
	 */
	int32		settle_slots[AW_WAIT_MAX_TOPICS];
	int32		settled[AW_WAIT_MAX_TOPICS];
	bool		warned;			/* a missing limit was reported */
	uint64		missing;		/* topics whose limit is not loaded yet */
	/* rows taken by the current attempt */
	uint64		claimed;
	AwLiveLease *leases;		/* of limited topics */
	int			nleases;
	int			leases_room;
	TimestampTz lease_end;
	/* monitoring: the lost-wake detector (claim_wait.c) */
	TimestampTz mon_after;		/* rows fenced after this count in mon_fence;
								 * DT_NOEND: none */
	TimestampTz mon_looked;		/* the clock of the last attempt's look */
} AwClaim;

/* one claim attempt over the topics in mask (claim.c) */
extern uint64 aw_claim_once(AwClaim *c, uint64 mask, uint64 spend);

/* add the call's counts to its topics' (claim.c) */
extern void aw_claim_monitor_flush(AwClaim *c);

/* a row the first look leased */
typedef struct AwDirectRow
{
	Datum		values[AW_OUTBOX_MAX_NATTS];	/* in the order of a claim's result */
	bool		nulls[AW_OUTBOX_MAX_NATTS];
	TimestampTz old_fence;		/* its fence before */
	bool		was_parked;
} AwDirectRow;

/* the first look of a claim of one topic without the executor (claim_direct.c) */
extern bool aw_claim_direct_may(int32 below);
extern bool aw_claim_direct(const char *topic, int32 below, int max_rows,
							TimestampTz now, TimestampTz lease_end,
							AwDirectRow **rows, int *nrows, int16 *looked);

/* claim(..., wait => wait): block until rows are claimed or wait ends */
extern void aw_claim_wait(AwClaim *c, int64 wait);

#endif							/* AW_CLAIM_INTERNAL_H */
