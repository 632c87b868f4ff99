"""Exact partials: a float sum split into pieces, each reduced with
partial=True (over the socket or from a region), combines into exactly the
bits one request over the whole array gives, and into the correctly
rounded sum (math.fsum, fractions); specials and -0 as the whole would."""

import math
import random

import numpy as np
import pytest

import gpured
from exact_sums import exact_sums


def exact_rounded(vals, square=False):
    s = exact_sums(vals)[1 if square else 0]
    try:
        return float(s)
    except OverflowError:
        return math.inf if s > 0 else -math.inf


def adversarial(rng, n, dtype):
    kind = int(rng.integers(4))
    if kind == 0:
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)
    elif kind == 1:                                  # cancelling pairs, shuffled
        h = rng.standard_normal((n + 1) // 2) * 1e10
        x = np.concatenate([h, -h])[:n]
        rng.shuffle(x)
        x[0] += 1e-8
    elif kind == 2:                                  # wide exponents
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-120, 120, n)
    else:
        x = np.full(n, 0.1)
    return x.astype(dtype)


def bits(v):
    return np.float64(v).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["sum", "sumsq"])
def test_pieces_combine_to_the_whole(client, dtype, op):
    rng = np.random.default_rng(7)
    r = random.Random(3)
    for trial in range(25):
        n = r.choice([1, 7, 1000, 40001, 300007])
        x = adversarial(rng, n, dtype)
        whole = client.reduce(op, x)
        cuts = sorted(r.sample(range(1, n), min(r.randrange(0, 6), n - 1))) if n > 1 else []
        pieces = np.split(x, cuts)
        parts = [client.reduce(op, p, partial=True) for p in pieces]
        got = gpured.combine(parts)
        assert bits(got) == bits(whole), (op, dtype, n, cuts)
        if n <= 40001:
            assert bits(got) == bits(exact_rounded(x, op == "sumsq")), (op, dtype, n)
        if op == "sum" and dtype == np.float64:
            assert got == math.fsum(x)


def test_from_regions_and_socket_mixed(client):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(100003) * 1e6).astype(np.float64)
    a = client.empty(x.shape, x.dtype)
    a[:] = x
    parts = [client.reduce("sum", a[:50000], partial=True),
             client.reduce("sum", x[50000:], partial=True)]
    assert gpured.combine(parts) == math.fsum(x)
    assert gpured.combine(parts) == client.sum(x)


def test_specials_and_signed_zero(client):
    def combined(*pieces):
        return gpured.combine([client.reduce("sum", np.array(p, np.float64), partial=True)
                               for p in pieces])
    assert math.isnan(combined([1.0], [math.nan]))
    assert math.isnan(combined([math.inf], [2.0], [-math.inf]))
    assert combined([math.inf], [1e308]) == math.inf
    z = combined([-0.0], [-0.0, -0.0])
    assert z == 0 and math.copysign(1, z) < 0
    z = combined([-0.0], [0.0])
    assert z == 0 and math.copysign(1, z) > 0
    assert combined([1e308, 1e308], [-1e308]) == 1e308       # exact, no overflow
    assert combined([1.0], []) == 1.0


def test_other_ops_combine(client):
    x = np.arange(-50, 51, dtype=np.int64)
    parts = [client.reduce(op, x[:40], partial=True) for op in ("sum",)] + \
            [client.reduce("sum", x[40:], partial=True)]
    assert gpured.combine(parts) == int(x.sum())
    mins = [client.reduce("min", p, partial=True) for p in (x[:10], x[10:])]
    assert gpured.combine(mins) == -50
    with pytest.raises(ValueError):
        gpured.combine([parts[0], mins[0]])


def test_integer_sumsq_combines_unwrapped(client):
    x = np.arange(-5, 1000000, 337, dtype=np.int64)
    parts = [client.reduce("sumsq", p, partial=True) for p in (x[:10], x[10:])]
    assert gpured.combine(parts) == client.sumsq(x) == float(sum(int(v) ** 2 for v in x))
