/*
 * A reduce's segment offsets, collected from the wire (offsets.h).
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offsets.h"

/* The bytes a bin's memory starts with; it doubles as they come. */
#define OFFSETS_FIRST_BYTES ((uint64_t)64 << 10)

int gr_offsets_begin(gr_offsets *o, uint64_t bytes)
{
	gr_offsets_clear(o);
	/* malloc(0) may return NULL; the parser refuses short bins first */
	uint64_t cap = bytes < OFFSETS_FIRST_BYTES ? bytes : OFFSETS_FIRST_BYTES;
	o->v = malloc(cap ? (size_t)cap : 1);
	if (!o->v)
		return -ENOMEM;
	o->bytes = bytes;
	o->got = 0;
	o->cap = cap;
	return 0;
}

size_t gr_offsets_feed(gr_offsets *o, const uint8_t *buf, size_t len)
{
	uint64_t left = o->bytes - o->got;
	size_t n = len < left ? len : (size_t)left;

	if (o->got + n > o->cap) {
		uint64_t cap = o->cap ? o->cap : OFFSETS_FIRST_BYTES;
		while (cap < o->got + n)
			cap *= 2;
		if (cap > o->bytes)
			cap = o->bytes;
		void *v = realloc(o->v, (size_t)cap);
		if (!v) {
			/* take what fits; the rest waits for the next call */
			n = (size_t)(o->cap - o->got);
		} else {
			o->v = v;
			o->cap = cap;
		}
	}
	memcpy((uint8_t *)o->v + o->got, buf, n);
	o->got += n;
	return n;
}

const char *gr_offsets_finish(gr_offsets *o, char *why, size_t whylen)
{
	uint64_t n = o->bytes / 8;

	for (uint64_t i = 0; i < n; i++)
		o->v[i] = le64toh(o->v[i]);
	if (o->v[0] != 0) {
		snprintf(why, whylen, "'offsets' must start at 0, not %" PRIu64, o->v[0]);
		gr_offsets_clear(o);
		return why;
	}
	for (uint64_t i = 1; i < n; i++) {
		if (o->v[i] < o->v[i - 1]) {
			snprintf(why, whylen,
				 "'offsets' must not decrease: offset %" PRIu64 " is %" PRIu64
				 ", below the %" PRIu64 " before it",
				 i, o->v[i], o->v[i - 1]);
			gr_offsets_clear(o);
			return why;
		}
	}
	return NULL;
}

uint64_t *gr_offsets_take(gr_offsets *o)
{
	uint64_t *v = o->v;

	o->v = NULL;
	o->bytes = o->got = o->cap = 0;
	return v;
}

void gr_offsets_clear(gr_offsets *o)
{
	free(o->v);
	o->v = NULL;
	o->bytes = o->got = o->cap = 0;
}
