/*
 * How long the request parser takes over the daemon's common request:
 * [0, msgid, "reduce", [{"op": "sum", "dtype": "f32", "data": <bin>}]],
 * back to back, with a destination set on each DATA event as the daemon
 * sets one in its staging memory. Prints nanoseconds per request, the
 * median of the timed passes.
 *
 * By default the stream reaches the parser the way it reaches the daemon's:
 * through a 64 KiB read buffer, filled from the stream (the socket read)
 * and fed until the parser needs more, which it only does once it took
 * every byte. Only the feeding is timed: the fill stands for the kernel's
 * copy. With a
 * read size of 0 the whole stream (about 100 MiB) is fed at once and the
 * whole pass is timed; then reading the stream from memory costs as much
 * as parsing it, so that line also says what copying the payloads alone
 * costs.
 *
 * Usage: bench-request [requests [payload-bytes [read-size [passes]]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/check.h"
#include "proto/mp.h"
#include "proto/request.h"

static void put_request(gr_buf *b, uint32_t msgid, const uint8_t *payload, size_t n)
{
	CHECK(gr_mpw_array(b, 4) == 0);
	CHECK(gr_mpw_uint(b, 0) == 0);
	CHECK(gr_mpw_uint(b, msgid) == 0);
	CHECK(gr_mpw_cstr(b, "reduce") == 0);
	CHECK(gr_mpw_array(b, 1) == 0);
	CHECK(gr_mpw_map(b, 3) == 0);
	CHECK(gr_mpw_cstr(b, "op") == 0);
	CHECK(gr_mpw_cstr(b, "sum") == 0);
	CHECK(gr_mpw_cstr(b, "dtype") == 0);
	CHECK(gr_mpw_cstr(b, "f32") == 0);
	CHECK(gr_mpw_cstr(b, "data") == 0);
	CHECK(gr_mpw_bin(b, payload, n) == 0);
}

static double now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct bench {
	gr_req_parser *p;
	uint8_t *scratch; /* the staging memory every payload goes to */
	size_t scratch_cap;
	size_t done;
} bench;

/* Feed buf[0..len) until the parser needs more; returns the bytes it took. */
static size_t bench_feed(bench *b, const uint8_t *buf, size_t len)
{
	size_t off = 0;

	for (;;) {
		gr_req_event ev;

		off += gr_req_parser_feed(b->p, buf + off, len - off, &ev);
		switch (ev) {
		case GR_REQ_NEED_MORE:
			return off;
		case GR_REQ_DATA:
		case GR_REQ_DEST_FULL:
			gr_req_parser_set_dest(b->p, b->scratch, b->scratch_cap);
			break;
		case GR_REQ_DONE:
			b->done++;
			break;
		default:
			CHECK_MSG(0, "unexpected event %d: %s", (int)ev, gr_req_parser_req(b->p)->errmsg);
		}
	}
}

/* One pass over the stream; returns the nanoseconds spent feeding. */
static double bench_pass(bench *b, const uint8_t *src, size_t len, uint8_t *rbuf, size_t rbuf_cap)
{
	size_t off = 0;
	double t = 0;

	CHECK(gr_req_parser_new(NULL, &b->p) == 0);
	b->done = 0;
	if (rbuf_cap == 0) {
		t = now_ns(CLOCK_MONOTONIC);
		CHECK(bench_feed(b, src, len) == len);
		t = now_ns(CLOCK_MONOTONIC) - t;
	}
	while (rbuf_cap && off < len) {
		size_t n = rbuf_cap < len - off ? rbuf_cap : len - off;
		double t0;

		memcpy(rbuf, src + off, n);
		off += n;
		t0 = now_ns(CLOCK_MONOTONIC);
		CHECK(bench_feed(b, rbuf, n) == n);
		t += now_ns(CLOCK_MONOTONIC) - t0;
	}
	CHECK(gr_req_parser_idle(b->p));
	b->p = gr_req_parser_free(b->p);
	return t;
}

/* The payload copies alone, from where they lie in buf (every stride bytes). */
static void copy_pass(const uint8_t *buf, size_t n_req, size_t stride, size_t payload,
		      uint8_t *scratch)
{
	for (size_t i = 0; i < n_req; i++) {
		memcpy(scratch, buf + (i + 1) * stride - payload, payload);
		/* Keep the copy: the compiler must not drop it. */
		__asm__ volatile("" : : "r"(scratch) : "memory");
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	size_t n_req = argc > 1 ? strtoull(argv[1], NULL, 0) : 100000;
	size_t payload = argc > 2 ? strtoull(argv[2], NULL, 0) : 1024;
	size_t read_size = argc > 3 ? strtoull(argv[3], NULL, 0) : 64 * 1024;
	unsigned passes = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : 11;
	bench b = { 0 };
	uint8_t *data, *rbuf;
	double *ns, *copy;
	gr_buf s;

	CHECK(n_req > 0 && passes > 0 && payload % 4 == 0);
	data = malloc(payload + 1);
	b.scratch = malloc(payload + 1);
	b.scratch_cap = payload;
	rbuf = malloc(read_size + 1);
	ns = calloc(passes, sizeof(*ns));
	copy = calloc(passes, sizeof(*copy));
	CHECK(data && b.scratch && rbuf && ns && copy);
	for (size_t i = 0; i < payload; i++)
		data[i] = (uint8_t)(i * 131u + 7u);

	gr_buf_init(&s);
	for (size_t i = 0; i < n_req; i++)
		put_request(&s, (uint32_t)i, data, payload);

	/* One pass untimed: page faults and cold caches are not the parser's. */
	bench_pass(&b, s.data, s.len, rbuf, read_size);
	CHECK(b.done == n_req);
	for (unsigned i = 0; i < passes; i++) {
		double t0;

		ns[i] = bench_pass(&b, s.data, s.len, rbuf, read_size) / (double)n_req;
		CHECK(b.done == n_req);

		t0 = now_ns(CLOCK_MONOTONIC);
		copy_pass(s.data, n_req, s.len / n_req, payload, b.scratch);
		copy[i] = (now_ns(CLOCK_MONOTONIC) - t0) / (double)n_req;
	}
	qsort(ns, passes, sizeof(*ns), cmp_double);
	qsort(copy, passes, sizeof(*copy), cmp_double);
	if (read_size)
		printf("%zu requests of %zu bytes (%zu-byte envelope) through a %zu-byte read buffer: "
		       "%.1f ns/request (median of %u passes)\n",
		       n_req, s.len / n_req, s.len / n_req - payload, read_size, ns[passes / 2], passes);
	else
		printf("%zu requests of %zu bytes (%zu-byte envelope) fed whole: %.1f ns/request "
		       "(median of %u passes); copying the payloads alone: %.1f\n",
		       n_req, s.len / n_req, s.len / n_req - payload, ns[passes / 2], passes,
		       copy[passes / 2]);

	gr_buf_deinit(&s);
	free(copy);
	free(ns);
	free(rbuf);
	free(b.scratch);
	free(data);
	return 0;
}
