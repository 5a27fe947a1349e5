/*-------------------------------------------------------------------------
 *
 * dispatcher.c
 *	  A reference dispatcher for aion_wake, written against libpq, and the
 *	  driver of the headline benchmark (bench/headline/run.sh).
 *
 *	  The consumer is simulated: it has C slots, and a row it accepts holds
 *	  a slot for S milliseconds.  N dispatcher threads, each with its own connection,
 *	  claim rows of one topic and offer them to the consumer.  An offer that
 *	  finds every slot taken is answered BUSY and the row must wait.  The
 *	  run ends when every row of the topic has been delivered.
 *
 *	  The five modes differ in how a freed slot is refilled and how a row
 *	  that was answered BUSY waits:
 *
 *	  handoff the wiring README.md ("Wiring a dispatcher") prescribes when
 *	          the consumer's capacity is unknown (version 1.1): a blocking
 *	          claim; on success, complete(key, lease_token, next_rows => 1),
 *	          which settles the row and, in the same statement and commit,
 *	          spends the freed slot on the topic's oldest confirmed park
 *	          (claimed straight from its fence), else takes the oldest
 *	          visible row -- and the dispatcher offers that row at once,
 *	          with no claim in between; when it takes nothing the freed
 *	          slot is a pulse of one slot, as pulse() would send.  On
 *	          BUSY, park(key, backoff, lease_token).  No pulse() call.
 *	  limit   the known-capacity wiring (version 1.1): set_limit(topic, C)
 *	          once at the start, then claims never exceed C live leases,
 *	          so the consumer never answers BUSY: no park, no pulse.  A
 *	          blocking claim; on success complete(key, lease_token,
 *	          next_rows => 1), whose slot passes straight to the row it
 *	          returns, which is offered at once.  The limit is removed at
 *	          the end.
 *	  aion    the 1.0 wiring, which keeps working: a blocking claim; on
 *	          BUSY, park(key, backoff, lease_token); on success,
 *	          complete(key, lease_token) and pulse(topic, 1) in one
 *	          statement, so the freed slot re-offers the oldest parked row
 *	          to a blocked claimer the moment the delivery commits; every
 *	          row goes through a claim of its own.
 *	  fence   park on BUSY and a blocking claim, without the pulse: a
 *	          parked row waits out its back-off, and the blocking claim
 *	          wakes when the fence passes.
 *	  poll    what a dispatcher without aion_wake does: a non-blocking
 *	          claim, BUSY rows re-fenced with a plain UPDATE of
 *	          visible_after, and 100 ms of sleep whenever a claim comes
 *	          back empty.
 *
 *	  --batch B (version 1.2; handoff and limit modes) keeps up to B rows in
 *	  flight per thread, served side by side: claim B rows; offer them all
 *	  at once; park every row answered BUSY in one park_many(keys, backoff,
 *	  tokens); when services end, settle every row that has finished in
 *	  one complete_many(keys, tokens, next_rows => n), whose n freed slots
 *	  take up to n rows (the oldest parks first), offered at once; claim
 *	  again only when nothing is in flight.  See batch_main().
 *
 *	  What a slot does is sampled every 10 ms into a CSV file (t_ms,
 *	  busy_slots); at the end a summary is printed, one "key=value" a line:
 *	  makespan against the ideal rows * S / C, utilisation, bounces (BUSY
 *	  answers), and the durable writes each delivered row cost (row
 *	  inserts, updates and deletes of aion_wake.outbox, from
 *	  pg_stat_user_tables, taken before and after the run).
 *
 *	  To wire your own dispatcher, read dispatcher_main() and deliver()
 *	  below: claim in a transaction of its own, offer outside any
 *	  transaction, then exactly one of complete (taking the next row with
 *	  next_rows => 1) or park, each in a transaction of its own, always
 *	  passing the lease_token; offer the row complete returned before
 *	  claiming again.  For the batched wiring read batch_main().
 *
 *	  Build (examples/Makefile does this):
 *	    gcc -O2 -Wall -Wextra -Werror -pthread \
 *	        -I$(pg_config --includedir) dispatcher.c \
 *	        -L$(pg_config --libdir) -lpq -o dispatcher
 *
 *	  Run:  dispatcher --conninfo 'host=/tmp/sock port=5432 dbname=postgres'
 *	                   --mode handoff --topic api --threads 16 --slots 4
 *	                   --service-ms 20 --backoff-ms 1000 --csv busy.csv
 *	        dispatcher ... --mode handoff --threads 2 --batch 16
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  examples/dispatcher.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

typedef enum
{
	MODE_HANDOFF,
	MODE_LIMIT,
	MODE_AION,
	MODE_FENCE,
	MODE_POLL
} Mode;

#define NUM_MODES 5
static const char *const mode_names[NUM_MODES] = {"handoff", "limit", "aion", "fence", "poll"};

/* the modes that settle and take the next row in one statement */
#define MODE_TAKES_NEXT(m) ((m) == MODE_HANDOFF || (m) == MODE_LIMIT)

/* Command line. */
static const char *opt_conninfo = "dbname=postgres";
static Mode opt_mode = MODE_HANDOFF;
static const char *opt_topic = "api";
static int	opt_threads = 16;
static int	opt_slots = 4;
static int	opt_service_ms = 20;
static int	opt_backoff_ms = 1000;
static int	opt_wait_ms = 2000;		/* claim(wait => ...) in all modes but poll */
static int	opt_limit = 0;			/* set_limit() in limit mode; 0: --slots */
static int	opt_poll_ms = 100;		/* sleep after an empty claim in poll */
static int	opt_sample_ms = 10;
static const char *opt_csv = NULL;
static bool opt_hold_through_commit = false;	/* see deliver() */
static bool opt_progress = false;	/* a live progress line on stderr */
static int	opt_batch = 0;			/* rows in flight per thread; 0: one at a time */
static bool opt_print_outcomes = false; /* "delivered KEY", "busy KEY" on stdout */

/* The SQL each mode sends.  Every statement runs in a transaction of its own. */

/* all but poll: block up to the wait when nothing is claimable */
#define SQL_CLAIM_WAIT \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.claim($1, 1, '30 s', $2::interval)"
/* poll: never block */
#define SQL_CLAIM_POLL \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.claim($1, 1, '30 s')"
/*
 * handoff, limit: delivered; in the same statement and commit take the next
 * row of the topic with the slot that freed (none, or one row)
 */
#define SQL_COMPLETE_NEXT \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.complete($1, $2, next_rows => 1, lease => '30 s')"
/* aion: delivered; the slot the row used is free again (pulse at commit) */
#define SQL_COMPLETE_PULSE \
	"SELECT aion_wake.complete($1, $2), aion_wake.pulse($3, 1)"
/* fence, poll: delivered */
#define SQL_COMPLETE \
	"SELECT aion_wake.complete($1, $2)"
/* handoff, aion, fence (and limit, where BUSY cannot happen): wait for a
 * pulse or at most the back-off */
#define SQL_PARK \
	"SELECT aion_wake.park($1, $2::interval, $3)"
/* poll: BUSY, the plain fence a polling dispatcher writes */
#define SQL_REFENCE \
	"UPDATE aion_wake.outbox " \
	"   SET visible_after = clock_timestamp() + $2::interval " \
	" WHERE dispatch_key = $1 AND lease_token = $3"

/*
 * --batch (1.2): claim up to $3 rows; settle many rows in one statement,
 * taking up to $3 rows in the same statement and commit; park many rows.
 */
#define SQL_CLAIM_BATCH \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.claim($1, $3::int, '30 s', $2::interval)"
#define SQL_COMPLETE_BATCH \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.complete_many($1, $2, next_rows => $3, lease => '30 s')"
#define SQL_PARK_BATCH \
	"SELECT aion_wake.park_many($1, $2, $3)"

/* Writes of aion_wake.outbox so far, as the statistics system counts them. */
#define SQL_OUTBOX_WRITES \
	"SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) " \
	"  FROM pg_stat_user_tables " \
	" WHERE schemaname = 'aion_wake' AND relname = 'outbox'"

/*
 * The simulated consumer: C slots, and for diagnosis the moments slots
 * became free, so that each acquisition can measure how long the slot it
 * took stood idle (FIFO pairing; the mean does not depend on the pairing).
 */
typedef struct Consumer
{
	pthread_mutex_t lock;
	int			slots;
	int			busy;
	int64_t    *free_since;		/* ring of C timestamps, oldest first */
	int			free_head;
	int			free_count;
} Consumer;

/* What the threads share besides the consumer. */
typedef struct Shared
{
	pthread_mutex_t lock;
	int64_t		total;			/* rows of the topic at the start */
	int64_t		delivered;
	int64_t		bounces;
	int64_t		claims;			/* rows claimed (each one row update) */
	int64_t		empty_claims;	/* claims that returned nothing */
	int64_t		taken_next;		/* rows a complete(next_rows) returned */
	int64_t		lost_leases;	/* complete/park/refence that matched nothing */
	int64_t		t_start_us;
	int64_t		t_end_us;		/* when the last row was delivered */
	bool		done;
	/* diagnosis: summed time spent in statements, and idle slot gaps */
	int64_t		complete_us;
	int64_t		bounce_us;		/* park or refence */
	int64_t		claim_hit_us;	/* claims that returned a row */
	int64_t		n_gaps;
	int64_t		gap_sum_us;
	int64_t    *gaps;			/* every idle gap, for percentiles */
	int64_t		gaps_cap;
} Shared;

static Consumer consumer;
static Shared shared;
static pthread_barrier_t start_barrier;

/* ---------------------------------------------------------------------
 * Small helpers.
 * ---------------------------------------------------------------------
 */

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_us(int64_t us)
{
	struct timespec ts;

	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void
die(const char *what, PGconn *conn)
{
	fprintf(stderr, "dispatcher: %s: %s", what,
			conn ? PQerrorMessage(conn) : "failed\n");
	exit(1);
}

static PGconn *
connect_db(void)
{
	PGconn	   *conn = PQconnectdb(opt_conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed", conn);
	return conn;
}

static void
prepare(PGconn *conn, const char *name, const char *sql)
{
	PGresult   *res = PQprepare(conn, name, sql, 0, NULL);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		die(name, conn);
	PQclear(res);
}

/* Run a prepared statement; die unless it returned tuples or completed. */
static PGresult *
run(PGconn *conn, const char *name, int nparams, const char *const *params)
{
	PGresult   *res = PQexecPrepared(conn, name, nparams, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
		die(name, conn);
	return res;
}

static int64_t
query_int(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	int64_t		v;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		die(sql, conn);
	v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

static bool
run_done(void)
{
	bool		done;

	pthread_mutex_lock(&shared.lock);
	done = shared.done;
	pthread_mutex_unlock(&shared.lock);
	return done;
}

/* ---------------------------------------------------------------------
 * The consumer.
 * ---------------------------------------------------------------------
 */

/* Offer a row: take a slot if one is free.  false means BUSY. */
static bool
consumer_try_acquire(void)
{
	bool		ok = false;
	int64_t		gap = -1;

	pthread_mutex_lock(&consumer.lock);
	if (consumer.busy < consumer.slots)
	{
		consumer.busy++;
		ok = true;
		gap = now_us() - consumer.free_since[consumer.free_head];
		consumer.free_head = (consumer.free_head + 1) % consumer.slots;
		consumer.free_count--;
	}
	pthread_mutex_unlock(&consumer.lock);

	if (ok)
	{
		pthread_mutex_lock(&shared.lock);
		if (shared.n_gaps < shared.gaps_cap)
			shared.gaps[shared.n_gaps] = gap;
		shared.n_gaps++;
		shared.gap_sum_us += gap;
		pthread_mutex_unlock(&shared.lock);
	}
	return ok;
}

static void
consumer_release(void)
{
	pthread_mutex_lock(&consumer.lock);
	consumer.free_since[(consumer.free_head + consumer.free_count) % consumer.slots] = now_us();
	consumer.free_count++;
	consumer.busy--;
	pthread_mutex_unlock(&consumer.lock);
}

static int
consumer_busy(void)
{
	int			busy;

	pthread_mutex_lock(&consumer.lock);
	busy = consumer.busy;
	pthread_mutex_unlock(&consumer.lock);
	return busy;
}

/* ---------------------------------------------------------------------
 * Bookkeeping shared by the dispatcher threads.
 * ---------------------------------------------------------------------
 */

static void
count_delivered(int n, int64_t stmt_us)
{
	pthread_mutex_lock(&shared.lock);
	shared.complete_us += stmt_us;
	shared.delivered += n;
	if (shared.delivered >= shared.total && !shared.done)
	{
		shared.t_end_us = now_us();
		shared.done = true;
	}
	pthread_mutex_unlock(&shared.lock);
}

static void
count_bounce(int n, int64_t stmt_us)
{
	pthread_mutex_lock(&shared.lock);
	shared.bounces += n;
	shared.bounce_us += stmt_us;
	pthread_mutex_unlock(&shared.lock);
}

static void
count_claim(int rows, int64_t stmt_us)
{
	pthread_mutex_lock(&shared.lock);
	if (rows > 0)
	{
		shared.claims += rows;
		shared.claim_hit_us += stmt_us;
	}
	else
		shared.empty_claims++;
	pthread_mutex_unlock(&shared.lock);
}

static void
count_taken_next(int n)
{
	pthread_mutex_lock(&shared.lock);
	shared.taken_next += n;
	pthread_mutex_unlock(&shared.lock);
}

static void
count_lost_lease(int n)
{
	pthread_mutex_lock(&shared.lock);
	shared.lost_leases += n;
	pthread_mutex_unlock(&shared.lock);
}

/* With --print-outcomes, one line per outcome: "delivered KEY", "busy KEY" */
static void
print_outcome(const char *what, const char *key)
{
	if (opt_print_outcomes)
		printf("%s %s\n", what, key);	/* stdio locks the stream per call */
}

/* true if a one-column boolean result says true */
static bool
result_true(PGresult *res)
{
	return PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
}

/* ---------------------------------------------------------------------
 * Delivering one claimed row.
 * ---------------------------------------------------------------------
 */

/*
 * Offer the row to the consumer, outside any transaction.  If a slot is
 * free, serve it: the consumer holds the slot for S ms and frees it when the
 * service ends.  Then record the delivery:
 *
 *	handoff, limit	complete(key, token, next_rows => 1): the settle and the
 *					next row in one statement and one commit; the row it
 *					returns (if any) is returned to the caller, to be offered
 *					at once.
 *	aion			complete(key, token) and pulse(topic, 1) for the slot that
 *					freed, in one statement, delivered at commit.
 *	fence, poll		complete(key, token).
 *
 * (With --hold-slot-through-commit the slot is given back only after that
 * commit, as if the consumer stayed busy until the dispatcher had written
 * the outcome down.)
 *
 * If every slot is taken (BUSY), make the row wait: park() in every mode but
 * poll, a plain fence in poll mode.
 *
 * Returns the next row to offer (a result of one row, to be cleared by the
 * caller), or NULL.
 */
static PGresult *
deliver(PGconn *conn, const char *key, const char *token, const char *topic)
{
	char		backoff[32];
	int64_t		t0;
	PGresult   *res;
	PGresult   *next = NULL;

	if (consumer_try_acquire())
	{
		bool		ok;

		sleep_us((int64_t) opt_service_ms * 1000);	/* the service */
		if (!opt_hold_through_commit)
			consumer_release();

		t0 = now_us();
		if (MODE_TAKES_NEXT(opt_mode))
		{
			const char *params[2] = {key, token};

			/*
			 * No row back means nothing was left to take, or the settle found
			 * no row (a lost lease); the run's end-of-run checks tell them
			 * apart (lost_leases stays 0 when every row is delivered once).
			 */
			res = run(conn, "complete_next", 2, params);
			ok = true;
			if (PQntuples(res) == 1)
			{
				next = res;
				count_taken_next(1);
			}
			else
				PQclear(res);
		}
		else
		{
			if (opt_mode == MODE_AION)
			{
				const char *params[3] = {key, token, topic};

				res = run(conn, "complete_pulse", 3, params);
			}
			else
			{
				const char *params[2] = {key, token};

				res = run(conn, "complete", 2, params);
			}
			ok = result_true(res);
			PQclear(res);
		}
		if (opt_hold_through_commit)
			consumer_release();

		if (ok)
			count_delivered(1, now_us() - t0);
		else
			count_lost_lease(1);	/* lease expired: the row comes back */
		print_outcome(ok ? "delivered" : "stale", key);
		return next;
	}

	/* BUSY */
	snprintf(backoff, sizeof(backoff), "%d ms", opt_backoff_ms);
	t0 = now_us();
	if (opt_mode == MODE_POLL)
	{
		const char *params[3] = {key, backoff, token};

		res = run(conn, "refence", 3, params);
		if (strcmp(PQcmdTuples(res), "1") != 0)
			count_lost_lease(1);
	}
	else
	{
		const char *params[3] = {key, backoff, token};

		res = run(conn, "park", 3, params);
		if (!result_true(res))
			count_lost_lease(1);
	}
	PQclear(res);
	count_bounce(1, now_us() - t0);
	print_outcome("busy", key);
	return NULL;
}

/* ---------------------------------------------------------------------
 * The dispatcher threads.
 * ---------------------------------------------------------------------
 */

/*
 * A thread's last statement.  Since PostgreSQL 15 a backend flushes its
 * table statistics at most once a second; force the flush now so the main
 * thread's count of writes is complete.  The flush happens before the server
 * reports ready for the next query, so it is done when this returns.
 */
static void
finish_thread(PGconn *conn)
{
	PGresult   *res = PQexec(conn, "SELECT pg_stat_force_next_flush()");

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die("pg_stat_force_next_flush", conn);
	PQclear(res);
	PQfinish(conn);
}

/*
 * Claim one row at a time and deliver it, until every row is delivered.
 *
 * All but poll: the claim blocks (up to opt_wait_ms) while nothing is
 * claimable and returns the moment a row becomes ready -- a re-offer, a
 * fence passing, a new row, a slot of a limited topic freed -- waking one
 * blocked claimer per row.  No polling: a claim that times out empty just
 * loops to see whether the run is over.  In handoff and limit mode a
 * delivery returns the next row, which is offered straight away; the
 * dispatcher claims again only when a settle returned nothing or the row
 * was answered BUSY.
 *
 * poll: claim without waiting; when nothing is claimable, sleep opt_poll_ms.
 */
static void *
dispatcher_main(void *arg)
{
	PGconn	   *conn = connect_db();
	char		wait[32];
	PGresult   *res;

	(void) arg;
	snprintf(wait, sizeof(wait), "%d ms", opt_wait_ms);
	prepare(conn, "claim_wait", SQL_CLAIM_WAIT);
	prepare(conn, "claim_poll", SQL_CLAIM_POLL);
	prepare(conn, "complete_next", SQL_COMPLETE_NEXT);
	prepare(conn, "complete_pulse", SQL_COMPLETE_PULSE);
	prepare(conn, "complete", SQL_COMPLETE);
	prepare(conn, "park", SQL_PARK);
	prepare(conn, "refence", SQL_REFENCE);

	pthread_barrier_wait(&start_barrier);

	while (!run_done())
	{
		int64_t		t0 = now_us();
		bool		got;

		if (opt_mode == MODE_POLL)
		{
			const char *params[1] = {opt_topic};

			res = run(conn, "claim_poll", 1, params);
		}
		else
		{
			const char *params[2] = {opt_topic, wait};

			res = run(conn, "claim_wait", 2, params);
		}
		got = PQntuples(res) == 1;
		count_claim(got ? 1 : 0, now_us() - t0);

		if (!got && opt_mode == MODE_POLL)
			sleep_us((int64_t) opt_poll_ms * 1000);
		/* deliver the row, and each next row a delivery hands back */
		while (res != NULL && PQntuples(res) == 1)
		{
			PGresult   *next = deliver(conn, PQgetvalue(res, 0, 0),
									   PQgetvalue(res, 0, 1),
									   PQgetvalue(res, 0, 2));

			PQclear(res);
			res = next;
		}
		if (res != NULL)
			PQclear(res);
	}

	finish_thread(conn);
	return NULL;
}

/* ---------------------------------------------------------------------
 * Batched mode (--batch B, version 1.2).
 * ---------------------------------------------------------------------
 */

/* A row the consumer is serving, and when its service ends. */
typedef struct Flight
{
	char		key[256];		/* dispatch keys are 1-255 bytes */
	char		token[24];
	int64_t		ends_us;
} Flight;

/* One thread's rows in flight, and room for the arrays of a settle. */
typedef struct Batch
{
	PGconn	   *conn;
	Flight	   *flight;			/* opt_batch of them */
	int			n;
	const char **keys;			/* the rows of one settle */
	const char **tokens;
	char	   *keys_lit;		/* their array literals */
	char	   *tokens_lit;
} Batch;

/* {"a","b\"c"}: an array literal of n strings, each quoted and escaped */
static char *
array_literal(char *buf, const char *const *items, int n)
{
	char	   *p = buf;
	int			i;

	*p++ = '{';
	for (i = 0; i < n; i++)
	{
		const char *c;

		if (i > 0)
			*p++ = ',';
		*p++ = '"';
		for (c = items[i]; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				*p++ = '\\';
			*p++ = *c;
		}
		*p++ = '"';
	}
	*p++ = '}';
	*p = '\0';
	return buf;
}

/*
 * Offer every row of res at once (res is cleared).  A row the consumer takes
 * joins the flight, its slot held until its service ends; the rows answered
 * BUSY are parked together in one statement, which takes no row: the
 * consumer has just said it has no room.
 */
static void
offer_batch(Batch *b, PGresult *res)
{
	char		backoff[32];
	int			nbusy = 0;
	int			i;

	if (PQntuples(res) > opt_batch - b->n)
		die("a settle returned more rows than next_rows", NULL);
	for (i = 0; i < PQntuples(res); i++)
	{
		if (consumer_try_acquire())
		{
			Flight	   *f = &b->flight[b->n++];

			snprintf(f->key, sizeof(f->key), "%s", PQgetvalue(res, i, 0));
			snprintf(f->token, sizeof(f->token), "%s", PQgetvalue(res, i, 1));
			f->ends_us = now_us() + (int64_t) opt_service_ms * 1000;
		}
		else
		{
			b->keys[nbusy] = PQgetvalue(res, i, 0);
			b->tokens[nbusy++] = PQgetvalue(res, i, 1);
		}
	}
	if (nbusy > 0)
	{
		const char *params[3];
		int64_t		t0 = now_us();
		PGresult   *pres;
		int			parked;

		snprintf(backoff, sizeof(backoff), "%d ms", opt_backoff_ms);
		params[0] = array_literal(b->keys_lit, b->keys, nbusy);
		params[1] = backoff;
		params[2] = array_literal(b->tokens_lit, b->tokens, nbusy);
		pres = run(b->conn, "park_batch", 3, params);
		/* the rows parked: fewer when a lease was lost (that row is not ours) */
		parked = atoi(PQgetvalue(pres, 0, 0));
		PQclear(pres);
		count_bounce(nbusy, now_us() - t0);
		if (parked < nbusy)
			count_lost_lease(nbusy - parked);
		for (i = 0; i < nbusy; i++)
			print_outcome("busy", b->keys[i]);
	}
	PQclear(res);
}

/*
 * Wait for the first service in flight to end, then settle every row whose
 * service has ended in one statement, which takes up to as many rows as it
 * settled -- the slots they freed -- in the same commit.  Returns those rows.
 */
static PGresult *
settle_batch(Batch *b)
{
	int64_t		first = b->flight[0].ends_us;
	int64_t		now;
	int64_t		t0;
	const char *params[3];
	char		nbuf[16];
	PGresult   *res;
	int			n = 0;
	int			kept = 0;
	int			i;

	for (i = 1; i < b->n; i++)
		if (b->flight[i].ends_us < first)
			first = b->flight[i].ends_us;
	now = now_us();
	if (first > now)
		sleep_us(first - now);

	now = now_us();
	for (i = 0; i < b->n; i++)
		if (b->flight[i].ends_us <= now)
		{
			b->keys[n] = b->flight[i].key;
			b->tokens[n++] = b->flight[i].token;
			if (!opt_hold_through_commit)
				consumer_release();		/* the service ended */
		}

	t0 = now_us();
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	params[0] = array_literal(b->keys_lit, b->keys, n);
	params[1] = array_literal(b->tokens_lit, b->tokens, n);
	params[2] = nbuf;
	/*
	 * A row whose lease was lost settles nothing and is skipped: whoever
	 * holds its new lease delivers it.  This form does not say which (it
	 * takes no row only when it settled none); as in deliver(), the
	 * end-of-run checks show it.
	 */
	res = run(b->conn, "complete_batch", 3, params);
	count_delivered(n, now_us() - t0);
	count_taken_next(PQntuples(res));
	for (i = 0; i < n; i++)
	{
		if (opt_hold_through_commit)
			consumer_release();
		print_outcome("delivered", b->keys[i]);
	}

	/* the settled rows leave the flight */
	for (i = 0; i < b->n; i++)
		if (b->flight[i].ends_us > now)
			b->flight[kept++] = b->flight[i];
	b->n = kept;
	return res;
}

/*
 * --batch B: keep up to B rows in flight.  The simulated consumer serves
 * them side by side, so one thread drives them all without helpers: it
 * claims B rows (blocking while none is claimable) only when nothing is in
 * flight; otherwise it settles what has finished and offers the rows that
 * settle took, so the flight stays full while rows are there to take.
 */
static void *
batch_main(void *arg)
{
	Batch		b;
	char		wait[32];
	char		nbuf[16];
	size_t		lit = (size_t) opt_batch * (2 * 255 + 3) + 3;

	(void) arg;
	b.conn = connect_db();
	b.flight = calloc(opt_batch, sizeof(Flight));
	b.n = 0;
	b.keys = calloc(opt_batch, sizeof(char *));
	b.tokens = calloc(opt_batch, sizeof(char *));
	b.keys_lit = malloc(lit);
	b.tokens_lit = malloc(lit);
	if (!b.flight || !b.keys || !b.tokens || !b.keys_lit || !b.tokens_lit)
		die("out of memory", NULL);
	snprintf(wait, sizeof(wait), "%d ms", opt_wait_ms);
	snprintf(nbuf, sizeof(nbuf), "%d", opt_batch);
	prepare(b.conn, "claim_batch", SQL_CLAIM_BATCH);
	prepare(b.conn, "complete_batch", SQL_COMPLETE_BATCH);
	prepare(b.conn, "park_batch", SQL_PARK_BATCH);

	pthread_barrier_wait(&start_barrier);

	while (!run_done())
	{
		if (b.n == 0)
		{
			const char *params[3] = {opt_topic, wait, nbuf};
			int64_t		t0 = now_us();
			PGresult   *res = run(b.conn, "claim_batch", 3, params);

			count_claim(PQntuples(res), now_us() - t0);
			offer_batch(&b, res);
		}
		else
			offer_batch(&b, settle_batch(&b));
	}

	finish_thread(b.conn);
	free(b.flight);
	free(b.keys);
	free(b.tokens);
	free(b.keys_lit);
	free(b.tokens_lit);
	return NULL;
}


/* Sample the busy slots every opt_sample_ms until the run is over. */
static void *
sampler_main(void *arg)
{
	FILE	   *out = (FILE *) arg;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;)
	{
		int64_t		t = now_us() - shared.t_start_us;
		bool		done = run_done();

		fprintf(out, "%.1f,%d\n", t / 1000.0, consumer_busy());
		if (done)
			break;
		next.tv_nsec += (long) opt_sample_ms * 1000000;
		while (next.tv_nsec >= 1000000000)
		{
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	return NULL;
}

/*
 * With --progress, show on stderr what the run is doing: rows delivered,
 * rows parked now and re-offered so far (from aion_wake.status, over a
 * connection of its own), bounces and the consumer's busy slots.  On a
 * terminal the line is redrawn four times a second; otherwise a line is
 * printed every second.
 */
static void *
progress_main(void *arg)
{
	PGconn	   *conn = connect_db();
	bool		tty = isatty(STDERR_FILENO);
	int64_t		reoffered_before = *(const int64_t *) arg;
	int			period_ms = tty ? 250 : 1000;

	for (;;)
	{
		bool		done = run_done();
		PGresult   *res;
		int64_t		delivered;
		int64_t		bounces;
		int			busy = consumer_busy();
		char		bar[64];
		int			i;

		res = PQexec(conn,
					 "SELECT parked_pending + parked_confirmed, rows_reoffered "
					 "  FROM aion_wake.status");
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
			die("progress", conn);
		pthread_mutex_lock(&shared.lock);
		delivered = shared.delivered;
		bounces = shared.bounces;
		pthread_mutex_unlock(&shared.lock);
		for (i = 0; i < opt_slots && i < (int) sizeof(bar) - 1; i++)
			bar[i] = i < busy ? '#' : '.';
		bar[i] = '\0';
		fprintf(stderr,
				"%s%-7s %5.1f s  delivered %5" PRId64 "/%" PRId64
				"  parked %5s  re-offered %5" PRId64
				"  bounces %6" PRId64 "  slots busy [%s] %d/%d%s",
				tty ? "\r" : "", mode_names[opt_mode],
				(now_us() - shared.t_start_us) / 1e6, delivered, shared.total,
				PQgetvalue(res, 0, 0),
				(int64_t) strtoll(PQgetvalue(res, 0, 1), NULL, 10) - reoffered_before,
				bounces, bar, busy, opt_slots, tty ? "" : "\n");
		PQclear(res);
		if (done)
			break;
		sleep_us((int64_t) period_ms * 1000);
	}
	if (tty)
		fputc('\n', stderr);
	PQfinish(conn);
	return NULL;
}

/* ---------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------
 */

static void
usage(void)
{
	fprintf(stderr,
			"usage: dispatcher [options]\n"
			"  --conninfo STR     libpq connection string (default \"dbname=postgres\")\n"
			"  --mode MODE        handoff (park on BUSY + complete(next_rows => 1) +\n"
			"                     blocking claim), limit (set_limit(topic, C), no BUSY,\n"
			"                     complete(next_rows => 1) + blocking claim), aion (park\n"
			"                     + complete and pulse + blocking claim: the 1.0 wiring),\n"
			"                     fence (park + blocking claim, no pulse) or poll (plain\n"
			"                     fences, non-blocking claim every 100 ms); default handoff\n"
			"  --topic NAME       topic to dispatch (default api)\n"
			"  --threads N        dispatcher threads, one connection each (default 16)\n"
			"  --slots C          consumer slots (default 4)\n"
			"  --service-ms S     service time per row (default 20)\n"
			"  --backoff-ms B     back-off of a BUSY row (default 1000)\n"
			"  --wait-ms W        claim wait in all modes but poll (default 2000)\n"
			"  --limit N          set_limit(topic, N) in limit mode (default: --slots)\n"
			"  --poll-ms P        sleep after an empty claim in poll mode (default 100)\n"
			"  --csv FILE         write t_ms,busy_slots every 10 ms to FILE\n"
			"  --hold-slot-through-commit\n"
			"                     keep the slot until complete() has committed,\n"
			"                     instead of freeing it when the service ends\n"
			"  --progress         show a live progress line on stderr\n"
			"  --batch B          (handoff, limit; 1.2) up to B rows in flight per\n"
			"                     thread, settled and refilled with the batch forms\n"
			"  --print-outcomes   print \"delivered KEY\" / \"busy KEY\" per outcome\n");
	exit(2);
}

static int
int_arg(const char *s, int min)
{
	char	   *end;
	long		v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < min || v > 1000000)
		usage();
	return (int) v;
}

static void
parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"conninfo", required_argument, NULL, 'd'},
		{"mode", required_argument, NULL, 'm'},
		{"topic", required_argument, NULL, 't'},
		{"threads", required_argument, NULL, 'n'},
		{"slots", required_argument, NULL, 'c'},
		{"service-ms", required_argument, NULL, 's'},
		{"backoff-ms", required_argument, NULL, 'b'},
		{"wait-ms", required_argument, NULL, 'w'},
		{"limit", required_argument, NULL, 'l'},
		{"poll-ms", required_argument, NULL, 'p'},
		{"csv", required_argument, NULL, 'o'},
		{"hold-slot-through-commit", no_argument, NULL, 'H'},
		{"progress", no_argument, NULL, 'P'},
		{"batch", required_argument, NULL, 'B'},
		{"print-outcomes", no_argument, NULL, 'O'},
		{NULL, 0, NULL, 0}
	};
	int			c;
	int			i;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'd':
				opt_conninfo = optarg;
				break;
			case 'm':
				for (i = 0; i < NUM_MODES; i++)
					if (strcmp(optarg, mode_names[i]) == 0)
						break;
				if (i == NUM_MODES)
					usage();
				opt_mode = (Mode) i;
				break;
			case 't':
				opt_topic = optarg;
				break;
			case 'n':
				opt_threads = int_arg(optarg, 1);
				break;
			case 'c':
				opt_slots = int_arg(optarg, 1);
				break;
			case 's':
				opt_service_ms = int_arg(optarg, 0);
				break;
			case 'b':
				opt_backoff_ms = int_arg(optarg, 0);
				break;
			case 'w':
				opt_wait_ms = int_arg(optarg, 1);
				break;
			case 'p':
				opt_poll_ms = int_arg(optarg, 1);
				break;
			case 'l':
				opt_limit = int_arg(optarg, 1);
				break;
			case 'o':
				opt_csv = optarg;
				break;
			case 'H':
				opt_hold_through_commit = true;
				break;
			case 'P':
				opt_progress = true;
				break;
			case 'B':
				opt_batch = int_arg(optarg, 1);
				break;
			case 'O':
				opt_print_outcomes = true;
				break;
			default:
				usage();
		}
	}
	if (optind != argc)
		usage();
	/* the batch forms settle with next_rows: the modes that take the next row */
	if (opt_batch > 0 && !MODE_TAKES_NEXT(opt_mode))
		usage();
	if (opt_limit == 0)
		opt_limit = opt_slots;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/* The p-th percentile (0..100) of the recorded idle gaps, in ms. */
static double
gap_percentile(int64_t n, double p)
{
	int64_t		i;

	if (n == 0)
		return 0;
	i = (int64_t) (p / 100.0 * (double) (n - 1) + 0.5);
	return shared.gaps[i] / 1000.0;
}

int
main(int argc, char **argv)
{
	PGconn	   *ctl;
	pthread_t  *threads;
	pthread_t	sampler;
	pthread_t	progress;
	FILE	   *csv = NULL;
	char		sql[256];
	char		count_sql[256];
	char	   *topic_lit;
	int64_t		rows_left;
	int64_t		writes_before;
	int64_t		writes_after;
	int64_t		reoffered_before;
	int64_t		reoffered_after;
	int64_t		n_gaps;
	double		makespan_ms;
	double		ideal_ms;
	int			i;

	parse_args(argc, argv);

	/* A control connection: the rows to deliver and the counters before. */
	ctl = connect_db();
	topic_lit = PQescapeLiteral(ctl, opt_topic, strlen(opt_topic));
	if (topic_lit == NULL)
		die("PQescapeLiteral", ctl);
	snprintf(count_sql, sizeof(count_sql),
			 "SELECT count(*) FROM aion_wake.outbox WHERE topic = %s", topic_lit);
	shared.total = query_int(ctl, count_sql);
	if (shared.total == 0)
	{
		fprintf(stderr, "dispatcher: no rows of topic \"%s\" to deliver\n", opt_topic);
		exit(1);
	}
	/* limit mode: the consumer's capacity, said once (applied at commit) */
	if (opt_mode == MODE_LIMIT)
	{
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM aion_wake.set_limit(%s, %d)", topic_lit, opt_limit);
		(void) query_int(ctl, sql);
	}
	(void) query_int(ctl, "SELECT count(*) FROM (SELECT pg_stat_clear_snapshot()) s");
	writes_before = query_int(ctl, SQL_OUTBOX_WRITES);
	reoffered_before = query_int(ctl, "SELECT rows_reoffered FROM aion_wake.status");

	if (opt_csv)
	{
		csv = fopen(opt_csv, "w");
		if (csv == NULL)
		{
			perror(opt_csv);
			exit(1);
		}
		fprintf(csv, "t_ms,busy_slots\n");
	}

	pthread_mutex_init(&consumer.lock, NULL);
	consumer.slots = opt_slots;
	consumer.free_since = calloc(opt_slots, sizeof(int64_t));
	consumer.free_count = opt_slots;
	pthread_mutex_init(&shared.lock, NULL);
	shared.gaps_cap = shared.total * 4 + 1024;
	shared.gaps = calloc(shared.gaps_cap, sizeof(int64_t));
	threads = calloc(opt_threads, sizeof(pthread_t));
	if (consumer.free_since == NULL || shared.gaps == NULL || threads == NULL)
	{
		fprintf(stderr, "dispatcher: out of memory\n");
		exit(1);
	}

	/* Connect every thread, then start them all at once. */
	pthread_barrier_init(&start_barrier, NULL, opt_threads + 1);
	for (i = 0; i < opt_threads; i++)
		if (pthread_create(&threads[i], NULL,
						   opt_batch > 0 ? batch_main : dispatcher_main, NULL) != 0)
		{
			perror("pthread_create");
			exit(1);
		}
	shared.t_start_us = now_us();
	for (i = 0; i < opt_slots; i++)
		consumer.free_since[i] = shared.t_start_us;
	pthread_barrier_wait(&start_barrier);
	if ((csv && pthread_create(&sampler, NULL, sampler_main, csv) != 0) ||
		(opt_progress &&
		 pthread_create(&progress, NULL, progress_main, &reoffered_before) != 0))
	{
		perror("pthread_create");
		exit(1);
	}

	for (i = 0; i < opt_threads; i++)
		pthread_join(threads[i], NULL);
	if (csv)
	{
		pthread_join(sampler, NULL);
		fclose(csv);
	}
	if (opt_progress)
		pthread_join(progress, NULL);

	/* Every dispatcher backend flushed its statistics; the worker does after each transaction. */
	(void) query_int(ctl, "SELECT count(*) FROM (SELECT pg_stat_clear_snapshot()) s");
	writes_after = query_int(ctl, SQL_OUTBOX_WRITES);
	reoffered_after = query_int(ctl, "SELECT rows_reoffered FROM aion_wake.status");
	/* every row delivered exactly once leaves none behind */
	rows_left = query_int(ctl, count_sql);
	if (opt_mode == MODE_LIMIT)
	{
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM aion_wake.set_limit(%s, NULL)", topic_lit);
		(void) query_int(ctl, sql);
	}
	PQfreemem(topic_lit);
	PQfinish(ctl);

	makespan_ms = (shared.t_end_us - shared.t_start_us) / 1000.0;
	ideal_ms = (double) shared.total * opt_service_ms / opt_slots;
	n_gaps = shared.n_gaps < shared.gaps_cap ? shared.n_gaps : shared.gaps_cap;
	qsort(shared.gaps, n_gaps, sizeof(int64_t), cmp_int64);

	printf("mode=%s\n", mode_names[opt_mode]);
	printf("rows=%" PRId64 "\n", shared.delivered);
	printf("threads=%d\nslots=%d\nservice_ms=%d\nbackoff_ms=%d\n",
		   opt_threads, opt_slots, opt_service_ms, opt_backoff_ms);
	if (opt_mode == MODE_LIMIT)
		printf("limit=%d\n", opt_limit);
	if (opt_batch > 0)
		printf("batch=%d\n", opt_batch);
	printf("slot_freed_at=%s\n", opt_hold_through_commit ? "commit" : "service_end");
	printf("makespan_ms=%.1f\n", makespan_ms);
	printf("ideal_ms=%.1f\n", ideal_ms);
	printf("x_ideal=%.3f\n", makespan_ms / ideal_ms);
	printf("utilisation=%.3f\n", ideal_ms / makespan_ms);
	printf("bounces=%" PRId64 "\n", shared.bounces);
	printf("writes=%" PRId64 "\n", writes_after - writes_before);
	printf("writes_per_row=%.3f\n",
		   (double) (writes_after - writes_before) / shared.delivered);
	/*
	 * The same count from the client side: rows leased (by claims and by
	 * settles), deliveries, bounces and re-offers.  A parked row that a
	 * claim or a settle takes straight from its fence is one update but
	 * counts as a lease and a re-offer, so this is an upper bound.
	 */
	printf("writes_counted_max=%" PRId64 "\n",
		   shared.claims + shared.taken_next + shared.delivered + shared.bounces +
		   (reoffered_after - reoffered_before));
	printf("claims=%" PRId64 "\n", shared.claims);
	printf("taken_by_settle=%" PRId64 "\n", shared.taken_next);
	printf("empty_claims=%" PRId64 "\n", shared.empty_claims);
	printf("reoffered=%" PRId64 "\n", reoffered_after - reoffered_before);
	printf("lost_leases=%" PRId64 "\n", shared.lost_leases);
	printf("rows_left=%" PRId64 "\n", rows_left);
	printf("mean_claim_ms=%.3f\n",
		   shared.claims ? shared.claim_hit_us / 1000.0 / shared.claims : 0);
	printf("mean_complete_ms=%.3f\n",
		   shared.delivered ? shared.complete_us / 1000.0 / shared.delivered : 0);
	printf("mean_bounce_ms=%.3f\n",
		   shared.bounces ? shared.bounce_us / 1000.0 / shared.bounces : 0);
	printf("slot_gap_mean_ms=%.3f\n",
		   shared.n_gaps ? shared.gap_sum_us / 1000.0 / shared.n_gaps : 0);
	printf("slot_gap_p50_ms=%.3f\n", gap_percentile(n_gaps, 50));
	printf("slot_gap_p90_ms=%.3f\n", gap_percentile(n_gaps, 90));
	printf("slot_gap_p99_ms=%.3f\n", gap_percentile(n_gaps, 99));
	if (shared.lost_leases != 0 || rows_left != 0)
	{
		fprintf(stderr, "dispatcher: %" PRId64 " leases lost, %" PRId64 " rows of the topic left\n",
				shared.lost_leases, rows_left);
		return 1;
	}
	return 0;
}
