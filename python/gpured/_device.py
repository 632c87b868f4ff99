"""Arrays in GPU memory (PyTorch tensors, CuPy arrays, anything with
``__cuda_array_interface__``, or with ``__dlpack__`` on a CUDA device),
reduced by the daemon where they lie (PROTOCOL.md, "map", kinds "cuda"
and "cuda_ipc").

The CUDA driver (libcuda.so.1, through ctypes) says which allocation an
array lies in: memory from cudaMalloc (PyTorch's default caching allocator,
CuPy's pool) is handed over as a legacy IPC handle, which the daemon only
accepts when started with ``--allow-cuda-ipc yes``; memory from the
virtual-memory API whose allocation can be exported as a POSIX file
descriptor (PyTorch's expandable segments) goes as that descriptor. A
connection maps each allocation once and keeps the most recently used
mappings; a reduction then sends a region, an offset and a count.

Before a reduction is sent, the stream that produced the array is
synchronised (PyTorch: the device's current stream; otherwise the stream
named by ``__cuda_array_interface__``, or the whole context; a DLPack
array is asked for with ``stream=1``, the legacy default stream, which its
library orders after its own work and which is then synchronised): the
daemon reads what that stream had finished.

A cumsum writes its prefix sums into GPU memory of the same device, which
the daemon maps writable: a connection may hold an allocation mapped both
ways, and a read takes the writable mapping where there is one, so that
an array and its output in one allocation (in place, or side by side in
PyTorch's or CuPy's pool) name one region."""

import collections
import ctypes
import os
import threading
import weakref

import msgpack
import numpy as np

from . import _wire
from .errors import InvalidParams, NotSupported

# cuda.h
_ATTR_CONTEXT = 1
_ATTR_BUFFER_ID = 7
_ATTR_DEVICE_ORDINAL = 9
_ATTR_IPC_CAPABLE = 10
_ATTR_RANGE_START = 11
_ATTR_RANGE_SIZE = 12
_ATTR_HANDLE_TYPES = 14
_ATTR_MAPPING_SIZE = 18
_ATTR_MAPPING_BASE = 19
_ATTR_BLOCK_ID = 20
_ATTR_MEMORY_TYPE = 2
_MEMORY_DEVICE = 2
_HANDLE_POSIX_FD = 1

_ALLOCATION_ATTRS = (
    (_ATTR_MEMORY_TYPE, ctypes.c_uint), (_ATTR_DEVICE_ORDINAL, ctypes.c_int),
    (_ATTR_IPC_CAPABLE, ctypes.c_int), (_ATTR_RANGE_START, ctypes.c_uint64),
    (_ATTR_RANGE_SIZE, ctypes.c_size_t), (_ATTR_HANDLE_TYPES, ctypes.c_uint64),
    (_ATTR_MAPPING_BASE, ctypes.c_uint64), (_ATTR_MAPPING_SIZE, ctypes.c_uint64),
    (_ATTR_BUFFER_ID, ctypes.c_uint64), (_ATTR_BLOCK_ID, ctypes.c_uint64),
)

# Mappings one connection keeps (the daemon allows 64 regions by default,
# shared with client.empty()).
MAX_MAPS = 16

# DLPack asks a CUDA producer to make its data ready on this stream: 1 is
# the legacy default stream (the array API standard's __dlpack__).
_DLPACK_STREAM = 1
# dlpack.h's DLDataTypeCode (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4,
# kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12) and bits -> wire name.
# A bool is a byte, 0 or 1: u8. (kDLFloat8_e4m3, 8, has infinities: not
# the wire's f8e4m3.)
_DLPACK_DTYPES = {(0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
                  (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
                  (2, 16): "f16", (2, 32): "f32", (2, 64): "f64", (4, 16): "bf16",
                  (6, 8): "u8", (10, 8): "f8e4m3", (12, 8): "f8e5m2"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor, the first member of the DLManagedTensor that a
    "dltensor" capsule holds."""
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dltensor(capsule):
    """What a DLPack capsule (named "dltensor", not yet used) describes:
    (address of the first element, device type, device id, the wire name
    of its dtype or None for one gpured does not reduce, shape, strides in
    elements or None for C order). The capsule stays unused: kept alive,
    its memory stays; dropped, its destructor releases it."""
    ptr = _capsule_pointer(capsule, b"dltensor")
    t = ctypes.cast(ptr, ctypes.POINTER(_DLTensor)).contents
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    d = t.dtype
    dt = _DLPACK_DTYPES.get((d.code, d.bits)) if d.lanes == 1 else None
    return ((t.data or 0) + t.byte_offset, t.device.device_type, t.device.device_id, dt,
            shape, strides)


# str(torch dtype) -> wire name (torch.uint16 only in PyTorch 2.3 and
# later; a bool is a byte, 0 or 1: u8).
_TORCH_DTYPES = {"torch.int32": "i32", "torch.int64": "i64", "torch.uint32": "u32",
                 "torch.uint64": "u64", "torch.float32": "f32", "torch.float64": "f64",
                 "torch.float16": "f16", "torch.bfloat16": "bf16",
                 "torch.float8_e4m3fn": "f8e4m3", "torch.float8_e5m2": "f8e5m2",
                 "torch.int8": "i8", "torch.uint8": "u8", "torch.int16": "i16",
                 "torch.uint16": "u16", "torch.bool": "u8"}


class Span:
    """A contiguous array in GPU memory: address, bytes, elements, dtype
    wire name, and how to wait for the stream that produces it."""

    __slots__ = ("ptr", "nbytes", "count", "dtype", "sync", "owner")

    def __init__(self, ptr, nbytes, count, dtype, sync, owner):
        self.ptr, self.nbytes, self.count, self.dtype = ptr, nbytes, count, dtype
        self.sync, self.owner = sync, owner


def gpu_module(x):
    """"torch" or "cupy" for an array of those libraries, else None."""
    mod = (type(x).__module__ or "").split(".")[0]
    return mod if mod in ("torch", "cupy") else None


def new_like(sp, count, name):
    """A new contiguous array of count elements of wire dtype name on the
    device of Span sp, made by its owner's library (PyTorch or CuPy);
    None for other libraries."""
    x = sp.owner
    lib = gpu_module(x)
    if lib == "torch":
        import torch
        dt = getattr(torch, _wire.NUMPY_DTYPES[name].name)
        return torch.empty(count, dtype=dt, device=x.device)
    if lib == "cupy":
        import cupy
        with cupy.cuda.Device(x.device.id):
            return cupy.empty(count, dtype=_wire.NUMPY_DTYPES[name])
    return None


def out_span(out):
    """The Span of out, an array that is to receive prefix sums, when it
    lives in GPU memory, else None (a host array). ValueError if it is
    not contiguous, TypeError for a dtype gpured does not know."""
    if (gpu_module(out) == "torch" and getattr(out, "is_cuda", False)
            and not out.is_contiguous()):
        raise ValueError("out must be contiguous: the daemon writes the prefix sums in place")
    try:
        sp = span(out, allow_copy=True)
    except TypeError as e:
        raise TypeError("out must be int64, uint64 or float64 (%s)" % e) from None
    if sp is None:
        if _wire._gpu_kind(out) is not None:
            raise ValueError("out must be contiguous: the daemon writes the prefix sums in "
                             "place")
        return None
    return sp


def host_empty(sp):
    """A host array of no elements of sp's dtype (Typed): an empty GPU
    array has no memory to map."""
    return _wire.Typed(np.empty(0, dtype=_wire.NUMPY_DTYPES[sp.dtype]), sp.dtype)


def gpu_span(x, allow_copy):
    """(x, its Span) for an array in GPU memory with elements; (a host
    array of no elements, None) for an empty one, which has no memory to
    map; (x, None) for anything else, NumPy arrays first."""
    if isinstance(x, np.ndarray):
        return x, None
    sp = span(x, allow_copy)
    if sp is not None and sp.count == 0:
        return host_empty(sp), None
    return x, sp


def _not_contiguous(x):
    return NotSupported("%s.%s in GPU memory is not contiguous; gpured reads it in place "
                        "only when it is (pass allow_copy=True to copy it)"
                        % (type(x).__module__, type(x).__name__))


def _torch_span(x, allow_copy):
    import torch
    if not x.is_contiguous():
        if not allow_copy:
            raise _not_contiguous(x)
        x = x.contiguous()
    name = _TORCH_DTYPES.get(str(x.dtype))
    if name is None:
        raise _wire.unsupported(x.dtype)
    return Span(x.data_ptr(), x.numel() * x.element_size(), x.numel(), name,
                _torch_sync(torch, x), x)


def _torch_sync(torch, x):
    """A function that waits for the stream PyTorch has current for x's
    device: through the driver with the stream's handle where this PyTorch
    gives it (cheaper than torch.cuda.current_stream() by several
    microseconds), else through torch."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        dev = x.device
        return lambda: torch.cuda.current_stream(dev).synchronize()
    idx = x.get_device()
    drv = driver()
    # for stream 0, the legacy default stream: the one of the device's context
    ctx = drv.primary(idx)

    def sync():
        stream = raw(idx)
        drv.stream_sync(stream, 0 if stream else ctx)
    return sync


def _c_layout(shape, strides, unit):
    """(elements, whether they lie in C order with no gaps) of an array of
    that shape and strides (None: C order), strides counted in units of
    unit (bytes of one element for __cuda_array_interface__, 1 for DLPack)."""
    count = 1
    for n in shape:
        count *= n
    if strides is None or count <= 1:
        return count, True
    want = unit
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != want:
            return count, False
        want *= n
    return count, True


def _cai_span(x, cai, allow_copy):
    dt = np.dtype(cai["typestr"])
    name = _wire.wire_name(dt)
    if name is None:
        raise _wire.unsupported(dt)
    count, contiguous = _c_layout(tuple(cai["shape"]), cai.get("strides"), dt.itemsize)
    if not contiguous:
        if allow_copy:
            return None
        raise _not_contiguous(x)
    stream = cai.get("stream")

    def sync():
        drv = driver()
        if stream:
            drv.stream_sync(stream)
        else:
            drv.ctx_synchronize(cai["data"][0])
    return Span(cai["data"][0], count * dt.itemsize, count, name, sync, x)


def _dlpack_capsule(x):
    """x's DLPack capsule, and whether x was asked for it on _DLPACK_STREAM
    (a producer from before the stream protocol takes no stream)."""
    try:
        return x.__dlpack__(stream=_DLPACK_STREAM), True
    except TypeError:
        return x.__dlpack__(), False


def _dlpack_span(x, allow_copy):
    capsule, on_stream = _dlpack_capsule(x)
    ptr, dev_type, _dev_id, name, shape, strides = dltensor(capsule)
    t = type(x)
    if dev_type != _wire.DLPACK_CUDA:
        raise NotSupported("%s.%s says it lives on a CUDA device (__dlpack_device__), but its "
                           "DLPack capsule says device type %d" % (t.__module__, t.__name__,
                                                                   dev_type))
    if name is None:
        raise _wire.unsupported("this DLPack dtype")
    size = _wire.NUMPY_DTYPES[name].itemsize
    count, contiguous = _c_layout(shape, strides, 1)
    if not contiguous:
        if allow_copy:
            return None
        raise _not_contiguous(x)

    def sync(_keep=capsule):
        # The capsule, held here, keeps the memory for as long as the Span.
        drv = driver()
        if on_stream:
            drv.stream_sync(_DLPACK_STREAM, drv._ctx(ptr))
        else:
            drv.ctx_synchronize(ptr)
    return Span(ptr, count * size, count, name, sync, x)


def dlpack_to_host(x):
    """A NumPy copy of x, an array that speaks only DLPack, in CUDA memory
    and contiguous (Typed); NotSupported where it is not contiguous."""
    sp = _dlpack_span(x, allow_copy=True)
    if sp is None:
        t = type(x)
        raise NotSupported("%s.%s in GPU memory is not contiguous, and speaks only DLPack: "
                           "gpured cannot copy it to the host" % (t.__module__, t.__name__))
    a = np.empty(sp.count, dtype=_wire.NUMPY_DTYPES[sp.dtype])
    if sp.count:
        sp.sync()
        driver().copy_to_host(a, sp.ptr)
    return _wire.Typed(a, sp.dtype)


def span(x, allow_copy):
    """x's Span when it lives in CUDA memory the daemon may read in place;
    None when it does not live on a GPU (or, with allow_copy, when it
    should be copied instead). Raises NotSupported or TypeError when it is
    on a GPU and cannot be read in place."""
    mod = type(x).__module__ or ""
    if mod.startswith("torch"):
        if not getattr(x, "is_cuda", False):
            return None
        return _torch_span(x, allow_copy)
    try:
        cai = x.__cuda_array_interface__
    except Exception:
        cai = None
    if isinstance(cai, dict) and "data" in cai:
        return _cai_span(x, cai, allow_copy)
    if _wire.dlpack_device(x) == _wire.DLPACK_CUDA and hasattr(x, "__dlpack__"):
        return _dlpack_span(x, allow_copy)
    return None


class _Driver:
    def __init__(self):
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise NotSupported("the CUDA driver cannot be loaded (%s)" % e) from None
        self.lib = lib
        u64 = ctypes.c_uint64
        lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, u64]
        lib.cuPointerGetAttributes.argtypes = [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
                                               u64]
        lib.cuIpcGetMemHandle.argtypes = [ctypes.c_void_p, u64]
        lib.cuMemRetainAllocationHandle.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cuMemExportToShareableHandle.argtypes = [ctypes.c_void_p, u64, ctypes.c_int,
                                                     ctypes.c_ulonglong]
        lib.cuMemRelease.argtypes = [u64]
        lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        lib.cuCtxPopCurrent_v2.argtypes = [ctypes.c_void_p]
        lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.cuDeviceGetUuid_v2.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.cuDeviceGet.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.c_void_p]
        lib.cuMemcpyHtoD_v2.argtypes = [u64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, u64, ctypes.c_size_t]
        self.check(lib.cuInit(0), "cuInit")
        self._sync_c = _c_stream_sync(lib)
        if self._sync_c is None:
            # ctypes' PyDLL keeps the GIL across the call: the query
            # costs no hand-over to another thread and back
            self._query = ctypes.PyDLL(lib._name, handle=lib._handle).cuStreamQuery
            self._query.argtypes = [ctypes.c_void_p]
        self._uuids = {}
        self._primary = {}
        self._tls = threading.local()

    def check(self, r, call):
        if r != 0:
            s = ctypes.c_char_p()
            self.lib.cuGetErrorName(r, ctypes.byref(s))
            name = s.value.decode() if s.value else "error %d" % r
            raise NotSupported("%s failed: %s" % (call, name))

    def stream_sync(self, stream, ctx=0):
        """Wait for CUstream stream (an int; 0, the legacy default stream
        of context ctx, which is then not 0) with context ctx current (0:
        whichever is): a query, and only when work is still queued a
        synchronize (which lets other threads run meanwhile)."""
        if self._sync_c is not None:
            r = self._sync_c(stream, ctx)
        elif ctx:
            r = self._with_ctx(ctx, lambda: self._query_sync(stream))
        else:
            r = self._query_sync(stream)
        if r:
            self.check(r, "cuStreamSynchronize")

    def _query_sync(self, stream):
        r = self._query(stream)
        if r == _CUDA_ERROR_NOT_READY:
            r = self.lib.cuStreamSynchronize(stream)
        return r

    def attr(self, ptr, attr, ctype):
        v = ctype()
        self.check(self.lib.cuPointerGetAttribute(ctypes.byref(v), attr, ptr),
                   "cuPointerGetAttribute(%d)" % attr)
        return v.value

    def attrs(self, ptr, spec):
        """Several attributes of ptr in one call: spec is a tuple of
        (attribute, ctypes type); returns their values. Where ptr is no
        CUDA memory they read as zero. The call's buffers are made once a
        thread and spec."""
        bufs = getattr(self._tls, "bufs", None)
        if bufs is None:
            bufs = self._tls.bufs = {}
        b = bufs.get(spec)
        if b is None:
            vals = [t() for _a, t in spec]
            kinds = (ctypes.c_int * len(spec))(*(a for a, _t in spec))
            ptrs = (ctypes.c_void_p * len(spec))(*(ctypes.addressof(v) for v in vals))
            b = bufs[spec] = (vals, kinds, ptrs, len(spec))
        vals, kinds, ptrs, n = b
        for v in vals:
            v.value = 0
        r = self.lib.cuPointerGetAttributes(n, kinds, ptrs, ptr)
        if r:
            self.check(r, "cuPointerGetAttributes")
        return tuple([v.value for v in vals])

    def block_at(self, ptr):
        """The memory block (its id) that address ptr is mapped to; 0
        where none."""
        v = ctypes.c_uint64()
        if self.lib.cuPointerGetAttribute(ctypes.byref(v), _ATTR_BLOCK_ID, ptr):
            return 0
        return v.value

    def uuid(self, ordinal):
        u = self._uuids.get(ordinal)
        if u is None:
            dev = ctypes.c_int()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
            raw = (ctypes.c_ubyte * 16)()
            self.check(self.lib.cuDeviceGetUuid_v2(raw, dev.value), "cuDeviceGetUuid")
            h = bytes(raw).hex()
            u = "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
            self._uuids[ordinal] = u
        return u

    def primary(self, ordinal):
        """The primary context of device ordinal (the runtime's), retained
        once for the life of the process."""
        ctx = self._primary.get(ordinal)
        if ctx is None:
            dev = ctypes.c_int()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
            c = ctypes.c_void_p()
            self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(c), dev.value),
                       "cuDevicePrimaryCtxRetain")
            ctx = self._primary[ordinal] = c.value
        return ctx

    def _ctx(self, ptr):
        """The context ptr was allocated in; for memory of a device's
        primary context (the runtime's, which the pointer does not name),
        that one, retained once for the life of the process."""
        ctx = self.attr(ptr, _ATTR_CONTEXT, ctypes.c_void_p)
        if ctx:
            return ctx
        return self.primary(self.attr(ptr, _ATTR_DEVICE_ORDINAL, ctypes.c_int))

    def _with_ctx(self, ctx, fn):
        """fn() with context ctx current."""
        self.check(self.lib.cuCtxPushCurrent_v2(ctypes.c_void_p(ctx)), "cuCtxPushCurrent")
        try:
            return fn()
        finally:
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def in_primary(self, ordinal, fn):
        """fn() with device ordinal's primary context current."""
        return self._with_ctx(self.primary(ordinal), fn)

    def _in_ctx(self, ptr, fn):
        """fn() with the context of the memory at ptr current."""
        return self._with_ctx(self._ctx(ptr), fn)

    def ctx_synchronize(self, ptr):
        self._in_ctx(ptr, lambda: self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize"))

    def copy_to_device(self, ptr, a):
        """Copy host array a to device address ptr, and wait until it is
        there."""
        def copy():
            self.check(self.lib.cuMemcpyHtoD_v2(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
            self.check(self.lib.cuStreamSynchronize(None), "cuStreamSynchronize")
        self._in_ctx(ptr, copy)

    def copy_to_host(self, a, ptr):
        """Copy a.nbytes from device address ptr into host array a."""
        self._in_ctx(ptr, lambda: self.check(
            self.lib.cuMemcpyDtoH_v2(a.ctypes.data, ptr, a.nbytes), "cuMemcpyDtoH"))

    def ipc_handle(self, base):
        h = (ctypes.c_ubyte * 64)()
        self._in_ctx(base, lambda: self.check(self.lib.cuIpcGetMemHandle(h, base),
                                              "cuIpcGetMemHandle"))
        return bytes(h)

    def export_fd(self, ptr):
        h = ctypes.c_uint64()
        self.check(self.lib.cuMemRetainAllocationHandle(ctypes.byref(h), ctypes.c_void_p(ptr)),
                   "cuMemRetainAllocationHandle")
        try:
            fd = ctypes.c_int(-1)
            self.check(self.lib.cuMemExportToShareableHandle(ctypes.byref(fd), h.value,
                                                             _HANDLE_POSIX_FD, 0),
                       "cuMemExportToShareableHandle")
            return fd.value
        finally:
            self.lib.cuMemRelease(h.value)


_CUDA_ERROR_NOT_READY = 600


def _c_stream_sync(lib):
    """gpured._fast's stream_sync, given lib's stream and context calls; None
    without the extension (or with $GPURED_PURE_PYTHON set)."""
    if os.environ.get("GPURED_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _fast
    except ImportError:
        return None
    if not hasattr(_fast, "stream_sync"):
        return None
    _fast.cuda_calls(*(ctypes.cast(f, ctypes.c_void_p).value
                       for f in (lib.cuStreamQuery, lib.cuStreamSynchronize, lib.cuCtxGetCurrent,
                                 lib.cuCtxPushCurrent_v2, lib.cuCtxPopCurrent_v2)))
    return _fast.stream_sync


_driver = None


def driver():
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


# The parts found after a first allocation (ordinal, block, base) of a
# range of several: ((base, bytes, block), ...), for the most recent ones.
_PARTS = collections.OrderedDict()
_PARTS_LOCK = threading.Lock()
_PARTS_MAX = 64


class Allocation:
    """Where a Span lies: the allocation to map, and how. Memory of the
    virtual-memory API (expandable segments, exportable pools) may span
    several allocations mapped back to back: parts lists each one's
    (base address, bytes), and the range is mapped as one region."""

    __slots__ = ("key", "base", "size", "device", "vmm", "parts")

    def __init__(self, sp):
        drv = driver()
        ptr = sp.ptr
        (mtype, ordinal, ipc, start, size, types, mbase, msize, buf,
         block) = drv.attrs(ptr, _ALLOCATION_ATTRS)
        if mtype != _MEMORY_DEVICE:
            raise NotSupported("the CUDA driver does not know address 0x%x as device memory"
                               % ptr)
        self.device = drv.uuid(ordinal)
        self.vmm = False
        self.parts = None
        end = ptr + sp.nbytes
        if ipc:
            self.base, self.size = start, size
            self.key = (ordinal, "ipc", buf)
        elif types & _HANDLE_POSIX_FD:
            self.vmm = True
            self.base, self.size = mbase, msize
            self.key = (ordinal, "vmm", block, mbase)
            if end > mbase + msize:
                self._more_parts(drv, ordinal, block, end)
        else:
            raise NotSupported("its allocation can be handed to another process neither as "
                               "a legacy IPC handle nor as a file descriptor")
        if end > self.base + self.size:
            raise NotSupported("it spans several allocations")

    def _more_parts(self, drv, ordinal, block, end):
        """The allocations mapped after the first up to end: each must be
        exportable, of the same device, and start where the one before
        it ends. The key names every part (its memory block and address),
        so that memory the allocator unmaps and maps anew is mapped anew.
        What a walk found is kept (_PARTS): the next array over the same
        parts costs one query a part, that its block is still there."""
        first = (ordinal, block, self.base)
        known = _PARTS.get(first, ())
        parts = [(self.base, self.size)]
        key = [block, self.base]
        at = self.base + self.size
        i = 0
        stale = False
        while at < end:
            if i < len(known) and known[i][0] == at and drv.block_at(at) == known[i][2]:
                mbase, msize, blk = known[i]
            else:
                stale = stale or i < len(known)
                known = known[:i]
                (mtype, o, _ipc, _start, _size, types, mbase, msize, _buf,
                 blk) = drv.attrs(at, _ALLOCATION_ATTRS)
                if mtype != _MEMORY_DEVICE or o != ordinal or mbase != at or not msize:
                    raise NotSupported("it spans allocations that are not mapped back to back "
                                       "on one device")
                if not types & _HANDLE_POSIX_FD:
                    raise NotSupported("it spans allocations of which one cannot be exported "
                                       "as a file descriptor")
                known = known + ((mbase, msize, blk),)
            parts.append((mbase, msize))
            key += (blk, mbase)
            at = mbase + msize
            i += 1
        with _PARTS_LOCK:
            if stale or len(known) > len(_PARTS.get(first, ())):
                _PARTS[first] = known
            if first in _PARTS:
                _PARTS.move_to_end(first)
            while len(_PARTS) > _PARTS_MAX:
                _PARTS.popitem(last=False)
        self.parts = parts
        self.size = at - self.base
        self.key = (ordinal, "vmm") + tuple(key)

    def map_params(self, writable=False):
        """(params of the map request, the fd to send or None); the caller
        closes the fd. writable: mapped for writing too (a cumsum's
        output). Where the range has several parts, this maps the first
        and part_requests() the others."""
        drv = driver()
        if self.vmm:
            params, fd = {"kind": "cuda", "bytes": self.size, "device": self.device}, \
                drv.export_fd(self.base)
            if self.parts:
                params["part_bytes"] = self.parts[0][1]
        else:
            params, fd = {"kind": "cuda_ipc", "handle": drv.ipc_handle(self.base),
                          "bytes": self.size, "device": self.device}, None
        if writable:
            params["writable"] = True
        return params, fd

    def part_requests(self, region):
        """For each part after the first: (the bytes after the msgid of
        its map_part request into region, its base address, to export
        with export_fd just before sending)."""
        for base, size in (self.parts or ())[1:]:
            yield (_wire._str("map_part") + msgpack.packb([{"region": region, "bytes": size}]),
                   base)


# Allocations of arrays that an allocator manages (PyTorch's, CuPy's), by
# id of the array: (weak reference to it, address, bytes, Allocation).
# While such an array lives its memory stays mapped where it is, so the
# next call with the same array needs no query of the driver.
_LIVE = collections.OrderedDict()
_LIVE_LOCK = threading.Lock()
_LIVE_MAX = 64


def allocation(sp, allow_copy):
    """The Allocation that Span sp lies in; None when it cannot be handed
    over and allow_copy says to copy it instead."""
    owner = sp.owner
    managed = type(owner).__module__.startswith(("torch", "cupy"))
    if managed:
        hit = _LIVE.get(id(owner))
        if hit is not None and hit[0]() is owner and hit[1] == sp.ptr and hit[2] == sp.nbytes:
            return hit[3]
    try:
        a = Allocation(sp)
        if managed:
            try:
                ref = weakref.ref(owner)
            except TypeError:
                return a
            with _LIVE_LOCK:
                _LIVE[id(owner)] = (ref, sp.ptr, sp.nbytes, a)
                if len(_LIVE) > _LIVE_MAX:
                    _LIVE.popitem(last=False)
        return a
    except NotSupported as e:
        if allow_copy:
            return None
        t = type(sp.owner)
        raise NotSupported("%s.%s lives in GPU memory that gpured cannot read in place: %s. "
                           "Pass allow_copy=True to copy it to the host first"
                           % (t.__module__, t.__name__, e.message)) from None


def map_refused(e, allow_copy):
    """The daemon refused to map GPU memory (e, an Error): None to copy
    instead (allow_copy), else raise it again, saying what to do."""
    if allow_copy:
        return None
    hint = ""
    if "cuda_ipc is off" in e.message:
        hint = ("; or call gpured.use_shareable_memory() before allocating, so that PyTorch "
                "and CuPy allocate memory that goes in place as a file descriptor")
    raise type(e)(e.message + " (pass allow_copy=True to copy GPU arrays through the host "
                  "instead%s)" % hint, e.code) from None


def map_tail(params):
    """The bytes after the msgid of a map request."""
    return _wire._str("map") + msgpack.packb([params])


class DeviceMaps:
    """The device allocations one connection has mapped, most recently
    used last: (allocation key, writable) -> (region id, base address).
    An allocation first mapped read-only and later needed writable (a
    cumsum's output) is mapped again, writable; the read-only mapping
    stays for the requests that name it, and ages out. Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._maps = collections.OrderedDict()
        # counts the times a mapping was dropped: a request made for a
        # mapping of generation g names a live region while gen == g
        self.gen = 0

    def __len__(self):
        return len(self._maps)

    def lookup(self, alloc, writable=False):
        """(region id, base address) of a mapping of alloc, or None: a
        writable one when writable, else either, the writable one first."""
        with self._lock:
            for key in ((alloc.key, True),) if writable else ((alloc.key, True),
                                                              (alloc.key, False)):
                hit = self._maps.get(key)
                if hit is not None:
                    self._maps.move_to_end(key)
                    return hit
            return None

    def store(self, alloc, res, writable=False):
        """Remember the mapping a map request answered (res), writable or
        not; returns (region id, base address) to use and the region ids
        to unmap: the least recently used beyond MAX_MAPS, or this one
        when another thread mapped the same allocation meanwhile."""
        region = res.get("region") if isinstance(res, dict) else None
        if not isinstance(region, int):
            raise InvalidParams("map answered %r" % (res,))
        key = (alloc.key, writable)
        with self._lock:
            hit = self._maps.get(key)
            if hit is not None:
                return hit, [region]
            hit = self._maps[key] = (region, alloc.base)
            out = []
            while len(self._maps) > MAX_MAPS:
                out.append(self._maps.popitem(last=False)[1][0])
                self.gen += 1
            return hit, out

    def clear(self):
        """Forget every mapping: the connection is gone."""
        with self._lock:
            self._maps.clear()
            self.gen += 1
