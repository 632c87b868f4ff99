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
 * depend neither on the thread count nor on the chunking.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto/types.h"

#define GR_REDUCE_BLOCK 32768u
/* Chunk sizes must be multiples of this many bytes. */
#define GR_REDUCE_ALIGN_BYTES ((size_t)GR_REDUCE_BLOCK * 8u)

/*
 * A reduction's running state over some elements. Which member of v holds
 * it depends on op and dtype:
 *   sum of i32/i64/u32/u64: u, wrapping 64-bit (exact for i32/u32)
 *   sum of f32/f64, sumsq of anything: f (double)
 *   min/max of i32/i64: i; of u32/u64: u; of f32/f64: f (NaN propagates)
 */
typedef struct gr_partial {
	uint64_t count;
	union {
		int64_t i;
		uint64_t u;
		double f;
	} v;
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
