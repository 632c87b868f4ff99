/*
 * gpured-benchmark's latencies in a log-linear histogram: 64 sub-buckets
 * per power of two of nanoseconds, so a percentile is within 1/64 (1.6%)
 * of the true value and a run of any length needs the same 32 KiB per
 * thread.
 */
#pragma once

#include <stdint.h>

#define LAT_SUB_BITS 6
#define LAT_BUCKETS (64 << LAT_SUB_BITS)

typedef struct bench_latency {
	uint64_t count[LAT_BUCKETS];
	uint64_t n;
	uint64_t max_ns;
} bench_latency;

/* Count one request's latency, ns nanoseconds. */
void bench_latency_add(bench_latency *h, uint64_t ns);

/* The p-th percentile (0 < p <= 100) in microseconds: the middle of its
 * bucket, never more than the largest sample; 0 with no samples. */
double bench_latency_pct_us(const bench_latency *h, double p);

/* Add the samples of h (one thread's) to into. */
void bench_latency_merge(bench_latency *into, const bench_latency *h);
