"""Reduce a dask array in gpured, each chunk by the daemon of the host that
holds it, into the bits one request over the whole array would give.

    import dask.array as da, gpured.dask

    x = da.random.random(10_000_000, chunks=1_000_000)
    gpured.dask.sum(x)                      # a float, computed now
    d = gpured.dask.max(x, compute=False)   # a dask.delayed, for later
    gpured.dask.argmin(x)                   # a gpured.ArgResult
    gpured.dask.moments(x, ddof=1)          # a gpured.Moments

Every chunk becomes one task that reduces it to an exact partial: in the
worker's own process, with the daemon's kernels from libgpured
(:mod:`gpured._local`), where the worker finds that library, else by
sending it, with ``partial=True``, to the gpured of the worker's host: a
:class:`gpured.Client` per process, on ``$GPURED_SOCKET`` of that process,
else the default socket (:func:`gpured.default_socket_path`), made at its
first chunk and kept (``local=False`` always sends). One last task joins
the partials with :func:`gpured.combine`. A float sum is
exact on every backend, so the result does not depend on the chunking, on
the number of workers or on which host reduced which chunk.

:func:`argmin` and :func:`argmax` join the chunks' extremes by the
daemon's rules (the first NaN wins, -0 is below +0, ties go to the
smallest index), each chunk's index moved to where the chunk lies in the
whole array, flattened in C order. :func:`moments` asks each chunk for
the exact partials of its sum and of its sum of squares, joins them
exactly and rounds the mean and the variance once, as the daemon does
for one request.
"""

import builtins
import itertools
import math
import os
import threading
from collections import namedtuple

import dask
import numpy as np

from . import _exact, _local, _wire
from ._exact import combine
from ._wire import ArgResult, Moments
from .client import Client
from .errors import Empty, InvalidParams

__all__ = ["sum", "min", "max", "sumsq", "argmin", "argmax", "moments", "reduce",
           "worker_client"]

_clients = {}
_clients_lock = threading.Lock()

# Elements of an integer chunk turned into float64 at a time (moments):
# the copies stay small, and each request well below the daemon's limit.
_INT_BLOCK = 1 << 20


def worker_client():
    """The :class:`gpured.Client` of this process for its current
    ``$GPURED_SOCKET`` (else the default socket), made on first use and
    made again when it died or the process forked."""
    key = (os.getpid(), _wire.socket_path(None))
    c = _clients.get(key)
    if c is None or c.closed:
        with _clients_lock:
            c = _clients.get(key)
            if c is None or c.closed:
                c = _clients[key] = Client(key[1])
    return c


def _graph(name, chunk_fn, join_fn, x, chunk_args, join_args, compute, compute_kwargs):
    """One task per chunk of x, chunk_fn(*chunk_args, chunk), and one
    that joins them, join_fn(*join_args, [their results]); computed now
    or, with compute=False, returned as a dask.delayed."""
    chunks = x.to_delayed(optimize_graph=False).ravel().tolist()
    parts = [dask.delayed(chunk_fn, pure=True)(*chunk_args, c, dask_key_name=(name + "-chunk", i))
             for i, c in enumerate(chunks)]
    out = dask.delayed(join_fn, pure=True)(*join_args, parts, dask_key_name=name)
    if not compute:
        return out
    return out.compute(**compute_kwargs)


def _check_dtype(x):
    """x's wire dtype name; the client's TypeError, here and now."""
    return _wire.as_array(np.empty(0, x.dtype))[1]


# ---- sum, min, max, sumsq ----

def _here(local):
    """Whether this worker reduces its chunks in its own process (local:
    True, False, or None for wherever libgpured is found)."""
    if local is False:
        return False
    if _local.available():
        return True
    if local:
        raise RuntimeError("gpured.dask: local=True, but this worker finds no libgpured "
                           "with reductions in this process (GPURED_LIBGPURED)")
    return False


def _where(local):
    """The part of a graph's keys that tells its local setting: graphs
    that differ only there must not share results."""
    return "" if local is None else "-here" if local else "-daemon"


def _reduce_chunk(op, local, chunk):
    # A chunk with no elements has no min or max; the others say what it is.
    if op in ("min", "max") and chunk.size == 0:
        return None
    if _here(local):
        return _local.partial(op, np.asarray(chunk))
    return worker_client().reduce(op, np.asarray(chunk), partial=True)


def _combine(op, parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        raise Empty("%s of an array with no elements" % op)
    return combine(parts)


def reduce(op, x, *, local=None, compute=True, **compute_kwargs):
    """Reduce dask array x with op ("sum", "min", "max", "sumsq") where
    each chunk lies, then combine the chunks' partials exactly. A chunk in
    a worker's memory is reduced in that worker's own process, with the
    daemon's kernels from libgpured (:mod:`gpured._local`: the same bits,
    and no copy over a socket) where the worker finds libgpured, else by
    the gpured of the worker's host; ``local=False`` always asks the
    daemon, ``local=True`` never does.

    Returns the value as :meth:`gpured.Client.reduce` would for the whole
    array (an int for sum/min/max of integers, else a float), or with
    ``compute=False`` a :class:`dask.delayed.Delayed` of it. Other keyword
    arguments go to :func:`dask.compute` (``scheduler=``, and with a
    distributed client ``workers=``...).

    Raises TypeError at once for a dtype gpured does not take,
    :class:`gpured.Empty` for min/max of no elements, and what the
    workers' clients raise (e.g. :class:`gpured.ConnectionError` where a
    worker's host runs no gpured)."""
    _wire.check_op(op)
    if op not in _wire.OPS:
        raise ValueError("gpured.dask reduces with %s, not %s" % (", ".join(_wire.OPS), op))
    _check_dtype(x)
    return _graph("gpured-%s%s-%s" % (op, _where(local), x.name), _reduce_chunk, _combine, x,
                  (op, local), (op,), compute, compute_kwargs)


def sum(x, **kw):
    """Sum of every element of dask array x (see :func:`reduce`)."""
    return reduce("sum", x, **kw)


def min(x, **kw):
    """Smallest element of x; :class:`gpured.Empty` if it has none."""
    return reduce("min", x, **kw)


def max(x, **kw):
    """Largest element of x; :class:`gpured.Empty` if it has none."""
    return reduce("max", x, **kw)


def sumsq(x, **kw):
    """Sum of the squares of x's elements, as a float."""
    return reduce("sumsq", x, **kw)


# ---- argmin, argmax ----

def _arg_chunk(op, local, chunk):
    a = np.asarray(chunk)
    if a.size == 0:
        return None
    # The daemon counts a Fortran-ordered array in its memory's order.
    a = np.ascontiguousarray(a)
    if _here(local):
        return _local.reduce(op, a)
    return worker_client().reduce(op, a)


def _block_geometry(chunks):
    """(first index, shape) of every block of an array chunked so, in the
    order to_delayed().ravel() lists them (C order of the block grid)."""
    starts = [list(itertools.accumulate((0,) + c[:-1])) for c in chunks]
    for b in itertools.product(*(range(len(c)) for c in chunks)):
        yield (tuple(s[i] for s, i in zip(starts, b)), tuple(c[i] for c, i in zip(chunks, b)))


def _flat_index(k, start, shape, full):
    """Element k (C order) of the block at start with this shape, as an
    index into the whole array of shape full, flattened in C order."""
    local = []
    for n in reversed(shape):
        k, r = divmod(k, n)
        local.append(r)
    idx = 0
    for s, i, n in zip(start, reversed(local), full):
        idx = idx * n + s + i
    return idx


def _arg_key(op, value, index):
    """What orders the chunks' candidates: NaN first, then the least
    (argmin) or greatest (argmax) value with -0 below +0, then the
    smallest index."""
    if isinstance(value, float):
        if math.isnan(value):
            return (0, 0, 0, index)
        sign = math.copysign(1.0, value) if value == 0 else 0.0
    else:
        sign = 0.0
    if op == "argmax":
        value, sign = -value, -sign
    return (1, value, sign, index)


def _arg_join(op, chunks, shape, parts):
    if chunks is None:
        # 1-D, chunk sizes unknown until now: each chunk follows the last.
        starts = itertools.accumulate([0] + [p.count if p else 0 for p in parts])
        geometry = (((s,), None) for s in starts)
    else:
        geometry = _block_geometry(chunks)
    best = None
    count = 0
    for p, (start, bshape) in zip(parts, geometry):
        if p is None:
            continue
        count += p.count
        if bshape is None:
            idx = start[0] + p.index
        else:
            idx = _flat_index(p.index, start, bshape, shape)
        key = _arg_key(op, p.value, idx)
        if best is None or key < best[0]:
            best = (key, p.value, idx)
    if best is None:
        raise Empty("%s of an array with no elements" % op)
    return ArgResult(best[1], best[2], count)


def _arg(op, x, local, compute, compute_kwargs):
    _check_dtype(x)
    chunks = x.chunks
    if any(math.isnan(n) for c in chunks for n in c):
        if x.ndim != 1:
            raise ValueError("%s of a %d-D dask array needs its chunk sizes "
                             "(x.compute_chunk_sizes())" % (op, x.ndim))
        chunks = None
    return _graph("gpured-%s%s-%s" % (op, _where(local), x.name), _arg_chunk, _arg_join, x,
                  (op, local), (op, chunks, x.shape), compute, compute_kwargs)


def argmin(x, *, local=None, compute=True, **compute_kwargs):
    """The smallest element of dask array x and where it is first, as
    :meth:`gpured.Client.argmin` gives it for the whole array: a
    :class:`gpured.ArgResult` ``(value, index, count)``, ``index`` into x
    flattened in C order (the first NaN if there is one; -0.0 counts
    below 0.0), or with ``compute=False`` a dask.delayed of it. Each
    chunk is reduced where it lies, as in :func:`reduce` (``local``).

    Raises TypeError at once for a dtype gpured does not take, ValueError
    at once for an array of more than one dimension whose chunk sizes are
    unknown, and :class:`gpured.Empty` if x has no elements."""
    return _arg("argmin", x, local, compute, compute_kwargs)


def argmax(x, *, local=None, compute=True, **compute_kwargs):
    """The largest element of x and where it is first (as :func:`argmin`)."""
    return _arg("argmax", x, local, compute, compute_kwargs)


# ---- moments ----

def _exact_int(p):
    """The value of an exact partial that holds an integer, as an int."""
    if not p.limbs:
        return 0
    return p.limbs << p.scale if p.scale >= 0 else p.limbs >> -p.scale


# What a chunk's task sends to the joining one: the moments' count, min
# and max; the exact sums of the elements and of their squares, as float
# partials (floats) or as ints (integers).
_ChunkMoments = namedtuple("_ChunkMoments", "count min max s1 s2")


def _int_sums(c, a):
    """The exact sum of integer array a's elements and of their squares,
    as ints, from the daemon's exact float partials. An element of 32
    bits or fewer (i32, u32, i16, u8...) is a float64; one of i64 or u64
    is x = h * 2**32 + l, h, l and h + l float64s, and x**2 = h**2 *
    2**64 + ((h + l)**2 - h**2 - l**2) * 2**32 + l**2."""
    flat = a.reshape(-1)
    wide = a.dtype.itemsize == 8
    futs = []
    for i in range(0, flat.size, _INT_BLOCK):
        blk = flat[i:i + _INT_BLOCK]
        if wide:
            h = (blk >> blk.dtype.type(32)).astype(np.float64)
            lo = (blk & blk.dtype.type(0xFFFFFFFF)).astype(np.float64)
            arrays = (h, lo, h + lo)
            ops = (("sum", "sumsq"), ("sum", "sumsq"), ("sumsq",))
        else:
            arrays = (blk.astype(np.float64),)
            ops = (("sum", "sumsq"),)
        # submit() is done with an array's memory once it returns.
        futs.append([[c.submit(op, f, partial=True) for op in o] for f, o in zip(arrays, ops)])
    s1 = s2 = 0
    for blk in futs:
        v = [[_exact_int(f.result()) for f in fs] for fs in blk]
        if wide:
            (sh, qh), (sl, ql), (qhl,) = v
            s1 += (sh << 32) + sl
            s2 += (qh << 64) + ((qhl - qh - ql) << 32) + ql
        else:
            s1 += v[0][0]
            s2 += v[0][1]
    return s1, s2


def _moments_chunk(local, chunk):
    a = np.asarray(chunk)
    if a.size == 0:
        return None
    a, name = _wire.as_array(a)
    if _here(local):
        # one pass in this process: count, min, max and the exact sums
        n, lo, hi, s1, s2 = _local.moments_parts(a)
        if name not in _wire.FLOAT_NAMES:
            s1, s2 = _exact_int(s1), _exact_int(s2)
        return _ChunkMoments(n, lo, hi, s1, s2)
    c = worker_client()
    m = c.submit("moments", a)          # count, min and max
    if name in _wire.FLOAT_NAMES:
        s1 = c.submit("sum", a, partial=True)
        s2 = c.submit("sumsq", a, partial=True)
        sums = (s1.result(), s2.result())
    else:
        sums = _int_sums(c, a)
    m = m.result()
    return _ChunkMoments(m.count, m.min, m.max, *sums)


def _at_scale(parts):
    """The exact sum of float partials as (int, scale)."""
    parts = [p for p in parts if p.limbs]
    if not parts:
        return 0, 0
    scale = builtins.min(p.scale for p in parts)
    return builtins.sum(p.limbs << (p.scale - scale) for p in parts), scale


def _div(num, den):
    """num / den (ints, den > 0) rounded once to a float64, to nearest,
    ties to even; +-inf past the largest."""
    try:
        return num / den            # int / int rounds correctly
    except OverflowError:
        return math.inf if num > 0 else -math.inf


def _ratio(v, scale, den):
    """v * 2**scale / den, rounded once."""
    return _div(v << scale, den) if scale >= 0 else _div(v, den << -scale)


def _mean_var(s1, a, s2, b, n, ddof):
    """mean = S1 / n and var = (S2 - S1**2 / n) / (n - ddof), S1 = s1 *
    2**a and S2 = s2 * 2**b, each rounded once."""
    mean = _ratio(s1, a, n)
    # n * S2 - S1**2 = C * 2**e, C an integer
    e = builtins.min(b, 2 * a)
    c = ((n * s2) << (b - e)) - ((s1 * s1) << (2 * a - e))
    var = _ratio(c, e, n * (n - ddof)) if c else 0.0
    return mean, var


def _moments_join(dtype, ddof, parts):
    parts = [p for p in parts if p is not None]
    n = builtins.sum(p.count for p in parts)
    if not n:
        raise Empty("moments of an array with no elements")
    if ddof >= n:
        raise InvalidParams("'ddof' is %d, not less than the %d elements" % (ddof, n))
    lo = combine([_exact.Partial("min", dtype, p.min, p.count, None, 0, 0) for p in parts])
    hi = combine([_exact.Partial("max", dtype, p.max, p.count, None, 0, 0) for p in parts])
    if dtype not in _wire.FLOAT_NAMES:
        s1 = builtins.sum(p.s1 for p in parts)
        total = combine([_exact.Partial("sum", dtype, s1, n, None, 0, 0)])   # wrapped
        mean, var = _mean_var(s1, 0, builtins.sum(p.s2 for p in parts), 0, n, ddof)
        return Moments(n, total, lo, hi, mean, var)
    p1 = [p.s1 for p in parts]
    p2 = [p.s2 for p in parts]
    total = combine(p1)
    specials = 0
    for p in p1 + p2:
        specials |= p.specials
    if specials & (_exact.NAN | _exact.PINF | _exact.NINF):
        # a NaN, or infinities: the mean is the sum, NaN, +inf or -inf
        return Moments(n, total, lo, hi, total, math.nan)
    s1, a = _at_scale(p1)
    s2, b = _at_scale(p2)
    mean, var = _mean_var(s1, a, s2, b, n, ddof)
    if not s1:
        mean = total        # a zero sum: -0 only when every element was
    return Moments(n, total, lo, hi, mean, var)


def moments(x, ddof=0, *, local=None, compute=True, **compute_kwargs):
    """Count, sum, min, max, mean and variance of dask array x's elements,
    as :meth:`gpured.Client.moments` gives them for the whole array: a
    :class:`gpured.Moments` with the same bits, or with ``compute=False``
    a dask.delayed of it.

    Each chunk's worker (in its own process, or its gpured: ``local`` as
    in :func:`reduce`) takes the chunk's moments (for count, min and max)
    and the exact partials of the sum of its elements and of their
    squares (an integer chunk goes as float64s
    that hold it exactly: each element, or for 64-bit integers its upper
    and lower 32 bits). The joining task adds those exactly and rounds
    ``mean = S1 / n`` and ``var = (S2 - S1**2 / n) / (n - ddof)`` once
    each, with the daemon's rules for NaN, infinities and -0.

    Raises TypeError or ValueError at once for a dtype gpured does not
    take or a ddof that is not a non-negative integer,
    :class:`gpured.Empty` if x has no elements and
    :class:`gpured.InvalidParams` if ``ddof`` is not below their number."""
    name = _check_dtype(x)
    ddof = _wire.check_ddof(_wire.MOMENTS, ddof)
    return _graph("gpured-moments%s-%d-%s" % (_where(local), ddof, x.name), _moments_chunk,
                  _moments_join, x, (local,), (name, ddof), compute, compute_kwargs)
