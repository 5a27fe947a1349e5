/*-------------------------------------------------------------------------
 *
 * aw_claim.h
 *	  Claims, and the claim that follows a settle (the zero-gap hand-off).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_claim.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_CLAIM_H
#define AW_CLAIM_H

#include "fmgr.h"

extern void aw_claim_next(FunctionCallInfo fcinfo, const char *topic, int32 next_rows,
						  int64 lease, bool spend_parked);
extern void aw_claim_next_topics(FunctionCallInfo fcinfo, const char *const *topics,
								 const int32 *settled, int ntopics, int32 next_rows,
								 int64 lease, bool spend_parked);

#endif							/* AW_CLAIM_H */
