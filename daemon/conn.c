/*
 * One client connection: reads into a small envelope buffer or, while a
 * bin payload is arriving, straight into staging; feeds the request parser,
 * whose events conn-events.c takes; writes the replies; and closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "util/log.h"
#include "proto/message.h"

void gr_conn_reply_error(gr_conn *c, uint32_t msgid, gr_err code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	c->srv->stats.errors++;
	if (c->closing)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (gr_msg_write_error(&c->wbuf, msgid, code, msg) < 0) {
		log_error("out of memory queueing a reply");
		gr_conn_close(c);
		return;
	}
	gr_server_mark_dirty(c->srv, c);
}

/* ---- parser events ---- */

/* ---- reading ---- */

/* Where the next read goes: straight into staging while a payload is
 * arriving and the envelope buffer is drained, else that buffer. */
static void conn_read_buf(gr_conn *c, uv_buf_t *buf)
{
	void *p;
	size_t n;

	if (c->rpos == c->rlen) {
		c->rpos = c->rlen = 0;
		if ((n = gr_req_parser_window(c->parser, &p)) > 0) {
			c->read_staging = true;
			*buf = uv_buf_init(p, (unsigned)(n > UINT32_MAX ? UINT32_MAX : n));
			return;
		}
	} else if (c->rpos > 0) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	c->read_staging = false;
	*buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(GR_CONN_RBUF_BYTES - c->rlen));
}

static void conn_read_stop(gr_conn *c)
{
	if (c->reading) {
		uv_poll_stop(&c->poll);
		c->reading = false;
	}
}

/* nread bytes arrived where conn_read_buf() said (0: the end of the
 * stream; negative: an errno). */
static void conn_on_read(gr_conn *c, ssize_t nread)
{
	if (nread <= 0) {
		conn_read_stop(c);
		if (nread < 0) {
			log_debug("connection error: %s",
				  nread == -EMFILE ? "too many file descriptors sent at once"
						   : strerror((int)-nread));
			gr_conn_close(c);
			return;
		}
		c->eof = true;
		if (c->cur) {
			gr_request *req = c->cur;
			c->cur = NULL;
			gr_request_fail(req, /* reply= */ false, GR_ERR_INVALID_REQUEST, "truncated");
		}
		gr_conn_maybe_close(c);
		return;
	}
	c->in_read += (uint64_t)nread;
	c->srv->stats.bytes_in += (uint64_t)nread;
	gr_pace_read(c, (uint64_t)nread);
	c->srv->now_ns = uv_hrtime();
	c->srv->busy_ns = c->srv->now_ns;
	c->last_byte_ns = c->srv->now_ns;
	if (c->read_staging) {
		c->read_staging = false;
		c->in_parsed += (uint64_t)nread;
		gr_req_event ev = gr_req_parser_commit(c->parser, (size_t)nread);
		if (!gr_conn_on_event(c, ev)) {
			conn_read_stop(c);
			return;
		}
	} else {
		c->rlen += (size_t)nread;
	}
	gr_conn_pump(c);
}

/* Reads per wake-up at most, as libuv's own streams do, and bytes: a
 * client streaming large arrays then waits its turn behind the others
 * that are ready, since the poll is level-triggered and comes back. */
#define CONN_READS_PER_POLL 32
#define CONN_BYTES_PER_POLL ((ssize_t)1 << 20)
/* and at most this much a read, so that one read is soon over too */
#define CONN_BYTES_PER_READ ((size_t)256 << 10)
/*
 * Bytes a wake-up reads from one connection when the last round of the
 * loop read others too. Copying a client's stream into staging is most of
 * the loop's work while one streams large arrays, and a round of the loop
 * is what every other client waits for: with this share a round lasts
 * some tens of microseconds, rather than the hundreds a megabyte takes,
 * and a client alone still gets the full budget.
 */
#ifndef CONN_BYTES_SHARED
#define CONN_BYTES_SHARED ((ssize_t)64 << 10)
#endif

static void conn_poll_cb(uv_poll_t *h, int status, int events)
{
	gr_conn *c = h->data;

	if (status < 0) {
		log_debug("connection error: %s", uv_strerror(status));
		gr_conn_close(c);
		return;
	}
	if (gr_conn_fds_blocked(c)) {
		/* the timeouts' sweep reads it again (daemon/timeouts.c) */
		if (!c->fds_stalled)
			c->srv->stats.stalls_fds++;
		c->fds_stalled = true;
		conn_read_stop(c);
		return;
	}
	ssize_t total = 0;
	ssize_t budget = c->srv->polled_last > 1 ? CONN_BYTES_SHARED : CONN_BYTES_PER_POLL;
	/* on a host short of CPU, a stream has its bytes a millisecond */
	budget = (ssize_t)gr_pace_budget(c, (uint64_t)budget, (uint64_t)CONN_BYTES_SHARED);
	if (budget == 0) {
		conn_read_stop(c);
		return;
	}
	c->srv->polled++;
	for (int k = 0; k < CONN_READS_PER_POLL && total < budget && c->reading && !c->closing;
	     k++) {
		uv_buf_t b;
		conn_read_buf(c, &b);
		if (b.len == 0) {
			c->read_staging = false;
			return;
		}
		if (b.len > CONN_BYTES_PER_READ)
			b.len = CONN_BYTES_PER_READ;
		if ((ssize_t)b.len > budget - total)
			b.len = (size_t)(budget - total);
		ssize_t n = gr_fdpass_recv(c->rfd, b.base, b.len, &c->fds, c->in_read);
		if (c->fds.n != c->fds_seen)
			gr_conn_fds_sync(c);
		if (n == -EAGAIN) {
			c->read_staging = false;
			return;
		}
		conn_on_read(c, n);
		/* a short read drained the socket */
		if (n < (ssize_t)b.len)
			return;
		total += n;
	}
}

/* Descriptors that came with bytes the parser read and reported nothing
 * for (a notification's) are closed. */
static void conn_drop_stray_fds(gr_conn *c)
{
	int fd;
	if (c->fds.n && gr_req_parser_idle(c->parser) && gr_conn_fds_take(c, &fd) > 0)
		gr_conn_drop_fd(c, fd);
}

void gr_conn_pump(gr_conn *c)
{
	if (c->closing || c->stall == GR_STALL_CLOSING)
		return;
	switch (c->stall) {
	case GR_STALL_STAGING:
	case GR_STALL_CHUNKS:
	case GR_STALL_UNSENT:
		if (gr_conn_set_dest(c) < 0) {
			conn_read_stop(c);
			return;
		}
		break;
	case GR_STALL_LIMITS:
		if (gr_conn_over_limits(c))
			return;
		c->stall = GR_STALL_NONE;
		break;
	case GR_STALL_DRAIN:
		return;
	default:
		break;
	}
	/* Feed until the parser needs bytes: it may have events left to
	 * report even when the buffer is empty (a request that ends with an
	 * empty payload, say). */
	for (;;) {
		gr_req_event ev;
		size_t n = gr_req_parser_feed(c->parser, c->rbuf + c->rpos, c->rlen - c->rpos, &ev);
		c->rpos += n;
		c->in_parsed += n;
		gr_conn_parser_charge(c);
		if (!gr_conn_on_event(c, ev)) {
			conn_read_stop(c);
			return;
		}
		if (ev == GR_REQ_NEED_MORE)
			break;
	}
	conn_drop_stray_fds(c);
	if (c->eof || c->closing) {
		gr_conn_maybe_close(c);
		return;
	}
	/* a paced connection is polled again by the pace timer, and one
	 * whose user's descriptors are over their bound by the sweep */
	if (c->fds_stalled) {
		if (gr_conn_fds_blocked(c))
			return;
		c->fds_stalled = false;
	}
	if (!c->reading && !c->paced) {
		int r = uv_poll_start(&c->poll, UV_READABLE, conn_poll_cb);
		if (r < 0) {
			log_warning("cannot read from a connection: %s", uv_strerror(r));
			gr_conn_close(c);
			return;
		}
		c->reading = true;
	}
}

static void conn_waiter_wake(gr_staging_waiter *w)
{
	gr_conn *c = gr_container_of(w, gr_conn, waiter);
	gr_server_mark_ready(c->srv, c);
}

/* ---- writing ---- */

typedef struct conn_write {
	uv_write_t req;
	gr_conn *conn;
	gr_buf buf;
} conn_write;

/* After a write finished or went to libuv: once nothing of the loop's is
 * left to write, backend threads may send again (or what they held since
 * goes next), and what waited on unsent bytes or on the writes goes on. */
static void conn_after_write(gr_conn *c)
{
	gr_conn_unsent_charge(c);
	/* a stream keeps the backend threads from sending until it ends */
	if (c->direct && !c->stream && c->writing_bytes == 0 && c->wbuf.len == 0 &&
	    gr_direct_written(c->direct))
		gr_server_mark_dirty(c->srv, c);
	if (c->stall == GR_STALL_LIMITS || c->stall == GR_STALL_UNSENT)
		gr_server_mark_ready(c->srv, c);
	gr_conn_maybe_close(c);
}

static void conn_write_cb(uv_write_t *wr, int status)
{
	conn_write *w = gr_container_of(wr, conn_write, req);
	gr_conn *c = w->conn;

	c->writing_bytes -= w->buf.len;
	c->writes_done++;
	gr_buf_deinit(&w->buf);
	free(w);
	if (status < 0) {
		if (status != UV_ECANCELED)
			log_debug("write failed: %s", uv_strerror(status));
		gr_conn_close(c);
		return;
	}
	conn_after_write(c);
}

/* Write wbuf: 0, or -1 when the connection was closed. */
static int conn_write_wbuf(gr_conn *c)
{
	/* Most replies fit in the socket buffer: try the write right away,
	 * and only hand what is left to libuv. */
	uv_buf_t b = uv_buf_init((char *)c->wbuf.data, (unsigned)c->wbuf.len);
	int n = uv_try_write((uv_stream_t *)&c->pipe, &b, 1);
	if (n > 0)
		gr_buf_consume(&c->wbuf, (size_t)n);
	else if (n < 0 && n != UV_EAGAIN) {
		log_debug("write failed: %s", uv_strerror(n));
		gr_conn_close(c);
		return -1;
	}
	if (c->wbuf.len > 0) {
		conn_write *w = malloc(sizeof(*w));
		if (!w) {
			gr_conn_close(c);
			return -1;
		}
		w->conn = c;
		w->buf = c->wbuf;
		gr_buf_init(&c->wbuf);
		c->writing_bytes += w->buf.len;
		b = uv_buf_init((char *)w->buf.data, (unsigned)w->buf.len);
		int r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, conn_write_cb);
		if (r < 0) {
			log_debug("write failed: %s", uv_strerror(r));
			c->writing_bytes -= w->buf.len;
			gr_buf_deinit(&w->buf);
			free(w);
			gr_conn_close(c);
			return -1;
		}
	}
	return 0;
}

void gr_conn_flush(gr_conn *c)
{
	/* while a reply streams, the others wait for its end */
	if (c->closing || c->stream)
		return;
	if (c->direct) {
		/* what backend threads held back goes first */
		if (gr_direct_take(c->direct, &c->wbuf) < 0) {
			log_error("out of memory writing replies");
			gr_conn_close(c);
			return;
		}
	} else if (c->wbuf.len == 0) {
		return;
	}
	if (c->wbuf.len > 0 && conn_write_wbuf(c) < 0)
		return;
	conn_after_write(c);
}

/* ---- streamed replies ---- */

int gr_conn_stream_begin(gr_conn *c, gr_request *req, const void *hdr, size_t len)
{
	if (c->closing)
		return -1;
	/* What backend threads held back, then what the loop queued, then
	 * the stream; taking held also makes the loop count as writing, so
	 * that no thread sends until gr_conn_stream_end (conn_after_write). */
	if ((c->direct && gr_direct_take(c->direct, &c->wbuf) < 0) ||
	    gr_buf_append(&c->wbuf, hdr, len) < 0) {
		log_error("out of memory writing replies");
		gr_conn_close(c);
		return -1;
	}
	c->stream = req;
	return conn_write_wbuf(c);
}

int gr_conn_stream_write(gr_conn *c, void *mem, size_t len)
{
	conn_write *w = c->closing ? NULL : malloc(sizeof(*w));

	if (!w) {
		free(mem);
		gr_conn_close(c);
		return -1;
	}
	w->conn = c;
	w->buf = (gr_buf){ .data = mem, .len = len, .cap = len };
	c->writing_bytes += len;
	/* libuv writes what the socket takes now and queues the rest behind
	 * what is queued already, so the stream stays in order */
	uv_buf_t b = uv_buf_init(mem, (unsigned)len);
	int r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, conn_write_cb);
	if (r < 0) {
		log_debug("write failed: %s", uv_strerror(r));
		c->writing_bytes -= len;
		gr_buf_deinit(&w->buf);
		free(w);
		gr_conn_close(c);
		return -1;
	}
	return 0;
}

void gr_conn_stream_end(gr_conn *c)
{
	c->stream = NULL;
	/* what waited goes out: held direct replies and wbuf */
	gr_server_mark_dirty(c->srv, c);
	/* A request whose reply waited for this one begins its own; that
	 * one may end at once too, and hand on again from this loop. */
	if (c->stream_handover)
		return;
	c->stream_handover = true;
	while (!c->stream && !c->closing) {
		gr_request *next = NULL;
		for (gr_link *l = c->requests.next; l != &c->requests; l = l->next) {
			gr_request *req = gr_container_of(l, gr_request, link);
			if (req->scan.stream_wait) {
				next = req;
				break;
			}
		}
		if (!next)
			break;
		gr_request_cumsum_advance(next);
	}
	c->stream_handover = false;
}

/* ---- lifetime ---- */

void gr_conn_maybe_close(gr_conn *c)
{
	if (c->closing || c->wbuf.len > 0 || c->writing_bytes > 0 ||
	    (c->direct && gr_direct_held(c->direct) > 0))
		return;
	if (c->stall == GR_STALL_CLOSING ||
	    ((c->eof || c->draining) && !c->cur && c->nrequests == 0))
		gr_conn_close(c);
}

static void conn_free(gr_conn *c);

/* The last of the connection's handles closed: free it, unless held. */
static void conn_close_cb(uv_handle_t *h)
{
	gr_conn *c = h->data;

	if (--c->handles > 0 || c->holds > 0)
		return;
	conn_free(c);
}

void gr_conn_hold(gr_conn *c)
{
	c->holds++;
}

void gr_conn_release(gr_conn *c)
{
	if (--c->holds == 0 && c->closing && c->handles == 0)
		conn_free(c);
}

static void conn_free(gr_conn *c)
{
	gr_server *s = c->srv;

	/* The last reference to the socket: its close drops what is still
	 * queued in it, descriptors too, whose closes may wait
	 * (util/closer.h). Shut for reading first, so that nothing more
	 * comes: with nothing queued it closes here, else the closer closes
	 * it, counted against its user until done (gr_conn_close). */
	int queued = 1;
	if (c->rfd >= 0 && shutdown(c->rfd, SHUT_RD) == 0 && ioctl(c->rfd, FIONREAD, &queued) == 0 &&
	    queued == 0) {
		close(c->rfd);
		if (c->rfd_counter)
			atomic_fetch_sub(c->rfd_counter, 1);
	} else {
		gr_closer_close(s->closer, c->rfd, c->uid, c->rfd_counter);
	}
	gr_req_parser_free(c->parser);
	gr_buf_deinit(&c->wbuf);
	c->direct = gr_direct_unref(c->direct);
	free(c->rbuf);
	free(c);
	gr_server_conn_closed(s);
}

void gr_conn_close(gr_conn *c)
{
	gr_server *s = c->srv;

	if (c->closing)
		return;
	c->closing = true;
	c->stream = NULL;
	conn_read_stop(c);
	gr_staging_unwait(&s->staging, &c->waiter);
	gr_link_del(&c->ready_link);
	gr_link_del(&c->dirty_link);
	gr_link_del(&c->link);
	gr_pace_forget(c);

	if (c->cur) {
		gr_request *req = c->cur;
		c->cur = NULL;
		gr_request_fail(req, /* reply= */ false, GR_ERR_INTERNAL, "connection closed");
	}
	/* Requests still in the backend finish on their own and are dropped. */
	while (gr_link_linked(&c->requests)) {
		gr_request *req = gr_container_of(c->requests.next, gr_request, link);
		gr_link_del(&req->link);
		req->conn = NULL;
		c->nrequests--;
	}
	s->stats.connections--;
	gr_fdq_clear(&c->fds);
	gr_conn_fds_sync(c);
	gr_regions_release(&c->regions);
	if (c->peer) {
		gr_conn_share_release(c);
		gr_peers_leave(&s->peers, c->peer);
		c->peer = NULL;
	}
	if (c->direct)
		gr_direct_close(c->direct); /* before the descriptor is */
	if (c->handles > 1)
		uv_close((uv_handle_t *)&c->poll, conn_close_cb);
	uv_close((uv_handle_t *)&c->pipe, conn_close_cb);
}

void gr_conn_drain(gr_conn *c)
{
	c->draining = true;
	if (!c->cur && c->stall == GR_STALL_NONE) {
		c->stall = GR_STALL_DRAIN;
		conn_read_stop(c);
	}
	gr_conn_maybe_close(c);
}

/* Refuse the connection with one busy error saying why, then close. */
static void conn_refuse(gr_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void conn_refuse(gr_conn *c, const char *fmt, ...)
{
	char msg[192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->srv->stats.connections_refused++;
	c->stall = GR_STALL_CLOSING;
	gr_conn_reply_error(c, 0, GR_ERR_BUSY, "%s", msg);
	gr_conn_flush(c);
}

/* Who is it, and may it stay? True when it was refused. */
static bool conn_admit(gr_conn *c)
{
	gr_server *s = c->srv;
	const gr_config *cfg = s->cfg;
	uv_os_fd_t fd;

	if (s->shutting_down) {
		conn_refuse(c, "shutting down");
		return true;
	}
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
	    !gr_peer_cred(fd, &c->uid, &c->gid, &c->pid)) {
		conn_refuse(c, "cannot tell who the peer is (SO_PEERCRED)");
		return true;
	}
	if ((cfg->n_allow_uids || cfg->n_allow_gids) &&
	    !gr_ids_contain(cfg->allow_uids, cfg->n_allow_uids, c->uid) &&
	    !gr_ids_contain(cfg->allow_gids, cfg->n_allow_gids, c->gid)) {
		conn_refuse(c, "uid %u (gid %u) is not allowed to use this daemon", (unsigned)c->uid,
			    (unsigned)c->gid);
		return true;
	}
	if (!(c->peer = gr_peers_join(&s->peers, c->uid))) {
		conn_refuse(c, "out of memory");
		return true;
	}
	c->regions.peer = c->peer;
	char why[192];
	if (!gr_conn_share_take(c, why, sizeof(why))) {
		conn_refuse(c, "%s", why);
		return true;
	}
	return false;
}

void gr_conn_accept(gr_server *s)
{
	gr_conn *c = calloc(1, sizeof(*c));
	int r;

	if (!c) {
		log_error("out of memory accepting a connection");
		return;
	}
	c->srv = s;
	gr_link_init(&c->link);
	gr_link_init(&c->ready_link);
	gr_link_init(&c->dirty_link);
	gr_link_init(&c->pace_link);
	gr_link_init(&c->requests);
	gr_buf_init(&c->wbuf);
	gr_fdq_init(&c->fds, gr_conn_fdq_drop, c);
	gr_regions_init(&c->regions, s, NULL);
	c->rfd = -1;
	c->waiter.wake = conn_waiter_wake;
	if ((r = uv_pipe_init(s->loop, &c->pipe, 0)) < 0) {
		free(c);
		log_error("uv_pipe_init: %s", uv_strerror(r));
		return;
	}
	c->pipe.data = c;
	c->handles = 1;
	s->nconns++;
	s->stats.connections++;
	gr_link_add_tail(&s->conns, &c->link);
	if ((r = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->pipe)) < 0) {
		log_warning("accept: %s", uv_strerror(r));
		gr_conn_close(c);
		return;
	}
	s->stats.connections_total++;
	c->accepted_ns = c->last_byte_ns = uv_hrtime();
	uv_os_fd_t fd;
	if ((r = uv_fileno((uv_handle_t *)&c->pipe, &fd)) < 0) {
		log_warning("accept: %s", uv_strerror(r));
		gr_conn_close(c);
		return;
	}
	/* Reads go through a duplicate of the descriptor, polled on its own
	 * (fdpass.h): libuv watches a descriptor for one handle only, and
	 * the pipe's is for writes. It is also the socket's last reference,
	 * which the closer closes (conn_close_cb), a refused connection's
	 * too: what a client queued in it may block that close. */
	if ((c->rfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		log_warning("accept: cannot duplicate a descriptor: %s", strerror(errno));
		gr_conn_close(c);
		return;
	}
	if (conn_admit(c))
		return;
	c->rbuf = malloc(GR_CONN_RBUF_BYTES);
	if (!c->rbuf || gr_req_parser_new(&s->limits, &c->parser) < 0) {
		log_error("out of memory accepting a connection");
		gr_conn_close(c);
		return;
	}
	if ((r = uv_poll_init(s->loop, &c->poll, c->rfd)) < 0) {
		log_warning("accept: uv_poll_init: %s", uv_strerror(r));
		gr_conn_close(c);
		return;
	}
	c->poll.data = c;
	c->handles++;
	if (s->cfg->direct_replies)
		c->direct = gr_direct_new(fd); /* NULL: the loop writes every reply */
	gr_conn_pump(c);
}
