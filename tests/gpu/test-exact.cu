/*
 * The exact-sum kernel against exact host references, bit for bit: the
 * CPU's exact accumulator (gr_partial_combine of one-element partials,
 * math/reduce.c) for every adversarial array and up to a million
 * elements, and past that a host integer accumulator rounded through the
 * same gr_partial; typical and wide-exponent random data at odd sizes and
 * starts, catastrophic cancellation, running sums past DBL_MAX,
 * subnormals, ties, infinities, NaN and signed zeros; grids of one block
 * and of more blocks than the data has batches; the one-batch kernel at
 * each of its group sizes, in one block and in many; the kernel's other
 * forms; the batched form over mixed segments; the scratch left zero.
 * The sums of squares of f64 against the CPU's gr_reduce (which must agree with a
 * host integer accumulator of the squares): squares from 2^-2148 to past
 * DBL_MAX, ties decided by the low half of a square or by a square far
 * below 2^-1074, and the scaling edges of the kernel's careful path.
 *
 *   test-exact [--quick]   (--quick: sizes up to 70000, for the sanitizer)
 *
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

#include "cuda/exact.cuh"
extern "C" {
#include "math/reduce.h"
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
		cudaError_t e_ = (call);                                                 \
		CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));       \
	} while (0)

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}
static double unit(void)
{
	return (double)(rng() >> 11) * (1.0 / 9007199254740992.0);
}

static bool all_negzero(const double *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(x[i] == 0 && std::signbit(x[i])))
			return false;
	return true;
}

/* The contract's rounding of an exact zero. */
static double zero_rule(double v, const double *x, size_t n)
{
	if (v == 0)
		return n > 0 && all_negzero(x, n) ? -0.0 : 0.0;
	return v;
}

/* Reference 1: the CPU's exact accumulator, element by element. */
static double ref_partial(const double *x, size_t n)
{
	gr_partial acc, p;
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &acc);
	for (size_t i = 0; i < n; i++) {
		memset(&p, 0, sizeof(p)); /* filled by hand: the value is v.f */
		p.count = 1;
		p.v.f = x[i];
		gr_partial_combine(GR_OP_SUM, GR_DT_F64, &acc, &p);
	}
	gr_value v;
	gr_partial_finish(GR_OP_SUM, GR_DT_F64, &acc, &v);
	return zero_rule(v.f, x, n);
}

/*
 * Reference 2, for large typical arrays: finite elements into 32-bit
 * places of int64 counters (exact while n < 2^30), the counters then as
 * doubles into the CPU's exact accumulator (their places must be doubles:
 * true for sums below 2^900).
 */
static double ref_digits(const double *x, size_t n)
{
	int64_t d[GR_EXACT_DIGITS + 2] = { 0 };
	for (size_t i = 0; i < n; i++) {
		uint64_t b;
		memcpy(&b, &x[i], 8);
		unsigned e = (unsigned)(b >> 52) & 0x7ff;
		CHECK(e != 0x7ff, "ref_digits takes finite data");
		uint64_t m = b & ((1ull << 52) - 1);
		if (e)
			m |= 1ull << 52;
		unsigned sh = e ? e - 1 : 0, w = sh / 32, s = sh % 32;
		unsigned __int128 v = (unsigned __int128)m << s;
		for (unsigned k = 0; k < 3; k++) {
			int64_t piece = (int64_t)(uint64_t)((v >> (32 * k)) & 0xffffffffu);
			d[w + k] += b >> 63 ? -piece : piece;
		}
	}
	gr_partial acc, p;
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &acc);
	for (int i = 0; i < GR_EXACT_DIGITS + 2; i++) {
		if (!d[i])
			continue;
		CHECK(32 * i - 1074 + 64 < 1000, "ref_digits: a sum too large for it");
		double parts[2] = { ldexp((double)(d[i] & 0xffffffffll), 32 * i - 1074),
				    ldexp((double)(d[i] >> 32), 32 * i + 32 - 1074) };
		for (double f : parts) {
			memset(&p, 0, sizeof(p)); /* filled by hand: the value is v.f */
			p.count = 1;
			p.v.f = f;
			gr_partial_combine(GR_OP_SUM, GR_DT_F64, &acc, &p);
		}
	}
	gr_value v;
	gr_partial_finish(GR_OP_SUM, GR_DT_F64, &acc, &v);
	return zero_rule(v.f, x, n);
}

struct gpu {
	int sms;
	gr_exact_scratch *scratch;
	gr_exact_sum *out;
};

/* The elements of dtype dt are doubles (f64, and f64 whose squares are
 * summed), or floats */
static bool is_f64(int dt)
{
	return dt == GR_EXACT_F64 || dt == GR_EXACT_F64_SQUARES;
}

/* The kernel's sum of x[0..n) as dtype dt (4 f32, 5 f64, 6 and 7 the
 * squares of f32 and f64: GR_EXACT_F32, _F64, _F32_SQUARES,
 * _F64_SQUARES), the data
 * starting `off` elements into an allocation of exactly its size; blocks
 * 0 is the launcher's grid. */
static double gpu_sum(const gpu &G, int dt, const double *x, size_t n, unsigned off,
		      unsigned blocks = 0, int form = 0)
{
	size_t sz = is_f64(dt) ? 8 : 4, bytes = (n + off) * sz;
	std::vector<unsigned char> h(bytes ? bytes : 1);
	for (size_t i = 0; i < n; i++) {
		if (!is_f64(dt)) {
			float f = (float)x[i];
			memcpy(&h[(off + i) * 4], &f, 4);
		} else {
			memcpy(&h[(off + i) * 8], &x[i], 8);
		}
	}
	unsigned char *d;
	CU(cudaMalloc(&d, bytes ? bytes : 1));
	CU(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
	CU(cudaMemset(G.out, 0x5a, sizeof(gr_exact_sum)));
	if (form) {
		/* the kernel's other forms: loads into registers (no
		 * BULK), three blocks per SM, three bins in the fast path */
		const unsigned char *p = d + off * sz;
		if (dt == 4 && form == 1)
			CU((gre::launch_single<float, 2, false>(p, n, G.scratch, G.out, G.sms, 0)));
		else if (dt == 4 && form == 2)
			CU((gre::launch_single<float, 3, false>(p, n, G.scratch, G.out, G.sms, 0)));
		else if (dt == 4)
			CU((gre::launch_single<float, 2, false, 3>(p, n, G.scratch, G.out, G.sms, 0)));
		else if (form == 1)
			CU((gre::launch_single<double, 2, false>(p, n, G.scratch, G.out, G.sms, 0)));
		else if (form == 2)
			CU((gre::launch_single<double, 3, false>(p, n, G.scratch, G.out, G.sms, 0)));
		else
			CU((gre::launch_single<double, 2, false, 3>(p, n, G.scratch, G.out, G.sms, 0)));
	} else if (blocks) {
		if (dt == 4)
			CU(gre::launch_single<float>(d + off * sz, n, G.scratch, G.out, G.sms, 0, blocks));
		else if (dt == 6)
			CU((gre::launch_single<gre::sqf, gre::PROD_MINB, gre::PROD_BULK, gre::SQ_FB>(
				d + off * sz, n, G.scratch, G.out, G.sms, 0, blocks)));
		else if (dt == 7)
			CU((gre::launch_single<gre::sqd, gre::PROD_MINB, gre::PROD_BULK, gre::SQD_FB>(
				d + off * sz, n, G.scratch, G.out, G.sms, 0, blocks)));
		else
			CU(gre::launch_single<double>(d + off * sz, n, G.scratch, G.out, G.sms, 0, blocks));
	} else {
		CU((cudaError_t)gr_exact_launch_single(dt, d + off * sz, n, G.scratch, G.out, G.sms, 0));
	}
	gr_exact_sum s;
	CU(cudaMemcpy(&s, G.out, sizeof(s), cudaMemcpyDeviceToHost));
	CU(cudaFree(d));
	return gr_exact_fold(&s, n);
}

static unsigned checks;

/* Odd sizes, for every kind of random data: each of the one-batch
 * kernel's groups in one block (up to 8196) and in many (65537, 2^20 + 3,
 * 2^21 - 3 for f32), and single_kernel past them */
static const size_t odd_sizes[] = { 1,    2,    3,    5,    31,    33,
				    100,  1000, 1024, 1028, 2052,  4097,
				    8192, 8196, 65537, (1u << 20) + 3, (1u << 21) - 3 };

static const char *dt_name(int dt)
{
	return dt == 4 ? "f32" : dt == 5 ? "f64" : dt == 6 ? "f32 squares" : "f64 squares";
}

static void expect(const char *what, int dt, size_t n, unsigned off, double got, double want)
{
	bool same = (std::isnan(got) && std::isnan(want)) || memcmp(&got, &want, 8) == 0;
	CHECK(same, "%s %s n=%zu off=%u: got %a want %a", what, dt_name(dt), n, off, got, want);
	checks++;
}

/* x as the dtype will hold it (f32 and its squares: rounded to float) */
static std::vector<double> as_dtype(int dt, std::vector<double> x)
{
	if (!is_f64(dt))
		for (double &v : x)
			v = (double)(float)v;
	return x;
}

/* What the kernel sums of x (as the dtype holds it): the elements, or for
 * dtype 6 their squares, each exact in a double */
static std::vector<double> summands(int dt, std::vector<double> x)
{
	if (dt == 6)
		for (double &v : x)
			v = v * v;
	return x;
}

/*
 * Reference 3, for the squares of f64 (which no double holds): the CPU's
 * gr_reduce, required to agree with a host integer accumulator of the
 * exact squares. x = m 2^(s - 1074), so x^2 = m^2 2^(2 s - 2148), m^2 below
 * 2^106: into 32-bit places from 2^-2148 of int64 counters (exact while
 * n < 2^31), then into a gr_partial with gr_partial_add_scaled.
 */
static double ref_squares(const double *x, size_t n)
{
	int64_t d[136] = { 0 };
	unsigned specials = n ? GR_PARTIAL_SEEN : 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t b;
		memcpy(&b, &x[i], 8);
		unsigned e = (unsigned)(b >> 52) & 0x7ff;
		uint64_t m = b & ((1ull << 52) - 1);
		if (e == 0x7ff) {
			specials |= m ? GR_PARTIAL_NAN : GR_PARTIAL_PINF;
			continue;
		}
		if (e)
			m |= 1ull << 52;
		unsigned sh = 2 * (e ? e - 1 : 0), w = sh / 32, s = sh % 32;
		unsigned __int128 sq = (unsigned __int128)m * m;
		unsigned __int128 lo = sq << s, hi = s ? sq >> (128 - s) : 0;
		for (unsigned k = 0; k < 4; k++)
			d[w + k] += (int64_t)(uint64_t)((lo >> (32 * k)) & 0xffffffffu);
		d[w + 4] += (int64_t)(uint64_t)hi;
	}
	gr_partial acc;
	gr_partial_identity(GR_OP_SUMSQ, GR_DT_F64, &acc);
	acc.count = n;
	for (int k = 0; k < 136; k++)
		if (d[k])
			CHECK(gr_partial_add_scaled(&acc, d[k], 32 * k - 2148) == 0, "place %d", k);
	gr_partial_add_special(&acc, specials);
	gr_value v, c;
	gr_partial_finish(GR_OP_SUMSQ, GR_DT_F64, &acc, &v);

	gr_partial cpu;
	gr_reduce(GR_OP_SUMSQ, GR_DT_F64, x, n, &cpu);
	gr_partial_finish(GR_OP_SUMSQ, GR_DT_F64, &cpu, &c);
	CHECK((std::isnan(v.f) && std::isnan(c.f)) || memcmp(&v.f, &c.f, 8) == 0,
	      "the references disagree on f64 squares, n=%zu: gr_reduce %a, integers %a", n, c.f,
	      v.f);
	return c.f;
}

/* The reference for dt's sum of x (as the dtype holds it); big arrays of
 * sums use reference 2 */
static double reference(int dt, const std::vector<double> &x, bool big = false)
{
	if (dt == GR_EXACT_F64_SQUARES)
		return ref_squares(x.data(), x.size());
	std::vector<double> s = summands(dt, x);
	return big ? ref_digits(s.data(), s.size()) : ref_partial(s.data(), s.size());
}

/* One array through the kernel, at the given element offsets, against the
 * reference; big arrays use reference 2 and one offset. */
static void check_array(const gpu &G, const char *what, int dt, std::vector<double> x,
			std::initializer_list<unsigned> offs, bool big = false)
{
	x = as_dtype(dt, x);
	double want = reference(dt, x, big);
	for (unsigned off : offs) {
		if (is_f64(dt) && off % 2)
			continue; /* f64 at an odd f32 offset: 4-byte start, not allowed */
		unsigned eo = is_f64(dt) ? off / 2 : off;
		expect(what, dt, x.size(), off, gpu_sum(G, dt, x.data(), x.size(), eo), want);
	}
}

/* Random data of a kind: 0 uniform [-1,1); 1 every finite exponent of the
 * dtype, random sign and significand; 2 cancelling pairs with small
 * leftovers; 3 all ones (headroom flushes); 4 growing values (E raised
 * often); 5 normal-ish (sum of uniforms) times 1e6; for f64 only: 6 near
 * the edges of the squares' scaling (2^-400, 2^500) and of their range
 * (subnormals, 2^512), mixed; 7 subnormals and tiny values, whose squares
 * lie below 2^-1074, with a few around 1 */
static std::vector<double> make(int dt, int kind, size_t n)
{
	std::vector<double> x(n);
	for (size_t i = 0; i < n; i++) {
		switch (kind) {
		case 0: x[i] = 2 * unit() - 1; break;
		case 1: {
			uint64_t r = rng();
			if (dt == 4) {
				uint32_t b = (uint32_t)r & 0x807fffffu;
				b |= (uint32_t)((r >> 32) % 255) << 23; /* 0..254: no inf/NaN */
				float f;
				memcpy(&f, &b, 4);
				x[i] = f;
			} else {
				uint64_t b = r & 0x800fffffffffffffull;
				b |= (uint64_t)((r >> 20) % 2047) << 52;
				memcpy(&x[i], &b, 8);
			}
			break;
		}
		case 2:
			x[i] = i % 2 ? -x[i - 1] : ldexp(2 * unit() - 1, (int)(rng() % 60) - 30);
			if (i % 1000 == 999)
				x[i] = ldexp(unit(), -40);
			break;
		case 3: x[i] = 1.0; break;
		case 4: x[i] = (double)i * 0.75 + 0.5; break;
		case 6: {
			static const int edge[] = { -1074, -1060, -1023, -540, -401, -400, -399,
						    -300, 0, 400, 499, 500, 501, 510, 511 };
			int e = edge[rng() % (sizeof(edge) / sizeof(edge[0]))];
			x[i] = ldexp(1 + unit(), e) * (rng() & 1 ? -1 : 1);
			break;
		}
		case 7: {
			uint64_t r = rng(), b = r & 0x800fffffffffffffull;
			if (r % 64 == 0)
				x[i] = 2 * unit() - 1;
			else if (r % 2)
				memcpy(&x[i], &b, 8); /* a subnormal */
			else
				x[i] = ldexp(2 * unit() - 1, -(int)(r >> 50) % 500 - 540);
			break;
		}
		default: x[i] = (unit() + unit() + unit() - 1.5) * 1e6; break;
		}
	}
	return x;
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && !strcmp(argv[1], "--quick");
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	gpu G;
	CU(cudaDeviceGetAttribute(&G.sms, cudaDevAttrMultiProcessorCount, 0));
	CU(cudaMalloc(&G.scratch, sizeof(gr_exact_scratch)));
	CU(cudaMemset(G.scratch, 0, sizeof(gr_exact_scratch)));
	CU(cudaMalloc(&G.out, sizeof(gr_exact_sum)));

	const double MAXD = DBL_MAX, MIN_SUB = 4.9406564584124654e-324;
	for (int dt = 4; dt <= 5; dt++) {
		const double BIG = dt == 4 ? FLT_MAX : MAXD;
		const double TINY = dt == 4 ? 1.40129846e-45 : MIN_SUB;
		/* the specials and small hand-made arrays, at every start */
		const auto all = { 0u, 1u, 2u, 3u };
		check_array(G, "empty", dt, {}, all);
		check_array(G, "-0", dt, { -0.0 }, all);
		check_array(G, "+0", dt, { 0.0 }, all);
		check_array(G, "-0 x 37", dt, std::vector<double>(37, -0.0), all);
		check_array(G, "-0 and +0", dt, { -0.0, -0.0, 0.0, -0.0 }, all);
		check_array(G, "x - x", dt, { -1.5, 1.5 }, all);
		check_array(G, "x - x, -0", dt, { -1.5, -0.0, 1.5, -0.0 }, all);
		check_array(G, "NaN", dt, { 1.0, NAN, 2.0 }, all);
		check_array(G, "-NaN", dt, { -NAN }, all);
		check_array(G, "+inf", dt, { 1.0, INFINITY, -5.0 }, all);
		check_array(G, "-inf", dt, { -INFINITY, 3.0, -INFINITY }, all);
		check_array(G, "+inf -inf", dt, { INFINITY, 1.0, -INFINITY }, all);
		check_array(G, "inf NaN", dt, { INFINITY, NAN }, all);
		check_array(G, "big tiny", dt, { BIG, TINY, -BIG, TINY, 3 * TINY }, all);
		check_array(G, "subnormals", dt, { TINY, 7 * TINY, -2 * TINY, 1e-310, -0.0 }, all);
		check_array(G, "tie to even", dt, { 1.0, ldexp(1, -53) }, all);
		check_array(G, "tie broken", dt, { 1.0, ldexp(1, -53), ldexp(1, -1074) }, all);
		check_array(G, "tie odd", dt, { 1.0 + ldexp(1, -52), ldexp(1, -53) }, all);
		if (dt == 5) {
			check_array(G, "overflow", dt, { MAXD, MAXD / 2, 1.0 }, all);
			check_array(G, "neg overflow", dt, { -MAXD, -ldexp(1, 970) }, all);
			check_array(G, "just fits", dt, { MAXD, ldexp(1, 969), -1.0 }, all);
			check_array(G, "rounds to max", dt, { MAXD, ldexp(1, 969) - ldexp(1, 900) }, all);
			check_array(G, "back from past max", dt, { MAXD, MAXD, -MAXD, 1e-300 }, all);
			std::vector<double> pat;
			for (int i = 0; i < 50; i++)
				pat.insert(pat.end(), { MAXD / 4, 1.0, -MAXD / 4, ldexp(1, -40) });
			check_array(G, "DBL_MAX/4 pattern", dt, pat, all);
			for (int i = 0; i < 200; i++)
				pat.insert(pat.end(), { MAXD / 4, MAXD / 4, MAXD / 4, 1e-320 });
			check_array(G, "DBL_MAX/4 running past max", dt, pat, all);
			check_array(G, "1e308 1e-308", dt, { 1e308, 1e-308, -1e308, 5e-324, 1e308, -1e308 }, all);
		} else {
			check_array(G, "FLT_MAX x 1000", dt, std::vector<double>(1000, FLT_MAX), all);
		}
		/* a huge value among many typical ones, and tiny ones among big */
		{
			std::vector<double> x = make(dt, 0, 5000);
			x[1234] = dt == 4 ? 3e38 : 1e308;
			x[4321] = dt == 4 ? 1e-44 : 1e-315;
			check_array(G, "one huge", dt, x, { 0, 1, 3 });
			x[77] = dt == 4 ? -3e38 : -1e308;
			check_array(G, "huge cancel", dt, x, { 0, 2 });
			x[3000] = NAN;
			check_array(G, "NaN among many", dt, x, { 0, 3 });
		}
		/* random kinds at odd sizes */
		for (size_t n : odd_sizes) {
			if (quick && n > 70000)
				continue;
			for (int kind = 0; kind < 6; kind++)
				check_array(G, "random", dt, make(dt, kind, n), { 0, 1, 2, 3 });
		}
		/* the grid: one block for many batches, and more blocks than
		 * there are batches */
		for (int kind : { 0, 1, 2 }) {
			std::vector<double> x = as_dtype(dt, make(dt, kind, quick ? 30001 : 300001));
			double want = ref_partial(x.data(), x.size());
			for (unsigned b : { 1u, 3u, 700u })
				expect("grid", dt, x.size(), b, gpu_sum(G, dt, x.data(), x.size(), 1, b), want);
		}
		/* large arrays: typical and cancelling data */
		if (!quick) {
			const size_t large[] = { (1u << 24) + 5, (1u << 28) + 5 };
			for (size_t n : large)
				for (int kind : { 0, 2, 5 })
					check_array(G, "large", dt, make(dt, kind, n), { 1 }, true);
		}
		printf("%s: %u checks so far\n", dt == 4 ? "f32" : "f64", checks);
	}

	/* the sum of the squares of f32 elements (sumsq): the specials, the
	 * range's ends (squares from 2^-298 to 2^256), random kinds at odd
	 * sizes and starts, the grid, and large arrays */
	{
		const int dt = 6;
		const auto all = { 0u, 1u, 2u, 3u };
		check_array(G, "empty", dt, {}, all);
		check_array(G, "-0", dt, { -0.0, -0.0 }, all);
		check_array(G, "NaN", dt, { 1.0, NAN, 2.0 }, all);
		check_array(G, "-inf", dt, { -INFINITY, 3.0 }, all);
		check_array(G, "+inf -inf", dt, { INFINITY, 1.0, -INFINITY }, all);
		check_array(G, "FLT_MAX and the smallest", dt,
			    { FLT_MAX, 1.40129846e-45, -FLT_MAX, -1.40129846e-45, 1e-40 }, all);
		check_array(G, "FLT_MAX x 1000", dt, std::vector<double>(1000, FLT_MAX), all);
		check_array(G, "tie to even", dt, { 1.0, ldexp(1, -27), ldexp(1, -27) }, all);
		check_array(G, "tie broken", dt, { 1.0, ldexp(1, -27), ldexp(1, -27), ldexp(1, -60) },
			    all);
		for (size_t n : odd_sizes) {
			if (quick && n > 70000)
				continue;
			for (int kind = 0; kind < 6; kind++)
				check_array(G, "random", dt, make(4, kind, n), { 0, 1, 2, 3 });
		}
		for (int kind : { 0, 1, 2 }) {
			std::vector<double> x = as_dtype(dt, make(4, kind, quick ? 30001 : 300001));
			std::vector<double> s = summands(dt, x);
			double want = ref_partial(s.data(), s.size());
			for (unsigned b : { 1u, 3u, 700u })
				expect("grid", dt, x.size(), b, gpu_sum(G, dt, x.data(), x.size(), 1, b), want);
		}
		if (!quick)
			for (int kind : { 0, 2, 5 })
				check_array(G, "large", dt, make(4, kind, (1u << 24) + 5), { 1 }, true);
		printf("f32 squares: %u checks so far\n", checks);
	}

	/* the sum of the squares of f64 elements: squares from 2^-2148 to
	 * 2^2048, the careful path's scaling at both ends, ties decided by a
	 * square's low half or by squares below 2^-1074, running sums past
	 * DBL_MAX; random kinds, the grid, large arrays */
	{
		const int dt = GR_EXACT_F64_SQUARES;
		const auto all = { 0u, 2u };
		const double S511 = ldexp(1, 511);
		check_array(G, "empty", dt, {}, all);
		check_array(G, "-0", dt, { -0.0 }, all);
		check_array(G, "-0 x 37", dt, std::vector<double>(37, -0.0), all);
		check_array(G, "+0 and -0", dt, { 0.0, -0.0, -0.0 }, all);
		check_array(G, "NaN", dt, { 1.0, NAN, 2.0 }, all);
		check_array(G, "-NaN", dt, { -NAN }, all);
		check_array(G, "+inf", dt, { 1.0, INFINITY }, all);
		check_array(G, "-inf", dt, { -INFINITY, 3.0 }, all);
		check_array(G, "+inf -inf", dt, { INFINITY, 1.0, -INFINITY }, all);
		check_array(G, "inf NaN", dt, { -INFINITY, NAN }, all);
		check_array(G, "DBL_MAX", dt, { MAXD }, all);
		check_array(G, "square past DBL_MAX", dt, { ldexp(1, 512), 1.0 }, all);
		check_array(G, "1e300 1e-300", dt, { 1e300, 1e-300 }, all);
		check_array(G, "2^511 twice", dt, { S511, -S511 }, all);
		check_array(G, "1.25 2^511 twice", dt, { 1.25 * S511, 1.25 * S511 }, all);
		check_array(G, "1.25 2^511 thrice: past max", dt, { 1.25 * S511, 1.25 * S511, -1.25 * S511 },
			    all);
		check_array(G, "rounds to DBL_MAX", dt,
			    { S511, S511, S511, S511 * (1 - ldexp(1, -52)) }, all);
		check_array(G, "rounds past DBL_MAX", dt,
			    { S511, S511, S511, S511 * (1 - ldexp(1, -53)) }, all);
		check_array(G, "1e153 x 100", dt, std::vector<double>(100, 1e153), all);
		check_array(G, "1e153 x 1000: past max in sum", dt, std::vector<double>(1000, 1e153), all);
		check_array(G, "least subnormal", dt, { MIN_SUB }, all);
		check_array(G, "subnormals", dt, { MIN_SUB, 7 * MIN_SUB, -3e-310, 1e-320, -0.0 }, all);
		check_array(G, "2^-537 twice", dt, { ldexp(1, -537), ldexp(1, -537) }, all);
		check_array(G, "bottom tie to even", dt, { ldexp(1, -538), ldexp(1, -538) }, all);
		check_array(G, "bottom tie broken", dt, { ldexp(1, -538), -ldexp(1, -538), MIN_SUB }, all);
		check_array(G, "bottom tie up", dt,
			    { ldexp(1, -538), ldexp(1, -538), ldexp(1, -538), ldexp(1, -538),
			      ldexp(1, -538), ldexp(1, -538) },
			    all);
		check_array(G, "3 x 2^-1076", dt, { ldexp(1, -538), ldexp(1, -538), ldexp(1, -538) }, all);
		check_array(G, "tie to even", dt, { 1.0, ldexp(1, -27), ldexp(1, -27) }, all);
		check_array(G, "tie broken below 2^-1074", dt, { 1.0, ldexp(1, -27), ldexp(1, -27), MIN_SUB },
			    all);
		check_array(G, "tie broken by a square's low half", dt,
			    { 1 + ldexp(1, -52), ldexp(1, -27), -ldexp(1, -27) }, all);
		check_array(G, "low halves", dt, { 1 + ldexp(1, -52), 1 - ldexp(1, -53), 3 + ldexp(1, -51) },
			    all);
		check_array(G, "ends of the range at once", dt,
			    { 1e300, MIN_SUB, ldexp(1, -401), ldexp(1, 501), 1.0, -1e-300 }, all);
		check_array(G, "many least subnormals", dt,
			    std::vector<double>(quick ? 70001 : 1000000, MIN_SUB), { 0 });
		{
			/* a tie at 1 + 2^-53 whose sticky bit is a million squares
			 * of 2^-600 (2^-1200 each) */
			std::vector<double> x(quick ? 70001 : 1000003, ldexp(1, -600));
			x[500] = 1.0;
			x[501] = ldexp(1, -27);
			x[502] = ldexp(1, -27);
			check_array(G, "tie broken by many tiny squares", dt, x, { 0, 2 });
		}
		{
			std::vector<double> x = make(5, 0, 5000);
			x[1234] = 1e200;
			x[4321] = 1e-200;
			check_array(G, "one huge", dt, x, { 0, 2 });
			x[3000] = NAN;
			check_array(G, "NaN among many", dt, x, { 0 });
			x[3000] = -INFINITY;
			check_array(G, "-inf among many", dt, x, { 2 });
		}
		for (size_t n : odd_sizes) {
			if (quick && n > 70000)
				continue;
			for (int kind = 0; kind < 8; kind++)
				check_array(G, "random", dt, make(5, kind, n), all);
		}
		for (int kind : { 0, 1, 6 }) {
			std::vector<double> x = make(5, kind, quick ? 30001 : 300001);
			double want = reference(dt, x);
			for (unsigned b : { 1u, 3u, 700u })
				expect("grid", dt, x.size(), b, gpu_sum(G, dt, x.data(), x.size(), 1, b), want);
		}
		if (!quick) {
			for (int kind : { 0, 2, 5, 6 })
				check_array(G, "large", dt, make(5, kind, (1u << 24) + 5), { 2 });
			check_array(G, "large", dt, make(5, 0, (1u << 28) + 5), { 2 });
		}
		printf("f64 squares: %u checks so far\n", checks);
	}

	/* the kernel's other forms give the same bits; last, and every one
	 * of them tried even after a failure, so that a wrong form cannot
	 * hide how the others fare */
	unsigned failed = 0;
	for (int dt = 4; dt <= 5; dt++) {
		for (size_t n : { (size_t)1, (size_t)4097, (size_t)65537, (size_t)(quick ? 70001 : 2000003) })
			for (int kind = 0; kind < 6; kind++) {
				std::vector<double> x = as_dtype(dt, make(dt, kind, n));
				double want = ref_partial(x.data(), x.size());
				const char *names[] = { "", "pipe", "3/SM", "fb3" };
				for (int form : { 1, 2, 3 })
					for (unsigned off : { 0u, 1u }) {
						double got = gpu_sum(G, dt, x.data(), n, off, 0, form);
						bool same = (std::isnan(got) && std::isnan(want)) ||
							    memcmp(&got, &want, 8) == 0;
						if (!same && failed++ < 20)
							fprintf(stderr, "form %s %s kind %d n=%zu off=%u: got %a want %a\n",
								names[form], dt == 4 ? "f32" : "f64", kind, n, off,
								got, want);
						checks++;
					}
			}
	}
	/* the batched form: mixed segments (f32 and f64, empty to a million
	 * elements, every kind of data, starts at any element) in one launch,
	 * twice on the same scratch; softly too */
	unsigned bfailed = 0;
	{
		const unsigned nseg = 300;
		std::vector<gr_exact_seg> segs(nseg);
		std::vector<unsigned char> hb;
		std::vector<double> want(nseg);
		uint32_t units = 0;
		for (unsigned i = 0; i < nseg; i++) {
			int dt = 4 + (int)(rng() % 4);
			size_t sz = is_f64(dt) ? 8 : 4;
			size_t n = i % 50 == 7 ? (quick ? 70001 : (1u << 20) + 3)
				 : i % 9 == 0 ? rng() % 40000 : rng() % 300;
			if (i % 17 == 0)
				n = 0;
			std::vector<double> x = as_dtype(dt, make(dt, (int)(rng() % 6), n));
			if (i % 23 == 5 && n)
				x[rng() % n] = i % 2 ? NAN : INFINITY;
			if (i % 31 == 3)
				for (double &v : x)
					v = -0.0;
			want[i] = reference(dt, x);
			size_t off = (hb.size() + 15) / 16 * 16 + sz * (rng() % (16 / sz));
			hb.resize(off + n * sz);
			for (size_t k = 0; k < n; k++) {
				if (!is_f64(dt)) {
					float f = (float)x[k];
					memcpy(&hb[off + 4 * k], &f, 4);
				} else {
					memcpy(&hb[off + 8 * k], &x[k], 8);
				}
			}
			segs[i] = gr_exact_seg{ off, n, (uint32_t)dt, units, gr_exact_units(dt, n), 0 };
			units += segs[i].units;
		}
		unsigned char *db;
		gr_exact_seg *dsegs;
		gr_exact_scratch *dscr;
		gr_exact_sum *dout;
		CU(cudaMalloc(&db, hb.size()));
		CU(cudaMalloc(&dsegs, nseg * sizeof(gr_exact_seg)));
		CU(cudaMalloc(&dscr, nseg * sizeof(gr_exact_scratch)));
		CU(cudaMalloc(&dout, nseg * sizeof(gr_exact_sum)));
		CU(cudaMemcpy(db, hb.data(), hb.size(), cudaMemcpyHostToDevice));
		CU(cudaMemcpy(dsegs, segs.data(), nseg * sizeof(gr_exact_seg), cudaMemcpyHostToDevice));
		CU(cudaMemset(dscr, 0, nseg * sizeof(gr_exact_scratch)));
		for (int rep = 0; rep < 2; rep++) {
			CU(cudaMemset(dout, 0x5a, nseg * sizeof(gr_exact_sum)));
			CU((cudaError_t)gr_exact_launch_batch(db, dsegs, nseg, units, dscr, dout, G.sms, 0));
			std::vector<gr_exact_sum> got(nseg);
			CU(cudaMemcpy(got.data(), dout, nseg * sizeof(gr_exact_sum), cudaMemcpyDeviceToHost));
			for (unsigned i = 0; i < nseg; i++) {
				double g = gr_exact_fold(&got[i], segs[i].n);
				bool same = (std::isnan(g) && std::isnan(want[i])) ||
					    memcmp(&g, &want[i], 8) == 0;
				if (!same && bfailed++ < 20)
					fprintf(stderr, "batch segment %u (%s n=%llu): got %a want %a\n", i,
						dt_name((int)segs[i].dtype),
						(unsigned long long)segs[i].n, g, want[i]);
				checks++;
			}
		}
		std::vector<gr_exact_scratch> z(nseg);
		CU(cudaMemcpy(z.data(), dscr, nseg * sizeof(gr_exact_scratch), cudaMemcpyDeviceToHost));
		for (const gr_exact_scratch &c : z) {
			bool zero = c.flags == 0 && c.ticket == 0;
			for (int i = 0; i < GR_EXACT_DIGITS; i++)
				zero = zero && c.acc[i] == 0;
			if (!zero && bfailed++ < 20)
				fprintf(stderr, "batch: a segment's scratch was left non-zero\n");
		}
		CU(cudaFree(db));
		CU(cudaFree(dsegs));
		CU(cudaFree(dscr));
		CU(cudaFree(dout));
	}
	CHECK(failed == 0, "%u checks of the kernel's other forms failed", failed);
	CHECK(bfailed == 0, "%u checks of the batched form failed", bfailed);

	/* the scratch is left zero for the next launch */
	gr_exact_scratch z;
	CU(cudaMemcpy(&z, G.scratch, sizeof(z), cudaMemcpyDeviceToHost));
	bool zero = z.flags == 0 && z.ticket == 0;
	for (int i = 0; i < GR_EXACT_DIGITS; i++)
		zero = zero && z.acc[i] == 0;
	CHECK(zero, "the scratch was left non-zero");
	CU(cudaFree(G.scratch));
	CU(cudaFree(G.out));
	printf("exact: %u checks passed\n", checks);
	return 0;
}
