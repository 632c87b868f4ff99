"""Reductions in this process (gpured._local, libgpured's gpured_local_*)
against the daemon's answers for the same arrays, bit for bit: every op
and dtype, odd sizes, block edges, hostile values; gpured.dask's chunks
reduced in the worker against the same through the daemon; and the
switches (GPURED_LOCAL=0, local=True without the library)."""

import builtins
import math
from fractions import Fraction
import os
import subprocess
import sys

import numpy as np
import pytest

import gpured
from gpured import _local

pytestmark = pytest.mark.skipif(not _local.available(),
                                reason="no libgpured with local reductions (GPURED_LIBGPURED)")

DTYPES = [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64, np.float16,
          np.int8, np.uint8, np.int16, np.uint16, np.bool_]
SIZES = [1, 7, 32768, 32769, 3 * 32768 + 5]


def bits(v):
    return np.float64(v).tobytes() if isinstance(v, float) else v


def array(dtype, n, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-12 if dt.itemsize == 2 else -60,
                                                         12 if dt.itemsize == 2 else 60, n)
        m = n // 5
        x[:5 * m:5] = -x[1:5 * m:5]          # cancellation
        return x.astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -10**9), min(info.max, 10**9), n, endpoint=True).astype(dt)


def same_partial(a, b):
    """Two partials of one value: their exact values equal (the wire's
    limbs need not be canonical), the rest the same."""
    assert (a.op, a.dtype, a.count, a.specials) == (b.op, b.dtype, b.count, b.specials), (a, b)
    same(a.value, b.value)
    if a.limbs is None or b.limbs is None:
        assert a.limbs is None and b.limbs is None, (a, b)
    else:
        assert Fraction(a.limbs) * Fraction(2) ** a.scale == \
            Fraction(b.limbs) * Fraction(2) ** b.scale, (a, b)
    return True


def same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)), (a, b)
        return True
    assert type(a) is type(b) and bits(a) == bits(b), (a, b)
    return True


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_op_as_the_daemon(daemon, dtype):
    with gpured.Client(daemon.path, timeout=60) as c:
        for k, n in enumerate(SIZES):
            x = array(dtype, n, k)
            for op in ("sum", "min", "max", "sumsq", "argmin", "argmax"):
                for threads in (1, 3):
                    same(_local.reduce(op, x, threads), c.reduce(op, x))
            for op in ("sum", "sumsq", "min", "max"):
                same_partial(_local.partial(op, x), c.reduce(op, x, partial=True))
            ddof = 1 if n > 1 else 0
            same(tuple(_local.moments(x, ddof=ddof)), tuple(c.moments(x, ddof=ddof)))
            count, lo, hi, s1, s2 = _local.moments_parts(x, threads=2)
            assert count == n
            same(lo, c.reduce("min", x))
            same(hi, c.reduce("max", x))
            if np.dtype(dtype).kind == "f":
                same_partial(s1, c.reduce("sum", x, partial=True))
                same_partial(s2, c.reduce("sumsq", x, partial=True))
            else:
                ints = [int(v) for v in x.reshape(-1)]
                assert Fraction(s1.limbs) * Fraction(2) ** s1.scale == builtins.sum(ints)
                assert Fraction(s2.limbs) * Fraction(2) ** s2.scale == \
                    builtins.sum(v * v for v in ints)


def test_hostile(daemon):
    rng = np.random.default_rng(3)
    n = 4 * 32768 + 3
    every = (rng.standard_normal(n) * 2.0 ** rng.integers(-1070, 1020, n))
    every[1::2] = -every[:n - 1:2]
    every32 = (rng.standard_normal(n) * 2.0 ** rng.integers(-140, 120, n)).astype(np.float32)
    cases = [every, every32, np.full(n, -0.0), np.array([np.inf, -np.inf]),
             np.array([1.0, np.nan, -np.inf]), np.array([np.finfo(np.float64).max] * 3),
             np.zeros(0)]
    with gpured.Client(daemon.path, timeout=60) as c:
        for x in cases:
            for op in ("sum", "sumsq"):
                same_partial(_local.partial(op, x, threads=4), c.reduce(op, x, partial=True))
            if x.size:
                same(_local.reduce("argmax", x), c.reduce("argmax", x))
                same(tuple(_local.moments(x)), tuple(c.moments(x)))


def test_errors():
    with pytest.raises(gpured.Empty):
        _local.reduce("min", np.zeros(0))
    with pytest.raises(gpured.Empty):
        _local.moments(np.zeros(0, np.int32))
    with pytest.raises(gpured.InvalidParams):
        _local.moments(np.ones(3), ddof=3)
    with pytest.raises(TypeError):
        _local.reduce("sum", np.zeros(3, np.complex64))


def test_dask_local_as_daemon(daemon, monkeypatch):
    """gpured.dask with each chunk reduced in the worker gives the bits of
    each chunk reduced by the daemon, over several chunkings."""
    da = pytest.importorskip("dask.array")
    import dask
    import gpured.dask
    monkeypatch.setenv("GPURED_SOCKET", daemon.path)
    x = array(np.float64, 200003, 9) * 2.0 ** np.random.default_rng(1).integers(-300, 300, 200003)
    i = array(np.int64, 100001, 2)
    with dask.config.set(scheduler="threads"):
        for chunks in (200003, 33333, 4096):
            d = da.from_array(x, chunks=chunks)
            for op in ("sum", "sumsq", "min", "max"):
                same(gpured.dask.reduce(op, d, local=True), gpured.dask.reduce(op, d, local=False))
            same(gpured.dask.argmin(d, local=True), gpured.dask.argmin(d, local=False))
            same(tuple(gpured.dask.moments(d, ddof=1, local=True)),
                 tuple(gpured.dask.moments(d, ddof=1, local=False)))
            di = da.from_array(i, chunks=chunks // 2 + 1)
            same(tuple(gpured.dask.moments(di, local=True)), tuple(gpured.dask.moments(di, local=False)))
            same(gpured.dask.sum(di, local=True), gpured.dask.sum(di, local=False))
    assert math.isfinite(gpured.dask.sum(da.from_array(x, chunks=7777), local=True,
                                         scheduler="sync"))


def test_switched_off():
    """GPURED_LOCAL=0: not available, and local=True says why."""
    code = ("import numpy as np, dask.array as da, gpured.dask\n"
            "from gpured import _local\n"
            "assert not _local.available()\n"
            "try:\n"
            "    gpured.dask.sum(da.ones(10, chunks=5), local=True, scheduler='sync')\n"
            "except RuntimeError as e:\n"
            "    assert 'GPURED_LIBGPURED' in str(e), e\n"
            "else:\n"
            "    raise SystemExit('local=True went on')\n")
    pytest.importorskip("dask.array")
    env = dict(os.environ, GPURED_LOCAL="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
