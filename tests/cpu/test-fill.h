/*
 * Seeded random arrays for the CPU tests of whole requests (test-segments.c,
 * test-cumsum.c): a xorshift64 generator, and elements of every dtype
 * spread as each test asks, mostly small integers and floats over a range
 * of binades, with a share of any bits.
 */
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "math/reduce.h"

/* xorshift64 (13, 7, 17) from *state: the same data on every run. */
static inline uint64_t test_rnd(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* How test_fill() spreads each dtype's elements. */
typedef struct test_fill_spec {
	/* i32: one element in i32_wide has any 32 bits (1: all), the
	 * others lie in [-1000, 1000]; i64 and u64: one in i64_wide has
	 * any 64 bits, the others lie below i64_below */
	uint64_t i32_wide;
	uint64_t i64_wide;
	uint64_t i64_below;
	uint64_t f32_binades; /* floats: exponents over this many binades around 2^0 */
	uint64_t f64_binades;
} test_fill_spec;

/* n random elements of dt at data (u32: any bits), from *state. */
static inline void test_fill(const test_fill_spec *spec, uint64_t *state, gr_dtype dt, void *data,
                             size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = test_rnd(state);
		switch (dt) {
		case GR_DT_I32:
			((int32_t *)data)[i] =
			    (int32_t)(r % spec->i32_wide ? (int64_t)(r % 2001) - 1000
			                                 : (int64_t)(int32_t)r);
			break;
		case GR_DT_U32:
			((uint32_t *)data)[i] = (uint32_t)r;
			break;
		case GR_DT_I64:
		case GR_DT_U64:
			((uint64_t *)data)[i] = r % spec->i64_wide ? r % spec->i64_below : r;
			break;
		case GR_DT_F32:
			((float *)data)[i] = (float)ldexp((double)(int64_t)(r >> 11) / 9e15,
			                                  (int)(r % spec->f32_binades) -
			                                      (int)(spec->f32_binades / 2));
			break;
		case GR_DT_F64:
			((double *)data)[i] =
			    ldexp((double)(int64_t)r / 9e18,
			          (int)(r % spec->f64_binades) - (int)(spec->f64_binades / 2));
			break;
		default:
			break;
		}
	}
}
