/*
 * The latency histogram: a bound is inclusive (le), in nanoseconds, not
 * rounded to microseconds first; what is above the last bound counts only
 * in the total; the cumulative counts never fall and end at the total;
 * the sum is exact. And the metrics renderer: the histogram it writes
 * from a sample, and label values escaped.
 */
#include <string.h>

#include "daemon/stats.h"
#include "proto/metrics.h"
#include "tests/check.h"

static void test_buckets(void)
{
	static gr_stats s;
	uint64_t cum[GR_STATS_HIST_BOUNDS];

	gr_stats_init(&s, 0);
	CHECK(gr_stats_hist_cumulative(&s, cum) == 0);
	for (unsigned i = 0; i < GR_STATS_HIST_BOUNDS; i++)
		CHECK(cum[i] == 0);

	gr_stats_latency(&s, 0);               /* le 5 us */
	gr_stats_latency(&s, 5000);            /* exactly 5 us: le 5 us */
	gr_stats_latency(&s, 5001);            /* just above: le 10 us */
	gr_stats_latency(&s, 1000000000);      /* exactly 1 s: the last bound */
	gr_stats_latency(&s, 1000000001);      /* above every bound */
	gr_stats_latency(&s, 3600000000000ull); /* an hour */
	CHECK(gr_stats_hist_cumulative(&s, cum) == 6);
	CHECK(cum[0] == 2);
	CHECK(cum[1] == 3);
	for (unsigned i = 2; i < GR_STATS_HIST_BOUNDS - 1; i++)
		CHECK_MSG(cum[i] == 3, "bucket %u: %llu", i, (unsigned long long)cum[i]);
	CHECK(cum[GR_STATS_HIST_BOUNDS - 1] == 4);
	CHECK(s.hist_sum_ns == 5000 + 5001 + 1000000000ull + 1000000001ull + 3600000000000ull);
	for (unsigned i = 1; i < GR_STATS_HIST_BOUNDS; i++)
		CHECK(gr_stats_hist_le_us[i] > gr_stats_hist_le_us[i - 1]);
	CHECK(gr_stats_hist_le_us[0] == 5 && gr_stats_hist_le_us[GR_STATS_HIST_BOUNDS - 1] == 1000000);
}

static void test_render(void)
{
	static gr_metrics m;
	gr_buf b;
	char *t;

	memset(&m, 0, sizeof(m));
	strcpy(m.version, "1.2.3");
	m.ndevices = 1;
	strcpy(m.devices[0].kind, "cpu");
	strcpy(m.devices[0].name, "a \"quoted\\\" name\nwith\x01 a \xff byte");
	m.devices[0].up = true;
	m.nbuckets = 2;
	m.le_us[0] = 5;
	m.le_us[1] = 250;
	m.counts[0] = 1;
	m.counts[1] = 3;
	m.count = 4;
	m.sum_s = 0.5;
	gr_buf_init(&b);
	CHECK(gr_metrics_render(&m, &b) == 0);
	CHECK(gr_buf_append(&b, "", 1) == 0);
	t = (char *)b.data;
	CHECK(strstr(t, "gpured_build_info{version=\"1.2.3\"} 1\n"));
	CHECK_MSG(strstr(t, "gpured_device_up{index=\"0\",kind=\"cpu\",name=\"a \\\"quoted\\\\\\\" "
			    "name\\nwith? a ? byte\"} 1\n"), "%s", t);
	CHECK(strstr(t, "gpured_request_duration_seconds_bucket{le=\"5e-06\"} 1\n"));
	CHECK(strstr(t, "gpured_request_duration_seconds_bucket{le=\"0.00025\"} 3\n"));
	CHECK(strstr(t, "gpured_request_duration_seconds_bucket{le=\"+Inf\"} 4\n"));
	CHECK(strstr(t, "gpured_request_duration_seconds_count 4\n"));
	CHECK(strstr(t, "gpured_request_duration_seconds_sum 0.5\n"));
	CHECK(strstr(t, "# TYPE gpured_request_duration_seconds histogram\n"));
	CHECK(t[strlen(t) - 1] == '\n');
	gr_buf_deinit(&b);

	/* no histogram reported (an older daemon): none rendered */
	m.nbuckets = 0;
	gr_buf_init(&b);
	CHECK(gr_metrics_render(&m, &b) == 0);
	CHECK(gr_buf_append(&b, "", 1) == 0);
	CHECK(!strstr((char *)b.data, "request_duration"));
	gr_buf_deinit(&b);
}

int main(void)
{
	test_buckets();
	test_render();
	return 0;
}
