/* The moments kernels' launcher (moments.h). */
#include <cstring>

#include <cuda_runtime.h>

#include "cuda/moments.cuh"

extern "C" int gr_moments_launch(int dtype, const void *data, uint64_t n,
				 gr_moments_scratch *scratch, gr_moments_sums *out, int sm_count,
				 void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (n == 0)
		return (int)cudaErrorInvalidValue;
	switch (dtype) {
	case 0:
	case 2:
		if ((uintptr_t)data & 3u)
			return (int)cudaErrorInvalidValue;
		return dtype ? (int)grm::launch_int<uint32_t>(data, n, scratch, out, sm_count, st)
			     : (int)grm::launch_int<int32_t>(data, n, scratch, out, sm_count, st);
	case 1:
	case 3:
		if ((uintptr_t)data & 7u)
			return (int)cudaErrorInvalidValue;
		return dtype == 3 ? (int)grm::launch_int<uint64_t>(data, n, scratch, out, sm_count, st)
				  : (int)grm::launch_int<int64_t>(data, n, scratch, out, sm_count, st);
	case GR_EXACT_F32:
		if ((uintptr_t)data & 3u)
			return (int)cudaErrorInvalidValue;
		return (int)grm::launch<float>(data, n, scratch, out, sm_count, st);
	case GR_EXACT_F64:
		if ((uintptr_t)data & 7u)
			return (int)cudaErrorInvalidValue;
		return (int)grm::launch<double>(data, n, scratch, out, sm_count, st);
	}
	return (int)cudaErrorInvalidValue;
}

extern "C" double gr_moments_key_value(int dtype, uint64_t k)
{
	if (dtype == GR_EXACT_F32) {
		uint32_t u = (uint32_t)k, b = u >> 31 ? u & 0x7fffffffu : ~u;
		float f;
		memcpy(&f, &b, sizeof(f));
		return (double)f;
	}
	uint64_t b = k >> 63 ? k & ~(1ull << 63) : ~k;
	double d;
	memcpy(&d, &b, sizeof(d));
	return d;
}
