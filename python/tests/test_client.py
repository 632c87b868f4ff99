"""Connecting, the methods besides reductions, every error the daemon can
answer, closing and reconnecting."""

import builtins
import math
import os
import re
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

import gpured
from gpured import _wire
from conftest import TOP


def test_version_matches_meson():
    with open(os.path.join(TOP, "meson.build")) as f:
        m = re.search(r"version:\s*'([^']+)'", f.read())
    assert m and gpured.__version__ == m.group(1)
    with open(os.path.join(TOP, "python", "pyproject.toml")) as f:
        assert 'attr = "gpured._version.__version__"' in f.read()


def test_socket_path_rule(monkeypatch):
    monkeypatch.setenv("GPURED_SOCKET", "/tmp/x.sock")
    assert gpured.default_socket_path() == "/tmp/x.sock"
    monkeypatch.setenv("GPURED_SOCKET", "")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    want = "/run/gpured.sock" if os.geteuid() == 0 else "/run/user/1000/gpured.sock"
    assert gpured.default_socket_path() == want
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert gpured.default_socket_path() == "/run/gpured.sock"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert gpured.default_socket_path() == "/run/user/1000/gpured.sock"


def test_env_socket_used(daemon, monkeypatch):
    monkeypatch.setenv("GPURED_SOCKET", daemon.path)
    with gpured.Client() as c:
        assert c.path == daemon.path
        assert c.ping() == "pong"


def test_ping_info_stats(client, daemon):
    assert client.ping() == "pong"
    info = client.info()
    assert info["version"] == gpured.__version__
    assert info["backend"] in ("cpu", "cuda")
    assert info["socket"] == daemon.path
    assert isinstance(info["limits"]["max_request_bytes"], int)
    before = client.stats()
    client.sum(np.ones(1000, np.float32))
    after = client.stats()
    assert after["requests"] > before["requests"]
    assert after["elements"] - before["elements"] >= 1000
    assert isinstance(after["latency_us"], dict)


def test_sndbuf_raised(client):
    got = client._conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    with open("/proc/sys/net/core/wmem_max") as f:
        cap = int(f.read())
    # Linux doubles what it was asked for, up to the cap (as root, past it).
    assert got >= min(4 << 20, cap)


def test_connect_failure(tmp_path):
    with pytest.raises(gpured.ConnectionError) as e:
        gpured.Client(str(tmp_path / "nothing.sock"))
    assert isinstance(e.value, builtins.ConnectionError)
    assert isinstance(e.value, gpured.Error) and e.value.code == "connection"


def test_unknown_method(client):
    with pytest.raises(gpured.UnknownMethod) as e:
        client.call("frobnicate")
    assert e.value.code == "unknown_method" and "frobnicate" in e.value.message
    assert client.ping() == "pong"


def test_invalid_params_raw(client):
    with pytest.raises(gpured.InvalidParams) as e:
        client.call("reduce", {"op": "sum", "dtype": "f128", "data": b""})
    assert e.value.code == "invalid_params" and "dtype" in e.value.message
    with pytest.raises(gpured.InvalidParams):
        client.call("ping", 1)
    with pytest.raises(gpured.InvalidParams):
        client.call("unmap", {"region": 12345})
    assert client.ping() == "pong"


def test_invalid_request_closes(daemon):
    c = gpured.Client(daemon.path, timeout=10)
    fut = c._conn.request(_wire._str("ping") + b"\x90", lambda r: r)
    assert fut.result() == "pong"
    # Garbage on the wire: the daemon answers invalid_request and closes.
    pending = c._conn.request(b"\xc1", lambda r: r)
    with pytest.raises(gpured.InvalidRequest) as e:
        pending.result()
    assert e.value.code == "invalid_request"
    with pytest.raises((gpured.InvalidRequest, gpured.ConnectionError)):
        c.ping()
    assert c.closed
    c.close()


def test_too_large(make_daemon):
    d = make_daemon("--max-request-bytes", "64K")
    with gpured.Client(d.path, timeout=10) as c:
        assert c.sum(np.ones(16 << 10, np.float32)) == 16 << 10      # 64 KiB: fits
        with pytest.raises(gpured.TooLarge) as e:
            c.sum(np.ones((16 << 10) + 1, np.float32))
        assert e.value.code == "too_large" and e.value.message
        with pytest.raises(gpured.TooLarge):
            c.sum(np.ones(1 << 20, np.float64))                       # 8 MiB, read and dropped
        assert c.ping() == "pong"                                     # stays open


def connect_when_free(path):
    """A client once the daemon has seen the previous one go (its slot is
    freed when the daemon notices the close, not at once)."""
    deadline = time.monotonic() + 5
    while True:
        c = gpured.Client(path, timeout=10)
        try:
            c.ping()
            return c
        except gpured.Busy:
            c.close()
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_busy(make_daemon):
    d = make_daemon("--max-connections", "1")
    with connect_when_free(d.path) as first:
        assert first.ping() == "pong"
        second = gpured.Client(d.path, timeout=10)
        with pytest.raises(gpured.Busy) as e:
            second.ping()
        assert e.value.code == "busy"
        assert second.closed
        with pytest.raises(gpured.Error):
            second.sum(np.ones(3))
        second.close()
        assert first.ping() == "pong"
    # The slot is free again once the first one is gone.
    with connect_when_free(d.path) as third:
        assert third.ping() == "pong"


def test_error_classes_from_wire():
    # internal cannot be provoked on the CPU backend; check the mapping of
    # every code instead.
    for code, cls in [("invalid_request", gpured.InvalidRequest),
                      ("unknown_method", gpured.UnknownMethod),
                      ("invalid_params", gpured.InvalidParams),
                      ("too_large", gpured.TooLarge), ("empty", gpured.Empty),
                      ("busy", gpured.Busy), ("internal", gpured.Internal)]:
        e = gpured.errors.error_from_wire({"code": code, "message": "m " + code})
        assert type(e) is cls and e.code == code and e.message == "m " + code
        assert isinstance(e, gpured.Error)
        assert str(e) == "%s: m %s" % (code, code)
    e = gpured.errors.error_from_wire({"code": "new_code", "message": "x"})
    assert type(e) is gpured.Error and e.code == "new_code"
    assert issubclass(gpured.Timeout, builtins.TimeoutError)
    assert issubclass(gpured.Timeout, gpured.ConnectionError)


def test_close_and_reconnect(daemon):
    c = gpured.Client(daemon.path)
    assert c.sum(np.arange(4)) == 6
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(gpured.ConnectionError) as e:
        c.sum(np.arange(4))
    assert isinstance(e.value, builtins.ConnectionError)
    with gpured.Client(daemon.path) as c2:
        assert c2.sum(np.arange(4)) == 6
    assert c2.closed


def test_daemon_goes_away(make_daemon):
    d = make_daemon()
    c = gpured.Client(d.path, timeout=10)
    assert c.ping() == "pong"
    d.stop()
    with pytest.raises(gpured.ConnectionError):
        for _ in range(3):
            c.ping()
    c.close()


def test_timeout_on_silent_server(tmp_path):
    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    try:
        c = gpured.Client(path, timeout=0.5)
        t = time.monotonic()
        with pytest.raises(gpured.Timeout) as e:
            c.ping()
        assert 0.45 < time.monotonic() - t < 0.95      # the timeout, once
        c2 = gpured.Client(path)
        f = c2.submit("sum", np.arange(3))
        t = time.monotonic()
        with pytest.raises(TimeoutError):
            f.result(timeout=0.3)                       # the future's own
        assert 0.25 < time.monotonic() - t < 0.6
        assert not f.done() and not c2.closed           # only the wait gave up
        c2.close()
        assert isinstance(f.exception(), gpured.ConnectionError)
        assert isinstance(e.value, builtins.TimeoutError) and e.value.code == "timeout"
        assert c.closed
        c.close()
    finally:
        srv.close()


def test_spin(daemon, tmp_path):
    """A client that reads the socket for a while before it sleeps:
    answers within the spin and after it, from several threads, a server
    that does not answer (the spin, then the timeout) and bad values."""
    rng = np.random.default_rng(5)
    with gpured.Client(daemon.path, timeout=30, spin_us=2000) as c:
        for n in (1, 7, 1000, 3_000_001):
            x = rng.standard_normal(n)
            assert c.sum(x) == math.fsum(x)
            assert c.max(x) == x.max()
        xs = [rng.integers(-10**6, 10**6, size=k) for k in range(1, 300)]
        fs = [c.submit("min", y) for y in xs]
        assert [f.result() for f in reversed(fs)] == [int(y.min()) for y in reversed(xs)]
        outs = []

        def worker(seed):
            r = np.random.default_rng(seed)
            for _ in range(50):
                y = r.integers(-1000, 1000, size=int(r.integers(1, 5000)))
                outs.append(c.sum(y) == int(y.sum()))
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(outs) == 200 and all(outs)
    with pytest.raises(ValueError):
        gpured.Client(daemon.path, spin_us=-1)
    with pytest.raises(ValueError):
        gpured.Client(daemon.path, spin_us=2_000_001)
    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    try:
        c = gpured.Client(path, timeout=0.5, spin_us=200_000)
        t, cpu = time.monotonic(), time.thread_time()
        with pytest.raises(gpured.Timeout):
            c.ping()
        assert 0.45 < time.monotonic() - t < 0.95      # the timeout, once
        assert time.thread_time() - cpu > 0.03          # it spun, then slept
        assert c.closed
    finally:
        srv.close()


def test_garbage_from_server(tmp_path):
    path = str(tmp_path / "liar.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve():
        s, _ = srv.accept()
        s.recv(100)
        s.sendall(msgpack.packb([7, 7, 7]) + msgpack.packb([1, 1, None, "x"]))
        time.sleep(0.5)
        s.close()
    t = threading.Thread(target=serve)
    t.start()
    try:
        with gpured.Client(path, timeout=5) as c:
            with pytest.raises(gpured.ConnectionError, match="malformed"):
                c.ping()
    finally:
        t.join()
        srv.close()


def test_garbage_collected_client_closes(daemon):
    import gc
    c = gpured.Client(daemon.path)
    c.ping()
    sock = c._conn.sock
    reader = c._conn.reader
    del c
    gc.collect()
    assert sock.fileno() == -1
    reader.join(2)
    assert not reader.is_alive()


def test_close_during_a_blocked_send(tmp_path):
    """A server that never reads: a large send waits for room; close() from
    another thread ends it promptly with ConnectionError."""
    path = str(tmp_path / "deaf.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    try:
        c = gpured.Client(path)
        errors = []

        def send():
            try:
                c.sum(np.ones(8 << 20, np.float64))          # 64 MiB
            except BaseException as e:
                errors.append(e)
        t = threading.Thread(target=send)
        t.start()
        time.sleep(0.2)
        assert t.is_alive()
        start = time.monotonic()
        c.close()
        t.join(10)
        assert not t.is_alive() and time.monotonic() - start < 5
        assert len(errors) == 1 and isinstance(errors[0], gpured.ConnectionError), errors
    finally:
        srv.close()
