"""The narrow dtypes (f16, bf16, f8e4m3, f8e5m2, i8, u8, i16, u16) at the
socket level, against references computed here from the bit patterns with
the formats' own formulas and fractions.Fraction: every op on socket data
cut into several chunks, in a region at an odd offset, in segments (empty
ones included), and cumsum, whose bits must equal those of the same
elements widened to f32, i32 or u32."""

import math
import os
import random
import struct
import sys
import unittest
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Daemon  # noqa: E402
from test_shm import ShmClient  # noqa: E402

# name: (bytes, exponent bits, mantissa bits, bias, has infinities)
FLOATS = {"f16": (2, 5, 10, 15, True), "bf16": (2, 8, 7, 127, True),
          "f8e4m3": (1, 4, 3, 7, False), "f8e5m2": (1, 5, 2, 15, True)}
# name: (bytes, signed)
INTS = {"i8": (1, True), "u8": (1, False), "i16": (2, True), "u16": (2, False)}
WIDE = {"f16": "f32", "bf16": "f32", "f8e4m3": "f32", "f8e5m2": "f32",
        "i8": "i32", "i16": "i32", "u8": "u32", "u16": "u32"}
OPS = ("sum", "min", "max", "sumsq", "argmin", "argmax", "moments")
CHUNK = 256 << 10  # the smallest --chunk-bytes


def size(dt):
    return (FLOATS.get(dt) or INTS[dt])[0]


def scale(dt):
    """S such that every finite value of dt times 2^S is an integer."""
    if dt in INTS:
        return 0
    _, eb, mb, bias, _ = FLOATS[dt]
    return bias - 1 + mb


_TABLES = {}


def scaled_table(dt):
    """Every pattern's value times 2^scale(dt), an int (from decode), by
    pattern; None for NaN and infinities."""
    table = _TABLES.get(dt)
    if table is None:
        s = Fraction(2) ** scale(dt)
        table = _TABLES[dt] = [None if isinstance(v, float) else int(v * s)
                               for v in (decode(dt, p) for p in range(1 << (8 * size(dt))))]
    return table


def scaled(dt, bits):
    """A finite pattern's value times 2^scale(dt), an int (from decode)."""
    return scaled_table(dt)[bits]


def decode(dt, bits):
    """A bit pattern's value: a Fraction, or a float for NaN and infinities."""
    if dt in INTS:
        nbytes, signed = INTS[dt]
        if signed and bits >= 1 << (8 * nbytes - 1):
            bits -= 1 << (8 * nbytes)
        return Fraction(bits)
    nbytes, eb, mb, bias, inf = FLOATS[dt]
    sign = -1 if bits >> (eb + mb) else 1
    e, m = (bits >> mb) & ((1 << eb) - 1), bits & ((1 << mb) - 1)
    top = (1 << eb) - 1
    if inf and e == top:
        return sign * math.inf if m == 0 else math.nan
    if not inf and e == top and m == (1 << mb) - 1:
        return math.nan
    if e == 0:
        return sign * Fraction(m) * Fraction(2) ** (1 - bias - mb)
    return sign * Fraction(m + (1 << mb)) * Fraction(2) ** (e - bias - mb)


def widen_bits(dt, bits):
    """The element as the wide dtype's little-endian bytes (f32 for the
    floats: exact, each value being one)."""
    v = decode(dt, bits)
    if dt in INTS:
        return struct.pack("<i" if INTS[dt][1] else "<I", int(v))
    if isinstance(v, float):
        if math.isnan(v):
            return struct.pack("<I", 0x7fc00000 | (bits >> (8 * size(dt) - 1)) << 31)
        return struct.pack("<f", v)
    f = struct.unpack("<f", struct.pack("<f", float(v)))[0]
    assert Fraction(f) == v, (dt, bits)
    if v == 0 and bits >> (8 * size(dt) - 1):
        return struct.pack("<f", -0.0)
    return struct.pack("<f", f)


def pack(dt, patterns):
    return struct.pack("<%d%s" % (len(patterns), "B" if size(dt) == 1 else "H"), *patterns)


def finite_patterns(dt, rng, n):
    """Random patterns of the dtype with finite values."""
    table, nbits = scaled_table(dt), 8 * size(dt)
    out = []
    while len(out) < n:
        p = rng.getrandbits(nbits)
        if table[p] is not None:
            out.append(p)
    return out


def reference(op, dt, ints):
    """op of finite elements as the daemon answers it, from their values
    times 2^scale(dt) (ints), exactly: Fraction rounds once to float64."""
    one = Fraction(1, 1 << scale(dt))
    is_float = dt in FLOATS
    if op == "sum":
        s = sum(ints) * one
        return float(s) if is_float else int(s)
    if op == "sumsq":
        return float(sum(v * v for v in ints) * one * one)
    if op in ("min", "max", "argmin", "argmax"):
        pick = min if op in ("min", "argmin") else max
        best = pick(ints)
        value = float(best * one) if is_float else int(best)
        if op in ("min", "max"):
            return value
        return value, ints.index(best)
    raise ValueError(op)


class Narrow(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--chunk-bytes", str(CHUNK))
        cls.c = ShmClient(cls.d.path, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()

    def reduce(self, **params):
        err, res = self.c.call("reduce", [params])
        self.assertIsNone(err, params.get("dtype"))
        return res

    def check_value(self, got, want, what):
        if isinstance(want, float):
            self.assertIsInstance(got, float, what)
            if math.isnan(want):
                self.assertTrue(math.isnan(got), what)
            else:
                self.assertEqual(struct.pack("<d", got), struct.pack("<d", want), (what, got, want))
        else:
            self.assertEqual(got, want, what)

    def check_ops(self, dt, patterns, **where):
        table = scaled_table(dt)
        vals = [table[p] for p in patterns]
        one = Fraction(1, 1 << scale(dt))
        for op in OPS:
            res = self.reduce(op=op, dtype=dt, **where)
            what = "%s %s n=%d" % (op, dt, len(vals))
            if op == "moments":
                self.assertEqual(res["count"], len(vals), what)
                self.check_value(res["sum"], reference("sum", dt, vals), what)
                self.check_value(res["min"], reference("min", dt, vals), what)
                self.check_value(res["max"], reference("max", dt, vals), what)
                n, s1, s2 = len(vals), sum(vals), sum(v * v for v in vals)
                mean = s1 * one / n
                var = (s2 - Fraction(s1 * s1, n)) * one * one / n
                self.check_value(res["mean"], float(mean), what)
                self.check_value(res["var"], float(var), what)
                continue
            want = reference(op, dt, vals)
            self.assertEqual(res["count"], len(vals), what)
            if op.startswith("arg"):
                self.check_value(res["value"], want[0], what)
                self.assertEqual(res["index"], want[1], what)
            else:
                self.check_value(res["value"], want, what)

    def test_info_lists_dtypes(self):
        err, info = self.c.call("info")
        self.assertIsNone(err)
        self.assertEqual(set(info["dtypes"]),
                         {"i32", "i64", "u32", "u64", "f32", "f64", *FLOATS, *INTS})

    def test_ops_over_chunks(self):
        """Every op, socket data of several chunks (and one element)."""
        rng = random.Random(41)
        for dt in (*FLOATS, *INTS):
            n = (CHUNK * 3 // 2) // size(dt) + 3
            patterns = finite_patterns(dt, rng, n)
            self.check_ops(dt, patterns, data=pack(dt, patterns))
            self.check_ops(dt, patterns[:1], data=pack(dt, patterns[:1]))

    def test_cancellation_and_specials(self):
        rng = random.Random(7)
        for dt in FLOATS:
            half = finite_patterns(dt, rng, 3001)
            sign = 1 << (8 * size(dt) - 1)
            both = half + [p ^ sign for p in half]
            rng.shuffle(both)
            res = self.reduce(op="sum", dtype=dt, data=pack(dt, both))
            self.assertEqual(struct.pack("<d", res["value"]), struct.pack("<d", 0.0), dt)
            negzero = self.reduce(op="sum", dtype=dt, data=pack(dt, [sign] * 40))
            self.assertEqual(struct.pack("<d", negzero["value"]), struct.pack("<d", -0.0), dt)
            # every NaN encoding is NaN, wherever it lies
            table = scaled_table(dt)
            nans = [p for p in range(1 << (8 * size(dt)))
                    if table[p] is None and math.isnan(decode(dt, p))]
            for p in rng.sample(nans, min(len(nans), 8)):
                data = pack(dt, half[:100] + [p] + half[100:200])
                for op in ("sum", "min", "max", "sumsq"):
                    self.assertTrue(math.isnan(self.reduce(op=op, dtype=dt, data=data)["value"]),
                                    (op, dt, hex(p)))
                res = self.reduce(op="argmax", dtype=dt, data=data)
                self.assertEqual(res["index"], 100, dt)

    def test_largest_with_smallest(self):
        """The largest finite f16 many times over, cancelled, beside the
        smallest subnormal: the sum is that subnormal, exactly."""
        rng = random.Random(13)
        patterns = [0x7bff] * 50000 + [0xfbff] * 50000 + [0x0001]
        rng.shuffle(patterns)
        res = self.reduce(op="sum", dtype="f16", data=pack("f16", patterns))
        self.assertEqual(res["value"], 2.0 ** -24)
        res = self.reduce(op="sum", dtype="f16", data=pack("f16", [0x7bff] * 100000 + [0x0001]))
        self.assertEqual(res["value"], float(Fraction(65504 * 100000) + Fraction(1, 1 << 24)))

    def test_sums_past_the_dtype(self):
        """README's figures: sums the dtype itself cannot hold."""
        one = {"f16": 0x3c00, "bf16": 0x3f80}
        self.assertEqual(self.reduce(op="sum", dtype="f16", data=pack("f16", [one["f16"]] * 70000))
                         ["value"], 70000.0)
        self.assertEqual(self.reduce(op="sum", dtype="bf16", data=pack("bf16", [one["bf16"]] * 1000))
                         ["value"], 1000.0)
        self.assertEqual(self.reduce(op="sum", dtype="u8", data=b"\xff" * 100000)["value"],
                         25500000)

    def test_region_at_odd_offset(self):
        rng = random.Random(3)
        for dt in (*FLOATS, *INTS):
            n = 70001
            patterns = finite_patterns(dt, rng, n)
            body = pack(dt, patterns)
            offset = 3 * size(dt) + (1 if size(dt) == 1 else 0)
            region, m = self.c.map(offset + len(body) + 16, fill=b"\xff" * offset + body)
            try:
                self.check_ops(dt, patterns, region=region, offset=offset, count=n)
            finally:
                self.assertEqual(self.c.call("unmap", [{"region": region}])[0], None)
                m.close()

    def test_segments_and_empty_ones(self):
        rng = random.Random(5)
        empty = {"i8": (127, -128), "i16": (32767, -32768), "u8": (255, 0), "u16": (65535, 0)}
        for dt in (*FLOATS, *INTS):
            patterns = finite_patterns(dt, rng, 5000)
            cuts = [0, 0, 1, 1, 999, 2500, 2500, 5000]
            offsets = struct.pack("<%dQ" % len(cuts), *cuts)
            for op in ("sum", "min", "max"):
                res = self.reduce(op=op, dtype=dt, offsets=offsets, data=pack(dt, patterns))
                got = res["values"]
                self.assertEqual(len(got), (len(cuts) - 1) * 8, (op, dt))
                for k in range(len(cuts) - 1):
                    a, b = cuts[k], cuts[k + 1]
                    raw = got[8 * k:8 * k + 8]
                    if dt in FLOATS:
                        v = struct.unpack("<d", raw)[0]
                    else:
                        v = struct.unpack("<q" if INTS[dt][1] else "<Q", raw)[0]
                    if a == b:
                        if op == "sum":
                            want = 0.0 if dt in FLOATS else 0
                        elif dt in FLOATS:
                            want = math.inf if op == "min" else -math.inf
                        else:
                            want = empty[dt][0 if op == "min" else 1]
                    else:
                        want = reference(op, dt, [scaled(dt, p) for p in patterns[a:b]])
                    self.check_value(v, want, (op, dt, k))

    def test_cumsum_as_widened(self):
        """cumsum's bits are those of the widened elements' cumsum."""
        rng = random.Random(11)
        for dt in (*FLOATS, *INTS):
            n = 3 * 4096 + 17
            patterns = finite_patterns(dt, rng, n)
            narrow = self.reduce(op="cumsum", dtype=dt, data=pack(dt, patterns))
            wide = self.reduce(op="cumsum", dtype=WIDE[dt],
                               data=b"".join(widen_bits(dt, p) for p in patterns))
            self.assertEqual(narrow["count"], n)
            self.assertEqual(narrow["values"], wide["values"], dt)
            # and the integers' against their own running sums
            if dt in INTS:
                run, want = 0, []
                for p in patterns:
                    run += scaled(dt, p)
                    want.append(run)
                fmt = "<%d%s" % (n, "q" if INTS[dt][1] else "Q")
                self.assertEqual(list(struct.unpack(fmt, narrow["values"])), want, dt)

    def test_bad_input_keeps_the_connection(self):
        cases = [({"dtype": "i16", "data": b"\x01\x02\x03"}, "not a multiple of the i16"),
                 ({"dtype": "f16", "data": [0.1]}, "is not a value of the dtype"),
                 ({"dtype": "f8e4m3", "data": [math.inf]}, "does not have"),
                 ({"dtype": "u8", "data": [256]}, "out of range"),
                 ({"dtype": "f9", "data": [1]}, "unknown dtype")]
        for params, why in cases:
            err, res = self.c.call("reduce", [{"op": "sum", **params}])
            self.assertEqual(err["code"], "invalid_params", params)
            self.assertIn(why, err["message"], params)
        self.assertEqual(self.reduce(op="sum", dtype="u8", data=[255, 1])["value"], 256)


if __name__ == "__main__":
    if not os.environ.get("GPURED"):
        print("GPURED is not set: skipping")
        sys.exit(77)
    del BACKEND
    unittest.main(verbosity=2)
