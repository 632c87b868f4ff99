/*
 * The scheduler: it owns every engine, the CPU's and, on a CUDA daemon,
 * the GPUs', and routes each job to one of them by its kind, where its
 * data lie and its request's size. When no GPU is left in service it
 * moves the GPU engine's work to the CPU engine (gr_engine_mover).
 *
 * The main engine holds staging and every device the daemon reports
 * (the GPUs' engine, or the CPU's on a CPU daemon); beside a GPU engine
 * the CPU engine takes what no GPU kernel runs and host data small enough
 * that a CPU core is done before a GPU could answer (--route-cpu-max).
 * Host data of large requests may go to either engine (--host-data both,
 * the default): each such job to the one that would finish it first, by
 * the bytes each has in flight and the rate each has shown on such jobs
 * (learned from their completions, gr_sched_done). Only jobs whose bits
 * are the same on both take that route: float sums and sums of squares
 * (exact on both), integer sums (exact modulo 2^64), min and max; any
 * other job's route depends on the job and its request alone, so the
 * same request always gets the same bits. Loop thread, but for the mover.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"

typedef enum gr_sched_gpu {
	GR_SCHED_GPU_NO,     /* the CPU engine alone */
	GR_SCHED_GPU_AUTO,   /* the GPUs' where there is one, else the CPU's */
	GR_SCHED_GPU_NEED,   /* the GPUs', or fail */
} gr_sched_gpu;

/* Where host data of large requests goes (--host-data). */
typedef enum gr_sched_host {
	GR_SCHED_HOST_BOTH, /* to the engine that finishes it first */
	GR_SCHED_HOST_GPU,  /* to the GPUs' engine */
	GR_SCHED_HOST_CPU,  /* to the CPU engine */
	GR_SCHED_HOST_N,
} gr_sched_host;

/* "both", "gpu", "cpu"; NULL when out of range */
const char *gr_sched_host_name(gr_sched_host h);

/* What the scheduler knows of one engine's share of split host data. */
typedef struct gr_sched_share {
	uint64_t inflight;  /* bytes sent, not yet done */
	double rate;        /* bytes a nanosecond, as its completions show */
	/* the window the next rate is measured over: busy since since_ns,
	 * win_bytes done in it */
	uint64_t since_ns;
	uint64_t win_bytes;
	uint64_t bytes;     /* bytes done */
	uint64_t jobs;      /* jobs done */
	uint64_t busy_ns;   /* time with some in flight */
	uint64_t given_ns;  /* when it was last given a job */
} gr_sched_share;

/* A rate is measured over windows of busy time this long at least:
 * engines that finish jobs in bursts (a CPU's workers) show their rate
 * over several, not between two of one burst. */
#define GR_SCHED_WINDOW_NS 2000000u

/* An engine given no split job for this long, while the other took
 * some, gets the next one: a rate learned once (from a slow start, a
 * short burst) is measured again rather than keeping that engine out
 * for good. */
#define GR_SCHED_PROBE_NS 20000000u
typedef struct gr_sched_config {
	gr_backend_config main;  /* the main engine's (mover is the scheduler's) */
	gr_sched_gpu gpu;
	bool cpu_fallback;       /* move the GPUs' work to the CPU once none is left */
	size_t route_max_bytes;  /* host data of requests up to this go to the CPU */
	gr_sched_host host;      /* host data of larger requests */
} gr_sched_config;

typedef struct gr_sched {
	gr_backend *main;
	gr_backend *cpu;        /* beside a GPU engine, else NULL */
	gr_engine_mover mover;  /* onto cpu */
	size_t route_max;
	/* the CPU engine's jobs, submitted together at gr_sched_flush() */
	gr_job *route_head, *route_tail;
	uint64_t routed;        /* jobs sent to the CPU engine beside a GPU one */
	gr_sched_host host;
	gr_sched_share share[2]; /* split host data: [0] the GPUs', [1] the CPU's */
} gr_sched;

/* Build the engines. 0, or a negative errno and why in errbuf. */
int gr_sched_init(gr_sched *s, const gr_sched_config *cfg, gr_completion *cq, char *errbuf,
		  size_t errlen);
/* Free the engines (each waits for its jobs to be posted first). */
void gr_sched_deinit(gr_sched *s);

/* Whether engine b runs job: its kind, and the job itself (takes()). */
static inline bool gr_engine_runs(const gr_backend *b, const gr_job *job)
{
	return (b->kinds & GR_JOB_BIT(job->kind)) && (!b->ops->takes || b->ops->takes(b, job));
}

/* Does job go to the CPU engine beside the main one, its request being
 * request_bytes long? A job of split host data is counted in flight on
 * the engine chosen (job->split) until gr_sched_done(). now_ns: the
 * loop's clock. */
bool gr_sched_on_cpu(gr_sched *s, gr_job *job, uint64_t request_bytes, uint64_t now_ns);
/* A job is done (loop thread, before its done() or from it): a split
 * one's bytes leave its engine's count, and its completion updates that
 * engine's rate. */
void gr_sched_done(gr_sched *s, gr_job *job, uint64_t now_ns);
/* Which engine gets a split job of bytes at now_ns: 1 for the CPU's, 0
 * for the GPUs' (the one that would finish it first, unless the other
 * has had none for GR_SCHED_PROBE_NS). */
unsigned gr_sched_pick(const gr_sched_share share[2], uint64_t bytes, uint64_t now_ns);
/* Queue job for the CPU engine (gr_sched_on_cpu() said so): the jobs go
 * out together at the next flush, from the loop's check phase, where
 * those small enough run inline and their completions drain in the same
 * pass. */
void gr_sched_route(gr_sched *s, gr_job *job);
void gr_sched_flush(gr_sched *s);
/* Jobs queued for the CPU engine, not yet flushed? */
static inline bool gr_sched_pending(const gr_sched *s)
{
	return s->route_head != NULL;
}

/* A mover onto CPU engine cpu (whose submit any thread may call). */
void gr_sched_mover_cpu(gr_backend *cpu, gr_engine_mover *ret);
