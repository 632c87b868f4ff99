#!/usr/bin/env python3
"""Ping latency from one connection while another maps a large region
(a CUDA daemon page-locks it off its loop: daemon/region-pin.c): how long
the map took, the worst ping meanwhile, and how long the unmap took.

usage: GPURED=BUILDDIR/daemon/gpured [GPURED_TEST_BACKEND=cuda] \\
           bench/map-latency.py GIB [DAEMON-ARGS...]
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "daemon"))
from gpured_harness import Client, Daemon  # noqa: E402
from test_shm import ShmClient, memfd  # noqa: E402


def main():
    size = int(sys.argv[1]) << 30
    d = Daemon("--max-mapped-bytes", "64G", *sys.argv[2:])
    try:
        fd = memfd(size)
        c = ShmClient(d.path)
        p = Client(d.path)
        worst = [0.0]
        stop = threading.Event()

        def pinger():
            while not stop.is_set():
                t = time.monotonic()
                p.call("ping")
                worst[0] = max(worst[0], time.monotonic() - t)
                time.sleep(0.0005)

        th = threading.Thread(target=pinger)
        th.start()
        time.sleep(0.2)
        worst[0] = 0.0
        t0 = time.monotonic()
        err, res = c.map_fds(size, [fd])
        took = time.monotonic() - t0
        time.sleep(0.05)
        stop.set()
        th.join()
        assert err is None, err
        t0 = time.monotonic()
        uerr, _ = c.call("unmap", [{"region": res["region"]}])
        assert uerr is None, uerr
        print("map of %d GiB: %.1f ms; worst ping meanwhile %.2f ms; unmap answered in %.1f ms"
              % (size >> 30, took * 1e3, worst[0] * 1e3, (time.monotonic() - t0) * 1e3))
        os.close(fd)
    finally:
        d.stop()


if __name__ == "__main__":
    main()
