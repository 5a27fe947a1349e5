/*-------------------------------------------------------------------------
 *
 * aw_lease_ledger.h
 *	  The lease ledger of limited topics: their limits, the slots claims
 *	  reserve, the record of each lease and the pool of records
 *	  (lease_ledger.c; doc/design.md, Limits).  Only limits.c calls it from
 *	  outside the set, and the views read its counts.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_lease_ledger.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_LEASE_LEDGER_H
#define AW_LEASE_LEDGER_H

#include "datatype/timestamp.h"
#include "lib/ilist.h"

#include "aw_names.h"

/*
 * The capacity fields of a topic of the set (known capacity, G8), kept in
 * the set's topic entry but owned by the ledger: only lease_ledger.c reads
 * or writes them; the set's other files ask it (aw_capacity_idle,
 * aw_capacity_in_flight).  A limited topic is never recycled.
 */
typedef struct AwCapacity
{
	int32		max_in_flight;	/* 0: unlimited */
	int32		reserved;		/* slots claims in progress reserved */
	int32		n_leases;		/* lease records: live leases */
	int32		untracked;		/* live leases the pool had no room for */
	int32		handoffs;		/* slots two leases of a hand-off share */
	int32		handing;		/* reservations that share a lease's slot */
	TimestampTz untracked_until;	/* ... released together at this time */
	int32		limit_pins;		/* set_limit() calls not yet ended */
	int32		limit_floor;	/* the largest limit they set (while pinned) */
	int64		hold_floor;		/* records they promised (while pinned) */
	int32		limit_held;		/* of the sum of limits: max_in_flight, or
								 * limit_floor if larger */
	int64		pool_held;		/* records of the pool it holds (aw_topic_hold) */
	dlist_head	leases;			/* its lease records */
} AwCapacity;

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
 * transaction may inherit its slot (the zero-gap hand-off).  pulse: the
 * settle was not park(), so the slot may go to a parked row.
 */
typedef struct AwSettledLease
{
	char		key[AW_KEY_MAXLEN + 1];
	int64		token;
	bool		pulse;
} AwSettledLease;

/*
 * The states of a lease record (lease_ledger.c): OPEN while the
 * claim that took it is open, LIVE once it committed, SETTLED while a
 * settle of it by an open transaction (owner) has not ended.
 */
typedef enum AwLeaseState
{
	AW_LEASE_OPEN,
	AW_LEASE_LIVE,
	AW_LEASE_SETTLED
} AwLeaseState;

/* what aw_ledger_settle did */
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

/* claims: reservations, then leases */
extern int32 aw_ledger_reserve(const char *topic, int32 want, AwSettledLease *settled,
								int n_settled, int32 *handed, bool *limited, int32 *rated,
								bool *blocked);
extern void aw_ledger_unreserve(const char *topic, int32 n,
								const AwSettledLease *handing, int n_handing);
extern bool aw_ledger_open(const AwLiveLease *leases, const AwSettledLease **preds,
						   int n);
extern void aw_ledger_commit(const AwLiveLease *leases, int n);
extern void aw_ledger_rollback(const AwLiveLease *leases, int n);

/* settles */
/* what aw_ledger_release did */
#define AW_RELEASE_NONE		0	/* no such live lease */
#define AW_RELEASE_FREED	1	/* its slot is free */
#define AW_RELEASE_PASSED	2	/* its successor holds the slot */

extern AwSettleMark aw_ledger_settle(const char *key, int64 token, AwLeaseState *prev);
extern void aw_ledger_unsettle(const char *key, int64 token, AwLeaseState prev);
extern int	aw_ledger_release(const char *key, int64 token, char *topic);

/* lease ends, limits */
extern int	aw_ledger_expire(TimestampTz now, AwReleased *out, int max_out,
							 TimestampTz *next);
extern int32 aw_ledger_free_slots(const char *topic);
extern bool aw_ledger_topic_limited(const char *topic, int32 *max_in_flight);
extern AwLimitResult aw_ledger_limit_promise(const char *topic, int32 max_in_flight,
											 int32 n_leases, int32 *old_max);
extern bool aw_ledger_limit_repromise(const char *topic, int32 max_in_flight,
									  int32 n_leases);
extern int32 aw_ledger_limit_end(const char *topic, int32 max_in_flight, int32 old_max,
								 const AwLiveLease *leases, int32 n_leases, bool apply);
extern AwLimitResult aw_ledger_limit_load(const char *topic, int32 max_in_flight,
										  const AwLiveLease *leases, int32 n_leases,
										  int32 *wake);
extern void aw_ledger_forget_limits(Oid dbid);
extern void aw_ledger_count_limit_not_loaded(void);
extern int64 aw_ledger_lease_count(void);

#endif							/* AW_LEASE_LEDGER_H */
