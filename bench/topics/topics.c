/*
 * bench/topics/topics.c -- one claimer waiting on many topics (1.1):
 * latency, backends and idle cost.  Driven by bench/topics/run.sh, which
 * starts the cluster and builds this file; connection settings come from
 * the usual libpq environment (PGHOST, PGPORT, PGDATABASE, PGUSER).
 *
 * A measurement, not a test: every mode prints "RESULT" lines (key=value
 * pairs, read by run.sh); a latency mode also writes its sorted samples
 * ("latency_ms cumulative_fraction" per line) for the plot.  It exits
 * non-zero only if the run itself goes wrong (an unexpected SQL result, a
 * claimer that never gets its row).
 *
 * Times are CLOCK_MONOTONIC on the client.  A latency runs from the moment
 * the enqueue (an autocommit statement) returns to its client to the moment
 * the claimer that takes the row has its answer, as in bench/latency: the
 * server may wake the claimer before the enqueuing client has read its own
 * reply, so a latency can be negative; the same figure from the moment the
 * enqueue was sent is reported alongside ("from_send").
 *
 * Modes:
 *   latency NAME one|many TOPICS SAMPLES FILE
 *       enqueue -> claim.  one: one connection blocked in
 *       claim(ARRAY[t1..tTOPICS], 1, '30 s', '10 s'); many: TOPICS
 *       connections, connection i blocked in claim('ti', 1, '30 s',
 *       '10 s').  Per sample: once every claimer sleeps in its wait
 *       (status.waiters and pg_stat_activity) and the worker is idle, one
 *       row is enqueued on a topic drawn at random, and the sample ends when
 *       the claimer returns it; the claimer completes it (with its
 *       lease_token) and claims again.  Also prints the client backends the
 *       claimers use.
 *   probe TOPICS CALLS
 *       what one look at TOPICS empty topics costs: CALLS non-blocking
 *       claim(ARRAY[t1..tTOPICS], 1) that find nothing, one after another on
 *       one connection; prints the mean time per call (the client's clock:
 *       the round trip included) and the backend's CPU per call (/proc).
 *       A waiting claim makes such a look over all its topics when it
 *       starts and when its wait ends, and over its ready topics when woken.
 *   pool TOPICS ROWS SLOTS SERVICE_MS CONNS MAX_ROWS IDLE_SECONDS SETTLE_SECONDS
 *       a dispatcher pool: CONNS connections serve TOPICS topics
 *       (p1..pTOPICS, ROWS rows each, enqueued and limited to SLOTS by
 *       run.sh) for a consumer of SLOTS slots per topic and SERVICE_MS per
 *       row.  Each connection, in a thread: complete the rows the consumer
 *       has finished (one statement for all of them), then claim up to
 *       MAX_ROWS rows over all the topics, claim(topics[], ...), blocking
 *       only while no row is in flight anywhere (with rows in flight, the
 *       next event is a finished row: the thread waits for one, in the
 *       process); each claimed row is handed to the consumer, which counts a
 *       BUSY if the topic's slots are all taken (never, within the limits).
 *       Prints the makespan against the ideal ROWS * SERVICE_MS / SLOTS,
 *       utilisation, statements and their sizes.  Then every connection
 *       blocks in claim(topics[], ..., wait) with nothing left to claim;
 *       after SETTLE_SECONDS (PostgreSQL's idle statistics timer, armed at
 *       the end of a statement, may set a backend's latch once up to 10 s
 *       later), the CPU (utime+stime ticks from /proc/PID/stat, run time
 *       from /proc/PID/schedstat) and context switches of those backends,
 *       of the worker and of its listener over IDLE_SECONDS.
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

#include <libpq-fe.h>

#define NS_PER_MS 1000000.0

static const char *progname = "topics";

#include "../bench_client.h"

static void *
xcalloc(size_t n, size_t size)
{
	void	   *p = calloc(n, size);

	if (p == NULL)
		die("out of memory");
	return p;
}

/* ------------------------------------------------------------------------
 * libpq helpers
 * ------------------------------------------------------------------------
 */

static PGconn *
connect_as(const char *appname)
{
	const char *keys[] = {"application_name", NULL};
	const char *vals[] = {appname, NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	return conn;
}

/* '{p1,p2,...}': the text[] literal of topics PREFIX1..PREFIXn */
static char *
topics_literal(const char *prefix, int n)
{
	size_t		len = 3 + (size_t) n * (strlen(prefix) + 8);
	char	   *s = xcalloc(1, len);
	size_t		off = 0;
	int			i;

	s[off++] = '{';
	for (i = 1; i <= n; i++)
		off += snprintf(s + off, len - off, "%s%s%d", i > 1 ? "," : "", prefix, i);
	snprintf(s + off, len - off, "}");
	return s;
}

/* ------------------------------------------------------------------------
 * Samples (as bench/latency/latency.c)
 * ------------------------------------------------------------------------
 */

/* ------------------------------------------------------------------------
 * /proc
 * ------------------------------------------------------------------------
 */

typedef struct ProcStat
{
	long long	ticks;			/* utime + stime */
	long long	run_ns;			/* /proc/PID/schedstat, first field */
	long long	ctxsw;			/* voluntary + nonvoluntary */
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
	/* 3 state, 4 ppid, ..., 14 utime, 15 stime */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			   &utime, &stime) != 2)
		return false;
	ps->ticks = (long long) (utime + stime);

	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	ps->run_ns = -1;
	if ((f = fopen(path, "r")) != NULL)
	{
		if (fscanf(f, "%lld", &ps->run_ns) != 1)
			ps->run_ns = -1;
		fclose(f);
	}

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

/* ------------------------------------------------------------------------
 * latency: one connection on TOPICS topics, or TOPICS connections on one
 * ------------------------------------------------------------------------
 */

typedef struct Claimer
{
	pthread_t	th;
	PGconn	   *conn;
	char	   *sql;			/* its claim */
	char	   *topics;			/* parameter of the claim, or NULL */
} Claimer;

/* what the claimers report to the main thread */
static pthread_mutex_t lat_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lat_cv = PTHREAD_COND_INITIALIZER;
static char lat_key[64];		/* the row last claimed, "" when none */
static int64_t lat_t_done;
static volatile bool lat_stop = false;

static void *
claimer_main(void *arg)
{
	Claimer    *c = arg;

	while (!lat_stop)
	{
		const char *params[1] = {c->topics};
		PGresult   *res = PQexecParams(c->conn, c->sql, c->topics ? 1 : 0, NULL,
									   params, NULL, NULL, 0);
		int64_t		t = now_ns();

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			if (lat_stop)
				break;
			die("claim failed: %s", PQerrorMessage(c->conn));
		}
		if (PQntuples(res) > 0)
		{
			const char *cp[2] = {PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1)};

			pthread_mutex_lock(&lat_mu);
			snprintf(lat_key, sizeof(lat_key), "%s", cp[0]);
			lat_t_done = t;
			pthread_cond_broadcast(&lat_cv);
			pthread_mutex_unlock(&lat_mu);
			PQclear(run(c->conn, PGRES_TUPLES_OK,
						"SELECT aion_wake.complete($1, $2::bigint)", 2, cp));
		}
		PQclear(res);
	}
	return NULL;
}

/*
 * Wait until n claimers sleep in their wait (status.waiters = n and n
 * 'topics claimer' backends in an Extension wait), then (200 ms at most)
 * until the worker is idle after the last of them began: it looks at the
 * topics a new waiter registers on.  A condition wait, never a fixed sleep.
 */
static int	worker_idle_timeouts = 0;

static void
wait_blocked(PGconn *conn, int n)
{
	char		nbuf[16];
	const char *params[1] = {nbuf};
	int64_t		deadline = now_ns() + 30LL * 1000000000;

	snprintf(nbuf, sizeof(nbuf), "%d", n);
	while (!run_bool(conn,
					 "SELECT (SELECT waiters FROM aion_wake.status) = $1::int "
					 "   AND (SELECT count(*) FROM pg_stat_activity "
					 "         WHERE application_name = 'topics claimer' AND state = 'active' "
					 "           AND wait_event_type = 'Extension') = $1::int",
					 1, params))
	{
		if (now_ns() > deadline)
			die("the %d claimers never all blocked", n);
		sleep_ns(100000);
	}
	deadline = now_ns() + 200LL * 1000000;
	while (!run_bool(conn,
					 "SELECT coalesce(bool_and(w.state = 'idle' AND w.wait_event_type = 'Extension' "
					 "                         AND w.state_change >= "
					 "                             (SELECT max(query_start) FROM pg_stat_activity "
					 "                               WHERE application_name = 'topics claimer')), false) "
					 "  FROM pg_stat_activity w WHERE w.backend_type = 'aion_wake worker'",
					 0, NULL))
	{
		if (now_ns() > deadline)
		{
			worker_idle_timeouts++;
			break;
		}
		sleep_ns(100000);
	}
}

static void
mode_latency(const char *name, const char *how, int ntopics, int nsamples, const char *file)
{
	PGconn	   *a = connect_as("topics control");
	bool		one = strcmp(how, "one") == 0;
	int			nclaimers = one ? 1 : ntopics;
	Claimer    *cl = xcalloc(nclaimers, sizeof(Claimer));
	double	   *ms = xcalloc(nsamples, sizeof(double));
	double	   *send_ms = xcalloc(nsamples, sizeof(double));
	double		mean = 0;
	int			negative = 0;
	char		backends[32];
	char		waiters[32];
	unsigned int seed = 12345;
	int64_t		t_start = now_ns();
	FILE	   *f;
	int			i;

	if (!one && strcmp(how, "many") != 0)
		die("unknown way %s", how);
	PQclear(run(a, PGRES_TUPLES_OK,
				"SELECT count(aion_wake.complete(dispatch_key)) FROM aion_wake.outbox WHERE topic ~ '^q[0-9]+$'",
				0, NULL));
	for (i = 0; i < nclaimers; i++)
	{
		cl[i].conn = connect_as("topics claimer");
		if (one)
		{
			cl[i].topics = topics_literal("q", ntopics);
			cl[i].sql = "SELECT dispatch_key, lease_token FROM aion_wake.claim($1::text[], 1, '30 s', '10 s')";
		}
		else
		{
			cl[i].sql = xcalloc(1, 128);
			snprintf(cl[i].sql, 128,
					 "SELECT dispatch_key, lease_token FROM aion_wake.claim('q%d', 1, '30 s', '10 s')", i + 1);
		}
		if (pthread_create(&cl[i].th, NULL, claimer_main, &cl[i]) != 0)
			die("pthread_create failed");
	}
	wait_blocked(a, nclaimers);
	run_value(a, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'topics claimer'",
			  0, NULL, backends, sizeof(backends));
	run_value(a, "SELECT waiters FROM aion_wake.status", 0, NULL, waiters, sizeof(waiters));

	for (i = 0; i < nsamples; i++)
	{
		char		key[64];
		char		topic[16];
		const char *params[2] = {key, topic};
		int64_t		t_send;
		int64_t		t_return;
		struct timespec dl;

		snprintf(key, sizeof(key), "%s-%d", name, i);
		snprintf(topic, sizeof(topic), "q%d", 1 + (int) (rand_r(&seed) % (unsigned) ntopics));
		wait_blocked(a, nclaimers);
		pthread_mutex_lock(&lat_mu);
		lat_key[0] = '\0';
		pthread_mutex_unlock(&lat_mu);
		t_send = now_ns();
		if (!run_bool(a, "SELECT aion_wake.enqueue($1, '{}', $2)", 2, params))
			die("enqueue %s failed", key);
		t_return = now_ns();
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 10;
		pthread_mutex_lock(&lat_mu);
		while (strcmp(lat_key, key) != 0)
		{
			if (pthread_cond_timedwait(&lat_cv, &lat_mu, &dl) == ETIMEDOUT)
				die("sample %d: nobody claimed %s of topic %s within 10 s (last: \"%s\")",
					i, key, topic, lat_key);
		}
		ms[i] = (lat_t_done - t_return) / NS_PER_MS;
		send_ms[i] = (lat_t_done - t_send) / NS_PER_MS;
		pthread_mutex_unlock(&lat_mu);
	}

	qsort(ms, nsamples, sizeof(double), cmp_double);
	qsort(send_ms, nsamples, sizeof(double), cmp_double);
	for (i = 0; i < nsamples; i++)
	{
		mean += ms[i] / nsamples;
		if (ms[i] < 0)
			negative++;
	}
	if ((f = fopen(file, "w")) == NULL)
		die("cannot write %s: %s", file, strerror(errno));
	fprintf(f, "# %s: latency_ms and cumulative fraction, %d samples\n", name, nsamples);
	for (i = 0; i < nsamples; i++)
		fprintf(f, "%.6f %.6f\n", ms[i], (double) (i + 1) / nsamples);
	fclose(f);
	printf("RESULT name=%s how=%s topics=%d claimers=%d backends=%s waiters=%s n=%d "
		   "p50=%.3f p90=%.3f p99=%.3f max=%.3f min=%.3f mean=%.3f negative=%d "
		   "p50_from_send=%.3f p99_from_send=%.3f worker_idle_timeouts=%d seconds=%.1f\n",
		   name, how, ntopics, nclaimers, backends, waiters, nsamples,
		   pct(ms, nsamples, 0.50), pct(ms, nsamples, 0.90), pct(ms, nsamples, 0.99),
		   ms[nsamples - 1], ms[0], mean, negative,
		   pct(send_ms, nsamples, 0.50), pct(send_ms, nsamples, 0.99),
		   worker_idle_timeouts, (now_ns() - t_start) / 1e9);

	/* end the claimers: cancel their waits */
	lat_stop = true;
	for (i = 0; i < nclaimers; i++)
	{
		PGcancel   *cn = PQgetCancel(cl[i].conn);
		char		err[256];

		if (cn == NULL || !PQcancel(cn, err, sizeof(err)))
			die("cancel failed: %s", err);
		PQfreeCancel(cn);
	}
	for (i = 0; i < nclaimers; i++)
	{
		pthread_join(cl[i].th, NULL);
		PQfinish(cl[i].conn);
	}
	PQfinish(a);
}

/* ------------------------------------------------------------------------
 * probe: the cost of one look at TOPICS empty topics
 * ------------------------------------------------------------------------
 */

static void
mode_probe(int ntopics, int calls)
{
	PGconn	   *c = connect_as("topics prober");
	char	   *topics = topics_literal("e", ntopics);
	const char *params[1] = {topics};
	ProcStat	before,
				after;
	int64_t		t0,
				t1;
	int			i;

	/* warm up: plans, catalog caches */
	for (i = 0; i < 20; i++)
		PQclear(run(c, PGRES_TUPLES_OK, "SELECT count(*) FROM aion_wake.claim($1::text[], 1)", 1, params));
	if (!read_proc(PQbackendPID(c), &before))
		die("cannot read the backend's /proc entry");
	t0 = now_ns();
	for (i = 0; i < calls; i++)
	{
		char		v[16];

		run_value(c, "SELECT count(*) FROM aion_wake.claim($1::text[], 1)", 1, params, v, sizeof(v));
		if (strcmp(v, "0") != 0)
			die("claim over empty topics returned %s rows", v);
	}
	t1 = now_ns();
	if (!read_proc(PQbackendPID(c), &after))
		die("cannot read the backend's /proc entry");
	printf("RESULT probe=%d calls=%d ms_per_call=%.3f backend_us_per_call=%.1f\n",
		   ntopics, calls, (t1 - t0) / NS_PER_MS / calls,
		   after.run_ns >= 0 ? (after.run_ns - before.run_ns) / 1e3 / calls : -1.0);
	PQfinish(c);
}

/* ------------------------------------------------------------------------
 * pool: CONNS dispatcher connections serving TOPICS topics
 * ------------------------------------------------------------------------
 */

typedef struct Row
{
	char		key[32];
	char		token[24];
	int			topic;			/* 0-based */
	int64_t		finish;			/* when the consumer is done with it */
} Row;

static struct
{
	int			ntopics;
	int			rows_per_topic;
	int			slots;
	int64_t		service_ns;
	int			nconns;
	int			max_rows;
	char	   *topics;			/* text[] literal */
	int64_t		total;

	pthread_mutex_t mu;
	pthread_cond_t work_cv;		/* a finished row, or the end */
	pthread_cond_t timer_cv;	/* a row started */
	/* rows in the consumer: a binary heap on finish */
	Row		   *heap;
	int			nheap;
	/* rows the consumer finished, to complete */
	Row		   *done;
	int			ndone;
	int			done_room;
	int		   *busy;			/* per topic */
	int64_t		inflight;		/* claimed, not yet completed */
	int64_t		completed;
	int64_t		claimed;
	long long	bounces;		/* a row handed to a topic with no free slot */
	bool		finished;
	/* statements */
	long long	n_claims;
	long long	n_empty_claims;
	long long	n_blocking_claims;
	long long	n_completes;
	int64_t		t_start;
	int64_t		t_end;
	/* utilisation: integral of busy slots over time */
	double		busy_slot_ns;
	int64_t		busy_total;
	int64_t		busy_since;
} P;

static void
heap_push(Row *r)
{
	int			i = P.nheap++;

	P.heap[i] = *r;
	while (i > 0 && P.heap[(i - 1) / 2].finish > P.heap[i].finish)
	{
		Row			t = P.heap[i];

		P.heap[i] = P.heap[(i - 1) / 2];
		P.heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static Row
heap_pop(void)
{
	Row			top = P.heap[0];
	int			i = 0;

	P.heap[0] = P.heap[--P.nheap];
	for (;;)
	{
		int			l = 2 * i + 1,
					r = l + 1,
					m = i;

		if (l < P.nheap && P.heap[l].finish < P.heap[m].finish)
			m = l;
		if (r < P.nheap && P.heap[r].finish < P.heap[m].finish)
			m = r;
		if (m == i)
			break;
		{
			Row			t = P.heap[i];

			P.heap[i] = P.heap[m];
			P.heap[m] = t;
		}
		i = m;
	}
	return top;
}

/* busy-slot accounting; caller holds P.mu */
static void
busy_add(int delta, int64_t t)
{
	P.busy_slot_ns += (double) P.busy_total * (t - P.busy_since);
	P.busy_since = t;
	P.busy_total += delta;
}

/* The consumer: SLOTS slots per topic, SERVICE_MS per row. */
static void *
consumer_main(void *arg)
{
	(void) arg;
	pthread_mutex_lock(&P.mu);
	while (!P.finished)
	{
		int64_t		t = now_ns();
		int			n = 0;

		while (P.nheap > 0 && P.heap[0].finish <= t)
		{
			Row			r = heap_pop();

			P.busy[r.topic]--;
			busy_add(-1, t);
			P.done[P.ndone++] = r;
			n++;
		}
		if (n > 0)
			pthread_cond_signal(&P.work_cv);
		if (P.nheap == 0)
			pthread_cond_wait(&P.timer_cv, &P.mu);
		else
		{
			struct timespec now_rt,
						dl;
			int64_t		wait = P.heap[0].finish - now_ns();

			clock_gettime(CLOCK_REALTIME, &now_rt);
			dl.tv_sec = now_rt.tv_sec + (now_rt.tv_nsec + wait) / 1000000000;
			dl.tv_nsec = (now_rt.tv_nsec + wait) % 1000000000;
			if (wait > 0)
				pthread_cond_timedwait(&P.timer_cv, &P.mu, &dl);
		}
	}
	pthread_mutex_unlock(&P.mu);
	return NULL;
}

/* hand claimed rows to the consumer */
static void
pool_start_rows(PGresult *res)
{
	int64_t		t = now_ns();
	int			i;

	pthread_mutex_lock(&P.mu);
	for (i = 0; i < PQntuples(res); i++)
	{
		Row			r;

		snprintf(r.key, sizeof(r.key), "%s", PQgetvalue(res, i, 0));
		snprintf(r.token, sizeof(r.token), "%s", PQgetvalue(res, i, 2));
		r.topic = atoi(PQgetvalue(res, i, 1) + 1) - 1;
		if (r.topic < 0 || r.topic >= P.ntopics)
			die("claimed a row of topic %s", PQgetvalue(res, i, 1));
		if (P.busy[r.topic] >= P.slots)
			P.bounces++;		/* the consumer would answer BUSY */
		P.busy[r.topic]++;
		busy_add(1, t);
		r.finish = t + P.service_ns;
		heap_push(&r);
		P.inflight++;
		P.claimed++;
	}
	pthread_cond_signal(&P.timer_cv);
	pthread_mutex_unlock(&P.mu);
}

static void *
dispatcher_main(void *arg)
{
	PGconn	   *conn = arg;
	Row		   *batch = xcalloc(P.total, sizeof(Row));
	size_t		keys_room = (size_t) P.total * 34 + 3;
	char	   *keys = xcalloc(1, keys_room);
	char	   *tokens = xcalloc(1, (size_t) P.total * 22 + 3);
	char		max_rows[16];

	snprintf(max_rows, sizeof(max_rows), "%d", P.max_rows);
	for (;;)
	{
		int			n,
					i;
		int64_t		inflight;
		bool		done;
		PGresult   *res;

		/* 1. the rows the consumer has finished: complete them all */
		pthread_mutex_lock(&P.mu);
		n = P.ndone;
		memcpy(batch, P.done, sizeof(Row) * n);
		P.ndone = 0;
		pthread_mutex_unlock(&P.mu);
		if (n > 0)
		{
			size_t		ko = 0,
						to = 0;
			const char *params[2];
			char		count[32];

			keys[ko++] = '{';
			tokens[to++] = '{';
			for (i = 0; i < n; i++)
			{
				ko += sprintf(keys + ko, "%s%s", i ? "," : "", batch[i].key);
				to += sprintf(tokens + to, "%s%s", i ? "," : "", batch[i].token);
			}
			keys[ko++] = '}';
			keys[ko] = '\0';
			tokens[to++] = '}';
			tokens[to] = '\0';
			params[0] = keys;
			params[1] = tokens;
			run_value(conn,
					  "SELECT count(*) FROM unnest($1::text[], $2::bigint[]) AS u(k, t) "
					  " WHERE aion_wake.complete(u.k, u.t)",
					  2, params, count, sizeof(count));
			if (atoi(count) != n)
				die("completed %s of %d rows", count, n);
			pthread_mutex_lock(&P.mu);
			P.n_completes++;
			P.inflight -= n;
			P.completed += n;
			if (P.completed == P.total)
			{
				P.t_end = now_ns();
				P.finished = true;
				pthread_cond_broadcast(&P.work_cv);
				pthread_cond_signal(&P.timer_cv);
			}
			else if (P.inflight == 0)
				pthread_cond_broadcast(&P.work_cv);
			pthread_mutex_unlock(&P.mu);
		}

		/* 2. claim over all the topics; block only with nothing in flight */
		pthread_mutex_lock(&P.mu);
		done = P.finished;
		inflight = P.inflight;
		pthread_mutex_unlock(&P.mu);
		if (done)
			break;
		{
			const char *params[3] = {P.topics, max_rows, inflight == 0 ? "2 s" : "0"};

			res = run(conn, PGRES_TUPLES_OK,
					  "SELECT dispatch_key, topic, lease_token "
					  "  FROM aion_wake.claim($1::text[], $2::int, '60 s', $3::interval)",
					  3, params);
		}
		pthread_mutex_lock(&P.mu);
		P.n_claims++;
		if (inflight == 0)
			P.n_blocking_claims++;
		if (PQntuples(res) == 0)
			P.n_empty_claims++;
		pthread_mutex_unlock(&P.mu);
		if (PQntuples(res) > 0)
			pool_start_rows(res);
		else if (n == 0)
		{
			/* nothing to do until the consumer finishes a row */
			pthread_mutex_lock(&P.mu);
			while (P.ndone == 0 && !P.finished && P.inflight > 0)
				pthread_cond_wait(&P.work_cv, &P.mu);
			pthread_mutex_unlock(&P.mu);
		}
		PQclear(res);
		/* more finished rows than this thread takes: wake another */
		pthread_mutex_lock(&P.mu);
		if (P.ndone > 0)
			pthread_cond_signal(&P.work_cv);
		pthread_mutex_unlock(&P.mu);
	}
	free(batch);
	free(keys);
	free(tokens);
	return NULL;
}

typedef struct Group
{
	const char *name;
	int			n;
	int			pids[64];
	ProcStat	before[64];
	ProcStat	after[64];
} Group;

static void
group_read(Group *g, bool after)
{
	int			i;

	for (i = 0; i < g->n; i++)
		if (!read_proc(g->pids[i], after ? &g->after[i] : &g->before[i]))
			die("cannot read /proc/%d (%s)", g->pids[i], g->name);
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
mode_pool(int ntopics, int rows_per_topic, int slots, int service_ms, int nconns,
		  int max_rows, int idle_seconds, int settle_seconds)
{
	PGconn	   *m = connect_as("topics monitor");
	PGconn	  **conns = xcalloc(nconns, sizeof(PGconn *));
	pthread_t  *th = xcalloc(nconns, sizeof(pthread_t));
	pthread_t	consumer;
	char		v[64];
	double		makespan_s,
				ideal_s;
	Group		disp = {.name = "dispatchers"},
				worker = {.name = "worker"},
				listener = {.name = "listener"};
	char		sql[256];
	char		wait_s[32];
	int64_t		t0,
				t1;
	int			early = 0;
	int			i;

	memset(&P, 0, sizeof(P));
	P.ntopics = ntopics;
	P.rows_per_topic = rows_per_topic;
	P.slots = slots;
	P.service_ns = (int64_t) service_ms * 1000000;
	P.nconns = nconns;
	P.max_rows = max_rows;
	P.topics = topics_literal("p", ntopics);
	P.total = (int64_t) ntopics * rows_per_topic;
	P.heap = xcalloc(P.total, sizeof(Row));
	P.done = xcalloc(P.total, sizeof(Row));
	P.busy = xcalloc(ntopics, sizeof(int));
	pthread_mutex_init(&P.mu, NULL);
	pthread_cond_init(&P.work_cv, NULL);
	pthread_cond_init(&P.timer_cv, NULL);

	run_value(m, "SELECT count(*) FROM aion_wake.outbox WHERE topic ~ '^p[0-9]+$' AND visible_after <= clock_timestamp()",
			  0, NULL, v, sizeof(v));
	if (atoll(v) != P.total)
		die("expected %lld claimable rows of topics p1..p%d, found %s", (long long) P.total, ntopics, v);

	for (i = 0; i < nconns; i++)
		conns[i] = connect_as("topics dispatcher");
	if (pthread_create(&consumer, NULL, consumer_main, NULL) != 0)
		die("pthread_create failed");
	P.t_start = P.busy_since = now_ns();
	for (i = 0; i < nconns; i++)
		if (pthread_create(&th[i], NULL, dispatcher_main, conns[i]) != 0)
			die("pthread_create failed");
	for (i = 0; i < nconns; i++)
		pthread_join(th[i], NULL);
	pthread_join(consumer, NULL);
	busy_add(0, P.t_end);

	makespan_s = (P.t_end - P.t_start) / 1e9;
	ideal_s = (double) rows_per_topic * service_ms / slots / 1000.0;
	printf("RESULT pool=run topics=%d rows=%lld slots=%d service_ms=%d conns=%d max_rows=%d "
		   "makespan_s=%.3f ideal_s=%.3f x_ideal=%.2f utilisation=%.3f bounces=%lld "
		   "claims=%lld empty_claims=%lld blocking_claims=%lld rows_per_claim=%.1f "
		   "completes=%lld rows_per_complete=%.1f rows_per_s=%.0f\n",
		   ntopics, (long long) P.total, slots, service_ms, nconns, max_rows,
		   makespan_s, ideal_s, makespan_s / ideal_s,
		   P.busy_slot_ns / ((double) ntopics * slots * (P.t_end - P.t_start)),
		   P.bounces, P.n_claims, P.n_empty_claims, P.n_blocking_claims,
		   P.n_claims > P.n_empty_claims ? (double) P.claimed / (P.n_claims - P.n_empty_claims) : 0.0,
		   P.n_completes, P.n_completes ? (double) P.total / P.n_completes : 0.0,
		   P.total / makespan_s);
	run_value(m, "SELECT count(*) FROM aion_wake.outbox WHERE topic ~ '^p[0-9]+$'", 0, NULL, v, sizeof(v));
	if (atoll(v) != 0)
		die("%s rows of the pool's topics are left", v);

	/* idle: every dispatcher connection blocks with nothing to claim */
	snprintf(wait_s, sizeof(wait_s), "%d s", idle_seconds + settle_seconds + 60);
	snprintf(sql, sizeof(sql),
			 "SELECT dispatch_key FROM aion_wake.claim($1::text[], %d, '60 s', '%s')", max_rows, wait_s);
	for (i = 0; i < nconns; i++)
	{
		const char *params[1] = {P.topics};

		if (!PQsendQueryParams(conns[i], sql, 1, NULL, params, NULL, NULL, 0))
			die("send failed: %s", PQerrorMessage(conns[i]));
		disp.pids[disp.n++] = PQbackendPID(conns[i]);
	}
	{
		char		nbuf[16];
		const char *params[1] = {nbuf};
		int64_t		deadline = now_ns() + 30LL * 1000000000;

		snprintf(nbuf, sizeof(nbuf), "%d", nconns);
		while (!run_bool(m,
						 "SELECT (SELECT waiters FROM aion_wake.status) = $1::int "
						 "   AND (SELECT count(*) FROM pg_stat_activity "
						 "         WHERE application_name = 'topics dispatcher' AND state = 'active' "
						 "           AND wait_event_type = 'Extension') = $1::int",
						 1, params))
		{
			if (now_ns() > deadline)
				die("the %d dispatcher connections never all blocked", nconns);
			sleep_ns(10000000);
		}
	}
	run_value(m, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'",
			  0, NULL, v, sizeof(v));
	worker.pids[worker.n++] = atoi(v);
	run_value(m, "SELECT pid FROM pg_stat_activity WHERE application_name = 'aion_wake listener'",
			  0, NULL, v, sizeof(v));
	if (atoi(v) > 0)
		listener.pids[listener.n++] = atoi(v);
	fprintf(stderr, "idle: %d dispatcher connections blocked on %d topics; settling %d s, measuring %d s\n",
			nconns, ntopics, settle_seconds, idle_seconds);
	sleep_ns((int64_t) settle_seconds * 1000000000);
	group_read(&disp, false);
	group_read(&worker, false);
	group_read(&listener, false);
	t0 = now_ns();
	sleep_ns((int64_t) idle_seconds * 1000000000);	/* the measurement window */
	group_read(&disp, true);
	group_read(&worker, true);
	group_read(&listener, true);
	t1 = now_ns();
	for (i = 0; i < nconns; i++)
	{
		struct pollfd pfd = {.fd = PQsocket(conns[i]),.events = POLLIN};

		if (poll(&pfd, 1, 0) > 0)
		{
			PQconsumeInput(conns[i]);
			if (!PQisBusy(conns[i]))
				early++;
		}
	}
	group_report(&disp, (t1 - t0) / 1e9);
	group_report(&worker, (t1 - t0) / 1e9);
	group_report(&listener, (t1 - t0) / 1e9);
	printf("RESULT check=idle returned_early=%d\n", early);

	for (i = 0; i < nconns; i++)
	{
		PGcancel   *cn = PQgetCancel(conns[i]);
		char		err[256];
		PGresult   *res;

		if (cn == NULL || !PQcancel(cn, err, sizeof(err)))
			die("cancel failed: %s", err);
		PQfreeCancel(cn);
		while ((res = PQgetResult(conns[i])) != NULL)
			PQclear(res);
		PQfinish(conns[i]);
	}
	PQfinish(m);
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 7 && strcmp(argv[1], "latency") == 0)
		mode_latency(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), argv[6]);
	else if (argc >= 4 && strcmp(argv[1], "probe") == 0)
		mode_probe(atoi(argv[2]), atoi(argv[3]));
	else if (argc >= 10 && strcmp(argv[1], "pool") == 0)
		mode_pool(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
				  atoi(argv[6]), atoi(argv[7]), atoi(argv[8]), atoi(argv[9]));
	else
	{
		fprintf(stderr,
				"usage: %s latency NAME one|many TOPICS SAMPLES FILE\n"
				"       %s probe TOPICS CALLS\n"
				"       %s pool TOPICS ROWS SLOTS SERVICE_MS CONNS MAX_ROWS IDLE_SECONDS SETTLE_SECONDS\n",
				progname, progname, progname);
		return 2;
	}
	return 0;
}
