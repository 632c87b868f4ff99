#!/usr/bin/python3
"""One segmented request against one request per row, end to end, in one run.

    bench/segments-bench.py GPURED_BENCHMARK [--socket PATH] [--rows R]
        [--cols C] [--dtype f32] [--op sum] [--reps N] [--json]

R rows of C elements (default 100000 x 256 f32): the time of one `reduce`
with "offsets" (socket data, and the same array in a shared-memory region)
against R requests of one row each from gpured-benchmark (-c 1 -P 16, the
C load generator, socket data and --region), on the daemon at --socket.
Medians of --reps; the speed-up is rows-per-second of the segmented
request over the per-row requests. Each segmented reply is checked against
the same op of the first and last rows requested alone. Needs Debian's
python3-msgpack and python3-numpy."""

import argparse
import array
import json
import mmap
import os
import socket
import statistics
import struct
import subprocess
import sys
import time

import msgpack
import numpy as np

NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64,
      "f32": np.float32, "f64": np.float64}


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.s.connect(path)
        self.u = msgpack.Unpacker(raw=False, max_buffer_size=1 << 31)
        self.msgid = 0

    def call(self, method, params, fds=None):
        self.msgid += 1
        b = msgpack.packb([0, self.msgid, method, params], use_bin_type=True)
        if fds:
            self.s.sendmsg([b], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.s.sendall(b)
        while True:
            for m in self.u:
                assert m[1] == self.msgid, m
                if m[2] is not None:
                    raise RuntimeError("%s: %s" % (method, m[2]))
                return m[3]
            data = self.s.recv(1 << 20)
            if not data:
                raise RuntimeError("connection closed")
            self.u.feed(data)

    def call_data(self, params, data):
        """reduce with params and then data (a buffer), sent without a copy."""
        self.msgid += 1
        head = msgpack.packb([0, self.msgid, "reduce", [{**params, "data": b""}]], use_bin_type=True)
        assert head.endswith(b"\xc4\x00")
        view = memoryview(data).cast("B")
        head = head[:-2] + b"\xc6" + len(view).to_bytes(4, "big")
        sent = self.s.sendmsg([head, view])
        rest = len(head) + len(view) - sent
        if rest:
            self.s.sendall(view[len(view) - rest:] if sent >= len(head) else head[sent:] + bytes(view))
        return self.reply()

    def reply(self):
        while True:
            for m in self.u:
                assert m[1] == self.msgid, m
                if m[2] is not None:
                    raise RuntimeError("reduce: %s" % (m[2],))
                return m[3]
            data = self.s.recv(1 << 20)
            if not data:
                raise RuntimeError("connection closed")
            self.u.feed(data)

    def map(self, data):
        fd = os.memfd_create("segments-bench", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, len(data))
        m = mmap.mmap(fd, len(data))
        m[:] = data
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        res = self.call("map", [{"bytes": len(data)}], fds=[fd])
        os.close(fd)
        return res["region"], m


def timed(f, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), out


def per_row(bench, path, args, region):
    cmd = [bench, "-s", path, "-c", "1", "-P", "16", "-n", str(args.rows), "-d", str(args.cols),
           "--dtype", args.dtype, "--op", args.op, "--json"] + (["--region"] if region else [])
    rates = []
    for _ in range(args.reps):
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        assert r["errors"] == 0 and r["mismatches"] == 0, r
        rates.append(r["requests_per_s"])
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark")
    ap.add_argument("--socket", default=os.environ.get("GPURED_SOCKET", "/run/gpured.sock"))
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--op", default="sum")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    rng = np.random.default_rng(1)
    n = args.rows * args.cols
    x = (rng.standard_normal(n) * 100).astype(NP[args.dtype])
    offs = np.arange(0, n + 1, args.cols, dtype="<u8").tobytes()
    c = Conn(args.socket)
    p = {"op": args.op, "dtype": args.dtype, "offsets": offs}
    region, m = c.map(x.tobytes())

    t_sock, res = timed(lambda: c.call_data(p, x), args.reps)
    t_reg, res2 = timed(lambda: c.call("reduce", [{**p, "region": region, "offset": 0,
                                                    "count": n}]), args.reps)
    assert res["values"] == res2["values"] and res["segments"] == args.rows
    rb = len(res["values"]) // args.rows
    for row in (0, args.rows - 1):
        one = c.call("reduce", [{"op": args.op, "dtype": args.dtype,
                                 "data": x[row * args.cols:(row + 1) * args.cols].tobytes()}])
        v = one.get("value", one.get("sum"))
        code = "d" if (args.dtype[0] == "f" or args.op == "sumsq") else ("q" if args.dtype[0] == "i" else "Q")
        got = struct.unpack_from("<" + code, res["values"], row * rb)[0]
        assert got == v, (row, got, v)
    rows_sock = per_row(args.benchmark, args.socket, args, region=False)
    rows_reg = per_row(args.benchmark, args.socket, args, region=True)
    out = {
        "rows": args.rows, "cols": args.cols, "dtype": args.dtype, "op": args.op,
        "segmented_socket_s": t_sock, "segmented_region_s": t_reg,
        "per_row_socket_rows_per_s": rows_sock, "per_row_region_rows_per_s": rows_reg,
        "speedup_socket": (args.rows / t_sock) / rows_sock,
        "speedup_region": (args.rows / t_reg) / rows_reg,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print("%d rows of %d %s, %s:" % (args.rows, args.cols, args.dtype, args.op))
        print("  socket: one segmented request %.2f ms (%.0f rows/s); one request per row %.0f rows/s; "
              "speed-up %.1fx" % (1e3 * t_sock, args.rows / t_sock, rows_sock, out["speedup_socket"]))
        print("  region: one segmented request %.2f ms (%.0f rows/s); one request per row %.0f rows/s; "
              "speed-up %.1fx" % (1e3 * t_reg, args.rows / t_reg, rows_reg, out["speedup_region"]))
    m.close()


if __name__ == "__main__":
    sys.exit(main())
