/*
 * gpured-cuda-rtt: what one small request costs the GPU and the host's
 * threads, without the daemon. Issue 17's slow daemons are slow for their
 * whole life; started many times over, this tells whether a plain CUDA
 * process has the same two modes, and which step carries the difference.
 * One line a run, medians in microseconds:
 *
 *   flag    launch a one-block kernel that writes a flag into mapped
 *           pinned host memory; the same thread spins on the flag
 *   event   copy 1 KiB of pinned memory to the GPU, the same kernel, an
 *           event made with cudaEventBlockingSync (as the daemon's are);
 *           the same thread polls the event (cudaEventQuery)
 *   espin   as event, with an event made without cudaEventBlockingSync
 *   kevent  the kernel alone (no copy) and an event as espin's, polled:
 *           against flag, what finding the end through an event costs
 *   cflag   the copy and the kernel, the flag spun on: against espin,
 *           the same
 *   handoff as event, but one thread launches and another polls the event
 *           and hands the result back through memory (the daemon's
 *           submission and completion threads)
 *   spin    two threads hand a token back and forth, spinning (no CUDA)
 *   wake    the same through a condition variable: each waits asleep
 *   reset   flag and event again after cudaDeviceReset and a new setup
 *
 * Beside each, in brackets, the GPU's interrupts a request (the counts of
 * /proc/interrupts lines that name nvidia), and at the end the CPUs that
 * took them.
 *
 *   gpured-cuda-rtt [ITERATIONS [MAIN_CPU POLLER_CPU]]
 *       (default 20000; GPU 0; with CPUs, the launching thread and the
 *        polling one are pinned to them)
 */
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <vector>

#include <cuda_runtime.h>

#include "bench/cuda/bench-check.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The GPU's interrupts so far, on every CPU, and on each CPU into cpus. */
static long gpu_irqs(std::vector<long> *cpus)
{
	FILE *f = fopen("/proc/interrupts", "r");
	if (!f)
		return -1;
	char line[4096];
	long total = 0;
	int ncpu = 0;
	if (fgets(line, sizeof(line), f))
		for (char *p = line; (p = strstr(p, "CPU")) != NULL; p += 3)
			ncpu++;
	if (cpus)
		cpus->assign(ncpu, 0);
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "nvidia"))
			continue;
		char *p = strchr(line, ':');
		if (!p)
			continue;
		p++;
		for (int c = 0; c < ncpu; c++) {
			char *end;
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			total += v;
			if (cpus)
				(*cpus)[c] += v;
			p = end;
		}
	}
	fclose(f);
	return total;
}

static double median(std::vector<double> &v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* One block sums 256 ints and writes the sum, then the flag. */
__global__ void sum_flag(const int *in, volatile int *out, volatile unsigned *flag, unsigned seq)
{
	__shared__ int acc;
	if (threadIdx.x == 0)
		acc = 0;
	__syncthreads();
	atomicAdd(&acc, in[threadIdx.x]);
	__syncthreads();
	if (threadIdx.x == 0) {
		*out = acc;
		__threadfence_system();
		*flag = seq;
	}
}

struct gpu {
	cudaStream_t s;
	cudaEvent_t ev, ev_spin, ev_sync;
	int *hin, *din, *hout, *dout;
	unsigned *hflag, *dflag;
};

static void gpu_setup(gpu *g)
{
	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&g->ev_sync, cudaEventDisableTiming | cudaEventBlockingSync));
	CK(cudaEventCreateWithFlags(&g->ev_spin, cudaEventDisableTiming));
	g->ev = g->ev_sync;
	CK(cudaHostAlloc((void **)&g->hin, 256 * sizeof(int), cudaHostAllocDefault));
	CK(cudaMalloc((void **)&g->din, 256 * sizeof(int)));
	CK(cudaHostAlloc((void **)&g->hout, 64, cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&g->dout, g->hout, 0));
	CK(cudaHostAlloc((void **)&g->hflag, 64, cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&g->dflag, g->hflag, 0));
	for (int i = 0; i < 256; i++)
		g->hin[i] = i;
	*g->hflag = 0;
}

static void check_sum(const gpu *g)
{
	if (*(volatile int *)g->hout != 255 * 256 / 2) {
		fprintf(stderr, "wrong sum %d\n", *g->hout);
		exit(1);
	}
}

static unsigned seq;

/* Launch, spin on the flag the kernel writes. */
static double run_flag(gpu *g, int iters)
{
	std::vector<double> t;
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();
		unsigned k = ++seq;
		sum_flag<<<1, 256, 0, g->s>>>(g->din, g->dout, g->dflag, k);
		CK(cudaGetLastError());
		while (*(volatile unsigned *)g->hflag != k)
			relax();
		t.push_back(now_us() - t0);
	}
	CK(cudaStreamSynchronize(g->s));
	check_sum(g);
	return median(t);
}

static void issue(gpu *g, bool copy = true)
{
	if (copy)
		CK(cudaMemcpyAsync(g->din, g->hin, 256 * sizeof(int), cudaMemcpyHostToDevice, g->s));
	sum_flag<<<1, 256, 0, g->s>>>(g->din, g->dout, g->dflag, ++seq);
	CK(cudaGetLastError());
	CK(cudaEventRecord(g->ev, g->s));
}

static void poll_event(gpu *g)
{
	cudaError_t e;
	while ((e = cudaEventQuery(g->ev)) == cudaErrorNotReady)
		relax();
	CK(e);
}

/* Copy (unless !copy), launch, record; poll the event on the same
 * thread, or (by_flag) spin on the kernel's flag instead. */
static double run_event(gpu *g, int iters, bool copy = true, bool by_flag = false)
{
	std::vector<double> t;
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();
		issue(g, copy);
		if (by_flag)
			while (*(volatile unsigned *)g->hflag != seq)
				relax();
		else
			poll_event(g);
		t.push_back(now_us() - t0);
	}
	CK(cudaStreamSynchronize(g->s));
	check_sum(g);
	return median(t);
}

/* Copy, launch, record on this thread; another polls the event. */
struct handoff {
	gpu *g;
	std::atomic<int> posted{0}, done{0};
	int iters;
	int cpu;
};

static int poller_cpu = -1;

static void pin(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
		fprintf(stderr, "cannot pin to CPU %d\n", cpu);
		exit(1);
	}
}

static void *handoff_poller(void *arg)
{
	handoff *h = (handoff *)arg;
	pin(poller_cpu);
	CK(cudaSetDevice(0));
	for (int i = 1; i <= h->iters; i++) {
		while (h->posted.load(std::memory_order_acquire) != i)
			relax();
		poll_event(h->g);
		h->done.store(i, std::memory_order_release);
	}
	h->cpu = sched_getcpu();
	return NULL;
}

static double run_handoff(gpu *g, int iters, int *ret_cpu)
{
	handoff h;
	h.g = g;
	h.iters = iters;
	pthread_t th;
	pthread_create(&th, NULL, handoff_poller, &h);
	std::vector<double> t;
	for (int i = 1; i <= iters; i++) {
		double t0 = now_us();
		issue(g);
		h.posted.store(i, std::memory_order_release);
		while (h.done.load(std::memory_order_acquire) != i)
			relax();
		t.push_back(now_us() - t0);
	}
	pthread_join(th, NULL);
	check_sum(g);
	*ret_cpu = h.cpu;
	return median(t);
}

/* Two threads pass a token: spinning, or asleep on a condition variable. */
struct pingpong {
	bool sleep;
	int iters;
	int turn; /* 0: main's, 1: the other's */
	std::atomic<int> aturn{0};
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
};

static void pp_wait(pingpong *p, int who)
{
	if (!p->sleep) {
		while (p->aturn.load(std::memory_order_acquire) != who)
			relax();
		return;
	}
	pthread_mutex_lock(&p->lock);
	while (p->turn != who)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

static void pp_give(pingpong *p, int to)
{
	if (!p->sleep) {
		p->aturn.store(to, std::memory_order_release);
		return;
	}
	pthread_mutex_lock(&p->lock);
	p->turn = to;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static void *pp_other(void *arg)
{
	pingpong *p = (pingpong *)arg;
	pin(poller_cpu);
	for (int i = 0; i < p->iters; i++) {
		pp_wait(p, 1);
		pp_give(p, 0);
	}
	return NULL;
}

static double run_pingpong(bool sleep, int iters)
{
	pingpong p;
	p.sleep = sleep;
	p.iters = iters;
	p.turn = 0;
	pthread_t th;
	pthread_create(&th, NULL, pp_other, &p);
	std::vector<double> t;
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();
		pp_give(&p, 1);
		pp_wait(&p, 0);
		t.push_back(now_us() - t0);
	}
	pthread_join(th, NULL);
	return median(t);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20000;
	if (iters < 100) {
		fprintf(stderr, "usage: gpured-cuda-rtt [ITERATIONS >= 100 [MAIN_CPU POLLER_CPU]]\n");
		return 2;
	}
	if (argc > 3) {
		pin(atoi(argv[2]));
		poller_cpu = atoi(argv[3]);
	}
	std::vector<long> before, after;
	gpu_irqs(&before);
	double t0 = now_us();
	gpu g;
	gpu_setup(&g);
	double init = now_us() - t0;
	run_event(&g, iters / 10); /* warm up */

	/* each phase: its median, and the GPU's interrupts a request */
	long n0 = gpu_irqs(NULL);
	auto per = [&](void) {
		long n = gpu_irqs(NULL);
		double r = n0 < 0 ? -1 : (double)(n - n0) / iters;
		n0 = n;
		return r;
	};
	double flag = run_flag(&g, iters), flag_i = per();
	double event = run_event(&g, iters), event_i = per();
	g.ev = g.ev_spin;
	double espin = run_event(&g, iters), espin_i = per();
	double kevent = run_event(&g, iters, false), kevent_i = per();
	double cflag = run_event(&g, iters, true, true), cflag_i = per();
	g.ev = g.ev_sync;
	int hcpu;
	double hand = run_handoff(&g, iters, &hcpu), hand_i = per();
	int mcpu = sched_getcpu();
	double spin = run_pingpong(false, iters);
	double wake = run_pingpong(true, iters);

	CK(cudaDeviceReset());
	gpu g2;
	gpu_setup(&g2);
	run_event(&g2, iters / 10);
	per();
	double rflag = run_flag(&g2, iters), rflag_i = per();
	double revent = run_event(&g2, iters), revent_i = per();
	gpu_irqs(&after);
	printf("init %.0f flag %.2f [%.2f] event %.2f [%.2f] espin %.2f [%.2f] kevent %.2f [%.2f]"
	       " cflag %.2f [%.2f] handoff %.2f [%.2f]"
	       " spin %.2f wake %.2f reset: flag %.2f [%.2f] event %.2f [%.2f] cpus %d %d irq-cpus",
	       init / 1000, flag, flag_i, event, event_i, espin, espin_i, kevent, kevent_i, cflag,
	       cflag_i, hand, hand_i, spin, wake, rflag, rflag_i, revent, revent_i, mcpu, hcpu);
	for (size_t c = 0; c < after.size() && c < before.size(); c++)
		if (after[c] > before[c])
			printf(" %zu:%ld", c, after[c] - before[c]);
	printf("\n");
	return 0;
}
