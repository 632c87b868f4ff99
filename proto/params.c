/*
 * A request's params, apart from the parser's states (params.h).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "params.h"

static const char *const key_names[KEY_N] = {
	[KEY_OP] = "op",         [KEY_DTYPE] = "dtype",   [KEY_DATA] = "data",
	[KEY_REGION] = "region", [KEY_OFFSET] = "offset", [KEY_COUNT] = "count",
	[KEY_BYTES] = "bytes",   [KEY_KIND] = "kind",     [KEY_DEVICE] = "device",
	[KEY_HANDLE] = "handle", [KEY_PARTIAL] = "partial",
	[KEY_DDOF] = "ddof",     [KEY_OFFSETS] = "offsets",
	[KEY_OUT_REGION] = "out_region", [KEY_OUT_OFFSET] = "out_offset",
	[KEY_WRITABLE] = "writable", [KEY_PART_BYTES] = "part_bytes",
};

const char *params_key_name(req_key k)
{
	return (unsigned)k < KEY_N && key_names[k] ? key_names[k] : "?";
}

unsigned params_method_keys(gr_method m)
{
	return m == GR_METHOD_REDUCE ? REDUCE_KEYS : m == GR_METHOD_MAP ? MAP_KEYS
		: m == GR_METHOD_UNMAP ? UNMAP_KEYS : m == GR_METHOD_MAP_PART ? MAP_PART_KEYS : 0;
}

/* "op, dtype, data, ..." for a method's messages. */
const char *params_method_key_list(gr_method m)
{
	switch (m) {
	case GR_METHOD_REDUCE:
		return "op, dtype, and data or region, offset, count; partial, ddof, offsets, "
		       "out_region, out_offset";
	case GR_METHOD_MAP:
		return "bytes, kind, device, handle, writable, part_bytes";
	case GR_METHOD_UNMAP:
		return "region";
	case GR_METHOD_MAP_PART:
		return "region, bytes";
	default:
		return "none";
	}
}

/*
 * Word lookups by length, then bytes: the wire names of types.c (every
 * one of them is exercised by tests/proto/test-request.c).
 */
gr_method params_match_method(const char *w, size_t n)
{
	switch (n) {
	case 3:
		if (memcmp(w, "map", 3) == 0)
			return GR_METHOD_MAP;
		break;
	case 4:
		if (memcmp(w, "ping", 4) == 0)
			return GR_METHOD_PING;
		if (memcmp(w, "info", 4) == 0)
			return GR_METHOD_INFO;
		break;
	case 5:
		if (memcmp(w, "stats", 5) == 0)
			return GR_METHOD_STATS;
		if (memcmp(w, "unmap", 5) == 0)
			return GR_METHOD_UNMAP;
		break;
	case 6:
		if (memcmp(w, "reduce", 6) == 0)
			return GR_METHOD_REDUCE;
		break;
	case 8:
		if (memcmp(w, "map_part", 8) == 0)
			return GR_METHOD_MAP_PART;
		break;
	}
	return GR_METHOD_NONE;
}

req_key params_match_key(const char *w, size_t n)
{
	switch (n) {
	case 2:
		if (memcmp(w, "op", 2) == 0)
			return KEY_OP;
		break;
	case 4:
		if (memcmp(w, "data", 4) == 0)
			return KEY_DATA;
		if (memcmp(w, "kind", 4) == 0)
			return KEY_KIND;
		if (memcmp(w, "ddof", 4) == 0)
			return KEY_DDOF;
		break;
	case 5:
		if (memcmp(w, "dtype", 5) == 0)
			return KEY_DTYPE;
		if (memcmp(w, "count", 5) == 0)
			return KEY_COUNT;
		if (memcmp(w, "bytes", 5) == 0)
			return KEY_BYTES;
		break;
	case 6:
		if (memcmp(w, "region", 6) == 0)
			return KEY_REGION;
		if (memcmp(w, "offset", 6) == 0)
			return KEY_OFFSET;
		if (memcmp(w, "device", 6) == 0)
			return KEY_DEVICE;
		if (memcmp(w, "handle", 6) == 0)
			return KEY_HANDLE;
		break;
	case 7:
		if (memcmp(w, "partial", 7) == 0)
			return KEY_PARTIAL;
		if (memcmp(w, "offsets", 7) == 0)
			return KEY_OFFSETS;
		break;
	case 8:
		if (memcmp(w, "writable", 8) == 0)
			return KEY_WRITABLE;
		break;
	case 10:
		if (memcmp(w, "part_bytes", 10) == 0)
			return KEY_PART_BYTES;
		if (memcmp(w, "out_region", 10) == 0)
			return KEY_OUT_REGION;
		if (memcmp(w, "out_offset", 10) == 0)
			return KEY_OUT_OFFSET;
		break;
	}
	return KEY_NONE;
}

bool params_match_kind(const char *w, size_t n, gr_map_kind *ret)
{
	for (int k = 0; k < GR_MAP_N; k++) {
		const char *name = gr_map_kind_name((gr_map_kind)k);
		if (strlen(name) == n && memcmp(w, name, n) == 0) {
			*ret = (gr_map_kind)k;
			return true;
		}
	}
	return false;
}

bool params_match_op(const char *w, size_t n, gr_op *ret, bool *ret_scan)
{
	*ret_scan = false;
	if (n == 6 && memcmp(w, "cumsum", 6) == 0) {
		/* the prefix sums of sum: its result kinds, and its exact
		 * partials for the float carries */
		*ret = GR_OP_SUM;
		*ret_scan = true;
		return true;
	}
	if (n == 3) {
		if (memcmp(w, "sum", 3) == 0)
			*ret = GR_OP_SUM;
		else if (memcmp(w, "min", 3) == 0)
			*ret = GR_OP_MIN;
		else if (memcmp(w, "max", 3) == 0)
			*ret = GR_OP_MAX;
		else
			return false;
		return true;
	}
	if (n == 5 && memcmp(w, "sumsq", 5) == 0) {
		*ret = GR_OP_SUMSQ;
		return true;
	}
	if (n == 7 && memcmp(w, "moments", 7) == 0) {
		*ret = GR_OP_MOMENTS;
		return true;
	}
	if (n == 6 && memcmp(w, "arg", 3) == 0) {
		if (memcmp(w + 3, "min", 3) == 0)
			*ret = GR_OP_ARGMIN;
		else if (memcmp(w + 3, "max", 3) == 0)
			*ret = GR_OP_ARGMAX;
		else
			return false;
		return true;
	}
	return false;
}

bool params_match_dtype(const char *w, size_t n, gr_dtype *ret)
{
	bool wide;

	if (n != 3 || w[0] == 'b')
		return gr_dtype_parse(w, n, ret);
	if (w[1] == '3' && w[2] == '2')
		wide = false;
	else if (w[1] == '6' && w[2] == '4')
		wide = true;
	else
		return gr_dtype_parse(w, n, ret);
	switch (w[0]) {
	case 'i':
		*ret = wide ? GR_DT_I64 : GR_DT_I32;
		return true;
	case 'u':
		*ret = wide ? GR_DT_U64 : GR_DT_U32;
		return true;
	case 'f':
		*ret = wide ? GR_DT_F64 : GR_DT_F32;
		return true;
	}
	return false;
}

/*
 * An integer element of a narrow integer dtype (size bytes, signed or
 * not), in range: stored little-endian.
 */
static const char *convert_narrow_int(const gr_mp_token *t, bool is_signed, unsigned size,
				      uint8_t *out)
{
	const int64_t lo = is_signed ? -((int64_t)1 << (8 * size - 1)) : 0;
	const uint64_t hi = is_signed ? ((uint64_t)1 << (8 * size - 1)) - 1
				      : ((uint64_t)1 << (8 * size)) - 1;
	uint64_t bits;

	if (t->type == GR_MP_UINT ? t->u.u > hi : t->u.i < lo)
		return "is out of range";
	bits = t->type == GR_MP_UINT ? t->u.u : (uint64_t)t->u.i;
	for (unsigned i = 0; i < size; i++)
		out[i] = (uint8_t)(bits >> (8 * i));
	return NULL;
}

/* The value of a narrow float dtype's bit pattern (proto/ sits below
 * math/'s conversions: the formula itself). */
static double narrow_value(gr_dtype dt, unsigned bits)
{
	unsigned man_bits, exp_bits, bias;
	bool fn = false; /* E4M3: no infinities, S.1111.111 is NaN */

	switch (dt) {
	case GR_DT_F16:
		exp_bits = 5, man_bits = 10, bias = 15;
		break;
	case GR_DT_BF16:
		exp_bits = 8, man_bits = 7, bias = 127;
		break;
	case GR_DT_F8E4M3:
		exp_bits = 4, man_bits = 3, bias = 7, fn = true;
		break;
	default: /* GR_DT_F8E5M2 */
		exp_bits = 5, man_bits = 2, bias = 15;
		break;
	}
	const unsigned emax = (1u << exp_bits) - 1, man = bits & ((1u << man_bits) - 1);
	const unsigned e = (bits >> man_bits) & emax;
	const bool neg = bits >> (exp_bits + man_bits) & 1;
	double v;

	if (fn && e == emax && man == (1u << man_bits) - 1)
		v = NAN;
	else if (!fn && e == emax)
		v = man ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(man, 1 - (int)bias - (int)man_bits);
	else
		v = ldexp(man | 1u << man_bits, (int)e - (int)bias - (int)man_bits);
	return neg ? -v : v;
}

/*
 * A number as a narrow float dtype, only where that dtype holds its value
 * exactly, found by a binary search over the dtype's non-negative
 * patterns (in order of value, NaNs last): NaN to the dtype's quiet NaN,
 * infinities where it has them.
 */
static const char *convert_narrow_float(gr_dtype dt, const gr_mp_token *t, uint8_t *out)
{
	const unsigned size = (unsigned)gr_dtype_size(dt), nbits = 8 * size;
	double x;

	if (t->type == GR_MP_UINT)
		x = (double)t->u.u;
	else if (t->type == GR_MP_INT)
		x = (double)t->u.i;
	else
		x = t->u.f;
	/* an integer the double does not hold is no value of the dtype
	 * (those it holds include every integer a narrow float has) */
	if (t->type == GR_MP_UINT && (x >= 0x1p64 || (uint64_t)x != t->u.u))
		return "is not a value of the dtype";
	if (t->type == GR_MP_INT && (x >= 0x1p63 || (int64_t)x != t->u.i))
		return "is not a value of the dtype";
	/* the positive patterns, in order of value: a binary search for |x| */
	const unsigned sign = 1u << (nbits - 1);
	unsigned lo = 0, hi = sign - 1;
	const double ax = fabs(x);

	if (isnan(x)) {
		unsigned nan = dt == GR_DT_F8E4M3 ? 0x7f : dt == GR_DT_F8E5M2 ? 0x7e
						: dt == GR_DT_BF16   ? 0x7fc0
								     : 0x7e00;
		for (unsigned i = 0; i < size; i++)
			out[i] = (uint8_t)(nan >> (8 * i));
		return NULL;
	}
	while (lo < hi) {
		unsigned mid = lo + (hi - lo + 1) / 2;
		double v = narrow_value(dt, mid);
		if (isnan(v) || v > ax)
			hi = mid - 1;
		else
			lo = mid;
	}
	if (narrow_value(dt, lo) != ax)
		return isinf(x) ? "is an infinity, which the dtype does not have"
				: "is not a value of the dtype";
	unsigned bits = lo | (signbit(x) ? sign : 0);
	for (unsigned i = 0; i < size; i++)
		out[i] = (uint8_t)(bits >> (8 * i));
	return NULL;
}

/* Store an array element as dtype dt in out; NULL or why it cannot be. */
const char *params_convert(gr_dtype dt, const gr_mp_token *t, uint8_t out[8])
{
	if (t->type != GR_MP_UINT && t->type != GR_MP_INT && t->type != GR_MP_FLOAT)
		return "is not a number";
	if (t->type == GR_MP_FLOAT && !gr_dtype_is_float(dt))
		return "is a float, not an integer";

	switch (dt) {
	case GR_DT_I32: {
		int32_t v;

		if (t->type == GR_MP_UINT ? t->u.u > INT32_MAX : t->u.i < INT32_MIN)
			return "is out of range";
		v = t->type == GR_MP_UINT ? (int32_t)t->u.u : (int32_t)t->u.i;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_I64: {
		int64_t v;

		if (t->type == GR_MP_UINT && t->u.u > INT64_MAX)
			return "is out of range";
		v = t->type == GR_MP_UINT ? (int64_t)t->u.u : t->u.i;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_U32: {
		uint32_t v;

		if (t->type == GR_MP_INT || t->u.u > UINT32_MAX)
			return "is out of range";
		v = (uint32_t)t->u.u;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_U64:
		if (t->type == GR_MP_INT)
			return "is out of range";
		memcpy(out, &t->u.u, 8);
		return NULL;
	case GR_DT_F32: {
		float v;

		if (t->type == GR_MP_UINT)
			v = (float)t->u.u;
		else if (t->type == GR_MP_INT)
			v = (float)t->u.i;
		else if (t->is_f32 || isnan(t->u.f) || isinf(t->u.f) || fabs(t->u.f) <= FLT_MAX)
			v = (float)t->u.f;
		else
			return "is out of range";
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_F64: {
		double v;

		if (t->type == GR_MP_UINT)
			v = (double)t->u.u;
		else if (t->type == GR_MP_INT)
			v = (double)t->u.i;
		else
			v = t->u.f;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_F16:
	case GR_DT_BF16:
	case GR_DT_F8E4M3:
	case GR_DT_F8E5M2:
		return convert_narrow_float(dt, t, out);
	case GR_DT_I8:
	case GR_DT_U8:
	case GR_DT_I16:
	case GR_DT_U16:
		return convert_narrow_int(t, gr_dtype_is_signed(dt), (unsigned)gr_dtype_size(dt), out);
	default:
		return "has no dtype";
	}
}
