/*
 * moments requests, by data or by region, and their collection: the reply
 * is read whole as it arrives (gpured.c), and handed over here.
 */
#include <errno.h>

#include "client/gpured-private.h"

static gpured_value value_of(const gr_value *v, uint64_t count)
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

int gpured_submit_moments(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			  uint64_t ddof, uint32_t *ret_id)
{
	return client_submit_data(g, GPURED_OP_MOMENTS, dt, data, n, /* partial= */ false, ddof,
				  ret_id);
}

int gpured_submit_region_moments(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				 size_t n, uint64_t ddof, uint32_t *ret_id)
{
	return client_submit_region(g, region, GPURED_OP_MOMENTS, dt, offset, n,
				    /* partial= */ false, ddof, ret_id);
}

int gpured_wait_id_moments(gpured_t *g, uint32_t id, gpured_moments *ret)
{
	pending *e = client_pending_find(g, id);
	int r;

	if (!e || e->method != GR_METHOD_REDUCE || e->op != GR_OP_MOMENTS)
		return client_error(g, -ESRCH, "request %u is not an outstanding moments request", id);
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	if (e->err == 0 && ret) {
		const gr_moments *m = &e->moments;
		*ret = (gpured_moments){
			.count = m->count,
			.sum = value_of(&m->sum, m->count),
			.min = value_of(&m->min, m->count),
			.max = value_of(&m->max, m->count),
			.mean = m->mean,
			.var = m->var,
		};
	}
	return client_collect(g, e, NULL);
}

int gpured_reduce_moments(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			  uint64_t ddof, gpured_moments *ret)
{
	uint32_t id;
	int r = gpured_submit_moments(g, dt, data, n, ddof, &id);

	return r < 0 ? r : gpured_wait_id_moments(g, id, ret);
}

int gpured_reduce_region_moments(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				 size_t n, uint64_t ddof, gpured_moments *ret)
{
	uint32_t id;
	int r = gpured_submit_region_moments(g, region, dt, offset, n, ddof, &id);

	return r < 0 ? r : gpured_wait_id_moments(g, id, ret);
}

int gpured_region_reduce_moments(gpured_t *g, const gpured_region_t *r, gpured_dtype dt,
				 size_t offset, size_t n, uint64_t ddof, gpured_moments *ret)
{
	return gpured_reduce_region_moments(g, gpured_region_id(r), dt, offset, n, ddof, ret);
}
