/*-------------------------------------------------------------------------
 *
 * aw_rates.h
 *	  Rates and pauses (G10): set_rate(), pause(), resume(), applying them
 *	  at commit, loading them after shared memory is lost, and the worker's
 *	  wakes when a rated or paused topic may start rows again
 *	  (src/rates.c).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_rates.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_RATES_H
#define AW_RATES_H

#include "datatype/timestamp.h"

#include "aw_xact.h"

#define AW_MAX_STARTS 1000000

extern Oid	aw_rates_table(void);
extern void aw_rates_at_end(const char *topic, const AwRateSetting *s, bool apply);
extern bool aw_rates_load_topic(const char *topic);
extern TimestampTz aw_rates_wake(TimestampTz now);

#endif							/* AW_RATES_H */
