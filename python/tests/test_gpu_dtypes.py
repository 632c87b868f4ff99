"""GPU arrays of the dtypes of 16 bits or fewer (f16, bf16, f8e4m3,
f8e5m2, i8, u8, i16, u16; bool as u8).

Without a GPU: the client's side against stand-ins (host memory that says
it is CUDA memory): each dtype's name on the wire, a CPU daemon's refusal
to map it, the copy through the host that allow_copy=True makes, the
prefix sums that go through the host, and an empty array.

With PyTorch or CuPy and a GPU: a CUDA daemon (GPURED_TEST_BACKEND=cuda)
reduces their tensors where they lie, with the bits of the same elements
on the host and of the references of test_dtypes_small.py, every op,
segments and prefix sums too (every bit pattern, NaNs, infinities and
-0 among them: a NaN matches any NaN); allow_copy=True, which sends the
prefix sums through the host, gives the same; a CPU daemon takes them
with allow_copy=True."""

import numpy as np
import pytest

import gpured
from gpured import _device, _wire
from test_cumsum_gpu import HostCuda, fake_gpu  # noqa: F401 (a fixture)
from test_dtypes_small import (FORMATS, check_all, check_cumsum, check_segments, decode,
                               random_bits, same, same_arrays)
from test_gpu_arrays import _cupy, _gpu_daemon, _torch_cuda

SMALL = ["float16", "int8", "uint8", "int16", "uint16", "bool"]
OPS = ("sum", "sumsq", "min", "max", "argmin", "argmax", "moments")
# the ops whose segments of GPU memory a CUDA daemon reduces there
SEG_OPS = ("sum", "sumsq", "min", "max", "argmin", "argmax")


def host_of(dtype, n, seed=1):
    """n elements of NumPy dtype: finite floats from random bits, integers
    over the whole range, bools."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind == "f":
        return random_bits("f16", n, rng).view("<f2")
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


def same_results(a, b):
    if isinstance(a, tuple):
        return type(a) is type(b) and all(same_results(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return same_arrays(a, b)
    return same(a, b)


# ---- stand-ins: no CUDA anywhere ---------------------------------------

def test_stand_ins(client, fake_gpu):  # noqa: F811
    for dtype in SMALL:
        host = host_of(dtype, 3001)
        name = _wire.wire_name(host.dtype)
        x = HostCuda(host)
        assert _device.span(x, False).dtype == name
        with pytest.raises(gpured.InvalidParams, match="allow_copy=True"):
            client.sum(x)
        for op in OPS:
            assert same_results(client.reduce(op, x, allow_copy=True), client.reduce(op, host))
        offs = [0, 5, 5, 3001]
        for op in ("sum", "min", "argmax"):
            assert same_results(client.reduce(op, x, offsets=offs, allow_copy=True),
                                client.reduce(op, host, offsets=offs))
        # prefix sums, as any dtype's: out is asked for first (writable);
        # the daemon cannot map the stand-ins' memory, and allow_copy
        # then goes through the host
        maps = len(fake_gpu)
        wide = _wire.value_dtype("sum", name)
        out = HostCuda(np.full(3001, 7, wide))
        assert client.cumsum(x, out=out, allow_copy=True) is out
        assert same_arrays(out.host, client.cumsum(host))
        assert fake_gpu[maps:] == [True]
        with pytest.raises(gpured.InvalidParams):
            client.cumsum(x, out=out)
        with pytest.raises(TypeError, match="%s for the prefix sums of %s, not float32"
                           % (wide.name, _wire.TYPE_NAMES[name])):
            client.cumsum(x, out=HostCuda(np.empty(3001, np.float32)))
        # no elements: no memory to map, and the dtype's own empty result
        got = client.sum(HostCuda(np.empty(0, dtype)))
        assert got == 0 and type(got) is (float if name in FORMATS else int)
        got = client.cumsum(HostCuda(np.empty(0, dtype)), out=HostCuda(np.empty(0, wide)))
        assert got.host.shape == (0,)
    assert client.ping() == "pong"


# ---- PyTorch on a GPU --------------------------------------------------

# torch dtype -> wire name (torch.uint16 since PyTorch 2.3)
TORCH = [("float16", "f16"), ("bfloat16", "bf16"), ("float8_e4m3fn", "f8e4m3"),
         ("float8_e5m2", "f8e5m2"), ("int8", "i8"), ("uint8", "u8"), ("int16", "i16"),
         ("uint16", "u16"), ("bool", "u8")]


def _torch_dtypes(torch):
    return [(getattr(torch, t), t, name) for t, name in TORCH if hasattr(torch, t)]


def _tensor(torch, tname, name, n, seed):
    """(a CUDA tensor of n elements of torch dtype tname, the same on the
    host, their exact values): finite floats from random bits, integers
    over the whole range, bools."""
    rng = np.random.default_rng(seed)
    if name in FORMATS:
        bits = random_bits(name, n, rng)
        raw = torch.from_numpy(bits.view(np.int16) if bits.itemsize == 2 else bits)
        t = raw.view(getattr(torch, tname))
        return t.to("cuda"), t, decode(name, bits).tolist()
    if tname == "bool":
        a = rng.random(n) < 0.5
        t = torch.from_numpy(a)
        return t.to("cuda"), t, a.astype(np.int64).tolist()
    info = np.iinfo(np.dtype(tname))
    a = rng.integers(info.min, info.max, n, dtype=np.dtype(tname), endpoint=True)
    t = torch.from_numpy(a)
    return t.to("cuda"), t, a.tolist()


def _bytes_in(c):
    return c.stats()["bytes_in"]


def test_torch_cuda_in_place(make_daemon):
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        for _dt, tname, name in _torch_dtypes(torch):
            for n in (1, 4097, (1 << 20) + 3):
                x, host, v = _tensor(torch, tname, name, n, seed=n)
                before = _bytes_in(c)
                got = {op: c.reduce(op, x) for op in OPS if op != "moments" or n > 1}
                offs = sorted([0, 0, 1, 1, n // 2, n // 2 + 4096, n, n])
                offs = [min(o, n) for o in offs]
                segs = {op: c.reduce(op, x, offsets=offs) for op in SEG_OPS}
                parts = [c.reduce("sum", x[a:b], partial=True)
                         for a, b in ((0, n // 3), (n // 3, n))]
                # the GPU memory was read where it lies: no data crossed
                assert _bytes_in(c) - before < 4096 * (len(got) + len(segs) + 2), tname
                for op, g in got.items():
                    assert same_results(g, c.reduce(op, host)), (tname, n, op, g)
                for op, g in segs.items():
                    assert same_results(g, c.reduce(op, host, offsets=offs)), (tname, n, op)
                assert same(gpured.combine(parts), got["sum"])
        # a slice in the middle of an allocation; an empty tensor
        x, host, v = _tensor(torch, "bfloat16", "bf16", 10000, seed=3)
        assert same(c.sum(x[123:4567]), c.sum(host[123:4567]))
        assert c.sum(torch.empty(0, dtype=torch.bfloat16, device="cuda")) == 0.0
        with pytest.raises(gpured.Empty):
            c.min(torch.empty(0, dtype=torch.int8, device="cuda"))


def test_torch_cuda_references(make_daemon):
    """Every op of small CUDA tensors against the exact references."""
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        for _dt, tname, name in _torch_dtypes(torch):
            for n in (1, 2, 1001):
                x, _host, v = _tensor(torch, tname, name, n, seed=n + 7)
                check_all(c, name, x, v, cumsum=False)
                check_cumsum(_OnHost(c), name, x, v)
            check_segments(c, name, x, v, [0, 1, 1, 500, 1001])


class _OnHost:
    """A client whose cumsum() of a CUDA tensor checks that the prefix sums
    came back in GPU memory, and gives them as a NumPy array."""

    def __init__(self, c):
        self._c = c

    def cumsum(self, x):
        got = self._c.cumsum(x)
        assert got.is_cuda
        return got.cpu().numpy()


def _all_patterns(torch, tname, name):
    """(a CUDA tensor of every bit pattern of the dtype, twice over, the
    same on the host)."""
    size = 1 if name in ("f8e4m3", "f8e5m2", "i8", "u8") else 2
    bits = np.tile(np.arange(1 << (8 * size), dtype=np.uint16 if size == 2 else np.uint8), 2)
    if tname == "bool":
        bits = bits & 1
    raw = torch.from_numpy(bits.view(np.int16) if size == 2 else bits)
    t = raw.view(getattr(torch, tname)) if tname != "bool" else raw.to(torch.bool)
    return t.to("cuda"), t


def test_torch_cuda_cumsum(make_daemon):
    """A CUDA daemon scans these dtypes' GPU memory where it lies, into GPU
    memory, with the bits of the prefix sums of the same elements on the
    host (PROTOCOL.md, "Narrow dtypes"): every bit pattern, random
    elements at sizes around a tile and past 2^20, a slice off a 16-byte
    boundary, and out given; allow_copy=True (through the host) gives the
    same."""
    torch = _torch_cuda()
    with _gpu_daemon(make_daemon) as c:
        for _dt, tname, name in _torch_dtypes(torch):
            cases = [_all_patterns(torch, tname, name)]
            for n in (1, 4095, 4097, (1 << 20) + 3):
                x, host, v = _tensor(torch, tname, name, n, seed=11 + n)
                cases.append((x, host))
            x, host, v = _tensor(torch, tname, name, 10001, seed=4)
            cases.append((x[1:], host[1:]))
            for x, host in cases:
                n = x.numel()
                want = c.cumsum(host)
                before = _bytes_in(c)
                got = c.cumsum(x)
                # scanned where it lies: no data crossed the socket
                assert _bytes_in(c) - before < 4096, (tname, n)
                assert isinstance(got, torch.Tensor) and got.is_cuda
                assert got.dtype == getattr(torch, want.dtype.name)
                assert same_arrays(got.cpu().numpy(), want), (tname, n)
                out = torch.empty(n, dtype=got.dtype, device="cuda")
                assert c.cumsum(x, out=out) is out
                assert same_arrays(out.cpu().numpy(), want), (tname, n)
                assert same_arrays(c.cumsum(x, allow_copy=True).cpu().numpy(), want)
            # and the segments of every bit pattern, empty ones and ones
            # crossing tiles among them
            x, host = cases[0]
            n = x.numel()
            offs = [0, 0, 1, 17, 4000, 4200, 4200, 9000, n - 3, n, n]
            offs = sorted(min(o, n) for o in offs)
            for op in SEG_OPS:
                assert same_results(c.reduce(op, x, offsets=offs),
                                    c.reduce(op, host, offsets=offs)), (tname, op)
            assert c.ping() == "pong"


def test_torch_cuda_copied(client):
    """A CPU daemon maps no GPU memory: allow_copy=True copies the tensor,
    bfloat16 and float8 too, and a non-contiguous one."""
    torch = _torch_cuda()
    for _dt, tname, name in _torch_dtypes(torch):
        x, host, v = _tensor(torch, tname, name, 3001, seed=5)
        with pytest.raises(gpured.InvalidParams, match="allow_copy=True"):
            client.sum(x)
        for op in OPS:
            assert same_results(client.reduce(op, x, allow_copy=True), client.reduce(op, host))
        assert same_results(client.max(x[::3], allow_copy=True), client.max(host[::3]))
        assert same_arrays(client.cumsum(x, allow_copy=True).cpu().numpy(),
                           client.cumsum(host))
        got = client.sum(torch.empty(0, dtype=getattr(torch, tname), device="cuda"))
        assert got == 0 and type(got) is (float if name in FORMATS else int)


class DLPackOnly:
    """A CUDA tensor seen through DLPack alone."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_dlpack_cuda(make_daemon):
    torch = _torch_cuda()
    seen = []
    with _gpu_daemon(make_daemon) as c:
        for _dt, tname, name in _torch_dtypes(torch):
            x, host, v = _tensor(torch, tname, name, 4099, seed=2)
            try:
                x.__dlpack__()
            except (BufferError, RuntimeError, TypeError):
                continue                        # this torch exports no such capsule
            d = DLPackOnly(x)
            assert _device.span(d, False).dtype == name
            for op in ("sum", "min", "argmax"):
                assert same_results(c.reduce(op, d), c.reduce(op, host)), (tname, op)
            seen.append(tname)
    # bfloat16 is DLPack's kDLBfloat, bool its kDLBool
    assert {"float16", "bfloat16", "int8", "uint8", "bool"} <= set(seen), seen


# ---- CuPy on a GPU ---------------------------------------------------------

def test_cupy_in_place(make_daemon):
    cupy = _cupy()
    with _gpu_daemon(make_daemon) as c:
        for dtype in SMALL:
            for n in (1, 4097, 300001):
                host = host_of(dtype, n, seed=n)
                x = cupy.asarray(host)
                before = _bytes_in(c)
                got = {op: c.reduce(op, x) for op in OPS if op != "moments" or n > 1}
                assert _bytes_in(c) - before < 4096 * len(got)
                for op, g in got.items():
                    assert same_results(g, c.reduce(op, host)), (dtype, n, op)
                offs = [0, n // 2, n]
                assert same_arrays(c.sum(x, offsets=offs), c.sum(host, offsets=offs))
            assert same_arrays(c.cumsum(x).get(), c.cumsum(host))
            assert same_arrays(c.cumsum(x, allow_copy=True).get(), c.cumsum(host))
