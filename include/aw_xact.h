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

#include "aw_lease_ledger.h"
#include "aw_limits.h"			/* AwReserveRecord */
#include "aw_parked_set.h"
#include "aw_pulse_spend.h"

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
extern AwRound *aw_xact_prepare_round(const char *topic, int max);

extern AwReserveRecord *aw_xact_prepare_reserve(const char *topic);

/*
 * Leases a claim took on a limited topic: allocated before they are
 * opened in the set; at commit they are the claim's, at abort they are
 * released (the claimed rows wake claimers as claimable rows).
 */
extern AwLiveLease *aw_xact_prepare_leases(int n);

/*
 * A settle (complete, fail, park, dead_letter) of a row whose lease
 * carried token: at commit the lease's slot is released -- once -- and
 * wakes one blocked claimer, and unless the settle was park() it is a
 * pulse of one slot too; at abort, if the row's fence had passed (its
 * lease ended), the row is claimable again and wakes one blocked claimer.
 */
extern void aw_xact_record_settle(const char *key, int64 token, const char *topic,
								  bool limited, bool pulse, TimestampTz old_fence);

/* the leases of a limited topic this transaction settled, newest first */
extern int	aw_xact_settled_leases(const char *topic, AwSettledLease *out, int max);

/*
 * set_limit(): recorded before the pool is promised anything; the caller
 * sets the flag returned, and old_max, once aw_ledger_limit_promise succeeded.
 * At commit the limit applies (with the live leases found) and the
 * claimers its new slots can take are woken; at abort the promise is
 * taken back.
 */
typedef struct AwLimitRecord
{
	bool		promised;
	int32		old_max;
} AwLimitRecord;

/*
 * Called just before the commit of a set_limit() that gives a topic its
 * first limit (when it may still raise): count the topic's live leases
 * again, replacing *leases and *n_leases.
 */
typedef void (*aw_recount_fn) (const char *topic, int32 max_in_flight,
							   AwLiveLease **leases, int32 *n_leases);

extern AwLimitRecord *aw_xact_record_limit(const char *topic, int32 max_in_flight,
										   AwLiveLease *leases, int32 n_leases,
										   aw_recount_fn recount);

/*
 * set_rate() (pause false) or pause()/resume() (pause true): recorded
 * before the set promises anything; the caller sets promised once
 * aw_ledger_rate_promise succeeded.  Only the topic's last call of each
 * kind in the transaction applies at commit (rates.c).
 */
typedef struct AwRateSetting
{
	bool		promised;
	bool		pause;			/* pause() or resume(), else set_rate() */
	int32		max_starts;		/* set_rate: 0 removes the rate */
	int64		per;
	bool		had_rate;		/* set_rate: the table held a rate before */
	TimestampTz paused_until;	/* pause: 0 for resume() */
	TimestampTz had_paused_until;	/* pause: the table's pause before, or 0 */
} AwRateSetting;

extern AwRateSetting *aw_xact_record_rate(const char *topic, const AwRateSetting *s);
extern bool aw_xact_rate_before(const char *topic, bool *rate_set, bool *had_rate,
								bool *pause_set, TimestampTz *had_paused_until);

/* rows locked and not taken by a claim: claimable again when it ends */
extern void aw_xact_record_released(const char *topic, int64 rows);

/* the row left the parked state: forget the entry the call found, at commit */
extern void aw_xact_record_forget(const char *key);
extern bool aw_xact_will_forget(const char *key);

/* a capacity pulse, added up per topic, delivered at commit */
extern void aw_xact_record_pulse(const char *topic, int32 slots);
extern void aw_xact_record_handoff_pulse(const char *topic);

/* rows of a topic become claimable at commit: wake as many waiters */
extern void aw_xact_record_ready(const char *topic, int64 rows);

/* rows of a topic were claimed: if the claim rolls back, they are claimable again */
extern void aw_xact_record_claimed(const char *topic, int64 rows);

/* a row of a topic gets a fence: tell the waiters' worker at commit */
extern void aw_xact_record_fence(const char *topic, TimestampTz fence);

/* a row written with fence at now: claimable at commit, or at its fence */
extern void aw_xact_record_visibility(const char *topic, TimestampTz fence,
									  TimestampTz now);

#endif							/* AW_XACT_H */
