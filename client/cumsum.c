/*
 * Prefix sums (PROTOCOL.md, "cumsum"). Of socket data, the values come
 * back as one reply that the daemon streams while the elements are still
 * going out, which client_send() allows for by reading as it writes; the
 * reply's values are checked as it arrives and copied into the caller's
 * array (gpured_cumsum()) or kept until collected
 * (gpured_wait_id_cumsum()). Of a region, the daemon writes them into a
 * writable region and answers only their count.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/conn.h"
#include "proto/message.h"
#include "proto/mp.h"

_Static_assert(GPURED_CUMSUM_MAX == UINT32_MAX / 8, "values of one bin");

/* A reply's bytes besides its values: the response's array, msgid and map
 * with its keys, count and the bin's header; generously. */
#define REPLY_HEAD_BYTES 64

/* The count of a cumsum result against the request's. */
static int check_count(const pending *e, const gr_obj *result, char *why, size_t size)
{
	const gr_obj *count = gr_obj_get(result, "count");

	if (!count || count->type != GR_MP_UINT) {
		snprintf(why, size, "malformed cumsum result");
		return -EPROTO;
	}
	if (count->v.u != e->value.count) {
		snprintf(why, size, "cumsum result of %llu elements, for %llu",
			 (unsigned long long)count->v.u, (unsigned long long)e->value.count);
		return -EPROTO;
	}
	return 0;
}

/* Socket data: the values, into e->u.out or e->u.values. */
static int data_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len, char *why,
		     size_t size)
{
	const gr_obj *values = gr_obj_get(result, "values");
	int r = check_count(e, result, why, size);

	if (r < 0)
		return r;
	if (!values || values->type != GR_MP_BIN || values->len != e->value.count * 8) {
		snprintf(why, size, "cumsum result without the %llu values of 8 bytes it counts",
			 (unsigned long long)e->value.count);
		return -EPROTO;
	}
	if (e->u.out) {
		memcpy(e->u.out, values->v.str, values->len);
	} else {
		e->u.values = malloc(values->len ? values->len : 1);
		if (!e->u.values) {
			snprintf(why, size, "out of memory");
			return -ENOMEM;
		}
		memcpy(e->u.values, values->v.str, values->len);
	}
	return 0;
}

static const client_kind data_kind = {
	.read = data_read,
	.clear = client_pending_free_values,
};

/* A region: the values are in the out region; only their count comes. */
static int region_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len,
		       char *why, size_t size)
{
	(void)msg;
	(void)len;
	return check_count(e, result, why, size);
}

static const client_kind region_kind = {
	.read = region_read,
};

/* A new entry of kind for a cumsum of n elements of dt. */
static int add_entry(gpured_t *g, gpured_dtype dt, size_t n, const client_kind *kind,
		     pending **ret)
{
	int r;

	if (g->dead)
		return client_dead(g);
	if ((unsigned)dt >= GR_DT_N)
		return client_error(g, -EINVAL, "unknown dtype");
	r = client_pending_add(g, GR_METHOD_REDUCE, GR_OP_SUM, (gr_dtype)dt, kind, ret);
	if (r < 0)
		return r;
	(*ret)->value.kind = (gpured_kind)gr_result_kind(GR_OP_SUM, (gr_dtype)dt);
	(*ret)->value.count = n; /* what the reply must say */
	g->wbuf.len = 0;
	r = gr_msg_write_request_header(&g->wbuf, (*ret)->id, GR_METHOD_REDUCE, 1);
	if (r < 0)
		return client_pending_unwritten(g, *ret, r);
	return 0;
}

/* A cumsum of data, its values written to out as they arrive when out is
 * not NULL (the caller collects the entry before out goes). */
static int submit_data(gpured_t *g, gpured_dtype dt, const void *data, size_t n, void *out,
		       uint32_t *ret_id)
{
	size_t esz;
	pending *e;
	uint32_t id;
	int r;

	if (!g->dead && !data && n > 0)
		return client_error(g, -EINVAL, "no data");
	if (!g->dead && n > GPURED_CUMSUM_MAX)
		return client_error(g, -E2BIG,
				    "the prefix sums of %zu elements do not fit in one reply (at "
				    "most %zu elements; a region takes any number)",
				    n, GPURED_CUMSUM_MAX);
	r = add_entry(g, dt, n, &data_kind, &e);
	if (r < 0)
		return r;
	esz = gr_dtype_size((gr_dtype)dt);
	if ((r = gr_mpw_map(&g->wbuf, 3)) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, "op")) >= 0 && (r = gr_mpw_cstr(&g->wbuf, "cumsum")) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, "dtype")) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, gr_dtype_name((gr_dtype)dt))) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, "data")) >= 0)
		r = gr_mpw_bin_header(&g->wbuf, (uint32_t)(n * esz));
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	id = e->id;
	e->u.out = out;
	/* The values and the map around them must not be taken for a hostile
	 * server's. */
	client_expect_reply(g, n * 8 + REPLY_HEAD_BYTES);
	r = client_send_request(g, data, n * esz, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;
}

int gpured_submit_cumsum(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			 uint32_t *ret_id)
{
	return submit_data(g, dt, data, n, NULL, ret_id);
}

int gpured_cumsum(gpured_t *g, gpured_dtype dt, const void *data, size_t n, void *out)
{
	uint32_t id = 0; /* set on success; -O2 cannot tell */
	pending *e;
	int r;

	if (!g->dead && !out && n > 0)
		return client_error(g, -EINVAL, "no room for the prefix sums");
	r = submit_data(g, dt, data, n, out, &id);
	if (r < 0)
		return r;
	/* On a failure here the connection is dead: no reply writes to out
	 * once this returns. */
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	return client_collect(g, e, NULL);
}

int gpured_wait_id_cumsum(gpured_t *g, uint32_t id, void *out, size_t out_n)
{
	pending *e = client_pending_find(g, id);
	int r;

	if (!e)
		return client_error(g, -ESRCH, "request %u is not outstanding", id);
	if (e->kind != &data_kind)
		return client_error(g, -EINVAL, "request %u is not a cumsum of data", id);
	if (out && out_n < e->value.count)
		return client_error(g, -EINVAL, "request %u's %llu prefix sums do not fit in %zu",
				    id, (unsigned long long)e->value.count, out_n);
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	if (e->err == 0 && out && e->u.values)
		memcpy(out, e->u.values, (size_t)e->value.count * 8);
	return client_collect(g, e, NULL);
}

int gpured_submit_cumsum_region(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				size_t n, uint64_t out_region, size_t out_offset, uint32_t *ret_id)
{
	pending *e;
	uint32_t id;
	int r = add_entry(g, dt, n, &region_kind, &e);

	if (r < 0)
		return r;
	if ((r = gr_mpw_map(&g->wbuf, 7)) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, "op")) >= 0 && (r = gr_mpw_cstr(&g->wbuf, "cumsum")) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, "dtype")) >= 0 &&
	    (r = gr_mpw_cstr(&g->wbuf, gr_dtype_name((gr_dtype)dt))) >= 0 &&
	    (r = gr_mpw_kv_uint(&g->wbuf, "region", region)) >= 0 &&
	    (r = gr_mpw_kv_uint(&g->wbuf, "offset", offset)) >= 0 &&
	    (r = gr_mpw_kv_uint(&g->wbuf, "count", n)) >= 0 &&
	    (r = gr_mpw_kv_uint(&g->wbuf, "out_region", out_region)) >= 0)
		r = gr_mpw_kv_uint(&g->wbuf, "out_offset", out_offset);
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	id = e->id;
	r = client_send_request(g, NULL, 0, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;
}

int gpured_cumsum_region(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset, size_t n,
			 uint64_t out_region, size_t out_offset)
{
	uint32_t id;
	int r = gpured_submit_cumsum_region(g, region, dt, offset, n, out_region, out_offset, &id);

	return r < 0 ? r : gpured_wait_id(g, id, NULL);
}

int gpured_region_submit_cumsum(gpured_t *g, const gpured_region_t *r, gpured_dtype dt,
				size_t offset, size_t n, const gpured_region_t *out,
				size_t out_offset, uint32_t *ret_id)
{
	if (g->dead)
		return client_dead(g);
	if (!gpured_region_writable(out))
		return client_error(g, -EINVAL,
				    "region %llu is read-only: the prefix sums go into a region "
				    "made with GPURED_REGION_WRITABLE",
				    (unsigned long long)gpured_region_id(out));
	return gpured_submit_cumsum_region(g, gpured_region_id(r), dt, offset, n,
					   gpured_region_id(out), out_offset, ret_id);
}

int gpured_region_cumsum(gpured_t *g, const gpured_region_t *r, gpured_dtype dt, size_t offset,
			 size_t n, const gpured_region_t *out, size_t out_offset)
{
	uint32_t id;
	int err = gpured_region_submit_cumsum(g, r, dt, offset, n, out, out_offset, &id);

	return err < 0 ? err : gpured_wait_id(g, id, NULL);
}
