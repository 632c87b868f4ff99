#!/usr/bin/env python3
"""Paired A/B of daemon variants under one load.

Every variant's daemon is started at once and stays up; then the same short
load is run against each in turn, PAIRS times (the order reversed every other
turn). On a host whose speed drifts by tens of per cent from minute to minute,
loads taken seconds apart see the same host, so the ratio of one variant to the
first within a turn is steadier than either figure: the summary gives each
variant's median and the median and quartiles of its per-turn ratios to the
first variant. An idle daemon uses no CPU, so the daemons not under load stay
out of the way.

usage: bench/paired-ab.py [--split] BINDIR PAIRS "LOAD ARGS" VARIANT...

  --split    daemons on the first half of the CPUs, the load generator on
             the second half, so that neither takes CPU time from the other

  BINDIR     holds gpured, gpured-benchmark and gpuredctl; a variant may name
             another daemon executable there
  LOAD ARGS  gpured-benchmark's arguments, e.g. "-c 8 -P 16 -n 250000 -d 256"
  VARIANT    NAME:EXE:BACKEND[:ARGS], ARGS space-separated daemon options and
             VAR=VALUE environment settings (upper-case names), e.g.
             "one:gpured:cuda:CUDA_VISIBLE_DEVICES=0 --streams 2"

Processes run off the CPUs that take the GPUs' interrupts, as in gpu-e2e.sh;
with --split, on disjoint halves of the rest.
Prints one JSON line per variant with every figure (req/s and payload GB/s),
its p50 latencies, the load generator's own CPU time and voluntary sleeps per
request (medians), the mean batch size and the jobs each device ran; then one
summary line per variant on req/s (for one load, the same ratios as GB/s).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def irq_cpus():
    drop = set()
    with open("/proc/interrupts") as f:
        for line in f:
            if "nvidia" not in line:
                continue
            irq = line.split(":")[0].strip()
            try:
                with open("/proc/irq/%s/effective_affinity_list" % irq) as a:
                    parts = a.read().strip().split(",")
            except OSError:
                continue
            for part in parts:
                lo, _, hi = part.partition("-")
                drop.update(range(int(lo), int(hi or lo) + 1))
    return drop


def parse_variant(spec):
    fields = spec.split(":", 3)
    if len(fields) < 3:
        sys.exit("bad variant %r: want NAME:EXE:BACKEND[:ARGS]" % spec)
    name, exe, backend = fields[:3]
    toks = fields[3].split() if len(fields) > 3 else []
    env = dict(os.environ)
    args = []
    for t in toks:
        key, eq, value = t.partition("=")
        if eq and key.isupper():
            env[key] = value
        else:
            args.append(t)
    return name, exe, backend, args, env


def ctl_json(bindir, sock, what):
    out = subprocess.run([os.path.join(bindir, "gpuredctl"), "--socket", sock, what, "--json"],
                         capture_output=True, text=True).stdout
    try:
        return json.loads(out)
    except ValueError:
        return {}


def main():
    argv = sys.argv[1:]
    split = argv[:1] == ["--split"]
    if split:
        argv = argv[1:]
    if len(argv) < 4:
        sys.exit(__doc__)
    bindir, pairs, load = argv[0], int(argv[1]), argv[2].split()
    variants = [parse_variant(v) for v in argv[3:]]
    cpus = sorted(os.sched_getaffinity(0) - irq_cpus()) or sorted(os.sched_getaffinity(0))
    daemon_cpus = client_cpus = cpus
    if split and len(cpus) >= 2:
        daemon_cpus, client_cpus = cpus[:len(cpus) // 2], cpus[len(cpus) // 2:]
    os.sched_setaffinity(0, daemon_cpus)
    print(json.dumps({"daemon_cpus": daemon_cpus, "client_cpus": client_cpus}), flush=True)

    tmp = tempfile.mkdtemp(prefix="paired-ab.")
    procs = []
    try:
        for name, exe, backend, args, env in variants:
            sock = os.path.join(tmp, name + ".sock")
            log = open(os.path.join(tmp, name + ".log"), "w")
            p = subprocess.Popen([os.path.join(bindir, exe), "--socket", sock, "--config",
                                  "/dev/null", "--backend", backend] + args, stderr=log, env=env)
            procs.append((name, sock, p))
        for name, sock, p in procs:
            for _ in range(400):
                if os.path.exists(sock) or p.poll() is not None:
                    break
                time.sleep(0.025)
            if not os.path.exists(sock):
                with open(os.path.join(tmp, name + ".log")) as log:
                    sys.exit("%s did not start:\n%s" % (name, log.read()))

        vals = {name: [] for name, _, _ in procs}
        gbps = {name: [] for name, _, _ in procs}
        client = {name: [] for name, _, _ in procs}
        p50 = {name: [] for name, _, _ in procs}
        for turn in range(pairs):
            for name, sock, _ in (procs if turn % 2 == 0 else procs[::-1]):
                c = subprocess.Popen([os.path.join(bindir, "gpured-benchmark"), "-s", sock, "--json"]
                                     + load, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True,
                                     preexec_fn=lambda: os.sched_setaffinity(0, client_cpus))
                out = c.stdout.read()
                _, _, ru = os.wait4(c.pid, 0)
                c.returncode = 0
                try:
                    d = json.loads(out)
                except ValueError:
                    d = {}
                n = d.get("requests") or 0
                if n:
                    client[name].append((ru.ru_nvcsw / n, (ru.ru_utime + ru.ru_stime) * 1e6 / n))
                vals[name].append(d.get("requests_per_s"))
                gbps[name].append(d.get("payload_gb_per_s"))
                p50[name].append((d.get("latency_us") or {}).get("p50"))

        for name, sock, _ in procs:
            stats = ctl_json(bindir, sock, "stats")
            info = ctl_json(bindir, sock, "info")
            print(json.dumps({"variant": name, "load": " ".join(load), "req_per_s": vals[name],
                              "gb_per_s": gbps[name], "p50_us": p50[name],
                              "client_sleeps_per_req": round(statistics.median(x[0] for x in client[name]), 4)
                              if client[name] else None,
                              "client_cpu_us_per_req": round(statistics.median(x[1] for x in client[name]), 3)
                              if client[name] else None, "batch_mean": stats.get("batch_mean"),
                              "device_jobs": [d.get("jobs") for d in info.get("devices", [])]}),
                  flush=True)
        base = procs[0][0]
        for name, _, _ in procs:
            got = [v for v in vals[name] if v]
            ratios = [a / b for a, b in zip(vals[name], vals[base]) if a and b]
            print(json.dumps({
                "variant": name,
                "median": statistics.median(got) if got else None,
                "ratio_to_" + base: round(statistics.median(ratios), 4) if ratios else None,
                "ratio_quartiles": [round(q, 4) for q in statistics.quantiles(ratios, n=4)]
                if len(ratios) > 2 else None}), flush=True)
    finally:
        for _, _, p in procs:
            p.terminate()
        for _, _, p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
