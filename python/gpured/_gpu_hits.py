"""The requests of GPU arrays reduced before, by array: a PyTorch tensor
or CuPy array summed again (the usual loop: the same tensors reduced step
after step) costs a dictionary lookup and three reads of the array, not
the walk of finding its allocation and mapping.

An entry is made after an array has been reduced in place in this
connection's mapping, and is used while:
- the array is the same object (a weak reference to it, by id),
- it still has the address, element count and contiguity it had (a
  tensor can be given other storage in place: ``set_``, ``resize_``,
  ``t_``), and for CuPy the same current stream (the one its sync waits
  for; PyTorch's sync asks for the current stream each time), and
- the connection still has the mapping (DeviceMaps.gen unchanged: no
  mapping has been dropped since).
Its dtype cannot change while it is the same object, and its memory
stays mapped where it is while it lives (the array holds its
allocation), as _device.allocation's own cache relies on. Anything else
takes the full way, which makes the entry anew.
"""

import sys
import weakref

from . import _wire

# The ops a hit serves: whole-array reduces with no options (moments take
# a ddof, and the full way makes their request).
_OPS = frozenset(_wire.OPS + _wire.ARG_OPS)
_MAX = 64


def _torch_probe(x):
    return x.data_ptr(), x.numel(), x.is_contiguous()


def _cupy_probe(x):
    # with the current stream, which the Span's sync was made for
    return (x.data.ptr, x.size, x.flags.c_contiguous,
            sys.modules["cupy"].cuda.get_current_stream().ptr)


_PROBES = {"torch": _torch_probe, "cupy": _cupy_probe}


class _Hit:
    __slots__ = ("ref", "state", "gen", "region", "offset", "count", "dtype", "sync", "probe",
                 "tails")

    def __init__(self, ref, state, gen, region, offset, sp, probe):
        self.ref, self.state, self.gen = ref, state, gen
        self.region, self.offset, self.count, self.dtype = region, offset, sp.count, sp.dtype
        self.sync, self.probe = sp.sync, probe
        self.tails = {}


class GpuHits:
    """One connection's entries (at most _MAX, the oldest dropped first)."""

    __slots__ = ("_hits",)

    def __init__(self):
        self._hits = {}

    def call(self, op, x, gen, convs):
        """The Call of reduce op (no options) of x when an entry still
        holds for it (after waiting for x's stream, as the full way
        does), else None. convs: op -> the result's converter."""
        if op not in _OPS:
            return None
        hit = self._hits.get(id(x))
        if hit is None or hit.ref() is not x or hit.gen != gen or hit.probe(x) != hit.state:
            return None
        tail = hit.tails.get(op)
        if tail is None:
            tail = hit.tails[op] = _wire.region_reduce_tail(op, hit.dtype, hit.region,
                                                            hit.offset, hit.count)
        hit.sync()
        conv = convs[op]
        # holding x until the answer is converted, as _protocol._holding
        return tail, (lambda res, _x=x: conv(res)), None, None, True

    def store(self, x, sp, region, offset, gen):
        """Remember that x (Span sp) lies at offset in region, mapped in
        generation gen of the connection's DeviceMaps."""
        if sp.owner is not x:
            return
        probe = _PROBES.get((type(x).__module__ or "").split(".")[0])
        if probe is None:
            return
        try:
            ref = weakref.ref(x)
            state = probe(x)
        except (TypeError, AttributeError):
            return
        hits = self._hits
        hits.pop(id(x), None)
        while len(hits) >= _MAX:
            try:
                hits.pop(next(iter(hits)), None)
            except (StopIteration, RuntimeError):   # emptied or changed by another thread
                break
        hits[id(x)] = _Hit(ref, state, gen, region, offset, sp, probe)

    def clear(self):
        self._hits.clear()
