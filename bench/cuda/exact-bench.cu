/*
 * gpured-exact-bench: the exact sum next to cub::DeviceReduce::Sum and a
 * float4 grid-stride read kernel, in one run.
 *
 * For f32 and f64, n = 2^16, 2^20, 2^24, 2^26, 2^28: back-to-back
 * throughput (blocks of launches between two events, each launch on
 * another place of a large pool so that small arrays are not L2 hits;
 * the three kinds taken in turn, five times, medians), GB/s and the
 * ratios exact/read and exact/CUB; single-launch latency (event, launch,
 * event; ours and CUB's alternating, medians) for n = 2^10 .. 2^16; and
 * the exact kernel again on data of wide exponent range, where its wide
 * path runs (cuda/exact-wide.cuh): exponents over 60 binades, and over
 * every binade of the dtype, beside the same kernel with the careful path
 * in its place (its reference) and with the wide path but not its middle
 * tier. The device result is not folded inside the timings (the host's
 * fold is one small loop over 134 digits).
 * Each size's exact sum is checked: the same bits twice, the same sum
 * from the register form and the other paths, and near CUB's. Then the
 * batched form over 2^24 elements cut into equal segments. Last, the
 * exact sums of squares of f32 and f64 (sumsq) against the read kernel,
 * CUB's TransformReduce of x * x, the register form and the careful
 * path's form, n = 2^20 .. 2^28, and on wide data. And moments
 * (moments.h: the exact sum, the exact sum of squares, min and max in one
 * pass) against the read kernel and the exact sum, in its production form
 * (through shared memory, 2 blocks per SM), loading into registers with 2
 * and 3 blocks per SM, and through shared memory with 3; and moments of
 * i32 and i64 (the integer kernel) against the read kernel.
 *
 *   gpured-exact-bench [--hi E] [--moments-only | --latency-only | --sums | --squares |
 *                       --once E | --wide-once E]
 *     (largest n 2^E, 16..28; default 28; --latency-only: the single
 *     launches alone; --sums: the sums' tables and f32 sumsq's alone;
 *     --squares: the sums of squares' tables alone, f32 and f64;
 *     --once E: one launch each of the exact sum, the read kernel and
 *     the moments forms at 2^E f32, untimed, for a profiler; --wide-once
 *     E: the same for the wide path, one launch each at 2^E of the f32
 *     and f64 sums on every finite exponent, and their sums of squares
 *     and moments over 60 binades, then f64 moments on uniform data)
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/cuda/cub-ref.cuh"
#include <cuda_runtime.h>

#include "bench/cuda/bench-common.cuh"
#include "cuda/exact.cuh"
#include "cuda/moments.cuh"

using grb::median;
using grb::pos;
using grb::POOL;

struct env {
	int sms, bw_blocks;
	unsigned char *pool;
	void *temp;
	size_t temp_bytes;
	gr_exact_scratch *scratch;
	gr_exact_sum *out;
	gr_moments_scratch *mscratch;
	gr_moments_sums *mout;
	void *cub_out;
	float *sink;
	cudaEvent_t e0, e1;
	cudaStream_t st;
};

/* EXACT is the production form; REGS, MINB3 and FB3 the kernel's other
 * forms (exact.cuh: single_kernel's BULK off, MINB and FB), O256, O128
 * and O64 the production form with the one-batch kernel's one block at
 * least that wide (one_batch_group's ONT); for sums of
 * squares, SQ_EXACT ours and SQ_CUB cub::DeviceReduce::TransformReduce
 * of x * x in the element's type, SQ_REGS ours loading into registers;
 * MOM moments (production: through shared memory, 2 blocks per SM), MOM2
 * and MOM3 its forms that load into registers with 2 and 3 blocks per
 * SM, MOMB3 production's with 3, MOMNG production's without the
 * squares' groups (f32; f64 has none); CAREFUL, NOMID and MATCH the production
 * form with the careful path behind the fast one (exact-wide.cuh's
 * reference), with the wide path but not its middle tier, and with the
 * warp's 64-bit digits for its counters (f64; WIDE_MATCH), and with
 * each element the middle tier's window holds into the bins even where
 * few do (f64; WIDE_EACH); SQ_CAREFUL
 * squares through the careful path alone, the wide path's reference */
enum impl { EXACT, CUB, BW, REGS, MINB3, FB3, CAREFUL, NOMID, MATCH, EACH, NIMPL, SQ_EXACT = NIMPL, SQ_CUB, SQ_REGS, SQ_CAREFUL, MOM, MOM2, MOM3, MOMB3, MOMNG, O256, O128, O64, NALL };

template <typename T> struct square {
	__device__ __forceinline__ T operator()(T x) const { return x * x; }
};

template <typename T> static void launch(env &E, int which, const T *in, size_t n)
{
	if (which == EXACT) {
		CU((gre::launch_single<T>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == REGS) {
		CU((gre::launch_single<T, 2, false>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == SQ_REGS) {
		if constexpr (sizeof(T) == 4)
			CU((gre::launch_single<gre::sqf, gre::PROD_MINB, false, gre::SQ_FB>(
				in, n, E.scratch, E.out, E.sms, E.st)));
		else
			CU((gre::launch_single<gre::sqd, gre::PROD_MINB, false, gre::SQD_FB>(
				in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == SQ_CAREFUL) {
		if constexpr (sizeof(T) == 4)
			CU((gre::launch_single<gre::sqf, gre::PROD_MINB, gre::PROD_BULK, gre::SQ_FB,
					       gre::PROD_ONT, gre::CAREFUL>(in, n, E.scratch, E.out, E.sms,
									   E.st)));
		else
			CU((gre::launch_single<gre::sqd, gre::PROD_MINB, gre::PROD_BULK, gre::SQD_FB,
					       gre::PROD_ONT, gre::CAREFUL>(in, n, E.scratch, E.out, E.sms,
									   E.st)));
	} else if (which == O256) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::THREADS>(
			in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == O128) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::THREADS / 2>(
			in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == O64) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::THREADS / 4>(
			in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == CAREFUL) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::PROD_ONT,
				       gre::CAREFUL>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == NOMID) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::PROD_ONT,
				       gre::WIDE>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == MATCH) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::PROD_ONT,
				       gre::WIDE_MATCH>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == EACH) {
		CU((gre::launch_single<T, gre::PROD_MINB, gre::PROD_BULK, gre::PROD_FB, gre::PROD_ONT,
				       gre::WIDE_EACH>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == MINB3) {
		CU((gre::launch_single<T, 3, false>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == FB3) {
		CU((gre::launch_single<T, 2, false, 3>(in, n, E.scratch, E.out, E.sms, E.st)));
	} else if (which == CUB) {
		size_t tb = E.temp_bytes;
		CU(cub::DeviceReduce::Sum(E.temp, tb, in, (T *)E.cub_out, (int64_t)n, E.st));
	} else if (which == SQ_EXACT) {
		int dt = sizeof(T) == 4 ? GR_EXACT_F32_SQUARES : GR_EXACT_F64_SQUARES;
		CU((cudaError_t)gr_exact_launch_single(dt, in, n, E.scratch, E.out, E.sms, E.st));
	} else if (which == MOM) {
		int dt = sizeof(T) == 4 ? GR_EXACT_F32 : GR_EXACT_F64;
		CU((cudaError_t)gr_moments_launch(dt, in, n, E.mscratch, E.mout, E.sms, E.st));
	} else if (which == MOM2) {
		CU((grm::launch<T, 2, false>(in, n, E.mscratch, E.mout, E.sms, E.st)));
	} else if (which == MOM3) {
		CU((grm::launch<T, 3, false>(in, n, E.mscratch, E.mout, E.sms, E.st)));
	} else if (which == MOMB3) {
		CU((grm::launch<T, 3, true>(in, n, E.mscratch, E.mout, E.sms, E.st)));
	} else if (which == MOMNG) {
		CU((grm::launch<T, grm::PROD_MINB, grm::PROD_BULK, false>(in, n, E.mscratch, E.mout,
									   E.sms, E.st)));
	} else if (which == SQ_CUB) {
		size_t tb = E.temp_bytes;
		CU(cub::DeviceReduce::TransformReduce(E.temp, tb, in, (T *)E.cub_out, (int64_t)n,
						      cuda::std::plus<T>(), square<T>(), (T)0, E.st));
	} else {
		grb::read_bw(in, n * sizeof(T), E.bw_blocks, E.sink, E.st);
	}
}

using grb::positions;

/* GB/s of one block of launches of which, timed from the pool's first
 * place on */
template <typename T> static double throughput_gbs(env &E, int which, size_t n)
{
	return grb::block_gbs(n * sizeof(T), /* from= */ 0, E.e0, E.e1, E.st, [&](size_t at) {
		launch<T>(E, which, (const T *)(E.pool + at), n);
	});
}

static const int REPS = 5;

/* single launches of ours (production, and the one-batch kernel's
 * narrowest block at 256, 128 and 64 threads) and CUB's, taken in turn;
 * medians in us, by impl */
template <typename T> static void latency_us(env &E, size_t n, double (&ret)[NALL])
{
	const int order[] = { EXACT, CUB, O256, O128, O64 };
	pos P = positions(n * sizeof(T));
	std::vector<double> t[NALL];
	for (int i = -5; i < 300; i++) {
		for (int k = 0; k < 5; k++) {
			const T *in = (const T *)(E.pool + P.at((size_t)(5 * (i + 5) + k)));
			CU(cudaEventRecord(E.e0, E.st));
			launch<T>(E, order[k], in, n);
			CU(cudaEventRecord(E.e1, E.st));
			CU(cudaEventSynchronize(E.e1));
			float ms;
			CU(cudaEventElapsedTime(&ms, E.e0, E.e1));
			if (i >= 0)
				t[order[k]].push_back(ms * 1000.0);
		}
	}
	for (int k : order)
		ret[k] = median(t[k]);
}

/* the exact sum at the pool's start: the same bits twice, and within a
 * float sum's error of CUB's */
template <typename T> static bool verify(env &E, size_t n, bool against_cub, double *ret)
{
	const T *in = (const T *)E.pool;
	gr_exact_sum s[2];
	for (int r = 0; r < 2; r++) {
		launch<T>(E, EXACT, in, n);
		CU(cudaStreamSynchronize(E.st));
		CU(cudaMemcpy(&s[r], E.out, sizeof(s[r]), cudaMemcpyDeviceToHost));
	}
	double a = gr_exact_fold(&s[0], n), b = gr_exact_fold(&s[1], n);
	*ret = a;
	if (memcmp(&a, &b, 8) != 0) {
		fprintf(stderr, "exact sum not repeatable: n=%zu %a %a\n", n, a, b);
		return false;
	}
	for (int form : { REGS, CAREFUL, NOMID, MATCH, EACH }) {
		launch<T>(E, form, in, n);
		CU(cudaStreamSynchronize(E.st));
		CU(cudaMemcpy(&s[1], E.out, sizeof(s[1]), cudaMemcpyDeviceToHost));
		b = gr_exact_fold(&s[1], n);
		if (memcmp(&a, &b, 8) != 0) {
			fprintf(stderr, "form %d's sum differs: n=%zu %a %a\n", form, n, a, b);
			return false;
		}
	}
	if (!against_cub)
		return true;
	launch<T>(E, CUB, in, n);
	CU(cudaStreamSynchronize(E.st));
	T c;
	CU(cudaMemcpy(&c, E.cub_out, sizeof(c), cudaMemcpyDeviceToHost));
	double tol = (sizeof(T) == 4 ? 1e-5 : 1e-12) * (double)n;
	if (!(fabs(a - (double)c) <= tol)) {
		fprintf(stderr, "exact sum far from CUB's: n=%zu %.17g %.17g\n", n, a, (double)c);
		return false;
	}
	return true;
}

template <typename T> static void fill(env &E, int kind)
{
	grb::fill_kernel<T><<<E.sms * 8, 256, 0, E.st>>>((T *)E.pool, POOL / sizeof(T), 0x1234567ull, kind);
	CU(cudaGetLastError());
	CU(cudaStreamSynchronize(E.st));
}

/* Single-launch latency at n = 2^10 .. 2^16, after checking that the
 * one-batch kernel's widths give the production form's bits there */
template <typename T> static bool latency(env &E, const char *dt)
{
	bool ok = true;
	for (int e = 10; e <= 16; e += 2) {
		const size_t n = ((size_t)1 << e) + (e == 12 ? 0 : 3);
		gr_exact_sum s[4];
		const int forms[] = { EXACT, O256, O128, O64 };
		for (int k = 0; k < 4; k++) {
			launch<T>(E, forms[k], (const T *)E.pool, n);
			CU(cudaStreamSynchronize(E.st));
			CU(cudaMemcpy(&s[k], E.out, sizeof(s[k]), cudaMemcpyDeviceToHost));
		}
		const double a = gr_exact_fold(&s[0], n);
		for (int k = 1; k < 4; k++) {
			const double b = gr_exact_fold(&s[k], n);
			if (memcmp(&a, &b, 8) != 0) {
				fprintf(stderr, "%s n=%zu: form %d gives %a, production %a\n", dt, n, k, b, a);
				ok = false;
			}
		}
	}
	printf("%s single-launch latency (us, medians of 300, taken in turn)\n", dt);
	printf("%10s | %9s %9s %7s | %9s %9s %9s | %7s %7s %7s\n", "n", "exact", "cub", "ratio",
	       "one 256", "one 128", "one 64", "256/cub", "128/cub", "64/cub");
	for (int e = 10; e <= 16; e += 2) {
		size_t n = (size_t)1 << e;
		double l[NALL];
		latency_us<T>(E, n, l);
		printf("%10zu | %9.2f %9.2f %7.3f | %9.2f %9.2f %9.2f | %7.3f %7.3f %7.3f\n", n, l[EXACT],
		       l[CUB], l[EXACT] / l[CUB], l[O256], l[O128], l[O64], l[O256] / l[CUB],
		       l[O128] / l[CUB], l[O64] / l[CUB]);
	}
	return ok;
}

template <typename T> static bool bench(env &E, const char *dt, int hi, bool lat = true)
{
	bool ok = true;
	const int exps[] = { 16, 20, 24, 26, 28 };
	fill<T>(E, 0);
	printf("\n%s, uniform [-1, 1): back-to-back throughput, medians of %d "
	       "(regs, 3/SM, fb3: the kernel's other forms)\n", dt, REPS);
	printf("%10s | %10s %10s %10s | %10s %10s | %9s %9s %9s | %9s %9s %9s | %s\n", "n", "exact GB/s",
	       "cub GB/s", "read GB/s", "exact/read", "exact/cub", "regs GB/s", "3/SM GB/s",
	       "fb3 GB/s", "care/read", "nomid/rd", "match/rd", "check");
	for (int e : exps) {
		if (e > hi)
			continue;
		size_t n = (size_t)1 << e;
		double sum;
		bool good = verify<T>(E, n, true, &sum);
		ok = ok && good;
		std::vector<double> t[NIMPL];
		for (int r = 0; r < REPS; r++)
			for (int w = 0; w < NIMPL; w++)
				t[w].push_back(throughput_gbs<T>(E, w, n));
		double x = median(t[0]), c = median(t[1]), b = median(t[2]);
		printf("%10zu | %10.1f %10.1f %10.1f | %10.3f %10.3f | %9.1f %9.1f %9.1f | %9.3f %9.3f %9.3f "
		       "| %s\n",
		       n, x, c, b, x / b, x / c, median(t[REGS]), median(t[MINB3]), median(t[FB3]),
		       median(t[CAREFUL]) / b, median(t[NOMID]) / b, median(t[MATCH]) / b,
		       good ? "ok" : "FAIL");
	}
	if (lat)
		ok = latency<T>(E, dt) && ok;
	const char *kinds[] = { "", "exponents over 60 binades", "every finite exponent" };
	for (int kind = 1; kind <= 2; kind++) {
		fill<T>(E, kind);
		printf("%s, %s: exact vs read kernel throughput\n", dt, kinds[kind]);
		printf("%10s | %10s %10s %10s | %10s %10s | %9s %9s %9s | %9s %9s %9s %9s | %s\n", "n",
		       "exact GB/s", "cub GB/s", "read GB/s", "exact/read", "exact/cub", "regs GB/s",
		       "3/SM GB/s", "fb3 GB/s", "care/read", "nomid/rd", "match/rd", "each/rd", "check");
		for (int e : exps) {
			if (e > hi)
				continue;
			size_t n = (size_t)1 << e;
			double sum;
			bool good = verify<T>(E, n, false, &sum);
			ok = ok && good;
			std::vector<double> t[NIMPL];
			for (int r = 0; r < 3; r++)
				for (int w = 0; w < NIMPL; w++)
					t[w].push_back(throughput_gbs<T>(E, w, n));
			double x = median(t[0]), c = median(t[1]), b = median(t[2]);
			printf("%10zu | %10.1f %10.1f %10.1f | %10.3f %10.3f | %9.1f %9.1f %9.1f | %9.3f "
			       "%9.3f %9.3f %9.3f | %s (sum %.6g)\n",
			       n, x, c, b, x / b, x / c, median(t[REGS]), median(t[MINB3]),
			       median(t[FB3]), median(t[CAREFUL]) / b, median(t[NOMID]) / b,
			       median(t[MATCH]) / b, median(t[EACH]) / b, good ? "ok" : "FAIL", sum);
		}
	}
	return ok;
}

/* The batched form: 2^24 elements as segments of 2^k elements, one launch
 * each time; GB/s back to back, against the read kernel over the same
 * bytes in one piece. */
template <typename T> static void bench_batch(env &E, const char *dt)
{
	fill<T>(E, 0);
	const size_t total = (size_t)1 << 24;
	printf("%s batched form, 2^24 elements in one launch: segments of n\n", dt);
	printf("%10s %8s | %10s %10s %10s\n", "n", "segments", "batch GB/s", "read GB/s", "batch/read");
	for (int k : { 10, 12, 16, 20 }) {
		size_t n = (size_t)1 << k, ns = total / n;
		std::vector<gr_exact_seg> segs(ns);
		uint32_t units = 0;
		for (size_t i = 0; i < ns; i++) {
			segs[i] = gr_exact_seg{ i * n * sizeof(T), n, sizeof(T) == 4 ? 4u : 5u, units,
						gr_exact_units(sizeof(T) == 4 ? 4 : 5, n), 0 };
			units += segs[i].units;
		}
		gr_exact_seg *ds;
		gr_exact_scratch *dscr;
		gr_exact_sum *dout;
		CU(cudaMalloc(&ds, ns * sizeof(gr_exact_seg)));
		CU(cudaMalloc(&dscr, ns * sizeof(gr_exact_scratch)));
		CU(cudaMalloc(&dout, ns * sizeof(gr_exact_sum)));
		CU(cudaMemcpy(ds, segs.data(), ns * sizeof(gr_exact_seg), cudaMemcpyHostToDevice));
		CU(cudaMemset(dscr, 0, ns * sizeof(gr_exact_scratch)));
		std::vector<double> tb, tr;
		for (int r = 0; r < REPS; r++) {
			const int reps = 50;
			for (int w = 0; w < 2; w++) {
				CU(cudaEventRecord(E.e0, E.st));
				for (int i = 0; i < reps; i++) {
					const unsigned char *base = E.pool + (size_t)(i % 4) * total * sizeof(T);
					if (w == 0)
						CU((cudaError_t)gr_exact_launch_batch(base, ds, (uint32_t)ns, units,
										      dscr, dout, E.sms, E.st));
					else
						launch<T>(E, BW, (const T *)base, total);
				}
				CU(cudaEventRecord(E.e1, E.st));
				CU(cudaEventSynchronize(E.e1));
				float ms;
				CU(cudaEventElapsedTime(&ms, E.e0, E.e1));
				(w == 0 ? tb : tr).push_back((double)total * sizeof(T) * reps / (ms * 1e-3) / 1e9);
			}
		}
		double b = median(tb), rd = median(tr);
		printf("%10zu %8zu | %10.1f %10.1f %10.3f\n", n, ns, b, rd, b / rd);
		CU(cudaFree(ds));
		CU(cudaFree(dscr));
		CU(cudaFree(dout));
	}
}

/*
 * The exact sums of squares (sumsq of f32 and f64) against the read
 * kernel over the same bytes and CUB's TransformReduce of x * x (rounded
 * squares added in the element's type): back-to-back throughput in blocks
 * as the sums' (1 GiB's worth, 20 to 2000 launches, after three warm-up
 * launches), medians of REPS; the exact sum checked as in verify(). Then
 * the exact kernel alone, beside the read kernel, on data of wide
 * exponent range.
 */
template <typename T> static bool bench_squares(env &E, const char *dt, int hi)
{
	const int reps = REPS;
	bool ok = true;
	const int exps[] = { 20, 24, 26, 28 };
	const int impls[] = { SQ_EXACT, SQ_CUB, BW, SQ_REGS, SQ_CAREFUL };
	const char *kinds[] = { "uniform [-1, 1)", "exponents over 60 binades",
				"every finite exponent" };
	for (int kind = 0; kind <= 2; kind++) {
		fill<T>(E, kind);
		printf("\n%s sum of squares, %s: back-to-back throughput, medians of %d\n", dt,
		       kinds[kind], reps);
		printf("%10s | %10s %10s %10s | %10s %10s | %10s %10s | %s\n", "n", "exact GB/s",
		       "cub GB/s", "read GB/s", "exact/read", "exact/cub", "regs GB/s", "careful/read",
		       "check");
		for (int e : exps) {
			if (e > hi || (kind > 0 && e != 24 && e != 28))
				continue;
			size_t n = (size_t)1 << e, bytes = n * sizeof(T);
			/* the same bits twice; near CUB's on typical data */
			gr_exact_sum s[2];
			for (int r = 0; r < 2; r++) {
				launch<T>(E, SQ_EXACT, (const T *)E.pool, n);
				CU(cudaStreamSynchronize(E.st));
				CU(cudaMemcpy(&s[r], E.out, sizeof(s[r]), cudaMemcpyDeviceToHost));
			}
			double a = gr_exact_fold(&s[0], n), b = gr_exact_fold(&s[1], n);
			bool good = memcmp(&a, &b, 8) == 0;
			launch<T>(E, SQ_CAREFUL, (const T *)E.pool, n);
			CU(cudaStreamSynchronize(E.st));
			CU(cudaMemcpy(&s[1], E.out, sizeof(s[1]), cudaMemcpyDeviceToHost));
			b = gr_exact_fold(&s[1], n);
			good = good && memcmp(&a, &b, 8) == 0;
			if (kind == 0) {
				launch<T>(E, SQ_CUB, (const T *)E.pool, n);
				CU(cudaStreamSynchronize(E.st));
				T c;
				CU(cudaMemcpy(&c, E.cub_out, sizeof(c), cudaMemcpyDeviceToHost));
				good = good && fabs(a - (double)c) <= (sizeof(T) == 4 ? 1e-5 : 1e-12) * (double)n;
			}
			ok = ok && good;
			pos P = positions(bytes);
			int k = (int)std::min<size_t>(2000, std::max<size_t>(20, ((size_t)1 << 30) / bytes));
			std::vector<double> t[5];
			for (int r = 0; r < reps; r++) {
				for (int w = 0; w < 5; w++) {
					if (kind > 0 && impls[w] == SQ_CUB)
						continue;
					for (int i = -3; i < k; i++) {
						if (i == 0)
							CU(cudaEventRecord(E.e0, E.st));
						launch<T>(E, impls[w], (const T *)(E.pool + P.at((size_t)(i + 3))),
							  n);
					}
					CU(cudaEventRecord(E.e1, E.st));
					CU(cudaEventSynchronize(E.e1));
					float ms;
					CU(cudaEventElapsedTime(&ms, E.e0, E.e1));
					t[w].push_back((double)bytes * k / (ms * 1e-3) / 1e9);
				}
			}
			double x = median(t[0]), rd = median(t[2]);
			double c = t[1].empty() ? 0 : median(t[1]);
			printf("%10zu | %10.1f %10.1f %10.1f | %10.3f %10.3f | %10.1f %10.3f | %s (sum "
			       "%.6g)\n",
			       n, x, c, rd, x / rd, c > 0 ? x / c : 0.0, median(t[3]), median(t[4]) / rd,
			       good ? "ok" : "FAIL", a);
		}
	}
	return ok;
}

/*
 * moments against the read kernel and the exact sum over the same bytes,
 * back-to-back blocks as the sums' (grb::block_gbs), the kinds taken in
 * turn, medians of REPS; on uniform data and on exponents over 60 binades.
 * Checked: the same sums twice, and the sum's digits those of the exact
 * sum's.
 */
template <typename T> static bool bench_moments(env &E, const char *dt, int hi)
{
	bool ok = true;
	const int impls[] = { MOM, BW, EXACT, MOM2, MOM3, MOMB3, MOMNG };
	const char *kinds[] = { "uniform [-1, 1)", "exponents over 60 binades" };
	for (int kind = 0; kind <= 1; kind++) {
		fill<T>(E, kind);
		printf("\n%s moments, %s: back-to-back throughput, medians of %d\n", dt, kinds[kind],
		       REPS);
		printf("%10s | %9s %9s %9s %9s %9s %9s %9s | %9s %9s %9s | %s\n", "n", "mom GB/s",
		       "read GB/s", "sum GB/s", "reg 2/SM", "reg 3/SM", "bulk 3/SM", "no groups",
		       "mom/read", "mom/sum", "nogr/read", "check");
		for (int e : { 20, 24, 26, 28 }) {
			if (e > hi)
				continue;
			size_t n = (size_t)1 << e;
			gr_moments_sums m[4];
			gr_exact_sum s;
			for (int r = 0; r < 4; r++) {
				launch<T>(E, r < 2 ? MOM : r == 2 ? MOM2 : MOMNG, (const T *)E.pool, n);
				CU(cudaStreamSynchronize(E.st));
				CU(cudaMemcpy(&m[r], E.mout, sizeof(m[r]), cudaMemcpyDeviceToHost));
			}
			launch<T>(E, EXACT, (const T *)E.pool, n);
			CU(cudaStreamSynchronize(E.st));
			CU(cudaMemcpy(&s, E.out, sizeof(s), cudaMemcpyDeviceToHost));
			double a = gr_exact_fold(&m[0].sum, n), b = gr_exact_fold(&s, n);
			double q0 = gr_exact_fold(&m[0].sq, n), q2 = gr_exact_fold(&m[2].sq, n),
			       a2 = gr_exact_fold(&m[2].sum, n);
			bool good = memcmp(&m[0], &m[1], sizeof(m[0])) == 0 && memcmp(&a, &b, 8) == 0 &&
				    memcmp(&a, &a2, 8) == 0 && memcmp(&q0, &q2, 8) == 0 &&
				    m[0].kmin == m[2].kmin && m[0].kmax == m[2].kmax &&
				    memcmp(&m[0], &m[3], sizeof(m[0])) == 0;
			ok = ok && good;
			std::vector<double> t[7];
			for (int r = 0; r < REPS; r++)
				for (int w = 0; w < 7; w++)
					t[w].push_back(throughput_gbs<T>(E, impls[w], n));
			double x = median(t[0]), rd = median(t[1]), sm = median(t[2]);
			printf("%10zu | %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f | %9.3f %9.3f %9.3f | %s\n",
			       n, x, rd, sm, median(t[3]), median(t[4]), median(t[5]), median(t[6]),
			       x / rd, x / sm, median(t[6]) / rd, good ? "ok" : "FAIL");
		}
	}
	return ok;
}

/* Integer moments (moments.h's integer kernel) against the read kernel,
 * random bits, as bench_moments(); checked: the same digits twice. */
template <typename T> static bool bench_moments_int(env &E, const char *dt, int code, int hi)
{
	bool ok = true;
	fill<T>(E, 0);
	printf("\n%s moments, random bits: back-to-back throughput, medians of %d\n", dt, REPS);
	printf("%10s | %9s %9s | %9s | %s\n", "n", "mom GB/s", "read GB/s", "mom/read", "check");
	for (int e : { 20, 24, 26, 28 }) {
		if (e > hi)
			continue;
		size_t n = (size_t)1 << e;
		gr_moments_sums m[2];
		for (int r = 0; r < 2; r++) {
			CU((cudaError_t)gr_moments_launch(code, E.pool, n, E.mscratch, E.mout, E.sms,
							  E.st));
			CU(cudaStreamSynchronize(E.st));
			CU(cudaMemcpy(&m[r], E.mout, sizeof(m[r]), cudaMemcpyDeviceToHost));
		}
		bool good = memcmp(m[0].isum, m[1].isum, sizeof(m[0].isum)) == 0 &&
			    memcmp(m[0].isq, m[1].isq, sizeof(m[0].isq)) == 0 &&
			    m[0].kmin == m[1].kmin && m[0].kmax == m[1].kmax;
		ok = ok && good;
		std::vector<double> t[2];
		for (int r = 0; r < REPS; r++) {
			t[0].push_back(grb::block_gbs(n * sizeof(T), 0, E.e0, E.e1, E.st, [&](size_t at) {
				CU((cudaError_t)gr_moments_launch(code, E.pool + at, n, E.mscratch, E.mout,
								  E.sms, E.st));
			}));
			t[1].push_back(grb::block_gbs(n * sizeof(T), 0, E.e0, E.e1, E.st, [&](size_t at) {
				grb::read_bw(E.pool + at, n * sizeof(T), E.bw_blocks, E.sink, E.st);
			}));
		}
		double x = median(t[0]), rd = median(t[1]);
		printf("%10zu | %9.1f %9.1f | %9.3f | %s\n", n, x, rd, x / rd, good ? "ok" : "FAIL");
	}
	return ok;
}

int main(int argc, char **argv)
{
	int hi = 28;
	bool moments_only = false, latency_only = false, sums_only = false, squares_only = false;
	int once = 0, wide_once = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hi") && i + 1 < argc) {
			hi = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--moments-only")) {
			moments_only = true;
		} else if (!strcmp(argv[i], "--latency-only")) {
			latency_only = true;
		} else if (!strcmp(argv[i], "--sums")) {
			sums_only = true;
		} else if (!strcmp(argv[i], "--squares")) {
			squares_only = true;
		} else if (!strcmp(argv[i], "--once") && i + 1 < argc) {
			once = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--wide-once") && i + 1 < argc) {
			wide_once = atoi(argv[++i]);
		} else {
			fprintf(stderr,
				"usage: %s [--hi E] [--moments-only | --latency-only | --sums | --squares "
				"| --once E | --wide-once E]\n",
				argv[0]);
			return 2;
		}
	}
	if (hi < 16 || hi > 28) {
		fprintf(stderr, "need 16 <= hi <= 28\n");
		return 2;
	}
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		fprintf(stderr, "no CUDA device\n");
		return 77;
	}
	env E;
	cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, 0));
	E.sms = prop.multiProcessorCount;
	int per_sm = 0;
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grb::read_bw_kernel, 256, 0));
	E.bw_blocks = per_sm * E.sms;
	int ex_per_sm = 0;
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ex_per_sm, gre::single_kernel<float>, 256, 0));
	CU(cudaMalloc(&E.pool, POOL));
	size_t nmax = (size_t)1 << hi, tb = 0;
	E.temp_bytes = 1 << 20;
	CU(cub::DeviceReduce::Sum(nullptr, tb, (const float *)nullptr, (float *)nullptr, (int64_t)nmax));
	E.temp_bytes = std::max(E.temp_bytes, tb);
	CU(cub::DeviceReduce::Sum(nullptr, tb, (const double *)nullptr, (double *)nullptr, (int64_t)nmax));
	E.temp_bytes = std::max(E.temp_bytes, tb);
	CU(cub::DeviceReduce::TransformReduce(nullptr, tb, (const float *)nullptr, (float *)nullptr,
					      (int64_t)nmax, cuda::std::plus<float>(), square<float>(), 0.0f));
	E.temp_bytes = std::max(E.temp_bytes, tb);
	CU(cub::DeviceReduce::TransformReduce(nullptr, tb, (const double *)nullptr, (double *)nullptr,
					      (int64_t)nmax, cuda::std::plus<double>(), square<double>(), 0.0));
	E.temp_bytes = std::max(E.temp_bytes, tb);
	CU(cudaMalloc(&E.temp, E.temp_bytes));
	CU(cudaMalloc(&E.scratch, sizeof(gr_exact_scratch)));
	CU(cudaMemset(E.scratch, 0, sizeof(gr_exact_scratch)));
	CU(cudaMalloc(&E.out, sizeof(gr_exact_sum)));
	CU(cudaMalloc(&E.mscratch, sizeof(gr_moments_scratch)));
	CU(cudaMemset(E.mscratch, 0, sizeof(gr_moments_scratch)));
	CU(cudaMalloc(&E.mout, sizeof(gr_moments_sums)));
	CU(cudaMalloc(&E.cub_out, 64));
	CU(cudaMalloc(&E.sink, 64));
	CU(cudaEventCreate(&E.e0));
	CU(cudaEventCreate(&E.e1));
	CU(cudaStreamCreateWithFlags(&E.st, cudaStreamNonBlocking));
	int drv = 0, rt = 0;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	printf("device: %s (%d SMs), driver %d, runtime %d; exact kernel %d blocks/SM resident\n",
	       prop.name, E.sms, drv, rt, ex_per_sm);
	if (once) {
		/* one launch of each at 2^once f32, for a profiler */
		const size_t n = (size_t)1 << (once < 10 ? 10 : once > hi ? hi : once);
		fill<float>(E, 0);
		for (int w : { EXACT, BW, MOM, MOM3, MOMB3 })
			launch<float>(E, w, (const float *)E.pool, n);
		CU(cudaStreamSynchronize(E.st));
		return 0;
	}
	if (wide_once) {
		/* the wide path's launches at 2^wide_once, for a profiler */
		const size_t n = (size_t)1 << (wide_once < 10 ? 10 : wide_once > hi ? hi : wide_once);
		fill<float>(E, 2);
		launch<float>(E, EXACT, (const float *)E.pool, n);
		fill<double>(E, 2);
		launch<double>(E, EXACT, (const double *)E.pool, n);
		fill<float>(E, 1);
		launch<float>(E, SQ_EXACT, (const float *)E.pool, n);
		launch<float>(E, MOM, (const float *)E.pool, n);
		fill<double>(E, 1);
		launch<double>(E, SQ_EXACT, (const double *)E.pool, n);
		launch<double>(E, MOM, (const double *)E.pool, n);
		fill<double>(E, 0);
		launch<double>(E, MOM, (const double *)E.pool, n);
		CU(cudaStreamSynchronize(E.st));
		return 0;
	}
	/* clocks up before anything is timed */
	for (int i = 0; i < 1000; i++)
		launch<float>(E, BW, (const float *)E.pool, (size_t)1 << 28);
	CU(cudaStreamSynchronize(E.st));

	bool ok = true;
	if (latency_only) {
		fill<float>(E, 0);
		ok = latency<float>(E, "f32") && ok;
		fill<double>(E, 0);
		ok = latency<double>(E, "f64") && ok;
		printf("\n%s\n", ok ? "all checks ok" : "SOME CHECKS FAILED");
		return ok ? 0 : 1;
	}
	if (squares_only) {
		ok = bench_squares<float>(E, "f32", hi) && ok;
		ok = bench_squares<double>(E, "f64", hi) && ok;
		printf("\n%s\n", ok ? "all checks ok" : "SOME CHECKS FAILED");
		return ok ? 0 : 1;
	}
	if (sums_only) {
		ok = bench<float>(E, "f32", hi, false) && ok;
		ok = bench<double>(E, "f64", hi, false) && ok;
		ok = bench_squares<float>(E, "f32", hi) && ok;
		printf("\n%s\n", ok ? "all checks ok" : "SOME CHECKS FAILED");
		return ok ? 0 : 1;
	}
	if (!moments_only) {
		ok = bench<float>(E, "f32", hi) && ok;
		ok = bench<double>(E, "f64", hi) && ok;
		printf("\n");
		bench_batch<float>(E, "f32");
		bench_batch<double>(E, "f64");
		ok = bench_squares<float>(E, "f32", hi) && ok;
		ok = bench_squares<double>(E, "f64", hi) && ok;
	}
	ok = bench_moments<float>(E, "f32", hi) && ok;
	ok = bench_moments<double>(E, "f64", hi) && ok;
	ok = bench_moments_int<int32_t>(E, "i32", 0, hi) && ok;
	ok = bench_moments_int<int64_t>(E, "i64", 1, hi) && ok;
	printf("\n%s\n", ok ? "all checks ok" : "SOME CHECKS FAILED");
	return ok ? 0 : 1;
}
