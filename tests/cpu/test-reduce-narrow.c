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

static uint64_t rng_state = 0x853c49e6748fea9bu;
static unsigned long checks;

static uint64_t rnd(void)
{
	return check_rng(&rng_state);
}

static const gr_dtype narrow[] = { GR_DT_F16, GR_DT_BF16, GR_DT_F8E4M3, GR_DT_F8E5M2,
				   GR_DT_I8,  GR_DT_U8,   GR_DT_I16,    GR_DT_U16 };

/* ---- the widening, by the formats' definitions ------------------------ */

static const test_format *format_of(gr_dtype dt)
{
	return test_format_named(gr_dtype_name(dt));
}

static bool is_narrow_float(gr_dtype dt)
{
	return format_of(dt) != NULL;
}

static unsigned bits_of_dtype(gr_dtype dt)
{
	return gr_dtype_size(dt) == 1 ? 8 : 16;
}

/* Every value of these formats is a float: exact. */
static float decode(const test_format *f, uint32_t b)
{
	return (float)test_decode_double(f, b);
}

/* Element i of the narrow array at p, its raw bits. */
static uint32_t raw(gr_dtype dt, const uint8_t *p, size_t i)
{
	return gr_dtype_size(dt) == 1 ? p[i] : (uint32_t)(p[2 * i] | p[2 * i + 1] << 8);
}

static gr_dtype wide_of(gr_dtype dt)
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
static void widen(gr_dtype dt, const uint8_t *p, size_t n, void *out)
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

static void put(gr_dtype dt, uint8_t *p, size_t i, uint32_t b)
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
static bool same_number(gr_kind kind, uint64_t a, uint64_t b)
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

static void check_all_ops(gr_dtype dt, const uint8_t *p, size_t n, const char *what)
{
	for (int op = 0; op < GR_OP_N; op++)
		check_reduce((gr_op)op, dt, p, n, what);
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
static uint32_t random_bits(gr_dtype dt, bool specials)
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

/* Sizes around the block and tile edges, at an even and an odd address. */
static const size_t edge_sizes[] = { 0,
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
#define EDGE_MAX (3 * GR_REDUCE_BLOCK + 1)

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

/* ---- cumsum ------------------------------------------------------------ */

static void check_cumsum_equal(gr_dtype dt, const uint64_t *a, const uint64_t *b, size_t n,
			       const char *what)
{
	const gr_kind kind = gr_dtype_is_float(dt) ? GR_KIND_F64 : GR_KIND_U64;

	for (size_t i = 0; i < n; i++)
		CHECK_MSG(same_number(kind, a[i], b[i]), "cumsum %s %s n=%zu: value %zu %#llx vs %#llx",
			  gr_dtype_name(dt), what, n, i, (unsigned long long)a[i],
			  (unsigned long long)b[i]);
	checks++;
}

/* cumsum.h's chunk jobs as the daemon runs them: njobs chunks a round,
 * LOCAL (WHOLE first) on each, the carries in order, then CARRY. */
static void cumsum_chunked(gr_dtype dt, const uint8_t *p, size_t n, size_t chunk, unsigned njobs,
			   uint64_t *out)
{
	const size_t size = gr_dtype_size(dt), nchunks = (n + chunk - 1) / chunk;
	gr_cumsum *cs = gr_cumsum_new(dt, chunk, njobs);

	CHECK(cs);
	for (size_t k0 = 0; k0 < nchunks; k0 += njobs) {
		size_t k1 = k0 + njobs < nchunks ? k0 + njobs : nchunks;
		gr_cumsum_job *jobs[8];

		for (size_t k = k0; k < k1; k++) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			jobs[k - k0] = gr_cumsum_job_new(cs, (unsigned)k, m, (uint8_t *)(out + first));
		}
		for (size_t k = k1; k-- > k0;) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			gr_cumsum_run(jobs[k - k0], dt, p + first * size, m);
		}
		for (size_t k = k0; k < k1; k++) {
			size_t first = k * chunk, m = n - first < chunk ? n - first : chunk;
			if (gr_cumsum_carry(cs, jobs[k - k0], m))
				gr_cumsum_run(jobs[k - k0], dt, NULL, m);
		}
	}
	gr_cumsum_free(cs);
}

static void check_cumsum(gr_dtype dt)
{
	uint8_t *buf = malloc(EDGE_MAX * 2 + 8);
	uint32_t *wide = malloc(EDGE_MAX * 4);
	uint64_t *a = malloc(EDGE_MAX * 8 + 8), *b = malloc(EDGE_MAX * 8 + 8);

	CHECK(buf && wide && a && b);
	for (int shift = 0; shift < 2; shift++) {
		uint8_t *p = buf + shift;

		for (size_t i = 0; i < EDGE_MAX; i++)
			put(dt, p, i, random_bits(dt, /* specials= */ shift == 1));
		widen(dt, p, EDGE_MAX, wide);
		for (size_t k = 0; k < sizeof(edge_sizes) / sizeof(edge_sizes[0]); k++) {
			size_t n = edge_sizes[k];

			CHECK(gr_cumsum_whole(dt, p, n, (uint8_t *)a) == 0);
			CHECK(gr_cumsum_whole(wide_of(dt), wide, n, (uint8_t *)b) == 0);
			check_cumsum_equal(dt, a, b, n, shift ? "whole, odd address" : "whole");
			if (n < 2 * GR_CUMSUM_TILE)
				continue;
			/* chunks of one and of three tiles, several in flight */
			cumsum_chunked(dt, p, n, GR_CUMSUM_TILE, 3, a);
			check_cumsum_equal(dt, a, b, n, "chunks of a tile");
			cumsum_chunked(dt, p, n, 3 * GR_CUMSUM_TILE, 2, a);
			check_cumsum_equal(dt, a, b, n, "chunks of three tiles");
		}
	}
	/* every pattern */
	const size_t count = (size_t)1 << bits_of_dtype(dt);
	for (uint32_t x = 0; x < count; x++)
		put(dt, buf, x, x);
	widen(dt, buf, count, wide);
	CHECK(gr_cumsum_whole(dt, buf, count, (uint8_t *)a) == 0);
	CHECK(gr_cumsum_whole(wide_of(dt), wide, count, (uint8_t *)b) == 0);
	check_cumsum_equal(dt, a, b, count, "every pattern");
	free(buf);
	free(wide);
	free(a);
	free(b);
}

/* ---- segments ---------------------------------------------------------- */

/* The records of a request over offsets, its jobs cut at random elements
 * and joined in order, as the daemon's chunks are. */
static void segments(gr_op op, gr_dtype dt, const uint8_t *p, const uint64_t *off, uint64_t nseg,
		     uint64_t ddof, uint8_t *records)
{
	const size_t size = gr_dtype_size(dt), rb = gr_segs_record_bytes(op);
	const uint64_t n = off[nseg];
	uint64_t *copy = malloc((nseg + 1) * 8), first = 0;
	gr_segs *s;
	unsigned j = 0;

	CHECK(copy);
	memcpy(copy, off, (nseg + 1) * 8);
	s = gr_segs_new(copy, nseg, op, ddof, 4);
	CHECK(s);
	if (n == 0)
		gr_segs_all_empty(s, op, dt);
	while (first < n) {
		uint64_t len = 1 + rnd() % (n / 3 + 1);
		gr_partial head;
		gr_segjob *sj;

		if (len > n - first)
			len = n - first;
		sj = gr_segs_job(s, j++ % 4, first);
		gr_segs_reduce(sj, op, dt, p + first * size, (size_t)len, &head);
		gr_segs_join(s, op, dt, sj, &head);
		first += len;
	}
	memcpy(records, s->records, nseg * rb);
	gr_segs_free(s);
}

/* An empty segment's min or max of a narrow integer: its own extreme. */
static void check_empty_record(gr_op op, gr_dtype dt, const uint8_t *rec)
{
	int64_t lo = dt == GR_DT_I8 ? INT8_MIN : dt == GR_DT_I16 ? INT16_MIN : 0;
	int64_t hi = dt == GR_DT_I8 ? INT8_MAX : dt == GR_DT_I16 ? INT16_MAX
				  : dt == GR_DT_U8 ? UINT8_MAX : UINT16_MAX;
	int64_t mn, mx;
	uint64_t index;

	switch (op) {
	case GR_OP_MIN:
	case GR_OP_ARGMIN:
		memcpy(&mn, rec, 8);
		CHECK_MSG(mn == hi, "empty %s %s: %lld", gr_op_name(op), gr_dtype_name(dt), (long long)mn);
		break;
	case GR_OP_MAX:
	case GR_OP_ARGMAX:
		memcpy(&mx, rec, 8);
		CHECK_MSG(mx == lo, "empty %s %s: %lld", gr_op_name(op), gr_dtype_name(dt), (long long)mx);
		break;
	case GR_OP_MOMENTS:
		memcpy(&mn, rec + 8, 8);
		memcpy(&mx, rec + 16, 8);
		CHECK_MSG(mn == hi && mx == lo, "empty moments %s: %lld %lld", gr_dtype_name(dt),
			  (long long)mn, (long long)mx);
		break;
	default:
		return;
	}
	if (op == GR_OP_ARGMIN || op == GR_OP_ARGMAX) {
		memcpy(&index, rec + 8, 8);
		CHECK(index == GR_SEG_NONE);
	}
}

/* What word w of a record of op holds: the result's kind, an index
 * (argmin, argmax: word 1), or a double (moments: mean and var). */
static gr_kind word_kind(gr_op op, gr_dtype dt, size_t w)
{
	if (gr_op_has_index(op) && w == 1)
		return GR_KIND_U64;
	if (op == GR_OP_MOMENTS && w >= 3)
		return GR_KIND_F64;
	return gr_result_kind(op, dt);
}

static void check_segments(gr_dtype dt)
{
	enum { NSEG = 40 };
	uint64_t off[NSEG + 1];
	uint8_t *p, *a, *b;
	uint32_t *wide;

	off[0] = 0;
	for (int i = 0; i < NSEG; i++) {
		uint64_t r = rnd() % 8;
		/* empty ones, short ones, ones across a block or two */
		uint64_t len = r < 2 ? 0 : r < 6 ? rnd() % 50 : rnd() % (2 * GR_REDUCE_BLOCK + 100);
		off[i + 1] = off[i] + len;
	}
	const uint64_t n = off[NSEG];
	p = malloc(n * 2 + 1);
	wide = malloc(n * 4 + 4);
	a = malloc(NSEG * 40);
	b = malloc(NSEG * 40);
	CHECK(p && wide && a && b);
	for (uint64_t i = 0; i < n; i++)
		put(dt, p, i, random_bits(dt, true));
	widen(dt, p, n, wide);
	for (int op = 0; op < GR_OP_N; op++) {
		const size_t rb = gr_segs_record_bytes((gr_op)op);
		const uint64_t ddof = op == GR_OP_MOMENTS ? 1 : 0;

		segments((gr_op)op, dt, p, off, NSEG, ddof, a);
		segments((gr_op)op, wide_of(dt), (const uint8_t *)wide, off, NSEG, ddof, b);
		for (int i = 0; i < NSEG; i++) {
			const uint8_t *ra = a + i * rb, *rw = b + i * rb;
			if (off[i + 1] == off[i] && !is_narrow_float(dt)) {
				check_empty_record((gr_op)op, dt, ra);
				continue;
			}
			for (size_t w = 0; w < rb / 8; w++) {
				uint64_t x, y;

				memcpy(&x, ra + 8 * w, 8);
				memcpy(&y, rw + 8 * w, 8);
				CHECK_MSG(same_number(word_kind((gr_op)op, dt, w), x, y),
					  "segment %d (%llu elements) %s %s word %zu: %#llx vs %#llx", i,
					  (unsigned long long)(off[i + 1] - off[i]), gr_op_name((gr_op)op),
					  gr_dtype_name(dt), w, (unsigned long long)x,
					  (unsigned long long)y);
			}
			checks++;
		}
	}
	free(p);
	free(wide);
	free(a);
	free(b);
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
		check_cumsum(narrow[i]);
		check_segments(narrow[i]);
	}
	printf("%lu narrow checks\n", checks);
	return 0;
}
