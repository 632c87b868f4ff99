/*
 * Steps 1-7 of the reduction progression: one partial per block through a
 * tree in shared (or, step 4, global) memory, the whole reduction done by
 * applying the same kernel to the partials until one value is left.
 *
 * Every kernel handles any n: elements past the end read as zero (shared
 * memory forms) or are never touched (in-place forms).
 */
#include "gv_dev.cuh"
#include "gv_tables.h"

#define B GV_BLOCK

/* ---- step 1: interleaved addressing, divergent branch ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_reduce0(const T *in, T *out, size_t n)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;
	const size_t i = (size_t)blockIdx.x * B + tid;

	s[tid] = i < n ? in[i] : T(0);
	__syncthreads();
	/* Only every (2*st)-th thread works: the active threads of a warp
	 * thin out step by step, and the modulo is slow. */
	for (unsigned st = 1; st < B; st *= 2) {
		if (tid % (2 * st) == 0)
			s[tid] += s[tid + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = s[0];
}

/* ---- step 2: interleaved addressing, strided index ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_reduce1(const T *in, T *out, size_t n)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;
	const size_t i = (size_t)blockIdx.x * B + tid;

	s[tid] = i < n ? in[i] : T(0);
	__syncthreads();
	/* Consecutive threads work, so whole warps retire, but thread t
	 * touches word 2*st*t: a stride that lands many threads of a warp on
	 * the same shared-memory bank. */
	for (unsigned st = 1; st < B; st *= 2) {
		unsigned idx = 2 * st * tid;

		if (idx < B)
			s[idx] += s[idx + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = s[0];
}

/* ---- step 3: sequential addressing ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_reduce2(const T *in, T *out, size_t n)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;
	const size_t i = (size_t)blockIdx.x * B + tid;

	s[tid] = i < n ? in[i] : T(0);
	__syncthreads();
	/* Contiguous threads read contiguous words: no bank conflicts.  Half
	 * the threads are idle from the first step on. */
	for (unsigned st = B / 2; st > 0; st >>= 1) {
		if (tid < st)
			s[tid] += s[tid + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = s[0];
}

/* ---- step 4: the same three trees in place in global memory ---- */

/* cnt: elements this block owns; positions at or past cnt are never read
 * or written, which is how a short last block stays correct in place. */
template <typename T> __global__ void __launch_bounds__(B)
k_gmem_neighbored(T *data, T *out, size_t n)
{
	const unsigned tid = threadIdx.x;
	const size_t base = (size_t)blockIdx.x * B;
	const unsigned cnt = (unsigned)min((size_t)B, n - base);
	T *d = data + base;

	for (unsigned st = 1; st < B; st *= 2) {
		if (tid % (2 * st) == 0 && tid + st < cnt)
			d[tid] += d[tid + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = d[0];
}

template <typename T> __global__ void __launch_bounds__(B)
k_gmem_neighbored_less(T *data, T *out, size_t n)
{
	const unsigned tid = threadIdx.x;
	const size_t base = (size_t)blockIdx.x * B;
	const unsigned cnt = (unsigned)min((size_t)B, n - base);
	T *d = data + base;

	for (unsigned st = 1; st < B; st *= 2) {
		unsigned idx = 2 * st * tid;

		if (idx + st < cnt)
			d[idx] += d[idx + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = d[0];
}

template <typename T> __global__ void __launch_bounds__(B)
k_gmem_interleaved(T *data, T *out, size_t n)
{
	const unsigned tid = threadIdx.x;
	const size_t base = (size_t)blockIdx.x * B;
	const unsigned cnt = (unsigned)min((size_t)B, n - base);
	T *d = data + base;

	for (unsigned st = B / 2; st > 0; st >>= 1) {
		if (tid < st && tid + st < cnt)
			d[tid] += d[tid + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = d[0];
}

/* ---- step 5: add during the load, F elements per thread ---- */

/* Thread t of block b adds elements b*F*B + t + k*B, k < F: every load
 * instruction of a warp is still one coalesced 128-byte line. */
template <typename T, int F> __device__ __forceinline__ T
gv_load_strided(const T *in, size_t n)
{
	const size_t i = (size_t)blockIdx.x * (F * B) + threadIdx.x;
	T v[F];

#pragma unroll
	for (int k = 0; k < F; k++)
		v[k] = i + (size_t)k * B < n ? in[i + (size_t)k * B] : T(0);
#pragma unroll
	for (int w = 1; w < F; w *= 2)
#pragma unroll
		for (int k = 0; k + w < F; k += 2 * w)
			v[k] += v[k + w];
	return v[0];
}

template <typename T> __device__ __forceinline__ void
gv_smem_tail_sequential(T *s, T *out)
{
	const unsigned tid = threadIdx.x;

	for (unsigned st = B / 2; st > 0; st >>= 1) {
		if (tid < st)
			s[tid] += s[tid + st];
		__syncthreads();
	}
	if (tid == 0)
		out[blockIdx.x] = s[0];
}

template <typename T, int F> __global__ void __launch_bounds__(B)
k_unroll(const T *in, T *out, size_t n)
{
	__shared__ T s[B];

	s[threadIdx.x] = gv_load_strided<T, F>(in, n);
	__syncthreads();
	gv_smem_tail_sequential(s, out);
}

/* Four consecutive elements per thread through 16-byte loads (two for
 * double): one instruction brings all four, instead of four in flight. */
template <typename T> __device__ __forceinline__ T gv_load4_vec(const T *in, size_t n, bool aligned);

template <> __device__ __forceinline__ float gv_load4_vec(const float *in, size_t n, bool aligned)
{
	const size_t j = ((size_t)blockIdx.x * B + threadIdx.x) * 4;

	if (aligned && j + 3 < n) {
		float4 a = *(const float4 *)(in + j);
		return (a.x + a.y) + (a.z + a.w);
	}
	float v = 0;
	for (size_t k = j; k < j + 4 && k < n; k++)
		v += in[k];
	return v;
}

template <> __device__ __forceinline__ unsigned int gv_load4_vec(const unsigned int *in, size_t n, bool aligned)
{
	const size_t j = ((size_t)blockIdx.x * B + threadIdx.x) * 4;

	if (aligned && j + 3 < n) {
		uint4 a = *(const uint4 *)(in + j);
		return (a.x + a.y) + (a.z + a.w);
	}
	unsigned int v = 0;
	for (size_t k = j; k < j + 4 && k < n; k++)
		v += in[k];
	return v;
}

template <> __device__ __forceinline__ double gv_load4_vec(const double *in, size_t n, bool aligned)
{
	const size_t j = ((size_t)blockIdx.x * B + threadIdx.x) * 4;

	if (aligned && j + 3 < n) {
		double2 a = *(const double2 *)(in + j);
		double2 b = *(const double2 *)(in + j + 2);
		return (a.x + a.y) + (b.x + b.y);
	}
	double v = 0;
	for (size_t k = j; k < j + 4 && k < n; k++)
		v += in[k];
	return v;
}

template <typename T> __global__ void __launch_bounds__(B)
k_vec4(const T *in, T *out, size_t n, bool aligned)
{
	__shared__ T s[B];

	s[threadIdx.x] = gv_load4_vec(in, n, aligned);
	__syncthreads();
	gv_smem_tail_sequential(s, out);
}

/* ---- step 6: unrolled last warp ---- */

/* Tree down to 64 partials with barriers; the caller finishes the warp. */
template <typename T> __device__ __forceinline__ void gv_tree_to_64(T *s)
{
	const unsigned tid = threadIdx.x;

	for (unsigned st = B / 2; st > 32; st >>= 1) {
		if (tid < st)
			s[tid] += s[tid + st];
		__syncthreads();
	}
}

/*
 * The historical form: once 32 threads are left, no barrier at all, on
 * the assumption that a warp executes in lock-step; volatile only stops
 * the compiler from keeping s[] in registers.  Since Volta the threads of
 * a warp are scheduled independently and nothing orders one lane's store
 * before another lane's load: this is a data race that happens to work.
 */
template <typename T> __global__ void __launch_bounds__(B)
k_reduce4_volatile(const T *in, T *out, size_t n)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;

	s[tid] = gv_load_strided<T, 2>(in, n);
	__syncthreads();
	gv_tree_to_64(s);
	if (tid < 32) {
		volatile T *v = s;

		v[tid] += v[tid + 32];
		v[tid] += v[tid + 16];
		v[tid] += v[tid + 8];
		v[tid] += v[tid + 4];
		v[tid] += v[tid + 2];
		v[tid] += v[tid + 1];
	}
	if (tid == 0)
		out[blockIdx.x] = s[0];
}

/* The same in shared memory, made correct with __syncwarp() between every
 * read and the writes that follow it. */
template <typename T> __global__ void __launch_bounds__(B)
k_reduce4_syncwarp(const T *in, T *out, size_t n)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;

	s[tid] = gv_load_strided<T, 2>(in, n);
	__syncthreads();
	gv_tree_to_64(s);
	if (tid < 32) {
		T v = s[tid] + s[tid + 32];

		for (unsigned off = 16; off > 0; off >>= 1) {
			__syncwarp();
			s[tid] = v;
			__syncwarp();
			v += s[tid + off];
		}
		if (tid == 0)
			out[blockIdx.x] = v;
	}
}

/* The last warp in registers through shuffles. */
template <typename T> __global__ void __launch_bounds__(B)
k_reduce4_shfl(const T *in, T *out, size_t n)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;

	s[tid] = gv_load_strided<T, 2>(in, n);
	__syncthreads();
	gv_tree_to_64(s);
	if (tid < 32) {
		T v = gv_warp_sum_down(s[tid] + s[tid + 32]);

		if (tid == 0)
			out[blockIdx.x] = v;
	}
}

/* ---- step 7: completely unrolled, block size a template parameter ---- */

template <typename T, unsigned BS> __device__ __forceinline__ T
gv_unrolled_tree(T *s, T v)
{
	const unsigned tid = threadIdx.x;

	s[tid] = v;
	__syncthreads();
	if (BS >= 1024) { if (tid < 512) s[tid] = v = v + s[tid + 512]; __syncthreads(); }
	if (BS >= 512) { if (tid < 256) s[tid] = v = v + s[tid + 256]; __syncthreads(); }
	if (BS >= 256) { if (tid < 128) s[tid] = v = v + s[tid + 128]; __syncthreads(); }
	if (BS >= 128) { if (tid < 64) s[tid] = v = v + s[tid + 64]; __syncthreads(); }
	if (tid < 32) {
		if (BS >= 64)
			v += s[tid + 32];
		v = gv_warp_sum_down(v);
	}
	return v;
}

template <typename T, unsigned BS> __global__ void __launch_bounds__(BS)
k_reduce5(const T *in, T *out, size_t n)
{
	__shared__ T s[BS];
	const size_t i = (size_t)blockIdx.x * (2 * BS) + threadIdx.x;
	T v = i < n ? in[i] : T(0);

	if (i + BS < n)
		v += in[i + BS];
	v = gv_unrolled_tree<T, BS>(s, v);
	if (threadIdx.x == 0)
		out[blockIdx.x] = v;
}

/* ---- step 8: grid-stride, many elements per thread (in reduce_modern) ---- */

template <typename T, unsigned BS> __global__ void __launch_bounds__(BS)
k_reduce6(const T *in, T *out, size_t n)
{
	__shared__ T s[BS];
	const size_t grid = (size_t)2 * BS * gridDim.x;
	T v = 0;

	for (size_t i = (size_t)blockIdx.x * (2 * BS) + threadIdx.x; i < n; i += grid) {
		v += in[i];
		if (i + BS < n)
			v += in[i + BS];
	}
	v = gv_unrolled_tree<T, BS>(s, v);
	if (threadIdx.x == 0)
		out[blockIdx.x] = v;
}

/* ---- host side ---- */

#define GV_SIMPLE(fn, per_thread, what, ...)                                  \
	template <typename T>                                                 \
	static int fn##_t(struct gv_ws *ws, const T *in, size_t n, T *out)    \
	{                                                                     \
		return gv_multipass<T>(ws, in, n, out, (size_t)(per_thread) * B, \
				       B, what,                               \
				       [&](const T *s, T *d, size_t m, unsigned g) { \
					       __VA_ARGS__<<<g, B, 0, ws->stream>>>(s, d, m); \
				       });                                    \
	}                                                                     \
	GV_DISPATCH(fn, fn##_t)

GV_SIMPLE(run_reduce0, 1, "1/thr", k_reduce0<T>)
GV_SIMPLE(run_reduce1, 1, "1/thr", k_reduce1<T>)
GV_SIMPLE(run_reduce2, 1, "1/thr", k_reduce2<T>)
GV_SIMPLE(run_unroll2, 2, "2/thr", k_unroll<T, 2>)
GV_SIMPLE(run_unroll4, 4, "4/thr", k_unroll<T, 4>)
GV_SIMPLE(run_unroll8, 8, "8/thr", k_unroll<T, 8>)
GV_SIMPLE(run_reduce4_volatile, 2, "2/thr", k_reduce4_volatile<T>)
GV_SIMPLE(run_reduce4_syncwarp, 2, "2/thr", k_reduce4_syncwarp<T>)
GV_SIMPLE(run_reduce4_shfl, 2, "2/thr", k_reduce4_shfl<T>)
GV_SIMPLE(run_reduce5, 2, "2/thr", k_reduce5<T, B>)

/* In place: the later passes reduce the partial buffers in place too. */
#define GV_INPLACE(fn, kern)                                                  \
	template <typename T>                                                 \
	static int fn##_t(struct gv_ws *ws, const T *in, size_t n, T *out)    \
	{                                                                     \
		return gv_multipass<T>(ws, in, n, out, B, B, "1/thr in place", \
				       [&](const T *s, T *d, size_t m, unsigned g) { \
					       kern<<<g, B, 0, ws->stream>>>((T *)s, d, m); \
				       });                                    \
	}                                                                     \
	GV_DISPATCH(fn, fn##_t)

GV_INPLACE(run_gmem_neighbored, k_gmem_neighbored<T>)
GV_INPLACE(run_gmem_neighbored_less, k_gmem_neighbored_less<T>)
GV_INPLACE(run_gmem_interleaved, k_gmem_interleaved<T>)

template <typename T>
static int run_vec4_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	return gv_multipass<T>(ws, in, n, out, 4 * B, B, "4/thr 16B loads",
			       [&](const T *s, T *d, size_t m, unsigned g) {
				       bool al = ((uintptr_t)s & 15) == 0;
				       k_vec4<T><<<g, B, 0, ws->stream>>>(s, d, m, al);
			       });
}
GV_DISPATCH(run_vec4, run_vec4_t)

/*
 * reduce6: a fixed grid of (multiprocessors x 8) blocks of 256 threads,
 * each thread summing n / (grid * 256) elements in a grid-stride loop;
 * a second launch of the same kernel with one block sums the partials.
 */
template <typename T>
static int run_reduce6_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	const size_t full = (size_t)ws->sms * (2048 / B);
	size_t grid = gv_div_up(n, 2 * B);

	if (grid > full)
		grid = full;
	if (grid < 1)
		grid = 1;
	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u grid-stride, %d pass%s",
			 grid, B, grid > 1 ? 2 : 1, grid > 1 ? "es" : "");
		return 0;
	}
	if (grid == 1) {
		k_reduce6<T, B><<<1, B, 0, ws->stream>>>(in, out, n);
		return gv_launched(ws);
	}
	T *part = (T *)ws->part[0];
	k_reduce6<T, B><<<(unsigned)grid, B, 0, ws->stream>>>(in, part, n);
	int r = gv_launched(ws);
	if (r < 0)
		return r;
	k_reduce6<T, B><<<1, B, 0, ws->stream>>>(part, out, grid);
	return gv_launched(ws);
}
GV_DISPATCH(run_reduce6, run_reduce6_t)

const struct gv_variant gv_reduce_classic[] = {
	{ "reduce0", "reduceNeighbored (shared)", 1, 0, run_reduce0 },
	{ "reduce1", "reduceNeighboredLess (shared)", 2, 0, run_reduce1 },
	{ "reduce2", "sequential addressing", 3, 0, run_reduce2 },
	{ "gmem_neighbored", "reduceNeighbored (global, in place)", 4, GV_CLOBBERS_INPUT, run_gmem_neighbored },
	{ "gmem_neighbored_less", "reduceNeighboredLess (global, in place)", 4, GV_CLOBBERS_INPUT, run_gmem_neighbored_less },
	{ "gmem_interleaved", "reduceInterleaved (global, in place)", 4, GV_CLOBBERS_INPUT, run_gmem_interleaved },
	{ "reduce3", "first add during load, unrolling 2", 5, 0, run_unroll2 },
	{ "unroll4", "unrolling 4", 5, 0, run_unroll4 },
	{ "unroll8", "unrolling 8", 5, 0, run_unroll8 },
	{ "vec4", "ILP-4: four elements per 16-byte load", 5, 0, run_vec4 },
	{ "reduce4_volatile", "unrolled last warp, volatile (pre-Volta)", 6, GV_WARP_SYNC_UNSAFE, run_reduce4_volatile },
	{ "reduce4_syncwarp", "unrolled last warp, __syncwarp", 6, 0, run_reduce4_syncwarp },
	{ "reduce4_shfl", "unrolled last warp, shuffles", 6, 0, run_reduce4_shfl },
	{ "reduce5", "reduceCompleteUnroll (template block size)", 7, 0, run_reduce5 },
	{ "reduce6", "grid-stride, many elements per thread", 8, 0, run_reduce6 },
};
const size_t gv_reduce_classic_count = sizeof(gv_reduce_classic) / sizeof(gv_reduce_classic[0]);
