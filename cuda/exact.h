/*
 * Exact float sums on the GPU: the host interface.
 *
 * The kernel delivers the exact real sum of an f32 or f64 array, or of
 * its elements' exact squares, not a rounded one: a fixed-point number in
 * signed 64-bit digits, digit i weighing 2^(32 i - 2176), plus flags for
 * NaNs, infinities and whether any element was other than -0.
 * gr_exact_fold() rounds it once, to
 * nearest even, so the bits cannot depend on the order in which the GPU
 * met the elements, and equal what an exact CPU sum rounds to.
 *
 * How the device gets there (exact.cuh has the argument): every lane keeps
 * doubles pinned to fixed binades below the largest element its warp has
 * seen, and adds its elements into them with error-free transforms; what
 * cannot be kept there exactly (elements far below or above the window,
 * infinities, NaNs, bins running out of headroom) goes to an integer
 * superaccumulator in shared memory, whose digits meet across blocks
 * through integer atomics.
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Digits of an exact sum: 134 x 32-bit places from 2^-2176, so every
 * finite double's bits, every f64's exact square (2^-2148 to below
 * 2^2048) and the carries of up to 2^64 of them fit. The bottom place is
 * the CPU's exact accumulator's (math/reduce.h), two digits to its
 * word. */
#define GR_EXACT_DIGITS 134
#define GR_EXACT_DIGIT_BITS 32
#define GR_EXACT_LSB_EXP (-2176)

/* What is summed (the dtype arguments and gr_exact_seg.dtype): the
 * elements of an f32 or f64 array, or the exact squares of an f32 array's
 * (each exact in a double) or of an f64 array's (each the sum of two
 * doubles, exact.cuh). */
enum {
	GR_EXACT_F32 = 4,
	GR_EXACT_F64 = 5,
	GR_EXACT_F32_SQUARES = 6,
	GR_EXACT_F64_SQUARES = 7,
};

/* gr_exact_sum.flags */
enum {
	GR_EXACT_NAN = 1,       /* a NaN was summed */
	GR_EXACT_PINF = 2,      /* +inf was summed */
	GR_EXACT_NINF = 4,      /* -inf was summed */
	GR_EXACT_NOT_NZERO = 8, /* an element other than -0.0 was summed */
};

/*
 * An exact sum as the kernel leaves it (device memory, written whole by
 * every launch): the value is sum(digit[i] * 2^(32 i - 2176)) for the
 * finite elements; the digits are not normalised, any of them may be
 * negative.
 */
typedef struct gr_exact_sum {
	int64_t digit[GR_EXACT_DIGITS];
	uint64_t flags;
} gr_exact_sum;

/*
 * The launch's scratch (device memory): zero before the first launch
 * (cudaMemset), and left zero by every launch that completes, so one
 * scratch serves launches in stream order. Launches that may run at the
 * same time need their own.
 */
typedef struct gr_exact_scratch {
	int64_t acc[GR_EXACT_DIGITS];
	uint64_t flags;
	uint32_t ticket;
	uint32_t pad;
} gr_exact_scratch;

/*
 * Sum n >= 0 elements of dtype (GR_EXACT_F32, _F64, or the squares of
 * the elements, GR_EXACT_F32_SQUARES, _F64_SQUARES) at data (aligned to
 * the element's size) exactly into *out, in one launch on stream. sm_count
 * caps the grid (blocks resident at once). n == 0 writes the empty sum.
 * Returns the cudaError_t of the launch (0 on success);
 * cudaErrorInvalidValue for another dtype or a misaligned pointer.
 */
int gr_exact_launch_single(int dtype, const void *data, uint64_t n, gr_exact_scratch *scratch,
			   gr_exact_sum *out, int sm_count, void *stream);

/*
 * The batched form: many arrays (segments) in one launch, each cut into
 * units of GR_EXACT_UNIT_VECTORS 16-byte vectors that one warp takes
 * whole; the last warp of a segment to finish writes its result. A
 * segment's bits are those of the single-array launch (the sum is exact).
 */
#define GR_EXACT_UNIT_VECTORS 2048u

/* One segment, as the batch kernel reads it (device memory). */
typedef struct gr_exact_seg {
	uint64_t offset;     /* bytes from the batch's base, a multiple of the element's size */
	uint64_t n;          /* elements (0 allowed: its result is the empty sum) */
	uint32_t dtype;      /* GR_EXACT_F32, _F64, _F32_SQUARES, _F64_SQUARES */
	uint32_t first_unit; /* its first unit's index in the batch */
	uint32_t units;      /* gr_exact_units(dtype, n) */
	uint32_t pad;
} gr_exact_seg;

/* Units of a segment of n elements of dtype: at least 1. */
uint32_t gr_exact_units(int dtype, uint64_t n);

/*
 * Sum segs[0..nsegs) (device memory, sorted by first_unit, their units
 * adding to total_units) of the batch at base into out[0..nsegs), one
 * launch on stream; scratch[i] is segment i's (zero before, left zero).
 * Returns the cudaError_t of the launch.
 */
int gr_exact_launch_batch(const void *base, const gr_exact_seg *segs, uint32_t nsegs,
			  uint32_t total_units, gr_exact_scratch *scratch, gr_exact_sum *out,
			  int sm_count, void *stream);

/*
 * Round an exact sum (read back to the host) of n elements to the nearest
 * double, ties to even: NaN when a NaN was summed or +inf and -inf both
 * were; +-inf for infinities of one sign, or where the exact sum rounds
 * past DBL_MAX; -0.0 when n > 0 and every element was -0.0; otherwise
 * +0.0 for an exact sum that rounds to zero (only squares can: a sum of
 * them below 2^-1075). Returns the double.
 */
double gr_exact_fold(const gr_exact_sum *s, uint64_t n);

#ifdef __cplusplus
}
#endif
