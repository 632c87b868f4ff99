/*
 * The narrow floats' exact sums (f16, bf16, f8e5m2) as math/xsum-narrow.c
 * takes them: f32 lanes run by run, a run that rounds added again in
 * double lanes, short runs once a block has rounded and for the blocks
 * after it in the same thread, the end of a block in double lanes, and
 * the general ways where those do not apply. Each case is an arrangement
 * of runs that round and runs that do not, in one order and the other,
 * within a block and from block to block: every sum must be the exact
 * sum rounded once, whatever path each block took. The reference is this
 * file's own: the elements' values (tests/narrow-formats.h) added as
 * integers, positive and negative apart, and rounded to nearest-even.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/reduce.h"
#include "tests/check.h"
#include "tests/narrow-formats.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static unsigned long checks;

static uint64_t rnd(void)
{
	return check_rng(&rng_state);
}

static const test_format *format_of(gr_dtype dt)
{
	return test_format_named(gr_dtype_name(dt));
}

static size_t size_of(gr_dtype dt)
{
	return gr_dtype_size(dt);
}

static uint32_t get(gr_dtype dt, const uint8_t *p, size_t i)
{
	return size_of(dt) == 1 ? p[i] : (uint32_t)(p[2 * i] | p[2 * i + 1] << 8);
}

static void put(gr_dtype dt, uint8_t *p, size_t i, uint32_t b)
{
	if (size_of(dt) == 1) {
		p[i] = (uint8_t)b;
	} else {
		p[2 * i] = (uint8_t)b;
		p[2 * i + 1] = (uint8_t)(b >> 8);
	}
}

/* ---- the reference ---------------------------------------------------- */

/*
 * Magnitudes as little-endian 32-bit digits, bit 0 weighing 2^-BIG_LSB:
 * every format's least bit is 2^-133 or above, and 2^17 bf16 maxima stay
 * below 2^146, so ten digits (320 bits) hold any sum here.
 */
#define BIG_LSB 140
#define BIG_DIGITS 10

typedef struct big {
	uint32_t d[BIG_DIGITS];
} big;

static void big_add(big *a, uint64_t m, unsigned bit)
{
	unsigned k = bit / 32;
	uint64_t carry = m << (bit % 32); /* m < 2^11: no bit lost */

	for (; carry && k < BIG_DIGITS; k++) {
		carry += a->d[k];
		a->d[k] = (uint32_t)carry;
		carry >>= 32;
	}
	CHECK(carry == 0);
}

static int big_cmp(const big *a, const big *b)
{
	for (int k = BIG_DIGITS - 1; k >= 0; k--)
		if (a->d[k] != b->d[k])
			return a->d[k] < b->d[k] ? -1 : 1;
	return 0;
}

/* a -= b, a >= b. */
static void big_sub(big *a, const big *b)
{
	int64_t borrow = 0;

	for (int k = 0; k < BIG_DIGITS; k++) {
		int64_t t = (int64_t)a->d[k] - b->d[k] - borrow;
		borrow = t < 0;
		a->d[k] = (uint32_t)(t + (borrow ? (int64_t)1 << 32 : 0));
	}
}

static bool big_bit(const big *a, int bit)
{
	return a->d[bit / 32] >> (bit % 32) & 1;
}

/* a's value rounded to nearest-even, negated when neg; 0 for zero. */
static double big_round(const big *a, bool neg)
{
	int top = BIG_DIGITS * 32 - 1;

	while (top >= 0 && !big_bit(a, top))
		top--;
	if (top < 0)
		return 0;
	const int lsb = top >= 52 ? top - 52 : 0;
	uint64_t m = 0;
	bool sticky = false;

	for (int k = top; k >= lsb; k--)
		m = m << 1 | big_bit(a, k);
	for (int k = lsb - 2; k >= 0 && !sticky; k--)
		sticky = big_bit(a, k);
	if (lsb > 0 && big_bit(a, lsb - 1) && (sticky || (m & 1)))
		m++; /* 2^53 at most: ldexp stays exact */
	const double r = ldexp((double)m, lsb - BIG_LSB);
	return neg ? -r : r;
}

/* The exact sum of the n elements at p, rounded once, with IEEE's
 * specials and signed zeros. */
static double ref_sum(gr_dtype dt, const uint8_t *p, size_t n)
{
	const test_format *f = format_of(dt);
	big pos = { { 0 } }, neg = { { 0 } };
	bool nan = false, pinf = false, ninf = false, negzero = n > 0;

	for (size_t i = 0; i < n; i++) {
		const test_value v = test_decode(f, get(dt, p, i));

		nan = nan || v.cls == TEST_NAN;
		pinf = pinf || (v.cls == TEST_INF && !v.neg);
		ninf = ninf || (v.cls == TEST_INF && v.neg);
		negzero = negzero && v.cls == TEST_FINITE && v.neg && v.m == 0;
		if (v.cls == TEST_FINITE && v.m)
			big_add(v.neg ? &neg : &pos, v.m, (unsigned)(v.e + BIG_LSB));
	}
	if (nan || (pinf && ninf))
		return NAN;
	if (pinf || ninf)
		return pinf ? INFINITY : -INFINITY;
	const int c = big_cmp(&pos, &neg);
	if (c == 0)
		return negzero ? -0.0 : 0.0;
	if (c > 0) {
		big_sub(&pos, &neg);
		return big_round(&pos, false);
	}
	big_sub(&neg, &pos);
	return big_round(&neg, true);
}

/* ---- checks ----------------------------------------------------------- */

static double sum_of(gr_dtype dt, const uint8_t *p, size_t n)
{
	gr_partial pn;
	gr_value v;

	gr_reduce(GR_OP_SUM, dt, p, n, &pn);
	CHECK(gr_partial_finish(GR_OP_SUM, dt, &pn, &v) == GR_OK);
	return v.f;
}

static void check_sum(gr_dtype dt, const uint8_t *p, size_t n, const char *what)
{
	const double want = ref_sum(dt, p, n), got = sum_of(dt, p, n);
	uint64_t a, b;

	memcpy(&a, &got, 8);
	memcpy(&b, &want, 8);
	CHECK_MSG(a == b || (isnan(got) && isnan(want)), "sum %s %s n=%zu: %a, exact %a",
		  gr_dtype_name(dt), what, n, got, want);
	checks++;
}

/* Each block of the n elements alone, in order (so that each starts as
 * the one before it left this thread), then all of them. */
static void check_blocks(gr_dtype dt, const uint8_t *p, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i += GR_REDUCE_BLOCK)
		check_sum(dt, p + size_of(dt) * i, n - i < GR_REDUCE_BLOCK ? n - i : GR_REDUCE_BLOCK,
			  what);
	check_sum(dt, p, n, what);
}

/* ---- the data --------------------------------------------------------- */

/*
 * The elements most runs are made of: within a few binades of 1 for f16
 * and bf16, of 2^14 for f8e5m2 (whose 3-bit significands would hold
 * sums near 1 exactly), either sign; summed in f32 lanes without
 * rounding. A spoiler makes a lane round there: its least bit is below
 * what f32 holds beside such sums. normal_spoiler() is a normal value
 * (DAZ leaves it alone), mid_spoiler() one that double lanes still hold
 * beside them, wide_spoiler() one that they do not (bf16's least
 * subnormal).
 */
static uint32_t plain_elem(gr_dtype dt)
{
	const test_format *f = format_of(dt);
	const uint64_t r = rnd();
	const int centre = dt == GR_DT_F8E5M2 ? f->bias + 13 : f->bias;
	const uint32_t ef = (uint32_t)(centre - 2 + (int)(r % 4));

	return (uint32_t)(r >> 8 & 1) << (f->ebits + f->mbits) | ef << f->mbits |
	       ((uint32_t)(r >> 16) & ((1u << f->mbits) - 1));
}

static uint32_t normal_spoiler(gr_dtype dt)
{
	/* the least normal binade, its last bit set */
	return dt == GR_DT_F16 ? 0x0401 : dt == GR_DT_BF16 ? 0x0081 : 0x05;
}

static uint32_t mid_spoiler(gr_dtype dt)
{
	/* f16: 2^-24; bf16: 2^-30 (1 + 2^-7); f8e5m2: 2^-16 */
	return dt == GR_DT_F16 ? 0x0001 : dt == GR_DT_BF16 ? 0x3081 : 0x01;
}

static uint32_t wide_spoiler(gr_dtype dt)
{
	return dt == GR_DT_BF16 ? 0x0001 : mid_spoiler(dt);
}

static uint32_t sign_bit(gr_dtype dt)
{
	return size_of(dt) == 1 ? 0x80 : 0x8000;
}

static void fill_plain(gr_dtype dt, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(dt, p, i, plain_elem(dt));
}

/* Where a block's runs start and end (the kernel's: a long run is 64
 * adds a lane, 4096 f16 or 2048 bf16 and f8e5m2 elements; a short one
 * 768 f16, 1024 bf16 and 384 f8e5m2), and where its last 1024 begin.
 * The positions hit the first and last element of runs of both lengths,
 * the end of a block and the rest after the last whole step. */
static const size_t spots[] = { 0,    1,    383,  384,  767,  768,  1023, 1024, 2047, 2048,
				4095, 4096, 5000, 9000, 20000, 31743, 31744, 32000, 32766, 32767 };
#define NSPOTS (sizeof(spots) / sizeof(spots[0]))

/* A block of plain elements with a spoiler at each spot whose bit is set
 * in mask (an odd number of them: the spoilers do not cancel). */
static void fill_block(gr_dtype dt, uint8_t *p, uint32_t mask, uint32_t spoiler)
{
	fill_plain(dt, p, GR_REDUCE_BLOCK);
	for (size_t s = 0; s < NSPOTS; s++)
		if (mask >> s & 1)
			put(dt, p, spots[s], spoiler | (rnd() & 1 ? sign_bit(dt) : 0));
}

/* ---- the cases -------------------------------------------------------- */

/*
 * Blocks that round and blocks that do not, one after the other and
 * more than the blocks a thread keeps short runs for (16), so that it
 * takes long runs again; each spoiler alone, and in pairs and more (a run
 * that rounds after one that did, in a short run, in the last 1024).
 */
static void check_switching(gr_dtype dt, uint32_t spoiler, const char *what)
{
	const size_t nblocks = 48;
	uint8_t *buf = malloc(nblocks * GR_REDUCE_BLOCK * size_of(dt) + 1);

	CHECK(buf);
	for (int shift = 0; shift < 2; shift++) {
		uint8_t *p = buf + shift;

		for (size_t b = 0; b < nblocks; b++) {
			uint32_t mask = 0;

			if (b < NSPOTS)
				mask = 1u << b; /* one spoiler, at each spot in turn */
			else if (b % 8 == 1)
				mask = (uint32_t)rnd() & ((1u << NSPOTS) - 1);
			else if (b == nblocks - 1)
				mask = 1u << (NSPOTS - 3); /* after 7 blocks without */
			fill_block(dt, p + size_of(dt) * b * GR_REDUCE_BLOCK, mask, spoiler);
		}
		check_blocks(dt, p, nblocks * GR_REDUCE_BLOCK, what);
		/* a block that does not round after long runs came back,
		 * then every spot alone again */
		fill_block(dt, p, 0, spoiler);
		check_sum(dt, p, GR_REDUCE_BLOCK, what);
		for (size_t s = 0; s < NSPOTS; s++) {
			fill_block(dt, p, 1u << s, spoiler);
			check_sum(dt, p, GR_REDUCE_BLOCK, what);
			fill_block(dt, p, 0, spoiler);
			check_sum(dt, p, GR_REDUCE_BLOCK, what);
		}
	}
	free(buf);
}

/* Blocks short of a whole one, of sizes around a step (64 f16, 32
 * bf16 and f8e5m2 elements) and a run, with a spoiler in the last step,
 * in the rest after it and in the run before: after a block that rounded
 * (short runs) and after one that did not. */
static void check_sizes(gr_dtype dt)
{
	static const size_t sizes[] = { 1,    31,   32,   33,   63,   64,   65,   383,  385,
					767,  769,  1023, 1025, 1087, 2049, 4095, 4097, 4159,
					5000, 8191, 30000, 32703, 32705, 32767 };
	uint8_t *b = malloc(2 * GR_REDUCE_BLOCK * size_of(dt));

	CHECK(b);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		const size_t n = sizes[k];
		const size_t at[] = { n - 1, n > 40 ? n - 40 : 0, n > 70 ? n - 70 : 0,
				      n > 1100 ? n - 1100 : 0 };

		for (size_t a = 0; a < sizeof(at) / sizeof(at[0]); a++)
			for (int before = 0; before < 2; before++) {
				/* the block before sets how this one starts */
				fill_block(dt, b, before ? 1 : 0, mid_spoiler(dt));
				check_sum(dt, b, GR_REDUCE_BLOCK, "the block before");
				fill_plain(dt, b, n);
				put(dt, b, at[a], mid_spoiler(dt));
				check_sum(dt, b, n, "a spoiler near the end");
				fill_plain(dt, b, n);
				check_sum(dt, b, n, "no spoiler");
			}
	}
	free(b);
}

/*
 * f16 sums beyond 53 bits (a block of the largest values and a least
 * one: 2^31 on a grid of 2^-24, not a double), of either sign, after
 * long and short runs; and large values that cancel around small ones.
 */
static void check_wide_f16(void)
{
	const gr_dtype dt = GR_DT_F16;
	uint8_t *b = malloc(GR_REDUCE_BLOCK * 2);

	CHECK(b);
	for (int neg = 0; neg < 2; neg++)
		for (int spoil_first = 0; spoil_first < 2; spoil_first++) {
			for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
				put(dt, b, i, 0x7bff | (neg ? 0x8000 : 0));
			put(dt, b, spoil_first ? 3 : GR_REDUCE_BLOCK - 2, 0x0001);
			check_sum(dt, b, GR_REDUCE_BLOCK, "largest and least");
			check_sum(dt, b, GR_REDUCE_BLOCK - 7, "largest and least, a rest");
			put(dt, b, 9, 0x8001);
			check_sum(dt, b, GR_REDUCE_BLOCK, "largest and two least");
		}
	/* a block's partial holds its sum exactly: the next one cancels
	 * its large part */
	uint8_t *two = malloc(2 * GR_REDUCE_BLOCK * 2);
	CHECK(two);
	for (size_t i = 0; i < 2 * GR_REDUCE_BLOCK; i++)
		put(dt, two, i, i < GR_REDUCE_BLOCK ? 0x7bff : 0xfbff);
	put(dt, two, 5, 0x0001);
	check_sum(dt, two, 2 * GR_REDUCE_BLOCK, "largest, then cancelled");
	free(two);
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, b, i, i % 2 ? 0x7bff : 0xfbff);
	put(dt, b, 100, 0x0001);
	put(dt, b, 20001, 0x0401);
	check_sum(dt, b, GR_REDUCE_BLOCK, "largest cancelling");
	free(b);
}

/* bf16: runs that round in f32 lanes but not in double lanes; runs whose
 * double lanes round too; runs exact in f32 lanes whose lanes round when
 * flushed into double lanes (2^100 in one run, 2^-100 in the next), with
 * runs after them that round and runs that do not. */
static void check_bf16_lanes(void)
{
	const gr_dtype dt = GR_DT_BF16;
	uint8_t *b = malloc(4 * GR_REDUCE_BLOCK * 2);

	CHECK(b);
	for (size_t blk = 0; blk < 4; blk++)
		fill_block(dt, b + 2 * blk * GR_REDUCE_BLOCK, blk == 1 ? 0x5 : blk == 3 ? 0x40000 : 0,
			   blk == 3 ? wide_spoiler(dt) : mid_spoiler(dt));
	check_blocks(dt, b, 4 * GR_REDUCE_BLOCK, "double lanes hold, then not");
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, b, i, i < 4096 ? 0x7180 | (i % 5 == 0 ? 0x8000 : 0) : 0x0d80);
	check_sum(dt, b, GR_REDUCE_BLOCK, "2^100 then 2^-100");
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, b, i, i < 4096 ? 0x7180 | (i % 2 ? 0x8000 : 0) : 0x0d80);
	check_sum(dt, b, GR_REDUCE_BLOCK, "2^100 cancelling, then 2^-100");
	/* the flush after the 2^-100s rounds, and the runs after it, which
	 * cancel the 2^100s, do not: 2^-89 */
	for (size_t i = 0; i < GR_REDUCE_BLOCK; i++)
		put(dt, b, i, i < 2048 ? 0x7180 : i < 4096 ? 0x0d80 : i < 6144 ? 0xf180 : 0);
	check_sum(dt, b, GR_REDUCE_BLOCK, "2^100, 2^-100, -2^100");
	free(b);
}

/* Signed zeros: a block of -0 and one of -0 with a +0, after a block
 * that rounded and after one that did not, with a rest after the last
 * step; and the sum of values that cancel exactly (+0). */
static void check_zeros(gr_dtype dt)
{
	uint8_t *b = malloc(GR_REDUCE_BLOCK * size_of(dt));
	const size_t n = GR_REDUCE_BLOCK - 5;

	CHECK(b);
	for (int before = 0; before < 2; before++) {
		fill_block(dt, b, before ? 0x10 : 0, mid_spoiler(dt));
		check_sum(dt, b, GR_REDUCE_BLOCK, "the block before");
		for (size_t i = 0; i < n; i++)
			put(dt, b, i, sign_bit(dt));
		check_sum(dt, b, n, "all -0");
		put(dt, b, n - 2, 0);
		check_sum(dt, b, n, "-0 and one +0");
		for (size_t i = 0; i < n; i++)
			put(dt, b, i, i < n / 2 ? plain_elem(dt) : get(dt, b, i - n / 2) ^ sign_bit(dt));
		put(dt, b, n - 1, sign_bit(dt));
		check_sum(dt, b, n, "cancelling pairs");
		put(dt, b, 7, mid_spoiler(dt));
		put(dt, b, 7 + n / 2, mid_spoiler(dt) | sign_bit(dt));
		check_sum(dt, b, n, "cancelling pairs and spoilers");
	}
	free(b);
}

/* NaN and infinities in a block of short runs, in its last 1024 and in
 * the rest, each after a spoiler and before one. */
static void check_specials(gr_dtype dt)
{
	const uint32_t inf = size_of(dt) == 1 ? 0x7c : dt == GR_DT_F16 ? 0x7c00 : 0x7f80;
	const uint32_t specials[] = { inf, inf | sign_bit(dt), inf | 1 };
	const size_t at[] = { 10, 4100, 32000, 32767 };
	const size_t n = GR_REDUCE_BLOCK;
	uint8_t *b = malloc(n * size_of(dt));

	CHECK(b);
	for (size_t s = 0; s < 3; s++)
		for (size_t a = 0; a < 4; a++)
			for (int spoil_after = 0; spoil_after < 2; spoil_after++) {
				fill_block(dt, b, 1u << 2, mid_spoiler(dt));
				put(dt, b, at[a], specials[s]);
				put(dt, b, spoil_after ? 32100 : 5, mid_spoiler(dt));
				check_sum(dt, b, n, "a special");
				check_sum(dt, b, n - 1, "a special, a rest");
			}
	/* both infinities: NaN */
	fill_block(dt, b, 0, 0);
	put(dt, b, 77, inf);
	put(dt, b, 30000, inf | sign_bit(dt));
	check_sum(dt, b, n, "both infinities");
	free(b);
}

/* Every pattern of the dtype: the finite ones shuffled, block after
 * block, starting with long runs and after a block that rounded; all of
 * them in order (a NaN). */
static void check_patterns(gr_dtype dt)
{
	const size_t count = (size_t)1 << (8 * size_of(dt));
	const test_format *f = format_of(dt);
	/* f8e5m2's 248 finite patterns, over and over, a block and more */
	const size_t n = count > GR_REDUCE_BLOCK ? count : 2 * GR_REDUCE_BLOCK + 77;
	uint8_t *b = malloc(n * size_of(dt));
	size_t m = 0;

	CHECK(b);
	while (m < n)
		for (uint32_t v = 0; v < count && m < n; v++)
			if (test_decode(f, v).cls == TEST_FINITE)
				put(dt, b, m++, v);
	for (size_t i = m; i > 1; i--) {
		const size_t j = (size_t)(rnd() % i);
		const uint32_t t = get(dt, b, i - 1);

		put(dt, b, i - 1, get(dt, b, j));
		put(dt, b, j, t);
	}
	for (int before = 0; before < 2; before++) {
		uint8_t *blk = malloc(GR_REDUCE_BLOCK * size_of(dt));

		CHECK(blk);
		fill_block(dt, blk, before ? 1 : 0, mid_spoiler(dt));
		check_sum(dt, blk, GR_REDUCE_BLOCK, "the block before");
		free(blk);
		check_blocks(dt, b, m, "every finite pattern");
	}
	if (count <= n) {
		for (uint32_t v = 0; v < count; v++)
			put(dt, b, v, v);
		check_sum(dt, b, count, "every pattern");
	}
	free(b);
}

#if defined(__x86_64__)
#include <xmmintrin.h>

/*
 * The caller's MXCSR around sums whose runs round (the kernel clears the
 * precision flag mid-block) and end in double lanes: its precision flag
 * set on entry is set on return, every other bit as it was; with DAZ and
 * FTZ, or rounding toward zero, the sums are still exact (normal
 * elements only: DAZ reads subnormals as zero).
 */
static void check_mxcsr(gr_dtype dt)
{
	const unsigned c0 = _mm_getcsr();
	const unsigned modes[] = { c0 & ~0x3fu, (c0 & ~0x3fu) | 0x20, (c0 & ~0x3fu) | 0x40 | 0x8000,
				   (c0 & ~0x3fu) | 0x6000, (c0 & ~0x3fu) | 0x20 | 0x1f80 };
	const size_t n = 3 * GR_REDUCE_BLOCK;
	uint8_t *b = malloc(n * size_of(dt));

	CHECK(b);
	fill_block(dt, b, 0x5, normal_spoiler(dt));
	fill_block(dt, b + size_of(dt) * GR_REDUCE_BLOCK, 1u << 18, normal_spoiler(dt));
	fill_block(dt, b + 2 * size_of(dt) * GR_REDUCE_BLOCK, 0, normal_spoiler(dt));
	for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) {
		const double want = ref_sum(dt, b, n);
		gr_partial pn;
		gr_value v;

		_mm_setcsr(modes[k]);
		gr_reduce(GR_OP_SUM, dt, b, n, &pn);
		const unsigned c1 = _mm_getcsr();
		_mm_setcsr(c0);
		CHECK_MSG((c1 & ~0x3fu) == (modes[k] & ~0x3fu), "sum %s: MXCSR %#x became %#x",
			  gr_dtype_name(dt), modes[k], c1);
		CHECK_MSG(!(modes[k] & 0x20) || (c1 & 0x20),
			  "sum %s: the caller's precision flag was lost", gr_dtype_name(dt));
		CHECK(gr_partial_finish(GR_OP_SUM, dt, &pn, &v) == GR_OK);
		CHECK_MSG(v.f == want, "sum %s, MXCSR %#x: %a, exact %a", gr_dtype_name(dt),
			  modes[k], v.f, want);
		checks++;
	}
	free(b);
}
#else
static void check_mxcsr(gr_dtype dt)
{
	(void)dt;
}
#endif

/* The reference against sums known by hand. */
static void check_reference(void)
{
	uint8_t b[8];

	put(GR_DT_F16, b, 0, 0x3c00); /* 1 */
	put(GR_DT_F16, b, 1, 0x0001); /* 2^-24 */
	put(GR_DT_F16, b, 2, 0x0001);
	CHECK(ref_sum(GR_DT_F16, b, 2) == 1.0 + 0x1p-24);
	put(GR_DT_BF16, b, 0, 0x7f7f); /* the largest, 0x1.fep127 */
	put(GR_DT_BF16, b, 1, 0x0001); /* 2^-133 */
	CHECK(ref_sum(GR_DT_BF16, b, 2) == 0x1.fep127);
	put(GR_DT_BF16, b, 0, 0x3f80); /* 1 */
	put(GR_DT_BF16, b, 1, 0x2500); /* 2^-53, half an ulp of 1 */
	CHECK(ref_sum(GR_DT_BF16, b, 2) == 1.0); /* a tie: to even */
	put(GR_DT_BF16, b, 2, 0x0001);
	CHECK(ref_sum(GR_DT_BF16, b, 3) == 1.0 + 0x1p-52); /* above half */
	put(GR_DT_BF16, b, 2, 0x2500);
	CHECK(ref_sum(GR_DT_BF16, b, 3) == 1.0 + 0x1p-52);
	put(GR_DT_BF16, b, 0, 0x3f81); /* 1 + 2^-7 */
	put(GR_DT_BF16, b, 1, 0xa500); /* -2^-53 */
	CHECK(ref_sum(GR_DT_BF16, b, 2) == 1.0 + 0x1p-7 - 0x1p-53);
	put(GR_DT_F8E5M2, b, 0, 0x80); /* -0 */
	put(GR_DT_F8E5M2, b, 1, 0x80);
	CHECK(signbit(ref_sum(GR_DT_F8E5M2, b, 2)) && ref_sum(GR_DT_F8E5M2, b, 2) == 0);
	put(GR_DT_F8E5M2, b, 1, 0x00);
	CHECK(!signbit(ref_sum(GR_DT_F8E5M2, b, 2)));
}

int main(void)
{
	static const gr_dtype dts[] = { GR_DT_F16, GR_DT_BF16, GR_DT_F8E5M2 };

	check_reference();
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
		const gr_dtype dt = dts[i];

		check_switching(dt, mid_spoiler(dt), "runs that round and runs that do not");
		check_switching(dt, normal_spoiler(dt), "normal spoilers");
		if (dt == GR_DT_BF16)
			check_switching(dt, wide_spoiler(dt), "spoilers double lanes drop");
		check_sizes(dt);
		check_zeros(dt);
		check_specials(dt);
		check_patterns(dt);
		check_mxcsr(dt);
	}
	check_wide_f16();
	check_bf16_lanes();
	printf("%lu checks of the narrow sums' paths\n", checks);
	return 0;
}
