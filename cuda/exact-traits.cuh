/*
 * What the exact kernels (exact.cuh) sum, and the constants their bins
 * are placed by: for each kind of element (f32, f64, and the exact
 * squares of either, sqf and sqd) its 16-byte vectors' elements as keys
 * (|x|'s order as an unsigned integer, for the window checks), values
 * (the double the bins add) and padding, and the bounds of E. exact.cuh's
 * header comment has the argument these serve.
 */
#pragma once

#include <cfloat>
#include <cstdint>

#include "cuda/exact.h"

namespace gre {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned THREADS = 256;
/* 16-byte vectors a lane loads before it adds them (a batch) */
constexpr unsigned GROUP = 8;
/* b0 = E + B0_ABOVE, b1 = b0 - B1_BELOW (see above) */
constexpr int B0_ABOVE = 18;
constexpr int B1_BELOW = 39;
/* bins per lane (traits<T>::BINS): the fast path uses the first FB, the
 * careful path all */
constexpr int BINS = 4;
/* E's lower end for nb bins: the last bin's b - 3 stays a normal double's
 * exponent (b0 + 1 stays below 1024 by E_HI) */
template <int NB, int B0 = B0_ABOVE, int D = B1_BELOW>
constexpr int E_LO = -1022 + 3 - B0 + (NB - 1) * D;
/* digits between the digits' place of 2^-1074 (a double's bit 0) and
 * their bottom place */
constexpr int LSB_OFF = -1074 - GR_EXACT_LSB_EXP;

/* 2^e as a double, e a normal exponent (the segmented reduce's exact
 * sums use it too) */
static __device__ __forceinline__ double pow2(int e)
{
	return __hiloint2double((e + 1023) << 20, 0);
}

template <typename T> struct traits;

/* An f32 element whose square is summed (sumsq): x * x is exact in a
 * double (48 significant bits, 2^-298 to 2^256), so the square is summed
 * as the double path sums an f64 element, keys and all. */
struct sqf {
	float f;
	__device__ __forceinline__ operator float() const { return f; }
};

template <> struct traits<float> {
	static constexpr unsigned V = 4;
	static constexpr int E_HI = 128;
	/* an element is one double to add (SPLIT: a square, two) */
	static constexpr bool SPLIT = false;
	static constexpr int BINS = gre::BINS;
	static __device__ __forceinline__ uint32_t word(const uint4 &v, unsigned i)
	{
		return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
	}
	/* |x|'s order as an unsigned integer */
	static __device__ __forceinline__ uint32_t key(const uint4 &v, unsigned i)
	{
		return word(v, i) & 0x7fffffffu;
	}
	/* the same, but never 0 for x != 0 */
	static __device__ __forceinline__ uint32_t nzkey(const uint4 &v, unsigned i)
	{
		return key(v, i);
	}
	/* the word whose signed maximum is INT_MIN only for -0 */
	static __device__ __forceinline__ int raw(const uint4 &v, unsigned i)
	{
		return (int)word(v, i);
	}
	static __device__ __forceinline__ double value(const uint4 &v, unsigned i)
	{
		return (double)__uint_as_float(word(v, i));
	}
	/* E with |x| < 2^E for a key */
	static __device__ __forceinline__ int bound(uint32_t k)
	{
		return (int)(k >> 23) - 127 + 1;
	}
	/* largest key of an |x| < 2^E, or 0 if only zero is */
	static __device__ __forceinline__ uint32_t key_below(int e)
	{
		uint32_t b = e >= -126 ? (uint32_t)(e + 127) << 23 : e >= -149 ? 1u << (e + 149) : 0;
		return b ? b - 1 : 0;
	}
	/* smallest key (x != 0) that a1 adds exactly: x a multiple of 2^(b1 - 52) */
	static __device__ __forceinline__ uint32_t key_exact(int b1)
	{
		return b1 - 52 <= -149 ? 1u : (uint32_t)(b1 - 29 + 127) << 23;
	}
	static __device__ __forceinline__ uint4 pad()
	{
		return make_uint4(0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u);
	}
};

template <> struct traits<double> {
	static constexpr unsigned V = 2;
	static constexpr int E_HI = 1000;
	static constexpr bool SPLIT = false;
	static constexpr int BINS = gre::BINS;
	static __device__ __forceinline__ uint32_t lo(const uint4 &v, unsigned i)
	{
		return i == 0 ? v.x : v.z;
	}
	static __device__ __forceinline__ uint32_t hi(const uint4 &v, unsigned i)
	{
		return i == 0 ? v.y : v.w;
	}
	static __device__ __forceinline__ uint32_t key(const uint4 &v, unsigned i)
	{
		return hi(v, i) & 0x7fffffffu;
	}
	/* a subnormal whose high word is 0 still gives 1; keys of powers of
	 * two (low bit clear) compare the same either way */
	static __device__ __forceinline__ uint32_t nzkey(const uint4 &v, unsigned i)
	{
		return key(v, i) | (lo(v, i) != 0);
	}
	/* every element whose high word is 0x80000000 and whose sum is zero
	 * is -0 (all of them are <= -0, and they add to 0) */
	static __device__ __forceinline__ int raw(const uint4 &v, unsigned i)
	{
		return (int)hi(v, i);
	}
	static __device__ __forceinline__ double value(const uint4 &v, unsigned i)
	{
		return __hiloint2double((int)hi(v, i), (int)lo(v, i));
	}
	static __device__ __forceinline__ int bound(uint32_t k)
	{
		return (int)(k >> 20) - 1023 + 1;
	}
	static __device__ __forceinline__ uint32_t key_below(int e)
	{
		return ((uint32_t)(e + 1023) << 20) - 1;
	}
	static __device__ __forceinline__ uint32_t key_exact(int b1)
	{
		return (uint32_t)(b1 + 1023) << 20;
	}
	static __device__ __forceinline__ uint4 pad()
	{
		return make_uint4(0u, 0x80000000u, 0u, 0x80000000u);
	}
};

template <> struct traits<sqf> {
	static constexpr unsigned V = 4;
	static constexpr int E_HI = traits<double>::E_HI;
	static constexpr bool SPLIT = false;
	static constexpr int BINS = gre::BINS;
	static __device__ __forceinline__ double sq(const uint4 &v, unsigned i)
	{
		double x = (double)__uint_as_float(traits<float>::word(v, i));
		return x * x;
	}
	static __device__ __forceinline__ uint32_t key(const uint4 &v, unsigned i)
	{
		return (uint32_t)__double2hiint(sq(v, i)) & 0x7fffffffu;
	}
	static __device__ __forceinline__ uint32_t nzkey(const uint4 &v, unsigned i)
	{
		double s = sq(v, i);
		return ((uint32_t)__double2hiint(s) & 0x7fffffffu) | (__double2loint(s) != 0);
	}
	/* a square is never -0: every lane's maximum is >= 0, and the sum
	 * of squares is never -0 either */
	static __device__ __forceinline__ int raw(const uint4 &v, unsigned i)
	{
		return __double2hiint(sq(v, i));
	}
	static __device__ __forceinline__ double value(const uint4 &v, unsigned i)
	{
		return sq(v, i);
	}
	static __device__ __forceinline__ int bound(uint32_t k)
	{
		return traits<double>::bound(k);
	}
	static __device__ __forceinline__ uint32_t key_below(int e)
	{
		return traits<double>::key_below(e);
	}
	/* a square has at most 48 significant bits (an f32 has 24), so it
	 * is a multiple of 2^(b1 - 52) from 2^(b1 - 5) up, where an f64 needs
	 * 2^b1 */
	static __device__ __forceinline__ uint32_t key_exact(int b1)
	{
		return traits<double>::key_exact(b1 - 5);
	}
	static __device__ __forceinline__ uint4 pad()
	{
		return make_uint4(0u, 0u, 0u, 0u);
	}
};

/* An f64 element whose square is summed (sumsq): its square is p + e,
 * two doubles (see above); the keys are p's. */
struct sqd {
	double d;
	__device__ __forceinline__ operator double() const { return d; }
};

template <> struct traits<sqd> {
	static constexpr unsigned V = 2;
	static constexpr int E_HI = traits<double>::E_HI;
	static constexpr bool SPLIT = true;
	/* two more for the careful path (see above) */
	static constexpr int BINS = 6;
	/* p, never contracted into an add that follows */
	static __device__ __forceinline__ double sq(const uint4 &v, unsigned i)
	{
		double x = traits<double>::value(v, i);
		return __dmul_rn(x, x);
	}
	static __device__ __forceinline__ uint32_t key(const uint4 &v, unsigned i)
	{
		return (uint32_t)__double2hiint(sq(v, i)) & 0x7fffffffu;
	}
	/* 0 only for x = +-0: an x whose square underflows is not 0 here */
	static __device__ __forceinline__ uint32_t nzkey(const uint4 &v, unsigned i)
	{
		return key(v, i) | (traits<double>::nzkey(v, i) != 0);
	}
	/* a square is never -0 */
	static __device__ __forceinline__ int raw(const uint4 &, unsigned)
	{
		return 0;
	}
	/* the element itself: SPLIT's paths square it */
	static __device__ __forceinline__ double value(const uint4 &v, unsigned i)
	{
		return traits<double>::value(v, i);
	}
	static __device__ __forceinline__ int bound(uint32_t k)
	{
		return traits<double>::bound(k);
	}
	static __device__ __forceinline__ uint32_t key_below(int e)
	{
		return traits<double>::key_below(e);
	}
	/* b is the last fast bin's, b3: squares from 2^(b3 + 53) (above) */
	static __device__ __forceinline__ uint32_t key_exact(int b)
	{
		return traits<double>::key_exact(b + 53);
	}
	static __device__ __forceinline__ uint4 pad()
	{
		return make_uint4(0u, 0u, 0u, 0u);
	}
};

/* An array of T (any element type) as the kernels take it: head elements before its first
 * 16-byte boundary, nv whole 16-byte vectors from vb, tail elements after
 * them (the head and tail go to block 0's first warp, ends_vector) */
template <typename T> struct vectors {
	uint64_t head, nv, tail;
	const uint4 *vb;
	__device__ __forceinline__ vectors(const unsigned char *data, uint64_t n)
	{
		const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / sizeof(T);
		head = h < n ? h : n;
		nv = (n - head) * sizeof(T) / 16;
		tail = n - head - nv * (16 / sizeof(T));
		vb = (const uint4 *)(data + head * sizeof(T));
	}
};

/* The lane's element of a segment's head and tail (lane l < head: element
 * l; head <= l < head + tail: the tail's), in a vector padded with -0. */
template <typename T>
static __device__ __forceinline__ uint4 ends_vector(const unsigned char *data, uint64_t n,
						    uint64_t head, uint64_t tail, unsigned lane)
{
	uint4 v = traits<T>::pad();
	uint64_t i = lane < head ? lane : n - tail + (lane - head);
	if (lane < head + tail) {
		const T *p = (const T *)data + i;
		if constexpr (sizeof(T) == 4) {
			v.x = __float_as_uint(*p);
		} else {
			long long b = __double_as_longlong(*p);
			v.x = (uint32_t)b;
			v.y = (uint32_t)(b >> 32);
		}
	}
	return v;
}

} /* namespace gre */
