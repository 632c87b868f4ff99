#!/usr/bin/env python3
"""Small requests from Python beside the C load generator, in one run
against one daemon:

- 16 in flight: requests per second of Client.submit from one thread,
  16 kept in flight on one connection, against `gpured-benchmark -c 1
  -P 16`;
- one at a time: the p50 of Client.sum (each call timed), against the p50
  round trip of `gpured-benchmark -c 1 -P 1` (libgpured).

    python3 bench/python/small.py --daemon build/daemon/gpured --c-bench build/bench/gpured-benchmark

With --daemon it starts that gpured on a temporary socket, the CPU
backend and its other options the defaults (--socket: a running one).
The four measurements take turns, --runs times; it prints each run and the medians, and Python's
figure over C's (requests per second: Python / C; p50: Python / C).
"""

import argparse
import collections
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import start_daemon  # noqa: E402


def py_rate(c, x, inflight, seconds):
    """Requests per second with inflight kept in flight (Client.submit)."""
    submit = c.submit
    q = collections.deque(submit("sum", x) for _ in range(inflight))
    pop, push = q.popleft, q.append
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(256):
            pop().result()
            push(submit("sum", x))
        n += 256
        if time.perf_counter() >= end:
            break
    for f in q:
        f.result()
    return n / (time.perf_counter() - t0)


def py_p50(c, x, seconds):
    """The p50 of Client.sum(x), microseconds, one call at a time."""
    total = c.sum
    clock = time.perf_counter_ns
    times = []
    end = clock() + int(seconds * 1e9)
    while True:
        t0 = clock()
        total(x)
        t1 = clock()
        times.append(t1 - t0)
        if t1 >= end:
            break
    return statistics.median(times) / 1e3


def c_bench(exe, path, inflight, elements, seconds):
    out = subprocess.run([exe, "-s", path, "-c", "1", "-P", str(inflight), "-n", "0",
                          "-d", str(elements), "-t", str(seconds), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", help="a running daemon's socket")
    ap.add_argument("--daemon", help="start this gpured binary on a temporary socket")
    ap.add_argument("--c-bench", required=True, help="the gpured-benchmark binary")
    ap.add_argument("--bytes", type=int, default=1024, help="bytes per request (f32), default 1024")
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    proc = tmp = None
    path = args.socket
    if args.daemon:
        proc, path, tmp = start_daemon(args.daemon, [])
    try:
        x = np.ones(max(args.bytes // 4, 1), np.float32)
        rates = {"py": [], "c": []}
        p50s = {"py": [], "c": []}
        with gpured.Client(path) as c:
            py_rate(c, x, args.inflight, 0.3)        # warm up
            py_p50(c, x, 0.3)
            for i in range(args.runs):
                cr = c_bench(args.c_bench, path, args.inflight, x.size, args.seconds)
                pr = py_rate(c, x, args.inflight, args.seconds)
                cl = c_bench(args.c_bench, path, 1, x.size, args.seconds)
                pl = py_p50(c, x, args.seconds)
                rates["c"].append(cr["requests_per_s"])
                rates["py"].append(pr)
                p50s["c"].append(cl["latency_us"]["p50"])
                p50s["py"].append(pl)
                print("run %d: %d in flight: Python %.0f req/s, C %.0f (%.2f); "
                      "one at a time p50: Python %.1f us, C %.1f us (%.2f)"
                      % (i + 1, args.inflight, pr, cr["requests_per_s"],
                         pr / cr["requests_per_s"], pl, cl["latency_us"]["p50"],
                         pl / cl["latency_us"]["p50"]), flush=True)
        med = {k: {w: statistics.median(v[w]) for w in v} for k, v in
               (("rate", rates), ("p50", p50s))}
        print("median of %d runs (%d B f32 sums; load average %.1f):" %
              (args.runs, x.nbytes, os.getloadavg()[0]))
        print("  %d in flight: Python %.0f req/s, C %.0f req/s: %.2f of C" %
              (args.inflight, med["rate"]["py"], med["rate"]["c"],
               med["rate"]["py"] / med["rate"]["c"]))
        print("  one at a time p50: Python %.1f us, C %.1f us: %.2fx C" %
              (med["p50"]["py"], med["p50"]["c"], med["p50"]["py"] / med["p50"]["c"]))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
