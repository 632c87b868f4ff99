"""PyTorch tensors and CuPy arrays: CPU ones are read through NumPy; GPU
ones are refused (NotSupported) unless allow_copy=True. Tests that need
torch, cupy or a GPU skip where there is none."""

import numpy as np
import pytest

import gpured


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
    with pytest.raises(TypeError):
        client.sum(torch.ones(3, dtype=torch.bfloat16))


def test_torch_cuda(client):
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    t = torch.arange(10, dtype=torch.float32, device="cuda")
    with pytest.raises(gpured.NotSupported):
        client.sum(t)
    assert client.sum(t, allow_copy=True) == 45.0


def test_cupy(client):
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device for cupy")
    except Exception as e:       # no driver
        pytest.skip("cupy has no GPU: %s" % e)
    x = cupy.arange(10, dtype=cupy.float64)
    with pytest.raises(gpured.NotSupported):
        client.sum(x)
    assert client.sum(x, allow_copy=True) == 45.0


def test_numba_device_array(client):
    cuda = pytest.importorskip("numba.cuda")
    try:
        if not cuda.is_available():
            pytest.skip("no CUDA device for numba")
        x = cuda.to_device(np.arange(10, dtype=np.int32))
    except Exception as e:
        pytest.skip("numba has no GPU: %s" % e)
    with pytest.raises(gpured.NotSupported):
        client.sum(x)
    assert client.sum(x, allow_copy=True) == 45


def test_jax_arrays(client):
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
    with pytest.raises(gpured.NotSupported):
        client.sum(x)
    assert client.sum(x, allow_copy=True) == 45.0


def test_host_array_whose_cuda_interface_raises(client):
    class HostOnly:
        @property
        def __cuda_array_interface__(self):
            raise ValueError("only for GPU buffers")

        def __array__(self, dtype=None, copy=None):
            return np.arange(4, dtype=np.float64)
    assert client.sum(HostOnly()) == 6.0
