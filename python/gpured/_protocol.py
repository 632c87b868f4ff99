"""The protocol both clients speak, with no I/O: gpured.Client (blocking
sockets, client.py) and gpured.aio.Client (asyncio, aio.py) are each a
transport around one Protocol.

A Protocol holds a connection's state: the requests in flight by msgid,
the reply decoder, the shared-memory regions and GPU mappings, and why
the connection died. It builds every method's request (a Call: the
bytes after the msgid, the converter of its result, descriptors and
buffers to send with it), turns bytes read from the socket into the
outcomes of those requests (a value, or the exception of errors.py the
daemon's error maps to), and fails them all when the connection goes.
It never touches the socket and never waits: the transports send,
read, and wait for answers.

A method that needs other requests answered first (an array in GPU
memory is mapped before it is reduced; a cumsum of a region may need a
writable region for its prefix sums) returns Steps: each Call they
yield is sent and waited for by the transport, which hands them the
result (or the exception); they end with the method's own Call
(submit) or value (empty).
"""

import functools
import os

import msgpack
import numpy as np

from . import _cumsum, _device, _exact, _gpu_hits, _regions, _wire
from .errors import (Busy, ConnectionError, Error, Internal, InvalidParams, Timeout, TooLarge,
                     error_from_wire)

# Transport settings both clients share: the send buffer asked for, the
# bytes one recv takes, and how many bytes of small requests are held
# back to go out in one write.
SNDBUF_BYTES = 4 << 20
RECV_BYTES = 256 << 10
CORK_BYTES = 64 << 10

# [0, msgid, ...: a request's array, its type and a uint32 msgid.
_REQUEST = b"\x94\x00\xce"
_MAX_MSGID = 0xFFFFFFFF

# The errors after which the daemon closes the connection.
_CLOSING_CODES = frozenset(("busy", "invalid_request"))


# A request is a Call, the tuple (tail, conv, fds, data): tail, its
# bytes after the msgid; conv, what turns its result into what the caller
# gets; fds, descriptors sent with its bytes (SCM_RIGHTS) or None; data,
# a buffer or a list of them sent from their own memory after tail, or
# None; a fifth field, True, says that the request reads GPU memory in
# place (the blocking client spins for its answer: Client's spin_us).
# (A plain tuple: one is made for every request.)


# ---- results ----

def ident(res):
    return res


def as_map(res):
    if not isinstance(res, dict):
        raise ValueError("expected a map, got %r" % (res,))
    return res


def _value(res):
    try:
        return res["value"]
    except (TypeError, KeyError):
        raise ValueError("malformed reduce result: %r" % (res,)) from None


def _full(res):
    return _wire.reduce_value(res, True)


# The converter of a plain reduce's value (the C extension, client.py's
# _FastConn, reads the value of such a result itself).
value_conv = _value


# A whole-array reduce's result by op: (without full=, with full=True).
_RESULTS = {op: (_value, _full) for op in _wire.OPS}
_RESULTS.update({op: (_wire.arg_result,) * 2 for op in _wire.ARG_OPS})
_RESULTS[_wire.MOMENTS] = (_wire.moments_result,) * 2


def result_conv(op, dt, full, partial):
    """The converter of a whole-array reduce's result: op's (full=True:
    with the count), or with partial=True an exact Partial (sum, min,
    max and sumsq only: ValueError for the others)."""
    if partial:
        if op not in _wire.OPS:
            raise ValueError("partial=True is for %s, not %s" % (", ".join(_wire.OPS), op))
        return functools.partial(_exact.from_result, op, dt)
    return _RESULTS[op][1 if full else 0]


# The converters of whole-array reduces with no options, by op.
_PLAIN_CONVS = {op: convs[0] for op, convs in _RESULTS.items()}


# The Calls' heads of small whole-array reduces with no options, of a
# plain NumPy array in host memory, by (op, dtype, nbytes): (the bytes
# after the msgid up to the elements, conv). Made on first use; cleared
# when full.
_SMALL_HEADS = {}
_SMALL_HEADS_MAX = 4096
_ndarray = np.ndarray


def _small_head(op, dtype, n):
    """The entry of _SMALL_HEADS for (op, dtype, n), stored; None where
    the fast way does not apply (an op that is not a plain reduce, a
    dtype that is not one of the wire's own, more bytes than are copied)."""
    name = _wire.wire_name(dtype)
    mid = _wire.REDUCE_MID.get((op, name))
    if mid is None or n > _wire.SMALL_COPY_BYTES:
        return None
    if len(_SMALL_HEADS) >= _SMALL_HEADS_MAX:
        _SMALL_HEADS.clear()
    hit = _SMALL_HEADS[op, dtype, n] = (mid + _wire.bin_header(n), _RESULTS[op][0])
    return hit


def small_head(op, dtype, n):
    """(the bytes after the msgid up to the elements, conv) of a small
    whole-array reduce with no options of a plain NumPy array of dtype and
    n bytes, as Protocol.submit's fast way makes it; None where that way
    does not apply. The C extension asks once per (op, dtype, n)."""
    return _SMALL_HEADS.get((op, dtype, n)) or _small_head(op, dtype, n)


# The methods that take no params: their Calls, made once.
METHODS = {name: (_wire._str(name) + b"\x90", conv, None, None)
           for name, conv in (("ping", ident), ("info", as_map), ("stats", as_map))}


def method_call(method, params):
    """The Call of any method, params packed by msgpack; the raw result."""
    tail = _wire._str(method) if len(method.encode()) < 32 else msgpack.packb(method)
    return tail + msgpack.packb(list(params)), ident, None, None


# ---- sending ----

def sent(bufs, n):
    """What is left of bufs, a list of buffers, once a send took n bytes
    of them: the rest of a buffer is a view, not a copy."""
    while n >= len(bufs[0]):
        n -= len(bufs[0])
        bufs = bufs[1:]
    if n:
        bufs = [memoryview(bufs[0])[n:]] + bufs[1:]
    return bufs


def connect_timeout(path, timeout):
    return Timeout("connecting to %s took longer than %gs" % (path, timeout))


def connect_failed(path, e):
    """The exception for an OSError e from connect()."""
    return ConnectionError("cannot connect to %s: %s" % (path, e.strerror or e))


# ---- receiving ----

class MalformedReply(ValueError):
    """The bytes are not a stream of msgpack-RPC responses, or one is
    larger than the decoder's limit. ``responses``: those that came whole
    before the fault, as feed() returns them."""

    responses = ()


class ReplyTooLarge(MalformedReply):
    """A response not yet whole already passes the decoder's limit."""


class ReplyDecoder:
    """msgpack-RPC responses out of a byte stream: feed() it what was
    read, in pieces of any size; it returns the (msgid, error, result) of
    each response now whole. A response larger than ``limit`` bytes
    raises MalformedReply (ReplyTooLarge as soon as the bytes of one not
    yet whole pass it), as does anything that is not a response; the
    stream cannot be read on after either."""

    def __init__(self, limit=_wire.MAX_REPLY_BYTES):
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False,
                                          max_buffer_size=_wire.UNPACK_MAX_BYTES)
        self.limit = limit
        self._fed = 0           # bytes fed so far
        self._parsed = 0        # those whole responses took

    def expect(self, nbytes):
        """Let responses be as large as nbytes (a cumsum's values), from
        now on."""
        if nbytes > self.limit:
            self.limit = nbytes

    def feed(self, data):
        """Take data; the (msgid, error, result) of each response it
        completes, in order (a list: one read usually completes one)."""
        unpacker = self._unpacker
        unpacker.feed(data)
        self._fed += len(data)
        out = []
        try:
            for msg in unpacker:
                end = unpacker.tell()
                if end - self._parsed > self.limit:
                    raise MalformedReply("a reply larger than %d bytes" % self.limit)
                self._parsed = end
                if (type(msg) is not list or len(msg) != 4 or msg[0] != 1
                        or type(msg[1]) is not int):
                    raise MalformedReply("not a msgpack-RPC response: %.100r" % (msg,))
                out.append((msg[1], msg[2], msg[3]))
            if self._fed - self._parsed > self.limit:
                raise ReplyTooLarge("a reply larger than %d bytes" % self.limit)
        except Exception as e:      # msgpack's own errors too: the stream is garbage
            if not isinstance(e, MalformedReply):
                e = MalformedReply(str(e))
            e.responses = out
            raise e
        return out


class Broken(Exception):
    """The connection cannot go on: args are the class and the message of
    the error every request on it gets (Protocol.fail)."""


# ---- the connection ----

# pending's entry for a msgid not in flight
_NOT_PENDING = (None, None)


class Protocol:
    """One connection's state, without its socket. ``path`` names it in
    messages. Each request in flight has a future (concurrent.futures or
    asyncio), which gets its outcome: ``cancelled`` is the exception its
    set_result() raises once its owner has cancelled it (and the outcome
    is dropped). ``on_unmap()`` is called when regions are queued for
    unmapping (from any thread, maybe inside a send: it should send them
    when it can, unmap_requests())."""

    def __init__(self, path, cancelled, on_unmap):
        self.path = path
        self.cancelled = cancelled
        self.on_unmap = on_unmap
        self.pending = {}           # msgid -> (future, conv); None: drop the reply
        self.msgid = 0
        self.replies = ReplyDecoder()
        self.regions = _regions.RegionTable()
        self.device_maps = _device.DeviceMaps()
        self.gpu_hits = _gpu_hits.GpuHits()
        self.dead = None            # (class, message) once the connection is gone
        self.closing = None         # why the daemon said it closes, likewise

    # ---- requests in flight ----

    def request(self, fut, tail, conv):
        """Put a request in flight: (its msgid, its bytes up to its data).
        fut gets its outcome (receive(), fail()). Raises the connection's
        error once it is dead."""
        if self.dead is not None:
            self.raise_dead()
        m = self.msgid + 1
        if m > _MAX_MSGID or m in self.pending:
            m = self._free_msgid()
        self.msgid = m
        self.pending[m] = (fut, conv)
        return m, _REQUEST + m.to_bytes(4, "big") + tail

    def _free_msgid(self):
        m = self.msgid + 1
        while True:
            if m > _MAX_MSGID:
                m = 1
            if m not in self.pending:
                return m
            m += 1

    def forget(self, msgid):
        """A request that did not go out: no outcome will come."""
        self.pending.pop(msgid, None)

    def unmap_requests(self):
        """The unmap requests of the regions whose arrays are gone (their
        replies are dropped), to send before anything else."""
        return [self.request(None, _regions.unmap_params(region), None)[1]
                for region in self.regions.take_doomed()]

    def receive(self, data):
        """Take data, bytes read from the socket (empty: the end of the
        stream), and complete the future of each request it answers: with
        the converted result, or the exception the daemon's error maps to
        (a result that does not convert: Error "internal"). Replies to no
        request in flight are dropped. Raises Broken when the connection
        cannot go on."""
        if not data:
            raise Broken(*self.eof())
        broken = None
        try:
            responses = self.replies.feed(data)
        except MalformedReply as e:
            responses, broken = e.responses, e
        pending = self.pending
        for msgid, err, res in responses:
            fut, conv = pending.pop(msgid, _NOT_PENDING)
            if err is not None:
                exc = self.error(err)
                if fut is not None:
                    self._set_exception(fut, exc)
            elif fut is not None:
                try:
                    value = conv(res)
                except (ValueError, TypeError) as e:
                    self._set_exception(fut, Error(str(e), code="internal"))
                    continue
                except Exception as e:      # no result of ours: the stream is garbage
                    broken = e
                    break
                try:
                    fut.set_result(value)
                except self.cancelled:
                    pass
        if broken is None:
            return
        if isinstance(broken, ReplyTooLarge):
            raise Broken(ConnectionError, "a reply from %s larger than %d bytes"
                         % (self.path, self.replies.limit))
        raise Broken(ConnectionError, "malformed response from %s: %s" % (self.path, broken))

    def _set_exception(self, fut, exc):
        try:
            fut.set_exception(exc)
        except self.cancelled:
            pass

    def error(self, err):
        """The exception for a response's error; notes why the daemon
        closes the connection after it (busy, invalid_request)."""
        exc = error_from_wire(err)
        if exc.code in _CLOSING_CODES:
            self.closing = (type(exc), exc.message)
        return exc

    # ---- the end ----

    def lost(self, e):
        """(class, message) of the connection's end after a send or recv
        failed with OSError e: the daemon's reason, if it gave one."""
        return self.closing or (ConnectionError, "connection to %s lost: %s"
                                % (self.path, e.strerror or e))

    def eof(self):
        return self.closing or (ConnectionError, "connection closed by the daemon")

    def fail(self, cls, message):
        """Mark the connection dead (the first reason wins), release its
        regions (the daemon does too) and fail every request in flight
        with the error."""
        if self.dead is None:
            self.dead = (cls, message)
        self.regions.close()
        self.device_maps.clear()
        self.gpu_hits.clear()
        cls, message = self.dead
        pending = self.pending
        while pending:
            try:
                _, (fut, _conv) = pending.popitem()
            except KeyError:        # taken by a reader meanwhile
                break
            if fut is not None:
                self._set_exception(fut, cls(message))

    def raise_dead(self):
        cls, message = self.dead
        raise cls(message)

    # ---- methods ----

    def submit(self, op, x, full, allow_copy, partial, ddof, offsets, out):
        """The Call of Client.submit(), or, where other requests must be
        answered first, the Steps that end with it. Options that do not
        go together raise here."""
        if (type(x) is _ndarray and not full and not partial and ddof is None
                and offsets is None and out is None and not self.regions._ranges):
            # The common case, a small plain array with no options: its
            # bytes, in memory order (what _host_reduce sends after making
            # a strided array C-contiguous), after a head made once.
            dtype = x.dtype
            n = x.nbytes
            hit = _SMALL_HEADS.get((op, dtype, n)) or _small_head(op, dtype, n)
            if hit is not None:
                return hit[0] + x.tobytes("A"), hit[1], None, None
        if (not full and not partial and ddof is None and offsets is None and out is None
                and not isinstance(x, np.ndarray)):
            # A GPU array reduced before in place: its request again.
            call = self.gpu_hits.call(op, x, self.device_maps.gen, _PLAIN_CONVS)
            if call is not None:
                return call
        if op == _wire.CUMSUM:
            _cumsum.check_options(full, partial, ddof, offsets)
            return Steps(self._cumsum(x, out, allow_copy))
        if out is not None:
            raise ValueError("out= is for cumsum, not %s" % (op,))
        if op not in _wire.REDUCE_OPS:
            _wire.check_op(op)
        if ddof is not None or op == _wire.MOMENTS:
            ddof = _wire.check_ddof(op, ddof)
        if offsets is not None:
            if partial:
                raise ValueError("partial=True is not available with offsets")
            x, sp = _device.gpu_span(x, allow_copy)
            if sp is None:
                return self._host_segments(op, x, full, allow_copy, ddof, offsets)
            return Steps(self._gpu_segments(op, x, sp, full, allow_copy, ddof, offsets))
        if not isinstance(x, np.ndarray):      # (gpu_span's first test, here for speed)
            x, sp = _device.gpu_span(x, allow_copy)
            if sp is not None:
                return Steps(self._gpu_reduce(op, x, sp, full, allow_copy, partial, ddof))
        return self._host_reduce(op, x, full, allow_copy, partial, ddof)

    def _host_reduce(self, op, x, full, allow_copy, partial, ddof):
        """The Call of a reduce of x in host memory: its bytes, or where
        it lies in a region."""
        a, name = _wire.as_array(x, allow_copy)
        conv = result_conv(op, name, full, partial) if partial else _RESULTS[op][1 if full else 0]
        if self.regions._ranges:
            where = self.regions.find(a)
            if where is not None:
                return (_wire.region_reduce_tail(op, name, where[0], where[1], a.size, partial,
                                                 ddof), conv, None, None)
        if ddof is not None:
            mid = _wire.moments_mid(name, ddof)
        else:
            mid = (_wire.REDUCE_MID_PARTIAL if partial else _wire.REDUCE_MID)[op, name]
        n = a.nbytes
        if n <= _wire.SMALL_COPY_BYTES:
            return mid + _wire.bin_header(n) + a.tobytes(order="A"), conv, None, None
        if n > _wire.MAX_BIN:
            raise TooLarge("%d bytes do not fit in one request (at most %d); "
                           "use a shared-memory region (Client.empty)" % (n, _wire.MAX_BIN))
        return mid + _wire.bin_header(n), conv, None, _wire.data_view(a)

    def _gpu_reduce(self, op, x, sp, full, allow_copy, partial, ddof):
        """Steps: a reduce of x, in GPU memory (Span sp), where it lies;
        through the host where it cannot be mapped (allow_copy)."""
        where = yield from self.device_target(sp, allow_copy)
        if where is None:
            return self._host_reduce(op, x, full, allow_copy, partial, ddof)
        sp.sync()
        if not full and not partial and ddof is None:
            self.gpu_hits.store(x, sp, where[0], where[1], self.device_maps.gen)
        return (_wire.region_reduce_tail(op, sp.dtype, where[0], where[1], sp.count, partial, ddof),
                _holding(result_conv(op, sp.dtype, full, partial), sp), None, None, True)

    def _host_segments(self, op, x, full, allow_copy, ddof, offsets):
        """submit() with offsets (_wire.segments_request) in host memory."""
        tail, conv, data = _wire.host_segments_request(op, x, allow_copy, ddof, offsets, full,
                                                       self.regions)
        return tail, conv, None, data

    def _gpu_segments(self, op, x, sp, full, allow_copy, ddof, offsets):
        """Steps: the same, in GPU memory."""
        where = yield from self.device_target(sp, allow_copy)
        if where is None:
            return self._host_segments(op, x, full, allow_copy, ddof, offsets)
        tail, conv, _ = _wire.segments_request(op, sp.dtype, sp.count, ddof, offsets, full, where)
        sp.sync()
        return tail, _holding(conv, sp), None, None, True

    def _cumsum(self, x, out, allow_copy):
        """submit("cumsum"): a region of this connection for the prefix
        sums of an array in a region, mapped first when out names none;
        for an array in GPU memory, out's allocation mapped writable."""
        dev = _cumsum.device_plan(x, out, allow_copy)
        if dev is not None:
            req = None
            if dev.alloc is not None:
                out_where = yield from self.device_target(dev.out_sp, allow_copy, dev.out_alloc,
                                                          True)
                where = (None if out_where is None else
                         (yield from self.device_target(dev.sp, allow_copy, dev.alloc)))
                if where is not None:
                    dev.sync()
                    req = dev.request(where, out_where)
            if req is None:
                req = dev.host_request(self.regions)
        else:
            plan = _cumsum.Plan(x, out, allow_copy, self.regions)
            if plan.needs_out:
                plan.set_out((yield from self._empty(plan.count, plan.rdt, True)))
            req = plan.request()
        self.replies.expect(req.reply_bytes)
        return req.tail, req.conv, None, req.data

    def device_target(self, sp, allow_copy, alloc=None, writable=False):
        """Steps that return (region id, byte offset) of GPU array sp in
        this connection's mapping of its allocation (alloc, found here
        when None), mapping it first (writable: for writing too); None to
        copy it."""
        if alloc is None:
            alloc = _device.allocation(sp, allow_copy)
            if alloc is None:
                return None
        hit = self.device_maps.lookup(alloc, writable)
        if hit is None:
            params, fd = alloc.map_params(writable)
            try:
                res = yield _device.map_tail(params), ident, None if fd is None else [fd], None
            except (InvalidParams, Busy, Internal) as e:
                return _device.map_refused(e, allow_copy)
            finally:
                if fd is not None:
                    os.close(fd)
            if alloc.parts:
                res = yield from self._map_parts(alloc, res, allow_copy)
                if res is None:
                    return None
            hit, unmap = self.device_maps.store(alloc, res, writable)
            if unmap:
                self.regions.doom(unmap)
                self.on_unmap()
        return hit[0], sp.ptr - hit[1]

    def _map_parts(self, alloc, res, allow_copy):
        """Steps that hand over the parts after the first of a range of
        several allocations, mapped by map's answer res: the last
        map_part's answer, or None to copy instead (the region unmapped)."""
        region = res.get("region") if isinstance(res, dict) else None
        if not isinstance(region, int):
            raise InvalidParams("map answered %r" % (res,))
        drv = _device.driver()
        try:
            for tail, base in alloc.part_requests(region):
                fd = drv.export_fd(base)
                try:
                    res = yield tail, ident, [fd], None
                finally:
                    os.close(fd)
        except BaseException as e:
            self.regions.doom([region])
            self.on_unmap()
            if isinstance(e, (InvalidParams, Busy, Internal)):
                return _device.map_refused(e, allow_copy)
            raise
        return res

    def empty(self, shape, dtype, writable):
        """The Steps of Client.empty(): they return the array."""
        return Steps(self._empty(shape, dtype, writable))

    def _empty(self, shape, dtype, writable):
        shape, dt, nbytes = _regions.array_spec(shape, dtype)
        fd, m = _regions.new_memfd(nbytes)
        try:
            res = yield _regions.map_params(nbytes, writable), as_map, [fd], None
        except BaseException:
            m.close()
            raise
        finally:
            os.close(fd)
        region = res.get("region")
        if not isinstance(region, int):
            raise InvalidParams("map answered %r" % (res,))
        self.regions.add(m, region, self.on_unmap, writable)
        return _regions.region_array(m, shape, dt, False)


def _holding(conv, sp):
    """conv, holding Span sp (and so the array it is of) until the answer
    is converted: the daemon reads GPU memory in place while the request
    is in flight, and an allocator must not reuse it under the request
    when the caller drops the array."""
    return lambda res, _sp=sp: conv(res)


class Steps:
    """A method's steps, run by a transport: ``call`` is the request to
    send and wait for next, None once they are done, and ``value`` then
    what they ended with. Hand each call's result to send(), or its
    exception to throw(). gen: the generator of the steps."""

    __slots__ = ("_gen", "call", "value")

    def __init__(self, gen):
        self._gen = gen
        self.value = None
        self._resume(gen.send, None)

    def send(self, result):
        self._resume(self._gen.send, result)

    def throw(self, exc):
        self._resume(self._gen.throw, exc)

    def _resume(self, how, arg):
        try:
            self.call = how(arg)
        except StopIteration as e:
            self.call, self.value = None, e.value
