/*
 * The narrow dtypes' prefix sums and segments in the math layer (the rest
 * of test-reduce-narrow.c's checks): cumsum as the daemon cuts it into
 * chunk jobs, and segment records over random offsets, each against the
 * same op over the elements widened exactly (narrow-check.h), bit for bit;
 * empty segments of the narrow integers hold their own dtype's extremes.
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
#include "tests/cpu/narrow-check.h"

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

void check_cumsum(gr_dtype dt)
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

void check_segments(gr_dtype dt)
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
