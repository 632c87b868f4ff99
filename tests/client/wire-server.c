/*
 * The scripted server of the client's wire tests (wire-server.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/wire-server.h"

/* $TMPDIR when a socket path under it fits in a sockaddr_un, else /tmp. */
const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp";
}

/* ---- the scripted side ---------------------------------------------- */

/* Bytes of the msgpack object at p[0..n), or 0 if it is not all there. */
size_t mp_span(const uint8_t *p, size_t n)
{
	uint64_t todo = 1;
	size_t off = 0;

	while (todo > 0) {
		gr_mp_token t;
		int k = gr_mp_next(p + off, n - off, &t);

		CHECK(k >= 0);
		if (k == 0)
			return 0;
		off += (size_t)k;
		todo--;
		switch (t.type) {
		case GR_MP_STR:
		case GR_MP_BIN:
		case GR_MP_EXT:
			if (n - off < t.len)
				return 0;
			off += t.len;
			break;
		case GR_MP_ARRAY:
			todo += t.len;
			break;
		case GR_MP_MAP:
			todo += 2ull * t.len;
			break;
		default:
			break;
		}
	}
	return off;
}

/* Read the next whole request; return its msgid and its method's first
 * letter (r, p, s, i). */
uint32_t srv_next(server *s, char *ret_method)
{
	for (;;) {
		size_t span = s->in.len ? mp_span(s->in.data, s->in.len) : 0;

		if (span) {
			gr_mp_token t;
			size_t off = 0;
			int k;

			k = gr_mp_next(s->in.data, s->in.len, &t);
			CHECK(k > 0 && t.type == GR_MP_ARRAY && t.len == 4);
			off += (size_t)k;
			k = gr_mp_next(s->in.data + off, s->in.len - off, &t);
			CHECK(k > 0 && t.type == GR_MP_UINT && t.u.u == 0);
			off += (size_t)k;
			k = gr_mp_next(s->in.data + off, s->in.len - off, &t);
			CHECK(k > 0 && t.type == GR_MP_UINT);
			uint32_t id = (uint32_t)t.u.u;
			off += (size_t)k;
			k = gr_mp_next(s->in.data + off, s->in.len - off, &t);
			CHECK(k > 0 && t.type == GR_MP_STR && t.len > 0);
			if (ret_method)
				*ret_method = (char)s->in.data[off + (size_t)k];
			gr_buf_consume(&s->in, span);
			return id;
		}
		CHECK(gr_buf_reserve(&s->in, 1 << 20) == 0);
		ssize_t n = read(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len);
		CHECK_MSG(n > 0, "client closed early");
		s->in.len += (size_t)n;
	}
}

void srv_write(server *s, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t k = send(s->fd, b, n, MSG_NOSIGNAL);

		CHECK(k > 0);
		b += k;
		n -= (size_t)k;
	}
}

/* One byte per send, so the client sees replies in pieces. */
void srv_write_slowly(server *s, const gr_buf *b)
{
	for (size_t i = 0; i < b->len; i++) {
		srv_write(s, b->data + i, 1);
		if (i % 7 == 0)
			usleep(200);
	}
}

/* [1, id, nil, ... (the caller appends the result) */
void reply_head(gr_buf *b, uint32_t id)
{
	CHECK(gr_mpw_array(b, 4) == 0);
	CHECK(gr_mpw_uint(b, 1) == 0);
	CHECK(gr_mpw_uint(b, id) == 0);
	CHECK(gr_mpw_nil(b) == 0);
}

void reply_value_u(gr_buf *b, uint32_t id, uint64_t v, uint64_t count)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_uint(b, v) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
}

void reply_value_i(gr_buf *b, uint32_t id, int64_t v, uint64_t count)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_int(b, v) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
}

void reply_value_f(gr_buf *b, uint32_t id, double v, uint64_t count)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_f64(b, v) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
}

void reply_error(gr_buf *b, uint32_t id, const char *code, const char *msg)
{
	CHECK(gr_mpw_array(b, 4) == 0);
	CHECK(gr_mpw_uint(b, 1) == 0);
	CHECK(gr_mpw_uint(b, id) == 0);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "code") == 0);
	CHECK(gr_mpw_cstr(b, code) == 0);
	CHECK(gr_mpw_cstr(b, "message") == 0);
	CHECK(gr_mpw_cstr(b, msg) == 0);
	CHECK(gr_mpw_nil(b) == 0);
}

/* Read a ping and answer it. */
void srv_pong(server *s, gr_buf *out)
{
	char m;
	uint32_t id = srv_next(s, &m);

	CHECK(m == 'p');
	reply_head(out, id);
	CHECK(gr_mpw_cstr(out, "pong") == 0);
	srv_write(s, out->data, out->len);
	out->len = 0;
}

static void *server_thread(void *arg)
{
	server *s = arg;

	s->fd = accept(s->lfd, NULL, NULL);
	CHECK(s->fd >= 0);
	s->fn(s);
	close(s->fd);
	return NULL;
}

void server_start(server *s, scenario_fn fn)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "%s/gpured-wire-XXXXXX", tmp_base());
	CHECK(mkdtemp(s->dir));
	snprintf(s->path, sizeof(s->path), "%s/s.sock", s->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s->lfd >= 0);
	CHECK(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(s->lfd, 4) == 0);
	gr_buf_init(&s->in);
	s->fn = fn;
	CHECK(pthread_create(&s->thread, NULL, server_thread, s) == 0);
}

void server_stop(server *s)
{
	CHECK(pthread_join(s->thread, NULL) == 0);
	close(s->lfd);
	unlink(s->path);
	rmdir(s->dir);
	gr_buf_deinit(&s->in);
}

/* The next whole request, parsed: its params' map in *ret_map (strings
 * point into *bytes, which the caller frees with the tree). */
void srv_next_map(server *s, uint8_t **bytes, gr_obj_tree *tree, const gr_obj **ret_map)
{
	static const gr_obj_limits lim = { .max_depth = 8, .max_items = 64, .max_str = 1 << 20 };
	size_t span;

	while ((span = s->in.len ? mp_span(s->in.data, s->in.len) : 0) == 0) {
		CHECK(gr_buf_reserve(&s->in, 1 << 16) == 0);
		ssize_t n = read(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len);
		CHECK_MSG(n > 0, "client closed early");
		s->in.len += (size_t)n;
	}
	*bytes = malloc(span);
	CHECK(*bytes);
	memcpy(*bytes, s->in.data, span);
	gr_buf_consume(&s->in, span);
	CHECK(gr_obj_parse(*bytes, span, &lim, tree) == (long)span);
	const gr_obj *params = &tree->root->v.items[3];
	CHECK(params->type == GR_MP_ARRAY && params->len == 1);
	*ret_map = &params->v.items[0];
	CHECK((*ret_map)->type == GR_MP_MAP);
}

/* The map's keys, in order, joined with spaces. */
void map_keys(const gr_obj *map, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < map->len; i++) {
		const gr_obj *k = &map->v.items[2 * i];
		len += (size_t)snprintf(buf + len, size - len, "%s%.*s", i ? " " : "", (int)k->len,
					k->v.str);
	}
}

bool str_is(const gr_obj *o, const char *want)
{
	return o && o->type == GR_MP_STR && o->len == strlen(want) &&
	       memcmp(o->v.str, want, o->len) == 0;
}

