/*
 * What the CPU reduction kernels (reduce.c, xsum-*.c) share: the GCC vector
 * types they are written in, and how each kernel is built twice on x86-64,
 * for the baseline and for AVX2. Internal to the daemon's reduction.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GR_INLINE inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/*
 * On x86-64 every kernel is compiled twice, for the baseline and for AVX2,
 * and the AVX2 table is picked at run time when the CPU has it (or the
 * baseline when GPURED_REDUCE_ISA=baseline, for tests). The f64 sum and
 * sum of squares have a third build, for AVX2 with FMA, which their AVX2
 * kernels call when the CPU has FMA (and GPURED_REDUCE_ISA is not avx2,
 * which tests the AVX2 kernels without it). A table chosen in
 * code, rather than target_clones' ifuncs, keeps the kernels' addresses out
 * of load-time relocations, which sanitizer runtimes cannot survive.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define GR_HAVE_AVX2 1
#define GR_AVX2 __attribute__((target("avx2")))
#define GR_AVX2_FMA __attribute__((target("avx2,fma")))
#define GR_AVX2_F16C __attribute__((target("avx2,f16c")))
#define GR_AVX2_ONLY(...) __VA_ARGS__
#include <immintrin.h>
#else
#define GR_AVX2_ONLY(...)
#endif

/* The kernels chosen (reduce.c): the baseline's, AVX2's, or AVX2's with
 * F16C's conversions too (the narrow dtypes' widening, widen.c and
 * xsum-narrow.c); GPURED_REDUCE_ISA=baseline picks the first. */
enum { GR_ISA_BASE = 1, GR_ISA_AVX2, GR_ISA_AVX2_F16C };
int gr_reduce_isa(void);

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
typedef uint16_t v16hu __attribute__((vector_size(32)));

/* Lanes of a and b (counted on from a's into b's) picked by constant
 * indices: __builtin_shufflevector came to GCC only in 12. GR_SHUFFLE2
 * for vectors of eight lanes, GR_SHUFFLE2_16 of sixteen 16-bit ones. */
#ifdef __clang__
#define GR_SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define GR_SHUFFLE2_16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define GR_SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, (v8si){__VA_ARGS__})
#define GR_SHUFFLE2_16(a, b, ...) __builtin_shuffle(a, b, (v16hu){__VA_ARGS__})
#endif

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

/* ---- 32-bit lanes: signed maximum, unsigned minimum ---- */

/*
 * *a = max(*a, *b) as signed, and *a = min(*a, *b) as unsigned, lane by
 * lane. AVX2 has one instruction for each, which GCC's vector extensions
 * do not find; the baseline compares and blends. avx2 says which kernel
 * calls, and is a constant there: the AVX2 kernel inlines the instruction,
 * the baseline one never reaches the call (and, not being always_inline,
 * the AVX2 helper may be called from a baseline function at all).
 */
#ifdef GR_HAVE_AVX2
GR_AVX2 static inline void v8si_max_avx2(v8si *a, const v8si *b)
{
	*a = (v8si)_mm256_max_epi32((__m256i)*a, (__m256i)*b);
}

GR_AVX2 static inline void v8su_min_avx2(v8su *a, const v8su *b)
{
	*a = (v8su)_mm256_min_epu32((__m256i)*a, (__m256i)*b);
}
#endif

static GR_INLINE void v8si_max(v8si *a, const v8si *b, const bool avx2)
{
#ifdef GR_HAVE_AVX2
	if (avx2) {
		v8si_max_avx2(a, b);
		return;
	}
#endif
	(void)avx2;
	v8si c = *a > *b;
	*a = (*a & c) | (*b & ~c);
}

static GR_INLINE void v8su_min(v8su *a, const v8su *b, const bool avx2)
{
#ifdef GR_HAVE_AVX2
	if (avx2) {
		v8su_min_avx2(a, b);
		return;
	}
#endif
	(void)avx2;
	v8su c = (v8su)(*a < *b);
	*a = (*a & c) | (*b & ~c);
}

/* ---- 16-bit lanes: unsigned maximum and minimum ----
 *
 * For the AVX2 kernels only, which alone ask for them; as the AVX2 helpers
 * above, they may be named in a baseline kernel that never reaches them.
 */
#ifdef GR_HAVE_AVX2
GR_AVX2 static inline void v16hu_max_avx2(v16hu *a, const v16hu *b)
{
	*a = (v16hu)_mm256_max_epu16((__m256i)*a, (__m256i)*b);
}

GR_AVX2 static inline void v16hu_min_avx2(v16hu *a, const v16hu *b)
{
	*a = (v16hu)_mm256_min_epu16((__m256i)*a, (__m256i)*b);
}
#endif

/* ---- fused multiply-add and -subtract ---- */

/*
 * *ret = a * b - c (fmsub) or a * b + c (fmadd) rounded once, for the
 * AVX2-with-FMA kernels only; as the helpers above, they may be named in
 * the others, which never reach them. (The kernels' files turn
 * contraction off: FMA is only ever these.)
 */
#ifdef GR_HAVE_AVX2
GR_AVX2_FMA static inline void v4df_fmsub_fma(v4df *ret, const v4df *a, const v4df *b,
                                              const v4df *c)
{
	*ret = (v4df)_mm256_fmsub_pd((__m256d)*a, (__m256d)*b, (__m256d)*c);
}

GR_AVX2_FMA static inline void v4df_fmadd_fma(v4df *ret, const v4df *a, const v4df *b,
                                              const v4df *c)
{
	*ret = (v4df)_mm256_fmadd_pd((__m256d)*a, (__m256d)*b, (__m256d)*c);
}
#endif

/* ---- MXCSR's denormal-operand flag ----
 *
 * On x86-64 an SSE or AVX operation with a subnormal operand sets bit 1 of
 * MXCSR (DE; while DAZ is off, which every exact kernel already needs),
 * and it stays set until cleared: a kernel clears it, works, and asks.
 * The flag belongs to the thread, and nothing else in the daemon reads it.
 * Not every machine that runs x86-64 code keeps it (valgrind does not):
 * a kernel that counts on it asks first whether it works (xsum-f64.c).
 * Elsewhere the flag does not exist and always reads as set.
 */
#define GR_MXCSR_DE 0x2u

#ifdef GR_HAVE_AVX2
static inline void mxcsr_de_clear(void)
{
	unsigned c;
	/* "memory": no load of the data the flag is to watch moves above */
	__asm__ volatile("stmxcsr %0" : "=m"(c) : : "memory");
	if (c & GR_MXCSR_DE) {
		c &= ~GR_MXCSR_DE;
		__asm__ volatile("ldmxcsr %0" : : "m"(c) : "memory");
	}
}

static inline bool mxcsr_de_seen(void)
{
	unsigned c;
	__asm__ volatile("stmxcsr %0" : "=m"(c) : : "memory");
	return c & GR_MXCSR_DE;
}
#else
static inline void mxcsr_de_clear(void)
{
}

static inline bool mxcsr_de_seen(void)
{
	return true;
}
#endif
