/*
 * Replies' bytes to Python objects, as msgpack.Unpacker(raw=False,
 * strict_map_key=False) makes them (reply.c); no I/O. reply_scan() finds
 * where a reply ends, going on where it stopped as more bytes come, and
 * says which replies it leaves to msgpack: ext types, 0xc1, nesting
 * deeper than REPLY_DEPTH, and, as soon as they are seen (msgpack raises
 * for them before the reply is whole), a map header past msgpack's limit,
 * a string that is no UTF-8, an array or a map as a map's key. Whatever it
 * takes, reply_build() turns into what msgpack would.
 */
#pragma once

#include "fast.h"

/* The deepest nesting of containers taken here (a response is [1, msgid,
 * error, result]: depth 3 or 4); deeper replies go to msgpack. */
#define REPLY_DEPTH 32

enum { REPLY_MORE = 0, REPLY_DONE = 1, REPLY_FOREIGN = -1 };

/* How far the reply being read has been scanned. */
typedef struct {
	size_t pos, len;                  /* bytes scanned; a whole reply's length */
	int depth;
	uint64_t left[REPLY_DEPTH];       /* items still to come at each depth */
	unsigned char map[REPLY_DEPTH];   /* whether that depth is a map's */
} reply_scanner;

/* Make the interned map keys; 0, or -1 with an exception set. */
int reply_init(void);

/* Start on a new reply. */
void reply_scan_reset(reply_scanner *s);

/* Where the reply at base (avail bytes so far) ends: REPLY_DONE (its
 * length in s->len; s starts on the next), REPLY_MORE (not whole yet), or
 * REPLY_FOREIGN (msgpack's to read). max_map: msgpack's max_map_len. */
int reply_scan(reply_scanner *s, const unsigned char *base, size_t avail, uint64_t max_map);

/* The object at *pp of a scanned reply ending at end, *pp moved past it
 * (key: it is a map's key); NULL, an exception set, for what msgpack
 * should judge (and for no memory). */
PyObject *reply_build(const unsigned char **pp, const unsigned char *end, int key);

/* Move *pp past the object there, of a scanned reply. */
void reply_skip(const unsigned char **pp);

/* The value of a result map {"value": ..., ...} at p, without building
 * the map: 1 with a new reference in *ret; 0 where that does not apply. */
int reply_map_value(const unsigned char *p, const unsigned char *end, PyObject **ret);
