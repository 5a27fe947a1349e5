/*-------------------------------------------------------------------------
 *
 * aw_monitor.h
 *	  Monitoring (monitor.c): per-topic claim counters, the claim-wait and
 *	  claim-latency histograms and the lost-wake count, all kept in shared
 *	  memory as they change, so that reading them never scans anything.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_monitor.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_MONITOR_H
#define AW_MONITOR_H

#include "datatype/timestamp.h"

#include "aw_names.h"

/* the histograms, cluster-wide */
typedef enum AwHistogram
{
	AW_HIST_CLAIM_WAIT = 0,		/* a blocked claim: from its call to its row */
	AW_HIST_CLAIM_LATENCY,		/* a claimed row: from its fence to its claim */
	AW_NUM_HISTOGRAMS
} AwHistogram;

/* finite upper bounds of the buckets, in microseconds; one more for +Inf */
#define AW_HIST_BOUNDS 14
extern const int64 aw_hist_bounds_us[AW_HIST_BOUNDS];

/* a copy of one histogram: counts per bucket (not cumulative) */
typedef struct AwHistogramCopy
{
	uint64		buckets[AW_HIST_BOUNDS + 1];
	uint64		sum_us;
	uint64		count;
} AwHistogramCopy;

/* what one claim() call adds to its topic's counters */
typedef struct AwTopicCounts
{
	uint64		claims;			/* claim() calls naming the topic */
	uint64		rows;			/* rows claimed (claims and hand-offs) */
	uint64		wakes;			/* wakes blocked claimers received */
	uint64		wakes_found;	/* ... whose probe took a row of the topic */
	uint64		timeouts;		/* blocked claims that ended with nothing */
	uint64		lost_wakes;		/* the lost-wake detector fired */
} AwTopicCounts;

/* a topic's counters, for the views */
typedef struct AwTopicCountsRow
{
	char		name[AW_TOPIC_MAXLEN + 1];
	AwTopicCounts counts;
} AwTopicCountsRow;

extern Size aw_monitor_shmem_size(void);
extern void aw_monitor_shmem_init(void);

extern void aw_monitor_observe(AwHistogram h, int64 us);
extern void aw_monitor_add(const char *topic, const AwTopicCounts *add);
extern void aw_monitor_lost_wake(const char *topic, int64 delay_us);

extern void aw_monitor_copy_histogram(AwHistogram h, AwHistogramCopy *out);
extern uint64 aw_monitor_lost_wakes(void);
extern AwTopicCountsRow *aw_monitor_copy_topics(int *n);

#endif							/* AW_MONITOR_H */
