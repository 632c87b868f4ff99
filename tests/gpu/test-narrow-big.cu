/*
 * The narrow dtypes' sums and sums of squares on the GPU (cuda/narrow.h)
 * over more than 2^31 elements: n = 2^31 + 5 copies of the dtype's
 * largest finite value, then of its most negative one, then of both in
 * turn. The exact answers are known: n x is a double exactly (x has at
 * most 11 significant bits, n 32), and so is n x^2 (22 and 32); for the
 * integers n x in 64 bits. Per-lane and per-block counters that would
 * wrap or round past 2^31 elements show here, where the random arrays
 * of test-narrow are far too small to reach them. 4 GiB of device
 * memory; exits 77 when there is no GPU.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "cuda/narrow.h"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "math/widen.h"
}

/* fill n elements of size bytes (1 or 2) at d with the pattern a, or a
 * and b in turn */
__global__ void fill(unsigned char *d, uint64_t n, unsigned size, uint16_t a, uint16_t b)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint16_t v = i & 1 ? b : a;
		if (size == 2)
			((uint16_t *)d)[i] = v;
		else
			d[i] = (unsigned char)v;
	}
}

struct big_case {
	gr_dtype dt;
	uint16_t max, min; /* bit patterns: largest finite, most negative */
};

static const big_case CASES[] = {
	{ GR_DT_F16, 0x7bff, 0xfbff },     /* +-65504 */
	{ GR_DT_BF16, 0x7f7f, 0xff7f },    /* +-(2 - 2^-7) 2^127 */
	{ GR_DT_F8E4M3, 0x7e, 0xfe },      /* +-448 */
	{ GR_DT_F8E5M2, 0x7b, 0xfb },      /* +-57344 */
	{ GR_DT_I8, 0x7f, 0x80 },
	{ GR_DT_U8, 0xff, 0x00 },
	{ GR_DT_I16, 0x7fff, 0x8000 },
	{ GR_DT_U16, 0xffff, 0x0000 },
};

/* the element's value, widened as the CPU does */
static double value_of(gr_dtype dt, uint16_t bits)
{
	unsigned char b[2];
	memcpy(b, &bits, 2);
	uint32_t w = gr_widen_one(dt, b);
	gr_dtype wide = gr_dtype_wide(dt);
	if (wide == GR_DT_F32) {
		float f;
		memcpy(&f, &w, 4);
		return f;
	}
	return wide == GR_DT_I32 ? (double)(int32_t)w : (double)w;
}

static gr_exact_scratch *dscratch;
static gr_exact_sum *dxout;
static uint64_t *draw;

static void check(const big_case &c, const unsigned char *d, uint64_t n, int op, double want,
		  const char *what)
{
	int sms = gpu_sms();
	CU(gr_narrow_launch(op, c.dt, d, n, dscratch, draw, dxout, sms, 0));
	CU(cudaDeviceSynchronize());
	double got;
	if (gr_narrow_exact(op, c.dt)) {
		gr_exact_sum xs;
		CU(cudaMemcpy(&xs, dxout, sizeof(xs), cudaMemcpyDeviceToHost));
		got = gr_exact_fold(&xs, n);
	} else {
		/* integer sums: 64 bits, wrapping (none can here) */
		uint64_t r;
		CU(cudaMemcpy(&r, draw, 8, cudaMemcpyDeviceToHost));
		got = c.dt == GR_DT_U8 || c.dt == GR_DT_U16 ? (double)r : (double)(int64_t)r;
	}
	CHECK(got == want, "%s %s of %s, n = %llu: GPU %a, exact %a", gr_dtype_name(c.dt),
	      op == GR_OP_SUM ? "sum" : "sumsq", what, (unsigned long long)n, got, want);
}

int main(void)
{
	gpu_sms();
	const uint64_t n = (1ull << 31) + 5;
	unsigned char *d;
	if (cudaMalloc((void **)&d, n * 2) != cudaSuccess) {
		printf("skip: no room for %llu bytes of device memory\n", (unsigned long long)(n * 2));
		return 77;
	}
	CU(cudaMalloc((void **)&dscratch, sizeof(gr_exact_scratch)));
	CU(cudaMemset(dscratch, 0, sizeof(gr_exact_scratch)));
	CU(cudaMalloc((void **)&dxout, sizeof(gr_exact_sum)));
	CU(cudaMalloc((void **)&draw, 16));
	for (const big_case &c : CASES) {
		unsigned size = (unsigned)gr_dtype_size(c.dt);
		double hi = value_of(c.dt, c.max), lo = value_of(c.dt, c.min);
		const double N = (double)n;
		/* one value throughout; then the two in turn (n odd: one more hi) */
		fill<<<1024, 256>>>(d, n, size, c.max, c.max);
		CU(cudaGetLastError());
		check(c, d, n, GR_OP_SUM, N * hi, "the largest");
		check(c, d, n, GR_OP_SUMSQ, N * (hi * hi), "the largest");
		fill<<<1024, 256>>>(d, n, size, c.min, c.min);
		CU(cudaGetLastError());
		check(c, d, n, GR_OP_SUM, N * lo, "the most negative");
		check(c, d, n, GR_OP_SUMSQ, N * (lo * lo), "the most negative");
		fill<<<1024, 256>>>(d, n, size, c.max, c.min);
		CU(cudaGetLastError());
		double k = (double)((n + 1) / 2), m = (double)(n / 2);
		check(c, d, n, GR_OP_SUM, k * hi + m * lo, "both in turn");
		check(c, d, n, GR_OP_SUMSQ, k * (hi * hi) + m * (lo * lo), "both in turn");
	}
	CU(cudaFree(d));
	printf("%lu checks, %lu failures\n", checks, failures);
	return failures ? 1 : 0;
}
