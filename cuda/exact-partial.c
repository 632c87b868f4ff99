/* The GPU's exact results as the daemon's partials (exact-partial.h). */
#include <math.h>

#include "cuda/exact-partial.h"
#include "daemon/xsum.h"

_Static_assert((int)GR_EXACT_NAN == (int)GR_PARTIAL_NAN && (int)GR_EXACT_PINF == (int)GR_PARTIAL_PINF &&
		       (int)GR_EXACT_NINF == (int)GR_PARTIAL_NINF &&
		       (int)GR_EXACT_NOT_NZERO == (int)GR_PARTIAL_SEEN,
	       "an exact sum's flags are a partial's specials");

void cuda_partial_add_exact(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags)
{
	for (unsigned i = 0; i < n; i++)
		if (d[i])
			gr_partial_add_scaled(p, d[i], lsb + GR_EXACT_DIGIT_BITS * (int)i);
	flags &= GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF | GR_PARTIAL_SEEN;
	if (flags)
		gr_partial_add_special(p, flags);
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

void cuda_int_digits_add(uint64_t *acc, const int64_t *d, unsigned nd)
{
	for (unsigned i = 0; i < nd; i++)
		if (d[i])
			xsum_add_int(acc, 32 * i,
				     d[i] < 0 ? (unsigned __int128)(-(uint64_t)d[i]) : (unsigned __int128)d[i],
				     d[i] < 0);
}

void cuda_moments_partial(const gr_moments_sums *m, gr_dtype dt, uint64_t n, gr_partial *ret)
{
	if (!gr_dtype_is_float(dt)) {
		/* as the CPU's integer moments leave a partial (reduce.c) */
		gr_partial_identity(GR_OP_MOMENTS, dt, ret);
		ret->count = n;
		cuda_int_digits_add(ret->xacc, m->isum, GR_MOMENTS_ISUM_DIGITS);
		cuda_int_digits_add(ret->x2acc, m->isq, GR_MOMENTS_ISQ_DIGITS);
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
	gr_partial sq;

	/* the squares' sum as a sumsq partial, then taken in whole */
	cuda_exact_partial(&m->sq, GR_OP_SUMSQ, dt, n, &sq);
	gr_partial_identity(GR_OP_MOMENTS, dt, ret);
	ret->count = n;
	exact_add(&m->sum, ret);
	xsum_sq_take(ret, &sq);
	if (m->sum.flags & GR_EXACT_NAN) {
		/* min and max are NaN too, as the CPU's */
		ret->lo.f = NAN;
		ret->hi.f = NAN;
	} else {
		ret->lo.f = gr_moments_key_value(xdt, m->kmin);
		ret->hi.f = gr_moments_key_value(xdt, m->kmax);
	}
}
