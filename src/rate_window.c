/*-------------------------------------------------------------------------
 *
 * rate_window.c
 *	  The log of a rated topic's recent starts (aw_rate_window.h): what
 *	  makes a rate exact.  Pure C, no PostgreSQL header, so that
 *	  test/unit/unit_rate_window.c can check it standalone.
 *
 *	  The window is half-open: a start at time t counts in every window
 *	  [w, w + per) with w <= t < w + per, so it stops counting at t + per
 *	  exactly, and a start at a is admitted while the starts logged in
 *	  (a - per, a] and those reserved are fewer than max_starts.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/rate_window.c
 *
 *-------------------------------------------------------------------------
 */
#include "aw_rate_window.h"

#include <string.h>

/* An empty log. */
void
aw_rate_window_init(AwRateWindow *w)
{
	memset(w, 0, sizeof(*w));
}

static inline AwRateRun *
aw_rate_run(AwRateWindow *w, int32_t i)
{
	return &w->runs[(w->head + i) % AW_RATE_LOG];
}

/* Drop the runs whose last start has left the window that ends at now. */
void
aw_rate_window_expire(AwRateWindow *w, int64_t now, int64_t per)
{
	while (w->count > 0)
	{
		AwRateRun  *r = aw_rate_run(w, 0);

		if (r->last > now - per)
			break;
		w->in_window -= r->n;
		w->head = (w->head + 1) % AW_RATE_LOG;
		w->count--;
	}
	if (w->count == 0)
		w->in_window = 0;
}

/*
 * Log n starts made at time at (never earlier than the last logged: the
 * caller takes its clock under the lock that guards the log).  They join
 * the newest run when they come at its last time; when max_starts is more
 * than the ring can log one by one, when they come within per /
 * AW_RATE_LOG of its first; and when the ring is full.  Joining moves the
 * run's last start later, which only makes the rate stricter.
 */
void
aw_rate_window_log(AwRateWindow *w, int64_t at, int64_t n, int64_t per, int64_t max_starts)
{
	if (n <= 0)
		return;
	if (w->count > 0)
	{
		AwRateRun  *newest = aw_rate_run(w, w->count - 1);

		if (at < newest->last)
			at = newest->last;
		if (at == newest->last || w->count == AW_RATE_LOG ||
			(max_starts > AW_RATE_LOG && at - newest->first < per / AW_RATE_LOG))
		{
			newest->last = at;
			newest->n += n;
			w->in_window += n;
			return;
		}
	}
	{
		AwRateRun  *r = &w->runs[(w->head + w->count) % AW_RATE_LOG];

		r->first = r->last = at;
		r->n = n;
		w->count++;
		w->in_window += n;
	}
}

/* Starts that may begin at now: never negative. */
int64_t
aw_rate_window_free(AwRateWindow *w, int64_t now, int64_t per, int64_t max_starts,
					int64_t reserved)
{
	int64_t		free_starts;

	aw_rate_window_expire(w, now, per);
	free_starts = max_starts - w->in_window - reserved;
	return free_starts > 0 ? free_starts : 0;
}

/*
 * When the next start may begin, the window having been expired to the
 * present and found full: the moment enough runs have left it.  Returns 0
 * when no run leaving frees a start, because reservations alone fill the
 * window; their return is then the event that frees one.
 */
int64_t
aw_rate_window_next(const AwRateWindow *w, int64_t per, int64_t max_starts,
					int64_t reserved)
{
	int64_t		left = w->in_window;
	int32_t		i;

	for (i = 0; i < w->count; i++)
	{
		const AwRateRun *r = &w->runs[(w->head + i) % AW_RATE_LOG];

		left -= r->n;
		if (left + reserved < max_starts)
			return r->last + per;
	}
	return 0;
}
