/*
 * Segmented reduces on the GPU: the device code (segred.h has the host
 * interface and the records).
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
 *    number, the segment's digits, 32-bit places in signed 64-bit words.
 *
 * Exact sums. An element (or its exact square, or an integer's square in
 * double) is a magnitude M < 2^MAGBITS times 2^(P - Z), with an integer
 * place P >= 0 and a sign (the form's decode; Z puts the form's least
 * place, 2^-149 for f32, 2^-1074 for f64, 2^-2148 for f64 squares, at 0).
 * A part keeps a two's complement integer of NW 64-bit words, acc, worth
 * acc * 2^(P0 - Z), and adds M << (P - P0) into it when 0 <= P - P0 <= S:
 * one shift and one add with carries. S is chosen so that a whole tile's
 * elements, each below 2^(MAGBITS + S), cannot overflow acc (MAGBITS + S
 * + log2(tile elements) <= 64 NW - 1), so every add is exact. P0 is
 * placed HEAD binades above the largest place among the part's first
 * elements (one a lane) and S below it. Elements outside the window
 * (rare on real data: S is 62 to 88 binades), go into the segment's
 * digits at once, as up to five 32-bit pieces, each by an atomic add; so
 * do NaNs and infinities into its flags. At the end of a part the warp
 * adds its lanes' acc (all at the same P0) and one lane puts the sum into
 * the digits as pieces too. Every step is exact, so the digits hold the
 * exact sum whatever the order; each digit takes at most one piece (below
 * 2^32) an element, which GR_SEGRED_MAX_ELEMS keeps below 2^63.
 *
 * The finish kernel, one thread a segment, folds the digits into 32-bit
 * limbs with their carries and rounds the two's complement number once to
 * the nearest double (ties to even, down to 2^-1074), with numpy's rules
 * for specials and -0 (segred.h); for min and max it turns the key back
 * into the element, or an empty segment's identity.
 */
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cuda/argm.cuh"
#include "cuda/segmented.cuh"
#include "cuda/segred.h"

namespace grsr {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned WARPS = 8, THREADS = 32 * WARPS;
/* a segment of at most this many elements inside a tile is one lane's */
constexpr unsigned SHORT = 16;
/* binades above the largest of a part's first elements that its window
 * keeps */
constexpr int HEAD = 8;

template <typename T> __host__ __device__ constexpr uint64_t tile_elems()
{
	return GR_SEGRED_TILE_BYTES / sizeof(T);
}

/* loads in flight a lane in a piece's loop */
template <typename T> __host__ __device__ constexpr unsigned loads()
{
	return 64 / sizeof(T);
}

/* ---- shifts by 0 to 64 bits (PTX clamps the count: by 64 gives 0) ---- */

static __device__ __forceinline__ uint64_t shl(uint64_t x, unsigned n)
{
	uint64_t r;
	asm("shl.b64 %0, %1, %2;" : "=l"(r) : "l"(x), "r"(n));
	return r;
}

static __device__ __forceinline__ uint64_t shr(uint64_t x, unsigned n)
{
	uint64_t r;
	asm("shr.b64 %0, %1, %2;" : "=l"(r) : "l"(x), "r"(n));
	return r;
}

/* ---- exact sums: the forms ---- */

/* A segment's flags (the last word of its scratch). */
enum : uint32_t { F_NAN = 1, F_PINF = 2, F_NINF = 4, F_NOT_NZERO = 8 };
constexpr uint32_t F_SPECIAL = F_NAN | F_PINF | F_NINF;

/*
 * decode(x, hi, lo, P, neg): x's magnitude (hi:lo) and place, and sign,
 * for a finite x; returns its flags: F_SPECIAL bits for a NaN or an
 * infinity (then nothing else is set), F_NOT_NZERO for any element but
 * -0 (sums only: a sum of squares is never -0). Zero has magnitude 0.
 */
struct fm_f32 {
	using T = float;
	static constexpr bool SQ = false;
	static constexpr int Z = 149, PMAX = 253, MAGBITS = 24, NW = 2, S = 88;
	static __device__ __forceinline__ uint32_t decode(float x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		uint32_t b = __float_as_uint(x), e = (b >> 23) & 0xffu, m = b & 0x7fffffu;
		neg = b >> 31;
		hi = 0;
		if (e == 0xffu)
			return m ? F_NAN : neg ? F_NINF : F_PINF;
		lo = e ? (m | 0x800000u) : m;
		P = e ? (int)e - 1 : 0;
		return b != 0x80000000u ? F_NOT_NZERO : 0;
	}
};

struct fm_f64 {
	using T = double;
	static constexpr bool SQ = false;
	static constexpr int Z = 1074, PMAX = 2045, MAGBITS = 53, NW = 2, S = 63;
	static __device__ __forceinline__ uint32_t decode(double x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		uint64_t b = (uint64_t)__double_as_longlong(x), m = b & ((1ull << 52) - 1);
		unsigned e = (unsigned)(b >> 52) & 0x7ffu;
		neg = b >> 63;
		hi = 0;
		if (e == 0x7ffu)
			return m ? F_NAN : neg ? F_NINF : F_PINF;
		lo = e ? (m | (1ull << 52)) : m;
		P = e ? (int)e - 1 : 0;
		return b != 0x8000000000000000ull ? F_NOT_NZERO : 0;
	}
};

/* f32 squares: M^2 (48 bits) at twice the place, each exact */
struct fm_f32sq {
	using T = float;
	static constexpr bool SQ = true;
	static constexpr int Z = 298, PMAX = 506, MAGBITS = 48, NW = 2, S = 64;
	static __device__ __forceinline__ uint32_t decode(float x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		uint32_t f = fm_f32::decode(x, hi, lo, P, neg);
		neg = false;
		if (f & F_SPECIAL)
			return f & F_NAN ? F_NAN : F_PINF;
		lo *= lo;
		P *= 2;
		return 0;
	}
};

/* f64 squares: M^2 (106 bits, two words) at twice the place */
struct fm_f64sq {
	using T = double;
	static constexpr bool SQ = true;
	static constexpr int Z = 2148, PMAX = 4090, MAGBITS = 106, NW = 3, S = 64;
	static __device__ __forceinline__ uint32_t decode(double x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		uint32_t f = fm_f64::decode(x, hi, lo, P, neg);
		neg = false;
		if (f & F_SPECIAL)
			return f & F_NAN ? F_NAN : F_PINF;
		hi = __umul64hi(lo, lo);
		lo *= lo;
		P *= 2;
		return 0;
	}
};

/* integer squares, in double as the CPU rounds them: p = M 2^(P - 52),
 * p >= 1 (so P >= 0) or 0, and below 2^129 */
template <typename I> struct fm_isq {
	using T = I;
	static constexpr bool SQ = true;
	static constexpr int Z = 52, PMAX = 128, MAGBITS = 53, NW = 2, S = 62;
	static __device__ __forceinline__ uint32_t decode(I x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		double d = (double)x, p = d * d;
		uint64_t b = (uint64_t)__double_as_longlong(p);
		neg = false;
		hi = 0;
		lo = p != 0.0 ? (b & ((1ull << 52) - 1)) | (1ull << 52) : 0;
		P = p != 0.0 ? (int)(b >> 52) - 1023 : 0;
		return 0;
	}
};

/* Signed 64-bit digits a segment keeps: every place a deposit can reach
 * (an element's, or a part's sum: below 2^(PMAX + MAGBITS + 12)), with
 * room for the carries of GR_SEGRED_MAX_ELEMS elements and the sign. */
template <class F> __host__ __device__ constexpr unsigned digits()
{
	return (unsigned)(F::PMAX + F::MAGBITS + 40) / 32 + 2;
}

/* Scratch of a segment: its digits, then its flags in a word of their own. */
template <class F> __host__ __device__ constexpr size_t scratch_per_seg()
{
	return 8 * (digits<F>() + 1);
}

template <int NW> struct wacc {
	uint64_t w[NW];
};

/* a += x or a -= x, NW words with carries */
template <int NW> static __device__ __forceinline__ void acc_add(wacc<NW> &a, const uint64_t *x, bool sub)
{
	if constexpr (NW == 2) {
		if (sub)
			asm("sub.cc.u64 %0, %0, %2;\n\tsubc.u64 %1, %1, %3;"
			    : "+l"(a.w[0]), "+l"(a.w[1])
			    : "l"(x[0]), "l"(x[1]));
		else
			asm("add.cc.u64 %0, %0, %2;\n\taddc.u64 %1, %1, %3;"
			    : "+l"(a.w[0]), "+l"(a.w[1])
			    : "l"(x[0]), "l"(x[1]));
	} else {
		static_assert(NW == 3, "two or three words");
		if (sub)
			asm("sub.cc.u64 %0, %0, %3;\n\tsubc.cc.u64 %1, %1, %4;\n\tsubc.u64 %2, %2, %5;"
			    : "+l"(a.w[0]), "+l"(a.w[1]), "+l"(a.w[2])
			    : "l"(x[0]), "l"(x[1]), "l"(x[2]));
		else
			asm("add.cc.u64 %0, %0, %3;\n\taddc.cc.u64 %1, %1, %4;\n\taddc.u64 %2, %2, %5;"
			    : "+l"(a.w[0]), "+l"(a.w[1]), "+l"(a.w[2])
			    : "l"(x[0]), "l"(x[1]), "l"(x[2]));
	}
}

/* (hi:lo) << s as NW words, 0 <= s <= S */
template <class F> static __device__ __forceinline__ void shifted(uint64_t hi, uint64_t lo, unsigned s,
								   uint64_t *x)
{
	x[0] = shl(lo, s);
	if constexpr (F::NW == 3) {
		static_assert(F::S <= 64, "one word of shift");
		x[1] = shl(hi, s) | shr(lo, 64 - s);
		x[2] = shr(hi, 64 - s);
	} else if constexpr (F::S <= 64) {
		x[1] = shr(lo, 64 - s); /* hi is 0: M has at most 64 bits */
	} else {
		x[1] = s >= 64 ? shl(lo, s - 64) : shr(lo, 64 - s);
	}
}

/*
 * words[0..n) (a magnitude) times 2^(P - Z), with a sign, into a
 * segment's digits d: 32-bit pieces from digit P / 32 up, each non-zero
 * one by an atomic add.
 */
template <class F, int N>
static __device__ __forceinline__ void deposit(long long *d, const uint64_t *words, int P, bool neg)
{
	constexpr unsigned ND = digits<F>();
	const unsigned w = (unsigned)P >> 5, b = (unsigned)P & 31;
	uint64_t r[N + 1];
	r[0] = shl(words[0], b);
#pragma unroll
	for (int i = 1; i < N; i++)
		r[i] = shl(words[i], b) | shr(words[i - 1], 64 - b);
	r[N] = shr(words[N - 1], 64 - b);
#pragma unroll
	for (int k = 0; k < 2 * (N + 1); k++) {
		uint64_t piece = (r[k / 2] >> (32 * (k & 1))) & 0xffffffffu;
		if (piece && w + k < ND)
			atomicAdd((unsigned long long *)&d[w + k],
				  neg ? (unsigned long long)-(long long)piece : (unsigned long long)piece);
	}
}

/* An element outside the window, straight into the digits: rare, and
 * kept out of line so that the loop's registers stay few. */
template <class F>
static __device__ __noinline__ void deposit_element(long long *d, uint64_t lo, uint64_t hi, int P, bool neg)
{
	const uint64_t m[2] = { lo, hi };
	deposit<F, 2>(d, m, P, neg);
}

/* One element into a part's acc at P0, or straight into the digits, or
 * the flags. */
template <class F>
static __device__ __forceinline__ void exact_add(wacc<F::NW> &a, typename F::T x, int P0, uint32_t &fl,
						  long long *d)
{
	uint64_t hi, lo;
	int P;
	bool neg;
	uint32_t f = F::decode(x, hi, lo, P, neg);
	fl |= f;
	if ((f & F_SPECIAL) || !(hi | lo))
		return;
	unsigned s = (unsigned)(P - P0);
	if (s <= (unsigned)F::S) {
		uint64_t v[F::NW];
		shifted<F>(hi, lo, s, v);
		acc_add<F::NW>(a, v, neg);
	} else {
		deposit_element<F>(d, lo, hi, P, neg);
	}
}

/* The place of x for the window (0 for zeros and specials). */
template <class F> static __device__ __forceinline__ int place_of(typename F::T x)
{
	uint64_t hi, lo;
	int P;
	bool neg;
	uint32_t f = F::decode(x, hi, lo, P, neg);
	return (f & F_SPECIAL) || !(hi | lo) ? 0 : P;
}

static __device__ __forceinline__ int window_base(int top, int S)
{
	int p0 = top + HEAD - S;
	return p0 > 0 ? p0 : 0;
}

/* A part's acc (at P0) and flags into segment seg's digits and flags. */
template <class F>
static __device__ __forceinline__ void exact_flush(wacc<F::NW> &a, int P0, uint32_t fl, long long *d,
						    uint32_t *flags)
{
	bool neg = (long long)a.w[F::NW - 1] < 0;
	if (neg) {
		wacc<F::NW> z = {};
		acc_add<F::NW>(z, a.w, /* sub= */ true);
		a = z;
	}
	deposit<F, F::NW>(d, a.w, P0, neg);
	if (fl)
		atomicOr(flags, fl);
}

/* ---- the policies: a lane's short segment, and a warp's piece ---- */

struct params {
	const void *x;
	const uint64_t *off; /* k + 1 */
	uint64_t k, first, end, ntiles;
	uint64_t *rec;       /* k records */
	long long *digits;   /* k * digits<F>() (exact sums) */
	uint32_t *flags;     /* k, one a 64-bit word (exact sums) */
};

/* Loads of the piece [lo, hi), lane l taking l, l + 32, ..., U at a time:
 * add(v) for each element. */
template <typename T, typename A>
static __device__ __forceinline__ void for_piece(const T *x, uint64_t lo, uint64_t hi, unsigned lane, A add)
{
	constexpr unsigned U = loads<T>();
	uint64_t i = lo + lane;
	for (; i + 32 * (U - 1) < hi; i += 32 * U) {
		T v[U];
#pragma unroll
		for (unsigned g = 0; g < U; g++)
			v[g] = __ldg(x + i + 32 * g);
#pragma unroll
		for (unsigned g = 0; g < U; g++)
			add(v[g]);
	}
	if (i < hi) {
		T v[U - 1];
#pragma unroll
		for (unsigned g = 0; g < U - 1; g++)
			v[g] = i + 32 * g < hi ? __ldg(x + i + 32 * g) : T(0);
#pragma unroll
		for (unsigned g = 0; g < U - 1; g++)
			if (i + 32 * g < hi)
				add(v[g]);
	}
}

/* A short segment's elements [lo, hi), hi - lo <= SHORT, into v. */
template <typename T>
static __device__ __forceinline__ void load_short(const T *x, uint64_t lo, uint64_t hi, T *v)
{
#pragma unroll
	for (unsigned e = 0; e < SHORT; e++)
		v[e] = lo + e < hi ? __ldg(x + lo + e) : T(0);
}

/* Integer sums: 64-bit wrapping. */
template <typename T> struct pol_isum {
	using E = T;
	static __device__ __forceinline__ uint64_t of(T v)
	{
		return std::is_signed<T>::value ? (uint64_t)(long long)v : (uint64_t)v;
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi, uint64_t seg)
	{
		T v[SHORT];
		load_short((const T *)p.x, lo, hi, v);
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
		for_piece((const T *)p.x, lo, hi, lane, [&](T v) { s += of(v); });
#pragma unroll
		for (int m = 16; m; m >>= 1)
			s += __shfl_xor_sync(FULL, s, m);
		if (lane == 0 && s)
			atomicAdd((unsigned long long *)&p.rec[seg], (unsigned long long)s);
	}
};

/* min and max: the ordered key (argm.cuh), as unsigned 64 bits. */
template <typename T, bool MAX> struct pol_ext {
	using E = T;
	static constexpr long long WORST = MAX ? LLONG_MIN : LLONG_MAX;
	static __device__ __forceinline__ long long better(long long a, long long b)
	{
		return MAX ? (a > b ? a : b) : (a < b ? a : b);
	}
	static __device__ __forceinline__ void put(const params &p, uint64_t seg, long long key)
	{
		unsigned long long u = (unsigned long long)key ^ 0x8000000000000000ull;
		if (MAX)
			atomicMax((unsigned long long *)&p.rec[seg], u);
		else
			atomicMin((unsigned long long *)&p.rec[seg], u);
	}
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi, uint64_t seg)
	{
		T v[SHORT];
		load_short((const T *)p.x, lo, hi, v);
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
		for_piece((const T *)p.x, lo, hi, lane, [&](T v) {
			grargm::key_t<T> c = grargm::key_of<T, MAX>(v);
			k = MAX ? (c > k ? c : k) : (c < k ? c : k);
		});
		long long w = (long long)k;
#pragma unroll
		for (int m = 16; m; m >>= 1)
			w = better(w, __shfl_xor_sync(FULL, w, m));
		if (lane == 0)
			put(p, seg, w);
	}
};

/* Exact sums of a form F. */
template <class F> struct pol_exact {
	using E = typename F::T;
	static __device__ __forceinline__ long long *dig(const params &p, uint64_t seg)
	{
		return p.digits + seg * digits<F>();
	}
	/* two passes over the few elements (the second from L1), not
	 * unrolled: the loop's registers are the warp pieces' */
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi, uint64_t seg)
	{
		const E *x = (const E *)p.x;
		int top = 0;
#pragma unroll 1
		for (uint64_t i = lo; i < hi; i++) {
			int P = place_of<F>(__ldg(x + i));
			top = P > top ? P : top;
		}
		const int P0 = window_base(top, F::S);
		wacc<F::NW> a = {};
		uint32_t fl = 0;
		long long *d = dig(p, seg);
#pragma unroll 1
		for (uint64_t i = lo; i < hi; i++)
			exact_add<F>(a, __ldg(x + i), P0, fl, d);
		exact_flush<F>(a, P0, fl, d, p.flags + 2 * seg);
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		const E *x = (const E *)p.x;
		/* the window: from each lane's first element */
		int P = lo + lane < hi ? place_of<F>(__ldg(x + lo + lane)) : 0;
		const int P0 = window_base((int)__reduce_max_sync(FULL, (unsigned)P), F::S);
		wacc<F::NW> a = {};
		uint32_t fl = 0;
		long long *d = dig(p, seg);
		for_piece(x, lo, hi, lane, [&](E v) { exact_add<F>(a, v, P0, fl, d); });
#pragma unroll
		for (int m = 16; m; m >>= 1) {
			uint64_t o[F::NW];
#pragma unroll
			for (int i = 0; i < F::NW; i++)
				o[i] = __shfl_xor_sync(FULL, a.w[i], m);
			acc_add<F::NW>(a, o, /* sub= */ false);
		}
		fl = __reduce_or_sync(FULL, fl);
		if (lane == 0)
			exact_flush<F>(a, P0, fl, d, p.flags + 2 * seg);
	}
};

/* ---- the reduce: one warp a tile ---- */

template <class POL>
__global__ void __launch_bounds__(THREADS) segred_kernel(params p)
{
	using T = typename POL::E;
	constexpr uint64_t TE = tile_elems<T>();
	const unsigned lane = threadIdx.x & 31;
	const uint64_t t = (uint64_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
	if (t >= p.ntiles)
		return;
	const uint64_t ta = p.first + t * TE, tb = ta + TE < p.end ? ta + TE : p.end;

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

/*
 * The digits d[0..ND) (signed, weighing 2^(32 i - Z)) rounded to the
 * nearest double, ties to even, down to 2^-1074: the bits of its
 * magnitude, its sign in *neg; 0 for zero.
 */
template <class F> static __device__ uint64_t round_digits(const long long *d, bool *neg)
{
	constexpr unsigned ND = digits<F>();
	uint32_t L[ND];
	long long c = 0;
#pragma unroll 4
	for (unsigned i = 0; i < ND; i++) {
		long long t = d[i] + c;
		L[i] = (uint32_t)t;
		c = t >> 32;
	}
	*neg = c < 0;
	if (c < 0) {
		/* the magnitude: 2^(32 ND) - L */
		uint32_t carry = 1;
		for (unsigned i = 0; i < ND; i++) {
			uint32_t v = ~L[i] + carry;
			carry = carry && v == 0;
			L[i] = v;
		}
	}
	int top = (int)ND - 1;
	while (top >= 0 && !L[top])
		top--;
	if (top < 0)
		return 0;
	const int h = top * 32 + 31 - __clz(L[top]);
	/* the last place kept: 53 bits down from the top, not below 2^-1074 */
	const int floor_place = F::Z - 1074;
	int lo = h - 52 > floor_place ? h - 52 : floor_place;
	auto limb = [&](int i) -> uint64_t { return i >= 0 && i < (int)ND ? L[i] : 0; };
	uint64_t m;
	bool rb = false, sticky = false;
	if (lo < 0) {
		/* fewer than 53 bits above place 0: exact */
		m = shl(limb(0) | limb(1) << 32, (unsigned)-lo);
	} else {
		const int k = lo >> 5;
		const unsigned b = lo & 31;
		m = shr(limb(k) | limb(k + 1) << 32, b) | shl(limb(k + 2), 64 - b);
		m &= (1ull << 53) - 1;
		if (lo > 0) {
			const int r = lo - 1;
			rb = (limb(r >> 5) >> (r & 31)) & 1;
			for (int i = 0; i < (r >> 5) && !sticky; i++)
				sticky = L[i] != 0;
			sticky = sticky || (limb(r >> 5) & ((1u << (r & 31)) - 1));
		}
	}
	if (rb && ((m & 1) || sticky))
		m++;
	if (m >> 53) {
		m >>= 1;
		lo++;
	}
	if (!m)
		return 0;
	/* m 2^(lo - Z): normal when m has 53 bits, else subnormal (lo is
	 * then the least place, 2^-1074) */
	if (!(m >> 52))
		return m;
	const int e = lo - F::Z + 52 + 1023;
	if (e >= 2047)
		return 0x7ff0000000000000ull;
	return (uint64_t)e << 52 | (m & ((1ull << 52) - 1));
}

template <class F> __global__ void finish_exact(params p)
{
	const uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (s >= p.k)
		return;
	const uint32_t f = p.flags[2 * s];
	uint64_t r;
	if ((f & F_NAN) || (f & (F_PINF | F_NINF)) == (F_PINF | F_NINF)) {
		r = NAN_BITS;
	} else if (f & F_PINF) {
		r = 0x7ff0000000000000ull;
	} else if (f & F_NINF) {
		r = 0xfff0000000000000ull;
	} else {
		bool neg;
		r = round_digits<F>(p.digits + s * digits<F>(), &neg);
		if (r)
			r |= neg ? 0x8000000000000000ull : 0;
		else if (!F::SQ && p.off[s + 1] > p.off[s] && !(f & F_NOT_NZERO))
			r = 0x8000000000000000ull; /* only -0s */
	}
	p.rec[s] = r;
}

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

/* An empty segment's min (max): the dtype's largest (smallest) value. */
template <typename T, bool MAX> static __device__ __forceinline__ uint64_t empty_extreme()
{
	if constexpr (std::is_floating_point<T>::value)
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

template <typename T, bool MAX> __global__ void finish_ext(params p)
{
	const uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (s >= p.k)
		return;
	if (p.off[s + 1] == p.off[s]) {
		p.rec[s] = empty_extreme<T, MAX>();
		return;
	}
	long long key = (long long)(p.rec[s] ^ 0x8000000000000000ull);
	p.rec[s] = value_of_key<T, MAX>(key);
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

static inline unsigned finish_blocks(uint64_t k)
{
	return (unsigned)((k + 255) / 256);
}

template <typename T> static inline cudaError_t launch_isum(params p, cudaStream_t st)
{
	cudaError_t e = cudaMemsetAsync(p.rec, 0, p.k * 8, st);
	return e ? e : reduce<pol_isum<T>>(p, st);
}

template <typename T, bool MAX> static inline cudaError_t launch_ext(params p, cudaStream_t st)
{
	/* the worst key: 0 for a maximum, all ones for a minimum */
	cudaError_t e = cudaMemsetAsync(p.rec, MAX ? 0 : 0xff, p.k * 8, st);
	if (!e)
		e = reduce<pol_ext<T, MAX>>(p, st);
	if (!e) {
		finish_ext<T, MAX><<<finish_blocks(p.k), 256, 0, st>>>(p);
		e = cudaGetLastError();
	}
	return e;
}

/* The exact forms' scratch: k digits<F>() digits, then k flag words. */
template <class F>
static inline cudaError_t launch_exact(params p, void *scratch, size_t bytes, cudaStream_t st)
{
	if (bytes / scratch_per_seg<F>() < p.k)
		return cudaErrorInvalidValue;
	p.digits = (long long *)scratch;
	p.flags = (uint32_t *)(p.digits + p.k * digits<F>());
	cudaError_t e = cudaMemsetAsync(scratch, 0, p.k * scratch_per_seg<F>(), st);
	if (!e)
		e = reduce<pol_exact<F>>(p, st);
	if (!e) {
		finish_exact<F><<<finish_blocks(p.k), 256, 0, st>>>(p);
		e = cudaGetLastError();
	}
	return e;
}

} /* namespace grsr */
