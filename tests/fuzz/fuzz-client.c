/*
 * Fuzz target: libgpured's whole reply handling (client/conn.c, and each
 * reply's reading in its kind's file: reduce.c, call.c, region.c,
 * segments.c, cumsum.c, partial-request.c) against a fake server on a
 * Unix socket. The input's
 * first 2 bytes are a script, up to 4 calls of 4 bits each (low bits
 * first, 0 ends it: see run_call()); the rest is every byte the server
 * sends, a stream of replies.
 *
 * The server reads nothing. Before each call it writes as many whole
 * msgpack objects as the call sends requests (the library refuses a reply
 * to a request it has not sent yet); before the last call, or once the
 * stream stops being whole objects, it writes the rest and closes its
 * side. Calls number their requests from 1 as on a new connection, and
 * region calls name the region that the last map returned (1 before).
 *
 * Checked: no call crashes or waits for ever on what it reads, a result
 * has the kind its request promises, a failure leaves a message, and
 * every handle and descriptor is released (ASan's leak check).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/gpured.h"
#include "proto/mp.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The server sends at most this much: what a socket buffer takes without
 * a reader. */
#define SERVER_BYTES_MAX 65536

static char dir[64];
static char path[sizeof(dir) + 8];
static int lfd = -1;
static int memfd = -1;

static void cleanup(void)
{
	if (lfd >= 0)
		close(lfd);
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/gpured-fuzz-XXXXXX",
		 t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp");
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	atexit(cleanup);
	signal(SIGPIPE, SIG_IGN);

	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(lfd, 4) == 0);

	/* The region that map calls hand over. */
	memfd = memfd_create("gpured-fuzz", MFD_CLOEXEC);
	CHECK(memfd >= 0);
	CHECK(ftruncate(memfd, 4096) == 0);
	return 0;
}

static void check_value(int r, gpured_op op, gpured_dtype dt, const gpured_value *v)
{
	if (r == 0)
		CHECK(v->kind == gpured_result_kind(op, dt));
}

static void check_failure(gpured_t *g, int r)
{
	if (r < 0) {
		const char *m = gpured_errmsg(g), *c = gpured_errcode(g);

		/* A code only when the server sent one; the message may be
		 * empty when the server sent an empty one or none. */
		CHECK(m && strlen(m) < 256);
		CHECK(!c || (c[0] && strlen(c) < 32));
		CHECK(gpured_strerror(r));
	}
}

static void check_text(gpured_t *g, int r, char *s)
{
	if (r == 0) {
		CHECK(s);
		(void)strlen(s);
	} else {
		CHECK(!s);
	}
	free(s);
	check_failure(g, r);
}


/* What one input's calls have done so far. */
typedef struct script {
	struct {
		uint32_t id;
		gpured_op op;
		gpured_dtype dt;
	} sent[16];      /* reductions submitted */
	unsigned n_sent;
	uint64_t region; /* the last region mapped (1 until then) */
} script;

static void submitted(script *sc, uint32_t id, gpured_op op, gpured_dtype dt)
{
	CHECK(id != 0 && sc->n_sent < 16);
	sc->sent[sc->n_sent].id = id;
	sc->sent[sc->n_sent].op = op;
	sc->sent[sc->n_sent].dt = dt;
	sc->n_sent++;
}

/* A result that gpured_wait() hands out is of a reduction this input
 * submitted (perhaps in an earlier call whose wait failed), of its kind. */
static void check_waited(const script *sc, int r, uint32_t got, const gpured_value *v)
{
	for (unsigned i = 0; i < sc->n_sent; i++) {
		if (sc->sent[i].id == got) {
			check_value(r, sc->sent[i].op, sc->sent[i].dt, v);
			return;
		}
	}
	CHECK_MSG(0, "gpured_wait() returned %u, never submitted", got);
}

/* Requests that call sends, and so replies it reads. */
static unsigned call_requests(unsigned call)
{
	return call == 6 ? 2 : 1;
}

static void run_call(gpured_t *g, script *sc, unsigned call)
{
	static const int32_t i32[4] = { 1, -2, 3, INT32_MIN };
	static const int64_t i64[4] = { 1, -2, 3, INT64_MAX };
	static const uint32_t u32[4] = { 1, 2, 3, UINT32_MAX };
	static const float f32[4] = { 1.5f, -2.0f, 0.25f, 1e30f };
	static const double f64[4] = { 1.5, -2.0, 0.25, 1e300 };
	gpured_stats_t st;
	gpured_value v = { 0 };
	uint64_t region = 0;
	uint32_t id = 0;
	char *s = NULL;
	int r;

	switch (call) {
	case 1:
		r = gpured_ping(g);
		break;
	case 2:
		r = gpured_reduce(g, GPURED_OP_SUM, GPURED_I64, i64, 4, &v);
		check_value(r, GPURED_OP_SUM, GPURED_I64, &v);
		break;
	case 3:
		r = gpured_reduce(g, GPURED_OP_SUM, GPURED_U32, u32, 4, &v);
		check_value(r, GPURED_OP_SUM, GPURED_U32, &v);
		break;
	case 4:
		r = gpured_reduce(g, GPURED_OP_SUM, GPURED_F32, f32, 4, &v);
		check_value(r, GPURED_OP_SUM, GPURED_F32, &v);
		break;
	case 5:
		r = gpured_reduce(g, GPURED_OP_SUMSQ, GPURED_I32, i32, 4, &v);
		check_value(r, GPURED_OP_SUMSQ, GPURED_I32, &v);
		break;
	case 6:
		/* Two in flight, collected in arrival order. */
		r = gpured_submit(g, GPURED_OP_MAX, GPURED_I32, i32, 4, &id);
		if (r == 0) {
			submitted(sc, id, GPURED_OP_MAX, GPURED_I32);
			r = gpured_submit(g, GPURED_OP_MIN, GPURED_F64, f64, 4, &id);
			if (r == 0)
				submitted(sc, id, GPURED_OP_MIN, GPURED_F64);
		}
		while (gpured_outstanding(g) > 0) {
			uint32_t got = 0;

			r = gpured_wait(g, &got, &v);
			if (r == -ECHILD)
				break;
			if (got)
				check_waited(sc, r, got, &v);
			if (r < 0)
				check_failure(g, r);
			if (r < 0 && got == 0)
				break;
		}
		break;
	case 7:
		r = gpured_submit(g, GPURED_OP_MIN, GPURED_U32, u32, 4, &id);
		if (r == 0) {
			submitted(sc, id, GPURED_OP_MIN, GPURED_U32);
			r = gpured_wait_id(g, id, &v);
			check_value(r, GPURED_OP_MIN, GPURED_U32, &v);
		}
		break;
	case 8:
		r = gpured_stats(g, &st);
		if (r == 0)
			CHECK(memchr(st.backend, '\0', sizeof(st.backend)));
		break;
	case 9:
		r = gpured_stats_format(g, GPURED_FORMAT_JSON, &s);
		check_text(g, r, s);
		break;
	case 10:
		r = gpured_stats_format(g, GPURED_FORMAT_TEXT, &s);
		check_text(g, r, s);
		break;
	case 11:
		r = gpured_info_format(g, GPURED_FORMAT_JSON_PRETTY, &s);
		check_text(g, r, s);
		break;
	case 12:
		r = gpured_info_format(g, GPURED_FORMAT_TEXT, &s);
		check_text(g, r, s);
		break;
	case 13:
		r = gpured_map_fd(g, memfd, 4096, &region);
		if (r == 0)
			sc->region = region;
		break;
	case 14:
		r = gpured_reduce_region(g, sc->region, GPURED_OP_SUM, GPURED_F64, 8, 16, &v);
		check_value(r, GPURED_OP_SUM, GPURED_F64, &v);
		break;
	case 15:
		r = gpured_unmap(g, sc->region);
		break;
	default:
		return;
	}
	check_failure(g, r);
}

/* Bytes of the msgpack object at p[0..n); 0 if it is not all there or
 * not msgpack. */
static size_t mp_span(const uint8_t *p, size_t n)
{
	uint64_t todo = 1;
	size_t off = 0;

	while (todo > 0) {
		gr_mp_token t;
		int k = gr_mp_next(p + off, n - off, &t);

		if (k <= 0)
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

typedef struct server {
	int fd;
	const uint8_t *data;
	size_t size, off, sent;
	bool closed;
} server;

/* Send the next n_msgs whole objects, or with all, everything left and
 * close. */
static void serve(server *s, unsigned n_msgs, bool all)
{
	size_t end = s->off;

	if (s->closed)
		return;
	for (unsigned i = 0; i < n_msgs && !all; i++) {
		size_t k = mp_span(s->data + end, s->size - end);

		if (k == 0)
			all = true;
		end += k;
	}
	if (all)
		end = s->size;
	if (end - s->off > SERVER_BYTES_MAX - s->sent)
		end = s->off + (SERVER_BYTES_MAX - s->sent);
	while (s->off < end) {
		ssize_t k = send(s->fd, s->data + s->off, end - s->off, MSG_NOSIGNAL);

		if (k < 0) {
			CHECK(errno == EINTR || errno == EAGAIN);
			if (errno == EAGAIN)
				break;
			continue;
		}
		s->off += (size_t)k;
		s->sent += (size_t)k;
	}
	if (all) {
		CHECK(shutdown(s->fd, SHUT_WR) == 0);
		s->closed = true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	script sc = { .region = 1 };
	server srv = { .data = data, .size = size, .off = 2 };
	unsigned calls[4], n_calls = 0;
	gpured_t *g = NULL;

	if (size < 2)
		return 0;
	for (unsigned i = 0; i < 4; i++) {
		calls[n_calls] = (data[i / 2] >> (4 * (i % 2))) & 0xf;
		if (calls[n_calls] == 0)
			break;
		n_calls++;
	}
	CHECK(gpured_connect(path, &g) == 0);
	srv.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	CHECK(srv.fd >= 0);
	/* The replies a call needs are there before it asks: a call that
	 * waits long is waiting for a reply that is not coming, and gives
	 * up as a client of a stuck server would. */
	gpured_set_timeout(g, 200);

	for (unsigned i = 0; i < n_calls; i++) {
		serve(&srv, call_requests(calls[i]), /* all= */ i + 1 == n_calls);
		run_call(g, &sc, calls[i]);
	}
	serve(&srv, 0, /* all= */ true);
	gpured_close(g);
	close(srv.fd);
	return 0;
}
