/*
 * What the parts of a connection share (daemon/conn.c, daemon/request.c,
 * daemon/conn-region.c); the daemon's other files see daemon/server.h.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/server.h"
#include "proto/request.h"

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
/* Staging for the next part of the current request's data; -EAGAIN: the
 * connection waits (its stall says for what). */
int gr_conn_set_dest(gr_conn *c);
/* Bytes a connection's requests hold, for the connection and its user. */
void gr_conn_charge(gr_conn *c, uint64_t bytes);
void gr_conn_discharge(gr_conn *c, uint64_t bytes);
/* The user's in-flight bytes, given back: its connections waiting on its
 * bound go on once it is back under. */
void gr_peer_discharge_inflight(gr_server *s, gr_peer *p, uint64_t bytes);

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
/* Take whatever can go on: carries, second phases, prefix sums out. */
void gr_request_cumsum_advance(gr_request *req);
/* The reply once every prefix sum is out. */
void gr_request_cumsum_reply(gr_request *req);

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
void gr_conn_unmap(gr_conn *c, const gr_req *preq);
void gr_conn_reduce_region(gr_conn *c, const gr_req *preq);
