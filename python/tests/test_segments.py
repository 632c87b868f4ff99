"""Segmented reduces (offsets=): every op and dtype against NumPy per
segment and, bit for bit, against each segment reduced alone; empty
segments; a 2-D array's rows; the offsets' forms and errors, the
daemon's; pipelined, asyncio, shared-memory regions, and as many segments
as the daemon takes."""

import asyncio
import math

import numpy as np
import pytest

import gpured
import gpured.aio
from samples import DTYPES, sample

OPS = ("sum", "min", "max", "sumsq", "argmin", "argmax", "moments")


def value_dtype(op, dtype):
    dt = np.dtype(dtype)
    if op == "sumsq" or dt.kind == "f":
        return np.dtype(np.float64)
    return np.dtype(np.int64 if dt.kind == "i" else np.uint64)


def same(a, b):
    """Equal arrays of one dtype, floats to the bit (any NaN for NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(np.uint64),
                                                                b[~nan].view(np.uint64))


def identity(op, dtype):
    """An empty segment's value (PROTOCOL.md, "Segments")."""
    dt = np.dtype(dtype)
    lo, hi = (math.inf, -math.inf) if dt.kind == "f" else (np.iinfo(dt).max, np.iinfo(dt).min)
    return {"sum": 0, "sumsq": 0.0, "min": lo, "max": hi, "argmin": lo, "argmax": hi}[op]


def random_offsets(rng, k, hi):
    lengths = rng.integers(1, hi, size=k)
    lengths[rng.random(k) < 0.15] = 0
    lengths[0] = lengths[-1] = 0
    return np.concatenate([[0], np.cumsum(lengths)])


def alone(c, op, seg, ddof):
    """What the segment reduced alone gives, as the segmented record."""
    if op == "moments":
        if seg.size == 0:
            return None
        m = c.moments(seg, ddof=ddof if seg.size > ddof else 0)
        return m._replace(var=m.var if seg.size > ddof else math.nan)
    if seg.size == 0:
        if op in ("argmin", "argmax"):
            return gpured.ArgResult(identity(op, seg.dtype), -1, 0)
        return identity(op, seg.dtype)
    return c.reduce(op, seg)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_each_segment_as_alone_and_as_numpy(client, op, dtype):
    rng = np.random.default_rng(OPS.index(op) * 10 + DTYPES.index(dtype))
    offs = random_offsets(rng, 30, 700)
    x = sample(dtype, int(offs[-1]), seed=len(offs))
    ddof = 1 if op == "moments" else None
    got = client.reduce(op, x, offsets=offs, ddof=ddof)
    vt = value_dtype(op, dtype)
    lengths = np.diff(offs)
    for i in range(len(offs) - 1):
        seg = x[offs[i]:offs[i + 1]]
        want = alone(client, op, seg, ddof)
        if op == "moments":
            assert got.count[i] == seg.size
            if want is None:
                assert got.sum[i] == 0 and np.isnan(got.mean[i]) and np.isnan(got.var[i])
                assert got.min[i] == identity("min", dtype) and got.max[i] == identity("max", dtype)
                continue
            for f in ("sum", "min", "max", "mean", "var"):
                assert same(getattr(got, f)[i:i + 1], np.array([getattr(want, f)], dtype=getattr(
                    got, f).dtype)), (i, f, got, want)
            assert math.isclose(got.mean[i], float(np.mean(seg, dtype=np.float64)), rel_tol=1e-9)
            if seg.size > 1:
                assert math.isclose(got.var[i], float(np.var(seg.astype(np.float64), ddof=1)),
                                    rel_tol=1e-9)
        elif op in ("argmin", "argmax"):
            assert got.value.dtype == vt and got.index.dtype == np.int64
            assert same(got.value[i:i + 1], np.array([want.value], dtype=vt)), (i, got, want)
            assert got.index[i] == want.index and got.count[i] == seg.size
            if seg.size:
                assert got.index[i] == (np.argmin(seg) if op == "argmin" else np.argmax(seg))
        elif op == "sumsq" and np.dtype(dtype).kind != "f":
            # integer squares are added in double, in blocks that need
            # not start where a request of the segment alone has them
            assert got.dtype == vt and math.isclose(got[i], want, rel_tol=1e-12), (i, got[i], want)
        else:
            assert got.dtype == vt and got.shape == (len(lengths),)
            assert same(got[i:i + 1], np.array([want], dtype=vt)), (i, got[i], want)
            if op in ("min", "max") and seg.size:
                assert got[i] == getattr(np, op)(seg)
            elif op == "sum" and vt.kind == "f":
                assert got[i] == math.fsum(seg.astype(np.float64).tolist())
            elif op == "sum" and seg.size:
                assert got[i] == seg.sum(dtype=vt)


def test_empty_segments_and_no_elements(client):
    for dtype in DTYPES:
        x = np.zeros(0, dtype)
        for op in ("sum", "sumsq", "min", "max"):
            got = client.reduce(op, x, offsets=[0, 0, 0])
            assert same(got, np.full(2, identity(op, dtype), value_dtype(op, dtype))), (op, got)
        for op in ("argmin", "argmax"):
            got = getattr(client, op)(x, offsets=np.zeros(4, np.int32))
            assert same(got.value, np.full(3, identity(op, dtype), value_dtype(op, dtype)))
            assert same(got.index, np.full(3, -1, np.int64)) and same(got.count, np.zeros(3, np.int64))
        m = client.moments(x, offsets=[0, 0])
        assert m.sum[0] == 0 and np.isnan(m.mean[0]) and np.isnan(m.var[0]) and m.count[0] == 0
    # empties first, between and last
    x = np.arange(10, dtype=np.int64)
    assert client.sum(x, offsets=[0, 0, 4, 4, 10, 10]).tolist() == [0, 6, 0, 39, 0]
    assert client.sum(x, offsets=[0, 10]).tolist() == [45]


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_of_a_matrix(client, dtype):
    rows, cols = 37, 129
    m = sample(dtype, rows * cols, seed=4).reshape(rows, cols)
    offs = np.arange(0, rows * cols + 1, cols)
    vt = value_dtype("sum", dtype)
    s = client.sum(m, offsets=offs)
    if vt.kind == "f":
        assert same(s, np.array([math.fsum(r.astype(np.float64).tolist()) for r in m]))
    else:
        assert same(s, m.sum(axis=1, dtype=vt))
    assert same(client.min(m, offsets=offs), m.min(axis=1).astype(vt))
    assert same(client.max(m, offsets=offs), m.max(axis=1).astype(vt))
    a = client.argmax(m, offsets=offs)
    assert same(a.index, m.argmax(axis=1).astype(np.int64))
    assert same(a.value, m.max(axis=1).astype(vt))
    assert same(a.count, np.full(rows, cols, np.int64))
    mo = client.moments(m, offsets=offs, ddof=1)
    f = m.astype(np.float64)
    assert np.allclose(mo.mean, f.mean(axis=1), rtol=1e-12)
    assert np.allclose(mo.var, f.var(axis=1, ddof=1), rtol=1e-9)
    # the offsets count C order, whatever the array's memory order
    assert same(client.sum(np.asfortranarray(m), offsets=offs), s)
    assert same(client.sum(m[:, ::-1], offsets=offs), s)
    # full=True: the values and the rows' lengths
    r = client.reduce("sum", m, offsets=offs, full=True)
    assert isinstance(r, gpured.Result) and same(r.value, s) and same(r.count, np.full(rows, cols))


def test_offsets_forms(client):
    x = np.arange(12, dtype=np.float32)
    want = client.sum(x, offsets=[0, 5, 12])
    assert same(want, np.array([10.0, 56.0]))
    for offs in ((0, 5, 12), np.array([0, 5, 12], np.int32),
                 np.array([0, 5, 12], np.uint64), np.array([0, 5, 12], ">i8"),
                 np.array([0, 5, 12], dtype=object), [np.int16(0), 5, np.uint8(12)]):
        assert same(client.sum(x, offsets=offs), want), offs
    assert same(client.sum(x, offsets=range(0, 13, 4)), np.array([6.0, 22.0, 38.0]))


def test_offsets_refused_here(client):
    x = np.arange(10, dtype=np.int32)
    for offs, exc, msg in (
            ([0.0, 10.0], TypeError, "integers"),
            ([True, False], TypeError, "integers"),
            (["0", "10"], TypeError, "integers"),
            ([[0, 10]], ValueError, "one-dimensional"),
            ([0], ValueError, "k >= 1"),
            ([], ValueError, "k >= 1"),
            ([1, 10], ValueError, "start at 0"),
            ([0, 6, 5, 10], ValueError, "must not decrease: offsets[1] is 6, offsets[2] 5"),
            ([0, 9], ValueError, "end at the array's 10 elements"),
            ([0, -1, 10], ValueError, "negative"),
            ([0, 2 ** 70], ValueError, "0..10")):
        with pytest.raises(exc, match=msg.replace("[", r"\[").replace("]", r"\]")):
            client.sum(x, offsets=offs)
    with pytest.raises(ValueError, match="partial"):
        client.reduce("sum", x.astype(np.float32), offsets=[0, 10], partial=True)
    with pytest.raises(ValueError, match="ddof"):
        client.sum(x, offsets=[0, 10], ddof=1)
    assert client.ping() == "pong"


def test_daemon_errors(client):
    x = np.arange(10, dtype=np.int32)
    with pytest.raises(gpured.InvalidParams, match="'ddof' is 10"):
        client.moments(x, offsets=[0, 4, 10], ddof=10)
    limit = client.info()["limits"]["max_segments"]
    with pytest.raises(gpured.TooLarge, match="over the limit of %d" % limit):
        client.sum(np.zeros(0, np.int32), offsets=np.zeros(limit + 2, np.uint64))
    assert client.sum(x, offsets=[0, 4, 10]).tolist() == [6, 39]


def test_pipelined(client):
    rng = np.random.default_rng(3)
    jobs = []
    for i in range(40):
        dtype = DTYPES[i % len(DTYPES)]
        op = OPS[i % len(OPS)]
        offs = random_offsets(rng, 20, 3000 if i % 5 == 0 else 50)
        x = sample(dtype, int(offs[-1]), seed=i)
        jobs.append((op, x, offs, client.submit(op, x, offsets=offs), client.submit("sum", x)))
    for op, x, offs, f, g in reversed(jobs):
        got = f.result()
        again = client.reduce(op, x, offsets=offs)
        for a, b in zip(got if isinstance(got, tuple) else [got],
                        again if isinstance(again, tuple) else [again]):
            assert same(a, b), op
        assert g.result() == client.sum(x)


def test_asyncio(daemon):
    x = sample("float64", 5000, seed=8)
    offs = [0, 1000, 1000, 5000]

    async def run():
        async with gpured.aio.Client(daemon.path) as c:
            s = await c.sum(x, offsets=offs)
            f = await c.submit("argmin", x, offsets=offs)
            m = await c.moments(x, offsets=np.array(offs), ddof=1)
            r = await c.reduce("max", x, offsets=offs, full=True)
            a = await c.empty(x.size, x.dtype)
            a[:] = x
            ra = await c.sum(a, offsets=offs)
            return s, await f, m, r, ra

    s, a, m, r, ra = asyncio.run(run())
    assert s[0] == math.fsum(x[:1000]) and s[1] == 0.0 and s[2] == math.fsum(x[1000:])
    assert same(ra, s)
    assert a.index.tolist() == [int(np.argmin(x[:1000])), -1, int(np.argmin(x[1000:]))]
    assert np.allclose(m.var[[0, 2]], [np.var(x[:1000], ddof=1), np.var(x[1000:], ddof=1)])
    assert same(r.value, np.array([x[:1000].max(), -math.inf, x[1000:].max()]))
    assert same(r.count, np.array([1000, 0, 4000]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_regions(client, dtype):
    rng = np.random.default_rng(21)
    offs = random_offsets(rng, 25, 4000)
    n = int(offs[-1])
    x = sample(dtype, n, seed=21)
    r = client.empty(n + 3, dtype)
    r[3:] = x
    view = r[3:]
    for op in OPS:
        a = client.reduce(op, view, offsets=offs)
        b = client.reduce(op, x, offsets=offs)
        for u, v in zip(a if isinstance(a, tuple) else [a], b if isinstance(b, tuple) else [b]):
            assert same(u, v), op
    # a 2-D region's rows, and a future of one
    m = client.zeros((50, 40), dtype)
    m[:] = sample(dtype, 2000, seed=2).reshape(50, 40)
    f = client.submit("max", m, offsets=np.arange(0, 2001, 40))
    assert same(f.result(), m.max(axis=1).astype(value_dtype("max", dtype)))


def test_as_many_segments_as_the_daemon_takes(client):
    k = client.info()["limits"]["max_segments"]
    rng = np.random.default_rng(12)
    lengths = rng.integers(0, 3, size=k)
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
    x = rng.integers(-1000, 1000, size=int(offs[-1])).astype(np.int32)
    # 80 MiB of moments records in one reply
    m = client.moments(x, offsets=offs)
    nz = lengths > 0
    want = np.full(k, np.iinfo(np.int32).min, np.int64)
    want[nz] = np.maximum.reduceat(x, offs[:-1][nz].astype(np.int64))
    assert same(m.max, want)
    sums = np.zeros(k, np.int64)
    sums[nz] = np.add.reduceat(x.astype(np.int64), offs[:-1][nz].astype(np.int64))
    assert same(m.sum, sums) and same(m.count, lengths.astype(np.int64))
