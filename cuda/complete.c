/*
 * Completion: finishing a launch's jobs (its results copied out, early
 * answers, the rest posted to the loop thread, which fills them in), and
 * each device's completion thread, which finds the launches that are done.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda-internal.h"
#include "cuda/exact-partial.h"

static void cuda_ctx_release(cuda_ctx *c);

/* ---- finishing jobs ---- */

/* One job's result from the kernel's raw value (its bits in the partial's
 * v), or from its exact sum xs or its moments sums mom when it has them,
 * status 0. What is already
 * right is only read, not written, and the exact accumulator's words are
 * not touched unless its flags say they are in use (math/reduce.h). */
static void cuda_fill(gr_job *j, uint64_t raw, const gr_exact_sum *xs,
		      const gr_moments_sums *mom)
{
	if (j->early) {
		/* answered already (cuda_answer): done() reads the status */
	} else if (j->n == 0 || j->kind == GR_JOB_SEGMENTS) {
		/* segments: the records are written (segs.c), the head is none */
		gr_partial_identity(j->op, j->dtype, &j->result);
	} else if (mom) {
		cuda_moments_partial(mom, j->dtype, j->n, &j->result);
	} else if (xs) {
		cuda_exact_partial(xs, j->op, j->dtype, j->n, &j->result);
	} else {
		/* a partial filled by hand starts from zero: the exact
		 * accumulator must not keep an earlier value */
		if (j->result.xflags)
			memset(&j->result, 0, sizeof(j->result));
		j->result.count = j->n;
		j->result.v.u = raw;
	}
	if (j->status)
		j->status = 0;
}

/* On the loop thread: finish a launch's jobs (cuda_done). */
static void cuda_done_run(gr_job *post)
{
	cuda_done *dn = post->userdata;
	size_t k = 0;
	/* the launch's busy time, each job's part by its bytes */
	double per_byte = 0;
	if (dn->busy_ns && post->status >= 0) {
		uint64_t bytes = 0;
		for (uint32_t r = 0; r < dn->nruns; r++)
			for (uint32_t i = 0; i < dn->runs[r].count; i++) {
				const gr_job *j = dn->runs[r].b->jobs[dn->runs[r].first + i];
				bytes += (uint64_t)j->n * gr_dtype_size(j->dtype);
			}
		per_byte = bytes ? (double)dn->busy_ns / (double)bytes : 0;
	}
	for (uint32_t r = 0; r < dn->nruns; r++) {
		const cuda_run *run = &dn->runs[r];
		gr_job **jobs = run->b->jobs + run->first;
		for (uint32_t i = 0; i < run->count; i++, k++) {
			gr_job *j = jobs[i];
			if (i + 1 < run->count)
				__builtin_prefetch(jobs[i + 1], 1);
			j->busy_ns = (uint64_t)(per_byte * (double)j->n * gr_dtype_size(j->dtype));
			j->engine = GR_ENGINE_GPU;
			if (post->status < 0) {
				cuda_job_fail(j, post->status, post->errmsg);
			} else {
				cuda_fill(j, dn->raw[k], dn->xslot[k] == CUDA_NOT_EXACT
								 ? NULL
								 : &dn->xout[dn->xslot[k]],
					  j->op == GR_OP_MOMENTS ? dn->mom : NULL);
				/* alone in its launch: the launch's index */
				if ((j->op == GR_OP_ARGMIN || j->op == GR_OP_ARGMAX) && j->n)
					j->result.index = dn->argm_index;
			}
			j->done(j);
		}
		cuda_batch_settle(run->b, run->count);
	}
	if (dn->ctx)
		cuda_ctx_release(dn->ctx);
	else
		free(dn);
}

/* Answer early the jobs of a launch that ask to be (backend.h). */
static void cuda_answer(cuda_backend *be, const cuda_done *dn)
{
	const cuda_run *runs = dn->runs;
	uint32_t nruns = dn->nruns;
	bool any = false;
	size_t k = 0;
	if (!be->early)
		return;
	for (uint32_t r = 0; r < nruns; r++) {
		const cuda_item *it = runs[r].b->items + runs[r].first;
		for (uint32_t i = 0; i < runs[r].count; i++, k++) {
			if (it[i].kind == CUDA_ITEM_SCAN || it[i].kind == CUDA_ITEM_SEGMENTS ||
			    !it[i].early)
				continue;
			gr_partial p;
			if (dn->xslot[k] != CUDA_NOT_EXACT) {
				cuda_exact_partial(&dn->xout[dn->xslot[k]], (gr_op)it[i].op,
						   (gr_dtype)it[i].dtype, it[i].n, &p);
			} else {
				/* a partial filled by hand: never combined
				 * into, so its exact accumulator is not read
				 * (reduce.h) */
				p.count = it[i].n;
				p.v.u = dn->raw[k];
				p.xflags = 0;
				/* argmin, argmax (of any dtype): alone in the
				 * launch */
				p.index = gr_op_has_index((gr_op)it[i].op) ? dn->argm_index : 0;
			}
			be->early->answer(it[i].early, it[i].tag, (gr_op)it[i].op,
					  (gr_dtype)it[i].dtype, &p);
			any = true;
		}
	}
	if (any)
		be->early->end();
}

static void cuda_done_init(cuda_done *dn, cuda_ctx *own, const cuda_run *runs, uint32_t nruns,
			   const uint64_t *raw, const uint32_t *xslot, const gr_exact_sum *xout,
			   int status, const char *why)
{
	dn->ctx = own;
	dn->nruns = nruns;
	dn->runs = runs;
	dn->raw = raw;
	dn->xslot = xslot;
	dn->xout = xout;
	dn->mom = NULL;
	dn->busy_ns = 0;
	dn->post.status = status;
	if (status < 0)
		snprintf(dn->post.errmsg, sizeof(dn->post.errmsg), "%s", why);
	dn->post.done = cuda_done_run;
	dn->post.userdata = dn;
}

/*
 * Hand a launch's jobs back through the context's own post: failed
 * (status < 0, why), or with the results in hout. The loop thread gives
 * the context back after.
 */
void cuda_ctx_post(cuda_ctx *c, int status, const char *why)
{
	cuda_done_init(c->own, c, c->runs, c->nruns, c->hout, c->xslot, c->hxout, status, why);
	gr_completion_post(c->dev->be->pub.cq, &c->own->post);
}

/*
 * A launch ran: copy its runs and results out, give the context back,
 * answer what asks to be answered early, and hand the rest to the loop.
 * (Jobs of no elements take no raw value: hout's entries for them are
 * not read.)
 */
void cuda_finish(cuda_ctx *c)
{
	cuda_backend *be = c->dev->be;
	uint64_t busy_ns = c->busy_ns;
	c->busy_ns = 0;
	/* an argmin's or argmax's value goes back as its raw value */
	uint64_t argm_index = c->argm ? c->hargm->index : 0;
	if (c->segs)
		cuda_segs_finish(c);
	if (c->argm)
		c->hout[0] = c->hargm->value;
	size_t runs_bytes = (size_t)c->nruns * sizeof(cuda_run);
	size_t raw_bytes = (size_t)c->njobs * sizeof(uint64_t);
	size_t xout_bytes = (size_t)c->nx * sizeof(gr_exact_sum);
	size_t xslot_bytes = (size_t)c->njobs * sizeof(uint32_t);
	size_t mom_bytes = c->mom ? sizeof(gr_moments_sums) : 0;
	/* the exact sums and moments' first after the header: they want
	 * 8-byte alignment */
	cuda_done *dn =
		malloc(sizeof(*dn) + mom_bytes + xout_bytes + runs_bytes + raw_bytes + xslot_bytes);
	if (!dn) {
		/* no copy: the jobs go back through the context's own post */
		cuda_done_init(c->own, c, c->runs, c->nruns, c->hout, c->xslot, c->hxout, 0, NULL);
		c->own->argm_index = argm_index;
		c->own->mom = c->mom ? c->hmom : NULL;
		c->own->busy_ns = busy_ns;
		cuda_answer(be, c->own);
		gr_completion_post(be->pub.cq, &c->own->post);
		return;
	}
	gr_moments_sums *mom = (gr_moments_sums *)(dn + 1);
	gr_exact_sum *xout = (gr_exact_sum *)((uint8_t *)mom + mom_bytes);
	cuda_run *runs = (cuda_run *)((uint8_t *)xout + xout_bytes);
	uint64_t *raw = (uint64_t *)((uint8_t *)runs + runs_bytes);
	uint32_t *xslot = (uint32_t *)((uint8_t *)raw + raw_bytes);
	memcpy(xout, c->hxout, xout_bytes);
	memcpy(runs, c->runs, runs_bytes);
	memcpy(raw, c->hout, raw_bytes);
	memcpy(xslot, c->xslot, xslot_bytes);
	if (mom_bytes)
		memcpy(mom, c->hmom, mom_bytes);
	cuda_done_init(dn, NULL, runs, c->nruns, raw, xslot, xout, 0, NULL);
	dn->argm_index = argm_index;
	dn->mom = mom_bytes ? mom : NULL;
	dn->busy_ns = busy_ns;
	cuda_ctx_release(c);
	/* the replies' sends come after the context is back */
	cuda_answer(be, dn);
	gr_completion_post(be->pub.cq, &dn->post);
}

/* Give a context back to its submission thread; its jobs are gone. */
static void cuda_ctx_release(cuda_ctx *c)
{
	cuda_dev *d = c->dev;
	__atomic_sub_fetch(&d->busy, c->njobs, __ATOMIC_RELAXED);
	c->njobs = 0;
	c->nruns = 0;
	pthread_mutex_lock(&d->lock);
	c->next = d->free_list;
	__atomic_store_n(&d->free_list, c, __ATOMIC_RELEASE);
	if (d->swait_ctx)
		pthread_cond_signal(&d->scond);
	pthread_mutex_unlock(&d->lock);
}

/* ---- completion (the completion thread) ---- */

/*
 * Finish the contexts of list (oldest first) whose events are done, and
 * return those still out. oldest_e: the oldest one's state when the
 * caller already knows it (from oldest_call, its long wait), else
 * cudaErrorNotReady. *progress tells whether any finished.
 */
static cuda_ctx *cuda_reap(cuda_dev *d, cuda_ctx *list, cudaError_t oldest_e, const char *oldest_call,
			   bool *progress)
{
	cuda_ctx *keep = NULL, **keep_end = &keep;
	bool first = true;
	*progress = false;
	while (list) {
		cuda_ctx *c = list;
		list = c->next;
		c->next = NULL;
		const char *call = "cudaEventQuery";
		cudaError_t e;
		if (first && oldest_e != cudaErrorNotReady) {
			e = oldest_e;
			call = oldest_call;
		} else if (c->flagged && __atomic_load_n(c->flag, __ATOMIC_ACQUIRE) == c->seq) {
			/* the stream got past the launch and its event */
			e = cudaSuccess;
		} else if (c->flagged && cuda_now_ns() - c->t_launch < CUDA_FLAG_ALONE_NS) {
			e = cudaErrorNotReady;
		} else {
			/* no word, or none for a while: a launch that failed
			 * never writes it, its event says why */
			e = cudaEventQuery(c->done);
		}
		first = false;
		if (e == cudaErrorNotReady) {
			*keep_end = c;
			keep_end = &c->next;
			continue;
		}
		*progress = true;
		bool inj = false;
		if (e == cudaSuccess && cuda_fault_hit(d, FAULT_SYNC)) {
			inj = true;
			e = cudaErrorLaunchFailure;
			call = "cudaEventQuery";
		}
		if (e == cudaSuccess) {
			/* the device was busy with it from its launch, or the
			 * end of the launch before, to now (a device's launches
			 * end in the order they went out) */
			uint64_t now = cuda_now_ns(), from = c->t_launch;
			if (d->finish_ns > from)
				from = d->finish_ns;
			c->busy_ns = now > from ? now - from : 0;
			d->finish_ns = now;
			cuda_finish(c);
		} else {
			char why[192];
			cuda_errfmt(why, sizeof(why), d, call, e, inj);
			cuda_dev_fail(d, why);
			cuda_ctx_post(c, -EIO, why);
		}
	}
	return keep;
}

void *cuda_completer(void *arg)
{
	cuda_dev *d = arg;
	cuda_ctx *list = NULL, *tail = NULL; /* in flight, oldest first */
	uint64_t since = 0; /* the last progress, or when waiting began */
	const uint64_t spin = d->be->spin_ns;
	bool quiet = false; /* the last launch done was long: wait without spinning */
	uint64_t last_done = 0; /* when the last launch was found done */
	cudaSetDevice(d->ordinal);

	for (;;) {
		if (!list || __atomic_load_n(&d->inflight, __ATOMIC_ACQUIRE)) {
			pthread_mutex_lock(&d->lock);
			if (d->inflight) {
				/* the spin time counts from the first launch
				 * out, or from the last one back */
				if (tail) {
					tail->next = d->inflight;
				} else {
					list = d->inflight;
					since = cuda_now_ns();
				}
				tail = d->inflight_tail;
				__atomic_store_n(&d->inflight, NULL, __ATOMIC_RELAXED);
				d->inflight_tail = NULL;
			}
			if (!list) {
				if (d->cstop) {
					pthread_mutex_unlock(&d->lock);
					break;
				}
				if (!quiet && cuda_now_ns() - since < spin) {
					/* more launches are likely soon after one
					 * finished: look for them a while before
					 * sleeping */
					pthread_mutex_unlock(&d->lock);
					while (!__atomic_load_n(&d->inflight, __ATOMIC_ACQUIRE) &&
					       !__atomic_load_n(&d->cstop, __ATOMIC_RELAXED) &&
					       cuda_now_ns() - since < spin)
						for (int k = 0; k < 16; k++)
							cuda_relax();
					continue;
				}
				d->cwaiting = true;
				pthread_cond_wait(&d->ccond, &d->lock);
				d->cwaiting = false;
				pthread_mutex_unlock(&d->lock);
				since = cuda_now_ns();
				continue;
			}
			pthread_mutex_unlock(&d->lock);
		}

		bool progress, big = list->span > CUDA_SPIN_SPAN_MAX;
		if (big) {
			/* its copy began no sooner than its launch and the
			 * end of the one before: sleep until it can be done */
			uint64_t start = list->t_launch > last_done ? list->t_launch : last_done;
			uint64_t end = start + list->span / CUDA_COPY_BYTES_PER_NS, now = cuda_now_ns();
			if (end > now + 20000) {
				uint64_t ns = end - now - 10000;
				struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
				nanosleep(&ts, NULL);
				since = cuda_now_ns(); /* then poll a while, from now */
			}
		}
		list = cuda_reap(d, list, cudaErrorNotReady, NULL, &progress);
		tail = list;
		while (tail && tail->next)
			tail = tail->next;
		if (progress) {
			since = last_done = cuda_now_ns();
			quiet = big;
			continue;
		}
		if (cuda_now_ns() - since < spin) {
			/* about a microsecond between looks: the events are
			 * the driver's, and the submission thread needs it */
			for (int k = 0; k < 16; k++)
				cuda_relax();
			continue;
		}
		/* long work: sleep until the oldest is done, on a blocking-sync
		 * event put behind it now (only this one interrupts: see
		 * cuda-internal.h), then look at all of them again */
		const char *call = "cudaEventRecord";
		cudaError_t e = cudaEventRecord(list->wait, list->stream);
		if (e == cudaSuccess) {
			call = "cudaEventSynchronize";
			e = cudaEventSynchronize(list->wait);
		}
		list = cuda_reap(d, list, e, call, &progress);
		tail = list;
		while (tail && tail->next)
			tail = tail->next;
		since = last_done = cuda_now_ns();
		quiet = big;
	}
	return NULL;
}
