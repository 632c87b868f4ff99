#!/usr/bin/env python3
"""Draw bench/path-sweep.sh's output: GB/s against array size for each
data path, with the ceilings as lines (PNG and SVG).

usage: bench/plot-paths.py SWEEP.jsonl OUTBASE     (writes OUTBASE.png, .svg)

The dtype in the axis label is the sweep's (f32 where it does not say).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dtype = next((r["dtype"] for r in rows if "dtype" in r), "f32")
fig, ax = plt.subplots(figsize=(8, 5))
series = {}
for r in rows:
    if "path" not in r:
        continue
    if r["path"] == "device":
        x, y = r["r"]["bytes"], r["r"]["gpured_gb_per_s"]
        series.setdefault(("cuda", "device-read-kernel"), []).append((x, r["r"]["read_kernel_gb_per_s"]))
    else:
        x, y = r["bytes"], r["r"]["payload_gb_per_s"]
    series.setdefault((r["backend"], r["path"]), []).append((x, y))
labels = {
    ("cpu", "socket"): "CPU backend, socket",
    ("cpu", "region"): "CPU backend, shared memory",
    ("cuda", "socket"): "CUDA backend, socket",
    ("cuda", "region"): "CUDA backend, shared memory",
    ("cuda", "device"): "CUDA backend, array on the GPU",
    ("cuda", "device-read-kernel"): "read-bandwidth kernel (ceiling of GPU arrays)",
}
for key, pts in sorted(series.items()):
    pts.sort()
    style = ":" if key[1] == "device-read-kernel" else "-o"
    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=labels.get(key, " ".join(key)))
for r in rows:
    if r.get("ceiling") == "socket":
        ax.axhline(r["r"]["gb_per_s"], ls="--", c="gray")
        ax.text(4096, r["r"]["gb_per_s"] * 1.08, "raw Unix socket", color="gray", fontsize=8)
    if r.get("ceiling") == "h2d":
        ax.axhline(r["r"]["gb_per_s"], ls="--", c="black")
        ax.text(4096, r["r"]["gb_per_s"] * 1.08, "pinned host-to-device copy", fontsize=8)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("array size, bytes (%s sum)" % dtype)
ax.set_ylabel("GB/s, one client, 4 in flight")
ax.set_title("Where each path wins")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
fig.savefig(sys.argv[2] + ".png", dpi=110)
fig.savefig(sys.argv[2] + ".svg")
