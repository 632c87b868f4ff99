/*
 * How fast gr_reduce() runs on one core, next to a plain read of the same
 * buffer measured in the same run (the ratio is what carries from one
 * machine to another).
 *
 *   reduce-bench [log2 n = 24] [repetitions = 10]
 *
 * Prints GB/s (10^9 bytes per second of input) of the best repetition.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/reduce.h"

typedef uint64_t bench_v4du __attribute__((vector_size(32)));

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The floor: read every byte once and do as little as possible with it,
 * in registers as wide as gr_reduce() gets. */
#define BENCH_READ(NAME, ATTR)                                                                     \
	ATTR static uint64_t NAME(const void *data, size_t bytes)                                  \
	{                                                                                          \
		const unsigned char *p = data;                                                     \
		bench_v4du a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                 \
		for (size_t i = 0; i + 128 <= bytes; i += 128) {                                   \
			bench_v4du x0, x1, x2, x3;                                                 \
			memcpy(&x0, p + i, 32);                                                    \
			memcpy(&x1, p + i + 32, 32);                                               \
			memcpy(&x2, p + i + 64, 32);                                               \
			memcpy(&x3, p + i + 96, 32);                                               \
			a0 += x0;                                                                  \
			a1 += x1;                                                                  \
			a2 += x2;                                                                  \
			a3 += x3;                                                                  \
		}                                                                                  \
		bench_v4du a = a0 + a1 + a2 + a3;                                                  \
		return a[0] + a[1] + a[2] + a[3];                                                  \
	}

BENCH_READ(bench_read_base, )
#if defined(__x86_64__) && defined(__GNUC__)
BENCH_READ(bench_read_avx2, __attribute__((target("avx2"))))
#endif

static uint64_t bench_read(const void *data, size_t bytes)
{
#if defined(__x86_64__) && defined(__GNUC__)
	const char *e = getenv("GPURED_REDUCE_ISA");
	if (!(e && strcmp(e, "baseline") == 0) && __builtin_cpu_supports("avx2"))
		return bench_read_avx2(data, bytes);
#endif
	return bench_read_base(data, bytes);
}

static volatile uint64_t bench_sink;

int main(int argc, char **argv)
{
	unsigned lg = argc > 1 ? (unsigned)atoi(argv[1]) : 24;
	int reps = argc > 2 ? atoi(argv[2]) : 10;
	size_t n = (size_t)1 << lg;
	size_t bytes = n * 8;
	unsigned char *buf = NULL;

	if (lg > 30 || reps < 1 || posix_memalign((void **)&buf, 64, bytes)) {
		fprintf(stderr, "usage: reduce-bench [log2 n <= 30] [repetitions]\n");
		return 2;
	}
	srand(1);
	for (size_t i = 0; i < n * 2; i++) {
		float f = (float)rand() / RAND_MAX - 0.5f;
		memcpy(buf + i * 4, &f, 4);
	}

	static const struct {
		const char *what;
		gr_op op;
		gr_dtype dt;
	} cases[] = {
	    {"read", GR_OP_N, GR_DT_F32},          {"sum f32", GR_OP_SUM, GR_DT_F32},
	    {"min f32", GR_OP_MIN, GR_DT_F32},     {"max f32", GR_OP_MAX, GR_DT_F32},
	    {"sumsq f32", GR_OP_SUMSQ, GR_DT_F32}, {"read", GR_OP_N, GR_DT_F64},
	    {"sum f64", GR_OP_SUM, GR_DT_F64},     {"min f64", GR_OP_MIN, GR_DT_F64},
	    {"sumsq f64", GR_OP_SUMSQ, GR_DT_F64}, {"sum i32", GR_OP_SUM, GR_DT_I32},
	    {"min i32", GR_OP_MIN, GR_DT_I32},     {"sum u64", GR_OP_SUM, GR_DT_U64},
	    {"min u64", GR_OP_MIN, GR_DT_U64},     {"sumsq i64", GR_OP_SUMSQ, GR_DT_I64},
	};
	printf("n = 2^%u elements\n", lg);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t nb = n * gr_dtype_size(cases[c].dt);
		double best = 1e30;
		for (int r = 0; r < reps; r++) {
			double t0 = now();
			if (cases[c].op == GR_OP_N) {
				bench_sink = bench_read(buf, nb);
			} else {
				gr_partial p;
				gr_reduce(cases[c].op, cases[c].dt, buf, n, &p);
				bench_sink = p.v.u;
			}
			double t = now() - t0;
			if (t < best)
				best = t;
		}
		printf("%-10s %3s  %7.2f GB/s  (%zu bytes, best of %d: %.1f us)\n", cases[c].what,
		       gr_dtype_name(cases[c].dt), nb / best / 1e9, nb, reps, best * 1e6);
	}
	free(buf);
	return 0;
}
