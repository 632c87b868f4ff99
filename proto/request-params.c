/*
 * The values of a params map (reduce, map, unmap), key by key, and what
 * the keys must add up to when the map ends: the request parser's rules
 * for params (request-internal.h). The short words among the values (op,
 * dtype, kind, device, handle) are kept and matched in request.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "request-internal.h"

static void req_map_end_map(gr_req_parser *p)
{
	const gr_req *r = &p->req;

	if (!r->has_bytes)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'bytes'");
	else if (r->bytes == 0)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'bytes' must be at least 1");
	else if (r->kind == GR_MAP_HOST && (r->has_device || r->has_handle))
		req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' is only for kind cuda or cuda_ipc",
			 r->has_device ? "device" : "handle");
	else if (r->kind != GR_MAP_HOST && !r->has_device)
		req_fail(p, GR_ERR_INVALID_PARAMS, "kind %s needs 'device' (a GPU's UUID or PCI bus id)",
			 gr_map_kind_name(r->kind));
	else if (r->kind == GR_MAP_CUDA_IPC && !r->has_handle)
		req_fail(p, GR_ERR_INVALID_PARAMS, "kind cuda_ipc needs 'handle' (%u bytes)",
			 GR_REQ_HANDLE_BYTES);
	else if (r->kind == GR_MAP_CUDA && r->has_handle)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "kind cuda takes its handle as a file descriptor, not 'handle'");
	else if (r->has_part_bytes && r->kind != GR_MAP_CUDA)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'part_bytes' is only for kind cuda (a range over several allocations)");
	else if (r->has_part_bytes && (r->part_bytes == 0 || r->part_bytes > r->bytes))
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'part_bytes' (%" PRIu64 ") must be at least 1 and at most 'bytes' (%" PRIu64 ")",
			 r->part_bytes, r->bytes);
}

/* A cumsum's values go out as one bin: 8 bytes each, below 4 GiB. */
#define REQ_SCAN_MAX_COUNT (UINT32_MAX / 8)

/*
 * What cumsum rules out among the keys seen so far, checked as each of
 * them comes: a cumsum of data larger than a chunk may start its reply
 * before its map ends, so it meets these errors before then.
 */
void req_check_scan(gr_req_parser *p)
{
	const gr_req *r = &p->req;

	if (!r->has_op)
		return;
	if (!r->scan) {
		if (r->has_out_region || r->has_out_offset)
			req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' is only for op cumsum, not %s",
				 r->has_out_region ? "out_region" : "out_offset", gr_op_name(r->op));
		return;
	}
	if (r->partial)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'partial' is not available with op cumsum");
	else if (r->has_ddof)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'ddof' is only for op moments, not cumsum");
	else if (r->has_offsets)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'offsets' is not available with op cumsum");
	else if (r->has_data && (r->has_out_region || r->has_out_offset))
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'%s' is for the cumsum of a region; the cumsum of 'data' answers 'values'",
			 r->has_out_region ? "out_region" : "out_offset");
	else if (r->has_data && r->has_dtype &&
		 r->data_bytes / gr_dtype_size(r->dtype) > REQ_SCAN_MAX_COUNT)
		req_fail(p, GR_ERR_TOO_LARGE,
			 "the prefix sums of %" PRIu64 " elements would pass a bin's 4 GiB (at most "
			 "%u elements)",
			 r->data_bytes / gr_dtype_size(r->dtype), REQ_SCAN_MAX_COUNT);
}

/* What a cumsum needs once the map is whole (its other rules came with
 * its keys: req_check_scan). */
static void req_check_scan_end(gr_req_parser *p)
{
	const gr_req *r = &p->req;

	if (!r->scan)
		return;
	if (r->has_region && !r->has_out_region)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "the cumsum of a region writes its prefix sums to a writable region: "
			 "missing key 'out_region'");
}

/*
 * moments' ddof: on moments only, and below the element count. With no
 * elements at all moments fails with empty when it is answered, whatever
 * the ddof.
 */
static void req_check_ddof(gr_req_parser *p, uint64_t count)
{
	const gr_req *r = &p->req;

	if (!r->has_ddof)
		return;
	if (r->op != GR_OP_MOMENTS)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'ddof' is only for op moments, not %s",
			 gr_op_name(r->op));
	else if (count > 0 && r->ddof >= count)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'ddof' is %" PRIu64 ", not less than the %" PRIu64 " elements", r->ddof,
			 count);
}

/* What a reduce's segments rule out, once the map is whole. */
static void req_check_offsets(gr_req_parser *p, uint64_t count)
{
	const gr_req *r = &p->req;

	if (!r->has_offsets)
		return;
	if (r->partial)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'partial' is not available with 'offsets'");
	else if (r->offsets_end != count)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'offsets' ends at %" PRIu64 ", not at the %" PRIu64 " elements to reduce",
			 r->offsets_end, count);
}

void req_map_end(gr_req_parser *p)
{
	const gr_req *r = &p->req;

	if (r->method == GR_METHOD_MAP) {
		req_map_end_map(p);
		return;
	}
	if (r->method == GR_METHOD_UNMAP || r->method == GR_METHOD_MAP_PART) {
		if (!r->has_region)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'region'");
		else if (r->method == GR_METHOD_MAP_PART && !r->has_bytes)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'bytes'");
		else if (r->method == GR_METHOD_MAP_PART && r->bytes == 0)
			req_fail(p, GR_ERR_INVALID_PARAMS, "'bytes' must be at least 1");
		return;
	}
	if (r->has_region || r->has_offset || r->has_count) {
		if (!r->has_op)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'op'");
		else if (!r->has_dtype)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'dtype'");
		else if (r->has_data)
			req_fail(p, GR_ERR_INVALID_PARAMS, "'data' and 'region' exclude each other");
		else if (!r->has_region)
			req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' needs 'region'",
				 r->has_offset ? "offset" : "count");
		else if (!r->has_count)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'count' (elements to reduce)");
		else
			req_check_ddof(p, r->count);
		req_check_offsets(p, r->count);
		req_check_scan_end(p);
		return;
	}
	if (!r->has_op)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'op'");
	else if (!r->has_dtype)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'dtype'");
	else if (!r->has_data)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'data'");
	else if (!r->data_is_array && r->data_bytes % gr_dtype_size(r->dtype) != 0)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'data' is %" PRIu64 " bytes, not a multiple of the %s element size (%zu bytes)",
			 r->data_bytes, gr_dtype_name(r->dtype), gr_dtype_size(r->dtype));
	else
		req_check_ddof(p, r->data_bytes / gr_dtype_size(r->dtype));
	if (r->has_data && r->has_dtype && !p->skipping)
		req_check_offsets(p, r->data_bytes / gr_dtype_size(r->dtype));
	/* a dtype after the data: its count is known only now */
	req_check_scan(p);
}

/*
 * Data after offsets: the segments must cover exactly its elements, and
 * their jobs need op and dtype from the first chunk on. True when fine.
 */
static bool req_data_fits_offsets(gr_req_parser *p, const gr_mp_token *t)
{
	gr_req *r = &p->req;

	if (!r->has_offsets)
		return true;
	if (!r->has_op || !r->has_dtype) {
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'op' and 'dtype' must come before 'data' in a request with 'offsets'");
		return false;
	}
	size_t sz = gr_dtype_size(r->dtype);
	uint64_t count = t->type == GR_MP_BIN ? t->len / sz : t->len;
	if (t->type == GR_MP_BIN && t->len % sz != 0)
		return true; /* refused below */
	if (r->offsets_end != count) {
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'offsets' ends at %" PRIu64 ", not at the %" PRIu64 " elements of 'data'",
			 r->offsets_end, count);
		return false;
	}
	return true;
}

static void req_on_data(gr_req_parser *p, const gr_mp_token *t)
{
	gr_req *r = &p->req;
	size_t sz = gr_dtype_size(r->dtype);

	r->has_data = true;
	if ((t->type == GR_MP_BIN || t->type == GR_MP_ARRAY) && !req_data_fits_offsets(p, t)) {
		req_skip_value(p, t);
		return;
	}
	if (r->scan && (t->type == GR_MP_BIN || t->type == GR_MP_ARRAY)) {
		/* the element count, as the payload below will set it */
		r->data_bytes = t->type == GR_MP_BIN ? t->len
			      : r->has_dtype ? (uint64_t)t->len * sz : 0;
		req_check_scan(p);
		if (p->skipping) {
			req_skip_value(p, t);
			return;
		}
	}
	if (t->type == GR_MP_BIN) {
		r->data_bytes = t->len;
		if (r->has_dtype && t->len % sz != 0) {
			req_fail(p, GR_ERR_INVALID_PARAMS,
				 "'data' is %" PRIu32 " bytes, not a multiple of the %s element size (%zu bytes)",
				 t->len, gr_dtype_name(r->dtype), sz);
		} else if (t->len > p->lim.max_data_bytes) {
			req_fail(p, GR_ERR_TOO_LARGE, "'data' is %" PRIu32 " bytes, over the limit of %" PRIu64,
				 t->len, p->lim.max_data_bytes);
		} else {
			p->ev = GR_REQ_DATA;
			req_body(p, ST_PAYLOAD, t->len);
			return;
		}
		req_body(p, ST_SKIP, t->len);
		return;
	}
	if (t->type == GR_MP_ARRAY) {
		r->data_is_array = true;
		if (!r->has_dtype) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'dtype' must come before an array 'data'");
		} else {
			r->data_bytes = (uint64_t)t->len * sz;
			if (r->data_bytes > p->lim.max_data_bytes) {
				req_fail(p, GR_ERR_TOO_LARGE,
					 "'data' is %" PRIu32 " elements (%" PRIu64 " bytes), over the limit of %" PRIu64 " bytes",
					 t->len, r->data_bytes, p->lim.max_data_bytes);
			} else {
				p->ev = GR_REQ_DATA;
				req_push(p, ROLE_DATA, t->len);
				return;
			}
		}
		req_push(p, ROLE_SKIP, t->len);
		return;
	}
	req_fail(p, GR_ERR_INVALID_PARAMS, "'data' must be a bin of packed elements or an array of numbers");
	req_skip_value(p, t);
}

static void req_on_offsets(gr_req_parser *p, const gr_mp_token *t)
{
	const gr_req *r = &p->req;
	uint64_t max = p->lim.max_segments;

	if (t->type != GR_MP_BIN) {
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'offsets' must be a bin of little-endian u64 element offsets");
		req_skip_value(p, t);
		return;
	}
	if (r->has_data) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "'offsets' must come before 'data'");
	} else if (t->len % 8 != 0 || t->len < 16) {
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'offsets' is %" PRIu32 " bytes: it must be 8 bytes for each of k + 1 "
			 "offsets, k >= 1 segments",
			 t->len);
	} else if (t->len / 8 - 1 > max) {
		req_fail(p, GR_ERR_TOO_LARGE,
			 "'offsets' has %" PRIu32 " segments, over the limit of %" PRIu64,
			 t->len / 8 - 1, max);
	} else if (gr_offsets_begin(&p->offs, t->len) < 0) {
		req_fail(p, GR_ERR_INTERNAL, "out of memory for 'offsets'");
	} else {
		req_body(p, ST_OFFSETS, t->len);
		return;
	}
	req_body(p, ST_SKIP, t->len);
}

/* ST_OFFSETS ended: the bin is whole. */
void req_offsets_done(gr_req_parser *p)
{
	gr_req *r = &p->req;
	char why[sizeof(r->errmsg)];

	if (gr_offsets_finish(&p->offs, why, sizeof(why))) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "%s", why);
	} else {
		r->has_offsets = true;
		r->nsegments = gr_offsets_segments(&p->offs);
		r->offsets_end = gr_offsets_last(&p->offs);
		r->offsets = p->offs.v;
		req_check_scan(p);
	}
	req_value_done(p);
}

/* An unsigned integer value (region, offset, count, bytes). */
static void req_on_uint(gr_req_parser *p, const gr_mp_token *t)
{
	gr_req *r = &p->req;

	if (t->type != GR_MP_UINT) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' must be an unsigned integer",
			 params_key_name(p->key));
		req_skip_value(p, t);
		return;
	}
	switch (p->key) {
	case KEY_REGION:
		r->region = t->u.u;
		r->has_region = true;
		break;
	case KEY_OFFSET:
		r->offset = t->u.u;
		r->has_offset = true;
		break;
	case KEY_COUNT:
		r->count = t->u.u;
		r->has_count = true;
		break;
	case KEY_DDOF:
		r->ddof = t->u.u;
		r->has_ddof = true;
		/* a segment's variance is written as its chunk is reduced */
		if (r->has_offsets && r->has_data) {
			req_fail(p, GR_ERR_INVALID_PARAMS,
				 "'ddof' must come before 'data' in a request with 'offsets'");
		}
		req_check_scan(p);
		break;
	case KEY_OUT_REGION:
		r->out_region = t->u.u;
		r->has_out_region = true;
		req_check_scan(p);
		break;
	case KEY_OUT_OFFSET:
		r->out_offset = t->u.u;
		r->has_out_offset = true;
		if (t->u.u % 8 != 0)
			req_fail(p, GR_ERR_INVALID_PARAMS,
				 "'out_offset' must be a multiple of 8 (the prefix sums are 8 bytes each), "
				 "not %" PRIu64,
				 t->u.u);
		req_check_scan(p);
		break;
	case KEY_PART_BYTES:
		r->part_bytes = t->u.u;
		r->has_part_bytes = true;
		break;
	default:
		r->bytes = t->u.u;
		r->has_bytes = true;
		break;
	}
	req_value_done(p);
}

void req_on_value(gr_req_parser *p, const gr_mp_token *t)
{
	switch (p->key) {
	case KEY_DATA:
		req_on_data(p, t);
		return;
	case KEY_OFFSETS:
		req_on_offsets(p, t);
		return;
	case KEY_REGION:
	case KEY_OFFSET:
	case KEY_COUNT:
	case KEY_BYTES:
	case KEY_DDOF:
	case KEY_OUT_REGION:
	case KEY_OUT_OFFSET:
	case KEY_PART_BYTES:
		req_on_uint(p, t);
		return;
	case KEY_PARTIAL:
	case KEY_WRITABLE:
		if (t->type != GR_MP_BOOL) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' must be true or false",
				 params_key_name(p->key));
			req_skip_value(p, t);
		} else if (p->key == KEY_WRITABLE) {
			p->req.writable = t->u.b;
			req_value_done(p);
		} else {
			p->req.partial = t->u.b;
			req_check_scan(p);
			req_value_done(p);
		}
		return;
	case KEY_HANDLE:
		if (t->type != GR_MP_BIN || t->len != GR_REQ_HANDLE_BYTES) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'handle' must be a bin of %u bytes",
				 GR_REQ_HANDLE_BYTES);
			req_skip_value(p, t);
		} else {
			req_keep(p, SLOT_VALUE, t->len);
		}
		return;
	case KEY_DEVICE:
		if (t->type != GR_MP_STR) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'device' must be a string");
			req_skip_value(p, t);
		} else if (t->len > GR_REQ_DEVICE_MAX) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'device' is longer than %u bytes",
				 GR_REQ_DEVICE_MAX);
			req_body(p, ST_SKIP, t->len);
		} else {
			req_keep(p, SLOT_VALUE, t->len);
		}
		return;
	default: /* op, dtype, kind: short words */
		if (t->type != GR_MP_STR) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' must be a string", params_key_name(p->key));
			req_skip_value(p, t);
		} else if (t->len > REQ_WORD_MAX) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "unknown %s (a string of %" PRIu32 " bytes)",
				 params_key_name(p->key), t->len);
			req_body(p, ST_SKIP, t->len);
		} else {
			req_keep(p, SLOT_VALUE, t->len);
		}
		return;
	}
}
