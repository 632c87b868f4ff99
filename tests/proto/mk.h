/*
 * A small notation for writing msgpack test inputs by hand:
 *
 *   [0, 1, "ping", []]        arrays, maps {k: v}, strings, ints, floats
 *   nil true false nan inf -inf
 *   x"0100"  x"00"*17         bin (hex body, optionally repeated)
 *   "m"*33                    a string repeated
 *   <dd ff ff ff ff>          raw bytes, counted as one element
 *   |                         cut the stream here (containers are still
 *                             counted as written, so the input is truncated)
 *   u8:5 i64:-1 f32:1.5 s32:"ping" b32:x"00" a16:[] m32:{}
 *                             force an encoding
 *
 * Commas and colons are only separators. Several top-level values may
 * follow one another; mk() records where each ends.
 */
#pragma once

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "proto/mp.h"

#define MK_MAX_ENDS 64

typedef struct mk_out {
	gr_buf b;
	size_t ends[MK_MAX_ENDS]; /* offsets where top-level values end */
	unsigned n_ends;
} mk_out;

static void mk_value(gr_buf *out, const char **s);

static const uint8_t mk_cut_mark[8] = { 0xc1, 0xc1, 0xc1, 0xc1, 'C', 'U', 'T', '!' };

static void mk_skip(const char **s)
{
	while (**s == ' ' || **s == ',' || **s == ':' || **s == '\n' || **s == '\t')
		(*s)++;
}

static void mk_be(gr_buf *out, uint8_t type, uint64_t v, unsigned n)
{
	uint8_t h[9];

	h[0] = type;
	for (unsigned i = 0; i < n; i++)
		h[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	CHECK(gr_buf_append(out, h, 1 + n) == 0);
}

/* A header of len with a forced width (tag) or the shortest one. */
static void mk_header(gr_buf *out, char kind, unsigned bits, uint64_t len)
{
	uint8_t t8, t16, t32;

	switch (kind) {
	case 's':
		t8 = 0xd9, t16 = 0xda, t32 = 0xdb;
		break;
	case 'b':
		t8 = 0xc4, t16 = 0xc5, t32 = 0xc6;
		break;
	case 'a':
		t8 = 0, t16 = 0xdc, t32 = 0xdd;
		break;
	default:
		t8 = 0, t16 = 0xde, t32 = 0xdf;
		break;
	}
	if (bits == 0) {
		switch (kind) {
		case 's':
			if (len <= 31) {
				mk_be(out, (uint8_t)(0xa0 | len), 0, 0);
				return;
			}
			bits = len <= 255 ? 8 : len <= 65535 ? 16 : 32;
			break;
		case 'b':
			CHECK(gr_mpw_bin_header(out, (uint32_t)len) == 0);
			return;
		case 'a':
			CHECK(gr_mpw_array(out, (uint32_t)len) == 0);
			return;
		default:
			CHECK(gr_mpw_map(out, (uint32_t)len) == 0);
			return;
		}
	}
	if (bits == 8)
		mk_be(out, t8, len, 1);
	else if (bits == 16)
		mk_be(out, t16, len, 2);
	else
		mk_be(out, t32, len, 4);
}

static unsigned mk_repeat(const char **s)
{
	if (**s != '*')
		return 1;
	(*s)++;
	return (unsigned)strtoul(*s, (char **)s, 10);
}

static void mk_hex_until(gr_buf *out, const char **s, char end)
{
	const char *e = strchr(*s, end);
	char tmp[4096];

	CHECK(e && (size_t)(e - *s) < sizeof(tmp));
	memcpy(tmp, *s, (size_t)(e - *s));
	tmp[e - *s] = '\0';
	check_hex(out, tmp);
	*s = e + 1;
}

static void mk_value(gr_buf *out, const char **s)
{
	char tag = 0;
	unsigned bits = 0;

	mk_skip(s);
	if (isalpha((unsigned char)(*s)[0]) && isdigit((unsigned char)(*s)[1])) {
		tag = (*s)[0];
		bits = (unsigned)strtoul(*s + 1, (char **)s, 10);
		CHECK(**s == ':');
		(*s)++;
	}

	if (**s == '[' || **s == '{') {
		char close = **s == '[' ? ']' : '}';
		gr_buf tmp;
		uint64_t n = 0;

		(*s)++;
		gr_buf_init(&tmp);
		for (;;) {
			mk_skip(s);
			if (**s == close) {
				(*s)++;
				break;
			}
			CHECK(**s);
			if (**s == '|') {
				(*s)++;
				CHECK(gr_buf_append(&tmp, mk_cut_mark, sizeof(mk_cut_mark)) == 0);
				continue;
			}
			mk_value(&tmp, s);
			n++;
		}
		if (close == '}')
			CHECK(n % 2 == 0);
		mk_header(out, close == ']' ? 'a' : 'm', bits, close == ']' ? n : n / 2);
		CHECK(gr_buf_append(out, tmp.data, tmp.len) == 0);
		gr_buf_deinit(&tmp);
		return;
	}
	if (**s == '"') {
		const char *e = strchr(*s + 1, '"');
		size_t len;
		unsigned rep;

		CHECK(e);
		len = (size_t)(e - *s - 1);
		*s = e + 1;
		rep = mk_repeat(s);
		mk_header(out, 's', bits, (uint64_t)len * rep);
		for (unsigned i = 0; i < rep; i++)
			CHECK(gr_buf_append(out, e - len, len) == 0);
		return;
	}
	if ((*s)[0] == 'x' && (*s)[1] == '"') {
		gr_buf body;
		unsigned rep;

		*s += 2;
		gr_buf_init(&body);
		mk_hex_until(&body, s, '"');
		rep = mk_repeat(s);
		mk_header(out, 'b', bits, (uint64_t)body.len * rep);
		for (unsigned i = 0; i < rep; i++)
			CHECK(gr_buf_append(out, body.data, body.len) == 0);
		gr_buf_deinit(&body);
		return;
	}
	if (**s == '<') {
		(*s)++;
		mk_hex_until(out, s, '>');
		return;
	}
	if (strncmp(*s, "nil", 3) == 0) {
		*s += 3;
		CHECK(gr_mpw_nil(out) == 0);
		return;
	}
	if (strncmp(*s, "true", 4) == 0 || strncmp(*s, "false", 5) == 0) {
		bool v = **s == 't';

		*s += v ? 4 : 5;
		CHECK(gr_mpw_bool(out, v) == 0);
		return;
	}

	/* A number. */
	{
		const char *start = *s;
		const char *e = start;
		bool is_float;

		while (*e && *e != ' ' && *e != ',' && *e != ']' && *e != '}' && *e != ':')
			e++;
		is_float = tag == 'f' || memchr(start, '.', (size_t)(e - start)) ||
			   memchr(start, 'e', (size_t)(e - start)) || memchr(start, 'n', (size_t)(e - start));
		if (is_float) {
			double v = strtod(start, NULL);

			if (bits == 32)
				CHECK(gr_mpw_f32(out, (float)v) == 0);
			else
				CHECK(gr_mpw_f64(out, v) == 0);
		} else if (*start == '-') {
			int64_t v = strtoll(start, NULL, 10);

			if (tag == 'i')
				mk_be(out, bits == 8 ? 0xd0 : bits == 16 ? 0xd1 : bits == 32 ? 0xd2 : 0xd3,
				      (uint64_t)v, bits / 8);
			else
				CHECK(gr_mpw_int(out, v) == 0);
		} else {
			uint64_t v = strtoull(start, NULL, 10);

			if (tag == 'u')
				mk_be(out, bits == 8 ? 0xcc : bits == 16 ? 0xcd : bits == 32 ? 0xce : 0xcf, v,
				      bits / 8);
			else if (tag == 'i')
				mk_be(out, bits == 8 ? 0xd0 : bits == 16 ? 0xd1 : bits == 32 ? 0xd2 : 0xd3, v,
				      bits / 8);
			else
				CHECK(gr_mpw_uint(out, v) == 0);
		}
		CHECK(e > start);
		*s = e;
	}
}

/* Build every top-level value of s into m (initialized here). */
static inline void mk(mk_out *m, const char *s)
{
	gr_buf_init(&m->b);
	m->n_ends = 0;
	for (;;) {
		mk_skip(&s);
		if (!*s)
			break;
		mk_value(&m->b, &s);
		CHECK(m->n_ends < MK_MAX_ENDS);
		m->ends[m->n_ends++] = m->b.len;
	}
	for (size_t i = 0; i + sizeof(mk_cut_mark) <= m->b.len; i++) {
		if (memcmp(m->b.data + i, mk_cut_mark, sizeof(mk_cut_mark)) == 0) {
			m->b.len = i;
			break;
		}
	}
}
