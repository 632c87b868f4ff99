/* The segmented sum kernel's launcher (segmented.h). */
#include <cuda_runtime.h>

#include "cuda/segmented.cuh"

extern "C" size_t gr_segsum_workspace_bytes(uint64_t count, size_t size)
{
	return grseg::workspace_bytes(grseg::tiles_of(count, size));
}

extern "C" int gr_segsum_launch(int dtype, const void *data, uint64_t count, const uint64_t *offsets,
				uint64_t nsegs, void *out, void *workspace, size_t workspace_bytes,
				void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (nsegs == 0)
		return 0;
	/* no elements: every segment is empty, and no tile would see them */
	if (count == 0)
		return (int)cudaMemsetAsync(out, 0, nsegs * sizeof(uint64_t), st);
	switch (dtype) {
	case 0: return (int)grseg::launch<int32_t>(data, count, offsets, nsegs, out, workspace, workspace_bytes, st);
	case 1: return (int)grseg::launch<int64_t>(data, count, offsets, nsegs, out, workspace, workspace_bytes, st);
	case 2: return (int)grseg::launch<uint32_t>(data, count, offsets, nsegs, out, workspace, workspace_bytes, st);
	case 3: return (int)grseg::launch<uint64_t>(data, count, offsets, nsegs, out, workspace, workspace_bytes, st);
	case 4: return (int)grseg::launch<float>(data, count, offsets, nsegs, out, workspace, workspace_bytes, st);
	case 5: return (int)grseg::launch<double>(data, count, offsets, nsegs, out, workspace, workspace_bytes, st);
	}
	return (int)cudaErrorInvalidValue;
}
