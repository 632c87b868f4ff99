/*
 * Clients that stop halfway. A request whose bytes stop coming holds its
 * staging and its descriptors for as long as its client likes, and a
 * connection that never completes a request holds its place: the sweep
 * here closes, with an error saying why,
 *
 *  - a connection whose request being received got no byte for
 *    --request-timeout-ms while the daemon was reading it;
 *  - one that completed no request in --first-request-timeout-ms after
 *    it connected (off by default: a client may connect before it has
 *    work, and an idle connection holds no more than its user's share);
 *  - one whose descriptors waited --fd-timeout-ms for their request.
 *
 * The same sweep settles what the closer has closed (util/closer.h):
 * users' descriptors are counted down, and connections that were not read
 * while their user's descriptors were over their bound are read again;
 * and it gives memory back after a burst of connections (daemon/trim.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <uv.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "util/log.h"
#include "daemon/trim.h"
#include "proto/request.h"

/* How often the sweep runs: a timeout is then met within this much. */
#define SWEEP_MS 100u
/* At most this many closes are logged one by one a window, the rest
 * counted and logged once when the window ends: a client that times out
 * on purpose cannot flood the log. */
#define LOG_WINDOW_MS 10000u
#define LOG_PER_WINDOW 10u

static uint64_t log_window_ns;
static unsigned log_in_window, log_suppressed;

/* Whether this close is to be logged one by one. */
static bool timeouts_log_this(uint64_t now)
{
	if (now - log_window_ns >= (uint64_t)LOG_WINDOW_MS * 1000000u) {
		if (log_suppressed)
			log_notice("%u more connections closed by timeouts in the last %u s",
				   log_suppressed, LOG_WINDOW_MS / 1000);
		log_window_ns = now;
		log_in_window = log_suppressed = 0;
	}
	if (log_in_window < LOG_PER_WINDOW) {
		log_in_window++;
		return true;
	}
	log_suppressed++;
	return false;
}

#define MS(ns) ((ns) / 1000000u)

static void timeouts_close(gr_conn *c, const char *what, unsigned ms)
{
	gr_server *s = c->srv;
	const gr_req *preq = gr_req_parser_req(c->parser);

	if (timeouts_log_this(uv_hrtime()))
		log_notice("closing the connection of pid %d (uid %u): %s for %u ms", (int)c->pid,
			   (unsigned)c->uid, what, ms);
	s->stats.request_timeouts++;
	if (c->cur) {
		gr_request *req = c->cur;
		c->cur = NULL;
		gr_request_fail(req, /* reply= */ false, GR_ERR_INVALID_REQUEST, "timed out");
	}
	gr_conn_reply_error(c, preq && preq->has_msgid ? preq->msgid : 0, GR_ERR_INVALID_REQUEST,
			    "timed out: %s for %u ms (gpured(8) SECURITY); closing", what, ms);
	c->stall = GR_STALL_CLOSING;
	gr_conn_flush(c);
	gr_conn_maybe_close(c);
}

/* Why c is to close now, or NULL. */
static const char *timeouts_due(const gr_conn *c, uint64_t now, unsigned *ret_ms)
{
	const gr_config *cfg = c->srv->cfg;

	if (cfg->request_timeout_ms && c->reading && !gr_req_parser_idle(c->parser) &&
	    MS(now - c->last_byte_ns) >= cfg->request_timeout_ms) {
		*ret_ms = cfg->request_timeout_ms;
		return "a request of it got no byte";
	}
	if (cfg->fd_timeout_ms && c->fds.n && c->fds_since_ns &&
	    MS(now - c->fds_since_ns) >= cfg->fd_timeout_ms) {
		*ret_ms = cfg->fd_timeout_ms;
		return "file descriptors it sent waited for their request";
	}
	if (cfg->first_request_timeout_ms && !c->served &&
	    MS(now - c->accepted_ns) >= cfg->first_request_timeout_ms) {
		*ret_ms = cfg->first_request_timeout_ms;
		return "it completed no request";
	}
	return NULL;
}

static void timeouts_cb(uv_timer_t *t)
{
	gr_server *s = t->data;
	uint64_t now = uv_hrtime();
	gr_link *l = s->conns.next;

	gr_peers_sweep(&s->peers);
	gr_trim_sweep(s, now);
	while (l != &s->conns) {
		gr_conn *c = gr_container_of(l, gr_conn, link);
		unsigned ms;
		const char *why;

		l = l->next;
		if (c->closing || c->stall == GR_STALL_CLOSING || !c->parser)
			continue;
		if ((why = timeouts_due(c, now, &ms))) {
			timeouts_close(c, why, ms);
			continue;
		}
		if (c->fds_stalled)
			gr_server_mark_ready(s, c);
	}
}

void gr_timeouts_start(gr_server *s)
{
	uv_timer_init(s->loop, &s->timeouts);
	s->timeouts.data = s;
	uv_timer_start(&s->timeouts, timeouts_cb, SWEEP_MS, SWEEP_MS);
	/* the connections keep the loop alive, not their watch */
	uv_unref((uv_handle_t *)&s->timeouts);
}

void gr_timeouts_stop(gr_server *s)
{
	uv_close((uv_handle_t *)&s->timeouts, NULL);
}
