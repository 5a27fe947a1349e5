/*-------------------------------------------------------------------------
 *
 * aw_limits.h
 *	  Known capacity: set_limit(), topic locks, loading limits.
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

/* the largest max_in_flight set_limit() takes */
#define AW_MAX_IN_FLIGHT 1000000

extern void aw_lock_topic(const char *topic, LOCKMODE mode);
extern void aw_limits_ensure_loaded(void);
extern TimestampTz aw_limits_expire(TimestampTz now);

#endif							/* AW_LIMITS_H */
