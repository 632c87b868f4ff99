/*
 * Segments on the GPU: a request's segments of device memory, one job
 * whole (gr_backend_segs_on_device), reduced by the segmented reduce
 * (segred.h) where the data lie; or a piece of whole segments of a host
 * region (gr_segs_whole), reduced in the launch's copy of it. The offsets go to the device, the
 * records come back to pinned memory in the same stream, and the
 * completion thread copies them into the request's records; for moments
 * what comes back is each segment's sums, which it turns into records
 * (segs-moments.h), with a few threads more for many segments. A launch
 * covers as many segments as the scratch of their exact sums holds
 * (CUDA_SEGS_SCRATCH_MAX), so a request of many may take several, in
 * order on the context's stream; moments' sums are their records' own
 * scratch, one launch whole. Each context keeps what it grew: the
 * scratch (64 MiB at most), the offsets, and the records on the device
 * and pinned (64 MiB each at most, for moments).
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda-internal.h"
#include "cuda/segred.h"
#include "cuda/segs-moments.h"
#include "math/segments.h"

_Static_assert(GR_SEGRED_MAX_ELEMS == GR_BACKEND_SEGS_MAX_ELEMS,
	       "the daemon sends the segmented reduce what it takes");

/* Scratch a context keeps for exact sums' digits, at most: 64 MiB, some
 * 60,000 segments of f64 sumsq (the widest) a launch, 750,000 of f32 sum. */
#define CUDA_SEGS_SCRATCH_MAX ((size_t)64 << 20)

/* What a moments launch leaves may take, at most (the daemon's bound,
 * gr_backend_segs_moments_max(), keeps within it). */
#define CUDA_SEGS_MOMENTS_MAX ((size_t)64 << 20)
/* Segments of moments a thread makes the records of, at least, and
 * threads at most. */
#define CUDA_SEGS_MOMENTS_SPLIT 8192
#define CUDA_SEGS_MOMENTS_THREADS 8

/* Grow the context's buffers to k records of rb bytes (a multiple of 8)
 * and scratch bytes. */
static cudaError_t segs_grow(cuda_ctx *c, uint64_t k, size_t rb, size_t scratch)
{
	/* capacity in 8-byte words of records: at least k, so the k + 1
	 * offsets fit words + 1 */
	const uint64_t words = k * (rb / sizeof(uint64_t));
	cudaError_t e;

	if (words > c->seg_cap) {
		/* the context's last launch is done: it is free */
		cudaFree(c->seg_doff);
		cudaFree(c->seg_drec);
		cudaFreeHost(c->seg_hrec);
		c->seg_doff = c->seg_drec = c->seg_hrec = NULL;
		c->seg_cap = 0;
		if ((e = cudaMalloc((void **)&c->seg_doff, (words + 1) * sizeof(uint64_t))) ||
		    (e = cudaMalloc((void **)&c->seg_drec, words * sizeof(uint64_t))) ||
		    (e = cudaHostAlloc((void **)&c->seg_hrec, words * sizeof(uint64_t),
				       cudaHostAllocPortable)))
			return e;
		c->seg_cap = words;
	}
	if (scratch > c->seg_scratch_bytes) {
		cudaFree(c->seg_scratch);
		c->seg_scratch = NULL;
		c->seg_scratch_bytes = 0;
		c->seg_scratch_zero = 0;
		if ((e = cudaMalloc(&c->seg_scratch, scratch)))
			return e;
		c->seg_scratch_bytes = scratch;
	}
	return cudaSuccess;
}

cudaError_t cuda_segs_launch(cuda_ctx *c, const cuda_item *it)
{
	const gr_segjob *sj = it->seg;
	uint64_t first = 0, k = sj->nseg;

	/* its segments [first, k): a whole request's all, a piece of host
	 * segments (in the copy) those it holds, their offsets counted
	 * from the request's element 0, where the data pointer the kernel
	 * gets points (it reads only from the piece's first element on) */
	if (!gr_segs_whole(sj, it->n, &first, &k))
		return cudaErrorInvalidValue;
	k -= first;
	const uint64_t *off = sj->offsets + first;
	const void *data =
		(const void *)((uintptr_t)it->data - (uintptr_t)(sj->first * gr_dtype_size(it->dtype)));
	size_t per = gr_segred_scratch_per_seg(it->op, it->dtype);
	size_t rb = gr_segred_record_bytes(it->op, it->dtype);
	size_t scratch = per ? (k * per < CUDA_SEGS_SCRATCH_MAX ? k * per : CUDA_SEGS_SCRATCH_MAX) : 0;
	uint64_t group = per ? CUDA_SEGS_SCRATCH_MAX / per : k;
	cudaError_t e;

	if (it->op == GR_OP_MOMENTS && k > CUDA_SEGS_MOMENTS_MAX / rb)
		return cudaErrorInvalidValue;
	if ((e = segs_grow(c, k, rb, scratch)))
		return e;
	/* from the request's memory: the call returns once it is copied */
	if ((e = cudaMemcpyAsync(c->seg_doff, off, (k + 1) * sizeof(uint64_t), cudaMemcpyHostToDevice,
				 c->stream)))
		return e;
	for (uint64_t s0 = 0; s0 < k; s0 += group) {
		uint64_t s1 = k - s0 < group ? k : s0 + group;
		e = (cudaError_t)gr_segred_launch(it->op, it->dtype, data, c->seg_doff + s0, s1 - s0,
						  off[s0], off[s1],
						  (uint8_t *)c->seg_drec + s0 * rb, c->seg_scratch,
						  c->seg_scratch_bytes, &c->seg_scratch_zero, c->stream);
		if (e)
			return e;
	}
	if ((e = cudaMemcpyAsync(c->seg_hrec, c->seg_drec, k * rb, cudaMemcpyDeviceToHost, c->stream)))
		return e;
	c->segs = it->seg;
	c->seg_first = first;
	c->seg_count = k;
	c->seg_rb = rb;
	c->seg_op = (gr_op)it->op;
	c->seg_dtype = (gr_dtype)it->dtype;
	return cudaSuccess;
}

/* Moments' records of a range of segments, on a thread of its own. */
typedef struct moments_part {
	pthread_t thread;
	const cuda_ctx *c;
	uint64_t s0, s1;
} moments_part;

static void moments_range(const cuda_ctx *c, uint64_t s0, uint64_t s1)
{
	const gr_segjob *sj = c->segs;
	/* (seg_rb is the size of what came back, each segment's sums) */
	cuda_segs_moments_records(c->seg_dtype, c->seg_hrec, sj->offsets + c->seg_first,
				  c->seg_count, sj->ddof,
				  sj->records + c->seg_first * gr_segs_record_bytes(GR_OP_MOMENTS),
				  s0, s1);
}

static void *moments_part_run(void *arg)
{
	const moments_part *mp = arg;
	moments_range(mp->c, mp->s0, mp->s1);
	return NULL;
}

/*
 * Moments' records, each some 0.3-0.5 us of exact arithmetic: past
 * CUDA_SEGS_MOMENTS_SPLIT segments, on up to CUDA_SEGS_MOMENTS_THREADS
 * threads (the completion thread one of them), a range each. Where a
 * thread cannot be had, its range is made here.
 */
static void moments_records(const cuda_ctx *c)
{
	const uint64_t k = c->seg_count;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t n = k / CUDA_SEGS_MOMENTS_SPLIT + 1;
	moments_part parts[CUDA_SEGS_MOMENTS_THREADS];
	bool started[CUDA_SEGS_MOMENTS_THREADS] = {false};

	n = n < CUDA_SEGS_MOMENTS_THREADS ? n : CUDA_SEGS_MOMENTS_THREADS;
	n = cpus > 0 && (uint64_t)cpus < n ? (uint64_t)cpus : n;
	for (uint64_t i = 1; i < n; i++) {
		parts[i] = (moments_part){.c = c, .s0 = k * i / n, .s1 = k * (i + 1) / n};
		started[i] = pthread_create(&parts[i].thread, NULL, moments_part_run, &parts[i]) == 0;
	}
	moments_range(c, 0, k / n);
	for (uint64_t i = 1; i < n; i++) {
		if (started[i])
			pthread_join(parts[i].thread, NULL);
		else
			moments_range(c, parts[i].s0, parts[i].s1);
	}
}

void cuda_segs_finish(cuda_ctx *c)
{
	/* the records are the loop thread's again once the job is posted */
	const gr_segjob *sj = c->segs;
	if (c->seg_op == GR_OP_MOMENTS)
		moments_records(c);
	else
		memcpy(sj->records + c->seg_first * c->seg_rb, c->seg_hrec,
		       c->seg_count * c->seg_rb);
	c->segs = NULL;
}

void cuda_segs_free(cuda_ctx *c)
{
	cudaFree(c->seg_doff);
	cudaFree(c->seg_drec);
	cudaFreeHost(c->seg_hrec);
	cudaFree(c->seg_scratch);
}
