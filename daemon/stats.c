#include <stdlib.h>
#include <string.h>

#include "daemon/stats.h"

void gr_stats_init(gr_stats *s, uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	s->start_ns = now_ns;
}

void gr_stats_latency(gr_stats *s, uint64_t ns)
{
	uint64_t us = ns / 1000;
	s->lat_us[s->lat_n++ % GR_STATS_WINDOW] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
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
