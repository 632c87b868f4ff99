#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/direct.h"
#include "math/reduce.h"
#include "proto/message.h"

struct gr_direct {
	/* under lock: a line that changes with every send */
	pthread_mutex_t lock;
	int fd;
	bool closed;       /* the loop closed the connection */
	bool loop_writing; /* the loop has bytes of its own under way */
	gr_buf held;       /* for the loop to write, first */

	/* What the loop reads after every job answered directly, without the
	 * lock, on a line that changes only when a send falls short: the
	 * loop keeps it in its cache while sends go out. Atomic operations
	 * only; held_len is written under lock. */
	_Alignas(64) size_t held_len; /* atomic: held.len */
	unsigned flags;               /* atomic: GR_DIRECT_* */

	/* the loop thread's alone */
	_Alignas(64) unsigned refs;
};

gr_direct *gr_direct_new(int fd)
{
	gr_direct *d = aligned_alloc(_Alignof(gr_direct), sizeof(*d));
	if (!d)
		return NULL;
	memset(d, 0, sizeof(*d));
	if (pthread_mutex_init(&d->lock, NULL) != 0) {
		free(d);
		return NULL;
	}
	d->fd = fd;
	gr_buf_init(&d->held);
	d->refs = 1;
	return d;
}

gr_direct *gr_direct_ref(gr_direct *d)
{
	if (d)
		d->refs++;
	return d;
}

gr_direct *gr_direct_unref(gr_direct *d)
{
	if (!d || --d->refs > 0)
		return NULL;
	pthread_mutex_destroy(&d->lock);
	gr_buf_deinit(&d->held);
	free(d);
	return NULL;
}

void gr_direct_close(gr_direct *d)
{
	pthread_mutex_lock(&d->lock);
	d->closed = true;
	pthread_mutex_unlock(&d->lock);
}

static void direct_set_held(gr_direct *d)
{
	__atomic_store_n(&d->held_len, d->held.len, __ATOMIC_RELAXED);
}

int gr_direct_take(gr_direct *d, gr_buf *wbuf)
{
	int r = 0;

	pthread_mutex_lock(&d->lock);
	d->loop_writing = true;
	if (d->held.len > 0) {
		/* held, then wbuf, in wbuf's place; held keeps a buffer */
		if (wbuf->len > 0)
			r = gr_buf_append(&d->held, wbuf->data, wbuf->len);
		if (r == 0) {
			gr_buf t = *wbuf;
			*wbuf = d->held;
			d->held = t;
			d->held.len = 0;
			direct_set_held(d);
		}
	}
	/* a line left alone unless it changes */
	if (__atomic_load_n(&d->flags, __ATOMIC_RELAXED) & GR_DIRECT_HELD)
		__atomic_and_fetch(&d->flags, ~(unsigned)GR_DIRECT_HELD, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
	return r;
}

bool gr_direct_written(gr_direct *d)
{
	pthread_mutex_lock(&d->lock);
	bool more = d->held.len > 0;
	if (!more)
		d->loop_writing = false;
	pthread_mutex_unlock(&d->lock);
	return more;
}

size_t gr_direct_held(const gr_direct *d)
{
	return __atomic_load_n(&d->held_len, __ATOMIC_RELAXED);
}

unsigned gr_direct_check(const gr_direct *d)
{
	/* The job's post and its drain order this after what the thread
	 * set while answering it. */
	return __atomic_load_n(&d->flags, __ATOMIC_RELAXED);
}

/* ---- the backend threads' side ---- */

/* Replies are at most a few dozen bytes (argmin's, the longest, 54: a
 * 5-byte msgid, and value, count and index of 9 bytes each); a run's for
 * one connection are gathered here and sent together. */
#define RUN_BYTES 4096u
#define REPLY_MAX 64u

static _Thread_local struct {
	gr_direct *d;
	gr_buf buf; /* over data: never grows (see direct_answer) */
	uint8_t data[RUN_BYTES];
} run;

static void direct_send(gr_direct *d, const uint8_t *p, size_t len)
{
	size_t off = 0;

	pthread_mutex_lock(&d->lock);
	if (d->closed)
		goto out;
	if (d->held.len == 0 && !d->loop_writing) {
		ssize_t n;
		do
			n = send(d->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		if (n >= 0) {
			off = (size_t)n;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
			/* the peer is gone, or the socket broke: the loop
			 * closes the connection */
			__atomic_or_fetch(&d->flags, GR_DIRECT_BROKEN, __ATOMIC_RELAXED);
			goto out;
		}
	}
	if (off < len) {
		if (gr_buf_append(&d->held, p + off, len - off) < 0) {
			/* a reply lost, maybe half sent: the stream is unusable */
			__atomic_or_fetch(&d->flags, GR_DIRECT_BROKEN, __ATOMIC_RELAXED);
			goto out;
		}
		direct_set_held(d);
		__atomic_or_fetch(&d->flags, GR_DIRECT_HELD, __ATOMIC_RELAXED);
	}
out:
	pthread_mutex_unlock(&d->lock);
}

static void direct_flush_run(void)
{
	if (run.d && run.buf.len > 0)
		direct_send(run.d, run.buf.data, run.buf.len);
	run.d = NULL;
	run.buf.len = 0;
}

static void direct_answer(void *early, uint32_t tag, gr_op op, gr_dtype dtype,
			  const gr_partial *result)
{
	gr_direct *d = early;
	gr_value v;

	if (!run.buf.data) {
		run.buf.data = run.data;
		run.buf.cap = sizeof(run.data);
	}
	if (run.d != d || run.buf.len > RUN_BYTES - REPLY_MAX)
		direct_flush_run();
	run.d = d;
	/* Early answers are for jobs of at least one element, whose finish
	 * cannot fail; the reply fits what is left of the buffer. */
	size_t before = run.buf.len;
	int w = gr_partial_finish(op, dtype, result, &v) != GR_OK ? -EINVAL
		: gr_op_has_index(op) ? gr_msg_write_response_index(&run.buf, tag, &v, result->index,
								     result->count)
		: gr_msg_write_response_value(&run.buf, tag, &v, result->count);
	if (w < 0) {
		run.buf.len = before;
		__atomic_or_fetch(&d->flags, GR_DIRECT_BROKEN, __ATOMIC_RELAXED);
	}
}

const gr_early_ops gr_direct_early = {
	.answer = direct_answer,
	.end = direct_flush_run,
};
