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

#include "client/gpured-private.h"
#include "math/fsum.h"

int client_partial_reply(pending *e, const gr_obj *result, char *why, size_t size)
{
	char what[128];
	gr_fsum x;
	double v;

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
	e->exact = malloc(sizeof(*e->exact));
	if (!e->exact) {
		snprintf(why, size, "out of memory");
		return -ENOMEM;
	}
	client_partial_from_exact(&x, (gpured_op)e->op, (gpured_dtype)e->dtype, e->exact);
	return 0;
}

static int refuse_kind(gpured_t *g, gpured_op op, gpured_dtype dt)
{
	const char *o = gpured_op_name(op), *d = gpured_dtype_name(dt);

	return client_error(g, -EINVAL, "no exact partial for %s of %s: only float sum and sumsq",
			    o ? o : "?", d ? d : "?");
}

/* Hand e's partial to the caller, and the entry's outcome. */
static int partial_collect(gpured_t *g, pending *e, gpured_partial *ret)
{
	if (e->err == 0 && !e->exact)
		/* not reachable: a reply without one fails the connection */
		return client_error(g, -EPROTO, "reply without its exact partial");
	if (e->err == 0 && ret)
		*ret = *e->exact;
	return client_collect(g, e, NULL);
}

int gpured_submit_partial(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			  uint32_t *ret_id)
{
	if (g->dead)
		return client_dead(g);
	if (!client_partial_kind(op, dt))
		return refuse_kind(g, op, dt);
	return client_submit_data(g, op, dt, data, n, /* partial= */ true, /* ddof= */ 0, ret_id);
}

int gpured_submit_region_partial(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				 size_t offset, size_t n, uint32_t *ret_id)
{
	if (g->dead)
		return client_dead(g);
	if (!client_partial_kind(op, dt))
		return refuse_kind(g, op, dt);
	return client_submit_region(g, region, op, dt, offset, n, /* partial= */ true, /* ddof= */ 0,
				    ret_id);
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
	if (!e->partial)
		return client_error(g, -EINVAL, "request %u did not ask for a partial", id);
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	return partial_collect(g, e, ret);
}

int gpured_wait_partial(gpured_t *g, uint32_t *ret_id, gpured_partial *ret)
{
	*ret_id = 0;
	for (;;) {
		/* Drop the ids at the queue's head that were collected
		 * already, as gpured_wait() does, then take the first
		 * partial request's reply; other replies stay queued for
		 * gpured_wait(). */
		while (g->doneq_len > 0) {
			const pending *e = client_pending_find(g, g->doneq[g->doneq_head]);

			if (e && e->done)
				break;
			g->doneq_head++;
			g->doneq_len--;
		}
		if (g->doneq_len == 0)
			g->doneq_head = 0;
		for (size_t i = 0; i < g->doneq_len; i++) {
			uint32_t id = g->doneq[g->doneq_head + i];
			pending *e = client_pending_find(g, id);

			if (e && e->done && e->partial) {
				*ret_id = id;
				return partial_collect(g, e, ret);
			}
		}
		if (g->dead)
			return client_dead(g);
		if (g->n_live_partial == 0)
			return client_error(g, -ECHILD, "no partial request outstanding");
		int r = client_wait_read(g);
		if (r < 0)
			return r;
	}
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
