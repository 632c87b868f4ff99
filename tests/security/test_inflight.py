"""Staging and bytes in flight: one uid streams large inline reduces (64 MiB
each) on many connections, so that its data hold every staging slot the
daemon will give it: back to back on 8 connections as fast as it can send
them, and on 16 connections slowly but steadily (bytes keep coming, so no
timeout for idle requests applies, and each connection keeps a chunk half
filled). A victim of another uid must still have its 1 KiB and 1 MiB
inline sums answered, correctly and within the bound."""

import os
import socket
import sys
import threading
import time

import msgpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from security_harness import (ATTACKER_UIDS, KiB, MiB, Monitor, SHMEM_NOISE_KIB,  # noqa: E402
                              SecurityCase, main, pack)

CONNECTIONS = 8
REQUEST_BYTES = 64 * MiB


def stream_attack(ctx, path, n, size):
    """n connections, each sending inline f32 sums of size bytes back to
    back from one thread and reading the replies from another, until
    stopped; the requests sent and answered are reported at the end."""
    msg = pack([0, 1, "reduce", [{"op": "sum", "dtype": "f32", "data": bytes(size)}]])
    stop = threading.Event()
    sent = [0] * n
    answered = [0] * n
    errors = []
    socks = []

    def sender(i, s):
        try:
            while not stop.is_set():
                s.sendall(msg)
                sent[i] += 1
        except OSError as e:
            if not stop.is_set():
                errors.append("send: %s" % e)

    def reader(i, s):
        u = msgpack.Unpacker(raw=False)
        try:
            while True:
                data = s.recv(1 << 16)
                if not data:
                    break
                u.feed(data)
                for resp in u:
                    if resp[2] is not None:
                        errors.append(resp[2])
                    answered[i] += 1
        except OSError as e:
            if not stop.is_set():
                errors.append("recv: %s" % e)

    threads = []
    for i in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        socks.append(s)
        for fn in (sender, reader):
            t = threading.Thread(target=fn, args=(i, s), daemon=True)
            t.start()
            threads.append(t)
    # under way: the first requests are answered
    end = time.monotonic() + 20
    while sum(answered) < n and time.monotonic() < end and not errors:
        time.sleep(0.01)
    ctx.report({"answered": sum(answered), "errors": errors[:3]})
    ctx.wait_stop()
    stop.set()
    for s in socks:
        s.shutdown(socket.SHUT_RDWR)
    for t in threads:
        t.join(5)
    for s in socks:
        s.close()
    return {"sent": sum(sent), "answered": sum(answered), "errors": errors[:3]}


SLOW_CONNECTIONS = 16
SLOW_FIRST = 16 * KiB
SLOW_STEP = 16 * KiB
SLOW_EVERY_S = 0.05


def slow_stream_attack(ctx, path, n, size):
    """n connections, each sending an inline f32 sum of size bytes: the
    envelope and SLOW_FIRST bytes at once, then SLOW_STEP bytes every
    SLOW_EVERY_S seconds (what its socket takes), until stopped."""
    msg = pack([0, 1, "reduce", [{"op": "sum", "dtype": "f32", "data": bytes(size)}]])
    first = len(msg) - size + SLOW_FIRST
    socks, pos = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.setblocking(False)
        socks.append(s)
        pos.append(s.send(msg[:first]))
    ctx.report({"connections": n})
    while not ctx.stopped(SLOW_EVERY_S):
        for i, s in enumerate(socks):
            end = min(len(msg), pos[i] + SLOW_STEP)
            try:
                pos[i] += s.send(msg[pos[i]:end])
            except BlockingIOError:
                pass
    return {"sent": sum(pos)}


class Inflight(SecurityCase):
    def test_slow_streams_on_sixteen_connections(self):
        a = self.spawn(ATTACKER_UIDS[0], slow_stream_attack, self.d.path, SLOW_CONNECTIONS,
                       REQUEST_BYTES)
        self.ready(a, timeout=30)
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0, sizes=(KiB, MiB))
        # as below
        self.assertSurvived(victims, mon,
                            fds_max=self.start.fds + 2 * (SLOW_CONNECTIONS + 1) + 8,
                            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB,
                            shmem_growth_kib=SHMEM_NOISE_KIB)
        self.assertRecovered()

    def test_streams_on_eight_connections(self):
        a = self.spawn(ATTACKER_UIDS[0], stream_attack, self.d.path, CONNECTIONS, REQUEST_BYTES)
        got = self.ready(a, timeout=30)
        mon = Monitor(self.d)
        victims = self.run_victims(mon, duration=3.0, sizes=(KiB, MiB))
        res = a.join(30)
        sys.stderr.write("attacker: %r, then %r\n" % (got, res))
        # Descriptors: 2 a connection (its socket, the duplicate it is
        # read through), the attacker's and the victim's, 8 of the
        # daemon's own. RSS: staging, where the streams land, and 64 MiB
        # of heap and connection buffers.
        self.assertSurvived(victims, mon, fds_max=self.start.fds + 2 * (CONNECTIONS + 1) + 8,
                            rss_growth_kib=self.limits["staging_bytes"] // KiB + 64 * KiB,
                            shmem_growth_kib=SHMEM_NOISE_KIB)
        self.assertRecovered()


if __name__ == "__main__":
    main()
