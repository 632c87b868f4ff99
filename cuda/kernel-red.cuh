/*
 * The reduction kernel's arithmetic for each element type and op
 * (red<T, OP>, for kernel.cuh): the result's type and identity, a lane's
 * accumulator (for float min and max an integer key: -0 below +0, NaN
 * first for min and last for max), how it takes an element and meets
 * another, its 64-bit form for the partials and the shuffles, and a
 * warp's combination. The order in which the kernel combines (kernel.h)
 * is kernel.cuh's; these are the steps it combines with.
 */
#pragma once

#include <cstdint>
#include <cuda/std/limits>
#include <type_traits>

namespace grk {

/* gr_op's values */
enum { SUM = 0, MIN = 1, MAX = 2, SUMSQ = 3 };

constexpr unsigned FULL = 0xffffffffu;

template <typename T, int OP> struct red {
	static constexpr bool fp = std::is_floating_point<T>::value || OP == SUMSQ;
	static constexpr bool minmax = OP == MIN || OP == MAX;
	/* the result's type (the gr_partial member) */
	using A = typename std::conditional<
		fp, double,
		typename std::conditional<OP == SUM || !std::is_signed<T>::value,
					  unsigned long long, long long>::type>::type;

	static __device__ __forceinline__ A ident()
	{
		if constexpr (OP == SUM || OP == SUMSQ)
			return A(0);
		else if constexpr (fp)
			return OP == MIN ? __longlong_as_double(0x7ff0000000000000ll)
					 : __longlong_as_double((long long)0xfff0000000000000ull);
		else
			return OP == MIN ? (A)cuda::std::numeric_limits<T>::max()
					 : (A)cuda::std::numeric_limits<T>::lowest();
	}

	/* one element into a sum */
	static __device__ __forceinline__ A elem(A acc, T x)
	{
		if constexpr (OP == SUMSQ) {
			double d = (double)x;
			return fma(d, d, acc);
		} else if constexpr (!fp) {
			/* widen signed values with their sign, then wrap */
			if constexpr (std::is_signed<T>::value)
				return acc + (A)(long long)x;
			else
				return acc + (A)x;
		} else {
			return acc + (A)x;
		}
	}

	/*
	 * The type a value is carried in from a lane's fold to the segment's
	 * last combine (lanes, warps, partials): sums in A; integer min/max
	 * in T itself; float min/max as integer keys that order -0 below +0
	 * and put NaN first (for min) or last (for max), so that 32-bit
	 * values meet in the hardware's warp reduction and nothing depends on
	 * the order values meet in. (A lane compares its own elements as
	 * floats and gives the key of the result: lane_fold.) Only the
	 * segment's result is turned back into A.
	 */
	static constexpr bool keyed = std::is_floating_point<T>::value && minmax;
	using K = typename std::conditional<sizeof(T) == 4, int, long long>::type;
	using L = typename std::conditional<
		keyed, K, typename std::conditional<minmax, T, A>::type>::type;

	/* the key every NaN has */
	static __device__ __forceinline__ K nankey()
	{
		constexpr K SIGN = (K)((unsigned long long)1 << ((int)sizeof(T) * 8 - 1));
		return OP == MIN ? SIGN : (K)~SIGN;
	}
	/* the key of a value that is not NaN */
	static __device__ __forceinline__ K nkey(T x)
	{
		constexpr int SH = (int)sizeof(T) * 8 - 1;
		constexpr K SIGN = (K)((unsigned long long)1 << SH);
		K b;
		if constexpr (sizeof(T) == 4)
			b = __float_as_int((float)x);
		else
			b = __double_as_longlong((double)x);
		return b ^ ((b >> SH) & (K)~SIGN);
	}
	static __device__ __forceinline__ K key(T x)
	{
		return x != x ? nankey() : nkey(x);
	}
	static __device__ __forceinline__ A unkey(K k)
	{
		constexpr int SH = (int)sizeof(T) * 8 - 1;
		constexpr K SIGN = (K)((unsigned long long)1 << SH);
		if (k == (OP == MIN ? SIGN : (K)~SIGN))
			return __longlong_as_double(0x7ff8000000000000ll);
		K b = k ^ ((k >> SH) & (K)~SIGN);
		if constexpr (sizeof(T) == 4)
			return (double)__int_as_float(b);
		else
			return __longlong_as_double(b);
	}

	static __device__ __forceinline__ L lident()
	{
		if constexpr (keyed)
			return OP == MIN ? cuda::std::numeric_limits<K>::max() : cuda::std::numeric_limits<K>::min();
		else if constexpr (minmax)
			return OP == MIN ? cuda::std::numeric_limits<T>::max() : cuda::std::numeric_limits<T>::lowest();
		else
			return ident();
	}
	static __device__ __forceinline__ L lcomb(L a, L b)
	{
		if constexpr (OP == MIN)
			return b < a ? b : a;
		else if constexpr (OP == MAX)
			return b > a ? b : a;
		else
			return a + b;
	}
	static __device__ __forceinline__ L lelem(L acc, T x)
	{
		if constexpr (keyed)
			return lcomb(acc, key(x));
		else if constexpr (minmax)
			return lcomb(acc, x);
		else
			return elem(acc, x);
	}
	/* the segment's result (a key no element gives means none was seen) */
	static __device__ __forceinline__ A lfinish(L acc)
	{
		if constexpr (keyed)
			return acc == lident() ? ident() : unkey(acc);
		else
			return (A)acc;
	}

	/* L through 64-bit partials and shuffles */
	static __device__ __forceinline__ uint64_t lbits(L v)
	{
		if constexpr (std::is_same<L, double>::value)
			return (uint64_t)__double_as_longlong(v);
		else if constexpr (std::is_signed<L>::value)
			return (uint64_t)(long long)v;
		else
			return (uint64_t)v;
	}
	static __device__ __forceinline__ L lunbits(uint64_t u)
	{
		if constexpr (std::is_same<L, double>::value)
			return __longlong_as_double((long long)u);
		else
			return (L)u;
	}
	static __device__ __forceinline__ uint64_t bits(A a)
	{
		if constexpr (fp)
			return (uint64_t)__double_as_longlong(a);
		else
			return (uint64_t)a;
	}

	/*
	 * A fixed butterfly: every lane ends with the same bits. Where only
	 * lanes below `live` (warp-uniform) may hold anything but lident,
	 * the steps at which every such lane would meet only lident are left
	 * out: lident changes no value it meets (a sum is never -0, as it
	 * starts at +0, and a NaN sum is already what an add makes of it),
	 * so lanes below the power of two at or above live end with the
	 * bits that every step would give them; the other lanes do not.
	 */
	static __device__ __forceinline__ L lwarp(L v, uint32_t live = 32)
	{
		if constexpr (minmax && sizeof(L) == 4) {
			/* 32-bit values and keys: the hardware's warp reduction */
			return OP == MIN ? __reduce_min_sync(FULL, v) : __reduce_max_sync(FULL, v);
		} else {
#pragma unroll
			for (int m = 16; m; m >>= 1) {
				if ((uint32_t)m >= live)
					continue;
				long long o = __shfl_xor_sync(FULL, (long long)lbits(v), m);
				v = lcomb(v, lunbits((uint64_t)o));
			}
			return v;
		}
	}
};

} /* namespace grk */
