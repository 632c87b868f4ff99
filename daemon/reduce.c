/*
 * The reduction kernels.
 *
 * Float sums and sumsq of f32/f64 are exact (reduce.h): each block fills
 * the exact accumulator of its partial, and how blocks, chunks and threads
 * group the work cannot show in the result. The kernels, and the rounding
 * once at the end, are below under "exact float sums".
 *
 * The other ops keep a fixed lane layout inside a block:
 *
 *   - a block keeps L accumulators, L = 32 for 4-byte dtypes and 16 for
 *     8-byte ones (a group of L elements is 128 bytes); element i of the
 *     block (counted from the block's first element, never from an
 *     address) goes to accumulator i % L;
 *   - at the end of the block the accumulators are folded in a fixed tree:
 *     for w = L/2, ..., 2, 1: acc[k] = acc[k] (+) acc[k + w] for k < w;
 *   - sumsq of integers adds doubles: x is converted to double (exactly
 *     for i32 and u32; rounded to nearest for i64 and u64), and adds the
 *     rounded product x * x (never a fused multiply-add); its block
 *     partials are then added exactly and rounded once, like float sums;
 *   - float min/max order -0 below +0 (a zero result is -0 for min when
 *     any element is -0, +0 for max when any is +0, whatever the order),
 *     and any NaN in the block makes the block's result NaN.
 *
 * Integer sums wrap modulo 2^64 and integer min/max are exact, so their
 * order does not matter; they use the same loops for speed only.
 *
 * The hot loops are written with GCC vector extensions rather than left to
 * the auto-vectoriser, so every build (whatever -O level) gets the same
 * vector code and the lane layout stays the one described above. Loads go
 * through memcpy, so the data may sit at any address. Each kernel is
 * built for AVX2 (which brings no FMA) next to the x86-64 baseline; both
 * compute the same bits, the AVX2 one just does it in wider registers.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/reduce.h"

#define GR_INLINE inline __attribute__((always_inline))

/*
 * On x86-64 every kernel is compiled twice, for the baseline and for AVX2,
 * and the AVX2 table is picked at run time when the CPU has it (or the
 * baseline when GPURED_REDUCE_ISA=baseline, for tests). A table chosen in
 * code, rather than target_clones' ifuncs, keeps the kernels' addresses out
 * of load-time relocations, which sanitizer runtimes cannot survive.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define GR_HAVE_AVX2 1
#define GR_AVX2 __attribute__((target("avx2")))
#define GR_AVX2_ONLY(...) __VA_ARGS__
#else
#define GR_AVX2_ONLY(...)
#endif

typedef double v4df __attribute__((vector_size(32)));
typedef float v4sf __attribute__((vector_size(16)));
typedef int64_t v4di __attribute__((vector_size(32)));
typedef uint64_t v4du __attribute__((vector_size(32)));
typedef int32_t v4si __attribute__((vector_size(16)));
typedef uint32_t v4su __attribute__((vector_size(16)));
typedef float v8sf __attribute__((vector_size(32)));
typedef int32_t v8si __attribute__((vector_size(32)));
typedef uint32_t v8su __attribute__((vector_size(32)));
typedef double v2df __attribute__((vector_size(16)));
typedef int64_t v2di __attribute__((vector_size(16)));
typedef uint64_t v2du __attribute__((vector_size(16)));

typedef void (*gr_block_fn)(const unsigned char *p, size_t n, gr_partial *ret);

/* ---- loads: four elements at p, any alignment ---- */

static GR_INLINE void ld_f64(v4df *ret, const unsigned char *p)
{
	memcpy(ret, p, sizeof(*ret));
}

static GR_INLINE void ld_f32_as_f64(v4df *ret, const unsigned char *p)
{
	float t[4];
	memcpy(t, p, sizeof(t));
	/* GCC 12 turns this form, not __builtin_convertvector, into one
	 * vcvtps2pd ymm under AVX. */
	*ret = (v4df){t[0], t[1], t[2], t[3]};
}

static GR_INLINE void ld_i32_as_f64(v4df *ret, const unsigned char *p)
{
	int32_t t[4];
	memcpy(t, p, sizeof(t));
	*ret = (v4df){t[0], t[1], t[2], t[3]};
}

/* No baseline instruction converts 64-bit integers in vectors; lanes. */
static GR_INLINE void ld_i64_as_f64(v4df *ret, const unsigned char *p)
{
	int64_t t[4];
	memcpy(t, p, sizeof(t));
	*ret = (v4df){(double)t[0], (double)t[1], (double)t[2], (double)t[3]};
}

static GR_INLINE void ld_u64_as_f64(v4df *ret, const unsigned char *p)
{
	uint64_t t[4];
	memcpy(t, p, sizeof(t));
	*ret = (v4df){(double)t[0], (double)t[1], (double)t[2], (double)t[3]};
}

static GR_INLINE void ld_i32_as_u64(v4du *ret, const unsigned char *p)
{
	int32_t t[4];
	memcpy(t, p, sizeof(t));
	*ret = (v4du){(uint64_t)t[0], (uint64_t)t[1], (uint64_t)t[2], (uint64_t)t[3]};
}

static GR_INLINE void ld_u32_as_u64(v4du *ret, const unsigned char *p)
{
	uint32_t t[4];
	memcpy(t, p, sizeof(t));
	*ret = (v4du){t[0], t[1], t[2], t[3]};
}

static GR_INLINE void ld_u64(v4du *ret, const unsigned char *p)
{
	memcpy(ret, p, sizeof(*ret));
}

/* 2^52 + x has x in its low mantissa bits: an exact u32 -> double. */
static GR_INLINE void ld_u32_as_f64(v4df *ret, const unsigned char *p)
{
	v4du w;
	ld_u32_as_u64(&w, p);
	w |= 0x4330000000000000ull;
	v4df d;
	memcpy(&d, &w, sizeof(d));
	*ret = d - 0x1p52;
}

/* One element as double, for the tail of a block. */
#define SCALAR_AS_F64(T)                                                                           \
	static inline double sc_##T##_as_f64(const unsigned char *p)                               \
	{                                                                                          \
		T x;                                                                               \
		memcpy(&x, p, sizeof(x));                                                          \
		return (double)x;                                                                  \
	}
SCALAR_AS_F64(int32_t)
SCALAR_AS_F64(int64_t)
SCALAR_AS_F64(uint32_t)
SCALAR_AS_F64(uint64_t)

#define SCALAR_AS_U64(T)                                                                           \
	static inline uint64_t sc_##T##_as_u64(const unsigned char *p)                             \
	{                                                                                          \
		T x;                                                                               \
		memcpy(&x, p, sizeof(x));                                                          \
		return (uint64_t)x;                                                                \
	}
SCALAR_AS_U64(int32_t)
SCALAR_AS_U64(int64_t)
SCALAR_AS_U64(uint32_t)
SCALAR_AS_U64(uint64_t)

/* ---- double accumulation: sumsq of integers ---- */

/* clang-format off: the kernels are macros that it would fold badly */
/* A group is 128 bytes of input: 32 lanes for 4-byte types, 16 for 8-byte. */
#define GROUP_BYTES 128
#define UNROLL _Pragma("GCC unroll 8")

#define DEF_FACC_ONE(NAME, ATTR, T, LOAD4, SCALAR, MAP)                                            \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		enum { es = sizeof(T), L = GROUP_BYTES / es, NV = L / 4 };                         \
		v4df a[NV];                                                                        \
		UNROLL                                                                             \
		for (unsigned v = 0; v < NV; v++)                                                  \
			a[v] = (v4df){0};                                                          \
		size_t i = 0;                                                                      \
		for (; i + L <= n; i += L) {                                                       \
			const unsigned char *q = p + i * es;                                       \
			UNROLL                                                                     \
			for (unsigned v = 0; v < NV; v++) {                                        \
				v4df x;                                                            \
				LOAD4(&x, q + v * 4 * es);                                         \
				a[v] += MAP(x);                                                    \
			}                                                                          \
		}                                                                                  \
		double lane[L];                                                                    \
		memcpy(lane, a, sizeof(lane));                                                     \
		for (; i < n; i++) {                                                               \
			double x = SCALAR(p + i * es);                                             \
			lane[i % L] += MAP(x);                                                     \
		}                                                                                  \
		for (unsigned w = L / 2; w; w /= 2)                                                \
			for (unsigned k = 0; k < w; k++)                                           \
				lane[k] += lane[k + w];                                            \
		ret->v.f = lane[0];                                                                \
	}

/* MAP is applied to vectors and scalars alike. */
#define MAP_SQ(x) ((x) * (x))

#define DEF_FACC(NAME, T, LOAD4, SCALAR, MAP)                                                      \
	DEF_FACC_ONE(NAME##_base, , T, LOAD4, SCALAR, MAP)                                         \
	GR_AVX2_ONLY(DEF_FACC_ONE(NAME##_avx2, GR_AVX2, T, LOAD4, SCALAR, MAP))

DEF_FACC(sumsq_i32, int32_t, ld_i32_as_f64, sc_int32_t_as_f64, MAP_SQ)
DEF_FACC(sumsq_u32, uint32_t, ld_u32_as_f64, sc_uint32_t_as_f64, MAP_SQ)
DEF_FACC(sumsq_i64, int64_t, ld_i64_as_f64, sc_int64_t_as_f64, MAP_SQ)
DEF_FACC(sumsq_u64, uint64_t, ld_u64_as_f64, sc_uint64_t_as_f64, MAP_SQ)

/* ---- integer sums, wrapping modulo 2^64 ---- */

#define DEF_ISUM_ONE(NAME, ATTR, T, LOAD4, SCALAR)                                                 \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		const size_t es = sizeof(T);                                                       \
		v4du a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                       \
		size_t i = 0;                                                                      \
		for (; i + 16 <= n; i += 16) {                                                     \
			const unsigned char *q = p + i * es;                                       \
			v4du x0, x1, x2, x3;                                                       \
			LOAD4(&x0, q);                                                             \
			LOAD4(&x1, q + 4 * es);                                                    \
			LOAD4(&x2, q + 8 * es);                                                    \
			LOAD4(&x3, q + 12 * es);                                                   \
			a0 += x0;                                                                  \
			a1 += x1;                                                                  \
			a2 += x2;                                                                  \
			a3 += x3;                                                                  \
		}                                                                                  \
		v4du a = (a0 + a1) + (a2 + a3);                                                    \
		uint64_t s = a[0] + a[1] + a[2] + a[3];                                            \
		for (; i < n; i++)                                                                 \
			s += SCALAR(p + i * es);                                                   \
		ret->v.u = s;                                                                      \
	}

#define DEF_ISUM(NAME, T, LOAD4, SCALAR)                                                           \
	DEF_ISUM_ONE(NAME##_base, , T, LOAD4, SCALAR)                                              \
	GR_AVX2_ONLY(DEF_ISUM_ONE(NAME##_avx2, GR_AVX2, T, LOAD4, SCALAR))

DEF_ISUM(sum_i32, int32_t, ld_i32_as_u64, sc_int32_t_as_u64)
DEF_ISUM(sum_u32, uint32_t, ld_u32_as_u64, sc_uint32_t_as_u64)
DEF_ISUM(sum_i64, int64_t, ld_u64, sc_int64_t_as_u64)
DEF_ISUM(sum_u64, uint64_t, ld_u64, sc_uint64_t_as_u64)

/* ---- min and max ---- */

/*
 * VT: a vector of W elements of type T, MT its mask type; CMP: < for min,
 * > for max. A lane takes x only when x CMP lane, so a NaN x is never
 * taken; NaNs are noted apart, in a mask, without a branch. So are the
 * elements' sign bits, ORed for min and ANDed for max: when the result is
 * a zero, every element is >= 0 (min) or <= 0 (max), so a set (clear)
 * sign bit can only be a -0's (+0's), and it gives the zero's sign.
 */
#define DEF_MINMAX_ONE(NAME, ATTR, T, VT, MT, W, CMP, INIT, IS_FLOAT, STORE)                       \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		enum { es = sizeof(T), L = GROUP_BYTES / es, NV = L / W };                         \
		VT m[NV];                                                                          \
		UNROLL                                                                             \
		for (unsigned v = 0; v < NV; v++)                                                  \
			for (unsigned k = 0; k < W; k++)                                           \
				m[v][k] = INIT;                                                    \
		MT nan = {0};                                                                      \
		const bool is_min = 0 CMP 1;                                                       \
		MT sg;                                                                             \
		for (unsigned k = 0; k < W; k++)                                                   \
			sg[k] = is_min ? 0 : -1;                                                   \
		size_t i = 0;                                                                      \
		for (; i + L <= n; i += L) {                                                       \
			const unsigned char *q = p + i * es;                                       \
			UNROLL                                                                     \
			for (unsigned v = 0; v < NV; v++) {                                        \
				VT x;                                                              \
				memcpy(&x, q + v * W * es, sizeof(x));                             \
				MT c = x CMP m[v];                                                 \
				m[v] = (VT)(((MT)x & c) | ((MT)m[v] & ~c));                        \
				if (IS_FLOAT) {                                                    \
					nan |= x != x;                                             \
					sg = is_min ? sg | (MT)x : sg & (MT)x;                     \
				}                                                                  \
			}                                                                          \
		}                                                                                  \
		T lane[L];                                                                         \
		memcpy(lane, m, sizeof(lane));                                                     \
		int anynan = 0;                                                                    \
		bool neg = !is_min;                                                                \
		for (unsigned k = 0; k < W; k++) {                                                 \
			anynan |= nan[k] != 0;                                                     \
			neg = is_min ? neg || sg[k] < 0 : neg && sg[k] < 0;                        \
		}                                                                                  \
		for (; i < n; i++) {                                                               \
			T x;                                                                       \
			memcpy(&x, p + i * es, sizeof(x));                                         \
			if (x CMP lane[i % L])                                                     \
				lane[i % L] = x;                                                   \
			anynan |= x != x;                                                          \
			bool s = p[i * es + es - 1] >> 7;                                          \
			neg = is_min ? neg || s : neg && s;                                        \
		}                                                                                  \
		for (unsigned w = L / 2; w; w /= 2)                                                \
			for (unsigned k = 0; k < w; k++)                                           \
				if (lane[k + w] CMP lane[k])                                       \
					lane[k] = lane[k + w];                                     \
		STORE;                                                                             \
		if (IS_FLOAT && anynan)                                                            \
			ret->v.f = NAN;                                                            \
		else if (IS_FLOAT && ret->v.f == 0)                                                \
			ret->v.f = neg ? -0.0 : 0.0;                                               \
	}

#pragma GCC diagnostic push
/* x != x is the NaN test on floats, and always false (folded) on integers. */
#pragma GCC diagnostic ignored "-Wtautological-compare"
/* The baseline gets 16-byte vectors (GCC splits wider compares into
 * scalars there), AVX2 32-byte ones; the lanes are the same. */
#define DEF_MINMAX(NAME, T, VT16, MT16, W16, VT32, MT32, W32, CMP, INIT, IS_FLOAT, STORE)          \
	DEF_MINMAX_ONE(NAME##_base, , T, VT16, MT16, W16, CMP, INIT, IS_FLOAT, STORE)              \
	GR_AVX2_ONLY(                                                                              \
	    DEF_MINMAX_ONE(NAME##_avx2, GR_AVX2, T, VT32, MT32, W32, CMP, INIT, IS_FLOAT, STORE))

DEF_MINMAX(min_f32, float, v4sf, v4si, 4, v8sf, v8si, 8, <, INFINITY, 1, ret->v.f = lane[0])
DEF_MINMAX(max_f32, float, v4sf, v4si, 4, v8sf, v8si, 8, >, -INFINITY, 1, ret->v.f = lane[0])
DEF_MINMAX(min_f64, double, v2df, v2di, 2, v4df, v4di, 4, <, INFINITY, 1, ret->v.f = lane[0])
DEF_MINMAX(max_f64, double, v2df, v2di, 2, v4df, v4di, 4, >, -INFINITY, 1, ret->v.f = lane[0])
DEF_MINMAX(min_i32, int32_t, v4si, v4si, 4, v8si, v8si, 8, <, INT32_MAX, 0, ret->v.i = lane[0])
DEF_MINMAX(max_i32, int32_t, v4si, v4si, 4, v8si, v8si, 8, >, INT32_MIN, 0, ret->v.i = lane[0])
DEF_MINMAX(min_u32, uint32_t, v4su, v4si, 4, v8su, v8si, 8, <, UINT32_MAX, 0, ret->v.u = lane[0])
DEF_MINMAX(max_u32, uint32_t, v4su, v4si, 4, v8su, v8si, 8, >, 0, 0, ret->v.u = lane[0])
DEF_MINMAX(min_i64, int64_t, v2di, v2di, 2, v4di, v4di, 4, <, INT64_MAX, 0, ret->v.i = lane[0])
DEF_MINMAX(max_i64, int64_t, v2di, v2di, 2, v4di, v4di, 4, >, INT64_MIN, 0, ret->v.i = lane[0])
DEF_MINMAX(min_u64, uint64_t, v2du, v2di, 2, v4du, v4di, 4, <, UINT64_MAX, 0, ret->v.u = lane[0])
DEF_MINMAX(max_u64, uint64_t, v2du, v2di, 2, v4du, v4di, 4, >, 0, 0, ret->v.u = lane[0])
#pragma GCC diagnostic pop

/* clang-format on */

/* ---- the exact accumulator (reduce.h) ---- */

enum {
	XF_NAN = GR_PARTIAL_NAN,
	XF_PINF = GR_PARTIAL_PINF,
	XF_NINF = GR_PARTIAL_NINF,
	XF_SEEN = GR_PARTIAL_SEEN, /* an element other than -0.0 */
	XF_XACC = 1u << 8,         /* the value is xacc + v.f: set by every exact partial */
	XF_SPECIALS = XF_NAN | XF_PINF | XF_NINF,
};

#define XW GR_PARTIAL_XWORDS

/*
 * a += m * 2^b (or -= when neg), b counted from bit 0 of a. Bits that
 * would land below bit 0 must be zero (callers place exact values only);
 * carries past the top word are dropped (values stay in range).
 */
static void xacc_addmag(uint64_t *a, int b, unsigned __int128 m, bool neg)
{
	if (!m)
		return;
	if (b < 0) {
		m = -b < 128 ? m >> -b : 0;
		b = 0;
	}
	unsigned w = (unsigned)b / 64, s = (unsigned)b % 64;
	if (w >= XW)
		return;
	uint64_t x[3] = {(uint64_t)m << s, s ? (uint64_t)(m >> (64 - s)) : (uint64_t)(m >> 64),
	                 s ? (uint64_t)(m >> 64 >> (64 - s)) : 0};
	uint64_t c = 0;
	for (unsigned k = 0; w + k < XW; k++) {
		uint64_t d = k < 3 ? x[k] : 0;
		if (k >= 3 && !c)
			break;
		uint64_t o = a[w + k];
		if (!neg) {
			uint64_t s1 = o + d, c1 = s1 < d;
			a[w + k] = s1 + c;
			c = c1 | (a[w + k] < s1);
		} else {
			uint64_t s1 = o - d, c1 = o < d;
			a[w + k] = s1 - c;
			c = c1 | (s1 < c);
		}
	}
}

/* a += d * 2^scale, d finite; exact as long as the result's bits lie in range. */
static void xacc_add_f64(uint64_t *a, double d, int scale)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	unsigned e = (bits >> 52) & 0x7ff;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	if (!m)
		return;
	int lsb = (e ? (int)e - 1075 : -1074) + scale;
	int tz = __builtin_ctzll(m);
	xacc_addmag(a, lsb + tz - GR_PARTIAL_EXP_MIN, m >> tz, bits >> 63);
}

/* a += b, word by word */
static void xacc_add_words(uint64_t *a, const uint64_t *b)
{
	uint64_t c = 0;
	for (unsigned k = 0; k < XW; k++) {
		uint64_t s = a[k] + b[k], c1 = s < b[k];
		a[k] = s + c;
		c = c1 | (a[k] < s);
	}
}

/* Make p an exact partial (xacc + flags), folding in a double left in v.f. */
static void xacc_open(gr_partial *p)
{
	if (p->xflags & XF_XACC) {
		if (p->v.f != 0.0) {
			double f = p->v.f;
			p->v.f = 0.0;
			xacc_add_f64(p->xacc, f, 0);
		}
		p->v.f = 0.0;
		return;
	}
	double f = p->v.f;
	memset(p->xacc, 0, sizeof(p->xacc));
	p->v.f = 0.0;
	p->xflags = XF_XACC;
	if (isnan(f))
		p->xflags |= XF_NAN | XF_SEEN;
	else if (isinf(f))
		p->xflags |= (f > 0 ? XF_PINF : XF_NINF) | XF_SEEN;
	else if (f != 0.0 || !signbit(f))
		p->xflags |= XF_SEEN;
	if (isfinite(f))
		xacc_add_f64(p->xacc, f, 0);
}

/* One element, exactly, for sums (sq false) or sums of squares. */
static void xacc_elem(gr_partial *p, double x, bool sq)
{
	if (isnan(x)) {
		p->xflags |= XF_NAN | XF_SEEN;
		return;
	}
	if (isinf(x)) {
		p->xflags |= (sq || x > 0 ? XF_PINF : XF_NINF) | XF_SEEN;
		return;
	}
	if (sq || !(x == 0 && signbit(x)))
		p->xflags |= XF_SEEN;
	if (x == 0)
		return;
	if (!sq) {
		xacc_add_f64(p->xacc, x, 0);
		return;
	}
	/* x * x = hi + lo exactly while neither under- nor overflows: move
	 * |x| into [2^-400, 2^500] first and place the square back. */
	double ax = fabs(x);
	int s = 0;
	if (ax < 0x1p-400) {
		ax *= 0x1p600;
		s = -1200;
	} else if (ax > 0x1p500) {
		ax *= 0x1p-600;
		s = 1200;
	}
	double hi = ax * ax, lo = fma(ax, ax, -hi);
	xacc_add_f64(p->xacc, hi, s);
	xacc_add_f64(p->xacc, lo, s);
}

/*
 * Elements [0, n) of p, one by one: the path every value can take. A run
 * of elements goes first into 32-bit chunks kept in int64 (after Neal's
 * "small superaccumulator"): a term m * 2^b, m < 2^53, adds to three
 * neighbouring chunks without carries, each chunk takes 2^31 terms before
 * it could overflow, and the chunks are added to xacc once at the end.
 */
#define XCHUNKS (XW * 2 + 4)

static inline void xchunk_add(int64_t *c, double d, int scale)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	unsigned e = (bits >> 52) & 0x7ff;
	uint64_t m = bits & ((1ull << 52) - 1);
	if (e)
		m |= 1ull << 52;
	if (!m)
		return;
	int tz = __builtin_ctzll(m);
	int b = (e ? (int)e - 1075 : -1074) + scale + tz - GR_PARTIAL_EXP_MIN;
	m >>= tz;
	unsigned i = (unsigned)b / 32, s = (unsigned)b % 32;
	uint64_t lo = m << s, hi = (m >> 1) >> (63 - s); /* m * 2^s < 2^85 */
	int64_t c0 = (int64_t)(lo & 0xffffffffu);
	int64_t c1 = (int64_t)(lo >> 32);
	int64_t c2 = (int64_t)hi;
	/* signs are random in much data: negate without a branch */
	int64_t neg = -(int64_t)(bits >> 63);
	c[i] += (c0 ^ neg) - neg;
	c[i + 1] += (c1 ^ neg) - neg;
	c[i + 2] += (c2 ^ neg) - neg;
}

static void xacc_elems(gr_partial *ret, const unsigned char *p, size_t n, bool is64, bool sq)
{
	/* two sets, for even and odd elements: runs of one exponent update
	 * the same chunks, and two chains of them overlap */
	int64_t cc[2][XCHUNKS] = {{0}};
	uint64_t flags = sq && n ? XF_SEEN : 0;

	for (size_t i = 0; i < n; i++) {
		double x;
		if (is64) {
			memcpy(&x, p + 8 * i, 8);
		} else {
			float f;
			memcpy(&f, p + 4 * i, 4);
			x = f;
		}
		if (!isfinite(x)) {
			flags |= XF_SEEN | (isnan(x) ? XF_NAN : sq || x > 0 ? XF_PINF : XF_NINF);
			continue;
		}
		if (x == 0) {
			if (!signbit(x))
				flags |= XF_SEEN;
			continue;
		}
		flags |= XF_SEEN;
		int64_t *c = cc[i & 1];
		if (!sq) {
			xchunk_add(c, x, 0);
			continue;
		}
		/* as xacc_elem() */
		double ax = fabs(x);
		int sc = 0;
		if (ax < 0x1p-400) {
			ax *= 0x1p600;
			sc = -1200;
		} else if (ax > 0x1p500) {
			ax *= 0x1p-600;
			sc = 1200;
		}
		double hi = ax * ax;
		xchunk_add(c, hi, sc);
		xchunk_add(c, fma(ax, ax, -hi), sc);
	}
	ret->xflags |= flags;
	for (unsigned i = 0; i < XCHUNKS; i++) {
		/* |sum| < 2^(32 + 16) */
		int64_t v = cc[0][i] + cc[1][i];
		if (v)
			xacc_addmag(ret->xacc, (int)i * 32,
			            v < 0 ? -(unsigned __int128)v : (unsigned __int128)v, v < 0);
	}
}

static bool xacc_bit(const uint64_t *a, unsigned i)
{
	return (a[i / 64] >> (i % 64)) & 1;
}

/* Any bit below bit i set? */
static bool xacc_sticky(const uint64_t *a, unsigned i)
{
	for (unsigned k = 0; k < i / 64; k++)
		if (a[k])
			return true;
	return i % 64 && (a[i / 64] & ((1ull << (i % 64)) - 1));
}

static bool xacc_negative(const uint64_t *a)
{
	return a[XW - 1] >> 63;
}

static void xacc_negate(uint64_t *a)
{
	uint64_t c = 1;
	for (unsigned k = 0; k < XW; k++) {
		a[k] = ~a[k] + c;
		c = c && a[k] == 0;
	}
}

/* Bit 0 of xacc weighs 2^EXP_MIN; the least subnormal sits at this bit. */
#define XBIT_SUBMIN (-1074 - GR_PARTIAL_EXP_MIN)

/* The exact value of a float partial, rounded to nearest, ties to even. */
static double xacc_round(const gr_partial *p)
{
	/* A partial filled by hand: the value is v.f. */
	if (!(p->xflags & XF_XACC))
		return p->v.f;

	uint64_t f = p->xflags;
	if ((f & XF_NAN) || (f & (XF_PINF | XF_NINF)) == (XF_PINF | XF_NINF))
		return NAN;
	if (f & XF_PINF)
		return INFINITY;
	if (f & XF_NINF)
		return -INFINITY;

	uint64_t a[XW];
	memcpy(a, p->xacc, sizeof(a));
	if (p->v.f != 0.0)
		xacc_add_f64(a, p->v.f, 0);
	bool neg = xacc_negative(a);
	if (neg)
		xacc_negate(a);
	int top = XW - 1;
	while (top >= 0 && !a[top])
		top--;
	if (top < 0)
		/* an exact zero: -0 only when every element was -0 */
		return p->count && !(f & XF_SEEN) ? -0.0 : 0.0;
	unsigned h = (unsigned)top * 64 + 63 - (unsigned)__builtin_clzll(a[top]);
	/* the result's last bit: 53 bits below h, but never below 2^-1074 */
	unsigned lo = h >= XBIT_SUBMIN + 52 ? h - 52 : XBIT_SUBMIN;
	unsigned w = lo / 64, b = lo % 64;
	uint64_t m = a[w] >> b;
	if (b && w + 1 < XW)
		m |= a[w + 1] << (64 - b);
	m &= (1ull << 53) - 1;
	/* lo >= XBIT_SUBMIN > 0; this holds for values below 2^-1074 too */
	if (xacc_bit(a, lo - 1) && ((m & 1) || xacc_sticky(a, lo - 1)))
		m++;
	/* exact, or infinity when it rounds to 2^1024 or beyond */
	double v = ldexp((double)m, (int)lo + GR_PARTIAL_EXP_MIN);
	return neg ? -v : v;
}

/*
 * ---- exact float sums: the block kernels ----
 *
 * Every term of a block (the element, its square, or the two halves of
 * an f64 square) must lie below 2^T, from the block's largest magnitude.
 * Sums guess it from the first XGUESS elements, one binade wider, and
 * check the guess as they go (one pass over memory); when it was wrong,
 * and for f64 squares, a first pass finds the largest magnitude and a
 * second sums. The summing pass splits each term over a few
 * levels of a fixed grid: level j adds sigma_j = 1.5 * 2^K_j, K_1 = T + 2
 * and K_j+1 = K_j - 51, so t = y + sigma_j stays in sigma_j's binade, its
 * bits are those of sigma_j plus y rounded to a multiple of 2^(K_j - 52),
 * and y - (t - sigma_j) is the exact rest, which goes on to the next
 * level. The bits of t are summed in 64-bit integer lanes (each term's
 * part is below 2^50 units, a lane takes at most 2^12 of them); at the end
 * of the block each lane, less its count times the bits of sigma_j, is
 * an exact integer number of units, added to the exact accumulator once.
 *
 * Nothing may be left after the last level. Integer lanes prove it
 * beside the sums: every non-zero element must be at least a bound (its
 * exponent high enough for its last bit, or its square's, to land on the
 * grid). When one is not, the block is summed again with one more level;
 * when that is not enough either, or the block holds an infinity, a NaN
 * or a magnitude too large for the grid, it is summed element by element
 * (xacc_elems), which is slower but takes any value.
 * Levels: one for f32 (24 bits; exact while the block's exponents span
 * 26 or so), two for f64 (about 49) and for f32 squares (about 26); f64
 * squares are scaled by a power of two so that the largest is near 2^1000,
 * split exactly into a high and a low double (Dekker), and the halves get
 * two levels each, 53 bits apart (exponents spanning 24).
 *
 * Whatever path a block takes, its partial holds the exact value, so the
 * paths (and the ISA) can never show in the result.
 */
#define XL_MAX 4
#define XNV 4
#define XGROUP (4 * XNV)

typedef struct xgrid {
	double sigma[XL_MAX];
	uint64_t sbits[XL_MAX];
	int ulp[XL_MAX]; /* log2 of the level's unit */
} xgrid;

/* The levels for terms below 2^T (T <= 1020) in magnitude. */
static void xgrid_init(xgrid *g, int T, unsigned levels)
{
	int K = T + 2;
	for (unsigned j = 0; j < levels; j++, K -= 51) {
		/* sigma must stay normal; 2^-1074 units leave no rest */
		int k = K < -1022 ? -1022 : K;
		g->sigma[j] = ldexp(1.5, k);
		memcpy(&g->sbits[j], &g->sigma[j], sizeof(g->sbits[j]));
		g->ulp[j] = k - 52;
	}
}

/* Split y over the levels; the caller proves that nothing is left. */
/* y by pointer: a vector passed by value changes the ABI between the
 * baseline and AVX2 builds, which clang refuses under -Werror. */
static GR_INLINE void x_cascade(const v4df *py, const v4df *sig, v4du (*acc)[XNV], unsigned v,
                                unsigned levels)
{
	v4df y = *py;
	for (unsigned j = 0; j < levels; j++) {
		v4df t = y + sig[j];
		v4du tb;
		memcpy(&tb, &t, sizeof(tb));
		acc[j][v] += tb;
		if (j + 1 < levels)
			y = y - (t - sig[j]);
	}
}

/* Bits of the largest |element| (NaN above infinity). Four independent
 * maxima, so that the compare-and-blend chains overlap. */
static GR_INLINE uint64_t x_maxbits(const unsigned char *p, size_t n, bool is64)
{
	uint64_t best = 0;
	size_t i = 0;
	if (is64) {
		v4di mx[4] = {{0}};
		for (const size_t nv = n & ~(size_t)15; i < nv; i += 16) {
			UNROLL
			for (unsigned v = 0; v < 4; v++) {
				v4di x;
				memcpy(&x, p + 8 * (i + 4 * v), sizeof(x));
				x &= INT64_MAX;
				v4di c = x > mx[v];
				mx[v] = (x & c) | (mx[v] & ~c);
			}
		}
		for (unsigned v = 0; v < 4; v++)
			for (unsigned k = 0; k < 4; k++)
				best = (uint64_t)mx[v][k] > best ? (uint64_t)mx[v][k] : best;
		for (; i < n; i++) {
			uint64_t x;
			memcpy(&x, p + 8 * i, sizeof(x));
			x &= INT64_MAX;
			best = x > best ? x : best;
		}
	} else {
		v8si mx[4] = {{0}};
		for (const size_t nv = n & ~(size_t)31; i < nv; i += 32) {
			UNROLL
			for (unsigned v = 0; v < 4; v++) {
				v8si x;
				memcpy(&x, p + 4 * (i + 8 * v), sizeof(x));
				x &= INT32_MAX;
				v8si c = x > mx[v];
				mx[v] = (x & c) | (mx[v] & ~c);
			}
		}
		for (unsigned v = 0; v < 4; v++)
			for (unsigned k = 0; k < 8; k++)
				best = (uint64_t)mx[v][k] > best ? (uint64_t)mx[v][k] : best;
		for (; i < n; i++) {
			uint32_t x;
			memcpy(&x, p + 4 * i, sizeof(x));
			x &= INT32_MAX;
			best = x > best ? x : best;
		}
	}
	return best;
}

/* The element path for a whole block, after the fast one gave up. */
static void xsum_slow(const unsigned char *p, size_t n, gr_partial *ret, bool is64, bool sq)
{
	memset(ret->xacc, 0, sizeof(ret->xacc));
	ret->xflags = XF_XACC;
	xacc_elems(ret, p, n, is64, sq);
}

/* What xsum_pass() did. */
enum {
	XPASS_DONE,  /* ret holds the block */
	XPASS_GUESS, /* the guess was wrong, or the block needs the full path */
	XPASS_WIDE,  /* exponents too far apart for these levels */
};

/*
 * The summing pass, for a block whose largest |element| has the bits
 * maxbits. With guess, maxbits is only an estimate: the pass also checks
 * that every element lies below the grid's bound. Unless it returns
 * XPASS_DONE, ret's value is untouched.
 */
static GR_INLINE int xsum_pass(const unsigned char *p, size_t n, gr_partial *ret, const bool is64,
                               const bool sq, const unsigned levels, const uint64_t maxbits,
                               const bool guess)
{
	const size_t es = is64 ? 8 : 4;
	const unsigned eb = is64 ? (unsigned)(maxbits >> 52) : (unsigned)(maxbits >> 23);
	const unsigned ebmax = is64 ? 0x7ff : 0xff;
	/* |element| < 2^M */
	const int M = (eb ? (int)eb : 1) - (is64 ? 1023 : 127) + 1;
	int T = sq ? 2 * M : M, k = 0;

	if (guess && (maxbits == 0 || eb + 1 >= ebmax || T > 1000 || (sq && is64 && M > 499)))
		return XPASS_GUESS;
	/* |x| bits below this, or the guess was wrong */
	const uint64_t bound = (uint64_t)(eb ? eb + 1 : 1) << (is64 ? 52 : 23);
	ret->xflags = XF_XACC;
	if (maxbits == 0) {
		/* nothing but zeros: "seen" unless they are all -0 */
		for (size_t i = 0; i < n && !(ret->xflags & XF_SEEN); i++)
			if (sq || !(p[i * es + es - 1] & 0x80))
				ret->xflags |= XF_SEEN;
		return XPASS_DONE;
	}
	if (eb >= ebmax || T > 1000 || (sq && is64 && M > 500)) {
		xsum_slow(p, n, ret, is64, sq);
		return XPASS_DONE;
	}
	if (sq && is64) {
		k = 500 - M < 1000 ? 500 - M : 1000;
		T = 2 * (M + k);
	}

	xgrid g;
	if (sq && is64) {
		/* two levels for the high halves of the squares, two more from
		 * 53 bits further down for the low halves */
		xgrid lo;
		xgrid_init(&g, T, 2);
		xgrid_init(&lo, T - 53, 2);
		for (unsigned j = 0; j < 2; j++) {
			g.sigma[2 + j] = lo.sigma[j];
			g.sbits[2 + j] = lo.sbits[j];
			g.ulp[2 + j] = lo.ulp[j];
		}
	} else {
		xgrid_init(&g, T, levels);
	}
	v4df sig[XL_MAX];
	for (unsigned j = 0; j < levels; j++)
		sig[j] = (v4df){0} + g.sigma[j];
	v4du acc[XL_MAX][XNV]; /* wrapping sums */
	memset(acc, 0, sizeof(acc));
	const v4df scale = (v4df){0} + ldexp(1.0, k);
	const size_t ng = n / XGROUP;
	/*
	 * Sums prove in integer lanes, rather than with what the last level
	 * leaves (fewer float operations), that every non-zero element (or
	 * f32 square) is a multiple of the last level's unit: its exponent
	 * field is at least ef, that is 0 < |x| bits < th never holds. The
	 * unsigned compare is a signed one of |x| bits - 1 + 2^(bits - 1).
	 * f64 squares are split in two, so they check what is left instead.
	 */
	v8si small32 = {0}, over32 = {0};
	v4di small64 = {0}, over64 = {0};
	const v8si bm32 = (v8si){0} + (int32_t)(bound - 1);
	const v4di bm64 = (v4di){0} + (int64_t)(bound - 1);
	const int u = sq ? (g.ulp[levels - 1] + 1) >> 1 : g.ulp[levels - 1];
	const int ef = u + (is64 ? 1075 : 150), efmax = is64 ? 0x7ff : 0xff;
	uint64_t th = ef <= 1 ? 1 : (uint64_t)(ef >= efmax ? efmax : ef) << (is64 ? 52 : 23);
	if (sq && is64) {
		/* f64 squares: both halves of x * x fit their levels while
		 * |x| >= 2^(M - 24) (and then neither underflows) */
		const int e = M - 24;
		th = e >= -1022 ? (uint64_t)(e + 1023) << 52 : e >= -1074 ? 1ull << (e + 1074) : 1;
	}
	const v8si th32 = (v8si){0} + (int32_t)(((uint32_t)th - 1) ^ 0x80000000u);
	const v4di th64 = (v4di){0} + (int64_t)((th - 1) ^ 0x8000000000000000ull);
	/* the block after a whole one is most likely next: bring it to L2
	 * while this one is summed, so that the first pass does not wait */
	const uintptr_t ahead = n == GR_REDUCE_BLOCK ? n * es : 0;

	for (size_t gi = 0; gi < ng; gi++) {
		const unsigned char *q = p + gi * XGROUP * es;
		if (ahead)
			for (size_t o = 0; o < XGROUP * es; o += 64)
				__builtin_prefetch((const void *)((uintptr_t)q + ahead + o), 0, 2);
		if (!is64) {
			UNROLL
			for (unsigned v = 0; v < XGROUP / 8; v++) {
				v8su b;
				memcpy(&b, q + v * 32, sizeof(b));
				b &= INT32_MAX;
				if (guess)
					over32 |= (v8si)b > bm32;
				b += INT32_MAX;
				small32 |= th32 > (v8si)b;
			}
		} else {
			UNROLL
			for (unsigned v = 0; v < XGROUP / 4; v++) {
				v4du b;
				memcpy(&b, q + v * 32, sizeof(b));
				b &= INT64_MAX;
				if (guess)
					over64 |= (v4di)b > bm64;
				b += INT64_MAX;
				small64 |= th64 > (v4di)b;
			}
		}
		UNROLL
		for (unsigned v = 0; v < XNV; v++) {
			v4df x;
			if (is64)
				ld_f64(&x, q + v * 32);
			else
				ld_f32_as_f64(&x, q + v * 16);
			if (!sq) {
				x_cascade(&x, sig, acc, v, levels);
			} else if (!is64) {
				v4df xx = x * x;
				x_cascade(&xx, sig, acc, v, levels);
			} else {
				/* Dekker: x * x = hi + lo exactly, with halves of x
				 * of 26 bits each, while nothing underflows */
				x = x * scale;
				v4df c = x * 134217729.0;
				v4df xh = c - (c - x);
				v4df xl = x - xh;
				v4df hi = x * x;
				v4df lo = ((xh * xh - hi) + (xh + xh) * xl) + xl * xl;
				x_cascade(&hi, sig, acc, v, 2);
				x_cascade(&lo, sig + 2, acc + 2, v, 2);
			}
		}
	}

	if (guess) {
		int64_t o = 0;
		for (unsigned l = 0; l < 8; l++)
			o |= over32[l];
		for (unsigned l = 0; l < 4; l++)
			o |= over64[l];
		/* and the tail, which the groups did not see */
		for (size_t i = ng * XGROUP; i < n; i++) {
			uint64_t b = 0;
			memcpy(&b, p + i * es, es);
			o |= (b & (is64 ? INT64_MAX : INT32_MAX)) >= bound;
		}
		if (o)
			return XPASS_GUESS;
	}
	int64_t bad = 0;
	for (unsigned l = 0; l < 8; l++)
		bad |= small32[l];
	for (unsigned l = 0; l < 4; l++)
		bad |= small64[l];
	if (bad)
		return XPASS_WIDE;
	const uint64_t cnt = ng;
	for (unsigned j = 0; j < levels; j++) {
		__int128 s = 0;
		for (unsigned v = 0; v < XNV; v++)
			for (unsigned l = 0; l < 4; l++)
				s += (int64_t)((uint64_t)acc[j][v][l] - cnt * g.sbits[j]);
		xacc_addmag(ret->xacc, g.ulp[j] - 2 * k - GR_PARTIAL_EXP_MIN,
		            s < 0 ? -(unsigned __int128)s : (unsigned __int128)s, s < 0);
	}
	ret->xflags |= XF_SEEN;
	xacc_elems(ret, p + ng * XGROUP * es, n - ng * XGROUP, is64, sq);
	return XPASS_DONE;
}

/* Elements sampled for the guess of a block's largest magnitude. */
#define XGUESS 256

/*
 * f32 sums whose elements lie within a few binades of one another, as most
 * small arrays' do: every element is a multiple of 2^(emin - 150) (emin
 * the least biased exponent of a non-zero one, 1 for subnormals) and below
 * 2^(emax - 126), so every sum of up to n of them, in any order, is an
 * integer multiple of that unit below 2^(emax - emin + 24 + ceil(log2 n))
 * units: exact in a double while that is at most 2^53. Then the block's
 * exact value is the plain double sum, and no accumulator is needed. The
 * exponents are checked in integer lanes beside the sum; a special (or a
 * sum of zeros, whose sign the exact path decides) goes the exact way.
 */
#define XSUM_NARROW_MAX 4096u

static GR_INLINE bool xsum_f32_narrow(const unsigned char *p, size_t n, gr_partial *ret)
{
	v4df a[4] = { { 0 } };
	v4si emax = { 0 }, emin = { 255, 255, 255, 255 };
	const v4si one = { 1, 1, 1, 1 }, big = { 255, 255, 255, 255 };
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		UNROLL
		for (unsigned v = 0; v < 4; v++) {
			v4si b;
			v4sf x;
			memcpy(&b, p + 4 * (i + 4 * v), sizeof(b));
			memcpy(&x, p + 4 * (i + 4 * v), sizeof(x));
			v4si e = (b >> 23) & 0xff;
			v4si nz = (b & 0x7fffffff) != 0;
			v4si ee = e | (one & (e == 0)); /* subnormals count as exponent 1 */
			v4si c = emax > ee;
			emax = (emax & c) | (ee & ~c);
			v4si m = (ee & nz) | (big & ~nz);
			c = emin < m;
			emin = (emin & c) | (m & ~c);
			a[v] += __builtin_convertvector(x, v4df);
		}
	}
	int hi = 0, lo = 255;
	for (unsigned k = 0; k < 4; k++) {
		hi = emax[k] > hi ? emax[k] : hi;
		lo = emin[k] < lo ? emin[k] : lo;
	}
	double tail = 0;
	for (; i < n; i++) {
		uint32_t b;
		float x;
		memcpy(&b, p + 4 * i, sizeof(b));
		memcpy(&x, p + 4 * i, sizeof(x));
		int e = (int)((b >> 23) & 0xff);
		int ee = e ? e : 1;
		hi = ee > hi ? ee : hi;
		if (b & 0x7fffffffu)
			lo = ee < lo ? ee : lo;
		tail += (double)x;
	}
	int lg = n > 1 ? 64 - __builtin_clzll((unsigned long long)n - 1) : 0;
	if (hi == 255 || lo == 255 || hi - lo + 24 + lg > 53)
		return false;
	v4df t = (a[0] + a[1]) + (a[2] + a[3]);
	double sum = ((t[0] + t[1]) + (t[2] + t[3])) + tail;
	if (sum == 0)
		return false;
	/* the value is v.f, exactly; the accumulator stays as
	 * gr_partial_identity() cleared it */
	ret->v.f = sum;
	ret->xflags = 0;
	return true;
}

static GR_INLINE void xsum_body(const unsigned char *p, size_t n, gr_partial *ret, const bool is64,
                                const bool sq, const unsigned levels)
{
	/* small arrays, where it pays: a large block that misses the bound
	 * would be read twice */
	if (!is64 && !sq && n <= XSUM_NARROW_MAX && xsum_f32_narrow(p, n, ret))
		return;
	/* One pass over the block when a sample of it, one binade wider,
	 * bounds the rest (most data); else find the largest, then sum; when
	 * the exponents lie too far apart, sum with one more level; and when
	 * even that is not enough, element by element. */
	int r = XPASS_GUESS;
	if (n >= 4 * XGUESS) {
		uint64_t b = x_maxbits(p, XGUESS, is64);
		b += b ? (uint64_t)1 << (is64 ? 52 : 23) : 0;
		r = xsum_pass(p, n, ret, is64, sq, levels, b, true);
	}
	if (r == XPASS_DONE)
		return;
	const uint64_t mb = x_maxbits(p, n, is64);
	if (r == XPASS_GUESS)
		r = xsum_pass(p, n, ret, is64, sq, levels, mb, false);
	/* f64 squares have their levels fixed by the halves */
	if (r == XPASS_WIDE && !(is64 && sq))
		r = xsum_pass(p, n, ret, is64, sq, levels + 1, mb, false);
	if (r == XPASS_WIDE)
		xsum_slow(p, n, ret, is64, sq);
}

/* clang-format off */
#define DEF_XSUM(NAME, IS64, SQ, LEVELS)                                                           \
	static void NAME##_base(const unsigned char *p, size_t n, gr_partial *ret)                 \
	{                                                                                          \
		xsum_body(p, n, ret, IS64, SQ, LEVELS);                                            \
	}                                                                                          \
	GR_AVX2_ONLY(GR_AVX2 static void NAME##_avx2(const unsigned char *p, size_t n,             \
	                                             gr_partial *ret)                              \
	             { xsum_body(p, n, ret, IS64, SQ, LEVELS); })

DEF_XSUM(sum_f32, false, false, 1)
DEF_XSUM(sum_f64, true, false, 2)
DEF_XSUM(sumsq_f32, false, true, 2)
DEF_XSUM(sumsq_f64, true, true, 4)
/* clang-format on */

#define BLOCK_TABLE(S)                                                                             \
	{                                                                                          \
		[GR_OP_SUM] =                                                                      \
		    {                                                                              \
		        [GR_DT_I32] = sum_i32##S, [GR_DT_I64] = sum_i64##S,                        \
		        [GR_DT_U32] = sum_u32##S, [GR_DT_U64] = sum_u64##S,                        \
		        [GR_DT_F32] = sum_f32##S, [GR_DT_F64] = sum_f64##S,                        \
		    },                                                                             \
		[GR_OP_MIN] =                                                                      \
		    {                                                                              \
		        [GR_DT_I32] = min_i32##S, [GR_DT_I64] = min_i64##S,                        \
		        [GR_DT_U32] = min_u32##S, [GR_DT_U64] = min_u64##S,                        \
		        [GR_DT_F32] = min_f32##S, [GR_DT_F64] = min_f64##S,                        \
		    },                                                                             \
		[GR_OP_MAX] =                                                                      \
		    {                                                                              \
		        [GR_DT_I32] = max_i32##S, [GR_DT_I64] = max_i64##S,                        \
		        [GR_DT_U32] = max_u32##S, [GR_DT_U64] = max_u64##S,                        \
		        [GR_DT_F32] = max_f32##S, [GR_DT_F64] = max_f64##S,                        \
		    },                                                                             \
		[GR_OP_SUMSQ] = {                                                                  \
		    [GR_DT_I32] = sumsq_i32##S, [GR_DT_I64] = sumsq_i64##S,                        \
		    [GR_DT_U32] = sumsq_u32##S, [GR_DT_U64] = sumsq_u64##S,                        \
		    [GR_DT_F32] = sumsq_f32##S, [GR_DT_F64] = sumsq_f64##S,                        \
		},                                                                                 \
	}

typedef const gr_block_fn gr_block_table[GR_OP_N][GR_DT_N];

static gr_block_table block_fns_base = BLOCK_TABLE(_base);
#ifdef GR_HAVE_AVX2
static gr_block_table block_fns_avx2 = BLOCK_TABLE(_avx2);
#endif

static gr_block_table *block_table(void)
{
#ifdef GR_HAVE_AVX2
	/* 0: not chosen yet, 1: baseline, 2: AVX2; racing first calls agree */
	static _Atomic int isa;
	int i = atomic_load_explicit(&isa, memory_order_relaxed);
	if (!i) {
		const char *e = getenv("GPURED_REDUCE_ISA");
		__builtin_cpu_init();
		i = (e && strcmp(e, "baseline") == 0) || !__builtin_cpu_supports("avx2") ? 1 : 2;
		atomic_store_explicit(&isa, i, memory_order_relaxed);
	}
	if (i == 2)
		return &block_fns_avx2;
#endif
	return &block_fns_base;
}

/* Which member of gr_partial.v an (op, dtype) keeps its state in. */
static gr_kind partial_kind(gr_op op, gr_dtype dt)
{
	if (op == GR_OP_SUMSQ || gr_dtype_is_float(dt))
		return GR_KIND_F64;
	if (op == GR_OP_SUM || !gr_dtype_is_signed(dt))
		return GR_KIND_U64;
	return GR_KIND_I64;
}

void gr_partial_identity(gr_op op, gr_dtype dt, gr_partial *ret)
{
	memset(ret, 0, sizeof(*ret));
	switch (partial_kind(op, dt)) {
	case GR_KIND_F64:
		ret->v.f = op == GR_OP_MIN ? INFINITY : op == GR_OP_MAX ? -INFINITY : 0.0;
		/* exact and empty; squares are never -0 */
		if (op == GR_OP_SUM)
			ret->xflags = XF_XACC;
		else if (op == GR_OP_SUMSQ)
			ret->xflags = XF_XACC | XF_SEEN;
		break;
	case GR_KIND_U64:
		ret->v.u = op == GR_OP_MIN ? UINT64_MAX : 0;
		break;
	case GR_KIND_I64:
		ret->v.i = op == GR_OP_MIN ? INT64_MAX : INT64_MIN;
		break;
	}
}

void gr_partial_combine(gr_op op, gr_dtype dt, gr_partial *acc, const gr_partial *next)
{
	/* A partial of no elements is the identity, whatever its history:
	 * combining with one is a copy, or nothing. */
	if (next->count == 0)
		return;
	if (acc->count == 0) {
		*acc = *next;
		return;
	}
	acc->count += next->count;
	switch (partial_kind(op, dt)) {
	case GR_KIND_F64:
		if (op == GR_OP_SUM || op == GR_OP_SUMSQ) {
			xacc_open(acc);
			if (next->xflags & XF_XACC) {
				xacc_add_words(acc->xacc, next->xacc);
				acc->xflags |= next->xflags;
				if (next->v.f != 0.0)
					xacc_add_f64(acc->xacc, next->v.f, 0);
			} else {
				/* filled by hand: its value is v.f, an element */
				xacc_elem(acc, next->v.f, false);
			}
		} else if (isnan(acc->v.f) || isnan(next->v.f)) {
			acc->v.f = NAN;
		} else if (op == GR_OP_MIN ? next->v.f < acc->v.f : next->v.f > acc->v.f) {
			acc->v.f = next->v.f;
		} else if (next->v.f == 0 && acc->v.f == 0) {
			/* -0 is below +0 */
			bool a = signbit(acc->v.f), b = signbit(next->v.f);
			acc->v.f = (op == GR_OP_MIN ? a || b : a && b) ? -0.0 : 0.0;
		}
		break;
	case GR_KIND_U64:
		if (op == GR_OP_SUM)
			acc->v.u += next->v.u;
		else if (op == GR_OP_MIN ? next->v.u < acc->v.u : next->v.u > acc->v.u)
			acc->v.u = next->v.u;
		break;
	case GR_KIND_I64:
		if (op == GR_OP_MIN ? next->v.i < acc->v.i : next->v.i > acc->v.i)
			acc->v.i = next->v.i;
		break;
	}
}

gr_err gr_partial_finish(gr_op op, gr_dtype dt, const gr_partial *p, gr_value *ret)
{
	ret->kind = gr_result_kind(op, dt);
	ret->u = 0;
	if (p->count == 0 && (op == GR_OP_MIN || op == GR_OP_MAX))
		return GR_ERR_EMPTY;
	switch (ret->kind) {
	case GR_KIND_F64: {
		double f = op == GR_OP_SUM || op == GR_OP_SUMSQ ? xacc_round(p) : p->v.f;
		/* One NaN on the wire, whatever payload the arithmetic left. */
		ret->f = isnan(f) ? NAN : f;
		break;
	}
	case GR_KIND_U64:
		ret->u = p->v.u;
		break;
	case GR_KIND_I64:
		/* Signed sums wrap: the partial holds them as uint64. */
		ret->i = op == GR_OP_SUM ? (int64_t)p->v.u : p->v.i;
		break;
	}
	return GR_OK;
}

void gr_reduce_block(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret)
{
	gr_partial_identity(op, dt, ret);
	if (n == 0)
		return;
	(*block_table())[op][dt](data, n, ret);
	ret->count = n;
}

void gr_reduce(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret)
{
	const unsigned char *p = data;
	const size_t bytes = (size_t)GR_REDUCE_BLOCK * gr_dtype_size(dt);

	/* One block is its own canonical shape. */
	if (n <= GR_REDUCE_BLOCK) {
		gr_reduce_block(op, dt, data, n, ret);
		return;
	}
	gr_partial_identity(op, dt, ret);
	for (size_t i = 0; i < n; i += GR_REDUCE_BLOCK, p += bytes) {
		gr_partial b;
		gr_reduce_block(op, dt, p, n - i < GR_REDUCE_BLOCK ? n - i : GR_REDUCE_BLOCK, &b);
		gr_partial_combine(op, dt, ret, &b);
	}
}

/* ---- folding in values from elsewhere ---- */

int gr_partial_add_scaled(gr_partial *p, int64_t digit, int exp2)
{
	if (!digit)
		return 0;
	if (exp2 < GR_PARTIAL_EXP_MIN || exp2 > GR_PARTIAL_EXP_MAX - 63)
		return -ERANGE;
	xacc_open(p);
	unsigned __int128 m = digit < 0 ? -(unsigned __int128)digit : (unsigned __int128)digit;
	xacc_addmag(p->xacc, exp2 - GR_PARTIAL_EXP_MIN, m, digit < 0);
	p->xflags |= XF_SEEN;
	return 0;
}

void gr_partial_add_special(gr_partial *p, unsigned flags)
{
	xacc_open(p);
	p->xflags |= flags & (XF_SPECIALS | XF_SEEN);
}

size_t gr_partial_limbs(const gr_partial *p, uint64_t *words, size_t max, int *ret_scale,
                        unsigned *ret_flags)
{
	gr_partial t;
	const gr_partial *x = p;
	if (!(p->xflags & XF_XACC) || p->v.f != 0.0) {
		t = *p;
		xacc_open(&t);
		x = &t;
	}
	unsigned flags = x->xflags & XF_SPECIALS;
	size_t lo = 0, hi = XW;
	while (lo < XW && !x->xacc[lo])
		lo++;
	if (lo == XW) {
		if (x->count && !(x->xflags & XF_SEEN))
			flags |= GR_PARTIAL_NEGZERO;
		*ret_flags = flags;
		*ret_scale = 0;
		return 0;
	}
	/* drop top words that only repeat the sign of the word below */
	uint64_t sign = xacc_negative(x->xacc) ? UINT64_MAX : 0;
	while (hi - lo > 1 && x->xacc[hi - 1] == sign && (x->xacc[hi - 2] >> 63) == (sign & 1))
		hi--;
	*ret_flags = flags;
	*ret_scale = GR_PARTIAL_EXP_MIN + (int)lo * 64;
	if (hi - lo <= max)
		memcpy(words, x->xacc + lo, (hi - lo) * sizeof(*words));
	return hi - lo;
}

int gr_partial_from_limbs(gr_partial *ret, uint64_t count, const uint64_t *words, size_t n,
                          int scale, unsigned flags)
{
	const unsigned known =
	    GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF | GR_PARTIAL_NEGZERO;
	if (n > GR_PARTIAL_LIMBS_MAX || scale < GR_PARTIAL_EXP_MIN || scale > GR_PARTIAL_EXP_MAX ||
	    (flags & ~known))
		return -EINVAL;
	bool zero = true;
	for (size_t k = 0; k < n; k++)
		zero &= words[k] == 0;
	if ((flags & GR_PARTIAL_NEGZERO) && (!zero || count == 0))
		return -EINVAL;
	if (count == 0 && (!zero || flags))
		return -EINVAL;

	/* Place the words at bit o; every word of the shifted value above
	 * the accumulator must be sign only, and the accumulator's top bit
	 * must be the sign. */
	uint64_t a[XW] = {0};
	unsigned o = (unsigned)(scale - GR_PARTIAL_EXP_MIN), w = o / 64, b = o % 64;
	uint64_t sign = n && words[n - 1] >> 63 ? UINT64_MAX : 0;
	for (size_t k = w; k <= w + n; k++) {
		size_t i = k - w;
		uint64_t cur = i < n ? words[i] : sign;
		uint64_t prev = i == 0 ? 0 : words[i - 1];
		uint64_t x = b ? cur << b | prev >> (64 - b) : cur;
		if (k < XW)
			a[k] = x;
		else if (x != sign)
			return -EINVAL;
	}
	for (size_t k = w + n + 1; k < XW; k++)
		a[k] = sign;
	if ((a[XW - 1] >> 63) != (sign & 1))
		return -EINVAL;

	gr_partial_identity(GR_OP_SUM, GR_DT_F64, ret);
	ret->count = count;
	ret->xflags = XF_XACC | (flags & XF_SPECIALS);
	if (count && !(flags & GR_PARTIAL_NEGZERO))
		ret->xflags |= XF_SEEN;
	memcpy(ret->xacc, a, sizeof(ret->xacc));
	return 0;
}
