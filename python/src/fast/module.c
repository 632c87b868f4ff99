/*
 * gpured._fast's module: configure(), which takes the Python objects the
 * extension calls (fast.h, struct fast_cfg), the helpers its files share,
 * and the module with its types.
 */
#include "fast.h"

#include "conn.h"
#include "future.h"
#include "reply.h"
#include "stream.h"

struct fast_cfg fast_cfg;

PyObject *s_dead, *s_msgid, *s_pending, *s_regions, *s_doomed, *s_ranges, *s_replies, *s_limit,
	*s_acquire, *s_release, *s_dtype, *s_value, *s_code, *s_internal, *s_error, *s_eof,
	*s_lost, *s_fail, *s_raise_dead, *s_free_msgid, *s_send_unmaps, *s_send_failed,
	*s_send_interrupted, *s_sendmsg, *s_receive, *s_path, *s_drive, *s_set_result,
	*s_set_exception;

void fast_error_save(fast_saved_error *e)
{
#if PY_VERSION_HEX >= 0x030C0000
	e->type = e->tb = NULL;
	e->value = PyErr_GetRaisedException();
#else
	PyErr_Fetch(&e->type, &e->value, &e->tb);
#endif
}

void fast_error_restore(fast_saved_error *e)
{
#if PY_VERSION_HEX >= 0x030C0000
	PyErr_SetRaisedException(e->value);
#else
	PyErr_Restore(e->type, e->value, e->tb);
#endif
}

void fast_error_drop(fast_saved_error *e)
{
	Py_XDECREF(e->type);
	Py_XDECREF(e->value);
	Py_XDECREF(e->tb);
}

/* The exception being raised, as an object (no longer raised). */
PyObject *fast_fetch_error(void)
{
#if PY_VERSION_HEX >= 0x030C0000
	return PyErr_GetRaisedException();
#else
	PyObject *type, *value, *tb;

	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	if (tb != NULL && value != NULL)
		PyException_SetTraceback(value, tb);
	Py_XDECREF(type);
	Py_XDECREF(tb);
	return value;
#endif
}

/* Call f with the current exception put aside, then put it back. */
void fast_call_keeping_error(PyObject *f)
{
	fast_saved_error e;
	PyObject *r;

	fast_error_save(&e);
	r = PyObject_CallNoArgs(f);
	if (r == NULL)
		PyErr_WriteUnraisable(f);
	Py_XDECREF(r);
	fast_error_restore(&e);
}

/* lock.acquire() (blocking) or lock.acquire(False): 1 got it, 0 not, -1 error. */
int fast_lock_take(PyObject *acquire, int blocking)
{
	PyObject *r = blocking ? PyObject_CallNoArgs(acquire)
				: PyObject_CallOneArg(acquire, Py_False);
	int got;

	if (r == NULL)
		return -1;
	got = r == Py_True;
	Py_DECREF(r);
	return got;
}

int fast_lock_give(PyObject *release)
{
	PyObject *r;

	if (PyErr_Occurred()) {
		fast_call_keeping_error(release);
		return 0;
	}
	r = PyObject_CallNoArgs(release);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

/* timeout (None or seconds) as a number: 1 when there is one, 0 for
 * None, -1 with the TypeError that adding it to a float raises. */
int fast_timeout_arg(PyObject *t, double *ret)
{
	PyObject *sum, *zero;

	if (t == Py_None)
		return 0;
	if (PyFloat_Check(t)) {
		*ret = PyFloat_AS_DOUBLE(t);
		return 1;
	}
	zero = PyFloat_FromDouble(0.0);
	if (zero == NULL)
		return -1;
	sum = PyNumber_Add(zero, t);
	Py_DECREF(zero);
	if (sum == NULL)
		return -1;
	*ret = PyFloat_AsDouble(sum);
	Py_DECREF(sum);
	return *ret == -1.0 && PyErr_Occurred() ? -1 : 1;
}

/* ---- the module ---- */

static int take(PyObject *d, const char *name, PyObject **ret)
{
	PyObject *v = PyDict_GetItemString(d, name);

	if (v == NULL) {
		PyErr_Format(PyExc_KeyError, "configure() needs %s", name);
		return -1;
	}
	Py_XSETREF(*ret, Py_NewRef(v));
	return 0;
}

static int take_size(PyObject *d, const char *name, size_t *ret)
{
	PyObject *v = PyDict_GetItemString(d, name);

	if (v == NULL) {
		PyErr_Format(PyExc_KeyError, "configure() needs %s", name);
		return -1;
	}
	*ret = PyLong_AsSize_t(v);
	return *ret == (size_t)-1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *configure(PyObject *mod, PyObject *d)
{
	PyObject *grace = NULL;

	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "configure() takes a dict");
		return NULL;
	}
	if (take(d, "PENDING", &fast_cfg.pending) < 0 ||
	    take(d, "CANCELLED", &fast_cfg.cancelled) < 0 ||
	    take(d, "CANCELLED_AND_NOTIFIED", &fast_cfg.cancelled_notified) < 0 ||
	    take(d, "FINISHED", &fast_cfg.finished) < 0 ||
	    take(d, "base_set_result", &fast_cfg.base_set_result) < 0 ||
	    take(d, "base_set_exception", &fast_cfg.base_set_exception) < 0 ||
	    take(d, "base_result", &fast_cfg.base_result) < 0 ||
	    take(d, "base_exception", &fast_cfg.base_exception) < 0 ||
	    take(d, "Condition", &fast_cfg.condition) < 0 ||
	    take(d, "InvalidStateError", &fast_cfg.invalid_state) < 0 ||
	    take(d, "wait_done", &fast_cfg.wait_done) < 0 ||
	    take(d, "ndarray", &fast_cfg.ndarray) < 0 ||
	    take(d, "small_head", &fast_cfg.small_head) < 0 ||
	    take(d, "value_conv", &fast_cfg.value_conv) < 0 ||
	    take(d, "pure_submit", &fast_cfg.pure_submit) < 0 ||
	    take(d, "buffers", &fast_cfg.buffers) < 0 ||
	    take(d, "Broken", &fast_cfg.broken) < 0 || take(d, "Error", &fast_cfg.error) < 0 ||
	    take(d, "ConnectionError", &fast_cfg.connection_error) < 0 ||
	    take_size(d, "CORK_BYTES", &fast_cfg.cork_bytes) < 0 ||
	    take_size(d, "RECV_BYTES", &fast_cfg.recv_bytes) < 0 ||
	    take_size(d, "UNPACK_MAX_BYTES", &fast_cfg.unpack_max) < 0 ||
	    take(d, "FG_GRACE", &grace) < 0)
		return NULL;
	fast_cfg.fg_grace = PyFloat_AsDouble(grace);
	Py_DECREF(grace);
	if (fast_cfg.fg_grace == -1.0 && PyErr_Occurred())
		return NULL;
	if (fast_cfg.recv_bytes == 0) {
		PyErr_SetString(PyExc_ValueError, "RECV_BYTES must be positive");
		return NULL;
	}
	fast_cfg.ready = 1;
	Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
	{"configure", (PyCFunction)configure, METH_O,
	 "configure(dict): the Python objects and settings this module uses (client.py)"},
	{"cuda_calls", (PyCFunction)(void (*)(void))fast_cuda_calls, METH_FASTCALL,
	 "cuda_calls(query, synchronize, ctx_get, ctx_push, ctx_pop): the driver's stream and "
	 "context calls, by address (_device)"},
	{"stream_sync", (PyCFunction)(void (*)(void))fast_stream_sync, METH_FASTCALL,
	 "stream_sync(stream, ctx=0): wait for a CUDA stream (a CUstream as an int) with "
	 "context ctx current; the CUresult"},
	{NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "gpured._fast",
	.m_doc = "The blocking client's per-request work in C (see client.py).",
	.m_size = -1,
	.m_methods = module_methods,
};

static int intern(PyObject **ret, const char *s)
{
	*ret = PyUnicode_InternFromString(s);
	return *ret == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__fast(void);

PyMODINIT_FUNC PyInit__fast(void)
{
	PyObject *m;

	if (intern(&s_dead, "dead") < 0 || intern(&s_msgid, "msgid") < 0 ||
	    intern(&s_pending, "pending") < 0 || intern(&s_regions, "regions") < 0 ||
	    intern(&s_doomed, "_doomed") < 0 || intern(&s_ranges, "_ranges") < 0 ||
	    intern(&s_replies, "replies") < 0 || intern(&s_limit, "limit") < 0 ||
	    intern(&s_acquire, "acquire") < 0 || intern(&s_release, "release") < 0 ||
	    intern(&s_dtype, "dtype") < 0 || intern(&s_value, "value") < 0 ||
	    intern(&s_code, "code") < 0 || intern(&s_internal, "internal") < 0 ||
	    intern(&s_error, "error") < 0 || intern(&s_eof, "eof") < 0 ||
	    intern(&s_lost, "lost") < 0 || intern(&s_fail, "fail") < 0 ||
	    intern(&s_raise_dead, "raise_dead") < 0 || intern(&s_free_msgid, "_free_msgid") < 0 ||
	    intern(&s_send_unmaps, "_send_unmaps") < 0 ||
	    intern(&s_send_failed, "_send_failed") < 0 ||
	    intern(&s_send_interrupted, "_send_interrupted") < 0 ||
	    intern(&s_sendmsg, "_sendmsg") < 0 || intern(&s_receive, "receive") < 0 ||
	    intern(&s_path, "path") < 0 || intern(&s_drive, "drive") < 0 ||
	    intern(&s_set_result, "set_result") < 0 ||
	    intern(&s_set_exception, "set_exception") < 0)
		return NULL;
	if (reply_init() < 0)
		return NULL;
	if (PyType_Ready(&future_type) < 0 || PyType_Ready(&conn_type) < 0)
		return NULL;
	m = PyModule_Create(&module);
	if (m == NULL)
		return NULL;
	Py_INCREF(&future_type);
	Py_INCREF(&conn_type);
	if (PyModule_AddObject(m, "Future", (PyObject *)&future_type) < 0 ||
	    PyModule_AddObject(m, "Conn", (PyObject *)&conn_type) < 0 ||
	    PyModule_AddIntConstant(m, "API", FAST_API) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
