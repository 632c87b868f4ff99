/*
 * test-reduce-exact's f32 sums of small arrays: their exact values against
 * the f64 reference (check_value_ref(), reduce-exact-f64.c), their
 * rounding against exact_sum().
 */
#include "tests/cpu/reduce-check.h"
#include "tests/cpu/reduce-exact.h"

/* gr_reduce()'s f32 sum of the n elements at p holds exactly the value
 * of their doubles by ref_exact(), and rounds to exact_sum()'s. */
static void check_f32_ref(const unsigned char *p, size_t n, const char *what)
{
	static unsigned char d[8 * 2 * GR_REDUCE_BLOCK];
	static double x[2 * GR_REDUCE_BLOCK];
	CHECK_MSG(n <= 2 * GR_REDUCE_BLOCK, "check_f32_ref: n=%zu", n);
	bool nonzero = false;
	for (size_t i = 0; i < n; i++) {
		float f;
		memcpy(&f, p + 4 * i, 4);
		x[i] = f;
		memcpy(d + 8 * i, &x[i], 8);
		nonzero |= f != 0;
	}
	gr_partial got;
	gr_reduce(GR_OP_SUM, GR_DT_F32, p, n, &got);
	check_value_ref(&got, d, n, false, "f32", what);
	/* (exact_sum() knows no -0: not for blocks of zeros alone) */
	if (nonzero)
		CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F32, p, n), exact_sum(x, n),
		           "f32 sum n=%zu %s: rounding", n, what);
}

/* Element i of an f32 array becomes +-m * 2^(e - 23), 2^23 <= m < 2^24,
 * or the subnormal that keeps its bits above 2^-149 (at least the least
 * one). */
static void put_exp32(unsigned char *p, size_t i, int e, uint32_t m, bool neg)
{
	uint32_t b;
	if (e >= -126) {
		b = (uint32_t)(e + 127) << 23 | (m & ((1u << 23) - 1));
	} else {
		b = -126 - e < 24 ? m >> (-126 - e) : 0;
		b = b ? b : 1;
	}
	b |= (uint32_t)neg << 31;
	memcpy(p + 4 * i, &b, 4);
}

/*
 * f32 arrays of up to 4096 elements whose exponents lie close together
 * are summed as plain doubles, exact there by a bound on their exponents
 * (xsum-f32.c); the others go on to the grid with the largest element the
 * first pass found. Sizes around the vector groups and the path's limit,
 * spans just inside and just beyond the bound for each size, from the
 * subnormals to the top of the range, with the extremes anywhere (in a
 * tail too), zeros of both signs, cancellation to zero, ties, and
 * specials: their exact values against ref_exact(), their rounding
 * against exact_sum().
 */
void check_f32_narrow(unsigned char *buf)
{
	static const size_t sizes[] = {1,    2,    3,    15,   16,   17,   31,   32,
	                               33,   100,  255,  1023, 1024, 1025, 2047, 2048,
	                               2049, 4081, 4095, 4096, 4097, 5000};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		const size_t n = sizes[s];
		const int lg = n > 1 ? 64 - __builtin_clzll((unsigned long long)n - 1) : 0;
		/* the widest span of exponents the plain sum takes */
		const int wide = 53 - 24 - lg;
		/* and the spans that one level of the grid, two, or neither
		 * (the element path) take, on either side of each limit */
		static const int more[] = {24, 25, 26, 27, 28, 74, 75, 76, 77, 78, 79, 120, 276};
		const size_t nspans = 5 + sizeof(more) / sizeof(more[0]);
		for (size_t si = 0; si < nspans; si++) {
			const int span = si < 5 ? wide - 2 + (int)si : more[si - 5];
			if (span < 0)
				continue;
			for (unsigned round = 0; round < 6; round++) {
				/* the top anywhere, or low enough for subnormals */
				int top = round == 0   ? 127
				          : round == 1 ? -126 + span - 2
				          : round == 2 ? -149 + span
				                       : (int)(rng() % 200) - 100;
				top = top > 127 ? 127 : top;
				unsigned zeros = rng() % 3 == 0 ? (unsigned)(rng() % 50) : 0;
				/* one round with every element at the top, of one
				 * sign: the sum as large as the bound allows */
				const bool full = round == 3;
				for (size_t i = 0; i < n; i++) {
					if (full) {
						put_exp32(buf, i, top, (1u << 24) - 1, false);
						continue;
					}
					if (rng() % 100 < zeros) {
						put_f(GR_DT_F32, buf, i, rng() % 2 ? -0.0 : 0.0);
						continue;
					}
					int e = top - (int)(rng() % (unsigned)(span + 1));
					uint32_t m = 1u << 23 | (uint32_t)(rng() >> 41);
					put_exp32(buf, i, e < -149 ? -149 : e, m, rng() % 2);
				}
				/* both ends of the span, with every mantissa bit set
				 * (the last one is the first a wrong bound loses),
				 * first, last, or anywhere */
				const uint32_t ones = (1u << 24) - 1;
				size_t at[2];
				for (int k = 0; k < 2; k++) {
					unsigned where = (unsigned)(rng() % 3);
					at[k] = where == 0 ? 0 : where == 1 ? n - 1 : rng() % n;
				}
				put_exp32(buf, at[0], top, ones, !full && rng() % 2);
				if (n > 1 && at[1] != at[0]) {
					int e = top - span;
					put_exp32(buf, at[1], e < -149 ? -149 : e, ones,
					          !full && rng() % 2);
				}
				check_f32_ref(buf, n, "span");
				check_exact_bits(GR_OP_SUM, GR_DT_F32, buf, n);
				/* the same elements and their negations, shuffled:
				 * exactly +0, and then one element more */
				if (2 * n <= 8192 && n <= 2049) {
					for (size_t i = 0; i < n; i++)
						put_f(GR_DT_F32, buf, n + i,
						      -(double)get_ld(GR_DT_F32, buf, i));
					for (size_t i = 2 * n; i > 1; i--) {
						size_t j = rng() % i;
						unsigned char t[4];
						memcpy(t, buf + 4 * (i - 1), 4);
						memcpy(buf + 4 * (i - 1), buf + 4 * j, 4);
						memcpy(buf + 4 * j, t, 4);
					}
					CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F32, buf, 2 * n), 0.0,
					           "f32 x and -x n=%zu span %d", 2 * n, span);
					check_f32_ref(buf, 2 * n, "x and -x");
					put_exp32(buf, rng() % (2 * n), top - span, ones, false);
					check_f32_ref(buf, 2 * n, "x and -x, and one");
				}
			}
		}
		/* huge and tiny together, and ties (neither is a plain sum) */
		static const double lists[][3] = {
		    {0x1p127, 0x1p-149, -0x1p127},
		    {FLT_MAX, FLT_MAX, 0x1p-149},
		    {1, 0x1p-53, 0},
		    {1, 0x1p-52, 0x1p-53},
		    {-1, -0x1p-53, 0x1p-100},
		    {0x1p-126, -0x1p-149, 0x1p-149},
		};
		for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
			for (size_t i = 0; i < n; i++)
				put_f(GR_DT_F32, buf, i, rng() % 2 ? -0.0 : 0.0);
			for (size_t k = 0; k < 3 && k < n; k++)
				put_f(GR_DT_F32, buf, k == 0 ? n - 1 : rng() % n, lists[l][k]);
			check_f32_ref(buf, n, "list");
		}
		/* zeros of each sign alone, and small integers (every sum a
		 * plain one) */
		for (int z = 0; z < 3; z++) {
			for (size_t i = 0; i < n; i++)
				put_f(GR_DT_F32, buf, i, z == 0 ? 0.0 : -0.0);
			if (z == 2)
				put_f(GR_DT_F32, buf, rng() % n, 0.0);
			check_f32_ref(buf, n, "zeros");
			CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F32, buf, n), z == 1 ? -0.0 : 0.0,
			           "f32 zeros n=%zu", n);
		}
		for (size_t i = 0; i < n; i++)
			put_f(GR_DT_F32, buf, i, (double)(int)(rng() % 2001) - 1000);
		check_f32_ref(buf, n, "integers");
		/* and a special anywhere decides */
		static const double sp[][2] = {{INFINITY, 0},
		                               {-INFINITY, 0},
		                               {NAN, 0},
		                               {INFINITY, -INFINITY},
		                               {NAN, INFINITY}};
		static const double want[] = {INFINITY, -INFINITY, NAN, NAN, NAN};
		for (size_t k = 0; k < sizeof(sp) / sizeof(sp[0]); k++) {
			for (size_t i = 0; i < n; i++)
				put_f(GR_DT_F32, buf, i, (double)(int)(rng() % 2001) - 1000);
			/* the second, if any, before the first */
			size_t at = n > 1 ? 1 + rng() % (n - 1) : 0;
			put_f(GR_DT_F32, buf, rng() % 2 ? n - 1 : at, sp[k][0]);
			if (sp[k][1] != 0 && n > 1)
				put_f(GR_DT_F32, buf, rng() % at, sp[k][1]);
			double g = reduce_f(GR_OP_SUM, GR_DT_F32, buf, n);
			double w = n > 1 || sp[k][1] == 0 ? want[k] : sp[k][0];
			CHECK_MSG(isnan(w) ? isnan(g) : g == w, "f32 special %zu n=%zu: %g", k, n,
			          g);
		}
	}
}

/*
 * Larger f32 blocks guess the grid from a sample and check the guess
 * (AVX2: by the largest and least |x| bits over the block): one element
 * past the sample, at every exponent from a little above the block's
 * window to far above it, and from its bottom to far below, with every
 * mantissa bit set, in sums and sums of squares.
 */
void check_f32_grid(unsigned char *buf)
{
	static const size_t sizes[] = {4097, 5000, 8191, GR_REDUCE_BLOCK - 1, GR_REDUCE_BLOCK};
	const uint32_t ones = (1u << 24) - 1;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		const size_t n = sizes[s];
		const int top = (int)(rng() % 100) - 50, span = 8;
		for (size_t i = 0; i < n; i++) {
			int e = top - (int)(rng() % (unsigned)(span + 1));
			put_exp32(buf, i, e, 1u << 23 | (uint32_t)(rng() >> 41), rng() % 2);
		}
		for (int d = -2; d <= 60; d++) {
			/* above the window by d, or below its bottom by d */
			for (int below = 0; below < 2; below++) {
				if (below && d < 0)
					continue;
				size_t at = rng() % 2 ? n - 1 : 1000 + rng() % (n - 1000);
				unsigned char keep[4];
				memcpy(keep, buf + 4 * at, 4);
				int e = below ? top - span - d : top + d;
				put_exp32(buf, at,
				          e < -149  ? -149
				          : e > 127 ? 127
				                    : e,
				          ones, rng() % 2);
				check_f32_ref(buf, n,
				              below ? "grid, one below" : "grid, one above");
				if (d % 7 == 0 && n < GR_REDUCE_BLOCK)
					check_exact_bits(GR_OP_SUMSQ, GR_DT_F32, buf, n);
				memcpy(buf + 4 * at, keep, 4);
			}
		}
	}
}
