/*
 * Extremes and specials: NaN, infinities and signed zeros through every
 * op (min and max order -0 below +0), and where argmin and argmax find
 * the extreme, whatever the cut into pieces.
 */
#include "tests/cpu/reduce-check.h"

/* ---- special values ---- */

static void check_nan_inf(unsigned char *buf)
{
	static const size_t sizes[] = {1, 2, 7, 31, 33, 100, 1000, GR_REDUCE_BLOCK + 5};
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			size_t where[] = {0, n / 2, n - 1, n > 40 ? 37 : 0, n > 33000 ? 32800 : 0};
			for (size_t w = 0; w < sizeof(where) / sizeof(where[0]); w++) {
				fill(dt, buf, n, false);
				put_f(dt, buf, where[w], NAN);
				for (gr_op op = 0; op < GR_OP_MOMENTS; op++) {
					double r = reduce_f(op, dt, buf, n);
					CHECK_MSG(isnan(r), "%s %s n=%zu NaN at %zu: %g",
					          op_names[op], dt_names[dt], n, where[w], r);
				}
				/* a negative NaN too, and NaN beside infinities */
				put_f(dt, buf, where[w], -NAN);
				if (n - 1 - where[w] != where[w])
					put_f(dt, buf, n - 1 - where[w], -INFINITY);
				for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
					CHECK_MSG(isnan(reduce_f(op, dt, buf, n)), "-NaN %s",
					          op_names[op]);
			}
			/* infinities */
			fill(dt, buf, n, false);
			put_f(dt, buf, n / 3, INFINITY);
			CHECK_MSG(reduce_f(GR_OP_SUM, dt, buf, n) == INFINITY, "sum +inf");
			CHECK_MSG(reduce_f(GR_OP_MAX, dt, buf, n) == INFINITY, "max +inf");
			CHECK_MSG(reduce_f(GR_OP_SUMSQ, dt, buf, n) == INFINITY, "sumsq +inf");
			put_f(dt, buf, n / 3, -INFINITY);
			CHECK_MSG(reduce_f(GR_OP_SUM, dt, buf, n) == -INFINITY, "sum -inf");
			CHECK_MSG(reduce_f(GR_OP_MIN, dt, buf, n) == -INFINITY, "min -inf");
			CHECK_MSG(reduce_f(GR_OP_SUMSQ, dt, buf, n) == INFINITY, "sumsq -inf");
			if (n > 1) {
				put_f(dt, buf, n - 1, INFINITY);
				CHECK_MSG(isnan(reduce_f(GR_OP_SUM, dt, buf, n)), "inf - inf");
				CHECK_MSG(reduce_f(GR_OP_MIN, dt, buf, n) == -INFINITY,
				          "min -inf +inf");
				CHECK_MSG(reduce_f(GR_OP_MAX, dt, buf, n) == INFINITY,
				          "max -inf +inf");
			}
			/* all infinite: min and max are the infinity */
			for (size_t i = 0; i < n; i++)
				put_f(dt, buf, i, INFINITY);
			CHECK_MSG(reduce_f(GR_OP_MIN, dt, buf, n) == INFINITY, "min of +inf");
			for (size_t i = 0; i < n; i++)
				put_f(dt, buf, i, -INFINITY);
			CHECK_MSG(reduce_f(GR_OP_MAX, dt, buf, n) == -INFINITY, "max of -inf");
		}
	}
	/* signed zeros: -0 is below +0 wherever they are, in one block or
	 * across blocks and chunks */
	static const size_t zsizes[] = {1, 2, 33, 1000, GR_REDUCE_BLOCK + 5, 3 * GR_REDUCE_BLOCK};
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		for (size_t s = 0; s < sizeof(zsizes) / sizeof(zsizes[0]); s++) {
			size_t n = zsizes[s];
			for (int kind = 0; kind < 4; kind++) {
				/* all +0; all +0 but one -0 (at a place that moves);
				 * all -0 but one +0; +0 with every third element
				 * 1 or -0 */
				size_t at = rng() % n;
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, kind == 2 ? -0.0 : 0.0);
				if (kind == 1)
					put_f(dt, buf, at, -0.0);
				if (kind == 2)
					put_f(dt, buf, at, 0.0);
				if (kind == 3)
					for (size_t i = 0; i < n; i += 3)
						put_f(dt, buf, i, i % 2 ? 1.0 : -0.0);
				if (kind == 1) {
					double g = reduce_f(GR_OP_MIN, dt, buf, n);
					CHECK_MSG(g == 0 && signbit(g),
					          "min %s n=%zu: one -0 at %zu: %g", dt_names[dt],
					          n, at, g);
				}
				if (kind == 2 && n > 1) {
					double g = reduce_f(GR_OP_MAX, dt, buf, n);
					CHECK_MSG(g == 0 && !signbit(g),
					          "max %s n=%zu: one +0 at %zu: %g", dt_names[dt],
					          n, at, g);
				}
				check_against_naive(GR_OP_MIN, dt, buf, n);
				check_against_naive(GR_OP_MAX, dt, buf, n);
				check_canonical(GR_OP_MIN, dt, buf, n);
				check_canonical(GR_OP_MAX, dt, buf, n);
				check_chunking(GR_OP_MIN, dt, buf, n);
				check_chunking(GR_OP_MAX, dt, buf, n);
			}
			/* all -0: both are -0 */
			for (size_t i = 0; i < n; i++)
				put_f(dt, buf, i, -0.0);
			CHECK_MSG(signbit(reduce_f(GR_OP_MIN, dt, buf, n)), "min of -0");
			CHECK_MSG(signbit(reduce_f(GR_OP_MAX, dt, buf, n)), "max of -0");
		}
	}

	/* f32 values whose sum overflows float but not double */
	for (size_t i = 0; i < 1000; i++)
		put_f(GR_DT_F32, buf, i, FLT_MAX);
	CHECK_MSG(reduce_f(GR_OP_SUM, GR_DT_F32, buf, 1000) == 1000.0 * FLT_MAX,
	          "f32 sum in double");
}

/* ---- argmin and argmax: where the extreme is ---- */

/* Put x (small integer or special) at element i of any dtype. */
static void put_any(gr_dtype dt, unsigned char *p, size_t i, double x)
{
	switch (dt) {
	case GR_DT_I32: {
		int32_t v = (int32_t)x;
		memcpy(p + 4 * i, &v, 4);
		break;
	}
	case GR_DT_U32: {
		uint32_t v = (uint32_t)x;
		memcpy(p + 4 * i, &v, 4);
		break;
	}
	case GR_DT_I64: {
		int64_t v = (int64_t)x;
		memcpy(p + 8 * i, &v, 8);
		break;
	}
	case GR_DT_U64: {
		uint64_t v = (uint64_t)x;
		memcpy(p + 8 * i, &v, 8);
		break;
	}
	default:
		put_f(dt, p, i, x);
	}
}

/* op's result over p[0..n): the value as double (NaN for NaN) and index,
 * and the same from partials of pieces cut at arbitrary places. */
static void arg_expect(gr_op op, gr_dtype dt, const unsigned char *p, size_t n, double want,
                       size_t at, const char *what)
{
	gr_partial whole;
	gr_reduce(op, dt, p, n, &whole);
	gr_value v = finish(op, dt, &whole);
	double got = v.kind == GR_KIND_F64   ? v.f
	             : v.kind == GR_KIND_I64 ? (double)v.i
	                                     : (double)v.u;
	bool same = isnan(want) ? isnan(got) : got == want && !signbit(got) == !signbit(want);
	CHECK_MSG(same && whole.index == at, "%s %s n=%zu %s: %g at %" PRIu64 ", want %g at %zu",
	          op_names[op], dt_names[dt], n, what, got, whole.index, want, at);
	/* pieces of odd sizes, never on block boundaries, combine the same;
	 * pieces of 1 and 7 only up to two blocks, where they already meet
	 * every tie and boundary: past that, one reduce per element or seven
	 * checks nothing new, and under ASan it was most of this test */
	static const size_t cuts[] = {1, 7, 1000, GR_REDUCE_BLOCK - 3, GR_REDUCE_BLOCK + 11};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		if (cuts[c] < 1000 && n > 2 * GR_REDUCE_BLOCK)
			continue;
		gr_partial acc;
		gr_partial_identity(op, dt, &acc);
		for (size_t i = 0; i < n; i += cuts[c]) {
			gr_partial piece;
			gr_reduce(op, dt, p + i * esize(dt), n - i < cuts[c] ? n - i : cuts[c],
			          &piece);
			gr_partial_combine(op, dt, &acc, &piece);
		}
		CHECK_MSG(same_bits(&acc, &whole), "%s %s n=%zu %s: pieces of %zu differ",
		          op_names[op], dt_names[dt], n, what, cuts[c]);
	}
}

static void check_arg(unsigned char *buf)
{
	static const size_t sizes[] = {1,
	                               2,
	                               5,
	                               31,
	                               32,
	                               33,
	                               1000,
	                               GR_REDUCE_BLOCK - 1,
	                               GR_REDUCE_BLOCK,
	                               GR_REDUCE_BLOCK + 1,
	                               3 * GR_REDUCE_BLOCK + 17};
	for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			size_t where[] = {0,
			                  1,
			                  n / 2,
			                  n - 1,
			                  n > 40 ? 37 : 0,
			                  n > GR_REDUCE_BLOCK ? GR_REDUCE_BLOCK - 1 : 0,
			                  n > GR_REDUCE_BLOCK ? GR_REDUCE_BLOCK : 0,
			                  n > 2 * GR_REDUCE_BLOCK ? 2 * GR_REDUCE_BLOCK + 5 : 0};
			/* all equal: the first */
			for (size_t i = 0; i < n; i++)
				put_any(dt, buf, i, 7);
			arg_expect(GR_OP_ARGMIN, dt, buf, n, 7, 0, "all equal");
			arg_expect(GR_OP_ARGMAX, dt, buf, n, 7, 0, "all equal");
			for (size_t w = 0; w < sizeof(where) / sizeof(where[0]); w++) {
				size_t k = where[w] < n ? where[w] : n - 1;
				/* one low, one high, and ties after them */
				for (size_t i = 0; i < n; i++)
					put_any(dt, buf, i, 7);
				put_any(dt, buf, k, 3);
				put_any(dt, buf, n - 1 - k, 9);
				if (n - 1 - k != k) {
					/* ties later on, where nothing else is */
					size_t t1 = k + 1, t2 = n - 1 - k + GR_REDUCE_BLOCK;
					if (t1 < n && t1 != n - 1 - k)
						put_any(dt, buf, t1, 3);
					if (t2 < n && t2 != k && t2 != t1)
						put_any(dt, buf, t2, 9);
					arg_expect(GR_OP_ARGMIN, dt, buf, n, 3, k, "low");
					arg_expect(GR_OP_ARGMAX, dt, buf, n, 9, n - 1 - k, "high");
				}
				if (!is_float(dt))
					continue;
				/* zeros: -0 below +0, whichever comes first */
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, 0.0);
				put_f(dt, buf, k, -0.0);
				arg_expect(GR_OP_ARGMIN, dt, buf, n, -0.0, k, "-0 among +0");
				arg_expect(GR_OP_ARGMAX, dt, buf, n, n > 1 ? 0.0 : -0.0,
				           k == 0 && n > 1, "-0 among +0");
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, -0.0);
				put_f(dt, buf, k, 0.0);
				arg_expect(GR_OP_ARGMIN, dt, buf, n, n > 1 ? -0.0 : 0.0,
				           k == 0 && n > 1, "+0 among -0");
				arg_expect(GR_OP_ARGMAX, dt, buf, n, 0.0, k, "+0 among -0");
				/* infinities are values like any other */
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, 1.5);
				put_f(dt, buf, k, -INFINITY);
				put_f(dt, buf, n - 1, INFINITY);
				if (k != n - 1) {
					arg_expect(GR_OP_ARGMIN, dt, buf, n, -INFINITY, k, "-inf");
					arg_expect(GR_OP_ARGMAX, dt, buf, n, INFINITY, n - 1,
					           "+inf");
				}
				/* the first NaN wins, for both, after or before infinities */
				put_f(dt, buf, k, NAN);
				if (n - 1 - k > k)
					put_f(dt, buf, n - 1 - k, -NAN);
				arg_expect(GR_OP_ARGMIN, dt, buf, n, NAN, k, "NaN");
				arg_expect(GR_OP_ARGMAX, dt, buf, n, NAN, k, "NaN");
			}
		}
	/* unsigned compares stay unsigned, signed ones signed */
	uint32_t hl32[40];
	for (size_t i = 0; i < 40; i++)
		hl32[i] = i == 21 ? 0x80000000u : i == 30 ? 0xffffffffu : 5;
	arg_expect(GR_OP_ARGMAX, GR_DT_U32, (void *)hl32, 40, 0xffffffffu, 30, "u32 high bit");
	arg_expect(GR_OP_ARGMIN, GR_DT_I32, (void *)hl32, 40, INT32_MIN, 21, "i32 sign");
	arg_expect(GR_OP_ARGMAX, GR_DT_I32, (void *)hl32, 40, 5, 0, "i32 sign");
}

int main(int argc, char **argv)
{
	static const reduce_part parts[] = {
	    {"nan inf", check_nan_inf},
	    {"arg", check_arg},
	};

	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
