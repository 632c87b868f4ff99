"""The dtypes of 16 bits or fewer, the other ways in and out: regions,
submit and asyncio, ml_dtypes arrays, PyTorch's CPU tensors, and what the
daemon refuses, after which the connection goes on; against the
references of test_dtypes_small.py."""

import asyncio
import math

import numpy as np
import pytest

import gpured
import gpured.aio
from gpured import _wire
from test_dtypes_small import (ALL, FORMATS, INTS, ML_NAMES, as_input, check_all,
                               check_partials, check_segments, decode, kind_of,
                               order_cumsum, random_bits, ref_arg, ref_moments, ref_sum,
                               same, same_arrays)

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


# ---- the other ways in: regions, submit, asyncio, ml_dtypes, PyTorch ----

def test_regions(client):
    rng = np.random.default_rng(11)
    for dt in (np.float16, np.int8, np.uint8, np.int16, np.uint16, np.bool_):
        a = client.empty(5001, dt, writable=True)
        if dt is np.float16:
            a[:] = decode("f16", random_bits("f16", 5001, rng))
            name, v = "f16", a.astype(np.float64).tolist()
        elif dt is np.bool_:
            a[:] = rng.random(5001) < 0.5
            name, v = "u8", a.astype(np.int64).tolist()
        else:
            info = np.iinfo(dt)
            a[:] = rng.integers(info.min, info.max, 5001, dtype=dt, endpoint=True)
            name, v = _wire.wire_name(np.dtype(dt)), a.tolist()
        check_all(client, name, a, v)
        check_all(client, name, a[7:1009], v[7:1009])
        check_segments(client, name, a, v, [0, 1, 1, 2500, 5001])
        cuts = [0, 17, 17, 3000, 5001]
        check_partials(client, name, lambda lo, hi: a[lo:hi], v, cuts)
        out = client.empty(5001, _wire.value_dtype("sum", name), writable=True)
        assert client.cumsum(a, out=out) is out
        check = client.cumsum(np.array(a))
        assert same_arrays(out, check)
    if ml_dtypes is not None:
        b = client.empty(300, ml_dtypes.bfloat16)
        b[:] = np.arange(300) - 150
        assert client.sum(b) == -150.0
        assert client.argmax(b) == (149.0, 299, 300)


def test_submit_pipelined_and_asyncio(client, daemon):
    rng = np.random.default_rng(5)
    inputs = []
    for name in ALL:
        for n in (5, 20001):
            if name in FORMATS:
                b = random_bits(name, n, rng)
                inputs.append((name, as_input(name, b), decode(name, b).tolist()))
            else:
                x = rng.integers(-100, 100, n).astype(INTS[name])
                inputs.append((name, x, x.tolist()))
    futs = [(name, v, client.submit("sum", x), client.submit("argmax", x),
             client.submit("cumsum", x), client.submit("max", x, offsets=[0, 2, len(v)]))
            for name, x, v in inputs]
    for name, v, s, a, c, seg in futs:
        assert same(s.result(), ref_sum(name, v))
        assert tuple(a.result()[:2]) == ref_arg("argmax", v)
        assert c.result().shape == (len(v),)
        assert [same(g, ref_arg("max", w)[0]) for g, w in zip(seg.result().tolist(),
                                                              (v[:2], v[2:]))] == [True] * 2

    async def main():
        async with gpured.aio.Client(daemon.path, timeout=30) as ac:
            sums = await asyncio.gather(*[ac.sum(x) for _, x, _ in inputs])
            for (name, _, v), got in zip(inputs, sums):
                assert same(got, ref_sum(name, v)) and type(got) is kind_of(name)
            name, x, v = inputs[1]
            got = await ac.moments(x, ddof=1)
            assert all(same(g, w) for g, w in zip(got, ref_moments(name, v, 1)))
            got = await ac.cumsum(x)
            assert np.array_equal(got, order_cumsum(np.asarray(v)))
            r = await ac.empty(100, np.uint16)
            r[:] = np.arange(100) * 600
            assert await ac.sum(r) == sum(range(100)) * 600
            assert (await ac.min(r[1:], offsets=[0, 0, 99])).tolist() == [65535, 600]
    asyncio.run(main())


@pytest.mark.skipif(ml_dtypes is None, reason="no ml_dtypes")
def test_ml_dtypes(client):
    rng = np.random.default_rng(9)
    for name in ML_NAMES:
        b = random_bits(name, 2003, rng, specials=True)
        x = as_input(name, b, ml=True)
        assert _wire.as_array(x)[1] == name
        v = decode(name, b).tolist()
        for op in ("sum", "sumsq", "min", "max", "argmin", "argmax"):
            assert same_results(client.reduce(op, x), client.reduce(op, as_input(name, b)))
        assert same_arrays(client.cumsum(x), client.cumsum(as_input(name, b)))
        finite = b[np.isfinite(v)]
        check_all(client, name, as_input(name, finite, ml=True), decode(name, finite).tolist())
        assert same(client.max(x.reshape(-1)[::7]), client.max(as_input(name, b[::7])))
        assert client.argmin(x[::7]).index == client.argmin(as_input(name, b[::7])).index


def same_results(a, b):
    if isinstance(a, tuple):
        return all(same(x, y) for x, y in zip(a, b))
    return same(a, b)


def test_torch_cpu(client):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    for name, tdt in (("f16", "float16"), ("bf16", "bfloat16"), ("f8e4m3", "float8_e4m3fn"),
                      ("f8e5m2", "float8_e5m2")):
        if not hasattr(torch, tdt):
            continue
        b = random_bits(name, 3001, rng, specials=True)
        carrier = torch.int16 if b.itemsize == 2 else torch.uint8
        t = torch.from_numpy(b.view(np.int16) if b.itemsize == 2 else b).view(carrier)
        t = t.view(getattr(torch, tdt))
        for op in ("sum", "sumsq", "min", "max", "argmin", "argmax"):
            assert same_results(client.reduce(op, t), client.reduce(op, as_input(name, b)))
        assert same_results(client.reduce("max", t[5::3]), client.reduce("max",
                                                                           as_input(name,
                                                                                    b[5::3])))
        assert same_arrays(client.cumsum(t), client.cumsum(as_input(name, b)))
        s = client.sum(t, offsets=[0, 100, 3001])
        assert same_arrays(s, client.sum(as_input(name, b), offsets=[0, 100, 3001]))
    for tdt, np_dt in (("int8", np.int8), ("uint8", np.uint8), ("int16", np.int16),
                       ("uint16", np.uint16), ("bool", np.bool_)):
        if not hasattr(torch, tdt):
            continue
        a = (np.arange(-500, 501) % 7 == 0) if np_dt is np.bool_ else \
            (np.arange(-500, 501) * 3).astype(np_dt)
        t = torch.from_numpy(a.astype(np.uint8) if np_dt is np.bool_ else a.copy())
        if np_dt is np.bool_:
            t = t.bool()
        assert client.sum(t) == client.sum(a) == int(a.astype(np.int64).sum())
        assert client.argmin(t[::2]) == client.argmin(a[::2])
    h = torch.arange(10, dtype=torch.float16, requires_grad=True)
    assert client.sum(h) == 45.0


# ---- what the daemon refuses; the connection goes on ----

def test_refused(client):
    bad = [
        ({"op": "sum", "dtype": "f16", "data": b"\x00\x3c\x00"}, None),
        ({"op": "sum", "dtype": "bf16", "data": b"\x80"}, None),
        ({"op": "cumsum", "dtype": "u16", "data": b"\x01\x00\x02"}, None),
        ({"op": "sum", "dtype": "f128", "data": b""}, None),
        ({"op": "sum", "dtype": "i8", "data": [1, -128, 128]}, "element 2"),
        ({"op": "sum", "dtype": "u8", "data": [0, -1]}, "element 1"),
        ({"op": "max", "dtype": "i16", "data": [32768]}, "element 0"),
        ({"op": "sum", "dtype": "u16", "data": [3, 1.5]}, "element 1"),
        ({"op": "sum", "dtype": "f16", "data": [0.5, 0.1]}, "element 1"),
        ({"op": "sum", "dtype": "f16", "data": [65520.0]}, "element 0"),
        ({"op": "sum", "dtype": "bf16", "data": [1.0 + 2.0 ** -8]}, "element 0"),
        ({"op": "sum", "dtype": "f8e4m3", "data": [1, float("inf")]}, "element 1"),
        ({"op": "sum", "dtype": "f8e4m3", "data": [480.0]}, "element 0"),
        ({"op": "sum", "dtype": "f8e5m2", "data": [1.125]}, "element 0"),
    ]
    for params, word in bad:
        with pytest.raises(gpured.InvalidParams) as e:
            client.call("reduce", params)
        if word is not None:
            assert word in e.value.message, (params, e.value.message)
        assert client.ping() == "pong"
    good = [
        ({"op": "sum", "dtype": "i8", "data": [-128, 127, 1]}, 0),
        ({"op": "sum", "dtype": "u16", "data": [65535, 1]}, 65536),
        ({"op": "sum", "dtype": "f16", "data": [65504, 2.0 ** -24, -0.5]}, 65503.5 + 2.0 ** -24),
        ({"op": "max", "dtype": "f8e5m2", "data": [float("inf"), 1]}, math.inf),
        ({"op": "sum", "dtype": "bf16", "data": [2 ** 60, 1]}, float(2 ** 60 + 1)),
        ({"op": "max", "dtype": "f8e4m3", "data": [448.0, -448]}, 448.0),
    ]
    for params, want in good:
        got = client.call("reduce", params)["value"]
        assert same(got, want), (params, got)
    got = client.call("reduce", {"op": "min", "dtype": "f16", "data": [1.0, float("nan")]})
    assert math.isnan(got["value"])
    # a bad request amid good ones in flight: each gets its own answer
    x = np.arange(100, dtype=np.int16)
    futs = [client.submit("sum", x) for _ in range(3)]
    with pytest.raises(gpured.InvalidParams):
        client.call("reduce", {"op": "sum", "dtype": "i16", "data": b"\x01"})
    assert [f.result() for f in futs] == [4950] * 3
    assert client.sum(np.arange(5, dtype=np.int8)) == 10
