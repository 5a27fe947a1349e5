/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  Transaction callbacks that settle the parked set at COMMIT and ABORT.
 *
 *	  The outbox functions record their shared-memory work per
 *	  (sub)transaction in a list kept in TopTransactionContext.  At COMMIT,
 *	  parks are confirmed, forgotten rows leave the set and pulses reach
 *	  their topics; the COMMIT callback runs after the commit record is
 *	  written, so it must never raise and only takes the set lock.  At ABORT,
 *	  parks are abandoned (a replaced confirmed entry comes back) and
 *	  re-offered entries are restored; at ROLLBACK TO SAVEPOINT the same
 *	  happens to the work of the subtransactions rolled back.  PREPARE
 *	  TRANSACTION is refused when the list holds parks or pulses, because
 *	  COMMIT PREPARED runs no callbacks in this backend.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/xact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "aw_waiters.h"
#include "aw_xact.h"

typedef enum AwActionKind
{
	AW_ACT_PARK,
	AW_ACT_REOFFER,
	AW_ACT_FORGET,
	AW_ACT_PULSE,
	AW_ACT_READY,
	AW_ACT_CLAIMED,
	AW_ACT_FENCE
} AwActionKind;

typedef struct AwAction
{
	AwActionKind kind;
	SubTransactionId subid;
	uint64		generation;		/* PARK, FORGET: the entry's */
	int64		count;			/* PULSE: slots; READY, CLAIMED: rows */
	TimestampTz fence;			/* FENCE: the earliest */
	AwSavedEntry saved;			/* PARK, REOFFER */
	char		name[AW_KEY_MAXLEN + 1];	/* key, or topic */
} AwAction;

/* this transaction's actions, oldest first; lives in TopTransactionContext */
static List *aw_actions = NIL;
static bool aw_callbacks_registered = false;

static void aw_xact_callback(XactEvent event, void *arg);
static void aw_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								SubTransactionId parentSubid, void *arg);

static AwAction *
aw_xact_new_action(AwActionKind kind, const char *name)
{
	AwAction   *a;

	if (!aw_callbacks_registered)
	{
		RegisterXactCallback(aw_xact_callback, NULL);
		RegisterSubXactCallback(aw_subxact_callback, NULL);
		aw_callbacks_registered = true;
	}
	a = MemoryContextAllocZero(TopTransactionContext, sizeof(AwAction));
	a->kind = kind;
	a->subid = GetCurrentSubTransactionId();
	strlcpy(a->name, name, sizeof(a->name));
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		aw_actions = lappend(aw_actions, a);
		MemoryContextSwitchTo(old);
	}
	return a;
}

void
aw_xact_record_park(const char *key, uint64 generation, const AwSavedEntry *saved)
{
	AwAction   *a = aw_xact_new_action(AW_ACT_PARK, key);

	a->generation = generation;
	a->saved = *saved;
}

void
aw_xact_record_reoffer(const char *key, const AwSavedEntry *saved)
{
	AwAction   *a = aw_xact_new_action(AW_ACT_REOFFER, key);

	a->saved = *saved;
}

/*
 * Called with the row locked: the entry of the key now is the one to
 * forget at commit, and no other.  Nothing to do when there is none.
 */
void
aw_xact_record_forget(const char *key)
{
	uint64		generation = aw_set_generation_of(key);

	if (generation != 0)
		aw_xact_new_action(AW_ACT_FORGET, key)->generation = generation;
}

/*
 * The per-topic action of this kind in the current subtransaction, made if
 * there is none yet: pulses, ready rows and fences of one topic add up into
 * one action, so a transaction that enqueues many rows wakes waiters once.
 */
static AwAction *
aw_xact_topic_action(AwActionKind kind, const char *topic, bool *found)
{
	SubTransactionId subid = GetCurrentSubTransactionId();
	ListCell   *lc;

	foreach(lc, aw_actions)
	{
		AwAction   *a = (AwAction *) lfirst(lc);

		if (a->kind == kind && a->subid == subid && strcmp(a->name, topic) == 0)
		{
			*found = true;
			return a;
		}
	}
	*found = false;
	return aw_xact_new_action(kind, topic);
}

/* Add n to the per-topic count of an action kind; the sum saturates. */
static void
aw_xact_add_count(AwActionKind kind, const char *topic, int64 n)
{
	bool		found;
	AwAction   *a = aw_xact_topic_action(kind, topic, &found);

	a->count = Min(a->count + n, PG_INT64_MAX / 2);
}

void
aw_xact_record_pulse(const char *topic, int32 slots)
{
	aw_xact_add_count(AW_ACT_PULSE, topic, slots);
}

void
aw_xact_record_ready(const char *topic, int64 rows)
{
	aw_xact_add_count(AW_ACT_READY, topic, rows);
}

void
aw_xact_record_claimed(const char *topic, int64 rows)
{
	aw_xact_add_count(AW_ACT_CLAIMED, topic, rows);
}

void
aw_xact_record_fence(const char *topic, TimestampTz fence)
{
	bool		found;
	AwAction   *a = aw_xact_topic_action(AW_ACT_FENCE, topic, &found);

	if (!found || fence < a->fence)
		a->fence = fence;
}

/*
 * Undo one action of a transaction or subtransaction that rolled back.
 * Never raises.
 */
static void
aw_undo_action(AwAction *a)
{
	switch (a->kind)
	{
		case AW_ACT_PARK:
			(void) aw_set_abandon(AW_KIND_FENCED, a->name, a->generation, &a->saved, NULL);
			break;
		case AW_ACT_REOFFER:
			/* no entry has this generation: put the saved one back if none is there */
			(void) aw_set_abandon(AW_KIND_FENCED, a->name, PG_UINT64_MAX, &a->saved, NULL);
			break;
		case AW_ACT_CLAIMED:
			/* the rows claimed are claimable again: wake as many waiters */
			aw_waiters_wake(MyDatabaseId, a->name, a->count);
			break;
		case AW_ACT_FORGET:
		case AW_ACT_PULSE:
		case AW_ACT_READY:
		case AW_ACT_FENCE:
			break;
	}
}

static void
aw_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (aw_actions == NIL)
		return;

	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			foreach(lc, aw_actions)
			{
				AwAction   *a = (AwAction *) lfirst(lc);

				if (a->kind == AW_ACT_PARK || a->kind == AW_ACT_PULSE ||
					a->kind == AW_ACT_REOFFER)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot PREPARE a transaction that has called aion_wake.park(), aion_wake.pulse() or aion_wake.reoffer()"),
							 errhint("Send capacity pulses and park rows in a transaction of their own.")));
			}
			break;

		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			/* after the commit record: nothing here may raise */
			foreach(lc, aw_actions)
			{
				AwAction   *a = (AwAction *) lfirst(lc);
				bool		found;

				switch (a->kind)
				{
					case AW_ACT_PARK:
						(void) aw_set_confirm(AW_KIND_FENCED, a->name, a->generation, &found);
						break;
					case AW_ACT_FORGET:
						aw_set_forget(a->name, a->generation);
						break;
					case AW_ACT_PULSE:
						aw_set_add_slots(a->name, a->count, true);
						break;
					case AW_ACT_READY:
						aw_waiters_wake(MyDatabaseId, a->name, a->count);
						break;
					case AW_ACT_FENCE:
						aw_waiters_fence_hint(MyDatabaseId, a->name, a->fence);
						break;
					case AW_ACT_REOFFER:
					case AW_ACT_CLAIMED:
						break;
				}
			}
			aw_actions = NIL;
			break;

		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			{
				int			i;

				for (i = list_length(aw_actions) - 1; i >= 0; i--)
					aw_undo_action((AwAction *) list_nth(aw_actions, i));
				aw_actions = NIL;
				break;
			}

		case XACT_EVENT_PREPARE:
			/*
			 * Only forgets and waiter wakes can be left.  COMMIT PREPARED
			 * runs no callbacks here: entries of forgotten rows fail their
			 * compare-and-set, and waiters wake at their fence or deadline.
			 */
			aw_actions = NIL;
			break;

		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			break;
	}
}

static void
aw_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (aw_actions == NIL)
		return;

	switch (event)
	{
		case SUBXACT_EVENT_COMMIT_SUB:
			foreach(lc, aw_actions)
			{
				AwAction   *a = (AwAction *) lfirst(lc);

				if (a->subid == mySubid)
					a->subid = parentSubid;
			}
			break;

		case SUBXACT_EVENT_ABORT_SUB:
			{
				int			i;

				for (i = list_length(aw_actions) - 1; i >= 0; i--)
				{
					AwAction   *a = (AwAction *) list_nth(aw_actions, i);

					if (a->subid == mySubid)
					{
						aw_undo_action(a);
						aw_actions = list_delete_nth_cell(aw_actions, i);
					}
				}
				break;
			}

		case SUBXACT_EVENT_START_SUB:
		case SUBXACT_EVENT_PRE_COMMIT_SUB:
			break;
	}
}
