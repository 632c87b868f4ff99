/*
 * The request parser's cases: each an input in mk.h notation and the
 * harness's line it must give (harness.h), one at least for every rule of
 * PROTOCOL.md and every hostile input we know of. test-request.c runs
 * them in every style, and its fuzz loop mutates their bytes.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct req_case {
	const char *input;  /* mk.h notation */
	const char *expect; /* fnmatch pattern of the harness's line */
	uint64_t max_data;  /* 0: the default limit */
	uint64_t reject_over;
} req_case;

/* Input notation for the cases: a ping to end a stream, the events it
 * adds, and a reduce request of params m followed by the ping. */
#define PING "[0, 99, \"ping\", []]"
#define AFTER "; DONE 99 ping; END idle"
#define RED(m) "[0, 1, \"reduce\", [" m "]] " PING

extern const req_case req_cases[];
extern const size_t req_n_cases;
