/*
 * The CUDA engine behind the backend seam (engine/backend.h): what the
 * files of the CUDA backend share, and how they work together.
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
 * span host to device, one batch kernel, which writes the results into
 * mapped pinned memory (no copy back), and an event; the segment table
 * rides in the kernel's parameters (or, past GR_KERNEL_PARAM_SEGS
 * segments, goes ahead of it in a copy of its own).
 *
 * The completion thread takes the contexts in flight and polls them (for
 * up to the spin time since the last one finished or the first went out):
 * a word in pinned memory that the stream writes behind each launch and
 * its event (cuStreamWriteValue32; the event itself where the driver has
 * no such call, or now and then while the word has not come, so that a
 * launch that failed is found), then sleeps on the oldest: it records a blocking-sync event
 * behind it on its stream (the context's own, which holds nothing more)
 * and waits in cudaEventSynchronize. The events it polls are not blocking
 * sync, because such an event makes the GPU raise an interrupt when it
 * completes, and on a virtual machine the CPU that takes the interrupt
 * loses about 30 us to it, just when a request is done: a thread of ours
 * waiting there for that request (the loop, the completion thread) was
 * late by that much for the life of a daemon that the scheduler put there
 * (docs/design/completion.md). With
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
 * And neither spins on a launch that copies more than CUDA_SPIN_SPAN_MAX
 * (a large array's chunk): the completion thread sleeps for as long as the
 * copy must take at least (CUDA_COPY_BYTES_PER_NS) and only then polls,
 * the submission thread sleeps until there is work or a free context, so
 * offloading a large reduction costs the host little CPU time.
 *
 * A CUDA error fails the jobs it touched with -EIO, names the call and the
 * device, and takes the device out of service for good; its queued batches
 * then go to the other devices (those pinned to it fail). Once none is
 * left, jobs are moved (cfg->mover: the scheduler's CPU engine, which
 * reads them where they lie in staging and is described as one more
 * device). Without a mover they fail at once. Failures come back to the loop thread as posts of
 * their own too, and the loop thread writes the jobs' status and message.
 *
 * By role: queue.c takes submit() and routes batches to devices (or to
 * the CPU fallback), launch.c is the submission thread, complete.c the
 * completion thread and what finishes jobs on the loop thread, fault.c
 * formats errors, injects faults and takes devices out of service,
 * segs.c runs the segments of device memory (segred.h), and
 * backend-cuda.c sets the backend up, describes it and tears it down.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda/argm.h"
#include "cuda/exact.h"
#include "cuda/kernel.h"
#include "cuda/moments.h"
#include "cuda/narrow.h"
#include "engine/backend.h"

/* The calls a fault can be injected into (fault.c). */
enum cuda_fault_kind { FAULT_INIT, FAULT_H2D, FAULT_LAUNCH, FAULT_D2H, FAULT_SYNC, FAULT_N };

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

/*
 * Launches that copy more than this many bytes take long enough (20 us
 * and more over PCIe) that the threads sleep on them rather than spin:
 * large arrays, shared-memory regions above all, then cost the host almost
 * no CPU, while small requests keep the spinning that makes them quick.
 */
#define CUDA_SPIN_SPAN_MAX ((size_t)1 << 20)
/* Bytes a nanosecond no host-to-device copy beats (64 GB/s, above PCIe
 * Gen5 x16): a long launch is done no sooner than its span at this rate
 * after it could start, and the completion thread sleeps until then. */
#define CUDA_COPY_BYTES_PER_NS 64u
/* Float sums one launch takes to the exact kernel, at most: each has an
 * exact sum and a scratch of about 1.1 KiB on the device, and its sum
 * comes back whole. */
#define CUDA_EXACT_SEGS 1024u
#define CUDA_NOT_EXACT UINT32_MAX
/* How long the completion thread looks only at a launch's word before it
 * asks the event too: a small launch's whole round trip, so that one
 * that failed is found about as soon as an event would tell. */
#define CUDA_FLAG_ALONE_NS 50000u

struct cuda_ctx {
	cuda_dev *dev;
	cudaStream_t stream;
	/* done: recorded after every launch and polled; made without
	 * cudaEventBlockingSync, so the GPU raises no interrupt for it. wait:
	 * blocking sync, recorded behind a launch only once the completion
	 * thread means to sleep on it (see the comment above) */
	cudaEvent_t done, wait;
	uint8_t *dbuf;
	size_t dbuf_bytes;
	gr_kseg *hsegs, *dsegs;
	/* the batch kernel's results: in pinned memory, mapped (hout_dev as
	 * the device addresses it), where the kernel writes them itself */
	uint64_t *hout, *hout_dev;
	uint64_t *dpartials;
	uint32_t *dtickets;
	/* Float sums go to the exact kernel (exact.h), in a table of their
	 * own; their segments in the batch kernel's table are empty. xslot[k]
	 * is job k's place in it, or CUDA_NOT_EXACT. */
	gr_exact_seg *hxsegs, *dxsegs;
	gr_exact_scratch *dxscratch; /* one per place, zero between launches */
	gr_exact_sum *hxout, *dxout;
	/* hxout as the device addresses it (mapped): a launch's one float
	 * sum is written there by its kernel, with no copy after it */
	gr_exact_sum *hxout_dev;
	uint32_t *xslot;
	uint32_t nx;    /* places in use */
	/* the prefix sum's workspace (scan.h), grown on demand, and the
	 * epoch of its last launch */
	void *scan_ws;
	size_t scan_ws_bytes;
	uint32_t scan_epoch;
	/* argmin and argmax (argm.h): the workspace and the result, in
	 * pinned host memory the kernel writes; argm says the launch in
	 * flight is one */
	void *argm_ws;
	gr_argm_result *hargm, *hargm_dev;
	bool argm;
	/* moments (moments.h): the scratch and the sums, in pinned host
	 * memory the kernel writes; mom says the launch in flight is one */
	gr_moments_scratch *mom_scratch;
	gr_moments_sums *hmom, *hmom_dev;
	bool mom;
	/* segments of device memory (segs.c): offsets, records and their
	 * copy for up to seg_cap segments, the scratch, each grown on
	 * demand; segs is the launch in flight's, else NULL */
	uint64_t *seg_doff, *seg_drec, *seg_hrec;
	uint64_t seg_cap; /* in 8-byte words of records */
	uint64_t seg_first, seg_count; /* the segments of the launch in flight */
	size_t seg_rb;    /* bytes of a record of the launch in flight */
	gr_op seg_op;     /* ... its op and dtype */
	gr_dtype seg_dtype;
	void *seg_scratch;
	size_t seg_scratch_bytes;
	size_t seg_scratch_zero; /* bytes from its start that hold zeros (segred.h) */
	struct gr_segjob *segs;
	cuda_run *runs; /* the launch in flight: its items, in segment order */
	uint32_t nruns, njobs;
	size_t span;    /* bytes the launch in flight copies to the device (the submission thread's) */
	uint64_t t_launch; /* when it went out (ns) */
	uint64_t busy_ns;  /* the device's busy time it ended, once done (cuda_reap) */
	/* The launch's end as the completion thread looks for it first: the
	 * stream writes seq into flag (pinned, mapped; flag_dev as the device
	 * addresses it) behind the launch's work and its event, when the
	 * backend can (cuda_backend.write_value) and flagged says it did */
	uint32_t *flag, *flag_dev;
	uint32_t seq;
	bool flagged;
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
	char uuid[48];

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
	uint64_t finish_ns; /* the completion thread's: when it last finished a launch */
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
	/* cuStreamWriteValue32, from the driver (NULL where it is not, or with
	 * GPURED_CUDA_FLAG=0): a word written by the stream behind a launch
	 * is found with a load, where an event takes a driver call, about 2 us
	 * sooner on the H200 hosts (bench/cuda/cuda-rtt.cu, kevent against flag) */
	int (*write_value)(cudaStream_t stream, unsigned long long addr, uint32_t value,
			   unsigned flags);
	cuda_fault_rule faults[8];
	unsigned nfaults;
	unsigned last; /* atomic: the device chosen last */
	const gr_early_ops *early;

	/* Where jobs go once no device is in service (NULL: they fail);
	 * moving is set by whichever thread first finds none, before
	 * pub.ndevices grows. Jobs reach the mover from the loop thread and
	 * from the submission thread of a device going out of service: every
	 * move holds fb_lock, so the engine they go to sees one caller at a
	 * time. */
	const gr_engine_mover *mover;
	bool moving;
	pthread_mutex_t fb_lock;
	bool staging_registered; /* gr_staging_map's memory, registered; else cudaHostAlloc's */
	cuda_batch *spare; /* batches kept for reuse (the loop thread's) */
	unsigned nspare;
};

/* ---- batches: what the device threads read of the daemon's jobs ---- */

/*
 * What a device's threads read of one job, copied from the job's first
 * line by submit() on the loop thread. They never read or write the
 * daemon's jobs themselves: a job's lines stay in the cache of the loop
 * thread, which writes them for every request, and two items share a line.
 */
/*
 * What an item launches. Items of the batch kinds share launches (the
 * batch kernel's table, the exact kernel's); each other kind is launched
 * alone, by its own launcher (launch.c, cuda_launchers).
 */
typedef enum cuda_item_kind {
	CUDA_ITEM_BATCH,    /* a reduce in the batch kernel, or an exact sum */
	CUDA_ITEM_SCAN,     /* the prefix sums of device memory (job->scan_out) */
	CUDA_ITEM_ARGM,     /* argmin or argmax of device memory */
	CUDA_ITEM_MOMENTS,  /* moments of device memory */
	CUDA_ITEM_SEGMENTS, /* segments of device memory (job->seg) */
	CUDA_ITEM_NARROW,   /* a narrow dtype's reduce of device memory (narrow.h) */
	CUDA_ITEM_KINDS
} cuda_item_kind;

typedef struct cuda_item {
	const uint8_t *data;
	uint64_t n;
	union {
		void *early;
		void *scan_out; /* scan: where the prefix sums go (device memory) */
		struct gr_segjob *seg; /* segs: the request's segments and records */
	};
	uint32_t tag;
	uint8_t op, dtype;
	uint8_t kind : 3; /* cuda_item_kind; all but CUDA_ITEM_BATCH launch alone */
	uint8_t alone : 1; /* outside staging: launched alone, never in a span with others */
	uint8_t on_device : 1; /* read in place, no copy: device memory, or a
				* registered host region's prefix sums */
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
	const uint32_t *xslot; /* ... or its place in xout (CUDA_NOT_EXACT: none) */
	const gr_exact_sum *xout;
	uint64_t argm_index;   /* an argmin's or argmax's index (its value in raw) */
	const gr_moments_sums *mom; /* a moments launch's sums, else NULL */
	uint64_t busy_ns;      /* the device's busy time it ended (cuda_finish) */
};

/* What the exact kernel (exact.h) sums of an item, GR_EXACT_F32, _F64,
 * _F32_SQUARES or _F64_SQUARES, or 0 when the batch kernel reduces it:
 * float sums and float sums of squares (each element's exact square).
 * The exact kernel reads whole elements, so an item whose elements are
 * not aligned to their size stays with the batch kernel, which rounds as
 * it goes; the daemon sends none such (queue.c, cuda_takes, and
 * conn-region.c, gr_conn_reduce_region). */
static inline uint32_t cuda_item_exact(const cuda_item *it)
{
	if (it->kind != CUDA_ITEM_BATCH || (uintptr_t)it->data % gr_dtype_size((gr_dtype)it->dtype))
		return 0;
	if (it->op == GR_OP_SUM && it->dtype == GR_DT_F32)
		return GR_EXACT_F32;
	if (it->op == GR_OP_SUM && it->dtype == GR_DT_F64)
		return GR_EXACT_F64;
	if (it->op == GR_OP_SUMSQ && it->dtype == GR_DT_F32)
		return GR_EXACT_F32_SQUARES;
	if (it->op == GR_OP_SUMSQ && it->dtype == GR_DT_F64)
		return GR_EXACT_F64_SQUARES;
	return 0;
}

static inline uint64_t cuda_item_units(const cuda_item *it)
{
	return it->n && it->kind == CUDA_ITEM_BATCH ? gr_kernel_units(it->n, gr_dtype_size(it->dtype))
						     : 0;
}

/* ---- small helpers ---- */

static inline uint64_t cuda_now_ns(void)
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

/* ---- finishing jobs: queue.c and complete.c both do ---- */

static inline void cuda_job_fail(gr_job *j, int status, const char *why)
{
	j->status = status;
	snprintf(j->errmsg, sizeof(j->errmsg), "%s", why);
}

#define CUDA_SPARE_BATCHES 8u

/* Count in n items of b that are back (the loop thread's); the last ones
 * free it, or keep it for the next submit. */
static inline void cuda_batch_settle(cuda_batch *b, uint32_t n)
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

/* ---- fault.c: errors and fault injection ---- */

/* Read the fault rules of spec (fault.c says how they read) into be;
 * 0, or -EINVAL and why in errbuf. */
int cuda_fault_parse(cuda_backend *be, const char *spec, char *errbuf, size_t errlen);
/* Count a call of this kind on dev; true when a rule says it must fail. */
bool cuda_fault_hit(cuda_dev *d, int kind);
/* snprintf, cut to fit on purpose. */
void cuda_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A CUDA error that names the call and the device. */
void cuda_errfmt(char *buf, size_t len, cuda_dev *d, const char *call, cudaError_t e,
		 bool injected);
/* Take a device out of service (first reason wins) and wake its threads. */
void cuda_dev_fail(cuda_dev *d, const char *why);

/* ---- queue.c: queueing ---- */

/* Whether a kernel here runs job j and gives the CPU's bits
 * (gr_backend_ops.takes). */
bool cuda_takes(const gr_backend *b, const gr_job *j);
/* Start moving jobs to the mover, unless under way; fb_lock held. */
void cuda_fallback_start(cuda_backend *be);
/* Route the queue of a device found out of service elsewhere. */
void cuda_requeue(cuda_dev *d, cuda_batch *list);
/* The backend's submit(). */
void cuda_submit(gr_backend *pub, gr_job *list);

/* ---- segs.c: segments of device memory ---- */

/* Launch the segmented reduce of item it (segs) on context c, its
 * records coming back into c->seg_hrec; c->segs is then it->seg. */
cudaError_t cuda_segs_launch(cuda_ctx *c, const cuda_item *it);
/* After the launch: the records into the request's. */
void cuda_segs_finish(cuda_ctx *c);
/* Free what cuda_segs_launch() grew. */
void cuda_segs_free(cuda_ctx *c);

/* ---- launch.c: launching ---- */

/* A device's submission thread (arg: its cuda_dev). */
void *cuda_submitter(void *arg);

/* ---- complete.c: completion ---- */

/* Hand a launch's jobs back through the context's own post: failed
 * (status < 0, why), or with the results in hout. */
void cuda_ctx_post(cuda_ctx *c, int status, const char *why);
/* A launch ran: answer early what asks to be, hand the rest to the loop. */
void cuda_finish(cuda_ctx *c);
/* A device's completion thread (arg: its cuda_dev). */
void *cuda_completer(void *arg);
