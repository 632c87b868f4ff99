/*
 * libgpured's internals, shared by its files (gpured.c: the connection,
 * its requests and replies; region.c: shared-memory regions;
 * partial-request.c: requests for exact partials; segments.c: segmented
 * reduces; cumsum.c: prefix sums). Nothing
 * here is exported: libgpured.sym keeps the library's ABI to gpured_*.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client/gpured.h"
#include "math/fsum.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "proto/types.h"

#define READ_CHUNK 65536u

typedef struct pending {
	uint32_t id;
	gr_method method;
	gr_op op;
	gr_dtype dtype;
	bool live;        /* outstanding: not yet collected */
	bool done;        /* its reply arrived */
	bool partial;     /* reduce with "partial": true */
	int err;          /* when done: 0 or the request's error */
	char *errmsg;     /* server message, when err */
	char *errcode;    /* server code name, when err */
	gpured_value value;
	gr_moments moments; /* moments: the whole result (value holds its sum) */
	uint8_t *reply;   /* stats/info: the whole reply message */
	size_t reply_len;
	gpured_partial *exact; /* partial, when done: the reply's exact partial */
	uint64_t nseg;    /* segmented reduce: its segments (0: not one) */
	uint8_t *records; /* segmented, cumsum, when done: the reply's values */
	void *out;        /* cumsum of data: where its values go as they arrive
	                   * (NULL: into records, until collected) */
	/* A reduce whose result is not one value (segments, cumsum): reads
	 * the result into the entry (0, -ENOMEM, or -EPROTO with why). */
	int (*read_result)(struct pending *e, const gr_obj *result, char *why, size_t size);
} pending;

struct gpured {
	int fd;
	int dead; /* sticky connection error, 0 while usable */
	uint32_t next_id;

	/*
	 * Entries in submission order, in a ring of cap_pend (a power of
	 * two) slots from head: n_slots of them, from the oldest live one to
	 * the newest, collected ones in between included. Ids are
	 * consecutive along the ring, so a reply finds its entry by
	 * arithmetic.
	 */
	pending *pend;
	size_t cap_pend;
	size_t head;
	size_t n_slots;
	size_t n_live;
	size_t n_live_reduce;
	size_t n_live_partial;

	/* Ids of reduce entries whose replies arrived, in arrival order,
	 * for gpured_wait(); ids collected meanwhile are skipped there. */
	uint32_t *doneq;
	size_t doneq_head;
	size_t doneq_len;
	size_t doneq_cap;

	gr_buf wbuf;
	gr_buf rbuf;
	/* What a reply may be: the protocol's bounds, raised for the
	 * largest segmented reply this connection has asked for. */
	gr_obj_limits reply_limits;
	size_t reply_max_bytes;

	int timeout_ms;   /* -1: wait for ever */
	uint64_t spin_ns; /* poll for a reply this long before sleeping */

	char errmsg[256];
	char errcode[32];
};

/* Fail this call with err and a message; the handle stays usable. */
int client_error(gpured_t *g, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The sticky connection error, with its message restated (0 while usable). */
int client_dead(gpured_t *g);
/* A new outstanding entry for a request of method m about to be sent. */
int client_pending_add(gpured_t *g, gr_method m, gr_op op, gr_dtype dt, pending **ret);
/* Undo the newest client_pending_add(), whose request was not sent. */
void client_pending_unadd(gpured_t *g, pending *e);
/*
 * Write the iovecs whole, reading replies meanwhile; fd >= 0 goes in
 * SCM_RIGHTS with the first bytes that leave.
 */
int client_send(gpured_t *g, struct iovec *iov, int iovcnt, int fd);
/* The live entry of request id, or NULL. */
pending *client_pending_find(gpured_t *g, uint32_t id);
/* Block until the socket is readable, then read and handle the replies. */
int client_wait_read(gpured_t *g);
/* gpured_submit() and gpured_submit_region(), with "partial": true when
 * asked, and moments' "ddof" (for moments only). */
int client_submit_data(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		       bool partial, uint64_t ddof, uint32_t *ret_id);
int client_submit_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, bool partial, uint64_t ddof, uint32_t *ret_id);
/*
 * Read the exact partial of e's reduce result into e->exact and check it
 * against the value already read: 0, -ENOMEM, or -EPROTO with why.
 */
int client_partial_reply(pending *e, const gr_obj *result, char *why, size_t size);
/*
 * Let replies be as large as bytes (a segmented reduce's records, a
 * cumsum's values, and their map): raised for the rest of the
 * connection, never lowered.
 */
void client_expect_reply(gpured_t *g, size_t bytes);
/* Whether op and dt have exact partials: sum and sumsq of f32 and f64. */
bool client_partial_kind(gpured_op op, gpured_dtype dt);
/* x as the partial of op and dt. */
void client_partial_from_exact(const gr_fsum *x, gpured_op op, gpured_dtype dt,
			       gpured_partial *ret);
/* Wait until entry id has its reply (NULL and *ret_err on failure). */
pending *client_wait_entry(gpured_t *g, uint32_t id, int *ret_err);
/* Hand a finished entry's outcome to the caller and drop it. */
int client_collect(gpured_t *g, pending *e, gpured_value *ret);
/* Send a request without parameters (stats, info) and parse its reply
 * into *tree: *ret_result is its result, *ret_bytes the bytes the tree
 * points into (the caller frees both). */
int client_call_result(gpured_t *g, gr_method m, uint8_t **ret_bytes, gr_obj_tree *tree,
		       const gr_obj **ret_result);
