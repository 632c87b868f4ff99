/*
 * The narrow dtypes' elements widened on the device, as math/widen.h
 * widens them on the host, bit for bit: f16, bf16, f8e4m3 and f8e5m2 to
 * f32, i8 and i16 to int32_t, u8 and u16 to uint32_t; a NaN to a quiet
 * NaN of the same sign and payload (E4M3's two NaNs to 0x7fc00000 with
 * their sign).
 *
 * A kernel that reads elements of a dtype names it by a type: the wide
 * dtypes by their own C type, the narrow ones by narrow<DT> (DT their
 * gr_dtype). in<T> says what that reads: R, the element as memory holds
 * it, and W, what it widens to (R itself for the wide dtypes), with
 * widen(), and for the integers LO and HI, the dtype's own range.
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

namespace grwiden {

/* gr_dtype's values (proto/types.h) */
enum { F16 = 6, BF16 = 7, E4M3 = 8, E5M2 = 9, I8 = 10, U8 = 11, I16 = 12, U16 = 13 };

template <int DT> struct narrow {};

/* An f16's bits as an f32's: the conversion instruction (exact for every
 * number, subnormals too), with a NaN made quiet, its payload kept. */
static __device__ __forceinline__ uint32_t f16_bits(uint32_t h)
{
	float f;
	asm("{.reg .b16 l;\n\tcvt.u16.u32 l, %1;\n\tcvt.f32.f16 %0, l;\n\t}" : "=f"(f) : "r"(h));
	const uint32_t sign = (h & 0x8000u) << 16, m = h & 0x3ffu;
	return (h & 0x7c00u) == 0x7c00u && m ? sign | 0x7fc00000u | m << 13 : __float_as_uint(f);
}

/* An E4M3's bits as an f32's (the conversion to f16 is exact; sm_89 and
 * later have it). */
static __device__ __forceinline__ uint32_t e4m3_bits(uint32_t b)
{
	uint32_t h;
	asm("{.reg .b16 l;\n\t.reg .b32 r;\n\tcvt.u16.u32 l, %1;\n\tcvt.rn.f16x2.e4m3x2 r, l;\n\t"
	    "and.b32 %0, r, 0xffff;\n\t}"
	    : "=r"(h)
	    : "r"(b & 0xffu));
	return (b & 0x7fu) == 0x7fu ? (b & 0x80u) << 24 | 0x7fc00000u : f16_bits(h);
}

template <typename T> struct in {
	using R = T;
	using W = T;
	static constexpr bool NARROW = false;
	static __device__ __forceinline__ W widen(R x) { return x; }
};

template <int DT, typename R_, typename W_> struct in_narrow {
	using R = R_;
	using W = W_;
	static constexpr bool NARROW = true;
	static constexpr long long LO = std::is_signed<R_>::value ? -(1ll << (8 * sizeof(R_) - 1)) : 0;
	static constexpr long long HI = std::is_signed<R_>::value ? (1ll << (8 * sizeof(R_) - 1)) - 1
								  : (1ll << (8 * sizeof(R_))) - 1;
};

template <> struct in<narrow<F16>> : in_narrow<F16, uint16_t, float> {
	static __device__ __forceinline__ float widen(uint16_t x) { return __uint_as_float(f16_bits(x)); }
};
template <> struct in<narrow<BF16>> : in_narrow<BF16, uint16_t, float> {
	static __device__ __forceinline__ float widen(uint16_t x) { return __uint_as_float((uint32_t)x << 16); }
};
template <> struct in<narrow<E4M3>> : in_narrow<E4M3, uint8_t, float> {
	static __device__ __forceinline__ float widen(uint8_t x) { return __uint_as_float(e4m3_bits(x)); }
};
template <> struct in<narrow<E5M2>> : in_narrow<E5M2, uint8_t, float> {
	static __device__ __forceinline__ float widen(uint8_t x)
	{
		return __uint_as_float(f16_bits((uint32_t)x << 8));
	}
};
template <> struct in<narrow<I8>> : in_narrow<I8, int8_t, int32_t> {
	static __device__ __forceinline__ int32_t widen(int8_t x) { return x; }
};
template <> struct in<narrow<U8>> : in_narrow<U8, uint8_t, uint32_t> {
	static __device__ __forceinline__ uint32_t widen(uint8_t x) { return x; }
};
template <> struct in<narrow<I16>> : in_narrow<I16, int16_t, int32_t> {
	static __device__ __forceinline__ int32_t widen(int16_t x) { return x; }
};
template <> struct in<narrow<U16>> : in_narrow<U16, uint16_t, uint32_t> {
	static __device__ __forceinline__ uint32_t widen(uint16_t x) { return x; }
};

/* Element i of x, widened (read through the read-only cache). */
template <class IN>
static __device__ __forceinline__ typename IN::W ld(const typename IN::R *x, uint64_t i)
{
	return IN::widen(__ldg(x + i));
}

} /* namespace grwiden */
