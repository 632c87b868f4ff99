/*
 * moments on the GPU: the device code (moments.h has the interface).
 *
 * It is the exact kernel (exact.cuh) twice over the same loads: each warp
 * keeps the bins of the elements' sum and the bins of their squares'
 * (f32: each square exact in a double; f64: p + e), with two sets of
 * digits in shared memory, and the least and greatest element it reads
 * (padding excluded: for_each_group says which are the array's). Blocks
 * meet as the exact kernel's do: digits into the scratch with integer
 * atomics, keys with atomic maxima (of ~key for the least, so that a zero
 * scratch is the identity), and the last block moves them to the result
 * and leaves the scratch zero. Every part is exact or a maximum, so the
 * result does not depend on the grid or the order.
 *
 * Doing twice the exact kernel's work on each element would make f32
 * moments bound by instructions, not memory, so f32 does less:
 *
 * - The sum takes one plain add an element into a0, not Fast2Sum. With
 *   b0 = E + 9 (B0 = 9 below), a0's last place is 2^(E - 43); an f32
 *   element of |x| >= 2^(E - 20) is a multiple of that (24 bits from its
 *   top), so a0 + x is exact: a window of 20 binades, which the bins'
 *   checks give with FB = 1 (traits<float>::key_exact(b0)). Headroom: a
 *   batch moves a0 by at most 32 * 2^E = 2^(b0 - 4), and a bin is flushed
 *   once it is 2^(b0 - 3) from its start, so it stays inside its binade
 *   (2^(b0 - 1) from the start either way).
 * - The squares take Fast2Sum into a0 and a plain add into a1 (FB = 2),
 *   with the bins D = 45 binades apart, not 39: the residual of each
 *   square is below 2^(b0 - 53), a batch moves a1 by at most 32 times
 *   that, 2^(b1 - 3), which the same check keeps inside a1's binade; and
 *   the window is squares from 2^(b1 - 5) = 2^(S - 41) up (S bounds the
 *   squares): 20 binades of elements, as for the sum, where the exact
 *   kernel's sumsq needs a third bin (SQ_FB) for its 13. Deeper bins, for
 *   the careful path, keep the same spacing: each takes residuals below
 *   2^(b(j-1) - 53) = 2^(bj - 8), 32 of which are 2^(bj - 3) again.
 * - Where both take their fast paths (as good as always), one loop adds
 *   each element to both, so that the two chains of dependent adds
 *   interleave: a warp waits on one, not on one after the other.
 * - An element's keys are looked at once: the squares' largest key and
 *   smallest non-zero key are those of the squares of the largest and of
 *   the smallest non-zero |x| (squaring and the keys are monotonic), so
 *   they come from the sum's keys, once a batch.
 * - min and max are float minima and maxima (fminf, fmaxf: NaNs are the
 *   sum's flags' business), and zeros are told apart at the end: a zero
 *   minimum is -0 where an element's bits, as a signed integer, were
 *   INT_MIN (only -0's are), a zero maximum +0 where one was >= 0 (the
 *   sum's rawmax).
 *
 * f64 keeps the exact kernel's bins and keys (its squares' fast path,
 * p + e, is argued for that placement) and ordered keys for min and max.
 */
#pragma once

#include <cstdint>

#include "cuda/exact.cuh"
#include "cuda/moments.h"

namespace grm {

using gre::bins;
using gre::FULL;
using gre::GROUP;
using gre::THREADS;

/* The bins' places (B0, D: exact.cuh's bins) and fast paths (SUM_FB,
 * SQ_FB) of each dtype, its squares' traits, and its ordered keys (K). */
template <typename T> struct mtraits;

template <> struct mtraits<float> {
	using SQ = gre::sqf;
	static constexpr int B0 = 9, D = 45, SUM_FB = 1, SQ_FB = 2;
	using K = uint32_t;
	static __device__ __forceinline__ K key_of(uint32_t u)
	{
		return (int32_t)u < 0 ? ~u : u | 0x80000000u;
	}
	static __device__ __forceinline__ K key(const uint4 &v, unsigned i)
	{
		return key_of(gre::traits<float>::word(v, i));
	}
	static __device__ __forceinline__ K warp_min(K k) { return __reduce_min_sync(FULL, k); }
	static __device__ __forceinline__ K warp_max(K k) { return __reduce_max_sync(FULL, k); }
};

template <> struct mtraits<double> {
	using SQ = gre::sqd;
	static constexpr int B0 = gre::B0_ABOVE, D = gre::B1_BELOW, SUM_FB = gre::PROD_FB,
			     SQ_FB = gre::SQD_FB;
	using K = unsigned long long;
	static __device__ __forceinline__ K key(const uint4 &v, unsigned i)
	{
		K u = (K)gre::traits<double>::hi(v, i) << 32 | gre::traits<double>::lo(v, i);
		return (long long)u < 0 ? ~u : u | (1ull << 63);
	}
	static __device__ __forceinline__ K warp_min(K k)
	{
#pragma unroll
		for (int m = 16; m; m >>= 1)
			k = min(k, __shfl_xor_sync(FULL, k, m));
		return k;
	}
	static __device__ __forceinline__ K warp_max(K k)
	{
#pragma unroll
		for (int m = 16; m; m >>= 1)
			k = max(k, __shfl_xor_sync(FULL, k, m));
		return k;
	}
};

/* The squares' keys (traits<sqf>: key and nzkey - 1) of a batch whose
 * elements' largest key is kmax and smallest non-zero one kmin + 1 (or
 * none: kmin all ones), as the squares themselves would give them. */
static __device__ __forceinline__ void square_keys(uint32_t kmax, uint32_t kmin, uint32_t &qmax,
						   uint32_t &qmin)
{
	double m = (double)__uint_as_float(kmax);
	qmax = (uint32_t)__double2hiint(m * m) & 0x7fffffffu;
	double z = (double)__uint_as_float(kmin + 1), zz = z * z;
	uint32_t nz = ((uint32_t)__double2hiint(zz) & 0x7fffffffu) | (__double2loint(zz) != 0);
	qmin = kmin == 0xffffffffu ? kmin : nz - 1;
}

/*
 * One group into the sum's bins s and the squares' q, given each one's
 * keys of the group (bins::keys): where both take their fast paths (as
 * good as always), one loop adds each element to both, so that the two
 * chains of dependent adds interleave.
 */
template <typename S, typename Q>
static __device__ __forceinline__ void both_bins(const uint4 (&v)[GROUP], S &s, Q &q,
						 long long *d1, long long *d2, unsigned lane,
						 uint32_t smax, uint32_t smin, uint32_t qmax,
						 uint32_t qmin)
{
	bool ds = s.prepare(d1, lane, smax, smin), dq = q.prepare(d2, lane, qmax, qmin);
	if (!ds && !dq) {
#pragma unroll
		for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
			for (unsigned i = 0; i < gre::traits<typename S::elem>::V; i++) {
				s.add_one(v[g], i);
				q.add_one(v[g], i);
			}
	} else {
		if (ds)
			s.template add_careful<GROUP>(v, d1);
		else
			s.template add_fast<GROUP>(v);
		if (dq)
			q.template add_careful<GROUP>(v, d2);
		else
			q.template add_fast<GROUP>(v);
	}
	s.settle(ds);
	q.settle(dq);
}

/*
 * f32: one group into the sum's bins s and the squares' q, and the lane's
 * float minimum and maximum (and the least of its elements' bits as signed
 * integers, rmin), the group's live elements only (above).
 */
template <typename S, typename Q>
static __device__ __forceinline__ void f32_group(const uint4 (&v)[GROUP], uint32_t live, S &s,
						 Q &q, long long *d1, long long *d2,
						 unsigned lane, float &fmn, float &fmx, int &rmin)
{
	uint32_t kmax = 0, kmin = 0xffffffffu;
	int rmax = s.rawmax;
	/* padding (-0) changes none of the keys, nor rmax */
#pragma unroll
	for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
		for (unsigned i = 0; i < 4; i++) {
			uint32_t w = gre::traits<float>::word(v[g], i), k = w & 0x7fffffffu;
			kmax = max(kmax, k);
			kmin = min(kmin, k - 1);
			rmax = max(rmax, (int)w);
		}
	if (live == 0xffffffffu) {
#pragma unroll
		for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
			for (unsigned i = 0; i < 4; i++) {
				uint32_t w = gre::traits<float>::word(v[g], i);
				fmn = fminf(fmn, __uint_as_float(w));
				fmx = fmaxf(fmx, __uint_as_float(w));
				rmin = min(rmin, (int)w);
			}
	} else {
#pragma unroll
		for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
			for (unsigned i = 0; i < 4; i++) {
				uint32_t w = gre::traits<float>::word(v[g], i);
				bool in = (live >> (g * 4 + i)) & 1;
				fmn = in ? fminf(fmn, __uint_as_float(w)) : fmn;
				fmx = in ? fmaxf(fmx, __uint_as_float(w)) : fmx;
				rmin = in ? min(rmin, (int)w) : rmin;
			}
	}
	s.rawmax = rmax;
	uint32_t qmax, qmin;
	square_keys(kmax, kmin, qmax, qmin);
	both_bins(v, s, q, d1, d2, lane, kmax, kmin, qmax, qmin);
}

/* The least and greatest key of a group's live elements into lo and hi. */
template <typename T>
static __device__ __forceinline__ void group_keys(const uint4 (&v)[GROUP], uint32_t live,
						  typename mtraits<T>::K &lo, typename mtraits<T>::K &hi)
{
	using M = mtraits<T>;
	using K = typename M::K;
	constexpr unsigned V = gre::traits<T>::V;
	constexpr uint32_t ALL = GROUP * V == 32 ? 0xffffffffu : (1u << (GROUP * V)) - 1;
	if (live == ALL) {
#pragma unroll
		for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
			for (unsigned i = 0; i < V; i++) {
				K k = M::key(v[g], i);
				lo = min(lo, k);
				hi = max(hi, k);
			}
		return;
	}
#pragma unroll
	for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
		for (unsigned i = 0; i < V; i++) {
			K k = M::key(v[g], i);
			bool in = (live >> (g * V + i)) & 1;
			lo = in ? min(lo, k) : lo;
			hi = in ? max(hi, k) : hi;
		}
}

template <typename T, unsigned MINB = 2>
__global__ void __launch_bounds__(THREADS, MINB)
moments_kernel(const unsigned char *data, uint64_t n, gr_moments_scratch *scratch,
	       gr_moments_sums *out)
{
	using M = mtraits<T>;
	using K = typename M::K;
	__shared__ long long d1[GR_EXACT_DIGITS], d2[GR_EXACT_DIGITS];
	__shared__ unsigned long long f1, f2, nkmin, kmax;
	const unsigned t = threadIdx.x, lane = t & 31;
	if (t < GR_EXACT_DIGITS) {
		d1[t] = 0;
		d2[t] = 0;
	}
	if (t == 0)
		f1 = f2 = nkmin = kmax = 0;
	__syncthreads();

	bins<T, M::SUM_FB, M::B0, M::D> s;
	bins<typename M::SQ, M::SQ_FB, M::B0, M::D> q;
	s.init();
	q.init();
	K lo, hi;
	if constexpr (sizeof(T) == 4) {
		/* squares are never -0: their flags say "not -0" from the start */
		q.rawmax = 0;
		float fmn = __int_as_float(0x7f800000), fmx = -fmn;
		int rmin = 0x7fffffff;
		gre::for_each_group<T, false>(data, n, t, lane,
					      [&](const uint4 (&v)[GROUP], uint32_t live) {
			f32_group(v, live, s, q, d1, d2, lane, fmn, fmx, rmin);
		});
		if (fmn == 0.0f)
			fmn = rmin == (int)0x80000000 ? -0.0f : 0.0f;
		if (fmx == 0.0f)
			fmx = s.rawmax >= 0 ? 0.0f : -0.0f;
		lo = M::key_of(__float_as_uint(fmn));
		hi = M::key_of(__float_as_uint(fmx));
	} else {
		lo = (K)~(K)0;
		hi = 0;
		gre::for_each_group<T, false>(data, n, t, lane,
					      [&](const uint4 (&v)[GROUP], uint32_t live) {
			uint32_t smax, smin, qmax, qmin;
			s.template keys<GROUP>(v, smax, smin);
			q.template keys<GROUP>(v, qmax, qmin);
			both_bins(v, s, q, d1, d2, lane, smax, smin, qmax, qmin);
			group_keys<T>(v, live, lo, hi);
		});
	}
	s.flush(d1, lane);
	q.flush(d2, lane);
	gre::warp_flags(s, &f1, lane);
	gre::warp_flags(q, &f2, lane);
	lo = M::warp_min(lo);
	hi = M::warp_max(hi);
	if (lane == 0) {
		atomicMax(&nkmin, ~(unsigned long long)lo);
		atomicMax(&kmax, (unsigned long long)hi);
	}
	__syncthreads();

	if (gridDim.x == 1) {
		if (t < GR_EXACT_DIGITS) {
			out->sum.digit[t] = d1[t];
			out->sq.digit[t] = d2[t];
		}
		if (t == 0) {
			out->sum.flags = f1;
			out->sq.flags = f2;
			out->kmin = ~nkmin;
			out->kmax = kmax;
		}
		return;
	}
	if (t == 0) {
		atomicMax((unsigned long long *)&scratch->nkmin, nkmin);
		atomicMax((unsigned long long *)&scratch->kmax, kmax);
	}
	gre::digits_to_scratch(d1, f1, &scratch->sum, t);
	gre::digits_to_scratch(d2, f2, &scratch->sq, t);
	if (gre::last_block(&scratch->sum.ticket, t)) {
		gre::scratch_to_out(&scratch->sum, &out->sum, t);
		gre::scratch_to_out(&scratch->sq, &out->sq, t);
		if (t == 0) {
			out->kmin = ~atomicExch((unsigned long long *)&scratch->nkmin, 0ull);
			out->kmax = atomicExch((unsigned long long *)&scratch->kmax, 0ull);
		}
	}
}

/* Blocks per SM: f32 fits three (80 registers, a few spilled, in code
 * the fast path rarely runs), and the extra warps hide more of the
 * memory's latency (H200, 2^28: 0.78 of the read kernel against 0.74
 * with two); f64's squares need more registers, and it runs two. */
constexpr unsigned F32_MINB = 3;

template <typename T, unsigned MINB = 2>
static inline cudaError_t launch(const void *data, uint64_t n, gr_moments_scratch *scratch,
				 gr_moments_sums *out, int sm_count, cudaStream_t stream,
				 unsigned blocks = 0)
{
	if (!blocks)
		blocks = gre::grid_blocks<T>(n, sm_count, MINB);
	moments_kernel<T, MINB><<<blocks, THREADS, 0, stream>>>((const unsigned char *)data, n,
								scratch, out);
	return cudaGetLastError();
}

} /* namespace grm */
