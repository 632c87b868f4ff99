/*
 * Partials (partial.h): the state of each op over no elements, two
 * neighbouring runs' partials combined, and the result a partial
 * finishes as. Float sums and sums of squares combine and round in the
 * exact accumulator (xsum.c); moments' mean and variance round in
 * moments.c.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "math/moments.h"
#include "math/reduce.h"
#include "math/xsum.h"

/* Which member of gr_partial.v an (op, dtype) keeps its state in (for
 * moments: its sum's; its min and max are min's and max's kind). */
static gr_kind partial_kind(gr_op op, gr_dtype dt)
{
	if (op == GR_OP_SUMSQ || op == GR_OP_MOMENTS || gr_dtype_is_float(dt))
		return GR_KIND_F64;
	if (op == GR_OP_SUM || !gr_dtype_is_signed(dt))
		return GR_KIND_U64;
	return GR_KIND_I64;
}

void gr_partial_identity(gr_op op, gr_dtype dt, gr_partial *ret)
{
	const bool is_min = op == GR_OP_MIN || op == GR_OP_ARGMIN;
	const bool is_max = op == GR_OP_MAX || op == GR_OP_ARGMAX;

	memset(ret, 0, sizeof(*ret));
	if (op == GR_OP_MOMENTS) {
		gr_partial lo, hi;
		xsum_moments_identity(ret, !gr_dtype_is_float(dt));
		gr_partial_identity(GR_OP_MIN, dt, &lo);
		gr_partial_identity(GR_OP_MAX, dt, &hi);
		ret->lo = lo.v;
		ret->hi = hi.v;
		return;
	}
	switch (partial_kind(op, dt)) {
	case GR_KIND_F64:
		ret->v.f = is_min ? INFINITY : is_max ? -INFINITY : 0.0;
		if (op == GR_OP_SUM || op == GR_OP_SUMSQ)
			xsum_identity(ret, op == GR_OP_SUMSQ);
		break;
	case GR_KIND_U64:
		ret->v.u = is_min ? UINT64_MAX : 0;
		break;
	case GR_KIND_I64:
		ret->v.i = is_min ? INT64_MAX : INT64_MIN;
		break;
	}
}

/*
 * Does next's extreme replace acc's, for argmin (is_min) or argmax? Only
 * a strictly better one does, so ties keep the first index: a NaN beats
 * every number and no later NaN, and -0 is below +0.
 */
static bool arg_takes(gr_kind k, bool is_min, const gr_partial *acc, const gr_partial *next)
{
	switch (k) {
	case GR_KIND_F64: {
		double a = acc->v.f, b = next->v.f;
		if (isnan(a) || isnan(b))
			return !isnan(a);
		if (a == 0 && b == 0)
			return is_min ? signbit(b) && !signbit(a) : signbit(a) && !signbit(b);
		return is_min ? b < a : b > a;
	}
	case GR_KIND_U64:
		return is_min ? next->v.u < acc->v.u : next->v.u > acc->v.u;
	case GR_KIND_I64:
		return is_min ? next->v.i < acc->v.i : next->v.i > acc->v.i;
	}
	return false;
}

/* *a = min(*a, *b) (is_min) or max, for min's and max's kind k. */
static void extreme_combine(gr_kind k, bool is_min, gr_pvalue *a, const gr_pvalue *b)
{
	switch (k) {
	case GR_KIND_F64:
		if (isnan(a->f) || isnan(b->f)) {
			a->f = NAN;
		} else if (is_min ? b->f < a->f : b->f > a->f) {
			a->f = b->f;
		} else if (b->f == 0 && a->f == 0) {
			/* -0 is below +0 */
			bool sa = signbit(a->f), sb = signbit(b->f);
			a->f = (is_min ? sa || sb : sa && sb) ? -0.0 : 0.0;
		}
		break;
	case GR_KIND_U64:
		if (is_min ? b->u < a->u : b->u > a->u)
			a->u = b->u;
		break;
	case GR_KIND_I64:
		if (is_min ? b->i < a->i : b->i > a->i)
			a->i = b->i;
		break;
	}
}

void gr_partial_combine(gr_op op, gr_dtype dt, gr_partial *acc, const gr_partial *next)
{
	/* A partial of no elements is the identity, whatever its history:
	 * combining with one is a copy, or nothing. */
	if (next->count == 0)
		return;
	if (acc->count == 0) {
		*acc = *next;
		return;
	}
	if (gr_op_has_index(op)) {
		/* next's index counts from its own first element */
		if (arg_takes(partial_kind(op, dt), op == GR_OP_ARGMIN, acc, next)) {
			acc->v = next->v;
			acc->index = acc->count + next->index;
		}
		acc->count += next->count;
		return;
	}
	acc->count += next->count;
	if (op == GR_OP_MOMENTS) {
		const gr_kind k = partial_kind(GR_OP_MIN, dt);
		xsum_combine(acc, next);
		xsum_sq_combine(acc, next);
		extreme_combine(k, /* is_min= */ true, &acc->lo, &next->lo);
		extreme_combine(k, /* is_min= */ false, &acc->hi, &next->hi);
		return;
	}
	if (op == GR_OP_SUM && partial_kind(op, dt) == GR_KIND_U64) {
		acc->v.u += next->v.u;
		return;
	}
	if ((op == GR_OP_SUM || op == GR_OP_SUMSQ) && partial_kind(op, dt) == GR_KIND_F64) {
		xsum_combine(acc, next);
		return;
	}
	extreme_combine(partial_kind(op, dt), op == GR_OP_MIN, &acc->v, &next->v);
}

gr_err gr_partial_finish(gr_op op, gr_dtype dt, const gr_partial *p, gr_value *ret)
{
	ret->kind = gr_result_kind(op, dt);
	ret->u = 0;
	if (p->count == 0 && op != GR_OP_SUM && op != GR_OP_SUMSQ)
		return GR_ERR_EMPTY;
	if (op == GR_OP_MOMENTS && ret->kind != GR_KIND_F64) {
		/* the exact integer sum's low 64 bits: what sum's wrapping gives */
		_Static_assert(GR_PARTIAL_EXP_MIN % 64 == 0, "units on a word boundary");
		ret->u = p->xacc[-GR_PARTIAL_EXP_MIN / 64];
		return GR_OK;
	}
	switch (ret->kind) {
	case GR_KIND_F64: {
		double f = op == GR_OP_SUM || op == GR_OP_SUMSQ || op == GR_OP_MOMENTS
		               ? xsum_round(p)
		               : p->v.f;
		/* One NaN on the wire, whatever payload the arithmetic left. */
		ret->f = isnan(f) ? NAN : f;
		break;
	}
	case GR_KIND_U64:
		ret->u = p->v.u;
		break;
	case GR_KIND_I64:
		/* Signed sums wrap: the partial holds them as uint64. */
		ret->i = op == GR_OP_SUM ? (int64_t)p->v.u : p->v.i;
		break;
	}
	return GR_OK;
}

gr_err gr_moments_finish(gr_dtype dt, const gr_partial *p, uint64_t ddof, gr_moments *ret)
{
	const gr_kind k = gr_result_kind(GR_OP_MOMENTS, dt);
	gr_err e = gr_partial_finish(GR_OP_MOMENTS, dt, p, &ret->sum);

	if (e != GR_OK)
		return e;
	if (ddof >= p->count)
		return GR_ERR_INVALID_PARAMS;
	ret->count = p->count;
	ret->min = (gr_value){.kind = k, .u = p->lo.u};
	ret->max = (gr_value){.kind = k, .u = p->hi.u};
	if (k == GR_KIND_F64) {
		/* One NaN on the wire, as gr_partial_finish() */
		ret->min.f = isnan(ret->min.f) ? NAN : ret->min.f;
		ret->max.f = isnan(ret->max.f) ? NAN : ret->max.f;
	}
	moments_round(p, ddof, &ret->mean, &ret->var);
	return GR_OK;
}
