"""Users holding every limit: with --max-connections 64, two (or three)
attacker uids each open connections until the daemon refuses them, and
hold them; another uid must still connect and be served within the bound.
Likewise with --max-mapped-bytes-total 256M: two uids map filled memfds of
16 MiB until refused, and a third uid's 16 MiB map must succeed."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, HARD_TIMEOUT_S, KiB, MiB, Monitor,  # noqa: E402
                              RawClient, SHMEM_NOISE_KIB, SecurityCase, VICTIM_UID, main, memfd)

MAX_CONNECTIONS = 64
MAP_BYTES = 16 * MiB
MAX_MAPPED_TOTAL = 256 * MiB


def hog_connections(ctx, path, at_most):
    """Connections, each checked with a ping, until the daemon refuses one
    (busy, a close or a reset) or at_most are open; held until stopped."""
    held = []
    refusal = None
    while len(held) < at_most:
        try:
            c = RawClient(path, timeout=HARD_TIMEOUT_S)
            resp = c.call_raw("ping")
        except OSError as e:
            refusal = "connect: %s" % e
            break
        if resp is None or resp[2] is not None:
            refusal = resp[2] if resp else "closed"
            c.close()
            break
        held.append(c)
    ctx.report({"held": len(held), "refusal": refusal})
    ctx.wait_stop()
    return None


def hog_mappings(ctx, path, size, at_most):
    """On one connection, map filled memfds of size bytes until refused (or
    at_most); held until stopped."""
    c = RawClient(path, timeout=HARD_TIMEOUT_S)
    mapped = 0
    refusal = None
    block = bytes(range(256)) * (size // 256)
    while mapped < at_most:
        fd = memfd(size, fill=block)
        try:
            resp = c.map_memfd(fd, size)
        finally:
            os.close(fd)
        if resp is None or resp[2] is not None:
            refusal = resp[2] if resp else "closed"
            break
        mapped += 1
    ctx.report({"mapped": mapped, "refusal": refusal})
    ctx.wait_stop()
    return None


class TwoUsers(SecurityCase):
    DAEMON_ARGS = ("--max-connections", str(MAX_CONNECTIONS))

    def hold(self, attackers, victim_uid):
        got = []
        for uid in attackers:
            a = self.spawn(uid, hog_connections, self.d.path, MAX_CONNECTIONS + 16)
            got.append(self.ready(a))
        sys.stderr.write("attackers: %r\n" % (got,))
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0, uids=(victim_uid,))
        # Descriptors: each connection open holds 2 (its socket and the
        # duplicate it is read through), and there are at most the limit
        # of them and the ones being refused; 8 for the daemon's own.
        # RSS: staging, 64 MiB of heap and 128 KiB a connection.
        self.assertSurvived(victims, mon, fds_max=self.start.fds + 2 * (MAX_CONNECTIONS + 8) + 8,
                            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB
                            + MAX_CONNECTIONS * 128,
                            shmem_growth_kib=SHMEM_NOISE_KIB)
        self.assertRecovered()

    def test_two_users_hold_connections(self):
        self.hold(ATTACKER_UIDS[:2], VICTIM_UID)

    def test_three_users_hold_connections(self):
        self.hold(ATTACKER_UIDS[:3], VICTIM_UID)


class TwoUsersMapped(SecurityCase):
    DAEMON_ARGS = ("--max-mapped-bytes-total", "256M")

    def test_two_users_hold_mapped_bytes(self):
        got = []
        for uid in ATTACKER_UIDS[:2]:
            a = self.spawn(uid, hog_mappings, self.d.path, MAP_BYTES,
                           MAX_MAPPED_TOTAL // MAP_BYTES + 1)
            got.append(self.ready(a))
        sys.stderr.write("attackers: %r\n" % (got,))
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=2.0, map_bytes=MAP_BYTES, sizes=())
        # Shmem: what the daemon may map in all (256 MiB, the attackers'
        # memfds, whose pages live as long as it maps them), the victim's
        # region, and 64 MiB of noise. RSS: staging, 64 MiB of heap, and
        # the mapped bytes, which count in the RSS once read. Descriptors:
        # 3 connections of 2, a memfd in a map request, 8 of the daemon's.
        self.assertSurvived(victims, mon, fds_max=self.start.fds + 2 * 3 + 1 + 8,
                            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB
                            + (MAX_MAPPED_TOTAL + MAP_BYTES) // KiB,
                            shmem_growth_kib=(MAX_MAPPED_TOTAL + MAP_BYTES) // KiB + 64 * KiB)
        self.assertRecovered()


if __name__ == "__main__":
    main()
