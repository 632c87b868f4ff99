/*
 * What test-cuda-backend's three files share: the loop and completion
 * queue the backend runs on, the counted checks, the seeded data, the
 * check of a job against the CPU's gr_reduce(), running batches, the
 * backends under test, and the cases: jobs and results
 * (cuda-backend-jobs.c), faults and the CPU fallback
 * (cuda-backend-faults.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

extern uv_loop_t loop;
extern gr_completion *cq;
/* Jobs submitted and not yet back. */
extern unsigned outstanding;
extern unsigned long checks;
/* The CPU engine the fallback's jobs move to, once one is started. */
extern gr_backend *fb_cpu;

/* The seeded generator, and n elements of dt from it at p. */
uint64_t rng(void);
void fill(gr_dtype dt, uint8_t *p, size_t n);

/* The job's result against gr_reduce() on the same bytes (counted). */
void check_job(const gr_job *j, const char *what);

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

void job_init(gr_job *j, gr_op op, gr_dtype dt, const void *data, size_t n);

/* Submit count jobs as one batch and run the loop until all are back. */
void run_batch(gr_backend *b, gr_job *jobs, size_t count);

/* A CUDA backend on cq (fallback: with the CPU fallback); NULL and
 * *ret_err on failure. */
gr_backend *backend_new_fb(size_t staging, size_t chunk, unsigned streams, const char *fault,
                           bool fallback, int *ret_err, char *errbuf, size_t errlen);
gr_backend *backend_new(size_t staging, size_t chunk, unsigned streams, const char *fault,
                        int *ret_err, char *errbuf, size_t errlen);
void free_backend(gr_backend *b);

/* cuda-backend-jobs.c */
void test_ops(gr_backend *b);
void test_specials(gr_backend *b);
void test_narrow_device(gr_backend *b);
void test_host_alone(gr_backend *b);
void test_determinism(gr_backend *b);
void test_many_batches(gr_backend *b);
void test_back_to_back(gr_backend *b);

/* cuda-backend-faults.c */
void test_free_outstanding(void);
void test_describe(gr_backend *b, bool loaded);
void test_faults(void);
void test_fault_under_load(const char *fault, bool fallback);
void test_fallback(void);
void test_big(void);
