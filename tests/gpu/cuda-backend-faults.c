/*
 * test-cuda-backend's cases of a backend's life and its failures: freed
 * with jobs out, its devices described, injected faults (alone and under
 * load), the CPU fallback, and a 2^28 + 5 element job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/cuda-backend-test.h"

/* Freed with batches still queued and in flight: free() gives every job
 * back, right, before it returns (it runs the completion queue itself). */
void test_free_outstanding(void)
{
	enum { NJ = 3000, PER = 100 };
	char err[256];
	int r;
	gr_backend *b = backend_new(64 << 20, 32 << 20, 4, NULL, &r, err, sizeof(err));
	CHECK(r == 0 && b, "gr_backend_cuda_new: %d %s", r, err);
	gr_job *jobs = calloc(NJ, sizeof(*jobs));
	CHECK(jobs, "out of memory");
	size_t at = 0;
	for (unsigned i = 0; i < NJ; i++) {
		gr_dtype dt = (gr_dtype)(rng() % WIDE_DT_N);
		size_t n = rng() % 500;
		uint8_t *p = b->staging + at;
		fill(dt, p, n);
		at += (n * gr_dtype_size(dt) + 63) / 64 * 64;
		job_init(&jobs[i], (gr_op)(rng() % GPU_OPS), dt, p, n);
		jobs[i].next = (i + 1) % PER ? &jobs[i + 1] : NULL;
	}
	/* the data, to check against once staging is gone */
	uint8_t *copy = malloc(at);
	CHECK(copy, "out of memory");
	memcpy(copy, b->staging, at);
	outstanding += NJ;
	for (unsigned i = 0; i < NJ; i += PER)
		b->ops->submit(b, &jobs[i]);
	const uint8_t *staging = b->staging;
	gr_backend_free(b);
	CHECK(outstanding == 0, "%u jobs not back after free()", outstanding);
	for (unsigned i = 0; i < NJ; i++) {
		jobs[i].data = copy + ((const uint8_t *)jobs[i].data - staging);
		check_job(&jobs[i], "freed with jobs out");
	}
	free(copy);
	free(jobs);
}

/* After a load, with loaded set, every device must have taken jobs: work
 * spreads over all the GPUs of the host. */
void test_describe(gr_backend *b, bool loaded)
{
	CHECK(b->ndevices >= 1, "no devices");
	for (unsigned i = 0; i < b->ndevices; i++) {
		gr_device_info info;
		b->ops->describe(b, i, &info);
		CHECK(info.name[0] && info.compute_capability[0] && info.units > 0 &&
			      info.memory_bytes > 0 && info.driver_version > 0 &&
			      info.runtime_version > 0,
		      "device %u described poorly", i);
		CHECK(info.healthy && !strcmp(info.health, "ok"), "device %u: %s", i, info.health);
		printf("device %u: %s, cc %s, %u SMs, %llu MiB, driver %d, runtime %d, %s, %llu jobs\n",
		       i, info.name, info.compute_capability, info.units,
		       (unsigned long long)(info.memory_bytes >> 20), info.driver_version,
		       info.runtime_version, info.pci_bus_id, (unsigned long long)info.jobs);
		CHECK(!loaded || info.jobs > 0, "device %u of %u took no job", i, b->ndevices);
	}
}

void test_faults(void)
{
	char err[256];
	int r;
	gr_backend *b = backend_new(16 << 20, 8 << 20, 2, "launch:device=0:after=3", &r, err,
				    sizeof(err));
	CHECK(r == 0 && b, "backend with faults: %d %s", r, err);
	uint8_t *p = b->staging + 4;
	fill(GR_DT_F64, p, 1000);
	gr_job job;
	for (int i = 0; i < 3; i++) {
		job_init(&job, GR_OP_SUM, GR_DT_F64, p, 1000);
		job.device = 0;
		run_batch(b, &job, 1);
		check_job(&job, "before the fault");
	}
	job_init(&job, GR_OP_SUM, GR_DT_F64, p, 1000);
	job.device = 0;
	run_batch(b, &job, 1);
	CHECK(job.status == -EIO, "injected launch fault: status %d", job.status);
	CHECK(strstr(job.errmsg, "cudaLaunchKernel on device 0 ("), "errmsg: %s", job.errmsg);
	printf("fault: %s\n", job.errmsg);
	gr_device_info info;
	b->ops->describe(b, 0, &info);
	CHECK(!info.healthy && strstr(info.health, "cudaLaunchKernel"), "device 0 still healthy: %s",
	      info.health);
	/* later jobs: other devices if there are any, else a prompt -EIO */
	double t0 = now_s();
	job_init(&job, GR_OP_MAX, GR_DT_F64, p, 1000);
	run_batch(b, &job, 1);
	double dt = now_s() - t0;
	if (b->ndevices == 1) {
		CHECK(job.status == -EIO, "no device left: status %d", job.status);
		CHECK(dt < 1.0, "failing took %.3f s", dt);
	} else {
		check_job(&job, "after the fault, on another device");
	}
	job_init(&job, GR_OP_MAX, GR_DT_F64, p, 1000);
	job.device = 0;
	run_batch(b, &job, 1);
	CHECK(job.status == -EIO, "job pinned to the failed device: status %d", job.status);
	checks++;
	free_backend(b);

	/* an error found at completion time */
	b = backend_new(16 << 20, 8 << 20, 2, "sync:after=0", &r, err, sizeof(err));
	CHECK(r == 0 && b, "backend with sync fault: %d %s", r, err);
	job_init(&job, GR_OP_SUM, GR_DT_I32, b->staging, 100);
	job.device = 0;
	run_batch(b, &job, 1);
	CHECK(job.status == -EIO && strstr(job.errmsg, "cudaEventQuery on device 0"), "sync fault: %d %s",
	      job.status, job.errmsg);
	free_backend(b);

	/* no device that initialises: -ENODEV with a reason */
	b = backend_new(0, 0, 1, "init", &r, err, sizeof(err));
	CHECK(r == -ENODEV && !b && err[0], "init fault: %d", r);
	b = backend_new(0, 0, 1, "bogus:after=x", &r, err, sizeof(err));
	CHECK(r == -EINVAL && !b, "bad fault spec accepted: %d", r);
	checks += 3;
}

/*
 * A device failing while hundreds of batches are queued on it: every job
 * still comes back, right or with -EIO and a reason; jobs pinned to the
 * failed device fail; the others move to a device still in service, if
 * there is one.
 */
void test_fault_under_load(const char *fault, bool fallback)
{
	enum { NB = 400, PER = 8 };
	char err[256];
	int r;
	gr_backend *b = backend_new_fb(16 << 20, 8 << 20, 2, fault, fallback, &r, err, sizeof(err));
	CHECK(r == 0 && b, "backend with %s: %d %s", fault, r, err);
	const unsigned ngpu = b->ndevices; /* before any of them fails */
	gr_job *jobs = calloc(NB * PER, sizeof(*jobs));
	CHECK(jobs, "out of memory");
	size_t at = 16;
	for (unsigned i = 0; i < NB * PER; i++) {
		size_t n = 1 + rng() % 200;
		fill(GR_DT_I64, b->staging + at, n);
		job_init(&jobs[i], (gr_op)(i % GPU_OPS), GR_DT_I64, b->staging + at, n);
		at += n * 8 + rng() % 8;
		/* the first batch and every tenth pinned to the device that fails */
		if ((i / PER) % 10 == 9 || i < PER)
			jobs[i].device = 0;
	}
	/* the first launch on device 0 runs, alone; its next one fails */
	run_batch(b, jobs, PER);
	for (unsigned i = 0; i < PER; i++)
		check_job(&jobs[i], "before the fault");
	outstanding += (NB - 1) * PER;
	for (unsigned k = 1; k < NB; k++) {
		for (unsigned i = k * PER; i + 1 < (k + 1) * PER; i++)
			jobs[i].next = &jobs[i + 1];
		b->ops->submit(b, &jobs[k * PER]);
	}
	while (outstanding)
		uv_run(&loop, UV_RUN_ONCE);
	gr_device_info info;
	b->ops->describe(b, 0, &info);
	CHECK(!info.healthy, "%s: device 0 still healthy", fault);
	unsigned ok = 0, failed = 0, late_ok = 0;
	for (unsigned i = 0; i < NB * PER; i++) {
		if (jobs[i].status == 0) {
			check_job(&jobs[i], fault);
			ok++;
			late_ok += i >= NB * PER / 2;
			continue;
		}
		CHECK(jobs[i].status == -EIO && jobs[i].errmsg[0], "%s: job %u: status %d", fault, i,
		      jobs[i].status);
		failed++;
	}
	/* the last pinned batch went in long after the fault */
	CHECK(jobs[NB * PER - 1].status == -EIO, "%s: last pinned job: status %d", fault,
	      jobs[NB * PER - 1].status);
	if (fallback) {
		/* The failing launches may have taken every job queued (a
		 * launch takes all that fit): jobs sent now meet at most one
		 * more failing launch on each device still in service, then
		 * run on another device or the CPU. */
		gr_job *j = &jobs[0];
		for (unsigned k = 0; k <= ngpu; k++) {
			job_init(j, GR_OP_SUM, GR_DT_I64, b->staging + 16, 100);
			run_batch(b, j, 1);
			if (j->status == 0)
				break;
			CHECK(j->status == -EIO, "%s: after the load: status %d", fault, j->status);
		}
		check_job(j, "after the load, with the CPU fallback");
	} else if (ngpu > 1) {
		CHECK(late_ok > 0, "%s: nothing moved to another device", fault);
	}
	printf("%s%s under load: %u ok, %u failed, e.g. %s\n", fault,
	       fallback ? " with the CPU fallback" : "", ok, failed, jobs[NB * PER - 1].errmsg);
	checks++;
	free(jobs);
	free_backend(b);
}

/* A job's finished value against gr_reduce()'s, bit for bit. */
static void check_job_bits(const gr_job *j, const char *what)
{
	gr_partial want;
	gr_value g, w;
	check_job(j, what);
	gr_reduce(j->op, j->dtype, j->data, j->n, &want);
	gr_err ge = gr_partial_finish(j->op, j->dtype, &j->result, &g);
	gr_err we = gr_partial_finish(j->op, j->dtype, &want, &w);
	CHECK(ge == we && (we != GR_OK || (g.kind == w.kind && g.u == w.u)),
	      "%s: %s %s n=%zu: not the CPU's bits", what, gr_op_name(j->op),
	      gr_dtype_name(j->dtype), j->n);
	checks++;
}

/*
 * The CPU fallback. Every launch fails, so each device goes out of service
 * on the first job it gets, which fails; from then on jobs run on the
 * CPU, bit for bit as gr_reduce() gives them (small ones on the thread
 * that submits, large ones split over workers), the CPU is described as
 * one more device, and a job pinned to a failed device still fails.
 */
void test_fallback(void)
{
	static const size_t sizes[] = { 0, 1, 33, 1000003 };
	char err[256];
	int r;
	gr_backend *b = backend_new_fb(16 << 20, 8 << 20, 2, "launch", true, &r, err, sizeof(err));
	CHECK(r == 0 && b, "backend with the CPU fallback: %d %s", r, err);
	const unsigned ngpu = b->ndevices;
	uint8_t *p = b->staging + 4;
	gr_device_info info;
	gr_job job;

	fill(GR_DT_F32, p, 1000);
	for (unsigned i = 0; i < ngpu; i++) {
		CHECK(gr_backend_ndevices(b) == ngpu, "fallback with a device in service");
		job_init(&job, GR_OP_SUM, GR_DT_F32, p, 1000);
		run_batch(b, &job, 1);
		CHECK(job.status == -EIO && strstr(job.errmsg, "cudaLaunchKernel"),
		      "device %u's first launch: status %d %s", i, job.status, job.errmsg);
	}
	for (unsigned i = 0; i < ngpu; i++) {
		b->ops->describe(b, i, &info);
		CHECK(!info.healthy, "device %u still in service", i);
	}
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		for (int dt = 0; dt < WIDE_DT_N; dt++) {
			uint8_t *q = b->staging + 13 * (si & 1);
			fill(dt, q, sizes[si]);
			for (int op = 0; op < GPU_OPS; op++) {
				job_init(&job, op, dt, q, sizes[si]);
				run_batch(b, &job, 1);
				check_job_bits(&job, "on the CPU fallback");
			}
		}
	}
	CHECK(gr_backend_ndevices(b) == ngpu + 1, "%u devices", gr_backend_ndevices(b));
	b->ops->describe(b, ngpu, &info);
	CHECK(!strcmp(info.kind, "cpu") && info.healthy && info.index == (int)ngpu &&
		      info.units == 2 && info.jobs == 4 * WIDE_DT_N * GPU_OPS,
	      "fallback: kind %s healthy %d index %d threads %u jobs %llu", info.kind, info.healthy,
	      info.index, info.units, (unsigned long long)info.jobs);
	printf("fallback: %s: %s\n", info.name, info.health);
	job_init(&job, GR_OP_MAX, GR_DT_F64, p, 100);
	job.device = 0;
	run_batch(b, &job, 1);
	CHECK(job.status == -EIO, "job pinned to a failed device: status %d", job.status);
	checks += 4;
	free_backend(b);

	/* without it, jobs fail at once */
	b = backend_new(16 << 20, 8 << 20, 2, "launch", &r, err, sizeof(err));
	CHECK(r == 0 && b, "backend: %d %s", r, err);
	p = b->staging + 4; /* the last backend's staging is gone */
	fill(GR_DT_I32, p, 100);
	for (unsigned i = 0; i <= ngpu; i++) {
		job_init(&job, GR_OP_SUM, GR_DT_I32, p, 100);
		run_batch(b, &job, 1);
		CHECK(job.status == -EIO, "job %u: status %d", i, job.status);
	}
	CHECK(strstr(job.errmsg, "no healthy CUDA device left"), "errmsg: %s", job.errmsg);
	CHECK(gr_backend_ndevices(b) == ngpu, "%u devices", gr_backend_ndevices(b));
	checks += 2;
	free_backend(b);
}

void test_big(void)
{
	const size_t n = ((size_t)1 << 28) + 5;
	size_t bytes = n * 4;
	size_t chunk = (bytes + GR_REDUCE_ALIGN_BYTES - 1) / GR_REDUCE_ALIGN_BYTES * GR_REDUCE_ALIGN_BYTES;
	char err[256];
	int r;
	gr_backend *b = backend_new(chunk, chunk, 1, NULL, &r, err, sizeof(err));
	CHECK(r == 0 && b, "big backend: %d %s", r, err);
	uint8_t *p = b->staging;
	fill(GR_DT_F32, p, n);
	static const gr_op ops[] = { GR_OP_SUM, GR_OP_MAX };
	gr_job job;
	for (int i = 0; i < 2; i++) {
		job_init(&job, ops[i], GR_DT_F32, p, n);
		run_batch(b, &job, 1);
		check_job(&job, "2^28+5 f32");
	}
	fill(GR_DT_I32, p, n);
	static const gr_op iops[] = { GR_OP_SUM, GR_OP_MIN };
	for (int i = 0; i < 2; i++) {
		job_init(&job, iops[i], GR_DT_I32, p, n);
		run_batch(b, &job, 1);
		check_job(&job, "2^28+5 i32");
	}
	free_backend(b);
}
