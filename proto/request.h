/*
 * The server's incremental request parser: bytes from a client connection
 * go in, in whatever pieces the socket produced, and events come out.
 *
 * It reads the msgpack-RPC envelope itself, with small fixed limits, and
 * never buffers a reduce's data: when it meets the data header it stops
 * with GR_REQ_DATA so the caller can point it at staging memory
 * (gr_req_parser_set_dest), and the payload is then written there, either
 * by feed() copying from the caller's buffer or by the caller reading the
 * socket straight into gr_req_parser_window() and calling
 * gr_req_parser_commit(). An array-form payload is converted element by
 * element into the same memory as packed dtype values.
 *
 * Each request ends in exactly one GR_REQ_DONE or GR_REQ_ERROR (unless the
 * caller rejected it with gr_req_parser_reject, or a GR_REQ_FATAL ended the
 * stream). Notifications produce no event. See PROTOCOL.md for the rules.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

typedef enum gr_req_event {
	GR_REQ_NEED_MORE, /* everything given was consumed; feed more */
	GR_REQ_DATA,      /* a reduce's data header: set a destination or reject */
	GR_REQ_DEST_FULL, /* the destination is full and data remains: set another */
	GR_REQ_DONE,      /* a request parsed without error: see gr_req_parser_req() */
	GR_REQ_ERROR,     /* this request failed (req->err, req->errmsg); reply and go on */
	GR_REQ_FATAL,     /* the stream is unusable: reply req->err (msgid 0 if unknown) and close */
} gr_req_event;

/* map's "device": a GPU's UUID ("GPU-…") or PCI bus id, at most this long. */
#define GR_REQ_DEVICE_MAX 63u
/* map's "handle": a cudaIpcMemHandle_t. */
#define GR_REQ_HANDLE_BYTES 64u

typedef struct gr_req {
	uint32_t msgid;
	bool has_msgid;
	gr_method method;

	/* reduce */
	bool has_op, has_dtype, has_data;
	gr_op op;
	gr_dtype dtype;
	bool scan;           /* op "cumsum": the prefix sums of op (then GR_OP_SUM) */
	bool data_is_array;
	uint64_t data_bytes; /* payload size in staging: bin length, or count * dtype size */
	uint64_t data_done;  /* payload bytes written to destinations so far */

	/* reduce by region (in place of data), map, unmap */
	bool has_region, has_offset, has_count, has_bytes, has_kind, has_device, has_handle;
	bool partial;        /* reduce: also return the exact partial ("partial": true) */
	bool has_ddof;
	uint64_t ddof;       /* reduce, moments: delta degrees of freedom (0 unless given) */
	/* reduce: segments ("offsets"), checked whole: offsets[0] is 0, none
	 * decreases, and offsets[nsegments] is the element count. The parser
	 * owns the array until gr_req_parser_take_offsets(), and frees it when
	 * the next message begins. */
	bool has_offsets;
	uint64_t nsegments;
	uint64_t offsets_end;  /* offsets[nsegments], kept when they are taken */
	const uint64_t *offsets;
	/* reduce, cumsum of a region: the writable region the prefix sums
	 * go to, and bytes into it (0 unless given) */
	bool has_out_region, has_out_offset;
	uint64_t out_region, out_offset;
	bool writable;       /* map: for writing too ("writable": true) */
	bool has_part_bytes;
	uint64_t part_bytes; /* map of kind cuda: the first allocation's bytes of
			      * several (map_part brings the others) */
	gr_map_kind kind;    /* GR_MAP_HOST unless given */
	uint64_t region;     /* reduce, unmap */
	uint64_t offset;     /* reduce: bytes into the region (0 unless given) */
	uint64_t count;      /* reduce: elements */
	uint64_t bytes;      /* map */
	uint32_t device_len;

	gr_err err;          /* GR_OK unless ERROR/FATAL */
	char errmsg[200];
	/* map: valid only where has_device / has_handle say (not cleared
	 * between requests) */
	char device[GR_REQ_DEVICE_MAX + 1]; /* NUL-terminated */
	uint8_t handle[GR_REQ_HANDLE_BYTES];
} gr_req;

typedef struct gr_req_limits {
	uint64_t max_data_bytes; /* larger data: too_large; 0 means the default */
	uint64_t max_segments;   /* more segments in "offsets": too_large; 0: the default */
} gr_req_limits;

#define GR_REQ_DEFAULT_MAX_DATA_BYTES (UINT64_C(1) << 30)

typedef struct gr_req_parser gr_req_parser;

/* lim may be NULL for the defaults. Returns 0 or -ENOMEM. */
int gr_req_parser_new(const gr_req_limits *lim, gr_req_parser **ret);
gr_req_parser *gr_req_parser_free(gr_req_parser *p);

/* The request being parsed (or just finished); valid until the next feed. */
const gr_req *gr_req_parser_req(const gr_req_parser *p);

/*
 * Consume bytes from buf[0..len) up to the next event. Returns how many
 * bytes were consumed and stores the event in *ret_ev. After GR_REQ_FATAL
 * the parser accepts nothing more.
 *
 * Some events need no byte at all (the end of a request whose last item
 * was an empty payload, a full destination): after GR_REQ_DATA or
 * GR_REQ_DEST_FULL call feed again, with len 0 if there is nothing new.
 * GR_REQ_NEED_MORE is the only event that means "all of buf was consumed".
 */
size_t gr_req_parser_feed(gr_req_parser *p, const uint8_t *buf, size_t len, gr_req_event *ret_ev);

/*
 * After GR_REQ_DATA or GR_REQ_DEST_FULL: the payload's next bytes go to
 * dst[0..cap). For an array payload cap must hold whole elements. The
 * parser never writes past cap, and stops with GR_REQ_DEST_FULL when cap is
 * reached and payload remains.
 */
void gr_req_parser_set_dest(gr_req_parser *p, void *dst, size_t cap);

/*
 * Fail the current request from outside (e.g. no staging for it): the rest
 * of it is skipped and no event reports it; the caller replies itself.
 */
void gr_req_parser_reject(gr_req_parser *p, gr_err err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Direct reads: while a bin payload is being written to a destination,
 * window() returns where the next payload bytes go and how many may go
 * there (the rest of the destination or of the payload, whichever is less);
 * 0 otherwise (envelope bytes, array payloads, skipping). After reading k
 * <= that many bytes into it, commit(k) accounts for them and returns the
 * event they lead to (NEED_MORE, DEST_FULL, or DONE when the payload was
 * the request's last item; ERROR when the map that ends with it lacks a
 * key or the payload is not a multiple of a dtype that came after it).
 * commit(0) is allowed and just runs the transitions that need no bytes.
 */
size_t gr_req_parser_window(gr_req_parser *p, void **ret_ptr);
gr_req_event gr_req_parser_commit(gr_req_parser *p, size_t k);

/*
 * The current request's offsets (gr_req.offsets), to keep beyond the next
 * message: the caller frees them. NULL when it has none.
 */
uint64_t *gr_req_parser_take_offsets(gr_req_parser *p);

/* Bytes of skipped payload still to come (bytes a read can discard). */
uint64_t gr_req_parser_skip_remaining(const gr_req_parser *p);

/*
 * True between messages: no part of a message is held or expected. A
 * connection that ends while this is false ended mid-message.
 */
bool gr_req_parser_idle(const gr_req_parser *p);

/* Bytes of memory the parser holds for the request being parsed (its
 * offsets as they come), for the caller to count against its client. */
uint64_t gr_req_parser_held(const gr_req_parser *p);
