/*
 * The inclusive prefix sum kernel's device code; scan.h gives the order
 * of its additions, which everything here keeps to. Included by scan.cu
 * and by the benchmark and tests.
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/scan.h"

namespace grscan {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned THREADS = 256, IPT = 16, TILE = THREADS * IPT, WARPS = THREADS / 32;
static_assert(TILE == GR_SCAN_TILE, "tile size");

template <typename T> struct acc {
	static constexpr bool fp = std::is_floating_point<T>::value;
	using A = typename std::conditional<fp, double, unsigned long long>::type;
	/* -0.0: adding it changes nothing, so "left out" costs no branch */
	static __device__ __forceinline__ A ident()
	{
		if constexpr (fp)
			return -0.0;
		else
			return 0;
	}
	static __device__ __forceinline__ A of(T x)
	{
		if constexpr (fp)
			return (double)x;
		else if constexpr (std::is_signed<T>::value)
			return (A)(long long)x;
		else
			return (A)x;
	}
	static __device__ __forceinline__ uint64_t bits(A a)
	{
		if constexpr (fp)
			return (uint64_t)__double_as_longlong(a);
		else
			return (uint64_t)a;
	}
	static __device__ __forceinline__ A unbits(uint64_t u)
	{
		if constexpr (fp)
			return __longlong_as_double((long long)u);
		else
			return (A)u;
	}
};

/* The workspace: the tile counter, then a flag and a value per tile. */
static inline size_t align16(size_t b)
{
	return (b + 15) & ~(size_t)15;
}
static inline uint64_t tiles_of(uint64_t n)
{
	return (n + TILE - 1) / TILE;
}
static inline size_t workspace_bytes(uint64_t n)
{
	uint64_t t = tiles_of(n);
	return 16 + align16(t * sizeof(uint32_t)) + t * sizeof(uint64_t);
}

static __device__ __forceinline__ uint32_t ld_acquire(const uint32_t *p)
{
	uint32_t v;
	asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}
static __device__ __forceinline__ void st_release(uint32_t *p, uint32_t v)
{
	asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ uint64_t ld_relaxed(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

/* F of tile e, once its flag says this launch published it. */
static __device__ __forceinline__ uint64_t wait_value(const uint32_t *flags, const uint64_t *vals,
						      uint64_t e, uint32_t epoch)
{
	while (ld_acquire(flags + e) != epoch)
		;
	return ld_relaxed(vals + e);
}

/* Shared memory rows of 16 elements padded to 17: a thread's row and a
 * warp's stripe both meet every bank once. */
static __device__ __forceinline__ unsigned pad(unsigned i)
{
	return i + i / IPT;
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
scan_kernel(const T *in, uint64_t n, uint64_t *out, uint64_t ntiles, uint32_t *counter,
	    uint32_t *flags, uint64_t *vals, uint32_t epoch)
{
	using S = acc<T>;
	using A = typename S::A;
	__shared__ uint64_t buf[TILE + TILE / IPT];
	__shared__ A wsum[WARPS];
	__shared__ A carry;
	__shared__ uint64_t tile_sh;
	const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;

	if (t == 0) {
		uint32_t j = atomicAdd(counter, 1u);
		/* the last ticket handed out: the counter is free again */
		if (j == ntiles - 1)
			*counter = 0;
		tile_sh = j;
	}
	__syncthreads();
	const uint64_t j = tile_sh;
	const uint64_t base = j * TILE;
	const bool full = base + TILE <= n;

	/* stripes in, rows out of shared memory */
	T *sb = (T *)buf;
	{
		T v[IPT];
		if (full) {
#pragma unroll
			for (unsigned k = 0; k < IPT; k++)
				v[k] = in[base + k * THREADS + t];
		} else {
#pragma unroll
			for (unsigned k = 0; k < IPT; k++)
				v[k] = base + k * THREADS + t < n ? in[base + k * THREADS + t] : T(0);
		}
#pragma unroll
		for (unsigned k = 0; k < IPT; k++)
			sb[pad(k * THREADS + t)] = v[k];
	}
	__syncthreads();
	T x[IPT];
#pragma unroll
	for (unsigned e = 0; e < IPT; e++)
		x[e] = sb[pad(t * IPT + e)];

	/* 2: the thread's total */
	A r = S::ident();
#pragma unroll
	for (unsigned e = 0; e < IPT; e++)
		r = r + S::of(x[e]);
	/* 3: the warp's scan */
	A w = r;
#pragma unroll
	for (unsigned d = 1; d < 32; d <<= 1) {
		A y = __shfl_up_sync(FULL, w, d);
		if (lane >= d)
			w = y + w;
	}
	A wl = __shfl_up_sync(FULL, w, 1);
	if (lane == 0)
		wl = S::ident();
	if (lane == 31)
		wsum[warp] = w;
	__syncthreads();
	/* 4, 5 */
	A P = S::ident(), agg = S::ident();
#pragma unroll
	for (unsigned q = 0; q < WARPS; q++) {
		if (q == warp)
			P = agg;
		agg = agg + wsum[q];
	}
	const A E = P + wl;

	/* 6, 7: one warp publishes F_j, then gathers X_j */
	if (warp == 0) {
		if (lane == 0 && j + 1 < ntiles) {
			A F = agg;
			for (uint64_t L = 1; ((j + 1) & ((1ull << L) - 1)) == 0; L++)
				F = S::unbits(wait_value(flags, vals, j - (1ull << (L - 1)), epoch)) + F;
			vals[j] = S::bits(F);
			st_release(flags + j, epoch);
		}
		A v = S::ident();
		if ((j >> lane) & 1) {
			uint64_t q = j & ~((2ull << lane) - 1);
			v = S::unbits(wait_value(flags, vals, q + (1ull << lane) - 1, epoch));
		}
		A X = S::ident();
		for (unsigned m = (unsigned)j; m;) {
			int b = 31 - __clz(m);
			m &= ~(1u << b);
			X = X + __shfl_sync(FULL, v, b);
		}
		if (lane == 0)
			carry = X;
	}
	__syncthreads();

	/* 8: the outputs, rows into shared memory, stripes out */
	const A Q = carry + E;
	A rr = S::ident();
#pragma unroll
	for (unsigned e = 0; e < IPT; e++) {
		rr = rr + S::of(x[e]);
		buf[pad(t * IPT + e)] = S::bits(Q + rr);
	}
	__syncthreads();
	if (full) {
#pragma unroll
		for (unsigned k = 0; k < IPT; k++)
			out[base + k * THREADS + t] = buf[pad(k * THREADS + t)];
	} else {
#pragma unroll
		for (unsigned k = 0; k < IPT; k++)
			if (base + k * THREADS + t < n)
				out[base + k * THREADS + t] = buf[pad(k * THREADS + t)];
	}
}

} /* namespace grscan */
