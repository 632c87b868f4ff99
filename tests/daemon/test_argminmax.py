"""argmin and argmax through the daemon, against NumPy: every dtype, the
socket's bin and array forms, batched small requests, requests cut into
chunks (small chunks), shared-memory regions, the placement of ties, NaN,
-0 and infinities, and the errors."""

import math
import os
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_shm import ShmCase  # noqa: E402

DTYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64,
      "f32": np.float32, "f64": np.float64}
# 256 KiB chunks: 65536 f32 elements, 32768 f64
CHUNK = 256 << 10


def reference(op, x):
    """(value, index) as the protocol defines them: numpy's argmin/argmax
    (the first extreme, the first NaN) except that -0 is below +0."""
    if x.dtype.kind == "f":
        nan = np.flatnonzero(np.isnan(x))
        if len(nan):
            return math.nan, int(nan[0])
        best = x.min() if op == "argmin" else x.max()
        if best == 0:
            # -0 is below +0: argmin takes the first -0 if there is one,
            # argmax the first +0 if there is one
            neg = (x == 0) & np.signbit(x)
            pos = (x == 0) & ~np.signbit(x)
            want, other = (neg, pos) if op == "argmin" else (pos, neg)
            i = int(np.flatnonzero(want if want.any() else other)[0])
            return float(x[i]), i
        i = int(np.argmin(x) if op == "argmin" else np.argmax(x))
        return float(x[i]), i
    i = int(np.argmin(x) if op == "argmin" else np.argmax(x))
    return int(x[i]), i


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return a == b


def arrays(rng, dt, n):
    """A few arrays of dt: random, with ties, and (floats) with specials."""
    t = NP[dt]
    if dt[0] == "f":
        x = (rng.standard_normal(n) * 1000).astype(t)
    else:
        info = np.iinfo(t)
        x = rng.integers(info.min, info.max, size=n, dtype=t, endpoint=True)
    yield "random", x
    if n < 2:
        return
    y = rng.integers(0, 4, size=n).astype(t)  # many ties
    yield "ties", y
    if dt[0] != "f":
        return
    z = np.zeros(n, dtype=t)
    z[rng.integers(0, n)] = -0.0
    yield "zeros", z
    z = -np.zeros(n, dtype=t)
    z[rng.integers(0, n)] = 0.0
    yield "negative zeros", z
    w = x.copy()
    w[rng.integers(0, n)] = np.inf
    w[rng.integers(0, n)] = -np.inf
    yield "infinities", w
    v = w.copy()
    k = rng.integers(0, n)
    v[k] = np.nan
    v[rng.integers(k, n)] = np.nan
    yield "NaN", v


class ArgMinMax(ShmCase):
    TIMEOUT = 20

    def check(self, res, op, x, what):
        err, r = res
        self.assertIsNone(err, what)
        self.assertEqual(sorted(r), ["count", "index", "value"], what)
        v, i = reference(op, x)
        self.assertEqual(r["count"], len(x), what)
        self.assertEqual(r["index"], i, (what, r, v))
        self.assertTrue(same(r["value"], v), (what, r, v))

    def test_socket_chunks_and_regions(self):
        rng = np.random.default_rng(20)
        c = self.client()
        for dt in DTYPES:
            es = np.dtype(NP[dt]).itemsize
            per_chunk = CHUNK // es
            for n in (1, 2, 33, 1000, 32769, per_chunk - 1, per_chunk + 1, 3 * per_chunk + 7):
                for name, x in arrays(rng, dt, n):
                    raw = x.tobytes()
                    off = int(rng.integers(0, 16))
                    region, m = c.map(off + len(raw), b"\xee" * off + raw)
                    for op in ("argmin", "argmax"):
                        what = (op, dt, n, name)
                        self.check(c.reduce(op, dt, raw), op, x, what + ("bin",))
                        self.check(c.reduce_region(op, dt, region, off, n), op, x,
                                   what + ("region", off))
                        if n <= 1000:
                            self.check(c.reduce(op, dt, x.tolist()), op, x, what + ("array",))
                        # min and max agree with argmin and argmax's value
                        mm = c.reduce(op[3:], dt, raw)[1]["value"]
                        self.assertTrue(same(mm, reference(op, x)[0]), what)
                    m.close()
                    self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))

    def test_batched_small_requests(self):
        """Many small requests sent at once (the daemon batches them), then
        their replies read: each one its own answer."""
        rng = np.random.default_rng(7)
        c = self.client()
        want = {}
        for k in range(300):
            dt = DTYPES[k % len(DTYPES)]
            op = ("argmin", "argmax")[k % 2]
            x = list(arrays(rng, dt, int(rng.integers(1, 200))))[-1][1]
            msgid = c.request("reduce", [{"op": op, "dtype": dt, "data": x.tobytes()}])
            want[msgid] = (op, x)
        for _ in range(len(want)):
            resp = c.recv()
            op, x = want.pop(resp[1])
            self.check((resp[2], resp[3]), op, x, ("batched", resp[1]))

    def test_errors(self):
        c = self.client()
        for op in ("argmin", "argmax"):
            for dt in DTYPES:
                err, _ = c.reduce(op, dt, b"")
                self.assertEqual(err["code"], "empty", (op, dt))
                err, _ = c.reduce(op, dt, [])
                self.assertEqual(err["code"], "empty", (op, dt))
            region, m = c.map(64, b"\x01" * 64)
            err, _ = c.reduce_region(op, "i32", region, 4, 0)
            self.assertEqual(err["code"], "empty")
            err, _ = c.reduce_region(op, "i32", region, 4, 100)
            self.assertEqual(err["code"], "invalid_params")
            m.close()
        for bad in ("argmed", "Argmin", "arg", "argmin "):
            err, _ = c.reduce(bad, "f32", b"")
            self.assertEqual(err["code"], "invalid_params", bad)
            self.assertIn("argmin, argmax", err["message"])
        # the connection is still good
        self.assertEqual(c.call("ping"), (None, "pong"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
