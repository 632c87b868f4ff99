/*
 * moments on the GPU: the host interface. One launch reads an f32 or f64
 * array once and gives what the daemon's moments partial holds (reduce.h):
 * the exact sum of the elements and the exact sum of their squares, each
 * as the exact kernel leaves one (exact.h: digits and flags, nothing
 * rounded), and the least and greatest element as ordered keys. The host
 * folds the sums into the partial's accumulators, so mean and variance
 * round once from exact values, with the same bits as the CPU's.
 *
 * An element's key is its bits with the magnitude bits of negative ones
 * flipped and the sign bit of the others set: the keys' integer order is
 * the float order, with -0 below +0. A NaN's key lies past the infinities;
 * the sum's flags say whether there was one, and then min and max are NaN.
 */
#pragma once

#include <stdint.h>

#include "cuda/exact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a launch writes (device memory), whole. */
typedef struct gr_moments_sums {
	gr_exact_sum sum; /* of the elements (GR_EXACT_F32, _F64's) */
	gr_exact_sum sq;  /* of their exact squares (_F32_SQUARES, _F64_SQUARES) */
	uint64_t kmin, kmax; /* the least and greatest element's keys (n > 0) */
} gr_moments_sums;

/* A launch's scratch (device memory): zero before the first launch, left
 * zero by every launch that completes; one launch at a time on each. */
typedef struct gr_moments_scratch {
	gr_exact_scratch sum, sq;
	uint64_t nkmin; /* ~ the least key so far */
	uint64_t kmax;
} gr_moments_scratch;

/*
 * The moments sums of the n >= 1 elements of dtype (GR_EXACT_F32 or
 * GR_EXACT_F64) at data (device memory, aligned to the element's size)
 * into *out, in one launch on stream, its grid for sm_count
 * multiprocessors. Returns the launch's cudaError_t (0 on success);
 * cudaErrorInvalidValue for another dtype, n == 0 or a misaligned pointer.
 */
int gr_moments_launch(int dtype, const void *data, uint64_t n, gr_moments_scratch *scratch,
		      gr_moments_sums *out, int sm_count, void *stream);

/* The element (as a double) whose key of dtype (GR_EXACT_F32, _F64) is k. */
double gr_moments_key_value(int dtype, uint64_t k);

#ifdef __cplusplus
}
#endif
