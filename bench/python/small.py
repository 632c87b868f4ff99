#!/usr/bin/env python3
"""Small requests from Python beside the C load generator, in one run
against one daemon, on both of the Python client's paths: with its C
extension (gpured._fast) and pure Python:

- 16 in flight: requests per second of Client.submit from one thread,
  16 kept in flight on one connection, against `gpured-benchmark -c 1
  -P 16`;
- one at a time: the p50 of Client.sum (each call timed), against the p50
  round trip of `gpured-benchmark -c 1 -P 1` (libgpured).

    python3 bench/python/small.py --daemon build/daemon/gpured --c-bench build/bench/gpured-benchmark

With --daemon it starts that gpured on a temporary socket, the CPU
backend and its other options the defaults (--socket: a running one).
The extension is looked for in the build's python/ folder (the one
above --c-bench's bench/, or --ext-dir); where it is not there (or
GPURED_PURE_PYTHON is set) only the pure path is measured, and the run
says so. The measurements take turns, --runs times; it prints each run
and the medians, and each path's figure over C's (requests per second:
Python / C; p50: Python / C).
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

# The client's two paths: (name, the connection class a Client makes).
PATHS = ("extension", "pure")


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


def import_client(ext_dir):
    """gpured, with the C extension from ext_dir (a build's python/ folder)
    where it is there; its connection class by path name. (Before anything
    imports gpured: its package path is fixed then.)"""
    if ext_dir and os.path.isdir(os.path.join(ext_dir, "gpured")):
        sys.path.append(ext_dir)
    import gpured
    import gpured.client
    conns = {"pure": gpured.client._Conn}
    if gpured.client._fast is not None:
        conns["extension"] = gpured.client._FastConn
    return gpured, conns


def client_on(gpured, conn_class, path):
    """A Client of the given path (the class its connection is made of)."""
    keep = gpured.client._CONN
    gpured.client._CONN = conn_class
    try:
        return gpured.Client(path)
    finally:
        gpured.client._CONN = keep


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", help="a running daemon's socket")
    ap.add_argument("--daemon", help="start this gpured binary on a temporary socket")
    ap.add_argument("--c-bench", required=True, help="the gpured-benchmark binary")
    ap.add_argument("--ext-dir", help="the folder holding gpured/_fast*.so (default: the "
                    "python/ folder of --c-bench's build)")
    ap.add_argument("--bytes", type=int, default=1024, help="bytes per request (f32), default 1024")
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    ext_dir = args.ext_dir
    if ext_dir is None:
        ext_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.c_bench))),
                               "python")
    gpured, conns = import_client(ext_dir)
    paths = [p for p in PATHS if p in conns]
    if "extension" not in conns:
        print("the C extension is not in use (%s): measuring the pure path only" %
              ("GPURED_PURE_PYTHON is set" if os.environ.get("GPURED_PURE_PYTHON")
               else "no gpured/_fast*.so under %s" % ext_dir), flush=True)

    from pipeline import start_daemon, stop_daemon
    proc = tmp = None
    path = args.socket
    if args.daemon:
        proc, path, tmp = start_daemon(args.daemon, [])
    clients = {}
    try:
        x = np.ones(max(args.bytes // 4, 1), np.float32)
        rates = {k: [] for k in paths + ["c"]}
        p50s = {k: [] for k in paths + ["c"]}
        for k in paths:
            c = clients[k] = client_on(gpured, conns[k], path)
            py_rate(c, x, args.inflight, 0.3)        # warm up
            py_p50(c, x, 0.3)
        for i in range(args.runs):
            cr = c_bench(args.c_bench, path, args.inflight, x.size, args.seconds)
            rates["c"].append(cr["requests_per_s"])
            for k in paths:
                rates[k].append(py_rate(clients[k], x, args.inflight, args.seconds))
            cl = c_bench(args.c_bench, path, 1, x.size, args.seconds)
            p50s["c"].append(cl["latency_us"]["p50"])
            for k in paths:
                p50s[k].append(py_p50(clients[k], x, args.seconds))
            print("run %d: %d in flight: C %.0f req/s, %s; one at a time p50: C %.1f us, %s" % (
                i + 1, args.inflight, rates["c"][-1],
                ", ".join("%s %.0f (%.2f)" % (k, rates[k][-1], rates[k][-1] / rates["c"][-1])
                          for k in paths),
                p50s["c"][-1],
                ", ".join("%s %.1f us (%.2fx)" % (k, p50s[k][-1], p50s[k][-1] / p50s["c"][-1])
                          for k in paths)), flush=True)
        med = {k: {w: statistics.median(v[w]) for w in v} for k, v in
               (("rate", rates), ("p50", p50s))}
        print("median of %d runs (%d B f32 sums; load average %.1f):" %
              (args.runs, x.nbytes, os.getloadavg()[0]))
        print("  %d in flight: C %.0f req/s; %s" % (
            args.inflight, med["rate"]["c"],
            "; ".join("%s %.0f req/s: %.2f of C" % (k, med["rate"][k],
                                                    med["rate"][k] / med["rate"]["c"])
                      for k in paths)))
        print("  one at a time p50: C %.1f us; %s" % (
            med["p50"]["c"],
            "; ".join("%s %.1f us: %.2fx C" % (k, med["p50"][k], med["p50"][k] / med["p50"]["c"])
                      for k in paths)))
    finally:
        for c in clients.values():
            c.close()
        stop_daemon(proc, tmp)


if __name__ == "__main__":
    main()
