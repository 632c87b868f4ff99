"""Prefix sums of arrays in GPU memory (Client.cumsum, submit("cumsum"),
gpured.aio): scanned by the daemon's GPU where they lie, into GPU memory
of the same device.

Without a GPU: the client's side against stand-ins (arrays with
``__cuda_array_interface__`` over host memory, allocations and a driver
that never touch CUDA): the mapping cache's writable entries, the request,
every bad ``out``, a daemon that will not map GPU memory, and the copy
through the host that ``allow_copy=True`` makes then.

With PyTorch or CuPy, a GPU and a CUDA daemon (GPURED_TEST_BACKEND=cuda):
every dtype at sizes 1, 4097 and 2**20 + 3, out given and made, in place
for 8-byte dtypes, against numpy.cumsum (integers exactly, floats within
1e-12 of the running sum of magnitudes); an allocation mapped read-only,
then writable; the producing stream synchronised; the errors."""

import asyncio
import ctypes
import os

import msgpack
import numpy as np
import pytest

import gpured
import gpured.aio
from gpured import _cumsum, _device
from conftest import BACKEND
from samples import DTYPES, sample
from test_cumsum import WIDE, check
from test_gpu_arrays import _cupy, _gpu_daemon, _regions, _torch_cuda

SIZES = (1, 4097, (1 << 20) + 3)


# ---- stand-ins: no CUDA anywhere ---------------------------------------

class HostCuda:
    """Host memory that says it is CUDA memory (``__cuda_array_interface__``),
    on device ``dev``; ``get()`` copies it out, as CuPy's does."""

    def __init__(self, host, dev="GPU-fake-0", strides=None):
        self.host, self.dev, self.strides = host, dev, strides

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.host.shape, "typestr": self.host.dtype.str,
                "data": (self.host.ctypes.data, False), "strides": self.strides,
                "version": 3}

    def get(self):
        return self.host.copy()


class FakeAllocation:
    """An allocation of its own for each array, on the array's device; its
    map request names kind cuda and a memfd, which no daemon maps."""

    maps = []           # the writable flag of each map request, in order

    def __init__(self, sp):
        self.key = ("fake", id(sp.owner.host))
        self.base, self.size, self.device = sp.ptr, max(sp.nbytes, 1), sp.owner.dev
        self.vmm = True

    def map_params(self, writable=False):
        FakeAllocation.maps.append(writable)
        fd = os.memfd_create("fake-gpu", os.MFD_CLOEXEC)
        os.ftruncate(fd, self.size)
        params = {"kind": "cuda", "bytes": self.size, "device": self.device}
        if writable:
            params["writable"] = True
        return params, fd


class FakeDriver:
    """Copies "to the device" with memmove: the stand-ins are host memory."""

    def copy_to_device(self, ptr, a):
        ctypes.memmove(ptr, a.ctypes.data, a.nbytes)

    def ctx_synchronize(self, ptr):
        pass


@pytest.fixture
def fake_gpu(monkeypatch):
    FakeAllocation.maps = []
    monkeypatch.setattr(_device, "allocation", lambda sp, allow_copy: FakeAllocation(sp))
    monkeypatch.setattr(_device, "driver", FakeDriver)
    return FakeAllocation.maps


def test_maps_writable_beside_read_only():
    """An allocation mapped read-only and later writable keeps both; a
    read takes the writable one, a write never the read-only one."""
    x = HostCuda(np.zeros(4))
    sp = _device.span(x, False)
    a = FakeAllocation(sp)
    m = _device.DeviceMaps()
    assert m.lookup(a) is None and m.lookup(a, True) is None
    assert m.store(a, {"region": 1}) == ((1, a.base), [])
    assert m.lookup(a) == (1, a.base) and m.lookup(a, True) is None
    assert m.store(a, {"region": 2}, True) == ((2, a.base), [])
    assert m.lookup(a) == (2, a.base) and m.lookup(a, True) == (2, a.base)
    # another thread mapped it meanwhile: this one goes again
    assert m.store(a, {"region": 3}, True) == ((2, a.base), [3])
    assert len(m) == 2
    # both count against the cache's bound, the oldest going first
    arrays = [HostCuda(np.zeros(1)) for _ in range(_device.MAX_MAPS - 1)]
    others = [FakeAllocation(_device.span(y, False)) for y in arrays]
    unmapped = [u for i, o in enumerate(others) for u in m.store(o, {"region": 10 + i})[1]]
    assert unmapped == [1] and m.lookup(a) == (2, a.base)


def test_request(fake_gpu):
    x, out = HostCuda(np.arange(5, dtype=np.int32)), HostCuda(np.zeros(5, np.int64))
    plan = _cumsum.device_plan(x, out, False)
    req = plan.request((3, 8), (4, 16))
    msg = msgpack.unpackb(b"\x94\x00\xce\x00\x00\x00\x01" + req.tail)
    assert msg == [0, 1, "reduce", [{"op": "cumsum", "dtype": "i32", "region": 3, "offset": 8,
                                     "count": 5, "out_region": 4, "out_offset": 16}]]
    assert req.conv({"count": 5}) is out
    with pytest.raises(ValueError):
        req.conv({"count": 4})
    assert fake_gpu == []           # nothing mapped by a plan


def test_bad_out(client, fake_gpu):
    """Refused before anything is sent."""
    x = HostCuda(np.arange(10, dtype=np.float32))
    with pytest.raises(TypeError, match="out must be a GPU array"):
        client.cumsum(x, out=np.empty(10))
    with pytest.raises(TypeError, match="pass out="):
        client.cumsum(x)
    with pytest.raises(TypeError, match="float64 for the prefix sums of float32, not int64"):
        client.cumsum(x, out=HostCuda(np.empty(10, np.int64)))
    with pytest.raises(ValueError, match="10 elements of x, not 11"):
        client.cumsum(x, out=HostCuda(np.empty(11)))
    with pytest.raises(ValueError, match="contiguous"):
        client.cumsum(x, out=HostCuda(np.empty(20)[::2], strides=(16,)))
    with pytest.raises(TypeError, match="int64, uint64 or float64"):
        client.cumsum(x, out=HostCuda(np.empty(10, np.complex64)))
    with pytest.raises(TypeError, match="float64 for the prefix sums of float32, not int16"):
        client.cumsum(x, out=HostCuda(np.empty(10, np.int16)))
    with pytest.raises(ValueError, match="same device"):
        client.cumsum(x, out=HostCuda(np.empty(10), dev="GPU-fake-1"))
    assert fake_gpu == []
    assert client.ping() == "pong"


def test_daemon_will_not_map(client, fake_gpu):
    """A daemon that maps no such memory (the CPU backend, or a GPU it
    does not have): invalid_params saying what to do; with allow_copy,
    through the host and into out."""
    host = sample("float32", 5000, seed=3)
    x, out = HostCuda(host), HostCuda(np.full(5000, 7.0))
    with pytest.raises(gpured.InvalidParams, match="allow_copy=True"):
        client.cumsum(x, out=out)
    assert fake_gpu == [True]       # out first, writable
    assert (out.host == 7).all()
    assert client.cumsum(x, out=out, allow_copy=True) is out
    check(host, out.host)
    f = client.submit("cumsum", HostCuda(np.arange(4, dtype=np.uint32)),
                      out=HostCuda(np.zeros(4, np.uint64)), allow_copy=True)
    assert list(f.result().host) == [0, 1, 3, 6]
    # no out for another library's array: a NumPy array, as before
    got = client.cumsum(HostCuda(np.arange(4, dtype=np.int64)), allow_copy=True)
    assert isinstance(got, np.ndarray) and list(got) == [0, 1, 3, 6]
    # a NumPy out with allow_copy: through the host into it
    o = np.empty(5000)
    assert client.cumsum(x, out=o, allow_copy=True) is o
    check(host, o)
    assert client.ping() == "pong"


def test_no_elements(client, fake_gpu):
    out = HostCuda(np.empty(0))
    assert client.cumsum(HostCuda(np.empty(0, np.float32)), out=out) is out
    assert fake_gpu == []


def test_asyncio_stand_ins(daemon, fake_gpu):
    host = np.arange(3000, dtype=np.int32) - 1000

    async def run():
        async with gpured.aio.Client(daemon.path, timeout=30) as c:
            x, out = HostCuda(host), HostCuda(np.zeros(3000, np.int64))
            with pytest.raises(gpured.InvalidParams, match="allow_copy=True"):
                await c.cumsum(x, out=out)
            with pytest.raises(ValueError, match="same device"):
                await c.cumsum(x, out=HostCuda(np.zeros(3000, np.int64), dev="GPU-fake-1"))
            assert await c.cumsum(x, out=out, allow_copy=True) is out
            return out.host
    check(host, asyncio.run(run()))


# ---- on a GPU ------------------------------------------------------------

def _torch_dtypes(torch):
    """The dtypes of DTYPES this torch has (uint32 and uint64 since 2.3)."""
    return [d for d in DTYPES if hasattr(torch, d)]


def _no_data_crossed(c, before):
    assert c.stats()["bytes_in"] - before["bytes_in"] < 4096


def test_torch_every_dtype(make_daemon):
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        for name in _torch_dtypes(torch):
            wide = getattr(torch, np.dtype(WIDE[name]).name)
            for n in SIZES:
                host = sample(name, n, seed=n)
                x = torch.from_numpy(host).to("cuda")
                before = c.stats()
                got = c.cumsum(x)
                assert isinstance(got, torch.Tensor) and got.device == x.device
                assert got.dtype == wide and got.shape == (n,)
                check(host, got.cpu().numpy())
                # (torch's unsigned dtypes have few kernels: made from NumPy)
                out = torch.from_numpy(np.full(n, 7, dtype=WIDE[name])).to("cuda")
                assert c.cumsum(x, out=out) is out
                check(host, out.cpu().numpy())
                _no_data_crossed(c, before)
        # any shape, C order; a slice in the middle of an allocation
        m = torch.from_numpy(sample("float64", 6000, seed=4)).to("cuda").view(60, 100)
        check(m.cpu().numpy(), c.cumsum(m).cpu().numpy())
        out = torch.empty((60, 100), dtype=torch.float64, device="cuda")
        assert c.cumsum(m[10:20], out=out[30:40]) is not None
        check(m[10:20].cpu().numpy(), out[30:40].cpu().numpy().ravel())


def test_torch_in_place(make_daemon):
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        for name in [d for d in _torch_dtypes(torch) if np.dtype(d).itemsize == 8]:
            for n in SIZES:
                host = sample(name, n, seed=n + 1)
                x = torch.from_numpy(host).to("cuda")
                # mapped read-only by a reduction first: then writable too
                c.max(x)
                assert c.cumsum(x, out=x) is x
                check(host, x.cpu().numpy())
        # an allocation mapped both ways: reads take the writable mapping,
        # mapping nothing more
        t = torch.from_numpy(np.arange(1000, dtype=np.float64)).to("cuda")
        assert c.sum(t) == 499500.0
        assert c.cumsum(t, out=t) is t
        k = _regions(c)
        assert c.max(t) == 499500.0 and c.sum(t[:3]) == 0 + 1 + 3
        assert c.cumsum(t[:4], out=t[:4]) is not None
        assert t[:4].cpu().tolist() == [0.0, 1.0, 4.0, 10.0]
        assert _regions(c) == k


def test_torch_stream_and_pipelined(make_daemon):
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        x = torch.arange(1 << 20, dtype=torch.int64, device="cuda")
        x.add_(1)                       # queued just before: seen
        got = c.cumsum(x)
        assert int(got[-1]) == (1 << 20) * ((1 << 20) + 1) // 2
        # the result is there when cumsum returns: a kernel reads it at once
        assert int((got[1:] - got[:-1]).min()) == 2
        xs = [torch.full((4097,), i, dtype=torch.int32, device="cuda") for i in range(8)]
        futs = [c.submit("cumsum", v) for v in xs]
        for i, f in enumerate(futs):
            assert int(f.result()[-1]) == 4097 * i


def test_torch_errors(make_daemon):
    torch = _torch_cuda()
    x = torch.arange(10, dtype=torch.float32, device="cuda")
    with _gpu_daemon(make_daemon) as c:
        with pytest.raises(TypeError, match="out must be a GPU array"):
            c.cumsum(x, out=np.empty(10))
        with pytest.raises(TypeError, match="out must be a GPU array"):
            c.cumsum(x, out=torch.empty(10, dtype=torch.float64))
        with pytest.raises(TypeError, match="float64 for the prefix sums of float32"):
            c.cumsum(x, out=torch.empty(10, dtype=torch.float32, device="cuda"))
        with pytest.raises(ValueError, match="10 elements of x, not 12"):
            c.cumsum(x, out=torch.empty(12, dtype=torch.float64, device="cuda"))
        with pytest.raises(ValueError, match="contiguous"):
            c.cumsum(x, out=torch.empty(20, dtype=torch.float64, device="cuda")[::2])
        with pytest.raises(TypeError, match="float64"):
            c.cumsum(x, out=x)              # in place only for 8-byte dtypes
        if torch.cuda.device_count() > 1:
            with pytest.raises(ValueError, match="same device"):
                c.cumsum(x, out=torch.empty(10, dtype=torch.float64, device="cuda:1"))
        # the daemon's own refusal of a partial overlap
        y = torch.arange(100, dtype=torch.float64, device="cuda")
        with pytest.raises(gpured.InvalidParams, match="overlap"):
            c.cumsum(y[:50], out=y[1:51])
        assert c.ping() == "pong"
    # daemons that map no GPU memory: a clear error, or through the host
    for args in (("--backend", "cpu"), ("--allow-cuda-ipc", "no")):
        d = make_daemon("--threads", "2", *args)
        with gpured.Client(d.path, timeout=60) as c:
            with pytest.raises(gpured.InvalidParams, match="allow_copy=True"):
                c.cumsum(x)
            got = c.cumsum(x, allow_copy=True)
            assert isinstance(got, torch.Tensor) and got.device == x.device
            assert got.cpu().tolist() == [float(v) for v in np.cumsum(np.arange(10))]
            out = torch.zeros(10, dtype=torch.float64, device="cuda")
            assert c.cumsum(x, out=out, allow_copy=True) is out
            assert float(out[-1]) == 45.0


def test_cupy_every_dtype(make_daemon):
    cupy = _cupy()
    with _gpu_daemon(make_daemon) as c:
        for name in DTYPES:
            for n in SIZES:
                host = sample(name, n, seed=n + 2)
                x = cupy.asarray(host)
                before = c.stats()
                got = c.cumsum(x)
                assert isinstance(got, cupy.ndarray) and got.device == x.device
                assert got.dtype == WIDE[name] and got.shape == (n,)
                check(host, cupy.asnumpy(got))
                out = cupy.full(n, 7, dtype=WIDE[name])
                assert c.cumsum(x, out=out) is out
                check(host, cupy.asnumpy(out))
                if np.dtype(name).itemsize == 8:
                    assert c.cumsum(x, out=x) is x
                    check(host, cupy.asnumpy(x))
                _no_data_crossed(c, before)
        with pytest.raises(ValueError, match="contiguous"):
            c.cumsum(cupy.ones(10, np.float32), out=cupy.empty(20)[::2])
        with pytest.raises(TypeError, match="out must be a GPU array"):
            c.cumsum(cupy.ones(10, np.float32), out=np.empty(10))
        if cupy.cuda.runtime.getDeviceCount() > 1:
            with cupy.cuda.Device(1):
                other = cupy.empty(10)
            with pytest.raises(ValueError, match="same device"):
                c.cumsum(cupy.ones(10, np.float32), out=other)


def test_gpu_aio(make_daemon):
    torch = _torch_cuda()
    if BACKEND != "cuda":
        pytest.skip("needs a CUDA daemon")
    d = make_daemon("--threads", "2", "--allow-cuda-ipc", "yes", "--allow-cuda-ipc-writable", "yes")
    host = sample("float32", 100003, seed=9)

    async def run():
        async with gpured.aio.Client(d.path, timeout=60) as c:
            x = torch.from_numpy(host).to("cuda")
            f = await c.submit("cumsum", x)
            out = torch.empty(100003, dtype=torch.float64, device="cuda")
            got = await c.cumsum(x, out=out)
            assert got is out
            return (await f).cpu().numpy(), out.cpu().numpy()
    a, b = asyncio.run(run())
    check(host, a)
    check(host, b)
