/*
 * Requests on GPU memory that no GPU kernel reduces (a narrow dtype's
 * elements off their own size's boundary; moments of segments of a
 * narrow dtype, moments of more
 * segments than gr_backend_segs_moments_max(), segments of more than
 * GR_BACKEND_SEGS_MAX_ELEMS elements, and argmin,
 * argmax, moments and segments of elements off their own size's
 * boundary, which the GPU's kernels cannot read): each chunk is first
 * copied to host memory, on a CPU worker of the route (the CUDA backend's
 * copy_to_host), then reduced there on the CPU route as the same chunk of
 * a shared-memory region would be. The chunks are cut where a host
 * region's are, so every bit of the answer is the same as for the same
 * elements in host memory.
 * The copy lands in a staging slot, pinned memory the GPU writes by DMA,
 * or, when none is free, in memory of the chunk's own (slower: the driver
 * copies through buffers of its own then).
 */
#include <stdint.h>
#include <stdlib.h>

#include "daemon/conn.h"
#include "daemon/server.h"

bool gr_request_via_host(const gr_request *req)
{
	if (!req->region || req->region->device < 0 || req->kind == GR_REQUEST_CUMSUM)
		return false;
	/* argmin, argmax and moments have GPU kernels of their own, which
	 * read whole elements; so do segments, as one
	 * job (every chunk of a request moves on by whole elements, so
	 * region_next is on the boundary when its start is) */
	size_t size = gr_dtype_size(req->dtype);
	if (req->kind == GR_REQUEST_SEGMENTS)
		return !gr_backend_segs_on_device(req->op, req->dtype, req->region_next,
						  req->data_bytes / size, req->seg.segs->nseg);
	if (!gr_backend_dtype_on_device(req->op, req->dtype, req->region_next))
		return true;
	return gr_op_own_kernel(req->op) && (uintptr_t)req->region_next % size;
}

/* Where the chunk's copy goes: its staging slot, else its own memory. */
static void *fetch_to(const gr_chunk *ch)
{
	return ch->slot ? (void *)ch->slot->base : ch->host_copy;
}

/* On a CPU worker: the copy. */
static int fetch_run(gr_job *job)
{
	gr_chunk *ch = job->userdata;
	gr_backend *be = ch->req->srv->backend;

	return be->ops->copy_to_host(be, ch->fetch_device, fetch_to(ch), job->data,
				     job->n * gr_dtype_size(job->dtype), job->errmsg,
				     sizeof(job->errmsg));
}

/* On the loop thread: the copy is in; reduce it, on the CPU route. */
static void fetch_done(gr_job *job)
{
	gr_chunk *ch = job->userdata;
	gr_request *req = ch->req;

	/* the job it was before the copy, now of host data */
	job->kind = ch->fetch_kind;
	if (job->kind == GR_JOB_SEGMENTS)
		job->seg = ch->fetch_seg;
	job->where = GR_AT_HOST;
	job->done = gr_request_chunk_done;
	if (job->status < 0 || req->failed) {
		/* chunk_done fails the request, or drops the chunk */
		job->done(job);
		return;
	}
	job->data = fetch_to(ch);
	/* the CPU's, where a GPU kernel would run it too (argmin, argmax and
	 * moments, now on their boundary): the copy is not sent back */
	if (req->srv->sched.cpu) {
		gr_sched_route(&req->srv->sched, job);
		return;
	}
	gr_server_submit(req->srv, job, req->data_bytes);
}

bool gr_request_fetch_job(gr_request *req, gr_chunk *ch)
{
	size_t bytes = ch->job.n * gr_dtype_size(ch->job.dtype);

	if (!req->srv->backend->ops->copy_to_host)
		return false;
	ch->slot = bytes <= req->srv->staging.slot_bytes ? gr_staging_alloc_chunk(&req->srv->staging)
							 : NULL;
	if (!ch->slot && posix_memalign(&ch->host_copy, 64, bytes ? bytes : 64) != 0) {
		ch->host_copy = NULL;
		return false;
	}
	ch->fetch_device = req->region->device;
	/* a job of the CPU's until it is reduced, with no device (and
	 * never answered early: gr_request_submit_filling) */
	ch->fetch_kind = ch->job.kind;
	ch->fetch_seg = ch->job.kind == GR_JOB_SEGMENTS ? ch->job.seg : NULL;
	ch->job.device = -1;
	ch->job.where = GR_AT_HOST;
	ch->job.kind = GR_JOB_RUN;
	ch->job.run = fetch_run;
	ch->job.done = fetch_done;
	return true;
}
