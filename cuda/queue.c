/*
 * Queueing (any thread; the loop thread on the hot path): submit(), the
 * batches that carry its jobs' items to a device, routing them to the
 * device with least work, and what no device can take: failed, or
 * handed to the CPU fallback.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda-internal.h"
#include "util/log.h"
#include "math/segments.h"

/* Post a list of the daemon's jobs as failed (the loop thread's only). */
static void cuda_fail_list(cuda_backend *be, gr_job *list, int status, const char *why)
{
	while (list) {
		gr_job *next = list->next;
		cuda_job_fail(list, status, why);
		gr_completion_post(be->pub.cq, list);
		list = next;
	}
}

/* A batch for n items (the loop thread's): a spare one if it is large
 * enough, else a new one. NULL when out of memory. */
static cuda_batch *cuda_batch_get(cuda_backend *be, uint32_t n)
{
	cuda_batch *b = be->spare;
	if (b && b->cap >= n) {
		be->spare = b->next;
		be->nspare--;
	} else {
		uint32_t cap = 64;
		while (cap < n)
			cap *= 2;
		b = malloc(sizeof(*b) + (size_t)cap * (sizeof(cuda_item) + sizeof(gr_job *)));
		if (!b)
			return NULL;
		b->be = be;
		b->cap = cap;
		b->jobs = (gr_job **)(b->items + cap);
	}
	b->next = NULL;
	b->nitems = n;
	b->start = 0;
	b->settled = 0;
	return b;
}

/* The loop thread's side of cuda_batch_rest. */
static void cuda_batch_rest_run(gr_job *post)
{
	cuda_batch *b = post->userdata;
	uint32_t first = b->rest;
	if (!b->rest_handed) {
		for (uint32_t i = first; i < b->nitems; i++) {
			gr_job *j = b->jobs[i];
			cuda_job_fail(j, post->status, post->errmsg);
			j->done(j);
		}
	}
	cuda_batch_settle(b, b->nitems - first);
}

/*
 * The items of b from b->start on, which no device will run, come back
 * at once: failed (status < 0, why) or, with status 0, handed to the CPU
 * fallback, when this returns their jobs linked in order for it. Any
 * thread; b is not touched after this.
 */
static gr_job *cuda_batch_rest(cuda_batch *b, int status, const char *why)
{
	gr_job *head = NULL, **tail = &head;
	b->rest = b->start;
	b->rest_handed = status == 0;
	if (status == 0) {
		for (uint32_t i = b->start; i < b->nitems; i++) {
			*tail = b->jobs[i];
			tail = &b->jobs[i]->next;
		}
		*tail = NULL;
	} else {
		b->post.status = status;
		snprintf(b->post.errmsg, sizeof(b->post.errmsg), "%s", why);
	}
	b->post.done = cuda_batch_rest_run;
	b->post.userdata = b;
	gr_completion_post(b->be->pub.cq, &b->post);
	return head;
}

/*
 * Append batch b (its items from b->start on) to d's queue. Returns 0, or
 * -EIO when d is out of service (why says so) or -ESHUTDOWN when its
 * submission thread has ended; b is then still the caller's.
 */
static int cuda_dev_queue(cuda_dev *d, cuda_batch *b, char *why, size_t whylen)
{
	pthread_mutex_lock(&d->lock);
	if (!d->healthy || d->sdone) {
		int r = d->healthy ? -ESHUTDOWN : -EIO;
		if (r == -EIO)
			cuda_fmt(why, whylen, "device %d is out of service: %s", d->ordinal, d->health);
		else
			cuda_fmt(why, whylen, "device %d is shutting down", d->ordinal);
		pthread_mutex_unlock(&d->lock);
		return r;
	}
	b->next = NULL;
	if (d->qtail)
		d->qtail->next = b;
	else
		__atomic_store_n(&d->qhead, b, __ATOMIC_RELEASE);
	d->qtail = b;
	__atomic_add_fetch(&d->busy, b->nitems - b->start, __ATOMIC_RELAXED);
	if (d->swait_work)
		pthread_cond_signal(&d->scond);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/*
 * No device left in service: the mover takes the rest of b (none of it
 * pinned); without one, it fails.
 */
static void cuda_fallback(cuda_backend *be, cuda_batch *b)
{
	if (!be->mover) {
		cuda_batch_rest(b, -EIO, "no healthy CUDA device left");
		return;
	}
	pthread_mutex_lock(&be->fb_lock);
	cuda_fallback_start(be); /* normally done by the last device to fail */
	be->mover->move(be->mover->ctx, cuda_batch_rest(b, 0, NULL));
	pthread_mutex_unlock(&be->fb_lock);
}

/* Send the rest of b to its pinned device, or to the healthy one with
 * least work. */
static void cuda_route(cuda_backend *be, cuda_batch *b)
{
	char why[192];
	int pin = b->device;
	if (pin >= 0) {
		if ((unsigned)pin >= be->ndev) {
			cuda_fmt(why, sizeof(why), "no CUDA device %d", pin);
			cuda_batch_rest(b, -EIO, why);
			return;
		}
		if (cuda_dev_queue(&be->devs[pin], b, why, sizeof(why)) < 0)
			cuda_batch_rest(b, -EIO, why);
		return;
	}
	/* A device found failed while we queue drops out of the next round. */
	for (unsigned round = 0; round <= be->ndev; round++) {
		unsigned start = __atomic_load_n(&be->last, __ATOMIC_RELAXED);
		cuda_dev *best = NULL;
		uint64_t best_busy = 0;
		for (unsigned k = 0; k < be->ndev; k++) {
			cuda_dev *d = &be->devs[(start + k) % be->ndev];
			if (!__atomic_load_n(&d->healthy, __ATOMIC_RELAXED))
				continue;
			uint64_t busy = __atomic_load_n(&d->busy, __ATOMIC_RELAXED);
			if (!best || busy < best_busy) {
				best = d;
				best_busy = busy;
			}
		}
		if (!best)
			break;
		if (cuda_dev_queue(best, b, why, sizeof(why)) == 0) {
			__atomic_store_n(&be->last, (unsigned)best->ordinal, __ATOMIC_RELAXED);
			return;
		}
	}
	cuda_fallback(be, b);
}

/*
 * The queue of a device found out of service: batches pinned to a device
 * go there (and fail when it is this one), the rest to the other devices.
 */
void cuda_requeue(cuda_dev *d, cuda_batch *list)
{
	uint64_t moved = 0;
	while (list) {
		cuda_batch *b = list;
		list = b->next;
		moved += b->nitems - b->start;
		cuda_route(d->be, b);
	}
	__atomic_sub_fetch(&d->busy, moved, __ATOMIC_RELAXED);
}

/*
 * Does j go to a kernel of its own, alone in its launch: argmin, argmax or
 * moments, whose elements lie on their own size's boundary (the kernels
 * read whole elements: the daemon copies others of device memory to the
 * host first, and the CPU reduces others of host memory)? Device memory
 * is read where it lies, host memory copied over first, as any job's.
 */
static bool cuda_job_alone_kernel(const gr_job *j)
{
	return j->kind == GR_JOB_REDUCE && gr_op_own_kernel(j->op) &&
	       (uintptr_t)j->data % gr_dtype_size(j->dtype) == 0;
}

/* Which jobs of each kind a kernel here runs. */
static bool cuda_runs_reduce(const gr_job *j)
{
	/* argmin, argmax and moments: on their own size's boundary */
	return !gr_op_own_kernel(j->op) || cuda_job_alone_kernel(j);
}

/* the segmented reduce, alone in its launch: a whole request's segments
 * of device memory that it takes, or a piece of whole segments of host
 * memory (the daemon's cut, gr_segs_whole; cuda_takes() checks that it
 * fits the copy's buffer) */
static bool cuda_takes_segments(const gr_job *j)
{
	uint64_t s0, s1;

	if (j->where == GR_AT_DEVICE)
		return j->seg->first == 0 &&
		       gr_backend_segs_on_device(j->op, j->dtype, j->data, j->n, j->seg->nseg);
	return j->where == GR_AT_HOST && gr_segs_whole(j->seg, j->n, &s0, &s1) &&
	       gr_backend_segs_on_device(j->op, j->dtype, j->data, j->n, s1 - s0);
}

/* the prefix sums of device memory, into device memory, every dtype's,
 * its elements on their own size's boundary (the daemon refuses others);
 * and of a registered host region into a registered writable one, read
 * and written where they lie (the daemon sends only those: its
 * gr_request_cumsum_on_gpu), the values on an 8-byte boundary too */
static bool cuda_takes_scan(const gr_job *j)
{
	if ((uintptr_t)j->data % gr_dtype_size(j->dtype))
		return false;
	return j->where == GR_AT_DEVICE ||
	       (j->where == GR_AT_HOST && (uintptr_t)j->scan_out % 8 == 0);
}

static bool (*const cuda_runs_kind[GR_JOB_KINDS])(const gr_job *j) = {
	[GR_JOB_REDUCE] = cuda_runs_reduce,
	[GR_JOB_SEGMENTS] = cuda_takes_segments,
	[GR_JOB_SCAN] = cuda_takes_scan,
};

/* a narrow dtype's reduce (narrow.h): of device memory, where the
 * narrow kernel has the pair (the daemon's rule, backend.h, and the
 * kernels' own, which agree), on the elements' own size's boundary */
static bool cuda_runs_narrow(const gr_job *j)
{
	return j->kind == GR_JOB_REDUCE && j->where == GR_AT_DEVICE &&
	       gr_backend_dtype_on_device(j->op, j->dtype, j->data) &&
	       gr_narrow_has_kernel(j->op, j->dtype);
}

/* Whether a kernel here runs j at all: submit() fails the others. (A
 * narrow dtype's segments and prefix sums go by their kinds' rules, as
 * any dtype's.) */
static bool cuda_runs(const gr_job *j)
{
	if (gr_dtype_is_narrow(j->dtype) && j->kind == GR_JOB_REDUCE)
		return cuda_runs_narrow(j);
	return j->kind < GR_JOB_KINDS && cuda_runs_kind[j->kind] && cuda_runs_kind[j->kind](j);
}

bool cuda_takes(const gr_backend *b, const gr_job *j)
{
	/* a host region's prefix sums, once no device is left in service:
	 * the CPU engine's chunks, not a move of the whole (it has no such
	 * scan) */
	if (j->kind == GR_JOB_SCAN && j->where == GR_AT_HOST &&
	    __atomic_load_n(&((const cuda_backend *)b)->moving, __ATOMIC_ACQUIRE))
		return false;
	/* ... and gives the CPU's bits: the exact kernels read whole
	 * elements, and a float sum or sum of squares of host data off its
	 * size's boundary (which only a region's offset makes) would stay
	 * with the batch kernel, which rounds as it goes */
	if (j->kind == GR_JOB_REDUCE && j->where != GR_AT_DEVICE && gr_dtype_is_float(j->dtype) &&
	    (j->op == GR_OP_SUM || j->op == GR_OP_SUMSQ) &&
	    (uintptr_t)j->data % gr_dtype_size(j->dtype))
		return false;
	/* a piece of host segments is copied whole, as one launch's span */
	if (j->kind == GR_JOB_SEGMENTS && j->where == GR_AT_HOST &&
	    j->n > b->chunk_bytes / gr_dtype_size(j->dtype))
		return false;
	return cuda_runs(j);
}

void cuda_submit(gr_backend *pub, gr_job *list)
{
	cuda_backend *be = (cuda_backend *)pub;
	uint32_t n = 0;
	int pin = -1;
	/* jobs no kernel here runs fail: the scheduler sends them to the CPU
	 * engine (cuda_takes) */
	gr_job *nokernel = NULL, **nk_tail = &nokernel, **link = &list;
	while (*link) {
		gr_job *j = *link;
		if (!cuda_runs(j)) {
			*link = j->next;
			j->next = NULL;
			*nk_tail = j;
			nk_tail = &j->next;
		} else {
			link = &j->next;
			n++;
		}
	}
	if (nokernel)
		cuda_fail_list(be, nokernel, -EINVAL,
			       "the CUDA backend has no kernel for this op (the CPU reduces it)");
	if (!n)
		return;
	cuda_batch *b = cuda_batch_get(be, n);
	if (!b) {
		cuda_fail_list(be, list, -ENOMEM, "out of memory");
		return;
	}
	uint32_t i = 0;
	for (gr_job *j = list; j; j = j->next, i++) {
		j->status = 0;
		if (!be->early)
			j->early = NULL;
		if (pin < 0 && j->device >= 0)
			pin = j->device;
		b->items[i] = (cuda_item){
			.data = j->data, .n = j->n, .early = j->early, .tag = j->tag,
			.op = (uint8_t)j->op, .dtype = (uint8_t)j->dtype,
			.alone = j->where != GR_AT_STAGING, .on_device = j->where == GR_AT_DEVICE,
		};
		if (j->kind == GR_JOB_SCAN) {
			/* never answered early: its answer is the loop's; read
			 * and written in place, a host region's too (over PCIe,
			 * registered memory), never copied */
			b->items[i].on_device = 1;
			b->items[i].scan_out = j->scan_out;
			b->items[i].kind = CUDA_ITEM_SCAN;
			b->items[i].alone = 1;
		} else if (j->kind == GR_JOB_SEGMENTS) {
			/* never answered early: its records are the loop's */
			b->items[i].seg = j->seg;
			b->items[i].kind = CUDA_ITEM_SEGMENTS;
			b->items[i].alone = 1;
		} else if (gr_dtype_is_narrow(j->dtype)) {
			b->items[i].kind = CUDA_ITEM_NARROW;
			b->items[i].alone = 1;
		} else if (cuda_job_alone_kernel(j)) {
			b->items[i].kind = j->op == GR_OP_MOMENTS ? CUDA_ITEM_MOMENTS : CUDA_ITEM_ARGM;
			b->items[i].alone = 1;
		}
		b->jobs[i] = j;
	}
	b->device = pin;
	pub->batches++;
	pub->batched_jobs += n;
	cuda_route(be, b);
}
