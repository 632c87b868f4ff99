/*
 * moments' f64 block kernel: the exact sum, the exact sum of squares, min
 * and max in one pass over the block (xsum.h), on the grids of
 * xsum-f64-pass.h.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "math/xsum-f64-pass.h"
#include "math/xsum.h"

/*
 * A moments block needs the exact sum of its elements and of their
 * squares, and its least and largest element: xsum-f64.c's kernels twice
 * and min's and max's (reduce.c) would read it four times and bound it
 * twice. This pass does it all in one: each element goes over the sum's
 * grid, and the halves of its square over the squares' two grids, by the
 * same xf64_split() on the same grids as those passes (so each value is
 * exact by the same argument), and into a least and a largest lane.
 *
 * - One number of levels for the three grids: the squares' (their span
 *   is twice the elements', so they never need fewer than the sum; a
 *   level more than the sum needs only takes zeros).
 * - Squares unscaled: the pass takes the blocks (largest magnitude 2^M,
 *   -400 <= M <= 500, at most XL_MAX levels) whose squares need no
 *   scale (xf64_scale()).
 * - A block beyond those, or that needs more levels, or that holds a NaN
 *   or an infinity (above every bound), is left to the four passes: the
 *   pass returns false and has not touched the partial.
 * - min and max: with no NaN, the least (largest) element is the same
 *   value in whatever lanes, and "x < m ? x : m" is what min's lanes do
 *   (one vminpd on AVX2). Only the sign of a zero depends on which zero
 *   a lane kept; there the result is, as min's and max's kernels make it,
 *   -0 when any element is -0 (min) or when every element is (max), which
 *   a second look at the block (only for a zero extreme) decides.
 */

#ifdef GR_HAVE_AVX2
GR_AVX2 static inline void xm64_minmax_avx2(v4df *mn, v4df *mx, const v4df *x)
{
	*mn = (v4df)_mm256_min_pd((__m256d)*x, (__m256d)*mn);
	*mx = (v4df)_mm256_max_pd((__m256d)*x, (__m256d)*mx);
}
#endif

/* *mn = x < *mn ? x : *mn, and *mx likewise, lane by lane. */
static GR_INLINE void xm64_minmax(v4df *mn, v4df *mx, const v4df *x, const bool avx2)
{
#ifdef GR_HAVE_AVX2
	if (avx2) {
		xm64_minmax_avx2(mn, mx, x);
		return;
	}
#endif
	(void)avx2;
	v4di c = *x < *mn;
	*mn = (v4df)(((v4di)*x & c) | ((v4di)*mn & ~c));
	c = *x > *mx;
	*mx = (v4df)(((v4di)*x & c) | ((v4di)*mx & ~c));
}

/* One group of XF_GROUP elements at q into the three grids' lanes (the
 * sum's, then the squares' high and low halves'), the bounds and, with
 * mm, the least and largest lanes. */
static GR_INLINE void xm64_group(const unsigned char *q, const v4df (*sig)[XF_LEVELS_MAX],
                                 const v4df *last2, v4du (*acc)[2], v4df *mn, v4df *mx, v8si *hi,
                                 v8su *lo, v16hu *top, v16hu *low, const unsigned levels,
                                 const bool avx2, const bool fma, const bool packed, const bool mm)
{
	v4du c[4];
	UNROLL
	for (unsigned v = 0; v < 4; v++) {
		v4df y, h, l;
		ld_f64(&y, q + 32 * v);
		memcpy(&c[v], &y, sizeof(c[v]));
		if (!packed)
			c[v] = (c[v] & INT64_MAX) - 1;
		xf64_split(&y, sig[0], &last2[0], acc, v & 1, levels, fma);
		xf64_square(&h, &l, &y, fma);
		xf64_split(&h, sig[1], &last2[1], acc + levels, v & 1, levels, false);
		xf64_split(&l, sig[2], &last2[2], acc + 2 * levels, v & 1, levels, false);
		if (mm)
			xm64_minmax(mn, mx, &y, avx2);
	}
	if (packed) {
		xf64_bound_top(top, low, q, c);
	} else {
		xf64_bound(hi, lo, &c[0], &c[1], avx2);
		xf64_bound(hi, lo, &c[2], &c[3], avx2);
	}
}

/*
 * moments of p[0, n) on the sum's grid fs and the squares' fq (unscaled),
 * levels levels each: when the grids held the block, its sum into ret's
 * xacc, its squares' into x2acc, its least and largest element into lo and
 * hi, and true; else false, ret untouched. The bounds are reported either
 * way, as xf64_pass() reports them.
 */
static GR_INLINE bool xm64_pass(const unsigned char *p, size_t n, const xf64 *fs, const xf64 *fq,
                                const unsigned levels, const bool avx2, const bool fma,
                                const bool packed, gr_partial *ret, int32_t *ret_hi,
                                uint32_t *ret_lo)
{
	const xgrid *g[3] = {&fs->g[0], &fq->g[0], &fq->g[1]};
	const double l2[3] = {fs->last2[0], fq->last2[0], fq->last2[1]};
	v4df sig[3][XF_LEVELS_MAX], last2[3];
	for (unsigned h = 0; h < 3; h++) {
		for (unsigned j = 0; j < levels; j++)
			sig[h][j] = (v4df){0} + g[h]->sigma[j];
		last2[h] = (v4df){0} + l2[h];
	}
	v4du acc[3 * XL_MAX][2];
	memset(acc, 0, sizeof(acc[0]) * 3 * levels);
	v4df mn = (v4df){0} + INFINITY, mx = (v4df){0} - INFINITY;
	v8si hi = (v8si){0} - 1;
	v8su lo = (v8su){0} - 1;
	v16hu top = {0}, low = (v16hu){0} - 1;
	const size_t ng = n / XF_GROUP;
	if (packed)
		mxcsr_de_clear();
	for (size_t gi = 0; gi < ng; gi++) {
		xf64_ahead(p + gi * XF_GROUP * 8);
		xm64_group(p + gi * XF_GROUP * 8, sig, last2, acc, &mn, &mx, &hi, &lo, &top, &low,
		           levels, avx2, fma, packed, /* mm= */ true);
	}
	size_t groups = ng;
	double least = INFINITY, most = -INFINITY;
	if (n % XF_GROUP) {
		/* zeros pad the sums, not the extremes: those element by element */
		unsigned char tail[XF_GROUP * 8] = {0};
		memcpy(tail, p + ng * XF_GROUP * 8, (n % XF_GROUP) * 8);
		xm64_group(tail, sig, last2, acc, &mn, &mx, &hi, &lo, &top, &low, levels, avx2, fma,
		           packed, /* mm= */ false);
		groups++;
		for (size_t i = ng * XF_GROUP; i < n; i++) {
			double x;
			memcpy(&x, p + 8 * i, sizeof(x));
			least = x < least ? x : least;
			most = x > most ? x : most;
		}
	}
	if (packed)
		for (unsigned j = 0; j < 3 * levels; j++)
			for (unsigned v = 0; v < 2; v++)
				__asm__ volatile("" : : "m"(acc[j][v]));
	xf64_pass_bounds(p, n, &hi, &lo, &top, &low, avx2, packed, ret_hi, ret_lo);
	const uint32_t small = fs->small_hi > fq->small_hi ? fs->small_hi : fq->small_hi;
	if (*ret_hi >= fs->bound_hi || *ret_lo < small)
		return false;
	/* each lane took two terms a group */
	xf64_fold(ret->xacc, g[0], acc, levels, 2 * groups, 0);
	xf64_fold(ret->x2acc, g[1], acc + levels, levels, 2 * groups, 0);
	xf64_fold(ret->x2acc, g[2], acc + 2 * levels, levels, 2 * groups, 0);
	for (unsigned k = 0; k < 4; k++) {
		least = mn[k] < least ? mn[k] : least;
		most = mx[k] > most ? mx[k] : most;
	}
	if (least == 0 || most == 0) {
		/* a zero extreme: min's sign is any element's, max's every one's */
		bool any = false, every = true;
		for (size_t i = 0; i < n; i++) {
			const bool neg = p[8 * i + 7] >> 7;
			any |= neg;
			every &= neg;
		}
		if (least == 0)
			least = any ? -0.0 : 0.0;
		if (most == 0)
			most = every ? -0.0 : 0.0;
	}
	ret->lo.f = least;
	ret->hi.f = most;
	return true;
}

/* moments' block in one pass (xm64_pass()), with the grids its bounds
 * need: false where the four passes must take it. */
static GR_INLINE bool xmom_f64(const unsigned char *p, size_t n, gr_partial *ret, const bool avx2,
                               const bool fma, const bool packed)
{
	/* the grid guessed from a sample, then from the block's bounds, as
	 * xsum_f64() */
	const size_t ns = n <= 64 ? n : n / 32 < 64 ? 64 : n / 32 > XGUESS ? XGUESS : n / 32;
	int32_t hi;
	uint32_t lo;
	xf64_bounds(p, ns, avx2, &hi, &lo);
	for (int pass = 0; pass < 2; pass++) {
		int M = 1;
		unsigned levels = 2;
		if (hi >= 0) {
			const bool whole = pass > 0 || ns == n;
			M = xf64_top(hi) + !whole;
			unsigned emin = lo >> 20;
			levels =
			    xf64_levels(M, whole || emin <= 4 ? emin : emin - 4, /* sq= */ true);
		}
		if (levels > XL_MAX || xf64_scale(M, levels))
			return false;
		xf64 fs, fq;
		xf64_init(&fs, M, levels, /* sq= */ false, 0);
		xf64_init(&fq, M, levels, /* sq= */ true, xf64_scale(M, levels));
		const bool ok =
		    levels == 2   ? xm64_pass(p, n, &fs, &fq, 2, avx2, fma, packed, ret, &hi, &lo)
		    : levels == 3 ? xm64_pass(p, n, &fs, &fq, 3, avx2, fma, packed, ret, &hi, &lo)
		                  : xm64_pass(p, n, &fs, &fq, 4, avx2, fma, packed, ret, &hi, &lo);
		if (!ok)
			continue;
		/* squares are never -0 (x2flags is "seen" from the identity) */
		if (hi >= 0) {
			ret->xflags |= XF_SEEN;
		} else {
			for (size_t i = 0; i < n && !(ret->xflags & XF_SEEN); i++)
				if (!(p[i * 8 + 7] & 0x80))
					ret->xflags |= XF_SEEN;
		}
		return true;
	}
	return false;
}

bool xsum_moments_f64_base(const unsigned char *p, size_t n, gr_partial *ret)
{
	return xmom_f64(p, n, ret, /* avx2= */ false, /* fma= */ false, /* packed= */ false);
}

#ifdef GR_HAVE_AVX2
GR_AVX2_FMA static bool xsum_moments_f64_fma(const unsigned char *p, size_t n, gr_partial *ret)
{
	return xmom_f64(p, n, ret, /* avx2= */ true, /* fma= */ true, /* packed= */ true);
}

/* As the sums: where the denormal flag does not work, by the baseline
 * kernel. */
GR_AVX2 bool xsum_moments_f64_avx2(const unsigned char *p, size_t n, gr_partial *ret)
{
	if (!xsum_have_de())
		return xsum_moments_f64_base(p, n, ret);
	if (xsum_have_fma())
		return xsum_moments_f64_fma(p, n, ret);
	return xmom_f64(p, n, ret, /* avx2= */ true, /* fma= */ false, /* packed= */ true);
}
#endif
