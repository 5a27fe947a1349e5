/*-------------------------------------------------------------------------
 *
 * aw_prepared.h
 *	  Wakes a prepared transaction owes blocked claimers at its second
 *	  phase (COMMIT PREPARED or ROLLBACK PREPARED, in any session).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_prepared.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_PREPARED_H
#define AW_PREPARED_H

#include "datatype/timestamp.h"

#include "aw_names.h"

/* the most topics one prepared transaction keeps wakes for, one by one */
#define AW_PREPARED_TOPICS 16

/* what a prepared transaction did to one topic */
typedef struct AwPreparedTopic
{
	char		name[AW_TOPIC_MAXLEN + 1];
	int64		ready;			/* rows made claimable: woken at commit */
	int64		released;		/* rows locked, not taken: woken either way */
	int64		claimed;		/* rows claimed: claimable again at rollback */
	int64		settled;		/* settles undone at rollback ... */
	TimestampTz settled_fence;	/* ... the earliest lease end among them */
	int64		fences;			/* fences written: told at commit ... */
	TimestampTz fence;			/* ... the earliest of them */
} AwPreparedTopic;

extern Size aw_prepared_shmem_size(void);
extern void aw_prepared_shmem_init(void);
extern void aw_prepared_init(void);

extern void aw_prepared_stash(const AwPreparedTopic *topics, int ntopics, bool overflow);

#endif							/* AW_PREPARED_H */
