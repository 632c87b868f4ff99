#!/usr/bin/python3
"""Write the fuzz targets' seeds, tests/fuzz/corpus/<target>/, from real
messages: requests as libgpured writes them, and the replies that the built
daemon gives them (CPU backend, started here on a temporary socket).

    tests/fuzz/make-corpus.py build/daemon/gpured

Run it again when the protocol changes. It only adds and replaces the
files it names; crash reproducers (crash-*) and other seeds stay. Needs
Debian's python3-msgpack."""

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


class Daemon:
    def __init__(self, exe):
        self.dir = tempfile.mkdtemp(prefix="gpured-corpus-")
        self.path = os.path.join(self.dir, "s")
        self.proc = subprocess.Popen(
            [exe, "--socket", self.path, "--backend", "cpu", "--threads", "1"],
            stderr=subprocess.DEVNULL)
        for _ in range(500):
            if os.path.exists(self.path):
                return
            time.sleep(0.01)
        raise RuntimeError("gpured did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def exchange(self, requests, n_replies, fds=None, s=None):
        """Send the request bytes (fds: {index: fd} to pass with request
        index), return the raw bytes of the first n_replies replies (fewer
        if the daemon closes). With s, on that connection, left open."""
        keep = s is not None
        if not keep:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.path)
        for i, r in enumerate(requests):
            if fds and i in fds:
                socket.send_fds(s, [r], [fds[i]])
            else:
                s.sendall(r)
        buf = b""
        s.settimeout(5)
        while True:
            u = msgpack.Unpacker(raw=False)
            u.feed(buf)
            got = 0
            try:
                for _ in u:
                    got += 1
                    if got == n_replies:
                        break
            except Exception:
                pass
            if got >= n_replies:
                # Nothing more was asked for: buf ends with the last reply.
                if not keep:
                    s.close()
                return buf[:u.tell()]
            try:
                chunk = s.recv(65536 if not keep else 1)
            except socket.timeout:
                chunk = b""
            if not chunk:
                if not keep:
                    s.close()
                return buf
            buf += chunk


def memfd(size=4096):
    fd = os.memfd_create("gpured-corpus", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    os.pwrite(fd, struct.pack("<512d", *[i * 0.5 for i in range(512)]), 0)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


# ---- requests, as libgpured writes them ---------------------------------

def req(msgid, method, params=()):
    return pack([0, msgid, method, list(params)])


def reduce_bin(msgid, op, dtype, fmt, values):
    data = struct.pack("<%d%s" % (len(values), fmt), *values)
    return req(msgid, "reduce", [{"op": op, "dtype": dtype, "data": data}])


def reduce_partial(msgid, op, dtype, fmt, values):
    data = struct.pack("<%d%s" % (len(values), fmt), *values)
    return req(msgid, "reduce", [{"op": op, "dtype": dtype, "partial": True, "data": data}])


I32 = [1, -2, 3, -2**31]
I64 = [1, -2, 3, 2**63 - 1]
U32 = [1, 2, 3, 2**32 - 1]
F32 = [1.5, -2.0, 0.25, 1e30]
F64 = [1.5, -2.0, 0.25, 1e300]

# The calls of fuzz-client.c's scripts: the requests each one sends.
CALLS = {
    1: lambda i: [req(i, "ping")],
    2: lambda i: [reduce_bin(i, "sum", "i64", "q", I64)],
    3: lambda i: [reduce_bin(i, "sum", "u32", "I", U32)],
    4: lambda i: [reduce_bin(i, "sum", "f32", "f", F32)],
    5: lambda i: [reduce_bin(i, "sumsq", "i32", "i", I32)],
    6: lambda i: [reduce_bin(i, "max", "i32", "i", I32), reduce_bin(i + 1, "min", "f64", "d", F64)],
    7: lambda i: [reduce_bin(i, "min", "u32", "I", U32)],
    8: lambda i: [req(i, "stats")],
    9: lambda i: [req(i, "stats")],
    10: lambda i: [req(i, "stats")],
    11: lambda i: [req(i, "info")],
    12: lambda i: [req(i, "info")],
    13: lambda i: [req(i, "map", [{"bytes": 4096}])],
    14: lambda i: [req(i, "reduce", [{"op": "sum", "dtype": "f64", "region": 1, "offset": 8,
                                      "count": 16}])],
    15: lambda i: [req(i, "unmap", [{"region": 1}])],
}


def script_requests(calls):
    out, fds, msgid = [], {}, 1
    for c in calls:
        for r in CALLS[c](msgid):
            if c == 13:
                fds[len(out)] = memfd()
            out.append(r)
            msgid += 1
    return out, fds


def script_header(calls):
    v = 0
    for k, c in enumerate(calls):
        v |= c << (4 * k)
    return struct.pack("<H", v)


SCRIPTS = [
    [1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11], [12], [13],
    [13, 14, 15], [13, 14, 14, 15], [1, 2, 8, 11], [6, 1], [2, 3, 4, 5], [14], [15],
    [1, 1, 1, 1], [8, 9, 10], [11, 12], [7, 6], [13, 15, 15], [12, 10, 5, 1],
]

# Requests that fail, or end the connection, for the daemon's error replies.
BAD = {
    "unknown-method": [req(1, "frobnicate")],
    "ping-params": [req(1, "ping", [1])],
    "reduce-bad-op": [req(1, "reduce", [{"op": "avg", "dtype": "f32", "data": b""}])],
    "reduce-bad-len": [req(1, "reduce", [{"op": "sum", "dtype": "f32", "data": b"\0" * 6}])],
    "reduce-empty-min": [reduce_bin(1, "min", "f64", "d", [])],
    "reduce-array-range": [req(1, "reduce", [{"op": "sum", "dtype": "i32", "data": [1, 2**40]}])],
    "reduce-too-large": [req(1, "reduce", [{"op": "sum", "dtype": "u8", "data": b"x"}])],
    "reduce-narrow": [req(1, "reduce", [{"op": "sum", "dtype": "f16",
                                         "data": b"\x00\x3c\x00\xc0\xff\x7b\x01\x00"}]),
                      req(2, "reduce", [{"op": "argmax", "dtype": "bf16",
                                         "data": [1.0, -3.0, float("inf"), float("nan")]}]),
                      req(3, "reduce", [{"op": "moments", "dtype": "f8e4m3",
                                         "data": [448, -0.001953125, 0]}]),
                      req(4, "reduce", [{"op": "cumsum", "dtype": "i8", "data": b"\x7f\x80\x01"}]),
                      req(5, "reduce", [{"op": "max", "dtype": "u16",
                                         "offsets": struct.pack("<3Q", 0, 0, 2),
                                         "data": b"\xff\xff\x01\x00"}])],
    "reduce-narrow-bad": [req(1, "reduce", [{"op": "sum", "dtype": "f16", "data": [0.1]}]),
                          req(2, "reduce", [{"op": "sum", "dtype": "i16", "data": b"\x01"}]),
                          req(3, "reduce", [{"op": "sum", "dtype": "f8e4m3",
                                             "data": [float("inf")]}])],
    "reduce-region-unknown": [req(1, "reduce", [{"op": "sum", "dtype": "f32", "region": 9,
                                                  "count": 1}])],
    "map-no-fd": [req(1, "map", [{"bytes": 4096}])],
    "fatal-c1": [b"\xc1"],
    "fatal-not-array": [pack({"a": 1})],
    "fatal-response-type": [pack([1, 7, None, None])],
    "fatal-deep": [pack([0, 3, "ping", [[[[[1]]]]]])],
    "notification-then-ping": [pack([2, "ping", []]), req(2, "ping")],
    "cumsum-bad": [req(1, "reduce", [{"op": "cumsum", "dtype": "f32", "partial": True,
                                      "data": b""}]),
                   req(2, "reduce", [{"op": "cumsum", "dtype": "i32", "region": 9, "count": 1}]),
                   req(3, "reduce", [{"op": "sum", "dtype": "i32", "region": 9, "count": 1,
                                      "out_region": 9}]),
                   req(4, "reduce", [{"op": "cumsum", "dtype": "i32", "region": 9, "count": 1,
                                      "out_region": 9, "out_offset": 4}]),
                   req(5, "reduce", [{"op": "cumsum", "dtype": "i32", "region": 9, "count": 1,
                                      "out_region": 9}]),
                   req(6, "reduce", [{"op": "cumsum", "dtype": "u64", "data": b"\1" * 8,
                                      "out_region": 1}]),
                   req(7, "map", [{"bytes": 64, "kind": "cuda", "device": "GPU-0",
                                   "writable": True}])],
}

# Exact partials (PROTOCOL.md): the daemon's "exact" maps, of float sums
# and sumsq across the whole range, cancelling, -0, specials and nothing.
PARTIAL = {
    "partial-f64-sum": [reduce_partial(1, "sum", "f64", "d",
                                       [1.7976931348623157e308 / 4, 1, -1.7976931348623157e308 / 4,
                                        2**-40, 5e-324, -0.1])],
    "partial-f64-sumsq": [reduce_partial(1, "sumsq", "f64", "d", [1e300, 5e-324, -3.0])],
    "partial-f32-sum": [reduce_partial(1, "sum", "f32", "f", F32),
                        reduce_partial(2, "sum", "f32", "f", [1.5, -1.5])],
    "partial-f32-sumsq": [reduce_partial(1, "sumsq", "f32", "f", [1e-45, 3e38])],
    "partial-negzero": [reduce_partial(1, "sum", "f64", "d", [-0.0, -0.0]),
                        reduce_partial(2, "sum", "f64", "d", [])],
    "partial-specials": [reduce_partial(1, "sum", "f64", "d", [float("inf"), 1.0]),
                         reduce_partial(2, "sum", "f32", "f", [float("-inf"), float("inf")]),
                         reduce_partial(3, "sum", "f64", "d", [float("nan")]),
                         reduce_partial(4, "sum", "f64", "d", [1.7976931348623157e308] * 3)],
}


def exact_reply(limbs, scale, specials, value=0.0, count=1, extra=None):
    ex = {"limbs": limbs, "scale": scale, "specials": specials}
    ex.update(extra or {})
    return pack([1, 1, None, {"value": value, "count": count, "exact": ex}])


# Replies no daemon sends: "exact" maps that a client must refuse, and
# the extremes it must take.
def offsets(*o):
    return struct.pack("<%dQ" % len(o), *o)


def reduce_segments(msgid, op, dtype, fmt, values, offs, **extra):
    return req(msgid, "reduce", [{"op": op, "dtype": dtype, **extra, "offsets": offsets(*offs),
                                  "data": struct.pack("<%d%s" % (len(values), fmt), *values)}])


# Segmented reduces ("offsets"), good and bad, with the daemon's replies.
SEGMENTS = {
    "segments-sum": [reduce_segments(1, "sum", "i32", "i", I32, (0, 1, 1, 4)),
                     reduce_segments(2, "sumsq", "f64", "d", F64, (0, 2, 4))],
    "segments-arg-moments": [reduce_segments(1, "argmax", "f32", "f", F32, (0, 3, 4)),
                             reduce_segments(2, "moments", "i64", "q", I64, (0, 0, 2, 4), ddof=1),
                             reduce_segments(3, "min", "u32", "I", [], (0, 0))],
    "segments-bad": [reduce_segments(1, "sum", "i32", "i", I32, (0, 3, 2, 4)),
                     reduce_segments(2, "sum", "i32", "i", I32, (0, 5)),
                     reduce_segments(3, "sum", "f32", "f", F32, (1, 4)),
                     req(4, "reduce", [{"op": "sum", "dtype": "i32", "data": b"\1\0\0\0",
                                        "offsets": offsets(0, 1)}]),
                     req(5, "reduce", [{"op": "max", "dtype": "i32", "offsets": b"\0" * 12,
                                        "data": b""}])],
}

EXACT_REPLIES = {
    "exact-limbs-12-bytes": exact_reply(b"\1" * 12, 0, 0),
    "exact-limbs-69-words": exact_reply(b"\1" * 552, -2176, 0),
    "exact-limbs-68-words": exact_reply(b"\xff" * 543 + b"\x7f", -2176, 0, float("inf")),
    "exact-scale-low": exact_reply(b"\1" + b"\0" * 7, -2177, 0),
    "exact-scale-high": exact_reply(b"", 2**63, 0),
    "exact-out-of-range": exact_reply(b"\1" * 8, 2170, 0, float("inf")),
    "exact-specials-unknown": exact_reply(b"", 0, 8),
    "exact-specials-big": exact_reply(b"", 0, 2**40),
    "exact-negzero-value": exact_reply(b"\1" + b"\0" * 7, 0, 16),
    "exact-empty-value": exact_reply(b"\3" + b"\0" * 7, -1, 0, 1.5, 0),
    "exact-types": pack([1, 1, None, {"value": 1.0, "count": 1,
                                      "exact": {"limbs": "x", "scale": 1.5, "specials": -1}}]),
    "exact-not-map": pack([1, 1, None, {"value": 1.0, "count": 1, "exact": [1, 2, 3]}]),
    "exact-extra-key": exact_reply(b"\3" + b"\0" * 7, -1, 0, 1.5, 2, {"later": None}),
    "exact-count-huge": exact_reply(b"\xff" * 8, 2100, 4, float("-inf"), 2**64 - 1),
}


# ---- fuzz-conn.c's records ------------------------------------------------

OP_SYNC, OP_REPEAT, OP_SHUT, OP_LAST = 0x10, 0x20, 0x40, 0x80
FD_SEALED, FD_UNSEALED, FD_NO_SEALING, FD_ALL_SEALS, FD_GROW_ONLY = 0, 2, 3, 4, 5
FD_RDONLY, FD_WRONLY, FD_PATH, FD_PIPE_R, FD_PIPE_W, FD_NULL = 6, 7, 8, 9, 10, 11
FD_SOCKET, FD_SELF, FD_REGULAR, FD_DIR, FD_EVENTFD, FD_CLOSED = 12, 13, 14, 15, 16, 17


def fd(kind, size=4096):
    """A descriptor spec: kind, and a memfd's size as u16 << shift."""
    shift = 0
    while size >> shift > 0xffff:
        shift += 1
    return struct.pack("<BH", kind | shift << 5, size >> shift)


def rec(payload, fds=(), flags=OP_SYNC, rep=None):
    out = struct.pack("<BH", len(fds) | flags | (OP_REPEAT if rep is not None else 0),
                      len(payload))
    if rep is not None:
        out += bytes([rep])
    return out + b"".join(fds) + payload


def conn_corpus(streams, extra):
    """Seeds for fuzz-conn: a settings byte, then records."""
    seeds = {}
    ping = req(1, "ping")
    m4k = req(2, "map", [{"bytes": 4096}])
    red = req(3, "reduce", [{"op": "sum", "dtype": "f64", "region": 1, "offset": 8,
                             "count": 16}])
    unmap = req(4, "unmap", [{"region": 1}])
    seeds["ping"] = b"\0" + rec(ping)
    seeds["pings-pipelined"] = b"\0" + rec(ping * 4, flags=0) + rec(req(2, "stats") +
                                                                     req(3, "info"))
    seeds["map-reduce-unmap"] = b"\0" + rec(m4k, [fd(FD_SEALED)]) + rec(red) + rec(unmap)
    seeds["map-reduce-unmap-tight"] = b"\x5e" + rec(m4k, [fd(FD_SEALED)]) + rec(red + red) + \
        rec(unmap)
    seeds["map-fd-on-last-byte"] = b"\x01" + rec(m4k, [fd(FD_SEALED)], OP_LAST | OP_SYNC) + \
        rec(red + unmap)
    seeds["map-no-unmap"] = b"\x02" + rec(m4k, [fd(FD_SEALED)]) + rec(red, flags=0)
    seeds["map-1m-reduce-partial"] = b"\x06" + \
        rec(req(2, "map", [{"bytes": 1 << 20}]), [fd(FD_SEALED, 1 << 20)]) + \
        rec(req(3, "reduce", [{"op": "sum", "dtype": "f32", "region": 1, "offset": 3,
                               "count": 200000, "partial": True}]))
    m1m = req(2, "map", [{"bytes": 1 << 20}])
    red1m = req(3, "reduce", [{"op": "sumsq", "dtype": "f32", "region": 1, "count": 1 << 18}])
    seeds["map-reduce-unmap-in-flight"] = b"\x06" + rec(m1m, [fd(FD_SEALED, 1 << 20)]) + \
        rec(red1m + unmap, flags=0)
    seeds["map-reduce-eof-in-flight"] = b"\x06" + rec(m1m, [fd(FD_SEALED, 1 << 20)]) + \
        rec(red1m, flags=OP_SHUT)
    seeds["map-without-fd"] = b"\0" + rec(m4k) + rec(ping)
    seeds["fd-without-map"] = b"\0" + rec(ping, [fd(FD_SEALED)]) + rec(req(2, "ping"))
    seeds["map-two-fds"] = b"\0" + rec(m4k, [fd(FD_SEALED), fd(FD_SEALED)])
    seeds["map-nine-fds"] = b"\0" + rec(m4k, [fd(FD_SEALED)] * 9)
    seeds["fds-unclaimed"] = b"\0" + b"".join(rec(pack([2, "ping", []]), [fd(FD_PIPE_R)] * 3,
                                                   flags=0) for _ in range(7))
    for name, kind in [("unsealed", FD_UNSEALED), ("no-sealing", FD_NO_SEALING),
                       ("all-seals", FD_ALL_SEALS), ("grow-only", FD_GROW_ONLY),
                       ("rdonly", FD_RDONLY), ("wronly", FD_WRONLY), ("opath", FD_PATH),
                       ("pipe", FD_PIPE_R), ("pipe-w", FD_PIPE_W), ("devnull", FD_NULL),
                       ("socket", FD_SOCKET), ("self", FD_SELF), ("regular", FD_REGULAR),
                       ("directory", FD_DIR), ("eventfd", FD_EVENTFD), ("closed", FD_CLOSED)]:
        seeds["map-" + name] = bytes([kind]) + rec(m4k, [fd(kind)]) + rec(red)
    seeds["map-small-memfd"] = b"\0" + rec(m4k, [fd(FD_SEALED, 100)])
    seeds["map-empty-memfd"] = b"\0" + rec(req(2, "map", [{"bytes": 0}]), [fd(FD_SEALED, 0)])
    seeds["map-too-many"] = b"\x40" + b"".join(
        rec(req(i, "map", [{"bytes": 600000}]), [fd(FD_SEALED, 600000)]) for i in range(2, 6))
    seeds["unmap-twice"] = b"\0" + rec(m4k, [fd(FD_SEALED)]) + rec(unmap + unmap + red)
    seeds["map-cuda-kind"] = b"\0" + rec(req(2, "map", [{"bytes": 64, "kind": "cuda",
                                                          "device": "GPU-0"}]), [fd(FD_SEALED)])
    seeds["map-cuda-parts"] = b"\0" + rec(req(2, "map", [{"bytes": 1 << 22, "kind": "cuda",
                                                           "device": "GPU-0",
                                                           "part_bytes": 1 << 21}]),
                                           [fd(FD_SEALED)])
    seeds["map-part-of-host-region"] = b"\0" + rec(m4k, [fd(FD_SEALED)]) + \
        rec(req(3, "map_part", [{"region": 1, "bytes": 4096}]), [fd(FD_SEALED)]) + rec(red)
    seeds["map-part-without-fd"] = b"\0" + rec(req(2, "map_part", [{"region": 1, "bytes": 64}]))
    seeds["map-part-two-fds"] = b"\0" + rec(req(2, "map_part", [{"region": 1, "bytes": 64}]),
                                             [fd(FD_SEALED), fd(FD_PIPE_R)]) + rec(ping)
    seeds["map-then-eof"] = b"\0" + rec(m4k, [fd(FD_SEALED)], OP_SHUT)
    # large data: a bin32 header, then its bytes repeated, chunked by the daemon
    big = 145 * 4096  # 1 + 16 * 9 repeats of body
    head = b"\x94\x00\x05\xa6reduce\x91\x83\xa2op\xa3max\xa5dtype\xa3i32\xa4data" + \
        b"\xc6" + struct.pack(">I", big)
    body = bytes(range(256)) * 16
    seeds["reduce-580k"] = b"\x80" + rec(head, flags=0) + rec(body, flags=OP_SYNC,
                                                               rep=9)
    seeds["reduce-580k-then-ping-tight"] = b"\x9c" + rec(head, flags=0) + \
        rec(body, flags=0, rep=9) + rec(ping)
    seeds["reduce-cut-by-eof"] = b"\0" + rec(head, flags=0) + rec(body, flags=OP_SHUT)
    # cumsum: streamed out chunk by chunk (with tight budgets too), cut
    # short, and into a writable region, in place; i64, so that the values
    # stay within the client's limits on a reply
    chead = head.replace(b"\xa2op\xa3max\xa5dtype\xa3i32",
                         b"\xa2op\xa6cumsum\xa5dtype\xa3i64")
    seeds["cumsum-580k-streamed"] = b"\x80" + rec(chead, flags=0) + rec(body, rep=9)
    seeds["cumsum-580k-then-ping-tight"] = b"\x9c" + rec(chead, flags=0) + \
        rec(body, flags=0, rep=9) + rec(ping)
    seeds["cumsum-cut-by-eof"] = b"\x06" + rec(chead, flags=0) + rec(body, flags=OP_SHUT)
    mw = req(2, "map", [{"bytes": 4096, "writable": True}])
    cs = req(3, "reduce", [{"op": "cumsum", "dtype": "f64", "region": 1, "offset": 8,
                            "count": 16, "out_region": 1, "out_offset": 8}])
    seeds["map-writable-cumsum"] = b"\0" + rec(mw, [fd(FD_SEALED)]) + rec(cs) + rec(unmap)
    seeds["map-writable-all-seals"] = b"\0" + rec(mw, [fd(FD_ALL_SEALS)]) + rec(cs)
    seeds["map-writable-rdonly"] = b"\0" + rec(mw, [fd(FD_RDONLY)]) + rec(cs)
    seeds["fd-mid-reduce"] = b"\x01" + rec(head, flags=0) + rec(body, [fd(FD_SEALED)], 0,
                                                                 rep=9)
    # two staging slots: a small request leaves the batch slot open, and a
    # large one still needs a chunk (it used to wait for ever)
    seeds["staging-2-slots-small-then-large"] = b"\x80" + \
        rec(reduce_bin(1, "sum", "i32", "i", I32)) + rec(head, flags=0) + rec(body, rep=9)
    # two slots, every job on a worker: the second chunk waits for staging
    seeds["staging-2-slots-chunks-wait"] = b"\x86" + rec(head, flags=0) + rec(body, rep=9)
    # 'data' larger than a chunk before 'op': refused, and its bytes skipped
    first = b"\x94\x00\x06\xa6reduce\x91\x83\xa4data\xc6" + struct.pack(">I", big)
    seeds["reduce-large-data-before-op"] = b"\0" + rec(first, flags=0) + \
        rec(body, flags=0, rep=9) + rec(b"\xa2op\xa3sum\xa5dtype\xa3u32")
    # replies faster than a socket takes them: written by libuv, and, with
    # the tight budgets, reading stops until the client reads
    seeds["stats-flood"] = b"\0" + rec(req(2, "stats"), flags=0, rep=80)
    seeds["stats-flood-tight"] = b"\x10" + rec(req(2, "stats"), flags=0, rep=20)
    for i, (name, (reqs, _)) in enumerate(sorted(streams.items())):
        seeds["req-" + name] = bytes([(i * 37) & 0xff]) + rec(b"".join(reqs))
    for i, (name, reqs) in enumerate(sorted(extra.items())):
        if name.startswith("map"):
            continue
        seeds["req-" + name] = bytes([(i * 53) & 0xff]) + rec(b"".join(reqs), flags=0)
    for name, data in seeds.items():
        write("fuzz-conn", name, data)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = Daemon(sys.argv[1])
    try:
        streams = {}  # name -> (requests, replies)
        for calls in SCRIPTS:
            reqs, fds = script_requests(calls)
            # Region ids count up in the daemon: map on a fresh one gets 1,
            # what the later calls of the script name.
            dd = Daemon(sys.argv[1]) if fds else d
            # Call by call, as the library sends them.
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(dd.path)
            replies, k = b"", 0
            for c in calls:
                n = len(CALLS[c](0))
                part = {i - k: fd for i, fd in fds.items() if k <= i < k + n}
                replies += dd.exchange(reqs[k:k + n], n, part, s)
                k += n
            s.close()
            if dd is not d:
                dd.stop()
            for fd in fds.values():
                os.close(fd)
            name = "script-" + "-".join(str(c) for c in calls)
            streams[name] = (reqs, replies)
            write("fuzz-client", name, script_header(calls) + replies)
        for name, reqs in BAD.items():
            replies = d.exchange(reqs, len(reqs))
            streams[name] = (reqs, replies)
        for name, reqs in PARTIAL.items():
            replies = d.exchange(reqs, len(reqs))
            streams[name] = (reqs, replies)
        for name, reqs in SEGMENTS.items():
            replies = d.exchange(reqs, len(reqs))
            streams[name] = (reqs, replies)

        # libgpured against replies out of order, cut short, or fatal.
        reqs, _ = script_requests([6])
        a = d.exchange(reqs[:1], 1)
        b = d.exchange([reduce_bin(2, "min", "f64", "d", F64)], 1)
        write("fuzz-client", "script-6-reversed", script_header([6]) + b + a)
        r = streams["script-11"][1]
        write("fuzz-client", "script-11-cut", script_header([11]) + r[:len(r) // 2])
        write("fuzz-client", "script-1-fatal", script_header([1, 1]) + streams["fatal-c1"][1])
        write("fuzz-client", "script-2-error",
              script_header([2]) + streams["reduce-bad-op"][1])
        write("fuzz-client", "script-13-error",
              script_header([13, 14]) + streams["map-no-fd"][1] +
              streams["reduce-region-unknown"][1].replace(b"\x94\x01\x01", b"\x94\x01\x02", 1))
        write("fuzz-client", "script-8-wrong-id", script_header([8]) +
              streams["script-8"][1].replace(b"\x94\x01\x01", b"\x94\x01\x07", 1))

        # The replies on their own, each cut at a different place.
        for k, (name, (_, replies)) in enumerate(sorted(streams.items())):
            if replies:
                write("fuzz-response", name, bytes([(k * 37) % 256]) + replies)
        for k, (name, reply) in enumerate(sorted(EXACT_REPLIES.items())):
            write("fuzz-response", name, bytes([(k * 53) % 256]) + reply)

        # The requests, under a few of fuzz-request.c's settings: whole
        # buffers; small destinations fed in pieces; window()/commit()
        # with a data limit; rejections of large data.
        headers = [b"\x00\x00\x00\x00", b"\x00\x00\x07\x02", b"\x88\x00\x4f\x01",
                   b"\x00\x83\x43\x03"]
        extra = {
            "reduce-array-i32": [req(1, "reduce", [{"op": "sum", "dtype": "i32", "data": I32}])],
            "reduce-array-f32": [req(1, "reduce", [{"op": "max", "dtype": "f32",
                                                    "data": [1, -0.0, 2.5, 2**24 + 1]}])],
            "reduce-array-u64": [req(1, "reduce", [{"op": "min", "dtype": "u64",
                                                    "data": [2**64 - 1, 0, 7]}])],
            "reduce-data-first": [req(1, "reduce", [{"data": b"\1\0\0\0", "op": "sum",
                                                     "dtype": "u32"}])],
            "reduce-f64-big": [reduce_bin(1, "sum", "f64", "d", [i / 3 for i in range(200)])],
            "reduce-argmin": [reduce_bin(1, "argmin", "f32", "f", F32),
                              req(2, "reduce", [{"op": "argmax", "dtype": "i64", "data": I64}])],
            "reduce-moments": [reduce_bin(1, "moments", "f32", "f", F32),
                               req(2, "reduce", [{"op": "moments", "dtype": "i64", "ddof": 1,
                                                  "data": I64}]),
                               req(3, "reduce", [{"op": "moments", "dtype": "u32", "ddof": 9,
                                                  "data": [1, 2]}])],
            "reduce-dup-key": [b"\x94\x00\x01\xa6reduce\x91\x82\xa2op\xa3sum\xa2op\xa3min"],
            "pipeline": [req(1, "ping"), reduce_bin(2, "sum", "f32", "f", F32), req(3, "stats"),
                         pack([2, "info", []]), reduce_bin(4, "max", "i64", "q", I64)],
            "map-unmap": [req(5, "map", [{"bytes": 4096, "kind": "host"}]),
                          req(6, "unmap", [{"region": 1}])],
            "map-cuda": [req(5, "map", [{"bytes": 64, "kind": "cuda_ipc", "device": "0",
                                         "handle": b"\0" * 64}])],
            "reduce-cumsum": [reduce_bin(1, "cumsum", "f32", "f", F32),
                              req(2, "reduce", [{"op": "cumsum", "dtype": "i64", "data": I64}]),
                              req(3, "reduce", [{"op": "cumsum", "dtype": "u32", "region": 1,
                                                 "count": 4, "out_region": 2,
                                                 "out_offset": 8}]),
                              req(4, "map", [{"bytes": 4096, "writable": True}])],
            # method names as bin, as Neovim's Python session sends them
            "request-bin-method": [pack([2, b"nvim_set_client_info", ["python3-client", {},
                                                                       "remote", {}, {}]]),
                                   req(1, b"ping"),
                                   req(2, b"reduce", [{"op": "sum", "dtype": "f64",
                                                       "data": struct.pack("<4d", *F64)}]),
                                   req(3, b"frobnicate"), req(4, b"info")],
        }
        k = 0
        for name, (reqs, _) in sorted(streams.items()):
            write("fuzz-request", name, headers[k % len(headers)] + b"".join(reqs))
            k += 1
        for name, reqs in sorted(extra.items()):
            for h in headers[:2]:
                write("fuzz-request", "%s-%02x%02x" % (name, h[0], h[2]), h + b"".join(reqs))
    finally:
        d.stop()

    conn_corpus(streams, extra)

    # gpuredctl's input: a dtype byte (i32 i64 u32 u64 f32 f64 f16 bf16
    # f8e4m3 f8e5m2 i8 u8 i16 u16), then text.
    texts = [
        (0, b"1 2 3\n-4\t5\n"), (0, b"2147483647 -2147483648"), (0, b"2147483648"),
        (1, b"9223372036854775807\n-9223372036854775808\n"), (1, b"99999999999999999999x"),
        (2, b"0 4294967295 -0 +7"), (2, b"-1"), (3, b"18446744073709551615 18446744073709551616"),
        (4, b"1.5 -0.0 inf -inf nan 1e-45 3.4028235e38 3.5e38"), (4, b"0x1p-149 1e-50"),
        (5, b"0.1 2.2250738585072014e-308 4.9e-324 1.7976931348623157e308 1e309"),
        (5, b"NaN INFINITY -Infinity 0x1.fffffffffffffp+1023"), (5, b"1,2 3"),
        (0, b"  \n\n   \r\n"), (5, b"1e" + b"9" * 40), (3, b"1\n2\n\n3 \v 4\f5"),
        (1, b"12" * 30 + b"x"), (4, b"\x001"), (5, b"-.5 +.5e+1 5."),
        (6, b"1 -2.5 65504 65519.99 65520 1.00048828125 1.000488281250000000000000001 nan -inf"
            b" 5.96e-8 2.98023223876953125e-08\n"),
        (7, b"3.14159 -1e-40 3.3895313892515355e38 3.4e38 1.00390625 0x1.02p0 -0 infinity\n"),
        (8, b"448 464 464.0000001 480 -0.001 0.0009765625 0.00097656250001 nan inf\n"),
        (9, b"57344 61439.9 61440 -inf 1.52587890625e-05 7.62939453125e-06 0.5\n"),
        (10, b"127 -128 128 -129 +5 -0\n"), (11, b"0 255 256 -1 -0 1e2\n"),
        (12, b"32767 -32768 32768 -32769\t300\n"), (13, b"65535 65536 -2 258 0x1\n"),
    ]
    for i, (dt, t) in enumerate(texts):
        write("fuzz-ctl-input", "text-%02d" % i, bytes([dt]) + t)

    # The daemon's settings: the file as shipped, each setting, and
    # command lines after it.
    with open(os.path.join(HERE, "..", "..", "packaging", "gpured.conf"), "rb") as f:
        shipped = f.read()
    write("fuzz-config", "shipped", shipped)
    uncommented = b"\n".join(l[1:] if l.startswith(b"#") and b" = " in l else l
                            for l in shipped.split(b"\n"))
    write("fuzz-config", "shipped-uncommented", uncommented)
    settings = [
        b"socket = /run/gpured.sock", b"socket-mode = 0600", b"backend = cpu",
        b"max-request-bytes = 64MiB", b"max-connections = 8", b"max-regions 4",
        b"max-mapped-bytes=1g", b"max-mapped-bytes-total = 2G", b"staging-bytes = 8M",
        b"chunk-bytes = 256K", b"threads = 2", b"streams = 4", b"inline-max-bytes = 4k",
        b"small-max-bytes = 64KB", b"max-inflight-bytes = 1M", b"request-chunks = 3",
        b"max-unsent-bytes = 1M", b"batch-max-bytes = 256K", b"batch-max-requests = 100",
        b"batch-delay-us = 10", b"busy-poll-us = 0", b"direct-replies = no",
        b"cpu-fallback = yes", b"shutdown-timeout-ms = 100", b"fault = fail:3",
        b"verbose = yes", b"  # only a comment", b"config = /etc/other.conf",
        b"chunk-bytes = 100", b"max-request-bytes = 5G", b"unknown-key = 1",
    ]
    for i, s in enumerate(settings):
        write("fuzz-config", "setting-%02d" % i, s + b"\n")
    cmdlines = [
        b"threads = 2\n\0--threads\0004",
        b"backend = cuda\n\0--backend=cpu\0-v\0-vv",
        b"\0--socket\0/tmp/x.sock\0--socket-mode\0777",
        b"\0--help", b"\0--version", b"\0--max-req=1K", b"\0stray",
        b"staging-bytes = 300K\n\0--chunk-bytes\0256K",
        b"\0--fault\0slow:10\0--direct-replies\0maybe",
    ]
    for i, s in enumerate(cmdlines):
        write("fuzz-config", "cmdline-%02d" % i, s)


if __name__ == "__main__":
    main()
