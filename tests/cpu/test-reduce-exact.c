/*
 * Exact float sums and sums of squares: adversarial arrays with known
 * answers (cancellation to zero and to ties, subnormals, overflow,
 * specials, signed zeros), blocks whose exponents span just less and just
 * more than the fast paths take, a large element after a small start,
 * and blocks of every kind in one array, each bit for bit.
 */
#include "tests/cpu/reduce-check.h"

/* The sum of a list of doubles (as f64, or as f32 when every one is a
 * float), reduced whole, by chunks of one block, and with the elements
 * spread over three blocks among zeros of both signs. */
static double sum_list(gr_op op, gr_dtype dt, const double *x, size_t n)
{
	static unsigned char b[8 * 4 * GR_REDUCE_BLOCK];
	for (size_t i = 0; i < n; i++)
		put_f(dt, b, i, x[i]);
	double whole = reduce_f(op, dt, b, n);
	/* the same elements far apart, with -0 between them: -0 changes
	 * nothing unless every element is -0 */
	size_t span = 3 * GR_REDUCE_BLOCK + 17;
	CHECK_MSG(n <= 64, "list too long");
	for (size_t i = 0; i < span; i++)
		put_f(dt, b, i, -0.0);
	for (size_t i = 0; i < n; i++)
		put_f(dt, b, i * (span / 64) + (i % 3) * 5, x[i]);
	double spread = reduce_f(op, dt, b, span);
	if (!(n == 0 || op == GR_OP_SUMSQ))
		CHECK_BITS(spread, whole, "%s %s of %zu spread over blocks", op_names[op],
		           dt_names[dt], n);
	return whole;
}

static void check_list(gr_op op, gr_dtype dt, const double *x, size_t n, double want,
                       const char *what)
{
	CHECK_BITS(sum_list(op, dt, x, n), want, "%s %s: %s", op_names[op], dt_names[dt], what);
}

static void check_exact_cases(unsigned char *buf)
{
	const double big = DBL_MAX / 4;

	/* (max/4, 1, -max/4, 2^-40) x 50: double lanes overflow to NaN */
	double *d = (double *)(void *)buf;
	for (size_t i = 0; i < 200; i += 4) {
		d[i] = big;
		d[i + 1] = 1;
		d[i + 2] = -big;
		d[i + 3] = 0x1p-40;
	}
	CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F64, buf, 200), 50.0 + 50 * 0x1p-40, "max/4 pattern");
	CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F64, buf, 200), 50.000000000045475, "max/4 value");
	CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 200), INFINITY, "max/4 squares");

	/* x and -x, shuffled, over many blocks: exactly +0 */
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		for (int narrow = 0; narrow < 2; narrow++) {
			size_t half = 100000 + (size_t)narrow;
			fill(dt, buf, half, narrow);
			for (size_t i = 0; i < half; i++)
				put_f(dt, buf, half + i, -(double)get_ld(dt, buf, i));
			for (size_t i = 2 * half; i > 1; i--) {
				size_t j = rng() % i, es = esize(dt);
				unsigned char t[8];
				memcpy(t, buf + (i - 1) * es, es);
				memcpy(buf + (i - 1) * es, buf + j * es, es);
				memcpy(buf + j * es, t, es);
			}
			CHECK_BITS(reduce_f(GR_OP_SUM, dt, buf, 2 * half), 0.0, "x and -x %s",
			           dt_names[dt]);
			/* plus one tiny element: exactly that element */
			put_f(dt, buf, 2 * half, 0x1p-100);
			CHECK_BITS(reduce_f(GR_OP_SUM, dt, buf, 2 * half + 1), 0x1p-100,
			           "x and -x and 2^-100 %s", dt_names[dt]);
		}
	}

	/* ties to even, and just above them, in f64 and in f32 */
	const double one_ulp = 0x1p-52, half_ulp = 0x1p-53;
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1, half_ulp}, 2, 1.0, "tie down");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1 + one_ulp, half_ulp}, 2, 1 + 2 * one_ulp,
	           "tie up");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1, half_ulp, 0x1p-160}, 3, 1 + one_ulp,
	           "above a tie");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1, half_ulp, -0x1p-160}, 3, 1.0, "below a tie");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){-1, -half_ulp, -0x1p-1074}, 3, -1 - one_ulp,
	           "above a negative tie");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){0x1p-1074, 0x1p-1074, -0.0}, 3, 0x1p-1073,
	           "subnormals");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){1, 0x1p-52, 0x1p-53}, 3, 1 + 0x1p-51,
	           "f32 tie up");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){1, 0x1p-53}, 2, 1.0, "f32 tie down");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){0x1p100, 0x1p47, 0x1p-100, -0x1p100}, 4,
	           0x1p47 + 0x1p-100, "f32 wide");
	/* squares: (1 + 2^-26)^2 = 1 + 2^-25 + 2^-52 exactly, plus 2^-53 */
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){1 + 0x1p-26}, 1, 1 + 0x1p-25 + 0x1p-52,
	           "square exact");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){1 + 0x1p-27, 0x1p-27}, 2, 1 + 0x1p-26,
	           "square tie down");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){1 + 0x1p-27, 0x1p-27, 0x1p-80}, 3,
	           1 + 0x1p-26 + 0x1p-52, "square above a tie");

	/* huge with tiny, subnormals, and rounding to infinity */
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1e308, 1e-308, -1e308, 5e-324}, 4,
	           1e-308 + 5e-324, "1e308 and 1e-308");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1e308, 1e308, -1e308}, 3, 1e308, "1e308 twice");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){DBL_MAX, 0x1p970}, 2, INFINITY,
	           "max plus half an ulp ties to 2^1024");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){DBL_MAX, 0x1p969}, 2, DBL_MAX,
	           "max plus a quarter ulp");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){-DBL_MAX, -DBL_MAX, DBL_MAX}, 3, -DBL_MAX,
	           "-max twice, +max once");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){-DBL_MAX, -DBL_MAX}, 2, -INFINITY,
	           "negative overflow");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){0x1p-1074, -0x1p-1073, 0x1p-1074}, 3, 0.0,
	           "subnormals cancel to +0");
	/* the rounding's last step at each end of the range: to the largest
	 * subnormal, up into the normals, and to 2^1024 (infinity) from just
	 * below it; of either sign */
	for (int sg = 1; sg >= -1; sg -= 2) {
		check_list(GR_OP_SUM, GR_DT_F64, (double[]){sg * 0x1p-1022, -sg * 0x1p-1074}, 2,
		           sg * 0x1.ffffffffffffep-1023, "largest subnormal");
		check_list(GR_OP_SUM, GR_DT_F64, (double[]){sg * 0x1p-1023, sg * 0x1p-1023}, 2,
		           sg * 0x1p-1022, "two halves of the least normal");
		check_list(GR_OP_SUM, GR_DT_F64,
		           (double[]){sg * 0x1.ffffffffffffep-1023, sg * 0x1p-1074}, 2,
		           sg * 0x1p-1022, "largest subnormal up to the least normal");
		check_list(GR_OP_SUM, GR_DT_F64,
		           (double[]){sg * 0x1p1023, sg * 0x1p1023, -sg * 0x1p-1074}, 3,
		           sg * INFINITY, "2^1024 less 2^-1074 rounds to infinity");
		check_list(GR_OP_SUM, GR_DT_F64, (double[]){sg * DBL_MAX, -sg * 0x1p-1074}, 2,
		           sg * DBL_MAX, "max less 2^-1074");
		check_list(GR_OP_SUM, GR_DT_F64,
		           (double[]){sg * 0x1p1023, sg * 0x1p1022, sg * 0x1p1021}, 3,
		           sg * 0x1.cp1023, "7 * 2^1021");
	}
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){FLT_MAX, FLT_MAX, 0x1p-149}, 3, 2.0 * FLT_MAX,
	           "f32 beyond FLT_MAX");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){0x1p-149, -0x1p-148, 0x1p100}, 3, 0x1p100,
	           "f32 subnormals");
	check_list(GR_OP_SUMSQ, GR_DT_F32, (double[]){0x1p-149, 0x1p-149}, 2, 0x1p-297,
	           "f32 squares of subnormals");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){1e200, 1e200}, 2, INFINITY, "sumsq overflow");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){0x1p511, 0x1p511}, 2, 0x1p1023,
	           "sumsq at the top");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){0x1p-537, 0x1p-537}, 2, 0x1p-1073,
	           "sumsq of tiny");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){5e-324}, 1, 0.0, "sumsq below the least");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){1e300, 1e-300, -1e300}, 3, INFINITY,
	           "sumsq of 1e300 and 1e-300");

	/* f64 sumsq underflow: squares below 2^-1022 keep every bit. n copies
	 * of (2^-540)^2 = 2^-1080 sum to n * 2^-1080. */
	for (size_t i = 0; i < 1000000; i++)
		d[i] = i % 2 ? 0x1p-540 : -0x1p-540;
	/* 10^6 = 15625 * 2^6: exactly 15625 least subnormals */
	CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 1000000), 15625 * 0x1p-1074,
	           "10^6 tiny squares");
	CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 3), 0.0, "3 tiny squares round to +0");
	CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F64, buf, 1000000), 0.0, "tiny cancel");
	/* 1.5 * 2^-540 squared is 2.25 * 2^-1080: below 2^-1074 bits, in sums */
	for (size_t i = 0; i < 4096; i++)
		d[i] = 1.5 * 0x1p-540;
	CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 4096), 2.25 * 0x1p-1068, "4096 x 1.5");
	CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 1), 0.0, "2.25 * 2^-1080 rounds to 0");
	CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 1000), ldexp(2250, -1080), "1000 x 1.5");

	/* runs of identical values */
	for (size_t i = 0; i < 1000000; i++)
		d[i] = 0.1;
	{
		/* 0.1 = m * 2^-56 exactly; 10^6 of them, rounded once */
		__int128 m = (__int128)ldexp(0.1, 56) * 1000000;
		CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F64, buf, 1000000), ldexp((double)m, -56),
		           "10^6 x 0.1");
		__int128 m2 = (__int128)ldexp(0.1, 56) * (__int128)ldexp(0.1, 56) * 1000000;
		/* m2 < 2^127: round to double once, then scale exactly */
		CHECK_BITS(reduce_f(GR_OP_SUMSQ, GR_DT_F64, buf, 1000000), ldexp((double)m2, -112),
		           "10^6 x 0.1^2");
	}
	{
		float *f = (float *)(void *)buf;
		for (size_t i = 0; i < 1000003; i++)
			f[i] = 0.1f;
		int64_t m = (int64_t)ldexpf(0.1f, 27) * 1000003;
		CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F32, buf, 1000003), ldexp((double)m, -27),
		           "10^6 x 0.1f");
	}

	/* infinities and NaN whatever else is there */
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){INFINITY, -DBL_MAX, -DBL_MAX}, 3, INFINITY,
	           "+inf beats overflow");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){-INFINITY, 1, INFINITY}, 3, NAN, "inf - inf");
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){-INFINITY, 1, INFINITY}, 3, INFINITY,
	           "sumsq of both infinities");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){NAN, INFINITY}, 2, NAN, "NaN and inf");

	/* signed zeros: -0 only when every element is -0 */
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		check_list(GR_OP_SUM, dt, (double[]){-0.0}, 1, -0.0, "[-0]");
		check_list(GR_OP_SUM, dt, (double[]){-0.0, -0.0}, 2, -0.0, "[-0, -0]");
		check_list(GR_OP_SUM, dt, (double[]){-0.0, 0.0}, 2, 0.0, "[-0, +0]");
		check_list(GR_OP_SUM, dt, (double[]){0.0, -0.0}, 2, 0.0, "[+0, -0]");
		check_list(GR_OP_SUM, dt, NULL, 0, 0.0, "[]");
		check_list(GR_OP_SUM, dt, (double[]){1, -1}, 2, 0.0, "[1, -1]");
		check_list(GR_OP_SUM, dt, (double[]){-1, 1, -0.0}, 3, 0.0, "[-1, 1, -0]");
		check_list(GR_OP_SUMSQ, dt, (double[]){-0.0}, 1, 0.0, "sumsq [-0]");
		/* many -0 over blocks, and chunks of them combined */
		size_t n = 3 * GR_REDUCE_BLOCK + 5;
		for (size_t i = 0; i < n; i++)
			put_f(dt, buf, i, -0.0);
		CHECK_BITS(reduce_f(GR_OP_SUM, dt, buf, n), -0.0, "%s -0 over blocks",
		           dt_names[dt]);
		CHECK_BITS(reduce_f(GR_OP_SUMSQ, dt, buf, n), 0.0, "%s sumsq -0", dt_names[dt]);
		put_f(dt, buf, n - 1, 0.0);
		CHECK_BITS(reduce_f(GR_OP_SUM, dt, buf, n), 0.0, "%s one +0 last", dt_names[dt]);
		check_chunking(GR_OP_SUM, dt, buf, n);
	}

	/* random lists of values from one binade to far apart, shuffled, f64:
	 * the exact reference, and x with -x cancelling */
	for (unsigned round = 0; round < 300; round++) {
		double x[64];
		size_t n = 1 + rng() % 64;
		int spread = (int)(rng() % 2100);
		for (size_t i = 0; i < n; i++) {
			uint64_t r = rng();
			double m = (double)(r >> 11) / (1ull << 53);
			int e = (int)(rng() % (unsigned)(spread + 1)) - spread / 2;
			if (rng() % 4 == 0)
				e = (int)(rng() % 2098) - 1074;
			x[i] = ldexp(r & 1 ? -m : m, e < 1020 ? e : 1020);
			if (rng() % 8 == 0 && i)
				x[i] = -x[rng() % i];
		}
		shuffle(x, n);
		check_list(GR_OP_SUM, GR_DT_F64, x, n, exact_sum(x, n), "random list");
	}
}

/* The exact value, not only its rounding: a block (any path) against the
 * combination of its elements' one-element partials, which go element by
 * element. Equal values export equal limbs (a block may keep a value that
 * a double holds exactly in v.f, so their bytes may differ). */
static void check_exact_bits(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial whole, acc, one;
	gr_reduce(op, dt, p, n, &whole);
	gr_partial_identity(op, dt, &acc);
	for (size_t i = 0; i < n; i++) {
		gr_reduce(op, dt, p + i * esize(dt), 1, &one);
		gr_partial_combine(op, dt, &acc, &one);
	}
	uint64_t wa[GR_PARTIAL_LIMBS_MAX], wb[GR_PARTIAL_LIMBS_MAX];
	int sa, sb;
	unsigned fa, fb;
	size_t na = gr_partial_limbs(&whole, wa, GR_PARTIAL_LIMBS_MAX, &sa, &fa);
	size_t nb = gr_partial_limbs(&acc, wb, GR_PARTIAL_LIMBS_MAX, &sb, &fb);
	CHECK_MSG(whole.count == acc.count && na == nb && (na == 0 || sa == sb) && fa == fb &&
	              memcmp(wa, wb, na * sizeof(wa[0])) == 0,
	          "%s %s n=%zu: exact value differs from its elements'", op_names[op], dt_names[dt],
	          n);
}

/* Blocks whose exponents span a little less and a little more than the
 * fast paths take, with full mantissas: the lowest bits of every element
 * and square must reach the accumulator. */
static void check_spans(unsigned char *buf)
{
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++)
		for (int span = 16; span <= 56; span++) {
			size_t n = 1100 + (size_t)span;
			for (size_t i = 0; i < n; i++) {
				uint64_t r = rng();
				double m = 1 + (double)(r >> 12) / (1ull << 52);
				double x =
				    ldexp(r & 1 ? -m : m, -(int)(rng() % (unsigned)(span + 1)));
				put_f(dt, buf, i, i == 0 ? 1.5 : x);
			}
			for (gr_op op = GR_OP_SUM; op <= GR_OP_SUMSQ; op += GR_OP_SUMSQ - GR_OP_SUM)
				check_exact_bits(op, dt, buf, n);
		}
}

/* A block whose first elements are small and a later one large (or
 * special): what reduce.c guesses from the first elements must not do. */
static void check_late_large(unsigned char *buf)
{
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		static const size_t where[] = {300, 5000, GR_REDUCE_BLOCK - 3, GR_REDUCE_BLOCK - 1};
		for (size_t w = 0; w < sizeof(where) / sizeof(where[0]); w++) {
			size_t n = GR_REDUCE_BLOCK;
			fill(dt, buf, n, true);
			put_f(dt, buf, where[w], 0x1p40);
			for (gr_op op = GR_OP_SUM; op <= GR_OP_SUMSQ; op += GR_OP_SUMSQ - GR_OP_SUM)
				check_canonical(op, dt, buf, n);
			/* just one binade above the first elements: still fine */
			fill(dt, buf, n, true);
			put_f(dt, buf, where[w], 40.0);
			for (gr_op op = GR_OP_SUM; op <= GR_OP_SUMSQ; op += GR_OP_SUMSQ - GR_OP_SUM)
				check_canonical(op, dt, buf, n);
			put_f(dt, buf, where[w], INFINITY);
			CHECK_BITS(reduce_f(GR_OP_SUM, dt, buf, n), INFINITY, "late inf");
			put_f(dt, buf, where[w], NAN);
			CHECK_MSG(isnan(reduce_f(GR_OP_SUMSQ, dt, buf, n)), "late NaN");
		}
	}
}

/* Blocks of every kind in one array: narrow ones (fast), wide ones
 * (element by element), special ones; chunking and combining in any
 * grouping must give the bits of the exact sum. */
static void check_mixed_blocks(unsigned char *buf)
{
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		size_t n = 7 * GR_REDUCE_BLOCK + 1234, es = esize(dt);
		for (size_t b = 0; b * GR_REDUCE_BLOCK < n; b++) {
			size_t i = b * GR_REDUCE_BLOCK;
			size_t m = n - i < GR_REDUCE_BLOCK ? n - i : GR_REDUCE_BLOCK;
			fill(dt, buf + i * es, m, b % 2 == 0);
		}
		/* one far-out element in block 3 */
		put_f(dt, buf, 3 * GR_REDUCE_BLOCK + 77, dt == GR_DT_F64 ? 0x1p-900 : 0x1p-140);
		for (gr_op op = GR_OP_SUM; op <= GR_OP_SUMSQ; op += GR_OP_SUMSQ - GR_OP_SUM) {
			check_canonical(op, dt, buf, n);
			check_chunking(op, dt, buf, n);
			/* blocks combined as a balanced tree, not left to right */
			size_t nb = (n + GR_REDUCE_BLOCK - 1) / GR_REDUCE_BLOCK;
			gr_partial part[16], whole;
			for (size_t b = 0; b < nb; b++) {
				size_t i = b * GR_REDUCE_BLOCK;
				gr_reduce_block(op, dt, buf + i * es,
				                n - i < GR_REDUCE_BLOCK ? n - i : GR_REDUCE_BLOCK,
				                &part[b]);
			}
			for (size_t w = 1; w < nb; w *= 2)
				for (size_t b = 0; b + w < nb; b += 2 * w)
					gr_partial_combine(op, dt, &part[b], &part[b + w]);
			gr_reduce(op, dt, buf, n, &whole);
			CHECK_MSG(same_bits(&part[0], &whole), "%s %s tree", op_names[op],
			          dt_names[dt]);
		}
	}
}

/* ---- f64 sums against an exact reference of their own ---- */

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
static void check_value_ref(const gr_partial *got, const unsigned char *p, size_t n, bool sq,
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
static void check_f64_paths(unsigned char *buf)
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
static void check_f64_bounds(unsigned char *buf)
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
static void check_f64_top_words(unsigned char *buf)
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

/* ---- f32 sums of small arrays ---- */

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
static void check_f32_narrow(unsigned char *buf)
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
static void check_f32_grid(unsigned char *buf)
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

/*
 * A subnormal among ordinary f64 elements, past the sample a block's grid
 * is guessed from: the AVX2 passes bound elements by their top 16 bits,
 * where most subnormals look like zeros, and see them only through the
 * denormal flag (xsum-f64-pass.h). Sums and squares, in a block whose squares
 * need no scale and in one whose squares do; the square of a subnormal
 * (below 2^-2052) shows only in the exact value.
 */
static void check_f64_late_subnormal(unsigned char *buf)
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

int main(int argc, char **argv)
{
	static const reduce_part parts[] = {
	    {"exact cases", check_exact_cases},
	    {"mixed blocks", check_mixed_blocks},
	    {"late large", check_late_large},
	    {"spans", check_spans},
	    {"f64 paths", check_f64_paths},
	    {"f64 bounds", check_f64_bounds},
	    {"f64 top words", check_f64_top_words},
	    {"f32 narrow", check_f32_narrow},
	    {"f32 grid", check_f32_grid},
	    {"f64 late subnormal", check_f64_late_subnormal},
	};

	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
