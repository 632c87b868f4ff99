/* The segmented reduce's launcher (segred.h): the wide dtypes, and the
 * narrow ones, each read as it widens (widen.cuh) and reduced as that. */
#include <cuda_runtime.h>

#include "cuda/segred-moments.cuh"

using namespace grsr;

enum { OP_SUM = 0, OP_MIN = 1, OP_MAX = 2, OP_SUMSQ = 3, OP_ARGMIN = 4, OP_ARGMAX = 5, OP_MOMENTS = 6 };
enum { DT_I32, DT_I64, DT_U32, DT_U64, DT_F32, DT_F64, DT_LAST_NARROW = grwiden::U16 };

static bool is_narrow(int dtype)
{
	return dtype > DT_F64 && dtype <= DT_LAST_NARROW;
}

/* The dtype a narrow dtype's elements widen to; a wide one's own. */
static int wide_of(int dtype)
{
	switch (dtype) {
	case grwiden::F16:
	case grwiden::BF16:
	case grwiden::E4M3:
	case grwiden::E5M2: return DT_F32;
	case grwiden::I8:
	case grwiden::I16: return DT_I32;
	case grwiden::U8:
	case grwiden::U16: return DT_U32;
	}
	return dtype;
}

extern "C" int gr_segred_takes(int op)
{
	return op >= OP_SUM && op <= OP_MOMENTS;
}

static_assert(F_NAN == GR_SEGRED_F_NAN && F_PINF == GR_SEGRED_F_PINF && F_NINF == GR_SEGRED_F_NINF &&
		      F_NOT_NZERO == GR_SEGRED_F_NOT_NZERO,
	      "segred.h gives the flags");

extern "C" void gr_segred_moments_layout_of(int dtype, gr_segred_moments_layout *ret)
{
	if (dtype == DT_F32)
		*ret = { digits<fm_f32>(), digits<fm_f32sq>(), -fm_f32::Z, -fm_f32sq::Z };
	else if (dtype == DT_F64)
		*ret = { digits<fm_f64>(), digits<fm_f64sq>(), -fm_f64::Z, -fm_f64sq::Z };
	else
		*ret = { ISUM, ISQ, 0, 0 };
}

extern "C" size_t gr_segred_record_bytes(int op, int dtype)
{
	dtype = wide_of(dtype);
	if (op == OP_MOMENTS) {
		gr_segred_moments_layout l;
		gr_segred_moments_layout_of(dtype, &l);
		return 8 * (l.sum_digits + l.sq_digits + 4);
	}
	return op == OP_ARGMIN || op == OP_ARGMAX ? 16 : 8;
}

extern "C" size_t gr_segred_scratch_per_seg(int op, int dtype)
{
	if (is_narrow(dtype) && op == OP_MOMENTS)
		return 0;
	dtype = wide_of(dtype);
	if (op == OP_ARGMIN || op == OP_ARGMAX)
		return 16; /* a key and an index */
	if (op == OP_SUM && dtype == DT_F32)
		return scratch_per_seg<fm_f32>();
	if (op == OP_SUM && dtype == DT_F64)
		return scratch_per_seg<fm_f64>();
	if (op == OP_SUMSQ && dtype == DT_F32)
		return scratch_per_seg<fm_f32sq>();
	if (op == OP_SUMSQ && dtype == DT_F64)
		return scratch_per_seg<fm_f64sq>();
	if (op == OP_SUMSQ)
		return scratch_per_seg<fm_isq<int32_t>>(); /* the same for every integer */
	return 0;
}

static size_t dtype_size(int dtype)
{
	if (is_narrow(dtype))
		return dtype == grwiden::F16 || dtype == grwiden::BF16 || dtype == grwiden::I16 ||
			       dtype == grwiden::U16
			       ? 2
			       : 1;
	return dtype == DT_I32 || dtype == DT_U32 || dtype == DT_F32 ? 4 : 8;
}

/* op over elements of a dtype that IN reads, widened to T */
template <typename T, class IN = grwiden::in<T>>
static cudaError_t by_op(int op, params p, void *scratch, size_t bytes, size_t *zero, cudaStream_t st)
{
	switch (op) {
	case OP_MIN:
		return launch_ext<T, false, IN>(p, st);
	case OP_MAX:
		return launch_ext<T, true, IN>(p, st);
	case OP_ARGMIN:
	case OP_ARGMAX:
		/* keys and indices: the scratch is not zero after them */
		if (zero)
			*zero = 0;
		return op == OP_ARGMIN ? launch_arg<T, false, IN>(p, scratch, bytes, st)
				       : launch_arg<T, true, IN>(p, scratch, bytes, st);
	case OP_SUM:
		if constexpr (std::is_same<T, float>::value)
			return launch_exact<fm_f32, IN>(p, scratch, bytes, zero, st);
		else if constexpr (std::is_same<T, double>::value)
			return launch_exact<fm_f64>(p, scratch, bytes, zero, st);
		else
			return launch_isum<T, IN>(p, st);
	case OP_SUMSQ:
		if constexpr (std::is_same<T, float>::value)
			return launch_exact<fm_f32sq, IN>(p, scratch, bytes, zero, st);
		else if constexpr (std::is_same<T, double>::value)
			return launch_exact<fm_f64sq>(p, scratch, bytes, zero, st);
		else
			return launch_exact<fm_isq<T>, IN>(p, scratch, bytes, zero, st);
	case OP_MOMENTS:
		/* a narrow dtype's moments of segments: not here (segred.h) */
		if constexpr (IN::NARROW)
			return cudaErrorInvalidValue;
		else if constexpr (std::is_same<T, float>::value)
			return launch_fmom<fm_f32, fm_f32sq>(p, st);
		else if constexpr (std::is_same<T, double>::value)
			return launch_fmom<fm_f64, fm_f64sq>(p, st);
		else
			return launch_imom<T>(p, st);
	}
	return cudaErrorInvalidValue;
}

extern "C" int gr_segred_launch(int op, int dtype, const void *data, const uint64_t *offs,
				uint64_t nsegs, uint64_t first, uint64_t end, void *records, void *scratch,
				size_t scratch_bytes, size_t *scratch_zero, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (!gr_segred_takes(op) || dtype < DT_I32 || dtype > DT_LAST_NARROW ||
	    (is_narrow(dtype) && op == OP_MOMENTS) || end < first ||
	    end - first > GR_SEGRED_MAX_ELEMS || (uintptr_t)data % dtype_size(dtype)) {
		if (scratch_zero)
			*scratch_zero = 0;
		return (int)cudaErrorInvalidValue;
	}
	if (nsegs == 0)
		return 0;
	params p = {};
	p.x = data;
	p.off = offs;
	p.k = nsegs;
	p.first = first;
	p.end = end;
	p.rec = (uint64_t *)records;
	using grwiden::in;
	using grwiden::narrow;
	switch (dtype) {
	case grwiden::F16: return (int)by_op<float, in<narrow<grwiden::F16>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::BF16: return (int)by_op<float, in<narrow<grwiden::BF16>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::E4M3: return (int)by_op<float, in<narrow<grwiden::E4M3>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::E5M2: return (int)by_op<float, in<narrow<grwiden::E5M2>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::I8: return (int)by_op<int32_t, in<narrow<grwiden::I8>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::U8: return (int)by_op<uint32_t, in<narrow<grwiden::U8>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::I16: return (int)by_op<int32_t, in<narrow<grwiden::I16>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case grwiden::U16: return (int)by_op<uint32_t, in<narrow<grwiden::U16>>>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case DT_I32: return (int)by_op<int32_t>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case DT_I64: return (int)by_op<int64_t>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case DT_U32: return (int)by_op<uint32_t>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case DT_U64: return (int)by_op<uint64_t>(op, p, scratch, scratch_bytes, scratch_zero, st);
	case DT_F32: return (int)by_op<float>(op, p, scratch, scratch_bytes, scratch_zero, st);
	default: return (int)by_op<double>(op, p, scratch, scratch_bytes, scratch_zero, st);
	}
}
