#!/usr/bin/python3
"""A long run of one gpured under a mix of clients: small requests, pipelined
and not, large requests, shared-memory regions with map/unmap churn, clients
that hang up mid-payload, malformed input on its own connections and
stats/info polling; with --attackers, the security suite's attacks beside
them from two other uids. Every well-formed answer is checked against a
reference computed here; the daemon's RSS, descriptors and threads are
sampled every 10 s and must be flat between the end of the warm-up and the
end of the run.

Needs Debian's python3 and python3-msgpack only (and python3-numpy with
--attackers). See tests/soak/README.md.
"""

import argparse
import json
import math
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from clients import Clients
from reference import Pool, cumsum_one_tile
from wire import DTYPES, KiB, MiB, Conn, fbits


# ---------------------------------------------------------------- bookkeeping

class Soak:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.counts = {}
        self.float_exact = 0
        self.float_inexact = 0
        self.max_ulps = 0
        self.max_of_bound = 0.0
        self.float_by = {}
        self.wrong = []
        self.wrong_n = 0
        self.unexpected = []
        self.unexpected_n = 0
        self.faulted = 0
        self.stop = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.idle = 0
        self.workers = 0
        rng = random.Random(args.seed)
        self.pools = {dt: Pool(dt, rng) for dt in DTYPES}
        self.client_uid = 0

    def as_client(self):
        """In a client thread: become the legitimate clients' uid, if not root."""
        if self.client_uid:
            from attackers import become_in_this_thread
            become_in_this_thread(self.client_uid)

    def count(self, kind, n=1):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + n

    def record_wrong(self, what):
        with self.lock:
            self.wrong_n += 1
            if len(self.wrong) < 50:
                self.wrong.append(what)
        print("WRONG:", what, flush=True)

    def record_unexpected(self, what):
        with self.lock:
            self.unexpected_n += 1
            if len(self.unexpected) < 50:
                self.unexpected.append(what)
        print("UNEXPECTED:", what, flush=True)

    def check_reduce(self, kind, desc, resp, dtype, op, start, count, nan=False):
        """Check one well-formed reduce's response against the reference."""
        self.count(kind)
        err, res = resp[2], resp[3]
        pool = self.pools[dtype]
        if count == 0 and op in ("min", "max"):
            if err is None or err.get("code") != "empty":
                self.record_wrong("%s %s: min/max of nothing answered %r" % (kind, desc, resp))
            return
        if err is not None:
            if self.args.fault and err.get("code") == "internal":
                with self.lock:
                    self.faulted += 1
                return
            self.record_unexpected("%s %s: error %r" % (kind, desc, err))
            return
        if not isinstance(res, dict) or res.get("count") != count:
            self.record_wrong("%s %s: result %r, count %d wanted" % (kind, desc, res, count))
            return
        got = res["value"]
        if nan:
            if not (isinstance(got, float) and math.isnan(got)):
                self.record_wrong("%s %s: %r, NaN wanted" % (kind, desc, got))
            return
        want, tol = pool.reference(op, start, count)
        if tol is None:
            if pool.is_float or op == "sumsq":
                ok = isinstance(got, float) and fbits(got) == fbits(float(want))
            else:
                ok = isinstance(got, int) and not isinstance(got, bool) and got == want
            if not ok:
                self.record_wrong("%s %s: got %r, want %r" % (kind, desc, got, want))
            return
        if not isinstance(got, float):
            self.record_wrong("%s %s: got %r (%s), a float wanted" % (kind, desc, got, type(got).__name__))
            return
        key = "%s.%s" % (dtype, op)
        if fbits(got) == fbits(want):
            with self.lock:
                self.float_exact += 1
                self.float_by.setdefault(key, [0, 0])[0] += 1
            return
        if abs(got - want) <= tol:
            ulps = abs(got - want) / max(math.ulp(want), 2.0 ** -1074)
            with self.lock:
                self.float_inexact += 1
                self.float_by.setdefault(key, [0, 0])[1] += 1
                self.max_ulps = max(self.max_ulps, ulps)
                if tol:
                    self.max_of_bound = max(self.max_of_bound, abs(got - want) / tol)
            return
        self.record_wrong("%s %s: got %r, want %r (tolerance %g)" % (kind, desc, got, want, tol))


    def check_op(self, kind, desc, resp, pool, params, xs):
        """Check a reply of Clients.ops against the reference."""
        self.count("ops_" + kind)
        err, res = resp[2], resp[3]
        if err is not None:
            if self.args.fault and err.get("code") == "internal":
                with self.lock:
                    self.faulted += 1
                return
            self.record_unexpected("ops %s: error %r" % (desc, err))
            return
        op = params["op"]

        def same(got, want):
            if isinstance(want, float):
                return isinstance(got, float) and fbits(got) == fbits(want)
            return isinstance(got, int) and not isinstance(got, bool) and got == want

        def check(what, got, want):
            if not same(got, want):
                self.record_wrong("ops %s: %s %r, want %r" % (desc, what, got, want))
                return False
            return True

        if not isinstance(res, dict) or res.get("count") != len(xs):
            self.record_wrong("ops %s: result %r" % (desc, res))
            return
        if kind == "argm":
            v, i = pool.arg_reference(op, xs)
            if check("value", res.get("value"), v):
                check("index", res.get("index"), i)
        elif kind == "moments":
            want = pool.moments_reference(xs, params.get("ddof", 0))
            for name, w in zip(("sum", "min", "max", "mean", "var"), want):
                if not check(name, res.get(name), w):
                    break
        elif kind == "segments":
            offs = struct.unpack("<%dQ" % (len(params["offsets"]) // 8), params["offsets"])
            k = len(offs) - 1
            vals = res.get("values")
            per = {"argmin": 16, "moments": 40}.get(op, 8)
            if res.get("segments") != k or not isinstance(vals, bytes) or len(vals) != k * per:
                self.record_wrong("ops %s: %d segments, got %r" % (desc, k, {x: res.get(x) for x in res
                                                                              if x != "values"}))
                return
            vcode = "d" if pool.is_float else ("q" if pool.dtype[0] == "i" else "Q")
            for j in range(k):
                seg = xs[offs[j]:offs[j + 1]]
                rec = vals[j * per:(j + 1) * per]
                if op == "sum":
                    got, want = struct.unpack("<" + vcode, rec)[0], [pool.sum_value(seg)]
                    got = [got]
                elif op in ("min", "max"):
                    if seg:
                        want = [pool._extreme(seg, op)]
                    elif pool.is_float:
                        want = [math.inf if op == "min" else -math.inf]
                    else:
                        bits = int(pool.dtype[1:])
                        lo = -(1 << (bits - 1)) if pool.dtype[0] == "i" else 0
                        hi = (1 << (bits - 1)) - 1 if pool.dtype[0] == "i" else (1 << bits) - 1
                        want = [hi if op == "min" else lo]
                    got = [struct.unpack("<" + vcode, rec)[0]]
                elif op == "argmin":
                    got = list(struct.unpack("<" + vcode + "Q", rec))
                    if seg:
                        want = list(pool.arg_reference(op, seg))
                    else:
                        got = got[1:]
                        want = [(1 << 64) - 1]
                else:
                    got = list(struct.unpack("<" + vcode + vcode + vcode + "dd", rec))
                    if not seg:
                        # sum 0, min and max the identities; mean and var NaN
                        if not (math.isnan(got[3]) and math.isnan(got[4]) and got[0] == 0):
                            self.record_wrong("ops %s: empty segment %d: %r" % (desc, j, got))
                            return
                        continue
                    want = list(pool.moments_reference(seg, 0))
                for g, w in zip(got, want):
                    if not same(g, w):
                        self.record_wrong("ops %s: segment %d [%d, %d): %r, want %r" % (
                            desc, j, offs[j], offs[j + 1], got, want))
                        return
        else:
            vals = res.get("values")
            if not isinstance(vals, bytes) or len(vals) != 8 * len(xs):
                self.record_wrong("ops %s: values %r" % (desc, type(vals)))
                return
            if pool.is_float:
                got = struct.unpack("<%dd" % len(xs), vals)
                want = cumsum_one_tile(xs)
                for i in range(len(xs)):
                    if fbits(got[i]) != fbits(want[i]):
                        self.record_wrong("ops %s: cumsum[%d] %r, want %r" % (desc, i, got[i], want[i]))
                        return
            else:
                code = "q" if pool.dtype[0] == "i" else "Q"
                got = struct.unpack("<%d%s" % (len(xs), code), vals)
                run = 0
                for i, v in enumerate(xs):
                    run = (run + v) % (1 << 64)
                    w = run - (1 << 64) if code == "q" and run >= 1 << 63 else run
                    if got[i] != w:
                        self.record_wrong("ops %s: cumsum[%d] %r, want %r" % (desc, i, got[i], w))
                        return


# ---------------------------------------------------------------- the run

def proc_sample(pid):
    s = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                s[k.lower() + "_kib"] = int(v.split()[0])
            elif k == "Threads":
                s["threads"] = int(v)
    s["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return s


# Flatness under load: of the samples between the baseline and the final
# one, the last third's largest against the first third's, for each of
# these: at most the first's plus this fraction of it or this many,
# whichever is more.
UNDER_LOAD_BOUNDS = {"vmrss_kib": (0.05, 8 * 1024), "fds": (0.10, 16), "threads": (0.0, 1)}


def flat_under_load(samples, baseline, final):
    """The under-load flatness judgement: {"reasons": [...], key: {...}}."""
    out = {"reasons": []}
    if not baseline or not final:
        return out
    xs = [s for s in samples if baseline["t"] < s["t"] < final["t"] and "vmrss_kib" in s]
    k = len(xs) // 3
    out["samples"] = len(xs)
    if k < 3:
        out["skipped"] = "too few samples after the baseline"
        return out
    for key, (frac, slack) in UNDER_LOAD_BOUNDS.items():
        a = max(s[key] for s in xs[:k])
        b = max(s[key] for s in xs[-k:])
        bound = a + max(int(frac * a), slack)
        out[key] = {"first_third_max": a, "last_third_max": b, "bound": bound}
        if b > bound:
            out["reasons"].append("under load, %s's largest went from %d (first third) to %d (last third), "
                                  "bound %d" % (key, a, b, bound))
    return out


def daemon_stats(path):
    c = Conn(path, 10)
    try:
        return c.call("stats")[3]
    finally:
        c.close()


def worker(soak, name, fn, seed, pause_lock):
    rng = random.Random(seed)
    ok = True
    try:
        soak.as_client()
    except OSError as e:
        soak.record_unexpected("%s: could not become uid %d: %s" % (name, soak.client_uid, e))
        ok = False
    while ok and not soak.stop.is_set():
        if not soak.gate.is_set():
            with pause_lock:
                soak.idle += 1
            while not soak.gate.wait(0.2) and not soak.stop.is_set():
                pass
            with pause_lock:
                soak.idle -= 1
            continue
        try:
            fn(rng)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            if soak.stop.is_set() and isinstance(e, OSError):
                break
            soak.record_unexpected("%s: %s: %s" % (name, type(e).__name__,
                                                   traceback.format_exception_only(type(e), e)[-1].strip()))
            time.sleep(0.5)
    with pause_lock:
        soak.idle += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Arguments after -- go to the daemon.")
    ap.add_argument("--gpured", required=True, help="the daemon binary, e.g. build/daemon/gpured")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--fault", help="start the daemon with --fault SPEC; well-formed requests may then fail "
                    "with internal (counted apart). On CUDA pick launch:after=N so it trips midway")
    ap.add_argument("--warmup-minutes", type=float, default=2.0,
                    help="baseline sample for the flatness check (at most half the run)")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-seconds", type=float, default=10.0)
    ap.add_argument("--attackers", action="store_true",
                    help="beside the clients, run the security suite's attacks (tests/security) in a loop "
                    "from two attacker uids, and the clients as a third uid; needs root")
    ap.add_argument("--attacker-uids", default="60001,60002", help="with --attackers: the two attackers' uids")
    ap.add_argument("--client-uid", type=int, default=60010,
                    help="with --attackers: the legitimate clients' uid (0: root)")
    ap.add_argument("daemon_args", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()

    attacker_uids = []
    if args.attackers:
        if os.geteuid() != 0:
            sys.exit("--attackers needs root: its attackers and clients run under other uids "
                     "(setresuid); run the soak as root, or without --attackers")
        attacker_uids = [int(u) for u in args.attacker_uids.split(",")]
        if len(attacker_uids) != 2 or 0 in attacker_uids or args.client_uid in attacker_uids:
            sys.exit("--attacker-uids: two uids, neither 0 nor the clients' (%d)" % args.client_uid)
        import attackers
        attackers.load()
        if args.client_uid and not attackers.thread_uid_supported():
            sys.exit("--attackers: clients under uid %d need this machine's system call numbers; "
                     "use --client-uid 0 here" % args.client_uid)

    t0 = time.monotonic()
    soak = Soak(args)
    print("pools ready in %.1f s" % (time.monotonic() - t0), flush=True)

    if args.attackers:
        # a folder and a socket the attackers' and the clients' uids can reach
        from security_harness import reachable_tmp
        tmp = tempfile.mkdtemp(prefix="gpured-soak-", dir=reachable_tmp())
        os.chmod(tmp, 0o755)
    else:
        tmp = tempfile.mkdtemp(prefix="gpured-soak-")
    path = os.path.join(tmp, "gpured.sock")
    dargs = [args.gpured, "--socket", path, "--backend", args.backend]
    if args.attackers:
        dargs += ["--socket-mode", "0666"]
    if args.backend == "cuda" and "--route-cpu-max-bytes" not in args.daemon_args:
        dargs += ["--route-cpu-max-bytes", "0"]
    if args.fault:
        dargs += ["--fault", args.fault]
    dargs += args.daemon_args
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    env.pop("LISTEN_FDS", None)
    log = open(os.path.join(tmp, "stderr"), "w+")
    proc = subprocess.Popen(dargs, stderr=log, env=env)
    print("daemon pid %d: %s" % (proc.pid, " ".join(dargs)), flush=True)
    end = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            sys.exit("gpured exited with %d at start" % proc.returncode)
        try:
            daemon_stats(path)
            break
        except OSError:
            if time.monotonic() > end:
                sys.exit("gpured did not start listening")
            time.sleep(0.05)

    att = None
    if args.attackers:
        # forked before any thread starts; idle until resumed
        att = attackers.Attackers(path, attacker_uids, args.seed,
                                  log=lambda m: print(m, flush=True))
        if args.client_uid:
            soak.client_uid = args.client_uid
            probe = []

            def try_uid():
                try:
                    soak.as_client()
                    c = Conn(path, 10)
                    try:
                        probe.append(c.call("ping")[3])
                    finally:
                        c.close()
                except OSError as e:
                    probe.append(e)
            t = threading.Thread(target=try_uid)
            t.start()
            t.join()
            if probe != ["pong"] or os.geteuid() != 0:
                att.stop()
                proc.kill()
                sys.exit("--attackers: a client thread under uid %d: %r" % (args.client_uid, probe))
        print("attackers: uids %s; clients: uid %d%s" % (
            attacker_uids, soak.client_uid, " (root)" if not soak.client_uid else ""), flush=True)

    cl = Clients(soak, path)
    t1 = time.monotonic()
    n, nbytes = cl.prime()
    print("primed staging with %d connections of 2 x %d MiB in %.1f s: rss %d KiB" % (
        n, nbytes >> 20, time.monotonic() - t1, proc_sample(proc.pid)["vmrss_kib"]), flush=True)
    kinds = [("small", cl.small, 2), ("pipelined", cl.pipelined, 2), ("large", cl.large, 1), ("ops", cl.ops, 1),
             ("shm", cl.shm, 2), ("disconnect", cl.disconnect, 1), ("malformed", cl.malformed, 1),
             ("poll", cl.poll, 1)]
    pause_lock = threading.Lock()
    threads = []
    seed = args.seed * 1000
    for name, fn, n in kinds:
        for i in range(n):
            seed += 1
            t = threading.Thread(target=worker, args=(soak, "%s%d" % (name, i), fn, seed, pause_lock),
                                 daemon=True)
            threads.append(t)
    soak.workers = len(threads)

    samples = []
    reasons = []
    crashed = False

    def quiesce(label, attacks=None):
        """Every client idle (and with attacks, "pause" or "stop", the
        attackers too), the daemon's connections, regions and in-flight
        requests back to nothing (and no descriptor left closing): then a
        sample comparable with another."""
        soak.gate.clear()
        t_q = time.monotonic()
        if att and attacks and not att.gone:
            if not (att.pause() if attacks == "pause" else att.stop()):
                reasons.append("%s: the attackers did not %s in time" % (label, attacks))
        limit = time.monotonic() + 600
        while soak.idle < soak.workers and time.monotonic() < limit:
            time.sleep(0.1)
        st = None
        while time.monotonic() < limit:
            try:
                st = daemon_stats(path)
            except OSError as e:
                reasons.append("%s: stats failed: %r" % (label, e))
                return None
            closing = sum(u.get("closing_fds", 0) for u in st.get("users", ()))
            if st["connections"] <= 1 and st["regions"] == 0 and st["inflight"] == 0 and closing == 0:
                break
            time.sleep(0.2)
        else:
            reasons.append("%s: the daemon did not settle: %r" % (label, st))
        if proc.poll() is not None:
            return None
        time.sleep(1.0)
        s = proc_sample(proc.pid)
        s["t"] = round(time.monotonic() - start, 1)
        s["label"] = label
        s["settle_s"] = round(time.monotonic() - t_q, 1)
        print("%s sample: %s" % (label, json.dumps(s)), flush=True)
        return s

    start = time.monotonic()
    first = None
    if att:
        soak.gate.clear()
    for t in threads:
        t.start()
    if att:
        # before any attack: the daemon as the clients' priming left it
        first = quiesce("start")
        att.resume()
        soak.gate.set()
    run_s = args.minutes * 60
    warm_s = min(args.warmup_minutes * 60, run_s / 2)
    baseline = None
    next_sample = start + args.sample_seconds
    while time.monotonic() - start < run_s:
        time.sleep(max(0.0, min(next_sample, start + run_s) - time.monotonic()))
        if proc.poll() is not None:
            crashed = True
            reasons.append("the daemon exited with %d during the run" % proc.returncode)
            break
        if baseline is None and time.monotonic() - start >= warm_s:
            baseline = quiesce("baseline", "pause")
            if att:
                att.resume()
            soak.gate.set()
        if time.monotonic() >= next_sample:
            next_sample += args.sample_seconds
            s = proc_sample(proc.pid)
            try:
                st = daemon_stats(path)
                s.update({k: st[k] for k in ("connections", "regions", "requests", "errors", "batches")})
                s["fds_held"] = st["shares"]["fds"]["used"]
                s["refused"] = {k: v["refused"] for k, v in st["shares"].items() if v["refused"]}
                if att:
                    # what each user but the prober's root holds
                    s["users_held"] = {str(u["uid"]): {"connections": u["held"]["connections"],
                                                       "fds": u["held"]["fds"],
                                                       "closing_fds": u.get("closing_fds", 0),
                                                       "staging_bytes": u["held"]["staging_bytes"],
                                                       "mapped_bytes": u["held"]["mapped_bytes"]}
                                       for u in st.get("users", ()) if u["uid"] != 0}
            except (OSError, KeyError, TypeError) as e:
                s["stats_error"] = str(e)
            s["t"] = round(time.monotonic() - start, 1)
            s["phase"] = "warmup" if baseline is None else "run"
            samples.append(s)
            with soak.lock:
                done = sum(v for k, v in soak.counts.items() if "." not in k)
                wrong, unexp = soak.wrong_n, soak.unexpected_n
            extra = ""
            if att:
                runs, bad = att.runs()
                held = {u: h for u, h in s.get("users_held", {}).items() if int(u) in attacker_uids}
                extra = " | attacks ended %d (failed/killed %d), attackers hold conns %d fds %d" % (
                    runs, bad, sum(h["connections"] for h in held.values()),
                    sum(h["fds"] for h in held.values()))
            print("[%6.0fs] rss %d KiB (anon %d shmem %d) fds %d threads %d conns %s regions %s daemon-requests "
                  "%s batches %s | checked %d wrong %d unexpected %d%s" % (
                      s["t"], s.get("vmrss_kib", 0), s.get("rssanon_kib", 0), s.get("rssshmem_kib", 0),
                      s["fds"], s.get("threads", 0), s.get("connections"), s.get("regions"), s.get("requests"),
                      s.get("batches"), done, wrong, unexp, extra), flush=True)

    final = None
    if not crashed:
        final = quiesce("final", "stop")
    if att and not att.gone:
        att.stop()
    soak.stop.set()
    soak.gate.set()
    for t in threads:
        t.join(60)

    exit_code = None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            exit_code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            exit_code = proc.wait()
            reasons.append("the daemon did not exit within 30 s of SIGTERM")
    else:
        exit_code = proc.returncode
    if exit_code != 0:
        reasons.append("the daemon's exit status was %d" % exit_code)

    if soak.wrong_n:
        reasons.append("%d wrong answers" % soak.wrong_n)
    if soak.unexpected_n:
        reasons.append("%d well-formed requests or sessions failed" % soak.unexpected_n)
    if baseline and final:
        for key in ("vmrss_kib", "fds", "threads"):
            a, b = baseline[key], final[key]
            if b != a and (abs(b - a) > 0.05 * a):
                reasons.append("%s went from %d to %d" % (key, a, b))
    elif not crashed:
        reasons.append("no baseline sample (run shorter than its warm-up)")
    if first and final and final["fds"] > first["fds"]:
        reasons.append("descriptors did not come back once the attackers stopped: %d, %d before they started"
                       % (final["fds"], first["fds"]))
    under_load = flat_under_load(samples, baseline, final)
    reasons += under_load.pop("reasons")
    peak = {k: max((s[k] for s in samples if k in s), default=None) for k in ("vmrss_kib", "fds", "threads")}
    att_summary = None
    if att:
        att_summary = att.summary()
        att_summary["client_uid"] = soak.client_uid
        if att.gone and not att_summary["by_attack"]:
            reasons.append("the attackers did not run")
        for name, a in att_summary["by_attack"].items():
            if a["runs"] == 0:
                reasons.append("attack %s never ran" % name)

    log.flush()
    with open(log.name) as f:
        stderr = f.read()
    result = "FAIL" if reasons else "PASS"
    summary = {
        "result": result,
        "reasons": reasons,
        "minutes": args.minutes,
        "backend": args.backend,
        "fault": args.fault,
        "daemon_command": dargs,
        "daemon_exit_code": exit_code,
        "counts": dict(sorted(soak.counts.items())),
        "float_results": {"bit_exact": soak.float_exact, "within_tolerance": soak.float_inexact,
                          "max_ulps_off": soak.max_ulps, "max_error_over_tolerance": soak.max_of_bound,
                          "by_dtype_op": {k: {"bit_exact": v[0], "within_tolerance": v[1]}
                                          for k, v in sorted(soak.float_by.items())}},
        "faulted": soak.faulted,
        "wrong": soak.wrong_n,
        "wrong_examples": soak.wrong,
        "unexpected": soak.unexpected_n,
        "unexpected_examples": soak.unexpected,
        "start": first,
        "baseline": baseline,
        "final": final,
        "peak": peak,
        "under_load": under_load,
        "attackers": att_summary,
        "samples": samples,
        "daemon_stderr_tail": stderr[-4000:],
    }
    print(json.dumps({k: summary[k] for k in ("counts", "float_results", "faulted", "wrong", "unexpected",
                                              "start", "baseline", "final", "peak", "under_load",
                                              "daemon_exit_code")}, indent=1))
    if att_summary:
        for name, a in att_summary["by_attack"].items():
            print("attack %-16s runs %4d %s by uid %s" % (
                name, a["runs"], json.dumps(a["by_outcome"], sort_keys=True),
                json.dumps({u: v["runs"] for u, v in a["by_uid"].items()}, sort_keys=True)))
    print("%s%s" % (result, "".join("\n  " + r for r in reasons)), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    log.close()
    try:
        os.unlink(log.name)
        os.rmdir(tmp)
    except OSError:
        pass
    sys.exit(0 if result == "PASS" else 1)


if __name__ == "__main__":
    main()
