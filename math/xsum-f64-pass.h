/*
 * The pass of the f64 block kernels (xsum.h) over the grid of
 * xsum-internal.h, and its parts: what xsum-f64.c (sums and sums of
 * squares) and xsum-f64-moments.c (moments in one pass) share. Internal
 * to them; include it after the fp-contract pragma, as they do.
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
 *
 * The AVX2 kernels go further (the baseline kernels keep the bounds
 * above):
 *
 * - The bounds are checked on the top 16 bits of x as loaded: the high
 *   words of four vectors packed into one (two shuffles and a blend), the
 *   sign masked off (a), then an unsigned maximum of a and a minimum of
 *   a - 1, on 16 lanes: seven operations a group of 16 elements instead
 *   of fourteen. a is zero for zeros, and for
 *   subnormals below 2^-1026 too, which would pass unseen; those are
 *   caught by MXCSR's denormal flag (simd.h) instead, which the pass
 *   clears first and reads after: when it is set, the block's bounds are
 *   taken again exactly, element by element. Where the flag does not work
 *   (valgrind), the AVX2 kernel hands the block to the baseline one.
 * - Where the CPU has FMA, t_a = y + sigma_a is x * 1 + sigma_a, one
 *   rounding, the same bits, on the multiplier's pipes, which the sum
 *   otherwise leaves idle beside the two adders'.
 */

#pragma once

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "math/simd.h"
#include "math/xsum-internal.h"

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
static inline uint32_t xf64_at_least(int e)
{
	if (e >= -1022)
		return (uint32_t)(e + 1023) << 20;
	if (e > -1042)
		return 1u << (e + 1042);
	return e > -1074;
}

/*
 * The scale of squares whose elements are at most 2^M, on grids of levels
 * levels: x 2^k at most 2^500. None (k = 0) where -400 <= M <= 500 and
 * levels <= XL_MAX: then x * x does not overflow, the grids stay in the
 * normal range (their last sigma at 2^(2M - 204) or above), and their
 * bound on the least element (xf64_init()) keeps every non-zero one at
 * 2^-475 or above, where the low half of its square (last bit at
 * 2e - 104 >= -1054) does not underflow either; and a pass need not
 * multiply.
 */
static inline int xf64_scale(int M, unsigned levels)
{
	if (M >= -400 && M <= 500 && levels <= XL_MAX)
		return 0;
	return 500 - M < 1000 ? 500 - M : 1000;
}

/*
 * The grid for elements of magnitude at most 2^M, levels levels a grid.
 * Sums: the top is 2^M (M <= 1000), and an element's last bit is on the
 * last level's unit, 2^u, when its exponent is at least u + 52. Squares:
 * x is scaled by 2^k (xf64_scale()) to at most 2^500 (the halves of x * x
 * neither over- nor underflow), the top of the high halves is 2^T, T = 2 (M + k), and
 * that of the low halves 2^(T - 53); for x of exponent e, x^2 has its last
 * bits at 2e - 52 (high half) and 2e - 104 (low half).
 */
static inline void xf64_init(xf64 *f, int M, unsigned levels, bool sq, int k)
{
	f->bound_hi = (M + 1023) << 20;
	if (!sq) {
		f->k = 0;
		xgrid_init(&f->g[0], M, levels);
		const int u = f->g[0].ulp[levels - 1];
		f->small_hi = u <= -1074 ? 0 : xf64_at_least(u + 52);
	} else {
		f->k = k;
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
static inline unsigned xf64_levels(int M, unsigned emin, bool sq)
{
	int e = emin ? (int)emin - 1023 : -1074;
	/* the last unit, 2^(top - 50 - 51 (L - 1)), at most the least
	 * element's last bit (sums: e - 52; squares, scaled: 2 (e + k) - 52) */
	int bits;
	if (!sq) {
		bits = M - 50 - (e - 52);
	} else {
		/* (whatever the scale k: it cancels) */
		bits = 2 * (M - e) + 2;
	}
	return bits <= 51 ? 2 : 1 + ((unsigned)bits + 50) / 51;
}

/* The high words of two vectors, packed into one. */
static GR_INLINE void xf64_high(v8si *ret, const v4du *c0, const v4du *c1)
{
	v8sf a, b;
	memcpy(&a, c0, sizeof(a));
	memcpy(&b, c1, sizeof(b));
	/* one vshufps: the odd words of each 128-bit half of both */
	v8sf h = GR_SHUFFLE2(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
	memcpy(ret, &h, sizeof(*ret));
}

/* Pack the high words of two vectors of |x| - 1 and fold them into the
 * bounds. */
static GR_INLINE void xf64_bound(v8si *hi, v8su *lo, const v4du *c0, const v4du *c1,
                                 const bool avx2)
{
	v8si hs;
	xf64_high(&hs, c0, c1);
	v8si_max(hi, &hs, avx2);
	v8su_min(lo, (const v8su *)&hs, avx2);
}

/*
 * The AVX2 sums' bounds: the top 16 bits of the four vectors x of the
 * group at q packed into one, less the sign, a; into *top their unsigned
 * maximum, into *low that of a - 1 (zeros wrap to 0xffff). The first two
 * vectors are loaded again two bytes on (within the group), where their
 * top words lie in the low halves of the high words: two vshufps and a
 * vpblendw, no shift.
 */
static GR_INLINE void xf64_bound_top(v16hu *top, v16hu *low, const unsigned char *q, const v4du *x)
{
	v4du x0, x1;
	memcpy(&x0, q + 2, sizeof(x0));
	memcpy(&x1, q + 34, sizeof(x1));
	v8si h0, h1;
	xf64_high(&h0, &x0, &x1);
	xf64_high(&h1, &x[2], &x[3]);
	v16hu a, b;
	memcpy(&a, &h0, sizeof(a));
	memcpy(&b, &h1, sizeof(b));
	a = GR_SHUFFLE2_16(a, b, 0, 17, 2, 19, 4, 21, 6, 23, 8, 25, 10, 27, 12, 29, 14, 31);
	a &= 0x7fff;
#ifdef GR_HAVE_AVX2
	v16hu_max_avx2(top, &a);
	a -= 1;
	v16hu_min_avx2(low, &a);
#else
	(void)top;
	(void)low;
#endif
}

/*
 * The bounds of elements [0, n) alone: the largest high word of |x| (which
 * bounds |x| as c does, and puts a power of two below the top it gives,
 * as the AVX2 pass wants), or -1 when all are zeros, and the least c.
 */
static GR_INLINE void xf64_bounds(const unsigned char *p, size_t n, const bool avx2,
                                  int32_t *ret_hi, uint32_t *ret_lo)
{
	v8si hi = (v8si){0} - 1;
	v8su lo = (v8su){0} - 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		v4du a0, a1;
		memcpy(&a0, p + 8 * i, sizeof(a0));
		memcpy(&a1, p + 8 * i + 32, sizeof(a1));
		a0 &= INT64_MAX;
		a1 &= INT64_MAX;
		v4du c0 = a0 - 1, c1 = a1 - 1;
		v8si ha, hc;
		xf64_high(&ha, &a0, &a1);
		xf64_high(&hc, &c0, &c1);
		v8si_max(&hi, &ha, avx2);
		v8su_min(&lo, (const v8su *)&hc, avx2);
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
		int32_t a = (int32_t)((b & INT64_MAX) >> 32);
		uint32_t c = (uint32_t)(((b & INT64_MAX) - 1) >> 32);
		h = a > h ? a : h;
		l = c < l ? c : l;
	}
	*ret_hi = l == UINT32_MAX ? -1 : h;
	*ret_lo = l;
}

/* y over the levels of one grid into acc[0, levels), lane set v (fma:
 * t_a as y * 1 + sigma_a, the same value). */
static GR_INLINE void xf64_split(const v4df *py, const v4df *sig, const v4df *last2, v4du (*acc)[2],
                                 unsigned v, const unsigned levels, const bool fma)
{
	v4df y = *py;
	v4du tb;
	for (unsigned j = 0; j + 2 < levels; j++) {
		v4df t = y + sig[j];
		memcpy(&tb, &t, sizeof(tb));
		acc[j][v] += tb;
		y = y - (t - sig[j]);
	}
	v4df ta;
#ifdef GR_HAVE_AVX2
	if (fma) {
		const v4df one = (v4df){0} + 1.0;
		v4df_fmadd_fma(&ta, &y, &one, &sig[levels - 2]);
	} else
#endif
	{
		(void)fma;
		ta = y + sig[levels - 2];
	}
	v4df tl = y - (ta - *last2);
	memcpy(&tb, &ta, sizeof(tb));
	acc[levels - 2][v] += tb;
	memcpy(&tb, &tl, sizeof(tb));
	acc[levels - 1][v] += tb;
}

/*
 * Ask for the data XF_AHEAD bytes past the group at q, into L2. The
 * hardware's streams stop at each 4 KiB page, and a pass that waits for
 * every new page reads from memory at half the rate of a plain read (a
 * sum of squares, at a third of its rate in cache, waits longest); a
 * fixed distance ahead, through the end of the block into whatever
 * follows (a prefetch never faults), keeps the next pages coming. 4 to
 * 64 KiB do about as well on the 2-core VM; 1 KiB does not.
 */
#define XF_AHEAD 16384

static GR_INLINE void xf64_ahead(const unsigned char *q)
{
	for (unsigned o = 0; o < XF_GROUP * 8; o += 64)
		__builtin_prefetch((const void *)((uintptr_t)q + XF_AHEAD + o), 0, 2);
}

/* x * x = *ret_h + *ret_l exactly, while nothing under- or overflows: l in
 * one fused operation, or after Dekker, from halves of x of 26 bits each. */
static GR_INLINE void xf64_square(v4df *ret_h, v4df *ret_l, const v4df *px, const bool fma)
{
	const v4df x = *px, h = x * x;
	*ret_h = h;
#ifdef GR_HAVE_AVX2
	if (fma) {
		v4df_fmsub_fma(ret_l, &x, &x, &h);
		return;
	}
#endif
	(void)fma;
	v4df cx = x * 134217729.0;
	v4df xh = cx - (cx - x);
	v4df xl = x - xh;
	*ret_l = ((xh * xh - h) + (xh + xh) * xl) + xl * xl;
}

/* One group of XF_GROUP elements at q into the lanes and the bounds
 * (top: the AVX2 sums' into top and low, else into hi and lo). */
static GR_INLINE void xf64_group(const unsigned char *q, const v4df (*sig)[XF_LEVELS_MAX],
                                 const v4df *last2, const v4df *scale, v4du (*acc)[2], v8si *hi,
                                 v8su *lo, v16hu *top, v16hu *low, const unsigned levels,
                                 const bool sq, const bool scaled, const bool avx2, const bool fma,
                                 const bool packed)
{
	v4du c[4];
	UNROLL
	for (unsigned v = 0; v < 4; v++) {
		v4df y;
		ld_f64(&y, q + 32 * v);
		memcpy(&c[v], &y, sizeof(c[v]));
		if (!packed)
			c[v] = (c[v] & INT64_MAX) - 1;
		if (!sq) {
			xf64_split(&y, sig[0], &last2[0], acc, v & 1, levels, fma);
			continue;
		}
		v4df x = scaled ? y * *scale : y, h, l;
		xf64_square(&h, &l, &x, fma);
		xf64_split(&h, sig[0], &last2[0], acc, v & 1, levels, false);
		xf64_split(&l, sig[1], &last2[1], acc + levels, v & 1, levels, false);
	}
	if (packed) {
		xf64_bound_top(top, low, q, c);
	} else {
		xf64_bound(hi, lo, &c[0], &c[1], avx2);
		xf64_bound(hi, lo, &c[2], &c[3], avx2);
	}
}

/* The sum of a level's lanes, less their count times sigma's bits: its
 * value in units of the level's ulp. */
static GR_INLINE __int128 xf64_lanes(const v4du *acc, uint64_t cnt, uint64_t sbits)
{
	__int128 s = 0;
	for (unsigned v = 0; v < 2; v++)
		for (unsigned k = 0; k < 4; k++)
			s += (int64_t)(acc[v][k] - cnt * sbits);
	return s;
}

/*
 * The bounds a pass kept in hi and lo, or (packed) in top and low, as
 * xf64_bounds() gives them: when the denormal flag went up (which the
 * caller reads only once every operation on an element is done), from all
 * the elements again.
 */
static GR_INLINE void xf64_pass_bounds(const unsigned char *p, size_t n, const v8si *hi,
                                       const v8su *lo, const v16hu *top, const v16hu *low,
                                       const bool avx2, const bool packed, int32_t *ret_hi,
                                       uint32_t *ret_lo)
{
	int32_t h = -1;
	uint32_t l = UINT32_MAX;
	if (!packed) {
		for (unsigned k = 0; k < 8; k++) {
			h = (*hi)[k] > h ? (*hi)[k] : h;
			l = (*lo)[k] < l ? (*lo)[k] : l;
		}
	} else if (mxcsr_de_seen()) {
		/* a subnormal (or a grid at the bottom of the range): those
		 * whose top is zero bound nothing above */
		xf64_bounds(p, n, avx2, &h, &l);
	} else {
		/* no subnormals: a is zero for zeros alone, and bounds |x| to
		 * [2^32 a 2^16, 2^32 (a + 1) 2^16) */
		uint16_t t = 0, w = UINT16_MAX;
		for (unsigned k = 0; k < 16; k++) {
			t = (*top)[k] > t ? (*top)[k] : t;
			w = (*low)[k] < w ? (*low)[k] : w;
		}
		h = t ? (int32_t)((uint32_t)t << 16 | 0xffff) : -1;
		l = w == UINT16_MAX ? UINT32_MAX : (uint32_t)(w + 1) << 16;
	}
	*ret_hi = h;
	*ret_lo = l;
}

/* The levels [0, levels) of grid g, whose lanes acc took cnt terms each,
 * into the accumulator a; the terms were scaled by 2^2k. */
static GR_INLINE void xf64_fold(uint64_t *a, const xgrid *g, const v4du (*acc)[2],
                                const unsigned levels, uint64_t cnt, int k)
{
	for (unsigned i = 0; i < levels; i += 2) {
		const unsigned last = i + 1 < levels ? i + 1 : i;
		__int128 s = xf64_lanes(acc[i], cnt, g->sbits[i]);
		/* two levels into one addition: their units are at most 2^51
		 * apart, and each sum is below 2^66 */
		if (last > i)
			s = s * ((__int128)1 << (g->ulp[i] - g->ulp[last])) +
			    xf64_lanes(acc[i + 1], cnt, g->sbits[last]);
		xacc_addmag(a, g->ulp[last] - 2 * k - GR_PARTIAL_EXP_MIN,
		            s < 0 ? -(unsigned __int128)s : (unsigned __int128)s, s < 0);
	}
}

/*
 * Sum p[0, n) (or its squares) on f's grids of levels levels, and bound
 * its elements: when the grids held them (*ret_hi below f->bound_hi,
 * *ret_lo at least f->small_hi), add the block's value to ret's
 * accumulator and return true; else leave it alone. The bounds are
 * reported either way (packed: from the top 16 bits of each element, or
 * when the denormal flag went up, from all of them again).
 */
static GR_INLINE bool xf64_pass(const unsigned char *p, size_t n, const xf64 *f,
                                const unsigned levels, const bool sq, const bool scaled,
                                const bool avx2, const bool fma, const bool packed, v4du (*acc)[2],
                                gr_partial *ret, int32_t *ret_hi, uint32_t *ret_lo)
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
	v16hu top = {0}, low = (v16hu){0} - 1;
	const size_t ng = n / XF_GROUP;
	if (packed)
		mxcsr_de_clear();
	for (size_t gi = 0; gi < ng; gi++) {
		xf64_ahead(p + gi * XF_GROUP * 8);
		xf64_group(p + gi * XF_GROUP * 8, sig, last2, &scale, acc, &hi, &lo, &top, &low,
		           levels, sq, scaled, avx2, fma, packed);
	}
	size_t groups = ng;
	if (n % XF_GROUP) {
		unsigned char tail[XF_GROUP * 8] = {0};
		memcpy(tail, p + ng * XF_GROUP * 8, (n % XF_GROUP) * 8);
		xf64_group(tail, sig, last2, &scale, acc, &hi, &lo, &top, &low, levels, sq, scaled,
		           avx2, fma, packed);
		groups++;
	}

	if (packed)
		/* every operation on an element feeds a lane: once they are
		 * all done, the flag has seen every operand */
		for (unsigned j = 0; j < grids * levels; j++)
			for (unsigned v = 0; v < 2; v++)
				__asm__ volatile("" : : "m"(acc[j][v]));
	xf64_pass_bounds(p, n, &hi, &lo, &top, &low, avx2, packed, ret_hi, ret_lo);
	if (*ret_hi >= f->bound_hi || *ret_lo < f->small_hi)
		return false;
	/* each lane took two terms a group */
	for (unsigned gr = 0; gr < grids; gr++)
		xf64_fold(ret->xacc, &f->g[gr], acc + gr * levels, levels, 2 * groups, f->k);
	return true;
}

/* The top for elements whose largest c is hi: |x| <= (hi + 1) 2^32, which
 * is at most 2^M. */
static inline int xf64_top(int32_t hi)
{
	return (int)((uint32_t)hi >> 20) - 1022;
}

#ifdef GR_HAVE_AVX2
/* Whether the AVX2 kernels may call the ones built with FMA (the CPU has
 * it, and GPURED_REDUCE_ISA is not avx2), and whether an operation on a
 * subnormal sets MXCSR's denormal flag here (xsum-f64.c). */
bool xsum_have_fma(void);
bool xsum_have_de(void);
#endif
