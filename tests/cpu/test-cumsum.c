/*
 * Prefix sums (daemon/cumsum.c): the pieces of a chunk's job against the
 * definition of cumsum.h written out the plain way, for every dtype, at
 * sizes around the block; the request cut into chunks of one to three
 * blocks and run as the daemon runs them (WHOLE or LOCAL of several
 * chunks, then the carries in order, then CARRY) gives the same bits as
 * one chunk, in place too for 8-byte elements; and
 * NaN, infinities, -0 and sums past the float64 range do what
 * PROTOCOL.md says.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cumsum.h"
#include "tests/check.h"
#include "tests/cpu/test-fill.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;

static void fill(gr_dtype dt, void *data, size_t n)
{
	static const test_fill_spec spec = { .i32_wide = 1, .i64_wide = 3, .i64_below = 1000,
						 .f32_binades = 60, .f64_binades = 200 };

	test_fill(&spec, &rng_state, dt, data, n);
}

static double elem_f(gr_dtype dt, const void *data, size_t i)
{
	return dt == GR_DT_F32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
}

static uint64_t elem_i(gr_dtype dt, const void *data, size_t i)
{
	switch (dt) {
	case GR_DT_I32:
		return (uint64_t)(int64_t)((const int32_t *)data)[i];
	case GR_DT_U32:
		return ((const uint32_t *)data)[i];
	default:
		return ((const uint64_t *)data)[i];
	}
}

/* cumsum.h's definition, the plain way: R_b from a sum of the whole
 * prefix before block b, s_i from the block's start. */
static void reference(gr_dtype dt, const void *data, size_t n, uint64_t *out)
{
	const size_t size = gr_dtype_size(dt);

	if (!gr_dtype_is_float(dt)) {
		uint64_t s = 0;
		for (size_t i = 0; i < n; i++)
			out[i] = s += elem_i(dt, data, i);
		return;
	}
	for (size_t first = 0; first < n; first += GR_REDUCE_BLOCK) {
		double r = -0.0, s = 0;
		if (first > 0) {
			gr_partial p;
			gr_value v;
			gr_reduce(GR_OP_SUM, dt, data, first, &p);
			gr_partial_finish(GR_OP_SUM, dt, &p, &v);
			r = v.f;
		}
		(void)size;
		for (size_t i = first; i < n && i < first + GR_REDUCE_BLOCK; i++) {
			s = i == first ? elem_f(dt, data, i) : s + elem_f(dt, data, i);
			double o = r + s;
			memcpy(&out[i], &o, 8);
		}
	}
}

/*
 * As the daemon runs a request: chunks of chunk elements, up to njobs
 * in flight; every job of a round first (in reverse, as workers may
 * finish them), then the carries in order, then each CARRY. The first
 * job of each round knows its carry (WHOLE), the others do not (LOCAL).
 */
static void chunked(gr_dtype dt, const void *data, size_t n, size_t chunk, unsigned njobs,
		    uint64_t *out)
{
	const size_t size = gr_dtype_size(dt);
	gr_cumsum *cs = gr_cumsum_new(dt, chunk, njobs);
	CHECK(cs);
	size_t nchunks = (n + chunk - 1) / chunk;

	for (size_t k0 = 0; k0 < nchunks; k0 += njobs) {
		size_t k1 = k0 + njobs < nchunks ? k0 + njobs : nchunks;
		gr_cumsum_job *jobs[16];
		/* made in order: the round's first is WHOLE, the others LOCAL */
		for (size_t k = k0; k < k1; k++) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			jobs[k - k0] = gr_cumsum_job_new(cs, (unsigned)k, m, (uint8_t *)(out + first));
			CHECK(jobs[k - k0]->phase == (k == k0 ? GR_CUMSUM_WHOLE : GR_CUMSUM_LOCAL));
		}
		for (size_t k = k1; k-- > k0;) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			gr_cumsum_run(jobs[k - k0], dt, (const uint8_t *)data + first * size, m);
		}
		for (size_t k = k0; k < k1; k++) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			if (gr_cumsum_carry(cs, jobs[k - k0], m))
				gr_cumsum_run(jobs[k - k0], dt, NULL, m);
		}
	}
	CHECK(cs->carried == n);
	gr_cumsum_free(cs);
}

static void check_sizes(void)
{
	static const size_t sizes[] = { 1, 2, 7, GR_REDUCE_BLOCK - 1, GR_REDUCE_BLOCK,
					GR_REDUCE_BLOCK + 1, 3 * GR_REDUCE_BLOCK + 17,
					9 * GR_REDUCE_BLOCK + 5 };
	const size_t nmax = 9 * GR_REDUCE_BLOCK + 5;
	void *data = malloc(nmax * 8);
	uint64_t *ref = malloc(nmax * 8), *got = malloc(nmax * 8);
	CHECK(data && ref && got);

	for (int dt = 0; dt < GR_DT_N; dt++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k];
			fill((gr_dtype)dt, data, n);
			reference((gr_dtype)dt, data, n, ref);
			memset(got, 0xa5, n * 8);
			CHECK(gr_cumsum_whole((gr_dtype)dt, data, n, (uint8_t *)got) == 0);
			CHECK(memcmp(got, ref, n * 8) == 0);
			if (gr_dtype_size((gr_dtype)dt) == 8) {
				/* in place, as a region's 8-byte elements may be */
				memcpy(got, data, n * 8);
				chunked((gr_dtype)dt, got, n, 2 * GR_REDUCE_BLOCK, 4, got);
				CHECK(memcmp(got, ref, n * 8) == 0);
			}
			for (size_t blocks = 1; blocks <= 3; blocks++) {
				for (unsigned njobs = 1; njobs <= 4; njobs += 3) {
					memset(got, 0x5a, n * 8);
					chunked((gr_dtype)dt, data, n, blocks * GR_REDUCE_BLOCK, njobs,
						got);
					CHECK(memcmp(got, ref, n * 8) == 0);
				}
			}
		}
	}
	free(data);
	free(ref);
	free(got);
}

static double out_f(const uint64_t *out, size_t i)
{
	double d;
	memcpy(&d, &out[i], 8);
	return d;
}

/* n f64 elements, all v but the listed ones. */
static double *f64s(size_t n, double v)
{
	double *x = malloc(n * sizeof(*x));
	CHECK(x);
	for (size_t i = 0; i < n; i++)
		x[i] = v;
	return x;
}

static void check_specials(void)
{
	const size_t B = GR_REDUCE_BLOCK, n = 3 * B;
	uint64_t *out = malloc(n * 8);
	CHECK(out);

	/* every element -0.0: every prefix sum -0.0, across blocks too */
	double *x = f64s(n, -0.0);
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	for (size_t i = 0; i < n; i++)
		CHECK(out_f(out, i) == 0 && signbit(out_f(out, i)));
	/* ... until a +0.0 */
	x[B + 5] = 0.0;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(signbit(out_f(out, B + 4)) && !signbit(out_f(out, B + 5)));
	CHECK(!signbit(out_f(out, B + 6)) && !signbit(out_f(out, 2 * B)));
	free(x);

	/* a NaN: NaN from there on, in its block and every later one */
	x = f64s(n, 1.0);
	x[10] = NAN;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, 9) == 10.0);
	for (size_t i = 10; i < n; i++)
		CHECK(isnan(out_f(out, i)));
	free(x);

	/* +inf, then -inf in a later block: +inf until then, NaN after */
	x = f64s(n, 1.0);
	x[7] = INFINITY;
	x[B + 3] = -INFINITY;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, 6) == 7.0);
	for (size_t i = 7; i < B + 3; i++)
		CHECK(out_f(out, i) == INFINITY);
	for (size_t i = B + 3; i < n; i++)
		CHECK(isnan(out_f(out, i)));
	free(x);

	/* -inf and +inf in one block */
	x = f64s(n, 1.0);
	x[B + 1] = -INFINITY;
	x[B + 2] = INFINITY;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, B + 1) == -INFINITY && isnan(out_f(out, B + 2)) &&
	      isnan(out_f(out, 2 * B)));
	free(x);

	/* Past the float64 range: inf within the block whose running sum
	 * overflows, but the next block's carry is the exact sum rounded, in
	 * range again. */
	x = f64s(n, 0.0);
	x[0] = x[1] = DBL_MAX;
	x[2] = x[3] = -DBL_MAX;
	x[B] = 1.0;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, 0) == DBL_MAX && out_f(out, 1) == INFINITY && out_f(out, 3) == INFINITY);
	CHECK(out_f(out, B - 1) == INFINITY && out_f(out, B) == 1.0 && out_f(out, n - 1) == 1.0);
	/* and a carry past the range is inf itself */
	x[2] = x[3] = 0.0;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, B) == INFINITY && out_f(out, n - 1) == INFINITY);
	free(x);

	/* f32 elements are widened exactly and summed in double */
	float f[3] = { 16777216.0f, 1.0f, 1.0f };
	CHECK(gr_cumsum_whole(GR_DT_F32, f, 3, (uint8_t *)out) == 0);
	CHECK(out_f(out, 1) == 16777217.0 && out_f(out, 2) == 16777218.0);

	/* integers wrap */
	uint64_t u[3] = { UINT64_MAX, 2, 3 };
	CHECK(gr_cumsum_whole(GR_DT_U64, u, 3, (uint8_t *)out) == 0);
	CHECK(out[0] == UINT64_MAX && out[1] == 1 && out[2] == 4);
	int32_t i32[3] = { INT32_MIN, INT32_MIN, -1 };
	CHECK(gr_cumsum_whole(GR_DT_I32, i32, 3, (uint8_t *)out) == 0);
	CHECK((int64_t)out[1] == 2 * (int64_t)INT32_MIN && (int64_t)out[2] == 2 * (int64_t)INT32_MIN - 1);
	free(out);
}

/* The carry of a block is the exact sum before it, rounded once: here
 * 1 + 2^-60 * B, which a running double sum would lose entirely. */
static void check_carry_exact(void)
{
	const size_t B = GR_REDUCE_BLOCK, n = 2 * B;
	double *x = f64s(n, ldexp(1, -60));
	uint64_t *out = malloc(n * 8);
	CHECK(out);
	x[0] = 1.0;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, B - 1) == 1.0);
	CHECK(out_f(out, B) == 1.0 + ldexp((double)B, -60));
	free(x);
	free(out);
}

int main(void)
{
	check_sizes();
	check_specials();
	check_carry_exact();
	printf("cumsum ok\n");
	return 0;
}
