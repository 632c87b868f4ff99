#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "daemon/closer.h"

typedef struct closer_item {
	struct closer_item *next;
	int fd;
	_Atomic uint64_t *counter;
} closer_item;

struct gr_closer {
	pthread_mutex_t lock;
	pthread_cond_t work;  /* an item was queued, or stop */
	pthread_cond_t idle;  /* the queue emptied and no close is under way */
	closer_item *head, *tail;
	uint64_t pending;     /* queued or being closed */
	unsigned threads;     /* started */
	unsigned running;     /* not yet returned */
	bool stop;
};

static void *closer_main(void *arg)
{
	gr_closer *cl = arg;

	pthread_mutex_lock(&cl->lock);
	for (;;) {
		while (!cl->head && !cl->stop)
			pthread_cond_wait(&cl->work, &cl->lock);
		if (!cl->head)
			break;
		closer_item *it = cl->head;
		cl->head = it->next;
		if (!cl->head)
			cl->tail = NULL;
		pthread_mutex_unlock(&cl->lock);
		/* EINTR leaves the descriptor closed on Linux: never again */
		close(it->fd);
		if (it->counter)
			atomic_fetch_sub(it->counter, 1);
		free(it);
		pthread_mutex_lock(&cl->lock);
		if (--cl->pending == 0)
			pthread_cond_broadcast(&cl->idle);
	}
	cl->running--;
	pthread_cond_broadcast(&cl->idle);
	pthread_mutex_unlock(&cl->lock);
	return NULL;
}

int gr_closer_new(gr_closer **ret)
{
	gr_closer *cl = calloc(1, sizeof(*cl));
	pthread_attr_t attr;
	int r;

	if (!cl)
		return -ENOMEM;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_cond_init(&cl->work, NULL);
	pthread_cond_init(&cl->idle, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* a close needs little stack */
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (unsigned i = 0; i < GR_CLOSER_THREADS; i++) {
		pthread_t t;
		pthread_mutex_lock(&cl->lock);
		if ((r = pthread_create(&t, &attr, closer_main, cl)) == 0) {
			cl->threads++;
			cl->running++;
		}
		pthread_mutex_unlock(&cl->lock);
		if (r != 0)
			break;
	}
	pthread_attr_destroy(&attr);
	if (cl->threads == 0) {
		gr_closer_free(cl, 0);
		return -r;
	}
	*ret = cl;
	return 0;
}

void gr_closer_close(gr_closer *cl, int fd, _Atomic uint64_t *counter)
{
	closer_item *it = cl ? malloc(sizeof(*it)) : NULL;

	if (fd < 0)
		return;
	if (!it) {
		close(fd);
		if (counter)
			atomic_fetch_sub(counter, 1);
		return;
	}
	it->next = NULL;
	it->fd = fd;
	it->counter = counter;
	pthread_mutex_lock(&cl->lock);
	if (cl->tail)
		cl->tail->next = it;
	else
		cl->head = it;
	cl->tail = it;
	cl->pending++;
	pthread_cond_signal(&cl->work);
	pthread_mutex_unlock(&cl->lock);
}

uint64_t gr_closer_pending(gr_closer *cl)
{
	uint64_t n;

	if (!cl)
		return 0;
	pthread_mutex_lock(&cl->lock);
	n = cl->pending;
	pthread_mutex_unlock(&cl->lock);
	return n;
}

gr_closer *gr_closer_free(gr_closer *cl, unsigned timeout_ms)
{
	struct timespec until;

	if (!cl)
		return NULL;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&cl->lock);
	cl->stop = true;
	pthread_cond_broadcast(&cl->work);
	while (cl->running > 0)
		if (pthread_cond_timedwait(&cl->idle, &cl->lock, &until) == ETIMEDOUT)
			break;
	bool done = cl->running == 0;
	pthread_mutex_unlock(&cl->lock);
	if (!done)
		return NULL; /* a thread still closes: it keeps cl */
	pthread_cond_destroy(&cl->work);
	pthread_cond_destroy(&cl->idle);
	pthread_mutex_destroy(&cl->lock);
	free(cl);
	return NULL;
}
