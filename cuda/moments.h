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
 *
 * Integers (i32, i64, u32, u64) take a kernel of their own: each thread
 * sums its elements and their squares in 128- and 192-bit integers, which
 * meet across the launch as 32-bit digits held in 64-bit places (isum,
 * isq), exactly as the float kernels' digits do; keys are the value, with
 * the sign bit flipped for signed dtypes.
 */
#pragma once

#include <stdint.h>

#include "cuda/exact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Digits of an integer sum (isum: a 128-bit two's complement number in
 * four, the fifth -1 where it is negative) and of the sum of squares (isq:
 * 192 bits). Each place holds the sum of its digit over every thread, in
 * 64 bits: not normalised, but exact. */
#define GR_MOMENTS_ISUM_DIGITS 5
#define GR_MOMENTS_ISQ_DIGITS 6

/* What a launch writes (device memory): for floats sum, sq and the keys,
 * for integers isum, isq and the keys. */
typedef struct gr_moments_sums {
	gr_exact_sum sum; /* of the elements (GR_EXACT_F32, _F64's) */
	gr_exact_sum sq;  /* of their exact squares (_F32_SQUARES, _F64_SQUARES) */
	uint64_t kmin, kmax; /* the least and greatest element's keys (n > 0) */
	/* integers: sum(isum[i] * 2^(32 i)) and the same of isq */
	int64_t isum[GR_MOMENTS_ISUM_DIGITS];
	int64_t isq[GR_MOMENTS_ISQ_DIGITS];
} gr_moments_sums;

/* A launch's scratch (device memory): zero before the first launch, left
 * zero by every launch that completes; one launch at a time on each. */
typedef struct gr_moments_scratch {
	gr_exact_scratch sum, sq;
	uint64_t nkmin; /* ~ the least key so far */
	uint64_t kmax;
	int64_t isum[GR_MOMENTS_ISUM_DIGITS];
	int64_t isq[GR_MOMENTS_ISQ_DIGITS];
} gr_moments_scratch;

/*
 * The moments sums of the n >= 1 elements of dtype (0 i32, 1 i64, 2 u32,
 * 3 u64, GR_EXACT_F32 = 4 f32, GR_EXACT_F64 = 5 f64) at data (device
 * memory, aligned to the element's size) into *out, in one launch on
 * stream, its grid for sm_count multiprocessors. Returns the launch's
 * cudaError_t (0 on success); cudaErrorInvalidValue for another dtype,
 * n == 0 or a misaligned pointer.
 */
int gr_moments_launch(int dtype, const void *data, uint64_t n, gr_moments_scratch *scratch,
		      gr_moments_sums *out, int sm_count, void *stream);

/* The element (as a double) whose key of dtype (GR_EXACT_F32, _F64) is k. */
double gr_moments_key_value(int dtype, uint64_t k);

#ifdef __cplusplus
}
#endif
