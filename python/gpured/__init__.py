"""gpured: reduce arrays (sum, min, max, sum of squares, argmin, argmax,
moments: count, sum, min, max, exact mean and variance), or take their
prefix sums (cumsum), in the gpured daemon, over its Unix socket.

    import numpy as np, gpured

    with gpured.Client() as c:            # $GPURED_SOCKET, else the default
        c.sum(np.arange(10, dtype=np.int64))          # 45
        f = c.submit("max", np.ones(1000, np.float32))
        f.result()                                    # 1.0
        c.cumsum(np.arange(4, dtype=np.int32))        # array([0, 1, 3, 6])

:mod:`gpured.aio` is the same on asyncio; :mod:`gpured.dask` reduces dask
arrays chunk by chunk in each worker's gpured. The wire protocol is
proto/PROTOCOL.md in the gpured sources.
"""

# The C extension (_fast, client.py) may be built into another folder named
# gpured on sys.path: meson's build tree puts it in BUILDDIR/python/gpured.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ._exact import Partial, combine
from ._version import __version__
from ._wire import ARG_OPS, DTYPE_NAMES, OPS, ArgResult, Moments, Result, default_socket_path
from .client import Client
from .shareable import use_shareable_memory
from .errors import (Busy, ConnectionError, Empty, Error, Internal, InvalidParams,
                     InvalidRequest, NotSupported, Timeout, TooLarge, UnknownMethod)

__all__ = [
    "__version__", "Client", "Result", "ArgResult", "Moments", "Partial", "combine", "OPS", "ARG_OPS",
    "DTYPE_NAMES", "default_socket_path", "use_shareable_memory",
    "Error", "InvalidRequest", "UnknownMethod", "InvalidParams", "TooLarge", "Empty",
    "Busy", "Internal", "ConnectionError", "Timeout", "NotSupported",
]
