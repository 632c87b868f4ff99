/*
 * gpured-host-ceiling: how fast a host can reduce a shared-memory region
 * with its cores and its GPU together, at the least. The region (a memfd
 * mapped read-only and registered, as the daemon maps one) is read:
 *   - by THREADS threads alone (the plain read of gpured-readsum),
 *   - by the GPU alone (chunk copies to the device over several streams,
 *     as the CUDA backend moves host data),
 *   - by both at once, the threads reading one half of the region over
 *     and over and the copies streaming the other half,
 * each for SECONDS, counting the bytes each side finished. The third
 * figure bounds any split of host data between the engines: a daemon
 * that splits a region cannot read it faster than both sides together
 * read separate halves of it. One JSON line per measurement.
 *
 *   gpured-host-ceiling [BYTES [THREADS [SECONDS [CHUNK [STREAMS]]]]]
 *     (defaults 1 GiB, every CPU, 2, 8 MiB, 4)
 */
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench/cpu/read-vec.h"
#include "bench/cuda/bench-check.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What one side read while it ran. */
struct side {
	std::atomic<size_t> bytes{ 0 };
	double seconds = 0;
	double gbps() const { return seconds > 0 ? (double)bytes.load() / seconds / 1e9 : 0; }
};

static std::atomic<bool> stop_flag;
static volatile double sink;

/* THREADS threads read [p, p + n) over and over, each its share a MiB at
 * a time, until stop_flag. */
static void cpu_read(const float *p, size_t n, unsigned threads, side *s)
{
	std::vector<std::thread> ts;
	double t0 = now();
	for (unsigned i = 0; i < threads; i++)
		ts.emplace_back([=] {
			size_t lo = n * i / threads, hi = n * (i + 1) / threads;
			const size_t step = (1u << 20) / sizeof(float);
			double acc = 0;
			while (!stop_flag.load(std::memory_order_relaxed))
				for (size_t j = lo; j < hi && !stop_flag.load(std::memory_order_relaxed);
				     j += step) {
					size_t m = std::min(step, hi - j);
					acc += read_vec_sum(p + j, m);
					s->bytes.fetch_add(m * sizeof(float), std::memory_order_relaxed);
				}
			sink = acc;
		});
	for (auto &t : ts)
		t.join();
	s->seconds = now() - t0;
}

/* Chunk copies of [src, src + bytes) to the device over the streams,
 * round and round, until stop_flag; each pass is waited for whole. */
static void gpu_read(const char *src, size_t bytes, size_t chunk, std::vector<cudaStream_t> &st,
		     char *dev, side *s)
{
	double t0 = now();
	while (!stop_flag.load(std::memory_order_relaxed)) {
		size_t sent = 0;
		for (size_t off = 0, i = 0; off < bytes; off += chunk, i++) {
			size_t m = std::min(chunk, bytes - off);
			cudaStream_t q = st[i % st.size()];
			CK(cudaMemcpyAsync(dev + (i % st.size()) * chunk, src + off, m,
					   cudaMemcpyHostToDevice, q));
			sent += m;
		}
		for (auto q : st)
			CK(cudaStreamSynchronize(q));
		s->bytes.fetch_add(sent, std::memory_order_relaxed);
	}
	s->seconds = now() - t0;
}

static void run_for(double seconds)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - (long)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	stop_flag = true;
}

int main(int argc, char **argv)
{
	size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)1 << 30;
	unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 0;
	double seconds = argc > 3 ? atof(argv[3]) : 2.0;
	size_t chunk = argc > 4 ? strtoull(argv[4], NULL, 0) : (size_t)8 << 20;
	int nst = argc > 5 ? atoi(argv[5]) : 4;
	if (!threads)
		threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (bytes < 2 * chunk || !chunk || chunk % 4 || nst < 1 || seconds <= 0 || threads > 1024) {
		fprintf(stderr, "usage: gpured-host-ceiling [BYTES [THREADS [SECONDS [CHUNK [STREAMS]]]]]\n");
		return 2;
	}
	int fd = memfd_create("host-ceiling", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
		perror("memfd");
		return 1;
	}
	float *w = (float *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	const char *ro = (const char *)mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (w == MAP_FAILED || ro == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (size_t i = 0; i < bytes / sizeof(float); i++)
		w[i] = (float)(i % 3);
	CK(cudaHostRegister((void *)ro, bytes, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
	std::vector<cudaStream_t> st(nst);
	for (auto &q : st)
		CK(cudaStreamCreateWithFlags(&q, cudaStreamNonBlocking));
	char *dev;
	CK(cudaMalloc(&dev, chunk * nst));

	const float *f = (const float *)ro;
	size_t n = bytes / sizeof(float), half = bytes / 2;
	{ /* CPU alone, over the whole region */
		side c;
		stop_flag = false;
		std::thread t(cpu_read, f, n, threads, &c);
		run_for(seconds);
		t.join();
		printf("{\"what\":\"cpu\",\"bytes\":%zu,\"threads\":%u,\"gb_per_s\":%.2f}\n", bytes,
		       threads, c.gbps());
	}
	{ /* GPU alone */
		side g;
		stop_flag = false;
		std::thread t(gpu_read, ro, bytes, chunk, std::ref(st), dev, &g);
		run_for(seconds);
		t.join();
		printf("{\"what\":\"gpu\",\"bytes\":%zu,\"chunk\":%zu,\"streams\":%d,\"gb_per_s\":%.2f}\n",
		       bytes, chunk, nst, g.gbps());
	}
	{ /* both at once, each on its half */
		side c, g;
		stop_flag = false;
		std::thread tg(gpu_read, ro + half, bytes - half, chunk, std::ref(st), dev, &g);
		std::thread tc(cpu_read, f, half / sizeof(float), threads, &c);
		run_for(seconds);
		tc.join();
		tg.join();
		printf("{\"what\":\"both\",\"bytes\":%zu,\"threads\":%u,\"cpu_gb_per_s\":%.2f,"
		       "\"gpu_gb_per_s\":%.2f,\"gb_per_s\":%.2f}\n",
		       bytes, threads, c.gbps(), g.gbps(), c.gbps() + g.gbps());
	}
	CK(cudaHostUnregister((void *)ro));
	cudaFree(dev);
	return 0;
}
