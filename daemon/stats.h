/*
 * Counters the stats method reports, and request latencies twice over: in
 * a recent window (the last GR_STATS_WINDOW requests, for percentiles) and
 * in a cumulative histogram since start (monotonic, for Prometheus).
 */
#pragma once

#include <stdint.h>

#define GR_STATS_WINDOW 4096u
/* Upper bounds of the histogram's buckets, in microseconds (5 us to 1 s);
 * one more bucket counts what is above the last. */
#define GR_STATS_HIST_BOUNDS 17u
extern const uint32_t gr_stats_hist_le_us[GR_STATS_HIST_BOUNDS];

typedef struct gr_stats {
	uint64_t start_ns;
	uint64_t connections;
	uint64_t connections_total;
	uint64_t connections_refused;
	uint64_t write_timeouts;  /* closed by --write-timeout-ms */
	uint64_t request_timeouts; /* closed by the timeouts of daemon/timeouts.c */
	uint64_t requests;
	uint64_t errors;
	uint64_t bytes_in;
	uint64_t bytes_shm;  /* reduced in place from shared-memory regions */
	uint64_t bytes_device; /* reduced in place from device-memory regions */
	uint64_t regions;    /* mapped now (until the last request on each is done) */
	uint64_t elements;
	uint64_t inflight;
	/* Times a connection stopped reading: no staging slot free, its
	 * request at --request-chunks in flight, over its in-flight or
	 * unsent bounds, paced for a millisecond (pace.c). */
	uint64_t stalls_staging;
	uint64_t stalls_chunks;
	uint64_t stalls_limits;
	uint64_t stalls_paced;
	uint64_t stalls_fds;      /* not read: its user's descriptors over their bound */
	uint32_t lat_us[GR_STATS_WINDOW];
	uint64_t lat_n; /* samples ever recorded; the window holds the last ones */
	/* Latencies ever recorded, per bucket (not cumulative: recording
	 * touches one counter), the last one above every bound; their sum. */
	uint64_t hist[GR_STATS_HIST_BOUNDS + 1];
	uint64_t hist_sum_ns;
} gr_stats;

void gr_stats_init(gr_stats *s, uint64_t now_ns);
/* Record one request's latency, in the window and the histogram. */
void gr_stats_latency(gr_stats *s, uint64_t ns);
/* The histogram as Prometheus has it: ret_cumulative[i] counts the
 * latencies of at most gr_stats_hist_le_us[i]; returns their total count. */
uint64_t gr_stats_hist_cumulative(const gr_stats *s, uint64_t ret_cumulative[GR_STATS_HIST_BOUNDS]);
/* Percentiles of the window, in microseconds; zeros when empty. */
void gr_stats_percentiles(const gr_stats *s, uint32_t *p50, uint32_t *p99, uint32_t *max);
