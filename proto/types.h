/*
 * gpured's vocabulary: reduction operations, element types and the error
 * codes of the wire protocol, with their wire names. Everything above the
 * wire (daemon, backends, client) speaks in these enums; only proto/ turns
 * them into bytes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gr_op {
	GR_OP_SUM,
	GR_OP_MIN,
	GR_OP_MAX,
	GR_OP_SUMSQ,
	GR_OP_ARGMIN, /* min, and the index of its first element */
	GR_OP_ARGMAX,
	GR_OP_MOMENTS, /* count, sum, min, max, mean and variance in one pass */
	GR_OP_N,
} gr_op;

typedef enum gr_dtype {
	GR_DT_I32,
	GR_DT_I64,
	GR_DT_U32,
	GR_DT_U64,
	GR_DT_F32,
	GR_DT_F64,
	/* Narrow dtypes: each element widens exactly to f32, i32 or u32
	 * (gr_dtype_wide()), and every op gives what it gives for the
	 * widened elements. */
	GR_DT_F16,    /* IEEE binary16 */
	GR_DT_BF16,   /* bfloat16: the top half of an f32 */
	GR_DT_F8E4M3, /* OCP E4M3 ("fn"): no infinities; S.1111.111 is NaN */
	GR_DT_F8E5M2, /* OCP E5M2: the top byte of an f16 */
	GR_DT_I8,
	GR_DT_U8,
	GR_DT_I16,
	GR_DT_U16,
	GR_DT_N,
} gr_dtype;

/* The wide dtypes (i32 to f64) are those below this one, the narrow ones
 * it and those above. */
#define GR_DT_NARROW_FIRST GR_DT_F16

/* Error codes of a response's error map; GR_OK means "no error". */
typedef enum gr_err {
	GR_OK,
	GR_ERR_INVALID_REQUEST,
	GR_ERR_UNKNOWN_METHOD,
	GR_ERR_INVALID_PARAMS,
	GR_ERR_TOO_LARGE,
	GR_ERR_EMPTY,
	GR_ERR_BUSY,
	GR_ERR_INTERNAL,
	GR_ERR_N,
} gr_err;

typedef enum gr_method {
	GR_METHOD_NONE,
	GR_METHOD_REDUCE,
	GR_METHOD_STATS,
	GR_METHOD_INFO,
	GR_METHOD_PING,
	GR_METHOD_MAP,
	GR_METHOD_UNMAP,
	GR_METHOD_MAP_PART,
} gr_method;

/* What a map request hands over (its "kind"). */
typedef enum gr_map_kind {
	GR_MAP_HOST,     /* a sealed memfd of host memory (the default) */
	GR_MAP_CUDA,     /* a CUDA allocation exported as a POSIX fd */
	GR_MAP_CUDA_IPC, /* a legacy cudaIpcMemHandle_t */
	GR_MAP_N,
} gr_map_kind;

/* The kind of number a result carries on the wire. */
typedef enum gr_kind {
	GR_KIND_I64,
	GR_KIND_U64,
	GR_KIND_F64,
} gr_kind;

typedef struct gr_value {
	gr_kind kind;
	union {
		int64_t i;
		uint64_t u;
		double f;
	};
} gr_value;

/*
 * The result of moments (PROTOCOL.md, "moments"): sum, min and max are
 * what those ops give for the same data (of the kind gr_result_kind()
 * names), mean and var float64 for every dtype.
 */
typedef struct gr_moments {
	uint64_t count;
	gr_value sum, min, max;
	double mean, var;
} gr_moments;

/* Wire names ("sum", "f32", "too_large", "reduce"); NULL when out of range. */
const char *gr_op_name(gr_op op);
const char *gr_dtype_name(gr_dtype dt);
const char *gr_err_name(gr_err err);
const char *gr_method_name(gr_method m);
const char *gr_map_kind_name(gr_map_kind k);

/* Parse a wire name of len bytes (not NUL-terminated); false if unknown. */
bool gr_op_parse(const char *s, size_t len, gr_op *ret);
bool gr_dtype_parse(const char *s, size_t len, gr_dtype *ret);
bool gr_err_parse(const char *s, size_t len, gr_err *ret);
bool gr_method_parse(const char *s, size_t len, gr_method *ret);

size_t gr_dtype_size(gr_dtype dt);
bool gr_dtype_is_float(gr_dtype dt);
bool gr_dtype_is_signed(gr_dtype dt);
/* The dtype dt's elements widen to exactly (f32, i32 or u32 for the
 * narrow dtypes), dt itself for the others. */
gr_dtype gr_dtype_wide(gr_dtype dt);
/* Whether dt is a narrow dtype, one that widens (gr_dtype_wide(dt) != dt). */
bool gr_dtype_is_narrow(gr_dtype dt);

/* argmin and argmax: the result carries an index beside its value. */
bool gr_op_has_index(gr_op op);

/* Ops whose GPU kernels are their own, each alone in its launch, and read
 * whole elements (argmin, argmax, moments): the CPU reduces those off their
 * elements' size's boundary. */
bool gr_op_own_kernel(gr_op op);

/*
 * The kind of number reduce returns for op over dt (PROTOCOL.md, "reduce");
 * for moments, the kind of its sum, min and max.
 */
gr_kind gr_result_kind(gr_op op, gr_dtype dt);
