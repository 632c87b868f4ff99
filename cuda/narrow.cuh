/*
 * Reductions of the narrow dtypes in device memory: the kernel that reads
 * them, and what it shares with its ops (narrow-ops.cuh). narrow.h has
 * the interface and the rule: each op equals the op over the elements
 * widened exactly to f32, i32 or u32.
 *
 * The kernel reads the array as 16-byte vectors, grid-stride, G of them a
 * lane at a time (the next G already on their way); the elements before the first 16-byte boundary and
 * after the last whole vector go to block 0's first warp first, one a
 * lane, in a vector filled with the op's padding (an element that changes
 * nothing: -0 for float sums, 0 for integer ones, the far end of the
 * range for min and max). Every lane of a warp calls the op's group()
 * together, so an op may take warp-wide decisions there (the bf16 sum
 * does). At the end each warp hands its share to the block (finish()):
 * exact sums as an integer at a place of the block's digits (exact.h's
 * places, weight 2^(32 i - 2176)), raw results as one 64-bit value that
 * meets the others by an add (integer sums, wrapping) or max (min and
 * max, encoded so that 0 is nothing), and flags beside; one thread
 * gathers them. Blocks then meet in the
 * launch's scratch (gr_exact_scratch) through integer atomics, and the
 * last block to take the ticket writes the result and leaves the scratch
 * zero. Nothing depends on the order in which elements meet: every sum
 * here is exact, and min and max are.
 */
#pragma once

#include <cstdint>

#include "cuda/exact.cuh"
#include "cuda/narrow.h"

namespace grn {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned THREADS = 256;
/* 16-byte vectors a lane loads before its op takes them */
constexpr unsigned G = 8;
constexpr unsigned BLOCKS_PER_SM = 2;

/* gr_op's and gr_dtype's values (proto/types.h) */
enum { SUM = 0, MIN = 1, MAX = 2, SUMSQ = 3, ARGMIN = 4, ARGMAX = 5, MOMENTS = 6 };
enum { F16 = 6, BF16 = 7, E4M3 = 8, E5M2 = 9, I8 = 10, U8 = 11, I16 = 12, U16 = 13 };

template <int DT> constexpr unsigned dt_size = DT == F16 || DT == BF16 || DT == I16 || DT == U16 ? 2 : 1;
static inline unsigned dt_size_of(int dt)
{
	return dt == F16 || dt == BF16 || dt == I16 || dt == U16 ? 2 : 1;
}

/* the digits' place of 2^0 */
constexpr int ONE = -GR_EXACT_LSB_EXP;

/* u * 2^(p - ONE), negated where neg, into digits (shared or global):
 * u * 2^(p & 31) in three 32-bit pieces, so that no digit takes more than
 * 2^32 an add */
static __device__ __forceinline__ void add_digits(long long *digits, bool neg, unsigned long long u,
						  int p)
{
	const unsigned i = (unsigned)p >> 5, s = (unsigned)p & 31;
	const unsigned long long lo = u << s, hi = s ? u >> (64 - s) : 0;
	long long d[3] = {(long long)(lo & 0xffffffffull), (long long)(lo >> 32), (long long)hi};
#pragma unroll
	for (unsigned k = 0; k < 3; k++)
		if (d[k])
			atomicAdd((unsigned long long *)&digits[i + k],
				  (unsigned long long)(neg ? -d[k] : d[k]));
}

static __device__ __forceinline__ long long warp_sum(long long q)
{
#pragma unroll
	for (int m = 16; m; m >>= 1)
		q += __shfl_xor_sync(FULL, q, m);
	return q;
}

static __device__ __forceinline__ unsigned long long warp_sum(unsigned long long q)
{
	return (unsigned long long)warp_sum((long long)q);
}

/* The same, not atomic: digits of the caller's alone. */
static __device__ __forceinline__ void add_digits_plain(long long *digits, long long q, int p)
{
	const bool neg = q < 0;
	const unsigned long long u = neg ? 0ull - (unsigned long long)q : (unsigned long long)q;
	const unsigned i = (unsigned)p >> 5, s = (unsigned)p & 31;
	const unsigned long long lo = u << s, hi = s ? u >> (64 - s) : 0;
	const long long d[3] = {(long long)(lo & 0xffffffffull), (long long)(lo >> 32), (long long)hi};
#pragma unroll
	for (unsigned k = 0; k < 3; k++)
		digits[i + k] += neg ? -d[k] : d[k];
}

/* What a warp's op leaves at the end (lane 0's is read): an exact share
 * q * 2^(p - ONE) (exact ops), a raw value v (the others; 0 for
 * nothing), and flags. */
struct wres {
	long long q;
	int p;
	unsigned long long v;
	uint32_t flags;
};

/* An exact integer sum of the warp (q each lane, in units of 2^-scale)
 * into the block's digits, by lane 0. */
static __device__ __forceinline__ void warp_to_digits(long long *digits, long long q, int scale,
						      unsigned lane)
{
	q = warp_sum(q);
	if (lane == 0 && q)
		add_digits(digits, q < 0, q < 0 ? 0ull - (unsigned long long)q : (unsigned long long)q,
			   ONE - scale);
}

/* ---- conversions, exact (PTX: sm_89 and later convert f8 themselves) ---- */

/* the two f16 of a word (low half first) */
static __device__ __forceinline__ void f16x2(uint32_t w, float &f0, float &f1)
{
	asm("{.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
	    : "=f"(f0), "=f"(f1)
	    : "r"(w));
}

/* the four f8 of a word (byte 0 first), E4M3 or E5M2 */
template <int DT>
static __device__ __forceinline__ void f8x4(uint32_t w, float &f0, float &f1, float &f2, float &f3)
{
	if constexpr (DT == E4M3)
		asm("{.reg .b16 l, h, a, b, c, d;\n\t.reg .b32 r, s;\n\tmov.b32 {l, h}, %4;\n\t"
		    "cvt.rn.f16x2.e4m3x2 r, l;\n\tcvt.rn.f16x2.e4m3x2 s, h;\n\t"
		    "mov.b32 {a, b}, r;\n\tmov.b32 {c, d}, s;\n\t"
		    "cvt.f32.f16 %0, a;\n\tcvt.f32.f16 %1, b;\n\tcvt.f32.f16 %2, c;\n\t"
		    "cvt.f32.f16 %3, d;\n\t}"
		    : "=f"(f0), "=f"(f1), "=f"(f2), "=f"(f3)
		    : "r"(w));
	else
		asm("{.reg .b16 l, h, a, b, c, d;\n\t.reg .b32 r, s;\n\tmov.b32 {l, h}, %4;\n\t"
		    "cvt.rn.f16x2.e5m2x2 r, l;\n\tcvt.rn.f16x2.e5m2x2 s, h;\n\t"
		    "mov.b32 {a, b}, r;\n\tmov.b32 {c, d}, s;\n\t"
		    "cvt.f32.f16 %0, a;\n\tcvt.f32.f16 %1, b;\n\tcvt.f32.f16 %2, c;\n\t"
		    "cvt.f32.f16 %3, d;\n\t}"
		    : "=f"(f0), "=f"(f1), "=f"(f2), "=f"(f3)
		    : "r"(w));
}

/* One element's bits (a float dtype) widened to f32. */
template <int DT> static __device__ __forceinline__ float widen(uint32_t bits)
{
	float f0, f1, f2, f3;
	if constexpr (DT == BF16) {
		return __uint_as_float(bits << 16);
	} else if constexpr (DT == F16) {
		f16x2(bits, f0, f1);
		return f0;
	} else {
		f8x4<DT>(bits, f0, f1, f2, f3);
		return f0;
	}
}

/* Hopper's two-halfword integer min, max and add (PTX ISA 8.0, sm_90) */
static __device__ __forceinline__ uint32_t max_u16x2(uint32_t a, uint32_t b)
{
	uint32_t r;
	asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
	return r;
}
static __device__ __forceinline__ uint32_t min_u16x2(uint32_t a, uint32_t b)
{
	uint32_t r;
	asm("min.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
	return r;
}
static __device__ __forceinline__ uint32_t max_s16x2(uint32_t a, uint32_t b)
{
	uint32_t r;
	asm("max.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
	return r;
}
static __device__ __forceinline__ uint32_t min_s16x2(uint32_t a, uint32_t b)
{
	uint32_t r;
	asm("min.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
	return r;
}
/* min(a + b, c) a halfword at a time, the adds wrapping */
static __device__ __forceinline__ uint32_t addmin_u16x2(uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t r;
	asm("{.reg .b32 t;\n\tadd.u16x2 t, %1, %2;\n\tmin.u16x2 %0, t, %3;\n\t}"
	    : "=r"(r)
	    : "r"(a), "r"(b), "r"(c));
	return r;
}

static __device__ __forceinline__ uint32_t word(const uint4 &v, unsigned j)
{
	return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* The largest magnitude key (the bits less the sign) of a finite bf16
 * element in the warp's group of NG vectors a lane: 0 when none is
 * finite and nonzero. Every lane of the warp calls it. */
template <unsigned NG>
static __device__ __forceinline__ uint32_t bf16_top_finite(const uint4 (&v)[NG])
{
	uint32_t fm = 0;
#pragma unroll
	for (unsigned g = 0; g < NG; g++)
#pragma unroll
		for (unsigned j = 0; j < 4; j++) {
			const uint32_t w = word(v[g], j), k0 = w & 0x7fffu, k1 = (w >> 16) & 0x7fffu;
			fm = max(fm, k0 < 0x7f80u ? k0 : 0u);
			fm = max(fm, k1 < 0x7f80u ? k1 : 0u);
		}
	return __reduce_max_sync(FULL, fm);
}

/* A lane's record of whether its elements so far hold one other than -0
 * (nz), after its group of NG vectors of 16-bit floats whose largest
 * magnitude is mx: any nonzero mx does; else (all zeros) only the bits
 * of a +0 can, which it looks for. */
template <unsigned NG>
static __device__ __forceinline__ void note_not_nzero16(uint32_t &nz, const uint4 (&v)[NG],
							 uint32_t mx)
{
	if (mx) {
		nz = 1;
	} else {
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++)
				nz |= word(v[g], j) ^ 0x80008000u;
	}
}

/* PTX's byte permute, its selector's nibbles' top bit (copy the chosen
 * byte's sign into the whole byte) included: 0xBB99, each halfword's sign
 * across it; 0xBA98, each byte's */
static __device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
	uint32_t r;
	asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
	return r;
}

/* ---- the kernel ---- */

/* Whether this block is the launch's last to finish (every thread calls
 * it, after its block's share is in the scratch). */
static __device__ __forceinline__ bool last_block(uint32_t *ticket, unsigned t)
{
	return gre::last_block(ticket, t);
}

/* A lane's NG vectors from vw on (grid stride nt), those at or past nv
 * as padding. */
template <unsigned NG>
static __device__ __forceinline__ void load_group(uint4 (&v)[NG], const uint4 *vb, uint64_t vw,
						  uint64_t nt, uint64_t nv, uint4 pad, unsigned lane)
{
	if (vw + 31 + (NG - 1) * nt < nv) {
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
			v[g] = __ldg(vb + vw + lane + g * nt);
	} else {
#pragma unroll
		for (unsigned g = 0; g < NG; g++) {
			uint64_t i = vw + lane + g * nt;
			v[g] = i < nv ? __ldg(vb + i) : pad;
		}
	}
}

/*
 * A lane's groups of NG vectors (vectors vw + lane, vw + lane + nt, ...,
 * nt the grid's threads; those at or past nv padding), in increasing
 * order, each as take(v, vw) with vw the warp's first: the next group's
 * loads go out before the one in hand is taken (two sets of registers,
 * taken in turn), as in narrow_kernel below.
 */
template <unsigned NG, class F>
static __device__ __forceinline__ void each_group(const uint4 *vb, uint64_t nv, uint4 pad,
						  unsigned lane, F &&take)
{
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;
	uint4 va[NG], vc[NG];
	uint64_t vw = (uint64_t)blockIdx.x * THREADS + (threadIdx.x - lane);
	if (vw < nv)
		load_group<NG>(va, vb, vw, nt, nv, pad, lane);
	while (vw < nv) {
		const uint64_t w1 = vw + NG * nt;
		if (w1 < nv)
			load_group<NG>(vc, vb, w1, nt, nv, pad, lane);
		take(va, vw);
		if (w1 >= nv)
			break;
		vw = w1 + NG * nt;
		if (vw < nv)
			load_group<NG>(va, vb, vw, nt, nv, pad, lane);
		take(vc, w1);
	}
}

/*
 * One array of n > 0 elements of Op's dtype at data (on its own size's
 * boundary). Op: SIZE, EXACT, PADW (a word of padding elements), init(),
 * group<NG>(v, digits, lane), finish(digits, wres &, lane) (the warp's
 * share, in lane 0's), and for raw results meet(a, b) and meet(&acc, v)
 * (the scratch's atomic) and result(v, flags). NG vectors a lane a group; each group's loads go out before the
 * op takes the one before (two sets of registers, taken in turn), so that
 * an op whose group waits on the whole warp still keeps memory busy.
 */
template <class Op, unsigned NG = G, unsigned BPS = BLOCKS_PER_SM, bool PIPE = true>
__global__ void __launch_bounds__(THREADS, BPS)
narrow_kernel(const unsigned char *data, uint64_t n, gr_exact_scratch *scratch, uint64_t *raw,
	      gr_exact_sum *xout)
{
	constexpr unsigned S = Op::SIZE, V = 16 / S;
	__shared__ long long digits[GR_EXACT_DIGITS];
	__shared__ unsigned long long sflags, sval;
	const unsigned t = threadIdx.x, lane = t & 31;
	if constexpr (Op::EXACT)
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS)
			digits[i] = 0;
	if (t == 0)
		sflags = sval = 0;
	Op op;
	op.init();
	__syncthreads();

	const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / S;
	const uint64_t head = h < n ? h : n;
	const uint64_t nv = (n - head) * S / 16, tail = n - head - nv * V;
	const uint4 *vb = (const uint4 *)(data + head * S);
	const uint4 pad = make_uint4(Op::PADW, Op::PADW, Op::PADW, Op::PADW);
	const uint64_t nt = (uint64_t)gridDim.x * THREADS;

	uint4 va[NG], vc[NG];
	uint64_t vw = (uint64_t)blockIdx.x * THREADS + (t - lane);
	if (vw < nv)
		load_group<NG>(va, vb, vw, nt, nv, pad, lane);
	if (blockIdx.x == 0 && t < 32 && head + tail) {
		/* the ends, one element a lane, at the first place of a
		 * vector of padding */
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
			vc[g] = pad;
		if (lane < head + tail) {
			uint64_t i = lane < head ? lane : n - tail + (lane - head);
			uint32_t e = S == 2 ? (uint32_t)((const uint16_t *)data)[i] : (uint32_t)data[i];
			vc[0].x = (Op::PADW & (S == 2 ? 0xffff0000u : 0xffffff00u)) | e;
		}
		op.template group<NG>(vc, digits, lane);
	}
	while (vw < nv) {
		if constexpr (!PIPE) {
			/* one set of registers: each group loaded, then taken */
			op.template group<NG>(va, digits, lane);
			vw += NG * nt;
			if (vw < nv)
				load_group<NG>(va, vb, vw, nt, nv, pad, lane);
			continue;
		}
		const uint64_t w1 = vw + NG * nt;
		if (w1 < nv)
			load_group<NG>(vc, vb, w1, nt, nv, pad, lane);
		op.template group<NG>(va, digits, lane);
		if (w1 >= nv)
			break;
		vw = w1 + NG * nt;
		if (vw < nv)
			load_group<NG>(va, vb, vw, nt, nv, pad, lane);
		op.template group<NG>(vc, digits, lane);
	}
	/* the warps' shares, then the block's, with no atomics: a 64-bit
	 * atomic on shared memory is a loop of compare-and-swaps */
	__shared__ wres ws[THREADS / 32];
	wres r = {0, ONE, 0, 0};
	op.finish(digits, r, lane);
	if (lane == 0)
		ws[t / 32] = r;
	__syncthreads();
	if (t == 0) {
		unsigned long long f = 0, val = 0;
		for (unsigned w = 0; w < THREADS / 32; w++) {
			if constexpr (Op::EXACT) {
				if (ws[w].q)
					add_digits_plain(digits, ws[w].q, ws[w].p);
			} else {
				val = Op::meet(val, ws[w].v);
			}
			f |= ws[w].flags;
		}
		sflags = f;
		sval = val;
	}
	__syncthreads();

	if constexpr (Op::EXACT) {
		if (gridDim.x == 1) {
			for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS)
				xout->digit[i] = digits[i];
			if (t == 0)
				xout->flags = sflags;
			return;
		}
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS)
			gre::digits_to_scratch(digits, sflags, scratch, i);
		if (last_block(&scratch->ticket, t))
			for (unsigned i = t; i < GR_EXACT_DIGITS; i += THREADS)
				gre::scratch_to_out(scratch, xout, i);
	} else {
		if (gridDim.x == 1) {
			if (t == 0)
				*raw = Op::result(sval, sflags);
			return;
		}
		if (t == 0) {
			if (sval)
				Op::meet((unsigned long long *)&scratch->acc[0], sval);
			if (sflags)
				atomicOr((unsigned long long *)&scratch->flags, sflags);
			__threadfence();
		}
		if (last_block(&scratch->ticket, t) && t == 0) {
			unsigned long long a = atomicExch((unsigned long long *)&scratch->acc[0], 0ull);
			unsigned long long f = atomicExch((unsigned long long *)&scratch->flags, 0ull);
			*raw = Op::result(a, f);
		}
	}
}

/* The kernel for Op (NG vectors a lane a group, BPS blocks an SM, PIPE
 * the next group loaded while the op takes one), its grid a group a lane
 * at most, and every block resident at once. */
template <class Op, unsigned NG = G, unsigned BPS = BLOCKS_PER_SM, bool PIPE = true>
static inline cudaError_t launch(const void *data, uint64_t n, gr_exact_scratch *scratch,
				 uint64_t *raw, gr_exact_sum *xout, int sm_count, cudaStream_t st)
{
	const uint64_t nv = n * Op::SIZE / 16;
	uint64_t want = (nv + (uint64_t)THREADS * NG - 1) / ((uint64_t)THREADS * NG);
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * BPS;
	want = want < cap ? want : cap;
	narrow_kernel<Op, NG, BPS, PIPE><<<want ? (unsigned)want : 1u, THREADS, 0, st>>>(
		(const unsigned char *)data, n, scratch, raw, xout);
	return cudaGetLastError();
}

} /* namespace grn */
