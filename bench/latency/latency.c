/*
 * bench/latency/latency.c -- latency and idle-cost probes for aion_wake
 * (issues 4 and 5).  Driven by bench/latency/run.sh, which starts the
 * cluster and builds this file; connection settings come from the usual
 * libpq environment (PGHOST, PGPORT, PGDATABASE, PGUSER).
 *
 * A measurement, not a test: every mode prints one "RESULT" line per figure
 * (key=value pairs, read by run.sh) and writes the sorted samples of a
 * latency variant to a data file ("latency_ms cumulative_fraction" per line)
 * for the CDF plot.  It exits non-zero only if the run itself goes wrong
 * (an unexpected SQL result, a waiter that never wakes).
 *
 * Every time is CLOCK_MONOTONIC on the client.  A latency is measured from
 * the moment the causing autocommit statement (pulse, NOTIFY, enqueue)
 * RETURNS to its client -- that is when the client knows its commit is
 * done -- to the moment the observing connection has its answer.  The
 * server may act before the causing client has read its own reply, so a
 * latency can be (slightly) negative; the same figure measured from the
 * moment the statement was SENT is reported alongside as "from_send".
 *
 * Modes:
 *   reoffer NAME pulse|notify claim|visible SAMPLES FILE
 *       pulse -> re-offer.  Per sample: enqueue, claim and park
 *       (backoff 1 hour) one row of topic 'lat'; then
 *         claim:   a thread blocks in claim('lat', 1, '30 s', '5 s'); once
 *                  status.waiters = 1, the thread's backend sleeps in its
 *                  wait and the worker is idle again, pulse and time until
 *                  the blocked claim returns the row;
 *         visible: a thread polls "visible_after <= clock_timestamp()" for
 *                  the row in a tight loop (the instrument only); pulse and
 *                  time until it reads true.
 *       The pulse is SELECT aion_wake.pulse('lat', 1) or
 *       NOTIFY aion_wake_capacity, 'lat:1'.
 *   enqclaim NAME block|listen|poll SAMPLES FILE
 *       enqueue -> claim: a blocking claim woken by the enqueue's
 *       commit; a LISTEN/NOTIFY consumer (enqueue + NOTIFY jobs in one
 *       transaction, consumer waits on its socket then claims); a consumer
 *       polling claim() every 100 ms.
 *   idle WAITERS SECONDS WAIT_SECONDS
 *       WAITERS connections block in claim('idle', 1, '30 s', WAIT_SECONDS);
 *       over SECONDS, the CPU (utime+stime ticks from /proc/PID/stat, run
 *       time from /proc/PID/schedstat) and context switches of those
 *       backends, of the aion_wake worker and of its listener connection.
 *       The window starts once every waiter sleeps and is older than
 *       authentication_timeout (see there); once a second it notes which
 *       second any of them woke in.
 *   quiet MAX_SECONDS THRESHOLD
 *       wait (at most MAX_SECONDS) until processes outside this run use
 *       less than THRESHOLD CPUs over a half-second window.
 *   wrap FILE COMMAND...
 *       run COMMAND (pgbench) and write to FILE the CPUs other processes
 *       used meanwhile and the CPU time and context switches of the worker
 *       and its listener.
 *
 * "others_cpu" in every RESULT line is that figure for the variant: the CPU
 * time of the whole machine (/proc/stat) minus that of this cluster (the
 * postmaster and its children) and of this program, per second.  On a
 * shared machine it says how far a figure can be trusted.
 *
 * LAT_DEBUG=1 prints every sample (statement time, then latency) on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <libpq-fe.h>

#define NS_PER_MS 1000000.0
/* step between two looks at a condition (blocked claimer, idle worker) */
#define POLL_STEP_NS 100000

static const char *progname = "latency";

#include "../bench_client.h"

/* CPU used by everything but this cluster and this program (see below) */
typedef struct Load
{
	int			postmaster;
	int64_t		t;
	long long	busy;			/* /proc/stat, all CPUs, ticks */
	long long	ours;			/* this cluster's processes + this program */
} Load;
static void load_begin(Load *l, PGconn *conn);
static double load_end(Load *l);

/* ------------------------------------------------------------------------
 * libpq helpers
 * ------------------------------------------------------------------------
 */

static PGconn *
connect_as(const char *appname)
{
	const char *keys[] = {"application_name", "fallback_application_name", NULL};
	const char *vals[] = {appname, "aion_wake latency", NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	return conn;
}

static void
run_cmd(PGconn *conn, const char *sql)
{
	PQclear(run(conn, PGRES_COMMAND_OK, sql, 0, NULL));
}

/* Complete the rows a previous, interrupted run left in a topic. */
static void
cleanup_topic(PGconn *conn, const char *topic)
{
	const char *params[1] = {topic};

	PQclear(run(conn, PGRES_TUPLES_OK,
				"SELECT count(aion_wake.complete(dispatch_key)) FROM aion_wake.outbox WHERE topic = $1",
				1, params));
}

/* Print what the server knows of a row, then exit. */
static void
diagnose_and_die(PGconn *conn, const char *key, const char *what)
{
	const char *params[1] = {key};
	const char *queries[] = {
		"SELECT format('outbox: %s visible_after=%s (in %s) parked_at=%s lease_token=%s', "
		"       dispatch_key, visible_after, visible_after - clock_timestamp(), parked_at, lease_token) "
		"  FROM aion_wake.outbox WHERE dispatch_key = $1",
		"SELECT format('parked: %s state=%s woken=%s fence=%s', dispatch_key, state, woken, fence) "
		"  FROM aion_wake.parked WHERE dispatch_key = $1",
		"SELECT format('status: %s', s) FROM aion_wake.status s WHERE $1 IS NOT NULL",
		NULL};
	int			q;

	fprintf(stderr, "%s: %s\n", progname, what);
	for (q = 0; queries[q] != NULL; q++)
	{
		PGresult   *res = PQexecParams(conn, queries[q], 1, NULL, params, NULL, NULL, 0);
		int			i;

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			fprintf(stderr, "  (%s)\n", PQerrorMessage(conn));
		else if (PQntuples(res) == 0)
			fprintf(stderr, "  %s\n", q == 0 ? "outbox: no such row" : q == 1 ? "parked: no entry" : "");
		for (i = 0; i < PQntuples(res); i++)
			fprintf(stderr, "  %s\n", PQgetvalue(res, i, 0));
		PQclear(res);
	}
	exit(1);
}

/* ------------------------------------------------------------------------
 * Samples
 * ------------------------------------------------------------------------
 */

typedef struct Samples
{
	int			n;
	double	   *ms;				/* from the causing statement's return */
	double	   *send_ms;		/* from the causing statement's send */
} Samples;

static void
samples_init(Samples *s, int n)
{
	s->n = 0;
	s->ms = calloc(n, sizeof(double));
	s->send_ms = calloc(n, sizeof(double));
	if (s->ms == NULL || s->send_ms == NULL)
		die("out of memory");
}

static bool debug_samples = false;

static void
samples_add(Samples *s, int64_t t_send, int64_t t_return, int64_t t_seen)
{
	if (debug_samples)
		fprintf(stderr, "sample %d: statement %.3f ms, then %.3f ms\n", s->n,
				(t_return - t_send) / NS_PER_MS, (t_seen - t_return) / NS_PER_MS);
	s->ms[s->n] = (t_seen - t_return) / NS_PER_MS;
	s->send_ms[s->n] = (t_seen - t_send) / NS_PER_MS;
	s->n++;
}

/* Sort, write the CDF file, print the RESULT line. */
static void
samples_report(Samples *s, const char *name, const char *file, const char *extra)
{
	FILE	   *f;
	int			i;
	int			negative = 0;
	double		mean = 0;

	if (s->n == 0)
		die("%s: no samples", name);
	qsort(s->ms, s->n, sizeof(double), cmp_double);
	qsort(s->send_ms, s->n, sizeof(double), cmp_double);
	for (i = 0; i < s->n; i++)
	{
		mean += s->ms[i] / s->n;
		if (s->ms[i] < 0)
			negative++;
	}
	f = fopen(file, "w");
	if (f == NULL)
		die("cannot write %s: %s", file, strerror(errno));
	fprintf(f, "# %s: latency_ms (from the causing statement's return) and cumulative fraction, %d samples\n",
			name, s->n);
	for (i = 0; i < s->n; i++)
		fprintf(f, "%.6f %.6f\n", s->ms[i], (double) (i + 1) / s->n);
	fclose(f);
	printf("RESULT name=%s n=%d p50=%.3f p99=%.3f max=%.3f min=%.3f mean=%.3f "
		   "p50_from_send=%.3f p99_from_send=%.3f negative=%d%s%s\n",
		   name, s->n, pct(s->ms, s->n, 0.50), pct(s->ms, s->n, 0.99),
		   s->ms[s->n - 1], s->ms[0], mean,
		   pct(s->send_ms, s->n, 0.50), pct(s->send_ms, s->n, 0.99), negative,
		   extra ? " " : "", extra ? extra : "");
	fflush(stdout);
}

/* ------------------------------------------------------------------------
 * Waiting for a blocked claimer to be asleep
 * ------------------------------------------------------------------------
 */

static int	worker_idle_timeouts = 0;

/*
 * Wait until status.waiters = n and backend pid sleeps in its wait
 * (wait_event_type Extension), then until the worker has finished the
 * look at the topic's next fence that a new waiter asks of it (its
 * pg_stat_activity state went idle after the claimer's statement began).
 * That last condition is given 200 ms, then counted and skipped.  A
 * condition wait, never a fixed sleep.
 */
static void
wait_blocked(PGconn *conn, int pid, int n)
{
	char		pidbuf[16];
	char		nbuf[16];
	const char *params[2];
	int64_t		deadline = now_ns() + 10LL * 1000000000;

	snprintf(pidbuf, sizeof(pidbuf), "%d", pid);
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	params[0] = pidbuf;
	params[1] = nbuf;
	while (!run_bool(conn,
					 "SELECT (SELECT waiters FROM aion_wake.status) = $2::int "
					 "   AND EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1::int "
					 "                  AND state = 'active' AND wait_event_type = 'Extension')",
					 2, params))
	{
		if (now_ns() > deadline)
			die("the claimer (pid %d) never blocked", pid);
		sleep_ns(POLL_STEP_NS);
	}
	deadline = now_ns() + 200LL * 1000000;
	while (!run_bool(conn,
					 "SELECT coalesce(bool_and(w.state = 'idle' AND w.wait_event_type = 'Extension' "
					 "                         AND w.state_change >= c.query_start), false) "
					 "  FROM pg_stat_activity w, pg_stat_activity c "
					 " WHERE w.backend_type = 'aion_wake worker' AND c.pid = $1::int",
					 1, params))
	{
		if (now_ns() > deadline)
		{
			worker_idle_timeouts++;
			break;
		}
		sleep_ns(POLL_STEP_NS);
	}
}

/* ------------------------------------------------------------------------
 * Threads
 * ------------------------------------------------------------------------
 */

/* One blocking claim in a thread of its own. */
typedef struct Claimer
{
	PGconn	   *conn;
	const char *sql;
	int64_t		t_done;
	char		key[128];
	int			rows;
	char		error[256];
} Claimer;

static void *
claimer_main(void *arg)
{
	Claimer    *c = arg;
	PGresult   *res = PQexec(c->conn, c->sql);

	c->t_done = now_ns();
	c->rows = 0;
	c->error[0] = '\0';
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		snprintf(c->error, sizeof(c->error), "%s", PQerrorMessage(c->conn));
	else if ((c->rows = PQntuples(res)) > 0)
		snprintf(c->key, sizeof(c->key), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return NULL;
}

/* A tight poller: runs a prepared boolean query until it reads true. */
typedef struct Poller
{
	PGconn	   *conn;
	const char *key;
	volatile int started;		/* set after the first false answer */
	int64_t		t_done;
	long		polls;
} Poller;

static void *
poller_main(void *arg)
{
	Poller	   *p = arg;
	const char *params[1] = {p->key};
	int64_t		deadline = now_ns() + 10LL * 1000000000;

	p->polls = 0;
	for (;;)
	{
		PGresult   *res = PQexecPrepared(p->conn, "visible", 1, params, NULL, NULL, 0);
		bool		v;

		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
			die("visibility poll failed: %s", PQerrorMessage(p->conn));
		v = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
		p->polls++;
		if (v)
		{
			p->t_done = now_ns();
			return NULL;
		}
		__atomic_store_n(&p->started, 1, __ATOMIC_RELEASE);
		if (now_ns() > deadline)
			die("row %s never became visible", p->key);
	}
}

/* ------------------------------------------------------------------------
 * reoffer: pulse -> re-offer
 * ------------------------------------------------------------------------
 */

static void
park_one(PGconn *a, const char *key)
{
	const char *params[1] = {key};

	if (!run_bool(a, "SELECT aion_wake.enqueue($1, '{}', 'lat')", 1, params))
		die("enqueue %s failed", key);
	/* the only visible row of topic 'lat' is this one */
	if (!run_bool(a, "SELECT coalesce(bool_and(c.dispatch_key = $1 AND "
				  "       aion_wake.park(c.dispatch_key, '1 hour', c.lease_token)), false) "
				  "  FROM aion_wake.claim('lat', 1, '30 s') c", 1, params))
		die("claim + park of %s failed", key);
}

static void
complete_one(PGconn *a, const char *key)
{
	const char *params[1] = {key};

	if (!run_bool(a, "SELECT aion_wake.complete($1)", 1, params))
		die("complete %s failed", key);
}

static void
mode_reoffer(const char *name, const char *how, const char *observe, int nsamples,
			 const char *file)
{
	PGconn	   *a = connect_as("lat control");
	PGconn	   *b = connect_as("lat observer");
	const char *pulse_sql;
	bool		by_claim;
	Samples		s;
	long		polls = 0;
	int64_t		t_start = now_ns();
	char		extra[256];
	Load		load;
	int			i;

	cleanup_topic(a, "lat");
	load_begin(&load, a);
	if (strcmp(how, "pulse") == 0)
		pulse_sql = "SELECT aion_wake.pulse('lat', 1)";
	else if (strcmp(how, "notify") == 0)
		pulse_sql = "NOTIFY aion_wake_capacity, 'lat:1'";
	else
		die("unknown pulse kind %s", how);
	if (strcmp(observe, "claim") == 0)
		by_claim = true;
	else if (strcmp(observe, "visible") == 0)
	{
		by_claim = false;
		PQclear(PQprepare(b, "visible",
						  "SELECT visible_after <= clock_timestamp() FROM aion_wake.outbox "
						  " WHERE dispatch_key = $1", 1, NULL));
	}
	else
		die("unknown observer %s", observe);

	samples_init(&s, nsamples);
	for (i = 0; i < nsamples; i++)
	{
		char		key[64];
		pthread_t	th;
		int64_t		t_send;
		int64_t		t_return;
		int64_t		t_seen;

		snprintf(key, sizeof(key), "lat-%s-%d", name, i);
		park_one(a, key);

		if (by_claim)
		{
			Claimer		c = {.conn = b,
			.sql = "SELECT dispatch_key FROM aion_wake.claim('lat', 1, '30 s', '5 s')"};

			if (pthread_create(&th, NULL, claimer_main, &c) != 0)
				die("pthread_create failed");
			wait_blocked(a, PQbackendPID(b), 1);
			t_send = now_ns();
			PQclear(run(a, how[0] == 'p' ? PGRES_TUPLES_OK : PGRES_COMMAND_OK, pulse_sql, 0, NULL));
			t_return = now_ns();
			pthread_join(th, NULL);
			if (c.error[0])
				die("blocked claim failed: %s", c.error);
			if (c.rows != 1 || strcmp(c.key, key) != 0)
			{
				char		what[640];

				snprintf(what, sizeof(what), "sample %d: blocked claim returned %d rows (%s) after %.1f ms, expected %s",
						 i, c.rows, c.rows ? c.key : "-", (c.t_done - t_return) / NS_PER_MS, key);
				diagnose_and_die(a, key, what);
			}
			t_seen = c.t_done;
		}
		else
		{
			Poller		p = {.conn = b,.key = key};

			if (pthread_create(&th, NULL, poller_main, &p) != 0)
				die("pthread_create failed");
			while (!__atomic_load_n(&p.started, __ATOMIC_ACQUIRE))
				;
			t_send = now_ns();
			PQclear(run(a, how[0] == 'p' ? PGRES_TUPLES_OK : PGRES_COMMAND_OK, pulse_sql, 0, NULL));
			t_return = now_ns();
			pthread_join(th, NULL);
			t_seen = p.t_done;
			polls += p.polls;
		}
		samples_add(&s, t_send, t_return, t_seen);
		complete_one(a, key);
	}
	snprintf(extra, sizeof(extra), "worker_idle_timeouts=%d polls_per_sample=%.1f seconds=%.1f others_cpu=%.2f",
			 worker_idle_timeouts, by_claim ? 0.0 : (double) polls / nsamples,
			 (now_ns() - t_start) / 1e9, load_end(&load));
	samples_report(&s, name, file, extra);
	PQfinish(a);
	PQfinish(b);
}

/* ------------------------------------------------------------------------
 * enqclaim: enqueue -> claim
 * ------------------------------------------------------------------------
 */

/* A consumer thread that lives for the whole run (listen and poll). */
typedef struct Consumer
{
	PGconn	   *conn;
	const char *topic;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool		stop;
	bool		done;			/* a row was claimed, t_done and key set */
	int64_t		t_done;
	char		key[128];
	long		wakeups;		/* notifications handled / polls made */
	long		empty;			/* claims that found nothing */
} Consumer;

/* claim one row; true if one came back (then record it) */
static bool
consumer_claim(Consumer *c)
{
	char		sql[128];
	PGresult   *res;
	bool		got;

	snprintf(sql, sizeof(sql), "SELECT dispatch_key FROM aion_wake.claim('%s', 1)", c->topic);
	res = PQexec(c->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die("consumer claim failed: %s", PQerrorMessage(c->conn));
	got = PQntuples(res) > 0;
	if (got)
	{
		int64_t		t = now_ns();

		pthread_mutex_lock(&c->mu);
		c->t_done = t;
		snprintf(c->key, sizeof(c->key), "%s", PQgetvalue(res, 0, 0));
		c->done = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	else
		c->empty++;
	PQclear(res);
	return got;
}

static bool
consumer_stopping(Consumer *c)
{
	bool		stop;

	pthread_mutex_lock(&c->mu);
	stop = c->stop;
	pthread_mutex_unlock(&c->mu);
	return stop;
}

/* LISTEN jobs; wait on the socket; on a notification, claim. */
static void *
listener_main(void *arg)
{
	Consumer   *c = arg;

	while (!consumer_stopping(c))
	{
		struct pollfd pfd = {.fd = PQsocket(c->conn),.events = POLLIN};
		PGnotify   *n;
		bool		got = false;

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			die("poll failed: %s", strerror(errno));
		if (!PQconsumeInput(c->conn))
			die("consumer connection lost: %s", PQerrorMessage(c->conn));
		while ((n = PQnotifies(c->conn)) != NULL)
		{
			got = true;
			PQfreemem(n);
		}
		if (got && !consumer_stopping(c))
		{
			c->wakeups++;
			(void) consumer_claim(c);
		}
	}
	return NULL;
}

/* claim every 100 ms on a fixed schedule */
static void *
poll_consumer_main(void *arg)
{
	Consumer   *c = arg;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!consumer_stopping(c))
	{
		c->wakeups++;
		(void) consumer_claim(c);
		next.tv_nsec += 100 * 1000000;
		if (next.tv_nsec >= 1000000000)
		{
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	return NULL;
}

/* wait (bounded) for the consumer to claim key; return the time it did */
static int64_t
consumer_await(Consumer *c, const char *key)
{
	struct timespec dl;
	int64_t		t;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&c->mu);
	while (!c->done)
	{
		if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT)
			die("consumer never claimed %s", key);
	}
	if (strcmp(c->key, key) != 0)
		die("consumer claimed %s, expected %s", c->key, key);
	c->done = false;
	t = c->t_done;
	pthread_mutex_unlock(&c->mu);
	return t;
}

static void
mode_enqclaim(const char *name, const char *how, int nsamples, const char *file)
{
	PGconn	   *a = connect_as("lat control");
	PGconn	   *b = connect_as("lat consumer");
	Samples		s;
	Consumer	c;
	pthread_t	th;
	bool		persistent = false;
	const char *topic;
	int64_t		t_start = now_ns();
	char		extra[256];
	Load		load;
	int			i;
	unsigned int seed = 12345;

	load_begin(&load, a);
	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.mu, NULL);
	pthread_cond_init(&c.cv, NULL);
	c.conn = b;
	if (strcmp(how, "block") == 0)
		topic = "eb";
	else if (strcmp(how, "listen") == 0)
	{
		topic = "n";
		run_cmd(b, "LISTEN jobs");
		c.topic = topic;
		persistent = true;
		if (pthread_create(&th, NULL, listener_main, &c) != 0)
			die("pthread_create failed");
	}
	else if (strcmp(how, "poll") == 0)
	{
		topic = "p";
		c.topic = topic;
		persistent = true;
		if (pthread_create(&th, NULL, poll_consumer_main, &c) != 0)
			die("pthread_create failed");
	}
	else
		die("unknown consumer %s", how);
	cleanup_topic(a, topic);

	samples_init(&s, nsamples);
	for (i = 0; i < nsamples; i++)
	{
		char		key[64];
		char		sql[256];
		const char *params[2];
		int64_t		t_send;
		int64_t		t_return;
		int64_t		t_seen;

		snprintf(key, sizeof(key), "%s-%s-%d", topic, name, i);
		params[0] = key;
		params[1] = topic;
		if (strcmp(how, "block") == 0)
		{
			Claimer		cl = {.conn = b,
			.sql = "SELECT dispatch_key FROM aion_wake.claim('eb', 1, '30 s', '5 s')"};

			if (pthread_create(&th, NULL, claimer_main, &cl) != 0)
				die("pthread_create failed");
			wait_blocked(a, PQbackendPID(b), 1);
			t_send = now_ns();
			if (!run_bool(a, "SELECT aion_wake.enqueue($1, '{}', $2)", 2, params))
				die("enqueue %s failed", key);
			t_return = now_ns();
			pthread_join(th, NULL);
			if (cl.error[0])
				die("blocked claim failed: %s", cl.error);
			if (cl.rows != 1 || strcmp(cl.key, key) != 0)
				die("blocked claim returned %d rows, expected %s", cl.rows, key);
			t_seen = cl.t_done;
		}
		else
		{
			if (strcmp(how, "poll") == 0)
			{
				/* a random phase against the consumer's 100 ms schedule */
				sleep_ns((int64_t) (rand_r(&seed) % 100000) * 1000);
				snprintf(sql, sizeof(sql), "SELECT aion_wake.enqueue('%s', '{}', 'p')", key);
			}
			else
				snprintf(sql, sizeof(sql),
						 "BEGIN; SELECT aion_wake.enqueue('%s', '{}', 'n'); NOTIFY jobs; COMMIT",
						 key);
			t_send = now_ns();
			PQclear(run(a, strcmp(how, "poll") == 0 ? PGRES_TUPLES_OK : PGRES_COMMAND_OK,
						sql, 0, NULL));
			t_return = now_ns();
			t_seen = consumer_await(&c, key);
		}
		samples_add(&s, t_send, t_return, t_seen);
		{
			const char *p1[1] = {key};

			if (!run_bool(a, "SELECT aion_wake.complete($1)", 1, p1))
				die("complete %s failed", key);
		}
	}
	if (persistent)
	{
		pthread_mutex_lock(&c.mu);
		c.stop = true;
		pthread_mutex_unlock(&c.mu);
		if (strcmp(how, "listen") == 0)
			run_cmd(a, "NOTIFY jobs");	/* wake the listener to see stop */
		pthread_join(th, NULL);
	}
	snprintf(extra, sizeof(extra), "worker_idle_timeouts=%d consumer_wakeups=%ld empty_claims=%ld seconds=%.1f others_cpu=%.2f",
			 worker_idle_timeouts, c.wakeups, c.empty, (now_ns() - t_start) / 1e9, load_end(&load));
	samples_report(&s, name, file, extra);
	PQfinish(a);
	PQfinish(b);
}

/* ------------------------------------------------------------------------
 * idle: CPU of blocked waiters, the worker and its listener
 * ------------------------------------------------------------------------
 */

typedef struct ProcStat
{
	long long	ticks;			/* utime + stime, clock ticks */
	long long	child_ticks;	/* the same of its children that ended */
	long long	run_ns;			/* schedstat: time on CPU */
	long long	ctxsw;			/* voluntary + involuntary context switches */
	int			ppid;
} ProcStat;

static bool
read_proc(int pid, ProcStat *ps)
{
	char		path[64];
	char		buf[4096];
	FILE	   *f;
	char	   *p;
	size_t		len;
	unsigned long long utime,
				stime;
	long long	cutime,
				cstime;
	int			ppid;

	memset(ps, 0, sizeof(*ps));
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	/* fields after the command name, which may hold spaces and parens */
	if ((p = strrchr(buf, ')')) == NULL)
		return false;
	/* 3 state, 4 ppid, ..., 14 utime, 15 stime, 16 cutime, 17 cstime */
	if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
			   &ppid, &utime, &stime, &cutime, &cstime) != 5)
		return false;
	ps->ppid = ppid;
	ps->ticks = (long long) (utime + stime);
	ps->child_ticks = cutime + cstime;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	if ((f = fopen(path, "r")) != NULL)
	{
		if (fscanf(f, "%lld", &ps->run_ns) != 1)
			ps->run_ns = -1;
		fclose(f);
	}
	else
		ps->run_ns = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r")) != NULL)
	{
		char		line[256];
		long long	v;

		while (fgets(line, sizeof(line), f) != NULL)
		{
			if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
				sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
				ps->ctxsw += v;
		}
		fclose(f);
	}
	return true;
}

/* busy ticks of all CPUs from /proc/stat */
static long long
machine_busy(void)
{
	FILE	   *f = fopen("/proc/stat", "r");
	long long	v[8] = {0};

	if (f == NULL || fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld",
							&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		die("cannot read /proc/stat");
	fclose(f);
	/* user nice system [idle iowait] irq softirq steal */
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

/* ticks of the postmaster, its children and this program */
static long long
our_ticks(int postmaster)
{
	DIR		   *d = opendir("/proc");
	struct dirent *de;
	long long	sum = 0;
	ProcStat	ps;
	struct rusage ru;

	if (d == NULL)
		die("cannot list /proc");
	while ((de = readdir(d)) != NULL)
	{
		int			pid = atoi(de->d_name);

		if (pid <= 0 || !read_proc(pid, &ps))
			continue;
		if (pid == postmaster || ps.ppid == postmaster ||
			pid == getpid() || ps.ppid == getpid())
			sum += ps.ticks;
		/* backends that ended meanwhile (pgbench's) */
		if (pid == postmaster)
			sum += ps.child_ticks;
	}
	closedir(d);
	/* children of this program that ended (mode wrap) */
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
		sum += (long long) ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
							 (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6) *
							sysconf(_SC_CLK_TCK));
	return sum;
}

static void
load_begin(Load *l, PGconn *conn)
{
	char		v[32];
	ProcStat	ps;

	run_value(conn, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'",
			  0, NULL, v, sizeof(v));
	if (!read_proc(atoi(v), &ps))
		die("cannot read the worker's /proc entry");
	l->postmaster = ps.ppid;
	l->ours = our_ticks(l->postmaster);
	l->busy = machine_busy();
	l->t = now_ns();
}

/* CPUs (on average) used since load_begin by processes not of this run */
static double
load_end(Load *l)
{
	long long	busy = machine_busy();
	long long	ours = our_ticks(l->postmaster);
	double		secs = (now_ns() - l->t) / 1e9;
	double		other = (double) ((busy - l->busy) - (ours - l->ours)) / sysconf(_SC_CLK_TCK);

	return secs > 0 && other > 0 ? other / secs : 0.0;
}

typedef struct Group
{
	const char *name;
	bool		may_exit;		/* a process that ends is left out */
	int			n;
	int			pids[256];
	ProcStat	before[256];
	ProcStat	after[256];
} Group;

static void
group_add(Group *g, int pid)
{
	if (g->n < (int) (sizeof(g->pids) / sizeof(g->pids[0])))
		g->pids[g->n++] = pid;
}

static void
group_read(Group *g, bool after)
{
	int			i;

	for (i = 0; i < g->n; i++)
	{
		if (read_proc(g->pids[i], after ? &g->after[i] : &g->before[i]))
			continue;
		if (!g->may_exit)
			die("cannot read /proc/%d (%s)", g->pids[i], g->name);
		/* gone: drop it from the group */
		g->pids[i] = g->pids[g->n - 1];
		g->before[i] = g->before[g->n - 1];
		g->n--;
		i--;
	}
}

static void
group_report(Group *g, double seconds)
{
	long long	ticks = 0,
				run_ns = 0,
				ctxsw = 0;
	long		hz = sysconf(_SC_CLK_TCK);
	int			i;

	for (i = 0; i < g->n; i++)
	{
		ticks += g->after[i].ticks - g->before[i].ticks;
		run_ns += g->after[i].run_ns - g->before[i].run_ns;
		ctxsw += g->after[i].ctxsw - g->before[i].ctxsw;
	}
	printf("RESULT idle=%s procs=%d seconds=%.1f ticks=%lld hz=%ld cpu_s=%.3f run_ms=%.3f ctxsw=%lld\n",
		   g->name, g->n, seconds, ticks, hz, (double) ticks / hz, run_ns / 1e6, ctxsw);
}

static void
mode_idle(int nwaiters, int seconds, int wait_seconds)
{
	PGconn	   *m = connect_as("lat idle monitor");
	PGconn	  **w = calloc(nwaiters, sizeof(PGconn *));
	char		sql[256];
	char		buf[64];
	Group		waiters = {.name = "waiters"},
				worker = {.name = "worker"},
				listener = {.name = "listener"},
				all = {.name = "waiters+worker+listener"},
				others = {.name = "other_server_processes",.may_exit = true};
	PGresult   *res;
	int64_t		t0,
				t1;
	int			early = 0;
	Load		load;
	double		others_cpu;
	char		window_start[64];
	char		autovac[512];
	char		wakes[1024];
	int			i;

	if (w == NULL)
		die("out of memory");
	snprintf(sql, sizeof(sql),
			 "SELECT dispatch_key FROM aion_wake.claim('idle', 1, '30 s', '%d s')", wait_seconds);
	for (i = 0; i < nwaiters; i++)
	{
		w[i] = connect_as("lat idle waiter");
		if (!PQsendQuery(w[i], sql))
			die("send failed: %s", PQerrorMessage(w[i]));
		group_add(&waiters, PQbackendPID(w[i]));
		group_add(&all, PQbackendPID(w[i]));
	}
	/* all registered and asleep in their wait */
	{
		int64_t		deadline = now_ns() + 30LL * 1000000000;
		const char *params[1];

		snprintf(buf, sizeof(buf), "%d", nwaiters);
		params[0] = buf;
		while (!run_bool(m,
						 "SELECT (SELECT waiters FROM aion_wake.status) = $1::int "
						 "   AND (SELECT count(*) FROM pg_stat_activity "
						 "         WHERE application_name = 'lat idle waiter' AND state = 'active' "
						 "           AND wait_event_type = 'Extension' "
						 "           AND query LIKE '%claim(''idle''%') = $1::int "
						 "   AND (SELECT bool_and(state = 'idle' AND wait_event_type = 'Extension') "
						 "          FROM pg_stat_activity WHERE backend_type = 'aion_wake worker')",
						 1, params))
			if (now_ns() > deadline)
				die("the %d idle waiters never all blocked", nwaiters);
	}
	/*
	 * PostgreSQL arms a timer for authentication_timeout when a backend
	 * starts and, since 14, leaves it armed after authentication; when it
	 * fires, SIGALRM sets the backend's latch once.  That stray wake is the
	 * server's, not aion_wake's: start the window after it (run.sh sets
	 * authentication_timeout low for that).
	 */
	{
		int64_t		deadline = now_ns() + 130LL * 1000000000;

		while (!run_bool(m,
						 "SELECT bool_and(clock_timestamp() - backend_start > "
						 "                current_setting('authentication_timeout')::interval + interval '0.5 s') "
						 "  FROM pg_stat_activity WHERE application_name = 'lat idle waiter'",
						 0, NULL))
		{
			if (now_ns() > deadline)
				die("the idle waiters never got past authentication_timeout");
			sleep_ns(50000000);
		}
	}
	/* the waiters' pids as pg_stat_activity has them must be the ones we hold */
	res = run(m, PGRES_TUPLES_OK,
			  "SELECT pid FROM pg_stat_activity WHERE application_name = 'lat idle waiter' ORDER BY pid",
			  0, NULL);
	if (PQntuples(res) != nwaiters)
		die("pg_stat_activity shows %d waiters, expected %d", PQntuples(res), nwaiters);
	PQclear(res);

	res = run(m, PGRES_TUPLES_OK,
			  "SELECT pid, backend_type, coalesce(application_name, '') FROM pg_stat_activity "
			  " WHERE pid <> pg_backend_pid() AND coalesce(application_name, '') <> 'lat idle waiter'",
			  0, NULL);
	for (i = 0; i < PQntuples(res); i++)
	{
		int			pid = atoi(PQgetvalue(res, i, 0));

		if (strcmp(PQgetvalue(res, i, 1), "aion_wake worker") == 0)
		{
			group_add(&worker, pid);
			group_add(&all, pid);
		}
		else if (strcmp(PQgetvalue(res, i, 2), "aion_wake listener") == 0)
		{
			group_add(&listener, pid);
			group_add(&all, pid);
		}
		else
			group_add(&others, pid);
	}
	PQclear(res);
	if (worker.n != 1 || listener.n != 1)
		die("expected one worker and one listener, found %d and %d", worker.n, listener.n);
	/* the postmaster is the worker's parent */
	{
		ProcStat	ps;

		if (!read_proc(worker.pids[0], &ps))
			die("cannot read the worker's /proc entry");
		group_add(&others, ps.ppid);
	}

	fprintf(stderr, "idle: %d waiters blocked (worker %d, listener %d); measuring %d s\n",
			nwaiters, worker.pids[0], listener.pids[0], seconds);
	group_read(&waiters, false);
	group_read(&worker, false);
	group_read(&listener, false);
	group_read(&all, false);
	group_read(&others, false);
	run_value(m, "SELECT clock_timestamp()", 0, NULL, window_start, sizeof(window_start));
	load_begin(&load, m);
	t0 = now_ns();
	/*
	 * The measurement window.  Once a second, look (from /proc, which does
	 * not disturb them) at the context switches of the waiters and the
	 * worker, to tell when any of them woke.
	 */
	{
		long long	last = 0;
		int			sec;
		size_t		len = 0;

		wakes[0] = '\0';
		for (sec = 1; sec <= seconds; sec++)
		{
			long long	cs = 0;
			int			j;
			ProcStat	ps;

			sleep_ns(t0 + (int64_t) sec * 1000000000 - now_ns());
			for (j = 0; j < all.n; j++)
				if (read_proc(all.pids[j], &ps))
					cs += ps.ctxsw - all.before[j].ctxsw;
			if (cs != last && len < sizeof(wakes) - 32)
				len += snprintf(wakes + len, sizeof(wakes) - len, "%s+%ds:%lld",
								len ? "," : "", sec, cs - last);
			last = cs;
		}
	}
	group_read(&waiters, true);
	group_read(&worker, true);
	group_read(&listener, true);
	group_read(&all, true);
	group_read(&others, true);
	t1 = now_ns();
	others_cpu = load_end(&load);
	/* autovacuum runs inside the window (their catalog updates reach every backend) */
	{
		const char *params[1] = {window_start};

		run_value(m, "SELECT count(*) || ':' || coalesce(string_agg(format('%s@+%ss', relname, "
				  "         round(extract(epoch FROM greatest(last_autovacuum, last_autoanalyze) - $1::timestamptz), 1)), '+'), '') "
				  "  FROM pg_stat_all_tables "
				  " WHERE last_autovacuum >= $1::timestamptz OR last_autoanalyze >= $1::timestamptz",
				  1, params, autovac, sizeof(autovac));
	}

	/* every waiter must still be blocked: none returned inside the window */
	for (i = 0; i < nwaiters; i++)
	{
		struct pollfd pfd = {.fd = PQsocket(w[i]),.events = POLLIN};

		if (poll(&pfd, 1, 0) > 0)
		{
			PQconsumeInput(w[i]);
			if (!PQisBusy(w[i]))
				early++;
		}
	}
	group_report(&waiters, (t1 - t0) / 1e9);
	group_report(&worker, (t1 - t0) / 1e9);
	group_report(&listener, (t1 - t0) / 1e9);
	group_report(&all, (t1 - t0) / 1e9);
	group_report(&others, (t1 - t0) / 1e9);
	printf("RESULT check=idle waiters_returned_early=%d others_cpu=%.2f autovacuum_in_window=%s wakes=%s\n",
		   early, others_cpu, autovac, wakes[0] ? wakes : "none");

	for (i = 0; i < nwaiters; i++)
	{
		PGcancel   *cn = PQgetCancel(w[i]);
		char		err[256];

		if (cn == NULL || !PQcancel(cn, err, sizeof(err)))
			die("cancel failed: %s", err);
		PQfreeCancel(cn);
	}
	for (i = 0; i < nwaiters; i++)
	{
		while ((res = PQgetResult(w[i])) != NULL)
			PQclear(res);
		PQfinish(w[i]);
	}
	PQfinish(m);
	free(w);
}

/*
 * quiet MAX_SECONDS THRESHOLD: wait until the CPU used by processes not of
 * this run, measured over half-second windows, is below THRESHOLD CPUs, for
 * at most MAX_SECONDS.  Prints the last window's figure on stderr and the
 * condition met (or not) on stdout.
 */
static void
mode_quiet(int max_seconds, double threshold)
{
	PGconn	   *m = connect_as("lat load monitor");
	int64_t		t0 = now_ns();
	double		other;

	for (;;)
	{
		Load		load;

		load_begin(&load, m);
		sleep_ns(500000000);	/* one measurement window */
		other = load_end(&load);
		if (other < threshold || (now_ns() - t0) / 1e9 >= max_seconds)
			break;
	}
	printf("RESULT quiet=%s others_cpu=%.2f waited=%.0f\n", other < threshold ? "yes" : "no",
		   other, (now_ns() - t0) / 1e9);
	PQfinish(m);
}

/*
 * wrap FILE CMD...: run CMD (pgbench) and write to FILE the CPUs used
 * meanwhile by processes not of this run.
 */
static int
mode_wrap(const char *file, char **cmd)
{
	PGconn	   *m = connect_as("lat load monitor");
	Load		load;
	pid_t		child;
	int			status;
	FILE	   *f;
	char		v[32];
	int			wpid,
				lpid;
	ProcStat	w0,
				w1,
				l0,
				l1;

	run_value(m, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'",
			  0, NULL, v, sizeof(v));
	wpid = atoi(v);
	run_value(m, "SELECT pid FROM pg_stat_activity WHERE application_name = 'aion_wake listener'",
			  0, NULL, v, sizeof(v));
	lpid = atoi(v);
	if (!read_proc(wpid, &w0) || !read_proc(lpid, &l0))
		die("cannot read the worker's or the listener's /proc entry");
	load_begin(&load, m);
	child = fork();
	if (child < 0)
		die("fork failed: %s", strerror(errno));
	if (child == 0)
	{
		execvp(cmd[0], cmd);
		fprintf(stderr, "%s: cannot run %s: %s\n", progname, cmd[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid failed: %s", strerror(errno));
	if ((f = fopen(file, "w")) == NULL)
		die("cannot write %s: %s", file, strerror(errno));
	if (!read_proc(wpid, &w1) || !read_proc(lpid, &l1))
		die("cannot read the worker's or the listener's /proc entry");
	/* CPU time (schedstat) the worker and its listener used during COMMAND */
	fprintf(f, "others_cpu=%.2f worker_ms=%.1f listener_ms=%.1f worker_ctxsw=%lld listener_ctxsw=%lld\n",
			load_end(&load), (w1.run_ns - w0.run_ns) / 1e6, (l1.run_ns - l0.run_ns) / 1e6,
			w1.ctxsw - w0.ctxsw, l1.ctxsw - l0.ctxsw);
	fclose(f);
	PQfinish(m);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	debug_samples = getenv("LAT_DEBUG") != NULL;
	if (argc >= 7 && strcmp(argv[1], "reoffer") == 0)
		mode_reoffer(argv[2], argv[3], argv[4], atoi(argv[5]), argv[6]);
	else if (argc >= 6 && strcmp(argv[1], "enqclaim") == 0)
		mode_enqclaim(argv[2], argv[3], atoi(argv[4]), argv[5]);
	else if (argc >= 5 && strcmp(argv[1], "idle") == 0)
		mode_idle(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	else if (argc >= 4 && strcmp(argv[1], "quiet") == 0)
		mode_quiet(atoi(argv[2]), atof(argv[3]));
	else if (argc >= 4 && strcmp(argv[1], "wrap") == 0)
		return mode_wrap(argv[2], argv + 3);
	else
	{
		fprintf(stderr,
				"usage: %s reoffer NAME pulse|notify claim|visible SAMPLES FILE\n"
				"       %s enqclaim NAME block|listen|poll SAMPLES FILE\n"
				"       %s idle WAITERS SECONDS WAIT_SECONDS\n"
				"       %s quiet MAX_SECONDS THRESHOLD_CPUS\n"
				"       %s wrap FILE COMMAND [ARG...]\n",
				progname, progname, progname, progname, progname);
		return 2;
	}
	return 0;
}
