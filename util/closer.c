#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/closer.h"

typedef struct closer_item {
	struct closer_item *next;
	int fd;
	uint32_t owner;
	_Atomic uint64_t *counter;
} closer_item;

struct gr_closer {
	pthread_mutex_t lock;
	pthread_cond_t work;  /* an item was queued, an owner's close ended, or stop */
	pthread_cond_t idle;  /* a thread returned */
	closer_item *head;
	uint64_t pending;     /* queued or being closed */
	/* owners whose close is under way: at most one thread each */
	uint32_t busy[GR_CLOSER_THREADS_MAX];
	unsigned nbusy;
	unsigned threads;     /* started, not yet returned */
	unsigned waiting;     /* of those, waiting for work */
	bool stop;
	/* gr_closer_free gave up waiting: the counters may be gone */
	bool abandoned;
};

static bool closer_owner_busy(const gr_closer *cl, uint32_t owner)
{
	for (unsigned i = 0; i < cl->nbusy; i++)
		if (cl->busy[i] == owner)
			return true;
	return false;
}

/* The oldest item whose owner has no close under way, unlinked; NULL
 * when there is none. */
static closer_item *closer_take(gr_closer *cl)
{
	for (closer_item **pp = &cl->head; *pp; pp = &(*pp)->next) {
		closer_item *it = *pp;
		if (closer_owner_busy(cl, it->owner))
			continue;
		*pp = it->next;
		return it;
	}
	return NULL;
}

static void closer_destroy(gr_closer *cl)
{
	pthread_cond_destroy(&cl->work);
	pthread_cond_destroy(&cl->idle);
	pthread_mutex_destroy(&cl->lock);
	free(cl);
}

static void *closer_main(void *arg)
{
	gr_closer *cl = arg;

	pthread_mutex_lock(&cl->lock);
	for (;;) {
		closer_item *it = closer_take(cl);
		if (!it) {
			if (cl->stop && !cl->head)
				break;
			cl->waiting++;
			pthread_cond_wait(&cl->work, &cl->lock);
			cl->waiting--;
			continue;
		}
		cl->busy[cl->nbusy++] = it->owner;
		pthread_mutex_unlock(&cl->lock);
		/* EINTR leaves the descriptor closed on Linux: never again */
		close(it->fd);
		pthread_mutex_lock(&cl->lock);
		if (it->counter && !cl->abandoned)
			atomic_fetch_sub(it->counter, 1);
		for (unsigned i = 0; i < cl->nbusy; i++)
			if (cl->busy[i] == it->owner) {
				cl->busy[i] = cl->busy[--cl->nbusy];
				break;
			}
		cl->pending--;
		free(it);
		/* the owner's next item may go now, on any thread */
		if (cl->head)
			pthread_cond_broadcast(&cl->work);
	}
	cl->threads--;
	/* the last thread of a closer that gr_closer_free left frees it */
	bool last = cl->abandoned && cl->threads == 0;
	pthread_cond_broadcast(&cl->idle);
	pthread_mutex_unlock(&cl->lock);
	if (last)
		closer_destroy(cl);
	return NULL;
}

/* Start one more thread; with the lock held. */
static int closer_spawn(gr_closer *cl)
{
	pthread_attr_t attr;
	pthread_t t;
	int r;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* a close needs little stack */
	pthread_attr_setstacksize(&attr, 64 * 1024);
	r = pthread_create(&t, &attr, closer_main, cl);
	pthread_attr_destroy(&attr);
	if (r == 0)
		cl->threads++;
	return -r;
}

int gr_closer_new(gr_closer **ret)
{
	gr_closer *cl = calloc(1, sizeof(*cl));
	int r = 0;

	if (!cl)
		return -ENOMEM;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_cond_init(&cl->work, NULL);
	pthread_cond_init(&cl->idle, NULL);
	pthread_mutex_lock(&cl->lock);
	for (unsigned i = 0; i < GR_CLOSER_THREADS && r == 0; i++)
		r = closer_spawn(cl);
	unsigned started = cl->threads;
	pthread_mutex_unlock(&cl->lock);
	if (started == 0) {
		gr_closer_free(cl, 0);
		return r;
	}
	*ret = cl;
	return 0;
}

void gr_closer_close(gr_closer *cl, int fd, uint32_t owner, _Atomic uint64_t *counter)
{
	closer_item *it = cl && fd >= 0 ? malloc(sizeof(*it)) : NULL;

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
	it->owner = owner;
	it->counter = counter;
	pthread_mutex_lock(&cl->lock);
	closer_item **pp = &cl->head;
	while (*pp)
		pp = &(*pp)->next;
	*pp = it;
	cl->pending++;
	/* An owner with nothing under way should not wait for threads that
	 * others' closes hold: one more thread, up to the bound. */
	if (cl->waiting == 0 && !closer_owner_busy(cl, owner) && cl->threads < GR_CLOSER_THREADS_MAX)
		closer_spawn(cl);
	pthread_cond_broadcast(&cl->work);
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
	while (cl->threads > 0)
		if (pthread_cond_timedwait(&cl->idle, &cl->lock, &until) == ETIMEDOUT)
			break;
	bool done = cl->threads == 0;
	/* a close that ends later counts nothing: its owner may be gone */
	cl->abandoned = !done;
	pthread_mutex_unlock(&cl->lock);
	if (!done)
		return NULL; /* a thread still closes: the last one frees cl */
	closer_destroy(cl);
	return NULL;
}
