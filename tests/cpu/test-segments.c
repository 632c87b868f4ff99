/*
 * Segmented reduces (math/segments.c) cut into jobs anywhere: every
 * op and dtype, random segment lengths (empty ones, and ones longer than
 * a block), the request cut into jobs at random elements (not only at
 * block boundaries, as the daemon's chunks are), some jobs cut again into
 * parts merged as the CPU backend's workers do, and joined in order. Each
 * record must equal the record of that segment reduced alone, byte for
 * byte, except integer sums of squares, whose double lanes follow the
 * pieces' blocks: those must agree to a relative 1e-12. Records of empty
 * segments are the documented identities. Jobs of whole segments
 * (gr_segs_whole) are those whose reduce leaves no head or tail, and
 * write the records it names; gr_segs_cut ends a piece on the last
 * boundary it can.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/segments.h"
#include "tests/check.h"
#include "tests/cpu/test-fill.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	return test_rnd(&rng_state);
}

static void fill(gr_dtype dt, void *data, size_t n)
{
	static const test_fill_spec spec = { .i32_wide = 7, .i64_wide = 5, .i64_below = 100000,
						 .f32_binades = 40, .f64_binades = 120 };

	test_fill(&spec, &rng_state, dt, data, n);
}

static double rec_f64(const uint8_t *rec)
{
	double d;
	memcpy(&d, rec, 8);
	return d;
}

static unsigned checks;

static void check_case(gr_op op, gr_dtype dt, uint64_t nseg, uint64_t maxlen, unsigned njobs)
{
	const size_t size = gr_dtype_size(dt), rb = gr_segs_record_bytes(op);
	uint64_t *off = malloc((nseg + 1) * 8);
	CHECK(off);
	off[0] = 0;
	for (uint64_t i = 0; i < nseg; i++)
		off[i + 1] = off[i] + (rnd() % 4 == 0 ? 0 : rnd() % (maxlen + 1));
	const uint64_t n = off[nseg];
	uint8_t *data = malloc(n * size + 1);
	CHECK(data);
	fill(dt, data, n);
	const uint64_t ddof = op == GR_OP_MOMENTS ? rnd() % 3 : 0;

	/* the reference: each segment alone */
	uint8_t *want = malloc(nseg * rb + 1);
	gr_partial p;
	CHECK(want);
	for (uint64_t i = 0; i < nseg; i++) {
		gr_reduce(op, dt, data + off[i] * size, off[i + 1] - off[i], &p);
		gr_segs_record(op, dt, ddof, &p, want + i * rb);
	}

	uint64_t *copy = malloc((nseg + 1) * 8);
	CHECK(copy);
	memcpy(copy, off, (nseg + 1) * 8);
	gr_segs *s = gr_segs_new(copy, nseg, op, ddof, njobs);
	CHECK(s);
	if (n == 0) {
		gr_segs_all_empty(s, op, dt);
	} else {
		/* jobs of random lengths, each run then joined in order (as the
		 * daemon does once its chunks come back) */
		uint64_t first = 0;
		unsigned j = 0;
		while (first < n) {
			uint64_t len = 1 + rnd() % (n / 3 + 1);
			if (len > n - first)
				len = n - first;
			gr_segjob *sj = gr_segs_job(s, j++, first);
			gr_partial head;
			unsigned nparts = 1 + (unsigned)(rnd() % 5);
			if (nparts > len)
				nparts = (unsigned)len;
			if (nparts == 1) {
				gr_segs_reduce(sj, op, dt, data + first * size, (size_t)len, &head);
			} else {
				/* the job cut into parts, as the CPU backend's
				 * workers share a large one, then merged */
				gr_segjob parts[5];
				gr_partial heads[5];
				uint64_t per = (len + nparts - 1) / nparts;
				unsigned np = 0;
				for (uint64_t a = 0; a < len; a += per, np++) {
					uint64_t b = a + per < len ? a + per : len;
					parts[np] = *sj;
					parts[np].first = first + a;
					gr_segs_reduce(&parts[np], op, dt, data + (first + a) * size,
						       (size_t)(b - a), &heads[np]);
				}
				gr_segs_merge(sj, &head, op, dt, parts, heads, np);
			}
			gr_segs_join(s, op, dt, sj, &head);
			first += len;
		}
	}
	for (uint64_t i = 0; i < nseg; i++) {
		const uint8_t *g = s->records + i * rb, *w = want + i * rb;
		if (op == GR_OP_SUMSQ && !gr_dtype_is_float(dt)) {
			double a = rec_f64(g), b = rec_f64(w);
			CHECK_MSG(fabs(a - b) <= 1e-12 * fabs(b), "sumsq %s seg %llu: %.17g vs %.17g",
				  gr_dtype_name(dt), (unsigned long long)i, a, b);
		} else {
			CHECK_MSG(memcmp(g, w, rb) == 0, "%s %s seg %llu of %llu (len %llu)",
				  gr_op_name(op), gr_dtype_name(dt), (unsigned long long)i,
				  (unsigned long long)nseg, (unsigned long long)(off[i + 1] - off[i]));
		}
		checks++;
	}
	gr_segs_free(s);
	free(want);
	free(data);
	free(off);
}

static void check_empty_records(void)
{
	gr_partial id;
	uint8_t rec[40];
	uint64_t u;
	double d;

	gr_partial_identity(GR_OP_MIN, GR_DT_I32, &id);
	gr_segs_record(GR_OP_MIN, GR_DT_I32, 0, &id, rec);
	memcpy(&u, rec, 8);
	CHECK((int64_t)u == INT32_MAX);
	gr_partial_identity(GR_OP_ARGMAX, GR_DT_U64, &id);
	gr_segs_record(GR_OP_ARGMAX, GR_DT_U64, 0, &id, rec);
	memcpy(&u, rec, 8);
	CHECK(u == 0);
	memcpy(&u, rec + 8, 8);
	CHECK(u == UINT64_MAX);
	gr_partial_identity(GR_OP_MAX, GR_DT_F32, &id);
	gr_segs_record(GR_OP_MAX, GR_DT_F32, 0, &id, rec);
	d = rec_f64(rec);
	CHECK(isinf(d) && d < 0);
	gr_partial_identity(GR_OP_MOMENTS, GR_DT_F64, &id);
	gr_segs_record(GR_OP_MOMENTS, GR_DT_F64, 1, &id, rec);
	CHECK(rec_f64(rec) == 0.0 && !signbit(rec_f64(rec)));
	CHECK(isinf(rec_f64(rec + 8)) && isinf(rec_f64(rec + 16)));
	CHECK(isnan(rec_f64(rec + 24)) && isnan(rec_f64(rec + 32)));
	checks += 5;
}

/* gr_segs_whole() against what gr_segs_reduce() of the job does, and
 * gr_segs_cut() against a search by hand, on random offsets with runs of
 * empty segments and every job [first, end) of a short request. */
static void check_whole_and_cut(void)
{
	for (int rep = 0; rep < 200; rep++) {
		const uint64_t k = 1 + rnd() % 9;
		uint64_t off[16];
		off[0] = 0;
		for (uint64_t i = 0; i < k; i++)
			off[i + 1] = off[i] + (rnd() % 3 == 0 ? 0 : rnd() % 5);
		const uint64_t n = off[k];
		int32_t data[64];
		for (uint64_t i = 0; i < n; i++)
			data[i] = (int32_t)(rnd() % 100) + 1;
		uint8_t rec[16 * 8];
		gr_segjob sj = { .offsets = off, .nseg = k, .records = rec };
		for (uint64_t first = 0; first < n; first++) {
			for (uint64_t end = first + 1; end <= n; end++) {
				gr_partial head;
				uint64_t s0 = 0, s1 = 0;
				memset(rec, 0, sizeof(rec));
				sj.first = first;
				const bool whole = gr_segs_whole(&sj, end - first, &s0, &s1);
				gr_segs_reduce(&sj, GR_OP_SUM, GR_DT_I32, data + first, end - first,
					       &head);
				const bool none = sj.head_seg == GR_SEG_NONE &&
						  sj.tail_seg == GR_SEG_NONE;
				CHECK_MSG(whole == none, "whole %d, no head or tail %d: [%llu, %llu)",
					  whole, none, (unsigned long long)first,
					  (unsigned long long)end);
				if (!whole)
					continue;
				/* an empty segment's sum record is 0 too: mark */
				for (uint64_t s = 0; s < k; s++) {
					uint64_t v;
					memcpy(&v, rec + 8 * s, 8);
					bool wrote = v != 0 || off[s + 1] == off[s];
					if (s < s0 || s >= s1)
						CHECK_MSG(v == 0, "record %llu outside [%llu, %llu)",
							  (unsigned long long)s,
							  (unsigned long long)s0,
							  (unsigned long long)s1);
					else
						CHECK(wrote);
				}
				checks++;
			}
			for (uint64_t want = first + 1; want <= n; want++) {
				uint64_t b = want;
				for (uint64_t s = 0; s <= k; s++)
					if (off[s] > first && off[s] <= want)
						b = off[s];
				CHECK_EQ(gr_segs_cut(off, k, first, want), b);
			}
		}
	}
}

int main(void)
{
	check_whole_and_cut();
	check_empty_records();
	for (int op = 0; op < GR_OP_N; op++) {
		for (int dt = 0; dt < GR_DT_NARROW_FIRST; dt++) {
			for (int rep = 0; rep < 6; rep++) {
				/* short rows, rows about a block, a few long ones */
				check_case((gr_op)op, (gr_dtype)dt, 1 + rnd() % 200, 40, 4);
				check_case((gr_op)op, (gr_dtype)dt, 1 + rnd() % 12, 3 * GR_REDUCE_BLOCK, 4);
			}
			check_case((gr_op)op, (gr_dtype)dt, 5, 0, 4);
		}
	}
	printf("%u segment records checked\n", checks);
	return 0;
}
