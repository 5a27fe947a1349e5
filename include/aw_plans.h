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

/*
 * From the 1.2 schema the outbox's one index by topic is (topic, priority
 * DESC, visible_after).  A statement that wants a topic's rows by fence,
 * whatever their priority (the next fence ahead, the rows whose fence
 * passed, the live leases), walks the topic's distinct priorities with
 * this recursive CTE, r(p): one index probe per priority, from the
 * highest (its last row is a NULL, which no "priority = r.p" matches).
 * Then it reads each priority's range of fences, one more probe each, in
 * a LATERAL subquery that the planner cannot pull up (an aggregate, a
 * LIMIT or OFFSET 0), so that every range is an index range.  One range
 * by topic alone would read every row of the topic to find the few whose
 * fence is in range.  topic is an SQL expression: a parameter, or a column
 * of the FROM list outside a LATERAL subquery.
 */
#define AW_TOPIC_PRIORITIES(topic) \
"WITH RECURSIVE r(p) AS ( " \
"  SELECT (SELECT o.priority FROM aion_wake.outbox o " \
"           WHERE o.topic OPERATOR(pg_catalog.=) " topic " " \
"           ORDER BY o.priority DESC LIMIT 1) " \
"  UNION ALL " \
"  SELECT (SELECT o.priority FROM aion_wake.outbox o " \
"           WHERE o.topic OPERATOR(pg_catalog.=) " topic " " \
"             AND o.priority OPERATOR(pg_catalog.<) r.p " \
"           ORDER BY o.priority DESC LIMIT 1) " \
"    FROM r WHERE r.p IS NOT NULL) "

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
