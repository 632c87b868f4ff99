/*
 * The CPU workers share themselves among owners by time (engine/workq.h):
 * the queue alone, then the CPU backend with one worker, where one owner
 * has many slow jobs queued and another comes with one: the other's is
 * run after at most two of the first owner's, not after all of them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/check.h"
#include "engine/completion.h"
#include "engine/workq.h"

/* ---- the queue alone ---- */

static void test_queue(void)
{
	gr_workq q;
	gr_workq_node a[8], b[2], c;
	gr_workq_init(&q);
	CHECK(gr_workq_empty(&q));
	CHECK(!gr_workq_serve(&q));

	for (int i = 0; i < 8; i++)
		gr_workq_push(&q, 1, &a[i]);
	/* owner 1 runs one item of 10 ms; owner 2 comes meanwhile */
	gr_workq_class *k = gr_workq_serve(&q);
	CHECK(k && k->owner == 1 && k->head == &a[0]);
	gr_workq_take(&q, k, &a[0]);
	gr_workq_push(&q, 2, &b[0]);
	gr_workq_push(&q, 2, &b[1]);
	gr_workq_charge(&q, k, 10000000);
	/* owner 2, level with owner 1 when it came, has had less */
	k = gr_workq_serve(&q);
	CHECK(k && k->owner == 2 && k->head == &b[0]);
	gr_workq_take(&q, k, &b[0]);
	gr_workq_charge(&q, k, 1000000);
	k = gr_workq_serve(&q);
	CHECK(k && k->owner == 2);
	gr_workq_take(&q, k, &b[1]);
	gr_workq_charge(&q, k, 1000000);
	/* owner 2 is done: owner 1 again, in its order */
	k = gr_workq_serve(&q);
	CHECK(k && k->owner == 1 && k->head == &a[1]);
	/* while a worker is on owner 1's work, its usual 10 ms an item
	 * counts: a newcomer is served before owner 1's next */
	gr_workq_take(&q, k, &a[1]);
	gr_workq_push(&q, 3, &c);
	gr_workq_class *k3 = gr_workq_serve(&q);
	CHECK(k3 && k3->owner == 3 && k3->head == &c);
	gr_workq_take(&q, k3, &c);
	gr_workq_charge(&q, k3, 500);
	gr_workq_charge(&q, k, 10000000);
	/* the rest of owner 1's, a run at a time */
	k = gr_workq_serve(&q);
	CHECK(k && k->owner == 1 && k->head == &a[2]);
	gr_workq_take(&q, k, &a[7]);
	CHECK(gr_workq_empty(&q));
	gr_workq_charge(&q, k, 60000000);
	CHECK(!gr_workq_serve(&q));

	/* an owner back after a pause gets no credit for it: it is level
	 * with the least served owner that waits */
	gr_workq_push(&q, 4, &a[0]);
	gr_workq_push(&q, 4, &a[1]);
	gr_workq_push(&q, 1, &b[0]);
	k = gr_workq_serve(&q);
	CHECK(k && k->owner == 4);
	gr_workq_take(&q, k, &a[0]);
	gr_workq_charge(&q, k, 1000);
	k = gr_workq_serve(&q);
	CHECK_MSG(k && k->owner == 1, "owner %u", k ? k->owner : 0);
	gr_workq_take(&q, k, &b[0]);
	gr_workq_charge(&q, k, 1000);
	k = gr_workq_serve(&q);
	CHECK(k && k->owner == 4);
	gr_workq_take(&q, k, &a[1]);
	gr_workq_charge(&q, k, 1000);
	CHECK(gr_workq_empty(&q));

	/* more owners than classes: they share, and every item comes out */
	static gr_workq_node many[3 * GR_WORKQ_CLASSES];
	for (unsigned i = 0; i < 3 * GR_WORKQ_CLASSES; i++)
		gr_workq_push(&q, 100 + i, &many[i]);
	unsigned out = 0;
	while ((k = gr_workq_serve(&q))) {
		gr_workq_node *h = k->head;
		gr_workq_take(&q, k, h);
		gr_workq_charge(&q, k, 1000);
		out++;
	}
	CHECK_MSG(out == 3 * GR_WORKQ_CLASSES, "%u out", out);
	CHECK(gr_workq_empty(&q));
}

/* ---- the backend: slow jobs of one owner, one job of another ---- */

#define SLOW_JOBS 10
#define SLOW_MS 4

static atomic_uint ran;          /* jobs run so far */
static unsigned other_ran_at;    /* when the other owner's ran: 1 = first */
static unsigned done_count;
static float data[1 << 15];      /* 128 KiB: enough that no run takes two jobs */

static int slow_run(gr_job *job)
{
	unsigned at = atomic_fetch_add(&ran, 1) + 1;
	if (job->owner == 2) {
		other_ran_at = at;
		return 0;
	}
	struct timespec ts = {0, SLOW_MS * 1000000L};
	nanosleep(&ts, NULL);
	return 0;
}

static void slow_done(gr_job *job)
{
	(void)job;
	done_count++;
}

static void job_init(gr_job *j, uint32_t owner)
{
	memset(j, 0, sizeof(*j));
	j->kind = GR_JOB_RUN;
	j->run = slow_run;
	j->op = GR_OP_SUM;
	j->dtype = GR_DT_F32;
	j->data = data;
	j->n = sizeof(data) / sizeof(data[0]);
	j->device = -1;
	j->owner = owner;
	j->done = slow_done;
}

static void test_backend(void)
{
	uv_loop_t loop;
	gr_completion *cq;
	gr_backend *b;
	char err[256];
	CHECK(uv_loop_init(&loop) == 0);
	CHECK(gr_completion_new(&loop, &cq) == 0);
	gr_backend_config cfg = {.threads = 1, .inline_max_bytes = 0};
	CHECK_MSG(gr_backend_cpu_new(&cfg, cq, &b, err, sizeof(err)) == 0, "%s", err);

	static gr_job slow[SLOW_JOBS], other;
	for (int i = 0; i < SLOW_JOBS; i++) {
		job_init(&slow[i], 1);
		slow[i].next = i + 1 < SLOW_JOBS ? &slow[i + 1] : NULL;
	}
	b->ops->submit(b, &slow[0]);
	/* the first of them is under way */
	while (atomic_load(&ran) == 0) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	job_init(&other, 2);
	b->ops->submit(b, &other);
	while (done_count < SLOW_JOBS + 1)
		CHECK(uv_run(&loop, UV_RUN_ONCE) >= 0);
	CHECK_MSG(other_ran_at >= 2 && other_ran_at <= 3,
		  "the other owner's job ran as job %u of %d", other_ran_at, SLOW_JOBS + 1);
	for (int i = 0; i < SLOW_JOBS; i++)
		CHECK(slow[i].status == 0);
	CHECK(other.status == 0);
	b = gr_backend_free(b);
	gr_completion_close(cq);
	CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0);
	CHECK(uv_loop_close(&loop) == 0);
}

int main(void)
{
	test_queue();
	printf("queue: ok\n");
	test_backend();
	printf("backend: the other owner's job ran as job %u of %d: ok\n", other_ran_at,
	       SLOW_JOBS + 1);
	return 0;
}
