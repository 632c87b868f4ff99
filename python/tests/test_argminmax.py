"""argmin and argmax against NumPy: every dtype, the named result, the
paths a request can take (bin, region, pipelined, asyncio, chunked), the
placement of ties, NaN, -0 and infinities, and the errors."""

import asyncio
import math
import struct

import numpy as np
import pytest

import gpured
import gpured.aio
from samples import DTYPES, sample


def expected(op, a):
    """(value, index) as PROTOCOL.md defines them: NumPy's argmin/argmax of
    the flattened array (the first extreme; the first NaN if any), except
    that -0.0 is below 0.0."""
    a = a.ravel()
    i = int(np.argmin(a) if op == "argmin" else np.argmax(a))
    v = a[i]
    if a.dtype.kind == "f" and v == 0:
        neg = (a == 0) & np.signbit(a)
        pos = (a == 0) & ~np.signbit(a)
        want, other = (neg, pos) if op == "argmin" else (pos, neg)
        i = int(np.flatnonzero(want if want.any() else other)[0])
        v = a[i]
    return (float(v) if a.dtype.kind == "f" else int(v)), i


def bits(x):
    return struct.pack("<d", x) if isinstance(x, float) else x


def check(got, op, a):
    assert isinstance(got, gpured.ArgResult)
    v, i = expected(op, a)
    assert got.count == a.size
    assert got.index == i, (op, a.dtype, got, i)
    if isinstance(v, float) and math.isnan(v):
        assert math.isnan(got.value)
    else:
        assert type(got.value) is type(v) and bits(got.value) == bits(v), (op, got, v)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", gpured.ARG_OPS)
def test_against_numpy(client, op, dtype):
    for n in (1, 2, 31, 33, 1000, 32769, 300001):
        a = sample(dtype, n, seed=n)
        got = getattr(client, op)(a)
        check(got, op, a)
        assert got.value == getattr(client, op[3:])(a)
        # ties: many equal extremes, the first one wins
        t = (np.arange(n) % 5).astype(dtype)
        check(getattr(client, op)(t), op, t)
        assert client.reduce(op, t) == getattr(client, op)(t)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_specials(client, dtype):
    n = 70001
    for k in (0, 1, 32767, 32768, 65536, n - 1):
        z = np.zeros(n, dtype)
        z[k] = -0.0
        for op in gpured.ARG_OPS:
            check(client.reduce(op, z), op, z)
            check(client.reduce(op, -z), op, -z)
        w = sample(dtype, n, seed=k)
        w[k] = np.inf
        w[(k * 7 + 3) % n] = -np.inf
        for op in gpured.ARG_OPS:
            check(client.reduce(op, w), op, w)
        w[(k * 3 + 1) % n] = np.nan
        w[n - 1 - k] = np.nan
        for op in gpured.ARG_OPS:
            r = client.reduce(op, w)
            assert math.isnan(r.value)
            assert r.index == int(np.flatnonzero(np.isnan(w))[0])
            assert r.index == int(np.argmin(w) if op == "argmin" else np.argmax(w))


def test_shapes_and_orders(client):
    a = sample("float64", 6 * 7, seed=3).reshape(6, 7)
    # the index is into the flattened array, C order, as numpy's
    assert client.argmin(a).index == int(np.argmin(a))
    f = np.asfortranarray(a)
    # a Fortran-ordered array is sent as its memory lies: the index is
    # into that order
    assert client.argmax(f).index == int(np.argmax(f.ravel(order="K")))


def test_regions_equal_the_socket(client):
    n = 200003
    for dtype in DTYPES:
        a = sample(dtype, n, seed=11)
        r = client.empty(n, dtype)
        r[:] = a
        for op in gpured.ARG_OPS:
            in_place = client.reduce(op, r)
            check(in_place, op, a)
            assert in_place == client.reduce(op, a)
            part = r[1000:5001]
            check(client.reduce(op, part), op, a[1000:5001])


def test_pipelined_and_full(client):
    arrays = [sample(DTYPES[k % 6], 1 + k * 13, seed=k) for k in range(200)]
    futs = [client.submit(("argmin", "argmax")[k % 2], a) for k, a in enumerate(arrays)]
    for k, (f, a) in enumerate(zip(futs, arrays)):
        check(f.result(), ("argmin", "argmax")[k % 2], a)
    # full= makes no difference: the result is always named
    a = arrays[5]
    assert client.reduce("argmax", a, full=True) == client.reduce("argmax", a)


def test_asyncio(daemon):
    async def go():
        async with gpured.aio.Client(daemon.path) as c:
            a = sample("int32", 5000, seed=4)
            check(await c.argmin(a), "argmin", a)
            check(await c.argmax(a), "argmax", a)
            futs = [await c.submit("argmax", sample("float32", 100 + k, seed=k)) for k in range(50)]
            for k, f in enumerate(futs):
                check(await f, "argmax", sample("float32", 100 + k, seed=k))

    asyncio.run(go())


def test_errors(client):
    for op in gpured.ARG_OPS:
        for dtype in DTYPES:
            with pytest.raises(gpured.Empty):
                client.reduce(op, np.empty(0, dtype))
        with pytest.raises(ValueError):
            client.reduce(op, np.ones(3), partial=True)
    with pytest.raises(ValueError):
        client.reduce("argmed", np.ones(3))
    # the daemon refuses unknown ops itself, with the list of those it has
    with pytest.raises(gpured.InvalidParams, match="argmin, argmax"):
        client.call("reduce", {"op": "argmed", "dtype": "f64", "data": b""})
    # still usable
    assert client.argmin(np.array([3, 1, 2], np.int64)) == (1, 1, 3)


def test_chunked(make_daemon):
    """Small chunks cut each request in many: the index is still global."""
    d = make_daemon("--chunk-bytes", "256K", "--staging-bytes", "2M", "--threads", "2")
    with gpured.Client(d.path, timeout=30) as c:
        for dtype in DTYPES:
            n = 3 * (256 << 10) // np.dtype(dtype).itemsize + 5
            for k in (0, 65535, 65536, n // 2, n - 1):
                a = np.full(n, 7, dtype)
                a[k] = 3
                a[(k + 40000) % n] = 3
                a[n - 1 - k] = 9
                for op in gpured.ARG_OPS:
                    check(c.reduce(op, a), op, a)
                r = c.empty(n, dtype)
                r[:] = a
                for op in gpured.ARG_OPS:
                    check(c.reduce(op, r), op, a)
            a = sample(dtype, n, seed=n)
            for op in gpured.ARG_OPS:
                check(c.reduce(op, a), op, a)
