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
 * the default): each piece a request cuts of it goes to the one that
 * would finish it first, by the bytes each has in flight and the rate
 * each has shown on such pieces (bytes over the time it had some in
 * flight, learned from their completions, gr_sched_done), and the piece
 * is cut to suit it (gr_sched_piece): a staging slot for the GPUs, whose
 * copies keep one, and for the CPU up to GR_SCHED_PIECE_SLOTS of them,
 * enough to keep it busy until the GPUs are through what they hold, so
 * that neither waits for the other while a request has only a few
 * pieces in flight; and where the CPU alone reads more than both
 * together, which memory both engines read can make so, it takes them
 * all but for a trial of both now and then (gr_sched_trial). Only pieces
 * whose bits are the same on both engines and wherever the cuts fall
 * take that route: float sums and sums of squares (exact on both),
 * integer sums (exact modulo 2^64), min, max, argmin and argmax (-0
 * below +0, the first NaN, the first index of the extreme) and moments
 * (exact sums and the extremes), and segments of those ops, whose
 * records are their pieces' partials joined in order (the GPUs take a
 * piece of whole segments, math/segments.h's gr_segs_whole, so the
 * request cuts pieces on segment boundaries where it can, and those
 * that are not go to the CPU); any other job's route and cuts depend
 * on the job and its request alone, so the same request always gets the
 * same bits. Loop thread, but for the mover.
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

/*
 * The CPU engine's workers beside ngpus GPUs on a host of cpus CPUs,
 * where the operator set none (--threads): one per CPU but those the
 * daemon's other busy threads and its clients need, the loop's and the
 * clients' one each and each GPU's submission and completion threads;
 * half the CPUs at least (1 with none). With every CPU a worker's,
 * requests that others make wait for a CPU behind a large split of host
 * data (docs/BENCHMARKS.md, "Fairness").
 */
unsigned gr_sched_beside_threads(unsigned cpus, unsigned ngpus);

/* "both", "gpu", "cpu"; NULL when out of range */
const char *gr_sched_host_name(gr_sched_host h);

/* What the scheduler knows of one engine's share of split host data. */
typedef struct gr_sched_share {
	uint64_t inflight;  /* bytes sent, not yet done */
	double rate;        /* bytes a nanosecond, as its completions show */
	/* the window the next rate is measured over: win_bytes done in
	 * win_ns of busy time (time with some in flight, idle time left
	 * out), counted up to since_ns; part when it began with the engine
	 * busy, so that the first jobs it counts began before it */
	uint64_t since_ns;
	uint64_t win_bytes;
	uint64_t win_ns;
	bool win_part;
	uint64_t bytes;     /* bytes done */
	uint64_t jobs;      /* jobs done */
	uint64_t busy_ns;   /* time with some in flight */
	uint64_t given_ns;  /* when it was last given a job */
} gr_sched_share;

/* A rate is measured over windows of this much busy time at least:
 * engines that finish jobs in bursts (a CPU's workers, whose jobs the
 * loop drains several at a time) show their rate over several, not
 * between two of one burst. A whole window the engine ends idle counts
 * sooner where it shows a rate above the one known. */
#define GR_SCHED_WINDOW_NS 2000000u

/* Rates stay within these (bytes a nanosecond: 10 MB/s to 100 TB/s),
 * whatever a slow, stalled or failing engine shows: none is taken for
 * useless for good, and none overflows a finish time. */
#define GR_SCHED_RATE_MIN 0.01
#define GR_SCHED_RATE_MAX 100000.0

/* A piece for the CPU engine is at most this many staging slots: its
 * workers read a long piece faster than several short ones, and a
 * request keeps only a few pieces in flight. */
#define GR_SCHED_PIECE_SLOTS 4u

/* An engine given no split job for this long, while the other took
 * some, gets the next one: a rate learned once (from a slow start, a
 * short burst) is measured again rather than keeping that engine out
 * for good. */
#define GR_SCHED_PROBE_NS 20000000u
/*
 * Whether the GPUs add to what the CPU reads alone (--host-data both). On
 * a host whose memory both engines' reads share, the CPU alone may read
 * a large region faster than both together; so the scheduler keeps to
 * the better of the two ways, by the bytes a nanosecond that split host
 * data showed in each over windows of GR_SCHED_TRIAL_NS with some in
 * flight, and tries the other way for one window once every
 * GR_SCHED_TRIAL_EVERY_NS: the GPUs, left out, are tried again.
 */
typedef struct gr_sched_trial {
	bool cpu_alone;     /* the way kept to: the CPU alone, else both */
	bool trying;        /* this window tries the other way */
	uint64_t next_ns;   /* when the next trial is due */
	/* the window: win_bytes done in win_ns with some in flight,
	 * counted up to since_ns */
	uint64_t since_ns;
	uint64_t win_bytes;
	uint64_t win_ns;
	double shown[2];    /* bytes a nanosecond: [0] both, [1] the CPU alone; 0: not yet */
} gr_sched_trial;

#define GR_SCHED_TRIAL_NS 20000000u
#define GR_SCHED_TRIAL_EVERY_NS 250000000u

/* Whether the CPU takes every piece of split host data now (t: the
 * scheduler's trial). */
static inline bool gr_sched_trial_cpu_alone(const gr_sched_trial *t)
{
	return t->trying != t->cpu_alone;
}

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
	gr_sched_trial trial;
} gr_sched;

/* The workers of the engine that runs host data's prefix sums (the CPU
 * engine, beside a GPU one or alone): what it splits a long phase over */
unsigned gr_sched_cpu_workers(const gr_sched *s);

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
 * the engine chosen (job->split: gr_sched_piece()'s where it cut the
 * piece, else chosen here) until gr_sched_done(). now_ns: the loop's
 * clock. */
bool gr_sched_on_cpu(gr_sched *s, gr_job *job, uint64_t request_bytes, uint64_t now_ns);
/* A job is done (loop thread, before its done() or from it): a split
 * one's bytes leave its engine's count, and its completion updates that
 * engine's rate. */
void gr_sched_done(gr_sched *s, gr_job *job, uint64_t now_ns);
/* Which engine gets a split job of bytes at now_ns: 1 for the CPU's, 0
 * for the GPUs' (the one that would finish it first, unless the other
 * has had none for GR_SCHED_PROBE_NS). */
unsigned gr_sched_pick(const gr_sched_share share[2], uint64_t bytes, uint64_t now_ns);
/* How long a piece engine e (gr_sched_pick's) takes, of left bytes a
 * request has still to cut, its pieces a slot long elsewhere: the GPUs'
 * a slot; the CPU's as many slots, 1 to GR_SCHED_PIECE_SLOTS, as it
 * reads by when the GPUs would be through what they hold and one slot
 * more (at most GR_SCHED_PIECE_SLOTS where the GPUs take none), and the
 * rest of the request where less than a slot would be left. Never more
 * than left. */
uint64_t gr_sched_piece_bytes(const gr_sched_share share[2], unsigned e, bool gpus, uint64_t slot,
			      uint64_t left);
/*
 * The next piece of a large request (request_bytes long) of host data
 * for a reduce, of which left bytes are still to cut, where a piece is
 * slot bytes long but for the split: whether it takes the split route
 * and to which engine, written to *ret_split (0, or 1 + the engine, as
 * job->split; gr_sched_on_cpu() sends the job of that piece there), and
 * how many bytes it takes (gr_sched_piece_bytes()). now_ns: the loop's
 * clock.
 */
uint64_t gr_sched_piece(gr_sched *s, gr_op op, gr_dtype dtype, uint64_t request_bytes,
			uint64_t left, uint64_t slot, uint64_t now_ns, uint8_t *ret_split);
/* Whether host data of op over dtype may go to either engine, cut
 * anywhere: the daemon has both, and the bits do not depend on it. */
bool gr_sched_splits(const gr_sched *s, gr_op op, gr_dtype dtype);
/* Whether the prefix sums of a host region of request_bytes go to the
 * GPUs whole, read and written where they lie (GR_JOB_SCAN of host
 * data: PCIe both ways, about three times the CPU engine's rate on the
 * 1x H200 host), rather than to the CPU engine in chunks: the daemon
 * has both, the request is not one the CPU takes anyway (route_max),
 * --host-data is not cpu, and the GPUs' engine takes job, the scan as it
 * would go (its rules on the memory's alignment, and a GPU in service).
 * The caller checks that the memory is registered. */
bool gr_sched_scan_on_gpu(const gr_sched *s, const gr_job *job, uint64_t request_bytes);
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
