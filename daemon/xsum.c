/*
 * The exact accumulator of float sums and sums of squares (reduce.h):
 * adding elements, squares and partials into it exactly, rounding its
 * value once, its limbs for the wire, and the block kernels that fill it
 * at memory speed. reduce.c dispatches to the kernels and calls here to
 * start, combine and finish float sum partials.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/simd.h"
#include "daemon/xsum.h"

enum {
	XF_NAN = GR_PARTIAL_NAN,
	XF_PINF = GR_PARTIAL_PINF,
	XF_NINF = GR_PARTIAL_NINF,
	XF_SEEN = GR_PARTIAL_SEEN, /* an element other than -0.0 */
	XF_XACC = 1u << 8,         /* the value is xacc + v.f: set by every exact partial */
	XF_SPECIALS = XF_NAN | XF_PINF | XF_NINF,
};

#define XW GR_PARTIAL_XWORDS

/*
 * a += m * 2^b (or -= when neg), b counted from bit 0 of a. Bits that
 * would land below bit 0 must be zero (callers place exact values only);
 * carries past the top word are dropped (values stay in range).
 */
static void xacc_addmag(uint64_t *a, int b, unsigned __int128 m, bool neg)
{
	if (!m)
		return;
	if (b < 0) {
		m = -b < 128 ? m >> -b : 0;
		b = 0;
	}
	unsigned w = (unsigned)b / 64, s = (unsigned)b % 64;
	if (w >= XW)
		return;
	uint64_t x[3] = {(uint64_t)m << s, s ? (uint64_t)(m >> (64 - s)) : (uint64_t)(m >> 64),
	                 s ? (uint64_t)(m >> 64 >> (64 - s)) : 0};
	uint64_t c = 0;
	for (unsigned k = 0; w + k < XW; k++) {
		uint64_t d = k < 3 ? x[k] : 0;
		if (k >= 3 && !c)
			break;
		uint64_t o = a[w + k];
		if (!neg) {
			uint64_t s1 = o + d, c1 = s1 < d;
			a[w + k] = s1 + c;
			c = c1 | (a[w + k] < s1);
		} else {
			uint64_t s1 = o - d, c1 = o < d;
			a[w + k] = s1 - c;
			c = c1 | (s1 < c);
		}
	}
}

/* a += d * 2^scale, d finite; exact as long as the result's bits lie in range. */
static void xacc_add_f64(uint64_t *a, double d, int scale)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	unsigned e = (bits >> 52) & 0x7ff;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	if (!m)
		return;
	int lsb = (e ? (int)e - 1075 : -1074) + scale;
	int tz = __builtin_ctzll(m);
	xacc_addmag(a, lsb + tz - GR_PARTIAL_EXP_MIN, m >> tz, bits >> 63);
}

/* a += b, word by word */
static void xacc_add_words(uint64_t *a, const uint64_t *b)
{
	uint64_t c = 0;
	for (unsigned k = 0; k < XW; k++) {
		uint64_t s = a[k] + b[k], c1 = s < b[k];
		a[k] = s + c;
		c = c1 | (a[k] < s);
	}
}

/* Make p an exact partial (xacc + flags), folding in a double left in v.f. */
static void xacc_open(gr_partial *p)
{
	if (p->xflags & XF_XACC) {
		if (p->v.f != 0.0) {
			double f = p->v.f;
			p->v.f = 0.0;
			xacc_add_f64(p->xacc, f, 0);
		}
		p->v.f = 0.0;
		return;
	}
	double f = p->v.f;
	memset(p->xacc, 0, sizeof(p->xacc));
	p->v.f = 0.0;
	p->xflags = XF_XACC;
	if (isnan(f))
		p->xflags |= XF_NAN | XF_SEEN;
	else if (isinf(f))
		p->xflags |= (f > 0 ? XF_PINF : XF_NINF) | XF_SEEN;
	else if (f != 0.0 || !signbit(f))
		p->xflags |= XF_SEEN;
	if (isfinite(f))
		xacc_add_f64(p->xacc, f, 0);
}

/* One element, exactly, for sums (sq false) or sums of squares. */
static void xacc_elem(gr_partial *p, double x, bool sq)
{
	if (isnan(x)) {
		p->xflags |= XF_NAN | XF_SEEN;
		return;
	}
	if (isinf(x)) {
		p->xflags |= (sq || x > 0 ? XF_PINF : XF_NINF) | XF_SEEN;
		return;
	}
	if (sq || !(x == 0 && signbit(x)))
		p->xflags |= XF_SEEN;
	if (x == 0)
		return;
	if (!sq) {
		xacc_add_f64(p->xacc, x, 0);
		return;
	}
	/* x * x = hi + lo exactly while neither under- nor overflows: move
	 * |x| into [2^-400, 2^500] first and place the square back. */
	double ax = fabs(x);
	int s = 0;
	if (ax < 0x1p-400) {
		ax *= 0x1p600;
		s = -1200;
	} else if (ax > 0x1p500) {
		ax *= 0x1p-600;
		s = 1200;
	}
	double hi = ax * ax, lo = fma(ax, ax, -hi);
	xacc_add_f64(p->xacc, hi, s);
	xacc_add_f64(p->xacc, lo, s);
}

/*
 * Elements [0, n) of p, one by one: the path every value can take. A run
 * of elements goes first into 32-bit chunks kept in int64 (after Neal's
 * "small superaccumulator"): a term m * 2^b, m < 2^53, adds to three
 * neighbouring chunks without carries, each chunk takes 2^31 terms before
 * it could overflow, and the chunks are added to xacc once at the end.
 */
#define XCHUNKS (XW * 2 + 4)

static inline void xchunk_add(int64_t *c, double d, int scale)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	unsigned e = (bits >> 52) & 0x7ff;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	if (!m)
		return;
	int tz = __builtin_ctzll(m);
	int b = (e ? (int)e - 1075 : -1074) + scale + tz - GR_PARTIAL_EXP_MIN;
	m >>= tz;
	unsigned i = (unsigned)b / 32, s = (unsigned)b % 32;
	uint64_t lo = m << s, hi = (m >> 1) >> (63 - s); /* m * 2^s < 2^85 */
	int64_t c0 = (int64_t)(lo & 0xffffffffu);
	int64_t c1 = (int64_t)(lo >> 32);
	int64_t c2 = (int64_t)hi;
	/* signs are random in much data: negate without a branch */
	int64_t neg = -(int64_t)(bits >> 63);
	c[i] += (c0 ^ neg) - neg;
	c[i + 1] += (c1 ^ neg) - neg;
	c[i + 2] += (c2 ^ neg) - neg;
}

static void xacc_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64, bool sq)
{
	/* two sets, for even and odd elements: runs of one exponent update
	 * the same chunks, and two chains of them overlap */
	int64_t cc[2][XCHUNKS] = {{0}};
	uint64_t flags = sq && n ? XF_SEEN : 0;

	for (size_t i = 0; i < n; i++) {
		double x;
		if (is64) {
			memcpy(&x, p + 8 * i, 8);
		} else {
			float f;
			memcpy(&f, p + 4 * i, 4);
			x = f;
		}
		if (!isfinite(x)) {
			flags |= XF_SEEN | (isnan(x) ? XF_NAN : sq || x > 0 ? XF_PINF : XF_NINF);
			continue;
		}
		if (x == 0) {
			if (!signbit(x))
				flags |= XF_SEEN;
			continue;
		}
		flags |= XF_SEEN;
		int64_t *c = cc[i & 1];
		if (!sq) {
			xchunk_add(c, x, 0);
			continue;
		}
		/* as xacc_elem() */
		double ax = fabs(x);
		int sc = 0;
		if (ax < 0x1p-400) {
			ax *= 0x1p600;
			sc = -1200;
		} else if (ax > 0x1p500) {
			ax *= 0x1p-600;
			sc = 1200;
		}
		double hi = ax * ax;
		xchunk_add(c, hi, sc);
		xchunk_add(c, fma(ax, ax, -hi), sc);
	}
	ret->xflags |= flags;
	for (unsigned i = 0; i < XCHUNKS; i++) {
		/* |sum| < 2^(32 + 16) */
		int64_t v = cc[0][i] + cc[1][i];
		if (v)
			xacc_addmag(ret->xacc, (int)i * 32,
			            v < 0 ? -(unsigned __int128)v : (unsigned __int128)v, v < 0);
	}
}

static bool xacc_negative(const uint64_t *a)
{
	return a[XW - 1] >> 63;
}

/*
 * Word k of |a|, where low is a's least non-zero word: for a negative a,
 * -a = ~a + 1 is zero below low, -a[low] there (no carry leaves a word
 * that is not zero) and ~a[k] above.
 */
static uint64_t xacc_mag(const uint64_t *a, unsigned k, unsigned low, bool neg)
{
	if (!neg)
		return a[k];
	return k < low ? 0 : k == low ? -a[k] : ~a[k];
}

/* Any bit below bit i of |a| set? The same bits as of a: -a and a agree
 * on whether they are zero modulo 2^i. */
static bool xacc_sticky(const uint64_t *a, unsigned i, unsigned low)
{
	if (low != i / 64)
		return low < i / 64;
	return i % 64 && (a[low] & ((1ull << (i % 64)) - 1));
}

/* Bit 0 of xacc weighs 2^EXP_MIN; the least subnormal sits at this bit. */
#define XBIT_SUBMIN (-1074 - GR_PARTIAL_EXP_MIN)

/* The exact value of a float partial, rounded to nearest, ties to even. */
double xsum_round(const gr_partial *p)
{
	/* A partial filled by hand: the value is v.f. */
	if (!(p->xflags & XF_XACC))
		return p->v.f;

	uint64_t f = p->xflags;
	if ((f & XF_NAN) || (f & (XF_PINF | XF_NINF)) == (XF_PINF | XF_NINF))
		return NAN;
	if (f & XF_PINF)
		return INFINITY;
	if (f & XF_NINF)
		return -INFINITY;

	uint64_t t[XW];
	const uint64_t *a = p->xacc;
	if (p->v.f != 0.0) {
		memcpy(t, p->xacc, sizeof(t));
		xacc_add_f64(t, p->v.f, 0);
		a = t;
	}
	unsigned low = 0;
	while (low < XW && !a[low])
		low++;
	if (low == XW)
		/* an exact zero: -0 only when every element was -0 */
		return p->count && !(f & XF_SEEN) ? -0.0 : 0.0;
	/* the top word of |a|: the highest above low that is not all sign */
	const bool neg = xacc_negative(a);
	unsigned top = XW - 1;
	while (top > low && a[top] == (neg ? UINT64_MAX : 0))
		top--;
	const uint64_t wt = xacc_mag(a, top, low, neg);
	unsigned h = top * 64 + 63 - (unsigned)__builtin_clzll(wt);
	/* the result's last bit: 53 bits below h, but never below 2^-1074 */
	unsigned lo = h >= XBIT_SUBMIN + 52 ? h - 52 : XBIT_SUBMIN;
	unsigned w = lo / 64, b = lo % 64;
	uint64_t m = xacc_mag(a, w, low, neg) >> b;
	if (b && w + 1 < XW)
		m |= xacc_mag(a, w + 1, low, neg) << (64 - b);
	m &= (1ull << 53) - 1;
	/* lo >= XBIT_SUBMIN > 0; this holds for values below 2^-1074 too */
	const unsigned r = lo - 1;
	if (((xacc_mag(a, r / 64, low, neg) >> (r % 64)) & 1) &&
	    ((m & 1) || xacc_sticky(a, r, low)))
		m++;
	/* exact, or infinity when it rounds to 2^1024 or beyond */
	double v = ldexp((double)m, (int)lo + GR_PARTIAL_EXP_MIN);
	return neg ? -v : v;
}

void xsum_identity(gr_partial *ret, bool sq)
{
	/* exact and empty; squares are never -0 */
	ret->xflags = XF_XACC | (sq ? XF_SEEN : 0);
}

void xsum_combine(gr_partial *acc, const gr_partial *next)
{
	xacc_open(acc);
	if (next->xflags & XF_XACC) {
		xacc_add_words(acc->xacc, next->xacc);
		acc->xflags |= next->xflags;
		if (next->v.f != 0.0)
			xacc_add_f64(acc->xacc, next->v.f, 0);
	} else {
		/* filled by hand: its value is v.f, an element */
		xacc_elem(acc, next->v.f, false);
	}
}

/*
 * ---- exact float sums: the block kernels ----
 *
 * Every term of a block (the element or its square) must lie below 2^T,
 * from the block's largest magnitude. f32 blocks guess it from the first
 * XGUESS elements, one binade wider, and check the guess as they go (one
 * pass over memory); when it was wrong, a first pass finds the largest
 * magnitude and a second sums. The summing pass splits each term over a few
 * levels of a fixed grid: level j adds sigma_j = 1.5 * 2^K_j, K_1 = T + 2
 * and K_j+1 = K_j - 51, so t = y + sigma_j stays in sigma_j's binade, its
 * bits are those of sigma_j plus y rounded to a multiple of 2^(K_j - 52),
 * and y - (t - sigma_j) is the exact rest, which goes on to the next
 * level. The bits of t are summed in 64-bit integer lanes (each term's
 * part is below 2^50 units, a lane takes at most 2^12 of them); at the end
 * of the block each lane, less its count times the bits of sigma_j, is
 * an exact integer number of units, added to the exact accumulator once.
 *
 * Nothing may be left after the last level. Integer lanes prove it
 * beside the sums: every non-zero element must be at least a bound (its
 * exponent high enough for its last bit, or its square's, to land on the
 * grid). When one is not, the block is summed again with one more level;
 * when that is not enough either, or the block holds an infinity, a NaN
 * or a magnitude too large for the grid, it is summed element by element
 * (xacc_elems), which is slower but takes any value.
 * Levels: one for f32 (24 bits; exact while the block's exponents span
 * 26 or so), two for f32 squares (about 26). f64 sums and squares have a
 * pass of their own over the same grid (xsum_f64(), below).
 *
 * Whatever path a block takes, its partial holds the exact value, so the
 * paths (and the ISA) can never show in the result.
 */
#define XL_MAX 4
/* Levels of the f64 pass (xsum_f64()): past XL_MAX, a loop over them; past
 * XF_LEVELS_MAX (a grid), the element path is faster (on the 2-core VM) */
#define XF_LEVELS_MAX 12
#define XNV 4
#define XGROUP (4 * XNV)

typedef struct xgrid {
	double sigma[XF_LEVELS_MAX];
	uint64_t sbits[XF_LEVELS_MAX];
	int ulp[XF_LEVELS_MAX]; /* log2 of the level's unit */
} xgrid;

/* The levels for terms below 2^T (T <= 1020) in magnitude. */
static void xgrid_init(xgrid *g, int T, unsigned levels)
{
	int K = T + 2;
	for (unsigned j = 0; j < levels; j++, K -= 51) {
		/* sigma must stay normal; 2^-1074 units leave no rest */
		int k = K < -1022 ? -1022 : K;
		/* 1.5 * 2^k, built from its bits rather than by ldexp() */
		g->sbits[j] = (uint64_t)(k + 1023) << 52 | 1ull << 51;
		memcpy(&g->sigma[j], &g->sbits[j], sizeof(g->sigma[j]));
		g->ulp[j] = k - 52;
	}
}

/* Split y over the levels; the caller proves that nothing is left. */
/* y by pointer: a vector passed by value changes the ABI between the
 * baseline and AVX2 builds, which clang refuses under -Werror. */
static GR_INLINE void x_cascade(const v4df *py, const v4df *sig, v4du (*acc)[XNV], unsigned v,
                                unsigned levels)
{
	v4df y = *py;
	for (unsigned j = 0; j < levels; j++) {
		v4df t = y + sig[j];
		v4du tb;
		memcpy(&tb, &t, sizeof(tb));
		acc[j][v] += tb;
		if (j + 1 < levels)
			y = y - (t - sig[j]);
	}
}

/* Bits of the largest |element| of f32 (NaN above infinity). Four
 * independent maxima, so that the compare-and-blend chains overlap. */
static GR_INLINE uint32_t x_maxbits(const unsigned char *p, size_t n)
{
	uint32_t best = 0;
	size_t i = 0;
	v8si mx[4] = {{0}};
	for (const size_t nv = n & ~(size_t)31; i < nv; i += 32) {
		UNROLL
		for (unsigned v = 0; v < 4; v++) {
			v8si x;
			memcpy(&x, p + 4 * (i + 8 * v), sizeof(x));
			x &= INT32_MAX;
			v8si c = x > mx[v];
			mx[v] = (x & c) | (mx[v] & ~c);
		}
	}
	for (unsigned v = 0; v < 4; v++)
		for (unsigned k = 0; k < 8; k++)
			best = (uint32_t)mx[v][k] > best ? (uint32_t)mx[v][k] : best;
	for (; i < n; i++) {
		uint32_t x;
		memcpy(&x, p + 4 * i, sizeof(x));
		x &= INT32_MAX;
		best = x > best ? x : best;
	}
	return best;
}

/* The element path for a whole block, after the fast one gave up. */
static void xsum_slow(const unsigned char *p, size_t n, gr_partial *ret, bool is64, bool sq)
{
	memset(ret->xacc, 0, sizeof(ret->xacc));
	ret->xflags = XF_XACC;
	xacc_elems(ret, p, n, is64, sq);
}

/* What xsum_pass() did. */
enum {
	XPASS_DONE,  /* ret holds the block */
	XPASS_GUESS, /* the guess was wrong, or the block needs the full path */
	XPASS_WIDE,  /* exponents too far apart for these levels */
};

/*
 * The summing pass of an f32 block whose largest |element| has the bits
 * maxbits. With guess, maxbits is only an estimate: the pass also checks
 * that every element lies below the grid's bound. Unless it returns
 * XPASS_DONE, ret's value is untouched.
 */
static GR_INLINE int xsum_pass(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                               const unsigned levels, const uint32_t maxbits, const bool guess)
{
	const unsigned eb = maxbits >> 23;
	/* |element| < 2^M */
	const int M = (eb ? (int)eb : 1) - 127 + 1;
	const int T = sq ? 2 * M : M;

	if (guess && (maxbits == 0 || eb + 1 >= 0xff || T > 1000))
		return XPASS_GUESS;
	/* |x| bits below this, or the guess was wrong */
	const uint32_t bound = (eb ? eb + 1 : 1) << 23;
	ret->xflags = XF_XACC;
	if (maxbits == 0) {
		/* nothing but zeros: "seen" unless they are all -0 */
		for (size_t i = 0; i < n && !(ret->xflags & XF_SEEN); i++)
			if (sq || !(p[i * 4 + 3] & 0x80))
				ret->xflags |= XF_SEEN;
		return XPASS_DONE;
	}
	if (eb >= 0xff || T > 1000) {
		xsum_slow(p, n, ret, /* is64= */ false, sq);
		return XPASS_DONE;
	}

	xgrid g;
	xgrid_init(&g, T, levels);
	v4df sig[XL_MAX];
	for (unsigned j = 0; j < levels; j++)
		sig[j] = (v4df){0} + g.sigma[j];
	v4du acc[XL_MAX][XNV]; /* wrapping sums */
	memset(acc, 0, sizeof(acc));
	const size_t ng = n / XGROUP;
	/*
	 * Sums prove in integer lanes, rather than with what the last level
	 * leaves (fewer float operations), that every non-zero element (or
	 * square) is a multiple of the last level's unit: its exponent field
	 * is at least ef, that is 0 < |x| bits < th never holds. The unsigned
	 * compare is a signed one of |x| bits - 1 + 2^31.
	 */
	v8si small = {0}, over = {0};
	const v8si bm = (v8si){0} + (int32_t)(bound - 1);
	const int u = sq ? (g.ulp[levels - 1] + 1) >> 1 : g.ulp[levels - 1];
	const int ef = u + 150;
	const uint32_t th = ef <= 1 ? 1 : (uint32_t)(ef >= 0xff ? 0xff : ef) << 23;
	const v8si thv = (v8si){0} + (int32_t)((th - 1) ^ 0x80000000u);
	/* the block after a whole one is most likely next: bring it to L2
	 * while this one is summed, so that the first pass does not wait */
	const uintptr_t ahead = n == GR_REDUCE_BLOCK ? n * 4 : 0;

	for (size_t gi = 0; gi < ng; gi++) {
		const unsigned char *q = p + gi * XGROUP * 4;
		if (ahead)
			for (size_t o = 0; o < XGROUP * 4; o += 64)
				__builtin_prefetch((const void *)((uintptr_t)q + ahead + o), 0, 2);
		UNROLL
		for (unsigned v = 0; v < XGROUP / 8; v++) {
			v8su b;
			memcpy(&b, q + v * 32, sizeof(b));
			b &= INT32_MAX;
			if (guess)
				over |= (v8si)b > bm;
			b += INT32_MAX;
			small |= thv > (v8si)b;
		}
		UNROLL
		for (unsigned v = 0; v < XNV; v++) {
			v4df x;
			ld_f32_as_f64(&x, q + v * 16);
			if (sq)
				x = x * x;
			x_cascade(&x, sig, acc, v, levels);
		}
	}

	if (guess) {
		int32_t o = 0;
		for (unsigned l = 0; l < 8; l++)
			o |= over[l];
		/* and the tail, which the groups did not see */
		for (size_t i = ng * XGROUP; i < n; i++) {
			uint32_t b;
			memcpy(&b, p + i * 4, 4);
			o |= (b & INT32_MAX) >= bound;
		}
		if (o)
			return XPASS_GUESS;
	}
	int32_t bad = 0;
	for (unsigned l = 0; l < 8; l++)
		bad |= small[l];
	if (bad)
		return XPASS_WIDE;
	const uint64_t cnt = ng;
	for (unsigned j = 0; j < levels; j++) {
		__int128 s = 0;
		for (unsigned v = 0; v < XNV; v++)
			for (unsigned l = 0; l < 4; l++)
				s += (int64_t)((uint64_t)acc[j][v][l] - cnt * g.sbits[j]);
		xacc_addmag(ret->xacc, g.ulp[j] - GR_PARTIAL_EXP_MIN,
		            s < 0 ? -(unsigned __int128)s : (unsigned __int128)s, s < 0);
	}
	ret->xflags |= XF_SEEN;
	xacc_elems(ret, p + ng * XGROUP * 4, n - ng * XGROUP, /* is64= */ false, sq);
	return XPASS_DONE;
}

/* Elements sampled for the guess of a block's largest magnitude. */
#define XGUESS 256

/*
 * ---- f64 sums: one pass, bounds in packed high words ----
 *
 * f64 sums have a pass of their own over the same grid, cheaper per
 * element in two ways:
 *
 * - The last two levels, a and b, take three additions, not four. With
 *   S = sigma_a + sigma_b (exact: its bits span 53), t_a = y + sigma_a,
 *   r = t_a - S (exact: a multiple of t_a's unit, at most 2^53 of them)
 *   and t_b = y - r: that is y - (t_a - sigma_a) + sigma_b rounded once,
 *   the t_b of the cascade above, without its rest.
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

/*
 * f32 sums whose elements lie within a few binades of one another, as most
 * small arrays' do: every element is a multiple of 2^(emin - 150) (emin
 * the least biased exponent of a non-zero one, 1 for subnormals) and below
 * 2^(emax - 126), so every sum of up to n of them, in any order, is an
 * integer multiple of that unit below 2^(emax - emin + 24 + ceil(log2 n))
 * units: exact in a double while that is at most 2^53. Then the block's
 * exact value is the plain double sum, and no accumulator is needed. The
 * exponents are checked in integer lanes beside the sum; a special (or a
 * sum of zeros, whose sign the exact path decides) goes the exact way.
 */
#define XSUM_NARROW_MAX 4096u

static GR_INLINE bool xsum_f32_narrow(const unsigned char *p, size_t n, gr_partial *ret)
{
	v4df a[4] = {{0}};
	v4si emax = {0}, emin = {255, 255, 255, 255};
	const v4si one = {1, 1, 1, 1}, big = {255, 255, 255, 255};
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		UNROLL
		for (unsigned v = 0; v < 4; v++) {
			v4si b;
			v4sf x;
			memcpy(&b, p + 4 * (i + 4 * v), sizeof(b));
			memcpy(&x, p + 4 * (i + 4 * v), sizeof(x));
			v4si e = (b >> 23) & 0xff;
			v4si nz = (b & 0x7fffffff) != 0;
			v4si ee = e | (one & (e == 0)); /* subnormals count as exponent 1 */
			v4si c = emax > ee;
			emax = (emax & c) | (ee & ~c);
			v4si m = (ee & nz) | (big & ~nz);
			c = emin < m;
			emin = (emin & c) | (m & ~c);
			a[v] += __builtin_convertvector(x, v4df);
		}
	}
	int hi = 0, lo = 255;
	for (unsigned k = 0; k < 4; k++) {
		hi = emax[k] > hi ? emax[k] : hi;
		lo = emin[k] < lo ? emin[k] : lo;
	}
	double tail = 0;
	for (; i < n; i++) {
		uint32_t b;
		float x;
		memcpy(&b, p + 4 * i, sizeof(b));
		memcpy(&x, p + 4 * i, sizeof(x));
		int e = (int)((b >> 23) & 0xff);
		int ee = e ? e : 1;
		hi = ee > hi ? ee : hi;
		if (b & 0x7fffffffu)
			lo = ee < lo ? ee : lo;
		tail += (double)x;
	}
	int lg = n > 1 ? 64 - __builtin_clzll((unsigned long long)n - 1) : 0;
	if (hi == 255 || lo == 255 || hi - lo + 24 + lg > 53)
		return false;
	v4df t = (a[0] + a[1]) + (a[2] + a[3]);
	double sum = ((t[0] + t[1]) + (t[2] + t[3])) + tail;
	if (sum == 0)
		return false;
	/* the value is v.f, exactly; the accumulator stays as
	 * gr_partial_identity() cleared it */
	ret->v.f = sum;
	ret->xflags = 0;
	return true;
}

static GR_INLINE void xsum_body(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                                const unsigned levels)
{
	/* small arrays, where it pays: a large block that misses the bound
	 * would be read twice */
	if (!sq && n <= XSUM_NARROW_MAX && xsum_f32_narrow(p, n, ret))
		return;
	/* One pass over the block when a sample of it, one binade wider,
	 * bounds the rest (most data); else find the largest, then sum; when
	 * the exponents lie too far apart, sum with one more level; and when
	 * even that is not enough, element by element. */
	int r = XPASS_GUESS;
	if (n >= 4 * XGUESS) {
		uint32_t b = x_maxbits(p, XGUESS);
		b += b ? 1u << 23 : 0;
		r = xsum_pass(p, n, ret, sq, levels, b, true);
	}
	if (r == XPASS_DONE)
		return;
	const uint32_t mb = x_maxbits(p, n);
	if (r == XPASS_GUESS)
		r = xsum_pass(p, n, ret, sq, levels, mb, false);
	if (r == XPASS_WIDE)
		r = xsum_pass(p, n, ret, sq, levels + 1, mb, false);
	if (r == XPASS_WIDE)
		xsum_slow(p, n, ret, /* is64= */ false, sq);
}

/* clang-format off */
#define DEF_XSUM(NAME, SQ, LEVELS)                                                                 \
	void xsum_##NAME##_base(const unsigned char *p, size_t n, gr_partial *ret)                 \
	{                                                                                          \
		xsum_body(p, n, ret, SQ, LEVELS);                                                  \
	}                                                                                          \
	GR_AVX2_ONLY(GR_AVX2 void xsum_##NAME##_avx2(const unsigned char *p, size_t n,             \
	                                             gr_partial *ret)                              \
	             { xsum_body(p, n, ret, SQ, LEVELS); })

DEF_XSUM(sum_f32, false, 1)
DEF_XSUM(sumsq_f32, true, 2)
/* clang-format on */

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

/* ---- moments: its sum of squares, beside the sum ---- */

void xsum_sq_take(gr_partial *ret, const gr_partial *sq)
{
	gr_partial t = *sq;

	xacc_open(&t);
	memcpy(ret->x2acc, t.xacc, sizeof(ret->x2acc));
	ret->x2flags = t.xflags;
}

void xsum_sq_combine(gr_partial *acc, const gr_partial *next)
{
	xacc_add_words(acc->x2acc, next->x2acc);
	acc->x2flags |= next->x2flags;
}

void xsum_moments_identity(gr_partial *ret, bool is_int)
{
	/* integers are never -0: their sum is "seen" from the start */
	ret->xflags = XF_XACC | (is_int ? XF_SEEN : 0);
	ret->x2flags = XF_XACC | XF_SEEN;
}

void xsum_add_int(uint64_t *a, unsigned bit, unsigned __int128 m, bool neg)
{
	xacc_addmag(a, (int)bit - GR_PARTIAL_EXP_MIN, m, neg);
}

/* ---- folding in values from elsewhere ---- */

int gr_partial_add_scaled(gr_partial *p, int64_t digit, int exp2)
{
	if (!digit)
		return 0;
	if (exp2 < GR_PARTIAL_EXP_MIN || exp2 > GR_PARTIAL_EXP_MAX - 63)
		return -ERANGE;
	xacc_open(p);
	unsigned __int128 m = digit < 0 ? -(unsigned __int128)digit : (unsigned __int128)digit;
	xacc_addmag(p->xacc, exp2 - GR_PARTIAL_EXP_MIN, m, digit < 0);
	p->xflags |= XF_SEEN;
	return 0;
}

void gr_partial_add_special(gr_partial *p, unsigned flags)
{
	xacc_open(p);
	p->xflags |= flags & (XF_SPECIALS | XF_SEEN);
}

size_t gr_partial_limbs(const gr_partial *p, uint64_t *words, size_t max, int *ret_scale,
                        unsigned *ret_flags)
{
	gr_partial t;
	const gr_partial *x = p;
	if (!(p->xflags & XF_XACC) || p->v.f != 0.0) {
		t = *p;
		xacc_open(&t);
		x = &t;
	}
	unsigned flags = x->xflags & XF_SPECIALS;
	size_t lo = 0, hi = XW;
	while (lo < XW && !x->xacc[lo])
		lo++;
	if (lo == XW) {
		if (x->count && !(x->xflags & XF_SEEN))
			flags |= GR_PARTIAL_NEGZERO;
		*ret_flags = flags;
		*ret_scale = 0;
		return 0;
	}
	/* drop top words that only repeat the sign of the word below */
	uint64_t sign = xacc_negative(x->xacc) ? UINT64_MAX : 0;
	while (hi - lo > 1 && x->xacc[hi - 1] == sign && (x->xacc[hi - 2] >> 63) == (sign & 1))
		hi--;
	*ret_flags = flags;
	*ret_scale = GR_PARTIAL_EXP_MIN + (int)lo * 64;
	if (hi - lo <= max)
		memcpy(words, x->xacc + lo, (hi - lo) * sizeof(*words));
	return hi - lo;
}

int gr_partial_from_limbs(gr_partial *ret, uint64_t count, const uint64_t *words, size_t n,
                          int scale, unsigned flags)
{
	const unsigned known =
	    GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF | GR_PARTIAL_NEGZERO;
	if (n > GR_PARTIAL_LIMBS_MAX || scale < GR_PARTIAL_EXP_MIN || scale > GR_PARTIAL_EXP_MAX ||
	    (flags & ~known))
		return -EINVAL;
	bool zero = true;
	for (size_t k = 0; k < n; k++)
		zero &= words[k] == 0;
	if ((flags & GR_PARTIAL_NEGZERO) && (!zero || count == 0))
		return -EINVAL;
	if (count == 0 && (!zero || flags))
		return -EINVAL;

	/* Place the words at bit o; every word of the shifted value above
	 * the accumulator must be sign only, and the accumulator's top bit
	 * must be the sign. */
	uint64_t a[XW] = {0};
	unsigned o = (unsigned)(scale - GR_PARTIAL_EXP_MIN), w = o / 64, b = o % 64;
	uint64_t sign = n && words[n - 1] >> 63 ? UINT64_MAX : 0;
	for (size_t k = w; k <= w + n; k++) {
		size_t i = k - w;
		uint64_t cur = i < n ? words[i] : sign;
		uint64_t prev = i == 0 ? 0 : words[i - 1];
		uint64_t x = b ? cur << b | prev >> (64 - b) : cur;
		if (k < XW)
			a[k] = x;
		else if (x != sign)
			return -EINVAL;
	}
	for (size_t k = w + n + 1; k < XW; k++)
		a[k] = sign;
	if ((a[XW - 1] >> 63) != (sign & 1))
		return -EINVAL;

	gr_partial_identity(GR_OP_SUM, GR_DT_F64, ret);
	ret->count = count;
	ret->xflags = XF_XACC | (flags & XF_SPECIALS);
	if (count && !(flags & GR_PARTIAL_NEGZERO))
		ret->xflags |= XF_SEEN;
	memcpy(ret->xacc, a, sizeof(ret->xacc));
	return 0;
}
