/*
 * Requests that the caller waits for at once (call.c): ping, stats and
 * info, which take no parameters, and the requests whose whole reply the
 * caller reads once it has it (map, unmap).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "client/conn.h"

/* The whole reply message kept in e->u.reply, read once collected. */
extern const client_kind client_kind_reply;

/* Send the request in g->wbuf for entry e, with fd in SCM_RIGHTS when
 * fd >= 0, and wait for its reply: e done, or NULL and *ret_err. */
pending *client_call_send(gpured_t *g, pending *e, int fd, int *ret_err);

/* Send a request without parameters (stats, info) and parse its reply
 * into *tree: *ret_result is its result, *ret_bytes the bytes the tree
 * points into (the caller frees both). */
int client_call_result(gpured_t *g, gr_method m, uint8_t **ret_bytes, gr_obj_tree *tree,
		       const gr_obj **ret_result);
