/*
 * bench/rates/rates.c -- the probes of bench/rates/run.sh (issue 24:
 * rates and pauses, version 1.2).  Three modes, each printing "RESULT
 * key=value ..." lines on stdout:
 *
 *   window CONNINFO SECONDS CSV TOPIC:CLAIMERS:MAX_STARTS:PER_MS ...
 *       Topics whose rate run.sh has set (set_rate(TOPIC, MAX_STARTS,
 *       PER)) and whose backlog it has enqueued, side by side, for SECONDS
 *       from the first start.  Each of CLAIMERS connections per topic
 *       loops: a blocking claim(TOPIC, 1, '1 hour', '90 s'), then
 *       complete(key, token).  The start of each row is its lease's start
 *       on the server's clock, leased_until - lease.  Per topic:
 *         - starts: the starts in [first, first + SECONDS) against
 *           SECONDS x MAX_STARTS / PER (no under-admission);
 *         - most_in_window: the most starts in any window [s, s + PER) of
 *           the lease starts (G10: never more than MAX_STARTS);
 *         - wake: for every start j after the first MAX_STARTS, the
 *           moment the window admits it is start j - MAX_STARTS + PER;
 *           its delay is start j - that moment.  Counted when its claimer
 *           had sent its claim by the moment (it was waiting; otherwise the
 *           claimer, not the wake, was late).
 *       CSV gets one line per start: topic, start_us, delay_us, waiting.
 *
 *   idle CONNINFO TOPIC WAITERS SETTLE_S IDLE_S
 *       run.sh has set TOPIC's rate to one start per PER (longer than
 *       SETTLE_S + IDLE_S + 5 s) and enqueued rows.  One claim takes the
 *       start the window has; WAITERS connections then block in a claim
 *       of TOPIC, held back by the rate alone.  After SETTLE_S seconds,
 *       the CPU (utime + stime, /proc/PID/stat), time on CPU (schedstat)
 *       and context switches of the waiters' backends and of the worker
 *       are read over IDLE_S seconds; then the wake of one waiter at the
 *       end of the window is timed as above.
 *
 *   partner CONNINFO MODE ROWS THREADS LIMIT PER_MS SERVICE_MS CSV
 *       A partner that refuses above its rate: at most LIMIT calls
 *       accepted in any PER_MS (sliding, at the moment of the call); a
 *       call over it is answered 429 with Retry-After (the moment the
 *       oldest accepted call leaves its window, in milliseconds, rounded
 *       up); an accepted call takes SERVICE_MS.  THREADS dispatchers
 *       deliver ROWS rows of topic 'partner', each statement a
 *       transaction of its own:
 *         blocking claim('partner', 1, '30 s', '1 s'); on 200,
 *         complete(key, token, next_rows => 1), whose row is offered at
 *         once; on 429,
 *           park   park(key, retry_after, token)      (today's wiring)
 *           pause  BEGIN; park(key, retry_after, token);
 *                  pause('partner', now() + retry_after); COMMIT
 *           rate   (run.sh has run set_rate('partner', LIMIT, PER)) the
 *                  same as park -- it should not happen
 *       CSV gets one line per answer: t_ms since the start, code, the
 *       row's lease start (server clock, us) and the call's moment (the
 *       same clock: client and server share the machine).
 *
 * Build: gcc -O2 -Wall -Wextra -Werror -pthread -I$(pg_config --includedir)
 *        rates.c -L$(pg_config --libdir) -lpq -o rates
 */
#define _GNU_SOURCE
#include <errno.h>
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

static const char *progname = "rates";

#include "../bench_client.h"

static const char *conninfo;

static int64_t
real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static PGconn *
connect_as(const char *appname)
{
	const char *keys[] = {"dbname", "application_name", NULL};
	const char *vals[] = {conninfo, appname, NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	return conn;
}

static void
prepare(PGconn *conn, const char *name, const char *sql)
{
	PGresult   *res = PQprepare(conn, name, sql, 0, NULL);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		die("prepare %s failed: %s", name, PQerrorMessage(conn));
	PQclear(res);
}

static PGresult *
exec_prepared(PGconn *conn, const char *name, int n, const char *const *params)
{
	return PQexecPrepared(conn, name, n, params, NULL, NULL, 0);
}

static void
cmd(PGconn *conn, const char *sql)
{
	PQclear(run(conn, PGRES_COMMAND_OK, sql, 0, NULL));
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/* ------------------------------------------------------------------------
 * /proc
 * ------------------------------------------------------------------------
 */

typedef struct ProcStat
{
	long long	ticks;			/* utime + stime */
	long long	run_ns;			/* schedstat: time on CPU */
	long long	ctxsw;			/* voluntary + involuntary */
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
	if ((p = strrchr(buf, ')')) == NULL)
		return false;
	/* 3 state ... 14 utime, 15 stime */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			   &utime, &stime) != 2)
		return false;
	ps->ticks = (long long) (utime + stime);
	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	if ((f = fopen(path, "r")) != NULL)
	{
		if (fscanf(f, "%lld", &ps->run_ns) != 1)
			ps->run_ns = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r")) != NULL)
	{
		char		line[256];
		long long	v;

		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
				sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
				ps->ctxsw += v;
		fclose(f);
	}
	return true;
}

/* ------------------------------------------------------------------------
 * window: no under-admission, wake precision, G10
 * ------------------------------------------------------------------------
 */

typedef struct Start
{
	int64_t		start_us;		/* lease start, server clock */
	int64_t		sent_us;		/* when the claim was sent, client clock */
} Start;

typedef struct WTopic
{
	char		name[64];
	int			claimers;
	int			max_starts;
	int64_t		per_us;
	pthread_mutex_t mu;
	Start	   *starts;
	int			n,
				cap;
} WTopic;

typedef struct WClaimer
{
	WTopic	   *topic;
	PGconn	   *conn;
	PGcancel   *cancel;
	pthread_t	th;
	volatile bool done;
} WClaimer;

static volatile bool w_stop = false;

static void *
w_claimer_main(void *arg)
{
	WClaimer   *c = arg;
	const char *cparams[1] = {c->topic->name};

	while (!w_stop)
	{
		int64_t		sent = real_us();
		PGresult   *res = exec_prepared(c->conn, "claim", 1, cparams);

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			if (w_stop)
			{
				PQclear(res);
				break;
			}
			die("claim of %s failed: %s", c->topic->name, PQerrorMessage(c->conn));
		}
		if (PQntuples(res) == 1)
		{
			const char *p[2] = {PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1)};
			Start		s = {.start_us = atoll(PQgetvalue(res, 0, 2)),.sent_us = sent};
			PGresult   *r2;

			pthread_mutex_lock(&c->topic->mu);
			if (c->topic->n == c->topic->cap)
			{
				c->topic->cap = c->topic->cap ? 2 * c->topic->cap : 4096;
				c->topic->starts = realloc(c->topic->starts, sizeof(Start) * c->topic->cap);
				if (c->topic->starts == NULL)
					die("out of memory");
			}
			c->topic->starts[c->topic->n++] = s;
			pthread_mutex_unlock(&c->topic->mu);
			r2 = exec_prepared(c->conn, "complete", 2, p);
			if (PQresultStatus(r2) != PGRES_TUPLES_OK && !w_stop)
				die("complete failed: %s", PQerrorMessage(c->conn));
			PQclear(r2);
		}
		PQclear(res);
	}
	c->done = true;
	return NULL;
}

static int
cmp_start(const void *a, const void *b)
{
	return cmp_i64(&((const Start *) a)->start_us, &((const Start *) b)->start_us);
}

static void
print_pcts(const char *what, int64_t *v, int n)
{
	double	   *d = malloc(sizeof(double) * (n > 0 ? n : 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = v[i] / 1000.0;
	qsort(d, n, sizeof(double), cmp_double);
	if (n == 0)
		printf(" %s_n=0", what);
	else
		printf(" %s_n=%d %s_min_ms=%.3f %s_p50_ms=%.3f %s_p95_ms=%.3f %s_p99_ms=%.3f %s_max_ms=%.3f",
			   what, n, what, d[0], what, pct(d, n, 0.5), what, pct(d, n, 0.95),
			   what, pct(d, n, 0.99), what, d[n - 1]);
	free(d);
}

static void
mode_window(int seconds, const char *csv, int ntopics, char **specs)
{
	WTopic	   *topics = calloc(ntopics, sizeof(WTopic));
	WClaimer   *cl;
	int			nclaimers = 0;
	int			i,
				j,
				k;
	int64_t		t_end;
	FILE	   *out;
	int64_t	   *all_delays;
	int			nall = 0;

	for (i = 0; i < ntopics; i++)
	{
		char	   *s = strdup(specs[i]);
		char	   *a = strtok(s, ":"),
				   *b = strtok(NULL, ":"),
				   *c = strtok(NULL, ":"),
				   *d = strtok(NULL, ":");

		if (!a || !b || !c || !d)
			die("bad topic spec %s (TOPIC:CLAIMERS:MAX_STARTS:PER_MS)", specs[i]);
		snprintf(topics[i].name, sizeof(topics[i].name), "%s", a);
		topics[i].claimers = atoi(b);
		topics[i].max_starts = atoi(c);
		topics[i].per_us = atoll(d) * 1000;
		pthread_mutex_init(&topics[i].mu, NULL);
		nclaimers += topics[i].claimers;
		free(s);
	}
	cl = calloc(nclaimers, sizeof(WClaimer));
	for (i = 0, k = 0; i < ntopics; i++)
		for (j = 0; j < topics[i].claimers; j++, k++)
		{
			char		app[96];

			snprintf(app, sizeof(app), "rates claimer %s", topics[i].name);
			cl[k].topic = &topics[i];
			cl[k].conn = connect_as(app);
			cl[k].cancel = PQgetCancel(cl[k].conn);
			prepare(cl[k].conn, "claim",
					"SELECT dispatch_key, lease_token, "
					"       (extract(epoch FROM leased_until - interval '1 hour') * 1000000)::int8 "
					"  FROM aion_wake.claim($1, 1, '1 hour', '90 s')");
			prepare(cl[k].conn, "complete", "SELECT aion_wake.complete($1, $2::int8)");
		}
	fprintf(stderr, "window: %d topics, %d claimers, %d s from the first start\n",
			ntopics, nclaimers, seconds);
	for (k = 0; k < nclaimers; k++)
		if (pthread_create(&cl[k].th, NULL, w_claimer_main, &cl[k]) != 0)
			die("pthread_create failed");
	/* the run: SECONDS from now (the first starts come at once), plus 1 s */
	t_end = now_ns() + ((int64_t) seconds + 1) * 1000000000;
	while (now_ns() < t_end)
		sleep_ns(100000000);
	w_stop = true;
	for (;;)
	{
		bool		all = true;
		char		err[256];

		for (k = 0; k < nclaimers; k++)
			if (!cl[k].done)
			{
				all = false;
				(void) PQcancel(cl[k].cancel, err, sizeof(err));
			}
		if (all)
			break;
		sleep_ns(100000000);
	}
	for (k = 0; k < nclaimers; k++)
	{
		pthread_join(cl[k].th, NULL);
		PQfreeCancel(cl[k].cancel);
		PQfinish(cl[k].conn);
	}

	if ((out = fopen(csv, "w")) == NULL)
		die("cannot write %s", csv);
	fprintf(out, "topic,start_us,delay_us,waiting\n");
	all_delays = malloc(sizeof(int64_t) * 1);
	for (i = 0; i < ntopics; i++)
	{
		WTopic	   *t = &topics[i];
		int			n_in = 0,
					most = 0,
					lo = 0,
					nd = 0,
					busy = 0;
		int64_t	   *delays;
		int64_t		first;
		double		expected;
		double		period_sum = 0;
		int			nperiod = 0;

		if (t->n == 0)
			die("topic %s: no start at all", t->name);
		qsort(t->starts, t->n, sizeof(Start), cmp_start);
		first = t->starts[0].start_us;
		delays = malloc(sizeof(int64_t) * t->n);
		all_delays = realloc(all_delays, sizeof(int64_t) * (nall + t->n));
		for (j = 0; j < t->n; j++)
		{
			int64_t		s = t->starts[j].start_us;
			bool		inrun = s < first + (int64_t) seconds * 1000000;

			if (inrun)
				n_in++;
			while (s - t->starts[lo].start_us >= t->per_us)
				lo++;
			if (j - lo + 1 > most)
				most = j - lo + 1;
			if (j >= t->max_starts && inrun)
			{
				int64_t		moment = t->starts[j - t->max_starts].start_us + t->per_us;
				int64_t		delay = s - moment;
				bool		waiting = t->starts[j].sent_us <= moment;

				period_sum += s - t->starts[j - t->max_starts].start_us;
				nperiod++;
				fprintf(out, "%s,%lld,%lld,%d\n", t->name, (long long) s, (long long) delay,
						waiting);
				if (waiting)
				{
					delays[nd++] = delay;
					all_delays[nall++] = delay;
				}
				else
					busy++;
			}
			else if (inrun)
				fprintf(out, "%s,%lld,,\n", t->name, (long long) s);
		}
		expected = (double) seconds * 1e6 * t->max_starts / t->per_us;
		printf("RESULT window=%s max_starts=%d per_ms=%lld claimers=%d seconds=%d starts=%d expected=%.0f "
			   "ratio=%.4f most_in_window=%d starts_total=%d mean_period_ms=%.3f wakes_claimer_busy=%d",
			   t->name, t->max_starts, (long long) (t->per_us / 1000), t->claimers, seconds,
			   n_in, expected, n_in / expected, most, t->n,
			   nperiod ? period_sum / nperiod / 1000.0 : 0.0, busy);
		print_pcts("wake", delays, nd);
		printf("\n");
		free(delays);
	}
	printf("RESULT window=all");
	print_pcts("wake", all_delays, nall);
	printf("\n");
	fclose(out);
}

/* ------------------------------------------------------------------------
 * idle: no polling between admissions
 * ------------------------------------------------------------------------
 */

static void
mode_idle(const char *topic, int nwaiters, int settle_s, int idle_s)
{
	PGconn	   *m = connect_as("rates idle monitor");
	PGconn	  **w = calloc(nwaiters, sizeof(PGconn *));
	int		   *pids = calloc(nwaiters + 2, sizeof(int));
	ProcStat   *before = calloc(nwaiters + 2, sizeof(ProcStat));
	ProcStat   *after = calloc(nwaiters + 2, sizeof(ProcStat));
	const char *params[2];
	char		sql[512];
	char		v[64];
	char		wakes[1024] = "";
	size_t		wlen = 0;
	int64_t		first_us,
				per_us,
				next_at_us,
				t0;
	int			nprocs,
				i,
				early = 0,
				winner = -1;
	long long	wt = 0,
				wr = 0,
				wc = 0;
	long		hz = sysconf(_SC_CLK_TCK);

	params[0] = topic;
	run_value(m, "SELECT (extract(epoch FROM per) * 1000000)::int8 FROM aion_wake.rates WHERE topic = $1",
			  1, params, v, sizeof(v));
	per_us = atoll(v);
	for (i = 0; i < nwaiters; i++)
		w[i] = connect_as("rates idle waiter");
	/* warm the monitor's plans (a first claim in a backend plans its
	 * statements, which would widen the gap between its lease start and
	 * the start logged after it) */
	PQclear(run(m, PGRES_TUPLES_OK,
				"SELECT aion_wake.complete(dispatch_key, lease_token) "
				"  FROM aion_wake.claim('idle-warm', 1, '1 hour')", 0, NULL));
	/* the start the window has */
	run_value(m, "SELECT (extract(epoch FROM leased_until - interval '1 hour') * 1000000)::int8 "
			  "  FROM aion_wake.claim($1, 1, '1 hour')", 1, params, v, sizeof(v));
	if (v[0] == '\0')
		die("idle: the first claim took nothing");
	first_us = atoll(v);
	snprintf(sql, sizeof(sql),
			 "SELECT (extract(epoch FROM leased_until - interval '1 hour') * 1000000)::int8 "
			 "  FROM aion_wake.claim('%s', 1, '1 hour', '%lld s')", topic,
			 (long long) (per_us / 1000000 + 60));
	for (i = 0; i < nwaiters; i++)
	{
		if (!PQsendQuery(w[i], sql))
			die("send failed: %s", PQerrorMessage(w[i]));
		pids[i] = PQbackendPID(w[i]);
	}
	/* all blocked */
	snprintf(v, sizeof(v), "%d", nwaiters);
	params[1] = v;
	{
		int64_t		deadline = now_ns() + 20LL * 1000000000;

		while (!run_bool(m,
						 "SELECT coalesce((SELECT waiters FROM aion_wake.topics WHERE topic = $1), 0) = $2::int "
						 "   AND (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rates idle waiter' "
						 "         AND state = 'active' AND wait_event_type = 'Extension') = $2::int",
						 2, params))
		{
			if (now_ns() > deadline)
				die("idle: the %d waiters never all blocked", nwaiters);
			sleep_ns(10000000);
		}
	}
	/* the server's own moment: the start logged after the first claim's
	 * statement, + per */
	run_value(m, "SELECT (extract(epoch FROM next_start_at) * 1000000)::int8 "
			  "  FROM aion_wake.topics WHERE topic = $1", 1, params, v, sizeof(v));
	next_at_us = atoll(v);
	run_value(m, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'aion_wake worker'",
			  0, NULL, v, sizeof(v));
	pids[nwaiters] = atoi(v);
	nprocs = nwaiters + 1;
	run_value(m, "SELECT coalesce((SELECT pid FROM pg_stat_activity WHERE application_name = 'aion_wake listener'), 0)",
			  0, NULL, v, sizeof(v));
	if (atoi(v) != 0)
		pids[nprocs++] = atoi(v);
	fprintf(stderr, "idle: %d waiters blocked on %s (worker %d); settling %d s, measuring %d s\n",
			nwaiters, topic, pids[nwaiters], settle_s, idle_s);
	sleep_ns((int64_t) settle_s * 1000000000);
	for (i = 0; i < nprocs; i++)
		if (!read_proc(pids[i], &before[i]))
			die("cannot read /proc/%d", pids[i]);
	t0 = now_ns();
	{
		long long	last = 0;
		int			sec;

		for (sec = 1; sec <= idle_s; sec++)
		{
			long long	cs = 0;
			ProcStat	ps;

			sleep_ns(t0 + (int64_t) sec * 1000000000 - now_ns());
			for (i = 0; i < nprocs; i++)
				if (read_proc(pids[i], &ps))
					cs += ps.ctxsw - before[i].ctxsw;
			if (cs != last && wlen < sizeof(wakes) - 32)
				wlen += snprintf(wakes + wlen, sizeof(wakes) - wlen, "%s+%ds:%lld",
								 wlen ? "," : "", sec, cs - last);
			last = cs;
		}
	}
	for (i = 0; i < nprocs; i++)
		if (!read_proc(pids[i], &after[i]))
			die("cannot read /proc/%d", pids[i]);
	for (i = 0; i < nwaiters; i++)
	{
		PQconsumeInput(w[i]);
		if (!PQisBusy(w[i]))
			early++;
		wt += after[i].ticks - before[i].ticks;
		wr += after[i].run_ns - before[i].run_ns;
		wc += after[i].ctxsw - before[i].ctxsw;
	}
	printf("RESULT idle=waiters procs=%d seconds=%d ticks=%lld hz=%ld run_ms=%.3f ctxsw=%lld returned_early=%d\n",
		   nwaiters, idle_s, wt, hz, wr / 1e6, wc, early);
	printf("RESULT idle=worker procs=1 seconds=%d ticks=%lld hz=%ld run_ms=%.3f ctxsw=%lld\n",
		   idle_s, after[nwaiters].ticks - before[nwaiters].ticks, hz,
		   (after[nwaiters].run_ns - before[nwaiters].run_ns) / 1e6,
		   after[nwaiters].ctxsw - before[nwaiters].ctxsw);
	if (nprocs > nwaiters + 1)
		printf("RESULT idle=listener procs=1 seconds=%d ticks=%lld hz=%ld run_ms=%.3f ctxsw=%lld\n",
			   idle_s, after[nwaiters + 1].ticks - before[nwaiters + 1].ticks, hz,
			   (after[nwaiters + 1].run_ns - before[nwaiters + 1].run_ns) / 1e6,
			   after[nwaiters + 1].ctxsw - before[nwaiters + 1].ctxsw);
	printf("RESULT idle=check context_switches_by_second=%s\n", wakes[0] ? wakes : "none");

	/* the wake at the window's end: exactly one waiter returns, with a row */
	{
		int64_t		deadline = now_ns() + (per_us + 30000000) * 1000;
		int64_t		got = 0;

		while (winner < 0 && now_ns() < deadline)
		{
			for (i = 0; i < nwaiters && winner < 0; i++)
			{
				PQconsumeInput(w[i]);
				if (!PQisBusy(w[i]))
				{
					PGresult   *res = PQgetResult(w[i]);

					if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
						die("idle: waiter %d returned without a row: %s", i, PQerrorMessage(w[i]));
					got = atoll(PQgetvalue(res, 0, 0));
					PQclear(res);
					while ((res = PQgetResult(w[i])) != NULL)
						PQclear(res);
					winner = i;
				}
			}
			if (winner < 0)
				sleep_ns(1000000);
		}
		if (winner < 0)
			die("idle: no waiter returned at the window's end");
		/* the others stay blocked a little longer: one waiter per start */
		sleep_ns(300000000);
		for (i = 0; i < nwaiters; i++)
		{
			PQconsumeInput(w[i]);
			if (i != winner && !PQisBusy(w[i]))
				early++;
		}
		printf("RESULT idle=wake per_s=%.1f delay_ms=%.3f after_next_start_at_ms=%.3f others_returned=%d\n",
			   per_us / 1e6, (got - (first_us + per_us)) / 1000.0, (got - next_at_us) / 1000.0, early);
	}
	for (i = 0; i < nwaiters; i++)
	{
		char		err[256];
		PGcancel   *cn = PQgetCancel(w[i]);
		PGresult   *res;

		if (i != winner)
		{
			(void) PQcancel(cn, err, sizeof(err));
			while ((res = PQgetResult(w[i])) != NULL)
				PQclear(res);
		}
		PQfreeCancel(cn);
		PQfinish(w[i]);
	}
	PQfinish(m);
}

/* ------------------------------------------------------------------------
 * partner: a partner that refuses above its rate, three wirings
 * ------------------------------------------------------------------------
 */

enum
{
	P_PARK,
	P_PAUSE,
	P_RATE
};

static int	p_mode;
static int	p_rows;
static int	p_limit;
static int64_t p_per_ns;
static int	p_service_ms;
static pthread_mutex_t p_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t *p_ring;			/* accepted calls, the last p_limit */
static int	p_head,
			p_count;
static int	p_delivered,
			p_refused;
static int64_t p_t0;
static int64_t p_last_done;
static FILE *p_csv;
static int	p_lost;

/* A call: 0 when accepted (its service then takes SERVICE_MS), else the
 * Retry-After in ms. */
static int
partner_call(int64_t lease_start_us)
{
	int64_t		now;
	int			retry = 0;

	pthread_mutex_lock(&p_mu);
	now = now_ns();
	if (p_count == p_limit && now - p_ring[p_head] < p_per_ns)
		retry = (int) ((p_ring[p_head] + p_per_ns - now + 999999) / 1000000);
	else
	{
		if (p_count == p_limit)
			p_head = (p_head + 1) % p_limit;
		else
			p_count++;
		p_ring[(p_head + p_count - 1) % p_limit] = now;
	}
	if (retry)
		p_refused++;
	fprintf(p_csv, "%.3f,%d,%lld,%lld\n", (now - p_t0) / 1e6, retry ? 429 : 200,
			(long long) lease_start_us, (long long) real_us());
	pthread_mutex_unlock(&p_mu);
	if (retry == 0)
	{
		sleep_ns((int64_t) p_service_ms * 1000000);
		pthread_mutex_lock(&p_mu);
		p_delivered++;
		if (now_ns() > p_last_done)
			p_last_done = now_ns();
		pthread_mutex_unlock(&p_mu);
	}
	return retry;
}

static bool
p_all_done(void)
{
	bool		done;

	pthread_mutex_lock(&p_mu);
	done = p_delivered >= p_rows;
	pthread_mutex_unlock(&p_mu);
	return done;
}

typedef struct PRow
{
	char		key[128];
	char		token[32];
	int64_t		start_us;
	bool		have;
} PRow;

static void
p_take(PGresult *res, PRow *row)
{
	row->have = PQntuples(res) == 1;
	if (row->have)
	{
		snprintf(row->key, sizeof(row->key), "%s", PQgetvalue(res, 0, 0));
		snprintf(row->token, sizeof(row->token), "%s", PQgetvalue(res, 0, 1));
		row->start_us = atoll(PQgetvalue(res, 0, 2));
	}
}

static void *
p_thread(void *arg)
{
	PGconn	   *conn = connect_as("rates partner dispatcher");
	PRow		row = {.have = false};
	const char *cp[1] = {"partner"};

	(void) arg;
	prepare(conn, "claim",
			"SELECT dispatch_key, lease_token, "
			"       (extract(epoch FROM leased_until - interval '30 s') * 1000000)::int8 "
			"  FROM aion_wake.claim($1, 1, '30 s', '1 s')");
	prepare(conn, "complete_next",
			"SELECT dispatch_key, lease_token, "
			"       (extract(epoch FROM leased_until - interval '30 s') * 1000000)::int8 "
			"  FROM aion_wake.complete($1, $2::int8, next_rows => 1, lease => '30 s')");
	prepare(conn, "park", "SELECT aion_wake.park($1, $2::interval, $3::int8)");
	prepare(conn, "pause", "SELECT aion_wake.pause('partner', now() + $1::interval)");
	while (!p_all_done())
	{
		int			retry;
		PGresult   *res;

		if (!row.have)
		{
			res = exec_prepared(conn, "claim", 1, cp);
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
				die("claim failed: %s", PQerrorMessage(conn));
			p_take(res, &row);
			PQclear(res);
			if (!row.have)
				continue;
		}
		retry = partner_call(row.start_us);
		if (retry == 0)
		{
			const char *p[2] = {row.key, row.token};

			res = exec_prepared(conn, "complete_next", 2, p);
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
				die("complete failed: %s", PQerrorMessage(conn));
			p_take(res, &row);
			PQclear(res);
		}
		else
		{
			char		backoff[32];
			const char *p[3] = {row.key, backoff, row.token};

			snprintf(backoff, sizeof(backoff), "%d ms", retry);
			if (p_mode == P_PAUSE)
				cmd(conn, "BEGIN");
			res = exec_prepared(conn, "park", 3, p);
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
				die("park failed: %s", PQerrorMessage(conn));
			if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
			{
				pthread_mutex_lock(&p_mu);
				p_lost++;
				pthread_mutex_unlock(&p_mu);
			}
			PQclear(res);
			if (p_mode == P_PAUSE)
			{
				const char *pp[1] = {backoff};

				res = exec_prepared(conn, "pause", 1, pp);
				if (PQresultStatus(res) != PGRES_TUPLES_OK)
					die("pause failed: %s", PQerrorMessage(conn));
				PQclear(res);
				cmd(conn, "COMMIT");
			}
			row.have = false;
		}
	}
	PQfinish(conn);
	return NULL;
}

static void
mode_partner(const char *mode, int rows, int threads, int limit, int per_ms, int service_ms,
			 const char *csv)
{
	pthread_t  *th = calloc(threads, sizeof(pthread_t));
	int			i;

	if (strcmp(mode, "park") == 0)
		p_mode = P_PARK;
	else if (strcmp(mode, "pause") == 0)
		p_mode = P_PAUSE;
	else if (strcmp(mode, "rate") == 0)
		p_mode = P_RATE;
	else
		die("unknown partner mode %s", mode);
	p_rows = rows;
	p_limit = limit;
	p_per_ns = (int64_t) per_ms * 1000000;
	p_service_ms = service_ms;
	p_ring = calloc(limit, sizeof(int64_t));
	if ((p_csv = fopen(csv, "w")) == NULL)
		die("cannot write %s", csv);
	fprintf(p_csv, "t_ms,code,lease_start_us,call_us\n");
	p_t0 = now_ns();
	for (i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, p_thread, NULL) != 0)
			die("pthread_create failed");
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	fclose(p_csv);
	printf("RESULT partner=%s rows=%d delivered=%d threads=%d limit=%d per_ms=%d service_ms=%d "
		   "makespan_ms=%.1f ideal_ms=%.0f x_ideal=%.4f refusals=%d lost_leases=%d\n",
		   mode, rows, p_delivered, threads, limit, per_ms, service_ms,
		   (p_last_done - p_t0) / 1e6, (double) rows * per_ms / limit,
		   (p_last_done - p_t0) / 1e6 / ((double) rows * per_ms / limit), p_refused, p_lost);
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 6 && strcmp(argv[1], "window") == 0)
	{
		conninfo = argv[2];
		mode_window(atoi(argv[3]), argv[4], argc - 5, argv + 5);
	}
	else if (argc == 7 && strcmp(argv[1], "idle") == 0)
	{
		conninfo = argv[2];
		mode_idle(argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
	}
	else if (argc == 10 && strcmp(argv[1], "partner") == 0)
	{
		conninfo = argv[2];
		mode_partner(argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]),
					 atoi(argv[8]), argv[9]);
	}
	else
	{
		fprintf(stderr,
				"usage: %s window CONNINFO SECONDS CSV TOPIC:CLAIMERS:MAX_STARTS:PER_MS ...\n"
				"       %s idle CONNINFO TOPIC WAITERS SETTLE_S IDLE_S\n"
				"       %s partner CONNINFO park|pause|rate ROWS THREADS LIMIT PER_MS SERVICE_MS CSV\n",
				progname, progname, progname);
		return 2;
	}
	return 0;
}
