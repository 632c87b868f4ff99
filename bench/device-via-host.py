#!/usr/bin/env python3
"""argmin, argmax, moments and a segmented sum of an f32 array in GPU
memory, against sum and max of the same array, through one daemon in one
run: the first three and sum and max on the GPU's kernels, in place; the
segmented sum by way of the host (each chunk copied there and reduced on
the CPU route: no GPU kernel for segments yet). Where PyTorch is
installed, its sum and its moments (var_mean, aminmax and sum) of the same
memory follow, for reference. The array is mapped once by IPC handle
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
    rows = 1024
    offs = struct.pack("<%dQ" % (rows + 1), *[i * (n // rows) for i in range(rows)] + [n])
    cases = [("sum", {}), ("max", {}), ("argmin", {}), ("argmax", {}), ("moments", {}),
             ("sum", {"offsets": offs})]
    for op, extra in cases:
        p = dict({"op": op, "dtype": "f32", "region": region, "offset": 0, "count": n}, **extra)
        c.call("reduce", [p])
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            c.call("reduce", [p])
            ts.append(time.perf_counter() - t0)
        t = statistics.median(ts)
        print(json.dumps({"op": op, "segments": rows if extra else 0, "n": n, "reps": reps,
                          "ms": round(t * 1e3, 2), "GBps": round(4 * n / t / 1e9, 1)}),
              flush=True)
    c.call("unmap", [{"region": region}])
    torch_rows(x, n, reps)
    return 0


def torch_rows(x, n, reps):
    """The same array's sum and moments in PyTorch, where it is installed,
    as a PyTorch user would ask (the tensor shares the array's memory): the
    sum in float32 (torch's default) and in float64, and var_mean, aminmax
    and sum together for moments (three kernels, f32 arithmetic: not
    exact). Rows are marked "ref": "torch"."""
    try:
        import torch
    except ImportError:
        return
    t = torch.as_tensor(x, device="cuda")

    def moments():
        torch.var_mean(t, correction=0)
        torch.aminmax(t)
        t.sum()

    cases = [("sum", lambda: t.sum()), ("sum f64", lambda: t.sum(dtype=torch.float64)),
             ("moments", moments)]
    for op, fn in cases:
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        t_ = statistics.median(ts)
        print(json.dumps({"op": op, "ref": "torch", "segments": 0, "n": n, "reps": reps,
                          "ms": round(t_ * 1e3, 2), "GBps": round(4 * n / t_ / 1e9, 1)}),
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
