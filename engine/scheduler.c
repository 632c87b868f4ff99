/* The scheduler: the engines, and which one runs a job (scheduler.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/scheduler.h"
#include "util/cleanup.h"
#include "util/log.h"

static double rate_clamp(double r)
{
	return r > GR_SCHED_RATE_MIN ? (r < GR_SCHED_RATE_MAX ? r : GR_SCHED_RATE_MAX)
				     : GR_SCHED_RATE_MIN;
}

static void backend_freep(gr_backend **b)
{
	gr_backend_free(*b);
}

static void mover_move(void *ctx, gr_job *list)
{
	gr_backend *cpu = ctx;
	cpu->ops->submit(cpu, list);
}

static void mover_wait_idle(void *ctx)
{
	gr_backend_cpu_wait_idle(ctx);
}

static void mover_describe(void *ctx, gr_device_info *ret)
{
	gr_backend *cpu = ctx;
	cpu->ops->describe(cpu, 0, ret);
}

void gr_sched_mover_cpu(gr_backend *cpu, gr_engine_mover *ret)
{
	*ret = (gr_engine_mover){
		.move = mover_move,
		.wait_idle = mover_wait_idle,
		.describe = mover_describe,
		.ctx = cpu,
	};
}

unsigned gr_sched_beside_threads(unsigned cpus, unsigned ngpus)
{
	unsigned reserve = 2 + 2 * ngpus, half = (cpus + 1) / 2;
	if (cpus == 0)
		return 1;
	return cpus > reserve && cpus - reserve > half ? cpus - reserve : half;
}

static unsigned online_cpus(void)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	return online <= 0 ? 1 : online < 1024 ? (unsigned)online : 1024u;
}

int gr_sched_init(gr_sched *s, const gr_sched_config *cfg, gr_completion *cq, char *errbuf,
		  size_t errlen)
{
	_cleanup_(backend_freep) gr_backend *cpu = NULL, *main = NULL;
	gr_backend_config mc = cfg->main;
	char why[256] = "";
	int r = -ENODEV;

	memset(s, 0, sizeof(*s));
	mc.mover = NULL;
	if (cfg->gpu != GR_SCHED_GPU_NO) {
		/* the GPUs first, their mover (s->mover) filled in before any
		 * job runs, then the CPU engine beside them sized for them */
		if (cfg->cpu_fallback)
			mc.mover = &s->mover;
		r = gr_backend_cuda_new(&mc, cq, &main, why, sizeof(why));
		if (r < 0 && cfg->gpu == GR_SCHED_GPU_NEED) {
			snprintf(errbuf, errlen, "CUDA backend unavailable: %s", why);
			return r;
		}
		if (r < 0) {
			log_info("no CUDA backend (%s); using the CPU", why);
		} else {
			/* no staging of its own: it reads jobs where they lie */
			gr_backend_config cc = {
				.staging_bytes = GR_REDUCE_ALIGN_BYTES,
				.chunk_bytes = GR_REDUCE_ALIGN_BYTES,
				.threads = mc.threads ? mc.threads
						      : gr_sched_beside_threads(online_cpus(),
											  main->ndevices),
				.worker_nice = mc.worker_nice,
				.inline_max_bytes = mc.inline_max_bytes,
				.early = mc.early,
			};
			if ((r = gr_backend_cpu_new(&cc, cq, &cpu, why, sizeof(why))) < 0) {
				snprintf(errbuf, errlen, "the CPU route: %s", why);
				return r;
			}
			gr_sched_mover_cpu(cpu, &s->mover);
		}
	}
	if (r < 0) {
		mc.mover = NULL;
		if ((r = gr_backend_cpu_new(&mc, cq, &main, why, sizeof(why))) < 0) {
			snprintf(errbuf, errlen, "CPU backend: %s", why);
			return r;
		}
	}
	s->cpu = TAKE_PTR(cpu);
	s->main = TAKE_PTR(main);
	if (s->cpu)
		s->route_max = cfg->route_max_bytes;
	s->host = cfg->host;
	/* first guesses, until completions tell: a GPU's host link at 25
	 * GB/s, a CPU core at 4 */
	s->share[0].rate = 25.0;
	s->share[1].rate = 4.0;
	if (s->cpu) {
		gr_device_info d = {0};
		s->cpu->ops->describe(s->cpu, 0, &d);
		s->share[1].rate = rate_clamp(s->share[1].rate * (d.units ? d.units : 1));
	}
	return 0;
}

void gr_sched_deinit(gr_sched *s)
{
	gr_sched_flush(s);
	/* the main engine first: jobs it moved to the CPU engine read its
	 * staging, and it waits for them */
	s->main = gr_backend_free(s->main);
	s->cpu = gr_backend_free(s->cpu);
}

static const char *const host_names[GR_SCHED_HOST_N] = {
	[GR_SCHED_HOST_BOTH] = "both",
	[GR_SCHED_HOST_GPU] = "gpu",
	[GR_SCHED_HOST_CPU] = "cpu",
};

const char *gr_sched_host_name(gr_sched_host h)
{
	return (unsigned)h < GR_SCHED_HOST_N ? host_names[h] : NULL;
}

/* Whether a reduce by op of dtype has the same bits from either engine
 * and wherever its pieces are cut: the exact float sums and sums of
 * squares, integer sums modulo 2^64, min and max, argmin and argmax (the
 * first index of the extreme, -0 below +0, the first NaN), and moments
 * (exact sums of the elements and their squares, and the extremes). */
static bool same_bits_anywhere(gr_op op, gr_dtype dtype)
{
	switch (op) {
	case GR_OP_SUM:
	case GR_OP_MIN:
	case GR_OP_MAX:
	case GR_OP_ARGMIN:
	case GR_OP_ARGMAX:
	case GR_OP_MOMENTS:
		return true;
	case GR_OP_SUMSQ:
		return gr_dtype_is_float(dtype);
	default:
		return false;
	}
}

static uint64_t since(uint64_t now_ns, uint64_t t_ns)
{
	return now_ns > t_ns ? now_ns - t_ns : 0;
}

unsigned gr_sched_pick(const gr_sched_share share[2], uint64_t bytes, uint64_t now_ns)
{
	/* when each would be done with it, its queue ahead of it (rates
	 * are kept within GR_SCHED_RATE_MIN and _MAX) */
	double t_gpu = (double)(share[0].inflight + bytes) / share[0].rate;
	double t_cpu = (double)(share[1].inflight + bytes) / share[1].rate;
	unsigned e = t_cpu < t_gpu, o = !e;
	/* the other one, idle and left out for long: its rate is old news */
	if (!share[o].inflight && since(now_ns, share[o].given_ns) >= GR_SCHED_PROBE_NS &&
	    since(now_ns, share[e].given_ns) < GR_SCHED_PROBE_NS)
		return o;
	return e;
}

uint64_t gr_sched_piece_bytes(const gr_sched_share share[2], unsigned e, bool gpus, uint64_t slot,
			      uint64_t left)
{
	if (left <= slot || !slot)
		return left;
	if (e == 0)
		return slot;
	uint64_t k = GR_SCHED_PIECE_SLOTS;
	if (gpus) {
		/* the CPU's queue reaches as far as the GPUs' and a slot more:
		 * neither engine idles while the other finishes */
		double until = (double)(share[0].inflight + slot) / rate_clamp(share[0].rate);
		double more = until * rate_clamp(share[1].rate) - (double)share[1].inflight;
		double slots = more / (double)slot;
		k = slots < 1                      ? 1
		    : slots < GR_SCHED_PIECE_SLOTS ? (uint64_t)slots
		                                   : GR_SCHED_PIECE_SLOTS;
	}
	uint64_t take = k * slot;
	/* no piece shorter than a slot left over at the end */
	return take >= left || left - take < slot ? left : take;
}

/* The engine for a split piece of bytes: the CPU's where the CPU reads
 * alone (--host-data cpu, or the trial's way), else gr_sched_pick(). */
static unsigned sched_engine(const gr_sched *s, uint64_t bytes, uint64_t now_ns)
{
	if (s->host == GR_SCHED_HOST_CPU || gr_sched_trial_cpu_alone(&s->trial))
		return 1;
	return gr_sched_pick(s->share, bytes, now_ns);
}

/* A split piece of bytes that engine e finished (ok: it succeeded), its
 * count already out of flight: the window of the way in use moves on,
 * and once it is GR_SCHED_TRIAL_NS long the way is kept or changed. */
static void trial_done(gr_sched *s, unsigned e, uint64_t bytes, bool ok, uint64_t now_ns)
{
	gr_sched_trial *t = &s->trial;

	if (s->host != GR_SCHED_HOST_BOTH)
		return;
	t->win_ns += since(now_ns, t->since_ns);
	t->since_ns = now_ns;
	const bool alone = gr_sched_trial_cpu_alone(t);
	if (alone && (e == 0 || s->share[0].inflight)) {
		/* the GPUs' last pieces: not the CPU alone yet */
		t->win_bytes = t->win_ns = 0;
		return;
	}
	if (ok)
		t->win_bytes += bytes;
	if (t->win_ns < GR_SCHED_TRIAL_NS)
		return;
	const double got = (double)t->win_bytes / (double)t->win_ns;
	double *shown = &t->shown[alone];
	*shown = *shown > 0 ? (*shown + got) / 2 : got;
	t->win_bytes = t->win_ns = 0;
	if (t->trying) {
		t->trying = false;
		t->cpu_alone = t->shown[1] > t->shown[0];
		t->next_ns = now_ns + GR_SCHED_TRIAL_EVERY_NS;
	} else if (now_ns >= t->next_ns) {
		t->trying = true;
	}
}

unsigned gr_sched_cpu_workers(const gr_sched *s)
{
	return s->cpu ? s->cpu->workers : s->main ? s->main->workers : 0;
}

bool gr_sched_scan_on_gpu(const gr_sched *s, const gr_job *job, uint64_t request_bytes)
{
	return s->cpu && request_bytes > s->route_max && s->host != GR_SCHED_HOST_CPU &&
	       gr_engine_runs(s->main, job);
}

bool gr_sched_splits(const gr_sched *s, gr_op op, gr_dtype dtype)
{
	return s->cpu && same_bits_anywhere(op, dtype);
}

uint64_t gr_sched_piece(gr_sched *s, gr_op op, gr_dtype dtype, uint64_t request_bytes,
			uint64_t left, uint64_t slot, uint64_t now_ns, uint8_t *ret_split)
{
	*ret_split = 0;
	if (!s->cpu || request_bytes <= s->route_max || s->host == GR_SCHED_HOST_GPU ||
	    !same_bits_anywhere(op, dtype))
		return left < slot ? left : slot;
	const unsigned e = sched_engine(s, left < slot ? left : slot, now_ns);
	*ret_split = (uint8_t)(1 + e);
	return gr_sched_piece_bytes(s->share, e,
				    s->host == GR_SCHED_HOST_BOTH &&
					    !gr_sched_trial_cpu_alone(&s->trial),
				    slot, left);
}

bool gr_sched_on_cpu(gr_sched *s, gr_job *job, uint64_t request_bytes, uint64_t now_ns)
{
	/* the engine gr_sched_piece() chose, if it cut this job's piece */
	const unsigned cut = job->split;
	job->split = 0;
	if (!s->cpu)
		return false;
	/* device memory is read where it lies (what no kernel reduces there
	 * reaches here as a copy to the host) */
	if (job->where == GR_AT_DEVICE)
		return false;
	/* what no GPU kernel runs goes to the CPU, counted as the split's
	 * where its request cut it for the split */
	const bool gpus_run = gr_engine_runs(s->main, job);
	if (!gpus_run && !cut)
		return true;
	if (request_bytes <= s->route_max)
		return true;
	const bool segs = job->kind == GR_JOB_SEGMENTS;
	if (job->where != GR_AT_HOST || (job->kind != GR_JOB_REDUCE && !segs))
		return !gpus_run;
	/* segments whose records follow the cuts stay on the CPU, as
	 * every other piece of their request */
	if (!same_bits_anywhere(job->op, job->dtype))
		return segs || !gpus_run;
	if (s->host == GR_SCHED_HOST_GPU)
		return !gpus_run;
	const uint64_t bytes = (uint64_t)job->n * gr_dtype_size(job->dtype);
	const unsigned e = !gpus_run                ? 1
			   : cut == 1 || cut == 2 ? cut - 1
						  : sched_engine(s, bytes, now_ns);
	gr_sched_share *sh = &s->share[e];
	if (!s->share[0].inflight && !s->share[1].inflight)
		s->trial.since_ns = now_ns; /* some in flight from now */
	sh->given_ns = now_ns;
	if (!sh->inflight)
		sh->since_ns = now_ns; /* busy from now */
	sh->inflight += bytes;
	job->split = (uint8_t)(1 + e);
	return e == 1;
}

void gr_sched_done(gr_sched *s, gr_job *job, uint64_t now_ns)
{
	if (!job->split)
		return;
	gr_sched_share *sh = &s->share[job->split - 1];
	const uint64_t bytes = (uint64_t)job->n * gr_dtype_size(job->dtype);
	job->split = 0;
	/* the engine was busy from since_ns to now */
	const uint64_t dt = since(now_ns, sh->since_ns);
	sh->busy_ns += dt;
	sh->win_ns += dt;
	sh->since_ns = now_ns;
	sh->inflight -= bytes < sh->inflight ? bytes : sh->inflight;
	trial_done(s, (unsigned)(sh - s->share), bytes, job->status >= 0, now_ns);
	if (job->status < 0) {
		/* a failed job teaches nothing: the window it ends is dropped */
		sh->win_bytes = sh->win_ns = 0;
		sh->win_part = sh->inflight != 0;
		return;
	}
	sh->win_bytes += bytes;
	sh->bytes += bytes;
	sh->jobs++;
	/* the rate over the window, smoothed over about four, once the
	 * window is long enough; or sooner where the engine falls idle
	 * after a whole window faster than its rate (one slow start, a
	 * probe), which the start's latency holds down if anything */
	const double shown = sh->win_ns ? (double)sh->win_bytes / (double)sh->win_ns : 0;
	if (sh->win_ns >= GR_SCHED_WINDOW_NS ||
	    (!sh->inflight && !sh->win_part && shown > sh->rate)) {
		if (shown > 0)
			sh->rate = rate_clamp(sh->rate + (shown - sh->rate) / 4);
		sh->win_bytes = sh->win_ns = 0;
		/* the next window holds all of each job it counts only if
		 * it begins with the engine idle */
		sh->win_part = sh->inflight != 0;
	}
}

void gr_sched_route(gr_sched *s, gr_job *job)
{
	job->next = NULL;
	if (s->route_tail)
		s->route_tail->next = job;
	else
		s->route_head = job;
	s->route_tail = job;
	s->routed++;
}

void gr_sched_flush(gr_sched *s)
{
	gr_job *list = s->route_head;

	if (!list)
		return;
	s->route_head = s->route_tail = NULL;
	s->cpu->ops->submit(s->cpu, list);
}
