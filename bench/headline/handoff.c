/*-------------------------------------------------------------------------
 *
 * handoff.c
 *	  How long a freed slot takes to reach a blocked claimer: the hand-off
 *	  latency behind the headline benchmark's slot gaps.
 *
 *	  One connection (A) blocks in claim(topic, 1, '30 s', '5 s'); once its
 *	  backend is asleep (pg_stat_activity says so), another connection (B)
 *	  makes a row claimable and we time, on the client clock, from just
 *	  before B's statement to A's claim returning the row:
 *
 *	  enqueue  B enqueues a row.  The commit wakes A directly: the floor,
 *	           one commit and one claim.
 *	  pulse    B runs complete(carrier) + pulse(topic, 1), the wiring of
 *	           the reference dispatcher.  The commit hands the pulse to the
 *	           background worker, which re-offers the oldest parked row in a
 *	           transaction of its own; that commit wakes A.
 *	  reoffer  B runs complete(carrier) + reoffer(topic, 1): the same
 *	           re-offer done in B's own transaction, with no worker hop.
 *	           The difference from "pulse" is the cost of the worker hop.
 *
 *	  The row A gets becomes B's next carrier.  Each scenario has its own
 *	  topic and its own 200 parked rows (60 s back-off, so no fence passes
 *	  during the measurement).  Prints one line per scenario: median, 90th
 *	  percentile and minimum, in ms.
 *
 *	  Build: gcc -O2 -Wall -Wextra -Werror -pthread -I$(pg_config --includedir)
 *	         handoff.c -L$(pg_config --libdir) -lpq -o handoff
 *	  Run:   handoff 'host=/tmp/sock port=5432 dbname=postgres' [iterations]
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  bench/headline/handoff.c
 *
 *-------------------------------------------------------------------------
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define PARKED_ROWS 200

typedef struct Claimer
{
	PGconn	   *conn;
	const char *topic;
	char		key[300];
	char		token[32];
	int64_t		returned_at;
} Claimer;

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
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

/* The blocked claim, in a thread of its own. */
static void *
claimer_main(void *arg)
{
	Claimer    *c = (Claimer *) arg;
	const char *params[1] = {c->topic};
	PGresult   *res;

	res = exec_params(c->conn,
					  "SELECT dispatch_key, lease_token "
					  "  FROM aion_wake.claim($1, 1, '30 s', '5 s')", 1, params);
	c->returned_at = now_us();
	if (PQntuples(res) != 1)
	{
		fprintf(stderr, "handoff: the blocked claim on %s timed out\n", c->topic);
		exit(1);
	}
	snprintf(c->key, sizeof(c->key), "%s", PQgetvalue(res, 0, 0));
	snprintf(c->token, sizeof(c->token), "%s", PQgetvalue(res, 0, 1));
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
	struct timespec step = {0, 1000000};	/* poll every 1 ms */

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

static void
scenario(const char *conninfo, const char *name, int iterations)
{
	PGconn	   *a = PQconnectdb(conninfo);
	PGconn	   *b = PQconnectdb(conninfo);
	PGconn	   *ctl = PQconnectdb(conninfo);
	Claimer		claimer;
	char		topic[64];
	char		carrier[300] = "";
	char		token[32] = "";
	char		n[16];
	int64_t    *lat = calloc(iterations, sizeof(int64_t));
	PGresult   *res;
	int			i;

	if (PQstatus(a) != CONNECTION_OK || PQstatus(b) != CONNECTION_OK ||
		PQstatus(ctl) != CONNECTION_OK || lat == NULL)
	{
		fprintf(stderr, "handoff: connection failed: %s", PQerrorMessage(a));
		exit(1);
	}
	snprintf(topic, sizeof(topic), "handoff_%s", name);
	snprintf(n, sizeof(n), "%d", PARKED_ROWS + 1);

	/* PARKED_ROWS parked rows and one carrier, claimed by B */
	if (strcmp(name, "enqueue") != 0)
	{
		const char *p2[2] = {topic, n};

		exec_void(b, "SELECT count(*) FROM generate_series(1, $2::int) g, "
				  "       aion_wake.enqueue($1 || '-' || g, '{}', $1)", 2, p2);
		res = exec_params(b, "SELECT dispatch_key, lease_token "
						  "  FROM aion_wake.claim($1, $2::int, '60 s')", 2, p2);
		snprintf(carrier, sizeof(carrier), "%s", PQgetvalue(res, 0, 0));
		snprintf(token, sizeof(token), "%s", PQgetvalue(res, 0, 1));
		for (i = 1; i < PQntuples(res); i++)
		{
			const char *p[2] = {PQgetvalue(res, i, 0), PQgetvalue(res, i, 1)};

			exec_void(b, "SELECT aion_wake.park($1, '60 s', $2::bigint)", 2, p);
		}
		PQclear(res);
	}

	for (i = 0; i < iterations; i++)
	{
		pthread_t	th;
		int64_t		t0;

		claimer.conn = a;
		claimer.topic = topic;
		if (pthread_create(&th, NULL, claimer_main, &claimer) != 0)
		{
			perror("pthread_create");
			exit(1);
		}
		wait_until_asleep(ctl, a);

		t0 = now_us();
		if (strcmp(name, "enqueue") == 0)
		{
			char		key[300];
			const char *p[2] = {key, topic};

			snprintf(key, sizeof(key), "%s-%d", topic, i);
			exec_void(b, "SELECT aion_wake.enqueue($1, '{}', $2)", 2, p);
		}
		else
		{
			const char *p[3] = {carrier, token, topic};

			if (strcmp(name, "pulse") == 0)
				exec_void(b, "SELECT aion_wake.complete($1, $2::bigint), "
						  "       aion_wake.pulse($3, 1)", 3, p);
			else
				exec_void(b, "SELECT aion_wake.complete($1, $2::bigint), "
						  "       aion_wake.reoffer($3, 1)", 3, p);
		}
		pthread_join(th, NULL);
		lat[i] = claimer.returned_at - t0;
		/* the row A got is B's next carrier */
		memcpy(carrier, claimer.key, sizeof(carrier));
		memcpy(token, claimer.token, sizeof(token));
	}

	qsort(lat, iterations, sizeof(int64_t), cmp_int64);
	printf("%-8s p50 %6.2f ms   p90 %6.2f ms   min %6.2f ms   (%d hand-offs)\n",
		   name, lat[iterations / 2] / 1000.0, lat[iterations * 9 / 10] / 1000.0,
		   lat[0] / 1000.0, iterations);
	free(lat);
	PQfinish(a);
	PQfinish(b);
	PQfinish(ctl);
}

int
main(int argc, char **argv)
{
	int			iterations = 100;

	if (argc < 2 || argc > 3)
	{
		fprintf(stderr, "usage: handoff CONNINFO [iterations]\n");
		return 2;
	}
	if (argc == 3)
		iterations = atoi(argv[2]);
	if (iterations < 1 || iterations > PARKED_ROWS)
	{
		fprintf(stderr, "handoff: iterations must be 1..%d\n", PARKED_ROWS);
		return 2;
	}
	scenario(argv[1], "enqueue", iterations);
	scenario(argv[1], "pulse", iterations);
	scenario(argv[1], "reoffer", iterations);
	return 0;
}
