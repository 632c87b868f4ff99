/*
 * The GPU's exact results as the daemon's partials (math/reduce.h): an
 * exact sum (exact.h) as a float sum's or sumsq's, and a moments launch's
 * sums and keys (moments.h) as a moments partial, so that they round, and
 * combine with other chunks', as the CPU's do.
 */
#pragma once

#include <stdint.h>

#include "cuda/exact.h"
#include "cuda/moments.h"
#include "math/reduce.h"

/* *ret = the partial of op (sum or sumsq) over n float elements of dt
 * whose exact sum the kernel left in *s. */
void cuda_exact_partial(const gr_exact_sum *s, gr_op op, gr_dtype dt, uint64_t n,
			gr_partial *ret);

/* *ret = the moments partial of n >= 1 elements of dt whose moments
 * launch left *m. */
void cuda_moments_partial(const gr_moments_sums *m, gr_dtype dt, uint64_t n, gr_partial *ret);

/* Add the fixed-point number sum(d[i] 2^(lsb + 32 i)), i < n <=
 * GR_EXACT_DIGITS, into p's accumulator, exactly, and flags (GR_EXACT_NAN,
 * _PINF, _NINF, _NOT_NZERO, the values of GR_PARTIAL_NAN ...
 * GR_PARTIAL_SEEN) into its specials; lsb >= GR_PARTIAL_EXP_MIN, and the
 * number below 2^GR_PARTIAL_EXP_MAX. */
void cuda_partial_add_exact(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags);

/* cuda_partial_add_exact() for the sum of squares of p, a moments
 * partial of floats (x2acc and its flags: NaN and infinities). */
void cuda_moments_add_squares(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags);
