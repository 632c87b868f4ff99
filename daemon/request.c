/*
 * A reduce request on a connection, from its first data to its reply: the
 * staging each part of its data goes to (gr_conn_set_dest), its chunks
 * handed to the backend (or its CPU route) as they fill, or cut from a
 * mapped region; their partials combined in order as they complete; the
 * reply, or the error, queued on the connection. What a connection's
 * requests hold is charged to it and to its user.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "util/log.h"
#include "proto/message.h"

/* What a request's own bookkeeping costs, counted against its
 * connection's in-flight bytes with its data: a client pipelining many
 * tiny requests is bounded by the memory they hold, not by their data. */
#define REQUEST_COST sizeof(gr_request)

static void request_free(gr_request *req)
{
	gr_conn *c = req->conn;

	if (c) {
		gr_link_del(&req->link);
		c->nrequests--;
		gr_conn_discharge(c, REQUEST_COST);
	}
	req->srv->stats.inflight--;
	if (c && req->seg.bytes)
		gr_conn_discharge(c, req->seg.bytes);
	req->seg.segs = gr_segs_free(req->seg.segs);
	if (c && req->scan.bytes)
		gr_conn_discharge(c, req->scan.bytes);
	req->scan.cs = gr_cumsum_free(req->scan.cs);
	req->scan.out_region = gr_region_unref(req->scan.out_region);
	req->direct = gr_direct_unref(req->direct);
	req->region = gr_region_unref(req->region);
	gr_server_request_put(req->srv, req);
}

gr_request *gr_request_new(gr_conn *c, const gr_req *preq)
{
	gr_request *req = gr_server_request_get(c->srv);
	if (!req)
		return NULL;
	req->srv = c->srv;
	req->conn = c;
	req->msgid = preq->msgid;
	req->start_ns = c->srv->now_ns;
	req->data_bytes = preq->data_bytes;
	gr_link_add_tail(&c->requests, &req->link);
	c->nrequests++;
	gr_conn_charge(c, REQUEST_COST);
	c->srv->stats.inflight++;
	return req;
}

/*
 * Take the current request's offsets from the parser: req then answers
 * one result per segment. False when out of memory.
 */
bool gr_request_take_segments(gr_request *req, gr_req_parser *parser, const gr_req *preq)
{
	uint64_t *offsets = gr_req_parser_take_offsets(parser);

	if (!offsets)
		return false;
	req->seg.segs = gr_segs_new(offsets, preq->nsegments, preq->op, preq->ddof,
				GR_REQUEST_CHUNKS_MAX);
	if (!req->seg.segs)
		return false;
	req->kind = GR_REQUEST_SEGMENTS;
	req->seg.bytes = gr_segs_bytes(req->seg.segs);
	gr_conn_charge(req->conn, req->seg.bytes);
	return true;
}

/*
 * Bytes a connection's requests hold (staging, or a region's chunks in
 * flight), counted for the connection and its user. Connections waiting
 * on their user's bound go on once the user is back under it.
 */
void gr_conn_charge(gr_conn *c, uint64_t bytes)
{
	c->staged_bytes += bytes;
	gr_peer_charge(&c->srv->peers, c->peer, GR_RES_INFLIGHT, bytes);
}

void gr_conn_discharge(gr_conn *c, uint64_t bytes)
{
	gr_server *s = c->srv;
	gr_peer *p = c->peer;

	c->staged_bytes -= bytes;
	/* connections waiting on their share of staging look again */
	if (bytes && s->staging.waiters.next != &s->staging.waiters)
		s->staging.wake_pending = true;
	gr_peer_discharge_inflight(s, p, bytes);
}

void gr_peer_discharge_inflight(gr_server *s, gr_peer *p, uint64_t bytes)
{
	gr_peer_discharge(&s->peers, p, GR_RES_INFLIGHT, bytes);
	if (p->stalled && p->held[GR_RES_INFLIGHT] <= s->cfg->max_inflight_bytes_per_uid) {
		p->stalled = 0;
		for (gr_link *l = s->conns.next; l != &s->conns; l = l->next) {
			gr_conn *o = gr_container_of(l, gr_conn, link);
			if (o->peer == p && o->stall == GR_STALL_LIMITS)
				gr_server_mark_ready(s, o);
		}
	}
}

void gr_request_chunk_release(gr_request *req, gr_chunk *ch)
{
	if (ch->slot) {
		gr_staging_release(&req->srv->staging, ch->slot);
		ch->slot = NULL;
	}
	if (req->conn && ch->staging) {
		req->conn->staging_bytes -= ch->staging;
		gr_peer_discharge(&req->srv->peers, req->conn->peer, GR_RES_STAGING, ch->staging);
	}
	ch->staging = 0;
	free(ch->host_copy);
	ch->host_copy = NULL;
	if (req->conn)
		gr_conn_discharge(req->conn, ch->staged);
	ch->staged = 0;
}

/* Count an answered request. */
void gr_request_answered(gr_request *req, uint64_t elements)
{
	gr_server *s = req->srv;

	s->stats.requests++;
	s->stats.elements += elements;
	gr_stats_latency(&s->stats, s->now_ns - req->start_ns);
	s->busy_ns = s->now_ns;
}

static void request_reply_segments(gr_request *req)
{
	gr_conn *c = req->conn;
	gr_segs *sg = req->seg.segs;
	uint64_t count = req->data_bytes / gr_dtype_size(req->dtype);

	if (count == 0)
		gr_segs_all_empty(sg, req->op, req->dtype);
	if (gr_msg_write_response_segments(&c->wbuf, req->msgid, count, sg->nseg, sg->records,
					   (size_t)(sg->nseg * sg->record_bytes)) < 0) {
		gr_conn_close(c);
		return;
	}
	gr_server_mark_dirty(c->srv, c);
	gr_request_answered(req, count);
}

static void request_reply(gr_request *req)
{
	gr_conn *c = req->conn;
	gr_value v;

	if (req->kind == GR_REQUEST_SEGMENTS) {
		request_reply_segments(req);
		return;
	}
	if (req->kind == GR_REQUEST_CUMSUM) {
		gr_request_cumsum_reply(req);
		return;
	}
	const gr_partial *res = req->result;
	if (req->op == GR_OP_MOMENTS) {
		gr_moments m;
		gr_err e = gr_moments_finish(req->dtype, res, req->ddof, &m);
		if (e == GR_OK) {
			if (gr_msg_write_response_moments(&c->wbuf, req->msgid, &m) < 0) {
				gr_conn_close(c);
				return;
			}
			gr_server_mark_dirty(c->srv, c);
		} else if (e == GR_ERR_EMPTY) {
			gr_conn_reply_error(c, req->msgid, e, "moments of no elements");
		} else {
			/* the parser refuses these first */
			gr_conn_reply_error(c, req->msgid, e, "'ddof' is not less than the elements");
		}
		gr_request_answered(req, e == GR_OK ? res->count : 0);
		return;
	}
	gr_err e = gr_partial_finish(req->op, req->dtype, res, &v);
	if (e == GR_OK) {
		int w;
		/* an exact partial, for float sums that the client will combine */
		if (req->partial && gr_dtype_is_float(req->dtype) &&
		    (req->op == GR_OP_SUM || req->op == GR_OP_SUMSQ)) {
			uint64_t limbs[GR_PARTIAL_LIMBS_MAX];
			int scale;
			unsigned specials;
			size_t n = gr_partial_limbs(res, limbs, GR_PARTIAL_LIMBS_MAX, &scale, &specials);
			w = gr_msg_write_response_exact(&c->wbuf, req->msgid, &v, res->count, limbs, n,
							scale, specials);
		} else if (gr_op_has_index(req->op)) {
			w = gr_msg_write_response_index(&c->wbuf, req->msgid, &v, res->index, res->count);
		} else {
			w = gr_msg_write_response_value(&c->wbuf, req->msgid, &v, res->count);
		}
		if (w < 0) {
			gr_conn_close(c);
			return;
		}
		gr_server_mark_dirty(c->srv, c);
	} else {
		gr_conn_reply_error(c, req->msgid, e, "%s of no elements", gr_op_name(req->op));
	}
	gr_request_answered(req, e == GR_OK ? res->count : 0);
}

/* Free the request once nothing of it is left in the backend; answer it
 * first if it succeeded. */
void gr_request_settle(gr_request *req)
{
	gr_conn *c = req->conn;

	if (!(req->received || req->failed) || req->filling || req->ncombined != req->nsubmitted ||
	    (req->region_left > 0 && !req->failed))
		return;
	if (c && !req->failed) {
		if (req->answered)
			gr_request_answered(req, req->data_bytes / gr_dtype_size(req->dtype));
		else
			request_reply(req);
	}
	request_free(req);
	if (c) {
		if (c->stall == GR_STALL_LIMITS)
			gr_server_mark_ready(c->srv, c);
		gr_conn_maybe_close(c);
	}
}

/* Mark the request failed and answer it (if reply). A request whose
 * reply has begun to stream cannot be answered with an error any more:
 * its connection is closed instead. */
static void request_mark_failed(gr_request *req, bool reply, gr_err code, const char *msg)
{
	gr_conn *c = req->conn;

	req->failed = true;
	if (c && c->stream == req) {
		log_debug("closing a connection: its streamed reply failed: %s", msg);
		gr_conn_close(c);
	} else if (c && reply) {
		gr_conn_reply_error(c, req->msgid, code, "%s", msg);
	}
}

/* Fail the request: answer now (if reply), drop the chunk being filled;
 * chunks already in the backend are dropped as they come back. */
void gr_request_fail(gr_request *req, bool reply, gr_err code, const char *msg)
{
	if (req->failed)
		return;
	request_mark_failed(req, reply, code, msg);
	if (req->filling) {
		gr_request_chunk_release(req, req->filling);
		req->filling = NULL;
	}
	gr_request_settle(req);
}


void gr_request_chunk_done(gr_job *job)
{
	gr_chunk *ch = job->userdata;
	gr_request *req = ch->req;
	gr_conn *c = req->conn;
	bool broken = false;

	gr_sched_done(&req->srv->sched, job, uv_hrtime());
	if (c && c->peer && job->engine < GR_ENGINE_N)
		c->peer->busy_ns[job->engine] += job->busy_ns;
	gr_pace_done(req->srv, c, job);
	if (req->direct) {
		/* a small request: its only chunk */
		unsigned f = gr_direct_check(req->direct);
		req->answered = job->status == 0 && job->early;
		req->direct = gr_direct_unref(req->direct);
		if (c && (f & GR_DIRECT_BROKEN))
			broken = true;
		else if (c && (f & GR_DIRECT_HELD))
			gr_server_mark_dirty(c->srv, c);
	}
	ch->done = true;
	if (job->status < 0 && !req->failed) {
		log_warning("reduce failed: %s", job->errmsg);
		gr_request_fail(req, /* reply= */ true, GR_ERR_INTERNAL, job->errmsg);
		/* gr_request_fail may have freed req if this was its last chunk:
		 * it cannot have, since this chunk is not combined yet. */
	}
	while (req->ncombined < req->nsubmitted) {
		gr_chunk *next = &req->chunks[req->ncombined % GR_REQUEST_CHUNKS_MAX];
		if (!next->done)
			break;
		if (req->failed) {
		} else if (req->kind == GR_REQUEST_SEGMENTS) {
			gr_segs_join(req->seg.segs, req->op, req->dtype, next->job.seg, &next->job.result);
		} else if (req->ncombined == 0 && req->received && req->nsubmitted == 1) {
			/* the only chunk: its slot in the ring is never reused */
			req->result = &next->job.result;
		} else if (req->ncombined == 0) {
			req->acc = next->job.result;
			req->result = &req->acc;
		} else {
			if (req->result != &req->acc) {
				req->acc = *req->result;
				req->result = &req->acc;
			}
			gr_partial_combine(req->op, req->dtype, &req->acc, &next->job.result);
		}
		next->done = false;
		gr_request_chunk_release(req, next);
		req->ncombined++;
	}
	if (c && c->stall == GR_STALL_CHUNKS)
		gr_server_mark_ready(c->srv, c);
	if (req->region_left > 0 && !req->failed)
		gr_request_region_pump(req);
	gr_request_settle(req);
	if (broken) {
		/* c is freed only from its close callback, a later phase */
		log_debug("closing a connection: a direct reply could not be written");
		gr_conn_close(c);
	}
}

/* The chunk being filled is complete: hand it to the backend. */
void gr_request_submit_filling(gr_request *req, uint64_t data_done)
{
	gr_chunk *ch = req->filling;

	req->filling = NULL;
	ch->req = req;
	ch->done = false;
	ch->job.op = req->op;
	ch->job.dtype = req->dtype;
	ch->job.n = (size_t)(data_done - req->filling_start) / gr_dtype_size(req->dtype);
	/* device memory: pinned to its device, read in place */
	ch->job.device = req->region ? req->region->device : -1;
	ch->job.where = !req->region ? GR_AT_STAGING
			: req->region->device >= 0 ? GR_AT_DEVICE : GR_AT_HOST;
	/* whose: the CPU's workers are shared by time among users */
	ch->job.owner = req->conn ? (uint32_t)req->conn->uid + 1 : 0;
	ch->job.busy_ns = 0;
	ch->job.engine = GR_ENGINE_NONE;
	ch->job.status = 0;
	ch->job.done = gr_request_chunk_done;
	ch->job.userdata = ch;
	ch->job.next = NULL;
	ch->job.early = NULL;
	ch->job.kind = GR_JOB_REDUCE;
	if (req->kind == GR_REQUEST_SEGMENTS) {
		ch->job.kind = GR_JOB_SEGMENTS;
		ch->job.seg = gr_segs_job(req->seg.segs, req->nsubmitted,
					  req->filling_start / gr_dtype_size(req->dtype));
	}
	if (req->kind == GR_REQUEST_CUMSUM && (ch->job.where == GR_AT_DEVICE || req->scan.on_gpu)) {
		/* one launch over the whole request (gr_request_region_pump),
		 * into device memory of the same device, or (a host region's)
		 * into the out region where it lies */
		ch->job.kind = GR_JOB_SCAN;
		ch->job.scan_out = req->scan.out_base;
	} else if (req->kind == GR_REQUEST_CUMSUM && !gr_request_cumsum_job(req, ch)) {
		/* out of memory, or failed already: no job */
		if (!req->failed)
			request_mark_failed(req, /* reply= */ true, GR_ERR_INTERNAL, "out of memory");
		gr_request_chunk_release(req, ch);
		return;
	}
	/* segments of host data, and prefix sums of host data: on the CPU
	 * (segments of GPU memory on the GPU, or copied to the host first) */
	bool via_host = gr_request_via_host(req);
	/* A small request is one job, submitted whole, and so is a region's
	 * that fits one: the backend may answer it from its own thread. */
	bool whole = req->small || (req->region && req->region_left == 0 && req->nsubmitted == 0);
	/* answers with an exact partial, and moments', are the loop's to write */
	if (whole && !req->partial && req->op != GR_OP_MOMENTS && req->kind == GR_REQUEST_REDUCE &&
	    !via_host && req->received && ch->job.n > 0 && req->conn && req->conn->direct) {
		req->direct = gr_direct_ref(req->conn->direct);
		ch->job.early = req->direct;
		ch->job.tag = req->msgid;
	}
	if (via_host && !gr_request_fetch_job(req, ch)) {
		if (!req->failed)
			request_mark_failed(req, /* reply= */ true, GR_ERR_INTERNAL, "out of memory");
		gr_request_chunk_release(req, ch);
		return;
	}
	req->nsubmitted++;
	if (req->small)
		gr_server_batch_add(req->srv, &ch->job, ch->slot, req->data_bytes);
	else
		gr_server_submit(req->srv, &ch->job, req->data_bytes);
}

/*
 * The next piece of a host region's segments, from byte start on, where
 * either engine may take it (gr_sched_splits): as long as the scheduler
 * cuts it, but ending on the last segment boundary within that where
 * there is one, so that the next piece begins on one. The GPUs take
 * whole segments only (gr_segs_whole), a slot at most: a piece cut for
 * them that is not goes to the CPU instead (a segment longer than a
 * slot, or the rest of one a CPU piece began).
 */
static uint64_t segs_piece(gr_request *req, uint64_t start, uint64_t slot, uint8_t *ret_split)
{
	const gr_segs *segs = req->seg.segs;
	const uint64_t size = gr_dtype_size(req->dtype), first = start / size;
	uint64_t take = gr_sched_piece(&req->srv->sched, req->op, req->dtype, req->data_bytes,
				       req->region_left, slot, uv_hrtime(), ret_split);

	if (take < req->region_left)
		take = (gr_segs_cut(segs->offsets, segs->nseg, first, first + take / size) - first) *
		       size;
	if (*ret_split == 1) {
		const gr_segjob sj = {.offsets = segs->offsets, .nseg = segs->nseg, .first = first};
		uint64_t s0, s1;
		if (take > slot || !gr_segs_whole(&sj, take / size, &s0, &s1))
			*ret_split = 2;
	}
	return take;
}

/*
 * Submit the next chunks of a reduce of a mapped region. They are cut
 * where a socket request's of the same size would be (staging slots), so
 * the bits are the same, but for host data that either engine may reduce,
 * whose bits do not depend on the cuts: the scheduler cuts those
 * (gr_sched_piece). Its data are all there already, so as many go out as
 * one request may have in flight; each one back sends the next. A
 * request whose connection is gone submits no more.
 */
void gr_request_region_pump(gr_request *req)
{
	/* device memory needs no staging-sized pieces: one launch reads a
	 * gigabyte at the memory's rate; prefix sums are one launch whole,
	 * whose order counts tiles from the request's first element, and so
	 * are segments, which meet across tiles on the device */
	uint64_t slot = req->srv->staging.slot_bytes;
	/* ... but what goes to the host first is cut as a host region is */
	bool device = req->region->device >= 0 && !gr_request_via_host(req);

	if (device)
		slot = req->kind != GR_REQUEST_REDUCE ? req->data_bytes : GR_DEVICE_CHUNK_BYTES;
	/* a host region's prefix sums that the GPUs take: one launch whole */
	if (req->kind == GR_REQUEST_CUMSUM && req->nsubmitted == 0 && !device)
		req->scan.on_gpu = gr_request_cumsum_on_gpu(req);
	if (req->scan.on_gpu)
		slot = req->data_bytes;

	if (!req->conn) {
		req->region_left = 0;
		req->failed = true;
		return;
	}
	while (req->region_left > 0 && req->nsubmitted - req->ncombined < GR_REQUEST_CHUNKS_MAX) {
		gr_chunk *ch = &req->chunks[req->nsubmitted % GR_REQUEST_CHUNKS_MAX];
		uint64_t take = req->region_left < slot ? req->region_left : slot;
		uint64_t start = req->data_bytes - req->region_left;

		/* host data that either engine may reduce: the scheduler picks
		 * the engine now and cuts the piece to suit it */
		ch->job.split = 0;
		if (req->region->device < 0 && req->kind == GR_REQUEST_REDUCE)
			take = gr_sched_piece(&req->srv->sched, req->op, req->dtype,
					      req->data_bytes, req->region_left, slot, uv_hrtime(),
					      &ch->job.split);
		else if (req->region->device < 0 && req->kind == GR_REQUEST_SEGMENTS &&
			 gr_sched_splits(&req->srv->sched, req->op, req->dtype))
			take = segs_piece(req, start, slot, &ch->job.split);

		ch->slot = NULL;
		ch->done = false;
		ch->job.data = req->region_next;
		/* counted against the connection's in-flight bytes, like
		 * staging; device memory read in place holds none of the
		 * host's, a copy for the CPU (request-fetch.c) as much */
		ch->staged = device || req->scan.on_gpu ? 0 : (size_t)take;
		gr_conn_charge(req->conn, ch->staged);
		req->filling = ch;
		req->filling_start = start;
		req->region_next += take;
		req->region_left -= take;
		gr_request_submit_filling(req, start + take);
	}
}

/* Whether the next n bytes of c's stream have come: read into its
 * envelope buffer, or waiting in the socket. */
static bool conn_payload_here(gr_conn *c, uint64_t n)
{
	uint64_t have = c->rlen - c->rpos;
	int unread = 0;

	if (have >= n)
		return true;
	return ioctl(c->rfd, FIONREAD, &unread) == 0 && unread > 0 && have + (uint64_t)unread >= n;
}

/* Find staging for the next part of the current request's data and point
 * the parser at it. -EAGAIN: none now, the connection waits. */
int gr_conn_set_dest(gr_conn *c)
{
	gr_server *s = c->srv;
	gr_request *req = c->cur;
	const gr_req *preq = gr_req_parser_req(c->parser);
	uint64_t left = req->data_bytes - preq->data_done;

	if (req->nsubmitted - req->ncombined >= s->cfg->request_chunks) {
		c->stall = GR_STALL_CHUNKS;
		s->stats.stalls_chunks++;
		return -EAGAIN;
	}
	/* Prefix sums stream out as they are computed: no more of them
	 * while the client leaves what went out untaken. Only what is
	 * written counts here, which drains without any more reading;
	 * replies waiting in wbuf behind a stream would not. */
	if (req->kind == GR_REQUEST_CUMSUM && c->writing_bytes > s->cfg->max_unsent_bytes) {
		if (c->stall != GR_STALL_UNSENT)
			s->stats.stalls_limits++;
		c->stall = GR_STALL_UNSENT;
		return -EAGAIN;
	}
	gr_chunk *ch = &req->chunks[req->nsubmitted % GR_REQUEST_CHUNKS_MAX];
	gr_slot *slot, *closed = NULL;
	void *dst;
	size_t cap;

	/* A small request whose bytes are not all here takes a slot of its
	 * own, charged whole, rather than a piece of the batch slot others'
	 * requests share: a piece whose bytes stop coming would hold that
	 * slot, and every piece after it, while charged for its own bytes. */
	if (req->small && !conn_payload_here(c, left))
		req->small = false;

	/* The user's share of staging, from the first byte of its data on:
	 * one user's requests whose bytes stop coming hold only its share. */
	uint64_t want = req->small ? left : s->staging.slot_bytes;
	if (!gr_peer_may(&s->peers, c->peer, GR_RES_STAGING, want)) {
		if (c->stall != GR_STALL_STAGING)
			s->peers.pool[GR_RES_STAGING].refused++;
		c->stall = GR_STALL_STAGING;
		s->stats.stalls_staging++;
		gr_staging_wait(&s->staging, &c->waiter);
		return -EAGAIN;
	}
	if (req->small) {
		dst = gr_staging_alloc_piece(&s->staging, (size_t)left, &slot, &closed);
		cap = (size_t)left;
	} else {
		slot = gr_staging_alloc_chunk(&s->staging);
		dst = slot ? slot->base : NULL;
		cap = s->staging.slot_bytes;
	}
	if (closed && closed == s->batch_slot)
		gr_server_batch_flush(s); /* a full slot's batch goes out now */
	if (!dst) {
		c->stall = GR_STALL_STAGING;
		s->stats.stalls_staging++;
		gr_staging_wait(&s->staging, &c->waiter);
		return -EAGAIN;
	}
	ch->slot = slot;
	ch->done = false;
	ch->job.data = dst;
	ch->staged = cap;
	gr_conn_charge(c, cap);
	ch->staging = cap;
	c->staging_bytes += cap;
	gr_peer_charge(&s->peers, c->peer, GR_RES_STAGING, cap);
	req->filling = ch;
	req->filling_start = preq->data_done;
	gr_req_parser_set_dest(c->parser, dst, cap);
	c->need_dest = false;
	c->stall = GR_STALL_NONE;
	return 0;
}

