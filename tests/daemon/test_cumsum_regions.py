"""Prefix sums ("op": "cumsum") of regions, into writable out regions,
answered by backend threads, of bad input and of device memory: the
socket-level cases are test_cumsum.py's, whose model and helpers these
use."""

import os
import random
import socket
import struct
import sys
import threading
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpured_harness import BACKEND, Daemon  # noqa: E402
from test_shm import CupyDeviceCase, ShmClient, cupy_or_skip, memfd  # noqa: E402
from test_cumsum import (  # noqa: E402
    B,
    DTYPES,
    NP,
    WIDE,
    pack,
    model,
    same,
    sample,
    values,
    map_writable,
    call,
    cumsum,
    cumsum_region,
    CumsumCase)


class CumsumRegions(CumsumCase):
    DAEMON_ARGS = ("--max-regions", "8")

    def test_into_a_writable_region(self):
        """Every dtype, at odd input offsets, into another region and into
        the same one (apart, and in place for 8-byte elements): the values
        the socket gets, and nothing written outside the out range."""
        rng = random.Random(5)
        c = self.client()
        for dt in DTYPES:
            size = np.dtype(NP[dt]).itemsize
            for n in (1, B + 3, 200003):
                x = sample(rng, dt, n)
                raw = x.tobytes()
                sock = cumsum(c, dt, raw)[1]["values"]
                off = rng.randrange(0, 16)
                rin, min_ = c.map(off + len(raw), b"\xee" * off + raw)
                outoff = 8 * rng.randrange(0, 3)
                rout, mout = map_writable(c, outoff + 8 * n + 16, b"\xdd" * (outoff + 8 * n + 16))
                self.assertEqual(cumsum_region(c, dt, rin, off, n, rout, outoff),
                                 (None, {"count": n}))
                self.assertEqual(mout[outoff:outoff + 8 * n], sock)
                self.assertEqual(mout[:outoff], b"\xdd" * outoff)
                self.assertEqual(mout[outoff + 8 * n:], b"\xdd" * 16)
                # one writable region for both, apart
                inoff = 8 * n + 8
                r, m = map_writable(c, inoff + len(raw) + 3)
                m[inoff + 3:inoff + 3 + len(raw)] = raw
                self.assertEqual(cumsum_region(c, dt, r, inoff + 3, n, r), (None, {"count": n}))
                self.assertEqual(m[:8 * n], sock)
                self.assertEqual(m[inoff + 3:inoff + 3 + len(raw)], raw)
                if size == 8:
                    # in place
                    m[16:16 + len(raw)] = raw
                    self.assertEqual(cumsum_region(c, dt, r, 16, n, r, 16), (None, {"count": n}))
                    self.assertEqual(m[16:16 + 8 * n], sock)
                for reg in (rin, rout, r):
                    self.assertEqual(c.call("unmap", [{"region": reg}]), (None, True))
                for mm in (min_, mout, m):
                    mm.close()

    def test_region_of_none(self):
        c = self.client()
        r, m = map_writable(c, 64)
        self.assertEqual(cumsum_region(c, "f32", r, 64, 0, r, 64), (None, {"count": 0}))
        c.call("unmap", [{"region": r}])

    def test_pipelined_with_regions(self):
        """Region cumsums between streamed ones on one connection."""
        rng = random.Random(6)
        c = self.client()
        n = 100000
        x = sample(rng, "f64", n)
        rin, _ = c.map(len(x.tobytes()), x.tobytes())
        rout, mout = map_writable(c, 8 * n)
        msgs = []
        for i in range(4):
            msgs.append(pack([0, 10 + i, "reduce", [{"op": "cumsum", "dtype": "f64",
                                                     "data": x.tobytes()}]]))
            msgs.append(pack([0, 20 + i, "reduce", [{"op": "cumsum", "dtype": "f64",
                                                     "region": rin, "count": n,
                                                     "out_region": rout}]]))
        sender = threading.Thread(target=lambda: c.send(b"".join(msgs)))
        sender.start()
        got = {}
        while len(got) < 8:
            r = c.recv()
            self.assertIsNotNone(r)
            got[r[1]] = r
        sender.join()
        want = model("f64", x)
        for i in range(4):
            self.assertTrue(same(values(got[10 + i][3], "f64"), want))
            self.assertEqual(got[20 + i][2:], [None, {"count": n}])
        self.assertTrue(same(np.frombuffer(mout, dtype=np.float64), want))

    def test_bad_out_regions(self):
        c = self.client()
        n = 1000
        x = np.arange(n, dtype=np.int32)
        rin, _ = c.map(4 * n, x.tobytes())
        rout, _ = map_writable(c, 8 * n + 8)
        self.assertError(cumsum_region(c, "i32", rin, 0, n, rin), "invalid_params", "read-only")
        self.assertError(cumsum_region(c, "i32", rin, 0, n, rout, 16), "invalid_params",
                         "too small")
        self.assertError(cumsum_region(c, "i32", rin, 0, n + 1, rout, 0), "invalid_params",
                         "reach past the end")
        self.assertError(cumsum_region(c, "i32", rin, 0, n, 99), "invalid_params",
                         "unknown out_region 99")
        self.assertError(cumsum_region(c, "i32", rin, 0, n, rout, 4), "invalid_params",
                         "multiple of 8")
        self.assertError(cumsum_region(c, "i32", rin, 0, 2**62, rout, 0), "invalid_params")
        self.assertError(c.call("reduce", [{"op": "cumsum", "dtype": "i32", "region": rin,
                                            "count": n}]),
                         "invalid_params", "missing key 'out_region'")
        # overlapping: refused, unless the very same 8-byte elements
        self.assertError(cumsum_region(c, "i32", rout, 0, n, rout, 8), "invalid_params",
                         "overlap")
        self.assertError(cumsum_region(c, "i32", rout, 0, n, rout, 0), "invalid_params",
                         "overlap")
        self.assertError(cumsum_region(c, "f64", rout, 8, n, rout, 0), "invalid_params",
                         "overlap")
        self.assertEqual(cumsum_region(c, "f64", rout, 8, n, rout, 8), (None, {"count": n}))
        self.assertEqual(cumsum_region(c, "u32", rout, 4 * n, 8, rout, 0), (None, {"count": 8}))
        # another connection's region is unknown here
        c2 = self.client()
        self.assertError(cumsum_region(c2, "i32", c2.map(4 * n, x.tobytes())[0], 0, n, rout),
                         "invalid_params", "unknown out_region")
        self.assertAlive(c)

    def test_bad_writable_maps(self):
        c = self.client()
        # sealed against writing, now or from now on
        for seal in ("F_SEAL_WRITE", "F_SEAL_FUTURE_WRITE"):
            import fcntl
            fd = memfd(4096)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, getattr(fcntl, seal, {"F_SEAL_WRITE": 8,
                                                                      "F_SEAL_FUTURE_WRITE": 16}[seal]))
            self.assertError(c.map_fds(4096, [fd], writable=True), "invalid_params", seal)
            # read-only is fine
            err, res = c.map_fds(4096, [fd])
            self.assertIsNone(err, err)
            c.call("unmap", [{"region": res["region"]}])
            os.close(fd)
        # a descriptor open for reading only
        fd = memfd(4096)
        ro = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY)
        self.assertError(c.map_fds(4096, [ro], writable=True), "invalid_params",
                         "open for reading only")
        os.close(ro)
        os.close(fd)
        if BACKEND != "cuda":
            # GPU memory may be writable, but not on a daemon without GPUs
            fd = memfd(4096)
            self.assertError(c.map_fds(64, [fd], writable=True, kind="cuda", device="GPU-0"),
                             "invalid_params", "cannot map device memory")
            os.close(fd)
        self.assertAlive(c)


class CumsumDirect(CumsumCase):
    """Every job on a worker thread, so that small requests are answered
    by the workers themselves (engine/direct.h): their replies must wait
    for a streamed one to end, never land inside it."""
    DAEMON_ARGS = ("--inline-max-bytes", "0")

    def test_pipelined_with_direct_replies(self):
        rng = random.Random(7)
        c = self.client()
        self.pipeline(c, rng, rounds=4)


class BadCumsum(CumsumCase):
    def test_bad_params(self):
        c = self.client()
        x = np.arange(10, dtype=np.float32).tobytes()
        for p, contains in (
                ({"partial": True}, "'partial' is not available with op cumsum"),
                ({"ddof": 0}, "'ddof' is only for op moments, not cumsum"),
                ({"offsets": struct.pack("<2Q", 0, 10)}, "'offsets' is not available"),
                ({"out_region": 1}, "the cumsum of 'data' answers 'values'"),
                ({"out_offset": 8}, "the cumsum of 'data' answers 'values'")):
            self.assertError(cumsum(c, "f32", x, **p), "invalid_params", contains)
        self.assertError(c.call("reduce", [{"op": "sum", "dtype": "f32", "data": x,
                                            "out_region": 1}]),
                         "invalid_params", "'out_region' is only for op cumsum")
        self.assertError(c.call("reduce", [{"op": "cumsum", "dtype": "f12", "data": x}]),
                         "invalid_params", "unknown dtype")
        self.assertAlive(c)


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
class DeviceMemory(CupyDeviceCase):
    """The prefix sums of GPU memory, computed on its GPU into GPU memory
    of the same device: every dtype, odd sizes and offsets, in place for
    8-byte dtypes, bit for bit what the order gives (model, which the
    tests above hold the CPU to); and every bad out region, the device
    staying in service."""

    def test_every_dtype_against_the_order(self):
        cp = self.cp
        rng = random.Random(7)
        for dt in DTYPES:
            size = np.dtype(NP[dt]).itemsize
            for n in (1, 17, 4095, 4097, 100003, (1 << 20) + 5):
                x = sample(rng, dt, n + 3)
                gx = cp.asarray(x)
                out = cp.full(n + 2, 7, dtype=cp.uint64)
                rin, rout = self.map(gx), self.map(out, writable=True)
                err, res = cumsum_region(self.c, dt, rin, 3 * size, n, rout, 8)
                self.assertIsNone(err, err)
                self.assertEqual(res, {"count": n})
                got = cp.asnumpy(out).view(WIDE[dt])
                self.assertTrue(same(got[1:n + 1], model(dt, x[3:])), (dt, n))
                # nothing else of the out region written
                self.assertEqual(int(cp.asnumpy(out)[0]), 7)
                self.assertEqual(int(cp.asnumpy(out)[n + 1]), 7)
                for r in (rin, rout):
                    self.assertIsNone(self.c.call("unmap", [{"region": r}])[0])
        self.healthy()

    def test_specials_and_adversarial_bits(self):
        cp = self.cp
        x = np.ones(3 * B)
        x[5] = np.nan
        x[B + 7] = np.inf
        adv = np.ones(4 * B)
        adv[0::B] = 2.0 ** 53
        adv[B - 1::B] = -2.0 ** 53
        for data in (x, adv, np.full(B + 9, -0.0)):
            gx, out = cp.asarray(data), cp.empty(len(data), dtype=cp.float64)
            rin, rout = self.map(gx), self.map(out, writable=True)
            err, res = cumsum_region(self.c, "f64", rin, 0, len(data), rout)
            self.assertIsNone(err, err)
            self.assertTrue(same(cp.asnumpy(out), model("f64", data)))
            self.assertTrue(np.array_equal(np.signbit(cp.asnumpy(out)),
                                           np.signbit(model("f64", data))))
            for r in (rin, rout):
                self.c.call("unmap", [{"region": r}])

    def test_in_place(self):
        cp = self.cp
        rng = random.Random(8)
        for dt in ("f64", "i64", "u64"):
            x = sample(rng, dt, 300001)
            gx = cp.asarray(x)
            r = self.map(gx, writable=True)
            err, res = cumsum_region(self.c, dt, r, 8, len(x) - 1, r, 8)
            self.assertIsNone(err, err)
            got = cp.asnumpy(gx)  # 8-byte elements: their sums' own type
            self.assertTrue(same(got[1:], model(dt, x[1:])), dt)
            self.assertEqual(got[0], x[0])
            self.c.call("unmap", [{"region": r}])

    def test_bad_out_regions(self):
        cp = self.cp
        gx = cp.ones(1000, dtype=cp.float32)
        rin = self.map(gx)
        ro = self.map(cp.empty(1000, dtype=cp.float64))
        err, _ = cumsum_region(self.c, "f32", rin, 0, 1000, ro)
        self.assertEqual(err["code"], "invalid_params")
        self.assertIn("read-only", err["message"])
        # host memory out for GPU memory in, and the other way round
        fd = memfd(8192)
        err, res = self.c.map_fds(8192, [fd], writable=True)
        self.assertIsNone(err, err)
        host = res["region"]
        err, _ = cumsum_region(self.c, "f32", rin, 0, 1000, host)
        self.assertEqual(err["code"], "invalid_params")
        self.assertIn("go to GPU memory of the same device", err["message"])
        gout = self.map(cp.empty(1000, dtype=cp.float64), writable=True)
        err, _ = cumsum_region(self.c, "i32", host, 0, 1000, gout)
        self.assertEqual(err["code"], "invalid_params")
        self.assertIn("go to host memory", err["message"])
        # too small, and an element split by the offset
        err, _ = cumsum_region(self.c, "f32", rin, 0, 1000, gout, 8)
        self.assertIn("too small", err["message"])
        err, _ = cumsum_region(self.c, "f32", rin, 2, 999, gout)
        self.assertEqual(err["code"], "invalid_params")
        self.assertIn("boundary", err["message"])
        os.close(fd)
        for r in (rin, ro, host, gout):
            self.assertIsNone(self.c.call("unmap", [{"region": r}])[0])
        self.healthy()
        # and the daemon still answers
        err, res = cumsum(self.c, "i32", np.arange(5, dtype=np.int32).tobytes())
        self.assertEqual(values(res, "i32").tolist(), [0, 1, 3, 6, 10])


@unittest.skipUnless(BACKEND == "cuda", "maps GPU memory")
class DeviceFault(unittest.TestCase):
    """A device fault while prefix sums of GPU memory are in flight fails
    them with internal naming the call and the device; later ones on that
    device fail saying it is out of service; host data is still served,
    and the mappings are released."""

    def test_fault_with_cumsums_in_flight(self):
        cp = cupy_or_skip()
        cp.cuda.set_allocator(None)
        d = Daemon("--allow-cuda-ipc", "yes", "--allow-cuda-ipc-writable", "yes",
                   "--fault", "launch:after=3")
        try:
            c = ShmClient(d.path, timeout=30)
            uuid = [x for x in c.call("info")[1]["devices"] if x["kind"] == "cuda"][0]["uuid"]
            n = 1 << 22
            x, out = cp.ones(n, dtype=cp.int32), cp.zeros(n, dtype=cp.int64)
            cp.cuda.runtime.deviceSynchronize()
            regions = []
            for a, w in ((x, False), (out, True)):
                h = bytes(cp.cuda.runtime.ipcGetMemHandle(a.data.ptr))
                err, res = c.call("map", [{"bytes": a.nbytes, "kind": "cuda_ipc", "device": uuid,
                                           "handle": h, "writable": w}])
                self.assertIsNone(err, err)
                regions.append(res["region"])
            params = {"op": "cumsum", "dtype": "i32", "region": regions[0], "offset": 0,
                      "count": n, "out_region": regions[1]}
            ids = [c.request("reduce", [params]) for _ in range(8)]
            ok = failed = 0
            for _ in ids:
                resp = c.recv()
                if resp[2] is None:
                    self.assertEqual(resp[3], {"count": n})
                    ok += 1
                else:
                    self.assertEqual(resp[2]["code"], "internal", resp)
                    self.assertIn("device 0", resp[2]["message"])
                    failed += 1
            self.assertGreater(ok, 0)
            self.assertGreater(failed, 0)
            self.assertEqual(int(out[-1]), n)  # what the launches that ran wrote
            err, _ = c.call("reduce", [params])
            self.assertEqual(err["code"], "internal")
            self.assertIn("out of service", err["message"])
            # host data still answers (on the CPU now)
            err, res = cumsum(c, "i32", np.ones(5, dtype=np.int32).tobytes())
            self.assertEqual(values(res, "i32").tolist(), [1, 2, 3, 4, 5])
            for r in regions:
                self.assertEqual(c.call("unmap", [{"region": r}]), (None, True))
            self.assertEqual(c.call("stats")[1]["regions"], 0)
            c.close()
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
