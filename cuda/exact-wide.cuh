/*
 * The exact sums' wide path: what a warp of the large-array kernel
 * (exact.cuh, single_kernel) does with a batch that its bins' window
 * does not hold, at a cost per element that no exponent distribution can
 * raise much.
 *
 * A batch that the fast path's window (FB bins: 50 binades below 2^E for
 * f32, 21 for f64) does not hold goes, after E is raised where it must
 * be (bins::prepare, as before), to the first of these that takes it:
 *
 * 1. The careful path (bins::add_careful) when any lane holds an
 *    infinity or a NaN: the flags are its business, and such batches are
 *    few.
 * 2. The middle tier: the same bins, MB of them instead of FB (f32: 3,
 *    89 binades; f64: 4, 99 binades), when the whole batch lies in their
 *    window. bins.cuh's argument holds for any number of bins: Fast2Sum
 *    into all but the last, a plain add into that one, exact for
 *    elements that are multiples of its last place; the headroom check
 *    after the batch looks at every bin.
 * 3. Otherwise, f32 (and f32 squares): exponent groups. Each thread owns NG = 16 doubles in
 *    shared memory, one for each group of 16 binades (an f32's biased
 *    exponent >> 4), and adds each element, converted, into its group's
 *    double with a plain add. Group g's elements are multiples of
 *    q = 2^(16 g - 150) below 2^39 q (biased exponents 16 g .. 16 g + 15,
 *    24-bit significands; subnormals are multiples of 2^-149), so a
 *    double that has taken at most 2^14 of them is an integer multiple
 *    of q below 2^53 q: every add is exact, whatever the order. A warp
 *    flushes its groups after GROUP_FLUSH such batches (32 elements a
 *    lane each: 2^13) and at its end: each double as an integer of q's,
 *    summed across the warp, deposited into the block's digits. The
 *    layout [group][thread] puts a half-warp's 8-byte slots on 32
 *    distinct banks whatever groups the lanes pick, and no two threads
 *    share a slot: no atomics, no conflicts, nothing depends on the
 *    data but which slot a lane reads and writes. An f32's square x * x
 *    is p + e, two f32s, exactly, for 2^-51 <= |x| < 2^63 (SQ_KEY_LO,
 *    SQ_KEY_HI): both go into their groups, two adds an element, so the
 *    groups flush twice as often. A batch with any other non-zero
 *    element (data over more than 114 binades) takes the careful path,
 *    as one with an infinity or a NaN does.
 * 4. Otherwise, f64: where half the warp's elements or more lie in the
 *    middle tier's window, each of those goes into the bins as there
 *    (and where fewer do, none: WIDE_EACH keeps them), and every
 *    other finite one into the warp's own NC 32-bit counters in shared
 *    memory (counter c weighs 2^(CP c - 2176), CP = 20): its
 *    significand, at its place, as three or four CP-bit pieces (3.6 an
 *    element on average), each added with a 32-bit shared-memory atomic
 *    (native; 64-bit ones are compare-and-swap loops on sm_90). A warp
 *    moves its counters into its own 64-bit sums (plain loads and
 *    stores, each lane its own counters) after CNT_FLUSH such batches,
 *    before any can pass 2^31, and at its end; the block adds up its
 *    warps' sums counter by counter and deposits each once into its
 *    digits (finish_block). Per-thread groups do not fit an f64's 2046
 *    binades in shared memory; lanes that meet on a counter are served
 *    in turn by the hardware, and spread data spreads them. (16-bit
 *    pieces, five an element, flushed into the block's digits with
 *    64-bit atomics, and 21-bit ones, flushed every other batch, were
 *    measured slower.)
 *    (WIDE_MATCH: the warp's own 64-bit digits instead, lanes of equal
 *    digit found by __match_any_sync taking turns; measured slower.)
 * 5. f64 squares: x * x is p + e, two doubles, exactly, for 2^-400 <=
 *    |x| < 2^500 (SQD_KEY_LO, SQD_KEY_HI; a batch with any other
 *    non-zero element takes the careful path). Each of p and e goes
 *    into the lane's six bins (the careful path's: no more registers),
 *    a window of 177 binades below 2^E, where it lies in it, and into
 *    the warp's counters as step 4's doubles where not; the counters
 *    take two doubles an element, so they flush twice as often.
 *
 * Each step is exact, so the sum is the careful path's, bit for bit; the
 * careful path stays reachable (single_kernel's W = CAREFUL) as the
 * reference the tests hold the wide path to.
 */
#pragma once

#include <cstdint>

#include "cuda/exact-bins.cuh"
#include "cuda/exact-traits.cuh"

namespace gre {

/* How single_kernel takes a batch outside the fast path's window: the
 * careful path alone, the wide path without its middle tier, or with it
 * (production), or (f64 alone differs) with it but the warp's 64-bit
 * digits in place of its counters (deposit_warp; measured, slower), or
 * with it but each element the middle tier's window holds into the bins
 * even where few do (step 4) */
enum { CAREFUL = 0, WIDE = 1, WIDE_MID = 2, WIDE_MATCH = 3, WIDE_EACH = 4 };

/* A warp's counters: counter c weighs 2^(CP c - 2176), and takes pieces
 * of CP bits; every finite double's pieces (its significand's 53 bits at
 * any of CP places: at most four) fall below NC */
constexpr unsigned CP = 20;
constexpr unsigned NC = (2045u + LSB_OFF) / CP + 4;
static_assert(53 + CP - 1 <= 4 * CP, "four pieces a double");

/* f32 exponent groups: NG groups of 16 binades; a warp's flush after
 * GROUP_FLUSH batches through them (at most 32 elements a lane each, so
 * at most 2^13 in a slot, of the 2^14 that keep it exact) */
constexpr int NG = 16;
constexpr unsigned GROUP_FLUSH = 256;

/* the middle tier's bins, and the first key of an infinity or NaN */
template <typename T> struct wide_of;
template <> struct wide_of<float> {
	static constexpr int MB = 3;
	static constexpr uint32_t SPECIAL = 0x7f800000u;
	static constexpr bool GROUPS = true;
	static constexpr bool SQ_GROUPS = false;
	static constexpr bool SQ_SPLIT = false;
};
template <> struct wide_of<double> {
	static constexpr int MB = 4;
	static constexpr uint32_t SPECIAL = 0x7ff00000u;
	static constexpr bool GROUPS = false;
	static constexpr bool SQ_GROUPS = false;
	static constexpr bool SQ_SPLIT = false;
};
/* an f32's square is a double of 48 bits: its middle tier is the fast
 * path's three bins (more would cost registers, and spill, on the fast
 * path); past it, the square as two f32s in the groups (step 3) */
template <> struct wide_of<sqf> : wide_of<double> {
	static constexpr int MB = 3;
	static constexpr bool SQ_GROUPS = true;
};
/* an f64's square as its two doubles p and e, each into all six of the
 * lane's bins (the careful path's, so no more registers) where it lies in
 * their window, into the counters where not (step 5) */
template <> struct wide_of<sqd> : wide_of<double> {
	static constexpr int MB = traits<sqd>::BINS;
	static constexpr bool SQ_SPLIT = true;
};

/* f32 elements whose square is p + e, both f32 and exact (p = x * x
 * rounded, e = fma(x, x, -p)): 2^-51 <= |x| < 2^63. x = m 2^(ex - 23),
 * m < 2^24, so x * x is a multiple of 2^(2 ex - 46) >= 2^-148, with 48
 * bits: p is finite and its rounding error e has 24 bits at most, a
 * multiple of 2^-148, so an f32 holds it (a subnormal one too). A batch
 * tells by its squares' keys (their doubles' high words): 2^-102 <=
 * x * x < 2^126. */
constexpr uint32_t SQ_KEY_LO = (1023u - 102u) << 20, SQ_KEY_HI = (1023u + 126u) << 20;

/* f64 elements whose square is p + e, both doubles and exact, with p
 * below the bins' highest E (traits<double>::E_HI): 2^-400 <= |x| <
 * 2^500 (x * x's error is a multiple of 2^(2 ex - 104) >= 2^-906, a
 * normal double's multiple). A batch tells by p's keys: 2^-800 <= p <
 * 2^1000 (an |x| just below 2^-400 whose p rounds up to 2^-800 is still
 * a multiple of 2^-906). */
constexpr uint32_t SQD_KEY_LO = (1023u - 800u) << 20, SQD_KEY_HI = (1023u + 1000u) << 20;

/* a double's key as traits<double>::nzkey gives an element's: |d|'s high
 * word, never 0 for d != 0 */
static __device__ __forceinline__ uint32_t dkey(double d)
{
	return ((uint32_t)__double2hiint(d) & 0x7fffffffu) | (__double2loint(d) != 0);
}

/*
 * A finite double x into a warp's counters cnt (NC int32 in shared
 * memory), any lane: its significand, at its place, as at most four
 * CP-bit pieces (three where it fits), each added to its counter with a
 * native 32-bit shared-memory atomic (lanes that meet on a counter are
 * served by the hardware in turn). A counter takes at most 2^(31 - CP)
 * adds before its flush (wide::CNT_FLUSH).
 */
static __device__ __forceinline__ void deposit_counters(int *cnt, double x)
{
	const uint64_t bits = (uint64_t)__double_as_longlong(x);
	const unsigned e = (unsigned)(bits >> 52) & 0x7ffu;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	const unsigned pos = (e ? e - 1 : 0) + LSB_OFF, c = pos / CP, sh = pos - c * CP;
	constexpr unsigned MASK = (1u << CP) - 1;
	const uint64_t lo = m << sh; /* bits 0 .. 63 of m 2^sh */
	unsigned p[4];
#pragma unroll
	for (unsigned k = 0; k < 3; k++)
		p[k] = (unsigned)(lo >> (CP * k)) & MASK;
	/* bits 3 CP .. of m 2^sh, below 2^(53 + CP - 1 - 3 CP) */
	p[3] = (unsigned)(m >> (3 * CP - sh));
	const bool neg = bits >> 63;
#pragma unroll
	for (unsigned k = 0; k < 4; k++)
		if (p[k])
			atomicAdd(&cnt[c + k], neg ? -(int)p[k] : (int)p[k]);
}

/* lanes below this one */
static __device__ __forceinline__ unsigned lanes_below(unsigned lane)
{
	return (1u << lane) - 1;
}

/*
 * A finite double x into a warp's own digits wd (every lane calls it;
 * skip: the lane has nothing to add): its significand as three 32-bit
 * pieces of the digits w, w + 1, w + 2 (deposit_double's), added by
 * plain loads and stores in rounds in which no two lanes have the same
 * w (lanes of equal w, found by a match, take turns), each piece's step
 * apart from the next by the warp's barrier, so that no lane's add of a
 * digit overlaps another's.
 */
static __device__ __forceinline__ void deposit_warp(long long *wd, double x, bool skip,
						    unsigned lane)
{
	const uint64_t bits = (uint64_t)__double_as_longlong(x);
	const unsigned e = (unsigned)(bits >> 52) & 0x7ffu;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	const unsigned pos = (e ? e - 1 : 0) + LSB_OFF;
	const bool act = !skip && m;
	const unsigned w = act ? pos >> 5 : 0xffffffffu;
	const unsigned peers = __match_any_sync(FULL, w);
	const unsigned rank = __popc(peers & lanes_below(lane));
	const unsigned rounds = __reduce_max_sync(FULL, act ? rank + 1 : 0);
	long long p[3];
#pragma unroll
	for (unsigned k = 0; k < 3; k++) {
		const long long q = (long long)piece(m, pos & 31, k);
		p[k] = bits >> 63 ? -q : q;
	}
	for (unsigned r = 0; r < rounds; r++) {
		const bool go = act && rank == r;
#pragma unroll
		for (unsigned k = 0; k < 3; k++) {
			if (go)
				wd[w + k] += p[k];
			__syncwarp();
		}
	}
}

/* A warp's wide path (every lane calls each method together) for
 * elements of T; W is WIDE, WIDE_MID or WIDE_MATCH. */
template <typename T, int W> struct wide {
	using WT = wide_of<T>;
	using TR = traits<T>;
	static constexpr bool MATCH = W == WIDE_MATCH && !WT::GROUPS && !WT::SQ_GROUPS &&
				      !WT::SQ_SPLIT;
	/* the warps' counters (steps 4 and 5), whose sums the block
	 * deposits at its end (finish_block) */
	static constexpr bool COUNTERS = !WT::GROUPS && !WT::SQ_GROUPS && !MATCH;
	/* dynamic shared memory a block needs (after the tiles): the
	 * threads' groups, or the warps' counters or digits */
	static constexpr unsigned GROUPS_SMEM = NG * THREADS * 8u;
	static constexpr unsigned SMEM = WT::GROUPS || WT::SQ_GROUPS ? GROUPS_SMEM
					 : MATCH ? (THREADS / 32) * GR_EXACT_DIGITS * 8u
						 : (THREADS / 32) * NC * 12u;
	/* batches through the groups before their flush: each element adds
	 * once, an f32 square twice */
	static constexpr unsigned G_FLUSH = WT::SQ_GROUPS ? GROUP_FLUSH / 2 : GROUP_FLUSH;
	/* batches a warp's counters take before their flush: a batch adds
	 * at most 32 GROUP V pieces (below 2^CP) to a counter (an f64's
	 * square: twice that), so 2^(31 - CP) of them between flushes keep
	 * it within an int32 */
	static constexpr unsigned CNT_ADDS = 32u * GROUP * TR::V * (WT::SQ_SPLIT ? 2u : 1u);
	static constexpr unsigned CNT_FLUSH = (1u << (31 - CP)) / CNT_ADDS;
	static_assert(CNT_FLUSH >= 1, "a batch within a counter's headroom");

	double *slot;  /* this thread's group 0; group g at slot[g * THREADS] */
	long long *wd; /* the warp's digits (MATCH) */
	long long *acc; /* the warp's counters' sums: acc[c] weighs as cnt[c] */
	int *cnt;      /* the warp's counters */
	unsigned nb;   /* batches through the groups or counters since their last flush */

	/* mem: SMEM bytes of the block's shared memory; t: the thread */
	__device__ __forceinline__ void init(void *mem, unsigned t)
	{
		nb = 0;
		if constexpr (WT::GROUPS || WT::SQ_GROUPS) {
			slot = (double *)mem + t;
#pragma unroll
			for (int g = 0; g < NG; g++)
				slot[g * THREADS] = 0;
		} else if constexpr (MATCH) {
			wd = (long long *)mem + (t / 32) * GR_EXACT_DIGITS;
			for (unsigned i = t % 32; i < GR_EXACT_DIGITS; i += 32)
				wd[i] = 0;
			__syncwarp();
		} else {
			acc = (long long *)mem + (t / 32) * NC;
			cnt = (int *)((long long *)mem + (THREADS / 32) * NC) + (t / 32) * NC;
			for (unsigned i = t % 32; i < NC; i += 32) {
				cnt[i] = 0;
				acc[i] = 0;
			}
			__syncwarp();
		}
	}

	/* One batch of NV vectors a lane into st (or the groups, or the
	 * digits): bins::batch's steps with the wide path behind them. */
	template <unsigned NV, int FB>
	__device__ __forceinline__ void batch(bins<T, FB> &st, const uint4 (&v)[NV],
					      long long *digits, unsigned lane)
	{
		uint32_t kmax, kmin;
		st.template keys<NV>(v, kmax, kmin);
		if (!st.prepare(digits, lane, kmax, kmin)) {
			st.template add_fast<NV>(v);
			st.settle(false);
			return;
		}
		slow<NV>(st, v, digits, lane, kmax, kmin);
	}

	/* The rest of batch() where st.prepare found the batch outside the
	 * fast path's window (kmax, kmin: the lane's keys, bins::keys; the
	 * moments kernel comes in here with its own fast path) */
	template <unsigned NV, int FB>
	__device__ __forceinline__ void slow(bins<T, FB> &st, const uint4 (&v)[NV],
					     long long *digits, unsigned lane, uint32_t kmax,
					     uint32_t kmin)
	{
		static_assert(NV <= GROUP, "CNT_FLUSH's bound");
		/* the bins that take what they can on the later steps */
		constexpr int KB = W == WIDE ? FB : WT::MB;
		/* (squares: and where an element's square is not p + e) */
		if (__any_sync(FULL, kmax >= WT::SPECIAL ||
					     (WT::SQ_GROUPS && (kmax >= SQ_KEY_HI || kmin < SQ_KEY_LO)) ||
					     (WT::SQ_SPLIT && (kmax >= SQD_KEY_HI || kmin < SQD_KEY_LO)))) {
			st.template add_careful<NV>(v, digits);
			st.settle(true);
			return;
		}
		const uint32_t tk = st.tlo(KB), thi = st.thi;
		/* (a middle tier no wider than the fast path's has nothing
		 * to take; an f64's square's window is its own, step 5) */
		if constexpr (W != WIDE && WT::MB > FB && !WT::SQ_SPLIT) {
			if (!__any_sync(FULL, kmin < tk || kmax > thi)) {
#pragma unroll
				for (unsigned g = 0; g < NV; g++)
#pragma unroll
					for (unsigned i = 0; i < TR::V; i++)
						st.template fast_k<KB>(TR::value(v[g], i));
				st.settle(true);
				return;
			}
		}
		if constexpr (WT::GROUPS) {
#pragma unroll
			for (unsigned g = 0; g < NV; g++)
#pragma unroll
				for (unsigned i = 0; i < TR::V; i++) {
					const uint32_t w = TR::word(v[g], i);
					double *p = slot + ((w >> 27) & 15u) * THREADS;
					*p += (double)__uint_as_float(w);
				}
			if (++nb == G_FLUSH)
				flush_groups(digits, lane);
		} else if constexpr (WT::SQ_GROUPS) {
			sq_groups<NV>(v, digits, lane);
		} else if constexpr (WT::SQ_SPLIT) {
			sq_split<NV, KB>(st, v, digits, lane);
		} else {
			if constexpr (W == WIDE_MID) {
				/* fewer than half the warp's elements in the middle
				 * tier's window (spread data): every element into
				 * the counters, where the bins' predicated adds would
				 * cost the whole warp for a few lanes */
				unsigned nin = 0;
#pragma unroll
				for (unsigned g = 0; g < NV; g++)
#pragma unroll
					for (unsigned i = 0; i < TR::V; i++)
						nin += TR::nzkey(v[g], i) - 1 >= tk && TR::key(v[g], i) <= thi;
				if (2 * __reduce_add_sync(FULL, nin) < 32 * NV * TR::V) {
#pragma unroll
					for (unsigned g = 0; g < NV; g++)
#pragma unroll
						for (unsigned i = 0; i < TR::V; i++)
							deposit_counters(cnt, TR::value(v[g], i));
					if (++nb == CNT_FLUSH)
						flush_counters(lane);
					return;
				}
			}
#pragma unroll
			for (unsigned g = 0; g < NV; g++)
#pragma unroll
				for (unsigned i = 0; i < TR::V; i++) {
					const double x = TR::value(v[g], i);
					const bool in = TR::nzkey(v[g], i) - 1 >= tk &&
							TR::key(v[g], i) <= thi;
					if (in)
						st.template fast_k<KB>(x);
					if constexpr (MATCH) {
						if (__any_sync(FULL, !in))
							deposit_warp(wd, x, in, lane);
					} else if (!in) {
						deposit_counters(cnt, x);
					}
				}
			st.settle(true);
			if constexpr (!MATCH)
				if (++nb == CNT_FLUSH)
					flush_counters(lane);
		}
	}

	/* Step 3 for f32 squares, every element 0 or within SQ_KEY_LO and
	 * SQ_KEY_HI: p and e into the groups (0 adds nothing to group 0) */
	template <unsigned NV>
	__device__ __forceinline__ void sq_groups(const uint4 (&v)[NV], long long *digits,
					       unsigned lane)
	{
#pragma unroll
		for (unsigned g = 0; g < NV; g++)
#pragma unroll
			for (unsigned i = 0; i < TR::V; i++)
				sq_group_add(__uint_as_float(traits<float>::word(v[g], i)));
		sq_groups_end(digits, lane);
	}

	/* sq_groups in parts, for a caller that interleaves other work with
	 * it (moments): an element x of the batch, and the batch's end */
	__device__ __forceinline__ void sq_group_add(float x)
	{
		const float p = __fmul_rn(x, x);
		const float e = __fmaf_rn(x, x, -p);
		slot[(__float_as_uint(p) >> 27) * THREADS] += (double)p;
		slot[((__float_as_uint(e) >> 27) & 15u) * THREADS] += (double)e;
	}
	__device__ __forceinline__ void sq_groups_end(long long *digits, unsigned lane)
	{
		if (++nb == G_FLUSH)
			flush_groups(digits, lane);
	}

	/* Step 5, an f64's squares, every element 0 or within SQD_KEY_LO and
	 * SQD_KEY_HI: p and e each into the first KB bins where it is a
	 * multiple of the last one's last place (as an f64 element in the
	 * middle tier: at least 2^b(KB-1), below 2^E), into the counters
	 * where not. Bin 0 takes two doubles an element below 2^E, 2^(E + 5)
	 * a batch against its 2^(E + 15) of headroom; a deeper bin takes the
	 * residuals of the bin above, below 2^(bj - 13) each, as before. */
	template <unsigned NV, int KB, int FB>
	__device__ __forceinline__ void sq_split(bins<T, FB> &st, const uint4 (&v)[NV],
					       long long *digits, unsigned lane)
	{
		const uint32_t tk =
			traits<double>::key_exact(bins<T, FB>::bexp(st.e, KB - 1)) - 1;
#pragma unroll
		for (unsigned g = 0; g < NV; g++)
#pragma unroll
			for (unsigned i = 0; i < TR::V; i++) {
				const double x = TR::value(v[g], i);
				const double p = __dmul_rn(x, x), e = __fma_rn(x, x, -p);
				if (dkey(p) - 1 >= tk)
					st.template fast_k<KB>(p);
				else
					deposit_counters(cnt, p);
				if (dkey(e) - 1 >= tk)
					st.template fast_k<KB>(e);
				else
					deposit_counters(cnt, e);
			}
		st.settle(true);
		if (++nb == CNT_FLUSH)
			flush_counters(lane);
	}

	/* The counters into their sums, emptied: the warp's own, each
	 * lane's counters its own, so plain loads and stores (a warp takes
	 * fewer than 2^40 elements, each at most two pieces of a counter
	 * below 2^CP: the sums stay within 2^61) */
	__device__ __forceinline__ void flush_counters(unsigned lane)
	{
		__syncwarp();
		for (unsigned c = lane; c < NC; c += 32) {
			acc[c] += cnt[c];
			cnt[c] = 0;
		}
		__syncwarp();
		nb = 0;
	}

	/* The groups into the digits, emptied (f32) */
	__device__ __forceinline__ void flush_groups(long long *digits, unsigned lane)
	{
		if constexpr (WT::GROUPS || WT::SQ_GROUPS) {
#pragma unroll
			for (int g = 0; g < NG; g++) {
				const double v = slot[g * THREADS];
				if (!__any_sync(FULL, v != 0))
					continue;
				slot[g * THREADS] = 0;
				/* an integer of q = 2^(16 g - 150), |i| < 2^53 */
				long long i = __double2ll_rn(v * pow2(150 - 16 * g));
#pragma unroll
				for (int m = 16; m; m >>= 1)
					i += __shfl_xor_sync(FULL, i, m);
				if (lane == 0 && i)
					deposit_int(digits, i < 0 ? -(uint64_t)i : (uint64_t)i, i < 0,
						    (unsigned)(16 * g - 150 - GR_EXACT_LSB_EXP));
			}
		}
		nb = 0;
	}

	/* At the warp's end: what the groups or the warp's digits hold into
	 * the block's digits, the counters into their sums (the bins are the
	 * caller's to flush) */
	__device__ __forceinline__ void finish(long long *digits, unsigned lane)
	{
		if constexpr (WT::GROUPS || WT::SQ_GROUPS) {
			if (nb)
				flush_groups(digits, lane);
		} else if constexpr (MATCH) {
			__syncwarp();
			for (unsigned i = lane; i < GR_EXACT_DIGITS; i += 32)
				if (wd[i])
					atomicAdd((unsigned long long *)&digits[i],
						  (unsigned long long)wd[i]);
		} else {
			if (nb)
				flush_counters(lane);
		}
	}

	/* At the block's end, after every warp's finish() and a barrier
	 * (COUNTERS alone): the warps' counters' sums, counter by counter,
	 * into the block's digits, one deposit a counter (the block's sum of
	 * one stays within 2^63: a block takes fewer than 2^42 elements) */
	__device__ __forceinline__ void finish_block(long long *digits, unsigned t) const
	{
		static_assert(COUNTERS, "the counters' form");
		const long long *all = acc - (t / 32) * NC;
		for (unsigned c = t; c < NC; c += THREADS) {
			long long a = 0;
#pragma unroll
			for (unsigned w = 0; w < THREADS / 32; w++)
				a += all[w * NC + c];
			if (a)
				deposit_int(digits, a < 0 ? -(uint64_t)a : (uint64_t)a, a < 0, c * CP);
		}
	}
};

} /* namespace gre */
