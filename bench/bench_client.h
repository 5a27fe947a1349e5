/*
 * bench/bench_client.h -- the client helpers the C benchmark probes share
 * (bench/latency/latency.c, bench/topics/topics.c): dying with a message,
 * the monotonic clock, running a statement and checking what it returned,
 * and nearest-rank percentiles.  Header-only, so that each probe still
 * builds from its own file with one gcc command.  The includer defines
 * progname (for die()) and includes <libpq-fe.h> and the C headers first.
 */
#ifndef BENCH_CLIENT_H
#define BENCH_CLIENT_H

static void
die(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
sleep_ns(int64_t ns)
{
	struct timespec ts;

	if (ns <= 0)
		return;
	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static PGresult *
run(PGconn *conn, ExecStatusType expect, const char *sql, int nparams,
	const char *const *params)
{
	PGresult   *res;

	if (nparams > 0)
		res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	else
		res = PQexec(conn, sql);
	if (PQresultStatus(res) != expect)
		die("\"%s\" failed: %s", sql, PQerrorMessage(conn));
	return res;
}

static void
run_value(PGconn *conn, const char *sql, int nparams, const char *const *params,
		  char *out, size_t outlen)
{
	PGresult   *res = run(conn, PGRES_TUPLES_OK, sql, nparams, params);

	if (PQntuples(res) < 1)
		die("\"%s\" returned no row", sql);
	snprintf(out, outlen, "%s", PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
	PQclear(res);
}

static bool
run_bool(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
	char		v[16];

	run_value(conn, sql, nparams, params, v, sizeof(v));
	return strcmp(v, "t") == 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* nearest-rank percentile of sorted values */
static double
pct(const double *v, int n, double q)
{
	int			k = (int) (q * n + 0.999999);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

#endif							/* BENCH_CLIENT_H */
