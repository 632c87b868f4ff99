#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "engine/completion.h"

struct gr_completion {
	uv_async_t async;
	pthread_mutex_t lock;
	gr_job *head, *tail;
	pthread_t loop_thread;
	bool deferred;
	atomic_bool polling; /* the loop drains in each iteration: no wake-up needed */
	uint64_t *now_ns;
};

static void completion_async_cb(uv_async_t *handle)
{
	gr_completion_drain(handle->data);
}

int gr_completion_new(uv_loop_t *loop, gr_completion **ret)
{
	gr_completion *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	int r = uv_async_init(loop, &cq->async, completion_async_cb);
	if (r < 0) {
		free(cq);
		return r;
	}
	cq->async.data = cq;
	cq->loop_thread = pthread_self();
	pthread_mutex_init(&cq->lock, NULL);
	*ret = cq;
	return 0;
}

void gr_completion_post(gr_completion *cq, gr_job *job)
{
	job->next = NULL;
	gr_completion_post_list(cq, job);
}

void gr_completion_post_list(gr_completion *cq, gr_job *head)
{
	gr_job *tail = head;

	if (!head)
		return;
	while (tail->next)
		tail = tail->next;
	pthread_mutex_lock(&cq->lock);
	if (cq->tail)
		cq->tail->next = head;
	else
		cq->head = head;
	cq->tail = tail;
	pthread_mutex_unlock(&cq->lock);
	/* only the loop thread reads deferred */
	if (pthread_equal(pthread_self(), cq->loop_thread) && cq->deferred)
		return;
	/* The queue store above, then the flag: see gr_completion_polling_stop */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&cq->polling, memory_order_relaxed))
		uv_async_send(&cq->async);
}

void gr_completion_polling_start(gr_completion *cq)
{
	atomic_store(&cq->polling, true);
}

void gr_completion_polling_stop(gr_completion *cq)
{
	/* The flag, then the queue: a post either sees the flag down and
	 * wakes the loop itself, or its job is seen here. */
	atomic_store(&cq->polling, false);
	atomic_thread_fence(memory_order_seq_cst);
	pthread_mutex_lock(&cq->lock);
	bool empty = cq->head == NULL;
	pthread_mutex_unlock(&cq->lock);
	if (!empty)
		uv_async_send(&cq->async);
}

void gr_completion_set_clock(gr_completion *cq, uint64_t *now_ns)
{
	cq->now_ns = now_ns;
}

void gr_completion_defer(gr_completion *cq, bool defer)
{
	cq->deferred = defer;
	if (defer)
		return;
	/* A done() run by the last drain may have submitted a job that ran
	 * inline and was posted after that drain took the queue: the loop
	 * must come back for it rather than sleep. */
	pthread_mutex_lock(&cq->lock);
	bool left = cq->head != NULL;
	pthread_mutex_unlock(&cq->lock);
	if (left)
		uv_async_send(&cq->async);
}

void gr_completion_drain(gr_completion *cq)
{
	pthread_mutex_lock(&cq->lock);
	gr_job *job = cq->head;
	cq->head = cq->tail = NULL;
	pthread_mutex_unlock(&cq->lock);

	if (job && cq->now_ns)
		*cq->now_ns = uv_hrtime();
	while (job) {
		gr_job *next = job->next;
		/* Another thread wrote the next job's result: start fetching
		 * it while this job's callback runs. */
		if (next)
			__builtin_prefetch(&next->result);
		job->next = NULL;
		job->done(job);
		job = next;
	}
}

static void completion_close_cb(uv_handle_t *handle)
{
	gr_completion *cq = handle->data;
	pthread_mutex_destroy(&cq->lock);
	free(cq);
}

void gr_completion_close(gr_completion *cq)
{
	if (cq)
		uv_close((uv_handle_t *)&cq->async, completion_close_cb);
}
