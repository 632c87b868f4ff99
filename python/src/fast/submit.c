/*
 * submit()'s common case in C (client._Conn.submit): a small plain reduce
 * of a NumPy array with no options, sent as a head made once per (op,
 * dtype, nbytes) and the array's bytes; anything else goes to the pure
 * submit (_protocol.Protocol.submit).
 */
#include "conn-internal.h"

#include <string.h>

/* Recent (op, dtype, nbytes) -> request head lookups of submit(). */
#define HEAD_CACHE 16

struct head_entry {
	PyObject *op, *dtype;   /* held, so that their addresses stay theirs */
	Py_ssize_t nbytes;
	PyObject *head, *conv;  /* NULL: no fast way for these */
};

static struct head_entry heads[HEAD_CACHE];
static unsigned heads_next;

/*
 * The head of a small plain reduce of (op, dtype, nbytes): 1 with new
 * references to it and its conv in *ret_head and *ret_conv, 0 where there
 * is no fast way for these, -1 with the exception _protocol.small_head
 * raised. (New references: another thread may replace the entry while
 * the caller sends.)
 */
static int head_lookup(PyObject *op, PyObject *dtype, Py_ssize_t nbytes, PyObject **ret_head,
		       PyObject **ret_conv)
{
	struct head_entry *e, old;
	PyObject *n, *hit;
	unsigned i;

	for (i = 0; i < HEAD_CACHE; i++) {
		e = &heads[i];
		if (e->op == op && e->dtype == dtype && e->nbytes == nbytes) {
			if (e->head == NULL)
				return 0;
			*ret_head = Py_NewRef(e->head);
			*ret_conv = Py_NewRef(e->conv);
			return 1;
		}
	}
	n = PyLong_FromSsize_t(nbytes);
	if (n == NULL)
		return -1;
	hit = PyObject_CallFunctionObjArgs(fast_cfg.small_head, op, dtype, n, NULL);
	Py_DECREF(n);
	if (hit == NULL)
		return -1;
	if (hit != Py_None && (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 2 ||
			       !PyBytes_Check(PyTuple_GET_ITEM(hit, 0)))) {
		Py_DECREF(hit);
		PyErr_SetString(PyExc_SystemError, "small_head() gave no (head, conv)");
		return -1;
	}
	/* Fill the entry first and let go of the old one after: a release may
	 * run Python code, and another thread with it. */
	e = &heads[heads_next++ % HEAD_CACHE];
	old = *e;
	e->op = Py_NewRef(op);
	e->dtype = Py_NewRef(dtype);
	e->nbytes = nbytes;
	e->head = e->conv = NULL;
	if (hit != Py_None) {
		e->head = Py_NewRef(PyTuple_GET_ITEM(hit, 0));
		e->conv = Py_NewRef(PyTuple_GET_ITEM(hit, 1));
		*ret_head = Py_NewRef(e->head);
		*ret_conv = Py_NewRef(e->conv);
	}
	Py_DECREF(hit);
	Py_XDECREF(old.op);
	Py_XDECREF(old.dtype);
	Py_XDECREF(old.head);
	Py_XDECREF(old.conv);
	return *ret_head != NULL;
}

/*
 * submit(op, x, full, allow_copy, partial, ddof, offsets, out, client):
 * client._Conn.submit. The common case, a small contiguous NumPy array
 * with no options and no regions on the connection, goes out here: its
 * bytes copied after a head made once (as Protocol.submit's own fast
 * way); everything else goes to the Python method.
 */
PyObject *conn_submit(fast_conn *c, PyObject *const *args, Py_ssize_t nargs)
{
	PyObject *x, *dtype, *r, *head = NULL, *conv = NULL;
	Py_buffer view;
	int t;

	if (nargs != 9) {
		PyErr_SetString(PyExc_TypeError, "submit() takes 9 arguments");
		return NULL;
	}
	if (conn_ready(c) < 0)
		return NULL;
	x = args[1];
	if ((PyObject *)Py_TYPE(x) != fast_cfg.ndarray || args[5] != Py_None ||
	    args[6] != Py_None || args[7] != Py_None)
		goto pure;
	t = PyObject_IsTrue(args[2]);
	if (t != 0)
		goto pure_or_error;
	t = PyObject_IsTrue(args[4]);
	if (t != 0)
		goto pure_or_error;
	t = conn_regions_any(c, s_ranges);
	if (t != 0)
		goto pure_or_error;
	if (PyObject_GetBuffer(x, &view, PyBUF_ANY_CONTIGUOUS) < 0) {
		/* strided: copied by the Python way */
		PyErr_Clear();
		goto pure;
	}
	dtype = PyObject_GetAttr(x, s_dtype);
	if (dtype == NULL) {
		PyBuffer_Release(&view);
		return NULL;
	}
	t = head_lookup(args[0], dtype, view.len, &head, &conv);
	Py_DECREF(dtype);
	if (t <= 0) {
		PyBuffer_Release(&view);
		if (t < 0)
			return NULL;
		goto pure;
	}
	r = conn_send(c, conv, PyBytes_AS_STRING(head), (size_t)PyBytes_GET_SIZE(head), view.buf,
		      (size_t)view.len, Py_None, Py_None, c->spin);
	PyBuffer_Release(&view);
	Py_DECREF(head);
	Py_DECREF(conv);
	return r;

pure_or_error:
	if (t < 0)
		return NULL;
pure:
	{
		PyObject *call_args[10];

		call_args[0] = (PyObject *)c;
		memcpy(call_args + 1, args, 9 * sizeof(PyObject *));
		return PyObject_Vectorcall(fast_cfg.pure_submit, call_args, 10, NULL);
	}
}

