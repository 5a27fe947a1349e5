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

/* what loading one topic's limit came to (aw_limits_load_topic) */
typedef enum AwLoadResult
{
	AW_LOAD_DONE,				/* in shared memory, or no limit */
	AW_LOAD_BUSY,				/* someone holds the topic's lock: later */
	AW_LOAD_FULL				/* the topic table or the pool has no room */
} AwLoadResult;

extern void aw_limits_init(void);
extern void aw_lock_topic(const char *topic, LOCKMODE mode);
extern void aw_lock_topics_shared(char **topics, int ntopics, uint64 mask);
extern Oid	aw_limits_table(void);
extern AwLoadResult aw_limits_load_topic(const char *topic);
extern uint64 aw_limits_missing(char **topics, int ntopics, uint64 mask, bool served,
								bool warn);
extern TimestampTz aw_limits_expire(TimestampTz now);

#endif							/* AW_LIMITS_H */
