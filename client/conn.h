/*
 * libgpured's connection core: the socket, the table of the requests
 * outstanding on it, their replies read and matched to them, waiting,
 * collecting, and errors (conn.c, pending.c, error.c).
 *
 * The library's features (reduce.c, partial-request.c, moments.c,
 * segments.c, cumsum.c, call.c, region.c) call down into the core. The
 * core reaches them only through the kind that each request carries
 * (client_kind: how its reply is read, what the entry then holds), never
 * by name, so a new kind of request is a client_kind and its functions
 * in the feature's own file.
 *
 * Nothing here is exported: libgpured.sym keeps the library's ABI to
 * gpured_*, and every name the library's files share begins with
 * client_.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client/gpured.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "proto/types.h"

typedef struct pending pending;

/*
 * A kind of request, as its reply needs it: defined by the file that
 * sends such requests, and given to client_pending_add() with each one.
 */
typedef struct client_kind {
	/*
	 * Read a reply without error into e: result is its result,
	 * msg[0..len) the whole message. 0, -ENOMEM, or -EPROTO with why;
	 * a failure ends the connection. NULL: any result will do.
	 */
	int (*read)(pending *e, const gr_obj *result, const uint8_t *msg, size_t len, char *why,
		    size_t size);
	/* Free what read() left in e->u; NULL: it leaves nothing to free. */
	void (*clear)(pending *e);
} client_kind;

/* One request, from its sending until the caller collects it. */
struct pending {
	uint32_t id;
	gr_method method;
	gr_op op;
	gr_dtype dtype;
	const client_kind *kind;
	bool live;     /* outstanding: not yet collected */
	bool done;     /* its reply arrived */
	int err;       /* when done: 0 or the request's error */
	char *errmsg;  /* server message, when err */
	char *errcode; /* server code name, when err */
	/* A reduce's result; of segments and prefix sums, the count that
	 * their reply must say, and the kind of their values. */
	gpured_value value;
	gr_moments moments; /* reduce of moments: the whole result (value
			     * holds its sum); zero in other entries */
	/* The kind's own data, read from the reply (or set when sent). */
	union {
		gpured_partial *exact; /* partial: the reply's exact partial */
		struct {               /* segments, prefix sums */
			uint8_t *values; /* the reply's records or values */
			uint64_t nseg;   /* segments: from the request */
			void *out;       /* prefix sums of data: where the values
					  * go as they arrive (NULL: into values,
					  * until collected) */
		};
		struct {               /* stats, info, map, unmap */
			uint8_t *reply;  /* the whole reply message */
			size_t reply_len;
		};
	} u;
};

/* The kinds with live entries that a connection counts (fewer than
 * CLIENT_KINDS_MAX: the library defines them all). */
#define CLIENT_KINDS_MAX 16

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
	/* Live entries of each kind, for waits that take one kind only. */
	struct {
		const client_kind *kind;
		size_t n;
	} live_kinds[CLIENT_KINDS_MAX];

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

/* ---- errors (error.c) ---- */

/* Fail this call with err and a message; the handle stays usable. */
int client_error(gpured_t *g, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fail the connection: it is unusable from now on (the first failure's
 * err is returned, and kept). */
int client_fail(gpured_t *g, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The sticky connection error, with its message restated (0 while usable). */
int client_dead(gpured_t *g);
/* The errno that a server's error stands for (0 for GR_OK). */
int client_errno(gr_err ec);

/* ---- the table of outstanding requests (pending.c) ---- */

/* A new outstanding entry for a request of method m about to be sent, its
 * reply read by kind (not NULL): 0, or -EAGAIN or -ENOMEM with the error
 * set. */
int client_pending_add(gpured_t *g, gr_method m, gr_op op, gr_dtype dt, const client_kind *kind,
		       pending **ret);
/* Undo the newest client_pending_add(), whose request was not sent. */
void client_pending_unadd(gpured_t *g, pending *e);
/* The same for a request that could not be written (err from the
 * writer): the call fails with err. */
int client_pending_unwritten(gpured_t *g, pending *e, int err);
/* The live entry of request id, or NULL. */
pending *client_pending_find(gpured_t *g, uint32_t id);
/* Drop a collected entry and what it holds. */
void client_pending_remove(gpured_t *g, pending *e);
/* Mark e's reply arrived: 0 or -ENOMEM. */
int client_pending_done(gpured_t *g, pending *e);
/* The first entry in arrival order whose reply arrived, of kind (NULL:
 * any reduce), or NULL. */
pending *client_pending_next_done(gpured_t *g, const client_kind *kind);
/* Live entries of kind (NULL: reduces of any kind). */
size_t client_pending_live(const gpured_t *g, const client_kind *kind);
/* A kind's clear() for e->u.values. */
void client_pending_free_values(pending *e);
/* Free every entry and the table. */
void client_pending_deinit(gpured_t *g);

/* ---- the connection (conn.c) ---- */

/*
 * Write the iovecs whole, reading replies meanwhile; fd >= 0 goes in
 * SCM_RIGHTS with the first bytes that leave.
 */
int client_send(gpured_t *g, struct iovec *iov, int iovcnt, int fd);
/*
 * Send the request that g->wbuf holds, then data[0..bytes) straight from
 * the caller's memory (nothing more when bytes is 0); fd as client_send().
 */
int client_send_request(gpured_t *g, const void *data, size_t bytes, int fd);
/*
 * Let replies be as large as bytes (a segmented reduce's records, a
 * cumsum's values, and their map): raised for the rest of the
 * connection, never lowered.
 */
void client_expect_reply(gpured_t *g, size_t bytes);
/* Wait until entry id has its reply (NULL and *ret_err on failure). */
pending *client_wait_entry(gpured_t *g, uint32_t id, int *ret_err);
/* Wait for the first reply in arrival order of kind (NULL: any reduce),
 * what ("request") naming them when none is outstanding (NULL and
 * *ret_err on failure). */
pending *client_wait_next(gpured_t *g, const client_kind *kind, const char *what, int *ret_err);
/* Hand a finished entry's outcome to the caller and drop it. */
int client_collect(gpured_t *g, pending *e, gpured_value *ret);
