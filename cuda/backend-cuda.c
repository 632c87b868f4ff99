/*
 * The CUDA engine behind the backend seam (engine/backend.h): setting it
 * up, describing its devices and tearing it down. cuda/cuda-internal.h
 * says how the engine works.
 *
 * GPURED_CUDA_SPIN_US sets the spin time in microseconds (default
 * CUDA_DEFAULT_SPIN_US; 0 never spins: every wait sleeps).
 * GPURED_CUDA_STAGING=hostalloc takes staging from cudaHostAlloc (4 KiB
 * pages) rather than registering 2 MiB pages (cuda_staging_alloc), to
 * compare the two. GPURED_CUDA_FLAG=0 finds the end of every launch by
 * its event alone, without the word the stream writes behind it
 * (cuda-internal.h), to compare the two.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda-internal.h"
#include "cuda/device-map.h"
#include "cuda/host-register.h"
#include "engine/completion.h"
#include "engine/staging.h"

#define CUDA_DEFAULT_STAGING ((size_t)256 << 20)
#define CUDA_DEFAULT_CHUNK ((size_t)8 << 20)
#define CUDA_DEFAULT_STREAMS 4u
/* Long enough to cover a small launch's round trip (about 20 us) and the
 * gap between one request's answer and the next one's batch, short next
 * to a large chunk's copy. */
#define CUDA_DEFAULT_SPIN_US 100u
#define CUDA_MAX_SPIN_US 100000u

static void cuda_ctx_deinit(cuda_ctx *c)
{
	if (c->stream) {
		cudaStreamSynchronize(c->stream);
		cudaStreamDestroy(c->stream);
	}
	if (c->done)
		cudaEventDestroy(c->done);
	if (c->wait)
		cudaEventDestroy(c->wait);
	cudaFree(c->dbuf);
	cudaFree(c->dsegs);
	cudaFree(c->dpartials);
	cudaFree(c->dtickets);
	cudaFreeHost(c->hsegs);
	cudaFreeHost(c->hout);
	cudaFree(c->dxsegs);
	cudaFree(c->dxscratch);
	cudaFree(c->dxout);
	cudaFree(c->scan_ws);
	cudaFree(c->argm_ws);
	cudaFreeHost(c->hargm);
	cudaFree(c->mom_scratch);
	cudaFreeHost(c->hmom);
	cudaFreeHost(c->flag);
	cuda_segs_free(c);
	cudaFreeHost(c->hxsegs);
	cudaFreeHost(c->hxout);
	free(c->xslot);
	free(c->runs);
	free(c->own);
	memset(c, 0, sizeof(*c));
}

static cudaError_t cuda_ctx_init(cuda_ctx *c, cuda_dev *d, size_t chunk)
{
	cuda_backend *be = d->be;
	cudaError_t e;
	c->dev = d;
	/* a slot's span, rounded down to 16 bytes at its start */
	c->dbuf_bytes = chunk + 16;
	/* done is polled and raises no interrupt; the completion thread's long
	 * waits sleep on wait (cuda-internal.h) */
	if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) ||
	    (e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)) ||
	    (e = cudaEventCreateWithFlags(&c->wait, cudaEventDisableTiming | cudaEventBlockingSync)) ||
	    (e = cudaMalloc((void **)&c->dbuf, c->dbuf_bytes + 16)) ||
	    (e = cudaMalloc((void **)&c->dsegs, be->cap_segs * sizeof(gr_kseg))) ||
	    (e = cudaMalloc((void **)&c->dpartials, 2 * (size_t)be->cap_units * sizeof(uint64_t))) ||
	    (e = cudaMalloc((void **)&c->dtickets, ((size_t)be->cap_segs + be->cap_units) * sizeof(uint32_t))) ||
	    (e = cudaMemset(c->dtickets, 0, ((size_t)be->cap_segs + be->cap_units) * sizeof(uint32_t))) ||
	    (e = cudaHostAlloc((void **)&c->hsegs, be->cap_segs * sizeof(gr_kseg), cudaHostAllocPortable)) ||
	    (e = cudaHostAlloc((void **)&c->hout, be->cap_segs * sizeof(uint64_t),
			       cudaHostAllocPortable | cudaHostAllocMapped)) ||
	    (e = cudaHostGetDevicePointer((void **)&c->hout_dev, c->hout, 0)) ||
	    (e = cudaMalloc((void **)&c->dxsegs, CUDA_EXACT_SEGS * sizeof(gr_exact_seg))) ||
	    (e = cudaMalloc((void **)&c->dxscratch, CUDA_EXACT_SEGS * sizeof(gr_exact_scratch))) ||
	    (e = cudaMemset(c->dxscratch, 0, CUDA_EXACT_SEGS * sizeof(gr_exact_scratch))) ||
	    (e = cudaMalloc((void **)&c->dxout, CUDA_EXACT_SEGS * sizeof(gr_exact_sum))) ||
	    (e = cudaHostAlloc((void **)&c->hxsegs, CUDA_EXACT_SEGS * sizeof(gr_exact_seg),
			       cudaHostAllocPortable)) ||
	    (e = cudaHostAlloc((void **)&c->hxout, CUDA_EXACT_SEGS * sizeof(gr_exact_sum),
			       cudaHostAllocPortable | cudaHostAllocMapped)) ||
	    (e = cudaHostGetDevicePointer((void **)&c->hxout_dev, c->hxout, 0)) ||
	    (e = cudaMalloc(&c->argm_ws, gr_argm_workspace_bytes((int)d->sms))) ||
	    (e = cudaMemset(c->argm_ws, 0, gr_argm_workspace_bytes((int)d->sms))) ||
	    (e = cudaHostAlloc((void **)&c->hargm, sizeof(gr_argm_result),
			       cudaHostAllocPortable | cudaHostAllocMapped)) ||
	    (e = cudaHostGetDevicePointer((void **)&c->hargm_dev, c->hargm, 0)) ||
	    (e = cudaMalloc((void **)&c->mom_scratch, sizeof(gr_moments_scratch))) ||
	    (e = cudaMemset(c->mom_scratch, 0, sizeof(gr_moments_scratch))) ||
	    (e = cudaHostAlloc((void **)&c->hmom, sizeof(gr_moments_sums),
			       cudaHostAllocPortable | cudaHostAllocMapped)) ||
	    (e = cudaHostGetDevicePointer((void **)&c->hmom_dev, c->hmom, 0)) ||
	    (e = cudaHostAlloc((void **)&c->flag, 64, cudaHostAllocPortable | cudaHostAllocMapped)) ||
	    (e = cudaHostGetDevicePointer((void **)&c->flag_dev, c->flag, 0)))
		return e;
	*c->flag = 0;
	c->seq = 0;
	c->runs = malloc(be->cap_segs * sizeof(cuda_run));
	c->xslot = malloc(be->cap_segs * sizeof(uint32_t));
	c->own = malloc(sizeof(cuda_done));
	if (!c->runs || !c->xslot || !c->own)
		return cudaErrorMemoryAllocation;
	return cudaDeviceSynchronize();
}

static int cuda_dev_init(cuda_dev *d, size_t chunk, char *why, size_t whylen)
{
	cuda_backend *be = d->be;
	struct cudaDeviceProp p;
	cudaError_t e;
	if ((e = cudaSetDevice(d->ordinal)) || (e = cudaGetDeviceProperties(&p, d->ordinal))) {
		snprintf(why, whylen, "device %d: %s", d->ordinal, cudaGetErrorString(e));
		return -ENODEV;
	}
	cuda_fmt(d->name, sizeof(d->name), "%s", p.name);
	snprintf(d->cc, sizeof(d->cc), "%d.%d", p.major, p.minor);
	d->sms = (unsigned)p.multiProcessorCount;
	d->mem = p.totalGlobalMem;
	const unsigned char *u = (const unsigned char *)p.uuid.bytes;
	snprintf(d->uuid, sizeof(d->uuid),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
		 u[15]);
	if (cudaDeviceGetPCIBusId(d->pci, sizeof(d->pci), d->ordinal) != cudaSuccess)
		d->pci[0] = '\0';
	if (cuda_fault_hit(d, FAULT_INIT)) {
		cuda_errfmt(why, whylen, d, "cudaSetDevice", cudaErrorInitializationError, true);
		return -EIO;
	}
	d->ctxs = calloc(be->streams, sizeof(*d->ctxs));
	if (!d->ctxs) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < be->streams; i++) {
		d->nctx = i + 1;
		e = cuda_ctx_init(&d->ctxs[i], d, chunk);
		if (e) {
			cuda_errfmt(why, whylen, d, "allocating a stream context", e, false);
			return -EIO;
		}
		d->ctxs[i].next = d->free_list;
		d->free_list = &d->ctxs[i];
	}
	return 0;
}

/* Start d's two threads; false (and why) when either cannot start. */
static bool cuda_dev_start(cuda_dev *d, char *why, size_t whylen)
{
	/* the completion thread first: launches with no one to finish them
	 * would hang */
	if (pthread_create(&d->cthread, NULL, cuda_completer, d) != 0) {
		snprintf(why, whylen, "cannot start its completion thread");
		return false;
	}
	d->cthread_started = true;
	if (pthread_create(&d->sthread, NULL, cuda_submitter, d) != 0) {
		snprintf(why, whylen, "cannot start its submission thread");
		return false;
	}
	d->sthread_started = true;
	/* named for top -H and /proc/PID/task/TID/comm */
	char name[16];
	snprintf(name, sizeof(name), "gpured-done%d", d->ordinal);
	pthread_setname_np(d->cthread, name);
	snprintf(name, sizeof(name), "gpured-sub%d", d->ordinal);
	pthread_setname_np(d->sthread, name);
	return true;
}

static void cuda_describe(gr_backend *b, unsigned i, gr_device_info *ret)
{
	cuda_backend *be = (cuda_backend *)b;
	memset(ret, 0, sizeof(*ret));
	if (i >= be->ndev) {
		if (i == be->ndev && __atomic_load_n(&be->moving, __ATOMIC_ACQUIRE)) {
			be->mover->describe(be->mover->ctx, ret);
			ret->index = (int)i;
			snprintf(ret->health, sizeof(ret->health),
				 "ok (in place of the CUDA devices, none of which is in service)");
		}
		return;
	}
	cuda_dev *d = &be->devs[i];
	ret->index = (int)i;
	snprintf(ret->kind, sizeof(ret->kind), "cuda");
	snprintf(ret->name, sizeof(ret->name), "%s", d->name);
	snprintf(ret->compute_capability, sizeof(ret->compute_capability), "%s", d->cc);
	snprintf(ret->pci_bus_id, sizeof(ret->pci_bus_id), "%s", d->pci);
	snprintf(ret->uuid, sizeof(ret->uuid), "%s", d->uuid);
	ret->units = d->sms;
	ret->memory_bytes = d->mem;
	ret->driver_version = be->driver_version;
	ret->runtime_version = be->runtime_version;
	pthread_mutex_lock(&d->lock);
	ret->healthy = d->healthy;
	snprintf(ret->health, sizeof(ret->health), "%s", d->health);
	pthread_mutex_unlock(&d->lock);
	ret->jobs = __atomic_load_n(&d->jobs, __ATOMIC_RELAXED);
}

static void cuda_free(gr_backend *b)
{
	cuda_backend *be = (cuda_backend *)b;
	if (!be)
		return;
	/* Every submission thread drains its queue first (a device failing
	 * meanwhile hands its jobs to those still running); only then can
	 * nothing new go in flight. A context may be waiting on this thread
	 * to give it back (cuda_ctx_post): the completion queue runs meanwhile. */
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		pthread_mutex_lock(&d->lock);
		__atomic_store_n(&d->stop, true, __ATOMIC_RELAXED);
		pthread_cond_signal(&d->scond);
		pthread_mutex_unlock(&d->lock);
	}
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		if (!d->sthread_started)
			continue;
		for (;;) {
			pthread_mutex_lock(&d->lock);
			bool done = d->sdone;
			pthread_mutex_unlock(&d->lock);
			if (done)
				break;
			gr_completion_drain(be->pub.cq);
			usleep(200);
		}
		pthread_join(d->sthread, NULL);
	}
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		if (!d->cthread_started)
			continue;
		pthread_mutex_lock(&d->lock);
		__atomic_store_n(&d->cstop, true, __ATOMIC_RELAXED);
		pthread_cond_signal(&d->ccond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->cthread, NULL);
	}
	/* No device thread is left to hand it jobs; it posts all it has. */
	if (be->moving)
		be->mover->wait_idle(be->mover->ctx);
	/* What is posted still refers to batches and contexts: finish it
	 * while they are here. */
	if (be->pub.cq)
		gr_completion_drain(be->pub.cq);
	while (be->spare) {
		cuda_batch *sp = be->spare;
		be->spare = sp->next;
		free(sp);
	}
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		if (d->ctxs) {
			cudaSetDevice(d->ordinal);
			for (unsigned k = 0; k < d->nctx; k++)
				cuda_ctx_deinit(&d->ctxs[k]);
			free(d->ctxs);
		}
		pthread_cond_destroy(&d->scond);
		pthread_cond_destroy(&d->ccond);
		pthread_mutex_destroy(&d->lock);
	}
	pthread_mutex_destroy(&be->fb_lock);
	if (be->staging_registered) {
		cudaHostUnregister(be->pub.staging);
		gr_staging_unmap(be->pub.staging, be->pub.staging_bytes);
	} else if (be->pub.staging) {
		cudaFreeHost(be->pub.staging);
	}
	free(be->devs);
	free(be);
}

/*
 * Pinned staging: gr_staging_map's memory (2 MiB pages where the kernel
 * has them) registered with every device; in the 4 KiB pages that
 * cudaHostAlloc gives, the loop thread would take a TLB miss every few
 * small requests. cudaHostAlloc where mapping or registering fails.
 */
static cudaError_t cuda_staging_alloc(cuda_backend *be, size_t bytes)
{
	const char *how = getenv("GPURED_CUDA_STAGING");
	if (!how || strcmp(how, "hostalloc")) {
		uint8_t *p = gr_staging_map(bytes);
		if (p) {
			if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) == cudaSuccess) {
				be->staging_registered = true;
				be->pub.staging = p;
				return cudaSuccess;
			}
			cudaGetLastError(); /* not sticky; clear it */
			gr_staging_unmap(p, bytes);
		}
	}
	return cudaHostAlloc((void **)&be->pub.staging, bytes, cudaHostAllocPortable);
}

static const gr_backend_ops cuda_ops = {
	.submit = cuda_submit,
	.takes = cuda_takes,
	.describe = cuda_describe,
	.free = cuda_free,
	.register_host = cuda_register_host,
	.unregister_host = cuda_unregister_host,
	.map_device = cuda_map_device,
	.unmap_device = cuda_unmap_device,
	.map_device_part = cuda_map_device_part,
	.copy_to_host = cuda_copy_to_host,
};

static int cuda_spin_parse(cuda_backend *be, char *errbuf, size_t errlen)
{
	const char *s = getenv("GPURED_CUDA_SPIN_US");
	unsigned long us = CUDA_DEFAULT_SPIN_US;
	if (s && *s) {
		char *end = NULL;
		errno = 0;
		us = strtoul(s, &end, 10);
		if (errno || !end || *end || us > CUDA_MAX_SPIN_US) {
			snprintf(errbuf, errlen, "GPURED_CUDA_SPIN_US: want 0 to %u microseconds, got '%s'",
				 CUDA_MAX_SPIN_US, s);
			return -EINVAL;
		}
	}
	be->spin_ns = (uint64_t)us * 1000u;
	return 0;
}

/* The driver's cuStreamWriteValue32, where it has one (CUDA 12 on). */
static void cuda_flag_setup(cuda_backend *be)
{
	const char *s = getenv("GPURED_CUDA_FLAG");
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q;
	be->write_value = NULL;
	if (s && strcmp(s, "0") == 0)
		return;
	if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault,
					     &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		be->write_value = (int (*)(cudaStream_t, unsigned long long, uint32_t, unsigned))fn;
	else
		cudaGetLastError();
}

int gr_backend_cuda_new(const gr_backend_config *cfg, gr_completion *cq, gr_backend **ret,
			char *errbuf, size_t errlen)
{
	int count = 0, r;
	*ret = NULL;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e == cudaErrorInsufficientDriver && access("/proc/driver/nvidia/version", F_OK) != 0) {
		/* what the runtime says when there is no driver at all */
		snprintf(errbuf, errlen, "no NVIDIA driver loaded");
		return -ENODEV;
	}
	if (e != cudaSuccess || count <= 0) {
		snprintf(errbuf, errlen, "no usable CUDA device: %s",
			 e != cudaSuccess ? cudaGetErrorString(e) : "none visible");
		return -ENODEV;
	}

	cuda_backend *be = calloc(1, sizeof(*be));
	if (!be) {
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	be->pub.ops = &cuda_ops;
	be->pub.name = "cuda";
	be->pub.cq = cq;
	be->pub.kinds = GR_JOB_BIT(GR_JOB_REDUCE) | GR_JOB_BIT(GR_JOB_SEGMENTS) |
			GR_JOB_BIT(GR_JOB_SCAN);
	pthread_mutex_init(&be->fb_lock, NULL);
	be->mover = cfg ? cfg->mover : NULL;
	const char *fault = cfg && cfg->fault ? cfg->fault : getenv("GPURED_CUDA_FAULT");
	r = cuda_fault_parse(be, fault, errbuf, errlen);
	if (r == 0)
		r = cuda_spin_parse(be, errbuf, errlen);
	if (r < 0) {
		cuda_free(&be->pub);
		return r;
	}

	size_t chunk = cfg && cfg->chunk_bytes ? cfg->chunk_bytes : CUDA_DEFAULT_CHUNK;
	chunk = (chunk + GR_REDUCE_ALIGN_BYTES - 1) / GR_REDUCE_ALIGN_BYTES * GR_REDUCE_ALIGN_BYTES;
	size_t staging = cfg && cfg->staging_bytes ? cfg->staging_bytes : CUDA_DEFAULT_STAGING;
	staging = staging < chunk ? chunk : staging / chunk * chunk;
	be->streams = cfg && cfg->streams ? cfg->streams : CUDA_DEFAULT_STREAMS;
	/* a job takes at least one element, most take far more: tables for
	 * one segment per 64 bytes of a slot; longer runs are split */
	be->cap_segs = (uint32_t)((chunk / 64 < 65536 ? chunk / 64 : 65536) + 64);
	uint64_t cap_units = chunk / (8 * GR_KERNEL_ROW_BYTES) + be->cap_segs + 64;
	/* and never fewer units than one job filling the device buffer
	 * takes, whatever the kernel's unit size */
	for (size_t sz = 4; sz <= 8; sz += 4) {
		uint64_t u = gr_kernel_units((chunk + 16) / sz, sz);
		cap_units = u > cap_units ? u : cap_units;
	}
	be->cap_units = (uint32_t)cap_units;
	cudaDriverGetVersion(&be->driver_version);
	cudaRuntimeGetVersion(&be->runtime_version);
	cuda_flag_setup(be);

	be->devs = calloc((size_t)count, sizeof(*be->devs));
	if (!be->devs) {
		snprintf(errbuf, errlen, "out of memory");
		cuda_free(&be->pub);
		return -ENOMEM;
	}
	be->ndev = (unsigned)count;
	be->pub.ndevices = be->ndev;
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		d->be = be;
		d->ordinal = (int)i;
		d->sdone = true; /* until its thread runs */
		pthread_mutex_init(&d->lock, NULL);
		pthread_cond_init(&d->scond, NULL);
		pthread_cond_init(&d->ccond, NULL);
		snprintf(d->health, sizeof(d->health), "ok");
	}

	/* staging first, portable so that every device sees it pinned */
	e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cuda_staging_alloc(be, staging);
	if (e != cudaSuccess) {
		be->pub.staging = NULL;
		snprintf(errbuf, errlen, "cudaHostAlloc of %zu bytes of staging on device 0: %s",
			 staging, cudaGetErrorString(e));
		cuda_free(&be->pub);
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -ENODEV;
	}
	be->pub.staging_bytes = staging;
	be->pub.chunk_bytes = chunk;
	be->early = cfg ? cfg->early : NULL;

	unsigned usable = 0;
	char why[192] = "";
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		r = cuda_dev_init(d, chunk, why, sizeof(why));
		if (r < 0) {
			snprintf(d->health, sizeof(d->health), "%s", why);
			continue;
		}
		d->healthy = true;
		d->sdone = false;
		if (!cuda_dev_start(d, why, sizeof(why))) {
			pthread_mutex_lock(&d->lock);
			d->healthy = false;
			d->sdone = !d->sthread_started;
			snprintf(d->health, sizeof(d->health), "%s", why);
			pthread_mutex_unlock(&d->lock);
			continue;
		}
		usable++;
	}
	if (!usable) {
		snprintf(errbuf, errlen, "no usable CUDA device: %s", why);
		cuda_free(&be->pub);
		return -ENODEV;
	}
	*ret = &be->pub;
	return 0;
}
