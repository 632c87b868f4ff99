/*
 * The segmented sum kernel's host interface: one sum per segment of an
 * array in device memory, in one launch, for any mix of segment lengths.
 *
 * The array of `count` elements is cut into tiles of GR_SEGSUM_TILE_BYTES
 * (4096 elements of 4 bytes, 2048 of 8), one warp a tile, whatever the
 * segments are: the work is balanced by elements, not by segments. A
 * warp walks the segments that meet its tile, 32 offsets at a time:
 *  - a segment of at most GR_SEGSUM_SHORT elements that lies inside the
 *    tile is summed by one lane, element by element in order;
 *  - any other segment's part in the tile (its "piece") is summed by the
 *    whole warp: lane l adds elements l, l + 32, ... of the piece in
 *    order, and the lanes meet in a fixed butterfly (xor 16, 8, 4, 2, 1);
 *  - a segment that lies inside the tile is then written out; one that
 *    crosses tiles leaves its piece in the workspace and takes a ticket;
 *    the last of its tiles to arrive adds the pieces, in groups of
 *    GR_SEGSUM_GROUP consecutive pieces when there are more than that
 *    (each group and then the groups' sums folded as lane l taking items
 *    l, l + 32, ... in order, then the same butterfly).
 * So the order of every addition depends only on the offsets, the dtype
 * and the tile size: float sums are the same bits on every run and every
 * GPU, but they are sums in double, rounded along the way, not the
 * protocol's exact sums (a segment of floats can differ from the exact
 * sum in its last bits; the daemon decides what it reports). Float sums
 * start from -0.0, the identity of addition, so a segment of only -0.0
 * sums to -0.0; an empty segment gives +0.0.
 *
 * Results are 8 bytes a segment: int64 for i32/i64 (wrapping modulo
 * 2^64), uint64 for u32/u64 (wrapping likewise), float64 for f32/f64.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GR_SEGSUM_TILE_BYTES 16384u
/* longest segment one lane sums alone */
#define GR_SEGSUM_SHORT 16u
/* pieces combined at once; more pieces are combined in groups of this many */
#define GR_SEGSUM_GROUP 256u

/*
 * Bytes of device workspace a segmented sum of `count` elements of
 * `size` bytes needs (32 bytes a tile). The workspace must be zero before
 * its first use; every launch leaves the part that must be zero (its
 * tickets) zero again, so one workspace serves any number of launches of
 * any size up to the one it was sized for. One launch at a time per
 * workspace.
 */
size_t gr_segsum_workspace_bytes(uint64_t count, size_t size);

/*
 * out[s] = the sum of data[offsets[s] .. offsets[s + 1]) for each s <
 * nsegs, on stream. data holds count elements of dtype (gr_dtype's
 * values: 0 i32, 1 i64, 2 u32, 3 u64, 4 f32, 5 f64); offsets nsegs + 1
 * u64 values, 0 first, count last and never decreasing (not checked
 * here: the caller validates them); out nsegs 8-byte results. All of
 * them device memory; workspace_bytes the workspace's size (at least
 * gr_segsum_workspace_bytes(count, its element size), and the same for
 * every launch on that workspace). Returns the cudaError_t of the launch
 * (0 on success; cudaErrorInvalidValue for a workspace too small).
 */
int gr_segsum_launch(int dtype, const void *data, uint64_t count, const uint64_t *offsets,
		     uint64_t nsegs, void *out, void *workspace, size_t workspace_bytes,
		     void *stream);

#ifdef __cplusplus
}
#endif
