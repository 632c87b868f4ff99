/*
 * What conn.c (the object and its sending) and recv.c (its receiving)
 * share of a connection: the object, fast_conn, and the helpers that one
 * file calls in the other. The rest of the extension sees conn.h.
 */
#pragma once

#include "conn.h"
#include "reply.h"

typedef struct {
	PyObject_HEAD
	int fd;                          /* -1 once the socket is closed */
	int epfd;                        /* fd for POLLIN alone (recv_waiting), or -1 */
	PyObject *proto;                 /* _protocol.Protocol */
	PyObject *proto_dict;            /* its __dict__: dead, msgid, ... */
	PyObject *pending;               /* proto.pending */
	PyObject *regions;               /* proto.regions */
	PyObject *regions_dict;          /* its __dict__: _ranges, _doomed */
	PyObject *lock_acquire, *lock_release;    /* the send lock's */
	PyObject *rlock_acquire, *rlock_release;  /* the read lock's */
	PyTypeObject *future_type;
	/* requests held back to go out together (client._Conn.out) */
	char *out;
	size_t out_len, out_cap;
	/* what was read and not yet decoded: in[in_start, in_end) */
	unsigned char *in;
	size_t in_start, in_end, in_cap;
	reply_scanner scan;              /* how far the reply at in_start is read */
	int py_decoding;                 /* Protocol.receive reads from now on */
	double spin, last_fg;
	double gpu_spin;                 /* spin of requests that read GPU memory */
	double wait_us;                  /* moving mean of one answer's waits (recv_waiting) */
	unsigned long last_fg_thread, reader_ident;
	long waiting;
} fast_conn;

/* conn.c */

/* 0 once _attach() has run; -1 with RuntimeError before. */
int conn_ready(fast_conn *c);

/* An attribute of proto or proto.regions, from its dict d (borrowed);
 * NULL with AttributeError where it has none. */
PyObject *conn_dict_attr(PyObject *d, PyObject *name);

/* Whether proto.regions.<name> (a list) has anything in it: 1, 0, -1. */
int conn_regions_any(fast_conn *c, PyObject *name);

/* proto.dead is not None: 1, 0, or -1 on error. */
int conn_dead(fast_conn *c);

/* self.fail(*args), args a (class, message) tuple (consumed; NULL: -1). */
int conn_fail_with(fast_conn *c, PyObject *args);

/* Send the corked requests (hold the send lock): 0, or -1 with the send's
 * exception set; they are gone either way. */
int conn_flush(fast_conn *c);

/* A send failed (its exception set): -1, or 0 where _send_failed()
 * returned. */
int conn_send_error(fast_conn *c);

/* Send REQ + msgid + a[0, na) (+ b[0, nb)) and return the future of its
 * result, converted by conv; fds and data as client._Conn.request takes
 * them; a wait for it spins spin seconds. A new reference, or NULL. */
PyObject *conn_send(fast_conn *c, PyObject *conv, const char *a, size_t na, const char *b,
		    size_t nb, PyObject *fds, PyObject *data, double spin);

/* submit.c: the method submit(op, x, full, allow_copy, partial, ddof,
 * offsets, out, client) */
PyObject *conn_submit(fast_conn *c, PyObject *const *args, Py_ssize_t nargs);

/* recv.c */

/* client._Conn._read (hold the read lock): 1, 0 at the end of the stream
 * or on a broken one (the connection failed), -1 for an exception. */
int conn_read(fast_conn *c, int flags);

/* client._Conn.try_flush: 1 sent (or nothing to), 0 when another thread
 * holds the send lock with requests still corked, -1. */
int conn_try_flush(fast_conn *c);
