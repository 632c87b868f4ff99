/*
 * Shared-memory regions: a client's memory, handed over once with `map`
 * and then reduced in place by `reduce` with region, offset and count,
 * no byte of it crossing the socket.
 *
 * A host region is a memfd sealed against shrinking (F_SEAL_SHRINK): the
 * seal is what guarantees the daemon never takes SIGBUS from a client
 * that truncates the file under it. The daemon maps it shared and
 * read-only, or for writing too when the client asks ("writable": a
 * cumsum's out region), and lets the backend register the mapping once
 * (the CUDA backend pins it, so chunks move from it to the GPU by DMA with
 * no staging copy; the CPU backend reduces it where it lies).
 *
 * A region belongs to the connection that mapped it, under an id that is
 * unique in the daemon, so another connection's id is simply unknown. It
 * is counted: the connection's table holds one reference and every
 * request reducing it another, so the memory stays mapped while requests
 * on it are in flight, after `unmap` or the connection's end too. The
 * last reference unregisters and unmaps it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "daemon/peer.h"
#include "proto/request.h"
#include "proto/types.h"

typedef struct gr_server gr_server;
typedef struct gr_region gr_region;

struct gr_region {
	gr_region *next;     /* in its connection's set while mapped */
	gr_server *srv;
	uint64_t id;
	unsigned refs;
	gr_map_kind kind;
	const uint8_t *base; /* our read-only mapping, or the device address */
	size_t bytes;
	size_t mapped;       /* bytes mapped so far: less than bytes while a range of
			      * several GPU allocations waits for map_part */
	void *reg;           /* what the backend registered, or NULL */           /* what the backend registered, or NULL */
	int device;          /* -1: host memory; else the device that holds it */
	bool writable;       /* mapped for writing too ("writable") */
	bool in_parts;       /* a range of several allocations (map's part_bytes) */
	bool pinning;        /* being registered off the loop (region-pin.c) */
	gr_device_region dev;
};

/* A connection's regions. */
typedef struct gr_regions {
	gr_region *head;
	unsigned n;
	uint64_t bytes;
	gr_server *srv;
	gr_peer *peer; /* its user's, whose pools it counts in */
} gr_regions;

static inline void gr_regions_init(gr_regions *set, gr_server *srv, gr_peer *peer)
{
	set->head = NULL;
	set->n = 0;
	set->bytes = 0;
	set->srv = srv;
	set->peer = peer;
}

/*
 * Map what a map request (req) handed over in fd (-1 for kind cuda_ipc,
 * which comes with none); fd stays the caller's to close (a mapping
 * keeps what it needs of the file). Returns GR_OK and the new region in *ret (its
 * id is what the client names it by), or the error code to answer with
 * and a message in why.
 */
gr_err gr_region_map(gr_server *s, gr_regions *set, const gr_req *req, int fd, gr_region **ret,
		     char *why, size_t whylen);

/*
 * The next allocation (in fd, the caller's to close) of region req->region,
 * a range of several GPU allocations (map's part_bytes), req->bytes of it
 * mapped where the parts before it end. GR_OK and the region in *ret, or
 * the error code and why.
 */
gr_err gr_region_map_part(gr_server *s, gr_regions *set, const gr_req *req, int fd,
			  gr_region **ret, char *why, size_t whylen);

/* Whether region r has all of its bytes mapped; false, and why, if not. */
bool gr_region_whole(const gr_region *r, char *why, size_t whylen);

/* The connection's region id, or NULL. */
gr_region *gr_region_find(gr_regions *set, uint64_t id);

/* Forget region id: false when the connection has none such. Requests
 * in flight on it keep it mapped until they are done. */
bool gr_region_unmap(gr_regions *set, uint64_t id);

/* The connection is gone: forget all of its regions. */
void gr_regions_release(gr_regions *set);

static inline gr_region *gr_region_ref(gr_region *r)
{
	r->refs++;
	return r;
}

gr_region *gr_region_unref(gr_region *r);

/* region-pin.c: a region's last reference, where the backend registered
 * it: unregister, unmap and free it on the thread pool. False when that
 * is not to be (nothing registered, or the server is ending): the caller
 * does it now. */
bool gr_region_unpin(gr_region *r);
/* The server ends: wait for the pool's pinning work, and do no more. */
void gr_region_pins_close(gr_server *s);
