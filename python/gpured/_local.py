"""Reductions in this process: libgpured's gpured_local_reduce(),
_partial() and _moments() (libgpured(3), "In this process"), the daemon's
own kernels over an array in this process's memory, through ctypes. The
results are the daemon's for the same elements, the same bits; for an
array that is not in shared memory or on a GPU, reducing it here costs
less than sending it (a chunk of a Dask array in a worker, say).

The library is $GPURED_LIBGPURED where that names a file, else
libgpured.so.0 where the dynamic linker finds it. GPURED_LOCAL=0 turns
this path off (:func:`available` is then False)."""

import ctypes
import ctypes.util
import errno
import os
import threading

import numpy as np

from . import _exact, _wire
from .errors import Empty, InvalidParams

_LIMBS_MAX = 68
_OPS = {"sum": 0, "min": 1, "max": 2, "sumsq": 3, "argmin": 4, "argmax": 5, "moments": 6}
_DTYPES = {name: i for i, name in enumerate(_wire.DTYPE_NAMES)}
_KIND_I64, _KIND_U64, _KIND_F64 = 0, 1, 2


class _Value(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("bits", ctypes.c_uint64), ("count", ctypes.c_uint64),
                ("index", ctypes.c_uint64)]

    def number(self):
        b = self.bits
        if self.kind == _KIND_F64:
            return float(np.array(b, np.uint64).view(np.float64))
        if self.kind == _KIND_I64:
            return b - (1 << 64) if b >> 63 else b
        return int(b)


class _Partial(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int), ("dtype", ctypes.c_int), ("count", ctypes.c_uint64),
                ("scale", ctypes.c_int32), ("specials", ctypes.c_uint32),
                ("nlimbs", ctypes.c_uint32), ("limbs", ctypes.c_uint64 * _LIMBS_MAX)]


class _Moments(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("sum", _Value), ("min", _Value), ("max", _Value),
                ("mean", ctypes.c_double), ("var", ctypes.c_double)]


_lib = None
_lib_lock = threading.Lock()
_lib_tried = False


def _load():
    """libgpured with the three functions declared, or None."""
    global _lib, _lib_tried
    if _lib_tried:
        return _lib
    with _lib_lock:
        if _lib_tried:
            return _lib
        path = os.environ.get("GPURED_LIBGPURED") or ctypes.util.find_library("gpured")
        lib = None
        if path and os.environ.get("GPURED_LOCAL", "1") != "0":
            try:
                lib = ctypes.CDLL(path)
                args = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_uint]
                lib.gpured_local_reduce.argtypes = args + [ctypes.POINTER(_Value)]
                lib.gpured_local_partial.argtypes = args + [ctypes.POINTER(_Partial)]
                lib.gpured_local_moments.argtypes = [ctypes.c_int, ctypes.c_void_p,
                                                     ctypes.c_size_t, ctypes.c_uint64,
                                                     ctypes.c_uint, ctypes.POINTER(_Moments)]
                lib.gpured_local_moments_parts.argtypes = [
                    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint,
                    ctypes.POINTER(_Value), ctypes.POINTER(_Value), ctypes.POINTER(_Partial),
                    ctypes.POINTER(_Partial)]
                for f in (lib.gpured_local_reduce, lib.gpured_local_partial,
                          lib.gpured_local_moments, lib.gpured_local_moments_parts):
                    f.restype = ctypes.c_int
            except (OSError, AttributeError):
                lib = None      # no such library, or one without these
        _lib = lib
        _lib_tried = True
        return _lib


def available():
    """Whether reductions in this process are there (libgpured found, and
    GPURED_LOCAL not 0)."""
    return _load() is not None


def _raise(r, what):
    if r == -errno.ENODATA:
        raise Empty("%s of an array with no elements" % what)
    if r == -errno.EINVAL:
        raise InvalidParams("%s: not reduced here (op, dtype or ddof)" % what)
    if r == -errno.ENOMEM:
        raise MemoryError(what)
    raise OSError(-r, os.strerror(-r))


def _prepare(x):
    """(array, wire name, n) of a host array, contiguous in C order."""
    a, name = _wire.as_array(x)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a, name, a.size


def reduce(op, x, threads=1):
    """op ("sum", "min", "max", "sumsq", "argmin", "argmax") of host array
    x: its value (an ArgResult for argmin and argmax) as
    :meth:`gpured.Client.reduce` gives it."""
    lib = _load()
    a, name, n = _prepare(x)
    v = _Value()
    r = lib.gpured_local_reduce(_OPS[op], _DTYPES[name], a.ctypes.data, n, threads,
                                ctypes.byref(v))
    if r:
        _raise(r, op)
    if op in _wire.ARG_OPS:
        return _wire.ArgResult(v.number(), v.index, v.count)
    return v.number()


def partial(op, x, threads=1):
    """op of host array x as the partial ``Client.reduce(op, x,
    partial=True)`` gives (:class:`gpured.Partial`): exact limbs for the
    float sums and sums of squares, the value alone for the others."""
    lib = _load()
    a, name, n = _prepare(x)
    if name not in _wire.FLOAT_NAMES or op not in ("sum", "sumsq"):
        if op in ("min", "max") and n == 0:
            raise Empty("%s of an array with no elements" % op)
        return _exact.Partial(op, name, reduce(op, a, threads), n, None, 0, 0)
    p = _Partial()
    r = lib.gpured_local_partial(_OPS[op], _DTYPES[name], a.ctypes.data, n, threads,
                                 ctypes.byref(p))
    if r:
        _raise(r, op)
    return _partial_of(op, name, p)


def _partial_of(op, name, p):
    """A _Partial as a :class:`gpured.Partial` of op over dtype name."""
    words = bytes(memoryview(p.limbs).cast("B")[:8 * p.nlimbs])
    limbs = int.from_bytes(words, "little", signed=True) if words else 0
    part = _exact.Partial(op, name, 0.0, p.count, limbs, p.scale, p.specials)
    return part._replace(value=_exact.combine([part]))


def moments(x, ddof=0, threads=1):
    """The moments of host array x (a :class:`gpured.Moments`)."""
    lib = _load()
    a, name, n = _prepare(x)
    m = _Moments()
    r = lib.gpured_local_moments(_DTYPES[name], a.ctypes.data, n, ddof, threads,
                                 ctypes.byref(m))
    if r:
        _raise(r, "moments")
    return _wire.Moments(m.count, m.sum.number(), m.min.number(), m.max.number(), m.mean, m.var)


def moments_parts(x, threads=1):
    """What moments of host array x (at least one element) is made of, in
    one pass: (count, min, max, S1, S2), S1 and S2 the exact sums of the
    elements and of their squares as partials (:class:`gpured.Partial`:
    of the float dtype itself, of f64 for an integer dtype)."""
    lib = _load()
    a, name, n = _prepare(x)
    lo, hi, s1, s2 = _Value(), _Value(), _Partial(), _Partial()
    r = lib.gpured_local_moments_parts(_DTYPES[name], a.ctypes.data, n, threads,
                                       ctypes.byref(lo), ctypes.byref(hi), ctypes.byref(s1),
                                       ctypes.byref(s2))
    if r:
        _raise(r, "moments")
    sname = name if name in _wire.FLOAT_NAMES else "f64"
    return (n, lo.number(), hi.number(), _partial_of("sum", sname, s1),
            _partial_of("sumsq", sname, s2))
