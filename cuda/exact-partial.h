/*
 * The GPU's exact results as the daemon's partials (daemon/reduce.h): an
 * exact sum (exact.h) as a float sum's or sumsq's, and a moments launch's
 * sums and keys (moments.h) as a moments partial, so that they round, and
 * combine with other chunks', as the CPU's do.
 */
#pragma once

#include <stdint.h>

#include "cuda/exact.h"
#include "cuda/moments.h"
#include "daemon/reduce.h"

/* *ret = the partial of op (sum or sumsq) over n float elements of dt
 * whose exact sum the kernel left in *s. */
void cuda_exact_partial(const gr_exact_sum *s, gr_op op, gr_dtype dt, uint64_t n,
			gr_partial *ret);

/* *ret = the moments partial of n >= 1 elements of dt whose moments
 * launch left *m. */
void cuda_moments_partial(const gr_moments_sums *m, gr_dtype dt, uint64_t n, gr_partial *ret);
