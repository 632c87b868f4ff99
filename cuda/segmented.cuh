/*
 * The segmented sum kernel's device code (segmented.h explains the order
 * of its additions). Included by segmented.cu and by the benchmark and
 * tests, which may instantiate it directly.
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cuda/segmented.h"
#include "cuda/warp.cuh"

namespace grseg {

using grwarp::FULL;
constexpr unsigned WARPS = 8;

/* The sum's accumulator (warp.cuh), and its butterfly across a warp. */
template <typename T> struct acc : grwarp::sum_acc<T> {
	using A = typename grwarp::sum_acc<T>::A;
	static __device__ __forceinline__ A butterfly(A v)
	{
#pragma unroll
		for (int m = 16; m; m >>= 1)
			v = v + __shfl_xor_sync(FULL, v, m);
		return v;
	}
};

template <typename T> __host__ __device__ constexpr uint64_t tile_elems()
{
	return GR_SEGSUM_TILE_BYTES / sizeof(T);
}

/* The workspace, laid out by its capacity (not by the launch's count),
 * so that what one launch leaves in it never lands on another's
 * tickets: the tickets first (zero between launches), two a tile, then
 * the pieces a tile leaves for segments that cross it, and group sums. */
constexpr size_t WS_TILE_BYTES = 32;
struct workspace {
	uint32_t *tickets;  /* [2 tile]: group ticket, segment ticket */
	uint64_t *first;    /* [tile] piece of the segment that started before the tile */
	uint64_t *last;     /* [tile] piece of a segment that starts in the tile and goes on */
	uint64_t *group;    /* [tile] sum of the group of pieces that ends in the tile */
};

static inline workspace workspace_of(void *base, size_t bytes)
{
	unsigned char *p = (unsigned char *)base;
	size_t cap = bytes / WS_TILE_BYTES;
	workspace w;
	w.tickets = (uint32_t *)p;
	w.first = (uint64_t *)(p + 8 * cap);
	w.last = (uint64_t *)(p + 16 * cap);
	w.group = (uint64_t *)(p + 24 * cap);
	return w;
}

static inline size_t workspace_bytes(uint64_t ntiles)
{
	return WS_TILE_BYTES * ntiles;
}

/*
 * The first segment the tile starting at element ta must look at: the
 * first s with offsets[s] >= ta if offsets[s] == ta (so that empty
 * segments at ta are this tile's), else the one before it (the segment
 * that holds ta). A 32-way search by the whole warp.
 */
static __device__ __forceinline__ uint64_t first_segment(const uint64_t *off, uint64_t k,
							  uint64_t ta, unsigned lane)
{
	/* the lower bound lies in [a, b]; off[k] (the count) is past ta */
	uint64_t a = 0, b = k;
	while (b - a > 31) {
		uint64_t w = b - a;
		uint64_t p = a + (w * (lane + 1)) / 33;
		unsigned ge = __ballot_sync(FULL, __ldg(off + p) >= ta);
		if (ge == 0) {
			a = a + (w * 32) / 33 + 1;
		} else {
			int f = __ffs(ge) - 1;
			uint64_t pf = a + (w * (f + 1)) / 33;
			if (f > 0)
				a = a + (w * f) / 33 + 1;
			b = pf;
		}
	}
	uint64_t p = a + lane;
	uint64_t v = p <= b ? __ldg(off + p) : ~0ull;
	unsigned ge = __ballot_sync(FULL, p <= b && v >= ta);
	int f = __ffs(ge) - 1;
	uint64_t lb = a + f;
	uint64_t olb = __shfl_sync(FULL, v, f);
	return olb == ta ? lb : lb - 1;
}

/* One piece [lo, hi) of x summed by the warp; every lane has the sum. */
template <typename T, unsigned U>
static __device__ __forceinline__ typename acc<T>::A warp_piece(const T *x, uint64_t lo,
								 uint64_t hi, unsigned lane)
{
	using S = acc<T>;
	typename S::A s = S::ident();
	uint64_t i = lo + lane;
	for (; i + 32 * (U - 1) < hi; i += 32 * U) {
		T v[U];
#pragma unroll
		for (unsigned g = 0; g < U; g++)
			v[g] = __ldg(x + i + 32 * g);
#pragma unroll
		for (unsigned g = 0; g < U; g++)
			s = s + S::of(v[g]);
	}
	if (i < hi) {
		T v[U - 1];
#pragma unroll
		for (unsigned g = 0; g < U - 1; g++)
			v[g] = i + 32 * g < hi ? __ldg(x + i + 32 * g) : T(0);
#pragma unroll
		for (unsigned g = 0; g < U - 1; g++)
			if (i + 32 * g < hi)
				s = s + S::of(v[g]);
	}
	return S::butterfly(s);
}

using grwarp::arrive_last;

/* Items 0..count of a sequence (item(i) gives its bits, from other SMs:
 * read past L1) folded as lane l taking l, l + 32, ... in order, then the
 * butterfly. */
template <typename T, typename F>
static __device__ __forceinline__ typename acc<T>::A fold_items(F item, uint32_t count, unsigned lane)
{
	using S = acc<T>;
	constexpr unsigned B = 8;
	typename S::A c = S::ident();
	uint32_t i = lane;
	for (; i < count; i += 32 * B) {
		uint64_t p[B];
#pragma unroll
		for (unsigned g = 0; g < B; g++)
			p[g] = i + 32 * g < count ? item(i + 32 * g) : 0;
#pragma unroll
		for (unsigned g = 0; g < B; g++)
			if (i + 32 * g < count)
				c = c + S::unbits(p[g]);
	}
	return S::butterfly(c);
}

static __device__ __forceinline__ uint64_t ldcg(const uint64_t *p)
{
	return __ldcg((const unsigned long long *)p);
}

/*
 * The piece v (bits) of a segment [lo, hi) that crosses tiles, from tile
 * t: piece m = t - t0 of the segment's tiles t0..t1. The last tile to
 * arrive writes the segment's sum to *out.
 */
template <typename T>
static __device__ __forceinline__ void cross_piece(const workspace &W, uint64_t lo, uint64_t hi,
						   uint64_t t, uint64_t v, uint64_t *out,
						   unsigned lane)
{
	using S = acc<T>;
	constexpr uint64_t TE = tile_elems<T>();
	const uint64_t t0 = lo / TE, t1 = (hi - 1) / TE;
	const uint32_t np = (uint32_t)(t1 - t0 + 1), m = (uint32_t)(t - t0);
	if (lane == 0) {
		if (m == 0)
			W.last[t0] = v;
		else
			W.first[t] = v;
	}
	auto piece = [&](uint32_t i) -> uint64_t { return i == 0 ? ldcg(W.last + t0) : ldcg(W.first + t0 + i); };
	if (np <= GR_SEGSUM_GROUP) {
		if (!arrive_last(W.tickets + 2 * t1 + 1, np, lane))
			return;
		typename S::A c = fold_items<T>(piece, np, lane);
		if (lane == 0) {
			*out = S::bits(c);
			W.tickets[2 * t1 + 1] = 0;
		}
		return;
	}
	const uint32_t g = m / GR_SEGSUM_GROUP, ng = (np + GR_SEGSUM_GROUP - 1) / GR_SEGSUM_GROUP;
	const uint32_t gfirst = g * GR_SEGSUM_GROUP;
	const uint32_t gn = np - gfirst < GR_SEGSUM_GROUP ? np - gfirst : GR_SEGSUM_GROUP;
	const uint64_t gend = t0 + gfirst + gn - 1;
	if (!arrive_last(W.tickets + 2 * gend, gn, lane))
		return;
	typename S::A c = fold_items<T>([&](uint32_t i) { return piece(gfirst + i); }, gn, lane);
	if (lane == 0) {
		W.group[gend] = S::bits(c);
		W.tickets[2 * gend] = 0;
	}
	if (!arrive_last(W.tickets + 2 * t1 + 1, ng, lane))
		return;
	c = fold_items<T>(
		[&](uint32_t i) {
			uint32_t e = i * GR_SEGSUM_GROUP + GR_SEGSUM_GROUP - 1;
			return ldcg(W.group + t0 + (e < np - 1 ? e : np - 1));
		},
		ng, lane);
	if (lane == 0) {
		*out = S::bits(c);
		W.tickets[2 * t1 + 1] = 0;
	}
}

/* Loads in flight per lane in a piece's loop (U) and blocks per SM asked
 * of the compiler (MINB): neither changes a result, only the speed. */
template <typename T> struct tuning {
	static constexpr unsigned U = 64 / sizeof(T);
	static constexpr unsigned MINB = 4;
};

/* One warp a tile of TE elements. */
template <typename T, unsigned U = tuning<T>::U, unsigned MINB = tuning<T>::MINB>
__global__ void __launch_bounds__(256, MINB)
segsum_kernel(const T *x, uint64_t count, const uint64_t *off, uint64_t k, uint64_t ntiles,
	      uint64_t *out, workspace W)
{
	using S = acc<T>;
	constexpr uint64_t TE = tile_elems<T>();
	const unsigned lane = threadIdx.x & 31;
	const uint64_t t = (uint64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
	if (t >= ntiles)
		return;
	const uint64_t ta = t * TE, tb = ta + TE < count ? ta + TE : count;
	const bool lasttile = t == ntiles - 1;

	for (uint64_t s = first_segment(off, k, ta, lane);; s += 32) {
		const uint64_t idx = s + lane;
		const bool valid = idx < k;
		const uint64_t lo = valid ? __ldg(off + idx) : count;
		const uint64_t hi = valid ? __ldg(off + idx + 1) : count;
		/* the segments at this tile: a prefix of the lanes */
		const bool in = valid && (lo < tb || lasttile);
		const bool inside = lo >= ta && hi <= tb;
		const bool alone = in && inside && hi - lo <= GR_SEGSUM_SHORT;
		if (alone) {
			if (hi == lo) {
				out[idx] = 0;
			} else {
				T v[GR_SEGSUM_SHORT];
#pragma unroll
				for (unsigned e = 0; e < GR_SEGSUM_SHORT; e++)
					v[e] = lo + e < hi ? __ldg(x + lo + e) : T(0);
				typename S::A a = S::ident();
#pragma unroll
				for (unsigned e = 0; e < GR_SEGSUM_SHORT; e++)
					if (lo + e < hi)
						a = a + S::of(v[e]);
				out[idx] = S::bits(a);
			}
		}
		unsigned jobs = __ballot_sync(FULL, in && !alone);
		while (jobs) {
			const int src = __ffs(jobs) - 1;
			jobs &= jobs - 1;
			const uint64_t jlo = __shfl_sync(FULL, lo, src), jhi = __shfl_sync(FULL, hi, src);
			const uint64_t plo = jlo > ta ? jlo : ta, phi = jhi < tb ? jhi : tb;
			typename S::A v = warp_piece<T, U>(x, plo, phi, lane);
			if (jlo >= ta && jhi <= tb) {
				if (lane == 0)
					out[s + src] = S::bits(v);
			} else {
				cross_piece<T>(W, jlo, jhi, t, S::bits(v), out + s + src, lane);
			}
		}
		if (__ballot_sync(FULL, in) != FULL)
			break;
	}
}

static inline uint64_t tiles_of(uint64_t count, size_t size)
{
	uint64_t te = GR_SEGSUM_TILE_BYTES / size;
	return (count + te - 1) / te;
}

/* gr_segsum_launch for count > 0 and a dtype T, with the tuning knobs. */
template <typename T, unsigned U = tuning<T>::U, unsigned MINB = tuning<T>::MINB>
static inline cudaError_t launch(const void *data, uint64_t count, const uint64_t *offsets,
				 uint64_t nsegs, void *out, void *workspace, size_t wbytes,
				 cudaStream_t st)
{
	uint64_t ntiles = tiles_of(count, sizeof(T));
	if (wbytes < workspace_bytes(ntiles))
		return cudaErrorInvalidValue;
	uint64_t blocks = (ntiles + WARPS - 1) / WARPS;
	if (blocks > 0x7fffffffu)
		return cudaErrorInvalidValue;
	segsum_kernel<T, U, MINB><<<(unsigned)blocks, 32 * WARPS, 0, st>>>(
		(const T *)data, count, offsets, nsegs, ntiles, (uint64_t *)out,
		workspace_of(workspace, wbytes));
	return cudaGetLastError();
}

} /* namespace grseg */
