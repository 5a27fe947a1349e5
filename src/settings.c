/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  aion_wake's configuration parameters (aion_wake.*).
 *
 *	  Every part of the extension reads these variables (declared in
 *	  aion_wake.h); they are defined here, at the bottom of the code, when
 *	  the library is preloaded.  Each is documented in README.md.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "aw_settings.h"

/* GUC variables */
char	   *aw_database_list = NULL;
int			aw_max_parked_rows = 65536;
int			aw_max_topics = 1024;
int			aw_max_leases = 16384;
int			aw_max_rates = 256;
int			aw_unfenced_max_age_ms = 600000;
int			aw_pulse_credit_ms = 250;
int			aw_max_wait_ms = 60000;
bool		aw_listen = true;
bool		aw_notify_ready = true;
char	   *aw_worker_role = NULL;
int			aw_lost_wake_tolerance_ms = 100;
bool		aw_debug_drop_wakes = false;
int			aw_debug_look_lock = 0;

/*
 * Define the parameters.  Called from _PG_init in the postmaster, while
 * shared_preload_libraries is processed (the postmaster-context ones can
 * only be defined then).
 */
void
aw_define_settings(void)
{
	DefineCustomStringVariable("aion_wake.database",
							   "Comma-separated list of databases served by an aion_wake worker.",
							   NULL,
							   &aw_database_list,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_parked_rows",
							"Size of the shared-memory set of parked rows.",
							"A park that finds the set full falls back to its durable fence.",
							&aw_max_parked_rows,
							65536, 16, 16 * 1024 * 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_topics",
							"Size of the shared-memory topic table.",
							NULL,
							&aw_max_topics,
							1024, 4, 1024 * 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_leases",
							"Slots of limited topics the shared-memory lease pool holds.",
							"The sum of every topic's max_in_flight may not exceed it; the pool has three lease records per slot.",
							&aw_max_leases,
							16384, 16, 16 * 1024 * 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_rates",
							"Topics that may have a rate at once, cluster-wide.",
							"Each holds a log of its recent starts in shared memory (about 6 kB).",
							&aw_max_rates,
							256, 1, 65536,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.unfenced_max_age",
							"Age after which a confirmed park_pending entry is dropped.",
							NULL,
							&aw_unfenced_max_age_ms,
							600000, 1000, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.pulse_credit_ms",
							"How long the unspent slots of a pulse wait for a park to confirm.",
							NULL,
							&aw_pulse_credit_ms,
							250, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.max_wait",
							"Longest time a blocking claim may wait.",
							NULL,
							&aw_max_wait_ms,
							60000, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("aion_wake.listen",
							 "Accept capacity pulses sent with NOTIFY aion_wake_capacity.",
							 NULL,
							 &aw_listen,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("aion_wake.notify_ready",
							 "Send NOTIFY aion_wake_ready after each batch of re-offers.",
							 NULL,
							 &aw_notify_ready,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("aion_wake.worker_role",
							   "Role the worker's listening connection logs in as.",
							   "Empty means the bootstrap superuser.",
							   &aw_worker_role,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.lost_wake_tolerance",
							"A blocked claim that takes a row claimable this long without a wake counts a lost wake.",
							"0 turns the lost-wake detector off.",
							&aw_lost_wake_tolerance_ms,
							100, 0, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("aion_wake.debug_drop_wakes",
							 "Test hook: drop every wake of blocked claimers that rows becoming claimable send.",
							 "For the tests of the lost-wake detector only; never set it in production.",
							 &aw_debug_drop_wakes,
							 false,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("aion_wake.debug_look_lock",
							"Test hook: each look of a claim without the executor waits, after its snapshot, "
							"for the advisory lock (this key, the look's number) in share mode.",
							"For the test of a claim's third look only; never set it in production.  0: off.",
							&aw_debug_look_lock,
							0, 0, INT_MAX,
							PGC_SUSET,
							GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("aion_wake");
}
