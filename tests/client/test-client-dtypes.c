/*
 * The narrow dtypes (f16, bf16, f8e4m3, f8e5m2, i8, u8, i16, u16) through
 * libgpured against the real daemon (the harness: daemon-harness.h),
 * every op against a reference computed in the test (dtypes-ref.c): the elements decoded by
 * the formats' definitions (tests/narrow-formats.h), their sums and sums
 * of squares kept exactly in a fixed-point integer of 2048 bits, and every
 * float result rounded from that once, to nearest with ties to even, as
 * PROTOCOL.md promises (mean and variance too, from the exact S1 and S2).
 *
 *   test-client-dtypes SCENARIO GPURED GPUREDCTL
 *
 * Scenarios: floats (every bit pattern of each float dtype, every finite
 * one, ties, cancellation to 0, -0, NaN and infinities, random sizes, and
 * a region at an odd offset), ints (every pattern of each integer dtype
 * and their extremes), segments (random segments with empty ones: the
 * narrow integers' own extremes), partial (pieces combined, as one
 * request), cumsum (exact prefix sums, from data and between regions),
 * ctl (gpuredctl's --dtype, text and --raw input).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"
#include "tests/client/dtypes-ref.h"
#include "tests/narrow-formats.h"

/* ---- arrays ------------------------------------------------------------ */

rng the_rng = { 0x6a09e667f3bcc909ull };

void *alloc_elems(gpured_dtype dt, size_t n)
{
	void *p = malloc(n * gpured_dtype_size(dt) + 1);

	CHECK(p);
	return p;
}

static void shuffle(gpured_dtype dt, void *data, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(rng_next(&the_rng) % i);
		uint32_t a = raw_at(dt, data, i - 1);

		put_at(dt, data, i - 1, raw_at(dt, data, j));
		put_at(dt, data, j, a);
	}
}

static bool is_finite_bits(gpured_dtype dt, uint32_t b)
{
	const test_format *f = test_format_named(gpured_dtype_name(dt));

	return !f || test_decode(f, b).cls == TEST_FINITE;
}

/* Every pattern in order and shuffled; every finite one; every one but
 * the NaNs (both infinities: sums NaN). */
static void check_every_pattern(gpured_t *g, gpured_dtype dt)
{
	const size_t count = (size_t)1 << dt_bits(dt);
	void *p = alloc_elems(dt, count);
	size_t n = 0;

	for (uint32_t b = 0; b < count; b++)
		put_at(dt, p, b, b);
	check_all(g, dt, p, count, "every pattern");
	shuffle(dt, p, count);
	check_all(g, dt, p, count, "every pattern shuffled");
	for (uint32_t b = 0; b < count; b++)
		if (is_finite_bits(dt, b))
			put_at(dt, p, n++, b);
	shuffle(dt, p, n);
	check_all(g, dt, p, n, "every finite pattern");
	if (is_float_dt(dt)) {
		const test_format *f = test_format_named(gpured_dtype_name(dt));

		n = 0;
		for (uint32_t b = 0; b < count; b++)
			if (test_decode(f, b).cls != TEST_NAN)
				put_at(dt, p, n++, b);
		check_all(g, dt, p, n, "every pattern but NaN");
		/* only the positive infinity among finite ones, then only the
		 * negative one */
		for (int sign = 0; sign < 2; sign++) {
			n = 0;
			for (uint32_t b = 0; b < count; b++) {
				test_value v = test_decode(f, b);
				if (v.cls == TEST_FINITE || (v.cls == TEST_INF && v.neg == sign))
					put_at(dt, p, n++, b);
			}
			shuffle(dt, p, n);
			check_all(g, dt, p, n, sign ? "finite and -inf" : "finite and +inf");
		}
	}
	free(p);
}

/* Random elements at assorted sizes (finite, for most). */
static void check_random(gpured_t *g, gpured_dtype dt)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 17, 4097, 32769, 100003 };
	const uint32_t mask = (1u << dt_bits(dt)) - 1;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		void *p = alloc_elems(dt, n);

		for (size_t i = 0; i < n; i++) {
			uint32_t b;
			do
				b = (uint32_t)rng_next(&the_rng) & mask;
			while (!is_finite_bits(dt, b));
			put_at(dt, p, i, b);
		}
		check_all(g, dt, p, n, "random");
		free(p);
	}
}

/* An array of the given bit patterns. */
static void *array_of(gpured_dtype dt, const uint32_t *bits, size_t n)
{
	void *p = alloc_elems(dt, n);

	for (size_t i = 0; i < n; i++)
		put_at(dt, p, i, bits[i]);
	return p;
}

/* One op over bits, checked against the reference and against want. */
static void check_literal(gpured_t *g, gpured_op op, gpured_dtype dt, const uint32_t *bits,
			  size_t n, double want, const char *label)
{
	void *p = array_of(dt, bits, n);
	gpured_value v;
	expect e = expected(op, dt, p, n, 0);

	/* the reference itself must agree with the worked-out answer */
	CHECK_MSG(same_f(e.v.v.f, want), "%s: the reference says %a, not %a", label, e.v.v.f, want);
	check_value(label, &e, gpured_reduce(g, op, dt, p, n, &v), &v, g);
	free(p);
}

/* n copies of a then the tail */
static uint32_t *repeat(uint32_t a, size_t n, const uint32_t *tail, size_t k)
{
	uint32_t *b = malloc((n + k) * sizeof(*b));

	CHECK(b);
	for (size_t i = 0; i < n; i++)
		b[i] = a;
	memcpy(b + n, tail, k * sizeof(*b));
	return b;
}

/* Exact sums that round at a tie, just past one, and cancel. */
static void check_ties(gpured_t *g)
{
	uint32_t *b;

	/* f16: 65536 x 2^15 = 2^31, whose double ulp is 2^-21; 2^-22 is
	 * half of it (0x0004 = 4 x 2^-24). */
	const uint32_t t1[] = { 0x0004 }, t2[] = { 0x0004, 0x0001 }, t3[] = { 0x0004, 0x0008 };
	b = repeat(0x7800, 65536, t1, 1);
	check_literal(g, GPURED_OP_SUM, GPURED_F16, b, 65537, 0x1p31, "f16 sum at a tie");
	free(b);
	b = repeat(0x7800, 65536, t2, 2);
	check_literal(g, GPURED_OP_SUM, GPURED_F16, b, 65538, 0x1p31 + 0x1p-21,
		      "f16 sum past a tie");
	free(b);
	b = repeat(0x7800, 65536, t3, 2); /* 1.5 ulp: up to the even 2 */
	check_literal(g, GPURED_OP_SUM, GPURED_F16, b, 65538, 0x1p31 + 0x1p-20,
		      "f16 sum at a tie, up");
	free(b);

	/* bf16: 2^60 + 2^7 is a tie (ulp 2^8), 2^60 + 2^8 + 2^7 one that
	 * goes up to the even 2^60 + 2^9 */
	const uint32_t a1[] = { 0x5d80, 0x4300 }, a2[] = { 0x5d80, 0x4380, 0x4300 },
		       a3[] = { 0x5d80, 0x4300, 0x0001 };
	check_literal(g, GPURED_OP_SUM, GPURED_BF16, a1, 2, 0x1p60, "bf16 sum at a tie");
	check_literal(g, GPURED_OP_SUM, GPURED_BF16, a2, 3, 0x1p60 + 0x1p9, "bf16 sum at a tie, up");
	check_literal(g, GPURED_OP_SUM, GPURED_BF16, a3, 3, 0x1p60 + 0x1p8,
		      "bf16 sum past a tie by 2^-133");
	/* sumsq: (2^30)^2 + (2^-133)^2 and the like */
	const uint32_t a4[] = { 0x4e80, 0x0001 }, a5[] = { 0x4e80, 0x3f80, 0x3f80 };
	check_literal(g, GPURED_OP_SUMSQ, GPURED_BF16, a4, 2, 0x1p60, "bf16 sumsq, a far tail");
	check_literal(g, GPURED_OP_SUMSQ, GPURED_BF16, a5, 3, 0x1p60, "bf16 sumsq, 2 below half");

	/* f8e5m2 sumsq: 2^30 + 2^30 + (2^-11)^2: a tie at 2^31 (ulp 2^-21) */
	const uint32_t e1[] = { 0x78, 0x78, 0x10 }, e2[] = { 0x78, 0x78, 0x10, 0x01 };
	check_literal(g, GPURED_OP_SUMSQ, GPURED_F8E5M2, e1, 3, 0x1p31, "f8e5m2 sumsq at a tie");
	check_literal(g, GPURED_OP_SUMSQ, GPURED_F8E5M2, e2, 4, 0x1p31 + 0x1p-21,
		      "f8e5m2 sumsq past a tie");

	/* f8e4m3 sumsq: 2^19 x 256^2 = 2^35 (ulp 2^-17) and (2^-9)^2 = 2^-18 */
	const uint32_t f1[] = { 0x01 }, f2[] = { 0x01, 0x01, 0x01 };
	b = repeat(0x78, (size_t)1 << 19, f1, 1);
	check_literal(g, GPURED_OP_SUMSQ, GPURED_F8E4M3, b, ((size_t)1 << 19) + 1, 0x1p35,
		      "f8e4m3 sumsq at a tie");
	free(b);
	b = repeat(0x78, (size_t)1 << 19, f2, 3); /* 1.5 ulp: up to 2 */
	check_literal(g, GPURED_OP_SUMSQ, GPURED_F8E4M3, b, ((size_t)1 << 19) + 3,
		      0x1p35 + 0x1p-16, "f8e4m3 sumsq at a tie, up");
	free(b);
}

/* Cancellation to +0, -0 alone, NaN and infinities, E4M3's NaNs. */
static void check_specials(gpured_t *g)
{
	for (size_t k = 0; k < sizeof(floats) / sizeof(floats[0]); k++) {
		const gpured_dtype dt = floats[k];
		const test_format *f = test_format_named(gpured_dtype_name(dt));
		const uint32_t sign = 1u << (dt_bits(dt) - 1), mask = (1u << dt_bits(dt)) - 1;
		const size_t n = 40000;
		void *p = alloc_elems(dt, n);
		uint32_t one = 0;

		/* x and -x, shuffled: exactly 0, +0 */
		for (size_t i = 0; i < n; i += 2) {
			uint32_t b;
			do
				b = (uint32_t)rng_next(&the_rng) & mask;
			while (!is_finite_bits(dt, b));
			put_at(dt, p, i, b);
			put_at(dt, p, i + 1, b ^ sign);
		}
		shuffle(dt, p, n);
		check_all(g, dt, p, n, "cancelling pairs");
		gpured_value v;
		CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, dt, p, n, &v), 0);
		CHECK(v.v.f == 0 && !signbit(v.v.f));

		/* -0 alone: sum -0, min -0; then one +0: sum +0, min -0 at 0,
		 * max +0 where it is */
		for (size_t i = 0; i < n; i++)
			put_at(dt, p, i, sign);
		check_all(g, dt, p, n, "all -0");
		CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, dt, p, n, &v), 0);
		CHECK(v.v.f == 0 && signbit(v.v.f));
		put_at(dt, p, 777, 0);
		check_all(g, dt, p, n, "-0 and one +0");
		CHECK_EQ(gpured_reduce(g, GPURED_OP_ARGMAX, dt, p, n, &v), 0);
		CHECK(v.v.f == 0 && !signbit(v.v.f) && v.index == 777);

		/* every NaN pattern among ones: NaN, at its place */
		while (test_decode(f, one).cls != TEST_FINITE ||
		       test_value_double(test_decode(f, one)) != 1.0)
			one++;
		bool full = false;
		for (uint32_t b = 0; b <= mask; b++) {
			uint32_t arr[4] = { one, one, b, one };
			void *q;

			if (test_decode(f, b).cls != TEST_NAN)
				continue;
			q = array_of(dt, arr, 4);
			if (b == mask || !full) /* the first and the last, whole */
				check_all(g, dt, q, 4, "a NaN among ones");
			full = true;
			CHECK_EQ(gpured_reduce(g, GPURED_OP_ARGMIN, dt, q, 4, &v), 0);
			CHECK(isnan(v.v.f) && v.index == 2);
			CHECK_EQ(gpured_reduce(g, GPURED_OP_SUMSQ, dt, q, 4, &v), 0);
			CHECK(isnan(v.v.f));
			free(q);
		}
		free(p);
	}
}

/* ---- scenarios ------------------------------------------------------- */

static void test_floats(void)
{
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	for (size_t k = 0; k < sizeof(floats) / sizeof(floats[0]); k++) {
		check_every_pattern(g, floats[k]);
		check_random(g, floats[k]);
	}
	check_ties(g);
	check_specials(g);
	/* the shorthands, of the floats' bits */
	const uint16_t h[] = { 0x3c00, 0xc000, 0x0001 };  /* f16 1, -2, 2^-24 */
	const uint16_t bh[] = { 0x5d80, 0x4300, 0x0001 }; /* bf16 2^60, 2^7, 2^-133 */
	const uint8_t e4[] = { 0x7e, 0x7e, 0x01 };        /* 448, 448, 2^-9 */
	const uint8_t e5[] = { 0x7b, 0xfc };              /* 57344, -inf */
	double d;
	CHECK_EQ(gpured_sum_f16(g, h, 3, &d), 0);
	CHECK(d == -1 + 0x1p-24);
	CHECK_EQ(gpured_sum_bf16(g, bh, 3, &d), 0);
	CHECK(d == 0x1p60 + 0x1p8);
	CHECK_EQ(gpured_sum_f8e4m3(g, e4, 3, &d), 0);
	CHECK(d == 896 + 0x1p-9);
	CHECK_EQ(gpured_sum_f8e5m2(g, e5, 2, &d), 0);
	CHECK(isinf(d) && d < 0);
	CHECK_EQ(gpured_sum_f16(g, h, 0, &d), 0);
	CHECK(d == 0 && !signbit(d));
	/* the reference's own rounding, on its own: ties to even */
	big x = { { 0 } };
	big_add_scaled(&x, (1ull << 53) + 1, 0, false);
	CHECK(big_round_signed(&x, ACC_LSB) == 0x1p53);
	big_add_scaled(&x, 2, 0, false);
	CHECK(big_round_signed(&x, ACC_LSB) == 0x1p53 + 4);
	big_add_scaled(&x, 1, -200, false);
	CHECK(big_round_signed(&x, ACC_LSB) == 0x1p53 + 4);
	big_add_scaled(&x, 1, 0, true);
	big_add_scaled(&x, 1, -200, true); /* 2^53 + 2, exactly */
	CHECK(big_round_signed(&x, ACC_LSB) == 0x1p53 + 2);
	big_add_scaled(&x, 1ull << 54, 0, true);
	CHECK(big_round_signed(&x, ACC_LSB) == -(0x1p53 - 2));
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_ints(void)
{
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
		check_every_pattern(g, ints[k]);
		check_random(g, ints[k]);
	}
	/* extremes, by hand */
	int8_t i8[] = { -128, 127, -128, 5 };
	uint16_t u16[] = { 65535, 65535, 0, 65535 };
	int16_t i16[] = { 300, -32768, 32767 };
	gpured_value v;
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, GPURED_I8, i8, 4, &v), 0);
	CHECK(v.kind == GPURED_KIND_I64 && v.v.i == -124);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_ARGMIN, GPURED_I8, i8, 4, &v), 0);
	CHECK(v.v.i == -128 && v.index == 0);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, GPURED_U16, u16, 4, &v), 0);
	CHECK(v.kind == GPURED_KIND_U64 && v.v.u == 3 * 65535ull);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUMSQ, GPURED_U16, u16, 4, &v), 0);
	CHECK(v.kind == GPURED_KIND_F64 && v.v.f == 3.0 * 65535 * 65535);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MAX, GPURED_I16, i16, 3, &v), 0);
	CHECK(v.v.i == 32767);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MIN, GPURED_I16, i16, 3, &v), 0);
	CHECK(v.v.i == -32768);
	/* the shorthands */
	const uint8_t u8[] = { 255, 255, 7 };
	const int16_t i16b[] = { -1, INT16_MIN };
	int64_t si;
	uint64_t su;
	CHECK_EQ(gpured_sum_i8(g, i8, 4, &si), 0);
	CHECK(si == -124);
	CHECK_EQ(gpured_sum_u8(g, u8, 3, &su), 0);
	CHECK(su == 517);
	CHECK_EQ(gpured_sum_i16(g, i16b, 2, &si), 0);
	CHECK(si == -32769);
	CHECK_EQ(gpured_sum_u16(g, u16, 4, &su), 0);
	CHECK(su == 3 * 65535ull);
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

/* What an empty segment's record holds: the op's identity, the narrow
 * integers' own extremes for min and max. */
static void empty_record(gpured_op op, gpured_dtype dt, uint8_t *rec)
{
	gpured_number lo, hi, zero = { .u = 0 }, nan = { .f = NAN };
	uint64_t none = GPURED_SEGMENT_NO_INDEX;

	switch (dt) {
	case GPURED_I8:
		lo.i = INT8_MIN, hi.i = INT8_MAX;
		break;
	case GPURED_I16:
		lo.i = INT16_MIN, hi.i = INT16_MAX;
		break;
	case GPURED_U8:
		lo.u = 0, hi.u = UINT8_MAX;
		break;
	case GPURED_U16:
		lo.u = 0, hi.u = UINT16_MAX;
		break;
	default:
		lo.f = -INFINITY, hi.f = INFINITY;
		break;
	}
	if (op == GPURED_OP_SUMSQ)
		zero.f = 0.0;
	switch (op) {
	case GPURED_OP_SUM:
	case GPURED_OP_SUMSQ:
		memcpy(rec, &zero, 8);
		break;
	case GPURED_OP_MIN:
	case GPURED_OP_ARGMIN:
		memcpy(rec, &hi, 8);
		memcpy(rec + 8, &none, 8);
		break;
	case GPURED_OP_MAX:
	case GPURED_OP_ARGMAX:
		memcpy(rec, &lo, 8);
		memcpy(rec + 8, &none, 8);
		break;
	case GPURED_OP_MOMENTS:
		memcpy(rec, &zero, 8);
		memcpy(rec + 8, &hi, 8);
		memcpy(rec + 16, &lo, 8);
		memcpy(rec + 24, &nan, 8);
		memcpy(rec + 32, &nan, 8);
		break;
	}
}

/* The record one segment alone must give. */
static void segment_record(gpured_op op, gpured_dtype dt, const void *data, size_t n,
			   uint64_t ddof, uint8_t *rec)
{
	if (n == 0) {
		empty_record(op, dt, rec);
		return;
	}
	if (op == GPURED_OP_MOMENTS) {
		/* a segment no longer than ddof: var NaN, the rest as ever */
		expect e = expected(op, dt, data, n, n > ddof ? ddof : 0);
		double var = n > ddof ? e.m.var : NAN;

		memcpy(rec, &e.m.sum.v, 8);
		memcpy(rec + 8, &e.m.min.v, 8);
		memcpy(rec + 16, &e.m.max.v, 8);
		memcpy(rec + 24, &e.m.mean, 8);
		memcpy(rec + 32, &var, 8);
		return;
	}
	expect e = expected(op, dt, data, n, 0);
	memcpy(rec, &e.v.v, 8);
	if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX)
		memcpy(rec + 8, &e.v.index, 8);
}

static bool same_record(gpured_op op, const uint8_t *a, const uint8_t *b)
{
	for (size_t k = 0; k < gpured_segment_record_bytes(op) / 8; k++) {
		double x, y;

		memcpy(&x, a + 8 * k, 8);
		memcpy(&y, b + 8 * k, 8);
		if (memcmp(a + 8 * k, b + 8 * k, 8) != 0 && !(isnan(x) && isnan(y)))
			return false;
	}
	return true;
}

static void test_segments(void)
{
	enum { NSEG = 60 };
	static const gpured_dtype all[] = { GPURED_F16, GPURED_BF16, GPURED_F8E4M3, GPURED_F8E5M2,
					    GPURED_I8,  GPURED_U8,   GPURED_I16,    GPURED_U16 };
	uint64_t off[NSEG + 1];
	uint8_t got[NSEG * 40], want[40];
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
		const gpured_dtype dt = all[k];
		const size_t size = gpured_dtype_size(dt);
		const uint32_t mask = (1u << dt_bits(dt)) - 1;

		off[0] = 0;
		for (int i = 0; i < NSEG; i++) {
			uint64_t r = rng_next(&the_rng) % 6;
			off[i + 1] = off[i] + (r < 2 ? 0 : r < 5 ? rng_next(&the_rng) % 9
							: rng_next(&the_rng) % 70000);
		}
		const size_t n = off[NSEG];
		void *p = alloc_elems(dt, n);
		for (size_t i = 0; i < n; i++) /* any bits, NaNs and infinities too */
			put_at(dt, p, i, (uint32_t)rng_next(&the_rng) & mask);
		for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
			const size_t rb = gpured_segment_record_bytes((gpured_op)op);
			const uint64_t ddof = op == GPURED_OP_MOMENTS ? 1 : 0;
			int r = gpured_reduce_segments(g, (gpured_op)op, dt, p, n, off, NSEG, ddof,
						       got, sizeof(got));

			CHECK_MSG(r == 0, "%s %s segments: %d %s", gpured_op_name((gpured_op)op),
				  gpured_dtype_name(dt), r, gpured_errmsg(g));
			for (int i = 0; i < NSEG; i++) {
				segment_record((gpured_op)op, dt, (const uint8_t *)p + off[i] * size,
					       off[i + 1] - off[i], ddof, want);
				checked++;
				CHECK_MSG(same_record((gpured_op)op, got + i * rb, want),
					  "%s %s segment %d of %llu elements: %#llx, want %#llx",
					  gpured_op_name((gpured_op)op), gpured_dtype_name(dt), i,
					  (unsigned long long)(off[i + 1] - off[i]),
					  *(unsigned long long *)(void *)(got + i * rb),
					  *(unsigned long long *)(void *)want);
			}
		}
		free(p);
	}
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_partial(void)
{
	const size_t n = 200003;
	gpured_partial acc, p;
	gpured_t *g;
	double d;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	for (size_t k = 0; k < sizeof(floats) / sizeof(floats[0]); k++) {
		const gpured_dtype dt = floats[k];
		const size_t size = gpured_dtype_size(dt);
		const uint32_t mask = (1u << dt_bits(dt)) - 1;
		void *data = alloc_elems(dt, n);

		for (size_t i = 0; i < n; i++) {
			uint32_t b;
			do
				b = (uint32_t)rng_next(&the_rng) & mask;
			while (!is_finite_bits(dt, b));
			put_at(dt, data, i, b);
		}
		static const gpured_op ops[] = { GPURED_OP_SUM, GPURED_OP_SUMSQ };

		for (size_t o = 0; o < 2; o++) {
			const gpured_op op = ops[o];
			expect e = expected(op, dt, data, n, 0);
			size_t at = 0;

			CHECK_EQ(gpured_partial_init(&acc, op, dt), 0);
			/* pieces of random lengths, any element a cut */
			while (at < n) {
				size_t len = 1 + (size_t)(rng_next(&the_rng) % 60000);
				if (len > n - at)
					len = n - at;
				CHECK_EQ(gpured_reduce_partial(g, op, dt,
							       (const uint8_t *)data + at * size, len, &p),
					 0);
				CHECK(p.dtype == dt && p.count == len);
				CHECK_EQ(gpured_partial_combine(&acc, &p), 0);
				at += len;
			}
			CHECK_EQ(gpured_partial_round(&acc, &d), 0);
			checked++;
			CHECK_MSG(same_f(d, e.v.v.f), "%s %s partials: %a, want %a",
				  gpured_op_name(op), gpured_dtype_name(dt), d, e.v.v.f);
		}
		free(data);
	}
	/* no partials of the integers, nor of another dtype's */
	CHECK_EQ(gpured_partial_init(&acc, GPURED_OP_SUM, GPURED_I8), -EINVAL);
	uint16_t u[2] = { 1, 2 };
	CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_U16, u, 2, &p), -EINVAL);
	CHECK_EQ(gpured_partial_init(&acc, GPURED_OP_SUM, GPURED_F16), 0);
	CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_BF16, u, 2, &p), 0);
	CHECK_EQ(gpured_partial_combine(&acc, &p), -EINVAL);
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void tell_checked(void)
{
	printf("%lu results checked\n", checked);
}

int main(int argc, char **argv)
{
	static const daemon_scenario scenarios[] = {
		{ "floats", test_floats }, { "ints", test_ints },       { "segments", test_segments },
		{ "partial", test_partial }, { "cumsum", test_cumsum }, { "ctl", test_ctl },
	};

	atexit(tell_checked);
	return daemon_harness_main(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
