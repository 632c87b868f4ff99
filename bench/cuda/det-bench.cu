/*
 * gpured-det-bench: the exact sum beside CUB's deterministic sum, in one
 * run. For f32 and f64, n = 2^16, 2^18, .. 2^28, four ways to sum the
 * same array, taken in turn:
 *   read     the float4 grid-stride read kernel: the ceiling
 *   cub      cub::DeviceReduce::Sum as it comes (run-to-run deterministic:
 *            the same bits on one GPU model, another order on another)
 *   cub-g2g  the same with gpu_to_gpu determinism required (a reproducible
 *            floating-point accumulator: the same bits on every GPU)
 *   exact    ours (exact.h): the exact sum rounded once, the same bits on
 *            every GPU and on the CPU
 * Back-to-back throughput: blocks of launches (1 GiB's worth, 20 to 2000
 * launches, after three warm-up launches) between two events, each launch
 * on another place of a 2.25 GiB pool so that small arrays are not L2
 * hits, the four in turn, medians of the rounds. Each size is checked
 * first: ours and cub-g2g give the same bits twice; cub-g2g's bits on the
 * array reversed are reported (an order-free sum gives the same); the
 * three sums agree within a float sum's error.
 *
 * gpu_to_gpu needs CUB headers newer than the toolkit's (its CUB 3.0.1 has
 * no such determinism; 3.5.0 was used): meson builds this only with
 * -Dcccl_include=PATH, the include/cccl folder of such headers
 * (docs/benchmarks/kernels.md, section 3b, says where they came from).
 *
 *   gpured-det-bench [--hi E] [--reps R]   (largest n 2^E, 16..28, default
 *   28; rounds, default 5)
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cub/device/device_reduce.cuh>
#include <cub/version.cuh>
#include <cuda/std/execution>
#include <cuda_runtime.h>

#include "bench/cuda/bench-common.cuh"
#include "cuda/exact.h"

using grb::median;

#if CUB_VERSION < 300100
#error "gpured-det-bench needs a CUB newer than 3.0 (gpu_to_gpu determinism)"
#endif

/*
 * The memory resource the gpu_to_gpu sum takes its temporary storage from:
 * one buffer, allocated once, so that no allocation is timed. A request
 * larger than the buffer ends the program; the largest is kept.
 */
struct fixed_resource {
	void *buf;
	size_t cap;
	size_t *most;

	void *take(size_t bytes)
	{
		if (bytes > cap) {
			fprintf(stderr, "gpu_to_gpu wants %zu bytes of temporary storage, above %zu\n",
				bytes, cap);
			exit(1);
		}
		if (bytes > *most)
			*most = bytes;
		return buf;
	}
	void *allocate(cuda::stream_ref, size_t bytes, size_t) { return take(bytes); }
	void deallocate(cuda::stream_ref, void *, size_t, size_t) noexcept {}
	void *allocate_sync(size_t bytes, size_t) { return take(bytes); }
	void deallocate_sync(void *, size_t, size_t) noexcept {}
	friend bool operator==(const fixed_resource &a, const fixed_resource &b)
	{
		return a.buf == b.buf;
	}
	friend bool operator!=(const fixed_resource &a, const fixed_resource &b)
	{
		return a.buf != b.buf;
	}
};

using g2g_req_t = decltype(cuda::execution::require(cuda::execution::determinism::gpu_to_gpu));
using stream_prop_t = cuda::std::execution::prop<cuda::get_stream_t, cuda::stream_ref>;
using mr_prop_t = cuda::std::execution::prop<cuda::mr::get_memory_resource_t, fixed_resource>;
using g2g_env_t = cuda::std::execution::env<g2g_req_t, stream_prop_t, mr_prop_t>;

enum impl { READ, CUB, CUB_G2G, EXACT, NIMPL };
static const char *const impl_name[NIMPL] = { "read", "cub", "cub-g2g", "exact" };

struct env {
	int sms, bw_blocks;
	unsigned char *pool, *rev;
	void *temp, *g2g_temp;
	size_t temp_bytes, g2g_most;
	gr_exact_scratch *scratch;
	gr_exact_sum *out;
	void *cub_out;
	float *sink;
	cudaEvent_t e0, e1;
	cudaStream_t st;
};

static g2g_env_t g2g_env(env &E)
{
	fixed_resource mr{ E.g2g_temp, (size_t)64 << 20, &E.g2g_most };
	return g2g_env_t{ cuda::execution::require(cuda::execution::determinism::gpu_to_gpu),
			  stream_prop_t{ cuda::get_stream, cuda::stream_ref{ E.st } },
			  mr_prop_t{ cuda::mr::get_memory_resource, mr } };
}

template <typename T> static void launch(env &E, int which, const T *in, size_t n)
{
	if (which == READ) {
		grb::read_bw(in, n * sizeof(T), E.bw_blocks, E.sink, E.st);
	} else if (which == CUB) {
		size_t tb = E.temp_bytes;
		CU(cub::DeviceReduce::Sum(E.temp, tb, in, (T *)E.cub_out, (int64_t)n, E.st));
	} else if (which == CUB_G2G) {
		CU(cub::DeviceReduce::Sum(in, (T *)E.cub_out, (int64_t)n, g2g_env(E)));
	} else {
		int dt = sizeof(T) == 4 ? GR_EXACT_F32 : GR_EXACT_F64;
		CU((cudaError_t)gr_exact_launch_single(dt, in, n, E.scratch, E.out, E.sms, E.st));
	}
}

/* one sum of n elements at in, read back: CUB's as T, ours folded */
template <typename T> static double result(env &E, int which, const T *in, size_t n)
{
	launch<T>(E, which, in, n);
	CU(cudaStreamSynchronize(E.st));
	if (which == EXACT) {
		gr_exact_sum s;
		CU(cudaMemcpy(&s, E.out, sizeof(s), cudaMemcpyDeviceToHost));
		return gr_exact_fold(&s, n);
	}
	T c;
	CU(cudaMemcpy(&c, E.cub_out, sizeof(c), cudaMemcpyDeviceToHost));
	return (double)c;
}

template <typename T> __global__ void reverse_kernel(const T *in, T *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[n - 1 - i] = in[i];
}

static bool same(double a, double b)
{
	return memcmp(&a, &b, 8) == 0;
}

/* the checks of one size (above); returns whether they passed */
template <typename T> static bool check(env &E, size_t n, bool *ret_order_free)
{
	const T *in = (const T *)E.pool;
	double x0 = result<T>(E, EXACT, in, n), x1 = result<T>(E, EXACT, in, n);
	double g0 = result<T>(E, CUB_G2G, in, n), g1 = result<T>(E, CUB_G2G, in, n);
	double c = result<T>(E, CUB, in, n);
	reverse_kernel<T><<<E.sms * 8, 256, 0, E.st>>>(in, (T *)E.rev, n);
	CU(cudaGetLastError());
	double gr = result<T>(E, CUB_G2G, (const T *)E.rev, n);
	double xr = result<T>(E, EXACT, (const T *)E.rev, n);
	*ret_order_free = same(g0, gr);
	double tol = (sizeof(T) == 4 ? 1e-5 : 1e-12) * (double)n;
	bool ok = same(x0, x1) && same(g0, g1) && same(x0, xr) && fabs(x0 - g0) <= tol &&
		  fabs(x0 - c) <= tol;
	if (!ok)
		fprintf(stderr, "n=%zu: exact %a %a (reversed %a), cub-g2g %a %a, cub %a\n", n, x0, x1,
			xr, g0, g1, c);
	return ok;
}

/* GB/s of one block of launches of which (see above), timed from the
 * place after the warm-up's three */
template <typename T> static double block_gbs(env &E, int which, size_t n)
{
	return grb::block_gbs(n * sizeof(T), /* from= */ 3, E.e0, E.e1, E.st, [&](size_t at) {
		launch<T>(E, which, (const T *)(E.pool + at), n);
	});
}

template <typename T> static bool bench(env &E, const char *dt, int hi, int reps)
{
	bool ok = true;
	grb::fill_kernel<T><<<E.sms * 8, 256, 0, E.st>>>((T *)E.pool, grb::POOL / sizeof(T),
							  0x1234567ull, 0);
	CU(cudaGetLastError());
	CU(cudaStreamSynchronize(E.st));
	printf("\n%s, uniform [-1, 1): back-to-back throughput, GB/s, medians of %d\n", dt, reps);
	printf("%10s | %9s %9s %9s %9s | %9s %9s %9s | %9s %9s | %s\n", "n", impl_name[READ],
	       impl_name[CUB], impl_name[CUB_G2G], impl_name[EXACT], "cub/rd", "g2g/rd", "exact/rd",
	       "exact/cub", "exact/g2g", "check (g2g order-free)");
	for (int e = 16; e <= 28; e += 2) {
		if (e > hi)
			continue;
		size_t n = (size_t)1 << e;
		bool order_free;
		bool good = check<T>(E, n, &order_free);
		ok = ok && good;
		std::vector<double> t[NIMPL];
		for (int r = 0; r < reps; r++)
			for (int w = 0; w < NIMPL; w++)
				t[w].push_back(block_gbs<T>(E, w, n));
		double m[NIMPL];
		for (int w = 0; w < NIMPL; w++)
			m[w] = median(t[w]);
		printf("%10zu | %9.1f %9.1f %9.1f %9.1f | %9.3f %9.3f %9.3f | %9.3f %9.3f | %s (%s)\n", n,
		       m[READ], m[CUB], m[CUB_G2G], m[EXACT], m[CUB] / m[READ], m[CUB_G2G] / m[READ],
		       m[EXACT] / m[READ], m[EXACT] / m[CUB], m[EXACT] / m[CUB_G2G],
		       good ? "ok" : "FAIL", order_free ? "yes" : "no");
		fflush(stdout);
	}
	return ok;
}

int main(int argc, char **argv)
{
	int hi = 28, reps = 5;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hi") && i + 1 < argc) {
			hi = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s [--hi E] [--reps R]\n", argv[0]);
			return 2;
		}
	}
	if (hi < 16 || hi > 28 || reps < 1) {
		fprintf(stderr, "need 16 <= hi <= 28 and reps >= 1\n");
		return 2;
	}
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		fprintf(stderr, "no CUDA device\n");
		return 77;
	}
	env E;
	cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, 0));
	E.sms = prop.multiProcessorCount;
	int per_sm = 0;
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grb::read_bw_kernel, 256, 0));
	E.bw_blocks = per_sm * E.sms;
	CU(cudaMalloc(&E.pool, grb::POOL));
	size_t nmax = (size_t)1 << hi, tb = 0;
	CU(cudaMalloc(&E.rev, nmax * 8));
	E.temp_bytes = 1 << 20;
	CU(cub::DeviceReduce::Sum(nullptr, tb, (const float *)nullptr, (float *)nullptr, (int64_t)nmax));
	E.temp_bytes = std::max(E.temp_bytes, tb);
	CU(cub::DeviceReduce::Sum(nullptr, tb, (const double *)nullptr, (double *)nullptr, (int64_t)nmax));
	E.temp_bytes = std::max(E.temp_bytes, tb);
	CU(cudaMalloc(&E.temp, E.temp_bytes));
	CU(cudaMalloc(&E.g2g_temp, (size_t)64 << 20));
	E.g2g_most = 0;
	CU(cudaMalloc(&E.scratch, sizeof(gr_exact_scratch)));
	CU(cudaMemset(E.scratch, 0, sizeof(gr_exact_scratch)));
	CU(cudaMalloc(&E.out, sizeof(gr_exact_sum)));
	CU(cudaMalloc(&E.cub_out, 64));
	CU(cudaMalloc(&E.sink, 64));
	CU(cudaEventCreate(&E.e0));
	CU(cudaEventCreate(&E.e1));
	CU(cudaStreamCreateWithFlags(&E.st, cudaStreamNonBlocking));
	int drv = 0, rt = 0;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	printf("device: %s (%d SMs), driver %d, runtime %d; CUB %d.%d.%d\n", prop.name, E.sms, drv, rt,
	       CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION);
	/* clocks up before anything is timed */
	for (int i = 0; i < 1000; i++)
		grb::read_bw(E.pool, (size_t)1 << 30, E.bw_blocks, E.sink, E.st);
	CU(cudaStreamSynchronize(E.st));

	bool ok = bench<float>(E, "f32", hi, reps);
	ok = bench<double>(E, "f64", hi, reps) && ok;
	printf("\ngpu_to_gpu temporary storage: %zu bytes at most\n", E.g2g_most);
	printf("%s\n", ok ? "all checks ok" : "SOME CHECKS FAILED");
	return ok ? 0 : 1;
}
