"""The soak's malformed requests: one hostile case per connection, each
expecting the documented error (or invalid_request and a close)."""

import os
import socket
import struct

import msgpack

from wire import DTYPES, MiB, memfd, pack, reduce_header, reduce_msg

def expect_fatal(c, data, msgid=0):
    """The stream is refused: replies end with invalid_request, then EOF."""
    c.send(data)
    replies = c.recv_all()
    if replies is None:
        return "connection not closed"
    if not replies:
        return "closed without a reply"
    last = replies[-1]
    if last[0] != 1 or last[1] != msgid or not last[2] or last[2].get("code") != "invalid_request":
        return "last reply %r, invalid_request with msgid %d wanted" % (last, msgid)
    return None


def expect_error(c, data, code, fds=None, contains=""):
    """One request fails with code and the connection stays open."""
    msgid = c.msgid
    c.send(data, fds)
    resp = c.recv()
    if resp is None:
        return "closed instead of %s" % code
    if resp[1] != msgid or not resp[2] or resp[2].get("code") != code or contains not in resp[2].get("message", ""):
        return "reply %r, %s (%r) with msgid %d wanted" % (resp, code, contains, msgid)
    resp = c.call("ping")
    if resp[2] is not None or resp[3] != "pong":
        return "ping after %s: %r" % (code, resp)
    return None


def req(c, method, params):
    return pack([0, c.next_id(), method, params])


def m_garbage(cl, c, rng):
    return expect_fatal(c, rng.choice([b"\xc1garbage", b"hello world\n", pack({"not": "an array"}),
                                       pack([0, 1, "ping"]), pack([1, 1, None, None]), pack([7, 1, "ping", []])]))


def m_msgid(cl, c, rng):
    return expect_fatal(c, pack([0, rng.choice([-1, 1 << 32, "1", 1.0, None]), "ping", []]))


def m_nesting(cl, c, rng):
    return expect_fatal(c, b"\x94\x00\x05\xa6reduce\x91\x83\xa4data" + b"\x91" * 6 + b"\x01", msgid=5)


def m_ext(cl, c, rng):
    return expect_fatal(c, pack([0, 6, "reduce", [{"op": "sum", "dtype": "i32", "data": msgpack.ExtType(1, b"x")}]]),
                        msgid=6)


def m_truncated(cl, c, rng):
    dtype, op, start, count = cl.pick_small(rng)
    msg = reduce_msg(1, op, dtype, cl.s.pools[dtype].bytes(start, count))
    c.send(msg[:rng.randrange(1, len(msg))])
    c.sock.shutdown(socket.SHUT_WR)
    replies = c.recv_all()
    if replies is None:
        return "connection not closed after a truncated request and EOF"
    if replies:
        return "replies %r to a truncated request" % (replies,)
    return None


def m_bad_params(cl, c, rng):
    bad = rng.choice([
        {"op": "sum", "dtype": "f32", "data": b"", "bogus": 1},
        {"op": 1, "dtype": "f32", "data": b""},
        {"op": "avg", "dtype": "f32", "data": b""},
        {"op": "sum", "dtype": "f128", "data": b""},
        {"op": "sum", "dtype": "f32", "data": "text"},
        {"op": "sum", "dtype": "f32", "data": b"\x00\x00\x00"},
        {"op": "sum", "dtype": "i32", "data": [1, 2.5]},
        {"op": "sum", "dtype": "u32", "data": [-1]},
        {"op": "sum", "dtype": "i32"},
        {"op": "sum", "dtype": "i32", "data": b"", "region": 1, "count": 0},
        {"op": "sum", "dtype": "i32", "offset": 0, "count": 1},
        {"op": "sum", "dtype": "i32", "data": b"", "offset": 4},
    ])
    return expect_error(c, req(c, "reduce", [bad]), "invalid_params")


def m_duplicate_key(cl, c, rng):
    msgid = c.next_id()
    msg = (b"\x94\x00" + pack(msgid) + pack("reduce") + b"\x91\x84" + pack("op") + pack("sum") + pack("op") +
           pack("max") + pack("dtype") + pack("i32") + pack("data") + pack(b"\1\0\0\0"))
    return expect_error(c, msg, "invalid_params")


def m_unknown_method(cl, c, rng):
    return expect_error(c, req(c, "nope", []), "unknown_method")


def m_ping_params(cl, c, rng):
    return expect_error(c, req(c, rng.choice(["ping", "stats", "info"]), [1]), "invalid_params")


def m_empty(cl, c, rng):
    return expect_error(c, req(c, "reduce", [{"op": rng.choice(["min", "max"]),
                                             "dtype": rng.choice(list(DTYPES)), "data": b""}]), "empty")


def m_fd_wrong_request(cl, c, rng):
    fd = memfd(4096)
    try:
        which = rng.randrange(3)
        if which == 0:
            return expect_error(c, req(c, "ping", []), "invalid_params", fds=[fd])
        if which == 1:
            return expect_error(c, req(c, "reduce", [{"op": "sum", "dtype": "i32", "data": b"\1\0\0\0"}]),
                                "invalid_params", fds=[fd])
        # with a notification: closed silently, and the next request is fine
        c.send(pack([2, "ping", []]), [fd])
        resp = c.call("ping")
        return None if resp[3] == "pong" else "ping after a notification with a descriptor: %r" % (resp,)
    finally:
        os.close(fd)


def m_bad_map(cl, c, rng):
    which = rng.randrange(5)
    if which == 0:
        return expect_error(c, req(c, "map", [{"bytes": 4096}]), "invalid_params")
    if which == 1:
        fd = memfd(4096, seal=False)
        contains = "F_SEAL_SHRINK"
    elif which == 2:
        fd = memfd(4096)
        try:
            return expect_error(c, req(c, "map", [{"bytes": 4097}]), "invalid_params", fds=[fd])
        finally:
            os.close(fd)
    elif which == 3:
        r, w = os.pipe()
        try:
            return expect_error(c, req(c, "map", [{"bytes": 4096}]), "invalid_params", fds=[r])
        finally:
            os.close(r)
            os.close(w)
    else:
        a, b = memfd(4096), memfd(4096)
        try:
            return expect_error(c, req(c, "map", [{"bytes": 4096}]), "invalid_params", fds=[a, b])
        finally:
            os.close(a)
            os.close(b)
    try:
        return expect_error(c, req(c, "map", [{"bytes": 4096}]), "invalid_params", fds=[fd], contains=contains)
    finally:
        os.close(fd)


def m_bad_region(cl, c, rng):
    fd = memfd(4096)
    try:
        resp = c.call("map", [{"bytes": 4096}], fds=[fd])
    finally:
        os.close(fd)
    if resp[2] is not None:
        return "map: %r" % (resp,)
    region = resp[3]["region"]
    cases = [(0, 1025, "f32", region), (4096, 1, "i32", region), (4097, 0, "i32", region),
             (0, (1 << 64) - 1, "i64", region), ((1 << 64) - 1, 1, "u32", region), (4092, 1, "f64", region),
             (0, 1, "i32", region + 1000000)]
    off, count, dt, rid = rng.choice(cases)
    problem = expect_error(c, req(c, "reduce", [{"op": "sum", "dtype": dt, "region": rid, "offset": off,
                                                 "count": count}]), "invalid_params")
    if problem:
        return problem
    resp = c.call("unmap", [{"region": region}])
    if resp[3] is not True:
        return "unmap: %r" % (resp,)
    return expect_error(c, req(c, "unmap", [{"region": region}]), "invalid_params", contains="unknown region")


def m_too_large(cl, c, rng):
    msgid = c.next_id()
    c.send(reduce_header(msgid, "sum", "f32", 0xfffffffc))
    resp = c.recv()
    if resp is None or resp[1] != msgid or not resp[2] or resp[2].get("code") != "too_large":
        return "reply %r, too_large wanted" % (resp,)
    return None


def m_data_before_op(cl, c, rng):
    msgid = c.next_id()
    # past one staging chunk, the daemon's (a CUDA daemon's are larger)
    big = cl.chunk_bytes + 1 * MiB
    msg = (b"\x94\x00" + pack(msgid) + pack("reduce") + b"\x91\x83" + pack("data") + b"\xc6" +
           struct.pack(">I", big) + bytes(big) + pack("op") + pack("sum") + pack("dtype") + pack("i32"))
    c.msgid = msgid
    return expect_error(c, msg, "invalid_params")


MALFORMED = [(f.__name__[2:], f) for f in (m_garbage, m_msgid, m_nesting, m_ext, m_truncated, m_bad_params,
                                           m_duplicate_key, m_unknown_method, m_ping_params, m_empty,
                                           m_fd_wrong_request, m_bad_map, m_bad_region, m_too_large,
                                           m_data_before_op)]
