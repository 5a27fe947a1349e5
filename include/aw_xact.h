/*-------------------------------------------------------------------------
 *
 * aw_xact.h
 *	  Shared-memory work recorded by a transaction and settled at its end.
 *
 *	  park(), pulse(), complete() and the other outbox functions change the
 *	  table in the caller's transaction but may only change the parked set
 *	  once that transaction's outcome is known.  They record what to do here;
 *	  the transaction callbacks in xact.c do it at COMMIT or undo it at
 *	  ROLLBACK and ROLLBACK TO SAVEPOINT.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_xact.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_XACT_H
#define AW_XACT_H

#include "aw_set.h"

/*
 * A pending FENCED entry made by park(): confirm at commit, abandon at
 * abort.  aw_xact_prepare_park allocates the record before the set is
 * changed (so nothing can fail between the two); the caller fills in the
 * generation and the saved entry that aw_set_park returns.  A record whose
 * generation stays 0 is ignored.
 */
typedef struct AwParkRecord
{
	uint64		generation;
	AwSavedEntry saved;
} AwParkRecord;

extern AwParkRecord *aw_xact_prepare_park(const char *key);

/*
 * A re-offer round: allocated and recorded before entries are taken from
 * the set, so that however the transaction ends -- ERROR, FATAL, a crash of
 * the statement -- the entries it holds in flight go back with their slots.
 */
extern AwTakeBatch *aw_xact_take_batch(const char *topic, int max);

/* the row left the parked state: forget the entry the call found, at commit */
extern void aw_xact_record_forget(const char *key);

/* a capacity pulse, added up per topic, delivered at commit */
extern void aw_xact_record_pulse(const char *topic, int32 slots);

/* rows of a topic become claimable at commit: wake as many waiters */
extern void aw_xact_record_ready(const char *topic, int64 rows);

/* rows of a topic were claimed: if the claim rolls back, they are claimable again */
extern void aw_xact_record_claimed(const char *topic, int64 rows);

/* a row of a topic gets a fence: tell the waiters' worker at commit */
extern void aw_xact_record_fence(const char *topic, TimestampTz fence);

#endif							/* AW_XACT_H */
