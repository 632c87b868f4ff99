"""gpured on asyncio: the same client as :class:`gpured.Client`, with
coroutines.

    import gpured.aio

    async with gpured.aio.Client() as c:
        total = await c.sum(x)
        futs = [await c.submit("max", part) for part in parts]
        results = await asyncio.gather(*futs)

A reader callback on the loop completes requests by msgid, so any number
of tasks may use one client at once. Sends go straight from the array's
memory with non-blocking ``sendmsg`` (writer callbacks when the socket is
full; no stream buffers copying the data).
"""

import array
import asyncio
import os
import socket

import msgpack
import numpy as np

from . import _cumsum, _device, _regions, _wire
from .client import SNDBUF_BYTES, _dict, _full, _ident, _value
from .errors import Busy, ConnectionError, Error, Internal, InvalidParams, Timeout, TooLarge
from .errors import error_from_wire

__all__ = ["Client", "connect"]

_MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_RECV_BYTES = 256 << 10
_CORK_BYTES = 64 << 10


async def connect(path=None, timeout=None):
    """A connected :class:`Client`."""
    c = Client(path, timeout)
    await c.connect()
    return c


class Client:
    """An asyncio connection to a gpured daemon; ``path`` and ``timeout`` as
    for :class:`gpured.Client`. Connect with ``await client.connect()``, or
    ``async with gpured.aio.Client() as c``, or ``await gpured.aio.connect()``.
    Bound to the event loop that connected it."""

    def __init__(self, path=None, timeout=None):
        self.path = _wire.socket_path(path)
        self.timeout = timeout
        self._sock = None
        self._loop = None
        self._pending = {}
        self._msgid = 0
        self._dead = None
        self._closing = None    # why the daemon said it closes
        self._regions = _regions.RegionTable()
        self._device_maps = _device.DeviceMaps()
        self._send_lock = asyncio.Lock()
        self._out = []                  # small requests held for one write
        self._out_bytes = 0
        self._flush_scheduled = False
        self._lost = None               # a future, done once the connection is gone
        self._writable = None           # a future a send waits on, if one does
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False,
                                          max_buffer_size=_wire.UNPACK_MAX_BYTES)
        # As gpured.Client's: how large a reply may grow, the bytes fed
        # and those whole replies took.
        self._reply_limit = _wire.MAX_REPLY_BYTES
        self._fed = 0
        self._parsed = 0

    async def __aenter__(self):
        if self._sock is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def __repr__(self):
        state = "closed" if self._dead else ("open" if self._sock else "not connected")
        return "<gpured.aio.Client %s %s>" % (self.path, state)

    async def connect(self):
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, self.path), self.timeout)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF_BYTES)
            except OSError:
                pass
        except asyncio.TimeoutError:
            sock.close()
            raise Timeout("connecting to %s took longer than %gs" % (self.path, self.timeout)) from None
        except OSError as e:
            sock.close()
            raise ConnectionError("cannot connect to %s: %s" % (self.path, e.strerror or e)) from e
        self._sock = sock
        self._loop = loop
        self._lost = loop.create_future()
        loop.add_reader(sock.fileno(), self._on_readable)

    @property
    def closed(self):
        return self._dead is not None

    async def close(self):
        """Close the connection; requests in flight fail with
        :class:`gpured.ConnectionError`. Closing twice is fine."""
        self._fail(ConnectionError, "the client was closed")
        if self._sock is not None:
            self._sock.close()

    # ---- wire ----

    def _fail(self, cls, message):
        if self._dead is None:
            self._dead = (cls, message)
        if self._sock is not None:
            if self._lost is not None and not self._lost.done():
                self._lost.set_result(None)
                if not self._loop.is_closed():
                    self._loop.remove_reader(self._sock.fileno())
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._regions.close()
        self._device_maps.clear()
        self._out = []
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)     # the send fails at once
        cls, message = self._dead
        pending, self._pending = self._pending, {}
        for fut, _conv in pending.values():
            if fut is not None and not fut.done():
                fut.set_exception(cls(message))

    def _raise_dead(self):
        cls, message = self._dead
        raise cls(message)

    def _on_readable(self):
        # Called by the loop whenever the socket is readable: no task and
        # no future per read.
        if self._dead is not None:
            return
        try:
            data = self._sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._fail(*(self._closing or (ConnectionError, "connection to %s lost: %s"
                                           % (self.path, e.strerror or e))))
            return
        if not data:
            self._fail(*(self._closing or (ConnectionError, "connection closed by the daemon")))
            return
        self._unpacker.feed(data)
        self._fed += len(data)
        pending = self._pending
        try:
            for msg in self._unpacker:
                end = self._unpacker.tell()
                if end - self._parsed > self._reply_limit:
                    raise ValueError("a reply larger than %d bytes" % self._reply_limit)
                self._parsed = end
                if type(msg) is not list or len(msg) != 4 or msg[0] != 1:
                    raise ValueError("not a msgpack-RPC response: %.100r" % (msg,))
                _, msgid, err, res = msg
                entry = pending.pop(msgid, None)
                fut = entry[0] if entry is not None else None
                if err is not None:
                    exc = error_from_wire(err)
                    if exc.code in ("busy", "invalid_request"):
                        # The daemon closes the connection after these.
                        self._closing = (type(exc), exc.message)
                    if fut is not None and not fut.done():
                        fut.set_exception(exc)
                    continue
                if fut is None or fut.done():
                    continue
                try:
                    fut.set_result(entry[1](res))
                except (ValueError, TypeError) as e:
                    fut.set_exception(Error(str(e), code="internal"))
        except Exception as e:      # msgpack's errors too: the stream is garbage
            self._fail(ConnectionError, "malformed response from %s: %s" % (self.path, e))
            return
        if self._fed - self._parsed > self._reply_limit:
            self._fail(ConnectionError, "a reply from %s larger than %d bytes"
                       % (self.path, self._reply_limit))

    async def _wait_writable(self):
        fut = self._writable = self._loop.create_future()
        fd = self._sock.fileno()

        def ready():
            if not fut.done():
                fut.set_result(None)
        self._loop.add_writer(fd, ready)
        try:
            if self.timeout is None:
                await fut
            else:
                await asyncio.wait_for(fut, self.timeout)
        finally:
            self._loop.remove_writer(fd)

    def _sendmsg_now(self, bufs, anc):
        """Send what the socket takes now; the buffers still to go."""
        left = sum(len(b) for b in bufs)
        while left:
            try:
                n = self._sock.sendmsg(bufs, anc, _MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return bufs, anc
            left -= n
            if not left:
                break
            anc = []
            while n >= len(bufs[0]):
                n -= len(bufs[0])
                bufs = bufs[1:]
            if n:
                bufs = [memoryview(bufs[0])[n:]] + bufs[1:]
        return None, None

    async def _send(self, bufs, fds=None):
        if fds is None and len(bufs) == 1 and not self._send_lock.locked():
            # A small request: held until the loop comes round (one
            # iteration), so that the requests that tasks send meanwhile go
            # out in one write.
            self._out.append(bufs[0])
            self._out_bytes += len(bufs[0])
            if self._out_bytes < _CORK_BYTES:
                if not self._flush_scheduled:
                    self._flush_scheduled = True
                    self._loop.call_soon(self._flush_soon)
                return
            bufs = []
        anc = []
        if fds is not None:
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        async with self._send_lock:
            if self._out:
                await self._send_out_locked()
            if self._regions._doomed:
                await self._send_unmaps_locked()
            if bufs:
                await self._send_locked(bufs, anc)

    async def _send_out_locked(self):
        out, self._out, self._out_bytes = self._out, [], 0
        await self._send_locked([out[0] if len(out) == 1 else b"".join(out)], [])

    def _flush_soon(self):
        self._flush_scheduled = False
        if not self._out or self._dead is not None:
            return
        if not self._send_lock.locked():
            # Usually the socket takes it all at once: no task needed.
            out, self._out, self._out_bytes = self._out, [], 0
            try:
                rest, _ = self._sendmsg_now([out[0] if len(out) == 1 else b"".join(out)], [])
            except OSError as e:
                self._loop.create_task(self._lost_on_send(e))
                return
            if rest is None:
                return
            # The rest must go before anything else: put it first.
            self._out = [bytes(rest[0])]
            self._out_bytes = len(self._out[0])
        self._loop.create_task(self._flush_task())

    async def _lost_on_send(self, e):
        """A send failed: the daemon has gone. Give the reader a moment to
        read why (busy) before failing everything with the send's error."""
        try:
            await asyncio.wait_for(asyncio.shield(self._lost), 1.0)
        except asyncio.TimeoutError:
            pass
        self._fail(ConnectionError, "connection to %s lost: %s" % (self.path, e.strerror or e))

    async def _flush_task(self):
        try:
            async with self._send_lock:
                if self._out and self._dead is None:
                    await self._send_out_locked()
        except OSError as e:
            await self._lost_on_send(e)
        except Error:
            pass                        # the connection is dead already

    async def _send_locked(self, bufs, anc):
        while True:
            bufs, anc = self._sendmsg_now(bufs, anc)
            if bufs is None:
                return
            try:
                await self._wait_writable()
            except asyncio.TimeoutError:
                self._fail(Timeout, "no progress sending to %s within %gs" % (self.path, self.timeout))
                self._raise_dead()

    async def _send_unmaps_locked(self):
        # Their replies are dropped.
        for region in self._regions.take_doomed():
            m = self._next_msgid()
            self._pending[m] = (None, None)
            await self._send_locked([b"\x94\x00\xce" + m.to_bytes(4, "big") +
                                     _regions.unmap_params(region)], [])

    async def _flush_unmaps(self):
        try:
            async with self._send_lock:
                if self._dead is None:
                    await self._send_unmaps_locked()
        except (Error, OSError):
            pass

    def _next_msgid(self):
        m = self._msgid + 1
        if m > 0xFFFFFFFF:
            m = 1
        while m in self._pending:
            m += 1
        self._msgid = m
        return m

    async def _request(self, tail, conv, fds=None, data=None):
        if self._dead is not None:
            self._raise_dead()
        if self._sock is None:
            raise ConnectionError("not connected: await client.connect() first")
        m = self._next_msgid()
        fut = self._loop.create_future()
        self._pending[m] = (fut, conv)
        head = b"\x94\x00\xce" + m.to_bytes(4, "big") + tail
        try:
            await self._send(_wire.buffers(head, data), fds)
        except (OSError, Error) as e:
            self._pending.pop(m, None)
            if fut.done():
                fut.exception()         # raised below instead: not "never retrieved"
            if isinstance(e, OSError):
                await self._lost_on_send(e)
            self._raise_dead()
        return fut

    async def _wait(self, fut):
        if self.timeout is None:
            return await fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError:
            if fut.done():
                return fut.result()
            self._fail(Timeout, "no answer from %s within %gs" % (self.path, self.timeout))
            fut.exception()             # raised below instead: not "never retrieved"
            self._raise_dead()

    # ---- the API ----

    async def submit(self, op, x, *, full=False, allow_copy=False, ddof=None, offsets=None,
                     out=None):
        """Send reduction op of x; once it is sent, return an
        :class:`asyncio.Future` of its value (or :class:`gpured.Result`
        with ``full=True``; :class:`gpured.ArgResult` for argmin and
        argmax, :class:`gpured.Moments` for moments, which alone takes
        ``ddof``; with ``offsets=``, NumPy arrays of one value per segment,
        as :meth:`gpured.Client.reduce` says; ``"cumsum"`` with ``out=``,
        as :meth:`gpured.Client.cumsum` says).
        ``f = await c.submit("sum", x)``, later ``await f``."""
        if op == _wire.CUMSUM:
            _cumsum.check_options(full, False, ddof, offsets)
            return await self._submit_cumsum(x, out, allow_copy)
        if out is not None:
            raise ValueError("out= is for cumsum, not %s" % (op,))
        if op not in _wire.REDUCE_OPS:
            _wire.check_op(op)
        ddof = _wire.check_ddof(op, ddof)
        if offsets is not None:
            return await self._submit_segments(op, x, full, allow_copy, ddof, offsets)
        conv = (_wire.arg_result if op in _wire.ARG_OPS else
                _wire.moments_result if op == _wire.MOMENTS else _full if full else _value)
        x, sp = _device.gpu_span(x, allow_copy)
        where = await self._device_target(sp, allow_copy) if sp is not None else None
        if where is not None:
            sp.sync()
            return await self._request(_wire.region_reduce_tail(
                op, sp.dtype, where[0], where[1], sp.count, ddof=ddof), conv)
        a, name = _wire.as_array(x, allow_copy)
        if self._regions._ranges:
            where = self._regions.find(a)
            if where is not None:
                return await self._request(
                    _wire.region_reduce_tail(op, name, where[0], where[1], a.size, ddof=ddof),
                    conv)
        mid = _wire.REDUCE_MID[op, name] if ddof is None else _wire.moments_mid(name, ddof)
        n = a.nbytes
        if n <= _wire.SMALL_COPY_BYTES:
            return await self._request(mid + _wire.bin_header(n) + a.tobytes(order="A"), conv)
        if n > _wire.MAX_BIN:
            raise TooLarge("%d bytes do not fit in one request (at most %d); "
                                 "use a shared-memory region (Client.empty)" % (n, _wire.MAX_BIN))
        return await self._request(mid + _wire.bin_header(n), conv, data=_wire.data_view(a))

    async def _submit_segments(self, op, x, full, allow_copy, ddof, offsets):
        """As gpured.Client's: submit() with offsets."""
        x, sp = _device.gpu_span(x, allow_copy)
        where = await self._device_target(sp, allow_copy) if sp is not None else None
        if where is not None:
            tail, conv, _ = _wire.segments_request(op, sp.dtype, sp.count, ddof, offsets, full,
                                                   where)
            sp.sync()
            return await self._request(tail, conv)
        tail, conv, data = _wire.host_segments_request(op, x, allow_copy, ddof, offsets, full,
                                                       self._regions)
        return await self._request(tail, conv, data=data)

    async def _submit_cumsum(self, x, out, allow_copy):
        """As gpured.Client's: submit("cumsum")."""
        dev = _cumsum.device_plan(x, out, allow_copy)
        if dev is not None:
            req = None
            if dev.alloc is not None:
                out_where = await self._device_target(dev.out_sp, allow_copy, dev.out_alloc,
                                                      True)
                where = (None if out_where is None else
                         await self._device_target(dev.sp, allow_copy, dev.alloc))
                if where is not None:
                    dev.sync()
                    req = dev.request(where, out_where)
            if req is None:
                req = dev.host_request(self._regions)
        else:
            plan = _cumsum.Plan(x, out, allow_copy, self._regions)
            if plan.needs_out:
                plan.set_out(await self.empty(plan.count, plan.rdt, writable=True))
            req = plan.request()
        if req.reply_bytes > self._reply_limit:
            self._reply_limit = req.reply_bytes
        return await self._request(req.tail, req.conv, data=req.data)

    async def _device_target(self, sp, allow_copy, alloc=None, writable=False):
        """As gpured.Client's: (region id, byte offset) or None."""
        if alloc is None:
            alloc = _device.allocation(sp, allow_copy)
            if alloc is None:
                return None
        hit = self._device_maps.lookup(alloc, writable)
        if hit is None:
            params, fd = alloc.map_params(writable)
            try:
                res = await self._wait(await self._request(_device.map_tail(params), _ident,
                                                            fds=None if fd is None else [fd]))
            except (InvalidParams, Busy, Internal) as e:
                return _device.map_refused(e, allow_copy)
            finally:
                if fd is not None:
                    os.close(fd)
            hit, unmap = self._device_maps.store(alloc, res, writable)
            if unmap:
                self._regions.doom(unmap)
                self._unmaps_soon()
        return hit[0], sp.ptr - hit[1]

    async def reduce(self, op, x, *, full=False, allow_copy=False, ddof=None, offsets=None):
        """As :meth:`gpured.Client.reduce` (``offsets=`` included)."""
        return await self._wait(await self.submit(op, x, full=full, allow_copy=allow_copy,
                                                  ddof=ddof, offsets=offsets))

    async def sum(self, x, **kw):
        return await self.reduce("sum", x, **kw)

    async def min(self, x, **kw):
        return await self.reduce("min", x, **kw)

    async def max(self, x, **kw):
        return await self.reduce("max", x, **kw)

    async def sumsq(self, x, **kw):
        return await self.reduce("sumsq", x, **kw)

    async def argmin(self, x, **kw):
        """As :meth:`gpured.Client.argmin`."""
        return await self.reduce("argmin", x, **kw)

    async def argmax(self, x, **kw):
        """As :meth:`gpured.Client.argmax`."""
        return await self.reduce("argmax", x, **kw)

    async def cumsum(self, x, *, out=None, allow_copy=False):
        """As :meth:`gpured.Client.cumsum`: the prefix sums, a NumPy
        array, or for an x in GPU memory an array there (``out`` when
        given)."""
        return await self._wait(await self.submit("cumsum", x, out=out, allow_copy=allow_copy))

    async def moments(self, x, ddof=0, **kw):
        """As :meth:`gpured.Client.moments`: a :class:`gpured.Moments`."""
        return await self.reduce("moments", x, ddof=ddof, **kw)

    async def ping(self):
        return await self._wait(await self._request(_wire._str("ping") + b"\x90", _ident))

    async def info(self):
        return await self._wait(await self._request(_wire._str("info") + b"\x90", _dict))

    async def stats(self):
        return await self._wait(await self._request(_wire._str("stats") + b"\x90", _dict))

    async def call(self, method, *params):
        """Any method with msgpack-packed params; the raw result."""
        tail = _wire._str(method) if len(method.encode()) < 32 else msgpack.packb(method)
        return await self._wait(await self._request(tail + msgpack.packb(list(params)), _ident))

    async def empty(self, shape, dtype=np.float64, *, writable=False):
        """As :meth:`gpured.Client.empty`."""
        shape, dt, nbytes = _regions.array_spec(shape, dtype)
        fd, m = _regions.new_memfd(nbytes)
        try:
            res = await self._wait(await self._request(_regions.map_params(nbytes, writable),
                                                       _dict, fds=[fd]))
        except BaseException:
            m.close()
            raise
        finally:
            os.close(fd)
        region = res.get("region")
        if not isinstance(region, int):
            raise InvalidParams("map answered %r" % (res,))
        self._regions.add(m, region, self._kick_unmaps, writable)
        return _regions.region_array(m, shape, dt, False)

    async def zeros(self, shape, dtype=np.float64, *, writable=False):
        """As :meth:`gpured.Client.zeros`."""
        return await self.empty(shape, dtype, writable=writable)

    def _kick_unmaps(self):
        # From a finalizer, in any thread: send the unmaps from the loop.
        loop = self._loop
        if loop is None or loop.is_closed() or self._dead is not None:
            return
        try:
            loop.call_soon_threadsafe(self._unmaps_soon)
        except RuntimeError:
            pass

    def _unmaps_soon(self):
        if self._dead is None and self._regions._doomed:
            self._loop.create_task(self._flush_unmaps())
