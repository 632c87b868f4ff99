"""Exact sums of many numbers, and of their squares, for the tests'
references: Fractions equal to summing Fraction(v) (or Fraction(v) ** 2)
over the values, added as Python integers. Every finite double is an
integer times a power of two, so each sum is an integer over one power of
two; Fraction's own additions reduce by a gcd at every step, which took
most of these tests' time."""

from fractions import Fraction

import numpy as np


def _scaled(total, exp):
    """total * 2**exp as a Fraction."""
    return Fraction(total, 1 << -exp) if exp < 0 else Fraction(total << exp)


def exact_sums(values):
    """(sum, sum of squares) of values, exactly, as Fractions. values: an
    array or a sequence of finite numbers; floats of every width are
    taken at their exact values, integers of 64 bits whole. Non-finite
    values raise ValueError, as Fraction(v) would."""
    a = np.asarray(values)
    if a.dtype.kind in "iub":
        ints = a.ravel().tolist()
        return Fraction(sum(ints)), Fraction(sum(i * i for i in ints))
    a = a.astype(np.float64).ravel()
    if not np.isfinite(a).all():
        raise ValueError("exact_sums: a value is not finite")
    # a == mant * 2**exp, mant an integer of 53 bits at most
    frac, e = np.frexp(a)
    mant = np.ldexp(frac, 53).astype(np.int64).tolist()
    exps = (e.astype(np.int64) - 53).tolist()
    lo = min(exps, default=0)
    s1 = s2 = 0
    for m, x in zip(mant, exps):
        k = x - lo
        s1 += m << k
        s2 += (m * m) << (2 * k)
    return _scaled(s1, lo), _scaled(s2, 2 * lo)
