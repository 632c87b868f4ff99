/*
 * What the kernels' warps share: the full mask, a plain sum's
 * accumulator (double for floats, 64-bit wrapping integers otherwise,
 * signed elements widened with their sign) and its bits, and the ticket
 * by which the last warp of a group finds out that it is last.
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

namespace grwarp {

constexpr unsigned FULL = 0xffffffffu;

template <typename T> struct sum_acc {
	static constexpr bool fp = std::is_floating_point<T>::value;
	using A = typename std::conditional<fp, double, unsigned long long>::type;
	/* -0.0: adding it changes nothing, so "left out" costs no branch */
	static __device__ __forceinline__ A ident()
	{
		if constexpr (fp)
			return -0.0;
		else
			return 0;
	}
	static __device__ __forceinline__ A of(T x)
	{
		if constexpr (fp)
			return (double)x;
		else if constexpr (std::is_signed<T>::value)
			return (A)(long long)x;
		else
			return (A)x;
	}
	static __device__ __forceinline__ uint64_t bits(A a)
	{
		if constexpr (fp)
			return (uint64_t)__double_as_longlong(a);
		else
			return (uint64_t)a;
	}
	static __device__ __forceinline__ A unbits(uint64_t u)
	{
		if constexpr (fp)
			return __longlong_as_double((long long)u);
		else
			return (A)u;
	}
};

/* Whether this warp arrived last of `of` at ticket; lane 0 published its
 * writes before it takes the ticket. */
static __device__ __forceinline__ bool arrive_last(uint32_t *ticket, uint32_t of, unsigned lane)
{
	unsigned last = 0;
	if (lane == 0) {
		__threadfence();
		last = atomicAdd(ticket, 1u) == of - 1;
	}
	last = __shfl_sync(FULL, last, 0);
	if (last)
		__threadfence();
	return last;
}

} /* namespace grwarp */
