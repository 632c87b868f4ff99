/*
 * The host's half of an exact GPU sum: the device's digits folded into one
 * two's complement fixed-point number and rounded once.
 *
 * gr_exact_fold() is the one place that knows the digits' layout; it
 * feeds them to fold_add_scaled(), which has the shape of the CPU side's
 * exact accumulator (add digit * 2^exp2 exactly), so that the fold can move
 * onto that accumulator when both meet.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cuda/exact.h"

/* 68 words from 2^-2176: the digits' top place (2^2080) plus 64 bits of
 * the digit and carries, with the sign above. */
#define FOLD_WORDS 68
/* the bit that weighs 2^-1074, a double's least place */
#define FOLD_DBL_LSB (-1074 - GR_EXACT_LSB_EXP)

typedef struct fold_acc {
	uint64_t w[FOLD_WORDS];
} fold_acc;

/* acc += digit * 2^exp2, exactly (exp2 >= -2176, modulo 2^(64 FOLD_WORDS)). */
static void fold_add_scaled(fold_acc *acc, int64_t digit, int exp2)
{
	unsigned pos = (unsigned)(exp2 - GR_EXACT_LSB_EXP), k = pos / 64, b = pos % 64;
	uint64_t d = (uint64_t)digit, ext = digit < 0 ? ~0ull : 0;
	uint64_t add0 = d << b, add1 = b ? (d >> (64 - b)) | (ext << b) : ext;
	uint64_t c = 0;
	for (unsigned i = k; i < FOLD_WORDS; i++) {
		uint64_t a = i == k ? add0 : i == k + 1 ? add1 : ext;
		uint64_t s = acc->w[i] + a;
		uint64_t c1 = s < a;
		acc->w[i] = s + c;
		c = c1 | (acc->w[i] < s);
	}
}

static bool fold_bit(const fold_acc *a, unsigned i)
{
	return (a->w[i / 64] >> (i % 64)) & 1;
}

/* Any bit below bit i set? */
static bool fold_sticky(const fold_acc *a, unsigned i)
{
	for (unsigned k = 0; k < i / 64; k++)
		if (a->w[k])
			return true;
	return i % 64 && (a->w[i / 64] & ((1ull << (i % 64)) - 1));
}

/* The magnitude |a| (a two's complement) rounded to nearest even, and its
 * sign; 0 for zero. */
static double fold_round(fold_acc *a, bool *ret_neg)
{
	bool neg = a->w[FOLD_WORDS - 1] >> 63;
	if (neg) {
		uint64_t c = 1;
		for (unsigned k = 0; k < FOLD_WORDS; k++) {
			a->w[k] = ~a->w[k] + c;
			c = c && a->w[k] == 0;
		}
	}
	*ret_neg = neg;
	int top = FOLD_WORDS - 1;
	while (top >= 0 && !a->w[top])
		top--;
	if (top < 0)
		return 0.0;
	unsigned h = (unsigned)top * 64 + 63 - (unsigned)__builtin_clzll(a->w[top]);
	/* the result's last place: 53 bits down from the top, but not below
	 * 2^-1074 (subnormal results, and sums of squares that round to
	 * zero, where h < lo) */
	unsigned lo = h >= FOLD_DBL_LSB + 52 ? h - 52 : FOLD_DBL_LSB, k = lo / 64, b = lo % 64;
	uint64_t m = a->w[k] >> b;
	if (b && k + 1 < FOLD_WORDS)
		m |= a->w[k + 1] << (64 - b);
	m &= (1ull << 53) - 1;
	if (fold_bit(a, lo - 1) && ((m & 1) || fold_sticky(a, lo - 1)))
		m++;
	if (m >> 53) {
		m >>= 1;
		lo++;
	}
	/* exact, or infinity where it rounds to 2^1024 or past */
	return ldexp((double)m, (int)lo + GR_EXACT_LSB_EXP);
}

double gr_exact_fold(const gr_exact_sum *s, uint64_t n)
{
	uint64_t f = s->flags;
	if ((f & GR_EXACT_NAN) || (f & (GR_EXACT_PINF | GR_EXACT_NINF)) == (GR_EXACT_PINF | GR_EXACT_NINF))
		return NAN;
	if (f & GR_EXACT_PINF)
		return INFINITY;
	if (f & GR_EXACT_NINF)
		return -INFINITY;

	fold_acc a;
	memset(&a, 0, sizeof(a));
	for (int i = 0; i < GR_EXACT_DIGITS; i++)
		if (s->digit[i])
			fold_add_scaled(&a, s->digit[i], GR_EXACT_LSB_EXP + GR_EXACT_DIGIT_BITS * i);
	bool neg;
	double v = fold_round(&a, &neg);
	if (v == 0.0)
		return n > 0 && !(f & GR_EXACT_NOT_NZERO) ? -0.0 : 0.0;
	return neg ? -v : v;
}
