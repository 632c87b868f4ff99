/*
 * moments of the narrow integers (i8, u8, i16, u16) in device memory
 * (narrow.h): what the integer moments kernel (moments.cuh) gives for the
 * elements widened to i32 or u32, which is what the CPU gives: the sum and
 * the sum of squares as digits (isum, isq), exact, and the keys of the
 * least and greatest element (the value, its sign bit flipped for signed
 * dtypes).
 *
 * A lane reads its groups of vectors as the narrow kernel does
 * (narrow.cuh); each word's elements go into 32-bit sums of the group in
 * one dot-product instruction (four bytes, or two halves) and their
 * squares likewise (bytes) or a multiply-add a 16-bit element, and the
 * group's into the lane's 64-bit sum and sum of squares (below 2^63
 * while a lane takes fewer than 2^31 elements: 2^47 and more of them a
 * launch). min and max are two-halfword or four-byte instructions, as
 * the min and max kernels' (narrow-ops.cuh). Vectors past the array are
 * skipped; the elements before the first 16-byte boundary and after the
 * last whole vector go to block 0, one a thread. Each lane's sums become
 * 32-bit digits summed across the warp, then the block, then the launch
 * through the scratch, as moments.cuh's integer kernel does.
 */
#pragma once

#include "cuda/moments.cuh"
#include "cuda/narrow.cuh"

namespace grn {

template <int DT> struct MomInt {
	static constexpr unsigned S = dt_size<DT>, BITS = 8 * S;
	static constexpr bool SIGNED = DT == I8 || DT == I16;
	static constexpr uint32_t EMASK = (1u << BITS) - 1;
	static constexpr uint32_t REP = S == 2 ? 0x00010001u : 0x01010101u;
	long long s1;
	unsigned long long s2;
	/* the greatest and least elements so far, one a place of a word */
	uint32_t kx, kn;

	__device__ __forceinline__ void init()
	{
		s1 = 0;
		s2 = 0;
		kx = SIGNED ? (EMASK / 2 + 1) * REP : 0u;
		kn = SIGNED ? (EMASK / 2) * REP : 0xffffffffu;
	}
	static __device__ __forceinline__ uint32_t vmax(uint32_t a, uint32_t b)
	{
		if constexpr (S == 2)
			return SIGNED ? max_s16x2(a, b) : max_u16x2(a, b);
		else
			return SIGNED ? __vmaxs4(a, b) : __vmaxu4(a, b);
	}
	static __device__ __forceinline__ uint32_t vmin(uint32_t a, uint32_t b)
	{
		if constexpr (S == 2)
			return SIGNED ? min_s16x2(a, b) : min_u16x2(a, b);
		else
			return SIGNED ? __vmins4(a, b) : __vminu4(a, b);
	}
	/* one word into the group's sums (acc, sq: 32 bits hold a group) */
	__device__ __forceinline__ void word(uint32_t w, int &acc, unsigned &uacc, unsigned &sq)
	{
		if constexpr (S == 1) {
			if (SIGNED)
				acc = __dp4a((int)w, 0x01010101, acc);
			else
				uacc = __dp4a(w, 0x01010101u, uacc);
			sq = SIGNED ? (unsigned)__dp4a((int)w, (int)w, (int)sq) : __dp4a(w, w, sq);
		} else {
			if (SIGNED)
				acc = __dp2a_lo((int)w, 0x0101, acc);
			else
				uacc = __dp2a_lo(w, 0x0101u, uacc);
			const uint32_t lo = SIGNED ? (uint32_t)(int)(short)(w & 0xffffu) : w & 0xffffu;
			const uint32_t hi = SIGNED ? (uint32_t)((int)w >> 16) : w >> 16;
			s2 += (unsigned long long)(lo * lo) + (unsigned long long)(hi * hi);
		}
		kx = vmax(kx, w);
		kn = vmin(kn, w);
	}
	/* a group; vectors of live's clear bits (bit g: v[g]) skipped */
	template <unsigned NG, bool ALL>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], uint32_t live)
	{
		static_assert(NG <= 8, "32 bits hold a group's sums");
		int acc = 0;
		unsigned uacc = 0, sq = 0;
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
			if (ALL || ((live >> g) & 1))
#pragma unroll
				for (unsigned j = 0; j < 4; j++)
					word(grn::word(v[g], j), acc, uacc, sq);
		s1 += SIGNED ? (long long)acc : (long long)uacc;
		if (S == 1)
			s2 += sq;
	}
	/* one element (its bits e) */
	__device__ __forceinline__ void one(uint32_t e)
	{
		const int x = SIGNED ? (S == 2 ? (int)(short)e : (int)(signed char)e) : (int)e;
		s1 += x;
		s2 += (unsigned long long)((uint32_t)x * (uint32_t)x);
		kx = vmax(kx, e * REP);
		kn = vmin(kn, e * REP);
	}
	/* a place's value */
	static __device__ __forceinline__ long long part(uint32_t k, unsigned i)
	{
		const uint32_t e = (k >> (BITS * i)) & EMASK;
		return SIGNED ? (S == 2 ? (long long)(short)e : (long long)(signed char)e) : (long long)e;
	}
	/* the key (moments.h) of the greatest (MAX) or least element of the
	 * lane */
	template <bool MAX> __device__ __forceinline__ uint64_t key() const
	{
		long long b = part(MAX ? kx : kn, 0);
#pragma unroll
		for (unsigned i = 1; i < 4 / S; i++)
			b = MAX ? max(b, part(kx, i)) : min(b, part(kn, i));
		return SIGNED ? (uint64_t)b ^ (1ull << 63) : (uint64_t)b;
	}
};

template <int DT, unsigned NG, unsigned BPS>
__global__ void __launch_bounds__(THREADS, BPS)
mom_int_kernel(const unsigned char *data, uint64_t n, gr_moments_scratch *scratch,
	       gr_moments_sums *out)
{
	constexpr unsigned S = dt_size<DT>, V = 16 / S;
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

	MomInt<DT> a;
	a.init();
	const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / S;
	const uint64_t head = h < n ? h : n;
	const uint64_t nv = (n - head) / V, tail = n - head - nv * V;
	const uint4 *vb = (const uint4 *)(data + head * S);
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;
	bool any = blockIdx.x == 0 && t < head + tail;
	if (any) {
		const uint64_t i = t < head ? t : n - tail + (t - head);
		a.one(S == 2 ? (uint32_t)((const uint16_t *)data)[i] : (uint32_t)data[i]);
	}
	each_group<NG>(vb, nv, make_uint4(0, 0, 0, 0), lane, [&](const uint4(&v)[NG], uint64_t vw) {
		if (vw + 31 + (NG - 1) * nt < nv) {
			a.template group<NG, true>(v, 0);
			any = true;
		} else {
			uint32_t live = 0;
#pragma unroll
			for (unsigned g = 0; g < NG; g++)
				live |= (uint32_t)(vw + lane + g * nt < nv) << g;
			a.template group<NG, false>(v, live);
			any |= live != 0;
		}
	});

	/* S1: the low 128 bits in four pieces, the sign as the fifth digit;
	 * S2 (below 2^64) in two */
	const unsigned __int128 u1 = (unsigned __int128)(__int128)a.s1;
#pragma unroll
	for (unsigned k = 0; k < 4; k++)
		grm::warp_digit(&d1[k], (long long)(uint64_t)(u1 >> (32 * k)) & 0xffffffffll, lane);
	grm::warp_digit(&d1[4], a.s1 < 0 ? -1 : 0, lane);
	grm::warp_digit(&d2[0], (long long)(a.s2 & 0xffffffffull), lane);
	grm::warp_digit(&d2[1], (long long)(a.s2 >> 32), lane);
	/* a lane that took nothing has no keys */
	uint64_t lo = any ? a.template key<false>() : ~0ull, hi = any ? a.template key<true>() : 0;
#pragma unroll
	for (int m = 16; m; m >>= 1) {
		lo = min(lo, (uint64_t)__shfl_xor_sync(FULL, (unsigned long long)lo, m));
		hi = max(hi, (uint64_t)__shfl_xor_sync(FULL, (unsigned long long)hi, m));
	}
	if (lane == 0 && hi >= lo) {
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
			grm::keys_out(out, nkmin, kmax);
		return;
	}
	if (t == 0)
		grm::keys_to_scratch(scratch, nkmin, kmax);
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
			grm::keys_from_scratch(scratch, out);
	}
}

template <int DT, unsigned NG = 8, unsigned BPS = 2>
static inline cudaError_t launch_mom_int(const void *data, uint64_t n, gr_moments_scratch *scratch,
					 gr_moments_sums *out, int sm_count, cudaStream_t st)
{
	const uint64_t nv = n * dt_size<DT> / 16;
	uint64_t want = (nv + (uint64_t)THREADS * NG - 1) / ((uint64_t)THREADS * NG);
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * BPS;
	want = want < cap ? want : cap;
	mom_int_kernel<DT, NG, BPS><<<want ? (unsigned)want : 1u, THREADS, 0, st>>>(
		(const unsigned char *)data, n, scratch, out);
	return cudaGetLastError();
}

} /* namespace grn */
