/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  claim(topic, ...) and claim(topics[], ...): lease visible rows, oldest
 *	  fence first (from the 1.2 schema: highest priority first, then oldest
 *	  fence), each topic within its limit; with wait, block until a row of
 *	  one of the topics is ready.
 *
 *	  A claim of a limited topic first reserves slots of it under the set's
 *	  lock, then locks rows (FOR UPDATE SKIP LOCKED), so concurrent claims
 *	  can never take more rows than the limit allows (G8); each row leased
 *	  turns a reserved slot into a lease, and what the claim did not use is
 *	  given back at once.  Every claim holds its topics' locks in share
 *	  mode until its transaction ends, so that set_limit() counts its leases
 *	  exactly (limits.c).
 *
 *	  A claim with wait blocks in claim_wait.c.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "catalog/namespace.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "aw_args.h"
#include "aw_claim.h"
#include "aw_claim_internal.h"
#include "aw_compat.h"
#include "aw_limits.h"
#include "aw_plans.h"
#include "aw_pulse_parse.h"
#include "aw_reoffer.h"
#include "aw_pulse_spend.h"
#include "aw_settings.h"
#include "aw_waiters.h"
#include "aw_worker_slots.h"
#include "aw_xact.h"

PG_FUNCTION_INFO_V1(aw_claim);
PG_FUNCTION_INFO_V1(aw_claim_topics);


/* at most this many settled leases of a topic pass their slots to one claim */
#define AW_HANDOFF_MAX 64


static SPIPlanPtr aw_claim_plans[3];	/* by schema: 1.0, 1.1, 1.2 */

/* the claim statements' parameters (from 1.2 seven, before it five) */
static const Oid aw_claim_types[7] = {TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZOID,
INT4OID, TIMESTAMPTZOID, INT4ARRAYOID, INT4ARRAYOID};

/*
 * The claim: for each topic ($1, with $2 the rows it may give), its oldest
 * visible rows, locked, skipping rows others hold (LATERAL, so the lock
 * stops at the topic's allowance); of those, the $4 oldest are leased until
 * $5.  A claim of several topics gives each only its share of the $4
 * oldest rows across them (aw_claim_shares_sql), so it locks no row it
 * does not lease; rows locked and not leased would come back flagged, so
 * that the claim could wake claimers for them when its transaction ends.
 * The "%s" take what the 1.1 schema adds (leased_until).
 */
static const char aw_claim_sql[] =
"WITH q AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) "
"                        AS q(topic, allow)), "
"c AS (SELECT x.* FROM q, "
"      LATERAL (SELECT o.dispatch_key, o.topic, o.visible_after AS old_fence, "
"                      o.parked_at IS NOT NULL AS was_parked "
"                 FROM aion_wake.outbox o "
"                WHERE o.topic OPERATOR(pg_catalog.=) q.topic "
"                  AND o.visible_after OPERATOR(pg_catalog.<=) $3 "
"                ORDER BY o.visible_after LIMIT q.allow "
"                  FOR UPDATE OF o SKIP LOCKED) x), "
"p AS (SELECT c.dispatch_key FROM c ORDER BY c.old_fence, c.dispatch_key LIMIT $4), "
"u AS (UPDATE aion_wake.outbox o "
"         SET visible_after = $5, parked_at = NULL%s, "
"             lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass) "
"       WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT p.dispatch_key FROM p)) "
"   RETURNING o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
"             o.enqueued_at, o.last_error, o.lease_token, o.parked_at%s) "
"SELECT u.*, c.old_fence, c.was_parked, c.topic, u.dispatch_key IS NOT NULL "
"  FROM c LEFT JOIN u ON u.dispatch_key OPERATOR(pg_catalog.=) c.dispatch_key "
" ORDER BY u.dispatch_key IS NULL, c.old_fence, c.dispatch_key";

/*
 * A claim of several topics: how many of the $4 oldest visible rows across
 * the topics ($1, each giving at most $2) each topic holds, read without
 * locking anything.  The claim then locks that many of each topic's
 * oldest rows that nobody else holds, so that it never locks a row it
 * does not lease: a row locked and not leased would stay locked, neither
 * leased nor claimable, until the claim's transaction ends.
 */
static const char aw_claim_shares_sql[] =
"SELECT k.topic, pg_catalog.count(*)::pg_catalog.int4 "
"  FROM (SELECT x.topic, x.visible_after, x.dispatch_key "
"          FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS q(topic, allow), "
"               LATERAL (SELECT o.topic, o.visible_after, o.dispatch_key "
"                          FROM aion_wake.outbox o "
"                         WHERE o.topic OPERATOR(pg_catalog.=) q.topic "
"                           AND o.visible_after OPERATOR(pg_catalog.<=) $3 "
"                         ORDER BY o.visible_after LIMIT q.allow) x "
"         ORDER BY x.visible_after, x.dispatch_key LIMIT $4) k "
" GROUP BY k.topic";

/*
 * From the 1.2 schema rows have a priority, and a topic's visible rows are
 * taken highest priority first, then oldest fence.  One range scan of
 * (topic, priority, visible_after) cannot give that order: it would read
 * and filter every row of a higher priority whose fence is ahead (leased,
 * parked, backing off).  So the rows of topic q.topic are found by a walk
 * down the topic's distinct priorities (r, AW_PRIORITY_WALK in
 * aw_plans.h: one probe of the index (topic, priority DESC, visible_after)
 * per priority, from the highest), and in each priority by a range scan
 * of its visible rows, oldest fence first (y).  The walk is lazy and the
 * whole stops at q.allow rows, so a claim reads the priorities above the
 * first that has enough rows and no more: with every row at priority 0,
 * one probe more than a claim without priorities, and that probe reads
 * no row.  The LIMIT takes the rows
 * in the walk's order: y depends on r (LATERAL), so the join is a nested
 * loop with r outer, and r yields the priorities as the recursion finds
 * them, highest first; and only the rows the LIMIT takes are locked.  The
 * statements sort what they took again where topics meet.  (While 1.0's
 * index on (topic, visible_after) was there, the range scan of a priority
 * could also be a scan of it with the priority filtered, which a kept plan
 * made while every row had one priority chose; the column's n_distinct is
 * set and that index dropped, aion_wake--1.1--1.2.sql.)  The walk
 * starts below q.below (a claim of several topics passes there the
 * priorities it is done with, aw_claim_once); stop may end it early.
 * cols are the columns taken of each row, lock its locking clause.
 */
#define AW_CLAIM_BY_PRIORITY(cols, lock, stop) \
"LATERAL (" AW_PRIORITY_WALK("q.topic", "q.below", stop) \
"         SELECT y.* FROM r, " \
"              LATERAL (SELECT " cols " FROM aion_wake.outbox o " \
"                        WHERE o.topic OPERATOR(pg_catalog.=) q.topic " \
"                          AND o.priority OPERATOR(pg_catalog.=) r.p " \
"                          AND o.visible_after OPERATOR(pg_catalog.<=) $3 " \
"                        ORDER BY o.visible_after LIMIT q.allow" lock ") y " \
"          LIMIT q.allow) x"

/*
 * aw_claim_sql from the 1.2 schema: by priority, then fence.  Each topic
 * ($1) gives at most $2 rows, of priorities below $6 and not below $7
 * (aw_claim_once).
 */
static const char aw_claim_prio_sql[] =
"WITH q AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), "
"                                    pg_catalog.unnest($6), pg_catalog.unnest($7)) "
"                        AS q(topic, allow, below, floor)), "
"c AS (SELECT x.* FROM q, "
AW_CLAIM_BY_PRIORITY("o.dispatch_key, o.topic, o.priority, o.visible_after AS old_fence, "
					 "o.parked_at IS NOT NULL AS was_parked",
					 " FOR UPDATE OF o SKIP LOCKED",
					 " AND r.p OPERATOR(pg_catalog.>) q.floor")
"), "
"p AS (SELECT c.dispatch_key FROM c "
"       ORDER BY c.priority DESC, c.old_fence, c.dispatch_key LIMIT $4), "
"u AS (UPDATE aion_wake.outbox o "
"         SET visible_after = $5, parked_at = NULL, leased_until = $5, "
"             lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass) "
"       WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT p.dispatch_key FROM p)) "
"   RETURNING o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
"             o.enqueued_at, o.last_error, o.lease_token, o.parked_at, o.leased_until, "
"             o.priority) "
"SELECT u.*, c.old_fence, c.was_parked, c.topic, u.dispatch_key IS NOT NULL "
"  FROM c LEFT JOIN u ON u.dispatch_key OPERATOR(pg_catalog.=) c.dispatch_key "
" ORDER BY u.dispatch_key IS NULL, c.priority DESC, c.old_fence, c.dispatch_key";

/*
 * aw_claim_prio_sql for a claim of one topic, with the same parameters and
 * result.  One topic leases every row it locks: it locks no more than the
 * rows wanted ($4) nor its allowance ($2), the lesser of the two.  So the
 * UPDATE joins the locked rows directly, and neither the pick of the
 * oldest rows across topics (p) nor the join that finds rows locked and
 * not leased is needed: a smaller plan to start, which is most of what a
 * claim of one row costs beyond its index probes.  The UPDATE reads the
 * outbox by "= ANY" of the locked keys as well as by the join, so that
 * whatever join a plan kept from a small table chose, it never reads the
 * whole primary key (plans.c).
 */
static const char aw_claim_one_sql[] =
"WITH c AS (SELECT x.* FROM (SELECT $1[1] AS topic, LEAST($2[1], $4) AS allow, "
"                                   $6[1] AS below, $7[1] AS floor) q, "
AW_CLAIM_BY_PRIORITY("o.dispatch_key, o.priority, o.visible_after AS old_fence, "
					 "o.parked_at IS NOT NULL AS was_parked",
					 " FOR UPDATE OF o SKIP LOCKED",
					 " AND r.p OPERATOR(pg_catalog.>) q.floor")
"), "
"u AS (UPDATE aion_wake.outbox o "
"         SET visible_after = $5, parked_at = NULL, leased_until = $5, "
"             lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass) "
"        FROM c WHERE o.dispatch_key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.dispatch_key FROM c)) "
"         AND o.dispatch_key OPERATOR(pg_catalog.=) c.dispatch_key "
"   RETURNING o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, "
"             o.enqueued_at, o.last_error, o.lease_token, o.parked_at, o.leased_until, "
"             o.priority, c.old_fence, c.was_parked) "
"SELECT u.dispatch_key, u.topic, u.payload, u.attempt, u.visible_after, u.enqueued_at, "
"       u.last_error, u.lease_token, u.parked_at, u.leased_until, u.priority, "
"       u.old_fence, u.was_parked, u.topic, true "
"  FROM u ORDER BY u.priority DESC, u.old_fence, u.dispatch_key";

static SPIPlanPtr aw_claim_one_plan;

/*
 * The first look of a claim of one row of one topic: the walk's first step
 * alone.  It takes the oldest visible row nobody holds of the priority the
 * walk would start at (AW_TOP_PRIORITY: the highest below $6 above 0,
 * else 0), locks it, and leases it by its key, in a plan of a handful
 * of nodes; the walk's statement has four times as many, which every
 * execution sets up.  When it takes nothing the claim runs the walk
 * (aw_claim_once), which looks at that priority again and goes on below
 * it.  The same parameters and result as aw_claim_one_sql; the claim runs
 * it only when it wants one row and the topic may take one, so its LIMIT
 * is 1 ($2 and $4 are not read).  In READ COMMITTED, where the outbox's
 * update would do nothing else, claim_direct.c does the same steps
 * without the executor, for any number of rows, and the statement runs
 * only where it cannot.
 *
 * The UPDATE finds the locked row by "= (SELECT ... FROM c)" and returns
 * the old fence and parked flag as two more initplans over c: no second
 * WITH and no join of the two (24,000 instructions a claim fewer, of
 * 700,000).  Joining the UPDATE to c directly costs about as little, but
 * a plan kept from a small table then merge-joins c with a read of the
 * whole primary key.
 */
static const char aw_claim_top_sql[] =
"WITH c AS (SELECT o.dispatch_key, o.visible_after AS old_fence, "
"                  o.parked_at IS NOT NULL AS was_parked "
"             FROM aion_wake.outbox o "
"            WHERE o.topic OPERATOR(pg_catalog.=) $1[1] "
"              AND o.priority OPERATOR(pg_catalog.=) " AW_TOP_PRIORITY("$1[1]", "$6[1]")
"              AND o.visible_after OPERATOR(pg_catalog.<=) $3 "
"            ORDER BY o.visible_after LIMIT 1 "
"              FOR UPDATE OF o SKIP LOCKED) "
"UPDATE aion_wake.outbox o "
"   SET visible_after = $5, parked_at = NULL, leased_until = $5, "
"       lease_token = pg_catalog.nextval('aion_wake.lease_token_seq'::pg_catalog.regclass) "
" WHERE o.dispatch_key OPERATOR(pg_catalog.=) (SELECT c.dispatch_key FROM c) "
"RETURNING o.dispatch_key, o.topic, o.payload, o.attempt, o.visible_after, o.enqueued_at, "
"          o.last_error, o.lease_token, o.parked_at, o.leased_until, o.priority, "
"          (SELECT c.old_fence FROM c), (SELECT c.was_parked FROM c), o.topic, true";

static SPIPlanPtr aw_claim_top_plan;

/*
 * A first look that finds nothing costs more than the walk alone: on a
 * topic whose highest priority has rows but none to take (leased,
 * backing off, held by others) every claim of the topic would pay it.
 * So a backend remembers the last few topics whose first look found
 * nothing, and their next AW_FIRST_LOOK_REST claims that would look walk
 * straight away (a claim of many rows that cannot look without the
 * executor, in REPEATABLE READ say, walks anyway and counts for nothing).
 */
#define AW_FIRST_LOOK_TOPICS 8
#define AW_FIRST_LOOK_REST 16

typedef struct AwFirstLookMiss
{
	char		topic[AW_TOPIC_MAXLEN + 1];
	int			rest;			/* claims left that walk straight away */
} AwFirstLookMiss;

static AwFirstLookMiss aw_first_look_misses[AW_FIRST_LOOK_TOPICS];
static int	aw_first_look_next;	/* the entry the next miss replaces */

/* Whether a claim of topic should look first; counts it down. */
static bool
aw_first_look_wanted(const char *topic)
{
	for (int i = 0; i < AW_FIRST_LOOK_TOPICS; i++)
	{
		AwFirstLookMiss *m = &aw_first_look_misses[i];

		if (m->rest > 0 && strcmp(m->topic, topic) == 0)
		{
			m->rest--;
			return false;
		}
	}
	return true;
}

/* The first look of a claim of topic found nothing. */
static void
aw_first_look_missed(const char *topic)
{
	AwFirstLookMiss *m = &aw_first_look_misses[aw_first_look_next];

	strlcpy(m->topic, topic, sizeof(m->topic));
	m->rest = AW_FIRST_LOOK_REST;
	aw_first_look_next = (aw_first_look_next + 1) % AW_FIRST_LOOK_TOPICS;
}

/*
 * aw_claim_shares_sql from the 1.2 schema: by priority, then fence, each
 * topic's rows of priorities below $5; with each share, the lowest
 * priority in it.
 */
static const char aw_claim_prio_shares_sql[] =
"SELECT k.topic, pg_catalog.count(*)::pg_catalog.int4, "
"       pg_catalog.min(k.priority)::pg_catalog.int4 "
"  FROM (SELECT x.topic, x.priority, x.visible_after, x.dispatch_key "
"          FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), "
"                          pg_catalog.unnest($5)) AS q(topic, allow, below), "
AW_CLAIM_BY_PRIORITY("o.topic, o.priority, o.visible_after, o.dispatch_key", "", "")
"         ORDER BY x.priority DESC, x.visible_after, x.dispatch_key LIMIT $4) k "
" GROUP BY k.topic";

static SPIPlanPtr aw_claim_shares_plans[2];	/* before 1.2, from 1.2 */

/*
 * The kept claim statement for schema version v (aw_schema_version) and
 * nq topics: from the 1.2 schema a claim of one topic has its own.
 */
static SPIPlanPtr
aw_claim_plan(int version, int nq)
{
	int			v = version >= 12 ? 2 : version >= 11 ? 1 : 0;

	if (v == 2 && nq == 1)
		return aw_plan_prepare(&aw_claim_one_plan, aw_claim_one_sql, 7, aw_claim_types);
	if (aw_claim_plans[v] == NULL)
	{
		char	   *sql;

		if (v == 2)
			sql = pstrdup(aw_claim_prio_sql);
		else
			sql = psprintf(aw_claim_sql,
						   v ? ", leased_until = $5" : "",
						   v ? ", o.leased_until" : "");
		(void) aw_plan_prepare(&aw_claim_plans[v], sql, v == 2 ? 7 : 5, aw_claim_types);
		pfree(sql);
	}
	return aw_claim_plans[v];
}

/* The kept shares statement for schema version v. */
static SPIPlanPtr
aw_claim_shares_plan(int version)
{
	static const Oid types[5] = {TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZOID, INT4OID,
	INT4ARRAYOID};
	int			v = version >= 12 ? 1 : 0;

	return aw_plan_prepare(&aw_claim_shares_plans[v],
						   v ? aw_claim_prio_shares_sql : aw_claim_shares_sql,
						   v ? 5 : 4, types);
}

/* How many settled leases of topic i may pass their slots to the claim. */
static int32
aw_claim_handoff_max(AwClaim *c, int i)
{
	return Max(c->settled[i], AW_HANDOFF_MAX);
}

/* The index of a topic of the claim, by name (at most 64 of them). */
static int
aw_claim_topic_index(AwClaim *c, const char *name)
{
	int			i;

	for (i = 0; i < c->ntopics; i++)
	{
		if (strcmp(c->topics[i].name, name) == 0)
			return i;
	}
	elog(ERROR, "aion_wake claim returned a row of topic \"%s\" it did not ask for", name);
	return -1;					/* keep compiler quiet */
}

/*
 * A row the claim took: into the result, and, of a limited topic, a lease.
 * values are the outbox's columns.
 */
static void
aw_claim_take_row(AwClaim *c, AwClaimTopic *t, Datum *values, bool *nulls)
{
	tuplestore_putvalues(c->rsinfo->setResult, c->rsinfo->setDesc, values, nulls);
	t->got++;
	c->claimed++;
	t->mon.rows++;
	if (t->limited)
	{
		AwLiveLease *l;

		if (c->nleases == c->leases_room)
		{
			c->leases_room *= 2;
			c->leases = repalloc(c->leases, sizeof(AwLiveLease) * c->leases_room);
		}
		l = &c->leases[c->nleases++];

		text_to_cstring_buffer(DatumGetTextPP(values[0]), l->key, sizeof(l->key));
		strlcpy(l->topic, t->name, sizeof(l->topic));
		l->token = DatumGetInt64(values[7]);
		l->ends = c->lease_end;
	}
}

/*
 * A row a claim's statement (or its first look, claim_direct.c) leased:
 * taken as aw_claim_take_row takes it, its claim latency observed and the
 * fence the lost-wake detector watches moved, and, if it was parked, its
 * entry forgotten at commit.
 */
static void
aw_claim_took(AwClaim *c, AwClaimTopic *t, Datum *values, bool *nulls,
			  TimestampTz now, TimestampTz old_fence, bool was_parked)
{
	aw_claim_take_row(c, t, values, nulls);
	aw_monitor_observe(AW_HIST_CLAIM_LATENCY, now - old_fence);
	if (old_fence > c->mon_after &&
		(t->mon_fence == 0 || old_fence < t->mon_fence))
		t->mon_fence = old_fence;
	if (was_parked)
		aw_xact_record_forget(TextDatumGetCString(values[0]));
}

/* The callback of a claiming re-offer round: a parked row leased to us. */
static void
aw_claim_parked_row(void *arg, HeapTuple tup, TupleDesc desc, int first)
{
	AwClaim    *c = (AwClaim *) arg;
	Datum		values[AW_OUTBOX_MAX_NATTS];
	bool		nulls[AW_OUTBOX_MAX_NATTS];
	char	   *topic = SPI_getvalue(tup, desc, first + 1);
	int			a;

	for (a = 0; a < c->natts; a++)
		values[a] = SPI_getbinval(tup, desc, first + a, &nulls[a]);
	aw_claim_take_row(c, &c->topics[aw_claim_topic_index(c, topic)], values, nulls);
}

/*
 * Reserve slots of the claim's topics in mask (each up to max_rows; an
 * unlimited topic gives max_rows), holding each topic's lock in share
 * mode.  A topic's first slots are those of the leases of it this
 * transaction settled, when the set passes them on (the zero-gap
 * hand-off); a slot whose settle was not park() is spent on the topic's
 * oldest confirmed park first, as the pulse it would have been.  Returns
 * the number of topics with rows to give.
 */
static int
aw_claim_reserve(AwClaim *c, uint64 mask, bool limits)
{
	int			i;
	int			open = 0;

	/* in one order (by lock key), before anything is reserved */
	if (limits)
		aw_lock_topics_shared(c->names, c->ntopics, mask);
	for (i = 0; i < c->ntopics; i++)
	{
		AwClaimTopic *t = &c->topics[i];

		t->allow = t->got = t->excess = t->handed = t->own_slots = 0;
		t->reserve = NULL;
		t->limited = false;
		if ((mask & (UINT64CONST(1) << i)) == 0)
			continue;
		if (limits)
		{
			int			j;

			if (t->from == NULL)	/* kept as long as the claim, across probes */
				t->from = MemoryContextAlloc(GetMemoryChunkContext(c),
											 sizeof(AwSettledLease) * aw_claim_handoff_max(c, i));
			t->reserve = aw_limits_reserve(t->name, c->max_rows, t->from,
										   Min(c->max_rows, aw_claim_handoff_max(c, i)),
										   &t->allow, &t->handed, &t->limited);
			for (j = 0; j < t->handed; j++)
				t->own_slots += t->from[j].pulse ? 1 : 0;
		}
		else
			t->allow = c->max_rows;
		if (!t->limited)
			t->own_slots = c->settle_slots[i];
		if (t->allow > 0)
			open++;
	}
	return open;
}

/*
 * After the attempt: the rows of limited topics leased become leases (the
 * first ones of a topic paired with the settled leases whose slots they
 * inherited); reserved slots not used go back,
 * and if a row of the topic became claimable since this claim looked, a
 * blocked claimer (which may have found no slot for it) is woken
 * (doc/design.md, Wake rules: 3).
 * Rows locked and not taken are claimable again when this transaction
 * ends.
 */
static void
aw_claim_open_leases(AwClaim *c)
{
	int			i;

	if (c->nleases > 0)
	{
		const AwSettledLease **preds = palloc0(sizeof(AwSettledLease *) * c->nleases);

		/* a topic's first leases take the slots of the settled ones handed */
		for (i = 0; i < c->ntopics; i++)
		{
			AwClaimTopic *t = &c->topics[i];
			int			paired = 0;
			int			l;

			for (l = 0; l < c->nleases && paired < Min(t->handed, t->got); l++)
			{
				if (strcmp(c->leases[l].topic, t->name) == 0)
					preds[l] = &t->from[paired++];
			}
		}
		aw_limits_open_leases(c->leases, preds, c->nleases);
		pfree(preds);
	}
	for (i = 0; i < c->ntopics; i++)
	{
		AwClaimTopic *t = &c->topics[i];

		if (t->excess > 0)
			aw_xact_record_released(t->name, t->excess);
		if (t->reserve != NULL && (t->limited || t->reserve->rate_left > 0))
			aw_limits_return(t->reserve, t->got);
	}
}

/*
 * Spend the pulse slots of a topic (the ones handed to this claimer, or a
 * hand-off's own slot) on its oldest confirmed parks, each moved straight
 * from its parked fence to a lease for this claimer: one UPDATE, no
 * re-offer transaction before the claim (doc/design.md, The zero-gap
 * hand-off).  At most cap rows.
 */
static void
aw_claim_spend(AwClaim *c, int i, int cap)
{
	AwReofferClaim claim;
	AwReoffer	r;

	claim.lease_end = c->lease_end;
	claim.row = aw_claim_parked_row;
	claim.arg = c;
	aw_reoffer_start(&r);
	r.slot_cap = cap;
	r.own_slots = c->topics[i].own_slots;
	r.claim = &claim;
	while (!r.done)
		(void) aw_reoffer_step(c->topics[i].name, 0, &r, false, NULL);
}

/*
 * Lock aion_wake.outbox (ACCESS SHARE: only the ACCESS EXCLUSIVE of an
 * ALTER TABLE conflicts, so nothing that waits for the claim's statement
 * anyway waits earlier for this), which takes in the invalidations of an
 * ALTER EXTENSION ... UPDATE that committed since this backend last looked,
 * and keeps the next one out until the attempt ends.
 */
static void
aw_lock_outbox(void)
{
	Oid			nsp = get_namespace_oid("aion_wake", false);
	Oid			rel = get_relname_relid("outbox", nsp);

	if (OidIsValid(rel))
		LockRelationOid(rel, AccessShareLock);
	AcceptInvalidationMessages();
}

/*
 * One claim attempt over the topics in mask: lease up to max_rows rows
 * into the result tuplestore.  First, for the topics in spend, pulse slots
 * are spent on their oldest confirmed parks, claimed straight from their
 * fences; then visible rows, oldest fence first (from 1.2: highest
 * priority first, then oldest fence) across the topics, each
 * within its allowance.  Returns the number claimed.  Caller is connected
 * to SPI.
 */
uint64
aw_claim_once(AwClaim *c, uint64 mask, uint64 spend)
{
	TimestampTz now;
	bool		limits;
	int			version;
	int			pnatts;
	Datum	   *names;
	Datum	   *allows;
	Datum	   *belows;
	Datum	   *floors;
	Datum		args[7];
	uint64		n;
	uint64		r;
	int			nq = 0;
	int			i;
	bool		exhausted[AW_WAIT_MAX_TOPICS];
	int32		pbelow[AW_WAIT_MAX_TOPICS];	/* 1.2: priorities done with */
	int32		pfloor[AW_WAIT_MAX_TOPICS];	/* 1.2: the lowest of a share */
	int			rounds;
	bool		first_took;		/* the first look leased a row */

	/*
	 * The schema this attempt acts on: the one installed now, which no
	 * ALTER EXTENSION ... UPDATE can change before this transaction (or a
	 * waiting claim's probe) ends, since the lock taken here waits for it
	 * and takes in its invalidations.  A claim that slept across an update
	 * leases the 1.1 way from its first probe after it.  Its result keeps
	 * the columns it was called with (c->natts); the statement returns
	 * those of the schema (pnatts), then the claim's own.
	 */
	aw_lock_outbox();
	version = aw_schema_version();
	limits = version >= 11;
	pnatts = version >= 12 ? 11 : version >= 11 ? 10 : 9;
	c->missing = 0;
	if (limits)
	{
		c->missing = aw_limits_missing(c->names, c->ntopics, mask, c->served, !c->warned);
		c->warned |= (c->missing != 0);
		mask &= ~c->missing;
	}

	/* the clock of this look, for the lost-wake detector (monitor.c) */
	c->mon_looked = GetCurrentTimestamp();
	c->claimed = 0;
	c->nleases = 0;
	if (aw_claim_reserve(c, mask, limits) == 0)
	{
		aw_claim_open_leases(c);
		return 0;
	}

	/*
	 * The clock of the attempt, read once its topic locks are held and its
	 * starts reserved: a row's lease starts at it, and must not start
	 * before the rate admitted it.  Read before, a claim that waited for
	 * its topic's lock (held by a set_limit()'s commit) dated its rows'
	 * starts back into the window of the starts before them.
	 * So every window of length per measured on the leases' starts holds
	 * no more than the rate (doc/design.md, Rates and pauses).
	 */
	now = GetCurrentTimestamp();

	/*
	 * A lease ends after the clock, a lease of 0 a microsecond after it:
	 * a row this attempt leased is then never visible at its clock, and a
	 * later round or look of the attempt cannot take it again.
	 */
	c->lease_end = aw_clock_plus(now, Max(c->lease, 1));
	c->leases_room = Min(c->max_rows, 64);
	c->leases = palloc(sizeof(AwLiveLease) * c->leases_room);

	/* pulses first: parked rows claimed from their fences */
	for (i = 0; i < c->ntopics && c->claimed < (uint64) c->max_rows; i++)
	{
		AwClaimTopic *t = &c->topics[i];
		if ((spend & (UINT64CONST(1) << i)) == 0 || t->allow <= 0 ||
			!aw_set_topic_has_work(t->name, t->own_slots > 0))
			continue;
		aw_claim_spend(c, i, (int) Min((uint64) t->allow, c->max_rows - c->claimed));
	}

	/*
	 * Then visible rows, in rounds.  With one topic, the claim locks up to
	 * its allowance of rows nobody holds and leases them all (first with
	 * its first look at the walk's first priority).  With
	 * several, each topic is given its share of the oldest rows across
	 * them, counted without locking (so rows other claims hold count); a
	 * topic that then finds fewer rows than its share that nobody holds has
	 * no more, and the next round shares what is still wanted among the
	 * others.  So every round but the last exhausts a topic.
	 *
	 * From the 1.2 schema, by priority: a topic takes rows of its share's
	 * lowest priority or higher only (floor), else a topic whose highest
	 * rows another claim holds would go on to its own lower priorities,
	 * past higher rows of the other topics.  A topic short of its share has
	 * then no more rows nobody holds at those priorities: the next round
	 * looks below them (below), and shares again among all the topics.
	 * Every round but the last lowers a topic's below, to a priority that
	 * holds rows, so the rounds end; after 2 rounds per topic a short topic
	 * is set aside as before 1.2, so that they end soon even when other
	 * claims hold rows at many priorities of many topics.
	 */
	names = palloc(sizeof(Datum) * c->ntopics);
	allows = palloc(sizeof(Datum) * c->ntopics);
	belows = palloc(sizeof(Datum) * c->ntopics);
	floors = palloc(sizeof(Datum) * c->ntopics);
	memset(exhausted, 0, sizeof(exhausted));
	for (i = 0; i < c->ntopics; i++)
	{
		pbelow[i] = AW_PRIORITY_MAX + 1;
		pfloor[i] = PG_INT16_MIN;
	}
	for (rounds = 0;; rounds++)
	{
		int32		want = c->max_rows - (int32) c->claimed;
		int32		shared = 0;
		bool		multi;
		bool		short_topic = false;

		nq = 0;
		for (i = 0; i < c->ntopics; i++)
		{
			c->topics[i].share = 0;
			pfloor[i] = PG_INT16_MIN;
			if (c->topics[i].allow - c->topics[i].got <= 0 || exhausted[i] ||
				pbelow[i] <= AW_PRIORITY_MIN)
				continue;
			names[nq] = CStringGetTextDatum(c->topics[i].name);
			allows[nq] = Int32GetDatum(c->topics[i].allow - c->topics[i].got);
			belows[nq] = Int32GetDatum(pbelow[i]);
			floors[nq] = Int32GetDatum(pfloor[i]);
			nq++;
		}
		if (nq == 0 || want <= 0)
			break;
		args[0] = PointerGetDatum(construct_array(names, nq, TEXTOID, -1, false, TYPALIGN_INT));
		args[1] = PointerGetDatum(construct_array(allows, nq, INT4OID, 4, true, TYPALIGN_INT));
		args[2] = TimestampTzGetDatum(now);
		args[3] = Int32GetDatum(want);
		args[4] = TimestampTzGetDatum(c->lease_end);
		args[5] = PointerGetDatum(construct_array(belows, nq, INT4OID, 4, true, TYPALIGN_INT));
		args[6] = PointerGetDatum(construct_array(floors, nq, INT4OID, 4, true, TYPALIGN_INT));
		multi = nq > 1;
		if (multi)
		{
			/* the shares statement's $5 is the claim's $6 (1.2) */
			Datum		sargs[5] = {args[0], args[1], args[2], args[3], args[5]};

			n = aw_plan_run(aw_claim_shares_plan(version), sargs, NULL, SPI_OK_SELECT);
			nq = 0;
			for (r = 0; r < n; r++)
			{
				HeapTuple	tup = SPI_tuptable->vals[r];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				AwClaimTopic *t = &c->topics[aw_claim_topic_index(c, SPI_getvalue(tup, desc, 1))];
				bool		isnull;

				t->share = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
				shared += t->share;
				names[nq] = CStringGetTextDatum(t->name);
				allows[nq] = Int32GetDatum(t->share);
				if (version >= 12)
				{
					int			ti = t - c->topics;

					pfloor[ti] = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
					belows[nq] = Int32GetDatum(pbelow[ti]);
					floors[nq] = Int32GetDatum(pfloor[ti]);
				}
				nq++;
			}
			if (nq == 0)
				break;
			args[0] = PointerGetDatum(construct_array(names, nq, TEXTOID, -1, false, TYPALIGN_INT));
			args[1] = PointerGetDatum(construct_array(allows, nq, INT4OID, 4, true, TYPALIGN_INT));
			args[5] = PointerGetDatum(construct_array(belows, nq, INT4OID, 4, true, TYPALIGN_INT));
			args[6] = PointerGetDatum(construct_array(floors, nq, INT4OID, 4, true, TYPALIGN_INT));
		}
		for (i = 0; i < c->ntopics; i++)
			c->topics[i].got_before = c->topics[i].got;

		/*
		 * A claim of one topic looks first at the priority its walk starts
		 * at, without the executor where it can (claim_direct.c); a claim
		 * of one row where it cannot looks with its statement.  The walk
		 * runs when the look finds nothing, or for the rest when the
		 * look's priority had fewer rows than wanted.
		 */
		n = 0;
		first_took = false;
		if (version >= 12 && c->ntopics == 1 && rounds == 0 &&
			(want == 1 || aw_claim_direct_may(pbelow[0])) &&
			aw_first_look_wanted(c->topics[0].name))
		{
			AwClaimTopic *t = &c->topics[0];
			AwDirectRow *rows = NULL;
			int			nrows;
			int16		looked;
			bool		direct;

			direct = aw_claim_direct(t->name, pbelow[0], Min(want, t->allow - t->got), now,
									 c->lease_end, &rows, &nrows, &looked);
			for (int k = 0; k < nrows; k++)
				aw_claim_took(c, t, rows[k].values, rows[k].nulls, now,
							  rows[k].old_fence, rows[k].was_parked);
			first_took = nrows > 0;
			if (!direct && want == 1)
				n = aw_plan_run(aw_plan_prepare(&aw_claim_top_plan, aw_claim_top_sql, 7,
												aw_claim_types),
								args, NULL, SPI_OK_UPDATE_RETURNING);
			if ((direct || want == 1) && !first_took && n == 0)
				aw_first_look_missed(t->name);

			/*
			 * Short: the walk takes the rest below the priorities the look
			 * scanned, so that the claim's rows stay in the walk's order.
			 */
			if (first_took && c->claimed < (uint64) c->max_rows &&
				t->got < t->allow)
			{
				pbelow[0] = looked;
				continue;
			}
		}
		if (n == 0 && !first_took)
			n = aw_plan_run(aw_claim_plan(version, nq), args, NULL, SPI_OK_SELECT);
		for (r = 0; r < n; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			Datum		values[AW_OUTBOX_MAX_NATTS];
			bool		nulls[AW_OUTBOX_MAX_NATTS];
			char	   *topic = SPI_getvalue(tup, desc, pnatts + 3);
			AwClaimTopic *t = &c->topics[aw_claim_topic_index(c, topic)];
			bool		isnull;
			int			a;

			if (!DatumGetBool(SPI_getbinval(tup, desc, pnatts + 4, &isnull)))
			{
				t->excess++;
				continue;
			}
			for (a = 0; a < c->natts; a++)
				values[a] = SPI_getbinval(tup, desc, a + 1, &nulls[a]);
			aw_claim_took(c, t, values, nulls, now,
						  DatumGetTimestampTz(SPI_getbinval(tup, desc, pnatts + 1, &isnull)),
						  DatumGetBool(SPI_getbinval(tup, desc, pnatts + 2, &isnull)));
		}

		/*
		 * One topic: done.  Shares that did not add up to what is wanted:
		 * every topic was given all it had.  Else a topic short of its
		 * share has no more rows nobody holds, and the others may.
		 */
		if (!multi || shared < want)
			break;
		for (i = 0; i < c->ntopics; i++)
		{
			AwClaimTopic *t = &c->topics[i];

			if (t->share > 0 && t->got - t->got_before < t->share)
			{
				if (version >= 12 && rounds < 2 * c->ntopics)
					pbelow[i] = pfloor[i];
				else
					exhausted[i] = true;
				short_topic = true;
			}
		}
		if (!short_topic)
			break;
	}
	aw_claim_open_leases(c);

	/*
	 * A lease is a fence: an abandoned claim reappears to waiters when it
	 * passes; a claim that rolls back gives its rows back at once.
	 */
	for (i = 0; i < c->ntopics; i++)
	{
		if (c->topics[i].got == 0)
			continue;
		aw_xact_record_fence(c->topics[i].name, c->lease_end);
		aw_xact_record_claimed(c->topics[i].name, c->topics[i].got);
	}
	return c->claimed;
}


/*
 * Add what this call did to its topics' counters (monitor.c): one lookup
 * per topic, once per call.
 */
void
aw_claim_monitor_flush(AwClaim *c)
{
	int			i;

	for (i = 0; i < c->ntopics; i++)
	{
		AwTopicCounts *m = &c->topics[i].mon;

		if (m->claims | m->rows | m->wakes | m->timeouts | m->lost_wakes)
			aw_monitor_add(c->topics[i].name, m);
		memset(m, 0, sizeof(*m));
	}
}

/*
 * The claim shared by both forms, once its topics are known.
 */
static void
aw_claim_run(FunctionCallInfo fcinfo, AwClaim *c, int argno_max_rows)
{
	int64		wait;

	c->rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	c->max_rows = aw_arg_int_range(fcinfo, argno_max_rows, "max_rows", 1, AW_MAX_ROWS_LIMIT);
	c->lease = aw_arg_interval_us(fcinfo, argno_max_rows + 1, "lease");
	wait = aw_arg_interval_us(fcinfo, argno_max_rows + 2, "wait");
	c->served = aw_database_is_served();

	InitMaterializedSRF(fcinfo, 0);
	c->natts = c->rsinfo->setDesc->natts;
	if (c->natts > AW_OUTBOX_MAX_NATTS)
		elog(ERROR, "aion_wake.outbox has %d columns, more than %d", c->natts,
			 AW_OUTBOX_MAX_NATTS);
	SPI_connect();
	c->mon_after = DT_NOEND;
	for (int i = 0; i < c->ntopics; i++)
		c->topics[i].mon.claims = 1;
	if (wait > 0 && aw_max_wait_ms > 0)
		aw_claim_wait(c, wait);
	else
	{
		uint64		all = (c->ntopics == 64) ? ~UINT64CONST(0) :
			(UINT64CONST(1) << c->ntopics) - 1;

		if (!c->served)
			(void) aw_limits_expire(GetCurrentTimestamp());
		(void) aw_claim_once(c, all, 0);
	}
	SPI_finish();
	aw_claim_monitor_flush(c);
}

/*
 * claim(topic, max_rows, lease, wait): lease visible rows of a topic, oldest
 * fence first, skipping rows other claimers hold.  With wait > 0 and
 * nothing visible, block until a row is ready or wait passes.
 */
Datum
aw_claim(PG_FUNCTION_ARGS)
{
	AwClaim    *c = palloc0(sizeof(AwClaim));

	aw_begin_write("aion_wake.claim()");
	strlcpy(c->topics[0].name, aw_arg_topic(fcinfo, 0), sizeof(c->topics[0].name));
	c->names[0] = c->topics[0].name;
	c->ntopics = 1;
	aw_claim_run(fcinfo, c, 1);
	return (Datum) 0;
}

/*
 * claim(topics[], max_rows, lease, wait): the same over 1 to 64 distinct
 * topics (duplicates ignored), oldest fence first (from 1.2: highest
 * priority first) across them, each within
 * its limit; with wait, block until a row of any of them is ready.
 */
Datum
aw_claim_topics(PG_FUNCTION_ARGS)
{
	AwClaim    *c = palloc0(sizeof(AwClaim));
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			i;

	aw_begin_write("aion_wake.claim()");
	aw_arg_not_null(fcinfo, 0, "topics");
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topics must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	if (nelems == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topics must not be empty")));
	for (i = 0; i < nelems; i++)
	{
		text	   *t;
		char	   *name;
		int			j;
		bool		seen = false;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("topics must not contain null"),
					 errdetail("Element %d is null.", i + 1)));
		t = DatumGetTextPP(elems[i]);
		if (!aw_topic_name_valid(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid topic name \"%s\"", text_to_cstring(t)),
					 errdetail("Element %d of topics is not 1 to %d bytes of letters, digits, \"_\", \".\" and \"-\".",
							   i + 1, AW_TOPIC_MAXLEN)));
		name = text_to_cstring(t);
		for (j = 0; j < c->ntopics && !seen; j++)
			seen = (strcmp(c->topics[j].name, name) == 0);
		if (seen)
			continue;
		if (c->ntopics >= AW_WAIT_MAX_TOPICS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("claim() takes at most %d distinct topics", AW_WAIT_MAX_TOPICS)));
		strlcpy(c->topics[c->ntopics].name, name, sizeof(c->topics[c->ntopics].name));
		c->names[c->ntopics] = c->topics[c->ntopics].name;
		c->ntopics++;
	}
	aw_claim_run(fcinfo, c, 1);
	return (Datum) 0;
}

/*
 * The second half of complete(), fail(), park() and dead_letter() with
 * next_rows (outbox.c), in the settle's transaction: take up to next_rows
 * rows of the settled row's topic, leased for lease (microseconds; both
 * checked by the caller before it settled).  After complete, fail and dead_letter
 * (spend_parked) the slot the settle freed goes first to the topic's
 * oldest confirmed park, claimed straight from its fence, else to the
 * next visible row (claim's order); after park, never to a parked row (the consumer just
 * said BUSY).  On a limited topic the slot passes from the settled lease to
 * the first new one without ever being free (aw_claim_reserve), as long as
 * the topic is not over its limit.  When the settle found no row (topic is
 * NULL), nothing is taken.  When nothing is taken, the freed slot is what
 * it would have been without next_rows: released at commit on a limited
 * topic, a pulse of one slot otherwise (unless park).
 */
void
aw_claim_next(FunctionCallInfo fcinfo, const char *topic, int32 next_rows,
			  int64 lease, bool spend_parked)
{
	const char *topics[1] = {topic};
	int32		settled[1] = {1};

	aw_claim_next_topics(fcinfo, topics, settled, topic != NULL ? 1 : 0, next_rows,
						 lease, spend_parked);
}

/*
 * The same after settles of many rows (batch.c): up to next_rows rows in
 * all from the settled rows' topics (at most AW_WAIT_MAX_TOPICS of them, in
 * the order given), like claim(topics[], max_rows => next_rows).  settled[i]
 * rows of topics[i] were settled: on an unlimited topic each brings one
 * slot (unless park), spent first on its oldest confirmed parks, then on
 * visible rows, and a pulse of one slot at commit when the claim took no
 * row for it; on a limited topic the transaction's settled leases pass
 * their slots to new leases (as many as settled, at least AW_HANDOFF_MAX).
 */
void
aw_claim_next_topics(FunctionCallInfo fcinfo, const char *const *topics,
					 const int32 *settled, int ntopics, int32 next_rows, int64 lease,
					 bool spend_parked)
{
	AwClaim    *c = palloc0(sizeof(AwClaim));
	int			i;

	c->rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	c->max_rows = next_rows;
	c->lease = lease;
	InitMaterializedSRF(fcinfo, 0);
	c->natts = c->rsinfo->setDesc->natts;
	if (ntopics == 0)
		return;
	c->served = aw_database_is_served();
	if (c->max_rows == 0)
	{
		int32		max_in_flight;

		/* takes nothing, as asked: the freed slots are pulses, as below */
		for (i = 0; i < ntopics && spend_parked && c->served; i++)
		{
			int32		k;

			if (aw_limits_topic_limited(topics[i], &max_in_flight))
				continue;
			for (k = 0; k < settled[i]; k++)
				aw_xact_record_handoff_pulse(topics[i]);
		}
		return;
	}
	c->ntopics = Min(ntopics, AW_WAIT_MAX_TOPICS);
	for (i = 0; i < c->ntopics; i++)
	{
		strlcpy(c->topics[i].name, topics[i], sizeof(c->topics[i].name));
		c->names[i] = c->topics[i].name;
		c->settle_slots[i] = spend_parked ? settled[i] : 0;
		c->settled[i] = settled[i];
	}

	SPI_connect();
	c->mon_after = DT_NOEND;
	if (!c->served)
		(void) aw_limits_expire(GetCurrentTimestamp());
	(void) aw_claim_once(c, (c->ntopics == 64) ? ~UINT64CONST(0) :
						 (UINT64CONST(1) << c->ntopics) - 1,
						 spend_parked ? ~UINT64CONST(0) : 0);
	SPI_finish();
	aw_claim_monitor_flush(c);

	/* a freed slot of an unlimited topic no row took: a pulse */
	for (i = 0; i < ntopics && spend_parked && c->served; i++)
	{
		int32		k;
		int32		unused;

		if (i < c->ntopics && c->topics[i].limited)
			continue;
		if (i >= c->ntopics)
		{
			int32		max_in_flight;

			if (aw_limits_topic_limited(topics[i], &max_in_flight))
				continue;
			unused = settled[i];
		}
		else
			unused = settled[i] - Min(settled[i], c->topics[i].got);
		for (k = 0; k < unused; k++)
			aw_xact_record_handoff_pulse(topics[i]);
	}
}
