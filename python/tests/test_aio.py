"""gpured.aio: the same client on asyncio."""

import asyncio
import builtins
import gc

import numpy as np
import pytest

import gpured
import gpured.aio


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_basics(daemon):
    async def main():
        async with gpured.aio.Client(daemon.path) as c:
            assert await c.ping() == "pong"
            assert (await c.info())["version"] == gpured.__version__
            assert "requests" in await c.stats()
            assert await c.sum(np.arange(10, dtype=np.int32)) == 45
            assert await c.min(np.arange(10.0)) == 0.0
            assert await c.max(np.arange(10, dtype=np.uint64)) == 9
            assert await c.sumsq(np.arange(4, dtype=np.float32)) == 14.0
            r = await c.reduce("sum", np.ones((3, 5), np.float32), full=True)
            assert r == gpured.Result(15.0, 15)
            big = np.ones(3 << 20, np.float64)               # partial sends
            assert await c.sum(big) == float(big.size)
        assert c.closed
    run(main())


def test_pipelined_out_of_order(daemon):
    async def main():
        c = await gpured.aio.connect(daemon.path, timeout=30)
        try:
            arrays = [np.full(1 + (i % 7) * 100 if i % 101 else 2 << 20, i, np.int64)
                      for i in range(1000)]
            futs = [await c.submit("sum", a) for a in arrays]
            results = await asyncio.gather(*reversed(futs))
            assert results[::-1] == [int(a.sum()) for a in arrays]
        finally:
            await c.close()
    run(main())


def test_many_tasks(daemon):
    async def main():
        async with gpured.aio.Client(daemon.path) as c:
            async def work(k):
                for i in range(50):
                    assert await c.sum(np.full(i + 1, k, np.int64)) == k * (i + 1)
            await asyncio.gather(*(work(k) for k in range(20)))
    run(main())


def test_errors(daemon, make_daemon):
    async def main():
        async with gpured.aio.Client(daemon.path) as c:
            with pytest.raises(gpured.Empty):
                await c.min(np.array([], np.int32))
            with pytest.raises(gpured.UnknownMethod):
                await c.call("frobnicate")
            with pytest.raises(gpured.InvalidParams):
                await c.call("reduce", {"op": "sum", "dtype": "f128", "data": b""})
            with pytest.raises(TypeError):
                await c.sum(np.zeros(3, np.complex64))
            assert await c.ping() == "pong"
        with pytest.raises(gpured.ConnectionError) as e:
            await c.ping()
        assert isinstance(e.value, builtins.ConnectionError)
        with pytest.raises(gpured.ConnectionError):
            await gpured.aio.connect(daemon.path + ".missing")
        small = make_daemon("--max-request-bytes", "1K")
        async with gpured.aio.Client(small.path) as c:
            with pytest.raises(gpured.TooLarge):
                await c.sum(np.ones(1000, np.float64))
            assert await c.ping() == "pong"
    run(main())


def test_regions(daemon):
    async def main():
        async with gpured.aio.Client(daemon.path) as c:
            try:
                a = await c.zeros((100, 10), np.float32)
            except gpured.UnknownMethod:
                pytest.skip("this gpured does not know 'map' yet")
            a[:] = 1.5
            before = (await c.stats())["bytes_shm"]
            assert await c.sum(a) == 1500.0
            assert await c.sum(a[50:]) == 750.0
            assert (await c.stats())["bytes_shm"] - before >= a.nbytes * 1.5
            assert (await c.stats())["regions"] >= 1
            del a
            gc.collect()
            for _ in range(100):
                await asyncio.sleep(0.01)
                if (await c.stats())["regions"] == 0:
                    break
            assert (await c.stats())["regions"] == 0
    run(main())


def test_timeout_on_silent_server(tmp_path):
    import socket
    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    async def main():
        async with gpured.aio.Client(path, timeout=0.2) as c:
            with pytest.raises(gpured.Timeout):
                await c.ping()
            assert c.closed
    try:
        run(main())
    finally:
        srv.close()


def test_busy_invalid_request_and_daemon_gone(make_daemon):
    d = make_daemon("--max-connections", "1")

    async def first_free():
        for _ in range(100):
            c = await gpured.aio.connect(d.path, timeout=10)
            try:
                await c.ping()
                return c
            except gpured.Busy:
                await c.close()
                await asyncio.sleep(0.05)
        raise AssertionError("the daemon stayed busy")

    async def main():
        first = await first_free()
        second = await gpured.aio.connect(d.path, timeout=10)
        with pytest.raises(gpured.Busy):
            await second.ping()
        assert second.closed
        await second.close()
        # Garbage on the wire: invalid_request, and the connection closes.
        fut = await first._request(b"\xc1", lambda r: r)
        with pytest.raises(gpured.InvalidRequest):
            await fut
        with pytest.raises((gpured.InvalidRequest, gpured.ConnectionError)):
            await first.ping()
        assert first.closed
        await first.close()
        third = await first_free()
        d.stop()
        with pytest.raises(gpured.ConnectionError):
            for _ in range(3):
                await third.ping()
        await third.close()
    run(main())


def test_close_during_a_blocked_send(tmp_path):
    """A server that never reads: a large send waits for room; close()
    from another task ends it with ConnectionError."""
    import socket
    path = str(tmp_path / "deaf.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    async def main():
        c = await gpured.aio.connect(path)
        send = asyncio.ensure_future(c.sum(np.ones(8 << 20, np.float64)))   # 64 MiB
        await asyncio.sleep(0.2)
        assert not send.done()
        await c.close()
        with pytest.raises(gpured.ConnectionError):
            await asyncio.wait_for(send, 5)
    try:
        run(main())
    finally:
        srv.close()
