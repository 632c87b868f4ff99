/* The inclusive prefix sum kernel's launcher (scan.h). */
#include <cuda_runtime.h>

#include "cuda/scan.cuh"

extern "C" size_t gr_scan_workspace_bytes(uint64_t n)
{
	return grscan::workspace_bytes(n);
}

template <typename T>
static cudaError_t scan_run(const void *in, uint64_t n, void *out, void *workspace, uint32_t epoch,
			    cudaStream_t st)
{
	return grscan::launch<T>(in, n, out, workspace, epoch, st);
}

extern "C" int gr_scan_launch(int dtype, const void *in, uint64_t n, void *out, void *workspace,
			      uint32_t epoch, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (n == 0)
		return 0;
	if (epoch == 0 || grscan::tiles_of(n) > 0x7fffffffu)
		return (int)cudaErrorInvalidValue;
	switch (dtype) {
	case 0: return (int)scan_run<int32_t>(in, n, out, workspace, epoch, st);
	case 1: return (int)scan_run<int64_t>(in, n, out, workspace, epoch, st);
	case 2: return (int)scan_run<uint32_t>(in, n, out, workspace, epoch, st);
	case 3: return (int)scan_run<uint64_t>(in, n, out, workspace, epoch, st);
	case 4: return (int)scan_run<float>(in, n, out, workspace, epoch, st);
	case 5: return (int)scan_run<double>(in, n, out, workspace, epoch, st);
	}
	return (int)cudaErrorInvalidValue;
}
