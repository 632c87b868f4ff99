/*
 * The reduction kernel's host interface, shared by the CUDA engine (C), the
 * kernel tests, and the benchmarks and progressions that time the kernel.
 *
 * A segment (one job's array) is cut into rows of 512 bytes: lane l of a
 * warp owns bytes [16 l, 16 l + 16) of every row, measured from the
 * segment's first byte whatever its address. It keeps one accumulator for
 * each place in those 16 bytes (four for 4-byte types, two for 8-byte
 * ones), each folding the elements at its place row after row, and at the
 * end combines them pairwise: (0 + 1) + (2 + 3). A segment has
 * gr_kernel_units(n) units of about gr_kernel_unit_rows(n) rows each, unit
 * u taking rows u, u + units, u + 2 units, ...; one warp reduces one unit
 * (a fixed butterfly ends it). The unit partials are combined in groups of
 * GR_KERNEL_WARPS_PER_BLOCK consecutive units, then the groups' partials
 * (when there is more than one group); each combine is lane l taking
 * partials l, l + 32, ... in order and the lanes then meeting in the same
 * butterfly. That order depends only on the segment's length and dtype, so
 * a job's bits are the same in a batch of thousands, alone, at any
 * alignment, and through the single-array entry point. Min and max do not
 * depend on order at all: a lane folds its elements into several
 * accumulators (floats compared as floats, with their NaNs and the signs
 * of their zeros kept beside), and from the lane's result on they travel
 * as integers (floats as order-preserving keys).
 *
 * One launch does everything. The batch kernel: the last warp of a group
 * to finish (an atomic ticket after a fence) combines the group, the last
 * group the segment, and each puts its ticket back to zero for the next
 * launch. The single-array kernel: one block per group, whose warps meet
 * in shared memory; one group is the answer with no ticket at all, and
 * otherwise the last block to take the one ticket combines the groups.
 * Integer and float results alike go through this one path, never
 * through floating-point atomics.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GR_KERNEL_ROW_BYTES 512u
#define GR_KERNEL_WARPS_PER_BLOCK 8u

/* One segment of a batch, as the kernel reads it (device memory). */
typedef struct gr_kseg {
	uint64_t offset;      /* bytes from the batch's device base */
	uint64_t n;           /* elements */
	uint32_t opdt;        /* GR_KSEG_OPDT(op, dtype) */
	uint32_t unit_rows;   /* rows per unit */
	uint32_t first_unit;  /* index of its first unit in the batch */
	uint32_t units;       /* units of this segment (0 when n == 0) */
} gr_kseg;

/* A segment's op and dtype in one word: dtype below 16 (gr_dtype has 14). */
#define GR_KSEG_OPDT(op, dtype) ((uint32_t)(op) * 16u + (uint32_t)(dtype))

/* Rows per unit for a segment of n elements of size bytes. */
uint32_t gr_kernel_unit_rows(uint64_t n, size_t size);
/* Units of a segment of n elements of size bytes. */
uint64_t gr_kernel_units(uint64_t n, size_t size);

/*
 * Reduce a batch in one launch on stream: segs[0..nsegs) sorted by
 * first_unit, total_units = sum of their units. out[i] receives segment
 * i's 64-bit result (the gr_partial member that op and dtype select);
 * segments of no elements are left alone. partials holds 2 * total_units
 * values; tickets nsegs + total_units counters, zero before the launch
 * and zero after.
 * Returns the cudaError_t of the launch (0 on success).
 */
int gr_kernel_launch_batch(const void *base, const gr_kseg *segs, uint32_t nsegs,
			   uint32_t total_units, uint64_t *partials, uint32_t *tickets,
			   uint64_t *out, int sm_count, void *stream);

/* Segments a launch can take in its parameters. */
#define GR_KERNEL_PARAM_SEGS 64u

/*
 * The same launch with the segment table in host memory, passed in the
 * launch's parameters (nsegs <= GR_KERNEL_PARAM_SEGS): no copy of the
 * table ahead of the launch. hsegs is read before this returns. The
 * kernel and its results are the same as gr_kernel_launch_batch's.
 */
int gr_kernel_launch_batch_params(const void *base, const gr_kseg *hsegs, uint32_t nsegs,
				  uint32_t total_units, uint64_t *partials, uint32_t *tickets,
				  uint64_t *out, int sm_count, void *stream);

/*
 * Reduce one array of n > 0 elements in one launch (the single-array
 * path); partials holds 2 * gr_kernel_units(n, size) values (it uses one
 * per group), ticket 1 + gr_kernel_units(n, size) counters (it uses the
 * first), zero before and after. Returns
 * the cudaError_t of the launch. The engine launches only the batch
 * kernels; the kernel test holds this path to their bits, and
 * gpured-device-bench and the progressions time it.
 */
int gr_kernel_launch_single(int op, int dtype, const void *data, uint64_t n,
			    uint64_t *partials, uint32_t *ticket, uint64_t *out,
			    int sm_count, void *stream);

#ifdef __cplusplus
}
#endif
