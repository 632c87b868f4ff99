/*
 * gpured-staging-write: what a CPU pays to write small payloads into
 * pinned staging that a GPU's copy engine reads, against the same writes
 * into staging that no device touches.
 *
 * The daemon's loop thread copies each small request's payload into a
 * 1 KiB piece of staging, in order through a ring of slots; a batch of 32
 * pieces then goes to the GPU with one host-to-device copy. Here one
 * thread does the same: memory from 2 MiB pages, registered with CUDA,
 * pieces written in order through a ring, each 32 KiB batch copied to the
 * device asynchronously (at most half the ring in flight, so no piece is
 * rewritten while a copy may still read it). It reports the time per KiB
 * written for each way of writing:
 *
 *   memcpy, no DMA        the ring is never copied to the GPU
 *   memcpy                plain stores
 *   streaming stores      non-temporal 16-byte stores (no line fetched)
 *   prefetch + memcpy     the next piece fetched for writing first
 *
 * and, with the payload coming from a socket as in the daemon (a batch's
 * 32 KiB written into a Unix socket pair untimed, then read back timed):
 *
 *   read + memcpy         read() into a reused buffer, then memcpy into
 *                         the pieces: the daemon's path today
 *   read, no DMA          read() straight into the ring, never copied
 *   read                  read() straight into the ring: what reading
 *                         small requests in place ("zero copy") would pay
 *
 *   gpured-staging-write [RING_KIB...]   (default 128 512 4096)
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <cuda_runtime.h>
#include <emmintrin.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/cuda/bench-check.h"

static const size_t PIECE = 1024, BATCH = 32, BATCH_BYTES = PIECE * BATCH;
static const size_t ROUNDS = 100000, MAX_RING = (size_t)32 << 20;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void copy_stream(uint8_t *d, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i += 16)
		_mm_stream_si128((__m128i *)(void *)(d + i),
				 _mm_loadu_si128((const __m128i *)(const void *)(s + i)));
}

enum { PLAIN_NO_DMA, PLAIN, STREAM, PREFETCH, READ_COPY, READ_NO_DMA, READ, NMODES };
static const char *const mode_names[NMODES] = {
	"memcpy, no DMA", "memcpy", "streaming stores", "prefetch + memcpy",
	"read + memcpy", "read, no DMA", "read",
};

static int sock[2];

static void full_read(uint8_t *d, size_t n)
{
	while (n) {
		ssize_t r = read(sock[1], d, n);
		if (r <= 0) {
			perror("read");
			exit(1);
		}
		d += r;
		n -= (size_t)r;
	}
}

/* ns per KiB written, one mode, one ring size */
static double run(int mode, uint8_t *ring, size_t ring_bytes, uint8_t *dbuf, cudaStream_t st,
		  cudaEvent_t *ev, unsigned nev)
{
	static uint8_t src[BATCH_BYTES];
	size_t off = 0;
	unsigned sent = 0;
	unsigned inflight_max = (unsigned)(ring_bytes / 2 / BATCH_BYTES);
	uint64_t t_write = 0;

	if (inflight_max == 0)
		inflight_max = 1;
	if (inflight_max > nev)
		inflight_max = nev;
	static uint8_t rbuf[BATCH_BYTES];
	bool dma = mode != PLAIN_NO_DMA && mode != READ_NO_DMA;
	for (size_t r = 0; r < ROUNDS; r++) {
		uint8_t *dst = ring + off;
		/* no piece is rewritten while a copy may still read it */
		if (dma && sent >= inflight_max)
			CK(cudaEventSynchronize(ev[(sent - inflight_max) % nev]));
		if (mode >= READ_COPY &&
		    write(sock[0], src, BATCH_BYTES) != (ssize_t)BATCH_BYTES) {
			perror("write");
			exit(1);
		}
		uint64_t t0 = now_ns();
		if (mode == READ_COPY) {
			full_read(rbuf, BATCH_BYTES);
			for (size_t k = 0; k < BATCH; k++)
				memcpy(dst + k * PIECE, rbuf + k * PIECE, PIECE);
		} else if (mode >= READ_NO_DMA) {
			full_read(dst, BATCH_BYTES);
		}
		for (size_t k = 0; k < BATCH && mode < READ_COPY; k++) {
			uint8_t *d = dst + k * PIECE;
			const uint8_t *s = src + (k * 64) % 2048;
			if (mode == STREAM) {
				copy_stream(d, s, PIECE);
			} else {
				if (mode == PREFETCH)
					for (size_t l = 0; l < PIECE; l += 64)
						__builtin_prefetch(d + PIECE + l, 1);
				memcpy(d, s, PIECE);
			}
		}
		if (mode == STREAM)
			_mm_sfence();
		t_write += now_ns() - t0;
		if (dma) {
			CK(cudaMemcpyAsync(dbuf + off, dst, BATCH_BYTES, cudaMemcpyHostToDevice, st));
			CK(cudaEventRecord(ev[sent % nev], st));
			sent++;
		}
		off += BATCH_BYTES;
		if (off + BATCH_BYTES > ring_bytes)
			off = 0;
	}
	CK(cudaStreamSynchronize(st));
	return (double)t_write / (double)(ROUNDS * BATCH);
}

int main(int argc, char **argv)
{
	size_t rings[16] = {128, 512, 4096};
	int nrings = 3;
	if (argc > 1) {
		nrings = 0;
		for (int i = 1; i < argc && nrings < 16; i++) {
			long k = atol(argv[i]);
			if (k < 64 || (size_t)k << 10 > MAX_RING) {
				fprintf(stderr, "ring sizes are 64 to %zu KiB\n", MAX_RING >> 10);
				return 2;
			}
			rings[nrings++] = (size_t)k;
		}
	}

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sock) < 0) {
		perror("socketpair");
		return 1;
	}
	int sndbuf = 4 * (int)BATCH_BYTES;
	setsockopt(sock[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));

	/* 2 MiB pages, as the daemon's staging (engine/staging.c) */
	size_t huge = (size_t)2 << 20;
	uint8_t *m = (uint8_t *)mmap(NULL, MAX_RING + huge, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	uint8_t *ring = (uint8_t *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
	madvise(ring, MAX_RING, MADV_HUGEPAGE);
	memset(ring, 1, MAX_RING);
	CK(cudaHostRegister(ring, MAX_RING, cudaHostRegisterPortable));
	uint8_t *dbuf;
	CK(cudaMalloc(&dbuf, MAX_RING));
	cudaStream_t st;
	CK(cudaStreamCreate(&st));
	enum { NEV = 64 };
	cudaEvent_t ev[NEV];
	for (int i = 0; i < NEV; i++)
		CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));

	printf("%-10s", "ring KiB");
	for (int mode = 0; mode < NMODES; mode++)
		printf("  %18s", mode_names[mode]);
	printf("   (ns per KiB written, best of 3)\n");
	for (int i = 0; i < nrings; i++) {
		printf("%-10zu", rings[i]);
		for (int mode = 0; mode < NMODES; mode++) {
			double best = 1e30;
			for (int rep = 0; rep < 3; rep++) {
				double t = run(mode, ring, rings[i] << 10, dbuf, st, ev, NEV);
				best = t < best ? t : best;
			}
			printf("  %18.1f", best);
		}
		printf("\n");
	}
	return 0;
}
