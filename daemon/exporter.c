#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/exporter.h"
#include "util/log.h"
#include "daemon/server.h"
#include "proto/metrics.h"

/*
 * Scrapers are few and quick: one connection, a request of a few hundred
 * bytes sent at once, an answer of a few KiB. Anything slower is either
 * broken or an attempt to hold the server's connections, so every HTTP
 * connection lives on a budget:
 *
 * - it must have sent its whole request HTTP_REQUEST_MS after it was
 *   accepted, and is gone HTTP_LIFETIME_MS after it was accepted,
 *   answered or not (each answer says "Connection: close", so one
 *   connection is one request and these bound the request);
 * - nothing received or sent for HTTP_IDLE_S closes it sooner (MHD's own
 *   timeout, which each byte resets, so on its own it bounds nothing: a
 *   byte a second would keep a connection forever);
 * - past HTTP_CONNECTIONS_MAX open, the oldest that has not sent its
 *   request yet is closed, so clients that hold connections cannot keep
 *   a scraper out; MHD's own limit, twice that, only stops accepting
 *   while the closed ones go.
 *
 * MHD has no total deadline of its own, nor a way to close a connection
 * outside its callbacks, and none of its callbacks is called while a
 * request line trickles in. So the deadlines are the exporter's: it
 * notes each connection's accept time (MHD_OPTION_NOTIFY_CONNECTION)
 * and shuts down (shutdown(2)) the socket of one past its deadline; MHD
 * then reads the end of the stream and closes it the usual way. For that
 * to be safe the sweep must run on the thread that runs MHD, or MHD
 * could close the connection and a new one get the same descriptor
 * between the look and the shutdown(). MHD's internal thread runs no
 * code of ours on a timer, so the exporter runs MHD itself, on a thread
 * of its own (external polling, epoll), and sweeps after each MHD_run().
 */
#define HTTP_CONNECTIONS_MAX 64u
#define HTTP_REQUEST_MS 2000u
#define HTTP_LIFETIME_MS 5000u
#define HTTP_IDLE_S 1u
/* A request follows its connection at once (with the handshake's last
 * packet): well within this, even one that crossed the world. */
#define HTTP_GRACE_MS 50u
/*
 * Connections the kernel queues while MHD is at its limit. Past that
 * queue a new one's handshake is dropped, and retried a second later or
 * more; in it, one waits its turn, and at worst the queue moves by
 * HTTP_CONNECTIONS_MAX every HTTP_GRACE_MS (those over the cap that are
 * closed), so about a fifth of a second from end to end.
 */
#define HTTP_BACKLOG 256
/* A scrape's request headers are a few hundred bytes; MHD answers a
 * larger request with an error. Bounds the memory each connection holds. */
#define HTTP_CONNECTION_MEMORY (16u << 10)

/* One HTTP connection (MHD's socket context), on the HTTP thread only. */
typedef struct http_conn http_conn;
struct http_conn {
	http_conn *prev, *next; /* in accept order */
	uint64_t accepted_ns;
	int fd;
	bool requested; /* the whole request is in: it is being answered */
	bool shut;      /* shut down here: MHD closes it on its next round */
};

struct gr_exporter {
	gr_server *srv;
	uv_timer_t timer;
	struct MHD_Daemon *mhd;
	pthread_t thread;
	bool thread_started;
	int wake_fd;          /* an eventfd: the HTTP thread stops when it is readable */
	int epoll_fd;         /* MHD's, which the HTTP thread polls */
	bool started;         /* MHD_start_daemon() returned: its messages are clients' */
	uint64_t log_warn_ns; /* MHD's next message that may be a warning */
	/* The HTTP thread's. */
	http_conn *conns_head, *conns_tail;
	unsigned nconns;  /* in the list and not shut */
	uint64_t nclosed; /* connections MHD closed so far */
	/* The loop's: filled each tick, then copied into shared. */
	gr_metrics scratch;
	/* The HTTP thread's: shared is copied here, then rendered. Only that
	 * thread serves, so one is enough. */
	gr_metrics serving;
	pthread_mutex_t lock; /* guards shared */
	gr_metrics shared;
};

/* ---- the loop side ---- */

static void exporter_sample(gr_exporter *e, gr_metrics *m)
{
	gr_server *s = e->srv;
	gr_backend *be = s->backend;
	unsigned ndevices = gr_backend_ndevices(be);
	uint64_t cum[GR_STATS_HIST_BOUNDS];

	memset(m, 0, offsetof(gr_metrics, devices));
	snprintf(m->version, sizeof(m->version), "%s", GPURED_VERSION);
	m->uptime_s = (double)(uv_hrtime() - s->stats.start_ns) / 1e9;
	m->requests = s->stats.requests;
	m->errors = s->stats.errors;
	m->connections = s->stats.connections;
	m->connections_total = s->stats.connections_total;
	m->connections_refused = s->stats.connections_refused;
	m->connections_timed_out = s->stats.write_timeouts;
	m->inflight = s->stats.inflight;
	m->elements = s->stats.elements;
	m->batches = be->batches;
	m->routed_cpu = s->sched.routed;
	m->regions = s->stats.regions;
	m->mapped_bytes = s->mapped_bytes;
	m->bytes_socket = s->stats.bytes_in;
	m->bytes_shm = s->stats.bytes_shm;
	m->bytes_device = s->stats.bytes_device;
	m->stalls_staging = s->stats.stalls_staging;
	m->stalls_chunks = s->stats.stalls_chunks;
	m->stalls_limits = s->stats.stalls_limits;

	for (unsigned i = 0; i < ndevices && m->ndevices < GR_METRICS_DEVICES_MAX; i++) {
		gr_metrics_device *md = &m->devices[m->ndevices++];
		gr_device_info d;

		be->ops->describe(be, i, &d);
		md->index = (uint64_t)d.index;
		snprintf(md->kind, sizeof(md->kind), "%s", d.kind);
		snprintf(md->name, sizeof(md->name), "%s", d.name);
		md->up = d.healthy;
		md->jobs = d.jobs;
	}

	_Static_assert(GR_STATS_HIST_BOUNDS <= GR_METRICS_BUCKETS_MAX, "the histogram fits");
	m->count = gr_stats_hist_cumulative(&s->stats, cum);
	m->nbuckets = GR_STATS_HIST_BOUNDS;
	for (unsigned i = 0; i < GR_STATS_HIST_BOUNDS; i++) {
		m->le_us[i] = gr_stats_hist_le_us[i];
		m->counts[i] = cum[i];
	}
	m->sum_s = (double)s->stats.hist_sum_ns / 1e9;
}

/* A sample's bytes that matter: all but the devices that are not there. */
static void metrics_copy(gr_metrics *dst, const gr_metrics *src)
{
	memcpy(dst, src, offsetof(gr_metrics, devices) + src->ndevices * sizeof(gr_metrics_device));
	memcpy(&dst->nbuckets, &src->nbuckets, sizeof(gr_metrics) - offsetof(gr_metrics, nbuckets));
}

/*
 * Publish the sample, unless the HTTP thread is copying the last one out
 * right now: the loop never waits for it (that thread may be preempted
 * while it holds the lock). It tries again in a millisecond instead.
 * True when published.
 */
static bool exporter_publish(gr_exporter *e, bool wait)
{
	if (wait)
		pthread_mutex_lock(&e->lock);
	else if (pthread_mutex_trylock(&e->lock) != 0)
		return false;
	metrics_copy(&e->shared, &e->scratch);
	pthread_mutex_unlock(&e->lock);
	return true;
}

static void exporter_timer_cb(uv_timer_t *t)
{
	gr_exporter *e = t->data;

	exporter_sample(e, &e->scratch);
	if (!exporter_publish(e, /* wait= */ false))
		uv_timer_start(&e->timer, exporter_timer_cb, 1, GR_EXPORTER_INTERVAL_MS);
}

/* ---- the HTTP side, on libmicrohttpd's thread ---- */

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *body,
			       const char *allow)
{
	struct MHD_Response *rsp =
		MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result r;

	if (!rsp)
		return MHD_NO;
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (allow)
		MHD_add_response_header(rsp, MHD_HTTP_HEADER_ALLOW, allow);
	r = MHD_queue_response(conn, status, rsp);
	MHD_destroy_response(rsp);
	return r;
}

static enum MHD_Result exporter_serve(gr_exporter *e, struct MHD_Connection *conn)
{
	struct MHD_Response *rsp;
	enum MHD_Result r;
	gr_buf b;

	pthread_mutex_lock(&e->lock);
	metrics_copy(&e->serving, &e->shared);
	pthread_mutex_unlock(&e->lock);

	gr_buf_init(&b);
	if (gr_metrics_render(&e->serving, &b) < 0) {
		gr_buf_deinit(&b);
		return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
	}
	/* MHD frees the buffer with free(), as gr_buf allocates it */
	rsp = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_FREE);
	if (!rsp) {
		gr_buf_deinit(&b);
		return MHD_NO;
	}
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, GR_METRICS_CONTENT_TYPE);
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONNECTION, "close");
	r = MHD_queue_response(conn, MHD_HTTP_OK, rsp);
	MHD_destroy_response(rsp);
	return r;
}

static enum MHD_Result exporter_handler(void *cls, struct MHD_Connection *conn, const char *url,
					const char *method, const char *version,
					const char *upload_data, size_t *upload_data_size,
					void **req_cls)
{
	gr_exporter *e = cls;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	/* From here on its deadline is the lifetime's: see the top. */
	if (ci && ci->socket_context)
		((http_conn *)ci->socket_context)->requested = true;
	if (strcmp(url, "/metrics") != 0)
		return respond(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n", NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n",
			       "GET, HEAD");
	return exporter_serve(e, conn);
}

/*
 * libmicrohttpd's own messages, in its format. Until the server runs they
 * say why it cannot start. After, most are about what one client did
 * (closed early, sent too much), so that no client can flood the log
 * they are warnings at most once a minute, and debug messages otherwise.
 * On the HTTP thread, or the loop's while that thread is not running.
 */
#define HTTP_LOG_WARN_NS (60 * UINT64_C(1000000000))

__attribute__((format(printf, 2, 0)))
static void exporter_mhd_log(void *cls, const char *fmt, va_list ap)
{
	gr_exporter *e = cls;
	int level = LOG_WARNING;
	char line[512];
	size_t n;

	if (e->started) {
		uint64_t now = uv_hrtime();

		if (now < e->log_warn_ns)
			level = LOG_DEBUG;
		else
			e->log_warn_ns = now + HTTP_LOG_WARN_NS;
	}
	if (level > gr_log_max_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	gr_log(level, "metrics: %s", line);
}

/* ---- each connection's deadline, on the HTTP thread ---- */

static void http_conn_shut(gr_exporter *e, http_conn *c)
{
	/* MHD reads the end of the stream next round and closes it; the
	 * descriptor stays MHD's to close. */
	shutdown(c->fd, SHUT_RDWR);
	c->shut = true;
	e->nconns--;
}

static void exporter_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			    enum MHD_ConnectionNotificationCode toe)
{
	gr_exporter *e = cls;
	const union MHD_ConnectionInfo *ci;
	http_conn *c;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		e->nclosed++;
		c = *socket_context;
		if (!c)
			return;
		*socket_context = NULL;
		if (c->prev)
			c->prev->next = c->next;
		else
			e->conns_head = c->next;
		if (c->next)
			c->next->prev = c->prev;
		else
			e->conns_tail = c->prev;
		if (!c->shut)
			e->nconns--;
		free(c);
		return;
	}
	if (toe != MHD_CONNECTION_NOTIFY_STARTED)
		return;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	c = ci ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		/* With no deadline it could be held for ever: not served. */
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
		return;
	}
	c->fd = ci->connect_fd;
	c->accepted_ns = uv_hrtime();
	c->prev = e->conns_tail;
	if (e->conns_tail)
		e->conns_tail->next = c;
	else
		e->conns_head = c;
	e->conns_tail = c;
	e->nconns++;
	*socket_context = c;
}

/*
 * Shut down every connection past its deadline, and while more than
 * HTTP_CONNECTIONS_MAX are open, the oldest still sending its request.
 * Not one accepted less than HTTP_GRACE_MS ago: MHD may not have read
 * the request that came right behind it yet (the cap is exceeded for
 * that long instead, up to MHD's own limit). One that is being answered
 * is left alone, it goes by itself. Returns milliseconds until the next
 * deadline, -1 when there is none.
 */
static int exporter_sweep(gr_exporter *e)
{
	uint64_t now = uv_hrtime(), next = UINT64_MAX;

	for (http_conn *c = e->conns_head; c; c = c->next) {
		uint64_t ms = c->requested ? HTTP_LIFETIME_MS : HTTP_REQUEST_MS;
		uint64_t deadline = c->accepted_ns + ms * 1000000;
		uint64_t grace = c->accepted_ns + HTTP_GRACE_MS * UINT64_C(1000000);
		bool over = e->nconns > HTTP_CONNECTIONS_MAX && !c->requested;

		if (c->shut)
			continue;
		if (deadline <= now || (over && grace <= now)) {
			http_conn_shut(e, c);
			continue;
		}
		if (over && grace < next)
			next = grace;
		if (deadline < next)
			next = deadline;
	}
	return next == UINT64_MAX ? -1 : (int)((next - now + 999999) / 1000000);
}

/* The HTTP thread: runs MHD whenever it has something to do, and keeps
 * the deadlines between. */
static void *exporter_thread(void *arg)
{
	gr_exporter *e = arg;
	struct pollfd pfd[2] = {
		{.fd = e->epoll_fd, .events = POLLIN},
		{.fd = e->wake_fd, .events = POLLIN},
	};
	bool again = false;

	for (;;) {
		MHD_UNSIGNED_LONG_LONG mhd_ms;
		int ms = exporter_sweep(e);
		uint64_t closed;

		if (again)
			ms = 0;
		else if (MHD_get_timeout(e->mhd, &mhd_ms) == MHD_YES &&
			 (ms < 0 || mhd_ms < (MHD_UNSIGNED_LONG_LONG)ms))
			ms = (int)mhd_ms;
		if (poll(pfd, 2, ms) < 0) {
			if (errno == EINTR)
				continue;
			log_error("metrics: poll: %s; no longer serving", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		closed = e->nclosed;
		MHD_run(e->mhd);
		/*
		 * At its limit MHD takes its listening socket out of its epoll
		 * set, and puts it back only at the start of a run: once
		 * connections went, run again at once, or those waiting to be
		 * accepted wait for some other event.
		 */
		again = e->nclosed != closed;
	}
	return NULL;
}

/* ---- setting up ---- */

/*
 * Where a port alone is served: the metrics name the host's devices and
 * show its load, so serving them to the network is for whoever names an
 * address to serve them on.
 */
#define HTTP_DEFAULT_HOST "127.0.0.1"

/*
 * "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" into host and port (host
 * in buf or HTTP_DEFAULT_HOST, port in buf). The port is decimal, at
 * most 65535.
 */
static int split_listen(char *buf, const char **ret_host, const char **ret_port)
{
	char *colon;
	size_t n;

	if (buf[0] == '[') {
		char *end = strchr(buf, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		*end = '\0';
		*ret_host = buf + 1;
		*ret_port = end + 2;
	} else if (buf[strspn(buf, "0123456789")] == '\0') {
		*ret_host = HTTP_DEFAULT_HOST;
		*ret_port = buf;
	} else {
		colon = strrchr(buf, ':');
		if (!colon || strchr(buf, ':') != colon)
			return -EINVAL;
		*colon = '\0';
		*ret_host = colon == buf ? HTTP_DEFAULT_HOST : buf;
		*ret_port = colon + 1;
	}
	n = strlen(*ret_port);
	if (!**ret_host || n == 0 || n > 5 ||
	    (*ret_port)[strspn(*ret_port, "0123456789")] != '\0' ||
	    strtoul(*ret_port, NULL, 10) > 65535)
		return -EINVAL;
	return 0;
}

/* A listening socket bound to listen's address only. */
static int exporter_socket(const char *listen_on, char *ret_url, size_t urllen, char *errbuf,
			   size_t errlen)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG,
	};
	struct addrinfo *res = NULL;
	char buf[256];
	const char *host, *port;
	int fd = -1, r, err = 0;

	if (strlen(listen_on) >= sizeof(buf) ||
	    split_listen(strcpy(buf, listen_on), &host, &port) < 0) {
		snprintf(errbuf, errlen,
			 "--metrics-listen %s: want [HOST:]PORT, e.g. 9470 (which is "
			 "127.0.0.1:9470), 0.0.0.0:9470 or [::1]:9470",
			 listen_on);
		return -EINVAL;
	}
	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0) {
		snprintf(errbuf, errlen, "--metrics-listen %s: %s", listen_on, gai_strerror(r));
		return -EINVAL;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		static const int one = 1;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, HTTP_BACKLOG) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(errbuf, errlen, "--metrics-listen %s: %s", listen_on, strerror(err));
		return -err;
	}

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned p = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof(addr));
			p = ntohs(sin->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &sin6->sin6_addr, addr, sizeof(addr));
			p = ntohs(sin6->sin6_port);
		}
	}
	if (ret_url)
		snprintf(ret_url, urllen, ss.ss_family == AF_INET6 ? "http://[%s]:%u/metrics"
								   : "http://%s:%u/metrics",
			 addr, p);
	return fd;
}

int gr_exporter_new(gr_server *s, const char *listen_on, gr_exporter **ret, char *ret_url,
		    size_t urllen, char *errbuf, size_t errlen)
{
	const union MHD_DaemonInfo *di;
	gr_exporter *e;
	int fd, r;

	fd = exporter_socket(listen_on, ret_url, urllen, errbuf, errlen);
	if (fd < 0)
		return fd;
	e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return -ENOMEM;
	}
	e->srv = s;
	e->wake_fd = -1;
	pthread_mutex_init(&e->lock, NULL);
	/* Something to serve before the first tick. */
	exporter_sample(e, &e->scratch);
	exporter_publish(e, /* wait= */ true);

	e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->wake_fd < 0) {
		r = -errno;
		snprintf(errbuf, errlen, "eventfd: %s", strerror(-r));
		close(fd);
		goto fail;
	}
	/* No MHD_USE_INTERNAL_POLLING_THREAD: exporter_thread() runs it. */
	e->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				  exporter_handler, e,
				  /* first, or MHD logs what comes before it itself */
				  MHD_OPTION_EXTERNAL_LOGGER, exporter_mhd_log, e,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				  MHD_OPTION_NOTIFY_CONNECTION, exporter_notify, e,
				  MHD_OPTION_CONNECTION_LIMIT, 2 * HTTP_CONNECTIONS_MAX,
				  MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				  (size_t)HTTP_CONNECTION_MEMORY,
				  MHD_OPTION_END);
	if (!e->mhd) {
		snprintf(errbuf, errlen, "--metrics-listen %s: cannot start the HTTP server",
			 listen_on);
		close(fd);
		r = -EIO;
		goto fail;
	}
	e->started = true;
	di = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di || di->epoll_fd < 0) {
		snprintf(errbuf, errlen, "--metrics-listen %s: the HTTP server has no epoll set",
			 listen_on);
		r = -EIO;
		goto fail;
	}
	e->epoll_fd = di->epoll_fd;
	if ((r = uv_timer_init(s->loop, &e->timer)) < 0) {
		snprintf(errbuf, errlen, "uv_timer_init: %s", uv_strerror(r));
		goto fail;
	}
	e->timer.data = e;
	r = -pthread_create(&e->thread, NULL, exporter_thread, e);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot start the HTTP thread: %s", strerror(-r));
		gr_exporter_close(e);
		return r;
	}
	e->thread_started = true;
	uv_timer_start(&e->timer, exporter_timer_cb, GR_EXPORTER_INTERVAL_MS,
		       GR_EXPORTER_INTERVAL_MS);
	/* it does not keep the loop alive: the listener and connections do */
	uv_unref((uv_handle_t *)&e->timer);
	*ret = e;
	return 0;

fail:
	/* MHD closes the listening socket once it has it */
	if (e->mhd)
		MHD_stop_daemon(e->mhd);
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	pthread_mutex_destroy(&e->lock);
	free(e);
	return r;
}

static void exporter_closed(uv_handle_t *h)
{
	gr_exporter *e = h->data;

	pthread_mutex_destroy(&e->lock);
	free(e);
}

gr_exporter *gr_exporter_close(gr_exporter *e)
{
	if (!e)
		return NULL;
	if (e->thread_started) {
		static const uint64_t one = 1;

		/* an eventfd's counter cannot be full: one write wakes it */
		if (write(e->wake_fd, &one, sizeof(one)) < 0)
			log_warning("metrics: cannot wake the HTTP thread: %s", strerror(errno));
		pthread_join(e->thread, NULL);
		e->thread_started = false;
	}
	if (e->mhd) {
		/* closes its sockets, the listener too, and the connections'
		 * notifications free what the HTTP thread kept */
		MHD_stop_daemon(e->mhd);
		e->mhd = NULL;
	}
	if (e->wake_fd >= 0) {
		close(e->wake_fd);
		e->wake_fd = -1;
	}
	uv_close((uv_handle_t *)&e->timer, exporter_closed);
	return NULL;
}
