#!/usr/bin/env python3
"""Host data on a CUDA daemon: a shared-memory region reduced with the
GPUs alone, the CPU alone and both (--host-data gpu, cpu, both), beside a
CPU daemon, in one run; every mode must give the same bits.

    python3 bench/python/host_split.py --daemon build/daemon/gpured [--dtype f32] [--op sum]

Each figure: GB/s of the region's bytes with --inflight requests in flight,
the median of --runs loops of --seconds each, for 2^20, 2^24, 2^26 and
2^28 elements (--sizes); --dtype f32, f64 or i32; --op any reduce
(sum, sumsq, min, max, argmin, argmax, moments); --segments L: of
segments of random lengths, L elements on average. Prints a table, each
engine's part of `both` at each size (from the daemon's stats) and, with
--csv FILE, the table as CSV for a plot.
"""

import argparse
import csv
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arrays import pipelined, rate, region_of  # noqa: E402
from pipeline import start_daemon, stop_daemon  # noqa: E402

MODES = [("cuda, gpu", ["--backend", "cuda", "--host-data", "gpu"]),
         ("cuda, cpu", ["--backend", "cuda", "--host-data", "cpu"]),
         ("cuda, both", ["--backend", "cuda", "--host-data", "both"]),
         ("cpu daemon", ["--backend", "cpu"])]


def offsets(n, mean):
    """Offsets of segments over n elements, of lengths uniform in [0,
    2 mean], the same for every mode."""
    lens = np.random.default_rng(n).integers(0, 2 * mean + 1, n // mean + 1)
    off = np.concatenate([[0], np.cumsum(lens)])
    return np.concatenate([off[off < n], [n]]).astype(np.int64)


def key(v):
    """A result's bits, arrays' whole."""
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.tobytes())
    if isinstance(v, tuple):
        return tuple(key(x) for x in v)
    return repr(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--op", default="sum")
    ap.add_argument("--sizes", default="20,24,26,28")
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--segments", type=int, default=0)
    ap.add_argument("--csv")
    a = ap.parse_args()
    dt = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[a.dtype]
    sizes = [int(s) for s in a.sizes.split(",")]
    table = {}
    bits = {}
    # the same elements in every mode
    data = {lg: (np.random.default_rng(lg).standard_normal(1 << lg) * 1000).astype(dt)
            for lg in sizes}
    kw = {lg: {"offsets": offsets(1 << lg, a.segments)} for lg in sizes} if a.segments else {}
    for name, extra in MODES:
        proc, path, tmp = start_daemon(a.daemon, extra)
        try:
            with gpured.Client(path, timeout=120) as c:
                for lg in sizes:
                    n = 1 << lg
                    r = region_of(c, data[lg])
                    v = c.submit(a.op, r, **kw.get(lg, {})).result()
                    bits.setdefault(lg, set()).add(key(v))
                    s0 = c.stats()["host_data"]
                    t0 = time.monotonic()
                    table[name, lg] = rate(pipelined(c, r, a.inflight, a.op, **kw.get(lg, {})), n * r.itemsize,
                                           a.seconds, a.runs)
                    if name == "cuda, both":
                        table["split", lg] = (s0, c.stats()["host_data"], time.monotonic() - t0)
                    del r
        finally:
            stop_daemon(proc, tmp)
    print("%s region %s%s, %d in flight, GB/s (median of %d)" % (
        a.dtype, a.op, " of segments of %d elements on average" % a.segments if a.segments else "",
        a.inflight, a.runs))
    print("%-12s" % "elements" + "".join("%14s" % m for m, _ in MODES) + "   both / best")
    rows = []
    for lg in sizes:
        vals = [table[m, lg] for m, _ in MODES]
        best = max(vals[0], vals[1], vals[3])
        print("2^%-10d" % lg + "".join("%14.2f" % v for v in vals) + "   %.2f" % (vals[2] / best))
        rows.append([lg] + vals)
    # each engine's part of `both` while it was timed: its share of the
    # bytes, its pieces, the part of the time it had some in flight, the
    # GB/s it read in that time and the rate the scheduler knew at the end
    print("`both`, each engine:%25s%40s" % ("gpu", "cpu"))
    for lg in sizes:
        s0, s1, secs = table["split", lg]
        d = {e: {k: s1[e][k] - s0[e][k] for k in ("bytes", "jobs", "busy_s")} for e in ("gpu", "cpu")}
        total = (d["gpu"]["bytes"] + d["cpu"]["bytes"]) or 1
        print("2^%-10d" % lg + "".join(
            "  %3.0f%% %6d pieces busy %3.0f%% %6.1f GB/s (%5.1f)" % (
                100 * d[e]["bytes"] / total, d[e]["jobs"], 100 * d[e]["busy_s"] / secs,
                d[e]["bytes"] / d[e]["busy_s"] / 1e9 if d[e]["busy_s"] else 0,
                s1[e]["rate_gbps"]) for e in ("gpu", "cpu")))
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
