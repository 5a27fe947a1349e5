/*-------------------------------------------------------------------------
 *
 * pulse_parse.c
 *	  Parse the payload of a raw capacity pulse (NOTIFY aion_wake_capacity).
 *
 *	  The payload arrives from arbitrary SQL sessions, so it is untrusted
 *	  input.  The parser is kept in its own file as a pure function with no
 *	  PostgreSQL dependencies (no palloc, no elog, no backend headers) so
 *	  that it can be compiled standalone, unit-tested and fuzzed with
 *	  libFuzzer/ASan/UBSan (see test/unit/ and test/fuzz/), while the extension compiles
 *	  exactly the same code.
 *
 *	  Grammar: payload := topic [ ':' slots ]
 *	           topic   := 1..63 bytes of [A-Za-z0-9_.-]
 *	           slots   := decimal digits, value 1..1000000
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/pulse_parse.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "aw_pulse_parse.h"

/* Maximum significant digits of a slot count (AW_PULSE_MAX_SLOTS has 7) */
#define AW_SLOTS_MAXDIGITS 7

/*
 * aw_topic_char_valid
 *		True iff c may appear in a topic name: [A-Za-z0-9_.-].
 *
 * Written out explicitly rather than with <ctype.h> so the result does not
 * depend on the locale or on the signedness of char.
 */
static bool
aw_topic_char_valid(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ||
		(c >= 'a' && c <= 'z') ||
		(c >= '0' && c <= '9') ||
		c == '_' || c == '.' || c == '-';
}

/*
 * aw_topic_name_valid
 *		True iff name is 1..AW_TOPIC_MAXLEN bytes of [A-Za-z0-9_.-].
 *
 * Only the first len bytes of name are examined; name need not be
 * NUL-terminated.  An embedded NUL byte makes the name invalid.
 */
bool
aw_topic_name_valid(const char *name, size_t len)
{
	size_t		i;

	if (name == NULL || len == 0 || len > AW_TOPIC_MAXLEN)
		return false;

	for (i = 0; i < len; i++)
	{
		if (!aw_topic_char_valid((unsigned char) name[i]))
			return false;
	}
	return true;
}

/*
 * aw_parse_slots
 *		Parse the slot count part of a payload (the bytes after ':').
 *
 * Accepts only decimal digits (no sign, no whitespace), with any number of
 * leading zeros, whose value is between 1 and AW_PULSE_MAX_SLOTS.  At most
 * AW_SLOTS_MAXDIGITS significant digits are accumulated, so the arithmetic
 * cannot overflow.
 */
static bool
aw_parse_slots(const char *s, size_t len, int32_t *slots_out)
{
	size_t		i = 0;
	int32_t		value = 0;

	if (len == 0)
		return false;

	/* every byte must be a digit; this also rejects a second ':' */
	for (i = 0; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
	}

	/* skip leading zeros */
	i = 0;
	while (i < len && s[i] == '0')
		i++;

	if (len - i > AW_SLOTS_MAXDIGITS)
		return false;

	for (; i < len; i++)
		value = value * 10 + (int32_t) (s[i] - '0');

	if (value < 1 || value > AW_PULSE_MAX_SLOTS)
		return false;

	*slots_out = value;
	return true;
}

/*
 * aw_parse_pulse
 *		Parse a capacity pulse payload of the form "topic" or "topic:slots".
 *
 * payload is len bytes long and need not be NUL-terminated.  On success,
 * the NUL-terminated topic is copied into topic_out (which must have room
 * for AW_TOPIC_MAXLEN + 1 bytes), *slots_out is set to the slot count (1 if
 * there is no ":slots" part), and AW_PULSE_OK is returned.  Otherwise an
 * error code is returned and the outputs are left unspecified.  Either
 * output pointer may be NULL if the caller does not need it.
 */
AwPulseParseResult
aw_parse_pulse(const char *payload, size_t len,
			   char *topic_out, int32_t *slots_out)
{
	const char *colon;
	size_t		topic_len;
	int32_t		slots = 1;

	if (payload == NULL || len == 0)
		return AW_PULSE_EMPTY;

	if (len > AW_PULSE_MAX_PAYLOAD)
		return AW_PULSE_TOO_LONG;

	colon = memchr(payload, ':', len);
	topic_len = (colon != NULL) ? (size_t) (colon - payload) : len;

	if (!aw_topic_name_valid(payload, topic_len))
		return AW_PULSE_BAD_TOPIC;

	if (colon != NULL &&
		!aw_parse_slots(colon + 1, len - topic_len - 1, &slots))
		return AW_PULSE_BAD_SLOTS;

	/* topic_len <= AW_TOPIC_MAXLEN, guaranteed by aw_topic_name_valid */
	if (topic_out != NULL)
	{
		memcpy(topic_out, payload, topic_len);
		topic_out[topic_len] = '\0';
	}
	if (slots_out != NULL)
		*slots_out = slots;

	return AW_PULSE_OK;
}

/*
 * aw_pulse_parse_error
 *		Short lower-case English description of a parse result, suitable
 *		for use in a log message.  Never returns NULL.
 */
const char *
aw_pulse_parse_error(AwPulseParseResult r)
{
	switch (r)
	{
		case AW_PULSE_OK:
			return "no error";
		case AW_PULSE_EMPTY:
			return "payload is empty";
		case AW_PULSE_BAD_TOPIC:
			return "topic is not 1 to 63 bytes of [A-Za-z0-9_.-]";
		case AW_PULSE_BAD_SLOTS:
			return "slot count is not an integer between 1 and 1000000";
		case AW_PULSE_TOO_LONG:
			return "payload is longer than 200 bytes";
	}
	return "unrecognized pulse parse result";
}
