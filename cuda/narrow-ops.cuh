/*
 * The ops of the narrow kernel (narrow.cuh), each exact:
 *
 * The f16 sum (SumFix): every f16 is a multiple of 2^-24 below 2^16 in
 * magnitude, so a double adds up to 2^13 of them with no rounding at all,
 * in any order. A lane keeps eight doubles, starting at -0.0, and adds
 * each element (converted exactly, f16 to f32 to f64) into the one of its
 * place in the vector; before any of them could have taken too many the
 * warp moves them, an integer in units of 2^-24 summed over its lanes,
 * into the block's digits (so that no lane's integer grows with the
 * array), and starts them afresh. Specials need no test: an infinity or
 * NaN leaves its double +inf, -inf or NaN, which is what the flags
 * record (a NaN where both infinities met is a NaN of the result as
 * well), and an exact sum is -0.0 only where every element added was
 * -0.0. The sum of squares of
 * f8e4m3 is the same with squares (multiples of 2^-18 below 2^18: 2^17 of
 * them a double). The f8 sums (SumF8) do the same in f32, below.
 *
 * bf16 sums (SumBf16) span the whole f32 range, but with 8 significant
 * bits: a lane keeps eight doubles pinned at P = 1.5 * 2^(E + 12), where
 * 2^E bounds every element the warp has put there (E is the same across
 * the warp). Every element of |x| >= 2^(E - 33) is a multiple of 2^(E -
 * 40), the doubles' last place, so a plain add is exact while a double
 * stays in P's binade, which 2^11 adds of elements below 2^E cannot
 * leave; then each double less P, an integer number of last places below
 * 2^51, goes into the block's digits. Each group of G vectors is checked
 * first, with integer compares of its elements' magnitudes (two-halfword
 * instructions) and one vote over the warp: below 2^E, and zero or not
 * below 2^(E - 33). When it passes (almost always: it fails for elements
 * more than 33 binades below the largest seen) the adds follow. Where
 * every element of the warp's group is also zero or not below 2^(E - 16)
 * (a second vote), the two elements of each 32-bit word are added in f32
 * first: both are multiples of 2^(E - 23), so their sum, below 2^(E + 1),
 * is exact in 24 bits (E at most 127, so it stays finite), and one
 * conversion and one double add take two elements. Otherwise each
 * element goes to its double alone. A group that fails the first vote
 * takes the careful path: it raises E to the largest finite element
 * (after moving the doubles into the digits), after which the group
 * usually passes after all (every warp's first does). If not, and every
 * element of the group is finite, each goes into its thread's exponent
 * group: one of 16 doubles in shared memory, one for each 16 binades,
 * laid out [group][thread] as the f32 wide path's (exact-wide.cuh), with
 * no branch and no atomic; where data span a wide range, this is the path
 * that takes them. Otherwise, element by element, it records infinities
 * and NaNs in the flags, adds the elements in the window into the doubles
 * and the others into the warp's bins in shared memory, one 32-bit
 * integer for each exponent that sums the signed significands. Groups
 * and bins go to the digits every BIN_GROUPS such groups and at the end
 * (both are cleared when a warp first needs them, so that a warp that
 * never does pays nothing for them). -0 is tracked apart: a lane whose
 * elements in a group that passed are not all zeros has one other than
 * -0; others look at every element's bits. The f64 adds cost a
 * conversion from f32 each (a quarter-rate instruction), which is why
 * pairs pay; a form in f32 pairs by Fast2Sum (one for the sums, one for
 * the rests) measured slower.
 *
 * Integer sums (SumInt) add four bytes (or two 16-bit halves) of a word
 * in one dot-product instruction into 32 bits, a group at a time, then
 * into 64; their sums of squares (SumInt<DT, true>) likewise (bytes), or
 * a square a 16-bit element, into an unsigned 64-bit sum; both are exact,
 * and squares go to the digits as an exact sum.
 *
 * min and max (MinMax) compare keys, a SIMD instruction for two or four
 * elements: integers as they are; floats with the magnitude bits of the
 * negative ones flipped, so that the order of the keys as signed integers
 * is the order of the values, -0 below +0. NaNs are found apart (the
 * largest magnitude over the elements, against the dtype's NaNs) and make
 * the result NaN, as on the CPU. The result is the element's value
 * widened: int64, uint64, or the float64 bits of its f32.
 */
#pragma once

#include "cuda/narrow.cuh"

namespace grn {

/* ---- float sums (and f8e4m3 squares) on a grid ---- */

template <int DT, bool SQ> struct SumFix {
	static constexpr unsigned SIZE = dt_size<DT>;
	static constexpr bool EXACT = true;
	static constexpr uint32_t PADW = SIZE == 2 ? 0x80008000u : 0x80808080u;
	/* the integer's unit, 2^-SCALE, and the adds a double takes */
	static constexpr int SCALE = SQ ? 18 : 24;
	static constexpr unsigned CAP = SQ ? 1u << 17 : DT == E4M3 ? 1u << 30 : 1u << 13;
	double a[8];
	uint32_t flags;
	unsigned used;

	__device__ __forceinline__ void init()
	{
#pragma unroll
		for (unsigned k = 0; k < 8; k++)
			a[k] = -0.0;
		flags = SQ ? GR_EXACT_NOT_NZERO : 0;
		used = 0;
	}
	__device__ __forceinline__ void add(unsigned k, float f)
	{
		a[k] += SQ ? (double)(f * f) : (double)f;
	}
	/* the doubles as an integer number of units (below 2^56), and
	 * afresh */
	__device__ __forceinline__ long long take()
	{
		long long s = 0;
#pragma unroll
		for (unsigned k = 0; k < 8; k++) {
			const double x = a[k];
			if (!isfinite(x))
				flags |= x != x ? GR_EXACT_NAN : x > 0 ? GR_EXACT_PINF : GR_EXACT_NINF;
			else
				s += __double2ll_rn(x * (SQ ? 0x1p18 : 0x1p24));
			if (__double_as_longlong(x) != (long long)0x8000000000000000ull)
				flags |= GR_EXACT_NOT_NZERO;
			a[k] = -0.0;
		}
		used = 0;
		return s;
	}
	/* ... into the digits (warp-wide), so that no lane's integer grows
	 * with the array */
	__device__ __forceinline__ void flush(long long *digits, unsigned lane)
	{
		const long long s = take();
		if (__any_sync(FULL, s != 0))
			warp_to_digits(digits, s, SCALE, lane);
	}
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *digits, unsigned lane)
	{
		/* adds into each double a group, at most: one element of
		 * each vector (f16), two (f8), of up to G vectors */
		static_assert(NG <= G, "PER_GROUP's bound");
		constexpr unsigned PER_GROUP = G * (SIZE == 2 ? 1 : 2);
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				float f0, f1, f2, f3;
				if constexpr (SIZE == 2) {
					f16x2(word(v[g], j), f0, f1);
					add(2 * j, f0);
					add(2 * j + 1, f1);
				} else {
					f8x4<DT>(word(v[g], j), f0, f1, f2, f3);
					add(2 * j, f0);
					add(2 * j + 1, f1);
					add(2 * j, f2);
					add(2 * j + 1, f3);
				}
			}
		used += PER_GROUP;
		if (used + PER_GROUP > CAP)
			flush(digits, lane);
	}
	__device__ __forceinline__ void finish(long long *, wres &r, unsigned)
	{
		r.q = warp_sum(take());
		r.p = ONE - SCALE;
		r.flags = __reduce_or_sync(FULL, flags);
	}
};

/* ---- bf16 sums ---- */

struct SumBf16 {
	static constexpr unsigned SIZE = 2;
	static constexpr bool EXACT = true;
	static constexpr uint32_t PADW = 0x80008000u;
	/* P = 1.5 * 2^(E + HEAD); elements from 2^(E - WIN) up are added
	 * there, two to an f32 first where all are from 2^(E - PAIR) up;
	 * CAP adds (of an element below 2^E; a pair's counts twice) a
	 * double takes before it must be flushed */
	static constexpr int HEAD = 12, WIN = 33, PAIR = 16;
	static constexpr unsigned CAP = 1u << (HEAD - 1);
	/* E's least: bf16's subnormals are below 2^-126 */
	static constexpr int E_MIN = -126;
	/* careful groups a warp's bins take before they are flushed: each
	 * adds at most 2^19 to a bin (NG * 256 elements of at most 255),
	 * and at most 64 elements below 2^23 units to a thread's group */
	static constexpr unsigned BIN_GROUPS = 1u << 10;
	double a[8], P;
	int E;
	/* keys (magnitude bits) below khi are below 2^E; above kthr, in the
	 * window (kthr 0: every key is); above kpair, in the pairs' */
	uint32_t khi, kthr, kpair;
	unsigned used, bused;
	uint32_t nz, flags;
	/* pairs: E allows them; binit: the warp's bins and its threads'
	 * groups are clear */
	bool pairs, binit;
	/* the warp's bins (shared memory): bin e holds the sum of the signed
	 * significands of the elements of biased exponent e (1 also the
	 * subnormals'), each weighing 2^(e - 134) */
	int *bins;
	/* the thread's exponent groups (shared memory): group g, at
	 * slot[g * THREADS], a double that sums the elements of biased
	 * exponents 16 g to 16 g + 15, multiples of 2^(16 g - 134) below
	 * 2^23 of them, exactly while it takes fewer than 2^30 */
	double *slot;

	static __device__ __forceinline__ int *warp_bins()
	{
		__shared__ int b[THREADS / 32][256];
		return b[threadIdx.x / 32];
	}
	static __device__ __forceinline__ double *thread_slots()
	{
		__shared__ double s[16 * THREADS];
		return s + threadIdx.x;
	}
	__device__ __forceinline__ void pin(int e)
	{
		E = e;
		P = 1.5 * gre::pow2(e + HEAD);
		khi = (uint32_t)(e + 127) << 7;
		const int kl = e - WIN + 127, kp = e - PAIR + 127;
		kthr = kl > 0 ? ((uint32_t)kl << 7) - 1 : 0;
		kpair = kp > 0 ? ((uint32_t)kp << 7) - 1 : 0;
		/* a pair's sum below 2^(E + 1) <= 2^128 is finite, and from
		 * 2^(E - 23) >= 2^-123 on a normal f32's grid */
		pairs = e >= -100 && e <= 127;
#pragma unroll
		for (unsigned k = 0; k < 8; k++)
			a[k] = P;
		used = 0;
	}
	__device__ __forceinline__ void init()
	{
		pin(E_MIN);
		nz = 0;
		flags = 0;
		bused = 0;
		binit = false;
		bins = warp_bins();
		slot = thread_slots();
	}
	/* the doubles as an integer number of their last places,
	 * 2^(E - 40), exactly (each less P is below 2^51 of them), and
	 * afresh */
	__device__ __forceinline__ long long take()
	{
		const double scale = gre::pow2(40 - E);
		long long q = 0;
#pragma unroll
		for (unsigned k = 0; k < 8; k++) {
			q += __double2ll_rn((a[k] - P) * scale);
			a[k] = P;
		}
		used = 0;
		return q;
	}
	/* ... into the digits (warp-wide) */
	__device__ __forceinline__ void flush(long long *digits, unsigned lane)
	{
		warp_to_digits(digits, take(), 40 - E, lane);
	}
	/* the bins and the groups into the digits (warp-wide), and zero
	 * again */
	__device__ __forceinline__ void flush_bins(long long *digits, unsigned lane)
	{
#pragma unroll 1
		for (int g = 0; g < 16; g++) {
			const double v = slot[g * THREADS];
			if (!__any_sync(FULL, v != 0))
				continue;
			slot[g * THREADS] = 0;
			/* an integer of 2^(16 g - 134), below 2^53 */
			const long long i = warp_sum(__double2ll_rn(v * gre::pow2(134 - 16 * g)));
			if (lane == 0 && i)
				add_digits(digits, i < 0, i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i,
					   16 * g - 134 + ONE);
		}
		__syncwarp();
		for (unsigned i = lane; i < 256; i += 32) {
			const int b = bins[i];
			if (b) {
				add_digits(digits, b < 0, b < 0 ? 0u - (unsigned)b : (unsigned)b,
					   (int)i - 134 + ONE);
				bins[i] = 0;
			}
		}
		__syncwarp();
		bused = 0;
	}
	/* one element, the careful way: an infinity or NaN to the flags, an
	 * element in the window to its double, any other to its bin */
	__device__ __forceinline__ void careful(uint32_t h, unsigned k)
	{
		const uint32_t m = h & 0x7fffu;
		nz |= h != 0x8000u;
		if (m >= 0x7f80u) {
			flags |= m > 0x7f80u ? GR_EXACT_NAN : h & 0x8000u ? GR_EXACT_NINF : GR_EXACT_PINF;
		} else if (m > kthr) {
			a[k] += (double)__uint_as_float(h << 16);
		} else if (m) {
			const uint32_t e = m >> 7, sig = e ? 0x80u | (m & 0x7fu) : m;
			atomicAdd(&bins[e ? e : 1], h & 0x8000u ? -(int)sig : (int)sig);
		}
	}
	/* a group that passed: every element into its double, or (PAIRS)
	 * the two of each word summed in f32 into one of the word's two
	 * doubles, by turns; a lane whose elements are all zeros looks at
	 * their signs */
	template <unsigned NG, bool PAIRS>
	__device__ __forceinline__ void fast(const uint4 (&v)[NG], uint32_t kmax)
	{
		note_not_nzero16<NG>(nz, v, (uint32_t)kmax);
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const uint32_t w = word(v[g], j);
				const float lo = __uint_as_float(w << 16), hi = __uint_as_float(w & 0xffff0000u);
				if (PAIRS) {
					a[2 * j + (g & 1)] += (double)__fadd_rn(lo, hi);
				} else {
					a[2 * j] += (double)lo;
					a[2 * j + 1] += (double)hi;
				}
			}
		/* a double took NG adds, or ceil(NG / 2) pairs */
		used += PAIRS ? NG + (NG & 1) : NG;
	}
	/* a group that passed the window's check (kmin: its least magnitude
	 * less one), by the pairs' */
	template <unsigned NG>
	__device__ __forceinline__ void passed(const uint4 (&v)[NG], uint32_t kmax, uint32_t kmin)
	{
		if (pairs && !__any_sync(FULL, kmin < kpair))
			fast<NG, true>(v, kmax);
		else
			fast<NG, false>(v, kmax);
	}
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *digits, unsigned lane)
	{
		static_assert(NG <= 8, "BIN_GROUPS's bound");
		if (used + NG + 1 > CAP)
			flush(digits, lane);
		/* the lane's largest magnitude, and its least less one (a
		 * zero's is 0xffff), by halfwords */
		uint32_t kmax = 0, kmin = 0xffffffffu;
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const uint32_t k = word(v[g], j) & 0x7fff7fffu;
				kmax = max_u16x2(kmax, k);
				kmin = addmin_u16x2(k, 0xffffffffu, kmin);
			}
		kmax = max(kmax & 0xffffu, kmax >> 16);
		kmin = min(kmin & 0xffffu, kmin >> 16);
		/* the group passes when every lane's does */
		if (!__any_sync(FULL, kmax >= khi || kmin < kthr)) {
			passed<NG>(v, kmax, kmin);
			return;
		}
		/* the careful path (the whole warp): E up to the largest
		 * finite element first, after which the group usually passes
		 * (every warp's first, for one) */
		const uint32_t fm = bf16_top_finite<NG>(v);
		const int ne = (fm >> 7) ? (int)(fm >> 7) - 126 : E_MIN;
		if (ne > E) {
			/* (doubles that took nothing hold nothing) */
			if (used)
				flush(digits, lane);
			pin(ne);
			if (!__any_sync(FULL, kmax >= khi || kmin < kthr)) {
				passed<NG>(v, kmax, kmin);
				return;
			}
		}
		if (!binit) {
			for (unsigned i = lane; i < 256; i += 32)
				bins[i] = 0;
#pragma unroll
			for (unsigned g = 0; g < 16; g++)
				slot[g * THREADS] = 0;
			__syncwarp();
			binit = true;
		}
		if (bused == BIN_GROUPS)
			flush_bins(digits, lane);
		bused++;
		if (!__any_sync(FULL, kmax >= 0x7f80u)) {
			/* every element finite: each into its exponent group,
			 * with no branch and no atomic (data over a wide range) */
			note_not_nzero16<NG>(nz, v, kmax);
#pragma unroll
			for (unsigned g = 0; g < NG; g++)
#pragma unroll
				for (unsigned j = 0; j < 4; j++) {
					const uint32_t w = word(v[g], j);
					slot[((w >> 11) & 15u) * THREADS] += (double)__uint_as_float(w << 16);
					slot[((w >> 27) & 15u) * THREADS] +=
						(double)__uint_as_float(w & 0xffff0000u);
				}
			return;
		}
		/* element by element, a vector at a time (picked, not
		 * indexed: the registers stay registers), in a loop kept
		 * rolled, so that its code and registers stay small */
#pragma unroll 1
		for (unsigned g = 0; g < NG; g++) {
			uint4 x = v[0];
#pragma unroll
			for (unsigned i = 1; i < NG; i++)
				x = g == i ? v[i] : x;
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const uint32_t w = word(x, j);
				careful(w & 0xffffu, 2 * j);
				careful(w >> 16, 2 * j + 1);
			}
		}
		used += NG;
	}
	__device__ __forceinline__ void finish(long long *digits, wres &r, unsigned lane)
	{
		if (binit)
			flush_bins(digits, lane);
		r.q = warp_sum(take());
		r.p = ONE - (40 - E);
		r.flags = __reduce_or_sync(FULL, flags);
		if (__reduce_or_sync(FULL, nz))
			r.flags |= GR_EXACT_NOT_NZERO;
	}
};

/* ---- f8 sums in f32 ---- */

/*
 * f8e4m3: one f32 a place of the vector, from -0: 64 elements of at most
 * 448 on the grid of 2^-9 stay below 2^15, which an f32 holds exactly.
 * f8e5m2 (multiples of 2^-16 below 2^16) a pair: a0 pinned at 1.5 * 2^23
 * (its last place 1), which takes each element by Fast2Sum, its rest (a
 * multiple of 2^-16 no larger than 1/2) going into a1, pinned at
 * 1.5 * 2^6 (last place 2^-17); 48 elements leave both in their binades.
 * Either is moved, exactly, into a 64-bit integer before it is full. All
 * in f32 because the conversion of an f32 to f64 is a quarter-rate
 * instruction, which four f8 elements per 32 bits would keep saturated.
 */
template <int DT> struct SumF8 {
	static constexpr unsigned SIZE = 1;
	static constexpr bool EXACT = true;
	static constexpr uint32_t PADW = 0x80808080u;
	static constexpr bool PAIR = DT == E5M2;
	static constexpr int SCALE = PAIR ? 16 : 9;
	static constexpr unsigned CAP = PAIR ? 48 : 64;
	static constexpr float P0 = 12582912.0f, P1 = 96.0f;
	float a[8], b[8];
	long long s;
	uint32_t flags, nz;
	unsigned used;

	__device__ __forceinline__ void fresh()
	{
#pragma unroll
		for (unsigned k = 0; k < 8; k++) {
			a[k] = PAIR ? P0 : -0.0f;
			b[k] = P1;
		}
		used = 0;
	}
	__device__ __forceinline__ void init()
	{
		fresh();
		s = 0;
		flags = 0;
		nz = 0;
	}
	__device__ __forceinline__ void add(unsigned k, float f)
	{
		if constexpr (PAIR) {
			const float t = __fadd_rn(a[k], f);
			const float r = __fsub_rn(f, __fsub_rn(t, a[k]));
			a[k] = t;
			b[k] = __fadd_rn(b[k], r);
		} else {
			a[k] = __fadd_rn(a[k], f);
		}
	}
	__device__ __forceinline__ void flush()
	{
#pragma unroll
		for (unsigned k = 0; k < 8; k++) {
			const float x = a[k];
			if (!isfinite(x)) {
				flags |= x != x ? GR_EXACT_NAN : x > 0 ? GR_EXACT_PINF : GR_EXACT_NINF;
			} else if constexpr (PAIR) {
				s += (long long)__float2int_rn(x - P0) * 65536 +
				     __float2int_rn((b[k] - P1) * 65536.0f);
			} else {
				s += __float2int_rn(x * 512.0f);
				if (__float_as_uint(x) != 0x80000000u)
					flags |= GR_EXACT_NOT_NZERO;
			}
		}
		fresh();
	}
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *, unsigned)
	{
		static_assert(2 * NG <= CAP, "a group fits");
		if (used + 2 * NG > CAP)
			flush();
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				float f0, f1, f2, f3;
				const uint32_t w = word(v[g], j);
				if constexpr (PAIR)
					nz |= w ^ 0x80808080u;
				f8x4<DT>(w, f0, f1, f2, f3);
				add(2 * j, f0);
				add(2 * j + 1, f1);
				add(2 * j, f2);
				add(2 * j + 1, f3);
			}
		used += 2 * NG;
	}
	__device__ __forceinline__ void finish(long long *, wres &r, unsigned)
	{
		flush();
		r.q = warp_sum(s);
		r.p = ONE - SCALE;
		r.flags = __reduce_or_sync(FULL, flags);
		if (PAIR && __reduce_or_sync(FULL, nz))
			r.flags |= GR_EXACT_NOT_NZERO;
	}
};

/* ---- integer sums and sums of squares ---- */

template <int DT, bool SQ> struct SumInt {
	static constexpr unsigned SIZE = dt_size<DT>;
	static constexpr bool SIGNED = DT == I8 || DT == I16;
	/* sums: a raw 64-bit value, wrapping; squares: an exact sum */
	static constexpr bool EXACT = SQ;
	static constexpr uint32_t PADW = 0;
	unsigned long long s;

	__device__ __forceinline__ void init() { s = 0; }
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *, unsigned)
	{
		/* at most 32 words of 4 bytes (2^23 in squares) a group:
		 * 32 bits hold them */
		static_assert(NG <= 8, "32 bits hold a group");
		int acc = 0;
		unsigned uacc = 0;
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const uint32_t w = word(v[g], j);
				if constexpr (SQ && SIZE == 2) {
					const uint32_t lo = SIGNED ? (uint32_t)(int)(short)(w & 0xffffu)
								   : w & 0xffffu;
					const uint32_t hi = SIGNED ? (uint32_t)((int)w >> 16) : w >> 16;
					s += (unsigned long long)(lo * lo) + (unsigned long long)(hi * hi);
				} else if constexpr (SIGNED && SIZE == 1) {
					acc = __dp4a((int)w, SQ ? (int)w : 0x01010101, acc);
				} else if constexpr (SIZE == 1) {
					uacc = __dp4a(w, SQ ? w : 0x01010101u, uacc);
				} else if constexpr (SIGNED) {
					acc = __dp2a_lo((int)w, 0x0101, acc);
				} else {
					uacc = __dp2a_lo(w, 0x0101u, uacc);
				}
			}
		s += SIGNED ? (unsigned long long)(long long)acc : (unsigned long long)uacc;
	}
	__device__ __forceinline__ void finish(long long *, wres &r, unsigned)
	{
		const unsigned long long q = warp_sum(s);
		if constexpr (SQ) {
			/* the squares' sum (below 2^63), never -0 */
			r.q = (long long)q;
			r.p = ONE;
			r.flags = GR_EXACT_NOT_NZERO;
		} else {
			r.v = q;
		}
	}
	static __device__ __forceinline__ unsigned long long meet(unsigned long long a,
								  unsigned long long b)
	{
		return a + b;
	}
	static __device__ __forceinline__ void meet(unsigned long long *acc, unsigned long long v)
	{
		atomicAdd(acc, v);
	}
	static __device__ __forceinline__ uint64_t result(unsigned long long v, unsigned long long)
	{
		return v;
	}
};

/* ---- min and max ---- */

template <int DT, int OP> struct MinMax {
	static constexpr unsigned SIZE = dt_size<DT>;
	static constexpr bool EXACT = false;
	static constexpr bool FLOAT = DT <= E5M2;
	/* keys compared as signed (floats, signed integers) */
	static constexpr bool SKEY = FLOAT || DT == I8 || DT == I16;
	static constexpr uint32_t BITS = 8 * SIZE, EMASK = (1u << BITS) - 1;
	static constexpr uint32_t REP = SIZE == 2 ? 0x00010001u : 0x01010101u;
	/* an element that moves neither: the top of the range for min */
	static constexpr uint32_t PAD1 =
		DT == F16 ? 0x7c00u : DT == BF16 ? 0x7f80u : DT == E5M2 ? 0x7cu : DT == E4M3 ? 0x7eu
		: SKEY ? EMASK >> 1 : EMASK;
	static constexpr uint32_t PAD = OP == MIN ? PAD1 : FLOAT ? PAD1 | (1u << (BITS - 1))
						       : SKEY ? (1u << (BITS - 1)) : 0u;
	static constexpr uint32_t PADW = PAD * REP;
	/* magnitudes above this are NaN */
	static constexpr uint32_t NANM = DT == F16 ? 0x7c00u : DT == BF16 ? 0x7f80u
					: DT == E5M2 ? 0x7cu : 0x7eu;
	uint32_t acc, nanm;

	__device__ __forceinline__ void init()
	{
		acc = OP == MIN ? (SKEY ? (EMASK >> 1) * REP : 0xffffffffu)
				: (SKEY ? (1u << (BITS - 1)) * REP : 0u);
		nanm = 0;
	}
	template <unsigned NG>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], long long *, unsigned)
	{
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				uint32_t k = word(v[g], j);
				if constexpr (FLOAT) {
					const uint32_t hm = REP << (BITS - 1), mm = ~hm;
					nanm = SIZE == 2 ? max_u16x2(nanm, k & mm) : __vmaxu4(nanm, k & mm);
					k ^= ((k >> (BITS - 1)) & REP) * (EMASK >> 1);
				}
				if constexpr (SIZE == 2)
					acc = OP == MIN ? (SKEY ? min_s16x2(acc, k) : min_u16x2(acc, k))
							: (SKEY ? max_s16x2(acc, k) : max_u16x2(acc, k));
				else
					acc = OP == MIN ? (SKEY ? __vmins4(acc, k) : __vminu4(acc, k))
							: (SKEY ? __vmaxs4(acc, k) : __vmaxu4(acc, k));
			}
	}
	/* key k's place in [0, 2^BITS) */
	static __device__ __forceinline__ uint32_t ukey(uint32_t k)
	{
		return SKEY ? (k ^ (1u << (BITS - 1))) & EMASK : k & EMASK;
	}
	__device__ __forceinline__ void finish(long long *, wres &r, unsigned)
	{
		uint32_t best = ukey(acc), nm = nanm & EMASK;
#pragma unroll
		for (unsigned i = 1; i < 4 / SIZE; i++) {
			const uint32_t u = ukey(acc >> (BITS * i));
			best = OP == MIN ? min(best, u) : max(best, u);
			nm = max(nm, (nanm >> (BITS * i)) & EMASK);
		}
		best = OP == MIN ? __reduce_min_sync(FULL, best) : __reduce_max_sync(FULL, best);
		/* 0 stands for nothing: min as its distance from the top */
		r.v = OP == MIN ? (1u << BITS) - best : best + 1;
		r.flags = FLOAT && __any_sync(FULL, nm > NANM) ? GR_EXACT_NAN : 0;
	}
	static __device__ __forceinline__ unsigned long long meet(unsigned long long a,
								  unsigned long long b)
	{
		return a > b ? a : b;
	}
	static __device__ __forceinline__ void meet(unsigned long long *acc, unsigned long long v)
	{
		atomicMax(acc, v);
	}
	static __device__ __forceinline__ uint64_t result(unsigned long long v, unsigned long long f)
	{
		if (FLOAT && (f & GR_EXACT_NAN))
			return 0x7ff8000000000000ull;
		const uint32_t u = OP == MIN ? (uint32_t)((1ull << BITS) - v) : (uint32_t)(v - 1);
		if constexpr (FLOAT) {
			/* the key back to the element's bits */
			uint32_t k = u ^ (1u << (BITS - 1));
			const uint32_t e = k ^ (((k >> (BITS - 1)) & 1u) * (EMASK >> 1));
			return (uint64_t)__double_as_longlong((double)widen<DT>(e));
		} else if constexpr (SKEY) {
			return (uint64_t)(long long)((int)u - (int)(1u << (BITS - 1)));
		} else {
			return u;
		}
	}
};

} /* namespace grn */
