/*-------------------------------------------------------------------------
 *
 * aw_names.h
 *	  How long a dispatch key and a topic name may be.
 *
 *	  The SQL interface (args.c), the NOTIFY parser (pulse_parse.c) and
 *	  every structure that keeps a key or a topic in shared memory size
 *	  their buffers from these.  This header includes nothing, not even
 *	  PostgreSQL's, so that the parser can be compiled standalone for the
 *	  unit tests and fuzzing.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_names.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_NAMES_H
#define AW_NAMES_H

/* Longest dispatch key, in bytes, not counting the terminator */
#define AW_KEY_MAXLEN			255

/* Longest topic name, in bytes, not counting the terminator */
#define AW_TOPIC_MAXLEN			63

#endif							/* AW_NAMES_H */
