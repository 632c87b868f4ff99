/*
 * The f32 block kernels of the exact accumulator (xsum.h), sums and sums
 * of squares: a pass over the grid of xsum-internal.h, one pass over
 * memory when a sample of the block bounds the rest, and small arrays of
 * nearby exponents summed as plain doubles, which are exact there.
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

#include "math/simd.h"
#include "math/xsum-internal.h"
#include "math/xsum.h"

#define XNV 4
#define XGROUP (4 * XNV)

/*
 * Split y over the levels; the caller proves that nothing is left. sig[]
 * holds the levels' sigmas and then, when there are two levels or more,
 * the sum of the last two (exact: its bits span 53), which takes them in
 * three additions rather than four, as the f64 pass does
 * (xsum-f64-pass.h): with t_a = y + sigma_a and r = t_a - (sigma_a +
 * sigma_b) (exact), y - r is y - (t_a - sigma_a) + sigma_b rounded once,
 * the last level's t of the cascade.
 */
/* y by pointer: a vector passed by value changes the ABI between the
 * baseline and AVX2 builds, which clang refuses under -Werror. */
static GR_INLINE void x_cascade(const v4df *py, const v4df *sig, v4du (*acc)[XNV], unsigned v,
                                unsigned levels)
{
	v4df y = *py;
	v4du tb;
	for (unsigned j = 0; j + 2 < levels; j++) {
		v4df t = y + sig[j];
		memcpy(&tb, &t, sizeof(tb));
		acc[j][v] += tb;
		y = y - (t - sig[j]);
	}
	if (levels == 1) {
		v4df t = y + sig[0];
		memcpy(&tb, &t, sizeof(tb));
		acc[0][v] += tb;
		return;
	}
	v4df ta = y + sig[levels - 2], tl = y - (ta - sig[levels]);
	memcpy(&tb, &ta, sizeof(tb));
	acc[levels - 2][v] += tb;
	memcpy(&tb, &tl, sizeof(tb));
	acc[levels - 1][v] += tb;
}

/* The sigmas of grid g's levels levels for x_cascade(), in vectors. */
static GR_INLINE void x_sigmas(v4df *sig, const xgrid *g, unsigned levels)
{
	for (unsigned j = 0; j < levels; j++)
		sig[j] = (v4df){0} + g->sigma[j];
	if (levels >= 2)
		sig[levels] = (v4df){0} + (g->sigma[levels - 2] + g->sigma[levels - 1]);
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

/* What xsum_pass() did. */
enum {
	XPASS_DONE,  /* ret holds the block */
	XPASS_GUESS, /* the guess was wrong, or the block needs the full path */
	XPASS_WIDE,  /* exponents too far apart for these levels */
};

/*
 * The least |x| bits a non-zero element may have for a pass of levels
 * levels under the top that maxbits gives to take it whole (its square's,
 * with sq): the exponent field that puts its last bit (or its square's)
 * on the last level's unit, as xgrid_init() places it.
 */
static uint32_t xsum_f32_least(uint32_t maxbits, bool sq, unsigned levels)
{
	const unsigned eb = maxbits >> 23;
	const int M = (eb ? (int)eb : 1) - 127 + 1;
	const int T = sq ? 2 * M : M;
	const int K = T + 2 - 51 * (int)(levels - 1);
	const int ulp = (K < -1022 ? -1022 : K) - 52;
	const int u = sq ? (ulp + 1) >> 1 : ulp;
	const int ef = u + 150;
	return ef <= 1 ? 1 : (uint32_t)(ef >= 0xff ? 0xff : ef) << 23;
}

/*
 * The summing pass of an f32 block whose largest |element| has the bits
 * maxbits. With guess, maxbits is only an estimate: the pass also checks
 * that every element lies below the grid's bound. Unless it returns
 * XPASS_DONE, ret's value is untouched; when it read the block, the
 * block's largest |x| bits and least |x| bits - 1 (zeros wrap to
 * UINT32_MAX) are in *ret_max and *ret_low, else *ret_low is 0 and
 * *ret_max UINT32_MAX.
 */
static GR_INLINE int xsum_pass(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                               const unsigned levels, const uint32_t maxbits, const bool guess,
                               const bool avx2, uint32_t *ret_max, uint32_t *ret_low)
{
	*ret_max = UINT32_MAX;
	*ret_low = 0;
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
	v4df sig[XL_MAX + 1];
	x_sigmas(sig, &g, levels);
	v4du acc[XL_MAX][XNV]; /* wrapping sums */
	memset(acc, 0, sizeof(acc));
	const size_t ng = n / XGROUP;
	/*
	 * Sums prove in integer lanes, rather than with what the last level
	 * leaves (fewer float operations), that every non-zero element (or
	 * square) is a multiple of the last level's unit: its exponent field
	 * is at least ef, that is 0 < |x| bits < th never holds; and, with a
	 * guess, that every |x| bits lies below bound. The lanes keep the
	 * largest |x| bits (a signed maximum) and the least |x| bits - 1 (an
	 * unsigned minimum, where zeros wrap to the top), one instruction each
	 * on AVX2, checked once at the end.
	 */
	v8si hi = {0};
	v8su lo = (v8su){0} - 1;
	const uint32_t th = xsum_f32_least(maxbits, sq, levels);
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
			v8si bs = (v8si)b;
			v8si_max(&hi, &bs, avx2);
			b -= 1;
			v8su_min(&lo, &b, avx2);
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

	uint32_t most = 0, least = UINT32_MAX;
	for (unsigned k = 0; k < 8; k++) {
		most = (uint32_t)hi[k] > most ? (uint32_t)hi[k] : most;
		least = lo[k] < least ? lo[k] : least;
	}
	/* and the tail, which the groups did not see */
	uint32_t tail_low = UINT32_MAX;
	for (size_t i = ng * XGROUP; i < n; i++) {
		uint32_t b;
		memcpy(&b, p + i * 4, 4);
		b &= INT32_MAX;
		most = b > most ? b : most;
		tail_low = b - 1 < tail_low ? b - 1 : tail_low;
	}
	*ret_max = most;
	*ret_low = least < tail_low ? least : tail_low;
	if (guess && most >= bound)
		return XPASS_GUESS;
	/* (zeros wrapped to UINT32_MAX, above any th - 1; the tail goes
	 * element by element) */
	if (least < th - 1)
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

/*
 * f32 sums whose elements lie within a few binades of one another, as most
 * small arrays' do: every element is a multiple of 2^(emin - 150) (emin
 * the least biased exponent of a non-zero one, 1 for subnormals) and below
 * 2^(emax - 126), so every sum of up to n of them, in any order, is an
 * integer multiple of that unit below 2^(emax - emin + 24 + ceil(log2 n))
 * units: exact in a double while that is at most 2^53. Then the block's
 * exact value is the plain double sum, and no accumulator is needed.
 *
 * The exponents come from the bits: the largest |x| bits (a signed
 * maximum, |x| bits being below 2^31) and the least of |x| bits - 1 (an
 * unsigned minimum, where zeros wrap to the top), one instruction each on
 * AVX2, beside the sum. A special (or a sum of zeros, whose sign the
 * exact path decides) goes the exact way. A block that misses goes on to
 * the grid with its bounds known exactly: *ret_max, the largest |x| bits,
 * and *ret_low, the least |x| bits - 1 (UINT32_MAX when all are zeros).
 */
#define XSUM_NARROW_MAX 4096u

static GR_INLINE bool xsum_f32_narrow(const unsigned char *p, size_t n, gr_partial *ret,
                                      const bool avx2, uint32_t *ret_max, uint32_t *ret_low)
{
	v4df a[4] = {{0}};
	v8si hi = {0};
	v8su lo = (v8su){0} - 1;
	v4si hi4 = {0}, lo4 = (v4si){0} + INT32_MAX;
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		if (avx2) {
			UNROLL
			for (unsigned v = 0; v < 2; v++) {
				v8si b;
				memcpy(&b, p + 4 * (i + 8 * v), sizeof(b));
				b &= INT32_MAX;
				v8si_max(&hi, &b, avx2);
				v8su c = (v8su)b - 1;
				v8su_min(&lo, &c, avx2);
			}
		} else {
			/* the baseline has neither instruction, and its sixteen
			 * registers hold bounds of four lanes best: a signed
			 * compare and blend each, the least on |x| bits - 1
			 * less the sign bit (zeros wrap to the largest) */
			UNROLL
			for (unsigned v = 0; v < 4; v++) {
				v4si b;
				memcpy(&b, p + 4 * (i + 4 * v), sizeof(b));
				b &= INT32_MAX;
				v4si c = b > hi4;
				hi4 = (b & c) | (hi4 & ~c);
				b = (b - 1) & INT32_MAX;
				c = b < lo4;
				lo4 = (b & c) | (lo4 & ~c);
			}
		}
		UNROLL
		for (unsigned v = 0; v < 4; v++) {
			v4df x;
			ld_f32_as_f64(&x, p + 4 * (i + 4 * v));
			a[v] += x;
		}
	}
	uint32_t h = 0, l = UINT32_MAX;
	for (unsigned k = 0; k < 8; k++) {
		h = (uint32_t)hi[k] > h ? (uint32_t)hi[k] : h;
		l = lo[k] < l ? lo[k] : l;
	}
	for (unsigned k = 0; k < 4; k++) {
		const uint32_t c = lo4[k] == INT32_MAX ? UINT32_MAX : (uint32_t)lo4[k];
		h = (uint32_t)hi4[k] > h ? (uint32_t)hi4[k] : h;
		l = c < l ? c : l;
	}
	double tail = 0;
	for (; i < n; i++) {
		uint32_t b;
		float x;
		memcpy(&b, p + 4 * i, sizeof(b));
		memcpy(&x, p + 4 * i, sizeof(x));
		b &= INT32_MAX;
		h = b > h ? b : h;
		l = b - 1 < l ? b - 1 : l;
		tail += (double)x;
	}
	*ret_max = h;
	*ret_low = l;
	/* subnormals count as exponent 1 */
	const int eh = (int)(h >> 23), el = (int)((l + 1) >> 23);
	const int hi_e = eh ? eh : 1, lo_e = el ? el : 1;
	const int lg = n > 1 ? 64 - __builtin_clzll((unsigned long long)n - 1) : 0;
	if (l == UINT32_MAX || hi_e == 255 || hi_e - lo_e + 24 + lg > 53)
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

/*
 * A block whose largest |x| bits are mb and least |x| bits - 1 low (exact
 * bounds, not guesses): on the grid with the levels they need, when
 * levels or one more will do, else element by element.
 */
static GR_INLINE void xsum_bounded(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                                   const unsigned levels, const bool avx2, const uint32_t mb,
                                   const uint32_t low)
{
	int r = XPASS_WIDE;
	uint32_t m, l;
	if (low >= xsum_f32_least(mb, sq, levels) - 1)
		r = xsum_pass(p, n, ret, sq, levels, mb, false, avx2, &m, &l);
	else if (low >= xsum_f32_least(mb, sq, levels + 1) - 1)
		r = xsum_pass(p, n, ret, sq, levels + 1, mb, false, avx2, &m, &l);
	if (r != XPASS_DONE)
		xsum_slow(p, n, ret, /* is64= */ false, sq);
}

/* The largest |x| bits of the XGUESS elements at p, and the least |x|
 * bits - 1 (zeros wrap to UINT32_MAX). */
static GR_INLINE void xsum_sample(const unsigned char *p, uint32_t *ret_max, uint32_t *ret_low)
{
	uint32_t h = 0, l = UINT32_MAX;
	for (size_t i = 0; i < XGUESS; i++) {
		uint32_t b;
		memcpy(&b, p + 4 * i, sizeof(b));
		b &= INT32_MAX;
		h = b > h ? b : h;
		l = b - 1 < l ? b - 1 : l;
	}
	*ret_max = h;
	*ret_low = l;
}

static GR_INLINE void xsum_body(const unsigned char *p, size_t n, gr_partial *ret, const bool sq,
                                const unsigned levels, const bool avx2)
{
	/* One pass over the block when a sample of it, one binade wider,
	 * bounds the rest (most data); else find the bounds, then sum with
	 * the levels they need; and when even one more level is not enough,
	 * element by element. */
	int r = XPASS_GUESS;
	uint32_t mb, low;
	/* small arrays, where it pays: a large block that misses the bound
	 * would be read twice; one that misses has its bounds already, and
	 * so the levels it needs (a constant to each pass, which unrolls
	 * them) or that the element path must take it */
	if (!sq && n <= XSUM_NARROW_MAX) {
		if (xsum_f32_narrow(p, n, ret, avx2, &mb, &low))
			return;
		xsum_bounded(p, n, ret, sq, levels, avx2, mb, low);
		return;
	}
	if (n >= 4 * XGUESS) {
		uint32_t sm, sl;
		xsum_sample(p, &sm, &sl);
		/* the sample's own span is a lower bound on the block's: when
		 * it is already too wide for the grid, no pass can take the
		 * block; when it needs one more level, the guess has it */
		unsigned lv = levels;
		if (sl < xsum_f32_least(sm, sq, levels) - 1)
			lv = levels + 1;
		if (sl < xsum_f32_least(sm, sq, lv) - 1) {
			xsum_slow(p, n, ret, /* is64= */ false, sq);
			return;
		}
		uint32_t b = sm + (sm ? 1u << 23 : 0);
		r = xsum_pass(p, n, ret, sq, lv, b, true, avx2, &mb, &low);
		if (r == XPASS_DONE)
			return;
		if (low != 0 || mb != UINT32_MAX) {
			/* the pass read the block: its bounds are known */
			xsum_bounded(p, n, ret, sq, levels, avx2, mb, low);
			return;
		}
	}
	mb = x_maxbits(p, n);
	uint32_t m, l;
	r = xsum_pass(p, n, ret, sq, levels, mb, false, avx2, &m, &l);
	if (r == XPASS_WIDE)
		r = xsum_pass(p, n, ret, sq, levels + 1, mb, false, avx2, &m, &l);
	if (r == XPASS_WIDE)
		xsum_slow(p, n, ret, /* is64= */ false, sq);
}

/*
 * ---- moments: the sum, the squares, min and max in one pass ----
 *
 * As xsum-f64-moments.c does for f64: each element goes over the sum's
 * grid and its square (exact in a double) over the squares', by the same
 * x_cascade() on the same grids as xsum_pass() (so each value is exact by
 * the same argument and the same bounds), and into a least and a largest
 * lane; the block is read once instead of four times. The sum takes one
 * level and the squares two, or two and three where the block's span of
 * exponents asks for them; a block that needs more, or that holds an
 * infinity or a NaN (above every bound), or nothing but zeros, is left to
 * the four passes. With no NaN the least (largest) element is the same
 * value whatever the lanes, and a zero's sign is decided as min's and
 * max's kernels decide it (xsum-f64-moments.c says how).
 */

#ifdef GR_HAVE_AVX2
GR_AVX2 static inline void xm32_minmax_avx2(v8sf *mn, v8sf *mx, const v8sf *x)
{
	*mn = (v8sf)_mm256_min_ps((__m256)*x, (__m256)*mn);
	*mx = (v8sf)_mm256_max_ps((__m256)*x, (__m256)*mx);
}
#endif

/* *mn = x < *mn ? x : *mn, and *mx likewise, lane by lane. */
static GR_INLINE void xm32_minmax(v8sf *mn, v8sf *mx, const v8sf *x, const bool avx2)
{
#ifdef GR_HAVE_AVX2
	if (avx2) {
		xm32_minmax_avx2(mn, mx, x);
		return;
	}
#endif
	(void)avx2;
	v8si c = *x < *mn;
	*mn = (v8sf)(((v8si)*x & c) | ((v8si)*mn & ~c));
	c = *x > *mx;
	*mx = (v8sf)(((v8si)*x & c) | ((v8si)*mx & ~c));
}

/* One group of XGROUP elements at q into the sum's lanes (ls levels), the
 * squares' (lq), the bounds and, with mm, the least and largest lanes:
 * two sets of lanes, even and odd vectors. */
static GR_INLINE void xm32_group(const unsigned char *q, const v4df *sigs, const v4df *sigq,
                                 v4du (*accs)[XNV], v4du (*accq)[XNV], v8sf *mn, v8sf *mx, v8si *hi,
                                 v8su *lo, const unsigned ls, const unsigned lq, const bool avx2,
                                 const bool mm)
{
	UNROLL
	for (unsigned v = 0; v < XGROUP / 8; v++) {
		v8su b;
		memcpy(&b, q + v * 32, sizeof(b));
		if (mm) {
			v8sf f;
			memcpy(&f, &b, sizeof(f));
			xm32_minmax(mn, mx, &f, avx2);
		}
		b &= INT32_MAX;
		v8si bs = (v8si)b;
		v8si_max(hi, &bs, avx2);
		b -= 1;
		v8su_min(lo, &b, avx2);
	}
	UNROLL
	for (unsigned v = 0; v < XNV; v++) {
		v4df x, x2;
		ld_f32_as_f64(&x, q + v * 16);
		x2 = x * x;
		x_cascade(&x, sigs, accs, v & 1, ls);
		x_cascade(&x2, sigq, accq, v & 1, lq);
	}
}

/* Levels [0, levels) of grid g, whose lanes' sets 0 and 1 took cnt terms
 * each, into the accumulator a. */
static GR_INLINE void xm32_fold(uint64_t *a, const xgrid *g, const v4du (*acc)[XNV],
                                const unsigned levels, uint64_t cnt)
{
	for (unsigned j = 0; j < levels; j++) {
		__int128 s = 0;
		for (unsigned v = 0; v < 2; v++)
			for (unsigned l = 0; l < 4; l++)
				s += (int64_t)((uint64_t)acc[j][v][l] - cnt * g->sbits[j]);
		xacc_addmag(a, g->ulp[j] - GR_PARTIAL_EXP_MIN,
		            s < 0 ? -(unsigned __int128)s : (unsigned __int128)s, s < 0);
	}
}

/*
 * moments of p[0, n) on grids below the top that maxbits gives (with
 * guess, checked as xsum_pass() checks it), ls levels for the sum and lq
 * for the squares. On XPASS_DONE, ret holds the block; else it is
 * untouched, and the block's largest |x| bits and least |x| bits - 1 are
 * in *ret_max and *ret_low.
 */
static GR_INLINE int xm32_pass(const unsigned char *p, size_t n, gr_partial *ret, const unsigned ls,
                               const unsigned lq, const uint32_t maxbits, const bool guess,
                               const bool avx2, uint32_t *ret_max, uint32_t *ret_low)
{
	const unsigned eb = maxbits >> 23;
	const int M = (eb ? (int)eb : 1) - 127 + 1;
	const uint32_t bound = (eb ? eb + 1 : 1) << 23;
	xgrid gs, gq;
	xgrid_init(&gs, M, ls);
	xgrid_init(&gq, 2 * M, lq);
	v4df sigs[XL_MAX + 1], sigq[XL_MAX + 1];
	x_sigmas(sigs, &gs, ls);
	x_sigmas(sigq, &gq, lq);
	v4du accs[XL_MAX][XNV], accq[XL_MAX][XNV];
	memset(accs, 0, sizeof(accs));
	memset(accq, 0, sizeof(accq));
	v8sf mn = (v8sf){0} + INFINITY, mx = (v8sf){0} - INFINITY;
	v8si hi = {0};
	v8su lo = (v8su){0} - 1;
	const size_t ng = n / XGROUP;
	/* the next block, into L2 while this one is summed (xsum_pass()) */
	const uintptr_t ahead = n == GR_REDUCE_BLOCK ? n * 4 : 0;
	for (size_t gi = 0; gi < ng; gi++) {
		const unsigned char *q = p + gi * XGROUP * 4;
		if (ahead)
			for (size_t o = 0; o < XGROUP * 4; o += 64)
				__builtin_prefetch((const void *)((uintptr_t)q + ahead + o), 0, 2);
		xm32_group(q, sigs, sigq, accs, accq, &mn, &mx, &hi, &lo, ls, lq, avx2,
		           /* mm= */ true);
	}
	size_t groups = ng;
	float least = INFINITY, most = -INFINITY;
	if (n % XGROUP) {
		/* zeros pad the sums and touch no bound; the extremes element
		 * by element */
		unsigned char tail[XGROUP * 4] = {0};
		memcpy(tail, p + ng * XGROUP * 4, (n % XGROUP) * 4);
		xm32_group(tail, sigs, sigq, accs, accq, &mn, &mx, &hi, &lo, ls, lq, avx2,
		           /* mm= */ false);
		groups++;
		for (size_t i = ng * XGROUP; i < n; i++) {
			float x;
			memcpy(&x, p + 4 * i, sizeof(x));
			least = x < least ? x : least;
			most = x > most ? x : most;
		}
	}
	uint32_t big = 0, small = UINT32_MAX;
	for (unsigned k = 0; k < 8; k++) {
		big = (uint32_t)hi[k] > big ? (uint32_t)hi[k] : big;
		small = lo[k] < small ? lo[k] : small;
	}
	*ret_max = big;
	*ret_low = small;
	/* specials lie above every bound; zeros wrapped to UINT32_MAX */
	if ((guess && big >= bound) || big >= 0x7f800000u || big == 0 ||
	    small < xsum_f32_least(maxbits, false, ls) - 1 ||
	    small < xsum_f32_least(maxbits, true, lq) - 1)
		return guess && big >= bound ? XPASS_GUESS : XPASS_WIDE;
	/* each lane took two terms a group */
	xm32_fold(ret->xacc, &gs, accs, ls, 2 * groups);
	xm32_fold(ret->x2acc, &gq, accq, lq, 2 * groups);
	ret->xflags |= XF_SEEN;
	for (unsigned k = 0; k < 8; k++) {
		least = mn[k] < least ? mn[k] : least;
		most = mx[k] > most ? mx[k] : most;
	}
	if (least == 0 || most == 0) {
		/* a zero extreme: min's sign is any element's, max's every one's */
		bool any = false, every = true;
		for (size_t i = 0; i < n; i++) {
			const bool neg = p[4 * i + 3] >> 7;
			any |= neg;
			every &= neg;
		}
		if (least == 0)
			least = any ? -0.0f : 0.0f;
		if (most == 0)
			most = every ? -0.0f : 0.0f;
	}
	ret->lo.f = least;
	ret->hi.f = most;
	return XPASS_DONE;
}

/* The levels that the sum and the squares of elements whose largest |x|
 * bits are mb and least |x| bits - 1 low need: 1 and 2, else 2 and 3;
 * false when those are not enough. */
static bool xm32_levels(uint32_t mb, uint32_t low, unsigned *ret_ls, unsigned *ret_lq)
{
	const bool one =
	    low >= xsum_f32_least(mb, false, 1) - 1 && low >= xsum_f32_least(mb, true, 2) - 1;
	*ret_ls = one ? 1 : 2;
	*ret_lq = one ? 2 : 3;
	return one ||
	       (low >= xsum_f32_least(mb, false, 2) - 1 && low >= xsum_f32_least(mb, true, 3) - 1);
}

static GR_INLINE int xm32_pass_lv(const unsigned char *p, size_t n, gr_partial *ret,
                                  const unsigned ls, const uint32_t maxbits, const bool guess,
                                  const bool avx2, uint32_t *ret_max, uint32_t *ret_low)
{
	return ls == 1 ? xm32_pass(p, n, ret, 1, 2, maxbits, guess, avx2, ret_max, ret_low)
	               : xm32_pass(p, n, ret, 2, 3, maxbits, guess, avx2, ret_max, ret_low);
}

/* moments' block in one pass, with a grid from a sample (large blocks)
 * or from the block's own bounds, and again with the bounds the first
 * pass found when the guess was wrong: false where the four passes must
 * take it. */
static GR_INLINE bool xmom_f32(const unsigned char *p, size_t n, gr_partial *ret, const bool avx2)
{
	uint32_t mb, low, m, l;
	unsigned ls, lq;
	if (n >= 4 * XGUESS) {
		xsum_sample(p, &mb, &low);
		/* one binade wider */
		mb += 1u << 23;
		if (mb == 1u << 23 || mb >= 0x7f800000u || !xm32_levels(mb, low, &ls, &lq))
			return false;
		const int r = xm32_pass_lv(p, n, ret, ls, mb, true, avx2, &m, &l);
		if (r == XPASS_DONE)
			return true;
		mb = m;
		low = l;
	} else {
		mb = x_maxbits(p, n);
		low = 0;
		for (size_t i = 0; i < n; i++) {
			uint32_t b;
			memcpy(&b, p + 4 * i, sizeof(b));
			b &= INT32_MAX;
			low = i == 0 || b - 1 < low ? b - 1 : low;
		}
	}
	if (mb == 0 || mb >= 0x7f800000u || !xm32_levels(mb, low, &ls, &lq))
		return false;
	return xm32_pass_lv(p, n, ret, ls, mb, false, avx2, &m, &l) == XPASS_DONE;
}

bool xsum_moments_f32_base(const unsigned char *p, size_t n, gr_partial *ret)
{
	return xmom_f32(p, n, ret, /* avx2= */ false);
}

#ifdef GR_HAVE_AVX2
GR_AVX2 bool xsum_moments_f32_avx2(const unsigned char *p, size_t n, gr_partial *ret)
{
	return xmom_f32(p, n, ret, /* avx2= */ true);
}
#endif

/* clang-format off */
#define DEF_XSUM(NAME, SQ, LEVELS)                                                                 \
	void xsum_##NAME##_base(const unsigned char *p, size_t n, gr_partial *ret)                 \
	{                                                                                          \
		xsum_body(p, n, ret, SQ, LEVELS, /* avx2= */ false);                               \
	}                                                                                          \
	GR_AVX2_ONLY(GR_AVX2 void xsum_##NAME##_avx2(const unsigned char *p, size_t n,             \
	                                             gr_partial *ret)                              \
	             { xsum_body(p, n, ret, SQ, LEVELS, /* avx2= */ true); })

DEF_XSUM(sum_f32, false, 1)
DEF_XSUM(sumsq_f32, true, 2)
/* clang-format on */
