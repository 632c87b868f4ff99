"""Segmented reduces ("offsets") at the socket level: one result per
segment, for every op and dtype, through bin and array data, requests cut
into chunks (segments that cross chunk boundaries, one that spans them
all), batched small requests and shared-memory regions at odd offsets.
Each segment's record is checked against NumPy, math.fsum and exact
sums where they define the answer, and bit for bit against a reduce
of that segment alone (which the other daemon tests check against NumPy);
empty segments give the documented identities; bad offsets get clear
errors on a connection that goes on."""

import math
import os
import random
import struct
import sys
import unittest
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Daemon  # noqa: E402
from test_exact import reference as exact_reference  # noqa: E402
from test_shm import (CupyDeviceCase, ShmCase, ShmClient, cupy_or_skip,  # noqa: E402
                      map_cupy_ones)

DTYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
OPS = ("sum", "sumsq", "min", "max", "argmin", "argmax", "moments")
NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64,
      "f32": np.float32, "f64": np.float64}
# the class daemon's chunks: 256 KiB


def kind(op, dt):
    """struct code of a record's value field."""
    if op == "sumsq" or dt[0] == "f":
        return "d"
    return "q" if dt[0] == "i" else "Q"


def record_bytes(op):
    return 16 if op.startswith("arg") else 40 if op == "moments" else 8


def decode(op, dt, values, k):
    """The k records of values as dicts shaped like single replies."""
    rb = record_bytes(op)
    assert len(values) == k * rb, (len(values), k, rb)
    v = kind(op, dt)
    out = []
    for i in range(k):
        r = values[i * rb:(i + 1) * rb]
        if op == "moments":
            s, lo, hi = struct.unpack_from("<" + v * 3, r)
            mean, var = struct.unpack_from("<dd", r, 24)
            out.append({"sum": s, "min": lo, "max": hi, "mean": mean, "var": var})
        elif op.startswith("arg"):
            val, idx = struct.unpack("<" + v + "Q", r)
            out.append({"value": val, "index": idx})
        else:
            out.append({"value": struct.unpack("<" + v, r)[0]})
    return out


def bits(x):
    if isinstance(x, float):
        return ("f", struct.pack("<d", x))
    return ("i", x)


def offsets_bin(offs):
    return struct.pack("<%dQ" % len(offs), *offs)


def random_lengths(rng, k, hi, zeros=0.1):
    return [0 if rng.random() < zeros else rng.randint(1, hi) for _ in range(k)]


def to_offsets(lengths):
    offs = [0]
    for n in lengths:
        offs.append(offs[-1] + n)
    return offs


def sample(rng, dt, n):
    """n elements of dt: mixed magnitudes and small integers for floats;
    small or full-range values for integers (rng: random.Random)."""
    g = np.random.default_rng(rng.getrandbits(64))
    t = NP[dt]
    if dt[0] == "f":
        kind = g.integers(0, 3, size=n)
        wide = g.uniform(-1, 1, size=n) * np.exp2(g.integers(-60, 61, size=n).astype(np.float64))
        x = np.where(kind == 0, g.uniform(-1e3, 1e3, size=n),
                     np.where(kind == 1, wide, g.integers(-5, 6, size=n).astype(np.float64)))
        return x.astype(t)
    info = np.iinfo(t)
    if rng.random() < 0.5:
        return g.integers(-9 if info.min else 0, 10, size=n).astype(t)
    return g.integers(info.min, info.max, size=n, dtype=t, endpoint=True)


def empty_record(op, dt):
    """What an empty segment's record holds (PROTOCOL.md, "Segments")."""
    if dt[0] == "f":
        lo, hi = math.inf, -math.inf
    else:
        info = np.iinfo(NP[dt])
        lo, hi = int(info.max), int(info.min)
    zero = 0.0 if (dt[0] == "f") else 0
    if op == "sum":
        return {"value": zero}
    if op == "sumsq":
        return {"value": 0.0}
    if op in ("min", "max"):
        return {"value": lo if op == "min" else hi}
    if op.startswith("arg"):
        return {"value": lo if op == "argmin" else hi, "index": (1 << 64) - 1}
    return {"sum": zero, "min": lo, "max": hi, "mean": math.nan, "var": math.nan}


def single_to_record(op, reply):
    if op == "moments":
        return {k: reply[k] for k in ("sum", "min", "max", "mean", "var")}
    if op.startswith("arg"):
        return {"value": reply["value"], "index": reply["index"]}
    return {"value": reply["value"]}


class Segments(ShmCase):

    CHUNK = 256 << 10  # the class daemon's chunks

    def seg_reduce(self, c, op, dt, offs, data, **extra):
        p = {"op": op, "dtype": dt, **extra, "offsets": offsets_bin(offs), "data": data}
        return c.call("reduce", [p])

    def singles(self, c, op, dt, x, offs, ddof=None):
        """Each segment reduced alone, pipelined: a reply or an error each."""
        ids = []
        for i in range(len(offs) - 1):
            seg = x[offs[i]:offs[i + 1]]
            p = {"op": op, "dtype": dt, "data": seg.tobytes()}
            if ddof is not None and len(seg) > ddof:
                p["ddof"] = ddof
            ids.append(c.request("reduce", [p]))
        # replies may come in any order
        got = {}
        for _ in ids:
            resp = c.recv()
            got[resp[1]] = resp
        return [got[msgid] for msgid in ids]

    def check_against_singles(self, c, op, dt, x, offs, got, ddof=None):
        """Integer sumsq adds squares in double lanes whose blocks restart at
        chunk boundaries, and a CUDA daemon may reduce the single requests
        on a GPU in its own order: those compare to 1e-12."""
        singles = self.singles(c, op, dt, x, offs, ddof)
        for i, resp in enumerate(singles):
            err, res = resp[2], resp[3]
            want = empty_record(op, dt) if err is not None else single_to_record(op, res)
            if err is not None:
                self.assertEqual(err["code"], "empty", (op, dt, i, err))
            if op == "moments" and err is None and ddof is not None and offs[i + 1] - offs[i] <= ddof:
                want["var"] = math.nan
            g = got[i]
            for key in want:
                if op == "sumsq" and dt[0] != "f":
                    self.assertTrue(math.isclose(g[key], want[key], rel_tol=1e-12), (i, g, want))
                    continue
                if isinstance(want[key], float) and math.isnan(want[key]):
                    self.assertTrue(math.isnan(g[key]), (op, dt, i, key, g, want))
                else:
                    self.assertEqual(bits(g[key]), bits(want[key]), (op, dt, i, key, g, want))

    def test_every_op_and_dtype_equals_each_segment_alone(self):
        rng = random.Random(20261125)
        c = self.client()
        for dt in DTYPES:
            size = 4 if dt[1:] == "32" else 8
            # about 3 chunks, in segments of up to a fifth of a chunk and
            # a few longer than a chunk
            lengths = random_lengths(rng, 40, self.CHUNK // size // 5)
            lengths[7] = 0
            lengths[8] = self.CHUNK // size + 3
            lengths[20] = 2 * self.CHUNK // size + 1
            offs = to_offsets(lengths)
            x = sample(rng, dt, offs[-1])
            for op in OPS:
                with self.subTest(dt=dt, op=op):
                    err, res = self.seg_reduce(c, op, dt, offs, x.tobytes())
                    self.assertIsNone(err)
                    self.assertEqual(res["count"], offs[-1])
                    self.assertEqual(res["segments"], len(offs) - 1)
                    got = decode(op, dt, res["values"], len(offs) - 1)
                    self.check_against_singles(c, op, dt, x, offs, got)

    def test_against_numpy_and_exact_references(self):
        rng = random.Random(7)
        c = self.client()
        for dt in ("i32", "i64", "u64", "f32", "f64"):
            lengths = random_lengths(rng, 60, 9000)
            offs = to_offsets(lengths)
            x = sample(rng, dt, offs[-1])
            for op in ("sum", "min", "max", "argmin", "argmax", "sumsq"):
                err, res = self.seg_reduce(c, op, dt, offs, x.tobytes())
                self.assertIsNone(err)
                got = decode(op, dt, res["values"], len(lengths))
                for i in range(len(lengths)):
                    seg = x[offs[i]:offs[i + 1]]
                    if len(seg) == 0:
                        continue
                    g = got[i]
                    if op == "sum" and dt[0] == "f":
                        self.assertEqual(bits(g["value"]), bits(math.fsum(seg.tolist())))
                    elif op == "sum":
                        wrap = 1 << 64
                        s = sum(seg.tolist()) % wrap
                        if dt[0] == "i" and s >= wrap // 2:
                            s -= wrap
                        self.assertEqual(g["value"], s)
                    elif op == "sumsq" and dt[0] == "f":
                        # the exact sum of squares, rounded once
                        self.assertEqual(bits(g["value"]), bits(exact_reference("sumsq", seg)))
                    elif op == "sumsq":
                        ref = float(np.sum(seg.astype(np.float64) ** 2))
                        self.assertTrue(math.isclose(g["value"], ref, rel_tol=1e-12))
                    elif op in ("min", "max"):
                        ref = seg.min() if op == "min" else seg.max()
                        self.assertEqual(g["value"], ref.item())
                    else:
                        ref = int(seg.argmin() if op == "argmin" else seg.argmax())
                        self.assertEqual(g["index"], ref, (op, dt, i))
                        self.assertEqual(g["value"], seg[ref].item())

    def test_moments_with_ddof_and_short_segments(self):
        rng = random.Random(3)
        c = self.client()
        for dt in ("i64", "f32", "f64"):
            lengths = [0, 1, 2, 3] + random_lengths(rng, 30, 70000)
            offs = to_offsets(lengths)
            x = sample(rng, dt, offs[-1])
            err, res = self.seg_reduce(c, "moments", dt, offs, x.tobytes(), ddof=2)
            self.assertIsNone(err)
            got = decode("moments", dt, res["values"], len(lengths))
            self.check_against_singles(c, "moments", dt, x, offs, got, ddof=2)
            # segments of 1 and 2 elements: var NaN (ddof 2), mean defined
            self.assertTrue(math.isnan(got[1]["var"]) and math.isnan(got[2]["var"]))
            self.assertFalse(math.isnan(got[1]["mean"]))

    def test_array_data_and_small_batched_requests(self):
        c = self.client()
        # many small segmented requests in flight at once ride the batch
        rng = random.Random(11)
        reqs = []
        for j in range(200):
            dt = rng.choice(DTYPES)
            op = rng.choice(OPS)
            lengths = random_lengths(rng, rng.randint(1, 6), 5, zeros=0.3)
            offs = to_offsets(lengths)
            x = sample(rng, dt, offs[-1])
            data = [v.item() for v in x] if j % 2 else x.tobytes()
            msgid = c.request("reduce", [{"op": op, "dtype": dt, "offsets": offsets_bin(offs), "data": data}])
            reqs.append((msgid, op, dt, x, offs))
        replies = {}
        for _ in reqs:
            resp = c.recv()
            replies[resp[1]] = resp
        for msgid, op, dt, x, offs in reqs:
            resp = replies[msgid]
            self.assertIsNone(resp[2], resp)
            got = decode(op, dt, resp[3]["values"], len(offs) - 1)
            self.check_against_singles(c, op, dt, x, offs, got)

    def test_empty_segments_and_no_elements(self):
        c = self.client()
        for dt in DTYPES:
            for op in OPS:
                err, res = self.seg_reduce(c, op, dt, [0, 0, 0, 0], b"")
                self.assertIsNone(err)
                self.assertEqual((res["count"], res["segments"]), (0, 3))
                got = decode(op, dt, res["values"], 3)
                for g in got:
                    want = empty_record(op, dt)
                    for key in want:
                        if isinstance(want[key], float) and math.isnan(want[key]):
                            self.assertTrue(math.isnan(g[key]))
                        else:
                            self.assertEqual(bits(g[key]), bits(want[key]), (op, dt, g, want))
        # empties first, between and last, around data crossing chunks
        x = np.arange(200000, dtype=np.int32)
        offs = [0, 0, 0, 70000, 70000, 140000, 200000, 200000, 200000]
        err, res = self.seg_reduce(c, "sum", "i32", offs, x.tobytes())
        self.assertIsNone(err)
        got = [g["value"] for g in decode("sum", "i32", res["values"], len(offs) - 1)]
        want = [int(x[offs[i]:offs[i + 1]].sum(dtype=np.int64)) for i in range(len(offs) - 1)]
        self.assertEqual(got, want)

    def test_one_segment_spanning_every_chunk_and_a_million_rows(self):
        c = self.client()
        x = np.random.default_rng(5).standard_normal(300000).astype(np.float64)
        err, res = self.seg_reduce(c, "sum", "f64", [0, len(x)], x.tobytes())
        self.assertIsNone(err)
        self.assertEqual(bits(decode("sum", "f64", res["values"], 1)[0]["value"]),
                         bits(math.fsum(x.tolist())))
        # a million rows of one to three elements
        rng = np.random.default_rng(9)
        lengths = rng.integers(0, 4, size=1000000)
        offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
        y = rng.integers(-1000, 1000, size=int(offs[-1])).astype(np.int32)
        err, res = c.call("reduce", [{"op": "max", "dtype": "i32", "offsets": offs.astype("<u8").tobytes(),
                                      "data": y.tobytes()}])
        self.assertIsNone(err)
        got = np.frombuffer(res["values"], dtype="<i8")
        want = np.full(len(lengths), np.iinfo(np.int32).min, dtype=np.int64)
        nz = lengths > 0
        want[nz] = np.maximum.reduceat(y, offs[:-1][nz].astype(np.int64))
        self.assertTrue(np.array_equal(got, want))

    def test_regions_at_odd_offsets(self):
        rng = random.Random(13)
        c = self.client()
        for dt in ("i32", "u64", "f32", "f64"):
            size = 4 if dt[1:] == "32" else 8
            lengths = random_lengths(rng, 25, self.CHUNK // size // 3)
            offs = to_offsets(lengths)
            x = sample(rng, dt, offs[-1])
            pad = 3 * size + 1
            region, m = c.map(pad + x.nbytes + 5, fill=b"\x7f" * pad + x.tobytes())
            for op in OPS:
                err, res = c.call("reduce", [{"op": op, "dtype": dt, "offsets": offsets_bin(offs),
                                              "region": region, "offset": pad, "count": len(x)}])
                self.assertIsNone(err, err)
                got = decode(op, dt, res["values"], len(lengths))
                self.check_against_singles(c, op, dt, x, offs, got)
                # the same request on the socket gives the same bytes
                err, res2 = self.seg_reduce(c, op, dt, offs, x.tobytes())
                self.assertEqual(res2["values"], res["values"])
            m.close()

    def assertError(self, reply, code, contains):
        err, res = reply
        self.assertIsNotNone(err, res)
        self.assertEqual(err["code"], code, err)
        self.assertIn(contains, err["message"])

    def test_bad_offsets(self):
        c = self.client()
        x = np.arange(10, dtype=np.int32).tobytes()
        red = lambda **p: c.call("reduce", [p])  # noqa: E731
        ob = offsets_bin
        self.assertError(red(op="sum", dtype="i32", offsets=ob([0, 5, 4, 10]), data=x),
                         "invalid_params", "must not decrease")
        self.assertError(red(op="sum", dtype="i32", offsets=ob([1, 10]), data=x),
                         "invalid_params", "must start at 0")
        self.assertError(red(op="sum", dtype="i32", offsets=ob([0, 11]), data=x),
                         "invalid_params", "ends at 11, not at the 10 elements")
        self.assertError(red(op="sum", dtype="i32", offsets=ob([0, 9]), data=x),
                         "invalid_params", "ends at 9")
        self.assertError(red(op="sum", dtype="i32", offsets=ob([0, 10])[:12], data=x),
                         "invalid_params", "8 bytes for each")
        self.assertError(red(op="sum", dtype="i32", offsets=ob([0]), data=x),
                         "invalid_params", "k >= 1 segments")
        self.assertError(red(op="sum", dtype="i32", offsets=[0, 10], data=x),
                         "invalid_params", "must be a bin")
        self.assertError(red(op="sum", dtype="i32", data=x, offsets=ob([0, 10])),
                         "invalid_params", "'offsets' must come before 'data'")
        self.assertError(red(op="sum", offsets=ob([0, 10]), data=x, dtype="i32"),
                         "invalid_params", "'op' and 'dtype' must come before 'data'")
        self.assertError(red(op="moments", dtype="i32", offsets=ob([0, 10]), data=x, ddof=1),
                         "invalid_params", "'ddof' must come before 'data'")
        self.assertError(red(op="moments", dtype="i32", ddof=10, offsets=ob([0, 10]), data=x),
                         "invalid_params", "'ddof' is 10, not less than the 10 elements")
        self.assertError(red(op="sum", dtype="f32", partial=True, offsets=ob([0, 10]), data=x),
                         "invalid_params", "'partial' is not available with 'offsets'")
        region, m = c.map(4096)
        self.assertError(red(op="sum", dtype="i32", offsets=ob([0, 3]), region=region, count=4),
                         "invalid_params", "ends at 3, not at the 4 elements")
        m.close()
        # too many segments: refused as its header is read, the bin skipped
        n = (1 << 21) + 1
        self.assertError(red(op="sum", dtype="i32", offsets=bytes(8 * (n + 1)), data=b""),
                         "too_large", "over the limit of 2097152")
        _, info = c.call("info")
        self.assertEqual(info["limits"]["max_segments"], 1 << 21)
        # the connection goes on
        err, res = self.seg_reduce(c, "sum", "i32", [0, 4, 10], x)
        self.assertIsNone(err)
        self.assertEqual([g["value"] for g in decode("sum", "i32", res["values"], 2)], [6, 39])


class SegmentsSplitAcrossWorkers(Segments):
    """The same on 4 MiB chunks and four workers: each chunk's job is cut
    into parts that workers reduce apart and then merge."""

    CHUNK = 4 << 20
    DAEMON_ARGS = ("--chunk-bytes", "4M", "--staging-bytes", "32M", "--threads", "4")


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
def device_jobs(c):
    """Jobs the daemon's first GPU has run."""
    return [x for x in c.call("info")[1]["devices"] if x["kind"] == "cuda"][0]["jobs"]


def isumsq_records(x, offs):
    """sumsq of integer segments as a GPU gives them: each element's square
    in double (rounded, as the CPU does), summed exactly and rounded once
    (math.fsum), as packed float64 records."""
    sq = [float(v) * float(v) for v in x.tolist()]
    return struct.pack("<%dd" % (len(offs) - 1),
                       *[math.fsum(sq[a:b]) for a, b in zip(offs, offs[1:])])


class DeviceMemory(CupyDeviceCase):
    """Segments of every op, argmin, argmax and moments of GPU memory
    (segments of every op in one segmented launch on the GPU, moments up to
    a bound on the segments; argmin, argmax and moments on the GPU's
    kernels; segments at odd offsets, and moments of more segments, copied
    to the host chunk by chunk and reduced on the CPU route): the same
    bytes as the same elements sent over the socket (integer sumsq: the
    exact sum of the rounded squares), across many chunks and at odd
    offsets; the region and the device stay in service."""

    # small chunks: a request of a few hundred thousand elements is many
    # chunks, each copied on its own
    DAEMON_ARGS = ("--chunk-bytes", "256K", "--threads", "4")

    def both(self, params, region, offset, count, data):
        """The reply for the region and for data over the socket."""
        dev = self.c.call("reduce", [dict(params, region=region, offset=offset, count=count)])
        host = self.c.call("reduce", [dict(params, data=data)])
        return dev, host

    def test_segments_of_every_op_and_dtype(self):
        rng = random.Random(11)
        for dt in DTYPES:
            size = np.dtype(NP[dt]).itemsize
            x = sample(rng, dt, 300003)
            gx = self.cp.asarray(x)
            region = self.map(gx)
            for skip in (0, 3):
                n = len(x) - skip
                offs = to_offsets(random_lengths(rng, 200, 3000))
                offs[-1] = n  # the last segment takes the rest
                offs = [min(o, n) for o in offs]
                for op in OPS:
                    params = {"op": op, "dtype": dt, "offsets": offsets_bin(offs)}
                    dev, host = self.both(params, region, skip * size, n, x[skip:].tobytes())
                    self.assertIsNone(dev[0], (op, dt, dev[0]))
                    if op == "sumsq" and dt[0] != "f":
                        host[1]["values"] = isumsq_records(x[skip:], offs)
                    self.assertEqual(dev, host, (op, dt, skip))
            self.assertEqual(self.c.call("unmap", [{"region": region}]), (None, True))
        self.healthy()

    def test_many_segments_take_several_launches(self):
        """f64 sumsq of 150,000 segments: more than one launch's scratch of
        exact digits holds (some 62,000), so the job takes three launches
        in a row; every record is still the socket's."""
        rng = random.Random(14)
        x = sample(rng, "f64", 600001)
        region = self.map(self.cp.asarray(x))
        offs = to_offsets(random_lengths(rng, 150000, 7, zeros=0.05))
        offs = [min(o, len(x)) for o in offs]
        offs[-1] = len(x)
        for op in ("sumsq", "sum"):
            params = {"op": op, "dtype": "f64", "offsets": offsets_bin(offs)}
            before = device_jobs(self.c)
            dev, host = self.both(params, region, 0, len(x), x.tobytes())
            self.assertIsNone(dev[0], dev[0])
            self.assertEqual(dev, host, op)
            self.assertEqual(device_jobs(self.c) - before, 1)
        self.c.call("unmap", [{"region": region}])
        self.healthy()

    def test_segments_on_the_gpu(self):
        """Segments of every op (moments with ddof 0 and 3) are one job on
        the GPU, of short segments (one lane each, some no longer than
        ddof), long ones over many tiles, and floats with -0, infinities
        and NaNs in some."""
        rng = random.Random(13)
        for dt in DTYPES:
            x = sample(rng, dt, 1 << 20)
            if dt[0] == "f":
                x[5:9] = -0.0
                x[100] = np.inf
                x[200] = -np.inf
                x[201] = np.inf
                x[300] = np.nan
            region = self.map(self.cp.asarray(x))
            lengths = random_lengths(rng, 20000, 20) + [0, 0] + random_lengths(rng, 30, 20000)
            offs = [o for o in to_offsets(lengths) if o < len(x)] + [len(x)]
            for op, extra in [(op, {}) for op in OPS] + [("moments", {"ddof": 3})]:
                params = dict({"op": op, "dtype": dt, "offsets": offsets_bin(offs)}, **extra)
                before = device_jobs(self.c)
                dev, host = self.both(params, region, 0, len(x), x.tobytes())
                jobs = device_jobs(self.c) - before
                self.assertIsNone(dev[0], (op, dt, dev[0]))
                if op == "sumsq" and dt[0] != "f":
                    host[1]["values"] = isumsq_records(x, offs)
                self.assertEqual(dev, host, (op, dt, extra))
                self.assertEqual(jobs, 1, (op, dt))
            self.c.call("unmap", [{"region": region}])
        self.healthy()

    def test_moments_of_many_segments(self):
        """moments of more segments than the GPU's bound for the dtype
        (32,768 for f64) go by way of the host, up to it on the GPU: the
        same records either way, and mean and var the exact values rounded
        once (Fractions)."""
        rng = random.Random(15)
        x = sample(rng, "f64", 400001)
        region = self.map(self.cp.asarray(x))
        for k, gpu_jobs in ((32768, 1), (32769, 0)):
            offs = to_offsets(random_lengths(rng, k, 12, zeros=0.05))
            offs = [min(o, len(x)) for o in offs]
            offs[-1] = len(x)
            params = {"op": "moments", "dtype": "f64", "offsets": offsets_bin(offs)}
            before = device_jobs(self.c)
            dev, host = self.both(params, region, 0, len(x), x.tobytes())
            self.assertIsNone(dev[0], dev[0])
            self.assertEqual(dev, host, k)
            self.assertEqual(device_jobs(self.c) - before, gpu_jobs, k)
            # mean and var against exact references, rounded once
            got = decode("moments", "f64", dev[1]["values"], k)
            for i in rng.sample(range(k), 200):
                seg = [Fraction(float(v)) for v in x[offs[i]:offs[i + 1]]]
                if not seg:
                    continue
                n = len(seg)
                s1, s2 = sum(seg), sum(v * v for v in seg)
                self.assertEqual(got[i]["mean"], float(s1 / n), (k, i))
                self.assertEqual(got[i]["var"], float((s2 - s1 * s1 / n) / n), (k, i))
        self.c.call("unmap", [{"region": region}])
        self.healthy()

    def test_argmin_argmax_moments(self):
        rng = random.Random(12)
        for dt in DTYPES:
            size = np.dtype(NP[dt]).itemsize
            for n in (1, 4097, 300001):
                x = sample(rng, dt, n + 1)
                gx = self.cp.asarray(x)
                region = self.map(gx)
                for op, extra in (("argmin", {}), ("argmax", {}), ("moments", {}),
                                  ("moments", {"ddof": 1})):
                    if op == "moments" and extra and n == 1:
                        continue
                    params = dict({"op": op, "dtype": dt}, **extra)
                    dev, host = self.both(params, region, size, n, x[1:].tobytes())
                    self.assertIsNone(dev[0], (op, dt, dev[0]))
                    self.assertEqual(dev, host, (op, dt, n))
                self.c.call("unmap", [{"region": region}])
        # and against NumPy, once
        x = np.array([3.0, -1.0, 7.0, -1.0, np.nan], dtype=np.float32)
        region = self.map(self.cp.asarray(x))
        err, res = self.c.call("reduce", [{"op": "argmin", "dtype": "f32", "region": region,
                                          "offset": 0, "count": 4}])
        self.assertEqual((res["value"], res["index"]), (-1.0, 1))
        err, res = self.c.call("reduce", [{"op": "argmax", "dtype": "f32", "region": region,
                                          "offset": 0, "count": 5}])
        self.assertTrue(math.isnan(res["value"]))
        self.assertEqual(res["index"], 4)
        self.c.call("unmap", [{"region": region}])

    def test_empty_and_odd_offsets(self):
        x = np.arange(1000, dtype=np.int32)
        region = self.map(self.cp.asarray(x))
        # no elements: segments give identities, argmin is empty
        err, res = self.c.call("reduce", [{"op": "sum", "dtype": "i32", "region": region,
                                          "offset": 0, "count": 0,
                                          "offsets": offsets_bin([0, 0, 0])}])
        self.assertIsNone(err, err)
        self.assertEqual(res["segments"], 2)
        err, _ = self.c.call("reduce", [{"op": "argmin", "dtype": "i32", "region": region,
                                        "offset": 0, "count": 0}])
        self.assertEqual(err["code"], "empty")
        # an offset inside an element: read as the bytes lie, as on the host
        dev, host = self.both({"op": "max", "dtype": "i32", "offsets": offsets_bin([0, 7, 999])},
                              region, 2, 999, x.tobytes()[2:2 + 4 * 999])
        self.assertEqual(dev, host)
        # argmin and argmax there: by way of the host (the GPU's kernel
        # reads whole elements); on an element's boundary: on the GPU
        for off in (2, 4):
            for op in ("argmin", "argmax"):
                dev, host = self.both({"op": op, "dtype": "i32"}, region, off, 999,
                                      x.tobytes()[off:off + 4 * 999])
                self.assertIsNone(dev[0], dev)
                self.assertEqual(dev, host, (op, off))
        self.c.call("unmap", [{"region": region}])


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
class DeviceMemoryFault(unittest.TestCase):
    """A device fault before segments of GPU memory are copied fails them
    with internal, naming the device; host data is still served."""

    def test_fault(self):
        cp = cupy_or_skip()
        cp.cuda.set_allocator(None)
        d = Daemon("--allow-cuda-ipc", "yes", "--fault", "launch:after=1")
        try:
            c = ShmClient(d.path, timeout=30)
            n = 1 << 20
            region, x = map_cupy_ones(c, n)
            # the second launch fails and takes the device out of service
            for _ in range(2):
                c.reduce_region("sum", "i32", region, 0, n)
            err, _ = c.call("reduce", [{"op": "sum", "dtype": "i32", "region": region,
                                        "offset": 0, "count": n,
                                        "offsets": offsets_bin([0, 5, n])}])
            self.assertEqual(err["code"], "internal", err)
            self.assertIn("out of service", err["message"])
            err, res = c.call("reduce", [{"op": "sum", "dtype": "i32",
                                          "offsets": offsets_bin([0, 1, 2]),
                                          "data": b"\1\0\0\0\2\0\0\0"}])
            self.assertIsNone(err, err)
            self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
class DeviceSegmentsFault(unittest.TestCase):
    """A fault in the segmented launch (of a sum, of moments) fails that
    request with internal, naming the call and the device; host data is
    still served, and the region is still released."""

    def test_fault(self):
        for op in ("sum", "moments"):
            with self.subTest(op=op):
                self.fault(op)

    def fault(self, op):
        cp = cupy_or_skip()
        cp.cuda.set_allocator(None)
        d = Daemon("--allow-cuda-ipc", "yes", "--fault", "launch:after=0")
        try:
            c = ShmClient(d.path, timeout=30)
            n = 1 << 20
            region, x = map_cupy_ones(c, n)
            err, _ = c.call("reduce", [{"op": op, "dtype": "i32", "region": region,
                                        "offset": 0, "count": n,
                                        "offsets": offsets_bin([0, 5, n])}])
            self.assertEqual(err["code"], "internal", err)
            self.assertIn("segmented reduce", err["message"])
            self.assertIn("device 0", err["message"])
            err, res = c.call("reduce", [{"op": "sum", "dtype": "i32",
                                          "offsets": offsets_bin([0, 1, 2]),
                                          "data": b"\1\0\0\0\2\0\0\0"}])
            self.assertIsNone(err, err)
            self.assertEqual(res["values"], struct.pack("<2q", 1, 2))
            self.assertEqual(c.call("unmap", [{"region": region}]), (None, True))
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    print("backend:", BACKEND)
    unittest.main()
