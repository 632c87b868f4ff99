"""moments through the daemon, against exact references: mean and var
against Python's Fraction (the exact values, rounded once by int / int
true division, which Python rounds correctly), sum, min and max against
what the ops sum, min and max answer for the same data. Every dtype, the
socket's bin and array forms, batched small requests, requests cut into
chunks and reduced on two threads, shared-memory regions at odd offsets,
adversarial data (a huge offset plus noise, mixed magnitudes, subnormals,
+-0, values near the overflow threshold, all equal, full-range 64-bit
integers), specials, and the errors."""

import math
import os
import struct
import sys
import unittest
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_shm import BACKEND, CupyDeviceCase, ShmCase  # noqa: E402

DTYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64,
      "f32": np.float32, "f64": np.float64}
# 256 KiB chunks: 65536 f32 elements, 32768 f64
CHUNK = 256 << 10
KEYS = ["count", "max", "mean", "min", "sum", "var"]


def rounded(q):
    """The Fraction q rounded once to float64 (to nearest, ties to even)."""
    try:
        return q.numerator / q.denominator
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def exact_float_sums(xs):
    """(sum, sum of squares) of the finite floats xs as exact Fractions.
    Each float is n/d with d a power of two: the numerators are summed per
    denominator (small integers, quick), then brought over one."""
    by_den, sq_by_den = {}, {}
    for v in xs:
        n, d = v.as_integer_ratio()
        by_den[d] = by_den.get(d, 0) + n
        sq_by_den[d] = sq_by_den.get(d, 0) + n * n
    s1 = sum((Fraction(n, d) for d, n in by_den.items()), Fraction(0))
    s2 = sum((Fraction(n, d * d) for d, n in sq_by_den.items()), Fraction(0))
    return s1, s2


def reference(x, ddof):
    """(mean, var) as the protocol defines them."""
    n = len(x)
    if x.dtype.kind == "f":
        if np.isnan(x).any():
            return math.nan, math.nan
        pinf, ninf = bool((x == np.inf).any()), bool((x == -np.inf).any())
        if pinf or ninf:
            return (math.nan if pinf and ninf else math.inf if pinf else -math.inf), math.nan
        s1, s2 = exact_float_sums(x.astype(np.float64).tolist())
    else:
        ints = x.tolist()
        s1 = Fraction(sum(ints))
        s2 = Fraction(sum(v * v for v in ints))
    if s1 == 0:
        # -0 only when every element is -0
        neg = x.dtype.kind == "f" and bool(np.all(np.signbit(x)))
        mean = -0.0 if neg else 0.0
    else:
        mean = rounded(s1 / n)
    var = rounded((s2 - s1 * s1 / n) / (n - ddof))
    return mean, var


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return a == b and type(a) is type(b)


def adversarial(rng, dt, n):
    """Arrays of dt that break naive means and variances."""
    t = NP[dt]
    if dt[0] != "f":
        info = np.iinfo(t)
        yield "full range", rng.integers(info.min, info.max, size=n, dtype=t, endpoint=True)
        yield "extremes", rng.choice(np.array([info.min, info.max], dtype=t), size=n)
        yield "all equal", np.full(n, info.max, dtype=t)
        yield "small", rng.integers(-3 if info.min else 0, 4, size=n).astype(t)
        return
    big = 1e15 if dt == "f64" else 1e7
    yield "offset plus noise", (big + rng.standard_normal(n)).astype(t)
    yield "random", (rng.standard_normal(n) * 1000).astype(t)
    lim = 300 if dt == "f64" else 37
    yield "mixed magnitudes", (rng.standard_normal(n)
                               * 10.0 ** rng.integers(-lim, lim, size=n)).astype(t)
    tiny = np.finfo(t).smallest_subnormal
    yield "subnormals", (rng.integers(-1000, 1000, size=n) * tiny).astype(t)
    z = np.zeros(n, dtype=t)
    z[rng.integers(0, n, size=max(1, n // 3))] = -0.0
    yield "zeros of both signs", z
    yield "negative zeros", -np.zeros(n, dtype=t)
    huge = np.finfo(t).max
    yield "near overflow", (huge * rng.uniform(0.5, 1.0, size=n)).astype(t)
    h = np.where(rng.integers(0, 2, size=n) == 1, huge, -huge).astype(t)
    yield "overflowing variance", h
    yield "all equal", np.full(n, 0.1, dtype=t)
    w = (rng.standard_normal(n)).astype(t)
    w[rng.integers(0, n)] = np.inf
    yield "infinity", w
    w2 = w.copy()
    w2[rng.integers(0, n)] = -np.inf
    yield "both infinities", w2
    v = w.copy()
    v[rng.integers(0, n)] = np.nan
    yield "NaN", v


class Moments(ShmCase):
    TIMEOUT = 30

    def moments(self, c, dt, data, ddof=None, **where):
        p = {"op": "moments", "dtype": dt}
        if ddof is not None:
            p["ddof"] = ddof
        if where:
            p.update(where)
        else:
            p["data"] = data
        return c.call("reduce", [p])

    def check(self, c, res, dt, x, ddof, what, ops=None):
        err, r = res
        self.assertIsNone(err, what)
        self.assertEqual(sorted(r), KEYS, what)
        self.assertEqual(r["count"], len(x), what)
        mean, var = reference(x, ddof)
        self.assertTrue(same(r["mean"], mean), (what, r["mean"], mean))
        self.assertTrue(same(r["var"], var), (what, r["var"], var))
        self.assertIsInstance(r["mean"], float)
        self.assertIsInstance(r["var"], float)
        # sum, min and max: the same bits as the ops'
        if ops is None:
            raw = x.tobytes()
            ops = {op: c.reduce(op, dt, raw)[1]["value"] for op in ("sum", "min", "max")}
        for op, v in ops.items():
            self.assertTrue(same(r[op], v), (what, op, r[op], v))
        return ops

    def test_exact_on_adversarial_data(self):
        rng = np.random.default_rng(11)
        c = self.client()
        for dt in DTYPES:
            for n in (1, 2, 3, 7, 33, 1000, 4099):
                for name, x in adversarial(rng, dt, n):
                    raw = x.tobytes()
                    for ddof in sorted({0, 1, n - 1}):
                        if ddof >= n:
                            continue
                        what = (dt, n, name, ddof)
                        ops = self.check(c, self.moments(c, dt, raw, ddof), dt, x, ddof,
                                         what + ("bin",))
                        if n <= 100:
                            self.check(c, self.moments(c, dt, x.tolist(), ddof), dt, x, ddof,
                                       what + ("array",), ops)

    def test_chunks_threads_and_regions(self):
        """Large requests, reduced chunk by chunk on two threads, and in
        shared memory at odd offsets: the same bits as one pass, and exact."""
        rng = np.random.default_rng(5)
        c = self.client()
        for dt in DTYPES:
            es = np.dtype(NP[dt]).itemsize
            per_chunk = CHUNK // es
            for n in (32769, per_chunk + 1, 3 * per_chunk + 7):
                for name, x in list(adversarial(rng, dt, n))[:3]:
                    raw = x.tobytes()
                    what = (dt, n, name)
                    ops = self.check(c, self.moments(c, dt, raw, 1), dt, x, 1, what + ("bin",))
                    off = int(rng.integers(1, 16))
                    region, m = c.map(off + len(raw), b"\xee" * off + raw)
                    res = self.moments(c, dt, None, 1, region=region, offset=off, count=n)
                    self.check(c, res, dt, x, 1, what + ("region", off), ops)
                    m.close()
                    self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))

    def test_batched_small_requests(self):
        rng = np.random.default_rng(7)
        c = self.client()
        want = {}
        for k in range(200):
            dt = DTYPES[k % len(DTYPES)]
            n = int(rng.integers(1, 300))
            x = list(adversarial(rng, dt, n))[k % 3][1]
            ddof = int(rng.integers(0, n))
            msgid = c.request("reduce", [{"op": "moments", "dtype": dt, "data": x.tobytes(),
                                          "ddof": ddof}])
            want[msgid] = (dt, x, ddof)
        replies = [c.recv() for _ in range(len(want))]
        for resp in replies:
            dt, x, ddof = want.pop(resp[1])
            self.check(c, (resp[2], resp[3]), dt, x, ddof, ("batched", resp[1]))

    def test_worked_example(self):
        """PROTOCOL.md's example, byte for byte."""
        c = self.client()
        req = bytes.fromhex(
            "940007a6726564756365918"
            "4a26f70a76d6f6d656e7473a56474797065a3693332a464646f6601"
            "a464617461c41001000000020000000300000006000000")
        c.send(req)
        resp = c.recv()
        self.assertEqual(resp[:3], [1, 7, None])
        self.assertEqual(resp[3], {"count": 4, "sum": 12, "min": 1, "max": 6,
                                   "mean": 3.0, "var": 14 / 3})
        want = bytes.fromhex(
            "940107c086a5636f756e7404a373756d0ca36d696e01a36d617806a46d65616e"
            "cb4008000000000000a3766172cb4012aaaaaaaaaaab")
        # the unpacker holds nothing more: read the next reply's bytes raw
        c.send(req)
        data = b""
        while len(data) < len(want):
            data += c.sock.recv(1 << 16)
        self.assertEqual(data.hex(), want.hex())

    def test_errors(self):
        c = self.client()
        for dt in DTYPES:
            for empty in (b"", []):
                for ddof in (None, 0, 3):
                    err, _ = self.moments(c, dt, empty, ddof)
                    self.assertEqual(err["code"], "empty", (dt, ddof))
        one = np.arange(3, dtype=np.int32).tobytes()
        for ddof, why in ((3, "less than"), (4, "less than"), (2 ** 64 - 1, "less than"),
                          (-1, "unsigned integer"), (1.0, "unsigned integer"),
                          ("1", "unsigned integer"), (None, None)):
            if why is None:
                continue
            err, _ = self.moments(c, "i32", one, ddof)
            self.assertEqual(err["code"], "invalid_params", ddof)
            self.assertIn(why, err["message"])
        for op in ("sum", "min", "argmax"):
            err, _ = c.call("reduce", [{"op": op, "dtype": "i32", "data": one, "ddof": 0}])
            self.assertEqual(err["code"], "invalid_params", op)
            self.assertIn("only for op moments", err["message"])
        # ddof after a large data
        big = np.zeros(CHUNK, dtype=np.float32).tobytes()
        err, _ = c.call("reduce", [{"op": "moments", "dtype": "f32", "data": big,
                                    "ddof": CHUNK}])
        self.assertEqual(err["code"], "invalid_params")
        region, m = c.map(64, b"\x01" * 64)
        err, _ = self.moments(c, "i32", None, 16, region=region, offset=0, count=16)
        self.assertEqual(err["code"], "invalid_params")
        err, _ = self.moments(c, "i32", None, 0, region=region, offset=4, count=0)
        self.assertEqual(err["code"], "empty")
        m.close()
        err, r = self.moments(c, "i32", one, 2)
        self.assertIsNone(err)
        self.assertEqual(r["var"], 2.0)
        # partial adds nothing
        err, r = c.call("reduce", [{"op": "moments", "dtype": "f64", "partial": True,
                                    "data": np.ones(3).tobytes()}])
        self.assertIsNone(err)
        self.assertEqual(sorted(r), KEYS)
        self.assertEqual(c.call("ping"), (None, "pong"))


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
class DeviceMemory(CupyDeviceCase):
    """moments of GPU memory: every dtype on the GPU's moments kernels,
    elements off their own size's boundary copied to the host; every way
    the exact mean and variance (Fraction) and the bits the same elements
    give over the socket, on the adversarial arrays above, at odd sizes
    and offsets."""

    def test_adversarial_on_the_gpu(self):
        rng = np.random.default_rng(21)
        for dt in DTYPES:
            size = np.dtype(NP[dt]).itemsize
            for n in (1, 4097, 70001):
                for what, x in adversarial(rng, dt, n + 1):
                    gx = self.cp.asarray(x)
                    region = self.map(gx)
                    for skip in (0, 1):
                        y = x[skip:]
                        for ddof in (0, 1):
                            if ddof >= len(y):
                                continue
                            p = {"op": "moments", "dtype": dt, "ddof": ddof}
                            dev = self.c.call("reduce", [dict(p, region=region,
                                                              offset=skip * size,
                                                              count=len(y))])
                            host = self.c.call("reduce", [dict(p, data=y.tobytes())])
                            why = (dt, n, what, skip, ddof)
                            self.assertIsNone(dev[0], why)
                            self.assertEqual(struct.pack("<dd", dev[1]["mean"], dev[1]["var"]),
                                             struct.pack("<dd", host[1]["mean"], host[1]["var"]),
                                             why)
                            for k in KEYS:
                                self.assertTrue(same(dev[1][k], host[1][k]), (why, k))
                            mean, var = reference(y, ddof)
                            self.assertTrue(same(dev[1]["mean"], mean), why)
                            self.assertTrue(same(dev[1]["var"], var), why)
                    self.assertEqual(self.c.call("unmap", [{"region": region}]), (None, True))
        self.healthy()

    def test_off_the_element_boundary(self):
        # f32 elements 1..3 bytes into the allocation: by way of the host
        rng = np.random.default_rng(22)
        x = (rng.standard_normal(100003) * 1000).astype(np.float32)
        for off in (1, 2, 3):
            raw = bytes(off) + x.tobytes()
            region = self.map(self.cp.asarray(np.frombuffer(raw, dtype=np.uint8)))
            p = {"op": "moments", "dtype": "f32", "ddof": 1}
            err, dev = self.c.call("reduce", [dict(p, region=region, offset=off, count=len(x))])
            self.assertIsNone(err, err)
            host = self.c.call("reduce", [dict(p, data=x.tobytes())])[1]
            for k in KEYS:
                self.assertTrue(same(dev[k], host[k]), (off, k, dev[k], host[k]))
            mean, var = reference(x, 1)
            self.assertTrue(same(dev["mean"], mean) and same(dev["var"], var), off)
            self.assertEqual(self.c.call("unmap", [{"region": region}]), (None, True))
        self.healthy()

if __name__ == "__main__":
    unittest.main(verbosity=2)
