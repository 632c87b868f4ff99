/*
 * The reduction kernels.
 *
 * Float sums and sumsq of f32/f64 are exact (reduce.h): each block fills
 * the exact accumulator of its partial, and how blocks, chunks and threads
 * group the work cannot show in the result. The accumulator and the
 * rounding once at the end are in xsum.c, its kernels in xsum-f32.c and
 * xsum-f64.c.
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
 * The f64 sums, sums of squares and moments (xsum-f64.c,
 * xsum-f64-moments.c) have a third build, with FMA, where it computes
 * what the others do (the low half of an exact square; y * 1 + sigma,
 * rounded once as y + sigma is): contraction stays off in every file.
 */

/* x * x + acc must round twice, in every build and on every ISA. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdatomic.h>
#ifdef __x86_64__
#include <cpuid.h>
#endif
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "math/moments.h"
#include "math/reduce.h"
#include "math/simd.h"
#include "math/xsum.h"

typedef void (*gr_block_fn)(const unsigned char *p, size_t n, gr_partial *ret);

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

/* ---- argmin and argmax ---- */

/*
 * The block's min or max comes from the kernels above; then the first
 * element equal to it, bit for bit (which tells -0 from +0, as min and max
 * do), or the first NaN when it is NaN. The block was just read, so the
 * second look finds it in cache, and stops at the element it finds.
 *
 * NAME(p, n, want, nan): the index of the first element whose bits are
 * want, or (nan) the first NaN; n when none is.
 */
#define DEF_FIND_ONE(NAME, ATTR, UT, VT, MT, W)                                                    \
	ATTR static size_t NAME(const unsigned char *p, size_t n, UT want, bool nan)               \
	{                                                                                          \
		enum { es = sizeof(UT) };                                                          \
		const UT mag = (UT)-1 >> 1, inf = (UT)(mag ^ (mag >> (es == 4 ? 8 : 11)));         \
		size_t i = 0;                                                                      \
		for (; i + 4 * W <= n; i += 4 * W) {                                               \
			MT any = {0};                                                              \
			UNROLL                                                                     \
			for (unsigned v = 0; v < 4; v++) {                                         \
				VT x;                                                              \
				memcpy(&x, p + (i + v * W) * es, sizeof(x));                       \
				any |= nan ? (MT)((x & mag) > inf) : (MT)(x == want);              \
			}                                                                          \
			bool hit = false;                                                          \
			for (unsigned k = 0; k < W; k++)                                           \
				hit |= any[k] != 0;                                                \
			if (hit)                                                                   \
				break;                                                             \
		}                                                                                  \
		for (; i < n; i++) {                                                               \
			UT x;                                                                      \
			memcpy(&x, p + i * es, sizeof(x));                                         \
			if (nan ? (x & mag) > inf : x == want)                                     \
				return i;                                                          \
		}                                                                                  \
		return n;                                                                          \
	}

#define DEF_FIND(NAME, UT, VT16, MT16, W16, VT32, MT32, W32)                                       \
	DEF_FIND_ONE(NAME##_base, , UT, VT16, MT16, W16)                                           \
	GR_AVX2_ONLY(DEF_FIND_ONE(NAME##_avx2, GR_AVX2, UT, VT32, MT32, W32))

DEF_FIND(find32, uint32_t, v4su, v4si, 4, v8su, v8si, 8)
DEF_FIND(find64, uint64_t, v2du, v2di, 2, v4du, v4di, 4)

static inline uint32_t bits_f32(double d)
{
	float f = (float)d;
	uint32_t b;
	memcpy(&b, &f, sizeof(b));
	return b;
}

static inline uint64_t bits_f64(double d)
{
	uint64_t b;
	memcpy(&b, &d, sizeof(b));
	return b;
}

/* KERNEL fills ret->v; FIND looks for WANT (or the first NaN when NAN). */
#define DEF_ARG2_ONE(NAME, ATTR, KERNEL, FIND, WANT, NAN)                                          \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		KERNEL(p, n, ret);                                                                 \
		ret->index = FIND(p, n, WANT, NAN);                                                \
	}

#define DEF_ARG2(NAME, KERNEL, FIND, WANT, NAN)                                                    \
	DEF_ARG2_ONE(NAME##_base, , KERNEL##_base, FIND##_base, WANT, NAN)                         \
	GR_AVX2_ONLY(DEF_ARG2_ONE(NAME##_avx2, GR_AVX2, KERNEL##_avx2, FIND##_avx2, WANT, NAN))

/*
 * The one pass that most blocks take: the lanes of the min/max kernel,
 * each also keeping the group in which it last took a value (strictly
 * better, so its first); the best lane, and among equal ones the least
 * element index, gives value and index. Where that cannot tell (a NaN, a
 * zero, whose sign the lanes do not order, or a block whose best is the
 * lanes' starting value and so was never taken), the block goes the two
 * passes above instead: min/max, then the first match.
 */
#define DEF_ARG1_ONE(NAME, ATTR, SLOW, T, VT, MT, W, CMP, INIT, IS_FLOAT, STORE)                   \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		enum { es = sizeof(T), L = GROUP_BYTES / es, NV = L / W };                         \
		VT m[NV];                                                                          \
		MT at[NV];                                                                         \
		UNROLL                                                                             \
		for (unsigned v = 0; v < NV; v++)                                                  \
			for (unsigned k = 0; k < W; k++) {                                         \
				m[v][k] = INIT;                                                    \
				at[v][k] = -1;                                                     \
			}                                                                          \
		MT nan = {0}, g = {0};                                                             \
		size_t i = 0;                                                                      \
		for (; i + L <= n; i += L, g += 1) {                                               \
			const unsigned char *q = p + i * es;                                       \
			UNROLL                                                                     \
			for (unsigned v = 0; v < NV; v++) {                                        \
				VT x;                                                              \
				memcpy(&x, q + v * W * es, sizeof(x));                             \
				MT c = x CMP m[v];                                                 \
				m[v] = (VT)(((MT)x & c) | ((MT)m[v] & ~c));                        \
				at[v] = (g & c) | (at[v] & ~c);                                    \
				if (IS_FLOAT)                                                      \
					nan |= x != x;                                             \
			}                                                                          \
		}                                                                                  \
		T lane[L];                                                                         \
		size_t li[L];                                                                      \
		bool anynan = false;                                                               \
		for (unsigned v = 0; v < NV; v++)                                                  \
			for (unsigned k = 0; k < W; k++) {                                         \
				lane[v * W + k] = m[v][k];                                         \
				li[v * W + k] =                                                    \
				    at[v][k] < 0 ? SIZE_MAX : (size_t)at[v][k] * L + v * W + k;    \
				anynan |= nan[k] != 0;                                             \
			}                                                                          \
		for (; i < n; i++) {                                                               \
			T x;                                                                       \
			memcpy(&x, p + i * es, sizeof(x));                                         \
			if (x CMP lane[i % L]) {                                                   \
				lane[i % L] = x;                                                   \
				li[i % L] = i;                                                     \
			}                                                                          \
			anynan |= x != x;                                                          \
		}                                                                                  \
		unsigned b = 0;                                                                    \
		for (unsigned k = 1; k < L; k++)                                                   \
			if (lane[k] CMP lane[b] || (lane[k] == lane[b] && li[k] < li[b]))          \
				b = k;                                                             \
		if ((IS_FLOAT && (anynan || lane[b] == 0)) || li[b] == SIZE_MAX) {                 \
			SLOW(p, n, ret);                                                           \
			return;                                                                    \
		}                                                                                  \
		T best = lane[b];                                                                  \
		STORE;                                                                             \
		ret->index = li[b];                                                                \
	}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
#define DEF_ARG(NAME, KERNEL, FIND, WANT, NAN, T, VT16, MT16, W16, VT32, MT32, W32, CMP, INIT,     \
                IS_FLOAT, STORE)                                                                   \
	DEF_ARG2(NAME##_two, KERNEL, FIND, WANT, NAN)                                              \
	DEF_ARG1_ONE(NAME##_base, , NAME##_two_base, T, VT16, MT16, W16, CMP, INIT, IS_FLOAT,      \
	             STORE)                                                                        \
	GR_AVX2_ONLY(DEF_ARG1_ONE(NAME##_avx2, GR_AVX2, NAME##_two_avx2, T, VT32, MT32, W32, CMP,  \
	                          INIT, IS_FLOAT, STORE))

DEF_ARG(argmin_f32, min_f32, find32, bits_f32(ret->v.f), isnan(ret->v.f), float, v4sf, v4si, 4,
        v8sf, v8si, 8, <, INFINITY, 1, ret->v.f = best)
DEF_ARG(argmax_f32, max_f32, find32, bits_f32(ret->v.f), isnan(ret->v.f), float, v4sf, v4si, 4,
        v8sf, v8si, 8, >, -INFINITY, 1, ret->v.f = best)
DEF_ARG(argmin_f64, min_f64, find64, bits_f64(ret->v.f), isnan(ret->v.f), double, v2df, v2di, 2,
        v4df, v4di, 4, <, INFINITY, 1, ret->v.f = best)
DEF_ARG(argmax_f64, max_f64, find64, bits_f64(ret->v.f), isnan(ret->v.f), double, v2df, v2di, 2,
        v4df, v4di, 4, >, -INFINITY, 1, ret->v.f = best)
DEF_ARG(argmin_i32, min_i32, find32, (uint32_t)(int32_t)ret->v.i, false, int32_t, v4si, v4si, 4,
        v8si, v8si, 8, <, INT32_MAX, 0, ret->v.i = best)
DEF_ARG(argmax_i32, max_i32, find32, (uint32_t)(int32_t)ret->v.i, false, int32_t, v4si, v4si, 4,
        v8si, v8si, 8, >, INT32_MIN, 0, ret->v.i = best)
DEF_ARG(argmin_u32, min_u32, find32, (uint32_t)ret->v.u, false, uint32_t, v4su, v4si, 4, v8su, v8si,
        8, <, UINT32_MAX, 0, ret->v.u = best)
DEF_ARG(argmax_u32, max_u32, find32, (uint32_t)ret->v.u, false, uint32_t, v4su, v4si, 4, v8su, v8si,
        8, >, 0, 0, ret->v.u = best)
DEF_ARG(argmin_i64, min_i64, find64, (uint64_t)ret->v.i, false, int64_t, v2di, v2di, 2, v4di, v4di,
        4, <, INT64_MAX, 0, ret->v.i = best)
DEF_ARG(argmax_i64, max_i64, find64, (uint64_t)ret->v.i, false, int64_t, v2di, v2di, 2, v4di, v4di,
        4, >, INT64_MIN, 0, ret->v.i = best)
DEF_ARG(argmin_u64, min_u64, find64, ret->v.u, false, uint64_t, v2du, v2di, 2, v4du, v4di, 4, <,
        UINT64_MAX, 0, ret->v.u = best)
DEF_ARG(argmax_u64, max_u64, find64, ret->v.u, false, uint64_t, v2du, v2di, 2, v4du, v4di, 4, >, 0,
        0, ret->v.u = best)
#pragma GCC diagnostic pop

/* ---- moments ---- */

/* An integer block's exact sum s1 and sum of squares s2 + s2hi * 2^128
 * into the accumulators. */
static inline void moments_int_store(gr_partial *ret, __int128 s1, unsigned __int128 s2,
                                     uint64_t s2hi)
{
	xsum_add_int(ret->xacc, 0, s1 < 0 ? -(unsigned __int128)s1 : (unsigned __int128)s1, s1 < 0);
	xsum_add_int(ret->x2acc, 0, s2, false);
	xsum_add_int(ret->x2acc, 128, s2hi, false);
}

/*
 * A block's four answers, one after the other: the block is in cache
 * after the first pass. Float sums and sums of squares are the exact
 * kernels of sum and sumsq, min and max those of min and max, so every
 * field holds what that op's partial would. ONE, a pass that makes all
 * four at once, takes the blocks it can first (xsum.h).
 */
#define DEF_MOMF_ONE(NAME, ATTR, ONE, SUM, SQ, MIN, MAX)                                           \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		gr_partial t;                                                                      \
		if (ONE(p, n, ret))                                                                \
			return;                                                                    \
		SUM(p, n, ret);                                                                    \
		memset(&t, 0, sizeof(t));                                                          \
		xsum_identity(&t, /* sq= */ true);                                                 \
		SQ(p, n, &t);                                                                      \
		xsum_sq_take(ret, &t);                                                             \
		MIN(p, n, &t);                                                                     \
		ret->lo = t.v;                                                                     \
		MAX(p, n, &t);                                                                     \
		ret->hi = t.v;                                                                     \
	}

/*
 * 64-bit integers: the block's sum (|x| < 2^64, at most 2^15 of them) and
 * the sum of squares (each below 2^128) in exact 128- and 192-bit
 * integers, added to the accumulators once.
 */
#define DEF_MOMI_ONE(NAME, ATTR, T, MIN, MAX)                                                      \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		__int128 s1 = 0;                                                                   \
		unsigned __int128 s2 = 0;                                                          \
		uint64_t s2hi = 0;                                                                 \
		for (size_t i = 0; i < n; i++) {                                                   \
			T x;                                                                       \
			memcpy(&x, p + i * sizeof(T), sizeof(T));                                  \
			s1 += x;                                                                   \
			unsigned __int128 a =                                                      \
			    x < 0 ? -(unsigned __int128)x : (unsigned __int128)x;                  \
			unsigned __int128 q = a * a;                                               \
			s2 += q;                                                                   \
			s2hi += s2 < q;                                                            \
		}                                                                                  \
		moments_int_store(ret, s1, s2, s2hi);                                              \
		gr_partial t;                                                                      \
		MIN(p, n, &t);                                                                     \
		ret->lo = t.v;                                                                     \
		MAX(p, n, &t);                                                                     \
		ret->hi = t.v;                                                                     \
	}

/*
 * 32-bit integers, in 64-bit lanes: the sum wraps in them but is exact
 * (a block's is below 2^47); |x| < 2^32, so x * x is exact in 64 bits, and
 * its halves are summed apart (each sum below 2^47).
 */
#define DEF_MOMI32_ONE(NAME, ATTR, T, LOAD4, MIN, MAX)                                             \
	ATTR static void NAME(const unsigned char *p, size_t n, gr_partial *ret)                   \
	{                                                                                          \
		v4du s1[2] = {{0}}, lo[2] = {{0}}, hi[2] = {{0}};                                  \
		const v4du m32 = (v4du){0} + 0xffffffffu;                                          \
		size_t i = 0;                                                                      \
		for (; i + 8 <= n; i += 8) {                                                       \
			UNROLL                                                                     \
			for (unsigned v = 0; v < 2; v++) {                                         \
				v4du x;                                                            \
				LOAD4(&x, p + (i + 4 * v) * sizeof(T));                            \
				s1[v] += x;                                                        \
				v4du sg = (v4du)((v4di)x >> 63);                                   \
				v4du a = ((x ^ sg) - sg) & m32;                                    \
				v4du q = a * a;                                                    \
				lo[v] += q & m32;                                                  \
				hi[v] += q >> 32;                                                  \
			}                                                                          \
		}                                                                                  \
		int64_t ss = 0;                                                                    \
		uint64_t sl = 0, sh = 0;                                                           \
		for (unsigned k = 0; k < 4; k++) {                                                 \
			ss += (int64_t)(s1[0][k] + s1[1][k]);                                      \
			sl += lo[0][k] + lo[1][k];                                                 \
			sh += hi[0][k] + hi[1][k];                                                 \
		}                                                                                  \
		unsigned __int128 s2 = ((unsigned __int128)sh << 32) + sl;                         \
		for (; i < n; i++) {                                                               \
			T x;                                                                       \
			memcpy(&x, p + i * sizeof(T), sizeof(T));                                  \
			ss += x;                                                                   \
			uint64_t a = x < 0 ? -(uint64_t)(int64_t)x : (uint64_t)x;                  \
			s2 += a * a;                                                               \
		}                                                                                  \
		moments_int_store(ret, ss, s2, 0);                                                 \
		gr_partial t;                                                                      \
		MIN(p, n, &t);                                                                     \
		ret->lo = t.v;                                                                     \
		MAX(p, n, &t);                                                                     \
		ret->hi = t.v;                                                                     \
	}

#define DEF_MOMF(NAME, ONE, SUM, SQ, MIN, MAX)                                                     \
	DEF_MOMF_ONE(NAME##_base, , ONE##_base, SUM##_base, SQ##_base, MIN##_base, MAX##_base)     \
	GR_AVX2_ONLY(DEF_MOMF_ONE(NAME##_avx2, GR_AVX2, ONE##_avx2, SUM##_avx2, SQ##_avx2,         \
	                          MIN##_avx2, MAX##_avx2))
#define DEF_MOMI(NAME, T, MIN, MAX)                                                                \
	DEF_MOMI_ONE(NAME##_base, , T, MIN##_base, MAX##_base)                                     \
	GR_AVX2_ONLY(DEF_MOMI_ONE(NAME##_avx2, GR_AVX2, T, MIN##_avx2, MAX##_avx2))
#define DEF_MOMI32(NAME, T, LOAD4, MIN, MAX)                                                       \
	DEF_MOMI32_ONE(NAME##_base, , T, LOAD4, MIN##_base, MAX##_base)                            \
	GR_AVX2_ONLY(DEF_MOMI32_ONE(NAME##_avx2, GR_AVX2, T, LOAD4, MIN##_avx2, MAX##_avx2))

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
DEF_MOMF(moments_f32, xsum_moments_f32, xsum_sum_f32, xsum_sumsq_f32, min_f32, max_f32)
DEF_MOMF(moments_f64, xsum_moments_f64, xsum_sum_f64, xsum_sumsq_f64, min_f64, max_f64)
DEF_MOMI32(moments_i32, int32_t, ld_i32_as_u64, min_i32, max_i32)
DEF_MOMI(moments_i64, int64_t, min_i64, max_i64)
DEF_MOMI32(moments_u32, uint32_t, ld_u32_as_u64, min_u32, max_u32)
DEF_MOMI(moments_u64, uint64_t, min_u64, max_u64)
#pragma GCC diagnostic pop

/* clang-format on */

#define BLOCK_TABLE(S)                                                                             \
	{                                                                                          \
		[GR_OP_SUM] =                                                                      \
		    {                                                                              \
		        [GR_DT_I32] = sum_i32##S,      [GR_DT_I64] = sum_i64##S,                   \
		        [GR_DT_U32] = sum_u32##S,      [GR_DT_U64] = sum_u64##S,                   \
		        [GR_DT_F32] = xsum_sum_f32##S, [GR_DT_F64] = xsum_sum_f64##S,              \
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
		[GR_OP_SUMSQ] =                                                                    \
		    {                                                                              \
		        [GR_DT_I32] = sumsq_i32##S,      [GR_DT_I64] = sumsq_i64##S,               \
		        [GR_DT_U32] = sumsq_u32##S,      [GR_DT_U64] = sumsq_u64##S,               \
		        [GR_DT_F32] = xsum_sumsq_f32##S, [GR_DT_F64] = xsum_sumsq_f64##S,          \
		    },                                                                             \
		[GR_OP_ARGMIN] =                                                                   \
		    {                                                                              \
		        [GR_DT_I32] = argmin_i32##S, [GR_DT_I64] = argmin_i64##S,                  \
		        [GR_DT_U32] = argmin_u32##S, [GR_DT_U64] = argmin_u64##S,                  \
		        [GR_DT_F32] = argmin_f32##S, [GR_DT_F64] = argmin_f64##S,                  \
		    },                                                                             \
		[GR_OP_ARGMAX] =                                                                   \
		    {                                                                              \
		        [GR_DT_I32] = argmax_i32##S, [GR_DT_I64] = argmax_i64##S,                  \
		        [GR_DT_U32] = argmax_u32##S, [GR_DT_U64] = argmax_u64##S,                  \
		        [GR_DT_F32] = argmax_f32##S, [GR_DT_F64] = argmax_f64##S,                  \
		    },                                                                             \
		[GR_OP_MOMENTS] = {                                                                \
		    [GR_DT_I32] = moments_i32##S, [GR_DT_I64] = moments_i64##S,                    \
		    [GR_DT_U32] = moments_u32##S, [GR_DT_U64] = moments_u64##S,                    \
		    [GR_DT_F32] = moments_f32##S, [GR_DT_F64] = moments_f64##S,                    \
		},                                                                                 \
	}

typedef const gr_block_fn gr_block_table[GR_OP_N][GR_DT_N];

static gr_block_table block_fns_base = BLOCK_TABLE(_base);
#ifdef GR_HAVE_AVX2
static gr_block_table block_fns_avx2 = BLOCK_TABLE(_avx2);
#endif

int gr_reduce_isa(void)
{
#ifdef GR_HAVE_AVX2
	/* 0: not chosen yet; racing first calls agree */
	static _Atomic int isa;
	int i = atomic_load_explicit(&isa, memory_order_relaxed);
	if (!i) {
		const char *e = getenv("GPURED_REDUCE_ISA");
		__builtin_cpu_init();
		/* F16C: CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports
		 * does not know it) */
		unsigned a, b, c = 0, d;
		bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
		i = (e && strcmp(e, "baseline") == 0) || !__builtin_cpu_supports("avx2") ? GR_ISA_BASE
		    : f16c                                                             ? GR_ISA_AVX2_F16C
											: GR_ISA_AVX2;
		atomic_store_explicit(&isa, i, memory_order_relaxed);
	}
	return i;
#else
	return GR_ISA_BASE;
#endif
}

static gr_block_table *block_table(void)
{
#ifdef GR_HAVE_AVX2
	if (gr_reduce_isa() >= GR_ISA_AVX2)
		return &block_fns_avx2;
#endif
	return &block_fns_base;
}

void gr_reduce_block(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret)
{
	if (gr_dtype_is_narrow(dt)) {
		gr_reduce_narrow_block(op, dt, data, n, ret);
		return;
	}
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
