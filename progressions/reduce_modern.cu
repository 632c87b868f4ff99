/*
 * Steps 9-12 of the reduction progression: warp shuffles instead of shared
 * memory, atomics instead of a second pass, the single-launch kernel of the
 * production design, and CUB as the reference.  Also the read-bandwidth
 * ceiling kernel every table is measured against.
 */
#include <cub/cub.cuh>

#include "cuda/kernel.h"
#include "gv_dev.cuh"
#include "gv_tables.h"

#define B GV_BLOCK

/* ---- step 9: warp shuffles, N elements per thread ---- */

/* Thread t of block b adds elements b*N*B + t + k*B (coalesced), then the
 * block sums through shuffles: one shared word per warp, no tree. */
template <typename T, int N, bool XOR> __global__ void __launch_bounds__(B)
k_shfl(const T *in, T *out, size_t n)
{
	__shared__ T warp_sums[B / 32];
	const size_t i = (size_t)blockIdx.x * (N * B) + threadIdx.x;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	T v = 0;

#pragma unroll
	for (int k = 0; k < N; k++)
		if (i + (size_t)k * B < n)
			v += in[i + (size_t)k * B];
	v = XOR ? gv_warp_sum_xor(v) : gv_warp_sum_down(v);
	if (lane == 0)
		warp_sums[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < B / 32 ? warp_sums[lane] : T(0);
		v = XOR ? gv_warp_sum_xor(v) : gv_warp_sum_down(v);
		if (lane == 0)
			out[blockIdx.x] = v;
	}
}

template <typename T, int N, bool XOR>
static int run_shfl_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	static const char *what[] = { "", "1/thr", "2/thr", "", "4/thr", "", "", "", "8/thr" };

	return gv_multipass<T>(ws, in, n, out, (size_t)N * B, B, what[N],
			       [&](const T *s, T *d, size_t m, unsigned g) {
				       k_shfl<T, N, XOR><<<g, B, 0, ws->stream>>>(s, d, m);
			       });
}

#define GV_SHFL(fn, N, X)                                                     \
	template <typename T>                                                 \
	static int fn##_t(struct gv_ws *ws, const T *in, size_t n, T *out)    \
	{                                                                     \
		return run_shfl_t<T, N, X>(ws, in, n, out);                   \
	}                                                                     \
	GV_DISPATCH(fn, fn##_t)

GV_SHFL(run_shfl_down1, 1, false)
GV_SHFL(run_shfl_down2, 2, false)
GV_SHFL(run_shfl_down4, 4, false)
GV_SHFL(run_shfl_down8, 8, false)
GV_SHFL(run_shfl_xor1, 1, true)
GV_SHFL(run_shfl_xor2, 2, true)
GV_SHFL(run_shfl_xor4, 4, true)
GV_SHFL(run_shfl_xor8, 8, true)

/* A grid of at most (multiprocessors x 8) blocks of B threads: a full
 * Hopper multiprocessor holds 2048 threads. */
static size_t gv_full_grid(const struct gv_ws *ws, size_t n, size_t per_block)
{
	size_t g = gv_div_up(n, per_block), full = (size_t)ws->sms * (2048 / B);

	if (g > full)
		g = full;
	return g < 1 ? 1 : g;
}

/* ---- step 10: every thread's partial straight to the output ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_atomic_naive(const T *in, T *out, size_t n)
{
	const size_t stride = (size_t)B * gridDim.x;
	T v = 0;

	for (size_t i = (size_t)blockIdx.x * B + threadIdx.x; i < n; i += stride)
		v += in[i];
	atomicAdd(out, v);
}

template <typename T>
static int run_atomic_naive_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	size_t g = gv_full_grid(ws, n, B);

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u grid-stride, %zu atomics", g, B, g * B);
		return 0;
	}
	/* The output must start at zero: the memset is part of the time. */
	if (cudaMemsetAsync(out, 0, sizeof(T), ws->stream) != cudaSuccess)
		return gv_launched(ws);
	k_atomic_naive<T><<<(unsigned)g, B, 0, ws->stream>>>(in, out, n);
	return gv_launched(ws);
}
GV_DISPATCH(run_atomic_naive, run_atomic_naive_t)

/* ---- step 11: block sum through shuffles, one atomic per block ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_shfl_atomic(const T *in, T *out, size_t n)
{
	const size_t stride = (size_t)B * gridDim.x;
	T v = 0;

	for (size_t i = (size_t)blockIdx.x * B + threadIdx.x; i < n; i += stride)
		v += in[i];
	v = gv_block_sum<T, B>(v);
	if (threadIdx.x == 0)
		atomicAdd(out, v);
}

template <typename T>
static int run_shfl_atomic_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	size_t g = gv_full_grid(ws, n, B);

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u grid-stride, %zu atomics", g, B, g);
		return 0;
	}
	if (cudaMemsetAsync(out, 0, sizeof(T), ws->stream) != cudaSuccess)
		return gv_launched(ws);
	k_shfl_atomic<T><<<(unsigned)g, B, 0, ws->stream>>>(in, out, n);
	return gv_launched(ws);
}
GV_DISPATCH(run_shfl_atomic, run_shfl_atomic_t)

/* ---- step 12: single launch, deterministic last-block combine ---- */

/*
 * Each thread sums 16-byte vectors in a grid-stride loop with four loads
 * in flight; the block sums through shuffles and writes its partial; the
 * last block to take a ticket sums all partials in a fixed order (so the
 * result does not depend on which block finished last) and resets the
 * ticket for the next launch.
 */
template <typename T> __global__ void __launch_bounds__(B)
k_production(const T *in, size_t n, T *partials, T *out, unsigned *ticket)
{
	typedef gv_vec16<T> VT;
	typedef typename VT::V V;
	const size_t gtid = (size_t)blockIdx.x * B + threadIdx.x;
	const size_t gsize = (size_t)B * gridDim.x;
	/* Elements before the first 16-byte boundary, then whole vectors,
	 * then the tail. */
	size_t head = ((16 - ((uintptr_t)in & 15)) & 15) / sizeof(T);
	if (head > n)
		head = n;
	const V *vin = (const V *)(in + head);
	const size_t nv = (n - head) / VT::K;
	T acc = 0;

	if (gtid < head)
		acc += in[gtid];
	size_t i = gtid;
	for (; i + 3 * gsize < nv; i += 4 * gsize) {
		V a = vin[i], b = vin[i + gsize], c = vin[i + 2 * gsize], d = vin[i + 3 * gsize];
		acc += (VT::sum(a) + VT::sum(b)) + (VT::sum(c) + VT::sum(d));
	}
	for (; i < nv; i += gsize)
		acc += VT::sum(vin[i]);
	const size_t t = head + nv * VT::K + gtid;
	if (t < n)
		acc += in[t];

	acc = gv_block_sum<T, B>(acc);

	__shared__ bool last;
	if (threadIdx.x == 0) {
		partials[blockIdx.x] = acc;
		/* Publish the partial before taking a ticket. */
		__threadfence();
		last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last)
		return;
	/* Every other block fenced its partial before its ticket. */
	__threadfence();
	const volatile T *vp = partials;
	T s = 0;
	for (unsigned j = threadIdx.x; j < gridDim.x; j += B)
		s += vp[j];
	s = gv_block_sum<T, B>(s);
	if (threadIdx.x == 0) {
		*out = s;
		*ticket = 0;
	}
}

template <typename T>
static int run_production_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	const int K = gv_vec16<T>::K;
	size_t g = gv_full_grid(ws, n, (size_t)B * K * 4);

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u 16B grid-stride, 1 launch", g, B);
		return 0;
	}
	k_production<T><<<(unsigned)g, B, 0, ws->stream>>>(in, n, (T *)ws->part[0], out, ws->ticket);
	return gv_launched(ws);
}
GV_DISPATCH(run_production, run_production_t)

/* ---- the daemon's own kernel (cuda/kernel.cuh), as it runs in gpured ---- */

/* Its counters must be zero before a launch, and it leaves them so. */
static uint32_t *gpured_tickets;
static uint64_t *gpured_partials;
static size_t gpured_units;

static int run_gpured(struct gv_ws *ws, enum gv_dtype dt, const void *in, size_t n, void *out)
{
	static const int dtypes[GV_DTYPE_COUNT] = { 0 /* i32 */, 4 /* f32 */, 5 /* f64 */ };
	size_t es = gv_dtype_size(dt);
	uint64_t units = gr_kernel_units(n, es);

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "gpured kernel, %llu units, 1 launch",
			 (unsigned long long)units);
		return 0;
	}
	if (units > gpured_units) {
		cudaFree(gpured_tickets);
		cudaFree(gpured_partials);
		gpured_tickets = NULL;
		gpured_partials = NULL;
		gpured_units = 0;
		if ((ws->last_err = cudaMalloc(&gpured_tickets, (1 + units) * sizeof(uint32_t))) ||
		    (ws->last_err = cudaMalloc(&gpured_partials, 2 * units * sizeof(uint64_t))) ||
		    (ws->last_err = cudaMemset(gpured_tickets, 0, (1 + units) * sizeof(uint32_t))))
			return -EIO;
		gpured_units = units;
	}
	ws->last_err = (cudaError_t)gr_kernel_launch_single(0 /* sum */, dtypes[dt], in, n,
							    gpured_partials, gpured_tickets,
							    (uint64_t *)out, ws->sms, ws->stream);
	return ws->last_err == cudaSuccess ? gv_launched(ws) : -EIO;
}

/* ---- the reference: CUB ---- */

template <typename T>
static int run_cub_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	size_t bytes = 0;

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "cub::DeviceReduce::Sum");
		return 0;
	}
	/* Asking for the size launches nothing; the workspace was sized for
	 * n_max, so this only guards against a misuse. */
	cub::DeviceReduce::Sum(nullptr, bytes, in, out, (int64_t)n, ws->stream);
	if (bytes > ws->cub_bytes)
		return -ENOSPC;
	bytes = ws->cub_bytes;
	ws->last_err = cub::DeviceReduce::Sum(ws->cub_tmp, bytes, in, out, (int64_t)n, ws->stream);
	return ws->last_err == cudaSuccess ? gv_launched(ws) : -EIO;
}
GV_DISPATCH(run_cub, run_cub_t)

size_t gv_cub_reduce_bytes(enum gv_dtype dt, size_t n);
size_t gv_cub_reduce_bytes(enum gv_dtype dt, size_t n)
{
	size_t bytes = 0;

	switch (dt) {
	case GV_INT:
		cub::DeviceReduce::Sum(nullptr, bytes, (const unsigned *)nullptr, (unsigned *)nullptr, (int64_t)n);
		break;
	case GV_FLOAT:
		cub::DeviceReduce::Sum(nullptr, bytes, (const float *)nullptr, (float *)nullptr, (int64_t)n);
		break;
	default:
		cub::DeviceReduce::Sum(nullptr, bytes, (const double *)nullptr, (double *)nullptr, (int64_t)n);
		break;
	}
	return bytes;
}

/* ---- the read ceiling ---- */

/* Reads every byte once as float4, four loads in flight; writes only if
 * an impossible value turns up, so the loads cannot be dropped. */
__global__ void __launch_bounds__(B)
k_read_ceiling(const float4 *in, size_t nv, unsigned *sink)
{
	const size_t gsize = (size_t)B * gridDim.x;
	size_t i = (size_t)blockIdx.x * B + threadIdx.x;
	unsigned acc = 0;

	for (; i + 3 * gsize < nv; i += 4 * gsize) {
		float4 a = in[i], b = in[i + gsize], c = in[i + 2 * gsize], d = in[i + 3 * gsize];
		acc ^= __float_as_uint(a.x) ^ __float_as_uint(a.y) ^ __float_as_uint(a.z) ^ __float_as_uint(a.w);
		acc ^= __float_as_uint(b.x) ^ __float_as_uint(b.y) ^ __float_as_uint(b.z) ^ __float_as_uint(b.w);
		acc ^= __float_as_uint(c.x) ^ __float_as_uint(c.y) ^ __float_as_uint(c.z) ^ __float_as_uint(c.w);
		acc ^= __float_as_uint(d.x) ^ __float_as_uint(d.y) ^ __float_as_uint(d.z) ^ __float_as_uint(d.w);
	}
	for (; i < nv; i += gsize) {
		float4 a = in[i];
		acc ^= __float_as_uint(a.x) ^ __float_as_uint(a.y) ^ __float_as_uint(a.z) ^ __float_as_uint(a.w);
	}
	if (acc == 0x7fc00bad)
		*sink = acc;
}

int gv_read_ceiling(struct gv_ws *ws, const void *in, size_t bytes, void *sink)
{
	size_t nv = bytes / 16, g = gv_full_grid(ws, nv, (size_t)B * 4);

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u float4 grid-stride", g, B);
		return 0;
	}
	k_read_ceiling<<<(unsigned)g, B, 0, ws->stream>>>((const float4 *)in, nv, (unsigned *)sink);
	return gv_launched(ws);
}

const struct gv_variant gv_reduce_modern[] = {
	{ "shfl_down1", "__shfl_down_sync, 1 element/thread", 9, 0, run_shfl_down1 },
	{ "shfl_down2", "__shfl_down_sync, 2 elements/thread", 9, 0, run_shfl_down2 },
	{ "shfl_down4", "__shfl_down_sync, 4 elements/thread", 9, 0, run_shfl_down4 },
	{ "shfl_down8", "__shfl_down_sync, 8 elements/thread", 9, 0, run_shfl_down8 },
	{ "shfl_xor1", "__shfl_xor_sync, 1 element/thread", 9, 0, run_shfl_xor1 },
	{ "shfl_xor2", "__shfl_xor_sync, 2 elements/thread", 9, 0, run_shfl_xor2 },
	{ "shfl_xor4", "__shfl_xor_sync, 4 elements/thread", 9, 0, run_shfl_xor4 },
	{ "shfl_xor8", "__shfl_xor_sync, 8 elements/thread", 9, 0, run_shfl_xor8 },
	{ "atomic_naive", "atomicAdd per thread", 10, GV_NONDETERMINISTIC, run_atomic_naive },
	{ "shfl_atomic", "warp shuffle + one atomicAdd per block", 11, GV_NONDETERMINISTIC, run_shfl_atomic },
	{ "production", "single launch, 16B loads, last-block combine", 12, 0, run_production },
	{ "gpured", "the daemon's kernel (cuda/kernel.cuh)", 12, GV_OUT_WIDE, run_gpured },
	{ "cub", "cub::DeviceReduce::Sum", 12, 0, run_cub },
};
const size_t gv_reduce_modern_count = sizeof(gv_reduce_modern) / sizeof(gv_reduce_modern[0]);
