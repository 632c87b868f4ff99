/*
 * CUB, the reference the CUDA benchmarks measure themselves against
 * (kernel-bench.cu, exact-bench.cu, ops-bench.cu). Where they are built to
 * run, this is CUB's own headers. In the check build (bench/cuda/meson.build:
 * the sources compiled, not run, where there is no GPU) GR_BENCH_NO_CUB
 * puts a stand-in in their place: each algorithm the benchmarks call takes
 * any arguments and fails as unsupported, so that the check compiles the
 * benchmarks' own code without instantiating CUB's templates, most of
 * what compiling them costs.
 */
#pragma once

#ifndef GR_BENCH_NO_CUB
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#else
#include <cuda/std/functional> /* the operators the calls pass (cuda::std::plus) */
#include <cuda_runtime.h>

namespace cub {

#define GR_CUB_STAND_IN(name)                                                                      \
	template <typename... A> static cudaError_t name(A &&...)                                  \
	{                                                                                          \
		return cudaErrorNotSupported;                                                      \
	}

struct DeviceReduce {
	GR_CUB_STAND_IN(Sum)
	GR_CUB_STAND_IN(Min)
	GR_CUB_STAND_IN(Max)
	GR_CUB_STAND_IN(ArgMin)
	GR_CUB_STAND_IN(ArgMax)
	GR_CUB_STAND_IN(TransformReduce)
};

struct DeviceScan {
	GR_CUB_STAND_IN(InclusiveSum)
};

struct DeviceSegmentedReduce {
	GR_CUB_STAND_IN(Sum)
	GR_CUB_STAND_IN(Reduce)
	GR_CUB_STAND_IN(ArgMin)
};

#undef GR_CUB_STAND_IN

template <typename K, typename V> struct KeyValuePair {
	K key;
	V value;
};

} /* namespace cub */
#endif
