/*
 * Assertions for the proto tests: they stay on in every build type and
 * report where they failed.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			abort();                                                 \
		}                                                                \
	} while (0)

#define CHECK_MSG(cond, ...)                                                     \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__,   \
				__LINE__, #cond);                                \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
			abort();                                                 \
		}                                                                \
	} while (0)

/* Append the bytes written in hex ("93 00 01", spaces ignored) to a gr_buf. */
#define HEX(b, s) check_hex((b), (s))

#include "proto/mp.h"

static inline void check_hex(gr_buf *b, const char *s)
{
	int hi = -1;

	for (; *s; s++) {
		int v;

		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			v = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			v = *s - 'A' + 10;
		else
			continue;
		if (hi < 0) {
			hi = v;
		} else {
			uint8_t byte = (uint8_t)(hi << 4 | v);

			CHECK(gr_buf_append(b, &byte, 1) == 0);
			hi = -1;
		}
	}
	CHECK(hi < 0);
}
