/*
 * The daemon's metrics in the Prometheus text exposition format (0.0.4):
 * one sample of what the stats and info methods report, and its rendering.
 *
 * Both sides fill the same sample and render it with the same code: the
 * daemon from its own state, for GET /metrics (daemon/exporter.h), and a
 * client from the stats and info replies (gr_metrics_from_obj), for
 * gpuredctl metrics. So the two expositions cannot drift apart. No I/O.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "mp.h"
#include "obj.h"

/* Devices and histogram buckets a sample holds; more are left out. */
#define GR_METRICS_DEVICES_MAX 32u
#define GR_METRICS_BUCKETS_MAX 32u

typedef struct gr_metrics_device {
	uint64_t index;
	char kind[8];
	char name[128];
	bool up;       /* in service */
	uint64_t jobs; /* jobs run on it */
} gr_metrics_device;

typedef struct gr_metrics {
	char version[32];
	double uptime_s;
	uint64_t requests, errors;
	uint64_t connections, connections_total, connections_refused, connections_timed_out;
	uint64_t inflight;
	uint64_t elements, batches, routed_cpu;
	uint64_t regions, mapped_bytes;
	/* request bytes by the path they came: over the socket, in place
	 * from shared memory, from device memory */
	uint64_t bytes_socket, bytes_shm, bytes_device;
	uint64_t stalls_staging, stalls_chunks, stalls_limits;
	unsigned ndevices;
	gr_metrics_device devices[GR_METRICS_DEVICES_MAX];
	/* The request latency histogram; nbuckets 0: none was reported.
	 * counts are cumulative (counts[i]: at most le_us[i]). */
	unsigned nbuckets;
	uint64_t le_us[GR_METRICS_BUCKETS_MAX];
	uint64_t counts[GR_METRICS_BUCKETS_MAX];
	double sum_s;
	uint64_t count;
} gr_metrics;

/*
 * Fill m from the results of stats and info (each a map; PROTOCOL.md).
 * Keys that are missing, or of another type, leave their fields 0, so an
 * older daemon's replies still render. -EBADMSG when either is not a map.
 */
int gr_metrics_from_obj(gr_metrics *m, const gr_obj *stats, const gr_obj *info);

/*
 * Append m's exposition to b: every family with its HELP and TYPE lines,
 * ending in a newline. 0, or -ENOMEM (b may then hold part of it).
 */
int gr_metrics_render(const gr_metrics *m, gr_buf *b);

/* The Content-Type of the exposition. */
#define GR_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
