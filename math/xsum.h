/*
 * The exact accumulator behind float sums and sums of squares, as
 * reduce.c uses it (the public side, limbs included, is in reduce.h):
 * starting, combining and rounding a partial whose value is exact, and the
 * block kernels that fill one, built for each ISA like the other kernels.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "math/partial.h"
#include "math/simd.h"

/* Make ret, the identity of a float sum (sq false) or sumsq, exact and empty. */
void xsum_identity(gr_partial *ret, bool sq);

/* acc = acc (+) next, both float sum (or both sumsq) partials of count > 0. */
void xsum_combine(gr_partial *acc, const gr_partial *next);

/* The exact value of a float sum partial, rounded once (to nearest, ties to even). */
double xsum_round(const gr_partial *p);

/*
 * moments: ret's sum of squares (x2acc, x2flags) becomes sq's exact value,
 * sq a sumsq partial as its block kernel left it; add next's to acc's.
 */
void xsum_sq_take(gr_partial *ret, const gr_partial *sq);
void xsum_sq_combine(gr_partial *acc, const gr_partial *next);
/* The identity of moments' two sums (S1 as a float sum's, S2 exact). */
void xsum_moments_identity(gr_partial *ret, bool is_int);
/* a += m * 2^bit exactly (or -= when neg), bit >= 0 counted from 2^0:
 * integer sums into an accumulator (xacc or x2acc). */
void xsum_add_int(uint64_t *a, unsigned bit, unsigned __int128 m, bool neg);

/* a += sum(d[i] 2^(lsb + 32 i)), i < n <= 2 GR_PARTIAL_XWORDS, exactly:
 * signed digits, not normalised, summed elsewhere (a device's), into an
 * accumulator (xacc or x2acc); lsb >= GR_PARTIAL_EXP_MIN, and the value
 * below 2^GR_PARTIAL_EXP_MAX. */
void xsum_add_digits(uint64_t *a, int lsb, const int64_t *d, unsigned n);

/* gr_partial_limbs() of an open accumulator acc (a partial's xacc or
 * x2acc) with its flags and the count of elements it covers. */
size_t xsum_acc_limbs(const uint64_t *acc, uint64_t xflags, uint64_t count, uint64_t *words,
                      size_t max, int *ret_scale, unsigned *ret_flags);

/*
 * The exact sum of a block (n <= GR_REDUCE_BLOCK elements at p, any
 * alignment) of f16, bf16, f8e5m2 or f8e4m3 into ret, a partial it makes,
 * with count n, as gr_reduce_block() would; false (ret untouched) where it
 * does not apply: another dtype, n = 0, a CPU without AVX2 and F16C, a NaN
 * or infinity among the elements, or bf16 data too wide for double lanes
 * (xsum-narrow.c).
 */
bool xsum_sum_narrow(gr_dtype dt, const unsigned char *p, size_t n, gr_partial *ret);

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

/*
 * moments' block kernels' fast path, one pass for the four answers
 * (xsum-f32.c, xsum-f64-moments.c): ret holds moments' identity, n >= 1
 * elements at p (any alignment). When it takes the
 * block, ret's exact sum, exact sum of squares, lo and hi become what the
 * sum, sumsq, min and max kernels would make them, and it returns true;
 * else false, and ret is untouched.
 */
#define XSUM_DECLARE_MOMENTS(DT)                                                                   \
	bool xsum_moments_##DT##_base(const unsigned char *p, size_t n, gr_partial *ret);          \
	GR_AVX2_ONLY(GR_AVX2 bool xsum_moments_##DT##_avx2(const unsigned char *p, size_t n,       \
	                                                   gr_partial *ret);)
XSUM_DECLARE_MOMENTS(f32)
XSUM_DECLARE_MOMENTS(f64)
#undef XSUM_DECLARE_MOMENTS
