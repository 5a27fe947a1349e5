/*-------------------------------------------------------------------------
 *
 * aion_wake.c
 *	  Module load: settings, hooks, the shared memory request and the
 *	  background workers.
 *
 *	  This file stands on top of the others: it wires each part in and
 *	  nothing calls into it.
 *	  aion_wake only works when preloaded through shared_preload_libraries,
 *	  because its parked set lives in the main shared memory segment.  A
 *	  library loaded any other way (CREATE EXTENSION, pg_restore, a plain
 *	  LOAD) must still load without error, so _PG_init then does nothing and
 *	  every SQL function raises 55000 with a hint naming the setting.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/aion_wake.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "aion_wake.h"
#include "aw_limits.h"
#include "aw_monitor.h"
#include "aw_plans.h"
#include "aw_prepared.h"
#include "aw_parked_set.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker.h"
#include "aw_worker_slots.h"

AW_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void aw_shmem_request(void);
static void aw_shmem_startup(void);

void		_PG_init(void);

/*
 * Module load callback.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	aw_define_settings();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = aw_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = aw_shmem_startup;

	aw_plans_init();
	aw_limits_init();
	aw_worker_slots_init();
	aw_prepared_init();
	aw_register_workers();
}

/*
 * Request the shared memory of the set, the waiter registry and the worker
 * slots, and the LWLock tranche.  On 15 and later this is only allowed
 * here.
 *
 * The locks of aion_wake's shared state (doc/design.md, Locks: Inventory):
 *   - AW_LOCK_SET, the set lock: every field of the parked set -- entries,
 *     topics, their lists, the fence and lease heaps, the work and quiet
 *     lists, limits, reservations, lease records, counters
 *     (aw_set_internal.h; parked_set.c, pulse_spend.c, lease_ledger.c,
 *     set_views.c);
 *   - AW_LOCK_WAITERS, the waiter lock: the waiter slots, per-topic queues,
 *     inboxes, readiness numbers and fence bookkeeping (waiters.c);
 *   - AW_LOCK_PREPARED: the wakes kept for prepared transactions
 *     (prepared.c);
 *   - AW_LOCK_MONITOR: the table of per-topic claim counters
 *     (monitor.c), whose counters are atomics added under it held shared;
 *     the histograms and the lost-wake count are atomics read and added
 *     without a lock;
 *   - one spinlock per worker slot: that slot's fields (worker_slots.c);
 *   - an atomic count of waiters, and an atomic registration number per
 *     waiter slot, read without a lock (waiters.c).
 * No code holds two of the LWLocks at once, and none is held across a
 * statement, a heavyweight lock, a latch wait or anything that may raise:
 * a caller that needs two copies what it needs under the first, releases
 * it, then takes the second.  The heavyweight locks (topic, extension,
 * rows, tables) and their order are in doc/design.md, Locks.
 */
static void
aw_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(add_size(aw_set_shmem_size(),
													  aw_waiters_shmem_size()),
											 aw_worker_slots_shmem_size()),
									aw_prepared_shmem_size()));
	RequestAddinShmemSpace(aw_monitor_shmem_size());
	RequestNamedLWLockTranche(AW_TRANCHE_NAME, AW_NUM_LOCKS);
}

static void
aw_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	aw_set_shmem_init();
	aw_waiters_shmem_init();
	aw_worker_slots_shmem_init();
	aw_prepared_shmem_init();
	aw_monitor_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

