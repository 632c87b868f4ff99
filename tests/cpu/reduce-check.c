/*
 * The references and helpers of reduce-check.h.
 */
#include "tests/cpu/reduce-check.h"

#include <string.h>

uint64_t rng(void)
{
	return check_rng(&rng_state);
}

void shuffle(double *x, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rng() % i;
		double t = x[i - 1];
		x[i - 1] = x[j];
		x[j] = t;
	}
}

const char *const op_names[] = {"sum", "min", "max", "sumsq", "argmin", "argmax", "moments"};
const char *const dt_names[] = {"i32", "i64", "u32", "u64", "f32", "f64"};

size_t esize(gr_dtype dt)
{
	return dt == GR_DT_I32 || dt == GR_DT_U32 || dt == GR_DT_F32 ? 4 : 8;
}

bool is_float(gr_dtype dt)
{
	return dt == GR_DT_F32 || dt == GR_DT_F64;
}

/* Element i of an array of dtype dt, in the widest type of its kind. */
long double get_ld(gr_dtype dt, const unsigned char *p, size_t i)
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
double get_d(gr_dtype dt, const unsigned char *p, size_t i)
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

int64_t get_i(gr_dtype dt, const unsigned char *p, size_t i)
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

uint64_t get_u(gr_dtype dt, const unsigned char *p, size_t i)
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
void fill(gr_dtype dt, unsigned char *p, size_t n, bool small)
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

bool same_bits(const gr_partial *a, const gr_partial *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

gr_value finish(gr_op op, gr_dtype dt, const gr_partial *p)
{
	gr_value v;
	gr_err e = gr_partial_finish(op, dt, p, &v);
	CHECK_MSG(e == GR_OK, "%s %s: finish gave %d", op_names[op], dt_names[dt], e);
	CHECK_MSG(v.kind == gr_result_kind(op, dt), "kind");
	return v;
}

void put_f(gr_dtype dt, unsigned char *p, size_t i, double x)
{
	if (dt == GR_DT_F32) {
		float f = (float)x;
		memcpy(p + 4 * i, &f, 4);
	} else {
		memcpy(p + 8 * i, &x, 8);
	}
}

double reduce_f(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial part;
	gr_reduce(op, dt, p, n, &part);
	return finish(op, dt, &part).f;
}

uint64_t bits_of(double x)
{
	uint64_t b;
	memcpy(&b, &x, 8);
	return b;
}

void fill_const(gr_dtype dt, unsigned char *p, size_t n, uint64_t bits)
{
	for (size_t i = 0; i < n; i++)
		memcpy(p + i * esize(dt), &bits, esize(dt));
}

gr_value reduce_v(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial part;
	gr_reduce(op, dt, p, n, &part);
	return finish(op, dt, &part);
}

/* ---- the naive references ---- */

void check_against_naive(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
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
			CHECK_MSG(v.i == (int64_t)wrap, "%s %s n=%zu: %" PRId64 " vs %" PRId64, on,
			          dn, n, v.i, (int64_t)wrap);
			if (exact >= INT64_MIN && exact <= INT64_MAX)
				CHECK_MSG(v.i == (int64_t)exact, "%s %s n=%zu: not exact", on, dn,
				          n);
			if (dt == GR_DT_I32)
				CHECK_MSG(exact >= INT64_MIN && exact <= INT64_MAX,
				          "i32 sum out of int64");
		} else {
			CHECK_MSG(v.u == wrap, "%s %s n=%zu: %" PRIu64 " vs %" PRIu64, on, dn, n,
			          v.u, wrap);
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
		CHECK_MSG(v.i == best, "%s %s n=%zu: %" PRId64 " vs %" PRId64, on, dn, n, v.i,
		          best);
	} else {
		uint64_t best = get_u(dt, p, 0);
		for (size_t i = 1; i < n; i++) {
			uint64_t x = get_u(dt, p, i);
			if (mn ? x < best : x > best) {
				best = x;
				at = i;
			}
		}
		CHECK_MSG(v.u == best, "%s %s n=%zu: %" PRIu64 " vs %" PRIu64, on, dn, n, v.u,
		          best);
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
double exact_sum(const double *x, size_t n)
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
void check_canonical(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
{
	if (!(op == GR_OP_SUMSQ || is_float(dt)) || n == 0 || gr_op_has_index(op))
		return;
	gr_partial got;
	gr_reduce(op, dt, p, n, &got);
	double g = finish(op, dt, &got).f, want = canonical(op, dt, p, n);
	uint64_t gb, wb;
	memcpy(&gb, &g, 8);
	memcpy(&wb, &want, 8);
	CHECK_MSG(gb == wb, "%s %s n=%zu: %a, canonical shape gives %a", op_names[op], dt_names[dt],
	          n, g, want);
}

/* ---- chunking: the daemon's cut on block boundaries changes nothing ---- */

void check_chunking(gr_op op, gr_dtype dt, const unsigned char *p, size_t n)
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

/* ---- running the parts ---- */

unsigned long checks;
uint64_t rng_state = RNG_SEED;

static bool named(const char *name, int nnames, char **names)
{
	for (int i = 0; i < nnames; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return nnames == 0;
}

int reduce_run(const reduce_part *parts, size_t n, int nnames, char **names)
{
	for (int i = 0; i < nnames; i++) {
		size_t j = 0;
		while (j < n && strcmp(parts[j].name, names[i]) != 0)
			j++;
		CHECK_MSG(j < n, "no part is named \"%s\"", names[i]);
	}
	unsigned char *buf = malloc(REDUCE_BUF_ELEMS * 8 + 64);
	CHECK_MSG(buf, "malloc");
	for (size_t i = 0; i < n; i++) {
		if (!named(parts[i].name, nnames, names))
			continue;
		unsigned long before = checks;
		rng_state = RNG_SEED;
		parts[i].run(buf);
		printf("%-16s %9lu checks\n", parts[i].name, checks - before);
	}
	free(buf);
	printf("ok: %lu checks\n", checks);
	return 0;
}
