/*-------------------------------------------------------------------------
 *
 * aw_compat.h
 *	  Every difference between the PostgreSQL majors aion_wake supports
 *	  (15, 17, 18, 19) that its code meets, in one place.
 *
 *	  This is the only file that tests PG_VERSION_NUM.  Each guard below
 *	  names the PostgreSQL change it follows; the rest of the code uses the
 *	  macros and inline functions defined here and reads the same on every
 *	  major.  test/versions/run.sh builds with -Werror and runs every suite
 *	  on each major.
 *
 *	  Changes that needed no guard, only an #include that every major
 *	  accepts, are listed at the end.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_COMPAT_H
#define AW_COMPAT_H

#include "utils/wait_event.h"

#if PG_VERSION_NUM < 150000
#error "aion_wake needs PostgreSQL 15 or later"
#endif

/*
 * Process numbers.  PostgreSQL 17 replaced BackendId by ProcNumber
 * ("Replace BackendIds with 0-based ProcNumbers"): PGPROC.pgprocno is gone
 * and a backend finds its own index into the PGPROC array in
 * MyProcNumber.  Both are the index GetPGProcByNumber() takes.
 */
#if PG_VERSION_NUM >= 170000
#define AW_MY_PROCNO	MyProcNumber
#else
#define AW_MY_PROCNO	(MyProc->pgprocno)
#endif

/*
 * A WaitEventSet that lives as long as the process.  PostgreSQL 17 made
 * WaitEventSets resources of a ResourceOwner: CreateWaitEventSet() takes
 * an owner instead of a memory context, and NULL means "owned by nobody,
 * allocated in TopMemoryContext", which is what 15 and 16 get from
 * TopMemoryContext.
 */
#if PG_VERSION_NUM >= 170000
#define aw_create_wait_event_set(nevents) \
	CreateWaitEventSet(NULL, (nevents))
#else
#define aw_create_wait_event_set(nevents) \
	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/*
 * A fixed-size hash table in the main shared memory segment.  PostgreSQL
 * 19 reworked shared memory allocation (ShmemRequestStruct/
 * ShmemRequestHash; ShmemInitStruct and ShmemInitHash are kept as the
 * "legacy" functions), and ShmemInitHash() lost its separate initial and
 * maximum sizes: it takes one number of elements.  aion_wake's tables are
 * HASH_FIXED_SIZE, so both sizes were always the same.
 */
#if PG_VERSION_NUM >= 190000
#define aw_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (info), (flags))
#else
#define aw_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

/*
 * The planner hook.  PostgreSQL 19 passes planner_hook and
 * standard_planner() a fifth argument, the ExplainState of an EXPLAIN
 * being run (NULL otherwise).  AW_PLANNER_HOOK_PARAMS declares a hook's
 * parameters, AW_PLANNER_HOOK_ARGS passes them on unchanged.
 */
#if PG_VERSION_NUM >= 190000
#define AW_PLANNER_HOOK_PARAMS \
	Query *parse, const char *query_string, int cursorOptions, \
	ParamListInfo boundParams, ExplainState *es
#define AW_PLANNER_HOOK_ARGS \
	parse, query_string, cursorOptions, boundParams, es
#else
#define AW_PLANNER_HOOK_PARAMS \
	Query *parse, const char *query_string, int cursorOptions, \
	ParamListInfo boundParams
#define AW_PLANNER_HOOK_ARGS \
	parse, query_string, cursorOptions, boundParams
#endif

/*
 * The module's magic block.  PostgreSQL 18 added PG_MODULE_MAGIC_EXT, which
 * records the library's name and version (shown by pg_get_loaded_modules()).
 * 15 to 17 have only PG_MODULE_MAGIC.
 */
#if PG_VERSION_NUM >= 180000
#define AW_MODULE_MAGIC \
	PG_MODULE_MAGIC_EXT(.name = "aion_wake", .version = AW_VERSION)
#else
#define AW_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/*
 * Wait events.  PostgreSQL 17 added custom wait events for extensions
 * (WaitEventExtensionNew()): a wait shows in pg_stat_activity with
 * wait_event_type 'Extension' and a name of its own.  On 15 and 16 every
 * extension wait is PG_WAIT_EXTENSION, shown as 'Extension'/'Extension'.
 *
 * WaitEventExtensionNew() allocates the ID in shared memory under an
 * LWLock (or finds the one registered before under the same name), so it
 * is called lazily, at a process's first wait, never in the postmaster,
 * and the ID is kept for the life of the process (in each file that asks:
 * the cache is a static of the inline function).
 */
#if PG_VERSION_NUM >= 170000
static inline uint32
aw_wait_event_named(uint32 *cache, const char *name)
{
	if (*cache == 0)
		*cache = WaitEventExtensionNew(name);
	return *cache;
}
#else
static inline uint32
aw_wait_event_named(uint32 *cache, const char *name)
{
	return PG_WAIT_EXTENSION;
}
#endif

/* a claim(wait => ...) blocked until a row is ready */
static inline uint32
aw_wait_event_claim(void)
{
	static uint32 id = 0;

	return aw_wait_event_named(&id, "AionWakeClaim");
}

/* the worker with nothing to do */
static inline uint32
aw_wait_event_worker(void)
{
	static uint32 id = 0;

	return aw_wait_event_named(&id, "AionWakeWorker");
}

/*
 * the worker opening its listening connection: connecting, and its LISTEN
 * (src/listener.c)
 */
static inline uint32
aw_wait_event_listener_connect(void)
{
	static uint32 id = 0;

	return aw_wait_event_named(&id, "AionWakeListenerConnect");
}

/*
 * the worker waiting for its database to exist or to accept connections.
 * It is not connected yet, so pg_stat_activity does not show it.
 */
static inline uint32
aw_wait_event_wait_database(void)
{
	static uint32 id = 0;

	return aw_wait_event_named(&id, "AionWakeWaitDatabase");
}

/*
 * A claim's first look without the executor (src/claim_direct.c): an
 * index scan, and the index entries of an updated row.  PostgreSQL 18
 * gave index_beginscan() an IndexScanInstrumentation (NULL: none) and 19
 * scan flags (SO_NONE).  16 made simple_table_tuple_update() say which
 * indexes want new entries as a TU_UpdateIndexes (none, all, or the
 * summarizing ones only), where 15 has a bool, and gave
 * ExecInsertIndexTuples() whether only the summarizing ones; 19 folded
 * its booleans into flags.  AwUpdateIndexes is what
 * simple_table_tuple_update() fills in, AW_UPDATE_INDEXES_ANY(u) whether
 * any index wants an entry.
 */
#if PG_VERSION_NUM >= 190000
#define aw_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0, SO_NONE)
#elif PG_VERSION_NUM >= 180000
#define aw_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define aw_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

#if PG_VERSION_NUM >= 160000
#define AwUpdateIndexes TU_UpdateIndexes
#define AW_UPDATE_INDEXES_ANY(u) ((u) != TU_None)
#else
#define AwUpdateIndexes bool
#define AW_UPDATE_INDEXES_ANY(u) (u)
#endif

#if PG_VERSION_NUM >= 190000
#define aw_insert_update_index_tuples(rri, slot, estate, u) \
	ExecInsertIndexTuples((rri), (estate), EIIT_IS_UPDATE | \
						  ((u) == TU_Summarizing ? EIIT_ONLY_SUMMARIZING : 0), \
						  (slot), NIL, NULL)
#elif PG_VERSION_NUM >= 160000
#define aw_insert_update_index_tuples(rri, slot, estate, u) \
	ExecInsertIndexTuples((rri), (slot), (estate), true, false, NULL, NIL, \
						  (u) == TU_Summarizing)
#else
#define aw_insert_update_index_tuples(rri, slot, estate, u) \
	ExecInsertIndexTuples((rri), (slot), (estate), true, false, NULL, NIL)
#endif

/*
 * The primary key's index.  18 gave RelationGetPrimaryKeyIndex() a
 * deferrable_ok, and returns a deferrable primary key only when it is
 * true; aion_wake wants only an immediate one (its callers check
 * indimmediate too, which 15 and 17 do not).
 */
#if PG_VERSION_NUM >= 180000
#define aw_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define aw_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * table_tuple_delete().  19 folded its changingPart into options
 * (TABLE_DELETE_CHANGING_PARTITION), placed after cid.  aion_wake never
 * moves a row between partitions.
 */
#if PG_VERSION_NUM >= 190000
#define aw_tuple_delete(rel, tid, cid, snapshot, crosscheck, wait, tmfd) \
	table_tuple_delete((rel), (tid), (cid), 0, (snapshot), (crosscheck), (wait), (tmfd))
#else
#define aw_tuple_delete(rel, tid, cid, snapshot, crosscheck, wait, tmfd) \
	table_tuple_delete((rel), (tid), (cid), (snapshot), (crosscheck), (wait), (tmfd), false)
#endif

/*
 * NOT NULL constraints not validated.  PostgreSQL 18 added NOT NULL ...
 * NOT VALID: a column can have one that rows already break, which an
 * UPDATE of any column then finds.  The relation's descriptor says so in
 * its compact attributes' attnullability.  Before 18 every NOT NULL is
 * validated.
 */
#if PG_VERSION_NUM >= 180000
#define aw_not_null_unvalidated(desc, i) \
	(TupleDescCompactAttr((desc), (i))->attnullability == ATTNULLABLE_INVALID)
#else
#define aw_not_null_unvalidated(desc, i) ((void) (desc), (void) (i), false)
#endif

/*
 * Changes that needed only an #include (valid on every major):
 *
 * - 18: common/int.h (pg_add_s64_overflow and friends) is no longer
 *   included by other server headers.
 * - 18: the WaitEventSet API moved to storage/waiteventset.h, which
 *   storage/latch.h still includes.
 * - 16 and later (so 17, 18, 19 here): PGXS builds modules with
 *   -fvisibility=hidden; only functions marked PGDLLEXPORT
 *   (PG_FUNCTION_INFO_V1 does it, fmgr.h declares _PG_init so) are
 *   exported, so the worker's entry point aw_worker_main, named in
 *   bgw_function_name, is declared PGDLLEXPORT (aw_worker.h).
 * - 19: get_database_name() moved from commands/dbcommands.h to
 *   utils/lsyscache.h (included next to it, for 15 to 18).
 * - 19: server headers include each other less: utils/tuplestore.h
 *   (tuplestore_putvalues) and access/htup_details.h (heap_form_tuple) no
 *   longer come with funcapi.h, utils/hsearch.h (HASHCTL, hash_create) and
 *   storage/fd.h (AllocateFile) no longer come indirectly either.
 */

#endif							/* AW_COMPAT_H */
