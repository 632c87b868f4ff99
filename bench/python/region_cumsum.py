#!/usr/bin/env python3
"""Prefix sums of a host region into a writable region: G elements/s of
daemons (each binary given, with each --backends and --threads setting;
a binary without a backend is left out), beside numpy.cumsum of the
same array into float64 on one thread, in one run; every daemon must
give the same bits.

    python3 bench/python/region_cumsum.py --daemon build/daemon/gpured [--daemon OTHER]
        [--backends cpu,cuda] [--threads 4,8,0] [--sizes 24,28] [--dtype f32]

Each figure: the median of --runs calls of Client.cumsum(region, out=region)
(one in flight), and the GB/s that moves through memory at least (the
elements read, 8 bytes a value written). --threads 0: the daemon's
default.
"""

import argparse
import hashlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arrays import region_of  # noqa: E402
from pipeline import start_daemon, stop_daemon  # noqa: E402


def median_s(fn, runs):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", action="append", required=True)
    ap.add_argument("--threads", default="0")
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--sizes", default="24,28")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    dt = {"f32": np.float32, "f64": np.float64}[a.dtype]
    sizes = [int(s) for s in a.sizes.split(",")]
    data = {lg: np.random.default_rng(lg).standard_normal(1 << lg).astype(dt) for lg in sizes}
    moved = np.dtype(dt).itemsize + 8
    bits = {}
    print("%s region cumsum, G elements/s (GB/s moved), median of %d" % (a.dtype, a.runs))
    for lg in sizes:
        out = np.empty(1 << lg)
        t = median_s(lambda: np.cumsum(data[lg], dtype=np.float64, out=out), a.runs)
        print("%-44s 2^%d: %6.3f (%5.1f)" % ("numpy.cumsum, one thread", lg, (1 << lg) / t / 1e9,
                                              (1 << lg) * moved / t / 1e9))
    runs = [(i, exe, be, th) for i, exe in enumerate(a.daemon) for be in a.backends.split(",")
            for th in a.threads.split(",")]
    for i, exe, be, th in runs:
        extra = ["--backend", be] + (["--threads", th] if th != "0" else [])
        name = "daemon %d, %s" % (i + 1, " ".join(extra))
        try:
            proc, path, tmp = start_daemon(exe, extra)
        except SystemExit:
            print("%s: did not start" % name)
            continue
        try:
            with gpured.Client(path, timeout=300) as c:
                for lg in sizes:
                    n = 1 << lg
                    r = region_of(c, data[lg])
                    o = c.empty(n, np.float64, writable=True)
                    c.cumsum(r, out=o)
                    bits.setdefault(lg, set()).add(
                        hashlib.blake2b(memoryview(o).cast("B")).hexdigest())
                    t = median_s(lambda: c.cumsum(r, out=o), a.runs)
                    print("%-44s 2^%d: %6.3f (%5.1f)" % (name, lg, n / t / 1e9, n * moved / t / 1e9),
                          flush=True)
                    del r, o
        finally:
            stop_daemon(proc, tmp)
    same = all(len(b) == 1 for b in bits.values())
    print("same bits in every daemon: %s" % same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
