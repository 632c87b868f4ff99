/* The narrow dtypes' kernels' launchers (narrow.h). */
#include <cuda_runtime.h>

#include "cuda/narrow-argm.cuh"
#include "cuda/narrow-mom-bf16.cuh"
#include "cuda/narrow-mom-int.cuh"
#include "cuda/narrow-moments.cuh"
#include "cuda/narrow-ops.cuh"
#include "cuda/narrow-sq.cuh"

extern "C" bool gr_narrow_has_kernel(int op, int dtype)
{
	using namespace grn;
	/* every op of every narrow dtype */
	return dtype >= F16 && dtype <= U16 && op >= SUM && op <= MOMENTS;
}

extern "C" bool gr_narrow_exact(int op, int dtype)
{
	using namespace grn;
	return op == SUMSQ || (op == SUM && dtype <= E5M2);
}

namespace grn {

#define GRN_LAUNCH(...) launch<__VA_ARGS__>(data, n, scratch, raw, xout, sm_count, st)
/* the f16 sum's form: two vectors a lane a group, four blocks an SM (the
 * quickest of gpured-narrow-bench --sweep on an H200) */
#define GRN_LAUNCH_F16(...) launch<__VA_ARGS__, 2, 4>(data, n, scratch, raw, xout, sm_count, st)
/* the bf16 sum's: three vectors, three blocks (likewise, of its forms) */
#define GRN_LAUNCH_BF16(...) launch<__VA_ARGS__, 3, 3>(data, n, scratch, raw, xout, sm_count, st)

template <bool MAX>
static cudaError_t argm(int dtype, const void *data, uint64_t n, gr_exact_scratch *scratch,
			gr_argm_result *out, int sm_count, cudaStream_t st)
{
	switch (dtype) {
	case F16: return launch_argm<F16, MAX>(data, n, scratch, out, sm_count, st);
	case BF16: return launch_argm<BF16, MAX>(data, n, scratch, out, sm_count, st);
	case E4M3: return launch_argm<E4M3, MAX>(data, n, scratch, out, sm_count, st);
	case E5M2: return launch_argm<E5M2, MAX>(data, n, scratch, out, sm_count, st);
	case I8: return launch_argm<I8, MAX>(data, n, scratch, out, sm_count, st);
	case U8: return launch_argm<U8, MAX>(data, n, scratch, out, sm_count, st);
	case I16: return launch_argm<I16, MAX>(data, n, scratch, out, sm_count, st);
	case U16: return launch_argm<U16, MAX>(data, n, scratch, out, sm_count, st);
	}
	return cudaErrorInvalidValue;
}

template <int OP>
static cudaError_t minmax(int dtype, const void *data, uint64_t n, gr_exact_scratch *scratch,
			  uint64_t *raw, gr_exact_sum *xout, int sm_count, cudaStream_t st)
{
	switch (dtype) {
	case F16: return GRN_LAUNCH(MinMax<F16, OP>);
	case BF16: return GRN_LAUNCH(MinMax<BF16, OP>);
	case E4M3: return GRN_LAUNCH(MinMax<E4M3, OP>);
	case E5M2: return GRN_LAUNCH(MinMax<E5M2, OP>);
	case I8: return GRN_LAUNCH(MinMax<I8, OP>);
	case U8: return GRN_LAUNCH(MinMax<U8, OP>);
	case I16: return GRN_LAUNCH(MinMax<I16, OP>);
	case U16: return GRN_LAUNCH(MinMax<U16, OP>);
	}
	return cudaErrorInvalidValue;
}

} /* namespace grn */

extern "C" int gr_narrow_launch(int op, int dtype, const void *data, uint64_t n,
				gr_exact_scratch *scratch, uint64_t *raw, gr_exact_sum *xout,
				int sm_count, void *stream)
{
	using namespace grn;
	cudaStream_t st = (cudaStream_t)stream;
	if (n == 0 || op == MOMENTS || !gr_narrow_has_kernel(op, dtype))
		return (int)cudaErrorInvalidValue;
	if ((uintptr_t)data % dt_size_of(dtype))
		return (int)cudaErrorInvalidValue;
	switch (op) {
	case SUM:
		switch (dtype) {
		case F16: return (int)GRN_LAUNCH_F16(SumFix<F16, false>);
		case BF16: return (int)GRN_LAUNCH_BF16(SumBf16);
		case E4M3: return (int)GRN_LAUNCH(SumF8<E4M3>);
		case E5M2: return (int)GRN_LAUNCH(SumF8<E5M2>);
		case I8: return (int)GRN_LAUNCH(SumInt<I8, false>);
		case U8: return (int)GRN_LAUNCH(SumInt<U8, false>);
		case I16: return (int)GRN_LAUNCH(SumInt<I16, false>);
		case U16: return (int)GRN_LAUNCH(SumInt<U16, false>);
		}
		break;
	case SUMSQ:
		switch (dtype) {
		case F16: return (int)GRN_LAUNCH(SumSqGrid<F16>);
		case BF16: return (int)launch<SumSqBf16, 4>(data, n, scratch, raw, xout, sm_count, st);
		case E4M3: return (int)GRN_LAUNCH(SumFix<E4M3, true>);
		case E5M2: return (int)GRN_LAUNCH(SumSqGrid<E5M2>);
		case I8: return (int)GRN_LAUNCH(SumInt<I8, true>);
		case U8: return (int)GRN_LAUNCH(SumInt<U8, true>);
		case I16: return (int)GRN_LAUNCH(SumInt<I16, true>);
		case U16: return (int)GRN_LAUNCH(SumInt<U16, true>);
		}
		break;
	case ARGMIN:
	case ARGMAX: {
		gr_argm_result *ao = (gr_argm_result *)raw;
		return (int)(op == ARGMAX ? argm<true>(dtype, data, n, scratch, ao, sm_count, st)
					  : argm<false>(dtype, data, n, scratch, ao, sm_count, st));
	}
	case MIN:
		return (int)minmax<MIN>(dtype, data, n, scratch, raw, xout, sm_count, st);
	case MAX:
		return (int)minmax<MAX>(dtype, data, n, scratch, raw, xout, sm_count, st);
	}
	return (int)cudaErrorInvalidValue;
}

extern "C" int gr_narrow_moments_launch(int dtype, const void *data, uint64_t n,
					gr_moments_scratch *scratch, gr_moments_sums *out, int sm_count,
					void *stream)
{
	using namespace grn;
	cudaStream_t st = (cudaStream_t)stream;
	if (n == 0 || !gr_narrow_has_kernel(MOMENTS, dtype))
		return (int)cudaErrorInvalidValue;
	if (dt_size_of(dtype) == 2 && ((uintptr_t)data & 1u))
		return (int)cudaErrorInvalidValue;
	switch (dtype) {
	case F16: return (int)launch_moments<F16>(data, n, scratch, out, sm_count, st);
	case BF16: return (int)launch_mom_bf16(data, n, scratch, out, sm_count, st);
	case E4M3: return (int)launch_moments<E4M3>(data, n, scratch, out, sm_count, st);
	case E5M2: return (int)launch_moments<E5M2>(data, n, scratch, out, sm_count, st);
	case I8: return (int)launch_mom_int<I8>(data, n, scratch, out, sm_count, st);
	case U8: return (int)launch_mom_int<U8>(data, n, scratch, out, sm_count, st);
	case I16: return (int)launch_mom_int<I16>(data, n, scratch, out, sm_count, st);
	case U16: return (int)launch_mom_int<U16>(data, n, scratch, out, sm_count, st);
	}
	return (int)cudaErrorInvalidValue;
}
