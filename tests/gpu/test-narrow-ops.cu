/*
 * The prefix sums (cuda/scan.h) and the segmented reduce (cuda/segred.h)
 * of the narrow dtypes in device memory against the CPU's, bit for bit:
 *  - the device's widening (cuda/widen.cuh) of every 8- and 16-bit
 *    pattern against math/widen.h's, NaN payloads included;
 *  - prefix sums of every narrow dtype against math/cumsum.h's
 *    (gr_cumsum_whole of the same narrow array), at sizes 1, 4095, 4096,
 *    4097, 2^20 + 3 and others, over every bit pattern (the 256 or 65,536
 *    of the dtype, in order, then random ones: NaN payloads, -0, +-inf,
 *    subnormals), over finite random elements and over small integers
 *    (exact, so checked against a running sum too); a NaN matches any
 *    NaN (the protocol leaves its sign and payload open), every other
 *    value bit for bit. Also off a 16-byte boundary (the element path)
 *    and the refusal of 2-byte elements off their boundary;
 *  - segments of every narrow dtype, sum, min, max, sumsq, argmin and
 *    argmax, against the CPU's record of each segment alone (gr_reduce
 *    over the narrow elements, gr_segs_record), over the same data and
 *    segments empty (at the start, the end, between tiles), short (one
 *    lane's), crossing tiles, and one over every element; and the refusal
 *    of moments.
 * --quick keeps to small sizes (for compute-sanitizer). --bench times the
 * prefix sums of every narrow dtype against f32's at 2^24 and 2^28
 * elements (CUDA events, medians) instead. Exits 77 when there is no GPU.
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/scan.h"
#include "cuda/segred.h"
#include "cuda/widen.cuh"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "math/cumsum.h"
#include "math/reduce.h"
#include "math/segments.h"
#include "math/widen.h"
}

static const int NARROW[] = { GR_DT_F16, GR_DT_BF16, GR_DT_F8E4M3, GR_DT_F8E5M2,
			      GR_DT_I8,  GR_DT_U8,   GR_DT_I16,    GR_DT_U16 };
static const char *op_name[] = { "sum", "min", "max", "sumsq", "argmin", "argmax", "moments" };

/* ---- widening ---- */

template <int DT> __global__ void widen_all(uint32_t *out, unsigned count)
{
	using IN = grwiden::in<grwiden::narrow<DT>>;
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= count)
		return;
	typename IN::R r;
	uint16_t b = (uint16_t)i;
	memcpy(&r, &b, sizeof(r));
	typename IN::W w = IN::widen(r);
	memcpy(&out[i], &w, 4);
}

template <int DT> static void widen_check(uint32_t *dout)
{
	const unsigned size = (unsigned)gr_dtype_size((gr_dtype)DT), count = 1u << (8 * size);
	widen_all<DT><<<(count + 255) / 256, 256>>>(dout, count);
	CU(cudaGetLastError());
	std::vector<uint32_t> got(count);
	CU(cudaMemcpy(got.data(), dout, count * 4, cudaMemcpyDeviceToHost));
	unsigned bad = 0;
	for (unsigned b = 0; b < count; b++) {
		uint16_t v = (uint16_t)b;
		uint32_t want = gr_widen_one((gr_dtype)DT, &v);
		if (got[b] != want && bad++ < 3)
			CHECK(false, "widen %s %#x: device %08x, host %08x", gr_dtype_name((gr_dtype)DT), b,
			      got[b], want);
	}
	CHECK(bad == 0, "widen %s: %u of %u patterns differ", gr_dtype_name((gr_dtype)DT), bad, count);
	printf("widen  %-6s every pattern: ok\n", gr_dtype_name((gr_dtype)DT));
}

/* ---- data ---- */

enum { PATTERNS, FINITE, SMALL, NKINDS };
static const char *kind_name[] = { "patterns", "finite", "small" };

/* Whether a narrow float's bits are a NaN or an infinity. */
static bool special(int dt, uint32_t b)
{
	switch (dt) {
	case GR_DT_F16: return (b & 0x7c00u) == 0x7c00u;
	case GR_DT_BF16: return (b & 0x7f80u) == 0x7f80u;
	case GR_DT_F8E4M3: return (b & 0x7fu) == 0x7fu;
	case GR_DT_F8E5M2: return (b & 0x7cu) == 0x7cu;
	}
	return false;
}

/*
 * n elements of dt: PATTERNS every bit pattern in order, then random bits;
 * FINITE random bits but NaNs and infinities; SMALL integers in [-8, 8]
 * (floats: their exact encodings, so that every order sums them exactly;
 * unsigned: 0 to 8).
 */
static std::vector<unsigned char> make_data(int dt, int kind, size_t n)
{
	const size_t size = gr_dtype_size((gr_dtype)dt);
	const uint32_t count = 1u << (8 * size);
	std::vector<unsigned char> h(n * size + 16);
	/* a float dtype's encodings of -8 .. 8: exact in every format (E4M3
	 * and E5M2 hold the integers 0 to 8), found among its patterns */
	uint32_t small[17] = { 0 };
	if (kind == SMALL && gr_dtype_is_float((gr_dtype)dt))
		for (int v = -8; v <= 8; v++) {
			float f = (float)v;
			uint32_t fb;
			memcpy(&fb, &f, 4);
			for (uint32_t c = 0; c < count; c++)
				if (gr_widen_one((gr_dtype)dt, &c) == fb) {
					small[v + 8] = c;
					break;
				}
		}
	for (size_t i = 0; i < n; i++) {
		uint32_t b = (uint32_t)rnd() & (count - 1);
		if (kind == PATTERNS && i < count)
			b = (uint32_t)i;
		if (kind == FINITE)
			while (special(dt, b))
				b = (uint32_t)rnd() & (count - 1);
		if (kind == SMALL) {
			int v = (int)(rnd() % 17) - 8;
			if (!gr_dtype_is_signed((gr_dtype)dt) && !gr_dtype_is_float((gr_dtype)dt))
				v = v < 0 ? -v : v;
			if (gr_dtype_is_float((gr_dtype)dt)) {
				b = small[v + 8];
			} else {
				b = (uint32_t)v & (count - 1);
			}
		}
		memcpy(h.data() + i * size, &b, size);
	}
	return h;
}

/* ---- prefix sums ---- */

static void *scan_ws;
static size_t scan_ws_bytes;
static uint32_t scan_epoch;

static void scan_ws_for(uint64_t n)
{
	size_t wb = gr_scan_workspace_bytes(n);
	if (wb > scan_ws_bytes) {
		CU(cudaFree(scan_ws));
		CU(cudaMalloc(&scan_ws, wb));
		CU(cudaMemset(scan_ws, 0, wb));
		scan_ws_bytes = wb;
		scan_epoch = 0;
	}
}

static bool is_nan_bits(uint64_t u)
{
	return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/* The prefix sums of n elements of dt on the device at `skew` bytes past
 * a 16-byte boundary (0: the vector path) against the CPU's. */
static void scan_case(int dt, int kind, uint64_t n, unsigned skew)
{
	const size_t size = gr_dtype_size((gr_dtype)dt);
	std::vector<unsigned char> h = make_data(dt, kind, n);
	unsigned char *dx;
	uint64_t *dout;
	CU(cudaMalloc((void **)&dx, n * size + 16));
	CU(cudaMalloc((void **)&dout, n * 8));
	CU(cudaMemcpy(dx + skew, h.data(), n * size, cudaMemcpyHostToDevice));
	CU(cudaMemset(dout, 0xa5, n * 8));
	scan_ws_for(n);
	CU(gr_scan_launch(dt, dx + skew, n, dout, scan_ws, ++scan_epoch, nullptr));
	CU(cudaDeviceSynchronize());
	std::vector<uint64_t> got(n), cpu(n);
	CU(cudaMemcpy(got.data(), dout, n * 8, cudaMemcpyDeviceToHost));
	CHECK(gr_cumsum_whole((gr_dtype)dt, h.data(), n, (uint8_t *)cpu.data()) == 0, "gr_cumsum_whole");
	const bool fl = gr_dtype_is_float((gr_dtype)dt);
	uint64_t bad = 0, first = 0, nans = 0;
	int64_t run = 0;
	for (uint64_t i = 0; i < n; i++) {
		bool same = got[i] == cpu[i] || (fl && is_nan_bits(got[i]) && is_nan_bits(cpu[i]));
		nans += fl && is_nan_bits(got[i]);
		if (kind == SMALL) {
			uint32_t w = gr_widen_one((gr_dtype)dt, h.data() + i * size);
			float f;
			memcpy(&f, &w, 4);
			run += fl ? (int64_t)f : gr_dtype_is_signed((gr_dtype)dt) ? (int64_t)(int32_t)w : (int64_t)w;
			double d;
			memcpy(&d, &got[i], 8);
			same = same && (fl ? d == (double)run : (int64_t)got[i] == run);
		}
		if (!same && bad++ == 0)
			first = i;
	}
	CHECK(bad == 0, "scan %s %s n=%llu skew %u: %llu values differ, the first at %llu: GPU %016llx, CPU %016llx",
	      gr_dtype_name((gr_dtype)dt), kind_name[kind], (unsigned long long)n, skew,
	      (unsigned long long)bad, (unsigned long long)first, (unsigned long long)got[first],
	      (unsigned long long)cpu[first]);
	uint32_t counter;
	CU(cudaMemcpy(&counter, scan_ws, 4, cudaMemcpyDeviceToHost));
	CHECK(counter == 0, "scan %s: tile counter left at %u", gr_dtype_name((gr_dtype)dt), counter);
	CU(cudaFree(dx));
	CU(cudaFree(dout));
	printf("scan   %-6s %-8s n = %8llu skew %2u: ok (%llu NaN)\n", gr_dtype_name((gr_dtype)dt),
	       kind_name[kind], (unsigned long long)n, skew, (unsigned long long)nans);
}

/* ---- segments ---- */

static std::vector<uint64_t> make_offsets(int layout, size_t n)
{
	std::vector<uint64_t> off = { 0, 0 }; /* an empty one first */
	uint64_t at = 0;
	while (at < n) {
		uint64_t len;
		switch (layout) {
		case 0: len = rnd() % 24; break;                             /* short, many empty */
		case 1: len = rnd() % 5 == 0 ? 0 : 1 + rnd() % 9000; break; /* across tiles */
		default: len = n; break;                                     /* one over all */
		}
		if (len > n - at)
			len = n - at;
		at += len;
		off.push_back(at);
		/* an empty segment at a tile boundary */
		if (layout == 1 && at % 4096 < 64)
			off.push_back(at);
	}
	off.push_back(n);
	off.push_back(n);
	return off;
}

static void segs_case(int dt, int kind, int layout, size_t n, void *scratch, size_t scratch_bytes,
		      size_t *zero)
{
	const size_t size = gr_dtype_size((gr_dtype)dt);
	std::vector<unsigned char> h = make_data(dt, kind, n);
	std::vector<uint64_t> off = make_offsets(layout, n);
	const uint64_t k = off.size() - 1;
	unsigned char *dh = to_device(h.data(), h.size());
	uint64_t *doff = (uint64_t *)to_device(off.data(), off.size() * 8);
	void *drec;
	CU(cudaMalloc(&drec, k * 16));
	for (int op = 0; op < 6; op++) {
		size_t per = gr_segred_scratch_per_seg(op, dt);
		if (per && per * k > scratch_bytes)
			continue;
		const unsigned w = (unsigned)gr_segred_record_bytes(op, dt) / 8;
		CU(gr_segred_launch(op, dt, dh, doff, k, 0, n, drec, scratch, scratch_bytes, zero, 0));
		CU(cudaDeviceSynchronize());
		std::vector<uint64_t> got(k * w);
		CU(cudaMemcpy(got.data(), drec, k * w * 8, cudaMemcpyDeviceToHost));
		uint64_t bad = 0;
		for (uint64_t s = 0; s < k; s++) {
			gr_partial r;
			uint64_t want[2] = { 0, 0 };
			gr_reduce((gr_op)op, (gr_dtype)dt, h.data() + off[s] * size, off[s + 1] - off[s], &r);
			gr_segs_record((gr_op)op, (gr_dtype)dt, 0, &r, (uint8_t *)want);
			for (unsigned j = 0; j < w; j++)
				if (got[s * w + j] != want[j] && bad++ < 3)
					CHECK(false,
					      "segs %s %s %s layout %d: segment %llu ([%llu, %llu)) word %u: "
					      "GPU %016llx, CPU %016llx",
					      op_name[op], gr_dtype_name((gr_dtype)dt), kind_name[kind], layout,
					      (unsigned long long)s, (unsigned long long)off[s],
					      (unsigned long long)off[s + 1], j,
					      (unsigned long long)got[s * w + j], (unsigned long long)want[j]);
		}
		CHECK(bad == 0, "segs %s %s %s layout %d: %llu words differ", op_name[op],
		      gr_dtype_name((gr_dtype)dt), kind_name[kind], layout, (unsigned long long)bad);
	}
	CU(cudaFree(drec));
	CU(cudaFree(doff));
	CU(cudaFree(dh));
	printf("segs   %-6s %-8s layout %d: n = %7zu, %7llu segments: ok\n", gr_dtype_name((gr_dtype)dt),
	       kind_name[kind], layout, n, (unsigned long long)k);
}

/* ---- timing ---- */

/* Median time of a prefix sum of n elements of dt, rotating over a few
 * inputs (filled with finite values) so that they are not L2 hits. */
static double scan_time_us(int dt, uint64_t n)
{
	const size_t size = gr_dtype_size((gr_dtype)dt);
	const int BUFS = 2, REPS = 15;
	unsigned char *dx;
	uint64_t *dout;
	CU(cudaMalloc((void **)&dx, n * size * BUFS));
	CU(cudaMalloc((void **)&dout, n * 8));
	/* 0x3c: 1.0 in f16's top byte, and small in the others: no NaNs */
	CU(cudaMemset(dx, 0x3c, n * size * BUFS));
	scan_ws_for(n);
	cudaEvent_t a, b;
	CU(cudaEventCreate(&a));
	CU(cudaEventCreate(&b));
	std::vector<float> ms;
	for (int r = 0; r < REPS + 2; r++) {
		CU(cudaEventRecord(a));
		CU(gr_scan_launch(dt, dx + (r % BUFS) * n * size, n, dout, scan_ws, ++scan_epoch, nullptr));
		CU(cudaEventRecord(b));
		CU(cudaEventSynchronize(b));
		float t;
		CU(cudaEventElapsedTime(&t, a, b));
		if (r >= 2)
			ms.push_back(t);
	}
	std::sort(ms.begin(), ms.end());
	CU(cudaEventDestroy(a));
	CU(cudaEventDestroy(b));
	CU(cudaFree(dx));
	CU(cudaFree(dout));
	return ms[ms.size() / 2] * 1000.0;
}

static void bench(void)
{
	for (uint64_t n : { (uint64_t)1 << 24, (uint64_t)1 << 28 }) {
		double f32 = scan_time_us(GR_DT_F32, n);
		printf("bench scan n = 2^%d: %-6s %9.1f us  %6.1f Gelem/s  (reads %zu B, writes 8 B an element)\n",
		       n == (1u << 24) ? 24 : 28, "f32", f32, n / f32 / 1e3, (size_t)4);
		for (int dt : NARROW) {
			double t = scan_time_us(dt, n);
			printf("bench scan n = 2^%d: %-6s %9.1f us  %6.1f Gelem/s  %.3f x f32's time\n",
			       n == (1u << 24) ? 24 : 28, gr_dtype_name((gr_dtype)dt), t, n / t / 1e3, t / f32);
		}
	}
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	gpu_sms();
	if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
		bench();
		return 0;
	}

	uint32_t *dw;
	CU(cudaMalloc((void **)&dw, 65536 * 4));
	widen_check<GR_DT_F16>(dw);
	widen_check<GR_DT_BF16>(dw);
	widen_check<GR_DT_F8E4M3>(dw);
	widen_check<GR_DT_F8E5M2>(dw);
	widen_check<GR_DT_I8>(dw);
	widen_check<GR_DT_U8>(dw);
	widen_check<GR_DT_I16>(dw);
	widen_check<GR_DT_U16>(dw);
	CU(cudaFree(dw));

	std::vector<uint64_t> sizes = { 1, 2, 31, 256, 4095, 4096, 4097, 65536, 65537 };
	if (!quick) {
		sizes.push_back(300007);
		sizes.push_back((1u << 20) + 3);
	}
	for (int dt : NARROW) {
		for (uint64_t n : sizes)
			for (int kind = 0; kind < NKINDS; kind++)
				scan_case(dt, kind, n, 0);
		/* off a 16-byte boundary, on the element's own */
		scan_case(dt, PATTERNS, 70001, (unsigned)gr_dtype_size((gr_dtype)dt));
		scan_case(dt, FINITE, 70001, 8);
	}
	if (!quick)
		scan_case(GR_DT_BF16, FINITE, (1u << 24) + 5, 0);
	{
		/* a 2-byte element off its boundary is refused, a 1-byte one is read */
		unsigned char *d;
		uint64_t *o;
		CU(cudaMalloc((void **)&d, 64));
		CU(cudaMalloc((void **)&o, 64 * 8));
		scan_ws_for(16);
		CHECK(gr_scan_launch(GR_DT_F16, d + 1, 16, o, scan_ws, ++scan_epoch, nullptr) ==
			      (int)cudaErrorInvalidValue,
		      "scan: an f16 array at an odd address is refused");
		CHECK(gr_scan_launch(GR_DT_I16, d + 3, 16, o, scan_ws, ++scan_epoch, nullptr) ==
			      (int)cudaErrorInvalidValue,
		      "scan: an i16 array at an odd address is refused");
		CHECK(gr_scan_launch(GR_DT_N, d, 16, o, scan_ws, ++scan_epoch, nullptr) ==
			      (int)cudaErrorInvalidValue,
		      "scan: a dtype past the narrow ones is refused");
		CU(gr_scan_launch(GR_DT_U8, d + 1, 16, o, scan_ws, ++scan_epoch, nullptr));
		CU(cudaDeviceSynchronize());
		CU(cudaFree(d));
		CU(cudaFree(o));
	}

	const size_t scratch_bytes = (size_t)64 << 20;
	void *scratch;
	CU(cudaMalloc(&scratch, scratch_bytes));
	CU(cudaMemset(scratch, 0xa5, scratch_bytes));
	size_t zero = 0;
	for (int dt : NARROW)
		for (int kind = 0; kind < NKINDS; kind++)
			for (int layout = 0; layout < 3; layout++) {
				size_t n = quick ? 20000 : layout == 0 ? 200000 : 1000003;
				if (kind == PATTERNS && layout == 1 && !quick)
					n = 300000;
				segs_case(dt, kind, layout, n, scratch, scratch_bytes, &zero);
			}
	{
		/* moments of a narrow dtype, and misaligned 2-byte elements:
		 * refused */
		std::vector<uint64_t> off = { 0, 10, 20 };
		uint64_t *doff = (uint64_t *)to_device(off.data(), off.size() * 8);
		unsigned char *dh;
		CU(cudaMalloc((void **)&dh, 256));
		void *drec;
		CU(cudaMalloc(&drec, 4096));
		CHECK(gr_segred_launch(6, GR_DT_F16, dh, doff, 2, 0, 20, drec, scratch, scratch_bytes,
				       NULL, 0) == (int)cudaErrorInvalidValue,
		      "segs: moments of f16 are not taken");
		CHECK(gr_segred_scratch_per_seg(6, GR_DT_BF16) == 0, "segs: moments of bf16 need no scratch");
		CHECK(gr_segred_launch(0, GR_DT_BF16, dh + 1, doff, 2, 0, 20, drec, scratch, scratch_bytes,
				       NULL, 0) == (int)cudaErrorInvalidValue,
		      "segs: misaligned bf16 is refused");
		CHECK(gr_segred_launch(0, GR_DT_N, dh, doff, 2, 0, 20, drec, scratch, scratch_bytes, NULL,
				       0) == (int)cudaErrorInvalidValue,
		      "segs: a dtype past the narrow ones is refused");
		CU(gr_segred_launch(1, GR_DT_I8, dh + 1, doff, 2, 0, 20, drec, scratch, scratch_bytes, NULL, 0));
		CU(cudaDeviceSynchronize());
		CU(cudaFree(drec));
		CU(cudaFree(dh));
		CU(cudaFree(doff));
	}
	CU(cudaFree(scratch));
	printf("%lu checks, %lu failures\n", checks, failures);
	return failures ? 1 : 0;
}
