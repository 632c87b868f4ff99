/*
 * The CPU reduction against references written here, independently of
 * daemon/reduce.c: naive loops in wider types (exact integers, long double
 * floats within a bound), and a plain scalar transcription of the canonical
 * block shape that must match bit for bit.
 *
 *   test-reduce          run the tests
 *   test-reduce --dump   print the bits of many reductions (to compare two
 *                        builds, e.g. with and without AVX2)
 */
/* The transcription below must round x * x + acc twice, as reduce.c does. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "daemon/reduce.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	return check_rng(&rng_state);
}

static const char *const op_names[] = {"sum", "min", "max", "sumsq"};
static const char *const dt_names[] = {"i32", "i64", "u32", "u64", "f32", "f64"};

static size_t esize(gr_dtype dt)
{
	return dt == GR_DT_I32 || dt == GR_DT_U32 || dt == GR_DT_F32 ? 4 : 8;
}

static bool is_float(gr_dtype dt)
{
	return dt == GR_DT_F32 || dt == GR_DT_F64;
}

/* Element i of an array of dtype dt, in the widest type of its kind. */
static long double get_ld(gr_dtype dt, const unsigned char *p, size_t i)
{
	int32_t i32;
	int64_t i64;
	uint32_t u32;
	uint64_t u64;
	float f;
	double d;
	switch (dt) {
	case GR_DT_I32:
		memcpy(&i32, p + 4 * i, 4);
		return i32;
	case GR_DT_I64:
		memcpy(&i64, p + 8 * i, 8);
		return i64;
	case GR_DT_U32:
		memcpy(&u32, p + 4 * i, 4);
		return u32;
	case GR_DT_U64:
		memcpy(&u64, p + 8 * i, 8);
		return u64;
	case GR_DT_F32:
		memcpy(&f, p + 4 * i, 4);
		return f;
	case GR_DT_F64:
		memcpy(&d, p + 8 * i, 8);
		return d;
	default:
		abort();
	}
}

/* The element as the reduction sees it for sumsq: converted to double. */
static double get_d(gr_dtype dt, const unsigned char *p, size_t i)
{
	int64_t i64;
	uint64_t u64;
	switch (dt) {
	case GR_DT_I64:
		memcpy(&i64, p + 8 * i, 8);
		return (double)i64;
	case GR_DT_U64:
		memcpy(&u64, p + 8 * i, 8);
		return (double)u64;
	default:
		return (double)get_ld(dt, p, i);
	}
}

static int64_t get_i(gr_dtype dt, const unsigned char *p, size_t i)
{
	int32_t i32;
	int64_t i64;
	if (dt == GR_DT_I32) {
		memcpy(&i32, p + 4 * i, 4);
		return i32;
	}
	memcpy(&i64, p + 8 * i, 8);
	return i64;
}

static uint64_t get_u(gr_dtype dt, const unsigned char *p, size_t i)
{
	uint32_t u32;
	uint64_t u64;
	if (dt == GR_DT_U32) {
		memcpy(&u32, p + 4 * i, 4);
		return u32;
	}
	memcpy(&u64, p + 8 * i, 8);
	return u64;
}

/* Random data: integers over their whole range (or small, to check sums
 * exactly in 128 bits), floats over many magnitudes and both signs. */
static void fill(gr_dtype dt, unsigned char *p, size_t n, bool small)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rng();
		if (small && !is_float(dt))
			r = (r % 2001) - 1000;
		switch (dt) {
		case GR_DT_I32:
		case GR_DT_U32: {
			uint32_t v = (uint32_t)r;
			memcpy(p + 4 * i, &v, 4);
			break;
		}
		case GR_DT_I64:
		case GR_DT_U64:
			memcpy(p + 8 * i, &r, 8);
			break;
		case GR_DT_F32: {
			float f = ldexpf((float)(r >> 40) / (1 << 24), (int)(r % 41) - 20);
			if (r & (1ull << 30))
				f = -f;
			memcpy(p + 4 * i, &f, 4);
			break;
		}
		case GR_DT_F64: {
			double d = ldexp((double)(r >> 11) / (1ull << 53), (int)(r % 61) - 30);
			if (r & (1ull << 8))
				d = -d;
			memcpy(p + 8 * i, &d, 8);
			break;
		}
		default:
			abort();
		}
	}
}

static bool same_bits(const gr_partial *a, const gr_partial *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static gr_value finish(gr_op op, gr_dtype dt, const gr_partial *p)
{
	gr_value v;
	gr_err e = gr_partial_finish(op, dt, p, &v);
	CHECK_MSG(e == GR_OK, "%s %s: finish gave %d", op_names[op], dt_names[dt], e);
	CHECK_MSG(v.kind == gr_result_kind(op, dt), "kind");
	return v;
}

/* ---- the naive references ---- */

static void check_against_naive(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial part;
	gr_reduce(op, dt, p, n, &part);
	CHECK_MSG(part.count == n, "count %" PRIu64 " != %zu", part.count, n);
	if (n == 0 && (op == GR_OP_MIN || op == GR_OP_MAX)) {
		gr_value v;
		CHECK_MSG(gr_partial_finish(op, dt, &part, &v) == GR_ERR_EMPTY, "empty %s",
		      op_names[op]);
		return;
	}
	gr_value v = finish(op, dt, &part);
	const char *on = op_names[op], *dn = dt_names[dt];

	if (op == GR_OP_SUMSQ || (op == GR_OP_SUM && is_float(dt))) {
		long double ref = 0, mag = 0;
		for (size_t i = 0; i < n; i++) {
			long double x =
			    op == GR_OP_SUMSQ ? (long double)get_d(dt, p, i) : get_ld(dt, p, i);
			if (op == GR_OP_SUMSQ)
				x = x * x;
			ref += x;
			mag += fabsl(x);
		}
		/* Each addition in double errs by at most half an ulp of a
		 * partial sum bounded by mag. */
		long double tol = (long double)(n + 1) * DBL_EPSILON * mag + DBL_MIN;
		CHECK_MSG(fabsl((long double)v.f - ref) <= tol,
		      "%s %s n=%zu: %.17g vs %.17Lg (tol %Lg)", on, dn, n, v.f, ref, tol);
		return;
	}
	if (op == GR_OP_SUM) {
		/* Wrapping 64-bit sum, and the exact one in 128 bits. */
		uint64_t wrap = 0;
		__int128 exact = 0;
		for (size_t i = 0; i < n; i++) {
			if (gr_dtype_is_signed(dt)) {
				int64_t x = get_i(dt, p, i);
				wrap += (uint64_t)x;
				exact += x;
			} else {
				uint64_t x = get_u(dt, p, i);
				wrap += x;
				exact += x;
			}
		}
		if (gr_dtype_is_signed(dt)) {
			CHECK_MSG(v.i == (int64_t)wrap, "%s %s n=%zu: %" PRId64 " vs %" PRId64, on, dn,
			      n, v.i, (int64_t)wrap);
			if (exact >= INT64_MIN && exact <= INT64_MAX)
				CHECK_MSG(v.i == (int64_t)exact, "%s %s n=%zu: not exact", on, dn, n);
			if (dt == GR_DT_I32)
				CHECK_MSG(exact >= INT64_MIN && exact <= INT64_MAX,
				      "i32 sum out of int64");
		} else {
			CHECK_MSG(v.u == wrap, "%s %s n=%zu: %" PRIu64 " vs %" PRIu64, on, dn, n, v.u,
			      wrap);
		}
		return;
	}
	/* min and max: exact */
	bool mn = op == GR_OP_MIN;
	if (is_float(dt)) {
		long double best = get_ld(dt, p, 0);
		for (size_t i = 1; i < n; i++) {
			long double x = get_ld(dt, p, i);
			if (mn ? x < best || (x == best && signbit(x) && !signbit(best))
			       : x > best || (x == best && !signbit(x) && signbit(best)))
				best = x;
		}
		CHECK_MSG((long double)v.f == best && !signbit(v.f) == !signbit(best),
		      "%s %s n=%zu: %.9g vs %.9Lg", on, dn, n, v.f, best);
	} else if (gr_dtype_is_signed(dt)) {
		int64_t best = get_i(dt, p, 0);
		for (size_t i = 1; i < n; i++) {
			int64_t x = get_i(dt, p, i);
			if (mn ? x < best : x > best)
				best = x;
		}
		CHECK_MSG(v.i == best, "%s %s n=%zu: %" PRId64 " vs %" PRId64, on, dn, n, v.i, best);
	} else {
		uint64_t best = get_u(dt, p, 0);
		for (size_t i = 1; i < n; i++) {
			uint64_t x = get_u(dt, p, i);
			if (mn ? x < best : x > best)
				best = x;
		}
		CHECK_MSG(v.u == best, "%s %s n=%zu: %" PRIu64 " vs %" PRIu64, on, dn, n, v.u, best);
	}
}

/* ---- the canonical shape, transcribed plainly from reduce.c's comment ---- */

/* Whether x goes before a for min (after it for max), -0 before +0. */
static bool takes(gr_op op, double x, double a)
{
	if (op == GR_OP_MIN)
		return x < a || (x == a && signbit(x) && !signbit(a));
	return x > a || (x == a && !signbit(x) && signbit(a));
}

static void canonical_block(gr_op op, gr_dtype dt, const unsigned char *p, size_t n,
                            gr_partial *ret)
{
	const size_t L = 128 / esize(dt);
	double acc[32];
	for (size_t k = 0; k < L; k++)
		acc[k] = op == GR_OP_MIN ? INFINITY : op == GR_OP_MAX ? -INFINITY : 0.0;
	bool nan = false;
	for (size_t i = 0; i < n; i++) {
		double x = get_d(dt, p, i);
		double *a = &acc[i % L];
		switch (op) {
		case GR_OP_SUM:
			*a = *a + x;
			break;
		case GR_OP_SUMSQ:
			*a = *a + x * x;
			break;
		case GR_OP_MIN:
		case GR_OP_MAX:
			if (takes(op, x, *a))
				*a = x;
			nan |= isnan(x);
			break;
		default:
			abort();
		}
	}
	for (size_t w = L / 2; w; w /= 2)
		for (size_t k = 0; k < w; k++) {
			if (op == GR_OP_SUM || op == GR_OP_SUMSQ)
				acc[k] = acc[k] + acc[k + w];
			else if (takes(op, acc[k + w], acc[k]))
				acc[k] = acc[k + w];
		}
	ret->count = n;
	ret->v.f = nan ? NAN : acc[0];
}

/*
 * The exact sum of doubles, rounded once (Shewchuk's partials, with the
 * final correction for halfway cases), written apart from reduce.c's fixed
 * point accumulator so the two check each other. Finite inputs only.
 */
static double exact_sum(const double *x, size_t n)
{
	double part[128];
	size_t np = 0;
	for (size_t j = 0; j < n; j++) {
		double v = x[j];
		size_t i = 0;
		for (size_t k = 0; k < np; k++) {
			double y = part[k];
			if (fabs(v) < fabs(y)) {
				double t = v;
				v = y;
				y = t;
			}
			double hi = v + y;
			double lo = y - (hi - v);
			if (lo != 0)
				part[i++] = lo;
			v = hi;
		}
		CHECK_MSG(i < 128, "partials");
		part[i] = v;
		np = i + 1;
	}
	if (np == 0)
		return 0.0;
	size_t k = np - 1;
	double hi = part[k], lo = 0;
	while (k > 0) {
		double v = hi, y = part[--k];
		hi = v + y;
		lo = y - (hi - v);
		if (lo != 0)
			break;
	}
	if (k > 0 && ((lo < 0 && part[k - 1] < 0) || (lo > 0 && part[k - 1] > 0))) {
		double y = lo * 2, v = hi + y;
		if (y == v - hi)
			hi = v;
	}
	return hi + 0.0; /* an exact zero is +0 */
}

/* The finished value of the canonical shape: blocks, then their partials
 * summed exactly (sums) or compared in order (min, max). */
static double canonical(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	size_t nb = (n + GR_REDUCE_BLOCK - 1) / GR_REDUCE_BLOCK;
	double *bs = malloc((nb + 1) * sizeof(double));
	CHECK_MSG(bs, "malloc");
	for (size_t b = 0; b < nb; b++) {
		gr_partial part;
		size_t i = b * GR_REDUCE_BLOCK;
		size_t m = n - i < GR_REDUCE_BLOCK ? n - i : GR_REDUCE_BLOCK;
		canonical_block(op, dt, p + i * esize(dt), m, &part);
		bs[b] = part.v.f;
	}
	double r = 0;
	if (op == GR_OP_SUM || op == GR_OP_SUMSQ) {
		r = exact_sum(bs, nb);
	} else {
		CHECK_MSG(nb > 0, "empty");
		r = bs[0];
		for (size_t b = 1; b < nb; b++) {
			if (isnan(r) || isnan(bs[b]))
				r = NAN;
			else if (takes(op, bs[b], r))
				r = bs[b];
		}
	}
	free(bs);
	return r;
}

/* Float results (and every sumsq) must follow the canonical shape exactly. */
static void check_canonical(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	if (!(op == GR_OP_SUMSQ || is_float(dt)) || n == 0)
		return;
	gr_partial got;
	gr_reduce(op, dt, p, n, &got);
	double g = finish(op, dt, &got).f, want = canonical(op, dt, p, n);
	uint64_t gb, wb;
	memcpy(&gb, &g, 8);
	memcpy(&wb, &want, 8);
	CHECK_MSG(gb == wb, "%s %s n=%zu: %a, canonical shape gives %a", op_names[op], dt_names[dt], n,
	      g, want);
}

/* ---- the same bits at every address ---- */

static void check_alignment(gr_op op, gr_dtype dt, const unsigned char *src, size_t n)
{
	size_t bytes = n * esize(dt);
	unsigned char *buf = malloc(bytes + 64);
	CHECK_MSG(buf, "malloc");
	/* buf from malloc is 16-aligned; start from a 64-aligned base */
	unsigned char *base = buf + (64 - ((uintptr_t)buf & 63)) % 64;
	gr_partial ref;
	memcpy(base, src, bytes);
	gr_reduce(op, dt, base, n, &ref);
	for (size_t off = 1; off < 16; off++) {
		memmove(base + off, base + off - 1, bytes);
		gr_partial p;
		gr_reduce(op, dt, base + off, n, &p);
		CHECK_MSG(same_bits(&p, &ref), "%s %s n=%zu offset %zu: %016" PRIx64 " vs %016" PRIx64,
		      op_names[op], dt_names[dt], n, off, p.v.u, ref.v.u);
	}
	free(buf);
}

/* ---- chunking: the daemon's cut on block boundaries changes nothing ---- */

static void check_chunking(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial whole;
	gr_reduce(op, dt, p, n, &whole);
	for (size_t k = 1; k <= 4; k++) {
		size_t chunk = k * GR_REDUCE_BLOCK;
		gr_partial acc;
		gr_partial_identity(op, dt, &acc);
		for (size_t i = 0; i < n; i += chunk) {
			gr_partial c;
			gr_reduce(op, dt, p + i * esize(dt), n - i < chunk ? n - i : chunk, &c);
			gr_partial_combine(op, dt, &acc, &c);
		}
		CHECK_MSG(same_bits(&acc, &whole), "%s %s n=%zu chunks of %zu blocks", op_names[op],
		      dt_names[dt], n, k);
	}
	/* and gr_reduce_block is gr_reduce on one block */
	if (n <= GR_REDUCE_BLOCK) {
		gr_partial b, acc;
		gr_reduce_block(op, dt, p, n, &b);
		gr_partial_identity(op, dt, &acc);
		gr_partial_combine(op, dt, &acc, &b);
		CHECK_MSG(same_bits(&acc, &whole), "block vs reduce");
	}
}

/* ---- special values ---- */

static void put_f(gr_dtype dt, unsigned char *p, size_t i, double x)
{
	if (dt == GR_DT_F32) {
		float f = (float)x;
		memcpy(p + 4 * i, &f, 4);
	} else {
		memcpy(p + 8 * i, &x, 8);
	}
}

static double reduce_f(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial part;
	gr_reduce(op, dt, p, n, &part);
	return finish(op, dt, &part).f;
}

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
				for (gr_op op = 0; op < GR_OP_N; op++) {
					double r = reduce_f(op, dt, buf, n);
					CHECK_MSG(isnan(r), "%s %s n=%zu NaN at %zu: %g", op_names[op],
					      dt_names[dt], n, where[w], r);
				}
				/* a negative NaN too, and NaN beside infinities */
				put_f(dt, buf, where[w], -NAN);
				if (n - 1 - where[w] != where[w])
					put_f(dt, buf, n - 1 - where[w], -INFINITY);
				for (gr_op op = 0; op < GR_OP_N; op++)
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
				CHECK_MSG(reduce_f(GR_OP_MAX, dt, buf, n) == INFINITY, "max -inf +inf");
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
					CHECK_MSG(g == 0 && signbit(g), "min %s n=%zu: one -0 at %zu: %g",
					      dt_names[dt], n, at, g);
				}
				if (kind == 2 && n > 1) {
					double g = reduce_f(GR_OP_MAX, dt, buf, n);
					CHECK_MSG(g == 0 && !signbit(g), "max %s n=%zu: one +0 at %zu: %g",
					      dt_names[dt], n, at, g);
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
	CHECK_MSG(reduce_f(GR_OP_SUM, GR_DT_F32, buf, 1000) == 1000.0 * FLT_MAX, "f32 sum in double");
}

static void fill_const(gr_dtype dt, unsigned char *p, size_t n, uint64_t bits)
{
	for (size_t i = 0; i < n; i++)
		memcpy(p + i * esize(dt), &bits, esize(dt));
}

static gr_value reduce_v(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial part;
	gr_reduce(op, dt, p, n, &part);
	return finish(op, dt, &part);
}

static void check_int_extremes(unsigned char *buf)
{
	const size_t n = 100003;
	fill_const(GR_DT_I32, buf, n, (uint32_t)INT32_MIN);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I32, buf, n).i == (int64_t)n * INT32_MIN, "i32 min sum");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_I32, buf, n).i == INT32_MIN, "i32 min");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_I32, buf, n).f > 0, "i32 sumsq");
	fill_const(GR_DT_I32, buf, n, INT32_MAX);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I32, buf, n).i == (int64_t)n * INT32_MAX, "i32 max sum");
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_I32, buf, n).i == INT32_MAX, "i32 max");
	fill_const(GR_DT_U32, buf, n, UINT32_MAX);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_U32, buf, n).u == (uint64_t)n * UINT32_MAX, "u32 sum");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_U32, buf, 1).f == (double)UINT32_MAX * UINT32_MAX,
	      "u32 sq");

	/* i64 sums wrap modulo 2^64 */
	int64_t two[2] = {INT64_MAX, 1};
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I64, (void *)two, 2).i == INT64_MIN, "i64 wrap");
	fill_const(GR_DT_I64, buf, n, (uint64_t)INT64_MIN);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I64, buf, n).i == (int64_t)((uint64_t)(n & 1) << 63),
	      "i64 wrap n");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_I64, buf, n).i == INT64_MIN, "i64 min");
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_I64, buf, n).i == INT64_MIN, "i64 max");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_I64, buf, 1).f == 0x1p126, "i64 sumsq");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_I64, buf, 3).f == 3 * 0x1p126, "i64 sumsq 3");
	memcpy(buf + 8 * 777, &(int64_t){INT64_MAX}, 8);
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_I64, buf, n).i == INT64_MAX, "i64 max");
	fill_const(GR_DT_U64, buf, n, UINT64_MAX);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_U64, buf, n).u == (uint64_t)0 - n, "u64 wrap");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U64, buf, n).u == UINT64_MAX, "u64 min");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_U64, buf, 1).f == 0x1p128, "u64 sumsq");
	memcpy(buf + 8 * (n - 1), &(uint64_t){0}, 8);
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U64, buf, n).u == 0, "u64 min 0");
	/* unsigned compares are unsigned */
	uint64_t hl[3] = {1, 1ull << 63, 2};
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_U64, (void *)hl, 3).u == 1ull << 63, "u64 max high bit");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U64, (void *)hl, 3).u == 1, "u64 min high bit");
	uint32_t hl32[35];
	for (size_t i = 0; i < 35; i++)
		hl32[i] = i == 20 ? 0x80000000u : 5;
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_U32, (void *)hl32, 35).u == 0x80000000u,
	      "u32 max high bit");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U32, (void *)hl32, 35).u == 5, "u32 min high bit");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_I32, (void *)hl32, 35).i == INT32_MIN, "i32 min sign");
}

static void check_empty(void)
{
	for (gr_op op = 0; op < GR_OP_N; op++)
		for (gr_dtype dt = 0; dt < GR_DT_N; dt++) {
			gr_partial p, b;
			gr_value v;
			gr_reduce(op, dt, NULL, 0, &p);
			gr_reduce_block(op, dt, NULL, 0, &b);
			CHECK_MSG(same_bits(&p, &b), "empty block");
			gr_err e = gr_partial_finish(op, dt, &p, &v);
			if (op == GR_OP_MIN || op == GR_OP_MAX) {
				CHECK_MSG(e == GR_ERR_EMPTY, "%s %s empty: %d", op_names[op],
				      dt_names[dt], e);
			} else {
				CHECK_MSG(e == GR_OK && v.kind == gr_result_kind(op, dt) && v.u == 0,
				      "%s %s empty", op_names[op], dt_names[dt]);
			}
			/* the identity is neutral on both sides */
			gr_partial one, acc;
			unsigned char x[8] = {3};
			gr_reduce(op, dt, x, 1, &one);
			gr_partial_identity(op, dt, &acc);
			gr_partial_combine(op, dt, &acc, &one);
			CHECK_MSG(same_bits(&acc, &one), "identity left");
			gr_partial_identity(op, dt, &acc);
			gr_partial_combine(op, dt, &one, &acc);
			CHECK_MSG(same_bits(&acc, &p), "identity is empty");
			gr_reduce(op, dt, x, 1, &acc);
			CHECK_MSG(same_bits(&acc, &one), "identity right");
		}
}

static void dump(unsigned char *buf)
{
	static const size_t sizes[] = {1, 7, 33, 1000, GR_REDUCE_BLOCK + 1, 100003};
	for (gr_dtype dt = 0; dt < GR_DT_N; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			fill(dt, buf, sizes[s], false);
			for (gr_op op = 0; op < GR_OP_N; op++) {
				gr_partial p;
				gr_value v;
				gr_reduce(op, dt, buf + 1, sizes[s] - 1, &p);
				gr_partial_finish(op, dt, &p, &v);
				printf("%s %s %zu %016" PRIx64 "\n", op_names[op], dt_names[dt],
				       sizes[s], v.u);
			}
		}
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {0,
	                               1,
	                               2,
	                               7,
	                               31,
	                               33,
	                               1000,
	                               GR_REDUCE_BLOCK - 1,
	                               GR_REDUCE_BLOCK,
	                               GR_REDUCE_BLOCK + 1,
	                               1000003};
	const size_t max_n = 1000003;
	unsigned char *buf = malloc(max_n * 8 + 64);
	CHECK_MSG(buf, "malloc");

	if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
		dump(buf);
		free(buf);
		return 0;
	}

	for (gr_dtype dt = 0; dt < GR_DT_N; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			for (int small = 0; small < 2; small++) {
				if (small && is_float(dt))
					continue;
				fill(dt, buf, n, small);
				for (gr_op op = 0; op < GR_OP_N; op++) {
					check_against_naive(op, dt, buf, n);
					check_canonical(op, dt, buf, n);
					if (!small && n < max_n)
						check_alignment(op, dt, buf, n);
					if (!small && n >= GR_REDUCE_BLOCK)
						check_chunking(op, dt, buf, n);
				}
			}
		}
	/* alignment over many blocks, once per dtype */
	for (gr_dtype dt = 0; dt < GR_DT_N; dt++) {
		fill(dt, buf, 200001, false);
		for (gr_op op = 0; op < GR_OP_N; op++)
			check_alignment(op, dt, buf, 200001);
	}
	check_nan_inf(buf);
	check_int_extremes(buf);
	check_empty();
	free(buf);
	printf("ok\n");
	return 0;
}
