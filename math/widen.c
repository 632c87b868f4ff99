/*
 * Widening the narrow dtypes (widen.h): element by element on the
 * baseline, eight at a time with AVX2 and F16C where the CPU has them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "math/simd.h"
#include "math/widen.h"

/* A little-endian 16-bit element (x86-64 and the others the daemon
 * builds for are little-endian, as the wire is). */
static GR_INLINE uint16_t ld16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

/* An f16's bits as an f32's. */
static GR_INLINE uint32_t f16_bits(uint32_t h)
{
	const uint32_t sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
	float sub = (float)em * 0x1p-24f; /* zero and subnormals: exact */
	uint32_t s;

	memcpy(&s, &sub, 4);
	uint32_t normal = (em + ((127u - 15u) << 10)) << 13;
	uint32_t special = 0x7f800000u | (em & 0x3ffu) << 13;
	if (em & 0x3ffu)
		special |= 0x00400000u; /* a NaN: quiet */
	return sign | (em >= 0x7c00u ? special : em >= 0x0400u ? normal : s);
}

/* An E4M3's bits as an f32's. */
static GR_INLINE uint32_t e4m3_bits(uint32_t b)
{
	const uint32_t sign = (b & 0x80u) << 24, em = b & 0x7fu;
	float sub = (float)em * 0x1p-9f;
	uint32_t s;

	memcpy(&s, &sub, 4);
	uint32_t normal = (em + ((127u - 7u) << 3)) << 20;
	return sign | (em == 0x7fu ? 0x7fc00000u : em >= 0x08u ? normal : s);
}

uint32_t gr_widen_one(gr_dtype dt, const void *src)
{
	const uint8_t *p = src;

	switch (dt) {
	case GR_DT_F16:
		return f16_bits(ld16(p));
	case GR_DT_BF16:
		return (uint32_t)ld16(p) << 16;
	case GR_DT_F8E4M3:
		return e4m3_bits(p[0]);
	case GR_DT_F8E5M2:
		return f16_bits((uint32_t)p[0] << 8);
	case GR_DT_I8:
		return (uint32_t)(int32_t)(int8_t)p[0];
	case GR_DT_U8:
		return p[0];
	case GR_DT_I16:
		return (uint32_t)(int32_t)(int16_t)ld16(p);
	case GR_DT_U16:
		return ld16(p);
	default:
		abort();
	}
}

/* One dtype's loop, element by element: the baseline's, and the tail of
 * the AVX2 loops. */
#define WIDEN_LOOP(EXPR)                                                                           \
	for (; i < n; i++) {                                                                       \
		EXPR;                                                                              \
	}

static void widen_base(gr_dtype dt, const uint8_t *p, size_t n, uint32_t *out, size_t i)
{
	switch (dt) {
	case GR_DT_F16:
		WIDEN_LOOP(out[i] = f16_bits(ld16(p + 2 * i)))
		break;
	case GR_DT_BF16:
		WIDEN_LOOP(out[i] = (uint32_t)ld16(p + 2 * i) << 16)
		break;
	case GR_DT_F8E4M3:
		WIDEN_LOOP(out[i] = e4m3_bits(p[i]))
		break;
	case GR_DT_F8E5M2:
		WIDEN_LOOP(out[i] = f16_bits((uint32_t)p[i] << 8))
		break;
	case GR_DT_I8:
		WIDEN_LOOP(out[i] = (uint32_t)(int32_t)(int8_t)p[i])
		break;
	case GR_DT_U8:
		WIDEN_LOOP(out[i] = p[i])
		break;
	case GR_DT_I16:
		WIDEN_LOOP(out[i] = (uint32_t)(int32_t)(int16_t)ld16(p + 2 * i))
		break;
	case GR_DT_U16:
		WIDEN_LOOP(out[i] = ld16(p + 2 * i))
		break;
	default:
		abort();
	}
}

#ifdef GR_HAVE_AVX2

/* e4m3_bits of eight bytes widened to 32-bit lanes */
GR_AVX2_F16C static inline __m256i e4m3_bits8(__m256i b)
{
	const __m256i em = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
	const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
	__m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(0x1p-9f));
	__m256i normal = _mm256_slli_epi32(_mm256_add_epi32(em, _mm256_set1_epi32(120 << 3)), 20);
	__m256i big = _mm256_cmpgt_epi32(em, _mm256_set1_epi32(0x07));
	__m256i nan = _mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7f));
	__m256i v = _mm256_blendv_epi8(_mm256_castps_si256(sub), normal, big);
	v = _mm256_blendv_epi8(v, _mm256_set1_epi32(0x7fc00000), nan);
	return _mm256_or_si256(v, sign);
}

/* Eight elements at a time; F16C converts f16 (and e5m2, the top byte
 * of one), quieting NaNs as f16_bits() does. Returns how many it did. */
GR_AVX2_F16C static size_t widen_avx2(gr_dtype dt, const uint8_t *p, size_t n, uint32_t *out)
{
	size_t i = 0;

#define LOOP8(LOADBYTES, EXPR)                                                                     \
	for (; i + 8 <= n; i += 8) {                                                               \
		__m128i x = LOADBYTES;                                                             \
		_mm256_storeu_si256((__m256i *)(void *)(out + i), EXPR);                           \
	}
#define LOAD64(q) _mm_loadl_epi64((const __m128i *)(const void *)(q))
#define LOAD128(q) _mm_loadu_si128((const __m128i *)(const void *)(q))
	switch (dt) {
	case GR_DT_F16:
		LOOP8(LOAD128(p + 2 * i), _mm256_castps_si256(_mm256_cvtph_ps(x)))
		break;
	case GR_DT_BF16:
		LOOP8(LOAD128(p + 2 * i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16))
		break;
	case GR_DT_F8E4M3:
		LOOP8(LOAD64(p + i), e4m3_bits8(_mm256_cvtepu8_epi32(x)))
		break;
	case GR_DT_F8E5M2:
		LOOP8(LOAD64(p + i),
		      _mm256_castps_si256(_mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(x), 8))))
		break;
	case GR_DT_I8:
		LOOP8(LOAD64(p + i), _mm256_cvtepi8_epi32(x))
		break;
	case GR_DT_U8:
		LOOP8(LOAD64(p + i), _mm256_cvtepu8_epi32(x))
		break;
	case GR_DT_I16:
		LOOP8(LOAD128(p + 2 * i), _mm256_cvtepi16_epi32(x))
		break;
	case GR_DT_U16:
		LOOP8(LOAD128(p + 2 * i), _mm256_cvtepu16_epi32(x))
		break;
	default:
		abort();
	}
#undef LOOP8
#undef LOAD64
#undef LOAD128
	return i;
}

#endif

void gr_widen(gr_dtype dt, const void *src, size_t n, void *dst)
{
	size_t i = 0;

#ifdef GR_HAVE_AVX2
	if (gr_reduce_isa() == GR_ISA_AVX2_F16C)
		i = widen_avx2(dt, src, n, dst);
#endif
	widen_base(dt, src, n, dst, i);
}
