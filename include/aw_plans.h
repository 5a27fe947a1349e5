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

#include "aw_args.h"

/*
 * The priority a walk from below starts at when below is above 0: the
 * topic's highest priority below it and above 0, else 0.  The walk's first
 * step, and the first look of a claim of one row (claim.c).
 */
#define AW_TOP_PRIORITY(topic, below) \
"COALESCE(( " \
"  SELECT p.priority FROM aion_wake.outbox p " \
"   WHERE p.topic OPERATOR(pg_catalog.=) " topic " " \
"     AND p.priority OPERATOR(pg_catalog.<) " below " " \
"     AND p.priority OPERATOR(pg_catalog.>) 0 " \
"   ORDER BY p.priority DESC LIMIT 1), 0) "

/*
 * From the 1.2 schema the outbox's one index by topic is (topic, priority
 * DESC, visible_after).  A statement that wants a topic's rows by fence,
 * whatever their priority (the rows to claim, the next fence ahead, the
 * rows whose fence passed, the live leases), walks the topic's distinct
 * priorities below below with this recursive CTE, r(p): one index probe
 * per priority, from the highest (its last row is a NULL, which no
 * "priority = r.p" matches), while stop (an SQL condition on r.p, or
 * nothing) holds.  Then it reads each priority's range of fences, one more
 * probe each, in a LATERAL subquery that the planner cannot pull up (an
 * aggregate, a LIMIT or OFFSET 0), so that every range is an index range.
 * One range by topic alone would read every row of the topic to find the
 * few whose fence is in range.
 *
 * The walk starts with a probe for priorities above 0 only, and at 0 when
 * there is none.  Most topics have every row at the default, 0, and there
 * that probe ends at the index's first key of the topic without reading a
 * row: it compares keys only.  A probe for the highest priority of any
 * value would have to find a row it can see, and where rows churn the
 * head of priority 0 is the versions of rows just claimed or deleted,
 * which it would visit one by one before the range scan of priority 0
 * visited them again.  Starting at 0 costs a topic without rows of
 * priority 0 one empty range.  A walk that starts at or below 0 (a claim
 * of several topics that is done with priority 0, claim.c) probes for
 * the highest priority as before.
 *
 * topic and below are SQL expressions: parameters, constants, or columns
 * of the FROM list outside a LATERAL subquery.  AW_TOPIC_PRIORITIES walks
 * every priority.
 */
#define AW_PRIORITY_WALK(topic, below, stop) \
"WITH RECURSIVE r(p) AS ( " \
"  SELECT CASE WHEN " below " OPERATOR(pg_catalog.>) 0 " \
"    THEN " AW_TOP_PRIORITY(topic, below) \
"    ELSE ( " \
"      SELECT o.priority FROM aion_wake.outbox o " \
"       WHERE o.topic OPERATOR(pg_catalog.=) " topic " " \
"         AND o.priority OPERATOR(pg_catalog.<) " below " " \
"       ORDER BY o.priority DESC LIMIT 1) END " \
"  UNION ALL " \
"  SELECT (SELECT o.priority FROM aion_wake.outbox o " \
"           WHERE o.topic OPERATOR(pg_catalog.=) " topic " " \
"             AND o.priority OPERATOR(pg_catalog.<) r.p " \
"           ORDER BY o.priority DESC LIMIT 1) " \
"    FROM r WHERE r.p IS NOT NULL" stop ") "

#define AW_TOPIC_PRIORITIES(topic) \
	AW_PRIORITY_WALK(topic, "(" CppAsString2(AW_PRIORITY_MAX) " + 1)", "")

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
