/*
 * Moments of segments on the GPU: the device code, on segred.cuh's walk
 * and segred-exact.cuh's exact sums. A launch leaves each segment's sums,
 * not its record: the exact sum of its elements and the exact sum of their
 * exact squares as digits, and its min and max as the min and max records
 * give them (segred.h has the layout). The host folds those into the CPU's
 * moments partial and rounds the mean and variance once from the exact
 * sums (segs-moments.c), so the records are the CPU's bit for bit.
 *
 * Floats: the sum and the squares are the exact forms of sum and sumsq
 * (fm_sum, fm_square), each a pass of its own; min and max one more pass
 * (pol_minmax) with min's and max's keys and records. Three reads of the
 * data.
 *
 * Integers: one pass for the sums (pol_imom), one for min and max. In the
 * first each lane keeps the sum of its elements in a 128-bit two's
 * complement integer and the sum of their squares (each exact: below
 * 2^128) in a 192-bit one; a lane takes at most a tile's elements (2^12),
 * so neither overflows. At the end of a
 * part the lanes cut both into 32-bit pieces in signed 64-bit words, the
 * warp adds the words (no carries: 32 pieces below 2^32 each), and one
 * lane adds each non-zero word into the segment's digits by an atomic
 * add. Each digit takes one piece a part at most, below 2^32, so
 * GR_SEGRED_MAX_ELEMS parts keep it below 2^62.
 */
#pragma once

#include "cuda/segred-exact.cuh"

namespace grsr {

/* An integer segment's digits: the sum in 4 places (the top one signed),
 * the sum of squares in 6. */
constexpr unsigned ISUM = GR_SEGRED_ISUM_DIGITS, ISQ = GR_SEGRED_ISQ_DIGITS;

template <typename T> struct pol_imom : tuning {
	using E = T;
	struct sums {
		wacc<2> s; /* two's complement */
		wacc<3> q;
	};
	static __device__ __forceinline__ void add(sums &a, T x)
	{
		const bool neg = std::is_signed<T>::value && x < 0;
		const uint64_t mag = neg ? (uint64_t)0 - (uint64_t)(long long)x : (uint64_t)x;
		const uint64_t sx[2] = { std::is_signed<T>::value ? (uint64_t)(long long)x : (uint64_t)x,
					 neg ? ~0ull : 0 };
		acc_add<2>(a.s, sx, /* sub= */ false);
		const uint64_t sq[3] = { mag * mag, sizeof(T) == 8 ? __umul64hi(mag, mag) : 0, 0 };
		acc_add<3>(a.q, sq, /* sub= */ false);
	}
	/* the sums as 32-bit pieces in signed words: the sum's, then the
	 * squares' */
	static __device__ __forceinline__ void pieces(const sums &a, long long *w)
	{
		w[0] = (long long)(a.s.w[0] & 0xffffffffu);
		w[1] = (long long)(a.s.w[0] >> 32);
		w[2] = (long long)(a.s.w[1] & 0xffffffffu);
		w[3] = (long long)a.s.w[1] >> 32;
#pragma unroll
		for (unsigned i = 0; i < ISQ; i++)
			w[ISUM + i] = (long long)((a.q.w[i / 2] >> (32 * (i & 1))) & 0xffffffffu);
	}
	static __device__ __forceinline__ void put(const params &p, uint64_t seg, const long long *w)
	{
		/* mom_areas' layout: the sums' digits, their flags, the squares' */
		long long *ds = p.digits + seg * ISUM, *dq = p.digits + p.k * (ISUM + 1) + seg * ISQ;
#pragma unroll
		for (unsigned i = 0; i < ISUM; i++)
			if (w[i])
				atomicAdd((unsigned long long *)&ds[i], (unsigned long long)w[i]);
#pragma unroll
		for (unsigned i = 0; i < ISQ; i++)
			if (w[ISUM + i])
				atomicAdd((unsigned long long *)&dq[i], (unsigned long long)w[ISUM + i]);
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi,
							uint64_t seg)
	{
		T v[SHORT];
		load_short((const T *)p.x, lo, hi, v);
		sums a = {};
#pragma unroll
		for (unsigned e = 0; e < SHORT; e++)
			add(a, v[e]); /* past hi: 0, which adds nothing */
		long long w[ISUM + ISQ];
		pieces(a, w);
		put(p, seg, w);
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		sums a = {};
		for_batches<LOAD_BYTES>((const T *)p.x, lo + lane, hi, T(0), [&](const T *v, auto n) {
#pragma unroll
			for (unsigned g = 0; g < decltype(n)::value; g++)
				add(a, v[g]);
		});
		long long w[ISUM + ISQ];
		pieces(a, w);
#pragma unroll
		for (unsigned i = 0; i < ISUM + ISQ; i++)
#pragma unroll
			for (int m = 16; m; m >>= 1)
				w[i] += __shfl_xor_sync(FULL, w[i], m);
		if (lane == 0)
			put(p, seg, w);
	}
};

/* min and max in one pass: pol_ext's keys of both, the least in keys, the
 * greatest in idx (as keys, not indices). A piece's last batch is padded
 * with its first element, which changes neither. */
template <typename T> struct pol_minmax : tuning {
	using E = T;
	using LO = pol_ext<T, false>;
	using HI = pol_ext<T, true>;
	using K = grargm::key_t<T>;
	static constexpr K KLO = sizeof(T) == 4 ? (K)INT_MAX : (K)LLONG_MAX; /* no key beats */
	static constexpr K KHI = sizeof(T) == 4 ? (K)INT_MIN : (K)LLONG_MIN;
	static __device__ __forceinline__ void put(const params &p, uint64_t seg, long long a, long long b)
	{
		atomicMin((unsigned long long *)&p.keys[seg], (unsigned long long)a ^ 0x8000000000000000ull);
		atomicMax((unsigned long long *)&p.idx[seg], (unsigned long long)b ^ 0x8000000000000000ull);
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi,
							uint64_t seg)
	{
		T v[SHORT];
		load_short((const T *)p.x, lo, hi, v);
		long long a = LO::WORST, b = HI::WORST;
#pragma unroll
		for (unsigned e = 0; e < SHORT; e++) {
			if (lo + e < hi) {
				a = LO::better(a, (long long)grargm::key_of<T, false>(v[e]));
				b = HI::better(b, (long long)grargm::key_of<T, true>(v[e]));
			}
		}
		put(p, seg, a, b);
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		const T *x = (const T *)p.x;
		K a = KLO, b = KHI;
		for_batches<LOAD_BYTES>(x, lo + lane, hi, __ldg(x + lo), [&](const T *v, auto n) {
#pragma unroll
			for (unsigned g = 0; g < decltype(n)::value; g++) {
				const K c = grargm::key_of<T, false>(v[g]), d = grargm::key_of<T, true>(v[g]);
				a = c < a ? c : a;
				b = d > b ? d : b;
			}
		});
		long long wa = (long long)a, wb = (long long)b;
#pragma unroll
		for (int m = 16; m; m >>= 1) {
			wa = LO::better(wa, __shfl_xor_sync(FULL, wa, m));
			wb = HI::better(wb, __shfl_xor_sync(FULL, wb, m));
		}
		if (lane == 0)
			put(p, seg, wa, wb);
	}
};

/* The words of a launch's sums (segred.h's layout): the sum's digits and
 * flags, the squares', then min's and max's records. */
struct mom_areas {
	long long *sum, *sq;
	uint32_t *sum_flags, *sq_flags;
	uint64_t *min, *max;
};

static inline mom_areas areas(uint64_t *base, uint64_t k, unsigned sd, unsigned qd)
{
	mom_areas a;
	a.sum = (long long *)base;
	a.sum_flags = (uint32_t *)(a.sum + k * sd);
	a.sq = (long long *)(base + k * (sd + 1));
	a.sq_flags = (uint32_t *)(a.sq + k * qd);
	a.min = base + k * (sd + qd + 2);
	a.max = a.min + k;
	return a;
}

/* min's and max's records, in one pass over the data (pol_minmax): the
 * keys where the records go, then each finish in place. */
template <typename T>
static inline cudaError_t launch_mom_ext(params p, const mom_areas &a, cudaStream_t st)
{
	p.keys = a.min;
	p.idx = a.max;
	/* the worst keys: all ones for a minimum, 0 for a maximum */
	cudaError_t e = cudaMemsetAsync(a.min, 0xff, p.k * 8, st);
	if (!e)
		e = cudaMemsetAsync(a.max, 0, p.k * 8, st);
	if (!e)
		e = reduce<pol_minmax<T>>(p, st);
	if (e)
		return e;
	p.rec = p.keys = a.min;
	finish_ext<T, false><<<finish_blocks(p.k), FINISH_THREADS, 0, st>>>(p);
	p.rec = p.keys = a.max;
	finish_ext<T, true><<<finish_blocks(p.k), FINISH_THREADS, 0, st>>>(p);
	return cudaGetLastError();
}

/* Floats: the exact sum of the elements (form FS) and of their squares
 * (FQ), then min and max. */
template <class FS, class FQ> static inline cudaError_t launch_fmom(params p, cudaStream_t st)
{
	using T = typename FS::T;
	const mom_areas a = areas(p.rec, p.k, digits<FS>(), digits<FQ>());
	cudaError_t e = cudaMemsetAsync(p.rec, 0, p.k * 8 * (digits<FS>() + digits<FQ>() + 2), st);
	params q = p;
	q.digits = a.sum;
	q.flags = a.sum_flags;
	if (!e)
		e = reduce<typename exact_policy<FS>::type>(q, st);
	q.digits = a.sq;
	q.flags = a.sq_flags;
	if (!e)
		e = reduce<typename exact_policy<FQ>::type>(q, st);
	return e ? e : launch_mom_ext<T>(p, a, st);
}

/* Integers: the sums in one pass, then min and max. */
template <typename T> static inline cudaError_t launch_imom(params p, cudaStream_t st)
{
	const mom_areas a = areas(p.rec, p.k, ISUM, ISQ);
	cudaError_t e = cudaMemsetAsync(p.rec, 0, p.k * 8 * (ISUM + ISQ + 2), st);
	params q = p;
	q.digits = a.sum; /* the squares' digits follow: pol_imom::put */
	if (!e)
		e = reduce<pol_imom<T>>(q, st);
	return e ? e : launch_mom_ext<T>(p, a, st);
}

} /* namespace grsr */
