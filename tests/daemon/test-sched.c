/*
 * The scheduler's split of host data between a GPU engine and the CPU
 * engine (engine/scheduler.h): which jobs may take either engine (those
 * whose bits are the same on both), the engine that would finish a job
 * first, the bytes counted in flight until done, rates learned from
 * completions, and --host-data gpu and cpu. Two stand-in engines that
 * run nothing: only the routing is under test.
 */
#include <stdio.h>
#include <string.h>

#include "engine/scheduler.h"
#include "tests/check.h"

static const gr_backend_ops no_ops = { 0 };

static gr_backend fake(const char *name)
{
	return (gr_backend){ .ops = &no_ops, .name = name, .kinds = ~0u };
}

static gr_job host_job(gr_op op, gr_dtype dt, size_t n)
{
	gr_job j;
	memset(&j, 0, sizeof(j));
	j.op = op;
	j.dtype = dt;
	j.n = n;
	j.kind = GR_JOB_REDUCE;
	j.where = GR_AT_HOST;
	return j;
}

static void sched_init(gr_sched *s, gr_backend *gpu, gr_backend *cpu, gr_sched_host host)
{
	memset(s, 0, sizeof(*s));
	s->main = gpu;
	s->cpu = cpu;
	s->route_max = 1 << 20;
	s->host = host;
	s->share[0].rate = 25.0;
	s->share[1].rate = 8.0;
}

int main(void)
{
	gr_backend gpu = fake("cuda"), cpu = fake("cpu");
	gr_sched s;
	const size_t n = 1 << 20; /* 4 MiB of f32 */
	const uint64_t big = 1 << 30, bytes = n * 4;

	sched_init(&s, &gpu, &cpu, GR_SCHED_HOST_BOTH);
	/* small requests go to the CPU as before; device memory stays */
	gr_job j = host_job(GR_OP_SUM, GR_DT_F32, 16);
	CHECK(gr_sched_on_cpu(&s, &j, 64, 0) && j.split == 0);
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	j.where = GR_AT_DEVICE;
	CHECK(!gr_sched_on_cpu(&s, &j, big, 0) && j.split == 0);
	/* staging (socket data) stays with the GPU, and so do ops whose bits
	 * could differ (integer sums of squares) */
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	j.where = GR_AT_STAGING;
	CHECK(!gr_sched_on_cpu(&s, &j, big, 0) && j.split == 0);
	j = host_job(GR_OP_SUMSQ, GR_DT_I32, n);
	CHECK(!gr_sched_on_cpu(&s, &j, big, 0) && j.split == 0);

	/* jobs of split host data: each to the engine that finishes it
	 * first, 25 GB/s against 8: about three to the GPU for each one to
	 * the CPU */
	gr_job jobs[64];
	unsigned on_cpu = 0;
	for (unsigned i = 0; i < 64; i++) {
		jobs[i] = host_job(i % 2 ? GR_OP_MAX : GR_OP_SUM, GR_DT_F32, n);
		bool c = gr_sched_on_cpu(&s, &jobs[i], big, 1000);
		CHECK(jobs[i].split == 1 + c);
		on_cpu += c;
	}
	CHECK_MSG(on_cpu >= 13 && on_cpu <= 17, "%u of 64 on the CPU", on_cpu);
	CHECK(s.share[0].inflight + s.share[1].inflight == 64 * bytes);
	CHECK(s.share[1].inflight == on_cpu * bytes);
	/* done: out of flight; a CPU that shows 40 GB/s learns it */
	uint64_t t = 1000;
	for (unsigned i = 0; i < 64; i++) {
		if (jobs[i].split == 2) {
			t += bytes / 40;
			gr_sched_done(&s, &jobs[i], t);
		}
	}
	for (unsigned i = 0; i < 64; i++)
		gr_sched_done(&s, &jobs[i], t);
	CHECK(s.share[0].inflight == 0 && s.share[1].inflight == 0);
	CHECK(s.share[0].jobs + s.share[1].jobs == 64);
	/* one window at 40 GB/s: a quarter of the way from 8 */
	CHECK_MSG(s.share[1].rate > 15.9 && s.share[1].rate < 16.1, "cpu rate %.2f", s.share[1].rate);
	CHECK(gr_sched_pick(s.share, bytes, t) == (s.share[1].rate > s.share[0].rate));
	/* a failed job leaves flight and teaches nothing */
	j = host_job(GR_OP_SUM, GR_DT_F64, n);
	gr_sched_on_cpu(&s, &j, big, t);
	double before = s.share[j.split - 1].rate;
	unsigned e = j.split - 1;
	j.status = -5;
	gr_sched_done(&s, &j, t + 1);
	CHECK(s.share[e].inflight == 0 && s.share[e].rate == before);

	/* an engine whose rate was learned too low gets a job again once
	 * it has had none for GR_SCHED_PROBE_NS while the other took them,
	 * and a short burst faster than that rate raises it */
	sched_init(&s, &gpu, &cpu, GR_SCHED_HOST_BOTH);
	s.share[0].rate = 1.0;  /* the GPU: 1 GB/s, as a slow start showed */
	s.share[1].rate = 80.0;
	t = 1000000;
	unsigned to_gpu = 0;
	for (unsigned i = 0; i < 100; i++) {
		j = host_job(GR_OP_SUM, GR_DT_F32, n);
		t += 500000; /* a job every 0.5 ms, each done before the next */
		bool c = gr_sched_on_cpu(&s, &j, big, t);
		to_gpu += !c;
		if (!c) {
			/* 4 MiB in 100 us: 42 GB/s */
			gr_sched_done(&s, &j, t + 100000);
			CHECK_MSG(t >= GR_SCHED_PROBE_NS, "the GPU took job %u, before the probe was due", i);
		} else {
			gr_sched_done(&s, &j, t + bytes / 80);
		}
	}
	CHECK_MSG(to_gpu >= 1 && to_gpu <= 2, "%u probes in 50 ms", to_gpu);
	CHECK_MSG(s.share[0].rate > 10.0, "gpu rate %.2f after its probes", s.share[0].rate);
	/* the CPU's rate is not lowered by its short bursts */
	CHECK(s.share[1].rate >= 80.0);

	/* --host-data cpu and gpu */
	sched_init(&s, &gpu, &cpu, GR_SCHED_HOST_CPU);
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	CHECK(gr_sched_on_cpu(&s, &j, big, 0) && j.split == 2);
	gr_sched_done(&s, &j, 10);
	sched_init(&s, &gpu, &cpu, GR_SCHED_HOST_GPU);
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	CHECK(!gr_sched_on_cpu(&s, &j, big, 0) && j.split == 0);
	/* a CPU daemon: nothing to split */
	sched_init(&s, &cpu, NULL, GR_SCHED_HOST_BOTH);
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	CHECK(!gr_sched_on_cpu(&s, &j, big, 0) && j.split == 0);
	CHECK(!strcmp(gr_sched_host_name(GR_SCHED_HOST_BOTH), "both") &&
	      gr_sched_host_name(GR_SCHED_HOST_N) == NULL);
	printf("sched: ok\n");
	return 0;
}
