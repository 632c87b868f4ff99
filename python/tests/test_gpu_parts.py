"""GPU memory of several exportable allocations mapped back to back (the
virtual-memory API, PyTorch's expandable segments), read in place as one
region (map with part_bytes, then map_part), and the switch to such memory
(gpured.use_shareable_memory). Every daemon here keeps the secure default:
no IPC handles. Tests skip where there is no CUDA daemon
(GPURED_TEST_BACKEND=cuda), torch or cupy."""

import array
import math
import os
import socket
import subprocess
import sys

import msgpack
import numpy as np
import pytest

import gpured
import gpured._device
from gpured.shareable import vmm_range

from conftest import BACKEND

MiB = 1 << 20


def _secure_daemon(make_daemon):
    if BACKEND != "cuda":
        pytest.skip("GPU memory is read in place by a CUDA daemon (GPURED_TEST_BACKEND=cuda)")
    try:
        gpured._device.driver()
    except gpured.NotSupported as e:
        pytest.skip(str(e))
    return make_daemon("--threads", "2")


class RangeArray:
    """A 1-D array of dtype over device memory at ptr (a VmmRange's)."""

    def __init__(self, ptr, count, dtype):
        self.ptr, self.count, self.dtype = ptr, count, np.dtype(dtype)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.count,), "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "stream": None}


def _fill(r, host, at=0):
    gpured._device.driver().copy_to_device(r.ptr + at, np.ascontiguousarray(host))


def _read(ptr, count, dtype):
    out = np.empty(count, dtype)
    gpured._device.driver().copy_to_host(out, ptr)
    return out


def _regions(c):
    return sum(dev.get("regions", 0) for dev in c.info()["devices"])


def test_range_of_parts_every_op(make_daemon):
    """A range of four allocations (2, 2, 6 and 2 MiB): every op on the
    whole and on slices across the seams equals the same elements sent
    from the host."""
    d = _secure_daemon(make_daemon)
    r = vmm_range([2 * MiB, 2 * MiB, 6 * MiB, 2 * MiB])
    rng = np.random.default_rng(11)
    with gpured.Client(d.path, timeout=120) as c:
        for dt in (np.float32, np.float64, np.int32, np.int64, np.uint32):
            n = r.size // np.dtype(dt).itemsize
            if np.dtype(dt).kind == "f":
                host = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(dt)
            else:
                host = rng.integers(0, 1 << 31, n).astype(dt)
            _fill(r, host)
            sz = np.dtype(dt).itemsize
            seam = 2 * MiB // sz
            for lo, hi in ((0, n), (seam - 3, seam + 5), (seam - 1000, 3 * seam + 17),
                           (1, n - 1), (5 * seam + 1, n)):
                x = RangeArray(r.ptr + lo * sz, hi - lo, dt)
                h = host[lo:hi]
                for op in ("sum", "sumsq", "min", "max", "argmin", "argmax", "moments"):
                    if op == "sumsq" and np.dtype(dt).kind != "f":
                        # integer sums of squares are float64 sums, not
                        # exact (PROTOCOL.md)
                        assert c.reduce(op, x) == pytest.approx(c.reduce(op, h), rel=1e-12)
                        continue
                    assert c.reduce(op, x) == c.reduce(op, h), (dt, lo, hi, op)
            if np.dtype(dt).kind == "f":
                # the reference the host path is checked against (test_exact)
                assert c.sum(RangeArray(r.ptr, n, dt)) == math.fsum(host.astype(np.float64))
        # one region for each set of allocations a slice spans: [0, 2),
        # [0, 1], [0, 2], [3] (the parts its elements lie in)
        assert _regions(c) == 4
    r.close()


def test_range_of_parts_cumsum_in_place(make_daemon):
    """A cumsum reads a range of parts and writes its prefix sums into
    another (mapped writable, part by part)."""
    d = _secure_daemon(make_daemon)
    src = vmm_range([2 * MiB, 2 * MiB])
    dst = vmm_range([2 * MiB, 2 * MiB, 4 * MiB])
    n = src.size // 8
    host = np.arange(n, dtype=np.int64) % 1000 - 500
    _fill(src, host)
    with gpured.Client(d.path, timeout=120) as c:
        out = RangeArray(dst.ptr, n, np.int64)
        c.cumsum(RangeArray(src.ptr, n, np.int64), out=out)
        assert np.array_equal(_read(dst.ptr, n, np.int64), np.cumsum(host))
        x = RangeArray(src.ptr, n // 2, np.float64)
        _fill(src, np.arange(n // 2) * 0.5)
        c.cumsum(x, out=RangeArray(dst.ptr + 8, n // 2, np.float64))
        assert np.array_equal(_read(dst.ptr + 8, n // 2, np.float64),
                              c.cumsum(np.arange(n // 2) * 0.5))
    src.close()
    dst.close()


class Raw:
    """msgpack-RPC over the socket, with descriptors."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.u = msgpack.Unpacker(raw=False)
        self.msgid = 0

    def call(self, method, params, fds=()):
        self.msgid += 1
        data = msgpack.packb([0, self.msgid, method, [params]])
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        self.s.sendmsg([data], anc)
        while True:
            for m in self.u:
                assert m[1] == self.msgid, m
                return m[2], m[3]
            self.u.feed(self.s.recv(1 << 16))

    def close(self):
        self.s.close()


def _uuid(path):
    with gpured.Client(path) as c:
        return [x for x in c.info()["devices"] if x["kind"] == "cuda"][0]["uuid"]


def test_map_part_rules(make_daemon):
    """Parts in order, whole granules but the last, never past the end;
    no request reads a range before it is whole; an unmapped range, whole
    or not, gives back its GPU memory."""
    d = _secure_daemon(make_daemon)
    dev = _uuid(d.path)
    drv = gpured._device.driver()
    r = vmm_range([2 * MiB, 2 * MiB, 2 * MiB])
    fds = [drv.export_fd(r.ptr + i * 2 * MiB) for i in range(3)]
    c = Raw(d.path)
    try:
        n = 6 * MiB - 4          # the last part is less than its allocation
        base = {"kind": "cuda", "device": dev, "bytes": n}
        err, _ = c.call("map", dict(base, part_bytes=MiB), [fds[0]])
        assert "whole number of the device's allocation granules" in err["message"], err
        err, res = c.call("map", dict(base, part_bytes=2 * MiB), [fds[0]])
        assert err is None and res == {"region": res["region"], "bytes": n,
                                       "mapped": 2 * MiB}, (err, res)
        reg = res["region"]
        red = {"op": "sum", "dtype": "f32", "region": reg, "count": 4}
        err, _ = c.call("reduce", red)
        assert "is not whole: 2097152 of its 6291452 bytes are mapped" in err["message"], err
        err, _ = c.call("map_part", {"region": reg, "bytes": 6 * MiB}, [fds[1]])
        assert "would reach past the end" in err["message"], err
        err, _ = c.call("map_part", {"region": reg, "bytes": 2 * MiB}, [])
        assert "map_part needs one file descriptor" in err["message"], err
        err, res = c.call("map_part", {"region": reg, "bytes": 2 * MiB}, [fds[1]])
        assert err is None and res["mapped"] == 4 * MiB, (err, res)
        null = os.open("/dev/null", os.O_RDONLY)
        err, _ = c.call("map_part", {"region": reg, "bytes": 2 * MiB - 4}, [null])
        os.close(null)
        assert "not a CUDA allocation" in err["message"], err
        err, _ = c.call("map_part", {"region": reg, "bytes": MiB}, [fds[2]])
        assert "whole number of the device's allocation granules" in err["message"], err
        err, res = c.call("map_part", {"region": reg, "bytes": 2 * MiB - 4}, [fds[2]])
        assert err is None and res["mapped"] == n, (err, res)
        err, _ = c.call("map_part", {"region": reg, "bytes": 4}, [fds[2]])
        assert "is whole already" in err["message"], err
        _fill(r, np.ones(r.size // 4, np.float32))
        err, res = c.call("reduce", dict(red, count=n // 4))
        assert err is None and res == {"value": float(n // 4), "count": n // 4}, (err, res)
        assert c.call("unmap", {"region": reg}) == (None, True)
        # a range left half built, then the connection's end
        err, res = c.call("map", dict(base, part_bytes=2 * MiB), [fds[0]])
        assert err is None
    finally:
        for fd in fds:
            os.close(fd)
        c.close()
    with gpured.Client(d.path) as cl:
        for _ in range(50):
            if _regions(cl) == 0:
                break
            cl.ping()
        assert _regions(cl) == 0
    r.close()


def _run(code, *args, env=None, timeout=300):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-c", code, *args], env=e, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
    return p.stdout


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    return torch


_LARGE = """
import os, sys, torch, gpured
with gpured.Client(sys.argv[1], timeout=300) as c:
    for n in (1 << 24, 1 << 28, 1 << 31):
        t = torch.ones(n, dtype=torch.float32, device="cuda")
        before = c.stats()["bytes_device"]
        assert c.sum(t) == float(n), (n, c.sum(t))
        assert c.stats()["bytes_device"] - before == 4 * n
        t[n - 7] = 5.0
        assert c.argmax(t).index == n - 7
        del t
        torch.cuda.empty_cache()
    g = torch.Generator(device="cuda").manual_seed(3)
    t = torch.randn(1 << 24, device="cuda", generator=g) * 1e3
    host = t.cpu().numpy()
    for op in ("sum", "sumsq", "min", "max", "moments"):
        assert c.reduce(op, t) == c.reduce(op, host), op
        assert c.reduce(op, t[12345:]) == c.reduce(op, host[12345:]), op
    print("ok")
"""


def test_torch_expandable_segments_large(make_daemon):
    """Tensors of 2^24, 2^28 and 2^31 float32 over many expandable
    segments reduce in place on a daemon that takes no IPC handles."""
    _torch_cuda()
    d = _secure_daemon(make_daemon)
    _run(_LARGE, d.path, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
         timeout=600)


_CYCLES = """
import os, sys, torch, gpured
pid = int(sys.argv[2])
fds = lambda: len(os.listdir("/proc/%d/fd" % pid))
with gpured.Client(sys.argv[1], timeout=120) as c:
    regions = lambda: sum(x.get("regions", 0) for x in c.info()["devices"])
    sizes = [(1 << 12) + 7, 1 << 20, 3 << 21, 1 << 23]
    def cycle(i):
        t = torch.full((sizes[i % 4],), float(i % 5), device="cuda")
        assert c.sum(t) == float(i % 5) * sizes[i % 4]
        del t
    for i in range(200):
        cycle(i)
    torch.cuda.synchronize()
    f0, m0 = fds(), torch.cuda.mem_get_info()[0]
    for i in range(10000):
        cycle(i)
    torch.cuda.synchronize()
    f1, m1 = fds(), torch.cuda.mem_get_info()[0]
    assert f1 <= f0 + 2, (f0, f1)
    assert m1 >= m0 - (64 << 20), (m0, m1)
    assert regions() <= gpured._device.MAX_MAPS, regions()
    print(f0, f1, m0 - m1, regions(), "ok")
"""


def test_torch_mappings_flat_over_10000_tensors(make_daemon):
    """10,000 tensors allocated, reduced and freed: the daemon's
    descriptors, the GPU's free memory and the regions stay flat."""
    _torch_cuda()
    d = _secure_daemon(make_daemon)
    _run(_CYCLES, d.path, str(d.proc.pid),
         env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})


_SWITCH = """
import sys, torch, gpured
torch.zeros(1, device="cuda")        # the allocator is in use already
assert gpured.use_shareable_memory() == ["torch"]
with gpured.Client(sys.argv[1], timeout=120) as c:
    for n in (1000, 1 << 22, 25 << 20):
        t = torch.arange(n, dtype=torch.float64, device="cuda")
        assert c.sum(t) == float(n * (n - 1) // 2)
    assert c.stats()["bytes_device"] > 0
print("ok")
"""


def test_use_shareable_memory_torch(make_daemon):
    """After the switch, tensors of the default allocator go in place on
    a daemon that takes no IPC handles."""
    _torch_cuda()
    d = _secure_daemon(make_daemon)
    _run(_SWITCH, d.path)


_SWITCH_CUPY = """
import sys, cupy, numpy as np, gpured, gpured._device, gpured.shareable
assert gpured.use_shareable_memory() == ["cupy"]
rng = np.random.default_rng(2)
with gpured.Client(sys.argv[1], timeout=120) as c:
    for n in (1, 4099, 1 << 22):
        host = rng.standard_normal(n)
        x = cupy.asarray(host)
        for op in ("sum", "sumsq", "min", "max", "argmax", "moments"):
            assert c.reduce(op, x) == c.reduce(op, host), op
        out = cupy.empty(n, dtype=cupy.float64)
        c.cumsum(x, out=out)
        assert np.array_equal(cupy.asnumpy(out), c.cumsum(host))
    assert c.stats()["bytes_device"] > 0
    # small arrays share 2 MiB allocations: few mappings for many arrays,
    # and the memory given back once they are freed
    free0 = cupy.cuda.runtime.memGetInfo()[0]
    xs = [cupy.full(1000 + i, float(i)) for i in range(1000)]
    for i, x in enumerate(xs):
        assert c.sum(x) == float(i) * (1000 + i)
    regions = sum(d.get("regions", 0) for d in c.info()["devices"])
    assert regions <= gpured._device.MAX_MAPS, regions
    del xs, x
    gpured.shareable.cupy_pool.free_all_blocks()
    # what stays: the open slab, and those the daemon's mappings (at
    # most MAX_MAPS a connection) still hold
    held = free0 - cupy.cuda.runtime.memGetInfo()[0]
    assert held <= (gpured._device.MAX_MAPS + 1) * (2 << 20), held
print("ok")
"""


def test_use_shareable_memory_cupy(make_daemon):
    """CuPy's default pool over exportable allocations: arrays go in
    place, cumsum's out too, with no IPC handles."""
    pytest.importorskip("cupy")
    d = _secure_daemon(make_daemon)
    _run(_SWITCH_CUPY, d.path)


def test_dropped_tensor_still_right(make_daemon):
    """The client holds each array it sent until its answer is back: a
    tensor dropped while its request is in flight is not reused under it."""
    torch = _torch_cuda()
    d = _secure_daemon(make_daemon)
    code = """
import sys, torch, gpured
gpured.use_shareable_memory()
with gpured.Client(sys.argv[1], timeout=120) as c:
    futs = []
    for i in range(200):
        t = torch.full((1 << 20,), float(i), device="cuda")
        futs.append((i, c.submit("sum", t)))
        del t
        # new tensors of the same size would take the freed memory
        junk = torch.full((1 << 20,), -1.0, device="cuda")
    for i, f in futs:
        assert f.result() == float(i) * (1 << 20), (i, f.result())
print("ok")
"""
    _run(code, d.path)
