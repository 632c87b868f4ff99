/*
 * gpured._fast, the C extension of the blocking client: what its files
 * share.
 *
 * client.py and _protocol.py define what every call does; the extension
 * does, the same way, only the part that each request pays for: putting
 * it in flight (its msgid and its entry in Protocol.pending), writing its
 * bytes or corking them, waiting for its answer while reading the socket
 * (the GIL let go around every blocking call), decoding responses and
 * completing their futures. Anything else (regions, GPU memory, options,
 * errors that end the connection) is the Python code's, called from here
 * where it arises, so both paths give the same results and errors.
 *
 * future.c: a concurrent.futures.Future's state in C (fast_future).
 * reply.c: replies' bytes to Python objects, as msgpack makes them.
 * conn.c: the connection's per-request work (fast_conn): sending.
 * recv.c: a connection's receiving, and drive().
 * module.c: the module, and the Python objects client.py hands over.
 */
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* What client.py checks before it uses this module. */
#define FAST_API 1

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *Py_NewRef(PyObject *o)
{
	Py_INCREF(o);
	return o;
}
#endif

/* What client.py hands over (module.c, configure()). */
struct fast_cfg {
	int ready;
	/* concurrent.futures' states */
	PyObject *pending, *cancelled, *cancelled_notified, *finished;
	/* concurrent.futures.Future's own methods, for the slow paths */
	PyObject *base_set_result, *base_set_exception, *base_result, *base_exception;
	PyObject *condition;          /* threading.Condition */
	PyObject *invalid_state;      /* concurrent.futures.InvalidStateError */
	PyObject *wait_done;          /* client._wait_done(fut, timeout) */
	PyObject *ndarray;            /* numpy.ndarray */
	PyObject *small_head;         /* _protocol.small_head(op, dtype, n) */
	PyObject *value_conv;         /* _protocol.value_conv */
	PyObject *pure_submit;        /* client._Conn.submit */
	PyObject *buffers;            /* _wire.buffers(head, data) */
	PyObject *broken;             /* _protocol.Broken */
	PyObject *error;              /* errors.Error */
	PyObject *connection_error;   /* errors.ConnectionError */
	double fg_grace;
	size_t cork_bytes, recv_bytes, unpack_max;
};

extern struct fast_cfg fast_cfg;

/* Attribute and method names, interned once (module.c). */
extern PyObject *s_dead, *s_msgid, *s_pending, *s_regions, *s_doomed, *s_ranges, *s_replies,
	*s_limit, *s_acquire, *s_release, *s_dtype, *s_value, *s_code, *s_internal, *s_error,
	*s_eof, *s_lost, *s_fail, *s_raise_dead, *s_free_msgid, *s_send_unmaps, *s_send_failed,
	*s_send_interrupted, *s_sendmsg, *s_receive, *s_path, *s_drive, *s_set_result,
	*s_set_exception;

static inline double fast_min(double a, double b)
{
	return a < b ? a : b;
}

static inline double fast_max(double a, double b)
{
	return a > b ? a : b;
}

/* Whole milliseconds, rounded up, of ms (1 to 1000), as select.poll. */
static inline int fast_ms_ceil(double ms)
{
	int i = (int)ms;

	return i + (i < ms);
}

/* time.monotonic(), in seconds. */
static inline double fast_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The exception being raised, put aside while other code runs. */
typedef struct {
	PyObject *type, *value, *tb;
} fast_saved_error;

void fast_error_save(fast_saved_error *e);
void fast_error_restore(fast_saved_error *e);
void fast_error_drop(fast_saved_error *e);

/* The exception being raised, as an object (no longer raised). */
PyObject *fast_fetch_error(void);

/* Call f with the current exception put aside, then put it back. */
void fast_call_keeping_error(PyObject *f);

/* lock.acquire() (blocking) or lock.acquire(False), given the bound
 * method: 1 got it, 0 not, -1 error. */
int fast_lock_take(PyObject *acquire, int blocking);

/* lock.release(), keeping an exception being raised: 0, -1 on error. */
int fast_lock_give(PyObject *release);

/* timeout (None or seconds) as a number: 1 when there is one, 0 for None,
 * -1 with the TypeError that adding it to a float raises. */
int fast_timeout_arg(PyObject *t, double *ret);
