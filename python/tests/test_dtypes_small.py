"""The dtypes of 16 bits or fewer (f16, bf16, f8e4m3, f8e5m2, i8, u8, i16,
u16, and NumPy's bool as u8): every op against references built here from
the elements' exact values (the floats decoded from their bits by the IEEE
formula, added with math.fsum and exact integers, rounded once; the prefix
sums in PROTOCOL.md's order, step by step), on every bit pattern, random
arrays of odd sizes and adversarial values; the results typed as
PROTOCOL.md says, with partials, segments and prefix sums. The other ways
in (regions, submit and asyncio, ml_dtypes, PyTorch) and what the daemon
refuses: test_dtypes_small_ways.py.

Without ml_dtypes, bf16 and float8 arrays go as PyTorch's CPU tensors of
them do, as their bits (gpured._wire.Typed); with it, as its arrays too."""

import functools
import math
from fractions import Fraction

import numpy as np
import pytest

import gpured
from gpured import _wire

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

# exponent bits, mantissa bits, and whether the top exponent holds the
# infinities and NaNs (IEEE) or only S.1111.111 is NaN (E4M3 "fn")
FORMATS = {"f16": (5, 10, True), "bf16": (8, 7, True), "f8e4m3": (4, 3, False),
           "f8e5m2": (5, 2, True)}
FLOATS = list(FORMATS)
INTS = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16}
BITS = {"f16": np.uint16, "bf16": np.uint16, "f8e4m3": np.uint8, "f8e5m2": np.uint8}
ML_NAMES = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
ALL = FLOATS + list(INTS)


# ---- the elements ----

def decode(name, bits):
    """The values of float dtype name's bit patterns, as float64 (exact),
    from the formula: (-1)^s 2^(e - bias) (1 + m / 2^M), subnormals
    2^(1 - bias) m / 2^M."""
    e_bits, m_bits, ieee = FORMATS[name]
    b = np.asarray(bits).astype(np.int64)
    neg = (b >> (e_bits + m_bits)) & 1
    e = (b >> m_bits) & ((1 << e_bits) - 1)
    m = b & ((1 << m_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    top = (1 << e_bits) - 1
    v = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                 np.ldexp((m + (1 << m_bits)).astype(np.float64),
                          (np.maximum(e, 1) - bias - m_bits).astype(np.int32)))
    if ieee:
        v = np.where(e == top, np.where(m == 0, np.inf, np.nan), v)
    else:
        v = np.where((e == top) & (m == (1 << m_bits) - 1), np.nan, v)
    return np.where(neg == 1, -v, v)


@functools.lru_cache(maxsize=None)
def _patterns(name):
    """{(value, sign): first bit pattern of it} of float dtype name, and a
    NaN's pattern."""
    pats = np.arange(1 << (8 * np.dtype(BITS[name]).itemsize)).astype(BITS[name])
    table = {}
    nan = None
    for p, v in zip(pats.tolist(), decode(name, pats).tolist()):
        if math.isnan(v):
            nan = p if nan is None else nan
        else:
            table.setdefault((v, math.copysign(1.0, v)), p)
    return table, nan


def encode(name, values):
    """The bit patterns of values that float dtype name holds exactly (found
    among every pattern: the decoder is the one source of truth)."""
    table, nan = _patterns(name)
    return np.array([nan if math.isnan(v) else table[(v, math.copysign(1.0, v))]
                     for v in values], dtype=BITS[name])


def as_input(name, bits, ml=False):
    """What the client is handed for float dtype name's bit patterns: a
    float16 array; an ml_dtypes array (ml=True); else the Typed bits that
    PyTorch's CPU tensors of bf16 and float8 become."""
    if name == "f16":
        return bits.view("<f2")
    if ml:
        return bits.view(getattr(ml_dtypes, ML_NAMES[name]))
    return _wire.Typed(bits, name)


def values_of(name, a):
    """The exact values of a (bits for floats, integers for ints): floats as
    float64, integers as Python ints."""
    if name in FORMATS:
        return decode(name, a)
    return [int(v) for v in np.asarray(a).tolist()]


# ---- the references ----

def _neg(v):
    return math.copysign(1.0, v) < 0


def _has(v, what):
    return any(x == what for x in v)


def ref_sum(name, v):
    if name not in FORMATS:
        return sum(v)
    if any(math.isnan(x) for x in v) or (_has(v, math.inf) and _has(v, -math.inf)):
        return math.nan
    if _has(v, math.inf) or _has(v, -math.inf):
        return math.inf if _has(v, math.inf) else -math.inf
    s = math.fsum(v)
    if s == 0:
        return -0.0 if len(v) and all(x == 0 and _neg(x) for x in v) else 0.0
    return s


def ref_sumsq(name, v):
    if name not in FORMATS:
        return float(sum(x * x for x in v))
    if any(math.isnan(x) for x in v):
        return math.nan
    if any(math.isinf(x) for x in v):
        return math.inf
    return math.fsum(x * x for x in v)    # a square of these is a double


def ref_arg(op, v):
    """(value, index) of argmin/argmax (min/max: the value): the first NaN
    if there is one, else the first least (greatest) value, -0 below +0."""
    a = np.asarray(v)
    low = op in ("min", "argmin")
    if a.dtype.kind != "f":
        i = int(np.argmin(a) if low else np.argmax(a))
        return int(a[i]), i
    nan = np.flatnonzero(np.isnan(a))
    if nan.size:
        return math.nan, int(nan[0])
    best = a.min() if low else a.max()
    hits = a == best
    if best == 0:
        neg, pos = hits & np.signbit(a), hits & ~np.signbit(a)
        hits = neg if (neg.any() if low else not pos.any()) else pos
    i = int(np.flatnonzero(hits)[0])
    return float(a[i]), i


def _exact(v, squares=False):
    """The exact sum of v (or of their squares) as a Fraction: floats of
    these dtypes are multiples of 2**-133, so each times 2**140 is an
    integer that a double holds."""
    if len(v) and isinstance(v[0], float):
        k = 140
        ints = [int(x) for x in np.ldexp(np.asarray(v, np.float64), k).tolist()]
    else:
        k, ints = 0, v
    if squares:
        return Fraction(sum(i * i for i in ints), 1 << (2 * k))
    return Fraction(sum(ints), 1 << k)


def ref_moments(name, v, ddof):
    n = len(v)
    total = ref_sum(name, v)
    lo, hi = ref_arg("min", v)[0], ref_arg("max", v)[0]
    if name in FORMATS:
        if any(math.isnan(x) or math.isinf(x) for x in v):
            return n, total, lo, hi, total, math.nan
    s1, s2 = _exact(v), _exact(v, True)
    mean = float(s1 / n) if s1 else (total if name in FORMATS else 0.0)
    c = n * s2 - s1 * s1
    var = float(c / (n * (n - ddof))) if n > ddof else math.nan
    return n, total, lo, hi, mean, var


def order_cumsum(v):
    """PROTOCOL.md's order of a float cumsum ("cumsum", steps 1 to 7) over
    the float64 values v, each addition a float64 one; "nothing" is -0.0."""
    n = len(v)
    tiles = max(1, -(-n // 4096))
    x = np.zeros(tiles * 4096)
    x[:n] = v
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.add.accumulate(x.reshape(tiles, 256, 16), axis=2)      # step 2
        V = r[:, :, 15].reshape(tiles, 8, 32).copy()
        for d in (1, 2, 4, 8, 16):                                      # step 3
            nv = V.copy()
            nv[:, :, d:] = V[:, :, :-d] + V[:, :, d:]
            V = nv
        S = V[:, :, 31]
        P = np.empty((tiles, 8))
        acc = np.full(tiles, -0.0)
        for w in range(8):                                              # step 4
            P[:, w] = acc
            acc = acc + S[:, w]
        A = acc
        before = np.concatenate([np.full((tiles, 8, 1), -0.0), V[:, :, :31]], axis=2)
        E = (P[:, :, None] + before).reshape(tiles, 256)
        F = []
        for j in range(tiles):                                          # step 5
            f = A[j]
            z = ((j + 1) & -(j + 1)).bit_length() - 1
            for L in range(1, z + 1):
                f = F[j - (1 << (L - 1))] + f
            F.append(f)
        X = np.empty(tiles)
        for j in range(tiles):                                          # step 6
            c = -0.0
            for b in reversed(range(j.bit_length())):
                if j >> b & 1:
                    q = j & ~((1 << (b + 1)) - 1)
                    c = c + F[q + (1 << b) - 1]
            X[j] = c
        out = (X[:, None, None] + E[:, :, None]) + r                    # step 7
    return out.reshape(-1)[:n]


def same(a, b):
    """a and b the same number: NaN for NaN, and the sign of a zero."""
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def same_arrays(a, b):
    """The same numbers, in arrays of one dtype and shape, as same() says."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        bits = a.view(np.int64) == b.view(np.int64)
        return bool(np.all(bits | (np.isnan(a) & np.isnan(b))))
    return np.array_equal(a, b)


def kind_of(name):
    """The Python type of sum's, min's and max's value for name."""
    return float if name in FORMATS else int


# ---- the checks ----

def check_all(c, name, x, v, ddof=1, cumsum=True):
    """Every whole-array op of x (the client's input) against the
    references of its exact values v (cumsum too, unless told not)."""
    n = len(v)
    got = c.reduce("sum", x, full=True)
    assert got.count == n and type(got.value) is kind_of(name)
    assert same(got.value, ref_sum(name, v)), (name, got, ref_sum(name, v))
    got = c.sumsq(x)
    assert type(got) is float and same(got, ref_sumsq(name, v)), (name, got)
    for op in ("min", "max"):
        want = ref_arg(op, v)[0]
        got = c.reduce(op, x)
        assert type(got) is kind_of(name) and same(got, want), (name, op, got, want)
    for op in ("argmin", "argmax"):
        want = ref_arg(op, v)
        got = c.reduce(op, x)
        assert isinstance(got, gpured.ArgResult) and got.count == n
        assert same(got.value, want[0]) and got.index == want[1], (name, op, got, want)
    if n > ddof:
        got = c.moments(x, ddof=ddof)
        want = ref_moments(name, v, ddof)
        assert all(same(g, w) for g, w in zip(got, want)), (name, got, want)
        assert type(got.mean) is float and type(got.var) is float
    if cumsum:
        check_cumsum(c, name, x, v)


def check_cumsum(c, name, x, v):
    got = c.cumsum(x)
    if name in FORMATS:
        assert got.dtype == np.float64
        want = order_cumsum(np.asarray(v, dtype=np.float64))
    else:
        assert got.dtype == (np.int64 if name[0] == "i" else np.uint64)
        want = np.cumsum(np.array(v, dtype=got.dtype), dtype=got.dtype)
    assert got.shape == (len(v),)
    bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))
                           if got.dtype.kind == "f" else got == want))
    assert bad.size == 0, (name, bad[:5], got[bad[:5]], want[bad[:5]])


def check_segments(c, name, x, v, offsets):
    """Every op with offsets against the references of each segment."""
    k = len(offsets) - 1
    segs = [v[offsets[i]:offsets[i + 1]] for i in range(k)]
    wide = np.float64 if name in FORMATS else (np.int64 if name[0] == "i" else np.uint64)
    info = None if name in FORMATS else np.iinfo(INTS[name])
    empty = {"min": math.inf if info is None else info.max,
             "max": -math.inf if info is None else info.min}
    got = c.sum(x, offsets=offsets, full=True)
    assert got.value.dtype == wide and list(got.count) == [len(s) for s in segs]
    assert all(same(g.item(), ref_sum(name, s)) for g, s in zip(got.value, segs))
    got = c.sumsq(x, offsets=offsets)
    assert got.dtype == np.float64
    assert all(same(float(g), ref_sumsq(name, s)) for g, s in zip(got, segs))
    for op in ("min", "max"):
        got = c.reduce(op, x, offsets=offsets)
        assert got.dtype == wide
        for g, s in zip(got.tolist(), segs):
            assert same(g, ref_arg(op, s)[0] if s else empty[op]), (name, op, g, s)
    for op in ("argmin", "argmax"):
        got = c.reduce(op, x, offsets=offsets)
        for g, i, s in zip(got.value.tolist(), got.index.tolist(), segs):
            want = ref_arg(op, s) if s else (empty[op[3:]], -1)
            assert same(g, want[0]) and i == want[1], (name, op, g, i, want)
    got = c.moments(x, offsets=offsets)
    for i, s in enumerate(segs):
        row = [f[i].item() for f in got]
        if s:
            want = ref_moments(name, s, 0)
        else:
            want = (0, 0.0 if name in FORMATS else 0, empty["min"], empty["max"], math.nan,
                    math.nan)
        assert all(same(g, w) for g, w in zip(row, want)), (name, i, row, want)


def check_partials(c, name, x_of, v, cuts):
    """The partials of the pieces between cuts combine into what one
    request over the whole gives, and to the references."""
    for op in ("sum", "sumsq", "min", "max"):
        parts = [c.reduce(op, x_of(a, b), partial=True) for a, b in zip(cuts, cuts[1:])
                 if b > a or op in ("sum", "sumsq")]
        whole = c.reduce(op, x_of(cuts[0], cuts[-1]))
        got = gpured.combine(parts)
        assert same(got, whole), (name, op, got, whole)
        want = {"sum": ref_sum, "sumsq": ref_sumsq}.get(op)
        want = want(name, v) if want else ref_arg(op, v)[0]
        assert same(got, want), (name, op, got, want)


def offsets_for(n, step):
    """Cuts every step elements, with empty segments among them."""
    o = list(range(0, n, step)) + [n]
    return [0, 0] + o[1:3] + [o[2]] + o[3:]


# ---- the decoder itself, against other sources ----

def test_decoder():
    every16 = np.arange(1 << 16).astype(np.uint16)
    every8 = np.arange(256).astype(np.uint8)
    assert same_arrays(decode("f16", every16), every16.view("<f2").astype(np.float64))
    with np.errstate(invalid="ignore"):
        f32 = (every16.astype(np.uint32) << 16).view("<f4").astype(np.float64)
        top = (every8.astype(np.uint16) << 8).view("<f2").astype(np.float64)
    assert same_arrays(decode("bf16", every16), f32)
    assert same_arrays(decode("f8e5m2", every8), top)
    e4 = decode("f8e4m3", every8)
    assert e4[0x7e] == 448 and e4[0x01] == 2.0 ** -9 and e4[0x38] == 1.0
    assert e4[0x78] == 256 and e4[0x08] == 2.0 ** -6 and e4[0x07] == 7 * 2.0 ** -9
    assert np.isnan(e4[[0x7f, 0xff]]).all() and np.isnan(e4).sum() == 2
    assert not np.isinf(e4).any() and e4[0xfe] == -448 and _neg(e4[0x80])
    assert list(encode("bf16", [1.0, -0.0, 2.0 ** 53])) == [0x3f80, 0x8000, 0x5a00]
    if ml_dtypes is not None:
        for name in ML_NAMES:
            bits = every16 if BITS[name] is np.uint16 else every8
            with np.errstate(invalid="ignore"):
                ml = bits.view(getattr(ml_dtypes, ML_NAMES[name])).astype(np.float64)
            assert same_arrays(decode(name, bits), ml), name


def test_names_and_info(client):
    info = client.info()
    assert set(info["dtypes"]) == set(gpured.DTYPE_NAMES) and len(gpured.DTYPE_NAMES) == 14
    wire = {np.float16: "f16", np.int8: "i8", np.uint8: "u8", np.int16: "i16",
            np.uint16: "u16", np.bool_: "u8", ">f2": "f16", ">i2": "i16", ">u2": "u16"}
    for dt, name in wire.items():
        a, got = _wire.as_array(np.ones((2, 3), dt)[:, ::2])
        assert got == name and a.flags.c_contiguous
    for bad in (np.complex64, np.object_, "V2", "<M8[s]"):
        with pytest.raises(TypeError) as e:
            client.sum(np.zeros(3, bad))
        for word in ("float16", "int8", "uint16", "bool", "bfloat16", "float8_e4m3fn"):
            assert word in str(e.value)
    assert client.ping() == "pong"


# ---- every bit pattern ----

@pytest.mark.parametrize("name", FLOATS)
def test_every_float_pattern(client, name):
    bits = np.arange(1 << (8 * np.dtype(BITS[name]).itemsize)).astype(BITS[name])
    v = decode(name, bits)
    x = as_input(name, bits)
    # as one array: NaN wins every op; the first NaN is argmin's and argmax's
    for op in ("sum", "sumsq", "min", "max"):
        assert math.isnan(client.reduce(op, x))
    first_nan = int(np.flatnonzero(np.isnan(v))[0])
    assert client.argmin(x).index == client.argmax(x).index == first_nan
    m = client.moments(x)
    assert m.count == len(v) and all(math.isnan(f) for f in m[1:])
    # every pattern but the NaNs (the infinities too), then the finite
    # ones, then those of sign 0: every op against the references
    keep = ~np.isnan(v)
    finite = np.isfinite(v)
    for sel in (keep, finite, finite & (bits < (1 << (8 * bits.itemsize - 1)))):
        b = bits[sel]
        check_all(client, name, as_input(name, b), v[sel].tolist())
    # in pieces: segments (some empty), and partials that combine
    step = 256 if bits.itemsize == 2 else 16
    check_segments(client, name, x, v.tolist(), offsets_for(len(v), step))
    b = bits[finite]
    n = len(b)
    cuts = [0, 1, 2, n // 3, n // 3, n // 2, n - 3, n]
    check_partials(client, name, lambda lo, hi: as_input(name, b[lo:hi]), v[finite].tolist(),
                   cuts)
    # the sign of zero: +0 and -0 alone and together
    z = encode(name, [-0.0, 0.0])
    assert same(client.sum(as_input(name, z[:1])), -0.0)
    assert same(client.sum(as_input(name, z)), 0.0)
    assert same(client.min(as_input(name, z[::-1])), -0.0)
    assert client.argmax(as_input(name, z)).index == 1


@pytest.mark.parametrize("name", list(INTS))
def test_every_int_pattern(client, name):
    dt = np.dtype(INTS[name])
    info = np.iinfo(dt)
    x = np.arange(info.min, info.max + 1).astype(dt)
    v = x.tolist()
    check_all(client, name, x, v, ddof=1)
    rng = np.random.default_rng(len(v))
    shuffled = x[rng.permutation(len(v))]
    check_all(client, name, shuffled, shuffled.tolist(), ddof=0)
    step = 256 if dt.itemsize == 2 else 16
    check_segments(client, name, shuffled, shuffled.tolist(), offsets_for(len(v), step))
    cuts = [0, 3, 3, len(v) // 3, len(v) // 2, len(v)]
    check_partials(client, name, lambda lo, hi: shuffled[lo:hi], v, cuts)
    # the extremes many times over: sums far past the dtype's own range
    for e in (info.min, info.max):
        y = np.full(100_001, e, dt)
        assert client.sum(y) == 100_001 * int(e)
        assert client.sumsq(y) == float(100_001 * int(e) ** 2)
        assert client.cumsum(y)[-1] == 100_001 * int(e)


# ---- random arrays of odd sizes ----

SIZES = (1, 3, 17, 1001, 4097 * 3)


def random_bits(name, n, rng, specials=False):
    """n random patterns of float dtype name: finite ones (specials: any)."""
    size = np.dtype(BITS[name]).itemsize
    b = rng.integers(0, 1 << (8 * size), n, dtype=np.int64).astype(BITS[name])
    if not specials:
        v = decode(name, b)
        b = np.where(np.isfinite(v), b, b & ~BITS[name](1 << (8 * size - 2)))
    return b


@pytest.mark.parametrize("name", ALL)
def test_random_odd_sizes(client, name):
    rng = np.random.default_rng(sum(map(ord, name)))
    for n in SIZES:
        if name in FORMATS:
            b = random_bits(name, n, rng)
            x, v = as_input(name, b), decode(name, b).tolist()
            assert np.isfinite(v).all()
            # the same bits as the elements widened to float32 (exactly)
            wide = np.asarray(v, np.float32)
            for op in ("sum", "sumsq", "min", "max"):
                assert same(client.reduce(op, x), client.reduce(op, wide)), (name, op, n)
            assert same_arrays(client.cumsum(x), client.cumsum(wide))
        else:
            info = np.iinfo(INTS[name])
            x = rng.integers(info.min, info.max, n, dtype=INTS[name], endpoint=True)
            v = x.tolist()
        check_all(client, name, x, v, ddof=1)
        if n > 3:
            check_segments(client, name, x, v, [0, 1, 1, n // 2, n - 1, n])
    # 2-D and strided: the elements in C order
    if name in FORMATS:
        b = random_bits(name, 6 * 35, rng).reshape(6, 35)
        x = as_input(name, b[:, 1::3]) if name != "f16" else b.view("<f2")[:, 1::3]
        v = decode(name, b[:, 1::3]).ravel().tolist()
    else:
        x = np.arange(6 * 35).astype(INTS[name]).reshape(6, 35)[:, 1::3]
        v = x.ravel().tolist()
    check_all(client, name, x, v)
    check_segments(client, name, x, v, [0, 12, 24, 36, 72])


def test_bool(client):
    rng = np.random.default_rng(3)
    x = rng.random(10007) < 0.3
    count = int(x.sum())
    got = client.reduce("sum", x, full=True)
    assert got == (count, 10007) and type(got.value) is int
    assert (client.min(x), client.max(x)) == (0, 1)
    assert client.sumsq(x) == float(count)
    assert client.argmax(x).index == int(np.argmax(x))
    assert client.argmin(x).index == int(np.argmin(x))
    c = client.cumsum(x)
    assert c.dtype == np.uint64 and np.array_equal(c, np.cumsum(x, dtype=np.uint64))
    m = client.moments(x, ddof=1)
    assert m[:4] == (10007, count, 0, 1)
    assert m.mean == count / 10007
    assert m.var == float(Fraction(count * 10007 - count * count, 10007 * 10006))
    seg = client.sum(x, offsets=[0, 5, 5, 10007])
    assert seg.dtype == np.uint64 and list(seg) == [x[:5].sum(), 0, x[5:].sum()]
    assert client.sum(np.zeros(0, bool)) == 0
    assert client.sum(np.ones((3, 4), bool)[:, ::2]) == 6


# ---- adversarial values ----

def test_cancellation_and_zeros(client):
    for name in FLOATS:
        big = {"f16": 65504.0, "bf16": 2.0 ** 127, "f8e4m3": 448.0, "f8e5m2": 57344.0}[name]
        tiny = float(decode(name, np.array([1], BITS[name]))[0])
        vals = [big, tiny, -big, 1.0, -tiny, -1.0] * 7
        x = as_input(name, encode(name, vals))
        assert same(client.sum(x), 0.0)
        m = client.moments(x)
        assert same(m.mean, 0.0) and m.var == float(_exact(vals, True) / len(vals))
        negz = as_input(name, encode(name, [-0.0] * 5))
        assert same(client.sum(negz), -0.0) and same(client.max(negz), -0.0)
        assert same(client.moments(negz).mean, -0.0)
        assert client.cumsum(negz).tobytes() == np.full(5, -0.0).tobytes()
        mixed = as_input(name, encode(name, [-0.0, 0.0, -0.0]))
        assert same(client.sum(mixed), 0.0) and same(client.min(mixed), -0.0)
        assert client.argmin(mixed).index == 0 and client.argmax(mixed).index == 1
        assert same_arrays(client.cumsum(mixed), [-0.0, 0.0, 0.0])
        # cancellation in every segment, and in pieces
        check_segments(client, name, x, vals, [0, 6, 12, 12, 42])
        bits = encode(name, vals)
        check_partials(client, name, lambda lo, hi: as_input(name, bits[lo:hi]), vals,
                       [0, 5, 13, 30, 42])
    for name, dt in INTS.items():
        info = np.iinfo(dt)
        x = np.array([info.max, info.min, -info.max if info.min < 0 else 0, 1] * 3, dt)
        assert client.sum(x) == sum(x.tolist())


def test_ties_at_the_rounding_point(client):
    """Exact sums halfway between two doubles round to even: a running sum
    in float64 gets some of these wrong."""
    # bf16 holds 2**53 and 1: 2**53 + 1 and 2**53 + 3 are ties
    cases = {"bf16": [([2.0 ** 53, 1.0], 2.0 ** 53), ([2.0 ** 53, 1.0, 1.0, 1.0], 2.0 ** 53 + 4),
                      ([1.0, 2.0 ** 53, 1.0, 1.0], 2.0 ** 53 + 4),
                      ([-(2.0 ** 53), -1.0, 2.0 ** -133], -(2.0 ** 53))]}
    # f16: 16384 times 2**15 is 2**29, whose ulp is 2**-23; its smallest
    # subnormal 2**-24 is half of it
    t = 2.0 ** -24
    cases["f16"] = [([2.0 ** 15] * 16384 + [t], 2.0 ** 29),
                    ([t] * 3 + [2.0 ** 15] * 16384, 2.0 ** 29 + 2 ** -22),
                    ([2.0 ** 15] * 8192 + [t] * 3 + [2.0 ** 15] * 8192, 2.0 ** 29 + 2 ** -22)]
    # f8e5m2: 2**22 times 2**15 is 2**37, ulp 2**-15, its smallest 2**-16
    base = np.full(1 << 22, 0x78, np.uint8)
    e5 = np.insert(base, [5, 1 << 21, 1 << 22], 0x01)
    assert list(decode("f8e5m2", np.array([0x78, 0x01]))) == [2.0 ** 15, 2.0 ** -16]
    for name, rows in cases.items():
        for vals, want in rows:
            x = as_input(name, encode(name, vals) if len(vals) < 100 else
                         np.repeat(encode(name, sorted(set(vals))),
                                   [vals.count(v) for v in sorted(set(vals))]))
            exact = _exact(vals)
            assert float(exact) == want
            assert same(client.sum(x), want), (name, vals[:4], client.sum(x), want)
    x = as_input("f8e5m2", e5)
    assert client.sum(x) == 2.0 ** 37 + 2.0 ** -14
    one = np.insert(base, 1 << 20, 0x01)
    assert client.sum(as_input("f8e5m2", one)) == 2.0 ** 37        # a tie: to even
    parts = [client.reduce("sum", as_input("f8e5m2", e5[a:b]), partial=True)
             for a, b in ((0, 6), (6, 1 << 21), (1 << 21, len(e5)))]
    assert gpured.combine(parts) == 2.0 ** 37 + 2.0 ** -14
    # the mean and variance round once too
    m = client.moments(as_input("bf16", encode("bf16", [2.0 ** 53, 1.0, 1.0, 1.0])), ddof=1)
    assert m.mean == float(Fraction(2 ** 53 + 3, 4))
    assert m.var == ref_moments("bf16", [2.0 ** 53, 1.0, 1.0, 1.0], 1)[5]


def test_nan_and_infinities(client):
    for name in FLOATS:
        pats = np.arange(1 << (8 * np.dtype(BITS[name]).itemsize))
        nans = np.flatnonzero(np.isnan(decode(name, pats))).tolist()
        if name == "f8e4m3":
            assert nans == [0x7f, 0xff]
        for p in (nans[0], nans[-1]):
            b = encode(name, [1.0, -2.0, 0.5])
            b = np.insert(b, 2, p).astype(BITS[name])
            x = as_input(name, b)
            for op in ("sum", "sumsq", "min", "max"):
                assert math.isnan(client.reduce(op, x)), (name, op, p)
            assert client.argmin(x).index == client.argmax(x).index == 2
            c = client.cumsum(x)
            assert c[:2].tolist() == [1.0, -1.0] and np.isnan(c[2:]).all()
            check_segments(client, name, x, decode(name, b).tolist(), [0, 2, 2, 4])
        if name == "f8e4m3":
            big = as_input(name, encode(name, [448.0, -448.0, 448.0]))
            assert client.max(big) == 448.0 and client.sum(big) == 448.0
            continue
        inf, ninf = math.inf, -math.inf
        for vals, s, q in (([1.0, inf], inf, inf), ([ninf, 2.0], ninf, inf),
                           ([inf, 1.0, ninf], math.nan, inf)):
            x = as_input(name, encode(name, vals))
            assert same(client.sum(x), s) and same(client.sumsq(x), q), (name, vals)
            assert same(client.max(x), max(vals)) and same(client.min(x), min(vals))
            m = client.moments(x)
            assert same(m.mean, s) and math.isnan(m.var)
            with np.errstate(invalid="ignore"):
                assert same_arrays(client.cumsum(x), np.cumsum(vals))
        parts = [client.reduce("sum", as_input(name, encode(name, [v])), partial=True)
                 for v in (inf, 1.0, ninf)]
        assert math.isnan(gpured.combine(parts))
        assert gpured.combine(parts[:2]) == inf


def test_empty_and_identities(client):
    for name in ALL:
        x = (as_input(name, np.zeros(0, BITS[name])) if name in FORMATS
             else np.zeros(0, INTS[name]))
        got = client.sum(x)
        assert got == 0 and type(got) is kind_of(name)
        for op in ("min", "max", "argmin", "argmax", "moments"):
            with pytest.raises(gpured.Empty):
                client.reduce(op, x)
        c = client.cumsum(x)
        assert c.shape == (0,) and c.dtype == _wire.value_dtype("sum", name)
        seg = client.min(x, offsets=[0, 0])
        assert seg.tolist() == [math.inf if name in FORMATS else np.iinfo(INTS[name]).max]
    assert client.min(np.zeros(3, np.int8), offsets=[0, 0, 3]).tolist() == [127, 0]
    assert client.max(np.zeros(3, np.int16), offsets=[0, 3, 3]).tolist() == [0, -32768]
    assert client.max(np.zeros(3, bool), offsets=[0, 0, 3]).tolist() == [0, 0]
    assert client.min(np.zeros(3, np.uint16), offsets=[0, 0, 3]).tolist() == [65535, 0]
    assert client.ping() == "pong"
