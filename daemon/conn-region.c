/*
 * The region methods of a connection: map (a descriptor that came with
 * the request, util/fdpass.h), unmap, and reduce by region, whose chunks
 * are cut from the mapping in place (daemon/request.c).
 */
#include <inttypes.h>
#include <stdio.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "util/log.h"
#include "proto/message.h"

/* Whether exactly one usable descriptor came with the request; if not,
 * it is answered and the descriptor dropped. */
static bool conn_one_fd(gr_conn *c, const gr_req *preq, unsigned nfd, int fd)
{
	const char *name = gr_method_name(preq->method);

	if (nfd == 1 && fd == GR_FDQ_SOCKET) {
		/* closed as it came (fdpass.h) */
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "the file descriptor is a socket, not a memfd (memfd_create with "
				 "MFD_ALLOW_SEALING) or an exported CUDA allocation");
		return false;
	}
	if (nfd != 1 || fd < 0) {
		gr_conn_drop_fd(c, fd);
		if (nfd == 0)
			gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
					 "%s needs one file descriptor, sent in SCM_RIGHTS with the "
					 "request's bytes", name);
		else
			gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
					 "%s takes exactly one file descriptor; %u came", name, nfd);
		return false;
	}
	return true;
}

void gr_conn_map(gr_conn *c, const gr_req *preq, unsigned nfd, int fd)
{
	gr_server *s = c->srv;
	gr_region *r;
	char why[256];

	if (preq->kind == GR_MAP_CUDA_IPC && nfd > 0) {
		/* its handle comes in the request */
		gr_conn_drop_fd(c, fd);
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "map of kind cuda_ipc takes no file descriptor; %u came", nfd);
		return;
	}
	if (preq->kind != GR_MAP_CUDA_IPC && !conn_one_fd(c, preq, nfd, fd))
		return;
	gr_err e = gr_region_map(s, &c->regions, preq, fd, &r, why, sizeof(why));
	gr_conn_drop_fd(c, fd);
	if (e != GR_OK) {
		gr_conn_reply_error(c, preq->msgid, e, "%s", why);
		return;
	}
	/* answered once registered, where the backend registers it */
	if (r->device < 0 && gr_region_pin(c, r, preq->msgid))
		return;
	gr_conn_map_reply(c, preq->msgid, r);
}

void gr_conn_map_part(gr_conn *c, const gr_req *preq, unsigned nfd, int fd)
{
	gr_region *r;
	char why[256];

	if (!conn_one_fd(c, preq, nfd, fd))
		return;
	gr_err e = gr_region_map_part(c->srv, &c->regions, preq, fd, &r, why, sizeof(why));
	gr_conn_drop_fd(c, fd);
	if (e != GR_OK) {
		gr_conn_reply_error(c, preq->msgid, e, "%s", why);
		return;
	}
	gr_conn_map_reply(c, preq->msgid, r);
}

void gr_conn_map_reply(gr_conn *c, uint32_t msgid, const gr_region *r)
{
	gr_server *s = c->srv;
	int w;

	if ((w = gr_msg_write_response_header(&c->wbuf, msgid)) >= 0 &&
	    (w = gr_mpw_map(&c->wbuf, r->in_parts ? 3 : 2)) >= 0 &&
	    (w = gr_mpw_cstr(&c->wbuf, "region")) >= 0 && (w = gr_mpw_uint(&c->wbuf, r->id)) >= 0 &&
	    (w = gr_mpw_cstr(&c->wbuf, "bytes")) >= 0 && (w = gr_mpw_uint(&c->wbuf, r->bytes)) >= 0 &&
	    r->in_parts && (w = gr_mpw_cstr(&c->wbuf, "mapped")) >= 0)
		w = gr_mpw_uint(&c->wbuf, r->mapped);
	if (w < 0) {
		gr_conn_close(c);
		return;
	}
	s->stats.requests++;
	gr_server_mark_dirty(s, c);
}

void gr_conn_unmap(gr_conn *c, const gr_req *preq)
{
	if (!gr_region_unmap(&c->regions, preq->region)) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
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

/*
 * A cumsum's out region: this connection's, writable, with room for the
 * count prefix sums at out_offset, and not overlapping the elements in
 * (the input region) unless they are the same bytes, 8-byte elements read
 * and written in place. NULL after an error reply.
 */
static gr_region *conn_out_region(gr_conn *c, const gr_req *preq, const gr_region *in)
{
	gr_region *out = gr_region_find(&c->regions, preq->out_region);
	uint64_t off = preq->out_offset;

	if (!out) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "unknown out_region %" PRIu64 " (none such is mapped on this "
				 "connection)",
				 preq->out_region);
		return NULL;
	}
	char why[160];
	if (!gr_region_whole(out, why, sizeof(why))) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS, "out_region: %s", why);
		return NULL;
	}
	if (!out->writable) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "out_region %" PRIu64 " is read-only: map it with \"writable\": "
				 "true to take prefix sums",
				 out->id);
		return NULL;
	}
	if (off > out->bytes || preq->count > (out->bytes - off) / 8) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "out_region %" PRIu64 " (%zu bytes) is too small for %" PRIu64
				 " prefix sums of 8 bytes at out_offset %" PRIu64,
				 out->id, out->bytes, preq->count, off);
		return NULL;
	}
	size_t size = gr_dtype_size(preq->dtype);
	uint64_t in_end = preq->offset + preq->count * size, out_end = off + preq->count * 8;
	bool same = size == 8 && preq->offset == off;
	if (out == in && preq->count > 0 && !same && preq->offset < out_end && off < in_end) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "the prefix sums at out_offset %" PRIu64 " would overlap the elements "
				 "at offset %" PRIu64 " of region %" PRIu64
				 " (only 8-byte elements may be overwritten in place, at their own "
				 "offset)",
				 off, preq->offset, out->id);
		return NULL;
	}
	return out;
}

void gr_conn_reduce_region(gr_conn *c, const gr_req *preq)
{
	gr_region *r = gr_region_find(&c->regions, preq->region);
	size_t size = gr_dtype_size(preq->dtype);

	if (!r) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "unknown region %" PRIu64 " (none such is mapped on this connection)",
				 preq->region);
		return;
	}
	char why[160];
	if (!gr_region_whole(r, why, sizeof(why))) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS, "%s", why);
		return;
	}
	/* offset + count * size <= bytes, with nothing allowed to wrap */
	if (preq->offset > r->bytes || preq->count > (r->bytes - preq->offset) / size) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "offset %" PRIu64 " and count %" PRIu64 " (%s, %zu bytes each) reach "
				 "past the end of region %" PRIu64 " (%zu bytes)",
				 preq->offset, preq->count, gr_dtype_name(preq->dtype), size, r->id,
				 r->bytes);
		return;
	}
	gr_region *out = NULL;
	if (preq->scan && !(out = conn_out_region(c, preq, r)))
		return;
	if (preq->scan && out->device != r->device) {
		/* the GPU writes where it reads, the CPU likewise */
		if (r->device >= 0)
			gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
					 "the prefix sums of GPU memory (region %" PRIu64
					 ") go to GPU memory of the same device: out_region %" PRIu64
					 " is %s",
					 r->id, out->id,
					 out->device >= 0 ? "on another device" : "host memory");
		else
			gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
					 "the prefix sums of host memory (region %" PRIu64
					 ") go to host memory: out_region %" PRIu64 " is GPU memory",
					 r->id, out->id);
		return;
	}
	if (preq->scan && r->device >= 0 && ((uintptr_t)r->base + preq->offset) % size) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "the cumsum of %s elements in GPU memory needs an offset on a %zu-byte "
				 "boundary of the allocation, not %" PRIu64,
				 gr_dtype_name(preq->dtype), size, preq->offset);
		return;
	}
	/* the GPUs' exact sum reads whole elements; host data that are not
	 * aligned go to the CPU engine instead (the CUDA engine does not take
	 * them: cuda/queue.c, cuda_takes), and so
	 * do segments of GPU memory that are not, and narrow dtypes' elements
	 * (copied first: request-fetch.c) */
	bool exact_op = preq->op == GR_OP_SUM || preq->op == GR_OP_SUMSQ;
	if (r->device >= 0 && exact_op && gr_dtype_is_float(preq->dtype) && !preq->has_offsets &&
	    !gr_dtype_is_narrow(preq->dtype) &&
	    ((uintptr_t)r->base + preq->offset) % size) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INVALID_PARAMS,
				 "the %s of %s elements in GPU memory needs an offset on a %zu-byte "
				 "boundary of the allocation, not %" PRIu64,
				 gr_op_name(preq->op), gr_dtype_name(preq->dtype), size, preq->offset);
		return;
	}
	gr_request *req = gr_request_new(c, preq);
	if (!req) {
		gr_conn_reply_error(c, preq->msgid, GR_ERR_INTERNAL, "out of memory");
		return;
	}
	req->op = preq->op;
	req->dtype = preq->dtype;
	if (preq->scan)
		req->kind = GR_REQUEST_CUMSUM;
	req->partial = preq->partial;
	req->ddof = preq->ddof;
	req->received = true;
	req->data_bytes = preq->count * size;
	if (out) {
		req->scan.out_region = gr_region_ref(out);
		/* mapped for writing (gr_region_map) */
		req->scan.out_base = (uint8_t *)(uintptr_t)out->base + preq->out_offset;
	}
	if (preq->has_offsets && !gr_request_take_segments(req, c->parser, preq)) {
		req->data_bytes = 0;
		gr_request_fail(req, /* reply= */ true, GR_ERR_INTERNAL, "out of memory");
		return;
	}
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
		gr_request_region_pump(req);
	}
	gr_request_settle(req);
}

