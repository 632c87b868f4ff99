/*
 * A bounded msgpack object reader, for small messages whose whole bytes are
 * in memory (responses, on the client side). Unlike msgpack-c's unpacker it
 * enforces limits on depth, container sizes, string sizes and total size
 * before it allocates anything, so a hostile length prefix cannot make it
 * allocate.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mp.h"

typedef struct gr_obj gr_obj;

struct gr_obj {
	gr_mp_type type;
	uint32_t len; /* STR/BIN bytes; ARRAY elements; MAP pairs */
	union {
		bool b;
		uint64_t u;
		int64_t i;
		double f;
		const char *str;   /* STR, BIN (not NUL-terminated; points into the input) */
		gr_obj *items;     /* ARRAY: len items; MAP: 2*len items, key then value */
	} v;
};

typedef struct gr_obj_limits {
	unsigned max_depth;      /* containers nested at most this deep (e.g. 8; at most 64) */
	uint32_t max_items;      /* objects in the whole message (e.g. 4096) */
	uint32_t max_str;        /* bytes in one str/bin (e.g. 1 MiB) */
} gr_obj_limits;

/* The tree of one message: nodes live in one allocation, owned here. */
typedef struct gr_obj_tree {
	gr_obj *root;
	gr_obj *nodes;
	uint32_t n_nodes;
} gr_obj_tree;

/*
 * Parse one complete message from p[0..n). Returns the number of bytes it
 * spans (> 0) and fills *ret (strings point into p, which must outlive the
 * tree); 0 if p holds only part of a message; -EBADMSG for malformed input
 * or ext types; -E2BIG past a limit; -ENOMEM.
 */
long gr_obj_parse(const uint8_t *p, size_t n, const gr_obj_limits *lim, gr_obj_tree *ret);
void gr_obj_tree_deinit(gr_obj_tree *t);

/* Map lookup by key (a STR); NULL if absent or o is not a map. */
const gr_obj *gr_obj_get(const gr_obj *o, const char *key);
