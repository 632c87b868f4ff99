"""The client's two paths: the C extension (gpured._fast, client.py's
_FastConn) and pure Python. Which one is in use, that both give the same
results and errors for any reply (hostile ones included), and the edge
cases of the extension's own work (futures, closing, large and many
replies, arrays dropped while in flight), run on whichever path the
suite runs on (meson: the main build's with the extension, the sanitizer
build's pure)."""

import concurrent.futures
import gc
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref

import msgpack
import numpy as np
import pytest

import gpured
import gpured.client as gclient
from gpured import _protocol

HERE = os.path.dirname(os.path.abspath(__file__))


def pure_forced():
    return os.environ.get("GPURED_PURE_PYTHON", "") not in ("", "0")


def test_the_expected_path_is_in_use(client):
    """A build that meant to test the extension and fell back to pure
    Python (no python3-dev, a module that does not load) fails here."""
    ext = type(client._conn).__name__ == "_FastConn"
    if pure_forced():
        assert not ext and gclient._fast is None
    elif os.environ.get("GPURED_TEST_EXTENSION") == "1":
        assert ext, ("the C extension gpured._fast is not in use (is it built? Debian: "
                     "python3-dev); gpured.client._fast is %r" % (gclient._fast,))
    assert (gclient._CONN is gclient._Conn) == (gclient._fast is None)


def test_pure_python_by_environment():
    env = dict(os.environ, GPURED_PURE_PYTHON="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE)] + sys.path))
    out = subprocess.run([sys.executable, "-c",
                          "import gpured.client as c; print(c._CONN.__name__, c._fast)"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["_Conn", "None"]


# ---- both paths, one reply at a time ----

PATHS = ["pure"] + (["c"] if gclient._fast is not None else [])


def make_client(kind, path, monkeypatch, **kw):
    with monkeypatch.context() as m:
        m.setattr(gclient, "_CONN", gclient._Conn if kind == "pure" else gclient._FastConn)
        return gpured.Client(path, **kw)


class Scripted:
    """A server that takes one connection, reads one request and answers
    it with script(msgid): bytes, sent in pieces of chunk bytes (a short
    sleep between them); it then closes (close=True) or waits for the
    client to."""

    def __init__(self, path, script, chunk=None, close=False):
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(path)
        self.srv.listen(1)
        self.script, self.chunk, self.close = script, chunk, close
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        s, _ = self.srv.accept()
        s.settimeout(10)
        try:
            u = msgpack.Unpacker(raw=False)
            msg = None
            while msg is None:
                u.feed(s.recv(1 << 16))
                for msg in u:
                    break
            out = self.script(msg[1])
            step = self.chunk or len(out) or 1
            for i in range(0, len(out), step):
                s.sendall(out[i:i + step])
                if self.chunk:
                    time.sleep(0.0005)
            if not self.close:
                while s.recv(1 << 16):
                    pass
        except OSError:
            pass
        finally:
            s.close()

    def stop(self):
        self.thread.join(15)
        self.srv.close()


def outcome(fn):
    try:
        v = fn()
    except Exception as e:
        return ("raised", type(e).__name__, getattr(e, "code", None), str(e))
    return ("value", type(v).__name__, repr(v))


def head(m):
    """[1, m, ... as bytes: a response's first two elements."""
    return b"\x94\x01" + msgpack.packb(m)


def reply(m, err, res):
    return msgpack.packb([1, m, err, res])


def nested(depth):
    return b"\x91" * depth + b"\x01"


SUM = "sum"
PING = "ping"

# (name, call, script(msgid), options)
CASES = [
    ("value", SUM, lambda m: reply(m, None, {"value": 1.5, "count": 3}), {}),
    ("float32 value", SUM, lambda m: head(m) + b"\xc0\x82\xa5value\xca" + struct.pack(">f", 1.1)
     + b"\xa5count\x03", {}),
    ("extreme integers", PING, lambda m: reply(m, None, [2**64 - 1, -2**63, -1, -33, 255, 256,
                                                          65536, 2**32, -129, -32769]), {}),
    ("every type", PING, lambda m: reply(m, None, {"a": [None, True, False, 0.25, b"\x00bin",
                                                         "s" * 40, "é", {}, [], {1: 2, b"k": 3.0}]}),
     {}),
    ("nil value", SUM, lambda m: reply(m, None, {"value": None}), {}),
    ("result that is no map", SUM, lambda m: reply(m, None, [1, 2]), {}),
    ("map without value", SUM, lambda m: reply(m, None, {"valeur": 1}), {}),
    ("ext type", SUM, lambda m: reply(m, None, {"value": msgpack.ExtType(5, b"ab")}), {}),
    ("timestamp", PING, lambda m: reply(m, None, msgpack.Timestamp(1, 2)), {}),
    ("bad UTF-8", SUM, lambda m: head(m) + b"\xc0\x81\xa5value\xa2\xff\xfe", {}),
    ("bad UTF-8 key", SUM, lambda m: head(m) + b"\xc0\x81\xa2\xc3\x28\x01", {}),
    ("a request, not a response", SUM, lambda m: msgpack.packb([0, m, "sum", []]), {}),
    ("msgid a string", SUM, lambda m: reply("x", None, {"value": 1}), {}),
    ("msgid true", SUM, lambda m: msgpack.packb([1, True, None, {"value": 1}]), {}),
    ("msgid a float", SUM, lambda m: msgpack.packb([1, float(m), None, {"value": 1}]), {}),
    ("type 1.0", SUM, lambda m: msgpack.packb([1.0, m, None, {"value": 2}]), {}),
    ("three elements", SUM, lambda m: msgpack.packb([1, m, None]), {}),
    ("array16 of four", SUM, lambda m: b"\xdc\x00\x04\x01" + msgpack.packb(m)
     + b"\xc0\x81\xa5value\x09", {}),
    ("0xc1", SUM, lambda m: b"\xc1", {}),
    ("a map header past max_map_len", SUM, lambda m: head(m) + b"\xc0\xdf\xff\xff\xff\xf0", {}),
    ("an unhashable key", PING, lambda m: head(m) + b"\xc0\x81\x91\x01\x01", {}),
    # msgpack raises for these before the reply is whole: so must the extension
    ("bad UTF-8, cut short", SUM, lambda m: head(m) + b"\xc0\x82\xa5value\xa2\xff\xfe", {}),
    ("an unhashable key, cut short", PING, lambda m: head(m) + b"\xc0\x82\x91\x01\x01", {}),
    ("a map header past max_map_len, cut short", SUM,
     lambda m: head(m) + b"\xc0\x91\xdf\xff\xff\xff\xf0", {}),
    ("nested 40 deep", PING, lambda m: head(m) + b"\xc0" + nested(40), {}),
    ("nested 3000 deep", PING, lambda m: head(m) + b"\xc0" + nested(3000), {}),
    ("an error", SUM, lambda m: reply(m, {"code": "empty", "message": "none"}, None), {}),
    ("an unknown code", SUM, lambda m: reply(m, {"code": "weird", "message": 5}, None), {}),
    ("an error that is no map", SUM, lambda m: reply(m, "oops", None), {}),
    ("an error in an ext", SUM, lambda m: reply(m, msgpack.ExtType(1, b"x"), None), {}),
    ("busy", SUM, lambda m: reply(m, {"code": "busy", "message": "full"}, None),
     {"close": True}),
    ("answered twice", SUM, lambda m: reply(m, None, {"value": 1}) + reply(m, None, {"value": 2}),
     {}),
    ("another msgid first", SUM, lambda m: reply(m + 100, None, 5)
     + reply(m + 101, {"code": "busy", "message": "no"}, None) + reply(m, None, {"value": 7}), {}),
    ("cut short", SUM, lambda m: reply(m, None, {"value": 1.5})[:-3], {"close": True}),
    ("nothing", SUM, lambda m: b"", {"close": True}),
    ("byte by byte", SUM, lambda m: reply(m, None, {"value": 3.25, "count": 9}), {"chunk": 1}),
    ("4 MiB of bytes", PING, lambda m: reply(m, None, {"data": b"\x07" * (4 << 20)}), {}),
    ("4 MiB in pieces", PING, lambda m: reply(m, None, {"data": b"\x07" * (4 << 20)}),
     {"chunk": 1 << 19}),
    ("past the reply limit", PING, lambda m: reply(m, None, b"x" * 5000), {"limit": 1000}),
    ("past the limit, not whole", PING, lambda m: reply(m, None, b"x" * 5000)[:2500],
     {"limit": 1000}),
    ("past the limit in pieces", PING, lambda m: reply(m, None, b"x" * 5000)[:2500],
     {"limit": 1000, "chunk": 100}),
    ("a good reply, then garbage", SUM, lambda m: reply(m, None, {"value": 4}) + b"\xc1", {}),
]


def run_both(tmp_path, monkeypatch, call, script, opts):
    """(first call's outcome, closed, the next call's outcome) on each path."""
    got = {}
    path = str(tmp_path / "gpured.sock")     # one name: messages carry it
    for kind in PATHS:
        srv = Scripted(path, script, chunk=opts.get("chunk"), close=opts.get("close", False))
        try:
            c = make_client(kind, path, monkeypatch, timeout=5)
            if "limit" in opts:
                c._conn.proto.replies.limit = opts["limit"]
            x = np.ones(3, np.float32)
            first = outcome((lambda: c.sum(x)) if call == SUM else c.ping)
            # Let the reader thread take what else came (the end of the
            # stream, more replies) before looking at the state.
            end = time.monotonic() + (2 if opts.get("close") else 0.05)
            while not c.closed and time.monotonic() < end:
                time.sleep(0.005)
            closed = c.closed
            second = outcome(c.ping) if closed else None
            got[kind] = (first, closed, second)
            c.close()
        finally:
            srv.stop()
            os.unlink(path)
    return got


# What some of the cases must give (the rest: whatever the pure path gives).
EXPECT = {
    "value": ("value", "float", "1.5"),
    "float32 value": ("value", "float", repr(float(np.float32(1.1)))),
    "byte by byte": ("value", "float", "3.25"),
    "answered twice": ("value", "int", "1"),
    "another msgid first": ("value", "int", "7"),
    "map without value": ("raised", "Error", "internal",
                          "internal: malformed reduce result: {'valeur': 1}"),
    "an error": ("raised", "Empty", "empty", "empty: none"),
    "busy": ("raised", "Busy", "busy", "busy: full"),
    "nothing": ("raised", "ConnectionError", "connection",
                "connection: connection closed by the daemon"),
}


@pytest.mark.parametrize("name,call,script,opts", CASES, ids=[c[0] for c in CASES])
def test_both_paths_agree(tmp_path, monkeypatch, name, call, script, opts):
    """Whatever a server answers, the extension returns or raises what the
    pure path does, and leaves the client in the same state (closed or
    not, and what the next call then raises)."""
    got = run_both(tmp_path, monkeypatch, call, script, opts)
    assert len(set(got.values())) == 1, got
    first, closed, _ = got["pure"]
    assert "Timeout" not in first[1], first          # every case gets an answer
    if name in EXPECT:
        assert first == EXPECT[name]
    if first[0] == "raised" and "malformed response" in first[3]:
        assert closed


# ---- the extension's edge cases, against the daemon ----

def test_futures_are_concurrent_futures(client):
    f = client.submit("sum", np.arange(10))
    assert isinstance(f, concurrent.futures.Future)
    seen = []
    f.add_done_callback(seen.append)
    assert f.result(timeout=10) == 45 and f.result() == 45
    assert f.done() and not f.cancelled() and not f.running() and f.exception() is None
    assert seen == [f] and "finished" in repr(f)
    late = []
    f.add_done_callback(late.append)                   # runs at once: done
    assert late == [f]
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result(1)
    e = client.submit("min", np.array([], np.float32))
    assert isinstance(e.exception(timeout=10), gpured.Empty)
    with pytest.raises(gpured.Empty):
        e.result()
    # cancelled before its answer: the answer is dropped
    big = client.submit("sum", np.ones(1 << 21))
    big.cancel()
    assert big.cancelled() or big.result() == float(1 << 21)
    assert client.sum(np.arange(5)) == 10
    # waited for by other threads, through concurrent.futures
    futs = [client.submit("max", np.arange(i + 1)) for i in range(300)]
    box = []
    t = threading.Thread(target=lambda: box.append(concurrent.futures.wait(futs, timeout=20)))
    t.start()
    assert sorted(f.result() for f in concurrent.futures.as_completed(futs, timeout=20)) == \
        list(range(300))
    t.join(20)
    assert not box[0].not_done


def test_errors_from_the_daemon(client):
    with pytest.raises(gpured.InvalidParams) as e:
        client.call("reduce", {"op": "sum", "dtype": "f128", "data": b""})
    assert "dtype" in e.value.message
    fs = [client.submit("min", np.array([], np.int32)) if i % 3 == 0 else
          client.submit("sum", np.arange(i)) for i in range(300)]
    for i, f in enumerate(fs):
        if i % 3 == 0:
            assert isinstance(f.exception(), gpured.Empty)
        else:
            assert f.result() == i * (i - 1) // 2
    with pytest.raises(gpured.UnknownMethod):
        client.call("no_such_method")
    assert client.ping() == "pong" and not client.closed


def test_large_replies(client):
    x = np.arange(3_000_000, dtype=np.int32)
    got = client.cumsum(x)                              # 24 MB of values
    assert got[-1] == int(x.sum()) and got[12345] == 12345 * 12346 // 2
    m = np.random.default_rng(1).standard_normal((100_000, 8))
    rows = client.sum(m, offsets=np.arange(0, m.size + 1, 8))     # 800 KB of values
    assert rows.tolist() == [math.fsum(r) for r in m]
    assert isinstance(client.stats(), dict) and isinstance(client.info(), dict)
    assert client.sum(np.arange(4, dtype=np.int64)) == 6


def test_many_in_flight_from_threads(client):
    """Threads that submit thousands of small and some large requests,
    and wait for them in their own order, while another waits through
    concurrent.futures: every answer its own, nothing left in flight."""
    errors = []

    def work(k):
        try:
            rng = np.random.default_rng(k)
            for _ in range(3):
                xs = [np.full(int(rng.choice([1, 16, 256, 4096, 70_000])), k, np.int64)
                      for _ in range(600)]
                fs = [client.submit("sum", x) for x in xs]
                order = rng.permutation(len(fs))
                for i in order:
                    assert fs[i].result(timeout=30) == k * xs[i].size
        except BaseException as e:
            errors.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in ts:
        t.start()
    futs = [client.submit("sum", np.ones(100)) for _ in range(500)]
    done, not_done = concurrent.futures.wait(futs, timeout=30)
    for t in ts:
        t.join(60)
    assert not errors, errors[0]
    assert not not_done and all(f.result() == 100.0 for f in done)
    assert not client._conn.proto.pending


def test_dropped_arrays_still_correct(client):
    """The caller drops each array (or overwrites it) right after submit:
    every answer is still the sum of what was submitted. Arrays sent over
    the socket are copied or written out before submit returns; one in a
    region is read in place by the daemon, which keeps it mapped until
    its requests are done."""
    futs = []
    for i in range(400):
        n = 1 + (i * 997) % 6000                        # below and above 16 KiB
        x = np.full(n, i, np.int64)
        futs.append((client.submit("sum", x), i * n))
        if i % 2:
            x[:] = -1                                   # reused at once
        del x
    gc.collect()
    for i in range(20):
        a = client.empty(1000, np.int64)
        a[:] = i
        futs.append((client.submit("sum", a), 1000 * i))
        del a
    gc.collect()
    assert [f.result(timeout=30) for f, _ in futs] == [want for _, want in futs]


def test_no_references_leak(client):
    """Requests, answers and errors leave no reference behind: to the
    array, to the converter, to the futures."""
    x = np.ones(256, np.float32)
    conv = _protocol.value_conv
    empty = np.array([], np.float32)
    for _ in range(50):
        client.submit("sum", x).result()                # warm the caches
        with pytest.raises(gpured.Empty):
            client.min(empty)
    before = sys.getrefcount(x), sys.getrefcount(conv)
    for _ in range(2000):
        client.submit("sum", x).result()
    futs = [client.submit("sum", x) for _ in range(200)]
    assert all(f.result() == 256.0 for f in futs)
    del futs
    for _ in range(200):
        with pytest.raises(gpured.Empty):
            client.min(empty)
    assert (sys.getrefcount(x), sys.getrefcount(conv)) == before
    f = client.submit("sum", x)
    f.result()
    w = weakref.ref(f)
    del f
    gc.collect()
    assert w() is None


def test_closed_connection(daemon):
    c = gpured.Client(daemon.path, timeout=30)
    futs = [c.submit("sum", np.ones(1 << 16)) for _ in range(200)]
    c.close()
    for f in futs:
        try:
            assert f.result(timeout=5) == float(1 << 16)
        except gpured.ConnectionError:
            pass                                        # answered before, or failed
    for call in (lambda: c.submit("sum", np.ones(3)), c.ping, lambda: c.sum(np.ones(3))):
        with pytest.raises(gpured.ConnectionError, match="closed"):
            call()
    assert c.closed


def test_daemon_killed_in_flight(make_daemon):
    d = make_daemon()
    c = gpured.Client(d.path, timeout=30)
    assert c.sum(np.arange(3)) == 3
    futs = [c.submit("sum", np.ones(1 << 18)) for _ in range(100)]
    d.proc.kill()
    d.proc.wait()
    for f in futs:
        try:
            assert f.result(timeout=10) == float(1 << 18)   # answered before
        except gpured.ConnectionError:
            pass                                             # or failed, never hung
    with pytest.raises(gpured.ConnectionError):
        c.ping()
    assert c.closed
    c.close()


class Interrupted(Exception):
    pass


def test_a_signal_interrupts_a_wait(tmp_path):
    """A signal handler's exception (Ctrl-C's KeyboardInterrupt) ends a
    call waiting for an answer that does not come: the wait lets go of
    the GIL and looks at signals, on both paths."""
    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def interrupt(signum, frame):
        raise Interrupted()
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        c = gpured.Client(path)
        for call in (c.ping, lambda: c.submit("sum", np.ones(3)).result()):
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            t = time.monotonic()
            with pytest.raises(Interrupted):
                call()
            assert time.monotonic() - t < 5
        c.close()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        srv.close()
