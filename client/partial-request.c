/*
 * Requests for exact partials: reduce with "partial": true, by data or by
 * region, and the collection of their replies, whose "exact" map is read
 * (and checked against the rounded value) as the reply arrives.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/conn.h"
#include "client/partial.h"
#include "client/reduce.h"
#include "math/fsum.h"

/*
 * A reduce's value, then the exact partial of e's result into e->u.exact,
 * checked against that value: 0, -ENOMEM, or -EPROTO with why.
 */
static int partial_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len,
			char *why, size_t size)
{
	char what[128];
	gr_fsum x;
	double v;
	int r;

	r = client_reduce_read(e, result, msg, len, why, size);
	if (r < 0)
		return r;
	if (gr_fsum_parse(result, e->value.count, &x, what, sizeof(what)) < 0) {
		snprintf(why, size, "malformed exact partial: %s", what);
		return -EPROTO;
	}
	/* The daemon rounds the same exact value: a partial that rounds to
	 * other bits than the value beside it would combine to a wrong sum. */
	v = gr_fsum_round(&x);
	if (e->value.kind != GPURED_KIND_F64 ||
	    (memcmp(&v, &e->value.v.f, sizeof(v)) != 0 && !(isnan(v) && isnan(e->value.v.f)))) {
		snprintf(why, size, "exact partial rounds to %a, not to the value %a", v,
			 e->value.v.f);
		return -EPROTO;
	}
	e->u.exact = malloc(sizeof(*e->u.exact));
	if (!e->u.exact) {
		snprintf(why, size, "out of memory");
		return -ENOMEM;
	}
	client_partial_from_exact(&x, (gpured_op)e->op, (gpured_dtype)e->dtype, e->u.exact);
	return 0;
}

static void partial_clear(pending *e)
{
	free(e->u.exact);
}

static const client_kind partial_kind = {
	.read = partial_read,
	.clear = partial_clear,
};

static int refuse_kind(gpured_t *g, gpured_op op, gpured_dtype dt)
{
	const char *o = gpured_op_name(op), *d = gpured_dtype_name(dt);

	return client_error(g, -EINVAL, "no exact partial for %s of %s: only float sum and sumsq",
			    o ? o : "?", d ? d : "?");
}

/* Hand e's partial to the caller, and the entry's outcome. */
static int partial_collect(gpured_t *g, pending *e, gpured_partial *ret)
{
	if (e->err == 0 && !e->u.exact)
		/* not reachable: a reply without one fails the connection */
		return client_error(g, -EPROTO, "reply without its exact partial");
	if (e->err == 0 && ret)
		*ret = *e->u.exact;
	return client_collect(g, e, NULL);
}

int gpured_submit_partial(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			  uint32_t *ret_id)
{
	if (g->dead)
		return client_dead(g);
	if (!client_partial_kind(op, dt))
		return refuse_kind(g, op, dt);
	return client_reduce_submit_data(g, &partial_kind, op, dt, data, n, /* partial= */ true,
					  /* ddof= */ 0, ret_id);
}

int gpured_submit_region_partial(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				 size_t offset, size_t n, uint32_t *ret_id)
{
	if (g->dead)
		return client_dead(g);
	if (!client_partial_kind(op, dt))
		return refuse_kind(g, op, dt);
	return client_reduce_submit_region(g, &partial_kind, region, op, dt, offset, n,
					    /* partial= */ true, /* ddof= */ 0, ret_id);
}

int gpured_region_submit_partial(gpured_t *g, const gpured_region_t *r, gpured_op op,
				 gpured_dtype dt, size_t offset, size_t n, uint32_t *ret_id)
{
	return gpured_submit_region_partial(g, gpured_region_id(r), op, dt, offset, n, ret_id);
}

int gpured_wait_id_partial(gpured_t *g, uint32_t id, gpured_partial *ret)
{
	pending *e = client_pending_find(g, id);
	int r;

	if (!e)
		return client_error(g, -ESRCH, "request %u is not outstanding", id);
	if (e->kind != &partial_kind)
		return client_error(g, -EINVAL, "request %u did not ask for a partial", id);
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	return partial_collect(g, e, ret);
}

int gpured_wait_partial(gpured_t *g, uint32_t *ret_id, gpured_partial *ret)
{
	pending *e;
	int r;

	/* Other replies stay queued for gpured_wait(). */
	*ret_id = 0;
	e = client_wait_next(g, &partial_kind, "partial request", &r);
	if (!e)
		return r;
	*ret_id = e->id;
	return partial_collect(g, e, ret);
}

int gpured_reduce_partial(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			  gpured_partial *ret)
{
	uint32_t id;
	int r = gpured_submit_partial(g, op, dt, data, n, &id);

	return r < 0 ? r : gpured_wait_id_partial(g, id, ret);
}

int gpured_reduce_region_partial(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				 size_t offset, size_t n, gpured_partial *ret)
{
	uint32_t id;
	int r = gpured_submit_region_partial(g, region, op, dt, offset, n, &id);

	return r < 0 ? r : gpured_wait_id_partial(g, id, ret);
}

int gpured_region_reduce_partial(gpured_t *g, const gpured_region_t *r, gpured_op op,
				 gpured_dtype dt, size_t offset, size_t n, gpured_partial *ret)
{
	return gpured_reduce_region_partial(g, gpured_region_id(r), op, dt, offset, n, ret);
}
