#!/usr/bin/env python3
"""Large arrays from Python, each path beside its reference, in one run:

- host: a NumPy array sent over the socket (Client.sum(a)), the same
  elements in a shared-memory region (Client.empty), and NumPy's own sum
  of them on one core;
- gpu (with --gpu, where torch has a CUDA device): a torch tensor reduced
  in place by the daemon (map kind cuda_ipc; the daemon must run with
  --allow-cuda-ipc yes) against torch.sum of the same tensor.

    python3 bench/python/arrays.py --daemon build/daemon/gpured
    python3 bench/python/arrays.py --daemon build-gpu/daemon/gpured --backend cuda --gpu

--spin-us makes the client read for its answers that long before it
sleeps (Client(spin_us=...)).

Each figure is the median of --runs timed loops of --seconds each; with
--inflight k, k requests are kept in flight (Client.submit). GB/s counts
the array's bytes once per reduction.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import start_daemon, stop_daemon  # noqa: E402


def rate(fn, nbytes, seconds, runs):
    """Median GB/s of fn() (one reduction per call) over runs loops."""
    fn()
    out = []
    for _ in range(runs):
        n = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            fn()
            n += 1
            t = time.perf_counter()
            if t >= end:
                break
        out.append(n * nbytes / (t - t0) / 1e9)
    return statistics.median(out)


def region_of(c, x):
    """A shared-memory region of client c (Client.empty) holding x."""
    r = c.empty(x.size, x.dtype)
    r[:] = x
    return r


def pipelined(c, x, inflight, op="sum", **kw):
    """A callable reducing x by op with inflight requests outstanding
    (kw: submit()'s options, such as offsets=)."""
    futs = []

    def one():
        futs.append(c.submit(op, x, **kw))
        if len(futs) >= inflight:
            futs.pop(0).result()
    return one


def latency(fn, reps=200):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def latency_pair(fa, fb, reps=2000, rounds=10):
    """fa's and fb's p50 (us) over reps calls each, taken in turns of
    reps // rounds calls, a round of one then a round of the other, so
    that the two share whatever the machine does meanwhile; and the
    median over the rounds of fa's round p50 over fb's."""
    fa()
    fb()
    per = max(reps // rounds, 1)
    all_a, all_b, ratios = [], [], []
    for _ in range(rounds):
        got = []
        for fn, acc in ((fa, all_a), (fb, all_b)):
            ts = []
            for _ in range(per):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            acc += ts
            got.append(statistics.median(ts))
        ratios.append(got[0] / got[1])
    return (statistics.median(all_a) * 1e6, statistics.median(all_b) * 1e6,
            statistics.median(ratios))


def host(c, args):
    for mib in args.mib:
        n = (mib << 20) // 4
        a = np.random.default_rng(1).random(n, dtype=np.float32)
        r = c.empty(n, np.float32)
        r[:] = a
        assert c.sum(a) == c.sum(r)
        nb = a.nbytes
        sock = rate(pipelined(c, a, args.inflight), nb, args.seconds, args.runs)
        shm = rate(pipelined(c, r, args.inflight), nb, args.seconds, args.runs)
        npy = rate(lambda: a.sum(), nb, args.seconds, args.runs)
        print("host f32 %4d MiB  socket %6.2f GB/s  region %6.2f GB/s  numpy.sum %6.2f GB/s  "
              "region/socket %.2f" % (mib, sock, shm, npy, shm / sock), flush=True)
        del r


def gpu(c, args):
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("--gpu: torch has no CUDA device")
    for lg in args.gpu_log2:
        n = 1 << lg
        t = torch.rand(n, dtype=torch.float32, device="cuda")
        nb = n * 4
        ours = rate(pipelined(c, t, args.inflight), nb, args.seconds, args.runs)

        def tsum(k=args.inflight):
            for _ in range(k):
                s = torch.sum(t)
            s.item()
        ref = rate(tsum, nb * args.inflight, args.seconds, args.runs)
        lat = latency(lambda: c.sum(t))
        tlat = latency(lambda: torch.sum(t).item())
        print("gpu  f32 2^%d  gpured %8.1f GB/s  torch.sum %8.1f GB/s  ratio %.3f  "
              "p50 one request %7.1f us  torch.sum().item() %7.1f us  (+%.1f us)"
              % (lg, ours, ref, ours / ref, lat, tlat, lat - tlat), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemon", help="start this gpured on a temporary socket")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--socket", help="or use the daemon on this socket")
    ap.add_argument("--mib", type=int, nargs="*", default=[256])
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--gpu-log2", type=int, nargs="*", default=[16, 26, 28])
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--spin-us", type=int, default=0,
                    help="the client reads for its answers this long before sleeping")
    args = ap.parse_args()
    proc = tmp = None
    path = args.socket
    if args.daemon:
        extra = ["--backend", args.backend, "--allow-cuda-ipc", "yes"]
        proc, path, tmp = start_daemon(args.daemon, extra)
    try:
        with gpured.Client(path, spin_us=args.spin_us) as c:
            print("daemon backend %s, client spin %d us" % (c.info().get("backend"), args.spin_us),
                  flush=True)
            if args.mib:
                host(c, args)
            if args.gpu:
                gpu(c, args)
    finally:
        stop_daemon(proc, tmp)


if __name__ == "__main__":
    main()
