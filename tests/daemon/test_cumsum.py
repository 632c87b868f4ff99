"""Prefix sums ("op": "cumsum") at the socket level.

Integer prefix sums against numpy.cumsum, wrap-around included. Float
prefix sums bit for bit against a model of PROTOCOL.md's order written
here from the text (tiles of 4096 counted from the first element, 256
threads of 16 elements a tile, Kogge-Stone scans of the threads' totals,
tile totals in a Fenwick tree), which is what makes them the same on any
daemon, chunking, thread count and backend; and against Fraction-exact
prefix sums within the documented bound. Specials against numpy.cumsum. Every dtype,
bin and array data, requests of one chunk and of many (the small-chunk
daemon of test_shm), writable out regions, pipelined requests mixing
cumsum with other ops (and with replies that backend threads send
themselves), clients that stop reading, clients that disconnect
mid-stream, and every bad input."""

import math
import mmap
import os
import random
import socket
import struct
import sys
import threading
import time
import unittest
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Daemon, pack  # noqa: E402
from test_shm import (CupyDeviceCase, ShmCase, ShmClient, cupy_or_skip, memfd,  # noqa: E402
                      memfd_maps, open_fds)

B = 32768  # a block: chunks are whole blocks
TILE = 4096  # the order's tile
DTYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64,
      "f32": np.float32, "f64": np.float64}
# what the prefix sums are: sum's result kinds
WIDE = {"i32": np.int64, "i64": np.int64, "u32": np.uint64, "u64": np.uint64,
        "f32": np.float64, "f64": np.float64}
# the class daemon's chunks: 256 KiB, so 65536 f32 or 32768 f64 elements
CHUNK = 256 << 10
# ASan inflates RSS: the memory checks are left out under it
SANITIZED = bool(os.environ.get("GPURED_SANITIZED"))
U = Fraction(1, 1 << 53)


# ---- the reference: the order PROTOCOL.md defines ----

def model(dt, x):
    """The prefix sums PROTOCOL.md defines, as WIDE[dt]."""
    if dt[0] != "f":
        # numpy wraps modulo 2^64, as the daemon does
        return np.cumsum(x.astype(WIDE[dt]), dtype=WIDE[dt])
    n = len(x)
    nt = -(-n // TILE)
    xs = np.zeros(nt * TILE)  # a short last tile reads +0.0 past the end
    xs[:n] = x.astype(np.float64)
    with np.errstate(all="ignore"):
        # each thread's running sums, left to right from its first element
        r = np.add.accumulate(xs.reshape(nt, 256, 16), axis=2)
        # Kogge-Stone over each 32 threads' totals: every step at once
        w = r[:, :, 15].reshape(nt, 8, 32).copy()
        for d in (1, 2, 4, 8, 16):
            w[:, :, d:] = w[:, :, :-d] + w[:, :, d:]
        # the groups' totals left to right: P_w before group w, A the tile's
        p = np.empty((nt, 8))
        a = np.full(nt, -0.0)
        for g in range(8):
            p[:, g] = a
            a = a + w[:, g, 31]
        before = np.concatenate([np.full((nt, 8, 1), -0.0), w[:, :, :31]], axis=2)
        e = (p[:, :, None] + before).reshape(nt, 256)
        # the carries: tile totals in a Fenwick tree, ranges largest first
        f = [0.0] * nt
        carry = np.empty(nt)
        for j in range(nt):
            v = a[j]
            L = 1
            while (j + 1) % (1 << L) == 0:
                v = f[j - (1 << (L - 1))] + v
                L += 1
            f[j] = v
            c = -0.0
            for bit in range(nt.bit_length(), -1, -1):
                if j >> bit & 1:
                    q = j >> (bit + 1) << (bit + 1)
                    c = c + f[q + (1 << bit) - 1]
            carry[j] = c
        q = carry[:, None] + e
        out = q[:, :, None] + r
    return out.reshape(-1)[:n].copy()


def same(a, b):
    """Equal bit for bit, any NaN matching any NaN."""
    if a.dtype.kind == "f":
        na, nb = np.isnan(a), np.isnan(b)
        if not np.array_equal(na, nb):
            return False
        return np.array_equal(a[~na].view(np.uint64), b[~nb].view(np.uint64))
    return np.array_equal(a, b)


def bound_d(n):
    """scan.h's d: input k reaches output i through at most
    30 + 2 ceil(log2(tiles)) additions."""
    nt = max(-(-n // TILE), 1)
    return 30 + 2 * (nt - 1).bit_length()


def error_stats(x, out):
    """For finite prefix sums of finite x, the largest error against the
    exact prefix sums P_i: in ulps of P_i; in units of u M_i, M_i the sum
    of |x_j| for j <= i (u = 2^-53); and as a fraction of PROTOCOL.md's
    bound, gamma_d M_i, gamma_d = d u / (1 - d u) = d / (2^53 - d).
    Integers all through: every double here is one times 2^-S, 2^S the
    largest denominator among them (S <= 1074); each maximum is kept as
    a fraction (numerator, denominator) and compared crosswise."""
    xr = [v.as_integer_ratio() for v in x.astype(np.float64).tolist()]
    outr = [v.as_integer_ratio() for v in out.tolist()]
    den = max(q for _, q in xr + outr)
    S = den.bit_length() - 1
    xs = [p * (den // q) for p, q in xr]
    outs = [p * (den // q) for p, q in outr]
    D = 1 << 53
    d = bound_d(len(xs))
    ulps, mags, worst = (0, 1), (0, 1), (0, 1)
    p = m = 0
    for xi, oi in zip(xs, outs):
        p += xi
        m += abs(xi)
        err = abs(oi - p)
        if err == 0:
            continue
        num, bound = err * (D - d), d * m
        if num * worst[1] > worst[0] * bound:
            worst = (num, bound)
        if p != 0:
            # the ulp of P_i: 2^(its bit length - 53) units, or 2^-1074
            e = max(abs(p).bit_length() - 53, S - 1074)
            u = (err, 1 << e) if e >= 0 else (err << -e, 1)
            if u[0] * ulps[1] > ulps[0] * u[1]:
                ulps = u
        if err * D * mags[1] > mags[0] * m:
            mags = (err * D, m)
    return tuple(float(Fraction(*f)) for f in (ulps, mags, worst))


# ---- data ----

def sample(rng, dt, n):
    """n elements of dt of one of several kinds, drawn from rng (through
    a NumPy generator seeded from it: whole arrays at once)."""
    t = NP[dt]
    g = np.random.default_rng(rng.getrandbits(64))
    if dt[0] == "f":
        pick = rng.random()
        if pick < 0.3:
            return g.standard_normal(n).astype(t)
        if pick < 0.6:
            return (g.uniform(-1, 1, n) * np.exp2(g.integers(-40, 40, n, endpoint=True))).astype(t)
        return g.random(n).astype(t)
    info = np.iinfo(t)
    if rng.random() < 0.5:
        return g.integers(-9 if info.min else 0, 9, n, endpoint=True).astype(t)
    return g.integers(info.min, info.max, n, dtype=t, endpoint=True)


def values(res, dt):
    return np.frombuffer(res["values"], dtype=WIDE[dt])


def map_writable(c, size, fill=None, **extra):
    """A sealed memfd of size bytes mapped for writing: (region, our mmap)."""
    fd = memfd(size)
    try:
        m = mmap.mmap(fd, size)
        if fill is not None:
            m[:len(fill)] = fill
        err, res = c.map_fds(size, [fd], writable=True, **extra)
    finally:
        os.close(fd)
    assert err is None, err
    return res["region"], m


def call(c, params):
    """A reduce whose reply may stream out while the request goes in: send
    from a thread, as a client must, and read meanwhile."""
    c.msgid += 1
    msg = pack([0, c.msgid, "reduce", [params]])
    t = threading.Thread(target=c.send, args=(msg,))
    t.start()
    resp = c.recv()
    t.join()
    assert resp is not None, "connection closed"
    assert resp[0] == 1 and resp[1] == c.msgid, resp
    return resp[2], resp[3]


def cumsum(c, dt, data, **extra):
    return call(c, {"op": "cumsum", "dtype": dt, **extra, "data": data})


def cumsum_region(c, dt, region, offset, count, out_region, out_offset=None):
    p = {"op": "cumsum", "dtype": dt, "region": region, "offset": offset, "count": count,
         "out_region": out_region}
    if out_offset is not None:
        p["out_offset"] = out_offset
    return c.call("reduce", [p])


class CumsumCase(ShmCase):

    def assertError(self, reply, code, contains=""):
        err, res = reply
        self.assertIsNotNone(err, res)
        self.assertEqual(err["code"], code, err)
        self.assertIn(contains, err["message"])

    def assertAlive(self, c):
        self.assertEqual(c.call("ping"), (None, "pong"))

    def check(self, dt, x, res):
        self.assertEqual(res["count"], len(x))
        got = values(res, dt)
        want = model(dt, x)
        self.assertTrue(same(got, want), (dt, len(x), got[:8], want[:8]))
        if dt[0] != "f":
            self.assertTrue(np.array_equal(got, np.cumsum(x.astype(WIDE[dt]))))
        return got

    def quiet(self):
        """Wait for every other connection to go, its descriptors to be
        closed (by the closer threads, off the loop) and every request to
        be answered: (open descriptors, memfd mappings, RSS in KiB)."""
        probe = ShmClient(self.d.path, timeout=10)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            st = probe.call("stats")[1]
            if (st["connections"] == 1 and st["inflight"] == 0 and
                    not any(u["closing_fds"] for u in st["users"])):
                break
            time.sleep(0.02)
        probe.close()
        time.sleep(0.05)
        return open_fds(self.pid), memfd_maps(self.pid), self.d.rss_kib()

    def pipeline(self, c, rng, rounds=3):
        want = {}
        msgs = []
        msgid = 1000
        for _ in range(rounds):
            for kind in rng.sample(range(7), 7):
                msgid += 1
                if kind == 0:
                    dt = rng.choice(DTYPES)
                    x = sample(rng, dt, rng.choice((150000, 70001)))
                    msgs.append(pack([0, msgid, "reduce", [{"op": "cumsum", "dtype": dt,
                                                            "data": x.tobytes()}]]))
                    want[msgid] = ("cumsum", dt, x)
                elif kind == 1:
                    dt = rng.choice(DTYPES)
                    x = sample(rng, dt, rng.randint(0, 300))
                    msgs.append(pack([0, msgid, "reduce", [{"op": "cumsum", "dtype": dt,
                                                            "data": x.tobytes()}]]))
                    want[msgid] = ("cumsum", dt, x)
                elif kind in (2, 3):
                    x = np.arange(rng.randint(1, 2000), dtype=np.int64)
                    msgs.append(pack([0, msgid, "reduce", [{"op": "sum", "dtype": "i64",
                                                            "data": x.tobytes()}]]))
                    want[msgid] = ("sum", int(x.sum()))
                elif kind == 4:
                    msgs.append(pack([0, msgid, "ping", []]))
                    want[msgid] = ("ping",)
                elif kind == 5:
                    msgs.append(pack([0, msgid, "reduce", [{"op": "cumsum", "dtype": "f32",
                                                            "partial": True, "data": b""}]]))
                    want[msgid] = ("error", "invalid_params")
                else:
                    x = np.arange(100000, dtype=np.float32)
                    msgs.append(pack([0, msgid, "reduce", [{"op": "max", "dtype": "f32",
                                                            "data": x.tobytes()}]]))
                    want[msgid] = ("sum", 99999.0)
        sender = threading.Thread(target=lambda: c.send(b"".join(msgs)))
        sender.start()
        got = {}
        while len(got) < len(want):
            r = c.recv()
            self.assertIsNotNone(r, "connection closed after %d replies" % len(got))
            self.assertEqual(r[0], 1)
            self.assertNotIn(r[1], got)
            got[r[1]] = r
        sender.join()
        for mid, w in want.items():
            r = got[mid]
            if w[0] == "cumsum":
                self.assertIsNone(r[2], r[2])
                self.check(w[1], w[2], r[3])
            elif w[0] == "sum":
                self.assertEqual(r[3]["value"], w[1])
            elif w[0] == "ping":
                self.assertEqual(r[3], "pong")
            else:
                self.assertEqual(r[2]["code"], w[1])
        self.assertAlive(c)


class Cumsum(CumsumCase):
    """Small chunks (256 KiB): a few hundred KiB of data streams out in
    several chunks."""

    def test_every_dtype_bin_and_array(self):
        rng = random.Random(1)
        c = self.client()
        for dt in DTYPES:
            size = np.dtype(NP[dt]).itemsize
            for n in (0, 1, 2, 7, B - 1, B, B + 1, CHUNK // size, CHUNK // size + 1,
                      3 * CHUNK // size + 5, 200003):
                x = sample(rng, dt, n)
                err, res = cumsum(c, dt, x.tobytes())
                self.assertIsNone(err, err)
                self.check(dt, x, res)
                if n <= B + 1:
                    # an array of numbers: the same values
                    err, res2 = cumsum(c, dt, x.tolist())
                    self.assertIsNone(err, err)
                    self.assertEqual(res2, res)

    def test_integers_wrap(self):
        c = self.client()
        big = np.array([2**63 - 1, 2**63 - 1, 5, -2**63, -1] * 20000, dtype=np.int64)
        self.check("i64", big, cumsum(c, "i64", big.tobytes())[1])
        u = np.array([2**64 - 1, 3, 2**63] * 30000, dtype=np.uint64)
        got = self.check("u64", u, cumsum(c, "u64", u.tobytes())[1])
        self.assertEqual(int(got[0]), 2**64 - 1)
        self.assertEqual(int(got[1]), 2)
        i32 = np.full(100000, -2**31, dtype=np.int32)
        got = self.check("i32", i32, cumsum(c, "i32", i32.tobytes())[1])
        self.assertEqual(int(got[-1]), -2**31 * 100000)  # no 32-bit wrap
        u32 = np.full(100000, 2**32 - 1, dtype=np.uint32)
        got = self.check("u32", u32, cumsum(c, "u32", u32.tobytes())[1])
        self.assertEqual(int(got[-1]), (2**32 - 1) * 100000)

    def test_floats_against_exact_prefix_sums(self):
        """Within the documented bound, on random and adversarial data; the
        worst seen is printed (PROTOCOL.md quotes it)."""
        rng = random.Random(2)
        c = self.client()
        cases = {
            "normal f64": np.array([rng.gauss(0, 1) for _ in range(100000)]),
            "uniform [0, 1) f32": np.array([rng.random() for _ in range(100000)],
                                           dtype=np.float32),
            "2^-40..2^40 f64": np.array([rng.uniform(-1, 1) * 2.0 ** rng.randint(-40, 40)
                                         for _ in range(100000)]),
        }
        # adversarial: what a running double sum loses, block after block:
        # 2^53, then ones it rounds away, then -2^53 (a thread's running sum
        # loses them too)
        adv = np.ones(4 * B)
        adv[0::B] = 2.0 ** 53
        adv[B - 1::B] = -2.0 ** 53
        cases["2^53, ones, -2^53 per block"] = adv
        # what a running sum loses for ever: 1, then 2^-60s, each below half
        # an ulp of the sum (the threads' and tiles' totals keep some)
        tiny = np.full(6 * B, 2.0 ** -60)
        tiny[0] = 1.0
        cases["1, then 2^-60s"] = tiny
        for name, x in cases.items():
            dt = "f32" if x.dtype == np.float32 else "f64"
            err, res = cumsum(c, dt, x.tobytes())
            self.assertIsNone(err, err)
            got = self.check(dt, x, res)
            ulps, mags, ratio = error_stats(x, got)
            with np.errstate(all="ignore"):
                seq = np.cumsum(x.astype(np.float64))
            seq_ulps, seq_mags, _ = error_stats(x, seq)
            print("  %-28s %8.3g ulps %8.3g u M, %.4f of the bound; numpy's running sum: "
                  "%8.3g ulps %8.3g u M" % (name, ulps, mags, ratio, seq_ulps, seq_mags),
                  file=sys.stderr)
            self.assertLessEqual(ratio, 1.0, name)

    def test_specials_as_numpy(self):
        """NaN, infinities and -0.0 do to later prefix sums what they do in
        numpy.cumsum, across blocks and chunks too."""
        c = self.client()
        n = 3 * B
        cases = []
        x = np.full(n, -0.0)
        cases.append(x)
        x = np.full(n, -0.0)
        x[B + 3] = 0.0
        cases.append(x)
        x = np.ones(n)
        x[5] = np.nan
        cases.append(x)
        x = np.ones(n)
        x[B + 7] = np.inf
        x[2 * B + 1] = -np.inf
        cases.append(x)
        x = np.ones(n)
        x[B - 1] = -np.inf
        x[B] = np.inf
        cases.append(x)
        x = np.ones(n)
        x[3] = np.inf
        x[4] = np.nan
        cases.append(x)
        for x in cases:
            for dt in ("f64", "f32"):
                xs = x.astype(NP[dt])
                res = cumsum(c, dt, xs.tobytes())[1]
                got = self.check(dt, xs, res)
                with np.errstate(all="ignore"):
                    want = np.cumsum(xs.astype(np.float64))
                self.assertTrue(same(got, want))
                # -0.0 kept where numpy keeps it (a NaN's sign is not said)
                num = ~np.isnan(want)
                self.assertTrue(np.array_equal(np.signbit(got[num]), np.signbit(want[num])))

    def test_past_the_float64_range(self):
        """A sum that overflows is inf from there on, as numpy's running
        sum is, across tiles and blocks too."""
        c = self.client()
        x = np.zeros(2 * B)
        x[0] = x[1] = 1.7976931348623157e308
        x[2] = x[3] = -1.7976931348623157e308
        x[B] = 2.5
        got = self.check("f64", x, cumsum(c, "f64", x.tobytes())[1])
        self.assertEqual(got[0], 1.7976931348623157e308)
        self.assertTrue(np.all(got[1:] == math.inf))

    def test_same_bits_on_another_daemon(self):
        """The order does not depend on the chunks or the threads: daemons
        with the default 4 MiB chunks and one thread (every chunk whose
        carry is known runs in one pass) and eight (long float chunks run
        in two passes, each split over the workers) give the same bits."""
        rng = random.Random(3)
        others = [Daemon("--threads", "1"), Daemon("--threads", "8")]
        try:
            cs = [ShmClient(o.path) for o in others]
            c = self.client()
            for dt, n in (("f32", 300001), ("f64", 300001), ("f32", 2500003)):
                x = sample(rng, dt, n)
                a = cumsum(c, dt, x.tobytes())[1]
                for c2 in cs:
                    b = cumsum(c2, dt, x.tobytes())[1]
                    self.assertEqual(a["values"], b["values"])
            for c2 in cs:
                c2.close()
        finally:
            for o in others:
                self.assertEqual(o.stop(), 0)

    def test_pipelined_with_other_ops(self):
        """Cumsums of many chunks and of one, sums, pings and errors, all sent
        before any reply is read: every reply arrives whole, once, right."""
        rng = random.Random(4)
        c = self.client()
        self.pipeline(c, rng)

    def test_slow_reader(self):
        """A client that takes none of its reply: the daemon stops reading
        it, with only the chunks in flight and the unsent bound held; once
        it reads, every value arrives."""
        c = self.client()
        probe = self.client()
        st0 = probe.call("stats")[1]["stalls"]["limits"]
        rss0 = self.d.rss_kib()
        x = np.arange(3 << 20, dtype=np.float32)  # 12 MiB in, 24 MiB out
        msg = pack([0, 7, "reduce", [{"op": "cumsum", "dtype": "f32", "data": x.tobytes()}]])
        sent = [0]

        def send():
            try:
                c.sock.sendall(msg)
                sent[0] = len(msg)
            except OSError:
                pass
        t = threading.Thread(target=send)
        t.start()
        time.sleep(1.0)
        # the daemon stopped reading: the request is not all sent
        self.assertEqual(sent[0], 0)
        self.assertGreater(probe.call("stats")[1]["stalls"]["limits"], st0)
        if not SANITIZED:
            self.assertLess(self.d.rss_kib() - rss0, 16 << 10)
        r = c.recv()
        t.join()
        self.assertEqual(r[:3], [1, 7, None])
        self.check("f32", x, r[3])

    def test_disconnect_mid_stream(self):
        """Clients gone in the middle of a streamed reply, of their own
        request, or with replies waiting behind a stream: the daemon
        forgets them and holds nothing more than before."""
        x = np.arange(400000, dtype=np.float64)
        msg = pack([0, 1, "reduce", [{"op": "cumsum", "dtype": "f64", "data": x.tobytes()}]])
        base = self.quiet()

        def send(s, data):
            try:
                s.sendall(data)
            except OSError:
                pass  # the test hung up
        for i in range(12):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.d.path)
            s.settimeout(10)
            if i % 3 == 0:
                # all of it and a request behind it; part of the reply read
                t = threading.Thread(target=send, args=(s, msg + pack([0, 2, "ping", []])))
                t.start()
                got = 0
                while got < 100000 + 300000 * (i % 2):
                    data = s.recv(65536)
                    self.assertTrue(data)
                    got += len(data)
            elif i % 3 == 1:
                # half the request, nothing read
                t = threading.Thread(target=send, args=(s, msg[:len(msg) // 2]))
                t.start()
                time.sleep(0.2)
            else:
                # all of it, and gone at once
                t = threading.Thread(target=send, args=(s, msg))
                t.start()
                time.sleep(0.01 * i)
            s.shutdown(socket.SHUT_RDWR)
            t.join()
            s.close()
        after = self.quiet()
        self.assertEqual(after[:2], base[:2])
        if not SANITIZED:
            self.assertLess(after[2] - base[2], 16 << 10)
        self.assertAlive(self.client())

    def test_failure_after_the_reply_began(self):
        """An error found once the values are streaming (here an array
        element out of range in a later chunk) cannot be answered: the
        connection closes, after the replies before it."""
        c = self.client()
        n = 5 * CHUNK // 4
        # [0, 9, "reduce", [{"op": "cumsum", "dtype": "i32", "data": [0, 1, ..., 2**40]}]]
        # without its last element
        head = pack([0, 8, "ping", []]) + b"\x94\x00\x09\xa6reduce\x91\x83" + \
            pack("op") + pack("cumsum") + pack("dtype") + pack("i32") + pack("data") + \
            b"\xdd" + struct.pack(">I", n)
        body = b"".join(pack(i) for i in range(n - 1))
        t = threading.Thread(target=c.send, args=(head + body,))
        t.start()
        # the reply begins before the request ends
        got = b""
        start = b"\x94\x01\x09\xc0\x82\xa5count"
        while start not in got:
            data = c.sock.recv(1 << 16)
            self.assertTrue(data)
            got += data
        self.assertTrue(got.startswith(pack([1, 8, None, "pong"])))
        # what is sent goes in while the values come out
        while t.is_alive():
            c.sock.settimeout(0.1)
            try:
                c.sock.recv(1 << 16)
            except socket.timeout:
                pass
        c.sock.settimeout(10)
        t.join()
        c.send(pack(2**40))
        self.assertTrue(c.closed())

    def test_empty(self):
        c = self.client()
        for dt in DTYPES:
            self.assertEqual(cumsum(c, dt, b""), (None, {"count": 0, "values": b""}))
            self.assertEqual(cumsum(c, dt, []), (None, {"count": 0, "values": b""}))

    def test_worked_example(self):
        """PROTOCOL.md's bytes."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.d.path)
        s.settimeout(10)
        req = bytes.fromhex(
            "940004a672656475636591 83a26f70a663756d73756d a56474797065a3663332"
            "a464617461c40c 0000803f 0000003f 000040c0".replace(" ", ""))
        self.assertEqual(req, pack([0, 4, "reduce", [{"op": "cumsum", "dtype": "f32",
                                                      "data": struct.pack("<3f", 1, .5, -3)}]]))
        s.sendall(req)
        want = bytes.fromhex(
            "940104c082a5636f756e7403a676616c756573c418"
            "000000000000f03f 000000000000f83f 000000000000f8bf".replace(" ", ""))
        got = b""
        while len(got) < len(want):
            got += s.recv(4096)
        s.close()
        self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main(verbosity=2)
