/*
 * The stats and info replies read as one gr_metrics (proto/metrics.h):
 * gpured_snapshot() copies them into one struct, for monitors, and
 * gpured_metrics_format() renders the Prometheus exposition of them, so
 * a monitor and a scrape cannot disagree. What the exposition leaves out
 * (each device's regions) is read for the snapshot here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/call.h"
#include "client/cleanup.h"
#include "client/conn.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/metrics.h"
#include "proto/obj.h"

/* stats and info, fetched and read into m; the replies' parsed trees stay
 * for what the metrics leave out. */
typedef struct metrics {
	uint8_t *st_bytes, *in_bytes;
	gr_obj_tree st_tree, in_tree;
	const gr_obj *st, *in;
	struct gr_metrics *m;
} metrics;

static void metrics_deinit(metrics *cm)
{
	free(cm->m);
	gr_obj_tree_deinit(&cm->st_tree);
	gr_obj_tree_deinit(&cm->in_tree);
	free(cm->st_bytes);
	free(cm->in_bytes);
	memset(cm, 0, sizeof(*cm));
}

/* 0, or a negative errno (with gpured_errmsg() set); *cm wants
 * metrics_deinit() either way. */
static int metrics_fetch(gpured_t *g, metrics *cm)
{
	int r;

	r = client_call_result(g, GR_METHOD_STATS, &cm->st_bytes, &cm->st_tree, &cm->st);
	if (r < 0)
		return r;
	r = client_call_result(g, GR_METHOD_INFO, &cm->in_bytes, &cm->in_tree, &cm->in);
	if (r < 0)
		return r;
	cm->m = malloc(sizeof(*cm->m));
	if (!cm->m)
		return client_error(g, -ENOMEM, "out of memory");
	if (gr_metrics_from_obj(cm->m, cm->st, cm->in) < 0)
		return client_error(g, -EPROTO, "stats or info is not a map");
	return 0;
}

int gpured_metrics_format(gpured_t *g, char **ret)
{
	_cleanup_(metrics_deinit) metrics cm = { 0 };
	_cleanup_(gr_buf_deinitp) gr_buf out = { 0 };
	int r;

	r = metrics_fetch(g, &cm);
	if (r < 0)
		return r;
	r = gr_metrics_render(cm.m, &out);
	r = r ? r : gr_buf_append(&out, "", 1);
	if (r < 0)
		return client_error(g, r, "out of memory");
	*ret = (char *)TAKE_PTR(out.data);
	return 0;
}

static uint64_t get_uint(const gr_obj *map, const char *key)
{
	const gr_obj *v = gr_obj_get(map, key);

	return v && v->type == GR_MP_UINT ? v->v.u : 0;
}

/* Device i of info (by position, as gr_metrics_from_obj counts them). */
static void device_regions(const gr_obj *info, gpured_snapshot_t *s)
{
	const gr_obj *devs = gr_obj_get(info, "devices");
	unsigned n = 0;

	if (!devs || devs->type != GR_MP_ARRAY)
		return;
	for (uint32_t i = 0; i < devs->len && n < s->ndevices; i++) {
		const gr_obj *d = &devs->v.items[i];

		if (d->type != GR_MP_MAP)
			continue;
		s->devices[n].regions = get_uint(d, "regions");
		s->devices[n].region_bytes = get_uint(d, "region_bytes");
		n++;
	}
}

int gpured_snapshot(gpured_t *g, gpured_snapshot_t *ret)
{
	_cleanup_(metrics_deinit) metrics cm = { 0 };
	gpured_snapshot_t s = { 0 };
	const gr_metrics *m;
	int r;

	r = metrics_fetch(g, &cm);
	if (r < 0)
		return r;
	m = cm.m;
	snprintf(s.version, sizeof(s.version), "%s", m->version);
	s.uptime_s = m->uptime_s;
	s.requests = m->requests;
	s.errors = m->errors;
	s.inflight = m->inflight;
	s.connections = m->connections;
	s.bytes_socket = m->bytes_socket;
	s.bytes_shm = m->bytes_shm;
	s.bytes_device = m->bytes_device;
	s.regions = m->regions;
	s.mapped_bytes = m->mapped_bytes;
	s.ndevices = m->ndevices < GPURED_SNAPSHOT_DEVICES ? m->ndevices : GPURED_SNAPSHOT_DEVICES;
	for (unsigned i = 0; i < s.ndevices; i++) {
		gpured_device_snapshot_t *d = &s.devices[i];

		d->index = m->devices[i].index;
		snprintf(d->kind, sizeof(d->kind), "%s", m->devices[i].kind);
		snprintf(d->name, sizeof(d->name), "%s", m->devices[i].name);
		d->healthy = m->devices[i].up;
		d->jobs = m->devices[i].jobs;
	}
	device_regions(cm.in, &s);
	s.nbuckets = m->nbuckets < GPURED_SNAPSHOT_BUCKETS ? m->nbuckets : GPURED_SNAPSHOT_BUCKETS;
	memcpy(s.le_us, m->le_us, s.nbuckets * sizeof(s.le_us[0]));
	memcpy(s.counts, m->counts, s.nbuckets * sizeof(s.counts[0]));
	s.count = m->count;
	s.sum_us = m->sum_s * 1e6;
	*ret = s;
	return 0;
}
