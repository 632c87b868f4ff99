"""The blocking client: one connection, any number of requests in flight.

Sends happen in the calling thread, under a lock, straight from the
array's memory. Responses complete their futures by msgid, so requests may
be submitted from any number of threads and their answers may come back in
any order. A thread that waits for a result reads the socket itself,
completing whatever futures it meets; a background thread per connection
reads only while nobody waits (see _Conn.drive and _Conn._background).

Where the C extension gpured._fast is importable (and GPURED_PURE_PYTHON is
not set), connections are _FastConn and futures _FastFuture: the same
classes with the work every request pays for (sending, waiting, reading,
decoding, completing futures) done in C, and everything else here.
"""

import array
import concurrent.futures
import concurrent.futures._base as _futures_base
import os
import select
import socket
import struct
import threading
import time
import weakref

import numpy as np

from . import _protocol, _wire
from ._protocol import CORK_BYTES, METHODS, RECV_BYTES, SNDBUF_BYTES
from .errors import ConnectionError, Error, Timeout

_MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_get_ident = threading.get_ident
_monotonic = time.monotonic
# The background reader leaves the socket alone this long after a waiter
# read it; small requests submitted meanwhile are corked (sent together by
# the next waiter, or by the background thread after this long).
_FG_GRACE = 0.005
# As libgpured's GPURED_SPIN_MAX_US
_SPIN_MAX_US = 1000000
# Client's default spin for requests that read GPU memory
_GPU_SPIN_US = 200
_FINISHED = "FINISHED"
_DONE = frozenset((_FINISHED, "CANCELLED", "CANCELLED_AND_NOTIFIED"))


class _Conn:
    """The socket, the send lock, the reader thread and the connection's
    Protocol (the requests in flight, the reply decoder, the regions).
    Holds no reference to the Client, so a Client that is dropped without
    close() is collected and closes its connection."""

    def __init__(self, path, timeout, spin=0.0):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.settimeout(None)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF_BYTES)
            except OSError:
                pass
            if timeout is not None:
                # A send that makes no progress for timeout seconds fails
                # (EAGAIN) rather than blocking for ever; the socket object
                # itself stays in blocking mode, which keeps sends cheap.
                sec = int(timeout)
                usec = max(int((timeout - sec) * 1e6), 0 if sec else 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", sec, usec))
        except socket.timeout:
            sock.close()
            raise _protocol.connect_timeout(path, timeout) from None
        except OSError as e:
            sock.close()
            raise _protocol.connect_failed(path, e) from e
        self.sock = sock
        self.path = path
        self.proto = _protocol.Protocol(path, concurrent.futures.InvalidStateError,
                                        self.flush_unmaps)
        self.lock = threading.Lock()        # held by whoever sends
        self.rlock = threading.Lock()       # held by whoever reads the socket
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)
        self._init_io(spin)
        self.reader = threading.Thread(target=self._background, name="gpured-reader", daemon=True)
        self.reader.start()

    def _init_io(self, spin):
        """The state of sending and waiting (_FastConn keeps it in C)."""
        self.spin = spin        # seconds to read without blocking before a wait sleeps
        self.gpu_spin = spin    # the same for requests that read GPU memory
        self.out = []                       # corked small requests, in order
        self.out_bytes = 0
        self.waiting = set()                # threads in drive() (set ops are atomic)
        self.last_fg_thread = None          # the last one that did
        self.reader_ident = None            # the thread holding rlock
        self.last_fg = 0.0

    def _drop_corked(self):
        self.out = []

    def _close_socket(self):
        self.sock.close()

    # ---- sending ----

    def submit(self, op, x, full, allow_copy, partial, ddof, offsets, out, client):
        """Client.submit(): the future of op over x. client._run runs the
        Steps of a method that needs other requests answered first."""
        call = self.proto.submit(op, x, full, allow_copy, partial, ddof, offsets, out)
        if type(call) is not tuple:
            call = client._run(call)
        return self.request(*call)

    def request(self, tail, conv, fds=None, data=None, gpu=False):
        """Send REQ + msgid + tail (+ data, a buffer or a list of buffers
        sent from their own memory) and return the future of its result,
        converted by conv. fds go with the request's bytes in SCM_RIGHTS.
        gpu: the request reads GPU memory (a wait for it spins gpu_spin).
        (A _protocol.Call's fields, in order.)"""
        fut = _Future()
        fut._conn = self
        fut._spin = self.gpu_spin if gpu else self.spin
        proto = self.proto
        with self.lock:
            m, head = proto.request(fut, tail, conv)
            try:
                if proto.regions._doomed:
                    self._send_unmaps()
                if data is None and fds is None:
                    if (self.last_fg_thread == _get_ident()
                            and _monotonic() - self.last_fg < _FG_GRACE):
                        # This thread has just waited for a result and will
                        # send this before it waits again (drive): small
                        # requests submitted meanwhile go out in one write.
                        # (If it stops waiting, the background thread
                        # sends them once _FG_GRACE has passed.)
                        self.out.append(head)
                        self.out_bytes += len(head)
                        if self.out_bytes >= CORK_BYTES:
                            self._flush()
                    else:
                        if self.out:
                            self._flush()
                        self.sock.sendall(head, _MSG_NOSIGNAL)
                else:
                    if self.out:
                        self._flush()
                    self._sendmsg(_wire.buffers(head, data), fds)
            except OSError as e:
                proto.forget(m)
                self._send_failed(e)
            except BaseException:
                # Interrupted (KeyboardInterrupt) maybe halfway through a
                # message: the stream cannot be trusted any more.
                proto.forget(m)
                self._send_interrupted()
                raise
        return fut

    def _flush(self):
        """Send the corked requests. Hold lock."""
        out = self.out
        self.out = []
        self.out_bytes = 0
        self.sock.sendall(out[0] if len(out) == 1 else b"".join(out), _MSG_NOSIGNAL)

    def try_flush(self):
        """Send the corked requests unless another thread is sending (it
        sends them before its own). False when they are still here."""
        if not self.lock.acquire(False):
            return not self.out
        try:
            if self.out and self.proto.dead is None:
                try:
                    self._flush()
                except OSError as e:
                    self._send_failed(e)
                except BaseException:
                    self._send_interrupted()
                    raise
            return True
        finally:
            self.lock.release()

    def _sendmsg(self, bufs, fds=None):
        anc = []
        if fds is not None:
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        left = sum(len(b) for b in bufs)
        while True:
            n = self.sock.sendmsg(bufs, anc, _MSG_NOSIGNAL)
            left -= n
            if left <= 0:
                return
            anc = []
            bufs = _protocol.sent(bufs, n)

    def _send_unmaps(self):
        if self.out:
            self._flush()
        for head in self.proto.unmap_requests():
            self.sock.sendall(head, _MSG_NOSIGNAL)

    def flush_unmaps(self):
        """Called when a region's arrays are gone: send its unmap now if no
        send is under way (GC may run inside one, in this very thread);
        otherwise the send under way or the next one takes it."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            if self.proto.dead is None:
                self._send_unmaps()
        except OSError:
            pass
        finally:
            self.lock.release()

    def _send_interrupted(self):
        self.fail(ConnectionError, "interrupted while sending to %s" % self.path)

    def _send_failed(self, e):
        """A send failed: the stream is broken mid-message (or the daemon
        has gone). Close, and raise why."""
        if isinstance(e, (BlockingIOError, socket.timeout)):
            self.fail(Timeout, "no progress sending to %s within the timeout" % self.path)
        else:
            # The daemon may have said why it closed (busy).
            self._drain()
            self.fail(*self.proto.lost(e))
        self.proto.raise_dead()

    # ---- receiving ----
    #
    # Whoever waits for a result reads the socket itself (holding rlock),
    # and completes every future it finds on the way: one thread sending
    # and waiting needs no thread switch per request. The background
    # thread reads only when nobody has waited for a while, so futures
    # still complete (and callbacks run) when nobody calls result(), and
    # a caller that only sends never leaves the daemon's replies unread.

    def _read(self, flags=0):
        """One recv and the dispatch of every complete response; False at
        the end of the stream or on a broken one (the connection is then
        dead). Hold rlock."""
        proto = self.proto
        try:
            proto.receive(self.sock.recv(RECV_BYTES, flags))
            return True
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as e:
            # After busy or invalid_request the daemon closes, maybe with a
            # reset: the reply said why (proto.lost).
            self.fail(*proto.lost(e))
        except _protocol.Broken as e:
            self.fail(*e.args)
        return False

    def drive(self, fut, timeout):
        """Read until fut is done or timeout (seconds, None: for ever)."""
        me = threading.get_ident()
        if self.reader_ident == me:
            # A done-callback, run while this thread reads, waits for
            # another future: nobody else would read its answer.
            raise RuntimeError("waiting for a gpured future inside a done-callback "
                               "would deadlock; use add_done_callback instead")
        deadline = None if timeout is None else time.monotonic() + timeout
        self.waiting.add(me)
        try:
            while fut._state not in _DONE and self.proto.dead is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                if not self.rlock.acquire(False):
                    # Another thread reads and will complete fut: wait on
                    # it, and look again now and then in case that thread
                    # is done before fut is.
                    w = 0.001 if left is None else min(left, 0.001)
                    _wait_done(fut, w)
                    continue
                self.reader_ident = threading.get_ident()
                try:
                    while fut._state not in _DONE:
                        # fut's request may still be corked.
                        if self.out and not self.try_flush():
                            # Another thread is sending; it sends them first.
                            self.poller.poll(1)
                            continue
                        if fut._spin and not self._spin(fut, left):
                            return
                        if fut._state in _DONE:
                            break
                        if left is not None or len(self.waiting) > 1:
                            # Wake now and then: to honour the timeout, or
                            # to leave reading to another waiter.
                            ms = 1 if left is None else max(min(left * 1000, 1000), 1)
                            if not self.poller.poll(ms):
                                break
                        if not self._read():
                            return
                finally:
                    self.reader_ident = None
                    self.rlock.release()
        finally:
            self.waiting.discard(me)
            self.last_fg = time.monotonic()
            self.last_fg_thread = me

    def _spin(self, fut, left):
        """Read without blocking until fut is done or the spin time (or
        what is left of the timeout) has passed, so that a quick answer
        finds the thread awake; False if the connection died. Hold
        rlock."""
        spin = fut._spin if left is None else min(fut._spin, left)
        end = time.monotonic() + spin
        while fut._state not in _DONE:
            if not self._read(socket.MSG_DONTWAIT):
                return False
            if time.monotonic() >= end:
                break
        return True

    def _background(self):
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        proto = self.proto
        while proto.dead is None:
            if proto.regions._doomed:
                self.flush_unmaps()
            if self.waiting or time.monotonic() - self.last_fg < _FG_GRACE:
                time.sleep(_FG_GRACE)
                continue
            if self.out:
                # Corked by a caller that has stopped waiting.
                try:
                    self.try_flush()
                except Error:
                    return
            if not poller.poll(100 if proto.pending else 1000):
                continue
            if self.waiting or not self.rlock.acquire(False):
                continue
            self.reader_ident = threading.get_ident()
            try:
                if proto.dead is None:
                    self._read(socket.MSG_DONTWAIT)
            finally:
                self.reader_ident = None
                self.rlock.release()

    def _drain(self):
        """After a failed send: read what the daemon said before closing
        (busy, invalid_request), for a better error."""
        if not self.rlock.acquire(timeout=1.0):
            return
        try:
            end = time.monotonic() + 1.0
            while self.proto.dead is None and time.monotonic() < end:
                if not self.poller.poll(100):
                    continue
                self._read(socket.MSG_DONTWAIT)
        finally:
            self.rlock.release()

    def fail(self, cls, message):
        """Mark the connection dead (first reason wins), fail every request
        in flight, and release the regions (the daemon does too)."""
        self.proto.fail(cls, message)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._drop_corked()

    def close(self):
        if self.proto.dead is None:
            self.fail(ConnectionError, "the client was closed")
        if threading.current_thread() is not self.reader:
            self.reader.join(5.0)
        # Readers and senders woken by the shutdown let go promptly (unless
        # this is one of them: a Client collected in the middle of a read).
        got_r = self.reader_ident != threading.get_ident() and self.rlock.acquire(timeout=5.0)
        got_s = self.lock.acquire(timeout=5.0)
        try:
            self._close_socket()
        finally:
            if got_s:
                self.lock.release()
            if got_r:
                self.rlock.release()


class _Future(concurrent.futures.Future):
    """A Future whose result() and exception() read the connection
    themselves while they wait."""

    _spin = 0.0     # seconds a wait for it reads before it sleeps (request())

    def result(self, timeout=None):
        if self._state not in _DONE:
            timeout = self._drive(timeout)
        if self._state == _FINISHED and self._exception is None:
            # set_result() wrote _result before _state: no need for the
            # condition's lock to read it.
            return self._result
        return super().result(timeout)

    def exception(self, timeout=None):
        if self._state not in _DONE:
            timeout = self._drive(timeout)
        return super().exception(timeout)

    def _drive(self, timeout):
        """Read until done or timeout; the time left of it."""
        if timeout is None:
            self._conn.drive(self, None)
            return None
        end = time.monotonic() + timeout
        self._conn.drive(self, timeout)
        return max(end - time.monotonic(), 0)


def _wait_done(fut, timeout):
    with fut._condition:
        if fut._state not in _DONE:
            fut._condition.wait(timeout)


def _extension():
    """gpured._fast, the C extension, where it is importable and of this
    version, unless $GPURED_PURE_PYTHON is set (and not 0); else None."""
    if os.environ.get("GPURED_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _fast
    except ImportError:
        return None
    return _fast if getattr(_fast, "API", None) == 1 else None


_fast = _extension()
if _fast is not None:
    class _FastFuture(_fast.Future, concurrent.futures.Future):
        """A concurrent.futures.Future whose state lives in C: made and
        completed without a lock, its Condition made only when something
        waits on it or watches it (concurrent.futures.wait, a callback),
        after which completions take concurrent.futures' own way.
        result() and exception() read the connection as _Future's do."""

    class _FastConn(_fast.Conn, _Conn):
        """_Conn with request(), submit()'s common case, drive() and
        _read() in C (the corked requests and the replies not yet whole
        kept there); the rest is _Conn's."""

        def _init_io(self, spin):
            self._attach(self.sock.fileno(), self.proto, self.lock, self.rlock, _FastFuture, spin)

        def _close_socket(self):
            self._forget_fd()
            self.sock.close()

    _fast.configure({
        "PENDING": _futures_base.PENDING,
        "CANCELLED": _futures_base.CANCELLED,
        "CANCELLED_AND_NOTIFIED": _futures_base.CANCELLED_AND_NOTIFIED,
        "FINISHED": _futures_base.FINISHED,
        "base_set_result": concurrent.futures.Future.set_result,
        "base_set_exception": concurrent.futures.Future.set_exception,
        "base_result": concurrent.futures.Future.result,
        "base_exception": concurrent.futures.Future.exception,
        "Condition": threading.Condition,
        "InvalidStateError": concurrent.futures.InvalidStateError,
        "wait_done": _wait_done,
        "ndarray": np.ndarray,
        "small_head": _protocol.small_head,
        "value_conv": _protocol.value_conv,
        "pure_submit": _Conn.submit,
        "buffers": _wire.buffers,
        "Broken": _protocol.Broken,
        "Error": Error,
        "ConnectionError": ConnectionError,
        "CORK_BYTES": CORK_BYTES,
        "RECV_BYTES": RECV_BYTES,
        "UNPACK_MAX_BYTES": _wire.UNPACK_MAX_BYTES,
        "FG_GRACE": _FG_GRACE,
    })
    _CONN = _FastConn
else:
    _CONN = _Conn


class Client:
    """A connection to a gpured daemon.

    ``path``: the socket; default ``$GPURED_SOCKET`` when set and not empty,
    else ``/run/gpured.sock`` as root, else ``$XDG_RUNTIME_DIR/gpured.sock``,
    else ``/run/gpured.sock`` (as libgpured's ``gpured_socket_path()``).

    ``timeout`` (seconds, default None: wait for ever) bounds connecting,
    each blocking call's wait for its answer, and any send that makes no
    progress; when it runs out the call raises :class:`gpured.Timeout` and
    the connection is closed, as with libgpured's ``gpured_set_timeout()``.

    ``spin_us`` (microseconds) makes a call that waits for an answer read
    the socket without blocking for up to that long before it sleeps, as
    libgpured's ``gpured_set_spin()``: a quick answer then finds the
    thread awake, which saves the wake-up for a CPU kept busy meanwhile.
    The default, None, spins up to 200 µs for a request that reads GPU
    memory in place (as the CUDA runtime's own waits spin) and never for
    host data; 0 never spins.

    Reductions take NumPy arrays of int32, int64, uint32, uint64, float32,
    float64, float16, int8, uint8, int16, uint16 or bool (as uint8: a sum
    counts the True), and of ml_dtypes' bfloat16, float8_e4m3fn and
    float8_e5m2 (or anything NumPy can view as one: the buffer protocol,
    ``__array__``, CPU tensors, PyTorch's bfloat16 and float8 too); they
    reduce every element whatever the shape. Those of 16 bits or fewer
    give what their values widened exactly to float32, int32 or uint32
    would: float64 results for floats, int64 or uint64 for integers. A
    contiguous array is sent straight from its memory; any other is
    copied to a contiguous one first. Arrays made by :meth:`empty` or
    :meth:`zeros` live in shared memory and are not sent at all.

    Safe to use from many threads at once. A context manager; ``close()``
    it when done. A Client that is garbage collected closes too, failing
    the futures still in flight: keep it while they are.
    """

    def __init__(self, path=None, timeout=None, spin_us=None):
        self.path = _wire.socket_path(path)
        self.timeout = timeout
        if spin_us is not None and not 0 <= spin_us <= _SPIN_MAX_US:
            raise ValueError("spin_us: want 0 to %d microseconds, got %r" % (_SPIN_MAX_US, spin_us))
        self._conn = _CONN(self.path, timeout, (spin_us or 0) / 1e6)
        self._conn.gpu_spin = (_GPU_SPIN_US if spin_us is None else spin_us) / 1e6
        self._finalizer = weakref.finalize(self, self._conn.close)
        self._finalizer.atexit = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._conn.proto.dead else "open"
        return "<gpured.Client %s %s>" % (self.path, state)

    def close(self):
        """Close the connection. Requests still in flight fail with
        :class:`gpured.ConnectionError`; the daemon releases this
        connection's regions (arrays made by :meth:`empty` stay usable as
        plain NumPy arrays). Closing twice is fine."""
        self._finalizer()

    @property
    def closed(self):
        """True once the connection is gone (closed here or by the daemon)."""
        return self._conn.proto.dead is not None

    # ---- the futures behind every call ----

    def _wait(self, fut):
        try:
            return fut.result(self.timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():
                raise
            self._conn.fail(Timeout, "no answer from %s within %gs" % (self.path, self.timeout))
            self._conn.proto.raise_dead()

    def _run(self, s):
        """Run the Steps of a method (_protocol): send each request they
        yield and wait for its answer, handed back to them; what they
        end with."""
        while s.call is not None:
            try:
                res = self._wait(self._conn.request(*s.call))
            except BaseException as e:
                s.throw(e)
            else:
                s.send(res)
        return s.value

    def submit(self, op, x, *, full=False, allow_copy=False, partial=False, ddof=None,
               offsets=None, out=None):
        """Send reduction ``op`` ("sum", "min", "max", "sumsq", "argmin",
        "argmax" or "moments") of x and return at once a
        :class:`concurrent.futures.Future` of its value (a
        :class:`gpured.Result` with ``full=True``; for argmin and argmax
        always a :class:`gpured.ArgResult`, for moments a
        :class:`gpured.Moments`, whose variance takes ``ddof``, 0 unless
        given; other ops take no ddof). With ``offsets=``, of one value
        per segment, in NumPy arrays (:meth:`reduce`). Any number may be in
        flight; x's memory may be reused as soon as submit() returns,
        except for an array in a region (:meth:`empty`), which the daemon
        reads in place until the future is done.

        ``"cumsum"`` is :meth:`cumsum`'s request, taking ``out=`` (and no
        ``full``, ``partial``, ``ddof`` or ``offsets``): a future of the
        prefix sums; an ``out`` it names is written only once the future
        is done."""
        return self._conn.submit(op, x, full, allow_copy, partial, ddof, offsets, out, self)

    def reduce(self, op, x, *, full=False, allow_copy=False, partial=False, ddof=None,
               offsets=None):
        """Reduce x with op and wait for the result: an int or a float as
        PROTOCOL.md's result table says (int for sum/min/max of integers,
        float for floats and for every sumsq), or with ``full=True`` a
        :class:`gpured.Result` ``(value, count)``.

        With ``offsets``, k + 1 integers (a list, a NumPy array of any
        integer dtype) from 0 to ``x.size``, none below the one before,
        it reduces each segment ``x.ravel()[offsets[i]:offsets[i + 1]]``
        and returns NumPy arrays of k entries (PROTOCOL.md, "Segments"):
        for sum, min, max and sumsq a 1-D array of int64, uint64 or
        float64 as the result table types the value (with ``full=True`` a
        :class:`gpured.Result` of it and the segments' lengths); for
        argmin and argmax an :class:`gpured.ArgResult` of arrays, the
        indices counted from each segment's start; for moments a
        :class:`gpured.Moments` of arrays. The rows of a 2-D array ``m``
        are the segments of ``offsets=np.arange(0, m.size + 1,
        m.shape[1])``. An empty segment is no error: it gives the op's
        identity (sum 0; min the dtype's largest value, inf for floats;
        max its smallest, -inf; argmin's and argmax's index -1; moments'
        mean and var NaN), and so does a moments segment no longer than
        ``ddof`` for its var. A non-C-contiguous x is copied to C order
        first.

        Raises TypeError for an unsupported dtype, :class:`gpured.Empty`
        for min/max of no elements, :class:`gpured.NotSupported` for GPU
        memory (unless ``allow_copy=True``: then it is copied to the host),
        and the daemon's errors as :class:`gpured.Error` subclasses.

        With ``partial=True`` it returns a :class:`gpured.Partial`, which
        :func:`gpured.combine` joins with those of other pieces of an array
        into the value of the whole, exactly (float sums: the bits one
        request over the whole array gives, on the CPU backend)."""
        return self._wait(self._conn.submit(op, x, full, allow_copy, partial, ddof, offsets, None,
                                            self))

    def sum(self, x, **kw):
        """Sum of every element of x (see :meth:`reduce`; ``offsets=``
        gives one per segment, as the other op methods do)."""
        return self.reduce("sum", x, **kw)

    def min(self, x, **kw):
        """Smallest element of x; :class:`gpured.Empty` if it has none."""
        return self.reduce("min", x, **kw)

    def max(self, x, **kw):
        """Largest element of x; :class:`gpured.Empty` if it has none."""
        return self.reduce("max", x, **kw)

    def sumsq(self, x, **kw):
        """Sum of squares of x's elements, as a float."""
        return self.reduce("sumsq", x, **kw)

    def argmin(self, x, **kw):
        """The smallest element of x and where it is first, as a
        :class:`gpured.ArgResult` ``(value, index, count)``: ``index`` is
        numpy's ``argmin`` of the flattened array (the first NaN if there
        is one), except that -0.0 counts below 0.0. :class:`gpured.Empty`
        if x has no elements."""
        return self.reduce("argmin", x, **kw)

    def argmax(self, x, **kw):
        """The largest element of x and where it is first (as
        :meth:`argmin`)."""
        return self.reduce("argmax", x, **kw)

    def cumsum(self, x, *, out=None, allow_copy=False):
        """The inclusive prefix sums of x's elements in C order, as
        ``numpy.cumsum(x)`` gives them: a 1-D array of ``x.size`` values,
        int64 for signed integers, uint64 for unsigned ones and bool
        (wrapping modulo 2**64 as NumPy's do), float64 for floats
        (added in the one order PROTOCOL.md's "cumsum" defines, which
        also bounds their error, so that their bits never depend on how
        the request travels).

        Over the socket, the values stream back while the elements still
        go out; ``out``, an array of that dtype and ``x.size`` elements
        (C-contiguous, any shape), receives them and is returned. An x in
        a shared-memory region (:meth:`empty`) never crosses the socket:
        the daemon reads it in place and writes the prefix sums into a
        writable region, ``out`` when given (an array made by
        ``empty(..., writable=True)``, which may be x itself for 8-byte
        dtypes: in place), else a new array the client maps for them.
        Read them once this returns.

        An x in GPU memory (a CUDA ``torch.Tensor``, a CuPy array, any
        C-contiguous array with ``__cuda_array_interface__``) is scanned
        where it lies by the GPU that holds it (a CUDA daemon; its
        allocation mapped as for :meth:`reduce`), and the prefix sums go
        into GPU memory of the same device: ``out`` when given (a
        contiguous GPU array of the result dtype and ``x.size`` elements
        on x's device, mapped writable; x itself for 8-byte dtypes: in
        place), else a new 1-D array made by x's library
        (``torch.empty``, ``cupy.empty``; other libraries need ``out``),
        which is returned. The streams that produce x and out are
        synchronised first, and the daemon answers once the GPU has
        written every value: they are ready when this returns (when the
        future is done), for work on any stream. With
        ``allow_copy=True``, where the daemon cannot map GPU memory, and
        for the dtypes of 16 bits or fewer, whose prefix sums a CUDA
        daemon takes from host memory only (without it the daemon refuses
        them with :class:`gpured.InvalidParams`), x goes through the host
        and the values are copied into that output
        (a NumPy ``out``, or no ``out`` for another library's array,
        gives a NumPy array instead). ``out`` in host memory, on another
        device, of the wrong dtype or size raises ``TypeError`` or
        ``ValueError``; a daemon without GPUs
        :class:`gpured.InvalidParams`, as :meth:`reduce` does.

        More than 536870911 elements over the socket raise
        :class:`gpured.TooLarge` (their values would pass a reply's 4
        GiB); in regions any number goes. A bad ``out`` raises
        ``TypeError`` or ``ValueError`` before anything is sent."""
        return self._wait(self.submit("cumsum", x, out=out, allow_copy=allow_copy))

    def moments(self, x, ddof=0, **kw):
        """Count, sum, min, max, mean and variance of x's elements in one
        pass, as a :class:`gpured.Moments` ``(count, sum, min, max, mean,
        var)``. ``sum``, ``min`` and ``max`` are what :meth:`sum`,
        :meth:`min` and :meth:`max` return; ``mean`` and ``var`` are floats
        for every dtype, the exact mean and variance (``var`` divides by
        ``count - ddof``, as numpy's ``var(ddof=...)``) rounded once, so
        they never suffer cancellation, as numpy's can. A NaN makes both
        NaN; infinities make ``mean`` what ``sum`` is and ``var`` NaN.
        :class:`gpured.Empty` if x has no elements,
        :class:`gpured.InvalidParams` if ``ddof`` is not below their
        number."""
        return self.reduce("moments", x, ddof=ddof, **kw)

    def ping(self):
        """Ask the daemon for ``"pong"``; returns it."""
        return self._wait(self._conn.request(*METHODS["ping"]))

    def info(self):
        """The daemon's version, backend, devices and limits, as a dict
        (PROTOCOL.md, "info")."""
        return self._wait(self._conn.request(*METHODS["info"]))

    def stats(self):
        """The daemon's counters since it started, as a dict (PROTOCOL.md,
        "stats")."""
        return self._wait(self._conn.request(*METHODS["stats"]))

    def call(self, method, *params):
        """Any method, with params packed by msgpack; returns the raw
        result. For methods this class does not wrap, and for tests."""
        return self._wait(self._conn.request(*_protocol.method_call(method, params)))

    # ---- shared-memory regions ----

    def empty(self, shape, dtype=np.float64, *, writable=False):
        """A new NumPy array of shape and dtype (uninitialised) in shared
        memory mapped by the daemon: reducing it, or any contiguous slice
        of it, sends a region id, an offset and a count instead of its
        bytes. The region is unmapped when the array and every view of it
        are gone, or when the client closes.

        Write the elements before a reduction is submitted and not again
        until its result is back: the daemon reads them in place.

        ``writable=True`` has the daemon map it for writing too, so that
        :meth:`cumsum` of an array in a region can write its prefix sums
        there (``out=``); the daemon writes nothing else."""
        return self._run(self._conn.proto.empty(shape, dtype, writable))

    def zeros(self, shape, dtype=np.float64, *, writable=False):
        """As :meth:`empty`, filled with zeros (a new region already reads
        as zeros: nothing is written)."""
        return self.empty(shape, dtype, writable=writable)
