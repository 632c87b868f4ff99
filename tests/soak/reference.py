"""The soak's references: a pool of elements per dtype, with what it takes
to reduce any cyclic range of it exactly, and the order of a float cumsum
(PROTOCOL.md), all computed here, independently of the daemon."""

import array
import math
import struct
from fractions import Fraction

from wire import DTYPES, POOL, U

# ---------------------------------------------------------------- reference

class Pool:
    """POOL elements of one dtype, and what is needed to reduce any cyclic
    range of them exactly: prefix sums as integers (floats scaled by a power
    of two, so that the sums are exact), the block's min and max."""

    def __init__(self, dtype, rng):
        self.dtype = dtype
        self.code = DTYPES[dtype]
        self.size = struct.calcsize(self.code)
        self.is_float = dtype[0] == "f"
        vals = [self._value(rng) for _ in range(POOL)]
        if dtype == "f32":
            vals = list(array.array("f", vals))
        self.vals = vals
        self.raw = array.array(self.code, vals).tobytes()
        self.raw2 = self.raw + self.raw
        # sumsq terms: a float's exact square; an integer converted to
        # double and squared in double (PROTOCOL.md)
        if self.is_float:
            self.sq = [Fraction(v) ** 2 for v in vals]
        else:
            self.sq = [float(v) * float(v) for v in vals]
        if self.is_float:
            self.sum_shift, self.psum = self._scaled_prefix(vals)
        else:
            self.sum_shift, self.psum = 0, self._prefix(vals)
        self.sq_shift, self.psq = self._scaled_prefix(self.sq)
        # sum |x| for the tolerance, exact as well: float prefix sums would
        # lose a short range's magnitude in a long prefix's rounding
        self.abs_shift, self.pabs = self._scaled_prefix([abs(float(v)) for v in vals])
        self.bmin = self._extreme(vals, "min")
        self.bmax = self._extreme(vals, "max")

    def _value(self, rng):
        d = self.dtype
        if self.is_float:
            r = rng.random()
            if r < 0.01:
                return -0.0
            if r < 0.4:
                return rng.uniform(-1e3, 1e3)
            if r < 0.8:
                return rng.uniform(-1, 1) * 2.0 ** rng.randint(-60, 60)
            return float(rng.randint(-5, 5))
        bits = int(d[1:])
        if rng.random() < 0.5:
            lo, hi = (-1000, 1000) if d[0] == "i" else (0, 2000)
        elif d[0] == "i":
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        else:
            lo, hi = 0, (1 << bits) - 1
        return rng.randint(lo, hi)

    @staticmethod
    def _prefix(xs, start=0):
        out = [start]
        acc = start
        for x in xs:
            acc += x
            out.append(acc)
        return out

    @staticmethod
    def _scaled_prefix(xs):
        ratios = [x.as_integer_ratio() for x in xs]
        shift = max(d.bit_length() - 1 for _, d in ratios)
        out = [0]
        acc = 0
        for n, d in ratios:
            acc += n << (shift - (d.bit_length() - 1))
            out.append(acc)
        return shift, out

    @staticmethod
    def _extreme(vals, op):
        m = min(vals) if op == "min" else max(vals)
        if m == 0 and isinstance(m, float):
            # min and max order -0 below +0
            neg = any(v == 0 and math.copysign(1, v) < 0 for v in vals)
            pos = any(v == 0 and math.copysign(1, v) > 0 for v in vals)
            if op == "min":
                m = -0.0 if neg else 0.0
            else:
                m = 0.0 if pos else -0.0
        return m

    def bytes(self, start, count):
        """The packed elements start .. start+count-1 of the cyclic pool."""
        start %= POOL
        out = []
        while count > 0:
            k = min(count, POOL - start)
            out.append(self.raw[start * self.size:(start + k) * self.size])
            count -= k
            start = 0
        return b"".join(out)

    def elements(self, start, count):
        start %= POOL
        out = []
        while count > 0:
            k = min(count, POOL - start)
            out.extend(self.vals[start:start + k])
            count -= k
            start = 0
        return out

    def _range(self, prefix, start, count):
        """Sum of prefix-differenced values over a cyclic range: exact for
        integer prefixes."""
        start %= POOL
        full, rest = divmod(count, POOL)
        total = prefix[POOL] * full
        end = start + rest
        if end <= POOL:
            total += prefix[end] - prefix[start]
        else:
            total += prefix[POOL] - prefix[start] + prefix[end - POOL]
        return total

    @staticmethod
    def _lt(a, b):
        """a below b in min's order: -0 below +0."""
        if a == b and a == 0 and isinstance(a, float):
            return math.copysign(1, a) < math.copysign(1, b)
        return a < b

    def arg_reference(self, op, xs):
        """(value, index) of argmin/argmax over xs (no NaN): the first
        element equal to min/max, -0 below +0."""
        best, at = xs[0], 0
        for i, v in enumerate(xs):
            if (self._lt(v, best) if op == "argmin" else self._lt(best, v)):
                best, at = v, i
        return best, at

    def sum_value(self, xs):
        """sum as the daemon types it: exact integers (i64/u64 wrapping),
        floats exact, rounded once (+0.0 unless every element is -0.0)."""
        if not self.is_float:
            s = sum(xs)
            if self.dtype in ("i64", "u64"):
                s %= 1 << 64
                if self.dtype == "i64" and s >= 1 << 63:
                    s -= 1 << 64
            return s
        if xs and all(v == 0 and math.copysign(1, v) < 0 for v in xs):
            return -0.0
        return float(sum(Fraction(v) for v in xs)) + 0.0

    def moments_reference(self, xs, ddof):
        """(sum, min, max, mean, var) of xs (no NaN, at least one), as
        PROTOCOL.md's moments: mean and var from the exact sums, each
        rounded once."""
        n = len(xs)
        s1 = sum(Fraction(v) for v in xs)
        s2 = sum(Fraction(v) ** 2 for v in xs)
        mean = float(s1 / n)
        if mean == 0 and all(v == 0 and math.copysign(1, v) < 0 for v in xs):
            mean = -0.0
        elif mean == 0 and s1 < 0:
            mean = -0.0
        var = float((s2 - s1 * s1 / n) / (n - ddof)) + 0.0
        return self.sum_value(xs), self._extreme(xs, "min"), self._extreme(xs, "max"), mean, var

    def reference(self, op, start, count):
        """(value, tolerance) for op over the cyclic range; tolerance None
        for results that must be exact."""
        if op in ("min", "max"):
            if count >= POOL:
                return (self.bmin if op == "min" else self.bmax), None
            return self._extreme(self.elements(start, count), op), None
        if op == "sum" and not self.is_float:
            s = self._range(self.psum, start, count)
            if self.dtype in ("i64", "u64"):
                s %= 1 << 64
                if self.dtype == "i64" and s >= 1 << 63:
                    s -= 1 << 64
            return s, None
        if op == "sum":
            exact = self._range(self.psum, start, count) / (1 << self.sum_shift)
            mag = self._range(self.pabs, start, count) / (1 << self.abs_shift)
        else:
            exact = self._range(self.psq, start, count) / (1 << self.sq_shift)
            mag = exact
        if count == 0:
            exact = 0.0
        if self.is_float:
            # exact, rounded once (PROTOCOL.md): the bits, but for the sign
            # of a zero
            return exact, 0.0
        # integer sumsq adds squares rounded to double in double: any order
        # of summation is within (n-1) u sum|x| of the exact sum; allow
        # twice that
        return exact, 2.0 * count * U * abs(mag) + 2.0 ** -1074 * count


def cumsum_one_tile(xs):
    """PROTOCOL.md's order of a float cumsum, for at most one tile (4096
    elements): each of 256 threads' running sums of 16, a Kogge-Stone scan
    of each group of 32 threads' totals, the groups' totals left to right;
    "nothing" is -0.0."""
    assert len(xs) <= 4096
    x = [float(v) for v in xs] + [0.0] * (4096 - len(xs))
    r = []
    for t in range(256):
        acc, row = None, []
        for e in range(16):
            acc = x[16 * t + e] if acc is None else acc + x[16 * t + e]
            row.append(acc)
        r.append(row)
    V, S = [], []
    for w in range(8):
        v = [r[32 * w + l][15] for l in range(32)]
        for d in (1, 2, 4, 8, 16):
            v = [v[l - d] + v[l] if l >= d else v[l] for l in range(32)]
        V.append(v)
        S.append(v[31])
    out = []
    for t in range(256):
        w, l = divmod(t, 32)
        P = -0.0
        for q in range(w):
            P = P + S[q]
        E = P + (V[w][l - 1] if l else -0.0)
        Q = -0.0 + E
        for e in range(16):
            out.append(Q + r[t][e])
    return out[:len(xs)]
