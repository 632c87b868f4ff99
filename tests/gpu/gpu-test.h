/*
 * What the GPU tests that count their checks share: CU() (a CUDA call
 * that must succeed, else the test exits), CHECK() (counted; a failure is
 * printed and counted, and the test gives up after 20), the counters,
 * the xorshift generator with a fixed seed (gpu-rnd.h), so that every run
 * checks the same data, and gpu_sms(), which ends the test as skipped (77)
 * where no GPU is visible.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include "gpu-rnd.h"

#define CU(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (cudaError_t)(x);                                                 \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                 \
				cudaGetErrorString(e_));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static unsigned long checks, failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			fprintf(stderr, "FAIL: " __VA_ARGS__);                                     \
			fprintf(stderr, "\n");                                                     \
			if (failures > 20)                                                         \
				exit(1);                                                           \
		}                                                                                  \
	} while (0)

/* Device 0's multiprocessors; exits 77 (skipped) without a GPU. */
static inline int gpu_sms(void)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no GPU: skipped\n");
		exit(77);
	}
	cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, 0));
	return prop.multiProcessorCount;
}

/* A copy of h in device memory (cudaFree it). */
static inline unsigned char *to_device(const void *h, size_t bytes)
{
	unsigned char *d;
	CU(cudaMalloc((void **)&d, bytes ? bytes : 1));
	CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	return d;
}
