/*-------------------------------------------------------------------------
 *
 * aw_pulse_spend.h
 *	  Spending pulses: who may spend a topic's slots, and the rounds that
 *	  spend them on parked rows (pulse_spend.c; doc/design.md, How a pulse
 *	  is spent).  test/model/aion_wake.pml mirrors this part of the set.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_pulse_spend.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_PULSE_SPEND_H
#define AW_PULSE_SPEND_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "aw_names.h"
#include "aw_waiters.h"			/* AwWake */

/*
 * An entry taken for a re-offer: what the compare-and-set needs, and what a
 * rollback needs to put the entry back.
 */
typedef struct AwTake
{
	char		key[AW_KEY_MAXLEN + 1];
	uint64		generation;
	int32		attempt;
	TimestampTz parked_at;
	TimestampTz fence;
} AwTake;

typedef enum AwTakeOutcome
{
	AW_TAKE_MOVED,				/* the row's fence was pulled forward */
	AW_TAKE_VALID,				/* still parked at its fence: locked, or the
								 * round's slots were spent on older rows */
	AW_TAKE_STALE				/* the row changed since its park, or is gone */
} AwTakeOutcome;

/*
 * One round of a re-offer: candidates taken from one topic, oldest first
 * (entries that hold a slot of their own before the rest), and the number
 * of rows the round may move.  There may be more candidates than slots: a
 * round that meets stale entries looks further ahead in the next, so a
 * pulse costs O(k + log n) statements however many stale entries lie
 * before its k live rows.  Candidates are IN_FLIGHT until the round is
 * finished; a round that is never finished (its transaction ended first) is
 * undone by aw_set_undo_take.
 */
typedef struct AwRound
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	int			max;			/* room in takes[] and outcomes[] */
	int			n;				/* candidates taken */
	int			slots;			/* rows this round may move */
	int			slot_cap;		/* take at most this many slots; 0: all */
	int			own_slots;		/* slots the caller brings (spent first) */
	int			own;			/* ... of them, counted in slots */
	int			own_left;		/* ... of those, not spent (aw_set_finish_round) */
	bool		claiming;		/* a round that leases the rows it moves */
	bool		(*skip) (const char *key);	/* entries the round leaves alone */
	bool		finished;		/* aw_set_finish_round ran */
	AwTake	   *takes;
	AwTakeOutcome *outcomes;
} AwRound;

/* an UNFENCED entry handed back by take_confirmed() */
typedef struct AwUnfencedTake
{
	char		key[AW_KEY_MAXLEN + 1];
	int32		attempt;
} AwUnfencedTake;

/* re-offer rounds (reoffer.c) */
extern void aw_set_take(AwRound *b, uint64 add_slots, int want);
extern AwWake aw_set_finish_round(AwRound *b);
extern AwWake aw_set_undo_take(AwRound *b);
extern List *aw_set_work_topics(void);
extern bool aw_set_has_work(void);
extern bool aw_set_topic_has_work(const char *topic, bool own_slots);
extern TimestampTz aw_set_next_retry(void);

/* the spender of a topic's slots */
extern bool aw_set_spender_active(const char *topic);
extern bool aw_set_spender_hand(const char *topic, int procno, uint64 registration);
extern uint64 aw_set_last_hand(void);
extern AwWake aw_set_spender_release(char **topics, int ntopics, uint64 hand);

/* take_confirmed() */
extern int	aw_set_take_unfenced(const char *topic, int64 *want,
								 AwUnfencedTake *out, int max_out, bool *done);

#endif							/* AW_PULSE_SPEND_H */
