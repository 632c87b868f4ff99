"""Prefix sums ("op": "cumsum", PROTOCOL.md "cumsum"): the requests of
Client.cumsum and gpured.aio's, and what their replies become. No I/O
here: the clients map the writable region a result may need and send.

Socket data answers {"count": n, "values": bin} (the values streamed back
while the elements still go out); an array in a region has the daemon
write its prefix sums into a writable region and answers {"count": n}:
a shared-memory region's into one of host memory (Plan), an array in GPU
memory's into GPU memory of its device (DevicePlan), which the daemon
answers once the GPU has written them."""

from collections import namedtuple

import numpy as np

from . import _device, _wire
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
        return Request(_region_tail(self.name, self.where, self.count, self.out_where),
                       _count_conv(self.count, self.out), None, _REPLY_HEAD_BYTES)


def _region_tail(name, where, count, out_where):
    (region, offset), (out_region, out_offset) = where, out_where
    return (_wire._REDUCE + b"\x87" + _str("op") + _str(OP) + _str("dtype") + _str(name) +
            _str("region") + _uint(region) + _str("offset") + _uint(offset) +
            _str("count") + _uint(count) + _str("out_region") + _uint(out_region) +
            _str("out_offset") + _uint(out_offset))


def _np_name(name):
    return _wire.TYPE_NAMES[name]


def device_plan(x, out, allow_copy):
    """The DevicePlan of cumsum(x, out=out) when x is an array in GPU
    memory that gpured reads in place, else None: Plan takes it (host
    memory; and, with allow_copy, a GPU x whose output is a NumPy array,
    or that no library here can make an output for). Raises TypeError or
    ValueError for an out that does not fit, before anything is sent."""
    if isinstance(x, np.ndarray):
        return None
    sp = _device.span(x, allow_copy)
    if sp is None:
        return None
    rname = _wire._DTYPES[result_dtype(sp.dtype)]
    t = type(sp.owner)
    if out is None:
        out = _device.new_like(sp, sp.count, rname)
        if out is None:
            if allow_copy:
                return None
            raise TypeError("the prefix sums of %s.%s in GPU memory go to GPU memory of its "
                            "device: pass out=, a contiguous array of %d %s there (or "
                            "allow_copy=True to copy x to the host and get a NumPy array)"
                            % (t.__module__, t.__name__, sp.count, _np_name(rname)))
        return DevicePlan(sp, out, _device.span(out, False), allow_copy)
    out_sp = _device.out_span(out)
    if out_sp is None:
        if allow_copy:
            return None
        raise TypeError("x is in GPU memory, so its prefix sums go to GPU memory of its device: "
                        "out must be a GPU array (a CUDA torch.Tensor, a CuPy array), not %s.%s "
                        "(or pass allow_copy=True to copy x to the host)"
                        % (type(out).__module__, type(out).__name__))
    if out_sp.dtype != rname:
        raise TypeError("out must be %s for the prefix sums of %s, not %s"
                        % (_np_name(rname), _np_name(sp.dtype), _np_name(out_sp.dtype)))
    if out_sp.count != sp.count:
        raise ValueError("out must have the %d elements of x, not %d"
                         % (sp.count, out_sp.count))
    return DevicePlan(sp, out, out_sp, allow_copy)


class DevicePlan:
    """One cumsum of an array in GPU memory, as far as it goes without
    I/O. sp: x's Span; out: the array the caller gets (given, or made by
    x's library), out_sp its Span. alloc and out_alloc: the allocations
    they lie in, both on one device, or None where the GPU route is closed
    (no elements; with allow_copy, memory that cannot be handed over, or
    a dtype whose prefix sums the daemon takes from host memory only).

    The client maps out_alloc writable, then alloc (a read takes a
    writable mapping first: in place, x and out name one region), calls
    sync() and sends request(where, out_where). Where the route is closed
    or the daemon refuses to map (with allow_copy), host_request() sends x
    through the host instead and copies the values it gets into out."""

    def __init__(self, sp, out, out_sp, allow_copy):
        self.sp, self.out, self.out_sp = sp, out, out_sp
        self.count = sp.count
        self.alloc = self.out_alloc = None
        if self.count == 0:
            return
        alloc = _device.allocation(sp, allow_copy)
        out_alloc = None if alloc is None else _device.allocation(out_sp, allow_copy)
        if out_alloc is None:
            return
        if out_alloc.device != alloc.device:
            raise ValueError("out is on %s and x on %s: the prefix sums of GPU memory go to GPU "
                             "memory of the same device" % (out_alloc.device, alloc.device))
        self.alloc, self.out_alloc = alloc, out_alloc

    def sync(self):
        """Wait for the streams that write x and out: the daemon reads and
        writes what they had finished."""
        self.sp.sync()
        self.out_sp.sync()

    def request(self, where, out_where):
        """The Request of x at where (region id, byte offset) into
        out_where, both mappings of this connection."""
        return Request(_region_tail(self.sp.dtype, where, self.count, out_where), self._done,
                       None, _REPLY_HEAD_BYTES)

    def _done(self, res):
        # A bound method: x and out stay alive until the daemon is done.
        return _count_conv(self.count, self.out)(res)

    def host_request(self, regions):
        """The Request of the socket route: x copied to the host, its
        values copied into out once they are back."""
        sp = self.sp
        if self.count:
            _device.driver()        # NotSupported now, rather than once the values are back
        x = (_device.host_empty(sp) if self.count == 0 else
             _wire.Typed(*_wire.as_array(sp.owner, True)))
        req = Plan(x, None, True, regions).request()
        conv = req.conv

        def into_out(res):
            values = conv(res)
            if self.count:
                try:
                    _device.driver().copy_to_device(self.out_sp.ptr, values)
                except Exception as e:
                    raise ValueError("copying the prefix sums into out: %s" % (e,)) from None
            return self.out
        return req._replace(conv=into_out)


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
