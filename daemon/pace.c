/*
 * Pacing a client that streams large arrays while others wait, on a host
 * short of CPU (--pace-bytes-per-ms, --pace-cpu-pressure).
 *
 * Where every thread has a CPU, a round of the loop is what a small
 * request waits for, and the 64 KiB share (conn.c) keeps that round
 * short. Where the loop, the workers and the clients share too few CPUs,
 * a small request waits for a CPU instead, and a stream keeps several
 * threads runnable: the loop copying it, the workers reducing it, its
 * client writing it. A connection that has read its bytes for the
 * current millisecond, while another connection that streams nothing was
 * read in this millisecond or the last, and while the kernel says tasks
 * wait for a CPU, stops being polled until the next millisecond: its
 * client then blocks on a full socket, and those threads sleep.
 *
 * A connection alone is never paced, nor are streams whose only company
 * is other streams, nor any on a host whose CPUs are free; a paced one is
 * polled again every millisecond, so it always makes progress.
 */
#include <string.h>
#include <uv.h>

#include "util/log.h"
#include "daemon/server.h"

/* A connection that read this many milliseconds ago or less counts as
 * being read now. */
#define PACE_RECENT_MS 1

static void pace_timer_cb(uv_timer_t *t)
{
	gr_server *s = t->data;

	while (gr_link_linked(&s->paced)) {
		gr_conn *c = gr_container_of(s->paced.next, gr_conn, pace_link);
		gr_link_del(&c->pace_link);
		c->paced = false;
		gr_conn_pump(c); /* polls it again */
	}
}

void gr_pace_init(gr_server *s)
{
	const gr_config *cfg = s->cfg;

	gr_link_init(&s->paced);
	uv_timer_init(s->loop, &s->pace_timer);
	s->pace_timer.data = s;
	uv_unref((uv_handle_t *)&s->pace_timer);
	s->pressure.fd = -1;
	if (cfg->pace_bytes_per_ms == 0)
		return;
	int r = gr_pressure_init(&s->pressure, GR_PRESSURE_PATH, cfg->pace_cpu_pressure);
	if (r < 0)
		log_info("cannot read %s (%s): streams are not paced", GR_PRESSURE_PATH,
			 strerror(-r));
}

void gr_pace_close(gr_server *s)
{
	uv_close((uv_handle_t *)&s->pace_timer, NULL);
	gr_pressure_deinit(&s->pressure);
}

/* The connection's count of bytes moves on to the current millisecond. */
static void pace_roll(gr_conn *c, uint64_t now_ms)
{
	if (c->pace_ms == now_ms)
		return;
	c->pace_prev_bytes = now_ms == c->pace_ms + 1 ? c->pace_bytes : 0;
	c->pace_bytes = 0;
	c->pace_ms = now_ms;
}

uint64_t gr_pace_budget(gr_conn *c, uint64_t budget, uint64_t shared)
{
	gr_server *s = c->srv;
	uint64_t limit = s->cfg->pace_bytes_per_ms;
	uint64_t now = uv_now(s->loop);

	if (limit == 0)
		return budget;
	pace_roll(c, now);
	/* not streaming (nor the pressure file read for it), alone, or
	 * with other streams only */
	if ((c->pace_bytes < limit && c->pace_prev_bytes < limit) || !s->light_conn ||
	    s->light_conn == c || now - s->light_ms > PACE_RECENT_MS ||
	    !gr_pressure_short(&s->pressure, uv_hrtime()))
		return budget;
	if (c->pace_bytes < limit) {
		/* what is left of its millisecond, a share at a time, so that
		 * it comes in the gaps between the others' requests */
		uint64_t left = limit - c->pace_bytes;
		budget = budget < shared ? budget : shared;
		return budget < left ? budget : left;
	}
	c->paced = true;
	gr_link_add_tail(&s->paced, &c->pace_link);
	s->stats.stalls_paced++;
	if (!uv_is_active((uv_handle_t *)&s->pace_timer))
		uv_timer_start(&s->pace_timer, pace_timer_cb, 1, 0);
	return 0;
}

void gr_pace_read(gr_conn *c, uint64_t n)
{
	gr_server *s = c->srv;
	uint64_t limit = s->cfg->pace_bytes_per_ms;

	if (limit == 0)
		return;
	c->pace_bytes += n;
	/* a connection streaming nothing, whose wait a stream would make
	 * longer */
	if (c->pace_bytes < limit && c->pace_prev_bytes < limit) {
		s->light_conn = c;
		s->light_ms = c->pace_ms;
	}
}

void gr_pace_forget(gr_conn *c)
{
	gr_server *s = c->srv;

	gr_link_del(&c->pace_link);
	c->paced = false;
	if (s->light_conn == c)
		s->light_conn = NULL;
}
