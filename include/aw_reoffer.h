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

#include "nodes/pg_list.h"

/* how far the next round of a re-offer looks (reoffer.c) */
typedef struct AwReoffer
{
	int			want;			/* look-ahead candidates beyond the slots */
	int			max;			/* candidates the next round may take */
	bool		done;			/* nothing left to re-offer now */
} AwReoffer;

extern void aw_reoffer_start(AwReoffer *r);
extern int64 aw_reoffer_step(const char *topic, uint64 add_slots, AwReoffer *r,
							 bool notify_ready, List **moved_keys);
extern int64 aw_reoffer_topic(const char *topic, uint64 add_slots,
							  bool notify_ready, List **moved_keys);

#endif							/* AW_REOFFER_H */
