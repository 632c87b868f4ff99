/*
 * The CUDA engine behind the backend seam (daemon/backend.h).
 *
 * Every visible GPU gets a pool of stream contexts (cfg->streams each); a
 * context owns a stream, a device buffer the size of a staging slot, and
 * the small arrays of one batch launch (segment table, results, unit
 * partials, tickets). submit() picks the healthy device with the least
 * work, takes a free context (or queues the batch on the device when all
 * are busy) and enqueues: the slot's span host to device, the segment
 * table, one batch kernel, the results device to host, an event and a
 * host function. The host function only wakes the device's completion
 * thread, which checks the event, fills the jobs' partials from the pinned
 * results and posts them, then starts queued batches on the contexts it
 * freed. A CUDA error fails the jobs it touched with -EIO, names the call
 * and the device, and takes the device out of service; batches then go to
 * the other devices, or fail at once when none is left.
 *
 * Fault injection (tests): cfg->fault, or else the environment variable
 * GPURED_CUDA_FAULT, holds rules separated by commas:
 *     WHAT[:device=N][:after=K]
 * WHAT is one of init, h2d, launch, d2h, sync (the completion check). On
 * device N (every device when omitted), the calls of that kind after the
 * first K (0 when omitted) fail as if CUDA had returned an error, e.g.
 * "launch:device=0:after=3" lets three launches on device 0 through and
 * fails the fourth and later ones.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda/kernel.h"
#include "daemon/backend.h"

#define CUDA_DEFAULT_STAGING ((size_t)256 << 20)
#define CUDA_DEFAULT_CHUNK ((size_t)8 << 20)
#define CUDA_DEFAULT_STREAMS 4u
/* how often a completion thread looks at work in flight when no host
 * function has woken it: the backstop for errors that stop a stream */
#define CUDA_POLL_NS 2000000L

enum cuda_fault_kind { FAULT_INIT, FAULT_H2D, FAULT_LAUNCH, FAULT_D2H, FAULT_SYNC, FAULT_N };
static const char *const fault_names[FAULT_N] = { "init", "h2d", "launch", "d2h", "sync" };

typedef struct cuda_fault_rule {
	int kind;
	int device; /* -1: every device */
	unsigned long after;
} cuda_fault_rule;

typedef struct cuda_dev cuda_dev;
typedef struct cuda_backend cuda_backend;

typedef struct cuda_ctx {
	cuda_dev *dev;
	cudaStream_t stream;
	cudaEvent_t done;
	uint8_t *dbuf;
	size_t dbuf_bytes;
	gr_kseg *hsegs, *dsegs;
	uint64_t *hout, *dout;
	uint64_t *dpartials;
	uint32_t *dtickets;
	gr_job *jobs; /* the batch in flight, in segment order */
	uint32_t njobs;
	struct cuda_ctx *next; /* free list or in-flight list */
} cuda_ctx;

typedef struct cuda_pending {
	gr_job *batch;
	struct cuda_pending *next;
} cuda_pending;

struct cuda_dev {
	cuda_backend *be;
	int ordinal;
	char name[128];
	char cc[8];
	unsigned sms;
	uint64_t mem;
	char pci[32];
	bool inited;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started;
	bool kick, stop;
	bool healthy;
	char health[192];
	cuda_ctx *ctxs;
	unsigned nctx;
	cuda_ctx *free_list;
	cuda_ctx *inflight, *inflight_tail;
	cuda_pending *pend, *pend_tail;
	unsigned busy; /* batches in flight or queued */
	uint64_t jobs;
	unsigned long calls[FAULT_N];
};

struct cuda_backend {
	gr_backend pub;
	cuda_dev *devs;
	unsigned ndev;
	unsigned streams;
	uint32_t cap_segs, cap_units;
	int driver_version, runtime_version;
	cuda_fault_rule faults[8];
	unsigned nfaults;
	pthread_mutex_t pick_lock;
	unsigned rr;
};

static void cuda_route(cuda_backend *be, gr_job *batch);

/* ---- errors and fault injection ---- */

static int cuda_fault_parse(cuda_backend *be, const char *spec, char *errbuf, size_t errlen)
{
	char buf[256];
	if (!spec || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(errbuf, errlen, "fault spec too long");
		return -EINVAL;
	}
	strcpy(buf, spec);
	char *save = NULL;
	for (char *rule = strtok_r(buf, ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
		if (be->nfaults == sizeof(be->faults) / sizeof(be->faults[0])) {
			snprintf(errbuf, errlen, "too many fault rules");
			return -EINVAL;
		}
		cuda_fault_rule *f = &be->faults[be->nfaults];
		f->kind = -1;
		f->device = -1;
		f->after = 0;
		char *save2 = NULL;
		char *what = strtok_r(rule, ":", &save2);
		for (int k = 0; what && k < FAULT_N; k++)
			if (!strcmp(what, fault_names[k]))
				f->kind = k;
		if (f->kind < 0) {
			snprintf(errbuf, errlen, "unknown fault kind '%s'", what ? what : "");
			return -EINVAL;
		}
		for (char *kv = strtok_r(NULL, ":", &save2); kv; kv = strtok_r(NULL, ":", &save2)) {
			char *end = NULL;
			if (!strncmp(kv, "device=", 7)) {
				f->device = (int)strtol(kv + 7, &end, 10);
			} else if (!strncmp(kv, "after=", 6)) {
				f->after = strtoul(kv + 6, &end, 10);
			} else {
				snprintf(errbuf, errlen, "unknown fault option '%s'", kv);
				return -EINVAL;
			}
			if (!end || *end) {
				snprintf(errbuf, errlen, "bad number in fault option '%s'", kv);
				return -EINVAL;
			}
		}
		be->nfaults++;
	}
	return 0;
}

/* Count a call of this kind on dev; true when a rule says it must fail. */
static bool cuda_fault_hit(cuda_dev *d, int kind)
{
	cuda_backend *be = d->be;
	unsigned long n = __atomic_add_fetch(&d->calls[kind], 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < be->nfaults; i++) {
		const cuda_fault_rule *f = &be->faults[i];
		if (f->kind == kind && (f->device < 0 || f->device == d->ordinal) && n > f->after)
			return true;
	}
	return false;
}

/* Messages are cut to fit their buffers, on purpose. */
static void cuda_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cuda_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void cuda_errfmt(char *buf, size_t len, cuda_dev *d, const char *call, cudaError_t e,
			bool injected)
{
	cuda_fmt(buf, len, "%s on device %d (%s): %s%s", call, d->ordinal, d->name,
		 cudaGetErrorString(e), injected ? " (injected fault)" : "");
}

/* Take a device out of service (first reason wins). */
static void cuda_dev_fail(cuda_dev *d, const char *why)
{
	pthread_mutex_lock(&d->lock);
	if (d->healthy) {
		d->healthy = false;
		snprintf(d->health, sizeof(d->health), "%s", why);
	}
	d->kick = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* ---- finishing jobs ---- */

static void cuda_fail_batch(cuda_backend *be, gr_job *batch, int status, const char *why)
{
	while (batch) {
		gr_job *next = batch->next;
		batch->status = status;
		snprintf(batch->errmsg, sizeof(batch->errmsg), "%s", why);
		gr_completion_post(be->pub.cq, batch);
		batch = next;
	}
}

static void cuda_finish_ok(cuda_ctx *c)
{
	cuda_backend *be = c->dev->be;
	gr_job *j = c->jobs;
	for (uint32_t i = 0; j; i++) {
		gr_job *next = j->next;
		if (j->n == 0) {
			gr_partial_identity(j->op, j->dtype, &j->result);
		} else {
			j->result.count = j->n;
			j->result.v.u = c->hout[i];
		}
		j->status = 0;
		j->errmsg[0] = '\0';
		gr_completion_post(be->pub.cq, j);
		j = next;
	}
	c->jobs = NULL;
}

static void cuda_ctx_release(cuda_ctx *c)
{
	cuda_dev *d = c->dev;
	pthread_mutex_lock(&d->lock);
	c->next = d->free_list;
	d->free_list = c;
	d->busy--;
	d->kick = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* ---- starting a batch ---- */

static void CUDART_CB cuda_host_done(void *arg)
{
	/* No CUDA here: only wake the completion thread. */
	cuda_dev *d = ((cuda_ctx *)arg)->dev;
	pthread_mutex_lock(&d->lock);
	d->kick = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

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
 * Enqueue batch on context c (owned by the caller until it is in flight).
 * On failure the jobs are posted with -EIO, the device is taken out of
 * service and the context goes back to the free list.
 */
static void cuda_ctx_start(cuda_ctx *c, gr_job *batch)
{
	cuda_dev *d = c->dev;
	cuda_backend *be = d->be;
	char why[192];
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	uint32_t nsegs = 0;

	for (gr_job *j = batch; j; j = j->next, nsegs++) {
		if (j->n == 0)
			continue;
		uintptr_t s = (uintptr_t)j->data;
		uintptr_t e = s + j->n * gr_dtype_size(j->dtype);
		lo = s < lo ? s : lo;
		hi = e > hi ? e : hi;
	}
	c->jobs = batch;
	c->njobs = nsegs;
	if (hi == 0) {
		/* nothing but empty jobs: no GPU work */
		cuda_finish_ok(c);
		cuda_ctx_release(c);
		return;
	}
	uintptr_t lo16 = lo & ~(uintptr_t)15;
	size_t span = hi - lo16;
	if (span > c->dbuf_bytes) {
		c->jobs = NULL;
		cuda_fail_batch(be, batch, -EINVAL, "batch spans more than one staging slot");
		cuda_ctx_release(c);
		return;
	}

	uint32_t units = 0, i = 0;
	for (gr_job *j = batch; j; j = j->next, i++) {
		gr_kseg *s = &c->hsegs[i];
		size_t sz = gr_dtype_size(j->dtype);
		s->offset = j->n ? (uintptr_t)j->data - lo16 : 0;
		s->n = j->n;
		s->opdt = (uint32_t)j->op * 8 + (uint32_t)j->dtype;
		s->unit_rows = gr_kernel_unit_rows(j->n, sz);
		s->first_unit = units;
		s->units = j->n ? (uint32_t)gr_kernel_units(j->n, sz) : 0;
		units += s->units;
	}

	CUDA_TRY("cudaSetDevice", -1, cudaSetDevice(d->ordinal));
	CUDA_TRY("cudaMemcpyAsync (host to device)", FAULT_H2D,
		 cudaMemcpyAsync(c->dbuf, (const void *)lo16, span, cudaMemcpyHostToDevice, c->stream));
	CUDA_TRY("cudaMemcpyAsync (segment table)", -1,
		 cudaMemcpyAsync(c->dsegs, c->hsegs, nsegs * sizeof(gr_kseg), cudaMemcpyHostToDevice,
				 c->stream));
	CUDA_TRY("cudaLaunchKernel", FAULT_LAUNCH,
		 (cudaError_t)gr_kernel_launch_batch(c->dbuf, c->dsegs, nsegs, units, c->dpartials,
						     c->dtickets, c->dout, (int)d->sms, c->stream));
	CUDA_TRY("cudaMemcpyAsync (device to host)", FAULT_D2H,
		 cudaMemcpyAsync(c->hout, c->dout, nsegs * sizeof(uint64_t), cudaMemcpyDeviceToHost,
				 c->stream));
	CUDA_TRY("cudaEventRecord", -1, cudaEventRecord(c->done, c->stream));
	CUDA_TRY("cudaLaunchHostFunc", -1, cudaLaunchHostFunc(c->stream, cuda_host_done, c));

	/* in flight only now that its event is recorded: an event never
	 * recorded reads as complete */
	pthread_mutex_lock(&d->lock);
	c->next = NULL;
	if (d->inflight_tail)
		d->inflight_tail->next = c;
	else
		d->inflight = c;
	d->inflight_tail = c;
	d->kick = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return;

fail:
	c->jobs = NULL;
	cuda_dev_fail(d, why);
	cuda_fail_batch(be, batch, -EIO, why);
	cuda_ctx_release(c);
}

/* Split a batch longer than a context's tables into batches that fit. */
static gr_job *cuda_split(cuda_backend *be, gr_job *batch, gr_job **rest)
{
	uint32_t n = 1;
	uint64_t units = 0;
	gr_job *j = batch;
	for (;;) {
		units += j->n ? gr_kernel_units(j->n, gr_dtype_size(j->dtype)) : 0;
		if (!j->next)
			break;
		uint64_t nu = j->next->n ? gr_kernel_units(j->next->n, gr_dtype_size(j->next->dtype)) : 0;
		if (n + 1 > be->cap_segs || units + nu > be->cap_units)
			break;
		j = j->next;
		n++;
	}
	*rest = j->next;
	j->next = NULL;
	return batch;
}

/* Queue a batch on device d (any thread). */
static void cuda_dev_submit(cuda_dev *d, gr_job *batch)
{
	pthread_mutex_lock(&d->lock);
	if (!d->healthy) {
		char why[192];
		cuda_fmt(why, sizeof(why), "device %d is out of service: %s", d->ordinal, d->health);
		pthread_mutex_unlock(&d->lock);
		cuda_fail_batch(d->be, batch, -EIO, why);
		return;
	}
	d->busy++;
	for (gr_job *j = batch; j; j = j->next)
		d->jobs++;
	cuda_ctx *c = d->free_list;
	if (c && !d->pend) {
		d->free_list = c->next;
		pthread_mutex_unlock(&d->lock);
		cuda_ctx_start(c, batch);
		return;
	}
	cuda_pending *p = malloc(sizeof(*p));
	if (!p) {
		d->busy--;
		pthread_mutex_unlock(&d->lock);
		cuda_fail_batch(d->be, batch, -ENOMEM, "out of memory queueing a batch");
		return;
	}
	p->batch = batch;
	p->next = NULL;
	if (d->pend_tail)
		d->pend_tail->next = p;
	else
		d->pend = p;
	d->pend_tail = p;
	d->kick = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* Send a batch to its pinned device, or the healthy one with least work. */
static void cuda_route(cuda_backend *be, gr_job *batch)
{
	int pin = -1;
	for (gr_job *j = batch; j; j = j->next)
		if (j->device >= 0) {
			pin = j->device;
			break;
		}
	if (pin >= 0) {
		if ((unsigned)pin >= be->ndev) {
			char why[96];
			snprintf(why, sizeof(why), "no CUDA device %d", pin);
			cuda_fail_batch(be, batch, -EIO, why);
			return;
		}
		cuda_dev_submit(&be->devs[pin], batch);
		return;
	}

	pthread_mutex_lock(&be->pick_lock);
	unsigned start = be->rr++;
	pthread_mutex_unlock(&be->pick_lock);
	cuda_dev *best = NULL;
	unsigned best_busy = 0;
	for (unsigned k = 0; k < be->ndev; k++) {
		cuda_dev *d = &be->devs[(start + k) % be->ndev];
		pthread_mutex_lock(&d->lock);
		bool ok = d->healthy;
		unsigned busy = d->busy;
		pthread_mutex_unlock(&d->lock);
		if (ok && (!best || busy < best_busy)) {
			best = d;
			best_busy = busy;
		}
	}
	if (!best) {
		cuda_fail_batch(be, batch, -EIO, "no healthy CUDA device left");
		return;
	}
	cuda_dev_submit(best, batch);
}

static void cuda_submit(gr_backend *b, gr_job *batch)
{
	cuda_backend *be = (cuda_backend *)b;
	while (batch) {
		gr_job *rest = NULL;
		gr_job *part = cuda_split(be, batch, &rest);
		uint64_t n = 0;
		for (gr_job *j = part; j; j = j->next) {
			j->status = 0;
			j->errmsg[0] = '\0';
			n++;
		}
		b->batches++;
		b->batched_jobs += n;
		cuda_route(be, part);
		batch = rest;
	}
}

/* ---- the completion thread, one per device ---- */

static void cuda_harvest(cuda_dev *d)
{
	pthread_mutex_lock(&d->lock);
	cuda_ctx *list = d->inflight;
	d->inflight = d->inflight_tail = NULL;
	pthread_mutex_unlock(&d->lock);

	cuda_ctx *keep = NULL, *keep_tail = NULL;
	while (list) {
		cuda_ctx *c = list;
		list = c->next;
		c->next = NULL;
		bool inj = cuda_fault_hit(d, FAULT_SYNC);
		cudaError_t e = inj ? cudaErrorLaunchFailure : cudaEventQuery(c->done);
		if (e == cudaErrorNotReady) {
			if (keep_tail)
				keep_tail->next = c;
			else
				keep = c;
			keep_tail = c;
			continue;
		}
		if (e == cudaSuccess) {
			cuda_finish_ok(c);
		} else {
			char why[192];
			cuda_errfmt(why, sizeof(why), d, "cudaEventQuery", e, inj);
			cuda_dev_fail(d, why);
			gr_job *jobs = c->jobs;
			c->jobs = NULL;
			cuda_fail_batch(d->be, jobs, -EIO, why);
		}
		cuda_ctx_release(c);
	}
	if (keep) {
		pthread_mutex_lock(&d->lock);
		keep_tail->next = d->inflight;
		if (!d->inflight)
			d->inflight_tail = keep_tail;
		d->inflight = keep;
		pthread_mutex_unlock(&d->lock);
	}
}

static void *cuda_thread(void *arg)
{
	cuda_dev *d = arg;
	cudaSetDevice(d->ordinal);
	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->kick && !d->stop) {
			if (d->inflight) {
				struct timespec ts;
				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += CUDA_POLL_NS;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				if (pthread_cond_timedwait(&d->cond, &d->lock, &ts) == ETIMEDOUT)
					break;
			} else {
				pthread_cond_wait(&d->cond, &d->lock);
			}
		}
		d->kick = false;
		if (d->stop && !d->inflight && !d->pend)
			break;
		pthread_mutex_unlock(&d->lock);

		cuda_harvest(d);

		/* start queued batches; a device out of service sends them on */
		pthread_mutex_lock(&d->lock);
		while (d->pend && (d->free_list || !d->healthy)) {
			cuda_pending *p = d->pend;
			d->pend = p->next;
			if (!d->pend)
				d->pend_tail = NULL;
			gr_job *batch = p->batch;
			free(p);
			if (!d->healthy) {
				d->busy--;
				pthread_mutex_unlock(&d->lock);
				if (batch->device >= 0) {
					cuda_dev_submit(d, batch);
				} else {
					cuda_route(d->be, batch);
				}
			} else {
				cuda_ctx *c = d->free_list;
				d->free_list = c->next;
				pthread_mutex_unlock(&d->lock);
				cuda_ctx_start(c, batch);
			}
			pthread_mutex_lock(&d->lock);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- setup, describe, teardown ---- */

static void cuda_ctx_deinit(cuda_ctx *c)
{
	if (c->stream) {
		cudaStreamSynchronize(c->stream);
		cudaStreamDestroy(c->stream);
	}
	if (c->done)
		cudaEventDestroy(c->done);
	cudaFree(c->dbuf);
	cudaFree(c->dsegs);
	cudaFree(c->dout);
	cudaFree(c->dpartials);
	cudaFree(c->dtickets);
	cudaFreeHost(c->hsegs);
	cudaFreeHost(c->hout);
	memset(c, 0, sizeof(*c));
}

static cudaError_t cuda_ctx_init(cuda_ctx *c, cuda_dev *d, size_t chunk)
{
	cuda_backend *be = d->be;
	cudaError_t e;
	c->dev = d;
	c->dbuf_bytes = chunk + 16;
	if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) ||
	    (e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)) ||
	    (e = cudaMalloc((void **)&c->dbuf, c->dbuf_bytes + 16)) ||
	    (e = cudaMalloc((void **)&c->dsegs, be->cap_segs * sizeof(gr_kseg))) ||
	    (e = cudaMalloc((void **)&c->dout, be->cap_segs * sizeof(uint64_t))) ||
	    (e = cudaMalloc((void **)&c->dpartials, 2 * (size_t)be->cap_units * sizeof(uint64_t))) ||
	    (e = cudaMalloc((void **)&c->dtickets, ((size_t)be->cap_segs + be->cap_units) * sizeof(uint32_t))) ||
	    (e = cudaMemset(c->dtickets, 0, ((size_t)be->cap_segs + be->cap_units) * sizeof(uint32_t))) ||
	    (e = cudaHostAlloc((void **)&c->hsegs, be->cap_segs * sizeof(gr_kseg), cudaHostAllocPortable)) ||
	    (e = cudaHostAlloc((void **)&c->hout, be->cap_segs * sizeof(uint64_t), cudaHostAllocPortable)))
		return e;
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
	d->inited = true;
	return 0;
}

static void cuda_describe(gr_backend *b, unsigned i, gr_device_info *ret)
{
	cuda_backend *be = (cuda_backend *)b;
	memset(ret, 0, sizeof(*ret));
	if (i >= be->ndev)
		return;
	cuda_dev *d = &be->devs[i];
	ret->index = (int)i;
	snprintf(ret->kind, sizeof(ret->kind), "cuda");
	snprintf(ret->name, sizeof(ret->name), "%s", d->name);
	snprintf(ret->compute_capability, sizeof(ret->compute_capability), "%s", d->cc);
	snprintf(ret->pci_bus_id, sizeof(ret->pci_bus_id), "%s", d->pci);
	ret->units = d->sms;
	ret->memory_bytes = d->mem;
	ret->driver_version = be->driver_version;
	ret->runtime_version = be->runtime_version;
	pthread_mutex_lock(&d->lock);
	ret->healthy = d->healthy;
	snprintf(ret->health, sizeof(ret->health), "%s", d->health);
	ret->jobs = d->jobs;
	pthread_mutex_unlock(&d->lock);
}

static void cuda_free(gr_backend *b)
{
	cuda_backend *be = (cuda_backend *)b;
	if (!be)
		return;
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		if (!d->thread_started)
			continue;
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		d->kick = true;
		pthread_cond_signal(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		if (!d->ctxs)
			goto destroy;
		cudaSetDevice(d->ordinal);
		for (unsigned k = 0; k < d->nctx; k++)
			cuda_ctx_deinit(&d->ctxs[k]);
		free(d->ctxs);
destroy:
		pthread_cond_destroy(&d->cond);
		pthread_mutex_destroy(&d->lock);
	}
	if (be->pub.staging)
		cudaFreeHost(be->pub.staging);
	pthread_mutex_destroy(&be->pick_lock);
	free(be->devs);
	free(be);
}

static const gr_backend_ops cuda_ops = {
	.submit = cuda_submit,
	.describe = cuda_describe,
	.free = cuda_free,
};

int gr_backend_cuda_new(const gr_backend_config *cfg, gr_completion *cq, gr_backend **ret,
			char *errbuf, size_t errlen)
{
	int count = 0, r;
	*ret = NULL;
	cudaError_t e = cudaGetDeviceCount(&count);
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
	pthread_mutex_init(&be->pick_lock, NULL);
	be->pub.ops = &cuda_ops;
	be->pub.name = "cuda";
	be->pub.cq = cq;
	const char *fault = cfg && cfg->fault ? cfg->fault : getenv("GPURED_CUDA_FAULT");
	r = cuda_fault_parse(be, fault, errbuf, errlen);
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
	 * one segment per 64 bytes of a slot; longer batches are split */
	be->cap_segs = (uint32_t)((chunk / 64 < 65536 ? chunk / 64 : 65536) + 64);
	be->cap_units = (uint32_t)(chunk / (8 * GR_KERNEL_ROW_BYTES) + be->cap_segs + 64);
	cudaDriverGetVersion(&be->driver_version);
	cudaRuntimeGetVersion(&be->runtime_version);

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
		pthread_mutex_init(&d->lock, NULL);
		pthread_cond_init(&d->cond, NULL);
		snprintf(d->health, sizeof(d->health), "ok");
	}

	/* staging first, portable so that every device sees it pinned */
	e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaHostAlloc((void **)&be->pub.staging, staging, cudaHostAllocPortable);
	if (e != cudaSuccess) {
		be->pub.staging = NULL;
		snprintf(errbuf, errlen, "cudaHostAlloc of %zu bytes of staging on device 0: %s",
			 staging, cudaGetErrorString(e));
		cuda_free(&be->pub);
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -ENODEV;
	}
	be->pub.staging_bytes = staging;
	be->pub.chunk_bytes = chunk;

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
		if (pthread_create(&d->thread, NULL, cuda_thread, d) != 0) {
			d->healthy = false;
			snprintf(d->health, sizeof(d->health), "cannot start its completion thread");
			continue;
		}
		d->thread_started = true;
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
