/*
 * A client's connection: its socket, the descriptors it passed, the
 * request whose data is arriving and those in flight, its replies
 * (conn.c); what it holds against its user's shares (conn-charge.c); its
 * regions (conn-region.c, region-pin.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon/peer.h"
#include "daemon/region.h"
#include "daemon/request.h"
#include "engine/direct.h"
#include "engine/staging.h"
#include "proto/mp.h"
#include "proto/request.h"
#include "util/fdpass.h"
#include "util/list.h"

#define GR_CONN_RBUF_BYTES (64u * 1024u)
/* Descriptors a connection holds at most, reserved in its user's share
 * when it is accepted: its socket's two and those it may park. */
#define GR_CONN_FDS (2u + GR_FDQ_MAX)

typedef enum gr_stall {
	GR_STALL_NONE,
	GR_STALL_STAGING,   /* waiting for a staging slot */
	GR_STALL_CHUNKS,    /* the request has its maximum of chunks in flight */
	GR_STALL_LIMITS,    /* in-flight or unsent bytes over their bounds */
	GR_STALL_UNSENT,    /* a streamed reply's bytes not yet taken are over the unsent bound */
	GR_STALL_DRAIN,     /* shutting down: no new requests */
	GR_STALL_CLOSING,   /* answering a fatal error, then closing */
} gr_stall;

/* pace.c: the engines' time on a connection's bytes, learned from its
 * requests' finished jobs, by GR_ENGINE_* (all 0: nothing learned yet) */
typedef struct gr_pace_est {
	double ns[GR_ENGINE_N];    /* time a byte on each engine, smoothed */
	double share[GR_ENGINE_N]; /* of its bytes lately, each engine's part */
} gr_pace_est;

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
	 * one before it; paced: not polled until the next millisecond; and
	 * what its bytes cost the engines, which scales the bytes it reads */
	uint64_t pace_ms, pace_bytes, pace_prev_bytes;
	bool paced;
	gr_pace_est pace;
	gr_link pace_link;      /* in srv->paced while paced */
	unsigned holds;         /* work that needs it after its close (gr_conn_hold) */
};

/* conn.c */
void gr_conn_accept(gr_server *s);
void gr_conn_pump(gr_conn *c);
void gr_conn_flush(gr_conn *c);
void gr_conn_drain(gr_conn *c);
void gr_conn_close(gr_conn *c);

/* conn-charge.c: what a connection holds, counted against its user */
/* Let go of a descriptor the client handed over (negative: none): the
 * closer closes it (util/closer.h), counted against the user till then.
 * gr_conn_fdq_drop is the same as the descriptor queue's drop(). */
void gr_conn_drop_fd(gr_conn *c, int fd);
void gr_conn_fdq_drop(void *userdata, int fd);
/* Note since when descriptors are parked; and take those of the bytes
 * parsed so far (util/fdpass.h). */
void gr_conn_fds_sync(gr_conn *c);
unsigned gr_conn_fds_take(gr_conn *c, int *ret_fd);
/* Whether c is not to be read now for its user's descriptors. */
bool gr_conn_fds_blocked(gr_conn *c);
/* Count what the parser holds for the request being parsed; refuse the
 * request once its user is past its bound. */
void gr_conn_parser_charge(gr_conn *c);
/* Count the replies not yet written in the user's in-flight bytes. */
void gr_conn_unsent_charge(gr_conn *c);
/* A new connection's place and descriptors from its user's shares: false,
 * with why, when they do not allow it. */
bool gr_conn_share_take(gr_conn *c, char *why, size_t whylen);
/* Everything c holds, given back to its user's shares as it closes. */
void gr_conn_share_release(gr_conn *c);

/* conn.c */
void gr_conn_reply_error(gr_conn *c, uint32_t msgid, gr_err code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Close c if nothing of it is left to write and it is to close: told to,
 * or draining or at EOF with no request left. */
void gr_conn_maybe_close(gr_conn *c);

/* conn-events.c: the parser's event ev on c, taken; false when c is to
 * stop reading (it waits, or closes) */
bool gr_conn_on_event(gr_conn *c, gr_req_event ev);
/* Are c's in-flight or unsent bytes, or its user's, over their bounds? */
bool gr_conn_over_limits(gr_conn *c);

/* request.c: a connection's side of its requests */
/* Staging for the next part of the current request's data; -EAGAIN: the
 * connection waits (its stall says for what). */
int gr_conn_set_dest(gr_conn *c);
/* Bytes a connection's requests hold, for the connection and its user. */
void gr_conn_charge(gr_conn *c, uint64_t bytes);
void gr_conn_discharge(gr_conn *c, uint64_t bytes);
/* The user's in-flight bytes, given back: its connections waiting on its
 * bound go on once it is back under. */
void gr_peer_discharge_inflight(gr_server *s, gr_peer *p, uint64_t bytes);

/* conn.c: a reply streamed out as it is computed (a cumsum's values).
 * Begin req's reply with hdr[0..len): everything queued before goes out
 * first, then nothing but req's bytes until gr_conn_stream_end(). -1 when
 * the connection was closed. */
int gr_conn_stream_begin(gr_conn *c, gr_request *req, const void *hdr, size_t len);
/* The next len bytes of the streamed reply, in mem (from malloc), which
 * this takes over. -1 when the connection was closed. */
int gr_conn_stream_write(gr_conn *c, void *mem, size_t len);
/* The streamed reply is whole: other replies go out again, and a request
 * waiting to stream its own begins. */
void gr_conn_stream_end(gr_conn *c);

/* conn.c: keep c (freed only once its handles are closed and every hold
 * is released) for work that answers on it later. */
void gr_conn_hold(gr_conn *c);
void gr_conn_release(gr_conn *c);

/* region-pin.c: register r with the backend off the loop, then answer
 * the map (msgid) on c. False when there is nothing to register: the
 * caller answers now. */
bool gr_region_pin(gr_conn *c, gr_region *r, uint32_t msgid);

/* conn-region.c: map, unmap, reduce by region */
/* A map's answer: the region's id and bytes. */
void gr_conn_map_reply(gr_conn *c, uint32_t msgid, const gr_region *r);
void gr_conn_map(gr_conn *c, const gr_req *preq, unsigned nfd, int fd);
void gr_conn_map_part(gr_conn *c, const gr_req *preq, unsigned nfd, int fd);
void gr_conn_unmap(gr_conn *c, const gr_req *preq);
void gr_conn_reduce_region(gr_conn *c, const gr_req *preq);
