"""Reduce a dask array in gpured, each chunk by the daemon of the host that
holds it, into the bits one request over the whole array would give.

    import dask.array as da, gpured.dask

    x = da.random.random(10_000_000, chunks=1_000_000)
    gpured.dask.sum(x)                      # a float, computed now
    d = gpured.dask.max(x, compute=False)   # a dask.delayed, for later

Every chunk becomes one task that sends it, with ``partial=True``, to the
gpured of the process that runs the task: a :class:`gpured.Client` per
process, on ``$GPURED_SOCKET`` of that process, else the default socket
(:func:`gpured.default_socket_path`), made at its first chunk and kept. One
last task joins the partials with :func:`gpured.combine`. A float sum is
exact on every backend, so the result does not depend on the chunking, on
the number of workers or on which host reduced which chunk.
"""

import os
import threading

import dask
import numpy as np

from . import _wire
from ._exact import combine
from .client import Client
from .errors import Empty

__all__ = ["sum", "min", "max", "sumsq", "reduce", "worker_client"]

_clients = {}
_clients_lock = threading.Lock()


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


def _reduce_chunk(op, chunk):
    # A chunk with no elements has no min or max; the others say what it is.
    if op in ("min", "max") and chunk.size == 0:
        return None
    return worker_client().reduce(op, np.asarray(chunk), partial=True)


def _combine(op, parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        raise Empty("%s of an array with no elements" % op)
    return combine(parts)


def reduce(op, x, *, compute=True, **compute_kwargs):
    """Reduce dask array x with op ("sum", "min", "max", "sumsq") in the
    gpured of each worker that holds a chunk, then combine the chunks'
    partials exactly.

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
    _wire.as_array(np.empty(0, x.dtype))    # the client's TypeError, here and now
    chunks = x.to_delayed(optimize_graph=False).ravel().tolist()
    name = "gpured-%s-%s" % (op, x.name)
    parts = [dask.delayed(_reduce_chunk, pure=True)(op, c, dask_key_name=(name + "-chunk", i))
             for i, c in enumerate(chunks)]
    out = dask.delayed(_combine, pure=True)(op, parts, dask_key_name=name)
    if not compute:
        return out
    return out.compute(**compute_kwargs)


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

