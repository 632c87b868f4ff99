/* Moments of segments: records from a launch's sums (segs-moments.h). */
#include "cuda/exact-partial.h"
#include "cuda/segred.h"
#include "cuda/segs-moments.h"
#include "math/segments.h"
#include "math/xsum.h"

_Static_assert(GR_SEGRED_F_NAN == GR_PARTIAL_NAN && GR_SEGRED_F_PINF == GR_PARTIAL_PINF &&
		       GR_SEGRED_F_NINF == GR_PARTIAL_NINF && GR_SEGRED_F_NOT_NZERO == GR_PARTIAL_SEEN,
	       "the segmented reduce's flags are a partial's specials");

void cuda_segs_moments_records(gr_dtype dt, const uint64_t *sums, const uint64_t *offsets,
			       uint64_t k, uint64_t ddof, uint8_t *records, uint64_t s0,
			       uint64_t s1)
{
	gr_segred_moments_layout l;
	gr_segred_moments_layout_of(dt, &l);
	const int64_t *sum = (const int64_t *)sums;
	const uint64_t *sum_flags = sums + k * l.sum_digits;
	const int64_t *sq = (const int64_t *)(sum_flags + k);
	const uint64_t *sq_flags = (const uint64_t *)(sq + k * l.sq_digits);
	const uint64_t *min = sq_flags + k, *max = min + k;
	const size_t rb = gr_segs_record_bytes(GR_OP_MOMENTS);

	for (uint64_t s = s0; s < s1; s++) {
		const int64_t *ds = sum + s * l.sum_digits, *dq = sq + s * l.sq_digits;
		gr_partial p;

		gr_partial_identity(GR_OP_MOMENTS, dt, &p);
		p.count = offsets[s + 1] - offsets[s];
		if (gr_dtype_is_float(dt)) {
			cuda_partial_add_exact(&p, ds, l.sum_digits, l.sum_lsb,
					       (unsigned)sum_flags[s]);
			cuda_moments_add_squares(&p, dq, l.sq_digits, l.sq_lsb,
						 (unsigned)sq_flags[s]);
		} else {
			xsum_add_digits(p.xacc, 0, ds, l.sum_digits);
			xsum_add_digits(p.x2acc, 0, dq, l.sq_digits);
		}
		/* min's and max's records: the values as the partial keeps them */
		p.lo.u = min[s];
		p.hi.u = max[s];
		gr_segs_record(GR_OP_MOMENTS, dt, ddof, &p, records + s * rb);
	}
}
