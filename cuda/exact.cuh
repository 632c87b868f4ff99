/*
 * Exact f32/f64 sums, and sums of exact squares, on the GPU: the device
 * code (exact.h has the host interface and the result's layout).
 *
 * A lane's bins. Each lane keeps four doubles a0..a3, each pinned to a
 * binade of its own: a_j starts at 1.5 * 2^bj, with b0 = E + 18 and
 * b(j+1) = bj - 39, where 2^E bounds every element the warp has put into
 * its bins (E is the same across the warp). The fast path adds an element
 * x, |x| < 2^E, into the first two by Dekker's Fast2Sum:
 *
 *     s = a0 + x;  d = s - a0;  r = x - d;  a0 = s;      then a1 += r
 *
 * Fast2Sum is error-free while |a0| >= |x| and nothing overflows: a0 + x
 * = s + r exactly, with |r| <= ulp(a0) / 2 = 2^(b0 - 53). So the bins hold
 * an exact share of the sum as long as (1) every a_j stays inside its
 * binade [2^bj, 2^(bj+1)), and (2) a1 += r is exact too. The warp checks
 * (1) after every batch of at most 32 elements per lane: a batch moves a0
 * by at most 32 * 2^(E+1) = 2^(b0 - 12) and a deeper bin by at most
 * 32 * 2^(b(j-1) - 52) = 2^(bj - 8), so a bin found within 2^(bj - 3) of
 * its start cannot leave its binade in the next batch; one found farther
 * is flushed (below) before that batch, and starts afresh. (2) holds when
 * x is a multiple of ulp(a1) = 2^(b1 - 52): then so is r (a difference of
 * multiples of it, as ulp(a0) is one too), and a1 + r, a multiple inside
 * a1's binade, is representable. The batch's elements are checked for that
 * before they take this path, with integer compares on their bits:
 * |x| >= 2^b1 (f64: x has 53 bits from its top) or |x| >= 2^(b1 - 29)
 * (f32: 24 bits), or x == 0: a window of 21 binades below 2^E for f64,
 * 50 for f32. (The kernel's FB = 3 form takes a2 into the fast path too,
 * Fast2Sum into a1 and the plain add into a2: 39 binades more for three
 * more adds an element.)
 *
 * Everything else is, in the large-array kernel (single_kernel), the
 * wide path (exact-wide.cuh: more bins, then per-thread exponent groups
 * for f32 and per-warp counters for f64, at a bounded cost per element),
 * with the careful path behind it for batches that hold an infinity or a
 * NaN; in the other kernels, and in single_kernel's W = CAREFUL form
 * that the tests hold the wide path to, it is the careful path, for the
 * whole warp, one batch at a time: an element of |x| >= 2^E first raises E to cover it where it can
 * (the bins are flushed and re-pinned; E stops at 1000 for f64, so that no
 * bin can overflow, and at 128 for f32, past every finite float; then the
 * batch is looked at again, and usually takes the fast path after all);
 * elements at or past 2^E after that, and infinities and NaNs, go to the
 * superaccumulator or the flags; the rest go through all four bins by
 * Fast2Sum (|a_j| >= 2^bj > 2^(b(j-1) - 53) >= the residual that reaches
 * it), and whatever is left below a3's ulp (never more than one double
 * per element) to the superaccumulator. Every step is exact, so the sum is,
 * whatever the data; only the speed depends on it.
 *
 * The superaccumulator: a block's 134 signed 64-bit digits in shared
 * memory, digit i weighing 2^(32 i - 2176); a double is added as three 32-bit
 * pieces of its significand with shared-memory atomics, so every add is
 * exact and the order does not matter. A flush turns each lane's bins into
 * integers (a_j - start_j is a multiple of 2^(bj - 52) below 2^(bj - 1),
 * so 52 bits), sums them across the warp as integers, and one lane adds
 * the sums. At the end each block flushes its warps, splits each digit
 * once into its low 32 bits and a carry (so what each block adds to the
 * launch's digits stays below 2^33), adds its non-zero digits into the
 * scratch's with global atomics, and the last block to take the ticket
 * moves them to the result, leaving the scratch zero.
 *
 * Signed zeros: a sum is -0 only when every element is -0; lanes keep the
 * signed maximum of each element's (high) word, INT_MIN only for -0 (for
 * f64: or a negative subnormal, which cannot leave an exact zero sum
 * unless all are -0).
 *
 * The cost on typical data: per element a few integer operations on its
 * bits (the window checks, the -0 check) and four double adds (f32 also
 * one conversion to double), on units that a memory-bound loop leaves
 * mostly idle.
 *
 * Squares of f64 (traits<sqd>): x * x = p + e exactly, p = x * x rounded
 * and e = fma(x, x, -p), while p neither overflows nor e loses bits below
 * 2^-1074, that is for 2^-400 <= |x| <= 2^500 (with room to spare). On the
 * fast path (FB = 4, all four bins) p goes through a0 and a1 by Fast2Sum
 * and its rest into a2 by a plain add; e (|e| <= ulp(p) / 2 < 2^(E - 53),
 * below a1's start) through a1 and a2 by Fast2Sum and its rest into a3.
 * Both plain adds are exact when p >= 2^(b3 + 53) = 2^(E - 46): p's rest
 * is then a multiple of ulp(p) >= 2^(E - 98), above ulp(a2) = 2^(E - 112),
 * and e's a multiple of the square's last place, 2^(2 ex - 104) with
 * 2 ex >= E - 47 (x = m 2^(ex - 52)), which is ulp(a3) = 2^(E - 151) or
 * above. So the window is 46 binades of squares (23 of elements), checked
 * with the same integer compares on p's bits; the bins' growth per batch
 * is that of 32 doubles a lane, as for f32. The careful path takes a
 * square whole: NaN and infinities (any infinity squares to +inf) to the
 * flags; |x| < 2^-400 or > 2^500 scaled by 2^600 or 2^-600 first, so that
 * p and e are exact, and both put into the digits 1200 places lower or
 * higher (squares reach from 2^-2148 to nearly 2^2048, past what a double
 * holds, but not past the digits); the rest as two doubles, each the way
 * an f64 element goes, through six bins, not four: with a window this
 * narrow, data of a few dozen binades takes the careful path in most
 * batches, and the two deeper bins (down to 2^(E - 229)) keep the low
 * halves of their squares out of the digits, whose atomics lanes that
 * hold similar values contend for. A square is never -0, so every
 * element counts as "not -0".
 */
#pragma once

#include <cfloat>
#include <cstdint>

#include "cuda/bulk.cuh"
#include "cuda/exact-bins.cuh"
#include "cuda/exact-traits.cuh"
#include "cuda/exact-wide.cuh"
#include "cuda/exact.h"

namespace gre {

/* A warp's G vectors from vw on (grid stride nt), those at or past nv as
 * padding; which of their elements are the array's (for_each_group's
 * live). */
template <typename T, unsigned G = GROUP>
static __device__ __forceinline__ uint32_t load_group(uint4 (&v)[G], const uint4 *vb,
						      uint64_t vw, uint64_t nt, uint64_t nv,
						      unsigned lane)
{
	constexpr unsigned V = traits<T>::V;
	if (vw + 31 + (G - 1) * nt < nv) {
#pragma unroll
		for (unsigned g = 0; g < G; g++)
			v[g] = __ldg(vb + vw + lane + g * nt);
		return G * V == 32 ? 0xffffffffu : (1u << (G * V)) - 1;
	}
	uint32_t live = 0;
#pragma unroll
	for (unsigned g = 0; g < G; g++) {
		uint64_t i = vw + lane + g * nt;
		v[g] = i < nv ? __ldg(vb + i) : traits<T>::pad();
		live |= i < nv ? ((1u << V) - 1) << (g * V) : 0u;
	}
	return live;
}

/*
 * One array's vectors for a block's warp, GROUP at a time: block b's
 * threads take 16-byte vectors grid-stride; the elements before the
 * first 16-byte boundary and after the last whole vector go to block 0's
 * first warp first, one per lane (lane l < head: element l; head <= l <
 * head + tail: the tail's), the rest of that group padded. add(v, live)
 * is called with each group, every lane of the warp together; live has
 * bit g * V + i set where element i of vector g is one of the array's,
 * not padding (all of them for a group well inside the array).
 * bulk.cuh has the same through shared memory.
 */
template <typename T, typename F>
static __device__ __forceinline__ void for_each_group(const unsigned char *data, uint64_t n,
						      unsigned t, unsigned lane, F &&add)
{
	using TR = traits<T>;
	static_assert(GROUP * TR::V <= 32, "a group's elements fit live's bits");
	const vectors<T> a(data, n);
	const uint64_t head = a.head, nv = a.nv, tail = a.tail;
	const uint4 *vb = a.vb;
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;
	uint64_t vw = (uint64_t)blockIdx.x * THREADS + (t - lane); /* the warp's first */

	/* one call of add() in the code: what it does is not small */
	bool ends = blockIdx.x == 0 && t < 32 && head + tail;
	uint4 v[GROUP];
	uint32_t live = 0;
	if (ends) {
		v[0] = ends_vector<T>(data, n, head, tail, lane);
#pragma unroll
		for (unsigned g = 1; g < GROUP; g++)
			v[g] = TR::pad();
		live = lane < head + tail ? 1u : 0u;
	} else if (vw < nv) {
		live = load_group<T>(v, vb, vw, nt, nv, lane);
	}
	if (!ends && vw >= nv)
		return;
	for (;;) {
		const uint64_t nx = ends ? vw : vw + GROUP * nt;
		add(v, live);
		if (nx >= nv)
			break;
		live = load_group<T>(v, vb, nx, nt, nv, lane);
		vw = nx;
		ends = false;
	}
}

/* A block's digits (shared memory, complete) into the launch's scratch,
 * by threads t < GR_EXACT_DIGITS: each digit's low 32 bits plus the carry
 * of the one below (the top digit whole), so that what a block adds stays
 * below 2^33; flags beside them. */
static __device__ __forceinline__ void digits_to_scratch(const long long *digits,
							 unsigned long long flags,
							 gr_exact_scratch *scratch, unsigned t)
{
	if (t < GR_EXACT_DIGITS) {
		long long d = digits[t];
		long long v = t == GR_EXACT_DIGITS - 1 ? d : (long long)(d & 0xffffffffll);
		if (t)
			v += digits[t - 1] >> 32;
		if (v)
			atomicAdd((unsigned long long *)&scratch->acc[t], (unsigned long long)v);
		if (t == 0 && flags)
			atomicOr((unsigned long long *)&scratch->flags, flags);
		__threadfence();
	}
}

/* The last block: the scratch's sum into out, leaving it zero (threads
 * t < GR_EXACT_DIGITS; the ticket is the caller's). */
static __device__ __forceinline__ void scratch_to_out(gr_exact_scratch *scratch,
						      gr_exact_sum *out, unsigned t)
{
	if (t < GR_EXACT_DIGITS)
		out->digit[t] = (long long)atomicExch((unsigned long long *)&scratch->acc[t], 0ull);
	if (t == 0)
		out->flags = atomicExch((unsigned long long *)&scratch->flags, 0ull);
}

/* Is this block the launch's last to finish? Every thread calls it, after
 * its block's share is in the scratch; the last one's sees the others'. */
static __device__ __forceinline__ bool last_block(uint32_t *ticket, unsigned t)
{
	__shared__ unsigned last;
	__syncthreads();
	if (t == 0) {
		last = atomicAdd(ticket, 1u) == gridDim.x - 1;
		if (last)
			*ticket = 0;
	}
	__syncthreads();
	if (last)
		__threadfence();
	return last;
}

/* A warp's flags (and whether any element was other than -0), in every
 * lane */
template <typename B> static __device__ __forceinline__ uint32_t flag_bits(const B &st)
{
	uint32_t f = __reduce_or_sync(FULL, st.flags);
	int rm = __reduce_max_sync(FULL, st.rawmax);
	if (rm != (int)0x80000000)
		f |= GR_EXACT_NOT_NZERO;
	return f;
}

/* ... into the block's */
template <typename B>
static __device__ __forceinline__ void warp_flags(const B &st, unsigned long long *sflags,
						  unsigned lane)
{
	uint32_t f = flag_bits(st);
	if (lane == 0 && f)
		atomicOr(sflags, (unsigned long long)f);
}

/*
 * One array, exactly (for_each_group's order: nothing depends on it). The
 * last block to finish (or the only one) writes *out.
 */
/* The kernel's forms: MINB blocks per SM in its launch bounds (and grid),
 * BULK the groups through shared memory (bulk.cuh), FB the bins of the
 * fast path (3: a window 39 binades wider, three more adds an element),
 * W how a batch outside its window is taken (exact-wide.cuh: CAREFUL,
 * WIDE, WIDE_MID; f32, f64 and their squares). The dynamic shared memory is the
 * tiles (BULK) and then the wide path's (single_smem). */
template <typename T, unsigned MINB = 2, bool BULK = false, int FB = 2, int W = CAREFUL>
__global__ void __launch_bounds__(THREADS, MINB)
single_kernel(const unsigned char *data, uint64_t n, gr_exact_scratch *scratch, gr_exact_sum *out)
{
	__shared__ long long digits[GR_EXACT_DIGITS];
	__shared__ unsigned long long sflags, bars[grb_bulk::BARS];
	extern __shared__ __align__(128) uint4 tiles[];
	const unsigned t = threadIdx.x, lane = t & 31;
	if (t < GR_EXACT_DIGITS)
		digits[t] = 0;
	if (t == 0)
		sflags = 0;
	__syncthreads();

	bins<T, FB> st;
	st.init();
	if constexpr (W == CAREFUL) {
		auto add = [&](const uint4 (&v)[GROUP], uint32_t) {
			st.template batch<GROUP>(v, digits, lane);
		};
		if constexpr (BULK)
			grb_bulk::for_each_group<T>(data, n, t, lane, tiles, bars, add);
		else
			for_each_group<T>(data, n, t, lane, add);
	} else {
		wide<T, W> wp;
		wp.init(tiles + (BULK ? grb_bulk::SMEM_BYTES / 16 : 0), t);
		auto add = [&](const uint4 (&v)[GROUP], uint32_t) {
			wp.template batch<GROUP>(st, v, digits, lane);
		};
		if constexpr (BULK)
			grb_bulk::for_each_group<T>(data, n, t, lane, tiles, bars, add);
		else
			for_each_group<T>(data, n, t, lane, add);
		wp.finish(digits, lane);
		if constexpr (wide<T, W>::COUNTERS) {
			__syncthreads();
			wp.finish_block(digits, t);
		}
	}
	st.flush(digits, lane);
	warp_flags(st, &sflags, lane);
	__syncthreads();

	if (gridDim.x == 1) {
		if (t < GR_EXACT_DIGITS)
			out->digit[t] = digits[t];
		if (t == 0)
			out->flags = sflags;
		return;
	}
	digits_to_scratch(digits, sflags, scratch, t);
	if (last_block(&scratch->ticket, t))
		scratch_to_out(scratch, out, t);
}

/* Blocks for n elements of T: a batch for each thread, at most per_sm
 * blocks per SM. */
template <typename T>
static inline unsigned grid_blocks(uint64_t n, int sm_count, unsigned per_sm = 2)
{
	uint64_t nv = n * sizeof(T) / 16;
	uint64_t want = (nv + THREADS * GROUP - 1) / (THREADS * GROUP);
	uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * per_sm;
	want = want < cap ? want : cap;
	return want ? (unsigned)want : 1u;
}

/*
 * One array of up to a few million elements, for latency: every lane of
 * the grid takes one batch of G vectors (G as small as the grid allows),
 * block 0's warp 0 the ends first; short chains of adds, many of them at
 * once. A block agrees on E from every element's key before any add, so
 * no warp raises it (and flushes) on its way, and every warp's bins stand
 * at the same places: each warp sums its lanes' bins as integers into shared
 * memory (what the careful path leaves goes to the digits as ever), a
 * thread for each bin and piece adds up the warps' sums and cuts out its
 * piece, and each digit's thread writes it with the pieces that fall
 * there: no flush by every warp, no atomics, no thread doing it all. The
 * block's digits are the result, or with more blocks its share, which goes
 * into the launch's scratch as single_kernel's blocks' do.
 */
template <typename T, int FB, unsigned G, unsigned NT = THREADS, unsigned MB = (G < 8 ? 4 : 1)>
__global__ void __launch_bounds__(NT, MB)
one_batch_kernel(const unsigned char *data, uint64_t n, gr_exact_scratch *scratch,
		 gr_exact_sum *out)
{
	using TR = traits<T>;
	using B = bins<T, FB>;
	constexpr unsigned NW = NT / 32;
	static_assert(NT >= 3 * B::BINS && NT % 32 == 0, "a thread for each bin's piece");
	__shared__ long long digits[GR_EXACT_DIGITS];
	__shared__ uint32_t wkmax[NW], wflags[NW];
	__shared__ long long wsum[B::BINS][NW], pc[3 * B::BINS];
	__shared__ unsigned pw[3 * B::BINS];
	const unsigned t = threadIdx.x, lane = t & 31, w = t / 32;
	const vectors<T> a(data, n);
	const uint64_t head = a.head, nv = a.nv, tail = a.tail;
	const uint4 *vb = a.vb;
	const bool ends = blockIdx.x == 0 && w == 0 && head + tail;
	uint4 v[G], ev[1];
	load_group<T, G>(v, vb, (uint64_t)blockIdx.x * NT + t - lane, (uint64_t)gridDim.x * NT, nv,
			 lane);
	if (ends)
		ev[0] = ends_vector<T>(data, n, head, tail, lane);
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT)
		digits[i] = 0;

	B st;
	st.init();
	uint32_t kmax, kmin, emax = 0, emin = 0xffffffffu;
	st.template keys<G>(v, kmax, kmin);
	if (ends)
		st.template keys<1>(ev, emax, emin);
	uint32_t m = __reduce_max_sync(FULL, max(kmax, emax));
	if (lane == 0)
		wkmax[w] = m;
	__syncthreads();
#pragma unroll
	for (unsigned i = 0; i < NW; i++)
		m = max(m, wkmax[i]);
	if (m > st.thi) {
		int ne = TR::bound(m);
		st.pin(ne < TR::E_HI ? ne : TR::E_HI);
	}
	if (ends)
		st.template batch_keyed<1>(ev, digits, lane, emax, emin);
	/* a pending flush (after the ends) moves the bins' starts nowhere */
	st.template batch_keyed<G>(v, digits, lane, kmax, kmin);
	/* each bin's sum over the warp (|sum| < 2^56) in two halves that
	 * cannot overflow 32 bits: the low 26 bits of 32 lanes' |i| < 2^51,
	 * and the signed rest */
#pragma unroll
	for (int j = 0; j < B::BINS; j++) {
		long long i = st.take(j);
		int hi = __reduce_add_sync(FULL, (int)(i >> 26));
		unsigned lo = __reduce_add_sync(FULL, (unsigned)i & 0x3ffffffu);
		if (lane == 0)
			wsum[j][w] = (long long)hi * (1ll << 26) + (long long)lo;
	}
	uint32_t f = flag_bits(st);
	if (lane == 0)
		wflags[w] = f;
	__syncthreads();
	/* lane 3 j + k of warp 0 adds up bin j's sums over the warps
	 * (|total| < 2^61) and takes piece k of it (digit place(j) / 32 + k);
	 * then thread d writes digit d, the pieces that fall there added */
	if (t < 3 * B::BINS) {
		const int j = (int)t / 3;
		long long tj = 0;
#pragma unroll
		for (unsigned u = 0; u < NW; u++)
			tj += wsum[j][u];
		const unsigned p = (unsigned)st.place(j);
		uint64_t x = piece(tj < 0 ? -(uint64_t)tj : (uint64_t)tj, p & 31, t % 3);
		pc[t] = tj < 0 ? -(long long)x : (long long)x;
		pw[t] = (p >> 5) + t % 3;
	}
	__syncthreads();
	/* digit i, the pieces that fall there added (thread i mod NT) */
	auto digit = [&](unsigned i) {
		long long d = digits[i];
#pragma unroll
		for (unsigned k = 0; k < 3 * B::BINS; k++)
			if (pw[k] == i)
				d += pc[k];
		return d;
	};
	uint32_t fl = 0;
	if (t == 0)
#pragma unroll
		for (unsigned i = 0; i < NW; i++)
			fl |= wflags[i];
	if (gridDim.x == 1) {
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT)
			out->digit[i] = digit(i);
		if (t == 0)
			out->flags = fl;
		return;
	}
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT)
		digits[i] = digit(i);
	__syncthreads();
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT)
		digits_to_scratch(digits, fl, scratch, i);
	if (last_block(&scratch->ticket, t))
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT)
			scratch_to_out(scratch, out, i);
}

/* The vectors a lane takes in one_batch_kernel, its blocks and its
 * threads a block: one block where one holds the array at up to GROUP
 * vectors a lane, the narrowest of at least ONT threads (64, 128 or 256)
 * that does, with as few vectors a lane as that allows (no scratch, no
 * ticket: the quickest); else blocks of THREADS, as few vectors a lane as
 * let four blocks an SM hold it; 0 where they cannot (single_kernel runs
 * there) */
template <typename T, unsigned ONT = THREADS>
static inline unsigned one_batch_group(uint64_t n, int sm_count, unsigned &blocks, unsigned &nt)
{
	static_assert(ONT == THREADS || ONT == THREADS / 2 || ONT == THREADS / 4,
		      "one_batch_kernel is built for these");
	const uint64_t nv = n * sizeof(T) / 16;
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * 4;
	blocks = 1;
	for (nt = ONT; nt <= THREADS; nt *= 2)
		if (nv <= (uint64_t)GROUP * nt)
			for (unsigned g = 1; g <= GROUP; g *= 2)
				if (nv <= (uint64_t)g * nt)
					return g;
	nt = THREADS;
	for (unsigned g = 1; g < GROUP; g *= 2) {
		const uint64_t b = (nv + (uint64_t)g * THREADS - 1) / ((uint64_t)g * THREADS);
		if (b <= cap) {
			blocks = (unsigned)b;
			return g;
		}
	}
	return 0;
}

/* one_batch_kernel of G vectors a lane in blocks of nt threads (the
 * shapes one_batch_group<T, ONT> gives: no block narrower than ONT is
 * built) */
template <typename T, int FB, unsigned G, unsigned ONT>
static inline cudaError_t launch_one_batch(const unsigned char *d, uint64_t n, unsigned blocks,
					   unsigned nt, gr_exact_scratch *scratch,
					   gr_exact_sum *out, cudaStream_t stream)
{
	if constexpr (ONT <= THREADS / 4) {
		if (nt == THREADS / 4) {
			one_batch_kernel<T, FB, G, THREADS / 4><<<blocks, nt, 0, stream>>>(d, n, scratch, out);
			return cudaGetLastError();
		}
	}
	if constexpr (ONT <= THREADS / 2) {
		if (nt == THREADS / 2) {
			one_batch_kernel<T, FB, G, THREADS / 2><<<blocks, nt, 0, stream>>>(d, n, scratch, out);
			return cudaGetLastError();
		}
	}
	if (nt != THREADS)
		return cudaErrorInvalidValue;
	one_batch_kernel<T, FB, G><<<blocks, nt, 0, stream>>>(d, n, scratch, out);
	return cudaGetLastError();
}

/* The production form of the kernel: two blocks an SM, the groups
 * through shared memory, at the read kernel's rate on uniform data and
 * faster than from registers on wide data (gpured-exact-bench measures
 * the forms: docs/BENCHMARKS.md) */
constexpr unsigned PROD_MINB = 2;
constexpr bool PROD_BULK = true;
constexpr int PROD_FB = 2;
/* Squares span twice the binades of their elements (uniform [-1, 1)
 * squares below 2^-26 for one element in 8000, and a batch holds 1024):
 * the fast path's third bin keeps them out of the careful one */
constexpr int SQ_FB = 3;
/* An f64's square takes all four bins on the fast path (see above) */
constexpr int SQD_FB = 4;
/* The one-batch kernel's narrowest block (one_batch_group) */
constexpr unsigned PROD_ONT = THREADS / 2;
/* Sums and squares take the wide path with its middle tier (f32
 * squares have none beyond the fast path's bins; f64 squares' is all
 * six of the lane's bins) */
template <typename T> constexpr int PROD_W = WIDE_MID;

/* single_kernel's dynamic shared memory, set as its launches' allowance
 * (the setting is the current device's, and cheap) */
template <typename T, unsigned MINB, bool BULK, int FB, int W>
static inline cudaError_t single_smem(unsigned &smem)
{
	unsigned wide_bytes = 0;
	if constexpr (W != CAREFUL)
		wide_bytes = wide<T, W>::SMEM;
	smem = (BULK ? grb_bulk::SMEM_BYTES : 0u) + wide_bytes;
	if (!smem)
		return cudaSuccess;
	return cudaFuncSetAttribute(single_kernel<T, MINB, BULK, FB, W>,
				    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

template <typename T, unsigned MINB = PROD_MINB, bool BULK = PROD_BULK, int FB = PROD_FB,
	  unsigned ONT = PROD_ONT, int W = PROD_W<T>>
static inline cudaError_t launch_single(const void *data, uint64_t n, gr_exact_scratch *scratch,
					gr_exact_sum *out, int sm_count, cudaStream_t st,
					unsigned blocks = 0)
{
	const unsigned char *d = (const unsigned char *)data;
	if (!blocks) {
		unsigned nt;
		switch (one_batch_group<T, ONT>(n, sm_count, blocks, nt)) {
		case 1:
			return launch_one_batch<T, FB, 1, ONT>(d, n, blocks, nt, scratch, out, st);
		case 2:
			return launch_one_batch<T, FB, 2, ONT>(d, n, blocks, nt, scratch, out, st);
		case 4:
			return launch_one_batch<T, FB, 4, ONT>(d, n, blocks, nt, scratch, out, st);
		case 8:
			return launch_one_batch<T, FB, 8, ONT>(d, n, blocks, nt, scratch, out, st);
		}
		blocks = grid_blocks<T>(n, sm_count, MINB);
	}
	unsigned smem;
	if (cudaError_t e = single_smem<T, MINB, BULK, FB, W>(smem))
		return e;
	single_kernel<T, MINB, BULK, FB, W><<<blocks, THREADS, smem, st>>>(d, n, scratch, out);
	return cudaGetLastError();
}

/*
 * One unit of a segment in the batch kernel, by one warp with digits of
 * its own (shared memory): vectors [u UNIT_VECTORS, (u + 1) UNIT_VECTORS)
 * a row of 32 at a time (unit 0 takes the head and the tail first), then
 * the digits into the segment's scratch as the single-array kernel's
 * blocks put theirs, and the last of the segment's units to finish moves
 * them to out. A segment of one unit writes out directly.
 */
template <typename T, int FB>
static __device__ __forceinline__ void seg_unit(const unsigned char *data, uint64_t n, uint32_t u,
						uint32_t units, long long *digits,
						gr_exact_scratch *scratch, gr_exact_sum *out,
						unsigned lane)
{
	using TR = traits<T>;
	for (unsigned i = lane; i < GR_EXACT_DIGITS; i += 32)
		digits[i] = 0;
	__syncwarp();
	bins<T, FB> st;
	st.init();
	const vectors<T> a(data, n);
	const uint64_t head = a.head, nv = a.nv, tail = a.tail;
	const uint4 *vb = a.vb;
	const uint64_t ub = (uint64_t)u * GR_EXACT_UNIT_VECTORS;
	const uint64_t ue = ub + GR_EXACT_UNIT_VECTORS < nv ? ub + GR_EXACT_UNIT_VECTORS : nv;
	bool ends = u == 0 && head + tail;
	for (uint64_t r = ub; ends || r < ue;) {
		uint4 v[GROUP];
		if (ends) {
			v[0] = ends_vector<T>(data, n, head, tail, lane);
#pragma unroll
			for (unsigned g = 1; g < GROUP; g++)
				v[g] = TR::pad();
		} else {
#pragma unroll
			for (unsigned g = 0; g < GROUP; g++) {
				uint64_t i = r + g * 32 + lane;
				v[g] = i < ue ? __ldg(vb + i) : TR::pad();
			}
		}
		st.template batch<GROUP>(v, digits, lane);
		if (ends)
			ends = false;
		else
			r += GROUP * 32;
	}
	st.flush(digits, lane);
	uint32_t f = __reduce_or_sync(FULL, st.flags);
	if (__reduce_max_sync(FULL, st.rawmax) != (int)0x80000000)
		f |= GR_EXACT_NOT_NZERO;
	__syncwarp();
	if (units == 1) {
		for (unsigned i = lane; i < GR_EXACT_DIGITS; i += 32)
			out->digit[i] = digits[i];
		if (lane == 0)
			out->flags = f;
		__syncwarp();
		return;
	}
	for (unsigned i = lane; i < GR_EXACT_DIGITS; i += 32) {
		long long d = digits[i];
		long long v = i == GR_EXACT_DIGITS - 1 ? d : (long long)(d & 0xffffffffll);
		if (i)
			v += digits[i - 1] >> 32;
		if (v)
			atomicAdd((unsigned long long *)&scratch->acc[i], (unsigned long long)v);
	}
	if (lane == 0 && f)
		atomicOr((unsigned long long *)&scratch->flags, (unsigned long long)f);
	__threadfence();
	__syncwarp();
	unsigned last = 0;
	if (lane == 0)
		last = atomicAdd(&scratch->ticket, 1u) == units - 1;
	last = __shfl_sync(FULL, last, 0);
	if (last) {
		__threadfence();
		for (unsigned i = lane; i < GR_EXACT_DIGITS; i += 32)
			out->digit[i] = (long long)atomicExch((unsigned long long *)&scratch->acc[i], 0ull);
		if (lane == 0) {
			out->flags = atomicExch((unsigned long long *)&scratch->flags, 0ull);
			scratch->ticket = 0;
		}
	}
	__syncwarp();
}

/* Many arrays: one warp a unit, warps striding over the batch's units; a
 * warp finds its segment by binary search over the first units. */
template <int FB = 2>
__global__ void __launch_bounds__(THREADS, 2)
batch_kernel(const unsigned char *base, const gr_exact_seg *segs, uint32_t nsegs,
	     uint32_t total_units, gr_exact_scratch *scratch, gr_exact_sum *out)
{
	__shared__ long long wdigits[THREADS / 32][GR_EXACT_DIGITS];
	const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const uint32_t nw = gridDim.x * (THREADS / 32);
	for (uint32_t w = blockIdx.x * (THREADS / 32) + warp; w < total_units; w += nw) {
		uint32_t lo = 0, hi = nsegs - 1;
		while (lo < hi) {
			uint32_t mid = (lo + hi + 1) / 2;
			if (segs[mid].first_unit <= w)
				lo = mid;
			else
				hi = mid - 1;
		}
		const gr_exact_seg s = segs[lo];
		if (s.dtype == GR_EXACT_F32)
			seg_unit<float, FB>(base + s.offset, s.n, w - s.first_unit, s.units,
					    wdigits[warp], scratch + lo, out + lo, lane);
		else if (s.dtype == GR_EXACT_F32_SQUARES)
			seg_unit<sqf, SQ_FB>(base + s.offset, s.n, w - s.first_unit, s.units,
					     wdigits[warp], scratch + lo, out + lo, lane);
		else if (s.dtype == GR_EXACT_F64_SQUARES)
			seg_unit<sqd, SQD_FB>(base + s.offset, s.n, w - s.first_unit, s.units,
					      wdigits[warp], scratch + lo, out + lo, lane);
		else
			seg_unit<double, FB>(base + s.offset, s.n, w - s.first_unit, s.units,
					     wdigits[warp], scratch + lo, out + lo, lane);
	}
}

static inline uint32_t units_of(int dtype, uint64_t n)
{
	uint64_t bytes = n * (dtype == GR_EXACT_F64 || dtype == GR_EXACT_F64_SQUARES ? 8u : 4u);
	uint64_t u = (bytes + 16ull * GR_EXACT_UNIT_VECTORS - 1) / (16ull * GR_EXACT_UNIT_VECTORS);
	return u ? (uint32_t)u : 1u;
}

} /* namespace gre */
