/*
 * Exact sums of the narrow floats whose values lie on a short grid:
 * f16 and f8e5m2 (multiples of 2^-24 below 2^16 in magnitude) and f8e4m3
 * (multiples of 2^-9, at most 448). A double holds every sum of up to
 * 2^13 such values exactly (below 2^29 on the grid of 2^-24: 53 bits), so
 * sixteen double lanes add a block of up to GR_REDUCE_BLOCK elements in
 * any order with no rounding at all; the lanes, each an integer on the
 * grid, then join in 64-bit integers and go into the partial at once.
 * One conversion and one addition an element, against the widening path's
 * store, load and windowed f32 sum. Specials (NaN, infinities) leave a lane
 * non-finite, and the block is then summed the general way instead.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "math/widen.h"
#include "math/xsum.h"

#ifdef GR_HAVE_AVX2

/* Sixteen elements as two vectors of eight floats, by F16C: f16; E5M2,
 * the top byte of an f16; and E4M3, whose fields placed as an f16's are
 * its value times 2^-8, for the subnormals too (its bias 7 against the
 * f16's 15, three mantissa bits against ten): its lanes are scaled back
 * at the end. E4M3's NaNs (S.1111.111) land on finite f16s, so its
 * bytes are checked for them as they pass (*nan). */
GR_AVX2_F16C static inline void sixteen(gr_dtype dt, const uint8_t *p, __m256 *f0, __m256 *f1,
					__m128i *nan)
{
	if (dt == GR_DT_F16) {
		*f0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
		*f1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
		return;
	}
	__m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i lo = _mm_cvtepu8_epi16(b), hi = _mm_unpackhi_epi8(b, _mm_setzero_si128());
	if (dt == GR_DT_F8E5M2) {
		lo = _mm_slli_epi16(lo, 8);
		hi = _mm_slli_epi16(hi, 8);
	} else {
		const __m128i m7f = _mm_set1_epi16(0x7f), m80 = _mm_set1_epi16(0x80);
		*nan = _mm_or_si128(*nan, _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7f)),
						  _mm_set1_epi8(0x7f)));
		lo = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(lo, m7f), 7),
				  _mm_slli_epi16(_mm_and_si128(lo, m80), 8));
		hi = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(hi, m7f), 7),
				  _mm_slli_epi16(_mm_and_si128(hi, m80), 8));
	}
	*f0 = _mm256_cvtph_ps(lo);
	*f1 = _mm256_cvtph_ps(hi);
}

/* The sixteen lanes' sums of p's first elements, sixteen at a time;
 * returns how many it took, or 0 with *nan set where E4M3 has a NaN. */
GR_AVX2_F16C static size_t lanes_avx2(gr_dtype dt, const uint8_t *p, size_t n, double lane[16],
				      bool *ret_nan)
{
	const size_t size = gr_dtype_size(dt);
	__m256d a0 = _mm256_set1_pd(-0.0), a1 = a0, a2 = a0, a3 = a0;
	__m128i nan = _mm_setzero_si128();
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256 f0, f1;
		sixteen(dt, p + size * i, &f0, &f1, &nan);
		a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(f0)));
		a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(f0, 1)));
		a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(f1)));
		a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(f1, 1)));
	}
	*ret_nan = !_mm_testz_si128(nan, nan);
	_mm256_storeu_pd(lane, a0);
	_mm256_storeu_pd(lane + 4, a1);
	_mm256_storeu_pd(lane + 8, a2);
	_mm256_storeu_pd(lane + 12, a3);
	return i;
}

#endif

bool xsum_sum_narrow(gr_dtype dt, const unsigned char *p, size_t n, gr_partial *ret)
{
#ifdef GR_HAVE_AVX2
	double lane[17];
	const size_t size = gr_dtype_size(dt);

	if ((dt != GR_DT_F16 && dt != GR_DT_F8E5M2 && dt != GR_DT_F8E4M3) || n > GR_REDUCE_BLOCK ||
	    gr_reduce_isa() != GR_ISA_AVX2_F16C)
		return false;
	bool nan;
	size_t i = lanes_avx2(dt, p, n, lane, &nan);
	if (nan)
		return false;
	/* the rest, under sixteen: one more lane (E4M3's scaled as above;
	 * a NaN there leaves the lane NaN) */
	lane[16] = -0.0;
	for (; i < n; i++) {
		uint32_t bits = gr_widen_one(dt, p + size * i);
		float f;
		memcpy(&f, &bits, 4);
		lane[16] += dt == GR_DT_F8E4M3 ? f * 0x1p-8f : f;
	}
	/* on the grid of 2^-24 every lane is an integer below 2^29 * 2^24,
	 * the block's sum one below 2^58 (E4M3's lanes hold its values
	 * times 2^-8) */
	int64_t s = 0;
	bool all_negzero = true;
	for (unsigned l = 0; l < 17; l++) {
		if (!isfinite(lane[l]))
			return false;
		all_negzero = all_negzero && lane[l] == 0 && signbit(lane[l]);
		s += (int64_t)(lane[l] * 0x1p24);
	}
	gr_partial_identity(GR_OP_SUM, GR_DT_F32, ret);
	ret->count = n;
	/* the identity is exact and empty, and every element -0.0 until one
	 * is not */
	if (!all_negzero)
		gr_partial_add_special(ret, GR_PARTIAL_SEEN);
	gr_partial_add_scaled(ret, s, dt == GR_DT_F8E4M3 ? -16 : -24);
	return true;
#else
	(void)dt, (void)p, (void)n, (void)ret;
	return false;
#endif
}
