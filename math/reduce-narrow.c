/*
 * A block of a narrow dtype (proto/types.h): every op is the same op over
 * the elements widened exactly (widen.h), and that is how most run here,
 * a piece of widened elements at a time. Two ops have paths of their own,
 * with the same results: the sums of the 8- and 16-bit integers, whose
 * block sums fit 32-bit lanes (at most 2^15 elements below 2^16 in
 * magnitude: below 2^31), and the sums of the narrow floats, in float
 * lanes whose additions are proved exact (xsum-narrow.c); a block that
 * path does not take is widened and summed by the f32 kernel.
 */
#include <stdint.h>
#include <string.h>

#include "math/reduce.h"
#include "math/simd.h"
#include "math/widen.h"
#include "math/xsum.h"

/* Sixteen 32-bit lanes, added across at the end into 64 bits. */
#define INT_SUM(NAME, ATTR, T, LANE)                                                               \
	ATTR static int64_t NAME(const unsigned char *p, size_t n)                                 \
	{                                                                                          \
		LANE a[16] = {0};                                                                  \
		size_t i = 0;                                                                      \
		for (; i + 16 <= n; i += 16)                                                       \
			for (int k = 0; k < 16; k++) {                                             \
				T v;                                                               \
				memcpy(&v, p + sizeof(T) * (i + k), sizeof(v));                    \
				a[k] += v;                                                         \
			}                                                                          \
		int64_t s = 0;                                                                     \
		for (; i < n; i++) {                                                               \
			T v;                                                                       \
			memcpy(&v, p + sizeof(T) * i, sizeof(v));                                  \
			s += v;                                                                    \
		}                                                                                  \
		for (int k = 0; k < 16; k++)                                                       \
			s += a[k];                                                                 \
		return s;                                                                          \
	}
#define INT_SUMS(S, ATTR)                                                                          \
	INT_SUM(sum_i8##S, ATTR, int8_t, int32_t)                                                  \
	INT_SUM(sum_u8##S, ATTR, uint8_t, uint32_t)                                                \
	INT_SUM(sum_i16##S, ATTR, int16_t, int32_t)                                                \
	INT_SUM(sum_u16##S, ATTR, uint16_t, uint32_t)

INT_SUMS(_base, )
GR_AVX2_ONLY(INT_SUMS(_avx2, GR_AVX2))

static int64_t int_sum(gr_dtype dt, const unsigned char *p, size_t n)
{
#ifdef GR_HAVE_AVX2
	if (gr_reduce_isa() >= GR_ISA_AVX2) {
		switch (dt) {
		case GR_DT_I8:
			return sum_i8_avx2(p, n);
		case GR_DT_U8:
			return sum_u8_avx2(p, n);
		case GR_DT_I16:
			return sum_i16_avx2(p, n);
		default:
			return sum_u16_avx2(p, n);
		}
	}
#endif
	switch (dt) {
	case GR_DT_I8:
		return sum_i8_base(p, n);
	case GR_DT_U8:
		return sum_u8_base(p, n);
	case GR_DT_I16:
		return sum_i16_base(p, n);
	default:
		return sum_u16_base(p, n);
	}
}

void gr_reduce_narrow_block(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret)
{
	const gr_dtype w = gr_dtype_wide(dt);
	const size_t size = gr_dtype_size(dt);
	const unsigned char *p = data;
	uint32_t buf[GR_WIDEN_PIECE];

	if (op == GR_OP_SUM && !gr_dtype_is_float(dt) && n <= GR_REDUCE_BLOCK) {
		gr_partial_identity(op, w, ret);
		ret->v.u = (uint64_t)int_sum(dt, p, n);
		ret->count = n;
		return;
	}
	if (op == GR_OP_SUM && xsum_sum_narrow(dt, p, n, ret))
		return;
	gr_partial_identity(op, w, ret);
	for (size_t i = 0; i < n; i += GR_WIDEN_PIECE) {
		size_t k = n - i < GR_WIDEN_PIECE ? n - i : GR_WIDEN_PIECE;
		gr_partial b;
		gr_widen(dt, p + i * size, k, buf);
		gr_reduce_block(op, w, buf, k, &b);
		gr_partial_combine(op, w, ret, &b);
	}
}
