/*
 * test-cuda-backend's cases of jobs and their results: every op and dtype
 * against the CPU at sizes 0 to a million, misaligned starts and
 * specials, the narrow dtypes in device memory, the ops the GPUs refuse,
 * determinism, many batches in flight, and batches back to back.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/cuda-backend-test.h"

void test_ops(gr_backend *b)
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

void test_specials(gr_backend *b)
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
void test_narrow_device(gr_backend *b)
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

/* Moments of host data: the CPU's whole result, bit for bit. */
static void check_moments(const gr_job *j, const char *what)
{
	gr_partial want;
	gr_moments g, w;
	memset(&g, 0, sizeof(g)); /* compared whole, padding too */
	memset(&w, 0, sizeof(w));
	gr_reduce(j->op, j->dtype, j->data, j->n, &want);
	CHECK(j->status == 0, "%s: moments %s n=%zu: status %d (%s)", what,
	      gr_dtype_name(j->dtype), j->n, j->status, j->errmsg);
	gr_err ge = gr_moments_finish(j->dtype, &j->result, 1, &g);
	gr_err we = gr_moments_finish(j->dtype, &want, 1, &w);
	CHECK(ge == we && (we != GR_OK || memcmp(&g, &w, sizeof(g)) == 0),
	      "%s: moments %s n=%zu: not the CPU's bits (%d, %d)", what, gr_dtype_name(j->dtype),
	      j->n, ge, we);
	checks++;
}

/*
 * argmin, argmax and moments of host memory (staging, and memory outside
 * it) run on their own kernels, alone in their launches, beside a sum in
 * the same batch, and give the CPU's bits and indexes; those off their
 * elements' size's boundary fail ("no kernel": the CPU reduces them).
 */
void test_host_alone(gr_backend *b)
{
	static const gr_dtype dts[] = {GR_DT_I32, GR_DT_I64, GR_DT_U32, GR_DT_U64, GR_DT_F32,
				       GR_DT_F64};
	const size_t n = 100003;
	uint8_t *outside = malloc(n * 8 + 64);
	CHECK(outside, "out of memory");
	for (size_t k = 0; k < sizeof(dts) / sizeof(dts[0]); k++) {
		gr_dtype dt = dts[k];
		size_t es = gr_dtype_size(dt);
		for (int where = 0; where < 2; where++) {
			uint8_t *p = where ? outside + 16 : b->staging + 64;
			fill(dt, p, n);
			/* ties: the first of them wins */
			memcpy(p + 777 * es, p + 99999 * es, es);
			gr_job jobs[5];
			job_init(&jobs[0], GR_OP_SUM, dt, p, n);
			job_init(&jobs[1], GR_OP_ARGMIN, dt, p, n);
			job_init(&jobs[2], GR_OP_ARGMAX, dt, p + es, n - 1);
			job_init(&jobs[3], GR_OP_MOMENTS, dt, p, n);
			job_init(&jobs[4], GR_OP_MOMENTS, dt, p + 3 * es, 5);
			for (int i = 0; i < 5; i++) {
				jobs[i].where = where ? GR_AT_HOST : GR_AT_STAGING;
				CHECK(b->ops->takes(b, &jobs[i]), "takes %s %s of host memory",
				      gr_op_name(jobs[i].op), gr_dtype_name(dt));
			}
			run_batch(b, jobs, 5);
			const char *what = where ? "outside staging" : "staging";
			for (int i = 0; i < 3; i++)
				check_job(&jobs[i], what);
			check_moments(&jobs[3], what);
			check_moments(&jobs[4], what);
		}
	}
	/* off the boundary: no kernel reads them, alone or among others */
	float *p = (float *)(b->staging + 64);
	for (int i = 0; i < 100; i++)
		p[i] = (float)i;
	gr_job jobs[4];
	job_init(&jobs[0], GR_OP_SUM, GR_DT_F32, p, 100);
	job_init(&jobs[1], GR_OP_ARGMIN, GR_DT_F32, (uint8_t *)p + 2, 10);
	job_init(&jobs[2], GR_OP_ARGMAX, GR_DT_F64, (uint8_t *)p + 4, 10);
	job_init(&jobs[3], GR_OP_MOMENTS, GR_DT_I32, (uint8_t *)p + 1, 10);
	for (int i = 1; i < 4; i++) {
		jobs[i].where = GR_AT_STAGING;
		CHECK(!b->ops->takes(b, &jobs[i]), "takes %s %s off its boundary",
		      gr_op_name(jobs[i].op), gr_dtype_name(jobs[i].dtype));
	}
	run_batch(b, jobs, 4);
	check_job(&jobs[0], "beside argmin, argmax and moments off their boundary");
	for (int i = 1; i < 4; i++)
		CHECK(jobs[i].status == -EINVAL && strstr(jobs[i].errmsg, "no kernel"),
		      "%s off its boundary on the CUDA backend: status %d (%s)",
		      gr_op_name(jobs[i].op), jobs[i].status, jobs[i].errmsg);
	checks++;
	free(outside);
}

/* Same bits over 100 repeats, and alone or among thousands of jobs. */
void test_determinism(gr_backend *b)
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
void test_many_batches(gr_backend *b)
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
void test_back_to_back(gr_backend *b)
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
