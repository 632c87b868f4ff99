"""GPU memory that the daemon can read in place without bearer handles.

A CUDA daemon maps GPU memory it is handed as a file descriptor (the
allocation exported by the CUDA virtual-memory API): the descriptor is the
capability, only its sender has it. Memory of ``cudaMalloc`` (PyTorch's and
CuPy's default allocators) exports only as a legacy IPC handle, 64 bytes
that anyone who learns them can open, which a daemon takes only when its
operator allows it (``--allow-cuda-ipc``).

:func:`use_shareable_memory` moves a process to exportable memory, before
it allocates its tensors:

    import torch, gpured
    gpured.use_shareable_memory()       # PyTorch: expandable segments
    x = torch.ones(1 << 28, device="cuda")
    gpured.Client().sum(x)              # read in place

- PyTorch: the caching allocator's expandable segments
  (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, switched on at run
  time): tensors allocated from then on lie in exportable memory, however
  many of its segments they span.
- CuPy: a memory pool over :class:`VmmAllocator`, which allocates with
  ``cuMemCreate`` as exportable memory.

Tensors allocated before the switch keep their memory, and the segments
they lie in keep serving small tensors until those are freed: such tensors
go in place only where the daemon allows IPC handles, else through the host
with ``allow_copy=True``. Switch first thing, before the first tensor.
"""

import ctypes
import sys
import threading

from . import _device
from .errors import NotSupported

__all__ = ["use_shareable_memory", "VmmAllocator", "vmm_range"]

_ALLOC_PINNED = 1
_LOC_DEVICE = 1
_HANDLE_POSIX_FD = 1
_ACCESS_RW = 3
_GRAN_MINIMUM = 0


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _Vmm:
    """The driver's virtual-memory calls, on the process's driver."""

    _lock = threading.Lock()
    _one = None

    @classmethod
    def get(cls):
        with cls._lock:
            if cls._one is None:
                cls._one = cls(_device.driver())
            return cls._one

    def __init__(self, drv):
        self.drv = drv
        lib = drv.lib
        u64, sz, p = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        lib.cuMemCreate.argtypes = [p, sz, p, ctypes.c_ulonglong]
        lib.cuMemAddressReserve.argtypes = [p, sz, sz, u64, ctypes.c_ulonglong]
        lib.cuMemAddressFree.argtypes = [u64, sz]
        lib.cuMemMap.argtypes = [u64, sz, sz, u64, ctypes.c_ulonglong]
        lib.cuMemUnmap.argtypes = [u64, sz]
        lib.cuMemSetAccess.argtypes = [u64, sz, p, sz]
        lib.cuMemGetAllocationGranularity.argtypes = [p, p, ctypes.c_int]
        self.lib = lib
        self._gran = {}

    def prop(self, ordinal):
        return _Prop(type=_ALLOC_PINNED, requestedHandleTypes=_HANDLE_POSIX_FD,
                     location=_Location(_LOC_DEVICE, ordinal))

    def granule(self, ordinal):
        g = self._gran.get(ordinal)
        if g is None:
            v = ctypes.c_size_t()
            prop = self.prop(ordinal)
            self.drv.check(self.lib.cuMemGetAllocationGranularity(ctypes.byref(v),
                                                                  ctypes.byref(prop),
                                                                  _GRAN_MINIMUM),
                           "cuMemGetAllocationGranularity")
            g = self._gran[ordinal] = v.value
        return g

    def reserve(self, size, gran):
        ptr = ctypes.c_uint64()
        self.drv.check(self.lib.cuMemAddressReserve(ctypes.byref(ptr), size, gran, 0, 0),
                       "cuMemAddressReserve")
        return ptr.value

    def map_new(self, ordinal, at, size):
        """A new exportable allocation of size bytes mapped at address at,
        readable and writable on its device. The mapping holds it."""
        h = ctypes.c_uint64()
        prop = self.prop(ordinal)
        self.drv.check(self.lib.cuMemCreate(ctypes.byref(h), size, ctypes.byref(prop), 0),
                       "cuMemCreate")
        try:
            self.drv.check(self.lib.cuMemMap(at, size, 0, h.value, 0), "cuMemMap")
        finally:
            self.lib.cuMemRelease(h.value)
        acc = _Access(_Location(_LOC_DEVICE, ordinal), _ACCESS_RW)
        r = self.lib.cuMemSetAccess(at, size, ctypes.byref(acc), 1)
        if r != 0:
            self.lib.cuMemUnmap(at, size)
            self.drv.check(r, "cuMemSetAccess")

    def release(self, ordinal, ptr, parts, size):
        def run():
            for at, n in parts:
                self.lib.cuMemUnmap(at, n)
            self.lib.cuMemAddressFree(ptr, size)
        self.drv.in_primary(ordinal, run)


class VmmRange:
    """Device memory of one or more exportable allocations mapped back to
    back from ``ptr``: ``size`` bytes on device ``ordinal``. Freed by
    close() or when collected."""

    def __init__(self, sizes, ordinal=0):
        vmm = _Vmm.get()
        gran = vmm.granule(ordinal)
        sizes = [-(-int(n) // gran) * gran for n in sizes]
        if not sizes or min(sizes) <= 0:
            raise ValueError("a range needs parts of at least one byte")
        self.ordinal, self.size, self.parts = ordinal, sum(sizes), []
        self.ptr = None

        def build():
            self.ptr = vmm.reserve(self.size, gran)
            at = self.ptr
            for n in sizes:
                vmm.map_new(ordinal, at, n)
                self.parts.append((at, n))
                at += n
        try:
            vmm.drv.in_primary(ordinal, build)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.ptr is not None:
            _Vmm.get().release(self.ordinal, self.ptr, self.parts, self.size)
            self.ptr, self.parts = None, []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def vmm_range(sizes, ordinal=0):
    """A VmmRange of allocations of the given sizes (each rounded up to the
    device's granule, 2 MiB on current GPUs), mapped back to back."""
    return VmmRange(sizes, ordinal)


class _Slab:
    """A VmmRange that small arrays are carved from: freed once no new
    piece will come from it (closed) and none is left."""

    __slots__ = ("range", "used", "pieces", "closed")

    def __init__(self, r):
        self.range, self.used, self.pieces, self.closed = r, 0, 0, False

    def drop(self, close=False):
        """One piece fewer (close: none will come, and no piece is
        dropped); frees the range when that was the last."""
        with VmmAllocator._lock:
            if close:
                self.closed = True
            else:
                self.pieces -= 1
            free = self.closed and self.pieces == 0
        if free:
            self.range.close()


class _Piece:
    """What a small array's memory holds: its slab, until it is freed."""

    __slots__ = ("slab",)

    def __init__(self, slab):
        self.slab = slab
        slab.pieces += 1

    def __del__(self):
        self.slab.drop()


class VmmAllocator:
    """A CuPy allocator (``cupy.cuda.MemoryPool(VmmAllocator())``) of
    exportable memory, made with ``cuMemCreate``. Requests of at least
    ``slab`` bytes get allocations of their own (whole granules); smaller
    ones are carved, 512-byte aligned, from shared allocations of
    ``slab`` bytes, so that small arrays do not take a granule each (and
    go to the daemon as one mapping a slab). An allocation is freed once
    CuPy has freed every array in it."""

    # reentrant: a piece may be collected, and freed, while it is held
    _lock = threading.RLock()

    def __init__(self, slab=2 << 20):
        self.slab_bytes = slab
        self._open = {}             # device -> the _Slab small requests come from

    def __call__(self, size):
        import cupy
        dev = cupy.cuda.Device().id
        size = max(int(size), 1)
        if size >= self.slab_bytes:
            r = VmmRange([size], dev)
            mem = cupy.cuda.memory.UnownedMemory(r.ptr, r.size, r, dev)
            return cupy.cuda.memory.MemoryPointer(mem, 0)
        size = -(-size // 512) * 512
        old = None
        with self._lock:
            slab = self._open.get(dev)
            if slab is None or slab.used + size > slab.range.size:
                old = slab
                slab = self._open[dev] = _Slab(VmmRange([self.slab_bytes], dev))
            at = slab.used
            slab.used += size
            piece = _Piece(slab)
        if old is not None:
            old.drop(close=True)
        mem = cupy.cuda.memory.UnownedMemory(slab.range.ptr + at, size, piece, dev)
        return cupy.cuda.memory.MemoryPointer(mem, 0)


def _torch_expandable():
    """PyTorch's caching allocator with expandable segments from now on;
    the segments it caches unused are given back, so that new tensors do
    not land in them."""
    import torch
    acc = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    try:
        if acc is not None:
            acc("expandable_segments:True")
        else:
            torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    except (AttributeError, RuntimeError) as e:
        raise NotSupported("this PyTorch cannot switch to expandable segments at run time "
                           "(%s): start the process with PYTORCH_CUDA_ALLOC_CONF="
                           "expandable_segments:True" % e) from None
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# The CuPy pool use_shareable_memory() made, once it has.
cupy_pool = None


def use_shareable_memory(torch=None, cupy=None):
    """Allocate GPU memory the daemon can read in place, with no IPC handle,
    from now on: PyTorch's caching allocator with expandable segments, and
    CuPy's default pool over :class:`VmmAllocator`. torch, cupy: True to
    switch that library (importing it), False to leave it, None (the
    default) to switch it where it is imported already. Returns the names
    of the libraries switched."""
    done = []
    if torch or (torch is None and "torch" in sys.modules):
        _torch_expandable()
        done.append("torch")
    if cupy or (cupy is None and "cupy" in sys.modules):
        import cupy as cp
        global cupy_pool
        cupy_pool = cp.cuda.MemoryPool(VmmAllocator())
        cp.cuda.set_allocator(cupy_pool.malloc)
        done.append("cupy")
    return done
