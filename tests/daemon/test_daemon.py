"""The daemon at the socket level: hostile input, limits, backpressure,
determinism, the socket file and shutdown."""

import math
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, GPURED, Client, Daemon, pack  # noqa: E402

MiB = 1 << 20

# Set by ./quickstart.sh for its ASan and UBSan run. The tests that skip
# there, because the sanitizers' shadow memory and quarantine make the
# daemon's RSS meaningless: Limits.test_reader_that_never_reads.
SANITIZED = bool(os.environ.get("GPURED_SANITIZED"))


class Hostile(unittest.TestCase):
    """Each case gets the documented error or a closed connection, promptly,
    and never disturbs another client."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--chunk-bytes", "256K", "--staging-bytes", "2M",
                       "--max-request-bytes", "64M", "--threads", "2")
        cls.witness = Client(cls.d.path, timeout=5)

    @classmethod
    def tearDownClass(cls):
        cls.witness.close()
        rc = cls.d.stop()
        assert rc == 0, rc

    def tearDown(self):
        # The daemon still answers another client, at once.
        t = time.monotonic()
        err, res = self.witness.call("ping")
        self.assertIsNone(err)
        self.assertEqual(res, "pong")
        self.assertLess(time.monotonic() - t, 1.0)

    def fatal(self, data, code="invalid_request", msgid=0):
        c = Client(self.d.path, timeout=5)
        c.send(data)
        # A request may first fail on its own (invalid_params), and then
        # the stream fail as a whole: the last reply before the close is
        # the fatal one.
        replies = []
        while True:
            resp = c.recv()
            if resp is None:
                break
            replies.append(resp)
        self.assertTrue(replies, "no error reply before close")
        resp = replies[-1]
        self.assertEqual(resp[0], 1)
        self.assertEqual(resp[1], msgid)
        self.assertEqual(resp[2]["code"], code, resp)
        self.assertIsNone(resp[3])
        c.close()
        return resp

    def error(self, c, data, code):
        c.send(data)
        resp = c.recv()
        self.assertIsNotNone(resp, "connection closed instead of an error reply")
        self.assertEqual(resp[2]["code"], code, resp)
        self.assertIsInstance(resp[2]["message"], str)
        return resp

    def test_garbage(self):
        self.fatal(b"\xc1garbage")
        self.fatal(b"hello world\n")
        self.fatal(pack({"not": "an array"}))
        self.fatal(pack([0, 1, "ping"]))          # wrong length
        self.fatal(pack([1, 1, None, None]))      # a response from a client
        self.fatal(pack([7, 1, "ping", []]))

    def test_huge_length_prefixes(self):
        self.fatal(b"\xdd\xff\xff\xff\xff")                   # array32 of 4G items
        self.fatal(b"\xdf\xff\xff\xff\xff")                   # map32
        c = Client(self.d.path, timeout=5)
        # A bin32 claiming 4 GiB as data: too_large from its length prefix alone.
        hdr = pack([0, 9, "reduce", [{"op": "sum", "dtype": "f32"}]])
        # Build the message by hand: map with op, dtype, data: bin32 4G-1.
        msg = (b"\x94\x00\x09\xa6reduce\x91\x83" + pack("op") + pack("sum") + pack("dtype") +
               pack("f32") + pack("data") + b"\xc6\xff\xff\xff\xfc")
        del hdr
        resp = self.error(c, msg, "too_large")
        self.assertEqual(resp[1], 9)
        c.close()
        # A str32 method claiming 4 GiB: answered promptly, never buffered.
        c = Client(self.d.path, timeout=5)
        c.send(b"\x94\x00\x0a\xdb\xff\xff\xff\xff" + b"x" * 1000)
        resp = c.recv()
        self.assertIsNotNone(resp)
        self.assertIn(resp[2]["code"], ("unknown_method", "invalid_request"))
        c.close()

    def test_nesting(self):
        deep = b"\x91" * 1000 + b"\xc0"
        self.fatal(b"\x94\x00\x01\xa4ping" + deep, msgid=1)
        self.fatal(b"\x94\x00\x02\xa6reduce\x91\x83\xa4data" + b"\x91" * 6 + b"\x01", msgid=2)

    def test_msgids(self):
        self.fatal(pack([0, -1, "ping", []]))
        self.fatal(pack([0, 1 << 32, "ping", []]))
        self.fatal(pack([0, (1 << 64) - 1, "ping", []]))
        self.fatal(pack([0, "1", "ping", []]))
        self.fatal(pack([0, 1.0, "ping", []]))
        c = Client(self.d.path)
        err, res = None, None
        c.send(pack([0, (1 << 32) - 1, "ping", []]))
        resp = c.recv()
        self.assertEqual(resp, [1, (1 << 32) - 1, None, "pong"])
        c.close()

    def test_wrong_types(self):
        c = Client(self.d.path, timeout=5)
        bad = [
            ({"op": 1, "dtype": "f32", "data": b""}, "invalid_params"),
            ({"op": "sum", "dtype": None, "data": b""}, "invalid_params"),
            ({"op": "avg", "dtype": "f32", "data": b""}, "invalid_params"),
            ({"op": "sum", "dtype": "f12", "data": b""}, "invalid_params"),
            ({"op": "sum", "dtype": "f32", "data": "text"}, "invalid_params"),
            ({"op": "sum", "dtype": "f32", "data": {"a": 1}}, "invalid_params"),
            ({"op": "sum", "dtype": "f32", "data": b"\x00\x00\x00"}, "invalid_params"),
            ({"op": "sum", "dtype": "i32", "data": [1, 2.5]}, "invalid_params"),
            ({"op": "sum", "dtype": "i32", "data": [1 << 31]}, "invalid_params"),
            ({"op": "sum", "dtype": "u32", "data": [-1]}, "invalid_params"),
            ({"op": "sum", "dtype": "u64", "data": [None]}, "invalid_params"),
            ({"op": "sum", "dtype": "f32"}, "invalid_params"),
            ({"op": "sum", "data": b""}, "invalid_params"),
            ({"dtype": "f32", "data": b""}, "invalid_params"),
            ({"op": "sum", "dtype": "f32", "data": b"", "extra": 1}, "invalid_params"),
        ]
        for params, code in bad:
            msgid = c.request("reduce", [params])
            resp = c.recv()
            self.assertIsNotNone(resp, params)
            self.assertEqual(resp[1], msgid, params)
            self.assertEqual(resp[2]["code"], code, (params, resp))
        for params in ([], [1], [{"op": "sum"}, 2], ["x"]):
            msgid = c.request("reduce", params)
            resp = c.recv()
            self.assertEqual(resp[2]["code"], "invalid_params", (params, resp))
        msgid = c.request("frobnicate", [])
        self.assertEqual(c.recv()[2]["code"], "unknown_method")
        # The connection survived all of it.
        self.assertEqual(c.call("ping"), (None, "pong"))
        c.close()
        self.fatal(pack([0, 1, 5, []]), msgid=1)
        self.fatal(pack([0, 1, "ping", {}]), msgid=1)

    def test_notification_ignored(self):
        c = Client(self.d.path)
        c.send(pack([2, "hello", [1, 2, 3]]) + pack([2, "x" * 100, []]))
        self.assertEqual(c.call("ping"), (None, "pong"))
        c.close()

    def test_vanish_mid_payload(self):
        for cut in (3, 20, 100000):
            c = Client(self.d.path)
            msg = pack([0, 1, "reduce", [{"op": "sum", "dtype": "f32", "data": bytes(1 * MiB)}]])
            c.send(msg[:cut])
            c.close()
        time.sleep(0.1)
        err, st = self.witness.call("stats")
        self.assertIsNone(err)

    def test_truncated_then_eof(self):
        c = Client(self.d.path)
        c.send(pack([0, 1, "ping", []])[:-1])
        c.sock.shutdown(socket.SHUT_WR)
        self.assertTrue(c.closed())
        c.close()

    def test_idle_connections(self):
        idle = [Client(self.d.path) for _ in range(300)]
        # Half a message on some of them.
        for c in idle[::3]:
            c.send(b"\x94\x00")
        t = time.monotonic()
        for _ in range(50):
            self.assertEqual(self.witness.call("ping"), (None, "pong"))
        self.assertLess(time.monotonic() - t, 2.0)
        err, st = self.witness.call("stats")
        self.assertGreaterEqual(st["connections"], 301)
        for c in idle:
            c.close()
        end = time.monotonic() + 5
        while time.monotonic() < end:
            err, st = self.witness.call("stats")
            if st["connections"] <= 2:
                break
            time.sleep(0.05)
        self.assertLessEqual(st["connections"], 2)

    def test_key_order(self):
        c = Client(self.d.path)
        data = struct.pack("<4i", 1, 2, 3, 4)
        # Small data may come first.
        c.send(pack([0, 5, "reduce", [{"data": data, "dtype": "i32", "op": "sum"}]]))
        self.assertEqual(c.recv(), [1, 5, None, {"value": 10, "count": 4}])
        # Data larger than a chunk must follow op and dtype.
        big = bytes(512 * 1024)
        c.send(pack([0, 6, "reduce", [{"data": big, "dtype": "i32", "op": "sum"}]]))
        resp = c.recv()
        self.assertEqual(resp[1], 6)
        self.assertEqual(resp[2]["code"], "invalid_params")
        self.assertEqual(c.call("ping"), (None, "pong"))
        c.close()

    def test_too_large_then_continue(self):
        c = Client(self.d.path, timeout=10)
        data = bytes(65 * MiB)
        msgid = c.request("reduce", [{"op": "sum", "dtype": "u32", "data": data}])
        resp = c.recv()
        self.assertEqual(resp[1], msgid)
        self.assertEqual(resp[2]["code"], "too_large")
        self.assertEqual(c.call("ping"), (None, "pong"))
        c.close()

    def test_empty(self):
        c = Client(self.d.path)
        for dt in ("i32", "i64", "u32", "u64", "f32", "f64"):
            self.assertEqual(c.reduce("sum", dt, b"")[1]["count"], 0)
            self.assertEqual(c.reduce("sumsq", dt, b""), (None, {"value": 0.0, "count": 0}))
            for op in ("min", "max"):
                err, res = c.reduce(op, dt, b"")
                self.assertEqual(err["code"], "empty")
                self.assertIsNone(res)
                err, res = c.reduce(op, dt, [])
                self.assertEqual(err["code"], "empty")
        c.close()

    def test_array_form(self):
        c = Client(self.d.path)
        self.assertEqual(c.reduce("sum", "i64", [1, -2, 3]), (None, {"value": 2, "count": 3}))
        self.assertEqual(c.reduce("max", "u64", [(1 << 64) - 1, 0]),
                         (None, {"value": (1 << 64) - 1, "count": 2}))
        self.assertEqual(c.reduce("min", "i32", [-(1 << 31), 5]),
                         (None, {"value": -(1 << 31), "count": 2}))
        self.assertEqual(c.reduce("sum", "f64", [0.5, 1, 2]), (None, {"value": 3.5, "count": 3}))
        c.close()


class Limits(unittest.TestCase):
    def test_max_connections(self):
        """One user alone holds at most three quarters of the connections
        (gpured(8) SECURITY): the rest is kept for other users."""
        d = Daemon("--max-connections", "20")
        try:
            # The start-up probe's connection may still be closing: wait
            # until this one is the only one counted.
            first = Client(d.path)
            end = time.monotonic() + 5
            while first.call("stats")[1]["connections"] != 1 and time.monotonic() < end:
                time.sleep(0.02)
            conns = [first] + [Client(d.path) for _ in range(14)]
            for c in conns:
                self.assertEqual(c.call("ping"), (None, "pong"))
            extra = Client(d.path)
            resp = extra.recv()
            self.assertEqual(resp[1], 0)
            self.assertEqual(resp[2]["code"], "busy")
            self.assertIn("holds 15 of the daemon's 20 connections", resp[2]["message"])
            self.assertTrue(extra.closed())
            extra.close()
            conns.pop().close()
            time.sleep(0.1)
            c = Client(d.path)
            self.assertEqual(c.call("ping"), (None, "pong"))
            st = c.call("stats")[1]
            self.assertGreaterEqual(st["shares"]["connections"]["refused"], 1)
            self.assertEqual(st["shares"]["connections"]["cap"], 20)
            c.close()
            for c in conns:
                c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    @unittest.skipIf(SANITIZED, "measures RSS, which ASan inflates")
    def test_reader_that_never_reads(self):
        """A client that pipelines without reading cannot grow the daemon."""
        d = Daemon("--max-unsent-bytes", "256K")
        try:
            base = d.rss_kib()
            c = Client(d.path, timeout=0.5)
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            req = pack([0, 1, "reduce", [{"op": "sum", "dtype": "f32", "data": bytes(64)}]])
            burst = req * 1000
            pending = b""
            sent = 0
            c.sock.setblocking(False)
            end = time.monotonic() + 3
            while time.monotonic() < end:
                if not pending:
                    pending = burst
                try:
                    n = c.sock.send(pending)
                    pending = pending[n:]
                    sent += n
                except BlockingIOError:
                    time.sleep(0.01)
            # The daemon stopped reading long before 3 s of sending.
            self.assertLess(sent, 64 * MiB)
            grown = d.rss_kib() - base
            self.assertLess(grown, 64 * 1024, "daemon RSS grew by %d KiB" % grown)
            # Someone else is served meanwhile.
            w = Client(d.path, timeout=2)
            self.assertEqual(w.call("ping"), (None, "pong"))
            w.close()
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_big_request_memory(self):
        """800 MiB through default staging: the request raises the daemon's
        RSS by less than the staging size plus 64 MiB."""
        d = Daemon()
        try:
            c = Client(d.path, timeout=60)
            err, info = c.call("info")
            staging = info["limits"]["staging_bytes"]
            # What the daemon holds before any data: a GPU driver's own
            # mappings, for one, are not the request's doing.
            base = d.rss_kib() * 1024
            n = 200 * MiB
            data = b"\x01\x00\x00\x00" * n
            err, res = c.reduce("sum", "i32", data)
            self.assertIsNone(err)
            self.assertEqual(res, {"value": n, "count": n})
            err, res = c.reduce("max", "i32", data)
            self.assertEqual(res, {"value": 1, "count": n})
            grown = d.rss_hwm_kib() * 1024 - base
            self.assertLess(grown, staging + 64 * MiB,
                            "peak RSS grew by %d MiB with %d MiB staging" % (grown >> 20, staging >> 20))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


class Determinism(unittest.TestCase):
    def test_float_bits_whatever_the_splits(self):
        d = Daemon("--chunk-bytes", "256K", "--staging-bytes", "4M")
        try:
            rnd = random.Random(7)
            for n in (1000, 300001):
                vals = [rnd.uniform(-1e6, 1e6) * 10 ** rnd.randint(-8, 8) for _ in range(n)]
                data = struct.pack("<%df" % n, *vals)
                msg = pack([0, 1, "reduce", [{"op": "sum", "dtype": "f32", "data": data}]])
                results = set()
                for trial in range(6):
                    c = Client(d.path)
                    if trial == 0:
                        c.send(msg)
                    else:
                        i = 0
                        while i < len(msg):
                            step = rnd.choice((1, 7, 100, 4096, 65536, 300000))
                            c.send(msg[i:i + step])
                            i += step
                    # Other traffic in flight at the same time.
                    c2 = Client(d.path)
                    c2.reduce("sum", "f32", data[: 4 * 777])
                    resp = c.recv()
                    self.assertIsNone(resp[2])
                    results.add(struct.pack("<d", resp[3]["value"]))
                    c.close()
                    c2.close()
                self.assertEqual(len(results), 1, "float sum differs between runs")
        finally:
            self.assertEqual(d.stop(), 0)


    def test_signed_zeros(self):
        # -0 is below +0 for min and max, on one chunk or across several,
        # alone or in a batch with other requests.
        d = Daemon("--chunk-bytes", "256K", "--staging-bytes", "4M")
        try:
            c = Client(d.path)
            for dt, fmt, size in (("f32", "f", 4), ("f64", "d", 8)):
                for n in (1, 2, 33, 100001):
                    for where in (0, n // 2, n - 1):
                        one_neg = [0.0] * n
                        one_neg[where] = -0.0
                        one_pos = [-0.0] * n
                        one_pos[where] = 0.0
                        for vals, op, want in ((one_neg, "min", "-"), (one_pos, "max", "+"),
                                               ([-0.0] * n, "max", "-"), ([0.0] * n, "min", "+")):
                            data = struct.pack("<%d%s" % (n, fmt), *vals)
                            err, res = c.reduce(op, dt, data)
                            self.assertIsNone(err, err)
                            v = res["value"]
                            self.assertEqual(v, 0.0)
                            self.assertEqual(math.copysign(1, v), -1.0 if want == "-" else 1.0,
                                             "%s %s n=%d at %d" % (op, dt, n, where))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


class SocketFile(unittest.TestCase):
    def test_mode_and_removal(self):
        d = Daemon()
        path = d.path
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o660)
        d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(d.proc.wait(10), 0)
        self.assertFalse(os.path.exists(path))
        d.stop()

    def test_socket_mode_flag(self):
        d = Daemon("--socket-mode", "0600")
        try:
            self.assertEqual(os.stat(d.path).st_mode & 0o777, 0o600)
        finally:
            d.stop()

    def test_stale_and_live(self):
        d = Daemon()
        try:
            # A second daemon on the same path refuses, naming it.
            p = subprocess.run([GPURED, "--socket", d.path, "--backend", "cpu"],
                               stderr=subprocess.PIPE, text=True, timeout=10)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(d.path, p.stderr)
            self.assertIn("already listening", p.stderr)
            c = Client(d.path)
            self.assertEqual(c.call("ping"), (None, "pong"))
            c.close()
        finally:
            d.stop()
        # A stale socket (nothing listening) is replaced.
        import tempfile
        tmp = tempfile.mkdtemp()
        path = os.path.join(tmp, "s.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.close()
        p = subprocess.Popen([GPURED, "--socket", path, "--backend", "cpu"],
                             stderr=subprocess.PIPE)
        try:
            end = time.monotonic() + 10
            while time.monotonic() < end:
                try:
                    c = Client(path)
                    self.assertEqual(c.call("ping"), (None, "pong"))
                    c.close()
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                self.fail("daemon did not replace the stale socket")
        finally:
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(10), 0)
        # A regular file is never replaced.
        open(path, "w").close()
        p = subprocess.run([GPURED, "--socket", path, "--backend", "cpu"],
                           stderr=subprocess.PIPE, text=True, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not a socket", p.stderr)
        self.assertTrue(os.path.isfile(path))
        os.unlink(path)
        os.rmdir(tmp)

    def test_bad_flags(self):
        for args in (["--backend", "tpu"], ["--max-connections", "x"], ["--nope"],
                     ["--chunk-bytes", "1000"], ["--direct-replies", "maybe"],
                     ["--cpu-fallback", "1"]):
            p = subprocess.run([GPURED, "--socket", "/tmp/gpured-never.sock", *args],
                               stderr=subprocess.PIPE, text=True, timeout=10)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertTrue(p.stderr.strip(), args)

    def test_config_file(self):
        import tempfile
        tmp = tempfile.mkdtemp()
        conf = os.path.join(tmp, "gpured.conf")
        with open(conf, "w") as f:
            f.write("# test\nmax-connections = 3\nmax-request-bytes 1M\n")
        d = Daemon("--config", conf, "--max-connections", "5")
        try:
            c = Client(d.path)
            err, info = c.call("info")
            self.assertEqual(info["limits"]["max_connections"], 5)   # command line wins
            self.assertEqual(info["limits"]["max_request_bytes"], 1 * MiB)
            c.close()
        finally:
            d.stop()
        with open(conf, "w") as f:
            f.write("bogus = 1\n")
        p = subprocess.run([GPURED, "--config", conf, "--socket", "/tmp/x.sock"],
                           stderr=subprocess.PIPE, text=True, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("bogus", p.stderr)
        os.unlink(conf)
        os.rmdir(tmp)


if __name__ == "__main__":
    if not GPURED:
        print("GPURED is not set", file=sys.stderr)
        sys.exit(1)
    unittest.main(verbosity=2)
