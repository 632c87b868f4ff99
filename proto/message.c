#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "message.h"

const gr_obj_limits gr_msg_response_limits = {
	.max_depth = 8,
	.max_items = 4096,
	.max_str = 1u << 20,
};

int gr_msg_write_request_header(gr_buf *b, uint32_t msgid, gr_method m, uint32_t nparams)
{
	const char *name = gr_method_name(m);
	int r;

	if (!name)
		return -EINVAL;
	r = gr_mpw_array(b, 4);
	if (r >= 0)
		r = gr_mpw_uint(b, GR_MSG_REQUEST);
	if (r >= 0)
		r = gr_mpw_uint(b, msgid);
	if (r >= 0)
		r = gr_mpw_cstr(b, name);
	if (r >= 0)
		r = gr_mpw_array(b, nparams);
	return r;
}

int gr_msg_write_request(gr_buf *b, uint32_t msgid, gr_method m)
{
	return gr_msg_write_request_header(b, msgid, m, 0);
}

/* The reduce request up to its data's bin header, with "partial": true
 * after op and dtype when asked. */
static int write_reduce_header(gr_buf *b, uint32_t msgid, gr_op op, gr_dtype dt, bool partial,
			       uint32_t nbytes)
{
	const char *opname = gr_op_name(op), *dtname = gr_dtype_name(dt);
	int r;

	if (!opname || !dtname)
		return -EINVAL;
	r = gr_msg_write_request_header(b, msgid, GR_METHOD_REDUCE, 1);
	if (r >= 0)
		r = gr_mpw_map(b, partial ? 4 : 3);
	/* op and dtype first: the daemon reduces data as it arrives. */
	if (r >= 0)
		r = gr_mpw_cstr(b, "op");
	if (r >= 0)
		r = gr_mpw_cstr(b, opname);
	if (r >= 0)
		r = gr_mpw_cstr(b, "dtype");
	if (r >= 0)
		r = gr_mpw_cstr(b, dtname);
	if (r >= 0 && partial) {
		r = gr_mpw_cstr(b, "partial");
		if (r >= 0)
			r = gr_mpw_bool(b, true);
	}
	if (r >= 0)
		r = gr_mpw_cstr(b, "data");
	if (r >= 0)
		r = gr_mpw_bin_header(b, nbytes);
	return r;
}

int gr_msg_write_reduce_moments_header(gr_buf *b, uint32_t msgid, gr_dtype dt, uint64_t ddof,
				       uint32_t nbytes)
{
	const char *dtname = gr_dtype_name(dt);
	int r;

	if (!dtname)
		return -EINVAL;
	r = gr_msg_write_request_header(b, msgid, GR_METHOD_REDUCE, 1);
	if (r >= 0)
		r = gr_mpw_map(b, 4);
	if (r >= 0)
		r = gr_mpw_cstr(b, "op");
	if (r >= 0)
		r = gr_mpw_cstr(b, gr_op_name(GR_OP_MOMENTS));
	if (r >= 0)
		r = gr_mpw_cstr(b, "dtype");
	if (r >= 0)
		r = gr_mpw_cstr(b, dtname);
	if (r >= 0)
		r = gr_mpw_cstr(b, "ddof");
	if (r >= 0)
		r = gr_mpw_uint(b, ddof);
	if (r >= 0)
		r = gr_mpw_cstr(b, "data");
	if (r >= 0)
		r = gr_mpw_bin_header(b, nbytes);
	return r;
}

int gr_msg_write_reduce_header(gr_buf *b, uint32_t msgid, gr_op op, gr_dtype dt, uint32_t nbytes)
{
	return write_reduce_header(b, msgid, op, dt, /* partial= */ false, nbytes);
}

int gr_msg_write_reduce_partial_header(gr_buf *b, uint32_t msgid, gr_op op, gr_dtype dt,
				       uint32_t nbytes)
{
	return write_reduce_header(b, msgid, op, dt, /* partial= */ true, nbytes);
}

int gr_msg_write_response_header(gr_buf *b, uint32_t msgid)
{
	int r;

	r = gr_mpw_array(b, 4);
	if (r >= 0)
		r = gr_mpw_uint(b, GR_MSG_RESPONSE);
	if (r >= 0)
		r = gr_mpw_uint(b, msgid);
	if (r >= 0)
		r = gr_mpw_nil(b);
	return r;
}

static int write_value(gr_buf *b, const gr_value *v)
{
	switch (v->kind) {
	case GR_KIND_I64:
		return gr_mpw_int(b, v->i);
	case GR_KIND_U64:
		return gr_mpw_uint(b, v->u);
	case GR_KIND_F64:
		return gr_mpw_f64(b, v->f);
	}
	return -EINVAL;
}

int gr_msg_write_response_moments(gr_buf *b, uint32_t msgid, const gr_moments *m)
{
	int r;

	if (m->sum.kind != m->min.kind || m->sum.kind != m->max.kind ||
	    (m->sum.kind != GR_KIND_I64 && m->sum.kind != GR_KIND_U64 &&
	     m->sum.kind != GR_KIND_F64))
		return -EINVAL;
	r = gr_msg_write_response_header(b, msgid);
	if (r >= 0)
		r = gr_mpw_map(b, 6);
	if (r >= 0)
		r = gr_mpw_cstr(b, "count");
	if (r >= 0)
		r = gr_mpw_uint(b, m->count);
	if (r >= 0)
		r = gr_mpw_cstr(b, "sum");
	if (r >= 0)
		r = write_value(b, &m->sum);
	if (r >= 0)
		r = gr_mpw_cstr(b, "min");
	if (r >= 0)
		r = write_value(b, &m->min);
	if (r >= 0)
		r = gr_mpw_cstr(b, "max");
	if (r >= 0)
		r = write_value(b, &m->max);
	if (r >= 0)
		r = gr_mpw_cstr(b, "mean");
	if (r >= 0)
		r = gr_mpw_f64(b, m->mean);
	if (r >= 0)
		r = gr_mpw_cstr(b, "var");
	if (r >= 0)
		r = gr_mpw_f64(b, m->var);
	return r;
}

/* [1, msgid, nil, {"value": v, "count": count, ...  (npairs in all) */
static int write_result_head(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t count,
			     uint32_t npairs)
{
	int r;

	if (v->kind != GR_KIND_I64 && v->kind != GR_KIND_U64 && v->kind != GR_KIND_F64)
		return -EINVAL;
	r = gr_msg_write_response_header(b, msgid);
	if (r >= 0)
		r = gr_mpw_map(b, npairs);
	if (r >= 0)
		r = gr_mpw_str(b, "value", 5);
	if (r >= 0) {
		switch (v->kind) {
		case GR_KIND_I64:
			r = gr_mpw_int(b, v->i);
			break;
		case GR_KIND_U64:
			r = gr_mpw_uint(b, v->u);
			break;
		default:
			r = gr_mpw_f64(b, v->f);
			break;
		}
	}
	if (r >= 0)
		r = gr_mpw_str(b, "count", 5);
	if (r >= 0)
		r = gr_mpw_uint(b, count);
	return r;
}

int gr_msg_write_response_value(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t count)
{
	return write_result_head(b, msgid, v, count, 2);
}

int gr_msg_write_response_segments(gr_buf *b, uint32_t msgid, uint64_t count, uint64_t nseg,
				   const void *records, size_t bytes)
{
	int r;

	if (bytes > UINT32_MAX)
		return -E2BIG;
	r = gr_msg_write_response_header(b, msgid);
	if (r >= 0)
		r = gr_mpw_map(b, 3);
	if (r >= 0)
		r = gr_mpw_cstr(b, "count");
	if (r >= 0)
		r = gr_mpw_uint(b, count);
	if (r >= 0)
		r = gr_mpw_cstr(b, "segments");
	if (r >= 0)
		r = gr_mpw_uint(b, nseg);
	if (r >= 0)
		r = gr_mpw_cstr(b, "values");
	if (r >= 0)
		r = gr_mpw_bin(b, records, bytes);
	return r;
}

int gr_msg_write_response_cumsum_header(gr_buf *b, uint32_t msgid, uint64_t count)
{
	int r;

	if (count > UINT32_MAX / 8)
		return -E2BIG;
	r = gr_msg_write_response_header(b, msgid);
	if (r >= 0)
		r = gr_mpw_map(b, 2);
	if (r >= 0)
		r = gr_mpw_cstr(b, "count");
	if (r >= 0)
		r = gr_mpw_uint(b, count);
	if (r >= 0)
		r = gr_mpw_cstr(b, "values");
	if (r >= 0)
		r = gr_mpw_bin_header(b, (uint32_t)(count * 8));
	return r;
}

int gr_msg_write_response_count(gr_buf *b, uint32_t msgid, uint64_t count)
{
	int r = gr_msg_write_response_header(b, msgid);

	if (r >= 0)
		r = gr_mpw_map(b, 1);
	if (r >= 0)
		r = gr_mpw_cstr(b, "count");
	if (r >= 0)
		r = gr_mpw_uint(b, count);
	return r;
}

int gr_msg_write_response_index(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t index,
				uint64_t count)
{
	int r = write_result_head(b, msgid, v, count, 3);

	if (r >= 0)
		r = gr_mpw_str(b, "index", 5);
	if (r >= 0)
		r = gr_mpw_uint(b, index);
	return r;
}

int gr_msg_write_response_exact(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t count,
				const uint64_t *limbs, size_t nlimbs, int scale, unsigned specials)
{
	int r = write_result_head(b, msgid, v, count, 3);

	if (r >= 0 && nlimbs > UINT32_MAX / 8)
		r = -EINVAL;
	if (r >= 0)
		r = gr_mpw_str(b, "exact", 5);
	if (r >= 0)
		r = gr_mpw_map(b, 3);
	if (r >= 0)
		r = gr_mpw_str(b, "limbs", 5);
	if (r >= 0)
		r = gr_mpw_bin_header(b, (uint32_t)(nlimbs * 8));
	for (size_t i = 0; r >= 0 && i < nlimbs; i++) {
		uint8_t w[8];
		for (unsigned k = 0; k < 8; k++)
			w[k] = (uint8_t)(limbs[i] >> (8 * k));
		r = gr_buf_append(b, w, sizeof(w));
	}
	if (r >= 0)
		r = gr_mpw_str(b, "scale", 5);
	if (r >= 0)
		r = gr_mpw_int(b, scale);
	if (r >= 0)
		r = gr_mpw_str(b, "specials", 8);
	if (r >= 0)
		r = gr_mpw_uint(b, specials);
	return r;
}

int gr_msg_write_error(gr_buf *b, uint32_t msgid, gr_err code, const char *message)
{
	const char *name = code == GR_OK ? NULL : gr_err_name(code);
	int r;

	if (!name)
		return -EINVAL;
	r = gr_mpw_array(b, 4);
	if (r >= 0)
		r = gr_mpw_uint(b, GR_MSG_RESPONSE);
	if (r >= 0)
		r = gr_mpw_uint(b, msgid);
	if (r >= 0)
		r = gr_mpw_map(b, 2);
	if (r >= 0)
		r = gr_mpw_cstr(b, "code");
	if (r >= 0)
		r = gr_mpw_cstr(b, name);
	if (r >= 0)
		r = gr_mpw_cstr(b, "message");
	if (r >= 0)
		r = gr_mpw_cstr(b, message ? message : name);
	if (r >= 0)
		r = gr_mpw_nil(b);
	return r;
}

int gr_msg_parse_response(const gr_obj *root, uint32_t *ret_msgid, gr_err *ret_code,
			  const char **ret_msg, uint32_t *ret_msglen, const gr_obj **ret_result)
{
	const gr_obj *it, *err, *code, *msg;
	gr_err c = GR_OK;

	if (!root || root->type != GR_MP_ARRAY || root->len != 4)
		return -EBADMSG;
	it = root->v.items;
	if (it[0].type != GR_MP_UINT || it[0].v.u != GR_MSG_RESPONSE)
		return -EBADMSG;
	if (it[1].type != GR_MP_UINT || it[1].v.u > UINT32_MAX)
		return -EBADMSG;
	err = &it[2];
	msg = NULL;
	if (err->type == GR_MP_NIL) {
		/* success: any result object */
	} else if (err->type == GR_MP_MAP) {
		code = gr_obj_get(err, "code");
		msg = gr_obj_get(err, "message");
		if (!code || code->type != GR_MP_STR)
			return -EBADMSG;
		if (msg && msg->type != GR_MP_STR)
			return -EBADMSG;
		if (!gr_err_parse(code->v.str, code->len, &c))
			c = GR_ERR_INTERNAL;
		if (it[3].type != GR_MP_NIL)
			return -EBADMSG;
	} else {
		return -EBADMSG;
	}

	if (ret_msgid)
		*ret_msgid = (uint32_t)it[1].v.u;
	if (ret_code)
		*ret_code = c;
	if (ret_msg)
		*ret_msg = msg ? msg->v.str : NULL;
	if (ret_msglen)
		*ret_msglen = msg ? msg->len : 0;
	if (ret_result)
		*ret_result = c == GR_OK ? &it[3] : NULL;
	return 0;
}

/* A result number of the given kind; false when it is not one. */
static bool parse_value(const gr_obj *v, gr_kind kind, gr_value *ret)
{
	gr_value out = { .kind = kind };

	if (!v)
		return false;
	switch (kind) {
	case GR_KIND_I64:
		if (v->type == GR_MP_INT)
			out.i = v->v.i;
		else if (v->type == GR_MP_UINT && v->v.u <= INT64_MAX)
			out.i = (int64_t)v->v.u;
		else
			return false;
		break;
	case GR_KIND_U64:
		if (v->type != GR_MP_UINT)
			return false;
		out.u = v->v.u;
		break;
	case GR_KIND_F64:
		if (v->type != GR_MP_FLOAT)
			return false;
		out.f = v->v.f;
		break;
	default:
		return false;
	}
	*ret = out;
	return true;
}

int gr_msg_parse_reduce_result(const gr_obj *result, gr_kind kind, gr_value *ret_value,
			       uint64_t *ret_count)
{
	const gr_obj *n = gr_obj_get(result, "count");
	gr_value out;

	if (!n || n->type != GR_MP_UINT || !parse_value(gr_obj_get(result, "value"), kind, &out))
		return -EBADMSG;
	if (ret_value)
		*ret_value = out;
	if (ret_count)
		*ret_count = n->v.u;
	return 0;
}

int gr_msg_parse_moments_result(const gr_obj *result, gr_kind kind, gr_moments *ret)
{
	const gr_obj *n = gr_obj_get(result, "count");
	gr_value mean, var;
	gr_moments m;

	if (!n || n->type != GR_MP_UINT || !parse_value(gr_obj_get(result, "sum"), kind, &m.sum) ||
	    !parse_value(gr_obj_get(result, "min"), kind, &m.min) ||
	    !parse_value(gr_obj_get(result, "max"), kind, &m.max) ||
	    !parse_value(gr_obj_get(result, "mean"), GR_KIND_F64, &mean) ||
	    !parse_value(gr_obj_get(result, "var"), GR_KIND_F64, &var))
		return -EBADMSG;
	m.count = n->v.u;
	m.mean = mean.f;
	m.var = var.f;
	*ret = m;
	return 0;
}

int gr_msg_parse_reduce_index(const gr_obj *result, uint64_t *ret_index)
{
	const gr_obj *i = gr_obj_get(result, "index");

	if (!i || i->type != GR_MP_UINT)
		return -EBADMSG;
	*ret_index = i->v.u;
	return 0;
}
