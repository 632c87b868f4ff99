"""Shared-memory regions at the socket level: map a sealed memfd, reduce it
in place, unmap; every bad input gets its documented error, the connection
stays open where the protocol says so, and no descriptor or mapping leaks
(counted in /proc/PID/fd and /proc/PID/maps)."""

import array
import fcntl
import math
import mmap
import os
import random
import socket
import struct
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Client, Daemon, pack  # noqa: E402

MiB = 1 << 20
DTYPES = {"i32": "i", "i64": "q", "u32": "I", "u64": "Q", "f32": "f", "f64": "d"}
OPS = ("sum", "min", "max", "sumsq")


def memfd(size, seal=True, name="gpured-test", allocate=True):
    flags = os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if seal is not None else 0)
    fd = os.memfd_create(name, flags)
    os.ftruncate(fd, size)
    if allocate and size:
        os.posix_fallocate(fd, 0, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


class ShmClient(Client):
    """Client plus map requests that carry descriptors."""

    def send_fds(self, data, fds):
        self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])

    def map_fds(self, nbytes, fds, **extra):
        self.msgid += 1
        self.send_fds(pack([0, self.msgid, "map", [{"bytes": nbytes, **extra}]]), fds)
        resp = self.recv()
        assert resp is not None and resp[:2] == [1, self.msgid], resp
        return resp[2], resp[3]

    def map_part(self, region, nbytes, fds):
        """A map_part request with fds; (error, result)."""
        self.msgid += 1
        self.send_fds(pack([0, self.msgid, "map_part", [{"region": region, "bytes": nbytes}]]),
                      fds)
        resp = self.recv()
        assert resp is not None and resp[:2] == [1, self.msgid], resp
        return resp[2], resp[3]

    def map(self, size, fill=None):
        """A new sealed region of size bytes, mapped; (region id, our mmap)."""
        fd = memfd(size)
        try:
            m = mmap.mmap(fd, size)
            if fill is not None:
                m[: len(fill)] = fill
            err, res = self.map_fds(size, [fd])
        finally:
            os.close(fd)
        assert err is None, err
        assert res["bytes"] == size, res
        return res["region"], m

    def reduce_region(self, op, dtype, region, offset, count):
        return self.call("reduce", [{"op": op, "dtype": dtype, "region": region,
                                     "offset": offset, "count": count}])


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def memfd_maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return sum(1 for line in f if "memfd:gpured-test" in line)


def values(dtype, n, rng):
    if dtype[0] == "f":
        pick = [lambda: rng.uniform(-1e3, 1e3), lambda: rng.uniform(-1, 1) * 2.0 ** rng.randint(-60, 60),
                lambda: float(rng.randint(-5, 5))]
        out = [rng.choice(pick)() for _ in range(n)]
        if dtype == "f32":
            out = list(array.array("f", out))
        return out
    bits = 32 if dtype[1:] == "32" else 64
    if dtype[0] == "i":
        return [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for _ in range(n)]
    return [rng.randint(0, (1 << bits) - 1) for _ in range(n)]


class ShmCase(unittest.TestCase):
    """One daemon for the whole class, with small slots so that a few
    hundred KiB already take several chunks (and DAEMON_ARGS); client()
    gives a connection closed after the test."""

    DAEMON_ARGS = ()
    TIMEOUT = 10

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--chunk-bytes", "256K", "--staging-bytes", "2M", "--threads", "2",
                       *cls.DAEMON_ARGS)
        cls.pid = cls.d.proc.pid

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        assert rc == 0, rc

    def client(self):
        c = ShmClient(self.d.path, timeout=self.TIMEOUT)
        self.addCleanup(c.close)
        return c


class Regions(ShmCase):
    DAEMON_ARGS = ("--max-regions", "4", "--max-mapped-bytes", "8M",
                   "--max-mapped-bytes-total", "12M")

    def assertError(self, reply, code, contains=""):
        err, res = reply
        self.assertIsNotNone(err, res)
        self.assertEqual(err["code"], code, err)
        self.assertIn(contains, err["message"])

    def assertAlive(self, c):
        self.assertEqual(c.call("ping"), (None, "pong"))

    def baseline(self):
        """The daemon's descriptors and memfd mappings once every earlier
        connection is gone: (fds, maps)."""
        probe = ShmClient(self.d.path, timeout=10)
        end = time.monotonic() + 5
        while probe.call("stats")[1]["connections"] > 1 and time.monotonic() < end:
            time.sleep(0.01)
        probe.close()
        last, stable = None, 0
        while stable < 3 and time.monotonic() < end:
            now = (open_fds(self.pid), memfd_maps(self.pid))
            stable = stable + 1 if now == last else 0
            last = now
            time.sleep(0.02)
        return last

    def settle(self, fds, maps):
        """The daemon's descriptors and memfd mappings come back to these."""
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if open_fds(self.pid) == fds and memfd_maps(self.pid) == maps:
                return
            time.sleep(0.02)
        self.assertEqual(open_fds(self.pid), fds)
        self.assertEqual(memfd_maps(self.pid), maps)

    # ---- what works ----

    def test_every_op_and_dtype_equals_the_socket_path(self):
        """In place and over the socket, the same request gives the same bits,
        at odd sizes and offsets, through single and chunked requests; integer
        results and min/max are exact."""
        rng = random.Random(17)
        c = self.client()
        for dtype, code in DTYPES.items():
            size = struct.calcsize(code)
            for n in (1, 3, 1000, 65537, 200003):
                vals = values(dtype, n, rng)
                raw = array.array(code, vals).tobytes()
                off = rng.randrange(0, 16)
                region, m = c.map(off + len(raw) + rng.randrange(0, 9), b"\xee" * off + raw)
                for op in OPS:
                    sock = c.reduce(op, dtype, raw)
                    shm = c.reduce_region(op, dtype, region, off, n)
                    self.assertIsNone(shm[0], (dtype, n, op, shm))
                    self.assertEqual(shm[1]["count"], n)
                    want, got = sock[1]["value"], shm[1]["value"]
                    if isinstance(want, float):
                        self.assertEqual(struct.pack("<d", want), struct.pack("<d", got),
                                         (dtype, n, op, off))
                    else:
                        self.assertEqual(want, got, (dtype, n, op))
                    if dtype[0] != "f":
                        exact = {"sum": sum(vals), "min": min(vals), "max": max(vals)}.get(op)
                        if exact is not None:
                            if op == "sum" and dtype in ("i64", "u64"):
                                exact %= 1 << 64
                                if dtype == "i64" and exact >= 1 << 63:
                                    exact -= 1 << 64
                            self.assertEqual(got, exact, (dtype, n, op))
                    elif op in ("min", "max"):
                        self.assertEqual(got, (min if op == "min" else max)(vals))
                    elif op == "sum":
                        self.assertAlmostEqual(got, math.fsum(vals), delta=1e-9 * math.fsum(map(abs, vals)) + 1e-300)
                m.close()
                self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
        _ = size

    def test_subranges_and_empty(self):
        c = self.client()
        vals = list(range(1, 4097))
        region, m = c.map(4096 * 4, array.array("i", vals).tobytes())
        self.assertEqual(c.reduce_region("sum", "i32", region, 0, 4096)[1]["value"], sum(vals))
        self.assertEqual(c.reduce_region("sum", "i32", region, 400, 10)[1]["value"], sum(vals[100:110]))
        self.assertEqual(c.reduce_region("max", "i32", region, 4 * 4095, 1)[1]["value"], 4096)
        # a whole region read as u64 at an odd offset, and counts of zero
        self.assertIsNone(c.reduce_region("sum", "u64", region, 3, 2047)[0])
        self.assertEqual(c.reduce_region("sum", "i32", region, 4096 * 4, 0)[1], {"value": 0, "count": 0})
        self.assertError(c.reduce_region("min", "f32", region, 0, 0), "empty")
        # the client's later writes are what a later request reads
        m[0:4] = struct.pack("<i", 1000)
        self.assertEqual(c.reduce_region("sum", "i32", region, 0, 1)[1]["value"], 1000)
        m.close()

    def test_pipelined_on_many_regions(self):
        c = self.client()
        regions = []
        for k in range(3):
            r, m = c.map(8192, array.array("q", [k] * 1024).tobytes())
            regions.append((r, m))
        ids = {}
        for i in range(300):
            r, _ = regions[i % 3]
            msgid = c.request("reduce", [{"op": "sum", "dtype": "i64", "region": r,
                                          "offset": 0, "count": 1024}])
            ids[msgid] = 1024 * (i % 3)
        for _ in range(300):
            resp = c.recv()
            self.assertIsNone(resp[2], resp)
            self.assertEqual(resp[3]["value"], ids.pop(resp[1]))
        for _, m in regions:
            m.close()

    def test_region_outlives_unmap_and_close_while_in_flight(self):
        """unmap and a disconnect while large requests are in flight: the
        requests complete (or are dropped with their connection), and the
        mapping goes once they are done."""
        fds0, maps0 = self.baseline()
        c = ShmClient(self.d.path, timeout=10)
        n = 1 << 20
        region, m = c.map(8 * n, array.array("d", [0.5]) .tobytes() * n)
        first = c.request("reduce", [{"op": "sum", "dtype": "f64", "region": region, "offset": 0, "count": n}])
        unmap = c.request("unmap", [{"region": region}])
        replies = {c.recv()[1]: None for _ in range(2)}
        self.assertEqual(set(replies), {first, unmap})
        self.assertError(c.reduce_region("sum", "f64", region, 0, 1), "invalid_params", "unknown region")
        # again, and hang up with the request in flight
        region, m2 = c.map(8 * n, b"\0" * (8 * n))
        for _ in range(4):
            c.request("reduce", [{"op": "sumsq", "dtype": "f64", "region": region, "offset": 0, "count": n}])
        c.close()
        m.close()
        m2.close()
        self.settle(fds0, maps0)

    # ---- descriptors that are not what map needs ----

    def test_not_a_memfd(self):
        fds0, maps0 = self.baseline()
        c = self.client()
        r, w = os.pipe()
        s1, s2 = socket.socketpair()
        tmp = tempfile.TemporaryFile()
        tmp.truncate(4096)
        zero = os.open("/dev/zero", os.O_RDONLY)
        for fd, what in ((r, "a pipe"), (s1.fileno(), "a socket"), (tmp.fileno(), "a regular file"),
                         (zero, "a character device")):
            self.assertError(c.map_fds(4096, [fd]), "invalid_params", what)
            self.assertAlive(c)
        for fd in (r, w, zero):
            os.close(fd)
        s1.close()
        s2.close()
        tmp.close()
        c.close()
        self.settle(fds0, maps0)

    def test_unsealed_and_too_small(self):
        fds0, maps0 = self.baseline()
        c = ShmClient(self.d.path, timeout=10)
        for seal in (False, None):  # sealable but unsealed; not sealable at all
            fd = memfd(4096, seal=seal)
            self.assertError(c.map_fds(4096, [fd]), "invalid_params", "F_SEAL_SHRINK")
            os.close(fd)
        fd = memfd(4096)
        self.assertError(c.map_fds(4097, [fd]), "invalid_params", "larger than the memfd")
        # sealed, but open for writing only: the client's mistake
        wo = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_CLOEXEC)
        self.assertError(c.map_fds(4096, [wo]), "invalid_params", "writing only")
        os.close(wo)
        os.close(fd)
        self.assertAlive(c)
        c.close()
        self.settle(fds0, maps0)

    def test_descriptor_counts(self):
        fds0, maps0 = self.baseline()
        c = ShmClient(self.d.path, timeout=10)
        # a map with none
        self.assertError(c.call("map", [{"bytes": 4096}]), "invalid_params", "needs one file descriptor")
        # a map with two
        a, b = memfd(4096), memfd(4096)
        self.assertError(c.map_fds(4096, [a, b]), "invalid_params", "exactly one")
        # descriptors with requests that take none
        c.msgid += 1
        c.send_fds(pack([0, c.msgid, "ping", []]), [a])
        resp = c.recv()
        self.assertEqual(resp[1], c.msgid)
        self.assertEqual(resp[2]["code"], "invalid_params")
        c.msgid += 1
        c.send_fds(pack([0, c.msgid, "reduce", [{"op": "sum", "dtype": "i32", "data": b"\1\0\0\0"}]]), [a, b])
        resp = c.recv()
        self.assertEqual((resp[1], resp[2]["code"]), (c.msgid, "invalid_params"))
        # with a notification: dropped, and the next request is not blamed
        c.send_fds(pack([2, "ping", []]), [a])
        self.assertAlive(c)
        # many descriptors at once
        many = [memfd(4096) for _ in range(12)]
        self.assertError(c.map_fds(4096, many), "invalid_params", "exactly one")
        self.assertAlive(c)
        for fd in many + [a, b]:
            os.close(fd)
        c.close()
        self.settle(fds0, maps0)

    def test_flood_of_descriptors_closes_the_connection(self):
        fds0, maps0 = self.baseline()
        c = ShmClient(self.d.path, timeout=10)
        fd = memfd(4096)
        # descriptors with bytes that never finish a request: the queue
        # fills and the daemon hangs up rather than hold them
        try:
            for _ in range(40):
                c.send_fds(b"\x94", [fd] * 8)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assertTrue(c.closed())
        c.close()
        os.close(fd)
        self.settle(fds0, maps0)

    def test_own_socket_sent_mid_message_then_gone(self):
        # the client's own end of the connection, sent with the start of a
        # message the daemon is still skipping (a 4 GiB string), and then
        # the client goes: the daemon must see it go all the same
        fds0, maps0 = self.baseline()
        c = ShmClient(self.d.path, timeout=10)
        c.send_fds(b"\x94\x00\x01\xdb\xff\xff\xff\xf0abc", [c.sock.fileno()])
        time.sleep(0.1)  # read by the daemon, descriptor and all
        c.close()
        probe = self.client()
        end = time.monotonic() + 5
        while probe.call("stats")[1]["connections"] > 1 and time.monotonic() < end:
            time.sleep(0.01)
        self.assertEqual(probe.call("stats")[1]["connections"], 1)
        probe.close()
        self.settle(fds0, maps0)

    def test_client_that_takes_no_reply_is_closed(self):
        # a client floods pings and reads no reply until the daemon stops
        # reading it, then sends its own socket (which stays in flight in
        # the unread input, keeping the client's end open) and goes: no
        # EOF ever comes, so only --write-timeout-ms lets the daemon see it
        # go
        for timeout_ms in (300, 0):
            d = Daemon("--write-timeout-ms", str(timeout_ms), "--max-unsent-bytes", "4K",
                       "--shutdown-timeout-ms", "200")
            try:
                probe = ShmClient(d.path, timeout=10)
                c = ShmClient(d.path, timeout=10)
                # room for what the daemon leaves unread, and the message
                # after it
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
                c.sock.setblocking(False)
                pings = b"".join(pack([0, i, "ping", []]) for i in range(1500))
                # flood until the daemon, whose replies wait, has stopped
                # reading for good: no request answered over 100 ms
                end = time.monotonic() + 10
                answered = probe.call("stats")[1]["requests"]
                while True:
                    self.assertLess(time.monotonic(), end, "the daemon never stopped reading")
                    try:
                        c.sock.send(pings)
                    except BlockingIOError:
                        self.fail("the client's socket filled before the daemon was seen to "
                                  "stop reading: %s" % (probe.call("stats")[1],))
                    time.sleep(0.1)
                    now = probe.call("stats")[1]["requests"]
                    if now - answered <= 1:
                        break
                    answered = now
                c.send_fds(pack([0, 1, "ping", []]), [c.sock.fileno()])
                c.close()
                end = time.monotonic() + 2
                while probe.call("stats")[1]["connections"] > 1 and time.monotonic() < end:
                    time.sleep(0.02)
                stats = probe.call("stats")[1]
                if timeout_ms:
                    self.assertEqual(stats["connections"], 1)
                    self.assertEqual(stats["connections_timed_out"], 1)
                    self.assertEqual(probe.call("info")[1]["limits"]["write_timeout_ms"], timeout_ms)
                    self.assertIn("took none of", d.stderr())
                else:
                    # without the timeout it is never seen to go
                    self.assertEqual(stats["connections"], 2)
                    self.assertEqual(stats["connections_timed_out"], 0)
                probe.close()
            finally:
                d.stop()

    # ---- regions that are not there, or not ours ----

    def test_bad_ranges_and_ids(self):
        c = self.client()
        region, m = c.map(4096, b"\1" * 4096)
        for off, count, dt in ((0, 1025, "f32"), (4096, 1, "i32"), (4097, 0, "i32"), (1, 1024, "i32"),
                               (0, (1 << 64) - 1, "i64"), ((1 << 64) - 1, 1, "u32"),
                               (8, (1 << 62), "f32"), (4092, 1, "f64")):
            self.assertError(c.reduce_region("sum", dt, region, off, count), "invalid_params", "past the end")
        self.assertError(c.reduce_region("sum", "i32", region + 1000, 0, 1), "invalid_params", "unknown region")
        other = self.client()
        self.assertError(other.reduce_region("sum", "i32", region, 0, 1), "invalid_params", "unknown region")
        self.assertError(other.call("unmap", [{"region": region}]), "invalid_params", "unknown region")
        self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
        self.assertError(c.call("unmap", [{"region": region}]), "invalid_params", "unknown region")
        self.assertError(c.reduce_region("sum", "i32", region, 0, 1), "invalid_params", "unknown region")
        self.assertAlive(c)
        self.assertAlive(other)
        m.close()

    def test_device_kinds_on_this_daemon(self):
        c = self.client()
        fd = memfd(4096)
        err, _ = c.map_fds(4096, [fd], kind="cuda", device="GPU-00000000-0000-0000-0000-000000000000")
        self.assertEqual(err["code"], "invalid_params")
        # a CPU daemon maps no device memory; a CUDA one has no such GPU
        self.assertIn("kind cuda" if BACKEND == "cpu" else "serves no GPU", err["message"])
        os.close(fd)
        self.assertAlive(c)

    def test_map_part_needs_a_range_of_parts(self):
        c = self.client()
        region, m = c.map(4096, b"\1" * 4096)
        fd = memfd(4096)
        try:
            err, _ = c.map_part(region, 4096, [fd])
            self.assertEqual(err["code"], "invalid_params")
            self.assertIn("is not a range of several allocations", err["message"])
            err, _ = c.map_part(region + 1000, 4096, [fd])
            self.assertIn("unknown region", err["message"])
            err, _ = c.map_part(region, 4096, [fd, fd])
            self.assertIn("map_part takes exactly one file descriptor; 2 came", err["message"])
            c.msgid += 1
            c.sock.sendall(pack([0, c.msgid, "map_part", [{"region": region, "bytes": 8}]]))
            resp = c.recv()
            self.assertEqual(resp[2]["code"], "invalid_params")
            self.assertIn("map_part needs one file descriptor", resp[2]["message"])
            err, _ = c.map_fds(4096, [fd], part_bytes=2048)
            self.assertIn("'part_bytes' is only for kind cuda", err["message"])
        finally:
            os.close(fd)
        # the region is as it was
        self.assertEqual(c.reduce_region("sum", "i32", region, 0, 1024), (None, {"value": 0x01010101 * 1024, "count": 1024}))
        self.assertAlive(c)
        m.close()

    def test_limits(self):
        fds0, maps0 = self.baseline()
        c = self.client()
        held = [c.map(4096) for _ in range(4)]
        fd = memfd(4096)
        self.assertError(c.map_fds(4096, [fd]), "invalid_params", "regions mapped")
        self.assertEqual(c.call("unmap", [{"region": held.pop()[0]}]), (None, True))
        self.assertError(c.map_fds(8 * MiB, [memfd(8 * MiB)]), "too_large", "this connection")
        os.close(fd)
        # the daemon's total: two connections of 6 MiB each pass 12 MiB
        d = self.client()
        big = d.map(6 * MiB)
        self.assertError(c.map_fds(7 * MiB, [memfd(7 * MiB)]), "too_large", "the daemon")
        info = c.call("info")[1]["limits"]
        self.assertEqual((info["max_regions"], info["max_mapped_bytes"], info["max_mapped_bytes_total"]),
                         (4, 8 * MiB, 12 * MiB))
        stats = c.call("stats")[1]
        self.assertEqual(stats["regions"], 4)
        self.assertEqual(stats["mapped_bytes"], 3 * 4096 + 6 * MiB)
        for _, m in held + [big]:
            m.close()
        c.close()
        d.close()
        self.settle(fds0, maps0)

    def test_many_cycles_leave_nothing_behind(self):
        fds0, maps0 = self.baseline()
        for _ in range(20):
            c = ShmClient(self.d.path, timeout=10)
            for _ in range(10):
                region, m = c.map(65536, b"\2" * 65536)
                self.assertEqual(c.reduce_region("sum", "u32", region, 0, 16384)[1]["value"], 16384 * 0x02020202)
                m.close()
                self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
            c.map(4096)  # left mapped for the disconnect to release
            c.close()
        self.settle(fds0, maps0)


@unittest.skipUnless(BACKEND == "cuda", "injects CUDA faults")
class Faults(unittest.TestCase):
    """A device fault while region requests are in flight fails only the
    requests it touched, with internal naming the call and the device; the
    daemon carries on (on the CPU once no GPU is left), and the regions stay
    usable and are released."""

    def test_fault_with_region_requests_in_flight(self):
        d = Daemon("--fault", "h2d:after=6", "--chunk-bytes", "1M")
        try:
            c = ShmClient(d.path, timeout=30)
            n = 16 << 20 >> 2
            vals = array.array("i", [(i % 7) - 3 for i in range(n)])
            region, m = c.map(4 * n, vals.tobytes())
            want = sum(vals)
            ids = [c.request("reduce", [{"op": "sum", "dtype": "i32", "region": region,
                                         "offset": 0, "count": n}]) for _ in range(8)]
            failed = ok = 0
            for _ in ids:
                resp = c.recv()
                if resp[2] is None:
                    self.assertEqual(resp[3]["value"], want)
                    ok += 1
                else:
                    self.assertEqual(resp[2]["code"], "internal", resp)
                    self.assertIn("cudaMemcpyAsync (host to device) on device", resp[2]["message"])
                    self.assertIn("injected", resp[2]["message"])
                    failed += 1
            self.assertGreater(failed, 0)
            # carried on: the same region, more requests, right answers
            for _ in range(3):
                self.assertEqual(c.reduce_region("sum", "i32", region, 0, n)[1]["value"], want)
            self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
            self.assertEqual(c.call("stats")[1]["regions"], 0)
            m.close()
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


def cupy_or_skip():
    try:
        import cupy  # noqa: F401
        return cupy
    except Exception:
        raise unittest.SkipTest("needs CuPy")


def map_cupy_ones(c, n):
    """n int32 ones in GPU memory (CuPy), mapped by IPC handle on client c
    of a daemon with --allow-cuda-ipc: (region id, the array)."""
    cp = cupy_or_skip()
    uuid = [x for x in c.call("info")[1]["devices"] if x["kind"] == "cuda"][0]["uuid"]
    x = cp.ones(n, dtype=cp.int32)
    cp.cuda.runtime.deviceSynchronize()
    handle = bytes(cp.cuda.runtime.ipcGetMemHandle(x.data.ptr))
    err, res = c.call("map", [{"bytes": 4 * n, "kind": "cuda_ipc", "device": uuid,
                               "handle": handle}])
    assert err is None, err
    return res["region"], x


class CupyDeviceCase(unittest.TestCase):
    """A class's CUDA daemon taking IPC handles, writable ones too (with
    DAEMON_ARGS too), one client, and CuPy arrays each in an allocation of
    its own, so that an IPC handle's memory starts where the array does."""
    DAEMON_ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.cp = cupy_or_skip()
        cls.cp.cuda.set_allocator(None)
        cls.d = Daemon("--allow-cuda-ipc", "yes", "--allow-cuda-ipc-writable", "yes",
                       *cls.DAEMON_ARGS)
        cls.c = ShmClient(cls.d.path, timeout=60)
        cls.uuid = [x for x in cls.c.call("info")[1]["devices"] if x["kind"] == "cuda"][0]["uuid"]

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        assert cls.d.stop() == 0

    def map(self, x, writable=False):
        """Map CuPy array x by IPC handle: its region."""
        self.cp.cuda.runtime.deviceSynchronize()
        handle = bytes(self.cp.cuda.runtime.ipcGetMemHandle(x.data.ptr))
        err, res = self.c.call("map", [{"bytes": x.nbytes, "kind": "cuda_ipc",
                                        "device": self.uuid, "handle": handle,
                                        "writable": writable}])
        self.assertIsNone(err, err)
        return res["region"]

    def healthy(self):
        dev = [x for x in self.c.call("info")[1]["devices"] if x["kind"] == "cuda"][0]
        self.assertTrue(dev["healthy"], dev)


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
class DeviceFaults(unittest.TestCase):
    """A device fault while requests on GPU memory are in flight fails them
    with internal naming the call and the device; requests pinned to the
    failed device fail from then on, saying so, while host data goes to
    the CPU; mappings are still released."""

    def test_fault_with_device_requests_in_flight(self):
        cupy_or_skip()
        d = Daemon("--allow-cuda-ipc", "yes", "--fault", "launch:after=4")
        try:
            c = ShmClient(d.path, timeout=30)
            n = 1 << 22
            region, x = map_cupy_ones(c, n)
            ids = [c.request("reduce", [{"op": "sum", "dtype": "i32", "region": region,
                                         "offset": 0, "count": n}]) for _ in range(10)]
            ok = failed = 0
            for _ in ids:
                resp = c.recv()
                if resp[2] is None:
                    self.assertEqual(resp[3]["value"], n)
                    ok += 1
                else:
                    self.assertEqual(resp[2]["code"], "internal", resp)
                    self.assertIn("device 0", resp[2]["message"])
                    failed += 1
            self.assertGreater(ok, 0)
            self.assertGreater(failed, 0)
            err, _ = c.reduce_region("sum", "i32", region, 0, n)
            self.assertEqual(err["code"], "internal")
            self.assertIn("out of service", err["message"])
            # host data still reduces (on the CPU now)
            self.assertEqual(c.reduce("sum", "i32", b"\1\0\0\0" * 5)[1]["value"], 5)
            self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
            self.assertEqual(c.call("stats")[1]["regions"], 0)
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    print("backend:", BACKEND)
    unittest.main(verbosity=2)
