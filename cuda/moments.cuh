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
 * - min and max are PTX's min.f32 and max.f32, one instruction an
 *   element each: NaNs are the sum's flags' business, and they order -0
 *   below +0 (the ISA's semantics, whatever the operands' order), so a
 *   zero minimum is -0 where a -0 was among the elements, a zero maximum
 *   +0 where a +0 was. The sum's "an element other than -0" (its rawmax)
 *   follows from them and its flags at the end (f32_rawmax), not from
 *   each element.
 * - A batch outside either fast path's window has a wide path
 *   (f32_wide): the sum through its first three bins, a window of 110
 *   binades, and each square, as two f32s p + e, into the exact
 *   kernel's exponent groups (exact-wide.cuh, step 3), in one loop; the
 *   careful paths take what that does not hold (infinities, NaNs, data
 *   over more binades, squares that are not p + e). Data over 60
 *   binades reads at about three times the careful path's rate.
 *
 * f64 keeps the exact kernel's bins and keys (its squares' fast path,
 * p + e, is argued for that placement) and ordered keys for min and max.
 */
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/bulk.cuh"
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
	/* f32 keeps float minima (f32_group), keyed at the end */
	static __device__ __forceinline__ K key_of(uint32_t u)
	{
		return (int32_t)u < 0 ? ~u : u | 0x80000000u;
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
 * f32's wide path (wq: the squares' exponent groups, exact-wide.cuh's
 * step 3 for squares), for a batch outside either fast path's window:
 * where its elements hold no infinity or NaN, lie in the sum's middle
 * tier (its first three bins, a window of 110 binades below E: SUM_MB),
 * and square to p + e (SQ_KEY_LO, SQ_KEY_HI), it goes into the middle
 * tier and the groups, in one loop (the sum's adds and the groups' loads
 * and stores interleave), and this says so; otherwise it is left to the
 * careful paths. (The middle tier holds what the sum's fast path does,
 * and the groups any square that is p + e: a batch that one fast path
 * alone left goes the same way.) Every step is exact, so the sums are
 * the careful paths' bit for bit.
 */
constexpr int SUM_MB = 3;

template <typename S, typename W>
static __device__ __forceinline__ bool f32_wide(const uint4 (&v)[GROUP], S &s, W &wq,
						long long *d2, unsigned lane, uint32_t smax,
						uint32_t smin, uint32_t qmax, uint32_t qmin)
{
	if (__any_sync(FULL, smax >= gre::wide_of<float>::SPECIAL || qmax >= gre::SQ_KEY_HI ||
				     qmin < gre::SQ_KEY_LO || smin < s.tlo(SUM_MB) || smax > s.thi))
		return false;
#pragma unroll
	for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
		for (unsigned i = 0; i < 4; i++) {
			const float x = __uint_as_float(gre::traits<float>::word(v[g], i));
			s.template fast_k<SUM_MB>((double)x);
			wq.sq_group_add(x);
		}
	wq.sq_groups_end(d2, lane);
	return true;
}

/*
 * One group into the sum's bins s and the squares' q, given each one's
 * keys of the group (bins::keys): where both take their fast paths (as
 * good as always), one loop adds each element to both, so that the two
 * chains of dependent adds interleave; otherwise f32's wide path where
 * there is one (wq, f32_wide), and the careful paths.
 */
template <typename S, typename Q, typename W = void>
static __device__ __forceinline__ void both_bins(const uint4 (&v)[GROUP], S &s, Q &q,
						 long long *d1, long long *d2, unsigned lane,
						 uint32_t smax, uint32_t smin, uint32_t qmax,
						 uint32_t qmin, W *wq = nullptr)
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
		if constexpr (!std::is_same<W, void>::value) {
			if (f32_wide(v, s, *wq, d2, lane, smax, smin, qmax, qmin)) {
				s.settle(true);
				q.settle(false);
				return;
			}
		}
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

/* min.f32 and max.f32 as the ISA defines them (-0 < +0, a NaN operand
 * ignored), written out so that nothing between here and the instruction
 * may treat zeros of either sign as the same. */
static __device__ __forceinline__ float min_f32(float a, float b)
{
	float r;
	asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
	return r;
}

static __device__ __forceinline__ float max_f32(float a, float b)
{
	float r;
	asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
	return r;
}

/*
 * The sum's rawmax as far as it is read ("an element other than -0 was
 * seen": >= 0, or INT_MIN) from the lane's float minimum and maximum of its
 * elements (+inf and -inf for none) and its flags: NaN and infinities set
 * flags; a +0 or a positive element leaves fmx's sign clear; a negative
 * one other than -0 leaves fmn below zero; -0s alone do neither.
 */
static __device__ __forceinline__ int f32_rawmax(float fmn, float fmx, uint32_t flags)
{
	bool seen = flags != 0 || (int)__float_as_uint(fmx) >= 0 || fmn < 0.0f;
	return seen ? 0 : (int)0x80000000;
}

/*
 * f32: one group into the sum's bins s and the squares' q, and the lane's
 * float minimum and maximum, the group's live elements only (above).
 */
template <typename S, typename Q, typename W>
static __device__ __forceinline__ void f32_group(const uint4 (&v)[GROUP], uint32_t live, S &s,
						 Q &q, W *wq, long long *d1, long long *d2,
						 unsigned lane, float &fmn, float &fmx)
{
	uint32_t kmax = 0, kmin = 0xffffffffu;
	/* padding (-0) changes none of the keys */
#pragma unroll
	for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
		for (unsigned i = 0; i < 4; i++) {
			uint32_t k = gre::traits<float>::word(v[g], i) & 0x7fffffffu;
			kmax = max(kmax, k);
			kmin = min(kmin, k - 1);
		}
	if (live == 0xffffffffu) {
#pragma unroll
		for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
			for (unsigned i = 0; i < 4; i++) {
				float x = __uint_as_float(gre::traits<float>::word(v[g], i));
				fmn = min_f32(fmn, x);
				fmx = max_f32(fmx, x);
			}
	} else {
#pragma unroll
		for (unsigned g = 0; g < GROUP; g++)
#pragma unroll
			for (unsigned i = 0; i < 4; i++) {
				float x = __uint_as_float(gre::traits<float>::word(v[g], i));
				bool in = (live >> (g * 4 + i)) & 1;
				fmn = in ? min_f32(fmn, x) : fmn;
				fmx = in ? max_f32(fmx, x) : fmx;
			}
	}
	uint32_t qmax, qmin;
	square_keys(kmax, kmin, qmax, qmin);
	both_bins(v, s, q, d1, d2, lane, kmax, kmin, qmax, qmin, wq);
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

/* A block's keys (~ the least, the greatest) into the launch's result,
 * the launch's scratch, and from the scratch to the result (which leaves
 * it zero): thread 0's. */
static __device__ __forceinline__ void keys_out(gr_moments_sums *out, unsigned long long nkmin,
						unsigned long long kmax)
{
	out->kmin = ~nkmin;
	out->kmax = kmax;
}

static __device__ __forceinline__ void keys_to_scratch(gr_moments_scratch *scratch,
						       unsigned long long nkmin,
						       unsigned long long kmax)
{
	atomicMax((unsigned long long *)&scratch->nkmin, nkmin);
	atomicMax((unsigned long long *)&scratch->kmax, kmax);
}

static __device__ __forceinline__ void keys_from_scratch(gr_moments_scratch *scratch,
							 gr_moments_sums *out)
{
	keys_out(out, atomicExch((unsigned long long *)&scratch->nkmin, 0ull),
		 atomicExch((unsigned long long *)&scratch->kmax, 0ull));
}

/* The squares' groups (wq) a block of the f32 kernel keeps in its
 * dynamic shared memory, after the tiles */
using wide_sq = gre::wide<gre::sqf, gre::WIDE_MID>;

/* WQ: f32 with the squares' groups (f32_wide); their shared memory
 * follows the tiles */
template <typename T, unsigned MINB = 2, bool BULK = false, bool WQ = false>
__global__ void __launch_bounds__(THREADS, MINB)
moments_kernel(const unsigned char *data, uint64_t n, gr_moments_scratch *scratch,
	       gr_moments_sums *out)
{
	using M = mtraits<T>;
	using K = typename M::K;
	__shared__ long long d1[GR_EXACT_DIGITS], d2[GR_EXACT_DIGITS];
	__shared__ unsigned long long f1, f2, nkmin, kmax, bars[grb_bulk::BARS];
	extern __shared__ __align__(128) uint4 tiles[];
	const unsigned t = threadIdx.x, lane = t & 31;
	/* the groups from memory (exact.cuh) or through shared memory (bulk.cuh) */
	auto each = [&](auto &&add) {
		if constexpr (BULK)
			grb_bulk::for_each_group<T>(data, n, t, lane, tiles, bars, add);
		else
			gre::for_each_group<T>(data, n, t, lane, add);
	};
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
		if constexpr (WQ) {
			wide_sq wq;
			wq.init(tiles + (BULK ? grb_bulk::SMEM_BYTES / 16 : 0), t);
			each([&](const uint4 (&v)[GROUP], uint32_t live) {
				f32_group(v, live, s, q, &wq, d1, d2, lane, fmn, fmx);
			});
			wq.finish(d2, lane);
		} else {
			each([&](const uint4 (&v)[GROUP], uint32_t live) {
				f32_group(v, live, s, q, (void *)nullptr, d1, d2, lane, fmn, fmx);
			});
		}
		s.rawmax = f32_rawmax(fmn, fmx, s.flags);
		lo = M::key_of(__float_as_uint(fmn));
		hi = M::key_of(__float_as_uint(fmx));
	} else {
		lo = (K)~(K)0;
		hi = 0;
		each([&](const uint4 (&v)[GROUP], uint32_t live) {
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
			keys_out(out, nkmin, kmax);
		}
		return;
	}
	if (t == 0)
		keys_to_scratch(scratch, nkmin, kmax);
	gre::digits_to_scratch(d1, f1, &scratch->sum, t);
	gre::digits_to_scratch(d2, f2, &scratch->sq, t);
	if (gre::last_block(&scratch->sum.ticket, t)) {
		gre::scratch_to_out(&scratch->sum, &out->sum, t);
		gre::scratch_to_out(&scratch->sq, &out->sq, t);
		if (t == 0)
			keys_from_scratch(scratch, out);
	}
}

/* ---- integers ---- */

/* A thread's integer sums: S1 in 128 bits, S2 in 192 (lo + hi 2^128),
 * and its least and greatest element, for 64-bit dtypes. */
template <typename T> struct isums {
	__int128 s1 = 0;
	unsigned __int128 s2 = 0;
	uint64_t s2hi = 0;
	T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::min();

	__device__ __forceinline__ void add(T x)
	{
		s1 += (__int128)x;
		uint64_t a = (uint64_t)x;
		if constexpr (std::is_signed<T>::value)
			a = x < 0 ? (uint64_t)0 - a : a;
		unsigned __int128 q = (unsigned __int128)a * a;
		s2 += q;
		s2hi += s2 < q;
		lo = min(lo, x);
		hi = max(hi, x);
	}
	__device__ __forceinline__ __int128 sum() const { return s1; }
	__device__ __forceinline__ unsigned __int128 sq_lo() const { return s2; }
	__device__ __forceinline__ uint64_t sq_hi() const { return s2hi; }
};

/* The same for 32-bit dtypes, in narrower words: a thread's S1 fits 64
 * bits and its S2 128 while it adds fewer than 2^32 elements (a launch
 * of fewer than 2^32 elements a thread: 2^40 elements on a grid of 256
 * threads, past any request's 1 GiB a launch). */
template <typename T> struct isums32 {
	int64_t s1 = 0;
	uint64_t s2 = 0, s2hi = 0;
	T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::min();

	__device__ __forceinline__ void add(T x)
	{
		s1 += (int64_t)x;
		uint32_t a = (uint32_t)x;
		if constexpr (std::is_signed<T>::value)
			a = (uint32_t)abs((int32_t)x);
		uint64_t q = (uint64_t)a * a;
		s2 += q;
		s2hi += s2 < q;
		lo = min(lo, x);
		hi = max(hi, x);
	}
	__device__ __forceinline__ __int128 sum() const { return s1; }
	__device__ __forceinline__ unsigned __int128 sq_lo() const
	{
		return (unsigned __int128)s2hi << 64 | s2;
	}
	__device__ __forceinline__ uint64_t sq_hi() const { return 0; }
};

template <typename T>
using isums_of = typename std::conditional<sizeof(T) == 4, isums32<T>, isums<T>>::type;

/* An element's key (moments.h): its value, the sign bit flipped for
 * signed dtypes. */
template <typename T> static __device__ __forceinline__ uint64_t int_key(T x)
{
	return std::is_signed<T>::value ? (uint64_t)(int64_t)x ^ (1ull << 63) : (uint64_t)x;
}

/* v's elements into a thread's sums. */
template <typename T>
static __device__ __forceinline__ void add_vector(isums_of<T> &a, const uint4 &v)
{
	if constexpr (sizeof(T) == 4) {
		a.add((T)v.x);
		a.add((T)v.y);
		a.add((T)v.z);
		a.add((T)v.w);
	} else {
		a.add((T)((uint64_t)v.y << 32 | v.x));
		a.add((T)((uint64_t)v.w << 32 | v.z));
	}
}

/* A warp's sum of a digit, by lane 0 into the block's. */
static __device__ __forceinline__ void warp_digit(long long *to, long long d, unsigned lane)
{
#pragma unroll
	for (int m = 16; m; m >>= 1)
		d += __shfl_xor_sync(FULL, d, m);
	if (lane == 0 && d)
		atomicAdd((unsigned long long *)to, (unsigned long long)d);
}

/*
 * Integer moments: threads take 16-byte vectors grid-stride, block 0 the
 * elements before the first and after the last whole vector; each thread's
 * sums become 32-bit digits (S1's top one its sign, -1 or 0), summed
 * across the warp, into the block's digits in shared memory and then into
 * the scratch's with integer atomics (each below 2^37 a warp, 2^40 a
 * block: no place can overflow), and the last block moves them to the
 * result, leaving the scratch zero. Keys meet as the float kernels' do.
 */
template <typename T>
__global__ void __launch_bounds__(THREADS, 2)
moments_int_kernel(const unsigned char *data, uint64_t n, gr_moments_scratch *scratch,
		   gr_moments_sums *out)
{
	constexpr unsigned ND1 = GR_MOMENTS_ISUM_DIGITS, ND2 = GR_MOMENTS_ISQ_DIGITS;
	__shared__ long long d1[ND1], d2[ND2];
	__shared__ unsigned long long nkmin, kmax;
	const unsigned t = threadIdx.x, lane = t & 31;
	if (t < ND1)
		d1[t] = 0;
	if (t < ND2)
		d2[t] = 0;
	if (t == 0)
		nkmin = kmax = 0;
	__syncthreads();

	isums_of<T> a;
	const gre::vectors<T> va(data, n);
	const uint64_t head = va.head, nv = va.nv, tail = va.tail;
	const uint4 *vb = va.vb;
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;
	if (blockIdx.x == 0 && t < head + tail) {
		uint64_t i = t < head ? t : n - tail + (t - head);
		a.add(((const T *)data)[i]);
	}
	uint64_t i = (uint64_t)blockIdx.x * THREADS + t;
	for (; i + 3 * nt < nv; i += 4 * nt) {
		uint4 v[4];
#pragma unroll
		for (unsigned k = 0; k < 4; k++)
			v[k] = __ldg(vb + i + k * nt);
#pragma unroll
		for (unsigned k = 0; k < 4; k++)
			add_vector<T>(a, v[k]);
	}
	for (; i < nv; i += nt)
		add_vector<T>(a, __ldg(vb + i));

	/* S1: the low 128 bits in four pieces, the sign as the fifth digit */
	const __int128 s1 = a.sum();
	const unsigned __int128 u1 = (unsigned __int128)s1, s2 = a.sq_lo();
	const uint64_t s2hi = a.sq_hi();
#pragma unroll
	for (unsigned k = 0; k < 4; k++)
		warp_digit(&d1[k], (long long)(uint64_t)(u1 >> (32 * k)) & 0xffffffffll, lane);
	warp_digit(&d1[4], s1 < 0 ? -1 : 0, lane);
#pragma unroll
	for (unsigned k = 0; k < 4; k++)
		warp_digit(&d2[k], (long long)(uint64_t)(s2 >> (32 * k)) & 0xffffffffll, lane);
	warp_digit(&d2[4], (long long)(s2hi & 0xffffffffu), lane);
	warp_digit(&d2[5], (long long)(s2hi >> 32), lane);
	/* a thread that added nothing keeps the keys' identities */
	uint64_t lo = int_key(a.lo), hi = int_key(a.hi);
#pragma unroll
	for (int m = 16; m; m >>= 1) {
		lo = min(lo, (uint64_t)__shfl_xor_sync(FULL, (unsigned long long)lo, m));
		hi = max(hi, (uint64_t)__shfl_xor_sync(FULL, (unsigned long long)hi, m));
	}
	if (lane == 0) {
		atomicMax(&nkmin, ~(unsigned long long)lo);
		atomicMax(&kmax, (unsigned long long)hi);
	}
	__syncthreads();

	if (gridDim.x == 1) {
		if (t < ND1)
			out->isum[t] = d1[t];
		if (t < ND2)
			out->isq[t] = d2[t];
		if (t == 0)
			keys_out(out, nkmin, kmax);
		return;
	}
	if (t == 0)
		keys_to_scratch(scratch, nkmin, kmax);
	if (t < ND1 && d1[t])
		atomicAdd((unsigned long long *)&scratch->isum[t], (unsigned long long)d1[t]);
	if (t < ND2 && d2[t])
		atomicAdd((unsigned long long *)&scratch->isq[t], (unsigned long long)d2[t]);
	__threadfence();
	if (gre::last_block(&scratch->sum.ticket, t)) {
		if (t < ND1)
			out->isum[t] = (long long)atomicExch((unsigned long long *)&scratch->isum[t], 0ull);
		if (t < ND2)
			out->isq[t] = (long long)atomicExch((unsigned long long *)&scratch->isq[t], 0ull);
		if (t == 0)
			keys_from_scratch(scratch, out);
	}
}

template <typename T>
static inline cudaError_t launch_int(const void *data, uint64_t n, gr_moments_scratch *scratch,
				     gr_moments_sums *out, int sm_count, cudaStream_t stream,
				     unsigned blocks = 0)
{
	if (!blocks) {
		uint64_t want = (n * sizeof(T) / 16 + THREADS * 4 - 1) / (THREADS * 4);
		uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * 2;
		blocks = (unsigned)(want < cap ? (want ? want : 1) : cap);
	}
	moments_int_kernel<T><<<blocks, THREADS, 0, stream>>>((const unsigned char *)data, n,
							      scratch, out);
	return cudaGetLastError();
}

/* The production form, f32 and f64: the groups through shared memory
 * (bulk.cuh), two blocks an SM (no spills, where three need 80 registers
 * and spill). Loads in registers can keep only one group a warp in
 * flight, and two blocks of them leave the memory idle (gpured-exact-bench
 * measures the forms: docs/BENCHMARKS.md). f32 keeps the squares'
 * groups wherever MINB blocks of them fit an SM's shared memory. */
constexpr unsigned PROD_MINB = 2;
constexpr bool PROD_BULK = true;
constexpr unsigned SMEM_PER_SM = 227u * 1024;

template <typename T, unsigned MINB, bool BULK>
constexpr bool prod_wq()
{
	return sizeof(T) == 4 &&
	       MINB * ((BULK ? grb_bulk::SMEM_BYTES : 0u) + wide_sq::SMEM + 4096u) <= SMEM_PER_SM;
}

template <typename T, unsigned MINB = PROD_MINB, bool BULK = PROD_BULK,
	  bool WQ = prod_wq<T, MINB, BULK>()>
static inline cudaError_t launch(const void *data, uint64_t n, gr_moments_scratch *scratch,
				 gr_moments_sums *out, int sm_count, cudaStream_t stream,
				 unsigned blocks = 0)
{
	static_assert(!WQ || sizeof(T) == 4, "the squares' groups are f32's");
	if (!blocks)
		blocks = gre::grid_blocks<T>(n, sm_count, MINB);
	unsigned smem;
	if (cudaError_t e = grb_bulk::prepare<BULK>(moments_kernel<T, MINB, BULK, WQ>, smem,
						    WQ ? wide_sq::SMEM : 0u))
		return e;
	moments_kernel<T, MINB, BULK, WQ><<<blocks, THREADS, smem, stream>>>(
		(const unsigned char *)data, n, scratch, out);
	return cudaGetLastError();
}

} /* namespace grm */
