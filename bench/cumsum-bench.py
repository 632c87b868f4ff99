#!/usr/bin/env python3
"""Prefix sums of an array in GPU memory through the daemon, against
PyTorch and CuPy on the same array in the same run.

An array x (f32 or i32) in GPU memory and out arrays of 8-byte values
(float64 or int64, what the daemon's cumsum writes) are mapped once by
IPC handle (the daemon runs with --allow-cuda-ipc yes and, for the out
arrays, --allow-cuda-ipc-writable yes); then, per size:

- daemon, 1 in flight: the round trip of one cumsum request (x into one
  out array), the median of REPS;
- daemon, 4 in flight: requests into 4 out arrays in turn, 4 kept in
  flight; time per request from the total;
- torch.cumsum(x, dtype=float64/int64) (CUB's scan inside PyTorch, with
  the widening folded in or a cast before it) and cupy.cumsum likewise,
  each timed with CUDA events around one call, the median of REPS.

The kernel alone against cub::DeviceScan::InclusiveSum with the same
8-byte outputs is gpured-ops-bench's (same call, its own lines). Checks
the daemon's values against torch's (integers exactly, floats to 1e-12
of the sum of magnitudes) at every size. One JSON line per row.

    cumsum-bench.py SOCKET [REPS [LOG2,...]]
"""

import json
import socket
import statistics
import sys
import time

import cupy as cp
import msgpack
import torch


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.u = msgpack.Unpacker(raw=False)
        self.msgid = 0

    def send(self, method, params):
        self.msgid += 1
        self.s.sendall(pack([0, self.msgid, method, params]))

    def recv(self):
        for m in self.u:
            return m
        while True:
            data = self.s.recv(1 << 16)
            if not data:
                raise EOFError
            self.u.feed(data)
            for m in self.u:
                return m

    def call(self, method, params):
        self.send(method, params)
        m = self.recv()
        if m[2] is not None:
            raise RuntimeError(m[2])
        return m[3]


def main():
    path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    logs = [int(v) for v in sys.argv[3].split(",")] if len(sys.argv) > 3 else [20, 22, 24, 26, 28]
    cp.cuda.set_allocator(None)  # each array its own allocation: IPC handles start at it
    c = Client(path)
    uuid = [d for d in c.call("info", [])["devices"] if d["kind"] == "cuda"][0]["uuid"]
    dev = cp.cuda.Device(0)
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()

    def cmap(a, writable):
        cp.cuda.runtime.deviceSynchronize()
        h = bytes(cp.cuda.runtime.ipcGetMemHandle(a.data.ptr))
        return c.call("map", [{"bytes": a.nbytes, "kind": "cuda_ipc", "device": uuid,
                               "handle": h, "writable": writable}])["region"]

    def events(fn):
        ts = []
        a, b = cp.cuda.Event(), cp.cuda.Event()
        for _ in range(3):
            fn()
        for _ in range(reps):
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
        return statistics.median(ts)

    for dt in ("f32", "i32"):
        for lg in logs:
            n = 1 << lg
            if dt == "f32":
                x = cp.random.random(n, dtype=cp.float32) - 0.5
                wide, tw = cp.float64, torch.float64
            else:
                x = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
                wide, tw = cp.int64, torch.int64
            outs = [cp.empty(n, dtype=wide) for _ in range(4)]
            rin = cmap(x, False)
            routs = [cmap(o, True) for o in outs]

            def req(k):
                return {"op": "cumsum", "dtype": dt, "region": rin, "offset": 0, "count": n,
                        "out_region": routs[k]}

            for _ in range(3):
                c.call("reduce", [req(0)])
            one = []
            for _ in range(reps):
                t0 = time.perf_counter()
                c.call("reduce", [req(0)])
                one.append((time.perf_counter() - t0) * 1e6)
            # 4 in flight, into 4 out arrays in turn
            total = reps * 4
            t0 = time.perf_counter()
            for k in range(4):
                c.send("reduce", [req(k)])
            for i in range(total):
                m = c.recv()
                if m[2] is not None:
                    raise RuntimeError(m[2])
                if i + 4 < total:
                    c.send("reduce", [req((i + 4) % 4)])
            piped = (time.perf_counter() - t0) * 1e6 / total

            tx = torch.as_tensor(x, device="cuda")
            ref = torch.cumsum(tx, 0, dtype=tw)
            got = torch.as_tensor(outs[0], device="cuda")
            if dt == "f32":
                tol = 1e-12 * float(torch.sum(torch.abs(tx.double())))
                ok = float(torch.max(torch.abs(got - ref))) <= tol
            else:
                ok = bool(torch.equal(got, ref))
            t_torch = events(lambda: torch.cumsum(tx, 0, dtype=tw))
            t_torch_native = events(lambda: torch.cumsum(tx, 0))
            t_cupy = events(lambda: cp.cumsum(x, dtype=wide))
            t_one = statistics.median(one)
            row = {"device": name, "dtype": dt, "n": n, "log2": lg, "reps": reps,
                   "daemon_1_us": round(t_one, 2), "daemon_4_us": round(piped, 2),
                   "torch_us": round(t_torch, 2), "torch_same_dtype_us": round(t_torch_native, 2),
                   "cupy_us": round(t_cupy, 2),
                   "daemon_4_GBps": round(n * 12 / piped / 1e3, 1),
                   "ratio_torch_over_daemon_4": round(t_torch / piped, 3),
                   "ratio_cupy_over_daemon_4": round(t_cupy / piped, 3),
                   "check": "PASS" if ok else "FAIL"}
            print(json.dumps(row), flush=True)
            for r in [rin] + routs:
                c.call("unmap", [{"region": r}])
            dev.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
