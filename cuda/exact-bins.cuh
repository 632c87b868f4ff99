/*
 * The exact sum's device arithmetic (exact.cuh has the argument): pieces
 * of a value deposited into the 32-bit digits of the superaccumulator,
 * and a warp's bins, the doubles pinned to fixed binades that take most
 * elements exactly and spill into the digits.
 */
#pragma once

#include <cfloat>
#include <cstdint>

#include "cuda/exact-traits.cuh"
#include "cuda/exact.h"

namespace gre {

/* Piece k (0..2) of mag * 2^b, b < 32, in 32-bit pieces */
static __device__ __forceinline__ uint64_t piece(uint64_t mag, unsigned b, unsigned k)
{
	uint64_t lo = mag << b;
	return k == 0 ? lo & 0xffffffffu : k == 1 ? lo >> 32 : b ? mag >> (64 - b) : 0;
}

/* |mag| * 2^(pos - 2176), with sign, into the digits: three 32-bit pieces
 * (any mag, pos < 32 (GR_EXACT_DIGITS - 2)) */
static __device__ __forceinline__ void deposit_int(long long *digits, uint64_t mag, bool neg,
						   unsigned pos)
{
	unsigned w = pos >> 5;
	uint64_t piece[3];
#pragma unroll
	for (unsigned k = 0; k < 3; k++)
		piece[k] = gre::piece(mag, pos & 31, k);
#pragma unroll
	for (unsigned k = 0; k < 3; k++)
		if (piece[k])
			atomicAdd((unsigned long long *)&digits[w + k],
				  neg ? (unsigned long long)-(long long)piece[k]
				      : (unsigned long long)piece[k]);
}

/* a finite double x times 2^scale into the digits; x 2^scale must be a
 * multiple of 2^-2176 (true of every double for scale >= -1102, and of
 * the scaled parts of an f64's square, multiples of 2^-2148) */
static __device__ __forceinline__ void deposit_double(long long *digits, double x, int scale = 0)
{
	uint64_t bits = (uint64_t)__double_as_longlong(x);
	unsigned e = (unsigned)(bits >> 52) & 0x7ffu;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	int pos = (e ? (int)e - 1 : 0) + LSB_OFF + scale;
	if (pos < 0) {
		/* only zero bits go */
		m >>= -pos;
		pos = 0;
	}
	if (m)
		deposit_int(digits, m, bits >> 63, (unsigned)pos);
}

/* a warp's bins: a[] per lane; the rest the same across the warp. The
 * fast path adds into the first FB (1 to 4): Fast2Sum into all but the
 * last, a plain add into that one. B0 and D place the bins (b0 = E + B0,
 * b(j+1) = bj - D); other places than B0_ABOVE and B1_BELOW are moments'
 * (moments.cuh argues for them). */
template <typename T, int FB, int B0 = B0_ABOVE, int D = B1_BELOW> struct bins {
	using elem = T;
	static constexpr int BINS = traits<T>::BINS;
	double a[BINS];
	int e;
	uint32_t thi, tlo1; /* largest key for the bins; smallest nzkey - 1 for the fast path */
	uint32_t flags;     /* GR_EXACT_NAN, _PINF, _NINF */
	int rawmax;
	bool pending;       /* a bin is near its limit: flush before the next batch */

	static __device__ __forceinline__ int bexp(int ne, int j)
	{
		return ne + B0 - j * D;
	}
	__device__ __forceinline__ double start(int j) const
	{
		return 1.5 * pow2(bexp(e, j));
	}

	__device__ __forceinline__ void pin(int ne)
	{
		e = ne;
#pragma unroll
		for (int j = 0; j < BINS; j++)
			a[j] = start(j);
		thi = traits<T>::key_below(ne);
		tlo1 = traits<T>::key_exact(bexp(ne, FB - 1)) - 1;
	}

	__device__ __forceinline__ void init()
	{
		flags = 0;
		rawmax = (int)0x80000000;
		pending = false;
		pin(E_LO<BINS, B0, D>);
	}

	/* Bin j's content as an integer, (a_j - start_j) * 2^(52 - bj) (|i| <
	 * 2^51: 52 bits), in two exact steps, the bin emptied; place(j) is the
	 * digits' bit of its unit. */
	__device__ __forceinline__ long long take(int j)
	{
		int s = 52 - bexp(e, j);
		double cj = start(j);
		long long i = __double2ll_rn((a[j] - cj) * pow2(s / 2) * pow2(s - s / 2));
		a[j] = cj;
		return i;
	}
	__device__ __forceinline__ int place(int j) const
	{
		return bexp(e, j) - 52 - GR_EXACT_LSB_EXP;
	}

	/* every lane of the warp: the bins into the digits as integers */
	__device__ __forceinline__ void flush(long long *digits, unsigned lane)
	{
#pragma unroll
		for (int j = 0; j < BINS; j++) {
			long long i = take(j);
			/* most flushes find most bins empty across the warp */
			if (__any_sync(FULL, i != 0)) {
#pragma unroll
				for (int m = 16; m; m >>= 1)
					i += __shfl_xor_sync(FULL, i, m);
				if (lane == 0 && i)
					deposit_int(digits, i < 0 ? -(uint64_t)i : (uint64_t)i, i < 0,
						    (unsigned)place(j));
			}
		}
	}

	/* Has a bin reached its headroom limit? (the first two are checked
	 * after every batch, the others where the fast path uses them; the
	 * deeper ones only take the careful path's residuals, after which
	 * they are checked too: deep is the warp's, so the usual batch runs
	 * only the first branch's checks.) Starts and limits are worked out
	 * from e, not kept: registers are what the kernels run short of. */
	__device__ __forceinline__ bool far(int j) const
	{
		return fabs(a[j] - start(j)) > pow2(bexp(e, j) - 3);
	}
	__device__ __forceinline__ bool near_full(bool deep) const
	{
		constexpr int NF = FB > 2 ? FB : 2;
		bool f = false;
		if (!deep) {
#pragma unroll
			for (int j = 0; j < NF; j++)
				f |= far(j);
		} else {
#pragma unroll
			for (int j = 0; j < BINS; j++)
				f |= far(j);
		}
		return f;
	}

	/* x into the first K bins: Fast2Sum into all but the last, a plain
	 * add into that one (exact for x in the window of K bins, tlo(K)) */
	template <int K> __device__ __forceinline__ void fast_k(double x)
	{
		static_assert(K >= 1 && K <= BINS, "the bins a lane has");
#pragma unroll
		for (int j = 0; j < K - 1; j++) {
			double s = a[j] + x;
			double d = s - a[j];
			a[j] = s;
			x -= d;
		}
		a[K - 1] += x;
	}
	__device__ __forceinline__ void fast(double x)
	{
		fast_k<FB>(x);
	}

	/* the smallest nzkey - 1 that the first K bins add exactly (tlo1 is
	 * tlo(FB)) */
	__device__ __forceinline__ uint32_t tlo(int k) const
	{
		return traits<T>::key_exact(bexp(e, k - 1)) - 1;
	}

	/* an f64's square on the fast path: x * x = p + e (see above) */
	__device__ __forceinline__ void fast_split(double x)
	{
		static_assert(FB == 4 && B0 == B0_ABOVE && D == B1_BELOW,
			      "a square's two parts take the first four bins, placed as above");
		double p = __dmul_rn(x, x), e = fma(x, x, -p);
		double s = a[0] + p, d = s - a[0];
		a[0] = s;
		p -= d;
		s = a[1] + p;
		d = s - a[1];
		a[1] = s;
		p -= d;
		a[2] += p;
		s = a[1] + e;
		d = s - a[1];
		a[1] = s;
		e -= d;
		s = a[2] + e;
		d = s - a[2];
		a[2] = s;
		e -= d;
		a[3] += e;
	}

	/* an f64's square on the careful path (see above) */
	__device__ __forceinline__ void careful_split(long long *digits, double x)
	{
		double ax = fabs(x);
		if (!(ax <= DBL_MAX)) {
			flags |= ax != ax ? GR_EXACT_NAN : GR_EXACT_PINF;
			return;
		}
		if (ax == 0)
			return;
		if (ax < 0x1p-400 || ax > 0x1p500) {
			int scale = ax < 0x1p-400 ? -1200 : 1200;
			double y = __dmul_rn(ax, ax < 0x1p-400 ? 0x1p600 : 0x1p-600);
			double p = __dmul_rn(y, y), e = fma(y, y, -p);
			deposit_double(digits, p, scale);
			deposit_double(digits, e, scale);
			return;
		}
		double p = __dmul_rn(ax, ax), e = fma(ax, ax, -p);
		careful(digits, p, (uint32_t)__double2hiint(p) & 0x7fffffffu);
		careful(digits, e, (uint32_t)__double2hiint(e) & 0x7fffffffu);
	}

	__device__ __forceinline__ void careful(long long *digits, double x, uint32_t k)
	{
		if (k > thi) {
			if (x != x)
				flags |= GR_EXACT_NAN;
			else if (__double_as_longlong(x) == 0x7ff0000000000000ll)
				flags |= GR_EXACT_PINF;
			else if (__double_as_longlong(x) == (long long)0xfff0000000000000ull)
				flags |= GR_EXACT_NINF;
			else
				deposit_double(digits, x);
			return;
		}
#pragma unroll
		for (int j = 0; j < BINS; j++) {
			double s = a[j] + x;
			double d = s - a[j];
			a[j] = s;
			x -= d;
		}
		if (x != 0)
			deposit_double(digits, x);
	}

	/*
	 * One batch of NV vectors per lane; every lane of the warp calls it.
	 * A bin found near its limit after a batch is flushed at the start
	 * of the next one (or by the caller's last flush), together with a
	 * flush that raising E needs: one place in the code for both.
	 */
	template <unsigned NV>
	__device__ __forceinline__ void batch(const uint4 (&v)[NV], long long *digits, unsigned lane)
	{
		uint32_t kmax, kmin;
		keys<NV>(v, kmax, kmin);
		batch_keyed<NV>(v, digits, lane, kmax, kmin);
	}

	/* A batch's largest key and smallest nzkey - 1 in the lane; rawmax
	 * kept. */
	template <unsigned NV>
	__device__ __forceinline__ void keys(const uint4 (&v)[NV], uint32_t &kmax, uint32_t &kmin)
	{
		using TR = traits<T>;
		kmax = 0;
		kmin = 0xffffffffu;
#pragma unroll
		for (unsigned g = 0; g < NV; g++)
#pragma unroll
			for (unsigned i = 0; i < TR::V; i++) {
				kmax = max(kmax, TR::key(v[g], i));
				kmin = min(kmin, TR::nzkey(v[g], i) - 1);
				rawmax = max(rawmax, TR::raw(v[g], i));
			}
	}

	/* batch() with the lane's largest key and smallest nzkey - 1 of the
	 * batch given, and rawmax kept by the caller: its three steps */
	template <unsigned NV>
	__device__ __forceinline__ void batch_keyed(const uint4 (&v)[NV], long long *digits,
						    unsigned lane, uint32_t kmax, uint32_t kmin)
	{
		bool deep = prepare(digits, lane, kmax, kmin);
		if (deep)
			add_careful<NV>(v, digits);
		else
			add_fast<NV>(v);
		settle(deep);
	}

	/* A batch's first step: raise E where it must (and flush what is
	 * pending); whether the warp takes the careful path with it. */
	__device__ __forceinline__ bool prepare(long long *digits, unsigned lane, uint32_t kmax,
						uint32_t kmin)
	{
		using TR = traits<T>;
		bool slow = kmax > thi || kmin < tlo1;
		int ne = e;
		if (__any_sync(FULL, slow)) {
			uint32_t wmax = __reduce_max_sync(FULL, kmax);
			if (wmax > thi) {
				ne = TR::bound(wmax);
				ne = ne < TR::E_HI ? ne : TR::E_HI;
			}
		}
		if (ne > e || pending) {
			flush(digits, lane);
			pending = false;
			if (ne > e) {
				/* raise E, then look at the batch again */
				pin(ne);
				slow = kmax > thi || kmin < tlo1;
			}
		}
		return __any_sync(FULL, slow);
	}

	/* The careful path: one element at a time, rolled (it is rare, and
	 * its code stays small). */
	template <unsigned NV>
	__device__ __forceinline__ void add_careful(const uint4 (&v)[NV], long long *digits)
	{
		using TR = traits<T>;
		uint4 w[NV];
#pragma unroll
		for (unsigned g = 0; g < NV; g++)
			w[g] = v[g];
#pragma unroll 1
		for (unsigned j = 0; j < NV * TR::V; j++) {
			uint4 u = w[j / TR::V];
			unsigned i = j % TR::V;
			if constexpr (TR::SPLIT)
				careful_split(digits, TR::value(u, i));
			else
				careful(digits, TR::value(u, i), TR::key(u, i));
		}
	}

	/* One element on the fast path. */
	__device__ __forceinline__ void add_one(const uint4 &v, unsigned i)
	{
		using TR = traits<T>;
		if constexpr (TR::SPLIT)
			fast_split(TR::value(v, i));
		else
			fast(TR::value(v, i));
	}

	template <unsigned NV> __device__ __forceinline__ void add_fast(const uint4 (&v)[NV])
	{
#pragma unroll
		for (unsigned g = 0; g < NV; g++)
#pragma unroll
			for (unsigned i = 0; i < traits<T>::V; i++)
				add_one(v[g], i);
	}

	/* The last step: a bin near its limit is flushed before the next. */
	__device__ __forceinline__ void settle(bool deep)
	{
		pending = __any_sync(FULL, near_full(deep));
	}
};

} /* namespace gre */
