/*
 * The reduction kernel's device code, templated over element type and op.
 * kernel.h explains the order in which elements are combined; everything
 * here keeps to it, so that floats come out bit for bit the same however a
 * segment is launched. Included by kernel.cu and by the kernel benchmark
 * and tests, which instantiate the single-array kernel directly.
 *
 * The template parameters past element type and op (rows in flight, the
 * ticket's fence, the plain fold, the small form) and the unit geometry
 * are knobs for the kernel benchmark's sweeps; their defaults (GROUP,
 * GEOMETRY, BLOCKS_PER_SM, the sequentially consistent fence, the fast
 * fold) are what the daemon runs, and all that kernel.cu instantiates.
 * bench/cuda/kernel-bench.cu instantiates the settings it sweeps itself,
 * and the kernel test those it checks against the defaults.
 */
#pragma once

#include <cstdint>
#include <cuda/std/limits>
#include <type_traits>

#include "cuda/kernel-red.cuh"
#include "cuda/kernel.h"

namespace grk {

/* Rows a warp loads before it folds them: enough bytes in flight per warp
 * to cover memory latency with a few warps per SM. */
constexpr unsigned GROUP = 8;

/* The 16 bytes at byte offset off (1..15) of the 32 bytes a:b. */
static __device__ __forceinline__ uint4 realign(uint4 a, uint4 b, unsigned off)
{
	uint32_t w0 = a.x, w1 = a.y, w2 = a.z, w3 = a.w, w4 = b.x, w5 = b.y, w6 = b.z, w7 = b.w;
	if (off & 8) {
		w0 = w2; w1 = w3; w2 = w4; w3 = w5; w4 = w6; w5 = w7;
	}
	if (off & 4) {
		w0 = w1; w1 = w2; w2 = w3; w3 = w4; w4 = w5;
	}
	unsigned s = (off & 3) * 8;
	uint4 r;
	r.x = __funnelshift_r(w0, w1, s);
	r.y = __funnelshift_r(w1, w2, s);
	r.z = __funnelshift_r(w2, w3, s);
	r.w = __funnelshift_r(w3, w4, s);
	return r;
}

static __device__ __forceinline__ uint4 shfl_down4(uint4 v)
{
	uint4 r;
	r.x = __shfl_down_sync(FULL, v.x, 1);
	r.y = __shfl_down_sync(FULL, v.y, 1);
	r.z = __shfl_down_sync(FULL, v.z, 1);
	r.w = __shfl_down_sync(FULL, v.w, 1);
	return r;
}

/* The elements of a 16-byte vector. */
template <typename T> struct vec_elems {
	T e[16 / sizeof(T)];
};
template <typename T> static __device__ __forceinline__ vec_elems<T> unpack(uint4 v)
{
	union {
		uint4 u;
		vec_elems<T> l;
	} x;
	x.u = v;
	return x.l;
}

/* in[0..N) combined pairwise with f, in the fixed order
 * (0 f 1) f (2 f 3) ... (N a power of two). */
template <unsigned N, typename T, typename F>
static __device__ __forceinline__ T pairwise(const T (&in)[N], F f)
{
	T c[N];
#pragma unroll
	for (unsigned k = 0; k < N; k++)
		c[k] = in[k];
#pragma unroll
	for (unsigned h = 1; h < N; h *= 2)
#pragma unroll
		for (unsigned k = 0; k + h < N; k += 2 * h)
			c[k] = f(c[k], c[k + h]);
	return c[0];
}

/*
 * How a lane folds its elements (lane_fold's MODE). SPLIT (sums, and
 * integer min and max): one accumulator for each place in a vector, each
 * taking the elements at its place row after row, which meet pairwise at
 * the end; a sum's order is then still fixed by the segment's length
 * alone, with a dependent chain a quarter (f32, i32) or half (f64) as
 * long. ORDERED: one accumulator, element after element; every op takes
 * it when asked to fold the plain way (for comparison). VALUES (float min
 * and max): see lane_fold<T, OP, VALUES>.
 */
enum { ORDERED, SPLIT, VALUES };

template <typename T, int OP, bool PLAIN>
constexpr int fold_mode = PLAIN ? ORDERED : red<T, OP>::keyed ? VALUES : SPLIT;

/* A lane's fold: vectors (or, past the fast part, single elements with
 * their place k in the vector) in, then done() gives the lane's L for the
 * butterfly. */
template <typename T, int OP, int MODE> struct lane_fold {
	using R = red<T, OP>;
	static constexpr unsigned V = 16 / sizeof(T), N = MODE == SPLIT ? V : 1;
	typename R::L a[N];

	__device__ __forceinline__ lane_fold()
	{
#pragma unroll
		for (unsigned k = 0; k < N; k++)
			a[k] = R::lident();
	}
	__device__ __forceinline__ void elem(T x, unsigned k)
	{
		a[k % N] = R::lelem(a[k % N], x);
	}
	__device__ __forceinline__ void vec(uint4 v)
	{
		const vec_elems<T> x = unpack<T>(v);
#pragma unroll
		for (unsigned k = 0; k < V; k++)
			a[k % N] = R::lelem(a[k % N], x.e[k]);
	}
	__device__ __forceinline__ typename R::L done() const
	{
		return pairwise<N>(a, [](typename R::L x, typename R::L y) { return R::lcomb(x, y); });
	}
};

/*
 * Float min and max compared as floats: per element one compare and
 * select (fminf/fmaxf for f32) into the accumulator of its place in the
 * vector, which starts at the op's identity, and beside them, for each
 * pair of places, whether any element was NaN (one test a pair) and the
 * sign bits of all of them, ORed for min, ANDed for max (one operation a
 * pair). done() gives exactly the key that the elements' own keys would
 * have: with a NaN, the NaN key; otherwise the least (greatest) value,
 * whose bits are the only ones it can have, since equal floats differ
 * only as -0 and +0. A zero result takes its sign from the sign bits: for
 * min every element is >= 0 then, so a set sign bit is a -0's; for max
 * every element is <= 0, so a clear one is a +0's. A lane with no element
 * gives lident, as the keys do. (The compares need denormals kept, as the
 * sums do: no -ftz.)
 */
template <typename T, int OP> struct lane_fold<T, OP, VALUES> {
	using R = red<T, OP>;
	static constexpr unsigned V = 16 / sizeof(T), P = V / 2;
	T v[V];
	uint32_t sg[P];
	bool nan[P], seen = false;

	__device__ __forceinline__ lane_fold()
	{
#pragma unroll
		for (unsigned k = 0; k < V; k++)
			v[k] = (T)R::ident();
#pragma unroll
		for (unsigned k = 0; k < P; k++) {
			sg[k] = OP == MIN ? 0u : ~0u;
			nan[k] = false;
		}
	}
	static __device__ __forceinline__ T pick(T a, T x)
	{
		if constexpr (sizeof(T) == 4)
			return OP == MIN ? fminf(a, x) : fmaxf(a, x);
		else
			return OP == MIN ? (x < a ? x : a) : (x > a ? x : a);
	}
	static __device__ __forceinline__ uint32_t signs(uint32_t s, uint32_t a, uint32_t b)
	{
		return OP == MIN ? s | a | b : s & a & b;
	}
	static __device__ __forceinline__ uint32_t sign_word(T x)
	{
		if constexpr (sizeof(T) == 4)
			return __float_as_uint((float)x);
		else
			return (uint32_t)__double2hiint((double)x);
	}

	__device__ __forceinline__ void elem(T x, unsigned)
	{
		seen = true;
		nan[0] |= x != x;
		v[0] = pick(v[0], x);
		sg[0] = signs(sg[0], sign_word(x), sign_word(x));
	}
	__device__ __forceinline__ void vec(uint4 w)
	{
		const vec_elems<T> x = unpack<T>(w);
		seen = true;
#pragma unroll
		for (unsigned k = 0; k < V; k += 2) {
			/* unordered: either is NaN */
			nan[k / 2] |= !(x.e[k] == x.e[k] && x.e[k + 1] == x.e[k + 1]);
			v[k] = pick(v[k], x.e[k]);
			v[k + 1] = pick(v[k + 1], x.e[k + 1]);
			sg[k / 2] = signs(sg[k / 2], sign_word(x.e[k]), sign_word(x.e[k + 1]));
		}
	}
	__device__ __forceinline__ typename R::L done() const
	{
		T m = pairwise<V>(v, [](T x, T y) { return pick(x, y); });
		uint32_t s = sg[0];
		bool n = nan[0];
#pragma unroll
		for (unsigned k = 1; k < P; k++) {
			s = signs(s, sg[k], sg[k]);
			n |= nan[k];
		}
		/* m is not NaN: pick never takes one over a number */
		if (m == (T)0) {
			if constexpr (sizeof(T) == 4)
				m = __uint_as_float(s & 0x80000000u);
			else
				m = __longlong_as_double(
					(long long)((unsigned long long)(s & 0x80000000u) << 32));
		}
		return !seen ? R::lident() : n ? R::nankey() : R::nkey(m);
	}
};

template <typename T>
static __device__ __forceinline__ T load_any(const unsigned char *p)
{
	/* any byte alignment: assemble from bytes */
	union {
		unsigned char c[sizeof(T)];
		T v;
	} x;
#pragma unroll
	for (unsigned i = 0; i < sizeof(T); i++)
		x.c[i] = p[i];
	return x.v;
}

/* The unit's first row at or past rfast, from r, its first row that the
 * fast loop left (at most M of its rows, r, r + su, ..., lie below
 * rfast): the compares do not wait on one another, as a chain of
 * conditional adds would. */
template <unsigned M>
static __device__ __forceinline__ uint64_t past_fast(uint64_t r, uint64_t su, uint64_t rfast)
{
	unsigned k = 0;
#pragma unroll
	for (unsigned g = 0; g < M; g++)
		k += r + g * su < rfast;
	return r + k * su;
}

/*
 * Unit u of `units`: rows u, u + units, u + 2 units, ... of a segment of n
 * elements at seg, folded into this lane's L (before the warp's
 * butterfly). Interleaving the units' rows keeps the whole GPU reading one
 * narrow window of memory at a time, as a grid-stride loop does. Rows are
 * loaded G at a time, the last few of the fast part under a predicate
 * rather than one by one, and the loop bounds need no 64-bit division.
 * PLAIN folds every op into one accumulator (ORDERED), for comparison;
 * ALIGNED promises a segment that starts on 16 bytes, and leaves out the
 * code for any other start.
 */
template <typename T, int OP, unsigned G = GROUP, bool PLAIN = false, bool ALIGNED = false>
static __device__ __forceinline__ typename red<T, OP>::L
unit_fold(const unsigned char *seg, uint64_t n, uint32_t u, uint32_t units, unsigned lane)
{
	constexpr unsigned V = 16 / sizeof(T);
	const uint64_t bytes = n * sizeof(T);
	const unsigned off = ALIGNED ? 0u : (unsigned)((uintptr_t)seg & 15u);
	const uint4 *vb = (const uint4 *)(seg - off);
	const uint64_t rows = (bytes + GR_KERNEL_ROW_BYTES - 1) / GR_KERNEL_ROW_BYTES;
	/* rows whose vectors (and, when misaligned, the one after them)
	 * lie inside the segment: a prefix of this unit's rows */
	const uint64_t rfast = off == 0 ? bytes / GR_KERNEL_ROW_BYTES
			     : (bytes + off >= 16 ? (bytes + off - 16) / GR_KERNEL_ROW_BYTES : 0);
	const uint64_t su = units;
	const uint4 *ub = vb + lane;
	lane_fold<T, OP, fold_mode<T, OP, PLAIN>> f;
	uint64_t r = u;

	if (off == 0) {
		for (; r + (G - 1) * su < rfast; r += G * su) {
			uint4 v[G];
#pragma unroll
			for (unsigned g = 0; g < G; g++)
				v[g] = __ldg(ub + 32 * (r + g * su));
#pragma unroll
			for (unsigned g = 0; g < G; g++)
				f.vec(v[g]);
		}
		if (r < rfast) {
			uint4 v[G - 1];
#pragma unroll
			for (unsigned g = 0; g < G - 1; g++)
				v[g] = r + g * su < rfast ? __ldg(ub + 32 * (r + g * su)) : make_uint4(0, 0, 0, 0);
#pragma unroll
			for (unsigned g = 0; g < G - 1; g++)
				if (r + g * su < rfast)
					f.vec(v[g]);
			r = past_fast<G - 1>(r, su, rfast);
		}
	} else {
		/* lane 31 also needs the vector after its own (and twice the
		 * registers: at most 8 rows at once) */
		constexpr unsigned GM = G < 8 ? G : 8;
		const uint4 *xb = vb + 32;
		for (; r + (GM - 1) * su < rfast; r += GM * su) {
			uint4 v[GM], x[GM];
#pragma unroll
			for (unsigned g = 0; g < GM; g++) {
				v[g] = __ldg(ub + 32 * (r + g * su));
				x[g] = lane == 31 ? __ldg(xb + 32 * (r + g * su)) : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (unsigned g = 0; g < GM; g++) {
				uint4 nx = shfl_down4(v[g]);
				if (lane == 31)
					nx = x[g];
				f.vec(realign(v[g], nx, off));
			}
		}
		if (r < rfast) {
			uint4 v[GM - 1], x[GM - 1];
#pragma unroll
			for (unsigned g = 0; g < GM - 1; g++) {
				bool in = r + g * su < rfast;
				v[g] = in ? __ldg(ub + 32 * (r + g * su)) : make_uint4(0, 0, 0, 0);
				x[g] = in && lane == 31 ? __ldg(xb + 32 * (r + g * su)) : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (unsigned g = 0; g < GM - 1; g++) {
				/* the same for the whole warp: the shuffle sees all lanes */
				if (r + g * su < rfast) {
					uint4 nx = shfl_down4(v[g]);
					if (lane == 31)
						nx = x[g];
					f.vec(realign(v[g], nx, off));
				}
			}
			r = past_fast<GM - 1>(r, su, rfast);
		}
	}
	/* the rest (r is past the fast part), element by element in the same
	 * order */
	for (; r < rows; r += su) {
		uint64_t j0 = (r * 32 + lane) * V;
#pragma unroll
		for (unsigned e = 0; e < V; e++)
			if (j0 + e < n)
				f.elem(load_any<T>(seg + (j0 + e) * sizeof(T)), e);
	}
	return f.done();
}

/*
 * `count` partials combined by one warp: lane l folds partials l, l + 32,
 * ... in order, then the fixed butterfly; lane 0 has the result (the
 * butterfly leaves out the steps that would meet only lanes with no
 * partial: lwarp's live). A lane loads a few at once.
 */
template <bool SHARED>
static __device__ __forceinline__ uint64_t load_partial(const uint64_t *p)
{
	/* global partials come from other SMs: past L1 */
	if constexpr (SHARED)
		return *p;
	else
		return __ldcg((const unsigned long long *)p);
}

template <typename T, int OP, bool SHARED = false>
static __device__ __forceinline__ typename red<T, OP>::L combine(const uint64_t *partials,
								  uint32_t count, unsigned lane)
{
	using R = red<T, OP>;
	constexpr unsigned B = 4;
	typename R::L c = R::lident();
	uint32_t i = lane;
	for (; i + 32 * (B - 1) < count; i += 32 * B) {
		uint64_t p[B];
#pragma unroll
		for (unsigned g = 0; g < B; g++)
			p[g] = load_partial<SHARED>(partials + i + 32 * g);
#pragma unroll
		for (unsigned g = 0; g < B; g++)
			c = R::lcomb(c, R::lunbits(p[g]));
	}
	uint64_t p[B];
#pragma unroll
	for (unsigned g = 0; g < B; g++)
		p[g] = i + 32 * g < count ? load_partial<SHARED>(partials + i + 32 * g) : 0;
#pragma unroll
	for (unsigned g = 0; g < B; g++)
		if (i + 32 * g < count)
			c = R::lcomb(c, R::lunbits(p[g]));
	return R::lwarp(c, count);
}

/* Units are combined in groups of this many (a block's warps in the
 * single-array kernel), then the groups' partials. */
constexpr uint32_t CGROUP = GR_KERNEL_WARPS_PER_BLOCK;

/*
 * What combine<T, OP, true>(sp, count, lane) gives lane 0, for count <=
 * CGROUP, without shuffles: each lane folds the partials itself, pair by
 * pair as the butterfly would meet them (lane k with lane k + m at step
 * m), leaving out the same steps (lwarp's live).
 */
template <typename T, int OP>
static __device__ __forceinline__ typename red<T, OP>::L combine_few(const uint64_t *sp,
								      uint32_t count)
{
	using R = red<T, OP>;
	typename R::L c[CGROUP];
#pragma unroll
	for (unsigned k = 0; k < CGROUP; k++)
		c[k] = k < count ? R::lcomb(R::lident(), R::lunbits(sp[k])) : R::lident();
#pragma unroll
	for (unsigned m = CGROUP / 2; m; m >>= 1)
		if (m < count)
#pragma unroll
			for (unsigned k = 0; k < m; k++)
				c[k] = R::lcomb(c[k], c[k + m]);
	return c[0];
}

/*
 * The fence on either side of a ticket: __threadfence (a sequentially
 * consistent fence), or, where ACQREL, the lighter acquire-release fence,
 * which is all that publishing partials through a relaxed atomic needs.
 */
template <bool ACQREL> static __device__ __forceinline__ void ticket_fence()
{
	if constexpr (ACQREL)
		asm volatile("fence.acq_rel.gpu;" ::: "memory");
	else
		__threadfence();
}

/* Whether this warp arrived last at a ticket of `of` arrivals; lane 0
 * published its writes before it took the ticket. */
static __device__ __forceinline__ bool arrive_last(uint32_t *ticket, uint32_t of, unsigned lane)
{
	unsigned last = 0;
	if (lane == 0) {
		__threadfence();
		last = atomicAdd(ticket, 1u) == of - 1;
	}
	last = __shfl_sync(FULL, last, 0);
	if (last)
		__threadfence();
	return last;
}

/*
 * One warp's share of a segment in the batch kernel: unit u of units.
 * partials has room for 2 * units values (unit partials, then group
 * partials); ticket is the segment's, gtickets one per group. Up to
 * CGROUP units, the last warp to finish combines every unit partial; past
 * that, the last of each group of CGROUP units combines its group, and
 * the last group the groups' partials. Counters go back to zero as they
 * are used up.
 */
template <typename T, int OP>
static __device__ __forceinline__ void seg_unit(const unsigned char *seg, uint64_t n,
						uint32_t units, uint32_t u, uint64_t *partials,
						uint32_t *ticket, uint32_t *gtickets, uint64_t *out,
						unsigned lane)
{
	using R = red<T, OP>;
	typename R::L acc = R::lwarp(unit_fold<T, OP>(seg, n, u, units, lane));
	if (units == 1) {
		if (lane == 0)
			*out = R::bits(R::lfinish(acc));
		return;
	}
	if (lane == 0)
		partials[u] = R::lbits(acc);
	if (units <= CGROUP) {
		if (!arrive_last(ticket, units, lane))
			return;
		typename R::L c = combine<T, OP>(partials, units, lane);
		if (lane == 0) {
			*out = R::bits(R::lfinish(c));
			*ticket = 0;
		}
		return;
	}
	uint32_t g = u / CGROUP, ngroups = (units + CGROUP - 1) / CGROUP;
	uint32_t gs = units - g * CGROUP < CGROUP ? units - g * CGROUP : CGROUP;
	if (!arrive_last(gtickets + g, gs, lane))
		return;
	typename R::L c = combine<T, OP>(partials + g * CGROUP, gs, lane);
	if (lane == 0) {
		partials[units + g] = R::lbits(c);
		gtickets[g] = 0;
	}
	if (!arrive_last(ticket, ngroups, lane))
		return;
	c = combine<T, OP>(partials + units, ngroups, lane);
	if (lane == 0) {
		*out = R::bits(R::lfinish(c));
		*ticket = 0;
	}
}

/* Group partials the last block of the single-array kernel gathers into
 * shared memory with all its threads before one warp combines them. */
constexpr uint32_t SGATHER = 1024;

/*
 * The single-array kernel: block b reduces groups b, b + blocks, ... of
 * CGROUP units, one unit per warp, and combines its group in shared
 * memory exactly as the batch kernel's last warp of the group would. One
 * group (units <= CGROUP) is the whole answer, with no ticket at all;
 * otherwise the group partials meet through one ticket, and the last
 * block to arrive combines them in the batch kernel's order.
 *
 * SMALL is the form for one group of data that starts on 16 bytes, in
 * one block (the launcher picks it): the same arithmetic without the
 * ticket's code or unit_fold's for other starts. For an f32 sum that is
 * a third of the machine code and 80 registers rather than 127.
 */
template <typename T, int OP, unsigned G = GROUP, bool ACQREL = false, bool PLAIN = false,
	  bool SMALL = false>
__global__ void __launch_bounds__(256, 2)
single_kernel(const unsigned char *data, uint64_t n, uint32_t units, uint64_t *partials,
	      uint32_t *ticket, uint64_t *out)
{
	using R = red<T, OP>;
	__shared__ uint64_t sp[SMALL ? CGROUP : SGATHER];
	__shared__ unsigned last;
	const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const uint32_t ngroups = SMALL ? 1 : (units + CGROUP - 1) / CGROUP;
	for (uint32_t g = blockIdx.x; g < ngroups; g += gridDim.x) {
		uint32_t u = g * CGROUP + warp;
		if (u < units) {
			typename R::L a =
				R::lwarp(unit_fold<T, OP, G, PLAIN, SMALL>(data, n, u, units, lane));
			if (lane == 0)
				sp[warp] = R::lbits(a);
		}
		__syncthreads();
		if (warp == 0) {
			uint32_t gs = units - g * CGROUP < CGROUP ? units - g * CGROUP : CGROUP;
			typename R::L c = units == 1 ? R::lunbits(sp[0]) : combine_few<T, OP>(sp, gs);
			if (ngroups == 1) {
				if (lane == 0)
					*out = R::bits(R::lfinish(c));
			} else if (lane == 0) {
				partials[g] = R::lbits(c);
				ticket_fence<ACQREL>();
				last = atomicAdd(ticket, 1u) == ngroups - 1;
			}
		}
		/* one group: its store was the answer, and no block waits */
		if (ngroups == 1)
			return;
		__syncthreads();
		if (last) {
			ticket_fence<ACQREL>();
			typename R::L c = R::lident();
			if (ngroups <= SGATHER) {
				for (uint32_t i = threadIdx.x; i < ngroups; i += blockDim.x)
					sp[i] = __ldcg((const unsigned long long *)partials + i);
				__syncthreads();
				if (warp == 0)
					c = combine<T, OP, true>(sp, ngroups, lane);
			} else if (warp == 0) {
				c = combine<T, OP>(partials, ngroups, lane);
			}
			if (threadIdx.x == 0) {
				*out = R::bits(R::lfinish(c));
				*ticket = 0;
			}
		}
		__syncthreads();
	}
}

/* Rows per unit for a segment of n elements of size bytes, with the
 * unit geometry's knobs: up to small_rows rows the units (small_rmin
 * rows or more) are made few enough (CGROUP at most) for one block with
 * no ticket; past that they start at rmin rows and double until there
 * are at most umax units (up to rmax rows a unit: so up to 2^22 rows,
 * 2 GiB, take at most 2048 units, 256 blocks, one wave on an H200). */
struct geometry {
	uint32_t rmin, umax, small_rows, small_rmin, rmax;
};
constexpr geometry GEOMETRY = { 8, 2048, 128, 8, 2048 };

static inline uint32_t unit_rows_of(uint64_t n, size_t size, geometry G)
{
	uint64_t rows = (n * size + GR_KERNEL_ROW_BYTES - 1) / GR_KERNEL_ROW_BYTES;
	uint32_t r;
	if (rows <= G.small_rows) {
		for (r = G.small_rmin; (uint64_t)r * CGROUP < rows; r <<= 1)
			;
		return r;
	}
	for (r = G.rmin; r < G.rmax && rows > (uint64_t)r * G.umax; r <<= 1)
		;
	return r;
}

static inline uint64_t units_of(uint64_t n, size_t size, geometry G)
{
	uint64_t rows = (n * size + GR_KERNEL_ROW_BYTES - 1) / GR_KERNEL_ROW_BYTES;
	uint32_t r = unit_rows_of(n, size, G);
	return (rows + r - 1) / r;
}

/* Blocks per SM the single-array kernel is given at most: as many as
 * __launch_bounds__ keeps resident, so that every group is read in one
 * wave and no block waits for another to leave. */
constexpr unsigned BLOCKS_PER_SM = 2;

/* Blocks for a launch of `warps` warps: all resident at once at most. */
static inline unsigned grid_blocks(uint64_t warps, int sm_count, unsigned per_sm = BLOCKS_PER_SM)
{
	uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * per_sm;
	uint64_t b = (warps + GR_KERNEL_WARPS_PER_BLOCK - 1) / GR_KERNEL_WARPS_PER_BLOCK;
	return (unsigned)(b < cap ? b : cap);
}

/* The single-array kernel for `units` units (units_of(n, sizeof(T), G)),
 * G rows in flight per lane, ACQREL the ticket's fences (ticket_fence),
 * PLAIN every op folded into one accumulator (unit_fold); its SMALL form
 * where that fits, unless `general`. */
template <typename T, int OP, unsigned G = GROUP, bool ACQREL = false, bool PLAIN = false>
static inline cudaError_t launch_single_units(const void *data, uint64_t n, uint32_t units,
					      uint64_t *partials, uint32_t *ticket, uint64_t *out,
					      int sm_count, unsigned per_sm, cudaStream_t stream,
					      bool general = false)
{
	const unsigned char *p = (const unsigned char *)data;
	if (!general && units <= CGROUP && ((uintptr_t)data & 15u) == 0)
		single_kernel<T, OP, G, ACQREL, PLAIN, true><<<1, 256, 0, stream>>>(
			p, n, units, partials, ticket, out);
	else
		single_kernel<T, OP, G, ACQREL, PLAIN><<<grid_blocks(units, sm_count, per_sm), 256, 0,
							 stream>>>(p, n, units, partials, ticket, out);
	return cudaGetLastError();
}

template <typename T, int OP>
static inline cudaError_t launch_single(const void *data, uint64_t n, uint64_t *partials,
					uint32_t *ticket, uint64_t *out, int sm_count,
					cudaStream_t stream)
{
	return launch_single_units<T, OP>(data, n, (uint32_t)units_of(n, sizeof(T), GEOMETRY),
					  partials, ticket, out, sm_count, BLOCKS_PER_SM, stream);
}

} /* namespace grk */
