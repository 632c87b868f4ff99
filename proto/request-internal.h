/*
 * The request parser's insides, shared by its files: request.c (the
 * envelope, the state machine, the payload) and request-params.c (what
 * the values of a params map must be, and what the keys must add up to).
 * Nothing here is part of the proto library's interface.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mp.h"
#include "offsets.h"
#include "params.h"
#include "request.h"

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
	ST_OFFSETS, /* collecting the offsets bin (offsets.h) */
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
	gr_offsets offs; /* the current request's offsets */
};

/*
 * Where req_step_next() would go from f: straight to ST_TOKEN when f wants
 * another child and nothing can stop it there; ST_NEXT otherwise. The
 * shortcut is the same whether or not an event is pending, since nothing
 * the caller may do in between (set_dest, reject) changes what a frame
 * other than a live ROLE_DATA one leads to.
 */
static inline req_state req_after(const gr_req_parser *p, const req_frame *f)
{
	if (f->idx < f->n && (f->role != ROLE_DATA || p->skipping))
		return ST_TOKEN;
	return ST_NEXT;
}

static inline void req_value_done(gr_req_parser *p)
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
static inline void req_push(gr_req_parser *p, req_role role, uint64_t n)
{
	req_frame *f = &p->stack[p->depth++];

	*f = (req_frame){ .role = role, .idx = 0, .n = n };
	p->state = req_after(p, f);
}

static inline void req_body(gr_req_parser *p, req_state st, uint64_t len)
{
	p->state = st;
	p->body_left = len;
	p->word_len = 0;
}

/* A short str body to read as a word that goes to slot. */
static inline void req_keep(gr_req_parser *p, req_slot slot, uint64_t len)
{
	req_body(p, ST_KEEP, len);
	p->word_slot = slot;
}

/* Fail the current request: one ERROR event unless it is silent, then skip. */
__attribute__((format(printf, 3, 4)))
void req_fail(gr_req_parser *p, gr_err err, const char *fmt, ...);
/* Read past the value whose header is t. */
void req_skip_value(gr_req_parser *p, const gr_mp_token *t);

/* request-params.c: a value of the params map, its key in p->key; */
void req_on_value(gr_req_parser *p, const gr_mp_token *t);
/* the offsets bin has all come in (ST_OFFSETS ends); */
void req_offsets_done(gr_req_parser *p);
/* the params map ended: check what its keys add up to. */
void req_map_end(gr_req_parser *p);
/* cumsum's keys, as soon as what they rule out is known (request-params.c) */
void req_check_scan(gr_req_parser *p);
