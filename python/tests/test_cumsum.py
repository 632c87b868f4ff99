"""Prefix sums (Client.cumsum, submit("cumsum"), gpured.aio): against
numpy.cumsum, integers exactly (wrapping modulo 2**64 as NumPy's int64 and
uint64 do), floats within 1e-12 of the running sum of magnitudes (the
daemon's order is PROTOCOL.md's business, not this test's); every dtype,
odd sizes, none, several chunks; arrays in regions into writable ones,
in place; out=; pipelined; the reply-size bound; bad inputs."""

import asyncio
import gc

import numpy as np
import pytest

import gpured
import gpured.aio
from samples import DTYPES, sample

WIDE = {"int32": np.int64, "int64": np.int64, "uint32": np.uint64, "uint64": np.uint64,
        "float32": np.float64, "float64": np.float64}
TILE = 4096                     # the float order's tiles (PROTOCOL.md, "cumsum")
CHUNK = 4 << 20                 # the daemon's default chunk
SIZES = (1, 2, 7, TILE - 1, TILE, TILE + 1, 11 * TILE + 5, 100003)


def want(x):
    """numpy.cumsum in the prefix sums' dtype: wraps as the daemon does."""
    dt = x.dtype.name
    return np.cumsum(x.ravel().astype(WIDE[dt]), dtype=WIDE[dt])


def check(x, got):
    w = want(x)
    assert isinstance(got, np.ndarray)
    assert got.dtype == w.dtype and got.shape == (x.size,)
    if got.dtype.kind != "f":
        assert np.array_equal(got, w)
        return
    with np.errstate(invalid="ignore"):
        mag = np.cumsum(np.abs(x.ravel().astype(np.float64)))
        ok = np.abs(got - w) <= 1e-12 * mag
    ok |= (got == w) | (np.isnan(got) & np.isnan(w))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (x.dtype, x.size, bad[:5], got[bad[:5]], w[bad[:5]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_size(client, dtype):
    for n in SIZES + (CHUNK // np.dtype(dtype).itemsize + 3,):
        x = sample(dtype, n, seed=n)
        check(x, client.cumsum(x))
    # small integers, whose float sums a double holds: exactly numpy's
    x = (np.arange(5000) % 201 - 100 * (np.dtype(dtype).kind != "u")).astype(dtype)
    assert np.array_equal(client.cumsum(x), want(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(client, dtype):
    got = client.cumsum(np.array([], dtype=dtype))
    assert got.dtype == WIDE[dtype] and got.shape == (0,)
    got = client.cumsum(np.empty((3, 0), dtype=dtype), out=np.empty(0, WIDE[dtype]))
    assert got.shape == (0,)


def test_integers_wrap(client):
    big = np.array([2**63 - 1, 1, -2**63, -1, 2**63 - 1] * 3, dtype=np.int64)
    check(big, client.cumsum(big))
    u = np.array([2**64 - 1, 3, 2**63, 2**63], dtype=np.uint64)
    got = client.cumsum(u)
    check(u, got)
    assert int(got[1]) == 2
    # 32-bit elements never wrap
    i32 = np.full(10000, -2**31, dtype=np.int32)
    assert int(client.cumsum(i32)[-1]) == -2**31 * 10000
    u32 = np.full(10000, 2**32 - 1, dtype=np.uint32)
    assert int(client.cumsum(u32)[-1]) == (2**32 - 1) * 10000


def test_specials(client):
    got = client.cumsum(np.array([1.0, np.inf, 2.0, -np.inf, 3.0]))
    assert got[0] == 1 and got[1] == np.inf and got[2] == np.inf
    assert np.isnan(got[3]) and np.isnan(got[4])
    got = client.cumsum(np.array([1, np.nan, 2], dtype=np.float32))
    assert got[0] == 1 and np.isnan(got[1:]).all()
    got = client.cumsum(np.array([-0.0, -0.0]))
    assert got[1] == 0 and np.signbit(got[1])


def test_shapes_and_layouts(client):
    """numpy's order: C order whatever the layout; out of any shape."""
    m = sample("float64", 6000, seed=3).reshape(60, 100)
    check(m, client.cumsum(m))
    f = np.asfortranarray(m)
    check(f, client.cumsum(f))
    s = m[:, ::3]
    check(s, client.cumsum(s))
    out = np.empty((60, 100))
    assert client.cumsum(m, out=out) is out
    check(m, out.ravel())
    # anything NumPy can view as an array
    assert list(client.cumsum([1, 2, 3])) == [1, 3, 6]


def test_past_the_default_reply_bound(client):
    """17 million values take 136 MB: the connection lets this reply
    through, and goes on."""
    x = np.ones(17_000_000, dtype=np.int32)
    got = client.cumsum(x)
    assert got[-1] == 17_000_000 and got[12345] == 12346
    assert client.sum(np.arange(4, dtype=np.int64)) == 6


def test_reply_bound_holds(client):
    """A reply past what the connection expects ends it."""
    client._conn.proto.replies.limit = 1000
    x = np.arange(5000, dtype=np.int64)
    with pytest.raises(gpured.ConnectionError, match="larger than 1000 bytes"):
        client.sum(x, offsets=np.arange(0, 5001, 10))
    assert client.closed


def test_submit_pipelined(client):
    xs = [sample(dt, n, seed=i) for i, (dt, n) in
          enumerate([(d, s) for d in DTYPES for s in (5, 1_100_001)])]
    futs = []
    for i, x in enumerate(xs):
        futs.append(client.submit("cumsum", x))
        if i % 3 == 0:
            futs.append(client.submit("sum", np.arange(10, dtype=np.int64)))
    done = [f.result() for f in reversed(futs)][::-1]
    k = 0
    for i, x in enumerate(xs):
        check(x, done[k])
        k += 1
        if i % 3 == 0:
            assert done[k] == 45
            k += 1
    # reduce() takes the op too
    check(xs[0], client.reduce("cumsum", xs[0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_regions(client, dtype):
    """An array in a region: the daemon reads it in place and writes into
    a writable region, new or out=, nothing crossing the socket."""
    rdt = WIDE[dtype]
    for n in (1, 9 * TILE + 3, 300001):
        x = sample(dtype, n, seed=n)
        a = client.empty(n + 1, dtype)
        a[1:] = x
        before = client.stats()
        got = client.cumsum(a[1:])
        check(x, got)
        out = client.zeros(n + 2, rdt, writable=True)
        assert client.cumsum(a[1:], out=out[1:-1]) is not None
        check(x, out[1:-1])
        assert out[0] == 0 and out[-1] == 0
        after = client.stats()
        assert after["bytes_in"] - before["bytes_in"] < 4096
        assert after["bytes_shm"] - before["bytes_shm"] >= 2 * x.nbytes
        if np.dtype(dtype).itemsize == 8:
            # in place, as numpy.cumsum(b, out=b)
            b = client.empty(n, rdt, writable=True)
            b[:] = x.view(rdt)
            assert client.cumsum(b.view(dtype), out=b) is b
            check(x, b)
        del a, out, got
        gc.collect()


def test_region_x_with_plain_out(client):
    """x in a region and out elsewhere, or in a read-only region: refused
    before anything is sent."""
    a = client.empty(100, np.float32)
    a[:] = 1
    with pytest.raises(ValueError, match="writable=True"):
        client.cumsum(a, out=np.empty(100))
    with pytest.raises(ValueError, match="read-only"):
        client.cumsum(a, out=client.empty(100, np.float64))
    # a plain x with out in a region: the values come over the socket
    o = client.empty(100, np.float64)
    client.cumsum(np.ones(100, np.float32), out=o)
    assert o[-1] == 100


def test_daemon_refuses_overlap(client):
    b = client.empty(1000, np.int64, writable=True)
    b[:] = 1
    with pytest.raises(gpured.InvalidParams, match="overlap"):
        client.cumsum(b[:500], out=b[1:501])
    assert client.ping() == "pong"


def test_bad_inputs(client):
    x = np.arange(10, dtype=np.int32)
    with pytest.raises(TypeError, match="int64"):
        client.cumsum(x, out=np.empty(10, np.float64))
    with pytest.raises(ValueError, match="10 elements"):
        client.cumsum(x, out=np.empty(11, np.int64))
    with pytest.raises(ValueError, match="C-contiguous"):
        client.cumsum(x, out=np.empty(20, np.int64)[::2])
    ro = np.empty(10, np.int64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        client.cumsum(x, out=ro)
    with pytest.raises(TypeError, match="NumPy array"):
        client.cumsum(x, out=[0] * 10)
    with pytest.raises(TypeError):
        client.cumsum(np.arange(10, dtype=np.complex64))
    for kw in ({"full": True}, {"partial": True}, {"ddof": 1}, {"offsets": [0, 10]}):
        with pytest.raises(ValueError, match="not available with cumsum"):
            client.submit("cumsum", x, **kw)
    with pytest.raises(ValueError, match="out= is for cumsum"):
        client.submit("sum", x, out=np.empty(10, np.int64))
    with pytest.raises(ValueError, match="cumsum"):
        client.submit("cumsumm", x)
    assert client.ping() == "pong"


def test_too_many_for_one_reply(client, monkeypatch):
    """Past 536870911 values a reply cannot hold them: refused here, with
    nothing sent (a smaller bound stands in for the real one)."""
    from gpured import _cumsum
    monkeypatch.setattr(_cumsum, "MAX_COUNT", 1000)
    with pytest.raises(gpured.TooLarge, match="region"):
        client.cumsum(np.zeros(1001, np.float32))
    check(np.ones(1000, np.float32), client.cumsum(np.ones(1000, np.float32)))


def test_asyncio(daemon):
    async def run():
        async with gpured.aio.Client(daemon.path, timeout=30) as c:
            out = []
            for dt in DTYPES:
                x = sample(dt, 1_100_001, seed=7)
                out.append((x, await c.cumsum(x)))
            f = await c.submit("cumsum", np.arange(5, dtype=np.uint32))
            g = await c.submit("max", np.arange(5, dtype=np.uint32))
            small = await f
            assert await g == 4
            a = await c.empty(1000, np.int32)
            a[:] = np.arange(1000)
            r = await c.cumsum(a)
            o = await c.zeros(1000, np.int64, writable=True)
            await c.cumsum(a, out=o)
            with pytest.raises(ValueError, match="writable=True"):
                await c.cumsum(a, out=np.empty(1000, np.int64))
            big = await c.cumsum(np.ones(17_000_000, dtype=np.int32))
            c._proto.replies.limit = 1000
            with pytest.raises(gpured.ConnectionError, match="larger than 1000 bytes"):
                await c.sum(np.arange(5000, dtype=np.int64), offsets=np.arange(0, 5001, 10))
            return out, small, r, o.copy(), big[-1]
    out, small, r, o, last = asyncio.run(run())
    for x, got in out:
        check(x, got)
    assert list(small) == [0, 1, 3, 6, 10]
    check(np.arange(1000, dtype=np.int32), r)
    check(np.arange(1000, dtype=np.int32), o)
    assert last == 17_000_000
