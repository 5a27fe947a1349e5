/*-------------------------------------------------------------------------
 *
 * unit_pulse_parse.c
 *	  Table-driven unit test for the capacity pulse parser.
 *
 *	  Built standalone by test/unit/run.sh with
 *	  "cc -Wall -Wextra -Werror" against src/pulse_parse.c.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  test/unit/unit_pulse_parse.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aw_pulse_parse.h"

/* len == USE_STRLEN means "use strlen(payload)" */
#define USE_STRLEN ((size_t) -1)

typedef struct PulseCase
{
	const char *payload;
	size_t		len;
	AwPulseParseResult expect;
	const char *topic;			/* expected topic on AW_PULSE_OK */
	int32_t		slots;			/* expected slots on AW_PULSE_OK */
} PulseCase;

static int	npassed = 0;
static int	nfailed = 0;

/* topic_out is followed by a guard area that must never be written */
#define GUARD_LEN 64
#define GUARD_BYTE 0x5A

/*
 * check_case
 *		Run one case and compare against the expectation.
 */
static void
check_case(const char *label, const char *payload, size_t len,
		   AwPulseParseResult expect, const char *topic, int32_t slots)
{
	char		buf[AW_TOPIC_MAXLEN + 1 + GUARD_LEN];
	int32_t		got_slots = -12345;
	AwPulseParseResult r;
	bool		ok = true;
	size_t		i;

	memset(buf, GUARD_BYTE, sizeof(buf));
	r = aw_parse_pulse(payload, len, buf, &got_slots);

	if (r != expect)
	{
		fprintf(stderr, "FAIL %s: result %d (%s), expected %d (%s)\n",
				label, (int) r, aw_pulse_parse_error(r),
				(int) expect, aw_pulse_parse_error(expect));
		ok = false;
	}
	else if (r == AW_PULSE_OK)
	{
		if (memchr(buf, '\0', AW_TOPIC_MAXLEN + 1) == NULL ||
			strcmp(buf, topic) != 0)
		{
			fprintf(stderr, "FAIL %s: topic mismatch, expected \"%s\"\n",
					label, topic);
			ok = false;
		}
		if (got_slots != slots)
		{
			fprintf(stderr, "FAIL %s: slots %d, expected %d\n",
					label, (int) got_slots, (int) slots);
			ok = false;
		}
	}

	for (i = AW_TOPIC_MAXLEN + 1; i < sizeof(buf); i++)
	{
		if ((unsigned char) buf[i] != GUARD_BYTE)
		{
			fprintf(stderr, "FAIL %s: wrote past topic_out\n", label);
			ok = false;
			break;
		}
	}

	if (ok)
		npassed++;
	else
		nfailed++;
}

/*
 * check_bool
 *		Record a simple boolean assertion.
 */
static void
check_bool(const char *label, bool cond)
{
	if (cond)
		npassed++;
	else
	{
		fprintf(stderr, "FAIL %s\n", label);
		nfailed++;
	}
}

static const PulseCase cases[] = {
	/* accepted */
	{"default", USE_STRLEN, AW_PULSE_OK, "default", 1},
	{"default:3", USE_STRLEN, AW_PULSE_OK, "default", 3},
	{"a.b-c_D9:1000000", USE_STRLEN, AW_PULSE_OK, "a.b-c_D9", 1000000},
	{"t:0007", USE_STRLEN, AW_PULSE_OK, "t", 7},
	{"t:1", USE_STRLEN, AW_PULSE_OK, "t", 1},
	{"t:0000000000000000000001", USE_STRLEN, AW_PULSE_OK, "t", 1},
	{"t:0001000000", USE_STRLEN, AW_PULSE_OK, "t", 1000000},
	{"t:999999", USE_STRLEN, AW_PULSE_OK, "t", 999999},
	{"-", USE_STRLEN, AW_PULSE_OK, "-", 1},
	{"...", USE_STRLEN, AW_PULSE_OK, "...", 1},
	/* only the first len bytes count: trailing junk is ignored */
	{"abc:12 junk", 6, AW_PULSE_OK, "abc", 12},
	{"abc\0xyz", 3, AW_PULSE_OK, "abc", 1},

	/* rejected */
	{"", USE_STRLEN, AW_PULSE_EMPTY, NULL, 0},
	{NULL, 0, AW_PULSE_EMPTY, NULL, 0},
	{":", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"t:", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{":5", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"t:-1", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:0", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:0000", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:abc", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:1000001", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:9999999", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:10000000", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:99999999999999999999", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:4294967297", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:1:2", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t::2", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"a b", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"\xc3\xbc", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},	/* "ü" */
	{"t: 5", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:5 ", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:+5", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{"t:0x10", USE_STRLEN, AW_PULSE_BAD_SLOTS, NULL, 0},
	{" t", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"t\n", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"a/b", USE_STRLEN, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"t\0", 2, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"\0", 1, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"a\0b:3", 5, AW_PULSE_BAD_TOPIC, NULL, 0},
	{"t:1\0", 4, AW_PULSE_BAD_SLOTS, NULL, 0},
};

int
main(void)
{
	char		topic63[AW_TOPIC_MAXLEN + 1];
	char		topic64[AW_TOPIC_MAXLEN + 2];
	char		buf[256];
	char	   *big;
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const PulseCase *c = &cases[i];
		char		label[128];
		size_t		len = c->len;

		if (len == USE_STRLEN)
			len = strlen(c->payload);
		snprintf(label, sizeof(label), "case %zu (\"%.40s\")", i,
				 c->payload ? c->payload : "(null)");
		check_case(label, c->payload, len, c->expect, c->topic, c->slots);
	}

	/* 63-byte topic accepted, 64-byte topic rejected */
	memset(topic63, 'x', AW_TOPIC_MAXLEN);
	topic63[AW_TOPIC_MAXLEN] = '\0';
	memset(topic64, 'y', AW_TOPIC_MAXLEN + 1);
	topic64[AW_TOPIC_MAXLEN + 1] = '\0';
	check_case("63-byte topic", topic63, AW_TOPIC_MAXLEN,
			   AW_PULSE_OK, topic63, 1);
	snprintf(buf, sizeof(buf), "%s:42", topic63);
	check_case("63-byte topic:42", buf, strlen(buf),
			   AW_PULSE_OK, topic63, 42);
	check_case("64-byte topic", topic64, AW_TOPIC_MAXLEN + 1,
			   AW_PULSE_BAD_TOPIC, NULL, 0);
	snprintf(buf, sizeof(buf), "%s:42", topic64);
	check_case("64-byte topic:42", buf, strlen(buf),
			   AW_PULSE_BAD_TOPIC, NULL, 0);

	/* length limit: 200 bytes is parsed, 201 and 7999 are too long */
	snprintf(buf, sizeof(buf), "t:%0198d", 5);
	check_case("200-byte payload", buf, 200, AW_PULSE_OK, "t", 5);
	snprintf(buf, sizeof(buf), "t:%0199d", 5);
	check_case("201-byte payload", buf, 201, AW_PULSE_TOO_LONG, NULL, 0);
	big = malloc(7999);
	if (big == NULL)
		return 2;
	memset(big, 'a', 7999);
	check_case("7999 x 'a'", big, 7999, AW_PULSE_TOO_LONG, NULL, 0);
	free(big);

	/* NULL output pointers are tolerated */
	check_bool("NULL outputs",
			   aw_parse_pulse("t:5", 3, NULL, NULL) == AW_PULSE_OK);

	/* aw_topic_name_valid directly */
	check_bool("valid: \"a\"", aw_topic_name_valid("a", 1));
	check_bool("valid: len 0 rejected", !aw_topic_name_valid("a", 0));
	check_bool("valid: NULL rejected", !aw_topic_name_valid(NULL, 3));
	check_bool("valid: ':' rejected", !aw_topic_name_valid("a:b", 3));
	check_bool("valid: 63", aw_topic_name_valid(topic63, AW_TOPIC_MAXLEN));
	check_bool("valid: 64 rejected",
			   !aw_topic_name_valid(topic64, AW_TOPIC_MAXLEN + 1));
	check_bool("valid: high bit rejected",
			   !aw_topic_name_valid("\xff", 1));

	/* every result has a non-empty description */
	check_bool("error OK", strlen(aw_pulse_parse_error(AW_PULSE_OK)) > 0);
	check_bool("error EMPTY",
			   strlen(aw_pulse_parse_error(AW_PULSE_EMPTY)) > 0);
	check_bool("error BAD_TOPIC",
			   strlen(aw_pulse_parse_error(AW_PULSE_BAD_TOPIC)) > 0);
	check_bool("error BAD_SLOTS",
			   strcmp(aw_pulse_parse_error(AW_PULSE_BAD_SLOTS),
					  "slot count is not an integer between 1 and 1000000") == 0);
	check_bool("error TOO_LONG",
			   strlen(aw_pulse_parse_error(AW_PULSE_TOO_LONG)) > 0);
	check_bool("error unknown",
			   aw_pulse_parse_error((AwPulseParseResult) 99) != NULL);

	printf("pulse_parse unit: %d passed, %d failed\n", npassed, nfailed);
	return nfailed == 0 ? 0 : 1;
}
