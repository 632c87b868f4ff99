"""Every op and dtype against NumPy, the result types of PROTOCOL.md's
table, and the inputs the client accepts and refuses."""

import array
import math
import struct

import numpy as np
import pytest

import gpured
from exact_sums import exact_sums
from samples import DTYPES, sample

OPS = ["sum", "min", "max", "sumsq"]


def expected(op, a):
    """The exact answer, in Python numbers, as PROTOCOL.md defines it."""
    dt = a.dtype
    if op in ("min", "max"):
        v = a.min() if op == "min" else a.max()
        return float(v) if dt.kind == "f" else int(v)
    if op == "sumsq" and dt.kind == "f":
        # exact squares (an f64 square needs more than a double), rounded once
        return float(exact_sums(a)[1])
    if op == "sumsq":
        return math.fsum(float(v) * float(v) for v in a.tolist())
    if dt.kind == "f":
        return math.fsum(a.astype(np.float64).tolist())
    total = sum(int(v) for v in a.tolist())
    if dt.itemsize == 8:          # i64 and u64 sums wrap modulo 2^64
        total %= 1 << 64
        if dt.kind == "i" and total >= 1 << 63:
            total -= 1 << 64
    return total


def ulps(a, b):
    """Distance in units in the last place between two doubles."""
    ia = struct.unpack("<q", struct.pack("<d", a))[0]
    ib = struct.unpack("<q", struct.pack("<d", b))[0]
    if ia < 0:
        ia = -(1 << 63) - ia
    if ib < 0:
        ib = -(1 << 63) - ib
    return abs(ia - ib)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_op_dtype(client, op, dtype):
    for n in (1, 7, 1000, 100_003):
        a = sample(dtype, n, seed=n)
        got = client.reduce(op, a, full=True)
        assert got.count == n
        want = expected(op, a)
        integer = np.dtype(dtype).kind in "iu" and op != "sumsq"
        assert type(got.value) is (int if integer else float), (op, dtype, got)
        if integer:
            assert got.value == want, (op, dtype, n)
        elif op in ("min", "max"):
            assert got.value == want
        elif np.dtype(dtype).kind == "f":
            # float sums and sumsq: exact, rounded once, on every backend
            assert got.value == want, (op, dtype, n, got.value, want)
        else:
            # sumsq of integers: squares added in double (PROTOCOL.md); a
            # few ulp of the exact answer covers any order of additions.
            assert ulps(got.value, want) <= 4 or abs(got.value - want) <= 1e-9 * abs(want), \
                (op, dtype, n, got.value, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["sum", "sumsq"])
def test_float_results_exact(client, op, dtype):
    """The exact answer rounded once, bit for bit, where a double sum
    would cancel (every backend sums floats exactly)."""
    a = sample(dtype, 100_003, seed=7)
    if dtype == "float64":
        a[::3] *= 1e12          # cancellation a naive double sum gets wrong
        a[1::3] *= -1e12
    assert client.reduce(op, a) == expected(op, a)


def test_results_shortcuts(client):
    a = np.arange(1, 11, dtype=np.int64)
    assert client.sum(a) == 55
    assert client.min(a) == 1
    assert client.max(a) == 10
    assert client.sumsq(a) == 385.0
    r = client.reduce("sum", a, full=True)
    assert r == gpured.Result(55, 10) and r.value == 55 and r.count == 10


def test_integer_extremes(client):
    i64 = np.array([np.iinfo(np.int64).max, 1], np.int64)
    assert client.sum(i64) == -(1 << 63)                 # wraps
    u64 = np.array([np.iinfo(np.uint64).max, 2], np.uint64)
    assert client.sum(u64) == 1                          # wraps
    assert client.max(u64) == (1 << 64) - 1
    assert client.min(np.array([-(1 << 31)], np.int32)) == -(1 << 31)
    big = np.full(1000, np.iinfo(np.uint32).max, np.uint32)
    assert client.sum(big) == 1000 * ((1 << 32) - 1)     # exact, no wrap


def test_nan_and_signed_zero(client):
    a = np.array([1.0, np.nan, 2.0], np.float32)
    for op in OPS:
        assert math.isnan(client.reduce(op, a))
    z = np.array([0.0, -0.0], np.float64)
    assert math.copysign(1, client.min(z)) == -1
    assert math.copysign(1, client.max(z)) == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(client, dtype):
    a = np.array([], dtype)
    s = client.reduce("sum", a, full=True)
    assert s.count == 0 and s.value == 0
    assert type(s.value) is (float if np.dtype(dtype).kind == "f" else int)
    assert client.sumsq(a) == 0.0
    for op in ("min", "max"):
        with pytest.raises(gpured.Empty) as e:
            client.reduce(op, a)
        assert e.value.code == "empty" and e.value.message
    assert client.ping() == "pong"       # the connection stays usable


def test_shapes_and_layouts(client):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    assert client.reduce("sum", a, full=True) == (276.0, 24)
    f = np.asfortranarray(a)
    assert client.sum(f) == 276.0
    strided = np.arange(100, dtype=np.int32)[::3]
    assert not strided.flags.c_contiguous
    assert client.sum(strided) == int(strided.sum())
    t = np.arange(12, dtype=np.int64).reshape(3, 4).T[1:]
    assert client.sum(t) == int(t.sum())
    assert client.sum(np.float32(2.5)) == 2.5              # 0-d: one element
    be = np.arange(10, dtype=">i4")
    assert client.sum(be) == 45                           # byte order converted


def test_large_array_straight_from_memory(client):
    # Several daemon chunks (4 MiB each) and partial sends.
    a = np.ones(5 << 20, np.float32)
    a[-1] = 3
    assert client.reduce("sum", a, full=True) == ((5 << 20) + 2.0, 5 << 20)
    assert client.max(a) == 3.0


def test_buffer_protocol_and_array_like(client):
    assert client.sum(array.array("d", [1.5, 2.5])) == 4.0
    assert client.sum(memoryview(array.array("i", [1, 2, 3]))) == 6
    assert client.max(array.array("Q", [1, 1 << 63])) == 1 << 63

    class Thing:
        def __array__(self, dtype=None, copy=None):
            return np.arange(5, dtype=np.uint32)
    assert client.sum(Thing()) == 10
    assert client.sum([1, 2, 3]) == 6                     # lists: via NumPy's int64


@pytest.mark.parametrize("bad", [np.complex64, np.object_, np.longdouble, "V2", "M8[s]"])
def test_unsupported_dtype(client, bad):
    with pytest.raises(TypeError) as e:
        client.sum(np.zeros(3, bad))
    for name in ("int32", "int64", "uint32", "uint64", "float32", "float64", "float16", "int8",
                 "uint16", "bool", "bfloat16", "float8_e5m2"):
        assert name in str(e.value)
    with pytest.raises(TypeError):
        client.sum(b"bytes")


def test_bad_op(client):
    with pytest.raises(ValueError, match="sum, min, max, sumsq"):
        client.reduce("mean", np.zeros(3))


def test_large_arrays_are_not_copied():
    from gpured import _wire
    a = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    for x in (a, np.asfortranarray(a), a[10:20]):
        x, name = _wire.as_array(x)
        view = _wire.data_view(x)
        assert name == "f32" and view.nbytes == x.nbytes
        assert np.shares_memory(np.frombuffer(view, np.uint8), x)


def test_request_bytes_match_msgpack():
    import msgpack
    from gpured import _wire
    for n in (0, 1, 63, 64, 16383, 16384, 70000):
        data = bytes(range(256)) * (n // 256) + bytes(n % 256)
        tail = _wire.REDUCE_MID["sumsq", "u64"] + _wire.bin_header(len(data)) + data
        got = msgpack.unpackb(b"\x94\x00\xce\x00\x00\x00\x07" + tail, raw=False)
        assert got == [0, 7, "reduce", [{"op": "sumsq", "dtype": "u64", "data": data}]]
    tail = _wire.region_reduce_tail("max", "i32", 3, 1 << 33, 5)
    assert msgpack.unpackb(b"\x94\x00\x01" + tail, raw=False) == \
        [0, 1, "reduce", [{"op": "max", "dtype": "i32", "region": 3, "offset": 1 << 33, "count": 5}]]


def test_small_request_bytes_every_layout():
    # Small plain arrays take a head made once per (op, dtype, size): the
    # bytes must be what msgpack packs for the request, for every layout,
    # and a byte order other than the wire's must never reuse a head.
    import concurrent.futures
    import msgpack
    from gpured import _protocol, _wire
    proto = _protocol.Protocol("test", concurrent.futures.InvalidStateError, lambda: None)
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    cases = [a, np.asfortranarray(a), a[:, ::2], a.T, np.arange(100, dtype=np.int32)[::3],
             np.arange(10, dtype="<i4"), np.arange(10, dtype=">i4"), np.arange(10, dtype="<i4"),
             np.array(7, np.uint64), np.zeros(0, np.float32), np.ones(4096, np.float32)]
    for op in ("sum", "max", "argmin"):
        for x in cases:
            for _ in range(2):
                tail, conv, fds, data = proto.submit(op, x, False, False, False, None, None, None)
                assert fds is None and data is None
                got = msgpack.unpackb(b"\x94\x00\xce\x00\x00\x00\x07" + tail, raw=False)
                c = x.astype(x.dtype.newbyteorder("<"))
                want = c.tobytes("F" if c.flags.f_contiguous and not c.flags.c_contiguous
                                 else "C")
                assert got == [0, 7, "reduce", [{"op": op, "dtype": _wire._DTYPES[c.dtype],
                                                 "data": want}]]
    big = np.ones(5000, np.float32)
    tail, conv, fds, data = proto.submit("sum", big, False, False, False, None, None, None)
    assert data is not None and len(tail) < 100                # sent from its memory
