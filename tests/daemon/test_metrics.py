"""Prometheus metrics: GET /metrics on --metrics-listen and gpuredctl
metrics, both checked by an independent checker of the text format
(exposition.py) and by promtool where installed; their values move with
requests, regions and latencies; other paths and methods are refused; the
daemon keeps answering while /metrics is scraped hard; slow or silent
HTTP clients are closed within a few seconds and never hold a scrape up;
an address given as only a port is loopback; and it stops cleanly on
SIGTERM with the HTTP server running."""

import http.client
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exposition  # noqa: E402
from gpured_harness import GPURED, Client, Daemon  # noqa: E402
from test_shm import ShmClient  # noqa: E402

GPUREDCTL = os.environ.get("GPUREDCTL", "")
# A daemon built without libmicrohttpd: it must refuse --metrics-listen,
# and gpuredctl metrics still works.
NO_HTTP = os.environ.get("GPURED_NO_HTTP") == "1"
PROMTOOL = shutil.which("promtool")
# A published sample is at most this old (daemon/exporter.h), plus slack.
STALE_S = 0.1 + 0.2
# An HTTP client that has not sent its whole request 2 s after it was
# accepted is closed (daemon/exporter.c); this allows for a loaded host.
SLOW_CLOSED_S = 4.0

NAMES = [
    "gpured_build_info", "gpured_uptime_seconds", "gpured_requests_total",
    "gpured_errors_total", "gpured_inflight_requests", "gpured_connections",
    "gpured_connections_total", "gpured_connections_refused_total",
    "gpured_connections_timed_out_total",
    "gpured_elements_total", "gpured_batches_total", "gpured_regions",
    "gpured_mapped_bytes", "gpured_bytes_in_total", "gpured_device_up",
    "gpured_device_jobs_total", "gpured_request_duration_seconds_bucket",
    "gpured_request_duration_seconds_sum", "gpured_request_duration_seconds_count",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def promtool(test, text):
    """promtool check metrics on text, where promtool is installed."""
    if not PROMTOOL:
        return
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=60)
    test.assertEqual(p.returncode, 0, p.stdout + p.stderr)
    # promtool's lint problems come on stdout or stderr, with rc 0 in
    # some versions: any message is a failure
    test.assertEqual((p.stdout + p.stderr).strip(), b"", p.stdout + p.stderr)


class CheckerChecks(unittest.TestCase):
    """The checker itself rejects what the format forbids."""

    GOOD = ("# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"b\\\"c\"} 3\n"
            "# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
            "h_sum 0.3\nh_count 2\n")

    def test_good(self):
        self.assertEqual(exposition.check(self.GOOD), [])

    def test_bad(self):
        bad = [
            "x 1",                                           # no final line feed
            "1x 1\n",                                        # metric name
            "x{1a=\"b\"} 1\n",                               # label name
            "x{a=\"b\\t\"} 1\n",                             # escape
            "x{a=b} 1\n",                                    # unquoted
            "x one\n",                                       # value
            "x 1\nx 2\n",                                    # series twice
            "# TYPE x gauge\n# TYPE x gauge\nx 1\n",         # TYPE twice
            "x 1\n# TYPE x gauge\n",                         # TYPE after samples
            "# TYPE x blob\nx 1\n",                          # unknown type
            "# TYPE x counter\nx 1\n",                       # counter not _total
            "# TYPE x_total counter\nx_total -1\n",          # negative counter
            "a 1\nb 1\na{l=\"x\"} 1\n",                      # interleaved
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",          # no +Inf
            "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n",
            "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
            b"x{a=\"\xff\"} 1\n",                           # not UTF-8
        ]
        for text in bad:
            self.assertNotEqual(exposition.check(text), [], text)


@unittest.skipIf(NO_HTTP, "built without libmicrohttpd")
class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        cls.d = Daemon("--threads", "2", "--metrics-listen", "127.0.0.1:%d" % cls.port)

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        assert rc == 0, (rc, cls.d.stderr())

    def get(self, path="/metrics", method="GET"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request(method, path)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def scrape(self):
        status, headers, body = self.get()
        self.assertEqual(status, 200, body)
        self.assertEqual(headers.get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        self.assertEqual(exposition.check(body), [], body.decode(errors="replace"))
        return exposition.parse(body)

    def fresh(self):
        """A scrape taken after everything so far was published."""
        time.sleep(STALE_S)
        return self.scrape()

    def ctl_metrics(self):
        p = subprocess.run([GPUREDCTL, "--socket", self.d.path, "metrics"], capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_http_valid(self):
        status, headers, body = self.get()
        self.assertEqual(status, 200)
        # one request a connection: its deadline bounds the request
        self.assertEqual(headers.get("Connection"), "close")
        self.assertEqual(exposition.check(body), [])
        promtool(self, body)
        names = {k[0] for k in exposition.parse(body)}
        for n in NAMES:
            self.assertIn(n, names)

    @unittest.skipUnless(GPUREDCTL, "GPUREDCTL not set")
    def test_gpuredctl_valid_and_same_series(self):
        text = self.ctl_metrics()
        self.assertEqual(exposition.check(text), [], text)
        promtool(self, text)
        ctl = exposition.parse(text)
        http_ = self.fresh()
        self.assertEqual(set(ctl), set(http_))
        v = exposition.value
        self.assertEqual(v(ctl, "gpured_build_info", version=self.version()), 1)

    def version(self):
        c = Client(self.d.path)
        try:
            err, info = c.call("info")
        finally:
            c.close()
        return info["version"]

    def test_values_move(self):
        v = exposition.value
        before = self.fresh()
        c = Client(self.d.path)
        data = bytes(4096)
        try:
            for _ in range(20):
                err, res = c.reduce("sum", "f32", data)
                self.assertIsNone(err)
            err, _ = c.reduce("min", "f32", b"")
            self.assertEqual(err["code"], "empty")
            after = self.fresh()
            self.assertEqual(v(after, "gpured_connections"), v(before, "gpured_connections") + 1)
        finally:
            c.close()
        self.assertGreaterEqual(v(after, "gpured_requests_total") - v(before, "gpured_requests_total"), 21)
        self.assertGreaterEqual(v(after, "gpured_errors_total") - v(before, "gpured_errors_total"), 1)
        self.assertGreaterEqual(v(after, "gpured_elements_total") - v(before, "gpured_elements_total"), 20 * 1024)
        self.assertGreater(v(after, "gpured_bytes_in_total", path="socket") -
                           v(before, "gpured_bytes_in_total", path="socket"), 20 * 4096)
        self.assertEqual(v(after, "gpured_bytes_in_total", path="device"), 0)
        n0 = v(before, "gpured_request_duration_seconds_count")
        n1 = v(after, "gpured_request_duration_seconds_count")
        self.assertGreaterEqual(n1 - n0, 21)
        self.assertEqual(v(after, "gpured_request_duration_seconds_bucket", le="+Inf"), n1)
        self.assertGreater(v(after, "gpured_request_duration_seconds_sum"),
                           v(before, "gpured_request_duration_seconds_sum"))
        self.assertGreater(v(after, "gpured_uptime_seconds"), v(before, "gpured_uptime_seconds"))
        jobs = [val for (name, _), val in after.items() if name == "gpured_device_jobs_total"]
        self.assertGreater(sum(jobs), 0)
        ups = [(dict(lab), val) for (name, lab), val in after.items() if name == "gpured_device_up"]
        self.assertTrue(ups)
        for lab, val in ups:
            self.assertEqual(val, 1, lab)
            self.assertIn(lab["kind"], ("cpu", "cuda"))

    def test_shm_bytes_and_regions(self):
        v = exposition.value
        before = self.fresh()
        c = ShmClient(self.d.path)
        try:
            region, m = c.map(1 << 16)
            during = self.fresh()
            self.assertEqual(v(during, "gpured_regions"), v(before, "gpured_regions") + 1)
            self.assertEqual(v(during, "gpured_mapped_bytes"), v(before, "gpured_mapped_bytes") + (1 << 16))
            for _ in range(3):
                err, res = c.reduce_region("sum", "i32", region, 0, 1 << 14)
                self.assertIsNone(err, err)
            after = self.fresh()
            self.assertEqual(v(after, "gpured_bytes_in_total", path="shm") -
                             v(before, "gpured_bytes_in_total", path="shm"), 3 * (1 << 16))
            m.close()
        finally:
            c.close()
        gone = self.fresh()
        self.assertEqual(v(gone, "gpured_regions"), v(before, "gpured_regions"))

    def test_not_found_and_method(self):
        for path in ("/", "/metrics/", "/metricsx", "/other"):
            status, _, _ = self.get(path)
            self.assertEqual(status, 404, path)
        for method in ("POST", "PUT", "DELETE"):
            status, headers, _ = self.get("/metrics", method)
            self.assertEqual(status, 405, method)
            self.assertIn("GET", headers.get("Allow", ""))
        status, _, body = self.get("/metrics", "HEAD")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")

    def test_bound_to_given_address_only(self):
        # /proc/net/tcp lists the listener's local address: 127.0.0.1, not any
        want = ":%04X" % self.port
        found = []
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[1].endswith(want) and fields[3] == "0A":
                    found.append(fields[1].split(":")[0])
        self.assertEqual(found, ["0100007F"])

    def test_answers_while_scraped_hard(self):
        stop = threading.Event()
        scrapes = [0]
        errors = []

        def hammer():
            while not stop.is_set():
                try:
                    status, _, body = self.get()
                    if status != 200 or not body:
                        errors.append(status)
                    scrapes[0] += 1
                except OSError as e:
                    errors.append(e)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        c = Client(self.d.path)
        worst = 0.0
        n = 0
        try:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                t0 = time.monotonic()
                err, res = c.reduce("sum", "i32", bytes(1024))
                worst = max(worst, time.monotonic() - t0)
                self.assertIsNone(err)
                n += 1
        finally:
            stop.set()
            for t in threads:
                t.join()
            c.close()
        self.assertEqual(errors, [])
        self.assertGreater(scrapes[0], 20)
        self.assertGreater(n, 100)
        # a slow machine may take a while for one, but never the loop
        # waiting on HTTP clients
        self.assertLess(worst, 1.0)


class SlowClients:
    """n connections to the metrics port, each of which sends the start of
    a request line and then one more byte every interval (silent: nothing
    at all), from a thread of their own. Each one the server closes is
    replaced, as an attacker would, so that n stay open. Records how long
    each one lived."""

    START = b"GET /metr"

    def __init__(self, port, n, silent, interval=0.5):
        self.port = port
        self.n = n
        self.silent = silent
        self.interval = interval
        self.socks = {}          # socket -> when it was connected
        self.lifetimes = []      # of those the server closed
        self.connect_errors = 0
        self.replace = True
        self.stop = threading.Event()
        for _ in range(n):
            self.open_one()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def open_one(self):
        s = socket.socket()
        s.settimeout(2.0)
        try:
            s.connect(("127.0.0.1", self.port))
            if not self.silent:
                s.sendall(self.START)
        except OSError:
            self.connect_errors += 1
            s.close()
            return
        s.setblocking(False)
        self.socks[s] = time.monotonic()

    def closed(self, s):
        self.lifetimes.append(time.monotonic() - self.socks.pop(s))
        s.close()
        if self.replace:
            self.open_one()

    def run(self):
        tick = time.monotonic() + self.interval
        while not self.stop.is_set():
            wait = max(0.0, min(tick - time.monotonic(), 0.05))
            readable, _, _ = select.select(list(self.socks), [], [], wait)
            for s in readable:
                try:
                    if s.recv(4096):
                        continue  # an answer (an error): the close comes next
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                self.closed(s)
            if time.monotonic() < tick:
                continue
            tick += self.interval
            if self.silent:
                continue
            for s in list(self.socks):
                try:
                    s.send(b"a")
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed(s)

    def oldest(self):
        now = time.monotonic()
        return max((now - t for t in self.socks.values()), default=0.0)

    def close(self):
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()
        self.socks.clear()


@unittest.skipIf(NO_HTTP, "built without libmicrohttpd")
class Slow(unittest.TestCase):
    """64 clients that trickle a request a byte every 0.5 s, or send
    nothing, hold no scrape up, and are closed within a few seconds."""

    N = 64
    RUN_S = 5.0

    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        cls.d = Daemon("--threads", "1", "--metrics-listen", "127.0.0.1:%d" % cls.port)

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        assert rc == 0, (rc, cls.d.stderr())

    def scrape_timed(self):
        """Seconds a whole GET /metrics took, and what went wrong, if anything."""
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=12)
        try:
            c.request("GET", "/metrics")
            r = c.getresponse()
            body = r.read()
            bad = None if r.status == 200 and exposition.check(body) == [] else r.status
        except (OSError, http.client.HTTPException) as e:
            bad = repr(e)
        finally:
            c.close()
        return time.monotonic() - t0, bad

    def check_not_held_up(self, silent):
        slow = SlowClients(self.port, self.N, silent)
        times = []
        try:
            time.sleep(0.3)
            end = time.monotonic() + self.RUN_S
            while time.monotonic() < end:
                took, bad = self.scrape_timed()
                times.append(took)
                self.assertIsNone(bad, "scrape %d failed after %.1f s" % (len(times), took))
                self.assertLess(took, 1.0, "scrape %d took %.1f s with %d slow clients open"
                                % (len(times), took, len(slow.socks)))
                time.sleep(0.1)
            # the attack went on all along
            self.assertGreaterEqual(len(slow.socks) + slow.connect_errors, self.N // 2)
            # stop replacing them: what is open now is closed in time too
            slow.replace = False
            deadline = time.monotonic() + SLOW_CLOSED_S + 1.0
            while slow.socks and time.monotonic() < deadline:
                time.sleep(0.1)
            worst = max(slow.lifetimes + [slow.oldest()])
            self.assertLess(worst, SLOW_CLOSED_S, "a slow client was open for %.1f s" % worst)
            self.assertEqual(len(slow.socks), 0)
            self.assertGreaterEqual(len(slow.lifetimes), self.N)
        finally:
            slow.close()
        self.assertGreater(len(times), 10)
        # a scrape after the attack is fine
        took, bad = self.scrape_timed()
        self.assertIsNone(bad)

    def test_trickling(self):
        self.check_not_held_up(silent=False)

    def test_silent(self):
        self.check_not_held_up(silent=True)


@unittest.skipIf(NO_HTTP, "built without libmicrohttpd")
class Loopback(unittest.TestCase):
    """--metrics-listen PORT and :PORT bind 127.0.0.1, and answer there."""

    def listeners(self, port):
        want = ":%04X" % port
        found = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    lines = f.readlines()[1:]
            except FileNotFoundError:
                continue
            for line in lines:
                fields = line.split()
                if fields[1].endswith(want) and fields[3] == "0A":
                    found.append(fields[1].split(":")[0])
        return found

    def test_port_only(self):
        for form in ("%d", ":%d"):
            with self.subTest(form=form):
                port = free_port()
                d = Daemon("--threads", "1", "--metrics-listen", form % port)
                try:
                    self.assertEqual(self.listeners(port), ["0100007F"])
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    try:
                        c.request("GET", "/metrics")
                        r = c.getresponse()
                        self.assertEqual(r.status, 200)
                        r.read()
                    finally:
                        c.close()
                finally:
                    self.assertEqual(d.stop(), 0)


@unittest.skipUnless(GPUREDCTL, "GPUREDCTL not set")
class Output(unittest.TestCase):
    def test_output_file(self):
        d = Daemon("--threads", "1")
        try:
            with tempfile.TemporaryDirectory(prefix="gpured-test-") as tmp:
                path = os.path.join(tmp, "gpured.prom")
                with open(path, "w") as f:
                    f.write("old\n")
                p = subprocess.run([GPUREDCTL, "--socket", d.path, "metrics", "--output", path],
                                   capture_output=True, timeout=30)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout, b"")
                with open(path, "rb") as f:
                    text = f.read()
                self.assertEqual(exposition.check(text), [], text)
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)
                # nothing left beside it
                self.assertEqual(os.listdir(tmp), ["gpured.prom"])
                # a directory that is not there: an error, and no output
                p = subprocess.run([GPUREDCTL, "--socket", d.path, "metrics", "--output",
                                    os.path.join(tmp, "no", "x.prom")], capture_output=True,
                                   timeout=30)
                self.assertEqual(p.returncode, 1)
                self.assertIn(b"cannot write", p.stderr)
        finally:
            self.assertEqual(d.stop(), 0)


@unittest.skipIf(NO_HTTP, "built without libmicrohttpd")
class Shutdown(unittest.TestCase):
    def test_sigterm_while_scraped(self):
        port = free_port()
        d = Daemon("--threads", "1", "--metrics-listen", "127.0.0.1:%d" % port)
        stop = threading.Event()

        def hammer():
            while not stop.is_set():
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    c.request("GET", "/metrics")
                    c.getresponse().read()
                    c.close()
                except (OSError, http.client.HTTPException):
                    pass

        threads = [threading.Thread(target=hammer) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.3)
            t0 = time.monotonic()
            self.assertEqual(d.stop(timeout=10), 0)
            self.assertLess(time.monotonic() - t0, 5)
        finally:
            stop.set()
            for t in threads:
                t.join()
        # the port is free again: nothing of the HTTP server is left
        s = socket.socket()
        try:
            with self.assertRaises(ConnectionRefusedError):
                s.connect(("127.0.0.1", port))
        finally:
            s.close()


@unittest.skipIf(NO_HTTP, "built without libmicrohttpd")
class Refused(unittest.TestCase):
    def run_daemon(self, *args):
        with tempfile.TemporaryDirectory(prefix="gpured-test-") as d:
            p = subprocess.run([GPURED, "--socket", os.path.join(d, "s"), "--backend", "cpu",
                                "--threads", "1", *args], capture_output=True, timeout=30)
        return p.returncode, p.stderr.decode()

    def test_bad_address(self):
        for bad in ("", ":", "127.0.0.1:", "65536", ":65536", "9470x", "::1:9470", "[::1]9470",
                    "127.0.0.1:port", "127.0.0.1:+9470"):
            rc, err = self.run_daemon("--metrics-listen", bad)
            self.assertNotEqual(rc, 0, bad)
            self.assertIn("metrics-listen", err, bad)

    def test_address_in_use(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            port = s.getsockname()[1]
            rc, err = self.run_daemon("--metrics-listen", "127.0.0.1:%d" % port)
            self.assertNotEqual(rc, 0)
            self.assertIn("Address already in use", err)
        finally:
            s.close()


@unittest.skipUnless(NO_HTTP, "built with libmicrohttpd")
class WithoutHttp(unittest.TestCase):
    def test_refused(self):
        with tempfile.TemporaryDirectory(prefix="gpured-test-") as d:
            sock = os.path.join(d, "s")
            p = subprocess.run([GPURED, "--socket", sock, "--backend", "cpu", "--threads", "1",
                                "--metrics-listen", "127.0.0.1:%d" % free_port()],
                               capture_output=True, timeout=30)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(b"built without libmicrohttpd", p.stderr)
            self.assertFalse(os.path.exists(sock))


if __name__ == "__main__":
    unittest.main(verbosity=2)
