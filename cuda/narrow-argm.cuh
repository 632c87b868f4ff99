/*
 * argmin and argmax of the narrow dtypes in device memory (narrow.h): the
 * extreme's value, widened, and the index of its first occurrence, by the
 * daemon's rules (argm.h): values compared bit for bit, so -0 is below
 * +0; a NaN beats every number, and the first NaN is the one reported;
 * ties keep the smallest index.
 *
 * Each element's key is a signed 16-bit integer whose order is the
 * values': integers as they are (unsigned ones with the top bit flipped),
 * floats their bits with the magnitude bits of the negative ones flipped
 * (-0 below +0); the 8-bit dtypes' keys are sign-extended to 16 bits, so
 * that every dtype compares two keys an instruction. A float's NaNs are
 * the keys past the infinities' (past the largest finite for f8e4m3),
 * positive ones above and negative ones below; all of them are one key,
 * past every value's, where it counts.
 *
 * A lane reads its groups of vectors as the narrow kernel does
 * (narrow.cuh: NG vectors at grid stride, the next group's loads out
 * before the one in hand is taken), in increasing index order, and keeps
 * only the best key it has met and the group where it first met it: a
 * group's best key is its vectors' greatest and least keys, two-halfword
 * instructions over its words, its NaNs found from them, and a group
 * replaces the lane's only with a strictly better key (a later equal one
 * never wins). Vectors past the array are padding whose key is the worst
 * a value can have, and a group whose first vector is padding is none of
 * the lane's. Only at the end does the lane read its group again, to
 * find the first element of that key. The elements before the first
 * 16-byte boundary and after the last whole vector come last, one a lane
 * of block 0's first warp, compared on key and index both. Lanes, warps
 * and blocks then keep the better of (key, index) pairs, packed into one
 * 64-bit word whose maximum is the better, through the launch's scratch
 * and a ticket; the result does not depend on the order they meet in.
 */
#pragma once

#include "cuda/argm.h"
#include "cuda/narrow.cuh"

namespace grn {

template <int DT, bool MAX> struct ArgLane {
	static constexpr unsigned S = dt_size<DT>, V = 16 / S, BITS = 8 * S;
	static constexpr bool FLOAT = DT <= E5M2, UNSIGNED = DT == U8 || DT == U16;
	static constexpr uint32_t EMASK = (1u << BITS) - 1, MMASK = EMASK >> 1;
	/* magnitudes above NANM are NaN (floats) */
	static constexpr int NANM = DT == F16 ? 0x7c00 : DT == BF16 ? 0x7f80 : DT == E5M2 ? 0x7c
				  : DT == E4M3 ? 0x7e : 0;
	/* the keys' range, and the worst key a value has (padding's) */
	static constexpr int KMAX = FLOAT ? NANM : (int)MMASK, KMIN = -1 - KMAX;
	static constexpr int WORST = MAX ? KMIN : KMAX;
	/* the bits of the element of key k (not NaN's) */
	static __host__ __device__ constexpr uint32_t bits_of(int k)
	{
		return FLOAT ? (k < 0 ? ((uint32_t)~k & MMASK) | (MMASK + 1) : (uint32_t)k)
		       : UNSIGNED ? (uint32_t)(k + (int)(MMASK + 1)) & EMASK : (uint32_t)k & EMASK;
	}
	/* padding: the worst value */
	static constexpr uint32_t PADW = bits_of(WORST) * (S == 2 ? 0x00010001u : 0x01010101u);
	/* every NaN's key: past every value's */
	static constexpr int NANKEY = MAX ? 0x8000 : -0x8001;
	/* indices below 2^IDX_BITS (a key's place above them) */
	static constexpr int IDX_BITS = 46;
	int best;
	/* the warp's first vector of the lane's group of best (none: ~0) */
	uint64_t bw;
	uint64_t bidx;

	/* one element's key (its bits e), a NaN's NANKEY */
	static __device__ __forceinline__ int key(uint32_t e)
	{
		if (FLOAT && (int)(e & MMASK) > NANM)
			return NANKEY;
		if (FLOAT)
			e ^= ((e >> (BITS - 1)) & 1u) * MMASK;
		else if (UNSIGNED)
			e ^= MMASK + 1;
		return S == 2 ? (int)(short)(uint16_t)e : (int)(signed char)(uint8_t)e;
	}
	/* the keys of one word as two-halfword integers (8-bit dtypes: the
	 * bytes 0 and 1 into k0, 2 and 3 into k1) */
	static __device__ __forceinline__ void keys(uint32_t w, uint32_t &k0, uint32_t &k1)
	{
		if constexpr (S == 2) {
			if constexpr (FLOAT)
				w ^= prmt(w, 0, 0xBB99u) & 0x7fff7fffu;
			else if constexpr (UNSIGNED)
				w ^= 0x80008000u;
			k0 = w;
			k1 = w;
		} else {
			if constexpr (FLOAT)
				w ^= prmt(w, 0, 0xBA98u) & 0x7f7f7f7fu;
			else if constexpr (UNSIGNED)
				w ^= 0x80808080u;
			k0 = prmt(w, 0, 0x9180u);
			k1 = prmt(w, 0, 0xB3A2u);
		}
	}
	static __device__ __forceinline__ bool better(int k, int b)
	{
		return MAX ? k > b : k < b;
	}
	__device__ __forceinline__ void init()
	{
		best = MAX ? -0x10000 : 0x10000;
		bw = ~0ull;
		bidx = ~0ull;
	}
	/* a group's best key (NANKEY where it holds a NaN) */
	template <unsigned NG> static __device__ __forceinline__ int group_key(const uint4 (&v)[NG])
	{
		/* the greatest and the least keys (floats need both: their
		 * NaNs lie at either end) */
		uint32_t hx = 0x80008000u, hn = 0x7fff7fffu;
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				uint32_t k0, k1;
				keys(word(v[g], j), k0, k1);
				if (FLOAT || MAX)
					hx = max_s16x2(hx, k0);
				if (FLOAT || !MAX)
					hn = min_s16x2(hn, k0);
				if constexpr (S == 1) {
					if (FLOAT || MAX)
						hx = max_s16x2(hx, k1);
					if (FLOAT || !MAX)
						hn = min_s16x2(hn, k1);
				}
			}
		const int x = max((int)(short)hx, (int)hx >> 16), m = min((int)(short)hn, (int)hn >> 16);
		if (FLOAT && (x > KMAX || m < KMIN))
			return NANKEY;
		return MAX ? x : m;
	}
	/* the group of the warp's first vector vw (the lane's: vw + lane) */
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], uint64_t vw, uint64_t nv,
					      unsigned lane)
	{
		const int k = group_key<NG>(v);
		if (vw + lane < nv && better(k, best)) {
			best = k;
			bw = vw;
		}
	}
	/* the first element of the best key in the lane's group of best
	 * (read again), head the elements before vector 0 */
	template <unsigned NG>
	__device__ __forceinline__ void resolve(const uint4 *vb, uint64_t nv, uint64_t nt,
						uint64_t head, unsigned lane)
	{
		if (bw == ~0ull)
			return;
#pragma unroll 1
		for (unsigned g = 0; g < NG; g++) {
			const uint64_t vi = bw + lane + g * nt;
			if (vi >= nv)
				break;
			const uint4 x = __ldg(vb + vi);
#pragma unroll 1
			for (unsigned e = 0; e < V; e++) {
				const uint32_t bits = (word(x, e / (V / 4)) >> (BITS * (e % (V / 4)))) & EMASK;
				if (key(bits) == best) {
					bidx = head + V * vi + e;
					return;
				}
			}
		}
	}
	/* one of the ends: key and index compared */
	__device__ __forceinline__ void end(uint32_t e, uint64_t i)
	{
		const int k = key(e);
		if (bidx == ~0ull || better(k, best) || (k == best && i < bidx)) {
			best = k;
			bidx = i;
		}
	}
	/* (key, index) as one word whose maximum is the better pair; 0:
	 * nothing */
	__device__ __forceinline__ unsigned long long pack() const
	{
		if (bidx == ~0ull)
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
		if (FLOAT && k == NANKEY) {
			out->value = 0x7ff8000000000000ull;
		} else if constexpr (FLOAT) {
			out->value = (uint64_t)__double_as_longlong((double)widen<DT>(bits_of(k)));
		} else if constexpr (UNSIGNED) {
			out->value = (uint64_t)bits_of(k);
		} else {
			out->value = (uint64_t)(long long)k;
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

/* argmin or argmax of DT, NG vectors a lane a group, BPS blocks an SM */
template <int DT, bool MAX, unsigned NG, unsigned BPS>
__global__ void __launch_bounds__(THREADS, BPS)
argm_kernel(const unsigned char *data, uint64_t n, gr_exact_scratch *scratch, gr_argm_result *out)
{
	using L = ArgLane<DT, MAX>;
	constexpr unsigned S = L::S, V = L::V;
	const unsigned t = threadIdx.x, lane = t & 31;
	const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / S;
	const uint64_t head = h < n ? h : n;
	const uint64_t nv = (n - head) / V, tail = n - head - nv * V;
	const uint4 *vb = (const uint4 *)(data + head * S);
	const uint4 pad = make_uint4(L::PADW, L::PADW, L::PADW, L::PADW);
	L st;
	st.init();
	each_group<NG>(vb, nv, pad, lane,
		       [&](const uint4(&v)[NG], uint64_t vw) { st.template group<NG>(v, vw, nv, lane); });
	st.template resolve<NG>(vb, nv, (uint64_t)gridDim.x * THREADS, head, lane);
	if (blockIdx.x == 0 && t < head + tail) {
		const uint64_t i = t < head ? t : n - tail + (t - head);
		st.end(S == 2 ? (uint32_t)((const uint16_t *)data)[i] : (uint32_t)data[i], i);
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

/* The production form: eight vectors a lane a group, two blocks an SM */
constexpr unsigned ARGM_NG = 8, ARGM_BPS = 2;

template <int DT, bool MAX, unsigned NG = ARGM_NG, unsigned BPS = ARGM_BPS>
static inline cudaError_t launch_argm(const void *data, uint64_t n, gr_exact_scratch *scratch,
				      gr_argm_result *out, int sm_count, cudaStream_t st)
{
	const uint64_t nv = n * dt_size<DT> / 16;
	uint64_t want = (nv + (uint64_t)THREADS * NG - 1) / ((uint64_t)THREADS * NG);
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * BPS;
	want = want < cap ? want : cap;
	argm_kernel<DT, MAX, NG, BPS><<<want ? (unsigned)want : 1u, THREADS, 0, st>>>(
		(const unsigned char *)data, n, scratch, out);
	return cudaGetLastError();
}

} /* namespace grn */
