#include <inttypes.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/launch.h"
#include "util/log.h"
#include "util/nofile.h"
#include "daemon/server.h"
#include "daemon/service.h"

#define STATUS_INTERVAL_MS 5000

typedef struct service {
	gr_server *srv;
	uv_timer_t ready_timer;
	uv_timer_t status_timer;
	uv_timer_t watchdog_timer;
	uint64_t watchdog_usec;
	bool timers_open;
} service;

static void status_line(service *sv, char *buf, size_t len)
{
	gr_server_status(sv->srv, buf, len);
}

static void ready_timer_cb(uv_timer_t *t)
{
	service *sv = t->data;
	char status[256];

	/* The loop is running, so the socket answers: tell the manager. */
	status_line(sv, status, sizeof(status));
	launch_notify("READY=1\nSTATUS=%s", status);
}

static void status_timer_cb(uv_timer_t *t)
{
	service *sv = t->data;
	char status[256];

	status_line(sv, status, sizeof(status));
	launch_notify("STATUS=%s", status);
}

static void canary_cb(void *userdata, bool ok)
{
	if (ok)
		launch_notify("WATCHDOG=1");
	else
		log_error("device canary failed: not petting the watchdog");
}

static void watchdog_timer_cb(uv_timer_t *t)
{
	service *sv = t->data;

	/* Pet the watchdog only once every device has reduced the canary
	 * right; a device that hangs or fails stops the pings. */
	if (gr_server_canary(sv->srv, canary_cb, sv) == -EBUSY)
		log_warning("device canary still outstanding after %llu ms",
			    (unsigned long long)(sv->watchdog_usec / 2000));
}

static void on_shutdown(gr_server *s)
{
	launch_notify("STOPPING=1\nSTATUS=shutting down");
}

static void on_finished(gr_server *s)
{
	service *sv = s->userdata;

	if (!sv->timers_open)
		return;
	sv->timers_open = false;
	uv_close((uv_handle_t *)&sv->ready_timer, NULL);
	uv_close((uv_handle_t *)&sv->status_timer, NULL);
	uv_close((uv_handle_t *)&sv->watchdog_timer, NULL);
}

int gr_service_main(int argc, char **argv)
{
	gr_config cfg;
	char err[512] = "";
	uv_loop_t loop;
	service sv = {0};
	int fd = -1, r;

	gr_log_init();
	gr_config_init(&cfg);
	r = gr_config_parse(&cfg, argc, argv, err, sizeof(err));
	if (r > 0) {
		gr_config_deinit(&cfg);
		return 0;
	}
	if (r < 0) {
		log_error("%s (see gpured --help)", err);
		gr_config_deinit(&cfg);
		return 2;
	}
	if (cfg.verbosity > 0)
		gr_log_max_level = LOG_DEBUG;
	signal(SIGPIPE, SIG_IGN);
	uint64_t soft, hard;
	if ((r = gr_nofile_raise(&soft, &hard)) < 0)
		log_warning("cannot raise the limit on open files to %" PRIu64 ": %s; it stays %" PRIu64,
			    hard, strerror(-r), soft);
	else
		log_debug("limit on open files: %" PRIu64, soft);

	if ((r = uv_loop_init(&loop)) < 0) {
		log_error("uv_loop_init: %s", uv_strerror(r));
		gr_config_deinit(&cfg);
		return 1;
	}
	if ((r = gr_server_new(&loop, &cfg, &sv.srv, err, sizeof(err))) < 0) {
		log_error("%s", err);
		goto out_loop;
	}
	sv.srv->userdata = &sv;
	sv.srv->on_shutdown = on_shutdown;
	sv.srv->on_finished = on_finished;

	/* The metrics port first: once the socket listens, clients may
	 * connect and look for it. */
	if (cfg.metrics_listen) {
		char url[128] = "";
		r = gr_exporter_new(sv.srv, cfg.metrics_listen, &sv.srv->exporter, url, sizeof(url),
				    err, sizeof(err));
		if (r < 0) {
			log_error("%s", err);
			goto out_server;
		}
		log_notice("metrics on %s (refreshed every %u ms)", url, GR_EXPORTER_INTERVAL_MS);
	}

	r = launch_listen_fd(&fd, err, sizeof(err));
	if (r < 0) {
		log_error("socket activation: %s", err);
		goto out_server;
	}
	r = r > 0 ? gr_server_open_fd(sv.srv, fd, err, sizeof(err))
		  : gr_server_bind(sv.srv, cfg.socket_path, cfg.socket_mode, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		goto out_server;
	}

	gr_backend *be = sv.srv->backend;
	log_notice("listening on %s%s (backend %s, %u device%s, staging %zu KiB in %zu KiB chunks)",
		   sv.srv->path, fd >= 0 ? " (socket activation)" : "", be->name, be->ndevices,
		   be->ndevices == 1 ? "" : "s", be->staging_bytes >> 10, be->chunk_bytes >> 10);
	log_notice("try: gpuredctl --socket %s info", sv.srv->path);

	uv_timer_init(&loop, &sv.ready_timer);
	uv_timer_init(&loop, &sv.status_timer);
	uv_timer_init(&loop, &sv.watchdog_timer);
	sv.ready_timer.data = sv.status_timer.data = sv.watchdog_timer.data = &sv;
	sv.timers_open = true;
	uv_timer_start(&sv.ready_timer, ready_timer_cb, 0, 0);
	uv_timer_start(&sv.status_timer, status_timer_cb, STATUS_INTERVAL_MS, STATUS_INTERVAL_MS);
	uv_unref((uv_handle_t *)&sv.status_timer);
	if (launch_watchdog_usec(&sv.watchdog_usec) && sv.watchdog_usec >= 2000) {
		uint64_t ms = sv.watchdog_usec / 2000;
		uv_timer_start(&sv.watchdog_timer, watchdog_timer_cb, 0, ms);
		uv_unref((uv_handle_t *)&sv.watchdog_timer);
	}

	uv_run(&loop, UV_RUN_DEFAULT);
	r = 0;

out_server:
	on_finished(sv.srv);
	gr_server_free(sv.srv);
out_loop:
	uv_run(&loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&loop) != 0)
		log_warning("handles left open at exit");
	gr_config_deinit(&cfg);
	return r < 0 ? 1 : 0;
}
