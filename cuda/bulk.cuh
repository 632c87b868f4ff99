/*
 * An array's groups through shared memory, brought in by the copy engine
 * (sm_90's cp.async.bulk): each warp's tiles of 32 * GROUP vectors (4 KiB)
 * land in two buffers of its own in the block's dynamic shared memory
 * while the warp adds the tile before. A warp then never waits on the
 * memory with its registers held (a register-fed loop can keep only one
 * group a warp in flight before it spills); it waits on a barrier its
 * copy completes, and reads the tile from shared memory.
 *
 * Lane 0 issues the warp's copies: two ahead at the start, then, once
 * every lane has taken its group of a tile into registers, the tile two
 * past it into the buffer just read. Each buffer has an mbarrier; its
 * phase flips once a use. Warps go their own ways, as in the loop that
 * loads into registers: nothing waits for the block.
 *
 * The groups and their live bits are for_each_group's (exact.cuh): the
 * same elements, the head and tail of the array to block 0's first warp
 * first, padding where a group runs past the array; only which lane adds
 * which vector differs, and nothing that uses it depends on that.
 */
#pragma once

#include <cstdint>

#include "cuda/exact-traits.cuh"

namespace grb_bulk {

using gre::GROUP;
using gre::THREADS;

/* Vectors of a warp's tile; a block's dynamic shared memory (two tiles a
 * warp) and its barriers (two a warp: the kernel's static array). */
constexpr unsigned WARPS = THREADS / 32;
constexpr unsigned TILE_V = 32 * GROUP;
constexpr unsigned SMEM_BYTES = WARPS * 2 * TILE_V * 16;
constexpr unsigned BARS = WARPS * 2;

static __device__ __forceinline__ unsigned smem_addr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void bar_init(unsigned long long *bar)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}

/* The copy of bytes from src into dst, completing on bar's current phase
 * (lane 0's: it is the phase's one arrival). */
static __device__ __forceinline__ void copy_tile(void *dst, const void *src, unsigned bytes,
						 unsigned long long *bar)
{
	unsigned b = smem_addr(bar);
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes)
		     : "memory");
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
		     "%2, [%3];" ::"r"(smem_addr(dst)),
		     "l"(src), "r"(bytes), "r"(b)
		     : "memory");
}

static __device__ __forceinline__ void bar_wait(unsigned long long *bar, unsigned parity)
{
	unsigned b = smem_addr(bar), done;
	do {
		asm volatile("{\n\t.reg .pred p;\n\t"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
			     "selp.u32 %0, 1, 0, p;\n\t}"
			     : "=r"(done)
			     : "r"(b), "r"(parity)
			     : "memory");
	} while (!done);
}

/* Tile ti (of nv vectors from vb) into the warp's buffer k, on bar[k]. */
static __device__ __forceinline__ void issue(uint4 *buf, unsigned long long *bar, unsigned k,
					     const uint4 *vb, uint64_t ti, uint64_t nv)
{
	uint64_t first = ti * TILE_V, cnt = nv - first < TILE_V ? nv - first : TILE_V;
	copy_tile(buf + k * TILE_V, vb + first, (unsigned)(cnt * 16), &bar[k]);
}

/*
 * for_each_group (exact.cuh) for a block with SMEM_BYTES of dynamic
 * shared memory at tiles (128-byte aligned) and BARS mbarriers in bars
 * (static shared memory): add(v, live) with each group, every lane of the
 * warp together. 16-byte vectors of data from its first 16-byte boundary
 * on; a warp's tiles grid-stride over the grid's warps.
 */
template <typename T, typename F>
static __device__ __forceinline__ void for_each_group(const unsigned char *data, uint64_t n,
						      unsigned t, unsigned lane, uint4 *tiles,
						      unsigned long long *bars, F &&add)
{
	using TR = gre::traits<T>;
	constexpr unsigned V = TR::V;
	static_assert(GROUP * V <= 32, "a group's elements fit live's bits");
	constexpr uint32_t ALL = GROUP * V == 32 ? 0xffffffffu : (1u << (GROUP * V)) - 1;
	const gre::vectors<T> a(data, n);
	const uint64_t head = a.head, nv = a.nv, tail = a.tail;
	const uint4 *vb = a.vb;
	const uint64_t ntiles = (nv + TILE_V - 1) / TILE_V;
	const unsigned w = t / 32;
	const uint64_t first = (uint64_t)blockIdx.x * WARPS + w, stride = (uint64_t)gridDim.x * WARPS;
	uint4 *buf = tiles + w * 2 * TILE_V;
	unsigned long long *bar = bars + 2 * w;

	if (lane == 0) {
		bar_init(&bar[0]);
		bar_init(&bar[1]);
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		for (unsigned k = 0; k < 2; k++)
			if (first + k * stride < ntiles)
				issue(buf, bar, k, vb, first + k * stride, nv);
	}
	__syncwarp();

	/* one call of add() in the code: what it does is not small */
	for (long long k = blockIdx.x == 0 && w == 0 && head + tail ? -1 : 0;; k++) {
		uint4 v[GROUP];
		uint32_t live;
		if (k < 0) {
			v[0] = gre::ends_vector<T>(data, n, head, tail, lane);
#pragma unroll
			for (unsigned g = 1; g < GROUP; g++)
				v[g] = TR::pad();
			live = lane < head + tail ? 1u : 0u;
		} else {
			const uint64_t ti = first + (uint64_t)k * stride;
			if (ti >= ntiles)
				break;
			const unsigned b = (unsigned)k & 1u;
			bar_wait(&bar[b], (unsigned)(k >> 1) & 1u);
			const uint64_t at = ti * TILE_V;
			const unsigned cnt = (unsigned)(nv - at < TILE_V ? nv - at : TILE_V);
			const uint4 *src = buf + b * TILE_V;
			if (cnt == TILE_V) {
#pragma unroll
				for (unsigned g = 0; g < GROUP; g++)
					v[g] = src[lane + g * 32];
				live = ALL;
			} else {
				live = 0;
#pragma unroll
				for (unsigned g = 0; g < GROUP; g++) {
					bool in = lane + g * 32 < cnt;
					v[g] = in ? src[lane + g * 32] : TR::pad();
					live |= in ? ((1u << V) - 1) << (g * V) : 0u;
				}
			}
			__syncwarp();
			if (lane == 0 && ti + 2 * stride < ntiles) {
				/* the warp's reads of this buffer before the copy's writes */
				asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
				issue(buf, bar, b, vb, ti + 2 * stride, nv);
			}
		}
		add(v, live);
	}
}

/* A launch of kernel in the form BULK says: its dynamic shared memory
 * into smem (the tiles with BULK, and extra bytes after them), and that
 * much allowed, on every launch, since the setting is the current
 * device's (and cheap). The carveout is left to the driver: it takes what
 * the blocks need, and the rest stays L1 for the careful path's local
 * array. */
template <bool BULK, typename K>
static inline cudaError_t prepare(K *kernel, unsigned &smem, unsigned extra = 0)
{
	smem = (BULK ? SMEM_BYTES : 0u) + extra;
	if (!smem)
		return cudaSuccess;
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
				    (int)smem);
}

} /* namespace grb_bulk */
