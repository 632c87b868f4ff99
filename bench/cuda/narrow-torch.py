#!/usr/bin/env python3
"""torch.sum (and amax/amin) of narrow-dtype CUDA tensors, timed as
gpured-narrow-bench times its kernels: blocks of back-to-back calls
between two CUDA events, each call on another tensor of a set that
does not fit in L2, after a warm-up; medians of five blocks. Prints
microseconds a call and GB/s of the tensor's bytes, one line each, for
n = 2^24, 2^26, 2^28, so that the two outputs of one run on one machine
give the ratio ours / torch.

    narrow-torch.py [--hi E]
"""
import statistics
import sys

import torch

hi = 28
if "--hi" in sys.argv:
    hi = int(sys.argv[sys.argv.index("--hi") + 1])

dev = torch.device("cuda")
dtypes = [
    ("f16", torch.float16),
    ("bf16", torch.bfloat16),
    ("i8", torch.int8),
    ("u8", torch.uint8),
    ("i16", torch.int16),
]
for name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, name):
        dtypes.append(("f8e4m3" if "e4m3" in name else "f8e5m2", getattr(torch, name)))

ops = {
    "sum": lambda t: torch.sum(t),
    "max": lambda t: torch.amax(t),
    "min": lambda t: torch.amin(t),
}

print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
print(f"{'op':6} {'dtype':7} {'lg n':4} {'torch us':>9} {'GB/s':>8}")
for dname, dt in dtypes:
    for lg in range(24, hi + 1, 2):
        n = 1 << lg
        esize = torch.tensor([], dtype=dt).element_size()
        count = max(2, min(64, (2 << 30) // (n * esize)))
        try:
            if dt.is_floating_point:
                src = torch.rand(n, device=dev, dtype=torch.float32) * 2 - 1
                ts = [src.to(dt) for _ in range(count)]
            else:
                info = torch.iinfo(dt)
                ts = [torch.randint(info.min, info.max, (n,), device=dev, dtype=dt)
                      for _ in range(count)]
        except Exception as e:  # a dtype torch cannot make here
            print(f"# {dname}: {e}")
            break
        for opname, f in ops.items():
            try:
                f(ts[0])
            except Exception as e:
                print(f"# {opname} {dname}: {type(e).__name__}")
                continue
            k = max(20, min(2000, (1 << 30) // (n * esize)))
            times = []
            for _ in range(5):
                for i in range(3):
                    f(ts[i % count])
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(k):
                    f(ts[i % count])
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1) * 1e3 / k)
            us = statistics.median(times)
            print(f"{opname:6} {dname:7} {lg:<4} {us:9.1f} {n * esize / us / 1e3:8.0f}", flush=True)
        del ts
        torch.cuda.empty_cache()
