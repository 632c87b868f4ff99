"""A GPU array reduced again reuses its request (gpured._gpu_hits), and
only while that request still names the array's memory: the rules on a
stand-in for a tensor here, and on real PyTorch and CuPy arrays on a CUDA
daemon (GPURED_TEST_BACKEND=cuda), where each change that could make the
old request wrong is made and the answer checked."""

import gc
import math

import numpy as np
import pytest

import gpured
from gpured import _gpu_hits, _device

from conftest import BACKEND


class FakeTensor:
    """What the hits read of a PyTorch tensor."""

    def __init__(self, ptr, n, contiguous=True):
        self.ptr, self.n, self.contiguous = ptr, n, contiguous

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.n

    def is_contiguous(self):
        return self.contiguous


FakeTensor.__module__ = "torch.fake"


class Syncs:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


def _stored(x, gen=0):
    h = _gpu_hits.GpuHits()
    sync = Syncs()
    sp = _device.Span(x.ptr, x.n * 4, x.n, "f32", sync, x)
    h.store(x, sp, region=3, offset=64, gen=gen)
    return h, sync


CONVS = {op: (lambda res, _op=op: (_op, res)) for op in gpured._wire.OPS + gpured._wire.ARG_OPS}


def test_hit_is_the_full_ways_request():
    x = FakeTensor(0x7f0000001000, 1000)
    h, sync = _stored(x)
    tail, conv, fds, data, gpu = h.call("sum", x, 0, CONVS)
    assert tail == gpured._wire.region_reduce_tail("sum", "f32", 3, 64, 1000)
    assert fds is None and data is None and gpu
    assert conv(5.0) == ("sum", 5.0)
    assert sync.n == 1                      # waits for the array's stream every time
    assert h.call("argmax", x, 0, CONVS)[0] == \
        gpured._wire.region_reduce_tail("argmax", "f32", 3, 64, 1000)
    assert sync.n == 2


@pytest.mark.parametrize("change", ["ptr", "numel", "contiguous", "gen", "op", "other", "dead"])
def test_no_hit_once_the_request_may_be_wrong(change):
    x = FakeTensor(0x7f0000001000, 1000)
    h, sync = _stored(x)
    gen, op = 0, "sum"
    if change == "ptr":
        x.ptr += 4                          # set_() to other storage
    elif change == "numel":
        x.n = 999                           # resize_()
    elif change == "contiguous":
        x.contiguous = False                # t_(): argmax's index would change
    elif change == "gen":
        gen = 1                             # a mapping was dropped since
    elif change == "op":
        op = "moments"                      # takes a ddof: the full way
    elif change == "other":
        x = FakeTensor(x.ptr, x.n)          # another array at the same address
    elif change == "dead":
        del x
        gc.collect()
        x = FakeTensor(0x7f0000001000, 1000)
    assert h.call(op, x, gen, CONVS) is None
    assert sync.n == 0


def test_hits_are_bounded_and_cleared():
    h = _gpu_hits.GpuHits()
    xs = [FakeTensor(0x1000 * (i + 1), 10) for i in range(3 * _gpu_hits._MAX)]
    for x in xs:
        h.store(x, _device.Span(x.ptr, 40, 10, "f32", Syncs(), x), 1, 0, 0)
    assert len(h._hits) == _gpu_hits._MAX
    assert h.call("sum", xs[-1], 0, CONVS) is not None
    assert h.call("sum", xs[0], 0, CONVS) is None
    h.clear()
    assert h.call("sum", xs[-1], 0, CONVS) is None


def test_copies_and_host_arrays_are_not_stored():
    x = FakeTensor(0x1000, 10)
    h = _gpu_hits.GpuHits()
    copy = FakeTensor(0x2000, 10)
    h.store(x, _device.Span(0x2000, 40, 10, "f32", Syncs(), copy), 1, 0, 0)   # allow_copy's copy
    assert h.call("sum", x, 0, CONVS) is None
    a = np.arange(10.0)
    h.store(a, _device.Span(0, 80, 10, "f64", Syncs(), a), 1, 0, 0)
    assert not h._hits


def _gpu_client(make_daemon):
    if BACKEND != "cuda":
        pytest.skip("GPU arrays are read in place by a CUDA daemon (GPURED_TEST_BACKEND=cuda)")
    d = make_daemon("--threads", "2", "--allow-cuda-ipc", "yes")
    return gpured.Client(d.path, timeout=60)


def test_torch_hits_follow_the_tensor(make_daemon):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    with _gpu_client(make_daemon) as c:
        t = torch.arange(1 << 16, dtype=torch.float32, device="cuda")
        want = float((1 << 16) * ((1 << 16) - 1) // 2)
        for _ in range(3):
            assert c.sum(t) == want
        assert len(c._conn.proto.gpu_hits._hits) == 1
        # a kernel queued on another stream, current for the call
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(20):
                t.mul_(3).div_(3)
            t.add_(1)
            assert c.sum(t) == want + (1 << 16)
        torch.cuda.synchronize()
        # other storage in place, of the same and of another size
        t.set_(torch.full((1000,), 2.0, device="cuda"))
        assert c.sum(t) == 2000.0
        t.resize_(10)
        assert c.sum(t) == 20.0
        # transposed in place: argmax's index is of the new order
        m = torch.arange(12, dtype=torch.float32, device="cuda").view(3, 4)
        m[0, 3] = 100.0
        assert c.argmax(m).index == 3
        m.t_()
        assert c.argmax(m, allow_copy=True).index == 9
        # the tensor's mapping dropped (more allocations than the cache)
        u = torch.full((1 << 20,), 1.0, device="cuda")
        assert c.sum(u) == float(1 << 20)
        others = [torch.full((4 << 20,), float(i), device="cuda")
                  for i in range(2 * _device.MAX_MAPS)]
        for i, o in enumerate(others):
            assert c.max(o) == float(i)
        assert c.sum(u) == float(1 << 20)
        assert c.sumsq(u) == float(1 << 20)


def test_cupy_hits_follow_the_stream(make_daemon):
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device for cupy")
    except Exception as e:
        pytest.skip("cupy has no GPU: %s" % e)
    with _gpu_client(make_daemon) as c:
        x = cupy.arange(1 << 16, dtype=cupy.float64)
        want = math.fsum(range(1 << 16))
        assert c.sum(x) == want and c.sum(x) == want
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            x += 1
            assert c.sum(x) == want + (1 << 16)
        s.synchronize()
        assert c.sum(x) == want + (1 << 16)


def test_gpu_requests_spin_by_default(daemon):
    """Client's spin_us: None (the default) spins for answers to requests
    that read GPU memory only; a number is every request's spin."""
    with gpured.Client(daemon.path) as c:
        assert (c._conn.spin, c._conn.gpu_spin) == (0.0, 200e-6)
        # a request marked as reading GPU memory goes and is answered
        tail, conv, _f, _d = gpured._protocol.METHODS["ping"]
        assert c._conn.request(tail, conv, None, None, True).result(10) == "pong"
    for spin_us, want in ((0, 0.0), (50, 50e-6)):
        with gpured.Client(daemon.path, spin_us=spin_us) as c:
            assert (c._conn.spin, c._conn.gpu_spin) == (want, want)
    with pytest.raises(ValueError):
        gpured.Client(daemon.path, spin_us=-1)


def test_c_stream_sync_calls():
    """gpured._fast.stream_sync on stand-ins for the driver's calls: a
    query, a synchronize only when work is queued, and the context made
    current only where another one is."""
    import ctypes
    fast = pytest.importorskip("gpured._fast")
    calls = []
    state = {"ready": 0, "cur": 0x10}
    stream_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    out_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))

    def query(s):
        calls.append(("query", s or 0))
        return state["ready"]

    def sync(s):
        calls.append(("sync", s or 0))
        return 0

    def ctx_get(ret):
        ret[0] = state["cur"]
        return 0

    def ctx_push(c):
        calls.append(("push", c))
        return 0

    def ctx_pop(ret):
        calls.append(("pop",))
        return 0

    fns = [stream_fn(query), stream_fn(sync), out_fn(ctx_get), stream_fn(ctx_push),
           out_fn(ctx_pop)]
    try:
        fast.cuda_calls(*(ctypes.cast(f, ctypes.c_void_p).value for f in fns))
        assert fast.stream_sync(0x77) == 0 and calls == [("query", 0x77)]
        del calls[:]
        state["ready"] = 600                        # CUDA_ERROR_NOT_READY: wait
        assert fast.stream_sync(0x77, 0x10) == 0
        assert calls == [("query", 0x77), ("sync", 0x77)]
        del calls[:]
        assert fast.stream_sync(0, 0x20) == 0       # another context current
        assert calls == [("push", 0x20), ("query", 0), ("sync", 0), ("pop",)]
        del calls[:]
        state["ready"] = 700                        # an error comes back as it is
        assert fast.stream_sync(5) == 700 and calls == [("query", 5)]
        with pytest.raises(ValueError):
            fast.cuda_calls(0, 1, 2, 3, 4)
        with pytest.raises(TypeError):
            fast.stream_sync()
    finally:
        if _device._driver is not None:             # the real driver's again
            _device._c_stream_sync(_device._driver.lib)
