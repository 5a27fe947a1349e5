/*-------------------------------------------------------------------------
 *
 * set_views.c
 *	  The copies of the parked set that aion_wake.status, aion_wake.parked
 *	  and aion_wake.topics show, each made under the set lock held shared
 *	  and returned in palloc'd memory once it is released.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/set_views.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "aw_set_internal.h"

/*
 * Copy this database's entries for aion_wake.parked: the buffer is sized
 * before the lock is taken (from a count read without it) and, in the rare
 * case the set grew meanwhile, sized again.
 */
AwParkedRow *
aw_set_copy_entries(int *n)
{
	long		room = hash_get_num_entries(aw_entries) + 16;

	for (;;)
	{
		AwParkedRow *rows = palloc(sizeof(AwParkedRow) * room);
		HASH_SEQ_STATUS status;
		AwEntry    *e;
		long		count = 0;
		bool		fits;

		LWLockAcquire(aw_shared->lock, LW_SHARED);
		fits = (hash_get_num_entries(aw_entries) <= room);
		if (fits)
		{
			hash_seq_init(&status, aw_entries);
			while ((e = (AwEntry *) hash_seq_search(&status)) != NULL)
			{
				AwParkedRow *r = &rows[count];

				if (e->key.dbid != MyDatabaseId)
					continue;
				strlcpy(r->key, e->key.key, sizeof(r->key));
				strlcpy(r->topic, e->topic->key.name, sizeof(r->topic));
				r->attempt = e->attempt;
				r->pending = (e->state == AW_PENDING);
				/* due and in-flight entries hold a slot: woken, for the reader */
				r->woken = e->woken || e->state == AW_DUE || e->state == AW_IN_FLIGHT;
				r->fenced = (e->key.kind == AW_KIND_FENCED);
				r->parked_at = e->parked_at;
				r->fence = e->fence;
				r->owner_pid = e->owner_pid;
				count++;
			}
		}
		else
			room = hash_get_num_entries(aw_entries) + 16;
		LWLockRelease(aw_shared->lock);
		if (fits)
		{
			*n = (int) count;
			return rows;
		}
		pfree(rows);
	}
}

/* Copy this database's topics for aion_wake.topics, as above. */
AwTopicRow *
aw_set_copy_topics(int *n)
{
	long		room = hash_get_num_entries(aw_topics) + 16;
	TimestampTz now = GetCurrentTimestamp();

	for (;;)
	{
		AwTopicRow *rows = palloc(sizeof(AwTopicRow) * room);
		HASH_SEQ_STATUS status;
		AwTopic    *t;
		long		count = 0;
		bool		fits;

		LWLockAcquire(aw_shared->lock, LW_SHARED);
		fits = (hash_get_num_entries(aw_topics) <= room);
		if (fits)
		{
			hash_seq_init(&status, aw_topics);
			while ((t = (AwTopic *) hash_seq_search(&status)) != NULL)
			{
				AwTopicRow *r = &rows[count];

				if (t->key.dbid != MyDatabaseId)
					continue;
				strlcpy(r->name, t->key.name, sizeof(r->name));
				r->parked = t->n_entries;
				r->unspent_slots = (int64) Min(t->slots, (uint64) PG_INT64_MAX);
				r->credit = t->credit_until > now ?
					(int64) Min(t->credit, (uint64) PG_INT64_MAX) : 0;
				r->pulses = (int64) Min(t->pulses, (uint64) PG_INT64_MAX);
				r->reoffered = (int64) Min(t->reoffered, (uint64) PG_INT64_MAX);
				r->max_in_flight = t->cap.max_in_flight;
				r->in_flight = aw_capacity_in_flight(&t->cap);
				aw_rate_copy(t, &r->rate, now);
				/* pending parks: one per open park transaction, few */
				r->parked_pending = 0;
				for (int k = 0; k < AW_NUM_KINDS; k++)
				{
					dlist_iter	it;

					dlist_foreach(it, &t->pending[k])
						r->parked_pending++;
				}
				count++;
			}
		}
		else
			room = hash_get_num_entries(aw_topics) + 16;
		LWLockRelease(aw_shared->lock);
		if (fits)
		{
			*n = (int) count;
			return rows;
		}
		pfree(rows);
	}
}

/* The counters of aion_wake.status, copied under the set lock. */
void
aw_set_counters(AwCounters *out)
{
	LWLockAcquire(aw_shared->lock, LW_SHARED);
	*out = aw_shared->counters;
	LWLockRelease(aw_shared->lock);
}
