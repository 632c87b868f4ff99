/*
 * A concurrent.futures.Future's state in C (future.c): the base of
 * client._FastFuture, which also derives from concurrent.futures.Future.
 * Making one and completing one take no lock and run no Python code; its
 * Condition, waiters and callbacks are made only when asked for, and once
 * there is a Condition every completion goes through
 * concurrent.futures.Future's own methods, under it. result() and
 * exception() read the connection until the answer is back
 * (conn_drive()).
 */
#pragma once

#include "fast.h"

typedef struct {
	PyObject_HEAD
	PyObject *state;        /* one of concurrent.futures' state strings */
	PyObject *result;
	PyObject *exception;
	PyObject *condition;    /* NULL until asked for */
	PyObject *waiters;      /* likewise */
	PyObject *callbacks;    /* likewise */
	PyObject *conn;         /* the connection that reads its answer */
	double spin;            /* seconds a wait for it reads before it sleeps */
} fast_future;

extern PyTypeObject future_type;

/* Whether s (a future's _state) is one of a done future's. */
static inline int future_state_done(PyObject *s)
{
	return s == fast_cfg.finished || s == fast_cfg.cancelled ||
	       s == fast_cfg.cancelled_notified;
}

/* A new pending future of type (future_type or a subtype) whose answer
 * conn reads; NULL with an exception set. */
fast_future *future_make(PyTypeObject *type, PyObject *conn);

/* Complete f with v, its result or (is_exc) its exception: 0, or -1 with
 * an exception set (InvalidStateError for a future already done). */
int future_settle(fast_future *f, PyObject *v, int is_exc);
