"""Many requests in flight on one connection: futures, out-of-order
replies, several threads, callbacks nobody waits on."""

import concurrent.futures
import random
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

import gpured


def test_thousand_futures_out_of_order(client):
    rng = random.Random(5)
    arrays = []
    for i in range(1000):
        # Mostly small requests with a few large ones among them: the small
        # ones overtake the large ones.
        n = rng.choice([1, 3, 100, 1000]) if i % 97 else 3 << 20
        arrays.append(np.full(n, i % 13, np.int64))
    futs = [client.submit("sum", a, full=True) for a in arrays]
    order = []
    for f in futs:
        f.add_done_callback(lambda f, o=order: o.append(f))
    # Wait in reverse, to read replies that belong to other futures.
    for a, f in reversed(list(zip(arrays, futs))):
        r = f.result(timeout=30)
        assert r.count == a.size and r.value == int(a.sum())
    assert len(order) == 1000


def test_replies_in_reverse_order(tmp_path):
    """A server that answers 1000 requests last first: each future still
    gets its own answer (matched by msgid)."""
    path = str(tmp_path / "reverse.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    # the answers go out once every callback is added, so that the
    # callbacks run in the order the answers come
    callbacks_added = threading.Event()

    def serve():
        s, _ = srv.accept()
        u = msgpack.Unpacker(raw=False)
        reqs = []
        while len(reqs) < 1000:
            u.feed(s.recv(1 << 16))
            reqs.extend(u)
        out = b""
        for _, msgid, method, params in reversed(reqs):
            n = len(params[0]["data"]) // 8
            out += msgpack.packb([1, msgid, None, {"value": n, "count": n}])
        callbacks_added.wait(10)
        s.sendall(out)
        s.recv(1)
        s.close()
    t = threading.Thread(target=serve)
    t.start()
    try:
        with gpured.Client(path, timeout=10) as c:
            futs = [c.submit("sum", np.ones(i, np.int64), full=True) for i in range(1000)]
            order = []
            for f in futs:
                f.add_done_callback(order.append)
            callbacks_added.set()
            assert [f.result().count for f in futs] == list(range(1000))
            assert order == futs[::-1]
    finally:
        t.join(10)
        srv.close()


def test_mixed_ops_and_dtypes(client):
    jobs = []
    for i in range(300):
        dt = [np.int32, np.uint64, np.float32, np.float64][i % 4]
        op = ["sum", "min", "max", "sumsq"][i // 4 % 4]
        a = (np.arange(i + 1) % 17).astype(dt)
        jobs.append((op, a, client.submit(op, a)))
    for op, a, f in jobs:
        want = {"sum": a.sum(), "min": a.min(), "max": a.max(),
                "sumsq": (a.astype(np.float64) ** 2).sum()}[op]
        assert f.result() == pytest.approx(float(want))


def test_futures_complete_without_waiting(client):
    """Nobody calls result(): the background reader completes them, and
    concurrent.futures.wait/as_completed work."""
    done = threading.Event()
    futs = [client.submit("max", np.arange(i + 1, dtype=np.int32)) for i in range(200)]
    seen = []
    lock = threading.Lock()

    def cb(f):
        with lock:
            seen.append(f)
            if len(seen) == len(futs):
                done.set()
    for f in futs:
        f.add_done_callback(cb)
    assert done.wait(10)
    _, not_done = concurrent.futures.wait(futs, timeout=10)
    assert not not_done
    assert sorted(f.result() for f in concurrent.futures.as_completed(futs)) == list(range(200))


def test_send_many_without_reading(make_daemon):
    """More requests than the socket buffers hold, and more replies than
    the daemon keeps unsent: a caller that only submits does not deadlock
    with the daemon, because the replies are read meanwhile."""
    d = make_daemon("--max-unsent-bytes", "16K")
    x = np.ones(256, np.float32)
    with gpured.Client(d.path, timeout=30) as c:
        futs = [c.submit("sum", x, full=True) for _ in range(20000)]
        assert all(f.result().value == 256.0 for f in futs)


def test_threads_share_one_client(client):
    errors = []

    def work(k):
        try:
            for i in range(300):
                a = np.full(1 + (i * k) % 50, k, np.int64)
                if i % 3:
                    assert client.sum(a) == k * a.size
                else:
                    assert client.submit("max", a).result() == k
        except BaseException as e:       # report in the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]


def test_errors_per_future(client):
    good = client.submit("sum", np.arange(3))
    bad = client.submit("min", np.array([], np.float64))
    good2 = client.submit("max", np.arange(3))
    assert good.result() == 3
    with pytest.raises(gpured.Empty):
        bad.result()
    assert isinstance(bad.exception(), gpured.Empty)
    assert good2.result() == 2


def test_cancelled_future_is_ignored(client):
    f = client.submit("sum", np.ones(1 << 20))
    f.cancel()
    assert client.sum(np.arange(10)) == 45


def test_close_fails_pending(daemon):
    c = gpured.Client(daemon.path)
    futs = [c.submit("sum", np.ones(1 << 18)) for _ in range(50)]
    c.close()
    for f in futs:
        try:
            f.result(timeout=5)
        except gpured.ConnectionError:
            pass                         # either answered before, or failed
    with pytest.raises(gpured.ConnectionError):
        c.submit("sum", np.ones(3))


def test_callbacks_after_a_blocking_call(client):
    """Requests submitted right after a blocking call may be held back to
    go out together; they still go out when nobody waits any more."""
    assert client.ping() == "pong"
    done = threading.Event()
    futs = [client.submit("sum", np.arange(i + 1)) for i in range(10)]
    futs[-1].add_done_callback(lambda f: done.set())
    assert done.wait(5)
    assert [f.result() for f in futs] == [i * (i + 1) // 2 for i in range(10)]
    f = client.submit("sum", np.arange(4))
    assert concurrent.futures.wait([f], timeout=5).not_done == set()


def test_waiting_inside_a_callback_is_refused(client):
    other = client.submit("sum", np.ones(1 << 20))
    seen = []

    def cb(f):
        try:
            seen.append(other.result(timeout=5))
        except RuntimeError as e:
            seen.append(e)
    first = client.submit("sum", np.arange(3))
    first.add_done_callback(cb)
    assert first.result() == 3
    assert other.result() == float(1 << 20)
    # The callback ran either in a reading thread (refused) or after both
    # answers had arrived.
    assert len(seen) == 1
    assert isinstance(seen[0], RuntimeError) or seen[0] == float(1 << 20)


def test_close_while_threads_wait(daemon):
    """close() from one thread while others submit and wait: every one of
    them ends promptly, with an answer or gpured.ConnectionError."""
    c = gpured.Client(daemon.path)
    stop = threading.Event()
    outcomes = []

    def work(k):
        try:
            while not stop.is_set():
                futs = [c.submit("sum", np.ones(1000 * (k + 1))) for _ in range(8)]
                for f in futs:
                    f.result(timeout=10)
        except gpured.ConnectionError:
            outcomes.append("closed")
        except BaseException as e:
            outcomes.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    c.close()
    for t in threads:
        t.join(10)
    stop.set()
    assert not any(t.is_alive() for t in threads)
    assert outcomes == ["closed"] * 4, outcomes
