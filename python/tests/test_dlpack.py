"""Arrays that speak only DLPack (__dlpack__ and __dlpack_device__, as
JAX, TensorFlow and Paddle arrays do): on the host they are read through
np.from_dlpack, as the same memory; a non-contiguous one is copied, as a
non-contiguous NumPy array is. CUDA ones go the way of
__cuda_array_interface__ arrays (test_gpu_arrays.py); here only what needs
no GPU: the capsule's reading, and the stream asked for."""

import numpy as np
import pytest

import gpured
from gpured import _device

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


@pytest.mark.parametrize("dtype", ["float16", "bool", "int8", "complex64"])
def test_dtypes_refused(client, dtype):
    with pytest.raises(TypeError, match="gpured reduces int32|cannot be read through DLPack"):
        client.sum(DLPackOnly(np.zeros(4, dtype=dtype)))


def test_capsule_read():
    """The DLTensor reading that the CUDA route uses, on host capsules."""
    a = np.arange(24, dtype="<f8").reshape(4, 6)
    ptr, dev, dev_id, dt, shape, strides = _device.dltensor(a.__dlpack__())
    assert (ptr, dev, dev_id, dt, shape) == (a.ctypes.data, 1, 0, np.dtype("<f8"), (4, 6))
    assert strides in (None, (6, 1))
    v = a[1:, ::3]
    ptr, dev, _, dt, shape, strides = _device.dltensor(v.__dlpack__())
    assert (ptr, shape, strides) == (v.ctypes.data, (3, 2), (6, 3))
    for name in DTYPES:
        assert _device.dltensor(np.zeros(2, name).__dlpack__())[3] == np.dtype(name)
    assert _device.dltensor(np.zeros(2, "float16").__dlpack__())[3] == np.dtype("<f2")


def test_cuda_asked_for_the_legacy_stream(client):
    """A CUDA DLPack array is asked for its data on stream 1 (the legacy
    default stream) before anything else; this one's capsule, of host
    memory, is then refused for what it is."""
    x = DLPackCuda(np.arange(4, dtype=np.float32))
    with pytest.raises(gpured.NotSupported, match="capsule says device type 1"):
        client.sum(x)
    assert x.streams == [1]
