/*-------------------------------------------------------------------------
 *
 * aion_wake.h
 *	  Settings, limits and small helpers shared by every part of aion_wake.
 *
 *	  Each part of the extension (the parked set, the transaction hooks, the
 *	  outbox functions, the worker) has a header of its own; this one holds
 *	  only what all of them need: the GUC variables defined in aion_wake.c,
 *	  the input limits of the SQL interface, and the argument checks that
 *	  every SQL-callable function performs the same way.
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

#include "fmgr.h"
#include "datatype/timestamp.h"

/* process numbers: PGPROC.pgprocno on 15 and 16, ProcNumber from 17 */
#if PG_VERSION_NUM >= 170000
#define AW_MY_PROCNO	MyProcNumber
#else
#define AW_MY_PROCNO	(MyProc->pgprocno)
#endif

/* input limits of the SQL interface (see DESIGN.md) */
#define AW_KEY_MAXLEN			255
#define AW_MAX_ROWS_LIMIT		1000000

/* GUC variables (aion_wake.c) */
extern char *aw_database_list;
extern int	aw_max_parked_rows;
extern int	aw_max_topics;
extern int	aw_unfenced_max_age_ms;
extern int	aw_pulse_credit_ms;
extern int	aw_max_wait_ms;
extern bool aw_listen;
extern bool aw_notify_ready;
extern char *aw_worker_role;

/* aion_wake.c */
extern void aw_warn_unserved_once(void);

/* argument checks shared by the SQL functions (aion_wake.c) */
extern void aw_require_loaded(void);
extern char *aw_arg_key(FunctionCallInfo fcinfo, int argno);
extern char *aw_arg_topic(FunctionCallInfo fcinfo, int argno);
extern void aw_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name);
extern int64 aw_arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 aw_arg_int_range(FunctionCallInfo fcinfo, int argno, const char *name,
							  int32 min, int32 max);

#endif							/* AION_WAKE_H */
