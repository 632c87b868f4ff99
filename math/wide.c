/* The exact accumulator's number (wide.h): adding and rounding once. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "math/wide.h"

void gr_wide_add(uint64_t *a, const uint64_t *b, unsigned n)
{
	uint64_t c = 0;
	for (unsigned k = 0; k < n; k++) {
		uint64_t s = a[k] + b[k], c1 = s < b[k];
		a[k] = s + c;
		c = c1 | (a[k] < s);
	}
}

/*
 * Word k of |a|, where low is a's least non-zero word: for a negative a,
 * -a = ~a + 1 is zero below low, -a[low] there (no carry leaves a word
 * that is not zero) and ~a[k] above.
 */
static uint64_t wide_mag(const uint64_t *a, unsigned k, unsigned low, bool neg)
{
	if (!neg)
		return a[k];
	return k < low ? 0 : k == low ? -a[k] : ~a[k];
}

/* Any bit below bit i of |a| set? The same bits as of a: -a and a agree
 * on whether they are zero modulo 2^i. */
static bool wide_sticky(const uint64_t *a, unsigned i, unsigned low)
{
	if (low != i / 64)
		return low < i / 64;
	return i % 64 && (a[low] & ((1ull << (i % 64)) - 1));
}

double gr_wide_round(const uint64_t *a, unsigned n, int lsb)
{
	const unsigned low = gr_wide_run_up(a, n, 0, 0);
	if (low == n)
		return 0.0;
	/* the top word of |a|: the highest above low that is not all sign */
	const bool neg = a[n - 1] >> 63;
	const unsigned top = gr_wide_run_down(a, n - 1, low, neg ? UINT64_MAX : 0);
	const uint64_t wt = wide_mag(a, top, low, neg);
	const unsigned h = top * 64 + 63 - (unsigned)__builtin_clzll(wt);
	/* the result's last bit: 53 bits below h, but never below 2^-1074 */
	const unsigned submin = (unsigned)(-1074 - lsb);
	const unsigned lo = h >= submin + 52 ? h - 52 : submin;
	const unsigned w = lo / 64, b = lo % 64;
	uint64_t m = wide_mag(a, w, low, neg) >> b;
	if (b && w + 1 < n)
		m |= wide_mag(a, w + 1, low, neg) << (64 - b);
	m &= (1ull << 53) - 1;
	/* lo >= submin > 0; this holds for values below 2^-1074 too */
	const unsigned r = lo - 1;
	if (((wide_mag(a, r / 64, low, neg) >> (r % 64)) & 1) && ((m & 1) || wide_sticky(a, r, low)))
		m++;
	/* m * 2^e, exact, or infinity when it rounds to 2^1024 or beyond:
	 * m < 2^52 only for a subnormal, so from e = 972 on the value is
	 * at least 2^1024; below, m (exact as a double) times the power of
	 * two, normal or (for e < -1022) subnormal, is representable, and the
	 * product, rounded correctly, is exact. */
	const int e = (int)lo + lsb;
	double v = INFINITY;
	if (e < 972) {
		const uint64_t pb = e >= -1022 ? (uint64_t)(e + 1023) << 52 : 1ull << (e + 1074);
		double pw;
		memcpy(&pw, &pb, sizeof(pw));
		v = (double)m * pw;
	}
	return neg ? -v : v;
}
