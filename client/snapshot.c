/*
 * gpured_snapshot(): the stats and info replies in one struct, for
 * monitors. The counters, devices and histogram are read by the same code
 * as the Prometheus exposition (gr_metrics_from_obj), so a monitor and a
 * scrape cannot disagree; what the exposition leaves out (each device's
 * regions) is read here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gpured-private.h"
#include "proto/message.h"
#include "proto/metrics.h"
#include "proto/obj.h"

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
	gpured_snapshot_t s = { 0 };
	client_metrics cm;
	int r = client_metrics_fetch(g, &cm);
	const gr_metrics *m = cm.m;

	if (r < 0)
		goto done;
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
done:
	client_metrics_deinit(&cm);
	return r;
}
