/*
 * moments requests, by data or by region, and their collection: a
 * reduce whose reply is read whole as it arrives (client_kind_reduce),
 * and handed over here.
 */
#include <errno.h>

#include "client/conn.h"
#include "client/reduce.h"

int gpured_submit_moments(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			  uint64_t ddof, uint32_t *ret_id)
{
	return client_reduce_submit_data(g, &client_kind_reduce, GPURED_OP_MOMENTS, dt, data, n,
					  /* partial= */ false, ddof, ret_id);
}

int gpured_submit_region_moments(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				 size_t n, uint64_t ddof, uint32_t *ret_id)
{
	return client_reduce_submit_region(g, &client_kind_reduce, region, GPURED_OP_MOMENTS, dt,
					    offset, n, /* partial= */ false, ddof, ret_id);
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
			.sum = client_value_of(&m->sum, m->count),
			.min = client_value_of(&m->min, m->count),
			.max = client_value_of(&m->max, m->count),
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
