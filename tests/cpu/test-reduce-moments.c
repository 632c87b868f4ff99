/*
 * moments: its sum, min and max are the ops', its partial follows no cut,
 * address or ISA, and mean and variance are exact values rounded once
 * (ties, huge counts, specials). f32 and f64 blocks that moments' one
 * pass takes (math/xsum-f32.c, xsum-f64-moments.c), and those at the edges
 * of what it takes, against the sum, sumsq, min and max kernels bit for
 * bit and against references written here.
 */
#include "math/xsum.h"
#include "tests/cpu/reduce-check.h"

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
	static const size_t sizes[] = {
	    1, 2, 7, 33, 1000, GR_REDUCE_BLOCK, GR_REDUCE_BLOCK + 1, 3 * GR_REDUCE_BLOCK + 5};
	/* sum, min and max are the ops', bit for bit, and the partial does not
	 * depend on chunks, alignment or ISA (cpu-reduce-baseline) */
	for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++)
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
				CHECK_MSG(same_value(m1.sum, m.sum) &&
				              bits_of(m1.mean) == bits_of(m.mean),
				          "ddof changes only var");
				if (n >= GR_REDUCE_BLOCK)
					check_chunking(GR_OP_MOMENTS, dt, buf, n);
				/* one byte further on */
				gr_partial a, b;
				gr_reduce(GR_OP_MOMENTS, dt, buf, n, &a);
				memmove(buf + 1, buf, n * esize(dt));
				gr_reduce(GR_OP_MOMENTS, dt, buf + 1, n, &b);
				CHECK_MSG(same_bits(&a, &b), "moments %s n=%zu: misaligned",
				          dt_names[dt], n);
			}

	/* exact values where a double can say them */
	int32_t i4[] = {1, 2, 3, 6};
	gr_moments m = moments_of(GR_DT_I32, (unsigned char *)i4, 4, 1);
	CHECK_BITS(m.mean, 3.0, "mean");
	CHECK_BITS(m.var, 14.0 / 3.0, "var");
	CHECK_MSG(m.sum.kind == GR_KIND_I64 && m.sum.i == 12 && m.min.i == 1 && m.max.i == 6,
	          "i32");
	CHECK_BITS(moments_of(GR_DT_I32, (unsigned char *)i4, 4, 0).var, 3.5, "var, ddof 0");
	/* i64 squares need more than 128 bits: (2^63 - 1)^2 + 2^126 + ... */
	int64_t i8[] = {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN};
	m = moments_of(GR_DT_I64, (unsigned char *)i8, 4, 0);
	CHECK_BITS(m.mean, -0.5, "i64 mean");
	CHECK_BITS(m.var, 0x1p126, "i64 var"); /* 2^126 - 2^63 + 1/4, rounded */
	CHECK_MSG(m.sum.i == -2, "i64 sum wraps");
	uint64_t u8[] = {UINT64_MAX, 0};
	m = moments_of(GR_DT_U64, (unsigned char *)u8, 2, 1);
	CHECK_BITS(m.var, 0x1p127, "u64 var");                   /* (2^64 - 1)^2 / 2 */
	uint64_t u4[] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, 0}; /* squares past 2^129 */
	m = moments_of(GR_DT_U64, (unsigned char *)u4, 4, 0);
	CHECK_BITS(m.var, 0x3p124, "u64 var of 4");  /* 3 (2^64 - 1)^2 / 16 */
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
	CHECK_MSG(m.sum.f == INFINITY && m.mean == DBL_MAX && m.var == 0,
	          "sum overflows, mean not");
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
	for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++) {
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

/* ---- float moments in one pass ---- */

/* The words of an exact value, as gr_partial_limbs() gives them. */
typedef struct limbs {
	size_t n;
	int scale;
	unsigned flags;
	uint64_t w[GR_PARTIAL_LIMBS_MAX];
} limbs;

static bool same_limbs(const limbs *a, const limbs *b)
{
	return a->n == b->n && a->scale == b->scale && a->flags == b->flags &&
	       memcmp(a->w, b->w, a->n * sizeof(a->w[0])) == 0;
}

/* The least (is_min) or largest of x[0..n), NaN when one is, a zero's
 * sign as min's and max's rules give it: -0 when any element is -0 (min),
 * when every element is (max). */
static double extreme_ref(const double *x, size_t n, bool is_min)
{
	double r = x[0];
	bool any = false, every = true;
	for (size_t i = 0; i < n; i++) {
		if (isnan(x[i]))
			return NAN;
		r = is_min ? fmin(r, x[i]) : fmax(r, x[i]);
		any |= signbit(x[i]) != 0;
		every &= signbit(x[i]) != 0;
	}
	return r != 0 ? r : (is_min ? any : every) ? -0.0 : 0.0;
}

/*
 * moments of the n elements of dt at p: its exact sum and sum of squares
 * are sum's and sumsq's, word for word, its lo and hi min's and max's, bit
 * for bit; and, where every element is finite, and its square neither
 * under- nor overflows, both sums rounded are the exact sums written here
 * (squares split with fma) rounded, and lo and hi the extremes found here.
 */
static void fused_check(gr_dtype dt, const unsigned char *p, size_t n, const char *what)
{
	gr_partial m, s, q, lo, hi, s2;
	limbs a, b;
	gr_reduce(GR_OP_MOMENTS, dt, p, n, &m);
	gr_reduce(GR_OP_SUM, dt, p, n, &s);
	gr_reduce(GR_OP_SUMSQ, dt, p, n, &q);
	gr_reduce(GR_OP_MIN, dt, p, n, &lo);
	gr_reduce(GR_OP_MAX, dt, p, n, &hi);
	a.n = gr_partial_limbs(&m, a.w, GR_PARTIAL_LIMBS_MAX, &a.scale, &a.flags);
	b.n = gr_partial_limbs(&s, b.w, GR_PARTIAL_LIMBS_MAX, &b.scale, &b.flags);
	CHECK_MSG(same_limbs(&a, &b), "%s %s, n=%zu: moments' sum is not sum's", dt_names[dt], what,
	          n);
	a.n = xsum_acc_limbs(m.x2acc, m.x2flags, n, a.w, GR_PARTIAL_LIMBS_MAX, &a.scale, &a.flags);
	b.n = gr_partial_limbs(&q, b.w, GR_PARTIAL_LIMBS_MAX, &b.scale, &b.flags);
	CHECK_MSG(same_limbs(&a, &b), "%s %s, n=%zu: moments' squares are not sumsq's",
	          dt_names[dt], what, n);
	CHECK_MSG(m.lo.u == lo.v.u && m.hi.u == hi.v.u, "%s %s, n=%zu: min %a/%a, max %a/%a",
	          dt_names[dt], what, n, m.lo.f, lo.v.f, m.hi.f, hi.v.f);

	double *x = malloc(3 * n * sizeof(double)), *t = x + n;
	CHECK_MSG(x, "malloc");
	bool plain = true, negzero = true;
	for (size_t i = 0; i < n; i++) {
		x[i] = get_d(dt, p, i);
		double ax = fabs(x[i]);
		negzero &= ax == 0 && signbit(x[i]);
		plain &= isfinite(x[i]) && (ax == 0 || (ax >= 0x1p-480 && ax <= 0x1p500));
		t[2 * i] = x[i] * x[i];
		t[2 * i + 1] = fma(x[i], x[i], -t[2 * i]);
	}
	CHECK_BITS(m.lo.f, extreme_ref(x, n, true), "%s %s, n=%zu: min", dt_names[dt], what, n);
	CHECK_BITS(m.hi.f, extreme_ref(x, n, false), "%s %s, n=%zu: max", dt_names[dt], what, n);
	if (plain) {
		/* (an exact zero is -0 when every element is) */
		CHECK_BITS(finish(GR_OP_MOMENTS, dt, &m).f, negzero ? -0.0 : exact_sum(x, n),
		           "%s %s, n=%zu: sum", dt_names[dt], what, n);
		CHECK_MSG(gr_partial_from_limbs(&s2, n, a.w, a.n, a.scale, a.flags) == 0, "limbs");
		CHECK_BITS(finish(GR_OP_SUMSQ, GR_DT_F64, &s2).f, exact_sum(t, 2 * n),
		           "%s %s, n=%zu: sum of squares", dt_names[dt], what, n);
	}
	free(x);
}

/* Whether the one pass takes the block of n elements of dt at p (n <=
 * GR_REDUCE_BLOCK), on the kernels that gr_reduce() uses; what it makes
 * is checked above. */
static bool fused_takes(gr_dtype dt, const unsigned char *p, size_t n)
{
	gr_partial m;
	gr_partial_identity(GR_OP_MOMENTS, dt, &m);
#ifdef GR_HAVE_AVX2
	if (gr_reduce_isa() >= GR_ISA_AVX2)
		return dt == GR_DT_F64 ? xsum_moments_f64_avx2(p, n, &m)
		                       : xsum_moments_f32_avx2(p, n, &m);
#endif
	return dt == GR_DT_F64 ? xsum_moments_f64_base(p, n, &m) : xsum_moments_f32_base(p, n, &m);
}

/* x[0..n) Gaussian-like (a sum of uniforms, centred), times 2^e. */
static void fill_normal(double *x, size_t n, int e)
{
	for (size_t i = 0; i < n; i++) {
		double u = 0;
		for (int k = 0; k < 4; k++)
			u += (double)(rng() >> 11) * 0x1p-53;
		x[i] = ldexp(u - 2.0, e);
	}
}

/* x[0..n) as elements of dt at p (rounded to float for f32), then checked. */
static void fused_put(gr_dtype dt, unsigned char *p, const double *x, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		put_f(dt, p, i, x[i]);
	fused_check(dt, p, n, what);
}

static void check_fused_dt(gr_dtype dt, unsigned char *buf, double *x)
{
	const bool f64 = dt == GR_DT_F64;
	static const size_t sizes[] = {1,
	                               15,
	                               16,
	                               17,
	                               100,
	                               1023,
	                               1024,
	                               5000,
	                               GR_REDUCE_BLOCK - 1,
	                               GR_REDUCE_BLOCK,
	                               GR_REDUCE_BLOCK + 17};
	const size_t B = GR_REDUCE_BLOCK;

	/* ordinary data at every size */
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		fill_normal(x, sizes[k], 0);
		fused_put(dt, buf, x, sizes[k], "normal");
		CHECK_MSG(fused_takes(dt, buf, sizes[k] < B ? sizes[k] : B),
		          "%s normal data, one pass", dt_names[dt]);
	}
	/* scaled to the ends of the range the pass takes (f64: largest
	 * magnitude 2^M, -400 <= M <= 500; f32: its subnormals) and past;
	 * near the ends, whether it takes a block depends on its guess */
	enum { NO, YES, EITHER };
	static const struct {
		int e, takes;
	} s64[] = {{-440, NO},    {-404, EITHER}, {-403, EITHER}, {-402, EITHER},
	           {-398, YES},   {300, YES},     {495, YES},     {497, EITHER},
	           {498, EITHER}, {499, EITHER},  {505, NO}},
	  s32[] = {{-150, EITHER}, {-140, EITHER}, {-128, EITHER}, {-120, YES},
	           {100, YES},     {124, YES},     {125, EITHER}};
	const size_t ns = f64 ? sizeof(s64) / sizeof(s64[0]) : sizeof(s32) / sizeof(s32[0]);
	for (size_t k = 0; k < ns; k++) {
		const int e = f64 ? s64[k].e : s32[k].e, takes = f64 ? s64[k].takes : s32[k].takes;
		/* |x| < 4 2^e, and one element at 2^(e + 1) */
		fill_normal(x, 1000, e);
		x[500] = ldexp(1.75, e + 1);
		fused_put(dt, buf, x, 1000, "scaled");
		const bool t = fused_takes(dt, buf, 1000);
		CHECK_MSG(takes == EITHER || t == (takes == YES), "%s scale 2^%d", dt_names[dt], e);
	}

	/* spans of exponents: those one pass takes (f64: at most 4 levels,
	 * so 1 and 2^-d, d up to about 75; f32: 1 and 2 levels for the sum,
	 * 2 and 3 for squares) and past them; the small one early, late
	 * (past the sample the grid is guessed from) and in the tail */
	static const int spans[] = {10, 12, 13, 14, 24, 25, 26, 27, 38, 39, 40,
	                            49, 50, 51, 52, 53, 74, 75, 76, 77, 100};
	static const size_t at[] = {3, B / 2, B - 5};
	for (size_t k = 0; k < sizeof(spans) / sizeof(spans[0]); k++)
		for (size_t j = 0; j < sizeof(at) / sizeof(at[0]); j++) {
			fill_normal(x, B, 0);
			x[at[j]] = -ldexp(1.0 + 0x1p-20 * (double)k, -spans[k]);
			fused_put(dt, buf, x, B, "span");
			/* and the large one late: the guess was too low */
			fill_normal(x, B, -spans[k]);
			x[at[j]] = 3.25;
			fused_put(dt, buf, x, B, "late large");
		}
	if (f64) {
		/* the least element the pass takes: 2^-475 beside 2^-400 */
		fill_normal(x, 100, -402);
		x[7] = 0x1.8p-400;
		x[70] = 0x1p-475;
		fused_put(dt, buf, x, 100, "least");
		x[70] = 0x1p-477;
		fused_put(dt, buf, x, 100, "least");
	}

	/* specials, subnormals (which the AVX2 f64 pass's bounds see through
	 * the denormal flag only), infinities, NaN, the largest: early,
	 * late, in the tail */
	static const double odd64[] = {NAN,        INFINITY, -INFINITY, DBL_TRUE_MIN,
	                               -0x1p-1030, DBL_MIN,  DBL_MAX,   0x1p501},
	                    odd32[] = {NAN,       INFINITY, -INFINITY, 0x1p-149,
	                               -0x1p-130, 0x1p-126, FLT_MAX};
	const size_t no = f64 ? sizeof(odd64) / sizeof(odd64[0]) : sizeof(odd32) / sizeof(odd32[0]);
	for (size_t k = 0; k < no; k++)
		for (size_t j = 0; j < sizeof(at) / sizeof(at[0]); j++) {
			const double v = f64 ? odd64[k] : odd32[k];
			fill_normal(x, B, 0);
			x[at[j]] = v;
			fused_put(dt, buf, x, B, "special");
			CHECK_MSG(!fused_takes(dt, buf, B), "%s special %a: four passes",
			          dt_names[dt], v);
		}

	/* zeros: min's and max's sign rules, a zero only in the tail, only
	 * in the groups, all zeros of either sign */
	static const struct {
		double a, b;
	} zs[] = {{-0.0, 0.0}, {0.0, -0.0},  {-0.0, -0.0}, {0.0, 0.0}, {-0.0, 1.0},
	          {0.0, 1.0},  {-0.0, -1.0}, {0.0, -1.0},  {1.0, 2.0}};
	for (size_t k = 0; k < sizeof(zs) / sizeof(zs[0]); k++)
		for (size_t n = 17; n <= 35; n += 18) {
			for (size_t i = 0; i < n; i++)
				x[i] = i % 3 ? zs[k].a : zs[k].b;
			fused_put(dt, buf, x, n, "zeros");
			x[n - 1] = 0.0;
			fused_put(dt, buf, x, n, "zeros, +0 in the tail");
			x[n - 1] = -0.0;
			fused_put(dt, buf, x, n, "zeros, -0 in the tail");
		}
	/* the extremes in the tail alone, and in the groups alone */
	fill_normal(x, B + 3, 0);
	x[B + 1] = -9.5;
	x[B + 2] = 9.5;
	fused_put(dt, buf, x, B + 3, "extremes in the tail");
	x[1] = -11.0;
	x[B - 1] = 11.0;
	fused_put(dt, buf, x, B + 3, "extremes in the groups");

	/* cancellation: x and -x, and c +- 0.5 (c = 1e15, f32: 2^22), whose
	 * squares' sum needs every bit; large beside small within the levels */
	fill_normal(x, B / 2, 3);
	for (size_t i = 0; i < B / 2; i++)
		x[B / 2 + i] = -x[i];
	fused_put(dt, buf, x, B, "cancelling");
	for (size_t i = 0; i < B; i++)
		x[i] = (f64 ? 1e15 : 0x1p22) + (i % 2 ? 0.5 : -0.5);
	fused_put(dt, buf, x, B, "c +- 0.5");
	for (size_t i = 0; i < B; i++)
		x[i] = i % 2 ? ldexp(1.0 + (double)(i % 1024) * 0x1p-12, f64 ? 300 : 60)
		             : -ldexp(1.0, f64 ? 262 : 50);
	fused_put(dt, buf, x, B, "large and small");
	CHECK_MSG(fused_takes(dt, buf, B), "%s large and small, one pass", dt_names[dt]);
}

static void check_fused(unsigned char *buf)
{
	double *x = malloc((GR_REDUCE_BLOCK + 17) * sizeof(double));
	CHECK_MSG(x, "malloc");
	check_fused_dt(GR_DT_F64, buf, x);
	check_fused_dt(GR_DT_F32, buf, x);
	free(x);
}

int main(int argc, char **argv)
{
	static const reduce_part parts[] = {
	    {"moments", check_moments},
	    {"one pass", check_fused},
	};

	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
