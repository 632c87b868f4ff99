/*
 * moments' mean and variance, exactly rounded (moments.h).
 *
 * The partial holds S1 = A * 2^a and S2 = B * 2^b as exact integers
 * (gr_partial_limbs()), so
 *
 *   mean = A * 2^a / n
 *   var  = (n * S2 - S1^2) / (n * (n - ddof))
 *        = (n * B * 2^(b - e) - A^2 * 2^(2a - e)) * 2^e / (n * (n - ddof)),
 *
 * e = min(b, 2a): an integer numerator C (never negative: n * S2 >= S1^2)
 * over an integer divisor. C is scaled up until the quotient has at least
 * 55 bits, then divided by n (n - ddof) at once where that product fits
 * 64 bits, else by n and by n - ddof in turn: floor(floor(C / a) / b) =
 * floor(C / (a * b)), and the quotient is exact exactly when both
 * remainders are zero, which is the sticky bit the rounding needs. The
 * rounding itself is xsum_round()'s: 53 bits from the top, or fewer where
 * the result is subnormal, to nearest, ties to even.
 *
 * Sizes: S1 < 2^1088 and S2 < 2^2112 have their lowest bits at 2^-1074
 * and 2^-2148 or above, so A has at most about 51 words, A^2 102, and the
 * numerator at most about 103 words before the 183-bit scaling: BN_WORDS
 * leaves room, and every operation checks it anyway.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "math/moments.h"
#include "math/xsum.h"

#define BN_WORDS (2 * GR_PARTIAL_XWORDS + 8)

/* A magnitude: w[0..n) little-endian, no zero words on top. */
typedef struct bn {
	size_t n;
	uint64_t w[BN_WORDS];
} bn;

static void bn_trim(bn *a)
{
	while (a->n && !a->w[a->n - 1])
		a->n--;
}

/* r = a, its words in use only */
static void bn_copy(bn *r, const bn *a)
{
	r->n = a->n;
	memcpy(r->w, a->w, a->n * sizeof(a->w[0]));
}

/* a = |x| for the two's complement words[0..n); true when x < 0. */
static bool bn_from_limbs(bn *a, const uint64_t *words, size_t n)
{
	bool neg = n && words[n - 1] >> 63;
	uint64_t c = 1;

	for (size_t k = 0; k < n; k++) {
		if (neg) {
			a->w[k] = ~words[k] + c;
			c = c && a->w[k] == 0;
		} else {
			a->w[k] = words[k];
		}
	}
	a->n = n;
	bn_trim(a);
	return neg;
}

/* r = a * b (r neither a nor b); false when it would not fit. */
static bool bn_mul(bn *r, const bn *a, const bn *b)
{
	if (a->n + b->n > BN_WORDS)
		return false;
	memset(r->w, 0, (a->n + b->n) * sizeof(r->w[0]));
	for (size_t i = 0; i < a->n; i++) {
		uint64_t c = 0;
		for (size_t j = 0; j < b->n; j++) {
			unsigned __int128 t =
			    (unsigned __int128)a->w[i] * b->w[j] + r->w[i + j] + c;
			r->w[i + j] = (uint64_t)t;
			c = (uint64_t)(t >> 64);
		}
		r->w[i + b->n] = c;
	}
	r->n = a->n + b->n;
	bn_trim(r);
	return true;
}

static bool bn_mul_u64(bn *a, uint64_t m)
{
	uint64_t c = 0;

	for (size_t k = 0; k < a->n; k++) {
		unsigned __int128 t = (unsigned __int128)a->w[k] * m + c;
		a->w[k] = (uint64_t)t;
		c = (uint64_t)(t >> 64);
	}
	if (c) {
		if (a->n == BN_WORDS)
			return false;
		a->w[a->n++] = c;
	}
	return true;
}

/* a <<= bits; false when it would not fit. */
static bool bn_shl(bn *a, unsigned bits)
{
	unsigned ws = bits / 64, s = bits % 64;

	if (!a->n || !bits)
		return true;
	if (a->n + ws + 1 > BN_WORDS)
		return false;
	a->w[a->n + ws] = 0;
	for (size_t k = a->n; k-- > 0;) {
		if (s) {
			a->w[k + ws + 1] |= a->w[k] >> (64 - s);
			a->w[k + ws] = a->w[k] << s;
		} else {
			a->w[k + ws] = a->w[k];
		}
	}
	memset(a->w, 0, ws * sizeof(a->w[0]));
	a->n += ws + 1;
	bn_trim(a);
	return true;
}

/* a -= b; false (a then garbage) when b > a. */
static bool bn_sub(bn *a, const bn *b)
{
	uint64_t c = 0;

	if (b->n > a->n)
		return false;
	for (size_t k = 0; k < a->n; k++) {
		uint64_t d = k < b->n ? b->w[k] : 0;
		uint64_t s1 = a->w[k] - d, c1 = a->w[k] < d;
		a->w[k] = s1 - c;
		c = c1 | (s1 < c);
	}
	bn_trim(a);
	return c == 0;
}

/* (hi:lo) / d and its remainder, hi < d (so the quotient fits 64 bits):
 * one divide instruction where there is one that takes 128 bits */
static inline uint64_t div128(uint64_t hi, uint64_t lo, uint64_t d, uint64_t *rem)
{
#if defined(__x86_64__)
	uint64_t q;
	__asm__("divq %4" : "=a"(q), "=d"(*rem) : "a"(lo), "d"(hi), "rm"(d));
	return q;
#else
	unsigned __int128 t = (unsigned __int128)hi << 64 | lo;
	*rem = (uint64_t)(t % d);
	return (uint64_t)(t / d);
#endif
}

/* a = floor(a / d), d >= 1; the remainder. */
static uint64_t bn_div_u64(bn *a, uint64_t d)
{
	uint64_t r = 0;

	for (size_t k = a->n; k-- > 0;)
		a->w[k] = div128(r, a->w[k], d, &r);
	bn_trim(a);
	return r;
}

static unsigned bn_bits(const bn *a)
{
	return a->n ? (unsigned)(a->n * 64 - (size_t)__builtin_clzll(a->w[a->n - 1])) : 0;
}

static bool bn_bit(const bn *a, long i)
{
	return i >= 0 && (size_t)i / 64 < a->n && (a->w[i / 64] >> (i % 64)) & 1;
}

/* The 64 bits of a from bit i (i >= 0) up. */
static uint64_t bn_bits_at(const bn *a, long i)
{
	size_t k = (size_t)i / 64;
	unsigned s = (unsigned)(i % 64);
	uint64_t lo = k < a->n ? a->w[k] : 0, hi = k + 1 < a->n ? a->w[k + 1] : 0;
	return s ? lo >> s | hi << (64 - s) : lo;
}

/* Any bit below bit i (i >= 0) set? */
static bool bn_sticky(const bn *a, long i)
{
	for (size_t k = 0; k < a->n && (long)(k * 64) < i; k++) {
		long left = i - (long)(k * 64);
		uint64_t mask = left >= 64 ? UINT64_MAX : (1ull << left) - 1;
		if (a->w[k] & mask)
			return true;
	}
	return false;
}

/*
 * c * 2^e / (d1 * d2), d1, d2 >= 1, rounded to the nearest float64 (ties
 * to even, infinity when it rounds past the largest), negated when neg.
 * c is used up. NaN when c does not fit (not for values of a partial).
 */
static double bn_round_div(bn *c, long e, uint64_t d1, uint64_t d2, bool neg)
{
	if (!c->n)
		return neg ? -0.0 : 0.0;
	/* a quotient of at least 2^54: d1 * d2 < 2^128 */
	unsigned bits = bn_bits(c);
	if (bits < 183) {
		if (!bn_shl(c, 183 - bits))
			return NAN;
		e -= 183 - bits;
	}
	bool sticky;
	if (d1 <= UINT64_MAX / d2) {
		sticky = bn_div_u64(c, d1 * d2) != 0;
	} else {
		sticky = bn_div_u64(c, d1) != 0;
		sticky |= bn_div_u64(c, d2) != 0;
	}
	long h = (long)bn_bits(c) - 1;
	/* the result's last bit: 53 bits below h, but never below 2^-1074
	 * (h >= 54, so lo >= 2 and the guard bit lies in c) */
	long lo = h - 52 > -1074 - e ? h - 52 : -1074 - e;
	uint64_t m = bn_bits_at(c, lo) & ((1ull << 53) - 1);
	if (bn_bit(c, lo - 1) && ((m & 1) || sticky || bn_sticky(c, lo - 1)))
		m++;
	/* exact, or infinity when it rounds to 2^1024 or beyond */
	double v = ldexp((double)m, (int)(lo + e));
	return neg ? -v : v;
}

void moments_round(const gr_partial *p, uint64_t ddof, double *ret_mean, double *ret_var)
{
	const uint64_t n = p->count;
	uint64_t words[GR_PARTIAL_LIMBS_MAX];
	int a, b;
	unsigned f1, f2;
	bn A, B, Y, q;

	size_t na = gr_partial_limbs(p, words, GR_PARTIAL_LIMBS_MAX, &a, &f1);
	bool neg = bn_from_limbs(&A, words, na);

	/* S2's accumulator is always open (xsum_moments_identity()) */
	size_t nb = xsum_acc_limbs(p->x2acc, p->x2flags, n, words, GR_PARTIAL_LIMBS_MAX, &b, &f2);
	bn_from_limbs(&B, words, nb);

	const unsigned pinf = GR_PARTIAL_PINF, ninf = GR_PARTIAL_NINF;
	if ((f1 & GR_PARTIAL_NAN) || (f1 & (pinf | ninf)) == (pinf | ninf))
		*ret_mean = NAN;
	else if (f1 & (pinf | ninf))
		*ret_mean = f1 & pinf ? INFINITY : -INFINITY;
	else if (!A.n)
		*ret_mean = f1 & GR_PARTIAL_NEGZERO ? -0.0 : 0.0;
	else {
		bn_copy(&q, &A); /* bn_round_div() uses its number up */
		*ret_mean = bn_round_div(&q, a, n, 1, neg);
	}

	if ((f1 | f2) & (GR_PARTIAL_NAN | pinf | ninf)) {
		*ret_var = NAN;
		return;
	}
	/* C = n * B * 2^(b - e) - A^2 * 2^(2a - e) */
	long e = (long)b < 2L * a ? (long)b : 2L * a;
	if (!bn_mul_u64(&B, n) || !bn_shl(&B, (unsigned)(b - e)) || !bn_mul(&Y, &A, &A) ||
	    !bn_shl(&Y, (unsigned)(2L * a - e)) || !bn_sub(&B, &Y)) {
		/* cannot happen for a partial's values */
		*ret_var = NAN;
		return;
	}
	*ret_var = bn_round_div(&B, e, n, n - ddof, false);
}
