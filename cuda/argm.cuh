/*
 * The argmin/argmax kernel's device code (argm.h gives the rules).
 * Included by argm.cu and by the benchmark, which may instantiate it
 * directly.
 */
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_runtime.h>

#include "cuda/argm.h"

namespace grargm {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned THREADS = 256, WARPS = THREADS / 32;
/* blocks a multiprocessor, and loads in flight a thread */
constexpr unsigned BLOCKS_PER_SM = 4, U = 4;

struct best {
	long long key;
	unsigned long long idx;
};

/* A thread's keys: 32 bits for 4-byte elements (the compare in the
 * loop is then one instruction), 64 otherwise; widened for the blocks. */
template <typename T>
using key_t = typename std::conditional<sizeof(T) == 4, int, long long>::type;

/* The ordered key of x; NaN the best key of the op (past every number's:
 * +-inf's keys are +-0x7f800000 and 0x807fffff for f32). */
template <typename T, bool MAX> static __device__ __forceinline__ key_t<T> key_of(T x)
{
	/* integer operations only: a NaN is a magnitude above infinity's */
	if constexpr (std::is_same<T, float>::value) {
		int b = __float_as_int(x);
		int k = b ^ ((b >> 31) & 0x7fffffff);
		return (b & 0x7fffffff) > 0x7f800000 ? (MAX ? INT_MAX : INT_MIN) : k;
	} else if constexpr (std::is_same<T, uint32_t>::value) {
		return (int)(x ^ 0x80000000u);
	} else if constexpr (std::is_same<T, double>::value) {
		long long b = __double_as_longlong(x);
		long long k = b ^ ((b >> 63) & 0x7fffffffffffffffll);
		return (b & 0x7fffffffffffffffll) > 0x7ff0000000000000ll ? (MAX ? LLONG_MAX : LLONG_MIN)
									   : k;
	} else if constexpr (std::is_same<T, uint64_t>::value) {
		return (long long)(x ^ 0x8000000000000000ull);
	} else {
		return (key_t<T>)x;
	}
}

/* A thread's best so far, in its own key width. */
template <typename T> struct tbest {
	key_t<T> key;
	unsigned long long idx;
};

/* Whether b beats a: a strictly better key, or the same key earlier. */
template <bool MAX> static __device__ __forceinline__ bool beats(const best &b, const best &a)
{
	if (b.key != a.key)
		return MAX ? b.key > a.key : b.key < a.key;
	return b.idx < a.idx;
}

template <bool MAX> static __device__ __forceinline__ best warp_best(best v)
{
#pragma unroll
	for (int m = 16; m; m >>= 1) {
		best o;
		o.key = __shfl_xor_sync(FULL, v.key, m);
		o.idx = __shfl_xor_sync(FULL, v.idx, m);
		if (beats<MAX>(o, v))
			v = o;
	}
	return v;
}

/* The block's best into *dst (thread 0). */
template <bool MAX> static __device__ __forceinline__ void block_best(best v, best *dst)
{
	__shared__ best w[WARPS];
	const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	v = warp_best<MAX>(v);
	if (lane == 0)
		w[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < WARPS ? w[lane] : best{MAX ? LLONG_MIN : LLONG_MAX, ~0ull};
		v = warp_best<MAX>(v);
		if (lane == 0)
			*dst = v;
	}
}

/* The element's bits as the daemon's partial holds its value. */
template <typename T> static __device__ __forceinline__ uint64_t value_bits(T x)
{
	if constexpr (std::is_floating_point<T>::value)
		return (uint64_t)__double_as_longlong((double)x);
	else if constexpr (std::is_signed<T>::value)
		return (uint64_t)(long long)x;
	else
		return (uint64_t)x;
}

/* Take element e at index i if it beats v: strictly better, or the
 * first element at all (whose key may equal the empty one's). A thread
 * meets its elements in increasing index order, so an equal key never
 * needs the index compared. */
template <typename T, bool MAX>
static __device__ __forceinline__ void take(tbest<T> &v, T e, uint64_t i)
{
	key_t<T> k = key_of<T, MAX>(e);
	if ((MAX ? k > v.key : k < v.key) || v.idx == ~0ull) {
		v.key = k;
		v.idx = i;
	}
}

/* 4-byte elements 16 bytes at a time, while each thread still meets its
 * elements in increasing index order: vector j is elements 4j .. 4j + 3,
 * and the few past the last whole vector go to the first threads last. */
template <typename T, bool MAX>
static __device__ __forceinline__ void scan_vec4(const T *x, uint64_t n, tbest<T> &v)
{
	const uint64_t stride = (uint64_t)gridDim.x * THREADS;
	const uint64_t t = (uint64_t)blockIdx.x * THREADS + threadIdx.x;
	const uint4 *xv = (const uint4 *)x;
	const uint64_t nv = n / 4;
	uint64_t j = t;
	for (; j + stride < nv; j += 2 * stride) {
		uint4 a = __ldg(xv + j), b = __ldg(xv + j + stride);
		const unsigned *pa = (const unsigned *)&a, *pb = (const unsigned *)&b;
#pragma unroll
		for (unsigned c = 0; c < 4; c++) {
			T e;
			memcpy(&e, pa + c, 4);
			take<T, MAX>(v, e, 4 * j + c);
		}
#pragma unroll
		for (unsigned c = 0; c < 4; c++) {
			T e;
			memcpy(&e, pb + c, 4);
			take<T, MAX>(v, e, 4 * (j + stride) + c);
		}
	}
	for (; j < nv; j += stride) {
		uint4 a = __ldg(xv + j);
		const unsigned *pa = (const unsigned *)&a;
#pragma unroll
		for (unsigned c = 0; c < 4; c++) {
			T e;
			memcpy(&e, pa + c, 4);
			take<T, MAX>(v, e, 4 * j + c);
		}
	}
	if (t < n - 4 * nv)
		take<T, MAX>(v, x[4 * nv + t], 4 * nv + t);
}

/* Workspace: a ticket, then a best per block. */
template <typename T, bool MAX>
__global__ void __launch_bounds__(THREADS)
argm_kernel(const T *x, uint64_t n, gr_argm_result *out, unsigned *ticket, best *part)
{
	const uint64_t stride = (uint64_t)gridDim.x * THREADS;
	uint64_t i = (uint64_t)blockIdx.x * THREADS + threadIdx.x;
	tbest<T> v{0, ~0ull};
	if (sizeof(T) == 4 && ((uintptr_t)x & 15) == 0) {
		scan_vec4<T, MAX>(x, n, v);
		i = n; /* nothing left for the plain loops */
	}
	/* U loads in flight; each thread still meets its elements in
	 * increasing index order */
	for (; i + (U - 1) * stride < n; i += U * stride) {
		T e[U];
#pragma unroll
		for (unsigned u = 0; u < U; u++)
			e[u] = x[i + u * stride];
#pragma unroll
		for (unsigned u = 0; u < U; u++)
			take<T, MAX>(v, e[u], i + u * stride);
	}
	for (; i < n; i += stride)
		take<T, MAX>(v, x[i], i);
	__shared__ bool last;
	/* a thread that took nothing holds the empty best */
	best w{v.idx == ~0ull ? (MAX ? LLONG_MIN : LLONG_MAX) : (long long)v.key, v.idx};
	block_best<MAX>(w, part + blockIdx.x);
	if (threadIdx.x == 0) {
		__threadfence();
		last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	best b{MAX ? LLONG_MIN : LLONG_MAX, ~0ull};
	for (unsigned k = threadIdx.x; k < gridDim.x; k += THREADS) {
		best p;
		p.key = __ldcg(&part[k].key);
		p.idx = __ldcg(&part[k].idx);
		if (beats<MAX>(p, b))
			b = p;
	}
	__shared__ best fin;
	block_best<MAX>(b, &fin);
	__syncthreads();
	if (threadIdx.x == 0) {
		out->value = value_bits<T>(x[fin.idx]);
		out->index = fin.idx;
		*ticket = 0;
	}
}

static inline unsigned grid_of(uint64_t n, int sms)
{
	uint64_t want = (n + THREADS * U - 1) / (THREADS * U);
	uint64_t cap = (uint64_t)(sms > 0 ? sms : 1) * BLOCKS_PER_SM;
	return (unsigned)(want < cap ? (want ? want : 1) : cap);
}

template <typename T>
static inline cudaError_t launch(int is_max, const void *data, uint64_t n, gr_argm_result *out,
				 void *workspace, int sms, cudaStream_t st)
{
	unsigned g = grid_of(n, sms);
	unsigned *ticket = (unsigned *)workspace;
	best *part = (best *)((char *)workspace + 16);
	if (is_max)
		argm_kernel<T, true><<<g, THREADS, 0, st>>>((const T *)data, n, out, ticket, part);
	else
		argm_kernel<T, false><<<g, THREADS, 0, st>>>((const T *)data, n, out, ticket, part);
	return cudaGetLastError();
}

} /* namespace grargm */
