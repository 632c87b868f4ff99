/*
 * The CPU backend through its seam: batches of mixed jobs in staging memory,
 * run on 1, 2 and 4 workers, inline or not, each result bit for bit what
 * gr_reduce() gives; every done callback exactly once, on the loop; the
 * loop closes clean; bad configurations refused.
 */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "engine/completion.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
	return check_rng(&rng_state);
}

typedef struct test_job {
	gr_job job;
	unsigned done;
	pthread_t done_thread;
} test_job;

static pthread_t loop_thread;
static unsigned done_total;

static void test_done(gr_job *job)
{
	test_job *t = job->userdata;
	t->done++;
	t->done_thread = pthread_self();
	done_total++;
}

/* Random data that reads as finite floats of either width. */
static void fill_staging(gr_backend *b)
{
	for (size_t i = 0; i + 4 <= b->staging_bytes; i += 4) {
		uint64_t r = rng();
		float f = (float)(int64_t)(r >> 44) / 1000.0f;
		memcpy(b->staging + i, &f, 4);
	}
}

static const size_t job_sizes[] = {
    0,
    1,
    5,
    31,
    100,
    1000,
    4096,
    30000,
    GR_REDUCE_BLOCK,
    GR_REDUCE_BLOCK + 3,
    3 * GR_REDUCE_BLOCK,
    4 * GR_REDUCE_BLOCK + 1,
    200000,
    9 * GR_REDUCE_BLOCK - 7,
};

static void make_job(gr_backend *b, test_job *t, size_t max_bytes)
{
	memset(t, 0, sizeof(*t));
	gr_job *j = &t->job;
	j->op = rng() % GR_OP_N;
	j->dtype = rng() % GR_DT_NARROW_FIRST;
	size_t es = gr_dtype_size(j->dtype);
	j->n = job_sizes[rng() % (sizeof(job_sizes) / sizeof(job_sizes[0]))];
	if (j->n * es > max_bytes)
		j->n = max_bytes / es;
	/* anywhere in staging, at any byte */
	size_t room = b->staging_bytes - j->n * es;
	j->data = b->staging + rng() % (room + 1);
	j->device = -1;
	j->done = test_done;
	j->userdata = t;
	j->status = 12345;
}

static void check_job(const test_job *t)
{
	const gr_job *j = &t->job;
	CHECK_MSG(t->done == 1, "done called %u times", t->done);
	CHECK_MSG(pthread_equal(t->done_thread, loop_thread), "done off the loop thread");
	CHECK_MSG(j->status == 0, "status %d (%s)", j->status, j->errmsg);
	gr_partial want;
	gr_reduce(j->op, j->dtype, j->data, j->n, &want);
	CHECK_MSG(memcmp(&want, &j->result, sizeof(want)) == 0, "op %d dtype %d n %zu: result differs",
	      j->op, j->dtype, j->n);
}

static void run_until(uv_loop_t *loop, unsigned total)
{
	while (done_total < total)
		CHECK_MSG(uv_run(loop, UV_RUN_ONCE) >= 0, "uv_run");
}

/* Several batches in flight at once, then wait for all of them. */
static void run_batches(uv_loop_t *loop, gr_backend *b, unsigned nbatches, unsigned per_batch,
                        size_t max_bytes)
{
	test_job *tj = calloc((size_t)nbatches * per_batch, sizeof(*tj));
	CHECK_MSG(tj, "calloc");
	uint64_t batches0 = b->batches, jobs0 = b->batched_jobs;
	gr_device_info info0;
	b->ops->describe(b, 0, &info0);

	done_total = 0;
	for (unsigned k = 0; k < nbatches; k++) {
		test_job *t = tj + (size_t)k * per_batch;
		for (unsigned i = 0; i < per_batch; i++) {
			make_job(b, &t[i], max_bytes);
			t[i].job.next = i + 1 < per_batch ? &t[i + 1].job : NULL;
		}
		b->ops->submit(b, &t[0].job);
	}
	CHECK_MSG(b->batches == batches0 + nbatches, "batches");
	CHECK_MSG(b->batched_jobs == jobs0 + (uint64_t)nbatches * per_batch, "batched_jobs");
	run_until(loop, nbatches * per_batch);
	for (size_t i = 0; i < (size_t)nbatches * per_batch; i++)
		check_job(&tj[i]);

	gr_device_info info;
	b->ops->describe(b, 0, &info);
	CHECK_MSG(info.jobs == info0.jobs + (uint64_t)nbatches * per_batch, "jobs %" PRIu64, info.jobs);
	free(tj);
}

static void check_describe(gr_backend *b, unsigned threads)
{
	gr_device_info info;
	b->ops->describe(b, 0, &info);
	CHECK_MSG(strcmp(info.kind, "cpu") == 0, "kind %s", info.kind);
	CHECK_MSG(info.name[0], "no name");
	CHECK_MSG(info.healthy && strcmp(info.health, "ok") == 0, "health");
	CHECK_MSG(info.units == threads, "units %u", info.units);
	CHECK_MSG(info.memory_bytes > (64u << 20), "memory %" PRIu64, info.memory_bytes);
	CHECK_MSG(info.index == 0, "index");
	CHECK_MSG(b->ndevices == 1 && strcmp(b->name, "cpu") == 0, "ndevices, name");
}

static void check_bad_configs(gr_completion *cq)
{
	static const gr_backend_config bad[] = {
	    {.chunk_bytes = GR_REDUCE_ALIGN_BYTES + 1, .inline_max_bytes = SIZE_MAX},
	    {.chunk_bytes = GR_REDUCE_ALIGN_BYTES / 2, .inline_max_bytes = SIZE_MAX},
	    {.staging_bytes = 4 * GR_REDUCE_ALIGN_BYTES,
	     .chunk_bytes = 8 * GR_REDUCE_ALIGN_BYTES,
	     .inline_max_bytes = SIZE_MAX},
	    {.staging_bytes = GR_REDUCE_ALIGN_BYTES - 1, .inline_max_bytes = SIZE_MAX},
	    {.threads = 100000, .inline_max_bytes = SIZE_MAX},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";
		gr_backend *b = (gr_backend *)&err; /* must be overwritten */
		int r = gr_backend_cpu_new(&bad[i], cq, &b, err, sizeof(err));
		CHECK_MSG(r == -EINVAL, "bad config %zu: %d", i, r);
		CHECK_MSG(b == NULL, "ret set on failure");
		CHECK_MSG(err[0], "no reason for bad config %zu", i);
	}
	char err[256] = "";
	gr_backend *b;
	CHECK_MSG(gr_backend_cpu_new(NULL, NULL, &b, err, sizeof(err)) == -EINVAL, "no queue");
}

int main(void)
{
	uv_loop_t loop;
	gr_completion *cq;
	char err[256];

	loop_thread = pthread_self();
	CHECK_MSG(uv_loop_init(&loop) == 0, "loop");
	CHECK_MSG(gr_completion_new(&loop, &cq) == 0, "completion");

	check_bad_configs(cq);

	/* defaults */
	gr_backend_config dflt = {.inline_max_bytes = SIZE_MAX};
	gr_backend *b;
	CHECK_MSG(gr_backend_cpu_new(&dflt, cq, &b, err, sizeof(err)) == 0, "%s", err);
	CHECK_MSG(b->staging_bytes == (64u << 20) && b->chunk_bytes == (4u << 20), "default sizes");
	CHECK_MSG(((uintptr_t)b->staging & 63) == 0, "staging alignment");
	b = gr_backend_free(b);
	/* a small staging area gets a chunk that fits */
	gr_backend_config small = {.staging_bytes = 3 * GR_REDUCE_ALIGN_BYTES + 5,
	                           .inline_max_bytes = SIZE_MAX};
	CHECK_MSG(gr_backend_cpu_new(&small, cq, &b, err, sizeof(err)) == 0, "%s", err);
	CHECK_MSG(b->chunk_bytes == 3 * GR_REDUCE_ALIGN_BYTES, "chunk %zu", b->chunk_bytes);
	b = gr_backend_free(b);

	static const unsigned thread_counts[] = {1, 2, 4};
	static const size_t inline_max[] = {0, 4096, SIZE_MAX};
	for (size_t t = 0; t < 3; t++)
		for (size_t m = 0; m < 3; m++) {
			gr_backend_config cfg = {
			    .staging_bytes = 8u << 20,
			    .chunk_bytes = 4u << 20,
			    .threads = thread_counts[t],
			    .inline_max_bytes = inline_max[m],
			};
			CHECK_MSG(gr_backend_cpu_new(&cfg, cq, &b, err, sizeof(err)) == 0, "%s", err);
			check_describe(b, thread_counts[t]);
			fill_staging(b);
			run_batches(&loop, b, 6, 40, b->chunk_bytes);
			/* one long list of small jobs */
			run_batches(&loop, b, 1, 500, 64 << 10);

			/* an invalid job is posted with an error, the rest run */
			test_job bad, good;
			make_job(b, &good, 1 << 20);
			make_job(b, &bad, 1 << 20);
			bad.job.op = GR_OP_N;
			bad.job.next = &good.job;
			done_total = 0;
			b->ops->submit(b, &bad.job);
			run_until(&loop, 2);
			CHECK_MSG(bad.done == 1 && bad.job.status == -EINVAL && bad.job.errmsg[0],
			      "invalid job: %d", bad.job.status);
			check_job(&good);
			/* device 0 is this one; there is no other */
			make_job(b, &good, 1 << 20);
			make_job(b, &bad, 1 << 20);
			good.job.device = 0;
			bad.job.device = 1;
			good.job.next = &bad.job;
			done_total = 0;
			b->ops->submit(b, &good.job);
			run_until(&loop, 2);
			check_job(&good);
			CHECK_MSG(bad.done == 1 && bad.job.status == -ENODEV, "device 1: %d",
			      bad.job.status);

			/* free() with work queued: everything is posted first */
			test_job tj[30];
			gr_partial want[30];
			done_total = 0;
			for (unsigned i = 0; i < 30; i++) {
				make_job(b, &tj[i], b->chunk_bytes);
				gr_reduce(tj[i].job.op, tj[i].job.dtype, tj[i].job.data,
				          tj[i].job.n, &want[i]);
				tj[i].job.next = i + 1 < 30 ? &tj[i + 1].job : NULL;
			}
			b->ops->submit(b, &tj[0].job);
			b = gr_backend_free(b);
			run_until(&loop, 30);
			for (unsigned i = 0; i < 30; i++) {
				CHECK_MSG(tj[i].done == 1 && tj[i].job.status == 0, "job %u after free",
				      i);
				CHECK_MSG(memcmp(&tj[i].job.result, &want[i], sizeof(want[i])) == 0,
				      "job %u after free: result differs", i);
			}
		}

	gr_completion_close(cq);
	CHECK_MSG(uv_run(&loop, UV_RUN_DEFAULT) == 0, "run to the end");
	CHECK_MSG(uv_loop_close(&loop) == 0, "a handle leaked");
	printf("ok\n");
	return 0;
}
