"""What goes over the socket: request headers built by hand (so an array's
bytes are sent from its own memory), dtypes, and turning inputs into
contiguous NumPy arrays. No I/O here."""

import operator
import os
import struct
from collections import namedtuple

import numpy as np

from .errors import NotSupported

OPS = ("sum", "min", "max", "sumsq")
# Ops whose result is an ArgResult: the extreme and where it is.
ARG_OPS = ("argmin", "argmax")
# count, sum, min, max, mean and variance in one pass: a Moments.
MOMENTS = "moments"

# NumPy dtype (native little-endian) -> wire name.
_DTYPES = {
    np.dtype("<i4"): "i32",
    np.dtype("<i8"): "i64",
    np.dtype("<u4"): "u32",
    np.dtype("<u8"): "u64",
    np.dtype("<f4"): "f32",
    np.dtype("<f8"): "f64",
}
DTYPE_NAMES = tuple(_DTYPES.values())
NUMPY_DTYPES = {v: k for k, v in _DTYPES.items()}
SUPPORTED = "int32, int64, uint32, uint64, float32, float64"

# The largest bin msgpack can carry (bin32).
MAX_BIN = (1 << 32) - 1

# Arrays up to this many bytes are copied next to their header and sent
# with one buffer; larger ones go out as header + a view of their memory.
SMALL_COPY_BYTES = 16 << 10


class Result(namedtuple("Result", "value count")):
    """A reduction's full result: ``value`` (int or float, see
    PROTOCOL.md's result table) and ``count``, the elements reduced."""
    __slots__ = ()


class Moments(namedtuple("Moments", "count sum min max mean var")):
    """moments' result: ``count``, the elements reduced; ``sum``, ``min``
    and ``max``, exactly what those ops return for the same array; ``mean``
    and ``var``, floats for every dtype: the exact mean and variance
    (``ddof`` delta degrees of freedom) of the elements, each rounded once,
    so that no cancellation can creep in (PROTOCOL.md, "moments")."""
    __slots__ = ()


class ArgResult(namedtuple("ArgResult", "value index count")):
    """argmin's (argmax's) result: ``value``, what min (max) returns,
    ``index``, the index of the first element equal to it in the flattened
    array (C order; the first NaN when value is NaN; -0.0 counts below
    0.0), and ``count``, the elements reduced."""
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


def region_reduce_tail(op, dt, region, offset, count, partial=False, ddof=None):
    """The bytes after the msgid of a reduce by region (moments: with its
    ddof)."""
    keys = 5 + bool(partial) + (ddof is not None)
    head = bytes((0x80 | keys,)) + (_str("partial") + b"\xc3" if partial else b"")
    tail = b"" if ddof is None else _str("ddof") + _uint(ddof)
    return (_REDUCE + head + _str("op") + _str(op) + _str("dtype") + _str(dt) +
            _str("region") + _uint(region) + _str("offset") + _uint(offset) +
            _str("count") + _uint(count) + tail)


def moments_mid(dt, ddof):
    """REDUCE_MID of moments, with its ddof before the data."""
    return (_REDUCE + b"\x84" + _str("op") + _str(MOMENTS) + _str("dtype") + _str(dt) +
            _str("ddof") + _uint(ddof) + _str("data"))


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
                         (", ".join(OPS + ARG_OPS + (MOMENTS,)), op))


REDUCE_OPS = frozenset(OPS + ARG_OPS + (MOMENTS,))


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
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None and not isinstance(x, np.ndarray):
        try:
            dev_type = dl()[0]
        except Exception:
            return None
        # DLPack: 1 CPU, 3 CUDA host (pinned), 13 CUDA managed: host-readable.
        if int(dev_type) not in (1, 3, 13):
            return "device type %d" % int(dev_type)
    return None


def _to_host(x):
    if hasattr(x, "detach") and hasattr(x, "cpu"):       # torch
        return x.detach().cpu().numpy()
    if hasattr(x, "get"):                                  # cupy
        return x.get()
    if hasattr(x, "copy_to_host"):                         # numba
        return x.copy_to_host()
    return np.asarray(x)                                   # jax and others


def as_array(x, allow_copy=False):
    """x as a contiguous NumPy array of a supported dtype, without copying
    where its memory already is one; the dtype's wire name."""
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
            x = x.detach().numpy()
        x = np.asarray(x)
    dt = x.dtype
    name = _DTYPES.get(dt)
    if name is None:
        if dt.kind in "iuf" and dt.itemsize in (4, 8) and dt.byteorder == ">":
            x = x.astype(dt.newbyteorder("<"))
            name = _DTYPES[x.dtype]
        else:
            raise TypeError("gpured reduces %s arrays, not %s" % (SUPPORTED, dt))
    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = np.ascontiguousarray(x)
    return x, name


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
