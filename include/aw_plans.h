/*-------------------------------------------------------------------------
 *
 * aw_plans.h
 *	  Kept plans for aion_wake's own statements, always index plans.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_plans.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_PLANS_H
#define AW_PLANS_H

#include "executor/spi.h"

extern void aw_plans_init(void);
extern SPIPlanPtr aw_plan_prepare(SPIPlanPtr *cache, const char *sql, int nargs,
								  const Oid *argtypes);
extern uint64 aw_plan_run(SPIPlanPtr plan, Datum *args, const char *nulls,
						  int expected);
extern uint64 aw_plan_run_latest(SPIPlanPtr plan, Datum *args, const char *nulls,
								 int expected);
extern int	aw_schema_version(void);
extern bool aw_in_subtransaction(bool (*fn) (void *arg), void *arg);

#endif							/* AW_PLANS_H */
