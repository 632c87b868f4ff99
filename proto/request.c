#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "request.h"

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
 * and a short str whose body is already in the buffer is matched where it
 * lies. Each shortcut ends where the step-by-step path would, and a body
 * is only taken early when no event waits to be returned before it, so
 * the events and their byte offsets are the same.
 */

/* The envelope needs array -> array -> map -> array, and nothing deeper. */
#define REQ_MAX_DEPTH 4u
/* Method names up to this long are looked up; longer ones are unknown. */
#define REQ_METHOD_MAX 32u
/* Keys and op/dtype/kind values up to this long are looked up. */
#define REQ_WORD_MAX 16u
/* The longest body kept whole: map's device name and handle. */
#define REQ_KEEP_MAX 64u

typedef enum req_role {
	ROLE_ENVELOPE, /* [0, msgid, method, params] or [2, method, params] */
	ROLE_PARAMS,   /* params of a method we accept */
	ROLE_MAP,      /* the params map: keys at even indexes, values at odd */
	ROLE_DATA,     /* reduce's data as an array of numbers */
	ROLE_SKIP,     /* anything read only to get past it */
} req_role;

typedef enum req_state {
	ST_TOKEN,   /* reading a msgpack header */
	ST_NEXT,    /* a value was accounted: close containers it completed (no bytes) */
	ST_KEEP,    /* reading a short str or bin body into word[] (split across feeds) */
	ST_SKIP,    /* discarding a str/bin body */
	ST_PAYLOAD, /* copying a bin payload into the destination */
	ST_ELEM,    /* a converted array element waits for room (no bytes) */
	ST_FATAL,
} req_state;

typedef enum req_slot {
	SLOT_TOP,
	SLOT_TYPE,
	SLOT_MSGID,
	SLOT_METHOD,
	SLOT_PARAMS,
	SLOT_PARAM,
	SLOT_KEY,
	SLOT_VALUE,
	SLOT_ELEM,
	SLOT_SKIP,
} req_slot;

typedef enum req_key {
	KEY_NONE,
	KEY_OP,
	KEY_DTYPE,
	KEY_DATA,
	KEY_REGION,
	KEY_OFFSET,
	KEY_COUNT,
	KEY_BYTES,
	KEY_KIND,
	KEY_DEVICE,
	KEY_HANDLE,
	KEY_PARTIAL,
	KEY_N,
} req_key;

static const char *const key_names[KEY_N] = {
	[KEY_OP] = "op",         [KEY_DTYPE] = "dtype",   [KEY_DATA] = "data",
	[KEY_REGION] = "region", [KEY_OFFSET] = "offset", [KEY_COUNT] = "count",
	[KEY_BYTES] = "bytes",   [KEY_KIND] = "kind",     [KEY_DEVICE] = "device",
	[KEY_HANDLE] = "handle", [KEY_PARTIAL] = "partial",
};

#define KEYBIT(k) (1u << (k))
/* The keys each method's map takes, and how its messages list them. */
#define REDUCE_KEYS                                                                                \
	(KEYBIT(KEY_OP) | KEYBIT(KEY_DTYPE) | KEYBIT(KEY_DATA) | KEYBIT(KEY_REGION) |               \
	 KEYBIT(KEY_OFFSET) | KEYBIT(KEY_COUNT) | KEYBIT(KEY_PARTIAL))
#define MAP_KEYS (KEYBIT(KEY_BYTES) | KEYBIT(KEY_KIND) | KEYBIT(KEY_DEVICE) | KEYBIT(KEY_HANDLE))
#define UNMAP_KEYS KEYBIT(KEY_REGION)

typedef struct req_frame {
	req_role role;
	uint64_t idx; /* children read */
	uint64_t n;   /* children announced (a map's keys and values) */
} req_frame;

struct gr_req_parser {
	gr_req_limits lim;
	gr_req req;
	req_state state;
	gr_req_event ev; /* pending event; NEED_MORE when none */

	req_frame stack[REQ_MAX_DEPTH];
	unsigned depth;
	uint8_t hdr[9]; /* a header split across feeds */
	unsigned hdr_len;
	uint64_t body_left; /* ST_KEEP, ST_SKIP, ST_PAYLOAD */
	char word[REQ_KEEP_MAX];
	uint32_t word_len;
	req_slot word_slot; /* where the word being kept goes */

	bool notification;
	bool skipping; /* the rest of this message is read and ignored */
	bool silent;   /* this message produces no event: notification or rejected */
	bool method_unknown;
	uint32_t method_len;
	char method_word[REQ_METHOD_MAX];
	req_key key;
	unsigned keys_seen; /* KEYBITs of the params map's keys so far */

	uint8_t *dst;
	size_t cap, off;
	uint8_t elem[8];
};

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
static void req_fail(gr_req_parser *p, gr_err err, const char *fmt, ...)
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

/*
 * Where req_step_next() would go from f: straight to ST_TOKEN when f wants
 * another child and nothing can stop it there; ST_NEXT otherwise. The
 * shortcut is the same whether or not an event is pending, since nothing
 * the caller may do in between (set_dest, reject) changes what a frame
 * other than a live ROLE_DATA one leads to.
 */
static req_state req_after(const gr_req_parser *p, const req_frame *f)
{
	if (f->idx < f->n && (f->role != ROLE_DATA || p->skipping))
		return ST_TOKEN;
	return ST_NEXT;
}

static void req_value_done(gr_req_parser *p)
{
	if (p->depth > 0) {
		req_frame *f = &p->stack[p->depth - 1];

		f->idx++;
		p->state = req_after(p, f);
		return;
	}
	p->state = ST_NEXT;
}

/* The depth was checked when the header was read. */
static void req_push(gr_req_parser *p, req_role role, uint64_t n)
{
	req_frame *f = &p->stack[p->depth++];

	*f = (req_frame){ .role = role, .idx = 0, .n = n };
	p->state = req_after(p, f);
}

static void req_body(gr_req_parser *p, req_state st, uint64_t len)
{
	p->state = st;
	p->body_left = len;
	p->word_len = 0;
}

/* A short str body to read as a word that goes to slot. */
static void req_keep(gr_req_parser *p, req_slot slot, uint64_t len)
{
	req_body(p, ST_KEEP, len);
	p->word_slot = slot;
}

static void req_skip_value(gr_req_parser *p, const gr_mp_token *t)
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

static const char *key_name(req_key k)
{
	return (unsigned)k < KEY_N && key_names[k] ? key_names[k] : "?";
}

static unsigned method_keys(gr_method m)
{
	return m == GR_METHOD_REDUCE ? REDUCE_KEYS : m == GR_METHOD_MAP ? MAP_KEYS
		: m == GR_METHOD_UNMAP ? UNMAP_KEYS : 0;
}

/* "op, dtype, data, ..." for a method's messages. */
static const char *method_key_list(gr_method m)
{
	switch (m) {
	case GR_METHOD_REDUCE:
		return "op, dtype, and data or region, offset, count; partial";
	case GR_METHOD_MAP:
		return "bytes, kind, device, handle";
	case GR_METHOD_UNMAP:
		return "region";
	default:
		return "none";
	}
}

static void req_map_end_map(gr_req_parser *p)
{
	const gr_req *r = &p->req;

	if (!r->has_bytes)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'bytes'");
	else if (r->bytes == 0)
		req_fail(p, GR_ERR_INVALID_PARAMS, "'bytes' must be at least 1");
	else if (r->kind == GR_MAP_HOST && (r->has_device || r->has_handle))
		req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' is only for kind cuda or cuda_ipc",
			 r->has_device ? "device" : "handle");
	else if (r->kind != GR_MAP_HOST && !r->has_device)
		req_fail(p, GR_ERR_INVALID_PARAMS, "kind %s needs 'device' (a GPU's UUID or PCI bus id)",
			 gr_map_kind_name(r->kind));
	else if (r->kind == GR_MAP_CUDA_IPC && !r->has_handle)
		req_fail(p, GR_ERR_INVALID_PARAMS, "kind cuda_ipc needs 'handle' (%u bytes)",
			 GR_REQ_HANDLE_BYTES);
	else if (r->kind == GR_MAP_CUDA && r->has_handle)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "kind cuda takes its handle as a file descriptor, not 'handle'");
}

static void req_map_end(gr_req_parser *p)
{
	const gr_req *r = &p->req;

	if (r->method == GR_METHOD_MAP) {
		req_map_end_map(p);
		return;
	}
	if (r->method == GR_METHOD_UNMAP) {
		if (!r->has_region)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'region'");
		return;
	}
	if (r->has_region || r->has_offset || r->has_count) {
		if (!r->has_op)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'op'");
		else if (!r->has_dtype)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'dtype'");
		else if (r->has_data)
			req_fail(p, GR_ERR_INVALID_PARAMS, "'data' and 'region' exclude each other");
		else if (!r->has_region)
			req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' needs 'region'",
				 r->has_offset ? "offset" : "count");
		else if (!r->has_count)
			req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'count' (elements to reduce)");
		return;
	}
	if (!r->has_op)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'op'");
	else if (!r->has_dtype)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'dtype'");
	else if (!r->has_data)
		req_fail(p, GR_ERR_INVALID_PARAMS, "missing key 'data'");
	else if (!r->data_is_array && r->data_bytes % gr_dtype_size(r->dtype) != 0)
		req_fail(p, GR_ERR_INVALID_PARAMS,
			 "'data' is %" PRIu64 " bytes, not a multiple of the %s element size (%zu bytes)",
			 r->data_bytes, gr_dtype_name(r->dtype), gr_dtype_size(r->dtype));
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

/* Store an array element as dtype dt in out; NULL or why it cannot be. */
static const char *req_convert(gr_dtype dt, const gr_mp_token *t, uint8_t out[8])
{
	if (t->type != GR_MP_UINT && t->type != GR_MP_INT && t->type != GR_MP_FLOAT)
		return "is not a number";
	if (t->type == GR_MP_FLOAT && !gr_dtype_is_float(dt))
		return "is a float, not an integer";

	switch (dt) {
	case GR_DT_I32: {
		int32_t v;

		if (t->type == GR_MP_UINT ? t->u.u > INT32_MAX : t->u.i < INT32_MIN)
			return "is out of range";
		v = t->type == GR_MP_UINT ? (int32_t)t->u.u : (int32_t)t->u.i;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_I64: {
		int64_t v;

		if (t->type == GR_MP_UINT && t->u.u > INT64_MAX)
			return "is out of range";
		v = t->type == GR_MP_UINT ? (int64_t)t->u.u : t->u.i;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_U32: {
		uint32_t v;

		if (t->type == GR_MP_INT || t->u.u > UINT32_MAX)
			return "is out of range";
		v = (uint32_t)t->u.u;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_U64:
		if (t->type == GR_MP_INT)
			return "is out of range";
		memcpy(out, &t->u.u, 8);
		return NULL;
	case GR_DT_F32: {
		float v;

		if (t->type == GR_MP_UINT)
			v = (float)t->u.u;
		else if (t->type == GR_MP_INT)
			v = (float)t->u.i;
		else if (t->is_f32 || isnan(t->u.f) || isinf(t->u.f) || fabs(t->u.f) <= FLT_MAX)
			v = (float)t->u.f;
		else
			return "is out of range";
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	case GR_DT_F64: {
		double v;

		if (t->type == GR_MP_UINT)
			v = (double)t->u.u;
		else if (t->type == GR_MP_INT)
			v = (double)t->u.i;
		else
			v = t->u.f;
		memcpy(out, &v, sizeof(v));
		return NULL;
	}
	default:
		return "has no dtype";
	}
}

static void req_on_elem(gr_req_parser *p, const gr_mp_token *t)
{
	uint64_t idx = p->stack[p->depth - 1].idx;
	const char *why;

	why = req_convert(p->req.dtype, t, p->elem);
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

static void req_on_data(gr_req_parser *p, const gr_mp_token *t)
{
	gr_req *r = &p->req;
	size_t sz = gr_dtype_size(r->dtype);

	r->has_data = true;
	if (t->type == GR_MP_BIN) {
		r->data_bytes = t->len;
		if (r->has_dtype && t->len % sz != 0) {
			req_fail(p, GR_ERR_INVALID_PARAMS,
				 "'data' is %" PRIu32 " bytes, not a multiple of the %s element size (%zu bytes)",
				 t->len, gr_dtype_name(r->dtype), sz);
		} else if (t->len > p->lim.max_data_bytes) {
			req_fail(p, GR_ERR_TOO_LARGE, "'data' is %" PRIu32 " bytes, over the limit of %" PRIu64,
				 t->len, p->lim.max_data_bytes);
		} else {
			p->ev = GR_REQ_DATA;
			req_body(p, ST_PAYLOAD, t->len);
			return;
		}
		req_body(p, ST_SKIP, t->len);
		return;
	}
	if (t->type == GR_MP_ARRAY) {
		r->data_is_array = true;
		if (!r->has_dtype) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'dtype' must come before an array 'data'");
		} else {
			r->data_bytes = (uint64_t)t->len * sz;
			if (r->data_bytes > p->lim.max_data_bytes) {
				req_fail(p, GR_ERR_TOO_LARGE,
					 "'data' is %" PRIu32 " elements (%" PRIu64 " bytes), over the limit of %" PRIu64 " bytes",
					 t->len, r->data_bytes, p->lim.max_data_bytes);
			} else {
				p->ev = GR_REQ_DATA;
				req_push(p, ROLE_DATA, t->len);
				return;
			}
		}
		req_push(p, ROLE_SKIP, t->len);
		return;
	}
	req_fail(p, GR_ERR_INVALID_PARAMS, "'data' must be a bin of packed elements or an array of numbers");
	req_skip_value(p, t);
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
	} else if (method_keys(p->req.method)) {
		if (t->len != 1)
			req_fail(p, GR_ERR_INVALID_PARAMS,
				 "%s takes exactly one parameter, a map with keys %s", name,
				 method_key_list(p->req.method));
	} else if (t->len != 0) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' takes no parameters", name);
	}
	req_push(p, p->skipping ? ROLE_SKIP : ROLE_PARAMS, t->len);
}

static void req_on_value(gr_req_parser *p, const gr_mp_token *t);

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
		if (t->type != GR_MP_STR) {
			req_fatal(p, "method must be a string");
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
				 gr_method_name(p->req.method), method_key_list(p->req.method));
			req_skip_value(p, t);
			return;
		}
		req_push(p, ROLE_MAP, 2 * (uint64_t)t->len);
		return;

	case SLOT_KEY:
		if (t->type != GR_MP_STR) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "map keys must be strings (%s)",
				 method_key_list(p->req.method));
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

/* An unsigned integer value (region, offset, count, bytes). */
static void req_on_uint(gr_req_parser *p, const gr_mp_token *t)
{
	gr_req *r = &p->req;

	if (t->type != GR_MP_UINT) {
		req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' must be an unsigned integer",
			 key_name(p->key));
		req_skip_value(p, t);
		return;
	}
	switch (p->key) {
	case KEY_REGION:
		r->region = t->u.u;
		r->has_region = true;
		break;
	case KEY_OFFSET:
		r->offset = t->u.u;
		r->has_offset = true;
		break;
	case KEY_COUNT:
		r->count = t->u.u;
		r->has_count = true;
		break;
	default:
		r->bytes = t->u.u;
		r->has_bytes = true;
		break;
	}
	req_value_done(p);
}

static void req_on_value(gr_req_parser *p, const gr_mp_token *t)
{
	switch (p->key) {
	case KEY_DATA:
		req_on_data(p, t);
		return;
	case KEY_REGION:
	case KEY_OFFSET:
	case KEY_COUNT:
	case KEY_BYTES:
		req_on_uint(p, t);
		return;
	case KEY_PARTIAL:
		if (t->type != GR_MP_BOOL) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'partial' must be true or false");
			req_skip_value(p, t);
		} else {
			p->req.partial = t->u.b;
			req_value_done(p);
		}
		return;
	case KEY_HANDLE:
		if (t->type != GR_MP_BIN || t->len != GR_REQ_HANDLE_BYTES) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'handle' must be a bin of %u bytes",
				 GR_REQ_HANDLE_BYTES);
			req_skip_value(p, t);
		} else {
			req_keep(p, SLOT_VALUE, t->len);
		}
		return;
	case KEY_DEVICE:
		if (t->type != GR_MP_STR) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'device' must be a string");
			req_skip_value(p, t);
		} else if (t->len > GR_REQ_DEVICE_MAX) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'device' is longer than %u bytes",
				 GR_REQ_DEVICE_MAX);
			req_body(p, ST_SKIP, t->len);
		} else {
			req_keep(p, SLOT_VALUE, t->len);
		}
		return;
	default: /* op, dtype, kind: short words */
		if (t->type != GR_MP_STR) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "'%s' must be a string", key_name(p->key));
			req_skip_value(p, t);
		} else if (t->len > REQ_WORD_MAX) {
			req_fail(p, GR_ERR_INVALID_PARAMS, "unknown %s (a string of %" PRIu32 " bytes)",
				 key_name(p->key), t->len);
			req_body(p, ST_SKIP, t->len);
		} else {
			req_keep(p, SLOT_VALUE, t->len);
		}
		return;
	}
}

/*
 * Word lookups by length, then bytes: the wire names of types.c (every
 * one of them is exercised by tests/proto/test-request.c).
 */
static gr_method req_match_method(const char *w, size_t n)
{
	switch (n) {
	case 3:
		if (memcmp(w, "map", 3) == 0)
			return GR_METHOD_MAP;
		break;
	case 4:
		if (memcmp(w, "ping", 4) == 0)
			return GR_METHOD_PING;
		if (memcmp(w, "info", 4) == 0)
			return GR_METHOD_INFO;
		break;
	case 5:
		if (memcmp(w, "stats", 5) == 0)
			return GR_METHOD_STATS;
		if (memcmp(w, "unmap", 5) == 0)
			return GR_METHOD_UNMAP;
		break;
	case 6:
		if (memcmp(w, "reduce", 6) == 0)
			return GR_METHOD_REDUCE;
		break;
	}
	return GR_METHOD_NONE;
}

static req_key req_match_key(const char *w, size_t n)
{
	switch (n) {
	case 2:
		if (memcmp(w, "op", 2) == 0)
			return KEY_OP;
		break;
	case 4:
		if (memcmp(w, "data", 4) == 0)
			return KEY_DATA;
		if (memcmp(w, "kind", 4) == 0)
			return KEY_KIND;
		break;
	case 5:
		if (memcmp(w, "dtype", 5) == 0)
			return KEY_DTYPE;
		if (memcmp(w, "count", 5) == 0)
			return KEY_COUNT;
		if (memcmp(w, "bytes", 5) == 0)
			return KEY_BYTES;
		break;
	case 6:
		if (memcmp(w, "region", 6) == 0)
			return KEY_REGION;
		if (memcmp(w, "offset", 6) == 0)
			return KEY_OFFSET;
		if (memcmp(w, "device", 6) == 0)
			return KEY_DEVICE;
		if (memcmp(w, "handle", 6) == 0)
			return KEY_HANDLE;
		break;
	case 7:
		if (memcmp(w, "partial", 7) == 0)
			return KEY_PARTIAL;
		break;
	}
	return KEY_NONE;
}

static bool req_match_kind(const char *w, size_t n, gr_map_kind *ret)
{
	for (int k = 0; k < GR_MAP_N; k++) {
		const char *name = gr_map_kind_name((gr_map_kind)k);
		if (strlen(name) == n && memcmp(w, name, n) == 0) {
			*ret = (gr_map_kind)k;
			return true;
		}
	}
	return false;
}

static bool req_match_op(const char *w, size_t n, gr_op *ret)
{
	if (n == 3) {
		if (memcmp(w, "sum", 3) == 0)
			*ret = GR_OP_SUM;
		else if (memcmp(w, "min", 3) == 0)
			*ret = GR_OP_MIN;
		else if (memcmp(w, "max", 3) == 0)
			*ret = GR_OP_MAX;
		else
			return false;
		return true;
	}
	if (n == 5 && memcmp(w, "sumsq", 5) == 0) {
		*ret = GR_OP_SUMSQ;
		return true;
	}
	return false;
}

static bool req_match_dtype(const char *w, size_t n, gr_dtype *ret)
{
	bool wide;

	if (n != 3)
		return false;
	if (w[1] == '3' && w[2] == '2')
		wide = false;
	else if (w[1] == '6' && w[2] == '4')
		wide = true;
	else
		return false;
	switch (w[0]) {
	case 'i':
		*ret = wide ? GR_DT_I64 : GR_DT_I32;
		return true;
	case 'u':
		*ret = wide ? GR_DT_U64 : GR_DT_U32;
		return true;
	case 'f':
		*ret = wide ? GR_DT_F64 : GR_DT_F32;
		return true;
	}
	return false;
}

/* A kept word w[0..n) is complete: what it means depends on its slot. */
static void req_on_word(gr_req_parser *p, req_slot slot, const char *w, size_t n)
{
	char q[REQ_METHOD_MAX + 1];
	gr_req *r = &p->req;

	switch (slot) {
	case SLOT_METHOD:
		r->method = req_match_method(w, n);
		if (r->method == GR_METHOD_NONE) {
			p->method_unknown = true;
			p->method_len = (uint32_t)n;
			memcpy(p->method_word, w, n);
		}
		break;

	case SLOT_KEY: {
		req_key k = req_match_key(w, n);

		if (k == KEY_NONE || !(method_keys(r->method) & KEYBIT(k)))
			req_fail(p, GR_ERR_INVALID_PARAMS, "unknown key '%s' (%s's keys are %s)",
				 printable(w, n, q), gr_method_name(r->method),
				 method_key_list(r->method));
		else if (p->keys_seen & KEYBIT(k))
			req_fail(p, GR_ERR_INVALID_PARAMS, "duplicate key '%s'", key_name(k));
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
			if (req_match_kind(w, n, &r->kind))
				r->has_kind = true;
			else
				req_fail(p, GR_ERR_INVALID_PARAMS,
					 "unknown kind '%s' (kinds are host, cuda, cuda_ipc)",
					 printable(w, n, q));
		} else if (p->key == KEY_OP) {
			if (req_match_op(w, n, &r->op))
				r->has_op = true;
			else
				req_fail(p, GR_ERR_INVALID_PARAMS,
					 "unknown op '%s' (ops are sum, min, max, sumsq)", printable(w, n, q));
		} else {
			if (req_match_dtype(w, n, &r->dtype))
				r->has_dtype = true;
			else
				req_fail(p, GR_ERR_INVALID_PARAMS,
					 "unknown dtype '%s' (dtypes are i32, i64, u32, u64, f32, f64)",
					 printable(w, n, q));
		}
		break;

	default:
		break;
	}
	req_value_done(p);
}

static inline uint32_t req_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/*
 * gr_mp_next() with the headers of the common request decoded here,
 * without a call: the one-byte ones (fixint, fixmap, fixarray, fixstr),
 * a msgid past 127 and the data's bin header.
 */
static inline int req_mp_next(const uint8_t *buf, size_t len, gr_mp_token *t)
{
	uint8_t c;

	if (len == 0)
		return 0;
	c = buf[0];
	if (c <= 0x7f) {
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = c };
		return 1;
	}
	if (c <= 0x8f) {
		*t = (gr_mp_token){ .type = GR_MP_MAP, .len = c & 0x0fu };
		return 1;
	}
	if (c <= 0x9f) {
		*t = (gr_mp_token){ .type = GR_MP_ARRAY, .len = c & 0x0fu };
		return 1;
	}
	if (c <= 0xbf) {
		*t = (gr_mp_token){ .type = GR_MP_STR, .len = c & 0x1fu };
		return 1;
	}
	switch (c) {
	case 0xc4: /* bin 8, 16, 32 */
		if (len < 2)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_BIN, .len = buf[1] };
		return 2;
	case 0xc5:
		if (len < 3)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_BIN, .len = (uint32_t)buf[1] << 8 | buf[2] };
		return 3;
	case 0xc6:
		if (len < 5)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_BIN, .len = req_be32(buf + 1) };
		return 5;
	case 0xcc: /* uint 8, 16, 32 */
		if (len < 2)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = buf[1] };
		return 2;
	case 0xcd:
		if (len < 3)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = (uint32_t)buf[1] << 8 | buf[2] };
		return 3;
	case 0xce:
		if (len < 5)
			return 0;
		*t = (gr_mp_token){ .type = GR_MP_UINT, .u.u = req_be32(buf + 1) };
		return 5;
	default:
		return gr_mp_next(buf, len, t);
	}
}

/*
 * After a header, the body of a short str (or one to skip) may be whole in
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
		r = req_mp_next(buf, len, &t);
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
	if (t.type == GR_MP_STR)
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
	p->state = ST_TOKEN;
	p->ev = GR_REQ_NEED_MORE;
	req_begin(p);
	*ret = p;
	return 0;
}

gr_req_parser *gr_req_parser_free(gr_req_parser *p)
{
	free(p);
	return NULL;
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
	if (p->state == ST_PAYLOAD)
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
