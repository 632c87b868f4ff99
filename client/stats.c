/*
 * gpured_stats(): the server's "stats" reply read into a struct, each
 * field forgiving of what a newer or older daemon sends (absent or of
 * another type reads as 0).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/call.h"
#include "client/cleanup.h"
#include "client/conn.h"
#include "proto/obj.h"

static uint64_t obj_u64(const gr_obj *o)
{
	if (!o)
		return 0;
	switch (o->type) {
	case GR_MP_UINT:
		return o->v.u;
	case GR_MP_INT:
		return 0;
	case GR_MP_FLOAT:
		/* Converting a double past 2^64 (or NaN) is undefined: clamp. */
		if (!(o->v.f > 0))
			return 0;
		return o->v.f < 18446744073709551616.0 ? (uint64_t)o->v.f : UINT64_MAX;
	default:
		return 0;
	}
}

static double obj_f64(const gr_obj *o)
{
	if (!o)
		return 0;
	switch (o->type) {
	case GR_MP_UINT:
		return (double)o->v.u;
	case GR_MP_INT:
		return (double)o->v.i;
	case GR_MP_FLOAT:
		return o->v.f;
	default:
		return 0;
	}
}

int gpured_stats(gpured_t *g, gpured_stats_t *ret)
{
	_cleanup_(gr_obj_tree_deinitp) gr_obj_tree tree = { 0 };
	_cleanup_(freep) uint8_t *bytes = NULL;
	const gr_obj *res = NULL, *o, *lat;
	gpured_stats_t s = { 0 };
	int r;

	r = client_call_result(g, GR_METHOD_STATS, &bytes, &tree, &res);
	if (r < 0)
		return r;
	if (res->type != GR_MP_MAP)
		return client_error(g, -EPROTO, "stats reply is not a map");
	s.uptime_s = obj_f64(gr_obj_get(res, "uptime_s"));
	o = gr_obj_get(res, "backend");
	if (o && o->type == GR_MP_STR)
		snprintf(s.backend, sizeof(s.backend), "%.*s", (int)o->len, o->v.str);
	s.connections = obj_u64(gr_obj_get(res, "connections"));
	s.connections_total = obj_u64(gr_obj_get(res, "connections_total"));
	s.connections_refused = obj_u64(gr_obj_get(res, "connections_refused"));
	s.devices = obj_u64(gr_obj_get(res, "devices"));
	s.devices_healthy = obj_u64(gr_obj_get(res, "devices_healthy"));
	s.requests = obj_u64(gr_obj_get(res, "requests"));
	s.errors = obj_u64(gr_obj_get(res, "errors"));
	s.bytes_in = obj_u64(gr_obj_get(res, "bytes_in"));
	s.elements = obj_u64(gr_obj_get(res, "elements"));
	s.batches = obj_u64(gr_obj_get(res, "batches"));
	s.batch_mean = obj_f64(gr_obj_get(res, "batch_mean"));
	s.inflight = obj_u64(gr_obj_get(res, "inflight"));
	lat = gr_obj_get(res, "latency_us");
	s.latency_p50_us = obj_f64(gr_obj_get(lat, "p50"));
	s.latency_p99_us = obj_f64(gr_obj_get(lat, "p99"));
	s.latency_max_us = obj_f64(gr_obj_get(lat, "max"));
	*ret = s;
	return 0;
}
