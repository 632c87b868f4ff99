"""A CUDA daemon's split of host data (--host-data): every op gives the
same bits whichever engine reads each chunk (gpu alone, cpu alone, both),
on shared-memory regions of wide-range data with ties and signed zeros:
sum, sumsq, min and max take either engine; argmin, argmax and moments
of host data keep the CPU route in every mode. Needs a CUDA daemon
(GPURED_TEST_BACKEND=cuda); skips elsewhere."""

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


def _answers(path, arrays):
    out = []
    with gpured.Client(path, timeout=120) as c:
        for a in arrays:
            r = c.empty(a.shape, a.dtype)
            r[:] = a
            row = []
            for op in OPS:
                if op == "moments" and a.dtype.kind != "f":
                    continue
                # four in flight, so that both engines have chunks at once
                futs = [c.submit(op, r) for _ in range(4)]
                vals = [f.result() for f in futs]
                assert all(repr(v) == repr(vals[0]) for v in vals), (op, vals)
                row.append((op, repr(vals[0])))
            out.append(row)
            del r
        split = c.stats().get("host_data", {})
    return out, split


def test_every_split_gives_the_same_bits(make_daemon):
    if BACKEND != "cuda":
        pytest.skip("the split of host data is a CUDA daemon's (GPURED_TEST_BACKEND=cuda)")
    arrays = [_data(np.float32, (40 << 20) // 4 + 7, 1), _data(np.float64, (40 << 20) // 8 + 3, 2),
              _data(np.int32, (24 << 20) // 4 + 1, 3)]
    got = {}
    for mode in ("gpu", "cpu", "both"):
        d = make_daemon("--threads", "4", "--host-data", mode)
        got[mode], split = _answers(d.path, arrays)
        d.stop()
        if mode == "both":
            assert split["gpu"]["jobs"] > 0 and split["cpu"]["jobs"] > 0, split
    assert got["gpu"] == got["cpu"] == got["both"]
