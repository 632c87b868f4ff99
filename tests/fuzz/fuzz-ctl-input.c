/*
 * Fuzz target: gpuredctl's text numbers (client/ctl-input.c). The input's
 * first byte chooses the dtype (0-5); the rest is the text, as gpuredctl
 * reads it from a file or stdin.
 *
 * Checked: ctl_input_parse_text() returns the elements that
 * ctl_input_parse_number() gives for each whitespace-separated token, or
 * the first token's error with its place; and every element, printed with
 * ctl_input_format_value(), reads back to the same value.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ctl-input.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const gpured_dtype dtypes[] = { GPURED_I32, GPURED_I64, GPURED_U32,
				       GPURED_U64, GPURED_F32, GPURED_F64 };

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
	}
	return v;
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
	dt = dtypes[data[0] % 6];
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
