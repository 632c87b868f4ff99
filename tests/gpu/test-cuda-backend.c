/*
 * The CUDA backend through the seam (engine/backend.h), on a libuv loop
 * with the daemon's completion queue: every op and dtype against the CPU
 * reduction gr_reduce() at sizes 0 to a million, misaligned starts, NaN,
 * infinities, integer extremes and f64 squares at the ends of their
 * range; float sums and sums of squares bit for bit the CPU's where their
 * elements are aligned; floats bit for bit the same over repeats and
 * whether a job rides alone or among thousands; many batches
 * in flight at once; thousands of small batches back to back, which the
 * engine may merge, against the same jobs one by one; a 2^28 + 5 element
 * job; the injected-fault path; and the CPU fallback once no device is
 * left in service.
 * Exits 77 when there is no GPU.
 *
 * Here: the fixture (cuda-backend-test.h) and main(); the cases are
 * cuda-backend-jobs.c's and cuda-backend-faults.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/gpu/cuda-backend-test.h"

uv_loop_t loop;
gr_completion *cq;
unsigned outstanding;
unsigned long checks;

static void job_done(gr_job *job)
{
	(void)job;
	outstanding--;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

void fill(gr_dtype dt, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rng();
		union {
			int32_t i32;
			int64_t i64;
			uint32_t u32;
			uint64_t u64;
			float f32;
			double f64;
		} v;
		switch (dt) {
		case GR_DT_I32: v.i32 = (int32_t)r; break;
		case GR_DT_I64: v.i64 = (int64_t)r; break;
		case GR_DT_U32: v.u32 = (uint32_t)r; break;
		case GR_DT_U64: v.u64 = r; break;
		case GR_DT_F32: v.f32 = (float)((int64_t)(r >> 11) % 2000001 - 1000000) / 1000.0f; break;
		default: v.f64 = (double)((int64_t)(r >> 11) % 2000001 - 1000000) / 997.0; break;
		}
		memcpy(p + i * gr_dtype_size(dt), &v, gr_dtype_size(dt));
	}
}

static double magnitude(gr_op op, gr_dtype dt, const uint8_t *p, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		double x;
		if (dt == GR_DT_F32) {
			float f;
			memcpy(&f, p + 4 * i, 4);
			x = f;
		} else if (dt == GR_DT_F64) {
			memcpy(&x, p + 8 * i, 8);
		} else if (dt == GR_DT_I32) {
			int32_t v;
			memcpy(&v, p + 4 * i, 4);
			x = v;
		} else if (dt == GR_DT_U32) {
			uint32_t v;
			memcpy(&v, p + 4 * i, 4);
			x = v;
		} else if (dt == GR_DT_I64) {
			int64_t v;
			memcpy(&v, p + 8 * i, 8);
			x = (double)v;
		} else {
			uint64_t v;
			memcpy(&v, p + 8 * i, 8);
			x = (double)v;
		}
		if (isfinite(x))
			m += op == GR_OP_SUMSQ ? x * x : fabs(x);
	}
	return m;
}

/*
 * The job's result against gr_reduce on the same bytes, both through
 * gr_partial_finish(): the CPU's float sums keep their value in the exact
 * accumulator, so only the finished value can be compared.
 */
void check_job(const gr_job *j, const char *what)
{
	gr_partial want;
	gr_reduce(j->op, j->dtype, j->data, j->n, &want);
	const char *on = gr_op_name(j->op), *dn = gr_dtype_name(j->dtype);
	CHECK(j->status == 0, "%s: %s %s n=%zu: status %d (%s)", what, on, dn, j->n, j->status,
	      j->errmsg);
	CHECK(j->result.count == want.count, "%s: %s %s n=%zu: count %llu, want %llu", what, on,
	      dn, j->n, (unsigned long long)j->result.count, (unsigned long long)want.count);
	gr_value g, w;
	gr_err ge = gr_partial_finish(j->op, j->dtype, &j->result, &g);
	gr_err we = gr_partial_finish(j->op, j->dtype, &want, &w);
	CHECK(ge == we && g.kind == w.kind, "%s: %s %s n=%zu: finish gave %d (kind %d), want %d (kind %d)",
	      what, on, dn, j->n, ge, g.kind, we, w.kind);
	if (we == GR_OK && w.kind == GR_KIND_F64) {
		if (isnan(w.f)) {
			CHECK(isnan(g.f), "%s: %s %s n=%zu: got %.17g, want NaN", what, on, dn, j->n, g.f);
		} else if (isinf(w.f)) {
			CHECK(g.f == w.f, "%s: %s %s n=%zu: got %.17g, want %.17g", what, on, dn, j->n,
			      g.f, w.f);
		} else if (j->op == GR_OP_MIN || j->op == GR_OP_MAX || gr_op_has_index(j->op)) {
			/* bit for bit: -0 is below +0 (argmin and argmax of
			 * device memory: an element's value) */
			CHECK(memcmp(&g.f, &w.f, sizeof(double)) == 0,
			      "%s: %s %s n=%zu: got %.17g (%a), want %.17g (%a)", what, on, dn, j->n,
			      g.f, g.f, w.f, w.f);
		} else if (((j->op == GR_OP_SUM || j->op == GR_OP_SUMSQ) &&
			    (j->dtype == GR_DT_F32 || j->dtype == GR_DT_F64) &&
			    (uintptr_t)j->data % gr_dtype_size(j->dtype) == 0) ||
			   gr_dtype_is_narrow(j->dtype)) {
			/* exact on the GPU too (float sums and sums of
			 * squares, and every op of a narrow dtype, moments'
			 * sum included: magnitude() reads no narrow dtype):
			 * the CPU's bits */
			CHECK(memcmp(&g.f, &w.f, sizeof(double)) == 0,
			      "%s: %s %s n=%zu: got %.17g (%a), want %.17g (%a): not the exact sum",
			      what, on, dn, j->n, g.f, g.f, w.f, w.f);
		} else {
			double tol = 1e-10 * magnitude(j->op, j->dtype, j->data, j->n) + 1e-300;
			CHECK(fabs(g.f - w.f) <= tol, "%s: %s %s n=%zu: got %.17g, want %.17g (tol %g)",
			      what, on, dn, j->n, g.f, w.f, tol);
		}
	} else {
		CHECK(g.u == w.u, "%s: %s %s n=%zu: got %#llx, want %#llx", what, on, dn, j->n,
		      (unsigned long long)g.u, (unsigned long long)w.u);
	}
	if (gr_op_has_index(j->op) && we == GR_OK)
		CHECK(j->result.index == want.index, "%s: %s %s n=%zu: index %llu, want %llu", what,
		      on, dn, j->n, (unsigned long long)j->result.index,
		      (unsigned long long)want.index);
	checks++;
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void job_init(gr_job *j, gr_op op, gr_dtype dt, const void *data, size_t n)
{
	memset(j, 0, sizeof(*j));
	j->op = op;
	j->dtype = dt;
	j->data = data;
	j->n = n;
	j->device = -1;
	j->done = job_done;
}

/* Submit a list of jobs as one batch and run the loop until all are back. */
void run_batch(gr_backend *b, gr_job *jobs, size_t count)
{
	for (size_t i = 0; i < count; i++)
		jobs[i].next = i + 1 < count ? &jobs[i + 1] : NULL;
	outstanding += (unsigned)count;
	b->ops->submit(b, jobs);
	while (outstanding)
		uv_run(&loop, UV_RUN_ONCE);
}

/* The CPU engine the fallback's jobs move to, as the scheduler makes it
 * (engine/scheduler.c): started at the first backend that falls back. */
gr_backend *fb_cpu;
static gr_engine_mover fb_mover;

gr_backend *backend_new_fb(size_t staging, size_t chunk, unsigned streams, const char *fault,
			   bool fallback, int *ret_err, char *errbuf, size_t errlen)
{
	if (fallback && !fb_cpu) {
		gr_backend_config cc = {
			.staging_bytes = GR_REDUCE_ALIGN_BYTES,
			.chunk_bytes = GR_REDUCE_ALIGN_BYTES,
			.threads = 2,
			.inline_max_bytes = SIZE_MAX,
		};
		CHECK(gr_backend_cpu_new(&cc, cq, &fb_cpu, errbuf, errlen) == 0, "CPU engine: %s",
		      errbuf);
		gr_sched_mover_cpu(fb_cpu, &fb_mover);
	}
	gr_backend_config cfg = {
		.staging_bytes = staging,
		.chunk_bytes = chunk,
		.streams = streams,
		.threads = 2,
		.inline_max_bytes = SIZE_MAX,
		.fault = fault,
		.mover = fallback ? &fb_mover : NULL,
	};
	gr_backend *b = NULL;
	*ret_err = gr_backend_cuda_new(&cfg, cq, &b, errbuf, errlen);
	return b;
}

gr_backend *backend_new(size_t staging, size_t chunk, unsigned streams, const char *fault,
			int *ret_err, char *errbuf, size_t errlen)
{
	return backend_new_fb(staging, chunk, streams, fault, false, ret_err, errbuf, errlen);
}

void free_backend(gr_backend *b)
{
	gr_backend_free(b);
}

int main(void)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	/* a line at a time, so that a crash still shows how far it got */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* a hang is a failure */
	alarm(600);
	CHECK(uv_loop_init(&loop) == 0, "uv_loop_init");
	CHECK(gr_completion_new(&loop, &cq) == 0, "gr_completion_new");

	char err[256];
	int r;
	gr_backend *b = backend_new(64 << 20, 32 << 20, 4, NULL, &r, err, sizeof(err));
	CHECK(r == 0 && b, "gr_backend_cuda_new: %d %s", r, err);
	CHECK(b->staging && b->staging_bytes == (64 << 20) && b->chunk_bytes == (32 << 20),
	      "staging %zu chunk %zu", b->staging_bytes, b->chunk_bytes);
	CHECK(!strcmp(b->name, "cuda"), "name %s", b->name);
	test_describe(b, false);
	test_ops(b);
	printf("ops: ok (%lu checks)\n", checks);
	test_specials(b);
	printf("specials: ok (%lu checks)\n", checks);
	test_host_alone(b);
	printf("argmin, argmax and moments of host memory: ok (%lu checks)\n", checks);
	test_narrow_device(b);
	printf("narrow dtypes in device memory: ok (%lu checks)\n", checks);
	test_determinism(b);
	printf("determinism: ok (%lu checks)\n", checks);
	test_many_batches(b);
	printf("many batches: ok (%lu checks)\n", checks);
	test_back_to_back(b);
	printf("back to back: ok (%lu checks)\n", checks);
	test_describe(b, true);
	free_backend(b);
	test_free_outstanding();
	printf("freed with jobs out: ok (%lu checks)\n", checks);

	test_faults();
	test_fault_under_load("launch:device=0:after=1", false);
	test_fault_under_load("sync:device=0:after=1", false);
	printf("faults: ok (%lu checks)\n", checks);
	test_fallback();
	test_fault_under_load("launch:after=1", true);
	/* the second launch's sync fails: with after=2 the third would, and
	 * the 399 batches behind the first may all go out in the second */
	test_fault_under_load("sync:after=1", true);
	printf("CPU fallback: ok (%lu checks)\n", checks);
	if (!getenv("GPURED_TEST_SKIP_BIG")) {
		test_big();
		printf("2^28+5: ok (%lu checks)\n", checks);
	}

	fb_cpu = gr_backend_free(fb_cpu);
	gr_completion_close(cq);
	CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0, "uv_run");
	CHECK(uv_loop_close(&loop) == 0, "a handle was left open");
	printf("cuda backend: %lu checks passed\n", checks);
	return 0;
}
