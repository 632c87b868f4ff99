/*
 * Fuzz target: gpuredctl's text numbers (client/ctl-input.c). The input's
 * first byte chooses the dtype (its value modulo 14, gpured_dtype's
 * order: 0-5 the wide ones, 6-13 f16 bf16 f8e4m3 f8e5m2 i8 u8 i16 u16);
 * the rest is the text, as gpuredctl reads it from a file or stdin.
 *
 * Checked: ctl_input_parse_text() returns the elements that
 * ctl_input_parse_number() gives for each whitespace-separated token, or
 * the first token's error with its place; every element, printed with
 * ctl_input_format_value(), reads back to the same value; and a narrow
 * float is the value of its dtype nearest to the token (no neighbour is
 * nearer to the token read as a double), or out of range only past the
 * dtype's largest value.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ctl-input.h"
#include "tests/check.h"
#include "tests/narrow-formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const gpured_dtype dtypes[] = { GPURED_I32,    GPURED_I64,    GPURED_U32, GPURED_U64,
				       GPURED_F32,    GPURED_F64,    GPURED_F16, GPURED_BF16,
				       GPURED_F8E4M3, GPURED_F8E5M2, GPURED_I8,  GPURED_U8,
				       GPURED_I16,    GPURED_U16 };
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* A narrow element's bits (little-endian, 1 or 2 bytes). */
static uint32_t narrow_bits(gpured_dtype dt, const uint8_t *p)
{
	return gpured_dtype_size(dt) == 1 ? p[0] : (uint32_t)(p[0] | p[1] << 8);
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The element at p as a value, the way gpuredctl prints a min or max. */
static gpured_value as_value(gpured_dtype dt, const uint8_t *p)
{
	gpured_value v = { 0 };

	switch (dt) {
	case GPURED_I32: {
		int32_t x;
		memcpy(&x, p, sizeof(x));
		v.kind = GPURED_KIND_I64;
		v.v.i = x;
		break;
	}
	case GPURED_I64:
		v.kind = GPURED_KIND_I64;
		memcpy(&v.v.i, p, sizeof(v.v.i));
		break;
	case GPURED_U32: {
		uint32_t x;
		memcpy(&x, p, sizeof(x));
		v.kind = GPURED_KIND_U64;
		v.v.u = x;
		break;
	}
	case GPURED_U64:
		v.kind = GPURED_KIND_U64;
		memcpy(&v.v.u, p, sizeof(v.v.u));
		break;
	case GPURED_F32: {
		float x;
		memcpy(&x, p, sizeof(x));
		v.kind = GPURED_KIND_F64;
		v.v.f = x;
		break;
	}
	case GPURED_F64:
		v.kind = GPURED_KIND_F64;
		memcpy(&v.v.f, p, sizeof(v.v.f));
		break;
	case GPURED_F16:
	case GPURED_BF16:
	case GPURED_F8E4M3:
	case GPURED_F8E5M2:
		v.kind = GPURED_KIND_F64;
		v.v.f = test_decode_double(test_format_named(gpured_dtype_name(dt)),
					   narrow_bits(dt, p));
		break;
	case GPURED_I8:
		v.kind = GPURED_KIND_I64;
		v.v.i = (int8_t)p[0];
		break;
	case GPURED_I16:
		v.kind = GPURED_KIND_I64;
		v.v.i = (int16_t)narrow_bits(dt, p);
		break;
	case GPURED_U8:
	case GPURED_U16:
		v.kind = GPURED_KIND_U64;
		v.v.u = narrow_bits(dt, p);
		break;
	}
	return v;
}

/* The largest finite magnitude's bits of f. */
static uint32_t max_finite(const test_format *f)
{
	uint32_t k = (1u << (f->ebits + f->mbits)) - 1;

	while (test_decode(f, k).cls != TEST_FINITE)
		k--;
	return k;
}

/*
 * A narrow float token: r and (when r is 0) the element at p, against
 * the token read as a double. The double may itself be rounded, so only
 * a neighbour strictly nearer to it than the element is wrong (the
 * exhaustive ties are test-ctl-input-narrow's).
 */
static void check_nearest(gpured_dtype dt, const char *tok, size_t len, int r, const uint8_t *p)
{
	const test_format *f = test_format_named(gpured_dtype_name(dt));
	const uint32_t sign = 1u << (f->ebits + f->mbits), top = max_finite(f);
	double d, a;
	uint8_t wide[8];
	uint32_t b, k;

	if (ctl_input_parse_number(tok, len, GPURED_F64, wide) != 0) {
		/* not a double, or past the double's range: not a number,
		 * or out of range, for the narrow dtype too */
		CHECK(r != 0);
		return;
	}
	memcpy(&d, wide, 8);
	a = fabs(d);
	if (r == -ERANGE) {
		/* past the largest finite value, or an infinity f8e4m3 has none of */
		CHECK_MSG(a > test_decode_double(f, top) || (isinf(d) && !f->ieee),
			  "'%.*s' out of range for %s", (int)len, tok, gpured_dtype_name(dt));
		return;
	}
	CHECK_MSG(r == 0, "'%.*s' is a double but not a %s (%d)", (int)len, tok,
		  gpured_dtype_name(dt), r);
	b = narrow_bits(dt, p);
	if (isnan(d)) {
		CHECK(test_decode(f, b).cls == TEST_NAN);
		return;
	}
	CHECK_MSG(!!(b & sign) == !!signbit(d), "'%.*s' as %s: %#x, the wrong sign", (int)len, tok,
		  gpured_dtype_name(dt), b);
	k = b & (sign - 1);
	if (isinf(d)) {
		CHECK(test_decode(f, b).cls == TEST_INF);
		return;
	}
	CHECK_MSG(k <= top, "'%.*s' as %s: %#x, not finite", (int)len, tok, gpured_dtype_name(dt), b);
	double v = test_decode_double(f, k);
	if (k > 0)
		CHECK_MSG(fabs(a - test_decode_double(f, k - 1)) >= fabs(a - v),
			  "'%.*s' as %s: %#x, but %#x is nearer", (int)len, tok, gpured_dtype_name(dt),
			  b, k - 1);
	if (k < top)
		CHECK_MSG(fabs(test_decode_double(f, k + 1) - a) >= fabs(a - v),
			  "'%.*s' as %s: %#x, but %#x is nearer", (int)len, tok, gpured_dtype_name(dt),
			  b, k + 1);
}

/* Printed and read back as the value's own kind, it is the same value. */
static void check_round_trip(gpured_dtype dt, const uint8_t *p)
{
	gpured_value v = as_value(dt, p), back = { 0 };
	gpured_dtype wide = v.kind == GPURED_KIND_I64   ? GPURED_I64
			    : v.kind == GPURED_KIND_U64 ? GPURED_U64
							: GPURED_F64;
	char buf[64];
	int n;

	n = ctl_input_format_value(&v, 0, buf, sizeof(buf));
	CHECK(n > 0 && (size_t)n < sizeof(buf));
	CHECK_MSG(ctl_input_parse_number(buf, (size_t)n, wide, &back.v) == 0,
		  "printed as '%s', does not read back", buf);
	if (v.kind == GPURED_KIND_F64 && isnan(v.v.f))
		CHECK(isnan(back.v.f));
	else
		CHECK_MSG(memcmp(&v.v, &back.v, sizeof(v.v)) == 0, "'%s' reads back differently", buf);

	n = ctl_input_format_value(&v, 1, buf, sizeof(buf));
	CHECK(n > 0 && (size_t)n < sizeof(buf));
	if (v.kind == GPURED_KIND_F64 && !isfinite(v.v.f))
		CHECK(strcmp(buf, "null") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text;
	ctl_input_error err = { 0 };
	gpured_dtype dt;
	size_t len, esz, n = 0, i = 0, idx = 0, line = 1, line_start = 0;
	void *out = NULL;
	uint8_t one[8];
	int r;

	if (size < 1)
		return 0;
	dt = dtypes[data[0] % NDTYPES];
	esz = gpured_dtype_size(dt);
	text = (const char *)data + 1;
	len = size - 1;

	r = ctl_input_parse_text(text, len, dt, &out, &n, &err);
	CHECK(r == 0 || r == -EINVAL || r == -ERANGE);

	/* Token by token, the same story. */
	while (i < len) {
		size_t start;
		int k;

		if (is_space(text[i])) {
			if (text[i] == '\n') {
				line++;
				line_start = i + 1;
			}
			i++;
			continue;
		}
		start = i;
		while (i < len && !is_space(text[i]))
			i++;
		k = ctl_input_parse_number(text + start, i - start, dt, one);
		if (test_format_named(gpured_dtype_name(dt)))
			check_nearest(dt, text + start, i - start, k, one);
		if (k < 0) {
			CHECK_MSG(r == k, "token %zu: %d, whole text: %d", idx, k, r);
			CHECK(err.err == k && err.index == idx && err.line == line &&
			      err.column == start - line_start + 1);
			CHECK(strlen(err.token) < sizeof(err.token));
			CHECK(strncmp(err.token, text + start,
				      strlen(err.token) > sizeof(err.token) - 4
					      ? sizeof(err.token) - 4
					      : strlen(err.token)) == 0);
			return 0;
		}
		/* (When the text fails, it is at a later token: see above.) */
		if (r == 0)
			CHECK(idx < n && memcmp((uint8_t *)out + idx * esz, one, esz) == 0);
		check_round_trip(dt, one);
		idx++;
	}
	CHECK_MSG(r == 0, "every token parses alone but the text fails at %zu", err.index);
	CHECK(n == idx);
	CHECK(n > 0 ? out != NULL : out == NULL);
	free(out);
	return 0;
}
