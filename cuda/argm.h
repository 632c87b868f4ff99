/*
 * The argmin/argmax kernel's host interface: the extreme of an array in
 * device memory and the index of its first occurrence, in one launch,
 * with the daemon's rules (PROTOCOL.md, "argmin, argmax"): min's or max's
 * value, compared bit for bit, so -0 is below +0; a NaN beats every
 * number, and the first NaN is the one reported; ties keep the smallest
 * index.
 *
 * Each element becomes an ordered 64-bit key (integers their value, u64
 * with its top bit flipped; floats their bits with the negative ones'
 * magnitude bits flipped, so that the integer order is the float order
 * with -0 below +0; a NaN the smallest key for argmin, the largest for
 * argmax). Each thread keeps the best (key, index) of the elements it
 * reads in increasing index order, taking only a strictly better key;
 * blocks and then the last block to finish keep the better pair, the
 * smaller index on equal keys. So the result is the same whatever the
 * grid, and equals the CPU's.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What one launch gives: value as the daemon's partial holds it (int64
 * for i32/i64, uint64 for u32/u64, the float64 bits of an f32 or f64
 * element), and its index from the array's start. */
typedef struct gr_argm_result {
	uint64_t value;
	uint64_t index;
} gr_argm_result;

/* Bytes of device workspace a launch needs: zero before the first use,
 * left zero by every launch. One launch at a time per workspace. */
size_t gr_argm_workspace_bytes(int sms);

/*
 * *out = argmin (is_max 0) or argmax (is_max 1) of the n > 0 elements of
 * dtype (0 i32, 1 i64, 2 u32, 3 u64, 4 f32, 5 f64) at data, on stream,
 * with a grid for sms multiprocessors. data (aligned to its element's
 * size), out and workspace are device memory. Returns the launch's
 * cudaError_t (0 on success).
 */
int gr_argm_launch(int dtype, int is_max, const void *data, uint64_t n, gr_argm_result *out,
		   void *workspace, int sms, void *stream);

#ifdef __cplusplus
}
#endif
