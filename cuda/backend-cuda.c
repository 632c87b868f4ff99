/*
 * The CUDA engine behind the backend seam (daemon/backend.h).
 *
 * submit() runs on the daemon's loop thread and only queues: it copies
 * what the device threads need of each job (data, n, op, dtype, and tag
 * and early for early answers) into a batch of items, picks the device
 * (the one a job is pinned to, else the healthy one with the fewest jobs
 * queued or in flight, staying on the last one chosen when they tie, whose
 * threads are awake) and appends the batch to that device's queue under
 * one lock. No CUDA call happens there, and batches are reused. From then
 * on only the loop thread touches the daemon's jobs: their lines, which
 * it writes for every request, never travel to another CPU and back.
 *
 * Each device has two threads. Its submission thread owns the queue's
 * consumer side and a pool of stream contexts (cfg->streams): a context
 * holds a stream, a device buffer the size of a staging slot plus 16
 * bytes, and the small arrays of one launch (segment table, results, unit
 * partials, tickets). With a free context it takes items from the head of
 * the queue for as long as they fit one launch: the span [lowest byte,
 * highest byte) of their data within the device buffer, their segments
 * and units within the tables. Batches queued back to back in one slot
 * (the daemon packs small requests in order) thus go out as one copy and
 * one launch, however the daemon cut them; a job's result depends only on
 * its own segment, so not on the company it rides in. A launch is the
 * span host to device, one batch kernel, the results device to host and
 * an event; the segment table rides in the kernel's parameters (or, past
 * GR_KERNEL_PARAM_SEGS segments, goes ahead of it in a copy of its own).
 *
 * The completion thread takes the contexts in flight and polls their
 * events (for up to the spin time since the last one finished or the first
 * went out), then sleeps in cudaEventSynchronize on the oldest; with
 * nothing in flight it looks for new launches for the spin time, then
 * sleeps on a condition variable. It copies a finished launch's runs of
 * items and its results out of pinned memory into one post of its own,
 * whose callback fills in the jobs on the loop thread (cuda_done_run), and
 * hands the context back. Then it answers the items that ask to be
 * answered early (backend.h): the replies to small requests leave from
 * this thread, one send() for each connection's run of jobs in the launch,
 * and the loop only counts and frees their requests.
 * The submission thread likewise polls its queue for the spin time before
 * it sleeps, so a steady stream of batches never waits for a wake-up. Both
 * spin only while there is or just was work: an idle daemon uses no CPU.
 *
 * A CUDA error fails the jobs it touched with -EIO, names the call and the
 * device, and takes the device out of service for good; its queued batches
 * then go to the other devices (those pinned to it fail). Once none is
 * left, jobs go to the CPU fallback (cfg->cpu_fallback): a CPU backend
 * started then, sharing this backend's completion queue and reading the
 * jobs where they lie in staging, and described as one more device. Without
 * it they fail at once. Failures come back to the loop thread as posts of
 * their own too, and the loop thread writes the jobs' status and message.
 *
 * GPURED_CUDA_SPIN_US sets the spin time in microseconds (default
 * CUDA_DEFAULT_SPIN_US; 0 never spins: every wait sleeps).
 * GPURED_CUDA_STAGING=hostalloc takes staging from cudaHostAlloc (4 KiB
 * pages) rather than registering 2 MiB pages (cuda_staging_alloc), to
 * compare the two.
 *
 * Fault injection (tests): cfg->fault, or else the environment variable
 * GPURED_CUDA_FAULT, holds rules separated by commas:
 *     WHAT[:device=N][:after=K]
 * WHAT is one of init, h2d, launch, d2h, sync (the completion check of a
 * launch, once per launch). On device N (every device when omitted), the
 * calls of that kind after the first K (0 when omitted) fail as if CUDA
 * had returned an error, e.g. "launch:device=0:after=3" lets three
 * launches on device 0 through and fails the fourth and later ones.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda/host-register.h"
#include "cuda/kernel.h"
#include "daemon/backend.h"
#include "daemon/completion.h"
#include "daemon/log.h"
#include "daemon/staging.h"

#define CUDA_DEFAULT_STAGING ((size_t)256 << 20)
#define CUDA_DEFAULT_CHUNK ((size_t)8 << 20)
#define CUDA_DEFAULT_STREAMS 4u
/* Long enough to cover a small launch's round trip (about 20 us) and the
 * gap between one request's answer and the next one's batch, short next
 * to a large chunk's copy. */
#define CUDA_DEFAULT_SPIN_US 100u
#define CUDA_MAX_SPIN_US 100000u

enum cuda_fault_kind { FAULT_INIT, FAULT_H2D, FAULT_LAUNCH, FAULT_D2H, FAULT_SYNC, FAULT_N };
static const char *const fault_names[FAULT_N] = { "init", "h2d", "launch", "d2h", "sync" };

typedef struct cuda_fault_rule {
	int kind;
	int device; /* -1: every device */
	unsigned long after;
} cuda_fault_rule;

typedef struct cuda_dev cuda_dev;
typedef struct cuda_backend cuda_backend;
typedef struct cuda_batch cuda_batch;
typedef struct cuda_run cuda_run;
typedef struct cuda_done cuda_done;
typedef struct cuda_ctx cuda_ctx;

struct cuda_ctx {
	cuda_dev *dev;
	cudaStream_t stream;
	cudaEvent_t done;
	uint8_t *dbuf;
	size_t dbuf_bytes;
	gr_kseg *hsegs, *dsegs;
	uint64_t *hout, *dout;
	uint64_t *dpartials;
	uint32_t *dtickets;
	cuda_run *runs; /* the launch in flight: its items, in segment order */
	uint32_t nruns, njobs;
	cuda_done *own; /* its post back to the loop, when the launch has no other */
	struct cuda_ctx *next; /* free list or in-flight list */
};

struct cuda_dev {
	cuda_backend *be;
	int ordinal;
	char name[128];
	char cc[8];
	unsigned sms;
	uint64_t mem;
	char pci[32];

	/*
	 * lock guards everything below. Fields that the other side polls
	 * while spinning (qhead, free_list, inflight, healthy, stop) are
	 * written with atomic stores under the lock and may be read
	 * without it; the lock is taken before acting on what was read.
	 */
	pthread_mutex_t lock;
	pthread_cond_t scond; /* the submission thread sleeps here */
	pthread_cond_t ccond; /* the completion thread sleeps here */
	pthread_t sthread, cthread;
	bool sthread_started, cthread_started;
	bool swait_work, swait_ctx, cwaiting; /* who sleeps, so wakers signal only then */
	bool stop;   /* free(): drain the queue, then end */
	bool sdone;  /* the submission thread ended: queue nothing more */
	bool cstop;  /* free(): end once nothing is in flight */
	bool healthy;
	char health[192];
	cuda_batch *qhead, *qtail; /* queued batches, in submission order */
	cuda_ctx *ctxs;
	unsigned nctx;
	cuda_ctx *free_list;
	cuda_ctx *inflight, *inflight_tail; /* handed to the completion thread */

	/* atomics */
	uint64_t busy; /* jobs queued or in flight: the routing measure */
	uint64_t jobs; /* jobs launched here */
	unsigned long calls[FAULT_N];
};

struct cuda_backend {
	gr_backend pub;
	cuda_dev *devs;
	unsigned ndev;
	unsigned streams;
	uint32_t cap_segs, cap_units;
	uint64_t spin_ns;
	int driver_version, runtime_version;
	cuda_fault_rule faults[8];
	unsigned nfaults;
	unsigned last; /* atomic: the device chosen last */
	const gr_early_ops *early;

	/* The CPU fallback, when allowed: started by whichever thread first
	 * finds no device in service. A CPU backend's submit() takes one
	 * caller at a time, and jobs reach this one from the loop thread and
	 * from the submission thread of a device going out of service, so
	 * every submit to it holds fb_lock. */
	bool fallback;
	gr_backend_config fbcfg;
	pthread_mutex_t fb_lock;
	gr_backend *cpu;  /* written once, before pub.ndevices grows */
	char fb_why[192]; /* why it did not start, when it did not */
	bool staging_registered; /* gr_staging_map's memory, registered; else cudaHostAlloc's */
	cuda_batch *spare; /* batches kept for reuse (the loop thread's) */
	unsigned nspare;
};

static void cuda_route(cuda_backend *be, cuda_batch *b);
static void cuda_fallback_start(cuda_backend *be);
static void cuda_ctx_release(cuda_ctx *c);

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

/* Take a device out of service (first reason wins) and wake its threads. */
static void cuda_dev_fail(cuda_dev *d, const char *why)
{
	bool first = false;
	pthread_mutex_lock(&d->lock);
	if (d->healthy) {
		__atomic_store_n(&d->healthy, false, __ATOMIC_RELAXED);
		snprintf(d->health, sizeof(d->health), "%s", why);
		first = true;
	}
	pthread_cond_signal(&d->scond);
	pthread_mutex_unlock(&d->lock);
	if (!first)
		return;
	log_error("CUDA device %d taken out of service: %s", d->ordinal, why);
	/* The last one: the CPU takes over now, not at the next job, so that
	 * stats, info and the watchdog's canaries say so at once. */
	cuda_backend *be = d->be;
	for (unsigned i = 0; i < be->ndev; i++)
		if (__atomic_load_n(&be->devs[i].healthy, __ATOMIC_RELAXED))
			return;
	if (be->fallback) {
		pthread_mutex_lock(&be->fb_lock);
		cuda_fallback_start(be);
		pthread_mutex_unlock(&be->fb_lock);
	}
}

/* ---- small helpers ---- */

static uint64_t cuda_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A short pause inside a polling loop, kind to the sibling hyperthread. */
static inline void cuda_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* ---- batches: what the device threads read of the daemon's jobs ---- */

/*
 * What a device's threads read of one job, copied from the job's first
 * line by submit() on the loop thread. They never read or write the
 * daemon's jobs themselves: a job's lines stay in the cache of the loop
 * thread, which writes them for every request, and two items share a line.
 */
typedef struct cuda_item {
	const uint8_t *data;
	uint64_t n;
	void *early;
	uint32_t tag;
	uint8_t op, dtype;
	bool alone; /* outside staging: launched alone, never in a span with others */
} cuda_item;

/*
 * A submitted batch: its items, and the jobs they stand for, which only
 * the loop thread reads. It sits in one device's queue at a time; a launch
 * takes items from the head of the queue for as long as they fit, so it
 * may end inside a batch, and the next one begins at start. Items come
 * back to the loop thread in runs of a launch (cuda_done), in any order,
 * and the loop thread counts them in; once all are back it keeps the
 * batch for reuse or frees it. What no device can take (items start to
 * nitems, when the device they are pinned to or every device is out of
 * service) comes back at once through post: failed, or handed to the CPU
 * fallback.
 */
struct cuda_batch {
	struct cuda_batch *next; /* a device's queue; the spare list */
	cuda_backend *be;
	uint32_t nitems, cap;
	uint32_t start;   /* the first item not yet launched: its device's submission thread's */
	int device;       /* -1, or the device its jobs are pinned to */
	uint32_t settled; /* items back on the loop thread (the loop thread's) */
	uint32_t rest;    /* post: the items from here on came back at once, */
	bool rest_handed; /* to the CPU fallback; else failed with post's status and errmsg */
	gr_job **jobs;    /* cap of them, after the items */
	gr_job post;
	cuda_item items[];
};

/* A run of a launch: items first to first + count of a batch. */
struct cuda_run {
	cuda_batch *b;
	uint32_t first, count;
};

/*
 * A launch's jobs on their way back to the loop thread, posted as one job
 * of our own, whose done() (cuda_done_run) fills in the daemon's jobs
 * there and calls theirs. The completion thread copies the runs and the
 * kernel's results out of the context into a fresh one of these, and the
 * context goes back to the pool at once. A failed launch, or one whose
 * copy cannot be allocated, posts the context's own, and the loop thread
 * gives the context back once it is done with it.
 */
struct cuda_done {
	gr_job post;          /* status < 0: every job failed; errmsg says why */
	cuda_ctx *ctx;        /* the context's own: give it back; else free this */
	uint32_t nruns;
	const cuda_run *runs;
	const uint64_t *raw;  /* each job's raw result, in run order */
};

static uint64_t cuda_item_units(const cuda_item *it)
{
	return it->n ? gr_kernel_units(it->n, gr_dtype_size(it->dtype)) : 0;
}

/* ---- finishing jobs ---- */

static void cuda_job_fail(gr_job *j, int status, const char *why)
{
	j->status = status;
	snprintf(j->errmsg, sizeof(j->errmsg), "%s", why);
}

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

/* One job's result from the kernel's raw value (its bits in the partial's
 * v), status 0. What is already right is only read, not written, and the
 * exact accumulator's words are not touched unless its flags say they are
 * in use (daemon/reduce.h). */
static void cuda_fill(gr_job *j, uint64_t raw)
{
	if (j->early) {
		/* answered already (cuda_answer): done() reads the status */
	} else if (j->n == 0) {
		gr_partial_identity(j->op, j->dtype, &j->result);
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

#define CUDA_SPARE_BATCHES 8u

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

/* Count in n items of b that are back (the loop thread's); the last ones
 * free it, or keep it for the next submit. */
static void cuda_batch_settle(cuda_batch *b, uint32_t n)
{
	cuda_backend *be = b->be;
	b->settled += n;
	if (b->settled < b->nitems)
		return;
	if (be->nspare < CUDA_SPARE_BATCHES) {
		b->next = be->spare;
		be->spare = b;
		be->nspare++;
	} else {
		free(b);
	}
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

/* On the loop thread: finish a launch's jobs (cuda_done). */
static void cuda_done_run(gr_job *post)
{
	cuda_done *dn = post->userdata;
	size_t k = 0;
	for (uint32_t r = 0; r < dn->nruns; r++) {
		const cuda_run *run = &dn->runs[r];
		gr_job **jobs = run->b->jobs + run->first;
		for (uint32_t i = 0; i < run->count; i++, k++) {
			gr_job *j = jobs[i];
			if (i + 1 < run->count)
				__builtin_prefetch(jobs[i + 1], 1);
			if (post->status < 0)
				cuda_job_fail(j, post->status, post->errmsg);
			else
				cuda_fill(j, dn->raw[k]);
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
static void cuda_answer(cuda_backend *be, const cuda_run *runs, uint32_t nruns, const uint64_t *raw)
{
	bool any = false;
	size_t k = 0;
	if (!be->early)
		return;
	for (uint32_t r = 0; r < nruns; r++) {
		const cuda_item *it = runs[r].b->items + runs[r].first;
		for (uint32_t i = 0; i < runs[r].count; i++, k++) {
			if (!it[i].early)
				continue;
			/* a partial filled by hand: never combined into, so
			 * its exact accumulator is not read (reduce.h) */
			gr_partial p;
			p.count = it[i].n;
			p.v.u = raw[k];
			p.xflags = 0;
			be->early->answer(it[i].early, it[i].tag, (gr_op)it[i].op,
					  (gr_dtype)it[i].dtype, &p);
			any = true;
		}
	}
	if (any)
		be->early->end();
}

static void cuda_done_init(cuda_done *dn, cuda_ctx *own, const cuda_run *runs, uint32_t nruns,
			   const uint64_t *raw, int status, const char *why)
{
	dn->ctx = own;
	dn->nruns = nruns;
	dn->runs = runs;
	dn->raw = raw;
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
static void cuda_ctx_post(cuda_ctx *c, int status, const char *why)
{
	cuda_done_init(c->own, c, c->runs, c->nruns, c->hout, status, why);
	gr_completion_post(c->dev->be->pub.cq, &c->own->post);
}

/*
 * A launch ran: copy its runs and results out, give the context back,
 * answer what asks to be answered early, and hand the rest to the loop.
 * (Jobs of no elements take no raw value: hout's entries for them are
 * not read.)
 */
static void cuda_finish(cuda_ctx *c)
{
	cuda_backend *be = c->dev->be;
	size_t runs_bytes = (size_t)c->nruns * sizeof(cuda_run);
	cuda_done *dn = malloc(sizeof(*dn) + runs_bytes + (size_t)c->njobs * sizeof(uint64_t));
	if (!dn) {
		cuda_answer(be, c->runs, c->nruns, c->hout);
		cuda_ctx_post(c, 0, NULL);
		return;
	}
	cuda_run *runs = (cuda_run *)(dn + 1);
	uint64_t *raw = (uint64_t *)((uint8_t *)runs + runs_bytes);
	memcpy(runs, c->runs, runs_bytes);
	memcpy(raw, c->hout, (size_t)c->njobs * sizeof(uint64_t));
	cuda_done_init(dn, NULL, runs, c->nruns, raw, 0, NULL);
	cuda_ctx_release(c);
	/* the replies' sends come after the context is back */
	cuda_answer(be, runs, dn->nruns, raw);
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

/* ---- queueing (any thread; the loop thread on the hot path) ---- */

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
static void cuda_fallback_start(cuda_backend *be)
{
	char why[160];
	gr_backend *cpu = NULL;

	if (be->cpu || be->fb_why[0])
		return;
	if (gr_backend_cpu_new(&be->fbcfg, be->pub.cq, &cpu, why, sizeof(why)) < 0) {
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
static void cuda_requeue(cuda_dev *d, cuda_batch *list)
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

static void cuda_submit(gr_backend *pub, gr_job *list)
{
	cuda_backend *be = (cuda_backend *)pub;
	uint32_t n = 0;
	int pin = -1;
	for (gr_job *j = list; j; j = j->next)
		n++;
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
		};
		b->jobs[i] = j;
	}
	b->device = pin;
	pub->batches++;
	pub->batched_jobs += n;
	cuda_route(be, b);
}

/* ---- launching (the submission thread) ---- */

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
	uint32_t nsegs = 0, nruns = 0;
	uint64_t units = 0;
	bool alone = false; /* the run is one item outside staging */

	/* the run: segment table filled as it grows, offsets once lo is known */
	while (b) {
		uint32_t first = b->start, i;
		for (i = first; i < b->nitems; i++) {
			const cuda_item *it = &b->items[i];
			uint64_t u = cuda_item_units(it);
			if (nsegs == be->cap_segs || units + u > be->cap_units)
				break;
			/* memory outside staging is copied on its own: a span
			 * over it and anything else may cover pages mapped by
			 * no one, or not pinned */
			if (nsegs > 0 && (it->alone || alone))
				break;
			alone = it->alone;
			if (it->n) {
				uintptr_t s = (uintptr_t)it->data;
				uintptr_t e = s + it->n * gr_dtype_size(it->dtype);
				uintptr_t nlo = s < lo ? s : lo, nhi = e > hi ? e : hi;
				if (nhi - (nlo & ~(uintptr_t)15) > c->dbuf_bytes)
					break;
				lo = nlo;
				hi = nhi;
			}
			gr_kseg *sg = &c->hsegs[nsegs++];
			sg->offset = (uintptr_t)it->data;
			sg->n = it->n;
			sg->opdt = (uint32_t)it->op * 8 + it->dtype;
			sg->unit_rows = it->n ? gr_kernel_unit_rows(it->n, gr_dtype_size(it->dtype)) : 0;
			sg->first_unit = (uint32_t)units;
			sg->units = (uint32_t)u;
			units += u;
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
	__atomic_add_fetch(&d->jobs, nsegs, __ATOMIC_RELAXED);
	if (hi == 0) {
		/* nothing but empty jobs: no GPU work */
		cuda_finish(c);
		return b;
	}
	uintptr_t lo16 = lo & ~(uintptr_t)15;
	for (uint32_t i = 0; i < nsegs; i++)
		c->hsegs[i].offset = c->hsegs[i].n ? c->hsegs[i].offset - lo16 : 0;

	CUDA_TRY("cudaMemcpyAsync (host to device)", FAULT_H2D,
		 cudaMemcpyAsync(c->dbuf, (const void *)lo16, hi - lo16, cudaMemcpyHostToDevice,
				 c->stream));
	if (nsegs <= GR_KERNEL_PARAM_SEGS) {
		/* the common case: the table rides in the launch itself */
		CUDA_TRY("cudaLaunchKernel", FAULT_LAUNCH,
			 (cudaError_t)gr_kernel_launch_batch_params(
				 c->dbuf, c->hsegs, nsegs, (uint32_t)units, c->dpartials,
				 c->dtickets, c->dout, (int)d->sms, c->stream));
	} else {
		CUDA_TRY("cudaMemcpyAsync (segment table)", -1,
			 cudaMemcpyAsync(c->dsegs, c->hsegs, nsegs * sizeof(gr_kseg),
					 cudaMemcpyHostToDevice, c->stream));
		CUDA_TRY("cudaLaunchKernel", FAULT_LAUNCH,
			 (cudaError_t)gr_kernel_launch_batch(c->dbuf, c->dsegs, nsegs, (uint32_t)units,
							     c->dpartials, c->dtickets, c->dout,
							     (int)d->sms, c->stream));
	}
	CUDA_TRY("cudaMemcpyAsync (device to host)", FAULT_D2H,
		 cudaMemcpyAsync(c->hout, c->dout, nsegs * sizeof(uint64_t), cudaMemcpyDeviceToHost,
				 c->stream));
	CUDA_TRY("cudaEventRecord", -1, cudaEventRecord(c->done, c->stream));

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
 * without the lock for up to the spin time first. Callers re-check.
 */
static void cuda_sub_wait(cuda_dev *d, bool want_ctx)
{
	uint64_t spin = d->be->spin_ns;
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

static void *cuda_submitter(void *arg)
{
	cuda_dev *d = arg;
	/* taken from the queue, not yet launched: carry from its start on */
	cuda_batch *carry = NULL, *carry_tail = NULL;
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
			cuda_sub_wait(d, false);
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
			cuda_sub_wait(d, true);
			continue;
		}
		__atomic_store_n(&d->free_list, c->next, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&d->lock);
		carry = cuda_launch(c, carry);
		if (!carry)
			carry_tail = NULL;
		pthread_mutex_lock(&d->lock);
	}
	d->sdone = true;
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- completion (the completion thread) ---- */

/*
 * Finish the contexts of list (oldest first) whose events are done, and
 * return those still out. oldest_e: the oldest one's state when the
 * caller already knows it (from cudaEventSynchronize), else
 * cudaErrorNotReady. *progress tells whether any finished.
 */
static cuda_ctx *cuda_reap(cuda_dev *d, cuda_ctx *list, cudaError_t oldest_e, bool *progress)
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
			call = "cudaEventSynchronize";
		} else {
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

static void *cuda_completer(void *arg)
{
	cuda_dev *d = arg;
	cuda_ctx *list = NULL, *tail = NULL; /* in flight, oldest first */
	uint64_t since = 0; /* the last progress, or when waiting began */
	const uint64_t spin = d->be->spin_ns;
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
				if (cuda_now_ns() - since < spin) {
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

		bool progress;
		list = cuda_reap(d, list, cudaErrorNotReady, &progress);
		tail = list;
		while (tail && tail->next)
			tail = tail->next;
		if (progress) {
			since = cuda_now_ns();
			continue;
		}
		if (cuda_now_ns() - since < spin) {
			/* about a microsecond between looks: the events are
			 * the driver's, and the submission thread needs it */
			for (int k = 0; k < 16; k++)
				cuda_relax();
			continue;
		}
		/* long work: sleep until the oldest is done (blocking-sync
		 * events), then look at all of them again */
		cudaError_t e = cudaEventSynchronize(list->done);
		list = cuda_reap(d, list, e, &progress);
		tail = list;
		while (tail && tail->next)
			tail = tail->next;
		since = cuda_now_ns();
	}
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
	/* blocking sync: the completion thread's long waits sleep */
	if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) ||
	    (e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming | cudaEventBlockingSync)) ||
	    (e = cudaMalloc((void **)&c->dbuf, c->dbuf_bytes + 16)) ||
	    (e = cudaMalloc((void **)&c->dsegs, be->cap_segs * sizeof(gr_kseg))) ||
	    (e = cudaMalloc((void **)&c->dout, be->cap_segs * sizeof(uint64_t))) ||
	    (e = cudaMalloc((void **)&c->dpartials, 2 * (size_t)be->cap_units * sizeof(uint64_t))) ||
	    (e = cudaMalloc((void **)&c->dtickets, ((size_t)be->cap_segs + be->cap_units) * sizeof(uint32_t))) ||
	    (e = cudaMemset(c->dtickets, 0, ((size_t)be->cap_segs + be->cap_units) * sizeof(uint32_t))) ||
	    (e = cudaHostAlloc((void **)&c->hsegs, be->cap_segs * sizeof(gr_kseg), cudaHostAllocPortable)) ||
	    (e = cudaHostAlloc((void **)&c->hout, be->cap_segs * sizeof(uint64_t), cudaHostAllocPortable)))
		return e;
	c->runs = malloc(be->cap_segs * sizeof(cuda_run));
	c->own = malloc(sizeof(cuda_done));
	if (!c->runs || !c->own)
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
		gr_backend *cpu = __atomic_load_n(&be->cpu, __ATOMIC_ACQUIRE);
		if (i == be->ndev && cpu) {
			cpu->ops->describe(cpu, 0, ret);
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
	be->cpu = gr_backend_free(be->cpu);
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
	.describe = cuda_describe,
	.free = cuda_free,
	.register_host = cuda_register_host,
	.unregister_host = cuda_unregister_host,
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
	pthread_mutex_init(&be->fb_lock, NULL);
	be->fallback = cfg && cfg->cpu_fallback;
	if (be->fallback)
		/* no staging of its own: it reads jobs in ours */
		be->fbcfg = (gr_backend_config){
			.staging_bytes = GR_REDUCE_ALIGN_BYTES,
			.chunk_bytes = GR_REDUCE_ALIGN_BYTES,
			.threads = cfg->threads,
			.inline_max_bytes = cfg->inline_max_bytes,
			.early = cfg->early,
		};
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
