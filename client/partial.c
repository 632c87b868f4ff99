/*
 * libgpured's exact partials as values (gpured.h, "Exact partials"):
 * gpured_partial carries math/fsum.h's partial with the op and dtype it
 * belongs to, and the arithmetic is proto's, so that what the library
 * reads off the wire and what it combines obey one set of rules.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "client/partial.h"
#include "math/fsum.h"
#include "proto/types.h"

_Static_assert(GPURED_PARTIAL_LIMBS_MAX == GR_FSUM_LIMBS_MAX, "limbs");
_Static_assert(GPURED_PARTIAL_SCALE_MIN == GR_FSUM_SCALE_MIN, "scale");
_Static_assert(GPURED_PARTIAL_SCALE_MAX == GR_FSUM_SCALE_MAX, "scale");
_Static_assert((int)GPURED_PARTIAL_NAN == (int)GR_FSUM_NAN, "specials");
_Static_assert((int)GPURED_PARTIAL_PINF == (int)GR_FSUM_PINF, "specials");
_Static_assert((int)GPURED_PARTIAL_NINF == (int)GR_FSUM_NINF, "specials");
_Static_assert((int)GPURED_PARTIAL_NEGZERO == (int)GR_FSUM_NEGZERO, "specials");

bool client_partial_kind(gpured_op op, gpured_dtype dt)
{
	/* the narrow floats' sums are their widened f32 elements' */
	return (op == GPURED_OP_SUM || op == GPURED_OP_SUMSQ) && (unsigned)dt < GR_DT_N &&
	       gr_dtype_is_float((gr_dtype)dt);
}

static void to_exact(const gpured_partial *p, gr_fsum *ret)
{
	ret->count = p->count;
	ret->scale = p->scale;
	ret->specials = p->specials;
	ret->nlimbs = p->nlimbs;
	memcpy(ret->limbs, p->limbs, sizeof(ret->limbs));
}

void client_partial_from_exact(const gr_fsum *x, gpured_op op, gpured_dtype dt,
			       gpured_partial *ret)
{
	ret->op = op;
	ret->dtype = dt;
	ret->count = x->count;
	ret->scale = x->scale;
	ret->specials = x->specials;
	ret->nlimbs = x->nlimbs;
	memcpy(ret->limbs, x->limbs, sizeof(ret->limbs));
}

int gpured_partial_init(gpured_partial *ret, gpured_op op, gpured_dtype dt)
{
	if (!client_partial_kind(op, dt))
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->op = op;
	ret->dtype = dt;
	return 0;
}

int gpured_partial_combine(gpured_partial *acc, const gpured_partial *next)
{
	gr_fsum a, b;
	int r;

	if (!client_partial_kind(acc->op, acc->dtype) || acc->op != next->op ||
	    acc->dtype != next->dtype)
		return -EINVAL;
	to_exact(acc, &a);
	to_exact(next, &b);
	r = gr_fsum_combine(&a, &b);
	if (r < 0)
		return r;
	client_partial_from_exact(&a, acc->op, acc->dtype, acc);
	return 0;
}

int gpured_partial_round(const gpured_partial *p, double *ret)
{
	gr_fsum x;

	if (!client_partial_kind(p->op, p->dtype))
		return -EINVAL;
	to_exact(p, &x);
	if (gr_fsum_check(&x, NULL, 0) < 0)
		return -EINVAL;
	*ret = gr_fsum_round(&x);
	return 0;
}
