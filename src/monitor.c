/*-------------------------------------------------------------------------
 *
 * monitor.c
 *	  The figures of aion_wake.topic_health, aion_wake.claim_histogram and
 *	  aion_wake.status.lost_wakes, kept in shared memory as they change.
 *
 *	  Per topic: claims, rows claimed, wakes received by blocked claimers
 *	  and those that found a row, blocked claims that ended at their
 *	  deadline with nothing, and lost wakes.  A claim adds its counts once,
 *	  as it returns (claim.c), so the cost is one lookup per topic of the
 *	  call.  They live in a table of their own, keyed like the set's topic
 *	  table and as large, with a lock of their own (AW_LOCK_MONITOR): the
 *	  set's topic table holds the topics with parked rows, pulses or limits
 *	  and recycles quiet ones, and a claim of an unlimited topic never
 *	  takes the set lock; counting claims there would make every claimed
 *	  topic an entry of the set and every claim a taker of its lock.  The
 *	  counters are atomics, added under the lock held shared; only a
 *	  topic's first count takes it exclusively.  When the table is full, a
 *	  new topic is not counted (its row in topic_health shows zeros).
 *	  Topics are never removed: the counters run from server start.
 *
 *	  The histograms are cluster-wide arrays of atomic bucket counts with
 *	  fixed bounds, read without a lock (a reader may see an observation in
 *	  a bucket and not yet in the count: the views take the count as the
 *	  sum of the buckets).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/monitor.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/tuplestore.h"

#include "aion_wake.h"
#include "aw_args.h"
#include "aw_compat.h"
#include "aw_monitor.h"
#include "aw_set_views.h"
#include "aw_settings.h"
#include "aw_waiters.h"

PG_FUNCTION_INFO_V1(aw_topic_health_internal);
PG_FUNCTION_INFO_V1(aw_claim_histogram);

/* seconds: 1 ms, 5 ms, 10 ms, 25 ms, 50 ms, 100 ms, 250 ms, 500 ms, 1 s, 2.5 s, 5 s, 10 s, 30 s, 60 s */
const int64 aw_hist_bounds_us[AW_HIST_BOUNDS] = {
	1000, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000, 60000000
};

typedef struct AwHistogramShared
{
	pg_atomic_uint64 buckets[AW_HIST_BOUNDS + 1];
	pg_atomic_uint64 sum_us;
} AwHistogramShared;

typedef struct AwMonitorShared
{
	LWLock	   *lock;			/* the topic counters' table */
	pg_atomic_uint64 lost_wakes;
	AwHistogramShared hist[AW_NUM_HISTOGRAMS];
} AwMonitorShared;

typedef struct AwCountsKey
{
	Oid			dbid;
	char		name[AW_TOPIC_MAXLEN + 1];
} AwCountsKey;

typedef struct AwCountsEntry
{
	AwCountsKey key;			/* hash key: must be first */
	pg_atomic_uint64 claims;
	pg_atomic_uint64 rows;
	pg_atomic_uint64 wakes;
	pg_atomic_uint64 wakes_found;
	pg_atomic_uint64 timeouts;
	pg_atomic_uint64 lost_wakes;
} AwCountsEntry;

static AwMonitorShared *aw_monitor = NULL;
static HTAB *aw_counts = NULL;

Size
aw_monitor_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(AwMonitorShared)),
					hash_estimate_size(aw_max_topics, sizeof(AwCountsEntry)));
}

/* Called from shmem_startup_hook with AddinShmemInitLock held. */
void
aw_monitor_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	aw_monitor = ShmemInitStruct("aion_wake monitor", sizeof(AwMonitorShared), &found);
	if (!found)
	{
		int			h;
		int			b;

		aw_monitor->lock = AW_LWLOCK(AW_LOCK_MONITOR);
		pg_atomic_init_u64(&aw_monitor->lost_wakes, 0);
		for (h = 0; h < AW_NUM_HISTOGRAMS; h++)
		{
			for (b = 0; b <= AW_HIST_BOUNDS; b++)
				pg_atomic_init_u64(&aw_monitor->hist[h].buckets[b], 0);
			pg_atomic_init_u64(&aw_monitor->hist[h].sum_us, 0);
		}
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(AwCountsKey);
	info.entrysize = sizeof(AwCountsEntry);
	aw_counts = aw_shmem_init_hash("aion_wake topic counters", aw_max_topics, &info,
								   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

/* One observation of us microseconds (negative counts as 0). */
void
aw_monitor_observe(AwHistogram h, int64 us)
{
	int			b = 0;

	if (aw_monitor == NULL)
		return;
	us = Max(us, 0);
	while (b < AW_HIST_BOUNDS && us > aw_hist_bounds_us[b])
		b++;
	pg_atomic_fetch_add_u64(&aw_monitor->hist[h].buckets[b], 1);
	pg_atomic_fetch_add_u64(&aw_monitor->hist[h].sum_us, (uint64) us);
}

static void
aw_counts_add(AwCountsEntry *e, const AwTopicCounts *add)
{
	if (add->claims)
		pg_atomic_fetch_add_u64(&e->claims, add->claims);
	if (add->rows)
		pg_atomic_fetch_add_u64(&e->rows, add->rows);
	if (add->wakes)
		pg_atomic_fetch_add_u64(&e->wakes, add->wakes);
	if (add->wakes_found)
		pg_atomic_fetch_add_u64(&e->wakes_found, add->wakes_found);
	if (add->timeouts)
		pg_atomic_fetch_add_u64(&e->timeouts, add->timeouts);
	if (add->lost_wakes)
		pg_atomic_fetch_add_u64(&e->lost_wakes, add->lost_wakes);
}

/*
 * Add one claim's counts to a topic of this database.  Never raises: a
 * topic the full table cannot hold is not counted.
 */
void
aw_monitor_add(const char *topic, const AwTopicCounts *add)
{
	AwCountsKey key;
	AwCountsEntry *e;
	bool		found;

	if (aw_monitor == NULL)
		return;
	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	strlcpy(key.name, topic, sizeof(key.name));

	LWLockAcquire(aw_monitor->lock, LW_SHARED);
	e = (AwCountsEntry *) hash_search(aw_counts, &key, HASH_FIND, NULL);
	if (e != NULL)
		aw_counts_add(e, add);
	LWLockRelease(aw_monitor->lock);
	if (e != NULL)
		return;

	/* the topic's first count */
	LWLockAcquire(aw_monitor->lock, LW_EXCLUSIVE);
	e = (AwCountsEntry *) hash_search(aw_counts, &key, HASH_ENTER_NULL, &found);
	if (e != NULL)
	{
		if (!found)
		{
			pg_atomic_init_u64(&e->claims, 0);
			pg_atomic_init_u64(&e->rows, 0);
			pg_atomic_init_u64(&e->wakes, 0);
			pg_atomic_init_u64(&e->wakes_found, 0);
			pg_atomic_init_u64(&e->timeouts, 0);
			pg_atomic_init_u64(&e->lost_wakes, 0);
		}
		aw_counts_add(e, add);
	}
	LWLockRelease(aw_monitor->lock);
}

/*
 * The lost-wake detector fired (claim_wait.c): count it and log one line.
 * The topic's own count comes with the claim's other counts.
 */
void
aw_monitor_lost_wake(const char *topic, int64 delay_us)
{
	if (aw_monitor != NULL)
		pg_atomic_fetch_add_u64(&aw_monitor->lost_wakes, 1);
	ereport(LOG,
			(errmsg("aion_wake: lost wake on topic \"%s\": a blocked claim took a row claimable for %.1f ms",
					topic, (double) delay_us / 1000.0),
			 errdetail("No wake for the topic reached any blocked claimer after the row's fence passed.")));
}

void
aw_monitor_copy_histogram(AwHistogram h, AwHistogramCopy *out)
{
	int			b;

	out->count = 0;
	for (b = 0; b <= AW_HIST_BOUNDS; b++)
	{
		out->buckets[b] = pg_atomic_read_u64(&aw_monitor->hist[h].buckets[b]);
		out->count += out->buckets[b];
	}
	out->sum_us = pg_atomic_read_u64(&aw_monitor->hist[h].sum_us);
}

uint64
aw_monitor_lost_wakes(void)
{
	return aw_monitor ? pg_atomic_read_u64(&aw_monitor->lost_wakes) : 0;
}

/* Copy this database's topic counters; the buffer is sized as the table. */
AwTopicCountsRow *
aw_monitor_copy_topics(int *n)
{
	AwTopicCountsRow *rows = palloc(sizeof(AwTopicCountsRow) * Max(aw_max_topics, 1));
	HASH_SEQ_STATUS status;
	AwCountsEntry *e;
	int			count = 0;

	LWLockAcquire(aw_monitor->lock, LW_SHARED);
	hash_seq_init(&status, aw_counts);
	while ((e = (AwCountsEntry *) hash_seq_search(&status)) != NULL)
	{
		AwTopicCountsRow *r;

		if (e->key.dbid != MyDatabaseId)
			continue;
		if (count >= aw_max_topics)
		{
			hash_seq_term(&status);
			break;
		}
		r = &rows[count++];
		strlcpy(r->name, e->key.name, sizeof(r->name));
		r->counts.claims = pg_atomic_read_u64(&e->claims);
		r->counts.rows = pg_atomic_read_u64(&e->rows);
		r->counts.wakes = pg_atomic_read_u64(&e->wakes);
		r->counts.wakes_found = pg_atomic_read_u64(&e->wakes_found);
		r->counts.timeouts = pg_atomic_read_u64(&e->timeouts);
		r->counts.lost_wakes = pg_atomic_read_u64(&e->lost_wakes);
	}
	LWLockRelease(aw_monitor->lock);
	*n = count;
	return rows;
}

static int
aw_topic_row_cmp(const void *a, const void *b)
{
	return strcmp(((const AwTopicRow *) a)->name, ((const AwTopicRow *) b)->name);
}

static int
aw_counts_row_cmp(const void *a, const void *b)
{
	return strcmp(((const AwTopicCountsRow *) a)->name, ((const AwTopicCountsRow *) b)->name);
}

/*
 * aion_wake.topic_health_internal(): per topic of this database, what
 * shared memory knows -- parks (pending and confirmed), the limit and its
 * live leases, blocked claimers, and the claim counters -- for every topic
 * in the set's topic table or the counters' table.  Each table is copied
 * under its own lock, then the two are merged by name.  Never scans the
 * outbox (aion_wake.topic_health() adds the table's figures).
 */
Datum
aw_topic_health_internal(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	AwTopicRow *set;
	AwTopicCountsRow *cnt;
	int			nset;
	int			ncnt;
	int			i = 0;
	int			j = 0;

	aw_require_loaded();
	InitMaterializedSRF(fcinfo, 0);
	set = aw_set_copy_topics(&nset);
	cnt = aw_monitor_copy_topics(&ncnt);
	qsort(set, nset, sizeof(AwTopicRow), aw_topic_row_cmp);
	qsort(cnt, ncnt, sizeof(AwTopicCountsRow), aw_counts_row_cmp);
	while (i < nset || j < ncnt)
	{
		int			cmp = (i >= nset) ? 1 : (j >= ncnt) ? -1 : strcmp(set[i].name, cnt[j].name);
		AwTopicRow *r = (cmp <= 0) ? &set[i] : NULL;
		AwTopicCounts *k = (cmp >= 0) ? &cnt[j].counts : NULL;
		const char *name = r ? r->name : cnt[j].name;
		Datum		values[12];
		bool		nulls[12];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(name);
		values[1] = Int64GetDatum(r ? r->parked_pending : 0);
		values[2] = Int64GetDatum(r ? r->parked - r->parked_pending : 0);
		values[3] = Int32GetDatum(r ? r->max_in_flight : 0);
		nulls[3] = (r == NULL || r->max_in_flight == 0);
		values[4] = Int32GetDatum(r ? r->in_flight : 0);
		nulls[4] = nulls[3];
		values[5] = Int32GetDatum(aw_waiters_of_topic(MyDatabaseId, name));
		values[6] = Int64GetDatum(k ? (int64) k->claims : 0);
		values[7] = Int64GetDatum(k ? (int64) k->rows : 0);
		values[8] = Int64GetDatum(k ? (int64) k->wakes : 0);
		values[9] = Int64GetDatum(k ? (int64) k->wakes_found : 0);
		values[10] = Int64GetDatum(k ? (int64) k->timeouts : 0);
		values[11] = Int64GetDatum(k ? (int64) k->lost_wakes : 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (cmp <= 0)
			i++;
		if (cmp >= 0)
			j++;
	}
	return (Datum) 0;
}

/*
 * aion_wake.claim_histogram: one row per histogram, in the shape
 * Prometheus (and postgres_exporter's HISTOGRAM) wants: the finite upper
 * bounds in seconds, the cumulative count at each, the count of all
 * observations (the +Inf bucket) and their sum in seconds.
 */
Datum
aw_claim_histogram(PG_FUNCTION_ARGS)
{
	static const char *const names[AW_NUM_HISTOGRAMS] = {"claim_wait", "claim_latency"};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			h;

	aw_require_loaded();
	InitMaterializedSRF(fcinfo, 0);
	for (h = 0; h < AW_NUM_HISTOGRAMS; h++)
	{
		AwHistogramCopy copy;
		Datum		le[AW_HIST_BOUNDS];
		Datum		cum[AW_HIST_BOUNDS];
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		uint64		running = 0;
		int			b;

		aw_monitor_copy_histogram((AwHistogram) h, &copy);
		for (b = 0; b < AW_HIST_BOUNDS; b++)
		{
			running += copy.buckets[b];
			le[b] = Float8GetDatum((double) aw_hist_bounds_us[b] / 1000000.0);
			cum[b] = Int64GetDatum((int64) running);
		}
		values[0] = CStringGetTextDatum(names[h]);
		values[1] = PointerGetDatum(construct_array(le, AW_HIST_BOUNDS, FLOAT8OID, 8,
													FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[2] = PointerGetDatum(construct_array(cum, AW_HIST_BOUNDS, INT8OID, 8,
													FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[3] = Int64GetDatum((int64) copy.count);
		values[4] = Float8GetDatum((double) copy.sum_us / 1000000.0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
