/*
 * The scripted server of the client's wire tests (test-client-wire.c,
 * test-client-wire-maps.c): a thread that accepts one connection and runs
 * a scenario against it, with helpers that read whole requests and write
 * replies. Failures abort the test (tests/check.h).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/mp.h"
#include "proto/obj.h"

typedef struct server server;
typedef void (*scenario_fn)(server *s);

struct server {
	char dir[64];
	char path[96];
	int lfd;
	int fd;
	gr_buf in;
	scenario_fn fn;
	pthread_t thread;
};

/* $TMPDIR when a socket path under it fits in a sockaddr_un, else /tmp. */
const char *tmp_base(void);
/* Bytes of the msgpack object at p[0..n), or 0 if it is not all there. */
size_t mp_span(const uint8_t *p, size_t n);
/* Read the next whole request; return its msgid and its method's first
 * letter (r, p, s, i). */
uint32_t srv_next(server *s, char *ret_method);
/* The next whole request, parsed: its params' map in *ret_map (strings
 * point into *bytes, which the caller frees with the tree). */
void srv_next_map(server *s, uint8_t **bytes, gr_obj_tree *tree, const gr_obj **ret_map);
/* The map's keys, in order, joined with spaces. */
void map_keys(const gr_obj *map, char *buf, size_t size);
bool str_is(const gr_obj *o, const char *want);
void srv_write(server *s, const void *p, size_t n);
void srv_write_slowly(server *s, const gr_buf *b);
/* A response's head, up to its result: [1, id, nil, */
void reply_head(gr_buf *b, uint32_t id);
void reply_value_u(gr_buf *b, uint32_t id, uint64_t v, uint64_t count);
void reply_value_i(gr_buf *b, uint32_t id, int64_t v, uint64_t count);
void reply_value_f(gr_buf *b, uint32_t id, double v, uint64_t count);
void reply_error(gr_buf *b, uint32_t id, const char *code, const char *msg);
/* Read a ping and answer it. */
void srv_pong(server *s, gr_buf *out);
/* Listen on a new socket (s->path) and run fn on its first connection, on
 * a thread of its own; server_stop() waits for it and cleans up. */
void server_start(server *s, scenario_fn fn);
void server_stop(server *s);
