/* The exact-sum kernel's launchers (exact.h). */
#include <cuda_runtime.h>

#include "cuda/exact.cuh"

extern "C" int gr_exact_launch_single(int dtype, const void *data, uint64_t n,
				      gr_exact_scratch *scratch, gr_exact_sum *out, int sm_count,
				      void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	switch (dtype) {
	case 4:
		if ((uintptr_t)data & 3u)
			return (int)cudaErrorInvalidValue;
		return (int)gre::launch_single<float>(data, n, scratch, out, sm_count, st);
	case 5:
		if ((uintptr_t)data & 7u)
			return (int)cudaErrorInvalidValue;
		return (int)gre::launch_single<double>(data, n, scratch, out, sm_count, st);
	}
	return (int)cudaErrorInvalidValue;
}
