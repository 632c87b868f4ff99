/*
 * libgpured's connection: one socket, requests written from the caller's
 * memory, replies read into one growable buffer and matched to the
 * outstanding requests by msgid (pending.c).
 *
 * A reply fills its entry (done): an error as the server said it, a
 * result as the entry's kind reads it. The caller collects entries with
 * gpured_wait()/gpured_wait_id() and the waits of each feature, which
 * remove them.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/conn.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "proto/types.h"
#include "util/cleanup.h"

#define READ_CHUNK 65536u

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
	_cleanup_(closep) int fd = -1;
	gpured_t *g;
	int r;

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
	if (r < 0)
		return -errno;

	/* Best effort: the kernel caps it, and a smaller one still works. */
	int sndbuf = GPURED_SNDBUF_BYTES;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));

	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->fd = fd;
	fd = -1;
	g->next_id = 1;
	g->timeout_ms = -1;
	gr_buf_init(&g->wbuf);
	gr_buf_init(&g->rbuf);
	g->reply_limits = gr_msg_response_limits;
	g->reply_max_bytes = GR_MSG_RESPONSE_MAX_BYTES;
	*ret = g;
	return 0;
}

void gpured_close(gpured_t *g)
{
	if (!g)
		return;
	client_pending_deinit(g);
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

/* The connection ends with the server's error ec, its message and its
 * code: the last thing the server says before it closes. */
static int fail_as_told(gpured_t *g, gr_err ec, const char *msg, uint32_t msglen,
			const gr_obj *code)
{
	int r = client_errno(ec);

	if (msg && msglen)
		client_fail(g, r, "%.*s", (int)msglen, msg);
	else
		client_fail(g, r, "%s", gpured_strerror(r));
	snprintf(g->errcode, sizeof(g->errcode), "%.*s", (int)code->len, code->v.str);
	return r;
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
		return client_fail(g, -EPROTO, "malformed response from server");
	if (ec != GR_OK)
		code = gr_obj_get(&root->v.items[2], "code");

	e = client_pending_find(g, id);
	if (!e || e->done) {
		/* msgid 0, or one we did not send: the server could not tell
		 * which request failed (a broken stream, or "busy" for the
		 * whole connection) and closes the connection. */
		if (ec != GR_OK)
			return fail_as_told(g, ec, msg, msglen, code);
		return client_fail(g, -EPROTO, "response to unknown request %u", id);
	}

	if (ec != GR_OK) {
		e->err = client_errno(ec);
		e->errcode = strndup_len(code->v.str, code->len);
		e->errmsg = strndup_len(msg, msglen);
		if (!e->errcode)
			return client_fail(g, -ENOMEM, "out of memory");
	} else if (e->kind->read) {
		char why[160];
		int r = e->kind->read(e, res, p, n, why, sizeof(why));

		if (r < 0)
			return client_fail(g, r, "%s", why);
	}
	if (client_pending_done(g, e) < 0)
		return client_fail(g, -ENOMEM, "out of memory");
	/* The server closes after these: the request gets its answer, and
	 * the connection is marked broken for everything after it. */
	if (ec == GR_ERR_INVALID_REQUEST || ec == GR_ERR_BUSY)
		fail_as_told(g, ec, msg, msglen, code);
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
			r = client_fail(g, k == -ENOMEM ? -ENOMEM : -EPROTO,
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
		r = client_fail(g, -EPROTO, "reply larger than %zu bytes", g->reply_max_bytes);
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
			return client_fail(g, r, "out of memory");
		k = recv(g->fd, g->rbuf.data + g->rbuf.len, g->rbuf.cap - g->rbuf.len, MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return got;
			return client_fail(g, -errno, "receive: %s", strerror(errno));
		}
		if (k == 0)
			return client_fail(g, -ECONNRESET, "server closed the connection");
		g->rbuf.len += (size_t)k;
		r = process_replies(g);
		if (r < 0)
			return r;
		/* A short read drained the socket. */
		if ((size_t)k < READ_CHUNK)
			return 1;
	}
}

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
			return client_fail(g, -errno, "poll: %s", strerror(errno));
		}
		if (r == 0)
			return client_fail(g, -ETIMEDOUT, "no progress with the server for %d ms",
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
				return client_fail(g, err, "send: %s", strerror(-err));
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return client_fail(g, -errno, "send: %s", strerror(errno));
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

int client_send_request(gpured_t *g, const void *data, size_t bytes, int fd)
{
	struct iovec iov[2] = {
		{ .iov_base = g->wbuf.data, .iov_len = g->wbuf.len },
		{ .iov_base = (void *)data, .iov_len = bytes },
	};

	return client_send(g, iov, bytes ? 2 : 1, fd);
}

/* ---- waiting and collecting ----------------------------------------- */

int client_collect(gpured_t *g, pending *e, gpured_value *ret)
{
	int r = e->err;

	if (r < 0) {
		snprintf(g->errmsg, sizeof(g->errmsg), "%s", e->errmsg ? e->errmsg : gpured_strerror(r));
		snprintf(g->errcode, sizeof(g->errcode), "%s", e->errcode ? e->errcode : "");
	} else if (ret) {
		*ret = e->value;
	}
	client_pending_remove(g, e);
	return r;
}

pending *client_wait_next(gpured_t *g, const client_kind *kind, const char *what, int *ret_err)
{
	for (;;) {
		pending *e = client_pending_next_done(g, kind);

		if (e)
			return e;
		if (g->dead) {
			*ret_err = client_dead(g);
			return NULL;
		}
		if (client_pending_live(g, kind) == 0) {
			*ret_err = client_error(g, -ECHILD, "no %s outstanding", what);
			return NULL;
		}
		*ret_err = conn_wait_read(g);
		if (*ret_err < 0)
			return NULL;
	}
}

int gpured_wait(gpured_t *g, uint32_t *ret_id, gpured_value *ret)
{
	pending *e;
	int r;

	*ret_id = 0;
	e = client_wait_next(g, NULL, "request", &r);
	if (!e)
		return r;
	*ret_id = e->id;
	return client_collect(g, e, ret);
}

pending *client_wait_entry(gpured_t *g, uint32_t id, int *ret_err)
{
	for (;;) {
		pending *e = client_pending_find(g, id);

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
			e = client_pending_find(g, id);
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
