/*-------------------------------------------------------------------------
 *
 * handoff.c
 *	  Freed slot -> next call starts: how long a dispatcher whose consumer
 *	  slot just freed waits until a row is in a dispatcher's hands again,
 *	  for each way aion_wake 1.1 can refill the slot (issues 14 and 17).
 *
 *	  Every time is the client's CLOCK_MONOTONIC.  A sample starts when the
 *	  first statement after the freed slot is sent ("send") -- the moment
 *	  the slot freed, in a dispatcher that settles at once -- and ends when
 *	  a dispatcher holds the next row.  For the paths that end in another
 *	  connection's blocked claim, the time from the settling statement's
 *	  return ("return": its client knows its commit is done) is given too.
 *
 *	  settle_take        B: complete(carrier, token, next_rows => 1) on an
 *	                     unlimited topic with confirmed parks: the settle,
 *	                     and the oldest park claimed straight from its fence,
 *	                     in one statement and one commit.  Ends when B has
 *	                     the row.
 *	  settle_take_limit  the same on a topic limited to 1 with visible rows:
 *	                     the slot passes from the settled lease to the new
 *	                     one.
 *	  pulse_claimer      A blocks in claim(topic, 1, '30 s', '5 s') (asleep
 *	                     in pg_stat_activity); B: complete(carrier, token)
 *	                     and pulse(topic, 1) in one statement.  The pulse is
 *	                     handed to A, which spends it inside its claim (the
 *	                     oldest park claimed from its fence, one
 *	                     transaction).  Two commits in series.  Ends when
 *	                     A's claim returns.
 *	  three_commit       the 1.0 path, three commits in series: A blocks as
 *	                     above; B: complete(carrier, token) (commit 1);
 *	                     B: reoffer(topic, 1) (commit 2: the park's fence
 *	                     pulled forward, which wakes A); A's claim takes the
 *	                     row (commit 3).  Under 1.0 the re-offer was done by
 *	                     the claimer woken by the pulse (or the worker); here
 *	                     B does it, one client round trip instead of a
 *	                     process wake-up.
 *	  release_claimer    a topic limited to 1, full (B holds its one lease),
 *	                     rows visible: A blocks in claim(wait); B:
 *	                     complete(carrier, token), whose commit releases the
 *	                     slot and wakes A, which claims.  Ends when A's claim
 *	                     returns.
 *
 *	  The row that ends a sample is the next sample's carrier.  Each
 *	  scenario has a topic and connections of its own, with samples + 1
 *	  rows (parked with a one-hour back-off for the scenarios that take
 *	  parks).  The scenarios run interleaved, sample 1 of each, then sample
 *	  2 of each, ..., so that a change in the machine's load (this machine
 *	  is shared) hits them alike.  For each it prints one line:
 *	    RESULT name=... n=... p50=... p90=... p99=... max=... [ret_p50=... ret_p99=...]
 *	  (ms), and writes the sorted latencies to OUTDIR/NAME.dat.
 *
 *	  Build: gcc -O2 -Wall -Wextra -Werror -pthread -I$(pg_config --includedir)
 *	         handoff.c -L$(pg_config --libdir) -lpq -o handoff
 *	  Run:   handoff CONNINFO SAMPLES OUTDIR [SCENARIO ...]
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  bench/handoff/handoff.c
 *
 *-------------------------------------------------------------------------
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

typedef struct Claimer
{
	PGconn	   *conn;
	const char *topic;
	char		key[300];
	char		token[32];
	int64_t		returned_at;
} Claimer;

static const char *const scenarios[] = {
	"settle_take", "settle_take_limit", "pulse_claimer", "three_commit",
	"release_claimer"
};
#define NUM_SCENARIOS 5

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static PGconn *
connect_db(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "handoff: connection failed: %s", PQerrorMessage(conn));
		exit(1);
	}
	return conn;
}

static PGresult *
exec_params(PGconn *conn, const char *sql, int n, const char *const *params)
{
	PGresult   *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK &&
		PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "handoff: %s: %s", sql, PQerrorMessage(conn));
		exit(1);
	}
	return res;
}

static void
exec_void(PGconn *conn, const char *sql, int n, const char *const *params)
{
	PQclear(exec_params(conn, sql, n, params));
}

/* Copy the first row's key and token out of res, which must have one row. */
static void
take_row(PGresult *res, const char *what, char *key, size_t keylen, char *token, size_t toklen)
{
	if (PQntuples(res) != 1)
	{
		fprintf(stderr, "handoff: %s returned %d rows, not 1\n", what, PQntuples(res));
		exit(1);
	}
	snprintf(key, keylen, "%s", PQgetvalue(res, 0, 0));
	snprintf(token, toklen, "%s", PQgetvalue(res, 0, 1));
}

/* The blocked claim, in a thread of its own. */
static void *
claimer_main(void *arg)
{
	Claimer    *c = (Claimer *) arg;
	const char *params[1] = {c->topic};
	PGresult   *res;

	res = exec_params(c->conn,
					  "SELECT dispatch_key, lease_token "
					  "  FROM aion_wake.claim($1, 1, '1 hour', '5 s')", 1, params);
	c->returned_at = now_us();
	take_row(res, "the blocked claim", c->key, sizeof(c->key), c->token, sizeof(c->token));
	PQclear(res);
	return NULL;
}

/* Wait until the claimer's backend sleeps in its claim (bounded: 5 s). */
static void
wait_until_asleep(PGconn *ctl, PGconn *claimer)
{
	char		pid[16];
	const char *params[1] = {pid};
	int64_t		deadline = now_us() + 5000000;
	struct timespec step = {0, 500000};

	snprintf(pid, sizeof(pid), "%d", PQbackendPID(claimer));
	while (now_us() < deadline)
	{
		PGresult   *res = exec_params(ctl,
									  "SELECT 1 FROM pg_stat_activity "
									  " WHERE pid = $1::int AND state = 'active' "
									  "   AND wait_event_type = 'Extension'",
									  1, params);
		int			asleep = PQntuples(res);

		PQclear(res);
		if (asleep)
			return;
		nanosleep(&step, NULL);
	}
	fprintf(stderr, "handoff: the claimer never went to sleep\n");
	exit(1);
}

static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

static double
pct(int64_t *v, int n, double p)
{
	int			i = (int) (p / 100.0 * (n - 1) + 0.5);

	return v[i] / 1000.0;
}

/* One scenario: its connections, its topic, the row B holds, its samples. */
typedef struct Scenario
{
	const char *name;
	bool		limited;		/* topic limited to 1 */
	bool		parks;			/* rows parked (else visible) */
	bool		blocked;		/* ends in A's blocked claim */
	PGconn	   *a;
	PGconn	   *b;
	char		topic[64];
	char		carrier[300];
	char		token[32];
	int64_t    *lat;
	int64_t    *ret;
} Scenario;

/* Connect, and make the scenario's topic: samples + 1 rows, B holding one. */
static void
scenario_setup(Scenario *sc, const char *conninfo, const char *name, int samples)
{
	char		n[16];
	const char *p1[1];
	const char *p2[2];
	PGresult   *res;
	int			i;

	sc->name = name;
	sc->limited = strcmp(name, "settle_take_limit") == 0 ||
		strcmp(name, "release_claimer") == 0;
	sc->parks = strcmp(name, "settle_take") == 0 ||
		strcmp(name, "pulse_claimer") == 0 || strcmp(name, "three_commit") == 0;
	sc->blocked = strcmp(name, "pulse_claimer") == 0 ||
		strcmp(name, "three_commit") == 0 || strcmp(name, "release_claimer") == 0;
	sc->a = connect_db(conninfo);
	sc->b = connect_db(conninfo);
	sc->lat = calloc(samples, sizeof(int64_t));
	sc->ret = calloc(samples, sizeof(int64_t));
	if (sc->lat == NULL || sc->ret == NULL)
	{
		fprintf(stderr, "handoff: out of memory\n");
		exit(1);
	}
	snprintf(sc->topic, sizeof(sc->topic), "ho_%s", name);
	snprintf(n, sizeof(n), "%d", samples + 1);
	p1[0] = sc->topic;
	p2[0] = sc->topic;
	p2[1] = n;

	exec_void(sc->b, "SELECT count(*) FROM generate_series(1, $2::int) g, "
			  "       aion_wake.enqueue($1 || '-' || pg_catalog.lpad(g::text, 6, '0'), '{}', $1)",
			  2, p2);
	if (sc->limited)
		exec_void(sc->b, "SELECT aion_wake.set_limit($1, 1)", 1, p1);
	if (!sc->parks)
		p2[1] = "1";
	res = exec_params(sc->b, "SELECT dispatch_key, lease_token "
					  "  FROM aion_wake.claim($1, $2::int, '1 hour')", 2, p2);
	snprintf(sc->carrier, sizeof(sc->carrier), "%s", PQgetvalue(res, 0, 0));
	snprintf(sc->token, sizeof(sc->token), "%s", PQgetvalue(res, 0, 1));
	for (i = 1; sc->parks && i < PQntuples(res); i++)
	{
		const char *p[2] = {PQgetvalue(res, i, 0), PQgetvalue(res, i, 1)};

		exec_void(sc->b, "SELECT aion_wake.park($1, '1 hour', $2::bigint)", 2, p);
	}
	PQclear(res);
}

/* One sample of the scenario. */
static void
scenario_sample(Scenario *sc, PGconn *ctl, int i)
{
	Claimer		claimer;
	pthread_t	th;
	int64_t		t0;
	int64_t		t_ret;
	const char *p[3] = {sc->carrier, sc->token, sc->topic};
	PGresult   *res;

	if (sc->blocked)
	{
		claimer.conn = sc->a;
		claimer.topic = sc->topic;
		if (pthread_create(&th, NULL, claimer_main, &claimer) != 0)
		{
			perror("pthread_create");
			exit(1);
		}
		wait_until_asleep(ctl, sc->a);
	}

	t0 = now_us();
	if (!sc->blocked)
	{
		res = exec_params(sc->b, "SELECT dispatch_key, lease_token "
						  "  FROM aion_wake.complete($1, $2::bigint, next_rows => 1)",
						  2, p);
		t_ret = now_us();
		take_row(res, sc->name, sc->carrier, sizeof(sc->carrier), sc->token, sizeof(sc->token));
		PQclear(res);
		sc->lat[i] = sc->ret[i] = t_ret - t0;
		return;
	}
	if (strcmp(sc->name, "pulse_claimer") == 0)
		exec_void(sc->b, "SELECT aion_wake.complete($1, $2::bigint), aion_wake.pulse($3, 1)", 3, p);
	else if (strcmp(sc->name, "three_commit") == 0)
	{
		exec_void(sc->b, "SELECT aion_wake.complete($1, $2::bigint)", 2, p);
		exec_void(sc->b, "SELECT aion_wake.reoffer($1, 1)", 1, p + 2);
	}
	else
		exec_void(sc->b, "SELECT aion_wake.complete($1, $2::bigint)", 2, p);
	t_ret = now_us();
	pthread_join(th, NULL);
	sc->lat[i] = claimer.returned_at - t0;
	sc->ret[i] = claimer.returned_at - t_ret;
	/* the row A got is the next carrier */
	memcpy(sc->carrier, claimer.key, sizeof(sc->carrier));
	memcpy(sc->token, claimer.token, sizeof(sc->token));
}

/* Print the scenario's line, write its data file, drop its limit. */
static void
scenario_finish(Scenario *sc, int samples, const char *outdir)
{
	char		path[1024];
	FILE	   *out;
	int			i;

	qsort(sc->lat, samples, sizeof(int64_t), cmp_int64);
	qsort(sc->ret, samples, sizeof(int64_t), cmp_int64);
	printf("RESULT name=%s n=%d p50=%.3f p90=%.3f p99=%.3f max=%.3f",
		   sc->name, samples, pct(sc->lat, samples, 50), pct(sc->lat, samples, 90),
		   pct(sc->lat, samples, 99), sc->lat[samples - 1] / 1000.0);
	if (sc->blocked)
		printf(" ret_p50=%.3f ret_p99=%.3f ret_min=%.3f",
			   pct(sc->ret, samples, 50), pct(sc->ret, samples, 99), sc->ret[0] / 1000.0);
	printf("\n");
	fflush(stdout);

	snprintf(path, sizeof(path), "%s/%s.dat", outdir, sc->name);
	out = fopen(path, "w");
	if (out == NULL)
	{
		perror(path);
		exit(1);
	}
	for (i = 0; i < samples; i++)
		fprintf(out, "%.3f %.4f\n", sc->lat[i] / 1000.0, (i + 1) / (double) samples);
	fclose(out);

	if (sc->limited)
		exec_void(sc->b, "SELECT aion_wake.set_limit($1, NULL)", 1,
				  (const char *const[]) {sc->topic});
	free(sc->lat);
	free(sc->ret);
	PQfinish(sc->a);
	PQfinish(sc->b);
}

int
main(int argc, char **argv)
{
	Scenario	sc[NUM_SCENARIOS];
	const char *names[NUM_SCENARIOS];
	PGconn	   *ctl;
	int			nsc = 0;
	int			samples;
	int			i;
	int			j;

	if (argc < 4)
	{
		fprintf(stderr, "usage: handoff CONNINFO SAMPLES OUTDIR [SCENARIO ...]\n");
		return 2;
	}
	samples = atoi(argv[2]);
	if (samples < 1 || samples > 100000)
	{
		fprintf(stderr, "handoff: SAMPLES must be 1..100000\n");
		return 2;
	}
	if (argc == 4)
	{
		for (i = 0; i < NUM_SCENARIOS; i++)
			names[nsc++] = scenarios[i];
	}
	for (j = 4; j < argc && nsc < NUM_SCENARIOS; j++)
	{
		for (i = 0; i < NUM_SCENARIOS; i++)
			if (strcmp(argv[j], scenarios[i]) == 0)
				break;
		if (i == NUM_SCENARIOS)
		{
			fprintf(stderr, "handoff: unknown scenario %s\n", argv[j]);
			return 2;
		}
		names[nsc++] = scenarios[i];
	}

	/* interleaved: sample i of every scenario, then sample i + 1 */
	ctl = connect_db(argv[1]);
	for (i = 0; i < nsc; i++)
		scenario_setup(&sc[i], argv[1], names[i], samples);
	for (j = 0; j < samples; j++)
		for (i = 0; i < nsc; i++)
			scenario_sample(&sc[i], ctl, j);
	for (i = 0; i < nsc; i++)
		scenario_finish(&sc[i], samples, argv[3]);
	PQfinish(ctl);
	return 0;
}
