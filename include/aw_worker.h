/*-------------------------------------------------------------------------
 *
 * aw_worker.h
 *	  The background worker that turns capacity pulses into re-offers.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_WORKER_H
#define AW_WORKER_H

#include "fmgr.h"

extern void aw_register_workers(void);
extern PGDLLEXPORT void aw_worker_main(Datum main_arg);

#endif							/* AW_WORKER_H */
