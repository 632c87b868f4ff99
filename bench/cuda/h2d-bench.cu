/*
 * gpured-h2d-bench: the ceiling of moving a client's host array to the
 * GPU, measured the way the daemon moves a shared-memory region: the
 * same bytes from pinned memory (cudaHostAlloc) in one copy, and from a
 * memfd mapped read-only and registered (cudaHostRegister, as
 * daemon/region.c and cuda/host-register.c do) in chunk-sized copies over
 * several streams. One JSON line per measurement, the median of the
 * repeats.
 *
 *   gpured-h2d-bench [BYTES [CHUNK [STREAMS [REPEATS]]]]
 *     (defaults 1 GiB, 8 MiB, 4, 9)
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/cuda/bench-check.h"

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

/* bytes from src to dst in chunk-sized copies dealt round the streams */
static double copy_gbps(void *dst, const void *src, size_t bytes, size_t chunk,
			std::vector<cudaStream_t> &st, int repeats)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	std::vector<double> r;
	for (int k = 0; k < repeats + 1; k++) {
		CK(cudaEventRecord(a, st[0]));
		for (size_t off = 0, i = 0; off < bytes; off += chunk, i++) {
			size_t n = std::min(chunk, bytes - off);
			cudaStream_t s = st[i % st.size()];
			if (i < st.size() && i > 0)
				CK(cudaStreamWaitEvent(s, a, 0));
			CK(cudaMemcpyAsync((char *)dst + off, (const char *)src + off, n,
					   cudaMemcpyHostToDevice, s));
		}
		for (size_t i = 1; i < st.size(); i++) {
			cudaEvent_t e;
			CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
			CK(cudaEventRecord(e, st[i]));
			CK(cudaStreamWaitEvent(st[0], e, 0));
			CK(cudaEventDestroy(e));
		}
		CK(cudaEventRecord(b, st[0]));
		CK(cudaEventSynchronize(b));
		float ms;
		CK(cudaEventElapsedTime(&ms, a, b));
		if (k > 0) /* the first is a warm-up */
			r.push_back((double)bytes / (ms * 1e-3) / 1e9);
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return median(r);
}

int main(int argc, char **argv)
{
	size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)1 << 30;
	size_t chunk = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t)8 << 20;
	int nst = argc > 3 ? atoi(argv[3]) : 4;
	int repeats = argc > 4 ? atoi(argv[4]) : 9;
	if (!bytes || !chunk || nst < 1 || repeats < 1) {
		fprintf(stderr, "usage: gpured-h2d-bench [BYTES [CHUNK [STREAMS [REPEATS]]]]\n");
		return 2;
	}
	void *dev, *pinned;
	CK(cudaMalloc(&dev, bytes));
	CK(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable));
	memset(pinned, 1, bytes);
	std::vector<cudaStream_t> one(1), many(nst);
	for (auto &s : many)
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	one[0] = many[0];

	double whole = copy_gbps(dev, pinned, bytes, bytes, one, repeats);
	printf("{\"source\":\"pinned\",\"bytes\":%zu,\"chunk\":%zu,\"streams\":1,\"gb_per_s\":%.2f}\n",
	       bytes, bytes, whole);
	double pchunks = copy_gbps(dev, pinned, bytes, chunk, many, repeats);
	printf("{\"source\":\"pinned\",\"bytes\":%zu,\"chunk\":%zu,\"streams\":%d,\"gb_per_s\":%.2f}\n",
	       bytes, chunk, nst, pchunks);

	int fd = memfd_create("h2d", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
		perror("memfd");
		return 1;
	}
	void *w = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	void *ro = mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (w == MAP_FAILED || ro == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(w, 1, bytes);
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventRecord(a, 0));
	CK(cudaHostRegister(ro, bytes, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
	CK(cudaEventRecord(b, 0));
	CK(cudaEventSynchronize(b));
	float reg_ms;
	CK(cudaEventElapsedTime(&reg_ms, a, b));
	double region = copy_gbps(dev, ro, bytes, chunk, many, repeats);
	printf("{\"source\":\"memfd-registered\",\"bytes\":%zu,\"chunk\":%zu,\"streams\":%d,"
	       "\"gb_per_s\":%.2f,\"register_ms\":%.1f}\n",
	       bytes, chunk, nst, region, reg_ms);
	CK(cudaHostUnregister(ro));
	munmap(ro, bytes);
	munmap(w, bytes);
	close(fd);
	cudaFreeHost(pinned);
	cudaFree(dev);
	return 0;
}
