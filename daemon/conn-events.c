/*
 * What a connection does with its parser's events: a request begins (its
 * data go to staging), its data fill a chunk, it is whole and is answered
 * by its method (a table), it is refused, or the connection must close.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "proto/message.h"
#include "util/log.h"

bool gr_conn_over_limits(gr_conn *c)
{
	const gr_config *cfg = c->srv->cfg;
	size_t held = c->direct ? gr_direct_held(c->direct) : 0;
	if (c->peer->held[GR_RES_INFLIGHT] > cfg->max_inflight_bytes_per_uid) {
		c->peer->stalled++; /* gr_conn_discharge() wakes it */
		return true;
	}
	return c->staged_bytes > cfg->max_inflight_bytes ||
	       c->wbuf.len + c->writing_bytes + held > cfg->max_unsent_bytes;
}

static void conn_begin_data(gr_conn *c, const gr_req *preq)
{
	gr_server *s = c->srv;
	gr_request *req = gr_request_new(c, preq);

	if (!req) {
		gr_req_parser_reject(c->parser, GR_ERR_INTERNAL, "out of memory");
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INTERNAL, "out of memory");
		return;
	}
	req->op = preq->op;
	req->dtype = preq->dtype;
	if (preq->scan)
		req->kind = GR_REQUEST_CUMSUM;
	req->small = preq->data_bytes <= s->small_max;
	c->cur = req;
	if (preq->has_offsets && !gr_request_take_segments(req, c->parser, preq)) {
		gr_req_parser_reject(c->parser, GR_ERR_INTERNAL, "out of memory");
		c->cur = NULL;
		gr_request_fail(req, /* reply= */ true, GR_ERR_INTERNAL, "out of memory");
		return;
	}
	if (!req->small && !(preq->has_op && preq->has_dtype) &&
	    preq->data_bytes > s->staging.slot_bytes) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "'op' and 'dtype' must come before a 'data' larger than %zu bytes",
			 s->staging.slot_bytes);
		gr_req_parser_reject(c->parser, GR_ERR_INVALID_PARAMS, "%s", msg);
		c->cur = NULL;
		gr_request_fail(req, /* reply= */ true, GR_ERR_INVALID_PARAMS, msg);
		return;
	}
	if (preq->data_bytes == 0) {
		gr_req_parser_set_dest(c->parser, NULL, 0);
		return;
	}
	c->need_dest = true;
}

/* ---- a whole request, by method ---- */

/* The methods answered at once: their result written after the header. */
static int conn_write_ping(gr_conn *c)
{
	return gr_mpw_cstr(&c->wbuf, "pong");
}

static int conn_write_stats(gr_conn *c)
{
	return gr_server_write_stats(c->srv, &c->wbuf, c->peer,
				     /* all= */ c->uid == 0 || c->uid == getuid());
}

static int conn_write_info(gr_conn *c)
{
	return gr_server_write_info(c->srv, &c->wbuf);
}

static void conn_reply_now(gr_conn *c, const gr_req *preq, int (*write)(gr_conn *c))
{
	gr_server *s = c->srv;
	int r = gr_msg_write_response_header(&c->wbuf, preq->msgid);

	if (r >= 0)
		r = write(c);
	if (r < 0) {
		gr_conn_close(c);
		return;
	}
	s->stats.requests++;
	gr_server_mark_dirty(s, c);
}

static void conn_done_ping(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd, int fd)
{
	conn_reply_now(c, preq, conn_write_ping);
}

static void conn_done_stats(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd, int fd)
{
	conn_reply_now(c, preq, conn_write_stats);
}

static void conn_done_info(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd, int fd)
{
	conn_reply_now(c, preq, conn_write_info);
}

static void conn_done_map(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd, int fd)
{
	gr_conn_map(c, preq, nfd, fd);
}

static void conn_done_map_part(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd,
			       int fd)
{
	gr_conn_map_part(c, preq, nfd, fd);
}

static void conn_done_unmap(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd,
			    int fd)
{
	gr_conn_unmap(c, preq);
}

/* A reduce: of a region, or of the data that came with it. */
static void conn_done_reduce(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd,
			     int fd)
{
	if (preq->has_region) {
		gr_conn_reduce_region(c, preq);
		return;
	}
	if (!req)
		return;
	c->cur = NULL;
	req->op = preq->op;
	req->dtype = preq->dtype;
	if (preq->scan)
		req->kind = GR_REQUEST_CUMSUM;
	req->partial = preq->partial;
	req->ddof = preq->ddof;
	req->received = true;
	if (req->filling) {
		gr_request_submit_filling(req, preq->data_done);
	} else if (req->nsubmitted == 0) {
		gr_partial_identity(req->op, req->dtype, &req->acc);
		req->result = &req->acc;
	}
	gr_request_settle(req);
}

/* Each method's handler, and whether descriptors may come with it. */
static const struct {
	void (*done)(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd, int fd);
	bool takes_fds;
} conn_methods[] = {
	[GR_METHOD_REDUCE] = {conn_done_reduce, false},
	[GR_METHOD_STATS] = {conn_done_stats, false},
	[GR_METHOD_INFO] = {conn_done_info, false},
	[GR_METHOD_PING] = {conn_done_ping, false},
	[GR_METHOD_MAP] = {conn_done_map, true},
	[GR_METHOD_UNMAP] = {conn_done_unmap, false},
	[GR_METHOD_MAP_PART] = {conn_done_map_part, true},
};

static void conn_request_done(gr_conn *c, const gr_req *preq, gr_request *req, unsigned nfd,
			      int fd)
{
	const unsigned m = (unsigned)preq->method;
	const bool known = m < sizeof(conn_methods) / sizeof(conn_methods[0]) && conn_methods[m].done;

	if (nfd > 0 && !(known && conn_methods[m].takes_fds)) {
		gr_conn_drop_fd(c, fd);
		static const char msg[] = "a file descriptor came with a request that takes none";
		if (req) {
			c->cur = NULL;
			gr_request_fail(req, /* reply= */ true, GR_ERR_INVALID_PARAMS, msg);
		} else {
			gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS, "%s", msg);
		}
		return;
	}
	if (!known) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INTERNAL, "method not handled");
		return;
	}
	conn_methods[m].done(c, preq, req, nfd, fd);
}

/* Handle one parser event; false stops processing (stalled or closing). */
bool gr_conn_on_event(gr_conn *c, gr_req_event ev)
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
			gr_request_fail(req, true, GR_ERR_INVALID_PARAMS, msg);
			break;
		}
		req->op = preq->op;
		req->dtype = preq->dtype;
		if (preq->scan)
			req->kind = GR_REQUEST_CUMSUM;
		gr_request_submit_filling(req, preq->data_done);
		c->need_dest = true;
		break;
	case GR_REQ_DONE: {
		int fd;
		unsigned nfd = gr_conn_fds_take(c, &fd);
		c->served = true;
		conn_request_done(c, preq, req, nfd, fd);
		break;
	}
	case GR_REQ_ERROR: {
		int fd;
		c->served = true;
		if (gr_conn_fds_take(c, &fd) > 0)
			gr_conn_drop_fd(c, fd);
		if (req) {
			c->cur = NULL;
			gr_request_fail(req, /* reply= */ true, preq->err, preq->errmsg);
		} else {
			gr_conn_reply_error(c, preq->msgid, preq->err, "%s", preq->errmsg);
		}
		break;
	}
	case GR_REQ_FATAL:
		log_debug("closing a connection: %s", preq->errmsg);
		if (req) {
			c->cur = NULL;
			gr_request_fail(req, /* reply= */ false, preq->err, preq->errmsg);
		}
		gr_conn_reply_error(c, preq->has_msgid ? preq->msgid : 0, preq->err, "%s",
				 preq->errmsg);
		c->stall = GR_STALL_CLOSING;
		return false;
	}
	if (c->closing)
		return false;
	if (c->need_dest)
		return gr_conn_set_dest(c) == 0;
	if (!c->cur && (ev == GR_REQ_DONE || ev == GR_REQ_ERROR)) {
		/* At a request boundary: the place to apply backpressure. */
		if (c->draining) {
			c->stall = GR_STALL_DRAIN;
			return false;
		}
		if (gr_conn_over_limits(c)) {
			c->stall = GR_STALL_LIMITS;
			s->stats.stalls_limits++;
			return false;
		}
	}
	return true;
}
