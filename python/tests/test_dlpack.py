"""Arrays that speak only DLPack (__dlpack__ and __dlpack_device__, as
JAX, TensorFlow and Paddle arrays do): on the host they are read through
np.from_dlpack, as the same memory; a non-contiguous one is copied, as a
non-contiguous NumPy array is. CUDA ones go the way of
__cuda_array_interface__ arrays (test_gpu_arrays.py); here only what needs
no GPU: the capsule's reading, and the stream asked for."""

import ctypes

import numpy as np
import pytest

import gpured
from gpured import _device, _wire

from samples import DTYPES, sample


class DLPackOnly:
    """A host array that offers DLPack and nothing else."""

    def __init__(self, a):
        self._a = a
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class DLPackCuda(DLPackOnly):
    """Says it is on CUDA device 0, and records the stream it is asked for."""

    def __dlpack_device__(self):
        return (2, 0)


def test_not_read_by_numpy_alone():
    x = DLPackOnly(np.arange(3.0))
    assert np.asarray(x).dtype == object      # what the client would get without DLPack


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 3, 7, 1001, 5003])
def test_every_dtype_odd_sizes(client, dtype, n):
    a = sample(dtype, n, seed=n)
    x = DLPackOnly(a)
    for op in ("sum", "min", "max", "sumsq"):
        if n == 0 and op in ("min", "max"):
            with pytest.raises(gpured.Empty):
                client.reduce(op, x)
            continue
        assert client.reduce(op, x, full=True) == client.reduce(op, a, full=True), op
    if n:
        assert client.argmin(x) == client.argmin(a)
        assert client.argmax(x) == client.argmax(a)
        assert client.moments(x) == client.moments(a)
    assert np.array_equal(client.cumsum(x), client.cumsum(a))
    assert x.streams and all(s is None for s in x.streams)   # host memory: no stream


@pytest.mark.parametrize("dtype", DTYPES)
def test_not_contiguous_is_copied(client, dtype):
    base = sample(dtype, 3 * 7 * 5, seed=3).reshape(3, 7, 5)
    for a in (base[:, ::2, 1:4], base[::-1], base.transpose(2, 0, 1), base[..., 2]):
        assert not a.flags.c_contiguous or a.ndim < 3
        x = DLPackOnly(a)
        assert client.sum(x, full=True) == client.sum(np.ascontiguousarray(a), full=True)
        assert client.argmax(x) == client.argmax(np.ascontiguousarray(a))
        got = client.sum(x, offsets=[0, 2, a.size])
        want = client.sum(np.ascontiguousarray(a), offsets=[0, 2, a.size])
        assert np.array_equal(got, want)


def test_pipelined(client):
    xs = [DLPackOnly(sample("float64", n, seed=n)) for n in (5, 9, 11)]
    futs = [client.submit("sum", x) for x in xs]
    assert [f.result() for f in futs] == [client.sum(x._a) for x in xs]


def test_dtypes_refused(client):
    with pytest.raises(TypeError, match="gpured reduces int32"):
        client.sum(DLPackOnly(np.zeros(4, dtype="complex64")))


@pytest.mark.parametrize("dtype", ["float16", "int8", "uint8", "int16", "uint16", "bool"])
def test_small_dtypes(client, dtype):
    a = (np.arange(-50, 51) * 7).astype(dtype)[::-1]
    try:
        np.from_dlpack(a)
    except BufferError:
        # NumPy before 1.25 exports no bool through DLPack
        assert dtype == "bool"
        with pytest.raises(TypeError, match="cannot be read through DLPack"):
            client.sum(DLPackOnly(a))
        return
    for op in ("sum", "min", "max", "sumsq", "argmax"):
        assert client.reduce(op, DLPackOnly(a)) == client.reduce(op, a)
    assert np.array_equal(client.cumsum(DLPackOnly(a)), client.cumsum(a))


def test_capsule_read():
    """The DLTensor reading that the CUDA route uses, on host capsules."""
    a = np.arange(24, dtype="<f8").reshape(4, 6)
    ptr, dev, dev_id, dt, shape, strides = _device.dltensor(a.__dlpack__())
    assert (ptr, dev, dev_id, dt, shape) == (a.ctypes.data, 1, 0, "f64", (4, 6))
    assert strides in (None, (6, 1))
    v = a[1:, ::3]
    ptr, dev, _, dt, shape, strides = _device.dltensor(v.__dlpack__())
    assert (ptr, shape, strides) == (v.ctypes.data, (3, 2), (6, 3))
    for name in DTYPES + ["float16", "int8", "uint8", "int16", "uint16"]:
        assert _device.dltensor(np.zeros(2, name).__dlpack__())[3] == \
            _wire.wire_name(np.dtype(name))
    assert _device.dltensor(np.zeros(2, "float16").__dlpack__())[3] == "f16"
    assert _device.dltensor(np.zeros(2, "complex64").__dlpack__())[3] is None


def test_cuda_asked_for_the_legacy_stream(client):
    """A CUDA DLPack array is asked for its data on stream 1 (the legacy
    default stream) before anything else; this one's capsule, of host
    memory, is then refused for what it is."""
    x = DLPackCuda(np.arange(4, dtype=np.float32))
    with pytest.raises(gpured.NotSupported, match="capsule says device type 1"):
        client.sum(x)
    assert x.streams == [1]


class CudaCapsule:
    """Says it lives on CUDA device 0, and hands out a capsule of a
    DLTensor made here, of DLPack type (code, bits), at an address no
    one reads: what a CUDA producer's capsule says, without a GPU."""

    def __init__(self, code, bits, count=6):
        self._shape = (ctypes.c_int64 * 1)(count)
        t = self._t = _device._DLTensor()
        t.data, t.ndim, t.byte_offset = 0x100000, 1, 0
        t.device = _device._DLDevice(2, 0)
        t.dtype = _device._DLDataType(code, bits, 1)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._t), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, 0)


def test_cuda_capsule_dtypes():
    """DLPack's type codes (dlpack.h: kDLBfloat 4, kDLBool 6,
    kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12) name the wire's dtypes; the
    others are refused for their dtype."""
    known = {(0, 8): "i8", (0, 16): "i16", (1, 8): "u8", (1, 16): "u16", (2, 16): "f16",
             (4, 16): "bf16", (6, 8): "u8", (10, 8): "f8e4m3", (12, 8): "f8e5m2",
             (2, 32): "f32", (1, 64): "u64"}
    for (code, bits), name in known.items():
        sp = _device.span(CudaCapsule(code, bits), allow_copy=False)
        assert (sp.dtype, sp.count, sp.nbytes, sp.ptr) == (name, 6, 6 * bits // 8, 0x100000)
    # kDLFloat8_e4m3 (8) has infinities; complex; bool of 32 bits; fp4
    for code, bits in ((8, 8), (5, 64), (6, 32), (17, 4), (4, 32), (2, 8)):
        with pytest.raises(TypeError, match="gpured reduces .* not this DLPack dtype"):
            _device.span(CudaCapsule(code, bits), allow_copy=False)
