/*
 * A concurrent.futures.Future's state in C: future.h.
 */
#include "future.h"

#include "conn.h"

fast_future *future_make(PyTypeObject *type, PyObject *conn)
{
	fast_future *f;

	if (!fast_cfg.ready) {
		PyErr_SetString(PyExc_RuntimeError, "gpured._fast is not configured");
		return NULL;
	}
	f = (fast_future *)type->tp_alloc(type, 0);
	if (f == NULL)
		return NULL;
	f->state = Py_NewRef(fast_cfg.pending);
	Py_XINCREF(conn);
	f->conn = conn;
	return f;
}

static PyObject *future_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	return (PyObject *)future_make(type, NULL);
}

static int future_init(PyObject *self, PyObject *args, PyObject *kwds)
{
	if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
		PyErr_SetString(PyExc_TypeError, "a future takes no arguments");
		return -1;
	}
	return 0;
}

static int future_traverse(fast_future *f, visitproc visit, void *arg)
{
	Py_VISIT(f->state);
	Py_VISIT(f->result);
	Py_VISIT(f->exception);
	Py_VISIT(f->condition);
	Py_VISIT(f->waiters);
	Py_VISIT(f->callbacks);
	Py_VISIT(f->conn);
	return 0;
}

static int future_clear(fast_future *f)
{
	Py_CLEAR(f->state);
	Py_CLEAR(f->result);
	Py_CLEAR(f->exception);
	Py_CLEAR(f->condition);
	Py_CLEAR(f->waiters);
	Py_CLEAR(f->callbacks);
	Py_CLEAR(f->conn);
	return 0;
}

static void future_dealloc(fast_future *f)
{
	PyObject_GC_UnTrack(f);
	future_clear(f);
	Py_TYPE(f)->tp_free((PyObject *)f);
}

/*
 * Complete f with v, its result or (is_exc) its exception. Nobody can be
 * waiting on or watching a future that has no Condition yet (each of
 * concurrent.futures' ways to do either makes it first), and this runs
 * under the GIL without calling Python: its state is simply set. Once
 * there is one, concurrent.futures.Future's own method does it under the
 * lock, wakes the waiters and runs the callbacks (raising
 * InvalidStateError for a future already done or cancelled).
 */
int future_settle(fast_future *f, PyObject *v, int is_exc)
{
	PyObject *r;

	if (f->condition == NULL && !future_state_done(f->state)) {
		if (is_exc)
			Py_XSETREF(f->exception, Py_NewRef(v));
		else
			Py_XSETREF(f->result, Py_NewRef(v));
		Py_SETREF(f->state, Py_NewRef(fast_cfg.finished));
		return 0;
	}
	r = PyObject_CallFunctionObjArgs(is_exc ? fast_cfg.base_set_exception
						: fast_cfg.base_set_result,
					 (PyObject *)f, v, NULL);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

/*
 * Read the connection until f is done or timeout (None: for ever); what is
 * left of the timeout (None for none), as client._Future._drive.
 */
static PyObject *future_drive(fast_future *f, PyObject *timeout)
{
	double t = 0, end = 0;
	int has = fast_timeout_arg(timeout, &t);
	PyObject *r;

	if (has < 0)
		return NULL;
	if (has)
		end = fast_now() + t;
	if (f->conn != NULL && PyObject_TypeCheck(f->conn, &conn_type)) {
		if (conn_drive(f->conn, f, has, t) < 0)
			return NULL;
	} else if (f->conn != NULL) {
		r = PyObject_CallMethodObjArgs(f->conn, s_drive, (PyObject *)f, timeout, NULL);
		if (r == NULL)
			return NULL;
		Py_DECREF(r);
	}
	if (!has)
		Py_RETURN_NONE;
	return PyFloat_FromDouble(fast_max(end - fast_now(), 0));
}

static int timeout_kw(const char *fname, PyObject *const *args, Py_ssize_t nargs,
		      PyObject *kwnames, PyObject **ret)
{
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

	*ret = Py_None;
	if (nargs + nkw > 1) {
		PyErr_Format(PyExc_TypeError, "%s() takes at most 1 argument (%zd given)", fname,
			     nargs + nkw);
		return -1;
	}
	if (nargs == 1) {
		*ret = args[0];
	} else if (nkw == 1) {
		PyObject *kw = PyTuple_GET_ITEM(kwnames, 0);

		if (PyUnicode_CompareWithASCIIString(kw, "timeout") != 0) {
			PyErr_Format(PyExc_TypeError,
				     "%s() got an unexpected keyword argument '%U'", fname, kw);
			return -1;
		}
		*ret = args[0];
	}
	return 0;
}

/* result()'s and exception()'s arguments, and the connection read until f
 * is done or the timeout passes: 0 and the time left in *timeout (a new
 * reference in *ret_left, or NULL where nothing was read), or -1. */
static int future_wait(fast_future *f, const char *name, PyObject *const *args,
		       Py_ssize_t nargs, PyObject *kwnames, PyObject **timeout,
		       PyObject **ret_left)
{
	*ret_left = NULL;
	if (timeout_kw(name, args, nargs, kwnames, timeout) < 0)
		return -1;
	if (!future_state_done(f->state)) {
		*ret_left = future_drive(f, *timeout);
		if (*ret_left == NULL)
			return -1;
		*timeout = *ret_left;
	}
	return 0;
}

static PyObject *future_result(fast_future *f, PyObject *const *args, Py_ssize_t nargs,
			       PyObject *kwnames)
{
	PyObject *timeout, *left, *r;

	if (future_wait(f, "result", args, nargs, kwnames, &timeout, &left) < 0)
		return NULL;
	if (f->state == fast_cfg.finished && (f->exception == NULL || f->exception == Py_None)) {
		/* the common case: no lock to take, as client._Future.result */
		Py_XDECREF(left);
		return Py_NewRef(f->result ? f->result : Py_None);
	}
	r = PyObject_CallFunctionObjArgs(fast_cfg.base_result, (PyObject *)f, timeout, NULL);
	Py_XDECREF(left);
	return r;
}

static PyObject *future_exception(fast_future *f, PyObject *const *args, Py_ssize_t nargs,
				  PyObject *kwnames)
{
	PyObject *timeout, *left, *r;

	if (future_wait(f, "exception", args, nargs, kwnames, &timeout, &left) < 0)
		return NULL;
	r = PyObject_CallFunctionObjArgs(fast_cfg.base_exception, (PyObject *)f, timeout, NULL);
	Py_XDECREF(left);
	return r;
}

static PyObject *future_done(fast_future *f, PyObject *unused)
{
	return PyBool_FromLong(future_state_done(f->state));
}

static PyObject *future_set_result(fast_future *f, PyObject *v)
{
	if (future_settle(f, v, 0) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *future_set_exception(fast_future *f, PyObject *v)
{
	if (future_settle(f, v, 1) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* The attributes concurrent.futures.Future's methods (and wait(),
 * as_completed()) use, kept in the C fields. */

/* The field at byte offset off (a getset's closure) of f. */
#define FIELD(f, off) ((PyObject **)((char *)(f) + (size_t)(uintptr_t)(off)))
#define AT(name) ((void *)offsetof(fast_future, name))

/* Setting any of the fields below; deleting one is an error. */
static int put_field(fast_future *f, PyObject *v, void *off)
{
	if (v == NULL) {
		PyErr_SetString(PyExc_AttributeError, "cannot delete this attribute");
		return -1;
	}
	Py_XSETREF(*FIELD(f, off), Py_NewRef(v));
	return 0;
}

/* A field that reads as None until set (result, exception, conn). */
static PyObject *get_or_none(fast_future *f, void *off)
{
	PyObject *v = *FIELD(f, off);

	return Py_NewRef(v ? v : Py_None);
}

static PyObject *get_state(fast_future *f, void *off)
{
	return Py_NewRef(f->state ? f->state : fast_cfg.pending);
}

static PyObject *get_condition(fast_future *f, void *off)
{
	if (f->condition == NULL) {
		/* Making it runs Python code: another thread may make one meanwhile. */
		PyObject *made = PyObject_CallNoArgs(fast_cfg.condition);

		if (made == NULL)
			return NULL;
		if (f->condition == NULL)
			f->condition = made;
		else
			Py_DECREF(made);
	}
	return Py_NewRef(f->condition);
}

/* A list made on first reading (waiters, done callbacks). */
static PyObject *get_list(fast_future *f, void *off)
{
	PyObject **field = FIELD(f, off);

	if (*field == NULL) {
		*field = PyList_New(0);
		if (*field == NULL)
			return NULL;
	}
	return Py_NewRef(*field);
}

static PyGetSetDef future_getset[] = {
	{"_state", (getter)get_state, (setter)put_field, NULL, AT(state)},
	{"_result", (getter)get_or_none, (setter)put_field, NULL, AT(result)},
	{"_exception", (getter)get_or_none, (setter)put_field, NULL, AT(exception)},
	{"_condition", (getter)get_condition, (setter)put_field, NULL, AT(condition)},
	{"_waiters", (getter)get_list, (setter)put_field, NULL, AT(waiters)},
	{"_done_callbacks", (getter)get_list, (setter)put_field, NULL, AT(callbacks)},
	{"_conn", (getter)get_or_none, (setter)put_field, NULL, AT(conn)},
	{NULL},
};

static PyMethodDef future_methods[] = {
	{"result", (PyCFunction)(void (*)(void))future_result, METH_FASTCALL | METH_KEYWORDS,
	 "The result, reading the connection until it is back."},
	{"exception", (PyCFunction)(void (*)(void))future_exception,
	 METH_FASTCALL | METH_KEYWORDS, "The exception, reading the connection until it is back."},
	{"done", (PyCFunction)future_done, METH_NOARGS, NULL},
	{"set_result", (PyCFunction)future_set_result, METH_O, NULL},
	{"set_exception", (PyCFunction)future_set_exception, METH_O, NULL},
	{NULL},
};

PyTypeObject future_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "gpured._fast.Future",
	.tp_basicsize = sizeof(fast_future),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "A concurrent.futures.Future's state in C (a base of client._FastFuture).",
	.tp_new = future_new,
	.tp_init = future_init,
	.tp_dealloc = (destructor)future_dealloc,
	.tp_traverse = (traverseproc)future_traverse,
	.tp_clear = (inquiry)future_clear,
	.tp_methods = future_methods,
	.tp_getset = future_getset,
};
