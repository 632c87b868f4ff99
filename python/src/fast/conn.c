/*
 * A connection's per-request work: conn.h. The object and its sending
 * are here; submit()'s common case is submit.c's, its receiving and
 * drive() recv.c's.
 */
#include "conn-internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the object ---- */

static PyObject *conn_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	fast_conn *c = (fast_conn *)type->tp_alloc(type, 0);

	if (c == NULL)
		return NULL;
	c->fd = -1;
	c->epfd = -1;
	reply_scan_reset(&c->scan);
	return (PyObject *)c;
}

static int conn_traverse(fast_conn *c, visitproc visit, void *arg)
{
	Py_VISIT(c->proto);
	Py_VISIT(c->proto_dict);
	Py_VISIT(c->pending);
	Py_VISIT(c->regions);
	Py_VISIT(c->regions_dict);
	Py_VISIT(c->lock_acquire);
	Py_VISIT(c->lock_release);
	Py_VISIT(c->rlock_acquire);
	Py_VISIT(c->rlock_release);
	Py_VISIT(c->future_type);
	return 0;
}

static int conn_clear(fast_conn *c)
{
	Py_CLEAR(c->proto);
	Py_CLEAR(c->proto_dict);
	Py_CLEAR(c->pending);
	Py_CLEAR(c->regions);
	Py_CLEAR(c->regions_dict);
	Py_CLEAR(c->lock_acquire);
	Py_CLEAR(c->lock_release);
	Py_CLEAR(c->rlock_acquire);
	Py_CLEAR(c->rlock_release);
	Py_CLEAR(c->future_type);
	return 0;
}

static void conn_dealloc(fast_conn *c)
{
	PyObject_GC_UnTrack(c);
	if (c->epfd >= 0)
		close(c->epfd);
	conn_clear(c);
	PyMem_RawFree(c->out);
	PyMem_RawFree(c->in);
	Py_TYPE(c)->tp_free((PyObject *)c);
}

int conn_ready(fast_conn *c)
{
	if (c->proto == NULL) {
		PyErr_SetString(PyExc_RuntimeError, "connection not attached");
		return -1;
	}
	return 0;
}

/* An attribute of proto or proto.regions, from its dict (borrowed); NULL
 * with AttributeError where it has none. */
PyObject *conn_dict_attr(PyObject *d, PyObject *name)
{
	PyObject *v = PyDict_GetItemWithError(d, name);

	if (v == NULL && !PyErr_Occurred())
		PyErr_SetObject(PyExc_AttributeError, name);
	return v;
}

/* proto.dead is not None: 1, 0, or -1 on error. */
int conn_dead(fast_conn *c)
{
	PyObject *d = conn_dict_attr(c->proto_dict, s_dead);

	return d == NULL ? -1 : d != Py_None;
}

int conn_regions_any(fast_conn *c, PyObject *name)
{
	PyObject *v = conn_dict_attr(c->regions_dict, name);

	if (v == NULL)
		return -1;
	return PyList_CheckExact(v) ? PyList_GET_SIZE(v) > 0 : PyObject_IsTrue(v);
}

/* self.fail(*args), args a (class, message) tuple. */
int conn_fail_with(fast_conn *c, PyObject *args)
{
	PyObject *fail, *r;

	if (args == NULL)
		return -1;
	fail = PyObject_GetAttr((PyObject *)c, s_fail);
	if (fail == NULL) {
		Py_DECREF(args);
		return -1;
	}
	r = PyObject_Call(fail, args, NULL);
	Py_DECREF(fail);
	Py_DECREF(args);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

/* ---- sending ---- */

/* Write all of p, the GIL let go meanwhile: 0, or -1 with OSError (or a
 * signal handler's exception) set, as socket.sendall. */
static int send_all(fast_conn *c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k;
		int err = 0, fd = c->fd;

		Py_BEGIN_ALLOW_THREADS
		k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0)
			err = errno;
		Py_END_ALLOW_THREADS
		if (k < 0) {
			if (err == EINTR) {
				if (PyErr_CheckSignals() < 0)
					return -1;
				continue;
			}
			errno = err;
			PyErr_SetFromErrno(PyExc_OSError);
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int out_reserve(fast_conn *c, size_t more)
{
	size_t want = c->out_len + more, cap;
	char *p;

	if (want <= c->out_cap)
		return 0;
	cap = c->out_cap ? c->out_cap : 4096;
	while (cap < want)
		cap *= 2;
	p = PyMem_RawRealloc(c->out, cap);
	if (p == NULL) {
		PyErr_NoMemory();
		return -1;
	}
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Append a request, [0, msgid, ... (a, then b: the bytes after the
 * msgid), to the corked ones. */
static int cork(fast_conn *c, uint32_t msgid, const char *a, size_t na, const char *b, size_t nb)
{
	char *p;

	if (out_reserve(c, 7 + na + nb) < 0)
		return -1;
	p = c->out + c->out_len;
	p[0] = (char)0x94;
	p[1] = 0x00;
	p[2] = (char)0xce;
	p[3] = (char)(msgid >> 24);
	p[4] = (char)(msgid >> 16);
	p[5] = (char)(msgid >> 8);
	p[6] = (char)msgid;
	memcpy(p + 7, a, na);
	if (nb)
		memcpy(p + 7 + na, b, nb);
	c->out_len += 7 + na + nb;
	return 0;
}

/* Send the corked requests (hold the send lock): as client._Conn._flush,
 * they are gone whether or not the send succeeds. */
int conn_flush(fast_conn *c)
{
	int rc = send_all(c, c->out, c->out_len);

	c->out_len = 0;
	return rc;
}

/*
 * A send failed (its exception set), as the except clauses of
 * client._Conn.request and try_flush: an OSError goes to _send_failed(),
 * which closes the connection and raises why; anything else (a signal's
 * exception, maybe halfway through a message) fails the connection and is
 * raised again. -1, or 0 where _send_failed() returned.
 */
int conn_send_error(fast_conn *c)
{
	PyObject *e, *r;

	if (PyErr_ExceptionMatches(PyExc_OSError)) {
		e = fast_fetch_error();
		r = PyObject_CallMethodOneArg((PyObject *)c, s_send_failed, e);
		Py_XDECREF(e);
		if (r == NULL)
			return -1;
		Py_DECREF(r);
		return 0;
	}
	{
		fast_saved_error saved;

		fast_error_save(&saved);
		r = PyObject_CallMethodNoArgs((PyObject *)c, s_send_interrupted);
		if (r == NULL) {
			fast_error_drop(&saved);
			return -1;
		}
		Py_DECREF(r);
		fast_error_restore(&saved);
	}
	return -1;
}

/* As Protocol.request: put fut in flight under a free msgid; the msgid, or
 * NULL with the connection's error raised once it is dead. */
static PyObject *register_request(fast_conn *c, PyObject *fut, PyObject *conv)
{
	PyObject *mobj, *key, *entry;
	unsigned long long m;
	int dead = conn_dead(c), taken;

	if (dead < 0)
		return NULL;
	if (dead) {
		PyObject *r = PyObject_CallMethodNoArgs(c->proto, s_raise_dead);

		if (r != NULL) {
			Py_DECREF(r);
			PyErr_SetString(PyExc_SystemError, "raise_dead() returned");
		}
		return NULL;
	}
	mobj = conn_dict_attr(c->proto_dict, s_msgid);
	if (mobj == NULL)
		return NULL;
	m = PyLong_AsUnsignedLongLong(mobj);
	if (m == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	m++;
	key = PyLong_FromUnsignedLongLong(m);
	if (key == NULL)
		return NULL;
	taken = m > 0xFFFFFFFFull ? 1 : PyDict_Contains(c->pending, key);
	if (taken < 0) {
		Py_DECREF(key);
		return NULL;
	}
	if (taken) {
		Py_DECREF(key);
		key = PyObject_CallMethodNoArgs(c->proto, s_free_msgid);
		if (key == NULL)
			return NULL;
	}
	if (PyDict_SetItem(c->proto_dict, s_msgid, key) < 0) {
		Py_DECREF(key);
		return NULL;
	}
	entry = PyTuple_Pack(2, fut, conv);
	if (entry == NULL || PyDict_SetItem(c->pending, key, entry) < 0) {
		Py_XDECREF(entry);
		Py_DECREF(key);
		return NULL;
	}
	Py_DECREF(entry);
	return key;
}

/* Protocol.forget, keeping the exception being raised. */
static void forget(fast_conn *c, PyObject *msgid)
{
	fast_saved_error e;

	fast_error_save(&e);
	if (PyDict_DelItem(c->pending, msgid) < 0)
		PyErr_Clear();
	fast_error_restore(&e);
}

/*
 * client._Conn.request: a request whose bytes after the msgid are a then b
 * (or, with data or fds, a alone and then data, through _sendmsg), put in
 * flight and sent or corked; its future.
 */
PyObject *conn_send(fast_conn *c, PyObject *conv, const char *a, size_t na, const char *b,
		    size_t nb, PyObject *fds, PyObject *data, double spin)
{
	fast_future *f;
	PyObject *msgid = NULL, *r;
	uint32_t m;
	int got, truth;

	if (conn_ready(c) < 0)
		return NULL;
	f = future_make(c->future_type, (PyObject *)c);
	if (f == NULL)
		return NULL;
	f->spin = spin;
	got = fast_lock_take(c->lock_acquire, 1);
	if (got < 0)
		goto out;
	msgid = register_request(c, (PyObject *)f, conv);
	if (msgid == NULL)
		goto unlock;
	m = (uint32_t)PyLong_AsUnsignedLong(msgid);

	truth = conn_regions_any(c, s_doomed);
	if (truth < 0)
		goto failed;
	if (truth) {
		r = PyObject_CallMethodNoArgs((PyObject *)c, s_send_unmaps);
		if (r == NULL)
			goto failed;
		Py_DECREF(r);
	}

	if (data == Py_None && fds == Py_None) {
		if (c->last_fg_thread == PyThread_get_thread_ident() &&
		    fast_now() - c->last_fg < fast_cfg.fg_grace) {
			/* This thread has just waited for a result and will send
			 * this before it waits again (drive): small requests
			 * submitted meanwhile go out in one write. */
			if (cork(c, m, a, na, b, nb) < 0)
				goto failed;
			if (c->out_len >= fast_cfg.cork_bytes && conn_flush(c) < 0)
				goto failed;
		} else {
			/* with any corked ones before it, in one write */
			if (cork(c, m, a, na, b, nb) < 0 || conn_flush(c) < 0)
				goto failed;
		}
	} else {
		PyObject *head, *bufs;

		if (c->out_len && conn_flush(c) < 0)
			goto failed;
		head = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(7 + na));
		if (head == NULL)
			goto failed;
		{
			char *p = PyBytes_AS_STRING(head);

			p[0] = (char)0x94;
			p[1] = 0x00;
			p[2] = (char)0xce;
			p[3] = (char)(m >> 24);
			p[4] = (char)(m >> 16);
			p[5] = (char)(m >> 8);
			p[6] = (char)m;
			memcpy(p + 7, a, na);
		}
		bufs = PyObject_CallFunctionObjArgs(fast_cfg.buffers, head, data, NULL);
		Py_DECREF(head);
		if (bufs == NULL)
			goto failed;
		r = PyObject_CallMethodObjArgs((PyObject *)c, s_sendmsg, bufs, fds, NULL);
		Py_DECREF(bufs);
		if (r == NULL)
			goto failed;
		Py_DECREF(r);
	}
	goto unlock;

failed:
	forget(c, msgid);
	conn_send_error(c);
unlock:
	fast_lock_give(c->lock_release);
out:
	Py_XDECREF(msgid);
	if (PyErr_Occurred()) {
		Py_DECREF(f);
		return NULL;
	}
	return (PyObject *)f;
}

/* request(tail, conv, fds=None, data=None, gpu=False): client._Conn.request. */
static PyObject *conn_request(fast_conn *c, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"tail", "conv", "fds", "data", "gpu", NULL};
	PyObject *tail, *conv, *fds = Py_None, *data = Py_None, *r;
	int gpu = 0;
	Py_buffer view;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOp:request", kwlist, &tail, &conv, &fds,
					 &data, &gpu))
		return NULL;
	double spin = gpu ? c->gpu_spin : c->spin;
	if (PyBytes_CheckExact(tail))
		return conn_send(c, conv, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail),
				 NULL, 0, fds, data, spin);
	if (PyObject_GetBuffer(tail, &view, PyBUF_SIMPLE) < 0)
		return NULL;
	r = conn_send(c, conv, view.buf, (size_t)view.len, NULL, 0, fds, data, spin);
	PyBuffer_Release(&view);
	return r;
}

/* ---- its Python face ---- */

static PyObject *conn_attach(fast_conn *c, PyObject *args)
{
	int fd;
	PyObject *proto, *lock, *rlock, *ftype, *pending, *regions;
	double spin;

	if (!PyArg_ParseTuple(args, "iOOOOd:_attach", &fd, &proto, &lock, &rlock, &ftype,
			      &spin))
		return NULL;
	if (!PyType_Check(ftype) || !PyType_IsSubtype((PyTypeObject *)ftype, &future_type)) {
		PyErr_SetString(PyExc_TypeError,
				"future_type must derive from gpured._fast.Future");
		return NULL;
	}
	pending = PyObject_GetAttr(proto, s_pending);
	if (pending == NULL)
		return NULL;
	if (!PyDict_CheckExact(pending)) {
		Py_DECREF(pending);
		PyErr_SetString(PyExc_TypeError, "proto.pending must be a dict");
		return NULL;
	}
	regions = PyObject_GetAttr(proto, s_regions);
	if (regions == NULL) {
		Py_DECREF(pending);
		return NULL;
	}
	conn_clear(c);
	c->pending = pending;
	c->regions = regions;
	c->proto = Py_NewRef(proto);
	/* Plain objects: their attributes are read from their dicts, which
	 * is what Python's attribute access reads too. */
	c->proto_dict = PyObject_GenericGetDict(proto, NULL);
	c->regions_dict = PyObject_GenericGetDict(regions, NULL);
	if (c->proto_dict == NULL || c->regions_dict == NULL || !PyDict_Check(c->proto_dict) ||
	    !PyDict_Check(c->regions_dict)) {
		conn_clear(c);
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "proto and proto.regions need a __dict__");
		return NULL;
	}
	c->future_type = (PyTypeObject *)Py_NewRef(ftype);
	c->lock_acquire = PyObject_GetAttr(lock, s_acquire);
	c->lock_release = PyObject_GetAttr(lock, s_release);
	c->rlock_acquire = PyObject_GetAttr(rlock, s_acquire);
	c->rlock_release = PyObject_GetAttr(rlock, s_release);
	if (!c->lock_acquire || !c->lock_release || !c->rlock_acquire || !c->rlock_release) {
		conn_clear(c);
		return NULL;
	}
	c->fd = fd;
	c->spin = c->gpu_spin = spin;
	if (c->epfd < 0) {
		struct epoll_event ev = {.events = EPOLLIN};

		/* without it, waits take recv() alone */
		c->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (c->epfd >= 0 && epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(c->epfd);
			c->epfd = -1;
		}
	}
	Py_RETURN_NONE;
}

static PyObject *conn_drive_py(fast_conn *c, PyObject *args)
{
	PyObject *fut, *timeout;
	double t = 0;
	int has;

	if (!PyArg_ParseTuple(args, "O!O:drive", &future_type, &fut, &timeout))
		return NULL;
	has = fast_timeout_arg(timeout, &t);
	if (has < 0 || conn_drive((PyObject *)c, (fast_future *)fut, has, t) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *conn_read_py(fast_conn *c, PyObject *args)
{
	int flags = 0, r;

	if (!PyArg_ParseTuple(args, "|i:_read", &flags))
		return NULL;
	if (conn_ready(c) < 0)
		return NULL;
	r = conn_read(c, flags);
	if (r < 0)
		return NULL;
	return PyBool_FromLong(r);
}

static PyObject *conn_flush_py(fast_conn *c, PyObject *unused)
{
	if (conn_flush(c) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *conn_try_flush_py(fast_conn *c, PyObject *unused)
{
	int r;

	if (conn_ready(c) < 0)
		return NULL;
	r = conn_try_flush(c);
	if (r < 0)
		return NULL;
	return PyBool_FromLong(r);
}

static PyObject *conn_drop_corked(fast_conn *c, PyObject *unused)
{
	/* The buffer stays: a send under way (under the send lock) may be
	 * reading it. */
	c->out_len = 0;
	Py_RETURN_NONE;
}

static PyObject *conn_forget_fd(fast_conn *c, PyObject *unused)
{
	c->fd = -1;
	if (c->epfd >= 0) {
		close(c->epfd);
		c->epfd = -1;
	}
	Py_RETURN_NONE;
}

static PyObject *get_out(fast_conn *c, void *unused)
{
	return PyLong_FromSize_t(c->out_len);
}

static PyObject *get_waiting(fast_conn *c, void *unused)
{
	return PyLong_FromLong(c->waiting);
}

static PyObject *ident_obj(unsigned long id)
{
	if (id == 0)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLong(id);
}

static PyObject *get_reader_ident(fast_conn *c, void *unused)
{
	return ident_obj(c->reader_ident);
}

static int put_reader_ident(fast_conn *c, PyObject *v, void *unused)
{
	unsigned long id = 0;

	if (v != NULL && v != Py_None) {
		id = PyLong_AsUnsignedLong(v);
		if (id == (unsigned long)-1 && PyErr_Occurred())
			return -1;
	}
	c->reader_ident = id;
	return 0;
}

static PyObject *get_last_fg_thread(fast_conn *c, void *unused)
{
	return ident_obj(c->last_fg_thread);
}

static PyObject *get_last_fg(fast_conn *c, void *unused)
{
	return PyFloat_FromDouble(c->last_fg);
}

static int put_double(double *field, PyObject *v)
{
	double d;

	if (v == NULL) {
		PyErr_SetString(PyExc_AttributeError, "cannot delete this attribute");
		return -1;
	}
	d = PyFloat_AsDouble(v);
	if (d == -1.0 && PyErr_Occurred())
		return -1;
	*field = d;
	return 0;
}

static int put_last_fg(fast_conn *c, PyObject *v, void *unused)
{
	return put_double(&c->last_fg, v);
}

static PyObject *get_spin(fast_conn *c, void *unused)
{
	return PyFloat_FromDouble(c->spin);
}

static int put_spin(fast_conn *c, PyObject *v, void *unused)
{
	return put_double(&c->spin, v);
}

static PyObject *get_gpu_spin(fast_conn *c, void *unused)
{
	return PyFloat_FromDouble(c->gpu_spin);
}

static int put_gpu_spin(fast_conn *c, PyObject *v, void *unused)
{
	return put_double(&c->gpu_spin, v);
}

static PyGetSetDef conn_getset[] = {
	{"out", (getter)get_out, NULL, "bytes of corked requests", NULL},
	{"waiting", (getter)get_waiting, NULL, "threads in drive()", NULL},
	{"reader_ident", (getter)get_reader_ident, (setter)put_reader_ident,
	 "the thread that holds the read lock", NULL},
	{"last_fg_thread", (getter)get_last_fg_thread, NULL, "the last thread that waited", NULL},
	{"last_fg", (getter)get_last_fg, (setter)put_last_fg, "when it stopped waiting", NULL},
	{"spin", (getter)get_spin, (setter)put_spin, "seconds to read before a wait sleeps", NULL},
	{"gpu_spin", (getter)get_gpu_spin, (setter)put_gpu_spin,
	 "the same for requests that read GPU memory", NULL},
	{NULL},
};

static PyMethodDef conn_methods[] = {
	{"_attach", (PyCFunction)conn_attach, METH_VARARGS,
	 "_attach(fd, proto, lock, rlock, future_type, spin)"},
	{"request", (PyCFunction)(void (*)(void))conn_request, METH_VARARGS | METH_KEYWORDS,
	 "request(tail, conv, fds=None, data=None, gpu=False): the future of a request sent"},
	{"submit", (PyCFunction)(void (*)(void))conn_submit, METH_FASTCALL,
	 "submit(op, x, full, allow_copy, partial, ddof, offsets, out, client)"},
	{"drive", (PyCFunction)conn_drive_py, METH_VARARGS, "drive(fut, timeout)"},
	{"_read", (PyCFunction)conn_read_py, METH_VARARGS, "_read(flags=0)"},
	{"_flush", (PyCFunction)conn_flush_py, METH_NOARGS, NULL},
	{"try_flush", (PyCFunction)conn_try_flush_py, METH_NOARGS, NULL},
	{"_drop_corked", (PyCFunction)conn_drop_corked, METH_NOARGS, NULL},
	{"_forget_fd", (PyCFunction)conn_forget_fd, METH_NOARGS, NULL},
	{NULL},
};

PyTypeObject conn_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "gpured._fast.Conn",
	.tp_basicsize = sizeof(fast_conn),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "A connection's per-request work in C (a base of client._FastConn).",
	.tp_new = conn_new,
	.tp_dealloc = (destructor)conn_dealloc,
	.tp_traverse = (traverseproc)conn_traverse,
	.tp_clear = (inquiry)conn_clear,
	.tp_methods = conn_methods,
	.tp_getset = conn_getset,
};
