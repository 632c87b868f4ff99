"""PyTorch tensors and CuPy arrays: CPU ones are read through NumPy; GPU
ones are read in place by a CUDA daemon (map kinds cuda_ipc and cuda),
or copied with allow_copy=True. Tests that need torch, cupy, a GPU or a
CUDA daemon (GPURED_TEST_BACKEND=cuda) skip where there is none."""

import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import gpured
import gpured._device

from conftest import BACKEND


class FakeCudaArray:
    """Just enough of a CuPy-like device array."""

    def __init__(self, host):
        self.host = host

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.host.shape, "typestr": self.host.dtype.str,
                "data": (0, False), "version": 3}

    def get(self):
        return self.host


class FakeDLPackDevice:
    """An array that says, through DLPack, that it lives on a ROCm device."""

    def __dlpack_device__(self):
        return (10, 0)


def test_device_array_refused(client):
    x = FakeCudaArray(np.arange(5, dtype=np.float32))
    with pytest.raises(gpured.NotSupported) as e:
        client.sum(x)
    assert isinstance(e.value, gpured.Error) and e.value.code == "not_supported"
    assert "GPU memory" in e.value.message and "allow_copy=True" in e.value.message
    with pytest.raises(gpured.NotSupported):
        client.sum(FakeDLPackDevice())
    assert client.sum(x, allow_copy=True) == 10.0
    assert client.submit("max", x, allow_copy=True).result() == 4.0


def _torch():
    return pytest.importorskip("torch")


def test_torch_cpu(client):
    torch = _torch()
    t = torch.arange(10, dtype=torch.float32, requires_grad=True)
    assert client.sum(t) == 45.0
    assert client.max(torch.arange(10, dtype=torch.int64)[::2]) == 8
    assert client.sum(torch.ones(3, dtype=torch.bfloat16)) == 3.0
    with pytest.raises(TypeError):
        client.sum(torch.ones(3, dtype=torch.complex64))


def _torch_cuda():
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    return torch


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device for cupy")
    except Exception as e:       # no driver
        pytest.skip("cupy has no GPU: %s" % e)
    return cupy


def _gpu_daemon(make_daemon):
    """A CUDA daemon that accepts legacy IPC handles, writable ones too (a
    cumsum's out), and a client of it."""
    if BACKEND != "cuda":
        pytest.skip("GPU arrays are read in place by a CUDA daemon (GPURED_TEST_BACKEND=cuda)")
    d = make_daemon("--threads", "2", "--allow-cuda-ipc", "yes", "--allow-cuda-ipc-writable", "yes")
    return gpured.Client(d.path, timeout=60)


def _device_bytes(c):
    return c.stats()["bytes_device"]


def _regions(c):
    return sum(dev.get("regions", 0) for dev in c.info()["devices"])


def _check_all(c, host, x):
    """Every op of x (on a GPU) against NumPy, math.fsum and Fraction on its
    host copy; returns how many requests that took."""
    assert c.min(x) == host.min() and c.max(x) == host.max()
    if host.dtype.kind == "f":
        # float sums and sums of squares exact, rounded once (PROTOCOL.md)
        assert c.sum(x) == math.fsum(host.astype(np.float64))
        assert c.sumsq(x) == float(sum(Fraction(float(v)) ** 2 for v in host))
        return 4
    assert c.sum(x) == int(host.astype(object).sum())      # far from wrapping
    assert c.sumsq(x) == pytest.approx(float(sum(int(v) ** 2 for v in host)), rel=1e-12)
    return 4


def test_torch_cuda_in_place(make_daemon):
    torch = _torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(7)
    with _gpu_daemon(make_daemon) as c:
        for dt in (torch.int32, torch.int64, torch.float32, torch.float64):
            for n in (1, 3, 1000, 4097, 100003):
                if dt.is_floating_point:
                    t = (torch.rand(n, dtype=dt, device="cuda", generator=g) - 0.5) * 1e6
                else:
                    t = torch.randint(-2**30, 2**30, (n,), dtype=dt, device="cuda", generator=g)
                before = _device_bytes(c)
                k = _check_all(c, t.cpu().numpy(), t)
                assert _device_bytes(c) - before == k * t.numel() * t.element_size()
        # A slice in the middle of an allocation, and 2-D views of it.
        t = torch.arange(1 << 20, dtype=torch.float64, device="cuda")
        assert c.sum(t[12345:67890]) == float(sum(range(12345, 67890)))
        assert c.max(t.view(1024, 1024)[3:5]) == 5 * 1024 - 1
        # The daemon reads what the stream has finished: a kernel queued
        # just before is seen.
        t.add_(1)
        assert c.sum(t) == float((1 << 20) * ((1 << 20) + 1) // 2)
        # Empty tensors go as empty data.
        assert c.sum(torch.empty(0, device="cuda")) == 0.0
        with pytest.raises(gpured.Empty):
            c.min(torch.empty(0, dtype=torch.int32, device="cuda"))


def test_torch_cuda_argmin_argmax_moments(make_daemon):
    """argmin, argmax and moments of GPU memory run on the GPU's kernels:
    each gives what the same elements on the host give (NumPy's
    answer)."""
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        t = torch.tensor([3.0, -1.0, 7.0, -1.0], dtype=torch.float32, device="cuda")
        assert c.argmin(t) == (-1.0, 1, 4)
        assert c.argmax(t) == (7.0, 2, 4)
        assert c.moments(t, ddof=1) == (4, 8.0, -1.0, 7.0, 2.0, 44 / 3)
        assert c.min(t) == -1.0
        host = t.cpu().numpy()
        assert c.argmin(host) == (-1.0, 1, 4)
        big = torch.arange(1 << 22, dtype=torch.float32, device="cuda").flip(0).contiguous()
        assert c.argmin(big) == (0.0, (1 << 22) - 1, 1 << 22)
        assert c.argmin(big) == c.argmin(big.cpu().numpy())
        assert c.moments(big) == c.moments(big.cpu().numpy())


def _gpu_jobs(c):
    return sum(dev["jobs"] for dev in c.info()["devices"] if dev["kind"] == "cuda")


def test_torch_cuda_row_sums(make_daemon):
    """Row sums, minima, argmaxes, sums of squares and moments of a CUDA
    tensor (offsets=) are one job each on the GPU (its segmented reduce),
    exact: each row's sum is math.fsum of the row, as the same elements on
    the host give, argmax NumPy's (the first of equal maxima), and each
    row's mean and variance the exact ones rounded once."""
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        g = torch.Generator(device="cuda").manual_seed(5)
        t = (torch.rand(3001, 257, generator=g, device="cuda", dtype=torch.float64) - 0.5) \
            * torch.logspace(-20, 20, 257, device="cuda", dtype=torch.float64)
        t[7] = 0.0
        t[8] = -0.0
        offs = np.arange(0, t.numel() + 1, 257)
        host = t.cpu().numpy()
        before = _gpu_jobs(c)
        sums = c.sum(t, offsets=offs)
        assert _gpu_jobs(c) == before + 1
        assert sums.tolist() == [math.fsum(r) for r in host.tolist()]
        assert np.signbit(sums[8]) and not np.signbit(sums[7])
        assert c.min(t, offsets=offs).tolist() == host.min(axis=1).tolist()
        am = c.argmax(t, offsets=offs)
        assert am.index.tolist() == host.argmax(axis=1).tolist()
        assert am.value.tolist() == host.max(axis=1).tolist()
        assert _gpu_jobs(c) == before + 3
        assert (c.sumsq(t, offsets=offs) == c.sumsq(host, offsets=offs)).all()
        f = t.float()
        assert (c.sum(f, offsets=offs) == c.sum(f.cpu().numpy(), offsets=offs)).all()
        before = _gpu_jobs(c)
        mom = c.moments(t, offsets=offs, ddof=1)
        for x, ref in ((t, host), (f, f.cpu().numpy())):
            got = c.moments(x, offsets=offs, ddof=1)
            want = c.moments(ref, offsets=offs, ddof=1)
            for field in gpured.Moments._fields:
                assert getattr(got, field).tobytes() == getattr(want, field).tobytes(), field
        assert _gpu_jobs(c) == before + 3
        for i in (0, 7, 8, 1234, 3000):
            row = [Fraction(v) for v in host[i].tolist()]
            s1, s2, n = sum(row), sum(v * v for v in row), len(row)
            assert (mom.mean[i], mom.var[i]) == (float(s1 / n), float((s2 - s1 * s1 / n) / (n - 1)))


def test_torch_cuda_pipelined_one_mapping(make_daemon):
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        t = torch.arange(1 << 16, dtype=torch.int64, device="cuda")
        futs = [c.submit("sum", t[i:i + 1000]) for i in range(0, 60000, 997)]
        assert [f.result() for f in futs] == \
            [sum(range(i, i + 1000)) for i in range(0, 60000, 997)]
        assert _regions(c) == 1


def test_torch_cuda_many_allocations(make_daemon):
    """Mappings past the client's cache are unmapped: the daemon's count
    stays bounded and every answer right."""
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        ts = [torch.full((4 << 20,), float(i), dtype=torch.float32, device="cuda")
              for i in range(3 * gpured._device.MAX_MAPS)]
        for i, t in enumerate(ts):
            assert c.sum(t) == float(i * (4 << 20))
        c.ping()
        assert _regions(c) <= gpured._device.MAX_MAPS
        for i, t in enumerate(ts[:4]):
            assert c.max(t) == float(i)


def test_torch_cuda_refused(make_daemon):
    """A daemon that takes no IPC handles (the default), or a CPU daemon:
    a clear error, or a copy with allow_copy=True."""
    torch = _torch_cuda()
    t = torch.arange(10, dtype=torch.float32, device="cuda")
    for args in (("--allow-cuda-ipc", "no"), ("--backend", "cpu")):
        d = make_daemon("--threads", "2", *args)
        with gpured.Client(d.path, timeout=60) as c:
            with pytest.raises(gpured.InvalidParams) as e:
                c.sum(t)
            assert "allow_copy=True" in e.value.message
            # where IPC handles are off, the error names the switch that
            # makes tensors go in place
            assert ("use_shareable_memory()" in e.value.message) == (args[0] != "--backend")
            assert c.sum(t, allow_copy=True) == 45.0
            assert c.stats()["bytes_device"] == 0


def test_torch_cuda_not_contiguous(make_daemon):
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        t = torch.arange(100, dtype=torch.int32, device="cuda")
        with pytest.raises(gpured.NotSupported) as e:
            c.sum(t[::3])
        assert "not contiguous" in e.value.message
        assert c.sum(t[::3], allow_copy=True) == sum(range(0, 100, 3))


def test_torch_expandable_segments(make_daemon):
    """Memory of PyTorch's expandable segments (the virtual-memory API)
    goes as a file descriptor, map kind cuda."""
    _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        path = c.path
    code = """
import sys, torch, gpured
with gpured.Client(sys.argv[1], timeout=60) as c:
    t = torch.arange(1 << 22, dtype=torch.float32, device="cuda")
    assert c.sum(t) == float((1 << 22) * ((1 << 22) - 1) // 2), c.sum(t)
    assert c.max(t[5:77]) == 76.0
    assert c.stats()["bytes_device"] == (4 << 22) + 72 * 4
    print("ok")
"""
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    r = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_cupy_in_place(make_daemon):
    cupy = _cupy()
    rng = np.random.default_rng(5)
    with _gpu_daemon(make_daemon) as c:
        for dt in (np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64):
            for n in (1, 7, 4099, 65537):
                if np.dtype(dt).kind == "f":
                    host = ((rng.random(n) - 0.5) * 1e9).astype(dt)
                else:
                    host = rng.integers(0, 1 << 31, n).astype(dt)
                x = cupy.asarray(host)
                before = _device_bytes(c)
                k = _check_all(c, host, x)
                assert _device_bytes(c) - before == k * host.nbytes
        x = cupy.arange(1000, dtype=cupy.float64).reshape(10, 100)
        assert c.sum(x[2:4]) == float(sum(range(200, 400)))
        with pytest.raises(gpured.NotSupported):
            c.sum(x[:, ::2])
        assert c.sum(x[:, ::2], allow_copy=True) == float(sum(range(0, 1000, 2)))


def test_cupy_aio(make_daemon):
    import asyncio
    import gpured.aio
    cupy = _cupy()
    if BACKEND != "cuda":
        pytest.skip("needs a CUDA daemon")
    d = make_daemon("--threads", "2", "--allow-cuda-ipc", "yes")

    async def main():
        async with gpured.aio.Client(d.path, timeout=60) as c:
            x = cupy.arange(1 << 20, dtype=cupy.int64)
            futs = [await c.submit("sum", x[i:i + 4096]) for i in range(0, 1 << 20, 65536)]
            got = await asyncio.gather(*futs)
            assert got == [sum(range(i, i + 4096)) for i in range(0, 1 << 20, 65536)]
            assert (await c.stats())["bytes_device"] == 16 * 4096 * 8
    asyncio.run(main())


def _foreign_gpu_array(client, make_daemon, x, expected):
    """A GPU array of another library: a daemon that takes no IPC handles
    reads it in place when its allocation exports as a file descriptor
    (JAX's does), else refuses it unless allow_copy=True; one that takes
    IPC handles reads it in place."""
    try:
        assert client.sum(x) == expected
    except gpured.Error as e:
        assert isinstance(e, (gpured.NotSupported, gpured.InvalidParams))
        assert "allow_copy=True" in e.message
    assert client.sum(x, allow_copy=True) == expected
    if BACKEND == "cuda":
        with _gpu_daemon(make_daemon) as c:
            assert c.sum(x) == expected
            assert c.stats()["bytes_device"] == 40


def test_numba_device_array(client, make_daemon):
    cuda = pytest.importorskip("numba.cuda")
    try:
        if not cuda.is_available():
            pytest.skip("no CUDA device for numba")
        x = cuda.to_device(np.arange(10, dtype=np.int32))
    except Exception as e:
        pytest.skip("numba has no GPU: %s" % e)
    _foreign_gpu_array(client, make_daemon, x, 45)


def test_jax_arrays(client, make_daemon):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    cpu = jax.device_put(jnp.arange(10, dtype=jnp.float32), jax.devices("cpu")[0])
    assert client.sum(cpu) == 45.0
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("no GPU for jax")
    x = jax.device_put(jnp.arange(10, dtype=jnp.float32), gpus[0])
    _foreign_gpu_array(client, make_daemon, x, 45.0)


def test_host_array_whose_cuda_interface_raises(client):
    class HostOnly:
        @property
        def __cuda_array_interface__(self):
            raise ValueError("only for GPU buffers")

        def __array__(self, dtype=None, copy=None):
            return np.arange(4, dtype=np.float64)
    assert client.sum(HostOnly()) == 6.0


class DLPackOnly:
    """A GPU array that offers DLPack and nothing else (as JAX's and
    TensorFlow's do): no __cuda_array_interface__, no buffer."""

    def __init__(self, t):
        self._t = t
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_dlpack_only_cuda_in_place(make_daemon):
    """A torch CUDA tensor seen through DLPack alone is read in place, as
    the tensor itself is, with the legacy default stream asked for."""
    torch = _torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(11)
    with _gpu_daemon(make_daemon) as c:
        for dt in (torch.int32, torch.int64, torch.float32, torch.float64):
            for n in (1, 1000, 100003):
                if dt.is_floating_point:
                    t = (torch.rand(n, dtype=dt, device="cuda", generator=g) - 0.5) * 1e6
                else:
                    t = torch.randint(-2**30, 2**30, (n,), dtype=dt, device="cuda", generator=g)
                x = DLPackOnly(t)
                before = _device_bytes(c)
                k = _check_all(c, t.cpu().numpy(), x)
                # read on the GPU, in place: no byte crossed the socket
                assert _device_bytes(c) - before == k * t.numel() * t.element_size()
                assert c.argmax(x) == c.argmax(t) and c.moments(x) == c.moments(t)
                assert x.streams and all(s == 1 for s in x.streams), x.streams
        # a slice inside an allocation
        t = torch.arange(1 << 20, dtype=torch.float64, device="cuda")
        assert c.sum(DLPackOnly(t[12345:67890])) == float(sum(range(12345, 67890)))
        # not contiguous: DLPack alone gives no way to read it in place
        v = DLPackOnly(t.view(1024, 1024)[:, 3])
        with pytest.raises(gpured.NotSupported):
            c.sum(v)
