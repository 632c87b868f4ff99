#!/usr/bin/env python3
"""gpured.dask on CPU workers against dask.array's own (inexact) sum of the
same persisted array, on the same cluster, in one run:

- dask: x.sum().compute(), NumPy's pairwise sum of each chunk;
- local: gpured.dask.sum/sumsq/moments(x), each chunk reduced in its
  worker's process with libgpured's kernels (gpured._local);
- daemon: the same with local=False, each chunk sent to the gpured the
  bench starts (CPU backend).

    python3 bench/python/dask_chunks.py --daemon build/daemon/gpured \\
        --libgpured build/client/libgpured.so.0.1.0

A LocalCluster of --workers processes of one thread each holds the array
(--mib MiB of --dtype in --chunks chunks), persisted before any timing.
Each of --runs rounds computes every row once, in turn, after a round
that warms up, so that a machine's changing load falls on all rows alike.
A row's GB/s is the median over the rounds (the array's bytes once per
reduction), its ratio the median of its ratios to dask's sum in the same
round, with the least and largest of those ratios beside it.
--no-daemon leaves out the rows by the daemon.
"""

import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import start_daemon, stop_daemon  # noqa: E402


def timed(fns, runs):
    """Seconds of each call of each of fns, runs rounds of one call of
    every fn in turn, after one round that warms up: a list per fn.
    Between calls the cluster is given time to release the last call's
    keys: a graph computed again with the same (deterministic) keys while
    they are held would take them as done."""
    out = [[] for _ in fns]
    for r in range(runs + 1):
        for i, fn in enumerate(fns):
            time.sleep(1.0)
            t0 = time.perf_counter()
            fn()
            if r:
                out[i].append(time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--libgpured", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--no-daemon", action="store_true")
    a = ap.parse_args()

    os.environ["GPURED_LIBGPURED"] = os.path.abspath(a.libgpured)
    proc, path, tmp = start_daemon(a.daemon, [])
    os.environ["GPURED_SOCKET"] = path
    warnings.simplefilter("ignore")
    import dask.array as da
    import distributed
    import gpured.dask

    cluster = distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1,
                                       processes=True, dashboard_address=":0",
                                       memory_limit=0, silence_logs=40)
    client = distributed.Client(cluster)
    try:
        itemsize = 8 if a.dtype == "float64" else 4
        n = (a.mib << 20) // itemsize
        x = da.random.RandomState(1).standard_normal(n, chunks=n // a.chunks).astype(a.dtype)
        x = x.persist()
        distributed.wait(x)
        nbytes = n * itemsize
        rows = [("dask.array sum", lambda: x.sum().compute())]
        for op in ("sum", "sumsq", "moments"):
            fn = getattr(gpured.dask, op)
            rows.append(("gpured.dask.%s, in the worker" % op, lambda fn=fn: fn(x, local=True)))
            if not a.no_daemon:
                rows.append(("gpured.dask.%s, by the daemon" % op,
                             lambda fn=fn: fn(x, local=False)))
        print("%d MiB of %s in %d chunks, %d workers of one thread; median of %d rounds" %
              (a.mib, a.dtype, a.chunks, a.workers, a.runs))
        times = timed([fn for _, fn in rows], a.runs)
        for (name, _), ts in zip(rows, times):
            ratios = sorted(d / t for d, t in zip(times[0], ts))
            print("%-36s %7.2f GB/s  %5.2fx dask's sum  [%.2f-%.2f]" %
                  (name, nbytes / statistics.median(ts) / 1e9, statistics.median(ratios),
                   ratios[0], ratios[-1]))
        same = {gpured.dask.sum(x.rechunk(c), local=True) for c in (n // 3 + 1, n // 7 + 5, n)}
        print("gpured.dask.sum over three chunkings: %d distinct value(s)" % len(same))
    finally:
        client.close()
        cluster.close()
        stop_daemon(proc, tmp)


if __name__ == "__main__":
    main()
