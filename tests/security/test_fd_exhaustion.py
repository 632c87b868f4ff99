"""Descriptor exhaustion: the daemon starts with a soft RLIMIT_NOFILE of
1024 under a hard limit of 65536 (as under many service managers), and an
attacker opens as many connections as it can and on each parks 16
descriptors (two SCM_RIGHTS messages of 8) with the first bytes of a
request it never finishes. Another uid must still connect and be served
within the bound."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, KiB, Monitor, SHMEM_NOISE_KIB,  # noqa: E402
                              SecurityCase, main, pack, send_fds)

CONNECTIONS = 600
PER_CONNECTION = 16  # the most one connection may have waiting (util/fdpass.h)


def park_attack(ctx, path, n, per_conn):
    """Up to n connections, each with per_conn descriptors of /dev/null
    sent along with the first bytes of a map request; how many the daemon
    kept open, refused (a reply, busy) or closed is reported."""
    devnull = os.open("/dev/null", os.O_RDONLY)
    msg = pack([0, 1, "map", [{"bytes": 4096, "kind": "host"}]])
    held = []
    stopped_by = None
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(path)
        except OSError as e:
            stopped_by = "connect: %s" % e
            s.close()
            break
        try:
            left, k = per_conn, 0
            while left > 0:
                m = min(8, left)
                send_fds(s, msg[k:k + 1], [devnull] * m)
                left -= m
                k += 1
        except OSError:
            pass  # refused already: counted below
        held.append(s)
    os.close(devnull)
    time.sleep(0.3)
    kept = refused = closed = 0
    for s in held:
        s.setblocking(False)
        try:
            data = s.recv(4096)
        except BlockingIOError:
            kept += 1
            continue
        except OSError:
            closed += 1
            continue
        if data:
            refused += 1
        else:
            closed += 1
    ctx.report({"opened": len(held), "kept": kept, "refused": refused, "closed": closed,
                "stopped_by": stopped_by})
    ctx.wait_stop()
    return None


class FdExhaustion(SecurityCase):
    NOFILE = (1024, 65536)

    def test_parked_descriptors(self):
        need = 512 * (2 + PER_CONNECTION) + 256
        if self.d.nofile[1] < need:
            self.skipTest("the hard RLIMIT_NOFILE here is %d, below the %d this attack needs"
                          % (self.d.nofile[1], need))
        a = self.spawn(ATTACKER_UIDS[0], park_attack, self.d.path, CONNECTIONS, PER_CONNECTION)
        got = self.ready(a, timeout=60)
        with open("/proc/%d/limits" % self.d.pid) as f:
            limit = [line.split()[3:5] for line in f if line.startswith("Max open files")]
        sys.stderr.write("attacker: %r; the daemon's open-files limit (soft, hard): %s\n" % (
            got, limit))
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0)
        # Descriptors: each connection the attacker opened holds its
        # socket, the duplicate it is read through and at most
        # PER_CONNECTION waiting descriptors; the victim's 2 more, 8 for
        # the daemon's own. RSS: staging, touched as it is used, 64 MiB of
        # heap, and 128 KiB for each connection (a 64 KiB read buffer, the
        # parser, the request).
        self.assertSurvived(
            victims, mon, fds_max=self.start.fds + got["opened"] * (2 + PER_CONNECTION) + 2 + 8,
            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB + got["opened"] * 128,
            shmem_growth_kib=SHMEM_NOISE_KIB)
        self.assertRecovered()


if __name__ == "__main__":
    main()
