/*
 * The moments kernels (cuda/moments.h) and their partial
 * (cuda/exact-partial.c) against the CPU backend's moments
 * (math/reduce.c and moments.c, built in), every dtype. f32 and f64:
 * sizes from 1 to past 2^24, data that breaks naive means and variances
 * (a large offset plus noise, magnitudes over the whole exponent range,
 * subnormals, zeros of both signs, every element -0, values near the
 * overflow threshold, a variance that overflows, all equal, pairs that
 * cancel to an exact 0, no element above -0, exponents over as wide a
 * range as the wide paths take squares, and over 60 binades, past the
 * fast paths' windows), infinities of one sign and both, NaNs; in
 * production's form, in registers, and (f32) without the squares'
 * groups. Integers: full-range random values, each
 * dtype's extremes, small values, all equal to the largest, all zero.
 * Every start in a 16-byte vector (the head and tail path), grids of one
 * block, 7 and every multiprocessor. sum, min, max, mean and var (ddof 0
 * and 1) must have the CPU's bits (any NaN for a NaN), and the scratch
 * must be left zero. --quick keeps to small sizes (for compute-sanitizer).
 * Exits 77 when there is no GPU.
 */
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/moments.cuh"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "cuda/exact-partial.h"
#include "math/reduce.h"
}

/* a normal deviate, roughly (the sum of four uniforms, centred) */
static double gauss(void)
{
	double s = 0;
	for (int k = 0; k < 4; k++)
		s += (double)(rnd() >> 11) / 9007199254740992.0;
	return (s - 2.0) * 1.7;
}

enum { RANDOM, OFFSET, MIXED, SUBNORMAL, ZEROS, NEGZERO, NEAR_MAX, OVERFLOW_VAR, EQUAL,
       INF, BOTH_INF, NAN_ONE, CANCEL, NEGATIVE, SPREAD, BINADES60, NKINDS };
static const char *kind_name[] = { "random", "offset", "mixed", "subnormal", "zeros",
				   "negzero", "near-max", "overflow-var", "equal", "inf",
				   "both-inf", "nan", "cancel", "negative", "spread",
				   "60-binades" };

/* n elements of f32 (f32 true) or f64 of kind into h */
static void fill(bool f32, int kind, std::vector<unsigned char> &h, size_t n)
{
	h.assign(n * (f32 ? 4 : 8), 0);
	const double big = f32 ? 1e7 : 1e15, mx = f32 ? FLT_MAX : DBL_MAX;
	const double tiny = f32 ? 0x1p-149 : 0x1p-1074;
	const int lim = f32 ? 37 : 300;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd();
		double x;
		switch (kind) {
		case RANDOM: x = gauss() * 1000; break;
		case OFFSET: x = big + gauss(); break;
		case MIXED: x = gauss() * pow(10.0, (double)((int)(r % (2 * lim)) - lim)); break;
		case SUBNORMAL: x = (double)((int)(r % 2000) - 1000) * tiny; break;
		case ZEROS: x = r % 3 ? 0.0 : -0.0; break;
		case NEGZERO: x = -0.0; break;
		case NEAR_MAX: x = mx * (0.5 + 0.5 * (double)(r >> 11) / 9007199254740992.0); break;
		case OVERFLOW_VAR: x = r & 1 ? mx : -mx; break;
		case EQUAL: x = 0.1; break;
		/* no positive element, -0s among them: a zero maximum is -0 */
		case NEGATIVE: x = r % 5 ? -fabs(gauss()) : -0.0; break;
		/* as wide as the wide paths take squares (exact-wide.cuh):
		 * the exponent groups and counters, the sum's and the squares' */
		case SPREAD: x = ldexp(gauss(), f32 ? (int)(r % 112) - 50 : (int)(r % 880) - 390); break;
		/* past the fast paths' windows, within the sum's middle tier
		 * (f32: moments.cuh's both_wide) */
		case BINADES60: x = ldexp(gauss(), (int)(r % 60) - 30); break;
		default: x = gauss(); break;
		}
		if (f32) {
			float f = (float)x;
			memcpy(&h[i * 4], &f, 4);
		} else {
			memcpy(&h[i * 8], &x, 8);
		}
	}
	/* the specials, each at a random place */
	auto put = [&](size_t i, double x) {
		if (f32) {
			float f = (float)x;
			memcpy(&h[i * 4], &f, 4);
		} else {
			memcpy(&h[i * 8], &x, 8);
		}
	};
	if (kind == INF || kind == BOTH_INF)
		put(rnd() % n, INFINITY);
	if (kind == BOTH_INF)
		put(rnd() % n, -INFINITY);
	if (kind == NAN_ONE)
		put(rnd() % n, rnd() & 1 ? NAN : -NAN);
	/* x at i and -x at m - 1 - i, -0 between and after: an exact sum of
	 * +0 over the first m = n - 3 (what a case with no spare elements in
	 * front reads), the positive elements in other lanes than some
	 * negative ones */
	if (kind == CANCEL) {
		const size_t m = n - 3;
		for (size_t i = m / 2; i < n; i++)
			put(i, -0.0);
		for (size_t i = 0; i < m / 2; i++) {
			double x = ldexp(gauss(), (int)(rnd() % 40) - 20);
			put(i, rnd() & 1 ? x : -x);
			float f;
			double y;
			if (f32)
				memcpy(&f, &h[i * 4], 4), y = f;
			else
				memcpy(&y, &h[i * 8], 8);
			put(m - 1 - i, -y);
		}
	}
}

static bool same(const gr_value &a, const gr_value &b)
{
	if (a.kind == GR_KIND_F64 && std::isnan(a.f))
		return std::isnan(b.f);
	return a.u == b.u;
}

static bool same_f(double a, double b)
{
	if (std::isnan(a))
		return std::isnan(b);
	return memcmp(&a, &b, 8) == 0;
}

/* The GPU's partial gp against the CPU's cp, of n elements of dt: every
 * field of moments' result, ddof 0 and 1; what names the case. */
static void compare(const gr_partial &gp, const gr_partial &cp, gr_dtype dt, uint64_t n,
		    const char *what)
{
	for (uint64_t ddof = 0; ddof < 2 && ddof < n; ddof++) {
		gr_moments g, c;
		gr_err eg = gr_moments_finish(dt, &gp, ddof, &g);
		gr_err ec = gr_moments_finish(dt, &cp, ddof, &c);
		CHECK(eg == GR_OK && ec == GR_OK, "%s: finish failed %d %d", what, (int)eg, (int)ec);
		CHECK(g.count == c.count && same(g.sum, c.sum) && same(g.min, c.min) &&
			      same(g.max, c.max) && same_f(g.mean, c.mean) && same_f(g.var, c.var),
		      "%s ddof=%llu: GPU sum %016llx min %016llx max %016llx mean %a var %a; "
		      "CPU %016llx %016llx %016llx %a %a",
		      what, (unsigned long long)ddof, (unsigned long long)g.sum.u,
		      (unsigned long long)g.min.u, (unsigned long long)g.max.u, g.mean, g.var,
		      (unsigned long long)c.sum.u, (unsigned long long)c.min.u,
		      (unsigned long long)c.max.u, c.mean, c.var);
	}
}

/* Each case's array has three spare elements in front: started at
 * element skip, it has n of them when skip is 0 (the spares left out
 * too), else n + 3 - skip, so that every start in a 16-byte vector is
 * tried. */
static size_t elements_from(size_t n, size_t skip)
{
	return skip ? n + 3 - skip : n;
}

static gr_moments_scratch *scratch;
static gr_moments_sums *dout;

/* The kernel's forms: production (through shared memory, bulk.cuh), the
 * one that loads into registers, and (f32) production's without the
 * squares' groups (moments.cuh's WQ: the careful path behind the fast
 * ones, the groups' reference) */
enum { PROD, REGS, NO_GROUPS };
static const char *form_name[] = { "", " in registers", " without groups" };

/* one launch on grid blocks (0: the launcher's choice for sms) against the
 * CPU, in form */
static void one(bool f32, int kind, size_t n, const unsigned char *h, const void *d, int sms,
		unsigned blocks, int form = PROD)
{
	const gr_dtype dt = f32 ? GR_DT_F32 : GR_DT_F64;
	const bool regs = form == REGS;
	if (f32 && form == NO_GROUPS)
		CU((grm::launch<float, grm::PROD_MINB, grm::PROD_BULK, false>(d, n, scratch, dout,
									       sms, nullptr, blocks)));
	else if (f32 && regs)
		CU((grm::launch<float, 2, false>(d, n, scratch, dout, sms, nullptr, blocks)));
	else if (f32)
		CU(grm::launch<float>(d, n, scratch, dout, sms, nullptr, blocks));
	else if (regs)
		CU((grm::launch<double, 2, false>(d, n, scratch, dout, sms, nullptr, blocks)));
	else
		CU(grm::launch<double>(d, n, scratch, dout, sms, nullptr, blocks));
	gr_moments_sums got;
	CU(cudaMemcpy(&got, dout, sizeof(got), cudaMemcpyDeviceToHost));
	gr_partial gp, cp;
	cuda_moments_partial(&got, dt, n, &gp);
	gr_reduce(GR_OP_MOMENTS, dt, h, n, &cp);
	char what[96];
	snprintf(what, sizeof(what), "%s %s n=%zu sms=%d blocks=%u%s", f32 ? "f32" : "f64",
		 kind_name[kind], n, sms, blocks, form_name[form]);
	compare(gp, cp, dt, n, what);
}

/* ---- integers ---- */

enum { IRANDOM, IEXTREMES, ISMALL, IEQUAL, IZEROS, NIKINDS };
static const char *ikind_name[] = { "random", "extremes", "small", "equal", "zeros" };
static const char *idt_name[] = { "i32", "i64", "u32", "u64" };

static void fill_int(int dt, int kind, std::vector<unsigned char> &h, size_t n)
{
	const size_t size = dt == 0 || dt == 2 ? 4 : 8;
	const bool sgn = dt < 2;
	const uint64_t umax = size == 4 ? (sgn ? 0x7fffffffull : 0xffffffffull)
					: (sgn ? 0x7fffffffffffffffull : ~0ull);
	const uint64_t umin = sgn ? (size == 4 ? (uint64_t)(int64_t)INT32_MIN : 1ull << 63) : 0;
	h.assign(n * size, 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd(), x;
		switch (kind) {
		case IRANDOM: x = r; break;
		case IEXTREMES: x = r & 1 ? umax : umin; break;
		case ISMALL: x = (uint64_t)(int64_t)((int)(r % 7) - (sgn ? 3 : 0)); break;
		case IEQUAL: x = umax; break;
		default: x = 0; break;
		}
		memcpy(&h[i * size], &x, size); /* little-endian: the low bytes */
	}
}

template <typename T>
static void one_int(int dt, int kind, size_t n, const unsigned char *h, const void *d, int sms,
		    unsigned blocks)
{
	if (blocks)
		CU(grm::launch_int<T>(d, n, scratch, dout, sms, nullptr, blocks));
	else
		CU(gr_moments_launch(dt, d, n, scratch, dout, sms, nullptr));
	gr_moments_sums got;
	CU(cudaMemcpy(&got, dout, sizeof(got), cudaMemcpyDeviceToHost));
	gr_partial gp, cp;
	cuda_moments_partial(&got, (gr_dtype)dt, n, &gp);
	gr_reduce(GR_OP_MOMENTS, (gr_dtype)dt, h, n, &cp);
	char what[96];
	snprintf(what, sizeof(what), "%s %s n=%zu blocks=%u", idt_name[dt], ikind_name[kind], n,
		 blocks);
	compare(gp, cp, (gr_dtype)dt, n, what);
}

static void ints(const std::vector<size_t> &sizes, int sms)
{
	std::vector<unsigned char> h;
	for (int dt = 0; dt < 4; dt++)
		for (int kind = 0; kind < NIKINDS; kind++) {
			const size_t size = dt == 0 || dt == 2 ? 4 : 8;
			for (size_t n : sizes) {
				if (n > (1u << 21) && kind != IRANDOM)
					continue;
				fill_int(dt, kind, h, n + 3);
				unsigned char *d = to_device(h.data(), h.size());
				for (size_t skip = 0; skip < 16 / size; skip++) {
					size_t m = elements_from(n, skip);
					const unsigned char *hp = h.data() + skip * size;
					for (unsigned blocks : { 0u, 1u, 7u }) {
						if (skip && blocks)
							continue;
						switch (dt) {
						case 0: one_int<int32_t>(dt, kind, m, hp, d + skip * size, sms, blocks); break;
						case 1: one_int<int64_t>(dt, kind, m, hp, d + skip * size, sms, blocks); break;
						case 2: one_int<uint32_t>(dt, kind, m, hp, d + skip * size, sms, blocks); break;
						case 3: one_int<uint64_t>(dt, kind, m, hp, d + skip * size, sms, blocks); break;
						}
					}
				}
				CU(cudaFree(d));
			}
			printf("moments %s %-12s ok so far (%lu checks)\n", idt_name[dt], ikind_name[kind],
			       checks);
		}
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int sms = gpu_sms();
	CU(cudaMalloc((void **)&scratch, sizeof(*scratch)));
	CU(cudaMemset(scratch, 0, sizeof(*scratch)));
	CU(cudaMalloc((void **)&dout, sizeof(*dout)));
	std::vector<size_t> sizes = { 1, 2, 3, 5, 33, 1000, 4097, 65537 };
	if (!quick) {
		sizes.push_back((1u << 20) + 3);
		sizes.push_back((1u << 24) + 5);
	}
	std::vector<unsigned char> h;
	for (int f32 = 1; f32 >= 0; f32--)
		for (int kind = 0; kind < NKINDS; kind++) {
			const size_t size = f32 ? 4 : 8;
			for (size_t n : sizes) {
				if (n > (1u << 21) && kind != RANDOM && kind != MIXED)
					continue;
				/* three spare elements in front: every start in a vector */
				fill(f32, kind, h, n + 3);
				unsigned char *d = to_device(h.data(), h.size());
				for (size_t skip = 0; skip < 16 / size; skip++) {
					size_t m = elements_from(n, skip);
					const unsigned char *hp = h.data() + skip * size;
					for (int form = PROD; form <= (f32 ? NO_GROUPS : REGS); form++) {
						one(f32, kind, m, hp, d + skip * size, sms, 0, form);
						if (skip == 0) {
							one(f32, kind, m, hp, d, sms, 1, form);
							one(f32, kind, m, hp, d, 7, 7, form);
						}
					}
				}
				CU(cudaFree(d));
			}
			printf("moments %s %-12s ok so far (%lu checks)\n", f32 ? "f32" : "f64",
			       kind_name[kind], checks);
		}
	ints(sizes, sms);
	/* the scratch is left zero for the next launch */
	gr_moments_scratch s;
	CU(cudaMemcpy(&s, scratch, sizeof(s), cudaMemcpyDeviceToHost));
	static const gr_moments_scratch zero = {};
	CHECK(memcmp(&s, &zero, sizeof(s)) == 0, "scratch not left zero");
	/* and what the launcher refuses */
	CHECK(gr_moments_launch(GR_EXACT_F32, dout, 0, scratch, dout, sms, nullptr) ==
		      (int)cudaErrorInvalidValue, "n == 0 launched");
	CHECK(gr_moments_launch(GR_EXACT_F64, (const char *)dout + 4, 1, scratch, dout, sms,
				nullptr) == (int)cudaErrorInvalidValue, "misaligned f64 launched");
	CHECK(gr_moments_launch(6, dout, 1, scratch, dout, sms, nullptr) ==
		      (int)cudaErrorInvalidValue, "an unknown dtype launched");
	CHECK(gr_moments_launch(1, (const char *)dout + 4, 1, scratch, dout, sms, nullptr) ==
		      (int)cudaErrorInvalidValue, "misaligned i64 launched");
	CU(cudaFree(scratch));
	CU(cudaFree(dout));
	if (failures) {
		printf("moments: %lu of %lu checks failed\n", failures, checks);
		return 1;
	}
	printf("moments: %lu checks passed\n", checks);
	return 0;
}
