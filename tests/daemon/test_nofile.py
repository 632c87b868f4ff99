"""The daemon raises its soft limit on open files to the hard one at start
(daemon/main.c): started with 1024 soft and 65536 hard, /proc/PID/limits
shows 65536 for both. Where this test may not raise its own hard limit
to 65536 (no CAP_SYS_RESOURCE) it uses the hard limit it has. With both
equal the daemon leaves them, and it starts and answers either way."""

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, GPURED, Client  # noqa: E402


def limits(soft, hard):
    def preexec():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return preexec


def max_open_files(pid):
    """(soft, hard) of Max open files in /proc/PID/limits."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                fields = line.split()
                return int(fields[3]), int(fields[4])
    raise AssertionError("no Max open files in /proc/%d/limits" % pid)


class NoFile(unittest.TestCase):
    def run_with(self, soft, hard, *args):
        """Start the daemon under soft/hard, wait until it answers, return
        what /proc says of it and its log."""
        with tempfile.TemporaryDirectory(prefix="gpured-test-") as d:
            path = os.path.join(d, "gpured.sock")
            log = open(os.path.join(d, "stderr"), "w+")
            env = dict(os.environ)
            env.pop("NOTIFY_SOCKET", None)
            env.pop("LISTEN_FDS", None)
            proc = subprocess.Popen([GPURED, "--socket", path, "--backend", BACKEND, *args],
                                    stderr=log, env=env, preexec_fn=limits(soft, hard))
            try:
                end = time.monotonic() + 10
                while True:
                    self.assertIsNone(proc.poll(), "gpured exited")
                    try:
                        c = Client(path)
                        err, info = c.call("info")
                        c.close()
                        self.assertIsNone(err)
                        break
                    except OSError:
                        self.assertLess(time.monotonic(), end, "gpured did not start")
                        time.sleep(0.02)
                got = max_open_files(proc.pid)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    rc = proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    raise
                log.seek(0)
                text = log.read()
                log.close()
            self.assertEqual(rc, 0, text)
            return got, text

    def hard_limit(self):
        """65536, or the hard limit this process has where it may not set that."""
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        p = subprocess.run([sys.executable, "-c",
                            "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, "
                            "(1024, 65536))"], capture_output=True)
        if p.returncode == 0:
            return 65536
        if hard <= 1024:
            self.skipTest("hard limit %d, and 65536 is not allowed here" % hard)
        return hard

    def test_raised_to_hard(self):
        hard = self.hard_limit()
        got, log = self.run_with(1024, hard)
        self.assertEqual(got, (hard, hard), log)
        self.assertNotIn("cannot raise the limit on open files", log)

    def test_already_at_hard(self):
        got, log = self.run_with(4096, 4096)
        self.assertEqual(got, (4096, 4096), log)
        self.assertNotIn("cannot raise the limit on open files", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
