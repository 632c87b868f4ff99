/*
 * Exact float sums and sums of squares: adversarial arrays with known
 * answers (cancellation to zero and to ties, subnormals, overflow,
 * specials, signed zeros), blocks whose exponents span just less and just
 * more than the fast paths take, a large element after a small start,
 * and blocks of every kind in one array, each bit for bit. The f64 sums
 * against an exact reference of their own are reduce-exact-f64.c's, the
 * f32 sums of small arrays reduce-exact-f32.c's (reduce-exact.h).
 */
#include "tests/cpu/reduce-check.h"
#include "tests/cpu/reduce-exact.h"

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
void check_exact_bits(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
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
