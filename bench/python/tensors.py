#!/usr/bin/env python3
"""PyTorch and CuPy arrays reduced in place, beside torch.sum, for each way
their memory can reach the daemon, in one run:

- torch, default allocator: cudaMalloc memory, sent as a legacy IPC
  handle (a daemon with --allow-cuda-ipc yes);
- torch, expandable segments (gpured.use_shareable_memory()): exported
  allocations, a daemon with the secure default;
- cupy, default pool (IPC handles), and cupy over gpured.shareable's
  VmmAllocator (the secure default).

For each: p50 of one call at a time, c.sum(x), against
torch.sum(t).item() of the same elements, in alternating rounds; and GB/s with --inflight
requests in flight against torch.sum's rate. Then the allocators' own
cost on a training-like pattern (tensors of many sizes allocated, written
and freed, in LIFO order, step after step): time a step and peak memory
reserved, default against shareable.

    python3 bench/python/tensors.py --daemon build-gpu/daemon/gpured

Each configuration runs in a process of its own (an allocator is chosen
once a process).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
from arrays import latency_pair, pipelined, rate  # noqa: E402


def child(args):
    import torch
    import gpured
    lib, alloc = args.child.split(":")
    if alloc == "shareable":
        gpured.use_shareable_memory(torch=(lib == "torch"), cupy=(lib == "cupy"))
    if lib == "cupy":
        import cupy
        make = lambda n: cupy.random.random(n, dtype=cupy.float32)  # noqa: E731
    else:
        make = lambda n: torch.rand(n, dtype=torch.float32, device="cuda")  # noqa: E731
    out = {"config": args.child, "rows": [], "inflight": args.inflight}
    with gpured.Client(args.socket, spin_us=None if args.spin_us < 0 else args.spin_us) as c:
        for lg in args.log2:
            n = 1 << lg
            x = make(n)
            t = torch.rand(n, dtype=torch.float32, device="cuda")
            before = c.stats()["bytes_device"]
            c.sum(x)
            assert c.stats()["bytes_device"] > before, "not read in place"
            row = {"log2": lg}
            if lg == args.latency_log2:
                row["p50_us"], row["torch_p50_us"], row["p50_ratio"] = latency_pair(
                    lambda: c.sum(x), lambda: torch.sum(t).item(), args.reps)
            nb = n * 4
            row["gbs"] = rate(pipelined(c, x, args.inflight), nb, args.seconds, args.runs)

            def tsum(k=args.inflight):
                for _ in range(k):
                    s = torch.sum(t)
                s.item()
            row["torch_gbs"] = rate(tsum, nb * args.inflight, args.seconds, args.runs)
            out["rows"].append(row)
            del x, t
    out["alloc"] = alloc_pattern(lib, args)
    print(json.dumps(out), flush=True)


def alloc_pattern(lib, args):
    """A step: 64 tensors of sizes drawn once (log-uniform, 4 KiB to 64
    MiB), each allocated and written in turn, then freed last first.
    Returns (median ms a step, peak bytes the allocator held)."""
    import numpy as np
    import torch
    import gpured.shareable
    rng = np.random.default_rng(4)
    sizes = [int(s) for s in np.exp2(rng.uniform(10, 24, 64))]
    if lib == "cupy":
        import cupy
        empty = lambda n: cupy.empty(n, dtype=cupy.float32)  # noqa: E731
        sync = cupy.cuda.Device().synchronize
        pool = gpured.shareable.cupy_pool or cupy.get_default_memory_pool()
        held = pool.total_bytes
    else:
        empty = lambda n: torch.empty(n, dtype=torch.float32, device="cuda")  # noqa: E731
        sync = torch.cuda.synchronize
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.max_memory_reserved

    def step():
        live = []
        for n in sizes:
            a = empty(n)
            a.fill(1.0) if lib == "cupy" else a.fill_(1.0)
            live.append(a)
        while live:
            live.pop()
        sync()
    ms = []
    for i in range(args.steps + 5):
        t0 = time.perf_counter()
        step()
        if i >= 5:
            ms.append((time.perf_counter() - t0) * 1e3)
    return {"step_ms": statistics.median(ms), "held_bytes": held()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemon", help="the gpured to start (twice: with and without IPC handles)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--socket", help=argparse.SUPPRESS)
    ap.add_argument("--configs", nargs="*",
                    default=["torch:default", "torch:shareable", "cupy:default",
                             "cupy:shareable"])
    ap.add_argument("--log2", type=int, nargs="*", default=[16, 20, 24, 26])
    ap.add_argument("--latency-log2", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--spin-us", type=int, default=-1,
                    help="the Client's spin_us (default: its own default)")
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    from pipeline import start_daemon, stop_daemon
    daemons = {}
    try:
        for name, extra in (("ipc", ["--allow-cuda-ipc", "yes"]), ("secure", [])):
            daemons[name] = start_daemon(args.daemon, ["--backend", "cuda"] + extra)
        results = []
        for cfg in args.configs:
            d = daemons["ipc" if cfg.endswith(":default") else "secure"]
            cmd = [sys.executable, os.path.abspath(__file__), "--child", cfg, "--socket", d[1],
                   "--log2", *map(str, args.log2), "--latency-log2", str(args.latency_log2),
                   "--inflight", str(args.inflight), "--seconds", str(args.seconds),
                   "--runs", str(args.runs), "--reps", str(args.reps), "--steps",
                   str(args.steps), "--spin-us", str(args.spin_us)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print("%s: failed\n%s" % (cfg, r.stderr[-2000:]), flush=True)
                continue
            results.append(json.loads(r.stdout.strip().splitlines()[-1]))
        report(results)
    finally:
        for proc, _path, tmp in daemons.values():
            stop_daemon(proc, tmp)


def report(results):
    for res in results:
        cfg = res["config"]
        for row in res["rows"]:
            line = "%-16s 2^%d  %4d in flight: gpured %8.1f GB/s  torch.sum %8.1f GB/s  ratio %.2f" \
                % (cfg, row["log2"], res["inflight"], row["gbs"], row["torch_gbs"], row["gbs"] / row["torch_gbs"])
            if "p50_us" in row:
                line += ("   one call p50 %.1f us, torch.sum().item() %.1f us, ratio %.2f "
                         "(median of rounds' %.2f)" % (
                             row["p50_us"], row["torch_p50_us"],
                             row["p50_us"] / row["torch_p50_us"], row["p50_ratio"]))
            print(line, flush=True)
        a = res["alloc"]
        print("%-16s allocator: a training-like step %.2f ms, peak held %.0f MiB"
              % (cfg, a["step_ms"], a["held_bytes"] / 2**20), flush=True)


if __name__ == "__main__":
    main()
