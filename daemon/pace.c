/*
 * Pacing a client that streams large arrays while others wait, on a host
 * short of CPU (--pace-bytes-per-ms, --pace-cpu-pressure).
 *
 * Where every thread has a CPU, a round of the loop is what a small
 * request waits for, and the 64 KiB share (conn.c) keeps that round
 * short. Where the loop, the workers and the clients share too few CPUs,
 * a small request waits for a CPU instead, and a stream keeps several
 * threads runnable: the loop copying it, the workers reducing it, its
 * client writing it. A connection that has read its budget for the
 * current millisecond, while another connection that streams nothing was
 * read in this millisecond or the last, and while the kernel says tasks
 * wait for a CPU, stops being polled until the next millisecond: its
 * client then blocks on a full socket, and those threads sleep.
 *
 * The budget is engine time, not bytes: what a byte costs the engines
 * depends on the data (floats over every exponent take the CPU several
 * times as long a byte as uniform ones), and that time is what the
 * others wait for. Each connection learns from its requests' finished
 * jobs its engines' time a byte, and the daemon everyone's
 * (gr_pace_learn); its cost is the one over the other (gr_pace_cost),
 * and it reads pace_bytes_per_ms over its cost a millisecond
 * (gr_pace_limit): the option's bytes of data of the average cost.
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

/* What a connection's bytes cost, and what everyone's cost, follow the
 * last this many bytes: the same span, so that a stream alone costs the
 * average whatever the host's CPUs make of a byte now (a worker's time
 * on a chunk grows when the host is short of CPU, everyone's alike). */
#define PACE_WINDOW_BYTES ((double)(32u << 20))
/* A job's time a byte is taken within these (ns): a clock that says 0
 * or an engine stalled for seconds teaches no absurd cost. */
#define PACE_NS_MIN (1.0 / 65536.0)
#define PACE_NS_MAX 65536.0

static double pace_clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/* How far a smoothed value moves towards a job's of b bytes. */
static double pace_weight(double b)
{
	return b < PACE_WINDOW_BYTES ? b / PACE_WINDOW_BYTES : 1.0;
}

void gr_pace_learn(gr_pace_est *c, double *ref_ns, unsigned engine, uint64_t bytes, uint64_t ns)
{
	if (engine >= GR_ENGINE_N || bytes < GR_PACE_LEARN_MIN_BYTES || ns == 0)
		return;
	const double w = pace_weight((double)bytes);
	const double per = pace_clamp((double)ns / (double)bytes, PACE_NS_MIN, PACE_NS_MAX);

	/* 0: nothing learned yet, and this job is all there is */
	ref_ns[engine] = ref_ns[engine] > 0 ? ref_ns[engine] + (per - ref_ns[engine]) * w : per;
	if (!c)
		return;
	c->ns[engine] = c->ns[engine] > 0 ? c->ns[engine] + (per - c->ns[engine]) * w : per;
	/* which engines its bytes went to lately, the shares summing to 1 */
	double known = 0;
	for (unsigned e = 0; e < GR_ENGINE_N; e++)
		known += c->share[e];
	for (unsigned e = 0; e < GR_ENGINE_N; e++) {
		const double to = e == engine ? 1.0 : 0.0;
		c->share[e] = known > 0 ? c->share[e] + (to - c->share[e]) * w : to;
	}
}

double gr_pace_cost(const gr_pace_est *c, const double *ref_ns)
{
	double cost = 0, known = 0;

	for (unsigned e = 0; e < GR_ENGINE_N; e++) {
		if (c->share[e] <= 0 || c->ns[e] <= 0 || ref_ns[e] <= 0)
			continue;
		cost += c->share[e] * c->ns[e] / ref_ns[e];
		known += c->share[e];
	}
	return known > 0 ? pace_clamp(cost / known, GR_PACE_COST_MIN, GR_PACE_COST_MAX) : 1.0;
}

uint64_t gr_pace_limit(uint64_t bytes_per_ms, double cost)
{
	if (bytes_per_ms == 0)
		return 0;
	const double c = cost > 0 ? pace_clamp(cost, GR_PACE_COST_MIN, GR_PACE_COST_MAX) : 1.0;
	const double n = (double)bytes_per_ms / c;
	/* the option is at most 64 GiB, and four times that is exact in a
	 * double; at least a byte a millisecond keeps it moving */
	return n < 1.0 ? 1 : (uint64_t)n;
}

void gr_pace_done(gr_server *s, gr_conn *c, const gr_job *job)
{
	/* the bytes pacing counts are those read from a socket into
	 * staging; a job that failed or ran nowhere says nothing of them */
	if (s->cfg->pace_bytes_per_ms == 0 || job->status < 0 || job->where != GR_AT_STAGING ||
	    job->engine == GR_ENGINE_NONE)
		return;
	gr_pace_learn(c ? &c->pace : NULL, s->pace_ref_ns, job->engine,
		      (uint64_t)job->n * gr_dtype_size(job->dtype), job->busy_ns);
}

/* The bytes c reads a millisecond before it is paced. */
static uint64_t pace_conn_limit(const gr_conn *c)
{
	const gr_server *s = c->srv;

	if (s->cfg->pace_bytes_per_ms == 0)
		return 0;
	return gr_pace_limit(s->cfg->pace_bytes_per_ms, gr_pace_cost(&c->pace, s->pace_ref_ns));
}

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
	uint64_t limit = pace_conn_limit(c);
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
	uint64_t limit = pace_conn_limit(c);

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
