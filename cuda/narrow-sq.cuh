/*
 * Sums of squares of the narrow floats that narrow-ops.cuh's grid does
 * not take (f16, f8e5m2 and bf16), each exact, as ops of the narrow
 * kernel (narrow.cuh). A narrow float's square is exact in an f32 for
 * f16 and f8e5m2 (11 and 3 significant bits, squares from 2^-48 and
 * 2^-32 up to below 2^32) and in a double for bf16.
 *
 * f16 and f8e5m2 (SumSqGrid): the squares lie on a grid, but one too
 * long for a double (80 and 64 bits), so each square goes by its size to
 * one of a few classes, each a double a slot of the lane, in which a
 * square is a multiple of the class's unit and the class's doubles take
 * CAP adds with no rounding at all:
 *
 *   f16:    s >= 2^10 (|x| >= 2^5: a multiple of 2^-5), unit 2^-10,
 *           below 2^43 after 2^11 adds: 53 bits;
 *           2^-12 <= s < 2^10 (|x| >= 2^-6), unit 2^-32, below 2^21;
 *           s < 2^-12, unit 2^-48 (f16's own), below 2^-1.
 *   f8e5m2: s >= 1 (|x| >= 1: a multiple of 2^-2), unit 2^-4, below
 *           2^49 after 2^17 adds; s < 1, unit 2^-32 (e5m2's own), below
 *           2^17.
 *
 * Each square is added to every class's double of its slot, 0 to all but
 * its own (a select, not a branch); a NaN square (NaN element) goes to
 * the last class, an infinity to the first, and each leaves its double
 * NaN or +inf, which the flush records in the flags. Before a double
 * could take too many the warp moves every class into the block's digits
 * (an integer number of its units, summed over the warp) and starts them
 * afresh, so no lane's integer can grow with the array.
 *
 * bf16 (SumSqBf16): its squares span 2^-266 to 2^256, so they take the
 * exact kernel's bins for f32 squares (exact.cuh, traits<sqf>: each square
 * exact in a double, Fast2Sum into pinned bins, the careful path behind
 * them), each 16-byte vector widened to two vectors of f32 first (a
 * bf16 is the top half of its f32). Its window is that of the f32
 * squares, with the third bin on the fast path (exact.cuh's SQ_FB).
 *
 * A square is never -0: every sum here says "an element other than -0"
 * from the start, as the CPU's sums of squares do.
 */
#pragma once

#include "cuda/narrow.cuh"

namespace grn {

template <int DT> struct SqGridClasses;

template <> struct SqGridClasses<F16> {
	static constexpr unsigned K = 3;
	/* class c takes squares from LO[c] up (the last: everything else) */
	static constexpr float LO0 = 0x1p10f, LO1 = 0x1p-12f;
	static constexpr unsigned CAP = 1u << 11;
	__host__ __device__ static constexpr int unit(unsigned c) { return c == 0 ? 10 : c == 1 ? 32 : 48; }
};

template <> struct SqGridClasses<E5M2> {
	static constexpr unsigned K = 2;
	static constexpr float LO0 = 1.0f, LO1 = 0.0f;
	static constexpr unsigned CAP = 1u << 17;
	__host__ __device__ static constexpr int unit(unsigned c) { return c == 0 ? 4 : 32; }
};

template <int DT> struct SumSqGrid {
	static_assert(DT == F16 || DT == E5M2, "squares on a grid");
	using C = SqGridClasses<DT>;
	static constexpr unsigned SIZE = dt_size<DT>;
	static constexpr bool EXACT = true;
	static constexpr uint32_t PADW = 0;
	static constexpr unsigned K = C::K;
	/* a double a class and a word of the vector */
	double a[K][4];
	uint32_t flags;
	unsigned used;

	__device__ __forceinline__ void fresh()
	{
#pragma unroll
		for (unsigned c = 0; c < K; c++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++)
				a[c][j] = 0.0;
		used = 0;
	}
	__device__ __forceinline__ void init()
	{
		fresh();
		flags = GR_EXACT_NOT_NZERO;
	}
	/* element f's square into slot j's class */
	__device__ __forceinline__ void add(unsigned j, float f)
	{
		const float s = f * f;
		const double d = (double)s;
		if constexpr (K == 3) {
			const bool c0 = s >= C::LO0, c2 = !(s >= C::LO1);
			a[0][j] += c0 ? d : 0.0;
			a[1][j] += c0 || c2 ? 0.0 : d;
			a[2][j] += c2 ? d : 0.0;
		} else {
			const bool c0 = s >= C::LO0;
			a[0][j] += c0 ? d : 0.0;
			a[1][j] += c0 ? 0.0 : d;
		}
	}
	/* every class into the digits (warp-wide), and afresh */
	__device__ __forceinline__ void flush(long long *digits, unsigned lane)
	{
#pragma unroll
		for (unsigned c = 0; c < K; c++) {
			long long q = 0;
			const double scale = gre::pow2(C::unit(c));
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const double x = a[c][j];
				if (!isfinite(x))
					flags |= x != x ? GR_EXACT_NAN : GR_EXACT_PINF;
				else
					q += __double2ll_rn(x * scale);
			}
			if (__any_sync(FULL, q != 0))
				warp_to_digits(digits, q, C::unit(c), lane);
		}
		fresh();
	}
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *digits, unsigned lane)
	{
		/* adds into each double a group: one element of each word
		 * and vector (f16), two (f8) */
		constexpr unsigned PER_GROUP = NG * (SIZE == 2 ? 2 : 4);
		static_assert(PER_GROUP <= C::CAP, "a group fits");
		if (used + PER_GROUP > C::CAP)
			flush(digits, lane);
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				float f0, f1, f2, f3;
				if constexpr (SIZE == 2) {
					f16x2(word(v[g], j), f0, f1);
					add(j, f0);
					add(j, f1);
				} else {
					f8x4<DT>(word(v[g], j), f0, f1, f2, f3);
					add(j, f0);
					add(j, f1);
					add(j, f2);
					add(j, f3);
				}
			}
		used += PER_GROUP;
	}
	__device__ __forceinline__ void finish(long long *digits, wres &r, unsigned lane)
	{
		flush(digits, lane);
		r.q = 0;
		r.flags = __reduce_or_sync(FULL, flags);
	}
};

struct SumSqBf16 {
	static constexpr unsigned SIZE = 2;
	static constexpr bool EXACT = true;
	static constexpr uint32_t PADW = 0;
	gre::bins<gre::sqf, gre::SQ_FB> st;

	__device__ __forceinline__ void init() { st.init(); }
	/* vectors g .. g + 3 of v as eight vectors of f32, into the bins */
	template <unsigned NG>
	__device__ __forceinline__ void four(const uint4 (&v)[NG], unsigned g0, long long *digits,
					     unsigned lane)
	{
		uint4 w[gre::GROUP];
#pragma unroll
		for (unsigned g = 0; g < 4; g++) {
			const uint4 x = v[g0 + g];
			w[2 * g] = make_uint4(x.x << 16, x.x & 0xffff0000u, x.y << 16, x.y & 0xffff0000u);
			w[2 * g + 1] =
				make_uint4(x.z << 16, x.z & 0xffff0000u, x.w << 16, x.w & 0xffff0000u);
		}
		st.template batch<gre::GROUP>(w, digits, lane);
	}
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *digits, unsigned lane)
	{
		static_assert(NG % 4 == 0 && gre::GROUP == 8, "a batch is four vectors of bf16");
#pragma unroll
		for (unsigned g = 0; g < NG; g += 4)
			four<NG>(v, g, digits, lane);
	}
	__device__ __forceinline__ void finish(long long *digits, wres &r, unsigned lane)
	{
		st.flush(digits, lane);
		r.q = 0;
		r.flags = gre::flag_bits(st) | GR_EXACT_NOT_NZERO;
	}
};

} /* namespace grn */
