/* The scheduler: the engines, and which one runs a job (scheduler.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/scheduler.h"
#include "util/cleanup.h"
#include "util/log.h"

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
		/* The CPU engine beside the GPUs': no staging of its own, it
		 * reads jobs where they lie. */
		gr_backend_config cc = {
			.staging_bytes = GR_REDUCE_ALIGN_BYTES,
			.chunk_bytes = GR_REDUCE_ALIGN_BYTES,
			.threads = mc.threads,
			.worker_nice = mc.worker_nice,
			.inline_max_bytes = mc.inline_max_bytes,
			.early = mc.early,
		};
		if ((r = gr_backend_cpu_new(&cc, cq, &cpu, why, sizeof(why))) < 0) {
			snprintf(errbuf, errlen, "the CPU route: %s", why);
			return r;
		}
		gr_sched_mover_cpu(cpu, &s->mover);
		if (cfg->cpu_fallback)
			mc.mover = &s->mover;
		r = gr_backend_cuda_new(&mc, cq, &main, why, sizeof(why));
		if (r < 0 && cfg->gpu == GR_SCHED_GPU_NEED) {
			snprintf(errbuf, errlen, "CUDA backend unavailable: %s", why);
			return r;
		}
		if (r < 0) {
			log_info("no CUDA backend (%s); using the CPU", why);
			cpu = gr_backend_free(cpu);
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
		s->share[1].rate *= d.units ? d.units : 1;
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

/* Whether job's bits are the same from either engine: the exact float
 * sums and sums of squares, integer sums modulo 2^64, min and max. */
static bool same_bits_anywhere(const gr_job *job)
{
	if (job->kind != GR_JOB_REDUCE)
		return false;
	switch (job->op) {
	case GR_OP_SUM:
	case GR_OP_MIN:
	case GR_OP_MAX:
		return true;
	case GR_OP_SUMSQ:
		return gr_dtype_is_float(job->dtype);
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
	/* when each would be done with it, its queue ahead of it */
	double t_gpu = (double)(share[0].inflight + bytes) / share[0].rate;
	double t_cpu = (double)(share[1].inflight + bytes) / share[1].rate;
	unsigned e = t_cpu < t_gpu, o = !e;
	/* the other one, idle and left out for long: its rate is old news */
	if (!share[o].inflight && since(now_ns, share[o].given_ns) >= GR_SCHED_PROBE_NS &&
	    since(now_ns, share[e].given_ns) < GR_SCHED_PROBE_NS)
		return o;
	return e;
}

bool gr_sched_on_cpu(gr_sched *s, gr_job *job, uint64_t request_bytes, uint64_t now_ns)
{
	job->split = 0;
	if (!s->cpu)
		return false;
	/* device memory is read where it lies (what no kernel reduces there
	 * reaches here as a copy to the host) */
	if (job->where == GR_AT_DEVICE)
		return false;
	if (!gr_engine_runs(s->main, job))
		return true;
	if (request_bytes <= s->route_max)
		return true;
	if (job->where != GR_AT_HOST || !same_bits_anywhere(job) || s->host == GR_SCHED_HOST_GPU)
		return false;
	const uint64_t bytes = (uint64_t)job->n * gr_dtype_size(job->dtype);
	const unsigned e = s->host == GR_SCHED_HOST_CPU ? 1 : gr_sched_pick(s->share, bytes, now_ns);
	gr_sched_share *sh = &s->share[e];
	sh->given_ns = now_ns;
	if (!sh->inflight) {
		/* a window opens when the engine takes work */
		sh->since_ns = now_ns;
		sh->win_bytes = 0;
	}
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
	sh->inflight -= bytes < sh->inflight ? bytes : sh->inflight;
	if (job->status >= 0) {
		sh->win_bytes += bytes;
		sh->bytes += bytes;
		sh->jobs++;
	}
	/* the engine was busy for the whole window: once it is long enough,
	 * or the engine falls idle, its rate over it, smoothed over about
	 * four windows */
	const uint64_t dt = now_ns > sh->since_ns ? now_ns - sh->since_ns : 0;
	if (dt >= GR_SCHED_WINDOW_NS || (!sh->inflight && dt >= GR_SCHED_WINDOW_NS / 8)) {
		if (sh->win_bytes)
			sh->rate += ((double)sh->win_bytes / (double)dt - sh->rate) / 4;
		sh->busy_ns += dt;
		sh->win_bytes = 0;
		sh->since_ns = now_ns;
	} else if (!sh->inflight) {
		/* idle after a short burst: too short to tell a rate, which
		 * the start's latency holds down, but a burst faster than the
		 * rate known shows that rate to be too low */
		if (sh->win_bytes && dt && (double)sh->win_bytes / (double)dt > sh->rate)
			sh->rate += ((double)sh->win_bytes / (double)dt - sh->rate) / 4;
		sh->busy_ns += dt;
		sh->win_bytes = 0;
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
