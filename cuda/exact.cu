/* The exact-sum kernel's launchers (exact.h). */
#include <cuda_runtime.h>

#include "cuda/exact.cuh"

extern "C" int gr_exact_launch_single(int dtype, const void *data, uint64_t n,
				      gr_exact_scratch *scratch, gr_exact_sum *out, int sm_count,
				      void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	switch (dtype) {
	case GR_EXACT_F32:
		if ((uintptr_t)data & 3u)
			return (int)cudaErrorInvalidValue;
		return (int)gre::launch_single<float>(data, n, scratch, out, sm_count, st);
	case GR_EXACT_F32_SQUARES:
		if ((uintptr_t)data & 3u)
			return (int)cudaErrorInvalidValue;
		return (int)gre::launch_single<gre::sqf, gre::PROD_MINB, gre::PROD_BULK, gre::SQ_FB>(
			data, n, scratch, out, sm_count, st);
	case GR_EXACT_F64:
		if ((uintptr_t)data & 7u)
			return (int)cudaErrorInvalidValue;
		return (int)gre::launch_single<double>(data, n, scratch, out, sm_count, st);
	case GR_EXACT_F64_SQUARES:
		if ((uintptr_t)data & 7u)
			return (int)cudaErrorInvalidValue;
		return (int)gre::launch_single<gre::sqd, gre::PROD_MINB, gre::PROD_BULK, gre::SQD_FB>(
			data, n, scratch, out, sm_count, st);
	}
	return (int)cudaErrorInvalidValue;
}

extern "C" uint32_t gr_exact_units(int dtype, uint64_t n)
{
	return gre::units_of(dtype, n);
}

extern "C" int gr_exact_launch_batch(const void *base, const gr_exact_seg *segs, uint32_t nsegs,
				     uint32_t total_units, gr_exact_scratch *scratch,
				     gr_exact_sum *out, int sm_count, void *stream)
{
	if (nsegs == 0 || total_units == 0)
		return 0;
	uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * 2;
	uint64_t want = (total_units + gre::THREADS / 32 - 1) / (gre::THREADS / 32);
	unsigned blocks = (unsigned)(want < cap ? want : cap);
	gre::batch_kernel<><<<blocks, gre::THREADS, 0, (cudaStream_t)stream>>>(
		(const unsigned char *)base, segs, nsegs, total_units, scratch, out);
	return (int)cudaGetLastError();
}
