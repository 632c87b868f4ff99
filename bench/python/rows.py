#!/usr/bin/env python3
"""Row sums of a CUDA tensor from Python: one segmented request against one
request a row, beside PyTorch, in one run.

    python3 bench/python/rows.py --daemon build-gpu/daemon/gpured [--rows 100000]
        [--cols 256] [--inflight 64] [--runs 3]

A (rows, cols) float32 torch tensor on the GPU, mapped by the daemon (run
here with --backend cuda --allow-cuda-ipc yes):

- segmented: Client.sum(t, offsets=...), one request (the GPU's segmented
  reduce, each row's sum exact);
- per row: Client.submit("sum", t[i]) for every row, --inflight requests
  kept in flight (all rows share the tensor's one mapping);
- torch: t.sum(dim=1) (float32, not exact) and t.sum(dim=1,
  dtype=torch.float64), timed to torch.cuda.synchronize().

Each figure is the median of --runs passes over every row; rows/s and the
speed-up of the segmented request over one request a row are printed, one
JSON line each. The per-row answers are checked against the segmented
ones (the same exact sums).
"""

import argparse
import collections
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpured  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arrays import latency  # noqa: E402
from pipeline import start_daemon, stop_daemon  # noqa: E402


def per_row(c, t, inflight):
    """Every row's sum, one request a row, inflight of them in flight."""
    out = []
    window = collections.deque()
    for i in range(t.shape[0]):
        if len(window) == inflight:
            out.append(window.popleft().result())
        window.append(c.submit("sum", t[i]))
    out.extend(f.result() for f in window)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        raise SystemExit("rows.py: no CUDA device for torch")
    proc, path, tmp = start_daemon(a.daemon, ["--backend", "cuda", "--allow-cuda-ipc", "yes"])
    try:
        c = gpured.Client(path, timeout=120)
        g = torch.Generator(device="cuda").manual_seed(7)
        t = torch.rand(a.rows, a.cols, generator=g, device="cuda", dtype=torch.float32) - 0.5
        offs = np.arange(0, t.numel() + 1, a.cols)

        seg = c.sum(t, offsets=offs)
        rows = per_row(c, t, a.inflight)
        if rows != seg.tolist():
            raise SystemExit("rows.py: per-row sums differ from the segmented request's")

        def torch_f32():
            t.sum(dim=1)
            torch.cuda.synchronize()

        def torch_f64():
            t.sum(dim=1, dtype=torch.float64)
            torch.cuda.synchronize()

        cases = [("segmented", lambda: c.sum(t, offsets=offs)),
                 ("per row", lambda: per_row(c, t, a.inflight)),
                 ("torch sum(dim=1)", torch_f32),
                 ("torch sum(dim=1, float64)", torch_f64)]
        secs = {}
        for name, fn in cases:
            secs[name] = latency(fn, reps=a.runs) / 1e6
            print(json.dumps({"case": name, "rows": a.rows, "cols": a.cols,
                              "inflight": a.inflight if name == "per row" else None,
                              "ms": round(secs[name] * 1e3, 3),
                              "rows_per_s": round(a.rows / secs[name])}), flush=True)
        print(json.dumps({"speedup_segmented_over_per_row":
                          round(secs["per row"] / secs["segmented"], 1)}), flush=True)
        c.close()
    finally:
        stop_daemon(proc, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
