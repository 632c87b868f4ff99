/*
 * How long the request parser takes over the daemon's common request:
 * [0, msgid, "reduce", [{"op": "sum", "dtype": "f32", "data": <bin>}]],
 * back to back, with a destination set on each DATA event as the daemon
 * sets one in its staging memory. Prints nanoseconds per request (the
 * median of the timed passes).
 *
 * Usage: bench-request [requests [payload-bytes [read-size [passes]]]]
 *   read-size 0 feeds the whole buffer at once; otherwise the buffer is
 *   fed in pieces of that many bytes, like socket reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
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

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Parse buf once; returns the number of requests that ended in DONE. */
static size_t bench_pass(const uint8_t *buf, size_t len, size_t read_size, uint8_t *scratch,
			 size_t scratch_cap)
{
	gr_req_parser *p;
	size_t done = 0, off = 0;

	CHECK(gr_req_parser_new(NULL, &p) == 0);
	while (off < len) {
		size_t end = read_size && len - off > read_size ? off + read_size : len;

		for (;;) {
			gr_req_event ev;
			size_t used = gr_req_parser_feed(p, buf + off, end - off, &ev);

			off += used;
			if (ev == GR_REQ_NEED_MORE)
				break;
			switch (ev) {
			case GR_REQ_DATA:
			case GR_REQ_DEST_FULL:
				gr_req_parser_set_dest(p, scratch, scratch_cap);
				break;
			case GR_REQ_DONE:
				done++;
				break;
			default:
				CHECK_MSG(0, "unexpected event %d: %s", (int)ev,
					  gr_req_parser_req(p)->errmsg);
			}
		}
	}
	CHECK(gr_req_parser_idle(p));
	gr_req_parser_free(p);
	return done;
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
	size_t read_size = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
	unsigned passes = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : 7;
	uint8_t *data, *scratch;
	double *ns;
	gr_buf b;

	CHECK(n_req > 0 && passes > 0 && payload % 4 == 0);
	data = malloc(payload ? payload : 1);
	scratch = malloc(payload ? payload : 1);
	ns = calloc(passes, sizeof(*ns));
	CHECK(data && scratch && ns);
	for (size_t i = 0; i < payload; i++)
		data[i] = (uint8_t)(i * 131u + 7u);

	gr_buf_init(&b);
	for (size_t i = 0; i < n_req; i++)
		put_request(&b, (uint32_t)i, data, payload);

	/* One pass untimed: page faults and cold caches are not the parser's. */
	CHECK(bench_pass(b.data, b.len, read_size, scratch, payload) == n_req);
	for (unsigned i = 0; i < passes; i++) {
		double t0 = now_ns();

		CHECK(bench_pass(b.data, b.len, read_size, scratch, payload) == n_req);
		ns[i] = (now_ns() - t0) / (double)n_req;
	}
	qsort(ns, passes, sizeof(*ns), cmp_double);
	printf("%zu requests of %zu bytes (%zu-byte envelope), read size %zu: "
	       "%.1f ns/request (median of %u passes, best %.1f)\n",
	       n_req, b.len / n_req, b.len / n_req - payload, read_size, ns[passes / 2], passes, ns[0]);

	gr_buf_deinit(&b);
	free(ns);
	free(scratch);
	free(data);
	return 0;
}
