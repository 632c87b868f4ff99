/*
 * Segmented reduces on the GPU: one record per segment of an array in
 * device memory, for sum, min, max and sumsq of every dtype in one pass
 * over the data, and argmin and argmax in two, with the protocol's
 * records (PROTOCOL.md, "Segments"):
 *
 *  - sum of integers: int64 (i32, i64) or uint64 (u32, u64), i64 and u64
 *    wrapping modulo 2^64;
 *  - min and max: the element as int64, uint64 or float64, -0 below +0,
 *    NaN (0x7ff8000000000000) when the segment holds one, the dtype's
 *    largest (min) or smallest (max) value, +-inf for floats, when empty;
 *  - argmin and argmax: 16 bytes, the value as min and max give it, then
 *    the index (uint64) of the first element equal to it (the first NaN
 *    where there is one), counted from the segment's first element;
 *    2^64 - 1 when empty;
 *  - sum and sumsq of floats: the exact sum of the elements, or of their
 *    exact squares, rounded once to nearest even, with numpy's rules for
 *    NaN, infinities and -0 (every bit as the CPU's exact accumulator);
 *  - sumsq of integers: each element converted to double and squared in
 *    double (rounded, as the CPU does), and those squares summed exactly
 *    and rounded once. (The CPU adds them in double within blocks, so its
 *    last bits can differ; PROTOCOL.md says so.)
 *
 * moments (gr_op 6) leaves each segment's sums, not its record: the exact
 * sum of its elements and of their exact squares as digits, and its min
 * and max records (gr_segred_moments_layout_of()); the host turns them into
 * the record, rounding mean and variance once (segs-moments.h).
 *
 * How (segred.cuh has the argument): the array is cut into tiles of
 * GR_SEGRED_TILE_BYTES, one warp a tile whatever the segments are; a
 * segment's part in a tile is reduced by one lane (a short segment inside
 * the tile) or by the whole warp, and the parts of a segment meet through
 * integer atomics, whose order cannot change a result: wrapping adds for
 * integer sums, minima and maxima of ordered keys, and for exact sums
 * digits of a fixed-point number, 32-bit places summed in 64-bit words;
 * argmin and argmax find the keys first, then the first index of each
 * segment's best key by atomic minima. A last, small kernel turns each
 * segment's keys, indices or digits into its record.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of data a warp takes at once (4096 elements of 4 bytes). */
#define GR_SEGRED_TILE_BYTES 16384u
/* Elements one launch may cover, at most: each digit of an exact sum
 * takes one 32-bit piece an element at most, in a signed 64-bit word. */
#define GR_SEGRED_MAX_ELEMS ((uint64_t)1 << 30)

/*
 * Bytes of device scratch a launch needs per segment for op (gr_op's
 * values: 0 sum, 1 min, 2 max, 3 sumsq, 4 argmin, 5 argmax, 6 moments) and dtype
 * (gr_dtype's: 0 i32, 1 i64, 2 u32, 3 u64, 4 f32, 5 f64): the exact sums'
 * digits and flags, argmin's and argmax's keys and indices, 0 for the
 * other ops. Returns 0 for an op it does not take, too.
 */
size_t gr_segred_scratch_per_seg(int op, int dtype);

/* Whether op is one gr_segred_launch() takes (sum, min, max, sumsq,
 * argmin, argmax, moments). */
int gr_segred_takes(int op);

/* Bytes a segment takes in records for op and dtype: 16 for argmin and
 * argmax, a moments launch's sums for moments (below), else 8. */
size_t gr_segred_record_bytes(int op, int dtype);

/* An integer moments segment's places: the sum's, the squares'. */
#define GR_SEGRED_ISUM_DIGITS 4
#define GR_SEGRED_ISQ_DIGITS 6

/* The flags of a float moments segment's sums (in the low 32 bits of its
 * flag words): a NaN, +inf, -inf among the elements (their squares), an
 * element other than -0 (the sum only). */
#define GR_SEGRED_F_NAN 1u
#define GR_SEGRED_F_PINF 2u
#define GR_SEGRED_F_NINF 4u
#define GR_SEGRED_F_NOT_NZERO 8u

/*
 * The sums a moments launch of k segments leaves in records, as 8-byte
 * words, one area after the other: k x sum_digits digits (segment s's at
 * s x sum_digits), k flag words, k x sq_digits digits of the squares, k
 * flag words, k min records, k max records (as min's and max's). Digit i
 * of a sum is a signed 64-bit integer weighing 2^(32 i + lsb); the sum is
 * the total of its digits. Integers' flag words are 0.
 */
typedef struct gr_segred_moments_layout {
	unsigned sum_digits, sq_digits;
	int sum_lsb, sq_lsb;
} gr_segred_moments_layout;

void gr_segred_moments_layout_of(int dtype, gr_segred_moments_layout *ret);

/*
 * records[s] = the record of segment s < nsegs of data, on stream: the
 * elements [offs[s], offs[s + 1]) counted from data. offs (device
 * memory) holds nsegs + 1 u64 offsets, never decreasing (not checked
 * here: the caller validates them), first == offs[0] and end ==
 * offs[nsegs] given by the caller, end - first <= GR_SEGRED_MAX_ELEMS;
 * data aligned to its element's size; records nsegs x
 * gr_segred_record_bytes(op, dtype) bytes of device memory; scratch at least
 * nsegs * gr_segred_scratch_per_seg() bytes of
 * device memory, whatever it holds (the launch clears what it uses). One
 * launch at a time per scratch. Returns the cudaError_t of the launches
 * (a memset, the reduce and the finish), 0 on success;
 * cudaErrorInvalidValue for an op or dtype it does not take, a misaligned
 * pointer, too many elements or too little scratch.
 *
 * scratch_zero, where not NULL, tells and is told how many bytes from
 * the scratch's start hold zeros: where they cover what the exact sums
 * use, they skip their memset; on return it says how many will once the
 * launches are done (the exact sums' finish leaves what they used zero;
 * argmin and argmax leave the start dirty, 0; a launch that fails says
 * 0). Its first value for a new scratch is 0, or its size after a
 * cudaMemset of the whole of it.
 */
int gr_segred_launch(int op, int dtype, const void *data, const uint64_t *offs, uint64_t nsegs,
		     uint64_t first, uint64_t end, void *records, void *scratch, size_t scratch_bytes,
		     size_t *scratch_zero, void *stream);

#ifdef __cplusplus
}
#endif
