/*-------------------------------------------------------------------------
 *
 * fuzz_pulse_parse.c
 *	  libFuzzer harness for the capacity pulse parser.
 *
 *	  Built by test/fuzz/run.sh with
 *	  "clang -fsanitize=fuzzer,address,undefined".  ASan catches reads past
 *	  the input (libFuzzer hands us an exactly-sized heap buffer) and writes
 *	  past the exactly-sized topic buffer; the checks below abort() when an
 *	  accepted payload violates the parser's documented invariants.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  test/fuzz/fuzz_pulse_parse.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aw_pulse_parse.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * LLVMFuzzerTestOneInput
 *		Parse one input and check invariants of the result.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *topic;
	int32_t		slots = 0;
	AwPulseParseResult r;
	const char *msg;

	/* exactly AW_TOPIC_MAXLEN + 1 bytes, so ASan flags any overrun */
	topic = malloc(AW_TOPIC_MAXLEN + 1);
	if (topic == NULL)
		abort();

	r = aw_parse_pulse((const char *) data, size, topic, &slots);

	msg = aw_pulse_parse_error(r);
	if (msg == NULL || msg[0] == '\0')
		abort();

	switch (r)
	{
		case AW_PULSE_OK:
			{
				size_t		tlen;

				if (memchr(topic, '\0', AW_TOPIC_MAXLEN + 1) == NULL)
					abort();
				tlen = strlen(topic);
				if (tlen > AW_TOPIC_MAXLEN)
					abort();
				if (!aw_topic_name_valid(topic, tlen))
					abort();
				if (slots < 1 || slots > AW_PULSE_MAX_SLOTS)
					abort();
				/* the topic is the payload prefix up to ':' or the end */
				if (tlen > size || memcmp(topic, data, tlen) != 0)
					abort();
				if (tlen < size && data[tlen] != ':')
					abort();
				if (tlen == size && slots != 1)
					abort();
				if (size > AW_PULSE_MAX_PAYLOAD)
					abort();
				break;
			}
		case AW_PULSE_EMPTY:
			if (size != 0)
				abort();
			break;
		case AW_PULSE_TOO_LONG:
			if (size <= AW_PULSE_MAX_PAYLOAD)
				abort();
			break;
		case AW_PULSE_BAD_TOPIC:
		case AW_PULSE_BAD_SLOTS:
			if (size == 0 || size > AW_PULSE_MAX_PAYLOAD)
				abort();
			break;
		default:
			abort();
	}

	free(topic);
	return 0;
}
