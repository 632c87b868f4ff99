/*
 * The proto tests' helpers: the shared assertions, and hex literals.
 */
#pragma once

#include "tests/check.h"

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
