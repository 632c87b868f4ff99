/*
 * Pacing by engine time (daemon/pace.c): each connection's time a byte
 * on each engine is learned from its finished jobs, and everyone's; its
 * cost is the one over the other, and the bytes it reads a millisecond
 * before it is paced are --pace-bytes-per-ms over that cost, so that two
 * streams whose data cost the engines three times apart are paced to the
 * same engine time a millisecond, and a stream alone to the option's
 * bytes. The estimate starts at the average, is smoothed, weighs each
 * engine against its own average, and stays within its bounds whatever a
 * job's time says. The last part drives gr_pace_done(), gr_pace_budget()
 * and gr_pace_read() as request.c and conn.c would, on a server with only
 * its pacing set up and the host taken as short of CPU.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "daemon/server.h"
#include "tests/check.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define LIMIT (64u * KiB)
/* a stream's pieces as the CPU's workers take them */
#define JOB_BYTES (8u * MiB)

/* a and b within 5 % of each other */
static void check_near(double a, double b, const char *what)
{
	CHECK_MSG(fabs(a - b) <= 0.05 * fabs(b), "%s: %g against %g", what, a, b);
}

/* Before any job, a connection costs what the average does, and reads
 * the option's bytes; 0 never paces. */
static void test_default(void)
{
	double ref[GR_ENGINE_N] = {0};
	gr_pace_est c = {0}, other = {0};

	CHECK(gr_pace_cost(&c, ref) == 1.0);
	CHECK_EQ(gr_pace_limit(LIMIT, 1.0), LIMIT);
	CHECK_EQ(gr_pace_limit(0, 1.0), 0);
	CHECK_EQ(gr_pace_limit(0, 3.0), 0);

	/* the first job of all sets the average and costs it */
	gr_pace_learn(&c, ref, GR_ENGINE_CPU, JOB_BYTES, 3ull * JOB_BYTES);
	check_near(ref[GR_ENGINE_CPU], 3.0, "first average");
	CHECK(gr_pace_cost(&c, ref) == 1.0);
	CHECK(gr_pace_cost(&other, ref) == 1.0);
	CHECK_EQ(gr_pace_limit(LIMIT, gr_pace_cost(&c, ref)), LIMIT);
}

/* Two connections streaming equal bytes, one of data that takes three
 * times as long a byte: the average is between them, and each reads as
 * many bytes as make the same engine time a millisecond, which is the
 * option's bytes at the average cost. */
static void test_same_time(void)
{
	double ref[GR_ENGINE_N] = {0};
	gr_pace_est slow = {0}, fast = {0};

	for (int i = 0; i < 400; i++) {
		gr_pace_learn(&slow, ref, GR_ENGINE_CPU, JOB_BYTES, 3ull * JOB_BYTES);
		gr_pace_learn(&fast, ref, GR_ENGINE_CPU, JOB_BYTES, 1ull * JOB_BYTES);
	}
	const double avg = ref[GR_ENGINE_CPU];
	CHECK_MSG(avg > 1.8 && avg < 2.2, "average %g", avg);
	const uint64_t ls = gr_pace_limit(LIMIT, gr_pace_cost(&slow, ref));
	const uint64_t lf = gr_pace_limit(LIMIT, gr_pace_cost(&fast, ref));
	CHECK_MSG(ls < LIMIT && LIMIT < lf, "slow %llu, fast %llu", (unsigned long long)ls,
		  (unsigned long long)lf);
	check_near((double)ls * 3.0, (double)lf * 1.0, "engine time a millisecond");
	check_near((double)ls * 3.0, (double)LIMIT * avg, "the option's bytes at the average");

	/* smoothed: one odd job moves a connection's cost only part of the
	 * way */
	const double was = gr_pace_cost(&slow, ref);
	double r[GR_ENGINE_N];
	memcpy(r, ref, sizeof(r));
	gr_pace_learn(&slow, r, GR_ENGINE_CPU, JOB_BYTES, 30ull * JOB_BYTES);
	const double now = gr_pace_cost(&slow, ref), odd = 30.0 / avg;
	CHECK_MSG(now > was && now < was + (odd - was) / 2, "%g after %g", now, was);

	/* and small jobs, a small request's, teach nothing; nor does a job
	 * whose time was not measured */
	gr_pace_est f = fast;
	memcpy(r, ref, sizeof(r));
	gr_pace_learn(&f, r, GR_ENGINE_CPU, GR_PACE_LEARN_MIN_BYTES - 1, 1000000000ull);
	gr_pace_learn(&f, r, GR_ENGINE_CPU, JOB_BYTES, 0);
	CHECK(memcmp(r, ref, sizeof(r)) == 0 && memcmp(&f, &fast, sizeof(f)) == 0);
	/* a job with no connection left teaches the average alone */
	gr_pace_learn(NULL, r, GR_ENGINE_CPU, JOB_BYTES, 3ull * JOB_BYTES);
	CHECK(r[GR_ENGINE_CPU] > ref[GR_ENGINE_CPU]);
}

/* A stream alone costs the average, whatever its data cost, and however
 * the engines' time a byte moves (a host growing short of CPU): its
 * limit stays the option's. */
static void test_alone(void)
{
	double ref[GR_ENGINE_N] = {0};
	gr_pace_est c = {0};

	for (int i = 0; i < 100; i++) {
		gr_pace_learn(&c, ref, GR_ENGINE_CPU, JOB_BYTES, (uint64_t)(1 + i) * JOB_BYTES);
		CHECK_EQ(gr_pace_limit(LIMIT, gr_pace_cost(&c, ref)), LIMIT);
	}
}

/* Each engine's time against that engine's average: a connection whose
 * bytes go half to the GPUs at their average and half to the CPU at
 * twice its average costs about 1.5, though a GPU's byte takes a
 * hundredth of a CPU's time. */
static void test_engines(void)
{
	/* others hold the averages */
	const double held[GR_ENGINE_N] = {[GR_ENGINE_GPU] = 0.01, [GR_ENGINE_CPU] = 1.0};
	double ref[GR_ENGINE_N];
	gr_pace_est mixed = {0};

	for (int i = 0; i < 400; i++) {
		memcpy(ref, held, sizeof(ref));
		gr_pace_learn(&mixed, ref, GR_ENGINE_GPU, JOB_BYTES, JOB_BYTES / 100);
		memcpy(ref, held, sizeof(ref));
		gr_pace_learn(&mixed, ref, GR_ENGINE_CPU, JOB_BYTES, 2 * JOB_BYTES);
	}
	const double cost = gr_pace_cost(&mixed, held);
	CHECK_MSG(cost > 1.4 && cost < 1.6, "cost %g", cost);
	check_near(mixed.share[GR_ENGINE_GPU] + mixed.share[GR_ENGINE_CPU], 1.0, "shares");
	/* its bytes move to the CPU alone: the GPUs' part fades */
	for (int i = 0; i < 40; i++) {
		memcpy(ref, held, sizeof(ref));
		gr_pace_learn(&mixed, ref, GR_ENGINE_CPU, JOB_BYTES, 2 * JOB_BYTES);
	}
	CHECK(mixed.share[GR_ENGINE_GPU] < 0.01);
	CHECK_MSG(gr_pace_cost(&mixed, held) > 1.95, "cost %g", gr_pace_cost(&mixed, held));
}

/* Whatever the jobs say, the cost stays within its bounds: data whose
 * jobs take no time cannot buy unlimited bytes, slow jobs cannot pace a
 * connection to nothing, and nothing overflows. */
static void test_bounds(void)
{
	double ref[GR_ENGINE_N] = {0}, mix[GR_ENGINE_N] = {0};
	gr_pace_est cheap = {0}, dear = {0};

	for (int i = 0; i < 1000; i++) {
		/* against an average that others hold at 1 ns a byte */
		ref[GR_ENGINE_CPU] = 1.0;
		gr_pace_learn(&cheap, ref, GR_ENGINE_CPU, JOB_BYTES, 1);
		ref[GR_ENGINE_CPU] = 1.0;
		gr_pace_learn(&dear, ref, GR_ENGINE_CPU, JOB_BYTES, UINT64_MAX);
		/* and an average these two alone make */
		gr_pace_learn(NULL, mix, GR_ENGINE_CPU, JOB_BYTES, 1);
		gr_pace_learn(NULL, mix, GR_ENGINE_CPU, JOB_BYTES, UINT64_MAX);
		CHECK(isfinite(mix[GR_ENGINE_CPU]) && mix[GR_ENGINE_CPU] > 0);
		CHECK(isfinite(cheap.ns[GR_ENGINE_CPU]) && cheap.ns[GR_ENGINE_CPU] > 0);
		CHECK(isfinite(dear.ns[GR_ENGINE_CPU]));
	}
	ref[GR_ENGINE_CPU] = 1.0;
	const uint64_t most = (uint64_t)(LIMIT / GR_PACE_COST_MIN);
	const uint64_t least = (uint64_t)(LIMIT / GR_PACE_COST_MAX);
	CHECK(gr_pace_cost(&cheap, ref) == GR_PACE_COST_MIN &&
	      gr_pace_cost(&dear, ref) == GR_PACE_COST_MAX);
	CHECK(gr_pace_cost(&cheap, mix) >= GR_PACE_COST_MIN &&
	      gr_pace_cost(&dear, mix) <= GR_PACE_COST_MAX);
	CHECK_EQ(gr_pace_limit(LIMIT, gr_pace_cost(&cheap, ref)), most);
	CHECK_EQ(gr_pace_limit(LIMIT, gr_pace_cost(&dear, ref)), least);
	/* out of range, however it got there */
	CHECK_EQ(gr_pace_limit(LIMIT, 1e-300), most);
	CHECK_EQ(gr_pace_limit(LIMIT, 1e300), least);
	CHECK_EQ(gr_pace_limit(LIMIT, 0), LIMIT);
	CHECK_EQ(gr_pace_limit(1, 1e300), 1);
	CHECK_EQ(gr_pace_limit(64ull << 30, 0.01), (64ull << 30) / GR_PACE_COST_MIN);
}

/* A stream's job of JOB_BYTES that took ns_per_byte a byte of engine. */
static gr_job stream_job(unsigned engine, uint64_t ns_per_byte)
{
	gr_job j;

	memset(&j, 0, sizeof(j));
	j.kind = GR_JOB_REDUCE;
	j.op = GR_OP_SUM;
	j.dtype = GR_DT_F32;
	j.n = JOB_BYTES / 4;
	j.where = GR_AT_STAGING;
	j.engine = (uint8_t)engine;
	j.busy_ns = ns_per_byte * JOB_BYTES;
	return j;
}

/* The bytes stream reads in the millisecond after one it streamed in,
 * beside a light connection read now, before it is paced; it is then
 * taken off the paced list again. */
static uint64_t read_until_paced(gr_server *s, gr_conn *light, gr_conn *stream)
{
	const uint64_t now = uv_now(s->loop), shared = 64 * KiB;
	uint64_t total = 0, b;

	CHECK_EQ(gr_pace_budget(light, KiB, shared), KiB);
	gr_pace_read(light, KiB);
	stream->pace_ms = now - 1;
	stream->pace_bytes = 1 * MiB;
	while ((b = gr_pace_budget(stream, 1 * MiB, shared)) > 0) {
		CHECK(b <= shared);
		gr_pace_read(stream, b);
		total += b;
		CHECK(total < 16 * MiB);
	}
	CHECK(stream->paced);
	gr_pace_forget(stream);
	return total;
}

/* The daemon's own path: jobs through gr_pace_done(), wake-ups through
 * gr_pace_budget(). */
static void test_server(void)
{
	uv_loop_t loop;
	gr_config cfg;
	static gr_server s;
	static gr_conn light, slow, fast, fresh;
	gr_conn *all[] = {&light, &slow, &fast, &fresh};

	CHECK_EQ(uv_loop_init(&loop), 0);
	gr_config_init(&cfg);
	cfg.pace_bytes_per_ms = LIMIT;
	cfg.pace_cpu_pressure = 0; /* always short of CPU */
	s.loop = &loop;
	s.cfg = &cfg;
	gr_pace_init(&s);
	for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		all[i]->srv = &s;
		gr_link_init(&all[i]->pace_link);
	}

	for (int i = 0; i < 400; i++) {
		gr_job a = stream_job(GR_ENGINE_CPU, 3), b = stream_job(GR_ENGINE_CPU, 1);
		gr_pace_done(&s, &slow, &a);
		gr_pace_done(&s, &fast, &b);
	}
	CHECK(s.pace_ref_ns[GR_ENGINE_CPU] > 1.8 && s.pace_ref_ns[GR_ENGINE_CPU] < 2.2);

	/* what does not count: a failed job, one on a region, one on the
	 * GPUs for the CPU's average, and any at all with pacing off */
	const double ref = s.pace_ref_ns[GR_ENGINE_CPU];
	const gr_pace_est before = fast.pace;
	gr_job j = stream_job(GR_ENGINE_CPU, 100);
	j.status = -5;
	gr_pace_done(&s, &fast, &j);
	j = stream_job(GR_ENGINE_CPU, 100);
	j.where = GR_AT_HOST;
	gr_pace_done(&s, &fast, &j);
	j = stream_job(GR_ENGINE_NONE, 100);
	gr_pace_done(&s, &fast, &j);
	CHECK(s.pace_ref_ns[GR_ENGINE_CPU] == ref &&
	      memcmp(&fast.pace, &before, sizeof(before)) == 0);
	j = stream_job(GR_ENGINE_GPU, 100);
	gr_pace_done(&s, NULL, &j);
	CHECK(s.pace_ref_ns[GR_ENGINE_CPU] == ref && s.pace_ref_ns[GR_ENGINE_GPU] > 0);
	cfg.pace_bytes_per_ms = 0;
	j = stream_job(GR_ENGINE_CPU, 100);
	gr_pace_done(&s, &fast, &j);
	CHECK(s.pace_ref_ns[GR_ENGINE_CPU] == ref &&
	      memcmp(&fast.pace, &before, sizeof(before)) == 0);
	cfg.pace_bytes_per_ms = LIMIT;

	/* each stream reads its engine time's worth, a 64 KiB share at a
	 * time, then waits; one not yet measured reads the option's bytes */
	const uint64_t bs = read_until_paced(&s, &light, &slow);
	const uint64_t bf = read_until_paced(&s, &light, &fast);
	const uint64_t bn = read_until_paced(&s, &light, &fresh);
	CHECK_EQ(bs, gr_pace_limit(LIMIT, gr_pace_cost(&slow.pace, s.pace_ref_ns)));
	CHECK_EQ(bf, gr_pace_limit(LIMIT, gr_pace_cost(&fast.pace, s.pace_ref_ns)));
	CHECK_EQ(bn, LIMIT);
	CHECK_MSG(bs < LIMIT && LIMIT < bf, "slow %llu, fast %llu bytes", (unsigned long long)bs,
		  (unsigned long long)bf);
	check_near((double)bs * 3.0, (double)bf * 1.0, "engine time a millisecond");
	CHECK_EQ(s.stats.stalls_paced, 3);

	for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		gr_pace_forget(all[i]);
	gr_pace_close(&s);
	CHECK_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_EQ(uv_loop_close(&loop), 0);
	gr_config_deinit(&cfg);
}

int main(void)
{
	test_default();
	test_same_time();
	test_alone();
	test_engines();
	test_bounds();
	test_server();
	return 0;
}
