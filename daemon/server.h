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

#include "daemon/config.h"
#include "daemon/conn.h"
#include "daemon/exporter.h"
#include "daemon/peer.h"
#include "daemon/request.h"
#include "daemon/stats.h"
#include "engine/backend.h"
#include "engine/scheduler.h"
#include "engine/staging.h"
#include "proto/mp.h"
#include "proto/request.h"
#include "util/closer.h"
#include "util/list.h"
#include "util/pressure.h"

struct gr_server {
	uv_loop_t *loop;
	const gr_config *cfg;
	/* The engines, and which one runs a job (engine/scheduler.h); backend
	 * is sched.main, which holds staging and the devices. */
	gr_sched sched;
	gr_backend *backend;
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
	 * one read that streams nothing and when, and the host's CPU pressure;
	 * each engine's average time a byte of streamed data (0: none yet),
	 * which connections' costs are measured against */
	uv_timer_t pace_timer;
	gr_link paced;
	const gr_conn *light_conn;
	uint64_t light_ms;
	gr_pressure pressure;
	double pace_ref_ns[GR_ENGINE_N];
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
/* A job of a request of request_bytes to the engine the scheduler
 * chooses: small ones of the main engine into the pending batch (their
 * data in slot), the others at once. */
void gr_server_batch_add(gr_server *s, gr_job *job, gr_slot *slot, uint64_t request_bytes);
void gr_server_batch_flush(gr_server *s);
void gr_server_submit(gr_server *s, gr_job *job, uint64_t request_bytes);
/* stats: asker's holdings, or every user's when all */
int gr_server_write_stats(gr_server *s, gr_buf *b, const gr_peer *asker, bool all);
int gr_server_write_info(gr_server *s, gr_buf *b);
void gr_server_conn_closed(gr_server *s);

/* shares.c: the pools users share, sized at start; and shown in stats:
 * asker's holdings, or every user's when all */
void gr_shares_init(gr_server *s);
int gr_shares_write(gr_server *s, gr_buf *b, const gr_peer *asker, bool all);

/* write-timeout.c: close clients that take no reply (--write-timeout-ms) */
void gr_write_timeout_start(gr_server *s);

/* timeouts.c: close clients whose request stops halfway
 * (--request-timeout-ms, --first-request-timeout-ms, --fd-timeout-ms),
 * and settle users' descriptors the closer has closed */
void gr_timeouts_start(gr_server *s);
void gr_timeouts_stop(gr_server *s);

/* pace.c: a client streaming while others wait, on a host short of CPU,
 * paced by the engine time its bytes cost */
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
/* A job of a request of c's is done (c NULL: the connection is gone):
 * its engine time teaches c's cost and the engine's average. */
void gr_pace_done(gr_server *s, gr_conn *c, const gr_job *job);

/* A connection's cost is its engines' time a byte over everyone's, kept
 * within these: data whose jobs seem to take no time cannot buy
 * unlimited bytes, nor can any data be paced to nothing. Cheap data earns
 * at most four times the bytes, since the loop's copy of a byte costs the
 * same whatever the data. */
#define GR_PACE_COST_MIN 0.25
#define GR_PACE_COST_MAX 16.0
/* Jobs smaller than this, a small request's, cost mostly what any job
 * does, and say little about the bytes: they are not learned from. */
#define GR_PACE_LEARN_MIN_BYTES (64u << 10)

/* Learn from a job of bytes that took ns of engine's time: ref_ns[engine],
 * everyone's time a byte on it (0: none yet), and c (NULL: no connection
 * to teach), the connection's, each smoothed over the last bytes seen. A
 * job under GR_PACE_LEARN_MIN_BYTES, or with no time measured, changes
 * nothing. */
void gr_pace_learn(gr_pace_est *c, double *ref_ns, unsigned engine, uint64_t bytes, uint64_t ns);
/* c's cost: its time a byte over everyone's, engine by engine, weighed by
 * how much of its data each engine ran lately; 1 before anything is
 * learned, and within GR_PACE_COST_MIN..MAX. ref_ns has GR_ENGINE_N. */
double gr_pace_cost(const gr_pace_est *c, const double *ref_ns);
/* The bytes a connection of cost reads a millisecond before it is paced:
 * bytes_per_ms of data of the average cost, as many fewer as it costs
 * more (at least 1; 0 stays 0, never paced). */
uint64_t gr_pace_limit(uint64_t bytes_per_ms, double cost);
