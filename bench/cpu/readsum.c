/*
 * gpured-readsum: a plain multi-threaded read-sum of f32 elements in a
 * shared mapping, each thread adding its contiguous share into sixteen
 * double accumulators (AVX2 vectors): what reducing a shared-memory region on the CPU
 * costs at the least, to compare the CPU backend's region path with, at
 * the same thread count. Prints one JSON line (the median of the repeats).
 *
 *   gpured-readsum BYTES THREADS [REPEATS]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench/cpu/read-vec.h"

typedef struct part {
	pthread_t t;
	const float *p;
	size_t n;
	double sum;
} part;

static void *run(void *arg)
{
	part *s = arg;

	s->sum = read_vec_sum(s->p, s->n);
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: gpured-readsum BYTES THREADS [REPEATS]\n");
		return 2;
	}
	size_t bytes = strtoull(argv[1], NULL, 0), n = bytes / sizeof(float);
	unsigned threads = (unsigned)atoi(argv[2]);
	int repeats = argc > 3 ? atoi(argv[3]) : 9;
	if (!n || !threads || threads > 1024 || repeats < 1 || repeats > 100)
		return 2;
	int fd = memfd_create("readsum", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
		return 1;
	float *w = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	const float *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (w == MAP_FAILED || p == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < n; i++)
		w[i] = (float)(i % 3);
	part *s = calloc(threads, sizeof(*s));
	double gbps[100], sum = 0;
	for (int k = 0; k < repeats; k++) {
		double t0 = now();
		for (unsigned i = 0; i < threads; i++) {
			size_t lo = n * i / threads, hi = n * (i + 1) / threads;
			s[i] = (part){ .p = p + lo, .n = hi - lo };
			pthread_create(&s[i].t, NULL, run, &s[i]);
		}
		sum = 0;
		for (unsigned i = 0; i < threads; i++) {
			pthread_join(s[i].t, NULL);
			sum += s[i].sum;
		}
		gbps[k] = (double)bytes / (now() - t0) / 1e9;
	}
	qsort(gbps, (size_t)repeats, sizeof(double), cmp);
	printf("{\"bytes\":%zu,\"threads\":%u,\"gb_per_s\":%.2f,\"sum\":%.17g}\n", bytes, threads,
	       gbps[repeats / 2], sum);
	free(s);
	return 0;
}
