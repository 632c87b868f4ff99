"""gpured.dask on a distributed cluster of two worker processes, each with
a gpured of its own (as on two hosts): the result (sums, min and max,
argmin and argmax, moments) is the same bits for every chunking and every
set of workers, equal to one request over the whole array and to exact
references (math.fsum, NumPy, Fractions); each daemon reduces the chunks
of its own worker only."""

import itertools
import math
import os
from fractions import Fraction

import numpy as np
import pytest

# What these check is gpured.dask, which is Python; the daemon's side of
# them is the partial and reduce requests that the other files send too.
# The sanitizer run (GPURED_SANITIZED: quickstart.sh test) is there for
# the daemon's C, so it leaves them to the main run.
if os.environ.get("GPURED_SANITIZED"):
    pytest.skip("gpured.dask is Python: the main run checks it", allow_module_level=True)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gpured  # noqa: E402
import gpured.dask  # noqa: E402
from dask.delayed import Delayed  # noqa: E402
from conftest import Daemon  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:tornado")


class Cluster:
    def __init__(self):
        self.daemons = [Daemon("--threads", "1"), Daemon("--threads", "1")]
        spec = {
            "w%d" % i: {"cls": distributed.Nanny,
                        "options": {"nthreads": 1, "host": "127.0.0.1", "memory_limit": 0,
                                    # the daemons' path (test_local.py has the other)
                                    "env": {"GPURED_SOCKET": d.path, "GPURED_LOCAL": "0"}}}
            for i, d in enumerate(self.daemons)}
        # The workers run gpured.dask and the client, Python, and no
        # MALLOC_PERTURB_ (meson test sets it, for the daemons): with it,
        # glibc filled the megabyte that msgpack allocates for every
        # message between them and the scheduler, on allocating it and on
        # freeing it, which took a third of these tests' time. The
        # variable is read when a process starts: it is changed here only
        # while the cluster starts its workers, after the daemons.
        perturb = os.environ.pop("MALLOC_PERTURB_", None)
        try:
            self.cluster = distributed.SpecCluster(
                workers=spec, silence_logs=40,
                scheduler={"cls": distributed.Scheduler,
                           "options": {"host": "127.0.0.1", "dashboard_address": ":0"}})
        finally:
            if perturb is not None:
                os.environ["MALLOC_PERTURB_"] = perturb
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
    for k, chunks in enumerate(CHUNKINGS):
        # each worker alone for one chunking; both for every chunking
        pinned = ([cluster.workers[0]], [cluster.workers[1]]) if k == 0 else ()
        for workers in pinned + (None,):
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
builtin_max = max


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
        gpured.dask.sum(da.zeros(10, dtype=np.complex64))
    with pytest.raises(ValueError):
        gpured.dask.reduce("mean", da.zeros(10))


# ---- argmin, argmax, moments ----

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64]
# one chunk, uneven ones, empty ones, chunks of one element
CHUNKINGS_1D = [120, (1, 10, 40, 69), 17, ((0, 50, 0, 70),), 1]


def same(got, want):
    """The same namedtuple with the same fields: types, and bits for
    floats."""
    assert type(got) is type(want), (got, want)
    for g, w in zip(got, want):
        assert type(g) is type(w), (got, want)
        assert (bits(g) == bits(w)) if isinstance(w, float) else g == w, (got, want)


def full_range(dtype, n, seed=3):
    """Integers over the whole dtype, the extremes among them (their sums
    wrap in 64 bits); floats over 60 binades."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(dtype)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    x[:3] = info.max, info.min, info.max
    return x


def few_values(dtype, n, seed=4):
    """Many ties, across chunks too."""
    return np.random.default_rng(seed).integers(0, 4, n).astype(dtype)


class Batch:
    """Graphs computed together, each with the check of its result: one
    dask.compute of many costs the scheduler's round trips once, not once
    a graph (each graph still runs its own tasks and requests)."""

    def __init__(self):
        self.graphs, self.checks = [], []

    def add(self, graph, check):
        self.graphs.append(graph)
        self.checks.append(check)

    def run(self):
        results = dask.compute(*self.graphs)
        assert len(results) == len(self.checks) > 0
        for check, got in zip(self.checks, results):
            check(got)


def check_arg(c, x, chunks, batch=None, **kw):
    """argmin and argmax of x chunked so are one request's over x (C
    order), and NumPy's where NumPy's rules are the daemon's; checked now,
    or when batch runs."""
    dx = da.from_array(x, chunks=chunks, name=False)
    for op in ("argmin", "argmax"):
        want = c.reduce(op, np.ascontiguousarray(x))

        def check(got, want=want):
            same(got, want)
            assert got.count == x.size

        if batch is None:
            check(getattr(gpured.dask, op)(dx, **kw))
        else:
            batch.add(getattr(gpured.dask, op)(dx, compute=False), check)
    return dx


def check_index(batch, op, x, chunks):
    """op's index over x chunked so is NumPy's, when batch runs."""
    ref = np.argmin if op == "argmin" else np.argmax

    def check(got):
        assert got.index == ref(x) and got.value == x.flat[got.index], (op, got)

    batch.add(getattr(gpured.dask, op)(da.from_array(x, chunks=chunks), compute=False), check)


@pytest.mark.parametrize("dtype", DTYPES)
def test_arg_same_as_one_request(cluster, daemon, dtype):
    b = Batch()
    with gpured.Client(daemon.path, timeout=30) as c:
        x = data(dtype)
        for chunks in CHUNKINGS[:3]:
            check_arg(c, x, chunks, b)
        # ties in chunks of one element: the 2-D case below
        for x, chunkings in ((full_range(dtype, 120), CHUNKINGS_1D),
                             (few_values(dtype, 120), CHUNKINGS_1D[:-1])):
            for chunks in chunkings:
                check_arg(c, x, chunks, b)
            for op in ("argmin", "argmax"):
                check_index(b, op, x, 37)
        x = few_values(dtype, (11, 7))
        for chunks in ((1, 1), (5, 7), (11, 2), (4, 3)):
            check_arg(c, x, chunks, b)
        for op in ("argmin", "argmax"):
            check_index(b, op, x, (4, 3))
        b.run()


def test_arg_adversarial(cluster, daemon):
    nan, inf = math.nan, math.inf
    grid = np.zeros((4, 6))
    grid[1, 0] = grid[0, 5] = -0.0
    nan_grid = np.ones((4, 6))
    nan_grid[1, 0] = nan_grid[0, 5] = nan_grid[3, 3] = nan
    cases = [
        # array, chunks, (argmin value, index), (argmax value, index)
        ([1, 2, 3, nan, 5, nan, 0], 3, (nan, 3), (nan, 3)),
        ([1, 2, 3, 0, 5, nan, nan], 1, (nan, 5), (nan, 5)),
        ([0.0, -0.0, -0.0, 0.0], 1, (-0.0, 1), (0.0, 0)),
        ([-0.0, -0.0, 0.0], 2, (-0.0, 0), (0.0, 2)),
        ([1, inf, inf, -inf, -inf], 2, (-inf, 3), (inf, 1)),
        ([7] * 10, 3, (7, 0), (7, 0)),
        # blocks (0, 0) then (0, 1), but (0, 5) is before (1, 0) in C order
        (grid, (2, 3), (-0.0, 5), (0.0, 0)),
        (nan_grid, (2, 3), (nan, 5), (nan, 5)),
        (nan_grid, (1, 1), (nan, 5), (nan, 5)),
    ]
    b = Batch()
    with gpured.Client(daemon.path, timeout=30) as c:
        for dtype in (np.float64, np.float32):
            for a, chunks, lo, hi in cases:
                x = np.array(a, dtype)
                dx = check_arg(c, x, chunks, b)
                for op, (v, i) in (("argmin", lo), ("argmax", hi)):
                    def check(got, op=op, v=v, i=i, a=a):
                        assert got.index == i and bits(got.value) == bits(v), (op, a, got)

                    b.add(getattr(gpured.dask, op)(dx, compute=False), check)
        for dtype in (np.int64, np.uint64, np.int32, np.uint32):
            info = np.iinfo(dtype)
            x = np.array([info.max - 1, info.max, info.min, info.max, info.min], dtype)
            dx = check_arg(c, x, 1, b)
            for op, want in (("argmin", (int(info.min), 2, 5)), ("argmax", (int(info.max), 1, 5))):
                def check(got, want=want):
                    assert got == want, (got, want)

                b.add(getattr(gpured.dask, op)(dx, compute=False), check)
        b.run()


def test_arg_orders_and_unknown_chunks(cluster, daemon):
    a = data(np.float64, shape=(30, 40))
    with gpured.Client(daemon.path, timeout=30) as c:
        # chunks of a Fortran-ordered array: still C order, as numpy's
        f = np.asfortranarray(a)
        for chunks in ((30, 40), (7, 40), (30, 9)):
            check_arg(c, f, chunks)
            assert gpured.dask.argmax(da.from_array(f, chunks=chunks)).index == np.argmax(a)
        # a 1-D array whose chunk sizes are known only once computed
        x = data(np.float64, shape=(1000,))
        dx = da.from_array(x, chunks=100)
        pos = dx[dx > 0]
        assert math.isnan(pos.chunks[0][0])
        same(gpured.dask.argmin(pos), c.argmin(x[x > 0]))
        same(gpured.dask.argmax(pos), c.argmax(x[x > 0]))
    d2 = da.from_array(a, chunks=(7, 8))
    rows = d2[d2[:, 0] > 0]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        gpured.dask.argmin(rows)
    rows.compute_chunk_sizes()
    assert gpured.dask.argmin(rows).index == np.argmin(a[a[:, 0] > 0])


def check_moments(c, x, chunks, ddof=0, batch=None, then=None, **kw):
    """moments of x chunked so are one request's over x; checked now (the
    result is returned), or when batch runs, and then by then(result)."""
    dx = da.from_array(x, chunks=chunks, name=False)
    want = c.moments(np.ascontiguousarray(x), ddof=ddof)

    def check(got):
        same(got, want)
        if then:
            then(got)

    if batch is not None:
        batch.add(gpured.dask.moments(dx, ddof=ddof, compute=False), check)
        return None
    got = gpured.dask.moments(dx, ddof=ddof, **kw)
    check(got)
    return got


def exact_moments(x, ddof=0):
    """The exact mean and variance of x's elements, as Fractions (finite
    elements only)."""
    vals = [Fraction(v) for v in x.ravel().tolist()]
    n = len(vals)
    s1 = builtin_sum(vals)
    s2 = builtin_sum(v * v for v in vals)
    return s1 / n, (s2 - s1 * s1 / n) / (n - ddof)


@pytest.mark.parametrize("dtype", DTYPES)
def test_moments_same_as_one_request(cluster, daemon, dtype):
    b = Batch()
    with gpured.Client(daemon.path, timeout=30) as c:
        x = data(dtype)
        for chunks, ddof in zip(CHUNKINGS[:3], (0, 1, 7)):
            check_moments(c, x, chunks, ddof, b)
        x = full_range(dtype, 120)
        for chunks, ddof in itertools.product(CHUNKINGS_1D, (0, 1)):
            mean, var = exact_moments(x, ddof)

            def exact(got, mean=mean, var=var):
                assert got.count == x.size
                assert bits(got.mean) == bits(float(mean)) and bits(got.var) == bits(float(var))
                assert got.min == x.min() and got.max == x.max()
                if dtype in (np.float32, np.float64):
                    assert bits(got.sum) == bits(math.fsum(x.tolist()))
                else:
                    assert got.sum == int(x.sum())      # in 64 bits, wrapping

            check_moments(c, x, chunks, ddof, b, exact)
        b.run()


def test_moments_adversarial(cluster, daemon):
    nan, inf = math.nan, math.inf
    tiny = 5e-324
    cases = [
        # array, chunks, ddof, expected (sum, mean, var) or None
        ([1e15 - 0.5, 1e15 + 0.5] * 500, 37, 0, (1e18, 1e15, 0.25)),
        ([1.0, 2.0, 3.0, nan, 5.0], 2, 0, (nan, nan, nan)),
        ([1.0, 2.0, 3.0, 4.0, nan], 1, 1, (nan, nan, nan)),
        ([1.0, inf, 2.0], 1, 0, (inf, inf, nan)),
        ([-inf, 1.0, 2.0], 2, 0, (-inf, -inf, nan)),
        ([inf, 1.0, -inf], 1, 0, (nan, nan, nan)),
        ([-0.0] * 5, 2, 0, (-0.0, -0.0, 0.0)),
        ([-0.0, 0.0, -0.0], 1, 0, (0.0, 0.0, 0.0)),
        ([1e308, 1e308], 1, 0, (inf, 1e308, 0.0)),
        ([-1e308, 1e308], 1, 0, (0.0, 0.0, inf)),
        ([-1e308, 1e308], 1, 1, (0.0, 0.0, inf)),
        ([tiny, tiny, 0.0], 1, 0, (2 * tiny, tiny, 0.0)),
        # the mean rounds to a zero from below: as one request's
        ([-tiny, 0.0, 0.0], 1, 0, (-tiny, None, 0.0)),
        ([3.3] * 7, 3, 1, (3.3 * 7, 3.3, 0.0)),
    ]
    with gpured.Client(daemon.path, timeout=30) as c:
        for a, chunks, ddof, want in cases:
            for dtype in (np.float64, np.float32):
                if dtype == np.float32 and builtin_max(map(abs, a)) > 3e38:
                    continue
                x = np.array(a, dtype)
                got = check_moments(c, x, chunks, ddof)
                if dtype == np.float64:
                    for g, w in zip((got.sum, got.mean, got.var), want):
                        assert w is None or bits(g) == bits(w), (a, got)
        # a large offset plus noise: the variance has no cancellation
        rng = np.random.default_rng(11)
        for dtype, off in ((np.float64, 1e15), (np.float32, 1e7)):
            x = (off + rng.standard_normal(120)).astype(dtype)
            mean, var = exact_moments(x, 1)
            for chunks in (120, 1, 33):
                got = check_moments(c, x, chunks, 1)
                assert bits(got.var) == bits(float(var)) and bits(got.mean) == bits(float(mean))
        # integer sums wrap as one request's; mean and var are exact
        big = np.array([2**63 - 1, 2**63 - 1, 1], np.int64)
        got = check_moments(c, big, 1)
        assert got.sum == -1 and got.mean == float(Fraction(2**64 - 1, 3))
        u = np.full(3, 2**64 - 1, np.uint64)
        got = check_moments(c, u, 2)
        assert got.sum == 2**64 - 3 and got.mean == 2.0**64 and got.var == 0.0
        # PROTOCOL.md's worked example
        got = check_moments(c, np.array([1, 2, 3, 6], np.int32), 1, 1)
        assert got == (4, 12, 1, 6, 3.0, 4.666666666666667)


@pytest.mark.filterwarnings("ignore:Running on a single-machine scheduler")
def test_moments_int_in_blocks(daemon, monkeypatch):
    """An integer chunk longer than one block of float64 copies: the
    same bits as one request."""
    monkeypatch.setattr(gpured.dask, "_INT_BLOCK", 7)
    monkeypatch.setenv("GPURED_SOCKET", daemon.path)
    with gpured.Client(daemon.path, timeout=30) as c:
        for dtype in (np.int32, np.uint32, np.int64, np.uint64):
            x = full_range(dtype, 100)
            for chunks in (100, 30, 7):
                check_moments(c, x, chunks, 1, scheduler="sync")


def test_new_ops_errors(cluster, daemon):
    e = da.from_array(np.empty((0, 3)), chunks=(1, 1))
    for f in (gpured.dask.argmin, gpured.dask.argmax, gpured.dask.moments):
        with pytest.raises(gpured.Empty):
            f(e)
        with pytest.raises(gpured.Empty):
            f(da.from_array(np.empty(0, np.int64)))
        with pytest.raises(TypeError):
            f(da.zeros(10, dtype=np.complex64), compute=False)
    with pytest.raises(gpured.Empty):
        gpured.dask.moments(e, ddof=5)
    x = np.arange(5.0)
    dx = da.from_array(x, chunks=2)
    with gpured.Client(daemon.path, timeout=30) as c:
        for ddof in (5, 6):
            with pytest.raises(gpured.InvalidParams) as one:
                c.moments(x, ddof=ddof)
            with pytest.raises(gpured.InvalidParams) as ours:
                gpured.dask.moments(dx, ddof=ddof)
            assert ours.value.message == one.value.message
        same(gpured.dask.moments(dx, ddof=4), c.moments(x, ddof=4))
    # refused before any task
    with pytest.raises(ValueError):
        gpured.dask.moments(dx, ddof=-1, compute=False)
    with pytest.raises(TypeError):
        gpured.dask.moments(dx, ddof=1.5, compute=False)


def test_new_ops_lazy_and_workers(cluster, daemon):
    x = data(np.float64, shape=(5000,))
    dx = da.from_array(x, chunks=999, name=False)
    with gpured.Client(daemon.path, timeout=30) as c:
        for op, want in (("argmin", c.argmin(x)), ("argmax", c.argmax(x)),
                         ("moments", c.moments(x))):
            d = getattr(gpured.dask, op)(dx, compute=False)
            assert isinstance(d, Delayed)
            # one task per chunk and one that joins them
            ours = [k for k in d.dask
                    if (k[0] if isinstance(k, tuple) else k).startswith("gpured-")]
            assert len(ours) == dx.npartitions + 1, ours
            same(d.compute(), want)
            same(cluster.client.compute(d).result(), want)
            for i, w in enumerate(cluster.workers):
                fresh = da.from_array(x, chunks=999, name=False)
                before = cluster.elements()
                same(getattr(gpured.dask, op)(fresh, workers=[w]), want)
                moved = [a - b for a, b in zip(cluster.elements(), before)]
                assert moved[i] >= x.size and moved[1 - i] == 0, moved


# ---- the dtypes of 16 bits or fewer ----

SMALL_DTYPES = [np.float16, np.int8, np.uint8, np.int16, np.uint16, np.bool_]
SMALL_CHUNKINGS = [(37, 29), (19, 10), ((1, 36), (3, 26))]


def small_data(dtype, shape=(37, 29), seed=6):
    """Every finite value a float dtype has a chance of (from random bits:
    subnormals, -0, both ends), cancellation among them; integers over the
    whole dtype; bools."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.4
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    bits = rng.integers(0, 1 << (8 * dt.itemsize), shape).astype("u%d" % dt.itemsize)
    x = bits.view(dt)
    with np.errstate(invalid="ignore"):
        x[~np.isfinite(x.astype(np.float32))] = -0.0
    x.flat[::7] = -x.flat[1::7][: x.flat[::7].size]
    return x


def check_small(c, b, dtype):
    """Every op of small_data(dtype) in every chunking, into batch b, and
    a sum in many chunks now: the bits of one request, and the exact sum."""
    def value(want, op):
        def check(got):
            assert type(got) is type(want), (op, got, want)
            assert bits(got) == bits(want), (op, got, want)
        return check

    x = small_data(dtype)
    for chunks in SMALL_CHUNKINGS:
        dx = da.from_array(x, chunks=chunks, name=False)
        for op in gpured.OPS:
            b.add(gpured.dask.reduce(op, dx, compute=False), value(c.reduce(op, x), op))
        check_arg(c, x, chunks, b)
        check_moments(c, x, chunks, 1, b)
    got = gpured.dask.sum(da.from_array(x, chunks=(4, 29)))
    if np.dtype(dtype).kind in "iub":
        assert got == int(x.sum(dtype=np.int64))
    else:
        assert bits(got) == bits(math.fsum(x.astype(np.float64).ravel().tolist()))


def test_small_dtypes_same_bits_every_chunking(cluster, daemon):
    b = Batch()
    with gpured.Client(daemon.path, timeout=30) as c:
        for dtype in SMALL_DTYPES:
            check_small(c, b, dtype)
        b.run()


def test_ml_dtypes_every_chunking(daemon, monkeypatch):
    """ml_dtypes' arrays, in this process (the distributed of some
    systems cannot ship their float8 arrays to a worker)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    monkeypatch.setenv("GPURED_SOCKET", daemon.path)
    b = Batch()
    with dask.config.set(scheduler="sync"), gpured.Client(daemon.path, timeout=30) as c:
        for dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
            check_small(c, b, dtype)
        b.run()
