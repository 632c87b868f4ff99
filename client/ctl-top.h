/*
 * gpuredctl top: a live view of the daemon. Every interval it takes a
 * snapshot (gpured_snapshot()) and shows what changed since the last one:
 * requests and errors per second, bytes in per second by path, the
 * latency percentiles of the reductions answered in the interval (from the
 * difference of two cumulative histograms), jobs per device, and the
 * regions mapped now. On a terminal it redraws in place; elsewhere it
 * writes one block, or one line of JSON, per interval.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "client/gpured.h"

/*
 * Requests each snapshot makes (stats, info), which the daemon counts
 * among the requests it answered: taken off the rate, so that an idle
 * daemon shows 0.
 */
#define CTL_TOP_OWN_REQUESTS 2

typedef struct ctl_top_options {
	double interval_s;        /* between refreshes, > 0 */
	unsigned long iterations; /* refreshes before returning; 0: no end */
	bool json;                /* one line of JSON per refresh */
	const char *where;        /* the socket, for the heading */
} ctl_top_options;

/*
 * The q-quantile (0 < q < 1) of the latencies recorded between snapshots
 * prev and now, in microseconds, interpolated linearly within its bucket
 * of the histogram. NaN when there were none (or the two histograms do not
 * match); when it lies past the last bound, that bound, and *ret_over
 * (may be NULL) is set.
 */
double ctl_top_quantile(const gpured_snapshot_t *prev, const gpured_snapshot_t *now, double q,
			bool *ret_over);

/*
 * Write one refresh to f: what changed from prev to now over dt seconds,
 * as text lines or one line of JSON. Returns 0, or CTL_TOP_WRITE_FAILED.
 */
int ctl_top_render(FILE *f, const gpured_snapshot_t *prev, const gpured_snapshot_t *now,
		   double dt, const ctl_top_options *o);

/* ctl_top_run(): writing to out failed. */
#define CTL_TOP_WRITE_FAILED 1

/*
 * Refresh on out until o->iterations refreshes are shown, a SIGINT,
 * SIGTERM or SIGHUP arrives (then *ret_signal is its number; else 0), or
 * the daemon goes away. Returns 0, CTL_TOP_WRITE_FAILED, or the error of
 * gpured_snapshot() (g's errmsg says what).
 */
int ctl_top_run(gpured_t *g, const ctl_top_options *o, FILE *out, int *ret_signal);
