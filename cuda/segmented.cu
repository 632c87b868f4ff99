/* The segmented sum kernel's launcher (segmented.h). */
#include <cuda_runtime.h>

#include "cuda/segmented.cuh"

static uint64_t segsum_tiles(uint64_t count, size_t size)
{
	uint64_t te = GR_SEGSUM_TILE_BYTES / size;
	return (count + te - 1) / te;
}

extern "C" size_t gr_segsum_workspace_bytes(uint64_t count, size_t size)
{
	return grseg::workspace_bytes(segsum_tiles(count, size));
}

template <typename T>
static cudaError_t segsum_run(const void *data, uint64_t count, const uint64_t *offsets,
			      uint64_t nsegs, void *out, void *workspace, cudaStream_t st)
{
	uint64_t ntiles = segsum_tiles(count, sizeof(T));
	uint64_t blocks = (ntiles + grseg::WARPS - 1) / grseg::WARPS;
	if (blocks > 0x7fffffffu)
		return cudaErrorInvalidValue;
	grseg::segsum_kernel<T><<<(unsigned)blocks, 32 * grseg::WARPS, 0, st>>>(
		(const T *)data, count, offsets, nsegs, ntiles, (uint64_t *)out,
		grseg::workspace_of(workspace, ntiles));
	return cudaGetLastError();
}

extern "C" int gr_segsum_launch(int dtype, const void *data, uint64_t count, const uint64_t *offsets,
				uint64_t nsegs, void *out, void *workspace, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (nsegs == 0)
		return 0;
	/* no elements: every segment is empty, and no tile would see them */
	if (count == 0)
		return (int)cudaMemsetAsync(out, 0, nsegs * sizeof(uint64_t), st);
	switch (dtype) {
	case 0: return (int)segsum_run<int32_t>(data, count, offsets, nsegs, out, workspace, st);
	case 1: return (int)segsum_run<int64_t>(data, count, offsets, nsegs, out, workspace, st);
	case 2: return (int)segsum_run<uint32_t>(data, count, offsets, nsegs, out, workspace, st);
	case 3: return (int)segsum_run<uint64_t>(data, count, offsets, nsegs, out, workspace, st);
	case 4: return (int)segsum_run<float>(data, count, offsets, nsegs, out, workspace, st);
	case 5: return (int)segsum_run<double>(data, count, offsets, nsegs, out, workspace, st);
	}
	return (int)cudaErrorInvalidValue;
}
