/*
 * A reduce request in the server, from its data to its reply: its chunks,
 * each a job for an engine, combined in order (request.c); chunks of GPU
 * memory copied for the CPU (request-fetch.c); prefix sums in two phases
 * (request-cumsum.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/region.h"
#include "engine/backend.h"
#include "engine/direct.h"
#include "engine/staging.h"
#include "math/cumsum.h"
#include "math/segments.h"
#include "proto/request.h"
#include "util/list.h"

/* A reduce of device memory is cut into jobs of at most this much. */
#define GR_DEVICE_CHUNK_BYTES ((size_t)1 << 30)
/* Chunks of one request in flight at most (--request-chunks up to this). */
#define GR_REQUEST_CHUNKS_MAX 4u

/* What a request is: a reduce, one result per segment, or prefix sums. */
typedef enum gr_request_kind {
	GR_REQUEST_REDUCE,
	GR_REQUEST_SEGMENTS,
	GR_REQUEST_CUMSUM,
} gr_request_kind;

typedef struct gr_server gr_server;
typedef struct gr_conn gr_conn;
typedef struct gr_request gr_request;

typedef struct gr_chunk {
	/* starting a pair of cache lines (which CPUs fetch together): the
	 * job's first line is all that a backend's threads read of what is
	 * otherwise the loop thread's, and the line beside it is written
	 * only when a job fails */
	_Alignas(128) gr_job job;
	gr_request *req;
	gr_slot *slot;
	size_t staged;  /* bytes charged to the connection */
	size_t staging; /* of those, staging charged to its user's share */
	/* GPU memory's elements copied for the CPU (request-fetch.c): from
	 * which device, and into the slot above or else this memory */
	int fetch_device;
	void *host_copy;
	uint8_t fetch_kind;            /* the job's kind once copied */
	struct gr_segjob *fetch_seg;   /* ... and its segments */
	bool done;
} gr_chunk;

struct gr_request {
	gr_server *srv;
	gr_conn *conn;  /* NULL once its connection is gone */
	gr_link link;   /* in conn->requests */
	uint32_t msgid;
	gr_op op;
	gr_dtype dtype;
	uint64_t start_ns;
	uint64_t data_bytes;
	bool small;     /* packed into a batch slot */
	bool partial;   /* answer with the exact partial too ("partial": true) */
	uint64_t ddof;  /* moments: delta degrees of freedom */
	bool received;  /* the whole request was parsed */
	bool failed;    /* answered with an error; results are dropped */
	bool answered;  /* its reply went out directly (engine/direct.h) */
	gr_direct *direct; /* a reference while its job may be answered directly */
	/* Reduce in place: the region (a reference), where the next chunk
	 * starts in it and the bytes not yet submitted. */
	gr_region *region;
	const uint8_t *region_next;
	uint64_t region_left;
	/* What it is (gr_request_kind), and each kind's own state. */
	uint8_t kind;
	/* GR_REQUEST_SEGMENTS ("offsets"): one result each
	 * (math/segments.h), and the bytes they hold, charged to the
	 * connection. */
	struct {
		gr_segs *segs;
		uint64_t bytes;
	} seg;
	/* GR_REQUEST_CUMSUM ("op": "cumsum"): the prefix sums' state
	 * (math/cumsum.h, NULL until the first chunk goes out) and the bytes
	 * it holds, charged to the connection. A region's go to out_region
	 * (a reference) from out_base on; the others stream out as the reply
	 * (daemon/request-cumsum.c). */
	struct {
		gr_cumsum *cs;
		uint64_t bytes;
		gr_region *out_region;
		uint8_t *out_base;
		unsigned ncarried;  /* chunks whose carries are known, in order */
		uint64_t emitted;   /* elements whose prefix sums are out, in order */
		bool stream_wait;   /* its next chunk waits for another reply's stream */
		/* a host region's, whole on the GPUs, read and written in
		 * place (gr_request_cumsum_on_gpu) */
		bool on_gpu;
	} scan;

	/* The chunk pipeline: chunk k lives in chunks[k % GR_REQUEST_CHUNKS_MAX]. */
	gr_chunk chunks[GR_REQUEST_CHUNKS_MAX];
	unsigned nsubmitted, ncombined;
	gr_chunk *filling;       /* the chunk being written, or NULL */
	uint64_t filling_start;  /* data offset where it begins */
	/* The result so far: the first chunk's own partial while there is
	 * one chunk (no copy), acc once a second one is combined in. */
	const gr_partial *result;
	gr_partial acc;
};

/* request.c: a reduce request, from its data to its reply */
gr_request *gr_request_new(gr_conn *c, const gr_req *preq);
bool gr_request_take_segments(gr_request *req, gr_req_parser *parser, const gr_req *preq);
/* Reply once every chunk is in, and free it. */
void gr_request_settle(gr_request *req);
/* Fail it (with an error reply, or none when the connection is gone;
 * closing the connection if its reply has begun to stream). */
void gr_request_fail(gr_request *req, bool reply, gr_err code, const char *msg);
/* A chunk's staging and charges, given back. */
void gr_request_chunk_release(gr_request *req, gr_chunk *ch);
/* Count an answered request of this many elements. */
void gr_request_answered(gr_request *req, uint64_t elements);
/* The filling chunk holds data up to data_done: to the backend with it. */
void gr_request_submit_filling(gr_request *req, uint64_t data_done);
/* Cut a region's next chunks while the request may have more in flight. */
void gr_request_region_pump(gr_request *req);

/* A chunk's job is back: take it into its request (its done()). */
void gr_request_chunk_done(gr_job *job);

/* request-fetch.c: chunks of GPU memory that the CPU reduces, each copied
 * to the host first */
/* Whether req's chunks go that way (an op, or segments, no GPU kernel
 * reduces, on GPU memory). */
bool gr_request_via_host(const gr_request *req);
/* The filling chunk's job becomes the copy of its elements, which then
 * goes to the CPU route. False when out of memory (or the backend copies
 * nothing to the host). */
bool gr_request_fetch_job(gr_request *req, gr_chunk *ch);

/* request-cumsum.c: a cumsum request's chunks, in two phases, and its
 * prefix sums, into a region or streamed out */
/* The filling chunk's job (n elements, the request's from
 * req->filling_start on) becomes its first phase. False when out of
 * memory or when the request failed already. */
bool gr_request_cumsum_job(gr_request *req, gr_chunk *ch);
/* Whether a host region's prefix sums go to the GPUs whole, read and
 * written where they lie (GR_JOB_SCAN of host data): both regions are
 * registered with the backend (the out region writable) and the
 * scheduler sends such a job there (gr_sched_scan_on_gpu: the GPUs'
 * engine takes it). Before the first chunk. */
bool gr_request_cumsum_on_gpu(const gr_request *req);
/* Take whatever can go on: carries, second phases, prefix sums out. */
void gr_request_cumsum_advance(gr_request *req);
/* The reply once every prefix sum is out. */
void gr_request_cumsum_reply(gr_request *req);

