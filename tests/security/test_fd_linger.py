"""Descriptors whose close blocks: an attacker passes the daemon TCP sockets
(SCM_RIGHTS) that linger, SO_LINGER (1, 10) with a full send buffer toward
a peer that never reads, so that the last close(2) of each waits up to
10 s for the peer. The daemon may close them, but never where it keeps
other users waiting: a victim of another uid is answered within the bound
throughout."""

import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, KiB, Monitor, SHMEM_NOISE_KIB,  # noqa: E402
                              SecurityCase, main, pack, send_fds)

SOCKETS = 20
LINGER_S = 10


def lingering_socket(listener, accept):
    """A TCP socket to listener whose send buffer is full and whose close
    lingers LINGER_S seconds; the peer's end (accepted, or left in the
    backlog) never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.connect(listener.getsockname())
    peer = listener.accept()[0] if accept else None
    s.setblocking(False)
    block = b"\0" * (64 * KiB)
    sent = 0
    try:
        while True:
            sent += s.send(block)
    except BlockingIOError:
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, LINGER_S))
    return s, peer, sent


def linger_attack(ctx, path, n):
    """n connections to the daemon, each carrying one lingering socket with
    a complete ping, a complete map, or the first bytes of a request never
    finished; our copies closed, everything else held until stopped."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind(("127.0.0.1", 0))
    listener.listen(n + 8)
    held = [listener]
    sent_total = 0
    for i in range(n):
        s, peer, sent = lingering_socket(listener, accept=i % 2 == 0)
        sent_total += sent
        if peer is not None:
            held.append(peer)
        variant = i % 3
        if variant == 0:
            data = pack([0, i + 1, "ping", []])
        elif variant == 1:
            data = pack([0, i + 1, "map", [{"bytes": 4096, "kind": "host"}]])
        else:
            data = pack([0, i + 1, "reduce", [{"op": "sum", "dtype": "f32",
                                                "data": bytes(4096)}]])[:40]
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.connect(path)
        send_fds(u, data, [s.fileno()])
        s.close()
        held.append(u)
    ctx.report({"sockets": n, "unsent_bytes": sent_total})
    ctx.wait_stop()
    return None


class FdLinger(SecurityCase):
    def test_lingering_sockets_passed(self):
        a = self.spawn(ATTACKER_UIDS[0], linger_attack, self.d.path, SOCKETS)
        self.ready(a)
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0)
        # Descriptors: each attacker connection holds its socket and the
        # duplicate it is read through, the victim's likewise, and a
        # passed socket may stay open while its close lingers (on another
        # thread, say): 3 a connection; 8 for the daemon's own (a thread's
        # eventfd...). The victim connects anew every round, hundreds of
        # times a second: the sockets of its connections that are gone
        # must not pile up behind the lingering closes.
        # RSS: staging, touched as it is used, and 64 MiB for heap and
        # connection buffers. Shmem: nothing here makes any.
        self.assertSurvived(victims, mon, fds_max=self.start.fds + 3 * (SOCKETS + 1) + 8,
                            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB,
                            shmem_growth_kib=SHMEM_NOISE_KIB)
        self.assertRecovered()


if __name__ == "__main__":
    main()
