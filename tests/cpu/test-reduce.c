/*
 * The CPU reduction, every op over every dtype (moments apart), against
 * the references of reduce-check.h: at many sizes, on small and wide
 * data, at every address and in chunks; integer extremes; empty arrays.
 *
 *   test-reduce          run the tests
 *   test-reduce --dump   print the bits of many reductions (to compare two
 *                        builds, e.g. with and without AVX2)
 */
#include "tests/cpu/reduce-check.h"

/* ---- the same bits at every address ---- */

static void check_alignment(gr_op op, gr_dtype dt, const unsigned char *src, size_t n)
{
	size_t bytes = n * esize(dt);
	unsigned char *buf = malloc(bytes + 64);
	CHECK_MSG(buf, "malloc");
	/* buf from malloc is 16-aligned; start from a 64-aligned base */
	unsigned char *base = buf + (64 - ((uintptr_t)buf & 63)) % 64;
	gr_partial ref;
	memcpy(base, src, bytes);
	gr_reduce(op, dt, base, n, &ref);
	for (size_t off = 1; off < 16; off++) {
		memmove(base + off, base + off - 1, bytes);
		gr_partial p;
		gr_reduce(op, dt, base + off, n, &p);
		CHECK_MSG(same_bits(&p, &ref),
		          "%s %s n=%zu offset %zu: %016" PRIx64 " vs %016" PRIx64, op_names[op],
		          dt_names[dt], n, off, p.v.u, ref.v.u);
	}
	free(buf);
}

/* ---- every op and dtype ---- */

/* Every op and dtype against the naive and canonical references, at
 * every size, address and chunking. */
static void check_sweep(unsigned char *buf)
{
	static const size_t sizes[] = {0,
	                               1,
	                               2,
	                               7,
	                               31,
	                               33,
	                               1000,
	                               GR_REDUCE_BLOCK - 1,
	                               GR_REDUCE_BLOCK,
	                               GR_REDUCE_BLOCK + 1,
	                               1000003};
	const size_t max_n = 1000003;

	for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			for (int small = 0; small < 2; small++) {
				fill(dt, buf, n, small);
				for (gr_op op = 0; op < GR_OP_MOMENTS; op++) {
					check_against_naive(op, dt, buf, n);
					check_canonical(op, dt, buf, n);
					if (!small && n < max_n)
						check_alignment(op, dt, buf, n);
					if (!small && n >= GR_REDUCE_BLOCK)
						check_chunking(op, dt, buf, n);
				}
			}
		}
	/* alignment over many blocks, once per dtype */
	for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++) {
		fill(dt, buf, 200001, false);
		for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
			check_alignment(op, dt, buf, 200001);
		fill(dt, buf, 200001, true);
		for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
			check_alignment(op, dt, buf, 200001);
	}
}

static void check_int_extremes(unsigned char *buf)
{
	const size_t n = 100003;
	fill_const(GR_DT_I32, buf, n, (uint32_t)INT32_MIN);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I32, buf, n).i == (int64_t)n * INT32_MIN,
	          "i32 min sum");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_I32, buf, n).i == INT32_MIN, "i32 min");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_I32, buf, n).f > 0, "i32 sumsq");
	fill_const(GR_DT_I32, buf, n, INT32_MAX);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I32, buf, n).i == (int64_t)n * INT32_MAX,
	          "i32 max sum");
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_I32, buf, n).i == INT32_MAX, "i32 max");
	fill_const(GR_DT_U32, buf, n, UINT32_MAX);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_U32, buf, n).u == (uint64_t)n * UINT32_MAX, "u32 sum");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_U32, buf, 1).f == (double)UINT32_MAX * UINT32_MAX,
	          "u32 sq");

	/* i64 sums wrap modulo 2^64 */
	int64_t two[2] = {INT64_MAX, 1};
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I64, (void *)two, 2).i == INT64_MIN, "i64 wrap");
	fill_const(GR_DT_I64, buf, n, (uint64_t)INT64_MIN);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_I64, buf, n).i == (int64_t)((uint64_t)(n & 1) << 63),
	          "i64 wrap n");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_I64, buf, n).i == INT64_MIN, "i64 min");
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_I64, buf, n).i == INT64_MIN, "i64 max");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_I64, buf, 1).f == 0x1p126, "i64 sumsq");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_I64, buf, 3).f == 3 * 0x1p126, "i64 sumsq 3");
	memcpy(buf + 8 * 777, &(int64_t){INT64_MAX}, 8);
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_I64, buf, n).i == INT64_MAX, "i64 max");
	fill_const(GR_DT_U64, buf, n, UINT64_MAX);
	CHECK_MSG(reduce_v(GR_OP_SUM, GR_DT_U64, buf, n).u == (uint64_t)0 - n, "u64 wrap");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U64, buf, n).u == UINT64_MAX, "u64 min");
	CHECK_MSG(reduce_v(GR_OP_SUMSQ, GR_DT_U64, buf, 1).f == 0x1p128, "u64 sumsq");
	memcpy(buf + 8 * (n - 1), &(uint64_t){0}, 8);
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U64, buf, n).u == 0, "u64 min 0");
	/* unsigned compares are unsigned */
	uint64_t hl[3] = {1, 1ull << 63, 2};
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_U64, (void *)hl, 3).u == 1ull << 63,
	          "u64 max high bit");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U64, (void *)hl, 3).u == 1, "u64 min high bit");
	uint32_t hl32[35];
	for (size_t i = 0; i < 35; i++)
		hl32[i] = i == 20 ? 0x80000000u : 5;
	CHECK_MSG(reduce_v(GR_OP_MAX, GR_DT_U32, (void *)hl32, 35).u == 0x80000000u,
	          "u32 max high bit");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_U32, (void *)hl32, 35).u == 5, "u32 min high bit");
	CHECK_MSG(reduce_v(GR_OP_MIN, GR_DT_I32, (void *)hl32, 35).i == INT32_MIN, "i32 min sign");
}

static void check_empty(void)
{
	for (gr_op op = 0; op < GR_OP_MOMENTS; op++)
		for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++) {
			gr_partial p, b;
			gr_value v;
			gr_reduce(op, dt, NULL, 0, &p);
			gr_reduce_block(op, dt, NULL, 0, &b);
			CHECK_MSG(same_bits(&p, &b), "empty block");
			gr_err e = gr_partial_finish(op, dt, &p, &v);
			if (op != GR_OP_SUM && op != GR_OP_SUMSQ) {
				CHECK_MSG(e == GR_ERR_EMPTY, "%s %s empty: %d", op_names[op],
				          dt_names[dt], e);
			} else {
				CHECK_MSG(e == GR_OK && v.kind == gr_result_kind(op, dt) &&
				              v.u == 0,
				          "%s %s empty", op_names[op], dt_names[dt]);
			}
			/* the identity is neutral on both sides */
			gr_partial one, acc;
			unsigned char x[8] = {3};
			gr_reduce(op, dt, x, 1, &one);
			gr_partial_identity(op, dt, &acc);
			gr_partial_combine(op, dt, &acc, &one);
			CHECK_MSG(same_bits(&acc, &one), "identity left");
			gr_partial_identity(op, dt, &acc);
			gr_partial_combine(op, dt, &one, &acc);
			CHECK_MSG(same_bits(&acc, &p), "identity is empty");
			gr_reduce(op, dt, x, 1, &acc);
			CHECK_MSG(same_bits(&acc, &one), "identity right");
		}
}

static void dump(unsigned char *buf)
{
	static const size_t sizes[] = {1, 7, 33, 1000, GR_REDUCE_BLOCK + 1, 100003};
	for (gr_dtype dt = 0; dt < GR_DT_NARROW_FIRST; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			fill(dt, buf, sizes[s], false);
			for (gr_op op = 0; op < GR_OP_MOMENTS; op++) {
				gr_partial p;
				gr_value v;
				gr_reduce(op, dt, buf + 1, sizes[s] - 1, &p);
				gr_partial_finish(op, dt, &p, &v);
				printf("%s %s %zu %016" PRIx64 "\n", op_names[op], dt_names[dt],
				       sizes[s], v.u);
			}
		}
}

static void check_empty_part(unsigned char *buf)
{
	(void)buf;
	check_empty();
}

int main(int argc, char **argv)
{
	static const reduce_part parts[] = {
	    {"sweep", check_sweep},
	    {"int extremes", check_int_extremes},
	    {"empty", check_empty_part},
	};

	if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
		unsigned char *buf = malloc(REDUCE_BUF_ELEMS * 8 + 64);
		CHECK_MSG(buf, "malloc");
		dump(buf);
		free(buf);
		return 0;
	}
	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
