/*
 * gpured-kernel-bench: the reduction kernel next to CUB's DeviceReduce
 * (Sum, Min, Max) and a float4 read-bandwidth kernel, in one run.
 *
 * For each dtype (f32, f64, i32), op and n = 2^lo .. 2^hi (step 2^step):
 * single-launch latency (event before, launch, event after, median of
 * many; each launch reads a different place of a large pool, so that
 * small arrays do not stay in L2) and back-to-back throughput (GB/s), our
 * result checked against CUB's on every size (exactly for integers and
 * min/max, to a tolerance for float sums), and our min and max folded
 * both ways (--fold) against each other, bit for bit.
 *
 *   gpured-kernel-bench [--json] [--lo E] [--hi E] [--step S]
 *                       [--rmin R] [--rmax R] [--umax U] [--small ROWS]
 *                       [--small-rmin R] [--per-sm B]
 *                       [--group 8|16] [--fence sc|acqrel]
 *                       [--fold fast|plain] [--form auto|general]
 *
 * The last ten change our kernel's unit geometry, grid, rows in flight,
 * ticket fence, way a lane folds its elements and form from the
 * production ones (kernel.cuh: GEOMETRY, BLOCKS_PER_SM, GROUP,
 * launch_single_units' defaults; plain: every op into one accumulator,
 * min and max as one key per element, unit_fold's PLAIN; general: never
 * single_kernel's SMALL form), to tune them. Latency is also given
 * for an empty kernel, the floor that launch overhead sets.
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/cuda/cub-ref.cuh"
#include <cuda_runtime.h>

#include "cuda/kernel.cuh"

#define CU(call)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (call);                                                  \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,     \
				cudaGetErrorString(e_));                                  \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static const size_t POOL = ((size_t)1 << 31) + ((size_t)1 << 28);
static const size_t STRIDE_MIN = (size_t)1 << 20;

template <typename T> __global__ void fill_kernel(T *p, size_t n, uint64_t seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
		x ^= x >> 31;
		x *= 0xbf58476d1ce4e5b9ull;
		x ^= x >> 27;
		if constexpr (std::is_floating_point<T>::value)
			p[i] = (T)((double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
		else
			p[i] = (T)((int64_t)(x % 2001) - 1000);
	}
}

__global__ void read_bw_kernel(const float4 *p, size_t n4, float *out)
{
	float acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
	     i += (size_t)gridDim.x * blockDim.x) {
		float4 v = __ldg(p + i);
		acc += (v.x + v.y) + (v.z + v.w);
	}
	if (acc == 1.25e-30f)
		*out = acc;
}

/* One thread writes one word: the latency floor of a launch. */
__global__ void empty_kernel(uint64_t *out)
{
	if (threadIdx.x == 0)
		*out = 1;
}

struct env {
	int sms;
	grk::geometry geom;
	unsigned per_sm, group;
	bool acqrel, plain, general;
	int bw_blocks;
	unsigned char *pool;
	void *temp;
	size_t temp_bytes;
	uint64_t *partials, *out;
	uint32_t *ticket;
	void *cub_out;
	float *sink;
	cudaEvent_t e0, e1;
	cudaStream_t st;
};

static const char *op_names[] = { "sum", "min", "max" };

template <typename T> struct cub_out_type { using type = T; };
template <> struct cub_out_type<int32_t> { using type = long long; };

template <typename T, int OP> static void run_cub(env &E, const T *in, size_t n)
{
	using O = typename cub_out_type<T>::type;
	O *out = (O *)E.cub_out;
	size_t tb = E.temp_bytes;
	if constexpr (OP == grk::SUM)
		CU(cub::DeviceReduce::Sum(E.temp, tb, in, out, (int64_t)n, E.st));
	else if constexpr (OP == grk::MIN)
		CU(cub::DeviceReduce::Min(E.temp, tb, in, out, (int64_t)n, E.st));
	else
		CU(cub::DeviceReduce::Max(E.temp, tb, in, out, (int64_t)n, E.st));
}

template <typename T, int OP> static size_t cub_temp(size_t n)
{
	using O = typename cub_out_type<T>::type;
	size_t tb = 0;
	if constexpr (OP == grk::SUM)
		CU(cub::DeviceReduce::Sum(nullptr, tb, (const T *)nullptr, (O *)nullptr, (int64_t)n));
	else if constexpr (OP == grk::MIN)
		CU(cub::DeviceReduce::Min(nullptr, tb, (const T *)nullptr, (O *)nullptr, (int64_t)n));
	else
		CU(cub::DeviceReduce::Max(nullptr, tb, (const T *)nullptr, (O *)nullptr, (int64_t)n));
	return tb;
}

enum impl { OURS, CUB, BW };

template <typename T, int OP, bool PLAIN> static void launch_ours(env &E, const T *in, size_t n)
{
	uint32_t units = (uint32_t)grk::units_of(n, sizeof(T), E.geom);
#define GRB_LAUNCH(G, F)                                                                         \
	CU((grk::launch_single_units<T, OP, G, F, PLAIN>(in, n, units, E.partials, E.ticket, E.out, \
							E.sms, E.per_sm, E.st, E.general)))
	if (E.group == 16 && E.acqrel)
		GRB_LAUNCH(16, true);
	else if (E.group == 16)
		GRB_LAUNCH(16, false);
	else if (E.acqrel)
		GRB_LAUNCH(grk::GROUP, true);
	else
		GRB_LAUNCH(grk::GROUP, false);
#undef GRB_LAUNCH
}

template <typename T, int OP> static void launch(env &E, int which, const T *in, size_t n)
{
	if (which == OURS) {
		if (E.plain)
			launch_ours<T, OP, true>(E, in, n);
		else
			launch_ours<T, OP, false>(E, in, n);
	}
	else if (which == CUB)
		run_cub<T, OP>(E, in, n);
	else {
		size_t n4 = n * sizeof(T) / 16;
		unsigned blocks = (unsigned)std::min<size_t>((n4 + 255) / 256, (size_t)E.bw_blocks);
		read_bw_kernel<<<blocks ? blocks : 1, 256, 0, E.st>>>((const float4 *)in, n4, E.sink);
		CU(cudaGetLastError());
	}
}

struct pos {
	size_t stride, count;
	size_t at(size_t k) const { return (k % count) * stride; }
};

static pos positions(size_t bytes)
{
	pos p;
	p.stride = std::max(bytes, STRIDE_MIN);
	p.count = std::max<size_t>(1, std::min<size_t>(POOL / p.stride, 512));
	return p;
}

/*
 * Single-launch latency of ours and CUB's, median of iters each: the two
 * alternate launch by launch, so that both see the same clocks and the
 * same state of the GPU (measuring one after the other favours whichever
 * goes second while clocks settle).
 */
template <typename T, int OP>
static void latency_us(env &E, size_t n, int iters, double *ours, double *cub)
{
	pos P = positions(n * sizeof(T));
	std::vector<float> t[2];
	for (int i = -5; i < iters; i++) {
		for (int which = 0; which < 2; which++) {
			const T *in = (const T *)(E.pool + P.at((size_t)(2 * (i + 5) + which)));
			CU(cudaEventRecord(E.e0, E.st));
			launch<T, OP>(E, which == 0 ? OURS : CUB, in, n);
			CU(cudaEventRecord(E.e1, E.st));
			CU(cudaEventSynchronize(E.e1));
			float ms;
			CU(cudaEventElapsedTime(&ms, E.e0, E.e1));
			if (i >= 0)
				t[which].push_back(ms);
		}
	}
	for (auto &v : t)
		std::sort(v.begin(), v.end());
	*ours = t[0][t[0].size() / 2] * 1000.0;
	*cub = t[1][t[1].size() / 2] * 1000.0;
}

/* Back-to-back throughput of one implementation, one block of launches. */
template <typename T, int OP> static double throughput_gbs(env &E, int which, size_t n)
{
	size_t bytes = n * sizeof(T);
	pos P = positions(bytes);
	int k = (int)std::min<size_t>(2000, std::max<size_t>(20, ((size_t)1 << 30) / bytes));
	for (int i = 0; i < 3; i++)
		launch<T, OP>(E, which, (const T *)(E.pool + P.at((size_t)i)), n);
	CU(cudaEventRecord(E.e0, E.st));
	for (int i = 0; i < k; i++)
		launch<T, OP>(E, which, (const T *)(E.pool + P.at((size_t)i)), n);
	CU(cudaEventRecord(E.e1, E.st));
	CU(cudaEventSynchronize(E.e1));
	float ms;
	CU(cudaEventElapsedTime(&ms, E.e0, E.e1));
	return (double)bytes * k / (ms * 1e-3) / 1e9;
}

/* Throughput of ours, CUB's and (bw) the read-bandwidth kernel: blocks
 * of launches taken in turn, REPS times, the median of each. */
static const int REPS = 5;
template <typename T, int OP>
static void throughputs(env &E, size_t n, bool bw, double *ours, double *cub, double *rbw)
{
	std::vector<double> t[3];
	for (int r = 0; r < REPS; r++) {
		t[0].push_back(throughput_gbs<T, OP>(E, OURS, n));
		t[1].push_back(throughput_gbs<T, OP>(E, CUB, n));
		if (bw)
			t[2].push_back(throughput_gbs<T, OP>(E, BW, n));
	}
	for (auto &v : t)
		std::sort(v.begin(), v.end());
	*ours = t[0][REPS / 2];
	*cub = t[1][REPS / 2];
	if (bw)
		*rbw = t[2][REPS / 2];
}

struct row {
	const char *dt;
	int op;
	size_t n;
	double lat_ours, lat_cub, gbs_ours, gbs_cub, gbs_bw;
	bool ok;
};

/* Our answer at the pool's start against CUB's, and for min and max the
 * same bits from both ways of folding them (sums differ in their order). */
template <typename T, int OP> static bool verify(env &E, size_t n)
{
	const T *in = (const T *)E.pool;
	uint64_t ours, other = 0;
	if constexpr (OP != grk::SUM) {
		/* the other way of folding first: E.out is ours after this */
		if (E.plain)
			launch_ours<T, OP, false>(E, in, n);
		else
			launch_ours<T, OP, true>(E, in, n);
		CU(cudaStreamSynchronize(E.st));
		CU(cudaMemcpy(&other, E.out, 8, cudaMemcpyDeviceToHost));
	}
	launch<T, OP>(E, OURS, in, n);
	launch<T, OP>(E, CUB, in, n);
	CU(cudaStreamSynchronize(E.st));
	typename cub_out_type<T>::type theirs;
	CU(cudaMemcpy(&ours, E.out, 8, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(&theirs, E.cub_out, sizeof(theirs), cudaMemcpyDeviceToHost));
	if (OP != grk::SUM && ours != other) {
		fprintf(stderr, "mismatch: %s n=%zu fast and plain folds give %llx and %llx\n",
			op_names[OP], n, (unsigned long long)(E.plain ? other : ours),
			(unsigned long long)(E.plain ? ours : other));
		return false;
	}
	if constexpr (std::is_floating_point<T>::value) {
		double o;
		memcpy(&o, &ours, 8);
		double tol = OP == grk::SUM ? (sizeof(T) == 4 ? 1e-5 : 1e-12) * (double)n : 0.0;
		if (!(fabs(o - (double)theirs) <= tol)) {
			fprintf(stderr, "mismatch: %s n=%zu ours %.17g cub %.17g\n", op_names[OP], n, o,
				(double)theirs);
			return false;
		}
	} else {
		if ((long long)ours != (long long)theirs) {
			fprintf(stderr, "mismatch: %s n=%zu ours %lld cub %lld\n", op_names[OP], n,
				(long long)ours, (long long)theirs);
			return false;
		}
	}
	return true;
}

template <typename T, int OP>
static void bench_op(env &E, const char *dt, int lo, int hi, int step, std::vector<row> &rows,
		     std::vector<double> &bw)
{
	for (int e = lo, k = 0; e <= hi; e += step, k++) {
		size_t n = (size_t)1 << e;
		row r;
		r.dt = dt;
		r.op = OP;
		r.n = n;
		r.ok = verify<T, OP>(E, n);
		int iters = e <= 22 ? 200 : 30;
		latency_us<T, OP>(E, n, iters, &r.lat_ours, &r.lat_cub);
		throughputs<T, OP>(E, n, OP == grk::SUM, &r.gbs_ours, &r.gbs_cub, &bw[k]);
		r.gbs_bw = bw[k];
		rows.push_back(r);
	}
}

template <typename T>
static void bench_dtype(env &E, const char *dt, int lo, int hi, int step, std::vector<row> &rows)
{
	fill_kernel<T><<<E.sms * 8, 256, 0, E.st>>>((T *)E.pool, POOL / sizeof(T), 0x1234567ull);
	CU(cudaGetLastError());
	CU(cudaStreamSynchronize(E.st));
	std::vector<double> bw((size_t)(hi - lo) / step + 1);
	bench_op<T, grk::SUM>(E, dt, lo, hi, step, rows, bw);
	bench_op<T, grk::MIN>(E, dt, lo, hi, step, rows, bw);
	bench_op<T, grk::MAX>(E, dt, lo, hi, step, rows, bw);
}

int main(int argc, char **argv)
{
	bool json = false;
	int lo = 10, hi = 28, step = 2;
	grk::geometry geom = grk::GEOMETRY;
	unsigned per_sm = grk::BLOCKS_PER_SM, group = grk::GROUP;
	bool acqrel = false, plain = false, bad_fold = false, general = false, bad_form = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--lo") && i + 1 < argc)
			lo = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--hi") && i + 1 < argc)
			hi = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--step") && i + 1 < argc)
			step = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rmin") && i + 1 < argc)
			geom.rmin = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rmax") && i + 1 < argc)
			geom.rmax = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--umax") && i + 1 < argc)
			geom.umax = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--small") && i + 1 < argc)
			geom.small_rows = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--small-rmin") && i + 1 < argc)
			geom.small_rmin = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--per-sm") && i + 1 < argc)
			per_sm = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--group") && i + 1 < argc)
			group = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--fence") && i + 1 < argc)
			acqrel = !strcmp(argv[++i], "acqrel");
		else if (!strcmp(argv[i], "--fold") && i + 1 < argc) {
			plain = !strcmp(argv[++i], "plain");
			bad_fold = !plain && strcmp(argv[i], "fast");
		} else if (!strcmp(argv[i], "--form") && i + 1 < argc) {
			general = !strcmp(argv[++i], "general");
			bad_form = !general && strcmp(argv[i], "auto");
		} else {
			fprintf(stderr,
				"usage: %s [--json] [--lo E] [--hi E] [--step S] [--rmin R] [--rmax R] "
				"[--umax U] [--small ROWS] [--small-rmin R] [--per-sm B] "
				"[--group 8|16] [--fence sc|acqrel] [--fold fast|plain] "
				"[--form auto|general]\n",
				argv[0]);
			return 2;
		}
	}
	if (lo < 4 || hi > 28 || lo > hi || step < 1) {
		fprintf(stderr, "need 4 <= lo <= hi <= 28, step >= 1\n");
		return 2;
	}
	if (geom.rmin < 1 || geom.rmin > geom.rmax || geom.rmax > 65536 || geom.umax < 1 ||
	    per_sm < 1 || geom.small_rmin < 1 || (group != grk::GROUP && group != 16) ||
	    bad_fold || bad_form) {
		fprintf(stderr, "need 1 <= rmin <= rmax <= 65536, umax >= 1, small-rmin >= 1, "
				"per-sm >= 1, group 8 or 16, fold fast or plain, form auto or general\n");
		return 2;
	}
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		fprintf(stderr, "no CUDA device\n");
		return 77;
	}
	env E;
	E.geom = geom;
	E.per_sm = per_sm;
	E.group = group;
	E.acqrel = acqrel;
	E.plain = plain;
	E.general = general;
	cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, 0));
	E.sms = prop.multiProcessorCount;
	int bw_per_sm = 0;
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bw_per_sm, read_bw_kernel, 256, 0));
	E.bw_blocks = bw_per_sm * E.sms;
	int drv = 0, rt = 0;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	CU(cudaMalloc(&E.pool, POOL));
	size_t nmax = (size_t)1 << hi;
	E.temp_bytes = std::max({ cub_temp<float, grk::SUM>(nmax), cub_temp<double, grk::SUM>(nmax),
				  cub_temp<int32_t, grk::SUM>(nmax), cub_temp<float, grk::MIN>(nmax),
				  cub_temp<double, grk::MAX>(nmax), cub_temp<int32_t, grk::MAX>(nmax) });
	E.temp_bytes = std::max<size_t>(E.temp_bytes, 1 << 20);
	CU(cudaMalloc(&E.temp, E.temp_bytes));
	CU(cudaMalloc(&E.partials, 1 << 20));
	CU(cudaMalloc(&E.out, 64));
	CU(cudaMalloc(&E.ticket, 1 << 20));
	CU(cudaMemset(E.ticket, 0, 1 << 20));
	CU(cudaMalloc(&E.cub_out, 64));
	CU(cudaMalloc(&E.sink, 64));
	CU(cudaEventCreate(&E.e0));
	CU(cudaEventCreate(&E.e1));
	CU(cudaStreamCreateWithFlags(&E.st, cudaStreamNonBlocking));

	/* clocks up before anything is timed: a quarter second of reading */
	for (int i = 0; i < 1000; i++)
		launch<float, grk::SUM>(E, BW, (const float *)E.pool, (size_t)1 << 28);
	CU(cudaStreamSynchronize(E.st));
	double empty_us;
	{
		std::vector<float> t;
		for (int i = -5; i < 200; i++) {
			CU(cudaEventRecord(E.e0, E.st));
			empty_kernel<<<1, 32, 0, E.st>>>(E.out);
			CU(cudaGetLastError());
			CU(cudaEventRecord(E.e1, E.st));
			CU(cudaEventSynchronize(E.e1));
			float ms;
			CU(cudaEventElapsedTime(&ms, E.e0, E.e1));
			if (i >= 0)
				t.push_back(ms);
		}
		std::sort(t.begin(), t.end());
		empty_us = t[t.size() / 2] * 1000.0;
	}

	std::vector<row> rows;
	bench_dtype<float>(E, "f32", lo, hi, step, rows);
	bench_dtype<double>(E, "f64", lo, hi, step, rows);
	bench_dtype<int32_t>(E, "i32", lo, hi, step, rows);

	bool all_ok = true;
	for (const row &r : rows)
		all_ok = all_ok && r.ok;
	if (json) {
		printf("{\"device\": \"%s\", \"sms\": %d, \"driver\": %d, \"runtime\": %d, "
		       "\"geometry\": {\"rmin\": %u, \"rmax\": %u, \"umax\": %u, \"small_rows\": %u, "
		       "\"small_rmin\": %u, \"per_sm\": %u, \"group\": %u, "
		       "\"fence\": \"%s\", \"fold\": \"%s\", \"form\": \"%s\"}, "
		       "\"empty_kernel_latency_us\": %.2f, \"results_match_cub\": %s, \"rows\": [\n",
		       prop.name, E.sms, drv, rt, geom.rmin, geom.rmax, geom.umax, geom.small_rows,
		       geom.small_rmin, per_sm, group,
		       acqrel ? "acq_rel" : "sc", plain ? "plain" : "fast",
		       general ? "general" : "auto", empty_us,
		       all_ok ? "true" : "false");
		for (size_t i = 0; i < rows.size(); i++) {
			const row &r = rows[i];
			printf("  {\"dtype\": \"%s\", \"op\": \"%s\", \"n\": %zu, \"latency_us\": "
			       "{\"ours\": %.2f, \"cub\": %.2f}, \"throughput_gbs\": {\"ours\": %.1f, "
			       "\"cub\": %.1f, \"read_bw\": %.1f}, \"match\": %s}%s\n",
			       r.dt, op_names[r.op], r.n, r.lat_ours, r.lat_cub, r.gbs_ours, r.gbs_cub,
			       r.gbs_bw, r.ok ? "true" : "false", i + 1 < rows.size() ? "," : "");
		}
		printf("]}\n");
	} else {
		printf("device: %s (%d SMs), driver %d, runtime %d\n", prop.name, E.sms, drv, rt);
		printf("geometry: rmin %u, rmax %u, umax %u, small %u rows (units of %u rows or "
		       "more), %u blocks per SM, %u rows in flight per lane, %s ticket fence, "
		       "%s fold, %s form\n",
		       geom.rmin, geom.rmax, geom.umax, geom.small_rows, geom.small_rmin, per_sm, group,
		       acqrel ? "acq_rel" : "sc", plain ? "plain" : "fast",
		       general ? "general" : "auto");
		printf("empty kernel latency: %.2f us\n", empty_us);
		printf("latency: one launch, event to event, median; throughput: back to back\n");
		printf("%-4s %-4s %10s | %9s %9s %6s | %9s %9s %6s %9s %7s | %s\n", "type", "op", "n",
		       "ours us", "cub us", "ratio", "ours GB/s", "cub GB/s", "ratio", "read GB/s",
		       "%ceil", "check");
		for (const row &r : rows)
			printf("%-4s %-4s %10zu | %9.2f %9.2f %6.2f | %9.1f %9.1f %6.2f %9.1f %6.1f%% | %s\n",
			       r.dt, op_names[r.op], r.n, r.lat_ours, r.lat_cub, r.lat_ours / r.lat_cub,
			       r.gbs_ours, r.gbs_cub, r.gbs_ours / r.gbs_cub, r.gbs_bw,
			       100.0 * r.gbs_ours / r.gbs_bw, r.ok ? "ok" : "MISMATCH");
	}
	return all_ok ? 0 : 1;
}
