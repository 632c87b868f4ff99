/*
 * A connection's receiving: reading the socket, decoding its replies
 * (reply.h) and completing their futures, and drive(), which waits for
 * one: conn.h. The object and its sending are conn.c's.
 */
#include "conn-internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

/* A wait for one answer that usually ends within this many microseconds
 * (the daemon answers at once: it shares this CPU, say) is made in epoll
 * rather than in recv() (recv_waiting). On the 2-core VM such waits take
 * 4-6 us on one CPU and 18-25 us across two. */
#define QUICK_WAIT_US 12.0

/* Wait until the socket is readable or ms pass: 1, 0, or -1. */
static int poll_in(fast_conn *c, int ms)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	int n, err = 0;

	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		n = poll(&p, 1, ms);
		if (n < 0)
			err = errno;
		Py_END_ALLOW_THREADS
		if (n >= 0)
			return n > 0;
		if (err != EINTR) {
			errno = err;
			PyErr_SetFromErrno(PyExc_OSError);
			return -1;
		}
		if (PyErr_CheckSignals() < 0)
			return -1;
	}
}

/* proto.receive(data), as client._Conn._read: 1, 0 when the connection
 * broke (failed here), -1 for an exception to raise. */
static int receive_python(fast_conn *c, PyObject *data)
{
	PyObject *r;

	if (data == NULL)
		return -1;
	r = PyObject_CallMethodOneArg(c->proto, s_receive, data);
	Py_DECREF(data);
	if (r != NULL) {
		Py_DECREF(r);
		return 1;
	}
	if (PyErr_ExceptionMatches(fast_cfg.broken)) {
		PyObject *e = fast_fetch_error(), *args;

		args = e ? PyObject_GetAttrString(e, "args") : NULL;
		Py_XDECREF(e);
		return conn_fail_with(c, args) < 0 ? -1 : 0;
	}
	return -1;
}

/* A reply this decoder does not take: Protocol.receive reads the stream
 * from it on (its decoder has seen nothing yet, so it starts there). */
static int fall_back(fast_conn *c)
{
	PyObject *data;

	PyErr_Clear();
	c->py_decoding = 1;
	data = PyBytes_FromStringAndSize((const char *)c->in + c->in_start,
					 (Py_ssize_t)(c->in_end - c->in_start));
	c->in_start = c->in_end = 0;
	reply_scan_reset(&c->scan);
	return receive_python(c, data);
}

static int settle_any(PyObject *fut, PyObject *v, int is_exc)
{
	int rc;

	if (PyObject_TypeCheck(fut, &future_type)) {
		rc = future_settle((fast_future *)fut, v, is_exc);
	} else {
		PyObject *name = is_exc ? s_set_exception : s_set_result;
		PyObject *r = PyObject_CallMethodOneArg(fut, name, v);

		rc = r == NULL ? -1 : 0;
		Py_XDECREF(r);
	}
	if (rc < 0 && PyErr_ExceptionMatches(fast_cfg.invalid_state)) {
		/* cancelled by its owner: the outcome is dropped */
		PyErr_Clear();
		rc = 0;
	}
	return rc;
}

/* One response, as Protocol.receive's loop: 1, 0 when the connection
 * broke (failed here), -1 for an exception to raise. converted: res is
 * already the converter's value (reply_map_value). */
static int dispatch(fast_conn *c, PyObject *msgid, PyObject *err, PyObject *res, int converted)
{
	PyObject *entry, *fut = Py_None, *conv = Py_None, *v;
	int rc = 1;

	entry = PyDict_GetItemWithError(c->pending, msgid);
	if (entry == NULL && PyErr_Occurred())
		return -1;
	if (entry != NULL) {
		Py_INCREF(entry);
		if (PyDict_DelItem(c->pending, msgid) < 0)
			PyErr_Clear();      /* taken by fail() meanwhile */
		if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
			Py_DECREF(entry);
			PyErr_SetString(PyExc_SystemError,
					"a pending entry that is no (future, conv)");
			return -1;
		}
		fut = PyTuple_GET_ITEM(entry, 0);
		conv = PyTuple_GET_ITEM(entry, 1);
	}
	if (err != Py_None) {
		PyObject *exc = PyObject_CallMethodOneArg(c->proto, s_error, err);

		if (exc == NULL)
			rc = -1;
		else if (fut != Py_None && settle_any(fut, exc, 1) < 0)
			rc = -1;
		Py_XDECREF(exc);
	} else if (fut != Py_None) {
		v = NULL;
		if (converted) {
			v = Py_NewRef(res);
		} else if (conv == fast_cfg.value_conv && PyDict_CheckExact(res)) {
			v = PyDict_GetItemWithError(res, s_value);
			Py_XINCREF(v);
			if (v == NULL && PyErr_Occurred())
				goto done;
		}
		if (v == NULL)
			v = PyObject_CallOneArg(conv, res);
		if (v != NULL) {
			if (settle_any(fut, v, 0) < 0)
				rc = -1;
			Py_DECREF(v);
		} else if (PyErr_ExceptionMatches(PyExc_ValueError) ||
			   PyErr_ExceptionMatches(PyExc_TypeError)) {
			/* a result that does not convert: Error "internal" */
			PyObject *e = fast_fetch_error(), *exc = NULL;
			PyObject *msg = e ? PyObject_Str(e) : NULL;

			if (msg != NULL) {
				PyObject *a[] = {msg, s_internal}, *kw = PyTuple_Pack(1, s_code);

				if (kw != NULL)
					exc = PyObject_Vectorcall(fast_cfg.error, a, 1, kw);
				Py_XDECREF(kw);
			}
			if (exc == NULL || settle_any(fut, exc, 1) < 0)
				rc = -1;
			Py_XDECREF(exc);
			Py_XDECREF(msg);
			Py_XDECREF(e);
		} else if (PyErr_ExceptionMatches(PyExc_Exception)) {
			/* no result of ours: the stream is garbage */
			PyObject *e = fast_fetch_error(), *path, *msg = NULL;

			path = PyObject_GetAttr(c->proto, s_path);
			if (path != NULL && e != NULL)
				msg = PyUnicode_FromFormat("malformed response from %S: %S",
							   path, e);
			Py_XDECREF(path);
			Py_XDECREF(e);
			rc = -1;
			if (msg != NULL &&
			    conn_fail_with(c, PyTuple_Pack(2, fast_cfg.connection_error, msg)) == 0)
				rc = 0;
			Py_XDECREF(msg);
		} else {
			rc = -1;
		}
	}
done:
	if (rc > 0 && PyErr_Occurred())
		rc = -1;
	Py_XDECREF(entry);
	return rc;
}

/* proto.replies.limit, read once a read. */
static int reply_limit(fast_conn *c, long long *limit)
{
	PyObject *replies, *l;

	if (*limit >= 0)
		return 0;
	replies = conn_dict_attr(c->proto_dict, s_replies);
	if (replies == NULL)
		return -1;
	l = PyObject_GetAttr(replies, s_limit);
	if (l == NULL)
		return -1;
	*limit = PyLong_AsLongLong(l);
	Py_DECREF(l);
	if (*limit == -1 && PyErr_Occurred())
		return -1;
	if (*limit < 0)
		*limit = 0;
	return 0;
}

/* Decode and dispatch every whole reply read so far. */
static int decode(fast_conn *c)
{
	long long limit = -1;

	while (c->in_start < c->in_end) {
		const unsigned char *p, *q, *end;
		PyObject *msgid, *err, *res;
		int r = reply_scan(&c->scan, c->in + c->in_start, c->in_end - c->in_start,
				      fast_cfg.unpack_max / 2), converted;
		size_t len;

		if (r == REPLY_FOREIGN)
			return fall_back(c);
		if (reply_limit(c, &limit) < 0)
			return -1;
		if (r == REPLY_MORE) {
			if ((long long)(c->in_end - c->in_start) > limit)
				return fall_back(c);   /* it raises ReplyTooLarge */
			break;
		}
		len = c->scan.len;
		if ((long long)len > limit)
			return fall_back(c);
		p = c->in + c->in_start;
		end = p + len;
		/* [1, msgid, error, result]: anything else is msgpack's to judge */
		if (len < 3 || p[0] != 0x94 || p[1] != 0x01)
			return fall_back(c);
		q = p + 2;
		if (!(*q <= 0x7f || *q >= 0xe0 || (*q >= 0xcc && *q <= 0xd3)))
			return fall_back(c);
		msgid = reply_build(&q, end, 0);
		if (msgid == NULL)
			return fall_back(c);
		err = q < end ? reply_build(&q, end, 0) : NULL;
		res = NULL;
		converted = 0;
		if (err == Py_None && q < end) {
			/* A plain reduce's value is read without its map. */
			PyObject *entry = PyDict_GetItemWithError(c->pending, msgid);

			if (entry == NULL && PyErr_Occurred()) {
				Py_DECREF(msgid);
				Py_DECREF(err);
				return -1;
			}
			if (entry != NULL && PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 2 &&
			    PyTuple_GET_ITEM(entry, 1) == fast_cfg.value_conv)
				converted = reply_map_value(q, end, &res);
		}
		if (res == NULL) {
			res = err != NULL && q < end ? reply_build(&q, end, 0) : NULL;
			if (res != NULL && q != end)
				Py_CLEAR(res);
		}
		if (err == NULL || res == NULL) {
			Py_DECREF(msgid);
			Py_XDECREF(err);
			Py_XDECREF(res);
			return fall_back(c);
		}
		c->in_start += len;
		r = dispatch(c, msgid, err, res, converted);
		Py_DECREF(msgid);
		Py_DECREF(err);
		Py_DECREF(res);
		if (r <= 0)
			return r;
	}
	if (c->in_start == c->in_end)
		c->in_start = c->in_end = 0;
	return 1;
}

/* Room for a read after in_end: reuse what was consumed, else grow. */
static int in_reserve(fast_conn *c)
{
	size_t want = fast_cfg.recv_bytes, cap;
	unsigned char *p;

	if (c->in_start == c->in_end) {
		c->in_start = c->in_end = 0;
		if (c->in_cap > 16 * fast_cfg.recv_bytes) {
			/* after a large reply: give the memory back */
			PyMem_RawFree(c->in);
			c->in = NULL;
			c->in_cap = 0;
		}
	}
	if (c->in_cap - c->in_end >= want)
		return 0;
	if (c->in_start > 0) {
		memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
		c->in_end -= c->in_start;
		c->in_start = 0;
		if (c->in_cap - c->in_end >= want)
			return 0;
	}
	cap = c->in_cap ? c->in_cap : want;
	while (cap - c->in_end < want)
		cap *= 2;
	p = PyMem_RawRealloc(c->in, cap);
	if (p == NULL) {
		PyErr_NoMemory();
		return -1;
	}
	c->in = p;
	c->in_cap = cap;
	return 0;
}

/*
 * recv(), which waits (unless flags has MSG_DONTWAIT) in recv() itself or,
 * with epfd (an epoll set holding fd for EPOLLIN), in epoll_wait(). A
 * reader asleep in recv() is woken once more when the daemon takes the
 * bytes it was sent (the socket's one wait queue also carries "room to
 * write"), and sleeps again; epoll wakes for input alone. On a CPU shared
 * with the daemon that extra wake-up costs two context switches for each
 * answer waited for (a p50 1.2x as long, measured); across CPUs it costs
 * nothing of the critical path, and the CPU it wakes is then quicker to
 * wake for the answer (a p50 1.1x shorter, and with many answers coming
 * recv()'s one system call beats two: 1.3x the requests per second,
 * measured on the 2-core VM). conn_read() chooses. -1 with errno as
 * recv's.
 */
static ssize_t recv_waiting(int fd, void *at, size_t room, int flags, int epfd)
{
	struct epoll_event ev;
	ssize_t n;

	if (epfd < 0 || (flags & MSG_DONTWAIT) || fd < 0)
		return recv(fd, at, room, flags);
	for (;;) {
		/* the answer is hardly ever there yet: wait first */
		if (epoll_wait(epfd, &ev, 1, -1) < 0)
			return -1;      /* EINTR: the caller runs the signal handlers */
		n = recv(fd, at, room, flags | MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return n;
	}
}

/*
 * client._Conn._read: one recv (as socket.recv, blocking unless flags has
 * MSG_DONTWAIT) and the dispatch of every whole response. 1 (also when
 * there was nothing to read), 0 at the end of the stream or on a broken
 * one (the connection is then failed), -1 for an exception to raise. Hold
 * the read lock.
 */
int conn_read(fast_conn *c, int flags)
{
	ssize_t n;
	int err = 0;
	/* Waiting for one answer, timed: where such waits are short, in
	 * epoll (recv_waiting). */
	int one = !(flags & MSG_DONTWAIT) && PyDict_GET_SIZE(c->pending) <= 1;
	int epfd = one && c->wait_us < QUICK_WAIT_US ? c->epfd : -1;
	double t0 = one ? fast_now() : 0;

	if (in_reserve(c) < 0)
		return -1;
	for (;;) {
		int fd = c->fd;
		unsigned char *at = c->in + c->in_end;
		size_t room = c->in_cap - c->in_end;

		Py_BEGIN_ALLOW_THREADS
		n = recv_waiting(fd, at, room, flags, epfd);
		if (n < 0)
			err = errno;
		Py_END_ALLOW_THREADS
		if (n >= 0 || err != EINTR)
			break;
		if (PyErr_CheckSignals() < 0)
			return -1;
	}
	if (n < 0) {
		PyObject *e;

		if (err == EAGAIN || err == EWOULDBLOCK)
			return 1;
		errno = err;
		PyErr_SetFromErrno(PyExc_OSError);
		e = fast_fetch_error();
		if (e == NULL)
			return -1;
		/* After busy or invalid_request the daemon closes, maybe with a
		 * reset: the reply said why (Protocol.lost). */
		n = conn_fail_with(c, PyObject_CallMethodOneArg(c->proto, s_lost, e));
		Py_DECREF(e);
		return n < 0 ? -1 : 0;
	}
	if (n == 0)
		return conn_fail_with(c, PyObject_CallMethodNoArgs(c->proto, s_eof)) < 0 ? -1 : 0;
	if (one)
		c->wait_us += ((fast_now() - t0) * 1e6 - c->wait_us) / 8;
	c->in_end += (size_t)n;
	if (c->py_decoding) {
		PyObject *data = PyBytes_FromStringAndSize((const char *)c->in + c->in_start,
							   (Py_ssize_t)(c->in_end - c->in_start));

		c->in_start = c->in_end = 0;
		return receive_python(c, data);
	}
	return decode(c);
}

/* client._Conn._spin: read without blocking until f is done or the spin
 * time (or what is left of the timeout) passes; 1, 0 dead, -1. */
static int conn_spin(fast_conn *c, fast_future *f, int has_timeout, double left)
{
	double spin = has_timeout ? fast_min(f->spin, left) : f->spin;
	double end = fast_now() + spin;

	while (!future_state_done(f->state)) {
		int r = conn_read(c, MSG_DONTWAIT);

		if (r <= 0)
			return r;
		if (fast_now() >= end)
			break;
	}
	return 1;
}

/* client._Conn.try_flush: 1 sent (or nothing to), 0 when another thread
 * holds the send lock with requests still corked, -1. */
int conn_try_flush(fast_conn *c)
{
	int got = fast_lock_take(c->lock_acquire, 0), rc = 1, dead;

	if (got < 0)
		return -1;
	if (!got)
		return c->out_len == 0;
	if (c->out_len) {
		dead = conn_dead(c);
		if (dead < 0)
			rc = -1;
		else if (!dead && conn_flush(c) < 0)
			rc = conn_send_error(c) < 0 ? -1 : 1;
	}
	if (fast_lock_give(c->lock_release) < 0)
		return -1;
	return rc;
}

/*
 * client._Conn.drive: read until f is done or the timeout passes (or the
 * connection dies). The thread that holds the read lock reads and
 * completes every future it meets; the others wait on their future's
 * condition, looking again now and then.
 */
int conn_drive(PyObject *self, fast_future *f, int has_timeout, double timeout)
{
	fast_conn *c = (fast_conn *)self;
	unsigned long me = PyThread_get_thread_ident();
	double deadline = has_timeout ? fast_now() + timeout : 0;
	int rc = 0;

	if (conn_ready(c) < 0)
		return -1;
	if (c->reader_ident == me) {
		/* A done-callback, run while this thread reads, waits for
		 * another future: nobody else would read its answer. */
		PyErr_SetString(PyExc_RuntimeError,
				"waiting for a gpured future inside a done-callback "
				"would deadlock; use add_done_callback instead");
		return -1;
	}
	c->waiting++;
	for (;;) {
		double left = 0;
		int got, stop = 0, dead;

		if (future_state_done(f->state))
			break;
		dead = conn_dead(c);
		if (dead) {
			rc = dead < 0 ? -1 : 0;
			break;
		}
		if (has_timeout) {
			left = deadline - fast_now();
			if (left <= 0)
				break;
		}
		got = fast_lock_take(c->rlock_acquire, 0);
		if (got < 0) {
			rc = -1;
			break;
		}
		if (!got) {
			double step = has_timeout ? fast_min(left, 0.001) : 0.001;
			PyObject *w = PyFloat_FromDouble(step), *r = NULL;

			if (w != NULL)
				r = PyObject_CallFunctionObjArgs(fast_cfg.wait_done,
								 (PyObject *)f, w, NULL);
			Py_XDECREF(w);
			if (r == NULL) {
				rc = -1;
				break;
			}
			Py_DECREF(r);
			continue;
		}
		c->reader_ident = me;
		while (!future_state_done(f->state)) {
			int r;

			/* f's request may still be corked */
			if (c->out_len) {
				r = conn_try_flush(c);
				if (r < 0) {
					stop = -1;
					break;
				}
				if (r == 0) {
					/* another thread is sending; it sends them first */
					if (poll_in(c, 1) < 0) {
						stop = -1;
						break;
					}
					continue;
				}
			}
			if (f->spin > 0) {
				r = conn_spin(c, f, has_timeout, left);
				if (r <= 0) {
					stop = r < 0 ? -1 : 1;
					break;
				}
			}
			if (future_state_done(f->state))
				break;
			if (has_timeout || c->waiting > 1) {
				/* wake now and then: to honour the timeout, or to
				 * leave reading to another waiter */
				int ms = 1;

				if (has_timeout)
					ms = fast_ms_ceil(fast_max(fast_min(left * 1000, 1000), 1));

				r = poll_in(c, ms);
				if (r < 0) {
					stop = -1;
					break;
				}
				if (r == 0)
					break;
			}
			r = conn_read(c, 0);
			if (r <= 0) {
				stop = r < 0 ? -1 : 1;
				break;
			}
		}
		c->reader_ident = 0;
		if (fast_lock_give(c->rlock_release) < 0)
			stop = -1;
		if (stop) {
			rc = stop < 0 ? -1 : 0;
			break;
		}
	}
	c->waiting--;
	c->last_fg = fast_now();
	c->last_fg_thread = me;
	return rc;
}
