/*
 * bench/throughput/throughput.c -- the throughput benchmark's client: one
 * mode, one phase, one run per invocation; bench/throughput/run.sh drives
 * it.  Connection settings come from the libpq environment (PGHOST, PGPORT,
 * PGDATABASE, PGUSER).
 *
 *   throughput MODE burn N WORKERS BATCH
 *   throughput MODE cont RATE SECONDS WORKERS BATCH PRODUCERS
 *   throughput MODE latency ROWS SAMPLES
 *   throughput MODE count N OPS BATCH
 *
 * MODE is one of
 *   single    aion_wake.claim(topic, 1) then aion_wake.complete(key, token):
 *             two statements, two commits per row
 *   handoff   aion_wake.complete(key, token, next_rows => 1): the settle and
 *             the next row in one statement and commit (a claim only when it
 *             returned nothing)
 *   batch     aion_wake.claim(topic, BATCH), then
 *             aion_wake.complete_many(keys[], tokens[], next_rows => BATCH):
 *             a whole batch settled and the next one taken in one
 *             statement (1.2; skipped with "needs 1.2" when the function
 *             does not exist)
 *   sql       the hand-written baseline on a table of the same shape
 *             (bench_jobs): UPDATE ... FROM (SELECT ... ORDER BY
 *             visible_after LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING, then
 *             DELETE ... WHERE key = $1 AND lease_token = $2: two commits
 *   sqlbatch  the same with LIMIT BATCH and one DELETE ... USING
 *             unnest(keys, tokens): two commits per batch
 *   sqlhandoff  the hand-written hand-off: the DELETE and the next row's
 *             claim in one statement (data-modifying WITH), one commit per
 *             row, as handoff (a claim only when it returned nothing).  The
 *             claim reads the DELETE's count, so that the DELETE runs
 *             first: a WITH nobody reads runs last, after the claim's
 *             locks, and at 16 workers two such statements deadlocked (a
 *             claim that rechecks a row another worker just leased keeps
 *             its lock; that worker's DELETE then waits, while it holds
 *             the lock the first one's DELETE waits for).
 *
 * burn: N jobs enqueued in one transaction, then CHECKPOINT, then WORKERS
 *   connections drain the queue (a worker stops when its claim returns
 *   nothing); time from the start signal to the last worker's end.
 * cont: PRODUCERS connections insert RATE rows per second in total (one
 *   autocommit statement per row, on an open-loop schedule) for SECONDS;
 *   WORKERS connections claim with a wait (aion_wake: claim(..., wait =>
 *   '200 ms'); hand-written: LISTEN, a statement-level trigger NOTIFYs on
 *   insert, the worker waits on its socket when a claim finds nothing).
 *   With THROUGHPUT_POLL_MS=n the hand-written workers sleep n ms after a
 *   claim that found nothing instead (no LISTEN, no wake-up storm: every
 *   NOTIFY wakes every listener, and each of them claims).
 *   The latency of a row is from its scheduled enqueue time (so a producer
 *   that falls behind shows in it) to the return of the settle's commit.
 *   "Kept up": every row was settled by SECONDS + 1 s.
 * latency: ROWS rows of backlog (in the table, visible, never claimed in the
 *   run), then SAMPLES times, one client: enqueue one fresh row with an
 *   earlier fence than the backlog (so it is the one claimed), claim it,
 *   settle it; and separately claim + hand-off; per-statement latency.
 * count: N jobs enqueued as for burn, then one connection settles OPS rows
 *   of them as a burn worker does and disconnects; prints that backend's
 *   pid (count.sh counts its instructions under callgrind).
 *
 * Around the measured phase it reads pg_current_wal_lsn(), pg_stat_wal and
 * pg_stat_database.xact_commit after the measured connections have ended
 * (a backend flushes its statistics when it exits), and prints one line
 *   RESULT mode=... key=value ...
 * It exits non-zero only if a run goes wrong (a failed statement, rows left
 * over, a settle that settled nothing).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>
#include <time.h>
#include <libpq-fe.h>

static const char *progname = "throughput";

#include "../bench_client.h"

#define TOPIC "bench"
#define LEASE "30 s"
#define MAXW 64

typedef enum
{
	M_SINGLE, M_HANDOFF, M_BATCH, M_SQL, M_SQLBATCH, M_SQLHANDOFF
} Mode;

static Mode mode;
static const char *mode_name;
static bool continuous;
static int	batch = 1;
static int	nworkers;
static int	nproducers = 1;
static double rate;
static double seconds;

static int64_t t_start;			/* start signal (ns) */
static int64_t *sched;			/* continuous: scheduled enqueue time per row */
static long total_rows;			/* continuous: rows the producers will send */
static atomic_long produced;
static atomic_long delivered;
static atomic_bool stop_workers;
static atomic_int ready;
static atomic_bool go;
static atomic_long max_lag_ns;
static atomic_int finished;		/* workers that have ended */
static const char *batch_fn;	/* complete_many (1.2), or complete(text[], ...) */
static int	poll_ms;			/* THROUGHPUT_POLL_MS: hand-written workers poll */

typedef struct
{
	int			id;
	PGconn	   *conn;
	long		rows;
	long		stmts;
	long		empty;			/* claims that found nothing */
	int64_t		end_ns;
	int64_t		first_ns;		/* when its first claim returned */
	double	   *lat;			/* ms, continuous only */
	long		nlat;
	long		maxlat;
} Worker;

static Worker workers[MAXW];

static PGconn *
connect_db(void)
{
	PGconn	   *c = PQconnectdb("application_name=throughput");

	if (PQstatus(c) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(c));
	return c;
}

static void
prepare(PGconn *c, const char *name, const char *sql)
{
	PGresult   *r = PQprepare(c, name, sql, 0, NULL);

	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("prepare %s failed: %s", name, PQerrorMessage(c));
	PQclear(r);
}

static PGresult *
exec_prep(PGconn *c, const char *name, int n, const char *const *v,
		  ExecStatusType expect)
{
	PGresult   *r = PQexecPrepared(c, name, n, v, NULL, NULL, 0);

	if (PQresultStatus(r) != expect)
		die("%s failed: %s", name, PQerrorMessage(c));
	return r;
}

static void
prepare_worker(PGconn *c)
{
	switch (mode)
	{
		case M_SINGLE:
		case M_HANDOFF:
		case M_BATCH:
			prepare(c, "claim",
					"SELECT dispatch_key, lease_token FROM aion_wake.claim($1::text, $2::int, $3::interval, $4::interval)");
			prepare(c, "complete",
					"SELECT aion_wake.complete($1::text, $2::bigint)");
			prepare(c, "handoff",
					"SELECT dispatch_key, lease_token FROM aion_wake.complete($1::text, $2::bigint, 1, $3::interval)");
			if (mode == M_BATCH)
			{
				char		sql[256];

				snprintf(sql, sizeof(sql),
						 "SELECT dispatch_key, lease_token FROM aion_wake.%s($1::text[], $2::bigint[], $3::int, $4::interval)",
						 batch_fn);
				prepare(c, "batch", sql);
			}
			break;
		case M_SQL:
		case M_SQLBATCH:
		case M_SQLHANDOFF:
			/* the same work as aion_wake's claim: oldest visible row of the
			 * topic, a fresh fence and lease token, SKIP LOCKED */
			prepare(c, "claim",
					"WITH c AS (SELECT dispatch_key FROM public.bench_jobs"
					" WHERE topic = $1 AND visible_after <= clock_timestamp()"
					" ORDER BY visible_after LIMIT $2 FOR UPDATE SKIP LOCKED)"
					" UPDATE public.bench_jobs j SET visible_after = clock_timestamp() + $3::interval,"
					" lease_token = nextval('public.bench_jobs_token_seq'), attempt = j.attempt + 1"
					" FROM c WHERE j.dispatch_key = c.dispatch_key"
					" RETURNING j.dispatch_key, j.lease_token");
			prepare(c, "delete",
					"DELETE FROM public.bench_jobs WHERE dispatch_key = $1 AND lease_token = $2");
			prepare(c, "handoff",
					"WITH d AS (DELETE FROM public.bench_jobs WHERE dispatch_key = $1 AND lease_token = $2"
					" RETURNING 1),"
					" c AS (SELECT dispatch_key FROM public.bench_jobs"
					" WHERE topic = $3 AND visible_after <= clock_timestamp()"
					" AND (SELECT count(*) FROM d) IS NOT NULL"
					" ORDER BY visible_after LIMIT 1 FOR UPDATE SKIP LOCKED),"
					" u AS (UPDATE public.bench_jobs j SET visible_after = clock_timestamp() + $4::interval,"
					" lease_token = nextval('public.bench_jobs_token_seq'), attempt = j.attempt + 1"
					" FROM c WHERE j.dispatch_key = c.dispatch_key"
					" RETURNING j.dispatch_key, j.lease_token)"
					" SELECT u.dispatch_key, u.lease_token, (SELECT count(*) FROM d) FROM u");
			prepare(c, "deletes",
					"DELETE FROM public.bench_jobs j USING unnest($1::text[], $2::bigint[]) AS u(k, t)"
					" WHERE j.dispatch_key = u.k AND j.lease_token = u.t");
			if (continuous && poll_ms == 0)
			{
				PGresult   *r = PQexec(c, "LISTEN bench_jobs");

				if (PQresultStatus(r) != PGRES_COMMAND_OK)
					die("LISTEN failed: %s", PQerrorMessage(c));
				PQclear(r);
			}
			break;
	}
}

/* the rows a claim or hand-off returned: keys and tokens, owned copies */
typedef struct
{
	int			n;
	char	  **key;
	char	  **tok;
} Rows;

static void
rows_set(Rows *rw, PGresult *r)
{
	int			i;

	for (i = 0; i < rw->n; i++)
	{
		free(rw->key[i]);
		free(rw->tok[i]);
	}
	rw->n = PQntuples(r);
	rw->key = realloc(rw->key, sizeof(char *) * (rw->n + 1));
	rw->tok = realloc(rw->tok, sizeof(char *) * (rw->n + 1));
	for (i = 0; i < rw->n; i++)
	{
		rw->key[i] = strdup(PQgetvalue(r, i, 0));
		rw->tok[i] = strdup(PQgetvalue(r, i, 1));
	}
	PQclear(r);
}

/* "{a,b,c}": keys are j<number> and tokens numbers, no quoting needed */
static char *
array_lit(char **v, int n)
{
	size_t		len = 3;
	char	   *s,
			   *p;
	int			i;

	for (i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = p = malloc(len);
	*p++ = '{';
	for (i = 0; i < n; i++)
	{
		size_t		l = strlen(v[i]);

		if (i > 0)
			*p++ = ',';
		memcpy(p, v[i], l);
		p += l;
	}
	*p++ = '}';
	*p = '\0';
	return s;
}

static int
do_claim(Worker *w, Rows *rw, int want)
{
	char		nbuf[16];
	const char *v[4];

	snprintf(nbuf, sizeof(nbuf), "%d", want);
	v[0] = TOPIC;
	v[1] = nbuf;
	v[2] = LEASE;
	v[3] = continuous ? "200 ms" : "0";
	w->stmts++;
	rows_set(rw, exec_prep(w->conn, "claim", mode >= M_SQL ? 3 : 4, v, PGRES_TUPLES_OK));
	if (w->first_ns == 0)
		w->first_ns = now_ns();
	return rw->n;
}

/* a settle of the rows in rw has committed: count them, take latencies */
static void
settled(Worker *w, Rows *rw)
{
	int64_t		now = now_ns();
	int			i;

	w->rows += rw->n;
	atomic_fetch_add(&delivered, rw->n);
	w->end_ns = now;
	if (!continuous)
		return;
	for (i = 0; i < rw->n; i++)
	{
		long		k = atol(rw->key[i] + 1);

		if (k < 0 || k >= total_rows)
			die("unexpected key %s", rw->key[i]);
		if (w->nlat == w->maxlat)
		{
			w->maxlat = w->maxlat ? w->maxlat * 2 : 4096;
			w->lat = realloc(w->lat, sizeof(double) * w->maxlat);
		}
		w->lat[w->nlat++] = (now - sched[k]) / 1e6;
	}
}

/*
 * Settle the rows in rw; for the hand-off forms, replace them with the
 * rows the settle took, otherwise leave rw empty.
 */
static void
do_settle(Worker *w, Rows *rw)
{
	PGresult   *r;
	const char *v[4];
	char		nbuf[16];
	char	   *ka,
			   *ta;
	int			i;

	switch (mode)
	{
		case M_SINGLE:
		case M_SQL:
			for (i = 0; i < rw->n; i++)
			{
				v[0] = rw->key[i];
				v[1] = rw->tok[i];
				w->stmts++;
				if (mode == M_SINGLE)
				{
					r = exec_prep(w->conn, "complete", 2, v, PGRES_TUPLES_OK);
					if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
						die("complete(%s, %s) settled nothing", v[0], v[1]);
				}
				else
				{
					r = exec_prep(w->conn, "delete", 2, v, PGRES_COMMAND_OK);
					if (strcmp(PQcmdTuples(r), "1") != 0)
						die("DELETE %s settled nothing", v[0]);
				}
				PQclear(r);
			}
			settled(w, rw);
			break;
		case M_HANDOFF:
			v[0] = rw->key[0];
			v[1] = rw->tok[0];
			v[2] = LEASE;
			w->stmts++;
			r = exec_prep(w->conn, "handoff", 3, v, PGRES_TUPLES_OK);
			settled(w, rw);
			rows_set(rw, r);
			return;
		case M_SQLHANDOFF:
			v[0] = rw->key[0];
			v[1] = rw->tok[0];
			v[2] = TOPIC;
			v[3] = LEASE;
			w->stmts++;
			r = exec_prep(w->conn, "handoff", 4, v, PGRES_TUPLES_OK);
			if (PQntuples(r) > 0 && strcmp(PQgetvalue(r, 0, 2), "1") != 0)
				die("DELETE %s settled nothing", v[0]);
			settled(w, rw);
			rows_set(rw, r);
			return;
		case M_BATCH:
			ka = array_lit(rw->key, rw->n);
			ta = array_lit(rw->tok, rw->n);
			snprintf(nbuf, sizeof(nbuf), "%d", batch);
			v[0] = ka;
			v[1] = ta;
			v[2] = nbuf;
			v[3] = LEASE;
			w->stmts++;
			r = exec_prep(w->conn, "batch", 4, v, PGRES_TUPLES_OK);
			free(ka);
			free(ta);
			settled(w, rw);
			rows_set(rw, r);
			return;
		case M_SQLBATCH:
			ka = array_lit(rw->key, rw->n);
			ta = array_lit(rw->tok, rw->n);
			v[0] = ka;
			v[1] = ta;
			w->stmts++;
			r = exec_prep(w->conn, "deletes", 2, v, PGRES_COMMAND_OK);
			if (atoi(PQcmdTuples(r)) != rw->n)
				die("DELETE of %d rows settled %s", rw->n, PQcmdTuples(r));
			PQclear(r);
			free(ka);
			free(ta);
			settled(w, rw);
			break;
	}
	/* modes without a hand-off: nothing is held after the settle */
	for (i = 0; i < rw->n; i++)
	{
		free(rw->key[i]);
		free(rw->tok[i]);
	}
	rw->n = 0;
}

/* hand-written, continuous: wait (at most 200 ms) for a NOTIFY */
static void
wait_notify(PGconn *c)
{
	PGnotify   *n;
	fd_set		fds;
	struct timeval tv = {0, 200000};
	int			sock = PQsocket(c);
	bool		got = false;

	while ((n = PQnotifies(c)) != NULL)
	{
		PQfreemem(n);
		got = true;
	}
	if (got)
		return;
	FD_ZERO(&fds);
	FD_SET(sock, &fds);
	if (select(sock + 1, &fds, NULL, NULL, &tv) < 0 && errno != EINTR)
		die("select: %s", strerror(errno));
	if (!PQconsumeInput(c))
		die("PQconsumeInput: %s", PQerrorMessage(c));
	while ((n = PQnotifies(c)) != NULL)
		PQfreemem(n);
}

static void *
worker_main(void *arg)
{
	Worker	   *w = arg;
	Rows		rw = {0};
	int			want = (mode == M_BATCH || mode == M_SQLBATCH) ? batch : 1;

	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		sleep_ns(100000);
	for (;;)
	{
		if (rw.n == 0 && do_claim(w, &rw, want) == 0)
		{
			w->empty++;
			if (!continuous)
				break;
			if (atomic_load(&stop_workers))
				break;
			if (mode >= M_SQL)
			{
				if (poll_ms > 0)
					sleep_ns((int64_t) poll_ms * 1000000);
				else
					wait_notify(w->conn);
			}
			continue;
		}
		do_settle(w, &rw);
	}
	if (w->end_ns == 0)
		w->end_ns = now_ns();
	atomic_fetch_add(&finished, 1);
	return NULL;
}

typedef struct
{
	int			id;
	PGconn	   *conn;
} Producer;

static void *
producer_main(void *arg)
{
	Producer   *p = arg;
	long		k;
	char		key[32];
	const char *v[1] = {key};

	prepare(p->conn, "enq", mode >= M_SQL
			? "INSERT INTO public.bench_jobs (dispatch_key, topic) VALUES ($1, 'bench')"
			: "SELECT aion_wake.enqueue($1, '{}'::jsonb, 'bench')");
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		sleep_ns(100000);
	for (k = p->id; k < total_rows; k += nproducers)
	{
		int64_t		lag;
		PGresult   *r;

		sleep_ns(sched[k] - now_ns());
		lag = now_ns() - sched[k];
		if (lag > atomic_load(&max_lag_ns))
			atomic_store(&max_lag_ns, lag);
		snprintf(key, sizeof(key), "j%ld", k);
		r = exec_prep(p->conn, "enq", 1, v,
					  mode >= M_SQL ? PGRES_COMMAND_OK : PGRES_TUPLES_OK);
		PQclear(r);
		atomic_fetch_add(&produced, 1);
	}
	return NULL;
}

/* WAL position, WAL counters and commits of the database */
typedef struct
{
	char		lsn[32];
	double		wal_bytes;
	double		wal_records;
	double		wal_fpi;
	double		wal_sync;
	double		commits;
	double		cpu_s;			/* server CPU, see server_cpu() */
} Stats;

/* utime + stime (fields 14, 15) or cutime + cstime (16, 17) of a process, s */
static double
proc_cpu(long pid, bool children)
{
	char		path[64],
				buf[1024],
			   *p;
	FILE	   *f;
	unsigned long long ut,
				st,
				cut,
				cst;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	/* the command name may hold spaces: read from after the last ')' */
	if ((p = strrchr(buf, ')')) == NULL ||
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
			   &ut, &st, &cut, &cst) != 4)
		return 0;
	return (double) (children ? cut + cst : ut + st) / sysconf(_SC_CLK_TCK);
}

/* the postmaster's children now (-1 if /proc does not say) */
static int baseline_children = -1;

static int
pm_children(long pm)
{
	char		path[64];
	FILE	   *f;
	int			n = 0;
	long		c;

	snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", pm, pm);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fscanf(f, "%ld", &c) == 1)
		n++;
	fclose(f);
	return n;
}

/*
 * The server's CPU time so far: the backends that have ended (the
 * postmaster's cutime + cstime, once it has reaped them) and the aion_wake
 * worker and its listener connection, which live on.  Needs the client on
 * the server's machine as the same OS user (as run.sh runs it); 0 if not.
 */
static double
server_cpu(PGconn *mon)
{
	PGresult   *r = run(mon, PGRES_TUPLES_OK,
						"SELECT pid, backend_type = 'checkpointer' FROM pg_stat_activity"
						" WHERE backend_type IN ('checkpointer', 'aion_wake worker')"
						" OR application_name = 'aion_wake listener'", 0, NULL);
	double		cpu = 0;
	int			i;

	for (i = 0; i < PQntuples(r); i++)
	{
		long		pid = atol(PQgetvalue(r, i, 0));

		if (strcmp(PQgetvalue(r, i, 1), "t") == 0)
		{
			/* the checkpointer's parent is the postmaster */
			char		path[64],
						buf[512],
					   *p;
			FILE	   *f;
			long		ppid = 0;

			snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
			if ((f = fopen(path, "r")) != NULL)
			{
				if (fgets(buf, sizeof(buf), f) != NULL &&
					(p = strrchr(buf, ')')) != NULL)
					sscanf(p + 2, "%*c %ld", &ppid);
				fclose(f);
			}
			if (ppid > 0)
			{
				/*
				 * A backend leaves pg_stat_activity before it exits, and
				 * its CPU time reaches cutime only once the postmaster has
				 * reaped it: wait (at most 5 s) until the postmaster has no
				 * more children than it had before the phase.
				 */
				for (int k = 0; k < 500; k++)
				{
					int			n = pm_children(ppid);

					if (baseline_children < 0 || n < 0 || n <= baseline_children)
						break;
					sleep_ns(10000000);
				}
				cpu += proc_cpu(ppid, true);
			}
		}
		else
			cpu += proc_cpu(pid, false);
	}
	PQclear(r);
	return cpu;
}

/* the postmaster's children now, found through the checkpointer's parent */
static int
pm_children_of_server(PGconn *mon)
{
	char		v[32],
				path[64],
				buf[512],
			   *p;
	FILE	   *f;
	long		ppid = 0;

	run_value(mon, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'",
			  0, NULL, v, sizeof(v));
	snprintf(path, sizeof(path), "/proc/%s/stat", v);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		sscanf(p + 2, "%*c %ld", &ppid);
	fclose(f);
	return ppid > 0 ? pm_children(ppid) : -1;
}

static void
read_stats(PGconn *mon, Stats *s)
{
	PGresult   *r;

	/*
	 * The connections of the last phase have ended: wait until their
	 * backends are gone, so that the statistics they flush at exit are in.
	 */
	for (int i = 0; i < 1000; i++)
	{
		r = run(mon, PGRES_TUPLES_OK,
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'throughput' AND pid <> pg_backend_pid()",
				0, NULL);
		bool		gone = strcmp(PQgetvalue(r, 0, 0), "0") == 0;

		PQclear(r);
		if (gone)
			break;
		if (i == 999)
			die("sessions of the last phase still there after 10 s");
		sleep_ns(10000000);
	}
	PQclear(run(mon, PGRES_TUPLES_OK, "SELECT pg_stat_clear_snapshot()", 0, NULL));
	r = run(mon, PGRES_TUPLES_OK,
			"SELECT pg_current_wal_lsn(), w.wal_bytes, w.wal_records, w.wal_fpi, w.wal_sync,"
			" d.xact_commit FROM pg_stat_wal w, pg_stat_database d WHERE d.datname = current_database()",
			0, NULL);
	snprintf(s->lsn, sizeof(s->lsn), "%s", PQgetvalue(r, 0, 0));
	s->wal_bytes = atof(PQgetvalue(r, 0, 1));
	s->wal_records = atof(PQgetvalue(r, 0, 2));
	s->wal_fpi = atof(PQgetvalue(r, 0, 3));
	s->wal_sync = atof(PQgetvalue(r, 0, 4));
	s->commits = atof(PQgetvalue(r, 0, 5));
	PQclear(r);
	s->cpu_s = server_cpu(mon);
}

static double
lsn_diff(PGconn *mon, const char *a, const char *b)
{
	const char *v[2] = {b, a};
	char		out[64];

	run_value(mon, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)", 2, v, out, sizeof(out));
	return atof(out);
}

static void
check_empty(PGconn *mon)
{
	char		out[32];

	run_value(mon, mode >= M_SQL ? "SELECT count(*) FROM public.bench_jobs"
			  : "SELECT count(*) FROM aion_wake.outbox WHERE topic = 'bench'",
			  0, NULL, out, sizeof(out));
	if (strcmp(out, "0") != 0)
		die("%s: %s rows left in the queue after the run", mode_name, out);
}

static void
reset_tables(PGconn *mon)
{
	PQclear(run(mon, PGRES_COMMAND_OK, "DELETE FROM public.bench_jobs", 0, NULL));
	PQclear(run(mon, PGRES_COMMAND_OK, "DELETE FROM aion_wake.outbox WHERE topic = 'bench'", 0, NULL));
	PQclear(run(mon, PGRES_COMMAND_OK, "VACUUM (ANALYZE) public.bench_jobs", 0, NULL));
	PQclear(run(mon, PGRES_COMMAND_OK, "VACUUM (ANALYZE) aion_wake.outbox", 0, NULL));
}

/*
 * Empty both queues, enqueue n jobs into the mode's queue in one
 * transaction, and checkpoint, so that every mode starts with the same
 * full-page writes ahead of it.
 */
static void
load_jobs(PGconn *setup, long n)
{
	reset_tables(setup);
	if (n > 0)
	{
		char		nb[32];
		const char *v[1] = {nb};
		PGresult   *r;

		snprintf(nb, sizeof(nb), "%ld", n);
		r = run(setup, PGRES_TUPLES_OK, mode >= M_SQL
				? "WITH i AS (INSERT INTO public.bench_jobs (dispatch_key, topic) SELECT 'j' || g, 'bench' FROM generate_series(0, $1::int - 1) g RETURNING 1) SELECT count(*) FROM i"
				: "SELECT count(*) FILTER (WHERE aion_wake.enqueue('j' || g, '{}'::jsonb, 'bench')) FROM generate_series(0, $1::int - 1) g",
				1, v);
		if (atol(PQgetvalue(r, 0, 0)) != n)
			die("enqueued %s rows, not %ld", PQgetvalue(r, 0, 0), n);
		PQclear(r);
	}
	PQclear(run(setup, PGRES_COMMAND_OK, "CHECKPOINT", 0, NULL));
}

/*
 * count: n jobs loaded as for burn, then one worker settles ops rows of
 * them as burn's workers do, and disconnects.  Prints that worker's
 * backend pid: count.sh runs the server under callgrind and reads the
 * instructions of that backend alone.
 */
static void
run_count(long n, long ops)
{
	PGconn	   *setup = connect_db();
	Worker	   *w = &workers[0];
	Rows		rw = {0};
	int			want = (mode == M_BATCH || mode == M_SQLBATCH) ? batch : 1;
	char		pid[32];

	load_jobs(setup, n);
	PQfinish(setup);
	w->conn = connect_db();
	run_value(w->conn, "SELECT pg_backend_pid()", 0, NULL, pid, sizeof(pid));
	prepare_worker(w->conn);
	while (w->rows < ops)
	{
		if (rw.n == 0 && do_claim(w, &rw, want) == 0)
			die("the queue ran dry after %ld rows", w->rows);
		do_settle(w, &rw);
	}
	PQfinish(w->conn);
	printf("RESULT mode=%s phase=count rows=%ld settled=%ld pid=%s\n",
		   mode_name, n, w->rows, pid);
}

/*
 * THROUGHPUT_WAITS=1: while the workers run, sample every 10 ms what their
 * active backends wait for (pg_stat_activity.wait_event; none: on CPU or
 * runnable) and print the shares in the RESULT line ("waits=").  A
 * profile of wall time where perf sees only CPU: a row lock waited for
 * shows as Lock:transactionid, a commit's flush as IO:WALSync or
 * LWLock:WALWrite.
 */
#define MAXWAITS 32
static char wait_name[MAXWAITS][64];
static long wait_count[MAXWAITS];
static int	nwaits;
static long wait_total;

static void
sample_waits(PGconn *mon)
{
	PGresult   *r = run(mon, PGRES_TUPLES_OK,
						"SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)"
						"  FROM pg_stat_activity WHERE application_name = 'throughput'"
						"   AND state = 'active' GROUP BY 1", 0, NULL);
	int			i,
				j;

	for (i = 0; i < PQntuples(r); i++)
	{
		const char *n = PQgetvalue(r, i, 0);
		long		c = atol(PQgetvalue(r, i, 1));

		for (j = 0; j < nwaits && strcmp(wait_name[j], n) != 0; j++)
			;
		if (j == nwaits)
		{
			if (nwaits == MAXWAITS)
				continue;
			snprintf(wait_name[nwaits++], sizeof(wait_name[0]), "%s", n);
		}
		wait_count[j] += c;
		wait_total += c;
	}
	PQclear(r);
}

static void
print_waits(void)
{
	bool		used[MAXWAITS] = {0};
	int			k;

	if (wait_total == 0)
		return;
	printf(" waits=");
	for (k = 0; k < nwaits && k < 6; k++)
	{
		int			best = -1,
					j;

		for (j = 0; j < nwaits; j++)
			if (!used[j] && (best < 0 || wait_count[j] > wait_count[best]))
				best = j;
		used[best] = true;
		printf("%s%s:%.0f%%", k ? "," : "", wait_name[best],
			   100.0 * wait_count[best] / wait_total);
	}
}

static Mode
parse_mode(const char *s)
{
	if (strcmp(s, "single") == 0)
		return M_SINGLE;
	if (strcmp(s, "handoff") == 0)
		return M_HANDOFF;
	if (strcmp(s, "batch") == 0)
		return M_BATCH;
	if (strcmp(s, "sql") == 0)
		return M_SQL;
	if (strcmp(s, "sqlbatch") == 0)
		return M_SQLBATCH;
	if (strcmp(s, "sqlhandoff") == 0)
		return M_SQLHANDOFF;
	die("unknown mode %s", s);
	return M_SQL;
}

static void
run_throughput(PGconn *mon, long n)
{
	pthread_t	th[MAXW],
				pth[MAXW];
	Producer	prod[MAXW];
	Stats		s0,
				s1;
	PGconn	   *setup;
	int			i;
	int64_t		t_end = 0;
	long		rows = 0,
				stmts = 0,
				empty = 0;
	double		el;

	/*
	 * The set-up runs on a connection of its own, ended before the first
	 * reading: the statistics of the enqueue (flushed when that backend
	 * exits) then fall before the measured phase.
	 */
	setup = connect_db();
	load_jobs(setup, continuous ? 0 : n);
	PQfinish(setup);
	baseline_children = -1;
	read_stats(mon, &s0);
	baseline_children = pm_children_of_server(mon);

	for (i = 0; i < nworkers; i++)
	{
		workers[i].id = i;
		workers[i].conn = connect_db();
		prepare_worker(workers[i].conn);
	}
	for (i = 0; continuous && i < nproducers; i++)
	{
		prod[i].id = i;
		prod[i].conn = connect_db();
	}
	for (i = 0; i < nworkers; i++)
		pthread_create(&th[i], NULL, worker_main, &workers[i]);
	if (continuous)
	{
		for (i = 0; i < nproducers; i++)
			pthread_create(&pth[i], NULL, producer_main, &prod[i]);
	}
	while (atomic_load(&ready) < nworkers + (continuous ? nproducers : 0))
		sleep_ns(1000000);
	t_start = now_ns();
	if (continuous)
	{
		long		k;

		/* schedule: evenly spaced from 100 ms after the start */
		for (k = 0; k < total_rows; k++)
			sched[k] = t_start + 100000000 + (int64_t) (k * 1e9 / rate);
	}
	atomic_store(&go, true);
	if (getenv("THROUGHPUT_WAITS") != NULL && strcmp(getenv("THROUGHPUT_WAITS"), "1") == 0)
	{
		while (atomic_load(&finished) < nworkers &&
			   (!continuous || atomic_load(&produced) < total_rows))
		{
			sample_waits(mon);
			sleep_ns(10000000);
		}
	}
	if (continuous)
	{
		int64_t		deadline;

		for (i = 0; i < nproducers; i++)
			pthread_join(pth[i], NULL);
		/* kept up: every row settled within 1 s of the end of the schedule */
		deadline = sched[total_rows - 1] + 1000000000;
		while (atomic_load(&delivered) < total_rows && now_ns() < deadline)
			sleep_ns(1000000);
		/* then give the rest up to 30 s more, to have every latency */
		while (atomic_load(&delivered) < total_rows && now_ns() < deadline + 30000000000LL)
			sleep_ns(10000000);
		atomic_store(&stop_workers, true);
	}
	for (i = 0; i < nworkers; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < nworkers; i++)
	{
		rows += workers[i].rows;
		stmts += workers[i].stmts;
		empty += workers[i].empty;
		if (workers[i].end_ns > t_end)
			t_end = workers[i].end_ns;
		PQfinish(workers[i].conn);
	}
	for (i = 0; continuous && i < nproducers; i++)
		PQfinish(prod[i].conn);
	read_stats(mon, &s1);
	check_empty(mon);
	if (!continuous && rows != n)
		die("%s: delivered %ld rows of %ld", mode_name, rows, n);

	/*
	 * THROUGHPUT_TRACE=1: when each worker's first claim returned and when
	 * its last settle committed, from the start signal, on stderr
	 * (bench/throughput/results/held_rows.md used it)
	 */
	if (getenv("THROUGHPUT_TRACE") != NULL && strcmp(getenv("THROUGHPUT_TRACE"), "1") == 0)
	{
		for (i = 0; i < nworkers; i++)
			fprintf(stderr, "TRACE mode=%s worker=%d first_claim_ms=%.1f last_settle_ms=%.1f rows=%ld\n",
					mode_name, i, (workers[i].first_ns - t_start) / 1e6,
					(workers[i].end_ns - t_start) / 1e6, workers[i].rows);
	}
	el = (t_end - t_start) / 1e9;
	printf("RESULT mode=%s phase=%s workers=%d batch=%d rows=%ld",
		   mode_name, continuous ? "cont" : "burn", nworkers, batch, rows);
	if (!continuous)
		printf(" seconds=%.3f jobs_s=%.0f", el, rows / el);
	else
	{
		long		nl = 0,
					j;
		double	   *all;
		int64_t		last_sched = sched[total_rows - 1];
		bool		kept;

		for (i = 0; i < nworkers; i++)
			nl += workers[i].nlat;
		all = malloc(sizeof(double) * (nl + 1));
		nl = 0;
		for (i = 0; i < nworkers; i++)
			for (j = 0; j < workers[i].nlat; j++)
				all[nl++] = workers[i].lat[j];
		qsort(all, nl, sizeof(double), cmp_double);
		kept = rows == total_rows && t_end <= last_sched + 1000000000;
		printf(" rate=%.0f secs=%.0f producers=%d sql_wake=%s p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f max_ms=%.2f"
			   " producer_max_lag_ms=%.1f drain_after_ms=%.0f kept_up=%s",
			   rate, seconds, nproducers, mode < M_SQL ? "claim_wait" : poll_ms > 0 ? "poll" : "notify", pct(all, nl, 0.50), pct(all, nl, 0.95),
			   pct(all, nl, 0.99), all[nl - 1], atomic_load(&max_lag_ns) / 1e6,
			   (t_end - last_sched) / 1e6, kept ? "yes" : "no");
		free(all);
	}
	printf(" server_cpu_us_row=%.0f", (s1.cpu_s - s0.cpu_s) * 1e6 / rows);
	printf(" wal_bytes_row=%.0f wal_records_row=%.2f wal_fpi_row=%.3f wal_sync_row=%.3f"
		   " commits_row=%.3f stmts_row=%.3f empty_claims=%ld",
		   lsn_diff(mon, s0.lsn, s1.lsn) / rows,
		   (s1.wal_records - s0.wal_records) / rows,
		   (s1.wal_fpi - s0.wal_fpi) / rows,
		   (s1.wal_sync - s0.wal_sync) / rows,
		   (s1.commits - s0.commits) / rows,
		   (double) stmts / rows, empty);
	print_waits();
	printf("\n");
	fflush(stdout);
}

/*
 * Backlog latency: ROWS visible rows queued, and SAMPLES rounds of, on one
 * connection: claim the oldest row and complete it; claim the next and
 * settle it with the hand-off complete(next_rows => 1), which takes the
 * next, completed in turn; enqueue one row.  Each statement timed; median
 * and p99 per statement.  The backlog is what the run starts with (it
 * shrinks by 2 rows a round: a few thousand of ROWS).
 */
static double
time_claim(PGconn *c, char *key, char *tok)
{
	const char *v[4] = {TOPIC, "1", LEASE, "0"};
	int64_t		t0 = now_ns();
	PGresult   *r = exec_prep(c, "claim", 4, v, PGRES_TUPLES_OK);
	double		ms = (now_ns() - t0) / 1e6;

	if (PQntuples(r) != 1)
		die("latency: claim returned %d rows", PQntuples(r));
	snprintf(key, 32, "%s", PQgetvalue(r, 0, 0));
	snprintf(tok, 32, "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	return ms;
}

static double
time_settle(PGconn *c, bool handoff, char *key, char *tok)
{
	const char *v[3] = {key, tok, LEASE};
	int64_t		t0 = now_ns();
	PGresult   *r = exec_prep(c, handoff ? "handoff" : "complete", handoff ? 3 : 2,
							  v, PGRES_TUPLES_OK);
	double		ms = (now_ns() - t0) / 1e6;

	if (handoff)
	{
		if (PQntuples(r) != 1)
			die("latency: the hand-off took %d rows", PQntuples(r));
		snprintf(key, 32, "%s", PQgetvalue(r, 0, 0));
		snprintf(tok, 32, "%s", PQgetvalue(r, 0, 1));
	}
	else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		die("latency: complete(%s, %s) settled nothing", key, tok);
	PQclear(r);
	return ms;
}

static void
run_latency(PGconn *mon, long backlog, int samples)
{
	PGconn	   *c;
	char		nb[32];
	const char *v[1] = {nb};
	double	   *te = malloc(sizeof(double) * samples),
			   *tc = malloc(sizeof(double) * samples),
			   *ts = malloc(sizeof(double) * samples),
			   *th = malloc(sizeof(double) * samples);
	char		key[32],
				tok[32];
	int			i;

	if (mode != M_SINGLE)
		die("latency runs with mode single");
	reset_tables(mon);
	snprintf(nb, sizeof(nb), "%ld", backlog + 2L * samples);
	PQclear(run(mon, PGRES_TUPLES_OK,
				"SELECT count(aion_wake.enqueue('b' || g, '{}'::jsonb, 'bench')) FROM generate_series(1, $1::int) g",
				1, v));
	PQclear(run(mon, PGRES_COMMAND_OK, "VACUUM (ANALYZE) aion_wake.outbox", 0, NULL));
	PQclear(run(mon, PGRES_COMMAND_OK, "CHECKPOINT", 0, NULL));
	c = connect_db();
	prepare(c, "enq", "SELECT aion_wake.enqueue($1, '{}'::jsonb, 'bench')");
	prepare_worker(c);
	for (i = 0; i < samples; i++)
	{
		int64_t		t0;

		tc[i] = time_claim(c, key, tok);
		ts[i] = time_settle(c, false, key, tok);
		time_claim(c, key, tok);
		th[i] = time_settle(c, true, key, tok);
		time_settle(c, false, key, tok);
		snprintf(key, sizeof(key), "l%d", i);
		v[0] = key;
		t0 = now_ns();
		PQclear(exec_prep(c, "enq", 1, v, PGRES_TUPLES_OK));
		te[i] = (now_ns() - t0) / 1e6;
		v[0] = nb;
	}
	PQfinish(c);
	qsort(te, samples, sizeof(double), cmp_double);
	qsort(tc, samples, sizeof(double), cmp_double);
	qsort(ts, samples, sizeof(double), cmp_double);
	qsort(th, samples, sizeof(double), cmp_double);
	printf("RESULT phase=latency backlog=%ld samples=%d claim_p50_ms=%.3f claim_p99_ms=%.3f"
		   " complete_p50_ms=%.3f complete_p99_ms=%.3f handoff_p50_ms=%.3f handoff_p99_ms=%.3f"
		   " enqueue_p50_ms=%.3f enqueue_p99_ms=%.3f\n",
		   backlog, samples, pct(tc, samples, 0.5), pct(tc, samples, 0.99),
		   pct(ts, samples, 0.5), pct(ts, samples, 0.99),
		   pct(th, samples, 0.5), pct(th, samples, 0.99),
		   pct(te, samples, 0.5), pct(te, samples, 0.99));
	fflush(stdout);
	/* the backlog goes: the next run starts from an empty queue */
	PQclear(run(mon, PGRES_COMMAND_OK, "DELETE FROM aion_wake.outbox WHERE topic = 'bench'", 0, NULL));
	PQclear(run(mon, PGRES_COMMAND_OK, "VACUUM aion_wake.outbox", 0, NULL));
}

int
main(int argc, char **argv)
{
	PGconn	   *mon;

	if (argc < 3)
		die("usage: throughput MODE burn N WORKERS BATCH | MODE cont RATE SECONDS WORKERS BATCH PRODUCERS | MODE count N OPS BATCH | single latency ROWS SAMPLES");
	mode_name = argv[1];
	mode = parse_mode(argv[1]);
	if (getenv("THROUGHPUT_POLL_MS") != NULL)
		poll_ms = atoi(getenv("THROUGHPUT_POLL_MS"));
	mon = connect_db();
	/* the monitor's own statements must not count as "throughput" sessions */
	PQclear(run(mon, PGRES_COMMAND_OK, "SET application_name = 'throughput_monitor'", 0, NULL));
	PQclear(run(mon, PGRES_COMMAND_OK, "SET stats_fetch_consistency = 'none'", 0, NULL));
	if (strcmp(argv[2], "latency") == 0 && argc == 5)
	{
		run_latency(mon, atol(argv[3]), atoi(argv[4]));
		PQfinish(mon);
		return 0;
	}
	/*
	 * The batch settle with hand-off: 1.2 names it complete_many (an
	 * overload of complete() would make complete($1, $2) with untyped
	 * parameters ambiguous); complete(text[], ...) is the name it was
	 * planned under.
	 */
	if (mode == M_BATCH)
	{
		if (run_bool(mon, "SELECT to_regprocedure('aion_wake.complete_many(text[], bigint[], integer, interval)') IS NOT NULL",
					 0, NULL))
			batch_fn = "complete_many";
		else if (run_bool(mon, "SELECT to_regprocedure('aion_wake.complete(text[], bigint[], integer, interval)') IS NOT NULL",
						  0, NULL))
			batch_fn = "complete";
	}
	if (mode == M_BATCH && batch_fn == NULL)
	{
		printf("RESULT mode=batch phase=%s skip=needs_1.2\n", argv[2]);
		PQfinish(mon);
		return 0;
	}
	if (strcmp(argv[2], "burn") == 0 && argc == 6)
	{
		nworkers = atoi(argv[4]);
		batch = atoi(argv[5]);
		if (nworkers < 1 || nworkers > MAXW || batch < 1)
			die("bad workers or batch");
		run_throughput(mon, atol(argv[3]));
	}
	else if (strcmp(argv[2], "cont") == 0 && argc == 8)
	{
		continuous = true;
		rate = atof(argv[3]);
		seconds = atof(argv[4]);
		nworkers = atoi(argv[5]);
		batch = atoi(argv[6]);
		nproducers = atoi(argv[7]);
		if (nworkers < 1 || nworkers > MAXW || batch < 1 || nproducers < 1 ||
			nproducers > MAXW || rate <= 0 || seconds <= 0)
			die("bad arguments");
		total_rows = (long) (rate * seconds);
		sched = calloc(total_rows, sizeof(int64_t));
		run_throughput(mon, 0);
	}
	else if (strcmp(argv[2], "count") == 0 && argc == 6)
	{
		batch = atoi(argv[5]);
		if (batch < 1 || atol(argv[4]) < 1 || atol(argv[4]) > atol(argv[3]))
			die("bad arguments");
		run_count(atol(argv[3]), atol(argv[4]));
	}
	else
		die("bad arguments");
	PQfinish(mon);
	return 0;
}
