/*
 * The CUDA check of the GPU benchmark tools (gpured-cuda-rtt,
 * gpured-device-bench, gpured-h2d-bench, gpured-staging-write): a failed call names itself and
 * the error, and the tool exits.
 */
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
