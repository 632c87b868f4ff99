/*
 * The narrow dtypes' kernels (cuda/narrow.h) against the CPU's reduce
 * (math/reduce.c, which widens them: math/widen.c), bit for bit, through
 * the engine's partials for the exact sums and moments
 * (cuda/exact-partial.c): every (op, dtype) pair that has a kernel, on
 * random bit patterns (with and without infinities and NaNs), every bit
 * pattern of the dtype, values of a few binades and of the whole range,
 * subnormals, pairs that cancel to a tiny rest, a large offset with
 * little spread (moments' cancellation), all -0, zeros of both signs, the
 * largest values, a NaN, infinities of one sign and of both, and each
 * integer dtype's extremes; sizes from 1 to past 2^20, at every start in
 * a 16-byte vector that the element's size allows, on grids of one block,
 * of seven, and of the whole GPU; the sums of squares and moments of the
 * floats, and the f16 sum, also at 2^24 + 3 and 2^26 + 5 on a grid of one
 * multiprocessor, so that each lane's accumulators are flushed on the
 * way, with moments and argmax of i16 and u8 and argmax of bf16 (and
 * 2^24, 2^26 and 2^28 with --big). Kinds for argmin and argmax and bf16
 * moments' paths: ties (three values and both zeros), NaNs of both signs
 * and many payloads, exponents that rise along the array, a binade with
 * now and then an element far below it, and (bf16) one with now and
 * then an element 15 to 31 binades below it. Every field of moments
 * (sum, min, max, mean and variance with ddof 0 and 1), argmin's and
 * argmax's index must be the CPU's too, and so must moments' exact sum of
 * squares (and the integers' exact sum) where no NaN or infinity is among
 * the elements. The scratch must be left zero. A
 * NaN result must be a NaN (any). --quick keeps to a few small sizes,
 * kinds and starts (for compute-sanitizer); --dtype NAME to one dtype
 * (so that several processes can share the checks). Exits 77 when there
 * is no GPU.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/narrow.h"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "cuda/exact-partial.h"
#include "math/reduce.h"
#include "proto/types.h"
/* math/xsum.h's (whose math/simd.h is C's, not C++'): the limbs of an
 * exact accumulator */
size_t xsum_acc_limbs(const uint64_t *acc, uint64_t xflags, uint64_t count, uint64_t *words,
		      size_t max, int *ret_scale, unsigned *ret_flags);
}

static const gr_dtype dts[] = {GR_DT_F16, GR_DT_BF16, GR_DT_F8E4M3, GR_DT_F8E5M2,
			       GR_DT_I8,  GR_DT_U8,   GR_DT_I16,    GR_DT_U16};
static const gr_op ops[] = {GR_OP_SUM,    GR_OP_MIN,    GR_OP_MAX,    GR_OP_SUMSQ,
			    GR_OP_ARGMIN, GR_OP_ARGMAX, GR_OP_MOMENTS};

enum { RANDOM, FINITE, EVERY, FEW_BINADES, WIDE, CANCEL, NEGZERO, ZEROS, MAXV, ONE_NAN, PINF,
       BOTH_INF, INT_MIN_ALL, SMALL, SUBNORMAL, OFFSET, TIES, NANS, RISE, TINY, MID, NKINDS };
static const char *kind_name[] = {"random", "finite", "every", "few-binades", "wide", "cancel",
				  "negzero", "zeros", "max", "nan", "+inf", "both-inf",
				  "int-min", "small", "subnormal", "offset", "ties", "nans",
				  "rise", "tiny", "mid"};

static unsigned esize(gr_dtype dt)
{
	return (unsigned)gr_dtype_size(dt);
}
static bool is_float(gr_dtype dt)
{
	return dt <= GR_DT_F8E5M2 && dt >= GR_DT_F16;
}

/* a float dtype's layout: exponent shift and width, bias */
struct fl {
	unsigned shift, ebits, bias, bits;
};
static fl layout(gr_dtype dt)
{
	switch (dt) {
	case GR_DT_F16: return {10, 5, 15, 16};
	case GR_DT_BF16: return {7, 8, 127, 16};
	case GR_DT_F8E4M3: return {3, 4, 7, 8};
	default: return {2, 5, 15, 8}; /* e5m2 */
	}
}
static bool special(gr_dtype dt, uint32_t b)
{
	switch (dt) {
	case GR_DT_F16: return (b & 0x7c00) == 0x7c00;
	case GR_DT_BF16: return (b & 0x7f80) == 0x7f80;
	case GR_DT_F8E4M3: return (b & 0x7f) == 0x7f;
	case GR_DT_F8E5M2: return (b & 0x7c) == 0x7c;
	default: return false;
	}
}
static uint32_t mask(gr_dtype dt)
{
	return esize(dt) == 2 ? 0xffffu : 0xffu;
}
/* a float of exponent field e, random significand and sign */
static uint32_t make(gr_dtype dt, unsigned e, bool neg)
{
	fl f = layout(dt);
	uint32_t m = (uint32_t)rnd() & ((1u << f.shift) - 1);
	uint32_t b = (e << f.shift) | m | (neg ? 1u << (f.bits - 1) : 0);
	if (special(dt, b))
		b &= ~1u; /* e4m3's S.1111.111: 1111.110 */
	return b;
}
static uint32_t finite_bits(gr_dtype dt)
{
	uint32_t b;
	do
		b = (uint32_t)rnd() & mask(dt);
	while (special(dt, b));
	return b;
}

static void put(std::vector<unsigned char> &h, gr_dtype dt, size_t i, uint32_t b)
{
	if (esize(dt) == 2) {
		h[2 * i] = (unsigned char)b;
		h[2 * i + 1] = (unsigned char)(b >> 8);
	} else {
		h[i] = (unsigned char)b;
	}
}

/* n elements of dt of kind into h (false: the kind is not for dt) */
static bool fill(gr_dtype dt, int kind, std::vector<unsigned char> &h, size_t n)
{
	const bool fp = is_float(dt);
	const uint32_t top = esize(dt) == 2 ? 0x8000u : 0x80u;
	h.assign(n * esize(dt), 0);
	if (!fp && (kind == CANCEL || kind == NEGZERO || kind == ONE_NAN || kind == PINF ||
		    kind == BOTH_INF || kind == WIDE || kind == FEW_BINADES || kind == SUBNORMAL ||
		    kind == OFFSET || kind == NANS || kind == RISE || kind == TINY))
		return false;
	if (fp && (kind == INT_MIN_ALL || kind == SMALL))
		return false;
	if (dt == GR_DT_F8E4M3 && (kind == PINF || kind == BOTH_INF))
		return false;
	if (kind == MID && dt != GR_DT_BF16)
		return false;
	fl f = fp ? layout(dt) : fl{};
	const unsigned emax = fp ? (1u << f.ebits) - (dt == GR_DT_F8E4M3 ? 1 : 2) : 0;
	const uint32_t inf = fp ? ((1u << f.ebits) - 1) << f.shift : 0;
	/* ties: three values (and both zeros) */
	const uint32_t tie[3] = {fp ? finite_bits(dt) : (uint32_t)rnd() & mask(dt),
				 fp ? finite_bits(dt) : (uint32_t)rnd() & mask(dt),
				 fp ? finite_bits(dt) : (uint32_t)rnd() & mask(dt)};
	for (size_t i = 0; i < n; i++) {
		uint32_t b = 0;
		switch (kind) {
		case RANDOM: b = (uint32_t)rnd() & mask(dt); break;
		case FINITE: b = finite_bits(dt); break;
		case EVERY: b = (uint32_t)(i * 40503u) & mask(dt); break;
		case FEW_BINADES: b = make(dt, f.bias - 6 + (unsigned)(rnd() % 8), rnd() & 1); break;
		case WIDE: {
			unsigned e = (unsigned)(rnd() % (emax + 1));
			b = make(dt, e, rnd() & 1);
			break;
		}
		case CANCEL:
			if (i % 2 == 0) {
				b = make(dt, f.bias - 4 + (unsigned)(rnd() % 6), rnd() & 1);
			} else {
				uint32_t p;
				memcpy(&p, &h[(i - 1) * esize(dt)], esize(dt));
				b = (p & mask(dt)) ^ top;
			}
			if (i == n / 2 && n % 2 == 0)
				b = 1; /* the smallest subnormal: the rest */
			break;
		case NEGZERO: b = top; break;
		case ZEROS: b = rnd() & 1 ? top : 0; break;
		case MAXV:
			b = fp ? ((emax << f.shift) | ((1u << f.shift) - 1)) : mask(dt) >> (dt == GR_DT_I8 || dt == GR_DT_I16);
			if (special(dt, b))
				b &= ~1u;
			break;
		case ONE_NAN: b = make(dt, f.bias - 3 + (unsigned)(rnd() % 4), rnd() & 1); break;
		case PINF: b = make(dt, f.bias - 3 + (unsigned)(rnd() % 4), rnd() & 1); break;
		case BOTH_INF: b = make(dt, f.bias - 3 + (unsigned)(rnd() % 4), rnd() & 1); break;
		case INT_MIN_ALL: b = dt == GR_DT_I8 || dt == GR_DT_I16 ? top : 0; break;
		case SMALL: b = (uint32_t)(rnd() % 7) - 3; b &= mask(dt); break;
		case SUBNORMAL:
			/* subnormals and zeros, a few of the smallest normals */
			b = make(dt, rnd() % 16 ? 0u : 1u, rnd() & 1);
			break;
		case OFFSET:
			/* one sign and binade high in the range, the top
			 * significand bits mostly set: a mean far from 0 and
			 * little spread */
			b = make(dt, emax - 1, false) | ((1u << f.shift) - 1) >> 1;
			if (rnd() % 4 == 0)
				b ^= (uint32_t)(rnd() % 3);
			break;
		case TIES: {
			const unsigned r = (unsigned)(rnd() % 5);
			b = r < 3 ? tie[r] : r == 3 ? 0u : fp ? top : 0u;
			break;
		}
		case NANS:
			/* NaNs of both signs and of any payload among a few
			 * binades: the first NaN is argmin's and argmax's */
			b = make(dt, f.bias - 3 + (unsigned)(rnd() % 4), rnd() & 1);
			if (rnd() % 64 == 0) {
				const uint32_t pl = dt == GR_DT_F8E4M3 ? 7u : 1u + (uint32_t)rnd() % ((1u << f.shift) - 1);
				b = inf | pl | (rnd() & 1 ? top : 0);
			}
			break;
		case RISE:
			/* exponents that grow along the array (and fall back
			 * at its end): a lane's bound moves again and again */
			b = make(dt, 1 + (unsigned)((i * (uint64_t)emax) / (n + 1)) % emax, rnd() & 1);
			if (i + 64 > n)
				b = make(dt, 1 + (unsigned)(rnd() % 3), rnd() & 1);
			break;
		case TINY:
			/* a binade or two, and now and then an element far
			 * below them */
			b = make(dt, f.bias - 1 + (unsigned)(rnd() % 2), rnd() & 1);
			if (rnd() % 500 == 0)
				b = make(dt, (unsigned)(rnd() % 3), rnd() & 1);
			break;
		case MID:
			/* a binade or two, and now and then an element 15 to
			 * 31 binades below the top one (half of them 15): in
			 * bf16 moments' window, not in its narrow one */
			b = make(dt, f.bias - 1 + (unsigned)(rnd() % 2), rnd() & 1);
			if (rnd() % 100 == 0)
				b = make(dt, f.bias - 15 - (rnd() % 2 ? 0u : (unsigned)(rnd() % 17)),
					 rnd() & 1);
			break;
		}
		put(h, dt, i, b);
	}
	if (kind == CANCEL)
		for (size_t i = n; i > 1; i--) { /* shuffle */
			size_t j = rnd() % i;
			for (unsigned k = 0; k < esize(dt); k++)
				std::swap(h[(i - 1) * esize(dt) + k], h[j * esize(dt) + k]);
		}
	if (kind == ONE_NAN)
		put(h, dt, rnd() % n, inf | ((1u << f.shift) - 1) | (rnd() & 1 ? top : 0));
	if (kind == PINF)
		put(h, dt, rnd() % n, inf);
	if (kind == BOTH_INF) {
		put(h, dt, rnd() % n, inf);
		put(h, dt, rnd() % n, inf | top);
	}
	return true;
}

static gr_exact_scratch *dscratch;
static uint64_t *draw;
static gr_exact_sum *dxout;
static gr_moments_scratch *dmscratch;
static gr_moments_sums *dmout;

static bool same(const gr_value &a, const gr_value &b);

/* a float64 of moments, bit for bit (any NaN for a NaN) */
static bool same_f(double a, double b)
{
	if (std::isnan(a))
		return std::isnan(b);
	return memcmp(&a, &b, 8) == 0;
}

/* Whether the exact accumulators a and b (of partials of n elements, their
 * flags fa and fb) hold the same value: their limbs (xsum_acc_limbs), which
 * drop what only repeats the sign. */
static bool same_acc(const uint64_t *a, uint64_t fa, const uint64_t *b, uint64_t fb, uint64_t n)
{
	uint64_t wa[GR_PARTIAL_XWORDS], wb[GR_PARTIAL_XWORDS];
	int sa, sb;
	unsigned ga, gb;
	size_t na = xsum_acc_limbs(a, fa, n, wa, GR_PARTIAL_XWORDS, &sa, &ga);
	size_t nb = xsum_acc_limbs(b, fb, n, wb, GR_PARTIAL_XWORDS, &sb, &gb);
	return na == nb && sa == sb && memcmp(wa, wb, na * sizeof(*wa)) == 0;
}

/* moments over n elements at d (device) against the CPU's partial cp:
 * every field, ddof 0 and 1; and the exact sum of squares itself (an
 * error in its far end would not reach a rounded variance), and the
 * integers' exact sum, where no NaN or infinity is among the elements */
static void check_moments(gr_dtype dt, const unsigned char *d, size_t n, int sms,
			  const gr_partial *cp, const char *what)
{
	CU(gr_narrow_moments_launch(dt, d, n, dmscratch, dmout, sms, 0));
	CU(cudaDeviceSynchronize());
	gr_moments_sums got;
	CU(cudaMemcpy(&got, dmout, sizeof(got), cudaMemcpyDeviceToHost));
	gr_partial *gp = (gr_partial *)calloc(1, sizeof(gr_partial));
	cuda_moments_partial(&got, dt, n, gp);
	const uint64_t specials = GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF;
	if (!((gp->x2flags | cp->x2flags | gp->xflags | cp->xflags) & specials))
		CHECK(same_acc(gp->x2acc, 0, cp->x2acc, 0, n) &&
			      (is_float(dt) || same_acc(gp->xacc, 0, cp->xacc, 0, n)),
		      "%s: exact sums of squares (or integer sums) differ", what);
	for (uint64_t ddof = 0; ddof < 2 && ddof < n; ddof++) {
		gr_moments g, c;
		gr_err eg = gr_moments_finish(dt, gp, ddof, &g);
		gr_err ec = gr_moments_finish(dt, cp, ddof, &c);
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
	free(gp);
}

/* the GPU's answer for op over n elements at d, as the daemon finishes it */
static gr_err run_gpu(gr_op op, gr_dtype dt, const unsigned char *d, size_t n, int sms,
		      gr_value *ret, uint64_t *ret_index)
{
	CU(gr_narrow_launch(op, dt, d, n, dscratch, draw, dxout, sms, 0));
	CU(cudaDeviceSynchronize());
	gr_partial *p = (gr_partial *)calloc(1, sizeof(gr_partial));
	if (gr_narrow_exact(op, dt)) {
		gr_exact_sum xs;
		CU(cudaMemcpy(&xs, dxout, sizeof(xs), cudaMemcpyDeviceToHost));
		cuda_exact_partial(&xs, op, dt, n, p);
	} else {
		/* argmin, argmax: value and index (argm.h) */
		uint64_t r[2];
		CU(cudaMemcpy(r, draw, gr_op_has_index(op) ? 16 : 8, cudaMemcpyDeviceToHost));
		p->v.u = r[0];
		p->index = gr_op_has_index(op) ? r[1] : 0;
		p->count = n;
	}
	*ret_index = p->index;
	gr_err e = gr_partial_finish(op, dt, p, ret);
	free(p);
	return e;
}

static void check_scratch(const char *what)
{
	gr_exact_scratch s;
	static const gr_exact_scratch zero = {};
	CU(cudaMemcpy(&s, dscratch, sizeof(s), cudaMemcpyDeviceToHost));
	CHECK(memcmp(&s, &zero, sizeof(s)) == 0, "%s: scratch not left zero", what);
	gr_moments_scratch m;
	static const gr_moments_scratch mzero = {};
	CU(cudaMemcpy(&m, dmscratch, sizeof(m), cudaMemcpyDeviceToHost));
	CHECK(memcmp(&m, &mzero, sizeof(m)) == 0, "%s: moments' scratch not left zero", what);
}

static bool same(const gr_value &a, const gr_value &b)
{
	if (a.kind != b.kind)
		return false;
	if (a.kind == GR_KIND_F64 && std::isnan(a.f))
		return std::isnan(b.f);
	return a.u == b.u;
}

static unsigned long launches;

static void one(gr_op op, gr_dtype dt, int kind, const std::vector<unsigned char> &h,
		unsigned char *dbuf, size_t off, size_t n, int sms)
{
	const unsigned char *hp = h.data() + off * esize(dt);
	gr_partial *p = (gr_partial *)calloc(1, sizeof(gr_partial));
	gr_value want, got;
	gr_reduce(op, dt, hp, n, p);
	char what[160];
	snprintf(what, sizeof(what), "%s %s %s n=%zu off=%zu sms=%d", gr_op_name(op),
		 gr_dtype_name(dt), kind_name[kind], n, off, sms);
	if (op == GR_OP_MOMENTS) {
		check_moments(dt, dbuf + off * esize(dt), n, sms, p, what);
		free(p);
		if (++launches % 97 == 0)
			check_scratch(what);
		return;
	}
	gr_err we = gr_partial_finish(op, dt, p, &want);
	const uint64_t want_index = gr_op_has_index(op) ? p->index : 0;
	free(p);
	uint64_t got_index;
	gr_err ge = run_gpu(op, dt, dbuf + off * esize(dt), n, sms, &got, &got_index);
	launches++;
	CHECK(we == ge && same(want, got), "%s: got %d %.17g (0x%016llx), want %d %.17g (0x%016llx)",
	      what, (int)ge, got.f, (unsigned long long)got.u, (int)we, want.f,
	      (unsigned long long)want.u);
	CHECK(got_index == want_index, "%s: index %llu, want %llu", what,
	      (unsigned long long)got_index, (unsigned long long)want_index);
	if (launches % 97 == 0)
		check_scratch(what);
}

int main(int argc, char **argv)
{
	bool quick = false, big = false;
	const char *only = NULL;
	for (int i = 1; i < argc; i++) {
		quick |= strcmp(argv[i], "--quick") == 0;
		big |= strcmp(argv[i], "--big") == 0;
		if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc)
			only = argv[++i];
	}
	auto skip = [&](gr_dtype dt) { return only && strcmp(only, gr_dtype_name(dt)) != 0; };
	int sms = gpu_sms();
	CU(cudaMalloc((void **)&dscratch, sizeof(gr_exact_scratch)));
	CU(cudaMemset(dscratch, 0, sizeof(gr_exact_scratch)));
	CU(cudaMalloc((void **)&draw, 16));
	CU(cudaMalloc((void **)&dxout, sizeof(gr_exact_sum)));
	CU(cudaMalloc((void **)&dmscratch, sizeof(gr_moments_scratch)));
	CU(cudaMemset(dmscratch, 0, sizeof(gr_moments_scratch)));
	CU(cudaMalloc((void **)&dmout, sizeof(gr_moments_sums)));

	/* every op of every narrow dtype has a kernel, and no other dtype
	 * (test-cuda-backend holds the daemon's table, engine/backend.h, to
	 * this one) */
	CHECK(!gr_narrow_has_kernel(GR_OP_SUM, GR_DT_F32) && !gr_narrow_has_kernel(GR_OP_ARGMIN, GR_DT_I64) &&
		      !gr_narrow_has_kernel(GR_OP_N, GR_DT_I8),
	      "pairs without a kernel");
	for (gr_dtype dt : dts)
		for (gr_op op : ops)
			CHECK(gr_narrow_has_kernel(op, dt), "%s %s: a kernel", gr_op_name(op),
			      gr_dtype_name(dt));
	CHECK(gr_narrow_launch(GR_OP_SUM, GR_DT_F16, (const void *)(uintptr_t)1, 4, dscratch, draw,
			       dxout, sms, 0) == (int)cudaErrorInvalidValue,
	      "a misaligned f16 is refused");
	CHECK(gr_narrow_launch(GR_OP_MOMENTS, GR_DT_F16, dxout, 4, dscratch, draw, dxout, sms, 0) ==
		      (int)cudaErrorInvalidValue,
	      "moments is not gr_narrow_launch's");
	CHECK(gr_narrow_moments_launch(GR_DT_BF16, (const void *)(uintptr_t)1, 4, dmscratch, dmout,
				       sms, 0) == (int)cudaErrorInvalidValue &&
		      gr_narrow_moments_launch(GR_DT_I16, (const void *)(uintptr_t)1, 4, dmscratch, dmout,
					       sms, 0) == (int)cudaErrorInvalidValue &&
		      gr_narrow_moments_launch(GR_DT_F32, dmout, 4, dmscratch, dmout, sms, 0) ==
			      (int)cudaErrorInvalidValue &&
		      gr_narrow_moments_launch(GR_DT_F16, dmout, 0, dmscratch, dmout, sms, 0) ==
			      (int)cudaErrorInvalidValue,
	      "moments of a misaligned bf16 or i16, of f32, of nothing are refused");

	std::vector<size_t> sizes = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 100, 255, 1000, 4097,
				     32768, 65541};
	/* --quick's largest: on one multiprocessor's grid, more tiles a warp
	 * than the warp has buffers (narrow-bulk.cuh), for compute-sanitizer */
	if (quick)
		sizes = {1, 3, 17, 33, 4097, 100003};
	else {
		sizes.push_back((1u << 20) + 3);
		sizes.push_back(3000017);
	}
	const int grids[] = {1, 7, sms};
	std::vector<unsigned char> h;
	const size_t maxn = quick ? 100003 : 3000017;
	unsigned char *dbuf;
	CU(cudaMalloc((void **)&dbuf, (maxn + 16) * 2));

	for (gr_dtype dt : dts) {
		if (skip(dt))
			continue;
		for (int kind = 0; kind < NKINDS; kind++) {
			/* --quick: a few kinds, at a few starts */
			if (quick && kind != RANDOM && kind != WIDE && kind != ONE_NAN && kind != SMALL &&
			    kind != TIES && kind != NANS && kind != TINY && kind != MID)
				continue;
			for (size_t n : sizes) {
				/* every start in a vector the size allows */
				const size_t offs = 16 / esize(dt);
				if (!fill(dt, kind, h, n + offs))
					break;
				CU(cudaMemcpy(dbuf, h.data(), h.size(), cudaMemcpyHostToDevice));
				for (gr_op op : ops) {
					if (!gr_narrow_has_kernel(op, dt))
						continue;
					for (size_t off = 0; off < offs; off += quick ? 3 : n > 4096 ? 5 : 1)
						for (int g : grids)
							if (n <= 4096 || g == sms || off == 0)
								one(op, dt, kind, h, dbuf, off, n, g);
				}
			}
		}
		printf("%s: %lu checks, %lu failures\n", gr_dtype_name(dt), checks, failures);
	}
	CU(cudaFree(dbuf));

	if (!quick) {
		/* past each lane's flush: 2^24 + 3 and 2^26 + 5 elements on one
		 * multiprocessor's grid, at an odd start */
		for (size_t n : {(size_t)(1u << 24) + 3, (size_t)(1u << 26) + 5}) {
			CU(cudaMalloc((void **)&dbuf, (n + 16) * 2));
			for (gr_dtype dt : {GR_DT_F16, GR_DT_BF16, GR_DT_F8E5M2, GR_DT_F8E4M3, GR_DT_I16,
					    GR_DT_U8}) {
				if (skip(dt))
					continue;
				for (int kind : {FINITE, WIDE, MAXV, CANCEL, OFFSET, TINY, RISE, SMALL, MID}) {
					if (n > (1u << 25) && (dt != GR_DT_F16 || kind == CANCEL))
						continue;
					if (!fill(dt, kind, h, n + 1))
						continue;
					CU(cudaMemcpy(dbuf, h.data(), h.size(), cudaMemcpyHostToDevice));
					for (gr_op op : {GR_OP_SUM, GR_OP_SUMSQ, GR_OP_MOMENTS, GR_OP_ARGMAX})
						if ((op != GR_OP_SUM || dt == GR_DT_F16) &&
						    (op != GR_OP_SUMSQ || is_float(dt)) &&
						    (op != GR_OP_ARGMAX || dt == GR_DT_BF16 || !is_float(dt)))
							one(op, dt, kind, h, dbuf, 1, n, 1);
					if (n < (1u << 25))
						one(GR_OP_MOMENTS, dt, kind, h, dbuf, 1, n, sms);
				}
			}
			CU(cudaFree(dbuf));
			printf("2^%d+: %lu checks, %lu failures\n", n < (1u << 25) ? 24 : 26, checks,
			       failures);
		}
	}

	if (big) {
		/* 2^24, 2^26 and 2^28 elements: the headline pairs */
		for (int lg : {24, 26, 28}) {
			size_t n = (size_t)1 << lg;
			CU(cudaMalloc((void **)&dbuf, n * 2 + 16));
			for (gr_dtype dt : {GR_DT_F16, GR_DT_BF16, GR_DT_I8, GR_DT_F8E4M3}) {
				if (skip(dt))
					continue;
				for (int kind : {FINITE, FEW_BINADES, WIDE, SMALL}) {
					if (!fill(dt, kind, h, n + 1))
						continue;
					CU(cudaMemcpy(dbuf, h.data(), h.size(), cudaMemcpyHostToDevice));
					for (gr_op op : ops)
						if (gr_narrow_has_kernel(op, dt))
							one(op, dt, kind, h, dbuf, lg == 26, n, sms);
				}
			}
			CU(cudaFree(dbuf));
			printf("2^%d: %lu checks, %lu failures\n", lg, checks, failures);
		}
	}
	check_scratch("the end");
	printf("%lu launches, %lu checks, %lu failures\n", launches, checks, failures);
	return failures ? 1 : 0;
}
