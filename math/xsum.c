/*
 * The exact accumulator of float sums and sums of squares (reduce.h):
 * adding elements, squares and partials into it exactly, rounding its
 * value once, and its limbs for the wire. The block kernels that fill it
 * at memory speed are in xsum-f32.c and xsum-f64*.c; reduce.c dispatches
 * to them and calls here to start, combine and finish float sum partials.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "math/xsum-internal.h"
#include "math/wide.h"
#include "math/xsum.h"

static unsigned xacc_run_up(const uint64_t *a, unsigned i, uint64_t w)
{
	return gr_wide_run_up(a, XW, i, w);
}

/* a += m * 2^b (or -= when neg): xsum-internal.h */
void xacc_addmag(uint64_t *a, int b, unsigned __int128 m, bool neg)
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
	unsigned k = w;
	for (; k < w + 3 && k < XW; k++) {
		uint64_t d = x[k - w], o = a[k];
		if (!neg) {
			uint64_t s1 = o + d, c1 = s1 < d;
			a[k] = s1 + c;
			c = c1 | (a[k] < s1);
		} else {
			uint64_t s1 = o - d, c1 = o < d;
			a[k] = s1 - c;
			c = c1 | (s1 < c);
		}
	}
	if (!c || k == XW)
		return;
	/* the carry runs through all ones (a borrow through zeros), which
	 * it turns into zeros (ones), up to the first other word: a whole
	 * empty accumulator's worth when a negative value goes into it */
	const uint64_t run = neg ? 0 : UINT64_MAX;
	const unsigned end = xacc_run_up(a, k, run);
	for (; k < end; k++)
		a[k] = ~run;
	if (end < XW)
		a[end] += neg ? UINT64_MAX : 1;
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

void xacc_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64, bool sq)
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

/*
 * Sums element by element at a cost per element that no spread of
 * exponents changes (after Neal's "large superaccumulator"): one unsigned
 * counter per sign and exponent field, into which an element's integer
 * mantissa goes with one addition and no shift. An f32 mantissa is below
 * 2^24, so a counter takes 2^40 of them; an f64 one below 2^53, so a
 * counter that reaches 2^63 (at least 2^10 additions on) is moved into the
 * 32-bit chunks of xacc_elems() and cleared. At the end every counter
 * goes into the chunks (three each: a counter is below 2^64, shifted by
 * less than 32), and the chunks into xacc.
 */
#define XCOUNT_F64 4096 /* sign and 11-bit exponent field */
#define XCOUNT_F32 512  /* sign and 8-bit exponent field */

/* Counter t (sign and exponent field of an f64), value v, into the chunks
 * c. Its unit is 2^(e - 1075), subnormals' (e = 0) as e = 1's. */
static void xcount_move(int64_t *c, unsigned t, uint64_t v)
{
	const unsigned e = t & 0x7ff;
	const unsigned b = (e ? e : 1) - 1075 - GR_PARTIAL_EXP_MIN;
	const unsigned i = b / 32, s = b % 32;
	const uint64_t lo = v << s, hi = s ? v >> (64 - s) : 0;
	const int64_t c0 = (int64_t)(lo & 0xffffffffu), c1 = (int64_t)(lo >> 32), c2 = (int64_t)hi;
	if (t >> 11) {
		c[i] -= c0;
		c[i + 1] -= c1;
		c[i + 2] -= c2;
	} else {
		c[i] += c0;
		c[i + 1] += c1;
		c[i + 2] += c2;
	}
}

#define XCOUNT_UNROLL _Pragma("GCC unroll 32")

/* d 2^s, d an int64 and s < 32, as three chunk digits: its low 32 bits,
 * the next 32 and the signed rest, each at most 2^32 in magnitude. */
static GR_INLINE void xcount_digits(int64_t d, unsigned s, int64_t *a0, int64_t *a1, int64_t *a2)
{
	const int64_t r = d >> (32 - s);
	*a0 += (int64_t)(((uint64_t)d << s) & 0xffffffffu);
	*a1 += r & 0xffffffff;
	*a2 += r >> 32;
}

/* The counters' and chunks' value into ret's accumulator; false (and
 * nothing added) when an element was an infinity or a NaN. */
static bool xcount_finish(gr_partial *ret, uint64_t *cnt, int64_t *c, bool is64)
{
	const unsigned h = is64 ? XCOUNT_F64 / 2 : XCOUNT_F32 / 2, top = h - 1;
	/* specials are in the counters of the top exponent field, and no
	 * finite element is */
	if (cnt[top] | cnt[top + h])
		return false;
	/*
	 * Each exponent field's two counters at once, with no branch (in
	 * much data most of them are set): both are below 2^63, so their
	 * difference is an int64. Field e's unit is 2^(e - 1075) for f64
	 * and 2^(e - 150) = 2^(e + 925 - 1075) for f32, subnormals' (e = 0)
	 * as e = 1's: bit b = e + off of the chunks. Thirty-two fields in a
	 * row share their chunks, and sum into registers first: through
	 * memory, each would wait for the one before.
	 */
	const unsigned off = (is64 ? 0 : 925) - 1075 - GR_PARTIAL_EXP_MIN;
	const unsigned first = 32 - (1 + off) % 32 + 1, last = first + (top - first) / 32 * 32;
	for (unsigned e = 0; e < top; e++) {
		if (e == first)
			e = last;
		const unsigned b = (e ? e : 1) + off;
		int64_t *const ci = c + b / 32;
		xcount_digits((int64_t)(cnt[e] - cnt[e + h]), b % 32, &ci[0], &ci[1], &ci[2]);
	}
	for (unsigned e = first; e < last; e += 32) {
		int64_t a0 = 0, a1 = 0, a2 = 0;
		/* unrolled: each shift a constant */
		XCOUNT_UNROLL
		for (unsigned s = 0; s < 32; s++)
			xcount_digits((int64_t)(cnt[e + s] - cnt[e + s + h]), s, &a0, &a1, &a2);
		int64_t *const ci = c + (e + off) / 32;
		ci[0] += a0;
		ci[1] += a1;
		ci[2] += a2;
	}
	xsum_add_digits(ret->xacc, GR_PARTIAL_EXP_MIN, c, XCHUNKS - 4);
	return true;
}

static GR_INLINE void xcount_f64(gr_partial *ret, const unsigned char *p, size_t n)
{
	uint64_t cnt[XCOUNT_F64] = {0};
	int64_t c[XCHUNKS] = {0};
	bool special = false;
	for (size_t i = 0; i < n; i++) {
		uint64_t b;
		memcpy(&b, p + 8 * i, sizeof(b));
		const unsigned t = (unsigned)(b >> 52);
		const uint64_t f = b & ((1ull << 52) - 1);
		/* the implicit bit, but for subnormals and zeros */
		const uint64_t m = t & 0x7ff ? f | 1ull << 52 : f;
		const uint64_t v = cnt[t] + m;
		cnt[t] = v;
		if (__builtin_expect(v >> 63, 0)) {
			/* a special's counter may be the one: remember it */
			special |= (t & 0x7ff) == 0x7ff;
			xcount_move(c, t, v);
			cnt[t] = 0;
		}
	}
	if (special || !xcount_finish(ret, cnt, c, /* is64= */ true))
		xacc_elems(ret, p, n, /* is64= */ true, /* sq= */ false);
}

static GR_INLINE void xcount_f32(gr_partial *ret, const unsigned char *p, size_t n)
{
	uint64_t cnt[XCOUNT_F32] = {0};
	int64_t c[XCHUNKS] = {0};
	for (size_t i = 0; i < n; i++) {
		uint32_t b;
		memcpy(&b, p + 4 * i, sizeof(b));
		const unsigned t = b >> 23;
		const uint32_t f = b & ((1u << 23) - 1);
		cnt[t] += t & 0xff ? f | 1u << 23 : f;
	}
	if (!xcount_finish(ret, cnt, c, /* is64= */ false))
		xacc_elems(ret, p, n, /* is64= */ false, /* sq= */ false);
}

/* Below this many f64 elements, clearing and folding 32 KB of counters
 * costs more than the chunks of xacc_elems() (with every exponent, on
 * the 2-core VM: even at 256, 384; 1.6x faster at 1024). */
#define XCOUNT_MIN_F64 384

void xacc_sum_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64)
{
	if (is64 && n < XCOUNT_MIN_F64) {
		xacc_elems(ret, p, n, is64, /* sq= */ false);
		return;
	}
	/* "seen": an element other than -0, which the counters cannot tell */
	for (size_t i = 0; i < n && !(ret->xflags & XF_SEEN); i++) {
		bool neg0;
		if (is64) {
			uint64_t b;
			memcpy(&b, p + 8 * i, sizeof(b));
			neg0 = b == 1ull << 63;
		} else {
			uint32_t b;
			memcpy(&b, p + 4 * i, sizeof(b));
			neg0 = b == 1u << 31;
		}
		if (!neg0)
			ret->xflags |= XF_SEEN;
	}
	if (is64)
		xcount_f64(ret, p, n);
	else
		xcount_f32(ret, p, n);
}

/*
 * Squares element by element, likewise at a cost per element that no
 * spread of exponents changes: the square of a mantissa m (an f32's below
 * 2^24, an f64's below 2^53) goes whole into one counter per exponent
 * field, a uint64 for f32 (m^2 < 2^48: a block's 2^15 of them stay below
 * 2^63) and an unsigned __int128 for f64 (m^2 < 2^106: below 2^121). Field
 * e's unit is the square of the element's, 2^(2 (e - 150)) for f32 and
 * 2^(2 (e - 1075)) for f64 (subnormals' as e = 1's). f32 keeps two sets of
 * counters, for even and odd elements, as xacc_elems() keeps two sets of
 * chunks; an NaN or infinity leaves the top field's counter nonzero, and
 * the block then takes the element path.
 */
#define XSQ_MAX_N ((size_t)1 << 15)

/* v 2^s (v < 2^121, s < 32) into the chunks from c[0], 32 bits each. */
static void xsq_move(int64_t *c, unsigned __int128 v, unsigned s)
{
	unsigned __int128 lo = v << s;
	unsigned top = s ? (unsigned)(v >> (128 - s)) : 0;
	for (unsigned k = 0; k < 4; k++, lo >>= 32)
		c[k] += (int64_t)(uint32_t)lo;
	c[4] += top;
}

static bool xsq_f32(gr_partial *ret, const unsigned char *p, size_t n)
{
	uint64_t cnt[2][256] = {{0}};
	int64_t c[XCHUNKS] = {0};
	for (size_t i = 0; i < n; i++) {
		uint32_t b;
		memcpy(&b, p + 4 * i, sizeof(b));
		const unsigned t = (b >> 23) & 0xff;
		const uint64_t m = t ? (b & 0x7fffffu) | 1u << 23 : b & 0x7fffffu;
		cnt[i & 1][t] += m * m;
	}
	if (cnt[0][255] | cnt[1][255])
		return false;
	for (unsigned e = 0; e < 255; e++) {
		const uint64_t v = cnt[0][e] + cnt[1][e]; /* each below 2^62 */
		if (!v)
			continue;
		const unsigned b = 2 * (e ? e : 1) - 300 - GR_PARTIAL_EXP_MIN;
		xsq_move(c + b / 32, v, b % 32);
	}
	xsum_add_digits(ret->xacc, GR_PARTIAL_EXP_MIN, c, XCHUNKS - 4);
	return true;
}

static bool xsq_f64(gr_partial *ret, const unsigned char *p, size_t n)
{
	unsigned __int128 cnt[2048] = {0};
	int64_t c[XCHUNKS] = {0};
	for (size_t i = 0; i < n; i++) {
		uint64_t b;
		memcpy(&b, p + 8 * i, sizeof(b));
		const unsigned t = (b >> 52) & 0x7ff;
		const uint64_t f = b & ((1ull << 52) - 1);
		const uint64_t m = t ? f | 1ull << 52 : f;
		cnt[t] += (unsigned __int128)m * m;
	}
	if (cnt[2047])
		return false;
	for (unsigned e = 0; e < 2047; e++) {
		if (!cnt[e])
			continue;
		const unsigned b = 2 * (e ? e : 1) - 2150 - GR_PARTIAL_EXP_MIN;
		xsq_move(c + b / 32, cnt[e], b % 32);
	}
	xsum_add_digits(ret->xacc, GR_PARTIAL_EXP_MIN, c, XCHUNKS - 4);
	return true;
}

/* Below this many f64 elements, clearing and folding the 32 KB of
 * counters costs more than the chunks of xacc_elems(). */
#define XSQ_MIN_F64 384

void xacc_sumsq_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64)
{
	if (n > XSQ_MAX_N || (is64 && n < XSQ_MIN_F64) ||
	    !(is64 ? xsq_f64(ret, p, n) : xsq_f32(ret, p, n))) {
		xacc_elems(ret, p, n, is64, /* sq= */ true);
		return;
	}
	if (n)
		ret->xflags |= XF_SEEN; /* a square is never -0 */
}

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
	if (xacc_run_up(a, 0, 0) == XW)
		/* an exact zero: -0 only when every element was -0 */
		return p->count && !(f & XF_SEEN) ? -0.0 : 0.0;
	return gr_wide_round(a, XW, GR_PARTIAL_EXP_MIN);
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
		gr_wide_add(acc->xacc, next->xacc, XW);
		acc->xflags |= next->xflags;
		if (next->v.f != 0.0)
			xacc_add_f64(acc->xacc, next->v.f, 0);
	} else {
		/* filled by hand: its value is v.f, an element */
		xacc_elem(acc, next->v.f, false);
	}
}

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
	gr_wide_add(acc->x2acc, next->x2acc, XW);
	acc->x2flags |= next->x2flags;
}

void xsum_moments_identity(gr_partial *ret, bool is_int)
{
	/* integers are never -0: their sum is "seen" from the start */
	ret->xflags = XF_XACC | (is_int ? XF_SEEN : 0);
	ret->x2flags = XF_XACC | XF_SEEN;
}

/* a += words[0..n) * 2^exp2, words a two's complement integer */
static void xsum_add_limbs(uint64_t *a, int exp2, const uint64_t *words, size_t n)
{
	if (!n)
		return;
	const uint64_t sign = words[n - 1] >> 63 ? UINT64_MAX : 0;
	const unsigned o = (unsigned)(exp2 - GR_PARTIAL_EXP_MIN), b = o % 64;
	unsigned k = o / 64;
	uint64_t c = 0;

	/* the words, shifted into place, then one of sign for the bits
	 * shifted out of the last */
	for (size_t i = 0; i <= n && k < XW; i++, k++) {
		uint64_t cur = i < n ? words[i] : sign, prev = i ? words[i - 1] : 0;
		uint64_t x = b ? cur << b | prev >> (64 - b) : cur;
		uint64_t s1 = a[k] + x, c1 = s1 < x;
		a[k] = s1 + c;
		c = c1 | (a[k] < s1);
	}
	/* sign words above: adding 0 with no carry, or all ones with one,
	 * leaves the rest as it is */
	for (; k < XW && (sign ? !c : c); k++) {
		uint64_t s1 = a[k] + sign, c1 = s1 < sign;
		a[k] = s1 + c;
		c = c1 | (a[k] < s1);
	}
}

/*
 * The number sum(d[i] 2^(32 i)), i < n (signed digits, not normalised), as
 * a two's complement integer in 64-bit words: returns their count (0 for
 * zero), at most n / 2 + 2.
 */
static size_t digits_to_words(const int64_t *d, unsigned n, uint64_t *w)
{
	int64_t c = 0;
	size_t nw = 0;
	bool any = false;

	for (unsigned i = 0; i < n; i += 2) {
		/* two 32-bit places at a time, their carries on */
		int64_t t0 = d[i] + c;
		uint64_t lo = (uint32_t)t0;
		c = t0 >> 32;
		int64_t t1 = (i + 1 < n ? d[i + 1] : 0) + c;
		lo |= (uint64_t)(uint32_t)t1 << 32;
		c = t1 >> 32;
		w[nw++] = lo;
		any |= lo != 0;
	}
	/* what is left of the carry, with the sign on top */
	w[nw++] = (uint64_t)c;
	return any || c ? nw : 0;
}

void xsum_add_digits(uint64_t *a, int lsb, const int64_t *d, unsigned n)
{
	uint64_t w[GR_PARTIAL_XWORDS + 2];

	assert(n <= 2 * GR_PARTIAL_XWORDS);
	/* the digits carried into words, then added at once: digit by digit,
	 * each negative one's borrows would run to the top */
	xsum_add_limbs(a, lsb, w, digits_to_words(d, n, w));
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

size_t xsum_acc_limbs(const uint64_t *acc, uint64_t xflags, uint64_t count, uint64_t *words,
                      size_t max, int *ret_scale, unsigned *ret_flags)
{
	unsigned flags = xflags & XF_SPECIALS;
	size_t lo = xacc_run_up(acc, 0, 0), hi = XW;
	if (lo == XW) {
		if (count && !(xflags & XF_SEEN))
			flags |= GR_PARTIAL_NEGZERO;
		*ret_flags = flags;
		*ret_scale = 0;
		return 0;
	}
	/* drop top words that only repeat the sign of the word below */
	uint64_t sign = acc[XW - 1] >> 63 ? UINT64_MAX : 0;
	while (hi - lo > 1 && acc[hi - 1] == sign && (acc[hi - 2] >> 63) == (sign & 1))
		hi--;
	*ret_flags = flags;
	*ret_scale = GR_PARTIAL_EXP_MIN + (int)lo * 64;
	if (hi - lo <= max)
		memcpy(words, acc + lo, (hi - lo) * sizeof(*words));
	return hi - lo;
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
	return xsum_acc_limbs(x->xacc, x->xflags, x->count, words, max, ret_scale, ret_flags);
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

	memset(ret, 0, sizeof(*ret));
	xsum_identity(ret, /* sq= */ false);
	ret->count = count;
	ret->xflags = XF_XACC | (flags & XF_SPECIALS);
	if (count && !(flags & GR_PARTIAL_NEGZERO))
		ret->xflags |= XF_SEEN;
	memcpy(ret->xacc, a, sizeof(ret->xacc));
	return 0;
}
