/*
 * The f64 block kernels of the exact accumulator (xsum.h), sums and sums
 * of squares: one pass over the grid (xsum-f64-pass.h says how), a
 * second where a sample of the block misled the first, element by
 * element where the levels would cost more.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "math/xsum-f64-pass.h"
#include "math/xsum.h"

static GR_INLINE void xsum_f64(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                               const bool avx2, const bool fma, const bool packed)
{
	/* Guess the grid from a sample, one binade wider at the top and four
	 * at the bottom (a block's extremes lie beyond its sample's); a small
	 * block is its own sample, and takes one pass. */
	const size_t ns = n <= 64 ? n : n / 32 < 64 ? 64 : n / 32 > XGUESS ? XGUESS : n / 32;
	int32_t hi;
	uint32_t lo;
	xf64_bounds(p, ns, avx2, &hi, &lo);
	/* squares are never -0 */
	ret->xflags = XF_XACC | (sq ? XF_SEEN : 0);
	for (int pass = 0; pass < 2; pass++) {
		int M;
		unsigned levels;
		if (hi < 0) {
			/* no non-zero element seen: any grid will tell */
			M = 1;
			levels = 2;
		} else {
			const bool whole = pass > 0 || ns == n;
			M = xf64_top(hi) + !whole;
			unsigned emin = lo >> 20;
			levels = xf64_levels(M, whole || emin <= 4 ? emin : emin - 4, sq);
		}
		/* specials and magnitudes near the top of the range, and spans
		 * so wide that the levels would cost more than the element path
		 * (past 12 a grid: about 560 binades for sums, 280 for squares) */
		if (M > (sq ? 1023 : 1000) || levels > XF_LEVELS_MAX)
			break;
		xf64 f;
		xf64_init(&f, M, levels, sq, sq ? xf64_scale(M, levels) : 0);
		bool ok;
		if (levels <= XL_MAX && !f.k) {
			/* in registers, unrolled; squares unscaled */
			v4du acc[2 * XL_MAX][2];
			ok = levels == 2 ? xf64_pass(p, n, &f, 2, sq, false, avx2, fma, packed, acc,
			                             ret, &hi, &lo)
			     : levels == 3 ? xf64_pass(p, n, &f, 3, sq, false, avx2, fma, packed,
			                               acc, ret, &hi, &lo)
			                   : xf64_pass(p, n, &f, 4, sq, false, avx2, fma, packed,
			                               acc, ret, &hi, &lo);
		} else {
			/* wide blocks (a loop over the levels, in memory), and
			 * squares that need a scale */
			v4du acc[2 * XF_LEVELS_MAX][2];
			ok = xf64_pass(p, n, &f, levels, sq, sq, avx2, fma, packed, acc, ret, &hi,
			               &lo);
		}
		if (!ok)
			continue;
		if (hi >= 0) {
			ret->xflags |= XF_SEEN;
		} else {
			/* nothing but zeros: "seen" unless they are all -0 */
			for (size_t i = 0; i < n && !(ret->xflags & XF_SEEN); i++)
				if (!(p[i * 8 + 7] & 0x80))
					ret->xflags |= XF_SEEN;
		}
		return;
	}
	xsum_slow(p, n, ret, /* is64= */ true, sq);
}

void xsum_sum_f64_base(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ false, /* avx2= */ false, /* fma= */ false,
	         /* packed= */ false);
}

/*
 * f64 squares: the AVX2 kernel hands the block to one built with FMA when
 * the CPU has it (simd.h), which forms the low half of each square in one
 * operation instead of Dekker's eleven; both give the same exact value.
 */
void xsum_sumsq_f64_base(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ true, /* avx2= */ false, /* fma= */ false,
	         /* packed= */ false);
}

#ifdef GR_HAVE_AVX2
bool xsum_have_fma(void)
{
	/* 0: not asked yet, 1: no, 2: yes; racing first calls agree */
	static _Atomic int fma;
	int f = atomic_load_explicit(&fma, memory_order_relaxed);
	if (!f) {
		const char *e = getenv("GPURED_REDUCE_ISA");
		__builtin_cpu_init();
		f = (e && strcmp(e, "avx2") == 0) || !__builtin_cpu_supports("fma") ? 1 : 2;
		atomic_store_explicit(&fma, f, memory_order_relaxed);
	}
	return f == 2;
}

bool xsum_have_de(void)
{
	/* 0: not asked yet, 1: no, 2: yes; racing first calls agree */
	static _Atomic int de;
	int d = atomic_load_explicit(&de, memory_order_relaxed);
	if (!d) {
		volatile double tiny = 0x1p-1074, one = 1.0;
		mxcsr_de_clear();
		double s = tiny + one;
		__asm__ volatile("" : : "x"(s));
		d = mxcsr_de_seen() ? 2 : 1;
		mxcsr_de_clear();
		atomic_store_explicit(&de, d, memory_order_relaxed);
	}
	return d == 2;
}

GR_AVX2_FMA static void xsum_sum_f64_fma(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ false, /* avx2= */ true, /* fma= */ true, /* packed= */ true);
}

/* f64 sums: with FMA or without, and where the denormal flag does not
 * work, by the baseline kernel, whose bounds need none. */
GR_AVX2 void xsum_sum_f64_avx2(const unsigned char *p, size_t n, gr_partial *ret)
{
	if (!xsum_have_de())
		xsum_sum_f64_base(p, n, ret);
	else if (xsum_have_fma())
		xsum_sum_f64_fma(p, n, ret);
	else
		xsum_f64(p, n, ret, /* sq= */ false, /* avx2= */ true, /* fma= */ false,
		         /* packed= */ true);
}

GR_AVX2_FMA static void xsum_sumsq_f64_fma(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ true, /* avx2= */ true, /* fma= */ true, /* packed= */ true);
}

/* f64 squares: the bounds packed as the sums' (every element is an
 * operand of x * x, or of x 2^k, so the denormal flag sees subnormals),
 * and where that flag does not work, by the baseline kernel. */
GR_AVX2 void xsum_sumsq_f64_avx2(const unsigned char *p, size_t n, gr_partial *ret)
{
	if (!xsum_have_de())
		xsum_sumsq_f64_base(p, n, ret);
	else if (xsum_have_fma())
		xsum_sumsq_f64_fma(p, n, ret);
	else
		xsum_f64(p, n, ret, /* sq= */ true, /* avx2= */ true, /* fma= */ false,
		         /* packed= */ true);
}
#endif
