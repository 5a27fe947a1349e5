/*-------------------------------------------------------------------------
 *
 * aw_rate_ledger.h
 *	  The rate ledger: a topic's rate (at most max_starts claims start in
 *	  any window of length per) and pause, in the parked set's topic entry,
 *	  with the logs of recent starts in a pool beside the set
 *	  (src/rate_ledger.c).  src/rates.c is its caller outside the set, and
 *	  the lease ledger's reservation asks it how many rows may start.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_rate_ledger.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_RATE_LEDGER_H
#define AW_RATE_LEDGER_H

#include "datatype/timestamp.h"
#include "lib/ilist.h"

#include "aw_names.h"

/* a topic's rate and pause, in its entry of the set */
typedef struct AwRate
{
	int32		max_starts;		/* 0: no rate */
	int64		per;			/* the window, in microseconds */
	int32		window;			/* its log of starts in the pool; -1: none */
	int32		reserved;		/* starts reserved by claims in progress */
	TimestampTz paused_until;	/* 0: not paused */
	int32		pins;			/* set_rate() and pause() calls not yet ended */
	bool		blocked;		/* a claim took fewer rows than it wanted
								 * because of the rate or the pause */
	dlist_node	blocked_node;	/* ... in AwShared.rate_blocked */
} AwRate;

typedef enum AwRateResult
{
	AW_RATE_OK,
	AW_RATE_NONE,				/* no topic to pin, and none needed */
	AW_RATE_TOPICS_FULL,		/* the topic table cannot hold the topic */
	AW_RATE_POOL_FULL			/* aion_wake.max_rates topics have a rate */
} AwRateResult;

/* what a settings change or a worker's look leaves to wake */
typedef struct AwRateWake
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	int32		n;
} AwRateWake;

/* a copy for aion_wake.topics */
typedef struct AwRateRow
{
	int32		max_starts;		/* 0: no rate */
	int64		per;
	int64		window_starts;	/* logged and reserved, in the window now */
	TimestampTz next_start_at;	/* when the next start may begin: 0 now */
	TimestampTz paused_until;	/* 0: not paused */
} AwRateRow;

extern Size aw_rate_shmem_size(void);
extern void aw_rate_shmem_init(void);

extern AwRateResult aw_ledger_rate_promise(const char *topic, bool rate, bool create);
extern int32 aw_ledger_rate_end(const char *topic, bool set_rate, int32 max_starts,
								int64 per, bool had_rate, bool set_pause,
								TimestampTz paused_until, bool apply, bool *blocked);
extern bool aw_ledger_rate_load(const char *topic, int32 max_starts, int64 per,
								TimestampTz paused_until, int32 *wake);
extern bool aw_ledger_rate_loaded(const char *topic, bool rate, TimestampTz paused_until);
extern int32 aw_ledger_rate_return(const char *topic, int32 reserved, int32 used,
								   bool *retime);
extern void aw_ledger_count_rate_not_loaded(void);
extern int	aw_ledger_rate_wakes(Oid dbid, TimestampTz now, AwRateWake *out, int max_out,
								 TimestampTz *next);
extern TimestampTz aw_ledger_rate_moment(const char *topic);
extern void aw_ledger_forget_rates(Oid dbid);

#endif							/* AW_RATE_LEDGER_H */
