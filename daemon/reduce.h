/*
 * The CPU reduction: every op over every dtype, deterministic, and the
 * reference that every other backend is tested against.
 *
 * A reduction has a canonical shape that makes its float results
 * reproducible bit for bit however the work is split: the array is cut into
 * blocks of GR_REDUCE_BLOCK elements (the last may be shorter), each block
 * is reduced by gr_reduce_block() with a fixed set of accumulators, and the
 * block partials are combined left to right with gr_partial_combine().
 * gr_reduce() does exactly that on one thread; the CPU backend reduces the
 * blocks of a chunk on several threads and combines them in index order,
 * and the daemon cuts large requests into chunks on block boundaries
 * (chunk sizes are multiples of GR_REDUCE_BLOCK * 8 bytes), so the bits
 * depend neither on the thread count nor on the chunking. Float block
 * partials are summed exactly (see gr_partial) and rounded once, because
 * left-to-right double additions would give a chunk of blocks (b0 + b1)
 * and the whole request (acc + b0) + b1.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto/types.h"

#define GR_REDUCE_BLOCK 32768u
/* Chunk sizes must be multiples of this many bytes. */
#define GR_REDUCE_ALIGN_BYTES ((size_t)GR_REDUCE_BLOCK * 8u)

/* Words of the exact accumulator: fixed point, bit 0 weighs 2^-1074 (the
 * least subnormal), wide enough for 2^64 sums of the largest doubles. */
#define GR_PARTIAL_XWORDS 34

/*
 * A reduction's running state over some elements. Which member of v holds
 * it depends on op and dtype:
 *   sum of i32/i64/u32/u64: u, wrapping 64-bit (exact for i32/u32)
 *   sum of f32/f64, sumsq of anything: f (double), see below
 *   min/max of i32/i64: i; of u32/u64: u; of f32/f64: f (NaN propagates)
 *
 * Float sums and sumsq combine block partials exactly: their value is the
 * exact sum xacc + v.f, rounded to double only by gr_partial_finish(). A
 * block's partial (and any partial a backend fills in itself) has v.f set
 * and xacc zero; gr_partial_combine() folds both sides into xacc, so
 * combining is associative and the bits cannot depend on where a request
 * was cut into chunks. Start any partial with gr_partial_identity() before
 * setting count and v by hand; leave xflags and xacc alone. While xflags is
 * zero, xacc is too: a partial that was never combined into is read and
 * rounded without touching its xacc words.
 */
typedef struct gr_partial {
	uint64_t count;
	union {
		int64_t i;
		uint64_t u;
		double f;
	} v;
	uint64_t xflags;                    /* infinities and NaNs folded in; xacc in use */
	uint64_t xacc[GR_PARTIAL_XWORDS];   /* two's complement, little word first */
} gr_partial;

/* The partial of no elements. */
void gr_partial_identity(gr_op op, gr_dtype dt, gr_partial *ret);
/* acc = acc (+) next, where next covers the elements right after acc's. */
void gr_partial_combine(gr_op op, gr_dtype dt, gr_partial *acc, const gr_partial *next);
/* The wire result: GR_OK, or GR_ERR_EMPTY for min/max of no elements. */
gr_err gr_partial_finish(gr_op op, gr_dtype dt, const gr_partial *p, gr_value *ret);

/* Reduce one block: n <= GR_REDUCE_BLOCK elements at data (any alignment). */
void gr_reduce_block(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret);

/* Reduce n elements in the canonical shape, on the calling thread. */
void gr_reduce(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret);
