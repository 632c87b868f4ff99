/*
 * gr_mp_next(), inline: the request parser's hot loop reads the headers of
 * the common request (one-byte headers, a msgid past 127, the data's bin
 * header) without a call, and leaves every other one to gr_mp_next().
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "mp.h"

static inline uint32_t mp_inline_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/*
 * gr_mp_next() with the headers of the common request decoded here,
 * without a call: the one-byte ones (fixint, fixmap, fixarray, fixstr),
 * a msgid past 127 and the data's bin header.
 */
static inline int gr_mp_next_inline(const uint8_t *buf, size_t len, gr_mp_token *t)
{
	uint8_t c;

	if (len == 0)
		return 0;
	c = buf[0];
	if (c <= 0x7f) {
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = c };
		return 1;
	}
	if (c <= 0x8f) {
		*t = (gr_mp_token){ .type = GR_MP_MAP, .len = c & 0x0fu };
		return 1;
	}
	if (c <= 0x9f) {
		*t = (gr_mp_token){ .type = GR_MP_ARRAY, .len = c & 0x0fu };
		return 1;
	}
	if (c <= 0xbf) {
		*t = (gr_mp_token){ .type = GR_MP_STR, .len = c & 0x1fu };
		return 1;
	}
	switch (c) {
	case 0xc4: /* bin 8, 16, 32 */
		if (len < 2)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_BIN, .len = buf[1] };
		return 2;
	case 0xc5:
		if (len < 3)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_BIN, .len = (uint32_t)buf[1] << 8 | buf[2] };
		return 3;
	case 0xc6:
		if (len < 5)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_BIN, .len = mp_inline_be32(buf + 1) };
		return 5;
	case 0xcc: /* uint 8, 16, 32 */
		if (len < 2)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = buf[1] };
		return 2;
	case 0xcd:
		if (len < 3)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = (uint32_t)buf[1] << 8 | buf[2] };
		return 3;
	case 0xce:
		if (len < 5)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = mp_inline_be32(buf + 1) };
		return 5;
	default:
		return gr_mp_next(buf, len, t);
	}
}
