/*
 * The completion queue's hand-off while the loop busy-polls. While the
 * loop polls it drains in every iteration and posts do not wake it; once
 * it stops polling, a job posted a moment earlier must still wake it.
 *
 * Here the loop stops polling every few iterations and blocks until woken,
 * while another thread posts one job at a time, after a random short
 * delay, and waits for its callback. Stops and posts thus race tens of
 * thousands of times; a lost wake-up leaves a job unanswered, which fails
 * the test after a few seconds instead of hanging it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include <uv.h>

#include "engine/completion.h"
#include "tests/check.h"

#define ROUNDS 50000
#define DEADLINE_NS 5000000000ull

static uv_loop_t loop;
static gr_completion *cq;
static uv_idle_t idle;
static uv_check_t check;
static unsigned iterations;
static atomic_uint answered;
static unsigned pauses;

static void job_done(gr_job *job)
{
	(void)job;
	atomic_fetch_add(&answered, 1);
}

/* A polling phase lasts three iterations, then the loop may block. */
static void idle_cb(uv_idle_t *h)
{
	if (++iterations % 3 == 0) {
		gr_completion_polling_stop(cq);
		uv_idle_stop(h);
	}
}

static void check_cb(uv_check_t *h)
{
	(void)h;
	gr_completion_drain(cq);
	if (atomic_load(&answered) == ROUNDS + 1) {
		if (uv_is_active((uv_handle_t *)&idle))
			gr_completion_polling_stop(cq);
		uv_close((uv_handle_t *)&idle, NULL);
		uv_close((uv_handle_t *)&check, NULL);
		gr_completion_close(cq);
		return;
	}
	if (!uv_is_active((uv_handle_t *)&idle)) {
		pauses++;
		gr_completion_polling_start(cq);
		uv_idle_start(&idle, idle_cb);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *poster(void *arg)
{
	static gr_job jobs[2];
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	(void)arg;
	for (unsigned i = 0; i < ROUNDS; i++) {
		/* a delay of 0 to about 2 us, spun */
		for (volatile unsigned k = check_rng(&rng) % 4000; k > 0; k--)
			;
		gr_job *job = &jobs[i % 2];
		job->done = job_done;
		gr_completion_post(cq, job);
		uint64_t deadline = now_ns() + DEADLINE_NS;
		while (atomic_load(&answered) != i + 1) {
			if (now_ns() > deadline) {
				fprintf(stderr, "job %u of %u never answered: a lost wake-up\n", i,
					ROUNDS);
				exit(1);
			}
		}
	}
	/* the last job ends the loop */
	jobs[0].done = job_done;
	gr_completion_post(cq, &jobs[0]);
	return NULL;
}

int main(void)
{
	CHECK(uv_loop_init(&loop) == 0);
	CHECK(gr_completion_new(&loop, &cq) == 0);
	uv_idle_init(&loop, &idle);
	uv_check_init(&loop, &check);
	uv_unref((uv_handle_t *)&idle);
	uv_unref((uv_handle_t *)&check);
	uv_check_start(&check, check_cb);
	gr_completion_polling_start(cq);
	uv_idle_start(&idle, idle_cb);

	pthread_t t;
	CHECK(pthread_create(&t, NULL, poster, NULL) == 0);
	CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(uv_loop_close(&loop) == 0);
	CHECK_EQ(atomic_load(&answered), ROUNDS + 1);
	/* the loop did stop polling, over and over */
	CHECK_MSG(pauses > ROUNDS / 10, "only %u pauses in polling", pauses);
	printf("%u jobs answered, %u iterations, %u pauses in polling\n", ROUNDS + 1, iterations,
	       pauses);
	return 0;
}
