"""The soak's clients (soak.py): each kind of client a worker runs over and
over against the daemon, checking every well-formed answer against the
reference and recording what it did in the Soak's books."""

import mmap
import os
import random
import socket
import struct
import threading
import time

from malformed import MALFORMED
from wire import DTYPES, KiB, MiB, OPS, POOL, Conn, memfd, pack, reduce_header, reduce_msg


class Clients:
    def __init__(self, soak, path):
        self.s = soak
        self.path = path
        self.chunk_bytes = 4 * MiB     # the daemon's, once prime() has asked

    def conn(self, timeout=120):
        return Conn(self.path, timeout)

    def pick_small(self, rng, dtype=None, op=None):
        dtype = dtype or rng.choice(list(DTYPES))
        op = op or rng.choice(OPS)
        pool = self.s.pools[dtype]
        count = rng.randint(KiB, 64 * KiB) // pool.size
        start = rng.randrange(POOL)
        return dtype, op, start, count

    def small_payload(self, rng, dtype, start, count):
        """(data, nan): bin most of the time, a msgpack array sometimes, and
        now and then a NaN in a float request."""
        pool = self.s.pools[dtype]
        if pool.is_float and rng.random() < 0.02:
            raw = bytearray(pool.bytes(start, count))
            i = rng.randrange(count)
            raw[i * pool.size:(i + 1) * pool.size] = struct.pack("<" + pool.code, float("nan"))
            return bytes(raw), True
        if count <= 4096 and rng.random() < 0.1:
            return pool.elements(start, count), False
        return pool.bytes(start, count), False

    def small(self, rng):
        """Small requests one at a time, every op and dtype in turn."""
        c = self.conn()
        try:
            combos = [(d, o) for d in DTYPES for o in OPS]
            rng.shuffle(combos)
            for dtype, op in combos * 4:
                if self.s.stop.is_set():
                    break
                dtype, op, start, count = self.pick_small(rng, dtype, op)
                data, nan = self.small_payload(rng, dtype, start, count)
                msgid = c.next_id()
                c.send(reduce_msg(msgid, op, dtype, data))
                resp = c.recv()
                if resp is None or resp[1] != msgid:
                    raise ConnectionError("small: reply %r to msgid %d" % (resp, msgid))
                self.s.check_reduce("small", (dtype, op, start, count), resp, dtype, op, start, count, nan)
        finally:
            c.close()

    def ops(self, rng):
        """argmin and argmax, moments, segments (offsets) and cumsum on
        small data (one cumsum tile at most) one request at a time, each
        against its reference, to the bit."""
        c = self.conn()
        try:
            for _ in range(8):
                if self.s.stop.is_set():
                    break
                dtype = rng.choice(list(DTYPES))
                pool = self.s.pools[dtype]
                count = rng.randint(1, 4096)
                start = rng.randrange(POOL)
                xs = pool.elements(start, count)
                data = pool.bytes(start, count)
                kind = rng.choice(("argm", "moments", "segments", "cumsum"))
                params = {"op": None, "dtype": dtype}
                if kind == "argm":
                    params["op"] = rng.choice(("argmin", "argmax"))
                elif kind == "moments":
                    params["op"] = "moments"
                    params["ddof"] = rng.choice((0, 0, 1)) if count > 1 else 0
                elif kind == "segments":
                    params["op"] = rng.choice(("sum", "min", "max", "argmin", "moments"))
                    cuts = sorted(rng.randint(0, count) for _ in range(rng.randint(0, 40)))
                    offs = [0] + cuts + [count]
                    params["offsets"] = struct.pack("<%dQ" % len(offs), *offs)
                else:
                    params["op"] = "cumsum"
                params["data"] = data
                resp = c.call("reduce", [params])
                desc = (kind, params["op"], dtype, start, count, params.get("ddof"))
                self.s.check_op(kind, desc, resp, pool, params, xs)
        finally:
            c.close()

    def pipelined(self, rng):
        """Bursts of small requests in one write, answers matched by msgid."""
        c = self.conn()
        try:
            for _ in range(4):
                if self.s.stop.is_set():
                    break
                want = {}
                out = []
                for _ in range(rng.randint(8, 128)):
                    dtype, op, start, count = self.pick_small(rng)
                    data, nan = self.small_payload(rng, dtype, start, count)
                    msgid = c.next_id()
                    want[msgid] = (dtype, op, start, count, nan)
                    out.append(reduce_msg(msgid, op, dtype, data))
                c.send(b"".join(out))
                while want:
                    resp = c.recv()
                    if resp is None or resp[1] not in want:
                        raise ConnectionError("pipelined: reply %r" % (resp,))
                    dtype, op, start, count, nan = want.pop(resp[1])
                    self.s.check_reduce("small_pipelined", (dtype, op, start, count), resp,
                                        dtype, op, start, count, nan)
        finally:
            c.close()

    def large(self, rng):
        """4-64 MiB requests over the socket, one or two at a time."""
        c = self.conn(timeout=300)
        try:
            for _ in range(rng.randint(1, 3)):
                if self.s.stop.is_set():
                    break
                want = {}
                for _ in range(1 if rng.random() < 0.7 else 2):
                    dtype, op = rng.choice(list(DTYPES)), rng.choice(OPS)
                    pool = self.s.pools[dtype]
                    count = rng.randint(4 * MiB, 64 * MiB) // pool.size
                    start = rng.randrange(POOL)
                    want[self.send_large(c, dtype, op, start, count)] = (dtype, op, start, count)
                while want:
                    resp = c.recv()
                    if resp is None or resp[1] not in want:
                        raise ConnectionError("large: reply %r" % (resp,))
                    dtype, op, start, count = want.pop(resp[1])
                    self.s.check_reduce("large", (dtype, op, start, count), resp, dtype, op, start, count)
        finally:
            c.close()

    def send_large(self, c, dtype, op, start, count):
        pool = self.s.pools[dtype]
        msgid = c.next_id()
        c.send(reduce_header(msgid, op, dtype, count * pool.size))
        # the pool a period at a time, never the whole payload in memory
        head = POOL - start if count > POOL - start else count
        c.send(pool.raw[start * pool.size:(start + head) * pool.size])
        left = count - head
        while left >= POOL:
            c.send(pool.raw)
            left -= POOL
        c.send(pool.raw[:left * pool.size])
        return msgid

    def prime(self):
        """Touch every staging slot before the baseline sample, so that the
        daemon's memory is warm: more connections than slots, each holding
        a slot with most of a chunk of a larger request, then finishing it."""
        c = self.conn()
        try:
            lim = c.call("info")[3]["limits"]
        finally:
            c.close()
        chunk = lim["chunk_bytes"]
        self.chunk_bytes = chunk
        n = min(64, lim["staging_bytes"] // chunk + 2)

        def one(i):
            try:
                self.s.as_client()
                c = self.conn(timeout=300)
                try:
                    for dtype in ("f64", "u32"):
                        pool = self.s.pools[dtype]
                        count = 2 * chunk // pool.size
                        first = (chunk - 64 * KiB) // pool.size
                        msgid = c.next_id()
                        c.send(reduce_header(msgid, "sum", dtype, count * pool.size))
                        c.send(pool.bytes(i, first))
                        time.sleep(1.5)
                        c.send(pool.bytes(i + first, count - first))
                        resp = c.recv()
                        if resp is None or resp[1] != msgid:
                            raise ConnectionError("prime: reply %r" % (resp,))
                        self.s.check_reduce("large", (dtype, "sum", i, count), resp, dtype, "sum", i, count)
                finally:
                    c.close()
            except Exception as e:  # noqa: BLE001
                self.s.record_unexpected("prime: %r" % (e,))
        def burst(i):
            # small requests go to the daemon's shared batches: fill those too
            rng = random.Random(i)
            try:
                self.s.as_client()
                c = self.conn(timeout=300)
                try:
                    want, out = {}, []
                    for _ in range(256):
                        dtype = rng.choice(list(DTYPES))
                        count = (lim["small_max_bytes"] - 64) // self.s.pools[dtype].size
                        start = rng.randrange(POOL)
                        msgid = c.next_id()
                        want[msgid] = (dtype, start, count)
                        out.append(reduce_msg(msgid, "max", dtype, self.s.pools[dtype].bytes(start, count)))
                    c.send(b"".join(out))
                    while want:
                        resp = c.recv()
                        if resp is None or resp[1] not in want:
                            raise ConnectionError("prime: reply %r" % (resp,))
                        dtype, start, count = want.pop(resp[1])
                        self.s.check_reduce("small_pipelined", (dtype, "max", start, count), resp,
                                            dtype, "max", start, count)
                finally:
                    c.close()
            except Exception as e:  # noqa: BLE001
                self.s.record_unexpected("prime: %r" % (e,))
        for fn in (one, burst):
            ts = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        return n, 2 * chunk

    def shm(self, rng):
        """Map sealed memfds, reduce ranges of them in place (some pipelined),
        rewrite them between requests, unmap; churn of map/unmap; some
        regions left for the disconnect to release."""
        c = self.conn()
        maps = []
        try:
            for _ in range(rng.randint(1, 4)):
                if self.s.stop.is_set():
                    break
                if rng.random() < 0.3:
                    self.churn(c, rng)
                    continue
                dtype = rng.choice(list(DTYPES))
                pool = self.s.pools[dtype]
                n = rng.randint(16 * KiB, 8 * MiB) // pool.size
                off0 = rng.randrange(16)
                size = off0 + n * pool.size + rng.randrange(9)
                fd = memfd(size)
                try:
                    m = mmap.mmap(fd, size)
                    maps.append(m)
                    base = rng.randrange(POOL)
                    m[off0:off0 + n * pool.size] = pool.bytes(base, n)
                    resp = c.call("map", [{"bytes": size}], fds=[fd])
                finally:
                    os.close(fd)
                self.s.count("map")
                if resp[2] is not None or resp[3].get("bytes") != size:
                    self.s.record_unexpected("map %d bytes: %r" % (size, resp))
                    continue
                region = resp[3]["region"]
                for _ in range(rng.randint(1, 4)):
                    want = {}
                    out = []
                    for _ in range(rng.randint(1, 16)):
                        op = rng.choice(OPS)
                        a = rng.randrange(n + 1)
                        count = rng.randint(0, n - a) if rng.random() < 0.5 else n - a
                        msgid = c.next_id()
                        want[msgid] = (op, base + a, count)
                        out.append(pack([0, msgid, "reduce", [{"op": op, "dtype": dtype, "region": region,
                                                               "offset": off0 + a * pool.size, "count": count}]]))
                    c.send(b"".join(out))
                    while want:
                        resp = c.recv()
                        if resp is None or resp[1] not in want:
                            raise ConnectionError("shm: reply %r" % (resp,))
                        op, start, count = want.pop(resp[1])
                        self.s.check_reduce("shm_reduce", (dtype, op, "region", start - base, count), resp,
                                            dtype, op, start, count)
                    # every answer is in: the client may write again
                    base = rng.randrange(POOL)
                    m[off0:off0 + n * pool.size] = pool.bytes(base, n)
                if rng.random() < 0.8:
                    resp = c.call("unmap", [{"region": region}])
                    self.s.count("unmap")
                    if resp[2] is not None or resp[3] is not True:
                        self.s.record_unexpected("unmap: %r" % (resp,))
        finally:
            c.close()
            for m in maps:
                m.close()

    def churn(self, c, rng):
        regions = []
        for _ in range(rng.randint(4, 32)):
            size = rng.randint(1, 256 * KiB)
            fd = memfd(size)
            try:
                resp = c.call("map", [{"bytes": size}], fds=[fd])
            finally:
                os.close(fd)
            self.s.count("map")
            if resp[2] is not None:
                self.s.record_unexpected("churn map: %r" % (resp,))
                continue
            regions.append(resp[3]["region"])
            if len(regions) > 8 or rng.random() < 0.5:
                resp = c.call("unmap", [{"region": regions.pop(rng.randrange(len(regions)))}])
                self.s.count("unmap")
                if resp[3] is not True:
                    self.s.record_unexpected("churn unmap: %r" % (resp,))

    def disconnect(self, rng):
        """Hang up mid-payload, or with answers unread."""
        c = self.conn()
        try:
            what = rng.randrange(4)
            if what == 0:
                dtype, op, start, count = self.pick_small(rng)
                msg = reduce_msg(c.next_id(), op, dtype, self.s.pools[dtype].bytes(start, count))
                c.send(msg[:rng.randrange(1, len(msg))])
            elif what == 1:
                dtype = rng.choice(list(DTYPES))
                pool = self.s.pools[dtype]
                count = rng.randint(1 * MiB, 16 * MiB) // pool.size
                c.send(reduce_header(c.next_id(), "sum", dtype, count * pool.size))
                c.send(pool.bytes(0, rng.randrange(count)))
            elif what == 2:
                fd = memfd(4096)
                try:
                    msg = pack([0, c.next_id(), "map", [{"bytes": 4096}]])
                    c.send(msg[:rng.randrange(1, len(msg))], [fd])
                finally:
                    os.close(fd)
            else:
                out = []
                for _ in range(rng.randint(1, 64)):
                    dtype, op, start, count = self.pick_small(rng)
                    out.append(reduce_msg(c.next_id(), op, dtype, self.s.pools[dtype].bytes(start, count)))
                c.send(b"".join(out))
            if rng.random() < 0.5:
                # a reset rather than an orderly close
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.s.count("disconnect")
        finally:
            c.close()
        time.sleep(rng.uniform(0, 0.2))

    def poll(self, rng):
        """stats and info, as a monitor would."""
        c = self.conn(timeout=30)
        try:
            for _ in range(20):
                if self.s.stop.is_set():
                    break
                resp = c.call("stats")
                self.s.count("stats")
                st = resp[3]
                if resp[2] is not None or not all(k in st for k in ("requests", "errors", "connections",
                                                                      "regions", "inflight", "latency_us")):
                    self.s.record_unexpected("stats: %r" % (resp,))
                resp = c.call("info")
                self.s.count("info")
                info = resp[3]
                if resp[2] is not None or info.get("backend") != self.s.args.backend or "limits" not in info:
                    self.s.record_unexpected("info: %r" % (resp,))
                time.sleep(rng.uniform(0.2, 1.0))
        finally:
            c.close()

    # ---- malformed input, each case on its own connection ----

    def malformed(self, rng):
        name, fn = rng.choice(MALFORMED)
        c = self.conn(timeout=30)
        try:
            problem = fn(self, c, rng)
        except (OSError, ConnectionError) as e:
            problem = "%s: %r" % (type(e).__name__, e)
        finally:
            c.close()
        self.s.count("malformed")
        self.s.count("malformed." + name)
        if problem:
            self.s.record_wrong("malformed %s: %s" % (name, problem))
