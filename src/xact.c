/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  Transaction callbacks that apply recorded work to shared memory at
 *	  COMMIT and undo it at ABORT.
 *
 *	  The outbox functions record their shared-memory work here, per
 *	  (sub)transaction.  At COMMIT, parks are confirmed, forgotten rows leave
 *	  the set and pulses reach their topics; the COMMIT callback runs after
 *	  the commit record is written, so it must never raise and only takes
 *	  LWLocks.  At ABORT, parks are abandoned (a replaced confirmed entry
 *	  comes back) and re-offer rounds are undone; at ROLLBACK TO SAVEPOINT
 *	  the same happens to the work of the subtransactions rolled back.
 *	  PREPARE TRANSACTION is refused when parks, pulses or re-offers that
 *	  moved rows were recorded, because COMMIT PREPARED runs no callbacks in
 *	  this backend; the wakes of what may be prepared (rows made claimable,
 *	  claimed or settled) are handed to prepared.c for the second phase.
 *
 *	  Work is kept in a stack of levels, one per subtransaction that
 *	  recorded something, innermost on top.  A level holds a list of
 *	  per-row records (parks, forgets, re-offer rounds) in the order they
 *	  were made, and a small hash of per-topic sums (pulse slots, rows made
 *	  ready or claimed, the earliest fence), so that a transaction that
 *	  enqueues a million rows of one topic keeps one record for them.  A
 *	  subtransaction's end touches only its own level: RELEASE appends it to
 *	  its parent's, ROLLBACK TO undoes it; neither rescans older work, so a
 *	  PL/pgSQL loop with an EXCEPTION block stays linear.
 *
 *	  Memory lives in TopTransactionContext; the callbacks forget it when
 *	  the transaction ends.
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
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "aw_limits.h"
#include "aw_rates.h"
#include "aw_prepared.h"
#include "aw_waiters.h"
#include "aw_xact.h"

/* per-row records */
typedef enum AwRecordKind
{
	AW_REC_PARK,
	AW_REC_FORGET,
	AW_REC_TAKE,
	AW_REC_RESERVE,
	AW_REC_LEASES,
	AW_REC_SETTLE,
	AW_REC_LIMIT,
	AW_REC_RATE
} AwRecordKind;

typedef struct AwRecord
{
	dlist_node	node;
	AwRecordKind kind;
	dlist_node	settled_node;	/* SETTLE that marked its lease: in its
								 * topic's list; LIMIT, RATE: in
								 * aw_limit_records */
	AwParkRecord park;			/* PARK */
	uint64		generation;		/* FORGET: the entry's */
	AwRound *batch;			/* TAKE */
	AwReserveRecord reserve;	/* RESERVE */
	AwLiveLease *leases;		/* LEASES, LIMIT */
	int32		n_leases;
	int64		token;			/* SETTLE */
	bool		pulse;			/* SETTLE */
	bool		limited;		/* SETTLE: of a limited topic */
	AwSettleMark mark;			/* SETTLE: what it did to the lease's record */
	AwLeaseState prev;			/* SETTLE, marked: the state to restore */
	int32		pulses_repeated;	/* SETTLE, marked: repeats that pulse */
	struct AwRecord *first;		/* SETTLE, a repeat: the settle it repeats;
								 * LIMIT, RATE: the topic's call of that
								 * kind before */
	TimestampTz old_fence;		/* SETTLE */
	bool		superseded;		/* LIMIT, RATE: a later one of its topic counts */
	int32		max_in_flight;	/* LIMIT */
	AwLimitRecord limit;		/* LIMIT */
	aw_recount_fn recount;		/* LIMIT */
	AwRateSetting rate;			/* RATE */
	char		topic[AW_TOPIC_MAXLEN + 1]; /* SETTLE, LIMIT, RATE */
	char		key[AW_KEY_MAXLEN + 1]; /* PARK, FORGET, SETTLE */
} AwRecord;

/* per-topic sums */
typedef enum AwSumKind
{
	AW_SUM_PULSE,				/* slots */
	AW_SUM_HANDOFF_PULSE,		/* slots of settles with next_rows that took
								 * nothing */
	AW_SUM_READY,				/* rows made claimable */
	AW_SUM_CLAIMED,				/* rows claimed */
	AW_SUM_RELEASED,			/* rows locked, not taken: claimable either way */
	AW_SUM_FENCE				/* the earliest fence written */
} AwSumKind;

typedef struct AwSumKey
{
	int32		kind;			/* AwSumKind */
	char		topic[AW_TOPIC_MAXLEN + 1];
} AwSumKey;

typedef struct AwSum
{
	AwSumKey	key;			/* hash key: must be first */
	int64		count;
	TimestampTz fence;
} AwSum;

typedef struct AwLevel
{
	SubTransactionId subid;
	struct AwLevel *parent;
	dlist_head	records;		/* oldest first */
	HTAB	   *sums;			/* made on first use */
} AwLevel;

/* the limited settles of one topic, newest last (hand-off candidates) */
typedef struct AwSettledList
{
	char		topic[AW_TOPIC_MAXLEN + 1]; /* hash key: must be first */
	dlist_head	records;
} AwSettledList;

/* the innermost level; NULL when this transaction recorded nothing */
static AwLevel *aw_level = NULL;

/* topic -> AwSettledList; made on the transaction's first limited settle */
static HTAB *aw_settled = NULL;

/* the transaction's set_limit(), set_rate(), pause() and resume() calls, newest last */
static dlist_head aw_limit_records = DLIST_STATIC_INIT(aw_limit_records);
static bool aw_callbacks_registered = false;

static void aw_xact_callback(XactEvent event, void *arg);
static void aw_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								SubTransactionId parentSubid, void *arg);

/*
 * The level of the current subtransaction, made if there is none yet.
 * Levels of subtransactions that have ended are gone, so a top level that
 * is not the current subtransaction's belongs to one of its ancestors.
 */
static AwLevel *
aw_current_level(void)
{
	SubTransactionId subid = GetCurrentSubTransactionId();

	if (!aw_callbacks_registered)
	{
		RegisterXactCallback(aw_xact_callback, NULL);
		RegisterSubXactCallback(aw_subxact_callback, NULL);
		aw_callbacks_registered = true;
	}
	if (aw_level == NULL || aw_level->subid != subid)
	{
		AwLevel    *l = MemoryContextAllocZero(TopTransactionContext, sizeof(AwLevel));

		l->subid = subid;
		l->parent = aw_level;
		dlist_init(&l->records);
		aw_level = l;
	}
	return aw_level;
}

static AwRecord *
aw_new_record(AwRecordKind kind, const char *key)
{
	AwLevel    *l = aw_current_level();
	AwRecord   *r = MemoryContextAllocZero(TopTransactionContext, sizeof(AwRecord));

	r->kind = kind;
	if (key)
		strlcpy(r->key, key, sizeof(r->key));
	dlist_push_tail(&l->records, &r->node);
	return r;
}

AwParkRecord *
aw_xact_prepare_park(const char *key)
{
	return &aw_new_record(AW_REC_PARK, key)->park;
}

AwRound *
aw_xact_prepare_round(const char *topic, int max)
{
	AwRound *b = MemoryContextAllocZero(TopTransactionContext, sizeof(AwRound));

	strlcpy(b->topic, topic, sizeof(b->topic));
	b->max = max;
	b->takes = MemoryContextAlloc(TopTransactionContext, sizeof(AwTake) * max);
	b->outcomes = MemoryContextAlloc(TopTransactionContext, sizeof(AwTakeOutcome) * max);
	b->skip = aw_xact_will_forget;
	aw_new_record(AW_REC_TAKE, NULL)->batch = b;
	return b;
}

AwReserveRecord *
aw_xact_prepare_reserve(const char *topic)
{
	AwRecord   *r = aw_new_record(AW_REC_RESERVE, NULL);

	strlcpy(r->reserve.topic, topic, sizeof(r->reserve.topic));
	return &r->reserve;
}

AwLiveLease *
aw_xact_prepare_leases(int n)
{
	AwRecord   *r = aw_new_record(AW_REC_LEASES, NULL);

	r->leases = MemoryContextAllocZero(TopTransactionContext, sizeof(AwLiveLease) * Max(n, 1));
	r->n_leases = n;
	return r->leases;
}

void
aw_xact_record_settle(const char *key, int64 token, const char *topic,
					  bool limited, bool pulse, TimestampTz old_fence)
{
	AwRecord   *r = aw_new_record(AW_REC_SETTLE, key);
	AwSettledList *list;
	bool		found;

	r->token = token;
	strlcpy(r->topic, topic, sizeof(r->topic));
	r->pulse = pulse;
	r->old_fence = old_fence;
	r->limited = limited;
	r->mark = AW_SETTLE_NONE;
	if (!limited)
		return;

	/* everything that may fail comes before the record is marked */
	if (aw_settled == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = AW_TOPIC_MAXLEN + 1;
		ctl.entrysize = sizeof(AwSettledList);
		ctl.hcxt = TopTransactionContext;
		aw_settled = hash_create("aion_wake settled leases", 8, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	list = hash_search(aw_settled, r->topic, HASH_ENTER, &found);
	if (!found)
		dlist_init(&list->records);

	r->mark = aw_limits_mark_settled(key, token, &r->prev);
	if (r->mark == AW_SETTLE_MARKED)
		dlist_push_tail(&list->records, &r->settled_node);
	else if (r->mark == AW_SETTLE_REPEAT && pulse)
	{
		dlist_iter	iter;

		/*
		 * A repeat settles nothing more, but the lease's slot is a pulse if
		 * any of its settles is one (park, then complete: the row is gone).
		 * The settle it repeats outlives it: it is older, at the same
		 * subtransaction level or an outer one.
		 */
		dlist_reverse_foreach(iter, &list->records)
		{
			AwRecord   *f = dlist_container(AwRecord, settled_node, iter.cur);

			if (f->token == token && strcmp(f->key, key) == 0)
			{
				f->pulses_repeated++;
				r->first = f;
				break;
			}
		}
	}
}

/*
 * The leases of a limited topic this transaction settled (and has not
 * rolled back), newest first, each once, at most max: a claim in the same
 * transaction may inherit their slots (the zero-gap hand-off).  Returns
 * how many.
 */
int
aw_xact_settled_leases(const char *topic, AwSettledLease *out, int max)
{
	AwSettledList *list;
	dlist_iter	iter;
	int			n = 0;

	if (aw_settled == NULL || max <= 0 ||
		(list = hash_search(aw_settled, topic, HASH_FIND, NULL)) == NULL)
		return 0;
	dlist_reverse_foreach(iter, &list->records)
	{
		AwRecord   *r = dlist_container(AwRecord, settled_node, iter.cur);

		strlcpy(out[n].key, r->key, sizeof(out[n].key));
		out[n].token = r->token;
		out[n].pulse = r->pulse || r->pulses_repeated > 0;
		if (++n == max)
			break;
	}
	return n;
}

/*
 * A set_limit() of a topic.  Only the last one of a topic in the
 * transaction applies at commit, as it would alone: each is made against
 * the limit the topic has before the transaction (nothing applies before
 * the commit), so an earlier one is superseded, not applied first.  A
 * later one rolled back to a savepoint gives the earlier one back its say.
 */
AwLimitRecord *
aw_xact_record_limit(const char *topic, int32 max_in_flight, AwLiveLease *leases,
					 int32 n_leases, aw_recount_fn recount)
{
	AwRecord   *r = aw_new_record(AW_REC_LIMIT, NULL);
	dlist_iter	iter;

	strlcpy(r->topic, topic, sizeof(r->topic));
	r->max_in_flight = max_in_flight;
	r->leases = leases;
	r->n_leases = n_leases;
	r->recount = recount;
	dlist_reverse_foreach(iter, &aw_limit_records)
	{
		AwRecord   *p = dlist_container(AwRecord, settled_node, iter.cur);

		if (p->kind == AW_REC_LIMIT && strcmp(p->topic, topic) == 0)
		{
			p->superseded = true;
			r->first = p;
			break;
		}
	}
	dlist_push_tail(&aw_limit_records, &r->settled_node);
	return &r->limit;
}

/*
 * A set_rate(), or a pause() or resume(), of a topic: as set_limit(), only
 * the last one of each kind of a topic in the transaction applies at
 * commit, and one rolled back to a savepoint gives the one before its say
 * again.  A call applies as it would alone, so it keeps what the table
 * held before the transaction: had_rate and had_paused_until of the first
 * call of its kind (which read the table before this transaction wrote
 * it), since the earlier calls' writes hide it from a later call's look.
 */
AwRateSetting *
aw_xact_record_rate(const char *topic, const AwRateSetting *s)
{
	AwRecord   *r = aw_new_record(AW_REC_RATE, NULL);
	dlist_iter	iter;

	strlcpy(r->topic, topic, sizeof(r->topic));
	r->rate = *s;
	r->rate.promised = false;
	dlist_reverse_foreach(iter, &aw_limit_records)
	{
		AwRecord   *p = dlist_container(AwRecord, settled_node, iter.cur);

		if (p->kind == AW_REC_RATE && p->rate.pause == s->pause &&
			strcmp(p->topic, topic) == 0)
		{
			p->superseded = true;
			r->first = p;
			r->rate.had_rate = p->rate.had_rate;
			r->rate.had_paused_until = p->rate.had_paused_until;
			break;
		}
	}
	dlist_push_tail(&aw_limit_records, &r->settled_node);
	return &r->rate;
}

/*
 * Has this transaction called set_rate() (*rate_set) or pause() or
 * resume() (*pause_set) for topic, calls not rolled back?  Then the
 * tables show its own rows, not yet in shared memory: *had_rate and
 * *had_paused_until say what they held before it.  False for neither.
 */
bool
aw_xact_rate_before(const char *topic, bool *rate_set, bool *had_rate, bool *pause_set,
					TimestampTz *had_paused_until)
{
	dlist_iter	iter;

	*rate_set = *pause_set = *had_rate = false;
	*had_paused_until = 0;
	dlist_foreach(iter, &aw_limit_records)
	{
		AwRecord   *p = dlist_container(AwRecord, settled_node, iter.cur);

		if (p->kind != AW_REC_RATE || strcmp(p->topic, topic) != 0)
			continue;
		if (p->rate.pause)
		{
			*pause_set = true;
			*had_paused_until = p->rate.had_paused_until;
		}
		else
		{
			*rate_set = true;
			*had_rate = p->rate.had_rate;
		}
	}
	return *rate_set || *pause_set;
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
		aw_new_record(AW_REC_FORGET, key)->generation = generation;
}

/*
 * Will this transaction forget the entry of key at commit?  Then it has
 * settled the row (complete, fail, dead_letter, or a claim of a parked
 * row), so the entry is no candidate for a re-offer of this transaction:
 * the row's compare-and-set would meet this transaction's own write and
 * drop the entry as stale, and a rollback would then leave the row parked
 * with no entry.  A take calls this under the set lock: it never raises.
 */
bool
aw_xact_will_forget(const char *key)
{
	AwLevel    *l;

	for (l = aw_level; l != NULL; l = l->parent)
	{
		dlist_iter	iter;

		dlist_foreach(iter, &l->records)
		{
			AwRecord   *r = dlist_container(AwRecord, node, iter.cur);

			if (r->kind == AW_REC_FORGET && strcmp(r->key, key) == 0)
				return true;
		}
	}
	return false;
}

/* The per-topic sum of a kind in a level's hash, made if missing. */
static AwSum *
aw_level_sum(AwLevel *l, AwSumKind kind, const char *topic)
{
	AwSumKey	key;
	AwSum	   *s;
	bool		found;

	if (l->sums == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(AwSumKey);
		ctl.entrysize = sizeof(AwSum);
		ctl.hcxt = TopTransactionContext;
		l->sums = hash_create("aion_wake transaction sums", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	key.kind = kind;
	strlcpy(key.topic, topic, sizeof(key.topic));
	s = hash_search(l->sums, &key, HASH_ENTER, &found);
	if (!found)
	{
		s->count = 0;
		s->fence = DT_NOEND;
	}
	return s;
}

/* Add n to a per-topic count; the sum saturates. */
static void
aw_add_count(AwSumKind kind, const char *topic, int64 n)
{
	AwSum	   *s = aw_level_sum(aw_current_level(), kind, topic);

	s->count = Min(s->count + n, PG_INT64_MAX / 2);
}

void
aw_xact_record_pulse(const char *topic, int32 slots)
{
	aw_add_count(AW_SUM_PULSE, topic, slots);
}

/* The freed slot of a settle with next_rows that took nothing: a pulse. */
void
aw_xact_record_handoff_pulse(const char *topic)
{
	aw_add_count(AW_SUM_HANDOFF_PULSE, topic, 1);
}

void
aw_xact_record_ready(const char *topic, int64 rows)
{
	aw_add_count(AW_SUM_READY, topic, rows);
}

void
aw_xact_record_claimed(const char *topic, int64 rows)
{
	aw_add_count(AW_SUM_CLAIMED, topic, rows);
}

void
aw_xact_record_released(const char *topic, int64 rows)
{
	aw_add_count(AW_SUM_RELEASED, topic, rows);
}

/*
 * A row of topic now has fence `fence`, written at `now`: at commit, a
 * waiter wakes for it at once, or the worker learns of the fence.
 */
void
aw_xact_record_visibility(const char *topic, TimestampTz fence, TimestampTz now)
{
	if (fence <= now)
		aw_xact_record_ready(topic, 1);
	else
		aw_xact_record_fence(topic, fence);
}

void
aw_xact_record_fence(const char *topic, TimestampTz fence)
{
	AwSum	   *s = aw_level_sum(aw_current_level(), AW_SUM_FENCE, topic);

	s->fence = Min(s->fence, fence);
	s->count = Min(s->count + 1, PG_INT64_MAX / 2);
}

/*
 * A subtransaction committed: its level joins its parent's, records after
 * the parent's, sums added to the parent's.  Cost is the size of the child
 * level only.
 */
static void
aw_level_merge(AwLevel *child, AwLevel *parent)
{
	while (!dlist_is_empty(&child->records))
		dlist_push_tail(&parent->records, dlist_pop_head_node(&child->records));
	if (child->sums != NULL)
	{
		HASH_SEQ_STATUS status;
		AwSum	   *s;

		hash_seq_init(&status, child->sums);
		while ((s = hash_seq_search(&status)) != NULL)
		{
			AwSum	   *p = aw_level_sum(parent, s->key.kind, s->key.topic);

			p->count = Min(p->count + s->count, PG_INT64_MAX / 2);
			p->fence = Min(p->fence, s->fence);
		}
	}
}

/*
 * Undo a level that rolled back, newest record first.  Never raises.
 */
static void
aw_level_undo(AwLevel *l)
{
	while (!dlist_is_empty(&l->records))
	{
		dlist_node *last = dlist_tail_node(&l->records);
		AwRecord   *r = dlist_container(AwRecord, node, last);

		dlist_delete(last);

		switch (r->kind)
		{
			case AW_REC_PARK:
				if (r->park.generation != 0)
				{
					AwWake		wake;

					(void) aw_set_abandon(AW_KIND_FENCED, r->key, r->park.generation,
										  &r->park.saved, NULL, &wake);
					aw_waiters_wake_for(wake, MyDatabaseId, NULL);
				}
				break;
			case AW_REC_TAKE:
				aw_waiters_wake_for(aw_set_undo_take(r->batch), MyDatabaseId, NULL);
				break;
			case AW_REC_RESERVE:
				aw_limits_at_abort_reserve(&r->reserve);
				break;
			case AW_REC_LEASES:
				/* the rows wake claimers as claimable rows (CLAIMED) */
				aw_limits_at_abort_leases(r->leases, r->n_leases);
				break;
			case AW_REC_SETTLE:
				if (r->mark == AW_SETTLE_MARKED)
				{
					dlist_delete(&r->settled_node);
					aw_limits_at_abort_settle(r->key, r->token, r->prev);
				}
				else if (r->first != NULL)
					r->first->pulses_repeated--;

				/*
				 * The row is claimable again if its lease had ended
				 * (doc/design.md, Wake rules: 1).
				 */
				if (r->old_fence <= GetCurrentTimestamp())
					aw_waiters_wake(MyDatabaseId, r->topic, 1);
				break;
			case AW_REC_LIMIT:
				dlist_delete(&r->settled_node);
				if (r->first != NULL)
					r->first->superseded = false;
				if (r->limit.promised)
					aw_limits_at_abort_limit(r->topic, r->max_in_flight, r->limit.old_max,
											 r->leases, r->n_leases);
				break;
			case AW_REC_RATE:
				dlist_delete(&r->settled_node);
				if (r->first != NULL)
					r->first->superseded = false;
				if (r->rate.promised)
					aw_rates_at_end(r->topic, &r->rate, false);
				break;
			case AW_REC_FORGET:
				break;
		}
	}
	if (l->sums != NULL)
	{
		HASH_SEQ_STATUS status;
		AwSum	   *s;

		hash_seq_init(&status, l->sums);
		while ((s = hash_seq_search(&status)) != NULL)
		{
			/* the rows claimed or locked are claimable again: wake as many */
			if (s->key.kind == AW_SUM_CLAIMED || s->key.kind == AW_SUM_RELEASED)
				aw_waiters_wake(MyDatabaseId, s->key.topic, s->count);
		}
	}
}

/*
 * The transaction committed: apply one level, per-row records first (in
 * order), then the per-topic sums.  Runs after the commit record is
 * written: nothing here may raise.
 */
static void
aw_level_commit(AwLevel *l)
{
	dlist_iter	iter;

	dlist_foreach(iter, &l->records)
	{
		AwRecord   *r = dlist_container(AwRecord, node, iter.cur);
		bool		found;
		AwWake		wake;
		char		topic[AW_TOPIC_MAXLEN + 1];

		switch (r->kind)
		{
			case AW_REC_PARK:
				if (r->park.generation != 0)
				{
					(void) aw_set_confirm(AW_KIND_FENCED, r->key, r->park.generation,
										  &found, &wake, topic);
					aw_waiters_wake_for(wake, MyDatabaseId, topic);
				}
				break;
			case AW_REC_FORGET:
				aw_waiters_wake_for(aw_set_forget(r->key, r->generation),
									MyDatabaseId, NULL);
				break;
			case AW_REC_LEASES:
				aw_limits_at_commit_leases(r->leases, r->n_leases);
				break;
			case AW_REC_SETTLE:
				/* a repeat releases nothing: the settle it repeats does */
				if (r->mark == AW_SETTLE_MARKED)
					aw_limits_at_commit_settle(r->key, r->token,
											   r->pulse || r->pulses_repeated > 0);
				break;
			case AW_REC_LIMIT:
				/* only the topic's last set_limit() of the transaction applies */
				if (r->limit.promised)
					aw_limits_at_commit_limit(r->topic, r->max_in_flight, r->limit.old_max,
											  r->leases, r->n_leases, !r->superseded);
				break;
			case AW_REC_RATE:
				/* only the topic's last call of its kind applies */
				if (r->rate.promised)
					aw_rates_at_end(r->topic, &r->rate, !r->superseded);
				break;
			case AW_REC_TAKE:
			case AW_REC_RESERVE:
				break;
		}
	}
	if (l->sums != NULL)
	{
		HASH_SEQ_STATUS status;
		AwSum	   *s;

		hash_seq_init(&status, l->sums);
		while ((s = hash_seq_search(&status)) != NULL)
		{
			switch ((AwSumKind) s->key.kind)
			{
				case AW_SUM_PULSE:
				case AW_SUM_HANDOFF_PULSE:
					if (aw_set_add_slots(s->key.topic, s->count, true))
						aw_waiters_wake_for(AW_WAKE_SPENDER, MyDatabaseId, s->key.topic);
					break;
				case AW_SUM_READY:
				case AW_SUM_RELEASED:
					aw_waiters_wake(MyDatabaseId, s->key.topic, s->count);
					break;
				case AW_SUM_FENCE:
					aw_waiters_fence_hint(MyDatabaseId, s->key.topic, s->fence, s->count);
					break;
				case AW_SUM_CLAIMED:
					break;
			}
		}
	}
}

/*
 * Just before the commit, when raising is still allowed: a set_limit()
 * that gives a topic its first limit counts the topic's live leases again,
 * so that the leases this transaction took or settled after it count too.
 */
static void
aw_level_before_commit(AwLevel *l)
{
	dlist_iter	iter;

	dlist_foreach(iter, &l->records)
	{
		AwRecord   *r = dlist_container(AwRecord, node, iter.cur);

		if (r->kind == AW_REC_LIMIT && r->limit.promised && !r->superseded &&
			r->recount != NULL)
			r->recount(r->topic, r->max_in_flight, &r->leases, &r->n_leases);
	}
}

/*
 * Does this transaction hold work that COMMIT PREPARED could not settle?
 * Returns AW_HELD_NONE, or what: the hand-off's own (a parked row a claiming
 * round took, a settle's freed slot turned into a pulse) is told apart, so
 * that the error can name it.  A round that moved nothing holds nothing.
 */
typedef enum AwHeld
{
	AW_HELD_NONE,
	AW_HELD_WORK,
	AW_HELD_HANDOFF
} AwHeld;

static AwHeld
aw_holds_unpreparable_work(void)
{
	AwLevel    *l;
	AwHeld		held = AW_HELD_NONE;

	for (l = aw_level; l != NULL; l = l->parent)
	{
		dlist_iter	iter;

		dlist_foreach(iter, &l->records)
		{
			AwRecord   *r = dlist_container(AwRecord, node, iter.cur);

			switch (r->kind)
			{
				case AW_REC_PARK:
				case AW_REC_LEASES:
				case AW_REC_LIMIT:
				case AW_REC_RATE:
					return AW_HELD_WORK;
				case AW_REC_TAKE:
					if (r->batch->n > 0)
					{
						if (!r->batch->claiming)
							return AW_HELD_WORK;
						held = AW_HELD_HANDOFF;
					}
					break;
				case AW_REC_SETTLE:
					if (r->limited)
						return AW_HELD_WORK;
					break;
				case AW_REC_RESERVE:
				case AW_REC_FORGET:
					break;
			}
		}
		if (l->sums != NULL)
		{
			HASH_SEQ_STATUS status;
			AwSum	   *s;

			hash_seq_init(&status, l->sums);
			while ((s = hash_seq_search(&status)) != NULL)
			{
				if (s->key.kind == AW_SUM_PULSE)
				{
					hash_seq_term(&status);
					return AW_HELD_WORK;
				}
				if (s->key.kind == AW_SUM_HANDOFF_PULSE)
					held = AW_HELD_HANDOFF;
			}
		}
	}
	return held;
}

/*
 * The topic of a prepared transaction's wakes, found or added; NULL when
 * AW_PREPARED_TOPICS are taken (*overflow is then set).
 */
static AwPreparedTopic *
aw_prepared_topic(AwPreparedTopic *topics, int *n, bool *overflow, const char *name)
{
	AwPreparedTopic *t;
	int			i;

	for (i = 0; i < *n; i++)
	{
		if (strcmp(topics[i].name, name) == 0)
			return &topics[i];
	}
	if (*n == AW_PREPARED_TOPICS)
	{
		*overflow = true;
		return NULL;
	}
	t = &topics[(*n)++];
	memset(t, 0, sizeof(*t));
	strlcpy(t->name, name, sizeof(t->name));
	t->fence = DT_NOEND;
	t->settled_fence = DT_NOEND;
	return t;
}

/*
 * At PREPARE: what the commit or the rollback would wake (rows made
 * claimable, rows claimed or locked, fences written, settles of unlimited
 * topics that a rollback undoes), per topic, kept for the second phase.
 * Runs after the transaction is prepared: never raises, allocates nothing.
 */
static void
aw_prepare_stash_wakes(void)
{
	AwPreparedTopic topics[AW_PREPARED_TOPICS];
	int			n = 0;
	bool		overflow = false;
	AwLevel    *l;

	for (l = aw_level; l != NULL; l = l->parent)
	{
		dlist_iter	iter;

		dlist_foreach(iter, &l->records)
		{
			AwRecord   *r = dlist_container(AwRecord, node, iter.cur);
			AwPreparedTopic *t;

			if (r->kind != AW_REC_SETTLE ||
				(t = aw_prepared_topic(topics, &n, &overflow, r->topic)) == NULL)
				continue;
			t->settled++;
			t->settled_fence = Min(t->settled_fence, r->old_fence);
		}
		if (l->sums != NULL)
		{
			HASH_SEQ_STATUS status;
			AwSum	   *s;

			hash_seq_init(&status, l->sums);
			while ((s = hash_seq_search(&status)) != NULL)
			{
				AwPreparedTopic *t;

				/* pulses are refused at PREPARE */
				if (s->key.kind == AW_SUM_PULSE || s->key.kind == AW_SUM_HANDOFF_PULSE ||
					(t = aw_prepared_topic(topics, &n, &overflow, s->key.topic)) == NULL)
					continue;
				switch ((AwSumKind) s->key.kind)
				{
					case AW_SUM_READY:
						t->ready += s->count;
						break;
					case AW_SUM_RELEASED:
						t->released += s->count;
						break;
					case AW_SUM_CLAIMED:
						t->claimed += s->count;
						break;
					case AW_SUM_FENCE:
						t->fences += s->count;
						t->fence = Min(t->fence, s->fence);
						break;
					case AW_SUM_PULSE:
					case AW_SUM_HANDOFF_PULSE:
						break;
				}
			}
		}
	}
	aw_prepared_stash(topics, n, overflow);
}

static void
aw_xact_callback(XactEvent event, void *arg)
{
	AwLevel    *l;
	AwHeld		held;

	/* every record was undone (ROLLBACK TO): the lists are gone with them */
	if (aw_level == NULL)
	{
		aw_settled = NULL;
		dlist_init(&aw_limit_records);
		return;
	}

	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			held = aw_holds_unpreparable_work();
			if (held == AW_HELD_HANDOFF)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction whose settle with next_rows took a parked row or turned its freed slot into a pulse"),
						 errdetail("COMMIT PREPARED runs in another session, which cannot settle what aion_wake holds in shared memory for this transaction. A settle with next_rows that takes a visible row holds nothing there and can be prepared."),
						 errhint("Settle with next_rows in a transaction of its own, or settle without next_rows in the prepared one.")));
			if (held != AW_HELD_NONE)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has called aion_wake.park(), aion_wake.pulse(), aion_wake.reoffer(), aion_wake.set_limit(), aion_wake.set_rate(), aion_wake.pause() or aion_wake.resume(), or claimed or settled a row of a limited topic"),
						 errdetail("COMMIT PREPARED runs in another session, which cannot settle what aion_wake holds in shared memory for this transaction."),
						 errhint("Do that work in a transaction of its own.")));
			break;

		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:

			/*
			 * Every subtransaction has ended, and each merged its level into
			 * its parent's; a level can only be left over if a subtransaction
			 * without work of its own sat between two.  Merge here, where
			 * running out of memory is still an ordinary error.
			 */
			while (aw_level->parent != NULL)
			{
				l = aw_level;
				aw_level = l->parent;
				aw_level_merge(l, aw_level);
			}
			aw_level_before_commit(aw_level);
			break;

		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (l = aw_level; l != NULL; l = l->parent)
				aw_level_commit(l);
			aw_level = NULL;
			aw_settled = NULL;
			dlist_init(&aw_limit_records);
			break;

		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			for (l = aw_level; l != NULL; l = l->parent)
				aw_level_undo(l);
			aw_level = NULL;
			aw_settled = NULL;
			dlist_init(&aw_limit_records);
			break;

		case XACT_EVENT_PREPARE:

			/*
			 * Only forgets, rounds that moved nothing and waiter wakes can
			 * be left.  COMMIT PREPARED runs in any session, with none of
			 * these records: entries of forgotten rows fail their
			 * compare-and-set, and the wakes are kept in shared memory for
			 * the second phase (prepared.c).
			 */
			aw_prepare_stash_wakes();
			aw_level = NULL;
			aw_settled = NULL;
			dlist_init(&aw_limit_records);
			break;

	}
}

static void
aw_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	AwLevel    *l = aw_level;

	/* only a subtransaction that recorded work has a level of its own */
	if (l == NULL || l->subid != mySubid)
		return;

	switch (event)
	{
		case SUBXACT_EVENT_COMMIT_SUB:
			if (l->parent != NULL && l->parent->subid == parentSubid)
			{
				aw_level = l->parent;
				aw_level_merge(l, aw_level);
			}
			else
				l->subid = parentSubid;
			break;

		case SUBXACT_EVENT_ABORT_SUB:
			aw_level_undo(l);
			aw_level = l->parent;
			break;

		case SUBXACT_EVENT_START_SUB:
		case SUBXACT_EVENT_PRE_COMMIT_SUB:
			break;
	}
}
