"""The CPU workers' nice value (--worker-nice), read from /proc per thread
(Linux's nice is a thread's): 10 above the daemon's by default, the value
given otherwise, 0 leaves them at the daemon's; the daemon's own threads
keep its priority; values outside 0..19 are refused at start."""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import GPURED, Client, Daemon  # noqa: E402


def thread_nices(pid):
    """{thread name: [nice, ...]} of process pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            stat = f.read()
        # comm is in parentheses and may hold spaces; nice is field 19
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out.setdefault(name, []).append(int(fields[16]))
    return out


class WorkerNice(unittest.TestCase):
    def nices(self, *args):
        d = Daemon("--threads", "3", *args)
        try:
            c = Client(d.path)
            # the workers are up and have run (a job larger than the
            # inline bound goes to them)
            err, res = c.reduce("sum", "i32", bytes(4 << 20))
            self.assertIsNone(err)
            self.assertEqual(res["value"], 0)
            c.close()
            return thread_nices(d.proc.pid), os.getpriority(os.PRIO_PROCESS, 0)
        finally:
            self.assertEqual(d.stop(), 0)

    def workers(self, nices):
        w = [v for name, vs in nices.items() if name.startswith("gpured-cpu") for v in vs]
        self.assertEqual(len(w), 3, nices)
        return w

    def test_default_ten(self):
        nices, own = self.nices()
        self.assertEqual(self.workers(nices), [min(own + 10, 19)] * 3)
        # the loop thread (the process's own name) at the daemon's
        self.assertIn(own, nices["gpured"])

    def test_given(self):
        nices, own = self.nices("--worker-nice", "3")
        self.assertEqual(self.workers(nices), [min(own + 3, 19)] * 3)

    def test_zero_is_the_daemons(self):
        nices, own = self.nices("--worker-nice", "0")
        self.assertEqual(self.workers(nices), [own] * 3)

    def test_out_of_range(self):
        for bad in ("20", "-1", "x"):
            p = subprocess.run([GPURED, "--socket", "/nonexistent/s", "--worker-nice", bad],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            self.assertIn("worker-nice", p.stderr)


if __name__ == "__main__":
    unittest.main()
