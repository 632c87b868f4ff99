/*
 * Exact sums of blocks of the narrow floats (f16, bf16, f8e4m3, f8e5m2)
 * in float lanes, at about the speed of a plain float sum.
 *
 * The elements widen exactly to f32 (F16C for f16, and for the 8-bit
 * floats placed as f16s; a shift for bf16) and add in f32 lanes, 64 adds
 * a lane at most; each lane then goes, widened exactly, into double lanes,
 * and the double lanes are added across into one double. When every one
 * of those additions is exact, that double is the block's exact sum, and
 * the block's partial is that plain double (partial.h: a partial filled
 * by hand), whose signed zero is IEEE's: -0 only when every element was
 * -0, since every accumulator starts at -0 and every addition is exact.
 * Two arguments make the additions exact:
 *
 * - By the grid (E4M3). An E4M3 magnitude is at most 448 and a multiple
 *   of 2^-9; placed as an f16's fields it is its value times 2^-8, at
 *   most 1.75 and a multiple of 2^-17. 64 of them stay below 2^7, so every
 *   f32 partial sum is a multiple of 2^-17 below 2^7: at most 2^24 units,
 *   which f32 holds exactly. A block (GR_REDUCE_BLOCK = 2^15 elements)
 *   sums below 2^16, on the same grid: 2^33 units, exact in double. The
 *   result is scaled back by 2^8, exactly.
 *
 * - By the precision flag (f16, f8e5m2, bf16, whose exponent ranges are
 *   too wide for f32 lanes in general). IEEE 754 raises inexact exactly
 *   when a rounded result differs from the exact one, and x86-64 records
 *   it in MXCSR's PE bit for every SSE and AVX operation, masked or not,
 *   until it is cleared. The kernel clears it, sums, and reads it: clear,
 *   every addition (f32 and double) was exact. The conversions never
 *   round (F16C's f16 -> f32 and f32 -> f64 are exact and never raise
 *   it). Where it is set, the block is summed again by a path that
 *   needs less of the data (below). The flag is checked after the first
 *   run of 2048 elements too, so that data too wide for f32 lanes loses
 *   little. Data that a plain sum is meant for (nearby exponents) is
 *   exact in f32 lanes: bf16's 8-bit significands within 2^16 of one
 *   another, f16's 11-bit ones within 2^13, leave room for 64 adds.
 *   Conditions: a probe first checks, once, that the flag works here
 *   (emulators such as valgrind do not keep it), and the thread's MXCSR
 *   must round to nearest with DAZ and FTZ off (otherwise the block takes
 *   the other path). The caller's flag is kept: set on entry, set on
 *   return (raised by an inexact addition, cheaper than writing MXCSR).
 *   The compiler keeps the additions between the two reads: the data are
 *   loaded after the first (a "memory" clobber), and the result passes
 *   through an empty asm before the second (both volatile).
 *
 * When the f32 lanes round: f16 and f8e5m2 are split at 2^-6 into a part
 * summed in 32-bit integer lanes and a rest summed in f32 lanes, exact
 * for every finite value by their grid (see split() for the argument);
 * bf16 is summed in double lanes under the flag again (53 bits hold the
 * sums of data whose exponents span some 40 binades, as an ML tensor's
 * do), and where that rounds too, by the f32 kernel (reduce-narrow.c).
 *
 * Specials (NaN, infinities) leave a lane non-finite (E4M3's NaNs, which
 * land on finite f16 fields, are looked for in the bytes), and the block
 * is then summed the general way instead.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "math/widen.h"
#include "math/xsum.h"

#ifdef GR_HAVE_AVX2

/* ---- MXCSR ---- */

enum {
	MXCSR_PE = 1u << 5,    /* precision: an inexact result since cleared */
	MXCSR_DAZ = 1u << 6,   /* subnormal operands read as zero */
	MXCSR_RC = 3u << 13,   /* rounding control: 0 is to nearest */
	MXCSR_FTZ = 1u << 15,  /* subnormal results flushed to zero */
};

static inline unsigned mxcsr_get(void)
{
	unsigned c;
	/* "memory": no load of the data moves above a read that starts a
	 * kernel */
	__asm__ volatile("stmxcsr %0" : "=m"(c) : : "memory");
	return c;
}

static inline void mxcsr_set(unsigned c)
{
	__asm__ volatile("ldmxcsr %0" : : "m"(c) : "memory");
}

/* Set PE the way any float code does: one inexact addition. */
static inline void raise_inexact(void)
{
	float x = 1.0f;
	__asm__ volatile("" : "+x"(x));
	x += 0x1p-30f;
	__asm__ volatile("" : : "x"(x));
}

/* Whether PE records inexact additions, and only those, here. */
static bool have_pe(void)
{
	/* 0: not asked yet, 1: no, 2: yes; racing first calls agree */
	static _Atomic int pe;
	int v = atomic_load_explicit(&pe, memory_order_relaxed);
	if (!v) {
		const unsigned c0 = mxcsr_get();
		float x = 1.0f;
		bool ok = !(c0 & (MXCSR_DAZ | MXCSR_FTZ | MXCSR_RC));
		mxcsr_set(c0 & ~MXCSR_PE);
		__asm__ volatile("" : "+x"(x));
		x += 0.5f; /* exact */
		__asm__ volatile("" : "+x"(x));
		ok = ok && !(mxcsr_get() & MXCSR_PE);
		x += 0x1p-30f; /* inexact */
		__asm__ volatile("" : "+x"(x));
		ok = ok && (mxcsr_get() & MXCSR_PE);
		mxcsr_set(c0);
		v = ok ? 2 : 1;
		atomic_store_explicit(&pe, v, memory_order_relaxed);
	}
	return v == 2;
}

/* ---- elements as floats ---- */

/* Sixteen elements at p as two vectors of eight floats, in any order of
 * lanes: f16 by F16C; bf16, the top half of an f32; E5M2, the top byte
 * of an f16; and E4M3, whose fields placed as an f16's are its value
 * times 2^-8, subnormals too (its bias 7 against the f16's 15, three
 * mantissa bits against ten). E4M3's NaNs (S.1111.111) land on finite
 * f16s: each byte doubled is 0xfe for them alone, and *nan keeps the
 * bytewise maximum. */
GR_AVX2_F16C static GR_INLINE void sixteen(gr_dtype dt, const uint8_t *p, __m256 *f0, __m256 *f1,
					   __m128i *nan)
{
	const __m128i z = _mm_setzero_si128();

	if (dt == GR_DT_F16) {
		*f0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
		*f1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
		return;
	}
	if (dt == GR_DT_BF16) {
		const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
		*f0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
		*f1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
		return;
	}
	const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
	/* each byte the top byte of a 16-bit lane */
	__m128i lo = _mm_unpacklo_epi8(z, b), hi = _mm_unpackhi_epi8(z, b);
	if (dt == GR_DT_F8E4M3) {
		/* S.EEEE.MMM.00000000 to S.0EEEE.MMM.0000000: the arithmetic
		 * shift copies S into bit 14, which the mask clears */
		const __m128i m = _mm_set1_epi16((short)0xbfff);
		*nan = _mm_max_epu8(*nan, _mm_add_epi8(b, b));
		lo = _mm_and_si128(_mm_srai_epi16(lo, 1), m);
		hi = _mm_and_si128(_mm_srai_epi16(hi, 1), m);
	}
	*f0 = _mm256_cvtph_ps(lo);
	*f1 = _mm256_cvtph_ps(hi);
}

/* ---- f32 lanes ---- */

/* Adds per f32 lane between flushes into the double lanes (E4M3's bound
 * above), and elements per step (four vectors of eight). */
#define F32_RUN 64u
#define F32_STEP 32u

/* One f32 vector into two double vectors, exactly. */
GR_AVX2_F16C static GR_INLINE void flush(__m256 a, __m256d *d0, __m256d *d1)
{
	*d0 = _mm256_add_pd(*d0, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
	*d1 = _mm256_add_pd(*d1, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
}

/*
 * The block's sum through f32 lanes, as one double (E4M3's times 2^-8).
 * flagged: every addition must be exact and is proved so by PE, which
 * the caller cleared; then it is read once after the first run (*ret_fail
 * when set: the rest is left undone) and by the caller at the end.
 * Returns the sum; *ret_nan when E4M3 has a NaN.
 */
GR_AVX2_F16C static GR_INLINE double f32_lanes(gr_dtype dt, const uint8_t *p, size_t n,
					       bool flagged, bool *ret_fail, bool *ret_nan)
{
	const size_t size = dt == GR_DT_F16 || dt == GR_DT_BF16 ? 2 : 1;
	const size_t body = n - n % F32_STEP;
	__m256d d0 = _mm256_set1_pd(-0.0), d1 = d0, d2 = d0, d3 = d0;
	__m128i nan = _mm_setzero_si128();
	size_t i = 0;

	*ret_fail = false;
	while (i < body) {
		const size_t end = body - i > F32_RUN * F32_STEP ? i + F32_RUN * F32_STEP : body;
		__m256 a0 = _mm256_set1_ps(-0.0f), a1 = a0, a2 = a0, a3 = a0;
		for (; i < end; i += F32_STEP) {
			__m256 x0, x1, x2, x3;
			sixteen(dt, p + size * i, &x0, &x1, &nan);
			sixteen(dt, p + size * (i + 16), &x2, &x3, &nan);
			a0 = _mm256_add_ps(a0, x0);
			a1 = _mm256_add_ps(a1, x1);
			a2 = _mm256_add_ps(a2, x2);
			a3 = _mm256_add_ps(a3, x3);
		}
		flush(a0, &d0, &d1);
		flush(a1, &d2, &d3);
		flush(a2, &d0, &d1);
		flush(a3, &d2, &d3);
		if (flagged && i == F32_RUN * F32_STEP && i < n) {
			/* every addition so far feeds these */
			__asm__ volatile("" : "+x"(d0), "+x"(d1), "+x"(d2), "+x"(d3));
			if (mxcsr_get() & MXCSR_PE) {
				*ret_fail = true;
				return 0;
			}
		}
	}
	/* the rest, under a step, in a double of its own */
	double t = -0.0;
	for (; i < n; i++) {
		uint32_t bits = gr_widen_one(dt, p + size * i);
		float f;
		memcpy(&f, &bits, 4);
		t += dt == GR_DT_F8E4M3 ? (double)f * 0x1p-8 : (double)f;
	}
	const __m256d d = _mm256_add_pd(_mm256_add_pd(d0, d1), _mm256_add_pd(d2, d3));
	const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
	double s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h))) + t;
	*ret_nan = _mm_movemask_epi8(_mm_cmpeq_epi8(nan, _mm_set1_epi8((char)0xfe))) != 0;
	return s;
}

/* One instance per dtype, each with its conversion inlined. */
#define F32_KERNEL(NAME, DT, FLAGGED)                                                              \
	GR_AVX2_F16C static double NAME(const uint8_t *p, size_t n, bool *ret_fail, bool *ret_nan) \
	{                                                                                          \
		return f32_lanes(DT, p, n, FLAGGED, ret_fail, ret_nan);                            \
	}
F32_KERNEL(f32_lanes_f16, GR_DT_F16, true)
F32_KERNEL(f32_lanes_bf16, GR_DT_BF16, true)
F32_KERNEL(f32_lanes_e5m2, GR_DT_F8E5M2, true)
F32_KERNEL(f32_lanes_e4m3, GR_DT_F8E4M3, false)

/* ---- the flag around a kernel ---- */

/* Clear PE for a kernel that the flag is to prove exact, keeping the
 * caller's MXCSR in *ret_c0; false where the flag cannot prove it. */
static bool flag_begin(unsigned *ret_c0)
{
	const unsigned c0 = mxcsr_get();

	if (!have_pe() || (c0 & (MXCSR_DAZ | MXCSR_FTZ | MXCSR_RC)))
		return false;
	if (c0 & MXCSR_PE)
		mxcsr_set(c0 & ~MXCSR_PE);
	*ret_c0 = c0;
	return true;
}

/* Whether every operation since flag_begin() was exact (the caller has
 * passed the kernel's result through an empty asm); PE is set again
 * where it was set in c0. */
static bool flag_end(unsigned c0)
{
	const unsigned c1 = mxcsr_get();

	if ((c0 & MXCSR_PE) && !(c1 & MXCSR_PE))
		raise_inexact();
	return !(c1 & MXCSR_PE);
}

/* ---- double lanes ---- */

/* Sixteen double lanes' sums of p's first elements, sixteen at a time;
 * returns how many it took. */
GR_AVX2_F16C static GR_INLINE size_t double_lanes(gr_dtype dt, const uint8_t *p, size_t n,
						  double lane[16])
{
	const size_t size = dt == GR_DT_F16 || dt == GR_DT_BF16 ? 2 : 1;
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
	_mm256_storeu_pd(lane, a0);
	_mm256_storeu_pd(lane + 4, a1);
	_mm256_storeu_pd(lane + 8, a2);
	_mm256_storeu_pd(lane + 12, a3);
	return i;
}

GR_AVX2_F16C static size_t double_lanes_bf16(const uint8_t *p, size_t n, double lane[16])
{
	return double_lanes(GR_DT_BF16, p, n, lane);
}

/* ---- f16 and E5M2 split at 2^-6 ---- */

/*
 * Every f16 (and E5M2) value x is a multiple of 2^-24 below 2^16 in
 * magnitude. With sigma = 1.5 * 2^17, t = x + sigma stays in sigma's
 * binade [2^17, 2^18), whose unit is 2^-6: t is sigma plus x rounded to
 * a multiple of 2^-6, hi = t - sigma is exact (Sterbenz), and so is
 * r = x - hi (a multiple of 2^-24 of at most 2^-7: 17 bits). hi / 2^-6 is
 * the difference of t's bits and sigma's, below 2^22 in magnitude: 64 of
 * them sum in a wrapping 32-bit lane to an exact integer below 2^28. 64
 * r's stay below 2^-1 on the grid of 2^-24 (2^23 units): exact in f32.
 * So, with no assumption on the data: sum = 2^-6 sum(q) + sum(r).
 * A NaN or an infinity makes r NaN.
 */
#define SPLIT_SIGMA 0x1.8p17f

GR_AVX2_F16C static GR_INLINE void split_add(__m256 x, __m256 sg, __m256i *q, __m256 *r)
{
	const __m256 t = _mm256_add_ps(x, sg);
	*q = _mm256_add_epi32(*q, _mm256_castps_si256(t));
	*r = _mm256_add_ps(*r, _mm256_sub_ps(x, _mm256_sub_ps(t, sg)));
}

/* One run's q lanes, less sigma's bits once per add, into 64-bit lanes. */
GR_AVX2_F16C static GR_INLINE void q_flush(__m256i q, uint32_t adds, __m256i *w0, __m256i *w1)
{
	float sg = SPLIT_SIGMA;
	uint32_t sbits;

	memcpy(&sbits, &sg, 4);
	q = _mm256_sub_epi32(q, _mm256_set1_epi32((int)(sbits * adds)));
	*w0 = _mm256_add_epi64(*w0, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(q)));
	*w1 = _mm256_add_epi64(*w1, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(q, 1)));
}

/*
 * The block's sum times 2^24, as *ret_units; false on a special. *ret_negzero
 * when every element is -0: every accumulator starts at -0, an element
 * -0 gives r = -0 - 0 = -0 and any other element a non-zero r or +0.
 */
GR_AVX2_F16C static GR_INLINE bool split(gr_dtype dt, const uint8_t *p, size_t n,
					 int64_t *ret_units, bool *ret_negzero)
{
	const size_t size = dt == GR_DT_F16 ? 2 : 1;
	const size_t body = n - n % F32_STEP;
	const __m256 sg = _mm256_set1_ps(SPLIT_SIGMA);
	__m256d d0 = _mm256_set1_pd(-0.0), d1 = d0, d2 = d0, d3 = d0;
	__m256i w0 = _mm256_setzero_si256(), w1 = w0;
	__m128i nan = _mm_setzero_si128();
	size_t i = 0;

	while (i < body) {
		const size_t end = body - i > F32_RUN * F32_STEP ? i + F32_RUN * F32_STEP : body;
		const uint32_t adds = (uint32_t)((end - i) / F32_STEP);
		__m256 r0 = _mm256_set1_ps(-0.0f), r1 = r0, r2 = r0, r3 = r0;
		__m256i q0 = _mm256_setzero_si256(), q1 = q0, q2 = q0, q3 = q0;
		for (; i < end; i += F32_STEP) {
			__m256 x0, x1, x2, x3;
			sixteen(dt, p + size * i, &x0, &x1, &nan);
			sixteen(dt, p + size * (i + 16), &x2, &x3, &nan);
			split_add(x0, sg, &q0, &r0);
			split_add(x1, sg, &q1, &r1);
			split_add(x2, sg, &q2, &r2);
			split_add(x3, sg, &q3, &r3);
		}
		flush(r0, &d0, &d1);
		flush(r1, &d2, &d3);
		flush(r2, &d0, &d1);
		flush(r3, &d2, &d3);
		q_flush(q0, adds, &w0, &w1);
		q_flush(q1, adds, &w0, &w1);
		q_flush(q2, adds, &w0, &w1);
		q_flush(q3, adds, &w0, &w1);
	}
	/* the rest, under a step, in a double of its own (exact: below 2^21
	 * on the grid) */
	double t = -0.0;
	for (; i < n; i++) {
		uint32_t bits = gr_widen_one(dt, p + size * i);
		float f;
		memcpy(&f, &bits, 4);
		t += f;
	}
	/* the r's: below 2^8 on the grid, exact in double */
	const __m256d d = _mm256_add_pd(_mm256_add_pd(d0, d1), _mm256_add_pd(d2, d3));
	const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
	const double rs = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h))) + t;
	if (!isfinite(rs))
		return false;
	int64_t w[4];
	_mm256_storeu_si256((__m256i *)(void *)w, _mm256_add_epi64(w0, w1));
	/* 2^24 * sum: below 2^55 from the q's (2^15 elements below 2^22
	 * units of 2^-6), 2^45 from the r's */
	*ret_units = (w[0] + w[1] + w[2] + w[3]) * ((int64_t)1 << 18) + (int64_t)(rs * 0x1p24);
	*ret_negzero = rs == 0 && signbit(rs);
	return true;
}

GR_AVX2_F16C static bool split_f16(const uint8_t *p, size_t n, int64_t *ret_units,
				   bool *ret_negzero)
{
	return split(GR_DT_F16, p, n, ret_units, ret_negzero);
}

GR_AVX2_F16C static bool split_e5m2(const uint8_t *p, size_t n, int64_t *ret_units,
				    bool *ret_negzero)
{
	return split(GR_DT_F8E5M2, p, n, ret_units, ret_negzero);
}

/* f16 and E5M2 into ret by the split; false on a special. */
static bool sum_split(gr_dtype dt, const uint8_t *p, size_t n, gr_partial *ret)
{
	int64_t units;
	bool negzero;

	if (!(dt == GR_DT_F16 ? split_f16(p, n, &units, &negzero)
			      : split_e5m2(p, n, &units, &negzero)))
		return false;
	gr_partial_identity(GR_OP_SUM, GR_DT_F32, ret);
	ret->count = n;
	/* the identity is exact and empty, and every element -0.0 until one
	 * is not */
	if (!negzero)
		gr_partial_add_special(ret, GR_PARTIAL_SEEN);
	gr_partial_add_scaled(ret, units, -24);
	return true;
}

/* bf16 in double lanes, added across in double: exact where the flag
 * says so (53 bits hold the sums of bf16 data whose exponents span
 * some 40 binades, as an ML tensor's do). */
static double sum_double_bf16(const uint8_t *p, size_t n)
{
	double lane[16], s = -0.0;
	size_t i = double_lanes_bf16(p, n, lane);

	for (unsigned l = 0; l < 16; l++)
		s += lane[l];
	for (; i < n; i++) {
		uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
		float f;
		memcpy(&f, &bits, 4);
		s += f;
	}
	return s;
}

/* The exact sum s of n elements as a partial filled by hand. */
static void plain_partial(gr_partial *ret, double s, size_t n)
{
	gr_partial_identity(GR_OP_SUM, GR_DT_F32, ret);
	ret->xflags = 0;
	ret->v.f = s;
	ret->count = n;
}

#endif

bool xsum_sum_narrow(gr_dtype dt, const unsigned char *p, size_t n, gr_partial *ret)
{
#ifdef GR_HAVE_AVX2
	bool fail, nan;
	unsigned c0;
	double s;

	if (!gr_dtype_is_float(dt) || n == 0 || n > GR_REDUCE_BLOCK ||
	    gr_reduce_isa() != GR_ISA_AVX2_F16C)
		return false;
	if (dt == GR_DT_F8E4M3) {
		/* exact by its grid; NaN and no infinities */
		s = f32_lanes_e4m3(p, n, &fail, &nan) * 0x1p8;
		if (nan)
			return false;
		plain_partial(ret, s, n);
		return true;
	}
	if (flag_begin(&c0)) {
		s = dt == GR_DT_F16    ? f32_lanes_f16(p, n, &fail, &nan)
		    : dt == GR_DT_BF16 ? f32_lanes_bf16(p, n, &fail, &nan)
				       : f32_lanes_e5m2(p, n, &fail, &nan);
		/* s depends on every addition */
		__asm__ volatile("" : "+x"(s));
		fail = !flag_end(c0) || fail;
		/* NaN and infinities leave s non-finite (and so would an f32
		 * overflow, which also sets PE): the general way */
		if (!isfinite(s))
			return false;
		if (!fail) {
			plain_partial(ret, s, n);
			return true;
		}
		if (dt == GR_DT_BF16 && flag_begin(&c0)) {
			s = sum_double_bf16(p, n);
			__asm__ volatile("" : "+x"(s));
			if (flag_end(c0) && isfinite(s)) {
				plain_partial(ret, s, n);
				return true;
			}
		}
	}
	return dt != GR_DT_BF16 && sum_split(dt, p, n, ret);
#else
	(void)dt, (void)p, (void)n, (void)ret;
	return false;
#endif
}
