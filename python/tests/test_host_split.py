"""A CUDA daemon's split of host data (--host-data): every op gives the
same bits whichever engine reads each chunk (gpu alone, cpu alone, both),
on shared-memory regions of wide-range data with ties and signed zeros,
and of integers: sum, min, max, argmin, argmax, moments and float sums
of squares each take either engine (in `both`, each engine takes some).
Needs a CUDA daemon (GPURED_TEST_BACKEND=cuda); skips elsewhere."""

import numpy as np
import pytest

import gpured

from conftest import BACKEND

OPS = ("sum", "sumsq", "min", "max", "argmin", "argmax", "moments")


def _data(dt, n, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dt).kind == "f":
        a = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
        a = a.astype(dt)
        a[rng.integers(0, n, 64)] = 0.0
        a[rng.integers(0, n, 64)] = -0.0
        lo, hi = a.min(), a.max()
        a[rng.integers(0, n, 5)] = lo          # ties for argmin and argmax
        a[rng.integers(0, n, 5)] = hi
        return a
    info = np.iinfo(dt)
    return rng.integers(info.min // 2, info.max // 2, n, dtype=dt)


def _pieces(c):
    """Pieces of host data done so far: the GPUs' (every device's jobs) and
    the CPU's share of split data."""
    gpu = sum(d["jobs"] for d in c.info()["devices"])
    return gpu, c.stats()["host_data"]["cpu"]["jobs"]


def _answers(path, arrays, jobs):
    out = []
    with gpured.Client(path, timeout=120) as c:
        for a in arrays:
            r = c.empty(a.shape, a.dtype)
            r[:] = a
            row = []
            for op in OPS:
                # four in flight, so that both engines have chunks at once
                p0 = _pieces(c)
                futs = [c.submit(op, r) for _ in range(4)]
                vals = [f.result() for f in futs]
                p1 = _pieces(c)
                assert all(repr(v) == repr(vals[0]) for v in vals), (op, vals)
                row.append((op, repr(vals[0])))
                jobs[a.dtype.name, op] = tuple(y - x for x, y in zip(p0, p1))
            out.append(row)
            del r
    return out


def test_every_split_gives_the_same_bits(make_daemon):
    if BACKEND != "cuda":
        pytest.skip("the split of host data is a CUDA daemon's (GPURED_TEST_BACKEND=cuda)")
    arrays = [_data(np.float32, (40 << 20) // 4 + 7, 1), _data(np.float64, (40 << 20) // 8 + 3, 2),
              _data(np.int32, (24 << 20) // 4 + 1, 3), _data(np.int64, (24 << 20) // 8 + 5, 4)]
    got = {}
    for mode in ("gpu", "cpu", "both"):
        d = make_daemon("--threads", "4", "--host-data", mode)
        jobs = {}
        got[mode] = _answers(d.path, arrays, jobs)
        d.stop()
        # the GPUs take every op's pieces in `gpu`, none in `cpu`; in
        # `both` each engine takes some. (Integer sums of squares, whose
        # bits could differ, are not split: they keep the GPUs' route.)
        for (dt, op), (g, c) in jobs.items():
            if op == "sumsq" and not dt.startswith("float"):
                assert g > 0 and c == 0, (mode, dt, op, g, c)
            elif mode == "gpu":
                assert g > 0 and c == 0, (mode, dt, op, g, c)
            elif mode == "cpu":
                assert g == 0 and c > 0, (mode, dt, op, g, c)
        if mode == "both":
            assert sum(c for _, c in jobs.values()) > 0, jobs
            assert sum(g for (dt, op), (g, _) in jobs.items()
                       if op != "sumsq" or dt.startswith("float")) > 0, jobs
    assert got["gpu"] == got["cpu"] == got["both"]
