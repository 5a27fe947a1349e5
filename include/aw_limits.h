/*-------------------------------------------------------------------------
 *
 * aw_limits.h
 *	  Known capacity: set_limit(), topic locks, loading limits, and the one
 *	  entry point of claims and transaction ends into the lease ledger
 *	  (limits.c): reserve, open the leases, return reservations, apply at
 *	  commit, undo at abort.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_limits.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_LIMITS_H
#define AW_LIMITS_H

#include "datatype/timestamp.h"
#include "storage/lockdefs.h"

#include "aw_lease_ledger.h"
#include "aw_names.h"

/* the largest max_in_flight set_limit() takes */
#define AW_MAX_IN_FLIGHT 1000000

/* what loading one topic's limit came to (aw_limits_load_topic) */
typedef enum AwLoadResult
{
	AW_LOAD_DONE,				/* in shared memory, or no limit */
	AW_LOAD_BUSY,				/* someone holds the topic's lock: later */
	AW_LOAD_FULL				/* the topic table or the pool has no room */
} AwLoadResult;

/*
 * A claim's reservation of slots of a limited topic (aw_limits_reserve):
 * allocated before the slots are reserved; the claim counts off what it
 * turns into leases or gives back, and whatever is left when the
 * transaction ends without that goes back.
 */
typedef struct AwReserveRecord
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	int32		left;			/* slots of its limit not yet leased or
								 * returned */
	int32		rate_left;		/* starts of its rate not yet logged or
								 * returned */
	/* settled leases whose successors' slots are among those left */
	AwSettledLease *handing;
	int32		n_handing;
	uint64		ready_gen;		/* the topic's readiness before reserving
								 * (doc/design.md, Wake rules: 3) */
} AwReserveRecord;

extern void aw_limits_init(void);
extern void aw_lock_topic(const char *topic, LOCKMODE mode);
extern void aw_lock_topics_shared(char **topics, int ntopics, uint64 mask);
extern Oid	aw_limits_table(void);
extern AwLoadResult aw_limits_load_topic(const char *topic);
extern uint64 aw_limits_missing(char **topics, int ntopics, uint64 mask, bool served,
								bool warn);
extern TimestampTz aw_limits_expire(TimestampTz now);
extern bool aw_limits_topic_limited(const char *topic, int32 *max_in_flight);

/* a claim (claim.c): reserve, then open the leases and return the rest */
extern AwReserveRecord *aw_limits_reserve(const char *topic, int32 want,
										  AwSettledLease *settled, int max_settled,
										  int32 *allow, int32 *handed, bool *limited);
extern void aw_limits_open_leases(const AwLiveLease *leases,
								  const AwSettledLease **preds, int n);
extern void aw_limits_return(AwReserveRecord *rec, int32 used);

/* a settle of a row whose lease had a record: mark it (xact.c, at the call) */
extern AwSettleMark aw_limits_mark_settled(const char *key, int64 token,
										   AwLeaseState *prev);

/* the transaction callbacks (xact.c): never raise */
extern void aw_limits_at_commit_leases(const AwLiveLease *leases, int n);
extern void aw_limits_at_commit_settle(const char *key, int64 token, bool pulse);
extern void aw_limits_at_commit_limit(const char *topic, int32 max_in_flight,
									  int32 old_max, const AwLiveLease *leases,
									  int32 n_leases, bool apply);
extern void aw_limits_at_abort_reserve(const AwReserveRecord *rec);
extern void aw_limits_at_abort_leases(const AwLiveLease *leases, int n);
extern void aw_limits_at_abort_settle(const char *key, int64 token, AwLeaseState prev);
extern void aw_limits_at_abort_limit(const char *topic, int32 max_in_flight,
									 int32 old_max, const AwLiveLease *leases,
									 int32 n_leases);

#endif							/* AW_LIMITS_H */
