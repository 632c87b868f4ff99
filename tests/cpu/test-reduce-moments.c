/*
 * moments: its sum, min and max are the ops', its partial follows no cut,
 * address or ISA, and mean and variance are exact values rounded once
 * (ties, huge counts, specials).
 */
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

int main(int argc, char **argv)
{
	static const reduce_part parts[] = {
	    {"moments", check_moments},
	};

	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
