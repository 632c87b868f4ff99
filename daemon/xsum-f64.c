/*
 * The f64 block kernels of the exact accumulator (xsum.h), sums and sums
 * of squares: one pass, bounds in packed high words.
 *
 * f64 sums have a pass of their own over the grid of xsum-internal.h,
 * cheaper per element than the f32 one (xsum-f32.c) in two ways:
 *
 * - The last two levels, a and b, take three additions, not four. With
 *   S = sigma_a + sigma_b (exact: its bits span 53), t_a = y + sigma_a,
 *   r = t_a - S (exact: a multiple of t_a's unit, at most 2^53 of them)
 *   and t_b = y - r: that is y - (t_a - sigma_a) + sigma_b rounded once,
 *   the t_b of the grid's cascade, without its rest.
 * - The bounds are checked on 32-bit lanes. Of every element the high
 *   word of |x| - 1 (as 64 bits) is taken, c, for which
 *   c * 2^32 < |x| <= (c + 1) * 2^32; zeros wrap to all ones. Two vectors
 *   of them are packed into one, which goes into a signed maximum and an
 *   unsigned minimum: zeros touch neither. The largest c bounds the block
 *   from above and the least from below, within a high word: a value right
 *   at a bound (a power of two) counts as beyond it, which costs only a
 *   pass.
 *
 * The pass reports its bounds whether or not the grid held them, so a
 * block whose guess was wrong takes one more pass, whose grid and number
 * of levels (2 to XF_LEVELS_MAX) follow from them, and no pass to find them. A
 * tail shorter than a group is padded with zeros into one.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/simd.h"
#include "daemon/xsum-internal.h"
#include "daemon/xsum.h"

#define XF_GROUP 16

/* What a pass sums on: one grid for sums; for squares, scaled by 2^k, one
 * for their high halves and one 53 bits lower for their low halves. */
typedef struct xf64 {
	xgrid g[2];
	double last2[2];   /* sigma of each grid's last two levels, added */
	int k;             /* squares: the scale's exponent */
	int32_t bound_hi;  /* |x| <= 2^M: every c below this */
	uint32_t small_hi; /* every non-zero element's bits on the grid: c at least this */
} xf64;

/* The least c for which |x| >= 2^e (0: any x; subnormal bounds are
 * rounded up to a whole high word, which only costs a pass). */
static uint32_t xf64_at_least(int e)
{
	if (e >= -1022)
		return (uint32_t)(e + 1023) << 20;
	if (e > -1042)
		return 1u << (e + 1042);
	return e > -1074;
}

/*
 * The grid for elements of magnitude at most 2^M, levels levels a grid.
 * Sums: the top is 2^M (M <= 1000), and an element's last bit is on the
 * last level's unit, 2^u, when its exponent is at least u + 52. Squares:
 * x is scaled by 2^k to at most 2^500 (the halves of x * x neither over-
 * nor underflow), the top of the high halves is 2^T, T = 2 (M + k), and
 * that of the low halves 2^(T - 53); for x of exponent e, x^2 has its last
 * bits at 2e - 52 (high half) and 2e - 104 (low half).
 */
static void xf64_init(xf64 *f, int M, unsigned levels, bool sq)
{
	f->bound_hi = (M + 1023) << 20;
	if (!sq) {
		f->k = 0;
		xgrid_init(&f->g[0], M, levels);
		const int u = f->g[0].ulp[levels - 1];
		f->small_hi = u <= -1074 ? 0 : xf64_at_least(u + 52);
	} else {
		f->k = 500 - M < 1000 ? 500 - M : 1000;
		const int T = 2 * (M + f->k);
		xgrid_init(&f->g[0], T, levels);
		xgrid_init(&f->g[1], T - 53, levels);
		const int uh = f->g[0].ulp[levels - 1], ul = f->g[1].ulp[levels - 1];
		/* the least exponent of a scaled x whose halves fit, rounded up */
		int e = (uh + 52 + 1) >> 1;
		e = e > (ul + 104 + 1) >> 1 ? e : (ul + 104 + 1) >> 1;
		f->small_hi = xf64_at_least(e - f->k);
	}
	for (unsigned h = 0; h < 1u + sq; h++)
		f->last2[h] = f->g[h].sigma[levels - 2] + f->g[h].sigma[levels - 1];
}

/* Levels a grid that elements of magnitude at most 2^M, the least non-zero
 * with exponent field emin (0: a subnormal, counted as 2^-1074), need. */
static unsigned xf64_levels(int M, unsigned emin, bool sq)
{
	int e = emin ? (int)emin - 1023 : -1074;
	/* the last unit, 2^(top - 50 - 51 (L - 1)), at most the least
	 * element's last bit (sums: e - 52; squares, scaled: 2 (e + k) - 52) */
	int bits;
	if (!sq) {
		bits = M - 50 - (e - 52);
	} else {
		int k = 500 - M < 1000 ? 500 - M : 1000;
		bits = 2 * (M + k) - 50 - (2 * (e + k) - 52);
	}
	return bits <= 51 ? 2 : 1 + ((unsigned)bits + 50) / 51;
}

/* Pack the high words of two vectors of |x| - 1 and fold them into the
 * bounds. */
static GR_INLINE void xf64_bound(v8si *hi, v8su *lo, const v4du *c0, const v4du *c1,
                                 const bool avx2)
{
	v8sf a, b;
	memcpy(&a, c0, sizeof(a));
	memcpy(&b, c1, sizeof(b));
	/* one vshufps: the odd words of each 128-bit half of both */
	v8sf h = GR_SHUFFLE2(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
	v8si hs;
	memcpy(&hs, &h, sizeof(hs));
	v8si_max(hi, &hs, avx2);
	v8su_min(lo, (const v8su *)&hs, avx2);
}

/* The bounds of elements [0, n) alone: the largest and the least c. */
static GR_INLINE void xf64_bounds(const unsigned char *p, size_t n, const bool avx2,
                                  int32_t *ret_hi, uint32_t *ret_lo)
{
	v8si hi = (v8si){0} - 1;
	v8su lo = (v8su){0} - 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		v4du c0, c1;
		memcpy(&c0, p + 8 * i, sizeof(c0));
		memcpy(&c1, p + 8 * i + 32, sizeof(c1));
		c0 = (c0 & INT64_MAX) - 1;
		c1 = (c1 & INT64_MAX) - 1;
		xf64_bound(&hi, &lo, &c0, &c1, avx2);
	}
	int32_t h = -1;
	uint32_t l = UINT32_MAX;
	for (unsigned k = 0; k < 8; k++) {
		h = hi[k] > h ? hi[k] : h;
		l = lo[k] < l ? lo[k] : l;
	}
	for (; i < n; i++) {
		uint64_t b;
		memcpy(&b, p + 8 * i, sizeof(b));
		uint32_t c = (uint32_t)(((b & INT64_MAX) - 1) >> 32);
		h = (int32_t)c > h ? (int32_t)c : h;
		l = c < l ? c : l;
	}
	*ret_hi = h;
	*ret_lo = l;
}

/* y over the levels of one grid into acc[0, levels), lane set v. */
static GR_INLINE void xf64_split(const v4df *py, const v4df *sig, const v4df *last2, v4du (*acc)[2],
                                 unsigned v, const unsigned levels)
{
	v4df y = *py;
	v4du tb;
	for (unsigned j = 0; j + 2 < levels; j++) {
		v4df t = y + sig[j];
		memcpy(&tb, &t, sizeof(tb));
		acc[j][v] += tb;
		y = y - (t - sig[j]);
	}
	v4df ta = y + sig[levels - 2];
	v4df tl = y - (ta - *last2);
	memcpy(&tb, &ta, sizeof(tb));
	acc[levels - 2][v] += tb;
	memcpy(&tb, &tl, sizeof(tb));
	acc[levels - 1][v] += tb;
}

/* One group of XF_GROUP elements at q into the lanes and the bounds. */
static GR_INLINE void xf64_group(const unsigned char *q, const v4df (*sig)[XF_LEVELS_MAX],
                                 const v4df *last2, const v4df *scale, v4du (*acc)[2], v8si *hi,
                                 v8su *lo, const unsigned levels, const bool sq, const bool avx2,
                                 const bool fma)
{
	v4du c[4];
	UNROLL
	for (unsigned v = 0; v < 4; v++) {
		v4df y;
		ld_f64(&y, q + 32 * v);
		memcpy(&c[v], &y, sizeof(c[v]));
		c[v] = (c[v] & INT64_MAX) - 1;
		if (!sq) {
			xf64_split(&y, sig[0], &last2[0], acc, v & 1, levels);
			continue;
		}
		/* x * x = h + l exactly, while nothing under- or overflows:
		 * l in one fused operation, or after Dekker, from halves of x
		 * of 26 bits each */
		v4df x = y * *scale;
		v4df h = x * x, l;
#ifdef GR_HAVE_AVX2
		if (fma) {
			v4df_fmsub_fma(&l, &x, &x, &h);
		} else
#endif
		{
			(void)fma;
			v4df cx = x * 134217729.0;
			v4df xh = cx - (cx - x);
			v4df xl = x - xh;
			l = ((xh * xh - h) + (xh + xh) * xl) + xl * xl;
		}
		xf64_split(&h, sig[0], &last2[0], acc, v & 1, levels);
		xf64_split(&l, sig[1], &last2[1], acc + levels, v & 1, levels);
	}
	xf64_bound(hi, lo, &c[0], &c[1], avx2);
	xf64_bound(hi, lo, &c[2], &c[3], avx2);
}

/*
 * Sum p[0, n) (or its squares) on f's grids of levels levels, and bound
 * its elements: when the grids held them (*ret_hi below f->bound_hi,
 * *ret_lo at least f->small_hi), add the block's value to ret's
 * accumulator and return true; else leave it alone. The bounds are
 * reported either way.
 */
static GR_INLINE bool xf64_pass(const unsigned char *p, size_t n, const xf64 *f,
                                const unsigned levels, const bool sq, const bool avx2,
                                const bool fma, v4du (*acc)[2], gr_partial *ret, int32_t *ret_hi,
                                uint32_t *ret_lo)
{
	const unsigned grids = sq ? 2 : 1;
	v4df sig[2][XF_LEVELS_MAX], last2[2];
	for (unsigned h = 0; h < grids; h++) {
		for (unsigned j = 0; j < levels; j++)
			sig[h][j] = (v4df){0} + f->g[h].sigma[j];
		last2[h] = (v4df){0} + f->last2[h];
	}
	const v4df scale = (v4df){0} + ldexp(1.0, f->k);
	memset(acc, 0, sizeof(*acc) * grids * levels);
	v8si hi = (v8si){0} - 1;
	v8su lo = (v8su){0} - 1;
	const size_t ng = n / XF_GROUP;
	/* the block after a whole one is most likely next: bring it to L2
	 * while this one is summed, so that its first pass does not wait */
	const uintptr_t ahead = n == GR_REDUCE_BLOCK ? n * 8 : 0;

	if (ahead) {
		for (size_t gi = 0; gi < ng; gi++) {
			const unsigned char *q = p + gi * XF_GROUP * 8;
			for (size_t o = 0; o < XF_GROUP * 8; o += 64)
				__builtin_prefetch((const void *)((uintptr_t)q + ahead + o), 0, 2);
			xf64_group(q, sig, last2, &scale, acc, &hi, &lo, levels, sq, avx2, fma);
		}
	} else {
		for (size_t gi = 0; gi < ng; gi++)
			xf64_group(p + gi * XF_GROUP * 8, sig, last2, &scale, acc, &hi, &lo, levels,
			           sq, avx2, fma);
	}
	size_t groups = ng;
	if (n % XF_GROUP) {
		unsigned char tail[XF_GROUP * 8] = {0};
		memcpy(tail, p + ng * XF_GROUP * 8, (n % XF_GROUP) * 8);
		xf64_group(tail, sig, last2, &scale, acc, &hi, &lo, levels, sq, avx2, fma);
		groups++;
	}

	int32_t h = -1;
	uint32_t l = UINT32_MAX;
	for (unsigned k = 0; k < 8; k++) {
		h = hi[k] > h ? hi[k] : h;
		l = lo[k] < l ? lo[k] : l;
	}
	*ret_hi = h;
	*ret_lo = l;
	if (h >= f->bound_hi || l < f->small_hi)
		return false;
	/* each lane took two terms a group; squares were scaled by 2^2k */
	const uint64_t cnt = 2 * groups;
	for (unsigned j = 0; j < grids * levels; j++) {
		const xgrid *g = &f->g[j / levels];
		__int128 s = 0;
		for (unsigned v = 0; v < 2; v++)
			for (unsigned k = 0; k < 4; k++)
				s += (int64_t)(acc[j][v][k] - cnt * g->sbits[j % levels]);
		xacc_addmag(ret->xacc, g->ulp[j % levels] - 2 * f->k - GR_PARTIAL_EXP_MIN,
		            s < 0 ? -(unsigned __int128)s : (unsigned __int128)s, s < 0);
	}
	return true;
}

/* The top for elements whose largest c is hi: |x| <= (hi + 1) 2^32, which
 * is at most 2^M. */
static int xf64_top(int32_t hi)
{
	return (int)((uint32_t)hi >> 20) - 1022;
}

static GR_INLINE void xsum_f64(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                               const bool avx2, const bool fma)
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
		xf64_init(&f, M, levels, sq);
		bool ok;
		if (levels <= XL_MAX) {
			/* in registers, unrolled */
			v4du acc[2 * XL_MAX][2];
			ok = levels == 2 ? xf64_pass(p, n, &f, 2, sq, avx2, fma, acc, ret, &hi, &lo)
			     : levels == 3
			         ? xf64_pass(p, n, &f, 3, sq, avx2, fma, acc, ret, &hi, &lo)
			         : xf64_pass(p, n, &f, 4, sq, avx2, fma, acc, ret, &hi, &lo);
		} else {
			/* wide blocks: a loop over the levels, in memory */
			v4du acc[2 * XF_LEVELS_MAX][2];
			ok = xf64_pass(p, n, &f, levels, sq, avx2, fma, acc, ret, &hi, &lo);
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
	xsum_f64(p, n, ret, /* sq= */ false, /* avx2= */ false, /* fma= */ false);
}

#ifdef GR_HAVE_AVX2
GR_AVX2 void xsum_sum_f64_avx2(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ false, /* avx2= */ true, /* fma= */ false);
}
#endif

/*
 * f64 squares: the AVX2 kernel hands the block to one built with FMA when
 * the CPU has it (simd.h), which forms the low half of each square in one
 * operation instead of Dekker's eleven; both give the same exact value.
 */
void xsum_sumsq_f64_base(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ true, /* avx2= */ false, /* fma= */ false);
}

#ifdef GR_HAVE_AVX2
GR_AVX2_FMA static void xsum_sumsq_f64_fma(const unsigned char *p, size_t n, gr_partial *ret)
{
	xsum_f64(p, n, ret, /* sq= */ true, /* avx2= */ true, /* fma= */ true);
}

static bool xsum_have_fma(void)
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

GR_AVX2 void xsum_sumsq_f64_avx2(const unsigned char *p, size_t n, gr_partial *ret)
{
	if (xsum_have_fma())
		xsum_sumsq_f64_fma(p, n, ret);
	else
		xsum_f64(p, n, ret, /* sq= */ true, /* avx2= */ true, /* fma= */ false);
}
#endif
