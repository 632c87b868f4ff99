"""Test data shared by the tests: the dtypes the protocol knows, and
random arrays of them."""

import numpy as np

DTYPES = ["int32", "int64", "uint32", "uint64", "float32", "float64"]


def sample(dtype, n, seed=1):
    """n random elements of dtype: floats around +-1000, integers over the
    whole range."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(n) * 1000).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
