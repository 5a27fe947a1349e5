/*-------------------------------------------------------------------------
 *
 * aw_worker_slots.h
 *	  One slot per served database: who its worker is, and how to wake it.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_worker_slots.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_WORKER_SLOTS_H
#define AW_WORKER_SLOTS_H

#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "nodes/pg_list.h"
#include "storage/spin.h"

/* databases named in aion_wake.database that get a worker, at most */
#define AW_MAX_WORKERS			16

/*
 * A served database's slot.  dbname is set at postmaster start; the rest
 * is written under the spinlock (by the worker, and by a backend that
 * drops, renames or creates the database).  Wakers read dbid, pid and
 * procno without it: a stale value costs a spurious wake of a process
 * that re-checks its condition, never a missed one.
 */
typedef struct AwWorkerSlot
{
	char		dbname[NAMEDATALEN];
	Oid			dbid;			/* InvalidOid until the worker connected */
	int			pid;			/* 0 when no worker runs */
	int			procno;
	TimestampTz started_at;
	bool		connected;		/* the worker is connected to dbname */
	bool		listening;
	bool		rebuilt;		/* the set holds this database's parks */
	bool		limits_loaded;	/* ... and every limit of limits_table */
	uint32		limits_gen;		/* counts the clearings of limits_loaded */
	Oid			limits_table;	/* the aion_wake.limits they came from */
	bool		db_missing;		/* could not connect: wait for the database */
	int			ddl_pid;		/* a backend dropping or renaming it, or 0 */
	slock_t		mutex;
	char		listen_error[256];
} AwWorkerSlot;

extern Size aw_worker_slots_shmem_size(void);
extern void aw_worker_slots_shmem_init(void);
extern void aw_worker_slots_init(void);

extern List *aw_database_names(bool warn);
extern bool aw_database_is_served(void);

extern AwWorkerSlot *aw_worker_slot(int index);
extern AwWorkerSlot *aw_worker_slot_for(Oid dbid);
extern AwWorkerSlot *aw_worker_slot_named(const char *dbname);
extern void aw_wake_worker(Oid dbid);
extern void aw_worker_slot_unload(AwWorkerSlot *slot);
extern uint64 aw_settings_run(SPIPlanPtr plan, Datum *args, int expected);
extern void aw_nudge_worker(Oid dbid);

#endif							/* AW_WORKER_SLOTS_H */
