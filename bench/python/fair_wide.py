#!/usr/bin/env python3
"""Small requests beside a client that streams slow-to-reduce arrays.

One daemon; for each kind of hog data (uniform, 60 binades, every finite
exponent) and op (sum, sumsq): 1 KiB f32 sums from 8 connections, one in
flight on each (gpured-benchmark), first alone, then beside a hog process
that reduces a shared-memory region (Client.empty) of that data back to
back, 2 in flight. Prints, per hog, the small requests' p99 beside it over
their p99 alone and the hog's GB/s alone and beside them (the medians of
--rounds rounds).

    python3 bench/python/fair_wide.py --daemon BINDIR/daemon/gpured \
        --benchmark BINDIR/bench/gpured-benchmark [--backend cuda] [--mib 256]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import start_daemon, stop_daemon  # noqa: E402


def fill(kind, n, seed=1):
    """n f32 values: uniform [-1, 1), 60 binades, or every finite exponent."""
    g = np.random.default_rng(seed)
    if kind == "uniform":
        return g.uniform(-1, 1, n).astype(np.float32)
    if kind == "binades60":
        e = g.integers(-30, 30, n)
    else:   # every finite exponent, subnormals included
        e = g.integers(-149, 128, n)
    m = g.uniform(1, 2, n) * g.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        x = np.ldexp(m, e).astype(np.float32)
    x[~np.isfinite(x)] = np.float32(3e38)
    return x


def hog(path, kind, op, mib, seconds, out):
    """Reduce a region of kind data back to back for seconds; the times each
    reduction ended, to out."""
    n = mib << 18
    with gpured.Client(path, timeout=300) as c:
        r = c.empty(n, np.float32)
        r[:] = fill(kind, n)
        c.reduce(op, r)
        open(out + ".ready", "w").close()
        ends = []
        t0 = time.time()
        futs = [c.submit(op, r) for _ in range(2)]
        while time.time() - t0 < seconds:
            futs.pop(0).result()
            ends.append(time.time())
            futs.append(c.submit(op, r))
        for f in futs:
            f.result()
            ends.append(time.time())
        with open(out, "w") as f:
            json.dump({"start": t0, "ends": ends, "bytes": n * 4}, f)


def hog_rates(h, w0, w1):
    """The hog's GB/s before the window [w0, w1) (alone) and inside it."""
    ends = h["ends"]
    before = [t for t in ends if t < w0]
    inside = [t for t in ends if w0 <= t < w1]
    alone = len(before) * h["bytes"] / (w0 - h["start"]) / 1e9
    beside = len(inside) * h["bytes"] / (w1 - w0) / 1e9
    return alone, beside


def small(bench, path, seconds):
    out = subprocess.run([bench, "-s", path, "-c", "8", "-P", "1", "-n", "0", "-t", str(seconds),
                          "-d", "256", "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["latency_us"]["p99"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--benchmark", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="uniform,binades60,every")
    ap.add_argument("--ops", default="sum,sumsq")
    ap.add_argument("--hog-only", nargs=4, metavar=("PATH", "KIND", "OP", "OUT"),
                    help=argparse.SUPPRESS)
    ap.add_argument("extra", nargs="*", help="more daemon arguments")
    a = ap.parse_args()
    if a.hog_only:
        hog(a.hog_only[0], a.hog_only[1], a.hog_only[2], a.mib, a.seconds * 1.5 + 1,
            a.hog_only[3])
        return 0
    extra = ["--backend", a.backend] + a.extra
    proc, path, tmp = start_daemon(a.daemon, extra[2:] if a.backend == "cpu" else extra)
    rows = []
    try:
        for op in a.ops.split(","):
            for kind in a.kinds.split(","):
                ratios, gbps, alone_p99, with_p99 = [], [], [], []
                for _ in range(a.rounds):
                    p_alone = small(a.benchmark, path, a.seconds)
                    out = os.path.join(tmp, "hog.json")
                    h = subprocess.Popen([sys.executable, __file__, "--daemon", a.daemon,
                                          "--benchmark", a.benchmark, "--mib", str(a.mib),
                                          "--seconds", str(a.seconds),
                                          "--hog-only", path, kind, op, out])
                    while not os.path.exists(out + ".ready") and h.poll() is None:
                        time.sleep(0.05)
                    time.sleep(a.seconds / 2)   # the hog alone
                    w0 = time.time()
                    p_with = small(a.benchmark, path, a.seconds)
                    w1 = time.time()
                    h.wait()
                    os.unlink(out + ".ready")
                    with open(out) as f:
                        gbps.append(hog_rates(json.load(f), w0, w1))
                    ratios.append(p_with / p_alone)
                    alone_p99.append(p_alone)
                    with_p99.append(p_with)
                row = (op, kind, statistics.median(alone_p99), statistics.median(with_p99),
                       statistics.median(ratios), statistics.median(g[0] for g in gbps),
                       statistics.median(g[1] for g in gbps),
                       statistics.median(g[1] / g[0] for g in gbps))
                rows.append(row)
                print("%-6s %-10s p99 alone %7.0f us, beside the hog %7.0f us: %5.2fx; "
                      "hog %6.2f GB/s alone, %6.2f beside: %.2f" % row, flush=True)
    finally:
        stop_daemon(proc, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
