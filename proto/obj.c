#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "obj.h"

/*
 * Two passes over the bytes, both iterative. The first validates the
 * message and counts its nodes against the limits without allocating; a
 * container's claimed size is checked against max_items as soon as its
 * header is read, so a length prefix of 2^32 costs nothing. The second pass
 * fills one array of exactly that many nodes, where each container's
 * children take a contiguous block reserved when the container is met.
 */

/* Hard cap on the nesting we track, whatever the caller asks for. */
#define OBJ_MAX_DEPTH 64u

static unsigned effective_depth(const gr_obj_limits *lim)
{
	return lim->max_depth < OBJ_MAX_DEPTH ? lim->max_depth : OBJ_MAX_DEPTH;
}

/* Children a container header announces (map: keys and values). */
static uint64_t n_children(const gr_mp_token *t)
{
	return t->type == GR_MP_MAP ? 2 * (uint64_t)t->len : t->len;
}

static bool is_container(const gr_mp_token *t)
{
	return t->type == GR_MP_ARRAY || t->type == GR_MP_MAP;
}

/* First pass: >0 bytes spanned (and *ret_nodes), 0 partial, negative errno. */
static long obj_scan(const uint8_t *p, size_t n, const gr_obj_limits *lim, uint32_t *ret_nodes)
{
	uint64_t left[OBJ_MAX_DEPTH]; /* children still to read, per open container */
	unsigned depth = 0, max_depth = effective_depth(lim);
	uint64_t nodes = 0;
	size_t off = 0;

	for (;;) {
		gr_mp_token t;
		int r;

		r = gr_mp_next(p + off, n - off, &t);
		if (r < 0)
			return r;
		if (r == 0)
			return 0;
		off += (size_t)r;
		if (t.type == GR_MP_EXT)
			return -EBADMSG;

		nodes++;
		if (nodes > lim->max_items)
			return -E2BIG;
		if (t.type == GR_MP_STR || t.type == GR_MP_BIN) {
			if (t.len > lim->max_str)
				return -E2BIG;
			if (n - off < t.len)
				return 0;
			off += t.len;
		}

		if (is_container(&t)) {
			if (depth >= max_depth)
				return -E2BIG;
			if (n_children(&t) > (uint64_t)lim->max_items - nodes)
				return -E2BIG;
			if (n_children(&t) > 0) {
				left[depth++] = n_children(&t);
				continue;
			}
		}
		/* One value is complete: close every container it completes. */
		while (depth > 0 && --left[depth - 1] == 0)
			depth--;
		if (depth == 0)
			break;
	}
	if (off > (size_t)LONG_MAX)
		return -E2BIG;
	*ret_nodes = (uint32_t)nodes;
	return (long)off;
}

long gr_obj_parse(const uint8_t *p, size_t n, const gr_obj_limits *lim, gr_obj_tree *ret)
{
	struct {
		gr_obj *items;
		uint64_t i, n;
	} stack[OBJ_MAX_DEPTH];
	unsigned depth = 0;
	uint32_t n_nodes = 0, next;
	gr_obj *nodes, *slot;
	size_t off = 0;
	long span;

	/* Nothing yet (p may be NULL then: an empty buffer). */
	if (n == 0)
		return 0;
	span = obj_scan(p, n, lim, &n_nodes);
	if (span <= 0)
		return span;

	nodes = calloc(n_nodes, sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;

	slot = &nodes[0];
	next = 1;
	for (;;) {
		gr_mp_token t;
		int r;

		r = gr_mp_next(p + off, (size_t)span - off, &t);
		if (r <= 0) { /* the scan accepted these bytes: cannot happen */
			free(nodes);
			return -EBADMSG;
		}
		off += (size_t)r;

		slot->type = t.type;
		slot->len = t.len;
		switch (t.type) {
		case GR_MP_BOOL:
			slot->v.b = t.u.b;
			break;
		case GR_MP_UINT:
			slot->v.u = t.u.u;
			break;
		case GR_MP_INT:
			slot->v.i = t.u.i;
			break;
		case GR_MP_FLOAT:
			slot->v.f = t.u.f;
			break;
		case GR_MP_STR:
		case GR_MP_BIN:
			slot->v.str = (const char *)p + off;
			off += t.len;
			break;
		default:
			break;
		}

		if (is_container(&t) && n_children(&t) > 0) {
			slot->v.items = &nodes[next];
			stack[depth].items = &nodes[next];
			stack[depth].i = 0;
			stack[depth].n = n_children(&t);
			next += (uint32_t)n_children(&t);
			depth++;
			slot = stack[depth - 1].items;
			continue;
		}
		while (depth > 0 && ++stack[depth - 1].i == stack[depth - 1].n)
			depth--;
		if (depth == 0)
			break;
		slot = &stack[depth - 1].items[stack[depth - 1].i];
	}

	ret->root = &nodes[0];
	ret->nodes = nodes;
	ret->n_nodes = n_nodes;
	return span;
}

void gr_obj_tree_deinit(gr_obj_tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	*t = (gr_obj_tree){ 0 };
}

const gr_obj *gr_obj_get(const gr_obj *o, const char *key)
{
	size_t klen;

	if (!o || o->type != GR_MP_MAP)
		return NULL;
	klen = strlen(key);
	for (uint32_t i = 0; i < o->len; i++) {
		const gr_obj *k = &o->v.items[2 * i];

		if (k->type == GR_MP_STR && k->len == klen && memcmp(k->v.str, key, klen) == 0)
			return &o->v.items[2 * i + 1];
	}
	return NULL;
}
