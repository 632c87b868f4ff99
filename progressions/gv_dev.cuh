/*
 * Device-side helpers shared by the variant files: the arithmetic type of
 * each dtype, the dispatch from a runtime dtype to a template, the
 * multi-pass driver and the warp and block sums used by the later steps.
 */
#pragma once

#include <errno.h>
#include <stdio.h>

#include "gv.h"

/* int32 data is added as unsigned int: wrapping is defined behaviour. */
template <enum gv_dtype D> struct gv_type;
template <> struct gv_type<GV_INT> { typedef unsigned int T; };
template <> struct gv_type<GV_FLOAT> { typedef float T; };
template <> struct gv_type<GV_DOUBLE> { typedef double T; };

/* Turns a template run function into the table's run(). */
#define GV_DISPATCH(fname, tmpl)                                              \
	static int fname(struct gv_ws *ws, enum gv_dtype dt, const void *in,  \
			 size_t n, void *out)                                 \
	{                                                                     \
		switch (dt) {                                                 \
		case GV_INT:                                                  \
			return tmpl<unsigned int>(ws, (const unsigned int *)in, \
						  n, (unsigned int *)out);    \
		case GV_FLOAT:                                                \
			return tmpl<float>(ws, (const float *)in, n,          \
					   (float *)out);                     \
		case GV_DOUBLE:                                               \
			return tmpl<double>(ws, (const double *)in, n,        \
					    (double *)out);                   \
		default:                                                      \
			return -EINVAL;                                       \
		}                                                             \
	}

static inline int gv_launched(struct gv_ws *ws)
{
	cudaError_t e = cudaGetLastError();

	ws->last_err = e;
	return e == cudaSuccess ? 0 : -EIO;
}

static inline size_t gv_div_up(size_t a, size_t b)
{
	return (a + b - 1) / b;
}

/*
 * The multi-pass driver of the one-partial-per-block kernels.  @launch
 * (src, dst, n, blocks) reduces n elements of src into blocks partials in
 * dst; the driver applies it again to the partials, ping-ponging between
 * the two workspace buffers, until one block writes the final value into
 * @out.  Every pass runs on the device; nothing is summed on the CPU.
 */
template <typename T, typename L>
static int gv_multipass(struct gv_ws *ws, const T *in, size_t n, T *out,
			size_t per_block, unsigned threads, const char *what,
			L launch)
{
	size_t blocks0 = gv_div_up(n, per_block);

	if (ws->describe) {
		int passes = 0;
		size_t m = n;

		do {
			m = gv_div_up(m, per_block);
			passes++;
		} while (m > 1);
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u %s, %d pass%s",
			 blocks0, threads, what, passes, passes > 1 ? "es" : "");
		return 0;
	}
	if (n == 0)
		return cudaMemsetAsync(out, 0, sizeof(T), ws->stream) == cudaSuccess
			       ? 0 : -EIO;

	const T *src = in;
	int which = 0;

	for (;;) {
		size_t blocks = gv_div_up(n, per_block);
		T *dst = blocks == 1 ? out : (T *)ws->part[which];

		launch(src, dst, n, (unsigned)blocks);
		int r = gv_launched(ws);
		if (r < 0)
			return r;
		if (blocks == 1)
			return 0;
		src = dst;
		n = blocks;
		which ^= 1;
	}
}

/* Sum over the warp, result in lane 0 (shuffle down). */
template <typename T> __device__ __forceinline__ T gv_warp_sum_down(T v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, off);
	return v;
}

/* Sum over the warp, result in every lane (butterfly). */
template <typename T> __device__ __forceinline__ T gv_warp_sum_xor(T v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/*
 * Sum over a block of B threads (B a multiple of 32, at most 1024) through
 * warp shuffles and one word per warp in shared memory.  Valid in thread 0.
 * Safe to call twice in a row: it waits before reusing its shared memory.
 */
template <typename T, int B> __device__ __forceinline__ T gv_block_sum(T v)
{
	__shared__ T warp_sums[32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	v = gv_warp_sum_down(v);
	__syncthreads();
	if (lane == 0)
		warp_sums[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < B / 32 ? warp_sums[lane] : T(0);
		v = gv_warp_sum_down(v);
	}
	return v;
}

/* A 16-byte vector of T and the sum of its lanes. */
template <typename T> struct gv_vec16;
template <> struct gv_vec16<float> {
	typedef float4 V;
	static const int K = 4;
	static __device__ __forceinline__ float sum(V a) { return (a.x + a.y) + (a.z + a.w); }
};
template <> struct gv_vec16<unsigned int> {
	typedef uint4 V;
	static const int K = 4;
	static __device__ __forceinline__ unsigned int sum(V a) { return (a.x + a.y) + (a.z + a.w); }
};
template <> struct gv_vec16<double> {
	typedef double2 V;
	static const int K = 2;
	static __device__ __forceinline__ double sum(V a) { return a.x + a.y; }
};
