/*
 * The CPU backend: plain (page-aligned) staging memory and a pool of worker
 * threads running gr_reduce() shapes.
 *
 * submit() sorts a batch on the loop thread: jobs up to inline_max bytes
 * are reduced right there (handing them to a worker costs more than they
 * do), the rest become work records appended to their owners' FIFOs in the
 * workers' queue (workq.h: a free worker serves the owner whose work has
 * had the least worker time) under one lock, with a signal for each unit
 * of work, up to the workers' count, for the whole batch. A job of a few
 * blocks or more is split: its record has one unit per block, workers
 * claim units under the lock, each writes its block's partial into the
 * record, and the worker that finishes the last unit (an atomic countdown)
 * combines the partials in block order, exactly as gr_reduce() does, so
 * the bits do not depend on the thread count (a segmented job's parts
 * are merged in order; a prefix sum's phase that runs tile by tile,
 * math/cumsum.h, writes each unit's tiles, which depend on no other's). Every job, inline or not,
 * leaves through gr_completion_post(). A worker takes one owner's whole
 * jobs in runs, and answers those that ask to be answered early
 * (backend.h) together; the loop thread answers the inline ones itself,
 * with the rest of what it writes.
 *
 * A CUDA daemon's CPU route is also its CUDA backend's fallback, so jobs
 * may come from the loop thread and from a GPU's submission thread at
 * once: submit() touches nothing shared outside the lock but atomics.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/backend.h"
#include "math/cumsum.h"
#include "math/segments.h"
#include "engine/staging.h"
#include "engine/workq.h"

#define CPU_DEFAULT_STAGING ((size_t)64 << 20)
#define CPU_DEFAULT_CHUNK ((size_t)4 << 20)
#define CPU_MAX_THREADS 1024u

/*
 * Jobs up to this many bytes run inline by default. Measured with
 * bench/cpu/inline-bench (f32 sum, one job per submit, median us from
 * submit() to the done callback, and the loop thread's CPU us per job;
 * 2-core AMD EPYC KVM guest, 2 workers):
 *
 *       bytes   inline (loop CPU)   worker (loop CPU)
 *         256     1.1  (1.3)         35.2  (10.7)
 *        4096     1.2  (1.4)         33.1  (13.8)
 *       65536     2.1  (2.3)         47.0  (15.7)
 *      262144     5.1  (5.4)         49.5  (15.2)
 *      524288     8.9  (9.2)         52.3  (16.1)
 *     1048576    17.3 (17.8)         42.0  (22.7)
 *
 * A round trip through a worker costs about 30 us of latency (two
 * cross-CPU wake-ups: the condition variable, then the loop's eventfd) and
 * 10-15 us of the loop thread's own CPU (the syscalls), while reducing in
 * cache runs at about 60 GB/s. Both measures cross near 1 MiB, so jobs up
 * to 1 MiB run inline; that also bounds how long one job holds up the loop
 * (about 17 us here). Larger jobs go to the workers, split by block.
 */
#define CPU_DEFAULT_INLINE_MAX ((size_t)1 << 20)

/* Split jobs of at least this many blocks (128 KiB or more each): below
 * that, waking more workers costs about what the split saves. For the same
 * reason a worker takes at least this many blocks at a time, and a job is
 * cut into no more pieces than there are workers. */
#define CPU_SPLIT_MIN_BLOCKS 4

/* Whole jobs a worker takes from the queue at once, at most, and bytes
 * after which it takes no more: fewer trips through the lock and the
 * completion queue, and early answers (backend.h) for one connection's
 * jobs go out together, while larger jobs still spread over the workers. */
#define CPU_RUN_MAX 16u
#define CPU_RUN_BYTES ((size_t)64 << 10)

typedef struct cpu_work cpu_work;
struct cpu_work {
	gr_workq_node node; /* in its owner's FIFO (workq.h) */
	cpu_work *next;     /* a run of whole jobs; the spare records */
	gr_job *job;
	unsigned nunits;  /* 1 for a whole job, else runs of per_unit blocks */
	unsigned nblocks; /* blocks of a split job: one partial each */
	unsigned per_unit;
	unsigned claimed; /* units handed out (under the lock) */
	atomic_uint left; /* units not finished yet */
	atomic_uint_fast64_t busy_ns; /* the units' time so far */
	gr_partial *part; /* NULL for a whole job; else nblocks partials */
	/* a segmented job's split: one part per unit, whose heads are in
	 * part[0..nunits) (math/segments.h) */
	gr_segjob *segs;
};

typedef struct cpu_backend {
	gr_backend base;
	gr_backend_ops ops;    /* cpu_ops, with the tests' slow registration */
	unsigned register_ms;  /* fault "register-ms=N" (cpu_fault_parse) */
	size_t inline_max;
	const gr_early_ops *early;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_cond_t idle;   /* no work waiting and no worker busy: gr_backend_cpu_wait_idle */
	unsigned busy;         /* workers running work taken from the queue */
	bool lock_ready;
	gr_workq queue;        /* the work, in one FIFO per owner */
	cpu_work *spare;       /* whole-job records to reuse */
	bool stopping;

	pthread_t *threads;
	unsigned nthreads, nstarted;
	int nice;               /* the workers' (gr_backend_config.worker_nice) */

	atomic_uint_fast64_t jobs;
	char model[128];
} cpu_backend;

static cpu_work *cpu_work_of(gr_workq_node *node)
{
	/* node is a record's first member */
	return (cpu_work *)(void *)node;
}

static uint64_t cpu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cpu_post(cpu_backend *cb, gr_job *job, int status, const char *why)
{
	job->status = status;
	/* a NULL why keeps what the job wrote (its run hook) */
	if (status < 0 && why)
		snprintf(job->errmsg, sizeof(job->errmsg), "%s", why);
	if (status == 0)
		atomic_fetch_add_explicit(&cb->jobs, 1, memory_order_relaxed);
	gr_completion_post(cb->base.cq, job);
}

/* A job finished on a worker: answer it early if it asks to be (true:
 * early->end() is then due), else leave it unmarked for the loop. */
static bool cpu_answer(cpu_backend *cb, gr_job *job)
{
	if (job->early && cb->early) {
		cb->early->answer(job->early, job->tag, job->op, job->dtype, &job->result);
		return true;
	}
	job->early = NULL;
	return false;
}

/* On the loop thread: the loop answers it itself. */
/* Each kind of job the CPU runs, whole, on the calling thread: 0, or a
 * negative errno with errmsg written. */
static int cpu_run_reduce(gr_job *job)
{
	gr_reduce(job->op, job->dtype, job->data, job->n, &job->result);
	return 0;
}

static int cpu_run_segments(gr_job *job)
{
	gr_segs_reduce(job->seg, job->op, job->dtype, job->data, job->n, &job->result);
	return 0;
}

static int cpu_run_cumsum(gr_job *job)
{
	gr_cumsum_run(job->cumsum, job->dtype, job->data, job->n);
	return 0;
}

static int cpu_run_hook(gr_job *job)
{
	return job->run(job);
}

static int (*const cpu_runs[GR_JOB_KINDS])(gr_job *job) = {
	[GR_JOB_REDUCE] = cpu_run_reduce,
	[GR_JOB_SEGMENTS] = cpu_run_segments,
	[GR_JOB_CUMSUM] = cpu_run_cumsum,
	[GR_JOB_RUN] = cpu_run_hook,
};

static int cpu_reduce(gr_job *job)
{
	return cpu_runs[job->kind](job);
}

static void cpu_run_inline(cpu_backend *cb, gr_job *job)
{
	uint64_t t0 = cpu_now_ns();
	int status = cpu_reduce(job);
	job->busy_ns = cpu_now_ns() - t0;
	job->engine = GR_ENGINE_CPU;
	job->early = NULL;
	cpu_post(cb, job, status, NULL);
}

/*
 * Run a list of whole-job records, answer those that ask to be answered
 * early as one run (so that replies for one connection go out together),
 * and post them all at once; the time they took.
 */
static uint64_t cpu_run_whole(cpu_backend *cb, cpu_work *list)
{
	gr_job *head = NULL, **tail = &head;
	uint64_t n = 0, took = 0;
	bool any = false;

	for (cpu_work *w = list; w; w = w->next) {
		gr_job *job = w->job;
		uint64_t t0 = cpu_now_ns();
		job->status = cpu_reduce(job);
		job->busy_ns = cpu_now_ns() - t0;
		job->engine = GR_ENGINE_CPU;
		took += job->busy_ns;
		if (job->status == 0)
			any |= cpu_answer(cb, job);
		*tail = job;
		tail = &job->next;
		n++;
	}
	if (any)
		cb->early->end();
	atomic_fetch_add_explicit(&cb->jobs, n, memory_order_relaxed);
	gr_completion_post_list(cb->base.cq, head);
	return took;
}

/* Unit u of split record w is done, after ns of a worker's time: its
 * time counts in the job's; true when it was the last unit (the caller
 * finishes the job: every other unit's partials are there for it). */
static bool cpu_unit_done(cpu_work *w, uint64_t ns)
{
	atomic_fetch_add(&w->busy_ns, ns);
	/* acq_rel: the last one sees every other unit's partials and time */
	if (atomic_fetch_sub(&w->left, 1) != 1)
		return false;
	w->job->busy_ns = atomic_load(&w->busy_ns);
	w->job->engine = GR_ENGINE_CPU;
	return true;
}

/* Run unit u of split record w, its worker time to *ret_ns; true when w
 * is finished (its job posted). */
_Static_assert(GR_REDUCE_BLOCK % GR_CUMSUM_TILE == 0, "a block is a whole number of tiles");

static bool cpu_run_unit(cpu_backend *cb, cpu_work *w, unsigned u, uint64_t *ret_ns)
{
	gr_job *job = w->job;
	const unsigned char *p = job->data;
	unsigned end = (u + 1) * w->per_unit < w->nblocks ? (u + 1) * w->per_unit : w->nblocks;
	uint64_t t0 = cpu_now_ns();
	if (job->kind == GR_JOB_CUMSUM) {
		/* this unit's blocks' tiles of the phase (the blocks are a
		 * whole number of tiles) */
		const unsigned per_block = GR_REDUCE_BLOCK / GR_CUMSUM_TILE;
		gr_cumsum_run_tiles(job->cumsum, job->dtype, p, job->n, u * w->per_unit * per_block,
				    end * per_block);
		*ret_ns = cpu_now_ns() - t0;
		if (!cpu_unit_done(w, *ret_ns))
			return false;
		cpu_post(cb, job, 0, NULL);
		return true;
	}
	if (w->segs) {
		/* this unit's blocks as one part of the segmented job */
		size_t first = (size_t)u * w->per_unit * GR_REDUCE_BLOCK;
		size_t last = end == w->nblocks ? job->n : (size_t)end * GR_REDUCE_BLOCK;
		w->segs[u] = *job->seg;
		w->segs[u].first += first;
		gr_segs_reduce(&w->segs[u], job->op, job->dtype,
			       p + first * gr_dtype_size(job->dtype), last - first, &w->part[u]);
		*ret_ns = cpu_now_ns() - t0;
		if (!cpu_unit_done(w, *ret_ns))
			return false;
		gr_segs_merge(job->seg, &job->result, job->op, job->dtype, w->segs, w->part,
			      w->nunits);
		cpu_post(cb, job, 0, NULL);
		return true;
	}
	for (unsigned blk = u * w->per_unit; blk < end; blk++) {
		size_t first = (size_t)blk * GR_REDUCE_BLOCK;
		size_t n = job->n - first < GR_REDUCE_BLOCK ? job->n - first : GR_REDUCE_BLOCK;
		gr_reduce_block(job->op, job->dtype, p + first * gr_dtype_size(job->dtype), n,
				&w->part[blk]);
	}
	*ret_ns = cpu_now_ns() - t0;
	if (!cpu_unit_done(w, *ret_ns))
		return false;
	gr_partial_identity(job->op, job->dtype, &job->result);
	for (unsigned i = 0; i < w->nblocks; i++)
		gr_partial_combine(job->op, job->dtype, &job->result, &w->part[i]);
	if (cpu_answer(cb, job))
		cb->early->end();
	cpu_post(cb, job, 0, NULL);
	return true;
}

static size_t cpu_job_bytes(const gr_job *job)
{
	return job->n * gr_dtype_size(job->dtype);
}

/* A worker is done with what it took; lock held. */
static void cpu_unbusy(cpu_backend *cb)
{
	if (--cb->busy == 0 && gr_workq_empty(&cb->queue))
		pthread_cond_broadcast(&cb->idle);
}

void gr_backend_cpu_wait_idle(gr_backend *b)
{
	cpu_backend *cb = (cpu_backend *)b;

	if (!cb->nstarted)
		return; /* every job ran inline */
	pthread_mutex_lock(&cb->lock);
	while (!gr_workq_empty(&cb->queue) || cb->busy)
		pthread_cond_wait(&cb->idle, &cb->lock);
	pthread_mutex_unlock(&cb->lock);
}

static void *cpu_worker(void *arg)
{
	cpu_backend *cb = arg;
	cpu_work *finished = NULL, *finished_last = NULL;

	/* this thread alone (Linux's nice is a thread's), that much above
	 * the daemon's, 19 at most */
	if (cb->nice > 0) {
		id_t tid = (id_t)syscall(SYS_gettid);
		errno = 0;
		int own = getpriority(PRIO_PROCESS, tid);
		if (errno == 0)
			(void)setpriority(PRIO_PROCESS, tid, own + cb->nice < 19 ? own + cb->nice : 19);
	}

	pthread_mutex_lock(&cb->lock);
	for (;;) {
		if (finished) {
			finished_last->next = cb->spare;
			cb->spare = finished;
			finished = NULL;
		}
		while (gr_workq_empty(&cb->queue) && !cb->stopping)
			pthread_cond_wait(&cb->cond, &cb->lock);
		gr_workq_class *owner = gr_workq_serve(&cb->queue);
		if (!owner)
			break; /* stopping, and nothing left to do */
		cpu_work *w = cpu_work_of(owner->head);
		cb->busy++;
		if (!w->part) {
			/* whole jobs: a run of them from the head of the
			 * owner's FIFO */
			cpu_work *last = w;
			size_t bytes = cpu_job_bytes(w->job);
			for (unsigned k = 1; k < CPU_RUN_MAX && bytes < CPU_RUN_BYTES; k++) {
				cpu_work *next = cpu_work_of(last->node.next);
				if (!next || next->part)
					break;
				last->next = next;
				last = next;
				bytes += cpu_job_bytes(next->job);
			}
			last->next = NULL;
			gr_workq_take(&cb->queue, owner, &last->node);
			pthread_mutex_unlock(&cb->lock);
			uint64_t took = cpu_run_whole(cb, w);
			finished = w;
			finished_last = last;
			pthread_mutex_lock(&cb->lock);
			gr_workq_charge(&cb->queue, owner, took);
			cpu_unbusy(cb);
			continue;
		}
		unsigned u = w->claimed++;
		if (w->claimed == w->nunits)
			gr_workq_take(&cb->queue, owner, &w->node);
		pthread_mutex_unlock(&cb->lock);

		uint64_t took;
		if (cpu_run_unit(cb, w, u, &took))
			free(w); /* split records are allocated whole */
		pthread_mutex_lock(&cb->lock);
		gr_workq_charge(&cb->queue, owner, took);
		cpu_unbusy(cb);
	}
	pthread_mutex_unlock(&cb->lock);
	return NULL;
}

static bool cpu_job_valid(const gr_job *job)
{
	return (unsigned)job->op < GR_OP_N && (unsigned)job->dtype < GR_DT_N &&
	       job->kind < GR_JOB_KINDS && cpu_runs[job->kind] &&
	       (job->data || job->n == 0) && job->n <= SIZE_MAX / 8;
}

/* A record that splits job into blocks, or NULL (then it runs whole). */
static cpu_work *cpu_split(cpu_backend *cb, gr_job *job)
{
	size_t nblocks = (job->n + GR_REDUCE_BLOCK - 1) / GR_REDUCE_BLOCK;
	/* a phase of prefix sums that runs tile by tile splits too, by
	 * blocks of tiles (a float's LOCAL and CARRY); the others run whole,
	 * and so does a hook */
	if (cb->nthreads < 2 || nblocks < CPU_SPLIT_MIN_BLOCKS || nblocks > UINT32_MAX ||
	    (job->kind == GR_JOB_CUMSUM && !gr_cumsum_splits(job->cumsum, job->dtype)) ||
	    job->kind == GR_JOB_RUN)
		return NULL;
	const bool seg = job->kind == GR_JOB_SEGMENTS;
	unsigned per = (unsigned)((nblocks + cb->nthreads - 1) / cb->nthreads);
	if (per < CPU_SPLIT_MIN_BLOCKS)
		per = CPU_SPLIT_MIN_BLOCKS;
	unsigned nunits = (unsigned)((nblocks + per - 1) / per);
	/* a segmented job: a head and a part for each unit; else a partial
	 * for each block */
	if (seg && nunits < 2)
		return NULL;
	size_t nparts = seg ? nunits : job->kind == GR_JOB_CUMSUM ? 0 : nblocks;
	cpu_work *w = malloc(sizeof(*w) + nparts * sizeof(gr_partial) +
			     (seg ? nunits * sizeof(gr_segjob) : 0));
	if (!w)
		return NULL;
	w->job = job;
	w->nblocks = (unsigned)nblocks;
	w->per_unit = per;
	w->nunits = nunits;
	w->claimed = 0;
	atomic_init(&w->left, w->nunits);
	atomic_init(&w->busy_ns, 0);
	/* gr_partial and gr_segjob are 8-byte aligned, and so is what
	 * follows *w */
	w->part = (gr_partial *)(void *)(w + 1);
	w->segs = seg ? (gr_segjob *)(void *)(w->part + nparts) : NULL;
	w->next = NULL;
	return w;
}

static void cpu_submit(gr_backend *b, gr_job *batch)
{
	cpu_backend *cb = (cpu_backend *)b;
	gr_job *inl = NULL, **inl_tail = &inl;         /* run here */
	gr_job *whole = NULL, **whole_tail = &whole;   /* need a spare record */
	cpu_work *split = NULL, **split_tail = &split; /* ready records */
	unsigned units = 0;

	uint64_t njobs = 0;
	for (gr_job *job = batch, *next; job; job = next) {
		next = job->next;
		job->next = NULL;
		njobs++;
		if (!cpu_job_valid(job)) {
			cpu_post(cb, job, -EINVAL, "invalid job (op, dtype or data)");
			continue;
		}
		if (job->device > 0) {
			cpu_post(cb, job, -ENODEV, "the cpu backend has only device 0");
			continue;
		}
		/* a run hook may block (a copy from a GPU): never the loop's */
		if (cpu_job_bytes(job) <= cb->inline_max && job->kind != GR_JOB_RUN) {
			*inl_tail = job;
			inl_tail = &job->next;
			continue;
		}
		cpu_work *w = cpu_split(cb, job);
		if (w) {
			*split_tail = w;
			split_tail = &w->next;
			units += w->nunits;
		} else {
			*whole_tail = job;
			whole_tail = &job->next;
		}
	}

	if (whole || split) {
		pthread_mutex_lock(&cb->lock);
		while (whole) {
			cpu_work *w = cb->spare;
			if (w)
				cb->spare = w->next;
			else
				w = malloc(sizeof(*w)); /* the pool grows to the peak load once */
			if (!w)
				break; /* out of memory: the rest runs inline */
			w->job = whole;
			whole = whole->next;
			w->job->next = NULL;
			w->nunits = 1;
			w->claimed = 0;
			atomic_init(&w->left, 1);
			atomic_init(&w->busy_ns, 0);
			w->part = NULL;
			w->segs = NULL;
			w->next = NULL;
			gr_workq_push(&cb->queue, w->job->owner, &w->node);
			units++;
		}
		for (cpu_work *w = split, *next; w; w = next) {
			next = w->next;
			w->next = NULL;
			gr_workq_push(&cb->queue, w->job->owner, &w->node);
		}
		/* Wake as many workers as there are units, no more. */
		for (unsigned i = 0; i < units && i < cb->nthreads; i++)
			pthread_cond_signal(&cb->cond);
		pthread_mutex_unlock(&cb->lock);
		*inl_tail = whole; /* jobs that got no record, if any */
	}

	__atomic_fetch_add(&b->batches, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->batched_jobs, njobs, __ATOMIC_RELAXED);
	for (gr_job *job = inl, *next; job; job = next) {
		next = job->next;
		job->next = NULL;
		cpu_run_inline(cb, job);
	}
}

static void cpu_describe(gr_backend *b, unsigned i, gr_device_info *ret)
{
	cpu_backend *cb = (cpu_backend *)b;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	memset(ret, 0, sizeof(*ret));
	ret->index = (int)i;
	snprintf(ret->kind, sizeof(ret->kind), "cpu");
	snprintf(ret->name, sizeof(ret->name), "%s", cb->model);
	ret->healthy = true;
	snprintf(ret->health, sizeof(ret->health), "ok");
	ret->units = cb->nthreads;
	ret->memory_bytes = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
	ret->jobs = atomic_load_explicit(&cb->jobs, memory_order_relaxed);
}

static void cpu_free(gr_backend *b)
{
	cpu_backend *cb = (cpu_backend *)b;

	if (!cb)
		return;
	if (cb->nstarted) {
		/* Workers leave only once the FIFO is empty: all work gets posted. */
		pthread_mutex_lock(&cb->lock);
		cb->stopping = true;
		pthread_cond_broadcast(&cb->cond);
		pthread_mutex_unlock(&cb->lock);
		for (unsigned i = 0; i < cb->nstarted; i++)
			pthread_join(cb->threads[i], NULL);
	}
	while (cb->spare) {
		cpu_work *w = cb->spare;
		cb->spare = w->next;
		free(w);
	}
	if (cb->lock_ready) {
		pthread_cond_destroy(&cb->cond);
		pthread_cond_destroy(&cb->idle);
		pthread_mutex_destroy(&cb->lock);
	}
	gr_staging_unmap(cb->base.staging, cb->base.staging_bytes);
	free(cb->threads);
	free(cb);
}

static const gr_backend_ops cpu_ops = {
    .submit = cpu_submit,
    .describe = cpu_describe,
    .free = cpu_free,
};

/*
 * Fault injection (tests): the CPU reads any memory at full speed and
 * registers none, but "register-ms=N" in the fault rules (--fault, commas
 * between rules; the CUDA backend's rules are left to it) gives it a
 * registration that takes N ms to do and to undo, as pinning a large
 * region does on a GPU, so that the daemon's handling of a slow one
 * (daemon/region-pin.c) is tested where there is no GPU.
 */
static int cpu_slow_register(gr_backend *b, const void *p, size_t bytes, bool writable,
			     void **ret_reg, char *why, size_t whylen)
{
	cpu_backend *cb = (cpu_backend *)b;
	(void)writable;
	usleep(cb->register_ms * 1000u);
	*ret_reg = (void *)p;
	return 0;
}

static void cpu_slow_unregister(gr_backend *b, void *reg)
{
	cpu_backend *cb = (cpu_backend *)b;
	usleep(cb->register_ms * 1000u);
}

static void cpu_fault_parse(cpu_backend *cb, const char *spec)
{
	const char *at = spec ? strstr(spec, "register-ms=") : NULL;

	cb->ops = cpu_ops;
	if (!at || (at != spec && at[-1] != ','))
		return;
	unsigned long ms = strtoul(at + strlen("register-ms="), NULL, 10);
	cb->register_ms = ms > 60000 ? 60000 : (unsigned)ms;
	cb->ops.register_host = cpu_slow_register;
	cb->ops.unregister_host = cpu_slow_unregister;
}

static void cpu_read_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];

	snprintf(buf, len, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) != 0)
			continue;
		char *v = strchr(line, ':');
		if (!v)
			break;
		v += 1 + strspn(v + 1, " \t");
		v[strcspn(v, "\n")] = '\0';
		if (*v)
			snprintf(buf, len, "%s", v);
		break;
	}
	fclose(f);
}

int gr_backend_cpu_new(const gr_backend_config *cfg, gr_completion *cq, gr_backend **ret,
                       char *errbuf, size_t errlen)
{
	static const gr_backend_config defaults = {.inline_max_bytes = SIZE_MAX};
	cpu_backend *cb = NULL;
	int r;

	*ret = NULL;
	if (!cfg)
		cfg = &defaults;
	if (!cq) {
		snprintf(errbuf, errlen, "cpu backend: no completion queue");
		return -EINVAL;
	}
	size_t staging = cfg->staging_bytes ? cfg->staging_bytes : CPU_DEFAULT_STAGING;
	size_t chunk = cfg->chunk_bytes;
	if (!chunk) {
		chunk = staging - staging % GR_REDUCE_ALIGN_BYTES;
		if (chunk > CPU_DEFAULT_CHUNK)
			chunk = CPU_DEFAULT_CHUNK;
	}
	if (chunk == 0 || chunk % GR_REDUCE_ALIGN_BYTES || chunk > staging) {
		snprintf(errbuf, errlen,
		         "cpu backend: chunk size %zu bytes must be a positive multiple of %zu "
		         "bytes and at most the staging size (%zu bytes)",
		         chunk, GR_REDUCE_ALIGN_BYTES, staging);
		return -EINVAL;
	}
	unsigned threads = cfg->threads;
	if (!threads) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		threads = online > 0
		              ? (unsigned)(online < CPU_MAX_THREADS ? online : CPU_MAX_THREADS)
		              : 1;
	}
	if (threads > CPU_MAX_THREADS) {
		snprintf(errbuf, errlen, "cpu backend: %u threads asked for, at most %u", threads,
		         CPU_MAX_THREADS);
		return -EINVAL;
	}

	cb = calloc(1, sizeof(*cb));
	if (!cb) {
		snprintf(errbuf, errlen, "cpu backend: out of memory");
		return -ENOMEM;
	}
	cpu_fault_parse(cb, cfg->fault);
	cb->base.ops = &cb->ops;
	cb->base.name = "cpu";
	cb->base.kinds = GR_JOB_BIT(GR_JOB_REDUCE) | GR_JOB_BIT(GR_JOB_SEGMENTS) |
			 GR_JOB_BIT(GR_JOB_CUMSUM) | GR_JOB_BIT(GR_JOB_RUN);
	cb->base.ndevices = 1;
	cb->base.cq = cq;
	cb->base.chunk_bytes = chunk;
	cb->inline_max =
	    cfg->inline_max_bytes == SIZE_MAX ? CPU_DEFAULT_INLINE_MAX : cfg->inline_max_bytes;
	cb->early = cfg->early;
	atomic_init(&cb->jobs, 0);
	cpu_read_model(cb->model, sizeof(cb->model));
	pthread_mutex_init(&cb->lock, NULL);
	pthread_cond_init(&cb->cond, NULL);
	pthread_cond_init(&cb->idle, NULL);
	gr_workq_init(&cb->queue);
	cb->lock_ready = true;

	uint8_t *mem = gr_staging_map(staging);
	if (!mem) {
		r = -errno;
		snprintf(errbuf, errlen, "cpu backend: cannot map %zu bytes of staging memory: %s",
		         staging, strerror(-r));
		goto fail;
	}
	cb->base.staging = mem;
	cb->base.staging_bytes = staging;

	cb->threads = calloc(threads, sizeof(*cb->threads));
	if (!cb->threads) {
		r = -ENOMEM;
		snprintf(errbuf, errlen, "cpu backend: out of memory");
		goto fail;
	}
	cb->nthreads = threads;
	cb->base.workers = threads;
	cb->nice = cfg->worker_nice;
	/* Workers block every signal, so signals reach the loop thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < threads; i++) {
		r = -pthread_create(&cb->threads[i], NULL, cpu_worker, cb);
		if (r < 0)
			break;
		char name[16];
		snprintf(name, sizeof(name), "gpured-cpu%u", i);
		pthread_setname_np(cb->threads[i], name);
		cb->nstarted++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (cb->nstarted < threads) {
		snprintf(errbuf, errlen, "cpu backend: cannot start worker thread %u: %s",
		         cb->nstarted, strerror(-r));
		goto fail;
	}

	*ret = &cb->base;
	return 0;

fail:
	cpu_free(&cb->base);
	return r;
}
