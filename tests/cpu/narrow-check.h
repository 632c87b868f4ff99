/*
 * What the narrow dtypes' math-layer test (test-reduce-narrow.c, and its
 * prefix sums and segments in test-reduce-narrow-ops.c) shares: the
 * dtypes, the random generator and the count of checks, and the test's
 * own widening by the formats' definitions (tests/narrow-formats.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "math/reduce.h"
#include "tests/narrow-formats.h"

/* Sizes around the block and tile edges (GR_REDUCE_BLOCK,
 * GR_CUMSUM_TILE), the largest EDGE_MAX: at an even and an odd address. */
#define N_EDGE_SIZES 13
#define EDGE_MAX (3 * GR_REDUCE_BLOCK + 1)
extern const size_t edge_sizes[N_EDGE_SIZES];

/* the eight narrow dtypes */
extern const gr_dtype narrow[8];
extern unsigned long checks;

uint64_t rnd(void);

const test_format *format_of(gr_dtype dt);
bool is_narrow_float(gr_dtype dt);
unsigned bits_of_dtype(gr_dtype dt);
/* Every value of these formats is a float: exact. */
float decode(const test_format *f, uint32_t b);
/* Element i of the narrow array at p, its raw bits; and b into it. */
uint32_t raw(gr_dtype dt, const uint8_t *p, size_t i);
void put(gr_dtype dt, uint8_t *p, size_t i, uint32_t b);
/* i32, u32 or f32: what dt widens to */
gr_dtype wide_of(gr_dtype dt);
/* n elements of dt at p into 4-byte elements of wide_of(dt) at out. */
void widen(gr_dtype dt, const uint8_t *p, size_t n, void *out);
/* The same 8 bytes, or both NaN for a float result. */
bool same_number(gr_kind kind, uint64_t a, uint64_t b);
/* A random element: any bits, but a NaN or infinity only one time in
 * about 2000 (specials). */
uint32_t random_bits(gr_dtype dt, bool specials);

/* test-reduce-narrow-ops.c: prefix sums as the daemon cuts them, and
 * segments, against the same over the widened elements */
void check_cumsum(gr_dtype dt);
void check_segments(gr_dtype dt);
