/*
 * The exact accumulator behind float sums and sums of squares, as
 * reduce.c uses it (the public side, limbs included, is in reduce.h):
 * starting, combining and rounding a partial whose value is exact, and the
 * block kernels that fill one, built for each ISA like the other kernels.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "daemon/reduce.h"
#include "daemon/simd.h"

/* Make ret, the identity of a float sum (sq false) or sumsq, exact and empty. */
void xsum_identity(gr_partial *ret, bool sq);

/* acc = acc (+) next, both float sum (or both sumsq) partials of count > 0. */
void xsum_combine(gr_partial *acc, const gr_partial *next);

/* The exact value of a float sum partial, rounded once (to nearest, ties to even). */
double xsum_round(const gr_partial *p);

/*
 * The block kernels of gr_reduce_block(): ret holds the identity, n >= 1
 * elements at p (any alignment).
 */
#define XSUM_DECLARE(NAME)                                                                         \
	void xsum_##NAME##_base(const unsigned char *p, size_t n, gr_partial *ret);                \
	GR_AVX2_ONLY(                                                                              \
	    GR_AVX2 void xsum_##NAME##_avx2(const unsigned char *p, size_t n, gr_partial *ret);)
XSUM_DECLARE(sum_f32)
XSUM_DECLARE(sum_f64)
XSUM_DECLARE(sumsq_f32)
XSUM_DECLARE(sumsq_f64)
#undef XSUM_DECLARE
