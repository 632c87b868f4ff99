/*
 * Drive a gr_req_parser the way the daemon does, and write what happened
 * as a line of text: the events, the requests they carry and the data that
 * reached the destinations. Runs of the same input with different byte
 * splits, destination sizes and read styles must write the same line.
 *
 * Destinations sit between guard bytes that are checked after every call,
 * and the parser must not allocate while it runs (the test is linked with
 * --wrap for the allocator).
 */
#pragma once

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "check.h"
#include "proto/request.h"

#define GUARD 32u
#define GUARD_BYTE 0xa5
/* A run records each event but DEST_FULL: every one of them takes at
 * least a byte of the stream, except a DONE right after an empty DATA,
 * so H_MAX_INPUT bytes make fewer than H_MAX_EVENTS. */
#define H_MAX_INPUT 4096u
#define H_MAX_EVENTS (2 * H_MAX_INPUT + 8)

extern int h_counting;
extern unsigned h_allocs;

typedef struct harness {
	gr_req_parser *p;
	char log[16384];
	size_t log_len;

	size_t chunk;          /* destination size (rounded to whole elements) */
	bool direct;           /* bin payloads through window()/commit() */
	uint64_t reject_over;  /* reject requests with more data than this (0: never) */

	uint8_t *stage;        /* GUARD | cap | GUARD */
	size_t cap;
	uint8_t *data;         /* the request's data, as the destinations got it */
	size_t data_len, data_cap;
	uint64_t flushed;      /* data_done already copied out of stage */

	size_t pos;            /* bytes consumed in all */
	size_t offsets[H_MAX_EVENTS]; /* pos at each event */
	unsigned n_events;
	size_t done_at[H_MAX_EVENTS]; /* pos at each DONE */
	unsigned n_done;
	bool fatal;
} harness;

static void h_log(harness *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void h_log(harness *h, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (h->log_len > 0 && h->log_len < sizeof(h->log) - 2) {
		h->log[h->log_len++] = ';';
		h->log[h->log_len++] = ' ';
	}
	va_start(ap, fmt);
	n = vsnprintf(h->log + h->log_len, sizeof(h->log) - h->log_len, fmt, ap);
	va_end(ap);
	CHECK(n >= 0);
	h->log_len += (size_t)n;
	if (h->log_len >= sizeof(h->log))
		h->log_len = sizeof(h->log) - 1;
}

static void h_check_guards(const harness *h)
{
	if (!h->stage)
		return;
	for (size_t i = 0; i < GUARD; i++) {
		CHECK_MSG(h->stage[i] == GUARD_BYTE, "write before the destination");
		CHECK_MSG(h->stage[GUARD + h->cap + i] == GUARD_BYTE, "write past the destination");
	}
}

static void h_after_call(harness *h)
{
	CHECK_MSG(h_allocs == 0, "the parser allocated");
	h_check_guards(h);
}

/* Copy what the current destination holds into data. */
static void h_flush(harness *h)
{
	const gr_req *r = gr_req_parser_req(h->p);
	uint64_t n = r->data_done - h->flushed;

	if (n == 0)
		return;
	CHECK(h->stage && n <= h->cap);
	if (h->data_len + n > h->data_cap) {
		h->data_cap = (h->data_len + n) * 2;
		h->data = realloc(h->data, h->data_cap);
		CHECK(h->data);
	}
	memcpy(h->data + h->data_len, h->stage + GUARD, n);
	h->data_len += n;
	h->flushed = r->data_done;
}

static void h_new_dest(harness *h)
{
	const gr_req *r = gr_req_parser_req(h->p);
	size_t cap = h->chunk;

	if (r->data_is_array) {
		size_t sz = gr_dtype_size(r->dtype);

		cap = cap / sz * sz;
		if (cap == 0)
			cap = sz;
	}
	free(h->stage);
	h->stage = malloc(cap + 2 * GUARD);
	CHECK(h->stage);
	memset(h->stage, GUARD_BYTE, cap + 2 * GUARD);
	h->cap = cap;
	h_counting = 1;
	gr_req_parser_set_dest(h->p, h->stage + GUARD, cap);
	h_counting = 0;
}

static uint32_t h_fnv(const uint8_t *p, size_t n)
{
	uint32_t v = 2166136261u;

	for (size_t i = 0; i < n; i++)
		v = (v ^ p[i]) * 16777619u;
	return v;
}

static void h_log_request(harness *h, const char *what)
{
	const gr_req *r = gr_req_parser_req(h->p);
	char data[80] = "";

	if (r->method == GR_METHOD_MAP) {
		char hx[16] = "";
		if (r->has_handle)
			sprintf(hx, " h=%08" PRIx32, h_fnv(r->handle, sizeof(r->handle)));
		char pb[32] = "";
		if (r->has_part_bytes)
			sprintf(pb, " part %" PRIu64, r->part_bytes);
		h_log(h, "%s %" PRIu32 " map %" PRIu64 " %s%s%s%s%s%s", what, r->msgid, r->bytes,
		      gr_map_kind_name(r->kind), r->has_device ? " " : "",
		      r->has_device ? r->device : "", hx, r->writable ? " writable" : "", pb);
		return;
	}
	if (r->method == GR_METHOD_MAP_PART) {
		h_log(h, "%s %" PRIu32 " map_part %" PRIu64 " %" PRIu64, what, r->msgid, r->region,
		      r->bytes);
		return;
	}
	if (r->method == GR_METHOD_UNMAP) {
		h_log(h, "%s %" PRIu32 " unmap %" PRIu64, what, r->msgid, r->region);
		return;
	}
	if (r->method != GR_METHOD_REDUCE) {
		h_log(h, "%s %" PRIu32 " %s", what, r->msgid, gr_method_name(r->method));
		return;
	}
	char ddof[96] = "";
	size_t dl = 0;
	if (r->has_ddof)
		dl += (size_t)snprintf(ddof, sizeof(ddof), " ddof %" PRIu64, r->ddof);
	if (r->has_offsets) {
		/* " segs K:o0,o1,..." (the first few offsets) */
		dl += (size_t)snprintf(ddof + dl, sizeof(ddof) - dl, " segs %" PRIu64 ":",
				       r->nsegments);
		for (uint64_t i = 0; i <= r->nsegments && i < 5 && dl < sizeof(ddof); i++)
			dl += (size_t)snprintf(ddof + dl, sizeof(ddof) - dl, "%s%" PRIu64,
					       i ? "," : "", r->offsets[i]);
	}
	if (r->has_out_region && dl < sizeof(ddof))
		dl += (size_t)snprintf(ddof + dl, sizeof(ddof) - dl, " out %" PRIu64 " @%" PRIu64,
				       r->out_region, r->out_offset);
	/* cumsum is sum's prefix sums */
	const char *op = r->scan ? "cumsum" : gr_op_name(r->op);
	if (r->has_region) {
		h_log(h, "%s %" PRIu32 " reduce %s %s region %" PRIu64 " @%" PRIu64 " #%" PRIu64 "%s",
		      what, r->msgid, op, gr_dtype_name(r->dtype), r->region,
		      r->offset, r->count, ddof);
		return;
	}
	CHECK(r->data_done == h->data_len);
	if (h->data_len <= 32) {
		for (size_t i = 0; i < h->data_len; i++)
			sprintf(data + 2 * i, "%02x", h->data[i]);
	} else {
		sprintf(data, "h=%08" PRIx32, h_fnv(h->data, h->data_len));
	}
	h_log(h, "%s %" PRIu32 " reduce %s %s %s %" PRIu64 ":%s%s", what, r->msgid,
	      r->has_op ? op : "-", r->has_dtype ? gr_dtype_name(r->dtype) : "-",
	      r->data_is_array ? "arr" : "bin", r->data_bytes, data, ddof);
}

static void h_event(harness *h, gr_req_event ev)
{
	const gr_req *r = gr_req_parser_req(h->p);

	/* DEST_FULL depends on the destination size: not part of the story. */
	if (ev != GR_REQ_DEST_FULL) {
		CHECK(h->n_events < H_MAX_EVENTS);
		h->offsets[h->n_events++] = h->pos;
	}
	switch (ev) {
	case GR_REQ_DATA:
		CHECK(r->method == GR_METHOD_REDUCE && r->has_data && r->data_done == 0);
		h_log(h, "DATA %" PRIu64, r->data_bytes);
		h->data_len = 0;
		h->flushed = 0;
		if (h->reject_over && r->data_bytes > h->reject_over) {
			h_counting = 1;
			gr_req_parser_reject(h->p, GR_ERR_BUSY, "no staging for %" PRIu64 " bytes",
					     r->data_bytes);
			h_counting = 0;
			CHECK(r->err == GR_ERR_BUSY);
			h_log(h, "REJECT");
		} else {
			h_new_dest(h);
		}
		break;
	case GR_REQ_DEST_FULL:
		CHECK(r->data_done < r->data_bytes);
		h_flush(h);
		h_new_dest(h);
		break;
	case GR_REQ_DONE:
		CHECK(r->err == GR_OK && r->has_msgid);
		h_flush(h);
		if (r->method == GR_METHOD_REDUCE)
			CHECK(r->has_op && r->has_dtype &&
			      (r->has_region ? !r->has_data && r->has_count
					     : r->has_data && r->data_done == r->data_bytes));
		h_log_request(h, "DONE");
		h->done_at[h->n_done++] = h->pos;
		h->data_len = 0;
		h->flushed = 0;
		break;
	case GR_REQ_ERROR:
		CHECK(r->err != GR_OK && r->has_msgid && r->errmsg[0]);
		h_flush(h);
		h_log(h, "ERROR %" PRIu32 " %s: %s", r->msgid, gr_err_name(r->err), r->errmsg);
		h->data_len = 0;
		h->flushed = 0;
		break;
	case GR_REQ_FATAL:
		CHECK(r->err == GR_ERR_INVALID_REQUEST && r->errmsg[0]);
		if (r->has_msgid)
			h_log(h, "FATAL %" PRIu32 " %s: %s", r->msgid, gr_err_name(r->err), r->errmsg);
		else
			h_log(h, "FATAL - %s: %s", gr_err_name(r->err), r->errmsg);
		h->fatal = true;
		break;
	default:
		CHECK(!"unexpected event");
	}
}

static void h_init(harness *h, const gr_req_limits *lim, size_t chunk, bool direct, uint64_t reject_over)
{
	memset(h, 0, sizeof(*h));
	CHECK(gr_req_parser_new(lim, &h->p) == 0);
	h->chunk = chunk;
	h->direct = direct;
	h->reject_over = reject_over;
}

static void h_deinit(harness *h)
{
	h->p = gr_req_parser_free(h->p);
	free(h->stage);
	free(h->data);
	h->stage = h->data = NULL;
}

static void h_feed(harness *h, const uint8_t *buf, size_t len)
{
	size_t off = 0;

	while (!h->fatal) {
		gr_req_event ev;
		size_t used;

		if (h->direct && off < len) {
			void *w;
			size_t n;

			h_counting = 1;
			n = gr_req_parser_window(h->p, &w);
			h_counting = 0;
			if (n > 0) {
				size_t k = n < len - off ? n : len - off;

				CHECK((uint8_t *)w >= h->stage + GUARD &&
				      (uint8_t *)w + n <= h->stage + GUARD + h->cap);
				memcpy(w, buf + off, k);
				off += k;
				h->pos += k;
				h_counting = 1;
				ev = gr_req_parser_commit(h->p, k);
				h_counting = 0;
				h_after_call(h);
				if (ev != GR_REQ_NEED_MORE)
					h_event(h, ev);
				continue;
			}
		}
		h_counting = 1;
		used = gr_req_parser_feed(h->p, buf + off, len - off, &ev);
		h_counting = 0;
		h_after_call(h);
		CHECK(used <= len - off);
		off += used;
		h->pos += used;
		if (ev == GR_REQ_NEED_MORE) {
			CHECK(off == len);
			return;
		}
		h_event(h, ev);
	}
	/* After FATAL nothing more is taken. */
	{
		gr_req_event ev;
		uint8_t byte = 0;

		CHECK(gr_req_parser_feed(h->p, &byte, 1, &ev) == 0 && ev == GR_REQ_FATAL);
	}
}

static void h_end(harness *h)
{
	uint64_t skip;

	if (h->fatal)
		return;
	skip = gr_req_parser_skip_remaining(h->p);
	if (skip)
		h_log(h, "END %s skip=%" PRIu64, gr_req_parser_idle(h->p) ? "idle" : "busy", skip);
	else
		h_log(h, "END %s", gr_req_parser_idle(h->p) ? "idle" : "busy");
}

/* Split styles: 0 whole, 1 byte by byte, >= 2 random pieces (seeded). */
static void h_run(harness *h, const uint8_t *buf, size_t len, unsigned split, unsigned seed)
{
	size_t off = 0;

	if (split == 0) {
		h_feed(h, buf, len);
	} else if (split == 1) {
		for (size_t i = 0; i < len && !h->fatal; i++)
			h_feed(h, buf + i, 1);
	} else {
		unsigned s = seed * 2654435761u + split;

		while (off < len && !h->fatal) {
			size_t n;

			s = s * 1103515245u + 12345u;
			n = (s >> 16) % 4 == 0 ? 0 : ((s >> 8) % 23 + 1);
			if ((s >> 20) % 7 == 0)
				n = (s >> 4) % 300;
			if (n > len - off)
				n = len - off;
			h_feed(h, buf + off, n);
			off += n;
		}
	}
	h_end(h);
}
