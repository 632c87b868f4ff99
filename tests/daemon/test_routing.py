"""A CUDA daemon's CPU route (GPU host): requests up to
--route-cpu-max-bytes are reduced on the CPU, larger ones on the GPU; the
route depends on the request alone, so a request's bits are the same sent
alone or among others, over the socket or from a region. Exits 77 (skip)
on the CPU backend, which has no route."""

import array
import os
import random
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Daemon  # noqa: E402
from test_shm import ShmClient  # noqa: E402

KiB = 1 << 10


def bits(x):
    return struct.pack("<d", x) if isinstance(x, float) else x


def gpu_jobs(c):
    return sum(d["jobs"] for d in c.call("info")[1]["devices"] if d["kind"] == "cuda")


class Routing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--route-cpu-max-bytes", "64K")

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_the_route_by_size(self):
        c = ShmClient(self.d.path)
        self.assertEqual(c.call("info")[1]["routing"], {"cpu_max_bytes": 64 * KiB})
        for nbytes, on_cpu in ((4, True), (64 * KiB, True), (64 * KiB + 4, False), (1 << 20, False)):
            routed0, gpu0 = c.call("stats")[1]["routed_cpu"], gpu_jobs(c)
            data = array.array("f", [1.0] * (nbytes // 4)).tobytes()
            self.assertEqual(c.reduce("sum", "f32", data)[1]["value"], nbytes // 4)
            routed1, gpu1 = c.call("stats")[1]["routed_cpu"], gpu_jobs(c)
            self.assertEqual((routed1 - routed0, gpu1 > gpu0), (1, False) if on_cpu else (0, True),
                             nbytes)
        c.close()

    def test_same_bits_alone_and_in_company(self):
        """f32 sums across the boundary, each alone, then all pipelined in
        bursts (batched with one another), then from a region."""
        rng = random.Random(5)
        c = ShmClient(self.d.path)
        arrays = []
        for nbytes in (1020, 65532, 65536, 65540, 131072, 262148):
            vals = [rng.uniform(-1, 1) * 10 ** rng.randint(-5, 5) for _ in range(nbytes // 4)]
            arrays.append(array.array("f", vals).tobytes())
        alone = [bits(c.reduce(op, "f32", a)[1]["value"]) for a in arrays for op in ("sum", "sumsq")]
        for _ in range(3):
            ids = [c.request("reduce", [{"op": op, "dtype": "f32", "data": a}])
                   for a in arrays for op in ("sum", "sumsq")]
            got = {}
            for _ in ids:
                resp = c.recv()
                got[resp[1]] = bits(resp[3]["value"])
            self.assertEqual([got[i] for i in ids], alone)
        for k, a in enumerate(arrays):
            region, m = c.map(len(a), a)
            for j, op in enumerate(("sum", "sumsq")):
                self.assertEqual(bits(c.reduce_region(op, "f32", region, 0, len(a) // 4)[1]["value"]),
                                 alone[2 * k + j])
            m.close()
        c.close()

    def test_route_off(self):
        d = Daemon("--route-cpu-max-bytes", "0")
        try:
            c = ShmClient(d.path)
            self.assertEqual(c.call("info")[1]["routing"], {"cpu_max_bytes": 0})
            c.reduce("sum", "i32", b"\1\0\0\0")
            self.assertEqual(c.call("stats")[1]["routed_cpu"], 0)
            self.assertGreater(gpu_jobs(c), 0)
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_exact_floats_whatever_the_route(self):
        """Float sums and sumsq on the GPUs give the CPU route's bits (both
        exact); float sums of a region at an offset that is not a multiple
        of the element's size take the CPU route whatever their size: the
        GPUs' exact kernel reads whole elements."""
        gpu = Daemon("--route-cpu-max-bytes", "0")
        cpu = Daemon("--route-cpu-max-bytes", "1G")
        try:
            cg, cc = ShmClient(gpu.path), ShmClient(cpu.path)
            rng = random.Random(11)
            vals = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(300001)]
            vals += [-v for v in vals[:1000]]
            rng.shuffle(vals)
            for typ, dt in (("f", "f32"), ("d", "f64")):
                data = array.array(typ, vals).tobytes()
                for op, routed in (("sum", 0), ("sumsq", 0)):
                    r0, g0 = cg.call("stats")[1]["routed_cpu"], gpu_jobs(cg)
                    got = cg.reduce(op, dt, data)[1]["value"]
                    r1, g1 = cg.call("stats")[1]["routed_cpu"], gpu_jobs(cg)
                    self.assertEqual((r1 - r0, g1 > g0), (routed, not routed), (op, dt))
                    self.assertEqual(bits(got), bits(cc.reduce(op, dt, data)[1]["value"]),
                                     (op, dt))
                # a region, aligned and not
                size = len(data) // len(vals)
                region, m = cg.map(len(data) + 8, b"\0\0" + data + b"\0" * 6)
                r0 = cg.call("stats")[1]["routed_cpu"]
                got = cg.reduce_region("sum", dt, region, 2, len(vals))[1]["value"]
                self.assertEqual(cg.call("stats")[1]["routed_cpu"] - r0, 1, dt)
                self.assertEqual(bits(got), bits(cc.reduce("sum", dt, data)[1]["value"]), dt)
                part = data[size:]
                got = cg.reduce_region("sum", dt, region, 2 + size, len(vals) - 1)[1]["value"]
                self.assertEqual(bits(got), bits(cc.reduce("sum", dt, part)[1]["value"]), dt)
                m.close()
            cg.close()
            cc.close()
        finally:
            self.assertEqual(gpu.stop(), 0)
            self.assertEqual(cpu.stop(), 0)

    def test_index_and_moments_whatever_the_route(self):
        """argmin, argmax and moments of host data run on the GPUs' own
        kernels (socket data and regions on the element's boundary) with
        the CPU route's answers, ties and signed zeros included; a region
        off the boundary takes the CPU route whatever its size."""
        gpu = Daemon("--route-cpu-max-bytes", "0", "--host-data", "gpu")
        cpu = Daemon("--route-cpu-max-bytes", "1G")
        try:
            cg, cc = ShmClient(gpu.path), ShmClient(cpu.path)
            rng = random.Random(12)
            vals = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(200003)]
            for i in rng.sample(range(len(vals)), 40):
                vals[i] = rng.choice([0.0, -0.0])
            lo, hi = min(vals), max(vals)
            vals[777], vals[150000] = lo, hi     # ties: the first index wins
            ints = [rng.randint(-2**31, 2**31 - 1) for _ in range(100001)]
            cases = [(array.array("f", vals).tobytes(), "f32"),
                     (array.array("d", vals).tobytes(), "f64"),
                     (array.array("i", ints).tobytes(), "i32"),
                     (array.array("q", ints).tobytes(), "i64")]
            for data, dt in cases:
                size = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}[dt]
                n = len(data) // size
                region, m = cg.map(len(data) + 8, b"\0\0" + data + b"\0" * 6)
                aligned, am = cg.map(len(data), data)
                for op in ("argmin", "argmax", "moments"):
                    want = cc.reduce(op, dt, data)[1]
                    r0, g0 = cg.call("stats")[1]["routed_cpu"], gpu_jobs(cg)
                    got = cg.reduce(op, dt, data)[1]
                    r1, g1 = cg.call("stats")[1]["routed_cpu"], gpu_jobs(cg)
                    self.assertEqual((r1 - r0, g1 > g0), (0, True), (op, dt))
                    self.assertEqual(repr(got), repr(want), (op, dt))
                    got = cg.reduce_region(op, dt, aligned, 0, n)[1]
                    r2, g2 = cg.call("stats")[1]["routed_cpu"], gpu_jobs(cg)
                    self.assertEqual((r2 - r1, g2 > g1), (0, True), (op, dt))
                    self.assertEqual(repr(got), repr(want), (op, dt))
                    got = cg.reduce_region(op, dt, region, 2, n)[1]
                    r3, g3 = cg.call("stats")[1]["routed_cpu"], gpu_jobs(cg)
                    self.assertEqual((r3 > r2, g3), (True, g2), (op, dt))
                    self.assertEqual(repr(got), repr(want), (op, dt))
                m.close()
                am.close()
            cg.close()
            cc.close()
        finally:
            self.assertEqual(gpu.stop(), 0)
            self.assertEqual(cpu.stop(), 0)

    def test_cumsum_on_the_route(self):
        """cumsum of host data over the socket takes the CPU route (every
        phase of every chunk), whatever its size; a host region's goes to
        the GPU whole, read and written in place: the same bits."""
        from test_cumsum import call, map_writable, model, same, values  # noqa: E402
        import numpy as np
        gpu = Daemon("--route-cpu-max-bytes", "0")
        try:
            c = ShmClient(gpu.path)
            rng = np.random.default_rng(12)
            for dt, t in (("f32", np.float32), ("f64", np.float64), ("i64", np.int64)):
                x = (rng.standard_normal(1 << 20) * 1e3).astype(t)
                r0, g0 = c.call("stats")[1]["routed_cpu"], gpu_jobs(c)
                err, res = call(c, {"op": "cumsum", "dtype": dt, "data": x.tobytes()})
                self.assertIsNone(err, err)
                self.assertTrue(same(values(res, dt), model(dt, x)), dt)
                r1, g1 = c.call("stats")[1]["routed_cpu"], gpu_jobs(c)
                self.assertGreater(r1, r0)
                self.assertEqual(g1, g0)
                rin, _ = c.map(len(x.tobytes()), x.tobytes())
                rout, mout = map_writable(c, 8 * len(x))
                g1 = gpu_jobs(c)
                self.assertEqual(call(c, {"op": "cumsum", "dtype": dt, "region": rin,
                                          "count": len(x), "out_region": rout}),
                                 (None, {"count": len(x)}))
                self.assertEqual(bytes(mout), res["values"])
                self.assertEqual(gpu_jobs(c), g1 + 1, dt)
            c.close()
        finally:
            self.assertEqual(gpu.stop(), 0)

    def test_region_cumsum_on_the_gpu(self):
        """A host region's prefix sums on the GPU (one launch, the regions
        read and written where they lie): a CPU daemon's bits for every
        dtype, at odd sizes, into another region at an offset, in place
        for 8-byte elements, with nothing written outside the values.
        Elements off their size's boundary, requests the CPU route takes
        and --host-data cpu stay on the CPU, with the
        same bits. A launch that fails fails the request, and the daemon
        carries on; once no GPU is left, with the CPU taking over, the
        next ones run on the CPU."""
        from test_cumsum import DTYPES, call, cumsum, map_writable, sample  # noqa: E402
        gpu = Daemon("--route-cpu-max-bytes", "64K")
        pinned = Daemon("--host-data", "cpu")
        cpu = Daemon("--route-cpu-max-bytes", "1G")
        rng = random.Random(21)
        try:
            cg, cp, cc = ShmClient(gpu.path), ShmClient(pinned.path), ShmClient(cpu.path)

            def cumsum_in(cl, dt, raw, off, outoff, n, in_place=False):
                if in_place:
                    rin, min_ = map_writable(cl, off + len(raw), b"\xee" * off + raw)
                    rout, mout = rin, min_
                else:
                    rin, min_ = cl.map(off + len(raw), b"\xee" * off + raw)
                    rout, mout = map_writable(cl, outoff + 8 * n + 8, b"\xdd" * (outoff + 8 * n + 8))
                g0 = gpu_jobs(cl)
                reply = call(cl, {"op": "cumsum", "dtype": dt, "region": rin, "offset": off,
                                  "count": n, "out_region": rout, "out_offset": outoff})
                self.assertEqual(reply, (None, {"count": n}), (dt, n, off, outoff))
                vals = bytes(mout[outoff:outoff + 8 * n])
                if not in_place:
                    self.assertEqual(bytes(mout[:outoff]), b"\xdd" * outoff)
                    self.assertEqual(bytes(mout[outoff + 8 * n:]), b"\xdd" * 8)
                for r in {rin, rout}:
                    self.assertEqual(cl.call("unmap", [{"region": r}]), (None, True))
                return vals, gpu_jobs(cl) - g0

            for dt in DTYPES:
                for n in (16385, 300007):
                    x = sample(rng, dt, n)
                    raw = x.tobytes()
                    size = x.itemsize
                    want, _ = cumsum_in(cc, dt, raw, 0, 0, n)
                    for off, outoff, on_gpu in ((0, 0, True), (size * 3, 8 * 5, True),
                                                (1, 8, False)):
                        got, jobs = cumsum_in(cg, dt, raw, off, outoff, n)
                        self.assertEqual(got, want, (dt, n, off, outoff))
                        self.assertEqual(jobs, 1 if on_gpu else 0, (dt, n, off, outoff))
                        got, jobs = cumsum_in(cp, dt, raw, off, outoff, n)
                        self.assertEqual((got, jobs), (want, 0), (dt, n, off, outoff))
                    if size == 8:
                        got, jobs = cumsum_in(cg, dt, raw, 0, 0, n, in_place=True)
                        self.assertEqual((got, jobs), (want, 1), dt)
            # the CPU route's requests (64 KiB and less) stay there
            x = sample(rng, "f32", 1000)
            want, _ = cumsum_in(cc, "f32", x.tobytes(), 0, 0, 1000)
            self.assertEqual(cumsum_in(cg, "f32", x.tobytes(), 0, 0, 1000), (want, 0))
            for cl in (cg, cp, cc):
                cl.close()
        finally:
            for d in (gpu, pinned, cpu):
                self.assertEqual(d.stop(), 0)
        bad = Daemon("--route-cpu-max-bytes", "64K", "--fault", "launch:after=0",
                     "--cpu-fallback", "no")
        try:
            c = ShmClient(bad.path)
            x = sample(rng, "f32", 1 << 20)
            rin, _ = c.map(len(x.tobytes()), x.tobytes())
            rout, _ = map_writable(c, 8 << 20)
            err, _ = call(c, {"op": "cumsum", "dtype": "f32", "region": rin, "count": 1 << 20,
                              "out_region": rout})
            self.assertEqual(err["code"], "internal", err)
            self.assertEqual(c.reduce("sum", "i64", struct.pack("<3q", 1, 2, 3)),
                             (None, {"value": 6, "count": 3}))
            c.close()
        finally:
            self.assertEqual(bad.stop(), 0)
        # with the CPU taking over once no GPU is left, the next ones run
        # there, in chunks, with the socket's bits
        fb = Daemon("--route-cpu-max-bytes", "64K", "--fault", "launch:after=0")
        try:
            c = ShmClient(fb.path)
            want = cumsum(c, "f32", x.tobytes())[1]["values"]
            for k in range(3):
                rin, _ = c.map(len(x.tobytes()), x.tobytes())
                rout, mout = map_writable(c, 8 << 20)
                err, res = call(c, {"op": "cumsum", "dtype": "f32", "region": rin,
                                    "count": 1 << 20, "out_region": rout})
                if k == 0 and err is not None:
                    self.assertEqual(err["code"], "internal", err)
                else:
                    self.assertEqual((err, res), (None, {"count": 1 << 20}), k)
                    self.assertEqual(bytes(mout), want, k)
                for r in (rin, rout):
                    self.assertEqual(c.call("unmap", [{"region": r}]), (None, True))
            c.close()
        finally:
            self.assertEqual(fb.stop(), 0)

    def test_route_serves_while_every_launch_fails(self):
        d = Daemon("--route-cpu-max-bytes", "64K", "--fault", "launch:after=0", "--cpu-fallback", "no")
        try:
            c = ShmClient(d.path)
            for _ in range(5):
                self.assertEqual(c.reduce("sum", "i64", struct.pack("<3q", 1, 2, 3)), (None, {"value": 6, "count": 3}))
            err, _ = c.reduce("sum", "i64", b"\0" * (1 << 20))
            self.assertEqual(err["code"], "internal")
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    if BACKEND != "cuda":
        print("the CPU route is a CUDA daemon's: skipped on the", BACKEND, "backend")
        sys.exit(77)
    unittest.main(verbosity=2)
