/*
 * gpured-benchmark's run: its options, and the array every request sends,
 * filled so that its result is known exactly (small integers, whose float
 * sums are exact in any order), so that every reply is checked.
 *
 * The array repeats with a period of three elements but for two, so a
 * large one is sent out of one buffer of about --send-buffer bytes, named
 * again and again, with the two odd elements spliced in; with --region it
 * lives in a shared-memory region (bench-region.h) and requests name it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/obj.h"
#include "proto/types.h"

/* The request header with its msgid as a 5-byte uint32, and room to spare. */
#define HDR_MAX 96u

typedef struct bench_opts {
	const char *socket;
	unsigned conns;
	unsigned threads;
	unsigned depth;
	uint64_t requests;
	uint64_t elements;
	gr_dtype dtype;
	gr_op op;
	double seconds; /* 0: no limit */
	uint64_t send_buffer; /* bytes a payload is sent out of; 0: the whole array */
	bool region;          /* the array in a shared-memory region, named by each request */
	bool json;
} bench_opts;

/* The array every request sends, and what every reply must say. */
typedef struct bench_data {
	void *data;          /* the memory segs point into */
	struct iovec *segs;  /* the payload, in order: nbytes in all */
	unsigned nsegs;
	size_t n;
	size_t nbytes;
	size_t wire_bytes;   /* sent after the header: nbytes, or 0 with --region */
	int memfd;           /* --region: the array's memfd (-1 otherwise) */
	size_t region_id_at; /* --region: where the header holds the region id */
	gr_value expect;
	double tolerance; /* for floats: allowed |got - expect| */
	/* The request's header for msgid 0x10000; the msgid is patched in. */
	uint8_t hdr[HDR_MAX];
	size_t hdr_len;
} bench_data;

/* Build d for o: the array, its known result and the request's header
 * template (msgid 0x10000, patched per request). Returns 0 or a negative
 * errno. Once built, d->segs and d->data are the caller's to free (with
 * --region, d->data to munmap and d->memfd to close). */
int bench_data_fill(const bench_opts *o, bench_data *d);

/* A reduce result as expected: its value, or for moments its sum. */
bool bench_data_reply_ok(gr_op op, const bench_data *d, const gr_obj *result);
