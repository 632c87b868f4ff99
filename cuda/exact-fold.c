/*
 * The host's half of an exact GPU sum, for the programs that take the
 * kernels alone (the engine folds into partials: exact-partial.c): the
 * device's digits added into the math's exact accumulator and rounded
 * once there.
 */
#include "cuda/exact.h"
#include "math/reduce.h"

double gr_exact_fold(const gr_exact_sum *s, uint64_t n)
{
	gr_partial p;
	gr_value v;

	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &p);
	p.count = n;
	for (int i = 0; i < GR_EXACT_DIGITS; i++)
		gr_partial_add_scaled(&p, s->digit[i], GR_EXACT_LSB_EXP + GR_EXACT_DIGIT_BITS * i);
	gr_partial_add_special(&p, (unsigned)s->flags & (GR_PARTIAL_NAN | GR_PARTIAL_PINF |
							 GR_PARTIAL_NINF | GR_PARTIAL_SEEN));
	gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v);
	return v.f;
}
