/*
 * The narrow dtypes' reductions (math/widen.h) on one core, next to a
 * plain sum of the same array in the same run: each element widened to
 * float and added in four vectors of float lanes (integers in int32
 * lanes, which cannot overflow at these sizes), as an ordinary inexact
 * sum does it, built for the same ISA as the daemon's kernels (AVX2 and
 * F16C where the CPU has them: f16, and the 8-bit floats as f16s, go
 * through F16C). In cache (2^12 and 2^16 elements) and from memory (2^24).
 * The data: near, within a few binades of 1; normal, N(0, 1) rounded to
 * the dtype (tiny values too, as in an ML tensor).
 *
 *   narrow-bench [samples = 31 [op [data]]]   op: sum (default), min, argmax, moments
 *                                             data: near (default), normal
 *
 * Each sample times gr_reduce() and then the plain sum on the same
 * buffer, so that both see the same load; the medians are printed (GB/s
 * of input) with the ratio's median and quartiles.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "math/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PLAIN_ATTR __attribute__((target("avx2,f16c,fma")))
#else
#define PLAIN_ATTR
#endif

static volatile double sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A float's bits from a narrow float's (the formulas of IEEE 754 and OCP). */
static float f16_value(uint16_t h)
{
	int e = h >> 10 & 31, m = h & 1023;
	float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
							   : ldexpf((float)(m | 1024), e - 25);
	return h >> 15 ? -v : v;
}

static float e4m3_value(uint8_t b)
{
	int e = b >> 3 & 15, m = b & 7;
	float v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexpf((float)m, -9)
						       : ldexpf((float)(m | 8), e - 10);
	return b >> 7 ? -v : v;
}

#define PLAIN_LOOP(LOAD)                                                                           \
	{                                                                                          \
		float a[16] = {0};                                                                 \
		size_t i = 0;                                                                      \
		for (; i + 16 <= n; i += 16)                                                       \
			for (int k = 0; k < 16; k++)                                               \
				a[k] += LOAD(i + k);                                               \
		float s = 0;                                                                       \
		for (; i < n; i++)                                                                 \
			s += LOAD(i);                                                              \
		for (int k = 0; k < 16; k++)                                                       \
			s += a[k];                                                                 \
		return s;                                                                          \
	}

static float lut_e4m3[256], lut_e5m2[256];

#define LD_BF16(i) ((float)0 + bf16_f(p16[i]))
PLAIN_ATTR static inline float bf16_f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* bf16 as the top halves of floats: sixteen a load, four sums in flight */
PLAIN_ATTR static double plain_bf16(const uint16_t *p16, size_t n)
{
	const __m256i z = _mm256_setzero_si256();
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		__m256i v = _mm256_loadu_si256((const void *)(p16 + i));
		__m256i w = _mm256_loadu_si256((const void *)(p16 + i + 16));
		a0 = _mm256_add_ps(a0, _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v)));
		a1 = _mm256_add_ps(a1, _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v)));
		a2 = _mm256_add_ps(a2, _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, w)));
		a3 = _mm256_add_ps(a3, _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, w)));
	}
	float t[8], s = 0;
	_mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (int k = 0; k < 8; k++)
		s += t[k];
	for (; i < n; i++)
		s += bf16_f(p16[i]);
	return s;
}

PLAIN_ATTR static double plain_f16(const uint16_t *p16, size_t n)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		a0 = _mm256_add_ps(a0, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(p16 + i))));
		a1 = _mm256_add_ps(a1, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(p16 + i + 8))));
		a2 = _mm256_add_ps(a2, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(p16 + i + 16))));
		a3 = _mm256_add_ps(a3, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(p16 + i + 24))));
	}
	float t[8], s = 0;
	_mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (int k = 0; k < 8; k++)
		s += t[k];
	for (; i < n; i++)
		s += f16_value(p16[i]);
	return s;
}

/* E5M2 as the top byte of an f16; E4M3 as an f16 of its fields (its
 * value times 2^-8, scaled back once at the end), both through F16C. */
#define PLAIN_F8(NAME, TO_F16, SCALE)                                                              \
	PLAIN_ATTR static double NAME(const uint8_t *p8, size_t n)                                 \
	{                                                                                          \
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                        \
		const __m128i z = _mm_setzero_si128();                                             \
		size_t i = 0;                                                                      \
		for (; i + 32 <= n; i += 32) {                                                     \
			__m128i b = _mm_loadu_si128((const void *)(p8 + i));                       \
			__m128i c = _mm_loadu_si128((const void *)(p8 + i + 16));                  \
			a0 = _mm256_add_ps(a0, _mm256_cvtph_ps(TO_F16(_mm_unpacklo_epi8(z, b))));  \
			a1 = _mm256_add_ps(a1, _mm256_cvtph_ps(TO_F16(_mm_unpackhi_epi8(z, b))));  \
			a2 = _mm256_add_ps(a2, _mm256_cvtph_ps(TO_F16(_mm_unpacklo_epi8(z, c))));  \
			a3 = _mm256_add_ps(a3, _mm256_cvtph_ps(TO_F16(_mm_unpackhi_epi8(z, c))));  \
		}                                                                                  \
		float t[8], s = 0;                                                                 \
		_mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))); \
		for (int k = 0; k < 8; k++)                                                        \
			s += t[k];                                                                 \
		s *= SCALE;                                                                        \
		for (; i < n; i++)                                                                 \
			s += lut_##NAME[p8[i]];                                                    \
		return s;                                                                          \
	}
/* each byte already the top byte of a 16-bit lane: E5M2 is an f16;
 * E4M3's fields move down one bit (the arithmetic shift copies the sign
 * into bit 14, which the mask clears) */
#define E5M2_F16(x) (x)
#define E4M3_F16(x) _mm_and_si128(_mm_srai_epi16(x, 1), _mm_set1_epi16((short)0xbfff))
#define lut_plain_e4m3 lut_e4m3
#define lut_plain_e5m2 lut_e5m2
PLAIN_F8(plain_e5m2, E5M2_F16, 1.0f)
PLAIN_F8(plain_e4m3, E4M3_F16, 256.0f)
#else
PLAIN_ATTR static double plain_bf16(const uint16_t *p16, size_t n) PLAIN_LOOP(LD_BF16)
#define LD_F16(i) f16_value(p16[i])
static double plain_f16(const uint16_t *p16, size_t n) PLAIN_LOOP(LD_F16)
#define LD_E4M3(i) lut_e4m3[p8[i]]
static double plain_e4m3(const uint8_t *p8, size_t n) PLAIN_LOOP(LD_E4M3)
#define LD_E5M2(i) lut_e5m2[p8[i]]
static double plain_e5m2(const uint8_t *p8, size_t n) PLAIN_LOOP(LD_E5M2)
#endif

#define PLAIN_INT(NAME, T)                                                                         \
	PLAIN_ATTR static double NAME(const T *p, size_t n)                                        \
	{                                                                                          \
		int32_t a[16] = {0};                                                               \
		size_t i = 0;                                                                      \
		for (; i + 16 <= n; i += 16)                                                       \
			for (int k = 0; k < 16; k++)                                               \
				a[k] += p[i + k];                                                  \
		int64_t s = 0;                                                                     \
		for (; i < n; i++)                                                                 \
			s += p[i];                                                                 \
		for (int k = 0; k < 16; k++)                                                       \
			s += a[k];                                                                 \
		return (double)s;                                                                  \
	}
PLAIN_INT(plain_i8, int8_t)
PLAIN_INT(plain_u8, uint8_t)
PLAIN_INT(plain_i16, int16_t)
PLAIN_INT(plain_u16, uint16_t)

static double plain(gr_dtype dt, const void *p, size_t n)
{
	switch (dt) {
	case GR_DT_F16:
		return plain_f16(p, n);
	case GR_DT_BF16:
		return plain_bf16(p, n);
	case GR_DT_F8E4M3:
		return plain_e4m3(p, n);
	case GR_DT_F8E5M2:
		return plain_e5m2(p, n);
	case GR_DT_I8:
		return plain_i8(p, n);
	case GR_DT_U8:
		return plain_u8(p, n);
	case GR_DT_I16:
		return plain_i16(p, n);
	default:
		return plain_u16(p, n);
	}
}

/* Random values of the dtype, of one sign or the other, finite, within a
 * few binades of 1 (the data an ordinary sum is meant for). */
static void fill(gr_dtype dt, unsigned char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned r = (unsigned)rand();
		switch (dt) {
		case GR_DT_F16: { /* exponents 11..18: 2^-4 .. 2^4 */
			uint16_t h = (uint16_t)((r & 0x8000) | ((11 + (r >> 16) % 8) << 10) | (r & 1023));
			memcpy(buf + 2 * i, &h, 2);
			break;
		}
		case GR_DT_BF16: {
			uint16_t h = (uint16_t)((r & 0x8000) | ((123 + (r >> 16) % 8) << 7) | (r & 127));
			memcpy(buf + 2 * i, &h, 2);
			break;
		}
		case GR_DT_F8E4M3:
			buf[i] = (uint8_t)((r & 0x80) | ((3 + (r >> 16) % 8) << 3) | (r & 7));
			break;
		case GR_DT_F8E5M2:
			buf[i] = (uint8_t)((r & 0x80) | ((11 + (r >> 16) % 8) << 2) | (r & 3));
			break;
		default:
			memcpy(buf + gr_dtype_size(dt) * i, &r, gr_dtype_size(dt));
			break;
		}
	}
}

/* x rounded to nearest-even in a float format of ebits exponent and mbits
 * fraction bits (bias 2^(ebits-1) - 1): its bits. Finite, in range. */
static uint32_t round_to(double x, unsigned ebits, unsigned mbits)
{
	const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
	const uint32_t sign = signbit(x) ? 1u << (ebits + mbits) : 0;
	int e;

	x = fabs(x);
	if (x == 0)
		return sign;
	frexp(x, &e);
	e = e - 1 < emin ? emin : e - 1; /* x's binade, or the subnormals' */
	double v = rint(ldexp(x, (int)mbits - e)); /* units of the last place */
	if (v >= ldexp(1, (int)mbits + 1)) {   /* rounded up a binade */
		v /= 2;
		e++;
	}
	if (v < ldexp(1, (int)mbits))
		return sign | (uint32_t)v; /* subnormal */
	return sign | (uint32_t)(e + bias) << mbits | ((uint32_t)v - (1u << mbits));
}

/* Values of N(0, 1) rounded to the dtype: an ML tensor's spread of
 * exponents, tiny values included. */
static void fill_normal(gr_dtype dt, unsigned char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = rand() / (RAND_MAX + 1.0);
		double x = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		uint16_t h;
		switch (dt) {
		case GR_DT_F16:
			h = (uint16_t)round_to(x, 5, 10);
			memcpy(buf + 2 * i, &h, 2);
			break;
		case GR_DT_BF16:
			h = (uint16_t)round_to(x, 8, 7);
			memcpy(buf + 2 * i, &h, 2);
			break;
		case GR_DT_F8E4M3:
			buf[i] = (uint8_t)round_to(x, 4, 3);
			break;
		case GR_DT_F8E5M2:
			buf[i] = (uint8_t)round_to(x, 5, 2);
			break;
		default:
			fill(dt, buf + gr_dtype_size(dt) * i, 1);
			break;
		}
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int samples = argc > 1 ? atoi(argv[1]) : 31;
	const char *opname = argc > 2 ? argv[2] : "sum";
	const char *data = argc > 3 ? argv[3] : "near";
	/* the largest size measured, as log2 of the elements */
	const unsigned lg_max = argc > 4 ? (unsigned)atoi(argv[4]) : 24;
	gr_op op;
	static const gr_dtype dts[] = {GR_DT_F16, GR_DT_BF16, GR_DT_F8E4M3, GR_DT_F8E5M2,
				       GR_DT_I8,  GR_DT_U8,   GR_DT_I16,    GR_DT_U16};
	static const unsigned lgs[] = {12, 16, 24};
	const size_t nmax = (size_t)1 << 24;
	unsigned char *buf = NULL;

	if (samples < 1 || !gr_op_parse(opname, strlen(opname), &op) ||
	    (strcmp(data, "near") != 0 && strcmp(data, "normal") != 0)) {
		fprintf(stderr, "usage: narrow-bench [samples [op [near|normal [largest lg]]]]\n");
		return 2;
	}
	double *te = malloc(samples * sizeof(double)), *tp = malloc(samples * sizeof(double));
	double *ratio = malloc(samples * sizeof(double));
	if (!te || !tp || !ratio || posix_memalign((void **)&buf, 64, nmax * 2)) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (unsigned b = 0; b < 256; b++) {
		lut_e4m3[b] = e4m3_value((uint8_t)b);
		lut_e5m2[b] = f16_value((uint16_t)(b << 8));
	}
	srand(1);
	printf("%s of narrow dtypes (%s data) vs a plain float sum, one thread, %d samples: "
	       "medians (GB/s), ratio median [quartiles]\n",
	       opname, data, samples);
	printf("%-7s %5s %8s %8s %6s\n", "dt", "n", "gpured", "plain", "ratio");
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (size_t l = 0; l < sizeof(lgs) / sizeof(lgs[0]) && lgs[l] <= lg_max; l++) {
			gr_dtype dt = dts[d];
			size_t n = (size_t)1 << lgs[l], nb = n * gr_dtype_size(dt);
			int calls = n >= (1u << 18) ? 1 : (int)((1u << 18) / n);
			if (strcmp(data, "normal") == 0)
				fill_normal(dt, buf, n);
			else
				fill(dt, buf, n);
			for (int r = 0; r < samples; r++) {
				double t0 = now();
				for (int c = 0; c < calls; c++) {
					gr_partial p;
					gr_reduce(op, dt, buf, n, &p);
					sink = p.v.f;
				}
				double t1 = now();
				for (int c = 0; c < calls; c++)
					sink = plain(dt, buf, n);
				double t2 = now();
				te[r] = t1 - t0;
				tp[r] = t2 - t1;
				ratio[r] = tp[r] / te[r];
			}
			qsort(te, samples, sizeof(double), cmp);
			qsort(tp, samples, sizeof(double), cmp);
			qsort(ratio, samples, sizeof(double), cmp);
			printf("%-7s  2^%-2u %8.2f %8.2f %6.2f  [%.2f-%.2f]\n", gr_dtype_name(dt),
			       lgs[l], nb * calls / te[samples / 2] / 1e9,
			       nb * calls / tp[samples / 2] / 1e9, ratio[samples / 2],
			       ratio[samples / 4], ratio[samples - 1 - samples / 4]);
			fflush(stdout);
		}
	free(buf);
	free(ratio);
	free(tp);
	free(te);
	return 0;
}
