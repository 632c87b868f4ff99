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

/* Start the CPU fallback unless it runs or failed to start; fb_lock held. */
void cuda_fallback_start(cuda_backend *be)
{
	char why[160];
	gr_backend *cpu = NULL;

	if (be->cpu || be->fb_why[0])
		return;
	if (be->cpu_pool) {
		cpu = be->cpu_pool; /* the daemon's CPU route: no threads of our own */
	} else if (gr_backend_cpu_new(&be->fbcfg, be->pub.cq, &cpu, why, sizeof(why)) < 0) {
		cuda_fmt(be->fb_why, sizeof(be->fb_why),
			 "no healthy CUDA device left, and the CPU fallback did not start: %s", why);
		log_error("%s", be->fb_why);
		return;
	}
	__atomic_store_n(&be->cpu, cpu, __ATOMIC_RELEASE);
	__atomic_store_n(&be->pub.ndevices, be->ndev + 1, __ATOMIC_RELEASE);
	log_warning("no CUDA device left in service: reducing on the CPU from now on");
}

/*
 * No device left in service: the CPU fallback takes the rest of b (none
 * of it pinned); without it, it fails.
 */
static void cuda_fallback(cuda_backend *be, cuda_batch *b)
{
	if (!be->fallback) {
		cuda_batch_rest(b, -EIO, "no healthy CUDA device left");
		return;
	}
	pthread_mutex_lock(&be->fb_lock);
	cuda_fallback_start(be); /* normally done by the last device to fail */
	if (be->cpu)
		be->cpu->ops->submit(be->cpu, cuda_batch_rest(b, 0, NULL));
	else
		cuda_batch_rest(b, -EIO, be->fb_why);
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
 * moments (the ops the CPU reduces of host data) of device memory, whose
 * elements lie on their own size's boundary (the kernels read whole
 * elements; the daemon copies others to the host first)?
 */
static bool cuda_job_alone_kernel(const gr_job *j)
{
	return j->on_device && gr_op_cpu_only(j->op) && !j->seg &&
	       (uintptr_t)j->data % gr_dtype_size(j->dtype) == 0;
}

/* Does j go to the segmented reduce, alone in its launch: a whole
 * request's segments of device memory that it takes? */
static bool cuda_job_segments(const gr_job *j)
{
	return j->seg && j->on_device && j->seg->first == 0 &&
	       gr_backend_segs_on_device(j->op, j->dtype, j->data, j->n, j->seg->nseg);
}

void cuda_submit(gr_backend *pub, gr_job *list)
{
	cuda_backend *be = (cuda_backend *)pub;
	uint32_t n = 0;
	int pin = -1;
	/* ops no kernel here reduces (argmin, argmax and moments but of
	 * device memory on their own size's boundary), segments but those
	 * of device memory that the segmented reduce takes, and prefix sums
	 * of host data fail: the daemon sends them to its CPU route */
	gr_job *nokernel = NULL, **nk_tail = &nokernel, **link = &list;
	while (*link) {
		gr_job *j = *link;
		bool nok = j->seg ? !cuda_job_segments(j)
				  : (gr_op_cpu_only(j->op) && !cuda_job_alone_kernel(j)) || j->cumsum;
		if (nok) {
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
			.op = (uint8_t)j->op, .dtype = (uint8_t)j->dtype, .alone = j->outside_staging,
			.on_device = j->on_device,
		};
		if (j->scan_out) {
			/* never answered early: its answer is the loop's */
			b->items[i].scan_out = j->scan_out;
			b->items[i].scan = 1;
			b->items[i].alone = 1;
		} else if (j->seg) {
			/* never answered early: its records are the loop's */
			b->items[i].seg = j->seg;
			b->items[i].segs = 1;
			b->items[i].alone = 1;
		} else if (cuda_job_alone_kernel(j)) {
			b->items[i].argm = j->op != GR_OP_MOMENTS;
			b->items[i].mom = j->op == GR_OP_MOMENTS;
			b->items[i].alone = 1;
		}
		b->jobs[i] = j;
	}
	b->device = pin;
	pub->batches++;
	pub->batched_jobs += n;
	cuda_route(be, b);
}
