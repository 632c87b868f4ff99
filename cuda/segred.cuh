/*
 * Segmented reduces on the GPU: the device code (segred.h has the host
 * interface and the records), the walk and the ops but exact sums, which
 * segred-exact.cuh adds (segred.cu includes that).
 *
 * Work is split by elements, not by segments: the launch's elements
 * [first, end) are cut into tiles of GR_SEGRED_TILE_BYTES, one warp a
 * tile. A warp finds the first segment that meets its tile (segmented.cuh's
 * 32-way search) and walks the segments 32 offsets at a time: a segment of
 * at most SHORT elements inside the tile is one lane's, any other
 * segment's part in the tile (its piece) the whole warp's. Each part is
 * reduced to one value that goes into the segment's slot by an integer
 * atomic, so the parts of a segment may meet in any order, from any
 * tiles, and the result is the same bits:
 *
 *  - integer sums: 64-bit wrapping adds into the record;
 *  - min and max: the element's ordered key (argm.cuh's: -0 below +0, a
 *    NaN past every number), 64-bit atomic minimum or maximum;
 *  - exact sums (float sum and sumsq, integer sumsq): a fixed-point
 *    number, the segment's digits, 32-bit places in signed 64-bit words
 *    (segred-exact.cuh).
 *
 * The finish kernel, one thread a segment, turns a min's or max's key
 * back into the element, or an empty segment's identity.
 *
 * A narrow dtype's elements are widened as they are loaded (widen.cuh:
 * a policy's IN says what it reads), and from there on every op is the
 * one of the dtype they widen to: the same tiles (by the widened size:
 * 4096 elements), the same records, but an empty segment's min and max
 * of an integer, the narrow dtype's own extremes.
 */
#pragma once

#include <climits>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda_runtime.h>

#include "cuda/argm.cuh"
#include "cuda/segmented.cuh"
#include "cuda/segred.h"
#include "cuda/widen.cuh"

namespace grsr {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned WARPS = 2, THREADS = 32 * WARPS;
/* a segment of at most this many elements inside a tile is one lane's */
constexpr unsigned SHORT = 16;
/* binades above the largest of a part's first elements that its window
 * keeps */
constexpr int HEAD = 8;

template <typename T> __host__ __device__ constexpr uint64_t tile_elems()
{
	return GR_SEGRED_TILE_BYTES / sizeof(T);
}

/*
 * How a policy's kernel is built: the bytes a lane loads at once in a
 * piece's loop, and the blocks (of WARPS warps) an SM it is built to hold,
 * registers capped to fit them. The exact sums run faster at 32 bytes
 * and 32 warps an SM, in small blocks, than at 64 bytes and the 16 warps
 * their registers allow (gpured-ops-bench --segred-only measures it:
 * docs/BENCHMARKS.md); integer sums, with few registers, keep 64 bytes.
 */
struct tuning {
	static constexpr unsigned LOAD_BYTES = 32, MINB = 32 / WARPS;
	/* bytes of its tile a warp has brought into L2 as it starts (0: none;
	 * a policy may also pass for_batches how far ahead of its loads to
	 * bring in the next batch) */
	static constexpr unsigned L2_START = 0;
};

/* [a, b), 16-byte aligned inward at the end and outward at the start
 * (within the allocation: allocations are aligned wider), into L2 by the
 * copy engine: one instruction, nothing waits for it. */
static __device__ __forceinline__ void prefetch_l2(uintptr_t a, uintptr_t b)
{
	a &= ~(uintptr_t)15;
	b &= ~(uintptr_t)15;
	if (b > a)
		asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"((unsigned)(b - a))
			     : "memory");
}

/* loads in flight a lane in a piece's loop, LB bytes of them */
template <typename T, unsigned LB> __host__ __device__ constexpr unsigned loads()
{
	return LB / sizeof(T);
}

/* ---- the policies: a lane's short segment, and a warp's piece ---- */

struct params {
	const void *x;
	const uint64_t *off; /* k + 1 */
	uint64_t k, first, end, ntiles;
	uint64_t *rec;       /* k records */
	uint64_t *keys;      /* k: min's and max's keys (rec for those ops) */
	uint64_t *idx;       /* k: argmin's and argmax's first index */
	long long *digits;   /* k * digits<F>() (exact sums) */
	uint32_t *flags;     /* k, one a 64-bit word (exact sums) */
};

/*
 * A lane's elements of a piece [.., hi) from element i on, i, i + 32,
 * ..., read as IN says (widened, U at a time, U by the widened size):
 * batch(v, n, at) for each batch, n an std::integral_constant of its
 * size and at its first element's index (element g is at + 32 g); the
 * last (U - 1 at most) is padded with pad, which the caller's op must
 * take as nothing, or tell by its index (hi or past).
 */
template <unsigned LB, class IN, typename B, unsigned AHEAD = 0>
static __device__ __forceinline__ void for_batches_at_in(const typename IN::R *x, uint64_t i,
							 uint64_t hi, typename IN::W pad, B batch)
{
	using T = typename IN::W;
	using R = typename IN::R;
	constexpr unsigned U = loads<T, LB>();
	for (; i + 32 * (U - 1) < hi; i += 32 * U) {
		if (AHEAD && (threadIdx.x & 31) == 0) {
			/* the batch AHEAD bytes on, as far as the piece goes */
			const uintptr_t a = (uintptr_t)(x + i) + AHEAD, b = a + 32 * U * sizeof(R),
					e = (uintptr_t)(x + hi);
			prefetch_l2(a, b < e ? b : e);
		}
		T v[U];
#pragma unroll
		for (unsigned g = 0; g < U; g++)
			v[g] = grwiden::ld<IN>(x, i + 32 * g);
		batch((const T *)v, std::integral_constant<unsigned, U>(), i);
	}
	if (i < hi) {
		T v[U - 1];
#pragma unroll
		for (unsigned g = 0; g < U - 1; g++)
			v[g] = i + 32 * g < hi ? grwiden::ld<IN>(x, i + 32 * g) : pad;
		batch((const T *)v, std::integral_constant<unsigned, U - 1>(), i);
	}
}

/* for_batches_at_in() for an op that needs no index: batch(v, n). */
template <unsigned LB, class IN, typename B, unsigned AHEAD = 0>
static __device__ __forceinline__ void for_batches_in(const typename IN::R *x, uint64_t i, uint64_t hi,
						      typename IN::W pad, B batch)
{
	using T = typename IN::W;
	auto at = [&](const T *v, auto n, uint64_t) { batch(v, n); };
	for_batches_at_in<LB, IN, decltype(at), AHEAD>(x, i, hi, pad, at);
}

/* The same of elements of a wide dtype T. */
template <unsigned LB, typename T, typename B, unsigned AHEAD = 0>
static __device__ __forceinline__ void for_batches(const T *x, uint64_t i, uint64_t hi, T pad, B batch)
{
	for_batches_in<LB, grwiden::in<T>, B, AHEAD>(x, i, hi, pad, batch);
}

/* A short segment's elements [lo, hi), hi - lo <= SHORT, into v (widened
 * as IN says). */
template <class IN = void, typename R, typename T>
static __device__ __forceinline__ void load_short(const R *x, uint64_t lo, uint64_t hi, T *v)
{
	using I = typename std::conditional<std::is_void<IN>::value, grwiden::in<T>, IN>::type;
#pragma unroll
	for (unsigned e = 0; e < SHORT; e++)
		v[e] = lo + e < hi ? grwiden::ld<I>(x, lo + e) : T(0);
}

/* Integer sums: 64-bit wrapping. */
template <typename T, class IN = grwiden::in<T>> struct pol_isum {
	using E = T;
	using R = typename IN::R;
	static constexpr unsigned LOAD_BYTES = 64, MINB = 1, L2_START = 0;
	static __device__ __forceinline__ uint64_t of(T v)
	{
		return std::is_signed<T>::value ? (uint64_t)(long long)v : (uint64_t)v;
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi,
							uint64_t seg)
	{
		T v[SHORT];
		load_short<IN>((const R *)p.x, lo, hi, v);
		uint64_t s = 0;
#pragma unroll
		for (unsigned e = 0; e < SHORT; e++)
			s += lo + e < hi ? of(v[e]) : 0;
		if (s)
			atomicAdd((unsigned long long *)&p.rec[seg], (unsigned long long)s);
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		uint64_t s = 0;
		for_batches_in<LOAD_BYTES, IN>((const R *)p.x, lo + lane, hi, T(0), [&](const T *v, auto n) {
#pragma unroll
			for (unsigned g = 0; g < decltype(n)::value; g++)
				s += of(v[g]);
		});
#pragma unroll
		for (int m = 16; m; m >>= 1)
			s += __shfl_xor_sync(FULL, s, m);
		if (lane == 0 && s)
			atomicAdd((unsigned long long *)&p.rec[seg], (unsigned long long)s);
	}
};

/* min and max: the ordered key (argm.cuh), as unsigned 64 bits. */
template <typename T, bool MAX, class IN = grwiden::in<T>> struct pol_ext : tuning {
	using E = T;
	using R = typename IN::R;
	static constexpr long long WORST = MAX ? LLONG_MIN : LLONG_MAX;
	/* what pads a piece's last batch: the value whose key no element's
	 * beats (+-inf for floats: it wins only where every element is that
	 * infinity, which is then the answer) */
	static constexpr T PAD = std::is_floating_point<T>::value
					 ? (MAX ? -std::numeric_limits<T>::infinity()
						: std::numeric_limits<T>::infinity())
					 : MAX ? std::numeric_limits<T>::lowest()
					       : std::numeric_limits<T>::max();
	static __device__ __forceinline__ long long better(long long a, long long b)
	{
		return MAX ? (a > b ? a : b) : (a < b ? a : b);
	}
	static __device__ __forceinline__ void put(const params &p, uint64_t seg, long long key)
	{
		unsigned long long u = (unsigned long long)key ^ 0x8000000000000000ull;
		if (MAX)
			atomicMax((unsigned long long *)&p.keys[seg], u);
		else
			atomicMin((unsigned long long *)&p.keys[seg], u);
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi,
							uint64_t seg)
	{
		T v[SHORT];
		load_short<IN>((const R *)p.x, lo, hi, v);
		long long k = WORST;
#pragma unroll
		for (unsigned e = 0; e < SHORT; e++)
			if (lo + e < hi)
				k = better(k, (long long)grargm::key_of<T, MAX>(v[e]));
		put(p, seg, k);
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		grargm::key_t<T> k = (grargm::key_t<T>)(MAX ? (sizeof(T) == 4 ? INT_MIN : LLONG_MIN)
							   : (sizeof(T) == 4 ? INT_MAX : LLONG_MAX));
		for_batches_in<LOAD_BYTES, IN>((const R *)p.x, lo + lane, hi, PAD, [&](const T *v, auto n) {
#pragma unroll
			for (unsigned g = 0; g < decltype(n)::value; g++) {
				grargm::key_t<T> c = grargm::key_of<T, MAX>(v[g]);
				k = MAX ? (c > k ? c : k) : (c < k ? c : k);
			}
		});
		long long w = (long long)k;
#pragma unroll
		for (int m = 16; m; m >>= 1)
			w = better(w, __shfl_xor_sync(FULL, w, m));
		if (lane == 0)
			put(p, seg, w);
	}
};

/* argmin and argmax, the second pass: the first element of each part
 * whose key is the segment's best (pol_ext's, in keys), its index into
 * idx by an atomic minimum. */
template <typename T, bool MAX, class IN = grwiden::in<T>> struct pol_arg : tuning {
	using E = T;
	using R = typename IN::R;
	static __device__ __forceinline__ long long best(const params &p, uint64_t seg)
	{
		return (long long)(p.keys[seg] ^ 0x8000000000000000ull);
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi,
							uint64_t seg)
	{
		const R *x = (const R *)p.x;
		const long long b = best(p, seg);
#pragma unroll 1
		for (uint64_t i = lo; i < hi; i++) {
			if ((long long)grargm::key_of<T, MAX>(grwiden::ld<IN>(x, i)) == b) {
				atomicMin((unsigned long long *)&p.idx[seg], (unsigned long long)i);
				return;
			}
		}
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		const long long b = best(p, seg);
		uint64_t m = ~0ull;
		for_batches_at_in<LOAD_BYTES, IN>((const R *)p.x, lo + lane, hi, pol_ext<T, MAX>::PAD,
			       [&](const T *v, auto n, uint64_t at) {
#pragma unroll
				       for (unsigned g = 0; g < decltype(n)::value; g++) {
					       const uint64_t e = at + 32 * g;
					       const long long key = grargm::key_of<T, MAX>(v[g]);
					       if (key == b && e < hi && e < m)
						       m = e;
				       }
			       });
#pragma unroll
		for (int o = 16; o; o >>= 1) {
			const uint64_t q = __shfl_xor_sync(FULL, m, o);
			m = q < m ? q : m;
		}
		if (lane == 0 && m != ~0ull)
			atomicMin((unsigned long long *)&p.idx[seg], (unsigned long long)m);
	}
};

/* ---- the reduce: one warp a tile ---- */

template <class POL>
__global__ void __launch_bounds__(THREADS, POL::MINB) segred_kernel(params p)
{
	using T = typename POL::E;
	constexpr uint64_t TE = tile_elems<T>();
	const unsigned lane = threadIdx.x & 31;
	const uint64_t t = (uint64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
	if (t >= p.ntiles)
		return;
	const uint64_t ta = p.first + t * TE, tb = ta + TE < p.end ? ta + TE : p.end;
	if constexpr (POL::L2_START != 0) {
		/* the elements as memory holds them */
		using R = typename POL::R;
		const R *x = (const R *)p.x;
		const uint64_t pe = ta + POL::L2_START / sizeof(R);
		if (lane == 0)
			prefetch_l2((uintptr_t)(x + ta), (uintptr_t)(x + (pe < tb ? pe : tb)));
	}

	for (uint64_t s = grseg::first_segment(p.off, p.k, ta, lane);; s += 32) {
		const uint64_t idx = s + lane;
		const bool valid = idx < p.k;
		const uint64_t lo = valid ? __ldg(p.off + idx) : p.end;
		const uint64_t hi = valid ? __ldg(p.off + idx + 1) : p.end;
		/* the segments at this tile: a prefix of the lanes (empty ones
		 * are the finish's) */
		const bool in = valid && lo < tb;
		const bool alone = in && lo >= ta && hi <= tb && hi - lo <= SHORT;
		if (alone && hi > lo)
			POL::lane_seg(p, lo, hi, idx);
		unsigned jobs = __ballot_sync(FULL, in && !alone && hi > lo);
		while (jobs) {
			const int src = __ffs(jobs) - 1;
			jobs &= jobs - 1;
			const uint64_t jlo = __shfl_sync(FULL, lo, src), jhi = __shfl_sync(FULL, hi, src);
			const uint64_t plo = jlo > ta ? jlo : ta, phi = jhi < tb ? jhi : tb;
			POL::warp_piece(p, plo, phi, s + src, lane);
		}
		if (__ballot_sync(FULL, in) != FULL)
			break;
	}
}

/* ---- the finish: one thread a segment ---- */

static __device__ __forceinline__ uint64_t f64_bits(double v)
{
	return (uint64_t)__double_as_longlong(v);
}

constexpr uint64_t NAN_BITS = 0x7ff8000000000000ull;


/* The value of a key (pol_ext's), as the record holds it. */
template <typename T, bool MAX> static __device__ __forceinline__ uint64_t value_of_key(long long key)
{
	if constexpr (std::is_same<T, float>::value) {
		int k = (int)key;
		if (k == (MAX ? INT_MAX : INT_MIN))
			return NAN_BITS;
		int b = k ^ ((k >> 31) & 0x7fffffff);
		return f64_bits((double)__int_as_float(b));
	} else if constexpr (std::is_same<T, double>::value) {
		if (key == (MAX ? LLONG_MAX : LLONG_MIN))
			return NAN_BITS;
		long long b = key ^ ((key >> 63) & 0x7fffffffffffffffll);
		return (uint64_t)b;
	} else if constexpr (std::is_same<T, uint32_t>::value) {
		return (uint64_t)((uint32_t)key ^ 0x80000000u);
	} else if constexpr (std::is_same<T, uint64_t>::value) {
		return (uint64_t)key ^ 0x8000000000000000ull;
	} else {
		return (uint64_t)key; /* i32, i64: the key is the value */
	}
}

/* An empty segment's min (max): the dtype's largest (smallest) value
 * (a narrow integer dtype's own). */
template <typename T, bool MAX, class IN = grwiden::in<T>>
static __device__ __forceinline__ uint64_t empty_extreme()
{
	if constexpr (IN::NARROW && !std::is_floating_point<T>::value)
		return (uint64_t)(MAX ? IN::LO : IN::HI);
	else if constexpr (std::is_floating_point<T>::value)
		return MAX ? 0xfff0000000000000ull : 0x7ff0000000000000ull;
	else if constexpr (std::is_same<T, int32_t>::value)
		return (uint64_t)(MAX ? (long long)INT_MIN : (long long)INT_MAX);
	else if constexpr (std::is_same<T, int64_t>::value)
		return (uint64_t)(MAX ? LLONG_MIN : LLONG_MAX);
	else if constexpr (std::is_same<T, uint32_t>::value)
		return MAX ? 0 : 0xffffffffull;
	else
		return MAX ? 0 : ~0ull;
}

template <typename T, bool MAX, class IN = grwiden::in<T>> __global__ void finish_ext(params p)
{
	const uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (s >= p.k)
		return;
	if (p.off[s + 1] == p.off[s]) {
		p.rec[s] = empty_extreme<T, MAX, IN>();
		return;
	}
	long long key = (long long)(p.keys[s] ^ 0x8000000000000000ull);
	p.rec[s] = value_of_key<T, MAX>(key);
}

/* argmin's and argmax's records: the value, then the index counted from
 * the segment's first element (an empty segment: the identity, 2^64 - 1) */
template <typename T, bool MAX, class IN = grwiden::in<T>> __global__ void finish_arg(params p)
{
	const uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (s >= p.k)
		return;
	if (p.off[s + 1] == p.off[s]) {
		p.rec[2 * s] = empty_extreme<T, MAX, IN>();
		p.rec[2 * s + 1] = ~0ull;
		return;
	}
	p.rec[2 * s] = value_of_key<T, MAX>((long long)(p.keys[s] ^ 0x8000000000000000ull));
	p.rec[2 * s + 1] = p.idx[s] - p.off[s];
}

/* ---- launching ---- */

template <class POL> static inline cudaError_t reduce(params p, cudaStream_t st)
{
	using T = typename POL::E;
	if (p.end == p.first)
		return cudaSuccess;
	p.ntiles = (p.end - p.first + tile_elems<T>() - 1) / tile_elems<T>();
	uint64_t blocks = (p.ntiles + WARPS - 1) / WARPS;
	segred_kernel<POL><<<(unsigned)blocks, THREADS, 0, st>>>(p);
	return cudaGetLastError();
}

/* The finish kernels' blocks: FINISH_THREADS threads, one a segment */
constexpr unsigned FINISH_THREADS = 256;
static inline unsigned finish_blocks(uint64_t k)
{
	return (unsigned)((k + FINISH_THREADS - 1) / FINISH_THREADS);
}

template <typename T, class IN = grwiden::in<T>>
static inline cudaError_t launch_isum(params p, cudaStream_t st)
{
	cudaError_t e = cudaMemsetAsync(p.rec, 0, p.k * 8, st);
	return e ? e : reduce<pol_isum<T, IN>>(p, st);
}

template <typename T, bool MAX, class IN = grwiden::in<T>>
static inline cudaError_t launch_ext(params p, cudaStream_t st)
{
	/* the keys in the records; the worst key: 0 for a maximum, all ones
	 * for a minimum */
	p.keys = p.rec;
	cudaError_t e = cudaMemsetAsync(p.keys, MAX ? 0 : 0xff, p.k * 8, st);
	if (!e)
		e = reduce<pol_ext<T, MAX, IN>>(p, st);
	if (!e) {
		finish_ext<T, MAX, IN><<<finish_blocks(p.k), FINISH_THREADS, 0, st>>>(p);
		e = cudaGetLastError();
	}
	return e;
}

/* argmin and argmax: the keys (pol_ext) in a first pass, the first index
 * of each segment's best key in a second; scratch: k keys, then k
 * indices. */
template <typename T, bool MAX, class IN = grwiden::in<T>>
static inline cudaError_t launch_arg(params p, void *scratch, size_t bytes, cudaStream_t st)
{
	if (bytes / 16 < p.k)
		return cudaErrorInvalidValue;
	p.keys = (uint64_t *)scratch;
	p.idx = p.keys + p.k;
	cudaError_t e = cudaMemsetAsync(p.keys, MAX ? 0 : 0xff, p.k * 8, st);
	if (!e)
		e = cudaMemsetAsync(p.idx, 0xff, p.k * 8, st);
	if (!e)
		e = reduce<pol_ext<T, MAX, IN>>(p, st);
	if (!e)
		e = reduce<pol_arg<T, MAX, IN>>(p, st);
	if (!e) {
		finish_arg<T, MAX, IN><<<finish_blocks(p.k), FINISH_THREADS, 0, st>>>(p);
		e = cudaGetLastError();
	}
	return e;
}

} /* namespace grsr */
