/*
 * The server's request parser against every rule of PROTOCOL.md and the
 * hostile inputs we know of. Each case runs whole, byte by byte and in
 * seeded random pieces, with large and tiny destinations, with feed() and
 * with window()/commit(): all runs must tell the same story, at the same
 * byte offsets. A fuzz loop then mutates the cases' bytes.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "mk.h"
#include "request-cases.h"

int h_counting;
unsigned h_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
	/* The one allocation the parser may make: a request's offsets, 8
	 * bytes each and at least two (proto/offsets.c). */
	if (n % 8 != 0 || n < 16)
		h_allocs += h_counting;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	h_allocs += h_counting;
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	h_allocs += h_counting;
	return __real_realloc(p, n);
}

static const size_t chunks[] = { 1 << 20, 8, 1 };

/* One run of input with a given style; the harness's line goes to h. */
static void run_one(harness *h, const mk_out *m, const req_case *c, size_t chunk, bool direct,
		    unsigned split, unsigned seed)
{
	gr_req_limits lim = { .max_data_bytes = c->max_data };

	h_init(h, &lim, chunk, direct, c->reject_over);
	h_run(h, m->b.data, m->b.len, split, seed);
}

static void check_case(const req_case *c, unsigned idx)
{
	harness ref, h;
	mk_out m;

	mk(&m, c->input);
	run_one(&ref, &m, c, chunks[0], false, 0, 0);
	CHECK_MSG(fnmatch(c->expect, ref.log, 0) == 0, "case %u: %s\n  got:    %s\n  wanted: %s", idx,
		  c->input, ref.log, c->expect);

	/* A DONE comes exactly at the end of its message, never later. */
	for (unsigned i = 0; i < ref.n_done; i++) {
		bool at_end = false;

		for (unsigned j = 0; j < m.n_ends; j++)
			at_end |= ref.done_at[i] == m.ends[j];
		CHECK_MSG(at_end, "case %u: DONE #%u at %zu is not the end of a message", idx, i,
			  ref.done_at[i]);
	}

	for (size_t ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
		for (int direct = 0; direct <= 1; direct++) {
			for (unsigned split = 0; split < 5; split++) {
				run_one(&h, &m, c, chunks[ci], direct, split, idx);
				CHECK_MSG(strcmp(h.log, ref.log) == 0,
					  "case %u (chunk %zu, direct %d, split %u): %s\n  got:  %s\n  whole: %s",
					  idx, chunks[ci], direct, split, c->input, h.log, ref.log);
				CHECK(h.n_events == ref.n_events);
				CHECK(memcmp(h.offsets, ref.offsets, h.n_events * sizeof(h.offsets[0])) == 0);
				h_deinit(&h);
			}
		}
	}
	h_deinit(&ref);
	gr_buf_deinit(&m.b);
}

static void test_cases(void)
{
	for (unsigned i = 0; i < req_n_cases; i++)
		check_case(&req_cases[i], i);
}

/* 1000 levels of nesting, at the top and inside a request. */
static void test_deep(void)
{
	static const char *const prefixes[] = {
		"", "<94 00 01 a4 70 69 6e 67>", "<93 02 a4 70 69 6e 67>",
		"<94 00 01 a6 72 65 64 75 63 65 91 81 a2 6f 70>",
	};
	static const char *const expect[] = {
		"FATAL - invalid_request: a message must be*",
		"ERROR 1 invalid_params*; FATAL 1 invalid_request: nesting too deep*",
		"FATAL - invalid_request: nesting too deep*",
		"ERROR 1 invalid_params: 'op' must be a string; FATAL 1 invalid_request: nesting too deep*",
	};

	for (unsigned i = 0; i < 4; i++) {
		char *s = malloc(strlen(prefixes[i]) + 4 * 1000 + 8);
		req_case c = { .input = s, .expect = expect[i] };

		strcpy(s, prefixes[i]);
		strcat(s, " <");
		for (int k = 0; k < 1000; k++)
			strcat(s, "91 ");
		strcat(s, "c0>");
		check_case(&c, 1000 + i);
		free(s);
	}
}

/*
 * Every prefix of a stream yields a prefix of the whole stream's events:
 * nothing is reported before its bytes are there.
 */
static void test_prefixes(void)
{
	static const char *const inputs[] = {
		RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
		RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"data\": [1, 2.5, f32:3]}"),
		"[0, 3, \"nope\", [1, 2]] [2, \"ping\", []] " RED("{\"op\": \"sum\", \"dtype\": \"u64\", \"data\": [1, -1]}"),
	};

	for (unsigned i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		req_case c = { .input = inputs[i] };
		harness whole, h;
		mk_out m;
		char *end;

		mk(&m, inputs[i]);
		run_one(&whole, &m, &c, 1 << 20, false, 0, 0);
		end = strstr(whole.log, "END");
		CHECK(end);
		for (size_t n = 0; n < m.b.len; n++) {
			char *e;

			h_init(&h, NULL, 3, n % 2, 0);
			h_run(&h, m.b.data, n, n % 3, (unsigned)n);
			e = strstr(h.log, "END ");
			CHECK_MSG(e, "prefix %zu: %s", n, h.log);
			CHECK_MSG(strncmp(h.log, whole.log, (size_t)(e - h.log)) == 0,
				  "prefix %zu of input %u: %s\n  whole: %s", n, i, h.log, whole.log);
			h_deinit(&h);
		}
		h_deinit(&whole);
		gr_buf_deinit(&m.b);
	}
}

/* A large array through destinations of a few elements: every value lands. */
static void test_large_array(void)
{
	gr_buf b;
	harness h;
	int64_t want[1000];

	gr_buf_init(&b);
	CHECK(gr_mpw_array(&b, 4) == 0 && gr_mpw_uint(&b, 0) == 0 && gr_mpw_uint(&b, 8) == 0);
	CHECK(gr_mpw_cstr(&b, "reduce") == 0 && gr_mpw_array(&b, 1) == 0 && gr_mpw_map(&b, 3) == 0);
	CHECK(gr_mpw_cstr(&b, "op") == 0 && gr_mpw_cstr(&b, "max") == 0);
	CHECK(gr_mpw_cstr(&b, "dtype") == 0 && gr_mpw_cstr(&b, "i64") == 0);
	CHECK(gr_mpw_cstr(&b, "data") == 0 && gr_mpw_array(&b, 1000) == 0);
	for (int i = 0; i < 1000; i++) {
		want[i] = (int64_t)i * 7919 * (i % 2 ? -1 : 1) * 1000003;
		CHECK(gr_mpw_int(&b, want[i]) == 0);
	}
	for (unsigned split = 0; split < 4; split++) {
		h_init(&h, NULL, 24, split % 2, 0);
		h_run(&h, b.data, b.len, split, 7);
		CHECK_MSG(fnmatch("DATA 8000; DONE 8 reduce max i64 arr 8000:*; END idle", h.log, 0) == 0, "%s", h.log);
		/* h.data was reset at DONE; run again keeping it */
		h_deinit(&h);
	}
	/* Check the bytes themselves: stop before DONE resets them. */
	h_init(&h, NULL, 24, false, 0);
	h_feed(&h, b.data, b.len - 1);
	h_flush(&h);
	CHECK(h.data_len == 999 * 8);
	CHECK(memcmp(h.data, want, 999 * 8) == 0);
	h_deinit(&h);
	gr_buf_deinit(&b);
}

/* The parser's own API edges. */
static void test_api(void)
{
	gr_req_parser *p;
	gr_req_event ev;
	uint8_t dst[4];
	void *w;
	mk_out m;
	size_t n;

	CHECK(gr_req_parser_new(NULL, &p) == 0);
	CHECK(gr_req_parser_idle(p));
	CHECK(gr_req_parser_window(p, &w) == 0 && w == NULL);
	CHECK(gr_req_parser_feed(p, NULL, 0, &ev) == 0 && ev == GR_REQ_NEED_MORE);
	/* reject between requests does nothing */
	gr_req_parser_reject(p, GR_ERR_BUSY, "x");
	mk(&m, RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"));
	n = gr_req_parser_feed(p, m.b.data, m.b.len, &ev);
	CHECK(ev == GR_REQ_DATA && !gr_req_parser_idle(p));
	/* No destination yet: DEST_FULL, nothing taken. */
	CHECK(gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev) == 0 && ev == GR_REQ_DEST_FULL);
	gr_req_parser_set_dest(p, dst, sizeof(dst));
	CHECK(gr_req_parser_window(p, &w) == 4 && w == dst);
	/* commit more than the window: clamped */
	memcpy(dst, m.b.data + n, 4);
	ev = gr_req_parser_commit(p, 100);
	CHECK(ev == GR_REQ_DEST_FULL && gr_req_parser_req(p)->data_done == 4);
	CHECK(gr_req_parser_window(p, &w) == 0);
	n += 4;
	gr_req_parser_set_dest(p, dst, sizeof(dst));
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && memcmp(dst, "\2\0\0\0", 4) == 0);
	CHECK(gr_req_parser_idle(p));
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->method == GR_METHOD_PING);
	CHECK(n == m.b.len);
	/* commit(0) outside a payload runs nothing and asks for more */
	CHECK(gr_req_parser_commit(p, 0) == GR_REQ_NEED_MORE);
	gr_buf_deinit(&m.b);
	CHECK(gr_req_parser_free(p) == NULL);
	CHECK(gr_req_parser_free(NULL) == NULL);

	/* Offsets: the limit on segments, and taking the array over. */
	gr_req_limits lim = { .max_segments = 2 };
	CHECK(gr_req_parser_new(&lim, &p) == 0);
	mk(&m, RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00\"*32, \"data\": x\"\"}")
	       " " RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00\"*24, \"data\": x\"\"}"));
	n = gr_req_parser_feed(p, m.b.data, m.b.len, &ev);
	CHECK(ev == GR_REQ_ERROR && gr_req_parser_req(p)->err == GR_ERR_TOO_LARGE);
	CHECK(strcmp(gr_req_parser_req(p)->errmsg, "'offsets' has 3 segments, over the limit of 2") == 0);
	CHECK(gr_req_parser_take_offsets(p) == NULL);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->method == GR_METHOD_PING);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DATA && gr_req_parser_req(p)->nsegments == 2);
	uint64_t *offs = gr_req_parser_take_offsets(p);
	CHECK(offs && offs[0] == 0 && offs[2] == 0 && gr_req_parser_req(p)->offsets == NULL);
	CHECK(gr_req_parser_take_offsets(p) == NULL);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->has_offsets);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && n == m.b.len);
	free(offs);
	gr_buf_deinit(&m.b);
	gr_req_parser_free(p);

	/*
	 * A destination changed while an element's header is half read (not
	 * how it should be used): the element waits for room rather than
	 * overflow, and a reject then drops it.
	 */
	for (int do_reject = 0; do_reject <= 1; do_reject++) {
		uint8_t small[2], big[8];

		CHECK(gr_req_parser_new(NULL, &p) == 0);
		mk(&m, RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [i32:1, i32:2, i32:3]}"));
		n = gr_req_parser_feed(p, m.b.data, m.b.len, &ev);
		CHECK(ev == GR_REQ_DATA);
		gr_req_parser_set_dest(p, big, sizeof(big));
		n += gr_req_parser_feed(p, m.b.data + n, 5 + 2, &ev); /* element 0 and 2 bytes of 1 */
		CHECK(ev == GR_REQ_NEED_MORE);
		gr_req_parser_set_dest(p, small, sizeof(small));
		n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
		CHECK(ev == GR_REQ_DEST_FULL && gr_req_parser_req(p)->data_done == 4);
		if (do_reject) {
			gr_req_parser_reject(p, GR_ERR_BUSY, "no room");
			n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
			CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->method == GR_METHOD_PING);
		} else {
			gr_req_parser_set_dest(p, big, sizeof(big));
			n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
			CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->data_done == 12);
			CHECK(memcmp(big, "\2\0\0\0\3\0\0\0", 8) == 0);
		}
		gr_buf_deinit(&m.b);
		gr_req_parser_free(p);
	}
}

/*
 * Mutations of the cases' bytes, and plain noise, in random pieces with
 * random destinations: the guards must hold, nothing may crash, and the
 * pieces must not change the story.
 */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_fuzz(unsigned iterations)
{
	size_t n_corpus = req_n_cases;
	mk_out *corpus = calloc(n_corpus, sizeof(*corpus));
	uint64_t s = 0x9e3779b97f4a7c15u;
	uint8_t buf[4096];
	unsigned stats[4] = { 0 };

	CHECK(corpus);
	for (size_t i = 0; i < n_corpus; i++)
		mk(&corpus[i], req_cases[i].input);

	for (unsigned it = 0; it < iterations; it++) {
		gr_req_limits lim = { 0 };
		harness ref, h;
		size_t len;
		unsigned kind;

		kind = rnd(&s) % 8;
		if (kind == 0) {
			len = rnd(&s) % 200;
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rnd(&s);
		} else {
			const mk_out *m = &corpus[rnd(&s) % n_corpus];
			unsigned muts = 1 + rnd(&s) % 4;

			len = m->b.len < sizeof(buf) / 2 ? m->b.len : sizeof(buf) / 2;
			memcpy(buf, m->b.data, len);
			if (kind == 1 && len < sizeof(buf) / 2) { /* splice another case after it */
				const mk_out *m2 = &corpus[rnd(&s) % n_corpus];
				size_t l2 = m2->b.len < sizeof(buf) / 2 - len ? m2->b.len : sizeof(buf) / 2 - len;

				memcpy(buf + len, m2->b.data, l2);
				len += l2;
			}
			for (unsigned k = 0; k < muts && len > 0; k++) {
				size_t at = rnd(&s) % len;

				switch (rnd(&s) % 5) {
				case 0:
					buf[at] ^= (uint8_t)(1u << (rnd(&s) % 8));
					break;
				case 1:
					buf[at] = (uint8_t)rnd(&s);
					break;
				case 2: /* a byte that means a lot */
					buf[at] = (uint8_t[]){ 0xc1, 0xdd, 0xdf, 0xdb, 0xc6, 0xd4, 0xcf, 0xff, 0x00, 0x9f, 0x8f }[rnd(&s) % 11];
					break;
				case 3:
					len = at;
					break;
				default:
					if (len < sizeof(buf) - 1) {
						memmove(buf + at + 1, buf + at, len - at);
						buf[at] = (uint8_t)rnd(&s);
						len++;
					}
					break;
				}
			}
		}
		lim.max_data_bytes = rnd(&s) % 3 == 0 ? 1 + rnd(&s) % 64 : 0;
		{
			uint64_t reject = rnd(&s) % 3 == 0 ? 1 + rnd(&s) % 16 : 0;
			size_t chunk = 1 + rnd(&s) % 20;
			req_case c = { .max_data = lim.max_data_bytes, .reject_over = reject };
			mk_out m = { .b = { .data = buf, .len = len } };

			run_one(&ref, &m, &c, 1 << 16, false, 0, 0);
			bool direct = rnd(&s) % 2;
			unsigned split = 1 + rnd(&s) % 4, seed = (unsigned)rnd(&s);

			run_one(&h, &m, &c, chunk, direct, split, seed);
			CHECK_MSG(strcmp(h.log, ref.log) == 0, "fuzz %u: %s\n  vs %s", it, h.log, ref.log);
			stats[0] += strstr(ref.log, "FATAL") != NULL;
			stats[1] += strstr(ref.log, "DONE") != NULL;
			stats[2] += strstr(ref.log, "ERROR") != NULL;
			stats[3] += strstr(ref.log, "DATA") != NULL;
			CHECK(memcmp(h.offsets, ref.offsets, h.n_events * sizeof(h.offsets[0])) == 0);
			h_deinit(&h);
			h_deinit(&ref);
		}
	}
	for (size_t i = 0; i < n_corpus; i++)
		gr_buf_deinit(&corpus[i].b);
	free(corpus);
	printf("fuzz: %u runs with FATAL, %u with DONE, %u with ERROR, %u with DATA\n", stats[0],
	       stats[1], stats[2], stats[3]);
}

/* Write each case's bytes as a seed for fuzz-request (4 bytes of settings first). */
static void write_corpus(const char *dir)
{
	for (unsigned i = 0; i < req_n_cases; i++) {
		char path[4096];
		uint8_t settings[4] = { 0, 0, (uint8_t)(i % 64), (uint8_t)i };
		mk_out m;
		FILE *f;

		mk(&m, req_cases[i].input);
		snprintf(path, sizeof(path), "%s/case-%03u", dir, i);
		f = fopen(path, "wb");
		CHECK(f);
		CHECK(fwrite(settings, 1, 4, f) == 4 && fwrite(m.b.data, 1, m.b.len, f) == m.b.len);
		CHECK(fclose(f) == 0);
		gr_buf_deinit(&m.b);
	}
}

/* Usage: test-request [fuzz-iterations] | --corpus DIR */
int main(int argc, char **argv)
{
	unsigned iterations;

	if (argc > 2 && strcmp(argv[1], "--corpus") == 0) {
		write_corpus(argv[2]);
		return 0;
	}
	iterations = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 100000;

	test_api();
	test_cases();
	test_deep();
	test_prefixes();
	test_large_array();
	test_fuzz(iterations);
	printf("%zu cases, %u fuzz iterations\n", req_n_cases, iterations);
	return 0;
}
