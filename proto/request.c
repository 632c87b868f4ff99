#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp-inline.h"
#include "request-internal.h"

/*
 * The parser is a loop over explicit states; nothing recurses. Containers
 * are tracked on a stack of at most REQ_MAX_DEPTH frames, each with a role
 * (what the container means in a request) and a count of children read.
 * Where the next value lands (its "slot") follows from the top frame's role
 * and index, so a token's meaning is decided the moment its header is read,
 * and a str or bin body is either kept (short words only), discarded, or
 * streamed to the caller's destination, never buffered whole.
 *
 * Zero-byte transitions (closing finished containers, the end of a
 * request, a pending element write) are states of their own, so an event
 * can be returned between any two of them and the same events come out
 * whatever the byte splits.
 *
 * The common request is small and arrives whole, so the steps that cost
 * nothing are taken at once rather than as trips around feed()'s loop: a
 * value that leaves its container open goes straight back to ST_TOKEN,
 * and a short str or bin whose body is already in the buffer is matched
 * (or passed over) where it lies. Each shortcut ends where the
 * step-by-step path would, and a body is only taken early when no event
 * waits to be returned before it, so the events and their byte offsets
 * are the same.
 */

__attribute__((format(printf, 3, 0)))
static void req_vset(gr_req_parser *p, gr_err err, const char *fmt, va_list ap)
{
	p->req.err = err;
	vsnprintf(p->req.errmsg, sizeof(p->req.errmsg), fmt, ap);
}

__attribute__((format(printf, 2, 3)))
static void req_fatal(gr_req_parser *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	req_vset(p, GR_ERR_INVALID_REQUEST, fmt, ap);
	va_end(ap);
	p->state = ST_FATAL;
	p->ev = GR_REQ_FATAL;
}

/* Fail the current request: one ERROR event unless it is silent, then skip. */
__attribute__((format(printf, 3, 4)))
void req_fail(gr_req_parser *p, gr_err err, const char *fmt, ...)
{
	va_list ap;

	if (p->skipping)
		return;
	p->skipping = true;
	if (p->silent)
		return;
	va_start(ap, fmt);
	req_vset(p, err, fmt, ap);
	va_end(ap);
	p->ev = GR_REQ_ERROR;
}

/* A client-supplied word, safe to quote in a message. */
static const char *printable(const char *s, size_t n, char out[REQ_METHOD_MAX + 1])
{
	size_t i;

	for (i = 0; i < n && i < REQ_METHOD_MAX; i++)
		out[i] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'') ? s[i] : '?';
	out[i] = '\0';
	return out;
}

static void req_begin(gr_req_parser *p)
{
	/* Every field before errmsg starts at zero (GR_METHOD_NONE, GR_OK);
	 * errmsg is only read as a string, so an empty one will do. */
	memset(&p->req, 0, offsetof(gr_req, errmsg));
	p->req.errmsg[0] = '\0';
	p->notification = false;
	p->skipping = false;
	p->silent = false;
	p->method_unknown = false;
	p->method_len = 0;
	p->key = KEY_NONE;
	p->keys_seen = 0;
	p->dst = NULL;
	p->cap = 0;
	p->off = 0;
	gr_offsets_clear(&p->offs);
}

static req_slot req_cur_slot(const gr_req_parser *p)
{
	const req_frame *f;

	if (p->depth == 0)
		return SLOT_TOP;
	f = &p->stack[p->depth - 1];
	switch (f->role) {
	case ROLE_ENVELOPE:
		if (f->idx == 0)
			return SLOT_TYPE;
		if (p->notification)
			return f->idx == 1 ? SLOT_METHOD : SLOT_PARAMS;
		return f->idx == 1 ? SLOT_MSGID : f->idx == 2 ? SLOT_METHOD : SLOT_PARAMS;
	case ROLE_PARAMS:
		return p->skipping ? SLOT_SKIP : SLOT_PARAM;
	case ROLE_MAP:
		if (p->skipping)
			return SLOT_SKIP;
		return f->idx % 2 == 0 ? SLOT_KEY : SLOT_VALUE;
	case ROLE_DATA:
		return p->skipping ? SLOT_SKIP : SLOT_ELEM;
	default:
		return SLOT_SKIP;
	}
}

void req_skip_value(gr_req_parser *p, const gr_mp_token *t)
{
	switch (t->type) {
	case GR_MP_ARRAY:
		req_push(p, ROLE_SKIP, t->len);
		break;
	case GR_MP_MAP:
		req_push(p, ROLE_SKIP, 2 * (uint64_t)t->len);
		break;
	case GR_MP_STR:
	case GR_MP_BIN:
		req_body(p, ST_SKIP, t->len);
		break;
	default:
		req_value_done(p);
		break;
	}
}

static void req_end(gr_req_parser *p)
{
	if (!p->skipping)
		p->ev = GR_REQ_DONE;
	p->notification = false;
	p->skipping = false;
	p->silent = false;
	p->state = ST_TOKEN;
}

/* ST_NEXT: close the containers the last value completed. */
static void req_step_next(gr_req_parser *p)
{
	while (p->depth > 0) {
		req_frame *f = &p->stack[p->depth - 1];

		if (f->idx < f->n) {
			if (f->role == ROLE_DATA && !p->skipping &&
			    p->cap - p->off < gr_dtype_size(p->req.dtype)) {
				p->ev = GR_REQ_DEST_FULL;
				return;
			}
			p->state = ST_TOKEN;
			return;
		}
		p->depth--;
		if (f->role == ROLE_MAP && !p->skipping)
			req_map_end(p);
		if (p->depth == 0) {
			req_end(p);
			return;
		}
		p->stack[p->depth - 1].idx++;
	}
	p->state = ST_TOKEN;
}

static void req_on_elem(gr_req_parser *p, const gr_mp_token *t)
{
	uint64_t idx = p->stack[p->depth - 1].idx;
	const char *why;

	why = params_convert(p->req.dtype, t, p->elem);
	if (why) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "'data' element %" PRIu64 " %s (dtype %s)",
			 idx, why, gr_dtype_name(p->req.dtype));
		req_skip_value(p, t);
		return;
	}
	p->state = ST_ELEM;
}

/* ST_ELEM: write the converted element once there is room for it. */
static void req_step_elem(gr_req_parser *p)
{
	size_t sz = gr_dtype_size(p->req.dtype);

	if (p->cap - p->off < sz) {
		p->ev = GR_REQ_DEST_FULL;
		return;
	}
	memcpy(p->dst + p->off, p->elem, sz);
	p->off += sz;
	p->req.data_done += sz;
	req_value_done(p);
}

static void req_on_params(gr_req_parser *p, const gr_mp_token *t)
{
	char q[REQ_METHOD_MAX + 1];
	const char *name = gr_method_name(p->req.method);

	if (t->type != GR_MP_ARRAY) {
		req_fatal(p, "params must be an array");
		return;
	}
	if (p->notification) {
		req_push(p, ROLE_SKIP, t->len);
		return;
	}
	if (p->method_unknown) {
		/* A long name failed the request already. */
		if (p->method_len <= REQ_METHOD_MAX)
			req_fail(p, GR_ERR_UNKNOWN_METHOD, "unknown method '%s'",
				 printable(p->method_word, p->method_len, q));
	} else if (params_method_keys(p->req.method)) {
		if (t->len != 1)
			req_fail(p, GR_ERR_INVALID_PARAMS,
				 "%s takes exactly one parameter, a map with keys %s", name,
				 params_method_key_list(p->req.method));
	} else if (t->len != 0) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' takes no parameters", name);
	}
	req_push(p, p->skipping ? ROLE_SKIP : ROLE_PARAMS, t->len);
}

static void req_on_token(gr_req_parser *p, const gr_mp_token *t)
{
	switch (req_cur_slot(p)) {
	case SLOT_TOP:
		if (t->type != GR_MP_ARRAY || (t->len != 3 && t->len != 4)) {
			req_fatal(p, "a message must be an array: [0, msgid, method, params] or [2, method, params]");
			return;
		}
		req_push(p, ROLE_ENVELOPE, t->len);
		return;

	case SLOT_TYPE:
		if (t->type == GR_MP_UINT && t->u.u == 1) {
			req_fatal(p, "responses (type 1) are not accepted");
		} else if (t->type != GR_MP_UINT || (t->u.u != 0 && t->u.u != 2)) {
			req_fatal(p, "message type must be 0 (request) or 2 (notification)");
		} else if (t->u.u == 0 && p->stack[0].n != 4) {
			req_fatal(p, "a request must have 4 elements: [0, msgid, method, params]");
		} else if (t->u.u == 2 && p->stack[0].n != 3) {
			req_fatal(p, "a notification must have 3 elements: [2, method, params]");
		} else {
			if (t->u.u == 2)
				p->notification = p->skipping = p->silent = true;
			req_value_done(p);
		}
		return;

	case SLOT_MSGID:
		if (t->type != GR_MP_UINT || t->u.u > UINT32_MAX) {
			req_fatal(p, "msgid must be an integer from 0 to 4294967295");
			return;
		}
		p->req.msgid = (uint32_t)t->u.u;
		p->req.has_msgid = true;
		req_value_done(p);
		return;

	case SLOT_METHOD:
		/* A bin name means what the same bytes in a str do: common
		 * msgpack-RPC clients (Neovim's Python session among them)
		 * send method names given as bytes as bin. */
		if (t->type != GR_MP_STR && t->type != GR_MP_BIN) {
			req_fatal(p, "method must be a string (str or bin)");
			return;
		}
		if (p->notification) {
			req_body(p, ST_SKIP, t->len);
		} else if (t->len <= REQ_METHOD_MAX) {
			req_keep(p, SLOT_METHOD, t->len);
		} else {
			/* Unknown for sure: not worth a byte of memory, and
			 * answered now, not after gigabytes of name. */
			p->method_unknown = true;
			p->method_len = t->len;
			req_fail(p, GR_ERR_UNKNOWN_METHOD,
				 "unknown method (a name of %" PRIu32 " bytes)", t->len);
			req_body(p, ST_SKIP, t->len);
		}
		return;

	case SLOT_PARAMS:
		req_on_params(p, t);
		return;

	case SLOT_PARAM:
		if (t->type != GR_MP_MAP) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "%s's parameter must be a map with keys %s",
				 gr_method_name(p->req.method), params_method_key_list(p->req.method));
			req_skip_value(p, t);
			return;
		}
		req_push(p, ROLE_MAP, 2 * (uint64_t)t->len);
		return;

	case SLOT_KEY:
		if (t->type != GR_MP_STR) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "map keys must be strings (%s)",
				 params_method_key_list(p->req.method));
			req_skip_value(p, t);
		} else if (t->len > REQ_WORD_MAX) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "unknown key (a string of %" PRIu32 " bytes)", t->len);
			req_body(p, ST_SKIP, t->len);
		} else {
			req_keep(p, SLOT_KEY, t->len);
		}
		return;

	case SLOT_VALUE:
		req_on_value(p, t);
		return;

	case SLOT_ELEM:
		req_on_elem(p, t);
		return;

	case SLOT_SKIP:
		req_skip_value(p, t);
		return;
	}
}

/* A kept word w[0..n) is complete: what it means depends on its slot. */
static void req_on_word(gr_req_parser *p, req_slot slot, const char *w, size_t n)
{
	char q[REQ_METHOD_MAX + 1];
	gr_req *r = &p->req;

	switch (slot) {
	case SLOT_METHOD:
		r->method = params_match_method(w, n);
		if (r->method == GR_METHOD_NONE) {
			p->method_unknown = true;
			p->method_len = (uint32_t)n;
			memcpy(p->method_word, w, n);
		}
		break;

	case SLOT_KEY: {
		req_key k = params_match_key(w, n);

		if (k == KEY_NONE || !(params_method_keys(r->method) & KEYBIT(k)))
			req_fail(p, GR_ERR_INVALID_PARAMS, "unknown key '%s' (%s's keys are %s)",
				 printable(w, n, q), gr_method_name(r->method),
				 params_method_key_list(r->method));
		else if (p->keys_seen & KEYBIT(k))
			req_fail(p, GR_ERR_INVALID_PARAMS, "duplicate key '%s'", params_key_name(k));
		p->keys_seen |= KEYBIT(k);
		p->key = k;
		break;
	}

	case SLOT_VALUE:
		if (p->key == KEY_DEVICE) {
			memcpy(r->device, w, n);
			r->device[n] = '\0';
			r->device_len = (uint32_t)n;
			r->has_device = true;
		} else if (p->key == KEY_HANDLE) {
			memcpy(r->handle, w, n);
			r->has_handle = true;
		} else if (p->key == KEY_KIND) {
			if (params_match_kind(w, n, &r->kind))
				r->has_kind = true;
			else
				req_fail(p, GR_ERR_INVALID_PARAMS,
					 "unknown kind '%s' (kinds are host, cuda, cuda_ipc)",
					 printable(w, n, q));
		} else if (p->key == KEY_OP) {
			if (params_match_op(w, n, &r->op, &r->scan)) {
				r->has_op = true;
				req_check_scan(p);
			} else {
				req_fail(p, GR_ERR_INVALID_PARAMS,
					 "unknown op '%s' (ops are sum, min, max, sumsq, argmin, argmax, "
					 "moments, cumsum)",
					 printable(w, n, q));
			}
		} else {
			if (params_match_dtype(w, n, &r->dtype))
				r->has_dtype = true;
			else
				req_fail(p, GR_ERR_INVALID_PARAMS,
					 "unknown dtype '%s' (dtypes are i32, i64, u32, u64, f32, f64, "
					 "f16, bf16, f8e4m3, f8e5m2, i8, u8, i16, u16)",
					 printable(w, n, q));
		}
		break;

	default:
		break;
	}
	req_value_done(p);
}

/*
 * After a header, the body of a short word (or one to skip) may be whole in
 * buf[0..len): take it in the same step. Returns the bytes taken.
 */
static size_t req_take_body(gr_req_parser *p, const uint8_t *buf, size_t len)
{
	size_t n;

	if (p->ev != GR_REQ_NEED_MORE || p->body_left > len)
		return 0;
	n = (size_t)p->body_left;
	if (p->state == ST_KEEP) {
		p->body_left = 0;
		req_on_word(p, p->word_slot, (const char *)buf, n);
		return n;
	}
	if (p->state == ST_SKIP) {
		p->body_left = 0;
		req_value_done(p);
		return n;
	}
	return 0;
}

/* ST_TOKEN: decode one header from buf (and bytes kept from earlier feeds). */
static size_t req_step_token(gr_req_parser *p, const uint8_t *buf, size_t len)
{
	gr_mp_token t;
	size_t used;
	int r;

	if (p->depth == 0 && p->hdr_len == 0)
		req_begin(p);

	if (p->hdr_len == 0) {
		r = gr_mp_next_inline(buf, len, &t);
		if (r == 0) {
			/* An incomplete header is shorter than the longest one (9). */
			memcpy(p->hdr, buf, len);
			p->hdr_len = (unsigned)len;
			return len;
		}
		used = r > 0 ? (size_t)r : 0;
	} else {
		size_t n = len < sizeof(p->hdr) - p->hdr_len ? len : sizeof(p->hdr) - p->hdr_len;
		unsigned had = p->hdr_len;

		memcpy(p->hdr + had, buf, n);
		r = gr_mp_next(p->hdr, had + n, &t);
		if (r == 0) {
			p->hdr_len = had + (unsigned)n;
			return n;
		}
		p->hdr_len = 0;
		used = r > 0 ? (size_t)r - had : 0;
	}

	if (r < 0) {
		req_fatal(p, "malformed msgpack (reserved byte 0xc1)");
		return used;
	}
	if (t.type == GR_MP_EXT) {
		req_fatal(p, "msgpack ext types are not accepted");
		return used;
	}
	if ((t.type == GR_MP_ARRAY || t.type == GR_MP_MAP) && p->depth >= REQ_MAX_DEPTH) {
		req_fatal(p, "nesting too deep (containers at most %u levels deep)", REQ_MAX_DEPTH);
		return used;
	}
	req_on_token(p, &t);
	if (t.type == GR_MP_STR || t.type == GR_MP_BIN)
		used += req_take_body(p, buf + used, len - used);
	return used;
}

static size_t min3(uint64_t a, size_t b, size_t c)
{
	size_t m = b < c ? b : c;

	return a < m ? (size_t)a : m;
}

size_t gr_req_parser_feed(gr_req_parser *p, const uint8_t *buf, size_t len, gr_req_event *ret_ev)
{
	size_t used = 0, n;

	for (;;) {
		if (p->ev != GR_REQ_NEED_MORE) {
			*ret_ev = p->ev;
			if (p->state != ST_FATAL)
				p->ev = GR_REQ_NEED_MORE;
			return used;
		}

		/* A state that reads bytes wants more once buf is used up. */
		switch (p->state) {
		case ST_TOKEN:
			if (used == len)
				goto need_more;
			used += req_step_token(p, buf + used, len - used);
			break;
		case ST_NEXT:
			req_step_next(p);
			break;
		case ST_ELEM:
			req_step_elem(p);
			break;
		case ST_KEEP:
			if (p->body_left > 0 && used == len)
				goto need_more;
			n = min3(p->body_left, len - used, SIZE_MAX);
			memcpy(p->word + p->word_len, buf + used, n);
			p->word_len += (uint32_t)n;
			p->body_left -= n;
			used += n;
			if (p->body_left == 0)
				req_on_word(p, p->word_slot, p->word, p->word_len);
			break;
		case ST_SKIP:
			if (p->body_left > 0 && used == len)
				goto need_more;
			n = min3(p->body_left, len - used, SIZE_MAX);
			p->body_left -= n;
			used += n;
			if (p->body_left == 0)
				req_value_done(p);
			break;
		case ST_OFFSETS:
			if (p->body_left > 0 && used == len)
				goto need_more;
			n = gr_offsets_feed(&p->offs, buf + used, len - used);
			if (n == 0) {
				/* no memory to grow it: the rest is skipped */
				gr_offsets_clear(&p->offs);
				req_fail(p, GR_ERR_INTERNAL, "out of memory for 'offsets'");
				p->state = ST_SKIP;
				break;
			}
			p->body_left -= n;
			used += n;
			if (p->body_left == 0)
				req_offsets_done(p);
			break;
		case ST_PAYLOAD:
			if (p->body_left > 0 && p->cap > p->off && used == len)
				goto need_more;
			if (p->body_left == 0) {
				req_value_done(p);
				break;
			}
			if (p->cap == p->off) {
				p->ev = GR_REQ_DEST_FULL;
				break;
			}
			n = min3(p->body_left, len - used, p->cap - p->off);
			memcpy(p->dst + p->off, buf + used, n);
			p->off += n;
			p->req.data_done += n;
			p->body_left -= n;
			used += n;
			if (p->body_left == 0)
				req_value_done(p);
			else if (p->cap == p->off)
				p->ev = GR_REQ_DEST_FULL;
			break;
		case ST_FATAL:
			p->ev = GR_REQ_FATAL;
			break;
		}
	}
need_more:
	*ret_ev = GR_REQ_NEED_MORE;
	return used;
}

int gr_req_parser_new(const gr_req_limits *lim, gr_req_parser **ret)
{
	gr_req_parser *p;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->lim.max_data_bytes = lim && lim->max_data_bytes ? lim->max_data_bytes
							   : GR_REQ_DEFAULT_MAX_DATA_BYTES;
	p->lim.max_segments = lim && lim->max_segments ? lim->max_segments
						       : GR_OFFSETS_DEFAULT_MAX_SEGMENTS;
	p->state = ST_TOKEN;
	p->ev = GR_REQ_NEED_MORE;
	req_begin(p);
	*ret = p;
	return 0;
}

gr_req_parser *gr_req_parser_free(gr_req_parser *p)
{
	if (p)
		gr_offsets_clear(&p->offs);
	free(p);
	return NULL;
}

uint64_t gr_req_parser_held(const gr_req_parser *p)
{
	return p->offs.cap;
}

uint64_t *gr_req_parser_take_offsets(gr_req_parser *p)
{
	if (!p->req.has_offsets)
		return NULL;
	p->req.offsets = NULL;
	return gr_offsets_take(&p->offs);
}

const gr_req *gr_req_parser_req(const gr_req_parser *p)
{
	return &p->req;
}

void gr_req_parser_set_dest(gr_req_parser *p, void *dst, size_t cap)
{
	p->dst = dst;
	p->cap = dst ? cap : 0;
	p->off = 0;
}

void gr_req_parser_reject(gr_req_parser *p, gr_err err, const char *fmt, ...)
{
	va_list ap;

	/* Nothing to reject between requests, after an error, or in a notification. */
	if (p->state == ST_FATAL || p->depth == 0 || p->skipping)
		return;
	p->skipping = true;
	p->silent = true;
	va_start(ap, fmt);
	req_vset(p, err, fmt, ap);
	va_end(ap);
	if (p->state == ST_OFFSETS)
		gr_offsets_clear(&p->offs); /* what it held goes now, not at the end */
	if (p->state == ST_PAYLOAD || p->state == ST_OFFSETS)
		p->state = ST_SKIP;
	else if (p->state == ST_ELEM)
		req_value_done(p);
}

size_t gr_req_parser_window(gr_req_parser *p, void **ret_ptr)
{
	size_t n;

	if (p->state != ST_PAYLOAD || p->ev != GR_REQ_NEED_MORE || p->body_left == 0 || p->cap == p->off) {
		*ret_ptr = NULL;
		return 0;
	}
	n = min3(p->body_left, p->cap - p->off, SIZE_MAX);
	*ret_ptr = p->dst + p->off;
	return n;
}

gr_req_event gr_req_parser_commit(gr_req_parser *p, size_t k)
{
	gr_req_event ev;
	void *ptr;

	/* Never account for more than window() offered. */
	if (k > gr_req_parser_window(p, &ptr))
		k = gr_req_parser_window(p, &ptr);
	if (k > 0) {
		p->off += k;
		p->req.data_done += k;
		p->body_left -= k;
		if (p->body_left == 0)
			req_value_done(p);
		else if (p->cap == p->off)
			p->ev = GR_REQ_DEST_FULL;
	}
	gr_req_parser_feed(p, NULL, 0, &ev);
	return ev;
}

uint64_t gr_req_parser_skip_remaining(const gr_req_parser *p)
{
	return p->state == ST_SKIP ? p->body_left : 0;
}

bool gr_req_parser_idle(const gr_req_parser *p)
{
	return p->state == ST_TOKEN && p->depth == 0 && p->hdr_len == 0;
}
