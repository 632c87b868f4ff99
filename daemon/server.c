#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine/completion.h"
#include "util/log.h"
#include "daemon/server.h"
#include "proto/offsets.h"

#define CANARY_N 256u
#define CANARY_BYTES 4096u
#define CANARY_SUM ((uint64_t)CANARY_N * (CANARY_N + 1) / 2)

/* ---- request objects ---- */

#define MAX_SPARE_REQUESTS 1024u


gr_request *gr_server_request_get(gr_server *s)
{
	gr_request *req = s->spare_requests;

	if (!req) {
		/* aligned as its chunks' jobs ask */
		req = aligned_alloc(_Alignof(gr_request), sizeof(*req));
		if (req)
			memset(req, 0, sizeof(*req));
		return req;
	}
	s->spare_requests = (gr_request *)req->link.next;
	s->n_spare_requests--;
	/* Everything but the chunks and the accumulator, which are written
	 * before they are read: at a few hundred bytes each they would be
	 * most of the cost of clearing. A request is put back only once each
	 * chunk it used was combined and released (request_settle), which
	 * leaves the chunk without a slot, staged bytes or done: the chunks
	 * it did not use are not touched at all. */
	memset(req, 0, offsetof(gr_request, chunks));
	req->nsubmitted = req->ncombined = 0;
	req->filling = NULL;
	req->filling_start = 0;
	req->result = NULL;
	return req;
}

void gr_server_request_put(gr_server *s, gr_request *req)
{
	if (s->n_spare_requests >= MAX_SPARE_REQUESTS) {
		free(req);
		return;
	}
	req->link.next = (gr_link *)s->spare_requests;
	s->spare_requests = req;
	s->n_spare_requests++;
}

/* ---- batches ---- */

void gr_server_batch_flush(gr_server *s)
{
	gr_job *batch = s->batch_head;

	if (!batch)
		return;
	s->batch_head = s->batch_tail = NULL;
	s->batch_slot = NULL;
	s->batch_n = 0;
	s->batch_bytes = 0;
	uv_timer_stop(&s->batch_timer);
	uv_idle_stop(&s->batch_hold);
	s->backend->ops->submit(s->backend, batch);
}

/* The CPU engine's jobs wait for the check phase (gr_sched_route). */
static bool server_route(gr_server *s, gr_job *job, uint64_t request_bytes)
{
	if (!gr_sched_on_cpu(&s->sched, job, request_bytes, uv_hrtime()))
		return false;
	gr_sched_route(&s->sched, job);
	return true;
}

void gr_server_batch_add(gr_server *s, gr_job *job, gr_slot *slot, uint64_t request_bytes)
{
	if (server_route(s, job, request_bytes))
		return;
	if (s->batch_head && s->batch_slot != slot)
		gr_server_batch_flush(s);
	job->next = NULL;
	if (s->batch_tail) {
		s->batch_tail->next = job;
	} else {
		s->batch_head = job;
		if (s->cfg->batch_delay_us)
			s->batch_t0 = uv_hrtime();
	}
	s->batch_tail = job;
	s->batch_slot = slot;
	s->batch_n++;
	s->batch_bytes += job->n * gr_dtype_size(job->dtype);
	if (s->batch_n >= s->cfg->batch_max_requests || s->batch_bytes >= s->cfg->batch_max_bytes)
		gr_server_batch_flush(s);
}

void gr_server_submit(gr_server *s, gr_job *job, uint64_t request_bytes)
{
	if (server_route(s, job, request_bytes))
		return;
	job->next = NULL;
	s->backend->ops->submit(s->backend, job);
}

static void batch_timer_cb(uv_timer_t *t);
static void batch_hold_cb(uv_idle_t *h);

/*
 * With --batch-delay-us, the pending batch goes out once it is that old,
 * unless it fills first. libuv's timers count whole milliseconds of a
 * clock read in whole milliseconds, so one may fire up to a millisecond
 * late: the timer covers all but the last one to two milliseconds left,
 * and those the loop polls without sleeping (an active idle handle),
 * reading the clock each time round. Called from the check phase and
 * from both handles.
 */
static void batch_hold(gr_server *s)
{
	uint64_t age = uv_hrtime() - s->batch_t0;
	uint64_t delay = (uint64_t)s->cfg->batch_delay_us * 1000;

	if (age >= delay) {
		gr_server_batch_flush(s);
		return;
	}
	uint64_t left_ms = (delay - age) / 1000000;
	if (left_ms > 1) {
		left_ms--;
		if (!uv_is_active((uv_handle_t *)&s->batch_timer))
			uv_timer_start(&s->batch_timer, batch_timer_cb, left_ms, 0);
	} else if (!uv_is_active((uv_handle_t *)&s->batch_hold)) {
		uv_idle_start(&s->batch_hold, batch_hold_cb);
	}
}

static void batch_timer_cb(uv_timer_t *t)
{
	gr_server *s = t->data;
	if (s->batch_head)
		batch_hold(s);
}

static void batch_hold_cb(uv_idle_t *h)
{
	gr_server *s = h->data;
	if (s->batch_head)
		batch_hold(s);
	else
		uv_idle_stop(h);
}

/* ---- busy polling ---- */

/*
 * With --busy-poll-us, the loop keeps polling (an active idle handle makes
 * its poll return at once) until that long has passed since it last read
 * a socket or answered a request (busy_ns). A client that sends its next
 * request within that time finds the loop awake, not asleep in
 * epoll_wait, which saves a wake-up on each round trip at the cost of a
 * busy core while requests keep coming. A completion that answers no one
 * (one chunk of a large request, whose next is a copy's time away) does
 * not keep it polling: a gigabyte in a region is 128 such completions.
 */
static bool busy_poll_window_open(gr_server *s)
{
	return uv_hrtime() - s->busy_ns < (uint64_t)s->cfg->busy_poll_us * 1000;
}

static void busy_poll_cb(uv_idle_t *h)
{
	gr_server *s = h->data;
	if (!busy_poll_window_open(s)) {
		gr_completion_polling_stop(s->cq);
		uv_idle_stop(h);
	}
}

/* After the loop woke from sleep: poll again if the wake-up was an event. */
static void busy_poll_note(gr_server *s)
{
	if (s->cfg->busy_poll_us == 0 || s->finished ||
	    uv_is_active((uv_handle_t *)&s->busy_poll) || !busy_poll_window_open(s))
		return;
	gr_completion_polling_start(s->cq);
	uv_idle_start(&s->busy_poll, busy_poll_cb);
}

/* ---- the check phase: after each poll, once the loop has read what there was ---- */

void gr_server_mark_ready(gr_server *s, gr_conn *c)
{
	if (!c->closing && !gr_link_linked(&c->ready_link))
		gr_link_add_tail(&s->ready, &c->ready_link);
}

void gr_server_mark_dirty(gr_server *s, gr_conn *c)
{
	if (!c->closing && !gr_link_linked(&c->dirty_link))
		gr_link_add_tail(&s->dirty, &c->dirty_link);
}

static void server_check_cb(uv_check_t *h)
{
	gr_server *s = h->data;

	s->polled_last = s->polled;
	s->polled = 0;
	/* Jobs run inline by the submissions below are drained below too:
	 * they need not wake the loop. */
	gr_completion_defer(s->cq, true);
	for (;;) {
		gr_staging_run_waiters(&s->staging);
		while (gr_link_linked(&s->ready)) {
			gr_conn *c = gr_container_of(s->ready.next, gr_conn, ready_link);
			gr_link_del(&c->ready_link);
			gr_conn_pump(c);
		}
		gr_sched_flush(&s->sched);
		if (s->batch_head) {
			if (s->cfg->batch_delay_us > 0)
				batch_hold(s);
			else
				gr_server_batch_flush(s);
		}
		/* Jobs small enough to run inline are already back. */
		gr_completion_drain(s->cq);
		/* ... and their done() may have routed more (a region's
		 * next chunks, a cumsum's next phase) */
		if (!gr_link_linked(&s->ready) && !s->staging.wake_pending && !gr_sched_pending(&s->sched))
			break;
	}
	gr_completion_defer(s->cq, false);
	while (gr_link_linked(&s->dirty)) {
		gr_conn *c = gr_container_of(s->dirty.next, gr_conn, dirty_link);
		gr_link_del(&c->dirty_link);
		gr_conn_flush(c);
	}
	busy_poll_note(s);
}

/* ---- listening ---- */

static void server_connection_cb(uv_stream_t *listener, int status)
{
	gr_server *s = listener->data;

	if (status < 0) {
		log_warning("accept failed: %s", uv_strerror(status));
		return;
	}
	gr_conn_accept(s);
}

static int server_listen(gr_server *s, char *errbuf, size_t errlen)
{
	int r = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, server_connection_cb);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot listen on %s: %s", s->path, uv_strerror(r));
		return r;
	}
	s->listening = true;
	return 0;
}

/* Is something accepting connections on path? */
static bool socket_is_live(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN;
	close(fd);
	return live;
}

int gr_server_bind(gr_server *s, const char *path, unsigned mode, char *errbuf, size_t errlen)
{
	struct stat st;
	int r;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(errbuf, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	if (!(s->path = strdup(path)))
		return -ENOMEM;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(errbuf, errlen, "%s exists and is not a socket; not replacing it",
				 path);
			return -EEXIST;
		}
		if (socket_is_live(path)) {
			snprintf(errbuf, errlen,
				 "another daemon is already listening on %s", path);
			return -EADDRINUSE;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			r = -errno;
			snprintf(errbuf, errlen, "cannot remove stale socket %s: %s", path,
				 strerror(errno));
			return r;
		}
		log_info("replaced stale socket %s", path);
	}
	if ((r = uv_pipe_init(s->loop, &s->listener, 0)) < 0) {
		snprintf(errbuf, errlen, "uv_pipe_init: %s", uv_strerror(r));
		return r;
	}
	s->listener.data = s;
	s->listener_open = true;
	/* Create the file with no access for others, then set the mode
	 * meant: never a moment when it is wider. */
	mode_t old = umask(0177);
	r = uv_pipe_bind(&s->listener, path);
	umask(old);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot bind %s: %s", path, uv_strerror(r));
		return r;
	}
	s->created_path = true;
	if (stat(path, &st) == 0)
		s->path_ino = st.st_ino;
	if (chmod(path, mode) < 0) {
		r = -errno;
		snprintf(errbuf, errlen, "chmod %s: %s", path, strerror(errno));
		return r;
	}
	return server_listen(s, errbuf, errlen);
}

int gr_server_open_fd(gr_server *s, int fd, char *errbuf, size_t errlen)
{
	char buf[PATH_MAX];
	size_t len = sizeof(buf);
	int r;

	if ((r = uv_pipe_init(s->loop, &s->listener, 0)) < 0) {
		snprintf(errbuf, errlen, "uv_pipe_init: %s", uv_strerror(r));
		return r;
	}
	s->listener.data = s;
	s->listener_open = true;
	if ((r = uv_pipe_open(&s->listener, fd)) < 0) {
		snprintf(errbuf, errlen, "uv_pipe_open: %s", uv_strerror(r));
		return r;
	}
	if (uv_pipe_getsockname(&s->listener, buf, &len) == 0 && len > 0 && len < sizeof(buf)) {
		buf[len] = '\0';
		s->path = strdup(buf);
	} else {
		s->path = strdup("(passed socket)");
	}
	if (!s->path)
		return -ENOMEM;
	return server_listen(s, errbuf, errlen);
}

static void server_unlink_socket(gr_server *s)
{
	struct stat st;

	/* Only the file we created, and only if it is still ours. */
	if (s->created_path && lstat(s->path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    st.st_ino == s->path_ino)
		unlink(s->path);
	s->created_path = false;
}

/* ---- canaries ---- */

static void canary_done(gr_job *job)
{
	gr_server *s = job->userdata;

	if (job->status < 0 || job->result.count != CANARY_N || job->result.v.u != CANARY_SUM) {
		gr_device_info d;
		s->backend->ops->describe(s->backend, (unsigned)job->device, &d);
		/* An error that took the device out of service: the daemon
		 * carries on without it, as for any other request's error. */
		bool known = job->status < 0 && !d.healthy;
		if (s->canary_ok || known)
			log_warning("canary reduction on device %d failed: %s%s", job->device,
				    job->status < 0 ? job->errmsg : "wrong result",
				    known ? " (the device is out of service)" : "");
		if (!known)
			s->canary_ok = false;
	}
	if (--s->canary_pending == 0 && s->canary_cb)
		s->canary_cb(s->canary_userdata, s->canary_ok);
}

/*
 * Devices already out of service get no canary: the daemon carries on
 * without them, and stats and info say so. With none left in service
 * (a CUDA daemon without its CPU fallback) nothing could reduce, and that
 * fails at once. The CPU fallback, a device added after the canaries were
 * counted, gets none: it only proves the loop answers.
 */
int gr_server_canary(gr_server *s, void (*cb)(void *userdata, bool ok), void *userdata)
{
	gr_backend *be = s->backend;
	unsigned ndevices = gr_backend_ndevices(be), healthy = 0;

	if (s->canary_pending)
		return -EBUSY;
	s->canary_cb = cb;
	s->canary_userdata = userdata;
	s->canary_ok = true;
	for (unsigned i = 0; i < ndevices; i++) {
		gr_device_info d;
		be->ops->describe(be, i, &d);
		if (!d.healthy)
			continue;
		healthy++;
		if (i >= s->canary_cap)
			continue;
		gr_job *j = &s->canary_jobs[i];
		*j = (gr_job){
			.op = GR_OP_SUM,
			.dtype = GR_DT_I32,
			.data = s->canary_data,
			.n = CANARY_N,
			.device = (int)i,
			.done = canary_done,
			.userdata = s,
		};
		s->canary_pending++; /* a job never completes inside submit() */
		be->ops->submit(be, j);
	}
	if (!healthy) {
		log_warning("canary: no device is in service");
		s->canary_ok = false;
	}
	if (!s->canary_pending)
		cb(userdata, s->canary_ok);
	return 0;
}

/* ---- life cycle ---- */

static void server_finish(gr_server *s);

static void server_close_all(gr_server *s)
{
	while (gr_link_linked(&s->conns))
		gr_conn_close(gr_container_of(s->conns.next, gr_conn, link));
}

static void shutdown_timer_cb(uv_timer_t *t)
{
	gr_server *s = t->data;

	log_warning("shutdown timeout: closing %u connection%s with requests in flight",
		    s->nconns, s->nconns == 1 ? "" : "s");
	server_close_all(s);
}

static void signal_cb(uv_signal_t *h, int signum)
{
	gr_server *s = h->data;

	if (s->shutting_down) {
		log_notice("%s again: closing every connection now", strsignal(signum));
		server_close_all(s);
		return;
	}
	log_notice("%s: finishing requests in flight, then exiting", strsignal(signum));
	gr_server_shutdown(s);
}

void gr_server_conn_closed(gr_server *s)
{
	s->nconns--;
	if (s->shutting_down && s->nconns == 0)
		server_finish(s);
}

void gr_server_shutdown(gr_server *s)
{
	if (s->shutting_down)
		return;
	s->shutting_down = true;
	if (s->on_shutdown)
		s->on_shutdown(s);
	if (s->listener_open) {
		uv_close((uv_handle_t *)&s->listener, NULL);
		s->listener_open = s->listening = false;
	}
	server_unlink_socket(s);
	uv_timer_start(&s->shutdown_timer, shutdown_timer_cb, s->cfg->shutdown_timeout_ms, 0);
	gr_link *l = s->conns.next;
	while (l != &s->conns) {
		gr_conn *c = gr_container_of(l, gr_conn, link);
		l = l->next;
		gr_conn_drain(c);
	}
	if (s->nconns == 0)
		server_finish(s);
}

static void server_close_handles(gr_server *s)
{
	if (s->listener_open) {
		uv_close((uv_handle_t *)&s->listener, NULL);
		s->listener_open = s->listening = false;
	}
	s->exporter = gr_exporter_close(s->exporter);
	if (s->handles_open) {
		uv_close((uv_handle_t *)&s->check, NULL);
		/* posts wake the loop again from here on */
		if (uv_is_active((uv_handle_t *)&s->busy_poll))
			gr_completion_polling_stop(s->cq);
		uv_close((uv_handle_t *)&s->busy_poll, NULL);
		uv_close((uv_handle_t *)&s->batch_timer, NULL);
		uv_close((uv_handle_t *)&s->batch_hold, NULL);
		uv_close((uv_handle_t *)&s->shutdown_timer, NULL);
		uv_close((uv_handle_t *)&s->write_sweep, NULL);
		gr_timeouts_stop(s);
		gr_pace_close(s);
		uv_close((uv_handle_t *)&s->sigterm, NULL);
		uv_close((uv_handle_t *)&s->sigint, NULL);
		s->handles_open = false;
	}
}

/* Every connection is gone: close our handles so the loop can end. The
 * completion queue stays until the backend has given every job back. */
static void server_finish(gr_server *s)
{
	if (s->finished)
		return;
	s->finished = true;
	server_close_handles(s);
	if (s->on_finished)
		s->on_finished(s);
	uv_stop(s->loop);
}

/* How long the daemon's end waits for closes that hang (util/closer.h). */
static unsigned cfg_closer_wait_ms(const gr_server *s)
{
	return s->cfg->shutdown_timeout_ms < 1000 ? s->cfg->shutdown_timeout_ms : 1000;
}

int gr_server_new(uv_loop_t *loop, const gr_config *cfg, gr_server **ret, char *errbuf,
		  size_t errlen)
{
	gr_backend_config bc = {
		.staging_bytes = cfg->staging_bytes,
		.chunk_bytes = cfg->chunk_bytes,
		.threads = cfg->threads,
		.worker_nice = cfg->worker_nice,
		.streams = cfg->streams,
		.inline_max_bytes = cfg->inline_max_bytes,
		.fault = cfg->fault,
		.early = cfg->direct_replies ? &gr_direct_early : NULL,
	};
	gr_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->cfg = cfg;
	gr_link_init(&s->conns);
	gr_link_init(&s->ready);
	gr_link_init(&s->dirty);
	gr_stats_init(&s->stats, uv_hrtime());
	s->limits.max_data_bytes = cfg->max_request_bytes;

	if ((r = gr_completion_new(loop, &s->cq)) < 0) {
		snprintf(errbuf, errlen, "cannot create the completion queue: %s", uv_strerror(r));
		free(s);
		return r;
	}
	gr_completion_set_clock(s->cq, &s->now_ns);
	s->now_ns = uv_hrtime();
	s->busy_ns = s->now_ns;

	gr_sched_config sc = {
		.main = bc,
		.gpu = cfg->backend == GR_BACKEND_CPU	 ? GR_SCHED_GPU_NO
		       : cfg->backend == GR_BACKEND_CUDA ? GR_SCHED_GPU_NEED
							 : GR_SCHED_GPU_AUTO,
		.cpu_fallback = cfg->cpu_fallback,
		.route_max_bytes = cfg->route_cpu_max_bytes,
		.host = cfg->host_data,
	};
	if ((r = gr_sched_init(&s->sched, &sc, s->cq, errbuf, errlen)) < 0)
		goto fail;
	s->backend = s->sched.main;

	/* The last CANARY_BYTES of staging hold the canary's data; the rest
	 * is carved into slots. */
	gr_backend *be = s->backend;
	if (be->chunk_bytes == 0 || be->staging_bytes < be->chunk_bytes + CANARY_BYTES) {
		snprintf(errbuf, errlen, "staging (%zu bytes) must hold a chunk (%zu bytes) and 4 KiB",
			 be->staging_bytes, be->chunk_bytes);
		r = -EINVAL;
		goto fail;
	}
	s->canary_data = (int32_t *)(be->staging + be->staging_bytes - CANARY_BYTES);
	for (unsigned i = 0; i < CANARY_N; i++)
		s->canary_data[i] = (int32_t)(i + 1);
	if ((r = gr_staging_init(&s->staging, be->staging, be->staging_bytes - CANARY_BYTES,
				 be->chunk_bytes)) < 0) {
		snprintf(errbuf, errlen, "cannot carve staging: %s", strerror(-r));
		goto fail;
	}
	/* a batch's worth of small requests to a slot, then a fresh one */
	if (cfg->batch_max_bytes < s->staging.slot_bytes)
		s->staging.batch_span = cfg->batch_max_bytes;
	s->canary_cap = be->ndevices;
	s->canary_jobs = calloc(s->canary_cap, sizeof(gr_job));
	if (!s->canary_jobs) {
		r = -ENOMEM;
		goto fail;
	}
	s->small_max = cfg->small_max_bytes < s->staging.slot_bytes ? cfg->small_max_bytes
								      : s->staging.slot_bytes;
	if ((r = gr_closer_new(&s->closer)) < 0) {
		snprintf(errbuf, errlen, "cannot start the closer's threads: %s", strerror(-r));
		goto fail;
	}
	gr_shares_init(s);

	uv_check_init(loop, &s->check);
	s->check.data = s;
	uv_check_start(&s->check, server_check_cb);
	uv_idle_init(loop, &s->busy_poll);
	s->busy_poll.data = s;
	uv_unref((uv_handle_t *)&s->busy_poll);
	uv_timer_init(loop, &s->batch_timer);
	s->batch_timer.data = s;
	uv_idle_init(loop, &s->batch_hold);
	s->batch_hold.data = s;
	uv_unref((uv_handle_t *)&s->batch_hold);
	uv_timer_init(loop, &s->shutdown_timer);
	s->shutdown_timer.data = s;
	gr_write_timeout_start(s);
	gr_timeouts_start(s);
	gr_pace_init(s);
	uv_signal_init(loop, &s->sigterm);
	uv_signal_init(loop, &s->sigint);
	s->sigterm.data = s->sigint.data = s;
	uv_signal_start(&s->sigterm, signal_cb, SIGTERM);
	uv_signal_start(&s->sigint, signal_cb, SIGINT);
	/* Neither the signal handles nor the timers keep the loop alive by
	 * themselves: the listener and the connections do. */
	uv_unref((uv_handle_t *)&s->sigterm);
	uv_unref((uv_handle_t *)&s->sigint);
	uv_unref((uv_handle_t *)&s->check);
	s->handles_open = true;
	*ret = s;
	return 0;

fail:
	s->closer = gr_closer_free(s->closer, 0);
	gr_sched_deinit(&s->sched);
	s->backend = NULL;
	gr_staging_deinit(&s->staging);
	gr_completion_close(s->cq);
	uv_run(loop, UV_RUN_NOWAIT);
	free(s->canary_jobs);
	free(s);
	return r;
}

void gr_server_free(gr_server *s)
{
	if (!s)
		return;
	server_unlink_socket(s);
	server_close_handles(s);
	/* Requests of connections closed at the deadline may still sit in
	 * the pending batch: they go out too, so that everything they hold
	 * comes back. */
	gr_server_batch_flush(s);
	gr_sched_flush(&s->sched);
	/* regions being registered or unregistered: done before the
	 * backend goes */
	gr_region_pins_close(s);
	/* Wait for the backend's threads to give every job back, then run
	 * the callbacks that release what those jobs held. */
	gr_sched_deinit(&s->sched);
	s->backend = NULL;
	gr_completion_drain(s->cq);
	gr_completion_close(s->cq);
	uv_run(s->loop, UV_RUN_DEFAULT);
	gr_staging_deinit(&s->staging);
	while (s->spare_requests) {
		gr_request *req = s->spare_requests;
		s->spare_requests = (gr_request *)req->link.next;
		free(req);
	}
	free(s->canary_jobs);
	free(s->path);
	/* The closer's threads count each user's closes down in its peer:
	 * they stop (or stop counting) before the peers go. */
	s->closer = gr_closer_free(s->closer, cfg_closer_wait_ms(s));
	gr_peers_deinit(&s->peers);
	free(s);
}
