/*
 * Requests that the caller waits for at once: ping, whose answer is
 * checked as it arrives, and stats, info, map and unmap, whose whole
 * reply is kept until the caller reads it, whatever arrived in between.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/call.h"
#include "client/conn.h"
#include "proto/message.h"
#include "proto/obj.h"
#include "util/cleanup.h"

static int reply_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len, char *why,
		      size_t size)
{
	(void)result;
	e->u.reply = malloc(len);
	if (!e->u.reply) {
		snprintf(why, size, "out of memory");
		return -ENOMEM;
	}
	memcpy(e->u.reply, msg, len);
	e->u.reply_len = len;
	return 0;
}

static void reply_clear(pending *e)
{
	free(e->u.reply);
}

const client_kind client_kind_reply = {
	.read = reply_read,
	.clear = reply_clear,
};

static bool obj_is_str(const gr_obj *o, const char *s)
{
	size_t n = strlen(s);

	return o && o->type == GR_MP_STR && o->len == n && memcmp(o->v.str, s, n) == 0;
}

static int pong_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len, char *why,
		     size_t size)
{
	(void)e;
	(void)msg;
	(void)len;
	if (!obj_is_str(result, "pong")) {
		snprintf(why, size, "ping answered other than \"pong\"");
		return -EPROTO;
	}
	return 0;
}

static const client_kind pong_kind = {
	.read = pong_read,
};

pending *client_call_send(gpured_t *g, pending *e, int fd, int *ret_err)
{
	uint32_t id = e->id;
	int r = client_send_request(g, NULL, 0, fd);

	if (r < 0) {
		*ret_err = r;
		return NULL;
	}
	return client_wait_entry(g, id, ret_err);
}

/*
 * Send a request of method m without parameters, its reply read by kind,
 * and wait for it. For stats and info, *ret_reply receives the whole
 * reply message (the caller frees it).
 */
static int call_simple(gpured_t *g, gr_method m, const client_kind *kind, uint8_t **ret_reply,
		       size_t *ret_len)
{
	pending *e = NULL;
	int r;

	if (g->dead)
		return client_dead(g);
	r = client_pending_add(g, m, GR_OP_SUM, GR_DT_I32, kind, &e);
	if (r < 0)
		return r;
	g->wbuf.len = 0;
	r = gr_msg_write_request(&g->wbuf, e->id, m);
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	e = client_call_send(g, e, -1, &r);
	if (!e)
		return r;
	if (e->err == 0 && ret_reply) {
		*ret_reply = TAKE_PTR(e->u.reply);
		*ret_len = e->u.reply_len;
	}
	return client_collect(g, e, NULL);
}

int gpured_ping(gpured_t *g)
{
	return call_simple(g, GR_METHOD_PING, &pong_kind, NULL, NULL);
}

/* The result (4th item) of a reply message, parsed into *tree. */
int client_call_result(gpured_t *g, gr_method m, uint8_t **ret_bytes, gr_obj_tree *tree,
		       const gr_obj **ret_result)
{
	_cleanup_(freep) uint8_t *bytes = NULL;
	size_t len = 0;
	long k;
	int r;

	r = call_simple(g, m, &client_kind_reply, &bytes, &len);
	if (r < 0)
		return r;
	k = gr_obj_parse(bytes, len, &gr_msg_response_limits, tree);
	if (k <= 0)
		/* It parsed when it arrived. */
		return client_error(g, -EPROTO, "reply no longer parses");
	*ret_bytes = TAKE_PTR(bytes);
	*ret_result = &tree->root->v.items[3];
	return 0;
}
