/*
 * The CPU reduction against references written here, independently of
 * daemon/reduce.c: naive loops in wider types (exact integers, long double
 * floats within a bound), an exact sum (Shewchuk's partials) that float
 * sums and sumsq of f32/f64 must match bit for bit, a plain scalar
 * transcription of the block shape of integer sumsq, and adversarial
 * arrays with known exact answers.
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

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "daemon/reduce.h"

/* Every check counts: a change to the tests can show that none was lost. */
static unsigned long checks;
#undef CHECK_MSG
#define CHECK_MSG(cond, ...)                                                                       \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define RNG_SEED 0x9e3779b97f4a7c15ull
static uint64_t rng_state = RNG_SEED;

static uint64_t rng(void)
{
	return check_rng(&rng_state);
}

static const char *const op_names[] = {"sum", "min", "max", "sumsq", "argmin", "argmax", "moments"};
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
 * exactly in 128 bits), floats over many magnitudes and both signs (or,
 * with small, over a few: the blocks that reduce.c sums on its fast path;
 * wide ones go element by element). */
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
			float f = ldexpf((float)(r >> 40) / (1 << 24),
			                 small ? (int)(r % 9) - 4 : (int)(r % 41) - 20);
			if (r & (1ull << 30))
				f = -f;
			memcpy(p + 4 * i, &f, 4);
			break;
		}
		case GR_DT_F64: {
			double d = ldexp((double)(r >> 11) / (1ull << 53),
			                 small ? (int)(r % 17) - 8 : (int)(r % 61) - 30);
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
	if (n == 0 && op != GR_OP_SUM && op != GR_OP_SUMSQ) {
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
	/* min and max, argmin and argmax: exact; the first index of the best,
	 * the first NaN's when there is one */
	bool mn = op == GR_OP_MIN || op == GR_OP_ARGMIN;
	size_t at = 0;
	if (is_float(dt)) {
		long double best = get_ld(dt, p, 0);
		size_t nan_at = n;
		for (size_t i = 0; i < n; i++) {
			long double x = get_ld(dt, p, i);
			if (isnan(x) && nan_at == n)
				nan_at = i;
			if (i && (mn ? x < best || (x == best && signbit(x) && !signbit(best))
			             : x > best || (x == best && !signbit(x) && signbit(best)))) {
				best = x;
				at = i;
			}
		}
		if (nan_at < n) {
			CHECK_MSG(isnan(v.f), "%s %s n=%zu: %.9g, not NaN", on, dn, n, v.f);
			at = nan_at;
		} else {
			CHECK_MSG((long double)v.f == best && !signbit(v.f) == !signbit(best),
			      "%s %s n=%zu: %.9g vs %.9Lg", on, dn, n, v.f, best);
		}
	} else if (gr_dtype_is_signed(dt)) {
		int64_t best = get_i(dt, p, 0);
		for (size_t i = 1; i < n; i++) {
			int64_t x = get_i(dt, p, i);
			if (mn ? x < best : x > best) {
				best = x;
				at = i;
			}
		}
		CHECK_MSG(v.i == best, "%s %s n=%zu: %" PRId64 " vs %" PRId64, on, dn, n, v.i, best);
	} else {
		uint64_t best = get_u(dt, p, 0);
		for (size_t i = 1; i < n; i++) {
			uint64_t x = get_u(dt, p, i);
			if (mn ? x < best : x > best) {
				best = x;
				at = i;
			}
		}
		CHECK_MSG(v.u == best, "%s %s n=%zu: %" PRIu64 " vs %" PRIu64, on, dn, n, v.u, best);
	}
	if (gr_op_has_index(op))
		CHECK_MSG(part.index == at, "%s %s n=%zu: index %" PRIu64 " vs %zu", on, dn, n,
		      part.index, at);
	else
		CHECK_MSG(part.index == 0, "%s %s: an index", on, dn);
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
	double part[256];
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
		CHECK_MSG(i < 256, "partials");
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

/* The exact sum of the elements (sq: of their squares, split exactly
 * into two doubles each with fma), rounded once. Finite elements, whose
 * squares neither under- nor overflow. */
static double exact_elems(gr_dtype dt, bool sq, const unsigned char *p, size_t n)
{
	double *t = malloc((2 * n + 1) * sizeof(double));
	CHECK_MSG(t, "malloc");
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		double x = (double)get_ld(dt, p, i);
		if (sq) {
			double hi = x * x;
			t[m++] = hi;
			t[m++] = fma(x, x, -hi);
		} else {
			t[m++] = x;
		}
	}
	double r = exact_sum(t, m);
	free(t);
	return r;
}

/* The finished value of the canonical shape: the exact sum of the
 * elements for float sums, else blocks, then their partials summed
 * exactly (integer sumsq) or compared in order (min, max). */
static double canonical(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	if (is_float(dt) && (op == GR_OP_SUM || op == GR_OP_SUMSQ))
		return exact_elems(dt, op == GR_OP_SUMSQ, p, n);

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

/* Float results (and every sumsq) must follow the canonical shape exactly:
 * exact sums rounded once for floats. */
static void check_canonical(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	if (!(op == GR_OP_SUMSQ || is_float(dt)) || n == 0 || gr_op_has_index(op))
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
				for (gr_op op = 0; op < GR_OP_MOMENTS; op++) {
					double r = reduce_f(op, dt, buf, n);
					CHECK_MSG(isnan(r), "%s %s n=%zu NaN at %zu: %g", op_names[op],
					      dt_names[dt], n, where[w], r);
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

/* ---- exact float sums: adversarial arrays with known answers ---- */

static uint64_t bits_of(double x)
{
	uint64_t b;
	memcpy(&b, &x, 8);
	return b;
}

/* Same double, bit for bit (so -0 != +0, and NaN == NaN). */
#define CHECK_BITS(got, want, ...)                                                                 \
	do {                                                                                       \
		double g_ = (got), w_ = (want);                                                    \
		bool ok_ = bits_of(g_) == bits_of(w_) || (isnan(g_) && isnan(w_));                \
		if (!ok_)                                                                          \
			fprintf(stderr, "got %a, want %a: ", g_, w_);                              \
		CHECK_MSG(ok_, __VA_ARGS__);                                                       \
	} while (0)

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

static void shuffle(double *x, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rng() % i;
		double t = x[i - 1];
		x[i - 1] = x[j];
		x[j] = t;
	}
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
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){1, half_ulp, -0x1p-160}, 3, 1.0,
	           "below a tie");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){-1, -half_ulp, -0x1p-1074}, 3, -1 - one_ulp,
	           "above a negative tie");
	check_list(GR_OP_SUM, GR_DT_F64, (double[]){0x1p-1074, 0x1p-1074, -0.0}, 3,
	           0x1p-1073, "subnormals");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){1, 0x1p-52, 0x1p-53}, 3, 1 + 0x1p-51,
	           "f32 tie up");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){1, 0x1p-53}, 2, 1.0, "f32 tie down");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){0x1p100, 0x1p47, 0x1p-100, -0x1p100}, 4,
	           0x1p47 + 0x1p-100, "f32 wide");
	/* squares: (1 + 2^-26)^2 = 1 + 2^-25 + 2^-52 exactly, plus 2^-53 */
	check_list(GR_OP_SUMSQ, GR_DT_F64, (double[]){1 + 0x1p-26}, 1,
	           1 + 0x1p-25 + 0x1p-52, "square exact");
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
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){FLT_MAX, FLT_MAX, 0x1p-149}, 3,
	           2.0 * FLT_MAX, "f32 beyond FLT_MAX");
	check_list(GR_OP_SUM, GR_DT_F32, (double[]){0x1p-149, -0x1p-148, 0x1p100}, 3,
	           0x1p100, "f32 subnormals");
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
		CHECK_BITS(reduce_f(GR_OP_SUM, dt, buf, n), -0.0, "%s -0 over blocks", dt_names[dt]);
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
	          "%s %s n=%zu: exact value differs from its elements'", op_names[op], dt_names[dt], n);
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
				double x = ldexp(r & 1 ? -m : m, -(int)(rng() % (unsigned)(span + 1)));
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
				                n - i < GR_REDUCE_BLOCK ? n - i : GR_REDUCE_BLOCK, &part[b]);
			}
			for (size_t w = 1; w < nb; w *= 2)
				for (size_t b = 0; b + w < nb; b += 2 * w)
					gr_partial_combine(op, dt, &part[b], &part[b + w]);
			gr_reduce(op, dt, buf, n, &whole);
			CHECK_MSG(same_bits(&part[0], &whole), "%s %s tree", op_names[op], dt_names[dt]);
		}
	}
}

/* ---- the seam: limbs out and in, digits and specials ---- */

/* Does q export limbs (w, k, scale, flags)? A partial that holds its value
 * as a double in v.f (xflags 0: what the f32 narrow path leaves) comes back
 * from its limbs in the exact form, with other bytes; an exact partial
 * comes back byte for byte. */
static bool same_limbs(const gr_partial *q, const uint64_t *w, size_t k, int scale, unsigned flags)
{
	uint64_t w2[GR_PARTIAL_LIMBS_MAX];
	int s2;
	unsigned f2;
	size_t k2 = gr_partial_limbs(q, w2, GR_PARTIAL_LIMBS_MAX, &s2, &f2);
	return k2 == k && s2 == scale && f2 == flags && memcmp(w, w2, k * sizeof(*w)) == 0;
}

static void check_limbs(unsigned char *buf)
{
	uint64_t w[GR_PARTIAL_LIMBS_MAX];
	int scale;
	unsigned flags;
	gr_partial p, q;

	/* round trips, for values from every path */
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++)
		for (int kind = 0; kind < 6; kind++) {
			size_t n = 1 + rng() % 3000;
			fill(dt, buf, n, kind % 2);
			if (kind == 2)
				put_f(dt, buf, 0, INFINITY);
			if (kind == 3)
				put_f(dt, buf, n - 1, NAN);
			if (kind == 4)
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, -0.0);
			for (gr_op op = GR_OP_SUM; op <= GR_OP_SUMSQ; op += GR_OP_SUMSQ - GR_OP_SUM) {
				gr_reduce(op, dt, buf, n, &p);
				size_t k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
				CHECK_MSG(k <= GR_PARTIAL_LIMBS_MAX, "limbs %zu", k);
				CHECK_MSG(gr_partial_from_limbs(&q, p.count, w, k, scale, flags) == 0,
				          "from_limbs");
				CHECK_MSG(same_limbs(&q, w, k, scale, flags) &&
				              (p.xflags == 0 || same_bits(&p, &q)),
				          "%s %s kind %d: round trip", op_names[op], dt_names[dt], kind);
				CHECK_MSG(k == 0 || (w[k - 1] != 0 && w[k - 1] != UINT64_MAX) ||
				              (k > 1 && (w[k - 1] >> 63) != (w[k - 2] >> 63)),
				          "limbs not minimal");
				CHECK_MSG(k == 0 || w[0] != 0, "low limb zero");
				if (kind == 4)
					CHECK_MSG(op == GR_OP_SUMSQ ? flags == 0 : flags == GR_PARTIAL_NEGZERO,
					          "-0 flags %u", flags);
			}
		}

	/* a few f32 elements close together: their sum is a double, in v.f */
	float few[3] = {1.5f, 0.25f, -0.125f};
	gr_reduce(GR_OP_SUM, GR_DT_F32, few, 3, &p);
	size_t k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(gr_partial_from_limbs(&q, p.count, w, k, scale, flags) == 0 &&
	              same_limbs(&q, w, k, scale, flags),
	          "f32 narrow round trip");
	gr_value v;
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &q, &v) == GR_OK && v.f == 1.625,
	          "f32 narrow value");

	/* a value known exactly: 2^-1080 * 3 from three tiny squares */
	double tiny[3] = {0x1p-540, -0x1p-540, 0x1p-540};
	gr_reduce(GR_OP_SUMSQ, GR_DT_F64, tiny, 3, &p);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 1 && flags == 0, "tiny limbs %zu flags %u", k, flags);
	CHECK_MSG(scale <= -1080 && w[0] == 3ull << (-1080 - scale), "tiny value");
	/* 5e-324 squared is 2^-2148, the least bit a square can have */
	gr_reduce(GR_OP_SUMSQ, GR_DT_F64, (double[]){5e-324, -5e-324}, 2, &p);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 1 && scale <= -2148 && w[0] == 1ull << (-2148 - scale + 1), "2^-2147 limbs");
	/* every bit of every square, seen through the limbs: the least bit of
	 * the exact value, whichever path the block takes (a huge element
	 * sends it element by element; 2^499 keeps it on the fast path, where
	 * 2^-600 squared underflows unless handled) */
	static const struct {
		double big, tiny;
		int lsb;
	} sq[] = {{0x1p600, 0x1p-540, -1080}, {0x1p499, 0x1p-600, -1200},
	          {0x1p499, 5e-324, -2148}, {1.0, 0x1p-1000, -2000}, {0x1p-1000, 0x1p-1073, -2146}};
	for (size_t c = 0; c < sizeof(sq) / sizeof(sq[0]); c++)
		for (size_t n = 2; n <= 40; n += 38) {
			double *d = (double *)(void *)buf;
			for (size_t i = 0; i < n; i++)
				d[i] = i == 0 ? sq[c].big : i == 1 ? sq[c].tiny : 0.0;
			gr_reduce(GR_OP_SUMSQ, GR_DT_F64, buf, n, &p);
			k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
			int b = sq[c].lsb - scale;
			CHECK_MSG(k > 0 && b >= 0 && b < 64 && w[0] == 1ull << b,
			          "sumsq %a, %a (n %zu): least bit 2^%d, scale %d, word %016" PRIx64,
			          sq[c].big, sq[c].tiny, n, sq[c].lsb, scale, w[0]);
		}

	/* a negative value: -1 */
	gr_reduce(GR_OP_SUM, GR_DT_F64, (double[]){-1.0}, 1, &p);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k >= 1 && (int64_t)w[k - 1] < 0, "negative limbs");
	CHECK_MSG(gr_partial_limbs(&p, w, 0, &scale, &flags) == k, "size without room");

	/* hand-made limbs: -3 * 2^-10 as one word, and as three words */
	uint64_t m3[3] = {(uint64_t)-3, UINT64_MAX, UINT64_MAX};
	CHECK_MSG(gr_partial_from_limbs(&p, 2, m3, 3, -10, 0) == 0, "from -3");
	CHECK_MSG(gr_partial_from_limbs(&q, 2, m3, 1, -10, 0) == 0, "from -3 short");
	CHECK_MSG(same_bits(&p, &q), "sign extension");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == -3 * 0x1p-10,
	          "-3 * 2^-10: %g", v.f);
	/* an unaligned scale */
	uint64_t five = 5;
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &five, 1, -2173, 0) == 0, "low scale");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == 0, "rounds to 0");
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 1 && w[0] == 5ull << 3 && scale == GR_PARTIAL_EXP_MIN, "re-aligned");

	/* what from_limbs refuses */
	uint64_t one = 1, top = 1ull << 62, big[GR_PARTIAL_LIMBS_MAX + 1] = {0};
	CHECK_MSG(gr_partial_from_limbs(&p, 1, big, GR_PARTIAL_LIMBS_MAX + 1, 0, 0) == -EINVAL,
	          "too many words");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MIN - 1, 0) == -EINVAL,
	          "scale too low");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MAX + 1, 0) == -EINVAL,
	          "scale too high");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MAX, 0) == -EINVAL,
	          "2^EXP_MAX does not fit");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MAX - 1, 0) == 0,
	          "2^(EXP_MAX-1) fits");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &top, 1, GR_PARTIAL_EXP_MAX - 62, 0) == -EINVAL,
	          "2^EXP_MAX shifted does not fit");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, 0, 1u << 7) == -EINVAL, "unknown flag");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, 0, GR_PARTIAL_SEEN) == -EINVAL,
	          "SEEN is not a limbs flag");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, 0, GR_PARTIAL_NEGZERO) == -EINVAL,
	          "-0 with a value");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, NULL, 0, 0, GR_PARTIAL_NEGZERO) == -EINVAL,
	          "-0 of nothing");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, &one, 1, 0, 0) == -EINVAL, "a value of nothing");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, NULL, 0, 0, GR_PARTIAL_NAN) == -EINVAL,
	          "NaN of nothing");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, NULL, 0, 0, 0) == 0, "empty");
	CHECK_MSG(gr_partial_from_limbs(&p, 4, NULL, 0, 0, GR_PARTIAL_NEGZERO) == 0, "-0");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == 0 &&
	              signbit(v.f),
	          "-0 in");

	/* digits and specials, as a device would fold them in: the digits
	 * of 2^600 + 1 - 2^600 + 2^-2176 in any order */
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &p);
	p.count = 4;
	CHECK_MSG(gr_partial_add_scaled(&p, 1, 600) == 0, "2^600");
	CHECK_MSG(gr_partial_add_scaled(&p, 1, GR_PARTIAL_EXP_MIN) == 0, "2^-2176");
	CHECK_MSG(gr_partial_add_scaled(&p, -1, 600) == 0, "-2^600");
	CHECK_MSG(gr_partial_add_scaled(&p, INT64_MIN, -63) == 0, "-1");
	CHECK_MSG(gr_partial_add_scaled(&p, 2, 0) == 0, "+2");
	CHECK_MSG(gr_partial_add_scaled(&p, 1, GR_PARTIAL_EXP_MAX - 62) == -ERANGE, "too high");
	CHECK_MSG(gr_partial_add_scaled(&p, 1, GR_PARTIAL_EXP_MIN - 1) == -ERANGE, "too low");
	CHECK_MSG(gr_partial_add_scaled(&p, 0, 99999) == 0, "zero digit anywhere");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == 1.0,
	          "digits: %a", v.f);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 35 && scale == GR_PARTIAL_EXP_MIN && w[0] == 1 && w[34] == 1, "digit limbs");
	/* a device's result folded into a CPU partial gives the CPU's bits */
	double xs[5] = {3.5, -0x1p-30, 1e10, -1e10, 0x1p-1074};
	gr_partial cpu, dev;
	gr_reduce(GR_OP_SUM, GR_DT_F64, xs, 5, &cpu);
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &dev);
	dev.count = 5;
	for (size_t i = 0; i < 5; i++) {
		int e;
		double m = frexp(xs[i], &e);
		CHECK_MSG(gr_partial_add_scaled(&dev, (int64_t)ldexp(m, 53), e - 53) == 0, "digit");
	}
	CHECK_MSG(same_bits(&cpu, &dev), "device digits vs cpu");
	/* zeros and specials */
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &dev);
	dev.count = 2;
	gr_partial_add_special(&dev, 0);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && signbit(v.f),
	          "device -0");
	gr_partial_add_special(&dev, GR_PARTIAL_SEEN);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && !signbit(v.f),
	          "device +0");
	gr_partial_add_special(&dev, GR_PARTIAL_NINF);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && v.f == -INFINITY,
	          "device -inf");
	gr_partial_add_special(&dev, GR_PARTIAL_PINF);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && isnan(v.f),
	          "device inf - inf");

	/* a partial filled by hand, as the CUDA backend does: its v.f is the
	 * value, its words are never read, and combining folds it in */
	gr_partial hand;
	memset(&hand, 0xa5, sizeof(hand));
	hand.count = 3;
	hand.v.f = 0.25;
	hand.xflags = 0;
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F32, &hand, &v) == GR_OK && v.f == 0.25,
	          "hand finish");
	gr_reduce(GR_OP_SUM, GR_DT_F64, (double[]){0x1p-60}, 1, &p);
	gr_partial_combine(GR_OP_SUM, GR_DT_F64, &p, &hand);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK &&
	              v.f == 0.25 + 0x1p-60 && p.count == 4,
	          "hand combined: %a", v.f);
	gr_partial acc = hand;
	gr_partial_combine(GR_OP_SUM, GR_DT_F64, &acc, &hand);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &acc, &v) == GR_OK && v.f == 0.5,
	          "hand twice");
	hand.v.f = -0.0;
	acc = hand;
	gr_partial_combine(GR_OP_SUM, GR_DT_F64, &acc, &hand);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &acc, &v) == GR_OK && v.f == 0 &&
	              signbit(v.f),
	          "hand -0 twice");
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
	double got = v.kind == GR_KIND_F64 ? v.f : v.kind == GR_KIND_I64 ? (double)v.i : (double)v.u;
	bool same = isnan(want) ? isnan(got) : got == want && !signbit(got) == !signbit(want);
	CHECK_MSG(same && whole.index == at, "%s %s n=%zu %s: %g at %" PRIu64 ", want %g at %zu",
	      op_names[op], dt_names[dt], n, what, got, whole.index, want, at);
	/* pieces of odd sizes, never on block boundaries, combine the same */
	static const size_t cuts[] = {1, 7, 1000, GR_REDUCE_BLOCK - 3, GR_REDUCE_BLOCK + 11};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		gr_partial acc;
		gr_partial_identity(op, dt, &acc);
		for (size_t i = 0; i < n; i += cuts[c]) {
			gr_partial piece;
			gr_reduce(op, dt, p + i * esize(dt), n - i < cuts[c] ? n - i : cuts[c], &piece);
			gr_partial_combine(op, dt, &acc, &piece);
		}
		CHECK_MSG(same_bits(&acc, &whole), "%s %s n=%zu %s: pieces of %zu differ", op_names[op],
		      dt_names[dt], n, what, cuts[c]);
	}
}

static void check_arg(unsigned char *buf)
{
	static const size_t sizes[] = {1, 2, 5, 31, 32, 33, 1000, GR_REDUCE_BLOCK - 1,
	                               GR_REDUCE_BLOCK, GR_REDUCE_BLOCK + 1, 3 * GR_REDUCE_BLOCK + 17};
	for (gr_dtype dt = 0; dt < GR_DT_N; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			size_t where[] = {0, 1, n / 2, n - 1, n > 40 ? 37 : 0,
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
				arg_expect(GR_OP_ARGMAX, dt, buf, n, n > 1 ? 0.0 : -0.0, k == 0 && n > 1,
				           "-0 among +0");
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, -0.0);
				put_f(dt, buf, k, 0.0);
				arg_expect(GR_OP_ARGMIN, dt, buf, n, n > 1 ? -0.0 : 0.0, k == 0 && n > 1,
				           "+0 among -0");
				arg_expect(GR_OP_ARGMAX, dt, buf, n, 0.0, k, "+0 among -0");
				/* infinities are values like any other */
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, 1.5);
				put_f(dt, buf, k, -INFINITY);
				put_f(dt, buf, n - 1, INFINITY);
				if (k != n - 1) {
					arg_expect(GR_OP_ARGMIN, dt, buf, n, -INFINITY, k, "-inf");
					arg_expect(GR_OP_ARGMAX, dt, buf, n, INFINITY, n - 1, "+inf");
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

/* ---- moments ---- */

static gr_moments moments_of(gr_dtype dt, const unsigned char *p, size_t n, uint64_t ddof)
{
	gr_partial part;
	gr_moments m;
	gr_reduce(GR_OP_MOMENTS, dt, p, n, &part);
	gr_err e = gr_moments_finish(dt, &part, ddof, &m);
	CHECK_MSG(e == GR_OK, "moments %s n=%zu: finish gave %d", dt_names[dt], n, e);
	CHECK_MSG(m.count == n, "moments count");
	return m;
}

static bool same_value(gr_value a, gr_value b)
{
	return a.kind == b.kind && a.u == b.u;
}

static void moments_f64(const double *x, size_t n, uint64_t ddof, double mean, double var)
{
	gr_moments m = moments_of(GR_DT_F64, (const unsigned char *)x, n, ddof);
	CHECK_BITS(m.mean, mean, "mean of %zu, first %a", n, x[0]);
	CHECK_BITS(m.var, var, "var of %zu, first %a", n, x[0]);
}

static void check_moments(unsigned char *buf)
{
	static const size_t sizes[] = {1, 2, 7, 33, 1000, GR_REDUCE_BLOCK, GR_REDUCE_BLOCK + 1,
	                               3 * GR_REDUCE_BLOCK + 5};
	/* sum, min and max are the ops', bit for bit, and the partial does not
	 * depend on chunks, alignment or ISA (cpu-reduce-baseline) */
	for (gr_dtype dt = 0; dt < GR_DT_N; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (int small = 0; small < 2; small++) {
				size_t n = sizes[s];
				fill(dt, buf, n, small);
				gr_moments m = moments_of(dt, buf, n, 0);
				CHECK_MSG(same_value(m.sum, reduce_v(GR_OP_SUM, dt, buf, n)),
				          "moments %s n=%zu: sum", dt_names[dt], n);
				CHECK_MSG(same_value(m.min, reduce_v(GR_OP_MIN, dt, buf, n)),
				          "moments %s n=%zu: min", dt_names[dt], n);
				CHECK_MSG(same_value(m.max, reduce_v(GR_OP_MAX, dt, buf, n)),
				          "moments %s n=%zu: max", dt_names[dt], n);
				gr_moments m1 = moments_of(dt, buf, n, n - 1);
				CHECK_MSG(same_value(m1.sum, m.sum) && bits_of(m1.mean) == bits_of(m.mean),
				          "ddof changes only var");
				if (n >= GR_REDUCE_BLOCK)
					check_chunking(GR_OP_MOMENTS, dt, buf, n);
				/* one byte further on */
				gr_partial a, b;
				gr_reduce(GR_OP_MOMENTS, dt, buf, n, &a);
				memmove(buf + 1, buf, n * esize(dt));
				gr_reduce(GR_OP_MOMENTS, dt, buf + 1, n, &b);
				CHECK_MSG(same_bits(&a, &b), "moments %s n=%zu: misaligned", dt_names[dt],
				          n);
			}

	/* exact values where a double can say them */
	int32_t i4[] = {1, 2, 3, 6};
	gr_moments m = moments_of(GR_DT_I32, (unsigned char *)i4, 4, 1);
	CHECK_BITS(m.mean, 3.0, "mean");
	CHECK_BITS(m.var, 14.0 / 3.0, "var");
	CHECK_MSG(m.sum.kind == GR_KIND_I64 && m.sum.i == 12 && m.min.i == 1 && m.max.i == 6, "i32");
	CHECK_BITS(moments_of(GR_DT_I32, (unsigned char *)i4, 4, 0).var, 3.5, "var, ddof 0");
	/* i64 squares need more than 128 bits: (2^63 - 1)^2 + 2^126 + ... */
	int64_t i8[] = {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN};
	m = moments_of(GR_DT_I64, (unsigned char *)i8, 4, 0);
	CHECK_BITS(m.mean, -0.5, "i64 mean");
	CHECK_BITS(m.var, 0x1p126, "i64 var"); /* 2^126 - 2^63 + 1/4, rounded */
	CHECK_MSG(m.sum.i == -2, "i64 sum wraps");
	uint64_t u8[] = {UINT64_MAX, 0};
	m = moments_of(GR_DT_U64, (unsigned char *)u8, 2, 1);
	CHECK_BITS(m.var, 0x1p127, "u64 var"); /* (2^64 - 1)^2 / 2 */
	uint64_t u4[] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, 0}; /* squares past 2^129 */
	m = moments_of(GR_DT_U64, (unsigned char *)u4, 4, 0);
	CHECK_BITS(m.var, 0x3p124, "u64 var of 4"); /* 3 (2^64 - 1)^2 / 16 */
	CHECK_BITS(m.mean, 0x3p62, "u64 mean of 4"); /* 3 (2^64 - 1) / 4 */

	/* ties: {0, 2a}, ddof 1, has var 2a^2, which is 2 mod 4 for odd a and
	 * so halfway between doubles in [2^54, 2^55): to even, either way */
	for (int64_t a = 100000001; a <= 100000007; a += 2) {
		int64_t t2[] = {0, 2 * a};
		m = moments_of(GR_DT_I64, (unsigned char *)t2, 2, 1);
		CHECK_BITS(m.mean, (double)a, "tie mean");
		CHECK_BITS(m.var, (double)(2 * a * a), "tie var, a = %" PRId64, a);
	}
	/* and up: {0, 10^8, -(10^8 + 45)}, ddof 2, has var 20000009000001350,
	 * 6 mod 8 */
	int64_t t3[] = {0, 100000000, -100000045};
	m = moments_of(GR_DT_I64, (unsigned char *)t3, 3, 2);
	CHECK_BITS(m.var, 20000009000001352.0, "tie var, up");
	/* counts near 2^64 leave the quotient few bits below its guard bit:
	 * there the division's remainders decide (one element x, its count
	 * made n by hand: var = x^2 / n for ddof 1, just above a tie) */
	{
		int64_t x = 32160099459;
		gr_partial part;
		gr_reduce(GR_OP_MOMENTS, GR_DT_I64, &x, 1, &part);
		part.count = UINT64_C(18446744073709551519);
		CHECK_MSG(gr_moments_finish(GR_DT_I64, &part, 1, &m) == GR_OK, "huge count");
		CHECK_BITS(m.var, 0x1.c08b422d41c8bp+5, "var, the remainders' sticky bit");
		CHECK_BITS(m.mean, 0x1.df390b20cp-30, "mean of a huge count");
	}

	double d[1000];
	for (size_t i = 0; i < 1000; i++)
		d[i] = 0.1;
	moments_f64(d, 1000, 0, 0.1, 0.0); /* all equal */
	for (size_t i = 0; i < 1000; i++)
		d[i] = 1e15 + (i % 2 ? 0.5 : -0.5); /* naive variance cancels */
	moments_f64(d, 1000, 0, 1e15, 0.25);
	moments_f64(d, 1000, 1, 1e15, 250.0 / 999.0);
	double sub[] = {3 * DBL_TRUE_MIN, 0};
	moments_f64(sub, 2, 0, 2 * DBL_TRUE_MIN, 0.0); /* 1.5 units: ties to even */
	double ov[] = {-DBL_MAX, DBL_MAX};
	moments_f64(ov, 2, 0, 0.0, INFINITY);
	double big[] = {DBL_MAX, DBL_MAX};
	m = moments_of(GR_DT_F64, (unsigned char *)big, 2, 0);
	CHECK_MSG(m.sum.f == INFINITY && m.mean == DBL_MAX && m.var == 0, "sum overflows, mean not");
	double nz[] = {-0.0, -0.0};
	moments_f64(nz, 2, 0, -0.0, 0.0);
	double mz[] = {-0.0, 0.0};
	moments_f64(mz, 2, 0, 0.0, 0.0);
	double sp[] = {1, INFINITY, 2};
	moments_f64(sp, 3, 0, INFINITY, NAN);
	sp[0] = -INFINITY;
	moments_f64(sp, 3, 0, NAN, NAN);
	sp[1] = 1;
	moments_f64(sp, 3, 0, -INFINITY, NAN);
	sp[2] = NAN;
	moments_f64(sp, 3, 0, NAN, NAN);

	/* no elements, and ddof not below the count */
	for (gr_dtype dt = 0; dt < GR_DT_N; dt++) {
		gr_partial p;
		gr_moments r;
		gr_reduce(GR_OP_MOMENTS, dt, NULL, 0, &p);
		CHECK_MSG(gr_moments_finish(dt, &p, 0, &r) == GR_ERR_EMPTY, "empty moments");
		fill(dt, buf, 5, false);
		gr_reduce(GR_OP_MOMENTS, dt, buf, 5, &p);
		CHECK_MSG(gr_moments_finish(dt, &p, 5, &r) == GR_ERR_INVALID_PARAMS, "ddof 5 of 5");
		CHECK_MSG(gr_moments_finish(dt, &p, 4, &r) == GR_OK, "ddof 4 of 5");
	}
}

static void check_empty(void)
{
	for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
		for (gr_dtype dt = 0; dt < GR_DT_N; dt++) {
			gr_partial p, b;
			gr_value v;
			gr_reduce(op, dt, NULL, 0, &p);
			gr_reduce_block(op, dt, NULL, 0, &b);
			CHECK_MSG(same_bits(&p, &b), "empty block");
			gr_err e = gr_partial_finish(op, dt, &p, &v);
			if (op != GR_OP_SUM && op != GR_OP_SUMSQ) {
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
			for (gr_op op = 0; op < GR_OP_MOMENTS; op++) {
				gr_partial p;
				gr_value v;
				gr_reduce(op, dt, buf + 1, sizes[s] - 1, &p);
				gr_partial_finish(op, dt, &p, &v);
				printf("%s %s %zu %016" PRIx64 "\n", op_names[op], dt_names[dt],
				       sizes[s], v.u);
			}
		}
}

/* The parts of main(), each from the same seed, so that each sees the
 * same data wherever it runs; each says how many checks it made. */
static void run(const char *name, void (*part)(unsigned char *), unsigned char *buf)
{
	unsigned long before = checks;
	rng_state = RNG_SEED;
	part(buf);
	printf("%-16s %9lu checks\n", name, checks - before);
}

/* Every op and dtype against the naive and canonical references, at
 * every size, address and chunking. */
static void check_sweep(unsigned char *buf)
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

	for (gr_dtype dt = 0; dt < GR_DT_N; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			for (int small = 0; small < 2; small++) {
				fill(dt, buf, n, small);
				for (gr_op op = 0; op < GR_OP_MOMENTS; op++) {
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
		for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
			check_alignment(op, dt, buf, 200001);
		fill(dt, buf, 200001, true);
		for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
			check_alignment(op, dt, buf, 200001);
	}
}

static void check_empty_part(unsigned char *buf)
{
	(void)buf;
	check_empty();
}

int main(int argc, char **argv)
{
	const size_t max_n = 1000003;
	unsigned char *buf = malloc(max_n * 8 + 64);
	CHECK_MSG(buf, "malloc");

	if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
		dump(buf);
		free(buf);
		return 0;
	}

	run("sweep", check_sweep, buf);
	run("exact cases", check_exact_cases, buf);
	run("mixed blocks", check_mixed_blocks, buf);
	run("late large", check_late_large, buf);
	run("spans", check_spans, buf);
	run("limbs", check_limbs, buf);
	run("nan inf", check_nan_inf, buf);
	run("arg", check_arg, buf);
	run("int extremes", check_int_extremes, buf);
	run("empty", check_empty_part, buf);
	run("moments", check_moments, buf);
	free(buf);
	printf("ok: %lu checks\n", checks);
	return 0;
}
