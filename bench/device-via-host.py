#!/usr/bin/env python3
"""argmin, argmax, moments and segments of an f32 array in GPU memory,
against sum and max of the same array, through one daemon in one run:
argmin, argmax, moments, sum and max on the GPU's kernels, in place;
sum, max, sumsq, argmin and moments of 1024 rows, and sum and moments of
10^5 rows, on the GPU's segmented reduce (exact float sums), in place
(moments' records made on the host from each row's exact sums). Where
PyTorch is installed, its sum, its moments (var_mean, aminmax and sum),
its row sums (sum(dim=1)) and its row moments (var_mean, aminmax and sum
with dim=1) of the same memory follow, for reference. The array is mapped once by IPC handle
(the daemon runs with --allow-cuda-ipc yes); each row is the median of
REPS requests, one at a time. One JSON line per row.

    device-via-host.py SOCKET [REPS [LOG2]]
"""

import json
import statistics
import struct
import sys
import time

import cupy as cp

sys.path.insert(0, __import__("os").path.dirname(__file__))
from importlib import import_module  # noqa: E402

Client = import_module("cumsum-bench").Client


def main():
    path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lg = int(sys.argv[3]) if len(sys.argv) > 3 else 28
    n = 1 << lg
    cp.cuda.set_allocator(None)
    c = Client(path)
    uuid = [d for d in c.call("info", [])["devices"] if d["kind"] == "cuda"][0]["uuid"]
    x = cp.random.random(n, dtype=cp.float32)
    cp.cuda.runtime.deviceSynchronize()
    h = bytes(cp.cuda.runtime.ipcGetMemHandle(x.data.ptr))
    region = c.call("map", [{"bytes": x.nbytes, "kind": "cuda_ipc", "device": uuid,
                             "handle": h}])["region"]
    def offsets(rows):
        return struct.pack("<%dQ" % (rows + 1), *[i * (n // rows) for i in range(rows)] + [n])

    o1k, o100k = offsets(1024), offsets(100000)
    cases = [("sum", {}), ("max", {}), ("argmin", {}), ("argmax", {}), ("moments", {}),
             ("sum", {"offsets": o1k}), ("max", {"offsets": o1k}), ("sumsq", {"offsets": o1k}),
             ("sum", {"offsets": o100k}), ("argmin", {"offsets": o1k}),
             ("moments", {"offsets": o1k}), ("moments", {"offsets": o100k})]
    for op, extra in cases:
        rows = len(extra["offsets"]) // 8 - 1 if extra else 0
        p = dict({"op": op, "dtype": "f32", "region": region, "offset": 0, "count": n}, **extra)
        c.call("reduce", [p])
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            c.call("reduce", [p])
            ts.append(time.perf_counter() - t0)
        t = statistics.median(ts)
        print(json.dumps({"op": op, "segments": rows, "n": n, "reps": reps,
                          "ms": round(t * 1e3, 2), "GBps": round(4 * n / t / 1e9, 1)}),
              flush=True)
    c.call("unmap", [{"region": region}])
    torch_rows(x, n, reps)
    return 0


def torch_rows(x, n, reps):
    """The same array's sum, moments and row sums in PyTorch, where it is
    installed, as a PyTorch user would ask (the tensor shares the array's
    memory): the sum in float32 (torch's default) and in float64, var_mean,
    aminmax and sum together for moments (three kernels, f32 arithmetic:
    not exact), 1024 rows' sums in float32 and float64, and their moments
    the same way. Rows are
    marked "ref": "torch"."""
    try:
        import torch
    except ImportError:
        return
    t = torch.as_tensor(x, device="cuda")

    def moments():
        torch.var_mean(t, correction=0)
        torch.aminmax(t)
        t.sum()

    def row_moments():
        r = t.view(1024, -1)
        torch.var_mean(r, dim=1, correction=0)
        torch.aminmax(r, dim=1)
        r.sum(dim=1)

    cases = [("sum", 0, lambda: t.sum()), ("sum f64", 0, lambda: t.sum(dtype=torch.float64)),
             ("moments", 0, moments), ("sum", 1024, lambda: t.view(1024, -1).sum(dim=1)),
             ("sum f64", 1024, lambda: t.view(1024, -1).sum(dim=1, dtype=torch.float64)),
             ("moments", 1024, row_moments)]
    for op, rows, fn in cases:
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        t_ = statistics.median(ts)
        print(json.dumps({"op": op, "ref": "torch", "segments": rows, "n": n, "reps": reps,
                          "ms": round(t_ * 1e3, 2), "GBps": round(4 * n / t_ / 1e9, 1)}),
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
