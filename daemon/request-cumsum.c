/*
 * A cumsum request on a connection (math/cumsum.h): each chunk's job
 * runs its LOCAL phase as soon as the chunk is full (or cut from its
 * region), the carries are taken in chunk order as those come back, each
 * chunk's CARRY phase follows, and the prefix sums go out in chunk order
 * once final: written in place into the request's out region, or sent on
 * the socket. A reply held in one chunk goes out whole, as any other; a
 * longer one streams (gr_conn_stream_*): its header first, then each
 * chunk's values as soon as they and those before them are final, so the
 * daemon never holds more of it than the chunks in flight.
 */
#include <stdlib.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "util/log.h"
#include "proto/message.h"

static void cumsum_chunk_done(gr_job *job);

/* the CPU engine's workers from which a long float chunk never runs
 * WHOLE (math/cumsum.h, gr_cumsum.split) */
#define CUMSUM_SPLIT_WORKERS 8u

static uint64_t request_count(const gr_request *req)
{
	return req->data_bytes / gr_dtype_size(req->dtype);
}

/* The state of the request's prefix sums, before its first chunk goes
 * out. False when out of memory. */
static bool cumsum_start(gr_request *req)
{
	size_t size = gr_dtype_size(req->dtype);
	uint64_t count = request_count(req);
	uint64_t chunk = req->srv->staging.slot_bytes / size;

	if (chunk > count)
		chunk = count;
	uint64_t nchunks = chunk ? (count + chunk - 1) / chunk : 0;
	unsigned njobs =
	    nchunks < GR_REQUEST_CHUNKS_MAX ? (unsigned)nchunks : GR_REQUEST_CHUNKS_MAX;
	req->scan.cs = gr_cumsum_new(req->dtype, (size_t)chunk, njobs ? njobs : 1);
	if (!req->scan.cs)
		return false;
	/* Enough of the CPU's workers run LOCAL and CARRY, two passes each
	 * split over them, faster than WHOLE, one pass on one worker: from
	 * 8 workers up (a 1 GiB f32 region on the 1x H200 host: 1.5 G
	 * elements/s against 0.6-1.0 with 8; with 4, 0.9 against 1.0) */
	req->scan.cs->split = gr_sched_cpu_workers(&req->srv->sched) >= CUMSUM_SPLIT_WORKERS;
	req->scan.bytes = gr_cumsum_bytes(req->scan.cs);
	if (req->conn)
		gr_conn_charge(req->conn, req->scan.bytes);
	return true;
}

bool gr_request_cumsum_on_gpu(const gr_request *req)
{
	const gr_region *in = req->region, *out = req->scan.out_region;

	if (!in || !out || in->device >= 0 || !in->reg || !out->reg || req->data_bytes == 0)
		return false;
	/* the job as it would go, for the engine's rules */
	const gr_job scan = {
		.kind = GR_JOB_SCAN,
		.where = GR_AT_HOST,
		.op = req->op,
		.dtype = req->dtype,
		.data = req->region_next,
		.n = (size_t)request_count(req),
		.scan_out = req->scan.out_base,
		.device = -1,
	};
	return gr_sched_scan_on_gpu(&req->srv->sched, &scan, req->data_bytes);
}

bool gr_request_cumsum_job(gr_request *req, gr_chunk *ch)
{
	size_t n = ch->job.n;
	uint64_t first = req->filling_start / gr_dtype_size(req->dtype);
	uint8_t *out;

	if (req->failed || (!req->scan.cs && !cumsum_start(req)))
		return false;
	if (req->scan.out_base) {
		out = req->scan.out_base + first * 8;
	} else {
		/* its own memory, handed to the socket's write once final */
		out = malloc(n ? n * 8 : 8);
		if (!out)
			return false;
		if (req->conn)
			gr_conn_charge(req->conn, n * 8);
	}
	gr_cumsum_job *cj = gr_cumsum_job_new(req->scan.cs, req->nsubmitted, n, out);
	cj->out_owned = !req->scan.out_base;
	ch->job.kind = GR_JOB_CUMSUM;
	ch->job.cumsum = cj;
	ch->job.done = cumsum_chunk_done;
	return true;
}

/* The chunk is out (or dropped): what it holds goes back. */
static void cumsum_chunk_release(gr_request *req, gr_chunk *ch)
{
	gr_cumsum_job *cj = ch->job.cumsum;

	if (cj->out_owned) {
		free(cj->out);
		if (req->conn)
			gr_conn_discharge(req->conn, ch->job.n * 8);
		cj->out_owned = false;
	}
	cj->out = NULL;
	gr_request_chunk_release(req, ch);
}

/*
 * Send the final prefix sums of chunk ch, every earlier chunk's being
 * out. False when they must wait: another request's reply is streaming.
 */
static bool cumsum_emit(gr_request *req, gr_chunk *ch)
{
	gr_conn *c = req->conn;
	gr_cumsum_job *cj = ch->job.cumsum;
	uint64_t count = request_count(req);
	size_t n = ch->job.n, bytes = n * 8;

	if (req->scan.out_base) {
		req->scan.emitted += n;
		return true;
	}
	if (req->scan.emitted == 0 && n == count) {
		/* the whole reply at once, like any other */
		if (gr_msg_write_response_cumsum_header(&c->wbuf, req->msgid, count) < 0 ||
		    gr_buf_append(&c->wbuf, cj->out, bytes) < 0) {
			log_error("out of memory queueing a reply");
			gr_conn_close(c);
			return true;
		}
		gr_server_mark_dirty(c->srv, c);
		req->scan.emitted += n;
		return true;
	}
	if (c->stream != req) {
		if (c->stream)
			return false;
		gr_buf hdr;
		gr_buf_init(&hdr);
		int r = gr_msg_write_response_cumsum_header(&hdr, req->msgid, count);
		if (r < 0) {
			gr_buf_deinit(&hdr);
			log_error("out of memory queueing a reply");
			gr_conn_close(c);
			return true;
		}
		r = gr_conn_stream_begin(c, req, hdr.data, hdr.len);
		gr_buf_deinit(&hdr);
		if (r < 0)
			return true;
	}
	/* the write takes the memory over, and counts it as unsent */
	void *mem = cj->out;
	cj->out = NULL;
	cj->out_owned = false;
	gr_conn_discharge(c, bytes);
	if (gr_conn_stream_write(c, mem, bytes) < 0)
		return true;
	req->scan.emitted += n;
	if (req->scan.emitted == count)
		gr_conn_stream_end(c);
	return true;
}

void gr_request_cumsum_advance(gr_request *req)
{
	gr_cumsum *cs = req->scan.cs;

	/* the carries, in chunk order, as soon as each chunk's LOCAL is in */
	while (req->scan.ncarried < req->nsubmitted) {
		gr_chunk *ch = &req->chunks[req->scan.ncarried % GR_REQUEST_CHUNKS_MAX];
		gr_cumsum_job *cj = ch->job.cumsum;
		if (!cj->local_done)
			break;
		req->scan.ncarried++;
		if (req->failed || !gr_cumsum_carry(cs, cj, ch->job.n)) {
			cj->final = true;
			continue;
		}
		ch->job.status = 0;
		ch->job.early = NULL;
		gr_server_submit(req->srv, &ch->job, req->data_bytes);
	}
	/* the final prefix sums out, in chunk order */
	req->scan.stream_wait = false;
	while (req->ncombined < req->scan.ncarried) {
		gr_chunk *ch = &req->chunks[req->ncombined % GR_REQUEST_CHUNKS_MAX];
		if (!ch->job.cumsum->final)
			break;
		if (!req->failed && req->conn && !cumsum_emit(req, ch)) {
			req->scan.stream_wait = true;
			break;
		}
		cumsum_chunk_release(req, ch);
		req->ncombined++;
	}
	gr_conn *c = req->conn;
	if (c && c->stall == GR_STALL_CHUNKS)
		gr_server_mark_ready(c->srv, c);
	if (req->region_left > 0 && !req->failed)
		gr_request_region_pump(req);
	gr_request_settle(req);
}

static void cumsum_chunk_done(gr_job *job)
{
	gr_chunk *ch = job->userdata;
	gr_request *req = ch->req;
	gr_cumsum_job *cj = job->cumsum;

	if (job->status < 0 && !req->failed) {
		log_warning("cumsum failed: %s", job->errmsg);
		/* not settled: this chunk is not out yet */
		gr_request_fail(req, /* reply= */ true, GR_ERR_INTERNAL, job->errmsg);
	}
	if (!cj->local_done) {
		cj->local_done = true;
		/* the input is read: its staging may serve the next chunk */
		gr_request_chunk_release(req, ch);
	} else {
		cj->final = true;
	}
	gr_request_cumsum_advance(req);
}

void gr_request_cumsum_reply(gr_request *req)
{
	gr_conn *c = req->conn;
	uint64_t count = request_count(req);
	int r = 0;

	if (req->scan.out_region)
		r = gr_msg_write_response_count(&c->wbuf, req->msgid, count);
	else if (count == 0)
		r = gr_msg_write_response_cumsum_header(&c->wbuf, req->msgid, 0);
	/* else every value went out as it was computed */
	if (r < 0) {
		gr_conn_close(c);
		return;
	}
	gr_server_mark_dirty(c->srv, c);
	gr_request_answered(req, count);
}
