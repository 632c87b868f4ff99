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

bool gr_sched_on_cpu(const gr_sched *s, const gr_job *job, uint64_t request_bytes)
{
	if (!s->cpu)
		return false;
	/* device memory is read where it lies (what no kernel reduces there
	 * reaches here as a copy to the host) */
	if (job->where == GR_AT_DEVICE)
		return false;
	if (!gr_engine_runs(s->main, job))
		return true;
	return request_bytes <= s->route_max;
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
