/* The reduction kernels' launchers: the segmented batch kernel and the
 * single-array entry point (kernel.h). */
#include <string.h>

#include <cuda_runtime.h>

#include "cuda/kernel.cuh"

extern "C" uint32_t gr_kernel_unit_rows(uint64_t n, size_t size)
{
	return grk::unit_rows_of(n, size, grk::GEOMETRY);
}

extern "C" uint64_t gr_kernel_units(uint64_t n, size_t size)
{
	return grk::units_of(n, size, grk::GEOMETRY);
}

namespace grk {

template <typename T, int OP>
static __device__ __forceinline__ void batch_unit(const unsigned char *base, const gr_kseg &s,
						  uint32_t w, uint32_t si, uint32_t nsegs, uint64_t *partials,
						  uint32_t *tickets, uint64_t *out, unsigned lane)
{
	seg_unit<T, OP>(base + s.offset, s.n, s.units, w - s.first_unit,
			partials + 2 * (uint64_t)s.first_unit, tickets + si,
			tickets + nsegs + s.first_unit, out + si, lane);
}

#define GRK_DT_CASES(OP)                                                                   \
	case GR_KSEG_OPDT(OP, 0): batch_unit<int32_t, OP>(base, s, w, si, nsegs, partials, tickets, out, lane); break; \
	case GR_KSEG_OPDT(OP, 1): batch_unit<int64_t, OP>(base, s, w, si, nsegs, partials, tickets, out, lane); break; \
	case GR_KSEG_OPDT(OP, 2): batch_unit<uint32_t, OP>(base, s, w, si, nsegs, partials, tickets, out, lane); break; \
	case GR_KSEG_OPDT(OP, 3): batch_unit<uint64_t, OP>(base, s, w, si, nsegs, partials, tickets, out, lane); break; \
	case GR_KSEG_OPDT(OP, 4): batch_unit<float, OP>(base, s, w, si, nsegs, partials, tickets, out, lane); break; \
	case GR_KSEG_OPDT(OP, 5): batch_unit<double, OP>(base, s, w, si, nsegs, partials, tickets, out, lane); break;

/* One warp per unit; a warp finds its segment by binary search over the
 * segments' first units (warp-uniform: from global memory or, in the
 * parameter form, from the constant bank, broadcast either way). */
static __device__ __forceinline__ void
batch_body(const unsigned char *base, const gr_kseg *segs, uint32_t nsegs, uint32_t total_units,
	   uint64_t *partials, uint32_t *tickets, uint64_t *out)
{
	unsigned lane = threadIdx.x & 31;
	uint32_t w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	uint32_t nw = (gridDim.x * blockDim.x) >> 5;
	for (; w < total_units; w += nw) {
		/* the last segment whose first unit is <= w: never one of
		 * no units, since the next one with units shares its start */
		uint32_t lo = 0, hi = nsegs - 1;
		while (lo < hi) {
			uint32_t mid = (lo + hi + 1) / 2;
			if (segs[mid].first_unit <= w)
				lo = mid;
			else
				hi = mid - 1;
		}
		const gr_kseg s = segs[lo];
		const uint32_t si = lo;
		switch (s.opdt) {
			GRK_DT_CASES(SUM)
			GRK_DT_CASES(MIN)
			GRK_DT_CASES(MAX)
			GRK_DT_CASES(SUMSQ)
		default:
			break;
		}
	}
}

__global__ void __launch_bounds__(256, 2)
batch_kernel(const unsigned char *base, const gr_kseg *segs, uint32_t nsegs, uint32_t total_units,
	     uint64_t *partials, uint32_t *tickets, uint64_t *out)
{
	batch_body(base, segs, nsegs, total_units, partials, tickets, out);
}

struct kseg_params {
	gr_kseg s[GR_KERNEL_PARAM_SEGS];
};

__global__ void __launch_bounds__(256, 2)
batch_kernel_params(const unsigned char *base, const __grid_constant__ kseg_params segs,
		    uint32_t nsegs, uint32_t total_units, uint64_t *partials, uint32_t *tickets,
		    uint64_t *out)
{
	batch_body(base, segs.s, nsegs, total_units, partials, tickets, out);
}

} /* namespace grk */

extern "C" int gr_kernel_launch_batch(const void *base, const gr_kseg *segs, uint32_t nsegs,
				      uint32_t total_units, uint64_t *partials, uint32_t *tickets,
				      uint64_t *out, int sm_count, void *stream)
{
	if (total_units == 0 || nsegs == 0)
		return 0;
	grk::batch_kernel<<<grk::grid_blocks(total_units, sm_count, 8), 256, 0, (cudaStream_t)stream>>>(
		(const unsigned char *)base, segs, nsegs, total_units, partials, tickets, out);
	return (int)cudaGetLastError();
}

extern "C" int gr_kernel_launch_batch_params(const void *base, const gr_kseg *hsegs, uint32_t nsegs,
					     uint32_t total_units, uint64_t *partials, uint32_t *tickets,
					     uint64_t *out, int sm_count, void *stream)
{
	if (nsegs > GR_KERNEL_PARAM_SEGS)
		return (int)cudaErrorInvalidValue;
	if (total_units == 0 || nsegs == 0)
		return 0;
	grk::kseg_params p;
	memcpy(p.s, hsegs, nsegs * sizeof(gr_kseg));
	/* the block is passed whole: no uninitialised bytes in it, though
	 * the kernel reads only the first nsegs */
	memset(p.s + nsegs, 0, (GR_KERNEL_PARAM_SEGS - nsegs) * sizeof(gr_kseg));
	grk::batch_kernel_params<<<grk::grid_blocks(total_units, sm_count, 8), 256, 0, (cudaStream_t)stream>>>(
		(const unsigned char *)base, p, nsegs, total_units, partials, tickets, out);
	return (int)cudaGetLastError();
}

#define GRK_SINGLE(T, OP) \
	grk::launch_single<T, OP>(data, n, partials, ticket, out, sm_count, (cudaStream_t)stream)

extern "C" int gr_kernel_launch_single(int op, int dtype, const void *data, uint64_t n,
				       uint64_t *partials, uint32_t *ticket, uint64_t *out,
				       int sm_count, void *stream)
{
#define GRK_OP(OP)                                                        \
	case OP:                                                          \
		switch (dtype) {                                          \
		case 0: return (int)GRK_SINGLE(int32_t, OP);              \
		case 1: return (int)GRK_SINGLE(int64_t, OP);              \
		case 2: return (int)GRK_SINGLE(uint32_t, OP);             \
		case 3: return (int)GRK_SINGLE(uint64_t, OP);             \
		case 4: return (int)GRK_SINGLE(float, OP);                \
		case 5: return (int)GRK_SINGLE(double, OP);               \
		}                                                         \
		break;
	if (n == 0)
		return (int)cudaErrorInvalidValue;
	switch (op) {
		GRK_OP(grk::SUM)
		GRK_OP(grk::MIN)
		GRK_OP(grk::MAX)
		GRK_OP(grk::SUMSQ)
	}
	return (int)cudaErrorInvalidValue;
}
