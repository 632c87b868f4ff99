/*
 * Where the CPU backend's inline line lies: for jobs of 256 B .. 1 MiB (f32
 * sum), the time from submit() to the done callback, and the loop thread's
 * CPU time, when the job runs inline vs on a worker; and the same for
 * batches of 64 such jobs.
 *
 *   inline-bench [threads = online CPUs] [repetitions = 2000, at least 10]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/completion.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned bench_done;

static void bench_done_cb(gr_job *job)
{
	(void)job;
	bench_done++;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define BATCH 64

/* Median round trip (us) and mean loop-thread CPU (us) per batch of nb jobs. */
static void bench_one(uv_loop_t *loop, gr_backend *b, size_t bytes, unsigned nb, int reps,
                      double *ret_med, double *ret_cpu)
{
	static gr_job jobs[BATCH];
	double *t = malloc(reps * sizeof(double));
	double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	for (int r = -reps / 10; r < reps; r++) {
		memset(jobs, 0, sizeof(jobs));
		for (unsigned j = 0; j < nb; j++) {
			jobs[j].op = GR_OP_SUM;
			jobs[j].dtype = GR_DT_F32;
			/* each job its own data, like requests in a slot */
			jobs[j].data = b->staging + (j * bytes) % (b->chunk_bytes - bytes + 4);
			jobs[j].n = bytes / 4;
			jobs[j].device = -1;
			jobs[j].done = bench_done_cb;
			jobs[j].next = j + 1 < nb ? &jobs[j + 1] : NULL;
		}
		bench_done = 0;
		double t0 = clock_s(CLOCK_MONOTONIC);
		b->ops->submit(b, jobs);
		while (bench_done < nb)
			uv_run(loop, UV_RUN_ONCE);
		double t1 = clock_s(CLOCK_MONOTONIC);
		if (r < 0)
			cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID); /* warm-up */
		else
			t[r] = t1 - t0;
	}
	*ret_cpu = (clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0) / reps * 1e6;
	qsort(t, reps, sizeof(double), cmp_double);
	*ret_med = t[reps / 2] * 1e6;
	free(t);
}

int main(int argc, char **argv)
{
	unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
	int reps = argc > 2 ? atoi(argv[2]) : 2000;
	uv_loop_t loop;
	gr_completion *cq;
	gr_backend *bi, *bw;
	char err[256];

	if (reps < 10) {
		fprintf(stderr, "usage: inline-bench [threads] [repetitions >= 10]\n");
		return 2;
	}
	if (uv_loop_init(&loop) < 0 || gr_completion_new(&loop, &cq) < 0)
		return 1;
	gr_backend_config ci = {.threads = threads, .inline_max_bytes = SIZE_MAX - 1};
	gr_backend_config cw = {.threads = threads, .inline_max_bytes = 0};
	if (gr_backend_cpu_new(&ci, cq, &bi, err, sizeof(err)) < 0 ||
	    gr_backend_cpu_new(&cw, cq, &bw, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	for (size_t i = 0; i < bi->chunk_bytes / 4; i++) {
		float f = (float)(i % 1000) * 0.001f;
		memcpy(bi->staging + 4 * i, &f, 4);
		memcpy(bw->staging + 4 * i, &f, 4);
	}
	gr_device_info info;
	bw->ops->describe(bw, 0, &info);
	printf("%s, %u workers; median us submit->done (loop thread CPU us)\n", info.name,
	       info.units);
	printf("%8s  %-22s %-22s | %-24s %-24s\n", "bytes", "1 job inline", "1 job worker",
	       "64 jobs inline", "64 jobs worker");
	for (size_t bytes = 256; bytes <= (1 << 20); bytes *= 2) {
		double mi, ci_, mw, cw_, bmi, bci, bmw, bcw;
		bench_one(&loop, bi, bytes, 1, reps, &mi, &ci_);
		bench_one(&loop, bw, bytes, 1, reps, &mw, &cw_);
		unsigned nb = bytes * BATCH <= bi->chunk_bytes ? BATCH : bi->chunk_bytes / bytes;
		bench_one(&loop, bi, bytes, nb, reps / 10, &bmi, &bci);
		bench_one(&loop, bw, bytes, nb, reps / 10, &bmw, &bcw);
		printf(
		    "%8zu  %8.2f (%8.2f)    %8.2f (%8.2f)    | %2u: %8.1f (%8.1f)  %8.1f (%8.1f)\n",
		    bytes, mi, ci_, mw, cw_, nb, bmi, bci, bmw, bcw);
	}
	gr_backend_free(bi);
	gr_backend_free(bw);
	gr_completion_close(cq);
	uv_run(&loop, UV_RUN_DEFAULT);
	return uv_loop_close(&loop) == 0 ? 0 : 1;
}
