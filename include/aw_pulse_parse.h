/*-------------------------------------------------------------------------
 *
 * aw_pulse_parse.h
 *	  Parser for the payload of a raw capacity pulse
 *	  (NOTIFY aion_wake_capacity).
 *
 *	  The payload grammar is "topic" or "topic:slots".  This header
 *	  deliberately includes no PostgreSQL headers, so that the parser can be
 *	  compiled standalone for unit tests and fuzzing as well as inside the
 *	  extension.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_pulse_parse.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_PULSE_PARSE_H
#define AW_PULSE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* AW_TOPIC_MAXLEN */
#include "aw_names.h"

/* Largest slot count a single pulse may announce */
#define AW_PULSE_MAX_SLOTS 1000000

/* Payloads longer than this many bytes are rejected outright */
#define AW_PULSE_MAX_PAYLOAD 200

typedef enum AwPulseParseResult
{
	AW_PULSE_OK = 0,
	AW_PULSE_EMPTY,				/* zero-length payload */
	AW_PULSE_BAD_TOPIC,			/* topic missing, too long or bad bytes */
	AW_PULSE_BAD_SLOTS,			/* slot part not an integer in range */
	AW_PULSE_TOO_LONG			/* payload exceeds AW_PULSE_MAX_PAYLOAD */
} AwPulseParseResult;

/*
 * Parse "payload" (len bytes, not necessarily NUL-terminated).  On
 * AW_PULSE_OK, topic_out (which must have room for AW_TOPIC_MAXLEN + 1
 * bytes) receives the NUL-terminated topic and *slots_out the slot count
 * (1 when the payload has no ":slots" part).  On failure the outputs are
 * unspecified.  Never reads beyond len bytes of payload, nor writes beyond
 * AW_TOPIC_MAXLEN + 1 bytes of topic_out.
 */
extern AwPulseParseResult aw_parse_pulse(const char *payload, size_t len,
										 char *topic_out, int32_t *slots_out);

/* True iff name is 1..AW_TOPIC_MAXLEN bytes of [A-Za-z0-9_.-] */
extern bool aw_topic_name_valid(const char *name, size_t len);

/* Short lower-case English description of a parse result */
extern const char *aw_pulse_parse_error(AwPulseParseResult r);

#endif							/* AW_PULSE_PARSE_H */
