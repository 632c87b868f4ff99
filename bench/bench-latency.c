#include <math.h>

#include "bench/bench-latency.h"

static unsigned lat_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < (1u << LAT_SUB_BITS))
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	/* The power of two, then the LAT_SUB_BITS bits below the top one. */
	return ((msb - LAT_SUB_BITS + 1) << LAT_SUB_BITS) |
	       (unsigned)((ns >> (msb - LAT_SUB_BITS)) & ((1u << LAT_SUB_BITS) - 1));
}

/* The middle of a bucket's range, in nanoseconds. */
static double lat_bucket_mid(unsigned b)
{
	unsigned e = b >> LAT_SUB_BITS, m = b & ((1u << LAT_SUB_BITS) - 1);

	if (e == 0)
		return m;
	/* Bucket (e, m) holds [(64 + m) << (e - 1), (65 + m) << (e - 1)). */
	return ((double)(64 + m) + 0.5) * (double)(1ull << (e - 1));
}

void bench_latency_add(bench_latency *h, uint64_t ns)
{
	h->count[lat_bucket(ns)]++;
	h->n++;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

double bench_latency_pct_us(const bench_latency *h, double p)
{
	uint64_t rank, seen = 0;

	if (h->n == 0)
		return 0;
	rank = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < LAT_BUCKETS; b++) {
		seen += h->count[b];
		if (seen >= rank) {
			double mid = lat_bucket_mid(b);

			/* Never report more than the largest sample. */
			return (mid < (double)h->max_ns ? mid : (double)h->max_ns) / 1e3;
		}
	}
	return (double)h->max_ns / 1e3;
}

void bench_latency_merge(bench_latency *into, const bench_latency *h)
{
	for (unsigned b = 0; b < LAT_BUCKETS; b++)
		into->count[b] += h->count[b];
	into->n += h->n;
	if (h->max_ns > into->max_ns)
		into->max_ns = h->max_ns;
}
