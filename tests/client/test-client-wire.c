/*
 * libgpured against a scripted server, no daemon: a thread that accepts
 * one connection and answers exactly as each scenario says, to exercise
 * what a real daemon rarely does on cue: replies out of order and in
 * one-byte pieces, error replies, a fatal reply with msgid 0, a close
 * without a reply, malformed bytes, and a server that writes many replies
 * before it reads on, which deadlocks a client that does not read while
 * it writes. Given gpuredctl's path, also its health command against
 * devices out of service, which a CPU daemon never has. The server is
 * wire-server.c; segments and device maps are test-client-wire-maps.c.
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
#include "tests/client/wire-server.h"

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
	test_timeout();
	test_flood();
	if (argc > 1)
		test_health(argv[1]);
	return 0;
}
