/*
 * Inside the exact accumulator (xsum.h): what its files share. xsum.c
 * keeps the accumulator (adding exactly, rounding once, limbs); xsum-f32.c,
 * xsum-f64.c and xsum-f64-moments.c hold the block kernels that fill it,
 * on the grid described below. Internal to xsum*.c; include it after the
 * fp-contract pragma, as the kernels do.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "math/partial.h"

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
void xacc_addmag(uint64_t *a, int b, unsigned __int128 m, bool neg);

/* Elements [0, n) of p (f64 when is64, else f32), or their squares, one
 * by one into ret's accumulator: the path every value can take. */
void xacc_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64, bool sq);

/* Sums (not squares) of elements [0, n) of p, n < 2^40, one by one into
 * ret's accumulator, at a cost per element that does not grow with the
 * spread of their exponents: the element path of sums. */
void xacc_sum_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64);

/* Squares of elements [0, n) of p, likewise (n <= 2^15 on the counters;
 * more, or specials, on xacc_elems()). */
void xacc_sumsq_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64);

/* The element path for a whole block, after the fast one gave up. */
static inline void xsum_slow(const unsigned char *p, size_t n, gr_partial *ret, bool is64, bool sq)
{
	memset(ret->xacc, 0, sizeof(ret->xacc));
	ret->xflags = XF_XACC;
	if (sq)
		xacc_sumsq_elems(ret, p, n, is64);
	else
		xacc_sum_elems(ret, p, n, is64);
}

/*
 * ---- the block kernels' grid ----
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
 * 26 or so), two for f32 squares (about 26): xsum-f32.c. f64 sums and
 * squares have a pass of their own over the same grid: xsum-f64-pass.h.
 *
 * Whatever path a block takes, its partial holds the exact value, so the
 * paths (and the ISA) can never show in the result.
 */
#define XL_MAX 4
/* Levels of the f64 pass (xsum-f64-pass.h): past XL_MAX, a loop over
 * them; past XF_LEVELS_MAX (a grid), the element path is faster (on the
 * 2-core VM) */
#define XF_LEVELS_MAX 12

typedef struct xgrid {
	double sigma[XF_LEVELS_MAX];
	uint64_t sbits[XF_LEVELS_MAX];
	int ulp[XF_LEVELS_MAX]; /* log2 of the level's unit */
} xgrid;

/* The levels for terms below 2^T (T <= 1020) in magnitude. */
static inline void xgrid_init(xgrid *g, int T, unsigned levels)
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

/* Elements sampled for the guess of a block's largest magnitude. */
#define XGUESS 256
