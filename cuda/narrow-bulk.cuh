/*
 * A narrow kernel's groups through shared memory, brought in by the copy
 * engine (bulk.cuh's copies and barriers), in place of each_group's loads
 * into registers (narrow.cuh): each warp's tiles, TG groups of NG vectors
 * a lane (32 * NG * TG vectors), land in NB buffers of its own in the
 * block's dynamic shared memory, so that NB - 1 tiles a warp are on their
 * way while it takes the one in hand, and no registers wait for them.
 *
 * Tiles are the array's vectors in order, a warp's grid-stride over the
 * grid's warps; a group is 32 * NG vectors in a row of its tile, a lane's
 * those at lane, lane + 32, ... Lane 0 issues the warp's copies: one into
 * each buffer at the start, then, once every lane has read the last group
 * of a tile into registers, the warp's tile NB on into the buffer just
 * read. Each buffer has an mbarrier whose phase flips once a use. Warps
 * go their own ways: nothing waits for the block. Whole tiles take a
 * path of their own, which works out nothing a group: in a loop this
 * short of latency its instructions count.
 */
#pragma once

#include "cuda/bulk.cuh"
#include "cuda/narrow.cuh"

namespace grn {

/* A block's share of shared memory for tiles of NG * TG vectors a lane,
 * NB buffers a warp, NT threads: the tiles' dynamic bytes and the
 * barriers' count (a static array of the kernel's) */
template <unsigned NG, unsigned TG, unsigned NB, unsigned NT = THREADS> struct bulk_tiles {
	static constexpr unsigned WARPS = NT / 32;
	static constexpr unsigned TILE_V = 32 * NG * TG;
	static constexpr unsigned SMEM = WARPS * NB * TILE_V * 16;
	static constexpr unsigned BARS = WARPS * NB;
};

/*
 * The groups of nv vectors at vb (16-byte aligned) that fall to this warp
 * of a block of NT threads, each as take(v, live, all), every lane of the
 * warp together: all (the same across the warp) for the groups of whole
 * tiles, every vector the array's; else (the array's last tile, when it
 * is not whole) live says which of the lane's are (bit g: v[g]), the
 * others pad. tiles: bulk_tiles' SMEM bytes, 128-byte aligned; bars: its
 * BARS mbarriers.
 */
template <unsigned NG, unsigned TG, unsigned NB, unsigned NT, class F>
static __device__ __forceinline__ void each_tile_group(const uint4 *vb, uint64_t nv, uint4 pad,
						       unsigned lane, uint4 *tiles,
						       unsigned long long *bars, F &&take)
{
	using L = bulk_tiles<NG, TG, NB, NT>;
	constexpr unsigned TV = L::TILE_V, GV = 32 * NG;
	const uint64_t ntiles = (nv + TV - 1) / TV;
	const unsigned w = threadIdx.x / 32;
	const uint64_t first = (uint64_t)blockIdx.x * L::WARPS + w,
		       stride = (uint64_t)gridDim.x * L::WARPS;
	uint4 *buf = tiles + w * NB * TV;
	unsigned long long *bar = bars + NB * w;
	/* tile ti into buffer k */
	auto issue = [&](unsigned k, uint64_t ti) {
		const uint64_t at = ti * TV, cnt = nv - at < TV ? nv - at : TV;
		grb_bulk::copy_tile(buf + k * TV, vb + at, (unsigned)(cnt * 16), &bar[k]);
	};

	if (lane == 0) {
#pragma unroll
		for (unsigned k = 0; k < NB; k++)
			grb_bulk::bar_init(&bar[k]);
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#pragma unroll
		for (unsigned k = 0; k < NB; k++)
			if (first + k * stride < ntiles)
				issue(k, first + k * stride);
	}
	__syncwarp();

	unsigned b = 0, phase = 0;
	for (uint64_t ti = first; ti < ntiles; ti += stride) {
		grb_bulk::bar_wait(&bar[b], phase);
		const uint64_t at = ti * TV;
		const uint4 *src = buf + b * TV + lane;
		if (nv - at >= TV) {
			/* a whole tile (every one but the array's last): the
			 * copy NB tiles on into its buffer once every lane has
			 * its last group */
#pragma unroll 1
			for (unsigned s = 0; s < TG; s++, src += GV) {
				uint4 v[NG];
#pragma unroll
				for (unsigned g = 0; g < NG; g++)
					v[g] = src[g * 32];
				if (s == TG - 1) {
					__syncwarp();
					if (lane == 0 && ti + NB * stride < ntiles) {
						/* the warp's reads of this buffer before
						 * the copy's writes */
						asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
						issue(b, ti + NB * stride);
					}
				}
				take(v, 0u, true);
			}
		} else {
			/* the last tile, in part: each group with its live bits */
			const unsigned cnt = (unsigned)(nv - at);
#pragma unroll 1
			for (unsigned s = 0; s * GV < cnt; s++, src += GV) {
				uint4 v[NG];
				uint32_t live = 0;
#pragma unroll
				for (unsigned g = 0; g < NG; g++) {
					const bool in = s * GV + lane + g * 32 < cnt;
					v[g] = in ? src[g * 32] : pad;
					live |= (uint32_t)in << g;
				}
				take(v, live, false);
			}
		}
		if (++b == NB) {
			b = 0;
			phase ^= 1;
		}
	}
}

} /* namespace grn */
