/*
 * The narrow dtypes in the math layer (gr_reduce, moments, segments,
 * cumsum): each op over f16, bf16, f8e4m3, f8e5m2, i8, u8, i16 and u16
 * must give what the same op gives over the elements widened exactly to
 * f32, i32 or u32 (PROTOCOL.md), bit for bit. The widening here is the
 * tests' own, from the formats' definitions (tests/narrow-formats.h), not
 * math/widen.c. The arrays:
 * every bit pattern of each dtype, in order and shuffled; every finite
 * one; random ones at sizes around the block (GR_REDUCE_BLOCK) and tile
 * (GR_CUMSUM_TILE) edges, at an odd address too; pairs that cancel and
 * arrays of -0. Empty segments of the narrow integers hold their own
 * dtype's extremes.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/cumsum.h"
#include "math/reduce.h"
#include "math/segments.h"
#include "tests/check.h"
#include "tests/narrow-formats.h"
#include "tests/cpu/narrow-check.h"

static uint64_t rng_state = 0x853c49e6748fea9bu;
unsigned long checks;

uint64_t rnd(void)
{
	return check_rng(&rng_state);
}

const gr_dtype narrow[8] = { GR_DT_F16, GR_DT_BF16, GR_DT_F8E4M3, GR_DT_F8E5M2,
				   GR_DT_I8,  GR_DT_U8,   GR_DT_I16,    GR_DT_U16 };

/* ---- the widening, by the formats' definitions ------------------------ */

const test_format *format_of(gr_dtype dt)
{
	return test_format_named(gr_dtype_name(dt));
}

bool is_narrow_float(gr_dtype dt)
{
	return format_of(dt) != NULL;
}

unsigned bits_of_dtype(gr_dtype dt)
{
	return gr_dtype_size(dt) == 1 ? 8 : 16;
}

/* Every value of these formats is a float: exact. */
float decode(const test_format *f, uint32_t b)
{
	return (float)test_decode_double(f, b);
}

/* Element i of the narrow array at p, its raw bits. */
uint32_t raw(gr_dtype dt, const uint8_t *p, size_t i)
{
	return gr_dtype_size(dt) == 1 ? p[i] : (uint32_t)(p[2 * i] | p[2 * i + 1] << 8);
}

gr_dtype wide_of(gr_dtype dt)
{
	switch (dt) {
	case GR_DT_I8:
	case GR_DT_I16:
		return GR_DT_I32;
	case GR_DT_U8:
	case GR_DT_U16:
		return GR_DT_U32;
	default:
		return GR_DT_F32;
	}
}

/* n elements of dt at p into 4-byte elements of wide_of(dt) at out. */
void widen(gr_dtype dt, const uint8_t *p, size_t n, void *out)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t b = raw(dt, p, i);
		uint8_t *o = (uint8_t *)out + 4 * i;

		if (is_narrow_float(dt)) {
			float v = decode(format_of(dt), b);
			memcpy(o, &v, 4);
		} else {
			int32_t v = dt == GR_DT_I8    ? (int32_t)(b >= 0x80 ? (int)b - 0x100 : (int)b)
				    : dt == GR_DT_I16 ? (int32_t)(b >= 0x8000 ? (int)b - 0x10000 : (int)b)
						      : (int32_t)b;
			memcpy(o, &v, 4);
		}
	}
}

void put(gr_dtype dt, uint8_t *p, size_t i, uint32_t b)
{
	if (gr_dtype_size(dt) == 1) {
		p[i] = (uint8_t)b;
	} else {
		p[2 * i] = (uint8_t)b;
		p[2 * i + 1] = (uint8_t)(b >> 8);
	}
}

static bool is_nan_bits(gr_dtype dt, uint32_t b)
{
	return is_narrow_float(dt) && isnan(decode(format_of(dt), b));
}

/* ---- comparisons ------------------------------------------------------- */

/* The same 8 bytes, or both NaN for a float result (NaN payloads may
 * differ: PROTOCOL.md promises a NaN, not its bits). */
bool same_number(gr_kind kind, uint64_t a, uint64_t b)
{
	double x, y;

	if (a == b)
		return true;
	if (kind != GR_KIND_F64)
		return false;
	memcpy(&x, &a, 8);
	memcpy(&y, &b, 8);
	return isnan(x) && isnan(y);
}

static bool same_value(const gr_value *a, const gr_value *b)
{
	return a->kind == b->kind && same_number(a->kind, a->u, b->u);
}

static void check_reduce(gr_op op, gr_dtype dt, const uint8_t *p, size_t n, const char *what)
{
	const gr_dtype w = wide_of(dt);
	uint32_t *wide = malloc(n * 4 + 4);
	gr_partial pn, pw;
	gr_value vn, vw;
	gr_err en, ew;

	CHECK(wide);
	widen(dt, p, n, wide);
	gr_reduce(op, dt, p, n, &pn);
	gr_reduce(op, w, wide, n, &pw);
	CHECK_MSG(pn.count == n && pw.count == n, "%s %s %s n=%zu: count", gr_op_name(op),
		  gr_dtype_name(dt), what, n);
	if (op == GR_OP_MOMENTS) {
		for (uint64_t ddof = 0; ddof < 2; ddof++) {
			gr_moments mn, mw;

			en = gr_moments_finish(dt, &pn, ddof, &mn);
			ew = gr_moments_finish(w, &pw, ddof, &mw);
			CHECK_MSG(en == ew, "moments %s %s n=%zu ddof %llu: %d vs %d", gr_dtype_name(dt),
				  what, n, (unsigned long long)ddof, en, ew);
			if (en != GR_OK)
				continue;
			uint64_t a, b, c, d;
			memcpy(&a, &mn.mean, 8);
			memcpy(&b, &mw.mean, 8);
			memcpy(&c, &mn.var, 8);
			memcpy(&d, &mw.var, 8);
			CHECK_MSG(mn.count == mw.count && same_value(&mn.sum, &mw.sum) &&
					  same_value(&mn.min, &mw.min) && same_value(&mn.max, &mw.max) &&
					  same_number(GR_KIND_F64, a, b) && same_number(GR_KIND_F64, c, d),
				  "moments %s %s n=%zu ddof %llu: sum %a/%a mean %a/%a var %a/%a",
				  gr_dtype_name(dt), what, n, (unsigned long long)ddof, mn.sum.f,
				  mw.sum.f, mn.mean, mw.mean, mn.var, mw.var);
			checks++;
		}
	} else {
		en = gr_partial_finish(op, dt, &pn, &vn);
		ew = gr_partial_finish(op, w, &pw, &vw);
		CHECK_MSG(en == ew, "%s %s %s n=%zu: %d vs %d", gr_op_name(op), gr_dtype_name(dt),
			  what, n, en, ew);
		if (en == GR_OK) {
			CHECK_MSG(same_value(&vn, &vw), "%s %s %s n=%zu: %#llx vs %#llx (%a vs %a)",
				  gr_op_name(op), gr_dtype_name(dt), what, n, (unsigned long long)vn.u,
				  (unsigned long long)vw.u, vn.f, vw.f);
			if (gr_op_has_index(op))
				CHECK_MSG(pn.index == pw.index, "%s %s %s n=%zu: index %llu vs %llu",
					  gr_op_name(op), gr_dtype_name(dt), what, n,
					  (unsigned long long)pn.index, (unsigned long long)pw.index);
		}
		checks++;
	}
	free(wide);
}

/* ---- the exact sum, independently ------------------------------------- */

/*
 * A narrow float sum's result by definition: the elements' exact values
 * (m 2^e from the format, test_decode()) added in a fixed-point integer of
 * 32-bit digits, rounded once to nearest-even, with IEEE's specials and
 * signed zeros. Bit 0 weighs 2^-REF_LSB (every format's least bit is
 * 2^-133 or above); 12 digits hold sums of 2^20 bf16 maxima (below 2^148).
 */
#define REF_LSB 140
#define REF_DIGITS 12

static double exact_sum(gr_dtype dt, const uint8_t *p, size_t n)
{
	const test_format *f = format_of(dt);
	int64_t d[REF_DIGITS + 1] = { 0 };
	bool nan = false, pinf = false, ninf = false, all_negzero = n > 0;

	for (size_t i = 0; i < n; i++) {
		test_value v = test_decode(f, raw(dt, p, i));

		nan = nan || v.cls == TEST_NAN;
		pinf = pinf || (v.cls == TEST_INF && !v.neg);
		ninf = ninf || (v.cls == TEST_INF && v.neg);
		all_negzero = all_negzero && v.cls == TEST_FINITE && v.neg && v.m == 0;
		if (v.cls != TEST_FINITE)
			continue;
		const unsigned b = (unsigned)(v.e + REF_LSB);
		const uint64_t w = (uint64_t)v.m << (b % 32);
		const int64_t sg = v.neg ? -1 : 1;
		d[b / 32] += sg * (int64_t)(w & 0xffffffffu);
		d[b / 32 + 1] += sg * (int64_t)(w >> 32);
	}
	if (nan || (pinf && ninf))
		return NAN;
	if (pinf || ninf)
		return pinf ? INFINITY : -INFINITY;
	/* carries: digits in [0, 2^32), the sign in the top one */
	for (int k = 0; k < REF_DIGITS; k++) {
		int64_t c = d[k] >> 32; /* floor */
		d[k] -= c * ((int64_t)1 << 32);
		d[k + 1] += c;
	}
	const bool neg = d[REF_DIGITS] < 0;
	if (neg) { /* the magnitude: two's complement of the digits */
		int64_t c = 1;
		for (int k = 0; k < REF_DIGITS; k++) {
			d[k] = (int64_t)(~(uint64_t)d[k] & 0xffffffffu) + c;
			c = d[k] >> 32;
			d[k] &= 0xffffffff;
		}
	}
	int top = -1;
	for (int k = REF_DIGITS * 32 - 1; k >= 0 && top < 0; k--)
		if (d[k / 32] >> (k % 32) & 1)
			top = k;
	if (top < 0)
		return all_negzero ? -0.0 : 0.0;
	/* 53 bits from the top, the next one, and whether any below is set */
	uint64_t m = 0;
	int lsb = top - 52 > 0 ? top - 52 : 0;
	bool half = false, sticky = false;
	for (int k = top; k >= 0; k--) {
		const bool bit = d[k / 32] >> (k % 32) & 1;
		if (k >= lsb)
			m = m << 1 | bit;
		else if (k == lsb - 1)
			half = bit;
		else
			sticky = sticky || bit;
	}
	if (half && (sticky || (m & 1)))
		m++;
	const double r = ldexp((double)m, lsb - REF_LSB);
	return neg ? -r : r;
}

/* gr_reduce()'s sum of a narrow float array against exact_sum(), bit for
 * bit (any NaN for a NaN). */
static void check_sum_exact(gr_dtype dt, const uint8_t *p, size_t n, const char *what)
{
	gr_partial pn;
	gr_value v;
	const double want = exact_sum(dt, p, n);
	uint64_t a, b;

	gr_reduce(GR_OP_SUM, dt, p, n, &pn);
	CHECK(gr_partial_finish(GR_OP_SUM, dt, &pn, &v) == GR_OK);
	memcpy(&a, &v.f, 8);
	memcpy(&b, &want, 8);
	CHECK_MSG(same_number(GR_KIND_F64, a, b), "sum %s %s n=%zu: %a vs exact %a",
		  gr_dtype_name(dt), what, n, v.f, want);
	checks++;
}

static void check_all_ops(gr_dtype dt, const uint8_t *p, size_t n, const char *what)
{
	for (int op = 0; op < GR_OP_N; op++)
		check_reduce((gr_op)op, dt, p, n, what);
	if (is_narrow_float(dt))
		check_sum_exact(dt, p, n, what);
}

/* ---- arrays ------------------------------------------------------------ */

static void shuffle(gr_dtype dt, uint8_t *p, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(rnd() % i);
		uint32_t a = raw(dt, p, i - 1), b = raw(dt, p, j);

		put(dt, p, i - 1, b);
		put(dt, p, j, a);
	}
}

/* A random element: any bits, but a NaN or infinity only one time in
 * about 2000 (specials), so that most sums are finite. */
uint32_t random_bits(gr_dtype dt, bool specials)
{
	const uint32_t mask = (1u << bits_of_dtype(dt)) - 1;

	for (;;) {
		uint32_t b = (uint32_t)rnd() & mask;

		if (!is_narrow_float(dt) || isfinite(decode(format_of(dt), b)) ||
		    (specials && rnd() % 2000 == 0))
			return b;
	}
}

/* Every pattern in order, shuffled, and every finite one shuffled. */
static void check_every_pattern(gr_dtype dt)
{
	const size_t count = (size_t)1 << bits_of_dtype(dt);
	uint8_t *p = malloc(count * 2);
	size_t n = 0;

	CHECK(p);
	for (uint32_t b = 0; b < count; b++)
		put(dt, p, b, b);
	check_all_ops(dt, p, count, "every pattern");
	shuffle(dt, p, count);
	check_all_ops(dt, p, count, "every pattern shuffled");
	for (uint32_t b = 0; b < count; b++)
		if (!is_narrow_float(dt) || isfinite(decode(format_of(dt), b)))
			put(dt, p, n++, b);
	shuffle(dt, p, n);
	check_all_ops(dt, p, n, "every finite pattern");
	/* without the NaNs: both infinities, the sums NaN, min -inf */
	if (is_narrow_float(dt)) {
		n = 0;
		for (uint32_t b = 0; b < count; b++)
			if (!is_nan_bits(dt, b))
				put(dt, p, n++, b);
		check_all_ops(dt, p, n, "every pattern but NaN");
	}
	free(p);
}

const size_t edge_sizes[N_EDGE_SIZES] = { 0,
				     1,
				     2,
				     3,
				     31,
				     GR_CUMSUM_TILE - 1,
				     GR_CUMSUM_TILE,
				     GR_CUMSUM_TILE + 1,
				     GR_REDUCE_BLOCK - 1,
				     GR_REDUCE_BLOCK,
				     GR_REDUCE_BLOCK + 1,
				     2 * GR_REDUCE_BLOCK + GR_CUMSUM_TILE + 3,
				     3 * GR_REDUCE_BLOCK + 1 };

static void check_edges(gr_dtype dt)
{
	uint8_t *buf = malloc(EDGE_MAX * 2 + 8);

	CHECK(buf);
	for (int shift = 0; shift < 2; shift++) {
		uint8_t *p = buf + shift;

		for (size_t i = 0; i < EDGE_MAX; i++)
			put(dt, p, i, random_bits(dt, /* specials= */ shift == 1));
		for (size_t k = 0; k < sizeof(edge_sizes) / sizeof(edge_sizes[0]); k++)
			check_all_ops(dt, p, edge_sizes[k], shift ? "edges, odd address" : "edges");
	}
	free(buf);
}

/* x and -x in any order: an exact 0 (+0); nothing but -0: -0. */
static void check_cancellation(gr_dtype dt)
{
	const size_t n = 2 * GR_REDUCE_BLOCK + 10;
	const uint32_t sign = 1u << (bits_of_dtype(dt) - 1);
	uint8_t *p;

	if (!is_narrow_float(dt))
		return;
	p = malloc(n * 2);
	CHECK(p);
	for (size_t i = 0; i < n; i += 2) {
		uint32_t b = random_bits(dt, false);

		put(dt, p, i, b);
		put(dt, p, i + 1, b ^ sign);
	}
	shuffle(dt, p, n);
	check_all_ops(dt, p, n, "cancelling pairs");
	for (size_t i = 0; i < n; i++)
		put(dt, p, i, sign);
	check_all_ops(dt, p, n, "all -0");
	put(dt, p, n / 2, 0);
	check_all_ops(dt, p, n, "-0 and one +0");
	free(p);
}

/* ---- the sums in float lanes (math/xsum-narrow.c) --------------------- */

/* Their runs (64 adds a lane of 32 lanes), and each dtype's largest
 * finite element, its least subnormal, and 1. */
#define LANES_RUN 2048
static uint32_t max_finite(gr_dtype dt)
{
	return dt == GR_DT_F16 ? 0x7bff : dt == GR_DT_BF16 ? 0x7f7f : dt == GR_DT_F8E4M3 ? 0x7e : 0x7b;
}

static uint32_t one(gr_dtype dt)
{
	return dt == GR_DT_F16 ? 0x3c00 : dt == GR_DT_BF16 ? 0x3f80 : dt == GR_DT_F8E4M3 ? 0x38 : 0x3c;
}

/* An element within a few binades of 1, of either sign, the data a
 * plain sum is meant for: summed in f32 lanes without rounding. */
static uint32_t near_one(gr_dtype dt)
{
	const test_format *f = format_of(dt);
	const uint64_t r = rnd();
	const uint32_t ef = (uint32_t)f->bias - 3 + (uint32_t)(r % 7);

	return (uint32_t)(r >> 8 & 1) << (f->ebits + f->mbits) | ef << f->mbits |
	       ((uint32_t)(r >> 16) & ((1u << f->mbits) - 1));
}

static const size_t lanes_sizes[] = { 1,
				      31,
				      32,
				      33,
				      LANES_RUN - 1,
				      LANES_RUN,
				      LANES_RUN + 1,
				      LANES_RUN + 31,
				      LANES_RUN + 32,
				      2 * LANES_RUN + 5,
				      GR_REDUCE_BLOCK - 1,
				      GR_REDUCE_BLOCK,
				      GR_REDUCE_BLOCK + 1,
				      2 * GR_REDUCE_BLOCK + 33 };
#define LANES_MAX (2 * GR_REDUCE_BLOCK + 33)

#if defined(__x86_64__)
#include <xmmintrin.h>
/* The caller's MXCSR: its precision flag (bit 5) survives the sums, and
 * with DAZ (bit 6), FTZ (bit 15) or another rounding mode the sums take
 * the path that needs no flag and stay exact (on normal elements). */
static void check_mxcsr(gr_dtype dt, const uint8_t *p, size_t n)
{
	const unsigned c0 = _mm_getcsr();

	_mm_setcsr(c0 | 0x20);
	check_sum_exact(dt, p, n, "precision flag set");
	CHECK_MSG(_mm_getcsr() & 0x20, "sum %s: the caller's precision flag was lost",
		  gr_dtype_name(dt));
	_mm_setcsr((c0 & ~0x20u) | 0x40 | 0x8000);
	check_sum_exact(dt, p, n, "DAZ and FTZ");
	_mm_setcsr((c0 & ~0x20u) | 0x6000);
	gr_partial pn;
	gr_reduce(GR_OP_SUM, dt, p, n, &pn);
	_mm_setcsr(c0);
	gr_value v;
	CHECK(gr_partial_finish(GR_OP_SUM, dt, &pn, &v) == GR_OK);
	CHECK_MSG(v.f == exact_sum(dt, p, n), "sum %s, rounding toward zero: %a", gr_dtype_name(dt),
		  v.f);
}
#else
static void check_mxcsr(gr_dtype dt, const uint8_t *p, size_t n)
{
	(void)dt, (void)p, (void)n;
}
#endif

static void check_lanes(gr_dtype dt)
{
	uint8_t *buf = malloc(LANES_MAX * 2 + 8);
	const uint32_t sign = 1u << (bits_of_dtype(dt) - 1);
	const uint32_t tiny = 0x0001, big = max_finite(dt);

	CHECK(buf);
	/* near 1: exact in f32 lanes, every size around a run and a block */
	for (int shift = 0; shift < 2; shift++) {
		uint8_t *p = buf + shift;

		for (size_t i = 0; i < LANES_MAX; i++)
			put(dt, p, i, near_one(dt));
		for (size_t k = 0; k < sizeof(lanes_sizes) / sizeof(lanes_sizes[0]); k++)
			check_sum_exact(dt, p, lanes_sizes[k], shift ? "near 1, odd address" : "near 1");
		check_mxcsr(dt, p, 2 * LANES_RUN + 5);
	}
	/* one element that makes an f32 lane round (the least subnormal
	 * beside 1s: inexact but for E4M3, whose grid holds it), or a NaN or
	 * infinity, before, at and after the first run's end, in the last
	 * step and in the rest after it */
	const size_t n = 2 * LANES_RUN + 37;
	const size_t at[] = { 0, 5, LANES_RUN - 1, LANES_RUN, LANES_RUN + 1, n - 38, n - 6, n - 1 };
	const uint32_t spoil[] = { tiny, tiny | sign, big, big | sign,
				   dt == GR_DT_F8E4M3 ? 0x7f : (uint32_t)(sign - 1) };
	for (size_t s = 0; s < sizeof(spoil) / sizeof(spoil[0]); s++)
		for (size_t a = 0; a < sizeof(at) / sizeof(at[0]); a++) {
			for (size_t i = 0; i < n; i++)
				put(dt, buf, i, rnd() & 1 ? one(dt) : one(dt) | sign);
			put(dt, buf, at[a], spoil[s]);
			check_sum_exact(dt, buf, n, "one element spoils the f32 lanes");
		}
	/* a lane's worst case: the largest element a block long, of one
	 * sign (an f32 overflow for bf16), or of both */
	for (size_t i = 0; i < GR_REDUCE_BLOCK + 1; i++)
		put(dt, buf, i, big);
	check_sum_exact(dt, buf, GR_REDUCE_BLOCK + 1, "largest");
	for (size_t i = 0; i < GR_REDUCE_BLOCK + 1; i++)
		put(dt, buf, i, big | (i % 3 == 0 ? sign : 0));
	check_sum_exact(dt, buf, GR_REDUCE_BLOCK + 1, "largest, both signs");
	/* the largest and the least together (E4M3's grid), and subnormals
	 * alone (f32 lanes add bf16's subnormals exactly) */
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, buf, i, i % 65 == 0 ? tiny : big | (rnd() & 1 ? sign : 0));
	check_sum_exact(dt, buf, GR_REDUCE_BLOCK, "largest and least");
	/* each lane's last add of a run the least after the largest ones:
	 * E4M3's bound on a run (its grid, no flag) at its edge */
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, buf, i, i / 32 % 64 == 63 ? tiny : big);
	check_sum_exact(dt, buf, GR_REDUCE_BLOCK, "the least after a run of the largest");
	/* halves of the split's unit (2^-6 for f16 and E5M2: ties to even),
	 * with the least to spoil the f32 lanes */
	const test_format *f = format_of(dt);
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++) {
		const uint32_t k = (uint32_t)(rnd() % 8) + (f->ieee ? (uint32_t)f->bias - 7 : 1);
		put(dt, buf, i, i == 77 ? tiny : (k << f->mbits | (rnd() & 1 ? sign : 0)));
	}
	check_sum_exact(dt, buf, GR_REDUCE_BLOCK, "2^-7 to 2^0 and the least");
	const uint32_t sub_mask = (1u << format_of(dt)->mbits) - 1;
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, buf, i, ((uint32_t)rnd() & sub_mask) | (rnd() & 1 ? sign : 0));
	check_sum_exact(dt, buf, GR_REDUCE_BLOCK, "subnormals");
	/* cancellation to exactly 0 in f32 lanes: +0; -0 alone: -0 */
	for (size_t i = 0; i < 2 * LANES_RUN; i += 2) {
		uint32_t b = near_one(dt);
		put(dt, buf, i, b);
		put(dt, buf, i + 1, b ^ sign);
	}
	check_sum_exact(dt, buf, 2 * LANES_RUN, "near 1, cancelling");
	shuffle(dt, buf, 2 * LANES_RUN);
	check_sum_exact(dt, buf, 2 * LANES_RUN, "near 1, cancelling, shuffled");
	for (size_t i = 0; i < LANES_RUN + 7; i++)
		put(dt, buf, i, sign);
	check_sum_exact(dt, buf, LANES_RUN + 7, "-0");
	put(dt, buf, LANES_RUN + 3, 0);
	check_sum_exact(dt, buf, LANES_RUN + 7, "-0 and one +0 in the rest");
	free(buf);
}

/* The test's own widening, checked at a few points of each format. */
static void check_decode(void)
{
	CHECK(decode(format_of(GR_DT_F16), 0x3c00) == 1.0f);
	CHECK(decode(format_of(GR_DT_F16), 0x7bff) == 65504.0f);
	CHECK(decode(format_of(GR_DT_F16), 0x0001) == ldexpf(1, -24));
	CHECK(decode(format_of(GR_DT_F16), 0xfc00) == -INFINITY);
	CHECK(isnan(decode(format_of(GR_DT_F16), 0x7c01)));
	CHECK(decode(format_of(GR_DT_BF16), 0x3f80) == 1.0f);
	CHECK(decode(format_of(GR_DT_BF16), 0xc049) == -3.140625f);
	CHECK(decode(format_of(GR_DT_BF16), 0x0001) == ldexpf(1, -133));
	CHECK(decode(format_of(GR_DT_F8E4M3), 0x7e) == 448.0f);
	CHECK(decode(format_of(GR_DT_F8E4M3), 0x78) == 256.0f);
	CHECK(decode(format_of(GR_DT_F8E4M3), 0x01) == ldexpf(1, -9));
	CHECK(isnan(decode(format_of(GR_DT_F8E4M3), 0xff)));
	CHECK(decode(format_of(GR_DT_F8E5M2), 0x7b) == 57344.0f);
	CHECK(decode(format_of(GR_DT_F8E5M2), 0x7c) == INFINITY);
	CHECK(isnan(decode(format_of(GR_DT_F8E5M2), 0x7d)));
	CHECK(signbit(decode(format_of(GR_DT_F8E5M2), 0x80)));
	int32_t v;
	uint8_t b[2] = { 0x00, 0x80 };
	widen(GR_DT_I16, b, 1, &v);
	CHECK(v == -32768);
	widen(GR_DT_I8, b + 1, 1, &v);
	CHECK(v == -128);
	widen(GR_DT_U8, b + 1, 1, &v);
	CHECK(v == 128);
}

int main(void)
{
	check_decode();
	for (size_t i = 0; i < sizeof(narrow) / sizeof(narrow[0]); i++) {
		check_every_pattern(narrow[i]);
		check_edges(narrow[i]);
		check_cancellation(narrow[i]);
		if (is_narrow_float(narrow[i]))
			check_lanes(narrow[i]);
		check_cumsum(narrow[i]);
		check_segments(narrow[i]);
	}
	printf("%lu narrow checks\n", checks);
	return 0;
}
