/*
 * gpured-ops-bench: the segmented sum and the inclusive prefix sum kernels
 * next to CUB (cub::DeviceSegmentedReduce::Sum, cub::DeviceScan::
 * InclusiveSum) on the same inputs and output types, in one run.
 *
 *   gpured-ops-bench [--reps N] [--seg-only | --segred-only | --scan-only |
 *                     --scan-knobs | --argm-only]
 *
 * Each row: a warm-up of both, then N repetitions (default 41 up to 2^24
 * elements, 15 above), each timing one launch of ours and one of CUB's
 * between CUDA events, the two in turns that alternate which goes first;
 * the median of each. Inputs (and outputs) rotate through copies spread
 * over at least 768 MiB, so small sizes are not L2 hits. ratio =
 * CUB's time / ours (above 1: ours is faster). Our results are checked
 * against CUB's (integers exactly where CUB's own arithmetic cannot
 * overflow, floats to a tolerance: CUB's float scan adds in float).
 * The segred rows time the daemon's segmented reduce (segred.h: the
 * reduce and the finish, the scratch left zero from one launch to the
 * next as the daemon keeps it; float sums exact, and timed again with a
 * memset of the scratch each launch) against CUB's segmented Sum (in
 * double for floats, rounding as it goes) or Min.
 * The scan rows also time a copy kernel that reads the input and writes
 * 8 bytes an element, the ceiling for a scan's traffic; --scan-knobs
 * times only the scan kernel's other builds (scan.cuh's kn), with a
 * "prof" line of the production build's phases. A table goes to
 * stdout, then one JSON line a row.
 */
#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/cuda/cub-ref.cuh"
#include <cuda_runtime.h>

#include "cuda/argm.cuh"
#include "cuda/scan.cuh"
#include "cuda/segmented.cuh"
#include "cuda/segred.h"

#define CU(call)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (cudaError_t)(call);                                     \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,     \
				cudaGetErrorString(e_));                                  \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

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

/* Reads n elements, writes n 8-byte values: a scan's traffic, no scan. */
template <typename T, typename O> __global__ void copy_kernel(const T *in, O *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = (O)in[i];
}

template <typename T> struct wide { using type = double; };
template <> struct wide<int32_t> { using type = long long; };
template <> struct wide<uint32_t> { using type = unsigned long long; };
template <> struct wide<int64_t> { using type = long long; };

template <typename T> constexpr int dtype_of();
template <> constexpr int dtype_of<int32_t>() { return 0; }
template <> constexpr int dtype_of<float>() { return 4; }
template <> constexpr int dtype_of<double>() { return 5; }
template <typename T> const char *dtype_name()
{
	return dtype_of<T>() == 0 ? "i32" : dtype_of<T>() == 4 ? "f32" : "f64";
}

static cudaStream_t st;
static cudaEvent_t ev[4];
static int sms;
static std::vector<std::string> json;

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

/* Time two launchers in alternating turns; medians in µs. */
template <typename F, typename G>
static void time_pair(F ours, G theirs, int reps, int warm, double *ours_us, double *theirs_us)
{
	for (int i = 0; i < warm; i++) {
		ours(i);
		theirs(i);
	}
	CU(cudaStreamSynchronize(st));
	std::vector<double> a, b;
	for (int r = 0; r < reps; r++) {
		bool first = r & 1;
		CU(cudaEventRecord(ev[0], st));
		if (first)
			theirs(r);
		else
			ours(r);
		CU(cudaEventRecord(ev[1], st));
		CU(cudaEventRecord(ev[2], st));
		if (first)
			ours(r);
		else
			theirs(r);
		CU(cudaEventRecord(ev[3], st));
		CU(cudaEventSynchronize(ev[3]));
		float t0, t1;
		CU(cudaEventElapsedTime(&t0, ev[0], ev[1]));
		CU(cudaEventElapsedTime(&t1, ev[2], ev[3]));
		a.push_back((first ? t1 : t0) * 1e3);
		b.push_back((first ? t0 : t1) * 1e3);
	}
	*ours_us = median(a);
	*theirs_us = median(b);
}

/* ---- segmented sums ---- */

template <typename T, unsigned U = grseg::tuning<T>::U, unsigned MINB = grseg::tuning<T>::MINB>
static void seg_row(const char *name, const std::vector<uint64_t> &len, int reps)
{
	using O = typename wide<T>::type;
	const uint64_t k = len.size();
	std::vector<uint64_t> off(k + 1, 0);
	for (uint64_t s = 0; s < k; s++)
		off[s + 1] = off[s] + len[s];
	const uint64_t count = off[k];
	T *x;
	uint64_t *doff;
	O *o1, *o2;
	CU(cudaMalloc(&x, count * sizeof(T) + 16));
	CU(cudaMalloc(&doff, (k + 1) * 8));
	CU(cudaMalloc(&o1, k * 8));
	CU(cudaMalloc(&o2, k * 8));
	fill_kernel<T><<<1024, 256, 0, st>>>(x, count, 12345);
	CU(cudaMemcpy(doff, off.data(), (k + 1) * 8, cudaMemcpyHostToDevice));
	size_t wb = gr_segsum_workspace_bytes(count, sizeof(T));
	void *ws;
	CU(cudaMalloc(&ws, wb));
	CU(cudaMemset(ws, 0, wb));
	size_t tb = 0;
	CU(cub::DeviceSegmentedReduce::Sum(nullptr, tb, x, o2, (int64_t)k, doff, doff + 1, st));
	void *temp;
	CU(cudaMalloc(&temp, tb + 16));
	CU(cudaDeviceSynchronize());

	double us_ours, us_cub;
	time_pair([&](int) { CU((grseg::launch<T, U, MINB>(x, count, doff, k, o1, ws, wb, st))); },
		  [&](int) {
			  size_t t = tb;
			  CU(cub::DeviceSegmentedReduce::Sum(temp, t, x, o2, (int64_t)k, doff, doff + 1, st));
		  },
		  reps, 5, &us_ours, &us_cub);
	CU(cudaDeviceSynchronize());

	std::vector<O> a(k), b(k);
	CU(cudaMemcpy(a.data(), o1, k * 8, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(b.data(), o2, k * 8, cudaMemcpyDeviceToHost));
	uint64_t bad = 0;
	for (uint64_t s = 0; s < k; s++) {
		if constexpr (std::is_floating_point<T>::value) {
			if (!(fabs((double)a[s] - (double)b[s]) <= 1e-9 * (double)(len[s] + 1)))
				bad++;
		} else if (a[s] != b[s]) {
			bad++;
		}
	}
	double gb = count * sizeof(T) / 1e9;
	double ratio = us_cub / us_ours;
	char vname[64];
	snprintf(vname, sizeof vname, "%s%s", name,
		 U == grseg::tuning<T>::U && MINB == grseg::tuning<T>::MINB ? "" : " (variant)");
	printf("segsum  %-14s U=%-2u MINB=%u %s %8llu segs %11llu elems | ours %9.2f us %7.1f GB/s | cub %9.2f us %7.1f GB/s | ratio %.3f | %s\n",
	       name, U, MINB, dtype_name<T>(), (unsigned long long)k, (unsigned long long)count, us_ours,
	       gb / (us_ours * 1e-6), us_cub, gb / (us_cub * 1e-6), ratio, bad ? "FAIL" : "PASS");
	char line[512];
	snprintf(line, sizeof line,
		 "{\"bench\":\"segsum\",\"case\":\"%s\",\"u\":%u,\"minb\":%u,\"dtype\":\"%s\",\"segments\":%llu,\"elements\":%llu,"
		 "\"ours_us\":%.3f,\"cub_us\":%.3f,\"ours_gbs\":%.1f,\"cub_gbs\":%.1f,\"ratio\":%.4f,\"check\":\"%s\"}",
		 vname, U, MINB, dtype_name<T>(), (unsigned long long)k, (unsigned long long)count, us_ours, us_cub,
		 gb / (us_ours * 1e-6), gb / (us_cub * 1e-6), ratio, bad ? "FAIL" : "PASS");
	json.push_back(line);
	CU(cudaFree(x));
	CU(cudaFree(doff));
	CU(cudaFree(o1));
	CU(cudaFree(o2));
	CU(cudaFree(ws));
	CU(cudaFree(temp));
}

static uint64_t lrng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand()
{
	lrng ^= lrng << 13;
	lrng ^= lrng >> 7;
	lrng ^= lrng << 17;
	return lrng;
}

static std::vector<uint64_t> lengths(uint64_t k, uint64_t lo, uint64_t hi)
{
	std::vector<uint64_t> v(k);
	for (auto &l : v)
		l = lo + next_rand() % (hi - lo + 1);
	return v;
}

static void seg_all(int reps)
{
	lrng = 0x2545f4914f6cdd1dull;
	auto target = lengths(100000, 1, 4096);
	seg_row<float>("rand 1-4096", target, reps);
	/* the tuning knobs, on the target case */
	seg_row<float, 8, 1>("rand 1-4096", target, reps);
	seg_row<float, 8, 4>("rand 1-4096", target, reps);
	seg_row<float, 16, 5>("rand 1-4096", target, reps);
	seg_row<float, 32, 4>("rand 1-4096", target, reps);
	seg_row<float, 32, 2>("rand 1-4096", target, reps);
	seg_row<int32_t>("rand 1-4096", target, reps);
	seg_row<double>("rand 1-4096", target, reps);
	seg_row<float>("rows of 256", std::vector<uint64_t>(100000, 256), reps);
	seg_row<float>("rand 1-64", lengths(1000000, 1, 64), reps);
	seg_row<float>("rand 0-8", lengths(1000000, 0, 8), reps);
	seg_row<float>("100 x 2^20", std::vector<uint64_t>(100, 1u << 20), reps);
	auto skew = lengths(10000, 1, 256);
	skew[17] = 50000000;
	seg_row<float>("skewed", skew, reps);
}

/* ---- the daemon's segmented reduce (segred.h) ---- */

struct cub_min_op {
	template <typename A, typename B> __device__ __forceinline__ A operator()(const A &a, const B &b) const
	{
		return (A)b < a ? (A)b : a;
	}
};

/* op 0 sum, 1 min, 3 sumsq (CUB: the sum of the squares' values is not
 * at hand, so sumsq is timed against CUB's Sum of the same elements), 4
 * argmin (CUB's segmented ArgMin), 6 moments (the sums a launch leaves,
 * without the host's records; timed against CUB's Sum, as sumsq) */
template <typename T>
static void segred_row(const char *name, int op, const std::vector<uint64_t> &len, int reps,
		       uint64_t zero_lead = 0)
{
	using O = typename wide<T>::type;
	const uint64_t k = len.size();
	std::vector<uint64_t> off(k + 1, 0);
	for (uint64_t s = 0; s < k; s++)
		off[s + 1] = off[s] + len[s];
	const uint64_t count = off[k];
	T *x;
	uint64_t *doff;
	uint64_t *o1;
	O *o2;
	CU(cudaMalloc(&x, count * sizeof(T) + 16));
	CU(cudaMalloc(&doff, (k + 1) * 8));
	CU(cudaMalloc(&o1, k * std::max<size_t>(16, gr_segred_record_bytes(op, dtype_of<T>()))));
	CU(cudaMalloc(&o2, k * 8));
	fill_kernel<T><<<1024, 256, 0, st>>>(x, count, 12345);
	/* rows of one length that begin with zero_lead zeros (left-padded
	 * rows) */
	if (zero_lead)
		CU(cudaMemset2DAsync(x, len[0] * sizeof(T), 0, zero_lead * sizeof(T), k, st));
	CU(cudaMemcpy(doff, off.data(), (k + 1) * 8, cudaMemcpyHostToDevice));
	size_t sb = gr_segred_scratch_per_seg(op, dtype_of<T>()) * k + 16;
	void *scratch;
	CU(cudaMalloc(&scratch, sb));
	using KV = cub::KeyValuePair<int, T>;
	KV *kv;
	CU(cudaMalloc(&kv, k * sizeof(KV)));
	size_t tb = 0;
	if (op == 4)
		CU(cub::DeviceSegmentedReduce::ArgMin(nullptr, tb, x, kv, (int64_t)k, doff, doff + 1, st));
	else if (op == 1)
		CU(cub::DeviceSegmentedReduce::Reduce(nullptr, tb, x, o2, (int64_t)k, doff, doff + 1,
						      cub_min_op(), (O)std::numeric_limits<T>::max(), st));
	else
		CU(cub::DeviceSegmentedReduce::Sum(nullptr, tb, x, o2, (int64_t)k, doff, doff + 1, st));
	void *temp;
	CU(cudaMalloc(&temp, tb + 16));
	CU(cudaDeviceSynchronize());

	/* the daemon keeps the scratch's zeros from one launch to the next
	 * (segred.h's scratch_zero); the exact sums are timed a second time
	 * clearing it each launch, as before that */
	size_t zero = 0;
	auto cub_launch = [&](int) {
		size_t t = tb;
		if (op == 4)
			CU(cub::DeviceSegmentedReduce::ArgMin(temp, t, x, kv, (int64_t)k, doff, doff + 1,
							      st));
		else if (op == 1)
			CU(cub::DeviceSegmentedReduce::Reduce(temp, t, x, o2, (int64_t)k, doff, doff + 1,
							      cub_min_op(),
							      (O)std::numeric_limits<T>::max(), st));
		else
			CU(cub::DeviceSegmentedReduce::Sum(temp, t, x, o2, (int64_t)k, doff, doff + 1, st));
	};
	double us_ours, us_cub, us_clear = 0, us_cub2 = 0;
	time_pair(
		[&](int) {
			CU(gr_segred_launch(op, dtype_of<T>(), x, doff, k, 0, count, o1, scratch, sb, &zero,
					    st));
		},
		cub_launch, reps, 5, &us_ours, &us_cub);
	const bool exact = (op == 0 && std::is_floating_point<T>::value) || op == 3;
	if (exact)
		time_pair(
			[&](int) {
				CU(gr_segred_launch(op, dtype_of<T>(), x, doff, k, 0, count, o1, scratch, sb,
						    NULL, st));
			},
			cub_launch, reps, 5, &us_clear, &us_cub2);
	CU(cudaDeviceSynchronize());

	const unsigned w = (unsigned)gr_segred_record_bytes(op, dtype_of<T>()) / 8;
	std::vector<uint64_t> a(k * w);
	std::vector<O> b(k);
	std::vector<KV> c(k);
	CU(cudaMemcpy(a.data(), o1, k * 8 * w, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(b.data(), o2, k * 8, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(c.data(), kv, k * sizeof(KV), cudaMemcpyDeviceToHost));
	uint64_t bad = 0;
	for (uint64_t s = 0; s < k && op == 4; s++) {
		/* the same index (the first minimum) and value */
		double v;
		memcpy(&v, &a[2 * s], 8);
		if (a[2 * s + 1] != (uint64_t)c[s].key || v != (double)c[s].value)
			bad++;
	}
	const bool unchecked = op == 3 || op == 6;
	for (uint64_t s = 0; s < k && !unchecked && op != 4; s++) {
		if constexpr (std::is_floating_point<T>::value) {
			double v;
			memcpy(&v, &a[s], 8);
			if (!(fabs(v - (double)b[s]) <= 1e-9 * (double)(len[s] + 1)))
				bad++;
		} else if ((O)a[s] != b[s]) {
			bad++;
		}
	}
	const char *opn = op == 0   ? "sum"
			  : op == 1 ? "min"
			  : op == 3 ? "sumsq"
			  : op == 4 ? "argmin"
				    : "moments";
	double gb = count * sizeof(T) / 1e9;
	double ratio = us_cub / us_ours;
	printf("segred  %-14s %-5s %s %8llu segs %11llu elems | ours %9.2f us %7.1f GB/s | cub %9.2f us %7.1f GB/s | ratio %.3f | %s",
	       name, opn, dtype_name<T>(), (unsigned long long)k, (unsigned long long)count, us_ours,
	       gb / (us_ours * 1e-6), us_cub, gb / (us_cub * 1e-6), ratio,
	       unchecked ? "unchecked" : bad ? "FAIL" : "PASS");
	if (exact)
		printf(" | clearing each launch: ours %9.2f us, cub %9.2f us, ratio %.3f", us_clear,
		       us_cub2, us_cub2 / us_clear);
	printf("\n");
	char line[512];
	snprintf(line, sizeof line,
		 "{\"bench\":\"segred\",\"case\":\"%s\",\"op\":\"%s\",\"dtype\":\"%s\",\"segments\":%llu,\"elements\":%llu,"
		 "\"ours_us\":%.3f,\"cub_us\":%.3f,\"ours_gbs\":%.1f,\"cub_gbs\":%.1f,\"ratio\":%.4f,\"check\":\"%s\","
		 "\"clearing_us\":%.3f,\"clearing_cub_us\":%.3f}",
		 name, opn, dtype_name<T>(), (unsigned long long)k, (unsigned long long)count, us_ours, us_cub,
		 gb / (us_ours * 1e-6), gb / (us_cub * 1e-6), ratio, unchecked ? "unchecked" : bad ? "FAIL" : "PASS",
		 us_clear, us_cub2);
	json.push_back(line);
	CU(cudaFree(x));
	CU(cudaFree(doff));
	CU(cudaFree(o1));
	CU(cudaFree(o2));
	CU(cudaFree(scratch));
	CU(cudaFree(temp));
	CU(cudaFree(kv));
}

static void segred_all(int reps)
{
	lrng = 0x2545f4914f6cdd1dull;
	auto target = lengths(100000, 1, 4096);
	segred_row<float>("rand 1-4096", 0, target, reps);
	segred_row<double>("rand 1-4096", 0, target, reps);
	segred_row<int32_t>("rand 1-4096", 0, target, reps);
	segred_row<float>("rand 1-4096", 1, target, reps);
	segred_row<float>("rand 1-4096", 4, target, reps);
	segred_row<float>("rows of 256", 4, std::vector<uint64_t>(100000, 256), reps);
	segred_row<float>("rand 1-4096", 3, target, reps);
	segred_row<double>("rand 1-4096", 3, target, reps);
	segred_row<int32_t>("rand 1-4096", 3, target, reps);
	segred_row<float>("rows of 256", 0, std::vector<uint64_t>(100000, 256), reps);
	segred_row<float>("rand 1-64", 0, lengths(1000000, 1, 64), reps);
	segred_row<float>("rand 0-8", 0, lengths(1000000, 0, 8), reps);
	segred_row<float>("100 x 2^20", 0, std::vector<uint64_t>(100, 1u << 20), reps);
	segred_row<float>("4096, 0 lead", 0, std::vector<uint64_t>(50000, 4096), reps);
	segred_row<float>("4096, 128 lead", 0, std::vector<uint64_t>(50000, 4096), reps, 128);
	segred_row<float>("rand 1-4096", 6, target, reps);
	segred_row<double>("rand 1-4096", 6, target, reps);
	segred_row<int32_t>("rand 1-4096", 6, target, reps);
	segred_row<float>("rows of 256", 6, std::vector<uint64_t>(100000, 256), reps);
}

/* ---- prefix sums ---- */

static const size_t IN_POOL = (size_t)2 << 30, OUT_POOL = (size_t)2 << 30;
static unsigned char *in_pool, *out_pool, *cub_pool;

/* where stamped launches write outside scan_prof (as many tiles as 2^28 elements make) */
static uint64_t *prof_sink;

/* One launch with its blocks' phases stamped (kn::PROF): the mean
 * cycles of each phase, a block's mean life, and how many blocks an SM
 * held on average. */
template <typename T, unsigned KN>
static void scan_prof(const void *in, uint64_t n, void *out, void *ws, uint32_t epoch)
{
	uint64_t nt = grscan::tiles_of(n), *d;
	CU(cudaMalloc(&d, nt * 64));
	CU(cudaMemcpyToSymbol(grscan::prof, &d, sizeof d));
	CU((grscan::launch<T, KN>(in, n, out, ws, epoch, st)));
	CU(cudaDeviceSynchronize());
	CU(cudaMemcpyToSymbol(grscan::prof, &prof_sink, sizeof d));
	std::vector<uint64_t> h(nt * 8);
	CU(cudaMemcpy(h.data(), d, nt * 64, cudaMemcpyDeviceToHost));
	CU(cudaFree(d));
	double ph[4] = { 0 }, life = 0;
	uint64_t t0 = UINT64_MAX, t1 = 0, inorder = 0;
	for (uint64_t j = 0; j < nt; j++) {
		const uint64_t *p = &h[j * 8];
		for (int k = 0; k < 4; k++)
			ph[k] += (double)p[1 + k];
		life += (double)(p[6] - p[0]);
		t0 = std::min(t0, p[0]);
		t1 = std::max(t1, p[6]);
		inorder += p[7] == j;
	}
	printf("prof    KN=%#x n=%llu tiles=%llu | cycles: ticket %.0f load+reduce %.0f lookback %.0f store %.0f | "
	       "life %.0f ns | span %.1f us | blocks/SM %.2f | ticket==block %.3f\n",
	       KN, (unsigned long long)n, (unsigned long long)nt, ph[0] / nt, ph[1] / nt, ph[2] / nt, ph[3] / nt,
	       life / nt, (t1 - t0) / 1e3, life / ((double)(t1 - t0) * sms), (double)inorder / nt);
}

template <typename T, unsigned KN = grscan::tuning<T>::KN>
static void scan_row(uint64_t n, int reps)
{
	using O = typename wide<T>::type;
	const size_t ib = n * sizeof(T), ob = n * 8;
	size_t slots = std::min(IN_POOL / ib, OUT_POOL / ob);
	slots = std::max<size_t>(1, std::min<size_t>(slots, 64));
	/* at least 768 MiB of traffic between two uses of one copy */
	fill_kernel<T><<<1024, 256, 0, st>>>((T *)in_pool, n * slots, 777);
	size_t wb = gr_scan_workspace_bytes(n);
	void *ws;
	CU(cudaMalloc(&ws, wb));
	CU(cudaMemset(ws, 0, wb));
	uint32_t epoch = 0;
	size_t tb = 0;
	CU(cub::DeviceScan::InclusiveSum(nullptr, tb, (const T *)in_pool, (O *)cub_pool, (int64_t)n, st));
	void *temp;
	CU(cudaMalloc(&temp, tb + 16));
	CU(cudaDeviceSynchronize());
	auto in_at = [&](int r) { return (const T *)(in_pool + (size_t)(r % slots) * ib); };
	auto out_at = [&](int r) { return (O *)(out_pool + (size_t)(r % slots) * ob); };

	double us_ours, us_cub, us_copy, dummy;
	time_pair([&](int r) { CU((grscan::launch<T, KN>(in_at(r), n, out_at(r), ws, ++epoch, st))); },
		  [&](int r) {
			  size_t t = tb;
			  CU(cub::DeviceScan::InclusiveSum(temp, t, in_at(r), (O *)cub_pool, (int64_t)n, st));
		  },
		  reps, 5, &us_ours, &us_cub);
	time_pair([&](int r) { copy_kernel<T, O><<<sms * 8, 256, 0, st>>>(in_at(r), out_at(r + 1), n); },
		  [&](int) {}, reps, 2, &us_copy, &dummy);
	if constexpr ((KN & grscan::kn::PROF) != 0)
		scan_prof<T, KN>(in_at(1), n, out_at(1), ws, ++epoch);
	/* the check: slot 0 through both */
	CU((grscan::launch<T, KN>(in_at(0), n, out_at(0), ws, ++epoch, st)));
	size_t t = tb;
	CU(cub::DeviceScan::InclusiveSum(temp, t, in_at(0), (O *)cub_pool, (int64_t)n, st));
	CU(cudaDeviceSynchronize());
	std::vector<T> h(n);
	std::vector<O> a(n), b(n);
	CU(cudaMemcpy(h.data(), in_at(0), ib, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(a.data(), out_at(0), ob, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(b.data(), cub_pool, ob, cudaMemcpyDeviceToHost));
	uint64_t bad = 0;
	double mag = 0, run = 0;
	for (uint64_t i = 0; i < n; i++) {
		mag += fabs((double)h[i]);
		run += (double)h[i];
		if constexpr (std::is_floating_point<T>::value) {
			/* CUB adds f32 in float: its error, not ours, sets the tolerance */
			double tol = (sizeof(T) == 4 ? 1e-5 : 1e-12) * mag + 1e-6;
			if (!(fabs((double)a[i] - (double)b[i]) <= tol) || !(fabs((double)a[i] - run) <= 1e-9 * mag + 1e-9))
				bad++;
		} else if (a[i] != b[i]) {
			bad++;
		}
	}
	double gb = (ib + ob) / 1e9;
	double ratio = us_cub / us_ours;
	const unsigned MINB = grscan::kn::minb(KN), WARPX = !!(KN & grscan::kn::WARPX);
	const unsigned VEC = !!(KN & grscan::kn::VEC), CARVE = !!(KN & grscan::kn::CARVE);
	printf("scan    MINB=%u WARPX=%u VEC=%u CARVE=%u PREF=%u %s->%s n = 2^%-2d | ours %9.2f us %7.1f GB/s | cub %9.2f us %7.1f GB/s | copy %9.2f us %7.1f GB/s | ratio %.3f | ours/copy %.3f | %s\n",
	       MINB, WARPX, VEC, CARVE, !!(KN & grscan::kn::PREF),
	       dtype_name<T>(), std::is_floating_point<O>::value ? "f64" : "i64", (int)log2((double)n), us_ours,
	       gb / (us_ours * 1e-6), us_cub, gb / (us_cub * 1e-6), us_copy, gb / (us_copy * 1e-6), ratio,
	       us_copy / us_ours, bad ? "FAIL" : "PASS");
	char line[512];
	snprintf(line, sizeof line,
		 "{\"bench\":\"scan\",\"kn\":%u,\"minb\":%u,\"warpx\":%u,\"vec\":%u,\"carve\":%u,\"dtype\":\"%s\",\"n\":%llu,\"ours_us\":%.3f,\"cub_us\":%.3f,\"copy_us\":%.3f,"
		 "\"ours_gbs\":%.1f,\"cub_gbs\":%.1f,\"copy_gbs\":%.1f,\"ratio\":%.4f,\"slots\":%zu,\"check\":\"%s\"}",
		 KN, MINB, WARPX, VEC, CARVE, dtype_name<T>(), (unsigned long long)n, us_ours, us_cub, us_copy, gb / (us_ours * 1e-6),
		 gb / (us_cub * 1e-6), gb / (us_copy * 1e-6), ratio, slots, bad ? "FAIL" : "PASS");
	json.push_back(line);
	CU(cudaFree(ws));
	CU(cudaFree(temp));
}

static void scan_all(int reps, bool knobs_only)
{
	CU(cudaMalloc(&in_pool, IN_POOL));
	CU(cudaMalloc(&out_pool, OUT_POOL));
	CU(cudaMalloc(&cub_pool, OUT_POOL));
	CU(cudaMalloc(&prof_sink, grscan::tiles_of((uint64_t)1 << 28) * 64));
	CU(cudaMemcpyToSymbol(grscan::prof, &prof_sink, sizeof prof_sink));
	auto reps_at = [&](int e) { return reps ? reps : e <= 24 ? 41 : 15; };
	if (!knobs_only) {
		for (int e = 20; e <= 28; e += 2)
			scan_row<float>((uint64_t)1 << e, reps_at(e));
		for (int e = 20; e <= 28; e += 2)
			scan_row<int32_t>((uint64_t)1 << e, reps_at(e));
		for (int e = 20; e <= 26; e += 2)
			scan_row<double>((uint64_t)1 << e, reps_at(e));
	}
	/* the tuning knobs (scan.cuh's kn): production without the prefetch
	 * at every size; the earlier production settings (three blocks an SM,
	 * one element a load; every build now publishes F first), each later
	 * change alone, one more block an SM, and the production build's
	 * phases */
	using namespace grscan::kn;
	for (int e = 20; e <= 28; e += 2) {
		int r = reps_at(e);
		scan_row<float, grscan::tuning<float>::KN & ~PREF>((uint64_t)1 << e, r);
		scan_row<int32_t, grscan::tuning<int32_t>::KN & ~PREF>((uint64_t)1 << e, r);
		if (e <= 26)
			scan_row<double, grscan::tuning<double>::KN & ~PREF>((uint64_t)1 << e, r);
	}
	for (int e : { 24, 28 }) {
		int r = reps_at(e);
		scan_row<float, make(3, WARPX)>((uint64_t)1 << e, r);
		scan_row<float, make(3, WARPX | VEC)>((uint64_t)1 << e, r);
		scan_row<float, make(4, WARPX | CARVE)>((uint64_t)1 << e, r);
		scan_row<float, make(5, WARPX | VEC | CARVE)>((uint64_t)1 << e, r);
		scan_row<float, grscan::tuning<float>::KN | PROF>((uint64_t)1 << e, r);
		scan_row<int32_t, make(3, WARPX | VEC)>((uint64_t)1 << e, r);
		scan_row<int32_t, make(5, WARPX | VEC | CARVE)>((uint64_t)1 << e, r);
		if (e <= 26)
			scan_row<double, make(3, WARPX | VEC)>((uint64_t)1 << e, r);
	}
	CU(cudaFree(in_pool));
	CU(cudaFree(out_pool));
	CU(cudaFree(cub_pool));
	CU(cudaFree(prof_sink));
}

/* ---- argmin and argmax ---- */

template <typename T, bool MAX> static void argm_row(uint64_t n, int reps)
{
	const size_t ib = n * sizeof(T);
	size_t slots = std::max<size_t>(1, std::min<size_t>(IN_POOL / ib, 64));
	fill_kernel<T><<<1024, 256, 0, st>>>((T *)in_pool, n * slots, 4242);
	auto in_at = [&](int r) { return (const T *)(in_pool + (size_t)(r % slots) * ib); };
	size_t wb = gr_argm_workspace_bytes(sms);
	void *ws;
	CU(cudaMalloc(&ws, wb));
	CU(cudaMemset(ws, 0, wb));
	gr_argm_result *dout;
	CU(cudaMalloc((void **)&dout, sizeof(*dout)));
	T *cval;
	int64_t *cidx;
	CU(cudaMalloc((void **)&cval, sizeof(T)));
	CU(cudaMalloc((void **)&cidx, sizeof(int64_t)));
	size_t tb = 0;
	if (MAX)
		CU(cub::DeviceReduce::ArgMax(nullptr, tb, in_at(0), cval, cidx, (int64_t)n, st));
	else
		CU(cub::DeviceReduce::ArgMin(nullptr, tb, in_at(0), cval, cidx, (int64_t)n, st));
	void *temp;
	CU(cudaMalloc(&temp, tb + 16));
	CU(cudaDeviceSynchronize());
	double us_ours, us_cub;
	time_pair([&](int r) { CU((grargm::launch<T>(MAX, in_at(r), n, dout, ws, sms, st))); },
		  [&](int r) {
			  size_t t = tb;
			  if (MAX)
				  CU(cub::DeviceReduce::ArgMax(temp, t, in_at(r), cval, cidx, (int64_t)n, st));
			  else
				  CU(cub::DeviceReduce::ArgMin(temp, t, in_at(r), cval, cidx, (int64_t)n, st));
		  },
		  reps, 5, &us_ours, &us_cub);
	/* the check: slot 0 through both (random data: no NaN) */
	CU((grargm::launch<T>(MAX, in_at(0), n, dout, ws, sms, st)));
	size_t t = tb;
	if (MAX)
		CU(cub::DeviceReduce::ArgMax(temp, t, in_at(0), cval, cidx, (int64_t)n, st));
	else
		CU(cub::DeviceReduce::ArgMin(temp, t, in_at(0), cval, cidx, (int64_t)n, st));
	CU(cudaDeviceSynchronize());
	gr_argm_result a;
	int64_t b;
	CU(cudaMemcpy(&a, dout, sizeof(a), cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(&b, cidx, sizeof(b), cudaMemcpyDeviceToHost));
	bool ok = a.index == (uint64_t)b;
	double gb = ib / 1e9;
	printf("argm    %s %s n = 2^%-2d | ours %9.2f us %7.1f GB/s | cub %9.2f us %7.1f GB/s | ratio %.3f | %s\n",
	       MAX ? "argmax" : "argmin", dtype_name<T>(), (int)log2((double)n), us_ours,
	       gb / (us_ours * 1e-6), us_cub, gb / (us_cub * 1e-6), us_cub / us_ours, ok ? "PASS" : "FAIL");
	char line[512];
	snprintf(line, sizeof line,
		 "{\"bench\":\"%s\",\"dtype\":\"%s\",\"n\":%llu,\"ours_us\":%.3f,\"cub_us\":%.3f,"
		 "\"ours_gbs\":%.1f,\"cub_gbs\":%.1f,\"ratio\":%.4f,\"check\":\"%s\"}",
		 MAX ? "argmax" : "argmin", dtype_name<T>(), (unsigned long long)n, us_ours, us_cub,
		 gb / (us_ours * 1e-6), gb / (us_cub * 1e-6), us_cub / us_ours, ok ? "PASS" : "FAIL");
	json.push_back(line);
	CU(cudaFree(ws));
	CU(cudaFree(dout));
	CU(cudaFree(cval));
	CU(cudaFree(cidx));
	CU(cudaFree(temp));
}

static void argm_all(int reps)
{
	CU(cudaMalloc(&in_pool, IN_POOL));
	for (int e = 16; e <= 28; e += 4) {
		int r = reps ? reps : e <= 24 ? 41 : 15;
		argm_row<float, false>((uint64_t)1 << e, r);
		argm_row<float, true>((uint64_t)1 << e, r);
		argm_row<int32_t, false>((uint64_t)1 << e, r);
		if (e <= 24 || e == 28)
			argm_row<double, false>((uint64_t)1 << e, r);
	}
	CU(cudaFree(in_pool));
}

int main(int argc, char **argv)
{
	int reps = 0;
	bool seg = true, segred = true, scan = true, argm = true, knobs_only = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seg-only"))
			segred = scan = argm = false;
		else if (!strcmp(argv[i], "--segred-only"))
			seg = scan = argm = false;
		else if (!strcmp(argv[i], "--scan-only"))
			seg = segred = argm = false;
		else if (!strcmp(argv[i], "--argm-only"))
			seg = segred = scan = false;
		else if (!strcmp(argv[i], "--scan-knobs"))
			seg = segred = argm = false, knobs_only = true;
		else {
			fprintf(stderr,
				"usage: %s [--reps N] [--seg-only | --segred-only | --scan-only | --scan-knobs | --argm-only]\n",
				argv[0]);
			return 2;
		}
	}
	cudaDeviceProp p;
	CU(cudaGetDeviceProperties(&p, 0));
	sms = p.multiProcessorCount;
	int drv = 0, rt = 0;
	CU(cudaDriverGetVersion(&drv));
	CU(cudaRuntimeGetVersion(&rt));
	printf("device: %s, %d SMs, L2 %d MiB; driver API %d, runtime %d\n", p.name, sms,
	       p.l2CacheSize >> 20, drv, rt);
	CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	for (auto &e : ev)
		CU(cudaEventCreate(&e));
	if (seg)
		seg_all(reps ? reps : 21);
	if (segred)
		segred_all(reps ? reps : 21);
	if (scan)
		scan_all(reps, knobs_only);
	if (argm)
		argm_all(reps);
	for (auto &l : json)
		printf("%s\n", l.c_str());
	return 0;
}
