#include <stdlib.h>
#include <string.h>

#include "daemon/stats.h"

void gr_stats_init(gr_stats *s, uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	s->start_ns = now_ns;
}

const uint32_t gr_stats_hist_le_us[GR_STATS_HIST_BOUNDS] = {
	5,     10,     25,     50,     100,    250,    500,    1000,   2500,
	5000,  10000,  25000,  50000,  100000, 250000, 500000, 1000000,
};

void gr_stats_latency(gr_stats *s, uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	s->lat_us[s->lat_n++ % GR_STATS_WINDOW] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	/* Most requests land in the first few buckets: a scan from the
	 * bottom is as quick as a search. A bound is inclusive (le), so
	 * compare in nanoseconds. */
	while (b < GR_STATS_HIST_BOUNDS && ns > (uint64_t)gr_stats_hist_le_us[b] * 1000)
		b++;
	s->hist[b]++;
	s->hist_sum_ns += ns;
}

uint64_t gr_stats_hist_cumulative(const gr_stats *s, uint64_t ret_cumulative[GR_STATS_HIST_BOUNDS])
{
	uint64_t n = 0;

	for (unsigned i = 0; i < GR_STATS_HIST_BOUNDS; i++) {
		n += s->hist[i];
		ret_cumulative[i] = n;
	}
	return n + s->hist[GR_STATS_HIST_BOUNDS];
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

void gr_stats_percentiles(const gr_stats *s, uint32_t *p50, uint32_t *p99, uint32_t *max)
{
	uint32_t sorted[GR_STATS_WINDOW];
	size_t n = s->lat_n < GR_STATS_WINDOW ? s->lat_n : GR_STATS_WINDOW;

	*p50 = *p99 = *max = 0;
	if (n == 0)
		return;
	memcpy(sorted, s->lat_us, n * sizeof(sorted[0]));
	qsort(sorted, n, sizeof(sorted[0]), cmp_u32);
	*p50 = sorted[(n - 1) / 2];
	*p99 = sorted[(n - 1) * 99 / 100];
	*max = sorted[n - 1];
}
