/* The inclusive prefix sum kernel's launcher (scan.h), every dtype. */
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
	/* the narrow dtypes' 2-byte elements are read whole */
	const bool two = dtype == grwiden::F16 || dtype == grwiden::BF16 || dtype == grwiden::I16 ||
			 dtype == grwiden::U16;
	if (two && (uintptr_t)in % 2)
		return (int)cudaErrorInvalidValue;
	using grwiden::narrow;
	switch (dtype) {
	case 0: return (int)scan_run<int32_t>(in, n, out, workspace, epoch, st);
	case 1: return (int)scan_run<int64_t>(in, n, out, workspace, epoch, st);
	case 2: return (int)scan_run<uint32_t>(in, n, out, workspace, epoch, st);
	case 3: return (int)scan_run<uint64_t>(in, n, out, workspace, epoch, st);
	case 4: return (int)scan_run<float>(in, n, out, workspace, epoch, st);
	case 5: return (int)scan_run<double>(in, n, out, workspace, epoch, st);
	case grwiden::F16: return (int)scan_run<narrow<grwiden::F16>>(in, n, out, workspace, epoch, st);
	case grwiden::BF16: return (int)scan_run<narrow<grwiden::BF16>>(in, n, out, workspace, epoch, st);
	case grwiden::E4M3: return (int)scan_run<narrow<grwiden::E4M3>>(in, n, out, workspace, epoch, st);
	case grwiden::E5M2: return (int)scan_run<narrow<grwiden::E5M2>>(in, n, out, workspace, epoch, st);
	case grwiden::I8: return (int)scan_run<narrow<grwiden::I8>>(in, n, out, workspace, epoch, st);
	case grwiden::U8: return (int)scan_run<narrow<grwiden::U8>>(in, n, out, workspace, epoch, st);
	case grwiden::I16: return (int)scan_run<narrow<grwiden::I16>>(in, n, out, workspace, epoch, st);
	case grwiden::U16: return (int)scan_run<narrow<grwiden::U16>>(in, n, out, workspace, epoch, st);
	}
	return (int)cudaErrorInvalidValue;
}
