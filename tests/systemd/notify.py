#!/usr/bin/env python3
"""The sd_notify protocol as systemd sees it from a Type=notify service
with WatchdogSec=: this test plays the manager. It listens on its own
AF_UNIX datagram NOTIFY_SOCKET, starts gpured with WATCHDOG_USEC=200000
(WATCHDOG_PID unset: meant for whoever reads it) and checks that
 - READY=1 arrives, and at that moment the socket already answers a ping;
 - STATUS= lines arrive, and are refreshed;
 - WATCHDOG=1 arrives at about half the interval (100 ms) and keeps
   coming;
 - SIGTERM brings STOPPING=1, then exit status 0.

usage: notify.py GPURED [GPUREDCTL]
GPURED_TEST_BACKEND picks the backend (default cpu). On a GPU host,
with GPURED_CUDA_FAULT making launches fail, the watchdog must keep
coming while the devices go out of service and the CPU takes over.
"""

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# No __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grtest  # noqa: E402
from grtest import fail  # noqa: E402

WATCHDOG_USEC = 200000


class Manager:
    def __init__(self, tmp):
        self.path = os.path.join(tmp, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.events = []  # (monotonic time, "KEY=value")

    def recv(self, timeout):
        """Wait up to timeout for one datagram; its assignments, or []."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return []
        now = time.monotonic()
        lines = [ln for ln in data.decode("utf-8", "replace").split("\n") if ln]
        for ln in lines:
            self.events.append((now, ln))
        return lines

    def drain(self):
        self.sock.setblocking(False)
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            now = time.monotonic()
            for ln in data.decode("utf-8", "replace").split("\n"):
                if ln:
                    self.events.append((now, ln))

    def seen(self, key):
        return [t for t, ln in self.events if ln.split("=", 1)[0] == key]


def main():
    if len(sys.argv) < 2:
        fail("usage: notify.py GPURED [GPUREDCTL]")
    gpured = sys.argv[1]
    gpuredctl = sys.argv[2] if len(sys.argv) > 2 else None

    tmp = tempfile.mkdtemp(prefix="gpured-notify-")
    proc = None
    try:
        mgr = Manager(tmp)
        sock_path = os.path.join(tmp, "gpured.sock")
        env = grtest.clean_env(tmp)
        env["NOTIFY_SOCKET"] = mgr.path
        env["WATCHDOG_USEC"] = str(WATCHDOG_USEC)
        log_path = os.path.join(tmp, "gpured.log")
        log = open(log_path, "w")
        backend = os.environ.get("GPURED_TEST_BACKEND") or "cpu"
        proc = subprocess.Popen([gpured, "--backend", backend, "--socket", sock_path],
                                stdout=log, stderr=subprocess.STDOUT, env=env)

        def daemon_log():
            return "\n--- daemon log:\n" + grtest.tail(log_path)

        # READY=1, and the socket answers at that very moment.
        deadline = time.monotonic() + 60
        while not mgr.seen("READY"):
            if proc.poll() is not None:
                fail("exited %d before READY=1%s" % (proc.returncode, daemon_log()))
            if time.monotonic() > deadline:
                fail("no READY=1 within 60 s%s" % daemon_log())
            mgr.recv(0.2)
        err = grtest.raw_ping(sock_path)
        if err:
            fail("READY=1 came, but the socket does not answer yet: %s%s" % (err, daemon_log()))
        err = grtest.ctl_ping(gpuredctl, sock_path)
        if err:
            fail(err + daemon_log())
        ready_at = mgr.seen("READY")[0]
        print("ok: READY=1, and the socket answered a ping right then")

        # Watch: STATUS= must be refreshed ("every few seconds"), and at
        # least 2 s of watchdog keep-alives are timed.
        deadline = time.monotonic() + 20
        while len(mgr.seen("STATUS")) < 2 or time.monotonic() < ready_at + 2.0:
            if proc.poll() is not None:
                fail("exited %d while running%s" % (proc.returncode, daemon_log()))
            if time.monotonic() > deadline:
                break
            mgr.recv(deadline - time.monotonic())
        statuses = [ln for _, ln in mgr.events if ln.startswith("STATUS=")]
        if not statuses:
            fail("no STATUS= at all%s" % daemon_log())
        if len(statuses) < 2:
            fail("STATUS= sent once (%r) and not refreshed within 20 s" % statuses[0])
        if any(len(s) <= len("STATUS=") for s in statuses):
            fail("an empty STATUS=")
        print("ok: %d STATUS= lines, e.g. %r" % (len(statuses), statuses[-1]))

        wd = mgr.seen("WATCHDOG")
        if len(wd) < 5:
            fail("only %d WATCHDOG=1 in %.1f s with WATCHDOG_USEC=%d%s"
                 % (len(wd), time.monotonic() - ready_at, WATCHDOG_USEC, daemon_log()))
        gaps = [(b - a) * 1e3 for a, b in zip(wd, wd[1:])]
        median = statistics.median(gaps)
        half = WATCHDOG_USEC / 2e3
        if not 0.5 * half <= median <= 1.5 * half:
            fail("WATCHDOG=1 every %.0f ms (median of %d), expected about %.0f ms"
                 % (median, len(gaps), half))
        # Keep-alives must also run up to the present: none missing now.
        since_last = (time.monotonic() - wd[-1]) * 1e3
        worst = max(gaps + [since_last])
        # The manager kills at one interval (200 ms). The bound here is two:
        # on a loaded two-core machine this test itself can be descheduled
        # for a couple of hundred milliseconds (seen: 272 ms); the median
        # above already pins the cadence, this catches pings that stop.
        if worst >= 2 * WATCHDOG_USEC / 1e3:
            fail("a %.0f ms gap between WATCHDOG=1 (interval %d ms)"
                 % (worst, WATCHDOG_USEC // 1000))
        if worst >= WATCHDOG_USEC / 1e3:
            print("note: a %.0f ms gap, over the interval; the machine is loaded" % worst)
        print("ok: %d WATCHDOG=1, every %.0f ms (median), longest gap %.0f ms"
              % (len(wd), median, worst))

        # SIGTERM: STOPPING=1, then exit 0.
        n_before = len(mgr.events)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            mgr.recv(0.1)
        if proc.poll() is None:
            fail("no exit within 15 s of SIGTERM%s" % daemon_log())
        mgr.drain()
        after = [ln for _, ln in mgr.events[n_before:]]
        if "STOPPING=1" not in after:
            fail("no STOPPING=1 after SIGTERM (got %r)%s" % (after[-10:], daemon_log()))
        if proc.returncode != 0:
            fail("exit status %d after SIGTERM%s" % (proc.returncode, daemon_log()))
        print("ok: SIGTERM -> STOPPING=1, exit 0")
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


main()
