/*
 * libgpured: one connection, requests written from the caller's memory,
 * replies read into one growable buffer and matched to outstanding
 * requests by msgid.
 *
 * Every outstanding request has an entry in g->pend, in submission order.
 * A reply fills its entry (done = true); the caller collects entries with
 * gpured_wait()/gpured_wait_id(), which removes them. Replies to stats and
 * info keep their raw bytes until collected, so they are parsed once the
 * caller asks for them, whatever arrived in between.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/gpured.h"
#include "client/gpured-private.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "proto/types.h"

_Static_assert((int)GPURED_OP_SUM == (int)GR_OP_SUM, "op order");
_Static_assert((int)GPURED_OP_MIN == (int)GR_OP_MIN, "op order");
_Static_assert((int)GPURED_OP_MAX == (int)GR_OP_MAX, "op order");
_Static_assert((int)GPURED_OP_SUMSQ == (int)GR_OP_SUMSQ, "op order");
_Static_assert((int)GPURED_OP_ARGMIN == (int)GR_OP_ARGMIN, "op order");
_Static_assert((int)GPURED_OP_ARGMAX == (int)GR_OP_ARGMAX, "op order");
_Static_assert((int)GPURED_OP_MOMENTS == (int)GR_OP_MOMENTS, "op order");
_Static_assert((int)GPURED_OP_MOMENTS + 1 == (int)GR_OP_N, "op count");
_Static_assert((int)GPURED_I32 == (int)GR_DT_I32, "dtype order");
_Static_assert((int)GPURED_I64 == (int)GR_DT_I64, "dtype order");
_Static_assert((int)GPURED_U32 == (int)GR_DT_U32, "dtype order");
_Static_assert((int)GPURED_U64 == (int)GR_DT_U64, "dtype order");
_Static_assert((int)GPURED_F32 == (int)GR_DT_F32, "dtype order");
_Static_assert((int)GPURED_F64 == (int)GR_DT_F64, "dtype order");
_Static_assert((int)GPURED_F64 + 1 == (int)GR_DT_N, "dtype count");
_Static_assert((int)GPURED_KIND_I64 == (int)GR_KIND_I64, "kind order");
_Static_assert((int)GPURED_KIND_U64 == (int)GR_KIND_U64, "kind order");
_Static_assert((int)GPURED_KIND_F64 == (int)GR_KIND_F64, "kind order");

/* ---- names ---------------------------------------------------------- */

const char *gpured_op_name(gpured_op op)
{
	return gr_op_name((gr_op)op);
}

const char *gpured_dtype_name(gpured_dtype dt)
{
	return gr_dtype_name((gr_dtype)dt);
}

int gpured_op_parse(const char *s, gpured_op *ret)
{
	gr_op op;

	if (!s || !gr_op_parse(s, strlen(s), &op))
		return -EINVAL;
	*ret = (gpured_op)op;
	return 0;
}

int gpured_dtype_parse(const char *s, gpured_dtype *ret)
{
	gr_dtype dt;

	if (!s || !gr_dtype_parse(s, strlen(s), &dt))
		return -EINVAL;
	*ret = (gpured_dtype)dt;
	return 0;
}

size_t gpured_dtype_size(gpured_dtype dt)
{
	if ((unsigned)dt >= GR_DT_N)
		return 0;
	return gr_dtype_size((gr_dtype)dt);
}

gpured_kind gpured_result_kind(gpured_op op, gpured_dtype dt)
{
	return (gpured_kind)gr_result_kind((gr_op)op, (gr_dtype)dt);
}

double gpured_value_as_double(const gpured_value *v)
{
	switch (v->kind) {
	case GPURED_KIND_I64:
		return (double)v->v.i;
	case GPURED_KIND_U64:
		return (double)v->v.u;
	case GPURED_KIND_F64:
		return v->v.f;
	}
	return 0;
}

/* ---- errors --------------------------------------------------------- */

static const int err_errno[GR_ERR_N] = {
	[GR_OK] = 0,
	[GR_ERR_INVALID_REQUEST] = -EPROTO,
	[GR_ERR_UNKNOWN_METHOD] = -ENOSYS,
	[GR_ERR_INVALID_PARAMS] = -EINVAL,
	[GR_ERR_TOO_LARGE] = -E2BIG,
	[GR_ERR_EMPTY] = -ENODATA,
	[GR_ERR_BUSY] = -EBUSY,
	[GR_ERR_INTERNAL] = -EIO,
};

static int errno_from_code(const char *s, size_t len)
{
	gr_err e;

	if (!gr_err_parse(s, len, &e) || e == GR_OK)
		return -EIO;
	return err_errno[e];
}

int gpured_errno_from_code(const char *code)
{
	if (!code)
		return -EIO;
	return errno_from_code(code, strlen(code));
}

const char *gpured_strerror(int err)
{
	switch (err) {
	case 0:
		return "Success";
	case -EINVAL:
		return "Invalid parameters";
	case -E2BIG:
		return "Array too large";
	case -ENODATA:
		return "No elements to reduce";
	case -EBUSY:
		return "Server busy";
	case -ENOSYS:
		return "Unknown method";
	case -EPROTO:
		return "Protocol error";
	case -EIO:
		return "Internal server error";
	case -ECHILD:
		return "No request outstanding";
	case -ESRCH:
		return "No such request outstanding";
	case -EAGAIN:
		return "Too many requests outstanding";
	case -ENOENT:
		return "No such file or directory";
	case -ECONNREFUSED:
		return "Connection refused";
	case -ECONNRESET:
		return "Connection reset by peer";
	case -EPIPE:
		return "Broken pipe";
	case -EACCES:
		return "Permission denied";
	case -ENAMETOOLONG:
		return "File name too long";
	case -ENOMEM:
		return "Cannot allocate memory";
	case -ETIMEDOUT:
		return "Timed out waiting for the server";
	}
	/* strerror() may share a buffer between threads for unknown codes;
	 * everything this library returns is listed above. */
	return "Unknown error";
}

const char *gpured_errmsg(const gpured_t *g)
{
	return g->errmsg;
}

const char *gpured_errcode(const gpured_t *g)
{
	return g->errcode[0] ? g->errcode : NULL;
}

__attribute__((format(printf, 3, 4)))
int client_error(gpured_t *g, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->errmsg, sizeof(g->errmsg), fmt, ap);
	va_end(ap);
	g->errcode[0] = '\0';
	return err;
}

/* The connection is unusable from now on. */
__attribute__((format(printf, 3, 4)))
static int conn_fail(gpured_t *g, int err, const char *fmt, ...)
{
	va_list ap;

	if (g->dead)
		return g->dead;
	va_start(ap, fmt);
	vsnprintf(g->errmsg, sizeof(g->errmsg), fmt, ap);
	va_end(ap);
	g->errcode[0] = '\0';
	g->dead = err;
	return err;
}

int client_dead(gpured_t *g)
{
	/* The message of the failure may have been overwritten by a later
	 * request error; repeat it in general terms. */
	if (g->dead)
		client_error(g, g->dead, "connection lost: %s", gpured_strerror(g->dead));
	return g->dead;
}

/* ---- socket path and connection ------------------------------------- */

int gpured_socket_path(const char *path, char *buf, size_t size)
{
	const char *env;
	int k;

	if (!path) {
		env = getenv("GPURED_SOCKET");
		if (env && env[0])
			path = env;
	}
	if (path) {
		k = snprintf(buf, size, "%s", path);
	} else {
		env = getenv("XDG_RUNTIME_DIR");
		if (geteuid() != 0 && env && env[0])
			k = snprintf(buf, size, "%s/gpured.sock", env);
		else
			k = snprintf(buf, size, "/run/gpured.sock");
	}
	if (k < 0 || (size_t)k >= size || (size_t)k >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int gpured_connect(const char *path, gpured_t **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	gpured_t *g;
	int fd, r;

	r = gpured_socket_path(path, sa.sun_path, sizeof(sa.sun_path));
	if (r < 0)
		return r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
#ifdef SO_NOSIGPIPE
	{
		int one = 1;
		(void)setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
	}
#endif
	/* A blocking connect waits for room in a full listen backlog rather
	 * than failing with EAGAIN; every later send and recv is
	 * non-blocking through MSG_DONTWAIT and poll(). */
	do
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		r = -errno;
		close(fd);
		return r;
	}

	/* Best effort: the kernel caps it, and a smaller one still works. */
	int sndbuf = GPURED_SNDBUF_BYTES;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));

	g = calloc(1, sizeof(*g));
	if (!g) {
		close(fd);
		return -ENOMEM;
	}
	g->fd = fd;
	g->next_id = 1;
	g->timeout_ms = -1;
	gr_buf_init(&g->wbuf);
	gr_buf_init(&g->rbuf);
	g->reply_limits = gr_msg_response_limits;
	g->reply_max_bytes = GR_MSG_RESPONSE_MAX_BYTES;
	*ret = g;
	return 0;
}

static void pending_clear(pending *p)
{
	free(p->errmsg);
	free(p->errcode);
	free(p->reply);
	free(p->exact);
	free(p->records);
	p->errmsg = p->errcode = NULL;
	p->reply = NULL;
	p->exact = NULL;
	p->records = NULL;
}

void gpured_close(gpured_t *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n_slots; i++)
		pending_clear(&g->pend[(g->head + i) & (g->cap_pend - 1)]);
	free(g->pend);
	free(g->doneq);
	gr_buf_deinit(&g->wbuf);
	gr_buf_deinit(&g->rbuf);
	if (g->fd >= 0)
		close(g->fd);
	free(g);
}

void gpured_set_timeout(gpured_t *g, int timeout_ms)
{
	g->timeout_ms = timeout_ms < 0 ? -1 : timeout_ms;
}

void gpured_set_spin(gpured_t *g, unsigned spin_us)
{
	if (spin_us > GPURED_SPIN_MAX_US)
		spin_us = GPURED_SPIN_MAX_US;
	g->spin_ns = (uint64_t)spin_us * 1000u;
}

int gpured_fd(const gpured_t *g)
{
	return g->fd;
}

unsigned gpured_outstanding(const gpured_t *g)
{
	return (unsigned)g->n_live;
}

/* ---- replies -------------------------------------------------------- */

static pending *pending_slot(gpured_t *g, size_t i)
{
	return &g->pend[(g->head + i) & (g->cap_pend - 1)];
}

/* The live entry of request id, or NULL. */
static pending *pending_find(gpured_t *g, uint32_t id)
{
	uint32_t base, off;
	pending *e;

	if (g->n_slots == 0 || id == 0)
		return NULL;
	base = pending_slot(g, 0)->id;
	off = id - base;
	/* Ids skip 0 when they wrap around. */
	if (id < base)
		off--;
	if (off >= g->n_slots)
		return NULL;
	e = pending_slot(g, off);
	return e->id == id && e->live ? e : NULL;
}

pending *client_pending_find(gpured_t *g, uint32_t id)
{
	return pending_find(g, id);
}

static int doneq_push(gpured_t *g, uint32_t id)
{
	if (g->doneq_head + g->doneq_len == g->doneq_cap) {
		size_t k = 0;

		/* Drop the ids that gpured_wait_id() collected meanwhile and
		 * move the rest to the front; grow only if that leaves the
		 * queue more than half full, so pushes stay O(1) amortized
		 * and the queue holds about as many ids as there are
		 * uncollected replies, whatever mix of waits the caller uses. */
		for (size_t i = 0; i < g->doneq_len; i++) {
			uint32_t x = g->doneq[g->doneq_head + i];
			const pending *e = pending_find(g, x);

			if (e && e->done)
				g->doneq[k++] = x;
		}
		g->doneq_head = 0;
		g->doneq_len = k;
		if (k + 1 > g->doneq_cap / 2) {
			size_t cap = g->doneq_cap ? g->doneq_cap * 2 : 64;
			uint32_t *q = realloc(g->doneq, cap * sizeof(*q));

			if (!q)
				return -ENOMEM;
			g->doneq = q;
			g->doneq_cap = cap;
		}
	}
	g->doneq[g->doneq_head + g->doneq_len++] = id;
	return 0;
}

static bool obj_is_str(const gr_obj *o, const char *s)
{
	size_t n = strlen(s);

	return o && o->type == GR_MP_STR && o->len == n && memcmp(o->v.str, s, n) == 0;
}

/* A copy of a str's bytes, NUL-terminated; NULL if absent or no memory. */
static char *strndup_len(const char *s, uint32_t len)
{
	char *d;

	if (!s)
		return NULL;
	d = malloc((size_t)len + 1);
	if (!d)
		return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

/* One whole reply message at p[0..n), parsed as *root. */
static int handle_reply(gpured_t *g, const gr_obj *root, const uint8_t *p, size_t n)
{
	const gr_obj *res = NULL, *code = NULL;
	const char *msg = NULL;
	uint32_t msglen = 0, id;
	gr_err ec;
	pending *e;

	if (gr_msg_parse_response(root, &id, &ec, &msg, &msglen, &res) < 0)
		return conn_fail(g, -EPROTO, "malformed response from server");
	if (ec != GR_OK)
		code = gr_obj_get(&root->v.items[2], "code");

	e = pending_find(g, id);
	if (!e || e->done) {
		/* msgid 0, or one we did not send: the server could not tell
		 * which request failed (a broken stream, or "busy" for the
		 * whole connection) and closes the connection. */
		if (ec != GR_OK) {
			int r = err_errno[ec];

			if (msg && msglen)
				conn_fail(g, r, "%.*s", (int)msglen, msg);
			else
				conn_fail(g, r, "%s", gpured_strerror(r));
			snprintf(g->errcode, sizeof(g->errcode), "%.*s", (int)code->len, code->v.str);
			return r;
		}
		return conn_fail(g, -EPROTO, "response to unknown request %u", id);
	}

	if (ec != GR_OK) {
		e->err = err_errno[ec];
		e->errcode = strndup_len(code->v.str, code->len);
		e->errmsg = strndup_len(msg, msglen);
		if (!e->errcode)
			return conn_fail(g, -ENOMEM, "out of memory");
	} else {
		switch (e->method) {
		case GR_METHOD_REDUCE: {
			gr_value v;
			uint64_t count;

			if (e->read_result) {
				char why[160];
				int r = e->read_result(e, res, why, sizeof(why));

				if (r < 0)
					return conn_fail(g, r, "%s", why);
				break;
			}
			if (e->op == GR_OP_MOMENTS) {
				/* the whole result kept; the value is its sum */
				if (gr_msg_parse_moments_result(res, gr_result_kind(e->op, e->dtype),
								&e->moments) < 0)
					return conn_fail(g, -EPROTO, "malformed moments result");
				v = e->moments.sum;
				count = e->moments.count;
			} else if (gr_msg_parse_reduce_result(res, gr_result_kind(e->op, e->dtype), &v,
							      &count) < 0) {
				return conn_fail(g, -EPROTO, "malformed reduce result");
			}
			e->value.kind = (gpured_kind)v.kind;
			e->value.count = count;
			e->value.index = 0;
			if (gr_op_has_index(e->op) &&
			    gr_msg_parse_reduce_index(res, &e->value.index) < 0)
				return conn_fail(g, -EPROTO, "malformed %s result", gr_op_name(e->op));
			if (v.kind == GR_KIND_I64)
				e->value.v.i = v.i;
			else if (v.kind == GR_KIND_U64)
				e->value.v.u = v.u;
			else
				e->value.v.f = v.f;
			break;
		}
		case GR_METHOD_PING:
			if (!obj_is_str(res, "pong"))
				return conn_fail(g, -EPROTO, "ping answered other than \"pong\"");
			break;
		default:
			e->reply = malloc(n);
			if (!e->reply)
				return conn_fail(g, -ENOMEM, "out of memory");
			memcpy(e->reply, p, n);
			e->reply_len = n;
			break;
		}
	}
	if (ec == GR_OK && e->partial) {
		char why[160];
		int r = client_partial_reply(e, res, why, sizeof(why));

		if (r < 0)
			return conn_fail(g, r, "%s", why);
	}
	e->done = true;
	if (e->method == GR_METHOD_REDUCE && doneq_push(g, id) < 0)
		return conn_fail(g, -ENOMEM, "out of memory");
	/* The server closes after these: the request gets its answer, and
	 * the connection is marked broken for everything after it. */
	if (ec == GR_ERR_INVALID_REQUEST || ec == GR_ERR_BUSY) {
		if (msg && msglen)
			conn_fail(g, err_errno[ec], "%.*s", (int)msglen, msg);
		else
			conn_fail(g, err_errno[ec], "%s", gpured_strerror(err_errno[ec]));
		snprintf(g->errcode, sizeof(g->errcode), "%.*s", (int)code->len, code->v.str);
	}
	return 0;
}

/* Parse every whole reply in the read buffer. */
static int process_replies(gpured_t *g)
{
	size_t off = 0;
	int r = 0;

	while (off < g->rbuf.len) {
		gr_obj_tree tree = { 0 };
		long k = gr_obj_parse(g->rbuf.data + off, g->rbuf.len - off, &g->reply_limits, &tree);

		if (k == 0)
			break;
		if (k < 0) {
			r = conn_fail(g, k == -ENOMEM ? -ENOMEM : -EPROTO,
				      "malformed reply from server (%s)", strerror((int)-k));
			break;
		}
		r = handle_reply(g, tree.root, g->rbuf.data + off, (size_t)k);
		gr_obj_tree_deinit(&tree);
		if (r < 0)
			break;
		off += (size_t)k;
	}
	gr_buf_consume(&g->rbuf, off);
	if (r == 0 && g->rbuf.len > g->reply_max_bytes)
		r = conn_fail(g, -EPROTO, "reply larger than %zu bytes", g->reply_max_bytes);
	return r;
}

void client_expect_reply(gpured_t *g, size_t bytes)
{
	if (bytes > g->reply_max_bytes)
		g->reply_max_bytes = bytes;
	if (bytes > g->reply_limits.max_str)
		g->reply_limits.max_str = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
}

/* Read what the socket has, without blocking, and process it: 1 if
 * anything came, 0 if nothing did. */
static int conn_read(gpured_t *g)
{
	for (int got = 0;; got = 1) {
		ssize_t k;
		int r;

		r = gr_buf_reserve(&g->rbuf, READ_CHUNK);
		if (r < 0)
			return conn_fail(g, r, "out of memory");
		k = recv(g->fd, g->rbuf.data + g->rbuf.len, g->rbuf.cap - g->rbuf.len, MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return got;
			return conn_fail(g, -errno, "receive: %s", strerror(errno));
		}
		if (k == 0)
			return conn_fail(g, -ECONNRESET, "server closed the connection");
		g->rbuf.len += (size_t)k;
		r = process_replies(g);
		if (r < 0)
			return r;
		/* A short read drained the socket. */
		if ((size_t)k < READ_CHUNK)
			return 1;
	}
}

/* Block until the socket is readable, then read. */
/*
 * Wait for events on the socket, at most g->timeout_ms without any: a
 * timeout leaves a request half sent or unanswered, so it ends the
 * connection. Returns the revents, or the error.
 */
static int conn_poll(gpured_t *g, short events)
{
	struct pollfd pfd = { .fd = g->fd, .events = events };

	for (;;) {
		int r = poll(&pfd, 1, g->timeout_ms);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return conn_fail(g, -errno, "poll: %s", strerror(errno));
		}
		if (r == 0)
			return conn_fail(g, -ETIMEDOUT, "no progress with the server for %d ms",
					 g->timeout_ms);
		return pfd.revents;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Wait until the socket has something, and read it. With a spin time
 * (gpured_set_spin()) the socket is read without blocking until then, so
 * that a quick reply finds the thread awake; then poll() sleeps.
 */
static int conn_wait_read(gpured_t *g)
{
	int r;

	if (g->spin_ns) {
		uint64_t until = mono_ns() + g->spin_ns;

		do {
			r = conn_read(g);
			if (r != 0)
				return r < 0 ? r : 0;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} while (mono_ns() < until);
	}
	r = conn_poll(g, POLLIN);
	if (r < 0)
		return r;
	r = conn_read(g);
	return r < 0 ? r : 0;
}

int client_wait_read(gpured_t *g)
{
	return conn_wait_read(g);
}

/*
 * Write the iovecs whole, reading replies whenever the socket is readable
 * so that a server blocked on writing replies to us can go on reading. A
 * descriptor (fd >= 0) rides in SCM_RIGHTS with the first bytes that
 * leave, which are the request's own.
 */
int client_send(gpured_t *g, struct iovec *iov, int iovcnt, int fd)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} cm;

	while (iovcnt > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
		if (fd >= 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.space;
			mh.msg_controllen = sizeof(cm.space);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
		}
		ssize_t k = sendmsg(g->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0) {
			int r;

			if (errno == EINTR)
				continue;
			if (errno == EPIPE || errno == ECONNRESET) {
				int err = -errno;

				/* The server may have said why before it
				 * closed: that reason wins over ours. */
				(void)conn_read(g);
				return conn_fail(g, err, "send: %s", strerror(-err));
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return conn_fail(g, -errno, "send: %s", strerror(errno));
			r = conn_poll(g, POLLIN | POLLOUT);
			if (r < 0)
				return r;
			if (r & (POLLIN | POLLHUP | POLLERR)) {
				r = conn_read(g);
				if (r < 0)
					return r;
			}
			continue;
		}
		fd = -1; /* it went with these bytes */
		while (iovcnt > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* ---- requests ------------------------------------------------------- */

/* A request far older than the newest keeps the ring this long at most. */
#define MAX_SLOTS (16u * GPURED_MAX_OUTSTANDING)

int client_pending_add(gpured_t *g, gr_method m, gr_op op, gr_dtype dt, pending **ret)
{
	pending *e;

	if (g->n_live >= GPURED_MAX_OUTSTANDING)
		return client_error(g, -EAGAIN, "%u requests outstanding", GPURED_MAX_OUTSTANDING);
	if (g->n_slots >= MAX_SLOTS)
		return client_error(g, -EAGAIN, "request %u still outstanding after %u newer ones",
				 pending_slot(g, 0)->id, MAX_SLOTS);
	if (g->n_slots == g->cap_pend) {
		size_t cap = g->cap_pend ? g->cap_pend * 2 : 16;
		pending *p = malloc(cap * sizeof(*p));

		if (!p)
			return client_error(g, -ENOMEM, "out of memory");
		/* Unwrap the ring into the new array. */
		for (size_t i = 0; i < g->n_slots; i++)
			p[i] = *pending_slot(g, i);
		free(g->pend);
		g->pend = p;
		g->cap_pend = cap;
		g->head = 0;
	}
	e = pending_slot(g, g->n_slots++);
	*e = (pending){ .id = g->next_id, .live = true, .method = m, .op = op, .dtype = dt };
	g->n_live++;
	if (m == GR_METHOD_REDUCE)
		g->n_live_reduce++;
	/* 0 is the server's "unknown request"; skip it on wrap-around. */
	g->next_id++;
	if (g->next_id == 0)
		g->next_id = 1;
	*ret = e;
	return 0;
}

static void pending_remove(gpured_t *g, pending *e)
{
	pending_clear(e);
	e->live = false;
	g->n_live--;
	if (e->method == GR_METHOD_REDUCE)
		g->n_live_reduce--;
	if (e->partial)
		g->n_live_partial--;
	/* Nothing left to client_collect: what the queue holds is stale. */
	if (g->n_live_reduce == 0) {
		g->doneq_head = 0;
		g->doneq_len = 0;
	}
	/* Collected entries at the old end leave the ring. */
	while (g->n_slots > 0 && !pending_slot(g, 0)->live) {
		g->head = (g->head + 1) & (g->cap_pend - 1);
		g->n_slots--;
	}
}

/* Undo the client_pending_add() of the newest entry, whose request was not sent. */
void client_pending_unadd(gpured_t *g, pending *e)
{
	pending_remove(g, e);
	if (g->n_slots > 0 && pending_slot(g, g->n_slots - 1) == e)
		g->n_slots--;
	g->next_id = e->id;
}

int gpured_submit(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		  uint32_t *ret_id)
{
	return client_submit_data(g, op, dt, data, n, /* partial= */ false, /* ddof= */ 0, ret_id);
}

int client_submit_data(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		       bool partial, uint64_t ddof, uint32_t *ret_id)
{
	struct iovec iov[2];
	pending *e;
	size_t esz;
	uint32_t id;
	int r;

	if (g->dead)
		return client_dead(g);
	if ((unsigned)op >= GR_OP_N || (unsigned)dt >= GR_DT_N)
		return client_error(g, -EINVAL, "unknown op or dtype");
	if (!data && n > 0)
		return client_error(g, -EINVAL, "no data");
	esz = gr_dtype_size((gr_dtype)dt);
	if (n > UINT32_MAX / esz)
		return client_error(g, -E2BIG, "%zu elements of %s do not fit in one request (4 GiB - 1)",
				 n, gr_dtype_name((gr_dtype)dt));

	r = client_pending_add(g, GR_METHOD_REDUCE, (gr_op)op, (gr_dtype)dt, &e);
	if (r < 0)
		return r;
	id = e->id;
	if (partial) {
		e->partial = true;
		g->n_live_partial++;
	}

	g->wbuf.len = 0;
	if (op == GPURED_OP_MOMENTS && !partial)
		r = gr_msg_write_reduce_moments_header(&g->wbuf, id, (gr_dtype)dt, ddof,
						       (uint32_t)(n * esz));
	else
		r = (partial ? gr_msg_write_reduce_partial_header : gr_msg_write_reduce_header)(
			&g->wbuf, id, (gr_op)op, (gr_dtype)dt, (uint32_t)(n * esz));
	if (r < 0) {
		client_pending_unadd(g, e);
		return client_error(g, r, "cannot write the request: %s", gpured_strerror(r));
	}
	iov[0] = (struct iovec){ .iov_base = g->wbuf.data, .iov_len = g->wbuf.len };
	iov[1] = (struct iovec){ .iov_base = (void *)data, .iov_len = n * esz };
	/* Replies read during the send only mark entries done; the table
	 * is not reallocated until the next submit. */
	r = client_send(g, iov, n ? 2 : 1, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;
}

/* Hand a finished entry's outcome to the caller and drop it. */
int client_collect(gpured_t *g, pending *e, gpured_value *ret)
{
	int r = e->err;

	if (r < 0) {
		snprintf(g->errmsg, sizeof(g->errmsg), "%s", e->errmsg ? e->errmsg : gpured_strerror(r));
		snprintf(g->errcode, sizeof(g->errcode), "%s", e->errcode ? e->errcode : "");
	} else if (ret) {
		*ret = e->value;
	}
	pending_remove(g, e);
	return r;
}

int gpured_wait(gpured_t *g, uint32_t *ret_id, gpured_value *ret)
{
	*ret_id = 0;
	for (;;) {
		while (g->doneq_len > 0) {
			uint32_t id = g->doneq[g->doneq_head];
			pending *e;

			g->doneq_head++;
			g->doneq_len--;
			if (g->doneq_len == 0)
				g->doneq_head = 0;
			/* Absent if gpured_wait_id() collected it already. */
			e = pending_find(g, id);
			if (e && e->done) {
				*ret_id = id;
				return client_collect(g, e, ret);
			}
		}
		if (g->dead)
			return client_dead(g);
		if (g->n_live_reduce == 0)
			return client_error(g, -ECHILD, "no request outstanding");
		int r = conn_wait_read(g);
		if (r < 0)
			return r;
	}
}

/* Wait until entry id is done; returns it (or NULL with *ret_err). */
pending *client_wait_entry(gpured_t *g, uint32_t id, int *ret_err)
{
	for (;;) {
		pending *e = pending_find(g, id);

		if (!e) {
			*ret_err = client_error(g, -ESRCH, "request %u is not outstanding", id);
			return NULL;
		}
		if (e->done)
			return e;
		if (g->dead) {
			*ret_err = client_dead(g);
			return NULL;
		}
		*ret_err = conn_wait_read(g);
		if (*ret_err < 0) {
			/* its own reply may have come in the read that failed */
			e = pending_find(g, id);
			return e && e->done ? e : NULL;
		}
	}
}

int gpured_wait_id(gpured_t *g, uint32_t id, gpured_value *ret)
{
	pending *e;
	int r;

	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	return client_collect(g, e, ret);
}

int gpured_reduce(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		  gpured_value *ret)
{
	uint32_t id;
	int r;

	r = gpured_submit(g, op, dt, data, n, &id);
	if (r < 0)
		return r;
	return gpured_wait_id(g, id, ret);
}

int gpured_sum_f32(gpured_t *g, const float *x, size_t n, double *ret)
{
	gpured_value v;
	int r;

	r = gpured_reduce(g, GPURED_OP_SUM, GPURED_F32, x, n, &v);
	if (r < 0)
		return r;
	*ret = v.v.f;
	return 0;
}

int gpured_sum_i64(gpured_t *g, const int64_t *x, size_t n, int64_t *ret)
{
	gpured_value v;
	int r;

	r = gpured_reduce(g, GPURED_OP_SUM, GPURED_I64, x, n, &v);
	if (r < 0)
		return r;
	*ret = v.v.i;
	return 0;
}

/*
 * Send a request without parameters and wait for its reply. For stats and
 * info, *ret_reply receives the whole reply message (the caller frees it).
 */
static int call_simple(gpured_t *g, gr_method m, uint8_t **ret_reply, size_t *ret_len)
{
	struct iovec iov;
	pending *e = NULL;
	uint32_t id;
	int r;

	if (g->dead)
		return client_dead(g);
	r = client_pending_add(g, m, GR_OP_SUM, GR_DT_I32, &e);
	if (r < 0)
		return r;
	id = e->id;
	g->wbuf.len = 0;
	r = gr_msg_write_request(&g->wbuf, id, m);
	if (r < 0) {
		client_pending_unadd(g, e);
		return client_error(g, r, "cannot write the request: %s", gpured_strerror(r));
	}
	iov = (struct iovec){ .iov_base = g->wbuf.data, .iov_len = g->wbuf.len };
	r = client_send(g, &iov, 1, -1);
	if (r < 0)
		return r;
	e = client_wait_entry(g, id, &r);
	if (!e)
		return r;
	if (e->err == 0 && ret_reply) {
		*ret_reply = e->reply;
		*ret_len = e->reply_len;
		e->reply = NULL;
	}
	return client_collect(g, e, NULL);
}

int gpured_ping(gpured_t *g)
{
	return call_simple(g, GR_METHOD_PING, NULL, NULL);
}

/* The result (4th item) of a reply message, parsed into *tree. */
int client_call_result(gpured_t *g, gr_method m, uint8_t **ret_bytes, gr_obj_tree *tree,
		       const gr_obj **ret_result)
{
	uint8_t *bytes = NULL;
	size_t len = 0;
	long k;
	int r;

	r = call_simple(g, m, &bytes, &len);
	if (r < 0)
		return r;
	k = gr_obj_parse(bytes, len, &gr_msg_response_limits, tree);
	if (k <= 0) {
		/* It parsed when it arrived. */
		free(bytes);
		return client_error(g, -EPROTO, "reply no longer parses");
	}
	*ret_bytes = bytes;
	*ret_result = &tree->root->v.items[3];
	return 0;
}
