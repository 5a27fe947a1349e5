/*-------------------------------------------------------------------------
 *
 * aion_wake.h
 *	  What every part of aion_wake shares: the library's version and the
 *	  LWLocks of its tranche.
 *
 *	  Each part of the extension has a header of its own, named for its
 *	  source (include/aw_X.h declares src/X*.c).  This one is the base they
 *	  stand on, like postgres.h for core: it includes nothing of the
 *	  project's but the compatibility header, so any header may include it
 *	  without an arrow running back up.  The tranche is requested in
 *	  aion_wake.c, which also keeps the inventory of every lock.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aion_wake.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AION_WAKE_H
#define AION_WAKE_H

/* what differs between PostgreSQL majors: AW_MY_PROCNO, ... */
#include "aw_compat.h"

/*
 * The library's version, default_version of aion_wake.control (on 18 and
 * later in its magic block; 019_wait_events.pl checks that they agree).
 */
#define AW_VERSION				"1.2"

/* the named LWLock tranche of aion_wake (aion_wake.c requests it) */
#define AW_TRANCHE_NAME			"aion_wake"

/*
 * The LWLocks of the tranche, one per shared structure.  No code holds two
 * of them at once (doc/design.md, Locks: Order); what each guards is in
 * aion_wake.c, beside the request.
 */
typedef enum AwLockId
{
	AW_LOCK_SET = 0,			/* the parked set (parked_set.c and its
								 * files, aw_set_internal.h) */
	AW_LOCK_WAITERS,			/* the waiter registry (waiters.c) */
	AW_LOCK_PREPARED,			/* the prepared transactions' wakes
								 * (prepared.c) */
	AW_LOCK_MONITOR,			/* the topic counters (monitor.c) */
	AW_NUM_LOCKS
} AwLockId;

/* The LWLock id of the tranche; valid once shared memory is attached. */
#define AW_LWLOCK(id)	(&(GetNamedLWLockTranche(AW_TRANCHE_NAME))[(id)].lock)

#endif							/* AION_WAKE_H */
