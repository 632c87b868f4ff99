#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench-conn.h"
#include "bench/bench-region.h"
#include "client/gpured.h"
#include "proto/message.h"
#include "proto/obj.h"

#define READ_CHUNK 65536u

static atomic_bool stop_flag;
pthread_barrier_t bench_start_barrier;
uint64_t bench_deadline_ns;

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool time_up(uint64_t now)
{
	if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
		return true;
	if (bench_deadline_ns && now >= bench_deadline_ns) {
		atomic_store(&stop_flag, true);
		return true;
	}
	return false;
}

/*
 * A msgid names its slot in its low 16 bits; the upper 16 bits, never 0,
 * tell one use of the slot from the next. Every msgid is thus at least
 * 0x10000 and is written as a 5-byte uint32, so the header is one template
 * with the msgid patched in.
 */
static uint32_t conn_msgid(conn *c, uint32_t s)
{
	if (++c->gen == 0)
		c->gen = 1;
	return (uint32_t)c->gen << 16 | s;
}

static void conn_fail(worker *w, conn *c, int err, const char *what)
{
	if (c->fail)
		return;
	c->fail = err;
	snprintf(c->failmsg, sizeof(c->failmsg), "%s: %s", what, strerror(-err));
}

static void conn_close(worker *w, conn *c)
{
	if (c->closed)
		return;
	c->closed = true;
	/* What was submitted and not answered failed. */
	w->errors += c->submitted - c->answered;
	if (c->fd >= 0) {
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
}

/* Take free slots for new requests, up to -P in flight and the quota. */
static void conn_submit(worker *w, conn *c, uint64_t now)
{
	while (c->n_free && c->submitted < c->quota && !time_up(now)) {
		uint32_t s = c->free[--c->n_free], id = conn_msgid(c, s);
		slot *sl = &c->slots[s];

		sl->msgid = id;
		sl->t0 = now;
		/* Big-endian, after the 0xce that the template check found. */
		sl->hdr[3] = (uint8_t)(id >> 24);
		sl->hdr[4] = (uint8_t)(id >> 16);
		sl->hdr[5] = (uint8_t)(id >> 8);
		sl->hdr[6] = (uint8_t)id;
		c->wq[(c->wq_head + c->wq_len++) % w->o->depth] = s;
		c->submitted++;
	}
}

/*
 * Write what the ring holds, as many requests as one writev() takes: each
 * is its slot's header and the shared payload. Returns 0 (all written, or
 * the socket is full and EPOLLOUT watched) or a negative errno.
 */
static int conn_flush(worker *w, conn *c)
{
	const bench_data *d = w->d;
	unsigned depth = w->o->depth;

	while (c->wq_len) {
		struct iovec iov[IOV_MAX];
		unsigned n = 0;
		ssize_t k;
		size_t off = c->w_off;

		for (unsigned i = 0; i < c->wq_len && n < IOV_MAX; i++) {
			slot *sl = &c->slots[c->wq[(c->wq_head + i) % depth]];

			if (off < d->hdr_len) {
				iov[n++] = (struct iovec){ sl->hdr + off, d->hdr_len - off };
				off = 0;
			} else {
				off -= d->hdr_len;
			}
			for (unsigned j = 0; j < d->nsegs && n < IOV_MAX; j++) {
				const struct iovec *sg = &d->segs[j];

				if (off < sg->iov_len) {
					iov[n++] = (struct iovec){ (uint8_t *)sg->iov_base + off,
								   sg->iov_len - off };
					off = 0;
				} else {
					off -= sg->iov_len;
				}
			}
		}
		k = writev(c->fd, iov, (int)n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		/* Retire the requests written whole. */
		size_t left = c->w_off + (size_t)k, whole = d->hdr_len + d->wire_bytes;

		while (c->wq_len && left >= whole) {
			left -= whole;
			c->wq_head = (c->wq_head + 1) % depth;
			c->wq_len--;
		}
		c->w_off = left;
	}
	bool want = c->wq_len > 0;

	if (want != c->want_out) {
		struct epoll_event ev = {
			.events = EPOLLIN | (want ? EPOLLOUT : 0),
			.data.ptr = c,
		};

		if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
			return -errno;
		c->want_out = want;
	}
	return 0;
}

/* One parsed reply: find its slot, record its latency, check its value. */
static int conn_reply(worker *w, conn *c, const gr_obj *root, uint64_t now)
{
	const gr_obj *result;
	const char *msg;
	uint32_t id, s, msglen;
	gr_err code;

	if (gr_msg_parse_response(root, &id, &code, &msg, &msglen, &result) < 0)
		return -EBADMSG;
	s = id & 0xffff;
	/* An error for no request (msgid 0: the daemon is busy, or lost the
	 * stream) ends the connection; say what the daemon said. */
	if (id == 0 && code != GR_OK && !c->fail) {
		c->fail = -EPROTO;
		snprintf(c->failmsg, sizeof(c->failmsg), "the daemon says %s: %.*s",
			 gr_err_name(code), msg ? (int)(msglen > 80 ? 80 : msglen) : 0, msg ? msg : "");
		return -EPROTO;
	}
	if (id == 0 || s >= w->o->depth || c->slots[s].msgid != id)
		return -EPROTO;
	bench_latency_add(&w->lat, now - c->slots[s].t0);
	c->slots[s].msgid = 0;
	c->free[c->n_free++] = s;
	c->answered++;
	if (code != GR_OK) {
		w->errors++;
	} else if (!bench_data_reply_ok(w->o->op, w->d, result)) {
		w->errors++;
		w->mismatches++;
	} else {
		w->done++;
	}
	return 0;
}

/* Read what the socket has, and take every whole reply out of it. */
static int conn_read(worker *w, conn *c, uint64_t now)
{
	for (;;) {
		ssize_t k;

		if (c->r_start == c->r_end) {
			c->r_start = c->r_end = 0;
		} else if (c->r_cap - c->r_end < READ_CHUNK / 2 && c->r_start > 0) {
			memmove(c->rbuf, c->rbuf + c->r_start, c->r_end - c->r_start);
			c->r_end -= c->r_start;
			c->r_start = 0;
		}
		if (c->r_cap - c->r_end < READ_CHUNK / 2) {
			size_t cap = c->r_cap * 2;
			uint8_t *p;

			if (cap > GR_MSG_RESPONSE_MAX_BYTES)
				return -EMSGSIZE;
			p = realloc(c->rbuf, cap);
			if (!p)
				return -ENOMEM;
			c->rbuf = p;
			c->r_cap = cap;
		}
		size_t room = c->r_cap - c->r_end;

		k = read(c->fd, c->rbuf + c->r_end, room);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		if (k == 0)
			return -ECONNRESET;
		c->r_end += (size_t)k;
		for (;;) {
			gr_obj_tree tree = { 0 };
			long m = gr_obj_parse(c->rbuf + c->r_start, c->r_end - c->r_start,
					      &gr_msg_response_limits, &tree);
			int r;

			if (m == 0)
				break;
			if (m < 0)
				return (int)m;
			r = conn_reply(w, c, tree.root, now);
			gr_obj_tree_deinit(&tree);
			if (r < 0)
				return r;
			c->r_start += (size_t)m;
		}
		/* A short read emptied the socket: spare the read that would
		 * only say EAGAIN. */
		if ((size_t)k < room)
			return 0;
	}
}

/* A write failed: the daemon may have said why before it closed (busy). */
static void conn_write_failed(worker *w, conn *c, int err, uint64_t now)
{
	if (err == -EPIPE || err == -ECONNRESET)
		(void)conn_read(w, c, now);
	conn_fail(w, c, err, "write");
}

static bool conn_finished(const conn *c)
{
	return c->answered == c->submitted &&
	       (c->submitted >= c->quota || atomic_load_explicit(&stop_flag, memory_order_relaxed));
}

static int conn_open(worker *w, conn *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	unsigned depth = w->o->depth;

	c->slots = calloc(depth, sizeof(*c->slots));
	c->free = calloc(depth, sizeof(*c->free));
	c->wq = calloc(depth, sizeof(*c->wq));
	c->r_cap = READ_CHUNK;
	c->rbuf = malloc(c->r_cap);
	if (!c->slots || !c->free || !c->wq || !c->rbuf)
		return -ENOMEM;
	/* Pop slot 0 first: a stack filled from the top. */
	for (unsigned i = 0; i < depth; i++) {
		c->free[i] = depth - 1 - i;
		memcpy(c->slots[i].hdr, w->d->hdr, w->d->hdr_len);
	}
	c->n_free = depth;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	/* the send buffer libgpured's connections ask for */
	int sndbuf = GPURED_SNDBUF_BYTES;
	(void)setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	/* Connect blocking (the daemon may be slow to accept), then not. */
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (w->d->memfd >= 0) {
		/* map the array once, and name it in every request */
		uint64_t id;
		int r = bench_region_map(c->fd, w->d->memfd, w->d->nbytes, &id);
		if (r < 0)
			return r;
		for (unsigned i = 0; i < depth; i++)
			for (unsigned k = 0; k < 8; k++)
				c->slots[i].hdr[w->d->region_id_at + k] = (uint8_t)(id >> (56 - 8 * k));
	}
	if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	return 0;
}

void bench_conn_deinit(conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->slots);
	free(c->free);
	free(c->wq);
	free(c->rbuf);
}

void *bench_worker_run(void *arg)
{
	worker *w = arg;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	struct epoll_event evs[64];
	unsigned live = 0;
	int r;

	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	r = gpured_socket_path(w->o->socket, path, sizeof(path));
	for (unsigned i = 0; i < w->n_conns; i++) {
		conn *c = &w->conns[i];

		if (r < 0 || w->epfd < 0) {
			conn_fail(w, c, r < 0 ? r : -EMFILE, "socket");
			continue;
		}
		r = conn_open(w, c, path);
		if (r < 0) {
			conn_fail(w, c, r, "connect");
			r = 0;
		}
	}
	/* Start together, so the wall time covers all connections busy. */
	pthread_barrier_wait(&bench_start_barrier);
	w->t_start = bench_now_ns();
	for (unsigned i = 0; i < w->n_conns; i++) {
		conn *c = &w->conns[i];

		if (c->fail) {
			conn_close(w, c);
			continue;
		}
		conn_submit(w, c, w->t_start);
		r = conn_flush(w, c);
		if (r < 0)
			conn_write_failed(w, c, r, bench_now_ns());
		if (c->fail || conn_finished(c))
			conn_close(w, c);
		else
			live++;
	}
	while (live > 0) {
		int n = epoll_wait(w->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), -1);
		uint64_t now;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			w->fail = -errno;
			snprintf(w->failmsg, sizeof(w->failmsg), "epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			conn *c = evs[i].data.ptr;

			if (c->closed)
				continue;
			/* Per connection, not per wake-up: the ones handled
			 * last must not have their requests' clocks started
			 * early. */
			now = bench_now_ns();
			r = 0;
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
				r = conn_read(w, c, now);
				if (r < 0)
					conn_fail(w, c, r, "read");
			}
			if (r >= 0) {
				conn_submit(w, c, now);
				r = conn_flush(w, c);
				if (r < 0)
					conn_write_failed(w, c, r, now);
			}
			if (c->fail || conn_finished(c)) {
				conn_close(w, c);
				live--;
			}
		}
	}
	for (unsigned i = 0; i < w->n_conns; i++)
		conn_close(w, &w->conns[i]);
	return NULL;
}
