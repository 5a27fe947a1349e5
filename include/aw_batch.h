/*-------------------------------------------------------------------------
 *
 * aw_batch.h
 *	  Settles of many leased rows in one statement (src/batch.c):
 *	  complete, fail, park and dead_letter over arrays of keys and lease
 *	  tokens, with or without the next rows taken in the same statement.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_batch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_BATCH_H
#define AW_BATCH_H

/*
 * The most keys one call settles.  A call holds one record per row settled
 * until its transaction ends, and its statement locks every row it
 * settles: a bound keeps both to what a dispatcher's batch needs.
 */
#define AW_BATCH_MAX_KEYS 10000

#endif							/* AW_BATCH_H */
