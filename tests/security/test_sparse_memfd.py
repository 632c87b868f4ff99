"""Sparse memfds: an attacker maps a memfd that is holes, 512 MiB
ftruncate'd and never written (or but one page of it), and keeps it after
it disconnects. Were the daemon to fault its pages in (MAP_POPULATE), it
would make 512 MiB of shared memory that outlives the mapping, charged to
nobody's limit, three times over. The host's Shmem must not grow, and a
victim of another uid is served meanwhile. Memfds whose pages exist
(written, or posix_fallocate) map and reduce as before; a huge-page memfd
gets an answer, not a crash."""

import math
import mmap
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, HARD_TIMEOUT_S, KiB, MiB, Health,  # noqa: E402
                              Monitor, RawClient, SecurityCase, f32_case, main, memfd)

SPARSE_BYTES = 512 * MiB
TIMES = 3
# The host's Shmem may grow by this much at most while the attack runs:
# a tenth of one sparse memfd, well above what the daemon and the victim
# make (nothing) and the noise of other processes on a test machine.
SHMEM_GROWTH_KIB = 64 * KiB


def sparse_attack(ctx, path, size, times):
    """times: map a memfd of size bytes that is holes but for at most a
    page (none, its first, its last), sealed against shrinking, and
    disconnect, keeping the memfd; the replies reported."""
    kept = []
    replies = []
    for i in range(times):
        fd = memfd(size)
        if i % 3 == 1:
            os.pwrite(fd, b"\1" * 4096, 0)
        elif i % 3 == 2:
            os.pwrite(fd, b"\1" * 4096, size - 4096)
        kept.append(fd)
        c = RawClient(path, timeout=HARD_TIMEOUT_S * 3)
        t0 = time.monotonic()
        resp = c.map_memfd(fd, size)
        dt = time.monotonic() - t0
        c.close()
        replies.append({"error": resp[2] if resp else "connection closed",
                        "result": resp[3] if resp else None, "seconds": dt})
    ctx.report({"replies": replies})
    ctx.wait_stop()
    return None


class SparseMemfd(SecurityCase):
    def test_sparse_memfds_mapped(self):
        a = self.spawn(ATTACKER_UIDS[0], sparse_attack, self.d.path, SPARSE_BYTES, TIMES)
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0)
        report = self.ready(a)
        # the attacker still holds its memfds: whatever pages they got are
        # still there
        for _ in range(5):
            mon.sample()
            time.sleep(0.02)
        problems = []
        for r in report["replies"]:
            if r["error"] is None:
                problems.append("a memfd of %d MiB that is holes was mapped: %r (%.3f s)" % (
                    SPARSE_BYTES // MiB, r["result"], r["seconds"]))
        # RSS: staging, touched as it is used, and 64 MiB of heap;
        # descriptors: the attacker's connection and the victim's, 2 each,
        # a memfd being checked, and 8 for the daemon's own.
        try:
            self.assertSurvived(victims, mon, fds_max=self.start.fds + 2 * 2 + 1 + 8,
                                rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB,
                                shmem_growth_kib=SHMEM_GROWTH_KIB)
        except AssertionError as e:
            problems.append(str(e))
        if problems:
            self.fail("\n".join(problems))
        self.assertRecovered()

    def map_and_sum(self, fd, size, want):
        c = RawClient(self.d.path)
        try:
            resp = c.map_memfd(fd, size)
            self.assertIsNotNone(resp)
            self.assertIsNone(resp[2], resp)
            rid = resp[3]["region"]
            resp = c.call_raw("reduce", [{"op": "sum", "dtype": "f32", "region": rid,
                                          "offset": 0, "count": size // 4}])
            self.assertIsNone(resp[2], resp)
            self.assertEqual(resp[3]["value"], want)
            self.assertEqual(resp[3]["count"], size // 4)
            self.assertEqual(c.call_raw("unmap", [{"region": rid}])[2:], [None, True])
        finally:
            c.close()

    def test_written_memfd_maps(self):
        size = 16 * MiB
        data, want = f32_case(size // 4, seed=3)
        fd = memfd(size, fill=data)
        try:
            self.map_and_sum(fd, size, want)
        finally:
            os.close(fd)
        self.assertRecovered()

    def test_written_through_mmap_maps(self):
        size = 8 * MiB + 4096
        fd = memfd(size)
        try:
            m = mmap.mmap(fd, size)
            a = np.frombuffer(m, dtype=np.float32)
            a[:] = np.arange(size // 4, dtype=np.float32) % 1000 - 500
            want = math.fsum(a.astype(np.float64).tolist())
            del a
            m.close()
            self.map_and_sum(fd, size, want)
        finally:
            os.close(fd)
        self.assertRecovered()

    def test_fallocated_memfd_maps(self):
        size = 16 * MiB
        fd = memfd(size, fill="zero")
        try:
            self.map_and_sum(fd, size, 0.0)
        finally:
            os.close(fd)
        self.assertRecovered()

    def test_hugetlb_memfd_answered(self):
        huge = 2 * MiB
        try:
            fd = memfd(2 * huge, flags=os.MFD_HUGETLB)
        except OSError as e:
            self.skipTest("no huge-page memfd here: %s" % e)
        try:
            # written where this host has huge pages to write into
            try:
                m = mmap.mmap(fd, 2 * huge)
                m[:] = bytes(2 * huge)
                m.close()
            except (OSError, ValueError):
                pass
            # a size that is not a multiple of the huge page
            nbytes = huge + 4096
            c = RawClient(self.d.path)
            try:
                resp = c.map_memfd(fd, nbytes)
                self.assertIsNotNone(resp, "the daemon closed the connection on a map")
                err, res = resp[2:]
                if err is None:
                    rid = res["region"]
                    resp = c.call_raw("reduce", [{"op": "sum", "dtype": "f32", "region": rid,
                                                  "offset": 0, "count": nbytes // 4}])
                    self.assertIsNotNone(resp)
                    self.assertTrue(resp[2] is not None or resp[3]["value"] == 0.0, resp)
                    self.assertEqual(c.call_raw("unmap", [{"region": rid}])[2:], [None, True])
                else:
                    self.assertIsInstance(err.get("code"), str, err)
                    self.assertTrue(err.get("message"), err)
                self.assertEqual(c.call_raw("ping")[2:], [None, "pong"])
            finally:
                c.close()
        finally:
            os.close(fd)
        self.assertTrue(Health(self.d).alive)
        self.assertRecovered()


if __name__ == "__main__":
    main()
