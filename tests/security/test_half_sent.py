"""Half-sent requests: an attacker opens many connections, and on each
sends the header of an inline reduce and the first few KiB of its data,
and then nothing more, holding the sockets open. Whatever the daemon sets
aside for data that is announced but never comes, a victim of another uid
still has its inline sums answered, correctly and within the bound."""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, KiB, MiB, Monitor, SHMEM_NOISE_KIB,  # noqa: E402
                              SecurityCase, main, pack)

CONNECTIONS = 48
SENT = 4 * KiB


def half_sent_attack(ctx, path, sizes, n):
    """n connections, the i-th announcing sizes[i % len(sizes)] bytes of
    f32 data and sending the envelope and SENT bytes of it; held until
    stopped."""
    held = []
    for i in range(n):
        size = sizes[i % len(sizes)]
        msg = pack([0, i + 1, "reduce", [{"op": "sum", "dtype": "f32", "data": bytes(size)}]])
        head = len(msg) - size
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(msg[:head + SENT])
        held.append(s)
    ctx.report({"connections": n})
    ctx.wait_stop()
    return None


class HalfSent(SecurityCase):
    def attack(self, sizes):
        a = self.spawn(ATTACKER_UIDS[0], half_sent_attack, self.d.path, sizes, CONNECTIONS)
        self.ready(a)
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0, sizes=(KiB, MiB))
        # Descriptors: a connection's socket and the duplicate it is read
        # through, for each attacker connection and the victim's, and 8
        # for the daemon's own. RSS: staging (where the announced data
        # would land), touched as it is used, and 64 MiB of heap and
        # connection buffers (48 x 64 KiB read buffers among them).
        # Shmem: nothing here makes any.
        self.assertSurvived(victims, mon, fds_max=self.start.fds + 2 * (CONNECTIONS + 1) + 8,
                            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB,
                            shmem_growth_kib=SHMEM_NOISE_KIB)
        self.assertRecovered()

    def test_256k_announced(self):
        self.attack([256 * KiB])

    def test_1m_and_16m_announced(self):
        self.attack([MiB, 16 * MiB])


if __name__ == "__main__":
    main()
