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

/* a pending FENCED entry made by park(): confirm at commit, abandon at abort */
extern void aw_xact_record_park(const char *key, uint64 generation,
								const AwSavedEntry *saved);

/* a confirmed entry a re-offer removed: put back if the re-offer rolls back */
extern void aw_xact_record_reoffer(const char *key, const AwSavedEntry *saved);

/* the row left the parked state: forget the entry the call found, at commit */
extern void aw_xact_record_forget(const char *key);

/* a capacity pulse, added up per topic, delivered at commit */
extern void aw_xact_record_pulse(const char *topic, int32 slots);

/* rows of a topic become claimable at commit: wake as many waiters */
extern void aw_xact_record_ready(const char *topic, int64 rows);

/* rows of a topic were claimed: if the claim rolls back, they are claimable again */
extern void aw_xact_record_claimed(const char *topic, int64 rows);

/* a row of a topic gets a fence in the future: tell the waiters' worker */
extern void aw_xact_record_fence(const char *topic, TimestampTz fence);

#endif							/* AW_XACT_H */
