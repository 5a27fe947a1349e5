/*-------------------------------------------------------------------------
 *
 * aw_args.h
 *	  The checks every SQL-callable function makes on its way in.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_args.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_ARGS_H
#define AW_ARGS_H

#include "fmgr.h"
#include "datatype/timestamp.h"

#include "aw_parked_set.h"		/* AwParkResult */

/* the largest max_rows a claim or a re-offer takes (README.md, SQL reference) */
#define AW_MAX_ROWS_LIMIT		1000000

/* a row's priority (1.2): higher is claimed first; the table's CHECK agrees */
#define AW_PRIORITY_MIN			(-100)
#define AW_PRIORITY_MAX			100

extern void aw_require_loaded(void);
extern void aw_begin_write(const char *fname);
extern TimestampTz aw_clock_plus(TimestampTz now, int64 us);
extern void aw_arg_token(FunctionCallInfo fcinfo, int argno, Datum *value, char *null);
extern void aw_warn_unserved_once(void);
extern char *aw_arg_key(FunctionCallInfo fcinfo, int argno);
extern char *aw_arg_topic(FunctionCallInfo fcinfo, int argno);
extern void aw_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name);
extern bool aw_interval_us(const Interval *iv, int64 *us);
extern int64 aw_arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *name);
extern Interval *aw_interval_from_us(int64 us);
/* the WARNING of a park the set had no room for (G6) */
extern void aw_warn_park_failed(AwParkResult r, const char *key, bool fenced);
extern int32 aw_arg_int_range(FunctionCallInfo fcinfo, int argno, const char *name,
							  int32 min, int32 max);

#endif							/* AW_ARGS_H */
