"""Exact partials (PROTOCOL.md, reduce's "partial"): a float sum or sumsq
returned with its exact value, which partials of the pieces of an array
combine into, rounded once: the bits one request over the whole array
gives, however the array was split, over how many requests, daemons or
hosts."""

import math
from collections import namedtuple
from fractions import Fraction

from ._wire import FLOAT_NAMES

# "specials" bits
NAN, PINF, NINF, NEGZERO = 1, 2, 4, 16


class Partial(namedtuple("Partial", "op dtype value count limbs scale specials")):
    """A reduction's result with, for float sums and sumsq, its exact value
    ``limbs * 2**scale`` (limbs a Python int) and ``specials`` (NaN, +inf,
    -inf, all -0: PROTOCOL.md); for every other op, limbs is None and
    value itself combines exactly. Combine with :func:`gpured.combine`."""
    __slots__ = ()


def from_result(op, dtype, res):
    ex = res.get("exact")
    if ex is None:
        return Partial(op, dtype, res["value"], res["count"], None, 0, 0)
    limbs = int.from_bytes(ex["limbs"], "little", signed=True) if ex["limbs"] else 0
    return Partial(op, dtype, res["value"], res["count"], limbs, ex["scale"], ex["specials"])


def _round(total, scale):
    """total * 2**scale rounded once to a float, to nearest, ties to even."""
    x = Fraction(total) * (Fraction(2) ** scale)
    try:
        return float(x)          # int / int true division rounds correctly
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def combine(parts):
    """The value of the concatenation of the arrays whose partials these
    are (in any order for sums). Float sums and sumsq: exact, rounded once;
    min, max: the least or greatest (NaN if any is); integer sums: the sum,
    wrapped as the daemon wraps i64 and u64 sums."""
    parts = list(parts)
    if not parts:
        raise ValueError("combine() needs at least one partial")
    op, dtype = parts[0].op, parts[0].dtype
    if any(p.op != op or p.dtype != dtype for p in parts):
        raise ValueError("partials of different ops or dtypes")
    count = sum(p.count for p in parts)
    if op in ("min", "max"):
        vals = [p.value for p in parts if p.count]
        if any(isinstance(v, float) and math.isnan(v) for v in vals):
            return math.nan
        pick = min if op == "min" else max
        if dtype in FLOAT_NAMES and vals and all(v == 0 for v in vals):
            neg = [math.copysign(1, v) < 0 for v in vals]
            return (-0.0 if any(neg) else 0.0) if op == "min" else (-0.0 if all(neg) else 0.0)
        return pick(vals)
    if parts[0].limbs is None:
        total = sum(p.value for p in parts)
        if op != "sum":
            return total                # sumsq of integers: floats, never wrapped
        if dtype == "u64":
            total %= 1 << 64
        elif dtype == "i64":
            total = (total + (1 << 63)) % (1 << 64) - (1 << 63)
        return total
    specials = 0
    for p in parts:
        specials |= p.specials & (NAN | PINF | NINF)
    if specials & NAN or specials & (PINF | NINF) == PINF | NINF:
        return math.nan
    if specials & PINF:
        return math.inf
    if specials & NINF:
        return -math.inf
    scale = min(p.scale for p in parts if p.limbs) if any(p.limbs for p in parts) else 0
    total = sum(p.limbs << (p.scale - scale) for p in parts if p.limbs)
    if total == 0:
        seen = [p for p in parts if p.count]
        if count and seen and all(p.specials & NEGZERO for p in seen):
            return -0.0
        return 0.0
    return _round(total, scale)
