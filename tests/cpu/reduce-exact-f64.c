/*
 * test-reduce-exact's f64 sums and sums of squares against an exact
 * reference of their own (ref_exact(): a plain big-integer transcription
 * of what the accumulator must hold): every path, the bounds of each, the
 * accumulator's top words, and a subnormal late in a block.
 */
#include "tests/cpu/reduce-check.h"
#include "tests/cpu/reduce-exact.h"

/* Sums: 2^-1074 to 2^1024 times 2^15 elements, and a sign, in units of
 * 2^-1074. Squares: 2^-2148 to 2^2048 times 2^15, in units of 2^-2148. */
#define REF_WORDS 68
#define REF_UNIT(sq) ((sq) ? -2148 : -1074)

/* The exact sum of n finite f64 elements (sq: of their exact squares), in
 * units of 2^REF_UNIT (every double is a whole number of 2^-1074, every
 * square of 2^-2148), as a two's complement integer: a plain transcription
 * of what the accumulator must hold, apart from it. */
static void ref_exact(const unsigned char *p, size_t n, bool sq, uint64_t *w)
{
	bool finite = true;
	memset(w, 0, REF_WORDS * sizeof(*w));
	for (size_t i = 0; i < n; i++) {
		uint64_t b;
		memcpy(&b, p + 8 * i, 8);
		unsigned e = (b >> 52) & 0x7ff;
		uint64_t m = b & ((1ull << 52) - 1);
		finite &= e != 0x7ff;
		if (e)
			m |= 1ull << 52;
		/* x = m * 2^(E - 1075), E = max(e, 1): m << (E - 1) units, and
		 * x^2 = m^2 << (2 E - 2) units of squares */
		unsigned E = e ? e : 1, sh = sq ? 2 * E - 2 : E - 1, k = sh / 64, r = sh % 64;
		unsigned __int128 v = sq ? (unsigned __int128)m * m : m;
		uint64_t add[3] = {(uint64_t)(v << r), (uint64_t)(v >> 64 << r),
		                   r ? (uint64_t)(v >> (128 - r)) : 0};
		add[1] |= r ? (uint64_t)v >> (64 - r) : 0;
		bool neg = !sq && b >> 63;
		uint64_t c = 0;
		for (unsigned j = k; j < REF_WORDS; j++) {
			if (j - k >= 3 && !c)
				break;
			uint64_t d = j - k < 3 ? add[j - k] : 0, o = w[j];
			if (neg) {
				w[j] = o - d - c;
				c = o < d || (o == d && c);
			} else {
				w[j] = o + d + c;
				c = w[j] < o || (w[j] == o && (d || c));
			}
		}
	}
	CHECK_MSG(finite, "ref_exact: finite elements only");
}

/* got, a float sum (sq: sum of squares) of the n f64 elements at p (or
 * of their values as another dtype), holds exactly ref_exact()'s value. */
void check_value_ref(const gr_partial *got, const unsigned char *p, size_t n, bool sq,
                     const char *dt, const char *what)
{
	uint64_t w[REF_WORDS], wa[GR_PARTIAL_LIMBS_MAX], wb[GR_PARTIAL_LIMBS_MAX];
	bool negzero = n > 0 && !sq;
	for (size_t i = 0; i < n; i++)
		negzero &= get_ld(GR_DT_F64, p, i) == 0 && p[8 * i + 7] == 0x80;
	ref_exact(p, n, sq, w);
	gr_partial want;
	CHECK_MSG(gr_partial_from_limbs(&want, n, w, REF_WORDS, REF_UNIT(sq),
	                                negzero ? GR_PARTIAL_NEGZERO : 0) == 0,
	          "reference limbs");
	int sa, sb;
	unsigned fa, fb;
	size_t na = gr_partial_limbs(got, wa, GR_PARTIAL_LIMBS_MAX, &sa, &fa);
	size_t nb = gr_partial_limbs(&want, wb, GR_PARTIAL_LIMBS_MAX, &sb, &fb);
	CHECK_MSG(got->count == n && na == nb && (na == 0 || sa == sb) && fa == fb &&
	              memcmp(wa, wb, na * sizeof(wa[0])) == 0,
	          "%s %s n=%zu %s: exact value differs from the reference", dt,
	          sq ? "sumsq" : "sum", n, what);
}

/* gr_reduce()'s f64 sum (sq: sum of squares) holds exactly ref_exact()'s
 * value. */
static void check_exact_ref(const unsigned char *p, size_t n, bool sq, const char *what)
{
	gr_partial got;
	gr_reduce(sq ? GR_OP_SUMSQ : GR_OP_SUM, GR_DT_F64, p, n, &got);
	check_value_ref(&got, p, n, sq, "f64", what);
}

/* Element i becomes +-m * 2^(e - 52), 2^52 <= m < 2^53, or the subnormal
 * that keeps its bits above 2^-1074 (at least the least one). */
static void put_exp(unsigned char *p, size_t i, int e, uint64_t m, bool neg)
{
	uint64_t b;
	if (e >= -1022) {
		b = (uint64_t)(e + 1023) << 52 | (m & ((1ull << 52) - 1));
	} else {
		b = -1022 - e < 53 ? m >> (-1022 - e) : 0;
		b = b ? b : 1;
	}
	b |= (uint64_t)neg << 63;
	memcpy(p + 8 * i, &b, 8);
}

/* A mantissa: full, a few bits, or a power of two. */
static uint64_t some_mantissa(void)
{
	switch (rng() % 3) {
	case 0:
		return 1ull << 52 | rng() >> 12;
	case 1:
		return 1ull << 52 | (rng() & 0xff) << 44;
	default:
		return 1ull << 52;
	}
}

/*
 * f64 sums have a pass of their own (xsum-f64.c): a grid from a sample, a
 * second pass where the sample misled it, two to four levels, element by
 * element beyond that. Blocks of every size around its group and sample
 * sizes, with exponents in windows anywhere in the range and as wide as
 * each number of levels takes and a little more, with zeros, powers of
 * two on the bounds, a large or tiny element late, cancelling to zero
 * and to ties: their exact values against ref_exact(), their rounding
 * against exact_sum(), and specials among them.
 */
void check_f64_paths(unsigned char *buf)
{
	static const size_t sizes[] = {1,
	                               2,
	                               15,
	                               16,
	                               17,
	                               63,
	                               64,
	                               65,
	                               100,
	                               257,
	                               1000,
	                               2048,
	                               4099,
	                               8191,
	                               GR_REDUCE_BLOCK - 5,
	                               GR_REDUCE_BLOCK};
	static const int spans[] = {0,  1,   10,  45,  47,  48,  49,  50,  51,  52,  53,  98,
	                            99, 100, 101, 102, 149, 150, 151, 152, 153, 400, 2100};
	for (unsigned round = 0; round < 1200; round++) {
		size_t n = sizes[rng() % (sizeof(sizes) / sizeof(sizes[0]))];
		int span = spans[rng() % (sizeof(spans) / sizeof(spans[0]))];
		int top = (int)(rng() % 2098) - 1074;
		unsigned zeros = rng() % 4 == 0 ? (unsigned)(rng() % 60) : 0;
		for (size_t i = 0; i < n; i++) {
			if (rng() % 100 < zeros) {
				double z = rng() % 2 ? -0.0 : 0.0;
				memcpy(buf + 8 * i, &z, 8);
				continue;
			}
			int e = top - (int)(rng() % (unsigned)(span + 1));
			uint64_t m = some_mantissa();
			put_exp(buf, i, e < -1074 ? -1074 : e, m, rng() % 2);
		}
		/* late, beyond what a sample sees: larger or smaller than the
		 * rest, or exactly a power of two at its top or bottom */
		size_t late = n - 1 - (rng() % (n < 8 ? n : 8));
		switch (rng() % 6) {
		case 0: {
			int e = top + 1 + (int)(rng() % 60);
			uint64_t m = some_mantissa();
			put_exp(buf, late, e > 1023 ? 1023 : e, m, rng() % 2);
			break;
		}
		case 1: {
			int e = top - span - 1 - (int)(rng() % 60);
			uint64_t m = some_mantissa();
			put_exp(buf, late, e < -1074 ? -1074 : e, m, rng() % 2);
			break;
		}
		case 2:
			put_exp(buf, late, top + 1 > 1023 ? 1023 : top + 1, 1ull << 52, rng() % 2);
			break;
		case 3: {
			int e = top - span;
			put_exp(buf, late, e < -1074 ? -1074 : e, 1ull << 52, rng() % 2);
			break;
		}
		default:
			break;
		}
		/* half of them: every element with its negation, shuffled, and
		 * then (away from the top of the range) a tie on top */
		bool mirror = n >= 2 && rng() % 2;
		if (mirror) {
			size_t h = n / 2;
			for (size_t i = 0; i < h; i++)
				put_f(GR_DT_F64, buf, h + i, -(double)get_ld(GR_DT_F64, buf, i));
			if (n % 2)
				put_f(GR_DT_F64, buf, n - 1, 0.0);
			for (size_t i = n; i > 1; i--) {
				size_t j = rng() % i;
				unsigned char t[8];
				memcpy(t, buf + 8 * (i - 1), 8);
				memcpy(buf + 8 * (i - 1), buf + 8 * j, 8);
				memcpy(buf + 8 * j, t, 8);
			}
		}
		check_exact_ref(buf, n, false, "window");
		check_exact_ref(buf, n, true, "window");
		/* (exact_sum() knows no -0: not for blocks of zeros alone) */
		bool nonzero = false;
		for (size_t i = 0; i < n; i++)
			nonzero |= get_ld(GR_DT_F64, buf, i) != 0;
		if (top <= 1000 && nonzero)
			check_canonical(GR_OP_SUM, GR_DT_F64, buf, n);
		if (mirror && n >= 4 && top <= 1000) {
			/* x and -x cancel: replace a pair (a zero and a zero, or
			 * an element and its negation) by a and 2^-53 a: a tie,
			 * to even (down for a = 1, up for a = 1 + 2^-52) */
			size_t i = 0, j = 1;
			double a = rng() % 2 ? 1.0 : 1 + 0x1p-52,
			       sc = ldexp(1, (int)(rng() % 200) - 100);
			double x = get_ld(GR_DT_F64, buf, 0);
			for (j = 1; j < n && (double)get_ld(GR_DT_F64, buf, j) != -x; j++)
				;
			if (j < n) {
				put_f(GR_DT_F64, buf, i, a * sc);
				put_f(GR_DT_F64, buf, j, 0x1p-53 * sc);
				CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F64, buf, n),
				           (a == 1 ? 1 : 1 + 0x1p-51) * sc, "f64 tie n=%zu span %d",
				           n, span);
				check_exact_ref(buf, n, false, "tie");
			}
		}
		/* and a special anywhere decides */
		if (rng() % 4 == 0) {
			double sp[] = {INFINITY, -INFINITY, NAN};
			int k = (int)(rng() % 3);
			put_f(GR_DT_F64, buf, rng() % n, sp[k]);
			double g = reduce_f(GR_OP_SUM, GR_DT_F64, buf, n);
			CHECK_MSG(k == 2 ? isnan(g) : g == sp[k], "f64 special %d n=%zu: %g", k, n,
			          g);
		}
	}
	/* every element the same power of two, and all zeros of each sign */
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		for (int e = -1074; e <= 1023; e += 97) {
			for (size_t i = 0; i < n; i++)
				put_exp(buf, i, e, 1ull << 52, false);
			check_exact_ref(buf, n, false, "powers of two");
			check_exact_ref(buf, n, true, "powers of two");
		}
		for (int z = 0; z < 3; z++) {
			for (size_t i = 0; i < n; i++)
				put_f(GR_DT_F64, buf, i, z == 0 ? 0.0 : -0.0);
			if (z == 2)
				put_f(GR_DT_F64, buf, n - 1, 0.0);
			check_exact_ref(buf, n, false, "zeros");
			check_exact_ref(buf, n, true, "zeros");
		}
	}
}

/*
 * The bounds themselves: a block's exponents in a window (one whose
 * sample asks for two, three or four levels) and one element late, at
 * every exponent from far below the window to a few binades above it,
 * with every mantissa bit set (its last bit is the first a grid too
 * coarse would lose, and its high word the last one a bound admits), and
 * another with an odd one; near the top, the middle and the subnormals.
 */
void check_f64_bounds(unsigned char *buf)
{
	static const size_t sizes[] = {100, 4099, GR_REDUCE_BLOCK};
	static const int spans[] = {0, 20, 40, 60, 90, 120, 140};
	static const int tops[] = {0, -900, 900, -1030, -1050};
	const uint64_t ones = (1ull << 53) - 1;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t w = 0; w < sizeof(spans) / sizeof(spans[0]); w++)
			for (size_t t = 0; t < sizeof(tops) / sizeof(tops[0]); t++) {
				size_t n = sizes[s];
				int span = spans[w], top = tops[t];
				if (n == GR_REDUCE_BLOCK && t > 0)
					continue;
				for (size_t i = 0; i < n; i++) {
					/* one call to rng() a statement: the same data
					 * whichever order a compiler takes arguments in */
					int e = top - (int)(rng() % (unsigned)(span + 1));
					uint64_t m = 1ull << 52 | rng() >> 12;
					put_exp(buf, i, e, m, rng() % 2);
				}
				/* larger blocks take every third or seventh exponent */
				int step = n == GR_REDUCE_BLOCK ? 7 : n > 1000 ? 3 : 1;
				for (int d = -8; d <= span + 170; d += d < 0 ? 1 : step) {
					int e = top - d;
					e = e < -1074 ? -1074 : e > 1023 ? 1023 : e;
					/* and beside it, a binade higher (so that it
					 * never hides the first from a bound), an odd
					 * mantissa; then the other way round, with
					 * 1 + 2^-26 + 2^-52, whose square's high half
					 * has its last bit set, as low as it goes */
					for (int swap = 0; swap < 2; swap++) {
						uint64_t odd = swap ? 1ull << 52 | 1ull << 26 | 1
						                    : 1ull << 52 | rng() >> 12 | 1;
						put_exp(buf, n - 2, e, swap ? odd : ones, d % 2);
						put_exp(buf, n - 3, e < 1023 ? e + 1 : e,
						        swap ? ones : odd, rng() % 2);
						check_exact_ref(buf, n, false, "bounds");
						check_exact_ref(buf, n, true, "bounds");
					}
				}
			}
}

/* Element at of a block whose exponents lie in [top - span, top] becomes
 * each of the cases of check_f64_top_words() in turn, then itself again. */
static void check_top_words_at(unsigned char *buf, size_t n, size_t at, int top, int span)
{
	/* subnormals' bits: the top 16 zero, then 1 */
	static const uint64_t subs[] = {1, (1ull << 48) - 1, 1ull << 48, (1ull << 52) - 1};
	static const uint64_t mants[] = {0, 1, 15ull << 48, (1ull << 52) - 1};
	static const int offs[] = {1, 0, -1, -2, -48, -49, -50, -51, -52, -53, -101, -102};
	unsigned char keep[8];
	memcpy(keep, buf + 8 * at, 8);
	for (size_t k = 0; k < sizeof(subs) / sizeof(subs[0]); k++) {
		uint64_t b = subs[k] | (uint64_t)(rng() % 2) << 63;
		memcpy(buf + 8 * at, &b, 8);
		check_exact_ref(buf, n, false, "top words: subnormal");
	}
	for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
		int e = (offs[o] > 0 ? top : top - span) + offs[o];
		if (e < -1022 || e > 1023)
			continue;
		for (size_t k = 0; k < sizeof(mants) / sizeof(mants[0]); k++) {
			put_exp(buf, at, e, 1ull << 52 | mants[k], rng() % 2);
			check_exact_ref(buf, n, false, "top words: bound");
		}
	}
	memcpy(buf + 8 * at, keep, 8);
}

/*
 * The AVX2 sums bound each element by the top 16 bits of its bits, and
 * catch the subnormals whose top is zero (below 2^-1026) by MXCSR's
 * denormal flag (xsum-f64.c). Blocks of exponents in a window, with one
 * element anywhere (first, middle, last, in a tail) that is: a subnormal
 * whose top is zero (2^-1074 alone, or every bit below the top) or one
 * (2^-1026), or a normal element on a bound of the window or beyond it
 * with the least or the largest top of its binade (mantissas 1 and
 * 15 * 2^48, whose tops differ from their values' most); blocks of zeros
 * of either sign and subnormals whose top is zero alone; and a denormal
 * flag left set by an operation before the call.
 */
void check_f64_top_words(unsigned char *buf)
{
	static const size_t sizes[] = {1, 15, 16, 17, 100, 4099, GR_REDUCE_BLOCK};
	static const int tops[] = {0, -900, -960, -1000, -1020, 1000};
	static const int spans[] = {0, 30, 49};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t t = 0; t < sizeof(tops) / sizeof(tops[0]); t++)
			for (size_t w = 0; w < sizeof(spans) / sizeof(spans[0]); w++) {
				size_t n = sizes[s];
				int top = tops[t], span = spans[w];
				if (n == GR_REDUCE_BLOCK && top != 0 && top != -960)
					continue;
				for (size_t i = 0; i < n; i++) {
					int e = top - (int)(rng() % (unsigned)(span + 1));
					uint64_t m = 1ull << 52 | rng() >> 12;
					put_exp(buf, i, e, m, rng() % 2);
				}
				check_top_words_at(buf, n, 0, top, span);
				check_top_words_at(buf, n, n / 2, top, span);
				check_top_words_at(buf, n, n - 1, top, span);
			}
	/* zeros and subnormals whose top is zero alone */
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		for (int round = 0; round < 4; round++) {
			for (size_t i = 0; i < n; i++)
				put_f(GR_DT_F64, buf, i, rng() % 2 ? -0.0 : 0.0);
			for (int k = 0; k < round; k++) {
				uint64_t b =
				    (rng() & ((1ull << 48) - 1)) | 1 | (uint64_t)(rng() % 2) << 63;
				memcpy(buf + 8 * (rng() % n), &b, 8);
			}
			check_exact_ref(buf, n, false, "top words: zeros and subnormals");
		}
	}
	/* a flag some earlier operation left set */
	for (size_t i = 0; i < 100; i++)
		put_exp(buf, i, -(int)(rng() % 40), 1ull << 52 | rng() >> 12, rng() % 2);
	volatile double tiny = 0x1p-1074;
	volatile double sink = tiny * 3;
	(void)sink;
	check_exact_ref(buf, 100, false, "top words: a flag left set");
}

/*
 * A subnormal among ordinary f64 elements, past the sample a block's grid
 * is guessed from: the AVX2 passes bound elements by their top 16 bits,
 * where most subnormals look like zeros, and see them only through the
 * denormal flag (xsum-f64-pass.h). Sums and squares, in a block whose squares
 * need no scale and in one whose squares do; the square of a subnormal
 * (below 2^-2052) shows only in the exact value.
 */
void check_f64_late_subnormal(unsigned char *buf)
{
	static const size_t sizes[] = {100, 4099, GR_REDUCE_BLOCK};
	static const int tops[] = {0, -800, 600};
	static const uint64_t tiny[] = {1, 3, 1ull << 40 | 5, 1ull << 51};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t t = 0; t < sizeof(tops) / sizeof(tops[0]); t++)
			for (size_t k = 0; k < sizeof(tiny) / sizeof(tiny[0]); k++) {
				const size_t n = sizes[s];
				for (size_t i = 0; i < n; i++) {
					int e = tops[t] - (int)(rng() % 8);
					uint64_t m = 1ull << 52 | rng() >> 12;
					put_exp(buf, i, e, m, rng() % 2);
				}
				/* late, and in the tail group */
				for (size_t at = n / 2; at < n; at += n / 2 - 1) {
					uint64_t b = tiny[k] | (uint64_t)(at % 2) << 63, keep;
					memcpy(&keep, buf + 8 * at, 8);
					memcpy(buf + 8 * at, &b, 8);
					check_exact_ref(buf, n, false, "late subnormal");
					check_exact_ref(buf, n, true, "late subnormal");
					memcpy(buf + 8 * at, &keep, 8);
				}
			}
}
