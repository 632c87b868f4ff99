/*
 * The CPU reduction: every op over every dtype, deterministic, and the
 * reference that every other backend is tested against.
 *
 * Float sums are exact. The sum, and the sum of squares, of f32 and f64
 * elements is the exact real sum of the elements (for sumsq, of their
 * exact squares), rounded once to float64, to nearest with ties to even.
 * Specials follow IEEE 754 and numpy: any NaN gives NaN, +inf and -inf
 * together give NaN, an exact sum beyond the float64 range rounds to
 * infinity, a sum of nothing but -0.0 is -0.0 and any other exact zero is
 * +0.0 (sumsq is never -0.0).
 *
 * The array is cut into blocks of GR_REDUCE_BLOCK elements (the last may be
 * shorter); gr_reduce_block() reduces one, and gr_partial_combine() adds
 * the partials of neighbouring runs of elements. gr_reduce() does that on
 * one thread, the CPU backend on several, and the daemon cuts large
 * requests into chunks on block boundaries (multiples of
 * GR_REDUCE_ALIGN_BYTES). Exact float sums make the result independent of
 * all three: combining is exact and associative, and only
 * gr_partial_finish() rounds. Integer sums wrap modulo 2^64 and min/max
 * are exact, so they do not depend on the cut either. The sum of squares
 * of integers still squares each element in double and adds block by
 * block in fixed double lanes (reduce.c), so its bits follow the block
 * shape, and the block partials are then added exactly.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "math/partial.h"
#include "proto/types.h"

/* Reduce one block: n <= GR_REDUCE_BLOCK elements at data (any alignment). */
void gr_reduce_block(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret);

/* gr_reduce_block() of a narrow dtype (reduce-narrow.c). */
void gr_reduce_narrow_block(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret);

/* Reduce n elements in the canonical shape, on the calling thread. */
void gr_reduce(gr_op op, gr_dtype dt, const void *data, size_t n, gr_partial *ret);
