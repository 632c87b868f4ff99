/*
 * The narrow float formats as their specifications define them (IEEE 754
 * binary16; bfloat16, the top half of a binary32; OCP 8-bit E4M3 "fn",
 * whose only NaNs are S.1111.111 and which has no infinities; OCP E5M2,
 * the top byte of a binary16), for the tests that check the daemon's
 * widening and gpuredctl's rounding: written from the definitions, not
 * from math/widen.c or client/ctl-input.c.
 */
#pragma once

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct test_format {
	const char *name; /* the wire name */
	unsigned ebits;   /* exponent field */
	unsigned mbits;   /* fraction field */
	int bias;
	bool ieee; /* the top exponent field is infinity (fraction 0) and NaNs */
} test_format;

static const test_format test_formats[] = {
	{ "f16", 5, 10, 15, true },
	{ "bf16", 8, 7, 127, true },
	{ "f8e4m3", 4, 3, 7, false },
	{ "f8e5m2", 5, 2, 15, true },
};

/* The format of the dtype named name, or NULL (not a narrow float). */
static inline const test_format *test_format_named(const char *name)
{
	for (size_t i = 0; i < sizeof(test_formats) / sizeof(test_formats[0]); i++)
		if (name && strcmp(name, test_formats[i].name) == 0)
			return &test_formats[i];
	return NULL;
}

/* An element's exact value: (-1)^neg * m * 2^e when finite. */
typedef enum test_class {
	TEST_FINITE,
	TEST_INF,
	TEST_NAN,
} test_class;

typedef struct test_value {
	test_class cls;
	bool neg;
	uint32_t m;
	int e;
} test_value;

static inline test_value test_decode(const test_format *f, uint32_t bits)
{
	const uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
	const uint32_t ef = bits >> f->mbits & emask, frac = bits & mmask;
	test_value v = { .cls = TEST_FINITE, .neg = (bits >> (f->ebits + f->mbits) & 1) != 0 };

	if (f->ieee && ef == emask) {
		v.cls = frac == 0 ? TEST_INF : TEST_NAN;
	} else if (!f->ieee && ef == emask && frac == mmask) {
		v.cls = TEST_NAN;
	} else if (ef == 0) { /* zero and subnormals: no implicit bit */
		v.m = frac;
		v.e = 1 - f->bias - (int)f->mbits;
	} else {
		v.m = frac | 1u << f->mbits;
		v.e = (int)ef - f->bias - (int)f->mbits;
	}
	return v;
}

/* The value as a double (exact: a few bits within a double's range). */
static inline double test_value_double(test_value v)
{
	double d = v.cls == TEST_NAN ? NAN : v.cls == TEST_INF ? INFINITY : ldexp(v.m, v.e);

	return v.neg ? -d : d;
}

static inline double test_decode_double(const test_format *f, uint32_t bits)
{
	return test_value_double(test_decode(f, bits));
}
