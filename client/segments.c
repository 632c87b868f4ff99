/*
 * Segmented reduces (PROTOCOL.md, "Segments"), by data or by region: the
 * request names op, dtype, ddof and the offsets before the data, as the
 * daemon needs to reduce segments chunk by chunk as they arrive, and sends
 * the offsets and the data from the caller's memory. The reply's records
 * are checked and copied as it arrives (segments_kind), and handed over
 * by gpured_wait_id_segments().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/conn.h"
#include "proto/message.h"
#include "proto/mp.h"

_Static_assert(sizeof(gpured_number) == 8, "record layout");
_Static_assert(sizeof(gpured_arg_record) == 16, "record layout");
_Static_assert(sizeof(gpured_moments_record) == 40, "record layout");

/* A reply's bytes besides its records: the response's array, msgid and
 * map with its keys, count and segments; generously. */
#define REPLY_HEAD_BYTES 256

/* The most segments whose offsets fit in one bin. */
#define MAX_NSEG ((size_t)(UINT32_MAX / 8) - 1)

size_t gpured_segment_record_bytes(gpured_op op)
{
	switch (op) {
	case GPURED_OP_SUM:
	case GPURED_OP_MIN:
	case GPURED_OP_MAX:
	case GPURED_OP_SUMSQ:
		return 8;
	case GPURED_OP_ARGMIN:
	case GPURED_OP_ARGMAX:
		return 16;
	case GPURED_OP_MOMENTS:
		return 40;
	}
	return 0;
}

/* What the library can tell about a request before it sends anything. */
static int check_request(gpured_t *g, gpured_op op, gpured_dtype dt, size_t n,
			 const uint64_t *offsets, size_t nseg, uint64_t ddof)
{
	if (g->dead)
		return client_dead(g);
	if ((unsigned)op >= GR_OP_N || (unsigned)dt >= GR_DT_N)
		return client_error(g, -EINVAL, "unknown op or dtype");
	if (nseg == 0 || !offsets)
		return client_error(g, -EINVAL, "segments need nseg >= 1 and nseg + 1 offsets");
	if (nseg > MAX_NSEG)
		return client_error(g, -E2BIG,
				    "the offsets of %zu segments do not fit in one request", nseg);
	if (offsets[0] != 0)
		return client_error(g, -EINVAL, "offsets[0] is %llu: the first offset must be 0",
				    (unsigned long long)offsets[0]);
	if (offsets[nseg] != n)
		return client_error(g, -EINVAL,
				    "offsets[%zu] is %llu: the last offset must be the %zu "
				    "elements to reduce",
				    nseg, (unsigned long long)offsets[nseg], n);
	if (ddof != 0 && op != GPURED_OP_MOMENTS)
		return client_error(g, -EINVAL, "ddof is for moments only, not %s",
				    gpured_op_name(op));
	return 0;
}

/* records_bytes against the nseg records of op (before sending). */
static int check_room(gpured_t *g, gpured_op op, size_t nseg, const void *records,
		      size_t records_bytes)
{
	size_t rb = gpured_segment_record_bytes(op);

	if (g->dead)
		return client_dead(g);
	/* an unknown op or too many segments: the request says so */
	if (!records || rb == 0 || nseg > MAX_NSEG)
		return 0;
	if (records_bytes / rb < nseg)
		return client_error(g, -EINVAL, "%zu records of %s take %zu bytes, not %zu", nseg,
				    gpured_op_name(op), nseg * rb, records_bytes);
	return 0;
}

/* Read the records of e's result into e->u.values and check them
 * against the request: 0, -ENOMEM, or -EPROTO with why. */
static int segments_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len,
			 char *why, size_t size)
{
	const gr_obj *count = gr_obj_get(result, "count"), *k = gr_obj_get(result, "segments");
	const gr_obj *values = gr_obj_get(result, "values");
	size_t rb = gpured_segment_record_bytes((gpured_op)e->op);
	uint64_t nseg = e->u.nseg;

	if (!count || count->type != GR_MP_UINT || !k || k->type != GR_MP_UINT || !values ||
	    values->type != GR_MP_BIN) {
		snprintf(why, size, "malformed segments result");
		return -EPROTO;
	}
	(void)msg;
	(void)len;
	if (count->v.u != e->value.count || k->v.u != nseg) {
		snprintf(why, size,
			 "segments result of %llu elements in %llu segments, for %llu in %llu",
			 (unsigned long long)count->v.u, (unsigned long long)k->v.u,
			 (unsigned long long)e->value.count, (unsigned long long)nseg);
		return -EPROTO;
	}
	if (values->len != nseg * rb) {
		snprintf(why, size, "segments result of %u bytes, not %llu records of %zu bytes",
			 values->len, (unsigned long long)nseg, rb);
		return -EPROTO;
	}
	e->u.values = malloc(values->len);
	if (!e->u.values) {
		snprintf(why, size, "out of memory");
		return -ENOMEM;
	}
	memcpy(e->u.values, values->v.str, values->len);
	e->value.kind = (gpured_kind)gr_result_kind(e->op, e->dtype);
	return 0;
}

static const client_kind segments_kind = {
	.read = segments_read,
	.clear = client_pending_free_values,
};

/*
 * Write and send a segmented reduce: op, dtype, ddof (moments) and the
 * offsets' bin header in g->wbuf, the offsets from the caller's memory,
 * then either "data" and the elements (region NULL) or the region's keys.
 */
static int submit(gpured_t *g, const uint64_t *region, gpured_op op, gpured_dtype dt,
		  const void *data, size_t offset, size_t n, const uint64_t *offsets, size_t nseg,
		  uint64_t ddof, uint32_t *ret_id)
{
	const bool moments = op == GPURED_OP_MOMENTS;
	struct iovec iov[4];
	size_t esz, obytes, head;
	pending *e;
	uint32_t id;
	int r;

	r = check_request(g, op, dt, n, offsets, nseg, ddof);
	if (r < 0)
		return r;
	esz = gr_dtype_size((gr_dtype)dt);
	obytes = 8 * (nseg + 1);
	if (!region && !data && n > 0)
		return client_error(g, -EINVAL, "no data");
	if (!region && n > UINT32_MAX / esz)
		return client_error(g, -E2BIG,
				    "%zu elements of %s do not fit in one request (4 GiB - 1)", n,
				    gr_dtype_name((gr_dtype)dt));
	r = client_pending_add(g, GR_METHOD_REDUCE, (gr_op)op, (gr_dtype)dt, &segments_kind, &e);
	if (r < 0)
		return r;
	id = e->id;
	e->u.nseg = nseg;
	e->value.count = n; /* what the reply must say */

	g->wbuf.len = 0;
	if ((r = gr_msg_write_request_header(&g->wbuf, id, GR_METHOD_REDUCE, 1)) < 0 ||
	    (r = gr_mpw_map(&g->wbuf, (region ? 6 : 4) + moments)) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, "op")) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, gr_op_name((gr_op)op))) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, "dtype")) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, gr_dtype_name((gr_dtype)dt))) < 0 ||
	    (moments && (r = gr_mpw_kv_uint(&g->wbuf, "ddof", ddof)) < 0) ||
	    (r = gr_mpw_cstr(&g->wbuf, "offsets")) < 0 ||
	    (r = gr_mpw_bin_header(&g->wbuf, (uint32_t)obytes)) < 0)
		goto fail;
	head = g->wbuf.len;
	if (region) {
		if ((r = gr_mpw_kv_uint(&g->wbuf, "region", *region)) < 0 ||
		    (r = gr_mpw_kv_uint(&g->wbuf, "offset", offset)) < 0 ||
		    (r = gr_mpw_kv_uint(&g->wbuf, "count", n)) < 0)
			goto fail;
	} else if ((r = gr_mpw_cstr(&g->wbuf, "data")) < 0 ||
		   (r = gr_mpw_bin_header(&g->wbuf, (uint32_t)(n * esz))) < 0) {
		goto fail;
	}
	/* The records and the map around them must not be taken for a
	 * hostile server's. */
	client_expect_reply(g, nseg * gpured_segment_record_bytes(op) + REPLY_HEAD_BYTES);

	iov[0] = (struct iovec){ .iov_base = g->wbuf.data, .iov_len = head };
	iov[1] = (struct iovec){ .iov_base = (void *)offsets, .iov_len = obytes };
	iov[2] = (struct iovec){ .iov_base = g->wbuf.data + head, .iov_len = g->wbuf.len - head };
	iov[3] = (struct iovec){ .iov_base = (void *)data, .iov_len = n * esz };
	r = client_send(g, iov, !region && n > 0 ? 4 : 3, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;

fail:
	return client_pending_unwritten(g, e, r);
}

int gpured_wait_id_segments(gpured_t *g, uint32_t id, void *records, size_t records_bytes)
{
	pending *e = client_pending_find(g, id);
	size_t need;
	int r;

	if (!e)
		return client_error(g, -ESRCH, "request %u is not outstanding", id);
	if (e->kind != &segments_kind)
		return client_error(g, -EINVAL, "request %u is not a segmented reduce", id);
	need = (size_t)e->u.nseg * gpured_segment_record_bytes((gpured_op)e->op);
	if (records && records_bytes < need)
		return client_error(g, -EINVAL, "request %u's %llu records take %zu bytes, not %zu",
				    id, (unsigned long long)e->u.nseg, need, records_bytes);
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	if (e->err == 0 && records)
		memcpy(records, e->u.values, need);
	return client_collect(g, e, NULL);
}

int gpured_submit_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			   const uint64_t *offsets, size_t nseg, uint64_t ddof, uint32_t *ret_id)
{
	return submit(g, NULL, op, dt, data, 0, n, offsets, nseg, ddof, ret_id);
}

int gpured_submit_region_segments(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				  size_t offset, size_t n, const uint64_t *offsets, size_t nseg,
				  uint64_t ddof, uint32_t *ret_id)
{
	return submit(g, &region, op, dt, NULL, offset, n, offsets, nseg, ddof, ret_id);
}

int gpured_region_submit_segments(gpured_t *g, const gpured_region_t *r, gpured_op op,
				  gpured_dtype dt, size_t offset, size_t n, const uint64_t *offsets,
				  size_t nseg, uint64_t ddof, uint32_t *ret_id)
{
	return gpured_submit_region_segments(g, gpured_region_id(r), op, dt, offset, n, offsets,
					     nseg, ddof, ret_id);
}

int gpured_reduce_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			   const uint64_t *offsets, size_t nseg, uint64_t ddof, void *records,
			   size_t records_bytes)
{
	uint32_t id;
	int r = check_room(g, op, nseg, records, records_bytes);

	if (r == 0)
		r = gpured_submit_segments(g, op, dt, data, n, offsets, nseg, ddof, &id);
	return r < 0 ? r : gpured_wait_id_segments(g, id, records, records_bytes);
}

int gpured_reduce_region_segments(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				  size_t offset, size_t n, const uint64_t *offsets, size_t nseg,
				  uint64_t ddof, void *records, size_t records_bytes)
{
	uint32_t id;
	int r = check_room(g, op, nseg, records, records_bytes);

	if (r == 0)
		r = gpured_submit_region_segments(g, region, op, dt, offset, n, offsets, nseg, ddof,
						  &id);
	return r < 0 ? r : gpured_wait_id_segments(g, id, records, records_bytes);
}

int gpured_region_reduce_segments(gpured_t *g, const gpured_region_t *r, gpured_op op,
				  gpured_dtype dt, size_t offset, size_t n, const uint64_t *offsets,
				  size_t nseg, uint64_t ddof, void *records, size_t records_bytes)
{
	return gpured_reduce_region_segments(g, gpured_region_id(r), op, dt, offset, n, offsets,
					     nseg, ddof, records, records_bytes);
}
