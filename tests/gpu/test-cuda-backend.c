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
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <uv.h>

#include "engine/backend.h"
#include "engine/completion.h"
#include "engine/scheduler.h"
#include "math/reduce.h"

/* The ops the GPUs reduce (sum, min, max, sumsq: the first four); the
 * rest (argmin, argmax, moments) the CUDA backend refuses, and the daemon
 * reduces on its CPU route. */
#define GPU_OPS 4
/* The dtypes the CUDA backend takes in staging (the 4- and 8-byte ones:
 * the narrow dtypes' host data goes to the CPU engine; their device
 * memory is test_narrow_device's) */
#define WIDE_DT_N GR_DT_F16

#define CHECK(cond, ...)                                                               \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static uv_loop_t loop;
static gr_completion *cq;
static unsigned outstanding;
static unsigned long checks;

static void job_done(gr_job *job)
{
	(void)job;
	outstanding--;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void fill(gr_dtype dt, uint8_t *p, size_t n)
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
static void check_job(const gr_job *j, const char *what)
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

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void job_init(gr_job *j, gr_op op, gr_dtype dt, const void *data, size_t n)
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
static void run_batch(gr_backend *b, gr_job *jobs, size_t count)
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
static gr_backend *fb_cpu;
static gr_engine_mover fb_mover;

static gr_backend *backend_new_fb(size_t staging, size_t chunk, unsigned streams,
				  const char *fault, bool fallback, int *ret_err, char *errbuf,
				  size_t errlen)
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

static gr_backend *backend_new(size_t staging, size_t chunk, unsigned streams, const char *fault,
			       int *ret_err, char *errbuf, size_t errlen)
{
	return backend_new_fb(staging, chunk, streams, fault, false, ret_err, errbuf, errlen);
}

static void test_ops(gr_backend *b)
{
	static const size_t sizes[] = { 0, 1, 31, 33, 1000003 };
	static const size_t offsets[] = { 0, 4, 8, 13 };
	gr_job job;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		for (int dt = 0; dt < WIDE_DT_N; dt++) {
			size_t n = sizes[si];
			for (size_t oi = 0; oi < sizeof(offsets) / sizeof(offsets[0]); oi++) {
				uint8_t *p = b->staging + offsets[oi];
				fill(dt, p, n);
				for (int op = 0; op < GPU_OPS; op++) {
					job_init(&job, op, dt, p, n);
					run_batch(b, &job, 1);
					check_job(&job, "ops");
				}
			}
		}
	}
}

static void test_specials(gr_backend *b)
{
	gr_job job;
	/* NaN, +Inf, -Inf, alone and together */
	for (int dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		for (int kind = 0; kind < 4; kind++) {
			size_t n = 5000;
			uint8_t *p = b->staging + 4;
			fill(dt, p, n);
			for (int k = 0; k < 3; k++) {
				size_t at = rng() % n;
				double v = kind == 0 ? NAN : kind == 1 ? INFINITY : kind == 2 ? -INFINITY
					   : (k == 0 ? INFINITY : k == 1 ? -INFINITY : NAN);
				if (dt == GR_DT_F32) {
					float f = (float)v;
					memcpy(p + 4 * at, &f, 4);
				} else {
					memcpy(p + 8 * at, &v, 8);
				}
			}
			for (int op = 0; op < GPU_OPS; op++) {
				job_init(&job, op, dt, p, n);
				run_batch(b, &job, 1);
				check_job(&job, "specials");
			}
		}
	}
	/* signed zeros, subnormals and NaNs of either sign among them, at
	 * sizes that end in each part of a unit and at every alignment */
	static const size_t zn[] = { 1, 2, 3, 31, 33, 257, 4099 };
	for (int dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		size_t es = gr_dtype_size(dt);
		for (size_t z = 0; z < sizeof(zn) / sizeof(zn[0]); z++) {
			for (int kind = 0; kind < 6; kind++) {
				size_t n = zn[z];
				uint8_t *p = b->staging + 64 + (rng() % (16 / es)) * es;
				for (size_t i = 0; i < n; i++) {
					uint64_t r = rng();
					double v;
					if (kind == 0) /* all +0 */
						v = 0.0;
					else if (kind == 1) /* all -0 */
						v = -0.0;
					else if (kind == 2) /* mixed zeros */
						v = (r & 1) ? -0.0 : 0.0;
					else if (kind == 3) /* zeros and tiny values of both signs */
						v = (r & 3) == 0 ? -0.0 : (r & 3) == 1 ? 0.0
						  : ((r & 4) ? -1.0 : 1.0) * (dt == GR_DT_F32 ? 1e-40 : 1e-310);
					else if (kind == 4) /* zeros, and a negative NaN */
						v = (r & 1) ? -0.0 : 0.0;
					else /* one value and its negation */
						v = (r & 1) ? -1.5 : 1.5;
					if (kind == 4 && i == n / 2)
						v = -NAN;
					if (dt == GR_DT_F32) {
						float f = (float)v;
						memcpy(p + 4 * i, &f, 4);
					} else {
						memcpy(p + 8 * i, &v, 8);
					}
				}
				for (int op = 0; op < GPU_OPS; op++) {
					job_init(&job, op, dt, p, n);
					run_batch(b, &job, 1);
					check_job(&job, "signed zeros");
				}
			}
		}
	}
	/* f64 sums of squares at the ends of their range: squares below
	 * 2^-1074 that decide a tie, the low half of a square that does,
	 * squares past DBL_MAX and sums of them that get there */
	static const double sq[][5] = {
		{ 1.0, 0x1p-27, 0x1p-27, 5e-324, 0 },
		{ 1 + 0x1p-52, 0x1p-27, -0x1p-27, 0, 0 },
		{ 0x1p-538, 0x1p-538, 0x1p-538, 0, 0 },
		{ 0x1p-538, -0x1p-538, 5e-324, 0, 0 },
		{ 0x1p511, 0x1p511, 0x1p511, 0x1p511 * (1 - 0x1p-52), 0 },
		{ 0x1p511, 0x1p511, 0x1p511, 0x1p511 * (1 - 0x1p-53), 0 },
		{ 1e300, 1e-300, 3e-310, 0x1p501, -1.0 },
	};
	for (size_t k = 0; k < sizeof(sq) / sizeof(sq[0]); k++) {
		uint8_t *p = b->staging + 8 * (k + 1);
		memcpy(p, sq[k], sizeof(sq[k]));
		job_init(&job, GR_OP_SUMSQ, GR_DT_F64, p, 5);
		run_batch(b, &job, 1);
		check_job(&job, "f64 squares at the ends of their range");
	}
	/* integer extremes: sums that wrap, exact i32 sums past 2^31 */
	static const int64_t i64s[] = { INT64_MIN, INT64_MAX, -1, 0 };
	for (int e = 0; e < 4; e++) {
		size_t n = 3001;
		uint8_t *p = b->staging + 8;
		for (size_t i = 0; i < n; i++) {
			int32_t a = e == 0 ? INT32_MIN : e == 1 ? INT32_MAX : (i & 1) ? INT32_MIN : INT32_MAX;
			memcpy(p + 4 * i, &a, 4);
		}
		for (int op = 0; op < GPU_OPS; op++) {
			job_init(&job, op, GR_DT_I32, p, n);
			run_batch(b, &job, 1);
			check_job(&job, "i32 extremes");
			job_init(&job, op, GR_DT_U32, p, n);
			run_batch(b, &job, 1);
			check_job(&job, "u32 extremes");
		}
		for (size_t i = 0; i < n; i++) {
			int64_t a = (e < 2) ? i64s[e] : i64s[(i + (size_t)e) % 4];
			memcpy(p + 8 * i, &a, 8);
		}
		for (int op = 0; op < GPU_OPS; op++) {
			job_init(&job, op, GR_DT_I64, p, n);
			run_batch(b, &job, 1);
			check_job(&job, "i64 extremes");
			job_init(&job, op, GR_DT_U64, p, n);
			run_batch(b, &job, 1);
			check_job(&job, "u64 extremes");
		}
	}
}

/* Two jobs' finished results, bit for bit (a float sum's value lies in
 * its exact accumulator, not in v). */
static uint64_t finished_bits(gr_op op, gr_dtype dt, const gr_partial *p)
{
	gr_value v;
	return gr_partial_finish(op, dt, p, &v) == GR_OK ? v.u : UINT64_C(0xbad);
}

static bool same_bits(const gr_job *a, const gr_job *b)
{
	return finished_bits(a->op, a->dtype, &a->result) ==
	       finished_bits(b->op, b->dtype, &b->result);
}

/*
 * The narrow dtypes in device memory: each (op, dtype) the backend takes
 * (gr_backend_narrow_on_device's pairs, on the element's boundary) bit
 * for bit against gr_reduce of the same bytes, at odd sizes and starts;
 * the others it does not take (the daemon copies them to the host), nor
 * narrow data in staging.
 */
static void test_narrow_device(gr_backend *b)
{
	static const size_t sizes[] = {1, 33, 4097, 1000003};
	const size_t cap = 2 * 1000003 + 64;
	uint8_t *h = malloc(cap), *d;
	CHECK(h && cudaMalloc((void **)&d, cap) == cudaSuccess, "memory");
	for (size_t i = 0; i < cap; i++)
		h[i] = (uint8_t)rng();
	/* finite floats: an all-ones exponent loses its top bit */
	for (size_t i = 0; i + 1 < cap; i += 2)
		if ((h[i + 1] & 0x7f) == 0x7f)
			h[i + 1] &= 0xbf;
	CHECK(cudaMemcpy(d, h, cap, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
	gr_job job;
	for (int dt = GR_DT_F16; dt < GR_DT_N; dt++) {
		const size_t es = gr_dtype_size(dt);
		for (int op = 0; op < GR_OP_N; op++) {
			for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
				for (size_t off = 0; off < 4; off++) {
					const size_t n = sizes[si];
					job_init(&job, op, dt, d + off, n);
					job.where = GR_AT_DEVICE;
					job.device = 0;
					bool want = gr_backend_narrow_on_device(op, dt) && off % es == 0;
					CHECK(b->ops->takes(b, &job) == want, "takes %s %s at +%zu",
					      gr_op_name(op), gr_dtype_name(dt), off);
					job.where = GR_AT_STAGING;
					job.data = b->staging;
					CHECK(!b->ops->takes(b, &job), "takes %s %s in staging",
					      gr_op_name(op), gr_dtype_name(dt));
					if (!want)
						continue;
					job_init(&job, op, dt, d + off, n);
					job.where = GR_AT_DEVICE;
					job.device = 0;
					run_batch(b, &job, 1);
					/* the reference reads the same bytes on the host */
					job.data = h + off;
					check_job(&job, "narrow device memory");
				}
			}
		}
	}
	cudaFree(d);
	free(h);
}

/* Ops without a GPU kernel fail, alone and among others that go on. */
static void test_no_kernel(gr_backend *b)
{
	float *p = (float *)b->staging;
	for (int i = 0; i < 100; i++)
		p[i] = (float)i;
	gr_job jobs[4];
	job_init(&jobs[0], GR_OP_SUM, GR_DT_F32, p, 100);
	job_init(&jobs[1], GR_OP_ARGMIN, GR_DT_F32, p, 100);
	job_init(&jobs[2], GR_OP_ARGMAX, GR_DT_F32, p, 100);
	job_init(&jobs[3], GR_OP_MOMENTS, GR_DT_F32, p, 100);
	run_batch(b, jobs, 4);
	check_job(&jobs[0], "beside argmin, argmax and moments");
	for (int i = 1; i < 4; i++)
		CHECK(jobs[i].status == -EINVAL && strstr(jobs[i].errmsg, "no kernel"),
		      "%s on the CUDA backend: status %d (%s)", gr_op_name(jobs[i].op),
		      jobs[i].status, jobs[i].errmsg);
	checks++;
}

/* Same bits over 100 repeats, and alone or among thousands of jobs. */
static void test_determinism(gr_backend *b)
{
	const size_t n = 1000003, nsmall = 3000;
	gr_job *jobs = calloc(nsmall + 2, sizeof(*jobs));
	CHECK(jobs, "out of memory");
	for (int dt = GR_DT_F32; dt <= GR_DT_F64; dt++) {
		for (int op = 0; op < GPU_OPS; op += 3) { /* sum and sumsq */
			uint8_t *p = b->staging + 4;
			fill(dt, p, n);
			size_t end = 4 + n * gr_dtype_size(dt);
			gr_job alone;
			job_init(&alone, op, dt, p, n);
			run_batch(b, &alone, 1);
			check_job(&alone, "alone");
			for (int rep = 0; rep < 100; rep++) {
				gr_job again;
				job_init(&again, op, dt, p, n);
				run_batch(b, &again, 1);
				CHECK(same_bits(&again, &alone),
				      "%s %s: repeat %d gave different bits", gr_op_name(op),
				      gr_dtype_name(dt), rep);
			}
			/* the same values again at another alignment */
			uint8_t *q = b->staging + end + 3;
			memcpy(q, p, n * gr_dtype_size(dt));
			size_t at = end + 3 + n * gr_dtype_size(dt);
			/* thousands of mixed small jobs around the two */
			size_t k = 0;
			job_init(&jobs[k++], op, dt, p, n);
			for (size_t i = 0; i < nsmall; i++) {
				gr_dtype sdt = (gr_dtype)(rng() % WIDE_DT_N);
				gr_op sop = (gr_op)(rng() % GPU_OPS);
				size_t sn = rng() % 400;
				at += rng() % 8;
				CHECK(at + sn * 8 < b->chunk_bytes, "slot too small for the test");
				fill(sdt, b->staging + at, sn);
				job_init(&jobs[k++], sop, sdt, b->staging + at, sn);
				at += sn * gr_dtype_size(sdt);
				if (i == nsmall / 2)
					job_init(&jobs[k++], op, dt, q, n);
			}
			run_batch(b, jobs, k);
			for (size_t i = 0; i < k; i++)
				check_job(&jobs[i], "batch");
			CHECK(same_bits(&jobs[0], &alone),
			      "%s %s: bits differ in a batch", gr_op_name(op), gr_dtype_name(dt));
			CHECK(jobs[nsmall / 2 + 2].data == q, "test bookkeeping");
			/* off its elements' boundary a float sum is the batch
			 * kernel's, which rounds as it goes (the daemon sends
			 * none such: cuda_takes), so it need not give the exact
			 * sum's bits; but the same bits alone as in a batch */
			gr_job q_alone;
			job_init(&q_alone, op, dt, q, n);
			run_batch(b, &q_alone, 1);
			CHECK(same_bits(&jobs[nsmall / 2 + 2], &q_alone),
			      "%s %s: bits differ at another alignment, alone and in a batch",
			      gr_op_name(op), gr_dtype_name(dt));
		}
	}
	free(jobs);
}

/* More batches at once than there are streams: they queue and all finish. */
static void test_many_batches(gr_backend *b)
{
	enum { NB = 64, PER = 5 };
	static gr_job jobs[NB][PER];
	uint8_t *p = b->staging + 12;
	size_t n = 200000;
	fill(GR_DT_F32, p, n);
	for (int i = 0; i < NB; i++) {
		for (int k = 0; k < PER; k++) {
			job_init(&jobs[i][k], (gr_op)(k % GPU_OPS), GR_DT_F32, p + 4 * (size_t)(i * 7 + k), n - (size_t)i * 100);
			jobs[i][k].next = k + 1 < PER ? &jobs[i][k + 1] : NULL;
		}
	}
	outstanding += NB * PER;
	for (int i = 0; i < NB; i++)
		b->ops->submit(b, &jobs[i][0]);
	while (outstanding)
		uv_run(&loop, UV_RUN_ONCE);
	for (int i = 0; i < NB; i++)
		for (int k = 0; k < PER; k++)
			check_job(&jobs[i][k], "many batches");
}

/*
 * Thousands of small jobs packed in two slots, the way the daemon packs
 * small requests, submitted from one thread as many small batches back to
 * back (and as batches of one): the engine may run any number of them in
 * one launch, and every job must come back with the bits it has when
 * submitted alone. Batches alternate between the slots now and then, so
 * runs are also cut where the data leave the device buffer, and a few are
 * pinned to a device.
 */
static void test_back_to_back(gr_backend *b)
{
	enum { NJ = 8000 };
	gr_job *jobs = calloc(NJ, sizeof(*jobs));
	gr_partial *ref = calloc(NJ, sizeof(*ref));
	unsigned *bstart = calloc(NJ + 1, sizeof(*bstart));
	CHECK(jobs && ref && bstart, "out of memory");
	CHECK(b->staging_bytes >= 2 * b->chunk_bytes, "test wants two slots");
	size_t at[2] = { 100, b->chunk_bytes + 64 };
	size_t end[2] = { b->chunk_bytes, 2 * b->chunk_bytes };
	unsigned nb = 0, nj = 0;
	while (nj < NJ) {
		unsigned len = 1 + (unsigned)(rng() % 24);
		int slot = rng() % 5 == 0;
		int pin = rng() % 53 == 0 ? (int)(nb % b->ndevices) : -1;
		bstart[nb++] = nj;
		for (unsigned k = 0; k < len && nj < NJ; k++, nj++) {
			gr_dtype dt = (gr_dtype)(rng() % WIDE_DT_N);
			gr_op op = (gr_op)(rng() % GPU_OPS);
			size_t n = rng() % 300;
			at[slot] += rng() % 8;
			CHECK(at[slot] + n * 8 <= end[slot], "slot too small for the test");
			uint8_t *p = b->staging + at[slot];
			fill(dt, p, n);
			at[slot] += n * gr_dtype_size(dt);
			job_init(&jobs[nj], op, dt, p, n);
			jobs[nj].device = pin;
		}
	}
	bstart[nb] = NJ;

	/* one by one: the reference */
	double t0 = now_s();
	for (unsigned i = 0; i < NJ; i++) {
		run_batch(b, &jobs[i], 1);
		check_job(&jobs[i], "alone");
		ref[i] = jobs[i].result;
	}
	double alone_s = now_s() - t0;

	for (int pass = 0; pass < 4; pass++) {
		/* passes 0-2: the batches above; pass 3: every job a batch */
		bool singles = pass == 3;
		for (unsigned i = 0; i < NJ; i++) {
			memset(&jobs[i].result, 0xa5, sizeof(jobs[i].result));
			jobs[i].status = 1;
			jobs[i].next = NULL;
		}
		outstanding += NJ;
		t0 = now_s();
		if (singles) {
			for (unsigned i = 0; i < NJ; i++)
				b->ops->submit(b, &jobs[i]);
		} else {
			for (unsigned k = 0; k < nb; k++) {
				for (unsigned i = bstart[k]; i + 1 < bstart[k + 1]; i++)
					jobs[i].next = &jobs[i + 1];
				b->ops->submit(b, &jobs[bstart[k]]);
			}
		}
		double submit_s = now_s() - t0;
		while (outstanding)
			uv_run(&loop, UV_RUN_ONCE);
		double all_s = now_s() - t0;
		for (unsigned i = 0; i < NJ; i++) {
			const gr_job *j = &jobs[i];
			CHECK(j->status == 0, "back to back: job %u: status %d (%s)", i, j->status,
			      j->errmsg);
			uint64_t got = finished_bits(j->op, j->dtype, &j->result);
			uint64_t want = finished_bits(j->op, j->dtype, &ref[i]);
			CHECK(j->result.count == ref[i].count && got == want,
			      "back to back: job %u (%s %s n=%zu): %#llx, alone %#llx", i,
			      gr_op_name(j->op), gr_dtype_name(j->dtype), j->n,
			      (unsigned long long)got, (unsigned long long)want);
			check_job(j, "back to back");
		}
		printf("back to back: %u jobs in %u batches: submit %.0f ns/job, all back in %.2f ms "
		       "(one by one: %.2f ms)\n",
		       NJ, singles ? NJ : nb, submit_s * 1e9 / NJ, all_s * 1e3, alone_s * 1e3);
	}
	free(bstart);
	free(ref);
	free(jobs);
}

/* Freed with batches still queued and in flight: free() gives every job
 * back, right, before it returns (it runs the completion queue itself). */
static void test_free_outstanding(void)
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
static void test_describe(gr_backend *b, bool loaded)
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

static void free_backend(gr_backend *b)
{
	gr_backend_free(b);
}

static void test_faults(void)
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
static void test_fault_under_load(const char *fault, bool fallback)
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
static void test_fallback(void)
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

static void test_big(void)
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
	test_no_kernel(b);
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
