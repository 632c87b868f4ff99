/*
 * libgpured against a scripted server, no daemon: a thread that accepts
 * one connection and answers exactly as each scenario says, to exercise
 * what a real daemon rarely does on cue: replies out of order and in
 * one-byte pieces, error replies, a fatal reply with msgid 0, a close
 * without a reply, malformed bytes, and a server that writes many replies
 * before it reads on, which deadlocks a client that does not read while
 * it writes; the bytes of segmented reduces both ways, and of device
 * maps, read-only and writable. Given
 * gpuredctl's path, also its health command against devices out of
 * service, which a CPU daemon never has.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "client/gpured.h"
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
static const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp";
}

/* ---- the scripted side ---------------------------------------------- */

/* Bytes of the msgpack object at p[0..n), or 0 if it is not all there. */
static size_t mp_span(const uint8_t *p, size_t n)
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
static uint32_t srv_next(server *s, char *ret_method)
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

static void srv_write(server *s, const void *p, size_t n)
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
static void srv_write_slowly(server *s, const gr_buf *b)
{
	for (size_t i = 0; i < b->len; i++) {
		srv_write(s, b->data + i, 1);
		if (i % 7 == 0)
			usleep(200);
	}
}

/* [1, id, nil, ... (the caller appends the result) */
static void reply_head(gr_buf *b, uint32_t id)
{
	CHECK(gr_mpw_array(b, 4) == 0);
	CHECK(gr_mpw_uint(b, 1) == 0);
	CHECK(gr_mpw_uint(b, id) == 0);
	CHECK(gr_mpw_nil(b) == 0);
}

static void reply_value_u(gr_buf *b, uint32_t id, uint64_t v, uint64_t count)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_uint(b, v) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
}

static void reply_value_i(gr_buf *b, uint32_t id, int64_t v, uint64_t count)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_int(b, v) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
}

static void reply_value_f(gr_buf *b, uint32_t id, double v, uint64_t count)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 2) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_f64(b, v) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
}

static void reply_error(gr_buf *b, uint32_t id, const char *code, const char *msg)
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
static void srv_pong(server *s, gr_buf *out)
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

static void server_start(server *s, scenario_fn fn)
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

static void server_stop(server *s)
{
	CHECK(pthread_join(s->thread, NULL) == 0);
	close(s->lfd);
	unlink(s->path);
	rmdir(s->dir);
	gr_buf_deinit(&s->in);
}

/* ---- scenario: replies out of order, in pieces, errors, methods ----- */

static void srv_mixed(server *s)
{
	uint32_t a, b, c, id;
	char m;
	gr_buf out;

	gr_buf_init(&out);
	a = srv_next(s, &m);
	CHECK(m == 'r');
	b = srv_next(s, &m);
	c = srv_next(s, &m);
	/* c, then a, then b; one byte at a time. */
	reply_error(&out, c, "too_large", "too big here");
	reply_value_u(&out, a, 6, 3);
	reply_value_f(&out, b, 2.5, 2);
	srv_write_slowly(s, &out);
	out.len = 0;

	srv_pong(s, &out);

	id = srv_next(s, &m);
	CHECK(m == 's');
	reply_head(&out, id);
	CHECK(gr_mpw_map(&out, 4) == 0);
	CHECK(gr_mpw_cstr(&out, "requests") == 0);
	CHECK(gr_mpw_uint(&out, 42) == 0);
	CHECK(gr_mpw_cstr(&out, "backend") == 0);
	CHECK(gr_mpw_cstr(&out, "cpu") == 0);
	CHECK(gr_mpw_cstr(&out, "batch_mean") == 0);
	CHECK(gr_mpw_f64(&out, 1.5) == 0);
	CHECK(gr_mpw_cstr(&out, "latency_us") == 0);
	CHECK(gr_mpw_map(&out, 2) == 0);
	CHECK(gr_mpw_cstr(&out, "p50") == 0);
	CHECK(gr_mpw_uint(&out, 7) == 0);
	CHECK(gr_mpw_cstr(&out, "max") == 0);
	CHECK(gr_mpw_f64(&out, 99.5) == 0);
	srv_write_slowly(s, &out);
	out.len = 0;

	/* info, asked twice: as JSON and as text. */
	for (int i = 0; i < 2; i++) {
		id = srv_next(s, &m);
		CHECK(m == 'i');
		reply_head(&out, id);
		CHECK(gr_mpw_map(&out, 3) == 0);
		CHECK(gr_mpw_cstr(&out, "version") == 0);
		CHECK(gr_mpw_cstr(&out, "0.1 \"x\"") == 0);
		CHECK(gr_mpw_cstr(&out, "devices") == 0);
		CHECK(gr_mpw_array(&out, 1) == 0);
		CHECK(gr_mpw_map(&out, 1) == 0);
		CHECK(gr_mpw_cstr(&out, "name") == 0);
		CHECK(gr_mpw_cstr(&out, "H100") == 0);
		CHECK(gr_mpw_cstr(&out, "limits") == 0);
		CHECK(gr_mpw_map(&out, 1) == 0);
		CHECK(gr_mpw_cstr(&out, "max_data_bytes") == 0);
		CHECK(gr_mpw_int(&out, -1) == 0);
		srv_write(s, out.data, out.len);
		out.len = 0;
	}

	/* Results of every kind, at their limits. */
	for (int i = 0; i < 4; i++) {
		id = srv_next(s, NULL);
		if (i == 0)
			reply_value_u(&out, id, UINT64_MAX, 1);
		else if (i == 1)
			reply_value_i(&out, id, INT64_MIN, 1);
		else if (i == 2)
			reply_value_f(&out, id, 5.0, 1);
		else
			reply_error(&out, id, "empty", "min of nothing");
		srv_write(s, out.data, out.len);
		out.len = 0;
	}
	gr_buf_deinit(&out);
	/* Wait for the client to close. */
	char x;
	CHECK(read(s->fd, &x, 1) == 0);
}

static void test_mixed(void)
{
	int64_t xi[3] = { 1, 2, 3 };
	float xf[2] = { 1.0f, 1.5f };
	gpured_value v;
	gpured_stats_t st;
	uint32_t a, b, c, id;
	server s;
	gpured_t *g;
	char *str;

	server_start(&s, srv_mixed);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, xi, 3, &a), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_F32, xf, 2, &b), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_MAX, GPURED_U32, xi, 0, &c), 0);
	CHECK(a != 0 && b != 0 && c != 0 && a != b && b != c);
	CHECK_EQ(gpured_outstanding(g), 3);

	/* b by id, while c and a arrive first. */
	CHECK_EQ(gpured_wait_id(g, b, &v), 0);
	CHECK(v.kind == GPURED_KIND_F64 && v.v.f == 2.5 && v.count == 2);
	CHECK_EQ(gpured_wait(g, &id, &v), -E2BIG);
	CHECK_EQ(id, c);
	CHECK(strcmp(gpured_errmsg(g), "too big here") == 0);
	CHECK(gpured_errcode(g) && strcmp(gpured_errcode(g), "too_large") == 0);
	CHECK_EQ(gpured_wait(g, &id, &v), 0);
	CHECK_EQ(id, a);
	CHECK(v.kind == GPURED_KIND_I64 && v.v.i == 6 && v.count == 3);
	CHECK_EQ(gpured_wait(g, &id, &v), -ECHILD);
	CHECK_EQ(gpured_wait_id(g, a, &v), -ESRCH);
	CHECK_EQ(gpured_outstanding(g), 0);

	CHECK_EQ(gpured_ping(g), 0);
	CHECK_EQ(gpured_stats(g, &st), 0);
	CHECK_EQ(st.requests, 42);
	CHECK(strcmp(st.backend, "cpu") == 0);
	CHECK(st.batch_mean == 1.5);
	CHECK(st.latency_p50_us == 7 && st.latency_max_us == 99.5 && st.latency_p99_us == 0);
	CHECK_EQ(st.errors, 0);

	CHECK_EQ(gpured_info_json(g, &str), 0);
	CHECK_MSG(strcmp(str, "{\"version\":\"0.1 \\\"x\\\"\",\"devices\":[{\"name\":\"H100\"}],"
			      "\"limits\":{\"max_data_bytes\":-1}}") == 0, "%s", str);
	free(str);
	CHECK_EQ(gpured_info_format(g, GPURED_FORMAT_TEXT, &str), 0);
	CHECK_MSG(strcmp(str, "version  0.1 \"x\"\n"
			      "devices:\n"
			      "  [0]\n"
			      "    name  H100\n"
			      "limits:\n"
			      "  max_data_bytes  -1\n") == 0, "%s", str);
	free(str);

	uint64_t one = 1;
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MAX, GPURED_U64, &one, 1, &v), 0);
	CHECK(v.kind == GPURED_KIND_U64 && v.v.u == UINT64_MAX);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MIN, GPURED_I64, &one, 1, &v), 0);
	CHECK(v.kind == GPURED_KIND_I64 && v.v.i == INT64_MIN);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUMSQ, GPURED_I32, &one, 1, &v), 0);
	CHECK(v.kind == GPURED_KIND_F64 && v.v.f == 5.0);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MIN, GPURED_F64, NULL, 0, &v), -ENODATA);
	CHECK(strcmp(gpured_errcode(g), "empty") == 0);

	/* Local failures send nothing and keep the handle. */
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I32, NULL, 4, &id), -EINVAL);
	CHECK(gpured_errcode(g) == NULL);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_F64, xi, (size_t)1 << 29, &id), -E2BIG);
	CHECK_EQ(gpured_submit(g, (gpured_op)9, GPURED_F64, xi, 1, &id), -EINVAL);
	CHECK_EQ(gpured_outstanding(g), 0);

	gpured_close(g);
	server_stop(&s);
}

/* ---- scenario: the server gives up on the stream --------------------- */

static void srv_fatal(server *s)
{
	gr_buf out;

	gr_buf_init(&out);
	srv_next(s, NULL);
	reply_error(&out, 0, "invalid_request", "bad envelope");
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
}

static void srv_close(server *s)
{
	srv_next(s, NULL);
}

static void srv_garbage(server *s)
{
	static const uint8_t bad[] = { 0x94, 0x01, 0x01, 0xc1 };

	srv_next(s, NULL);
	srv_write(s, bad, sizeof(bad));
	char x;
	(void)!read(s->fd, &x, 1);
}

static void srv_wrong_kind(server *s)
{
	gr_buf out;

	gr_buf_init(&out);
	uint32_t id = srv_next(s, NULL);
	reply_value_i(&out, id, -1, 1); /* negative, for a u64 sum */
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	char x;
	(void)!read(s->fd, &x, 1);
}

static void srv_int_for_float(server *s)
{
	gr_buf out;

	gr_buf_init(&out);
	uint32_t id = srv_next(s, NULL);
	/* PROTOCOL.md: a float64 result is always a msgpack float64. */
	reply_value_u(&out, id, 5, 1);
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	char x;
	(void)!read(s->fd, &x, 1);
}

static void srv_unknown_id(server *s)
{
	gr_buf out;

	gr_buf_init(&out);
	uint32_t id = srv_next(s, NULL);
	reply_value_u(&out, id + 1000, 1, 1);
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	char x;
	(void)!read(s->fd, &x, 1);
}

static void run_broken(scenario_fn fn, int want, const char *want_code, const char *want_msg)
{
	int64_t x = 1;
	gpured_value v;
	uint32_t id, got_id = 77;
	server s;
	gpured_t *g;

	server_start(&s, fn);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_U64, &x, 1, &id), 0);
	CHECK_EQ(gpured_wait(g, &got_id, &v), want);
	CHECK_EQ(got_id, 0);
	if (want_code)
		CHECK(gpured_errcode(g) && strcmp(gpured_errcode(g), want_code) == 0);
	if (want_msg)
		CHECK_MSG(strstr(gpured_errmsg(g), want_msg), "%s", gpured_errmsg(g));
	/* The handle stays dead with the same code. */
	CHECK_EQ(gpured_ping(g), want);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_U64, &x, 1, &id), want);
	gpured_close(g);
	server_stop(&s);
}

/* A sumsq whose float result comes as an integer: a broken reply. */
static void run_broken_sumsq(scenario_fn fn)
{
	int32_t x = 2;
	gpured_value v;
	server s;
	gpured_t *g;

	server_start(&s, fn);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUMSQ, GPURED_I32, &x, 1, &v), -EPROTO);
	gpured_close(g);
	server_stop(&s);
}

/* The connection limit: "busy" with msgid 0, then close, unread. */
static void srv_busy(server *s)
{
	gr_buf out;

	gr_buf_init(&out);
	reply_error(&out, 0, "busy", "too many connections");
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
}

static void test_busy(void)
{
	int64_t x = 1;
	gpured_value v;
	uint32_t id;
	server s;
	gpured_t *g;
	int r;

	server_start(&s, srv_busy);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	server_stop(&s);
	/* Whether the send still fits or meets the closed socket, the
	 * server's reason is what the caller sees. */
	r = gpured_submit(g, GPURED_OP_SUM, GPURED_I64, &x, 1, &id);
	if (r == 0)
		r = gpured_wait(g, &id, &v);
	CHECK_EQ(r, -EBUSY);
	CHECK(gpured_errcode(g) && strcmp(gpured_errcode(g), "busy") == 0);
	CHECK_MSG(strstr(gpured_errmsg(g), "too many connections"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_ping(g), -EBUSY);
	gpured_close(g);
}

/* A fatal error that names its request: that request gets it, the
 * connection is gone for the others. */
static void srv_fatal_with_id(server *s)
{
	gr_buf out;
	uint32_t a;

	gr_buf_init(&out);
	a = srv_next(s, NULL);
	srv_next(s, NULL);
	reply_error(&out, a, "invalid_request", "nesting too deep");
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
}

static void test_fatal_with_id(void)
{
	int64_t x = 1;
	gpured_value v;
	uint32_t a, b, id;
	server s;
	gpured_t *g;

	server_start(&s, srv_fatal_with_id);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, &x, 1, &a), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, &x, 1, &b), 0);
	CHECK_EQ(gpured_wait(g, &id, &v), -EPROTO);
	CHECK_EQ(id, a);
	CHECK(strcmp(gpured_errcode(g), "invalid_request") == 0);
	CHECK(strcmp(gpured_errmsg(g), "nesting too deep") == 0);
	CHECK_EQ(gpured_wait_id(g, b, &v), -EPROTO);
	CHECK_EQ(gpured_wait(g, &id, &v), -EPROTO);
	CHECK_EQ(id, 0);
	gpured_close(g);
	server_stop(&s);
}

/* ---- scenario: segmented reduces, their bytes both ways ---------------- */

/* The next whole request, parsed: its params' map in *ret_map (strings
 * point into *bytes, which the caller frees with the tree). */
static void srv_next_map(server *s, uint8_t **bytes, gr_obj_tree *tree, const gr_obj **ret_map)
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
static void map_keys(const gr_obj *map, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < map->len; i++) {
		const gr_obj *k = &map->v.items[2 * i];
		len += (size_t)snprintf(buf + len, size - len, "%s%.*s", i ? " " : "", (int)k->len,
					k->v.str);
	}
}

static void reply_segments(gr_buf *b, uint32_t id, uint64_t count, uint64_t nseg,
			   const void *records, size_t bytes)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 3) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
	CHECK(gr_mpw_cstr(b, "segments") == 0);
	CHECK(gr_mpw_uint(b, nseg) == 0);
	CHECK(gr_mpw_cstr(b, "values") == 0);
	CHECK(gr_mpw_bin(b, records, bytes) == 0);
}

static void srv_segments(server *s)
{
	static const uint8_t offs1[] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
					 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0 };
	const double data1[3] = { 1, 2, 4 };
	uint8_t *b1, *b2, *b3;
	gr_obj_tree t1 = { 0 }, t2 = { 0 }, t3 = { 0 };
	const gr_obj *m1, *m2, *m3;
	char keys[128];
	gr_buf out;

	gr_buf_init(&out);
	/* op, dtype and ddof, then the offsets, then the data */
	srv_next_map(s, &b1, &t1, &m1);
	map_keys(m1, keys, sizeof(keys));
	CHECK_MSG(strcmp(keys, "op dtype ddof offsets data") == 0, "%s", keys);
	const gr_obj *o = gr_obj_get(m1, "offsets"), *d = gr_obj_get(m1, "data");
	CHECK(o->type == GR_MP_BIN && o->len == sizeof(offs1) && memcmp(o->v.str, offs1, o->len) == 0);
	CHECK(d->type == GR_MP_BIN && d->len == sizeof(data1) && memcmp(d->v.str, data1, d->len) == 0);
	CHECK(gr_obj_get(m1, "ddof")->v.u == 1);
	/* a region's keys after the offsets too */
	srv_next_map(s, &b2, &t2, &m2);
	map_keys(m2, keys, sizeof(keys));
	CHECK_MSG(strcmp(keys, "op dtype offsets region offset count") == 0, "%s", keys);
	CHECK(gr_obj_get(m2, "region")->v.u == 7 && gr_obj_get(m2, "offset")->v.u == 12 &&
	      gr_obj_get(m2, "count")->v.u == 5 && gr_obj_get(m2, "offsets")->len == 16);
	srv_next_map(s, &b3, &t3, &m3);
	map_keys(m3, keys, sizeof(keys));
	CHECK_MSG(strcmp(keys, "op dtype offsets data") == 0, "%s", keys);

	/* the second first, then the first in one-byte pieces */
	gpured_arg_record a = { .value.i = -3, .index = 4 };
	reply_segments(&out, (uint32_t)t2.root->v.items[1].v.u, 5, 1, &a, sizeof(a));
	srv_write(s, out.data, out.len);
	out.len = 0;
	gpured_moments_record m[3] = {
		{ .sum.f = 1, .min.f = 1, .max.f = 1, .mean = 1, .var = NAN },
		{ .sum.f = 0, .min.f = INFINITY, .max.f = -INFINITY, .mean = NAN, .var = NAN },
		{ .sum.f = 6, .min.f = 2, .max.f = 4, .mean = 3, .var = 2 },
	};
	reply_segments(&out, (uint32_t)t1.root->v.items[1].v.u, 3, 3, m, sizeof(m));
	srv_write_slowly(s, &out);
	out.len = 0;
	/* the third's records a byte short, once the client has the others
	 * and has sent one more request (whose reply never comes) */
	srv_next(s, NULL);
	reply_segments(&out, (uint32_t)t3.root->v.items[1].v.u, 2, 1, "\x0b\0\0\0\0\0\0", 7);
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	gr_obj_tree_deinit(&t1);
	gr_obj_tree_deinit(&t2);
	gr_obj_tree_deinit(&t3);
	free(b1);
	free(b2);
	free(b3);
	char x;
	(void)!read(s->fd, &x, 1);
}

static void test_segments(void)
{
	const double x[3] = { 1, 2, 4 };
	const int64_t y[2] = { 5, 6 };
	gpured_moments_record m[3];
	gpured_arg_record a;
	uint32_t id1, id2, id3, id4;
	server s;
	gpured_t *g;

	server_start(&s, srv_segments);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_MOMENTS, GPURED_F64, x, 3,
					(const uint64_t[]){ 0, 1, 1, 3 }, 3, 1, &id1), 0);
	CHECK_EQ(gpured_submit_region_segments(g, 7, GPURED_OP_ARGMIN, GPURED_I32, 12, 5,
					       (const uint64_t[]){ 0, 5 }, 1, 0, &id2), 0);
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_SUM, GPURED_I64, y, 2,
					(const uint64_t[]){ 0, 2 }, 1, 0, &id3), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id1, m, sizeof(m)), 0);
	CHECK(m[0].mean == 1 && isnan(m[0].var) && m[1].min.f == INFINITY && isnan(m[1].mean) &&
	      m[2].sum.f == 6 && m[2].var == 2);
	CHECK_EQ(gpured_wait_id_segments(g, id2, &a, sizeof(a)), 0);
	CHECK(a.value.i == -3 && a.index == 4);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, y, 2, &id4), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id3, NULL, 0), -EPROTO);
	CHECK_MSG(strstr(gpured_errmsg(g), "7 bytes, not 1 records of 8"), "%s", gpured_errmsg(g));
	gpured_close(g);
	server_stop(&s);
}

/* ---- scenario: device maps, read-only and writable -------------------- */

#define DEVICE_UUID "GPU-01234567-89ab-cdef-0123-456789abcdef"

static const struct {
	const char *keys, *kind;
	bool writable;
} device_maps[] = {
	{ "bytes writable kind device", "cuda", true },
	{ "bytes writable kind device handle", "cuda_ipc", true },
	{ "bytes kind device", "cuda", false },
	{ "bytes kind device handle", "cuda_ipc", false },
};

static bool str_is(const gr_obj *o, const char *want)
{
	return o && o->type == GR_MP_STR && o->len == strlen(want) &&
	       memcmp(o->v.str, want, o->len) == 0;
}

static void ipc_handle(uint8_t h[64])
{
	for (int i = 0; i < 64; i++)
		h[i] = (uint8_t)(3 * i + 1);
}

static void srv_device_maps(server *s)
{
	uint8_t handle[64];
	char keys[128];
	gr_buf out;

	ipc_handle(handle);
	gr_buf_init(&out);
	for (size_t i = 0; i < sizeof(device_maps) / sizeof(device_maps[0]); i++) {
		uint8_t *bytes;
		gr_obj_tree t = { 0 };
		const gr_obj *m;

		srv_next_map(s, &bytes, &t, &m);
		CHECK(str_is(&t.root->v.items[2], "map"));
		map_keys(m, keys, sizeof(keys));
		CHECK_MSG(strcmp(keys, device_maps[i].keys) == 0, "map %zu: %s", i, keys);
		CHECK(gr_obj_get(m, "bytes")->v.u == 4096);
		CHECK(str_is(gr_obj_get(m, "kind"), device_maps[i].kind));
		CHECK(str_is(gr_obj_get(m, "device"), DEVICE_UUID));
		if (device_maps[i].writable) {
			const gr_obj *w = gr_obj_get(m, "writable");
			CHECK(w->type == GR_MP_BOOL && w->v.b);
		}
		const gr_obj *h = gr_obj_get(m, "handle");
		if (h)
			CHECK(h->type == GR_MP_BIN && h->len == 64 && memcmp(h->v.str, handle, 64) == 0);
		reply_head(&out, (uint32_t)t.root->v.items[1].v.u);
		CHECK(gr_mpw_map(&out, 2) == 0);
		CHECK(gr_mpw_cstr(&out, "region") == 0);
		CHECK(gr_mpw_uint(&out, 100 + i) == 0);
		CHECK(gr_mpw_cstr(&out, "bytes") == 0);
		CHECK(gr_mpw_uint(&out, 4096) == 0);
		srv_write(s, out.data, out.len);
		out.len = 0;
		gr_obj_tree_deinit(&t);
		free(bytes);
	}
	/* unknown flags were refused without a request: a ping comes next */
	srv_pong(s, &out);
	gr_buf_deinit(&out);
}

/* The device maps' requests, flags 0 and GPURED_REGION_WRITABLE (a CUDA
 * daemon is what tests/gpu/test-device-map.cu drives): "writable": true
 * only with the flag, the handle's 64 bytes, unknown flags refused here. */
static void test_device_maps(void)
{
	uint8_t handle[64];
	uint64_t id;
	server s;
	gpured_t *g;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	ipc_handle(handle);
	server_start(&s, srv_device_maps);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_map_cuda_fd_flags(g, fd, 4096, DEVICE_UUID, GPURED_REGION_WRITABLE, &id), 0);
	CHECK_EQ(id, 100);
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, handle, 4096, DEVICE_UUID, GPURED_REGION_WRITABLE,
					   &id), 0);
	CHECK_EQ(id, 101);
	CHECK_EQ(gpured_map_cuda_fd(g, fd, 4096, DEVICE_UUID, &id), 0);
	CHECK_EQ(id, 102);
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, handle, 4096, DEVICE_UUID, 0, &id), 0);
	CHECK_EQ(id, 103);
	CHECK_EQ(gpured_map_cuda_fd_flags(g, fd, 4096, DEVICE_UUID, 2, &id), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "unknown region flags"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, handle, 4096, DEVICE_UUID, 6, &id), -EINVAL);
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, NULL, 4096, DEVICE_UUID, GPURED_REGION_WRITABLE, &id),
		 -EINVAL);
	CHECK_EQ(gpured_map_cuda_fd_flags(g, fd, 4096, NULL, GPURED_REGION_WRITABLE, &id), -EINVAL);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	server_stop(&s);
	close(fd);
}

/* A range of three allocations: map with part_bytes, two map_parts of
 * which the second is refused, then the unmap the client owes. */
static void srv_device_parts(server *s)
{
	static const char *const want[] = { "map", "map_part", "map_part", "unmap" };
	static const char *const keys_want[] = { "bytes kind device part_bytes", "region bytes",
						 "region bytes", "region" };
	char keys[128];
	gr_buf out;

	gr_buf_init(&out);
	for (size_t i = 0; i < 4; i++) {
		uint8_t *bytes;
		gr_obj_tree t = { 0 };
		const gr_obj *m;

		srv_next_map(s, &bytes, &t, &m);
		CHECK_MSG(str_is(&t.root->v.items[2], want[i]), "request %zu", i);
		map_keys(m, keys, sizeof(keys));
		CHECK_MSG(strcmp(keys, keys_want[i]) == 0, "request %zu: %s", i, keys);
		uint32_t id = (uint32_t)t.root->v.items[1].v.u;
		if (i == 0) {
			CHECK(gr_obj_get(m, "bytes")->v.u == 3u << 21);
			CHECK(gr_obj_get(m, "part_bytes")->v.u == 2u << 20);
		} else {
			CHECK(gr_obj_get(m, "region")->v.u == 7);
		}
		if (i == 1 || i == 2)
			CHECK(gr_obj_get(m, "bytes")->v.u == 2u << 20);
		if (i == 2) {
			reply_error(&out, id, "invalid_params", "the third part is refused");
		} else if (i == 3) {
			reply_head(&out, id);
			CHECK(gr_mpw_bool(&out, true) == 0);
		} else {
			reply_head(&out, id);
			CHECK(gr_mpw_map(&out, 3) == 0);
			CHECK(gr_mpw_kv_uint(&out, "region", 7) == 0);
			CHECK(gr_mpw_kv_uint(&out, "bytes", 3u << 21) == 0);
			CHECK(gr_mpw_kv_uint(&out, "mapped", (i + 1) << 21) == 0);
		}
		srv_write(s, out.data, out.len);
		out.len = 0;
		gr_obj_tree_deinit(&t);
		free(bytes);
	}
	/* the bad arguments were refused without a request */
	srv_pong(s, &out);
	gr_buf_deinit(&out);
}

static void test_device_parts(void)
{
	const size_t sizes[] = { 2u << 20, 2u << 20, 2u << 20 }, zero[] = { 2u << 20, 0 };
	uint64_t id = 0;
	server s;
	gpured_t *g;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	const int fds[] = { fd, fd, fd };

	CHECK(fd >= 0);
	server_start(&s, srv_device_parts);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, sizes, 3, DEVICE_UUID, 0, &id), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "the third part is refused"), "%s", gpured_errmsg(g));
	CHECK(strcmp(gpured_errcode(g), "invalid_params") == 0);
	CHECK_EQ(id, 0);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, sizes, 0, DEVICE_UUID, 0, &id), -EINVAL);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, zero, 2, DEVICE_UUID, 0, &id), -EINVAL);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, sizes, 3, DEVICE_UUID, 4, &id), -EINVAL);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	server_stop(&s);
	close(fd);
}

/* A server that reads but never answers: the timeout ends the wait. */
static void srv_silent(server *s)
{
	srv_next(s, NULL);
	char x;
	(void)!read(s->fd, &x, 1);
}

static void test_timeout(void)
{
	int64_t x = 1;
	gpured_value v;
	server s;
	gpured_t *g;

	server_start(&s, srv_silent);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	gpured_set_timeout(g, 100);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, GPURED_I64, &x, 1, &v), -ETIMEDOUT);
	CHECK_EQ(gpured_ping(g), -ETIMEDOUT);
	gpured_close(g);
	server_stop(&s);
}

/* ---- scenario: replies pile up while a large request is written ------- */

#define FLOOD_SMALL 40000
#define FLOOD_BIG_ELEMS (4u << 20)

static void srv_flood(server *s)
{
	gr_buf out;
	uint32_t id;
	char m;

	gr_buf_init(&out);
	for (int i = 0; i < FLOOD_SMALL; i++) {
		id = srv_next(s, &m);
		reply_value_i(&out, id, i, 16);
	}
	/* Far more than a socket buffer holds: this write only finishes if
	 * the client reads while it is still sending the large request. */
	srv_write(s, out.data, out.len);
	out.len = 0;
	id = srv_next(s, &m);
	reply_value_i(&out, id, (int64_t)FLOOD_BIG_ELEMS, FLOOD_BIG_ELEMS);
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	char x;
	CHECK(read(s->fd, &x, 1) == 0);
}

static void test_flood(void)
{
	static int32_t small[16];
	int32_t *big;
	uint32_t *ids, big_id, id;
	gpured_value v;
	server s;
	gpured_t *g;

	big = calloc(FLOOD_BIG_ELEMS, sizeof(*big));
	ids = calloc(FLOOD_SMALL, sizeof(*ids));
	CHECK(big && ids);
	server_start(&s, srv_flood);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	for (int i = 0; i < FLOOD_SMALL; i++)
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I32, small, 16, &ids[i]), 0);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I32, big, FLOOD_BIG_ELEMS, &big_id), 0);
	CHECK_EQ(gpured_outstanding(g), FLOOD_SMALL + 1);

	CHECK_EQ(gpured_wait_id(g, big_id, &v), 0);
	CHECK(v.v.i == (int64_t)FLOOD_BIG_ELEMS && v.count == FLOOD_BIG_ELEMS);
	/* Everything else arrived meanwhile, in order. */
	for (int i = 0; i < FLOOD_SMALL; i++) {
		CHECK_EQ(gpured_wait(g, &id, &v), 0);
		CHECK_EQ(id, ids[i]);
		CHECK_EQ(v.v.i, i);
	}
	CHECK_EQ(gpured_outstanding(g), 0);
	gpured_close(g);
	server_stop(&s);
	free(big);
	free(ids);
}

/* ---- scenario: gpuredctl health and devices out of service ---------- */

static uint64_t health_devices, health_healthy;

static void srv_health(server *s)
{
	gr_buf out;
	char m;
	uint32_t id;

	gr_buf_init(&out);
	srv_pong(s, &out);
	id = srv_next(s, &m);
	CHECK(m == 's');
	reply_head(&out, id);
	CHECK(gr_mpw_map(&out, 3) == 0);
	CHECK(gr_mpw_cstr(&out, "backend") == 0);
	CHECK(gr_mpw_cstr(&out, "cu\"da") == 0);
	CHECK(gr_mpw_cstr(&out, "devices") == 0);
	CHECK(gr_mpw_uint(&out, health_devices) == 0);
	CHECK(gr_mpw_cstr(&out, "devices_healthy") == 0);
	CHECK(gr_mpw_uint(&out, health_healthy) == 0);
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	char x;
	CHECK(read(s->fd, &x, 1) == 0);
}

/* Run gpuredctl --socket path health [--json]; its exit status, and its
 * standard output in out. */
static int run_health(const char *ctl, const char *path, bool json, char *out, size_t len)
{
	int fds[2], status;
	size_t got = 0;
	pid_t pid;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(ctl, ctl, "--socket", path, "health", json ? "--json" : NULL, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t k = read(fds[0], out + got, len - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	out[got] = 0;
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_health(const char *ctl)
{
	static const struct {
		uint64_t devices, healthy;
		int rc;
		const char *text, *json;
	} cases[] = {
		{ 2, 2, 0, "ok: backend cu?da, 2 of 2 devices in service",
		  "{\"status\":\"ok\",\"backend\":\"cu?da\",\"devices\":2,\"devices_healthy\":2," },
		{ 2, 1, 4, "degraded: backend cu?da, 1 of 2 devices in service",
		  "{\"status\":\"degraded\",\"backend\":\"cu?da\",\"devices\":2,\"devices_healthy\":1," },
		{ 1, 0, 4, "failed: backend cu?da, 0 of 1 device in service",
		  "{\"status\":\"failed\",\"backend\":\"cu?da\",\"devices\":1,\"devices_healthy\":0," },
	};
	char out[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int json = 0; json < 2; json++) {
			server s;
			const char *want = json ? cases[i].json : cases[i].text;

			health_devices = cases[i].devices;
			health_healthy = cases[i].healthy;
			server_start(&s, srv_health);
			int rc = run_health(ctl, s.path, json, out, sizeof(out));
			server_stop(&s);
			CHECK_MSG(rc == cases[i].rc && strncmp(out, want, strlen(want)) == 0,
				  "rc %d out '%s', want %d '%s'", rc, out, cases[i].rc, want);
			CHECK_MSG(json || (cases[i].rc == 0) == !strstr(out, "gpuredctl info"), "'%s'", out);
		}
	}
}

int main(int argc, char **argv)
{
	/* A SIGPIPE would kill the test: the library must never raise one. */
	signal(SIGPIPE, SIG_DFL);

	test_mixed();
	run_broken(srv_fatal, -EPROTO, "invalid_request", "bad envelope");
	run_broken(srv_close, -ECONNRESET, NULL, NULL);
	run_broken(srv_garbage, -EPROTO, NULL, NULL);
	run_broken(srv_wrong_kind, -EPROTO, NULL, NULL);
	run_broken(srv_unknown_id, -EPROTO, NULL, NULL);
	run_broken_sumsq(srv_int_for_float);
	test_busy();
	test_fatal_with_id();
	test_segments();
	test_device_maps();
	test_device_parts();
	test_timeout();
	test_flood();
	if (argc > 1)
		test_health(argv[1]);
	return 0;
}
