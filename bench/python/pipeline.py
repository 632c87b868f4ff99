#!/usr/bin/env python3
"""Requests per second from one Python thread, N requests in flight on one
connection (Client.submit), or one at a time (--inflight 1 uses the
blocking call).

    python3 bench/python/pipeline.py --daemon build/daemon/gpured
    python3 bench/python/pipeline.py --socket /run/gpured.sock --inflight 16
    python3 bench/python/pipeline.py --daemon build/daemon/gpured --aio

With --daemon it starts that gpured (CPU backend) on a temporary socket.
Prints one line per run and the median.
"""

import argparse
import asyncio
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402
import gpured.aio  # noqa: E402


def start_daemon(exe, extra):
    d = tempfile.mkdtemp(prefix="gpured-bench-")
    path = os.path.join(d, "gpured.sock")
    proc = subprocess.Popen([exe, "--socket", path, "--backend", "cpu", *extra],
                            stderr=subprocess.DEVNULL)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.close()
            return proc, path, d
        except OSError:
            s.close()
            time.sleep(0.02)
    proc.kill()
    raise SystemExit("gpured did not start")


def stop_daemon(proc, tmp):
    """End what start_daemon started (proc None: nothing)."""
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run(c, x, op, inflight, seconds):
    """(requests per second, this process's CPU microseconds per request)."""
    n = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    end = t0 + seconds
    if inflight <= 1:
        reduce = c.reduce
        while True:
            for _ in range(256):
                reduce(op, x)
            n += 256
            if time.perf_counter() >= end:
                break
    else:
        submit = c.submit
        q = collections.deque(submit(op, x) for _ in range(inflight))
        pop, push = q.popleft, q.append
        while True:
            for _ in range(256):
                pop().result()
                push(submit(op, x))
            n += 256
            if time.perf_counter() >= end:
                break
        for f in q:
            f.result()
    return n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1e6


async def run_aio(c, x, op, inflight, seconds):
    """The same on asyncio: one task, inflight futures."""
    n = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    end = t0 + seconds
    if inflight <= 1:
        while True:
            for _ in range(256):
                await c.reduce(op, x)
            n += 256
            if time.perf_counter() >= end:
                break
    else:
        q = collections.deque([await c.submit(op, x) for _ in range(inflight)])
        while True:
            for _ in range(256):
                await q.popleft()
                q.append(await c.submit(op, x))
            n += 256
            if time.perf_counter() >= end:
                break
        for f in q:
            await f
    return n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1e6


def bench_threads(path, x, args):
    rates = []
    with gpured.Client(path) as c:
        run(c, x, args.op, args.inflight, 0.3)          # warm up
        for i in range(args.runs):
            r, cpu = run(c, x, args.op, args.inflight, args.seconds)
            rates.append(r)
            print("run %d: %.0f req/s, client CPU %.1f us/req (%d B f32 %s, %d in flight)"
                  % (i + 1, r, cpu, x.nbytes, args.op, args.inflight))
    return rates


async def bench_aio(path, x, args):
    rates = []
    async with gpured.aio.Client(path) as c:
        await run_aio(c, x, args.op, args.inflight, 0.3)
        for i in range(args.runs):
            r, cpu = await run_aio(c, x, args.op, args.inflight, args.seconds)
            rates.append(r)
            print("run %d: %.0f req/s, client CPU %.1f us/req (asyncio, %d B f32 %s, %d in flight)"
                  % (i + 1, r, cpu, x.nbytes, args.op, args.inflight))
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", help="a running daemon's socket")
    ap.add_argument("--daemon", help="start this gpured binary on a temporary socket")
    ap.add_argument("--daemon-arg", action="append", default=[], help="extra daemon option")
    ap.add_argument("--bytes", type=int, default=1024, help="bytes per request (f32), default 1024")
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--op", default="sum")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--aio", action="store_true", help="gpured.aio instead of threads")
    args = ap.parse_args()

    proc = tmp = None
    path = args.socket
    if args.daemon:
        proc, path, tmp = start_daemon(args.daemon, args.daemon_arg)
    try:
        x = np.ones(max(args.bytes // 4, 0), np.float32)
        if args.aio:
            rates = asyncio.run(bench_aio(path, x, args))
        else:
            rates = bench_threads(path, x, args)
        rates.sort()
        print("median: %.0f req/s (load average %.1f)" % (rates[len(rates) // 2], os.getloadavg()[0]))
    finally:
        stop_daemon(proc, tmp)


if __name__ == "__main__":
    main()
