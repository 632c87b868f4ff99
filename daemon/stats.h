/*
 * Counters the stats method reports, and request latencies over a recent
 * window (the last GR_STATS_WINDOW requests).
 */
#pragma once

#include <stdint.h>

#define GR_STATS_WINDOW 4096u

typedef struct gr_stats {
	uint64_t start_ns;
	uint64_t connections;
	uint64_t connections_total;
	uint64_t connections_refused;
	uint64_t requests;
	uint64_t errors;
	uint64_t bytes_in;
	uint64_t bytes_shm;  /* reduced in place from shared-memory regions */
	uint64_t regions;    /* mapped now (until the last request on each is done) */
	uint64_t elements;
	uint64_t inflight;
	/* Times a connection stopped reading: no staging slot free, its
	 * request at --request-chunks in flight, over its in-flight or
	 * unsent bounds. */
	uint64_t stalls_staging;
	uint64_t stalls_chunks;
	uint64_t stalls_limits;
	uint32_t lat_us[GR_STATS_WINDOW];
	uint64_t lat_n; /* samples ever recorded; the window holds the last ones */
} gr_stats;

void gr_stats_init(gr_stats *s, uint64_t now_ns);
void gr_stats_latency(gr_stats *s, uint64_t ns);
/* Percentiles of the window, in microseconds; zeros when empty. */
void gr_stats_percentiles(const gr_stats *s, uint32_t *p50, uint32_t *p99, uint32_t *max);
