/*-------------------------------------------------------------------------
 *
 * aw_rate_window.h
 *	  The log of a rated topic's recent starts, from which a rate
 *	  ("at most max_starts starts in any window of length per") is
 *	  enforced exactly: a start at time a is admitted only while the
 *	  starts logged in (a - per, a], plus the starts reserved by claims in
 *	  progress, are fewer than max_starts.
 *
 *	  The log is a ring of at most AW_RATE_LOG entries, each a run of
 *	  starts (its first and last time, and how many).  A topic whose
 *	  max_starts fits the ring logs every start at its own time, so the
 *	  window is exact.  A larger max_starts would need more entries than
 *	  the ring holds: its starts are grouped, a run taking starts for
 *	  per / AW_RATE_LOG after its first, and a run counts until its last
 *	  start leaves the window.  Counting a start as later than it was is
 *	  safe (it leaves the window later); it admits at most 1/AW_RATE_LOG
 *	  of a window fewer starts than the rate allows.
 *
 *	  The caller guards a window with its own lock.  This header includes
 *	  no PostgreSQL headers, so that the log can be compiled standalone for
 *	  its unit test (test/unit/unit_rate_window.c) as well as inside the
 *	  extension.  Times are microseconds, as TimestampTz.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_rate_window.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_RATE_WINDOW_H
#define AW_RATE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#define AW_RATE_LOG 256

typedef struct AwRateRun
{
	int64_t		first;			/* the time of its first start */
	int64_t		last;			/* ... and of its last: it counts until
								 * last + per */
	int64_t		n;				/* starts */
} AwRateRun;

typedef struct AwRateWindow
{
	int32_t		head;			/* the oldest run */
	int32_t		count;			/* runs in the ring */
	int64_t		in_window;		/* starts of the runs in the ring */
	AwRateRun	runs[AW_RATE_LOG];
} AwRateWindow;

extern void aw_rate_window_init(AwRateWindow *w);
extern void aw_rate_window_expire(AwRateWindow *w, int64_t now, int64_t per);
extern void aw_rate_window_log(AwRateWindow *w, int64_t at, int64_t n, int64_t per,
							   int64_t max_starts);
extern int64_t aw_rate_window_free(AwRateWindow *w, int64_t now, int64_t per,
								   int64_t max_starts, int64_t reserved);
extern int64_t aw_rate_window_next(const AwRateWindow *w, int64_t per,
								   int64_t max_starts, int64_t reserved);

#endif							/* AW_RATE_WINDOW_H */
