/*
 * The server: one libuv loop thread owning the listening socket and every
 * connection, the staging memory and the backend.
 *
 * A request's data is read straight into staging. Small requests take a
 * piece of the shared batch slot and are queued on the pending batch,
 * which goes to the backend when it is full or when the loop has nothing
 * more to read right now (the check phase, after each poll). Larger ones
 * are reduced chunk by chunk as they arrive: each full slot is submitted
 * at once, at most --request-chunks per request, and the chunk
 * results are combined in order, so the result does not depend on how the
 * bytes arrived. Finished jobs come back through the completion queue and
 * their replies are written from the check phase, coalesced per
 * connection.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "engine/backend.h"
#include "util/closer.h"
#include "daemon/config.h"
#include "math/cumsum.h"
#include "engine/direct.h"
#include "daemon/exporter.h"
#include "util/fdpass.h"
#include "daemon/peer.h"
#include "util/pressure.h"
#include "daemon/region.h"
#include "math/segments.h"
#include "engine/staging.h"
#include "daemon/stats.h"
#include "proto/mp.h"
#include "proto/request.h"

#define GR_CONN_RBUF_BYTES (64u * 1024u)
/* A reduce of device memory is cut into jobs of at most this much. */
#define GR_DEVICE_CHUNK_BYTES ((size_t)1 << 30)
/* Chunks of one request in flight at most (--request-chunks up to this). */
#define GR_REQUEST_CHUNKS_MAX 4u
/* Descriptors a connection holds at most, reserved in its user's share
 * when it is accepted: its socket's two and those it may park. */
#define GR_CONN_FDS (2u + GR_FDQ_MAX)

typedef struct gr_server gr_server;
typedef struct gr_conn gr_conn;
typedef struct gr_request gr_request;

/* Intrusive doubly-linked list. */
typedef struct gr_link {
	struct gr_link *next, *prev;
} gr_link;

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
	/* Segments ("offsets"), or NULL: one result each (math/segments.h),
	 * and the bytes they hold, charged to the connection. */
	gr_segs *segs;
	uint64_t segs_bytes;
	/* Prefix sums ("op": "cumsum"): their state (math/cumsum.h, NULL
	 * until the first chunk goes out) and the bytes it holds, charged to
	 * the connection. A region's go to out_region (a reference) from
	 * out_base on; the others stream out as the reply
	 * (daemon/request-cumsum.c). */
	bool scan;
	gr_cumsum *cumsum;
	uint64_t cumsum_bytes;
	gr_region *out_region;
	uint8_t *out_base;
	unsigned ncarried;  /* chunks whose carries are known, in order */
	uint64_t emitted;   /* elements whose prefix sums are out, in order */
	bool stream_wait;   /* its next chunk waits for another reply's stream */

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

typedef enum gr_stall {
	GR_STALL_NONE,
	GR_STALL_STAGING,   /* waiting for a staging slot */
	GR_STALL_CHUNKS,    /* the request has its maximum of chunks in flight */
	GR_STALL_LIMITS,    /* in-flight or unsent bytes over their bounds */
	GR_STALL_UNSENT,    /* a streamed reply's bytes not yet taken are over the unsent bound */
	GR_STALL_DRAIN,     /* shutting down: no new requests */
	GR_STALL_CLOSING,   /* answering a fatal error, then closing */
} gr_stall;

struct gr_conn {
	uv_pipe_t pipe;      /* writes; reads go through poll and fdpass.h */
	uv_poll_t poll;      /* readable: on rfd, a duplicate of the pipe's fd */
	int rfd;
	unsigned handles;    /* libuv handles not yet closed; the last close frees c */
	gr_fdq fds;          /* descriptors waiting for their request */
	unsigned fds_seen;   /* fds.n when its parking time was last noted */
	uint64_t parser_charged; /* the parser's memory, counted in its in-flight bytes */
	uint64_t unsent_charged; /* replies not yet written, counted in its user's */
	/* timeouts (daemon/timeouts.c): when it was accepted, whether a
	 * request of its was ever whole, when the request being received
	 * last got a byte, and when its oldest parked descriptor came */
	uint64_t accepted_ns;
	bool served;
	uint64_t last_byte_ns;
	uint64_t fds_since_ns;
	bool fds_stalled;    /* not read while its user's descriptors are over their bound */
	bool charged;        /* its connection and socket count in its user's */
	_Atomic uint64_t *rfd_counter; /* its user's closing count, for rfd's close */
	uint64_t in_read;    /* bytes read from the socket */
	uint64_t in_parsed;  /* of those, bytes the parser has consumed */
	gr_regions regions;
	gr_peer *peer;       /* its user's entry (NULL until accepted) */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	gr_server *srv;
	gr_link link;        /* in srv->conns */
	gr_link ready_link;  /* in srv->ready when it should be pumped */
	gr_link dirty_link;  /* in srv->dirty when wbuf has bytes to write */
	gr_req_parser *parser;
	uint8_t *rbuf;
	size_t rpos, rlen;
	bool read_staging;   /* the current read goes straight into staging */
	bool reading;
	bool closing;
	bool eof;
	bool draining;
	bool need_dest;      /* the parser waits for a destination */
	gr_stall stall;
	gr_staging_waiter waiter;
	gr_request *cur;     /* the request whose data is arriving */
	gr_link requests;    /* every request not yet finished */
	unsigned nrequests;
	uint64_t staged_bytes;  /* staging held by this connection's requests */
	uint64_t staging_bytes; /* of those, in its user's share of staging */
	gr_buf wbuf;
	size_t writing_bytes;   /* handed to uv_write, not yet written */
	uint64_t writes_done;   /* uv_writes finished: the peer is taking replies */
	uint64_t writes_seen;   /* writes_done at the last write-timeout sweep */
	size_t queue_seen;      /* and the pipe's write queue then */
	unsigned write_stuck;   /* sweeps since, with bytes waiting and none taken */
	gr_direct *direct;      /* NULL: the loop writes every reply */
	/* The request whose reply is streaming out (gr_conn_stream_begin):
	 * until it is whole, no other bytes go to the socket, and other
	 * replies wait in wbuf (and direct ones in the direct side). */
	gr_request *stream;
	bool stream_handover;   /* gr_conn_stream_end is handing it on */
	/* pace.c: bytes read in the loop's millisecond pace_ms, and in the
	 * one before it; paced: not polled until the next millisecond */
	uint64_t pace_ms, pace_bytes, pace_prev_bytes;
	bool paced;
	gr_link pace_link;      /* in srv->paced while paced */
	unsigned holds;         /* work that needs it after its close (gr_conn_hold) */
};

struct gr_server {
	uv_loop_t *loop;
	const gr_config *cfg;
	gr_backend *backend;
	/* A CUDA daemon's CPU route: requests of up to route_max bytes
	 * (0: none for their size) are reduced here, where a CPU core is done
	 * before a GPU could answer, and so is what the GPUs cannot reduce
	 * exactly (conn.c, request_exact_on_cpu). The route depends on the
	 * request alone, so the same request always gets the same bits.
	 * Its workers are also the CUDA backend's fallback once no GPU is
	 * left (gr_backend_config.cpu_pool). NULL on a CPU daemon. */
	gr_backend *router;
	size_t route_max;
	gr_job *route_head, *route_tail; /* its jobs, submitted together in the check phase */
	uint64_t routed;   /* jobs reduced on the CPU route */
	/* connections read in this round of the loop so far, and in the last
	 * one: a connection shares the loop with others when it was not alone
	 * (conn.c, conn_poll_cb) */
	unsigned polled, polled_last;
	gr_completion *cq;
	gr_staging staging;
	gr_stats stats;
	gr_req_limits limits;
	size_t small_max;

	uv_pipe_t listener;
	bool listener_open;
	bool listening;
	bool handles_open;
	char *path;
	bool created_path;  /* we bound it, so we remove it */
	uint64_t path_ino;
	uv_check_t check;
	uv_idle_t busy_poll;     /* active while the loop polls without sleeping */
	uv_timer_t batch_timer;  /* --batch-delay-us: the whole milliseconds left */
	uv_idle_t batch_hold;    /* ... and the last one, polled without sleeping */
	uv_timer_t shutdown_timer;
	uv_timer_t write_sweep;  /* write-timeout.c */
	uv_timer_t timeouts;     /* timeouts.c */
	/* pace.c: the connections paced until the next millisecond, the last
	 * one read that streams nothing and when, and the host's CPU pressure */
	uv_timer_t pace_timer;
	gr_link paced;
	const gr_conn *light_conn;
	uint64_t light_ms;
	gr_pressure pressure;
	uv_signal_t sigterm, sigint;

	gr_link conns, ready, dirty;
	unsigned nconns;
	/* The loop's idea of now, read from the clock once per socket read and
	 * once per completion drain: requests start and finish then. */
	uint64_t now_ns;
	/* now_ns at the last socket read or answered request: busy polling
	 * counts from here (server.c), not from completions that answer no
	 * one (a large request's chunks) */
	uint64_t busy_ns;

	/* The pending batch: jobs whose data lie in batch_slot. */
	gr_job *batch_head, *batch_tail;
	gr_slot *batch_slot;
	unsigned batch_n;
	size_t batch_bytes;
	uint64_t batch_t0;  /* uv_hrtime() when its first job came, with --batch-delay-us */

	/* Canary reductions for the watchdog: one job per device. */
	int32_t *canary_data;
	gr_job *canary_jobs;
	unsigned canary_cap;     /* canary_jobs: one per device there was at start */
	unsigned canary_pending;
	bool canary_ok;
	void (*canary_cb)(void *userdata, bool ok);
	void *canary_userdata;

	gr_exporter *exporter;   /* --metrics-listen, or NULL */

	gr_peers peers;
	gr_closer *closer;      /* closes what clients hand over (util/closer.h) */
	uint64_t last_region_id;
	uint64_t mapped_bytes; /* every region's, until its last request is done */
	unsigned pins;         /* regions being registered or unregistered (region-pin.c) */
	unsigned trim_peak;    /* connections open at most since the last trim (trim.c) */
	uint64_t trim_ns;      /* when that was */
	bool pins_closed;      /* the backend is going: no more of that work */

	/* Finished requests kept for reuse: malloc is a visible cost at a
	 * million small requests a second. */
	gr_request *spare_requests;
	unsigned n_spare_requests;

	bool shutting_down;
	bool finished;
	void (*on_shutdown)(gr_server *s); /* shutdown begins */
	void (*on_finished)(gr_server *s); /* every connection is gone */
	void *userdata;
};

/* server.c */
int gr_server_new(uv_loop_t *loop, const gr_config *cfg, gr_server **ret, char *errbuf,
		  size_t errlen);
/* Listen on path (replacing a stale socket), or on a socket passed in. */
int gr_server_bind(gr_server *s, const char *path, unsigned mode, char *errbuf, size_t errlen);
int gr_server_open_fd(gr_server *s, int fd, char *errbuf, size_t errlen);
void gr_server_shutdown(gr_server *s);
/* After the loop stopped: release the backend and every handle. */
void gr_server_free(gr_server *s);
/* One line for systemd's STATUS=. */
void gr_server_status(gr_server *s, char *buf, size_t len);
/* Run a small known reduction on every device; cb(ok) when all are back.
 * -EBUSY while a round is still out. */
int gr_server_canary(gr_server *s, void (*cb)(void *userdata, bool ok), void *userdata);

/* A zeroed request object, or NULL; and back when it is done. */
gr_request *gr_server_request_get(gr_server *s);
void gr_server_request_put(gr_server *s, gr_request *req);
void gr_server_mark_ready(gr_server *s, gr_conn *c);
void gr_server_mark_dirty(gr_server *s, gr_conn *c);
void gr_server_batch_add(gr_server *s, gr_job *job, gr_slot *slot);
void gr_server_batch_flush(gr_server *s);
void gr_server_submit(gr_server *s, gr_job *job);
/* stats: asker's holdings, or every user's when all */
int gr_server_write_stats(gr_server *s, gr_buf *b, const gr_peer *asker, bool all);
int gr_server_write_info(gr_server *s, gr_buf *b);
void gr_server_conn_closed(gr_server *s);

/* shares.c: the pools users share, sized at start; and shown in stats:
 * asker's holdings, or every user's when all */
void gr_shares_init(gr_server *s);
int gr_shares_write(gr_server *s, gr_buf *b, const gr_peer *asker, bool all);

/* conn.c */
void gr_conn_accept(gr_server *s);
void gr_conn_pump(gr_conn *c);
void gr_conn_flush(gr_conn *c);
void gr_conn_drain(gr_conn *c);
void gr_conn_close(gr_conn *c);

/* write-timeout.c: close clients that take no reply (--write-timeout-ms) */
void gr_write_timeout_start(gr_server *s);

/* timeouts.c: close clients whose request stops halfway
 * (--request-timeout-ms, --first-request-timeout-ms, --fd-timeout-ms),
 * and settle users' descriptors the closer has closed */
void gr_timeouts_start(gr_server *s);
void gr_timeouts_stop(gr_server *s);

/* pace.c: a client streaming while others wait, on a host short of CPU */
void gr_pace_init(gr_server *s);
void gr_pace_close(gr_server *s);
/* Before a wake-up reads c: the bytes it may read, given its budget and
 * the share of one read while others are; 0 when c is to wait for the
 * next millisecond (it is then on srv->paced, and the caller stops
 * polling it; the pace timer pumps it). */
uint64_t gr_pace_budget(gr_conn *c, uint64_t budget, uint64_t shared);
/* The wake-up read n bytes of c. */
void gr_pace_read(gr_conn *c, uint64_t n);
/* c closes. */
void gr_pace_forget(gr_conn *c);

/* list helpers */
static inline void gr_link_init(gr_link *l)
{
	l->next = l->prev = l;
}
static inline bool gr_link_linked(const gr_link *l)
{
	return l->next && l->next != l;
}
static inline void gr_link_add_tail(gr_link *head, gr_link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}
static inline void gr_link_del(gr_link *l)
{
	if (!gr_link_linked(l))
		return;
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->next = l->prev = l;
}
#define gr_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
