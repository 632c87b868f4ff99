#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/exporter.h"
#include "daemon/log.h"
#include "daemon/server.h"
#include "proto/metrics.h"

/* Scrapers are few; a slow or stuck one is dropped. */
#define HTTP_CONNECTIONS_MAX 16u
#define HTTP_TIMEOUT_S 10u

struct gr_exporter {
	gr_server *srv;
	uv_timer_t timer;
	struct MHD_Daemon *mhd;
	/* The loop's: filled each tick, then copied into shared. */
	gr_metrics scratch;
	/* The HTTP thread's: shared is copied here, then rendered. Only one
	 * thread serves (MHD_USE_INTERNAL_POLLING_THREAD), so one is enough. */
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
	m->routed_cpu = s->routed;
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

	if (strcmp(url, "/metrics") != 0)
		return respond(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n", NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n",
			       "GET, HEAD");
	return exporter_serve(e, conn);
}

/* libmicrohttpd's own messages: its format, whatever it is */
__attribute__((format(printf, 2, 0)))
static void exporter_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	log_warning("metrics: %s", line);
}

/* ---- setting up ---- */

/* "HOST:PORT", "[V6]:PORT" into host and port (in buf). */
static int split_listen(char *buf, char **ret_host, char **ret_port)
{
	char *colon;

	if (buf[0] == '[') {
		char *end = strchr(buf, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		*end = '\0';
		*ret_host = buf + 1;
		*ret_port = end + 2;
	} else {
		colon = strrchr(buf, ':');
		if (!colon || strchr(buf, ':') != colon)
			return -EINVAL;
		*colon = '\0';
		*ret_host = buf;
		*ret_port = colon + 1;
	}
	return **ret_host && **ret_port ? 0 : -EINVAL;
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
	char buf[256], *host, *port;
	int fd = -1, r, err = 0;

	if (strlen(listen_on) >= sizeof(buf) ||
	    split_listen(strcpy(buf, listen_on), &host, &port) < 0) {
		snprintf(errbuf, errlen,
			 "--metrics-listen %s: want HOST:PORT, e.g. 127.0.0.1:9470 or [::1]:9470",
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
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0)
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
	pthread_mutex_init(&e->lock, NULL);
	/* Something to serve before the first tick. */
	exporter_sample(e, &e->scratch);
	exporter_publish(e, /* wait= */ true);

	e->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
					  MHD_USE_ERROR_LOG,
				  0, NULL, NULL, exporter_handler, e,
				  /* first, or MHD logs what comes before it itself */
				  MHD_OPTION_EXTERNAL_LOGGER, exporter_mhd_log, (void *)NULL,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS_MAX,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
				  MHD_OPTION_END);
	if (!e->mhd) {
		snprintf(errbuf, errlen, "--metrics-listen %s: cannot start the HTTP server",
			 listen_on);
		close(fd);
		pthread_mutex_destroy(&e->lock);
		free(e);
		return -EIO;
	}
	if ((r = uv_timer_init(s->loop, &e->timer)) < 0) {
		MHD_stop_daemon(e->mhd);
		pthread_mutex_destroy(&e->lock);
		free(e);
		snprintf(errbuf, errlen, "uv_timer_init: %s", uv_strerror(r));
		return r;
	}
	e->timer.data = e;
	uv_timer_start(&e->timer, exporter_timer_cb, GR_EXPORTER_INTERVAL_MS,
		       GR_EXPORTER_INTERVAL_MS);
	/* it does not keep the loop alive: the listener and connections do */
	uv_unref((uv_handle_t *)&e->timer);
	*ret = e;
	return 0;
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
	if (e->mhd) {
		/* joins the thread and closes its sockets, the listener too */
		MHD_stop_daemon(e->mhd);
		e->mhd = NULL;
	}
	uv_close((uv_handle_t *)&e->timer, exporter_closed);
	return NULL;
}
