/*
 * A minimal msgpack codec of our own, with no I/O and no allocation on the
 * read side.
 *
 * Reading is token by token: gr_mp_next() decodes one header (a type byte
 * and its fixed-size fields) and never touches the body of a str, bin or
 * ext, whose length it reports. The caller decides what to do with those
 * bytes (stream them somewhere, or skip them), so a length prefix claiming
 * gigabytes costs nothing until the bytes really arrive.
 *
 * Writing appends to a growable gr_buf.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum gr_mp_type {
	GR_MP_NIL,
	GR_MP_BOOL,
	GR_MP_UINT,  /* non-negative integer, any encoding: u.u */
	GR_MP_INT,   /* negative integer, any encoding: u.i < 0 */
	GR_MP_FLOAT, /* float32 or float64, widened: u.f */
	GR_MP_STR,   /* len bytes of body follow */
	GR_MP_BIN,   /* len bytes of body follow */
	GR_MP_EXT,   /* len bytes of body follow (ext_type says which) */
	GR_MP_ARRAY, /* len elements follow */
	GR_MP_MAP,   /* len key/value pairs follow */
} gr_mp_type;

typedef struct gr_mp_token {
	gr_mp_type type;
	bool is_f32;    /* GR_MP_FLOAT came as float32 */
	int8_t ext_type;
	uint32_t len;   /* STR/BIN/EXT body bytes, ARRAY/MAP entries */
	union {
		bool b;
		uint64_t u;
		int64_t i;
		double f;
	} u;
} gr_mp_token;

/*
 * Decode the header at p[0..n). Returns the number of header bytes (1..9)
 * and fills *ret; 0 if more bytes are needed; -EBADMSG for the reserved
 * byte 0xc1. Bodies of STR/BIN/EXT are not consumed.
 */
int gr_mp_next(const uint8_t *p, size_t n, gr_mp_token *ret);

/* A growable byte buffer. */
typedef struct gr_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
} gr_buf;

void gr_buf_init(gr_buf *b);
void gr_buf_deinit(gr_buf *b);
/* Grow to hold extra more bytes: 0 or -ENOMEM (gr_buf_reserve's slow path). */
int gr_buf_grow(gr_buf *b, size_t extra);

/* Append printf-formatted text (no NUL counted in len): 0 or a negative errno. */
int gr_buf_printf(gr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Make room for extra more bytes: 0 or -ENOMEM. Inline, since every
 * writer calls it and there is almost always room already. */
static inline int gr_buf_reserve(gr_buf *b, size_t extra)
{
	return extra <= b->cap - b->len ? 0 : gr_buf_grow(b, extra);
}

static inline int gr_buf_append(gr_buf *b, const void *p, size_t n)
{
	int r = gr_buf_reserve(b, n);
	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}
/* Drop the first n bytes (after they were sent). */
void gr_buf_consume(gr_buf *b, size_t n);

/*
 * Writers: each appends one msgpack item in its shortest encoding and
 * returns 0 or -ENOMEM (the buffer is then unchanged); those taking a
 * size_t length return -E2BIG past 2^32-1 bytes.
 */
int gr_mpw_nil(gr_buf *b);
int gr_mpw_bool(gr_buf *b, bool v);
int gr_mpw_uint(gr_buf *b, uint64_t v);
int gr_mpw_int(gr_buf *b, int64_t v);  /* as uint when v >= 0 */
int gr_mpw_f64(gr_buf *b, double v);  /* always float64, even if integral */
int gr_mpw_f32(gr_buf *b, float v);
int gr_mpw_str(gr_buf *b, const char *s, size_t len);
int gr_mpw_cstr(gr_buf *b, const char *s);
/* A map's key k and its value v. */
int gr_mpw_kv_uint(gr_buf *b, const char *k, uint64_t v);

/* Return a writer's negative errno from the function that called it. */
#define GR_MPW_TRY(call)                  \
	do {                              \
		int r_ = (call);          \
		if (r_ < 0)               \
			return r_;        \
	} while (0)
int gr_mpw_bin_header(gr_buf *b, uint32_t len); /* body appended by caller */
int gr_mpw_bin(gr_buf *b, const void *p, size_t len); /* header and body */
int gr_mpw_array(gr_buf *b, uint32_t n);
int gr_mpw_map(gr_buf *b, uint32_t n);
