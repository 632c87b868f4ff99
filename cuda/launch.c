/*
 * Launching: each device's submission thread, which takes batches off
 * its queue and sends them to the GPU, as many items to one launch as
 * fit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda-internal.h"
#include "cuda/scan.h"

#define CUDA_TRY(call_name, kind, expr)                                              \
	do {                                                                          \
		bool inj_ = (kind) >= 0 && cuda_fault_hit(d, (kind));                 \
		cudaError_t e_ = inj_ ? cudaErrorLaunchFailure : (expr);              \
		if (e_ != cudaSuccess) {                                              \
			cuda_errfmt(why, sizeof(why), d, call_name, e_, inj_);        \
			goto fail;                                                    \
		}                                                                     \
	} while (0)

/*
 * The prefix sums of an item in device memory: one launch (scan.h), on
 * the context's workspace, grown to the largest count seen. The context
 * runs one launch at a time, so its workspace serves one at a time.
 */
static cudaError_t cuda_scan(cuda_ctx *c, const cuda_item *it)
{
	size_t need = gr_scan_workspace_bytes(it->n);
	cudaError_t e;

	if (need > c->scan_ws_bytes) {
		/* the last launch on it is done: the context is free */
		cudaFree(c->scan_ws);
		c->scan_ws = NULL;
		c->scan_ws_bytes = 0;
		if ((e = cudaMalloc(&c->scan_ws, need)) != cudaSuccess)
			return e;
		c->scan_ws_bytes = need;
		c->scan_epoch = UINT32_MAX;
	}
	if (c->scan_epoch == UINT32_MAX) {
		/* new, or every epoch used: zero it again */
		if ((e = cudaMemsetAsync(c->scan_ws, 0, c->scan_ws_bytes, c->stream)) != cudaSuccess)
			return e;
		c->scan_epoch = 0;
	}
	return (cudaError_t)gr_scan_launch(it->dtype, it->data, it->n, it->scan_out, c->scan_ws,
					   ++c->scan_epoch, c->stream);
}

/* argmin or argmax of an item in device memory, into the context's
 * pinned result */
static cudaError_t cuda_argm(cuda_ctx *c, const cuda_item *it)
{
	c->argm = true;
	return (cudaError_t)gr_argm_launch(it->dtype, it->op == GR_OP_ARGMAX, it->data, it->n,
					   c->hargm_dev, c->argm_ws, (int)c->dev->sms, c->stream);
}

/* moments of an item in device memory, into the context's pinned sums */
static cudaError_t cuda_moments(cuda_ctx *c, const cuda_item *it)
{
	c->mom = true;
	return (cudaError_t)gr_moments_launch(it->dtype, it->data, it->n, c->mom_scratch,
					      c->hmom_dev, (int)c->dev->sms, c->stream);
}

/* a narrow dtype's reduce of device memory: its exact sum goes where a
 * lone float sum's does (the launch's one place, xslot 0), argmin's and
 * argmax's where cuda_argm's do, moments' sums where cuda_moments' do,
 * any other raw result where the batch kernel's first does */
static cudaError_t cuda_narrow(cuda_ctx *c, const cuda_item *it)
{
	uint64_t *raw = c->hout_dev;
	if (it->op == GR_OP_MOMENTS) {
		c->mom = true;
		return (cudaError_t)gr_narrow_moments_launch(it->dtype, it->data, it->n,
							     c->mom_scratch, c->hmom_dev,
							     (int)c->dev->sms, c->stream);
	}
	if (gr_narrow_exact(it->op, it->dtype)) {
		c->xslot[0] = 0;
		c->nx = 1;
	} else if (gr_op_has_index((gr_op)it->op)) {
		/* argmin, argmax: value and index where cuda_argm's go */
		c->argm = true;
		raw = (uint64_t *)c->hargm_dev;
	}
	return (cudaError_t)gr_narrow_launch(it->op, it->dtype, it->data, it->n, c->dxscratch, raw,
					     c->hxout_dev, (int)c->dev->sms, c->stream);
}

/* The kinds launched alone, each by its own launcher, with the call's name
 * for errors; an empty item launches only where empty says so. */
static const struct {
	cudaError_t (*launch)(cuda_ctx *c, const cuda_item *it);
	const char *name;
	bool empty;
} cuda_launchers[CUDA_ITEM_KINDS] = {
	[CUDA_ITEM_SCAN] = {cuda_scan, "cudaLaunchKernel (prefix sum)", true},
	[CUDA_ITEM_ARGM] = {cuda_argm, "cudaLaunchKernel (argmin/argmax)", false},
	[CUDA_ITEM_MOMENTS] = {cuda_moments, "cudaLaunchKernel (moments)", false},
	[CUDA_ITEM_SEGMENTS] = {cuda_segs_launch, "cudaLaunchKernel (segmented reduce)", false},
	[CUDA_ITEM_NARROW] = {cuda_narrow, "cudaLaunchKernel (narrow dtype)", false},
};

/*
 * Launch on context c the longest run of items, from batch b's start on,
 * that fits one launch, and return where the next launch begins (b or a
 * later batch, its start moved on), NULL when nothing is left. A run
 * that needs no GPU work comes back at once; a failure takes the device
 * out of service and fails the run's jobs with -EIO.
 */
static cuda_batch *cuda_launch(cuda_ctx *c, cuda_batch *b)
{
	cuda_dev *d = c->dev;
	cuda_backend *be = d->be;
	char why[192];
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	uint32_t nsegs = 0, nruns = 0, nx = 0;
	uint64_t units = 0, xunits = 0;
	bool plain = false; /* the batch kernel has elements to reduce */
	bool alone = false; /* the run is one item outside staging */
	bool on_device = false; /* ... in device memory, read in place */
	const cuda_item *single = NULL; /* ... of a kind launched alone */

	c->span = 0;
	c->argm = false;
	c->mom = false;
	c->segs = NULL;

	/* the run: segment table filled as it grows, offsets once lo is known */
	while (b) {
		uint32_t first = b->start, i;
		for (i = first; i < b->nitems; i++) {
			const cuda_item *it = &b->items[i];
			/* a float sum rides in the exact kernel's table, and
			 * as an empty segment in the batch kernel's */
			uint32_t exact = it->n ? cuda_item_exact(it) : 0;
			uint64_t u = exact ? 0 : cuda_item_units(it);
			if (nsegs == be->cap_segs || units + u > be->cap_units ||
			    (exact && nx == CUDA_EXACT_SEGS))
				break;
			/* memory outside staging is copied on its own: a span
			 * over it and anything else may cover pages mapped by
			 * no one, or not pinned */
			if (nsegs > 0 && (it->alone || alone))
				break;
			alone = it->alone;
			on_device = it->on_device;
			single = it->kind != CUDA_ITEM_BATCH ? it : NULL;
			if (it->n) {
				uintptr_t s = (uintptr_t)it->data;
				uintptr_t e = s + it->n * gr_dtype_size(it->dtype);
				uintptr_t nlo = s < lo ? s : lo, nhi = e > hi ? e : hi;
				if (!on_device && nhi - (nlo & ~(uintptr_t)15) > c->dbuf_bytes)
					break;
				lo = nlo;
				hi = nhi;
			}
			gr_kseg *sg = &c->hsegs[nsegs];
			c->xslot[nsegs++] = exact ? nx : CUDA_NOT_EXACT;
			sg->offset = (uintptr_t)it->data;
			sg->n = exact || it->kind != CUDA_ITEM_BATCH ? 0 : it->n;
			sg->opdt = GR_KSEG_OPDT(it->op, it->dtype);
			sg->unit_rows = sg->n ? gr_kernel_unit_rows(it->n, gr_dtype_size(it->dtype)) : 0;
			sg->first_unit = (uint32_t)units;
			sg->units = (uint32_t)u;
			units += u;
			plain |= sg->n > 0;
			if (exact) {
				gr_exact_seg *xs = &c->hxsegs[nx++];
				xs->offset = (uintptr_t)it->data;
				xs->n = it->n;
				xs->dtype = exact;
				xs->first_unit = (uint32_t)xunits;
				xs->units = gr_exact_units((int)exact, it->n);
				xs->pad = 0;
				xunits += xs->units;
			}
		}
		if (i > first)
			c->runs[nruns++] = (cuda_run){.b = b, .first = first, .count = i - first};
		b->start = i;
		if (i < b->nitems)
			break;
		b = b->next;
	}
	if (!nsegs) {
		/* the first job alone does not fit: it cannot have come from
		 * one staging slot */
		c->runs[0] = (cuda_run){.b = b, .first = b->start, .count = 1};
		c->nruns = 1;
		c->njobs = 1;
		cuda_batch *rest = ++b->start < b->nitems ? b : b->next;
		cuda_ctx_post(c, -EINVAL, "job larger than a staging slot");
		return rest;
	}
	/* b is where the next launch begins; once this one is out, another
	 * thread may finish it, and the batches it took may be gone */
	c->nruns = nruns;
	c->njobs = nsegs;
	c->nx = nx;
	__atomic_add_fetch(&d->jobs, nsegs, __ATOMIC_RELAXED);
	if (hi == 0) {
		/* nothing but empty jobs: no GPU work */
		cuda_finish(c);
		return b;
	}
	uintptr_t lo16 = lo & ~(uintptr_t)15;
	for (uint32_t i = 0; i < nsegs; i++)
		c->hsegs[i].offset = c->hsegs[i].n ? c->hsegs[i].offset - lo16 : 0;
	for (uint32_t i = 0; i < nx; i++)
		c->hxsegs[i].offset -= lo16;

	/* device memory is read where it lies; host memory is copied over */
	const void *base = (const void *)lo16;
	if (!on_device) {
		c->span = hi - lo16;
		base = c->dbuf;
		CUDA_TRY("cudaMemcpyAsync (host to device)", FAULT_H2D,
			 cudaMemcpyAsync(c->dbuf, (const void *)lo16, hi - lo16,
					 cudaMemcpyHostToDevice, c->stream));
	}
	if (single && (single->n || cuda_launchers[single->kind].empty)) {
		/* its elements where the kernel reads them: in place, or in
		 * the copy */
		cuda_item one = *single;
		if (!on_device && one.n)
			one.data = (const uint8_t *)base + ((uintptr_t)single->data - lo16);
		CUDA_TRY(cuda_launchers[single->kind].name, FAULT_LAUNCH,
			 cuda_launchers[single->kind].launch(c, &one));
	}
	if (plain && nsegs <= GR_KERNEL_PARAM_SEGS) {
		/* the common case: the table rides in the launch itself */
		CUDA_TRY("cudaLaunchKernel", FAULT_LAUNCH,
			 (cudaError_t)gr_kernel_launch_batch_params(
				 base, c->hsegs, nsegs, (uint32_t)units, c->dpartials,
				 c->dtickets, c->hout_dev, (int)d->sms, c->stream));
	} else if (plain) {
		CUDA_TRY("cudaMemcpyAsync (segment table)", -1,
			 cudaMemcpyAsync(c->dsegs, c->hsegs, nsegs * sizeof(gr_kseg),
					 cudaMemcpyHostToDevice, c->stream));
		CUDA_TRY("cudaLaunchKernel", FAULT_LAUNCH,
			 (cudaError_t)gr_kernel_launch_batch(base, c->dsegs, nsegs, (uint32_t)units,
							     c->dpartials, c->dtickets, c->hout_dev,
							     (int)d->sms, c->stream));
	}
	if (nx == 1) {
		/* one float sum (a lone request, a region, device memory): the
		 * single-array launch, with no table to copy ahead of it, and
		 * its kernels for latency and for large arrays (exact.h); it
		 * writes the sum into pinned host memory itself */
		const gr_exact_seg *xs = &c->hxsegs[0];
		CUDA_TRY("cudaLaunchKernel (exact sum)", plain ? -1 : FAULT_LAUNCH,
			 (cudaError_t)gr_exact_launch_single((int)xs->dtype,
							     (const char *)base + xs->offset, xs->n,
							     c->dxscratch, c->hxout_dev, (int)d->sms,
							     c->stream));
	} else if (nx) {
		/* the float sums; a launch counts once for fault injection */
		CUDA_TRY("cudaMemcpyAsync (exact segment table)", -1,
			 cudaMemcpyAsync(c->dxsegs, c->hxsegs, nx * sizeof(gr_exact_seg),
					 cudaMemcpyHostToDevice, c->stream));
		CUDA_TRY("cudaLaunchKernel (exact sum)", plain ? -1 : FAULT_LAUNCH,
			 (cudaError_t)gr_exact_launch_batch(base, c->dxsegs, nx, (uint32_t)xunits,
							    c->dxscratch, c->dxout, (int)d->sms,
							    c->stream));
		CUDA_TRY("cudaMemcpyAsync (device to host)", plain ? -1 : FAULT_D2H,
			 cudaMemcpyAsync(c->hxout, c->dxout, nx * sizeof(gr_exact_sum),
					 cudaMemcpyDeviceToHost, c->stream));
	}
	CUDA_TRY("cudaEventRecord", -1, cudaEventRecord(c->done, c->stream));
	/* and the word the completion thread looks at first; without it the
	 * event alone tells */
	c->flagged = false;
	if (d->be->write_value &&
	    d->be->write_value(c->stream, (unsigned long long)(uintptr_t)c->flag_dev, c->seq + 1,
			       0) == 0) {
		c->seq++;
		c->flagged = true;
	}
	c->t_launch = cuda_now_ns();

	/* in flight only now that its event is recorded: an event never
	 * recorded reads as complete */
	pthread_mutex_lock(&d->lock);
	c->next = NULL;
	if (d->inflight_tail)
		d->inflight_tail->next = c;
	else
		__atomic_store_n(&d->inflight, c, __ATOMIC_RELEASE);
	d->inflight_tail = c;
	if (d->cwaiting)
		pthread_cond_signal(&d->ccond);
	pthread_mutex_unlock(&d->lock);
	return b;

fail:
	cuda_dev_fail(d, why);
	cuda_ctx_post(c, -EIO, why);
	return b;
}

/*
 * With d->lock held: wait until there are queued jobs (want_ctx false) or
 * a free context (want_ctx true), or the device stops or fails. Polls
 * without the lock for up to the spin time first, unless !spin_ok (after
 * a long launch, what comes next is far off). Callers re-check.
 */
static void cuda_sub_wait(cuda_dev *d, bool want_ctx, bool spin_ok)
{
	uint64_t spin = spin_ok ? d->be->spin_ns : 0;
	if (spin) {
		pthread_mutex_unlock(&d->lock);
		uint64_t t0 = cuda_now_ns();
		for (unsigned k = 1;; k++) {
			if (want_ctx ? __atomic_load_n(&d->free_list, __ATOMIC_ACQUIRE) != NULL
				     : __atomic_load_n(&d->qhead, __ATOMIC_ACQUIRE) != NULL)
				break;
			if (__atomic_load_n(&d->stop, __ATOMIC_RELAXED) ||
			    !__atomic_load_n(&d->healthy, __ATOMIC_RELAXED))
				break;
			cuda_relax();
			if (!(k & 31) && cuda_now_ns() - t0 >= spin)
				break;
		}
		pthread_mutex_lock(&d->lock);
	}
	if (want_ctx) {
		while (!d->free_list && d->healthy) {
			d->swait_ctx = true;
			pthread_cond_wait(&d->scond, &d->lock);
			d->swait_ctx = false;
		}
	} else {
		while (!d->qhead && !d->stop) {
			d->swait_work = true;
			pthread_cond_wait(&d->scond, &d->lock);
			d->swait_work = false;
		}
	}
}

void *cuda_submitter(void *arg)
{
	cuda_dev *d = arg;
	/* taken from the queue, not yet launched: carry from its start on */
	cuda_batch *carry = NULL, *carry_tail = NULL;
	bool last_big = false; /* the last launch was long: wait without spinning */
	cudaError_t e = cudaSetDevice(d->ordinal);
	if (e != cudaSuccess) {
		char why[192];
		cuda_errfmt(why, sizeof(why), d, "cudaSetDevice", e, false);
		cuda_dev_fail(d, why);
	}

	pthread_mutex_lock(&d->lock);
	for (;;) {
		if (d->qhead) {
			if (carry_tail)
				carry_tail->next = d->qhead;
			else
				carry = d->qhead;
			carry_tail = d->qtail;
			__atomic_store_n(&d->qhead, NULL, __ATOMIC_RELAXED);
			d->qtail = NULL;
		}
		if (!carry) {
			if (d->stop)
				break;
			cuda_sub_wait(d, false, !last_big);
			continue;
		}
		if (!d->healthy) {
			pthread_mutex_unlock(&d->lock);
			cuda_requeue(d, carry);
			carry = carry_tail = NULL;
			pthread_mutex_lock(&d->lock);
			continue;
		}
		cuda_ctx *c = d->free_list;
		if (!c) {
			/* the queue grows meanwhile: the next launch takes more */
			cuda_sub_wait(d, true, !last_big);
			continue;
		}
		__atomic_store_n(&d->free_list, c->next, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&d->lock);
		carry = cuda_launch(c, carry);
		/* only this thread writes span, and it reuses c itself */
		last_big = c->span > CUDA_SPIN_SPAN_MAX;
		if (!carry)
			carry_tail = NULL;
		pthread_mutex_lock(&d->lock);
	}
	d->sdone = true;
	pthread_mutex_unlock(&d->lock);
	return NULL;
}
