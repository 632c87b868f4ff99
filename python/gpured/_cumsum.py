"""Prefix sums ("op": "cumsum", PROTOCOL.md "cumsum"): the requests of
Client.cumsum and gpured.aio's, and what their replies become. No I/O
here: the clients map the writable region a result may need and send.

Socket data answers {"count": n, "values": bin} (the values streamed back
while the elements still go out); an array in a region has the daemon
write its prefix sums into a writable region and answers {"count": n}."""

from collections import namedtuple

import numpy as np

from . import _wire
from .errors import TooLarge

OP = "cumsum"

# The most prefix sums one reply holds: 8 bytes each in a bin below 4 GiB.
MAX_COUNT = _wire.MAX_BIN // 8

# A reply's bytes besides its values (array, msgid, map, count, the bin's
# header), generously.
_REPLY_HEAD_BYTES = 64

_str, _uint = _wire._str, _wire._uint

# [0, msgid, "reduce", [{"op": "cumsum", "dtype": dt, "data": ...}]]: op
# and dtype before data, as the daemon needs to answer while data arrive.
_DATA_MID = {
    dt: _wire._REDUCE + b"\x83" + _str("op") + _str(OP) + _str("dtype") + _str(dt) + _str("data")
    for dt in _wire.DTYPE_NAMES
}

# tail: the bytes after the msgid; conv: the reply's result to what the
# caller gets; data: buffers sent from their own memory (or None);
# reply_bytes: how large the reply may be.
Request = namedtuple("Request", "tail conv data reply_bytes")


def result_dtype(dt):
    """The prefix sums' NumPy dtype for wire dtype dt: sum's result kind."""
    return _wire.value_dtype("sum", dt)


def check_options(full, partial, ddof, offsets):
    """What reduce() and submit() take that cumsum does not."""
    for name, given in (("full=True", full), ("partial=True", partial),
                        ("ddof", ddof is not None), ("offsets", offsets is not None)):
        if given:
            raise ValueError("%s is not available with cumsum" % name)


def _check_out(out, count, rdt):
    if not isinstance(out, np.ndarray):
        raise TypeError("out must be a NumPy array, not %s" % type(out).__name__)
    if out.dtype != rdt:
        raise TypeError("out must be %s for these prefix sums, not %s" % (rdt, out.dtype))
    if out.size != count:
        raise ValueError("out must have the %d elements of x, not %d" % (count, out.size))
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError("out is read-only")


class Plan:
    """One cumsum, as far as it can be settled without I/O: x as a
    C-contiguous array a of wire dtype name, where it lies (a region of
    regions, or None), and out checked. A plan of an array in a region
    with no out needs a writable region of count elements of rdt for its
    result (needs_out); set_out() takes it."""

    def __init__(self, x, out, allow_copy, regions):
        a, self.name = _wire.as_array(x, allow_copy)
        # numpy's cumsum runs over the elements in C order
        self.a = np.ascontiguousarray(a)
        self.count = self.a.size
        self.rdt = result_dtype(self.name)
        self.regions = regions
        if out is not None:
            _check_out(out, self.count, self.rdt)
        self.where = regions.find(self.a) if regions._ranges else None
        self.out = None
        self.out_where = None
        if out is not None:
            self.set_out(out)

    @property
    def needs_out(self):
        return self.where is not None and self.out is None

    def set_out(self, out):
        self.out = out
        if self.where is None:
            return
        hit = self.regions.find_out(out)
        if hit is None or not hit[2]:
            raise ValueError("x lies in a shared-memory region, so the daemon writes its prefix "
                             "sums into one: out must be an array of empty(..., writable=True) "
                             "%s" % ("(its region is read-only)" if hit else "of this client"))
        self.out_where = hit[:2]

    def request(self):
        """The Request to send."""
        if self.where is not None:
            return self._region_request()
        return self._data_request()

    def _data_request(self):
        n, a = self.count, self.a
        if n > MAX_COUNT:
            raise TooLarge("the prefix sums of %d elements do not fit in one reply (at most %d); "
                           "put the array in a region (Client.empty) and the sums in a "
                           "writable one" % (n, MAX_COUNT))
        conv = _values_conv(n, self.rdt, self.out)
        mid = _DATA_MID[self.name] + _wire.bin_header(a.nbytes)
        reply = 8 * n + _REPLY_HEAD_BYTES
        if a.nbytes <= _wire.SMALL_COPY_BYTES:
            return Request(mid + a.tobytes(), conv, None, reply)
        return Request(mid, conv, _wire.data_view(a), reply)

    def _region_request(self):
        (region, offset), (out_region, out_offset) = self.where, self.out_where
        tail = (_wire._REDUCE + b"\x87" + _str("op") + _str(OP) + _str("dtype") + _str(self.name) +
                _str("region") + _uint(region) + _str("offset") + _uint(offset) +
                _str("count") + _uint(self.count) + _str("out_region") + _uint(out_region) +
                _str("out_offset") + _uint(out_offset))
        return Request(tail, _count_conv(self.count, self.out), None, _REPLY_HEAD_BYTES)


def _values_conv(n, rdt, out):
    def conv(res):
        try:
            count, values = res["count"], res["values"]
        except (TypeError, KeyError):
            raise ValueError("malformed cumsum result: %.200r" % (res,)) from None
        if count != n or not isinstance(values, bytes) or len(values) != 8 * n:
            raise ValueError("cumsum result of %r elements (%r bytes of values), for %d"
                             % (count, len(values) if isinstance(values, bytes) else values, n))
        v = np.frombuffer(values, dtype=rdt)
        if out is None:
            return v.copy()
        out.reshape(-1)[:] = v
        return out
    return conv


def _count_conv(n, out):
    def conv(res):
        try:
            count = res["count"]
        except (TypeError, KeyError):
            raise ValueError("malformed cumsum result: %.200r" % (res,)) from None
        if count != n:
            raise ValueError("cumsum result of %r elements, for %d" % (count, n))
        return out
    return conv
