"""What goes over the socket: request headers built by hand (so an array's
bytes are sent from its own memory), dtypes, and turning inputs into
contiguous NumPy arrays. No I/O here."""

import operator
import os
import struct
from collections import namedtuple

import numpy as np

from .errors import NotSupported, TooLarge

OPS = ("sum", "min", "max", "sumsq")
# Ops whose result is an ArgResult: the extreme and where it is.
ARG_OPS = ("argmin", "argmax")
# count, sum, min, max, mean and variance in one pass: a Moments.
MOMENTS = "moments"
# the prefix sums, a NumPy array (_cumsum.py)
CUMSUM = "cumsum"

# The wire's dtypes, in the order of the C enums (PROTOCOL.md).
DTYPE_NAMES = ("i32", "i64", "u32", "u64", "f32", "f64", "f16", "bf16", "f8e4m3", "f8e5m2",
               "i8", "u8", "i16", "u16")
# Those whose elements are floats: their sums, mins and maxes are float64.
FLOAT_NAMES = frozenset(("f32", "f64", "f16", "bf16", "f8e4m3", "f8e5m2"))

# NumPy dtype (little-endian) -> wire name. A bool is a byte, 0 or 1: it
# reduces as u8 (its sum counts the True).
_DTYPES = {
    np.dtype("<i4"): "i32",
    np.dtype("<i8"): "i64",
    np.dtype("<u4"): "u32",
    np.dtype("<u8"): "u64",
    np.dtype("<f4"): "f32",
    np.dtype("<f8"): "f64",
    np.dtype("<f2"): "f16",
    np.dtype("i1"): "i8",
    np.dtype("u1"): "u8",
    np.dtype("<i2"): "i16",
    np.dtype("<u2"): "u16",
    np.dtype("?"): "u8",
}
# The dtypes NumPy has only with the ml_dtypes package, by their NumPy
# name (np.dtype(...).name): looked up by name, so that gpured never
# needs that package.
_NAMED_DTYPES = {"bfloat16": ("bf16", 2), "float8_e4m3fn": ("f8e4m3", 1),
                 "float8_e5m2": ("f8e5m2", 1)}
# Wire name -> the NumPy dtype of its elements; for those NumPy lacks
# without ml_dtypes, the unsigned integer of their size, which carries
# their bits (Typed).
NUMPY_DTYPES = {name: dt for dt, name in _DTYPES.items() if dt.kind != "b"}
NUMPY_DTYPES.update({"bf16": np.dtype("<u2"), "f8e4m3": np.dtype("u1"),
                     "f8e5m2": np.dtype("u1")})
# Wire name -> the name NumPy, ml_dtypes and PyTorch give its dtype.
TYPE_NAMES = {name: dt.name for name, dt in NUMPY_DTYPES.items()}
TYPE_NAMES.update({v[0]: k for k, v in _NAMED_DTYPES.items()})
SUPPORTED = ("int32, int64, uint32, uint64, float32, float64, float16, int8, uint8, int16, "
             "uint16, bool (as uint8), and bfloat16, float8_e4m3fn and float8_e5m2 "
             "(ml_dtypes, PyTorch)")


def wire_name(dt):
    """The wire name of NumPy dtype dt, or None (for one of another byte
    order too: as_array() turns those around)."""
    name = _DTYPES.get(dt)
    if name is None and dt.byteorder != ">":
        named = _NAMED_DTYPES.get(dt.name)
        if named is not None and dt.itemsize == named[1]:
            name = named[0]
    return name


class Typed(namedtuple("Typed", "array name")):
    """A NumPy array and the wire dtype of its elements: as_array()'s
    result, passed on where an array of a dtype NumPy has no type for
    (bfloat16, float8) travels as its bits (NUMPY_DTYPES)."""
    __slots__ = ()


# The largest bin msgpack can carry (bin32).
MAX_BIN = (1 << 32) - 1

# Arrays up to this many bytes are copied next to their header and sent
# with one buffer; larger ones go out as header + a view of their memory.
SMALL_COPY_BYTES = 16 << 10

# The largest reply a client reads unless it asked for more: a segmented
# reduce's records at the daemon's limit (limits.max_segments, 2**21, of
# moments' 40 bytes) and more. A cumsum raises it for its connection to
# what its values take (Conn.expect_reply).
MAX_REPLY_BYTES = 128 << 20

# What a client's unpacker may ever hold: the largest reply at all, a
# cumsum's values in a bin of 4 GiB - 1 and the map around them.
UNPACK_MAX_BYTES = MAX_BIN + (64 << 10)


def buffers(head, data):
    """head and data (None, a buffer, or a list of them) as one list."""
    if data is None:
        return [head]
    if isinstance(data, list):
        return [head] + data
    return [head, data]


class Result(namedtuple("Result", "value count")):
    """A reduction's full result: ``value`` (int or float, see
    PROTOCOL.md's result table) and ``count``, the elements reduced.
    With ``offsets=``, each field is a 1-D NumPy array, one entry per
    segment (``count``: the segments' lengths, int64)."""
    __slots__ = ()


class Moments(namedtuple("Moments", "count sum min max mean var")):
    """moments' result: ``count``, the elements reduced; ``sum``, ``min``
    and ``max``, exactly what those ops return for the same array; ``mean``
    and ``var``, floats for every dtype: the exact mean and variance
    (``ddof`` delta degrees of freedom) of the elements, each rounded once,
    so that no cancellation can creep in (PROTOCOL.md, "moments").
    With ``offsets=``, each field is a 1-D NumPy array, one entry per
    segment; an empty segment has ``count`` 0, ``sum`` 0, ``min`` and
    ``max`` the identities of those ops and ``mean`` and ``var`` NaN."""
    __slots__ = ()


class ArgResult(namedtuple("ArgResult", "value index count")):
    """argmin's (argmax's) result: ``value``, what min (max) returns,
    ``index``, the index of the first element equal to it in the flattened
    array (C order; the first NaN when value is NaN; -0.0 counts below
    0.0), and ``count``, the elements reduced. With ``offsets=``, each
    field is a 1-D NumPy array, one entry per segment: ``index`` (int64)
    counts from the segment's first element, and is -1 for an empty
    segment (whose ``value`` is the identity of min or max)."""
    __slots__ = ()


def _str(s):
    b = s.encode()
    assert len(b) < 32
    return bytes([0xa0 | len(b)]) + b


def bin_header(n):
    if n < 0x100:
        return b"\xc4" + bytes((n,))
    if n < 0x10000:
        return struct.pack(">BH", 0xc5, n)
    return struct.pack(">BI", 0xc6, n)


# [0, msgid, "reduce", [{"op": op, "dtype": dt, "data": ...}]] is 94 00,
# the msgid, REDUCE_MID[op, dt], a bin header and the bytes: op and dtype
# come before data, as the daemon needs for large arrays.
_REDUCE = _str("reduce") + b"\x91"
REDUCE_MID = {
    (op, dt): _REDUCE + b"\x83" + _str("op") + _str(op) + _str("dtype") + _str(dt) + _str("data")
    for op in OPS + ARG_OPS for dt in DTYPE_NAMES
}


# The same with "partial": true first (PROTOCOL.md): exact partials back.
REDUCE_MID_PARTIAL = {
    (op, dt): _REDUCE + b"\x84" + _str("partial") + b"\xc3" + _str("op") + _str(op) +
    _str("dtype") + _str(dt) + _str("data")
    for op in OPS for dt in DTYPE_NAMES
}


def _uint(n):
    if n < 0x80:
        return bytes((n,))
    if n < 0x100:
        return b"\xcc" + bytes((n,))
    if n < 0x10000:
        return struct.pack(">BH", 0xcd, n)
    if n < 0x100000000:
        return struct.pack(">BI", 0xce, n)
    return struct.pack(">BQ", 0xcf, n)


# The plain reduce by region's bytes up to the region id, by (op, dtype).
_REGION_HEAD = {}
_S_REGION, _S_OFFSET, _S_COUNT = _str("region"), _str("offset"), _str("count")


def region_reduce_tail(op, dt, region, offset, count, partial=False, ddof=None, offsets=None):
    """The bytes after the msgid of a reduce by region (moments: with its
    ddof; segmented: with offsets, a little-endian uint64 array, before
    the region's keys)."""
    if not partial and ddof is None and offsets is None:
        head = _REGION_HEAD.get((op, dt))
        if head is None:
            head = _REGION_HEAD[op, dt] = (_REDUCE + b"\x85" + _str("op") + _str(op) +
                                           _str("dtype") + _str(dt) + _S_REGION)
        return (head + _uint(region) + _S_OFFSET + _uint(offset) + _S_COUNT + _uint(count))
    keys = 5 + bool(partial) + (ddof is not None) + (offsets is not None)
    head = bytes((0x80 | keys,)) + (_str("partial") + b"\xc3" if partial else b"")
    ddof_kv = b"" if ddof is None else _str("ddof") + _uint(ddof)
    if offsets is None:
        mid, tail = b"", ddof_kv
    else:
        mid = ddof_kv + _str("offsets") + bin_header(offsets.nbytes) + offsets.tobytes()
        tail = b""
    return (_REDUCE + head + _str("op") + _str(op) + _str("dtype") + _str(dt) + mid +
            _str("region") + _uint(region) + _str("offset") + _uint(offset) +
            _str("count") + _uint(count) + tail)


def moments_mid(dt, ddof):
    """REDUCE_MID of moments, with its ddof before the data."""
    return (_REDUCE + b"\x84" + _str("op") + _str(MOMENTS) + _str("dtype") + _str(dt) +
            _str("ddof") + _uint(ddof) + _str("data"))


# ---- segments (PROTOCOL.md, "Segments") ----

# The most segments whose offsets fit in one bin.
MAX_SEGMENTS_BIN = MAX_BIN // 8 - 1


def value_dtype(op, dt):
    """The NumPy dtype of op's values for wire dtype dt (the result
    table): float64 for floats and every sumsq, else int64 or uint64."""
    if op == "sumsq" or dt in FLOAT_NAMES:
        return np.dtype("<f8")
    return np.dtype("<i8") if dt[0] == "i" else np.dtype("<u8")


def record_dtype(op, dt):
    """The dtype of one of op's packed records: the value; the value and
    its index (an empty segment's 2**64 - 1 read as int64, -1); moments'
    sum, min, max, mean and var."""
    v = value_dtype(op, dt)
    if op in ARG_OPS:
        return np.dtype([("value", v), ("index", "<i8")])
    if op == MOMENTS:
        return np.dtype([("sum", v), ("min", v), ("max", v), ("mean", "<f8"), ("var", "<f8")])
    return v


def check_offsets(offsets, count):
    """offsets (a sequence of integers or an integer array) as a contiguous
    little-endian uint64 array of k + 1 offsets for an array of count
    elements: at least two, the first 0, none below the one before, the
    last count. TypeError for what is not integers, ValueError for
    offsets that break a rule."""
    o = np.asarray(offsets)
    if o.ndim != 1:
        raise ValueError("offsets must be one-dimensional, not of shape %s" % (o.shape,))
    if o.size < 2:
        raise ValueError("offsets need k + 1 entries for k >= 1 segments, not %d" % o.size)
    if o.dtype.kind == "O":
        try:
            o = [operator.index(v) for v in o]
        except TypeError:
            raise TypeError("offsets must be integers") from None
        if min(o) < 0 or max(o) > count:
            raise ValueError("offsets must lie in 0..%d, the array's elements" % count)
        o = np.array(o, dtype=np.uint64)
    elif o.dtype.kind not in "iu":
        raise TypeError("offsets must be integers, not %s" % o.dtype)
    elif o.dtype.kind == "i" and (o < 0).any():
        raise ValueError("offsets must not be negative, as %d is" % o[o < 0][0])
    o = np.ascontiguousarray(o, dtype="<u8")
    if o[0] != 0:
        raise ValueError("offsets must start at 0, not %d" % o[0])
    down = np.flatnonzero(o[1:] < o[:-1])
    if down.size:
        i = int(down[0]) + 1
        raise ValueError("offsets must not decrease: offsets[%d] is %d, offsets[%d] %d"
                         % (i - 1, o[i - 1], i, o[i]))
    if o[-1] != count:
        raise ValueError("offsets must end at the array's %d elements, not at %d" % (count, o[-1]))
    if o.size - 1 > MAX_SEGMENTS_BIN:
        raise ValueError("%d segments do not fit in one request" % (o.size - 1))
    return o


def offsets_mid(op, dt, ddof, offsets):
    """The bytes after the msgid of a segmented reduce of data, up to the
    offsets' bin header: op, dtype and ddof (moments) first, as the daemon
    needs. The offsets' bytes, then DATA_KEY, follow."""
    ddof_kv = b"" if ddof is None else _str("ddof") + _uint(ddof)
    return (_REDUCE + bytes((0x80 | (4 + (ddof is not None)),)) + _str("op") + _str(op) +
            _str("dtype") + _str(dt) + ddof_kv + _str("offsets") + bin_header(offsets.nbytes))


DATA_KEY = _str("data")


def segments_conv(op, dt, offsets, full):
    """The converter of a segmented reduce's result {"count", "segments",
    "values"} for offsets: arrays, one entry per segment, as Result,
    ArgResult or Moments say."""
    rec = record_dtype(op, dt)
    lengths = np.diff(offsets).astype(np.int64)
    k = len(lengths)
    total = int(offsets[-1])

    def conv(res):
        try:
            values, nseg, count = res["values"], res["segments"], res["count"]
        except (TypeError, KeyError):
            raise ValueError("malformed segments result: %.200r" % (res,)) from None
        if (nseg != k or count != total or not isinstance(values, bytes)
                or len(values) != k * rec.itemsize):
            raise ValueError("segments result of %r elements in %r segments (%r bytes of values), "
                             "for %d in %d" % (count, nseg, len(values) if isinstance(values, bytes)
                                               else values, total, k))
        r = np.frombuffer(values, dtype=rec)
        if op in ARG_OPS:
            return ArgResult(r["value"].copy(), r["index"].copy(), lengths)
        if op == MOMENTS:
            return Moments(lengths, r["sum"].copy(), r["min"].copy(), r["max"].copy(),
                           r["mean"].copy(), r["var"].copy())
        return Result(r.copy(), lengths) if full else r.copy()
    return conv


def segments_request(op, dt, count, ddof, offsets, full, where=None, a=None):
    """A segmented reduce of count elements of wire dtype dt, in a region
    (where: its id and the elements' byte offset) or sent from a, a
    C-contiguous array: (tail, conv, data) for a connection's request.
    The offsets are checked against count first (ValueError, TypeError);
    an array too large for one request raises TooLarge."""
    o = check_offsets(offsets, count)
    conv = segments_conv(op, dt, o, full)
    if where is not None:
        return (region_reduce_tail(op, dt, where[0], where[1], count, ddof=ddof, offsets=o),
                conv, None)
    n = a.nbytes
    if n > MAX_BIN:
        raise TooLarge("%d bytes do not fit in one request (at most %d); "
                       "use a shared-memory region (Client.empty)" % (n, MAX_BIN))
    mid = offsets_mid(op, dt, ddof, o)
    data_head = DATA_KEY + bin_header(n)
    if n + o.nbytes <= SMALL_COPY_BYTES:
        return mid + o.tobytes() + data_head + a.tobytes(), conv, None
    return mid, conv, [data_view(o), data_head, data_view(a)]


def host_segments_request(op, x, allow_copy, ddof, offsets, full, regions):
    """segments_request() of x in host memory: in one of regions (a
    RegionTable) when it lies there, else sent. The offsets count the
    elements in C order, as x.ravel() has them: any other layout is
    copied to C order first."""
    a, name = as_array(x, allow_copy)
    a = np.ascontiguousarray(a)
    where = regions.find(a) if regions._ranges else None
    return segments_request(op, name, a.size, ddof, offsets, full, where, a)


def check_ddof(op, ddof):
    """ddof as an int for moments (0 when None); None for the other ops,
    which take none (ValueError)."""
    if op != MOMENTS:
        if ddof is not None:
            raise ValueError("ddof is for moments, not %s" % op)
        return None
    if ddof is None:
        return 0
    if isinstance(ddof, bool):
        raise TypeError("ddof must be an integer, not bool")
    ddof = operator.index(ddof)
    if not 0 <= ddof < 1 << 64:
        raise ValueError("ddof must be a non-negative integer below 2**64, not %d" % ddof)
    return ddof


def check_op(op):
    if op not in REDUCE_OPS:
        raise ValueError("op must be one of %s, not %r" %
                         (", ".join(OPS + ARG_OPS + (MOMENTS, CUMSUM)), op))


REDUCE_OPS = frozenset(OPS + ARG_OPS + (MOMENTS,))


# DLPack device types (dlpack.h's DLDeviceType) whose memory the host reads:
# kDLCPU, kDLCUDAHost (pinned), kDLCUDAManaged. kDLCUDA is device memory.
DLPACK_HOST = (1, 3, 13)
DLPACK_CUDA = 2


def dlpack_device(x):
    """x's DLPack device type, an int, when it has __dlpack_device__ (and
    is not a NumPy array, which is read directly); None otherwise."""
    if isinstance(x, np.ndarray):
        return None
    dl = getattr(x, "__dlpack_device__", None)
    if dl is None:
        return None
    try:
        return int(dl()[0])
    except Exception:
        return None


def dlpack_only(x):
    """Whether x is read through DLPack: it has __dlpack__ and
    __dlpack_device__, but neither the buffer protocol nor NumPy's own
    array protocols, through which np.asarray() would read it."""
    if not hasattr(x, "__dlpack__") or dlpack_device(x) is None:
        return False
    return not _numpy_reads(x)


def _numpy_reads(x):
    if any(hasattr(x, a) for a in ("__array__", "__array_interface__", "__array_struct__")):
        return True
    try:
        memoryview(x)
    except TypeError:
        return False
    return True


def from_dlpack(x):
    """x, an object in host memory that speaks only DLPack, as a NumPy
    array of the same memory (no copy)."""
    read = getattr(np, "from_dlpack", None)
    if read is None:
        raise NotSupported("%s.%s is read through DLPack, which needs NumPy 1.22 or newer"
                           % (type(x).__module__, type(x).__name__))
    try:
        return read(x)
    except (BufferError, RuntimeError) as e:
        raise TypeError("%s.%s cannot be read through DLPack: %s"
                        % (type(x).__module__, type(x).__name__, e)) from None


def _gpu_kind(x):
    """Where a GPU array lives ("cuda", ...), or None for host memory."""
    t = type(x)
    mod = t.__module__ or ""
    if mod.startswith("torch"):
        dev = getattr(x, "device", None)
        kind = getattr(dev, "type", "cpu")
        return None if kind == "cpu" else str(kind)
    try:
        # Some libraries raise something else than AttributeError here for
        # arrays in host memory.
        getattr(x, "__cuda_array_interface__")
        return "cuda"
    except Exception:
        pass
    dev_type = dlpack_device(x)
    if dev_type == DLPACK_CUDA:
        return "cuda"
    if dev_type is not None and dev_type not in DLPACK_HOST:
        return "DLPack device type %d" % dev_type
    return None


# PyTorch dtypes NumPy has no type for (without ml_dtypes), by
# str(dtype): their wire name and the torch integer dtype of their size
# whose view hands NumPy their bits.
_TORCH_BITS = {"torch.bfloat16": ("bf16", "int16"), "torch.float8_e4m3fn": ("f8e4m3", "uint8"),
               "torch.float8_e5m2": ("f8e5m2", "uint8")}


def _torch_host(x):
    """A PyTorch tensor in host memory as a NumPy array of the same memory,
    or, for a dtype NumPy has no type for, as the Typed of its bits."""
    x = x.detach()
    bits = _TORCH_BITS.get(str(x.dtype))
    if bits is None:
        return x.numpy()
    import torch
    name, carrier = bits
    return Typed(x.view(getattr(torch, carrier)).numpy().view(NUMPY_DTYPES[name]), name)


def _to_host(x):
    if hasattr(x, "detach") and hasattr(x, "cpu"):       # torch
        return _torch_host(x.detach().cpu())
    if hasattr(x, "get"):                                  # cupy
        return x.get()
    if hasattr(x, "copy_to_host"):                         # numba
        return x.copy_to_host()
    if dlpack_device(x) == DLPACK_CUDA and dlpack_only(x):
        from . import _device                              # DLPack only
        return _device.dlpack_to_host(x)
    return np.asarray(x)                                   # jax and others


def unsupported(dt):
    """The TypeError for an array of dtype dt."""
    return TypeError("gpured reduces %s arrays, not %s" % (SUPPORTED, dt))


def _host_array(x, allow_copy):
    """x, anything as_array() takes but a Typed, as (a NumPy array of a
    little-endian dtype, the wire name of its elements' dtype)."""
    if not isinstance(x, np.ndarray):
        gpu = _gpu_kind(x)
        if gpu is not None:
            if not allow_copy:
                raise NotSupported(
                    "%s.%s lives in GPU memory (%s); gpured reads CUDA memory in place, "
                    "not this. Pass allow_copy=True to copy it to the host first"
                    % (type(x).__module__, type(x).__name__, gpu))
            x = _to_host(x)
        elif (type(x).__module__ or "").startswith("torch"):
            x = _torch_host(x)
        elif dlpack_only(x):
            x = from_dlpack(x)
        if type(x) is Typed:
            return x
        x = np.asarray(x)
    dt = x.dtype
    name = wire_name(dt)
    if name is None:
        le = dt.newbyteorder("<") if dt.byteorder == ">" else None
        name = None if le is None else wire_name(le)
        if name is None:
            raise unsupported(dt)
        x = x.astype(le)
    return x, name


def as_array(x, allow_copy=False):
    """x as a contiguous NumPy array, without copying where its memory
    already is one, and the wire name of its elements' dtype: for one
    NumPy has no type for (PyTorch's bfloat16 without ml_dtypes), an
    array of their bits (Typed). TypeError for a dtype gpured does not
    reduce."""
    a, name = x if type(x) is Typed else _host_array(x, allow_copy)
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        a = np.ascontiguousarray(a)
    return a, name


def data_view(a):
    """The bytes of a contiguous array, as a flat memoryview (no copy)."""
    if a.ndim != 1 or not a.flags.c_contiguous:
        a = np.ravel(a, order="K")
    return memoryview(a).cast("B")


def reduce_value(res, full):
    """A reduce result map as its value (or Result)."""
    try:
        value = res["value"]
        if full:
            return Result(value, res["count"])
        return value
    except (TypeError, KeyError):
        raise ValueError("malformed reduce result: %r" % (res,)) from None


def arg_result(res):
    """An argmin or argmax result map as an ArgResult."""
    try:
        return ArgResult(res["value"], res["index"], res["count"])
    except (TypeError, KeyError):
        raise ValueError("malformed argmin/argmax result: %r" % (res,)) from None


def moments_result(res):
    """A moments result map as a Moments."""
    try:
        return Moments(res["count"], res["sum"], res["min"], res["max"], res["mean"], res["var"])
    except (TypeError, KeyError):
        raise ValueError("malformed moments result: %r" % (res,)) from None


def default_socket_path():
    """$GPURED_SOCKET when set and not empty, else /run/gpured.sock as root,
    else $XDG_RUNTIME_DIR/gpured.sock, else /run/gpured.sock (libgpured's
    gpured_socket_path())."""
    env = os.environ.get("GPURED_SOCKET")
    if env:
        return env
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if os.geteuid() != 0 and xdg:
        return xdg + "/gpured.sock"
    return "/run/gpured.sock"


def socket_path(path=None):
    return os.fspath(path) if path is not None else default_socket_path()
