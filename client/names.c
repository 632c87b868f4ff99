/*
 * libgpured's ops, dtypes and result kinds: the protocol's own (proto/types.h)
 * under the public API's names, which are the same in the same order.
 */
#include <errno.h>
#include <string.h>

#include "client/gpured.h"
#include "proto/types.h"

_Static_assert((int)GPURED_OP_SUM == (int)GR_OP_SUM, "op order");
_Static_assert((int)GPURED_OP_MIN == (int)GR_OP_MIN, "op order");
_Static_assert((int)GPURED_OP_MAX == (int)GR_OP_MAX, "op order");
_Static_assert((int)GPURED_OP_SUMSQ == (int)GR_OP_SUMSQ, "op order");
_Static_assert((int)GPURED_OP_ARGMIN == (int)GR_OP_ARGMIN, "op order");
_Static_assert((int)GPURED_OP_ARGMAX == (int)GR_OP_ARGMAX, "op order");
_Static_assert((int)GPURED_OP_MOMENTS == (int)GR_OP_MOMENTS, "op order");
_Static_assert((int)GPURED_OP_MOMENTS + 1 == (int)GR_OP_N, "op count");
_Static_assert((int)GPURED_I32 == (int)GR_DT_I32, "dtype order");
_Static_assert((int)GPURED_I64 == (int)GR_DT_I64, "dtype order");
_Static_assert((int)GPURED_U32 == (int)GR_DT_U32, "dtype order");
_Static_assert((int)GPURED_U64 == (int)GR_DT_U64, "dtype order");
_Static_assert((int)GPURED_F32 == (int)GR_DT_F32, "dtype order");
_Static_assert((int)GPURED_F64 == (int)GR_DT_F64, "dtype order");
_Static_assert((int)GPURED_F16 == (int)GR_DT_F16, "dtype order");
_Static_assert((int)GPURED_BF16 == (int)GR_DT_BF16, "dtype order");
_Static_assert((int)GPURED_F8E4M3 == (int)GR_DT_F8E4M3, "dtype order");
_Static_assert((int)GPURED_F8E5M2 == (int)GR_DT_F8E5M2, "dtype order");
_Static_assert((int)GPURED_I8 == (int)GR_DT_I8, "dtype order");
_Static_assert((int)GPURED_U8 == (int)GR_DT_U8, "dtype order");
_Static_assert((int)GPURED_I16 == (int)GR_DT_I16, "dtype order");
_Static_assert((int)GPURED_U16 == (int)GR_DT_U16, "dtype order");
_Static_assert((int)GPURED_U16 + 1 == (int)GR_DT_N, "dtype count");
_Static_assert((int)GPURED_KIND_I64 == (int)GR_KIND_I64, "kind order");
_Static_assert((int)GPURED_KIND_U64 == (int)GR_KIND_U64, "kind order");
_Static_assert((int)GPURED_KIND_F64 == (int)GR_KIND_F64, "kind order");


const char *gpured_op_name(gpured_op op)
{
	return gr_op_name((gr_op)op);
}

const char *gpured_dtype_name(gpured_dtype dt)
{
	return gr_dtype_name((gr_dtype)dt);
}

int gpured_op_parse(const char *s, gpured_op *ret)
{
	gr_op op;

	if (!s || !gr_op_parse(s, strlen(s), &op))
		return -EINVAL;
	*ret = (gpured_op)op;
	return 0;
}

int gpured_dtype_parse(const char *s, gpured_dtype *ret)
{
	gr_dtype dt;

	if (!s || !gr_dtype_parse(s, strlen(s), &dt))
		return -EINVAL;
	*ret = (gpured_dtype)dt;
	return 0;
}

size_t gpured_dtype_size(gpured_dtype dt)
{
	if ((unsigned)dt >= GR_DT_N)
		return 0;
	return gr_dtype_size((gr_dtype)dt);
}

gpured_kind gpured_result_kind(gpured_op op, gpured_dtype dt)
{
	return (gpured_kind)gr_result_kind((gr_op)op, (gr_dtype)dt);
}

double gpured_value_as_double(const gpured_value *v)
{
	switch (v->kind) {
	case GPURED_KIND_I64:
		return (double)v->v.i;
	case GPURED_KIND_U64:
		return (double)v->v.u;
	case GPURED_KIND_F64:
		return v->v.f;
	}
	return 0;
}
