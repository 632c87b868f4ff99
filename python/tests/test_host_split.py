"""A CUDA daemon's split of host data (--host-data): every op gives the
same bits whichever engine reads each chunk (gpu alone, cpu alone, both),
on shared-memory regions of wide-range data with ties and signed zeros,
and of integers: sum, min, max, argmin, argmax, moments and float sums
of squares each take either engine (in `both`, each engine takes some);
and so do their segments, the GPUs pieces of whole segments.
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


def _key(v):
    """What a result's bits are: its arrays' bytes, whatever its shape."""
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, tuple):
        return tuple(_key(x) for x in v)
    return repr(v)


def _four(c, op, x, **kw):
    """op of x four times in flight, so that both engines have chunks at
    once: the answer (the same bits each time, as _key() has them) and the
    pieces each engine took (_pieces)."""
    p0 = _pieces(c)
    futs = [c.submit(op, x, **kw) for _ in range(4)]
    vals = [_key(f.result()) for f in futs]
    p1 = _pieces(c)
    assert all(v == vals[0] for v in vals), (op, vals)
    return vals[0], tuple(after - before for before, after in zip(p0, p1))


def _regions(path, arrays):
    """(client, array, the array's copy in a region of the daemon at
    path), each array in turn, the region gone before the next."""
    with gpured.Client(path, timeout=120) as c:
        for a in arrays:
            r = c.empty(a.shape, a.dtype)
            r[:] = a
            yield c, a, r
            del r


def _answers(path, arrays, jobs):
    out = []
    for c, a, r in _regions(path, arrays):
        row = []
        for op in OPS:
            val, jobs[a.dtype.name, op] = _four(c, op, r)
            row.append((op, val))
        out.append(row)
        del r
    return out


def _each_mode(make_daemon, answers, arrays, got):
    """gpu, cpu and both in turn: a daemon of that mode (four CPU
    workers), answers(path, arrays, jobs) into got[mode]; yields the mode
    and the pieces each engine took for each answer (jobs)."""
    for mode in ("gpu", "cpu", "both"):
        d = make_daemon("--threads", "4", "--host-data", mode)
        jobs = {}
        got[mode] = answers(d.path, arrays, jobs)
        d.stop()
        yield mode, jobs


def test_every_split_gives_the_same_bits(make_daemon):
    if BACKEND != "cuda":
        pytest.skip("the split of host data is a CUDA daemon's (GPURED_TEST_BACKEND=cuda)")
    arrays = [_data(np.float32, (40 << 20) // 4 + 7, 1), _data(np.float64, (40 << 20) // 8 + 3, 2),
              _data(np.int32, (24 << 20) // 4 + 1, 3), _data(np.int64, (24 << 20) // 8 + 5, 4)]
    got = {}
    for mode, jobs in _each_mode(make_daemon, _answers, arrays, got):
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


def _offsets(n, kind, seed):
    """k + 1 offsets over n elements: many short segments with empty ones
    among them, a few longer than any piece, or short ones about a long
    one (so that pieces cut for the GPUs meet segments they cannot end
    on)."""
    rng = np.random.default_rng(seed)
    if kind == "short":
        lens = rng.integers(0, 40000, n // 20000 + 1)
        lens[rng.integers(0, lens.size, lens.size // 4)] = 0
    elif kind == "long":
        lens = np.array([n // 3, 0, n // 3])
    else:
        lens = np.concatenate([rng.integers(0, 5000, 800), [n // 2], rng.integers(0, 5000, 800)])
    off = np.concatenate([[0], np.cumsum(lens)])
    off = off[off <= n]
    return np.concatenate([off, [n]]).astype(np.int64)


def _segment_answers(path, arrays, jobs):
    out = []
    for c, a, r in _regions(path, arrays):
        views = [(kind, r) for kind in ("short", "long", "mixed")]
        if a.dtype == np.float32:
            # elements off their own size's boundary: the CPU's
            m = a.size - 1
            views.append(("short", r.view(np.uint8)[2:2 + 4 * m].view(np.float32)))
        for kind, v in views:
            offs = _offsets(v.size, kind, v.size)
            for op in OPS:
                name = (a.dtype.name, kind, v.ctypes.data % v.itemsize, op)
                val, jobs[name] = _four(c, op, v, offsets=offs)
                out.append((name, val))
        del views, v, r
    return out


def test_segments_of_every_split_give_the_same_bits(make_daemon):
    """Segments of host regions: the GPUs take pieces of whole segments,
    the CPU the rest; every record has the same bits in every mode."""
    if BACKEND != "cuda":
        pytest.skip("the split of host data is a CUDA daemon's (GPURED_TEST_BACKEND=cuda)")
    rng = np.random.default_rng(9)
    arrays = [_data(np.float32, (40 << 20) // 4 + 7, 5), _data(np.float64, (40 << 20) // 8 + 3, 6),
              _data(np.int32, (24 << 20) // 4 + 1, 7), _data(np.int64, (24 << 20) // 8 + 5, 8),
              (rng.standard_normal((12 << 20) // 2 + 1) * 100).astype(np.float16),
              rng.integers(-128, 128, (12 << 20) + 3, dtype=np.int8),
              rng.integers(0, 1 << 16, (12 << 20) // 2 + 5, dtype=np.uint16)]
    got = {}
    for mode, jobs in _each_mode(make_daemon, _segment_answers, arrays, got):
        for (dt, kind, misaligned, op), (g, c) in jobs.items():
            what = (mode, dt, kind, misaligned, op, g, c)
            narrow = np.dtype(dt).itemsize < 4
            if (op == "sumsq" and not dt.startswith("float")) or misaligned:
                # records that follow the cuts, and elements off their
                # boundary: the CPU's, as always
                assert g == 0, what
            elif mode == "cpu":
                assert g == 0, what
                # (pieces no GPU would take are not the split's to count)
                assert c > 0 or kind != "short" or (op == "moments" and narrow), what
            elif kind == "short" and mode == "gpu" and not (op == "moments" and narrow):
                # (the GPUs' segments of narrow dtypes have no moments)
                assert g > 0, what
        if mode == "both":
            assert sum(c for _, c in jobs.values()) > 0, jobs
            assert sum(g for g, _ in jobs.values()) > 0, jobs
    assert got["gpu"] == got["cpu"] == got["both"]
