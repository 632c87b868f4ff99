/*
 * Reductions of the narrow dtypes (f16, bf16, f8e4m3, f8e5m2, i8, u8, i16,
 * u16) in device memory: the host interface. Each op gives what the CPU
 * gives for the elements widened exactly to f32, i32 or u32
 * (math/widen.h), bit for bit: float sums and every sum of squares as an
 * exact sum (gr_exact_sum, which the host rounds once, as for f32), the
 * others as the 64-bit raw value the batch kernel leaves for the wide
 * dtypes (kernel.h): integer sums wrapping, min and max of floats as the
 * float64 bits of the element (NaN when any element is one), of integers
 * as int64 or uint64; argmin and argmax as argm.h's result (value, as
 * min's and max's, and index); moments of the floats as the f32 moments
 * kernel's sums (moments.h), their keys in the f64 form, and of the
 * integers as the i32 and u32 moments kernel's (isum, isq, keys).
 * narrow.cuh, narrow-ops.cuh, narrow-sq.cuh, narrow-argm.cuh,
 * narrow-moments.cuh, narrow-mom-bf16.cuh and narrow-mom-int.cuh have
 * how.
 *
 * Every op of every narrow dtype has a kernel here
 * (gr_narrow_has_kernel(), as engine/backend.h's
 * gr_backend_narrow_on_device says).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cuda/exact.h"
#include "cuda/moments.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether op (gr_op) over dtype (gr_dtype, a narrow one) has a kernel. */
bool gr_narrow_has_kernel(int op, int dtype);

/* Whether its result is an exact sum (into *xout) rather than a raw
 * value (into *raw). */
bool gr_narrow_exact(int op, int dtype);

/*
 * Reduce the n > 0 elements of dtype at data (device memory, aligned to
 * the element's size) with op (not moments: below), in one launch on
 * stream: the result into
 * *xout (gr_narrow_exact) or *raw (argmin and argmax: raw is a
 * gr_argm_result, value and index), either of which may be mapped host
 * memory. scratch is zero before and left zero (gr_exact_scratch's
 * rule); one launch at a time per scratch. Returns the launch's
 * cudaError_t; cudaErrorInvalidValue for a pair with no kernel, n == 0 or
 * a misaligned pointer.
 */
int gr_narrow_launch(int op, int dtype, const void *data, uint64_t n, gr_exact_scratch *scratch,
		     uint64_t *raw, gr_exact_sum *xout, int sm_count, void *stream);

/*
 * The moments sums of the n > 0 elements of dtype (a narrow one) at data
 * (device memory, aligned to the element's size) into *out, in one launch
 * on stream: what gr_moments_launch() gives for the elements widened to
 * f32, i32 or u32, except that a float's kmin and kmax are the keys of
 * the extremes widened to f64 (gr_moments_key_value(GR_EXACT_F64, k) is
 * the value). scratch as gr_moments_launch()'s. Returns the launch's
 * cudaError_t; cudaErrorInvalidValue for another dtype, n == 0 or a
 * misaligned pointer.
 */
int gr_narrow_moments_launch(int dtype, const void *data, uint64_t n, gr_moments_scratch *scratch,
			     gr_moments_sums *out, int sm_count, void *stream);

#ifdef __cplusplus
}
#endif
