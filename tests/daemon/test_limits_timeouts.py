"""Requests that stop halfway time out, what a request holds is charged
from its first byte, memfds must be whole, and cuda_ipc regions are never
writable by default (gpured(8) SECURITY)."""

import os
import socket
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Client, Daemon, pack  # noqa: E402
from test_shm import ShmClient, memfd  # noqa: E402

SANITIZED = bool(os.environ.get("GPURED_SANITIZED"))
SLACK = 3.0 if SANITIZED else 1.0


def reduce_head(data_len, msgid=1):
    """The bytes of an inline f32 sum up to its data's first byte: a map
    whose "data" is a bin32 of data_len bytes, last."""
    return (b"\x94\x00" + pack(msgid) + pack("reduce") + b"\x91\x83" + pack("op") + pack("sum") +
            pack("dtype") + pack("f32") + pack("data") + b"\xc6" + struct.pack(">I", data_len))


def wait_closed(c, within):
    """The messages the daemon sent before it closed c, or None when it
    did not close c within `within` seconds."""
    c.sock.settimeout(within)
    got = []
    end = time.monotonic() + within
    try:
        while time.monotonic() < end:
            m = c.recv()
            if m is None:
                return got
            got.append(m)
    except (socket.timeout, TimeoutError):
        return None
    except (ConnectionResetError, BrokenPipeError):
        return got
    return None


class Timeouts(unittest.TestCase):
    def test_request_that_stops_halfway(self):
        d = Daemon("--request-timeout-ms", "400")
        try:
            c = Client(d.path)
            c.send(reduce_head(1 << 20) + bytes(4096))
            idle = Client(d.path)  # sends nothing: no request of it times out
            t0 = time.monotonic()
            got = wait_closed(c, 3 + SLACK)
            took = time.monotonic() - t0
            self.assertIsNotNone(got, "not closed")
            self.assertGreaterEqual(took, 0.35)
            self.assertEqual(len(got), 1, got)
            self.assertEqual(got[0][2]["code"], "invalid_request")
            self.assertIn("timed out", got[0][2]["message"])
            self.assertEqual(idle.call("ping"), (None, "pong"))
            st = idle.call("stats")[1]
            self.assertEqual(st["requests_timed_out"], 1)
            self.assertEqual(st["shares"]["staging_bytes"]["used"], 0)
            idle.close()
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_slow_but_steady_request_is_served(self):
        d = Daemon("--request-timeout-ms", "500")
        try:
            c = Client(d.path)
            data = struct.pack("<64f", *range(64))
            msg = pack([0, 7, "reduce", [{"op": "sum", "dtype": "f32", "data": data}]])
            for i in range(0, len(msg), 40):
                c.send(msg[i:i + 40])
                time.sleep(0.15)
            resp = c.recv()
            self.assertEqual(resp[:3], [1, 7, None])
            self.assertEqual(resp[3]["value"], sum(range(64)))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_first_request(self):
        d = Daemon("--first-request-timeout-ms", "400")
        try:
            idle = Client(d.path)
            served = Client(d.path)
            self.assertEqual(served.call("ping"), (None, "pong"))
            got = wait_closed(idle, 3 + SLACK)
            self.assertIsNotNone(got, "an idle first connection was not closed")
            self.assertIn("completed no request", got[0][2]["message"])
            time.sleep(0.5)
            self.assertEqual(served.call("ping"), (None, "pong"))
            served.close()
            idle.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_descriptors_that_wait(self):
        d = Daemon("--fd-timeout-ms", "400", "--request-timeout-ms", "0")
        try:
            c = ShmClient(d.path)
            fd = memfd(4096)
            # a map request's first bytes, with its descriptor, and no more
            c.send_fds(pack([0, 1, "map", [{"bytes": 4096}]])[:5], [fd])
            os.close(fd)
            got = wait_closed(c, 3 + SLACK)
            self.assertIsNotNone(got, "not closed")
            self.assertIn("file descriptors", got[0][2]["message"])
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_off(self):
        d = Daemon("--request-timeout-ms", "0", "--fd-timeout-ms", "0")
        try:
            c = Client(d.path)
            c.send(reduce_head(1 << 20) + bytes(100))
            self.assertIsNone(wait_closed(c, 1.0))
            c.close()
            info = Client(d.path)
            limits = info.call("info")[1]["limits"]
            self.assertEqual(limits["request_timeout_ms"], 0)
            self.assertEqual(limits["fd_timeout_ms"], 0)
            self.assertEqual(limits["first_request_timeout_ms"], 0)
            info.close()
        finally:
            self.assertEqual(d.stop(), 0)


class Charges(unittest.TestCase):
    def test_offsets_count_as_they_come(self):
        """A request's offsets count against its user's in-flight bytes as
        they arrive; past the bound the request is refused, and what it held
        is let go before its client sends the rest."""
        d = Daemon("--max-inflight-bytes-per-uid", "1M", "--request-timeout-ms", "0")
        try:
            c = Client(d.path)
            k = (8 << 20) // 8  # 8 MiB of offsets
            head = (b"\x94\x00" + pack(1) + pack("reduce") + b"\x91\x84" + pack("op") + pack("sum") +
                    pack("dtype") + pack("f32") + pack("offsets") + b"\xc6" + struct.pack(">I", k * 8))
            c.send(head + bytes(3 << 20))
            watch = Client(d.path)
            time.sleep(0.3)
            st = watch.call("stats")[1]
            me = [u for u in st["users"] if u["uid"] == os.getuid()][0]
            self.assertLess(me["held"]["inflight_bytes"], 2 << 20, me)
            # the rest of the request, then its error
            c.send(bytes((8 << 20) - (3 << 20)) + pack("data") + pack(b""))
            resp = c.recv()
            self.assertEqual(resp[2]["code"], "too_large", resp)
            self.assertIn("offsets", resp[2]["message"])
            self.assertEqual(c.call("ping"), (None, "pong"))
            c.close()
            watch.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_stats_show_users_and_shares(self):
        d = Daemon("--max-connections", "40")
        try:
            c = Client(d.path)
            st = c.call("stats")[1]
            shares = st["shares"]
            for name in ("connections", "fds", "staging_bytes", "inflight_bytes",
                         "mapped_bytes", "device_regions", "device_bytes"):
                self.assertIn(name, shares)
                self.assertEqual(set(shares[name]), {"cap", "used", "users", "refused"})
            self.assertEqual(shares["connections"]["cap"], 40)
            self.assertGreaterEqual(shares["connections"]["used"], 1)
            me = [u for u in st["users"] if u["uid"] == os.getuid()]
            self.assertEqual(len(me), 1)
            self.assertGreaterEqual(me[0]["held"]["connections"], 1)
            self.assertGreaterEqual(me[0]["held"]["fds"], 2)
            limits = c.call("info")[1]["limits"]
            for key in ("request_timeout_ms", "fd_timeout_ms", "first_request_timeout_ms",
                        "max_fds", "max_staging_bytes", "max_device_regions", "max_device_bytes",
                        "allow_cuda_ipc_writable"):
                self.assertIn(key, limits)
            self.assertEqual(limits["request_timeout_ms"], 10000)
            self.assertFalse(limits["allow_cuda_ipc_writable"])
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_users_busy_time(self):
        """Each user's account of engine time: none before its first
        request, some after sums of a 32 MiB region (the CPU's on a CPU
        daemon, the GPUs' with --host-data gpu on a CUDA daemon), and
        more after more."""
        d = Daemon(*(["--host-data", "gpu"] if BACKEND == "cuda" else []))
        try:
            c = ShmClient(d.path)
            busy = lambda: [u for u in c.call("stats")[1]["users"]
                            if u["uid"] == os.getuid()][0]["busy_s"]
            self.assertEqual(busy(), {"gpu": 0.0, "cpu": 0.0})
            data = struct.pack("<%dd" % (4 << 20), *range(4 << 20))
            region, m = c.map(len(data), data)
            for _ in range(3):
                err, res = c.reduce_region("sum", "f64", region, 0, 4 << 20)
                self.assertIsNone(err, err)
            first = busy()
            engine, other = ("gpu", "cpu") if BACKEND == "cuda" else ("cpu", "gpu")
            self.assertGreater(first[engine], 0, first)
            self.assertEqual(first[other], 0.0, first)
            self.assertLess(first[engine], 10, first)
            for _ in range(3):
                c.reduce_region("sum", "f64", region, 0, 4 << 20)
            self.assertGreater(busy()[engine], first[engine])
            m.close()
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


@unittest.skipUnless(BACKEND == "cpu", "the slow registration is the CPU backend's test fault")
class SlowRegistration(unittest.TestCase):
    """A backend that registers regions slowly (a GPU pinning a large one;
    here the CPU backend's test fault) does it off the loop: others are
    served meanwhile, the map is answered once it is done, and a client
    that goes before then leaves nothing behind."""

    def test_others_served_while_a_region_registers(self):
        d = Daemon("--fault", "register-ms=800")
        try:
            c = ShmClient(d.path)
            other = Client(d.path)
            fd = memfd(1 << 20)
            t0 = time.monotonic()
            c.msgid += 1
            c.send_fds(pack([0, c.msgid, "map", [{"bytes": 1 << 20}]]), [fd])
            os.close(fd)
            time.sleep(0.1)
            t1 = time.monotonic()
            self.assertEqual(other.call("ping"), (None, "pong"))
            self.assertLess(time.monotonic() - t1, 0.3 * SLACK)
            resp = c.recv()
            self.assertGreaterEqual(time.monotonic() - t0, 0.7)
            self.assertEqual(resp[:3], [1, c.msgid, None])
            rid = resp[3]["region"]
            err, res = c.reduce_region("sum", "f32", rid, 0, 1 << 18)
            self.assertIsNone(err, err)
            self.assertEqual(c.call("unmap", [{"region": rid}]), (None, True))
            # a client that goes while its region registers
            gone = ShmClient(d.path)
            fd = memfd(1 << 20)
            gone.send_fds(pack([0, 1, "map", [{"bytes": 1 << 20}]]), [fd])
            os.close(fd)
            time.sleep(0.1)
            gone.close()
            time.sleep(2.0)
            st = other.call("stats")[1]
            self.assertEqual(st["regions"], 0)
            self.assertEqual(st["mapped_bytes"], 0)
            self.assertEqual(st["shares"]["mapped_bytes"]["used"], 0)
            self.assertEqual(st["connections"], 2)
            c.close()
            other.close()
        finally:
            self.assertEqual(d.stop(), 0)


class Memfds(unittest.TestCase):
    def test_holes_refused_whole_accepted(self):
        d = Daemon()
        try:
            c = ShmClient(d.path)
            fd = memfd(1 << 20, allocate=False)
            err, _ = c.map_fds(1 << 20, [fd])
            os.close(fd)
            self.assertEqual(err["code"], "invalid_params")
            self.assertIn("holes", err["message"])
            # written whole by hand: accepted
            fd = memfd(1 << 20, allocate=False)
            os.pwrite(fd, struct.pack("<f", 1.0) * (1 << 18), 0)
            err, res = c.map_fds(1 << 20, [fd])
            os.close(fd)
            self.assertIsNone(err, err)
            err, res = c.reduce_region("sum", "f32", res["region"], 0, 1 << 18)
            self.assertIsNone(err, err)
            self.assertEqual(res["value"], float(1 << 18))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_cuda_ipc_never_writable(self):
        d = Daemon("--allow-cuda-ipc", "yes")
        try:
            c = Client(d.path)
            err, _ = c.call("map", [{"kind": "cuda_ipc", "handle": bytes(64), "bytes": 4096,
                                     "device": "GPU-0", "writable": True}])
            self.assertEqual(err["code"], "invalid_params")
            self.assertIn("writable", err["message"])
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
