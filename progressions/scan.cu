/*
 * The inclusive-scan progression.  Each tile algorithm scans one block's
 * tile in shared memory or registers; the same three-phase driver makes
 * every one of them a scan of any n: scan the tiles (each block also
 * writes its tile's total), scan the totals (the same way, recursively),
 * add each tile's scanned predecessor total to the tile.
 */
#include <cub/cub.cuh>

#include "gv_dev.cuh"
#include "gv_tables.h"

#define B GV_BLOCK

/* ---- naive Hillis-Steele, single buffer: has a data race ---- */

/*
 * Step offset: thread t adds s[t - off] into s[t].  Thread t + off reads
 * s[t] in the same step, with no barrier between that read and thread t's
 * write: whether it sees the old or the new value depends on scheduling.
 * Within a warp the load usually issues before the store; across warps it
 * does not.  Kept to show the race; not part of the racecheck run.
 */
template <typename T> __global__ void __launch_bounds__(B)
k_hs_single(const T *in, T *out, size_t n, T *sums)
{
	__shared__ T s[B];
	const unsigned tid = threadIdx.x;
	const size_t i = (size_t)blockIdx.x * B + tid;

	s[tid] = i < n ? in[i] : T(0);
	__syncthreads();
	for (unsigned off = 1; off < B; off *= 2) {
		if (tid >= off)
			s[tid] += s[tid - off];
		__syncthreads();
	}
	if (i < n)
		out[i] = s[tid];
	if (sums && tid == B - 1)
		sums[blockIdx.x] = s[B - 1];
}

/* ---- Hillis-Steele, double buffered: each step reads one buffer and
 * writes the other, so no step reads what it writes ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_hs_double(const T *in, T *out, size_t n, T *sums)
{
	__shared__ T s[2][B];
	const unsigned tid = threadIdx.x;
	const size_t i = (size_t)blockIdx.x * B + tid;
	int p = 0;

	s[0][tid] = i < n ? in[i] : T(0);
	__syncthreads();
	for (unsigned off = 1; off < B; off *= 2) {
		T v = s[p][tid];

		if (tid >= off)
			v += s[p][tid - off];
		s[p ^ 1][tid] = v;
		p ^= 1;
		__syncthreads();
	}
	if (i < n)
		out[i] = s[p][tid];
	if (sums && tid == B - 1)
		sums[blockIdx.x] = s[p][B - 1];
}

/* ---- Blelloch: up-sweep, clear the root, down-sweep; 2 elements per
 * thread, O(n) additions instead of Hillis-Steele's O(n log n) ---- */

/* Padding: one extra word every 32, so the power-of-two strides of the
 * sweeps fall on different banks. */
template <bool PAD> __device__ __forceinline__ unsigned gv_cf(unsigned i)
{
	return PAD ? i + (i >> 5) : i;
}

template <typename T, bool PAD> __global__ void __launch_bounds__(B)
k_blelloch(const T *in, T *out, size_t n, T *sums)
{
	const unsigned NT = 2 * B;
	__shared__ T s[NT + (PAD ? NT / 32 : 0)];
	const unsigned tid = threadIdx.x;
	const size_t base = (size_t)blockIdx.x * NT;
	/* Unpadded: the adjacent pair 2t, 2t+1.  Padded: t and t + B, as in
	 * the bank-conflict-free formulation. */
	const unsigned ai = PAD ? tid : 2 * tid, bi = PAD ? tid + B : 2 * tid + 1;
	const T xa = base + ai < n ? in[base + ai] : T(0);
	const T xb = base + bi < n ? in[base + bi] : T(0);
	unsigned offset = 1;
	T total = 0;

	s[gv_cf<PAD>(ai)] = xa;
	s[gv_cf<PAD>(bi)] = xb;
	for (unsigned d = NT >> 1; d > 0; d >>= 1) {
		__syncthreads();
		if (tid < d) {
			unsigned a = offset * (2 * tid + 1) - 1, b = offset * (2 * tid + 2) - 1;

			s[gv_cf<PAD>(b)] += s[gv_cf<PAD>(a)];
		}
		offset <<= 1;
	}
	if (tid == 0) {
		total = s[gv_cf<PAD>(NT - 1)];
		s[gv_cf<PAD>(NT - 1)] = 0;
	}
	for (unsigned d = 1; d < NT; d <<= 1) {
		offset >>= 1;
		__syncthreads();
		if (tid < d) {
			unsigned a = offset * (2 * tid + 1) - 1, b = offset * (2 * tid + 2) - 1;
			T t = s[gv_cf<PAD>(a)];

			s[gv_cf<PAD>(a)] = s[gv_cf<PAD>(b)];
			s[gv_cf<PAD>(b)] += t;
		}
	}
	__syncthreads();
	/* The sweep gives the exclusive scan; add the element itself. */
	if (base + ai < n)
		out[base + ai] = s[gv_cf<PAD>(ai)] + xa;
	if (base + bi < n)
		out[base + bi] = s[gv_cf<PAD>(bi)] + xb;
	if (sums && tid == 0)
		sums[blockIdx.x] = total;
}

/* ---- warp shuffles, 8 elements per thread in registers ---- */

#define GV_IPT 8

template <typename T> __global__ void __launch_bounds__(B)
k_scan_shfl(const T *in, T *out, size_t n, T *sums)
{
	__shared__ T warp_tot[B / 32];
	const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const size_t base = (size_t)blockIdx.x * (B * GV_IPT) + (size_t)tid * GV_IPT;
	T x[GV_IPT];

#pragma unroll
	for (int k = 0; k < GV_IPT; k++) {
		x[k] = base + k < n ? in[base + k] : T(0);
		if (k > 0)
			x[k] += x[k - 1];
	}
	const T tot = x[GV_IPT - 1];
	T inc = tot;
#pragma unroll
	for (unsigned off = 1; off < 32; off <<= 1) {
		T y = __shfl_up_sync(0xffffffffu, inc, off);

		if (lane >= off)
			inc += y;
	}
	if (lane == 31)
		warp_tot[warp] = inc;
	__syncthreads();
	if (warp == 0) {
		T w = lane < B / 32 ? warp_tot[lane] : T(0);

#pragma unroll
		for (unsigned off = 1; off < 32; off <<= 1) {
			T y = __shfl_up_sync(0xffffffffu, w, off);

			if (lane >= off)
				w += y;
		}
		if (lane < B / 32)
			warp_tot[lane] = w;
	}
	__syncthreads();
	const T prefix = (inc - tot) + (warp > 0 ? warp_tot[warp - 1] : T(0));
#pragma unroll
	for (int k = 0; k < GV_IPT; k++)
		if (base + k < n)
			out[base + k] = x[k] + prefix;
	if (sums && tid == B - 1)
		sums[blockIdx.x] = warp_tot[B / 32 - 1];
}

/*
 * The same scan, with the tile moved through shared memory: coalesced
 * loads (element k*B + t to thread t) into the tile, each thread then takes
 * its 8 consecutive elements from shared memory, and the results go back
 * the same way.  One padding word every 32 keeps the 8-element rows of the
 * 32 lanes on distinct banks.
 */
__device__ __forceinline__ unsigned gv_pad32(unsigned j)
{
	return j + (j >> 5);
}

template <typename T> __global__ void __launch_bounds__(B)
k_scan_shfl_smem(const T *in, T *out, size_t n, T *sums)
{
	const unsigned TILE = B * GV_IPT;
	__shared__ T tile[TILE + TILE / 32];
	__shared__ T warp_tot[B / 32];
	const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const size_t base = (size_t)blockIdx.x * TILE;
	T x[GV_IPT];

#pragma unroll
	for (int k = 0; k < GV_IPT; k++) {
		unsigned j = k * B + tid;

		tile[gv_pad32(j)] = base + j < n ? in[base + j] : T(0);
	}
	__syncthreads();
#pragma unroll
	for (int k = 0; k < GV_IPT; k++) {
		x[k] = tile[gv_pad32(tid * GV_IPT + k)];
		if (k > 0)
			x[k] += x[k - 1];
	}
	const T tot = x[GV_IPT - 1];
	T inc = tot;
#pragma unroll
	for (unsigned off = 1; off < 32; off <<= 1) {
		T y = __shfl_up_sync(0xffffffffu, inc, off);

		if (lane >= off)
			inc += y;
	}
	if (lane == 31)
		warp_tot[warp] = inc;
	__syncthreads();
	if (warp == 0) {
		T w = lane < B / 32 ? warp_tot[lane] : T(0);

#pragma unroll
		for (unsigned off = 1; off < 32; off <<= 1) {
			T y = __shfl_up_sync(0xffffffffu, w, off);

			if (lane >= off)
				w += y;
		}
		if (lane < B / 32)
			warp_tot[lane] = w;
	}
	__syncthreads();
	const T prefix = (inc - tot) + (warp > 0 ? warp_tot[warp - 1] : T(0));
	/* Every thread read its row before the barrier above: the tile can
	 * be overwritten. */
#pragma unroll
	for (int k = 0; k < GV_IPT; k++)
		tile[gv_pad32(tid * GV_IPT + k)] = x[k] + prefix;
	__syncthreads();
#pragma unroll
	for (int k = 0; k < GV_IPT; k++) {
		unsigned j = k * B + tid;

		if (base + j < n)
			out[base + j] = tile[gv_pad32(j)];
	}
	if (sums && tid == B - 1)
		sums[blockIdx.x] = warp_tot[B / 32 - 1];
}

/* ---- the three-phase driver ---- */

template <typename T> __global__ void __launch_bounds__(B)
k_add_sums(T *out, size_t n, size_t tile, const T *sums)
{
	const size_t b = (size_t)blockIdx.x + 1;
	const size_t end = min(n, (b + 1) * tile);
	const T add = sums[blockIdx.x];

	for (size_t j = b * tile + threadIdx.x; j < end; j += B)
		out[j] += add;
}

template <typename T, typename L>
static int gv_scan3(struct gv_ws *ws, const T *in, T *out, size_t n, size_t tile,
		    T *sums, L launch, int *levels)
{
	const size_t tiles = gv_div_up(n, tile);
	int r;

	++*levels;
	if (!ws->describe) {
		launch(in, out, n, (unsigned)tiles, tiles > 1 ? sums : (T *)nullptr);
		if ((r = gv_launched(ws)) < 0)
			return r;
	}
	if (tiles == 1)
		return 0;
	/* Scan the totals in place; the next level's totals follow them,
	 * 256-byte aligned. */
	r = gv_scan3<T>(ws, sums, sums, tiles, tile, sums + (tiles + 31) / 32 * 32,
			launch, levels);
	if (r < 0 || ws->describe)
		return r;
	k_add_sums<T><<<(unsigned)(tiles - 1), B, 0, ws->stream>>>(out, n, tile, sums);
	return gv_launched(ws);
}

template <typename T, typename L>
static int gv_scan_run(struct gv_ws *ws, const T *in, T *out, size_t n, size_t tile,
		       const char *what, L launch)
{
	int levels = 0, r;

	if (n == 0)
		return 0;
	r = gv_scan3<T>(ws, in, out, n, tile, (T *)ws->scan_sums, launch, &levels);
	if (ws->describe)
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u %s, %d level%s, %d launches",
			 gv_div_up(n, tile), B, what, levels, levels > 1 ? "s" : "",
			 2 * levels - 1);
	return r;
}

#define GV_SCAN(fn, tile, what, ...)                                          \
	template <typename T>                                                 \
	static int fn##_t(struct gv_ws *ws, const T *in, size_t n, T *out)    \
	{                                                                     \
		return gv_scan_run<T>(ws, in, out, n, tile, what,             \
				      [&](const T *s, T *d, size_t m, unsigned g, T *sums) { \
					      __VA_ARGS__<<<g, B, 0, ws->stream>>>(s, d, m, sums); \
				      });                                     \
	}                                                                     \
	GV_DISPATCH(fn, fn##_t)

GV_SCAN(run_hs_single, B, "tile 256", k_hs_single<T>)
GV_SCAN(run_hs_double, B, "tile 256", k_hs_double<T>)
GV_SCAN(run_blelloch, 2 * B, "tile 512", k_blelloch<T, false>)
GV_SCAN(run_blelloch_pad, 2 * B, "tile 512", k_blelloch<T, true>)
GV_SCAN(run_scan_shfl, B * GV_IPT, "tile 2048", k_scan_shfl<T>)
GV_SCAN(run_scan_shfl_smem, B * GV_IPT, "tile 2048", k_scan_shfl_smem<T>)

template <typename T>
static int run_cub_scan_t(struct gv_ws *ws, const T *in, size_t n, T *out)
{
	size_t bytes = 0;

	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "cub::DeviceScan::InclusiveSum");
		return 0;
	}
	cub::DeviceScan::InclusiveSum(nullptr, bytes, in, out, (int64_t)n, ws->stream);
	if (bytes > ws->cub_bytes)
		return -ENOSPC;
	bytes = ws->cub_bytes;
	ws->last_err = cub::DeviceScan::InclusiveSum(ws->cub_tmp, bytes, in, out, (int64_t)n, ws->stream);
	return ws->last_err == cudaSuccess ? gv_launched(ws) : -EIO;
}
GV_DISPATCH(run_cub_scan, run_cub_scan_t)

size_t gv_cub_scan_bytes(enum gv_dtype dt, size_t n);
size_t gv_cub_scan_bytes(enum gv_dtype dt, size_t n)
{
	size_t bytes = 0;

	switch (dt) {
	case GV_INT:
		cub::DeviceScan::InclusiveSum(nullptr, bytes, (const unsigned *)nullptr, (unsigned *)nullptr, (int64_t)n);
		break;
	case GV_FLOAT:
		cub::DeviceScan::InclusiveSum(nullptr, bytes, (const float *)nullptr, (float *)nullptr, (int64_t)n);
		break;
	default:
		cub::DeviceScan::InclusiveSum(nullptr, bytes, (const double *)nullptr, (double *)nullptr, (int64_t)n);
		break;
	}
	return bytes;
}

/* ---- the copy ceiling ---- */

__global__ void __launch_bounds__(B)
k_copy_ceiling(const float4 *in, float4 *out, size_t nv)
{
	const size_t gsize = (size_t)B * gridDim.x;

	for (size_t i = (size_t)blockIdx.x * B + threadIdx.x; i < nv; i += gsize)
		out[i] = in[i];
}

int gv_copy_ceiling(struct gv_ws *ws, const void *in, void *out, size_t bytes)
{
	size_t nv = bytes / 16, g = gv_div_up(nv, B), full = (size_t)ws->sms * (2048 / B);

	if (g > full)
		g = full;
	if (g < 1)
		g = 1;
	if (ws->describe) {
		snprintf(ws->cfg, sizeof(ws->cfg), "%zux%u float4 grid-stride copy", g, B);
		return 0;
	}
	k_copy_ceiling<<<(unsigned)g, B, 0, ws->stream>>>((const float4 *)in, (float4 *)out, nv);
	return gv_launched(ws);
}

const struct gv_variant gv_scan_table[] = {
	{ "hs_single", "naive Hillis-Steele, single buffer (racy)", 1, GV_RACY, run_hs_single },
	{ "hs_double", "Hillis-Steele, double buffered", 2, 0, run_hs_double },
	{ "blelloch", "work-efficient up-/down-sweep", 3, 0, run_blelloch },
	{ "blelloch_pad", "work-efficient, bank-conflict padding", 4, 0, run_blelloch_pad },
	{ "scan_shfl", "warp shuffles, 8 elements/thread", 5, 0, run_scan_shfl },
	{ "scan_shfl_smem", "the same, coalesced through shared memory", 6, 0, run_scan_shfl_smem },
	{ "cub_scan", "cub::DeviceScan::InclusiveSum", 7, 0, run_cub_scan },
};
const size_t gv_scan_table_count = sizeof(gv_scan_table) / sizeof(gv_scan_table[0]);
