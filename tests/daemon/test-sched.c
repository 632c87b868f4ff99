/*
 * The scheduler's split of host data between a GPU engine and the CPU
 * engine (engine/scheduler.h): which jobs may take either engine (those
 * whose bits are the same on both), the engine that would finish a job
 * first, the bytes counted in flight until done, rates learned from
 * completions (bytes over busy time, within bounds), pieces cut to suit
 * their engine, and --host-data gpu and cpu. Two stand-in engines that
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

/* Pieces cut to suit their engine (gr_sched_piece): a slot for the GPUs,
 * for the CPU as far as the GPUs' queue reaches, 1 to
 * GR_SCHED_PIECE_SLOTS slots, the rest of a request where less than a
 * slot would be left; the engine chosen for the piece is the one its job
 * goes to, and only ops whose bits do not depend on the cuts are cut so. */
static void test_pieces(gr_backend *gpu, gr_backend *cpu)
{
	const uint64_t slot = 8 << 20, big = 1 << 30;
	gr_sched s;
	uint8_t split;

	sched_init(&s, gpu, cpu, GR_SCHED_HOST_BOTH);
	s.share[0].rate = 50.0;
	s.share[1].rate = 100.0;
	/* the GPUs hold two slots: the CPU, idle, reads six by when they are
	 * through those and one more; four at most */
	s.share[0].inflight = 2 * slot;
	CHECK_EQ(gr_sched_piece_bytes(s.share, 1, true, slot, big), 4 * slot);
	/* the CPU holding four slots already: two more reach as far */
	s.share[1].inflight = 4 * slot;
	CHECK_EQ(gr_sched_piece_bytes(s.share, 1, true, slot, big), 2 * slot);
	/* far ahead of the GPUs: still one slot */
	s.share[1].inflight = 40 * slot;
	CHECK_EQ(gr_sched_piece_bytes(s.share, 1, true, slot, big), slot);
	/* the GPUs' pieces are a slot, whatever the rates */
	CHECK_EQ(gr_sched_piece_bytes(s.share, 0, true, slot, big), slot);
	/* the end of a request: what is left, and no stub under a slot */
	s.share[1].inflight = 0;
	CHECK_EQ(gr_sched_piece_bytes(s.share, 0, true, slot, slot / 2), slot / 2);
	CHECK_EQ(gr_sched_piece_bytes(s.share, 1, true, slot, 4 * slot + 100), 4 * slot + 100);
	CHECK_EQ(gr_sched_piece_bytes(s.share, 1, true, slot, 5 * slot + 100), 4 * slot);
	CHECK_EQ(gr_sched_piece_bytes(s.share, 0, true, slot, slot + 100), slot);
	/* --host-data cpu: the GPUs take none, the CPU's pieces are long */
	s.share[0].inflight = 0;
	CHECK_EQ(gr_sched_piece_bytes(s.share, 1, false, slot, big), 4 * slot);

	/* a request cut into pieces: each job goes where its piece was cut
	 * for, the GPUs' never longer than a slot, the bytes all counted */
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_BOTH);
	s.share[0].rate = 50.0;
	s.share[1].rate = 100.0;
	uint64_t left = 200 * slot + 4, n_gpu = 0, n_cpu = 0, longest_gpu = 0;
	gr_job jobs[256];
	unsigned nj = 0;
	while (left) {
		uint64_t take =
		    gr_sched_piece(&s, GR_OP_SUM, GR_DT_F32, big, left, slot, 1000, &split);
		CHECK(take > 0 && take <= left && (split == 1 || split == 2));
		CHECK(take % 4 == 0);
		CHECK(nj < 256);
		gr_job *j = &jobs[nj++];
		*j = host_job(GR_OP_SUM, GR_DT_F32, take / 4);
		j->split = split;
		const unsigned want = split - 1u;
		/* whatever the pick would say now, the piece's engine */
		s.share[want].rate = want ? 1.0 : 1000.0;
		bool c = gr_sched_on_cpu(&s, j, big, 1000);
		s.share[0].rate = 50.0;
		s.share[1].rate = 100.0;
		CHECK(c == (want == 1) && j->split == split);
		if (c)
			n_cpu += take;
		else
			n_gpu += take, longest_gpu = take > longest_gpu ? take : longest_gpu;
		left -= take;
		/* the oldest pieces done as the window of four moves on */
		if (nj >= 4)
			gr_sched_done(&s, &jobs[nj - 4], 1000);
	}
	CHECK(n_gpu > 0 && n_cpu > 0 && longest_gpu <= slot);
	CHECK_EQ(n_gpu + n_cpu, 200 * slot + 4);
	CHECK_EQ(s.share[0].inflight + s.share[1].inflight,
	         n_gpu + n_cpu - s.share[0].bytes - s.share[1].bytes);
	/* the CPU took longer pieces than the GPUs' */
	CHECK_MSG(s.share[1].jobs + 3 < nj && n_cpu / (s.share[1].jobs + 3) > slot,
	          "%llu bytes in about %llu pieces", (unsigned long long)n_cpu,
	          (unsigned long long)s.share[1].jobs);

	/* not cut for the split: integer sums of squares, small requests,
	 * --host-data gpu; a CPU daemon */
	CHECK_EQ(gr_sched_piece(&s, GR_OP_SUMSQ, GR_DT_I32, big, big, slot, 0, &split), slot);
	CHECK(split == 0);
	CHECK_EQ(gr_sched_piece(&s, GR_OP_SUM, GR_DT_F32, 1 << 20, 1 << 20, slot, 0, &split),
	         1 << 20);
	CHECK(split == 0);
	/* cut for the split: argmin, argmax and moments, whose bits the
	 * cuts do not change */
	static const gr_op cut_ops[] = {GR_OP_ARGMIN, GR_OP_ARGMAX, GR_OP_MOMENTS};
	for (unsigned i = 0; i < 3; i++) {
		CHECK(gr_sched_piece(&s, cut_ops[i], GR_DT_F64, big, big, slot, 0, &split) >= slot);
		CHECK(split != 0);
	}
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_GPU);
	CHECK_EQ(gr_sched_piece(&s, GR_OP_MAX, GR_DT_F64, big, big, slot, 0, &split), slot);
	CHECK(split == 0);
	sched_init(&s, gpu, NULL, GR_SCHED_HOST_BOTH);
	CHECK_EQ(gr_sched_piece(&s, GR_OP_SUM, GR_DT_F32, big, big, slot, 0, &split), slot);
	CHECK(split == 0);
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_CPU);
	CHECK_EQ(gr_sched_piece(&s, GR_OP_SUM, GR_DT_F32, big, big, slot, 0, &split), 4 * slot);
	CHECK(split == 2);
}

/* Rates are bytes over busy time: an engine running several jobs at once
 * (the GPUs' streams) shows what it reads while the other engine runs,
 * not one job's latency; idle time between jobs does not count; jobs the
 * loop drains together do not inflate it; and no slow, stalled or failing
 * engine drives it to zero or past GR_SCHED_RATE_MAX. */
static void test_rates(gr_backend *gpu, gr_backend *cpu)
{
	const size_t n = 2 << 20; /* 8 MiB of f32 */
	const uint64_t big = 1 << 30, bytes = n * 4;
	gr_sched s;
	gr_job q[3];

	/* three pieces always in flight on the GPUs, each 480 us from its
	 * start to its end, one done every 160 us: 52 GB/s, though each
	 * alone would show 17 */
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_BOTH);
	s.share[0].rate = 17.0;
	uint64_t t = 1000000;
	for (unsigned i = 0; i < 3; i++) {
		q[i] = host_job(GR_OP_SUM, GR_DT_F32, n);
		q[i].split = 1; /* cut for the GPUs (gr_sched_piece) */
		CHECK(!gr_sched_on_cpu(&s, &q[i], big, t));
	}
	for (unsigned i = 0; i < 300; i++) {
		t += 161319; /* 8 MiB at 52 GB/s */
		gr_job *j = &q[i % 3];
		gr_sched_done(&s, j, t);
		*j = host_job(GR_OP_SUM, GR_DT_F32, n);
		j->split = 1;
		CHECK(!gr_sched_on_cpu(&s, j, big, t));
	}
	CHECK_MSG(s.share[0].rate > 50.0 && s.share[0].rate < 54.0, "gpu rate %.2f",
	          s.share[0].rate);

	/* one piece at a time, 100 us each (84 GB/s), 1 ms apart: the idle
	 * time between does not count */
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_CPU);
	s.share[1].rate = 40.0;
	for (unsigned i = 0; i < 200; i++) {
		t += 1000000;
		q[0] = host_job(GR_OP_SUM, GR_DT_F32, n);
		CHECK(gr_sched_on_cpu(&s, &q[0], big, t));
		gr_sched_done(&s, &q[0], t + 100000);
	}
	CHECK_MSG(s.share[1].rate > 80.0 && s.share[1].rate < 88.0, "cpu rate %.2f",
	          s.share[1].rate);

	/* the CPU at 40 GB/s, its jobs drained three at a time by the loop
	 * (two of them a nanosecond after the first): no burst of those
	 * reads as hundreds of GB/s */
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_CPU);
	s.share[1].rate = 40.0;
	double top = 0;
	for (unsigned round = 0; round < 100; round++) {
		t += 1000000;
		for (unsigned i = 0; i < 3; i++) {
			q[i] = host_job(GR_OP_SUM, GR_DT_F32, n);
			CHECK(gr_sched_on_cpu(&s, &q[i], big, t));
		}
		/* 3 x 8 MiB at 40 GB/s: 629 us */
		gr_sched_done(&s, &q[0], t + 629145);
		gr_sched_done(&s, &q[1], t + 629146);
		gr_sched_done(&s, &q[2], t + 629147);
		top = s.share[1].rate > top ? s.share[1].rate : top;
	}
	CHECK_MSG(top < 44.0, "cpu rate up to %.2f", top);

	/* a stalled engine: a piece a minute; rates stay above the floor */
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_CPU);
	for (unsigned i = 0; i < 100; i++) {
		q[0] = host_job(GR_OP_SUM, GR_DT_F32, 1);
		CHECK(gr_sched_on_cpu(&s, &q[0], big, t));
		t += 60000000000ull;
		gr_sched_done(&s, &q[0], t);
	}
	CHECK_MSG(s.share[1].rate >= GR_SCHED_RATE_MIN &&
	              s.share[1].rate < 1e-3 + GR_SCHED_RATE_MIN,
	          "cpu rate %g", s.share[1].rate);
	/* and it is still given pieces: a probe, having had none for
	 * GR_SCHED_PROBE_NS while the GPUs took some */
	s.host = GR_SCHED_HOST_BOTH;
	s.share[0].given_ns = t;
	CHECK(gr_sched_pick(s.share, bytes, t + GR_SCHED_PROBE_NS / 2) == 1);
	/* pieces done the instant they start: no time, no rate; a
	 * nanosecond each: the ceiling */
	for (unsigned i = 0; i < 100; i++) {
		q[0] = host_job(GR_OP_SUM, GR_DT_F32, n);
		s.host = GR_SCHED_HOST_CPU;
		CHECK(gr_sched_on_cpu(&s, &q[0], big, t));
		gr_sched_done(&s, &q[0], t + (i & 1));
		t += 10;
	}
	CHECK_MSG(s.share[1].rate <= GR_SCHED_RATE_MAX && s.share[1].rate > 1000.0, "cpu rate %g",
	          s.share[1].rate);
	/* failures teach nothing, however fast */
	double before = s.share[1].rate = 30.0;
	for (unsigned i = 0; i < 100; i++) {
		q[0] = host_job(GR_OP_SUM, GR_DT_F32, n);
		CHECK(gr_sched_on_cpu(&s, &q[0], big, t));
		q[0].status = -5;
		gr_sched_done(&s, &q[0], t + 1000 * (i & 3));
		t += 10000000;
	}
	CHECK(s.share[1].rate == before && s.share[1].inflight == 0);
}

/*
 * The way kept to (gr_sched_trial): two engines simulated in steps of
 * 10 us, each reading its oldest piece at a rate that depends on whether
 * the other has one (memory both share), a request's four pieces in
 * flight, for sim_ns. Returns the share of the bytes the GPUs read in
 * the last half.
 */
typedef struct sim_engine {
	double alone, beside; /* bytes a nanosecond: the other idle, busy */
} sim_engine;

static double sim_run(gr_sched *s, const sim_engine eng[2], uint64_t sim_ns)
{
	const uint64_t slot = 8 << 20, big = 1 << 30, step = 10000;
	gr_job jobs[4];
	int fifo[2][4];
	unsigned nq[2] = {0, 0};
	double head_left[2] = {0, 0};
	uint64_t left = 0, read[2] = {0, 0};

	for (unsigned i = 0; i < 4; i++)
		jobs[i].n = 0;
	for (uint64_t t = 1000000; t < 1000000 + sim_ns; t += step) {
		/* refill: four pieces in flight, requests of 1 GiB one after
		 * another */
		for (unsigned i = 0; i < 4; i++) {
			if (jobs[i].n)
				continue;
			if (!left)
				left = big;
			uint8_t split;
			uint64_t take =
			    gr_sched_piece(s, GR_OP_SUM, GR_DT_F32, big, left, slot, t, &split);
			left -= take;
			jobs[i] = host_job(GR_OP_SUM, GR_DT_F32, take / 4);
			jobs[i].split = split;
			unsigned e = gr_sched_on_cpu(s, &jobs[i], big, t);
			CHECK(jobs[i].split == 1 + e);
			if (!nq[e])
				head_left[e] = (double)take;
			fifo[e][nq[e]++] = (int)i;
		}
		for (unsigned e = 0; e < 2; e++) {
			if (!nq[e])
				continue;
			double r = nq[!e] ? eng[e].beside : eng[e].alone;
			head_left[e] -= r * (double)step;
			if (head_left[e] > 0)
				continue;
			gr_job *j = &jobs[fifo[e][0]];
			if (t >= 1000000 + sim_ns / 2)
				read[e] += j->n * 4;
			gr_sched_done(s, j, t + step);
			j->n = 0;
			memmove(fifo[e], fifo[e] + 1, --nq[e] * sizeof(int));
			if (nq[e])
				head_left[e] = (double)(jobs[fifo[e][0]].n * 4);
		}
	}
	return (double)read[0] / (double)(read[0] + read[1]);
}

static void test_trial(gr_backend *gpu, gr_backend *cpu)
{
	gr_sched s;

	/* memory both engines share: the CPU reads 130 GB/s alone, 85 beside
	 * the GPUs' 36 (121 together); it reads alone, and the GPUs are
	 * tried again once every GR_SCHED_TRIAL_EVERY_NS */
	const sim_engine shared[2] = {{52.0, 36.0}, {130.0, 85.0}};
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_BOTH);
	double g = sim_run(&s, shared, 2000000000ull);
	CHECK_MSG(s.trial.cpu_alone && s.trial.shown[1] > s.trial.shown[0],
	          "cpu alone %d: %.1f against %.1f", s.trial.cpu_alone, s.trial.shown[1],
	          s.trial.shown[0]);
	CHECK_MSG(g > 0 && g < 0.1, "the GPUs read %.3f of it", g);
	CHECK_MSG(s.trial.shown[1] > 120.0 && s.trial.shown[0] > 100.0 && s.trial.shown[0] < 122.0,
	          "%.1f, %.1f", s.trial.shown[1], s.trial.shown[0]);

	/* the GPUs add: both, and they read their part */
	const sim_engine apart[2] = {{52.0, 50.0}, {60.0, 58.0}};
	sched_init(&s, gpu, cpu, GR_SCHED_HOST_BOTH);
	g = sim_run(&s, apart, 2000000000ull);
	CHECK_MSG(!s.trial.cpu_alone && s.trial.shown[0] > s.trial.shown[1], "%.1f, %.1f",
	          s.trial.shown[0], s.trial.shown[1]);
	CHECK_MSG(g > 0.3 && g < 0.6, "the GPUs read %.3f of it", g);
}

/* The CPU engine's workers beside the GPUs: CPUs for the loop, the
 * clients and each GPU's two threads kept out, half the CPUs at least. */
/* Segments of host data: pieces the request cut for an engine go there
 * (the GPUs take only pieces of whole segments, which their takes()
 * decides), segments whose records follow the cuts (integer sums of
 * squares) stay on the CPU whatever the mode, and --host-data gpu sends
 * to the GPUs what they take. */
static void test_segments(gr_backend *gpu, gr_backend *cpu)
{
	const size_t n = 1 << 20;
	const uint64_t big = 1 << 30;
	gr_sched s;
	gr_job j;

	sched_init(&s, gpu, cpu, GR_SCHED_HOST_BOTH);
	CHECK(gr_sched_splits(&s, GR_OP_SUM, GR_DT_F32));
	CHECK(gr_sched_splits(&s, GR_OP_MOMENTS, GR_DT_I64));
	CHECK(!gr_sched_splits(&s, GR_OP_SUMSQ, GR_DT_I32));
	for (uint8_t cut = 1; cut <= 2; cut++) {
		j = host_job(GR_OP_ARGMAX, GR_DT_F64, n);
		j.kind = GR_JOB_SEGMENTS;
		j.split = cut;
		CHECK(gr_sched_on_cpu(&s, &j, big, 1000) == (cut == 2) && j.split == cut);
		gr_sched_done(&s, &j, 2000);
	}
	CHECK_EQ(s.share[0].jobs, 1);
	CHECK_EQ(s.share[1].jobs, 1);
	j = host_job(GR_OP_SUMSQ, GR_DT_I64, n);
	j.kind = GR_JOB_SEGMENTS;
	CHECK(gr_sched_on_cpu(&s, &j, big, 1000) && j.split == 0);
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	j.kind = GR_JOB_SEGMENTS;
	j.where = GR_AT_DEVICE;
	CHECK(!gr_sched_on_cpu(&s, &j, big, 1000));

	sched_init(&s, gpu, cpu, GR_SCHED_HOST_GPU);
	j = host_job(GR_OP_SUM, GR_DT_F32, n);
	j.kind = GR_JOB_SEGMENTS;
	CHECK(!gr_sched_on_cpu(&s, &j, big, 1000) && j.split == 0);
	j = host_job(GR_OP_SUMSQ, GR_DT_U32, n);
	j.kind = GR_JOB_SEGMENTS;
	CHECK(gr_sched_on_cpu(&s, &j, big, 1000));

	/* a piece cut for the split that no GPU takes (longer than their
	 * copy's buffer, or not of whole segments) still counts as the
	 * CPU's part of the split; one not cut goes there uncounted */
	gr_backend reduce_only = *gpu;
	reduce_only.kinds = GR_JOB_BIT(GR_JOB_REDUCE);
	sched_init(&s, &reduce_only, cpu, GR_SCHED_HOST_BOTH);
	for (uint8_t cut = 0; cut <= 2; cut++) {
		j = host_job(GR_OP_SUM, GR_DT_F64, n);
		j.kind = GR_JOB_SEGMENTS;
		j.split = cut;
		CHECK(gr_sched_on_cpu(&s, &j, big, 1000) && j.split == (cut ? 2 : 0));
		gr_sched_done(&s, &j, 2000);
	}
	CHECK_EQ(s.share[0].jobs, 0);
	CHECK_EQ(s.share[1].jobs, 2);

	sched_init(&s, gpu, NULL, GR_SCHED_HOST_BOTH);
	CHECK(!gr_sched_splits(&s, GR_OP_SUM, GR_DT_F32));
}

static void test_beside_threads(void)
{
	CHECK_EQ(gr_sched_beside_threads(16, 1), 12);
	CHECK_EQ(gr_sched_beside_threads(16, 2), 10);
	CHECK_EQ(gr_sched_beside_threads(16, 8), 8);
	CHECK_EQ(gr_sched_beside_threads(128, 8), 110);
	CHECK_EQ(gr_sched_beside_threads(4, 1), 2);
	CHECK_EQ(gr_sched_beside_threads(2, 1), 1);
	CHECK_EQ(gr_sched_beside_threads(1, 1), 1);
	CHECK_EQ(gr_sched_beside_threads(0, 1), 1);
	CHECK_EQ(gr_sched_beside_threads(5, 0), 3);
}

int main(void)
{
	gr_backend gpu = fake("cuda"), cpu = fake("cpu");

	test_beside_threads();
	test_segments(&gpu, &cpu);
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
	test_pieces(&gpu, &cpu);
	test_rates(&gpu, &cpu);
	test_trial(&gpu, &cpu);
	printf("sched: ok\n");
	return 0;
}
