/*
 * Exact sums of segments on the GPU (float sum and sumsq, integer sumsq):
 * the device code, on segred.cuh's walk. Each segment's sum is a
 * fixed-point number, its digits: 32-bit places in signed 64-bit words,
 * which the parts of a segment reach by integer atomics.
 *
 * The general path (pol_exact). An element (or its exact square, or an
 * integer's square in double) is a magnitude M < 2^MAGBITS times 2^(P - Z), with an integer
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
 * f32 sums (pol_xf32) take a path of their own in a warp's pieces: plain
 * double adds into three bins by exponent, each exact by its range, at a
 * third of the general path's instructions (pol_xf32 has the argument).
 *
 * The finish kernel, one thread a segment (a warp reading and zeroing
 * its 32 segments' digits in whole lines), folds the digits into 32-bit
 * limbs with their carries and rounds the two's complement number once to
 * the nearest double (ties to even, down to 2^-1074), with numpy's rules
 * for specials and -0 (segred.h).
 */
#pragma once

#include "cuda/exact-traits.cuh"
#include "cuda/segred.cuh"

namespace grsr {

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

/* The float formats' fields: bits type, mantissa bits, exponent mask. */
template <typename T> struct fbits;
template <> struct fbits<float> {
	using B = uint32_t;
	static constexpr int MB = 23;
	static constexpr unsigned EMAX = 0xffu;
	static __device__ __forceinline__ B bits(float x) { return __float_as_uint(x); }
};
template <> struct fbits<double> {
	using B = uint64_t;
	static constexpr int MB = 52;
	static constexpr unsigned EMAX = 0x7ffu;
	static __device__ __forceinline__ B bits(double x) { return (uint64_t)__double_as_longlong(x); }
};

/*
 * decode(x, hi, lo, P, neg): x's magnitude (hi:lo) and place, and sign,
 * for a finite x; returns its flags: F_SPECIAL bits for a NaN or an
 * infinity (then the magnitude and place are 0), F_NOT_NZERO for any
 * element but -0 (sums only: a sum of squares is never -0). Zero has
 * magnitude 0.
 *
 * Sums of f32 or f64 elements: M the significand (the implicit bit added
 * to normal numbers), the place the exponent field less one (0 for
 * subnormals, whose least place is that of the field 1).
 */
template <typename FT, int Z_, int PMAX_, int S_> struct fm_sum {
	using T = FT;
	using FB = fbits<FT>;
	using B = typename FB::B;
	static constexpr bool SQ = false;
	static constexpr int Z = Z_, PMAX = PMAX_, MAGBITS = FB::MB + 1, NW = 2, S = S_;
	static __device__ __forceinline__ uint32_t decode(FT x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		constexpr B SIGN = (B)1 << (8 * sizeof(B) - 1), MMASK = ((B)1 << FB::MB) - 1;
		const B b = FB::bits(x), m = b & MMASK;
		const unsigned e = (unsigned)(b >> FB::MB) & FB::EMAX;
		neg = b >> (8 * sizeof(B) - 1);
		hi = lo = 0;
		P = 0;
		if (e == FB::EMAX)
			return m ? F_NAN : neg ? F_NINF : F_PINF;
		lo = e ? (uint64_t)(m | ((B)1 << FB::MB)) : (uint64_t)m;
		P = e ? (int)e - 1 : 0;
		return b != SIGN ? F_NOT_NZERO : 0;
	}
};

using fm_f32 = fm_sum<float, 149, 253, 88>;
using fm_f64 = fm_sum<double, 1074, 2045, 63>;

/* Exact squares of an f32 or f64 element: M^2 (48 bits, or 106 in two
 * words) at twice the place; NaN stays NaN, either infinity gives +inf. */
template <class SUM, int Z_, int PMAX_, int NW_> struct fm_square {
	using T = typename SUM::T;
	static constexpr bool SQ = true;
	static constexpr int Z = Z_, PMAX = PMAX_, MAGBITS = 2 * SUM::MAGBITS, NW = NW_, S = 64;
	static __device__ __forceinline__ uint32_t decode(T x, uint64_t &hi, uint64_t &lo, int &P,
							  bool &neg)
	{
		uint32_t f = SUM::decode(x, hi, lo, P, neg);
		neg = false;
		if (f & F_SPECIAL)
			return f & F_NAN ? F_NAN : F_PINF;
		hi = MAGBITS > 64 ? __umul64hi(lo, lo) : 0;
		lo *= lo;
		P *= 2;
		return 0;
	}
};

using fm_f32sq = fm_square<fm_f32, 298, 506, 2>;
using fm_f64sq = fm_square<fm_f64, 2148, 4090, 3>;

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

/*
 * The fast path of one element, without a branch: its magnitude shifted
 * into acc when it is finite and inside the window, and when negative its
 * complement, the +1s counted in *ncomp (a - x = a + ~x + 1); zero adds
 * zero either way. Returns whether it must go the careful way instead
 * (finite, not zero, outside the window).
 */
template <class F>
static __device__ __forceinline__ bool fast_add(wacc<F::NW> &a, uint32_t &ncomp, typename F::T x, int P0,
						 uint32_t &fl)
{
	uint64_t hi, lo;
	int P;
	bool neg;
	uint32_t f = F::decode(x, hi, lo, P, neg);
	fl |= f;
	const unsigned s = (unsigned)(P - P0);
	const bool take = s <= (unsigned)F::S && !(f & F_SPECIAL);
	/* outside the window the shifts give garbage, masked off */
	uint64_t v[F::NW];
	shifted<F>(hi, lo, s, v);
	const uint64_t keep = take ? ~0ull : 0, flip = take && neg ? ~0ull : 0;
#pragma unroll
	for (int i = 0; i < F::NW; i++)
		v[i] = (v[i] & keep) ^ flip;
	acc_add<F::NW>(a, v, /* sub= */ false);
	ncomp += take && neg;
	return !take && !(f & F_SPECIAL) && (hi | lo);
}

/* The elements of v[0..N) whose bits are set in cm, the careful way;
 * returns their flags. */
template <class F, unsigned N>
static __device__ __forceinline__ uint32_t careful_batch(long long *d, const typename F::T *v, uint32_t cm)
{
	uint32_t fl = 0;
#pragma unroll
	for (unsigned g = 0; g < N; g++) {
		if (cm >> g & 1) {
			uint64_t hi, lo;
			int P;
			bool neg;
			fl |= F::decode(v[g], hi, lo, P, neg);
			if (hi | lo)
				deposit_element<F>(d, lo, hi, P, neg);
		}
	}
	return fl;
}

/* acc += n, a count of +1s */
template <int NW> static __device__ __forceinline__ void acc_add_small(wacc<NW> &a, uint32_t n)
{
	uint64_t v[NW] = { n };
	acc_add<NW>(a, v, /* sub= */ false);
}

/* What pads a piece's last loads: adds nothing, changes no flag. */
template <typename T> static __device__ __forceinline__ T pad_value()
{
	return std::is_floating_point<T>::value ? T(-0.0) : T(0);
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

/* Exact sums of a form F, of elements read as IN says. */
template <class F, class IN = grwiden::in<typename F::T>> struct pol_exact : tuning {
	using E = typename F::T;
	using R = typename IN::R;
	static __device__ __forceinline__ long long *dig(const params &p, uint64_t seg)
	{
		return p.digits + seg * digits<F>();
	}
	/* two passes over the few elements (the second from L1), not
	 * unrolled: the loop's registers are the warp pieces' */
	static __device__ __forceinline__ void lane_seg(const params &p, uint64_t lo, uint64_t hi,
							uint64_t seg)
	{
		const R *x = (const R *)p.x;
		int top = 0;
#pragma unroll 1
		for (uint64_t i = lo; i < hi; i++) {
			int P = place_of<F>(grwiden::ld<IN>(x, i));
			top = P > top ? P : top;
		}
		const int P0 = window_base(top, F::S);
		wacc<F::NW> a = {};
		uint32_t fl = 0;
		long long *d = dig(p, seg);
#pragma unroll 1
		for (uint64_t i = lo; i < hi; i++)
			exact_add<F>(a, grwiden::ld<IN>(x, i), P0, fl, d);
		exact_flush<F>(a, P0, fl, d, p.flags + 2 * seg);
	}
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		const R *x = (const R *)p.x;
		/* the window: from each lane's first element */
		int P = lo + lane < hi ? place_of<F>(grwiden::ld<IN>(x, lo + lane)) : 0;
		const int P0 = window_base((int)__reduce_max_sync(FULL, (unsigned)P), F::S);
		wacc<F::NW> a = {};
		uint32_t fl = 0, ncomp = 0;
		long long *d = dig(p, seg);
		for_batches_in<LOAD_BYTES, IN>(x, lo + lane, hi, pad_value<E>(), [&](const E *v, auto n) {
			constexpr unsigned N = decltype(n)::value;
			uint32_t cm = 0;
#pragma unroll
			for (unsigned g = 0; g < N; g++)
				cm |= (uint32_t)fast_add<F>(a, ncomp, v[g], P0, fl) << g;
			if (cm)
				fl |= careful_batch<F, N>(d, v, cm);
		});
		acc_add_small<F::NW>(a, ncomp);
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

/* a += v when x <= lim (unsigned): a compare and a predicated add, where a
 * select would take two more instructions */
static __device__ __forceinline__ void add_if_le(double &a, double v, unsigned x, unsigned lim)
{
	asm("{\n\t.reg .pred p;\n\tsetp.le.u32 p, %2, %3;\n\t@p add.rn.f64 %0, %0, %1;\n\t}"
	    : "+d"(a)
	    : "d"(v), "r"(x), "r"(lim));
}

/*
 * f32 sums of a warp's piece: each lane adds its elements in three
 * doubles, a0 for exponent fields E - 22 to E, a1 for the 23 below, a2
 * for the 23 below those, E being HEAD above the largest finite element
 * of the lanes' first batch. A bin's elements are multiples of its least place,
 * 2^(L - 150) for its lowest field L (or 2^-149 where L < 1), and below
 * 2^(L + 22 - 126); a lane adds at most 128 of them in a piece (a tile
 * over 32 lanes), so every partial sum is a multiple of that place below
 * 2^53 times it, and every add is exact. At the end each bin, scaled to
 * its least place, is an integer below 2^53; the warp sums them as
 * integers and one lane puts them into the digits. Elements above E
 * (infinities and NaNs among them) or below the lowest bin, but zeros,
 * go the careful way. Per element: a few integer operations on its
 * bits, one conversion and three predicated double adds, where the
 * general path's 64-bit shifts and carries take some 60 instructions.
 */
template <class IN = grwiden::in<float>> struct pol_xf32 : pol_exact<fm_f32, IN> {
	using B = pol_exact<fm_f32, IN>;
	using R = typename IN::R;
	static constexpr unsigned LOAD_BYTES = B::LOAD_BYTES;
	/* Its loop is the lightest of the exact sums', and it waits on the
	 * memory: the first 4 KiB of a warp's tile, and each batch 2 KiB
	 * ahead, into L2, which brings short segments of f32 level with
	 * CUB's segmented sum (docs/BENCHMARKS.md); a whole 16 KiB tile a
	 * warp overflows L2 and is slower. */
	static constexpr unsigned L2_START = 4096, L2_AHEAD = 2048;
	static __device__ __forceinline__ void warp_piece(const params &p, uint64_t lo, uint64_t hi,
							  uint64_t seg, unsigned lane)
	{
		using F = fm_f32;
		constexpr unsigned U = loads<float, LOAD_BYTES>();
		const R *x = (const R *)p.x;
		/* the first batch (-0 pads it: -0 adds nothing and sets no
		 * flag), whose largest finite element sets the window (a part
		 * that begins with zeros or tiny values still gets a window
		 * for the rest, where the first element alone would send them
		 * the careful way) */
		uint64_t i = lo + lane;
		float first[U];
#pragma unroll
		for (unsigned g = 0; g < U; g++)
			first[g] = i + 32 * g < hi ? grwiden::ld<IN>(x, i + 32 * g) : -0.0f;
		uint32_t m0 = 0; /* the largest finite magnitude's bits */
#pragma unroll
		for (unsigned g = 0; g < U; g++) {
			const uint32_t m = __float_as_uint(first[g]) & 0x7fffffffu;
			m0 = max(m0, m < 0x7f800000u ? m : 0u);
		}
		const int top = (int)(__reduce_max_sync(FULL, m0) >> 23);
		const int E = top + HEAD < 254 ? top + HEAD : 254;
		const int L0 = E - 22, L1 = E - 45, L2 = E - 68;
		double a0 = 0, a1 = 0, a2 = 0;
		uint32_t fl = 0, notnz = 0;
		long long *d = B::dig(p, seg);
		auto add = [&](float v) -> bool {
			const uint32_t b = __float_as_uint(v);
			/* binades below the window's top: bin k / 23 (no branch:
			 * one compare and a predicated add a bin) */
			const unsigned k = (unsigned)(E - (int)((b >> 23) & 0xffu));
			const double dv = (double)v;
			notnz |= b ^ 0x80000000u;
			add_if_le(a0, dv, k, 22);
			add_if_le(a1, dv, k - 23, 22);
			add_if_le(a2, dv, k - 46, 22);
			return k > 68 && (b & 0x7fffffffu);
		};
		/* A batch whose elements all lie in bin 0 (or are zero), as
		 * nearly all do on real data, takes one conversion and one add
		 * an element; any other goes through add(). */
		const uint32_t B0 = (uint32_t)L0 << 23;
		constexpr uint32_t W0 = 23u << 23;
		auto batch = [&](const float *v, auto n) {
			constexpr unsigned N = decltype(n)::value;
			bool in0 = true;
#pragma unroll
			for (unsigned g = 0; g < N; g++) {
				const uint32_t b = __float_as_uint(v[g]), m = b & 0x7fffffffu;
				notnz |= b ^ 0x80000000u;
				in0 &= m - B0 < W0 || !m;
			}
			if (in0) {
#pragma unroll
				for (unsigned g = 0; g < N; g++)
					a0 += (double)v[g];
				return;
			}
			uint32_t cm = 0;
#pragma unroll
			for (unsigned g = 0; g < N; g++)
				cm |= (uint32_t)add(v[g]) << g;
			if (cm)
				fl |= careful_batch<F, N>(d, v, cm);
		};
		batch(first, std::integral_constant<unsigned, U>());
		for_batches_in<LOAD_BYTES, IN, decltype(batch), L2_AHEAD>(x, i + 32 * U, hi, -0.0f, batch);
		fl |= notnz ? F_NOT_NZERO : 0;
		/* the bins as integers at their least places, summed over the
		 * warp where any lane has one (bins 1 and 2 seldom) */
		const int L[3] = { L0 > 1 ? L0 : 1, L1 > 1 ? L1 : 1, L2 > 1 ? L2 : 1 };
		const double a[3] = { a0, a1, a2 };
		fl = __reduce_or_sync(FULL, fl);
#pragma unroll
		for (int j = 0; j < 3; j++) {
			if (!__any_sync(FULL, a[j] != 0.0))
				continue;
			long long t = __double2ll_rn(a[j] * gre::pow2(150 - L[j]));
#pragma unroll
			for (int m = 16; m; m >>= 1)
				t += __shfl_xor_sync(FULL, t, m);
			if (lane == 0 && t) {
				const uint64_t mag = t < 0 ? (uint64_t)-t : (uint64_t)t;
				deposit<F, 1>(d, &mag, L[j] - 1, t < 0);
			}
		}
		if (lane == 0 && fl)
			atomicOr(p.flags + 2 * seg, fl);
	}
};

/* The policy of a form's exact sums (of elements read as IN says): f32
 * sums in doubles, the others in integers. */
template <class F, class IN = grwiden::in<typename F::T>> struct exact_policy {
	using type = pol_exact<F, IN>;
};
template <class IN> struct exact_policy<fm_f32, IN> {
	using type = pol_xf32<IN>;
};

/* ---- the finish: one thread a segment ---- */


/*
 * The digits d[0..ND) (signed, weighing 2^(32 i - Z)) rounded to the
 * nearest double, ties to even, down to 2^-1074: the bits of its
 * magnitude, its sign in *neg; 0 for zero.
 *
 * With few digits (REGS: f32 sums and squares, integer squares) every
 * loop is unrolled and every limb picked by compares, not by index, so
 * that the limbs stay in registers (indexed, they went to local memory,
 * and the finish took a sixteenth of a segmented f32 sum's time).
 */
template <class F> static __device__ uint64_t round_digits(const long long *d, bool *neg)
{
	constexpr unsigned ND = digits<F>();
	constexpr bool REGS = ND <= 24;
	uint32_t L[ND];
	long long c = 0;
#pragma unroll(REGS ? ND : 4)
	for (unsigned i = 0; i < ND; i++) {
		long long t = d[i] + c;
		L[i] = (uint32_t)t;
		c = t >> 32;
	}
	*neg = c < 0;
	if (c < 0) {
		/* the magnitude: 2^(32 ND) - L */
		uint32_t carry = 1;
		auto negate = [&](unsigned i) {
			uint32_t v = ~L[i] + carry;
			carry = carry && v == 0;
			L[i] = v;
		};
		if constexpr (REGS) {
#pragma unroll
			for (unsigned i = 0; i < ND; i++)
				negate(i);
		} else {
			for (unsigned i = 0; i < ND; i++)
				negate(i);
		}
	}
	auto limb = [&](int i) -> uint64_t {
		if constexpr (REGS) {
			uint32_t v = 0;
#pragma unroll
			for (unsigned j = 0; j < ND; j++)
				v = (int)j == i ? L[j] : v;
			return v;
		} else {
			return i >= 0 && i < (int)ND ? L[i] : 0;
		}
	};
	int top = (int)ND - 1;
	if constexpr (REGS) {
		top = -1;
#pragma unroll
		for (unsigned i = 0; i < ND; i++)
			top = L[i] ? (int)i : top;
	} else {
		while (top >= 0 && !L[top])
			top--;
	}
	if (top < 0)
		return 0;
	const int h = top * 32 + 31 - __clz((uint32_t)limb(top));
	/* the last place kept: 53 bits down from the top, not below 2^-1074 */
	const int floor_place = F::Z - 1074;
	int lo = h - 52 > floor_place ? h - 52 : floor_place;
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
			const uint32_t lr = (uint32_t)limb(r >> 5);
			rb = (lr >> (r & 31)) & 1;
			if constexpr (REGS) {
#pragma unroll
				for (unsigned i = 0; i < ND; i++)
					sticky = sticky || ((int)i < (r >> 5) && L[i] != 0);
			} else {
				for (int i = 0; i < (r >> 5) && !sticky; i++)
					sticky = L[i] != 0;
			}
			sticky = sticky || (lr & ((1u << (r & 31)) - 1));
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

/* A segment's record from its digits d and flags f */
template <class F>
static __device__ __forceinline__ uint64_t record_of(const long long *d, uint32_t f, const params &p,
						     uint64_t s)
{
	if ((f & F_NAN) || (f & (F_PINF | F_NINF)) == (F_PINF | F_NINF))
		return NAN_BITS;
	if (f & F_PINF)
		return 0x7ff0000000000000ull;
	if (f & F_NINF)
		return 0xfff0000000000000ull;
	bool neg;
	uint64_t r = round_digits<F>(d, &neg);
	if (r)
		r |= neg ? 0x8000000000000000ull : 0;
	else if (!F::SQ && p.off[s + 1] > p.off[s] && !(f & F_NOT_NZERO))
		r = 0x8000000000000000ull; /* only -0s */
	return r;
}

/* Each segment's record from its digits and flags, which it leaves zero
 * (for the next launch on the scratch: launch_exact). A warp's 32
 * segments' digits are one run of the scratch: with few digits (the
 * register form of round_digits) the warp reads the run in whole lines
 * into shared memory (rows of an odd number of words, so that the lanes'
 * reads of their rows meet no bank twice) and each lane rounds its row
 * from there; every form zeroes the run in whole lines. Thread by thread,
 * a segment's words a lane, the reads and writes were 32 pieces of lines
 * each, and the finish spent its time in L2's requests. */
template <class F> __global__ void finish_exact(params p)
{
	constexpr unsigned ND = digits<F>();
	constexpr unsigned ROW = ND | 1, WPB = FINISH_THREADS / 32;
	constexpr bool STAGE = ND <= 24 && WPB * 32 * ROW * 8 <= 48 * 1024;
	__shared__ long long rows[STAGE ? WPB * 32 * ROW : 1];
	const unsigned lane = threadIdx.x & 31;
	const uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, s0 = s - lane;
	if (s0 >= p.k)
		return;
	const unsigned ns = p.k - s0 < 32 ? (unsigned)(p.k - s0) : 32u;
	long long *run = p.digits + s0 * ND;
	const long long *row = run + lane * ND;
	if constexpr (STAGE) {
		long long *w = rows + (threadIdx.x >> 5) * 32 * ROW;
#pragma unroll
		for (unsigned j = 0; j < ND; j++) {
			const unsigned i = j * 32 + lane;
			if (i < ns * ND)
				w[i / ND * ROW + i % ND] = run[i];
		}
		__syncwarp();
		row = w + lane * ROW;
	}
	if (lane < ns)
		p.rec[s] = record_of<F>(row, p.flags[2 * s], p, s);
	__syncwarp();
#pragma unroll 4
	for (unsigned i = lane; i < ns * ND; i += 32)
		run[i] = 0;
	if (lane < ns)
		((uint2 *)p.flags)[s] = make_uint2(0, 0);
}


/* The exact forms' scratch: k digits<F>() digits, then k flag words;
 * cleared first unless *zero (bytes known zero from the start, where not
 * NULL) covers them, and left zero by the finish (*zero says so on
 * success). */
template <class F, class IN = grwiden::in<typename F::T>>
static inline cudaError_t launch_exact(params p, void *scratch, size_t bytes, size_t *zero,
				       cudaStream_t st)
{
	const size_t used = p.k * scratch_per_seg<F>(), was = zero ? *zero : 0;
	const bool clear = was < used;
	if (zero)
		*zero = 0;
	if (bytes / scratch_per_seg<F>() < p.k)
		return cudaErrorInvalidValue;
	p.digits = (long long *)scratch;
	p.flags = (uint32_t *)(p.digits + p.k * digits<F>());
	cudaError_t e = clear ? cudaMemsetAsync(scratch, 0, used, st) : cudaSuccess;
	if (!e)
		e = reduce<typename exact_policy<F, IN>::type>(p, st);
	if (!e) {
		finish_exact<F><<<finish_blocks(p.k), FINISH_THREADS, 0, st>>>(p);
		e = cudaGetLastError();
	}
	if (!e && zero)
		*zero = was > used ? was : used;
	return e;
}

} /* namespace grsr */
