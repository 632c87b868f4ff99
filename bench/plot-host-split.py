#!/usr/bin/env python3
"""Draw bench/python/host_split.py's CSV: GB/s of a region's sum against
its size for the GPU path, the CPU path, both, and a CPU daemon, beside
the ceilings gpured-host-ceiling measured on the same kind of host (its
JSON lines: the threads alone, the copies alone, both) as lines (PNG and
SVG).

usage: bench/plot-host-split.py SPLIT.csv CEILING.jsonl OUTBASE
"""
import csv
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    split_csv, ceiling, out = sys.argv[1:4]
    rows = list(csv.reader(open(split_csv)))
    names, data = rows[0][1:], rows[1:]
    sizes = [4 << int(r[0]) for r in data]          # f32 elements: bytes
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, name in enumerate(names):
        ax.plot(sizes, [float(r[i + 1]) for r in data], marker="o", label=name)
    ceil = {}
    for line in open(ceiling):
        if line.strip():
            r = json.loads(line)
            ceil.setdefault(r["what"], []).append((r["bytes"], r["gb_per_s"]))
    styles = {"cpu": ("threads alone (read)", ":"), "gpu": ("copies alone (the registered region to the GPU)", "--"),
              "both": ("threads + copies", "-.")}
    for what, (label, ls) in styles.items():
        pts = sorted(ceil.get(what, []))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, color="gray", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("region bytes (f32)")
    ax.set_ylabel("GB/s, 4 sums in flight")
    ax.set_title("Host data on a CUDA daemon: --host-data gpu, cpu, both")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)
    fig.savefig(out + ".svg")


if __name__ == "__main__":
    main()
