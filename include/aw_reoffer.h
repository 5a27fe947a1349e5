/*-------------------------------------------------------------------------
 *
 * aw_reoffer.h
 *	  Turning pulse slots into re-offered rows.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_reoffer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_REOFFER_H
#define AW_REOFFER_H

#include "postgres.h"

#include "nodes/pg_list.h"

/*
 * Spend slots in the current transaction (the caller is connected to SPI):
 * add `slots` to `only_topic` and spend that topic's slots, or, with
 * only_topic NULL, spend the work of every topic of this database.  Each
 * row re-offered wakes a waiter at commit; with moved_keys, the keys are
 * appended there instead and waking is left to the caller.  Returns the
 * number of rows re-offered.
 */
extern int64 aw_reoffer_round(const char *only_topic, int32 slots, bool notify_ready,
							  List **moved_keys);

#endif							/* AW_REOFFER_H */
