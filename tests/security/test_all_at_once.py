"""Every attack of this folder at once, from two attacker uids: lingering
sockets, half-sent requests, slow and fast streams (the first uid);
sparse memfds, parked descriptors on as many connections as the daemon
lets it open, and mapped bytes up to the daemon's limit (the second). A
victim of a third uid is served within the bound, the daemon stays alive
and within its bounds, and once the attackers are gone its descriptors
come back near where they started."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, HARD_TIMEOUT_S, SANITIZED, ChildFailed,  # noqa: E402
                              KiB, MiB, Monitor, SecurityCase, main)
from test_fd_exhaustion import PER_CONNECTION, park_attack  # noqa: E402
from test_fd_linger import linger_attack  # noqa: E402
from test_half_sent import half_sent_attack  # noqa: E402
from test_inflight import slow_stream_attack, stream_attack  # noqa: E402
from test_sparse_memfd import SPARSE_BYTES, sparse_attack  # noqa: E402
from test_two_users import hog_mappings  # noqa: E402

MAX_CONNECTIONS = 256
MAX_MAPPED_TOTAL = 256 * MiB
MAP_BYTES = 16 * MiB


class AllAtOnce(SecurityCase):
    DAEMON_ARGS = ("--max-connections", str(MAX_CONNECTIONS),
                   "--max-mapped-bytes-total", "256M")
    NOFILE = (1024, 65536)

    def test_all_attacks_at_once(self):
        need = MAX_CONNECTIONS * (2 + PER_CONNECTION) + 256
        if self.d.nofile[1] < need:
            self.skipTest("the hard RLIMIT_NOFILE here is %d, below the %d this test needs"
                          % (self.d.nofile[1], need))
        a, b = ATTACKER_UIDS[:2]
        path = self.d.path
        attackers = [
            self.spawn(a, linger_attack, path, 20),
            self.spawn(a, half_sent_attack, path, [256 * KiB, MiB, 16 * MiB], 48),
            self.spawn(a, slow_stream_attack, path, 16, 64 * MiB),
            self.spawn(a, stream_attack, path, 8, 64 * MiB),
            self.spawn(b, sparse_attack, path, SPARSE_BYTES, 3),
            self.spawn(b, hog_mappings, path, MAP_BYTES, MAX_MAPPED_TOTAL // MAP_BYTES + 1),
            self.spawn(b, park_attack, path, 600, PER_CONNECTION),
        ]
        # Each is set up, or the daemon is not answering it: either way
        # the victim goes next.
        end = time.monotonic() + (20 if SANITIZED else 10)
        got = {}
        mon = Monitor(self.d)
        while time.monotonic() < end and len(got) < len(attackers):
            mon.sample()
            for ch in attackers:
                if ch.name not in got:
                    try:
                        v = ch.poll_msg()
                    except ChildFailed as e:
                        v = {"failed": str(e)[-300:]}
                    if v is not None:
                        got[ch.name] = v
            time.sleep(0.05)
        sys.stderr.write("attackers: %r\n" % (got,))
        victims = self.run_victims(mon, duration=3.0, sizes=(KiB, MiB), map_bytes=MAP_BYTES)
        for _ in range(5):
            mon.sample()
            time.sleep(0.02)
        # Descriptors: 2 a connection, of at most MAX_CONNECTIONS and
        # the ones being refused, PER_CONNECTION parked on each, the 20
        # lingering sockets while they close, and 8 of the daemon's own.
        # RSS: staging, 64 MiB of heap, 128 KiB a connection, and what the
        # daemon may map. Shmem: what it may map (the attackers' and the
        # victim's memfds) and 64 MiB; the sparse memfds must add nothing.
        conns = MAX_CONNECTIONS + 16
        self.assertSurvived(
            victims, mon,
            fds_max=self.start.fds + conns * (2 + PER_CONNECTION) + 20 + 8,
            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB + conns * 128
            + (MAX_MAPPED_TOTAL + MAP_BYTES) // KiB,
            shmem_growth_kib=(MAX_MAPPED_TOTAL + MAP_BYTES) // KiB + 64 * KiB)
        self.assertRecovered(timeout=30 if SANITIZED else HARD_TIMEOUT_S + 5)


if __name__ == "__main__":
    main()
