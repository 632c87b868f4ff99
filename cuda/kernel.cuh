/*
 * The reduction kernel's device code, templated over element type and op.
 * kernel.h explains the order in which elements are combined; everything
 * here keeps to it, so that floats come out bit for bit the same however a
 * segment is launched. Included by kernel.cu and by the kernel benchmark
 * and tests, which instantiate the single-array kernel directly.
 */
#pragma once

#include <cstdint>
#include <cuda/std/limits>
#include <type_traits>

#include "cuda/kernel.h"

namespace grk {

/* gr_op's values */
enum { SUM = 0, MIN = 1, MAX = 2, SUMSQ = 3 };

constexpr unsigned FULL = 0xffffffffu;
/* Rows a warp loads before it folds them: enough bytes in flight per warp
 * to cover memory latency with a few warps per SM. */
constexpr unsigned GROUP = 8;

template <typename T, int OP> struct red {
	static constexpr bool fp = std::is_floating_point<T>::value || OP == SUMSQ;
	using A = typename std::conditional<
		fp, double,
		typename std::conditional<OP == SUM || !std::is_signed<T>::value,
					  unsigned long long, long long>::type>::type;

	static __device__ __forceinline__ A ident()
	{
		if constexpr (OP == SUM || OP == SUMSQ)
			return A(0);
		else if constexpr (fp)
			return OP == MIN ? __longlong_as_double(0x7ff0000000000000ll)
					 : __longlong_as_double((long long)0xfff0000000000000ull);
		else
			/* T's own limits, so that 32-bit values survive the
			 * narrowing in warp() */
			return OP == MIN ? (A)cuda::std::numeric_limits<T>::max()
					 : (A)cuda::std::numeric_limits<T>::lowest();
	}

	/* min/max of doubles: NaN wins, and -0 is below +0, so that the
	 * answer does not depend on the order the values meet in. */
	static __device__ __forceinline__ double fmin_(double a, double b)
	{
		if (a != a)
			return a;
		if (b != b)
			return b;
		if (a == b)
			return __double_as_longlong(a) < 0 ? a : b;
		return b < a ? b : a;
	}
	static __device__ __forceinline__ double fmax_(double a, double b)
	{
		if (a != a)
			return a;
		if (b != b)
			return b;
		if (a == b)
			return __double_as_longlong(a) < 0 ? b : a;
		return b > a ? b : a;
	}

	static __device__ __forceinline__ A comb(A a, A b)
	{
		if constexpr (OP == SUM || OP == SUMSQ)
			return a + b;
		else if constexpr (fp)
			return OP == MIN ? fmin_(a, b) : fmax_(a, b);
		else
			return OP == MIN ? (b < a ? b : a) : (b > a ? b : a);
	}

	static __device__ __forceinline__ A elem(A acc, T x)
	{
		if constexpr (OP == SUMSQ) {
			double d = (double)x;
			return fma(d, d, acc);
		} else if constexpr (OP == SUM && !fp) {
			/* widen signed values with their sign, then wrap */
			if constexpr (std::is_signed<T>::value)
				return acc + (A)(long long)x;
			else
				return acc + (A)x;
		} else {
			return comb(acc, (A)x);
		}
	}

	/*
	 * The lane accumulator while a unit is folded, cheaper than A where
	 * it can be: integer min/max in T itself; float min/max as integer
	 * keys that order -0 below +0 and put NaN first (for min) or last
	 * (for max), so that the answer is one compare per element and does
	 * not depend on the order values meet in; sums in A.
	 */
	static constexpr bool keyed = std::is_floating_point<T>::value && (OP == MIN || OP == MAX);
	using K = typename std::conditional<sizeof(T) == 4, int, long long>::type;
	using L = typename std::conditional<
		keyed, K, typename std::conditional<OP == MIN || OP == MAX, T, A>::type>::type;

	static __device__ __forceinline__ K key(T x)
	{
		constexpr int SH = (int)sizeof(T) * 8 - 1;
		constexpr K SIGN = (K)((unsigned long long)1 << SH);
		K b;
		if constexpr (sizeof(T) == 4)
			b = __float_as_int((float)x);
		else
			b = __double_as_longlong((double)x);
		if (x != x)
			return OP == MIN ? SIGN : (K)~SIGN;
		return b ^ ((b >> SH) & (K)~SIGN);
	}
	static __device__ __forceinline__ A unkey(K k)
	{
		constexpr int SH = (int)sizeof(T) * 8 - 1;
		constexpr K SIGN = (K)((unsigned long long)1 << SH);
		if (k == (OP == MIN ? SIGN : (K)~SIGN))
			return __longlong_as_double(0x7ff8000000000000ll);
		K b = k ^ ((k >> SH) & (K)~SIGN);
		if constexpr (sizeof(T) == 4)
			return (double)__int_as_float(b);
		else
			return __longlong_as_double(b);
	}

	static __device__ __forceinline__ L lident()
	{
		if constexpr (keyed)
			return OP == MIN ? cuda::std::numeric_limits<K>::max() : cuda::std::numeric_limits<K>::min();
		else if constexpr (OP == MIN || OP == MAX)
			return OP == MIN ? cuda::std::numeric_limits<T>::max() : cuda::std::numeric_limits<T>::lowest();
		else
			return ident();
	}
	static __device__ __forceinline__ L lelem(L acc, T x)
	{
		if constexpr (keyed) {
			K k = key(x);
			return OP == MIN ? (k < acc ? k : acc) : (k > acc ? k : acc);
		} else if constexpr (OP == MIN || OP == MAX) {
			return OP == MIN ? (x < acc ? x : acc) : (x > acc ? x : acc);
		} else {
			return elem(acc, x);
		}
	}
	/* a lane's accumulator as A (a lane that saw nothing gives ident) */
	static __device__ __forceinline__ A lfinish(L acc)
	{
		if constexpr (keyed)
			return acc == lident() ? ident() : unkey(acc);
		else
			return (A)acc;
	}

	static __device__ __forceinline__ uint64_t bits(A a)
	{
		if constexpr (fp)
			return (uint64_t)__double_as_longlong(a);
		else
			return (uint64_t)a;
	}
	static __device__ __forceinline__ A unbits(uint64_t u)
	{
		if constexpr (fp)
			return __longlong_as_double((long long)u);
		else
			return (A)u;
	}

	/* A fixed butterfly: every lane ends with the same bits. */
	static __device__ __forceinline__ A warp(A v)
	{
		if constexpr (!fp && sizeof(T) == 4 && (OP == MIN || OP == MAX)) {
			/* 32-bit values: the hardware's warp reduction */
			if constexpr (std::is_signed<T>::value) {
				int x = (int)v;
				x = OP == MIN ? __reduce_min_sync(FULL, x) : __reduce_max_sync(FULL, x);
				return (A)x;
			} else {
				unsigned x = (unsigned)v;
				x = OP == MIN ? __reduce_min_sync(FULL, x) : __reduce_max_sync(FULL, x);
				return (A)x;
			}
		} else {
#pragma unroll
			for (int m = 16; m; m >>= 1)
				v = comb(v, unbits((uint64_t)__shfl_xor_sync(FULL, (long long)bits(v), m)));
			return v;
		}
	}
};

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

template <typename T, int OP>
static __device__ __forceinline__ typename red<T, OP>::L fold16(typename red<T, OP>::L acc, uint4 v)
{
	constexpr unsigned V = 16 / sizeof(T);
	union {
		uint4 u;
		T e[V];
	} x;
	x.u = v;
#pragma unroll
	for (unsigned k = 0; k < V; k++)
		acc = red<T, OP>::lelem(acc, x.e[k]);
	return acc;
}

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

/*
 * Unit u of `units`: rows u, u + units, u + 2 units, ... of a segment of n
 * elements at seg, folded into this lane's accumulator (before the warp's
 * butterfly). Interleaving the units' rows keeps the whole GPU reading one
 * narrow window of memory at a time, as a grid-stride loop does.
 */
template <typename T, int OP>
static __device__ __forceinline__ typename red<T, OP>::A
unit_fold(const unsigned char *seg, uint64_t n, uint32_t u, uint32_t units, unsigned lane)
{
	using R = red<T, OP>;
	constexpr unsigned V = 16 / sizeof(T);
	const uint64_t bytes = n * sizeof(T);
	const unsigned off = (unsigned)((uintptr_t)seg & 15u);
	const uint4 *vb = (const uint4 *)(seg - off);
	const uint64_t rows = (bytes + GR_KERNEL_ROW_BYTES - 1) / GR_KERNEL_ROW_BYTES;
	/* rows whose vectors (and, when misaligned, the one after them)
	 * lie inside the segment: a prefix of this unit's rows */
	uint64_t rfast = off == 0 ? bytes / GR_KERNEL_ROW_BYTES
		       : (bytes + off >= 16 ? (bytes + off - 16) / GR_KERNEL_ROW_BYTES : 0);
	uint64_t kend = rows > u ? (rows - u + units - 1) / units : 0;
	uint64_t kfast = rfast > u ? (rfast - u + units - 1) / units : 0;
	const uint4 *ub = vb + 32 * (uint64_t)u + lane;
	const uint64_t step = 32 * (uint64_t)units;
	typename R::L acc = R::lident();
	uint64_t k = 0;

	if (off == 0) {
		for (; k + GROUP <= kfast; k += GROUP) {
			uint4 v[GROUP];
#pragma unroll
			for (unsigned g = 0; g < GROUP; g++)
				v[g] = __ldg(ub + (k + g) * step);
#pragma unroll
			for (unsigned g = 0; g < GROUP; g++)
				acc = fold16<T, OP>(acc, v[g]);
		}
		for (; k < kfast; k++)
			acc = fold16<T, OP>(acc, __ldg(ub + k * step));
	} else {
		/* lane 31 also needs the vector after its own */
		const uint4 *xb = vb + 32 * (uint64_t)u + 32;
		for (; k + GROUP <= kfast; k += GROUP) {
			uint4 v[GROUP], x[GROUP];
#pragma unroll
			for (unsigned g = 0; g < GROUP; g++) {
				v[g] = __ldg(ub + (k + g) * step);
				x[g] = lane == 31 ? __ldg(xb + (k + g) * step) : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (unsigned g = 0; g < GROUP; g++) {
				uint4 nx = shfl_down4(v[g]);
				if (lane == 31)
					nx = x[g];
				acc = fold16<T, OP>(acc, realign(v[g], nx, off));
			}
		}
		for (; k < kfast; k++) {
			uint4 v = __ldg(ub + k * step);
			uint4 x = lane == 31 ? __ldg(xb + k * step) : make_uint4(0, 0, 0, 0);
			uint4 nx = shfl_down4(v);
			if (lane == 31)
				nx = x;
			acc = fold16<T, OP>(acc, realign(v, nx, off));
		}
	}
	/* the rest, element by element in the same order */
	for (; k < kend; k++) {
		uint64_t j0 = (u + k * units) * 32 * V + (uint64_t)lane * V;
#pragma unroll
		for (unsigned e = 0; e < V; e++)
			if (j0 + e < n)
				acc = R::lelem(acc, load_any<T>(seg + (j0 + e) * sizeof(T)));
	}
	return R::lfinish(acc);
}

/*
 * The unit partials of a segment, combined by one warp: lane l folds
 * partials l, l + 32, ... in order, then the fixed butterfly. With
 * groups of 32 units a list is short: a lane loads a few at once.
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
static __device__ __forceinline__ typename red<T, OP>::A combine(const uint64_t *partials,
								  uint32_t units, unsigned lane)
{
	using R = red<T, OP>;
	/* min and max fold in the lane accumulator of their A (integer keys
	 * for doubles): a short dependent chain, and no order to keep */
	using RL = red<typename R::A, OP>;
	constexpr bool minmax = OP == MIN || OP == MAX;
	constexpr unsigned B = 4;
	/* integer lanes start from T's own limits (RL's would not survive
	 * the 32-bit narrowing in warp()); keyed lanes from the key limits */
	typename RL::L m;
	if constexpr (RL::keyed)
		m = RL::lident();
	else
		m = R::ident();
	typename R::A c = R::ident();
	uint32_t i = lane;
	for (; i + 32 * (B - 1) < units; i += 32 * B) {
		uint64_t p[B];
#pragma unroll
		for (unsigned g = 0; g < B; g++)
			p[g] = load_partial<SHARED>(partials + i + 32 * g);
#pragma unroll
		for (unsigned g = 0; g < B; g++) {
			if constexpr (minmax)
				m = RL::lelem(m, R::unbits(p[g]));
			else
				c = R::comb(c, R::unbits(p[g]));
		}
	}
	uint64_t p[B];
#pragma unroll
	for (unsigned g = 0; g < B; g++)
		if (i + 32 * g < units)
			p[g] = load_partial<SHARED>(partials + i + 32 * g);
#pragma unroll
	for (unsigned g = 0; g < B; g++) {
		if (i + 32 * g < units) {
			if constexpr (minmax)
				m = RL::lelem(m, R::unbits(p[g]));
			else
				c = R::comb(c, R::unbits(p[g]));
		}
	}
	if constexpr (minmax)
		c = RL::lfinish(m);
	return R::warp(c);
}

/* Units are combined in groups of this many, then the groups' partials. */
constexpr uint32_t CGROUP = 32;

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
 * One warp's share of a segment: unit u of units. partials has room for
 * 2 * units values (unit partials, then group partials); ticket is the
 * segment's, gtickets one per group. Up to CGROUP units, the last warp to
 * finish combines every unit partial; past that, the last of each group
 * of CGROUP units combines its group, and the last group the groups'
 * partials. Counters go back to zero as they are used up.
 */
template <typename T, int OP>
static __device__ __forceinline__ void seg_unit(const unsigned char *seg, uint64_t n,
						uint32_t unit_rows, uint32_t units, uint32_t u,
						uint64_t *partials, uint32_t *ticket,
						uint32_t *gtickets, uint64_t *out, unsigned lane)
{
	using R = red<T, OP>;
	typename R::A acc = unit_fold<T, OP>(seg, n, u, units, lane);
	acc = R::warp(acc);
	if (units == 1) {
		if (lane == 0)
			*out = R::bits(acc);
		return;
	}
	if (lane == 0)
		partials[u] = R::bits(acc);
	if (units <= CGROUP) {
		if (!arrive_last(ticket, units, lane))
			return;
		typename R::A c = combine<T, OP>(partials, units, lane);
		if (lane == 0) {
			*out = R::bits(c);
			*ticket = 0;
		}
		return;
	}
	uint32_t g = u / CGROUP, ngroups = (units + CGROUP - 1) / CGROUP;
	uint32_t gs = units - g * CGROUP < CGROUP ? units - g * CGROUP : CGROUP;
	if (!arrive_last(gtickets + g, gs, lane))
		return;
	typename R::A c = combine<T, OP>(partials + g * CGROUP, gs, lane);
	if (lane == 0) {
		partials[units + g] = R::bits(c);
		gtickets[g] = 0;
	}
	if (!arrive_last(ticket, ngroups, lane))
		return;
	c = combine<T, OP>(partials + units, ngroups, lane);
	if (lane == 0) {
		*out = R::bits(c);
		*ticket = 0;
	}
}

template <typename T, int OP>
__global__ void __launch_bounds__(256, 2)
single_kernel(const unsigned char *data, uint64_t n, uint32_t unit_rows, uint32_t units,
	      uint64_t *partials, uint32_t *ticket, uint64_t *out)
{
	using R = red<T, OP>;
	unsigned lane = threadIdx.x & 31;
	uint32_t w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	uint32_t nw = (gridDim.x * blockDim.x) >> 5;
	if (units > 1 && units <= GR_KERNEL_WARPS_PER_BLOCK) {
		/* one block: its warps meet in shared memory instead of
		 * through a ticket, and combine exactly as the ticket's last
		 * warp would */
		__shared__ uint64_t sp[GR_KERNEL_WARPS_PER_BLOCK];
		if (w < units) {
			typename R::A acc = R::warp(
				unit_fold<T, OP>(data, n, w, units, lane));
			if (lane == 0)
				sp[w] = R::bits(acc);
		}
		__syncthreads();
		if (w == 0) {
			typename R::A c = combine<T, OP, true>(sp, units, lane);
			if (lane == 0)
				*out = R::bits(c);
		}
		return;
	}
	for (; w < units; w += nw)
		seg_unit<T, OP>(data, n, unit_rows, units, w, partials, ticket, ticket + 1, out, lane);
}

/* Blocks for a launch of `warps` warps: all resident at once at most. */
static inline unsigned grid_blocks(uint64_t warps, int sm_count)
{
	uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * 64 / GR_KERNEL_WARPS_PER_BLOCK;
	uint64_t b = (warps + GR_KERNEL_WARPS_PER_BLOCK - 1) / GR_KERNEL_WARPS_PER_BLOCK;
	return (unsigned)(b < cap ? b : cap);
}

template <typename T, int OP>
static inline cudaError_t launch_single(const void *data, uint64_t n, uint64_t *partials,
					uint32_t *ticket, uint64_t *out, int sm_count,
					cudaStream_t stream)
{
	uint32_t rows = gr_kernel_unit_rows(n, sizeof(T));
	uint32_t units = (uint32_t)gr_kernel_units(n, sizeof(T));
	single_kernel<T, OP><<<grid_blocks(units, sm_count), 256, 0, stream>>>(
		(const unsigned char *)data, n, rows, units, partials, ticket, out);
	return cudaGetLastError();
}

} /* namespace grk */
