"""Arrays in shared-memory regions (Client.empty/zeros): reduced in place,
unmapped when the last view is gone or the client closes."""

import gc
import time

import numpy as np
import pytest

import gpured

DTYPES = ["int32", "int64", "uint32", "uint64", "float32", "float64"]


def regions_or_skip(c):
    try:
        a = c.empty(1, np.int32)
    except gpured.UnknownMethod:
        pytest.skip("this gpured does not know 'map' yet")
    del a
    gc.collect()


@pytest.fixture
def rc(client):
    regions_or_skip(client)
    return client


def counters(c):
    s = c.stats()
    return s["bytes_in"], s["bytes_shm"], s["regions"]


def settle(c, want_regions, timeout=5.0):
    """Collect garbage and wait until the daemon has want_regions mapped
    (unmaps are sent by the next request on the connection)."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        n = c.stats()["regions"]
        if n == want_regions or time.monotonic() > deadline:
            return n
        time.sleep(0.01)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_op_in_place(rc, dtype):
    a = rc.empty(10_000, dtype)
    assert isinstance(a, np.ndarray) and a.dtype == np.dtype(dtype) and a.shape == (10_000,)
    rng = np.random.default_rng(3)
    a[:] = (rng.standard_normal(a.size) * 100).astype(dtype) if a.dtype.kind == "f" \
        else rng.integers(0, 1000, a.size).astype(dtype)
    copy = a.copy()
    for op in ("sum", "min", "max", "sumsq"):
        before = counters(rc)
        got = rc.reduce(op, a, full=True)
        after = counters(rc)
        # Bit for bit what the same elements sent as data give.
        assert got == rc.reduce(op, copy, full=True)
        assert after[1] - before[1] >= a.nbytes            # read in place ...
        assert after[0] - before[0] < 1000                 # ... not sent


def test_views_slices_and_shapes(rc):
    a = rc.zeros((64, 100), np.float64)
    assert not a.any()
    a[:] = np.arange(a.size).reshape(a.shape)
    before = counters(rc)
    assert rc.sum(a) == float(np.arange(6400).sum())
    assert rc.sum(a[10:20]) == float(a[10:20].sum())           # a contiguous slice
    assert rc.sum(a.T) == float(a.sum())                       # F-contiguous view
    assert rc.max(a.reshape(-1)[1:-1]) == 6398.0               # any offset
    ints = a.view(np.int64)                                    # another dtype, same bytes
    assert rc.reduce("max", ints) == int(ints.max())
    after = counters(rc)
    assert after[0] - before[0] < 2000
    assert after[1] - before[1] >= a.nbytes * 3
    # Not contiguous: copied and sent as data, still right.
    before = counters(rc)
    assert rc.sum(a[:, ::2]) == float(a[:, ::2].sum())
    assert counters(rc)[0] - before[0] >= a.nbytes // 2


def test_write_then_reduce_again(rc):
    a = rc.zeros(1000, np.int32)
    assert rc.sum(a) == 0
    a[:] = 2
    assert rc.sum(a) == 2000
    a[500:] = -1
    assert rc.reduce("sum", a[400:], full=True) == (100 * 2 - 500, 600)


def test_empty_shapes(rc):
    a = rc.empty((0, 3), np.float32)
    assert a.size == 0
    assert rc.sum(a) == 0.0
    with pytest.raises(gpured.Empty):
        rc.min(a)


def test_unmapped_when_collected(rc):
    assert settle(rc, 0) == 0
    a = rc.empty(4096, np.uint64)
    a[:] = 1
    view = a[100:200]
    assert rc.stats()["regions"] == 1
    del a
    assert settle(rc, 1, timeout=0.2) == 1         # the view keeps it mapped
    assert rc.sum(view) == 100
    del view
    assert settle(rc, 0) == 0


def test_many_regions_in_turn(make_daemon):
    d = make_daemon("--max-regions", "4")
    with gpured.Client(d.path, timeout=10) as c:
        regions_or_skip(c)
        for i in range(40):
            a = c.zeros(1000, np.int64)
            a[:] = i
            assert c.sum(a) == 1000 * i
        del a
        assert settle(c, 0) == 0


def test_limits(make_daemon):
    d = make_daemon("--max-regions", "2", "--max-mapped-bytes", "1M")
    with gpured.Client(d.path, timeout=10) as c:
        regions_or_skip(c)
        settle(c, 0)
        a = c.empty(1000, np.int32)
        b = c.empty(1000, np.int32)
        with pytest.raises(gpured.InvalidParams):
            c.empty(10, np.int32)
        del a, b
        settle(c, 0)
        with pytest.raises(gpured.TooLarge):
            c.empty(1 << 20, np.int32)            # 4 MiB
        assert c.ping() == "pong"


def test_close_releases(daemon):
    with gpured.Client(daemon.path, timeout=10) as witness:
        c = gpured.Client(daemon.path, timeout=10)
        regions_or_skip(c)
        base = settle(witness, witness.stats()["regions"])
        a = c.zeros(1 << 16, np.float32)
        a[:] = 0.5
        assert c.sum(a) == 1 << 15
        assert witness.stats()["regions"] == base + 1
        c.close()
        assert settle(witness, base) == base
        assert float(a.sum()) == 1 << 15            # still ours to use
        with pytest.raises(gpured.ConnectionError):
            c.sum(a)


def test_region_of_another_connection_is_sent_as_data(rc, daemon):
    a = rc.zeros(1000, np.int64)
    a[:] = 3
    with gpured.Client(daemon.path, timeout=10) as other:
        before = counters(other)
        assert other.sum(a) == 3000
        assert counters(other)[0] - before[0] >= a.nbytes


def test_bad_dtype_region(rc):
    with pytest.raises(TypeError):
        rc.empty(10, np.complex64)
    with pytest.raises(ValueError):
        rc.empty((-1,), np.int32)
