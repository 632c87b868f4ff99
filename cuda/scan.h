/*
 * The inclusive prefix sum kernel's host interface: out[i] = x[0] + ... +
 * x[i] for an array in device memory, in one pass (each element read
 * once and written once), int64 for i32/i64, uint64 for u32/u64 (both
 * wrapping modulo 2^64) and float64 for f32/f64. A narrow dtype's
 * elements are widened as they are read, exactly as math/widen.h widens
 * them (f16, bf16, f8e4m3 and f8e5m2 to f32, i8 and i16 to i32, u8 and
 * u16 to u32), and summed as that dtype's: the same order, the same bits
 * as the prefix sums of the widened array (a NaN's payload aside, which
 * no result keeps).
 *
 * Float prefix sums are deterministic: every output is one fixed
 * expression of the inputs, whatever the GPU, the launch or the order in
 * which tiles finish, so a CPU can compute the same bits. The order, with
 * every input first converted to double and additions in double, round
 * to nearest (integers: the same order in wrapping 64-bit arithmetic,
 * where order does not matter):
 *
 *  1. The array is cut into tiles of GR_SCAN_TILE = 4096 elements; tile j
 *     is elements [4096 j, 4096 j + 4096) (the last may be short: read as
 *     if padded with +0.0, which changes no output). Inside a tile, thread
 *     t (0..255) owns elements 16 t .. 16 t + 15; thread t is lane
 *     l = t % 32 of warp w = t / 32.
 *  2. Thread prefix: r[0] = x[0], r[e] = r[e-1] + x[e] (its own 16
 *     elements); its total R = r[15].
 *  3. Warp scan (Kogge-Stone): W_l = R of lane l; for d = 1, 2, 4, 8, 16
 *     in turn, every lane l >= d at once sets W_l = W_{l-d} + W_l (the
 *     values of the previous step on the right of the =).
 *  4. Warp totals S_w = W_31 of warp w; P_w = S_0 + S_1 + ... + S_{w-1}
 *     added left to right (nothing for w = 0); the tile's total
 *     A_j = S_0 + ... + S_7 left to right.
 *  5. In-tile prefix of thread t: E_t = P_w + W_{l-1}, where a missing
 *     term (w = 0, l = 0) is left out.
 *  6. Tile totals meet in a Fenwick (binary indexed) tree: let z be the
 *     number of trailing zero bits of j + 1; F_j = A_j, then for
 *     L = 1 .. z in turn F_j = F_{j - 2^(L-1)} + F_j. F_j is the sum of
 *     tiles [j + 1 - 2^z, j + 1).
 *  7. The carry into tile j: for each set bit b of j, from the highest
 *     down, the range [q, q + 2^b) with q = j with bits 0..b cleared,
 *     whose sum is F_{q + 2^b - 1}; X_j = those F added left to right
 *     (nothing for j = 0).
 *  8. Thread carry Q_t = X_j + E_t, output out[16 t + e] = Q_t + r[e]
 *     (missing terms left out, as above).
 * "Left out" is the same as adding -0.0, which is what the kernel does.
 * Accuracy: input k reaches output i through at most
 * d = 30 + 2 ceil(log2(tiles)) additions (15 in its thread, 5 in the warp
 * scan, 8 across warps, up to log2(tiles) in the carry tree and as many in
 * X_j, 2 at the end), so |out_i - exact_i| <= gamma_d * sum_{k<=i} |x_k|,
 * gamma_d = d u / (1 - d u), u = 2^-53: about 62 u sum |x_k| at 2^28
 * elements (65536 tiles), whatever the magnitudes. Not the exact prefix
 * sums, and not a sequential running sum either.
 *
 * The pass: each block takes the next tile from a counter and reads it;
 * it publishes A_j at once, and computes what it needs of step 6 for
 * ranges of fewer than 32 tiles from the A of its neighbours (F of an
 * aligned range is F of its left half plus F of its right half: the same
 * pairwise tree, so the same bits); only tiles that end an aligned range
 * of 32 tiles or more publish F_j, as soon as the A and F it is made of
 * have arrived (before the wait for X_j's ranges ends: otherwise each
 * such tile would wait for the carry of the one 32 tiles before it, a
 * chain through the whole array). It then adds X_j and writes its tile.
 * A tile waits only on tiles handed out before it, so the pass cannot
 * deadlock, and never on a chain of other tiles' waits for recent tiles.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GR_SCAN_TILE 4096u

/*
 * Bytes of device workspace for prefix sums of up to n elements. The
 * workspace must be zero before its first use. One launch at a time per
 * workspace.
 */
size_t gr_scan_workspace_bytes(uint64_t n);

/*
 * out[i] = in[0] + ... + in[i] for i < n (n < 2^43), on stream; in holds n
 * elements of dtype (gr_dtype's values: 0 i32, 1 i64, 2 u32, 3 u64, 4 f32,
 * 5 f64, or a narrow dtype, 6 to 13, its elements on their own size's
 * boundary), out n 8-byte results; both device memory, and they must not
 * overlap unless they are the same 8-byte array (in == out for
 * i64/u64/f64 works: a tile is read whole before it is written). `epoch` tells this launch's
 * flags in the workspace from older ones: nonzero, and different from
 * every earlier launch's on this workspace since it was zeroed (a
 * counter that the caller keeps; zero the workspace again before it
 * wraps). Returns the cudaError_t of the launch (0 on success;
 * cudaErrorInvalidValue for another dtype or a 2-byte element off its
 * boundary).
 */
int gr_scan_launch(int dtype, const void *in, uint64_t n, void *out, void *workspace,
		   uint32_t epoch, void *stream);

#ifdef __cplusplus
}
#endif
