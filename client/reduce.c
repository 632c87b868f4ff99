/*
 * Reduces to one value, by data or by region (PROTOCOL.md, "reduce"):
 * the request, sent from the caller's memory, and its reply, read as it
 * arrives (client_kind_reduce) and collected by gpured_wait() or
 * gpured_wait_id().
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "client/conn.h"
#include "client/reduce.h"
#include "proto/message.h"
#include "proto/mp.h"

gpured_value client_value_of(const gr_value *v, uint64_t count)
{
	gpured_value out = { .kind = (gpured_kind)v->kind, .count = count };

	if (v->kind == GR_KIND_I64)
		out.v.i = v->i;
	else if (v->kind == GR_KIND_U64)
		out.v.u = v->u;
	else
		out.v.f = v->f;
	return out;
}

int client_reduce_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len, char *why,
		       size_t size)
{
	gr_kind kind = gr_result_kind(e->op, e->dtype);
	gr_value v;
	uint64_t count;

	(void)msg;
	(void)len;
	if (e->op == GR_OP_MOMENTS) {
		/* the whole result kept; the value is its sum */
		if (gr_msg_parse_moments_result(result, kind, &e->moments) < 0) {
			snprintf(why, size, "malformed moments result");
			return -EPROTO;
		}
		v = e->moments.sum;
		count = e->moments.count;
	} else if (gr_msg_parse_reduce_result(result, kind, &v, &count) < 0) {
		snprintf(why, size, "malformed reduce result");
		return -EPROTO;
	}
	e->value = client_value_of(&v, count);
	if (gr_op_has_index(e->op) && gr_msg_parse_reduce_index(result, &e->value.index) < 0) {
		snprintf(why, size, "malformed %s result", gr_op_name(e->op));
		return -EPROTO;
	}
	return 0;
}

const client_kind client_kind_reduce = {
	.read = client_reduce_read,
};

/* What every reduce request must be, before anything is sent. */
static int check_request(gpured_t *g, gpured_op op, gpured_dtype dt)
{
	if (g->dead)
		return client_dead(g);
	if ((unsigned)op >= GR_OP_N || (unsigned)dt >= GR_DT_N)
		return client_error(g, -EINVAL, "unknown op or dtype");
	return 0;
}

int client_reduce_submit_data(gpured_t *g, const client_kind *kind, gpured_op op, gpured_dtype dt,
			      const void *data, size_t n, bool partial, uint64_t ddof,
			      uint32_t *ret_id)
{
	pending *e;
	size_t esz;
	uint32_t id;
	int r;

	r = check_request(g, op, dt);
	if (r < 0)
		return r;
	if (!data && n > 0)
		return client_error(g, -EINVAL, "no data");
	esz = gr_dtype_size((gr_dtype)dt);
	if (n > UINT32_MAX / esz)
		return client_error(g, -E2BIG, "%zu elements of %s do not fit in one request (4 GiB - 1)",
				    n, gr_dtype_name((gr_dtype)dt));

	r = client_pending_add(g, GR_METHOD_REDUCE, (gr_op)op, (gr_dtype)dt, kind, &e);
	if (r < 0)
		return r;
	id = e->id;

	g->wbuf.len = 0;
	if (op == GPURED_OP_MOMENTS && !partial)
		r = gr_msg_write_reduce_moments_header(&g->wbuf, id, (gr_dtype)dt, ddof,
						       (uint32_t)(n * esz));
	else
		r = (partial ? gr_msg_write_reduce_partial_header : gr_msg_write_reduce_header)(
			&g->wbuf, id, (gr_op)op, (gr_dtype)dt, (uint32_t)(n * esz));
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	/* Replies read during the send only mark entries done; the table
	 * is not reallocated until the next submit. */
	r = client_send_request(g, data, n * esz, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;
}

/* A reduce by region's request, whole, into b. */
static int write_region_request(gr_buf *b, uint32_t id, uint64_t region, gpured_op op,
				gpured_dtype dt, size_t offset, size_t n, bool partial,
				uint64_t ddof)
{
	const bool moments = op == GPURED_OP_MOMENTS;

	GR_MPW_TRY(gr_msg_write_request_header(b, id, GR_METHOD_REDUCE, 1));
	GR_MPW_TRY(gr_mpw_map(b, 5 + partial + moments));
	if (partial) {
		GR_MPW_TRY(gr_mpw_cstr(b, "partial"));
		GR_MPW_TRY(gr_mpw_bool(b, true));
	}
	GR_MPW_TRY(gr_mpw_cstr(b, "op"));
	GR_MPW_TRY(gr_mpw_cstr(b, gr_op_name((gr_op)op)));
	GR_MPW_TRY(gr_mpw_cstr(b, "dtype"));
	GR_MPW_TRY(gr_mpw_cstr(b, gr_dtype_name((gr_dtype)dt)));
	GR_MPW_TRY(gr_mpw_kv_uint(b, "region", region));
	GR_MPW_TRY(gr_mpw_kv_uint(b, "offset", offset));
	GR_MPW_TRY(gr_mpw_kv_uint(b, "count", n));
	if (moments)
		GR_MPW_TRY(gr_mpw_kv_uint(b, "ddof", ddof));
	return 0;
}

int client_reduce_submit_region(gpured_t *g, const client_kind *kind, uint64_t region,
				gpured_op op, gpured_dtype dt, size_t offset, size_t n, bool partial,
				uint64_t ddof, uint32_t *ret_id)
{
	pending *e;
	uint32_t id;
	int r;

	r = check_request(g, op, dt);
	if (r < 0)
		return r;
	r = client_pending_add(g, GR_METHOD_REDUCE, (gr_op)op, (gr_dtype)dt, kind, &e);
	if (r < 0)
		return r;
	id = e->id;
	g->wbuf.len = 0;
	r = write_region_request(&g->wbuf, id, region, op, dt, offset, n, partial, ddof);
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	r = client_send_request(g, NULL, 0, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;
}

int gpured_submit(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		  uint32_t *ret_id)
{
	return client_reduce_submit_data(g, &client_kind_reduce, op, dt, data, n,
					  /* partial= */ false, /* ddof= */ 0, ret_id);
}

int gpured_submit_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, uint32_t *ret_id)
{
	return client_reduce_submit_region(g, &client_kind_reduce, region, op, dt, offset, n,
					    /* partial= */ false, /* ddof= */ 0, ret_id);
}

int gpured_reduce(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		  gpured_value *ret)
{
	uint32_t id;
	int r;

	r = gpured_submit(g, op, dt, data, n, &id);
	if (r < 0)
		return r;
	return gpured_wait_id(g, id, ret);
}

int gpured_reduce_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, gpured_value *ret)
{
	uint32_t id;
	int r = gpured_submit_region(g, region, op, dt, offset, n, &id);

	return r < 0 ? r : gpured_wait_id(g, id, ret);
}

/* A sum of elements typed ctype (their bits, for the narrow floats),
 * whose value is field of the result. */
#define SUM_SHORTHAND(name, ctype, dt, rtype, field)                                             \
	int name(gpured_t *g, const ctype *x, size_t n, rtype *ret)                               \
	{                                                                                          \
		gpured_value v;                                                                    \
		int r = gpured_reduce(g, GPURED_OP_SUM, dt, x, n, &v);                             \
                                                                                                   \
		if (r == 0)                                                                        \
			*ret = v.v.field;                                                          \
		return r;                                                                          \
	}

SUM_SHORTHAND(gpured_sum_f32, float, GPURED_F32, double, f)
SUM_SHORTHAND(gpured_sum_i64, int64_t, GPURED_I64, int64_t, i)
SUM_SHORTHAND(gpured_sum_i8, int8_t, GPURED_I8, int64_t, i)
SUM_SHORTHAND(gpured_sum_u8, uint8_t, GPURED_U8, uint64_t, u)
SUM_SHORTHAND(gpured_sum_i16, int16_t, GPURED_I16, int64_t, i)
SUM_SHORTHAND(gpured_sum_u16, uint16_t, GPURED_U16, uint64_t, u)
SUM_SHORTHAND(gpured_sum_f16, uint16_t, GPURED_F16, double, f)
SUM_SHORTHAND(gpured_sum_bf16, uint16_t, GPURED_BF16, double, f)
SUM_SHORTHAND(gpured_sum_f8e4m3, uint8_t, GPURED_F8E4M3, double, f)
SUM_SHORTHAND(gpured_sum_f8e5m2, uint8_t, GPURED_F8E5M2, double, f)
