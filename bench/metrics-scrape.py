#!/usr/bin/env python3
"""Does scraping /metrics slow the daemon down? One daemon with
--metrics-listen, gpured-benchmark run against it again and again,
alternately alone and with a GET /metrics every 100 ms meanwhile; the p99
and p50 of each run and the medians of both kinds (docs/benchmarks/regions.md).

usage: bench/metrics-scrape.py BUILDDIR [ROUNDS] [-- BENCHMARK ARGS]
(default rounds 3, benchmark -c 8 -P 16 -n 300000 -d 256)
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def main():
    argv = sys.argv[1:]
    extra = ["-c", "8", "-P", "16", "-n", "300000", "-d", "256"]
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    build = argv[0]
    rounds = int(argv[1]) if len(argv) > 1 else 3

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tempfile.mkdtemp(prefix="gpured-scrape-")
    sock = os.path.join(d, "gpured.sock")
    with open(os.path.join(d, "stderr"), "w") as err:
        daemon = subprocess.Popen([os.path.join(build, "daemon/gpured"), "--socket", sock,
                                   "--backend", "cpu", "--metrics-listen", "127.0.0.1:%d" % port],
                                  stderr=err)
    url = "http://127.0.0.1:%d/metrics" % port
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except OSError:
            time.sleep(0.05)

    def scraper(stop, count):
        while not stop.is_set():
            t0 = time.monotonic()
            with urllib.request.urlopen(url, timeout=5) as r:
                r.read()
            count[0] += 1
            stop.wait(max(0.0, 0.1 - (time.monotonic() - t0)))

    def bench():
        p = subprocess.run([os.path.join(build, "bench/gpured-benchmark"), "-s", sock, *extra,
                            "--json"], capture_output=True, text=True, check=True)
        return json.loads(p.stdout)

    rows = {False: [], True: []}
    try:
        bench()  # warm-up
        for rnd in range(rounds):
            for scrape in (False, True):
                stop, count = threading.Event(), [0]
                t = threading.Thread(target=scraper, args=(stop, count))
                if scrape:
                    t.start()
                r = bench()
                stop.set()
                if scrape:
                    t.join()
                lat = r["latency_us"]
                rows[scrape].append((lat["p99"], lat["p50"]))
                print("%d %-9s p99 %8.1f us  p50 %6.1f us  %7.0f req/s  %d scrapes" %
                      (rnd, "scraped" if scrape else "alone", lat["p99"], lat["p50"],
                       r["requests_per_s"], count[0]), flush=True)
    finally:
        daemon.terminate()
        daemon.wait()
    for i, what in ((0, "p99"), (1, "p50")):
        a = statistics.median(x[i] for x in rows[False])
        b = statistics.median(x[i] for x in rows[True])
        print("median %s: alone %.1f us, scraped %.1f us, ratio %.3f" % (what, a, b, b / a))


if __name__ == "__main__":
    main()
