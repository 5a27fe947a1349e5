/*-------------------------------------------------------------------------
 *
 * aw_reoffer.h
 *	  Turning pulse slots into re-offered rows.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_reoffer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_REOFFER_H
#define AW_REOFFER_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

/*
 * A re-offer that claims: each row moved goes straight from its parked
 * fence to a lease for the caller (one UPDATE), and row() receives it
 * (the outbox's columns from column first on).
 */
typedef struct AwReofferClaim
{
	TimestampTz lease_end;
	void		(*row) (void *arg, HeapTuple tup, TupleDesc desc, int first);
	void	   *arg;
} AwReofferClaim;

/* how far the next round of a re-offer looks (reoffer.c) */
typedef struct AwReoffer
{
	int			want;			/* look-ahead candidates beyond the slots */
	int			max;			/* candidates the next round may take */
	int			slot_cap;		/* pulse slots it may still spend; 0: all */
	int			own_slots;		/* slots the caller brings */
	int			own_unspent;	/* ... that no round could spend */
	bool		done;			/* nothing left to re-offer now */
	AwReofferClaim *claim;		/* claim the rows moved, or NULL */
} AwReoffer;

extern void aw_reoffer_start(AwReoffer *r);
extern int64 aw_reoffer_step(const char *topic, uint64 add_slots, AwReoffer *r,
							 bool notify_ready, List **moved_keys);
extern int64 aw_reoffer_topic(const char *topic, uint64 add_slots,
							  bool notify_ready, List **moved_keys);

#endif							/* AW_REOFFER_H */
