"""Client.moments against exact references: mean and var against Python's
Fraction (the exact values, rounded once), sum, min and max against the
client's own sum, min and max; every dtype, the paths a request can take
(bin, region, pipelined, asyncio, chunked), adversarial data where NumPy's
var loses digits, specials, and the errors."""

import asyncio
import math
import struct

import numpy as np
import pytest

import gpured
import gpured.aio
from exact_sums import exact_sums
from samples import DTYPES, sample


def rounded(q):
    try:
        return q.numerator / q.denominator     # int / int: correctly rounded
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def exact(a, ddof):
    """(mean, var) of the finite array a, exactly, each rounded once."""
    a = a.ravel()
    n = len(a)
    s1, s2 = exact_sums(a)
    mean = rounded(s1 / n) if s1 else (-0.0 if a.dtype.kind == "f" and np.signbit(a).all() else 0.0)
    return mean, rounded((s2 - s1 * s1 / n) / (n - ddof))


def bits(x):
    return struct.pack("<d", x) if isinstance(x, float) else x


def same(a, b):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and bits(a) == bits(b)


def check(c, got, a, ddof=0):
    assert isinstance(got, gpured.Moments)
    assert got.count == a.size
    mean, var = exact(a, ddof)
    assert same(got.mean, mean), (a.dtype, got, mean)
    assert same(got.var, var), (a.dtype, got, var)
    for op in ("sum", "min", "max"):
        assert same(getattr(got, op), c.reduce(op, a)), (op, got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_against_fraction(client, dtype):
    for n in (1, 2, 3, 31, 1001, 32769):
        a = sample(dtype, n, seed=n)
        for ddof in sorted({0, 1, n - 1}):
            if ddof < n:
                check(client, client.moments(a, ddof=ddof), a, ddof)
    # all equal: var exactly 0
    e = np.full(1000, 3, dtype)
    got = client.moments(e)
    assert same(got.var, 0.0) and got.mean == 3.0


def test_where_numpy_cancels(client):
    """1e15 plus noise: the exact variance, where NumPy's two-pass var in
    double drifts; and f32 data, whose var NumPy takes in float32."""
    rng = np.random.default_rng(3)
    a = 1e15 + rng.standard_normal(10001)
    got = client.moments(a, ddof=1)
    check(client, got, a, 1)
    assert got.var != a.var(ddof=1)       # NumPy's rounds throughout
    b = (1e4 + rng.standard_normal(5001)).astype(np.float32)
    check(client, client.moments(b), b)
    # mixed magnitudes, subnormals, both zeros, near the overflow threshold
    for x in (rng.standard_normal(999) * 10.0 ** rng.integers(-300, 300, 999),
              rng.integers(-50, 50, 777) * 5e-324,
              np.array([0.0, -0.0, 0.0]),
              np.array([1.7e308, 1.6e308, 1.5e308]),
              np.array([-1.7e308, 1.7e308])):
        check(client, client.moments(x), x)
    # the sum overflows, the mean does not; the variance may
    got = client.moments(np.array([1e308, 1e308]))
    assert got.sum == math.inf and got.mean == 1e308 and got.var == 0.0
    assert client.moments(np.array([-1e308, 1e308])).var == math.inf
    assert same(client.moments(np.array([-0.0, -0.0])).mean, -0.0)


def test_specials(client):
    a = np.array([1.0, np.inf, 2.0])
    got = client.moments(a)
    assert got.sum == math.inf and got.mean == math.inf and math.isnan(got.var)
    a[0] = -np.inf
    got = client.moments(a)
    assert math.isnan(got.mean) and math.isnan(got.var) and got.min == -math.inf
    a[1] = np.nan
    got = client.moments(a.astype(np.float32))
    assert math.isnan(got.mean) and math.isnan(got.var) and math.isnan(got.sum)


def test_regions_equal_the_socket(client):
    n = 200003
    for dtype in DTYPES:
        a = sample(dtype, n, seed=11)
        r = client.empty(n, dtype)
        r[:] = a
        in_place = client.moments(r, ddof=1)
        assert in_place == client.moments(a, ddof=1)
        check(client, client.moments(r[1000:5001]), a[1000:5001])


def test_pipelined_and_reduce(client):
    arrays = [sample(DTYPES[k % 6], 1 + k * 13, seed=k) for k in range(100)]
    futs = [client.submit("moments", a, ddof=k % 2) for k, a in enumerate(arrays)]
    for k, (f, a) in enumerate(zip(futs, arrays)):
        if a.size > k % 2:
            check(client, f.result(), a, k % 2)
        else:
            with pytest.raises(gpured.InvalidParams):
                f.result()
    a = arrays[7]
    assert client.reduce("moments", a) == client.moments(a)


def test_asyncio(daemon):
    async def go():
        async with gpured.aio.Client(daemon.path) as c:
            a = sample("int64", 5000, seed=4)
            got = await c.moments(a, ddof=1)
            assert (got.mean, got.var) == exact(a, 1)
            futs = [await c.submit("moments", sample("float32", 100 + k, seed=k)) for k in range(20)]
            for k, f in enumerate(futs):
                got = await f
                assert (got.mean, got.var) == exact(sample("float32", 100 + k, seed=k), 0)
            with pytest.raises(ValueError):
                await c.submit("sum", a, ddof=1)

    asyncio.run(go())


def test_errors(client):
    for dtype in DTYPES:
        with pytest.raises(gpured.Empty):
            client.moments(np.empty(0, dtype))
    with pytest.raises(gpured.InvalidParams, match="ddof"):
        client.moments(np.ones(3), ddof=3)
    with pytest.raises(ValueError):
        client.moments(np.ones(3), ddof=-1)
    with pytest.raises(TypeError):
        client.moments(np.ones(3), ddof=1.5)
    with pytest.raises(ValueError):
        client.reduce("sum", np.ones(3), ddof=0)
    with pytest.raises(ValueError):
        client.reduce("moments", np.ones(3), partial=True)
    # the daemon checks ddof itself too
    with pytest.raises(gpured.InvalidParams, match="only for op moments"):
        client.call("reduce", {"op": "sum", "dtype": "f64", "ddof": 0, "data": b""})
    assert client.moments(np.array([1, 2, 3, 6], np.int32), ddof=1) == (4, 12, 1, 6, 3.0, 14 / 3)


def test_chunked(make_daemon):
    """Small chunks and two threads: the same bits as one pass, exact."""
    d = make_daemon("--chunk-bytes", "256K", "--staging-bytes", "2M", "--threads", "2")
    with gpured.Client(d.path, timeout=30) as c:
        for dtype in DTYPES:
            n = 3 * (256 << 10) // np.dtype(dtype).itemsize + 5
            a = sample(dtype, n, seed=n)
            got = c.moments(a, ddof=1)
            check(c, got, a, 1)
            r = c.empty(n, dtype)
            r[:] = a
            assert c.moments(r, ddof=1) == got
