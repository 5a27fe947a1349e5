/*-------------------------------------------------------------------------
 *
 * aion_wake.h
 *	  Settings and limits shared by every part of aion_wake.
 *
 *	  Each part of the extension (the parked set, the transaction hooks, the
 *	  outbox functions, the worker) has a header of its own; this one holds
 *	  only what all of them need: the configuration parameters defined in
 *	  settings.c, the input limits of the SQL interface, and the AwWake that
 *	  the set hands its callers.
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

/* what differs between PostgreSQL majors: AW_MY_PROCNO, ... */
#include "aw_compat.h"

/*
 * The library's version, default_version of aion_wake.control (on 18 and
 * later in its magic block; 019_wait_events.pl checks that they agree).
 */
#define AW_VERSION				"1.1"

/* input limits of the SQL interface (README.md, SQL reference) */
#define AW_KEY_MAXLEN			255
#define AW_MAX_ROWS_LIMIT		1000000

/*
 * What an operation of the parked set leaves to be woken once its lock is
 * released: the set decides, its callers wake (aw_waiters_wake_for).
 */
typedef enum AwWake
{
	AW_WAKE_NONE = 0,
	AW_WAKE_WORKER,				/* the worker must look (a retry time, an
								 * entry put back, slots left over) */
	AW_WAKE_SPENDER				/* a slot of the topic to spend: a claimer
								 * blocked on it, or else the worker */
} AwWake;

/* configuration parameters (settings.c) */
extern char *aw_database_list;
extern int	aw_max_parked_rows;
extern int	aw_max_topics;
extern int	aw_max_leases;
extern int	aw_unfenced_max_age_ms;
extern int	aw_pulse_credit_ms;
extern int	aw_max_wait_ms;
extern bool aw_listen;
extern bool aw_notify_ready;
extern char *aw_worker_role;

extern void aw_define_settings(void);

#endif							/* AION_WAKE_H */
