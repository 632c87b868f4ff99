#!/usr/bin/env python3
"""Host data on a CUDA daemon: a shared-memory region summed with the
GPUs alone, the CPU alone and both (--host-data gpu, cpu, both), beside a
CPU daemon, in one run; every mode must give the same bits.

    python3 bench/python/host_split.py --daemon build/daemon/gpured [--dtype f32]

Each figure: GB/s of the region's bytes with --inflight sums in flight,
the median of --runs loops of --seconds each, for 2^20, 2^24, 2^26 and
2^28 elements (--sizes). Prints a table and, with --csv FILE, the same as
CSV for a plot.
"""

import argparse
import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arrays import pipelined, rate  # noqa: E402
from pipeline import start_daemon, stop_daemon  # noqa: E402

MODES = [("cuda, gpu", ["--backend", "cuda", "--host-data", "gpu"]),
         ("cuda, cpu", ["--backend", "cuda", "--host-data", "cpu"]),
         ("cuda, both", ["--backend", "cuda", "--host-data", "both"]),
         ("cpu daemon", ["--backend", "cpu"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--sizes", default="20,24,26,28")
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--csv")
    a = ap.parse_args()
    dt = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[a.dtype]
    sizes = [int(s) for s in a.sizes.split(",")]
    table = {}
    bits = {}
    for name, extra in MODES:
        proc, path, tmp = start_daemon(a.daemon, extra)
        try:
            with gpured.Client(path, timeout=120) as c:
                for lg in sizes:
                    n = 1 << lg
                    r = c.empty(n, dt)
                    # the same elements in every mode
                    r[:] = (np.random.default_rng(lg).standard_normal(n) * 1000).astype(dt)
                    v = c.sum(r)
                    bits.setdefault(lg, set()).add(np.float64(v).tobytes())
                    table[name, lg] = rate(pipelined(c, r, a.inflight), n * r.itemsize,
                                           a.seconds, a.runs)
                    if name == "cuda, both":
                        table["split", lg] = c.stats()["host_data"]
                    del r
        finally:
            stop_daemon(proc, tmp)
    print("%s region sum, %d in flight, GB/s (median of %d)" % (a.dtype, a.inflight, a.runs))
    print("%-12s" % "elements" + "".join("%14s" % m for m, _ in MODES) + "   both / best")
    rows = []
    for lg in sizes:
        vals = [table[m, lg] for m, _ in MODES]
        best = max(vals[0], vals[1], vals[3])
        print("2^%-10d" % lg + "".join("%14.2f" % v for v in vals) + "   %.2f" % (vals[2] / best))
        rows.append([lg] + vals)
    for lg in sizes:
        sp = table["split", lg]
        print("2^%d split so far: gpu %.0f MB in %d jobs (%.1f GB/s), cpu %.0f MB in %d jobs "
              "(%.1f GB/s)" % (lg, sp["gpu"]["bytes"] / 1e6, sp["gpu"]["jobs"],
                               sp["gpu"]["rate_gbps"], sp["cpu"]["bytes"] / 1e6,
                               sp["cpu"]["jobs"], sp["cpu"]["rate_gbps"]))
    same = all(len(b) == 1 for b in bits.values())
    print("same bits in every mode: %s" % same)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)       # the modes' names hold commas: quoted
            w.writerow(["log2_elements"] + [m for m, _ in MODES])
            w.writerows(rows)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
