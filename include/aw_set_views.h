/*-------------------------------------------------------------------------
 *
 * aw_set_views.h
 *	  Copies of the parked set for aion_wake.status, aion_wake.parked and
 *	  aion_wake.topics, made under the set lock (set_views.c).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_set_views.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_SET_VIEWS_H
#define AW_SET_VIEWS_H

#include "datatype/timestamp.h"

#include "aw_names.h"
#include "aw_rate_ledger.h"

/* counters shown by aion_wake.status */
typedef struct AwCounters
{
	int64		parked_pending;
	int64		parked_confirmed;
	uint64		pulses_received;
	uint64		slots_received;
	uint64		rows_reoffered;
	uint64		wakes_deferred;
	uint64		bad_pulses;
	uint64		pulses_ignored; /* raw pulses for topics with no row */
	uint64		set_full;
	uint64		fences_expired;
	uint64		unfenced_expired;
	uint64		credits_used;
	uint64		slots_returned;
	uint64		leases_expired;
	uint64		limits_not_loaded;	/* claims of a topic whose limit was not
									 * loaded yet, which took nothing of it */
	uint64		claims_rate_delayed;	/* claims a rate cut short */
	uint64		claims_paused;	/* claims a pause cut short */
	TimestampTz last_pulse_at;
} AwCounters;

/* copies for the views, made under the set lock */
typedef struct AwParkedRow
{
	char		key[AW_KEY_MAXLEN + 1];
	char		topic[AW_TOPIC_MAXLEN + 1];
	int32		attempt;
	bool		pending;
	bool		woken;			/* a wake is recorded, or a slot held */
	bool		fenced;
	TimestampTz parked_at;
	TimestampTz fence;
	int32		owner_pid;
} AwParkedRow;

typedef struct AwTopicRow
{
	char		name[AW_TOPIC_MAXLEN + 1];
	int64		parked;
	int64		unspent_slots;
	int64		credit;
	int64		pulses;
	int64		reoffered;
	int32		max_in_flight;	/* 0: unlimited */
	int32		in_flight;
	AwRateRow	rate;
	int64		parked_pending; /* of parked: pending parks */
} AwTopicRow;

extern void aw_set_counters(AwCounters *out);
extern AwParkedRow *aw_set_copy_entries(int *n);
extern AwTopicRow *aw_set_copy_topics(int *n);

#endif							/* AW_SET_VIEWS_H */
