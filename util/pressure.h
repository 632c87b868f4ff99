/*
 * The host's CPU pressure: the share of the recent past in which some
 * runnable task waited for a CPU, from the kernel's pressure stall
 * information (the "some" line of /proc/pressure/cpu, whose total= counts
 * the microseconds of such waiting since boot). The kernel's own averages
 * start at ten seconds, too slow to follow a client that begins to
 * stream; this reads the counter itself, at most every
 * GR_PRESSURE_SAMPLE_MS, and averages over about GR_PRESSURE_WINDOW_MS.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define GR_PRESSURE_PATH "/proc/pressure/cpu"
#define GR_PRESSURE_SAMPLE_MS 10
#define GR_PRESSURE_WINDOW_MS 100
/* Samples further apart than this say little of now: start over. */
#define GR_PRESSURE_STALE_MS 1000

typedef struct gr_pressure {
	int fd;                 /* -1: nothing to read, never short */
	unsigned threshold_pct; /* short at this share or more; 0: always short */
	bool have;              /* share is an estimate */
	uint64_t last_ns;       /* the last sample, 0: none yet */
	uint64_t last_total_us;
	double share;           /* of the last GR_PRESSURE_WINDOW_MS, 0 to 1 */
	uint64_t samples;       /* reads of the file, for tests */
} gr_pressure;

/*
 * Watch path (GR_PRESSURE_PATH) against threshold_pct. With a threshold
 * of 0 the host always counts as short and nothing is read. Returns 0, or
 * a negative errno when the file cannot be read (the kernel has no
 * pressure information, or hides it): p is then never short.
 */
int gr_pressure_init(gr_pressure *p, const char *path, unsigned threshold_pct);
void gr_pressure_deinit(gr_pressure *p);

/*
 * Whether the host is short of CPU at now_ns (uv_hrtime()): its share
 * over the last GR_PRESSURE_WINDOW_MS is at the threshold or above.
 * Reads the file when the last sample is GR_PRESSURE_SAMPLE_MS old; the
 * first sample after none, or after GR_PRESSURE_STALE_MS, only starts the
 * count, and says not short.
 */
bool gr_pressure_short(gr_pressure *p, uint64_t now_ns);

/* The "some" line's total= in text (a pressure file's contents); -EINVAL
 * when there is none. */
int gr_pressure_parse(const char *text, uint64_t *ret_total_us);
