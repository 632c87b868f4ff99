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
import socket

import numpy as np

from . import _protocol, _wire
from ._protocol import CORK_BYTES, METHODS, RECV_BYTES, SNDBUF_BYTES
from .errors import ConnectionError, Error, Timeout

__all__ = ["Client", "connect"]

_MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)


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
        self._proto = _protocol.Protocol(self.path, asyncio.InvalidStateError,
                                         self._kick_unmaps)
        self._send_lock = asyncio.Lock()
        self._out = []                  # small requests held for one write
        self._out_bytes = 0
        self._flush_scheduled = False
        self._lost = None               # a future, done once the connection is gone
        self._writable = None           # a future a send waits on, if one does

    async def __aenter__(self):
        if self._sock is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def __repr__(self):
        state = "closed" if self._proto.dead else ("open" if self._sock else "not connected")
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
            raise _protocol.connect_timeout(self.path, self.timeout) from None
        except OSError as e:
            sock.close()
            raise _protocol.connect_failed(self.path, e) from e
        self._sock = sock
        self._loop = loop
        self._lost = loop.create_future()
        loop.add_reader(sock.fileno(), self._on_readable)

    @property
    def closed(self):
        return self._proto.dead is not None

    async def close(self):
        """Close the connection; requests in flight fail with
        :class:`gpured.ConnectionError`. Closing twice is fine."""
        self._fail(ConnectionError, "the client was closed")
        if self._sock is not None:
            self._sock.close()

    # ---- wire ----

    def _fail(self, cls, message):
        self._proto.fail(cls, message)
        if self._sock is not None:
            if self._lost is not None and not self._lost.done():
                self._lost.set_result(None)
                if not self._loop.is_closed():
                    self._loop.remove_reader(self._sock.fileno())
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._out = []
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)     # the send fails at once

    def _on_readable(self):
        # Called by the loop whenever the socket is readable: no task and
        # no future per read.
        proto = self._proto
        if proto.dead is not None:
            return
        try:
            proto.receive(self._sock.recv(RECV_BYTES))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self._fail(*proto.lost(e))
        except _protocol.Broken as e:
            self._fail(*e.args)

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
            bufs = _protocol.sent(bufs, n)
        return None, None

    async def _send(self, bufs, fds=None):
        if fds is None and len(bufs) == 1 and not self._send_lock.locked():
            # A small request: held until the loop comes round (one
            # iteration), so that the requests that tasks send meanwhile go
            # out in one write.
            self._out.append(bufs[0])
            self._out_bytes += len(bufs[0])
            if self._out_bytes < CORK_BYTES:
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
            if self._proto.regions._doomed:
                await self._send_unmaps_locked()
            if bufs:
                await self._send_locked(bufs, anc)

    async def _send_out_locked(self):
        out, self._out, self._out_bytes = self._out, [], 0
        await self._send_locked([out[0] if len(out) == 1 else b"".join(out)], [])

    def _flush_soon(self):
        self._flush_scheduled = False
        if not self._out or self._proto.dead is not None:
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
        self._fail(*self._proto.lost(e))

    async def _flush_task(self):
        try:
            async with self._send_lock:
                if self._out and self._proto.dead is None:
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
                self._proto.raise_dead()

    async def _send_unmaps_locked(self):
        for head in self._proto.unmap_requests():
            await self._send_locked([head], [])

    async def _flush_unmaps(self):
        try:
            async with self._send_lock:
                if self._proto.dead is None:
                    await self._send_unmaps_locked()
        except (Error, OSError):
            pass

    async def _request(self, tail, conv, fds=None, data=None, gpu=False):
        # (gpu: the blocking client's spin; this loop never spins)
        """Send a request (a _protocol.Call's fields); the future of its
        result, once it is sent."""
        proto = self._proto
        if proto.dead is not None:
            proto.raise_dead()
        if self._sock is None:
            raise ConnectionError("not connected: await client.connect() first")
        fut = self._loop.create_future()
        m, head = proto.request(fut, tail, conv)
        try:
            await self._send(_wire.buffers(head, data), fds)
        except (OSError, Error) as e:
            proto.forget(m)
            if fut.done():
                fut.exception()         # raised below instead: not "never retrieved"
            if isinstance(e, OSError):
                await self._lost_on_send(e)
            proto.raise_dead()
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
            self._proto.raise_dead()

    async def _run(self, s):
        """As gpured.Client's: run a method's Steps, sending what they
        yield and handing back its answer; what they end with."""
        while s.call is not None:
            try:
                res = await self._wait(await self._request(*s.call))
            except BaseException as e:
                s.throw(e)
            else:
                s.send(res)
        return s.value

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
        call = self._proto.submit(op, x, full, allow_copy, False, ddof, offsets, out)
        if type(call) is not tuple:
            call = await self._run(call)
        return await self._request(*call)

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
        return await self._wait(await self._request(*METHODS["ping"]))

    async def info(self):
        return await self._wait(await self._request(*METHODS["info"]))

    async def stats(self):
        return await self._wait(await self._request(*METHODS["stats"]))

    async def call(self, method, *params):
        """Any method with msgpack-packed params; the raw result."""
        return await self._wait(await self._request(*_protocol.method_call(method, params)))

    async def empty(self, shape, dtype=np.float64, *, writable=False):
        """As :meth:`gpured.Client.empty`."""
        return await self._run(self._proto.empty(shape, dtype, writable))

    async def zeros(self, shape, dtype=np.float64, *, writable=False):
        """As :meth:`gpured.Client.zeros`."""
        return await self.empty(shape, dtype, writable=writable)

    def _kick_unmaps(self):
        # From a finalizer, in any thread: send the unmaps from the loop.
        loop = self._loop
        if loop is None or loop.is_closed() or self._proto.dead is not None:
            return
        try:
            loop.call_soon_threadsafe(self._unmaps_soon)
        except RuntimeError:
            pass

    def _unmaps_soon(self):
        if self._proto.dead is None and self._proto.regions._doomed:
            self._loop.create_task(self._flush_unmaps())
