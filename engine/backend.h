/*
 * The backend seam: what the daemon asks of a compute engine.
 *
 * A backend owns the staging memory that socket reads land in (pinned host
 * memory for CUDA, plain memory for the CPU) and runs jobs on it
 * asynchronously: submit() queues a batch and returns at once, without
 * blocking, on the loop thread; when a job is finished, whatever thread
 * finished it hands it to gr_completion_post(), and the daemon's loop
 * thread later calls job->done(job). A job never completes inside submit().
 * A backend may also post a job of its own whose done() runs on the loop
 * thread, fills in the results of a list of the daemon's jobs and calls
 * their done() in turn: the daemon's jobs then never leave the cache of
 * the loop thread that reads and reuses them.
 *
 * A batch is a list of jobs (linked through next) whose data all lie in
 * one staging slot, so a GPU can move it with one copy and reduce it with
 * one launch. Each job's result must equal what gr_reduce() shape gives for
 * that job alone (bit for bit on the CPU backend; on a GPU, deterministic
 * for the same job whatever batch it rode in).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/types.h"
#include "math/reduce.h"

typedef struct gr_job gr_job;
typedef struct gr_backend gr_backend;
typedef struct gr_completion gr_completion;
typedef struct gr_device_info gr_device_info;

/*
 * What a job is. Every kind reads n elements of op and dtype at data;
 * each has its own data (the union in gr_job), and each engine declares
 * the kinds it runs (gr_backend.kinds); the scheduler (engine/scheduler.h)
 * sends a job only to an engine that runs its kind.
 */
typedef enum gr_job_kind {
	/* reduce: result is the elements' partial */
	GR_JOB_REDUCE,
	/* segments: the elements belong to segments (seg), each of which
	 * gets its record (math/segments.h); result is the head's partial */
	GR_JOB_SEGMENTS,
	/* a phase of a request's prefix sums (cumsum, math/cumsum.h), which
	 * writes its outputs there and leaves result alone */
	GR_JOB_CUMSUM,
	/* a whole request's prefix sums of device memory: n 8-byte values to
	 * write at scan_out, device memory of the same device */
	GR_JOB_SCAN,
	/* run(job) on a worker in place of reducing (never inline: it may
	 * block): 0, or a negative errno with errmsg written; never split,
	 * result left alone */
	GR_JOB_RUN,
	GR_JOB_KINDS
} gr_job_kind;

/* Where a job's elements lie. */
/* Which engine ran a job (gr_job.engine), for each user's account of
 * engine time (daemon/peer.h). */
enum {
	GR_ENGINE_NONE,
	GR_ENGINE_GPU,
	GR_ENGINE_CPU,
	GR_ENGINE_N,
};

typedef enum gr_job_where {
	GR_AT_STAGING, /* in the engine's staging memory */
	/* host memory outside staging (a mapped region, daemon/region.h):
	 * an engine that moves the data of several jobs in one span must not
	 * span this one with others */
	GR_AT_HOST,
	/* device memory (map_device) on the device the job is pinned to:
	 * reduced where it lies, with no copy */
	GR_AT_DEVICE,
} gr_job_where;

struct gr_job {
	/* set by the submitter: with next, what a backend's own threads read
	 * of a job, kept together at its start */
	gr_op op;
	gr_dtype dtype;
	const void *data; /* inside the backend's staging memory, or where says */
	size_t n;         /* elements */
	int device;       /* -1: any; else run on this device (canaries, device memory) */
	uint32_t tag;     /* the submitter's, for early answers */
	gr_job *next;     /* batch list; completion queue */
	void (*done)(gr_job *job);
	void *userdata;
	void *early;      /* NULL, or where an early answer goes (gr_early_ops) */
	uint8_t kind;     /* gr_job_kind */
	uint8_t where;    /* gr_job_where */
	uint8_t split;    /* the scheduler's: 0, or 1 + the engine of split host data */
	uint8_t engine;   /* set by the engine that ran it: GR_ENGINE_* */
	/* whose it is, for sharing the CPU's workers by time (workq.h): its
	 * user's uid + 1, 0 for none */
	uint32_t owner;
	/* the kind's own data */
	union {
		struct gr_segjob *seg;           /* GR_JOB_SEGMENTS */
		struct gr_cumsum_job *cumsum;    /* GR_JOB_CUMSUM */
		void *scan_out;                  /* GR_JOB_SCAN */
		int (*run)(gr_job *job);         /* GR_JOB_RUN */
	};

	/* set by the backend before done() runs */
	uint64_t busy_ns; /* the engine's time on it: its workers' time, or
			   * its part by bytes of the GPU's busy time for the
			   * launch it was in */
	int status;       /* 0, or a negative errno; errmsg says why */
	/* Written only when a job fails: it keeps the result, which the
	 * loop thread writes for each job, two cache lines away from the
	 * first line, which other threads read (and CPUs fetch lines in
	 * pairs). */
	char errmsg[192]; /* read only when status < 0 */
	gr_partial result;
};
_Static_assert(offsetof(gr_job, early) + sizeof(void *) <= 64,
	       "what backend threads read of a job fits one cache line");

/*
 * Early answers. A submitter may give a job an early target (job->early,
 * and job->tag for its own use). A backend that finishes jobs on threads
 * of its own then passes each such job's result to answer() on that
 * thread, as soon as it has it and before it posts the job, and calls
 * end() after each run of answers, so that those bound for one place can
 * go out together. done() still runs on the loop thread for every job.
 * Only jobs that succeed are answered early; a job the backend finishes
 * on the loop thread itself (the CPU backend's inline jobs) is not, and
 * the backend clears its early. So a job was answered early when done()
 * finds status 0 and early still set. answer() gets the job's early, tag,
 * op and dtype, and its result (whose count is the job's n), not the job:
 * a backend may keep those apart from the job itself.
 */
typedef struct gr_early_ops {
	void (*answer)(void *early, uint32_t tag, gr_op op, gr_dtype dtype,
		       const gr_partial *result);
	void (*end)(void);
} gr_early_ops;

/*
 * Work an engine can no longer run, moved elsewhere: a GPU engine with no
 * device left in service hands its jobs over (any thread), shows where
 * they go as its last device, and waits for every job moved to be posted
 * before it frees the memory they read (engine/scheduler.c makes one onto the
 * CPU engine).
 */
typedef struct gr_engine_mover {
	void (*move)(void *ctx, gr_job *list);
	void (*wait_idle)(void *ctx);
	void (*describe)(void *ctx, gr_device_info *ret);
	void *ctx;
} gr_engine_mover;

typedef struct gr_backend_config {
	size_t staging_bytes;     /* 0: the backend's default */
	size_t chunk_bytes;       /* slot size; a multiple of GR_REDUCE_ALIGN_BYTES; 0: default */
	unsigned threads;         /* CPU worker threads; 0: one per online CPU */
	int worker_nice;          /* CPU worker threads' nice, above the process's */
	unsigned streams;         /* CUDA streams per device; 0: default */
	size_t inline_max_bytes;  /* jobs this small may run on the submitting thread; SIZE_MAX: default */
	const char *fault;        /* fault injection spec for tests (backend-specific), or NULL */
	const gr_early_ops *early; /* NULL: jobs are never answered early */
	/* CUDA: where jobs go once no GPU is left in service, rather than
	 * failing (NULL: they fail); the scheduler's CPU engine */
	const struct gr_engine_mover *mover;
} gr_backend_config;

struct gr_device_info {
	int index;
	char kind[8];           /* "cpu", "cuda" */
	char name[128];
	bool healthy;
	char health[192];       /* "ok" or why not */
	unsigned units;         /* CPU: worker threads; CUDA: SMs */
	uint64_t memory_bytes;  /* CPU: physical RAM; CUDA: global memory */
	char compute_capability[8]; /* CUDA: "9.0"; CPU: "" */
	int driver_version;     /* CUDA: e.g. 13000; CPU: 0 */
	int runtime_version;
	char pci_bus_id[32];
	char uuid[48];          /* CUDA: "GPU-..." as nvidia-smi writes it */
	uint64_t jobs;          /* jobs run on this device */
};

/* Device memory a client exported, to import (map kind cuda or cuda_ipc). */
typedef struct gr_device_map {
	gr_map_kind kind;
	int fd;                 /* cuda: the exported allocation (the caller closes it) */
	const uint8_t *handle;  /* cuda_ipc: a cudaIpcMemHandle_t */
	uint64_t bytes;         /* the whole range */
	/* cuda: the bytes of it fd's allocation gives, from the start; less
	 * than bytes when the range is built of several allocations, the
	 * others added by map_device_part(). Else equal to bytes. */
	uint64_t part_bytes;
	const char *device;     /* the GPU's UUID ("GPU-...") or PCI bus id */
	bool writable;          /* for writing too (a cumsum's out region) */
} gr_device_map;

/* What map_device() made: device memory jobs may read in place. */
typedef struct gr_device_region {
	int device;             /* the backend's device index: pin jobs to it */
	const void *ptr;        /* device address of the first byte */
	void *priv;             /* the backend's, for unmap_device() */
} gr_device_region;

typedef struct gr_backend_ops {
	/* Queue a batch (non-empty list via next). Never blocks, never fails:
	 * a failing job is posted with status < 0. */
	void (*submit)(gr_backend *b, gr_job *batch);
	/* Optional (NULL: every job of the kinds it declares): whether it
	 * takes this job, of a kind it declares: whether it has a kernel for
	 * its op, dtype and alignment, and gives the bits the CPU engine
	 * would. The scheduler sends it no other; submit() fails a job it
	 * has no kernel for. */
	bool (*takes)(const gr_backend *b, const gr_job *job);
	/* Describe device i < b->ndevices. */
	void (*describe)(gr_backend *b, unsigned i, gr_device_info *ret);
	/* Wait for every submitted job to be posted, stop threads, free
	 * everything (staging included). Called on the loop thread at exit.
	 * A backend whose own posts refer to memory it frees runs the
	 * completion queue (gr_completion_drain) before it frees it, and so
	 * may call done() of the daemon's jobs from here. */
	void (*free)(gr_backend *b);
	/* Optional (NULL where jobs read any memory at full speed, as on
	 * the CPU): prepare host memory outside staging that jobs will read,
	 * a client's mapped region (daemon/region.h), e.g. pin it for DMA;
	 * writable: jobs may write it too (a cumsum's out region, which a
	 * GPU writes in place: GR_JOB_SCAN of host data). Returns 0 and what
	 * unregister_host() takes back once no job reads it any more, or a
	 * negative errno and why; jobs may read it either way, only more
	 * slowly when it failed (and no GPU writes it). Loop thread. */
	int (*register_host)(gr_backend *b, const void *p, size_t bytes, bool writable,
			     void **ret_reg, char *why, size_t whylen);
	void (*unregister_host)(gr_backend *b, void *reg);
	/* Optional (NULL: no device memory here): import a client's device
	 * memory for jobs with on_device set, pinned to ret->device. Returns
	 * 0, or a negative errno and why (-ENODEV: no such device in
	 * service; -EINVAL: the handle or size is wrong). Loop thread. */
	int (*map_device)(gr_backend *b, const gr_device_map *m, gr_device_region *ret, char *why,
			  size_t whylen);
	void (*unmap_device)(gr_backend *b, gr_device_region *r);
	/* Optional, with map_device: the next allocation (fd, the caller
	 * closes it) of a range built of several (gr_device_map.part_bytes),
	 * mapped at offset, where the parts before it end, for bytes of it.
	 * Every part but the one that ends the range is a whole number of
	 * the device's allocation granules. 0, or a negative errno and why.
	 * Loop thread. */
	int (*map_device_part)(gr_backend *b, gr_device_region *r, int fd, uint64_t offset,
			       uint64_t bytes, char *why, size_t whylen);
	/* Optional, with map_device: copy bytes of device memory at src, on
	 * device, to host memory at dst, on the calling thread (any but a
	 * backend callback's), done when it returns. 0, or a negative errno
	 * and why. */
	int (*copy_to_host)(gr_backend *b, int device, void *dst, const void *src, size_t bytes,
			    char *why, size_t whylen);
} gr_backend_ops;

/* gr_backend.kinds: the kinds an engine runs */
#define GR_JOB_BIT(k) (1u << (k))

struct gr_backend {
	const gr_backend_ops *ops;
	const char *name;       /* "cpu", "cuda" */
	unsigned kinds;         /* GR_JOB_BIT() of each gr_job_kind it runs */
	uint8_t *staging;       /* staging memory, carved into slots by the daemon */
	size_t staging_bytes;
	size_t chunk_bytes;     /* slot size */
	unsigned workers;       /* CPU: the worker threads a long job is split among; GPUs: 0 */
	/* Devices to describe. It may grow by one while jobs run (the CUDA
	 * backend's CPU fallback, added last), never shrink: read it with
	 * gr_backend_ndevices(). */
	unsigned ndevices;
	uint64_t batches;       /* batches submitted */
	uint64_t batched_jobs;  /* jobs in them */
	gr_completion *cq;
};

/* Hand a finished job back to the loop thread; callable from any thread. */
void gr_completion_post(gr_completion *cq, gr_job *job);
/* The same for a list of jobs linked through next, with one lock and at
 * most one wake-up: what a finished batch should use. */
void gr_completion_post_list(gr_completion *cq, gr_job *head);

/*
 * Constructors. Each returns 0, or a negative errno and a reason in
 * errbuf. The CUDA one returns -ENODEV when no usable GPU is present, and
 * -ENOTSUP when gpured was built without CUDA.
 */
int gr_backend_cpu_new(const gr_backend_config *cfg, gr_completion *cq, gr_backend **ret,
		       char *errbuf, size_t errlen);
int gr_backend_cuda_new(const gr_backend_config *cfg, gr_completion *cq, gr_backend **ret,
			char *errbuf, size_t errlen);

/* A CPU backend's submit() may be called from several threads at once.
 * This returns once every job submitted before it was posted; no other
 * thread may submit meanwhile. */
void gr_backend_cpu_wait_idle(gr_backend *b);

/*
 * Which ops over a narrow dtype (proto/types.h, gr_dtype_is_narrow) a
 * backend with map_device reduces where the elements lie: every op of
 * every narrow dtype (cuda/narrow.h, gr_narrow_has_kernel), with the
 * elements on their own size's boundary (gr_backend_dtype_on_device;
 * the daemon copies others to the host, where the CPU widens them,
 * math/widen.h). The prefix sums of narrow device memory run on its GPU,
 * every narrow dtype's (cuda/scan.h), and so do its segments of every
 * op but moments (gr_backend_segs_on_device).
 */
static inline bool gr_backend_narrow_on_device(gr_op op, gr_dtype dt)
{
	/* every reduce op of every narrow dtype (gr_narrow_has_kernel()) */
	return (unsigned)op < GR_OP_N && gr_dtype_is_narrow(dt);
}

/*
 * Does a backend with map_device reduce op over dt at data in device
 * memory where it lies (a whole reduce, not segments or prefix sums)?
 * Every op of the 4- and 8-byte dtypes (whose own rules follow); a narrow
 * dtype's pairs of gr_backend_narrow_on_device(), with the elements on
 * their own size's boundary (its kernels read whole elements).
 */
static inline bool gr_backend_dtype_on_device(gr_op op, gr_dtype dt, const void *data)
{
	if (!gr_dtype_is_narrow(dt))
		return true;
	return gr_backend_narrow_on_device(op, dt) && (uintptr_t)data % gr_dtype_size(dt) == 0;
}

/* Elements one job of segments of device memory may have, at most. */
#define GR_BACKEND_SEGS_MAX_ELEMS ((uint64_t)1 << 30)

/*
 * Segments of moments one such job may have, at most, by dtype: what the
 * GPU leaves of each (its exact sums' digits, min and max, 1,648 bytes for
 * f64, 280 for f32, 104 for integers) comes to the host whole, in 64 MiB
 * at most.
 */
static inline uint64_t gr_backend_segs_moments_max(gr_dtype dt)
{
	return dt == GR_DT_F64 ? (uint64_t)1 << 15 : dt == GR_DT_F32 ? (uint64_t)1 << 17
								    : (uint64_t)1 << 19;
}

/*
 * Does a backend with map_device reduce the k segments of a request of n
 * elements of device memory at data as one job (seg->first 0, every
 * element): the elements on their own size's boundary, at most
 * GR_BACKEND_SEGS_MAX_ELEMS of them, for moments at most
 * gr_backend_segs_moments_max() segments, and of a narrow dtype any op
 * but moments (the segmented reduce widens its elements as it reads
 * them, cuda/segred.h)? (The daemon copies others to the host first.)
 */
static inline bool gr_backend_segs_on_device(gr_op op, gr_dtype dt, const void *data, uint64_t n,
					     uint64_t k)
{
	if (gr_dtype_is_narrow(dt) && op == GR_OP_MOMENTS)
		return false;
	return (op != GR_OP_MOMENTS || k <= gr_backend_segs_moments_max(dt)) &&
	       (uintptr_t)data % gr_dtype_size(dt) == 0 && n <= GR_BACKEND_SEGS_MAX_ELEMS;
}

static inline unsigned gr_backend_ndevices(const gr_backend *b)
{
	return __atomic_load_n(&b->ndevices, __ATOMIC_ACQUIRE);
}

static inline gr_backend *gr_backend_free(gr_backend *b)
{
	if (b)
		b->ops->free(b);
	return NULL;
}
