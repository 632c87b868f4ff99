/*
 * What the exact-sum benchmarks share (exact-bench.cu, det-bench.cu): the
 * CUDA check, the data they sum, the float4 grid-stride read kernel that
 * is their ceiling, the places in a large pool that launches rotate over
 * (so that small arrays are not L2 hits), the timing of a block of
 * launches over them, and medians. Nothing of CUB here: the two
 * benchmarks build against different CUB headers.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#define CU(call)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (call);                                                  \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,     \
				cudaGetErrorString(e_));                                  \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

namespace grb {

/* 2.25 GiB: two places of a 2^28-element f64 array's 2 GiB do not fit,
 * one does; smaller arrays get up to 512 places */
static const size_t POOL = ((size_t)1 << 31) + ((size_t)1 << 28);
static const size_t STRIDE_MIN = (size_t)1 << 20;

/* Element i's random bits, of a fill seeded with seed (splitmix64). */
static __device__ __forceinline__ uint64_t bench_mix(size_t i, uint64_t seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* data kinds: 0 uniform [-1, 1); 1 that times 2^k, k uniform in
 * [-30, 30) ; 2 random bits over every finite exponent; integer T: random
 * bits whatever the kind */
template <typename T> __global__ void fill_kernel(T *p, size_t n, uint64_t seed, int kind)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint64_t x = bench_mix(i, seed);
		double u = (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
		if constexpr (std::is_integral<T>::value) {
			p[i] = (T)x;
		} else if (kind == 0) {
			p[i] = (T)u;
		} else if (kind == 1) {
			p[i] = (T)ldexp(u, (int)(x % 60) - 30);
		} else if (sizeof(T) == 4) {
			uint32_t b = ((uint32_t)x & 0x807fffffu) | (uint32_t)((x >> 32) % 255) << 23;
			p[i] = (T)__uint_as_float(b);
		} else {
			uint64_t b = (x & 0x800fffffffffffffull) | ((x >> 20) % 2047) << 52;
			p[i] = (T)__longlong_as_double((long long)b);
		}
	}
}

/* the read ceiling: every 16-byte vector loaded once, a sum kept so that
 * the loads stay */
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

/* bytes of n elements with the read kernel, its grid capped at blocks */
static inline void read_bw(const void *in, size_t bytes, int blocks_max, float *sink,
			   cudaStream_t st)
{
	size_t n4 = bytes / 16;
	unsigned blocks = (unsigned)std::min<size_t>((n4 + 255) / 256, (size_t)blocks_max);
	read_bw_kernel<<<blocks ? blocks : 1, 256, 0, st>>>((const float4 *)in, n4, sink);
	CU(cudaGetLastError());
}

/* an array's places in the pool */
struct pos {
	size_t stride, count;
	size_t at(size_t k) const { return (k % count) * stride; }
};

static inline pos positions(size_t bytes)
{
	pos p;
	p.stride = std::max(bytes, STRIDE_MIN);
	p.count = std::max<size_t>(1, std::min<size_t>(POOL / p.stride, 512));
	return p;
}

static inline double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

/*
 * GB/s of one block of back-to-back launches over arrays of bytes each:
 * three warm-up launches on the pool's places 0, 1 and 2, then k (1 GiB's
 * worth, 20 to 2000) between events e0 and e1 on st, on places from, from
 * + 1, ... in turn. launch(at) makes one launch on st, its array at offset
 * at of the pool.
 */
template <typename L>
static inline double block_gbs(size_t bytes, size_t from, cudaEvent_t e0, cudaEvent_t e1,
			       cudaStream_t st, L launch)
{
	pos P = positions(bytes);
	int k = (int)std::min<size_t>(2000, std::max<size_t>(20, ((size_t)1 << 30) / bytes));
	for (int i = 0; i < 3; i++)
		launch(P.at((size_t)i));
	CU(cudaEventRecord(e0, st));
	for (int i = 0; i < k; i++)
		launch(P.at(from + (size_t)i));
	CU(cudaEventRecord(e1, st));
	CU(cudaEventSynchronize(e1));
	float ms;
	CU(cudaEventElapsedTime(&ms, e0, e1));
	return (double)bytes * k / (ms * 1e-3) / 1e9;
}

} /* namespace grb */
