#!/usr/bin/env python3
"""Another user's requests beside a user whose data cost the CPU more time.

One daemon (run as root, which this needs: the other user is uid 65534).
The other user sums a 4 MiB f32 shared-memory region over and over, one
request at a time (larger than a request the daemon reduces on its own
thread, so on the CPU's workers); first alone, then beside a hog, this
script's own user, that sums a 256 MiB region of f32 data over every
finite exponent back to back, 2 in flight. Prints the other user's p50
and p99 alone and beside the hog, their ratios, and the hog's GB/s, the
medians of --rounds rounds, for each daemon binary given.

    sudo python3 bench/python/fair_users.py --daemon OLD/gpured --daemon NEW/gpured \\
        [--backend cpu] [-- more daemon arguments]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, HERE)
from fair_wide import fill  # noqa: E402
from pipeline import start_daemon, stop_daemon  # noqa: E402

OTHER_UID = 65534


def other(path, seconds):
    """As uid OTHER_UID: sum a 4 MiB region one at a time for seconds; the
    latencies (s) to standard output."""
    os.setgid(OTHER_UID)
    os.setuid(OTHER_UID)
    with gpured.Client(path, timeout=60) as c:
        r = c.empty(1 << 20, np.float32)
        r[:] = np.random.default_rng(2).standard_normal(1 << 20).astype(np.float32)
        c.sum(r)
        lat = []
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            t0 = time.perf_counter()
            c.sum(r)
            lat.append(time.perf_counter() - t0)
    json.dump(lat, sys.stdout)


def hog(path, mib, seconds, out):
    """Sum a region of every-exponent f32 back to back, 2 in flight."""
    n = mib << 18
    with gpured.Client(path, timeout=300) as c:
        r = c.empty(n, np.float32)
        r[:] = fill("every", n)
        c.sum(r)
        open(out + ".ready", "w").close()
        done = 0
        t0 = time.time()
        futs = [c.submit("sum", r) for _ in range(2)]
        while time.time() - t0 < seconds:
            futs.pop(0).result()
            done += 1
            futs.append(c.submit("sum", r))
        for f in futs:
            f.result()
            done += 1
        el = time.time() - t0
    with open(out, "w") as f:
        json.dump({"gbps": done * n * 4 / el / 1e9}, f)


def run_other(path, seconds):
    p = subprocess.run([sys.executable, __file__, "--other-only", path, str(seconds)],
                       check=True, capture_output=True, text=True)
    lat = sorted(json.loads(p.stdout))
    return lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6, len(lat)


def one_daemon(exe, a):
    proc, path, tmp = start_daemon(exe, ["--backend", a.backend] + a.extra)
    os.chmod(tmp, 0o755)
    os.chmod(path, 0o777)
    rows = []
    try:
        for _ in range(a.rounds):
            p50a, p99a, na = run_other(path, a.seconds)
            out = os.path.join(tmp, "hog.json")
            h = subprocess.Popen([sys.executable, __file__, "--hog-only", path, str(a.mib),
                                  str(a.seconds * 1.5 + 1), out])
            while not os.path.exists(out + ".ready") and h.poll() is None:
                time.sleep(0.05)
            time.sleep(a.seconds / 4)
            p50b, p99b, nb = run_other(path, a.seconds)
            h.wait()
            os.unlink(out + ".ready")
            with open(out) as f:
                gbps = json.load(f)["gbps"]
            rows.append((p50a, p99a, p50b, p99b, gbps))
    finally:
        stop_daemon(proc, tmp)
    med = [statistics.median(r[i] for r in rows) for i in range(5)]
    print("%s: the other user's 4 MiB sums alone p50 %.0f us p99 %.0f us; beside the hog "
          "p50 %.0f us p99 %.0f us: p50 %.2fx, p99 %.2fx; hog %.2f GB/s (medians of %d)" %
          (exe, med[0], med[1], med[2], med[3], med[2] / med[0], med[3] / med[1], med[4],
           a.rounds))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", action="append", default=[])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--other-only", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--hog-only", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("extra", nargs="*", help="more daemon arguments")
    a = ap.parse_args()
    if a.other_only:
        other(a.other_only[0], float(a.other_only[1]))
        return 0
    if a.hog_only:
        hog(a.hog_only[0], int(a.hog_only[1]), float(a.hog_only[2]), a.hog_only[3])
        return 0
    if os.geteuid() != 0:
        raise SystemExit("run as root: the other user is uid %d" % OTHER_UID)
    for exe in a.daemon:
        one_daemon(exe, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
