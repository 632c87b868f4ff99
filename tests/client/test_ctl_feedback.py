"""gpuredctl's feedback against a real daemon: the progress bar of a
one-shot reduction (on a terminal only, only for an input that takes a
while, never with --quiet, and the result on standard output unchanged),
and top (its fields, rates from the difference of two refreshes, latency
percentiles of the interval only, redrawing on a terminal, and its end:
after -n refreshes, on SIGINT, and when the daemon goes away)."""

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "daemon"))
from gpured_harness import Daemon  # noqa: E402
from test_shm import ShmClient  # noqa: E402

GPUREDCTL = os.environ.get("GPUREDCTL", "")
# top's own requests per refresh (client/ctl-top.h, CTL_TOP_OWN_REQUESTS)
OWN = 2


class Run:
    """gpuredctl with standard input fed in pieces, standard error on a
    terminal (a pty) or a pipe; what came out, and when."""

    def __init__(self, args, pieces, delay, tty=True, env=None):
        if tty:
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
            err = slave
        else:
            master = None
            err = subprocess.PIPE
        self.start = time.monotonic()
        p = subprocess.Popen([GPUREDCTL, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, env=env)
        self.err_reads = []  # (seconds since start, bytes)
        reader = threading.Thread(target=self._read_err, args=(master if tty else p.stderr.fileno(),))
        reader.start()
        if tty:
            os.close(slave)
        feeder = threading.Thread(target=self._feed, args=(p.stdin, pieces, delay))
        feeder.start()
        self.out = p.stdout.read()
        self.rc = p.wait(timeout=120)
        feeder.join()
        reader.join()
        p.stdout.close()
        if not tty:
            p.stderr.close()
        if tty:
            os.close(master)
        self.err = b"".join(b for _, b in self.err_reads)

    @staticmethod
    def _feed(f, pieces, delay):
        try:
            for i, piece in enumerate(pieces):
                if i and delay:
                    time.sleep(delay)
                f.write(piece)
                f.flush()
        except BrokenPipeError:
            pass
        f.close()

    def _read_err(self, fd):
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:  # the pty's other side closed
                return
            if not b:
                return
            self.err_reads.append((time.monotonic() - self.start, b))

    def draws(self):
        """The lines drawn: what follows each carriage return and erase."""
        return [d for d in self.err.split(b"\r\x1b[K") if d]


def text_input(n, pieces):
    """seq 1 n as text in pieces of about equal size, and its sum."""
    data = b"".join(b"%d\n" % i for i in range(1, n + 1))
    step = -(-len(data) // pieces)
    return [data[i:i + step] for i in range(0, len(data), step)], n * (n + 1) // 2


class Progress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()
        cls.env = dict(os.environ, GPURED_SOCKET=cls.d.path)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_ctl(self, args, pieces, delay, tty=True):
        r = Run(args, pieces, delay, tty=tty, env=self.env)
        self.assertEqual(r.rc, 0, r.err)
        return r

    def test_bar_on_a_slow_input(self):
        # about 2 s of reading, in pieces every 0.1 s
        pieces, total = text_input(300000, 20)
        r = self.run_ctl(["sum", "-t", "i64"], pieces, 0.1)
        self.assertEqual(r.out, b"%d\n" % total)
        draws = r.draws()
        self.assertGreaterEqual(len(draws), 5, r.err)
        size = sum(len(p) for p in pieces)
        last = 0
        for d in draws:
            m = re.fullmatch(rb"reading standard input  ([0-9.]+) (B|kB|MB)  ([0-9.]+) (B|kB|MB)/s", d)
            self.assertTrue(m, d)
            done = float(m.group(1)) * {b"B": 1, b"kB": 1e3, b"MB": 1e6}[m.group(2)]
            self.assertGreaterEqual(done, last)
            self.assertLessEqual(done, size * 1.01)
            self.assertGreater(float(m.group(3)), 0)
            last = done
        # cleared at the end: the last thing written erases the line, and
        # nothing of it stays (no line feed ever)
        self.assertTrue(r.err.endswith(b"\r\x1b[K"), r.err[-40:])
        self.assertNotIn(b"\n", r.err)
        # not before reading has taken half a second, and at most about
        # ten redraws a second
        first = next(t for t, b in r.err_reads if b)
        self.assertGreaterEqual(first, 0.45)
        span = r.err_reads[-1][0] - first
        self.assertLessEqual(len(draws), 10 * span + 2, (len(draws), span))

    def test_raw_slow_input(self):
        # packed i32 through --raw (a shared-memory region): the same bar,
        # the same result
        values = list(range(-100000, 150000))
        data = struct.pack("<%di" % len(values), *values)
        pieces = [data[i:i + 100000] for i in range(0, len(data), 100000)]
        r = self.run_ctl(["sum", "-t", "i32", "--raw"], pieces, 0.1)
        self.assertEqual(r.out, b"%d\n" % sum(values))
        self.assertGreaterEqual(len(r.draws()), 3, r.err)
        self.assertTrue(r.err.endswith(b"\r\x1b[K"))

    def test_no_bar(self):
        pieces, total = text_input(300000, 20)
        want = b"%d\n" % total
        # --quiet on a terminal
        r = self.run_ctl(["--quiet", "sum", "-t", "i64"], pieces, 0.1)
        self.assertEqual((r.out, r.err), (want, b""))
        r = self.run_ctl(["-q", "sum", "-t", "i64"], pieces, 0.1)
        self.assertEqual((r.out, r.err), (want, b""))
        # standard error a pipe
        r = self.run_ctl(["sum", "-t", "i64"], pieces, 0.1, tty=False)
        self.assertEqual((r.out, r.err), (want, b""))
        # a small input, quickly read, on a terminal
        r = self.run_ctl(["sum", "-t", "i64"], [b"".join(pieces)], 0)
        self.assertEqual((r.out, r.err), (want, b""))
        # the same from a file named on the command line, and as JSON
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"".join(pieces))
            f.flush()
            r = self.run_ctl(["sum", "-t", "i64", f.name], [], 0)
            self.assertEqual((r.out, r.err), (want, b""))
            r = self.run_ctl(["--json", "sum", "-t", "i64", f.name], [], 0)
            self.assertEqual(json.loads(r.out), {"value": total, "count": 300000})
            self.assertEqual(r.err, b"")

    def test_bad_input_after_a_bar(self):
        # an error message starts on a clean line: the bar is erased first
        pieces, _ = text_input(300000, 20)
        pieces[-1] += b"x\n"
        r = Run(["sum", "-t", "i64"], pieces, 0.1, env=self.env)
        self.assertEqual(r.rc, 2)
        self.assertEqual(r.out, b"")
        self.assertIn(b"\r\x1b[Kgpuredctl: stdin:", r.err)
        self.assertIn(b"'x' is not a number of type i64", r.err)


def read_block(f):
    """One text block of top: its lines up to a blank line or the end."""
    lines = []
    while True:
        line = f.readline()
        if not line or line == b"\n":
            return lines
        lines.append(line.decode().rstrip("\n"))


def fields(block):
    """The numbers of a text block, by name."""
    text = "\n".join(block)
    m = re.search(r"^gpured (\S+) at (\S+), up (\d+):(\d\d):(\d\d), every ([0-9.]+) s$", text, re.M)
    assert m, text
    f = {"version": m.group(1), "where": m.group(2), "interval": float(m.group(6))}
    m = re.search(r"^requests +([0-9.]+)/s  errors ([0-9.]+)/s  in flight (\d+)  connections (\d+)"
                  r"  \((\d+) since start\)$", text, re.M)
    assert m, text
    f.update(requests_s=float(m.group(1)), errors_s=float(m.group(2)), connections=int(m.group(4)),
             requests=int(m.group(5)))
    m = re.search(r"^in +([0-9.]+) GB/s  socket ([0-9.]+)  shm ([0-9.]+)  device ([0-9.]+)$", text, re.M)
    assert m, text
    f.update(gbs=float(m.group(1)), socket_gbs=float(m.group(2)), shm_gbs=float(m.group(3)))
    m = re.search(r"^latency   p50 (.+)  p99 (.+)  of (\d+) reductions$", text, re.M)
    assert m, text
    f.update(p50=m.group(1), p99=m.group(2), reductions=int(m.group(3)))
    m = re.search(r"^regions   (\d+) mapped, (.+) of shared memory$", text, re.M)
    assert m, text
    f.update(regions=int(m.group(1)), mapped=m.group(2))
    i = next(i for i, line in enumerate(block) if line.startswith("DEVICE"))
    assert block[i].split() == ["DEVICE", "KIND", "STATE", "JOBS/S", "JOBS", "REGIONS", "BYTES", "NAME"]
    f["devices"] = []
    for line in block[i + 1:]:
        m = re.match(r"(\d+) +(\w+) +(up|DOWN) +([0-9.]+) +(\d+) +(\d+) +([0-9.]+ \w+)  (.*)$", line)
        assert m, line
        f["devices"].append({"index": int(m.group(1)), "kind": m.group(2), "state": m.group(3),
                             "jobs_s": float(m.group(4)), "jobs": int(m.group(5)),
                             "regions": int(m.group(6)), "bytes": m.group(7)})
    return f


class Top(unittest.TestCase):
    def setUp(self):
        self.d = Daemon()
        self.env = dict(os.environ, GPURED_SOCKET=self.d.path)
        self.c = ShmClient(self.d.path)
        # history before top starts: it must not show in any rate
        for _ in range(300):
            err, _ = self.c.reduce("sum", "f64", b"\0" * 64)
            self.assertIsNone(err)
        # a shared-memory region, mapped while top runs
        self.region, self.m = self.c.map(1 << 20)

    def tearDown(self):
        self.c.close()
        self.m.close()
        self.d.stop()

    def top(self, *args):
        return subprocess.Popen([GPUREDCTL, "top", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env)

    def load(self, n, nbytes):
        data = b"\x01" * nbytes
        for _ in range(n):
            err, _ = self.c.reduce("sum", "u32", data)
            self.assertIsNone(err)

    def test_text(self):
        # an interval long enough for the load to fit in it on a busy machine
        with self.top("-n", "2", "--interval", "2") as p:
            self.check_text(p)

    def check_text(self, p):
        first = fields(read_block(p.stdout))
        # top's refreshes came after the history: only after the first one
        # is shown does the interval's load begin
        self.load(50, 1 << 20)
        second = fields(read_block(p.stdout))
        rest = p.stdout.read()
        self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())
        self.assertEqual(rest, b"")
        self.assertEqual(p.stderr.read(), b"")

        self.assertEqual(first["where"], self.d.path)
        # nothing but top itself in the first interval: rates from the
        # difference, not the 300 requests since start
        self.assertEqual(first["requests_s"], 0.0)
        self.assertEqual(first["gbs"], 0.0)
        self.assertEqual((first["p50"], first["p99"], first["reductions"]), ("-", "-", 0))
        self.assertEqual(first["devices"][0]["jobs_s"], 0.0)
        self.assertEqual(first["regions"], 1)
        self.assertEqual(first["mapped"], "1.05 MB")
        self.assertEqual(len(first["devices"]), 1)
        self.assertEqual(first["devices"][0]["kind"], "cpu")
        self.assertEqual(first["devices"][0]["state"], "up")

        # the second: the load, as the difference of the two totals over
        # the interval
        dt = second["interval"]
        self.assertAlmostEqual(dt, 2.0, delta=0.3)
        d_req = second["requests"] - first["requests"] - OWN
        self.assertEqual(second["reductions"], 50)
        self.assertEqual(d_req, 50)
        self.assertAlmostEqual(second["requests_s"], d_req / dt, delta=0.1 + 0.01 * d_req / dt)
        # 50 MiB over the socket
        self.assertAlmostEqual(second["gbs"], 50 * (1 << 20) / dt / 1e9, delta=0.002 + 0.01 * second["gbs"])
        self.assertEqual(second["gbs"], second["socket_gbs"])
        self.assertNotEqual(second["p50"], "-")
        self.assertNotEqual(second["p99"], "-")
        dev1, dev2 = first["devices"][0], second["devices"][0]
        self.assertEqual(dev2["jobs"] - dev1["jobs"], 50)
        self.assertAlmostEqual(dev2["jobs_s"], 50 / dt, delta=0.1 + 0.01 * 50 / dt)

    def test_json(self):
        with self.top("-n", "2", "-i", "1", "--json") as p:
            self.check_json(p)

    def check_json(self, p):
        first = json.loads(p.stdout.readline())
        self.load(20, 4096)
        second = json.loads(p.stdout.readline())
        self.assertEqual(p.stdout.read(), b"")
        self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())

        for s in (first, second):
            for k in ("version", "uptime_s", "interval_s", "requests", "requests_per_s", "errors",
                      "errors_per_s", "inflight", "connections", "bytes_in", "in_gb_per_s",
                      "in_gb_per_s_by_path", "reductions", "latency_p50_us", "latency_p99_us",
                      "regions", "mapped_bytes", "devices"):
                self.assertIn(k, s)
            self.assertEqual(s["regions"], 1)
            self.assertEqual(s["mapped_bytes"], 1 << 20)
        self.assertEqual(first["requests_per_s"], 0)
        self.assertIsNone(first["latency_p50_us"])
        dt = second["interval_s"]
        self.assertAlmostEqual(dt, second["uptime_s"] - first["uptime_s"], delta=0.002)
        d_req = second["requests"] - first["requests"] - OWN
        self.assertEqual(d_req, 20)
        self.assertAlmostEqual(second["requests_per_s"], d_req / dt, delta=1e-3 * d_req / dt)
        d_in = sum(second["bytes_in"].values()) - sum(first["bytes_in"].values())
        self.assertGreater(d_in, 20 * 4096)
        self.assertAlmostEqual(second["in_gb_per_s"], d_in / dt / 1e9, delta=1e-5 * d_in / dt / 1e9)
        self.assertEqual(second["reductions"], 20)
        self.assertLessEqual(second["latency_p50_us"], second["latency_p99_us"])
        d1, d2 = first["devices"][0], second["devices"][0]
        self.assertEqual(d2["jobs"] - d1["jobs"], 20)
        self.assertAlmostEqual(d2["jobs_per_s"], 20 / dt, delta=1e-3 * 20 / dt)

    def test_terminal(self):
        # on a terminal: cleared once, then redrawn in place
        master, slave = pty.openpty()
        p = subprocess.Popen([GPUREDCTL, "top", "-n", "2", "-i", "0.3"], stdout=slave,
                             stderr=subprocess.PIPE, env=self.env)
        self.addCleanup(p.stderr.close)
        os.close(slave)
        out = b""
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                break
            if not b:
                break
            out += b
        os.close(master)
        self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())
        self.assertTrue(out.startswith(b"\x1b[H\x1b[2J"), out[:40])
        self.assertEqual(out.count(b"\x1b[2J"), 1)
        self.assertEqual(out.count(b"\x1b[H"), 3)
        self.assertEqual(out.count(b"requests "), 2)
        self.assertTrue(out.endswith(b"\x1b[J"), out[-20:])

    def test_sigint(self):
        with self.top("-i", "0.2") as p:
            self.check_sigint(p)

    def check_sigint(self, p):
        first = read_block(p.stdout)
        self.assertTrue(first[0].startswith("gpured "), first)
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(timeout=10), -signal.SIGINT)
        self.assertLess(time.monotonic() - t, 1.0)
        self.assertEqual(p.stderr.read(), b"")

    def test_daemon_goes_away(self):
        with self.top("-i", "5") as p:
            self.check_daemon_goes_away(p)

    def check_daemon_goes_away(self, p):
        # the first refresh shows after 5 s; the daemon goes before that,
        # and top says so at once rather than at its next refresh
        time.sleep(0.5)
        self.c.close()
        self.m.close()
        t = time.monotonic()
        self.d.stop()
        self.assertEqual(p.wait(timeout=10), 1)
        self.assertLess(time.monotonic() - t, 2.0)
        self.assertEqual(p.stdout.read(), b"")
        self.assertRegex(p.stderr.read().decode(), r"^gpuredctl: top: lost the daemon: .+\n$")

    def test_usage(self):
        for args in (["top", "-i", "0"], ["top", "-i", "x"], ["top", "-n", "0"], ["top", "-n", "-1"],
                     ["top", "extra"], ["ping", "-n", "2"], ["info", "--interval", "1"],
                     ["sum", "-n", "2"]):
            p = subprocess.run([GPUREDCTL, *args], capture_output=True, env=self.env, timeout=30)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, b"")


if __name__ == "__main__":
    if not GPUREDCTL:
        print("GPUREDCTL is not set")
        sys.exit(77)
    unittest.main(verbosity=2)
