/*
 * A reduce's segments ("offsets"): a bin of k + 1 little-endian u64
 * element offsets, 0 first, never decreasing, the element count last;
 * segment i holds elements [offsets[i], offsets[i + 1]). The request
 * parser collects the bin here as its bytes arrive and checks it once it
 * is whole; the request then takes the array.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Segments one request may have, by default (limits.max_segments). */
#define GR_OFFSETS_DEFAULT_MAX_SEGMENTS (UINT64_C(1) << 21)

typedef struct gr_offsets {
	uint64_t *v;    /* k + 1 offsets, host order once finished */
	uint64_t bytes; /* the bin's length */
	uint64_t got;   /* bytes of it collected */
	uint64_t cap;   /* bytes v holds: it grows as the bin's bytes come */
} gr_offsets;

/* Start collecting a bin of bytes bytes: the memory for them grows as
 * they come, so that a bin whose bytes stop coming holds little. Returns
 * 0 or -ENOMEM. */
int gr_offsets_begin(gr_offsets *o, uint64_t bytes);
/* Take up to len bytes of the bin from buf; returns how many were taken. */
size_t gr_offsets_feed(gr_offsets *o, const uint8_t *buf, size_t len);
/* True once every byte of the bin has come. */
static inline bool gr_offsets_complete(const gr_offsets *o)
{
	return o->v && o->got == o->bytes;
}
/*
 * The whole bin is in: convert it and check its order. Returns NULL, or
 * why the offsets are wrong (in why), and then frees them.
 */
const char *gr_offsets_finish(gr_offsets *o, char *why, size_t whylen);
/* Segments held (k), once finished. */
static inline uint64_t gr_offsets_segments(const gr_offsets *o)
{
	return o->v ? o->bytes / 8 - 1 : 0;
}
/* The element count the offsets end with, once finished. */
static inline uint64_t gr_offsets_last(const gr_offsets *o)
{
	return o->v[o->bytes / 8 - 1];
}
/* Hand the array over (the caller frees it); o is left empty. */
uint64_t *gr_offsets_take(gr_offsets *o);
/* Free what o holds; o is left empty. */
void gr_offsets_clear(gr_offsets *o);
