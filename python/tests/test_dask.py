"""gpured.dask on a distributed cluster of two worker processes, each with
a gpured of its own (as on two hosts): the result is the same bits for
every chunking and every set of workers, equal to one request over the
whole array and, for float64 sums, to math.fsum; each daemon reduces the
chunks of its own worker only."""

import math

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gpured  # noqa: E402
import gpured.dask  # noqa: E402
from conftest import Daemon  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:tornado")


class Cluster:
    def __init__(self):
        self.daemons = [Daemon("--threads", "1"), Daemon("--threads", "1")]
        spec = {
            "w%d" % i: {"cls": distributed.Nanny,
                        "options": {"nthreads": 1, "host": "127.0.0.1", "memory_limit": 0,
                                    "env": {"GPURED_SOCKET": d.path}}}
            for i, d in enumerate(self.daemons)}
        self.cluster = distributed.SpecCluster(
            workers=spec, silence_logs=40,
            scheduler={"cls": distributed.Scheduler,
                       "options": {"host": "127.0.0.1", "dashboard_address": ":0"}})
        self.client = distributed.Client(self.cluster)
        socks = self.client.run(lambda: __import__("os").environ.get("GPURED_SOCKET"))
        # The worker address that each daemon serves.
        self.workers = [next(w for w, p in socks.items() if p == d.path) for d in self.daemons]

    def elements(self):
        out = []
        for d in self.daemons:
            with gpured.Client(d.path, timeout=30) as c:
                out.append(c.stats()["elements"])
        return out

    def close(self):
        self.client.close()
        self.cluster.close()
        for d in self.daemons:
            d.stop()


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    yield c
    c.close()


def bits(v):
    return np.float64(v).tobytes()


def data(dtype, shape=(301, 333), seed=5):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-60, 60, shape)
        x.flat[::7] = -x.flat[1::7][: x.flat[::7].size]     # cancellation
        return x.astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -10**6), min(info.max, 10**6), shape).astype(dtype)


CHUNKINGS = [(301, 333), ((100, 201), (1, 332)), (37, 41), (1, 333)]


@pytest.mark.parametrize("op", ["sum", "sumsq"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_sums_same_bits_everywhere(cluster, daemon, op, dtype):
    x = data(dtype)
    with gpured.Client(daemon.path, timeout=30) as c:
        whole = c.reduce(op, x)
    seen = []
    for chunks in CHUNKINGS:
        for workers in ([cluster.workers[0]], [cluster.workers[1]], None):
            # a name of its own: the same graph again may be answered from
            # a result the cluster still holds, reduced on the other worker
            dx = da.from_array(x, chunks=chunks, name=False)
            before = cluster.elements()
            kw = {"workers": workers} if workers else {}
            got = gpured.dask.reduce(op, dx, **kw)
            moved = [a - b for a, b in zip(cluster.elements(), before)]
            assert bits(got) == bits(whole), (op, dtype, chunks, workers)
            if workers:
                i = cluster.workers.index(workers[0])
                assert moved[i] == x.size and moved[1 - i] == 0, moved
            else:
                assert builtin_sum(moved) == x.size
                seen.append(moved)
    # Both daemons served chunks when both workers could run them.
    assert any(m[0] and m[1] for m in seen), seen
    if op == "sum" and dtype == np.float64:
        assert got == math.fsum(x.ravel())


builtin_sum = sum


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64, np.float32])
def test_every_op(cluster, daemon, dtype):
    x = data(dtype, shape=(1000,), seed=9)
    dx = da.from_array(x, chunks=(1, 10, 300, 689))
    with gpured.Client(daemon.path, timeout=30) as c:
        for op in gpured.OPS:
            want = c.reduce(op, x)
            got = gpured.dask.reduce(op, dx)
            assert type(got) is type(want) and bits(got) == bits(want), (op, dtype)
    assert gpured.dask.min(dx) == x.min() and gpured.dask.max(dx) == x.max()


def test_int64_sum_wraps_as_one_request(cluster, daemon):
    x = np.full(64, 2**62, np.int64)
    dx = da.from_array(x, chunks=5)
    with gpured.Client(daemon.path, timeout=30) as c:
        assert gpured.dask.sum(dx) == c.sum(x) == 0


def test_nan_and_signed_zero(cluster):
    x = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    assert math.isnan(gpured.dask.sum(da.from_array(x, chunks=2)))
    assert math.isnan(gpured.dask.max(da.from_array(x, chunks=2)))
    z = da.from_array(np.array([-0.0] * 6), chunks=(1, 2, 3))
    s = gpured.dask.sum(z)
    assert s == 0 and math.copysign(1, s) < 0
    z = da.from_array(np.array([-0.0, -0.0, 0.0]), chunks=1)
    s = gpured.dask.sum(z)
    assert s == 0 and math.copysign(1, s) > 0
    assert math.copysign(1, gpured.dask.min(z)) < 0
    assert math.copysign(1, gpured.dask.max(z)) > 0
    inf = da.from_array(np.array([np.inf, 1.0, -np.inf]), chunks=1)
    assert math.isnan(gpured.dask.sum(inf))
    assert gpured.dask.sumsq(inf) == math.inf


def test_empty(cluster):
    e = da.from_array(np.empty((0, 3)), chunks=(1, 1))
    assert gpured.dask.sum(e) == 0.0
    assert gpured.dask.sum(da.from_array(np.empty(0, np.int32))) == 0
    with pytest.raises(gpured.Empty):
        gpured.dask.max(e)


def test_lazy(cluster):
    x = data(np.float64, shape=(5000,))
    d = gpured.dask.sum(da.from_array(x, chunks=999), compute=False)
    assert not isinstance(d, float)
    assert d.compute() == math.fsum(x)
    assert cluster.client.compute(d).result() == math.fsum(x)


def test_refused_before_any_task():
    with pytest.raises(TypeError):
        gpured.dask.sum(da.zeros(10, dtype=np.float16))
    with pytest.raises(ValueError):
        gpured.dask.reduce("mean", da.zeros(10))
