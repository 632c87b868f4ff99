/*
 * Prefix sums (math/cumsum.c): the pieces of a chunk's job against the
 * definition of cumsum.h (cuda/scan.h's order) written out the plain way,
 * for every dtype, at sizes around the tile and the chunk; the request
 * cut into chunks of one to three blocks and run as the daemon runs them
 * (WHOLE or LOCAL of several chunks, then the carries in order, then
 * CARRY; LOCAL and CARRY a few tiles at a time, as the CPU backend's
 * workers split them) gives the same bits as one chunk, in place too for 8-byte
 * elements; NaN, infinities, -0 and sums past the float64 range do what
 * PROTOCOL.md says; and the values are within scan.h's error bound of
 * the exact prefix sums.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/cumsum.h"
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

/*
 * cumsum.h's definition (cuda/scan.h's steps), the plain way: every
 * tile's thread totals, Kogge-Stone warp scans and E_t first, then the
 * whole Fenwick array F, then each tile's carry from F. Integers: a
 * running sum.
 */
static void reference(gr_dtype dt, const void *data, size_t n, uint64_t *out)
{
	enum { T = GR_CUMSUM_TILE };

	if (!gr_dtype_is_float(dt)) {
		uint64_t s = 0;
		for (size_t i = 0; i < n; i++)
			out[i] = s += elem_i(dt, data, i);
		return;
	}
	size_t ntiles = (n + T - 1) / T;
	double *A = malloc(ntiles * sizeof(*A)), *F = malloc(ntiles * sizeof(*F));
	double *E = malloc(ntiles * 256 * sizeof(*E));
	CHECK(A && F && E);
	for (size_t j = 0; j < ntiles; j++) {
		double R[256], W[256];
		for (int t = 0; t < 256; t++) {
			double r = -0.0;
			for (int e = 0; e < 16; e++) {
				size_t i = j * T + 16 * t + e;
				r = r + (i < n ? elem_f(dt, data, i) : 0.0);
			}
			R[t] = r;
		}
		for (int w = 0; w < 8; w++) {
			double v[32], nv[32];
			memcpy(v, R + 32 * w, sizeof(v));
			for (int d = 1; d < 32; d *= 2) {
				for (int l = 0; l < 32; l++)
					nv[l] = l >= d ? v[l - d] + v[l] : v[l];
				memcpy(v, nv, sizeof(v));
			}
			memcpy(W + 32 * w, v, sizeof(v));
		}
		double P[8];
		for (int w = 0; w < 8; w++) {
			/* S_0 + ... + S_{w-1}, left to right; nothing is -0.0 */
			P[w] = -0.0;
			for (int k = 0; k < w; k++)
				P[w] = P[w] + W[32 * k + 31];
		}
		A[j] = P[7] + W[255];
		for (int t = 0; t < 256; t++)
			E[j * 256 + t] = P[t / 32] + (t % 32 ? W[t - 1] : -0.0);
	}
	for (size_t j = 0; j < ntiles; j++) {
		F[j] = A[j];
		for (size_t L = 1; (j + 1) % ((size_t)1 << L) == 0; L++)
			F[j] = F[j - ((size_t)1 << (L - 1))] + F[j];
	}
	for (size_t j = 0; j < ntiles; j++) {
		double X = -0.0;
		for (int b = 62; b >= 0; b--)
			if (j >> b & 1)
				X = X + F[(j >> (b + 1) << (b + 1)) + ((size_t)1 << b) - 1];
		for (int t = 0; t < 256; t++) {
			double q = X + E[j * 256 + t], r = -0.0;
			for (int e = 0; e < 16; e++) {
				size_t i = j * T + 16 * t + e;
				if (i >= n)
					break;
				r = r + elem_f(dt, data, i);
				double o = q + r;
				memcpy(&out[i], &o, 8);
			}
		}
	}
	free(A);
	free(F);
	free(E);
}

/* A job's phase as the CPU backend runs it: whole, or, where it splits
 * (split, and gr_cumsum_splits), a few tiles at a time from the last
 * range to the first, as workers may finish them. */
static void run_job(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n, bool split)
{
	if (!split || !gr_cumsum_splits(cj, dt)) {
		gr_cumsum_run(cj, dt, data, n);
		return;
	}
	unsigned cuts[64], k = 0;
	for (unsigned j = 0; j < cj->ntiles && k < 63; j += 1 + (unsigned)(check_rng(&rng_state) % 5))
		cuts[k++] = j;
	cuts[k] = cj->ntiles;
	while (k-- > 0)
		gr_cumsum_run_tiles(cj, dt, data, n, cuts[k], cuts[k + 1]);
}

/*
 * As the daemon runs a request: chunks of chunk elements, up to njobs
 * in flight; every job of a round first (in reverse, as workers may
 * finish them), then the carries in order, then each CARRY. The first
 * job of each round knows its carry (WHOLE), the others do not (LOCAL);
 * with cs_split (gr_cumsum.split), a float chunk of GR_CUMSUM_SPLIT_MIN
 * elements or more is LOCAL all the same. split: LOCAL and CARRY run a
 * few tiles at a time (run_job).
 */
static void chunked_as(gr_dtype dt, const void *data, size_t n, size_t chunk, unsigned njobs,
		       bool split, bool cs_split, uint64_t *out)
{
	const size_t size = gr_dtype_size(dt);
	gr_cumsum *cs = gr_cumsum_new(dt, chunk, njobs);
	CHECK(cs);
	cs->split = cs_split;
	size_t nchunks = (n + chunk - 1) / chunk;

	for (size_t k0 = 0; k0 < nchunks; k0 += njobs) {
		size_t k1 = k0 + njobs < nchunks ? k0 + njobs : nchunks;
		gr_cumsum_job *jobs[16];
		/* made in order: the round's first is WHOLE, the others LOCAL */
		for (size_t k = k0; k < k1; k++) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			bool local = k != k0 || (cs_split && gr_dtype_is_float(dt) &&
						 m >= GR_CUMSUM_SPLIT_MIN);
			jobs[k - k0] = gr_cumsum_job_new(cs, (unsigned)k, m, (uint8_t *)(out + first));
			CHECK(jobs[k - k0]->phase == (local ? GR_CUMSUM_LOCAL : GR_CUMSUM_WHOLE));
		}
		for (size_t k = k1; k-- > k0;) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			run_job(jobs[k - k0], dt, (const uint8_t *)data + first * size, m, split);
		}
		for (size_t k = k0; k < k1; k++) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			if (gr_cumsum_carry(cs, jobs[k - k0], m))
				run_job(jobs[k - k0], dt, NULL, m, split);
		}
	}
	CHECK(cs->carried == n);
	gr_cumsum_free(cs);
}

static void chunked(gr_dtype dt, const void *data, size_t n, size_t chunk, unsigned njobs,
		    bool split, uint64_t *out)
{
	chunked_as(dt, data, n, chunk, njobs, split, false, out);
}

static void check_sizes(void)
{
	static const size_t sizes[] = { 1,
					2,
					7,
					17,
					GR_CUMSUM_TILE - 1,
					GR_CUMSUM_TILE,
					GR_CUMSUM_TILE + 1,
					3 * GR_CUMSUM_TILE + 17,
					GR_REDUCE_BLOCK - 1,
					GR_REDUCE_BLOCK,
					GR_REDUCE_BLOCK + 1,
					3 * GR_REDUCE_BLOCK + 17,
					9 * GR_REDUCE_BLOCK + 5 };
	const size_t nmax = 9 * GR_REDUCE_BLOCK + 5;
	void *data = malloc(nmax * 8);
	uint64_t *ref = malloc(nmax * 8), *got = malloc(nmax * 8);
	CHECK(data && ref && got);

	for (int dt = 0; dt < GR_DT_NARROW_FIRST; dt++) {
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
				chunked((gr_dtype)dt, got, n, 2 * GR_REDUCE_BLOCK, 4, false, got);
				CHECK(memcmp(got, ref, n * 8) == 0);
				memcpy(got, data, n * 8);
				chunked((gr_dtype)dt, got, n, 2 * GR_REDUCE_BLOCK, 4, true, got);
				CHECK(memcmp(got, ref, n * 8) == 0);
			}
			/* chunks long enough that an engine of several workers
			 * runs LOCAL and CARRY even where the carry is known,
			 * and a short last one */
			for (unsigned njobs = 1; njobs <= 2; njobs++) {
				memset(got, 0x3c, n * 8);
				chunked_as((gr_dtype)dt, data, n, GR_CUMSUM_SPLIT_MIN, njobs, true,
					   true, got);
				CHECK(memcmp(got, ref, n * 8) == 0);
			}
			for (size_t blocks = 1; blocks <= 3; blocks++) {
				for (unsigned njobs = 1; njobs <= 4; njobs += 3) {
					for (int split = 0; split < 2; split++) {
						memset(got, 0x5a, n * 8);
						chunked((gr_dtype)dt, data, n, blocks * GR_REDUCE_BLOCK,
							njobs, split, got);
						CHECK(memcmp(got, ref, n * 8) == 0);
					}
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

	/* Past the float64 range: inf from there on, as in a running sum
	 * (the threads' totals and the tiles' carry it to every later value) */
	x = f64s(n, 0.0);
	x[0] = x[1] = DBL_MAX;
	x[2] = x[3] = -DBL_MAX;
	x[B] = 1.0;
	CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
	CHECK(out_f(out, 0) == DBL_MAX && out_f(out, 1) == INFINITY && out_f(out, 3) == INFINITY);
	CHECK(out_f(out, B - 1) == INFINITY && out_f(out, B) == INFINITY &&
	      out_f(out, n - 1) == INFINITY);
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

/*
 * Within cuda/scan.h's bound: |value_i - P_i| <= gamma_d * sum_{k<=i}
 * |x_k|, d = 30 + 2 ceil(log2(tiles)), at sampled i, against the exact
 * prefix sum (reduce.h's exact sum, itself rounded once: u |P_i| more).
 */
static void check_accuracy(void)
{
	const size_t n = 37 * GR_CUMSUM_TILE + 123;
	const double u = ldexp(1, -53);
	unsigned lg = 0;
	while (((size_t)1 << lg) < (n + GR_CUMSUM_TILE - 1) / GR_CUMSUM_TILE)
		lg++;
	const double d = 30 + 2 * lg, gamma = d * u / (1 - d * u);
	double *x = malloc(n * sizeof(*x));
	uint64_t *out = malloc(n * 8);
	CHECK(x && out);

	for (int kind = 0; kind < 3; kind++) {
		for (size_t i = 0; i < n; i++) {
			double r = (double)(test_rnd(&rng_state) >> 11) * 0x1p-53;
			x[i] = kind == 0 ? r : kind == 1 ? r - 0.5 : ldexp(r - 0.5, (int)(test_rnd(&rng_state) % 80) - 40);
		}
		CHECK(gr_cumsum_whole(GR_DT_F64, x, n, (uint8_t *)out) == 0);
		double m = 0;
		size_t next = 0;
		for (size_t i = 0; i < n; i++) {
			m += fabs(x[i]); /* rounds up by at most n u m: far under the slack */
			if (i != next && i != n - 1)
				continue;
			next += 1 + test_rnd(&rng_state) % 4000;
			gr_partial p;
			gr_value v;
			gr_reduce(GR_OP_SUM, GR_DT_F64, x, i + 1, &p);
			gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v);
			double err = fabs(out_f(out, i) - v.f);
			CHECK(err <= gamma * m * 1.01 + u * fabs(v.f));
		}
	}
	free(x);
	free(out);
}

int main(void)
{
	check_sizes();
	check_specials();
	check_accuracy();
	printf("cumsum ok\n");
	return 0;
}
