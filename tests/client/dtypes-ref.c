/*
 * The narrow dtypes' exact reference (dtypes-ref.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"
#include "tests/client/dtypes-ref.h"

const gpured_dtype floats[4] = { GPURED_F16, GPURED_BF16, GPURED_F8E4M3, GPURED_F8E5M2 };
const gpured_dtype ints[4] = { GPURED_I8, GPURED_U8, GPURED_I16, GPURED_U16 };

/* ---- exact numbers ---------------------------------------------------- */


static bool big_is_neg(const big *a)
{
	return a->w[BIG_WORDS - 1] >> 63;
}

static bool big_is_zero(const big *a)
{
	for (int i = 0; i < BIG_WORDS; i++)
		if (a->w[i])
			return false;
	return true;
}

static void big_negate(big *a)
{
	unsigned carry = 1;

	for (int i = 0; i < BIG_WORDS; i++) {
		a->w[i] = ~a->w[i] + carry;
		carry = carry && a->w[i] == 0;
	}
}

/* a += b, or a -= b */
static void big_add(big *a, const big *b, bool sub)
{
	unsigned carry = sub;

	for (int i = 0; i < BIG_WORDS; i++) {
		uint64_t x = sub ? ~b->w[i] : b->w[i], s = a->w[i] + x;
		unsigned c = s < x;

		a->w[i] = s + carry;
		carry = c | (a->w[i] < s);
	}
}

/* a += (-1)^neg * m * 2^e, e >= ACC_LSB: the two words of m shifted,
 * then the carry (borrow) only as far as it goes */
void big_add_scaled(big *a, uint64_t m, int e, bool neg)
{
	unsigned sh = (unsigned)(e - ACC_LSB), k = sh / 64, b = sh % 64;
	uint64_t x[2] = { m << b, b ? m >> (64 - b) : 0 };
	unsigned carry = 0;

	CHECK(e >= ACC_LSB && k + 1 < BIG_WORDS);
	for (unsigned i = k; i < BIG_WORDS && (i < k + 2 || carry); i++) {
		uint64_t y = i < k + 2 ? x[i - k] : 0, w = a->w[i];

		if (neg) {
			a->w[i] = w - y - carry;
			carry = w < y || (w - y) < carry;
		} else {
			uint64_t s = w + y;
			a->w[i] = s + carry;
			carry = s < y || a->w[i] < s;
		}
	}
}

/* Words in use (of a magnitude). */
static int big_len(const big *a)
{
	int n = BIG_WORDS;

	while (n > 0 && a->w[n - 1] == 0)
		n--;
	return n;
}

/* r = a * b, magnitudes; the product must fit. */
static void big_mul(big *r, const big *a, const big *b)
{
	int la = big_len(a), lb = big_len(b);
	big p = { { 0 } };

	CHECK(la + lb < BIG_WORDS);
	for (int i = 0; i < la; i++) {
		unsigned __int128 carry = 0;

		for (int j = 0; j < lb; j++) {
			unsigned __int128 t = (unsigned __int128)a->w[i] * b->w[j] + p.w[i + j] + carry;
			p.w[i + j] = (uint64_t)t;
			carry = t >> 64;
		}
		p.w[i + lb] = (uint64_t)carry;
	}
	*r = p;
}

static void big_mul_u64(big *a, uint64_t m)
{
	big b = { { m } };

	big_mul(a, a, &b);
}

static void big_shl(big *a, unsigned n)
{
	unsigned k = n / 64, b = n % 64;

	CHECK(big_len(a) + (int)k + 1 < BIG_WORDS);
	for (int i = BIG_WORDS - 1; i >= 0; i--) {
		uint64_t hi = i - (int)k >= 0 ? a->w[i - k] : 0;
		uint64_t lo = i - (int)k - 1 >= 0 ? a->w[i - k - 1] : 0;
		a->w[i] = b ? hi << b | lo >> (64 - b) : hi;
	}
}

/* a /= d (a magnitude); returns the remainder */
static uint64_t big_div_u64(big *a, uint64_t d)
{
	unsigned __int128 rem = 0;

	for (int i = BIG_WORDS - 1; i >= 0; i--) {
		unsigned __int128 cur = rem << 64 | a->w[i];
		a->w[i] = (uint64_t)(cur / d);
		rem = cur % d;
	}
	return (uint64_t)rem;
}

/* The magnitude a * 2^scale, plus a nonzero tail below it when sticky,
 * rounded to the nearest double, ties to even. a must not be zero, nor
 * so small that the double is subnormal (never, here). */
static double big_round(const big *a, int scale, bool sticky)
{
	int n = big_len(a), top;
	uint64_t q = 0;

	CHECK(n > 0);
	top = 64 * (n - 1) + 63 - __builtin_clzll(a->w[n - 1]); /* index of the top bit */
	for (int i = 0; i < 53 && top - i >= 0; i++)
		q = q << 1 | (a->w[(top - i) / 64] >> ((top - i) % 64) & 1);
	if (top < 53) {
		CHECK(!sticky); /* exact */
		return ldexp((double)q, scale);
	}
	/* the round bit, and whether anything below it is set */
	int rb = top - 53;
	bool round = a->w[rb / 64] >> (rb % 64) & 1, below = sticky;
	for (int i = 0; i < rb && !below; i++)
		below = a->w[i / 64] >> (i % 64) & 1;
	if (round && (below || (q & 1)))
		q++;
	return ldexp((double)q, top - 52 + scale);
}

/* A signed big * 2^scale rounded (0 gives +0). */
double big_round_signed(const big *a, int scale)
{
	big m = *a;
	bool neg = big_is_neg(&m);

	if (big_is_zero(&m))
		return 0.0;
	if (neg)
		big_negate(&m);
	return neg ? -big_round(&m, scale, false) : big_round(&m, scale, false);
}

/* ---- the reference ---------------------------------------------------- */

bool is_float_dt(gpured_dtype dt)
{
	return test_format_named(gpured_dtype_name(dt)) != NULL;
}

static bool is_signed_dt(gpured_dtype dt)
{
	return dt == GPURED_I8 || dt == GPURED_I16;
}

unsigned dt_bits(gpured_dtype dt)
{
	return 8 * (unsigned)gpured_dtype_size(dt);
}

uint32_t raw_at(gpured_dtype dt, const void *data, size_t i)
{
	const uint8_t *p = data;

	return gpured_dtype_size(dt) == 1 ? p[i] : (uint32_t)(p[2 * i] | p[2 * i + 1] << 8);
}

void put_at(gpured_dtype dt, void *data, size_t i, uint32_t b)
{
	uint8_t *p = data;

	if (gpured_dtype_size(dt) == 1) {
		p[i] = (uint8_t)b;
	} else {
		p[2 * i] = (uint8_t)b;
		p[2 * i + 1] = (uint8_t)(b >> 8);
	}
}

/* Element i as an exact value: the floats by their format, the integers
 * as m * 2^0. */
test_value element(gpured_dtype dt, const void *data, size_t i)
{
	uint32_t b = raw_at(dt, data, i);
	test_value v = { .cls = TEST_FINITE };
	int64_t x;

	if (is_float_dt(dt))
		return test_decode(test_format_named(gpured_dtype_name(dt)), b);
	x = dt == GPURED_I8 ? (int8_t)b : dt == GPURED_I16 ? (int16_t)b : (int64_t)b;
	v.neg = x < 0;
	v.m = (uint32_t)(x < 0 ? -x : x);
	return v;
}

typedef struct ref {
	uint64_t n;
	bool nan, pinf, ninf, all_negzero;
	uint64_t first_nan;
	big s1, s2;        /* exact, * 2^ACC_LSB */
	double mn, mx;     /* exact, with -0 below +0 */
	uint64_t imn, imx; /* their first indexes */
} ref;

/* -0 below +0 */
static bool below(double a, double b)
{
	return a < b || (a == 0 && b == 0 && signbit(a) && !signbit(b));
}

static void ref_of(gpured_dtype dt, const void *data, size_t n, ref *r)
{
	bool have = false; /* a value other than NaN so far */

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->all_negzero = n > 0;
	for (size_t i = 0; i < n; i++) {
		test_value v = element(dt, data, i);
		double d = test_value_double(v);

		if (!(v.cls == TEST_FINITE && v.m == 0 && v.neg))
			r->all_negzero = false;
		if (v.cls == TEST_NAN) {
			if (!r->nan)
				r->first_nan = i;
			r->nan = true;
			continue;
		}
		if (v.cls == TEST_INF)
			*(v.neg ? &r->ninf : &r->pinf) = true;
		if (v.cls == TEST_FINITE) {
			big_add_scaled(&r->s1, v.m, v.e, v.neg);
			big_add_scaled(&r->s2, (uint64_t)v.m * v.m, 2 * v.e, false);
		}
		if (!have || below(d, r->mn)) {
			r->mn = d;
			r->imn = i;
		}
		if (!have || below(r->mx, d)) {
			r->mx = d;
			r->imx = i;
		}
		have = true;
	}
}

/* sum, exactly rounded, with the specials and the sign of zero */
static double ref_sum(const ref *r)
{
	if (r->nan || (r->pinf && r->ninf))
		return NAN;
	if (r->pinf || r->ninf)
		return r->pinf ? INFINITY : -INFINITY;
	if (big_is_zero(&r->s1))
		return r->all_negzero ? -0.0 : 0.0;
	return big_round_signed(&r->s1, ACC_LSB);
}

static double ref_sumsq(const ref *r)
{
	if (r->nan)
		return NAN;
	if (r->pinf || r->ninf)
		return INFINITY;
	return big_round_signed(&r->s2, ACC_LSB);
}

/* The exact sum of integers (they fit 64 bits here): s1 / 2^-ACC_LSB. */
static int64_t ref_isum(const ref *r)
{
	big m = r->s1;
	bool neg = big_is_neg(&m);

	if (neg)
		big_negate(&m);
	for (int i = 0; i < -ACC_LSB; i++)
		CHECK(big_div_u64(&m, 2) == 0);
	CHECK(big_len(&m) <= 1 && m.w[0] < (1ull << 62));
	return neg ? -(int64_t)m.w[0] : (int64_t)m.w[0];
}

static double ref_mean(const ref *r)
{
	double s = ref_sum(r);
	big m = r->s1;
	bool neg;
	uint64_t rem;

	if (!isfinite(s))
		return s; /* NaN, or the infinity the sum is */
	if (big_is_zero(&m))
		return s; /* +0, or -0 when every element was */
	neg = big_is_neg(&m);
	if (neg)
		big_negate(&m);
	big_shl(&m, 128);
	rem = big_div_u64(&m, r->n);
	return (neg ? -1 : 1) * big_round(&m, ACC_LSB - 128, rem != 0);
}

static double ref_var(const ref *r, uint64_t ddof)
{
	big num, sq, s1 = r->s1;
	uint64_t rem;

	if (r->nan || r->pinf || r->ninf)
		return NAN;
	/* (n S2 - S1^2) / (n (n - ddof)), at scale 2 ACC_LSB */
	num = r->s2;
	big_mul_u64(&num, r->n);
	big_shl(&num, -ACC_LSB);
	if (big_is_neg(&s1))
		big_negate(&s1);
	big_mul(&sq, &s1, &s1);
	big_add(&num, &sq, /* sub= */ true);
	CHECK(!big_is_neg(&num));
	if (big_is_zero(&num))
		return 0.0;
	big_shl(&num, 128);
	rem = big_div_u64(&num, r->n * (r->n - ddof));
	return big_round(&num, 2 * ACC_LSB - 128, rem != 0);
}


static gpured_number number_of(gpured_dtype dt, double d)
{
	gpured_number x;

	if (is_float_dt(dt))
		x.f = d;
	else if (is_signed_dt(dt))
		x.i = (int64_t)d;
	else
		x.u = (uint64_t)d;
	return x;
}

static expect expected_of(const ref *rp, gpured_op op, gpured_dtype dt, uint64_t ddof)
{
	const size_t n = rp->n;
	expect e = { .v = { .kind = gpured_result_kind(op, dt), .count = n } };
	gpured_number x = { 0 };
	ref r = *rp;

	switch (op) {
	case GPURED_OP_SUM:
		if (is_float_dt(dt))
			x.f = ref_sum(&r);
		else
			x.i = ref_isum(&r); /* the same bits for uint64 */
		break;
	case GPURED_OP_SUMSQ:
		x.f = ref_sumsq(&r);
		break;
	case GPURED_OP_MIN:
	case GPURED_OP_MAX:
	case GPURED_OP_ARGMIN:
	case GPURED_OP_ARGMAX: {
		bool is_min = op == GPURED_OP_MIN || op == GPURED_OP_ARGMIN;

		if (n == 0) {
			e.err = -ENODATA;
			return e;
		}
		x = number_of(dt, r.nan ? NAN : is_min ? r.mn : r.mx);
		if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX)
			e.v.index = r.nan ? r.first_nan : is_min ? r.imn : r.imx;
		break;
	}
	case GPURED_OP_MOMENTS:
		if (n == 0 || ddof >= n) {
			e.err = n == 0 ? -ENODATA : -EINVAL;
			return e;
		}
		e.m.count = n;
		e.m.sum = (gpured_value){ .kind = e.v.kind, .count = n };
		e.m.min = e.m.max = e.m.sum;
		if (is_float_dt(dt))
			e.m.sum.v.f = ref_sum(&r);
		else
			e.m.sum.v.i = ref_isum(&r);
		e.m.min.v.i = number_of(dt, r.nan ? NAN : r.mn).i;
		e.m.max.v.i = number_of(dt, r.nan ? NAN : r.mx).i;
		e.m.mean = ref_mean(&r);
		e.m.var = ref_var(&r, ddof);
		x.i = e.m.sum.v.i;
		break;
	}
	e.v.v.i = x.i;
	return e;
}

expect expected(gpured_op op, gpured_dtype dt, const void *data, size_t n, uint64_t ddof)
{
	ref r;

	ref_of(dt, data, n, &r);
	return expected_of(&r, op, dt, ddof);
}

/* The same bits, or both NaN. */
bool same_f(double a, double b)
{
	return memcmp(&a, &b, 8) == 0 || (isnan(a) && isnan(b));
}

static bool same_value(const gpured_value *a, const gpured_value *b)
{
	if (a->kind != b->kind)
		return false;
	return a->kind == GPURED_KIND_F64 ? same_f(a->v.f, b->v.f) : a->v.u == b->v.u;
}

/* results checked against the reference, told at the end */
unsigned long checked;

void check_value(const char *what, const expect *e, int r, const gpured_value *v,
			gpured_t *g)
{
	checked++;
	if (e->err) {
		CHECK_MSG(r == e->err, "%s: %d (%s), want %d", what, r, gpured_errmsg(g), e->err);
		return;
	}
	CHECK_MSG(r == 0, "%s: error %d: %s", what, r, gpured_errmsg(g));
	CHECK_MSG(same_value(v, &e->v) && v->count == e->v.count && v->index == e->v.index,
		  "%s: %a (%#llx) count %llu index %llu, want %a (%#llx) count %llu index %llu", what,
		  v->v.f, (unsigned long long)v->v.u, (unsigned long long)v->count,
		  (unsigned long long)v->index, e->v.v.f, (unsigned long long)e->v.v.u,
		  (unsigned long long)e->v.count, (unsigned long long)e->v.index);
}

static void check_moments(const char *what, const expect *e, int r, const gpured_moments *m,
			  gpured_t *g)
{
	checked++;
	if (e->err) {
		CHECK_MSG(r == e->err, "%s: %d (%s), want %d", what, r, gpured_errmsg(g), e->err);
		return;
	}
	CHECK_MSG(r == 0, "%s: error %d: %s", what, r, gpured_errmsg(g));
	CHECK_MSG(m->count == e->m.count && same_value(&m->sum, &e->m.sum) &&
			  same_value(&m->min, &e->m.min) && same_value(&m->max, &e->m.max),
		  "%s: count %llu sum %a min %a max %a (%#llx %#llx %#llx), want %a %a %a", what,
		  (unsigned long long)m->count, m->sum.v.f, m->min.v.f, m->max.v.f,
		  (unsigned long long)m->sum.v.u, (unsigned long long)m->min.v.u,
		  (unsigned long long)m->max.v.u, e->m.sum.v.f, e->m.min.v.f, e->m.max.v.f);
	CHECK_MSG(same_f(m->mean, e->m.mean) && same_f(m->var, e->m.var),
		  "%s: mean %a var %a, want %a %a", what, m->mean, m->var, e->m.mean, e->m.var);
}

/* Every op of dt over data, by data and (when region is not NULL) from
 * a region holding it at byte offset 1. */
void check_all(gpured_t *g, gpured_dtype dt, const void *data, size_t n, const char *label)
{
	const size_t bytes = n * gpured_dtype_size(dt);
	gpured_region_t *rg = NULL;
	char what[160];
	ref r;

	ref_of(dt, data, n, &r);
	if (n > 0) {
		CHECK_EQ(gpured_region_new(g, bytes + 1, &rg), 0);
		memcpy((uint8_t *)gpured_region_data(rg) + 1, data, bytes);
	}
	for (int op = 0; op <= GPURED_OP_ARGMAX; op++) {
		expect e = expected_of(&r, (gpured_op)op, dt, 0);
		gpured_value v;

		snprintf(what, sizeof(what), "%s %s %s n=%zu", gpured_op_name((gpured_op)op),
			 gpured_dtype_name(dt), label, n);
		check_value(what, &e, gpured_reduce(g, (gpured_op)op, dt, data, n, &v), &v, g);
		if (rg) {
			strcat(what, " (region)");
			check_value(what, &e,
				    gpured_region_reduce(g, rg, (gpured_op)op, dt, 1, n, &v), &v, g);
		}
	}
	for (uint64_t ddof = 0; ddof < 2; ddof++) {
		expect e = expected_of(&r, GPURED_OP_MOMENTS, dt, ddof);
		gpured_moments m;

		snprintf(what, sizeof(what), "moments %s %s n=%zu ddof %llu", gpured_dtype_name(dt),
			 label, n, (unsigned long long)ddof);
		check_moments(what, &e, gpured_reduce_moments(g, dt, data, n, ddof, &m), &m, g);
		if (rg)
			check_moments(what, &e,
				      gpured_region_reduce_moments(g, rg, dt, 1, n, ddof, &m), &m,
				      g);
	}
	CHECK_EQ(gpured_region_free(g, rg), 0);
}

