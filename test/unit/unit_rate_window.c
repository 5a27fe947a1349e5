/*
 * unit_rate_window.c
 *	  Unit test of the log of recent starts (src/rate_window.c): a
 *	  randomized run of admissions against a brute-force sliding window.
 *	  With max_starts at most AW_RATE_LOG every admission must be exactly
 *	  what the brute force allows; above it, never more, and under a
 *	  backlog at least 99 % of the rate; and the moment aw_rate_window_next names must admit a start
 *	  while the moment before it does not.
 *
 * Copyright (c) 2026, aion_wake authors
 */
#include <stdio.h>
#include <stdlib.h>

#include "aw_rate_window.h"

static int	failures = 0;
static int	checks = 0;

#define CHECK(cond, ...) \
	do { checks++; if (!(cond)) { failures++; printf("not ok: " __VA_ARGS__); printf("\n"); } } while (0)

#define MAX_LOG 200000

/* brute force: starts in (now - per, now] */
static int64_t
brute_in_window(const int64_t *log, int n, int64_t now, int64_t per)
{
	int64_t		c = 0;
	int			i;

	for (i = 0; i < n; i++)
		if (log[i] > now - per && log[i] <= now)
			c++;
	return c;
}

static int64_t starts[MAX_LOG];

static void
run(int64_t max_starts, int64_t per, unsigned seed, int steps)
{
	static AwRateWindow w;
	int			n = 0;
	int64_t		now = 1000000;
	int64_t		admitted = 0;
	int			s;

	srand(seed);
	aw_rate_window_init(&w);
	for (s = 0; s < steps && n < MAX_LOG - 1000; s++)
	{
		int64_t		want = 1 + rand() % 4;
		int64_t		got;
		int64_t		exact = max_starts - brute_in_window(starts, n, now, per);
		int64_t		i;

		if (exact < 0)
			exact = 0;
		got = aw_rate_window_free(&w, now, per, max_starts, 0);
		if (max_starts <= AW_RATE_LOG)
			CHECK(got == exact, "max %lld per %lld at %lld: free %lld, exact %lld",
				  (long long) max_starts, (long long) per, (long long) now,
				  (long long) got, (long long) exact);
		else
			CHECK(got <= exact, "max %lld: free %lld over exact %lld",
				  (long long) max_starts, (long long) got, (long long) exact);
		if (got > want)
			got = want;
		for (i = 0; i < got; i++)
			starts[n++] = now;
		aw_rate_window_log(&w, now, got, per, max_starts);
		admitted += got;
		if (aw_rate_window_free(&w, now, per, max_starts, 0) == 0)
		{
			int64_t		next = aw_rate_window_next(&w, per, max_starts, 0);

			CHECK(next > now, "next %lld not after now %lld", (long long) next, (long long) now);
			CHECK(aw_rate_window_free(&w, next - 1, per, max_starts, 0) == 0,
				  "a start admitted before next");
			CHECK(brute_in_window(starts, n, next, per) < max_starts,
				  "next %lld is not a moment a start may begin", (long long) next);
			/* jump there half the time, else move on a little */
			if (rand() % 2)
			{
				now = next;
				continue;
			}
		}
		now += rand() % (per / 4 + 1);
	}
}

/*
 * A backlog: a claim every per / 1000 takes all it may.  Over 20 periods
 * the starts reach at least 99 % of the rate, and no window is over it.
 */
static void
saturate(int64_t max_starts, int64_t per)
{
	static AwRateWindow w;
	int64_t		now = 5000;
	int64_t		end = now + 20 * per;
	int64_t		admitted = 0;
	int64_t		step = per / 1000 > 0 ? per / 1000 : 1;

	aw_rate_window_init(&w);
	for (; now < end; now += step)
	{
		int64_t		got = aw_rate_window_free(&w, now, per, max_starts, 0);

		aw_rate_window_log(&w, now, got, per, max_starts);
		admitted += got;
		CHECK(w.in_window <= max_starts, "over the rate");
	}
	CHECK(admitted >= 0.99 * 20 * max_starts,
		  "max %lld per %lld: %lld starts in 20 periods", (long long) max_starts,
		  (long long) per, (long long) admitted);
}

int
main(void)
{
	static const int64_t maxes[] = {1, 2, 5, 100, 256, 257, 1000, 5000};
	static const int64_t pers[] = {1000, 999983, 10000000, 86400000000LL};
	size_t		a;
	size_t		b;

	for (a = 0; a < sizeof(maxes) / sizeof(maxes[0]); a++)
		for (b = 0; b < sizeof(pers) / sizeof(pers[0]); b++)
			run(maxes[a], pers[b], (unsigned) (a * 31 + b), 20000);

	for (a = 0; a < sizeof(maxes) / sizeof(maxes[0]); a++)
		saturate(maxes[a], 10000000);

	/* reservations count, and their return is the event: next is 0 */
	{
		static AwRateWindow w;

		aw_rate_window_init(&w);
		CHECK(aw_rate_window_free(&w, 10, 100, 2, 2) == 0, "reservations fill the window");
		CHECK(aw_rate_window_next(&w, 100, 2, 2) == 0, "no run leaving frees a start");
		aw_rate_window_log(&w, 10, 1, 100, 2);
		CHECK(aw_rate_window_free(&w, 109, 100, 2, 1) == 0, "logged and reserved");
		CHECK(aw_rate_window_next(&w, 100, 2, 1) == 110, "frees at 110");
		CHECK(aw_rate_window_free(&w, 110, 100, 2, 1) == 1, "half-open: free at 110");
	}
	printf("unit_rate_window: %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}
