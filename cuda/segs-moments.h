/*
 * Moments of segments of device memory: the records (PROTOCOL.md,
 * "Segments") from the sums a segmented moments launch leaves (segred.h),
 * on the host, as the CPU's: each segment's exact sums and min and max
 * become a moments partial, whose mean and variance round once.
 */
#pragma once

#include <stdint.h>

#include "math/reduce.h"

/*
 * records[s] (40 bytes each), s0 <= s < s1 <= k: the moments record, with
 * ddof, of segment s, [offsets[s], offsets[s + 1]), of a launch of k
 * segments of dt that left sums (gr_segred_record_bytes(6, dt) x k bytes,
 * in its layout). Ranges that do not overlap may be made on several
 * threads at once.
 */
void cuda_segs_moments_records(gr_dtype dt, const uint64_t *sums, const uint64_t *offsets,
			       uint64_t k, uint64_t ddof, uint8_t *records, uint64_t s0,
			       uint64_t s1);
