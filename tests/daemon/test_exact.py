"""Float sums over the socket are exact, rounded once: sum and sumsq of f32
and f64 on the CPU backend against references computed here in integers
(math.fsum for f64 sums as a second opinion), on random adversarial arrays
at odd sizes, around block edges and past the daemon's chunk size, and the
same bits whatever the chunk size and thread count."""

import math
import os
import random
import struct
import sys
import unittest
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import Client, Daemon  # noqa: E402

BLOCK = 32768
DBL_MAX = sys.float_info.max
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
# Exact values at or beyond this round to infinity (ties go to even, 2^1024).
OVERFLOW = 2 ** 1024 - 2 ** 970
SEED = int(os.environ.get("GPURED_TEST_SEED", "20261124"))


def bits(x):
    return struct.pack("<d", x)


def pack(dtype, xs):
    """xs (floats, or an array) as the request's little-endian data; f32
    values are float32 already (f32() or an array of them)."""
    return np.asarray(xs, dtype="<f4" if dtype == "f32" else "<f8").tobytes()


def round_once(num, den_log2, count, all_negzero):
    """The double nearest num * 2^-den_log2, ties to even, with the sign
    rules for an exact zero."""
    if num == 0:
        return -0.0 if count and all_negzero else 0.0
    v = Fraction(num, 1 << den_log2)
    if abs(v) >= OVERFLOW:
        return math.inf if num > 0 else -math.inf
    if abs(v) > DBL_MAX:
        return DBL_MAX if num > 0 else -DBL_MAX
    return float(v)  # int / int: correctly rounded, subnormals too


def reference(op, xs):
    """Exact sum (or sum of squares) of the floats xs, rounded once, with
    NaN and infinities as IEEE and numpy have them."""
    a = np.asarray(xs, dtype=np.float64)
    nan = bool(np.isnan(a).any())
    has_pinf, has_ninf = bool((a == math.inf).any()), bool((a == -math.inf).any())
    pinf = has_pinf or (op == "sumsq" and has_ninf)
    ninf = op == "sum" and has_ninf
    if nan or (pinf and ninf):
        return math.nan
    if pinf:
        return math.inf
    if ninf:
        return -math.inf
    if a.size == 0:
        return 0.0
    # every double is m * 2^e, m an integer of 53 bits at most (frexp and
    # ldexp are exact); the m (or m*m, at 2e) are summed per exponent in
    # pieces small enough that no sum of them overflows 64 bits (below
    # 2^25 values), and put together as Python integers
    assert a.size < 2 ** 25, a.size
    frac, e = np.frexp(a)
    m = np.ldexp(frac, 53).astype(np.int64)
    e = e.astype(np.int64) - 53
    order = np.argsort(e, kind="stable")
    m, e = m[order], e[order]
    starts = np.flatnonzero(np.diff(e, prepend=e[0] - 1))
    exps = e[starts].tolist()
    if op == "sum":
        # m = hi 2^26 + lo, 0 <= lo < 2^26
        pieces = [(m >> 26, 26), (m & (2 ** 26 - 1), 0)]
    else:
        # |m| = hi 2^36 + mid 2^18 + lo, each below 2^18, and m*m =
        # hi*hi 2^72 + 2 hi*mid 2^54 + (2 hi*lo + mid*mid) 2^36
        # + 2 mid*lo 2^18 + lo*lo
        m = np.abs(m)
        hi, mid, lo = m >> 36, (m >> 18) & (2 ** 18 - 1), m & (2 ** 18 - 1)
        pieces = [(hi * hi, 72), (hi * mid, 55), (hi * lo, 37), (mid * mid, 36),
                  (mid * lo, 19), (lo * lo, 0)]
        exps = [2 * k for k in exps]
    per_exp = [0] * len(exps)
    for v, shift in pieces:
        for i, t in enumerate(np.add.reduceat(v, starts).tolist()):
            per_exp[i] += t << shift
    low = min(0, exps[0])
    total = sum(t << (k - low) for t, k in zip(per_exp, exps))
    negzero = op == "sum" and bool(np.all((a == 0) & np.signbit(a)))
    return round_once(total, -low, a.size, negzero)


def f32(x):
    """x rounded to float32 (saturating to infinity), as a Python float."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


class Gen:
    """Adversarial arrays: wide and narrow exponents, cancelling pairs,
    ties, near-overflow, subnormals, runs, signed zeros, specials."""

    def __init__(self, seed):
        self.r = random.Random(seed)

    def value(self, dtype, lo, hi):
        r = self.r
        if dtype == "f32":
            lo, hi = max(lo, -149), min(hi, 127)
            return f32(math.ldexp(r.random(), r.randint(lo, hi)) * r.choice((1, -1)))
        lo, hi = max(lo, -1074), min(hi, 1023)
        return math.ldexp(r.random(), r.randint(lo, hi)) * r.choice((1, -1))

    def array(self, dtype, n):
        r = self.r
        kind = r.choice(("wide", "narrow", "pairs", "ties", "big", "tiny", "runs",
                         "zeros", "mixed"))
        emax = 127 if dtype == "f32" else 1023
        emin = -149 if dtype == "f32" else -1074
        if kind == "wide":
            xs = [self.value(dtype, emin, emax - 8) for _ in range(n)]
        elif kind == "narrow":
            e = r.randint(emin + 60, emax - 40)
            xs = [self.value(dtype, e - r.randint(0, 20), e) for _ in range(n)]
        elif kind == "pairs":
            half = [self.value(dtype, emin, emax - 8) for _ in range(n // 2)]
            xs = half + [-x for x in half]
            if n % 2:
                xs.append(self.value(dtype, emin, 0))
        elif kind == "ties":
            # 1 + half an ulp of the result, hidden among cancelling pairs
            one = 2.0 ** r.randint(-60, 60)
            ulp = one * (2.0 ** -52)
            core = [one, r.choice((ulp / 2, -ulp / 2, ulp * 1.5)),
                    r.choice((0.0, ulp / 2 ** 70, -ulp / 2 ** 70))]
            if dtype == "f32":
                core = [f32(x) for x in core]
            half = [self.value(dtype, -20, 20) for _ in range(max(0, n - 3) // 2)]
            xs = core + half + [-x for x in half]
            xs += [0.0] * (n - len(xs))
        elif kind == "big":
            top = FLT_MAX if dtype == "f32" else DBL_MAX
            xs = [r.choice((top, -top, top / 4, -top / 4, 1.0, 2.0 ** -40)) for _ in range(n)]
        elif kind == "tiny":
            xs = [self.value(dtype, emin, emin + 60) for _ in range(n)]
        elif kind == "runs":
            xs = []
            while len(xs) < n:
                xs += [self.value(dtype, -30, 30)] * r.randint(1, 5000)
            xs = xs[:n]
        elif kind == "zeros":
            xs = [r.choice((-0.0, -0.0, -0.0, 0.0)) for _ in range(n)]
            if r.random() < 0.5:
                xs = [-0.0] * n
        else:
            xs = [r.choice((self.value(dtype, -10, 10), self.value(dtype, emin, emax - 8),
                            -0.0)) for _ in range(n)]
        r.shuffle(xs) if kind not in ("ties", "runs") else None
        if r.random() < 0.05 and n:
            xs[r.randrange(n)] = r.choice((math.inf, -math.inf, math.nan))
        return kind, xs


def odd_sizes(r):
    edges = [1, 2, 3, 15, 16, 17, 31, 33, 63, 65, 1000,
             BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK - 17, 2 * BLOCK + 17, 3 * BLOCK + 1]
    return edges + [r.randint(1, 3 * BLOCK) for _ in range(8)]


class Exact(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # a: default chunks (4 MiB) on two workers; b: small chunks on one
        cls.a = Daemon("--threads", "2")
        cls.b = Daemon("--threads", "1", "--chunk-bytes", "256K", "--staging-bytes", "4M")
        cls.ca = Client(cls.a.path, timeout=60)
        cls.cb = Client(cls.b.path, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.ca.close()
        cls.cb.close()
        for d in (cls.a, cls.b):
            rc = d.stop()
            assert rc == 0, rc

    def reduce(self, c, op, dtype, xs):
        err, res = c.reduce(op, dtype, pack(dtype, xs))
        self.assertIsNone(err, (op, dtype, err))
        self.assertEqual(res["count"], len(xs))
        return res["value"]

    def check(self, op, dtype, xs, what, both=False):
        want = reference(op, xs)
        got = self.reduce(self.ca, op, dtype, xs)
        msg = "%s %s %s n=%d (seed %d): got %r, exact sum rounded once is %r" % (
            op, dtype, what, len(xs), SEED, got, want)
        if math.isnan(want):
            self.assertTrue(math.isnan(got), msg)
        else:
            self.assertEqual(bits(got), bits(want), msg)
        if both:
            got_b = self.reduce(self.cb, op, dtype, xs)
            self.assertEqual(bits(got_b), bits(got), "chunking or threads changed the bits: " + msg)
        return want

    def test_random_adversarial(self):
        g = Gen(SEED)
        sizes = odd_sizes(g.r)
        cases = 0
        for i in range(160):
            n = sizes[i] if i < len(sizes) else g.r.randint(1, 3000)
            for dtype in ("f32", "f64"):
                kind, xs = g.array(dtype, n)
                for op in ("sum", "sumsq"):
                    self.check(op, dtype, xs, kind, both=n > 2 * BLOCK)
                    cases += 1
        self.assertGreaterEqual(cases, 600)

    def test_fsum_agrees(self):
        # math.fsum is correctly rounded for f64 sums: a second reference
        g = Gen(SEED + 1)
        for n in (1, 7, BLOCK + 3, 70001):
            for _ in range(3):
                kind, xs = g.array("f64", n)
                if kind == "big" or not all(math.isfinite(x) for x in xs):
                    continue
                want = self.check("sum", "f64", xs, kind)
                fs = math.fsum(xs)
                if fs != 0:
                    self.assertEqual(bits(want), bits(fs), "%s: fsum %r" % (kind, fs))

    def test_known(self):
        big = DBL_MAX / 4
        self.check("sum", "f64", [big, 1.0, -big, 2.0 ** -40] * 50, "max/4 pattern")
        self.assertEqual(self.reduce(self.ca, "sum", "f64", [big, 1.0, -big, 2.0 ** -40] * 50),
                         50.000000000045475)
        r = random.Random(SEED)
        xs = [r.uniform(-1, 1) for _ in range(100000)]
        xs += [-x for x in xs]
        r.shuffle(xs)
        self.assertEqual(bits(self.reduce(self.ca, "sum", "f64", xs)), bits(0.0))
        self.check("sum", "f64", [1.0, 2.0 ** -53], "tie to even, down")
        self.check("sum", "f64", [1.0 + 2.0 ** -52, 2.0 ** -53], "tie to even, up")
        self.check("sum", "f64", [1.0, 2.0 ** -53, 2.0 ** -200], "just above a tie")
        self.check("sum", "f32", [1.0, 2.0 ** -52, 2.0 ** -53], "f32 tie")
        self.check("sum", "f64", [1e308, 1e-308, -1e308, 5e-324], "1e308 and 1e-308")
        self.check("sum", "f64", [DBL_MAX, 2.0 ** 970], "tie at the top: inf")
        self.check("sum", "f64", [DBL_MAX, 2.0 ** 969], "below the top tie")
        self.check("sumsq", "f64", [2.0 ** -540] * 1000, "squares below 2^-1022")
        self.check("sumsq", "f64", [1.5 * 2.0 ** -540] * 1000, "squares below 2^-1074 bits")
        self.check("sumsq", "f64", [1e300, 1e-300], "sumsq overflow")
        # signed zeros, as numpy: -0 only for nothing but -0
        for dtype in ("f32", "f64"):
            for xs, want in (([-0.0], -0.0), ([-0.0, -0.0], -0.0), ([-0.0, 0.0], 0.0),
                             ([], 0.0), ([1.0, -1.0], 0.0), ([-0.0] * (3 * BLOCK + 5), -0.0)):
                got = self.reduce(self.ca, "sum", dtype, xs)
                self.assertEqual(bits(got), bits(want), (dtype, len(xs), xs[:2], got))
            self.assertEqual(bits(self.reduce(self.ca, "sumsq", dtype, [-0.0])), bits(0.0))
            self.assertTrue(math.isnan(self.reduce(self.ca, "sum", dtype,
                                                   [math.inf, 1.0, -math.inf])))
            self.assertEqual(self.reduce(self.ca, "sumsq", dtype, [math.inf, -math.inf]),
                             math.inf)

    def test_large_chunked(self):
        # past 8 MiB: the daemon cuts these into chunks (4 MiB and 256 KiB);
        # arrays, not lists, at this size (NumPy's generator)
        rng = np.random.default_rng(SEED + 2)
        n64 = (8 << 20) // 8 + 12345
        n32 = (8 << 20) // 4 + 777
        # as Gen.value("f64", -1074, 1000): random binades down to the
        # subnormals, either sign
        wide = np.ldexp(rng.random(n64), rng.integers(-1074, 1000, n64, endpoint=True))
        wide *= rng.choice((1.0, -1.0), n64)
        structured = [
            ("f64", "uniform", rng.uniform(-1, 1, n64)),
            ("f32", "uniform", rng.uniform(-1, 1, n32).astype(np.float32)),
            ("f64", "wide", wide),
            ("f32", "runs", np.full(n32, np.float32(0.1))),
        ]
        half = rng.uniform(-1e10, 1e10, n64 // 2)
        xs = np.concatenate([half, -half, [2.0 ** -1000]])
        rng.shuffle(xs)
        structured.append(("f64", "pairs and one tiny", xs))
        for dtype, what, xs in structured:
            for op in ("sum", "sumsq"):
                self.check(op, dtype, xs, what, both=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
