"""Pacing a client that streams large arrays while small requests wait
(--pace-bytes-per-ms, --pace-cpu-pressure): forced on here, whatever the
host's CPU pressure, with a threshold of 0. The stream must finish and
every answer be right; a connection alone is never paced; a paced
connection that goes away mid-request leaves the daemon serving."""

import array
import os
import random
import subprocess
import sys
import threading
import time
import unittest

import msgpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import GPURED, Client, Daemon  # noqa: E402

MiB = 1 << 20
# Forced on, and slow enough that a stream of a few arrays is paced
# often: 64 KiB a millisecond is 64 MB/s at most while others are read.
FORCED = ("--pace-cpu-pressure", "0", "--pace-bytes-per-ms", "64K", "--threads", "2")


def arrays(seed, n, nbytes):
    """n arrays of random i32, with their sums."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a = array.array("i", (rng.randrange(-(1 << 31), 1 << 31) for _ in range(nbytes // 4)))
        out.append((a.tobytes(), sum(a)))
    return out


class Stream:
    """A client that sends arrays back to back, one in flight, in a thread."""

    def __init__(self, path, data, repeat):
        self.c = Client(path, timeout=60)
        self.data = data
        self.repeat = repeat
        self.errors = []
        self.answered = 0
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        try:
            for i in range(self.repeat):
                blob, want = self.data[i % len(self.data)]
                err, res = self.c.reduce("sum", "i32", blob)
                if err is not None or res != {"value": want, "count": len(blob) // 4}:
                    self.errors.append((i, err, res))
                    return
                self.answered += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(e))

    def join(self, timeout):
        self.thread.join(timeout)
        return not self.thread.is_alive()


class Small:
    """A client asking 1 KiB sums one at a time until told to stop."""

    def __init__(self, path, seed):
        self.c = Client(path, timeout=30)
        self.data = arrays(seed, 4, 1024)
        self.errors = []
        self.answered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        try:
            while not self.stop.is_set():
                blob, want = self.data[self.answered % len(self.data)]
                err, res = self.c.reduce("sum", "i32", blob)
                if err is not None or res != {"value": want, "count": 256}:
                    self.errors.append((self.answered, err, res))
                    return
                self.answered += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(e))

    def finish(self):
        self.stop.set()
        self.thread.join(30)
        self.c.close()
        return not self.thread.is_alive()


def stats(path):
    c = Client(path)
    try:
        return c.call("stats")[1]
    finally:
        c.close()


class Pacing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.big = arrays(1, 2, 4 * MiB)

    def test_stream_among_small_requests(self):
        """The stream is paced, makes progress and finishes; every small
        request and every array is answered right."""
        d = Daemon(*FORCED)
        try:
            smalls = [Small(d.path, 10 + k) for k in range(4)]
            t0 = time.monotonic()
            s = Stream(d.path, self.big, 12)
            done = s.join(60)
            took = time.monotonic() - t0
            for k in smalls:
                self.assertTrue(k.finish(), "a small client hung")
            self.assertTrue(done, "the stream did not finish in 60 s: %d of 12 answered"
                            % s.answered)
            self.assertEqual(s.errors, [])
            self.assertEqual(s.answered, 12)
            for k in smalls:
                self.assertEqual(k.errors, [])
                self.assertGreater(k.answered, 0)
            st = stats(d.path)
            self.assertGreater(st["stalls"]["paced"], 0,
                               "the stream was never paced (%.2f s)" % took)
            self.assertEqual(st["errors"], 0)
            # the stream's connection still works after it was paced
            self.assertEqual(s.c.call("ping"), (None, "pong"))
            s.c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_alone_not_paced(self):
        """A client streaming alone is never paced, forced or not."""
        d = Daemon(*FORCED)
        try:
            s = Stream(d.path, self.big, 8)
            self.assertTrue(s.join(60), "the stream did not finish")
            self.assertEqual(s.errors, [])
            s.c.close()
            self.assertEqual(stats(d.path)["stalls"]["paced"], 0)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_paced_connection_goes_away(self):
        """Streams that quit mid-array while paced, again and again, leave
        the daemon answering everyone else."""
        d = Daemon(*FORCED)
        try:
            smalls = [Small(d.path, 20 + k) for k in range(2)]
            blob = self.big[0][0]
            for _ in range(6):
                c = Client(d.path)
                msg = msgpack.packb([0, 1, "reduce", [{"op": "sum", "dtype": "i32",
                                                       "data": blob}]], use_bin_type=True)
                c.send(msg[: len(msg) // 2])
                time.sleep(0.05)
                c.close()
            time.sleep(0.2)
            for k in smalls:
                self.assertTrue(k.finish(), "a small client hung")
                self.assertEqual(k.errors, [])
            self.assertGreater(stats(d.path)["stalls"]["paced"], 0)
            c = Client(d.path)
            err, res = c.reduce("sum", "i32", self.big[1][0])
            self.assertEqual((err, res["value"]), (None, self.big[1][1]))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_options_in_info(self):
        """The settings show in info.limits; bad values stop the daemon."""
        d = Daemon()
        try:
            c = Client(d.path)
            lim = c.call("info")[1]["limits"]
            self.assertEqual(lim["pace_bytes_per_ms"], 64 << 10)
            self.assertEqual(lim["pace_cpu_pressure"], 10)
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)
        d = Daemon("--pace-bytes-per-ms", "0", "--pace-cpu-pressure", "100")
        try:
            c = Client(d.path)
            lim = c.call("info")[1]["limits"]
            self.assertEqual((lim["pace_bytes_per_ms"], lim["pace_cpu_pressure"]), (0, 100))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)
        for bad in (("--pace-cpu-pressure", "101"), ("--pace-bytes-per-ms", "x")):
            p = subprocess.run([GPURED, "--socket", "/tmp/gpured-never.sock", *bad],
                               stderr=subprocess.PIPE, text=True, timeout=10)
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn(bad[0], p.stderr)


if __name__ == "__main__":
    unittest.main()
