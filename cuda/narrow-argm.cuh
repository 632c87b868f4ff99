/*
 * argmin and argmax of f16 and bf16 in device memory (narrow.h): the
 * extreme's value, widened, and the index of its first occurrence, by the
 * daemon's rules (argm.h): values compared bit for bit, so -0 is below
 * +0; a NaN beats every number, and the first NaN is the one reported;
 * ties keep the smallest index.
 *
 * Each element's key is its bits with the magnitude bits of the negative
 * ones flipped, as a signed 16-bit integer (the order of the values, -0
 * below +0), and every NaN's one key past all of them. A lane reads its
 * vectors as the narrow kernel does (narrow.cuh), in increasing index
 * order, and keeps its best key and the index where it first met it. A
 * vector is looked at whole first, two elements an instruction (the best
 * key, and the largest magnitude, which finds its NaNs); only a vector
 * whose best key beats the lane's, or that holds a NaN, or the lane's
 * first, is gone through element by element, taking only a strictly
 * better key (a later equal one never wins). The ends (the elements
 * before the first 16-byte boundary and after the last whole vector)
 * come last, one a lane, compared on key and index both. Lanes, warps and
 * blocks then keep the better of (key, index) pairs, packed into one
 * 64-bit word whose maximum is the better, through the launch's scratch
 * and a ticket; the result does not depend on the order they meet in.
 */
#pragma once

#include "cuda/argm.h"
#include "cuda/narrow.cuh"

namespace grn {

template <int DT, bool MAX> struct ArgLane {
	static_assert(DT == F16 || DT == BF16, "16-bit floats");
	static constexpr uint32_t NANM = DT == F16 ? 0x7c00u : 0x7f80u;
	/* padding: an infinity that never beats a lane's best */
	static constexpr uint32_t PADW = (MAX ? (NANM | 0x8000u) : NANM) * 0x00010001u;
	/* every NaN's key: past every value's */
	static constexpr int NANKEY = MAX ? 0x8000 : -0x8001;
	/* indices below 2^IDX_BITS (a key's place above them) */
	static constexpr int IDX_BITS = 46;
	int best;
	uint64_t bidx;
	bool any;

	static __device__ __forceinline__ int key(uint32_t h)
	{
		if ((h & 0x7fffu) > NANM)
			return NANKEY;
		return (int)(short)(uint16_t)(h ^ ((h >> 15) * 0x7fffu));
	}
	static __device__ __forceinline__ bool better(int k, int b)
	{
		return MAX ? k > b : k < b;
	}
	__device__ __forceinline__ void init()
	{
		any = false;
		best = 0;
		bidx = ~0ull;
	}
	/* vector vi (elements head + 8 vi ...), nv vectors in all */
	__device__ __forceinline__ void vec(const uint4 &v, uint64_t vi, uint64_t nv, uint64_t head)
	{
		uint32_t acc = MAX ? 0x80008000u : 0x7fff7fffu, nm = 0;
#pragma unroll
		for (unsigned j = 0; j < 4; j++) {
			const uint32_t w = word(v, j);
			const uint32_t k = w ^ (((w >> 15) & 0x00010001u) * 0x7fffu);
			acc = MAX ? max_s16x2(acc, k) : min_s16x2(acc, k);
			nm = max_u16x2(nm, w & 0x7fff7fffu);
		}
		const int k0 = (int)(short)(acc & 0xffffu), k1 = (int)acc >> 16;
		const int vb = MAX ? max(k0, k1) : min(k0, k1);
		if (vi < nv && (!any || better(vb, best) || max(nm & 0xffffu, nm >> 16) > NANM)) {
#pragma unroll
			for (unsigned e = 0; e < 8; e++) {
				const int k = key((word(v, e / 2) >> (16 * (e & 1))) & 0xffffu);
				if (!any || better(k, best)) {
					best = k;
					bidx = head + 8 * vi + e;
					any = true;
				}
			}
		}
	}
	/* one of the ends: key and index compared */
	__device__ __forceinline__ void end(uint32_t h, uint64_t i)
	{
		const int k = key(h);
		if (!any || better(k, best) || (k == best && i < bidx)) {
			best = k;
			bidx = i;
			any = true;
		}
	}
	/* (key, index) as one word whose maximum is the better pair; 0:
	 * nothing */
	__device__ __forceinline__ unsigned long long pack() const
	{
		if (!any)
			return 0;
		const unsigned long long u = MAX ? (unsigned long long)(best + 0x8001)
						 : (unsigned long long)(0x8000 - best);
		return u << IDX_BITS | (((1ull << IDX_BITS) - 1) - bidx);
	}
	static __device__ __forceinline__ void unpack(unsigned long long p, gr_argm_result *out)
	{
		const int u = (int)(p >> IDX_BITS);
		const int k = MAX ? u - 0x8001 : 0x8000 - u;
		out->index = ((1ull << IDX_BITS) - 1) - (p & ((1ull << IDX_BITS) - 1));
		if (k == NANKEY) {
			out->value = 0x7ff8000000000000ull;
		} else {
			const uint32_t h = (uint32_t)(k ^ (k < 0 ? 0x7fff : 0)) & 0xffffu;
			out->value = (uint64_t)__double_as_longlong((double)widen<DT>(h));
		}
	}
};

static __device__ __forceinline__ unsigned long long warp_max64(unsigned long long v)
{
#pragma unroll
	for (int m = 16; m; m >>= 1) {
		unsigned long long o = __shfl_xor_sync(FULL, v, m);
		v = o > v ? o : v;
	}
	return v;
}

template <int DT, bool MAX>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
argm_kernel(const unsigned char *data, uint64_t n, gr_exact_scratch *scratch, gr_argm_result *out)
{
	constexpr unsigned NG = 4;
	using L = ArgLane<DT, MAX>;
	const unsigned t = threadIdx.x, lane = t & 31;
	const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / 2;
	const uint64_t head = h < n ? h : n;
	const uint64_t nv = (n - head) / 8, tail = n - head - nv * 8;
	const uint4 *vb = (const uint4 *)(data + head * 2);
	const uint4 pad = make_uint4(L::PADW, L::PADW, L::PADW, L::PADW);
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;
	L st;
	st.init();
	for (uint64_t vw = (uint64_t)blockIdx.x * THREADS + (t - lane); vw < nv; vw += NG * nt) {
		uint4 v[NG];
		load_group<NG>(v, vb, vw, nt, nv, pad, lane);
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
			st.vec(v[g], vw + lane + g * nt, nv, head);
	}
	if (blockIdx.x == 0 && t < head + tail) {
		const uint64_t i = t < head ? t : n - tail + (t - head);
		st.end(((const uint16_t *)data)[i], i);
	}
	__shared__ unsigned long long ws[THREADS / 32];
	unsigned long long p = warp_max64(st.pack());
	if (lane == 0)
		ws[t / 32] = p;
	__syncthreads();
	if (t == 0) {
		for (unsigned w = 1; w < THREADS / 32; w++)
			p = ws[w] > p ? ws[w] : p;
		if (gridDim.x == 1) {
			L::unpack(p, out);
		} else {
			if (p)
				atomicMax((unsigned long long *)&scratch->acc[0], p);
			__threadfence();
			if (atomicAdd(&scratch->ticket, 1u) == gridDim.x - 1) {
				__threadfence();
				scratch->ticket = 0;
				L::unpack(atomicExch((unsigned long long *)&scratch->acc[0], 0ull), out);
			}
		}
	}
}

template <int DT, bool MAX>
static inline cudaError_t launch_argm(const void *data, uint64_t n, gr_exact_scratch *scratch,
				      gr_argm_result *out, int sm_count, cudaStream_t st)
{
	const uint64_t nv = n / 8;
	uint64_t want = (nv + (uint64_t)THREADS * 4 - 1) / ((uint64_t)THREADS * 4);
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM;
	want = want < cap ? want : cap;
	argm_kernel<DT, MAX><<<want ? (unsigned)want : 1u, THREADS, 0, st>>>(
		(const unsigned char *)data, n, scratch, out);
	return cudaGetLastError();
}

} /* namespace grn */
