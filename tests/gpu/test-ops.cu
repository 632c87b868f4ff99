/*
 * The segmented sum and prefix sum kernels against the host, every dtype:
 *  - segmented sums: empty segments (first, last, at tile boundaries, all
 *    of them), one segment, 10^6 tiny segments, a few huge ones (past one
 *    group of pieces), lengths around the one-lane limit and the tile;
 *    integers exactly (wrapping), floats exactly on small-integer data
 *    and to a tolerance on reals, and the same bits twice;
 *  - prefix sums: sizes 1, odd, around a tile, 2^20 + 3 and many tiles;
 *    integers exactly, floats bit for bit against the host's reproduction
 *    of the order scan.h documents (written here from that text) and
 *    against the CPU backend's prefix sums (math/cumsum.c), and the
 *    same bits on a second run.
 * --quick keeps to small cases (for compute-sanitizer). Exits 77 when
 * there is no GPU.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/scan.h"
#include "cuda/segmented.h"
#include "tests/gpu/gpu-rnd.h"
extern "C" {
#include "math/cumsum.h"
}

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                             \
			exit(1);                                                         \
		}                                                                        \
	} while (0)
#define CU(call)                                                                         \
	do {                                                                             \
		cudaError_t e_ = (cudaError_t)(call);                                    \
		CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));       \
	} while (0)

static const size_t dt_size[6] = { 4, 8, 4, 8, 4, 8 };
static const char *const dt_name[6] = { "i32", "i64", "u32", "u64", "f32", "f64" };

/* kinds of data: full-range integers, or for floats small integers (every
 * order adds them exactly) or reals of many magnitudes */
enum { DATA_INT, DATA_SMALL, DATA_REAL };

static void fill(int dt, int kind, void *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd();
		double f;
		if (kind == DATA_SMALL)
			f = (double)((int64_t)(r >> 11) % 2001 - 1000);
		else
			f = ((double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0) *
			    ldexp(1.0, (int)(r % 41) - 20);
		switch (dt) {
		case 0: ((int32_t *)p)[i] = (int32_t)r; break;
		case 1: ((int64_t *)p)[i] = (int64_t)r; break;
		case 2: ((uint32_t *)p)[i] = (uint32_t)r; break;
		case 3: ((uint64_t *)p)[i] = r; break;
		case 4: ((float *)p)[i] = (float)f; break;
		case 5: ((double *)p)[i] = f; break;
		}
	}
}

/* element i as the kernels widen it: 64-bit wrapping integer bits, or a double */
static uint64_t elem_u(int dt, const void *p, size_t i)
{
	switch (dt) {
	case 0: return (uint64_t)(int64_t)((const int32_t *)p)[i];
	case 1: return (uint64_t)((const int64_t *)p)[i];
	case 2: return ((const uint32_t *)p)[i];
	default: return ((const uint64_t *)p)[i];
	}
}
static double elem_d(int dt, const void *p, size_t i)
{
	return dt == 4 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static double bits_d(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}
static uint64_t d_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

/* ---- segmented sums ---- */

static void *seg_ws;
static size_t seg_ws_bytes;

static void segsum_case(const char *what, int dt, int kind, const std::vector<uint64_t> &len)
{
	const size_t sz = dt_size[dt];
	const uint64_t k = len.size();
	std::vector<uint64_t> off(k + 1, 0);
	for (uint64_t s = 0; s < k; s++)
		off[s + 1] = off[s] + len[s];
	const uint64_t count = off[k];
	std::vector<unsigned char> h(count * sz + 1);
	fill(dt, kind, h.data(), count);

	void *dx = nullptr, *dout = nullptr;
	uint64_t *doff = nullptr;
	CU(cudaMalloc(&dx, count * sz + 16));
	CU(cudaMalloc(&doff, (k + 1) * 8));
	CU(cudaMalloc(&dout, k * 8 + 8));
	CU(cudaMemcpy(dx, h.data(), count * sz, cudaMemcpyHostToDevice));
	CU(cudaMemcpy(doff, off.data(), (k + 1) * 8, cudaMemcpyHostToDevice));
	size_t wb = gr_segsum_workspace_bytes(count, sz);
	if (wb > seg_ws_bytes) {
		CU(cudaFree(seg_ws));
		CU(cudaMalloc(&seg_ws, wb));
		CU(cudaMemset(seg_ws, 0, wb));
		seg_ws_bytes = wb;
	}
	std::vector<uint64_t> got(k), again(k);
	for (int run = 0; run < 2; run++) {
		CU(cudaMemset(dout, 0xa5, k * 8));
		CU(gr_segsum_launch(dt, dx, count, doff, k, dout, seg_ws, seg_ws_bytes, nullptr));
		CU(cudaDeviceSynchronize());
		CU(cudaMemcpy(run ? again.data() : got.data(), dout, k * 8, cudaMemcpyDeviceToHost));
	}
	/* the tickets (the workspace's first 8 bytes a tile) are zero again */
	if (seg_ws_bytes) {
		size_t tb = seg_ws_bytes / 32 * 8;
		std::vector<unsigned char> w(tb);
		CU(cudaMemcpy(w.data(), seg_ws, tb, cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < tb; i++)
			CHECK(w[i] == 0, "%s %s: ticket byte %zu left %u", what, dt_name[dt], i, w[i]);
	}
	for (uint64_t s = 0; s < k; s++) {
		CHECK(got[s] == again[s], "%s %s: segment %llu differs between runs", what, dt_name[dt],
		      (unsigned long long)s);
		if (dt < 4) {
			uint64_t e = 0;
			for (uint64_t i = off[s]; i < off[s + 1]; i++)
				e += elem_u(dt, h.data(), i);
			CHECK(got[s] == e, "%s %s: segment %llu [%llu, %llu): %llx, want %llx", what,
			      dt_name[dt], (unsigned long long)s, (unsigned long long)off[s],
			      (unsigned long long)off[s + 1], (unsigned long long)got[s],
			      (unsigned long long)e);
			continue;
		}
		long double e = 0, mag = 0;
		bool all_negzero = off[s + 1] > off[s];
		for (uint64_t i = off[s]; i < off[s + 1]; i++) {
			double v = elem_d(dt, h.data(), i);
			e += v;
			mag += fabsl(v);
			all_negzero = all_negzero && v == 0 && signbit(v);
		}
		double g = bits_d(got[s]);
		if (off[s + 1] == off[s]) {
			CHECK(got[s] == 0, "%s %s: empty segment %llu gave %llx", what, dt_name[dt],
			      (unsigned long long)s, (unsigned long long)got[s]);
		} else if (kind == DATA_SMALL) {
			CHECK(g == (double)e && (g != 0 || signbit(g) == all_negzero),
			      "%s %s: segment %llu: %.17g, want %.17Lg", what, dt_name[dt],
			      (unsigned long long)s, g, e);
		} else {
			long double tol = (long double)(off[s + 1] - off[s] + 64) * 0x1p-52L * mag;
			CHECK(fabsl((long double)g - e) <= tol, "%s %s: segment %llu: %.17g, want %.17Lg",
			      what, dt_name[dt], (unsigned long long)s, g, e);
		}
	}
	CU(cudaFree(dx));
	CU(cudaFree(doff));
	CU(cudaFree(dout));
	printf("segsum %-24s %s %-5s %8llu segments %10llu elements: ok\n", what, dt_name[dt],
	       kind == DATA_INT ? "int" : kind == DATA_SMALL ? "small" : "real", (unsigned long long)k,
	       (unsigned long long)count);
}

static void segsum_all(int dt, int kind, bool quick)
{
	const uint64_t te = GR_SEGSUM_TILE_BYTES / dt_size[dt];
	std::vector<uint64_t> len;

	len.clear();
	for (int i = 0; i < (quick ? 300 : 10000); i++)
		len.push_back(rnd() % 10 == 0 ? 0 : 1 + rnd() % 4096);
	segsum_case("random 0-4096", dt, kind, len);

	segsum_case("one segment", dt, kind, { quick ? 100003u : 1000003u });
	segsum_case("one element", dt, kind, { 1 });
	segsum_case("all empty", dt, kind, { 0, 0, 0, 0, 0 });
	segsum_case("empty ends", dt, kind, { 0, 0, 5, 0, 70, 0, 0 });

	/* boundaries: segments ending on tiles, empty ones on tile edges */
	segsum_case("tile edges", dt, kind,
		    { te, 0, 0, te, 2 * te, 0, 1, te - 1, 0, te + 1, te - 1, 0, 3 * te, 0 });

	/* around the one-lane limit and the warp */
	len.clear();
	for (uint64_t l : { 15, 16, 17, 31, 32, 33, 255, 256, 257 })
		for (int r = 0; r < 40; r++)
			len.push_back(l);
	segsum_case("short lengths", dt, kind, len);

	if (quick)
		return;
	len.assign(1000000, 0);
	for (auto &l : len)
		l = rnd() % 4;
	segsum_case("10^6 tiny", dt, kind, len);

	/* past one group of pieces (GR_SEGSUM_GROUP tiles) */
	segsum_case("huge", dt, kind, { 3000001, 1, 0, 5000000, 2 * GR_SEGSUM_GROUP * te + 7 });
}

/* ---- prefix sums ---- */

/* The order scan.h documents, on the host: integers as 64-bit wrapping
 * sums, floats in double with -0.0 for "left out". */
template <typename A>
static void scan_ref(const std::vector<A> &x, std::vector<A> &out, A ident)
{
	const uint64_t n = x.size(), TILE = 4096, ntiles = (n + TILE - 1) / TILE;
	std::vector<A> F(ntiles), E(n ? ntiles * 256 : 0);
	std::vector<A> Agg(ntiles);
	out.assign(n, A(0));
	for (uint64_t j = 0; j < ntiles; j++) {
		A xs[4096];
		for (uint64_t i = 0; i < TILE; i++)
			xs[i] = j * TILE + i < n ? x[j * TILE + i] : A(0);
		A R[256], W[256];
		for (int t = 0; t < 256; t++) {
			A r = ident;
			for (int e = 0; e < 16; e++)
				r = r + xs[16 * t + e];
			R[t] = r;
		}
		for (int w = 0; w < 8; w++) {
			A v[32];
			for (int l = 0; l < 32; l++)
				v[l] = R[32 * w + l];
			for (int d = 1; d < 32; d <<= 1) {
				A nv[32];
				for (int l = 0; l < 32; l++)
					nv[l] = l >= d ? v[l - d] + v[l] : v[l];
				memcpy(v, nv, sizeof v);
			}
			for (int l = 0; l < 32; l++)
				W[32 * w + l] = v[l];
		}
		A P[8], agg = ident;
		for (int w = 0; w < 8; w++) {
			P[w] = agg;
			agg = agg + W[32 * w + 31];
		}
		Agg[j] = agg;
		for (int t = 0; t < 256; t++)
			E[j * 256 + t] = P[t / 32] + (t % 32 ? W[t - 1] : ident);
	}
	for (uint64_t j = 0; j < ntiles; j++) {
		A f = Agg[j];
		for (uint64_t L = 1; ((j + 1) & ((1ull << L) - 1)) == 0; L++)
			f = F[j - (1ull << (L - 1))] + f;
		F[j] = f;
	}
	for (uint64_t j = 0; j < ntiles; j++) {
		A X = ident;
		for (int b = 63; b >= 0; b--)
			if ((j >> b) & 1) {
				uint64_t q = j & ~((2ull << b) - 1);
				if (b == 63)
					q = 0;
				X = X + F[q + (1ull << b) - 1];
			}
		for (int t = 0; t < 256; t++) {
			A Q = X + E[j * 256 + t];
			A rr = ident;
			for (int e = 0; e < 16; e++) {
				uint64_t i = j * TILE + 16 * t + e;
				rr = rr + (i < n ? x[i] : A(0));
				if (i < n)
					out[i] = Q + rr;
			}
		}
	}
}

static void *scan_ws;
static size_t scan_ws_bytes;
static uint32_t scan_epoch;

static void scan_case(int dt, int kind, uint64_t n)
{
	const size_t sz = dt_size[dt];
	std::vector<unsigned char> h(n * sz);
	fill(dt, kind, h.data(), n);
	void *dx = nullptr, *dout = nullptr;
	CU(cudaMalloc(&dx, n * sz));
	CU(cudaMalloc(&dout, n * 8));
	CU(cudaMemcpy(dx, h.data(), n * sz, cudaMemcpyHostToDevice));
	size_t wb = gr_scan_workspace_bytes(n);
	if (wb > scan_ws_bytes) {
		CU(cudaFree(scan_ws));
		CU(cudaMalloc(&scan_ws, wb));
		CU(cudaMemset(scan_ws, 0, wb));
		scan_ws_bytes = wb;
		scan_epoch = 0;
	}
	std::vector<uint64_t> got(n), again(n);
	for (int run = 0; run < 2; run++) {
		CU(cudaMemset(dout, 0xa5, n * 8));
		CU(gr_scan_launch(dt, dx, n, dout, scan_ws, ++scan_epoch, nullptr));
		CU(cudaDeviceSynchronize());
		CU(cudaMemcpy(run ? again.data() : got.data(), dout, n * 8, cudaMemcpyDeviceToHost));
	}
	uint32_t counter;
	CU(cudaMemcpy(&counter, scan_ws, 4, cudaMemcpyDeviceToHost));
	CHECK(counter == 0, "scan %s n=%llu: tile counter left at %u", dt_name[dt],
	      (unsigned long long)n, counter);
	for (uint64_t i = 0; i < n; i++)
		CHECK(got[i] == again[i], "scan %s n=%llu: element %llu differs between runs", dt_name[dt],
		      (unsigned long long)n, (unsigned long long)i);
	if (dt < 4) {
		/* a running sum: wrapping makes every order the same */
		uint64_t s = 0;
		for (uint64_t i = 0; i < n; i++) {
			s += elem_u(dt, h.data(), i);
			CHECK(got[i] == s, "scan %s n=%llu: element %llu: %llx, want %llx", dt_name[dt],
			      (unsigned long long)n, (unsigned long long)i, (unsigned long long)got[i],
			      (unsigned long long)s);
		}
	} else {
		std::vector<double> x(n), want;
		for (uint64_t i = 0; i < n; i++)
			x[i] = elem_d(dt, h.data(), i);
		scan_ref<double>(x, want, -0.0);
		long double run = 0, mag = 0;
		for (uint64_t i = 0; i < n; i++) {
			CHECK(got[i] == d_bits(want[i]),
			      "scan %s n=%llu: element %llu: %.17g, host's order gives %.17g", dt_name[dt],
			      (unsigned long long)n, (unsigned long long)i, bits_d(got[i]), want[i]);
			/* and the order is a prefix sum at all */
			run += x[i];
			mag += fabsl(x[i]);
			long double tol = 80 * 0x1p-52L * mag;
			CHECK(fabsl((long double)bits_d(got[i]) - run) <= tol,
			      "scan %s n=%llu: element %llu: %.17g, far from %.17Lg", dt_name[dt],
			      (unsigned long long)n, (unsigned long long)i, bits_d(got[i]), run);
			if (kind == DATA_SMALL)
				CHECK(bits_d(got[i]) == (double)run, "scan %s n=%llu: element %llu not exact",
				      dt_name[dt], (unsigned long long)n, (unsigned long long)i);
		}
	}
	/* the CPU backend's prefix sums (math/cumsum.c): the same bits */
	{
		std::vector<uint64_t> cpu(n);
		CHECK(gr_cumsum_whole((gr_dtype)dt, h.data(), n, (uint8_t *)cpu.data()) == 0,
		      "gr_cumsum_whole");
		for (uint64_t i = 0; i < n; i++)
			CHECK(cpu[i] == got[i], "scan %s n=%llu: element %llu: GPU %llx, CPU %llx",
			      dt_name[dt], (unsigned long long)n, (unsigned long long)i,
			      (unsigned long long)got[i], (unsigned long long)cpu[i]);
	}
	/* the host's reproduction for integers too, as a check of the order code */
	if (dt < 4 && n <= 100000) {
		std::vector<unsigned long long> x(n), want;
		for (uint64_t i = 0; i < n; i++)
			x[i] = elem_u(dt, h.data(), i);
		scan_ref<unsigned long long>(x, want, 0);
		for (uint64_t i = 0; i < n; i++)
			CHECK(want[i] == got[i], "scan ref %s n=%llu: element %llu", dt_name[dt],
			      (unsigned long long)n, (unsigned long long)i);
	}
	CU(cudaFree(dx));
	CU(cudaFree(dout));
	printf("scan   %s %-5s n = %10llu: ok\n", dt_name[dt],
	       kind == DATA_INT ? "int" : kind == DATA_SMALL ? "small" : "real", (unsigned long long)n);
}

/* Two launches of the same n elements of dtype dt, (in1 -> out1) then
 * (in2 -> out2), give the same outputs; `what` names the second way. */
static void scan_same(int dt, uint64_t n, const void *in1, void *out1, const void *in2, void *out2,
		      const char *what)
{
	CU(gr_scan_launch(dt, in1, n, out1, scan_ws, ++scan_epoch, nullptr));
	CU(gr_scan_launch(dt, in2, n, out2, scan_ws, ++scan_epoch, nullptr));
	std::vector<uint64_t> a(n), b(n);
	CU(cudaMemcpy(a.data(), out1, n * 8, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(b.data(), out2, n * 8, cudaMemcpyDeviceToHost));
	CHECK(a == b, "scan %s n=%llu: %s differs", dt_name[dt], (unsigned long long)n, what);
	printf("scan   %s %s n = %llu: ok\n", dt_name[dt], what, (unsigned long long)n);
}

/* In place: out over in, for the 8-byte dtypes. */
static void scan_in_place(int dt, uint64_t n)
{
	std::vector<unsigned char> h(n * 8);
	fill(dt, DATA_REAL, h.data(), n);
	void *d = nullptr, *o = nullptr;
	CU(cudaMalloc(&d, n * 8));
	CU(cudaMalloc(&o, n * 8));
	CU(cudaMemcpy(d, h.data(), n * 8, cudaMemcpyHostToDevice));
	scan_same(dt, n, d, o, d, d, "in place");
	CU(cudaFree(d));
	CU(cudaFree(o));
}

/* Input and output off 16-byte alignment (the launcher then moves tiles
 * element by element, not in 16-byte vectors): the same bits. */
static void scan_misaligned(int dt, uint64_t n)
{
	const size_t es = dt_size[dt];
	std::vector<unsigned char> h(n * es);
	fill(dt, dt < 4 ? DATA_INT : DATA_REAL, h.data(), n);
	unsigned char *d = nullptr, *d2 = nullptr, *o = nullptr;
	CU(cudaMalloc(&d, n * es));
	CU(cudaMalloc(&d2, n * es + 16));
	CU(cudaMalloc(&o, n * 16 + 32));
	unsigned char *o2 = o + ((n * 8 + 15) & ~(size_t)15) + 8;
	CU(cudaMemcpy(d, h.data(), n * es, cudaMemcpyHostToDevice));
	CU(cudaMemcpy(d2 + es, h.data(), n * es, cudaMemcpyHostToDevice));
	scan_same(dt, n, d, o, d2 + es, o2, "misaligned");
	CU(cudaFree(d));
	CU(cudaFree(d2));
	CU(cudaFree(o));
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no GPU: skipped\n");
		return 77;
	}
	for (int dt = 0; dt < 6; dt++) {
		if (dt < 4) {
			segsum_all(dt, DATA_INT, quick);
		} else {
			segsum_all(dt, DATA_SMALL, quick);
			segsum_all(dt, DATA_REAL, quick);
		}
	}
	std::vector<uint64_t> sizes = { 1, 2, 31, 255, 4095, 4096, 4097, 8191, 12289, 65537 };
	if (!quick) {
		sizes.push_back(1000003);
		sizes.push_back((1u << 20) + 3);
		sizes.push_back((1u << 24) + 12345);
	}
	for (int dt = 0; dt < 6; dt++)
		for (uint64_t n : sizes) {
			if (n > (1u << 21) && dt != 0 && dt != 4)
				continue;
			if (dt < 4) {
				scan_case(dt, DATA_INT, n);
			} else {
				scan_case(dt, DATA_REAL, n);
				if (n < (1u << 21))
					scan_case(dt, DATA_SMALL, n);
			}
		}
	scan_in_place(5, quick ? 10000 : 1000003);
	scan_in_place(1, quick ? 10000 : 1000003);
	for (int dt = 0; dt < 6; dt++)
		scan_misaligned(dt, quick ? 10007 : 1000003);
	CU(cudaFree(seg_ws));
	CU(cudaFree(scan_ws));
	printf("all ok\n");
	return 0;
}
