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
 *	  The three modes differ only in how a row that was answered BUSY waits:
 *
 *	  aion    the wiring README.md ("Wiring a dispatcher") prescribes:
 *	          a blocking claim; on BUSY, park(key, backoff, lease_token);
 *	          on success, complete(key, lease_token) and pulse(topic, 1) in
 *	          one statement, so the freed slot re-offers the oldest parked
 *	          row the moment the delivery commits.
 *	  fence   the same without the pulse: a parked row waits out its
 *	          back-off, and the blocking claim wakes when the fence passes.
 *	  poll    what a dispatcher without aion_wake does: a non-blocking
 *	          claim, BUSY rows re-fenced with a plain UPDATE of
 *	          visible_after, and 100 ms of sleep whenever a claim comes
 *	          back empty.
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
 *	  transaction, then exactly one of complete (+ pulse for the slot that
 *	  freed) or park, each in a transaction of its own, always passing the
 *	  lease_token.
 *
 *	  Build (examples/Makefile does this):
 *	    gcc -O2 -Wall -Wextra -Werror -pthread \
 *	        -I$(pg_config --includedir) dispatcher.c \
 *	        -L$(pg_config --libdir) -lpq -o dispatcher
 *
 *	  Run:  dispatcher --conninfo 'host=/tmp/sock port=5432 dbname=postgres'
 *	                   --mode aion --topic api --threads 16 --slots 4
 *	                   --service-ms 20 --backoff-ms 1000 --csv busy.csv
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
	MODE_AION,
	MODE_FENCE,
	MODE_POLL
} Mode;

static const char *const mode_names[] = {"aion", "fence", "poll"};

/* Command line. */
static const char *opt_conninfo = "dbname=postgres";
static Mode opt_mode = MODE_AION;
static const char *opt_topic = "api";
static int	opt_threads = 16;
static int	opt_slots = 4;
static int	opt_service_ms = 20;
static int	opt_backoff_ms = 1000;
static int	opt_wait_ms = 2000;		/* claim(wait => ...) in aion and fence */
static int	opt_poll_ms = 100;		/* sleep after an empty claim in poll */
static int	opt_sample_ms = 10;
static const char *opt_csv = NULL;
static bool opt_hold_through_commit = false;	/* see deliver() */
static bool opt_progress = false;	/* a live progress line on stderr */

/* The SQL each mode sends.  Every statement runs in a transaction of its own. */

/* aion, fence: block up to the wait when nothing is claimable */
#define SQL_CLAIM_WAIT \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.claim($1, 1, '30 s', $2::interval)"
/* poll: never block */
#define SQL_CLAIM_POLL \
	"SELECT dispatch_key, lease_token, topic " \
	"  FROM aion_wake.claim($1, 1, '30 s')"
/* aion: delivered; the slot the row used is free again (pulse at commit) */
#define SQL_COMPLETE_PULSE \
	"SELECT aion_wake.complete($1, $2), aion_wake.pulse($3, 1)"
/* fence, poll: delivered */
#define SQL_COMPLETE \
	"SELECT aion_wake.complete($1, $2)"
/* aion, fence: BUSY, wait for a pulse or at most the back-off */
#define SQL_PARK \
	"SELECT aion_wake.park($1, $2::interval, $3)"
/* poll: BUSY, the plain fence a polling dispatcher writes */
#define SQL_REFENCE \
	"UPDATE aion_wake.outbox " \
	"   SET visible_after = clock_timestamp() + $2::interval " \
	" WHERE dispatch_key = $1 AND lease_token = $3"

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
count_delivered(int64_t stmt_us)
{
	pthread_mutex_lock(&shared.lock);
	shared.complete_us += stmt_us;
	if (++shared.delivered == shared.total)
	{
		shared.t_end_us = now_us();
		shared.done = true;
	}
	pthread_mutex_unlock(&shared.lock);
}

static void
count_bounce(int64_t stmt_us)
{
	pthread_mutex_lock(&shared.lock);
	shared.bounces++;
	shared.bounce_us += stmt_us;
	pthread_mutex_unlock(&shared.lock);
}

static void
count_claim(bool got_row, int64_t stmt_us)
{
	pthread_mutex_lock(&shared.lock);
	if (got_row)
	{
		shared.claims++;
		shared.claim_hit_us += stmt_us;
	}
	else
		shared.empty_claims++;
	pthread_mutex_unlock(&shared.lock);
}

static void
count_lost_lease(void)
{
	pthread_mutex_lock(&shared.lock);
	shared.lost_leases++;
	pthread_mutex_unlock(&shared.lock);
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
 * service ends.  Then record the delivery -- in mode aion together with a
 * pulse for the slot that freed, in the same transaction, delivered at
 * commit.  (With --hold-slot-through-commit the slot is given back only
 * after that commit, as if the consumer stayed busy until the dispatcher
 * had written the outcome down.)
 *
 * If every slot is taken (BUSY), make the row wait: park() in aion and fence
 * mode, a plain fence in poll mode.
 */
static void
deliver(PGconn *conn, const char *key, const char *token, const char *topic)
{
	char		backoff[32];
	int64_t		t0;
	PGresult   *res;

	if (consumer_try_acquire())
	{
		bool		ok;

		sleep_us((int64_t) opt_service_ms * 1000);	/* the service */
		if (!opt_hold_through_commit)
			consumer_release();

		t0 = now_us();
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
		if (opt_hold_through_commit)
			consumer_release();

		if (ok)
			count_delivered(now_us() - t0);
		else
			count_lost_lease(); /* lease expired: the row comes back */
		return;
	}

	/* BUSY */
	snprintf(backoff, sizeof(backoff), "%d ms", opt_backoff_ms);
	t0 = now_us();
	if (opt_mode == MODE_POLL)
	{
		const char *params[3] = {key, backoff, token};

		res = run(conn, "refence", 3, params);
		if (strcmp(PQcmdTuples(res), "1") != 0)
			count_lost_lease();
	}
	else
	{
		const char *params[3] = {key, backoff, token};

		res = run(conn, "park", 3, params);
		if (!result_true(res))
			count_lost_lease();
	}
	PQclear(res);
	count_bounce(now_us() - t0);
}

/* ---------------------------------------------------------------------
 * The dispatcher threads.
 * ---------------------------------------------------------------------
 */

/*
 * Claim one row at a time and deliver it, until every row is delivered.
 *
 * aion and fence: the claim blocks (up to opt_wait_ms) while nothing is
 * claimable and returns the moment a row becomes ready -- a re-offer, a
 * fence passing, a new row -- waking one blocked claimer per row.  No
 * polling: a claim that times out empty just loops to see whether the run
 * is over.
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
		count_claim(got, now_us() - t0);

		if (got)
			deliver(conn, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
					PQgetvalue(res, 0, 2));
		else if (opt_mode == MODE_POLL)
			sleep_us((int64_t) opt_poll_ms * 1000);
		PQclear(res);
	}

	/*
	 * Since PostgreSQL 15 a backend flushes its table statistics at most once
	 * a second; force the flush now so the main thread's count of writes is
	 * complete.  The flush happens before the server reports ready for the
	 * next query, so it is done when this returns.
	 */
	res = PQexec(conn, "SELECT pg_stat_force_next_flush()");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die("pg_stat_force_next_flush", conn);
	PQclear(res);
	PQfinish(conn);
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
				"%s%-5s %5.1f s  delivered %5" PRId64 "/%" PRId64
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
			"  --mode MODE        aion (park + pulse + blocking claim), fence (park +\n"
			"                     blocking claim, no pulse) or poll (plain fences,\n"
			"                     non-blocking claim every 100 ms); default aion\n"
			"  --topic NAME       topic to dispatch (default api)\n"
			"  --threads N        dispatcher threads, one connection each (default 16)\n"
			"  --slots C          consumer slots (default 4)\n"
			"  --service-ms S     service time per row (default 20)\n"
			"  --backoff-ms B     back-off of a BUSY row (default 1000)\n"
			"  --wait-ms W        claim wait in aion and fence mode (default 2000)\n"
			"  --poll-ms P        sleep after an empty claim in poll mode (default 100)\n"
			"  --csv FILE         write t_ms,busy_slots every 10 ms to FILE\n"
			"  --hold-slot-through-commit\n"
			"                     keep the slot until complete() has committed,\n"
			"                     instead of freeing it when the service ends\n"
			"  --progress         show a live progress line on stderr\n");
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
		{"poll-ms", required_argument, NULL, 'p'},
		{"csv", required_argument, NULL, 'o'},
		{"hold-slot-through-commit", no_argument, NULL, 'H'},
		{"progress", no_argument, NULL, 'P'},
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
				for (i = 0; i < 3; i++)
					if (strcmp(optarg, mode_names[i]) == 0)
						break;
				if (i == 3)
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
			case 'o':
				opt_csv = optarg;
				break;
			case 'H':
				opt_hold_through_commit = true;
				break;
			case 'P':
				opt_progress = true;
				break;
			default:
				usage();
		}
	}
	if (optind != argc)
		usage();
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
	char	   *topic_lit;
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
	snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM aion_wake.outbox WHERE topic = %s", topic_lit);
	PQfreemem(topic_lit);
	shared.total = query_int(ctl, sql);
	if (shared.total == 0)
	{
		fprintf(stderr, "dispatcher: no rows of topic \"%s\" to deliver\n", opt_topic);
		exit(1);
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
		if (pthread_create(&threads[i], NULL, dispatcher_main, NULL) != 0)
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
	PQfinish(ctl);

	makespan_ms = (shared.t_end_us - shared.t_start_us) / 1000.0;
	ideal_ms = (double) shared.total * opt_service_ms / opt_slots;
	n_gaps = shared.n_gaps < shared.gaps_cap ? shared.n_gaps : shared.gaps_cap;
	qsort(shared.gaps, n_gaps, sizeof(int64_t), cmp_int64);

	printf("mode=%s\n", mode_names[opt_mode]);
	printf("rows=%" PRId64 "\n", shared.delivered);
	printf("threads=%d\nslots=%d\nservice_ms=%d\nbackoff_ms=%d\n",
		   opt_threads, opt_slots, opt_service_ms, opt_backoff_ms);
	printf("slot_freed_at=%s\n", opt_hold_through_commit ? "commit" : "service_end");
	printf("makespan_ms=%.1f\n", makespan_ms);
	printf("ideal_ms=%.1f\n", ideal_ms);
	printf("x_ideal=%.3f\n", makespan_ms / ideal_ms);
	printf("utilisation=%.3f\n", ideal_ms / makespan_ms);
	printf("bounces=%" PRId64 "\n", shared.bounces);
	printf("writes=%" PRId64 "\n", writes_after - writes_before);
	printf("writes_per_row=%.3f\n",
		   (double) (writes_after - writes_before) / shared.delivered);
	/* the same count from the client side: claims, deliveries, bounces, re-offers */
	printf("writes_counted=%" PRId64 "\n",
		   shared.claims + shared.delivered + shared.bounces +
		   (reoffered_after - reoffered_before));
	printf("claims=%" PRId64 "\n", shared.claims);
	printf("empty_claims=%" PRId64 "\n", shared.empty_claims);
	printf("reoffered=%" PRId64 "\n", reoffered_after - reoffered_before);
	printf("lost_leases=%" PRId64 "\n", shared.lost_leases);
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
	return shared.lost_leases == 0 ? 0 : 1;
}
