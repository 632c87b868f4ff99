/*
 * Exact sums of blocks of the narrow floats (f16, bf16, f8e4m3, f8e5m2)
 * in float lanes, at about the speed of a plain float sum.
 *
 * The elements widen exactly to f32 (F16C for f16, and for the 8-bit
 * floats placed as f16s; a shift for bf16) and add in f32 lanes, 64 adds
 * a lane at most; each lane then goes, widened exactly, into double lanes,
 * and the double lanes are added across into one double (f16's and
 * f8e5m2's as integer counts of 2^-24, below). When every one of those
 * additions is exact, that double is the block's exact sum, and the
 * block's partial is that plain double (partial.h: a partial filled by
 * hand), whose signed zero is IEEE's: -0 only when every element was -0,
 * since every accumulator starts at -0 and every addition is exact. Two
 * arguments make the additions exact:
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
 *   until it is cleared. The kernel clears it and reads it after each
 *   run of f32 additions: clear, every one was exact, and the run's lanes
 *   go into the double lanes; set, the run is added again in double
 *   lanes instead (below). The conversions never round (F16C's f16 ->
 *   f32 and f32 -> f64 are exact and never raise it). Data that a plain
 *   sum is meant for (nearby exponents) is exact in f32 lanes: bf16's
 *   8-bit significands within 2^16 of one another, f16's 11-bit ones
 *   within 2^13, leave room for 64 adds.
 *   Conditions: a probe first checks, once, that the flag works here
 *   (emulators such as valgrind do not keep it), and the thread's MXCSR
 *   must round to nearest with DAZ and FTZ off (otherwise the block takes
 *   the other path). The caller's flag is kept: set on entry, set on
 *   return (raised by an inexact addition, cheaper than writing MXCSR).
 *   The compiler keeps the additions between the two reads: the data are
 *   loaded after the first (a "memory" clobber), and the result passes
 *   through an empty asm before the second (both volatile).
 *
 * Double lanes hold every f16 and f8e5m2 block exactly (by their grid),
 * and bf16's where the flag says so (53 bits hold the sums of data whose
 * exponents span some 40 binades, as an ML tensor's do); where bf16's
 * round too, the block takes the f32 kernel (reduce-narrow.c). Where the
 * flag cannot be used, f16 and f8e5m2 are split at 2^-6 into a part
 * summed in 32-bit integer lanes and a rest summed in f32 lanes, exact
 * for every finite value by their grid (see split() for the argument).
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
 * E4M3's block sum through f32 lanes, as one double (its value times
 * 2^-8), exact by its grid. Returns the sum; *ret_nan when there is a NaN.
 */
GR_AVX2_F16C static double f32_lanes_e4m3(const uint8_t *p, size_t n, bool *ret_nan)
{
	const gr_dtype dt = GR_DT_F8E4M3;
	const size_t body = n - n % F32_STEP;
	__m256d d0 = _mm256_set1_pd(-0.0), d1 = d0, d2 = d0, d3 = d0;
	__m128i nan = _mm_setzero_si128();
	size_t i = 0;

	while (i < body) {
		const size_t end = body - i > F32_RUN * F32_STEP ? i + F32_RUN * F32_STEP : body;
		__m256 a0 = _mm256_set1_ps(-0.0f), a1 = a0, a2 = a0, a3 = a0;
		for (; i < end; i += F32_STEP) {
			__m256 x0, x1, x2, x3;
			sixteen(dt, p + i, &x0, &x1, &nan);
			sixteen(dt, p + i + 16, &x2, &x3, &nan);
			a0 = _mm256_add_ps(a0, x0);
			a1 = _mm256_add_ps(a1, x1);
			a2 = _mm256_add_ps(a2, x2);
			a3 = _mm256_add_ps(a3, x3);
		}
		flush(a0, &d0, &d1);
		flush(a1, &d2, &d3);
		flush(a2, &d0, &d1);
		flush(a3, &d2, &d3);
	}
	/* the rest, under a step, in a double of its own */
	double t = -0.0;
	for (; i < n; i++) {
		uint32_t bits = gr_widen_one(dt, p + i);
		float f;
		memcpy(&f, &bits, 4);
		t += (double)f * 0x1p-8;
	}
	const __m256d d = _mm256_add_pd(_mm256_add_pd(d0, d1), _mm256_add_pd(d2, d3));
	const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
	*ret_nan = _mm_movemask_epi8(_mm_cmpeq_epi8(nan, _mm_set1_epi8((char)0xfe))) != 0;
	return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h))) + t;
}

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

/* ---- f32 lanes run by run ---- */

/*
 * f16, E5M2 and bf16 add in f32 lanes in runs, and the flag is read after
 * each run: clear, the run's lanes go into the block's double lanes d[];
 * set, the flag is cleared and the run is added again straight into d[],
 * each element widened to double (bf16's lanes go into d[] before the
 * read, which then covers both, and d[] goes back to what it was). A run
 * is RUN_LONG adds a lane while the block's runs stay exact, and
 * RUN_SHORT (RUN_SHORT_BF16) once one has rounded, for the rest of the
 * block and, in the same thread, for the next SHORT_BLOCKS blocks. N(0, 1)
 * data hold values below 2^-10, whose low bits a lane drops once its sum
 * is large enough: a long run rounds in about four f16 runs of five (one
 * bf16 run of eleven), a short one in one f16 run of ten (one bf16 run of
 * thirty). Clearing the flag (ldmxcsr) waits for every instruction before
 * it, some hundreds of cycles with the loads in flight, so a block must
 * round in few runs; a shorter run costs more flushes, which near data
 * (that never round) are spared. Where an f16 or E5M2 run rounds within
 * RUN_FINISH elements of the block's end, the rest goes into double lanes
 * and the flag stays set, which costs less than clearing it.
 *
 * f16 and E5M2 need no flag in d[]: every value is a multiple of 2^-24
 * below 2^16 in magnitude, and each of the 16 double lanes takes one
 * element in 16 (an f32 lane's flush or a widened element), at most 2^11
 * of a block, whose sums stay below 2^27, 2^51 units: exact, and each
 * lane an integer count of 2^-24 that an int64 holds. bf16's double
 * lanes are proved by the flag after each run; where they round, the
 * block takes the general way.
 */
#define RUN_LONG 64u
#define RUN_SHORT 12u
#define RUN_SHORT_BF16 32u
#define SHORT_BLOCKS 16u
#define RUN_FINISH 1024u

/* Elements a step of run_f32() takes: eight vectors of f32 lanes for
 * f16, four for bf16 and E5M2, whose widening needs registers of its own
 * (eight spill one). */
static GR_INLINE size_t run_step(gr_dtype dt)
{
	return dt == GR_DT_F16 ? 64 : 32;
}

/*
 * steps * run_step() elements at p summed in run_step() / 8 vectors of
 * f32 lanes, a[]. No addition starts before the flag read that ended the
 * last run: the lanes start from an empty asm, and volatile asm stays in
 * order; every addition feeds the empty asm at the end, which comes
 * before the caller's read.
 */
GR_AVX2_F16C static GR_INLINE void run_f32(gr_dtype dt, const uint8_t *p, size_t steps,
					   __m256 a[8])
{
	const size_t size = dt == GR_DT_F8E5M2 ? 1 : 2;
	const unsigned vecs = run_step(dt) / 8;
	__m128i nan = _mm_setzero_si128();

	a[0] = _mm256_set1_ps(-0.0f);
	__asm__ volatile("" : "+x"(a[0]));
	UNROLL for (unsigned j = 1; j < vecs; j++)
		a[j] = a[0];
	for (size_t k = 0; k < steps; k++, p += size * run_step(dt)) {
		UNROLL for (unsigned j = 0; j < vecs; j += 2) {
			__m256 x0, x1;
			sixteen(dt, p + size * 8 * j, &x0, &x1, &nan);
			a[j] = _mm256_add_ps(a[j], x0);
			a[j + 1] = _mm256_add_ps(a[j + 1], x1);
		}
	}
	/* every addition of the run feeds these, for the flag read after */
	UNROLL for (unsigned j = 0; j < vecs; j++)
		__asm__ volatile("" : "+x"(a[j]));
}

/* The same elements, each widened to double, into d[]. */
GR_AVX2_F16C static GR_INLINE void run_double(gr_dtype dt, const uint8_t *p, size_t steps,
					      __m256d d[4])
{
	const size_t size = dt == GR_DT_F8E5M2 ? 1 : 2;
	__m128i nan = _mm_setzero_si128();

	for (size_t k = 0; k < run_step(dt) / 16 * steps; k++, p += size * 16) {
		__m256 f0, f1;
		sixteen(dt, p, &f0, &f1, &nan);
		d[0] = _mm256_add_pd(d[0], _mm256_cvtps_pd(_mm256_castps256_ps128(f0)));
		d[1] = _mm256_add_pd(d[1], _mm256_cvtps_pd(_mm256_extractf128_ps(f0, 1)));
		d[2] = _mm256_add_pd(d[2], _mm256_cvtps_pd(_mm256_castps256_ps128(f1)));
		d[3] = _mm256_add_pd(d[3], _mm256_cvtps_pd(_mm256_extractf128_ps(f1, 1)));
	}
}

/* Whether PE is set once every operation feeding d[] is done. */
GR_AVX2_F16C static GR_INLINE bool d_inexact(__m256d d[4])
{
	__asm__ volatile("" : "+x"(d[0]), "+x"(d[1]), "+x"(d[2]), "+x"(d[3]));
	return mxcsr_get() & MXCSR_PE;
}

/*
 * The block's sum run by run (above): a run's f32 lanes are flushed into
 * d[] once the flag has proved them exact, and where it has not, the run
 * is added again in double lanes. The flag is clear on entry, c0 the
 * caller's MXCSR. short_runs: start with short runs; *ret_rounded: a run
 * rounded. For f16 and E5M2, lane[] gets the 16 double lanes and, last,
 * the rest under a step in a double of its own (exact: a multiple of
 * 2^-24 below 2^22); for bf16, lane[0] gets the sum of them all, exact
 * where the caller's flag read says so. Returns false where bf16's double
 * lanes rounded (lane[] unset).
 */
GR_AVX2_F16C static GR_INLINE bool sum_runs(gr_dtype dt, const uint8_t *p, size_t n, unsigned c0,
					    bool short_runs, bool *ret_rounded, double lane[17])
{
	const size_t size = dt == GR_DT_F8E5M2 ? 1 : 2;
	const size_t steps = n / run_step(dt);
	const size_t short_run = dt == GR_DT_BF16 ? RUN_SHORT_BF16 : RUN_SHORT;
	__m256d d[4];

	*ret_rounded = false;
	d[0] = d[1] = d[2] = d[3] = _mm256_set1_pd(-0.0);
	for (size_t k = 0; k < steps;) {
		const size_t run = short_runs ? short_run : RUN_LONG;
		const size_t len = steps - k < run ? steps - k : run;
		const uint8_t *q = p + size * run_step(dt) * k;
		__m256 a[8];

		run_f32(dt, q, len, a);
		if (dt == GR_DT_BF16) {
			/* one flag read for the run and its flush (the
			 * read waits for both): where it is set, d[] goes
			 * back to what it was and the run is added again */
			const __m256d k0 = d[0], k1 = d[1], k2 = d[2], k3 = d[3];

			flush(a[0], &d[0], &d[1]);
			flush(a[1], &d[2], &d[3]);
			flush(a[2], &d[0], &d[1]);
			flush(a[3], &d[2], &d[3]);
			if (d_inexact(d)) {
				short_runs = *ret_rounded = true;
				d[0] = k0, d[1] = k1, d[2] = k2, d[3] = k3;
				mxcsr_set(c0 & ~MXCSR_PE);
				run_double(dt, q, len, d);
				if (d_inexact(d))
					return false;
			}
		} else if (mxcsr_get() & MXCSR_PE) {
			/* f16's and E5M2's double lanes are exact by their
			 * grid: only the f32 lanes can round */
			short_runs = *ret_rounded = true;
			if ((steps - k) * run_step(dt) <= RUN_FINISH) {
				/* the block's end in double lanes, which
				 * need no flag, costs less than clearing it */
				run_double(dt, q, steps - k, d);
				break;
			}
			mxcsr_set(c0 & ~MXCSR_PE);
			run_double(dt, q, len, d);
		} else {
			UNROLL for (unsigned j = 0; j < run_step(dt) / 8; j += 2) {
				flush(a[j], &d[0], &d[1]);
				flush(a[j + 1], &d[2], &d[3]);
			}
		}
		k += len;
	}
	double t = -0.0;
	for (size_t i = steps * run_step(dt); i < n; i++) {
		uint32_t bits = gr_widen_one(dt, p + size * i);
		float f;
		memcpy(&f, &bits, 4);
		t += f;
	}
	if (dt == GR_DT_BF16) {
		const __m256d e = _mm256_add_pd(_mm256_add_pd(d[0], d[1]), _mm256_add_pd(d[2], d[3]));
		const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(e), _mm256_extractf128_pd(e, 1));
		lane[0] = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h))) + t;
		return true;
	}
	for (unsigned j = 0; j < 4; j++)
		_mm256_storeu_pd(lane + 4 * j, d[j]);
	lane[16] = t;
	return true;
}

/* One instance per dtype, each with its conversion inlined. */
#define RUNS_KERNEL(NAME, DT)                                                                      \
	GR_AVX2_F16C static bool NAME(const uint8_t *p, size_t n, unsigned c0, bool short_runs,   \
				      bool *ret_rounded, double lane[17])                          \
	{                                                                                          \
		return sum_runs(DT, p, n, c0, short_runs, ret_rounded, lane);                      \
	}
RUNS_KERNEL(sum_runs_f16, GR_DT_F16)
RUNS_KERNEL(sum_runs_bf16, GR_DT_BF16)
RUNS_KERNEL(sum_runs_e5m2, GR_DT_F8E5M2)

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

/* The exact sum s of n elements as a partial filled by hand: with xflags
 * zero the accumulators are neither read nor trusted (partial.h), and
 * clearing their 1 KiB costs a block of 2^12 f16 elements near a tenth
 * of its time. */
static void plain_partial(gr_partial *ret, double s, size_t n)
{
	ret->count = n;
	ret->v.f = s;
	ret->index = 0;
	ret->xflags = 0;
	ret->lo.u = ret->hi.u = 0;
	ret->x2flags = 0;
}

/*
 * The exact sum units * 2^-24 of n elements into ret; negzero: every
 * element was -0.0 (units is 0 then). A plain double where it holds it.
 */
static void units_partial(gr_partial *ret, int64_t units, bool negzero, size_t n)
{
	if (units >= -((int64_t)1 << 53) && units <= (int64_t)1 << 53) {
		plain_partial(ret, units == 0 && negzero ? -0.0 : (double)units * 0x1p-24, n);
		return;
	}
	/* the identity is exact and empty; units is not 0, so an element
	 * other than -0.0 was seen */
	gr_partial_identity(GR_OP_SUM, GR_DT_F32, ret);
	ret->count = n;
	gr_partial_add_special(ret, GR_PARTIAL_SEEN);
	gr_partial_add_scaled(ret, units, -24);
}

/* f16 and E5M2 into ret by the split; false on a special. */
static bool sum_split(gr_dtype dt, const uint8_t *p, size_t n, gr_partial *ret)
{
	int64_t units;
	bool negzero;

	if (!(dt == GR_DT_F16 ? split_f16(p, n, &units, &negzero)
			      : split_e5m2(p, n, &units, &negzero)))
		return false;
	units_partial(ret, units, negzero, n);
	return true;
}

/*
 * f16 and E5M2 into ret from sum_runs()'s lane[]: each a multiple of
 * 2^-24 below 2^51 units, an integer count of them exactly; false on a
 * special (a lane not finite).
 */
static bool lanes_partial(const double lane[17], size_t n, gr_partial *ret)
{
	int64_t units = 0;
	bool negzero = true;

	for (unsigned l = 0; l < 17; l++) {
		if (!isfinite(lane[l]))
			return false;
		units += (int64_t)(lane[l] * 0x1p24);
		/* a lane is -0.0 when each of its elements was */
		negzero = negzero && lane[l] == 0 && signbit(lane[l]);
	}
	units_partial(ret, units, negzero, n);
	return true;
}

#endif

bool xsum_sum_narrow(gr_dtype dt, const unsigned char *p, size_t n, gr_partial *ret)
{
#ifdef GR_HAVE_AVX2
	/* blocks this thread has left to start with short runs */
	static _Thread_local unsigned short_blocks;
	unsigned c0;
	double s;
	bool nan;

	if (!gr_dtype_is_float(dt) || n == 0 || n > GR_REDUCE_BLOCK ||
	    gr_reduce_isa() != GR_ISA_AVX2_F16C)
		return false;
	if (dt == GR_DT_F8E4M3) {
		/* exact by its grid; NaN and no infinities */
		s = f32_lanes_e4m3(p, n, &nan) * 0x1p8;
		if (nan)
			return false;
		plain_partial(ret, s, n);
		return true;
	}
	if (flag_begin(&c0)) {
		const bool short_runs = short_blocks > 0;
		double lane[17];
		bool rounded, ok;

		if (short_runs)
			short_blocks--;
		ok = dt == GR_DT_F16    ? sum_runs_f16(p, n, c0, short_runs, &rounded, lane)
		     : dt == GR_DT_BF16 ? sum_runs_bf16(p, n, c0, short_runs, &rounded, lane)
					: sum_runs_e5m2(p, n, c0, short_runs, &rounded, lane);
		s = dt == GR_DT_BF16 && ok ? lane[0] : 0;
		/* s depends on every addition */
		__asm__ volatile("" : "+x"(s));
		ok = flag_end(c0) && ok;
		if (rounded)
			short_blocks = SHORT_BLOCKS;
		/* f16's and E5M2's lanes are exact whatever the flag says */
		if (dt != GR_DT_BF16)
			return lanes_partial(lane, n, ret);
		/* NaN and infinities leave s non-finite: the general way */
		if (ok && isfinite(s)) {
			plain_partial(ret, s, n);
			return true;
		}
		return false;
	}
	/* the flag cannot prove it here */
	return dt != GR_DT_BF16 && sum_split(dt, p, n, ret);
#else
	(void)dt, (void)p, (void)n, (void)ret;
	return false;
#endif
}
