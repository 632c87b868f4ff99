/*
 * The inclusive prefix sum kernel's device code; scan.h gives the order
 * of its additions, which everything here keeps to. Included by scan.cu
 * and by the benchmark and tests. A narrow dtype's elements (T is
 * grwiden::narrow<DT>) are widened as they come into shared memory
 * (widen.cuh), and the kernel goes on as for the dtype they widen to.
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cuda/scan.h"
#include "cuda/warp.cuh"
#include "cuda/widen.cuh"

namespace grscan {

using grwarp::FULL;
constexpr unsigned THREADS = 256, IPT = 16, TILE = THREADS * IPT, WARPS = THREADS / 32;
static_assert(TILE == GR_SCAN_TILE, "tile size");

template <typename T> using acc = grwarp::sum_acc<T>;

/*
 * The workspace: the tile counter, then two 16-byte entries a tile,
 * {A_j, epoch} and {F_j, epoch}, each written and read whole (one
 * 16-byte access each way, as the look-back of single-pass scans
 * commonly relies on), so that a reader
 * that sees this launch's epoch sees the value stored with it, and needs
 * no fence. Entries sit at fixed places whatever n is: a smaller launch
 * never reads a larger one's leftovers as its own.
 */
struct alignas(16) entry {
	uint64_t value;
	uint64_t epoch;
};
static inline uint64_t tiles_of(uint64_t n)
{
	return (n + TILE - 1) / TILE;
}
static inline size_t workspace_bytes(uint64_t n)
{
	return 16 + tiles_of(n) * 2 * sizeof(entry);
}

static __device__ __forceinline__ entry ld_entry(const entry *p)
{
	entry e;
	asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
		     : "=l"(e.value), "=l"(e.epoch)
		     : "l"(p)
		     : "memory");
	return e;
}
static __device__ __forceinline__ void st_entry(entry *p, uint64_t value, uint64_t epoch)
{
	asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(value), "l"(epoch)
		     : "memory");
}

/* Shared memory rows of 16 elements padded to 17: a thread's row and a
 * warp's stripe both meet every bank once. */
static __device__ __forceinline__ unsigned pad(unsigned i)
{
	return i + i / IPT;
}

/*
 * How the kernel is built (none of it changes a result), packed in one
 * word KN so that a benchmark can build several:
 *  - bits 0-3, MINB: blocks per SM asked of the compiler;
 *  - WARPX: each warp moves its own 512 elements between stripes and
 *    threads' rows through its own part of shared memory, with no barrier
 *    of the block (without it, the block's 4096 at once between two
 *    barriers);
 *  - VEC (with WARPX): full tiles move between memory and shared memory
 *    in 16-byte vectors (input and output 16-byte aligned);
 *  - CARVE: the launch asks for the largest shared memory carveout, so
 *    that shared memory allows as many blocks an SM as MINB asks;
 *  - PROF: thread 0 stamps its block's phases into `prof` (benchmarks
 *    only: ops-bench's scan_prof reads them);
 *  - PREF: while thread 0 takes the ticket, the block asks L2 for tile
 *    blockIdx.x (blocks start, and take tickets, in about that order, so
 *    whichever block gets that tile finds it on its way).
 * Production: four blocks of 256 an SM (64 registers; each holds 35 KiB
 * of shared memory), 16-byte vectors, the whole carveout, the prefetch.
 * Why these: docs/KERNELS.md (the scan); the rates: docs/BENCHMARKS.md.
 */
namespace kn {
constexpr unsigned WARPX = 1u << 4, VEC = 1u << 5, CARVE = 1u << 6, PROF = 1u << 7, PREF = 1u << 8;
__host__ __device__ constexpr unsigned minb(unsigned k) { return k & 15u; }
__host__ __device__ constexpr unsigned make(unsigned minb, unsigned flags)
{
	return minb | flags;
}
} /* namespace kn */

template <typename T> struct tuning {
	static constexpr unsigned KN = kn::make(4, kn::WARPX | kn::VEC | kn::CARVE | kn::PREF);
};

/* Where stripe element k (0..15) of thread t lies in the tile: the
 * block's stripes (k * 256 + t), or its warp's (512 w + 32 k + l). */
template <unsigned WARPX> static __device__ __forceinline__ unsigned stripe(unsigned k, unsigned t)
{
	if (WARPX)
		return (t & ~31u) * IPT + k * 32 + (t & 31);
	return k * THREADS + t;
}

template <unsigned WARPX> static __device__ __forceinline__ void xsync()
{
	if (WARPX)
		__syncwarp();
	else
		__syncthreads();
}

/* where PROF stamps go: 8 words a tile */
static __device__ uint64_t *prof;

static __device__ __forceinline__ uint64_t gtimer()
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

template <typename T, unsigned KN = tuning<T>::KN>
__global__ void __launch_bounds__(THREADS, kn::minb(KN))
scan_kernel(const typename grwiden::in<T>::R *in, uint64_t n, uint64_t *out, uint64_t ntiles,
	    uint32_t *counter, entry *ents, uint32_t epoch)
{
	/* R in memory, W once widened */
	using IN = grwiden::in<T>;
	using R = typename IN::R;
	using W = typename IN::W;
	using S = acc<W>;
	using A = typename S::A;
	constexpr unsigned WARPX = (KN & kn::WARPX) ? 1 : 0;
	constexpr bool VEC = (KN & kn::VEC) && WARPX, PROF = KN & kn::PROF;
	__shared__ uint64_t buf[TILE + TILE / IPT];
	__shared__ A wsum[WARPS];
	__shared__ A carry;
	__shared__ uint64_t tile_sh;
	const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;

	uint64_t p0 = 0, p1 = 0, p2 = 0, p3 = 0, p4 = 0;
	if (PROF && t == 0) {
		p0 = gtimer();
		p1 = clock64();
	}
	if (KN & kn::PREF) {
		/* one 128-byte line a thread while the ticket is out */
		const uint64_t at = (uint64_t)blockIdx.x * TILE * sizeof(R) + t * 128;
		if (t * 128 < TILE * sizeof(R) && at < n * sizeof(R))
			asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)in + at));
	}
	if (t == 0) {
		uint32_t j = atomicAdd(counter, 1u);
		/* the last ticket handed out: the counter is free again */
		if (j == ntiles - 1)
			*counter = 0;
		tile_sh = j;
	}
	__syncthreads();
	const uint64_t j = tile_sh;
	const uint64_t base = j * TILE;
	const bool full = base + TILE <= n;
	if (PROF && t == 0)
		p2 = clock64();

	W x[IPT];
	{
		/* stripes in, rows out of shared memory (widened) */
		W *sb = (W *)buf;
		/* 16-byte aligned: whole vectors are stored into it */
		alignas(16) R v[IPT];
		if (VEC && full) {
			/* the warp's 512 elements, 16 bytes a lane at a time */
			constexpr unsigned E = 16 / sizeof(R);
			const unsigned w0 = (t & ~31u) * IPT;
#pragma unroll
			for (unsigned c = 0; c < IPT / E; c++)
				*(uint4 *)&v[c * E] = *(const uint4 *)(in + base + w0 + c * 32 * E + lane * E);
#pragma unroll
			for (unsigned c = 0; c < IPT / E; c++)
#pragma unroll
				for (unsigned q = 0; q < E; q++)
					sb[pad(w0 + c * 32 * E + lane * E + q)] = IN::widen(v[c * E + q]);
		} else {
			if (full) {
#pragma unroll
				for (unsigned k = 0; k < IPT; k++)
					v[k] = in[base + stripe<WARPX>(k, t)];
			} else {
#pragma unroll
				for (unsigned k = 0; k < IPT; k++)
					v[k] = base + stripe<WARPX>(k, t) < n ? in[base + stripe<WARPX>(k, t)] : R(0);
			}
#pragma unroll
			for (unsigned k = 0; k < IPT; k++)
				sb[pad(stripe<WARPX>(k, t))] = IN::widen(v[k]);
		}
		xsync<WARPX>();
#pragma unroll
		for (unsigned e = 0; e < IPT; e++)
			x[e] = sb[pad(t * IPT + e)];
	}

	/* 2: the thread's total */
	A r = S::ident();
#pragma unroll
	for (unsigned e = 0; e < IPT; e++)
		r = r + S::of(x[e]);
	/* 3: the warp's scan */
	A w = r;
#pragma unroll
	for (unsigned d = 1; d < 32; d <<= 1) {
		A y = __shfl_up_sync(FULL, w, d);
		if (lane >= d)
			w = y + w;
	}
	A wl = __shfl_up_sync(FULL, w, 1);
	if (lane == 0)
		wl = S::ident();
	if (lane == 31)
		wsum[warp] = w;
	__syncthreads();
	/* 4, 5 */
	A P = S::ident(), agg = S::ident();
#pragma unroll
	for (unsigned q = 0; q < WARPS; q++) {
		if (q == warp)
			P = agg;
		agg = agg + wsum[q];
	}
	const A E = P + wl;

	/*
	 * 6, 7: one warp. Ranges of fewer than 32 tiles are summed here from
	 * the tiles' totals A (each published as soon as its tile has read
	 * its data), as the pairwise tree that step 6 amounts to: F of an
	 * aligned range is F of its left half plus F of its right half. Only
	 * the ends of aligned ranges of 32 tiles or more publish F. So a tile
	 * never waits on a chain of recent tiles' waits: lane l waits, all
	 * lanes at once, for A of tile l of this block of 32 (l below this
	 * tile's place in it), for F of the range of bit l >= 5 of j (X_j),
	 * and for F_{j - 2^l}, 5 <= l < z (F_j).
	 */
	if (PROF && t == 0)
		p3 = clock64();
	if (warp == 0) {
		const uint64_t blk = j & ~31ull;
		const unsigned jl = (unsigned)(j & 31);
		const bool later = j + 1 < ntiles;
		if (lane == 0 && later && jl != 31)
			st_entry(ents + 2 * j, S::bits(agg), epoch);
		const unsigned z = later ? __ffsll((long long)(j + 1)) - 1 : 0;
		bool needa = lane < jl;
		bool needx = lane >= 5 && ((j >> lane) & 1);
		bool needf = lane >= 5 && lane < z;
		const entry *ea = ents + 2 * (needa ? blk + lane : 0);
		const entry *ex = ents + 2 * (needx ? (j & ~((2ull << lane) - 1)) + (1ull << lane) - 1 : 0) + 1;
		const entry *ef = ents + 2 * (needf ? j - (1ull << lane) : 0) + 1;
		A v = lane == jl ? agg : S::ident(), vx = S::ident(), vf = S::ident();
		/* one round of polls for what is still missing */
		auto poll = [&]() {
			entry ra = {}, rx = {}, rf = {};
			if (needa)
				ra = ld_entry(ea);
			if (needx)
				rx = ld_entry(ex);
			if (needf)
				rf = ld_entry(ef);
			if (needa && ra.epoch == epoch) {
				v = S::unbits(ra.value);
				needa = false;
			}
			if (needx && rx.epoch == epoch) {
				vx = S::unbits(rx.value);
				needx = false;
			}
			if (needf && rf.epoch == epoch) {
				vf = S::unbits(rf.value);
				needf = false;
			}
		};
		/* F_j needs only the A and F waits: it is published before
		 * the wait for X_j's ranges ends, so that no publication waits
		 * on another tile's carry (which would chain every 32nd tile
		 * to the 32nd before it) */
		while (__any_sync(FULL, needa || needf))
			poll();
		/* the pairwise tree over the block; low[b]: the range of bit b < 5 of j */
		A low[5];
		low[0] = __shfl_sync(FULL, v, jl & ~1u);
#pragma unroll
		for (unsigned L = 1; L <= 5; L++) {
			A w = __shfl_down_sync(FULL, v, 1u << (L - 1));
			if ((lane & ((1u << L) - 1)) == 0)
				v = v + w;
			if (L < 5)
				low[L] = __shfl_sync(FULL, v, jl & ~((2u << L) - 1));
		}
		if (z >= 5) {
			A F = __shfl_sync(FULL, v, 0);
			for (unsigned L = 6; L <= z; L++)
				F = __shfl_sync(FULL, vf, L - 1) + F;
			if (lane == 0)
				st_entry(ents + 2 * j + 1, S::bits(F), epoch);
		}
		while (__any_sync(FULL, needx))
			poll();
		A X = S::ident();
		for (int b = 30; b >= 5; b--)
			if ((j >> b) & 1)
				X = X + __shfl_sync(FULL, vx, b);
#pragma unroll
		for (int b = 4; b >= 0; b--)
			if ((j >> b) & 1)
				X = X + low[b];
		if (lane == 0)
			carry = X;
	}
	__syncthreads();

	/* 8: the outputs, rows into shared memory, stripes out */
	if (PROF && t == 0)
		p4 = clock64();
	const A Q = carry + E;
	A rr = S::ident();
#pragma unroll
	for (unsigned e = 0; e < IPT; e++) {
		rr = rr + S::of(x[e]);
		buf[pad(t * IPT + e)] = S::bits(Q + rr);
	}
	xsync<WARPX>();
	if (VEC && full) {
		/* the warp's 512 outputs, two a lane at a time */
		const unsigned w0 = (t & ~31u) * IPT;
#pragma unroll
		for (unsigned c = 0; c < IPT / 2; c++) {
			const unsigned i = w0 + c * 64 + lane * 2;
			const uint64_t a = buf[pad(i)], b = buf[pad(i + 1)];
			*(uint4 *)(out + base + i) =
				make_uint4((unsigned)a, (unsigned)(a >> 32), (unsigned)b, (unsigned)(b >> 32));
		}
	} else if (full) {
#pragma unroll
		for (unsigned k = 0; k < IPT; k++)
			out[base + stripe<WARPX>(k, t)] = buf[pad(stripe<WARPX>(k, t))];
	} else {
#pragma unroll
		for (unsigned k = 0; k < IPT; k++)
			if (base + stripe<WARPX>(k, t) < n)
				out[base + stripe<WARPX>(k, t)] = buf[pad(stripe<WARPX>(k, t))];
	}
	if (PROF && t == 0) {
		uint64_t *p = prof + 8 * j;
		unsigned sm;
		asm("mov.u32 %0, %%smid;" : "=r"(sm));
		p[0] = p0;
		p[1] = p2 - p1;
		p[2] = p3 - p2;
		p[3] = p4 - p3;
		p[4] = clock64() - p4;
		p[5] = sm;
		p[6] = gtimer();
		p[7] = blockIdx.x;
	}
}

/* gr_scan_launch for n > 0 and a dtype T (a narrow one's elements on
 * their own size's boundary), built as KN says; a KN with VEC serves
 * only 16-byte aligned input and output, and falls back to KN without it
 * otherwise (the same bits either way). */
template <typename T, unsigned KN = tuning<T>::KN>
static inline cudaError_t launch(const void *in, uint64_t n, void *out, void *workspace,
				 uint32_t epoch, cudaStream_t st)
{
	if constexpr ((KN & kn::VEC) != 0)
		if (((uintptr_t)in | (uintptr_t)out) & 15)
			return launch<T, KN & ~kn::VEC>(in, n, out, workspace, epoch, st);
	if constexpr ((KN & kn::CARVE) != 0) {
		/* on every launch: it is the current device's, and cheap */
		cudaError_t e = cudaFuncSetAttribute(scan_kernel<T, KN>,
						     cudaFuncAttributePreferredSharedMemoryCarveout,
						     cudaSharedmemCarveoutMaxShared);
		if (e != cudaSuccess)
			return e;
	}
	uint64_t ntiles = tiles_of(n);
	unsigned char *w = (unsigned char *)workspace;
	scan_kernel<T, KN><<<(unsigned)ntiles, THREADS, 0, st>>>(
		(const typename grwiden::in<T>::R *)in, n, (uint64_t *)out, ntiles, (uint32_t *)w,
		(entry *)(w + 16), epoch);
	return cudaGetLastError();
}

} /* namespace grscan */
