#include <string.h>

#include "types.h"

static const char *const op_names[GR_OP_N] = {
	[GR_OP_SUM] = "sum",
	[GR_OP_MIN] = "min",
	[GR_OP_MAX] = "max",
	[GR_OP_SUMSQ] = "sumsq",
	[GR_OP_ARGMIN] = "argmin",
	[GR_OP_ARGMAX] = "argmax",
	[GR_OP_MOMENTS] = "moments",
};

static const char *const dtype_names[GR_DT_N] = {
	[GR_DT_I32] = "i32", [GR_DT_I64] = "i64", [GR_DT_U32] = "u32",
	[GR_DT_U64] = "u64", [GR_DT_F32] = "f32", [GR_DT_F64] = "f64",
	[GR_DT_F16] = "f16", [GR_DT_BF16] = "bf16", [GR_DT_F8E4M3] = "f8e4m3",
	[GR_DT_F8E5M2] = "f8e5m2", [GR_DT_I8] = "i8", [GR_DT_U8] = "u8",
	[GR_DT_I16] = "i16", [GR_DT_U16] = "u16",
};

static const char *const err_names[GR_ERR_N] = {
	[GR_OK] = "ok",
	[GR_ERR_INVALID_REQUEST] = "invalid_request",
	[GR_ERR_UNKNOWN_METHOD] = "unknown_method",
	[GR_ERR_INVALID_PARAMS] = "invalid_params",
	[GR_ERR_TOO_LARGE] = "too_large",
	[GR_ERR_EMPTY] = "empty",
	[GR_ERR_BUSY] = "busy",
	[GR_ERR_INTERNAL] = "internal",
};

static const char *const method_names[] = {
	[GR_METHOD_NONE] = NULL,
	[GR_METHOD_REDUCE] = "reduce",
	[GR_METHOD_STATS] = "stats",
	[GR_METHOD_INFO] = "info",
	[GR_METHOD_PING] = "ping",
	[GR_METHOD_MAP] = "map",
	[GR_METHOD_UNMAP] = "unmap",
	[GR_METHOD_MAP_PART] = "map_part",
};

static const char *const map_kind_names[GR_MAP_N] = {
	[GR_MAP_HOST] = "host",
	[GR_MAP_CUDA] = "cuda",
	[GR_MAP_CUDA_IPC] = "cuda_ipc",
};

#define N_METHODS (sizeof(method_names) / sizeof(method_names[0]))

static int lookup(const char *const *names, size_t n, const char *s, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
			return (int)i;
	return -1;
}

const char *gr_op_name(gr_op op)
{
	return (unsigned)op < GR_OP_N ? op_names[op] : NULL;
}

const char *gr_dtype_name(gr_dtype dt)
{
	return (unsigned)dt < GR_DT_N ? dtype_names[dt] : NULL;
}

const char *gr_err_name(gr_err err)
{
	return (unsigned)err < GR_ERR_N ? err_names[err] : NULL;
}

const char *gr_method_name(gr_method m)
{
	return (unsigned)m < N_METHODS ? method_names[m] : NULL;
}

const char *gr_map_kind_name(gr_map_kind k)
{
	return (unsigned)k < GR_MAP_N ? map_kind_names[k] : NULL;
}

bool gr_op_parse(const char *s, size_t len, gr_op *ret)
{
	int i = lookup(op_names, GR_OP_N, s, len);
	if (i < 0)
		return false;
	*ret = (gr_op)i;
	return true;
}

bool gr_dtype_parse(const char *s, size_t len, gr_dtype *ret)
{
	int i = lookup(dtype_names, GR_DT_N, s, len);
	if (i < 0)
		return false;
	*ret = (gr_dtype)i;
	return true;
}

bool gr_err_parse(const char *s, size_t len, gr_err *ret)
{
	int i = lookup(err_names, GR_ERR_N, s, len);
	if (i <= 0) /* "ok" is not a wire error code */
		return false;
	*ret = (gr_err)i;
	return true;
}

bool gr_method_parse(const char *s, size_t len, gr_method *ret)
{
	int i = lookup(method_names, N_METHODS, s, len);
	if (i < 0)
		return false;
	*ret = (gr_method)i;
	return true;
}

size_t gr_dtype_size(gr_dtype dt)
{
	switch (dt) {
	case GR_DT_I32:
	case GR_DT_U32:
	case GR_DT_F32:
		return 4;
	case GR_DT_I64:
	case GR_DT_U64:
	case GR_DT_F64:
		return 8;
	case GR_DT_F16:
	case GR_DT_BF16:
	case GR_DT_I16:
	case GR_DT_U16:
		return 2;
	case GR_DT_F8E4M3:
	case GR_DT_F8E5M2:
	case GR_DT_I8:
	case GR_DT_U8:
		return 1;
	default:
		return 0;
	}
}

gr_dtype gr_dtype_wide(gr_dtype dt)
{
	switch (dt) {
	case GR_DT_F16:
	case GR_DT_BF16:
	case GR_DT_F8E4M3:
	case GR_DT_F8E5M2:
		return GR_DT_F32;
	case GR_DT_I8:
	case GR_DT_I16:
		return GR_DT_I32;
	case GR_DT_U8:
	case GR_DT_U16:
		return GR_DT_U32;
	default:
		return dt;
	}
}

bool gr_dtype_is_narrow(gr_dtype dt)
{
	return (unsigned)dt < GR_DT_N && gr_dtype_wide(dt) != dt;
}

bool gr_dtype_is_float(gr_dtype dt)
{
	dt = gr_dtype_wide(dt);
	return dt == GR_DT_F32 || dt == GR_DT_F64;
}

bool gr_dtype_is_signed(gr_dtype dt)
{
	dt = gr_dtype_wide(dt);
	return dt == GR_DT_I32 || dt == GR_DT_I64;
}

bool gr_op_has_index(gr_op op)
{
	return op == GR_OP_ARGMIN || op == GR_OP_ARGMAX;
}

bool gr_op_own_kernel(gr_op op)
{
	return gr_op_has_index(op) || op == GR_OP_MOMENTS;
}

gr_kind gr_result_kind(gr_op op, gr_dtype dt)
{
	if (op == GR_OP_SUMSQ || gr_dtype_is_float(dt))
		return GR_KIND_F64;
	return gr_dtype_is_signed(dt) ? GR_KIND_I64 : GR_KIND_U64;
}
