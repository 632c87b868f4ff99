/*
 * A connection's per-request work (conn.c, and recv.c for its receiving):
 * the base of client._FastConn, which also derives from client._Conn and
 * shares its locks. It keeps the socket's descriptor, the corked requests
 * and the replies not yet whole; request() and submit()'s common case put
 * requests in flight and send or cork them, drive() waits for a future's
 * answer reading the socket, and _read() decodes replies (reply.h) and
 * completes their futures. A reply the decoder leaves to msgpack hands the
 * stream from it on to Protocol.receive, which then raises what the pure
 * path raises.
 */
#pragma once

#include "future.h"

extern PyTypeObject conn_type;

/* client._Conn.drive: read conn until f is done, the timeout passes (when
 * has_timeout) or the connection dies. 0, or -1 with an exception set. */
int conn_drive(PyObject *conn, fast_future *f, int has_timeout, double timeout);
