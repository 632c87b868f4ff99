"""Shared-memory regions, the client's side (PROTOCOL.md, "map"): a sealed
memfd mapped read-write here and handed to the daemon, which maps it
read-only and reduces arrays in it in place, or, mapped writable, also
writes prefix sums there."""

import fcntl
import mmap
import os
import threading
import weakref

import numpy as np

from . import _wire

_MAP_HEAD = _wire._str("map") + b"\x91\x81" + _wire._str("bytes")
_MAP_WRITABLE_HEAD = _wire._str("map") + b"\x91\x82" + _wire._str("bytes")
_WRITABLE = _wire._str("writable") + b"\xc3"
_UNMAP_HEAD = _wire._str("unmap") + b"\x91\x81" + _wire._str("region")


def map_params(nbytes, writable=False):
    """The bytes after the msgid of a map request (writable: with
    "writable": true)."""
    if writable:
        return _MAP_WRITABLE_HEAD + _wire._uint(nbytes) + _WRITABLE
    return _MAP_HEAD + _wire._uint(nbytes)


def unmap_params(region):
    return _UNMAP_HEAD + _wire._uint(region)


class _Mapping(mmap.mmap):
    """An mmap that can carry a weakref.finalize (arrays in a region keep
    it alive through their .base chain)."""


def new_memfd(nbytes):
    """(fd, mapping) of a new memfd of nbytes, sealed against shrinking and
    growing, mapped read-write. The caller closes fd."""
    fd = os.memfd_create("gpured", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        # allocated whole: the daemon maps no memfd with holes
        os.posix_fallocate(fd, 0, nbytes)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        m = _Mapping(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise
    return fd, m


def array_spec(shape, dtype):
    """(shape as a tuple, NumPy dtype, bytes of the region, at least 1) of
    an array Client.empty() makes: TypeError for a dtype the daemon does
    not take, ValueError for a negative dimension."""
    dt = np.dtype(dtype)
    if _wire.wire_name(dt) is None:
        raise _wire.unsupported(dt)
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    count = 1
    for s in shape:
        if s < 0:
            raise ValueError("negative dimensions are not allowed")
        count *= s
    return shape, dt, max(count * dt.itemsize, 1)


def region_array(m, shape, dtype, fill_zero):
    a = np.ndarray(shape, dtype=dtype, buffer=m)
    if fill_zero:
        a.fill(0)      # a new memfd reads as zeros; this only touches pages
    return a


def address_of(a):
    return a.__array_interface__["data"][0]


class RegionTable:
    """The regions one connection has mapped: address ranges here and the
    daemon's ids, and the ids whose arrays are gone and still have to be
    unmapped on the wire (sent by the connection at its next send)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ranges = []            # (start, end, region id, writable)
        self._doomed = []            # ids to unmap
        self.closed = False

    def __len__(self):
        return len(self._ranges)

    def add(self, m, region, on_release, writable=False):
        """Track mapping m as region (writable: the daemon maps it for
        writing too); when m is collected, queue the unmap and call
        on_release() (which should flush the queue)."""
        start = address_of(np.frombuffer(m, dtype=np.uint8))
        with self._lock:
            self._ranges.append((start, start + len(m), region, writable))
        f = weakref.finalize(m, self._release, region, on_release)
        f.atexit = False

    def _release(self, region, on_release):
        with self._lock:
            self._ranges = [r for r in self._ranges if r[2] != region]
            if self.closed:
                return
            self._doomed.append(region)
        on_release()

    def doom(self, regions):
        """Queue the unmaps of regions mapped by other means (GPU memory)."""
        with self._lock:
            if not self.closed:
                self._doomed.extend(regions)

    def take_doomed(self):
        if not self._doomed:
            return ()
        with self._lock:
            d, self._doomed = self._doomed, []
        return d

    def find(self, a):
        """(region id, byte offset) when contiguous array a lies wholly in
        a region, else None."""
        hit = self.find_out(a)
        return None if hit is None else hit[:2]

    def find_out(self, a):
        """(region id, byte offset, writable) when contiguous array a lies
        wholly in a region, else None."""
        if not self._ranges or a.nbytes == 0:
            return None
        start = address_of(a)
        end = start + a.nbytes
        for lo, hi, region, writable in self._ranges:
            if lo <= start and end <= hi:
                return region, start - lo, writable
        return None

    def close(self):
        """The connection is gone: the daemon has released every region."""
        with self._lock:
            self.closed = True
            self._ranges = []
            self._doomed = []
