"""The daemon at the socket level, its replies: busy polling, replies
sent by backend threads, the batch delay, backend faults and shutdown
(hostile input, limits, determinism and the socket file are
test_daemon.py's)."""

import os
import random
import signal
import socket
import struct
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, GPURED, Client, Daemon  # noqa: E402
from test_daemon import (  # noqa: E402
    MiB,
    pack)


def cpu_seconds(pid):
    """User plus system time of a process so far, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BusyPoll(unittest.TestCase):
    def test_idle_after_busy_polling(self):
        """The loop polls for --busy-poll-us after each read and answer,
        then sleeps: an idle daemon uses no CPU, whatever the window."""
        for window in ("50", "100000"):
            d = Daemon("--busy-poll-us", window, "--threads", "1")
            try:
                c = Client(d.path, timeout=10)
                data = struct.pack("<256f", *range(256))
                for i in range(300):
                    err, res = c.call("reduce", [{"op": "sum", "dtype": "f32", "data": data}])
                    self.assertIsNone(err)
                    self.assertEqual(res["value"], 32640.0)
                time.sleep(0.5)
                before = cpu_seconds(d.proc.pid)
                time.sleep(1.0)
                used = cpu_seconds(d.proc.pid) - before
                self.assertLess(used, 0.1, "window %s: %.2f s of CPU in 1 s idle" % (window, used))
                c.close()
            finally:
                self.assertEqual(d.stop(), 0)

    def test_no_lost_wakeup(self):
        """While the loop polls, workers finishing jobs do not wake it; a
        job finishing just as the loop goes back to sleep must still be
        answered. Every job goes to a worker here, and the gaps between
        requests straddle the polling window."""
        d = Daemon("--busy-poll-us", "20", "--inline-max-bytes", "0", "--threads", "2")
        try:
            rng = random.Random(7)
            c = Client(d.path, timeout=10)
            data = struct.pack("<64i", *range(64))
            for i in range(3000):
                gap = rng.choice((0, 0, 5e-6, 2e-5, 4e-5, 1e-4))
                if gap:
                    time.sleep(gap)
                burst = rng.choice((1, 1, 1, 4))
                ids = [c.request("reduce", [{"op": "sum", "dtype": "i32", "data": data}])
                       for _ in range(burst)]
                for _ in ids:
                    resp = c.recv()
                    self.assertIsNotNone(resp, "request %d: connection closed" % i)
                    self.assertIn(resp[1], ids)
                    self.assertEqual(resp[3], {"value": 2016, "count": 64})
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


# Every job goes to a worker thread on the CPU backend (which then writes
# small requests' replies itself), as every job does on a GPU.
WORKERS = ("--inline-max-bytes", "0", "--threads", "2")


def mixed_requests(rng, n):
    """n requests of random ops, integer dtypes and sizes, with a ping, an
    invalid request (answered with an error by the loop thread) or an
    empty min among them now and then; returns (wire bytes, {msgid: what
    the reply must be})."""
    fmts = {"i32": "<i4", "u32": "<u4", "i64": "<i8"}
    # the values from NumPy's generator, seeded from rng: drawn one by one
    # they took most of the test's time
    values = np.random.default_rng(rng.getrandbits(64))
    out, want = [], {}
    for msgid in range(1, n + 1):
        k = rng.random()
        if k < 0.03:
            out.append(pack([0, msgid, "ping", []]))
            want[msgid] = (None, "pong")
            continue
        if k < 0.05:
            # a long reply from the loop thread, often written in parts
            out.append(pack([0, msgid, "info", []]))
            want[msgid] = (None, None)
            continue
        if k < 0.08:
            out.append(pack([0, msgid, "reduce", [{"op": "sum", "dtype": "f12", "data": b""}]]))
            want[msgid] = ("invalid_params", None)
            continue
        if k < 0.10:
            out.append(pack([0, msgid, "reduce", [{"op": "min", "dtype": "i32", "data": b""}]]))
            want[msgid] = ("empty", None)
            continue
        dt = rng.choice(sorted(fmts))
        op = rng.choice(("sum", "min", "max"))
        count = rng.choice((1, 3, 31, 33, 256, 1000))
        lo = 0 if dt == "u32" else -1000
        vals = values.integers(lo, 1000, count, endpoint=True)
        data = vals.astype(fmts[dt]).tobytes()
        out.append(pack([0, msgid, "reduce", [{"op": op, "dtype": dt, "data": data}]]))
        value = int({"sum": np.sum, "min": np.min, "max": np.max}[op](vals))
        want[msgid] = (None, {"value": value, "count": count})
    return b"".join(out), want


def check_replies(test, c, want, trickle=0):
    """Read one reply for each msgid in want and check it; the first
    trickle bytes a few hundred at a time, so that the daemon's side of
    the socket keeps filling up and draining."""
    seen = set()
    while trickle > 0:
        data = c.sock.recv(300)
        test.assertTrue(data, "closed")
        c.unpacker.feed(data)
        trickle -= len(data)
        time.sleep(0.00005)
    for _ in range(len(want)):
        resp = c.recv()
        test.assertIsNotNone(resp, "closed after %d replies" % len(seen))
        test.assertEqual(resp[0], 1, resp)
        msgid = resp[1]
        test.assertIn(msgid, want)
        test.assertNotIn(msgid, seen, "two replies to %d" % msgid)
        seen.add(msgid)
        err, res = want[msgid]
        if err is None and res is None:
            test.assertIsNone(resp[2], resp)
            test.assertIn("devices", resp[3])
        elif err is None:
            test.assertIsNone(resp[2], resp)
            test.assertEqual(resp[3], res, "msgid %d" % msgid)
        else:
            test.assertEqual(resp[2]["code"], err, resp)


class DirectReplies(unittest.TestCase):
    """Replies to small requests written by the thread that finished them
    (--direct-replies, on by default), next to the loop thread's own."""

    def test_slow_reader_gets_every_reply_whole(self):
        """A client that sends everything before it reads, into a small
        receive buffer: the direct sends fill the socket and the rest is
        handed to the loop, whose own replies (pings, errors) go out on the
        same socket. Every reply arrives once, whole and right."""
        # the same requests for both daemons
        wire, want = mixed_requests(random.Random(11), 40000)
        for direct in ("yes", "no"):
            d = Daemon(*WORKERS, "--direct-replies", direct)
            try:
                c = Client(d.path, timeout=20)
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sender = threading.Thread(target=c.send, args=(wire,))
                sender.start()
                time.sleep(0.3)
                check_replies(self, c, want, trickle=MiB)
                sender.join()
                err, stats = c.call("stats")
                self.assertEqual(stats["inflight"], 0)
                c.close()
            finally:
                self.assertEqual(d.stop(), 0, direct)

    def test_many_connections(self):
        """Eight connections pipelining mixed requests at once."""
        d = Daemon(*WORKERS)
        try:
            errors = []

            def run(seed):
                try:
                    c = Client(d.path, timeout=20)
                    wire, want = mixed_requests(random.Random(seed), 3000)
                    sender = threading.Thread(target=c.send, args=(wire,))
                    sender.start()
                    check_replies(self, c, want)
                    sender.join()
                    c.close()
                except Exception as e:  # reported below, from this thread
                    errors.append(e)

            threads = [threading.Thread(target=run, args=(seed,)) for seed in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors, [])
        finally:
            self.assertEqual(d.stop(), 0)

    def test_clients_that_vanish(self):
        """Clients that close with replies in flight, or shut their reading
        side so that sends fail, cost nothing: the daemon serves the next
        one and holds no request of theirs afterwards."""
        d = Daemon(*WORKERS)
        try:
            rng = random.Random(5)
            for i in range(150):
                c = Client(d.path)
                wire, _ = mixed_requests(rng, rng.choice((1, 10, 200)))
                c.send(wire)
                if i % 3 == 1:
                    c.sock.shutdown(socket.SHUT_RD)
                    time.sleep(0.002)
                elif i % 3 == 2:
                    c.recv()
                c.close()
            c = Client(d.path)
            wire, want = mixed_requests(rng, 500)
            c.send(wire)
            check_replies(self, c, want)
            end = time.monotonic() + 5
            while True:
                err, stats = c.call("stats")
                if (stats["inflight"], stats["connections"]) == (0, 1) or time.monotonic() > end:
                    break
                time.sleep(0.02)
            self.assertEqual((stats["inflight"], stats["connections"]), (0, 1))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


class BatchDelay(unittest.TestCase):
    def test_delay_in_microseconds(self):
        """--batch-delay-us holds a lone small request that many
        microseconds, not rounded up to the whole milliseconds of the
        loop's timers: under a millisecond (polled) and past a few (a
        timer, then polled), the daemon's own median latency lies between
        the delay and 600 us more, short of the next whole millisecond.
        The timing is the loop's, whatever the backend, so this runs on
        the CPU: on a GPU host the CUDA threads' own wake-ups after an idle
        gap added 400-600 us and made the bound a measure of the host."""
        for delay in (300, 3300):
            d = Daemon("--batch-delay-us", str(delay), "--busy-poll-us", "0", "--backend", "cpu")
            try:
                c = Client(d.path, timeout=10)
                data = struct.pack("<256f", *range(256))
                for i in range(60):
                    err, res = c.call("reduce", [{"op": "sum", "dtype": "f32", "data": data}])
                    self.assertIsNone(err)
                    self.assertEqual(res["value"], 32640.0)
                err, st = c.call("stats")
                self.assertIsNone(err)
                lat = st["latency_us"]
                self.assertEqual(lat["window"], 60)
                self.assertGreaterEqual(lat["p50"], delay, lat)
                self.assertLess(lat["p50"], delay + 600, lat)
                # each request went out alone, once its delay was up
                self.assertEqual(st["batches"], 60, st)
                c.close()
            finally:
                self.assertEqual(d.stop(), 0)


@unittest.skipUnless(BACKEND == "cuda", "injects CUDA faults")
class Faults(unittest.TestCase):
    """--fault makes every GPU's fourth launch fail. The request it carried
    gets internal, naming the call and the device; the device goes out of
    service (info, stats, the log) and the daemon carries on with the
    others, then on the CPU; with --cpu-fallback no, requests then fail
    promptly and everything else still answers."""

    N = 1000
    DATA = struct.pack("<%di" % N, *range(-N // 2, N // 2))

    def run_until_all_failed(self, c, ngpu):
        """One request at a time, each a launch of its own: three run on
        a device, its fourth fails, and so on down the devices."""
        failed = []
        for i in range(4 * ngpu):
            err, res = c.reduce("sum", "i32", self.DATA)
            if err:
                self.assertEqual(err["code"], "internal", err)
                self.assertRegex(err["message"], r"cudaLaunchKernel on device \d.*injected", err)
                failed.append(i)
            else:
                self.assertEqual(res, {"value": -self.N // 2, "count": self.N})
        self.assertEqual(failed, [4 * k + 3 for k in range(ngpu)])
        err, info = c.call("info")
        for dev in info["devices"][:ngpu]:
            self.assertFalse(dev["healthy"], dev)
            self.assertIn("cudaLaunchKernel", dev["health"])
        return info

    def test_cpu_fallback(self):
        d = Daemon("--fault", "launch:after=3")
        try:
            c = Client(d.path, timeout=30)
            ngpu = len(c.call("info")[1]["devices"])
            threads = len(os.listdir("/proc/%d/task" % d.proc.pid))
            info = self.run_until_all_failed(c, ngpu)
            # every op and dtype now runs on the CPU, a chunked one too
            rng = random.Random(3)
            for dt, fmt in (("f32", "f"), ("f64", "d"), ("i32", "i"), ("i64", "q")):
                vals = [rng.randint(-1000, 1000) for _ in range(3001)]
                data = struct.pack("<%d%s" % (len(vals), fmt), *vals)
                for op, want in (("sum", sum(vals)), ("min", min(vals)), ("max", max(vals)),
                                 ("sumsq", sum(v * v for v in vals))):
                    err, res = c.reduce(op, dt, data)
                    self.assertIsNone(err, (op, dt))
                    self.assertEqual(res, {"value": want, "count": len(vals)}, (op, dt))
            n = 24 * MiB // 4
            err, res = c.reduce("sum", "u32", b"\x03\x00\x00\x00" * n)
            self.assertEqual((err, res), (None, {"value": 3 * n, "count": n}))
            err, info = c.call("info")
            self.assertEqual(len(info["devices"]), ngpu + 1)
            cpu = info["devices"][ngpu]
            self.assertEqual((cpu["kind"], cpu["index"], cpu["healthy"]), ("cpu", ngpu, True))
            self.assertGreaterEqual(cpu["jobs"], 17)
            # on the workers of the CPU route: no thread started
            self.assertEqual(len(os.listdir("/proc/%d/task" % d.proc.pid)), threads)
            err, st = c.call("stats")
            self.assertEqual((st["devices"], st["devices_healthy"]), (ngpu + 1, 1))
            c.close()
            log = d.stderr()
            self.assertIn("taken out of service", log)
            self.assertIn("reducing on the CPU", log)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_no_cpu_fallback(self):
        d = Daemon("--fault", "launch:after=3", "--cpu-fallback", "no")
        try:
            c = Client(d.path, timeout=30)
            ngpu = len(c.call("info")[1]["devices"])
            self.run_until_all_failed(c, ngpu)
            t0 = time.monotonic()
            for i in range(20):
                err, res = c.reduce("max", "f64", self.DATA)
                self.assertEqual(err["code"], "internal")
                self.assertIn("no healthy CUDA device left", err["message"])
            self.assertLess(time.monotonic() - t0, 5)
            self.assertIsNone(c.call("ping")[0])
            err, st = c.call("stats")
            self.assertEqual((st["devices"], st["devices_healthy"]), (ngpu, 0))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


class Shutdown(unittest.TestCase):
    def test_sigterm_with_request_in_flight(self):
        d = Daemon("--chunk-bytes", "256K", "--staging-bytes", "2M", "--threads", "1")
        path = d.path
        c = Client(path, timeout=30)
        n = 64 * MiB // 4
        data = b"\x02\x00\x00\x00" * n
        msg = pack([0, 77, "reduce", [{"op": "sum", "dtype": "u32", "data": data}]])
        sender = threading.Thread(target=c.send, args=(msg,))
        sender.start()
        time.sleep(0.05)
        d.proc.send_signal(signal.SIGTERM)
        sender.join()
        resp = c.recv()
        self.assertEqual(resp, [1, 77, None, {"value": 2 * n, "count": n}])
        self.assertEqual(d.proc.wait(10), 0)
        self.assertFalse(os.path.exists(path))
        c.close()
        d.stop()

    def test_sigint(self):
        d = Daemon()
        d.proc.send_signal(signal.SIGINT)
        self.assertEqual(d.proc.wait(10), 0)
        d.stop()


if __name__ == "__main__":
    if not GPURED:
        print("GPURED is not set", file=sys.stderr)
        sys.exit(1)
    unittest.main(verbosity=2)
