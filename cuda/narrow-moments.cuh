/*
 * moments of the narrow floats (f16, f8e4m3, f8e5m2; bf16 has a form of
 * its own, narrow-mom-bf16.cuh, and this one only in the benchmark) in
 * device memory (narrow.h): what the f32 moments kernel gives for the
 * elements widened to f32, which is what the CPU gives (each element
 * widens exactly, and every part of moments is exact or an extreme).
 *
 * A warp reads 16-byte vectors of the narrow dtype grid-stride, as the
 * narrow kernel does (narrow.cuh), the next group's loads out before the
 * one in hand is taken; each group of R vectors (four of 16-bit
 * elements, two of 8-bit: 32 elements a lane) is widened in registers to
 * the eight vectors of f32 that moments.cuh's f32 group takes (f32_group:
 * the sum's bins and the squares', one add of each element to both on
 * their fast paths, min.f32 and max.f32 for the extremes; past their
 * windows the sum's middle tier and the squares' exponent groups, 32 KiB
 * of shared memory a block: f32_wide), with which of
 * them are the array's elements rather than padding (-0, which changes
 * neither sum). The elements before the first 16-byte boundary and after
 * the last whole vector go to block 0's first warp first, one a lane.
 *
 * Blocks meet as the f32 kernel's do: digits into the launch's scratch
 * with integer atomics, the extremes' keys with atomic maxima, and the
 * last block writes the result and leaves the scratch zero. The keys are
 * those of the extremes widened to f64 (gr_moments_key_value's
 * GR_EXACT_F64 form), as the engine reads the keys of every dtype but f32
 * (cuda/exact-partial.c).
 */
#pragma once

#include "cuda/moments.cuh"
#include "cuda/narrow.cuh"

namespace grn {

/* f32 vectors in one of DT's 16-byte vectors, and DT's vectors a group */
template <int DT> constexpr unsigned MOM_WV = 4 / dt_size<DT>;
template <int DT> constexpr unsigned MOM_R = gre::GROUP / MOM_WV<DT>;

/* One of DT's 16-byte vectors widened to f32, into w[0 .. MOM_WV) (the
 * element of index 0 first). */
template <int DT> static __device__ __forceinline__ void widen_vector(const uint4 &x, uint4 *w)
{
	if constexpr (DT == BF16) {
		w[0] = make_uint4(x.x << 16, x.x & 0xffff0000u, x.y << 16, x.y & 0xffff0000u);
		w[1] = make_uint4(x.z << 16, x.z & 0xffff0000u, x.w << 16, x.w & 0xffff0000u);
	} else if constexpr (DT == F16) {
		float f[8];
#pragma unroll
		for (unsigned j = 0; j < 4; j++)
			f16x2(word(x, j), f[2 * j], f[2 * j + 1]);
		w[0] = make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
				  __float_as_uint(f[3]));
		w[1] = make_uint4(__float_as_uint(f[4]), __float_as_uint(f[5]), __float_as_uint(f[6]),
				  __float_as_uint(f[7]));
	} else {
#pragma unroll
		for (unsigned j = 0; j < 4; j++) {
			float f0, f1, f2, f3;
			f8x4<DT>(word(x, j), f0, f1, f2, f3);
			w[j] = make_uint4(__float_as_uint(f0), __float_as_uint(f1), __float_as_uint(f2),
					  __float_as_uint(f3));
		}
	}
}

/* The f64 key (moments.h) of an f32 value. */
static __device__ __forceinline__ unsigned long long key64(float f)
{
	const unsigned long long u = (unsigned long long)__double_as_longlong((double)f);
	return (long long)u < 0 ? ~u : u | (1ull << 63);
}

template <int DT, unsigned MINB>
__global__ void __launch_bounds__(THREADS, MINB)
narrow_moments_kernel(const unsigned char *data, uint64_t n, gr_moments_scratch *scratch,
		      gr_moments_sums *out)
{
	using M = grm::mtraits<float>;
	constexpr unsigned S = dt_size<DT>, V = 16 / S, R = MOM_R<DT>, WV = MOM_WV<DT>;
	static_assert(R * V == 32, "a group is one element a live bit");
	__shared__ long long d1[GR_EXACT_DIGITS], d2[GR_EXACT_DIGITS];
	__shared__ unsigned long long f1, f2, nkmin, kmax;
	/* the squares' groups (moments.cuh's f32_wide) */
	extern __shared__ __align__(16) uint4 groups[];
	const unsigned t = threadIdx.x, lane = t & 31;
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS) {
		d1[i] = 0;
		d2[i] = 0;
	}
	if (t == 0)
		f1 = f2 = nkmin = kmax = 0;
	__syncthreads();

	gre::bins<float, M::SUM_FB, M::B0, M::D> s;
	gre::bins<typename M::SQ, M::SQ_FB, M::B0, M::D> q;
	s.init();
	q.init();
	/* squares are never -0 */
	q.rawmax = 0;
	float fmn = __int_as_float(0x7f800000), fmx = -fmn;
	grm::wide_sq wq;
	wq.init(groups, t);

	const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / S;
	const uint64_t head = h < n ? h : n;
	const uint64_t nv = (n - head) * S / 16, tail = n - head - nv * V;
	const uint4 *vb = (const uint4 *)(data + head * S);
	constexpr uint32_t PADW = S == 2 ? 0x80008000u : 0x80808080u;
	const uint4 pad = make_uint4(PADW, PADW, PADW, PADW);
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;

	/* a group of R vectors widened and taken; live: which of its 32
	 * elements are the array's */
	auto take = [&](const uint4 (&v)[R], uint32_t live) {
		uint4 w[gre::GROUP];
#pragma unroll
		for (unsigned r = 0; r < R; r++)
			widen_vector<DT>(v[r], w + r * WV);
		grm::f32_group(w, live, s, q, &wq, d1, d2, lane, fmn, fmx);
	};
	/* the live elements of the lane's group from vector vw of its warp */
	auto live_of = [&](uint64_t vw) -> uint32_t {
		if (vw + 31 + (R - 1) * nt < nv)
			return 0xffffffffu;
		uint32_t l = 0;
#pragma unroll
		for (unsigned r = 0; r < R; r++)
			if (vw + lane + r * nt < nv)
				l |= (V == 32 ? 0xffffffffu : (1u << V) - 1) << (r * V);
		return l;
	};

	uint4 cur[R], nxt[R];
	uint64_t vw = (uint64_t)blockIdx.x * THREADS + (t - lane);
	if (vw < nv)
		load_group<R>(cur, vb, vw, nt, nv, pad, lane);
	if (blockIdx.x == 0 && t < 32 && head + tail) {
		/* the ends, one element a lane, element 0 of a group of
		 * padding */
#pragma unroll
		for (unsigned r = 0; r < R; r++)
			nxt[r] = pad;
		if (lane < head + tail) {
			uint64_t i = lane < head ? lane : n - tail + (lane - head);
			uint32_t e = S == 2 ? (uint32_t)((const uint16_t *)data)[i] : (uint32_t)data[i];
			nxt[0].x = (PADW & ~(S == 2 ? 0xffffu : 0xffu)) | e;
		}
		take(nxt, lane < head + tail ? 1u : 0u);
	}
	while (vw < nv) {
		const uint64_t w1 = vw + R * nt;
		if (w1 < nv)
			load_group<R>(nxt, vb, w1, nt, nv, pad, lane);
		take(cur, live_of(vw));
		if (w1 >= nv)
			break;
		vw = w1;
#pragma unroll
		for (unsigned r = 0; r < R; r++)
			cur[r] = nxt[r];
	}

	wq.finish(d2, lane);
	s.rawmax = grm::f32_rawmax(fmn, fmx, s.flags);
	s.flush(d1, lane);
	q.flush(d2, lane);
	gre::warp_flags(s, &f1, lane);
	gre::warp_flags(q, &f2, lane);
#pragma unroll
	for (int m = 16; m; m >>= 1) {
		fmn = grm::min_f32(fmn, __shfl_xor_sync(FULL, fmn, m));
		fmx = grm::max_f32(fmx, __shfl_xor_sync(FULL, fmx, m));
	}
	if (lane == 0) {
		atomicMax(&nkmin, ~key64(fmn));
		atomicMax(&kmax, key64(fmx));
	}
	__syncthreads();

	if (gridDim.x == 1) {
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS) {
			out->sum.digit[i] = d1[i];
			out->sq.digit[i] = d2[i];
		}
		if (t == 0) {
			out->sum.flags = f1;
			out->sq.flags = f2;
			grm::keys_out(out, nkmin, kmax);
		}
		return;
	}
	if (t == 0)
		grm::keys_to_scratch(scratch, nkmin, kmax);
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS) {
		gre::digits_to_scratch(d1, f1, &scratch->sum, i);
		gre::digits_to_scratch(d2, f2, &scratch->sq, i);
	}
	if (gre::last_block(&scratch->sum.ticket, t)) {
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS) {
			gre::scratch_to_out(&scratch->sum, &out->sum, i);
			gre::scratch_to_out(&scratch->sq, &out->sq, i);
		}
		if (t == 0)
			grm::keys_from_scratch(scratch, out);
	}
}

/* The moments kernel for DT, its grid a group a lane at most, MINB
 * blocks an SM. */
template <int DT, unsigned MINB = 2>
static inline cudaError_t launch_moments(const void *data, uint64_t n, gr_moments_scratch *scratch,
					 gr_moments_sums *out, int sm_count, cudaStream_t st)
{
	const uint64_t nv = n * dt_size<DT> / 16;
	uint64_t want = (nv + (uint64_t)THREADS * MOM_R<DT> - 1) / ((uint64_t)THREADS * MOM_R<DT>);
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * MINB;
	want = want < cap ? want : cap;
	/* (the groups' 32 KiB are within what a launch may take unasked) */
	narrow_moments_kernel<DT, MINB><<<want ? (unsigned)want : 1u, THREADS, grm::wide_sq::SMEM,
					  st>>>((const unsigned char *)data, n, scratch, out);
	return cudaGetLastError();
}

} /* namespace grn */
