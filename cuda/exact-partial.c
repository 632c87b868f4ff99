/* The GPU's exact results as the daemon's partials (exact-partial.h). */
#include <math.h>

#include "cuda/exact-partial.h"
#include "math/xsum.h"

_Static_assert((int)GR_EXACT_NAN == (int)GR_PARTIAL_NAN && (int)GR_EXACT_PINF == (int)GR_PARTIAL_PINF &&
		       (int)GR_EXACT_NINF == (int)GR_PARTIAL_NINF &&
		       (int)GR_EXACT_NOT_NZERO == (int)GR_PARTIAL_SEEN,
	       "an exact sum's flags are a partial's specials");

void cuda_partial_add_exact(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags)
{
	bool any = false;
	for (unsigned i = 0; i < n; i++)
		any |= d[i] != 0;
	flags &= GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF | GR_PARTIAL_SEEN;
	if (any) {
		/* opens the accumulator: a digit that is not 0 is an element
		 * other than -0 (as gr_partial_add_scaled()) */
		gr_partial_add_special(p, flags | GR_PARTIAL_SEEN);
		xsum_add_digits(p->xacc, lsb, d, n);
	} else if (flags) {
		gr_partial_add_special(p, flags);
	}
}

void cuda_moments_add_squares(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags)
{
	/* moments' sum of squares is always open (xsum_moments_identity()),
	 * and never -0 */
	xsum_add_digits(p->x2acc, lsb, d, n);
	p->x2flags |= flags & (GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF);
}

/* The exact sum's digits and specials added into p's accumulator. */
static void exact_add(const gr_exact_sum *s, gr_partial *p)
{
	cuda_partial_add_exact(p, s->digit, GR_EXACT_DIGITS, GR_EXACT_LSB_EXP, (unsigned)s->flags);
}

void cuda_exact_partial(const gr_exact_sum *s, gr_op op, gr_dtype dt, uint64_t n,
			gr_partial *ret)
{
	gr_partial_identity(op, dt, ret);
	ret->count = n;
	exact_add(s, ret);
}

void cuda_moments_partial(const gr_moments_sums *m, gr_dtype dt, uint64_t n, gr_partial *ret)
{
	if (!gr_dtype_is_float(dt)) {
		/* as the CPU's integer moments leave a partial (reduce.c) */
		gr_partial_identity(GR_OP_MOMENTS, dt, ret);
		ret->count = n;
		xsum_add_digits(ret->xacc, 0, m->isum, GR_MOMENTS_ISUM_DIGITS);
		xsum_add_digits(ret->x2acc, 0, m->isq, GR_MOMENTS_ISQ_DIGITS);
		if (gr_dtype_is_signed(dt)) {
			ret->lo.i = (int64_t)(m->kmin ^ (1ull << 63));
			ret->hi.i = (int64_t)(m->kmax ^ (1ull << 63));
		} else {
			ret->lo.u = m->kmin;
			ret->hi.u = m->kmax;
		}
		return;
	}
	const int xdt = dt == GR_DT_F32 ? GR_EXACT_F32 : GR_EXACT_F64;

	gr_partial_identity(GR_OP_MOMENTS, dt, ret);
	ret->count = n;
	exact_add(&m->sum, ret);
	cuda_moments_add_squares(ret, m->sq.digit, GR_EXACT_DIGITS, GR_EXACT_LSB_EXP,
				 (unsigned)m->sq.flags);
	if (m->sum.flags & GR_EXACT_NAN) {
		/* min and max are NaN too, as the CPU's */
		ret->lo.f = NAN;
		ret->hi.f = NAN;
	} else {
		ret->lo.f = gr_moments_key_value(xdt, m->kmin);
		ret->hi.f = gr_moments_key_value(xdt, m->kmax);
	}
}
