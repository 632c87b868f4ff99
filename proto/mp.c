#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

/* msgpack is big-endian on the wire, whatever the host. */
static uint64_t be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

static int64_t be_signed(const uint8_t *p, unsigned n)
{
	uint64_t v = be(p, n);
	unsigned shift = 64 - 8 * n;

	/* Sign-extend through the unsigned type: no implementation-defined shifts. */
	if (shift && (v >> (8 * n - 1)))
		v |= ~UINT64_C(0) << (8 * n);
	return (int64_t)v;
}

static void set_int(gr_mp_token *t, int64_t v)
{
	if (v >= 0) {
		t->type = GR_MP_UINT;
		t->u.u = (uint64_t)v;
	} else {
		t->type = GR_MP_INT;
		t->u.i = v;
	}
}

int gr_mp_next(const uint8_t *p, size_t n, gr_mp_token *ret)
{
	gr_mp_token t = { 0 };
	unsigned need; /* header size, type byte included */
	uint8_t c;

	if (n < 1)
		return 0;
	c = p[0];

	if (c <= 0x7f) {
		t.type = GR_MP_UINT;
		t.u.u = c;
		*ret = t;
		return 1;
	}
	if (c >= 0xe0) {
		t.type = GR_MP_INT;
		t.u.i = (int8_t)c;
		*ret = t;
		return 1;
	}
	if (c <= 0x8f || (c >= 0x90 && c <= 0x9f) || (c >= 0xa0 && c <= 0xbf)) {
		t.type = c <= 0x8f ? GR_MP_MAP : c <= 0x9f ? GR_MP_ARRAY : GR_MP_STR;
		t.len = c & (c <= 0x9f ? 0x0f : 0x1f);
		*ret = t;
		return 1;
	}

	switch (c) {
	case 0xc0:
		t.type = GR_MP_NIL;
		*ret = t;
		return 1;
	case 0xc1:
		return -EBADMSG;
	case 0xc2:
	case 0xc3:
		t.type = GR_MP_BOOL;
		t.u.b = c == 0xc3;
		*ret = t;
		return 1;
	}

	/* Everything left has fixed-size fields after the type byte. */
	switch (c) {
	case 0xc4: case 0xd9: case 0xcc: case 0xd0:
		need = 2;
		break;
	case 0xc5: case 0xda: case 0xdc: case 0xde: case 0xcd: case 0xd1:
		need = 3;
		break;
	case 0xc6: case 0xdb: case 0xdd: case 0xdf: case 0xca: case 0xce: case 0xd2:
		need = 5;
		break;
	case 0xcb: case 0xcf: case 0xd3:
		need = 9;
		break;
	case 0xc7: /* ext8: len, type */
		need = 3;
		break;
	case 0xc8:
		need = 4;
		break;
	case 0xc9:
		need = 6;
		break;
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext: type */
		need = 2;
		break;
	default:
		return -EBADMSG; /* unreachable: every byte is covered above */
	}
	if (n < need)
		return 0;

	switch (c) {
	case 0xc4: case 0xc5: case 0xc6:
		t.type = GR_MP_BIN;
		t.len = (uint32_t)be(p + 1, need - 1);
		break;
	case 0xd9: case 0xda: case 0xdb:
		t.type = GR_MP_STR;
		t.len = (uint32_t)be(p + 1, need - 1);
		break;
	case 0xdc: case 0xdd:
		t.type = GR_MP_ARRAY;
		t.len = (uint32_t)be(p + 1, need - 1);
		break;
	case 0xde: case 0xdf:
		t.type = GR_MP_MAP;
		t.len = (uint32_t)be(p + 1, need - 1);
		break;
	case 0xcc: case 0xcd: case 0xce: case 0xcf:
		t.type = GR_MP_UINT;
		t.u.u = be(p + 1, need - 1);
		break;
	case 0xd0: case 0xd1: case 0xd2: case 0xd3:
		set_int(&t, be_signed(p + 1, need - 1));
		break;
	case 0xca: {
		uint32_t bits = (uint32_t)be(p + 1, 4);
		float f;

		memcpy(&f, &bits, sizeof(f));
		t.type = GR_MP_FLOAT;
		t.is_f32 = true;
		t.u.f = f;
		break;
	}
	case 0xcb: {
		uint64_t bits = be(p + 1, 8);

		t.type = GR_MP_FLOAT;
		memcpy(&t.u.f, &bits, sizeof(t.u.f));
		break;
	}
	case 0xc7: case 0xc8: case 0xc9:
		t.type = GR_MP_EXT;
		t.len = (uint32_t)be(p + 1, need - 2);
		t.ext_type = (int8_t)p[need - 1];
		break;
	default: /* fixext 1, 2, 4, 8, 16 */
		t.type = GR_MP_EXT;
		t.len = 1u << (c - 0xd4);
		t.ext_type = (int8_t)p[1];
		break;
	}
	*ret = t;
	return (int)need;
}

void gr_buf_init(gr_buf *b)
{
	*b = (gr_buf){ 0 };
}

void gr_buf_deinit(gr_buf *b)
{
	free(b->data);
	*b = (gr_buf){ 0 };
}

int gr_buf_grow(gr_buf *b, size_t extra)
{
	size_t want, cap;
	uint8_t *d;

	/* No object may exceed PTRDIFF_MAX: refuse before asking for it. */
	if (extra > PTRDIFF_MAX - b->len)
		return -ENOMEM;
	want = b->len + extra;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap = cap > PTRDIFF_MAX / 2 ? want : cap * 2;
	d = realloc(b->data, cap);
	if (!d)
		return -ENOMEM;
	b->data = d;
	b->cap = cap;
	return 0;
}

void gr_buf_consume(gr_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

/* Append a type byte followed by v as an n-byte big-endian field. */
static int put(gr_buf *b, uint8_t type, uint64_t v, unsigned n)
{
	uint8_t h[9];

	h[0] = type;
	for (unsigned i = 0; i < n; i++)
		h[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	return gr_buf_append(b, h, 1 + n);
}

int gr_mpw_nil(gr_buf *b)
{
	return put(b, 0xc0, 0, 0);
}

int gr_mpw_bool(gr_buf *b, bool v)
{
	return put(b, v ? 0xc3 : 0xc2, 0, 0);
}

int gr_mpw_uint(gr_buf *b, uint64_t v)
{
	if (v <= 0x7f)
		return put(b, (uint8_t)v, 0, 0);
	if (v <= UINT8_MAX)
		return put(b, 0xcc, v, 1);
	if (v <= UINT16_MAX)
		return put(b, 0xcd, v, 2);
	if (v <= UINT32_MAX)
		return put(b, 0xce, v, 4);
	return put(b, 0xcf, v, 8);
}

int gr_mpw_int(gr_buf *b, int64_t v)
{
	if (v >= 0)
		return gr_mpw_uint(b, (uint64_t)v);
	if (v >= -32)
		return put(b, (uint8_t)(int8_t)v, 0, 0);
	if (v >= INT8_MIN)
		return put(b, 0xd0, (uint64_t)v, 1);
	if (v >= INT16_MIN)
		return put(b, 0xd1, (uint64_t)v, 2);
	if (v >= INT32_MIN)
		return put(b, 0xd2, (uint64_t)v, 4);
	return put(b, 0xd3, (uint64_t)v, 8);
}

int gr_mpw_f64(gr_buf *b, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	return put(b, 0xcb, bits, 8);
}

int gr_mpw_f32(gr_buf *b, float v)
{
	uint32_t bits;

	memcpy(&bits, &v, sizeof(bits));
	return put(b, 0xca, bits, 4);
}

/* A header for a str/bin/array/map of len, and the body for str. */
static int put_len(gr_buf *b, uint8_t fix, unsigned fixmax, const uint8_t wide[3], uint64_t len)
{
	if (len > UINT32_MAX)
		return -E2BIG;
	if (fix && len <= fixmax)
		return put(b, (uint8_t)(fix | len), 0, 0);
	if (wide[0] && len <= UINT8_MAX)
		return put(b, wide[0], len, 1);
	if (len <= UINT16_MAX)
		return put(b, wide[1], len, 2);
	return put(b, wide[2], len, 4);
}

int gr_mpw_str(gr_buf *b, const char *s, size_t len)
{
	static const uint8_t wide[3] = { 0xd9, 0xda, 0xdb };
	size_t old = b->len;
	int r;

	if (len > UINT32_MAX)
		return -E2BIG;
	r = gr_buf_reserve(b, 5 + len);
	if (r < 0)
		return r;
	r = put_len(b, 0xa0, 31, wide, len);
	if (r < 0)
		return r;
	r = gr_buf_append(b, s, len);
	if (r < 0)
		b->len = old;
	return r;
}

int gr_mpw_cstr(gr_buf *b, const char *s)
{
	return gr_mpw_str(b, s, strlen(s));
}

int gr_mpw_bin_header(gr_buf *b, uint32_t len)
{
	static const uint8_t wide[3] = { 0xc4, 0xc5, 0xc6 };

	return put_len(b, 0, 0, wide, len);
}

int gr_mpw_bin(gr_buf *b, const void *p, size_t len)
{
	size_t old = b->len;
	int r;

	if (len > UINT32_MAX)
		return -E2BIG;
	r = gr_buf_reserve(b, 5 + len);
	if (r < 0)
		return r;
	r = gr_mpw_bin_header(b, (uint32_t)len);
	if (r >= 0)
		r = gr_buf_append(b, p, len);
	if (r < 0)
		b->len = old;
	return r;
}

int gr_mpw_array(gr_buf *b, uint32_t n)
{
	static const uint8_t wide[3] = { 0, 0xdc, 0xdd };

	return put_len(b, 0x90, 15, wide, n);
}

int gr_mpw_map(gr_buf *b, uint32_t n)
{
	static const uint8_t wide[3] = { 0, 0xde, 0xdf };

	return put_len(b, 0x80, 15, wide, n);
}

int gr_buf_printf(gr_buf *b, const char *fmt, ...)
{
	va_list ap;
	int k, r;

	va_start(ap, fmt);
	k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (k < 0)
		return -EINVAL;
	if ((r = gr_buf_reserve(b, (size_t)k + 1)) < 0)
		return r;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)k;
	return 0;
}

int gr_mpw_kv_uint(gr_buf *b, const char *k, uint64_t v)
{
	int r = gr_mpw_cstr(b, k);
	return r < 0 ? r : gr_mpw_uint(b, v);
}
