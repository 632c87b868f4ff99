/*
 * moments of bf16 in device memory (narrow.h): the exact sum of the
 * elements, the exact sum of their squares and the keys of the least and
 * greatest, what the f32 moments kernel gives for the elements widened
 * (narrow-moments.cuh), in a form of its own: a bf16 has 8 significant
 * bits, so its square has 16, and both fit fixed windows of doubles with
 * room to spare, where the f32 kernel's bins must take 24 and 48.
 *
 * As the bf16 sum (narrow-ops.cuh, SumBf16), a lane keeps doubles pinned
 * by E, where 2^E bounds every element the warp has put there (E the same
 * across the warp), and adds each element of |x| >= 2^(E - 33), or zero,
 * with no rounding:
 *
 * - the sum: a double a place of the vector, pinned at 1.5 * 2^(E + 12):
 *   its last place is 2^(E - 40), and every such element is a multiple of
 *   it (8 bits from its top).
 * - the squares: a pair of doubles a word of the vector. q, pinned at
 *   2^(2E + 8) (last place 2^(2E - 44)), takes each square by a fused
 *   multiply-add. Where every element of the warp's group is zero or of
 *   |x| >= 2^(E - 15) (the narrow window), each square is a multiple of
 *   2^(2E - 44) and the add is exact: that is all a square costs.
 *   Otherwise it rounds, and what it dropped, x * x - (q' - q) (q - q'
 *   exact, both in one binade), is exact too (a square's 16 bits less the
 *   part that q took), at most 2^(2E - 45), and a multiple of 2^(2E - 80)
 *   for the elements in the window; it goes into r, pinned at
 *   1.5 * 2^(2E - 28), whose last place is that.
 *
 * 2^7 adds keep each of them in its pin's binade (q, of squares below
 * 2^(2E) and half a last place at most rounded, grows by less than
 * 2^(2E + 8)), so that its significand's bits, less the pin's, are an
 * integer number of its last places, which the warp moves into the
 * block's digits (the sum's, the squares') before 2^7 adds.
 *
 * Each group of vectors is checked first with two-halfword instructions
 * and one vote over the warp, as SumBf16's (every element below 2^E, and
 * zero or not below 2^(E - 33)), and a second vote for the narrow
 * window: when both pass (almost always: they fail for elements more
 * than 15 binades below the largest seen) each element costs one
 * conversion to a double, its add and its square's fused multiply-add;
 * when only the first does, two more double operations and the add into
 * r; otherwise the careful path raises E to the largest finite element
 * and tries again, and failing that takes element by element: infinities
 * and NaNs into the flags, elements in the window into the doubles, the
 * others into the warp's bins in shared memory (for each exponent the sum
 * of the signed significands and of their squares), which go to the
 * digits at the end.
 *
 * min and max are keys (narrow-argm.cuh's: the bits with the magnitude
 * bits of the negative ones flipped, two-halfword maxima and minima),
 * which also give the check its largest magnitude; NaNs in them do not
 * matter, since a NaN makes min and max NaN (the sum's flags say so).
 * The elements before the first 16-byte boundary and after the last
 * whole vector go to block 0's first warp first, one a lane; blocks meet
 * as the other moments kernels' do, the keys those of the extremes
 * widened to f64.
 *
 * The groups come through shared memory (narrow-bulk.cuh): the copy
 * engine brings each warp's tiles into buffers of its own, so that a
 * thread holds no registers for the group on its way and more warps fit
 * an SM. The kernel is bound by latency: what paid was more warps (five
 * a scheduler rather than four) and fewer instructions around each
 * group; more bytes in flight alone did not (docs/BENCHMARKS.md). The
 * form that loads each group into registers, the next on its way, stays
 * for the benchmark.
 */
#pragma once

#include "cuda/moments.cuh"
#include "cuda/narrow-bulk.cuh"
#include "cuda/narrow.cuh"

namespace grn {

/* BITS: the fast paths build each element's double from its bits (an
 * f32's rebiased to a double's gives x * 2^-896, which one multiply makes
 * x again) rather than converting it; W: the block's warps */
template <bool BITS, unsigned W = THREADS / 32> struct MomBf16 {
	static constexpr int HEAD = 12, WIN = 33;
	/* q is pinned at 2^(2E + QH); the squares of the elements from
	 * 2^(E - NAR) up are multiples of its last place */
	static constexpr int QH = 8, NAR = 15;
	/* adds a square's double takes before all are moved to the digits */
	static constexpr unsigned CAP = 1u << (QH - 1);
	static constexpr int E_MIN = -126;
	/* careful groups the bins take before they are flushed: a bin's
	 * squares grow by at most 2^11 * 2^16 a group of 8 vectors */
	static constexpr unsigned BIN_GROUPS = 16;
	double a[8], q[4], r[4];
	double PA, PQ, PR;
	int E;
	/* magnitudes (bits) below khi are below 2^E; above kthr, in the
	 * window (kthr 0: every one is); above knar, in the narrow one */
	uint32_t khi, kthr, knar;
	unsigned used, bused;
	uint32_t nz, f1, f2;
	/* the greatest and least keys so far, two halfwords */
	uint32_t kx, kn;
	bool any;
	/* the warp's bins (shared memory): bin e holds the sums of the
	 * signed significands and of their squares of the elements of
	 * biased exponent e (1 also the subnormals'), each element weighing
	 * 2^(e - 134), its square 2^(2e - 268) */
	int *sb;
	unsigned *qb;

	__device__ __forceinline__ void pin(int e)
	{
		E = e;
		PA = 1.5 * gre::pow2(e + HEAD);
		PQ = gre::pow2(2 * e + QH);
		PR = 1.5 * gre::pow2(2 * e - 28);
		khi = (uint32_t)(e + 127) << 7;
		const int kl = e - WIN + 127, kn = e - NAR + 127;
		kthr = kl > 0 ? ((uint32_t)kl << 7) - 1 : 0;
		knar = kn > 0 ? ((uint32_t)kn << 7) - 1 : 0;
#pragma unroll
		for (unsigned k = 0; k < 8; k++)
			a[k] = PA;
#pragma unroll
		for (unsigned j = 0; j < 4; j++) {
			q[j] = PQ;
			r[j] = PR;
		}
		used = 0;
	}
	__device__ __forceinline__ void init()
	{
		__shared__ int sbins[W][256];
		__shared__ unsigned qbins[W][256];
		pin(E_MIN);
		nz = f1 = f2 = 0;
		bused = 0;
		kx = 0x80008000u;
		kn = 0x7fff7fffu;
		any = false;
		sb = sbins[threadIdx.x / 32];
		qb = qbins[threadIdx.x / 32];
		for (unsigned i = threadIdx.x & 31; i < 256; i += 32) {
			sb[i] = 0;
			qb[i] = 0;
		}
		__syncwarp();
	}
	/* x into the sum's double k and the squares' pair j, exactly */
	__device__ __forceinline__ void add(unsigned k, unsigned j, double x)
	{
		a[k] = __dadd_rn(a[k], x);
		const double qn = __fma_rn(x, x, q[j]);
		const double d = __dsub_rn(q[j], qn);
		q[j] = qn;
		r[j] = __dadd_rn(r[j], __fma_rn(x, x, d));
	}
	/* a double of the binade [2^k, 2^(k + 1)) less 2^k, in its last
	 * places: its significand's bits */
	static __device__ __forceinline__ long long places(double x)
	{
		return __double_as_longlong(x) & ((1ll << 52) - 1);
	}
	/* the doubles into the digits (warp-wide), and afresh */
	__device__ __forceinline__ void flush(long long *d1, long long *d2, unsigned lane)
	{
		long long ia = 0, iq = 0, ir = 0;
#pragma unroll
		for (unsigned k = 0; k < 8; k++)
			ia += places(a[k]) - (1ll << 51);
#pragma unroll
		for (unsigned j = 0; j < 4; j++) {
			iq += places(q[j]);
			ir += places(r[j]) - (1ll << 51);
		}
		warp_to_digits(d1, ia, 40 - E, lane);
		warp_to_digits(d2, iq, 52 - QH - 2 * E, lane);
		if (__any_sync(FULL, ir != 0))
			warp_to_digits(d2, ir, 80 - 2 * E, lane);
		pin(E);
	}
	/* the bins into the digits (warp-wide), and zero again */
	__device__ __forceinline__ void flush_bins(long long *d1, long long *d2, unsigned lane)
	{
		__syncwarp();
		for (unsigned i = lane; i < 256; i += 32) {
			const int b = sb[i];
			const unsigned c = qb[i];
			if (b) {
				add_digits(d1, b < 0, b < 0 ? 0u - (unsigned)b : (unsigned)b,
					   (int)i - 134 + ONE);
				sb[i] = 0;
			}
			if (c) {
				add_digits(d2, false, c, 2 * (int)i - 268 + ONE);
				qb[i] = 0;
			}
		}
		__syncwarp();
		bused = 0;
	}
	/* one element (bits h, its places k and j), the careful way */
	__device__ __forceinline__ void careful(uint32_t h, unsigned k, unsigned j)
	{
		const uint32_t m = h & 0x7fffu;
		nz |= h != 0x8000u;
		if (m >= 0x7f80u) {
			f1 |= m > 0x7f80u ? GR_EXACT_NAN : h & 0x8000u ? GR_EXACT_NINF : GR_EXACT_PINF;
			f2 |= m > 0x7f80u ? GR_EXACT_NAN : GR_EXACT_PINF;
		} else if (m > kthr) {
			add(k, j, (double)__uint_as_float(h << 16));
		} else if (m) {
			const uint32_t e = m >> 7, sig = e ? 0x80u | (m & 0x7fu) : m;
			atomicAdd(&sb[e ? e : 1], h & 0x8000u ? -(int)sig : (int)sig);
			atomicAdd(&qb[e ? e : 1], sig * sig);
		}
	}
	/* the two elements of word w as doubles, the low half first */
	static __device__ __forceinline__ void doubles(uint32_t w, double &x0, double &x1)
	{
		if (BITS) {
			const int h0 = ((int)(w << 16) >> 3) & (int)0x8fffe000u,
				  h1 = ((int)w >> 3) & (int)0x8fffe000u;
			x0 = __dmul_rn(__hiloint2double(h0, 0), 0x1p896);
			x1 = __dmul_rn(__hiloint2double(h1, 0), 0x1p896);
		} else {
			x0 = (double)__uint_as_float(w << 16);
			x1 = (double)__uint_as_float(w & 0xffff0000u);
		}
	}
	/* a group that passed: every element into the doubles, its square
	 * by one fused multiply-add where every element of the warp's group
	 * is in the narrow window (N), else with its remainder; a lane whose
	 * elements are all zeros (mx 0) looks at their signs */
	template <unsigned NG, bool N>
	__device__ __forceinline__ void fast(const uint4 (&v)[NG], int mx)
	{
		note_not_nzero16<NG>(nz, v, (uint32_t)mx);
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				double x0, x1;
				doubles(word(v[g], j), x0, x1);
				if (N) {
					a[2 * j] = __dadd_rn(a[2 * j], x0);
					a[2 * j + 1] = __dadd_rn(a[2 * j + 1], x1);
					q[j] = __fma_rn(x0, x0, q[j]);
					q[j] = __fma_rn(x1, x1, q[j]);
				} else {
					add(2 * j, j, x0);
					add(2 * j + 1, j, x1);
				}
			}
		used += 2 * NG;
	}
	/* a group that passed the window's check (mn: its least magnitude
	 * less one), by the narrow window's check */
	template <unsigned NG>
	__device__ __forceinline__ void take(const uint4 (&v)[NG], int mx, uint32_t mn)
	{
		if (!__any_sync(FULL, mn < knar))
			fast<NG, true>(v, mx);
		else
			fast<NG, false>(v, mx);
	}
	/*
	 * A group (every lane of the warp together). ALL: every vector is
	 * the array's; else live says which are (bit g: v[g]), the others
	 * padding (-0), which changes no sum but must not reach the keys.
	 */
	template <unsigned NG, bool ALL>
	__device__ __forceinline__ void group(const uint4 (&v)[NG], uint32_t live, long long *d1,
					      long long *d2, unsigned lane)
	{
		static_assert(NG <= 8, "BIN_GROUPS's bound");
		if (used + 2 * NG > CAP)
			flush(d1, d2, lane);
		uint32_t gx = 0x80008000u, gn = 0x7fff7fffu, mmin = 0xffffffffu, mmax = 0;
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const uint32_t w = word(v[g], j), m = w & 0x7fff7fffu;
				const uint32_t k = w ^ (prmt(w, 0, 0xBB99u) & 0x7fff7fffu);
				if (ALL || ((live >> g) & 1)) {
					gx = max_s16x2(gx, k);
					gn = min_s16x2(gn, k);
				}
				/* the least magnitude less one (a zero's 0xffff) */
				mmin = addmin_u16x2(m, 0xffffffffu, mmin);
				if (!ALL)
					mmax = max_u16x2(mmax, m);
			}
		kx = max_s16x2(kx, gx);
		kn = min_s16x2(kn, gn);
		int mx;
		if (ALL) {
			/* the largest magnitude: the greatest key's, or less
			 * one the least key's, a negative's */
			const int x = max((int)(short)gx, (int)gx >> 16);
			const int l = min((int)(short)gn, (int)gn >> 16);
			mx = max(max(x, -1 - l), 0);
			any = true;
		} else {
			mx = (int)max(mmax & 0xffffu, mmax >> 16);
			any |= live != 0;
		}
		const uint32_t mn = min(mmin & 0xffffu, mmin >> 16);
		if (!__any_sync(FULL, (uint32_t)mx >= khi || mn < kthr)) {
			take<NG>(v, mx, mn);
			return;
		}
		/* the careful path: E up to the largest finite element
		 * first, after which the group usually passes */
		const uint32_t fm = bf16_top_finite<NG>(v);
		const int ne = (fm >> 7) ? (int)(fm >> 7) - 126 : E_MIN;
		if (ne > E) {
			flush(d1, d2, lane);
			pin(ne);
			if (!__any_sync(FULL, (uint32_t)mx >= khi || mn < kthr)) {
				take<NG>(v, mx, mn);
				return;
			}
		}
		if (bused == BIN_GROUPS)
			flush_bins(d1, d2, lane);
#pragma unroll 1
		for (unsigned g = 0; g < NG; g++) {
			uint4 x = v[0];
#pragma unroll
			for (unsigned i = 1; i < NG; i++)
				x = g == i ? v[i] : x;
#pragma unroll
			for (unsigned j = 0; j < 4; j++) {
				const uint32_t w = word(x, j);
				careful(w & 0xffffu, 2 * j, j);
				careful(w >> 16, 2 * j + 1, j);
			}
		}
		used += 2 * NG;
		bused++;
	}
	/* one element's key (bits h) into the lane's, for an element the
	 * keys of group() did not take */
	__device__ __forceinline__ void key_of(uint32_t h)
	{
		const uint32_t k = (h ^ (((h >> 15) & 1u) * 0x7fffu)) & 0xffffu;
		kx = max_s16x2(kx, k * 0x00010001u);
		kn = min_s16x2(kn, k * 0x00010001u);
		any = true;
	}
	/* the f64 key (moments.h) of the element of key k */
	static __device__ __forceinline__ unsigned long long key64(int k)
	{
		const uint32_t h = (uint32_t)(k ^ (k < 0 ? 0x7fff : 0)) & 0xffffu;
		const unsigned long long u =
			(unsigned long long)__double_as_longlong((double)__uint_as_float(h << 16));
		return (long long)u < 0 ? ~u : u | (1ull << 63);
	}
	/* the warp's sums into the block's digits, its flags and keys into
	 * the block's (shared memory, lane 0) */
	__device__ __forceinline__ void finish(long long *d1, long long *d2, unsigned long long *sf1,
					       unsigned long long *sf2, unsigned long long *nkmin,
					       unsigned long long *kmax, unsigned lane)
	{
		flush_bins(d1, d2, lane);
		flush(d1, d2, lane);
		uint32_t fl1 = __reduce_or_sync(FULL, f1), fl2 = __reduce_or_sync(FULL, f2);
		if (__reduce_or_sync(FULL, nz))
			fl1 |= GR_EXACT_NOT_NZERO;
		const int x = __reduce_max_sync(FULL, max((int)(short)kx, (int)kx >> 16));
		const int l = __reduce_min_sync(FULL, min((int)(short)kn, (int)kn >> 16));
		const bool some = __any_sync(FULL, any);
		if (lane == 0) {
			if (fl1)
				atomicOr(sf1, (unsigned long long)fl1);
			atomicOr(sf2, (unsigned long long)(fl2 | GR_EXACT_NOT_NZERO));
			if (some) {
				atomicMax(nkmin, ~key64(l));
				atomicMax(kmax, key64(x));
			}
		}
	}
};

/* moments of bf16: NG vectors a lane a group, BPS blocks of NT threads
 * an SM; NB 0: the groups loaded into registers (each_group, NT THREADS),
 * else through NB buffers a warp of TG groups each in shared memory
 * (each_tile_group) */
template <unsigned NG, unsigned BPS, bool BITS, unsigned TG = 1, unsigned NB = 0,
	  unsigned NT = THREADS>
__global__ void __launch_bounds__(NT, BPS)
mom_bf16_kernel(const unsigned char *data, uint64_t n, gr_moments_scratch *scratch,
		gr_moments_sums *out)
{
	__shared__ long long d1[GR_EXACT_DIGITS], d2[GR_EXACT_DIGITS];
	__shared__ unsigned long long f1, f2, nkmin, kmax;
	static_assert(NB || NT == THREADS, "each_group's grid stride");
	__shared__ unsigned long long bars[NB ? bulk_tiles<NG, TG, NB, NT>::BARS : 1];
	extern __shared__ __align__(128) uint4 tiles[];
	const unsigned t = threadIdx.x, lane = t & 31;
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT) {
		d1[i] = 0;
		d2[i] = 0;
	}
	if (t == 0)
		f1 = f2 = nkmin = kmax = 0;
	MomBf16<BITS, NT / 32> m;
	m.init();
	__syncthreads();

	const unsigned h = (unsigned)((16u - ((uintptr_t)data & 15u)) & 15u) / 2;
	const uint64_t head = h < n ? h : n;
	const uint64_t nv = (n - head) / 8, tail = n - head - nv * 8;
	const uint4 *vb = (const uint4 *)(data + head * 2);
	const uint4 pad = make_uint4(0x80008000u, 0x80008000u, 0x80008000u, 0x80008000u);
	if (blockIdx.x == 0 && t < 32 && head + tail) {
		/* the ends, one element a lane, in a group of padding */
		uint4 v[NG];
#pragma unroll
		for (unsigned g = 0; g < NG; g++)
			v[g] = pad;
		if (lane < head + tail) {
			const uint64_t i = lane < head ? lane : n - tail + (lane - head);
			const uint32_t e = ((const uint16_t *)data)[i];
			v[0].x = 0x80000000u | e;
			m.key_of(e);
		}
		m.template group<NG, false>(v, 0, d1, d2, lane);
	}
	auto take = [&](const uint4(&v)[NG], uint32_t live, bool all) {
		if (all)
			m.template group<NG, true>(v, 0, d1, d2, lane);
		else
			m.template group<NG, false>(v, live, d1, d2, lane);
	};
	if constexpr (NB != 0) {
		each_tile_group<NG, TG, NB, NT>(vb, nv, pad, lane, tiles, bars, take);
	} else {
		const uint64_t nt = (uint64_t)gridDim.x * THREADS;
		each_group<NG>(vb, nv, pad, lane, [&](const uint4(&v)[NG], uint64_t vw) {
			if (vw + 31 + (NG - 1) * nt < nv) {
				take(v, 0, true);
			} else {
				uint32_t live = 0;
#pragma unroll
				for (unsigned g = 0; g < NG; g++)
					live |= (uint32_t)(vw + lane + g * nt < nv) << g;
				take(v, live, false);
			}
		});
	}
	m.finish(d1, d2, &f1, &f2, &nkmin, &kmax, lane);
	__syncthreads();

	if (gridDim.x == 1) {
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT) {
			out->sum.digit[i] = d1[i];
			out->sq.digit[i] = d2[i];
		}
		if (t == 0) {
			out->sum.flags = f1;
			out->sq.flags = f2;
			grm::keys_out(out, nkmin, kmax);
		}
		return;
	}
	if (t == 0)
		grm::keys_to_scratch(scratch, nkmin, kmax);
	for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT) {
		gre::digits_to_scratch(d1, f1, &scratch->sum, i);
		gre::digits_to_scratch(d2, f2, &scratch->sq, i);
	}
	if (gre::last_block(&scratch->sum.ticket, t)) {
		for (unsigned i = t; i < GR_EXACT_DIGITS; i += NT) {
			gre::scratch_to_out(&scratch->sum, &out->sum, i);
			gre::scratch_to_out(&scratch->sq, &out->sq, i);
		}
		if (t == 0)
			grm::keys_from_scratch(scratch, out);
	}
}

/* The production form: four vectors a lane a group, the elements
 * converted (the form that builds them from their bits measured slower
 * on an H200), the groups through shared memory in tiles of two groups,
 * two buffers a warp, and two blocks of 320 threads an SM: without the
 * registers of the group on its way (each_group's) a thread needs 95
 * registers, so 20 warps fit an SM, where at 123 only 16 did; two
 * blocks' tiles and bins (207 KiB) fill its shared memory
 * (gpured-narrow-bench --forms measures the forms: docs/BENCHMARKS.md) */
constexpr unsigned MOM_BF16_NG = 4, MOM_BF16_BPS = 2;
constexpr bool MOM_BF16_BITS = false;
constexpr unsigned MOM_BF16_TG = 2, MOM_BF16_NB = 2, MOM_BF16_NT = 320;

template <unsigned NG = MOM_BF16_NG, unsigned BPS = MOM_BF16_BPS, bool BITS = MOM_BF16_BITS,
	  unsigned TG = MOM_BF16_TG, unsigned NB = MOM_BF16_NB, unsigned NT = MOM_BF16_NT>
static inline cudaError_t launch_mom_bf16(const void *data, uint64_t n, gr_moments_scratch *scratch,
					  gr_moments_sums *out, int sm_count, cudaStream_t st)
{
	using L = bulk_tiles<NG, TG, NB, NT>;
	const uint64_t nv = n / 8;
	/* a group a lane at most (a tile a warp, through shared memory) */
	const uint64_t per = NB ? (uint64_t)L::TILE_V * L::WARPS : (uint64_t)THREADS * NG;
	uint64_t want = (nv + per - 1) / per;
	const uint64_t cap = (uint64_t)(sm_count > 0 ? sm_count : 1) * BPS;
	want = want < cap ? want : cap;
	auto kernel = mom_bf16_kernel<NG, BPS, BITS, TG, NB, NT>;
	/* the tiles' allowance, on every launch: the setting is the
	 * current device's (and cheap) */
	if (NB)
		if (cudaError_t e = cudaFuncSetAttribute(
			    kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::SMEM))
			return e;
	kernel<<<want ? (unsigned)want : 1u, NT, NB ? L::SMEM : 0u, st>>>(
		(const unsigned char *)data, n, scratch, out);
	return cudaGetLastError();
}

} /* namespace grn */
