/*
 * One client connection: reads into a small envelope buffer or, while a
 * bin payload is arriving, straight into staging; feeds the request parser;
 * runs the chunk pipeline of each reduce (of data that came over the
 * socket, or of a mapped region); queues replies.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "daemon/log.h"
#include "daemon/server.h"
#include "proto/message.h"

static void conn_reply_error(gr_conn *c, uint32_t msgid, gr_err code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void conn_reply_error(gr_conn *c, uint32_t msgid, gr_err code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	c->srv->stats.errors++;
	if (c->closing)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (gr_msg_write_error(&c->wbuf, msgid, code, msg) < 0) {
		log_error("out of memory queueing a reply");
		gr_conn_close(c);
		return;
	}
	gr_server_mark_dirty(c->srv, c);
}

/* ---- requests and their chunks ---- */

static void conn_maybe_close(gr_conn *c);
static void conn_charge(gr_conn *c, uint64_t bytes);
static void conn_discharge(gr_conn *c, uint64_t bytes);

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
		conn_discharge(c, REQUEST_COST);
	}
	req->srv->stats.inflight--;
	req->direct = gr_direct_unref(req->direct);
	req->region = gr_region_unref(req->region);
	gr_server_request_put(req->srv, req);
}

static gr_request *request_new(gr_conn *c, const gr_req *preq)
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
	conn_charge(c, REQUEST_COST);
	c->srv->stats.inflight++;
	return req;
}

/*
 * Bytes a connection's requests hold (staging, or a region's chunks in
 * flight), counted for the connection and its user. Connections waiting
 * on their user's bound go on once the user is back under it.
 */
static void conn_charge(gr_conn *c, uint64_t bytes)
{
	c->staged_bytes += bytes;
	c->peer->inflight += bytes;
}

static void conn_discharge(gr_conn *c, uint64_t bytes)
{
	gr_server *s = c->srv;
	gr_peer *p = c->peer;

	c->staged_bytes -= bytes;
	p->inflight -= bytes;
	if (p->stalled && p->inflight <= s->cfg->max_inflight_bytes_per_uid) {
		p->stalled = 0;
		for (gr_link *l = s->conns.next; l != &s->conns; l = l->next) {
			gr_conn *o = gr_container_of(l, gr_conn, link);
			if (o->peer == p && o->stall == GR_STALL_LIMITS)
				gr_server_mark_ready(s, o);
		}
	}
}

static void chunk_release(gr_request *req, gr_chunk *ch)
{
	if (ch->slot) {
		gr_staging_release(&req->srv->staging, ch->slot);
		ch->slot = NULL;
	}
	if (req->conn)
		conn_discharge(req->conn, ch->staged);
	ch->staged = 0;
}

/* Count an answered request. */
static void request_answered(gr_request *req, uint64_t elements)
{
	gr_server *s = req->srv;

	s->stats.requests++;
	s->stats.elements += elements;
	gr_stats_latency(&s->stats, s->now_ns - req->start_ns);
}

static void request_reply(gr_request *req)
{
	gr_conn *c = req->conn;
	gr_value v;

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
			conn_reply_error(c, req->msgid, e, "moments of no elements");
		} else {
			/* the parser refuses these first */
			conn_reply_error(c, req->msgid, e, "'ddof' is not less than the elements");
		}
		request_answered(req, e == GR_OK ? res->count : 0);
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
		conn_reply_error(c, req->msgid, e, "%s of no elements", gr_op_name(req->op));
	}
	request_answered(req, e == GR_OK ? res->count : 0);
}

/* Free the request once nothing of it is left in the backend; answer it
 * first if it succeeded. */
static void request_settle(gr_request *req)
{
	gr_conn *c = req->conn;

	if (!(req->received || req->failed) || req->filling || req->ncombined != req->nsubmitted ||
	    (req->region_left > 0 && !req->failed))
		return;
	if (c && !req->failed) {
		if (req->answered)
			request_answered(req, req->data_bytes / gr_dtype_size(req->dtype));
		else
			request_reply(req);
	}
	request_free(req);
	if (c) {
		if (c->stall == GR_STALL_LIMITS)
			gr_server_mark_ready(c->srv, c);
		conn_maybe_close(c);
	}
}

/* Fail the request: answer now (if reply), drop the chunk being filled;
 * chunks already in the backend are dropped as they come back. */
static void request_fail(gr_request *req, bool reply, gr_err code, const char *msg)
{
	gr_conn *c = req->conn;

	if (req->failed)
		return;
	req->failed = true;
	if (c && reply)
		conn_reply_error(c, req->msgid, code, "%s", msg);
	if (req->filling) {
		chunk_release(req, req->filling);
		req->filling = NULL;
	}
	request_settle(req);
}

static void request_region_pump(gr_request *req);

static void chunk_done(gr_job *job)
{
	gr_chunk *ch = job->userdata;
	gr_request *req = ch->req;
	gr_conn *c = req->conn;
	bool broken = false;

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
		request_fail(req, /* reply= */ true, GR_ERR_INTERNAL, job->errmsg);
		/* request_fail may have freed req if this was its last chunk:
		 * it cannot have, since this chunk is not combined yet. */
	}
	while (req->ncombined < req->nsubmitted) {
		gr_chunk *next = &req->chunks[req->ncombined % GR_REQUEST_CHUNKS_MAX];
		if (!next->done)
			break;
		if (req->failed) {
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
		chunk_release(req, next);
		req->ncombined++;
	}
	if (c && c->stall == GR_STALL_CHUNKS)
		gr_server_mark_ready(c->srv, c);
	if (req->region_left > 0 && !req->failed)
		request_region_pump(req);
	request_settle(req);
	if (broken) {
		/* c is freed only from its close callback, a later phase */
		log_debug("closing a connection: a direct reply could not be written");
		gr_conn_close(c);
	}
}

/*
 * Host data that a GPU would not reduce exactly, and so goes to a CUDA
 * daemon's CPU route whatever its size: argmin, argmax and moments (the
 * GPUs have no kernel for them yet), the sum of squares of f64 (the GPUs'
 * exact kernel adds the exact squares of f32 elements, but an f64's square
 * does not fit a double), and a float sum or sum of squares whose elements do
 * not lie on their own size's boundary in memory (the exact kernel reads
 * whole elements), which only a region's offset can do.
 */
static bool request_exact_on_cpu(gr_op op, gr_dtype dt, const void *data)
{
	/* no GPU kernel yet (conn_reduce_region refuses them on device memory) */
	if (gr_op_cpu_only(op))
		return true;
	if (!gr_dtype_is_float(dt) || (op != GR_OP_SUM && op != GR_OP_SUMSQ))
		return false;
	return (op == GR_OP_SUMSQ && dt == GR_DT_F64) || (uintptr_t)data % gr_dtype_size(dt);
}

/* The chunk being filled is complete: hand it to the backend. */
static void request_submit_filling(gr_request *req, uint64_t data_done)
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
	ch->job.on_device = req->region && req->region->device >= 0;
	ch->job.status = 0;
	ch->job.done = chunk_done;
	ch->job.userdata = ch;
	ch->job.next = NULL;
	ch->job.early = NULL;
	ch->job.cpu_route = req->srv->router && !ch->job.on_device &&
			    (req->data_bytes <= req->srv->route_max ||
			     request_exact_on_cpu(req->op, req->dtype, ch->job.data));
	/* A small request is one job, submitted whole, and so is a region's
	 * that fits one: the backend may answer it from its own thread. */
	bool whole = req->small || (req->region && req->region_left == 0 && req->nsubmitted == 0);
	/* answers with an exact partial, and moments', are the loop's to write */
	if (whole && !req->partial && req->op != GR_OP_MOMENTS && req->received && ch->job.n > 0 &&
	    req->conn && req->conn->direct) {
		req->direct = gr_direct_ref(req->conn->direct);
		ch->job.early = req->direct;
		ch->job.tag = req->msgid;
	}
	req->nsubmitted++;
	if (req->small)
		gr_server_batch_add(req->srv, &ch->job, ch->slot);
	else
		gr_server_submit(req->srv, &ch->job);
}

/*
 * Submit the next chunks of a reduce of a mapped region. They are cut
 * where a socket request's of the same size would be (staging slots), so
 * the bits are the same, and its data are all there already, so as many
 * go out as one request may have in flight; each one back sends the
 * next. A request whose connection is gone submits no more.
 */
static void request_region_pump(gr_request *req)
{
	/* device memory needs no staging-sized pieces: one launch reads a
	 * gigabyte at the memory's rate */
	size_t slot = req->region->device >= 0 ? GR_DEVICE_CHUNK_BYTES : req->srv->staging.slot_bytes;

	if (!req->conn) {
		req->region_left = 0;
		req->failed = true;
		return;
	}
	while (req->region_left > 0 && req->nsubmitted - req->ncombined < GR_REQUEST_CHUNKS_MAX) {
		gr_chunk *ch = &req->chunks[req->nsubmitted % GR_REQUEST_CHUNKS_MAX];
		uint64_t take = req->region_left < slot ? req->region_left : slot;
		uint64_t start = req->data_bytes - req->region_left;

		ch->slot = NULL;
		ch->done = false;
		ch->job.data = req->region_next;
		ch->job.outside_staging = true;
		/* counted against the connection's in-flight bytes, like
		 * staging; device memory holds none of the host's */
		ch->staged = req->region->device >= 0 ? 0 : (size_t)take;
		conn_charge(req->conn, ch->staged);
		req->filling = ch;
		req->filling_start = start;
		req->region_next += take;
		req->region_left -= take;
		request_submit_filling(req, start + take);
	}
}

/* Find staging for the next part of the current request's data and point
 * the parser at it. -EAGAIN: none now, the connection waits. */
static int conn_set_dest(gr_conn *c)
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
	gr_chunk *ch = &req->chunks[req->nsubmitted % GR_REQUEST_CHUNKS_MAX];
	gr_slot *slot, *closed = NULL;
	void *dst;
	size_t cap;

	ch->job.outside_staging = false;

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
	conn_charge(c, cap);
	req->filling = ch;
	req->filling_start = preq->data_done;
	gr_req_parser_set_dest(c->parser, dst, cap);
	c->need_dest = false;
	c->stall = GR_STALL_NONE;
	return 0;
}

/* ---- parser events ---- */

static bool conn_over_limits(gr_conn *c)
{
	const gr_config *cfg = c->srv->cfg;
	size_t held = c->direct ? gr_direct_held(c->direct) : 0;
	if (c->peer->inflight > cfg->max_inflight_bytes_per_uid) {
		c->peer->stalled++; /* conn_discharge() wakes it */
		return true;
	}
	return c->staged_bytes > cfg->max_inflight_bytes ||
	       c->wbuf.len + c->writing_bytes + held > cfg->max_unsent_bytes;
}

static void conn_reply_method(gr_conn *c, const gr_req *preq)
{
	gr_server *s = c->srv;
	int r = 0;

	switch (preq->method) {
	case GR_METHOD_PING:
		r = gr_msg_write_response_header(&c->wbuf, preq->msgid);
		if (r >= 0)
			r = gr_mpw_cstr(&c->wbuf, "pong");
		break;
	case GR_METHOD_STATS:
		r = gr_msg_write_response_header(&c->wbuf, preq->msgid);
		if (r >= 0)
			r = gr_server_write_stats(s, &c->wbuf);
		break;
	case GR_METHOD_INFO:
		r = gr_msg_write_response_header(&c->wbuf, preq->msgid);
		if (r >= 0)
			r = gr_server_write_info(s, &c->wbuf);
		break;
	default:
		conn_reply_error(c, preq->msgid, GR_ERR_INTERNAL, "method not handled");
		return;
	}
	if (r < 0) {
		gr_conn_close(c);
		return;
	}
	s->stats.requests++;
	gr_server_mark_dirty(s, c);
}

static void conn_begin_data(gr_conn *c, const gr_req *preq)
{
	gr_server *s = c->srv;
	gr_request *req = request_new(c, preq);

	if (!req) {
		gr_req_parser_reject(c->parser, GR_ERR_INTERNAL, "out of memory");
		conn_reply_error(c, preq->msgid, GR_ERR_INTERNAL, "out of memory");
		return;
	}
	req->op = preq->op;
	req->dtype = preq->dtype;
	req->small = preq->data_bytes <= s->small_max;
	c->cur = req;
	if (!req->small && !(preq->has_op && preq->has_dtype) &&
	    preq->data_bytes > s->staging.slot_bytes) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "'op' and 'dtype' must come before a 'data' larger than %zu bytes",
			 s->staging.slot_bytes);
		gr_req_parser_reject(c->parser, GR_ERR_INVALID_PARAMS, "%s", msg);
		c->cur = NULL;
		request_fail(req, /* reply= */ true, GR_ERR_INVALID_PARAMS, msg);
		return;
	}
	if (preq->data_bytes == 0) {
		gr_req_parser_set_dest(c->parser, NULL, 0);
		return;
	}
	c->need_dest = true;
}

/* ---- map, unmap, and reduce by region (daemon/region.h) ---- */

static void conn_map(gr_conn *c, const gr_req *preq, unsigned nfd, int fd)
{
	gr_server *s = c->srv;
	gr_region *r;
	char why[256];
	int w;

	if (preq->kind == GR_MAP_CUDA_IPC && nfd > 0) {
		/* its handle comes in the request */
		if (fd >= 0)
			close(fd);
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "map of kind cuda_ipc takes no file descriptor; %u came", nfd);
		return;
	}
	if (nfd == 1 && fd == GR_FDQ_SOCKET) {
		/* closed as it came (fdpass.h) */
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "the file descriptor is a socket, not a memfd (memfd_create with "
				 "MFD_ALLOW_SEALING)");
		return;
	}
	if (preq->kind != GR_MAP_CUDA_IPC && (nfd != 1 || fd < 0)) {
		if (fd >= 0)
			close(fd);
		if (nfd == 0)
			conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
					 "map needs one file descriptor, sent in SCM_RIGHTS with the "
					 "request's bytes");
		else
			conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
					 "map takes exactly one file descriptor; %u came", nfd);
		return;
	}
	gr_err e = gr_region_map(s, &c->regions, preq, fd, &r, why, sizeof(why));
	if (e != GR_OK) {
		conn_reply_error(c, preq->msgid, e, "%s", why);
		return;
	}
	if ((w = gr_msg_write_response_header(&c->wbuf, preq->msgid)) >= 0 &&
	    (w = gr_mpw_map(&c->wbuf, 2)) >= 0 && (w = gr_mpw_cstr(&c->wbuf, "region")) >= 0 &&
	    (w = gr_mpw_uint(&c->wbuf, r->id)) >= 0 && (w = gr_mpw_cstr(&c->wbuf, "bytes")) >= 0)
		w = gr_mpw_uint(&c->wbuf, r->bytes);
	if (w < 0) {
		gr_conn_close(c);
		return;
	}
	s->stats.requests++;
	gr_server_mark_dirty(s, c);
}

static void conn_unmap(gr_conn *c, const gr_req *preq)
{
	if (!gr_region_unmap(&c->regions, preq->region)) {
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "unknown region %" PRIu64 " (none such is mapped on this connection)",
				 preq->region);
		return;
	}
	if (gr_msg_write_response_header(&c->wbuf, preq->msgid) < 0 ||
	    gr_mpw_bool(&c->wbuf, true) < 0) {
		gr_conn_close(c);
		return;
	}
	c->srv->stats.requests++;
	gr_server_mark_dirty(c->srv, c);
}

static void conn_reduce_region(gr_conn *c, const gr_req *preq)
{
	gr_region *r = gr_region_find(&c->regions, preq->region);
	size_t size = gr_dtype_size(preq->dtype);

	if (!r) {
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "unknown region %" PRIu64 " (none such is mapped on this connection)",
				 preq->region);
		return;
	}
	/* offset + count * size <= bytes, with nothing allowed to wrap */
	if (preq->offset > r->bytes || preq->count > (r->bytes - preq->offset) / size) {
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "offset %" PRIu64 " and count %" PRIu64 " (%s, %zu bytes each) reach "
				 "past the end of region %" PRIu64 " (%zu bytes)",
				 preq->offset, preq->count, gr_dtype_name(preq->dtype), size, r->id,
				 r->bytes);
		return;
	}
	if (r->device >= 0 && gr_op_cpu_only(preq->op)) {
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "%s is not yet available on device memory (region %" PRIu64
				 " is GPU memory); it is on host data and shared-memory regions",
				 gr_op_name(preq->op), r->id);
		return;
	}
	/* the GPUs' exact sum reads whole elements; host data that are not
	 * aligned go to the CPU route instead (request_exact_on_cpu) */
	bool exact_op = preq->op == GR_OP_SUM ||
			(preq->op == GR_OP_SUMSQ && preq->dtype == GR_DT_F32);
	if (r->device >= 0 && exact_op && gr_dtype_is_float(preq->dtype) &&
	    ((uintptr_t)r->base + preq->offset) % size) {
		conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "the %s of %s elements in GPU memory needs an offset on a %zu-byte "
				 "boundary of the allocation, not %" PRIu64,
				 gr_op_name(preq->op), gr_dtype_name(preq->dtype), size, preq->offset);
		return;
	}
	gr_request *req = request_new(c, preq);
	if (!req) {
		conn_reply_error(c, preq->msgid, GR_ERR_INTERNAL, "out of memory");
		return;
	}
	req->op = preq->op;
	req->dtype = preq->dtype;
	req->partial = preq->partial;
	req->ddof = preq->ddof;
	req->received = true;
	req->data_bytes = preq->count * size;
	req->region = gr_region_ref(r);
	req->region_next = r->base + preq->offset;
	req->region_left = req->data_bytes;
	if (r->device >= 0)
		c->srv->stats.bytes_device += req->data_bytes;
	else
		c->srv->stats.bytes_shm += req->data_bytes;
	if (req->data_bytes == 0) {
		gr_partial_identity(req->op, req->dtype, &req->acc);
		req->result = &req->acc;
	} else {
		request_region_pump(req);
	}
	request_settle(req);
}

/* Handle one parser event; false stops processing (stalled or closing). */
static bool conn_on_event(gr_conn *c, gr_req_event ev)
{
	gr_server *s = c->srv;
	const gr_req *preq = gr_req_parser_req(c->parser);
	gr_request *req = c->cur;

	switch (ev) {
	case GR_REQ_NEED_MORE:
		return true;
	case GR_REQ_DATA:
		conn_begin_data(c, preq);
		break;
	case GR_REQ_DEST_FULL:
		if (!req)
			return true;
		if (!(preq->has_op && preq->has_dtype)) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "'op' and 'dtype' must come before a 'data' larger than %zu bytes",
				 s->staging.slot_bytes);
			gr_req_parser_reject(c->parser, GR_ERR_INVALID_PARAMS, "%s", msg);
			c->cur = NULL;
			request_fail(req, true, GR_ERR_INVALID_PARAMS, msg);
			break;
		}
		req->op = preq->op;
		req->dtype = preq->dtype;
		request_submit_filling(req, preq->data_done);
		c->need_dest = true;
		break;
	case GR_REQ_DONE: {
		int fd;
		unsigned nfd = gr_fdq_take(&c->fds, c->in_parsed, &fd);
		if (preq->method == GR_METHOD_MAP) {
			conn_map(c, preq, nfd, fd);
			break;
		}
		if (nfd > 0) {
			if (fd >= 0)
				close(fd);
			static const char msg[] = "a file descriptor came with a request that takes none";
			if (req) {
				c->cur = NULL;
				request_fail(req, /* reply= */ true, GR_ERR_INVALID_PARAMS, msg);
			} else {
				conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS, "%s", msg);
			}
			break;
		}
		if (preq->method == GR_METHOD_UNMAP) {
			conn_unmap(c, preq);
		} else if (preq->method == GR_METHOD_REDUCE && preq->has_region) {
			conn_reduce_region(c, preq);
		} else if (preq->method != GR_METHOD_REDUCE) {
			conn_reply_method(c, preq);
		} else if (req) {
			c->cur = NULL;
			req->op = preq->op;
			req->dtype = preq->dtype;
			req->partial = preq->partial;
			req->ddof = preq->ddof;
			req->received = true;
			if (req->filling)
				request_submit_filling(req, preq->data_done);
			else if (req->nsubmitted == 0) {
				gr_partial_identity(req->op, req->dtype, &req->acc);
				req->result = &req->acc;
			}
			request_settle(req);
		}
		break;
	}
	case GR_REQ_ERROR: {
		int fd;
		if (gr_fdq_take(&c->fds, c->in_parsed, &fd) > 0 && fd >= 0)
			close(fd);
		if (req) {
			c->cur = NULL;
			request_fail(req, /* reply= */ true, preq->err, preq->errmsg);
		} else {
			conn_reply_error(c, preq->msgid, preq->err, "%s", preq->errmsg);
		}
		break;
	}
	case GR_REQ_FATAL:
		log_debug("closing a connection: %s", preq->errmsg);
		if (req) {
			c->cur = NULL;
			request_fail(req, /* reply= */ false, preq->err, preq->errmsg);
		}
		conn_reply_error(c, preq->has_msgid ? preq->msgid : 0, preq->err, "%s",
				 preq->errmsg);
		c->stall = GR_STALL_CLOSING;
		return false;
	}
	if (c->closing)
		return false;
	if (c->need_dest)
		return conn_set_dest(c) == 0;
	if (!c->cur && (ev == GR_REQ_DONE || ev == GR_REQ_ERROR)) {
		/* At a request boundary: the place to apply backpressure. */
		if (c->draining) {
			c->stall = GR_STALL_DRAIN;
			return false;
		}
		if (conn_over_limits(c)) {
			c->stall = GR_STALL_LIMITS;
			s->stats.stalls_limits++;
			return false;
		}
	}
	return true;
}

/* ---- reading ---- */

/* Where the next read goes: straight into staging while a payload is
 * arriving and the envelope buffer is drained, else that buffer. */
static void conn_read_buf(gr_conn *c, uv_buf_t *buf)
{
	void *p;
	size_t n;

	if (c->rpos == c->rlen) {
		c->rpos = c->rlen = 0;
		if ((n = gr_req_parser_window(c->parser, &p)) > 0) {
			c->read_staging = true;
			*buf = uv_buf_init(p, (unsigned)(n > UINT32_MAX ? UINT32_MAX : n));
			return;
		}
	} else if (c->rpos > 0) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	c->read_staging = false;
	*buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(GR_CONN_RBUF_BYTES - c->rlen));
}

static void conn_read_stop(gr_conn *c)
{
	if (c->reading) {
		uv_poll_stop(&c->poll);
		c->reading = false;
	}
}

/* nread bytes arrived where conn_read_buf() said (0: the end of the
 * stream; negative: an errno). */
static void conn_on_read(gr_conn *c, ssize_t nread)
{
	if (nread <= 0) {
		conn_read_stop(c);
		if (nread < 0) {
			log_debug("connection error: %s",
				  nread == -EMFILE ? "too many file descriptors sent at once"
						   : strerror((int)-nread));
			gr_conn_close(c);
			return;
		}
		c->eof = true;
		if (c->cur) {
			gr_request *req = c->cur;
			c->cur = NULL;
			request_fail(req, /* reply= */ false, GR_ERR_INVALID_REQUEST, "truncated");
		}
		conn_maybe_close(c);
		return;
	}
	c->in_read += (uint64_t)nread;
	c->srv->stats.bytes_in += (uint64_t)nread;
	c->srv->now_ns = uv_hrtime();
	if (c->read_staging) {
		c->read_staging = false;
		c->in_parsed += (uint64_t)nread;
		gr_req_event ev = gr_req_parser_commit(c->parser, (size_t)nread);
		if (!conn_on_event(c, ev)) {
			conn_read_stop(c);
			return;
		}
	} else {
		c->rlen += (size_t)nread;
	}
	gr_conn_pump(c);
}

/* Reads per wake-up at most, as libuv's own streams do, and bytes: a
 * client streaming large arrays then waits its turn behind the others
 * that are ready, since the poll is level-triggered and comes back. */
#define CONN_READS_PER_POLL 32
#define CONN_BYTES_PER_POLL ((ssize_t)1 << 20)
/* and at most this much a read, so that one read is soon over too */
#define CONN_BYTES_PER_READ ((size_t)256 << 10)
/*
 * Bytes a wake-up reads from one connection when the last round of the
 * loop read others too. Copying a client's stream into staging is most of
 * the loop's work while one streams large arrays, and a round of the loop
 * is what every other client waits for: with this share a round lasts
 * some tens of microseconds, rather than the hundreds a megabyte takes,
 * and a client alone still gets the full budget.
 */
#ifndef CONN_BYTES_SHARED
#define CONN_BYTES_SHARED ((ssize_t)64 << 10)
#endif

static void conn_poll_cb(uv_poll_t *h, int status, int events)
{
	gr_conn *c = h->data;

	if (status < 0) {
		log_debug("connection error: %s", uv_strerror(status));
		gr_conn_close(c);
		return;
	}
	ssize_t total = 0;
	ssize_t budget = c->srv->polled_last > 1 ? CONN_BYTES_SHARED : CONN_BYTES_PER_POLL;
	c->srv->polled++;
	for (int k = 0; k < CONN_READS_PER_POLL && total < budget && c->reading && !c->closing;
	     k++) {
		uv_buf_t b;
		conn_read_buf(c, &b);
		if (b.len == 0) {
			c->read_staging = false;
			return;
		}
		if (b.len > CONN_BYTES_PER_READ)
			b.len = CONN_BYTES_PER_READ;
		if ((ssize_t)b.len > budget - total)
			b.len = (size_t)(budget - total);
		ssize_t n = gr_fdpass_recv(c->rfd, b.base, b.len, &c->fds, c->in_read);
		if (n == -EAGAIN) {
			c->read_staging = false;
			return;
		}
		conn_on_read(c, n);
		/* a short read drained the socket */
		if (n < (ssize_t)b.len)
			return;
		total += n;
	}
}

/* Descriptors that came with bytes the parser read and reported nothing
 * for (a notification's) are closed. */
static void conn_drop_stray_fds(gr_conn *c)
{
	int fd;
	if (c->fds.n && gr_req_parser_idle(c->parser) &&
	    gr_fdq_take(&c->fds, c->in_parsed, &fd) > 0 && fd >= 0)
		close(fd);
}

void gr_conn_pump(gr_conn *c)
{
	if (c->closing || c->stall == GR_STALL_CLOSING)
		return;
	switch (c->stall) {
	case GR_STALL_STAGING:
	case GR_STALL_CHUNKS:
		if (conn_set_dest(c) < 0) {
			conn_read_stop(c);
			return;
		}
		break;
	case GR_STALL_LIMITS:
		if (conn_over_limits(c))
			return;
		c->stall = GR_STALL_NONE;
		break;
	case GR_STALL_DRAIN:
		return;
	default:
		break;
	}
	/* Feed until the parser needs bytes: it may have events left to
	 * report even when the buffer is empty (a request that ends with an
	 * empty payload, say). */
	for (;;) {
		gr_req_event ev;
		size_t n = gr_req_parser_feed(c->parser, c->rbuf + c->rpos, c->rlen - c->rpos, &ev);
		c->rpos += n;
		c->in_parsed += n;
		if (!conn_on_event(c, ev)) {
			conn_read_stop(c);
			return;
		}
		if (ev == GR_REQ_NEED_MORE)
			break;
	}
	conn_drop_stray_fds(c);
	if (c->eof || c->closing) {
		conn_maybe_close(c);
		return;
	}
	if (!c->reading) {
		int r = uv_poll_start(&c->poll, UV_READABLE, conn_poll_cb);
		if (r < 0) {
			log_warning("cannot read from a connection: %s", uv_strerror(r));
			gr_conn_close(c);
			return;
		}
		c->reading = true;
	}
}

static void conn_waiter_wake(gr_staging_waiter *w)
{
	gr_conn *c = gr_container_of(w, gr_conn, waiter);
	gr_server_mark_ready(c->srv, c);
}

/* ---- writing ---- */

typedef struct conn_write {
	uv_write_t req;
	gr_conn *conn;
	gr_buf buf;
} conn_write;

/* After a write finished or went to libuv: once nothing of the loop's is
 * left to write, backend threads may send again (or what they held since
 * goes next), and what waited on unsent bytes or on the writes goes on. */
static void conn_after_write(gr_conn *c)
{
	if (c->direct && c->writing_bytes == 0 && c->wbuf.len == 0 &&
	    gr_direct_written(c->direct))
		gr_server_mark_dirty(c->srv, c);
	if (c->stall == GR_STALL_LIMITS)
		gr_server_mark_ready(c->srv, c);
	conn_maybe_close(c);
}

static void conn_write_cb(uv_write_t *wr, int status)
{
	conn_write *w = gr_container_of(wr, conn_write, req);
	gr_conn *c = w->conn;

	c->writing_bytes -= w->buf.len;
	c->writes_done++;
	gr_buf_deinit(&w->buf);
	free(w);
	if (status < 0) {
		if (status != UV_ECANCELED)
			log_debug("write failed: %s", uv_strerror(status));
		gr_conn_close(c);
		return;
	}
	conn_after_write(c);
}

/* Write wbuf: 0, or -1 when the connection was closed. */
static int conn_write_wbuf(gr_conn *c)
{
	/* Most replies fit in the socket buffer: try the write right away,
	 * and only hand what is left to libuv. */
	uv_buf_t b = uv_buf_init((char *)c->wbuf.data, (unsigned)c->wbuf.len);
	int n = uv_try_write((uv_stream_t *)&c->pipe, &b, 1);
	if (n > 0)
		gr_buf_consume(&c->wbuf, (size_t)n);
	else if (n < 0 && n != UV_EAGAIN) {
		log_debug("write failed: %s", uv_strerror(n));
		gr_conn_close(c);
		return -1;
	}
	if (c->wbuf.len > 0) {
		conn_write *w = malloc(sizeof(*w));
		if (!w) {
			gr_conn_close(c);
			return -1;
		}
		w->conn = c;
		w->buf = c->wbuf;
		gr_buf_init(&c->wbuf);
		c->writing_bytes += w->buf.len;
		b = uv_buf_init((char *)w->buf.data, (unsigned)w->buf.len);
		int r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, conn_write_cb);
		if (r < 0) {
			log_debug("write failed: %s", uv_strerror(r));
			c->writing_bytes -= w->buf.len;
			gr_buf_deinit(&w->buf);
			free(w);
			gr_conn_close(c);
			return -1;
		}
	}
	return 0;
}

void gr_conn_flush(gr_conn *c)
{
	if (c->closing)
		return;
	if (c->direct) {
		/* what backend threads held back goes first */
		if (gr_direct_take(c->direct, &c->wbuf) < 0) {
			log_error("out of memory writing replies");
			gr_conn_close(c);
			return;
		}
	} else if (c->wbuf.len == 0) {
		return;
	}
	if (c->wbuf.len > 0 && conn_write_wbuf(c) < 0)
		return;
	conn_after_write(c);
}

/* ---- lifetime ---- */

static void conn_maybe_close(gr_conn *c)
{
	if (c->closing || c->wbuf.len > 0 || c->writing_bytes > 0 ||
	    (c->direct && gr_direct_held(c->direct) > 0))
		return;
	if (c->stall == GR_STALL_CLOSING ||
	    ((c->eof || c->draining) && !c->cur && c->nrequests == 0))
		gr_conn_close(c);
}

/* The last of the connection's handles closed: free it. */
static void conn_close_cb(uv_handle_t *h)
{
	gr_conn *c = h->data;
	gr_server *s = c->srv;

	if (--c->handles > 0)
		return;
	if (c->rfd >= 0)
		close(c->rfd);
	gr_req_parser_free(c->parser);
	gr_buf_deinit(&c->wbuf);
	c->direct = gr_direct_unref(c->direct);
	free(c->rbuf);
	free(c);
	gr_server_conn_closed(s);
}

void gr_conn_close(gr_conn *c)
{
	gr_server *s = c->srv;

	if (c->closing)
		return;
	c->closing = true;
	conn_read_stop(c);
	gr_staging_unwait(&s->staging, &c->waiter);
	gr_link_del(&c->ready_link);
	gr_link_del(&c->dirty_link);
	gr_link_del(&c->link);

	if (c->cur) {
		gr_request *req = c->cur;
		c->cur = NULL;
		request_fail(req, /* reply= */ false, GR_ERR_INTERNAL, "connection closed");
	}
	/* Requests still in the backend finish on their own and are dropped. */
	while (gr_link_linked(&c->requests)) {
		gr_request *req = gr_container_of(c->requests.next, gr_request, link);
		gr_link_del(&req->link);
		req->conn = NULL;
		c->nrequests--;
	}
	s->stats.connections--;
	gr_fdq_clear(&c->fds);
	gr_regions_release(&c->regions);
	if (c->peer) {
		/* what its requests still hold is no longer theirs to wait on */
		c->peer->inflight -= c->staged_bytes;
		gr_peers_leave(&s->peers, c->peer);
		c->peer = NULL;
	}
	if (c->direct)
		gr_direct_close(c->direct); /* before the descriptor is */
	if (c->rfd >= 0)
		uv_close((uv_handle_t *)&c->poll, conn_close_cb);
	uv_close((uv_handle_t *)&c->pipe, conn_close_cb);
}

void gr_conn_drain(gr_conn *c)
{
	c->draining = true;
	if (!c->cur && c->stall == GR_STALL_NONE) {
		c->stall = GR_STALL_DRAIN;
		conn_read_stop(c);
	}
	conn_maybe_close(c);
}

/* Refuse the connection with one busy error saying why, then close. */
static void conn_refuse(gr_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void conn_refuse(gr_conn *c, const char *fmt, ...)
{
	char msg[192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->srv->stats.connections_refused++;
	c->stall = GR_STALL_CLOSING;
	conn_reply_error(c, 0, GR_ERR_BUSY, "%s", msg);
	gr_conn_flush(c);
}

/* Who is it, and may it stay? True when it was refused. */
static bool conn_admit(gr_conn *c)
{
	gr_server *s = c->srv;
	const gr_config *cfg = s->cfg;
	uv_os_fd_t fd;

	if (s->shutting_down) {
		conn_refuse(c, "shutting down");
		return true;
	}
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
	    !gr_peer_cred(fd, &c->uid, &c->gid, &c->pid)) {
		conn_refuse(c, "cannot tell who the peer is (SO_PEERCRED)");
		return true;
	}
	if ((cfg->n_allow_uids || cfg->n_allow_gids) &&
	    !gr_ids_contain(cfg->allow_uids, cfg->n_allow_uids, c->uid) &&
	    !gr_ids_contain(cfg->allow_gids, cfg->n_allow_gids, c->gid)) {
		conn_refuse(c, "uid %u (gid %u) is not allowed to use this daemon", (unsigned)c->uid,
			    (unsigned)c->gid);
		return true;
	}
	if (!(c->peer = gr_peers_join(&s->peers, c->uid))) {
		conn_refuse(c, "out of memory");
		return true;
	}
	c->regions.peer = c->peer;
	if (s->stats.connections > cfg->max_connections) {
		conn_refuse(c, "too many connections (the limit is %u)", cfg->max_connections);
		return true;
	}
	if (c->peer->conns > cfg->max_connections_per_uid) {
		conn_refuse(c, "too many connections from uid %u (the limit is %u a user)",
			    (unsigned)c->uid, cfg->max_connections_per_uid);
		return true;
	}
	return false;
}

void gr_conn_accept(gr_server *s)
{
	gr_conn *c = calloc(1, sizeof(*c));
	int r;

	if (!c) {
		log_error("out of memory accepting a connection");
		return;
	}
	c->srv = s;
	gr_link_init(&c->link);
	gr_link_init(&c->ready_link);
	gr_link_init(&c->dirty_link);
	gr_link_init(&c->requests);
	gr_buf_init(&c->wbuf);
	gr_fdq_init(&c->fds);
	gr_regions_init(&c->regions, NULL);
	c->rfd = -1;
	c->waiter.wake = conn_waiter_wake;
	if ((r = uv_pipe_init(s->loop, &c->pipe, 0)) < 0) {
		free(c);
		log_error("uv_pipe_init: %s", uv_strerror(r));
		return;
	}
	c->pipe.data = c;
	c->handles = 1;
	s->nconns++;
	s->stats.connections++;
	gr_link_add_tail(&s->conns, &c->link);
	if ((r = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->pipe)) < 0) {
		log_warning("accept: %s", uv_strerror(r));
		gr_conn_close(c);
		return;
	}
	s->stats.connections_total++;
	if (conn_admit(c))
		return;
	c->rbuf = malloc(GR_CONN_RBUF_BYTES);
	if (!c->rbuf || gr_req_parser_new(&s->limits, &c->parser) < 0) {
		log_error("out of memory accepting a connection");
		gr_conn_close(c);
		return;
	}
	uv_os_fd_t fd;
	if ((r = uv_fileno((uv_handle_t *)&c->pipe, &fd)) < 0) {
		log_warning("accept: %s", uv_strerror(r));
		gr_conn_close(c);
		return;
	}
	/* Reads go through a duplicate of the descriptor, polled on its own
	 * (fdpass.h): libuv watches a descriptor for one handle only, and
	 * the pipe's is for writes. */
	if ((c->rfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		log_warning("accept: cannot duplicate a descriptor: %s", strerror(errno));
		gr_conn_close(c);
		return;
	}
	if ((r = uv_poll_init(s->loop, &c->poll, c->rfd)) < 0) {
		log_warning("accept: uv_poll_init: %s", uv_strerror(r));
		close(c->rfd);
		c->rfd = -1;
		gr_conn_close(c);
		return;
	}
	c->poll.data = c;
	c->handles++;
	if (s->cfg->direct_replies)
		c->direct = gr_direct_new(fd); /* NULL: the loop writes every reply */
	gr_conn_pump(c);
}
