/*
 * gpured-vcpu-speed: how fast each CPU of this machine runs a spinning
 * thread, alone and beside one other, as the daemon's spinning threads
 * (loop, submitter, completer) see it. On a virtual machine the host's
 * load and its hyperthreads are hidden; here they show.
 *
 *   gpured-vcpu-speed [NCPU [ROUNDS]]
 *
 * Prints, for ROUNDS rounds (default 3), each CPU's rate alone (1,000
 * multiply-adds a step, steps in 50 ms), then every pair of CPUs whose two
 * threads together run below 0.85 of the mean rate alone, with that
 * ratio, and the mean. Pins its threads with sched_setaffinity.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct spinner {
	int cpu;
	double secs;
	double steps;
	pthread_barrier_t *start;
};

static void *spin(void *p)
{
	struct spinner *a = p;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(a->start);
	volatile unsigned long x = 1;
	double t0 = now(), n = 0;
	while (now() - t0 < a->secs) {
		for (int k = 0; k < 1000; k++)
			x = x * 6364136223846793005ul + 1;
		n++;
	}
	a->steps = n;
	return NULL;
}

/* steps a thread on cpu i makes in secs, alone (j < 0) or beside one on
 * cpu j (the mean of the two) */
static double rate(int i, int j, double secs)
{
	int nt = j < 0 ? 1 : 2;
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)nt);
	struct spinner a[2] = { { i, secs, 0, &start }, { j, secs, 0, &start } };
	pthread_t t[2];
	for (int k = 0; k < nt; k++)
		pthread_create(&t[k], NULL, spin, &a[k]);
	for (int k = 0; k < nt; k++)
		pthread_join(t[k], NULL);
	pthread_barrier_destroy(&start);
	return nt == 1 ? a[0].steps : (a[0].steps + a[1].steps) / 2;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	double mean = 0;
	if (n < 1 || rounds < 1) {
		fprintf(stderr, "usage: %s [NCPU [ROUNDS]]\n", argv[0]);
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		printf("alone, round %d:", r);
		for (int i = 0; i < n; i++) {
			double x = rate(i, -1, 0.05);
			printf(" %.0f", x);
			mean += x;
		}
		printf("\n");
	}
	mean /= (double)rounds * n;
	int slow = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			double q = rate(i, j, 0.05) / mean;
			if (q < 0.85) {
				printf("pair %d %d %.2f\n", i, j, q);
				slow++;
			}
		}
	printf("mean alone %.0f; %d of %d pairs below 0.85 of it\n", mean, slow, n * (n - 1) / 2);
	return 0;
}
