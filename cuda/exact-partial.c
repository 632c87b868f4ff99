/* The GPU's exact results as the daemon's partials (exact-partial.h). */
#include <assert.h>
#include <math.h>

#include "cuda/exact-partial.h"
#include "daemon/xsum.h"

_Static_assert((int)GR_EXACT_NAN == (int)GR_PARTIAL_NAN && (int)GR_EXACT_PINF == (int)GR_PARTIAL_PINF &&
		       (int)GR_EXACT_NINF == (int)GR_PARTIAL_NINF &&
		       (int)GR_EXACT_NOT_NZERO == (int)GR_PARTIAL_SEEN,
	       "an exact sum's flags are a partial's specials");

/*
 * The number sum(d[i] 2^(32 i)), i < n (signed digits, not normalised), as
 * a two's complement integer in 64-bit words: returns their count (0 for
 * zero), at most n / 2 + 2.
 */
static size_t digits_to_words(const int64_t *d, unsigned n, uint64_t *w)
{
	int64_t c = 0;
	size_t nw = 0;
	bool any = false;

	for (unsigned i = 0; i < n; i += 2) {
		/* two 32-bit places at a time, their carries on */
		int64_t t0 = d[i] + c;
		uint64_t lo = (uint32_t)t0;
		c = t0 >> 32;
		int64_t t1 = (i + 1 < n ? d[i + 1] : 0) + c;
		lo |= (uint64_t)(uint32_t)t1 << 32;
		c = t1 >> 32;
		w[nw++] = lo;
		any |= lo != 0;
	}
	/* what is left of the carry, with the sign on top */
	w[nw++] = (uint64_t)c;
	return any || c ? nw : 0;
}

void cuda_partial_add_exact(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags)
{
	uint64_t w[GR_EXACT_DIGITS / 2 + 2];
	assert(n <= GR_EXACT_DIGITS);
	size_t nw = digits_to_words(d, n, w);

	flags &= GR_PARTIAL_NAN | GR_PARTIAL_PINF | GR_PARTIAL_NINF | GR_PARTIAL_SEEN;
	if (nw) {
		/* opens the accumulator: a digit that is not 0 is an element
		 * other than -0 (as gr_partial_add_scaled()) */
		gr_partial_add_special(p, flags | GR_PARTIAL_SEEN);
		xsum_add_limbs(p->xacc, lsb, w, nw);
	} else if (flags) {
		gr_partial_add_special(p, flags);
	}
}

void cuda_moments_add_squares(gr_partial *p, const int64_t *d, unsigned n, int lsb, unsigned flags)
{
	uint64_t w[GR_EXACT_DIGITS / 2 + 2];
	assert(n <= GR_EXACT_DIGITS);
	size_t nw = digits_to_words(d, n, w);

	/* moments' sum of squares is always open (xsum_moments_identity()),
	 * and never -0 */
	xsum_add_limbs(p->x2acc, lsb, w, nw);
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

void cuda_int_digits_add(uint64_t *acc, const int64_t *d, unsigned nd)
{
	uint64_t w[GR_EXACT_DIGITS / 2 + 2];
	assert(nd <= GR_EXACT_DIGITS);
	size_t nw = digits_to_words(d, nd, w);

	xsum_add_limbs(acc, 0, w, nw);
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
