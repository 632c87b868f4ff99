/*
 * The exact sums' wide path (cuda/exact-wide.cuh) against the CPU's
 * gr_reduce, bit for bit, for f32 and f64 sums and sums of squares,
 * on arrays of every exponent mix: uniform,
 * exponents over 60 binades, every finite exponent, a few huge among many
 * tiny, signs that cancel to zero, subnormals among normals, values near
 * the top of the range whose sum overflows and whose sum does not, f32
 * elements that keep one exponent group's double at its most, and
 * infinities and NaNs among spread data; odd sizes from 1 to 2^24 + 7 at
 * every start. Each array goes through the production launcher and
 * through the large-array kernel in each of its forms, forced whatever
 * the size: the wide path with and without its middle tier, the careful
 * path it stands in front of (the reference form), loading into
 * registers, grids of one and three blocks (so that a warp flushes its
 * exponent groups and counters on the way), the warp's 64-bit digits
 * in place of its counters, and f64's bins taking what the middle tier
 * holds however little of the batch that is.
 *
 *   test-exact-wide [--quick]   (--quick: sizes up to 70000)
 *
 * Exits 77 when there is no GPU.
 */
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/exact.cuh"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "math/reduce.h"
}

static double unit(void)
{
	return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
}

/* A random finite element of every exponent (f32 or f64 bits, as a
 * double) */
static double any_exponent(bool f32)
{
	uint64_t r = rnd();
	if (f32) {
		uint32_t b = ((uint32_t)r & 0x807fffffu) | (uint32_t)((r >> 32) % 255) << 23;
		float f;
		memcpy(&f, &b, 4);
		return f;
	}
	uint64_t b = (r & 0x800fffffffffffffull) | ((r >> 20) % 2047) << 52;
	double d;
	memcpy(&d, &b, 8);
	return d;
}

static const char *kind_name[] = {
	"uniform",         "60 binades",      "every exponent", "few huge among tiny",
	"cancel to 0",     "subnormals",      "overflowing",    "near max, no overflow",
	"one group full",  "specials spread", "huge cancel",    "squares' whole range",
};
enum { NKINDS = 12 };

/* Data of a kind, n elements, as the dtype holds them (f32: floats) */
static std::vector<double> make(bool f32, int kind, size_t n)
{
	const double MAX = f32 ? FLT_MAX : DBL_MAX;
	const int HUGE_E = f32 ? 100 : 900;
	std::vector<double> x(n);
	for (size_t i = 0; i < n; i++) {
		double u = 2 * unit() - 1;
		switch (kind) {
		case 0: x[i] = u; break;
		case 1: x[i] = ldexp(u, (int)(rnd() % 60) - 30); break;
		case 2: x[i] = any_exponent(f32); break;
		case 3: x[i] = rnd() % 5000 == 0 ? ldexp(u, HUGE_E) : ldexp(u, -HUGE_E); break;
		case 4:
			/* the second half the first's negatives, backwards */
			x[i] = i < n / 2 ? any_exponent(f32) : -x[n - 1 - i];
			if (n % 2 && i == n / 2)
				x[i] = ldexp(1, -20);
			break;
		case 5: {
			uint64_t r = rnd();
			if (r % 2)
				x[i] = ldexp(u, f32 ? -149 + 23 : -1074 + 52); /* subnormal */
			else
				x[i] = ldexp(u, f32 ? -100 - (int)(r % 26) : -1000 - (int)(r % 22));
			break;
		}
		case 6: x[i] = MAX * (0.5 + unit() / 2) * (rnd() & 1 ? -1 : 1); break;
		case 7:
			/* pairs whose sum is a few last places of MAX: sums near max
			 * on the way, a modest total */
			if (i % 2 == 0)
				x[i] = MAX * (0.5 + unit() / 2);
			else
				x[i] = -(x[i - 1] - ldexp(unit(), f32 ? 100 : 960));
			break;
		case 8:
			/* large f32 of one sign with a subnormal in every batch:
			 * the exponent group of the large ones takes the most */
			x[i] = i % 700 == 0 ? 1e-40 : MAX * (0.75 + unit() / 4);
			break;
		case 9:
			x[i] = any_exponent(f32);
			if (rnd() % 40000 == 0)
				x[i] = rnd() % 3 == 0 ? NAN : rnd() % 2 ? INFINITY : -INFINITY;
			break;
		case 11:
			/* as wide as a square's p + e stays exact (exact-wide.cuh:
			 * SQ_KEY_*, SQD_KEY_*), with a few zeros */
			x[i] = rnd() % 97 == 0 ? 0
			       : f32       ? ldexp(u, (int)(rnd() % 112) - 50)
					   : ldexp(u, (int)(rnd() % 880) - 390);
			break;
		case 10:
			/* one huge element and its negative far apart, among
			 * spread data */
			x[i] = ldexp(u, (int)(rnd() % 200) - 100);
			if (i == n / 3)
				x[i] = MAX;
			if (i == n - 1 && n > 1)
				x[i] = -MAX;
			break;
		}
		if (f32)
			x[i] = (double)(float)x[i];
	}
	return x;
}

/* The CPU's exact sum of the array (of its squares: sq), in the dtype
 * (gr_reduce) */
static double cpu_sum(bool f32, bool sq, const std::vector<double> &x)
{
	gr_partial p;
	gr_value v;
	if (f32) {
		const gr_op op = sq ? GR_OP_SUMSQ : GR_OP_SUM;
		std::vector<float> f(x.begin(), x.end());
		gr_reduce(op, GR_DT_F32, f.data(), f.size(), &p);
		gr_partial_finish(op, GR_DT_F32, &p, &v);
	} else {
		const gr_op op = sq ? GR_OP_SUMSQ : GR_OP_SUM;
		gr_reduce(op, GR_DT_F64, x.data(), x.size(), &p);
		gr_partial_finish(op, GR_DT_F64, &p, &v);
	}
	return v.f;
}

struct gpu {
	int sms;
	gr_exact_scratch *scratch;
	gr_exact_sum *out;
};

static const char *form_name[] = { "production",   "wide+mid",      "wide",
				   "careful",      "wide regs",     "wide 1 block",
				   "wide 3 blocks", "wide match",   "wide each" };
enum { NFORMS = 9 };

/* One launch of form f over n elements of T (float, double, or gre::sqf
 * and gre::sqd: their squares) at p */
template <typename T>
static void launch(const gpu &G, int f, const unsigned char *p, uint64_t n)
{
	using namespace gre;
	constexpr bool SQ = std::is_same<T, sqf>::value, SQD = std::is_same<T, sqd>::value;
	constexpr int FB = SQ ? SQ_FB : SQD ? SQD_FB : PROD_FB;
	const unsigned b = grid_blocks<T>(n, G.sms, PROD_MINB);
	switch (f) {
	case 0:
		CU((cudaError_t)gr_exact_launch_single(SQ		    ? GR_EXACT_F32_SQUARES
							: SQD		    ? GR_EXACT_F64_SQUARES
							: sizeof(T) == 4 ? GR_EXACT_F32
									 : GR_EXACT_F64,
						       p, n, G.scratch, G.out, G.sms, 0));
		break;
	case 1:
		CU((launch_single<T, PROD_MINB, PROD_BULK, FB, PROD_ONT, WIDE_MID>(
			p, n, G.scratch, G.out, G.sms, 0, b)));
		break;
	case 2:
		CU((launch_single<T, PROD_MINB, PROD_BULK, FB, PROD_ONT, WIDE>(p, n, G.scratch, G.out,
									       G.sms, 0, b)));
		break;
	case 3:
		CU((launch_single<T, PROD_MINB, PROD_BULK, FB, PROD_ONT, CAREFUL>(
			p, n, G.scratch, G.out, G.sms, 0, b)));
		break;
	case 4:
		CU((launch_single<T, PROD_MINB, false, FB, PROD_ONT, WIDE_MID>(p, n, G.scratch, G.out,
									       G.sms, 0, b)));
		break;
	case 7:
		CU((launch_single<T, PROD_MINB, PROD_BULK, FB, PROD_ONT, WIDE_MATCH>(
			p, n, G.scratch, G.out, G.sms, 0, b)));
		break;
	case 8:
		CU((launch_single<T, PROD_MINB, PROD_BULK, FB, PROD_ONT, WIDE_EACH>(
			p, n, G.scratch, G.out, G.sms, 0, b)));
		break;
	default:
		CU((launch_single<T, PROD_MINB, PROD_BULK, FB, PROD_ONT, WIDE_MID>(
			p, n, G.scratch, G.out, G.sms, 0, f == 5 ? 1u : 3u)));
		break;
	}
}

/* x (as the dtype holds it) at element offset off through every form,
 * against want */
static void check(const gpu &G, bool f32, bool sq, int kind, const std::vector<double> &x,
		  unsigned off, double want, bool all_forms)
{
	const size_t sz = f32 ? 4 : 8, n = x.size(), bytes = (n + off) * sz;
	std::vector<unsigned char> h(bytes ? bytes : 1);
	for (size_t i = 0; i < n; i++) {
		if (f32) {
			float f = (float)x[i];
			memcpy(&h[(off + i) * 4], &f, 4);
		} else {
			memcpy(&h[(off + i) * 8], &x[i], 8);
		}
	}
	unsigned char *d;
	CU(cudaMalloc(&d, bytes ? bytes : 1));
	CU(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
	for (int f = 0; f < NFORMS; f++) {
		if (!all_forms && f != 0 && f != 1 && f != 3)
			continue;
		CU(cudaMemset(G.out, 0x5a, sizeof(gr_exact_sum)));
		if (sq && f32)
			launch<gre::sqf>(G, f, d + off * sz, n);
		else if (sq)
			launch<gre::sqd>(G, f, d + off * sz, n);
		else if (f32)
			launch<float>(G, f, d + off * sz, n);
		else
			launch<double>(G, f, d + off * sz, n);
		gr_exact_sum s;
		CU(cudaMemcpy(&s, G.out, sizeof(s), cudaMemcpyDeviceToHost));
		const double got = gr_exact_fold(&s, n);
		const bool same = (std::isnan(got) && std::isnan(want)) || memcmp(&got, &want, 8) == 0;
		checks++;
		if (!same && failures++ < 30)
			fprintf(stderr, "%s %s n=%zu off=%u, %s: got %a want %a\n",
				sq ? (f32 ? "f32 squares" : "f64 squares") : f32 ? "f32" : "f64",
				kind_name[kind], n, off,
				form_name[f], got, want);
	}
	CU(cudaFree(d));
}

int main(int argc, char **argv)
{
	const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	gpu G;
	G.sms = gpu_sms();
	CU(cudaMalloc(&G.scratch, sizeof(gr_exact_scratch)));
	CU(cudaMemset(G.scratch, 0, sizeof(gr_exact_scratch)));
	CU(cudaMalloc(&G.out, sizeof(gr_exact_sum)));

	const size_t sizes[] = { 1,     2,     3,     7,     33,    1000,  4097,
				 65537, 70001, (1u << 20) + 3, (3u << 20) + 1, (1u << 24) + 7 };
	/* f32, f64, the squares of f32, the squares of f64 */
	for (int dt = 0; dt < 4; dt++) {
		const bool f32 = dt == 0 || dt == 2, sq = dt >= 2;
		for (size_t n : sizes) {
			if (quick && n > 70001)
				continue;
			for (int kind = 0; kind < NKINDS; kind++) {
				if (kind == 8 && !f32)
					continue;
				std::vector<double> x = make(f32, kind, n);
				const double want = cpu_sum(f32, sq, x);
				/* every start at the small sizes; one, every form,
				 * from a million up */
				const bool big = n > 70001;
				for (unsigned off = 0; off < (big ? 1u : 4u); off++)
					if (f32 || off % 2 == 0)
						check(G, f32, sq, kind, x, f32 ? off : off / 2, want,
						      big || off == 0);
			}
		}
		printf("%s: %lu checks, %lu failed\n",
		       sq ? (f32 ? "f32 squares" : "f64 squares") : f32 ? "f32" : "f64", checks,
		       failures);
	}

	gr_exact_scratch z;
	CU(cudaMemcpy(&z, G.scratch, sizeof(z), cudaMemcpyDeviceToHost));
	bool zero = z.flags == 0 && z.ticket == 0;
	for (int i = 0; i < GR_EXACT_DIGITS; i++)
		zero = zero && z.acc[i] == 0;
	if (!zero) {
		fprintf(stderr, "the scratch was left non-zero\n");
		failures++;
	}
	CU(cudaFree(G.scratch));
	CU(cudaFree(G.out));
	printf("exact wide: %lu checks, %lu failed\n", checks, failures);
	return failures ? 1 : 0;
}
