/*
 * The vocabulary of a request's params, for the request parser
 * (request.c): which keys each method takes, the lookups of the short
 * words a request names (method, key, op, dtype, map kind), and the
 * conversion of an array-form element to its dtype. No state, no I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mp.h"
#include "types.h"

typedef enum req_key {
	KEY_NONE,
	KEY_OP,
	KEY_DTYPE,
	KEY_DATA,
	KEY_REGION,
	KEY_OFFSET,
	KEY_COUNT,
	KEY_BYTES,
	KEY_KIND,
	KEY_DEVICE,
	KEY_HANDLE,
	KEY_PARTIAL,
	KEY_DDOF,
	KEY_OFFSETS,
	KEY_OUT_REGION,
	KEY_OUT_OFFSET,
	KEY_WRITABLE,
	KEY_PART_BYTES,
	KEY_N,
} req_key;

#define KEYBIT(k) (1u << (k))
/* The keys each method's map takes, and how its messages list them. */
#define REDUCE_KEYS                                                                                \
	(KEYBIT(KEY_OP) | KEYBIT(KEY_DTYPE) | KEYBIT(KEY_DATA) | KEYBIT(KEY_REGION) |               \
	 KEYBIT(KEY_OFFSET) | KEYBIT(KEY_COUNT) | KEYBIT(KEY_PARTIAL) | KEYBIT(KEY_DDOF) |  \
	 KEYBIT(KEY_OFFSETS) | KEYBIT(KEY_OUT_REGION) | KEYBIT(KEY_OUT_OFFSET))
#define MAP_KEYS                                                                                   \
	(KEYBIT(KEY_BYTES) | KEYBIT(KEY_KIND) | KEYBIT(KEY_DEVICE) | KEYBIT(KEY_HANDLE) |           \
	 KEYBIT(KEY_WRITABLE) | KEYBIT(KEY_PART_BYTES))
#define UNMAP_KEYS KEYBIT(KEY_REGION)
#define MAP_PART_KEYS (KEYBIT(KEY_REGION) | KEYBIT(KEY_BYTES))

/* A key's wire name ("?" when out of range). */
const char *params_key_name(req_key k);
/* The KEYBITs of the keys method m's map takes. */
unsigned params_method_keys(gr_method m);
/* "op, dtype, data, ..." for a method's messages. */
const char *params_method_key_list(gr_method m);

/* Word lookups: w[0..n), not NUL-terminated. */
gr_method params_match_method(const char *w, size_t n);
req_key params_match_key(const char *w, size_t n);
bool params_match_kind(const char *w, size_t n, gr_map_kind *ret);
/* An op's name: its gr_op, and *ret_scan true for "cumsum" (the prefix
 * sums of GR_OP_SUM, PROTOCOL.md "cumsum"), false for the others. */
bool params_match_op(const char *w, size_t n, gr_op *ret, bool *ret_scan);
bool params_match_dtype(const char *w, size_t n, gr_dtype *ret);

/* Store an array element as dtype dt in out; NULL, or why it cannot be. */
const char *params_convert(gr_dtype dt, const gr_mp_token *t, uint8_t out[8]);
